/*
 * conf.c -- INI file -> struct conf, through inih, driven by one table of
 * keys (conf_keys below): the same table parses, validates, fills defaults
 * and prints --help-config. Every problem is collected, not just the first,
 * as "FILE:LINE: what is wrong; what to do", so an operator fixes a file in
 * one pass. Runs on the main thread only (startup, -t, plan, reload).
 *
 * inih reports no line numbers to its handler, so the file is fed through
 * our own reader (conf_reader), which counts lines, catches lines too long
 * for inih's buffer, and handles section headers itself: that way an empty
 * [backend NAME] section and an unknown section are seen too.
 *
 * `include = GLOB` (every .ini file of conf.d, say; relative to the including file's
 * directory) is the reader's too: each file it matches, in name order, is
 * read there by a nested parse, starting outside any section; the
 * including file's section goes on after it. A line number of an included
 * file carries the file's index in its high bits (CONF_LINE_BITS), so
 * every message still names FILE:LINE.
 */
#include "config/conf.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <arpa/inet.h>
#include <ini.h>
#include <openssl/evp.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/addr.h"
#include "base/log.h"
#include "ring/ring.h"
#include "ring/ring-compat.h"

enum conf_type {
	CONF_T_UINT,
	CONF_T_DOUBLE,
	CONF_T_DURATION,        /* stored as uint64_t milliseconds */
	CONF_T_SIZE,            /* stored as uint64_t bytes */
	CONF_T_STRING,
	CONF_T_ENUM,            /* stored as int: index into the '|' list */
	CONF_T_ADDR,            /* "host:port", stored as a string */
	CONF_T_URL,             /* http://host[:port][/prefix] */
	CONF_T_BOOL,            /* on/off, yes/no, true/false, 1/0 */
	CONF_T_RANGE,           /* status range "200-399" or "200": two ints */
	CONF_T_PATH,            /* an absolute URL path, or "" */
	CONF_T_LISTEN,          /* a listen list (conf_listen_parse), stored
				   as a string */
};

enum conf_where { CONF_IN_PROXY, CONF_IN_RING, CONF_IN_HEALTH, CONF_IN_CACHE, CONF_IN_LOG, CONF_IN_TLS,
		  CONF_IN_H2, CONF_IN_DISCOVERY, CONF_IN_BACKEND };

struct conf_keydef {
	enum conf_where where;
	const char *key;
	enum conf_type type;
	size_t offset;          /* into struct conf or struct conf_backend */
	const char *def;        /* default as it would be written; NULL = required */
	double min, max;        /* numeric range (after unit conversion) */
	const char *choices;    /* CONF_T_ENUM: "a|b|c"; CONF_T_STRING (and a
				   CONF_T_DOUBLE with a gap): what the value is */
	const char *help;
};

#define P(field) offsetof(struct conf, field)
#define B(field) offsetof(struct conf_backend, field)

