/*
 * test-ring.c -- ring.c against known answers and properties.
 *
 * The hash vectors, the small ring's points and arcs and the golden owner
 * table were computed with an independent Python implementation of the
 * scheme (hashlib.md5, bisect) and pasted here, so the C code is checked
 * against something it shares no code with. The property tests run over
 * random memberships from a seeded PRNG, so every run sees the same rings.
 */
#include "ring/ring.h"
#include "tap.h"

#include <math.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* splitmix64: deterministic and good enough to scatter keys. */
static uint64_t test_rng = 0x5eed2026;

static uint64_t test_rand(void)
{
	uint64_t z = (test_rng += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static uint64_t test_key(char *buf, size_t len)
{
	int n = snprintf(buf, len, "/thumbs/%u/%u_200x200.jpg",
			 (unsigned)(test_rand() % 100000),
			 (unsigned)(test_rand() % 100000));

	return ring_hash(buf, (size_t)n);
}

static const char *test_owner(const struct ring *r, uint64_t pos)
{
	int b = ring_lookup(r, pos);

	return b < 0 ? "" : r->names[b];
}

static struct ring *test_build(const struct ring_member *m, size_t n,
			       unsigned vnodes)
{
	char err[256] = "";
	struct ring *r = ring_build(m, n, RING_SCHEME_RINGPROXY, vnodes, err, sizeof(err));

	if (r == NULL)
		tap_diag("ring_build failed: %s", err);
	return r;
}

/* Allocation failure on demand. This program is linked with --wrap for
 * the allocators (tests/unit/meson.build), so each malloc, calloc, realloc
 * and strdup of ring.c, md5.c and this file comes here first: with
 * test_fail_in = n the n-th one from now returns NULL. OpenSSL's own
 * allocations are not wrapped (a shared library, whose hook below calls
 * the real allocators). */
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);

static atomic_long test_fail_in = -1;

static int test_fail_now(void)
{
	long n = atomic_load(&test_fail_in);

	while (n > 0 && !atomic_compare_exchange_weak(&test_fail_in, &n, n - 1))
		;
	return n == 1;
}

void *__wrap_malloc(size_t n)
{
	return test_fail_now() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
	return test_fail_now() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
	return test_fail_now() ? NULL : __real_realloc(p, n);
}

char *__wrap_strdup(const char *s)
{
	return test_fail_now() ? NULL : __real_strdup(s);
}

/* OpenSSL's allocations, counted through its own hook, to check that
 * ring_hash() reuses its per-thread context instead of allocating. They
 * go to the real allocators: failures are for our code. */
static atomic_long test_allocs;

static void *test_malloc(size_t n, const char *file, int line)
{
	atomic_fetch_add(&test_allocs, 1);
	return __real_malloc(n);
}

static void *test_realloc(void *p, size_t n, const char *file, int line)
{
	atomic_fetch_add(&test_allocs, 1);
	return __real_realloc(p, n);
}

static void test_free(void *p, const char *file, int line)
{
	free(p);
}

static void test_no_alloc(void)
{
	long before;

	(void)ring_hash("warm", 4);
	before = atomic_load(&test_allocs);
	for (int i = 0; i < 1000; i++)
		(void)ring_hash("/thumbs/a.jpg", 13);
	tap_is_int(atomic_load(&test_allocs) - before, 0,
		   "ring_hash allocates nothing after the first call");
}

/* ---- known answers ---- */

static void test_vectors(void)
{
	static const struct { const char *s; uint64_t want; } v[] = {
		{ "cache-1#0", UINT64_C(0xcd8c6ec6a2041049) },
		{ "/thumbs/a.jpg", UINT64_C(0x891222b3fb75ea9d) },
		{ "", UINT64_C(0xd41d8cd98f00b204) },
		{ "a", UINT64_C(0x0cc175b9c0f1b6a8) },
		{ "cache-2#159", UINT64_C(0xe172a729bb0b51ac) },
		{ "/thumbs/1234/5678_200x200.jpg", UINT64_C(0x75a6f076f46dcbb1) },
	};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		uint64_t got = ring_hash(v[i].s, strlen(v[i].s));

		if (!tap_ok(got == v[i].want, "ring_hash(\"%s\")", v[i].s))
			tap_diag("  got %016llx want %016llx",
				 (unsigned long long)got,
				 (unsigned long long)v[i].want);
	}
}

static void test_points_for(void)
{
	tap_is_int(ring_points_for(160, 1.0), 160, "160 x 1 = 160 points");
	tap_is_int(ring_points_for(160, 0.5), 80, "160 x 0.5 = 80 points");
	tap_is_int(ring_points_for(1, 0.5), 1, "0.5 rounds away from zero");
	tap_is_int(ring_points_for(1, 2.5), 3, "2.5 rounds to 3, not to even");
	tap_is_int(ring_points_for(3, 0.5), 2, "1.5 rounds to 2");
	tap_is_int(ring_points_for(1, 0.49), 0, "0.49 rounds down");
	tap_is_int(ring_points_for(160, 0.0), 0, "weight 0 has no points");
	tap_is_int(ring_points_for(160, NAN), 0, "NaN weight has no points");
	tap_is_int(ring_points_for(160, -1.0), 0, "negative weight has no points");
	tap_is_int(ring_points_for(1000, 1e30), UINT32_MAX,
		   "huge weight saturates");
}

/* Three backends, two points each. Sorted points and arcs from Python:
 *   0x0dec7a13ef509be2 c
 *   0x1e592305e03a00d9 b
 *   0x300103d1a3bbf95a b
 *   0x5453077ed8f5377a a
 *   0xbb08a5978440bb5d c
 *   0xd83aa185673598ca a
 * Arc sums: a 4720897876005100429, b 2455739144692522360,
 *           c 11270107053011928827. */
static void test_small_ring(void)
{
	static const struct ring_member m[] = {
		{ "a", 1, NULL }, { "b", 1, NULL }, { "c", 1, NULL },
	};
	static const struct { uint64_t pos; const char *name; } pts[] = {
		{ UINT64_C(0x0dec7a13ef509be2), "c" },
		{ UINT64_C(0x1e592305e03a00d9), "b" },
		{ UINT64_C(0x300103d1a3bbf95a), "b" },
		{ UINT64_C(0x5453077ed8f5377a), "a" },
		{ UINT64_C(0xbb08a5978440bb5d), "c" },
		{ UINT64_C(0xd83aa185673598ca), "a" },
	};
	/* One key per arc, the last past the final point so it wraps. */
	static const struct { const char *key; const char *owner; } keys[] = {
		{ "key-12", "c" },  /* 0x09e7..., before the first point */
		{ "key-17", "b" },  /* 0x17c3... */
		{ "key-1", "b" },   /* 0x21af... */
		{ "key-7", "a" },   /* 0x429e... */
		{ "key-0", "c" },   /* 0xb442... */
		{ "key-2", "a" },   /* 0xbcca... */
		{ "key-13", "c" },  /* 0xedca..., wraps to point 0 */
	};
	static const double want_share[] = {
		4720897876005100429.0 / 18446744073709551616.0,
		2455739144692522360.0 / 18446744073709551616.0,
		11270107053011928827.0 / 18446744073709551616.0,
	};
	struct ring *r = test_build(m, 3, 2);
	int ok = 1;
	double share[3];

	if (!tap_ok(r != NULL && r->npoints == 6, "small ring has 6 points"))
		goto out;
	for (size_t i = 0; i < 6; i++)
		ok &= r->points[i].pos == pts[i].pos &&
		      strcmp(r->names[r->points[i].backend], pts[i].name) == 0;
	tap_ok(ok, "small ring points sorted as computed by hand");
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		tap_is_str(test_owner(r, ring_hash(keys[i].key,
						   strlen(keys[i].key))),
			   keys[i].owner, "%s is owned by %s", keys[i].key,
			   keys[i].owner);
	tap_is_int(ring_lookup_point(r, pts[3].pos), 3,
		   "a key exactly on a point is owned by that point");
	tap_is_int(ring_lookup_point(r, pts[3].pos + 1), 4,
		   "one past a point belongs to the next");
	tap_is_int(ring_lookup_point(r, UINT64_MAX), 0, "2^64-1 wraps to point 0");
	tap_is_int(ring_lookup_point(r, 0), 0, "position 0 goes to point 0");
	ring_shares(r, share);
	ok = 1;
	for (size_t i = 0; i < 3; i++)
		ok &= fabs(share[i] - want_share[i]) < 1e-15;
	if (!tap_ok(ok, "small ring shares equal the hand-computed arcs"))
		tap_diag("  got %.17g %.17g %.17g", share[0], share[1], share[2]);
out:
	ring_free(r);
}

