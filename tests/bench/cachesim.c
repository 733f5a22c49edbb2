/*
 * cachesim.c -- hit ratios of the real cache.c policies over synthetic
 * traces, to choose the eviction order and admission (tests/bench/README.md,
 * "Cache policy"), and how many objects each stores to get them: a store copies
 * and allocates a body and evicts another, so stores are what the cache
 * costs a request that does not hit.
 *
 * Every request goes through cache_lookup() and, on a miss, through what
 * the proxy does with it: cache_fill_want(), then a whole fill
 * (cache_fill_begin/body/done) of a 4 KiB body. The objects are real, so
 * the byte accounting (struct, key, head, body) is the one the proxy has,
 * and a cache of 1% of the object set holds a little under 1% of the
 * objects. The baseline LRU is cache.c with CACHE_POLICY_LRU on one shard
 * storing every miss (a plain global LRU, no admission); the admission
 * policies run with the shard count the proxy would pick for that size
 * (1, 2 and 16 shards here), each shard evicting against its share of the
 * size, and with the proxy's min_uses (2), doorkeeper and admission at
 * the fetch's start unless a column says otherwise. "static" is an
 * oracle: the hit ratio of keeping, forever, the N objects most requested
 * in the measured part of the trace, N being what fits.
 *
 * Traces (fixed seed, generated in process), 200,000 objects of 4 KiB:
 *   zipf-0.7 / zipf-0.9 / zipf-1.1  Zipf popularity with exponent s
 *   onehit-60   60% of requests to keys asked for exactly once, 40%
 *               Zipf 0.9 over the objects
 *   scan        Zipf 0.9, with every 100,000 requests a 20,000-request
 *               sequential crawl over the object set (20% of requests)
 *   uniform-1m  uniform over 1,000,000 keys: a long tail that repeats,
 *               too rarely to hit (tests/bench/compare.sh URLS=1000000)
 * Each trace has 3,000,000 requests; the first 1,000,000 warm the cache,
 * the hit ratio and stores are over the rest. Cache sizes: 0.1%, 1%, 8%
 * of the object set (800 KiB, 8 MiB, 64 MiB).
 *
 * Usage: cachesim [--detail] [--requests N]
 *   --detail  also compare shard counts, the doorkeeper, min_uses and
 *             where admission is decided
 * Run on a release build; it takes a minute, --detail four more.
 */
#include "cache/cache.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SIM_OBJECTS  200000u
#define SIM_BODY     4096u
#define SIM_NOW      INT64_C(1700000000)
#define SIM_SEED     0x51a5eedu
#define SIM_TAIL     1000000u   /* keys of the uniform long tail */

static uint64_t sim_rng;

