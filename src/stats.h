/*
 * stats.h -- what the proxy counts, in one list per scope (the X-macros
 * below) from which the collected struct, the JSON, the Prometheus text and
 * the HTML page are all generated: a counter added here appears everywhere.
 * Collected on the main thread from the registry's atomics and the
 * workers' per-backend counters; the workers are never stopped for it.
 */
#ifndef RINGPROXY_STATS_H
#define RINGPROXY_STATS_H

#include <event2/buffer.h>
#include <stddef.h>
#include <stdint.h>

struct proxy;

/* name, Prometheus type, help */
#define STATS_PROXY(X) \
	X(uptime_seconds, gauge, "seconds since ringproxy started") \
	X(generation, gauge, "successful config loads, 1 being the first") \
	X(reloads_failed, counter, "reloads refused because the file was invalid") \
	X(connections, gauge, "client connections open") \
	X(accepted, counter, "client connections accepted") \
	X(refused, counter, "client connections closed at once over max_connections") \
	X(inflight, gauge, "requests in flight to all backends")

#define STATS_BACKEND(X) \
	X(up, gauge, "1 while the backend is up, 0 while health checks have it down") \
	X(inflight, gauge, "requests in flight to the backend, all workers") \
	X(requests, counter, "requests sent to the backend") \
	X(responses, counter, "responses relayed completely from the backend") \
	X(connects, counter, "connections opened to the backend") \
	X(connect_errors, counter, "connections to the backend that failed") \
	X(timeouts, counter, "connect, response and body timeouts") \
	X(bad_responses, counter, "invalid responses from the backend") \
	X(retries_away, counter, "requests retried on another backend after failing here") \
	X(spilled_away, counter, "requests for keys it owns sent on by the load caps") \
	X(spilled_in, counter, "requests it took for keys it does not own") \
	X(failovers, counter, "requests for keys it owns sent on while it was down") \
	X(transitions, counter, "health transitions, up to down and back")

struct stats_backend {
	const char *name;               /* borrowed from the snapshot */
	const char *url;
	double weight;
	uint32_t points;
	double share;                   /* exact share of the keyspace */
#define STATS_FIELD(n, type, help) uint64_t n;
	STATS_BACKEND(STATS_FIELD)
};

struct stats {
	STATS_PROXY(STATS_FIELD)
#undef STATS_FIELD
	unsigned vnodes;
	size_t npoints;
	struct stats_backend *be;
	size_t nbe;
	/* the last reload attempt; when == 0: none yet */
	long long reload_time;
	int reload_ok;
	const char *reload_text;        /* borrowed from the proxy */
	double reload_moved;
};

/* Main thread: a reading of everything now. The result borrows from p and
 * its current snapshot: use it before the next reload. 0 or -1 (no
 * memory). Free with stats_free. */
int stats_collect(struct stats *st, const struct proxy *p);
void stats_free(struct stats *st);

/* Renderings of a reading, appended to out. */
void stats_json(const struct stats *st, struct evbuffer *out);
void stats_prometheus(const struct stats *st, struct evbuffer *out);
void stats_html(const struct stats *st, struct evbuffer *out);
/* The ring alone: vnodes, points, and each backend's weight, points and
 * exact share (the schema of `ringproxy plan --json`'s backends). */
void stats_ring_json(const struct stats *st, struct evbuffer *out);

#endif