/* cache-1..5, vnodes 160, weights 1 1 1 2 0.5: owners from the Python
 * reference implementation (880 points). */
static void test_golden(void)
{
	static const struct ring_member m[] = {
		{ "cache-1", 1, NULL }, { "cache-2", 1, NULL }, { "cache-3", 1, NULL },
		{ "cache-4", 2, NULL }, { "cache-5", 0.5, NULL },
	};
	static const struct { const char *key, *owner; } g[] = {
		{ "/thumbs/0/0_200x200.jpg", "cache-4" },
		{ "/thumbs/7919/1_200x200.jpg", "cache-4" },
		{ "/thumbs/5831/2_200x200.jpg", "cache-5" },
		{ "/thumbs/3743/3_200x200.jpg", "cache-4" },
		{ "/thumbs/1655/4_200x200.jpg", "cache-3" },
		{ "/thumbs/9574/5_200x200.jpg", "cache-3" },
		{ "/thumbs/7486/6_200x200.jpg", "cache-4" },
		{ "/thumbs/5398/7_200x200.jpg", "cache-1" },
		{ "/thumbs/3310/8_200x200.jpg", "cache-2" },
		{ "/thumbs/1222/9_200x200.jpg", "cache-2" },
		{ "/thumbs/9141/10_200x200.jpg", "cache-1" },
		{ "/thumbs/7053/11_200x200.jpg", "cache-1" },
		{ "/thumbs/4965/12_200x200.jpg", "cache-1" },
		{ "/thumbs/2877/13_200x200.jpg", "cache-2" },
		{ "/thumbs/789/14_200x200.jpg", "cache-4" },
		{ "/thumbs/8708/15_200x200.jpg", "cache-4" },
		{ "/thumbs/6620/16_200x200.jpg", "cache-5" },
		{ "/thumbs/4532/17_200x200.jpg", "cache-4" },
		{ "/thumbs/2444/18_200x200.jpg", "cache-1" },
		{ "/thumbs/356/19_200x200.jpg", "cache-4" },
	};
	struct ring *r = test_build(m, 5, 160);
	int bad = 0;

	if (!tap_ok(r != NULL && r->npoints == 880, "golden ring has 880 points"))
		goto out;
	for (size_t i = 0; i < sizeof(g) / sizeof(g[0]); i++) {
		const char *got = test_owner(r, ring_hash(g[i].key,
							  strlen(g[i].key)));

		if (strcmp(got, g[i].owner) != 0) {
			tap_diag("  %s: got %s want %s", g[i].key, got,
				 g[i].owner);
			bad++;
		}
	}
	tap_is_int(bad, 0, "golden table: 20 keys owned as the Python reference says");
out:
	ring_free(r);
}

/* ---- errors and edge cases ---- */

static void test_refused(const struct ring_member *m, size_t n, unsigned vnodes,
			 const char *want, const char *what)
{
	char err[256] = "";
	struct ring *r = ring_build(m, n, RING_SCHEME_RINGPROXY, vnodes, err, sizeof(err));

	tap_ok(r == NULL, "refused: %s", what);
	tap_is_str(err, want, "message: %s", what);
	ring_free(r);
}

static void test_errors(void)
{
	const struct ring_member nan_w[] = { { "a", NAN, NULL } };
	const struct ring_member neg_w[] = { { "a", -1, NULL } };
	const struct ring_member inf_w[] = { { "a", INFINITY, NULL } };
	const struct ring_member no_name[] = { { "a", 1, NULL }, { NULL, 1, NULL } };
	const struct ring_member empty_name[] = { { "", 1, NULL } };
	const struct ring_member dup[] = { { "x", 1, NULL }, { "y", 1, NULL }, { "x", 2, NULL } };
	const struct ring_member big[] = { { "a", 1100, NULL }, { "b", 1100, NULL } };
	struct ring_member *many = calloc(RING_MAX_BACKENDS + 1, sizeof(*many));

	test_refused(nan_w, 1, 10, "backend a: weight nan is not a finite "
		     "number >= 0; use 0 to drain it", "NaN weight");
	test_refused(neg_w, 1, 10, "backend a: weight -1 is not a finite "
		     "number >= 0; use 0 to drain it", "negative weight");
	test_refused(inf_w, 1, 10, "backend a: weight inf is not a finite "
		     "number >= 0; use 0 to drain it", "infinite weight");
	test_refused(no_name, 2, 10, "backend 1 has no name; give every "
		     "backend a name", "NULL name");
	test_refused(empty_name, 1, 10, "backend 0 has no name; give every "
		     "backend a name", "empty name");
	test_refused(dup, 3, 10, "backend x is listed twice; give each "
		     "backend its own name", "duplicate name");
	test_refused(big, 2, 1000, "ring would have 2200000 points, more than "
		     "the limit of 2097152; lower vnodes or the weights",
		     "over the point limit");
	for (size_t i = 0; many != NULL && i <= RING_MAX_BACKENDS; i++)
		many[i] = (struct ring_member){ "n", 0, NULL };
	test_refused(many, RING_MAX_BACKENDS + 1, 1, "4097 backends, more than "
		     "the limit of 4096; split the tier", "too many backends");
	free(many);
}

struct test_oom {
	long fail_at;
	const struct ring *prev;        /* ring_build_from's, or NULL */
	struct ring *r;
	char err[256];
};

/* One build on a thread of its own, so that the thread's MD5 state is
 * made (and may fail) inside the build, as on a reload's first build. */
static void *test_oom_build(void *arg)
{
	static const struct ring_member m[] = { { "cache-a", 1, NULL }, { "cache-b", 2, NULL }, { "cache-c", 0.5, NULL } };
	struct test_oom *o = arg;

	atomic_store(&test_fail_in, o->fail_at);
	o->r = ring_build_from(o->prev, m, 3, RING_SCHEME_RINGPROXY, 40, o->err, sizeof(o->err));
	atomic_store(&test_fail_in, -1);
	return NULL;
}

/* Each allocation of a build made to fail in turn: every one is an error
 * the caller gets back ("out of memory"), never an abort; the sanitizer
 * build's leak check sees that a failed build frees what it had. */
/* The builds of test_out_of_memory: n of them until one succeeds, each
 * failing with "out of memory" (counted in *nomem). */
static long test_oom_count(const struct ring *prev, long *nomem)
{
	struct test_oom o;
	long n = 0;
	pthread_t t;

	*nomem = 0;
	for (long k = 1; k < 100; k++) {
		memset(&o, 0, sizeof(o));
		o.fail_at = k;
		o.prev = prev;
		if (pthread_create(&t, NULL, test_oom_build, &o) != 0)
			break;
		pthread_join(t, NULL);
		if (o.r != NULL) {
			ring_free(o.r);
			break;
		}
		n++;
		if (strcmp(o.err, "out of memory") == 0)
			(*nomem)++;
		else
			tap_diag("allocation %ld failed: \"%s\"", k, o.err);
	}
	return n;
}

static void test_out_of_memory(void)
{
	const struct ring_member other[] = { { "cache-a", 1, NULL }, { "cache-b", 1, NULL } };
	struct ring *prev = test_build(other, 2, 40);
	struct test_oom o;
	long n, nomem;
	pthread_t t;

	n = test_oom_count(NULL, &nomem);
	tap_is_int(n, 14, "a build of 3 backends on a new thread makes 14 allocations (MD5 state included)");
	tap_is_int(nomem, n, "each of them failing: ring_build returns NULL with \"out of memory\"");
	n = test_oom_count(prev, &nomem);
	tap_ok(n > 14, "a build from a ring before it makes more (%ld): what to take and from where", n);
	tap_is_int(nomem, n, "each of them failing: ring_build_from returns NULL with \"out of memory\"");
	ring_free(prev);
	memset(&o, 0, sizeof(o));
	o.fail_at = -1;
	pthread_create(&t, NULL, test_oom_build, &o);
	pthread_join(t, NULL);
	tap_ok(o.r != NULL && o.r->npoints == 140, "without a failure the same build succeeds (140 points)");
	ring_free(o.r);
}