static const struct conf_keydef conf_keys[] = {
	{ CONF_IN_PROXY, "listen", CONF_T_LISTEN, P(listen), "127.0.0.1:8080", 0, 0,
	  "IP:port[ proxy_protocol=on|off], comma-separated (at most 16), or empty",
	  "addresses:ports the proxy accepts plain HTTP clients on (port 0: any free port); an address followed by "
	  "proxy_protocol=on or off has that setting of its own (e.g. the balancer's address on, 127.0.0.1 off), "
	  "the others follow [proxy] proxy_protocol; empty: none (then [tls] listen is needed); start only" },
	{ CONF_IN_PROXY, "proxy_protocol", CONF_T_BOOL, P(proxy_protocol), "off", 0, 0, NULL,
	  "on: a connection from proxy_protocol_from must begin with a PROXY protocol header (v1 or v2), whose client "
	  "address is the client's everywhere; one from elsewhere must not (either is closed)" },
	{ CONF_IN_PROXY, "proxy_protocol_from", CONF_T_STRING, P(proxy_protocol_from), "", 0, 0, NULL,
	  "the balancers that send PROXY headers: addresses and CIDR blocks (0.0.0.0/0, ::/0 for every source)" },
	{ CONF_IN_PROXY, "admin_listen", CONF_T_ADDR, P(admin_listen), "", 0, 0, NULL,
	  "address:port of the stats listener (/stats /metrics / /ring /health); empty = none" },
	{ CONF_IN_PROXY, "admin_token", CONF_T_STRING, P(admin_token), "", 0, 0,
	  "a token: letters, digits and -._~+/ then = padding (e.g. openssl rand -hex 32), or empty",
	  "when set, every admin request needs Authorization: Bearer TOKEN (else 401); required when admin_listen is not a loopback address" },
	{ CONF_IN_PROXY, "workers", CONF_T_UINT, P(workers), "0", 0, 256, NULL,
	  "worker threads, each with its own listener; a worker with 2 more client connections than another hands its new ones over, so they serve about as many each; 0 = one per online CPU" },
	{ CONF_IN_PROXY, "connect_timeout", CONF_T_DURATION, P(connect_timeout_ms), "1s", 1, 600000, NULL,
	  "time to establish a backend connection" },
	{ CONF_IN_PROXY, "response_timeout", CONF_T_DURATION, P(response_timeout_ms), "10s", 1, 3600000, NULL,
	  "time from the request sent to the first response byte; then 504" },
	{ CONF_IN_PROXY, "client_timeout", CONF_T_DURATION, P(client_timeout_ms), "30s", 1, 3600000, NULL,
	  "idle keep-alive time, time to send a request head, and the longest a request body may make no progress "
	  "(HTTP/1.1: its connection closes; HTTP/2, while the stream's window is open: the stream is reset)" },
	{ CONF_IN_PROXY, "backend_idle_timeout", CONF_T_DURATION, P(backend_idle_timeout_ms), "60s", 1, 3600000, NULL,
	  "how long an idle pooled backend connection is kept" },
	{ CONF_IN_PROXY, "shutdown_timeout", CONF_T_DURATION, P(shutdown_timeout_ms), "10s", 0, 3600000, NULL,
	  "on SIGTERM, how long requests in flight may take to finish" },
	{ CONF_IN_PROXY, "max_connections", CONF_T_UINT, P(max_connections), "10000", 1, 1000000, NULL,
	  "client connections open at once, all workers together" },
	{ CONF_IN_PROXY, "max_head_size", CONF_T_SIZE, P(max_head_size), "16k", 1024, 1048576, NULL,
	  "largest request or response head; a larger request gets 431" },
	{ CONF_IN_PROXY, "max_headers", CONF_T_UINT, P(max_headers), "100", 8, 256, NULL,
	  "most header lines in one head; more gets 431" },
	{ CONF_IN_PROXY, "retries", CONF_T_UINT, P(retries), "2", 0, 10, NULL,
	  "GET/HEAD retried on the next distinct backend when a connect fails or the connection is lost" },
	{ CONF_IN_PROXY, "pool_size", CONF_T_UINT, P(pool_size), "64", 0, 100000, NULL,
	  "idle keep-alive connections kept per worker and backend" },
	{ CONF_IN_PROXY, "buffer_size", CONF_T_SIZE, P(buffer_size), "64k", 4096, 16777216, NULL,
	  "per-connection read buffer; bounds memory per request" },
	{ CONF_IN_PROXY, "backend_header", CONF_T_STRING, P(backend_header), "X-Ringproxy-Backend", 0, 0,
	  "a header name, or empty",
	  "response header naming the backend that served; empty turns it off" },
	{ CONF_IN_PROXY, "backend_host", CONF_T_STRING, P(backend_host), "", 0, 0,
	  "host[:port], or empty",
	  "the Host sent to every cache instead of the client's (NGINX's proxy_set_header Host, HAProxy's http-request "
	  "set-header Host): a cache that keys objects by Host (Varnish hashes req.http.host) keeps its objects only "
	  "if it gets the Host it got before; also sent with purges and background refreshes; a [backend] host "
	  "overrides it; empty = the client's Host" },
	{ CONF_IN_PROXY, "underscores_in_headers", CONF_T_BOOL, P(underscores_in_headers), "off", 0, 0, NULL,
	  "forward request headers whose names contain '_' (off: they are dropped)" },
	{ CONF_IN_PROXY, "tier_status", CONF_T_ENUM, P(tier_status), "auto", 0, 0,
	  "auto|cache-status|x-varnish|x-cache|age|off",
	  "where each backend response's own cache verdict is read, for the tier's hit ratio: auto takes the first of Cache-Status, X-Varnish (two ids: a hit), X-Cache (HIT/MISS), else Age > 0 means a hit" },
	{ CONF_IN_PROXY, "log_level", CONF_T_ENUM, P(log_level), "info", 0, 0, "error|warn|info|debug",
	  "least severe level logged to stderr" },
	{ CONF_IN_PROXY, "log_file", CONF_T_PATH, P(log_file), "", 0, 0, NULL,
	  "append log lines to this file instead of stderr; SIGUSR1 reopens it" },
	{ CONF_IN_PROXY, "pid_file", CONF_T_PATH, P(pid_file), "", 0, 0, NULL,
	  "write the proxy's pid here once it listens, remove it at exit; a file naming a running ringproxy "
	  "refuses the start (one naming no ringproxy is replaced); --pid-file overrides it; start only" },
	{ CONF_IN_PROXY, "watch_config", CONF_T_BOOL, P(watch_config), "off", 0, 0, NULL,
	  "reload when the config file changes (inotify; ConfigMap symlink swaps and editors' renames too)" },
	{ CONF_IN_PROXY, "state_file", CONF_T_PATH, P(state_file), "", 0, 0, NULL,
	  "where each backend's runtime state (ringproxy ctl: drain, maint, weight) is kept, written atomically "
	  "at each change and applied at start, so that it survives a restart; empty = not kept (a reload keeps it "
	  "either way)" },

	{ CONF_IN_PROXY, "h2c", CONF_T_BOOL, P(h2c), "on", 0, 0, NULL,
	  "serve a connection that opens with the HTTP/2 preface as HTTP/2 (cleartext, prior knowledge); off: it gets 505" },

	{ CONF_IN_RING, "hash", CONF_T_ENUM, P(hash), "md5", 0, 0, "md5",
	  "hash of points and keys (fixed scheme: MD5, first 8 bytes big-endian)" },
	{ CONF_IN_RING, "scheme", CONF_T_ENUM, P(scheme), "ringproxy", 0, 0,
	  "ringproxy|nginx|haproxy|ketama|envoy",
	  "whose placement the ring reproduces, key for key: ringproxy's own, nginx (hash $request_uri consistent), "
	  "haproxy (balance uri, hash-type consistent), ketama (libmemcached's weighted ketama, twemproxy) or "
	  "envoy (ring_hash, xxHash64, ring sizes 1024 to 8388608); a compat scheme hashes each backend's id, has "
	  "its proxy's points per unit of weight (vnodes does not apply) and takes whole weights" },
	{ CONF_IN_RING, "key_hash", CONF_T_ENUM, P(key_hash), "md5", 0, 0, "md5|fnv1a_64",
	  "scheme ketama only: the hash of a key, md5 (libmemcached's ketama) or fnv1a_64 (twemproxy's default, "
	  "its 32-bit FNV-1a)" },
	{ CONF_IN_RING, "vnodes", CONF_T_UINT, P(vnodes), "160", 1, 10000, NULL,
	  "points per backend of weight 1 (scheme ringproxy only: nginx has 160, haproxy 16, ketama 160 at an "
	  "even share, envoy at least 1024 a ring)" },
	{ CONF_IN_RING, "key", CONF_T_ENUM, P(key), "path+query", 0, 0,
	  "path+query|path|path+sorted-query|uri|uri+query",
	  "what of the request target is hashed: path+query as sent (nginx's $request_uri), the path, "
	  "the path with sorted parameters, uri: the target as sent up to '?' (HAProxy's balance uri; "
	  "the default under scheme haproxy), uri+query: all of it (balance uri whole)" },
	{ CONF_IN_RING, "query", CONF_T_ENUM, P(query.mode), "as-is", 0, 0, "as-is|sorted",
	  "the query string's parameters for the ring key, the cache key and (normalize_forward) the target "
	  "forwarded: as-is, the order sent; sorted, by name as raw bytes (a shorter name first, repeated names in "
	  "the order sent, nothing percent-decoded), empty parameters removed and a '?' left without one too; "
	  "changing it moves the keys whose query it rewrites (the reload says how many may)" },
	{ CONF_IN_RING, "drop_params", CONF_T_STRING, P(drop_params), "", 0, 0,
	  "parameter names or glob patterns ('*' any run), comma-separated, or empty",
	  "query parameters removed, by name as sent (case-sensitive, not decoded), e.g. utm_*, fbclid, gclid; "
	  "with any, empty parameters go too and a query left empty loses its '?'; empty: none (nothing changes)" },
	{ CONF_IN_RING, "normalize_forward", CONF_T_BOOL, P(normalize_forward), "on", 0, 0, NULL,
	  "backends get the normalised target (query, drop_params), so the tier's caches store one object too; "
	  "off: the target as the client sent it, routed and cached normalised" },
	{ CONF_IN_RING, "balance_factor", CONF_T_DOUBLE, P(balance_factor), "1.25", 0, 100,
	  "0 (off), or a number from 1 to 100",
	  "bounded-load factor c: a backend takes at most c x its fair share of requests in flight; 0 = off" },
	{ CONF_IN_RING, "replicas", CONF_T_UINT, P(replicas), "1", 1, 16, NULL,
	  "a key's preference list: the first R distinct backends of its walk, each kept warm; a request goes to the least loaded of them under the bounded-load cap, and past them only when all are down or over it; /purge reaches them all whatever purge_fanout (unless 0); 1 = the owner alone" },
	{ CONF_IN_RING, "ramp", CONF_T_DURATION, P(ramp_ms), "0", 0, 86400000, NULL,
	  "after a reload that moves keys, each moved key keeps its previous owner until its own moment of this window; 0 = move at once" },

	{ CONF_IN_HEALTH, "path", CONF_T_PATH, P(health.path), "", 0, 0, NULL,
	  "active check: GET this path on every backend; empty = no active checks" },
	{ CONF_IN_HEALTH, "interval", CONF_T_DURATION, P(health.interval_ms), "2s", 100, 3600000, NULL,
	  "active check: time between checks of one backend" },
	{ CONF_IN_HEALTH, "timeout", CONF_T_DURATION, P(health.timeout_ms), "1s", 10, 600000, NULL,
	  "active check: a check not answered in this time fails" },
	{ CONF_IN_HEALTH, "rise", CONF_T_UINT, P(health.rise), "2", 1, 100, NULL,
	  "consecutive passed checks that bring a down backend back" },
	{ CONF_IN_HEALTH, "fall", CONF_T_UINT, P(health.fall), "3", 1, 100, NULL,
	  "consecutive failures (checks or requests) that mark a backend down" },
	{ CONF_IN_HEALTH, "expect", CONF_T_RANGE, P(health.expect_lo), "200-399", 100, 599, NULL,
	  "active check: healthy status codes, e.g. 200 or 200-399" },
	{ CONF_IN_HEALTH, "passive", CONF_T_BOOL, P(passive), "on", 0, 0, NULL,
	  "count failed requests (connect errors, timeouts) toward fall" },
	{ CONF_IN_HEALTH, "passive_5xx", CONF_T_BOOL, P(passive_5xx), "off", 0, 0, NULL,
	  "passive checks also count 5xx responses as failures" },
	{ CONF_IN_HEALTH, "backoff", CONF_T_DURATION, P(backoff_ms), "5s", 100, 3600000, NULL,
	  "without active checks: a backend marked down by requests is tried again after this" },

	{ CONF_IN_CACHE, "size", CONF_T_SIZE, P(cache_size), "64m", 0, 1099511627776.0, NULL,
	  "bytes of the shared hot-object cache (objects, keys and heads counted exactly); 0 = off" },
	{ CONF_IN_CACHE, "max_object", CONF_T_SIZE, P(cache_max_object), "1m", 0, 1073741824.0, NULL,
	  "largest response body stored; a larger one streams to the client and is not kept" },
	{ CONF_IN_CACHE, "min_uses", CONF_T_UINT, P(cache_min_uses), "2", 1, 15, NULL,
	  "a response is stored on its key's Nth request within the frequency sketch's window (or when other requests wait for it); 1 = on the first" },
	{ CONF_IN_CACHE, "lock_timeout", CONF_T_DURATION, P(cache_lock_timeout_ms), "5s", 0, 600000, NULL,
	  "how long a request waits for another request's fetch of the same object before going itself" },
	{ CONF_IN_CACHE, "grace", CONF_T_DURATION, P(cache_grace_ms), "0", 0, 31536000000.0, NULL,
	  "stale window (stale-while-revalidate and stale-if-error) of a response that names none; its own values win" },
	{ CONF_IN_CACHE, "refresh_max", CONF_T_UINT, P(cache_refresh_max), "8", 1, 10000, NULL,
	  "background refreshes (stale-while-revalidate) one worker runs at once; a stale hit past it is served without one" },
	{ CONF_IN_CACHE, "heuristic_max", CONF_T_DURATION, P(cache_heuristic_max_ms), "24h", 0, 31536000000.0, NULL,
	  "a response without explicit freshness but with Last-Modified (and a heuristically cacheable status) is fresh for 10% of the time since then, at most this long (RFC 9111 4.2.2); 0 = never" },
	{ CONF_IN_CACHE, "target_field", CONF_T_STRING, P(cache_target_field), "Ringproxy-Cache-Control", 0, 0,
	  "a response header name, or empty",
	  "a response field read before CDN-Cache-Control (RFC 9213), Surrogate-Control and Cache-Control, for this cache alone; empty = none" },
	{ CONF_IN_CACHE, "strip_targeted", CONF_T_BOOL, P(cache_strip_targeted), "off", 0, 0, NULL,
	  "target_field, CDN-Cache-Control and Surrogate-Control lines of responses are not forwarded to clients (nor stored)" },
	{ CONF_IN_CACHE, "honor_client_no_cache", CONF_T_BOOL, P(cache_honor_client_no_cache), "off", 0, 0, NULL,
	  "a request's Cache-Control no-cache, max-age and min-fresh may send it past a stored object to the backend (RFC 9111 allows it); off, as in NGINX and Varnish, so that no client can force origin fetches" },
	{ CONF_IN_CACHE, "key_scheme", CONF_T_BOOL, P(cache_key_scheme), "on", 0, 0, NULL,
	  "the cache key includes the scheme: a response fetched for an https request is not served to an http one, "
	  "nor the other way (NGINX's default key is $scheme$proxy_host$request_uri), since a backend may answer "
	  "the two differently (a redirect to https, absolute links); off: one object for both, for a tier that "
	  "serves the same bytes over either (thumbnails usually do), which halves the misses of a site served both ways" },
	{ CONF_IN_CACHE, "purge_fanout", CONF_T_UINT, P(cache_purge_fanout), "3", 0, 16, NULL,
	  "a purge goes to the first N distinct backends of the URL's walk (the owner and where spill-over and failover put copies); 0 = local only" },
	{ CONF_IN_CACHE, "purge_allow", CONF_T_STRING, P(cache_purge_allow), "", 0, 0,
	  "addresses and CIDR blocks, comma-separated, or empty",
	  "clients (addresses, CIDR blocks) whose PURGE and BAN on the proxy port are forwarded; others get 405" },
	{ CONF_IN_CACHE, "max_variants", CONF_T_UINT, P(cache_max_variants), "16", 1, 1024, NULL,
	  "variants one URL may hold (responses with Vary on request headers, one per distinct normalised value); the oldest goes to make room" },
	{ CONF_IN_CACHE, "image_formats", CONF_T_STRING, P(cache_image_formats), "", 0, 0,
	  "image subtypes, comma-separated, in the origin's order of preference, or empty",
	  "for image responses (Content-Type image/*) with Vary: Accept, the variant is the first of these formats the request's Accept names with q > 0 (or none), and the fetch sends the backend that format's Accept: at most one variant per format plus one, whatever browsers send; empty = off (such responses are keyed by the normalised Accept)" },

	{ CONF_IN_LOG, "access", CONF_T_STRING, P(access_log), "off", 0, 0,
	  "off, stderr, a file's path, syslog, syslog:/PATH or syslog:IP:PORT",
	  "the access log: off, stderr, a file appended to (one line per request; SIGUSR1 reopens it), or syslog: "
	  "one datagram a line, facility local7, severity info, tag ringproxy; syslog is the local socket "
	  "/dev/log (RFC 3164 framing, as syslog(3) writes: journald and rsyslog read it), syslog:/PATH another "
	  "local socket, syslog:IP:PORT a server over UDP (RFC 5424 framing; syslog:IP is port 514); never "
	  "waits: a line the socket cannot take at once is dropped and counted (access_log_dropped)" },
	{ CONF_IN_LOG, "access_format", CONF_T_ENUM, P(access_format), "combined", 0, 0, "combined|json",
	  "access log lines: NGINX/Apache combined with ringproxy's fields after, or JSON lines" },
	{ CONF_IN_LOG, "access_hits", CONF_T_STRING, P(access_hits), "all", 0, 0, "all, none or 1/N (N from 1 to 1000000)",
	  "which requests ringproxy's own cache answered get an access log line: all, none (only the requests sent to "
	  "a backend and the proxy's own replies), or 1/N, one in N of them (a sample, counted per worker thread)" },

	/* [discovery]: members from DNS SRV (config/discover.h, backend/dnssrv.c) */
	{ CONF_IN_DISCOVERY, "srv", CONF_T_STRING, P(disc_srv), "", 0, 0, "DNS names, space-separated",
	  "SRV names whose targets are backends, e.g. _http._tcp.cache.ns.svc.cluster.local (a Kubernetes headless "
	  "Service) or _thumbs._tcp.service.consul; empty = no discovery. Each target is a backend named by its "
	  "first label (name), at the address its name resolves to and the record's port" },
	{ CONF_IN_DISCOVERY, "resolver", CONF_T_STRING, P(disc_resolver), "", 0, 0, "IP:PORT",
	  "the DNS server asked; empty = the name servers of /etc/resolv.conf" },
	{ CONF_IN_DISCOVERY, "interval", CONF_T_DURATION, P(disc_interval_ms), "5s", 100, 3600000, NULL,
	  "time between two polls; never shorter than the answer's TTL" },
	{ CONF_IN_DISCOVERY, "name", CONF_T_ENUM, P(disc_name), "first-label", 0, 0, "first-label|fqdn",
	  "a target's backend name: its first label (cache-0, as a StatefulSet's pod is named) or the whole "
	  "name; lower-cased either way" },
	{ CONF_IN_DISCOVERY, "weights", CONF_T_ENUM, P(disc_weights), "ignore", 0, 0, "ignore|srv",
	  "ignore: every discovered backend has weight 1 (CoreDNS rewrites SRV weights on every scale event); "
	  "srv: the record's weight. A [backend NAME] section of the name sets it either way" },
	{ CONF_IN_DISCOVERY, "add_after", CONF_T_UINT, P(disc_add_after), "2", 1, 100, NULL,
	  "good answers in a row a new target must be in to join the ring" },
	{ CONF_IN_DISCOVERY, "remove_after", CONF_T_DURATION, P(disc_remove_after_ms), "120s", 0, 86400000, NULL,
	  "how long a member must be absent from good answers to leave the ring (longer than a pod's restart "
	  "plus the TTL); meanwhile it stays, and its keys fail over as for a down cache" },
	{ CONF_IN_DISCOVERY, "max_remove", CONF_T_DOUBLE, P(disc_max_remove), "50%", 0, 100, "a share in percent",
	  "a change that would remove more than this share of the discovered members is held, and shown, until "
	  "ringproxy ctl discovery apply (or until it reverts)" },
	{ CONF_IN_DISCOVERY, "apply_every", CONF_T_DURATION, P(disc_apply_every_ms), "10s", 0, 3600000, NULL,
	  "changes are applied only at wall-clock multiples of this, so proxies that saw the same answers change "
	  "their rings together; 0 = as soon as due" },

	{ CONF_IN_H2, "max_concurrent_streams", CONF_T_UINT, P(h2_max_streams), "100", 1, 1000, NULL,
	  "streams a client may have open on one HTTP/2 connection (SETTINGS_MAX_CONCURRENT_STREAMS); a stream reset "
	  "by the client keeps its place until its request has let go, and the connection is not read while all "
	  "places are taken" },
	{ CONF_IN_H2, "max_requests", CONF_T_UINT, P(h2_max_requests), "1000", 1, 100000000, NULL,
	  "requests on one HTTP/2 connection; then a graceful GOAWAY: the open streams finish, the client opens a new "
	  "connection" },
	{ CONF_IN_H2, "initial_window", CONF_T_SIZE, P(h2_window), "64k", 1024, 1048576, NULL,
	  "a stream's flow-control window for request bodies (SETTINGS_INITIAL_WINDOW_SIZE): what a client may send "
	  "ahead of the backend" },
	{ CONF_IN_H2, "idle_timeout", CONF_T_DURATION, P(h2_idle_timeout_ms), "60s", 1, 3600000, NULL,
	  "an HTTP/2 connection with no stream open is closed (GOAWAY) after this" },
	{ CONF_IN_H2, "send_timeout", CONF_T_DURATION, P(h2_send_timeout_ms), "5s", 1, 3600000, NULL,
	  "a stream with response bytes ready that the client's flow-control window keeps back this long is reset "
	  "(RST_STREAM CANCEL), freeing what it held" },
	{ CONF_IN_H2, "max_glitches", CONF_T_UINT, P(h2_max_glitches), "1000", 1, 1000000, NULL,
	  "frames that do no work a connection may send (PING, SETTINGS, PRIORITY, empty DATA, unknown frames, "
	  "PRIORITY_UPDATE for a stream not open, WINDOW_UPDATE of 0, resets of streams whose request was under way, header blocks over the limits); past it "
	  "GOAWAY ENHANCE_YOUR_CALM" },

	{ CONF_IN_TLS, "listen", CONF_T_LISTEN, P(tls_listen), "", 0, 0,
	  "IP:port[ proxy_protocol=on|off], comma-separated (at most 16), or empty",
	  "addresses:ports the proxy accepts HTTPS clients on, beside [proxy] listen; an address followed by "
	  "proxy_protocol=on or off has that setting of its own, the others follow [tls] proxy_protocol; "
	  "empty = no HTTPS; start only" },
	{ CONF_IN_TLS, "proxy_protocol", CONF_T_BOOL, P(tls_proxy_protocol), "off", 0, 0, NULL,
	  "on: a connection to a [tls] listen address from [proxy] proxy_protocol_from begins with a PROXY "
	  "header (before the TLS handshake), as on the plain listener" },
	{ CONF_IN_TLS, "certs", CONF_T_STRING, P(tls_certs), "", 0, 0,
	  "a file name or a glob (/etc/ringproxy/tls/*.pem)",
	  "PEM files, each a certificate, its chain and its private key; a certificate serves the DNS names of its "
	  "subjectAltName (exact, or *.example.com for one label); a client's SNI picks one, and no SNI or an "
	  "unknown name gets the first file in name order (unless strict_sni); an RSA and an ECDSA certificate of "
	  "the same names both load and the client's signature algorithms choose; reloaded with the config: a file "
	  "that does not parse, a key that does not match, or an expired certificate fails the reload" },
	{ CONF_IN_TLS, "strict_sni", CONF_T_BOOL, P(tls_strict_sni), "off", 0, 0, NULL,
	  "on: a handshake without SNI, or naming no certificate's name, fails (unrecognized_name) instead of "
	  "getting the first certificate" },
	{ CONF_IN_TLS, "protocols", CONF_T_STRING, P(tls_protocols), "TLSv1.2 TLSv1.3", 0, 0,
	  "TLSv1.2 and/or TLSv1.3, space- or comma-separated",
	  "the TLS versions offered; anything older is refused by -t" },
	{ CONF_IN_TLS, "ciphers", CONF_T_STRING, P(tls_ciphers), CONF_TLS_CIPHERS, 0, 0,
	  "an OpenSSL cipher list",
	  "TLS 1.2 cipher suites; the default is the nine of Mozilla's intermediate configuration (ECDHE, and "
	  "DHE with RSA, each with AES-GCM or ChaCha20-Poly1305), the client's order deciding; a list that allows a suite without "
	  "forward secrecy or authenticated encryption, or a NULL, export, RC4, DES or 3DES one, is refused" },
	{ CONF_IN_TLS, "ciphersuites", CONF_T_STRING, P(tls_ciphersuites), "", 0, 0,
	  "an OpenSSL TLS 1.3 ciphersuite list (TLS_AES_128_GCM_SHA256:...), or empty",
	  "TLS 1.3 cipher suites; empty: OpenSSL's own (TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256, "
	  "TLS_AES_128_GCM_SHA256), all authenticated encryption with forward secrecy" },
	{ CONF_IN_TLS, "alpn", CONF_T_STRING, P(tls_alpn), "h2, http/1.1", 0, 0,
	  "protocol names this build serves, comma-separated: h2, http/1.1",
	  "the application protocols offered by ALPN, in the server's order of preference (the first of them the "
	  "client offers is chosen); h2 serves HTTP/2 ([h2]); a client that offers none of them gets no ALPN answer "
	  "and speaks HTTP/1.1" },
	{ CONF_IN_TLS, "ticket_keys", CONF_T_PATH, P(tls_ticket_keys), "", 0, 0, NULL,
	  "a file of session ticket keys a fleet shares, re-read at each reload: one key a line, base64 of 80 bytes "
	  "(openssl rand 80 | base64 -w0): a 16-byte name, a 32-byte AES-256 key, a 32-byte HMAC-SHA256 key "
	  "(HAProxy's order; NGINX's 80-byte files are ordered name, HMAC, AES); the first line encrypts new tickets, "
	  "every line decrypts; rotate by putting a new key first and dropping the oldest, then reload every proxy; "
	  "empty: keys made from a random secret of the process, a new one every 12 hours, the previous still "
	  "decrypting" },
	{ CONF_IN_TLS, "handshake_timeout", CONF_T_DURATION, P(tls_handshake_timeout_ms), "10s", 10, 600000, NULL,
	  "a TLS handshake not complete in this time is cut; a connection in its handshake holds no buffer of "
	  "ours and counts against max_connections" },

	{ CONF_IN_BACKEND, "url", CONF_T_URL, B(url), NULL, 0, 0, NULL,
	  "http://host[:port][/prefix] of the cache" },
	{ CONF_IN_BACKEND, "weight", CONF_T_DOUBLE, B(weight), "1", 0, 1000, NULL,
	  "relative share of the ring; fractional allowed (whole under a compat scheme, at most 256 under "
	  "haproxy); 0 = drained (listed, no keys)" },
	{ CONF_IN_BACKEND, "id", CONF_T_STRING, B(id), "", 0, 0, NULL,
	  "the identity a compat scheme hashes, apart from url so that the address can change without moving "
	  "a key: nginx: the server string as written (default: the url's host[:port] as written); haproxy: the "
	  "server id, 1 to 1048575 (default: HAProxy's automatic numbering); ketama: the server's name (default: "
	  "the url's host, host:port when the port is not 11211, as libmemcached and twemproxy hash a server "
	  "without a name); envoy: the hash_key (default: the url's ip:port as Envoy prints it); scheme "
	  "ringproxy does not use it (the name is the identity)" },
	{ CONF_IN_BACKEND, "host", CONF_T_STRING, B(host_header), "", 0, 0, "host[:port], or empty",
	  "the Host sent to this cache instead of the client's; empty = [proxy] backend_host" },
	{ CONF_IN_BACKEND, "max_inflight", CONF_T_UINT, B(max_inflight), "0", 0, 1000000, NULL,
	  "hard cap of requests in flight to this backend; 0 = none" },
	{ CONF_IN_BACKEND, "slow_start", CONF_T_DURATION, B(slow_start_ms), "0", 0, 3600000, NULL,
	  "after recovering, take keys back gradually over this time; 0 = at once" },
	/* per-backend health overrides: unset means [health]'s value */
	{ CONF_IN_BACKEND, "health_path", CONF_T_PATH, B(health.path), NULL, 0, 0, NULL,
	  "this backend's own [health] path" },
	{ CONF_IN_BACKEND, "health_interval", CONF_T_DURATION, B(health.interval_ms), NULL, 100, 3600000, NULL,
	  "this backend's own [health] interval" },
	{ CONF_IN_BACKEND, "health_timeout", CONF_T_DURATION, B(health.timeout_ms), NULL, 10, 600000, NULL,
	  "this backend's own [health] timeout" },
	{ CONF_IN_BACKEND, "health_rise", CONF_T_UINT, B(health.rise), NULL, 1, 100, NULL,
	  "this backend's own [health] rise" },
	{ CONF_IN_BACKEND, "health_fall", CONF_T_UINT, B(health.fall), NULL, 1, 100, NULL,
	  "this backend's own [health] fall" },
	{ CONF_IN_BACKEND, "health_expect", CONF_T_RANGE, B(health.expect_lo), NULL, 100, 599, NULL,
	  "this backend's own [health] expect" },
};

