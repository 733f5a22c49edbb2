/*
 * test-compat-ring.c -- ring-ketama.c and ring-envoy.c against the
 * proxies they reproduce: libmemcached's 99 published ketama cases, the
 * owners a real nutcracker chose (vectors-nutcracker.txt, made by
 * gen-nutcracker-vectors.py), and the rings of Envoy's own ring_hash tests.
 * The points are sorted and looked up here as the framework does: first
 * point at or after the key, wrapping, equal positions by member index.
 *
 * Usage: test-compat-ring VECTORS-NUTCRACKER.TXT
 */
#include "ring/ring-compat.h"
#include "tap.h"
#include "vectors-ketama.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_N(a) (sizeof(a) / sizeof((a)[0]))

static int test_point_cmp(const void *a, const void *b)
{
	const struct ring_point *x = a, *y = b;

	if (x->pos != y->pos)
		return x->pos < y->pos ? -1 : 1;
	return (x->backend > y->backend) - (x->backend < y->backend);
}

static void test_sort(struct ring_point *p, size_t n)
{
	if (n > 0)
		qsort(p, n, sizeof(*p), test_point_cmp);
}

/* Index of the first point with pos >= key, 0 past the last. */
static size_t test_lookup(const struct ring_point *p, size_t n, uint64_t key)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (p[mid].pos < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo == n ? 0 : lo;
}

/* Envoy's Ring::chooseHost search (ring_hash_lb.cc), with its signed
 * bounds, to show that test_lookup finds the same point. */
static size_t test_envoy_choose(const struct ring_point *p, size_t n, uint64_t h)
{
	int64_t lowp = 0, highp = (int64_t)n, midp;

	for (;;) {
		midp = (lowp + highp) / 2;
		if (midp == (int64_t)n)
			return 0;
		uint64_t midval = p[midp].pos;
		uint64_t midval1 = midp == 0 ? 0 : p[midp - 1].pos;

		if (h <= midval && h > midval1)
			return (size_t)midp;
		if (midval < h)
			lowp = midp + 1;
		else
			highp = midp - 1;
		if (lowp > highp)
			return 0;
	}
}

static void test_ketama_libmemcached(void)
{
	struct ring_member m[TEST_N(vectors_ketama_servers)];
	struct ring_point *p = NULL;
	size_t np = 0, good_key = 0, good_point = 0;
	char err[256] = "";

	for (size_t i = 0; i < TEST_N(m); i++)
		m[i] = (struct ring_member){ vectors_ketama_servers[i].host, vectors_ketama_servers[i].weight, NULL };
	if (!tap_ok(ring_ketama_points(m, TEST_N(m), &p, &np, err, sizeof(err)) == 0,
		    "ketama: libmemcached's 8 weighted servers build (%s)", err))
		return;
	test_sort(p, np);
	for (size_t i = 0; i < TEST_N(vectors_ketama_cases); i++) {
		const struct vectors_ketama *c = &vectors_ketama_cases[i];
		uint64_t key = ring_ketama_key(c->key, strlen(c->key));
		size_t at = test_lookup(p, np, key);

		good_key += key == (uint64_t)c->key_pos << 32;
		good_point += p[at].pos == (uint64_t)c->owner_pos << 32;
		if (key != (uint64_t)c->key_pos << 32 || p[at].pos != (uint64_t)c->owner_pos << 32)
			tap_diag("  case %zu: key at %llu, owner point at %llu", i,
				 (unsigned long long)(key >> 32), (unsigned long long)(p[at].pos >> 32));
		tap_is_str(m[p[at].backend].name, c->server,
			   "ketama: libmemcached case %zu, key \"%s\", goes to %s", i, c->key,
			   c->server);
	}
	tap_is_int(good_key, TEST_N(vectors_ketama_cases),
		   "ketama: every case's key hashes to the published MD5 position");
	tap_is_int(good_point, TEST_N(vectors_ketama_cases),
		   "ketama: every case is owned by the published point");
	/* the file's wraparound case: past the last point, the first owns it */
	tap_is_int(ring_ketama_key("VDEAAAAA", 8), (uint64_t)0xfffcd1b5u << 32,
		   "ketama: VDEAAAAA hashes to 0xfffcd1b5");
	tap_ok(np > 0 && p[np - 1].pos < ring_ketama_key("VDEAAAAA", 8) &&
	       test_lookup(p, np, ring_ketama_key("VDEAAAAA", 8)) == 0,
	       "ketama: VDEAAAAA is past the last point and wraps to the first");
	free(p);
}

