/*
 * stats.h -- a reading of the counters listed in stats-t.h, and its
 * renderings (JSON, Prometheus text; the HTML page is page.c's), all generated from
 * those lists. Collected on the main thread from the proxy's and the
 * registry's atomics and the workers' per-backend counters; the workers
 * are never stopped for it.
 */
#ifndef RINGPROXY_STATS_H
#define RINGPROXY_STATS_H

#include <stddef.h>
#include <stdint.h>

#include <stdbool.h>

#include "cache/cache.h"
#include "base/rates.h"
#include "base/stats-t.h"

struct evbuffer;
struct proxy;
struct proxy_reload;
struct ring;
struct ring_arc;

/* Points of the page's sparklines: 5 min in steps of 5 s. */
#define STATS_SPARK_STEP 5
#define STATS_SPARK (RATES_SECONDS / STATS_SPARK_STEP)
/* The rate windows (rates.h) in the order of the arrays below. */
#define STATS_WIN_ENUM(sec, label) STATS_WIN_##sec,
enum { RATES_WINDOWS(STATS_WIN_ENUM) STATS_NWIN };
#undef STATS_WIN_ENUM

/* A histogram of stats-t.h summed over the workers, and what is read from
 * it (seconds; 0 when it is empty). */
struct stats_hist_sum {
	uint64_t n[STATS_NBUCKETS];     /* per bucket, not cumulative */
	uint64_t count, sum_us;
	double p50, p90, p99;
};

struct stats_backend {
	const char *name;               /* borrowed from the snapshot */
	const char *url;
	double weight;
	uint32_t points;
	double share;                   /* exact share of the keyspace */
#define STATS_FIELD(n, type, where, help) uint64_t n;
	STATS_BACKEND(STATS_FIELD)
	uint32_t id;                    /* registry id */
	const char *state;              /* "up", "checking", "down", "failing", "ramping",
					   "full", "drained": what the page
					   shows */
	/* why it is in its state (registry.h): the last transition (Unix
	 * seconds, since the entry's making when none) and its reason ("":
	 * none yet), the cause of the last failed request, the last active
	 * check (checked: one ran) */
	double since;
	char reason[128];
	char last_fail[128];
	bool checked;
	int check_passed;
	double check_at, check_seconds;
	char check_text[128];
	/* its own cache's hits / (hits + misses), since the start and over
	 * the last 5 minutes; -1: none */
	double tier_hit_ratio, tier_hit_ratio_5m;
	/* its runtime state (runstate.h): "ready", "drain" or "maint"; a
	 * drain's progress (0..1; -1: not draining), its window's end (Unix
	 * seconds) and length; the runtime weight (-1: the file's); the
	 * weight its ring gives it now */
	const char *admin_state;
	double drain_progress, drain_end, drain_seconds;
	double runtime_weight, ring_weight;
	long max_inflight;              /* hard cap; 0 = none */
	long cap;                       /* bounded-load cap now; -1 = off */
	double ramp;                    /* slow start: share of keys back */
	double rate[STATS_NWIN][RATES_NBACKEND];
	double spark_requests[STATS_SPARK];
	double spark_errors[STATS_SPARK];
#define STATS_HIST_SUM(n, help) struct stats_hist_sum n;
	STATS_HIST_BACKEND(STATS_HIST_SUM)
};

/* The build: ringproxy's version and the libraries' (as run). */
struct discover;
struct dnssrv;

struct stats_build {
	const char *version, *libevent, *openssl, *libcurl, *inih;
};

struct certs;

