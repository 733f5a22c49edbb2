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
 *   WORKER   per worker: the proxy's in struct worker, a backend's in
 *            the worker's pool for it (struct pool); one writer each, no
 *            locked instruction; the reading is their sum;
 *   DERIVED  read from other state by stats_<scope>_<name>() in stats.c.
 * The order is the order of every output.
 */
#define STATS_PROXY(X) \
	X(uptime_seconds, gauge, DERIVED, "seconds since ringproxy started") \
	X(generation, gauge, DERIVED, "successful config loads, 1 being the first") \
	X(reloads_failed, counter, SHARED, "reloads refused because the file was invalid") \
	X(connections, gauge, DERIVED, "client connections open") \
	X(accepted, counter, SHARED, "client connections accepted") \
	X(accept_handoffs, counter, SHARED, "client connections a worker accepted and handed to a worker with fewer, so that the workers serve about as many each") \
	X(connections_busiest_worker, gauge, DERIVED, "client connections open on the worker with the most") \
	X(refused, counter, SHARED, "client connections closed at once over max_connections") \
	X(proxy_protocol_refused, counter, SHARED, "client connections closed for their first bytes (proxy_protocol: a PROXY header missing, malformed, incomplete, or from a source not in proxy_protocol_from)") \
	X(inflight, gauge, DERIVED, "requests in flight to all backends") \
	X(replies_400, counter, SHARED, "the proxy's own 400 replies (a request it could not parse)") \
	X(replies_408, counter, SHARED, "the proxy's own 408 replies (a request head too slow)") \
	X(replies_431, counter, SHARED, "the proxy's own 431 replies (a request head too large)") \
	X(replies_502, counter, SHARED, "the proxy's own 502 replies (backends failed)") \
	X(replies_503, counter, SHARED, "the proxy's own 503 replies (no backend available)") \
	X(replies_504, counter, SHARED, "the proxy's own 504 replies (a backend too slow)") \
	X(replies_other, counter, SHARED, "the proxy's own replies with any other status") \
	X(reply_bytes, counter, SHARED, "bytes of the proxy's own replies queued to clients") \
	X(access_log_dropped, counter, SHARED, "access log lines dropped (the log could not be written)") \
	X(ring_fingerprint, gauge, DERIVED, "the current ring's fingerprint (a hash of its scheme, names, weights and points; the top 52 bits, exact as a float): proxies that place every key alike show the same, so count(count_values(\"fp\", ringproxy_ring_fingerprint)) > 1 says a fleet disagrees") \
	X(discovery_answers, counter, DERIVED, "good DNS SRV answers ([discovery] srv): successful, complete, at least one target") \
	X(discovery_failures_timeout, counter, DERIVED, "DNS SRV polls that got no answer (the server down or stopped); the ring stays as it is") \
	X(discovery_failures_servfail, counter, DERIVED, "DNS SRV polls answered SERVFAIL; the ring stays as it is") \
	X(discovery_failures_refused, counter, DERIVED, "DNS SRV polls answered REFUSED; the ring stays as it is") \
	X(discovery_failures_nxdomain, counter, DERIVED, "DNS SRV polls answered NXDOMAIN (Kubernetes: no ready endpoints); the ring stays as it is") \
	X(discovery_failures_empty, counter, DERIVED, "DNS SRV polls answered without a target; the ring stays as it is") \
	X(discovery_failures_parse, counter, DERIVED, "DNS SRV answers that did not parse; the ring stays as it is") \
	X(discovery_failures_other, counter, DERIVED, "DNS SRV polls that failed otherwise (a connection refused, out of memory); the ring stays as it is") \
	X(discovery_last_good_age_seconds, gauge, DERIVED, "seconds since the last good DNS SRV answer (0 before the first)") \
	X(discovery_members, gauge, DERIVED, "discovered backends on the ring") \
	X(discovery_pending_adds, gauge, DERIVED, "names in the last good answer not on the ring yet (add_after answers in a row, then the next apply_every point)") \
	X(discovery_pending_removes, gauge, DERIVED, "members on the ring absent from the last good answer (leaving after remove_after)") \
	X(discovery_held_removes, gauge, DERIVED, "removals held over max_remove until ringproxy ctl discovery apply (or until they revert)") \
	X(h1_connections, counter, WORKER, "client connections that made an HTTP/1.x request, plain or TLS (with h2_connections and h2c_connections: the connections by protocol)") \
	X(h1_requests, counter, WORKER, "requests over HTTP/1.x, plain or TLS, those the proxy answered itself (a 400, a 431) included") \
	X(h2c_connections, counter, SHARED, "client connections served as HTTP/2 over cleartext (prior knowledge, [proxy] h2c)") \
	X(h2_connections, counter, SHARED, "client connections served as HTTP/2 over TLS (ALPN h2: ours, or a terminator's PROXY v2 ALPN TLV)") \
	X(h2_streams, counter, WORKER, "HTTP/2 requests (streams) served, all HTTP/2 connections (over TLS: h2_streams - h2c_streams)") \
	X(h2c_streams, counter, WORKER, "of h2_streams, those on cleartext connections (h2c)") \
	X(h2_resets_received, counter, SHARED, "HTTP/2 streams the client reset (RST_STREAM) before their response was complete") \
	X(h2_glitches, counter, SHARED, "HTTP/2 frames that did no work: PING, SETTINGS, PRIORITY, empty DATA, unknown frames, resets of requests under way, refused header blocks ([h2] max_glitches)") \
	X(h2_goaway_calm, counter, SHARED, "HTTP/2 connections ended with GOAWAY ENHANCE_YOUR_CALM: past [h2] max_glitches, or nghttp2's own flood limits") \
	X(h2_goaway_max_requests, counter, SHARED, "graceful GOAWAYs sent after [h2] max_requests requests on a connection") \
	X(h2_goaway_idle, counter, SHARED, "GOAWAYs sent to HTTP/2 connections idle for [h2] idle_timeout") \
	X(h2_goaway_shutdown, counter, SHARED, "graceful GOAWAYs sent to HTTP/2 connections at a stop or a listener change") \
	X(h2_goaway_error, counter, SHARED, "GOAWAYs sent for a protocol error of the client (nghttp2's verdict)") \
	X(h2_send_timeouts, counter, SHARED, "HTTP/2 streams reset because the client's window kept their response back for [h2] send_timeout") \
	X(h2_body_timeouts, counter, SHARED, "HTTP/2 streams reset because their request body, its window open, made no progress for client_timeout (an HTTP/1.1 upload that stalls closes its connection)") \
	X(h2_headers_refused, counter, SHARED, "HTTP/2 requests answered 431: more header fields than max_headers or more bytes than max_head_size") \
	X(tls_connections, gauge, DERIVED, "HTTPS client connections open, in their handshake or after it") \
	X(tls_handshakes, counter, SHARED, "TLS handshakes completed in full (a new session)") \
	X(tls_resumed, counter, SHARED, "TLS handshakes completed by resuming a session (a ticket)") \
	X(tls_failed_sni, counter, SHARED, "TLS handshakes refused for their SNI: no certificate has the name, or none was sent ([tls] strict_sni)") \
	X(tls_failed_cipher, counter, SHARED, "TLS handshakes failed for want of a common version, cipher suite, group or signature algorithm") \
	X(tls_failed_protocol, counter, SHARED, "TLS handshakes failed on a message that is not TLS or not valid TLS") \
	X(tls_failed_timeout, counter, SHARED, "TLS handshakes not complete in [tls] handshake_timeout") \
	X(tls_abandoned, counter, SHARED, "TLS handshakes the client closed before they completed")