/* The nutcracker file: "server ID WEIGHT LABEL" lines, then "key HASH HEX
 * LABEL" lines. */
#define TEST_NC_MAX 16

struct test_nc {
	char ids[TEST_NC_MAX][64], labels[TEST_NC_MAX][32];
	struct ring_member m[TEST_NC_MAX];
	size_t n;
};

static int test_unhex(const char *hex, unsigned char *out, size_t cap, size_t *len)
{
	size_t n = strlen(hex);

	if (n % 2 != 0 || n / 2 > cap)
		return -1;
	for (size_t i = 0; i < n / 2; i++) {
		unsigned b;

		if (sscanf(hex + 2 * i, "%2x", &b) != 1)
			return -1;
		out[i] = (unsigned char)b;
	}
	*len = n / 2;
	return 0;
}

static void test_ketama_nutcracker(const char *path)
{
	static const struct {
		const char *name;
		uint64_t (*key)(const void *, size_t);
	} hashes[] = {
		{ "md5", ring_ketama_key },
		{ "fnv1a_64", ring_ketama_key_fnv1a64 },
	};
	size_t keys[2] = { 0, 0 }, good[2] = { 0, 0 }, high = 0;
	struct test_nc nc = { .n = 0 };
	struct ring_point *p = NULL;
	size_t np = 0;
	char line[1024], err[256] = "";
	FILE *f = fopen(path, "r");

	if (!tap_ok(f != NULL, "ketama: %s opens", path))
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		char a[600], b[600], c[64];
		unsigned w;

		if (nc.n < TEST_NC_MAX &&
		    sscanf(line, "server %63s %u %31s", nc.ids[nc.n], &w, nc.labels[nc.n]) == 3) {
			nc.m[nc.n] = (struct ring_member){ nc.labels[nc.n], w, nc.ids[nc.n] };
			nc.n++;
			continue;
		}
		if (sscanf(line, "key %599s %599s %63s", a, b, c) != 3)
			continue;
		if (p == NULL) {
			if (!tap_ok(ring_ketama_points(nc.m, nc.n, &p, &np, err, sizeof(err)) == 0 &&
				    np > 0, "ketama: nutcracker's %zu servers build (%s)", nc.n, err))
				break;
			test_sort(p, np);
		}
		for (size_t h = 0; h < TEST_N(hashes); h++) {
			unsigned char key[300];
			size_t len;

			if (strcmp(a, hashes[h].name) != 0 ||
			    test_unhex(b, key, sizeof(key), &len) != 0)
				continue;
			const char *got = nc.m[p[test_lookup(p, np, hashes[h].key(key, len))].backend].name;

			keys[h]++;
			if (strcmp(got, c) == 0)
				good[h]++;
			else if (keys[h] - good[h] <= 5)
				tap_diag("  %s key %s: nutcracker chose %s, we chose %s",
					 a, b, c, got);
			for (size_t i = 0; i < len; i++)
				high += key[i] >= 0x80;
		}
	}
	fclose(f);
	for (size_t h = 0; h < TEST_N(hashes); h++)
		tap_ok(keys[h] >= 100 && good[h] == keys[h],
		       "ketama: with hash %s, each of %zu keys goes where nutcracker sent it (%zu do)",
		       hashes[h].name, keys[h], good[h]);
	tap_ok(high > 0, "ketama: the keys include bytes of 0x80 and more (%zu)", high);
	free(p);
}