static uint64_t sim_rand(void)
{
	uint64_t z = (sim_rng += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

static double sim_unit(void)
{
	return (double)(sim_rand() >> 11) / (double)(UINT64_C(1) << 53);
}

/* Zipf over SIM_OBJECTS ranks by inverting the CDF. */
struct sim_zipf {
	double *cdf;
};

static int sim_zipf_init(struct sim_zipf *z, double s)
{
	double sum = 0;
	unsigned i;

	z->cdf = malloc(SIM_OBJECTS * sizeof(double));
	if (z->cdf == NULL)
		return -1;
	for (i = 0; i < SIM_OBJECTS; i++) {
		sum += 1.0 / pow((double)(i + 1), s);
		z->cdf[i] = sum;
	}
	for (i = 0; i < SIM_OBJECTS; i++)
		z->cdf[i] /= sum;
	return 0;
}

static uint32_t sim_zipf_draw(const struct sim_zipf *z)
{
	double u = sim_unit();
	uint32_t lo = 0, hi = SIM_OBJECTS - 1;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (z->cdf[mid] < u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

enum sim_trace { T_ZIPF07, T_ZIPF09, T_ZIPF11, T_ONEHIT, T_SCAN, T_TAIL, T_COUNT };

static const char *const sim_trace_names[T_COUNT] = {
	"zipf-0.7", "zipf-0.9", "zipf-1.1", "onehit-60", "scan", "uniform-1m",
};

/* The trace's object ids; ids >= SIM_OBJECTS are one-hit wonders. */
static uint32_t *sim_make_trace(enum sim_trace t, size_t n)
{
	static const double s_of[T_COUNT] = { 0.7, 0.9, 1.1, 0.9, 0.9, 0.9 };
	uint32_t *ids = malloc(n * sizeof(*ids)), unique = SIM_OBJECTS, crawl = 0;
	struct sim_zipf z;
	size_t i;

	if (ids == NULL || sim_zipf_init(&z, s_of[t]) < 0) {
		free(ids);
		return NULL;
	}
	sim_rng = SIM_SEED + (uint64_t)t;
	for (i = 0; i < n; i++) {
		if (t == T_ONEHIT && sim_unit() < 0.6)
			ids[i] = unique++;
		else if (t == T_SCAN && i % 100000 >= 80000)
			ids[i] = crawl++ % SIM_OBJECTS;
		else if (t == T_TAIL)
			ids[i] = (uint32_t)(sim_rand() % SIM_TAIL);
		else
			ids[i] = sim_zipf_draw(&z);
	}
	free(z.cdf);
	return ids;
}

/* A policy as cache_params sets it; min_uses as [cache] min_uses (the
 * proxy's default is 2; 1 makes every miss a candidate). */
struct sim_run {
	enum cache_policy policy;
	unsigned shards;        /* 0: what the proxy picks */
	unsigned min_uses;
	bool no_doorkeeper, late_admission;
};

/* What a replay measured, over the part after the warm-up. */
struct sim_result {
	double hit;             /* hit ratio */
	double stores;          /* objects stored per request */
};

/* Parsed once: every miss stores this head with a 4 KiB body. */
struct sim_resp {
	char buf[256];
	struct http1_msg m;
	struct http1_header h[16];
	struct cachectl_meta meta;
};

static int sim_resp_init(struct sim_resp *r)
{
	static const struct http1_limits lim = { 8192, 16 };
	struct cachectl_req cr = { .kind = CACHECTL_LOOKUP, .max_age = -1 };

	snprintf(r->buf, sizeof(r->buf), "HTTP/1.1 200 OK\r\n"
		 "Cache-Control: max-age=86400\r\nContent-Type: image/jpeg\r\n"
		 "Content-Length: %u\r\n\r\n", SIM_BODY);
	http1_msg_init(&r->m);
	if (http1_parse_response(&r->m, r->h, r->buf, strlen(r->buf), &lim, HTTP1_M_GET) <= 0)
		return -1;
	return cachectl_response(&cr, HTTP1_M_GET, &r->m, SIM_NOW, SIM_NOW, 0, &r->meta) ? 0 : -1;
}

static size_t sim_key(char *buf, uint32_t id)
{
	return (size_t)snprintf(buf, 48, "img.example/thumbs/%u/%u_200x200.jpg", id % 997, id);
}

/*
 * Replay ids[0..n) through a cache of size bytes, each miss driven as the
 * proxy drives it (cache_fill_want, then the fill). *charge gets one
 * object's charge (for the oracle).
 */
static struct sim_result sim_replay(const uint32_t *ids, size_t n, size_t warm,
				    size_t size, const struct sim_run *run,
				    const struct sim_resp *resp, size_t *charge)
{
	static char body[SIM_BODY];
	struct cache_params p = { .size = size, .max_object = 1 << 20,
				  .shards = run->shards, .policy = run->policy,
				  .no_doorkeeper = run->no_doorkeeper,
				  .late_admission = run->late_admission,
				  .seed = SIM_SEED, .min_uses = run->min_uses };
	struct cache_stats st;
	struct sim_result res;
	struct cache *c;
	size_t i, hits = 0, stores0 = 0;
	char err[128], key[48];

	c = cache_new(&p, err, sizeof(err));
	if (c == NULL) {
		fprintf(stderr, "cachesim: %s\n", err);
		exit(1);
	}
	for (i = 0; i < n; i++) {
		struct cache_req r;
		struct cache_obj *o;
		struct cache_fill *f;

		if (i == warm) {
			cache_stats(c, &st);
			stores0 = st.stores;
		}
		memset(&r, 0, sizeof(r));
		cache_key_init(c, &r.key, key, sim_key(key, ids[i]));
		r.now = SIM_NOW;
		r.max_age = -1;
		switch (cache_lookup(c, &r, NULL, &o, &f)) {
		case CACHE_HIT:
			hits += i >= warm;
			if (charge != NULL)
				*charge = cache_obj_charge(o);
			cache_obj_release(o);
			break;
		case CACHE_MISS:
			if (cache_fill_want(f) == 0
			    && cache_fill_begin(f, &resp->m, &resp->meta, "sim", 3) == 0
			    && cache_fill_body(f, body, sizeof(body)) == 0)
				cache_fill_done(f);
			break;
		default:
			fprintf(stderr, "cachesim: unexpected lookup result\n");
			exit(1);
		}
	}
	cache_stats(c, &st);
	cache_free(c);
	res.hit = (double)hits / (double)(n - warm);
	res.stores = (double)(st.stores - stores0) / (double)(n - warm);
	return res;
}

static int sim_cmp_desc(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? 1 : x > y ? -1 : 0;
}

/* The oracle: the k most requested ids of ids[warm..n), kept forever. */
static double sim_static(const uint32_t *ids, size_t n, size_t warm, size_t k)
{
	uint32_t max = 0, *cnt;
	size_t i, sum = 0;

	for (i = warm; i < n; i++)
		if (ids[i] > max)
			max = ids[i];
	cnt = calloc((size_t)max + 1, sizeof(*cnt));
	if (cnt == NULL)
		return 0;
	for (i = warm; i < n; i++)
		cnt[ids[i]]++;
	qsort(cnt, (size_t)max + 1, sizeof(*cnt), sim_cmp_desc);
	for (i = 0; i < k && i <= max; i++)
		sum += cnt[i];
	free(cnt);
	return (double)sum / (double)(n - warm);
}

static double sim_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static const double sim_pcts[] = { 0.1, 1.0, 8.0 };

static size_t sim_size(unsigned k)
{
	return (size_t)(sim_pcts[k] / 100 * SIM_OBJECTS * SIM_BODY);
}

/* The main table: LRU (every miss stored), the two admission policies as
 * the proxy runs them, the oracle; and what each stores. */
static void sim_table(uint32_t *const *traces, size_t n, size_t warm,
		      const struct sim_resp *resp)
{
	static const struct sim_run lru = { CACHE_POLICY_LRU, 1, 1, true, true },
		wt = { CACHE_POLICY_WTINYLFU, 0, 2, false, false },
		s3 = { CACHE_POLICY_S3FIFO, 0, 2, false, false };
	unsigned t, k;

	printf("| trace | cache size | objects it holds | LRU | W-TinyLFU | S3-FIFO | static (oracle) | W-TinyLFU / LRU | stored per 100 requests: LRU | W-TinyLFU | S3-FIFO |\n");
	printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
	for (t = 0; t < T_COUNT; t++) {
		for (k = 0; k < 3; k++) {
			size_t size = sim_size(k), charge = 1;
			double t0 = sim_now(), h_st;
			struct sim_result r_lru, r_wt, r_s3;

			r_lru = sim_replay(traces[t], n, warm, size, &lru, resp, &charge);
			r_wt = sim_replay(traces[t], n, warm, size, &wt, resp, NULL);
			r_s3 = sim_replay(traces[t], n, warm, size, &s3, resp, NULL);
			h_st = sim_static(traces[t], n, warm, size / charge);
			printf("| %s | %.1f%% | %zu | %.1f%% | %.1f%% | %.1f%% | %.1f%% | %.2f | %.1f | %.1f | %.1f |\n",
			       sim_trace_names[t], sim_pcts[k], size / charge, 100 * r_lru.hit,
			       100 * r_wt.hit, 100 * r_s3.hit, 100 * h_st,
			       r_lru.hit > 0 ? r_wt.hit / r_lru.hit : 0,
			       100 * r_lru.stores, 100 * r_wt.stores, 100 * r_s3.stores);
			fflush(stdout);
			fprintf(stderr, "  %s %.1f%%: %.1f s\n", sim_trace_names[t],
				sim_pcts[k], sim_now() - t0);
		}
	}
}

/* W-TinyLFU on 1 shard, the proxy's count, 16; without admission at the
 * fetch's start, without the doorkeeper, with every miss a candidate, with
 * none of the three (as before they were added); S3-FIFO likewise. */
static void sim_detail(uint32_t *const *traces, size_t n, size_t warm,
		       const struct sim_resp *resp)
{
	static const struct sim_run runs[] = {
		{ CACHE_POLICY_WTINYLFU, 1, 2, false, false },
		{ CACHE_POLICY_WTINYLFU, 0, 2, false, false },
		{ CACHE_POLICY_WTINYLFU, 16, 2, false, false },
		{ CACHE_POLICY_WTINYLFU, 0, 2, false, true },
		{ CACHE_POLICY_WTINYLFU, 0, 2, true, false },
		{ CACHE_POLICY_WTINYLFU, 0, 1, false, false },
		{ CACHE_POLICY_WTINYLFU, 0, 1, true, true },
		{ CACHE_POLICY_S3FIFO, 0, 2, false, true },
		{ CACHE_POLICY_S3FIFO, 0, 1, true, true },
	};
	unsigned t, k, j;

	printf("\nHit ratio, and (after the slash) objects stored per 100 requests:\n\n");
	printf("| trace | cache size | W-TinyLFU 1 shard | W-TinyLFU as the proxy shards it | 16 shards | admission only when leaving the window | no doorkeeper | min_uses 1 | min_uses 1, no doorkeeper, admission only when leaving the window | S3-FIFO, admission only when leaving the small queue | S3-FIFO, min_uses 1, no doorkeeper, admission only when leaving |\n");
	printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
	for (t = 0; t < T_COUNT; t++) {
		for (k = 0; k < 3; k++) {
			printf("| %s | %.1f%% |", sim_trace_names[t], sim_pcts[k]);
			for (j = 0; j < sizeof(runs) / sizeof(runs[0]); j++) {
				struct sim_result r = sim_replay(traces[t], n, warm, sim_size(k),
								 &runs[j], resp, NULL);

				printf(" %.1f%% / %.1f |", 100 * r.hit, 100 * r.stores);
			}
			printf("\n");
			fflush(stdout);
		}
	}
}

int main(int argc, char **argv)
{
	uint32_t *traces[T_COUNT];
	struct sim_resp resp;
	size_t n = 3000000, warm;
	bool detail = false;
	unsigned t;
	int i;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--detail") == 0) {
			detail = true;
		} else if (strcmp(argv[i], "--requests") == 0 && i + 1 < argc) {
			n = strtoul(argv[++i], NULL, 10);
		} else {
			fprintf(stderr, "usage: cachesim [--detail] [--requests N]\n");
			return 2;
		}
	}
	warm = n / 3;
	if (sim_resp_init(&resp) < 0) {
		fprintf(stderr, "cachesim: bad response head\n");
		return 1;
	}
	for (t = 0; t < T_COUNT; t++) {
		traces[t] = sim_make_trace((enum sim_trace)t, n);
		if (traces[t] == NULL) {
			fprintf(stderr, "cachesim: out of memory\n");
			return 1;
		}
	}
	printf("%zu requests a trace over %u objects of %u bytes; hit ratio over the last %zu\n\n",
	       n, SIM_OBJECTS, SIM_BODY, n - warm);
	sim_table(traces, n, warm, &resp);
	if (detail)
		sim_detail(traces, n, warm, &resp);
	for (t = 0; t < T_COUNT; t++)
		free(traces[t]);
	return 0;
}