#define CONF_NKEYS (sizeof(conf_keys) / sizeof(conf_keys[0]))

int conf_line(const struct conf *c, const char *key)
{
	for (size_t i = 0; c->lines && i < CONF_NKEYS; i++)
		if (conf_keys[i].where != CONF_IN_BACKEND && strcmp(conf_keys[i].key, key) == 0)
			return c->lines[i];
	return 0;
}

int conf_tls_line(const struct conf *c, const char *key)
{
	for (size_t i = 0; c->lines && i < CONF_NKEYS; i++)
		if (conf_keys[i].where == CONF_IN_TLS && strcmp(conf_keys[i].key, key) == 0)
			return c->lines[i];
	return 0;
}

int conf_backend_line(const struct conf_backend *be, const char *key)
{
	for (size_t i = 0; be->lines && i < CONF_NKEYS; i++)
		if (conf_keys[i].where == CONF_IN_BACKEND && strcmp(conf_keys[i].key, key) == 0)
			return be->lines[i];
	return 0;
}

static const char *const conf_section_names[] = { "proxy", "ring", "health", "cache", "log", "tls", "h2",
						   "discovery", "backend NAME" };

/* Parse state shared by the reader and the handler. */
/* A line number is the line in its file, plus its file's index in
 * struct conf_parse's files (0: the main file) shifted by this much. */
#define CONF_LINE_BITS 20
#define CONF_LINE_MASK ((1 << CONF_LINE_BITS) - 1)
#define CONF_MAX_FILES 512
#define CONF_INCLUDE_DEPTH 8
/* What one file may hold: a line (a comment included) and the whole
 * file. A config of RING_MAX_BACKENDS backends is well under 1 MiB; the
 * bounds are there for what a glob may match by mistake (a symlink to
 * /dev/zero, a log file), which must not be read into memory for good. */
#define CONF_READ_LINE_MAX 65536
#define CONF_READ_FILE_MAX (16 << 20)

struct conf_parse {
	const char *file;
	/* included files, by index (0 is file); open: the real paths of the
	 * files being read, outermost first, to refuse a loop */
	char *files[CONF_MAX_FILES];
	int nfiles;
	char *open[CONF_INCLUDE_DEPTH + 1];
	int depth;
	struct conf *c;
	struct conf_errors *errs;

	/* the reader */
	FILE *fp;
	const char *text;       /* or a string */
	size_t fbytes;          /* read of fp so far (CONF_READ_FILE_MAX) */
	int line;
	char *buf;
	size_t bufcap;
	EVP_MD_CTX *sha;        /* SHA-256 of every byte read; NULL: none */

	/* the current section, as the reader saw its header */
	int where;              /* enum conf_where, or -1 = unknown/none */
	struct conf_backend *be;/* when where == CONF_IN_BACKEND */

	/* the line where each key was set (refusing duplicates) is kept in
	 * c->lines and in each backend's lines */
	/* line of the [proxy], [ring] and [health] headers, to refuse a
	 * second one (inih would merge them silently) */
	int section_line[CONF_IN_BACKEND];
	size_t be_cap;
	/* an allocation failed: the config may hold NULL where a value
	 * belongs, so it is neither validated nor returned */
	bool oom;
};

/* The name of the file a line number is in. */
static const char *conf_file_of(const struct conf_parse *ps, int line)
{
	int f = line >> CONF_LINE_BITS;

	return f > 0 && f < ps->nfiles ? ps->files[f] : ps->file;
}

/* Where line (a number of any file) is, in a message about line here:
 * "line N" in the same file, else "FILE:N". */
static const char *conf_at(const struct conf_parse *ps, int here, int line, char *buf, size_t len)
{
	if (line >> CONF_LINE_BITS == here >> CONF_LINE_BITS)
		snprintf(buf, len, "line %d", line & CONF_LINE_MASK);
	else
		snprintf(buf, len, "%s:%d", conf_file_of(ps, line), line & CONF_LINE_MASK);
	return buf;
}

__attribute__((format(printf, 3, 4)))
static void conf_error(struct conf_parse *ps, int line, const char *fmt, ...)
{
	char msg[1024];
	char *full;
	char **grown;
	va_list ap;
	int n;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (line > 0)
		n = asprintf(&full, "%s:%d: %s", conf_file_of(ps, line), line & CONF_LINE_MASK, msg);
	else
		n = asprintf(&full, "%s: %s", ps->file, msg);
	/* an error that cannot be kept still fails the load */
	if (n < 0) {
		ps->oom = true;
		return;
	}
	grown = realloc(ps->errs->msg, (ps->errs->n + 1) * sizeof(char *));
	if (!grown) {
		free(full);
		ps->oom = true;
		return;
	}
	ps->errs->msg = grown;
	ps->errs->msg[ps->errs->n++] = full;
}

void conf_errors_free(struct conf_errors *errs)
{
	if (!errs)
		return;
	for (size_t i = 0; i < errs->n; i++)
		free(errs->msg[i]);
	free(errs->msg);
	errs->msg = NULL;
	errs->n = 0;
	errs->oom = false;
}

/* ---- value parsers ---------------------------------------------------- */

static int conf_parse_uint(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

static int conf_parse_double(const char *s, double *out)
{
	char *end;
	double v;

	if (!isdigit((unsigned char)*s) && *s != '.' && *s != '-')
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !isfinite(v))
		return -1;
	*out = v;
	return 0;
}

/* A non-negative decimal number followed by a unit from units[] (suffix,
 * multiplier); a bare number takes bare_mult. */
struct conf_unit {
	const char *suffix;
	double mult;
};

static int conf_parse_units(const char *s, const struct conf_unit *units,
			    double bare_mult, uint64_t *out)
{
	char *end;
	double v, mult = bare_mult;

	if (!isdigit((unsigned char)*s) && *s != '.')
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno || !isfinite(v) || v < 0)
		return -1;
	if (*end) {
		mult = -1;
		for (const struct conf_unit *u = units; u->suffix; u++)
			if (strcasecmp(end, u->suffix) == 0)
				mult = u->mult;
		if (mult < 0)
			return -1;
	}
	v *= mult;
	if (v > (double)UINT64_MAX / 2)
		return -1;
	*out = (uint64_t)llround(v);
	return 0;
}

/* A duration written in parts, as conf_fmt_ms writes one: "1m59s",
 * "1h30m", "1m59s976ms"; each part a whole number and its unit, the
 * units from the largest down. 0, or -1. */
static int conf_parse_compound(const char *s, uint64_t *ms)
{
	static const struct { const char *suffix; uint64_t mult; } units[] = {
		{ "h", 3600000 }, { "m", 60000 }, { "s", 1000 }, { "ms", 1 },
	};
	size_t next = 0, parts = 0;
	uint64_t sum = 0;

	while (*s) {
		uint64_t v = 0;
		size_t u, digits = 0;

		for (; isdigit((unsigned char)*s) && digits < 12; s++, digits++)
			v = v * 10 + (uint64_t)(*s - '0');
		if (!digits || isdigit((unsigned char)*s))
			return -1;
		/* "ms" before "m": the longer unit that fits */
		for (u = next; u < 4; u++) {
			size_t n = strlen(units[u].suffix);

			if (strncasecmp(s, units[u].suffix, n) == 0 && (u != 1 || (s[1] != 's' && s[1] != 'S')))
				break;
		}
		if (u == 4)
			return -1;
		s += strlen(units[u].suffix);
		sum += v * units[u].mult;
		next = u + 1;
		parts++;
	}
	if (parts < 2)
		return -1;
	*ms = sum;
	return 0;
}

int conf_parse_duration(const char *s, uint64_t *ms)
{
	static const struct conf_unit units[] = {
		{ "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 },
		{ NULL, 0 },
	};

	if (conf_parse_units(s, units, 1000, ms) == 0)
		return 0;
	return conf_parse_compound(s, ms);
}

int conf_parse_size(const char *s, uint64_t *bytes)
{
	static const struct conf_unit units[] = {
		{ "k", 1024.0 }, { "m", 1048576.0 }, { "g", 1073741824.0 },
		{ "kb", 1024.0 }, { "mb", 1048576.0 }, { "gb", 1073741824.0 },
		{ NULL, 0 },
	};
	uint64_t v;

	if (conf_parse_units(s, units, 1, &v) < 0)
		return -1;
	*bytes = v;
	return 0;
}

/* Split an http:// URL into host, port and path prefix. On error, why says
 * what is wrong. The caller frees *host and *prefix. */
static int conf_parse_url(const char *url, char **host, uint16_t *port,
			  char **prefix, char *why, size_t whylen)
{
	const char *p, *hs, *he, *path;
	uint64_t portv = 80;
	size_t plen;

	*host = *prefix = NULL;
	if (strncasecmp(url, "https://", 8) == 0) {
		snprintf(why, whylen, "https:// backends are not supported; ringproxy speaks plain HTTP/1.1 to caches on a trusted network");
		return -1;
	}
	if (strncasecmp(url, "http://", 7) != 0) {
		snprintf(why, whylen, "not an http:// URL; write url = http://host:port[/prefix]");
		return -1;
	}
	p = url + 7;
	for (const char *q = p; *q; q++) {
		if ((unsigned char)*q <= ' ' || *q == 0x7f) {
			snprintf(why, whylen, "the URL contains a space or control character");
			return -1;
		}
	}
	if (strchr(p, '@')) {
		snprintf(why, whylen, "user:password@ is not supported in a backend URL");
		return -1;
	}
	if (strpbrk(p, "?#")) {
		snprintf(why, whylen, "a backend URL takes no query or fragment");
		return -1;
	}
	if (*p == '[') {
		hs = p + 1;
		he = strchr(hs, ']');
		if (!he) {
			snprintf(why, whylen, "unterminated [IPv6] host");
			return -1;
		}
		p = he + 1;
	} else {
		size_t alen = strcspn(p, "/"), colons = 0;

		for (size_t i = 0; i < alen; i++)
			colons += p[i] == ':';
		if (colons > 1) {
			/* "::1:80": no way to tell the port from the address */
			const char *last = memrchr(p, ':', alen);
			size_t dl = strspn(last + 1, "0123456789");

			if (dl && last + 1 + dl == p + alen && last > p && last[-1] != ':')
				snprintf(why, whylen, "put an IPv6 address in brackets: http://[%.*s]:%.*s%s",
					 (int)(last - p), p, (int)dl, last + 1, p + alen);
			else
				snprintf(why, whylen, "put an IPv6 address in brackets: http://[%.*s]:PORT%s",
					 (int)alen, p, p + alen);
			return -1;
		}
		hs = p;
		while (*p && *p != ':' && *p != '/')
			p++;
		he = p;
	}
	if (he == hs) {
		snprintf(why, whylen, "the URL has no host");
		return -1;
	}
	for (const char *q = hs; q < he; q++) {
		if (!isalnum((unsigned char)*q) && !strchr(".-_:", *q)) {
			snprintf(why, whylen, "invalid character '%c' in the host", *q);
			return -1;
		}
	}
	if (*p == ':') {
		const char *ps = ++p;
		char num[8];

		while (isdigit((unsigned char)*p))
			p++;
		if (p == ps || (size_t)(p - ps) >= sizeof(num) || (*p && *p != '/')) {
			snprintf(why, whylen, "the port must be a number from 1 to 65535");
			return -1;
		}
		memcpy(num, ps, (size_t)(p - ps));
		num[p - ps] = '\0';
		if (conf_parse_uint(num, &portv) < 0 || portv < 1 || portv > 65535) {
			snprintf(why, whylen, "the port must be a number from 1 to 65535");
			return -1;
		}
	} else if (*p && *p != '/') {
		snprintf(why, whylen, "unexpected '%c' after the host", *p);
		return -1;
	}
	path = p;
	plen = strlen(path);
	while (plen > 0 && path[plen - 1] == '/')
		plen--;
	*host = strndup(hs, (size_t)(he - hs));
	*prefix = strndup(path, plen);
	if (!*host || !*prefix) {
		free(*host);
		free(*prefix);
		*host = *prefix = NULL;
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	*port = (uint16_t)portv;
	return 0;
}

/* Backend names end up in headers, JSON and Prometheus labels: keep them
 * to a safe alphabet. */
static int conf_name_ok(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > 64)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)name[i]) && !strchr("._-", name[i]))
			return 0;
	return 1;
}

/* Edit distance for "did you mean" hints; keys are short. */
static size_t conf_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), row[64], prev, tmp;

	if (la >= 63 || lb >= 63)
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		prev = row[0];
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			tmp = row[j];
			size_t best = prev + (tolower((unsigned char)a[i - 1]) !=
					      tolower((unsigned char)b[j - 1]));
			if (row[j] + 1 < best)
				best = row[j] + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			prev = tmp;
		}
	}
	return row[lb];
}

/* ---- setting a value through the table ------------------------------- */

static void conf_type_text(const struct conf_keydef *k, char *out, size_t len)
{
	switch (k->type) {
	case CONF_T_UINT: snprintf(out, len, "a whole number from %.0f to %.0f", k->min, k->max); break;
	case CONF_T_DOUBLE:
		if (k->choices)
			snprintf(out, len, "%s", k->choices);
		else
			snprintf(out, len, "a number from %g to %g", k->min, k->max);
		break;
	case CONF_T_DURATION: snprintf(out, len, "a duration such as 500ms, 5s or 2m"); break;
	case CONF_T_SIZE: snprintf(out, len, "a size such as 16k or 1m"); break;
	case CONF_T_ENUM: snprintf(out, len, "one of %s", k->choices); break;
	case CONF_T_BOOL: snprintf(out, len, "on or off"); break;
	case CONF_T_RANGE: snprintf(out, len, "a status code or range from %.0f to %.0f, e.g. 200-399", k->min, k->max); break;
	case CONF_T_PATH: snprintf(out, len, "an absolute path (starting with /) or empty"); break;
	case CONF_T_ADDR: snprintf(out, len, "IP:port, or [IPv6]:port"); break;
	case CONF_T_LISTEN: snprintf(out, len, "IP:port[ proxy_protocol=on|off], comma-separated"); break;
	case CONF_T_URL: snprintf(out, len, "an http:// URL"); break;
	default: snprintf(out, len, "text"); break;
	}
}

static int conf_enum_index(const char *choices, const char *v)
{
	const char *p = choices;
	size_t vl = strlen(v);
	int i = 0;

	while (*p) {
		const char *bar = strchr(p, '|');
		size_t l = bar ? (size_t)(bar - p) : strlen(p);

		if (l == vl && strncasecmp(p, v, l) == 0)
			return i;
		if (!bar)
			break;
		p = bar + 1;
		i++;
	}
	return -1;
}

void conf_fmt_ms(uint64_t ms, char *out, size_t len)
{
	unsigned long long h = ms / 3600000, m = ms / 60000 % 60, sec = ms / 1000 % 60, rest = ms % 1000;
	size_t n = 0;

	/* under a minute, a part of a second reads as milliseconds alone
	 * ("1500ms"); past it, each unit that is not 0, largest first
	 * ("2m", "1m59s", "1h30m"), as the file would say it */
	if (ms < 60000 && rest) {
		snprintf(out, len, "%llums", (unsigned long long)ms);
		return;
	}
	out[0] = '\0';
	if (h)
		n += (size_t)snprintf(out + n, n < len ? len - n : 0, "%lluh", h);
	if (m && n < len)
		n += (size_t)snprintf(out + n, len - n, "%llum", m);
	if ((sec || !ms) && n < len)
		n += (size_t)snprintf(out + n, len - n, "%llus", sec);
	if (rest && n < len)
		snprintf(out + n, len - n, "%llums", rest);
}

/* The setters, one per type: parse v as k's type, check it against k's
 * range and store it at field (in struct conf or struct conf_backend; be
 * is the backend being read, for the URL's parts). 0, or -1 with the
 * reason in why. */
typedef int conf_setter(const struct conf_keydef *k, char *field, const char *v,
			struct conf_backend *be, char *why, size_t whylen);