static void test_ketama_fnv(void)
{
	/* "" is the offset basis; "a": (0x84222325 ^ 0x61) * 0x1b3 mod 2^32;
	 * "\xe9": the byte widened as a signed char, 0xffffffe9 */
	tap_is_int(ring_ketama_key_fnv1a64("", 0), (uint64_t)0x84222325u << 32,
		   "fnv1a_64: the empty key is twemproxy's 32-bit offset basis");
	tap_is_int(ring_ketama_key_fnv1a64("a", 1),
		   (uint64_t)(uint32_t)((0x84222325u ^ 0x61u) * 0x1b3u) << 32,
		   "fnv1a_64: one byte is xor then multiply by 0x1b3");
	tap_is_int(ring_ketama_key_fnv1a64("\xe9", 1),
		   (uint64_t)(uint32_t)((0x84222325u ^ 0xffffffe9u) * 0x1b3u) << 32,
		   "fnv1a_64: a byte >= 0x80 is widened as twemproxy's signed char");
}

typedef int test_build_fn(const struct ring_member *m, size_t n, struct ring_point **out,
			  size_t *nout, char *err, size_t errlen);

static int test_ketama_build(const struct ring_member *m, size_t n, struct ring_point **out,
			     size_t *nout, char *err, size_t errlen)
{
	return ring_ketama_points(m, n, out, nout, err, errlen);
}

static int test_envoy_build(const struct ring_member *m, size_t n, struct ring_point **out,
			    size_t *nout, char *err, size_t errlen)
{
	return ring_envoy_points(m, n, RING_ENVOY_MIN_RING_SIZE, RING_ENVOY_MAX_RING_SIZE,
				 out, nout, err, errlen);
}

/* A ring and the same with a member of weight 0 put in at index 1: the
 * same points, the indexes past it shifted by one. */
static void test_drained(const char *scheme, test_build_fn *build)
{
	const struct ring_member live[] = { { "a", 1, NULL }, { "c", 3, "10.0.0.3:80" } };
	const struct ring_member with[] = { { "a", 1, NULL }, { "b", 0, NULL },
					    { "c", 3, "10.0.0.3:80" } };
	struct ring_point *p = NULL, *q = NULL;
	size_t np = 0, nq = 0, same = 0;
	char err[256] = "";

	if (build(live, 2, &p, &np, err, sizeof(err)) == 0 &&
	    build(with, 3, &q, &nq, err, sizeof(err)) == 0 && np == nq) {
		test_sort(p, np);
		test_sort(q, nq);
		for (size_t i = 0; i < np; i++)
			same += p[i].pos == q[i].pos &&
				q[i].backend == (p[i].backend == 0 ? 0u : 2u);
	}
	tap_ok(np > 0 && same == np && nq == np,
	       "%s: a member of weight 0 is as if not listed (%zu of %zu points alike)",
	       scheme, same, np);
	free(p);
	free(q);
}

/* rc and *p as a builder left them: refused, no points, err saying want. */
static void test_refused(const char *what, int rc, struct ring_point **p, const char *err,
			 const char *want)
{
	tap_ok(rc == -1 && *p == NULL && strstr(err, want) != NULL, "%s is refused: %s", what, err);
	*p = (void *)1;
}

