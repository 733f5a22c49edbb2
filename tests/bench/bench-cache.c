/*
 * bench-cache.c -- what cache.c costs on the request path: a lookup that
 * misses (the goal: at most 0.3 us, so a workload without hits is not
 * slower than without the cache), a miss with its fill aborted, a hit
 * with its release, the key hash alone; the same with two threads at
 * once; and sketch increments from one and two threads.
 *
 * The cache is the proxy's default, 64 MiB (16 shards), filled first with
 * 14,000 objects of 4 KiB, so tables and sketches are the size they have
 * in service and a lookup pays its real cache misses. Keys look like
 * thumbnail URLs (about 40 bytes). Prints a Markdown table, best of 5
 * runs of each line. Not a test: run by hand on a release build.
 * Usage: bench-cache [wtinylfu|s3fifo|lru] (the eviction policy; default
 * the cache's default).
 */
#include "cache/cache.h"
#include "base/sketch.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define B_STORED   14000u
#define B_KEYS     (1u << 20)       /* miss keys, each used once a run */
#define B_BATCH    256u
#define B_RUNS     5
#define B_NOW      INT64_C(1700000000)

struct b_key {
	char s[48];
	size_t len;
};

static struct b_key *b_keys;       /* [0, B_STORED) stored, the rest not */
static struct cache *b_cache;
static struct sketch *b_sketch;

/* The calling thread's CPU time: on a machine shared with other work,
 * time the thread spent preempted is not the cache's. (A thread asleep
 * on a contended mutex is not counted either: the two-thread column is
 * the CPU a request pays, not its latency.) */
static double b_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void b_req(struct cache_req *r, const struct b_key *k)
{
	memset(r, 0, sizeof(*r));
	cache_key_init(b_cache, &r->key, k->s, k->len);
	r->now = B_NOW;
	r->max_age = -1;
}

static void b_fill(void)
{
	static const struct http1_limits lim = { 8192, 16 };
	static char body[4096];
	static const char head[] = "HTTP/1.1 200 OK\r\nCache-Control: max-age=86400\r\n"
				   "Content-Type: image/jpeg\r\nContent-Length: 4096\r\n\r\n";
	struct cachectl_req cr = { .kind = CACHECTL_LOOKUP, .max_age = -1 };
	struct http1_header h[16];
	struct cachectl_meta meta;
	struct http1_msg m;
	unsigned i, j;

	http1_msg_init(&m);
	http1_parse_response(&m, h, head, sizeof(head) - 1, &lim, HTTP1_M_GET);
	cachectl_response(&cr, HTTP1_M_GET, &m, B_NOW, B_NOW, 0, &meta);
	/* each key asked for twice first, so the sketch admits it */
	for (j = 0; j < 3; j++)
		for (i = 0; i < B_STORED; i++) {
			struct cache_req r;
			struct cache_obj *o;
			struct cache_fill *f;

			b_req(&r, &b_keys[i]);
			if (cache_lookup(b_cache, &r, NULL, &o, &f) == CACHE_MISS) {
				if (j < 2)
					cache_fill_abort(f);
				else if (cache_fill_begin(f, &m, &meta, "b", 1) == 0
					 && cache_fill_body(f, body, sizeof(body)) == 0)
					cache_fill_done(f);
			}
			cache_obj_release(o);
		}
}

/* What one thread measures: ns per operation over its share of keys. */
struct b_job {
	int kind;               /* 0 miss lookup, 1 miss + abort, 2 hit, 3 hash,
				   4 sketch shared, 5 sketch own */
	unsigned first, count;  /* keys used */
	double ns;
	pthread_barrier_t *bar;
};

static double b_misses(unsigned first, unsigned count, bool abort_timed)
{
	struct cache_fill *fills[B_BATCH];
	struct cache_obj *o;
	double total = 0, t0;
	unsigned i, j;

	for (i = 0; i < count; i += B_BATCH) {
		struct cache_req r;

		t0 = b_ns();
		for (j = 0; j < B_BATCH; j++) {
			b_req(&r, &b_keys[B_STORED + first + i + j]);
			cache_lookup(b_cache, &r, NULL, &o, &fills[j]);
		}
		if (abort_timed)
			for (j = 0; j < B_BATCH; j++)
				cache_fill_abort(fills[j]);
		total += b_ns() - t0;
		if (!abort_timed)
			for (j = 0; j < B_BATCH; j++)
				cache_fill_abort(fills[j]);
	}
	return total / count;
}

static double b_hits(unsigned first, unsigned count)
{
	struct cache_fill *f;
	struct cache_obj *o;
	struct cache_req r;
	double t0 = b_ns();
	unsigned i, bad = 0;

	for (i = 0; i < count; i++) {
		b_req(&r, &b_keys[(first + i * 7919u) % B_STORED]);
		bad += cache_lookup(b_cache, &r, NULL, &o, &f) != CACHE_HIT;
		cache_obj_release(o);
		if (f != NULL)
			cache_fill_abort(f);
	}
	if (bad)
		fprintf(stderr, "bench-cache: %u of %u hit lookups missed\n", bad, count);
	return (b_ns() - t0) / count;
}

