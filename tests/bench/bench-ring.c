/*
 * bench-ring.c -- how fast ring.c places a request key, and how long a
 * ring takes to build, for 10, 100 and 1,000 backends at 160 vnodes.
 * Prints a Markdown table. Not a test: run it by hand on a release build
 * (meson setup build-rel -Dbuildtype=release). Goals: hash + lookup at
 * most 300 ns a key, a 1,000 x 160 build at most 100 ms.
 */
#include "ring/ring.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_NKEYS  (1u << 16)     /* distinct keys, cycled */
#define BENCH_ROUNDS 16             /* passes over the keys */
#define BENCH_BUILDS 5              /* builds timed; the best is kept */
#define BENCH_VNODES 160

static uint64_t bench_rng = 0xbe9c4;

/* splitmix64, so every run measures the same keys. */
static uint64_t bench_rand(void)
{
	uint64_t z = (bench_rng += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Thumbnail URLs like /thumbs/1234/5678_200x200.jpg, about 30 bytes. */
struct bench_key {
	char s[48];
	size_t len;
};

static struct ring *bench_build(size_t n, double *best_ms)
{
	struct ring_member *m = calloc(n, sizeof(*m));
	char (*names)[32] = calloc(n, sizeof(*names));
	struct ring *r = NULL;
	char err[256];

	*best_ms = 1e300;
	if (m == NULL || names == NULL)
		goto out;
	for (size_t i = 0; i < n; i++) {
		snprintf(names[i], sizeof(names[i]), "cache-%zu", i + 1);
		m[i].name = names[i];
		m[i].weight = 1;
	}
	for (int k = 0; k < BENCH_BUILDS; k++) {
		double t0 = bench_now(), ms;

		ring_free(r);
		r = ring_build(m, n, RING_SCHEME_RINGPROXY, BENCH_VNODES, err, sizeof(err));
		ms = (bench_now() - t0) / 1e6;
		if (r == NULL) {
			fprintf(stderr, "bench-ring: %s\n", err);
			goto out;
		}
		if (ms < *best_ms)
			*best_ms = ms;
	}
out:
	free(names);
	free(m);
	return r;
}

int main(void)
{
	static const size_t sizes[] = { 10, 100, 1000 };
	struct bench_key *keys = malloc(BENCH_NKEYS * sizeof(*keys));
	uint64_t *pos = malloc(BENCH_NKEYS * sizeof(*pos));
	const double nops = (double)BENCH_NKEYS * BENCH_ROUNDS;
	volatile uint64_t sink = 0;
	double t0, hash_ns;
	int rc = 1;

	if (keys == NULL || pos == NULL)
		goto out;
	for (size_t i = 0; i < BENCH_NKEYS; i++) {
		int n = snprintf(keys[i].s, sizeof(keys[i].s),
				 "/thumbs/%u/%u_200x200.jpg",
				 (unsigned)(bench_rand() % 10000),
				 (unsigned)(bench_rand() % 100000));

		keys[i].len = (size_t)n;
		pos[i] = ring_hash(keys[i].s, keys[i].len);  /* warms the ctx */
	}

	/* The hash does not depend on the ring: measure it once. */
	t0 = bench_now();
	for (int k = 0; k < BENCH_ROUNDS; k++)
		for (size_t i = 0; i < BENCH_NKEYS; i++)
			sink += ring_hash(keys[i].s, keys[i].len);
	hash_ns = (bench_now() - t0) / nops;

	printf("| backends | points | build (ms) | hash (ns/key) | "
	       "lookup (ns/key) | hash + lookup (ns/key) |\n");
	printf("|---:|---:|---:|---:|---:|---:|\n");
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		double build_ms, lookup_ns, both_ns;
		struct ring *r = bench_build(sizes[s], &build_ms);

		if (r == NULL)
			goto out;
		t0 = bench_now();
		for (int k = 0; k < BENCH_ROUNDS; k++)
			for (size_t i = 0; i < BENCH_NKEYS; i++)
				sink += (uint64_t)ring_lookup(r, pos[i]);
		lookup_ns = (bench_now() - t0) / nops;
		t0 = bench_now();
		for (int k = 0; k < BENCH_ROUNDS; k++)
			for (size_t i = 0; i < BENCH_NKEYS; i++)
				sink += (uint64_t)ring_lookup(r,
					ring_hash(keys[i].s, keys[i].len));
		both_ns = (bench_now() - t0) / nops;
		printf("| %zu | %zu | %.1f | %.0f | %.0f | %.0f |\n",
		       sizes[s], r->npoints, build_ms, hash_ns, lookup_ns,
		       both_ns);
		ring_free(r);
	}
	printf("\n%u keys x %u rounds; build: best of %d; sink %llu\n",
	       BENCH_NKEYS, BENCH_ROUNDS, BENCH_BUILDS,
	       (unsigned long long)(sink & 1));
	rc = 0;
out:
	free(pos);
	free(keys);
	return rc;
}