#define STATS_BACKEND(X) \
	X(up, flag, DERIVED, "whether the backend is up (false while health checks have it down)") \
	X(inflight, gauge, DERIVED, "requests in flight to the backend, all workers") \
	X(fails, gauge, DERIVED, "failed requests in a row (passive health); at [health] fall the backend goes down, or, the last one up, stays in service as failing") \
	X(check_fails, gauge, DERIVED, "failed active health checks in a row; at [health] fall the backend goes down") \
	X(state_since_seconds, gauge, DERIVED, "seconds since the backend last went up or down (since it was first configured, when it never did)") \
	X(last_check_status, gauge, DERIVED, "HTTP status of the last active health check; 0 when it got no response, or none ran") \
	X(requests, counter, WORKER, "requests sent to the backend") \
	X(refreshes, counter, WORKER, "background refreshes of stale objects sent to the backend (not in requests; in inflight while they run)") \
	X(refreshes_skipped, counter, WORKER, "stale hits served without a refresh: no backend could take one (down, or at max_inflight: counted on the key's owner), or the worker ran [cache] refresh_max already") \
	X(responses, counter, WORKER, "responses relayed completely from the backend") \
	X(responses_2xx, counter, WORKER, "final responses from the backend with a 2xx status") \
	X(responses_3xx, counter, WORKER, "final responses from the backend with a 3xx status") \
	X(responses_4xx, counter, WORKER, "final responses from the backend with a 4xx status") \
	X(responses_5xx, counter, WORKER, "final responses from the backend with a 5xx status") \
	X(tier_hits, counter, WORKER, "responses to GET and HEAD the backend's own cache answered from store (read as [proxy] tier_status says)") \
	X(tier_misses, counter, WORKER, "responses to GET and HEAD the backend's own cache fetched from the origin (read as [proxy] tier_status says)") \
	X(bytes_in, counter, WORKER, "bytes received from the backend") \
	X(bytes_out, counter, WORKER, "bytes sent to the backend") \
	X(connects, counter, SHARED, "connections opened to the backend") \
	X(connect_errors, counter, SHARED, "connections to the backend that failed") \
	X(timeouts, counter, SHARED, "connect, response and body timeouts") \
	X(bad_responses, counter, SHARED, "invalid responses from the backend") \
	X(stray_bytes, counter, SHARED, "times the backend sent bytes no request asked for (on an idle kept-alive connection, or past the end of a response): that connection closed, and none kept alive to it for 60 s") \
	X(retries_away, counter, SHARED, "requests retried on another backend after failing here") \
	X(spilled_away, counter, SHARED, "requests for keys it owns sent on by the load caps") \
	X(spilled_hot, counter, SHARED, "of spilled_away, requests for hot keys sent on by the bounded-load cap (only hot keys are)") \
	X(spilled_in, counter, SHARED, "requests it took for keys it does not own") \
	X(failovers, counter, SHARED, "requests for keys it owns sent on while it was down") \
	X(ramp_held, counter, SHARED, "requests it served for keys a warm ramp is moving away from it, before their moment") \
	X(ramp_moved_in, counter, SHARED, "requests it took for keys a warm ramp moved (switched, or their previous owner could not take them)") \
	X(transitions, counter, SHARED, "health transitions, up to down and back") \
	X(health_local_errors, counter, SHARED, "active health checks that failed on ringproxy's side (out of memory or file descriptors): not counted against the backend, whose state is kept")

