/*
 * explain.h -- "where does this URL go, and why": the key a request
 * target hashes to under a [ring] key mode (key_parts, the request path's
 * own function, on a target parsed by http1.c), and what the walk of that
 * key would do now: the owner, each distinct backend with whether it
 * would take the request and why not, the backend it would go to, and
 * what the hot-object cache holds. For the admin listener's /ring?key= and
 * ?url= (main thread) and `ringproxy plan --keys`. Reads shared state,
 * writes none: nothing is counted, no slot or trial is taken.
 */
#ifndef RINGPROXY_EXPLAIN_H
#define RINGPROXY_EXPLAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/balance.h"
#include "cache/cache.h"
#include "http/http1.h"
#include "http/query.h"
#include "backend/snapshot.h"

/* Distinct backends listed at most (the walk is read on to the target). */
#define EXPLAIN_MAX_WALK 64

/* A request target parsed as a client's GET would be, and its key. The
 * buffer is reused from call to call: zero the struct once, free it with
 * explain_target_free. */
struct explain_target {
	char *buf;                      /* the request head, then the key */
	size_t cap;
	struct http1_msg msg;           /* slices of buf */
	struct query_sent sent;         /* msg's target as given, when the
					   query rules rewrote it */
	struct http1_header hdrs[4];
	const char *key;                /* the key hashed: in buf */
	size_t keylen;
	uint64_t pos;                   /* its position on the ring */
	uint64_t u;                     /* its ramp value (ring_hash2) */
};

/*
 * Key target[0..len) (origin form "/p?q" or absolute form
 * "http://host/p?q") under mode (enum conf_key) exactly as the request
 * path keys a request with that target, its position that of a ring of
 * scheme (enum ring_scheme); its query normalised by q first (NULL: as
 * sent), as the request path does, t->msg then holding the normalised
 * target. host (NULL: none) is the Host
 * header sent with an origin-form target, which the cache key uses.
 * 0, or -1 with err when the target is not one a client could send.
 */
int explain_target_parse(struct explain_target *t, int scheme, int mode, const struct query_rules *q,
			 const char *target, size_t len, const char *host, char *err, size_t errlen);
void explain_target_free(struct explain_target *t);

/* What a request with a key would meet now. */
struct explain {
	const char *key;                /* borrowed */
	size_t keylen;
	uint64_t pos;
	int owner;                      /* backend index; -1: empty ring */
	int target;                     /* where it would go; -1: nowhere (503) */
	int order[EXPLAIN_MAX_WALK];    /* the walk's first n distinct backends */
	struct balance_why why[EXPLAIN_MAX_WALK];
	int n;
	int nlist;                      /* [ring] replicas: order[0..nlist)
					   is the key's preference list */
	/* a warm ramp (s->ramp) in progress that moved this key: its
	 * previous owner, held while the key has not reached its moment of
	 * the window and that backend would take it (balance_next asks it
	 * first); -1 when no ramp moved the key */
	int ramp_prev;
	bool ramp_held;                 /* not switched yet: the previous
					   owner is asked first */
	int64_t ramp_switch_in_ms;      /* until the key switches (held) */
	struct balance_why held_why;    /* the previous owner's verdict */
	bool ramp_target;               /* the target is the held owner */
	/* the cache: known only with a cache and a cache key */
	bool cache_known;
	/* what it was asked for: a target (url=), with a host (its own, or
	 * host=); a key alone has neither */
	bool by_url, has_host;
	struct cache_peek peek;
};

/* Explain key[0..len) (borrowed by e) on snapshot s, listing walk
 * backends at most (1..EXPLAIN_MAX_WALK). cache and ckey may be NULL: the
 * cache's answer is then unknown. A warm ramp in progress is read at
 * registry_now_ms(), as balance_next reads it. */
void explain_key(struct explain *e, const struct snapshot *s, const char *key, size_t len,
		 int walk, const struct cache *cache, const struct cache_key *ckey, int64_t now);
/* The same for the key of target t (parsed under s's [ring] scheme and
 * key; borrowed by e): a warm ramp from a ring of another scheme or key
 * places it as the request path would (key_ramp). */
void explain_url(struct explain *e, const struct snapshot *s, const struct explain_target *t, int walk,
		 const struct cache *cache, const struct cache_key *ckey, int64_t now);

/* Why a backend would not take it, in words ("" when it would). */
void explain_why_text(const struct balance_why *w, const struct snapshot *s, int i,
		      char *out, size_t len);

struct evbuffer;
/* e as JSON (one object, newline-terminated) or as text for people. */
void explain_json(const struct explain *e, const struct snapshot *s, struct evbuffer *out);
void explain_text(const struct explain *e, const struct snapshot *s, struct evbuffer *out);

#endif