static void test_ketama_refusals(void)
{
	const struct ring_member half[] = { { "a", 1, NULL }, { "b", 0.5, NULL } };
	const struct ring_member noid[] = { { "a", 1, NULL }, { "b", 1, "" } };
	const struct ring_member heavy[] = { { "a", 4294967295.0, NULL }, { "b", 1, NULL } };
	const struct ring_member none[] = { { "a", 0, NULL } };
	struct ring_point *p = (void *)1;
	size_t np = 1;
	char err[256] = "";

	test_refused("ketama: weight 0.5",
		     ring_ketama_points(half, 2, &p, &np, err, sizeof(err)), &p, err,
		     "backend b: weight 0.5 is not a whole number");
	test_refused("ketama: an empty id", ring_ketama_points(noid, 2, &p, &np, err, sizeof(err)),
		     &p, err, "backend 1 has no name or id");
	test_refused("ketama: a total weight past 32 bits",
		     ring_ketama_points(heavy, 2, &p, &np, err, sizeof(err)), &p, err,
		     "total weight 4294967296");
	tap_ok(ring_ketama_points(none, 1, &p, &np, err, sizeof(err)) == 0 && p == NULL &&
	       np == 0, "ketama: no weight at all is an empty ring");
}

/* Envoy's rings, from test/extensions/load_balancing_policies/ring_hash/
 * ring_hash_lb_test.cc: hosts, minimum and maximum ring size, the ring's
 * size and points per host (what its min/max_hashes_per_host stats say),
 * the ring where the test lists it (position and host index, in ring
 * order; none: nring 0) and keys with the host each must reach. */
struct test_envoy_ring {
	const char *test;
	const char *ids[6];
	unsigned weights[6];
	unsigned min, max;
	size_t npoints;
	unsigned per_host[6];
	size_t nring;
	struct { uint64_t pos; unsigned host; } ring[12];
	struct { uint64_t key; unsigned host; } picks[6];
	size_t npicks;
};

static const struct test_envoy_ring test_envoy_rings[] = {
	{ "Basic",
	  { "127.0.0.1:90", "127.0.0.1:91", "127.0.0.1:92", "127.0.0.1:93", "127.0.0.1:94",
	    "127.0.0.1:95" }, { 1, 1, 1, 1, 1, 1 }, 12, RING_ENVOY_MAX_RING_SIZE, 12,
	  { 2, 2, 2, 2, 2, 2 }, 12,
	  { { 833437586790550860u, 4 }, { 928266305478181108u, 2 },
	    { 1033482794131418490u, 0 }, { 3551244743356806947u, 5 },
	    { 3851675632748031481u, 3 }, { 5583722120771150861u, 1 },
	    { 6311230543546372928u, 1 }, { 7700377290971790572u, 3 },
	    { 13144177310400110813u, 5 }, { 13444792449719432967u, 2 },
	    { 15516499411664133160u, 4 }, { 16117243373044804889u, 0 } },
	  { { 0, 4 }, { UINT64_MAX, 4 }, { 3551244743356806947u, 5 },
	    { 3551244743356806948u, 3 }, { 16117243373044804880u, 0 } }, 5 },
	{ "BasicWithHostname (hash keys 90..95)",
	  { "90", "91", "92", "93", "94", "95" }, { 1, 1, 1, 1, 1, 1 }, 12,
	  RING_ENVOY_MAX_RING_SIZE, 12, { 2, 2, 2, 2, 2, 2 }, 12,
	  { { 1975508444536362413u, 5 }, { 2376063919839173711u, 5 },
	    { 2386806903309390596u, 3 }, { 6749904478991551885u, 4 },
	    { 6803900775736438537u, 3 }, { 7225015537174310577u, 2 },
	    { 8787465352164086522u, 0 }, { 11282020843382717940u, 2 },
	    { 13723418369486627818u, 1 }, { 13776502110861797421u, 0 },
	    { 14338313586354474791u, 1 }, { 15364271037087512980u, 4 } },
	  { { 0, 5 }, { UINT64_MAX, 5 }, { 7225015537174310577u, 2 },
	    { 6803900775736438537u, 3 } }, 4 },
	{ "UnevenHosts", { "127.0.0.1:80", "127.0.0.1:81" }, { 1, 1 }, 3,
	  RING_ENVOY_MAX_RING_SIZE, 4, { 2, 2 }, 4,
	  { { 5454692015285649509u, 0 }, { 7859399908942313493u, 1 },
	    { 13838424394637650569u, 0 }, { 16064866803292627174u, 1 } },
	  { { 0, 0 } }, 1 },
	{ "UnevenHosts, after the change", { "127.0.0.1:81", "127.0.0.1:82" }, { 1, 1 }, 3,
	  RING_ENVOY_MAX_RING_SIZE, 4, { 2, 2 }, 4,
	  { { 7859399908942313493u, 0 }, { 8241336090459785962u, 1 },
	    { 12882406409176325258u, 1 }, { 16064866803292627174u, 0 } },
	  { { 0, 0 } }, 1 },
	{ "HostWeightedTinyRing", { "127.0.0.1:90", "127.0.0.1:91", "127.0.0.1:92" },
	  { 1, 2, 3 }, 6, 6, 6, { 1, 2, 3 }, 0, { { 0, 0 } },
	  { { 928266305478181108u, 2 }, { 4443673547860492590u, 2 },
	    { 5583722120771150861u, 1 }, { 6311230543546372928u, 1 },
	    { 13444792449719432967u, 2 }, { 16117243373044804889u, 0 } }, 6 },
};