/*
 * Histograms of durations: X(name, help). Fixed log-spaced buckets (the
 * upper bounds below, in microseconds, then +Inf), counted per worker
 * like the WORKER counters and summed on read; /metrics shows them as
 * Prometheus histograms, /stats and the page their p50/p90/p99. Times
 * come from CLOCK_MONOTONIC through the vDSO (worker_now_us: no syscall).
 *   STATS_HIST_BACKEND in struct pool, per backend:
 */
#define STATS_HIST_BACKEND(X) \
	X(response, "time from the request handed to a backend connection to the response's last byte") \
	X(ttfb, "time from the request handed to a backend connection to the response's first byte")
/*   STATS_HIST_PROXY in struct worker, the whole request as the client saw
 *   it (head parsed to response written), whoever answered: */
#define STATS_HIST_PROXY(X) \
	X(request, "time from a request's head read to its response written, whoever answered")

#define STATS_BOUNDS_US 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, \
	250000, 500000, 1000000, 2500000, 5000000, 10000000
#define STATS_NBOUNDS 16
#define STATS_NBUCKETS (STATS_NBOUNDS + 1)     /* the last is +Inf */

struct stats_hist {
	_Atomic uint64_t n[STATS_NBUCKETS];    /* per bucket, not cumulative */
	_Atomic uint64_t sum_us;
};
#define STATS_HIST_FIELD(n, help) struct stats_hist n;

/* The fields of the counters a struct keeps: SHARED ones in struct proxy
 * and struct backend, WORKER ones in struct worker (the proxy's) and
 * struct pool (a backend's). */
#define STATS_SHARED_FIELD(n, type, where, help) STATS_SHARED_FIELD_##where(n)
#define STATS_SHARED_FIELD_SHARED(n) _Atomic uint64_t n;
#define STATS_SHARED_FIELD_WORKER(n)
#define STATS_SHARED_FIELD_DERIVED(n)

#define STATS_WORKER_FIELD(n, type, where, help) STATS_WORKER_FIELD_##where(n)
#define STATS_WORKER_FIELD_SHARED(n)
#define STATS_WORKER_FIELD_WORKER(n) _Atomic uint64_t n;
#define STATS_WORKER_FIELD_DERIVED(n)

#endif