struct stats {
	STATS_PROXY(STATS_FIELD)
#undef STATS_FIELD
	const char *scheme;             /* [ring] scheme (ring_scheme_name) */
	unsigned vnodes;                /* the fixed scheme's; 0 for another */
	size_t npoints;
	struct stats_backend *be;
	size_t nbe;
	/* the last reload attempt; when == 0: none yet */
	long long reload_time;
	int reload_ok;
	const char *reload_text;        /* borrowed from the proxy */
	double reload_moved;
	/* the last reload attempts, oldest first (borrowed) */
	const struct proxy_reload *reloads[8];
	unsigned nreloads;
	/* the last runtime state changes (ringproxy ctl), oldest first
	 * (borrowed); the page lists them with the reloads */
	const struct proxy_reload *ctls[8];
	unsigned nctls;
	struct stats_build build;
	const char *conf_path;          /* borrowed from the snapshot */
	const char *conf_sha256;
	long long conf_loaded;
	const char *conf_on_disk;       /* the file now: "same" bytes as the
					   running config, "differs", "unreadable" */
	char conf_disk_sha256[65];      /* "" unless read */
	double balance_factor;
	double rate[STATS_NWIN][RATES_NPROXY];
	/* for the page's ring (borrowed) */
	const struct ring *ring;
	const struct ring_arc *moved;   /* the last reload's moved arcs */
	size_t nmoved;
	/* the hot-object cache, when there is one */
	bool has_cache;
	struct cache_stats cache;       /* cache.h's CACHE_STATS list */
	double cache_hit_ratio;         /* hits / (hits + misses + coalesced) */
	/* the tier: the backends' own caches, summed; ratios -1 when none */
	uint64_t tier_hits, tier_misses;
	double tier_hit_ratio, tier_hit_ratio_5m;
	double tier_fetches_5m;         /* origin fetches (misses) per second */
	/* the current snapshot's warm ramp ([ring] ramp); ramp_rings == 0:
	 * none */
	size_t ramp_rings;
	int ramp_in_progress;
	long long ramp_start_ms, ramp_end_ms;   /* Unix ms */
	double ramp_switched;           /* share of the moved keys switched:
					   the time into the window / ramp */
	double ramp_moved;              /* keyspace share the change moved */
	/* [discovery] (borrowed; NULL without srv) and the ring's fingerprint */
	const struct discover *discover;
	const struct dnssrv *dns;
	uint64_t fingerprint;
	uint64_t disc_remove_after_ms;
	STATS_HIST_PROXY(STATS_HIST_SUM)
#undef STATS_HIST_SUM
	const struct certs *certs;      /* [tls]'s certificates (borrowed from
					   the snapshot), NULL: no HTTPS */
};

/* Main thread: the tier's miss ratio (misses / (hits + misses) of the
 * backends' own caches) over the last seconds (at most RATES_SECONDS) of
 * the samples; -1 when there were none. */
double stats_tier_miss_ratio(const struct proxy *p, int seconds);
/* About how many responses carried a tier verdict, and how many requests
 * went to the backends, in the last seconds (rates times the span). */
void stats_tier_counts(const struct proxy *p, int seconds, double *verdicts, double *requests);

/* The q-quantile (0..1) of h's buckets in seconds, interpolated within
 * its bucket as Prometheus' histogram_quantile does; a quantile in the
 * +Inf bucket reads as the largest bound. 0 when h is empty. */
double stats_hist_quantile(const struct stats_hist_sum *h, double q);
/* h's bucket bounds in seconds: i < STATS_NBOUNDS. */
double stats_hist_bound(int i);

/* Main thread: a reading of everything now. The result borrows from p and
 * its current snapshot: use it before the next reload. 0 or -1 (no
 * memory). Free with stats_free. */
int stats_collect(struct stats *st, const struct proxy *p);
void stats_free(struct stats *st);

/* Main thread, once a second: the summed counters into p->rates. */
void stats_sample(struct proxy *p);

/* Renderings of a reading, appended to out. */
void stats_json(const struct stats *st, struct evbuffer *out);
void stats_prometheus(const struct stats *st, struct evbuffer *out);
/* s[0..n) as a JSON string, quotes included; bytes that are not valid
 * UTF-8 become U+FFFD. */
void stats_json_strn(struct evbuffer *out, const char *s, size_t n);
void stats_json_str(struct evbuffer *out, const char *s);

/* The ring alone: vnodes, points, and each backend's weight, points and
 * exact share (the schema of `ringproxy plan --json`'s backends). */
void stats_ring_json(const struct stats *st, struct evbuffer *out);

#endif
