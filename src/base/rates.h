/*
 * rates.h -- per-second rates of the main counters over the last 10 s and
 * 5 min, and their recent history for the page's sparklines: a ring of
 * samples of the summed counters, one a second, taken by the main thread
 * from what stats.c sums anyway. The request path pays nothing: it only
 * counts, as before. Main thread only; no locks.
 */
#ifndef RINGPROXY_RATES_H
#define RINGPROXY_RATES_H

#include <stddef.h>
#include <stdint.h>

/* Seconds of history kept: 5 min, and the sample that starts them. */
#define RATES_SECONDS 300
#define RATES_SAMPLES (RATES_SECONDS + 1)

/* The windows a rate is given over, in seconds. */
#define RATES_WINDOWS(X) X(10, "10s") X(300, "5m")

/* X(name, help): the counters sampled, for the proxy as a whole and per
 * backend. What each reads is stats.c's (stats_sample). */
#define RATES_PROXY(X) \
	X(accepted, "client connections accepted per second") \
	X(requests, "requests sent to backends per second") \
	X(errors, "backend failures (connect errors, timeouts, bad responses) per second") \
	X(tier_hits, "responses the backends' own caches answered from store per second") \
	X(tier_misses, "responses the backends' own caches fetched from the origin per second") \
	X(client_requests, "requests from clients answered per second, whoever answered (a backend, the proxy's cache, the proxy itself)") \
	X(cache_answers, "requests the proxy's own cache answered per second (hits, and requests that waited for another's fetch)")

#define RATES_BACKEND(X) \
	X(requests, "requests sent to the backend per second") \
	X(responses, "responses relayed completely per second") \
	X(errors, "connect errors, timeouts and bad responses per second") \
	X(spilled_in, "requests taken for keys it does not own per second") \
	X(spilled_away, "requests for keys it owns sent on by the load caps per second") \
	X(tier_hits, "responses its cache answered from store per second") \
	X(tier_misses, "responses its cache fetched from the origin per second")

#define RATES_ENUM(n, help) RATES_P_##n,
enum rates_proxy_counter { RATES_PROXY(RATES_ENUM) RATES_NPROXY };
#undef RATES_ENUM
#define RATES_ENUM(n, help) RATES_B_##n,
enum rates_backend_counter { RATES_BACKEND(RATES_ENUM) RATES_NBACKEND };
#undef RATES_ENUM

struct rates;

struct rates *rates_new(void);
void rates_free(struct rates *r);

/* One sample at now_ms (monotonic): the proxy's counters pv[RATES_NPROXY]
 * and backend id's bv[id * RATES_NBACKEND + k] for ids 0..nbe-1 (registry
 * ids: a backend keeps its history across reloads). A backend seen for
 * the first time starts with no history (rate 0). 0, or -1 without
 * memory (the sample is dropped). */
int rates_add(struct rates *r, int64_t now_ms, const uint64_t *pv, const uint64_t *bv, size_t nbe);

/* Per-second rate of a counter over the last seconds (the span of the
 * samples there are when fewer); 0 before two samples. id beyond those
 * sampled: 0. */
double rates_proxy(const struct rates *r, int counter, int seconds);
double rates_backend(const struct rates *r, size_t id, int counter, int seconds);

/* The history of backend id's counter: per-second rates over each step
 * seconds of the last RATES_SECONDS, oldest first, into out[0..n) where n
 * = RATES_SECONDS / step (steps before the first sample are 0). Returns n. */
size_t rates_series(const struct rates *r, size_t id, int counter, int step, double *out);

#endif