/* The string-valued types keep v as written once it checked out. */
static int conf_store_string(char *field, const char *v, char *why, size_t whylen)
{
	char *dup = strdup(v);

	if (!dup) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	free(*(char **)field);
	*(char **)field = dup;
	return 0;
}

static int conf_set_uint(const struct conf_keydef *k, char *field, const char *v,
			 struct conf_backend *be, char *why, size_t whylen)
{
	char tt[96];
	uint64_t u;

	if (conf_parse_uint(v, &u) < 0) {
		conf_type_text(k, tt, sizeof(tt));
		snprintf(why, whylen, "'%s' is not a whole number; expected %s", v, tt);
		return -1;
	}
	if ((double)u < k->min || (double)u > k->max) {
		conf_type_text(k, tt, sizeof(tt));
		snprintf(why, whylen, "%s is out of range; expected %s", v, tt);
		return -1;
	}
	*(unsigned *)field = (unsigned)u;
	return 0;
}

static int conf_set_double(const struct conf_keydef *k, char *field, const char *v,
			   struct conf_backend *be, char *why, size_t whylen)
{
	char tt[96], pct[32];
	double d;

	/* a share may be written with its percent sign */
	if (k->offset == P(disc_max_remove) && k->where == CONF_IN_DISCOVERY && *v && v[strlen(v) - 1] == '%' &&
	    strlen(v) < sizeof(pct)) {
		snprintf(pct, sizeof(pct), "%.*s", (int)strlen(v) - 1, v);
		v = pct;
	}
	if (conf_parse_double(v, &d) < 0) {
		conf_type_text(k, tt, sizeof(tt));
		snprintf(why, whylen, "'%s' is not a number; expected %s", v, tt);
		return -1;
	}
	if (d < k->min || d > k->max) {
		conf_type_text(k, tt, sizeof(tt));
		snprintf(why, whylen, "%s is out of range; expected %s", v, tt);
		return -1;
	}
	/* below 1 the caps add up to less than the requests in flight and
	 * every backend is over its cap (arXiv:1608.01350 takes c > 1) */
	if (k->offset == P(balance_factor) && k->where == CONF_IN_RING && d > 0 && d < 1) {
		conf_type_text(k, tt, sizeof(tt));
		snprintf(why, whylen, "%s is below 1, where every backend would be over its cap; expected %s", v, tt);
		return -1;
	}
	*(double *)field = d;
	return 0;
}

/* Durations and sizes: a number with a unit; the range is said in the
 * key's own unit. */
static int conf_set_amount(const struct conf_keydef *k, char *field, const char *v,
			   struct conf_backend *be, char *why, size_t whylen)
{
	char tt[96], lo[32], hi[32];
	bool duration = k->type == CONF_T_DURATION;
	uint64_t u;

	if ((duration ? conf_parse_duration(v, &u) : conf_parse_size(v, &u)) < 0) {
		conf_type_text(k, tt, sizeof(tt));
		snprintf(why, whylen, "'%s' is not %s", v, tt);
		return -1;
	}
	if ((double)u < k->min || (double)u > k->max) {
		if (duration) {
			conf_fmt_ms((uint64_t)k->min, lo, sizeof(lo));
			conf_fmt_ms((uint64_t)k->max, hi, sizeof(hi));
		} else {
			snprintf(lo, sizeof(lo), "%.0f", k->min);
			snprintf(hi, sizeof(hi), "%.0f", k->max);
		}
		snprintf(why, whylen, "%s is out of range; expected %s to %s", v, lo, hi);
		return -1;
	}
	*(uint64_t *)field = u;
	return 0;
}

static int conf_set_enum(const struct conf_keydef *k, char *field, const char *v,
			 struct conf_backend *be, char *why, size_t whylen)
{
	char tt[96];
	int i = conf_enum_index(k->choices, v);

	if (i < 0) {
		conf_type_text(k, tt, sizeof(tt));
		snprintf(why, whylen, "'%s' is not %s", v, tt);
		return -1;
	}
	*(int *)field = i;
	return 0;
}

static int conf_set_bool(const struct conf_keydef *k, char *field, const char *v,
			 struct conf_backend *be, char *why, size_t whylen)
{
	static const char *const yes[] = { "on", "yes", "true", "1" };
	static const char *const no[] = { "off", "no", "false", "0" };
	char tt[96];

	for (size_t i = 0; i < 4; i++) {
		if (strcasecmp(v, yes[i]) == 0 || strcasecmp(v, no[i]) == 0) {
			*(bool *)field = strcasecmp(v, yes[i]) == 0;
			return 0;
		}
	}
	conf_type_text(k, tt, sizeof(tt));
	snprintf(why, whylen, "'%s' is not %s", v, tt);
	return -1;
}

/* A status range "200-399" or one status "200": two ints at field. */
static int conf_set_range(const struct conf_keydef *k, char *field, const char *v,
			  struct conf_backend *be, char *why, size_t whylen)
{
	char tt[96], buf[32], *dash;
	uint64_t lo, hi;

	snprintf(buf, sizeof(buf), "%s", v);
	dash = strchr(buf, '-');
	if (dash)
		*dash = '\0';
	if (strlen(v) >= sizeof(buf) || conf_parse_uint(buf, &lo) < 0 ||
	    (dash && conf_parse_uint(dash + 1, &hi) < 0)) {
		conf_type_text(k, tt, sizeof(tt));
		snprintf(why, whylen, "'%s' is not %s", v, tt);
		return -1;
	}
	if (!dash)
		hi = lo;
	if ((double)lo < k->min || (double)hi > k->max || lo > hi) {
		conf_type_text(k, tt, sizeof(tt));
		snprintf(why, whylen, "%s is out of range; expected %s", v, tt);
		return -1;
	}
	((int *)field)[0] = (int)lo;
	((int *)field)[1] = (int)hi;
	return 0;
}

static int conf_set_path(const struct conf_keydef *k, char *field, const char *v,
			 struct conf_backend *be, char *why, size_t whylen)
{
	char tt[96];

	if (*v && *v != '/') {
		conf_type_text(k, tt, sizeof(tt));
		snprintf(why, whylen, "'%s' is not %s", v, tt);
		return -1;
	}
	for (const char *q = v; *q; q++) {
		if ((unsigned char)*q <= ' ' || *q == 0x7f) {
			snprintf(why, whylen, "spaces and control characters are not allowed in a path");
			return -1;
		}
	}
	return conf_store_string(field, v, why, whylen);
}

static int conf_set_addr(const struct conf_keydef *k, char *field, const char *v,
			 struct conf_backend *be, char *why, size_t whylen)
{
	/* an address key whose default is empty may be left empty */
	if (*v || !k->def || *k->def) {
		struct sockaddr_storage ss;
		socklen_t sslen;

		if (addr_parse(v, &ss, &sslen, why, whylen) < 0)
			return -1;
	}
	return conf_store_string(field, v, why, whylen);
}

/* A listen list: one address is checked as admin_listen's is (the same
 * message), several each with its options. */
static int conf_set_listen(const struct conf_keydef *k, char *field, const char *v,
			   struct conf_backend *be, char *why, size_t whylen)
{
	struct conf_listen l[CONF_LISTEN_MAX];

	if (!strpbrk(v, ", \t") && *v)
		return conf_set_addr(k, field, v, be, why, whylen);
	if (conf_listen_parse(v, l, CONF_LISTEN_MAX, why, whylen) < 0)
		return -1;
	return conf_store_string(field, v, why, whylen);
}

/* A backend's URL: kept as written, and split into be's host, port and
 * path prefix. */
static int conf_set_url(const struct conf_keydef *k, char *field, const char *v,
			struct conf_backend *be, char *why, size_t whylen)
{
	char *host, *prefix;
	uint16_t port;

	if (conf_parse_url(v, &host, &port, &prefix, why, whylen) < 0)
		return -1;
	free(be->host);
	free(be->prefix);
	be->host = host;
	be->prefix = prefix;
	be->port = port;
	return conf_store_string(field, v, why, whylen);
}

static int conf_set_string(const struct conf_keydef *k, char *field, const char *v,
			   struct conf_backend *be, char *why, size_t whylen)
{
	for (const char *q = v; *q; q++) {
		if ((unsigned char)*q < ' ' || *q == 0x7f) {
			snprintf(why, whylen, "control characters are not allowed");
			return -1;
		}
	}
	/* RFC 6750's b64token: what an Authorization: Bearer line carries */
	if (k->offset == P(admin_token) && k->where == CONF_IN_PROXY) {
		size_t n = strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/");

		if (v[n + strspn(v + n, "=")] != '\0' || (*v && n == 0)) {
			snprintf(why, whylen, "a token is letters, digits and -._~+/ (then '=' padding), as Authorization: Bearer carries it; e.g. the output of openssl rand -hex 32");
			return -1;
		}
	}
	/* a Host field's value (RFC 9110 7.2): a name or address, maybe a port */
	if ((k->offset == P(backend_host) && k->where == CONF_IN_PROXY) ||
	    (k->offset == B(host_header) && k->where == CONF_IN_BACKEND)) {
		if (v[strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:[]")] != '\0' ||
		    *v == ':' || (*v && v[strlen(v) - 1] == ':')) {
			snprintf(why, whylen, "'%s' is not a Host: a name or address, then :port if any "
				 "(thumbs, cache.example:6081, [2001:db8::1]:80)", v);
			return -1;
		}
	}
	if ((k->offset == P(backend_header) && k->where == CONF_IN_PROXY)
	    || (k->offset == P(cache_target_field) && k->where == CONF_IN_CACHE)) {
		for (const char *q = v; *q; q++) {
			if (!isalnum((unsigned char)*q) && !strchr("!#$%&'*+-.^_`|~", *q)) {
				snprintf(why, whylen, "'%s' is not a valid header name", v);
				return -1;
			}
		}
	}
	return conf_store_string(field, v, why, whylen);
}

static conf_setter *const conf_setters[] = {
	[CONF_T_UINT] = conf_set_uint,
	[CONF_T_DOUBLE] = conf_set_double,
	[CONF_T_DURATION] = conf_set_amount,
	[CONF_T_SIZE] = conf_set_amount,
	[CONF_T_STRING] = conf_set_string,
	[CONF_T_ENUM] = conf_set_enum,
	[CONF_T_ADDR] = conf_set_addr,
	[CONF_T_LISTEN] = conf_set_listen,
	[CONF_T_URL] = conf_set_url,
	[CONF_T_BOOL] = conf_set_bool,
	[CONF_T_RANGE] = conf_set_range,
	[CONF_T_PATH] = conf_set_path,
};

/* Store value v of key k into base (struct conf or struct conf_backend)
 * with the setter of k's type. Returns 0, or -1 with the reason in why. */
static int conf_set(const struct conf_keydef *k, void *base, const char *v,
		    struct conf_backend *be, char *why, size_t whylen)
{
	return conf_setters[k->type](k, (char *)base + k->offset, v, be, why, whylen);
}

static void conf_defaults(struct conf_parse *ps, enum conf_where where,
			  void *base, struct conf_backend *be)
{
	char why[256];

	for (size_t i = 0; i < CONF_NKEYS; i++) {
		const struct conf_keydef *k = &conf_keys[i];

		if (k->where != where || !k->def)
			continue;
		/* The table's own defaults must parse: a failure is a bug,
		 * or an allocation that failed (the field stays NULL) */
		if (conf_set(k, base, k->def, be, why, sizeof(why)) < 0) {
			ps->oom = true;
			conf_error(ps, 0, "default of %s not set: %s", k->key, why);
		}
	}
}

/* ---- the reader and the handler -------------------------------------- */

static char *conf_trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

static void conf_index_backend(struct conf *c, size_t i);

static struct conf_backend *conf_new_backend(struct conf_parse *ps, const char *name, int line)
{
	struct conf *c = ps->c;
	struct conf_backend *grown, *be;
	int *lines = calloc(CONF_NKEYS, sizeof(int));
	char *dup = strdup(name);

	/* counted only once it has its name: a backend without one is what
	 * every later reader would trip on */
	if (!lines || !dup)
		goto oom;
	if (c->nbackends == ps->be_cap) {
		size_t cap = ps->be_cap ? ps->be_cap * 2 : 8;

		grown = realloc(c->backends, cap * sizeof(*grown));
		if (!grown)
			goto oom;
		c->backends = grown;
		ps->be_cap = cap;
	}
	be = &c->backends[c->nbackends++];
	memset(be, 0, sizeof(*be));
	be->lines = lines;
	be->name = dup;
	be->line = line;
	conf_index_backend(c, c->nbackends - 1);
	conf_defaults(ps, CONF_IN_BACKEND, be, be);
	return be;
oom:
	free(lines);
	free(dup);
	ps->oom = true;
	return NULL;
}

/* An unknown section header: say which known one it is close to, as for
 * keys ([Proxy], [proxies], [backends cache-1]). */
static void conf_unknown_section(struct conf_parse *ps, const char *name)
{
	static const char *const known[] = { "proxy", "ring", "health", "cache", "log", "tls", "h2", "discovery",
					     "backend" };
	size_t wl = strcspn(name, " \t"), best_d = SIZE_MAX;
	const char *best = NULL, *rest = name + wl;
	char word[64];

	snprintf(word, sizeof(word), "%.*s", (int)(wl < sizeof(word) ? wl : sizeof(word) - 1), name);
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		size_t d = conf_distance(word, known[i]);

		if (d < best_d) {
			best_d = d;
			best = known[i];
		}
	}
	while (isspace((unsigned char)*rest))
		rest++;
	if (best && best_d <= 2 && strcmp(best, "backend") == 0)
		conf_error(ps, ps->line, "unknown section [%s]; did you mean [backend %s]?", name,
			   *rest ? rest : "NAME");
	else if (best && best_d <= 2 && !*rest)
		conf_error(ps, ps->line, "unknown section [%s]; did you mean [%s]?", name, best);
	else
		conf_error(ps, ps->line, "unknown section [%s]; expected [proxy], [ring], [health], [cache], [log], [tls], "
			   "[h2], [discovery] or [backend NAME]", name);
}

/* A section header line seen by the reader. */
static void conf_section(struct conf_parse *ps, char *inner)
{
	static const char *const single[] = { "proxy", "ring", "health", "cache", "log", "tls", "h2", "discovery" };
	char *name = conf_trim(inner), at[300];

	ps->where = -1;
	ps->be = NULL;
	for (int i = 0; i < CONF_IN_BACKEND; i++) {
		if (strcmp(name, single[i]) != 0)
			continue;
		if (ps->section_line[i]) {
			/* its keys are skipped: the error says what to do */
			conf_error(ps, ps->line, "second [%s] section (the first is at %s); merge them into one",
				   name, conf_at(ps, ps->line, ps->section_line[i], at, sizeof(at)));
			ps->where = -2;
		} else {
			ps->section_line[i] = ps->line;
			ps->where = i;
		}
		return;
	}
	if (strncmp(name, "backend", 7) == 0 &&
		   (name[7] == '\0' || isspace((unsigned char)name[7]))) {
		char *bname = conf_trim(name + 7);
		const struct conf_backend *dup = conf_backend_find(ps->c, bname);

		if (!*bname) {
			conf_error(ps, ps->line, "[backend] needs a name; write [backend NAME], e.g. [backend cache-1]");
		} else if (!conf_name_ok(bname)) {
			conf_error(ps, ps->line, "backend name '%s' is invalid; use 1-64 letters, digits, '.', '_' or '-'", bname);
		} else if (dup) {
			conf_error(ps, ps->line, "duplicate backend '%s' (first defined at %s); backend names must be unique", bname,
				   conf_at(ps, ps->line, dup->line, at, sizeof(at)));
		} else {
			ps->be = conf_new_backend(ps, bname, ps->line);
			if (!ps->be) {
				conf_error(ps, ps->line, "out of memory");
				ps->where = -2;         /* its keys skipped, not misplaced */
				return;
			}
			ps->where = CONF_IN_BACKEND;
		}
		/* a bad backend header: its keys are skipped silently, the
		 * header error already says what to fix */
		if (ps->where < 0)
			ps->where = -2;
	} else {
		conf_unknown_section(ps, name);
		ps->where = -2;
	}
}

static char *conf_reader(char *str, int num, void *stream);
static int conf_handler(void *user, const char *section, const char *key, const char *value);

