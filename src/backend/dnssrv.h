/*
 * dnssrv.h -- [discovery] srv: the SRV names asked every interval on the
 * main thread's event base (c-ares, never blocking), each round's answer
 * handed to the rules of config/discover.h. Main thread only.
 */
#ifndef RINGPROXY_DNSSRV_H
#define RINGPROXY_DNSSRV_H

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct conf;
struct discover;
struct dnssrv;

/* A round ended (a good answer or a failure, already given to the rules
 * d): the caller looks at what is due. */
typedef void dnssrv_round_fn(void *arg);

/* Start polling c's [discovery] srv names into d; the first poll at
 * once. NULL with err when c-ares cannot be set up (the resolver
 * refused, out of memory). d and arg outlive the result. */
struct dnssrv *dnssrv_new(struct event_base *base, const struct conf *c, struct discover *d,
			  dnssrv_round_fn *done, void *arg, char *err, size_t len);

/* A reload's config: new names, resolver or interval take effect with
 * the next poll (a round in progress is dropped when the resolver
 * changes). 0, or -1 with err (the old settings go on). */
int dnssrv_configure(struct dnssrv *s, const struct conf *c, char *err, size_t len);

/* Poll now (a failed connect to a discovered backend, or a test): 0, or
 * -1 when a round is in progress already. */
int dnssrv_poll_now(struct dnssrv *s);

/* What the stats show of the poller. */
struct dnssrv_info {
	uint64_t rounds;                /* polls made */
	uint64_t last_round_us;         /* the last round's time from its
					   first query to its last answer */
	uint32_t ttl;                   /* the smallest TTL of the last good
					   answer (s) */
	uint64_t interval_ms;           /* the time between polls now */
	size_t targets;                 /* in the last good answer */
	int tcp;                        /* the last answer came over TCP
					   (truncated over UDP) */
};
void dnssrv_info(const struct dnssrv *s, struct dnssrv_info *out);

/* The members on the ring (d's in_ring) to path, atomically (a
 * temporary file beside it, fsync, rename): a restart while the DNS is
 * down starts with them. 0, or -1 with err. */
int dnssrv_save(const struct discover *d, const char *path, char *err, size_t len);
/* Seed d with the members path holds (none when it does not exist). 0,
 * or -1 with "FILE:LINE: what" in err. */
int dnssrv_load(struct discover *d, const char *path, char *err, size_t len);

/* The SRV names as written in [discovery] srv. */
const char *dnssrv_names(const struct dnssrv *s);

/* NULL is a no-op. Queries in flight are cancelled. */
void dnssrv_free(struct dnssrv *s);

#endif