static void test_envoy_ring(const struct test_envoy_ring *t)
{
	struct ring_member m[6];
	struct ring_point *p = NULL;
	size_t n = 0, np = 0, same = 0, counts_ok = 0;
	unsigned count[6] = { 0 };
	char err[256] = "";

	while (n < TEST_N(t->ids) && t->ids[n] != NULL) {
		m[n] = (struct ring_member){ t->ids[n], t->weights[n], NULL };
		n++;
	}
	if (!tap_ok(ring_envoy_points(m, n, t->min, t->max, &p, &np, err, sizeof(err)) == 0,
		    "envoy %s: builds (%s)", t->test, err))
		return;
	test_sort(p, np);
	tap_is_int(np, t->npoints, "envoy %s: %zu points", t->test, t->npoints);
	for (size_t i = 0; i < np; i++)
		count[p[i].backend < n ? p[i].backend : 0]++;
	for (size_t b = 0; b < n; b++)
		counts_ok += count[b] == t->per_host[b];
	tap_is_int(counts_ok, n, "envoy %s: each host has Envoy's number of points", t->test);
	if (t->nring > 0) {
		for (size_t i = 0; i < np && i < t->nring; i++)
			same += p[i].pos == t->ring[i].pos && p[i].backend == t->ring[i].host;
		tap_is_int(same, t->nring, "envoy %s: the ring is Envoy's, point for point",
			   t->test);
	}
	for (size_t i = 0; i < t->npicks; i++) {
		size_t at = test_lookup(p, np, t->picks[i].key);

		tap_is_int(p[at].backend, t->picks[i].host, "envoy %s: hash %llu reaches host %u",
			   t->test, (unsigned long long)t->picks[i].key, t->picks[i].host);
		tap_is_int(at, test_envoy_choose(p, np, t->picks[i].key),
			   "envoy %s: chooseHost's search finds the same point", t->test);
	}
	free(p);
}

/* On a bigger ring, weighted, with keys at, just before and just after
 * every point, 0, the top and random: the framework's lookup and Envoy's
 * search agree. */