/* The file type's name, for a refusal. */
static const char *conf_file_kind(mode_t m)
{
	return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device" :
	       S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

/* path opened for reading, or NULL with why ("cannot open: ...", "is a
 * FIFO, not a regular file; ..."). The open does not block (a FIFO's
 * would wait for a writer and hang the main thread: reloads, the admin
 * listener, SIGTERM, and -t under systemd's ExecReload), and anything but
 * a regular file is refused once opened (fstat: the check is of what was
 * opened, not of a name that may change meanwhile). Symbolic links are
 * followed: a conf.d/ of links to files kept elsewhere is common, and
 * what a link leads to is checked as any file is. */
static FILE *conf_open(const char *path, char *why, size_t len)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	struct stat st;
	FILE *fp;

	if (fd < 0) {
		snprintf(why, len, "cannot open: %s", strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) < 0) {
		snprintf(why, len, "cannot open: %s", strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, len, "is %s, not a regular file; a config file must be one", conf_file_kind(st.st_mode));
		goto fail;
	}
	fp = fdopen(fd, "r");
	if (fp)
		return fp;
	snprintf(why, len, "cannot open: %s", strerror(errno));
fail:
	close(fd);
	return NULL;
}

/* The next line of ps->fp into ps->buf, its '\n' kept and a NUL after:
 * its length, 0 at the end of the file (or at CONF_READ_FILE_MAX, said
 * once), -1 on a read error (said), and *cut when the line was longer
 * than CONF_READ_LINE_MAX (its first bytes kept, the rest skipped). */
static ssize_t conf_read_line(struct conf_parse *ps, bool *cut)
{
	size_t n = 0;
	int ch = 0;

	*cut = false;
	if (ps->bufcap < CONF_READ_LINE_MAX + 1) {
		char *b = realloc(ps->buf, CONF_READ_LINE_MAX + 1);

		if (!b) {
			conf_error(ps, ps->line + 1, "out of memory");
			return -1;
		}
		ps->buf = b;
		ps->bufcap = CONF_READ_LINE_MAX + 1;
	}
	while (ch != '\n' && (ch = getc(ps->fp)) != EOF) {
		if (ps->fbytes++ == CONF_READ_FILE_MAX) {
			conf_error(ps, ps->line + 1, "the file is larger than %d MiB; is it a config file? "
				   "(what is past that is not read)", CONF_READ_FILE_MAX >> 20);
			return 0;
		}
		if (ps->fbytes > CONF_READ_FILE_MAX)
			return 0;
		if (n < CONF_READ_LINE_MAX)
			ps->buf[n++] = (char)ch;
		else
			*cut = true;
	}
	if (ferror(ps->fp)) {
		conf_error(ps, ps->line + 1, "cannot read the file: %s", strerror(errno));
		return -1;
	}
	ps->buf[n] = '\0';
	return (ssize_t)n;
}

/* Read the included file path where the current line (an include of
 * pattern) is, by a nested parse: outside any section at first, the
 * includer's section restored after. */
static void conf_include_file(struct conf_parse *ps, const char *path, const char *pattern)
{
	int line = ps->line, where = ps->where, rc;
	struct conf_backend *be = ps->be;
	FILE *outer_fp = ps->fp;
	size_t outer_bytes = ps->fbytes;
	const char *outer_text = ps->text;
	char *real = realpath(path, NULL);
	char why[256];
	FILE *fp = NULL;

	if (!real) {
		conf_error(ps, line, "include = %s: %s: %s", pattern, path, strerror(errno));
		return;
	}
	for (int d = 0; d <= ps->depth; d++) {
		if (ps->open[d] && strcmp(ps->open[d], real) == 0) {
			conf_error(ps, line, "include = %s: %s is already being read (an include loop); "
				   "remove this include or the one that leads back", pattern, path);
			goto out;
		}
	}
	if (ps->depth >= CONF_INCLUDE_DEPTH || ps->nfiles >= CONF_MAX_FILES) {
		conf_error(ps, line, "include = %s: more than %d levels of include or %d files; include fewer",
			   pattern, CONF_INCLUDE_DEPTH, CONF_MAX_FILES - 1);
		goto out;
	}
	fp = conf_open(path, why, sizeof(why));
	if (!fp) {
		conf_error(ps, line, "include = %s: %s: %s", pattern, path, why);
		goto out;
	}
	if (!(ps->files[ps->nfiles] = strdup(path))) {
		conf_error(ps, line, "include = %s: cannot open %s: %s", pattern, path, strerror(errno));
		goto out;
	}
	ps->open[++ps->depth] = real;
	ps->fp = fp;
	ps->fbytes = 0;
	ps->text = NULL;
	ps->line = ps->nfiles++ << CONF_LINE_BITS;
	ps->where = -1;
	ps->be = NULL;
	rc = ini_parse_stream(conf_reader, ps, conf_handler, ps);
	if (rc == -2)
		conf_error(ps, 0, "out of memory while reading %s", path);
	ps->open[ps->depth--] = NULL;
	ps->fp = outer_fp;
	ps->fbytes = outer_bytes;
	ps->text = outer_text;
	ps->line = line;
	ps->where = where;
	ps->be = be;
out:
	if (fp)
		fclose(fp);
	free(real);
}

/* include = PATTERN on the current line: a file or a glob, relative to
 * the including file's directory; the files it matches in name order
 * (glob's sort). A glob that matches nothing in a directory that exists
 * includes nothing (an empty conf.d); a missing directory, or a plain
 * name that does not exist, is an error. */
static void conf_include(struct conf_parse *ps, const char *value)
{
	const char *from = conf_file_of(ps, ps->line), *slash = strrchr(from, '/');
	char pattern[PATH_MAX], full[PATH_MAX], dir[PATH_MAX], *ds;
	struct stat st;
	glob_t g;
	int rc;

	/* a copy: value is in the line buffer, which the included files'
	 * lines reuse (and may move) while the glob's next match waits */
	if (snprintf(pattern, sizeof(pattern), "%s", value) >= (int)sizeof(pattern)) {
		conf_error(ps, ps->line, "include = %.64s...: the path is too long", value);
		return;
	}
	if (!*pattern) {
		conf_error(ps, ps->line, "include needs a file or a glob, e.g. include = conf.d/*.ini");
		return;
	}
	if (pattern[0] == '/' || !slash)
		rc = snprintf(full, sizeof(full), "%s", pattern);
	else
		rc = snprintf(full, sizeof(full), "%.*s/%s", (int)(slash - from), from, pattern);
	if (rc < 0 || (size_t)rc >= sizeof(full)) {
		conf_error(ps, ps->line, "include = %s: the path is too long", pattern);
		return;
	}
	memcpy(dir, full, sizeof(dir));
	ds = strrchr(dir, '/');
	if (ds)
		*ds = ds == dir ? '/' : '\0';
	if (ds == dir)
		dir[1] = '\0';
	if ((!ds || !strpbrk(dir, "*?[")) &&
	    (stat(ds ? dir : ".", &st) < 0 || !S_ISDIR(st.st_mode))) {
		conf_error(ps, ps->line, "include = %s: no directory %s (the path is relative to %s's); "
			   "create it or fix the path", pattern, ds ? dir : ".", from);
		return;
	}
	rc = glob(full, 0, NULL, &g);
	if (rc == GLOB_NOMATCH && !strpbrk(pattern, "*?["))
		conf_error(ps, ps->line, "include = %s: no file %s", pattern, full);
	else if (rc != 0 && rc != GLOB_NOMATCH)
		conf_error(ps, ps->line, "include = %s: cannot read the directory of %s", pattern, full);
	for (size_t i = 0; rc == 0 && i < g.gl_pathc; i++)
		conf_include_file(ps, g.gl_pathv[i], pattern);
	if (rc == 0)
		globfree(&g);
}

/* inih calls this with buffer size num (INI_MAX_LINE). We read whole lines
 * ourselves so a long one is an error instead of a silent split. */
static char *conf_reader(char *str, int num, void *stream)
{
	struct conf_parse *ps = stream;
	ssize_t n;
	char *line, *t;

	for (;;) {
		if (ps->fp) {
			bool cut;

			if ((ps->line & CONF_LINE_MASK) == CONF_LINE_MASK) {
				conf_error(ps, ps->line, "more than %d lines; is it a config file? "
					   "(what is past that is not read)", CONF_LINE_MASK - 1);
				return NULL;
			}
			n = conf_read_line(ps, &cut);
			if (n <= 0)
				return NULL;
			if (cut) {
				ps->line++;
				conf_error(ps, ps->line, "line longer than %d bytes; is this a config file?",
					   CONF_READ_LINE_MAX);
				continue;
			}
		} else {
			const char *nl;

			if (!*ps->text)
				return NULL;
			nl = strchr(ps->text, '\n');
			n = nl ? nl - ps->text + 1 : (ssize_t)strlen(ps->text);
			if ((size_t)n + 1 > ps->bufcap) {
				char *b = realloc(ps->buf, (size_t)n + 1);
				if (!b)
					return NULL;
				ps->buf = b;
				ps->bufcap = (size_t)n + 1;
			}
			memcpy(ps->buf, ps->text, (size_t)n);
			ps->buf[n] = '\0';
			ps->text += n;
		}
		ps->line++;
		if (ps->sha && !EVP_DigestUpdate(ps->sha, ps->buf, (size_t)n)) {
			EVP_MD_CTX_free(ps->sha);
			ps->sha = NULL;
		}
		line = ps->buf;
		if ((ps->line & CONF_LINE_MASK) == 1 && (unsigned char)line[0] == 0xEF &&
		    (unsigned char)line[1] == 0xBB && (unsigned char)line[2] == 0xBF)
			line += 3;
		if (memchr(line, '\0', (size_t)n - (size_t)(line - ps->buf))) {
			conf_error(ps, ps->line, "NUL byte in the line; is this a text file?");
			continue;
		}
		t = conf_trim(line);
		if (!*t || *t == ';' || *t == '#')
			continue;
		if (strncasecmp(t, "include", 7) == 0 && conf_trim(t + 7)[0] == '=') {
			/* the value may hold ';' or '#' (a file name can) */
			conf_include(ps, conf_trim(strchr(t, '=') + 1));
			continue;
		}
		if (*t == '[') {
			char *rb = strchr(t, ']');
			char *after = rb ? conf_trim(rb + 1) : NULL;

			if (!rb || (*after && *after != ';' && *after != '#')) {
				conf_error(ps, ps->line, "malformed section header; write [proxy], [ring], [health], [cache] or [backend NAME]");
				ps->where = -2;
				continue;
			}
			*rb = '\0';
			conf_section(ps, t + 1);
			continue;
		}
		if (!strchr(t, '=') && !strchr(t, ':')) {
			conf_error(ps, ps->line, "'%s' is not a 'key = value' line", t);
			continue;
		}
		if (isspace((unsigned char)*line)) {
			/* inih would treat it as a continuation of the
			 * previous value; ringproxy has no multi-line values */
			conf_error(ps, ps->line, "indented line; keys start at the beginning of the line");
			continue;
		}
		if (strlen(t) + 1 > (size_t)num) {
			conf_error(ps, ps->line, "line longer than %d characters", num - 1);
			continue;
		}
		/* inih needs the section to route the key: we give it one line
		 * at a time and keep our own section state, so the key is
		 * passed under a fixed dummy section. */
		snprintf(str, (size_t)num, "%s\n", t);
		return str;
	}
}

static int conf_handler(void *user, const char *section, const char *key, const char *value)
{
	struct conf_parse *ps = user;
	const struct conf_keydef *k = NULL;
	const struct conf_keydef *near = NULL;
	size_t near_d = SIZE_MAX;
	char why[512];
	int *lines;
	void *base;

	(void)section;
	if (ps->where == -2)
		return 1;
	if (ps->where == -1) {
		conf_error(ps, ps->line, "'%s' is outside any section; put it under [proxy], [ring], [health] or [backend NAME]", key);
		return 1;
	}
	for (size_t i = 0; i < CONF_NKEYS; i++) {
		if ((int)conf_keys[i].where != ps->where)
			continue;
		if (strcasecmp(conf_keys[i].key, key) == 0) {
			k = &conf_keys[i];
			break;
		}
		size_t d = conf_distance(key, conf_keys[i].key);
		if (d < near_d) {
			near_d = d;
			near = &conf_keys[i];
		}
	}
	if (!k) {
		if (near && near_d <= 2)
			conf_error(ps, ps->line, "unknown key '%s' in [%s]; did you mean '%s'?", key,
				   conf_section_names[ps->where], near->key);
		else
			conf_error(ps, ps->line, "unknown key '%s' in [%s]; see ringproxy --help-config", key,
				   conf_section_names[ps->where]);
		return 1;
	}
	lines = ps->where == CONF_IN_BACKEND ? ps->be->lines : ps->c->lines;
	if (lines[k - conf_keys]) {
		conf_error(ps, ps->line, "'%s' is set twice (first at %s); keep one", key,
			   conf_at(ps, ps->line, lines[k - conf_keys], why, sizeof(why)));
		return 1;
	}
	lines[k - conf_keys] = ps->line;
	base = ps->where == CONF_IN_BACKEND ? (void *)ps->be : (void *)ps->c;
	if (conf_set(k, base, value, ps->be, why, sizeof(why)) < 0)
		conf_error(ps, ps->line, "%s: %s", key, why);
	return 1;
}

static int conf_backend_key_set(const struct conf_parse *ps, size_t be, const char *key)
{
	return conf_backend_line(&ps->c->backends[be], key) != 0;
}

/* Per-backend health settings: [health] unless the backend overrides. */
static void conf_inherit(struct conf_parse *ps)
{
	const struct conf_health *g = &ps->c->health;

	for (size_t i = 0; i < ps->c->nbackends; i++) {
		struct conf_health *h = &ps->c->backends[i].health;

		/* an invalid override was reported; inherit to stay whole */
		if (!h->path && !(h->path = strdup(g->path)))
			conf_error(ps, 0, "out of memory");
		if (!conf_backend_key_set(ps, i, "health_interval"))
			h->interval_ms = g->interval_ms;
		if (!conf_backend_key_set(ps, i, "health_timeout"))
			h->timeout_ms = g->timeout_ms;
		if (!conf_backend_key_set(ps, i, "health_rise"))
			h->rise = g->rise;
		if (!conf_backend_key_set(ps, i, "health_fall"))
			h->fall = g->fall;
		if (!conf_backend_key_set(ps, i, "health_expect")) {
			h->expect_lo = g->expect_lo;
			h->expect_hi = g->expect_hi;
		}
	}
}

int conf_listen_parse(const char *text, struct conf_listen *out, size_t max, char *why, size_t len)
{
	const char *p = text;
	size_t n = 0;

	while (*p) {
		const char *e = strchr(p, ',');
		size_t flen = e ? (size_t)(e - p) : strlen(p);
		char item[160], *a, *opt;
		struct sockaddr_storage ss;
		socklen_t sslen;
		char aw[128];

		if (flen >= sizeof(item)) {
			snprintf(why, len, "'%.40s...' is too long for an address", p);
			return -1;
		}
		memcpy(item, p, flen);
		item[flen] = '\0';
		a = conf_trim(item);
		p = e ? e + 1 : p + flen;
		if (!*a) {
			if (!e && n > 0)
				break;  /* a trailing comma */
			snprintf(why, len, "an empty address in the list");
			return -1;
		}
		if (n == max) {
			snprintf(why, len, "more than %zu addresses", max);
			return -1;
		}
		opt = a + strcspn(a, " \t");
		if (*opt) {
			*opt++ = '\0';
			opt = conf_trim(opt);
		}
		if (addr_parse(a, &ss, &sslen, aw, sizeof(aw)) < 0) {
			snprintf(why, len, "%s: %s", a, aw);
			return -1;
		}
		snprintf(out[n].addr, sizeof(out[n].addr), "%s", a);
		out[n].proxy_protocol = -1;
		if (strcmp(opt, "proxy_protocol=on") == 0) {
			out[n].proxy_protocol = 1;
		} else if (strcmp(opt, "proxy_protocol=off") == 0) {
			out[n].proxy_protocol = 0;
		} else if (*opt) {
			snprintf(why, len, "%s: unknown option '%s'; after an address only proxy_protocol=on or "
				 "proxy_protocol=off may follow", a, opt);
			return -1;
		}
		for (size_t i = 0; i < n; i++)
			if (strcmp(out[i].addr, a) == 0) {
				snprintf(why, len, "%s is listed twice", a);
				return -1;
			}
		n++;
	}
	return (int)n;
}