static double b_sketch_run(struct sketch *s, unsigned first, unsigned count)
{
	double t0 = b_ns();
	unsigned i;

	for (i = 0; i < count; i++)
		sketch_increment(s, (uint64_t)((first + i) % 20000) * UINT64_C(0x9e3779b97f4a7c15));
	return (b_ns() - t0) / count;
}

static void *b_run(void *arg)
{
	struct b_job *j = arg;
	struct cache_key k;
	double t0;
	unsigned i;

	if (j->bar != NULL)
		pthread_barrier_wait(j->bar);
	switch (j->kind) {
	case 0:
	case 1:
		j->ns = b_misses(j->first, j->count, j->kind == 1);
		break;
	case 2:
		j->ns = b_hits(j->first, j->count);
		break;
	case 3:
		t0 = b_ns();
		for (i = 0; i < j->count; i++)
			cache_key_init(b_cache, &k, b_keys[B_STORED + j->first + i].s,
				       b_keys[B_STORED + j->first + i].len);
		j->ns = (b_ns() - t0) / j->count;
		if (k.hash == 0)
			fprintf(stderr, "bench-cache: a zero hash\n");
		break;
	case 4:
		j->ns = b_sketch_run(b_sketch, j->first, j->count);
		break;
	default: {
		struct sketch *own = sketch_new(16384, 4, 0, 0);

		j->ns = b_sketch_run(own, j->first, j->count);
		sketch_free(own);
		break;
	}
	}
	return NULL;
}

/* Best of B_RUNS of `threads` threads doing kind over count keys each;
 * the mean of the threads' ns per operation. */
static double b_best(int kind, unsigned threads, unsigned count)
{
	double best = 1e300;
	unsigned run, i;

	for (run = 0; run < B_RUNS; run++) {
		struct b_job jobs[2];
		pthread_t th[2];
		pthread_barrier_t bar;
		double sum = 0;

		pthread_barrier_init(&bar, NULL, threads);
		for (i = 0; i < threads; i++) {
			jobs[i] = (struct b_job){ kind, i * count, count, 0,
						  threads > 1 ? &bar : NULL };
			pthread_create(&th[i], NULL, b_run, &jobs[i]);
		}
		for (i = 0; i < threads; i++) {
			pthread_join(th[i], NULL);
			sum += jobs[i].ns;
		}
		pthread_barrier_destroy(&bar);
		if (sum / threads < best)
			best = sum / threads;
	}
	return best;
}

int main(int argc, char **argv)
{
	static const struct {
		int kind;
		const char *what;
		unsigned count;
	} lines[] = {
		{ 3, "key hash (cache_key_init)", B_KEYS / 2 },
		{ 0, "lookup, miss (creates the fill)", B_KEYS / 2 },
		{ 1, "lookup, miss + cache_fill_abort", B_KEYS / 2 },
		{ 2, "lookup, hit + cache_obj_release", B_KEYS / 2 },
		{ 4, "sketch_increment, one shared sketch", B_KEYS / 2 },
		{ 5, "sketch_increment, a sketch per thread", B_KEYS / 2 },
	};
	struct cache_params p = { .size = (size_t)64 << 20, .max_object = 1 << 20,
				  .seed = 0x5eed };
	char err[128];
	unsigned i;

	if (argc > 1 && strcmp(argv[1], "s3fifo") == 0)
		p.policy = CACHE_POLICY_S3FIFO;
	else if (argc > 1 && strcmp(argv[1], "lru") == 0)
		p.policy = CACHE_POLICY_LRU;
	else if (argc > 1 && strcmp(argv[1], "wtinylfu") != 0) {
		fprintf(stderr, "usage: bench-cache [wtinylfu|s3fifo|lru]\n");
		return 2;
	}
	b_keys = calloc(B_STORED + B_KEYS, sizeof(*b_keys));
	b_cache = cache_new(&p, err, sizeof(err));
	b_sketch = sketch_new(16384, 4, 0, 0);
	if (b_keys == NULL || b_cache == NULL || b_sketch == NULL) {
		fprintf(stderr, "bench-cache: %s\n", b_cache == NULL ? err : "out of memory");
		return 1;
	}
	for (i = 0; i < B_STORED + B_KEYS; i++)
		b_keys[i].len = (size_t)snprintf(b_keys[i].s, sizeof(b_keys[i].s),
						 "img.example/thumbs/%u/%u_200x200.jpg",
						 i % 997, i);
	b_fill();
	printf("| operation | 1 thread (ns) | 2 threads at once (ns each) |\n");
	printf("|---|---:|---:|\n");
	for (i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		double one = b_best(lines[i].kind, 1, lines[i].count);
		double two = b_best(lines[i].kind, 2, lines[i].count);

		printf("| %s | %.0f | %.0f |\n", lines[i].what, one, two);
	}
	cache_free(b_cache);
	sketch_free(b_sketch);
	free(b_keys);
	return 0;
}