static void test_envoy_search(void)
{
	const struct ring_member m[] = { { "a", 1, "10.0.0.1:80" }, { "b", 3, "10.0.0.2:80" },
					 { "c", 2, "[2001:db8::3]:80" } };
	struct ring_point *p = NULL;
	size_t np = 0, tried = 0, agree = 0;
	char err[256] = "";
	uint64_t x = 0x9e3779b97f4a7c15u;

	if (!tap_ok(ring_envoy_points(m, 3, 100, 1000, &p, &np, err, sizeof(err)) == 0,
		    "envoy: a weighted ring builds (%s)", err))
		return;
	test_sort(p, np);
	/* min_w 1/6: scale ceil(100/6) * 6 = 102; 17, 51, 34 points */
	tap_is_int(np, 102, "envoy: weights 1:3:2 at minimum_ring_size 100 give 102 points");
	for (size_t i = 0; i < np; i++) {
		uint64_t k[3] = { p[i].pos - 1, p[i].pos, p[i].pos + 1 };

		for (int j = 0; j < 3; j++, tried++)
			agree += test_lookup(p, np, k[j]) == test_envoy_choose(p, np, k[j]);
	}
	for (int i = 0; i < 10000; i++, tried++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		agree += test_lookup(p, np, x) == test_envoy_choose(p, np, x);
	}
	agree += test_lookup(p, np, 0) == test_envoy_choose(p, np, 0);
	agree += test_lookup(p, np, UINT64_MAX) == test_envoy_choose(p, np, UINT64_MAX);
	tried += 2;
	tap_is_int(agree, tried, "envoy: first point >= key is chooseHost's pick for %zu keys",
		   tried);
	free(p);
}

static void test_envoy_key(void)
{
	/* xxHash64's reference values for seed 0, and Envoy's hash_test.cc
	 * value for "foo" */
	tap_is_int(ring_envoy_key("", 0), 0xef46db3751d8e999u, "envoy: xxHash64 of \"\"");
	tap_is_int(ring_envoy_key("foo", 3), 3728699739546630719u, "envoy: xxHash64 of \"foo\"");
}

static void test_envoy_refusals(void)
{
	const struct ring_member m[] = { { "a", 1, NULL }, { "b", 2, NULL } };
	const struct ring_member half[] = { { "a", 1.5, NULL } };
	const struct ring_member none[] = { { "a", 0, NULL }, { "b", 0, NULL } };
	const struct ring_member big[] = { { "a", 1, NULL }, { "b", 100000000, NULL } };
	struct ring_point *p = (void *)1;
	size_t np = 1;
	char err[256] = "";

	test_refused("envoy: minimum_ring_size above maximum_ring_size",
		     ring_envoy_points(m, 2, 20, 10, &p, &np, err, sizeof(err)), &p, err,
		     "ring sizes 20 to 10");
	test_refused("envoy: minimum_ring_size 0",
		     ring_envoy_points(m, 2, 0, 10, &p, &np, err, sizeof(err)), &p, err,
		     "ring sizes 0 to 10");
	test_refused("envoy: maximum_ring_size past Envoy's 8388608",
		     ring_envoy_points(m, 2, 10, 8388609, &p, &np, err, sizeof(err)), &p, err,
		     "<= 8388608");
	test_refused("envoy: weight 1.5",
		     ring_envoy_points(half, 1, 10, 10, &p, &np, err, sizeof(err)), &p, err,
		     "backend a: weight 1.5 is not a whole number");
	test_refused("envoy: a ring past RING_MAX_POINTS",
		     ring_envoy_points(big, 2, 1024, RING_ENVOY_MAX_RING_SIZE, &p, &np, err,
				       sizeof(err)), &p, err, "more than 2097152 points");
	tap_ok(ring_envoy_points(none, 2, 10, 10, &p, &np, err, sizeof(err)) == 0 &&
	       p == NULL && np == 0, "envoy: no weight at all is an empty ring");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: test-compat-ring VECTORS-NUTCRACKER.TXT\n");
		return 2;
	}
	test_ketama_libmemcached();
	test_ketama_nutcracker(argv[1]);
	test_ketama_fnv();
	test_ketama_refusals();
	test_drained("ketama", test_ketama_build);
	for (size_t i = 0; i < TEST_N(test_envoy_rings); i++)
		test_envoy_ring(&test_envoy_rings[i]);
	test_envoy_search();
	test_envoy_key();
	test_envoy_refusals();
	test_drained("envoy", test_envoy_build);
	return tap_done();
}