/* A listen address's port, its IP bytes and whether it is a wildcard. */
struct conf_ip {
	int port;
	size_t len;
	const unsigned char *ip;
	bool any;
};

static void conf_ip_of(const struct sockaddr_storage *ss, struct conf_ip *out)
{
	static const unsigned char zero[16];

	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;

		out->port = ntohs(s6->sin6_port);
		out->ip = s6->sin6_addr.s6_addr;
		out->len = 16;
	} else {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;

		out->port = ntohs(s4->sin_port);
		out->ip = (const unsigned char *)&s4->sin_addr;
		out->len = 4;
	}
	out->any = memcmp(out->ip, zero, out->len) == 0;
}

/* Would listeners on a and b take each other's connections? Both bind
 * with SO_REUSEPORT, so the kernel would accept both and split the
 * clients between them (or give the more specific address all of them).
 * Port 0 asks for a free port: never the same. */
static bool conf_addrs_clash(const char *a, const char *b)
{
	struct sockaddr_storage sa, sb;
	struct conf_ip ia, ib;
	socklen_t la, lb;
	char why[128];

	if (!*a || !*b || addr_parse(a, &sa, &la, why, sizeof(why)) < 0 ||
	    addr_parse(b, &sb, &lb, why, sizeof(why)) < 0)
		return false;
	conf_ip_of(&sa, &ia);
	conf_ip_of(&sb, &ib);
	if (ia.port == 0 || ia.port != ib.port)
		return false;
	/* a wildcard overlaps every address of its port ([::] takes IPv4
	 * too unless IPV6_V6ONLY) */
	return ia.any || ib.any || (ia.len == ib.len && memcmp(ia.ip, ib.ip, ia.len) == 0);
}

/* An admin listener any other host can reach serves the ring, the
 * backends' addresses and the traffic: only with a token. Is listen ("" or
 * NULL for none) such an address, with token ""? */
static bool conf_admin_exposed(const char *listen, const char *token)
{
	struct sockaddr_storage ss;
	socklen_t sslen;
	char why[256];

	return listen && *listen && !*token && addr_parse(listen, &ss, &sslen, why, sizeof(why)) == 0 &&
	       !addr_is_loopback(&ss);
}

static void conf_validate_admin(struct conf_parse *ps)
{
	const struct conf *c = ps->c;

	if (!conf_admin_exposed(c->admin_listen, c->admin_token))
		return;
	conf_error(ps, conf_line(c, "admin_listen"),
		   "admin_listen %s is not a loopback address and no admin_token is set: any host that reaches it "
		   "could read the stats, the ring and the backends' addresses; set [proxy] admin_token "
		   "(admin requests then need Authorization: Bearer TOKEN) or listen on 127.0.0.1",
		   c->admin_listen);
}

/* The nginx identity a backend has by default: its url's authority as
 * written (http://AUTH/prefix), so that a url copied from an NGINX
 * `server` line ("10.0.0.1:8080", "thumbs-1.example") places as it did. */
static char *conf_url_authority(const char *url)
{
	const char *a = url + 7;        /* conf_parse_url checked "http://" */

	return strndup(a, strcspn(a, "/"));
}

/* The identity a backend without an id has under scheme nginx, ketama or
 * envoy, from its url, malloc'd (NULL: out of memory). nginx: the
 * authority as written. ketama: the host, or host:port when the port is
 * not 11211, as libmemcached and twemproxy hash a server line without a
 * name. envoy: the address as Envoy prints it, "10.0.0.1:8080" or
 * "[2001:db8::1]:8080" (an IP literal in its canonical form; a host name
 * as written, where Envoy would print the address it resolved: write id
 * then). */
static char *conf_scheme_identity(int scheme, const struct conf_backend *be)
{
	unsigned char a[sizeof(struct in6_addr)];
	char ip[INET6_ADDRSTRLEN], *id = NULL;
	const char *fmt = "%s:%u", *h = be->host;

	if (scheme == RING_SCHEME_NGINX)
		return conf_url_authority(be->url);
	if (scheme == RING_SCHEME_KETAMA && be->port == 11211)
		return strdup(h);
	if (scheme == RING_SCHEME_ENVOY && inet_pton(AF_INET6, h, a) == 1 &&
	    inet_ntop(AF_INET6, a, ip, sizeof(ip))) {
		h = ip;
		fmt = "[%s]:%u";
	} else if (scheme == RING_SCHEME_ENVOY && inet_pton(AF_INET, h, a) == 1 &&
		   inet_ntop(AF_INET, a, ip, sizeof(ip))) {
		h = ip;
	}
	if (asprintf(&id, fmt, h, (unsigned)be->port) < 0)
		return NULL;
	return id;
}

/* A HAProxy server id as written: 1 to RING_HAPROXY_ID_MAX, else 0. */
static unsigned long conf_haproxy_id(const char *v)
{
	uint64_t id;

	if (*v < '1' || *v > '9' || conf_parse_uint(v, &id) < 0 || id > RING_HAPROXY_ID_MAX)
		return 0;
	return (unsigned long)id;
}

/* The line of a backend's key, else of its [backend] header. */
static int conf_be_line(const struct conf_backend *be, const char *key)
{
	int line = conf_backend_line(be, key);

	return line ? line : be->line;
}

/* What [ring] scheme asks of the rest of the file: no vnodes under a
 * compat scheme (each has its proxy's count), whole weights, each
 * backend's identity (written, or the scheme's default) and no two on
 * one; and HAProxy's key by default. */
static void conf_validate_scheme(struct conf_parse *ps)
{
	struct conf *c = ps->c;
	const char *scheme = ring_scheme_name((enum ring_scheme)c->scheme);
	unsigned long next = 1;

	if (conf_line(c, "key_hash") && c->scheme != RING_SCHEME_KETAMA)
		conf_error(ps, conf_line(c, "key_hash"),
			   "key_hash applies to scheme ketama only (scheme %s has its proxy's key hash); "
			   "remove key_hash", scheme);
	if (c->scheme == RING_SCHEME_RINGPROXY)
		return;
	if (conf_line(c, "vnodes"))
		conf_error(ps, conf_line(c, "vnodes"),
			   "vnodes applies to scheme ringproxy only (scheme %s has its proxy's fixed points per "
			   "unit of weight); remove vnodes", scheme);
	if (c->scheme == RING_SCHEME_HAPROXY && !conf_line(c, "key"))
		c->key = CONF_KEY_URI;
	for (size_t i = 0; i < c->nbackends; i++) {
		struct conf_backend *be = &c->backends[i];
		double wmax = c->scheme == RING_SCHEME_HAPROXY ? 256 : 1000;

		if (be->weight != floor(be->weight) || be->weight > wmax)
			conf_error(ps, conf_be_line(be, "weight"),
				   "[backend %s] weight %g: scheme %s takes whole weights from 0 to %g",
				   be->name, be->weight, scheme, wmax);
		if (c->scheme == RING_SCHEME_HAPROXY && *be->id && !conf_haproxy_id(be->id))
			conf_error(ps, conf_be_line(be, "id"),
				   "[backend %s] id '%s' is not a HAProxy server id; write a whole number from 1 to %u",
				   be->name, be->id, RING_HAPROXY_ID_MAX);
		if (c->scheme != RING_SCHEME_HAPROXY && !*be->id && be->url) {
			free(be->id);
			if (!(be->id = conf_scheme_identity(c->scheme, be))) {
				conf_error(ps, 0, "out of memory");
				return;
			}
		}
		/* HAProxy's own numbers (below) never take a written id */
		for (size_t j = 0; *be->id && j < i; j++) {
			const struct conf_backend *o = &c->backends[j];

			if (strcmp(o->id, be->id) == 0) {
				char at[300];

				conf_error(ps, conf_be_line(be, "id"),
					   "[backend %s] has the %s identity '%s' of [backend %s] (%s); "
					   "%s would give both the same points: give each backend its own id",
					   be->name, scheme, be->id, o->name,
					   conf_at(ps, conf_be_line(be, "id"), conf_be_line(o, "id"), at, sizeof(at)),
					   scheme);
				break;
			}
		}
	}
	/* HAProxy numbers the servers without an id in their order, each
	 * the first number from its position up that no server has taken
	 * (cfgparse.c, get_next_id) */
	for (size_t i = 0; c->scheme == RING_SCHEME_HAPROXY && i < c->nbackends; i++, next++) {
		struct conf_backend *be = &c->backends[i];
		char num[16];

		if (*be->id)
			continue;
		for (size_t j = 0; j < c->nbackends; j++) {
			if (conf_haproxy_id(c->backends[j].id) == next) {
				next++;
				j = (size_t)-1;         /* from the first again */
			}
		}
		snprintf(num, sizeof(num), "%lu", next);
		free(be->id);
		if (!(be->id = strdup(num))) {
			conf_error(ps, 0, "out of memory");
			return;
		}
	}
	/* twemproxy's key hash is ketama's other ring: the same points,
	 * its own row so that placing a key stays one call */
	if (c->scheme == RING_SCHEME_KETAMA && c->key_hash == CONF_KEY_HASH_FNV1A64)
		c->scheme = RING_SCHEME_KETAMA_FNV1A64;
}

int conf_check_admin_running(const struct conf *c, const char *running, char *err, size_t len)
{
	int line = conf_line(c, "admin_token");
	char where[16] = "";

	if (!conf_admin_exposed(running, c->admin_token))
		return 0;
	if (!line)
		line = conf_line(c, "admin_listen");
	/* a line of an included file is named by its key instead */
	if (line && !(line >> CONF_LINE_BITS))
		snprintf(where, sizeof(where), ":%d", line);
	snprintf(err, len, "%s%s: no admin_token, but the admin listener running on %s is not a loopback "
		 "address (admin_listen changes only with a restart): keep [proxy] admin_token set, or "
		 "restart with admin_listen on 127.0.0.1", c->path, where, running);
	return -1;
}

/* [ring] drop_params, parsed into the rules the request path reads. */
static void conf_validate_query(struct conf_parse *ps)
{
	struct conf *c = ps->c;
	char why[160];

	if (query_rules_parse(&c->query, c->drop_params ? c->drop_params : "", why, sizeof(why)) < 0)
		conf_error(ps, conf_line(c, "drop_params"), "drop_params: %s", why);
}

/* [log] access = syslog...: a target access.c can send to. */
static void conf_validate_access(struct conf_parse *ps)
{
	struct sockaddr_storage sa;
	socklen_t salen;
	char why[160];

	if (addr_syslog(ps->c->access_log, &sa, &salen, why, sizeof(why)) < 0)
		conf_error(ps, conf_line(ps->c, "access"), "access: %s: %s", ps->c->access_log, why);
}

int conf_parse_access_hits(const char *s, unsigned *every)
{
	char *end;
	unsigned long n;

	if (strcasecmp(s, "all") == 0) {
		*every = 1;
		return 0;
	}
	if (strcasecmp(s, "none") == 0) {
		*every = 0;
		return 0;
	}
	if (strncmp(s, "1/", 2) != 0 || !isdigit((unsigned char)s[2]))
		return -1;
	errno = 0;
	n = strtoul(s + 2, &end, 10);
	if (errno || *end || n < 1 || n > 1000000)
		return -1;
	*every = (unsigned)n;
	return 0;
}

/* [log] access_hits = all | none | 1/N. */
static void conf_validate_access_hits(struct conf_parse *ps)
{
	if (conf_parse_access_hits(ps->c->access_hits, &ps->c->access_hits_every) < 0)
		conf_error(ps, conf_line(ps->c, "access_hits"), "access_hits: '%s' is not all, none or 1/N "
			   "(one in N of the requests the cache answered, N from 1 to 1000000)", ps->c->access_hits);
}

/* A list of addresses and CIDR blocks (purge_allow, proxy_protocol_from). */
static void conf_validate_list(struct conf_parse *ps, const char *key, const char *list)
{
	char why[160];

	if (list && *list && addr_in_list(list, NULL, why, sizeof(why)) < 0)
		conf_error(ps, conf_line(ps->c, key), "%s: %s", key, why);
}

/* proxy_protocol believes the header's address: only from named sources. */
static void conf_validate_proxyproto(struct conf_parse *ps)
{
	const struct conf *c = ps->c;

	conf_validate_list(ps, "proxy_protocol_from", c->proxy_protocol_from);
	if (c->proxy_protocol && !*c->proxy_protocol_from)
		conf_error(ps, conf_line(c, "proxy_protocol"),
			   "proxy_protocol = on needs proxy_protocol_from: the addresses of the balancers whose PROXY "
			   "headers are believed (0.0.0.0/0, ::/0 to require one from every source)");
}

/* [cache] image_formats, parsed once for the request path. */
static void conf_validate_formats(struct conf_parse *ps)
{
	char why[160];

	if (vary_formats_parse(ps->c->cache_image_formats ? ps->c->cache_image_formats : "",
			       &ps->c->cache_formats, why, sizeof(why)) < 0)
		conf_error(ps, conf_line(ps->c, "image_formats"), "image_formats: %s", why);
}

static void conf_backend_clear(struct conf_backend *be);

/* With [discovery] srv, the [backend NAME] sections without a url are
 * not backends but the settings (weight, max_inflight, slow_start, health
 * overrides) of the name when discovery finds it: moved to c->templates,
 * the name index made again. */
static void conf_templates(struct conf_parse *ps)
{
	struct conf *c = ps->c;
	size_t n = 0, k = 0;

	if (!*c->disc_srv)
		return;
	for (size_t i = 0; i < c->nbackends; i++)
		n += !c->backends[i].url && !conf_backend_key_set(ps, i, "url");
	if (!n)
		return;
	c->templates = calloc(n, sizeof(*c->templates));
	if (!c->templates) {
		conf_error(ps, 0, "out of memory");
		return;
	}
	for (size_t i = 0; i < c->nbackends; i++) {
		if (!c->backends[i].url && !conf_backend_key_set(ps, i, "url"))
			c->templates[c->ntemplates++] = c->backends[i];
		else
			c->backends[k++] = c->backends[i];
	}
	c->nbackends = k;
	c->nstatic = k;
	free(c->be_slots);
	c->be_slots = NULL;
	c->be_nslots = c->be_nindexed = 0;
	for (size_t i = 0; i < c->nbackends; i++)
		conf_index_backend(c, i);
}

/* [discovery]: SRV names that are DNS names, a resolver that is an
 * address, and the scheme whose identity is a name. */
