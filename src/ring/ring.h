/*
 * ring.h -- the consistent-hash ring (Karger et al. 1997) in the fixed scheme
 * of ARCHITECTURE.md: a backend NAME with round(vnodes * weight) points, point
 * i at MD5("NAME#i") read big-endian (first 8 bytes), a key at MD5(key), the
 * owner being the first point at or after the key, wrapping. Or, with
 * another [ring] scheme, the ring another proxy builds (ring-compat.h):
 * its points and its key hash, on the same 64-bit circle, so that lookup,
 * walk, shares, diffs and warm ramps are the same code for every scheme.
 *
 * Pure: no I/O, no locks; the only state outside a ring is each thread's
 * MD5 context (md5.c). A built ring is immutable and may be read by any
 * number of threads at once.
 */
#ifndef RINGPROXY_RING_H
#define RINGPROXY_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "ring/ring-t.h"

/* The position of a key: first 8 bytes of MD5(key) read big-endian.
 * Thread-safe; allocation-free on a thread that has its digest state
 * (md5.h: workers are given theirs; another thread makes its own on the
 * first call, or beforehand with md5_thread_init to see an error). */
uint64_t ring_hash(const void *key, size_t len);
/* The same for a key given as n pieces v[] one after the other: the
 * position of their concatenation, whatever its length, without copying
 * it anywhere. */
uint64_t ring_hash_parts(const struct iovec *v, size_t n);
/* The position as ring_hash_parts gives it (the digest's first 8 bytes,
 * the fixed scheme) and, in *u, its last 8 bytes read the same way: a
 * value uniform over [0, 2^64) that says nothing of the position, which
 * a warm ramp (below) reads as the key's place in its window, u / 2^64.
 * One digest for both. u may be NULL. */
uint64_t ring_hash_parts2(const struct iovec *v, size_t n, uint64_t *u);
uint64_t ring_hash2(const void *key, size_t len, uint64_t *u);

/* The position of a key given as n pieces v[] one after the other under
 * scheme s: the fixed scheme's (ring_hash_parts2), or the scheme's own key
 * hash (ring-compat.h) of their concatenation. *u, unless NULL, gets the
 * ramp value of ring_hash_parts2 whatever the scheme (MD5 of the key), so
 * pass NULL when no warm ramp runs: a compat scheme then hashes once.
 * Thread-safe, and allocation-free unless a key of several pieces under a
 * compat scheme is longer than RING_KEY_JOIN bytes. */
uint64_t ring_key_pos(enum ring_scheme s, const struct iovec *v, size_t n, uint64_t *u);
#define RING_KEY_JOIN 4096

/* "ringproxy", "nginx", ... as [ring] scheme writes it. */
const char *ring_scheme_name(enum ring_scheme s);
/* Whether this build has scheme s's builder. */
int ring_scheme_built(enum ring_scheme s);

/* The number of points a backend of weight w gets: round(vnodes * w). */
uint32_t ring_points_for(unsigned vnodes, double weight);

/* Build a ring from n members under scheme s. Names must be non-empty and
 * distinct (the name is what the rest of ringproxy knows a backend by);
 * weights finite and >= 0. The fixed scheme's identity is the name, with
 * round(vnodes x weight) points each; vnodes 0 (or all weights 0) gives a
 * ring without points. A compat scheme ignores vnodes: its builder
 * (ring-compat.h) makes the points from the members' ids, and they are
 * sorted by position, ties in the builder's order, equal neighbours
 * collapsed to the first, as nginx does. Returns NULL on error with a
 * message in err (e.g. "ring would have 3000000 points, more than the
 * limit of 2097152; lower vnodes or the weights"). The caller owns the
 * result: ring_free(). */
struct ring *ring_build(const struct ring_member *members, size_t n, enum ring_scheme s,
			unsigned vnodes, char *err, size_t errlen);