static void test_empty(void)
{
	const struct ring_member m[] = { { "a", 0, NULL }, { "b", 0, NULL } };
	const struct ring_member one[] = { { "a", 1, NULL } };
	struct ring *e = test_build(m, 2, 160);
	struct ring *s = test_build(one, 1, 1);
	struct ring_diff d = { 0 };
	struct ring_walk w;
	double share[2] = { -1, -1 };

	if (!tap_ok(e != NULL && s != NULL, "drained and one-point rings build"))
		goto out;
	tap_is_int(e->npoints, 0, "all weights 0: no points");
	tap_is_int(e->nbackends, 2, "drained backends are still listed");
	tap_is_int(ring_lookup(e, 42), -1, "lookup on an empty ring is -1");
	ring_walk_init(&w, e, 42);
	tap_is_int(ring_walk_next(&w), -1, "walk on an empty ring yields nothing");
	ring_shares(e, share);
	tap_ok(share[0] == 0 && share[1] == 0, "empty ring: all shares 0");

	ring_shares(s, share);
	tap_ok(share[0] == 1.0, "a single point owns the whole circle (share 1)");
	tap_is_int(ring_lookup(s, 0), 0, "single point owns position 0");
	tap_is_int(ring_lookup(s, UINT64_MAX), 0, "single point owns 2^64-1");

	{
		struct ring *z = test_build(NULL, 0, 160);

		tap_ok(z != NULL && z->npoints == 0 && z->nbackends == 0 &&
		       ring_lookup(z, 1) == -1, "no backends at all: an empty ring");
		ring_free(z);
	}
	tap_is_int(ring_diff(e, s, &d), 0, "diff empty -> one runs");
	tap_ok(d.moved_share == 1.0 && d.nflows == 1 &&
	       strcmp(d.flows[0].from, "") == 0 &&
	       strcmp(d.flows[0].to, "a") == 0 && d.flows[0].share == 1.0,
	       "empty -> one: everything moves from \"\" to a");
	ring_diff_free(&d);
	tap_is_int(ring_diff(s, e, &d), 0, "diff one -> empty runs");
	tap_ok(d.moved_share == 1.0 && d.nflows == 1 &&
	       strcmp(d.flows[0].from, "a") == 0 &&
	       strcmp(d.flows[0].to, "") == 0,
	       "one -> empty: everything moves from a to \"\"");
	ring_diff_free(&d);
	{
		/* the owner is not listed in the new ring at all, and that
		 * ring has no points: its keys move to none all the same */
		const struct ring_member other[] = { { "b", 0, NULL } };
		struct ring *z = test_build(NULL, 0, 160), *o = test_build(other, 1, 160);

		tap_ok(z != NULL && o != NULL && ring_diff(s, z, &d) == 0 && d.moved_share == 1.0 &&
		       d.nflows == 1 && strcmp(d.flows[0].from, "a") == 0 &&
		       strcmp(d.flows[0].to, "") == 0,
		       "one -> no backends: everything moves from a to \"\"");
		ring_diff_free(&d);
		tap_ok(o != NULL && ring_diff(s, o, &d) == 0 && d.moved_share == 1.0 &&
		       d.nflows == 1 && strcmp(d.flows[0].to, "") == 0,
		       "one -> another backend, drained: everything moves from a to \"\"");
		ring_diff_free(&d);
		tap_ok(o != NULL && ring_diff(o, s, &d) == 0 && d.moved_share == 1.0 &&
		       d.nflows == 1 && strcmp(d.flows[0].from, "") == 0,
		       "drained other -> one: everything moves from \"\" to a");
		ring_diff_free(&d);
		ring_free(z);
		ring_free(o);
	}
	tap_is_int(ring_diff(e, e, &d), 0, "diff empty -> empty runs");
	tap_ok(d.moved_share == 0 && d.nflows == 0, "empty -> empty moves nothing");
	ring_diff_free(&d);
out:
	ring_free(e);
	ring_free(s);
}

/* Worker threads get their own MD5 context, freed at thread exit (the
 * leak checker of the sanitizer build watches this). */
static void *test_thread(void *arg)
{
	uint64_t *out = arg;

	*out = ring_hash("/thumbs/a.jpg", 13);
	return NULL;
}

static void test_threads(void)
{
	pthread_t t[4];
	uint64_t got[4] = { 0 };
	int ok = 1;

	for (int i = 0; i < 4; i++)
		ok &= pthread_create(&t[i], NULL, test_thread, &got[i]) == 0;
	for (int i = 0; ok && i < 4; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; ok && i < 4; i++)
		ok &= got[i] == UINT64_C(0x891222b3fb75ea9d);
	tap_ok(ok, "ring_hash agrees across threads");
}

/* ---- properties over random memberships ---- */

#define TEST_MAXB 24

struct test_cfg {
	struct ring_member m[TEST_MAXB + 1];
	char names[TEST_MAXB + 1][32];
	size_t n;
	unsigned vnodes;
};

static void test_cfg_random(struct test_cfg *c)
{
	static const double w[] = { 0.5, 1, 1, 1, 1.5, 2, 3 };

	c->n = 2 + test_rand() % (TEST_MAXB - 2);
	c->vnodes = 40 + (unsigned)(test_rand() % 121);
	for (size_t i = 0; i < c->n; i++) {
		snprintf(c->names[i], sizeof(c->names[i]), "cache-%zu-%llx", i,
			 (unsigned long long)(test_rand() & 0xffff));
		c->m[i].name = c->names[i];
		c->m[i].weight = w[test_rand() % (sizeof(w) / sizeof(w[0]))];
	}
}

/* Owners of nkeys random keys in a and b compared by name. Returns the
 * number that moved; *bad counts moves that break rule(from, to). */
enum test_rule { TEST_TO_X, TEST_FROM_X, TEST_X_EITHER };

static size_t test_moves(const struct ring *a, const struct ring *b,
			 size_t nkeys, enum test_rule rule, const char *x,
			 size_t *bad)
{
	char key[64];
	size_t moved = 0;

	*bad = 0;
	for (size_t k = 0; k < nkeys; k++) {
		uint64_t pos = test_key(key, sizeof(key));
		const char *oa = test_owner(a, pos), *ob = test_owner(b, pos);

		if (strcmp(oa, ob) == 0)
			continue;
		moved++;
		if ((rule == TEST_TO_X && strcmp(ob, x) != 0) ||
		    (rule == TEST_FROM_X && strcmp(oa, x) != 0) ||
		    (rule == TEST_X_EITHER && strcmp(oa, x) != 0 &&
		     strcmp(ob, x) != 0))
			(*bad)++;
	}
	return moved;
}

/* The diff's moved share against the sampled fraction, and its flows
 * against its moved share and the rule. */
static int test_diff_agrees(const struct ring *a, const struct ring *b,
			    size_t nkeys, size_t moved, enum test_rule rule,
			    const char *x)
{
	struct ring_diff d;
	double p, sigma, sum = 0;
	int ok = 1;

	if (ring_diff(a, b, &d) != 0)
		return 0;
	p = (double)moved / (double)nkeys;
	sigma = sqrt(d.moved_share * (1 - d.moved_share) / (double)nkeys);
	if (fabs(p - d.moved_share) > 4 * sigma + 1e-12) {
		tap_diag("  sampled %.5f, diff says %.5f (sigma %.5f)", p,
			 d.moved_share, sigma);
		ok = 0;
	}
	for (size_t i = 0; i < d.nflows; i++) {
		sum += d.flows[i].share;
		if (i > 0 && d.flows[i].share > d.flows[i - 1].share)
			ok = 0;
		if ((rule == TEST_TO_X && strcmp(d.flows[i].to, x) != 0) ||
		    (rule == TEST_FROM_X && strcmp(d.flows[i].from, x) != 0) ||
		    (rule == TEST_X_EITHER && strcmp(d.flows[i].from, x) != 0 &&
		     strcmp(d.flows[i].to, x) != 0))
			ok = 0;
	}
	if (fabs(sum - d.moved_share) > 1e-12)
		ok = 0;
	ring_diff_free(&d);
	return ok;
}

#define TEST_ROUNDS 12
#define TEST_KEYS 100000