static void conf_validate_discovery(struct conf_parse *ps)
{
	struct conf *c = ps->c;
	const char *p = c->disc_srv;
	struct sockaddr_storage ss;
	socklen_t sslen;
	char why[160];

	c->nstatic = c->nbackends;
	while (p && *p) {
		size_t n = strcspn(p, " \t,");

		if (n > 253 || (n && strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") < n))
			conf_error(ps, conf_line(c, "srv"), "srv: '%.*s' is not a DNS name; write the SRV records' "
				   "name, e.g. _http._tcp.cache.ns.svc.cluster.local", (int)(n > 64 ? 64 : n), p);
		p += n;
		p += strspn(p, " \t,");
	}
	if (*c->disc_resolver && addr_parse(c->disc_resolver, &ss, &sslen, why, sizeof(why)) < 0)
		conf_error(ps, conf_line(c, "resolver"), "resolver: %s: %s; write IP:PORT, e.g. 10.96.0.10:53",
			   c->disc_resolver, why);
	if (*c->disc_srv && c->scheme != RING_SCHEME_RINGPROXY)
		conf_error(ps, conf_line(c, "srv"), "[discovery] srv needs [ring] scheme ringproxy (a discovered "
			   "backend's identity is its name); the compatible schemes hash addresses or numbers");
}

/* [proxy] listen and [tls] listen: lists of addresses; at least one
 * listener; no address of one list where another listener (or the admin
 * listener) would split its clients. [tls]'s settings that need no
 * OpenSSL (the certificates and the cipher lists are checked by
 * tls/certs.c, which -t and every load run). */
static void conf_validate_listen(struct conf_parse *ps)
{
	const struct conf *c = ps->c;
	struct conf_listen l[2 * CONF_LISTEN_MAX];
	int np, nt;
	char why[256];

	/* a list that does not parse was reported where it was written */
	np = conf_listen_parse(c->listen ? c->listen : "", l, CONF_LISTEN_MAX, why, sizeof(why));
	nt = conf_listen_parse(c->tls_listen ? c->tls_listen : "", l + (np > 0 ? np : 0), CONF_LISTEN_MAX, why,
			       sizeof(why));
	if (np < 0 || nt < 0)
		return;
	if (np + nt == 0 && c->listen && !*c->listen)
		conf_error(ps, conf_line(c, "listen"),
			   "listen is empty and there is no [tls] listen: the proxy would accept no client");
	for (int i = 0; i < np + nt; i++) {
		bool tls = i >= np;
		int line = tls ? conf_tls_line(c, "listen") : conf_line(c, "listen");

		if (conf_addrs_clash(l[i].addr, c->admin_listen)) {
			char where[320] = " (the default)", at[300];

			if (line)
				snprintf(where, sizeof(where), " (%s)",
					 conf_at(ps, conf_line(c, "admin_listen"), line, at, sizeof(at)));
			/* both would bind with SO_REUSEPORT and split the clients */
			conf_error(ps, conf_line(c, "admin_listen"),
				   "admin_listen %s is the address of %slisten %s%s; give the admin listener a port of "
				   "its own", c->admin_listen, tls ? "[tls] " : "", l[i].addr, where);
		}
		for (int j = i + 1; j < np + nt; j++)
			if (conf_addrs_clash(l[i].addr, l[j].addr))
				conf_error(ps, j >= np ? conf_tls_line(c, "listen") : conf_line(c, "listen"),
					   "%s and %s would take each other's connections; give each a port of its own",
					   l[i].addr, l[j].addr);
		if (l[i].proxy_protocol == 1 && !*c->proxy_protocol_from)
			conf_error(ps, line, "%s proxy_protocol=on needs [proxy] proxy_protocol_from: the addresses "
				   "of the balancers whose PROXY headers are believed", l[i].addr);
	}
	if (nt > 0 && !*c->tls_certs)
		conf_error(ps, conf_tls_line(c, "listen"),
			   "[tls] listen needs certs: the PEM files (certificate, chain, key) to serve, e.g. "
			   "certs = /etc/ringproxy/tls/*.pem");
	if (c->tls_proxy_protocol && !*c->proxy_protocol_from)
		conf_error(ps, conf_tls_line(c, "proxy_protocol"),
			   "[tls] proxy_protocol = on needs [proxy] proxy_protocol_from: the addresses of the balancers "
			   "whose PROXY headers are believed");
}

/* [tls] protocols and alpn: names this build knows; a version older than
 * TLS 1.2 is refused (RFC 8996 deprecates TLS 1.0 and 1.1). */
static void conf_validate_tls_names(struct conf_parse *ps)
{
	const struct conf *c = ps->c;
	char buf[256], *save = NULL, *tok;
	int n = 0;

	snprintf(buf, sizeof(buf), "%s", c->tls_protocols);
	for (tok = strtok_r(buf, " ,", &save); tok; tok = strtok_r(NULL, " ,", &save), n++) {
		if (strcmp(tok, "TLSv1.2") == 0 || strcmp(tok, "TLSv1.3") == 0)
			continue;
		if (strcmp(tok, "TLSv1") == 0 || strcmp(tok, "TLSv1.0") == 0 || strcmp(tok, "TLSv1.1") == 0 ||
		    strcmp(tok, "SSLv3") == 0 || strcmp(tok, "SSLv2") == 0)
			conf_error(ps, conf_tls_line(c, "protocols"),
				   "protocols: %s is refused: versions before TLS 1.2 are broken (RFC 8996); "
				   "write TLSv1.2 and/or TLSv1.3", tok);
		else
			conf_error(ps, conf_tls_line(c, "protocols"),
				   "protocols: unknown version '%s'; write TLSv1.2 and/or TLSv1.3", tok);
	}
	if (n == 0)
		conf_error(ps, conf_tls_line(c, "protocols"), "protocols is empty; write TLSv1.2 and/or TLSv1.3");
	snprintf(buf, sizeof(buf), "%s", c->tls_alpn);
	n = 0;
	for (tok = strtok_r(buf, " ,", &save); tok; tok = strtok_r(NULL, " ,", &save), n++)
		if (strcmp(tok, "http/1.1") != 0 && strcmp(tok, "h2") != 0)
			conf_error(ps, conf_tls_line(c, "alpn"),
				   "alpn: '%s' is not a protocol this build serves; offering it would let clients pick "
				   "it and fail; write h2, http/1.1 (or either)", tok);
	if (n == 0)
		conf_error(ps, conf_tls_line(c, "alpn"), "alpn is empty; write h2, http/1.1 (or either)");
}

/* Checks that need the whole file. */
static void conf_validate(struct conf_parse *ps)
{
	struct conf *c = ps->c;
	uint64_t points = 0;
	int live = 0;

	conf_inherit(ps);
	conf_validate_listen(ps);
	conf_validate_tls_names(ps);

	for (size_t i = 0; i < c->nbackends; i++) {
		struct conf_backend *be = &c->backends[i];

		/* an invalid url was already reported where it was written;
		 * with [discovery] srv, a section without one is the settings
		 * of a name discovery finds (conf_templates) */
		if (!be->url && !conf_backend_key_set(ps, i, "url") && !*c->disc_srv)
			conf_error(ps, be->line, "[backend %s] has no url; add url = http://host:port", be->name);
		if (be->weight > 0 && (be->url || !*c->disc_srv))
			live++;
		/* a compat scheme's builder counts its own */
		if (c->scheme == RING_SCHEME_RINGPROXY)
			points += ring_points_for(c->vnodes, be->weight);
	}
	conf_validate_scheme(ps);
	conf_validate_admin(ps);
	conf_validate_proxyproto(ps);
	conf_validate_list(ps, "purge_allow", c->cache_purge_allow);
	conf_validate_query(ps);
	conf_validate_access(ps);
	conf_validate_access_hits(ps);
	conf_validate_formats(ps);
	if (c->buffer_size < c->max_head_size)
		conf_error(ps, conf_line(c, "buffer_size"),
			   "buffer_size (%llu) is smaller than max_head_size (%llu); a head must fit in the buffer",
			   (unsigned long long)c->buffer_size, (unsigned long long)c->max_head_size);
	conf_validate_discovery(ps);
	conf_templates(ps);
	if (c->nbackends == 0 && !*c->disc_srv)
		conf_error(ps, 0, "no [backend NAME] section; add at least one with url = http://host:port, "
			   "or name the caches' SRV records in [discovery] srv");
	else if (!live && c->nbackends)
		conf_error(ps, 0, "no backend has weight > 0; at least one must take keys");
	if (c->nbackends > RING_MAX_BACKENDS)
		conf_error(ps, 0, "%zu backends, more than the limit of %u", c->nbackends, RING_MAX_BACKENDS);
	if (points > RING_MAX_POINTS)
		conf_error(ps, 0, "the ring would have %llu points, more than the limit of %u; lower [ring] vnodes or the weights",
			   (unsigned long long)points, RING_MAX_POINTS);
}

/* The SHA-256 of the bytes read, in hex, into the config; "" when the
 * digest could not be made. */
static void conf_sha_hex(struct conf_parse *ps)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;

	if (ps->sha && EVP_DigestFinal_ex(ps->sha, md, &len) && len == 32)
		for (unsigned i = 0; i < len; i++)
			snprintf(ps->c->sha256 + 2 * i, 3, "%02x", md[i]);
	EVP_MD_CTX_free(ps->sha);
	ps->sha = NULL;
}

static struct conf *conf_load_from(const char *name, FILE *fp, const char *text,
				   struct conf_errors *errs)
{
	struct conf_parse ps;
	struct conf *c;
	int rc;

	memset(&ps, 0, sizeof(ps));
	errs->msg = NULL;
	errs->n = 0;
	errs->oom = false;
	ps.file = name;
	ps.nfiles = 1;
	ps.open[0] = fp ? realpath(name, NULL) : NULL;
	ps.errs = errs;
	ps.fp = fp;
	ps.text = text;
	ps.where = -1;
	c = calloc(1, sizeof(*c));
	if (c) {
		c->path = strdup(name);
		c->lines = calloc(CONF_NKEYS, sizeof(int));
	}
	if (!c || !c->path || !c->lines) {
		conf_free(c);
		c = NULL;
		goto fail;
	}
	ps.c = c;
	conf_defaults(&ps, CONF_IN_PROXY, c, NULL);
	conf_defaults(&ps, CONF_IN_RING, c, NULL);
	conf_defaults(&ps, CONF_IN_HEALTH, c, NULL);
	ps.sha = EVP_MD_CTX_new();
	if (ps.sha && !EVP_DigestInit_ex(ps.sha, EVP_sha256(), NULL)) {
		EVP_MD_CTX_free(ps.sha);
		ps.sha = NULL;
	}
	conf_defaults(&ps, CONF_IN_CACHE, c, NULL);
	conf_defaults(&ps, CONF_IN_LOG, c, NULL);
	conf_defaults(&ps, CONF_IN_TLS, c, NULL);
	conf_defaults(&ps, CONF_IN_DISCOVERY, c, NULL);
	conf_defaults(&ps, CONF_IN_H2, c, NULL);
	rc = ini_parse_stream(conf_reader, &ps, conf_handler, &ps);
	conf_sha_hex(&ps);
	if (rc == -2)
		conf_error(&ps, 0, "out of memory while reading the file");
	else if (rc > 0 && errs->n == 0)
		conf_error(&ps, rc, "syntax error");
	if (rc == -2)
		ps.oom = true;
	if (!ps.oom)
		conf_validate(&ps);
fail:
	if (!c)
		ps.oom = true;
	if (ps.oom) {
		errs->oom = true;
		conf_error(&ps, 0, "out of memory while loading the config");
	}
	free(ps.buf);
	free(ps.open[0]);
	for (int i = 1; i < ps.nfiles; i++)
		free(ps.files[i]);
	if (errs->n || errs->oom) {
		conf_free(c);
		return NULL;
	}
	return c;
}

struct conf *conf_load(const char *path, struct conf_errors *errs)
{
	struct conf *c;
	char why[256];
	FILE *fp = conf_open(path, why, sizeof(why));

	if (!fp) {
		struct conf_parse ps = { .file = path, .errs = errs };

		errs->msg = NULL;
		errs->n = 0;
		errs->oom = false;
		conf_error(&ps, 0, "%s", why);
		return NULL;
	}
	c = conf_load_from(path, fp, NULL, errs);
	fclose(fp);
	return c;
}

struct conf *conf_load_string(const char *name, const char *text,
			      struct conf_errors *errs)
{
	return conf_load_from(name, NULL, text, errs);
}

void conf_free(struct conf *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < CONF_NKEYS; i++) {
		const struct conf_keydef *k = &conf_keys[i];

		if (k->where == CONF_IN_BACKEND)
			continue;
		if (k->type == CONF_T_STRING || k->type == CONF_T_ADDR || k->type == CONF_T_PATH ||
		    k->type == CONF_T_LISTEN)
			free(*(char **)((char *)c + k->offset));
	}
	for (size_t i = 0; i < c->nbackends; i++)
		conf_backend_clear(&c->backends[i]);
	for (size_t i = 0; i < c->ntemplates; i++)
		conf_backend_clear(&c->templates[i]);
	free(c->templates);
	free(c->backends);
	free(c->be_slots);
	free(c->lines);
	free(c->path);
	free(c);
}

static void conf_backend_clear(struct conf_backend *be)
{
	free(be->name);
	free(be->id);
	free(be->url);
	free(be->host);
	free(be->prefix);
	free(be->health.path);
	free(be->host_header);
	free(be->lines);
}

void conf_hostport(const struct conf_backend *b, char *out, size_t len)
{
	snprintf(out, len, strchr(b->host, ':') ? "[%s]:%u" : "%s:%u", b->host, b->port);
}

/* FNV-1a of a backend name, for the name index. */
static uint64_t conf_name_hash(const char *name)
{
	uint64_t h = UINT64_C(0xcbf29ce484222325);

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * UINT64_C(0x100000001b3);
	return h;
}

/* Puts backend i into c's name index, doubling the index at half full;
 * without memory the index is dropped and lookups are linear. */
static void conf_index_backend(struct conf *c, size_t i)
{
	if (c->be_nindexed != i)
		return;                 /* dropped before: stays linear */
	if (2 * (i + 1) > c->be_nslots) {
		size_t n = c->be_nslots ? 2 * c->be_nslots : 64;
		uint32_t *slots = calloc(n, sizeof(*slots));

		free(c->be_slots);
		c->be_slots = slots;
		c->be_nslots = slots ? n : 0;
		c->be_nindexed = 0;
		if (!slots)
			return;
		for (size_t k = 0; k < i; k++)
			conf_index_backend(c, k);
	}
	for (size_t pos = conf_name_hash(c->backends[i].name) & (c->be_nslots - 1);;
	     pos = (pos + 1) & (c->be_nslots - 1))
		if (c->be_slots[pos] == 0) {
			c->be_slots[pos] = (uint32_t)i + 1;
			break;
		}
	c->be_nindexed = i + 1;
}

/* Every backend of a reload is looked up by name a few times (the
 * duplicate check, the reload's diff, health resets): linear, 4,096
 * backends took 1.8 G of a reload's 4 G instructions. */
const struct conf_backend *conf_backend_find(const struct conf *c, const char *name)
{
	if (c->be_slots && c->be_nindexed == c->nbackends) {
		for (size_t pos = conf_name_hash(name) & (c->be_nslots - 1); c->be_slots[pos];
		     pos = (pos + 1) & (c->be_nslots - 1))
			if (strcmp(c->backends[c->be_slots[pos] - 1].name, name) == 0)
				return &c->backends[c->be_slots[pos] - 1];
		return NULL;
	}
	for (size_t i = 0; i < c->nbackends; i++)
		if (strcmp(c->backends[i].name, name) == 0)
			return &c->backends[i];
	return NULL;
}

int conf_add_backends(struct conf *c, const struct conf_found *found, size_t n, char *err, size_t len)
{
	struct conf_backend *grown;
	size_t i;

	if (c->nbackends + n > RING_MAX_BACKENDS) {
		snprintf(err, len, "%s: %zu backends with the %zu discovered, more than the limit of %u", c->path,
			 c->nbackends + n, n, RING_MAX_BACKENDS);
		return -1;
	}
	grown = realloc(c->backends, (c->nbackends + n + 1) * sizeof(*grown));
	if (!grown)
		goto nomem;
	c->backends = grown;
	for (i = 0; i < n; i++) {
		const struct conf_found *f = &found[i];
		struct conf_backend *be = &c->backends[c->nbackends];
		bool v6 = strchr(f->addr, ':') != NULL;

		const struct conf_backend *tpl = NULL;

		if (conf_backend_find(c, f->name))
			continue;
		for (size_t k = 0; k < c->ntemplates && !tpl; k++)
			if (strcmp(c->templates[k].name, f->name) == 0)
				tpl = &c->templates[k];
		memset(be, 0, sizeof(*be));
		be->name = strdup(f->name);
		be->host = strdup(f->addr);
		be->id = strdup("");
		be->prefix = strdup("");
		be->host_header = strdup(tpl && tpl->host_header ? tpl->host_header : "");
		be->health = tpl ? tpl->health : c->health;
		be->health.path = strdup(tpl ? tpl->health.path : c->health.path);
		be->lines = calloc(CONF_NKEYS, sizeof(int));
		if (tpl && be->lines)
			memcpy(be->lines, tpl->lines, CONF_NKEYS * sizeof(int));
		be->port = f->port;
		be->weight = tpl && conf_backend_line(tpl, "weight") ? tpl->weight : f->weight;
		be->max_inflight = tpl ? tpl->max_inflight : 0;
		be->slow_start_ms = tpl ? tpl->slow_start_ms : 0;
		be->line = tpl ? tpl->line : conf_line(c, "srv");
		if (asprintf(&be->url, v6 ? "http://[%s]:%u" : "http://%s:%u", f->addr, (unsigned)f->port) < 0)
			be->url = NULL;
		c->nbackends++;
		if (!be->name || !be->host || !be->id || !be->prefix || !be->host_header || !be->health.path || !be->lines ||
		    !be->url)
			goto nomem;
		conf_index_backend(c, c->nbackends - 1);
	}
	return 0;
nomem:
	snprintf(err, len, "%s: out of memory for the discovered backends", c->path);
	return -1;
}

/* A value of key k at field, written so that its setter reads it back
 * to the same value (the inverse of conf_set). */
