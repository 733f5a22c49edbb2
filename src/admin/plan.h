/*
 * plan.h -- `ringproxy plan`: the operator's what-if tool. For one config,
 * each backend's points and exact share of the keyspace (and of a key list);
 * for two, what is added, removed and changed, the exact share of keys that
 * move and where they go. Runs on the main thread of a short-lived process.
 */
#ifndef RINGPROXY_PLAN_H
#define RINGPROXY_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "config/conf.h"
#include "ring/ring.h"

/* A list of key positions, in file order. */
struct plan_keys {
	uint64_t *pos;          /* under the first scheme and key mode */
	uint64_t *pos2;         /* under the second, when there is one that
				   keys differently; else NULL */
	uint64_t *u;            /* each key's ramp value (ring_hash2) under
				   the last mode; NULL when not read from a
				   file */
	uint64_t *count;        /* likewise; 1 for a line without a count */
	size_t n;
	char *lines;            /* with lines kept: line i at lines + off[i] */
	size_t *off;
	size_t lines_len;
};

/* PLAN_RAW as a key mode: a line is the key, hashed as written. */
#define PLAN_RAW (-1)

/*
 * Read FILE (one per line, "\r\n" tolerated; "-" = stdin). A line may end
 * in a request count after a space or tab ("KEY COUNT": a request target
 * never holds one); the count is then not part of the key. Under a key
 * mode (enum conf_key) a line is a request target, origin form ("/p?q")
 * or absolute ("http://host/p?q"), keyed as the proxy keys a request for
 * it (explain_target_parse); empty lines are skipped, and a line that is
 * not a target is an error naming FILE:LINE. Under PLAN_RAW it is hashed
 * as written. Positions are scheme1's (enum ring_scheme) for mode1's
 * keys, their queries normalised by q1 (NULL: as sent); scheme2, mode2
 * (PLAN_RAW or a mode; the same as the first when there is one file) and
 * q2 fill pos2 when they key differently. keep: keep the lines
 * (for --per-key). progress: a counter on stderr. 0, or -1 with err.
 */
int plan_keys_read(struct plan_keys *k, const char *path, int scheme1, int mode1, const struct query_rules *q1,
		   int scheme2, int mode2, const struct query_rules *q2, int keep, int progress, char *err,
		   size_t errlen);
void plan_keys_free(struct plan_keys *k);

/*
 * Assign every key to a backend index of r: the ring owner, or with c > 0
 * the bounded-loads simulation: keys taken in order, a backend accepts
 * while its count is below ceil(c * K * w / W) (K keys, w its weight, W the
 * total weight), else the key walks clockwise to the next distinct backend
 * with room. out[i] is -1 only for an empty ring. counts[b] gets the keys
 * per backend (r->nbackends entries).
 */
void plan_assign(const struct ring *r, const struct plan_keys *k, double c,
		 int32_t *out, uint64_t *counts);

/*
 * Expected origin misses after a membership change, minute by minute: n
 * moved keys, key i requested count[i] times over period_ms (a Poisson
 * stream of that rate) and switching to its new owner at_ms[i] after the
 * change (at_ms NULL: all at once, no ramp). A moved key misses once, at
 * its first request after it switches (its new owner does not have it;
 * its previous owner did). rows[m] gets the expected misses in minute m
 * + 1, [m, m + 1) minutes after the change, for m < minutes; *later those
 * after the last row, *total all of them (the keys ever requested). Pure.
 */
void plan_miss_curve(const uint64_t *count, const uint64_t *at_ms, size_t n, uint64_t period_ms,
		     size_t minutes, double *rows, double *later, double *total);

/* Build the ring of a config; NULL with err on failure. */
struct ring *plan_ring(const struct conf *c, char *err, size_t errlen);

/* Print the table of one loaded config (points, exact share), as -t does.
 * Returns 0, or -1 if the ring cannot be built (message on stderr). */
int plan_print_conf(const struct conf *c, FILE *out);

/* A one-line summary of what changes between two loaded configs and their
 * rings, for the reload log: "+cache-8; 11.800% of keys moved, all to
 * cache-8". Backends added (+), removed (-), reweighted (~) and given a new
 * URL (@, which moves nothing); the exact moved share and the largest
 * flows. *moved gets the moved share. Returns 0, or -1 on no memory. */
int plan_summary(const struct conf *a, const struct ring *ra,
		 const struct conf *b, const struct ring *rb,
		 char *out, size_t len, double *moved);

/* The largest flows of d, appended to out (cut to len) as plan_summary
 * writes them: ", all to cache-8", or ": cache-1 -> cache-2 4.100%, ...". */
void plan_flows(const struct ring_diff *d, char *out, size_t len);

/* The whole subcommand: argv[0] is "plan". Returns the exit status:
 * 0 done, 1 bad input (config or key file), 2 usage,
 * 3 the ring moved a key between two unchanged backends (a bug), 4 with
 * --probe a new backend did not answer as expected. */
int plan_main(int argc, char **argv, FILE *out);

#endif