static void test_add_remove(void)
{
	int ok_add = 1, ok_rm = 1, ok_dadd = 1, ok_drm = 1, ok_exact = 1;

	for (int round = 0; round < TEST_ROUNDS; round++) {
		struct test_cfg c;
		struct ring *a, *b;
		size_t bad, moved;
		double sb[TEST_MAXB + 1];
		struct ring_diff d;

		test_cfg_random(&c);
		a = test_build(c.m, c.n, c.vnodes);
		snprintf(c.names[c.n], sizeof(c.names[c.n]), "new-%d", round);
		c.m[c.n] = (struct ring_member){ c.names[c.n], 1, NULL };
		b = test_build(c.m, c.n + 1, c.vnodes);
		if (a == NULL || b == NULL) {
			ok_add = 0;
			goto next;
		}
		moved = test_moves(a, b, TEST_KEYS, TEST_TO_X, c.names[c.n], &bad);
		ok_add &= bad == 0 && moved > 0;
		ok_dadd &= test_diff_agrees(a, b, TEST_KEYS, moved, TEST_TO_X,
					    c.names[c.n]);
		moved = test_moves(b, a, TEST_KEYS, TEST_FROM_X, c.names[c.n], &bad);
		ok_rm &= bad == 0 && moved > 0;
		ok_drm &= test_diff_agrees(b, a, TEST_KEYS, moved, TEST_FROM_X,
					   c.names[c.n]);
		/* Removing a backend moves exactly its arcs: same integer
		 * sum in both computations, so the doubles are equal. */
		ring_shares(b, sb);
		if (ring_diff(b, a, &d) == 0) {
			ok_exact &= d.moved_share == sb[c.n];
			ring_diff_free(&d);
		} else {
			ok_exact = 0;
		}
next:
		ring_free(a);
		ring_free(b);
	}
	tap_ok(ok_add, "adding a backend moves keys only to it");
	tap_ok(ok_rm, "removing a backend moves only its keys");
	tap_ok(ok_dadd, "add: diff moved share matches 100k keys (4 sigma), "
	       "flows only to the new backend, sum to moved share, sorted");
	tap_ok(ok_drm, "remove: diff moved share matches 100k keys (4 sigma), "
	       "flows only from the removed backend, sum to moved share");
	tap_ok(ok_exact, "remove: moved share equals the removed backend's share exactly");
}

static void test_reweight(void)
{
	int ok = 1, ok_d = 1;

	for (int round = 0; round < TEST_ROUNDS; round++) {
		struct test_cfg c;
		struct ring *a, *b;
		size_t bad, moved, x;

		test_cfg_random(&c);
		a = test_build(c.m, c.n, c.vnodes);
		x = test_rand() % c.n;
		c.m[x].weight = c.m[x].weight == 1 ? 2.5 : 1;
		b = test_build(c.m, c.n, c.vnodes);
		if (a == NULL || b == NULL) {
			ok = 0;
		} else {
			moved = test_moves(a, b, TEST_KEYS, TEST_X_EITHER,
					   c.names[x], &bad);
			ok &= bad == 0 && moved > 0;
			ok_d &= test_diff_agrees(a, b, TEST_KEYS, moved,
						 TEST_X_EITHER, c.names[x]);
		}
		ring_free(a);
		ring_free(b);
	}
	tap_ok(ok, "changing one weight moves keys only to or from that backend");
	tap_ok(ok_d, "reweight: diff agrees with 100k keys and flows involve only it");
}

static void test_shares_walk(void)
{
	int ok_sum = 1, ok_zero = 1, ok_walk = 1, ok_indep = 1, ok_same = 1;
	char key[64];

	for (int round = 0; round < TEST_ROUNDS; round++) {
		struct test_cfg c, c2;
		struct ring *r, *r2;
		double share[TEST_MAXB + 1], sum = 0;
		struct ring_diff d;
		size_t z;
		int x;

		test_cfg_random(&c);
		z = test_rand() % c.n;
		c.m[z].weight = 0;
		r = test_build(c.m, c.n, c.vnodes);
		if (r == NULL) {
			ok_sum = 0;
			continue;
		}
		ring_shares(r, share);
		for (size_t i = 0; i < c.n; i++)
			sum += share[i];
		ok_sum &= fabs(sum - 1) < 1e-9;
		ok_zero &= r->npoints_of[z] == 0 && share[z] == 0;
		for (int k = 0; k < 2000; k++) {
			uint64_t pos = test_key(key, sizeof(key));
			struct ring_walk w;
			int seen[TEST_MAXB + 1] = { 0 }, b, count = 0;

			ring_walk_init(&w, r, pos);
			while ((b = ring_walk_next(&w)) >= 0) {
				if (count == 0 && b != ring_lookup(r, pos))
					ok_walk = 0;
				if (seen[b]++ || r->npoints_of[b] == 0)
					ok_walk = 0;
				count++;
			}
			ok_walk &= count == (int)c.n - 1 && !seen[z] &&
				   ring_lookup(r, pos) != (int)z;
			ok_walk &= ring_walk_next(&w) == -1;
		}
		/* A backend's points do not depend on the others: build it
		 * in a different company and compare its positions. */
		test_cfg_random(&c2);
		x = (int)(test_rand() % c.n);
		if (c.m[x].weight == 0)
			x = (x + 1) % (int)c.n;
		c2.m[0] = c.m[x];
		c2.vnodes = c.vnodes;
		r2 = test_build(c2.m, c2.n, c2.vnodes);
		if (r2 != NULL) {
			uint64_t s1 = 0, s2 = 0;

			for (size_t i = 0; i < r->npoints; i++)
				if (r->points[i].backend == (uint32_t)x)
					s1 += r->points[i].pos * 3 + 1;
			for (size_t i = 0; i < r2->npoints; i++)
				if (r2->points[i].backend == 0)
					s2 += r2->points[i].pos * 3 + 1;
			ok_indep &= r->npoints_of[x] == r2->npoints_of[0] &&
				    s1 == s2;
		} else {
			ok_indep = 0;
		}
		ring_free(r2);
		if (ring_diff(r, r, &d) == 0) {
			ok_same &= d.moved_share == 0 && d.nflows == 0;
			ring_diff_free(&d);
		}
		ring_free(r);
	}
	tap_ok(ok_sum, "shares sum to 1 within 1e-9");
	tap_ok(ok_zero, "a weight-0 backend has no points and no share");
	tap_ok(ok_walk, "walk yields each backend with points once, owner first, then -1");
	tap_ok(ok_indep, "a backend's points do not depend on the other backends");
	tap_ok(ok_same, "diff of a ring with itself moves nothing");
}

/* The bucketed lookup against a plain linear lower bound, at random
 * positions, on the points themselves, one off them and at the bucket
 * edges, for rings from 1 to a few thousand points. */
static long test_lookup_slow(const struct ring *r, uint64_t pos)
{
	for (size_t i = 0; i < r->npoints; i++)
		if (r->points[i].pos >= pos)
			return (long)i;
	return r->npoints ? 0 : -1;
}

static void test_lookup_brute(void)
{
	static const unsigned vn[] = { 1, 2, 3, 7, 40, 160, 400 };
	int bad = 0, checked = 0;

	for (size_t v = 0; v < sizeof(vn) / sizeof(vn[0]); v++) {
		struct test_cfg c;
		struct ring *r;

		test_cfg_random(&c);
		r = test_build(c.m, v == 0 ? 1 : c.n, vn[v]);
		if (r == NULL) {
			bad++;
			continue;
		}
		for (int k = 0; k < 3000; k++) {
			uint64_t q[4];
			size_t j = (size_t)(test_rand() % r->npoints);
			uint64_t edge = (test_rand() >> r->index_shift)
					<< r->index_shift;

			q[0] = test_rand();
			q[1] = r->points[j].pos + (k % 3) - 1;
			q[2] = edge;
			q[3] = edge - 1;
			for (int i = 0; i < 4; i++, checked++)
				if (ring_lookup_point(r, q[i]) !=
				    test_lookup_slow(r, q[i]))
					bad++;
		}
		ring_free(r);
	}
	if (!tap_ok(bad == 0, "lookup agrees with a linear search (%d positions)",
		    checked))
		tap_diag("  %d disagree", bad);
}

