/*
 * stats-t.h -- what the proxy counts: one list per scope, from which every
 * part of a counter is generated. The counter fields of the structs that
 * keep them (struct proxy, struct backend in the registry, the workers'
 * struct pool), the collection (stats_collect), the JSON, the Prometheus
 * text and the HTML page: a counter added to a list appears in all of
 * them, and what is left to write is the line that counts.
 */
#ifndef RINGPROXY_STATS_T_H
#define RINGPROXY_STATS_T_H

#include <stdatomic.h>
#include <stdint.h>

/*
 * X(name, type, where it is kept, help). Type: counter or gauge as
 * Prometheus has them, or flag (a yes or no; not "bool", which
 * stdbool.h would expand): one spelling everywhere, true/false in
 * JSON (/stats, /ring), a 0/1 gauge in Prometheus, words on the page.
 * Where:
 *   SHARED   an atomic in the scope's shared struct (struct proxy, struct
 *            backend) that any thread adds to;
 *   WORKER   per worker, in the worker's pool for the backend (struct
 *            pool): one writer each, no locked instruction; the reading is
 *            their sum;
 *   DERIVED  read from other state by stats_<scope>_<name>() in stats.c.
 * The order is the order of every output.
 */
#define STATS_PROXY(X) \
	X(uptime_seconds, gauge, DERIVED, "seconds since ringproxy started") \
	X(generation, gauge, DERIVED, "successful config loads, 1 being the first") \
	X(reloads_failed, counter, SHARED, "reloads refused because the file was invalid") \
	X(connections, gauge, DERIVED, "client connections open") \
	X(accepted, counter, SHARED, "client connections accepted") \
	X(refused, counter, SHARED, "client connections closed at once over max_connections") \
	X(inflight, gauge, DERIVED, "requests in flight to all backends")

#define STATS_BACKEND(X) \
	X(up, flag, DERIVED, "whether the backend is up (false while health checks have it down)") \
	X(inflight, gauge, DERIVED, "requests in flight to the backend, all workers") \
	X(requests, counter, WORKER, "requests sent to the backend") \
	X(responses, counter, WORKER, "responses relayed completely from the backend") \
	X(connects, counter, SHARED, "connections opened to the backend") \
	X(connect_errors, counter, SHARED, "connections to the backend that failed") \
	X(timeouts, counter, SHARED, "connect, response and body timeouts") \
	X(bad_responses, counter, SHARED, "invalid responses from the backend") \
	X(retries_away, counter, SHARED, "requests retried on another backend after failing here") \
	X(spilled_away, counter, SHARED, "requests for keys it owns sent on by the load caps") \
	X(spilled_hot, counter, SHARED, "of spilled_away, requests for hot keys sent on by the bounded-load cap (only hot keys are)") \
	X(spilled_in, counter, SHARED, "requests it took for keys it does not own") \
	X(failovers, counter, SHARED, "requests for keys it owns sent on while it was down") \
	X(ramp_held, counter, SHARED, "requests it served for keys a warm ramp is moving away from it, before their moment") \
	X(ramp_moved_in, counter, SHARED, "requests it took for keys a warm ramp moved (switched, or their previous owner could not take them)") \
	X(transitions, counter, SHARED, "health transitions, up to down and back")

/* The fields of the counters a struct keeps: SHARED ones in struct proxy
 * and struct backend, WORKER ones in struct pool. */
#define STATS_SHARED_FIELD(n, type, where, help) STATS_SHARED_FIELD_##where(n)
#define STATS_SHARED_FIELD_SHARED(n) _Atomic uint64_t n;
#define STATS_SHARED_FIELD_WORKER(n)
#define STATS_SHARED_FIELD_DERIVED(n)

#define STATS_WORKER_FIELD(n, type, where, help) STATS_WORKER_FIELD_##where(n)
#define STATS_WORKER_FIELD_SHARED(n)
#define STATS_WORKER_FIELD_WORKER(n) _Atomic uint64_t n;
#define STATS_WORKER_FIELD_DERIVED(n)

#endif