/* The same ring, built knowing prev (NULL: none), the ring it replaces:
 * under the fixed scheme a backend of prev with the same name and point
 * count has the same points, which are taken from prev instead of hashed
 * again, so a reload pays for the backends it changes. The result is the
 * one ring_build gives, point for point. A compat scheme builds from
 * scratch (its points depend on the others': ketama's and Envoy's counts
 * on the total weight, the collapse of equal points on who else is
 * there). prev is only read. */
struct ring *ring_build_from(const struct ring *prev, const struct ring_member *members, size_t n,
			     enum ring_scheme scheme, unsigned vnodes, char *err, size_t errlen);
void ring_free(struct ring *r);

/* Index into r->points of the owner point for position pos, or -1 when the
 * ring has no points (every backend drained). O(log npoints). */
long ring_lookup_point(const struct ring *r, uint64_t pos);

/* Backend index owning pos, or -1 when the ring has no points. */
int ring_lookup(const struct ring *r, uint64_t pos);

void ring_walk_init(struct ring_walk *w, const struct ring *r, uint64_t pos);
/* Next distinct backend index, or -1 once every backend with points has
 * been yielded. */
int ring_walk_next(struct ring_walk *w);
/* Count backend b as visited: the walk will not yield it (a request that
 * went there first and failed goes on to the others). b need not have
 * points in w's ring. */
void ring_walk_skip(struct ring_walk *w, int b);

/*
 * A warm ramp: after a membership change a key whose owner changed keeps
 * going to its previous owner until its own moment of the window, start +
 * span * u / 2^64 (u from ring_hash2), so the new owner fills gradually
 * instead of taking all its misses at once. Each key switches once and
 * never back, and any process with the same rings and start switches the
 * same keys at the same point of the window.
 *
 * The previous assignment may itself have been ramping when the change
 * came: a ramp is then a chain of steps, step 0 the current ring, each
 * step's previous assignment being the next step as it stood when step
 * began (frozen there: the older ramp stops where it had got to, so a
 * key changes owner at most once per ramp). The last step is a plain ring.
 * Backends are matched by name: map[] turns a step's backend index into
 * the current ring's (-1: not in the current file).
 */
struct ring_ramp {
	const struct ring *ring;
	const int32_t *map;     /* NULL = the identity (step 0) */
	int64_t start_ms;       /* when the change to this ring was made */
	uint64_t span_ms;       /* its window; unused for the last step */
};

/* Whether a key with value u has switched to step st's ring at now_ms. */
int ring_ramp_switched(const struct ring_ramp *st, uint64_t u, int64_t now_ms);

/* When it does: start_ms + span_ms x u / 2^64, rounded up, the first
 * millisecond at which ring_ramp_switched says so. */
int64_t ring_ramp_moment(const struct ring_ramp *st, uint64_t u);

/* The owner of the key at pos (u its ramp value) at now_ms under the n
 * steps st[] (n >= 1): an index of st[0].ring's backends, or -1 when
 * st[0].ring has no points. That is the key's previous owner while the
 * key is held back, its owner in st[0].ring once it switched, and at once
 * when the previous owner is in no backend of the current file (removed:
 * nothing to ramp from). prev, unless NULL, gets the previous owner
 * (-1 when not in the current file, or with n = 1), held or not. Pure. */
int ring_ramp_owner(const struct ring_ramp *st, size_t n, uint64_t pos, uint64_t u,
		    int64_t now_ms, int *prev);
/* The same when the steps' rings place the key at different positions (a
 * reload changed [ring] scheme or key): pos[i] is its position in
 * st[i].ring, for i < n. */
int ring_ramp_owner_at(const struct ring_ramp *st, size_t n, const uint64_t *pos, uint64_t u,
		       int64_t now_ms, int *prev);

/* Each backend's exact share of the 2^64 keyspace: the sum of the arcs
 * (previous point, own point] it owns. share[i] for i < r->nbackends, each
 * in [0, 1], summing to 1 (or all 0 for an empty ring). A single point owns
 * the whole circle. Exact up to the final conversion to double. Summed
 * when the ring is built (r->share): this copies them. */
void ring_shares(const struct ring *r, double *share);