static void test_single(void)
{
	const struct ring_member m[] = { { "only", 1, NULL }, { "gone", 0, NULL } };
	struct ring *r = test_build(m, 2, 160);
	double share[2];

	if (r == NULL) {
		tap_ok(0, "single-backend ring builds");
		return;
	}
	ring_shares(r, share);
	tap_ok(share[0] == 1.0 && share[1] == 0,
	       "single-backend ring: share 1.0, drained one 0");
	ring_free(r);
}

/* ring_moved_arcs: a key moves exactly when its position is inside one
 * of the arcs, and the arcs add up to the diff's moved share. */
static void test_moved_arcs(void)
{
	struct ring_member m4[] = { { "a", 1, NULL }, { "b", 1, NULL }, { "c", 1, NULL }, { "d", 1, NULL } };
	struct ring_member m5[] = { { "a", 1, NULL }, { "b", 1, NULL }, { "c", 2, NULL }, { "d", 1, NULL }, { "e", 1, NULL } };
	struct ring *a = test_build(m4, 4, 40), *b = test_build(m5, 5, 40);
	struct ring_arc *arcs = NULL;
	struct ring_diff d;
	long n;
	double sum = 0;
	int agree = 0;
	uint64_t x = 88172645463325252ull;

	if (!a || !b)
		goto out;
	n = ring_moved_arcs(a, b, 100000, &arcs);
	tap_ok(n > 0, "moved arcs: %ld arcs for +e and c x2", n);
	tap_is_int(ring_diff(a, b, &d), 0, "moved arcs: the diff");
	for (long i = 0; i < n; i++)
		sum += (double)(arcs[i].end - arcs[i].start) / 18446744073709551616.0;
	tap_ok(sum > 0 && fabs(sum - d.moved_share) < 1e-9, "the arcs add up to the moved share (%.9f vs %.9f)",
	       sum, d.moved_share);
	for (int k = 0; k < 20000; k++) {
		int in = 0;
		uint64_t pos;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		pos = x;
		for (long i = 0; i < n && !in; i++)
			in = arcs[i].start < arcs[i].end ? pos > arcs[i].start && pos <= arcs[i].end
							 : pos > arcs[i].start || pos <= arcs[i].end;
		agree += in == (strcmp(a->names[ring_lookup(a, pos)], b->names[ring_lookup(b, pos)]) != 0);
	}
	tap_is_int(agree, 20000, "20,000 keys: moved exactly when inside an arc");
	ring_diff_free(&d);
	free(arcs);
	tap_is_int(ring_moved_arcs(a, a, 100, &arcs), 0, "no change: no arc");
	free(arcs);
	tap_is_int(ring_moved_arcs(a, b, 3, &arcs), 3, "at most max arcs");
	free(arcs);
out:
	ring_free(a);
	ring_free(b);
}

/* ------------------------------------------------------------------ */
/* Warm ramps                                                          */

/* ring_hash2: the position of ring_hash and, from the same digest, its
 * last 8 bytes (hashlib.md5(s).digest()[8:] read big-endian). */
static void test_hash2(void)
{
	static const struct { const char *s; uint64_t pos, u; } v[] = {
		{ "", UINT64_C(0xd41d8cd98f00b204), UINT64_C(0xe9800998ecf8427e) },
		{ "a", UINT64_C(0x0cc175b9c0f1b6a8), UINT64_C(0x31c399e269772661) },
		{ "/thumbs/a.jpg", UINT64_C(0x891222b3fb75ea9d), UINT64_C(0xcd261f0e1e93e826) },
		{ "/thumbs/1234/5678_200x200.jpg", UINT64_C(0x75a6f076f46dcbb1),
		  UINT64_C(0xdbd1d92d3e599aa9) },
	};
	struct iovec parts[3] = { { "/thumbs/", 8 }, { "1234/5678", 9 }, { "_200x200.jpg", 12 } };
	uint64_t u = 0, pu = 0;
	int ok = 1;

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		uint64_t pos = ring_hash2(v[i].s, strlen(v[i].s), &u);

		ok &= pos == v[i].pos && u == v[i].u && ring_hash(v[i].s, strlen(v[i].s)) == pos;
		if (pos != v[i].pos || u != v[i].u)
			tap_diag("  \"%s\": got %016llx %016llx", v[i].s, (unsigned long long)pos,
				 (unsigned long long)u);
	}
	tap_ok(ok, "ring_hash2: the position is ring_hash's, u the digest's last 8 bytes (4 vectors)");
	tap_ok(ring_hash_parts2(parts, 3, &pu) == v[3].pos && pu == v[3].u &&
	       ring_hash_parts2(parts, 3, NULL) == v[3].pos,
	       "ring_hash_parts2 over pieces: the same position and u as the whole key; u may be NULL");
}

#define TEST_RAMP_KEYS 100000
#define TEST_RAMP_TIMES 41

/* The keys of a ramp test: positions and u values. */
static uint64_t test_ramp_pos[TEST_RAMP_KEYS], test_ramp_u[TEST_RAMP_KEYS];

static void test_ramp_keys(void)
{
	char buf[64];

	for (size_t k = 0; k < TEST_RAMP_KEYS; k++) {
		int n = snprintf(buf, sizeof(buf), "/thumbs/%zu/%zu_200x200.jpg", k % 977, k);

		test_ramp_pos[k] = ring_hash2(buf, (size_t)n, &test_ramp_u[k]);
	}
}

/* The name of a ramp's choice for key k at now (step 0's backends). */
static const char *test_ramp_name(const struct ring_ramp *st, size_t n, size_t k, int64_t now)
{
	int b = ring_ramp_owner(st, n, test_ramp_pos[k], test_ramp_u[k], now, NULL);

	return b < 0 ? "" : st[0].ring->names[b];
}

/* Two steps: b (from start, over span) after a. The map is allocated. */
static void test_ramp_two(struct ring_ramp *st, const struct ring *a, const struct ring *b,
			  int64_t start, uint64_t span)
{
	st[0] = (struct ring_ramp){ b, NULL, start, span };
	st[1] = (struct ring_ramp){ a, ring_map(a, b), 0, 0 };
}

/*
 * A cache added with a ramp over 100k keys: the moved keys' share at the
 * new owner follows t / span within sampling error; each key is at its
 * old or new owner, switches once and never back, exactly at start +
 * span * u / 2^64; unmoved keys never reach the new cache; the same
 * inputs give the same answer, also with the backends listed in another
 * order (other indices, the same names).
 */