static void conf_format(const struct conf_keydef *k, const char *field, char *out, size_t len)
{
	switch (k->type) {
	case CONF_T_UINT:
		snprintf(out, len, "%u", *(const unsigned *)field);
		break;
	case CONF_T_DOUBLE: {
		double d = *(const double *)field;

		/* the shortest text that reads back exactly */
		snprintf(out, len, "%.15g", d);
		if (strtod(out, NULL) != d)
			snprintf(out, len, "%.17g", d);
		break;
	}
	case CONF_T_DURATION:
		conf_fmt_ms(*(const uint64_t *)field, out, len);
		break;
	case CONF_T_SIZE: {
		uint64_t v = *(const uint64_t *)field;
		static const char units[] = "kmg";
		int u = -1;

		while (u < 2 && v && v % 1024 == 0) {
			v /= 1024;
			u++;
		}
		snprintf(out, len, u < 0 ? "%llu" : "%llu%c", (unsigned long long)v, u < 0 ? 0 : units[u]);
		break;
	}
	case CONF_T_ENUM: {
		const char *p = k->choices;

		/* ketama with key_hash fnv1a_64 is its own ring scheme */
		if (k->where == CONF_IN_RING && k->offset == P(scheme)) {
			snprintf(out, len, "%s", ring_scheme_name((enum ring_scheme)*(const int *)field));
			break;
		}
		for (int i = *(const int *)field; i > 0 && strchr(p, '|'); i--)
			p = strchr(p, '|') + 1;
		snprintf(out, len, "%.*s", (int)strcspn(p, "|"), p);
		break;
	}
	case CONF_T_BOOL:
		snprintf(out, len, "%s", *(const bool *)field ? "on" : "off");
		break;
	case CONF_T_RANGE: {
		const int *r = (const int *)field;

		if (r[0] == r[1])
			snprintf(out, len, "%d", r[0]);
		else
			snprintf(out, len, "%d-%d", r[0], r[1]);
		break;
	}
	default:                /* the string-valued types */
		snprintf(out, len, "%s", *(char *const *)field ? *(char *const *)field : "");
		break;
	}
}

int conf_write(const struct conf *c, FILE *out)
{
	char v[1024];
	int last = -1;

	fprintf(out, "; the effective configuration of %s: every key, defaults filled in\n", c->path);
	for (size_t i = 0; i < CONF_NKEYS; i++) {
		const struct conf_keydef *k = &conf_keys[i];

		if (k->where == CONF_IN_BACKEND)
			continue;
		if ((int)k->where != last) {
			fprintf(out, "\n[%s]\n", conf_section_names[k->where]);
			last = (int)k->where;
		}
		conf_format(k, (const char *)c + k->offset, v, sizeof(v));
		/* a compat scheme refuses vnodes (it has its own count), a
		 * scheme but ketama key_hash (it has its own key hash) */
		if (k->offset == P(vnodes) && c->scheme != RING_SCHEME_RINGPROXY)
			fprintf(out, "; %s = %s   (scheme ringproxy only)\n", k->key, v);
		else if (k->offset == P(key_hash) && c->scheme != RING_SCHEME_KETAMA &&
			 c->scheme != RING_SCHEME_KETAMA_FNV1A64)
			fprintf(out, "; %s = %s   (scheme ketama only)\n", k->key, v);
		else if (!c->lines[i] && strlen(k->key) + strlen(v) > 150)
			/* a default too long for a line of the file (the TLS
			 * cipher list): left to be the default */
			fprintf(out, "; %s = (its default, %zu characters: ringproxy --help-config)\n", k->key,
				strlen(v));
		else
			fprintf(out, "%s = %s%s\n", k->key, v, c->lines[i] ? "" : "   ; default");
	}
	/* the file's backends, then the sections without a url that
	 * [discovery] srv's names take their settings from */
	for (size_t b = 0; b < c->nstatic + c->ntemplates && b < c->nbackends + c->ntemplates; b++) {
		const struct conf_backend *be = b < c->nstatic ? &c->backends[b] : &c->templates[b - c->nstatic];

		fprintf(out, "\n[backend %s]\n", be->name);
		for (size_t i = 0; i < CONF_NKEYS; i++) {
			const struct conf_keydef *k = &conf_keys[i];

			if (k->where != CONF_IN_BACKEND)
				continue;
			if (!be->url && strcmp(k->key, "url") == 0) {
				fprintf(out, "; no url: the settings of the name [discovery] srv finds\n");
				continue;
			}
			conf_format(k, (const char *)be + k->offset, v, sizeof(v));
			/* an override not set follows [health]: written as a
			 * comment, so that the file still follows [health] */
			if (!k->def && !be->lines[i] && strcmp(k->key, "url") != 0)
				fprintf(out, "; %s = %s   (as in [health])\n", k->key, v);
			else
				fprintf(out, "%s = %s%s\n", k->key, v, be->lines[i] || !k->def ? "" : "   ; default");
		}
	}
	return ferror(out) ? -1 : 0;
}

/* scdoc text: '*' and '_' are its markup, written escaped. */
static void conf_scdoc_text(FILE *out, const char *text)
{
	for (const char *p = text; *p; p++) {
		if (*p == '*' || *p == '_' || *p == '\\')
			fputc('\\', out);
		fputc(*p, out);
	}
}

/* What a key takes, with its range in its own units (the man page). */
static void conf_range_text(const struct conf_keydef *k, char *out, size_t len)
{
	char lo[32], hi[32];

	switch (k->type) {
	case CONF_T_DURATION:
		conf_fmt_ms((uint64_t)k->min, lo, sizeof(lo));
		conf_fmt_ms((uint64_t)k->max, hi, sizeof(hi));
		snprintf(out, len, "a duration from %s to %s (ms, s, m, h; a bare number is seconds)", lo, hi);
		break;
	case CONF_T_SIZE: {
		uint64_t l = (uint64_t)k->min, h = (uint64_t)k->max;

		conf_format(k, (const char *)&l, lo, sizeof(lo));
		conf_format(k, (const char *)&h, hi, sizeof(hi));
		snprintf(out, len, "a size from %s to %s (k, m, g: powers of 1024)", lo, hi);
		break;
	}
	case CONF_T_ENUM:
		snprintf(out, len, "one of %s", k->choices);
		for (char *p = out; *p; p++)
			if (*p == '|')
				*p = ',';
		break;
	case CONF_T_ADDR:
		snprintf(out, len, "IP:port or [IPv6]:port%s", k->def && !*k->def ? ", or empty" : "");
		break;
	case CONF_T_URL:
		snprintf(out, len, "http://host[:port][/prefix]; an IPv6 address in brackets");
		break;
	case CONF_T_STRING:
	case CONF_T_LISTEN:
		snprintf(out, len, "%s", k->choices ? k->choices : "text, or empty");
		break;
	default:
		conf_type_text(k, out, len);
		break;
	}
}

void conf_help_scdoc(FILE *out)
{
	int last = -1;

	for (size_t i = 0; i < CONF_NKEYS; i++) {
		const struct conf_keydef *k = &conf_keys[i];
		char range[160];

		if ((int)k->where != last) {
			fprintf(out, "## [%s]\n\n", conf_section_names[k->where]);
			last = (int)k->where;
		}
		conf_range_text(k, range, sizeof(range));
		fputc('*', out);
		conf_scdoc_text(out, k->key);
		fputs("* (default: ", out);
		conf_scdoc_text(out, k->def ? (*k->def ? k->def : "empty") :
				strncmp(k->key, "health_", 7) == 0 ? "as in [health]" : "none: required");
		fputs(")\n\t", out);
		conf_scdoc_text(out, k->help);
		fputs(".\n\tValue: ", out);
		conf_scdoc_text(out, range);
		fputs(".\n\n", out);
	}
}

void conf_help(FILE *out)
{
	int last = -1;

	fprintf(out, "ringproxy configuration keys (INI file; durations take ms/s/m/h, sizes k/m/g)\n");
	for (size_t i = 0; i < CONF_NKEYS; i++) {
		const struct conf_keydef *k = &conf_keys[i];
		char tt[96];

		if ((int)k->where != last) {
			fprintf(out, "\n[%s]\n", conf_section_names[k->where]);
			last = (int)k->where;
		}
		conf_type_text(k, tt, sizeof(tt));
		fprintf(out, "  %-22s %s\n  %-22s default: %s; %s\n", k->key, k->help, "",
			k->def ? (*k->def ? k->def : "(empty)") :
			strncmp(k->key, "health_", 7) == 0 ? "as in [health]" : "(required)", tt);
	}
}

/* The [health] key a backend's health_KEY overrides. */
static const struct conf_keydef *conf_health_key(const struct conf_keydef *k)
{
	for (size_t i = 0; i < CONF_NKEYS; i++)
		if (conf_keys[i].where == CONF_IN_HEALTH && strcmp(conf_keys[i].key, k->key + 7) == 0)
			return &conf_keys[i];
	return k;       /* every health_ key has one: see the table */
}

/* Key k's value at base (struct conf or struct conf_backend) as the
 * file would write it. */
static void conf_value_text(const struct conf_keydef *k, const void *base, char *out, size_t len)
{
	const char *f = (const char *)base + k->offset;

	switch (k->type) {
	case CONF_T_UINT: snprintf(out, len, "%u", *(const unsigned *)f); break;
	case CONF_T_DOUBLE: snprintf(out, len, "%g", *(const double *)f); break;
	case CONF_T_DURATION: conf_fmt_ms(*(const uint64_t *)f, out, len); break;
	case CONF_T_SIZE: snprintf(out, len, "%llu", (unsigned long long)*(const uint64_t *)f); break;
	case CONF_T_BOOL: snprintf(out, len, "%s", *(const bool *)f ? "on" : "off"); break;
	case CONF_T_RANGE: snprintf(out, len, "%d-%d", ((const int *)f)[0], ((const int *)f)[1]); break;
	case CONF_T_ENUM: {
		const char *p = k->choices;
		int i = *(const int *)f;

		while (i-- > 0 && strchr(p, '|'))
			p = strchr(p, '|') + 1;
		snprintf(out, len, "%.*s", (int)strcspn(p, "|"), p);
		break;
	}
	default: {
		const char *v = *(char *const *)f;

		snprintf(out, len, "%s", v && *v ? v : "(empty)");
		break;
	}
	}
}

/* Whether key k has the same value at x and y (bases as for
 * conf_value_text), without writing either: a reload of thousands of
 * backends compares each of their keys, and the same value writes the
 * same text. false says only that the stored values differ. */
static bool conf_value_same(const struct conf_keydef *k, const void *x, const void *y)
{
	const char *f = (const char *)x + k->offset, *g = (const char *)y + k->offset;

	switch (k->type) {
	case CONF_T_UINT: return *(const unsigned *)f == *(const unsigned *)g;
	case CONF_T_DOUBLE: return memcmp(f, g, sizeof(double)) == 0;
	case CONF_T_DURATION:
	case CONF_T_SIZE: return *(const uint64_t *)f == *(const uint64_t *)g;
	case CONF_T_BOOL: return *(const bool *)f == *(const bool *)g;
	case CONF_T_RANGE: return memcmp(f, g, 2 * sizeof(int)) == 0;
	case CONF_T_ENUM: return *(const int *)f == *(const int *)g;
	default: {
		const char *a = *(char *const *)f, *b = *(char *const *)g;

		return strcmp(a ? a : "", b ? b : "") == 0;
	}
	}
}

/* Append "key a -> b" for key k of bases x and y when the values differ;
 * name prefixes a backend's keys. Returns 1 if it did. */
/* Keys a reload reads but does not apply (proxy.c's reload says so):
 * the listeners and the threads are made once, at start. */
static bool conf_key_restart(const struct conf_keydef *k)
{
	return (k->where == CONF_IN_PROXY &&
	       (k->offset == P(listen) || k->offset == P(workers) || k->offset == P(admin_listen) ||
		k->offset == P(pid_file))) ||
	       (k->where == CONF_IN_TLS && k->offset == P(tls_listen));
}

/* Tell fn of key k when its values at x and y differ (section: the
 * backend's name, or NULL for k's own section). 1 when they do. */
static int conf_diff_key(const struct conf_keydef *k, const void *x, const void *y, const char *name,
			 conf_change_fn *fn, void *arg)
{
	char va[320], vb[320];
	struct conf_change ch = { .backend = name, .section = name ? name : conf_section_names[k->where],
				  .key = k->key, .from = va, .to = vb, .restart = conf_key_restart(k) };

	if (conf_value_same(k, x, y))
		return 0;
	conf_value_text(k, x, va, sizeof(va));
	conf_value_text(k, y, vb, sizeof(vb));
	if (strcmp(va, vb) == 0)
		return 0;
	/* a secret is said to change, never shown */
	if (k->offset == P(admin_token) && k->where == CONF_IN_PROXY)
		ch.from = ch.to = NULL;
	fn(arg, &ch);
	return 1;
}

const char *conf_key_mode_name(int mode)
{
	static char names[CONF_NKEYMODES][32];

	for (size_t i = 0; i < CONF_NKEYS; i++) {
		struct conf c = { .key = mode };

		if (conf_keys[i].where != CONF_IN_RING || strcmp(conf_keys[i].key, "key") != 0)
			continue;
		if (mode < 0 || mode >= CONF_NKEYMODES)
			return "?";
		if (!names[mode][0])
			conf_value_text(&conf_keys[i], &c, names[mode], sizeof(names[mode]));
		return names[mode];
	}
	return "?";
}

int conf_diff_each(const struct conf *a, const struct conf *b, conf_change_fn *fn, void *arg)
{
	int n = 0;

	for (size_t i = 0; i < CONF_NKEYS; i++)
		if (conf_keys[i].where != CONF_IN_BACKEND)
			n += conf_diff_key(&conf_keys[i], a, b, NULL, fn, arg);
	for (size_t j = 0; j < b->nbackends; j++) {
		const struct conf_backend *y = &b->backends[j];
		const struct conf_backend *x = conf_backend_find(a, y->name);

		if (!x)
			continue;
		for (size_t i = 0; i < CONF_NKEYS; i++) {
			const struct conf_keydef *k = &conf_keys[i];
			char v[320], g[320];

			/* url, weight and id are the ring's: plan_summary says them */
			if (k->where != CONF_IN_BACKEND || k->offset == B(url) || k->offset == B(weight) ||
			    k->offset == B(id) || conf_value_same(k, x, y))
				continue;
			/* a health value inherited on both sides changed in
			 * [health], said once there */
			if (strncmp(k->key, "health_", 7) == 0) {
				const struct conf_keydef *gk = conf_health_key(k);
				bool ina, inb;

				conf_value_text(k, x, v, sizeof(v));
				conf_value_text(gk, a, g, sizeof(g));
				ina = strcmp(v, g) == 0;
				conf_value_text(k, y, v, sizeof(v));
				conf_value_text(gk, b, g, sizeof(g));
				inb = strcmp(v, g) == 0;
				if (ina && inb)
					continue;
			}
			n += conf_diff_key(k, x, y, y->name, fn, arg);
		}
	}
	return n;
}

/* conf_diff's line, one change at a time. */
struct conf_diff_text {
	char *out;
	size_t len;
	int n;
};

static void conf_diff_add(void *arg, const struct conf_change *ch)
{
	struct conf_diff_text *d = arg;
	size_t used = strlen(d->out);

	/* [ring] scheme, key_hash, query and drop_params are the ring's, as
	 * a backend's url and weight are: plan_summary says them */
	if (!ch->backend && (strcmp(ch->key, "scheme") == 0 || strcmp(ch->key, "key_hash") == 0 ||
			     strcmp(ch->key, "query") == 0 || strcmp(ch->key, "drop_params") == 0))
		return;
	if (used + 1 < d->len) {
		if (!ch->from)
			snprintf(d->out + used, d->len - used, "%s%s changed", d->n ? ", " : "", ch->key);
		else
			snprintf(d->out + used, d->len - used, "%s%s%s%s %s -> %s", d->n ? ", " : "",
				 ch->backend ? ch->section : "", ch->backend ? " " : "", ch->key, ch->from, ch->to);
		/* listen, workers, admin_listen, pid_file: read, not applied */
		used = strlen(d->out);
		if (ch->restart && used + 1 < d->len)
			snprintf(d->out + used, d->len - used, " (needs a restart: not applied)");
	}
	d->n++;
}

int conf_diff(const struct conf *a, const struct conf *b, char *out, size_t len)
{
	struct conf_diff_text d = { out, len, 0 };

	out[0] = '\0';
	conf_diff_each(a, b, conf_diff_add, &d);
	return d.n;
}
