/*
 * stats.h -- a reading of the counters listed in stats-t.h, and its
 * renderings (JSON, Prometheus text, the HTML page), all generated from
 * those lists. Collected on the main thread from the proxy's and the
 * registry's atomics and the workers' per-backend counters; the workers
 * are never stopped for it.
 */
#ifndef RINGPROXY_STATS_H
#define RINGPROXY_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "stats-t.h"

struct evbuffer;
struct proxy;

struct stats_backend {
	const char *name;               /* borrowed from the snapshot */
	const char *url;
	double weight;
	uint32_t points;
	double share;                   /* exact share of the keyspace */
#define STATS_FIELD(n, type, where, help) uint64_t n;
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
	/* the current snapshot's warm ramp ([ring] ramp); ramp_rings == 0:
	 * none */
	size_t ramp_rings;
	int ramp_in_progress;
	long long ramp_start_ms, ramp_end_ms;   /* Unix ms */
	double ramp_switched;           /* share of the moved keys switched:
					   the time into the window / ramp */
	double ramp_moved;              /* keyspace share the change moved */
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