static void test_ramp_add(void)
{
	static const char *na[] = { "c1", "c2", "c3", "c4", "c5" };
	struct ring_member m[5], rm[5];
	struct ring *a, *b, *b2;
	struct ring_ramp st[2], st2[2];
	const int64_t start = 5000, span = 60000;
	static unsigned char at_new[TEST_RAMP_KEYS];
	size_t moved = 0, bad_owner = 0, flips = 0, unmoved_new = 0, exact_bad = 0, differ = 0;
	int share_ok = 1, before_ok = 1, after_ok = 1;

	for (int i = 0; i < 5; i++) {
		m[i] = (struct ring_member){ na[i], 1, NULL };
		rm[4 - i] = m[i];
	}
	a = test_build(m, 4, 160);
	b = test_build(m, 5, 160);
	b2 = test_build(rm, 5, 160);
	if (!a || !b || !b2) {
		tap_ok(0, "ramp: rings built");
		goto out;
	}
	test_ramp_two(st, a, b, start, (uint64_t)span);
	test_ramp_two(st2, a, b2, start, (uint64_t)span);
	memset(at_new, 0, sizeof(at_new));
	for (size_t k = 0; k < TEST_RAMP_KEYS; k++)
		moved += strcmp(test_owner(a, test_ramp_pos[k]), test_owner(b, test_ramp_pos[k])) != 0;
	for (int ti = 0; ti < TEST_RAMP_TIMES; ti++) {
		double f = (double)ti / (TEST_RAMP_TIMES - 1);
		int64_t now = start + (int64_t)(f * (double)span);
		size_t switched = 0;
		double sigma;

		for (size_t k = 0; k < TEST_RAMP_KEYS; k++) {
			const char *o = test_owner(a, test_ramp_pos[k]);
			const char *nw = test_owner(b, test_ramp_pos[k]);
			const char *got = test_ramp_name(st, 2, k, now);
			int is_new;

			if (strcmp(got, test_ramp_name(st, 2, k, now)) != 0 ||
			    strcmp(got, test_ramp_name(st2, 2, k, now)) != 0)
				differ++;
			if (strcmp(o, nw) == 0) {
				unmoved_new += strcmp(got, o) != 0;
				continue;
			}
			if (strcmp(got, o) != 0 && strcmp(got, nw) != 0)
				bad_owner++;
			is_new = strcmp(got, nw) == 0;
			if (at_new[k] && !is_new)
				flips++;
			at_new[k] = (unsigned char)is_new;
			switched += (size_t)is_new;
			/* an independent statement of the moment, in long
			 * double, away from the boundary */
			{
				long double due = (long double)start +
						  (long double)span * (long double)test_ramp_u[k] / 18446744073709551616.0L;

				if ((long double)now > due + 1e-6L ? !is_new :
				    (long double)now < due - 1e-6L ? is_new : 0)
					exact_bad++;
			}
		}
		sigma = sqrt(f * (1 - f) / (double)moved);
		if (fabs((double)switched / (double)moved - f) > 4 * sigma + 1.0 / (double)moved) {
			share_ok = 0;
			tap_diag("  t = %.3f of the window: %zu of %zu moved keys switched (%.4f)", f, switched,
				 moved, (double)switched / (double)moved);
		}
		if (ti == 0)
			before_ok &= switched <= 1;
		if (ti == TEST_RAMP_TIMES - 1)
			after_ok &= switched == moved;
	}
	tap_ok(moved > TEST_RAMP_KEYS / 10, "ramp: adding a fifth cache moves %zu of %d keys", moved,
	       TEST_RAMP_KEYS);
	tap_ok(share_ok, "ramp: at each of %d times the share of moved keys at the new owner is t / ramp "
	       "within 4 sigma", TEST_RAMP_TIMES);
	tap_ok(before_ok && after_ok, "ramp: none switched at its start (u = 0 aside), all at its end");
	tap_ok(bad_owner == 0, "ramp: a moved key is always at its old or its new owner (%zu not)", bad_owner);
	tap_ok(flips == 0, "ramp: no key flips back once switched (%zu did)", flips);
	tap_ok(exact_bad == 0, "ramp: each key switches at start + ramp * u / 2^64 (%zu did not)", exact_bad);
	tap_ok(unmoved_new == 0, "ramp: unmoved keys stay with their owner, never the new cache (%zu did not)",
	       unmoved_new);
	tap_ok(differ == 0, "ramp: two evaluations agree, and with the file in another order (%zu differ)",
	       differ);
	{
		int64_t t = start + span / 3;
		size_t k, n_before = 0, n_in = 0;

		for (k = 0; k < 2000; k++) {
			n_before += strcmp(test_ramp_name(st, 2, k, start - 1), test_owner(a, test_ramp_pos[k])) == 0;
			n_in += strcmp(test_ramp_name(st, 1, k, t), test_owner(b, test_ramp_pos[k])) == 0;
		}
		tap_ok(n_before == 2000 && n_in == 2000,
		       "ramp: before its start every key is where it was; one step alone is the ring");
	}
	free((void *)st[1].map);
	free((void *)st2[1].map);
out:
	ring_free(a);
	ring_free(b);
	ring_free(b2);
}

/* A backend removed and another added in one change: the removed one's
 * keys move at once (nothing to ramp from), the others ramp. A drained
 * backend (weight 0, still listed) holds its keys until their moment. */
/* ring_ramp_moment is the first millisecond ring_ramp_switched says yes. */
static void test_ramp_moment(void)
{
	struct ring_ramp st = { NULL, NULL, 1700000000000, 60000 };
	unsigned bad = 0;

	for (int k = 0; k < 10000; k++) {
		uint64_t u = k == 0 ? 0 : k == 1 ? UINT64_MAX : test_rand();
		int64_t m = ring_ramp_moment(&st, u);

		bad += !ring_ramp_switched(&st, u, m) || (m > st.start_ms && ring_ramp_switched(&st, u, m - 1));
	}
	tap_is_int(bad, 0, "a key's ramp moment is the first millisecond it has switched");
}

static void test_ramp_remove_drain(void)
{
	struct ring_member m[5] = { { "c1", 1, NULL }, { "c2", 1, NULL }, { "c3", 1, NULL }, { "c4", 1, NULL }, { "c5", 1, NULL } };
	struct ring_member drained[4] = { { "c1", 1, NULL }, { "c2", 1, NULL }, { "c3", 1, NULL }, { "c4", 0, NULL } };
	struct ring *a = test_build(m, 4, 160);
	struct ring *b = test_build(m + 1, 4, 160);     /* c1 removed, c5 added */
	struct ring *c = test_build(drained, 4, 160);
	struct ring_ramp st[2], sd[2];
	const int64_t start = 0, span = 1000, mid = 500;
	size_t from_c1 = 0, c1_at_once = 0, to_c5 = 0, held_c5 = 0, drain = 0, drain_ok = 0, drain_after = 0;

	if (!a || !b || !c) {
		tap_ok(0, "ramp: rings built");
		goto out;
	}
	test_ramp_two(st, a, b, start, span);
	test_ramp_two(sd, a, c, start, span);
	for (size_t k = 0; k < TEST_RAMP_KEYS; k++) {
		const char *o = test_owner(a, test_ramp_pos[k]), *nb = test_owner(b, test_ramp_pos[k]);
		const char *got = test_ramp_name(st, 2, k, mid);
		int early = (long double)test_ramp_u[k] / 18446744073709551616.0L < 0.5L;

		if (strcmp(o, "c1") == 0) {
			from_c1++;
			c1_at_once += strcmp(got, nb) == 0;
		} else if (strcmp(nb, "c5") == 0) {
			to_c5++;
			held_c5 += strcmp(got, early ? "c5" : o) == 0;
		}
		if (strcmp(o, "c4") == 0) {
			drain++;
			drain_ok += strcmp(test_ramp_name(sd, 2, k, mid), early ? test_owner(c, test_ramp_pos[k]) : "c4") == 0;
			drain_after += strcmp(test_ramp_name(sd, 2, k, span), "c4") != 0;
		}
	}
	tap_ok(from_c1 > 0 && c1_at_once == from_c1,
	       "ramp: the %zu keys of a removed backend go to their new owners at once (%zu did)", from_c1,
	       c1_at_once);
	tap_ok(to_c5 > 0 && held_c5 == to_c5,
	       "ramp: the other %zu moved keys ramp (half-way: those with u < 1/2 switched)", to_c5);
	tap_ok(drain > 0 && drain_ok == drain && drain_after == drain,
	       "ramp: a backend drained to weight 0 keeps its %zu keys until each one's moment", drain);
	free((void *)st[1].map);
	free((void *)sd[1].map);
out:
	ring_free(a);
	ring_free(b);
	ring_free(c);
}

/*
 * A change during a ramp starts a new ramp from where the first had got:
 * a+ (c5 added at 0 over T), then at T/2 c6 added over T. The previous
 * assignment is the first ramp frozen at T/2: c5 for the keys that had
 * switched by then, the original owner for the others. Checked against
 * that statement for every key, and that no key has more than one owner
 * change during the second ramp. Then a revert at T/2 (back to the first
 * file): keys held then never reach c5, those that had switched leave it
 * at once (c5 is no longer in the file).
 */