/*
 * Replicas (Dynamo's preference list, DeCandia et al. 2007): a key's list
 * is the first n distinct backends of its walk, the owner first. Every
 * key of an arc (previous point, point] has the same list, the walk from
 * that point, so shares and changes of lists are exact sums of arcs too.
 */
#define RING_LIST_MAX 16

/* The key at pos's list: its first n (<= RING_LIST_MAX) distinct
 * backends into list[], owner first; returns how many (fewer when fewer
 * backends have points; 0 for a ring without points). Pure, no
 * allocation. */
unsigned ring_list(const struct ring *r, uint64_t pos, int *list, unsigned n);

/* Each backend's exact share of the keyspace whose list of n it heads
 * (primary[], ring_shares's figure) and whose list it is in after the
 * head (replica[]), r->nbackends entries each: primary sums to 1, primary
 * + replica to the list's length (n, or fewer backends). 0, or -1 on no
 * memory. */
int ring_list_shares(const struct ring *r, unsigned n, double *primary, double *replica);

/* The fraction of keys whose list changes any member (as a set of names)
 * from a's list of na to b's of nb (a longer list is a change: its new
 * member has to fill): exact over the union of both rings' boundaries;
 * for rings of two schemes, the expectation for independent positions,
 * as ring_diff has it (1 - the sum over lists L of share_a(L)
 * share_b(L)). -1 on no memory. */
double ring_list_moved(const struct ring *a, unsigned na, const struct ring *b, unsigned nb);
/* Whether one key's list, of na at pa in a and of nb at pb in b, changes
 * a member (names compared). */
bool ring_list_changed(const struct ring *a, uint64_t pa, unsigned na, const struct ring *b,
		       uint64_t pb, unsigned nb);

/* Movement between two rings whose backends are matched by name. */
struct ring_flow {
	const char *from;       /* name in a (borrowed from the ring) */
	const char *to;         /* name in b */
	double share;           /* fraction of the keyspace */
};

struct ring_diff {
	double moved_share;     /* fraction of the keyspace whose owner changes */
	struct ring_flow *flows;/* sorted by share, largest first */
	size_t nflows;
};

/* Exact diff: sweeps the union of both rings' boundaries. Returns 0, or -1
 * on allocation failure. The caller frees with ring_diff_free(). Rings with
 * no points: every key of the other ring counts as moved to/from "" (none).
 * Rings of two schemes place a key by two unrelated hashes of it, so there
 * is no common keyspace to sweep: a key keeps its owner b with probability
 * share_a(b) x share_b(b), and the diff is that expectation (a flow x -> y
 * is share_a(x) x share_b(y)), exact for keys whose two positions are
 * independent, which is what the two hashes give. */
int ring_diff(const struct ring *a, const struct ring *b, struct ring_diff *d);
void ring_diff_free(struct ring_diff *d);

/* A run of the keyspace: the keys in (start, end], wrapping past 2^64 - 1
 * when start >= end (start == end: the whole circle). */
struct ring_arc {
	uint64_t start, end;
};

/* The arcs of keys whose owner changes from a to b, adjacent segments
 * merged, in keyspace order, at most max of them (the rest are left out:
 * for a picture, not for counting). Returns their number with the array
 * in *arcs (the caller frees it; NULL when none), or -1 on no memory.
 * Rings of two schemes have no arcs in common: 0. */
long ring_moved_arcs(const struct ring *a, const struct ring *b, size_t max, struct ring_arc **arcs);
/* For each backend of from, the index of the backend of the same name in
 * to, or -1. NULL when memory ran out; the caller frees the array. */
int32_t *ring_map(const struct ring *from, const struct ring *to);

/* The ring's fingerprint: FNV-1a 64 over its scheme and every point
 * (position, owner's name, owner's weight) in ring order, so two rings
 * with the same fingerprint place every key alike, whatever the order
 * their backends were listed in. Proxies of a fleet compare it
 * (ringproxy(7), DISCOVERY). Pure; O(points). */
uint64_t ring_fingerprint(const struct ring *r);

#endif