static void test_ramp_chain(void)
{
	struct ring_member m[6] = { { "c1", 1, NULL }, { "c2", 1, NULL }, { "c3", 1, NULL }, { "c4", 1, NULL }, { "c5", 1, NULL }, { "c6", 1, NULL } };
	struct ring *r4 = test_build(m, 4, 160), *r5 = test_build(m, 5, 160), *r6 = test_build(m, 6, 160);
	struct ring *r4b = test_build(m, 4, 160);
	const uint64_t T = 10000;
	struct ring_ramp st[3], rv[3];
	static const char *last[TEST_RAMP_KEYS];
	static unsigned char changes[TEST_RAMP_KEYS];
	size_t bad = 0, multi = 0, at_c5 = 0, revert_bad = 0;

	if (!r4 || !r5 || !r6 || !r4b) {
		tap_ok(0, "ramp: rings built");
		goto out;
	}
	st[0] = (struct ring_ramp){ r6, NULL, (int64_t)T / 2, T };
	st[1] = (struct ring_ramp){ r5, ring_map(r5, r6), 0, T };
	st[2] = (struct ring_ramp){ r4, ring_map(r4, r6), 0, 0 };
	rv[0] = (struct ring_ramp){ r4b, NULL, (int64_t)T / 2, T };
	rv[1] = (struct ring_ramp){ r5, ring_map(r5, r4b), 0, T };
	rv[2] = (struct ring_ramp){ r4, ring_map(r4, r4b), 0, 0 };
	memset(changes, 0, sizeof(changes));
	for (int64_t now = (int64_t)T / 2; now <= (int64_t)(T + T / 2); now += (int64_t)T / 40) {
		for (size_t k = 0; k < TEST_RAMP_KEYS; k++) {
			long double f = (long double)test_ramp_u[k] / 18446744073709551616.0L;
			const char *o4 = test_owner(r4, test_ramp_pos[k]), *o5 = test_owner(r5, test_ramp_pos[k]);
			const char *o6 = test_owner(r6, test_ramp_pos[k]);
			const char *prev = f <= 0.5L ? o5 : o4;
			long double due = (long double)T / 2 + (long double)T * f;
			const char *want = strcmp(prev, o6) == 0 || (long double)now >= due ? o6 : prev;
			const char *got = test_ramp_name(st, 3, k, now);
			const char *rgot = test_ramp_name(rv, 3, k, now);

			if (fabsl((long double)now - due) > 1e-3L && strcmp(got, want) != 0)
				bad++;
			if (last[k] && strcmp(last[k], got) != 0 && ++changes[k] == 2)
				multi++;
			last[k] = got;
			at_c5 += strcmp(rgot, "c5") == 0;
			revert_bad += strcmp(rgot, o4) != 0;
		}
	}
	tap_ok(bad == 0, "ramp chain: the previous assignment is the first ramp as it stood when the second "
	       "began (%zu choices differ)", bad);
	tap_ok(multi == 0, "ramp chain: no key changes owner twice during the second ramp (%zu did)", multi);
	tap_ok(at_c5 == 0 && revert_bad == 0,
	       "ramp chain: a change reverted mid-ramp sends no key to the removed cache, every key home");
	for (int i = 1; i < 3; i++) {
		free((void *)st[i].map);
		free((void *)rv[i].map);
	}
out:
	ring_free(r4);
	ring_free(r5);
	ring_free(r6);
	ring_free(r4b);
}

/* Preference lists (replicas): the first n distinct backends of the walk,
 * exact shares as primary and as replica, the share of keys whose list
 * changes; and the figure the seed gives for rings that do not skip
 * repeats: at 8 nodes x 100 points, the share of starting points with a
 * repeated machine among the next 3 (36% there). */
static void test_lists(void)
{
	int ok_list = 1, ok_sum = 1, ok_prim = 1, ok_sample = 1, ok_moved = 1, ok_one = 1, ok_cross = 1;
	char buf[128];

	for (int t = 0; t < 30; t++) {
		struct test_cfg c;
		struct ring *r, *b;
		unsigned n = 1 + (unsigned)(t % 4), want;
		double prim[TEST_MAXB + 1], rep[TEST_MAXB + 1], share[TEST_MAXB + 1], total = 0;
		size_t in[TEST_MAXB + 1] = { 0 }, keys = 20000, moved = 0;
		struct ring_diff d;
		double m, p;

		test_cfg_random(&c);
		r = test_build(c.m, c.n, c.vnodes);
		/* one more backend, and the first one reweighted */
		snprintf(c.names[c.n], sizeof(c.names[c.n]), "added-%d", t);
		c.m[c.n].name = c.names[c.n];
		c.m[c.n].weight = 1;
		c.m[0].weight *= 2;
		b = test_build(c.m, c.n + 1, c.vnodes);
		if (!r || !b || ring_list_shares(r, n, prim, rep) != 0) {
			ok_list = 0;
			ring_free(r);
			ring_free(b);
			continue;
		}
		want = n < r->nactive ? n : r->nactive;
		for (size_t k = 0; k < keys; k++) {
			uint64_t pos = test_key(buf, sizeof(buf));
			int list[RING_LIST_MAX];
			unsigned got = ring_list(r, pos, list, n);
			struct ring_walk w;

			ring_walk_init(&w, r, pos);
			if (got != want)
				ok_list = 0;
			for (unsigned i = 0; i < got; i++) {
				if (list[i] != ring_walk_next(&w))
					ok_list = 0;
				for (unsigned j = 0; j < i; j++)
					if (list[j] == list[i])
						ok_list = 0;
				in[list[i]]++;
			}
			moved += (size_t)ring_list_changed(r, pos, n, b, pos, n);
		}
		ring_shares(r, share);
		for (size_t i = 0; i < r->nbackends; i++) {
			double q = prim[i] + rep[i];

			total += q;
			if (fabs(prim[i] - share[i]) > 1e-12 || q > 1 + 1e-12)
				ok_prim = 0;
			/* a binomial count of keys, 4 sigma */
			if (fabs((double)in[i] - q * (double)keys) > 4 * sqrt(q * (1 - q) * (double)keys) + 1)
				ok_sample = 0;
		}
		if (fabs(total - want) > 1e-9)
			ok_sum = 0;
		m = ring_list_moved(r, n, b, n);
		p = (double)moved / (double)keys;
		if (m < 0 || fabs(m - p) > 4 * sqrt(m * (1 - m) / (double)keys) + 1e-4)
			ok_moved = 0;
		if (ring_list_moved(r, n, r, n) != 0 || (r->nactive > n && ring_list_moved(r, n, r, n + 1) != 1))
			ok_moved = 0;
		if (ring_diff(r, b, &d) != 0 || fabs(ring_list_moved(r, 1, b, 1) - d.moved_share) > 1e-12)
			ok_one = 0;
		ring_diff_free(&d);
		ring_free(r);
		ring_free(b);
	}
	tap_ok(ok_list, "a key's list is the first R distinct backends of its walk, R or every one with points");
	tap_ok(ok_prim, "primary shares are ring_shares; a backend is on a key's list at most once");
	tap_ok(ok_sum, "primary + replica shares sum to R (or the backends with points)");
	tap_ok(ok_sample, "list shares match 20k keys' lists (4 sigma)");
	tap_ok(ok_moved, "keys whose list changed: matches 20k keys (4 sigma), none against itself, all when it grows");
	tap_ok(ok_one, "with R = 1 a changed list is a moved owner, exactly (ring_diff)");

	{
		/* two schemes: the keys' two positions are independent */
		struct ring_member m[5] = { { "c0", 1, NULL }, { "c1", 1, NULL }, { "c2", 1, NULL },
					    { "c3", 2, NULL }, { "c4", 1, NULL } };
		char err[256];
		struct ring *a = ring_build(m, 5, RING_SCHEME_RINGPROXY, 160, err, sizeof(err));
		struct ring *b = ring_build(m, 4, RING_SCHEME_NGINX, 0, err, sizeof(err));
		size_t keys = 40000, moved = 0;
		double e;

		if (!a || !b) {
			ok_cross = 0;
		} else {
			for (size_t k = 0; k < keys; k++)
				moved += (size_t)ring_list_changed(a, test_rand(), 2, b, test_rand(), 2);
			e = ring_list_moved(a, 2, b, 2);
			if (e < 0 || fabs(e - (double)moved / (double)keys) >
			    4 * sqrt(e * (1 - e) / (double)keys) + 1e-4)
				ok_cross = 0;
			tap_diag("ringproxy 5 -> nginx 4, R = 2: %.4f of lists change (%.4f of 40k pairs)", e,
				 (double)moved / (double)keys);
		}
		tap_ok(ok_cross, "across schemes: the expected share of changed lists matches independent positions");
		ring_free(a);
		ring_free(b);
	}

	{
		/* the seed's figure: 8 nodes x 100 points */
		struct ring_member m[8];
		char names[8][16];
		struct ring *r;
		size_t rep = 0;
		int ok3 = 1;

		for (int i = 0; i < 8; i++) {
			snprintf(names[i], sizeof(names[i]), "node%d", i);
			m[i].name = names[i];
			m[i].weight = 1;
			m[i].id = NULL;
		}
		r = test_build(m, 8, 100);
		if (r == NULL) {
			tap_ok(0, "8 x 100 ring builds");
			return;
		}
		for (size_t j = 0; j < r->npoints; j++) {
			uint32_t x = r->points[j].backend, y = r->points[(j + 1) % r->npoints].backend,
				 z = r->points[(j + 2) % r->npoints].backend;
			int list[3];

			rep += x == y || y == z || x == z;
			if (ring_list(r, r->points[j].pos, list, 3) != 3 || list[0] == list[1] ||
			    list[1] == list[2] || list[0] == list[2])
				ok3 = 0;
		}
		tap_diag("8 nodes x 100 points: %.1f%% of starting points have a repeated machine among "
			 "the next 3 points (expected 1 - 7/8 x 6/8 = 34.4%%)",
			 100.0 * (double)rep / (double)r->npoints);
		tap_ok(rep * 100 > r->npoints * 25 && rep * 100 < r->npoints * 45,
		       "8 x 100: about a third of 3-point runs repeat a machine (%zu of %zu)", rep,
		       r->npoints);
		tap_ok(ok3, "8 x 100: every list of 3 from every point has 3 distinct machines");
		ring_free(r);
	}
}

/* ring_walk_skip: the skipped backend is not yielded, the others are,
 * once, and the walk ends; a backend without points may be skipped. */
static void test_walk_skip(void)
{
	struct ring_member m[4] = { { "c1", 1, NULL }, { "c2", 1, NULL }, { "c3", 1, NULL }, { "c4", 0, NULL } };
	struct ring *r = test_build(m, 4, 160);
	int seen[4] = { 0 }, b, n = 0, owner;
	struct ring_walk w;

	if (!r) {
		tap_ok(0, "walk skip: ring built");
		return;
	}
	owner = ring_lookup(r, 42);
	ring_walk_init(&w, r, 42);
	ring_walk_skip(&w, owner);
	ring_walk_skip(&w, owner);
	ring_walk_skip(&w, 3);
	while ((b = ring_walk_next(&w)) >= 0 && n < 10) {
		seen[b]++;
		n++;
	}
	tap_ok(n == 2 && seen[owner] == 0 && seen[3] == 0,
	       "ring_walk_skip: the walk yields the two others once each and ends");
	ring_free(r);
}

/* ring_build_from against ring_build: under every scheme, a chain of
 * random membership changes (backends added, removed, reweighted, given
 * a new identity, moved in the file; vnodes changed), each ring built
 * from the one before and from scratch, which must be the same ring,
 * point for point; each chain starts from the last ring of another
 * scheme. */
#define TEST_FROM_MAX 48

struct test_from_be {
	char name[16];
	unsigned idn;           /* the compat identity's number */
	unsigned w;             /* 0..3 */
};

struct test_from {
	struct test_from_be be[TEST_FROM_MAX];
	char ids[TEST_FROM_MAX][40];
	struct ring_member m[TEST_FROM_MAX];
	size_t n;
	unsigned next, vnodes;
};

static void test_from_new(struct test_from *t, struct test_from_be *b)
{
	snprintf(b->name, sizeof(b->name), "be-%u", t->next);
	b->idn = ++t->next;
	b->w = 1 + (unsigned)(test_rand() % 3);
}

/* One random change to t's backends. */
static void test_from_change(struct test_from *t)
{
	size_t x = t->n ? test_rand() % t->n : 0, y = t->n ? test_rand() % t->n : 0;
	struct test_from_be b;

	switch (test_rand() % 6) {
	case 0:
		if (t->n == TEST_FROM_MAX)
			break;
		memmove(&t->be[x + 1], &t->be[x], (t->n - x) * sizeof(b));
		test_from_new(t, &t->be[x]);
		t->n++;
		break;
	case 1:
		if (t->n <= 1)
			break;
		memmove(&t->be[x], &t->be[x + 1], (t->n - x - 1) * sizeof(b));
		t->n--;
		break;
	case 2:
		t->be[x].w = (unsigned)(test_rand() % 4);
		break;
	case 3:
		t->be[x].idn = ++t->next;
		break;
	case 4:
		b = t->be[x];
		t->be[x] = t->be[y];
		t->be[y] = b;
		break;
	default:
		t->vnodes = 10 + (unsigned)(test_rand() % 4) * 30;
		break;
	}
}

/* t's members as scheme s takes them: an identity of the form it
 * accepts, whole weights for a compat scheme, any for the fixed one. */
static void test_from_members(struct test_from *t, enum ring_scheme s)
{
	for (size_t i = 0; i < t->n; i++) {
		unsigned k = t->be[i].idn;

		if (s == RING_SCHEME_NGINX || s == RING_SCHEME_ENVOY)
			snprintf(t->ids[i], sizeof(t->ids[i]), "10.%u.%u.%u:8080", k >> 16 & 255, k >> 8 & 255,
				 k & 255);
		else if (s == RING_SCHEME_HAPROXY)
			snprintf(t->ids[i], sizeof(t->ids[i]), "%u", k);
		else
			snprintf(t->ids[i], sizeof(t->ids[i]), "cache-%u:11212", k);
		t->m[i].name = t->be[i].name;
		t->m[i].id = t->ids[i];
		t->m[i].weight = s == RING_SCHEME_RINGPROXY ? t->be[i].w * 1.25 : t->be[i].w;
	}
}

static int test_same_ring(const struct ring *a, const struct ring *b)
{
	size_t nb;

	if (a->npoints != b->npoints || a->nbackends != b->nbackends || a->nactive != b->nactive ||
	    a->scheme != b->scheme || a->vnodes != b->vnodes || a->index_shift != b->index_shift ||
	    (a->index == NULL) != (b->index == NULL))
		return 0;
	for (size_t i = 0; i < a->npoints; i++)
		if (a->points[i].pos != b->points[i].pos || a->points[i].backend != b->points[i].backend)
			return 0;
	for (size_t i = 0; i < a->nbackends; i++)
		if (strcmp(a->names[i], b->names[i]) != 0 || a->weights[i] != b->weights[i] ||
		    a->npoints_of[i] != b->npoints_of[i])
			return 0;
	nb = a->index ? ((size_t)1 << (64 - a->index_shift)) + 1 : 0;
	return nb == 0 || memcmp(a->index, b->index, nb * sizeof(*a->index)) == 0;
}

static void test_build_from(void)
{
	static struct test_from t;
	struct ring *prev = NULL;
	char err[256] = "";

	t.vnodes = 40;
	for (int s = 0; s < RING_NSCHEMES; s++) {
		int ok = 1, rounds = 0;

		if (!ring_scheme_built((enum ring_scheme)s))
			continue;
		for (int round = 0; round < 150; round++) {
			struct ring *scratch, *from;

			if (t.n == 0)
				for (; t.n < 24; t.n++)
					test_from_new(&t, &t.be[t.n]);
			else
				for (int k = 1 + (int)(test_rand() % 3); k > 0; k--)
					test_from_change(&t);
			test_from_members(&t, (enum ring_scheme)s);
			scratch = ring_build(t.m, t.n, (enum ring_scheme)s, t.vnodes, err, sizeof(err));
			from = ring_build_from(prev, t.m, t.n, (enum ring_scheme)s, t.vnodes, err, sizeof(err));
			if (!scratch || !from) {
				tap_diag("%s round %d: %s", ring_scheme_name((enum ring_scheme)s), round, err);
				ok = 0;
			} else {
				ok &= test_same_ring(scratch, from);
				rounds++;
			}
			ring_free(scratch);
			if (from) {
				ring_free(prev);
				prev = from;
			}
		}
		tap_ok(ok && rounds == 150, "%s (row %d): a ring built from the one before is the one built from scratch, over %d random changes",
		       ring_scheme_name((enum ring_scheme)s), s, rounds);
	}
	ring_free(prev);
}

int main(void)
{
	/* Must precede any OpenSSL allocation; if it fails the check below
	 * would pass vacuously, so that is a failure too. */
	tap_ok(CRYPTO_set_mem_functions(test_malloc, test_realloc, test_free),
	       "OpenSSL allocation hook installed");
	test_no_alloc();
	test_vectors();
	test_points_for();
	test_small_ring();
	test_golden();
	test_errors();
	test_out_of_memory();
	test_empty();
	test_threads();
	test_add_remove();
	test_reweight();
	test_shares_walk();
	test_lookup_brute();
	test_single();
	test_moved_arcs();
	test_hash2();
	test_ramp_keys();
	test_ramp_add();
	test_ramp_moment();
	test_ramp_remove_drain();
	test_ramp_chain();
	test_walk_skip();
	test_lists();
	test_build_from();
	return tap_done();
}
