/*
 * cachectl.h -- the HTTP caching rules of a shared cache (RFC 9111, with
 * RFC 5861's stale-while-revalidate and stale-if-error) over heads parsed
 * by http1.c: Cache-Control parsing, what a request may take from the
 * cache, whether and for how long a response may be stored, which
 * responses invalidate, Accept-Encoding variants, conditional requests
 * and HTTP dates (RFC 9110 5.6.7).
 *
 * Pure: no I/O, no allocation, no clock (the caller passes the time, in
 * seconds since the epoch). Any thread may call any function.
 */
#ifndef RINGPROXY_CACHECTL_H
#define RINGPROXY_CACHECTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/cachectl-t.h"

#include "http/http1.h"

/* Delta-seconds larger than this are taken as this (RFC 9111 1.2.2). */
#define CACHECTL_DELTA_MAX INT64_C(2147483648)

/* The next element of the comma-separated list [*pp, e) (RFC 9110 5.6.1),
 * without the whitespace around it; a quoted string is kept whole, a
 * backslash in it escaping the next byte when escapes; empty elements are
 * skipped. false at the end. */
bool cachectl_list_next(const char **pp, const char *e, struct http1_str *out,
			bool escapes);

/* ---- Cache-Control ---------------------------------------------------- */

#define CACHECTL_NO_STORE         0x0001u
#define CACHECTL_NO_CACHE         0x0002u   /* qualified or not */
#define CACHECTL_PRIVATE          0x0004u   /* qualified or not */
#define CACHECTL_PUBLIC           0x0008u
#define CACHECTL_MUST_REVALIDATE  0x0010u
#define CACHECTL_PROXY_REVALIDATE 0x0020u
#define CACHECTL_MAX_AGE          0x0040u   /* max_age is set */
#define CACHECTL_S_MAXAGE         0x0080u   /* s_maxage is set */
#define CACHECTL_MIN_FRESH        0x0100u
#define CACHECTL_MAX_STALE        0x0200u   /* max_stale is set (-1: any) */
#define CACHECTL_SWR              0x0400u   /* stale-while-revalidate */
#define CACHECTL_SIE              0x0800u   /* stale-if-error */
#define CACHECTL_ONLY_IF_CACHED   0x1000u
#define CACHECTL_NO_TRANSFORM     0x2000u
#define CACHECTL_MUST_UNDERSTAND  0x4000u

/* The Cache-Control directives of one message, every Cache-Control line
 * taken together. A directive given twice keeps its first value (RFC 9111
 * 4.2.1); a malformed delta-seconds reads as 0 (stale), a huge one as
 * CACHECTL_DELTA_MAX. Unknown directives are ignored. */
struct cachectl_cc {
	unsigned flags;
	int64_t max_age, s_maxage, min_fresh, max_stale, swr, sie;
};

void cachectl_parse_cc(const struct http1_msg *m, struct cachectl_cc *cc);

/* ---- Accept-Encoding variants ----------------------------------------- */

/* The content codings a variant is kept apart by; others are ignored.
 * A request's normalised Accept-Encoding is the set of these it accepts
 * (q > 0, "*" standing for the ones not named; x-gzip = gzip). */
#define CACHECTL_AE_BR      0x01u
#define CACHECTL_AE_DEFLATE 0x02u
#define CACHECTL_AE_GZIP    0x04u
#define CACHECTL_AE_ZSTD    0x08u
#define CACHECTL_AE_ALL     0x0fu

unsigned cachectl_ae(const struct http1_msg *req);

/* The canonical Accept-Encoding value of a set, e.g. "br, gzip" ("" for
 * none), NUL-terminated in buf. Sending this value to the backend instead
 * of the client's makes the stored variant right for every client with
 * the same set. Returns its length, or -1 if len is too small (32 is
 * always enough). */
int cachectl_ae_string(unsigned set, char *buf, size_t len);

/* The whole request header line of that value, with its CRLF:
 * "Accept-Encoding: br, gzip\r\n", and "Accept-Encoding: identity\r\n"
 * for the empty set (the variant stored for a request that names no
 * coding). Static storage. */
struct http1_str cachectl_ae_header(unsigned set);

/* ---- Surrogate-Control (W3C Edge Architecture 1.0) -------------------- */

/* The device name of this cache, and the request line a fill sends so
 * that an origin may target Surrogate-Control directives at it. */
#define CACHECTL_SURROGATE_DEVICE "ringproxy"
#define CACHECTL_SURROGATE_CAPABILITY \
	"Surrogate-Capability: " CACHECTL_SURROGATE_DEVICE "=\"Surrogate/1.0\"\r\n"

/* ---- requests --------------------------------------------------------- */

/* What the cache may do for request req. */
void cachectl_request(const struct http1_msg *req, struct cachectl_req *out);

/* [cache] honor_client_no_cache = off: forget the freshness the client
 * asked for in r (no-cache, max-age, min-fresh: a REFRESH becomes a
 * LOOKUP), so that r is served as a plain request would be. Pure. */
void cachectl_request_plain(struct cachectl_req *r);

/* Whether a response with status to req invalidates the stored responses
 * for the request's URL: an unsafe method (POST, PUT, DELETE, PATCH, or
 * one we do not know such as M-SEARCH) and a non-error status (2xx, 3xx),
 * RFC 9111 4.4; PURGE or BAN and any final status. */
bool cachectl_invalidates(const struct http1_msg *req, int status);
/* Whether a request's method is PURGE or BAN. */
bool cachectl_is_purge(struct http1_str method);

/* The cache key: lowercased host (the absolute-form authority, else Host)
 * followed by the request target's path and query as sent, e.g.
 * "img.example/t/1.jpg?w=200". Returns its length, or -1 if it does not
 * fit in len. */
ssize_t cachectl_key(const struct http1_msg *req, char *buf, size_t len);

/* ---- responses -------------------------------------------------------- */

#define CACHECTL_M_AUTH_OK      0x1u  /* public or s-maxage: may answer a
					 request with Authorization */
#define CACHECTL_M_REVALIDATE   0x2u  /* must-revalidate, proxy-revalidate
					 or s-maxage: never served stale */
#define CACHECTL_M_VARY_AE      0x4u  /* Vary: Accept-Encoding */
#define CACHECTL_M_NO_CACHE     0x8u  /* no-cache: revalidated before each
					 use (never a hit as it is) */

/* What the cache keeps about a response, decided once from its head. */
struct cachectl_meta {
	bool storable;
	const char *why;            /* static text when not storable */
	unsigned flags;             /* CACHECTL_M_* */
	int64_t resp_time;          /* when the head arrived (now) */
	int64_t date;               /* Date, or resp_time if none/invalid */
	int64_t initial_age;        /* corrected initial age (RFC 9111 4.2.3) */
	int64_t lifetime;           /* freshness lifetime (RFC 9111 4.2.1) */
	int64_t swr;                /* stale-while-revalidate window, 0 none */
	int64_t sie;                /* stale-if-error window, 0 none */
	struct http1_str etag;      /* slice of the response, len 0 if none */
	int64_t last_modified;      /* -1 if none or invalid */
	struct http1_str vary;      /* the variant's spec (vary.h) when Vary
				       names other fields than
				       Accept-Encoding: set by the caller
				       (vary_spec), len 0 here */
	/* no-cache="a, b": the field names not stored (a slice of the
	 * response, len 0 if none; RFC 9111 5.2.2.4) */
	struct http1_str omit;
	/* when the head arrived on the cache's own clock (cache_now:
	 * monotonic), which resident time is counted from; resp_time until
	 * the caller sets it (RFC 9111 4.2.3: only response_time and now
	 * are compared with Date; the time an object spent in this cache
	 * is not, and must not follow a wall clock that jumps) */
	int64_t resident_at;
};

/*
 * Decide whether the response resp to request rq (as cachectl_request
 * found it) may be stored, and with what lifetime. req_time is when the
 * request was sent to the backend, resp_time when the head arrived. grace
 * is the stale window ([cache] grace) used for stale-while-revalidate and
 * stale-if-error when the response names none; must-revalidate,
 * proxy-revalidate and s-maxage forbid both.
 *
 * The directives are those of the first targeted field that speaks to
 * this cache, in this order: rq->target_field, CDN-Cache-Control
 * (RFC 9213), Surrogate-Control (W3C Edge Architecture, its directives
 * targeted ";ringproxy" or at no one); Cache-Control and Expires only
 * when there is none. A field speaks to this cache when its elements for
 * it name no-store, no-cache, private, public, max-age or s-maxage; one
 * that names none of them (another device's directives, an extension
 * such as "foo", content="ESI/1.0") counts as absent, so it can never
 * make a private or no-store response storable.
 *
 * Stored only: a GET; a final status other than 206 and 304; explicit
 * freshness (s-maxage, then max-age, then Expires - Date), or for a
 * heuristically cacheable status (RFC 9110 15.1) with Last-Modified, 10%
 * of the time since then, at most rq->heuristic_max; still fresh after
 * its Age (one line of digits, else stale), or with a stale window left,
 * or no-cache with a validator (stored to be revalidated before each
 * use, CACHECTL_M_NO_CACHE), or stale on arrival with a validator (the
 * same, until a revalidation gives it a lifetime); none of no-store (unless must-understand
 * with a status this file knows), must-understand with a status it does
 * not know, private, Set-Cookie or Vary: *; with Authorization only if
 * public or s-maxage; with
 * Vary: Accept-Encoding only if its Content-Encoding is one the request
 * accepted. no-cache="a, b" stores the rest (out->omit). Returns
 * out->storable.
 */
bool cachectl_response(const struct cachectl_req *rq, enum http1_method method,
		       const struct http1_msg *resp, int64_t req_time,
		       int64_t resp_time, int64_t grace, struct cachectl_meta *out);

/* Whether a response of this status is heuristically cacheable and
 * stored without explicit freshness: one that says something of the
 * resource itself, not of the request (a 400, a 304 to its own
 * validators) nor of a passing state (a 5xx). */
bool cachectl_status_ok(int status);

/* The targeted field that sets this cache's policy for resp (see
 * cachectl_response), or NULL when Cache-Control does; target may be
 * NULL. Its name is static, or target. */
const char *cachectl_targeted(const struct http1_msg *resp, const char *target);

/* Whether header name is a targeted cache-control field this cache
 * reads (target, CDN-Cache-Control, Surrogate-Control): [cache]
 * strip_targeted keeps them from clients. */
bool cachectl_is_targeted(struct http1_str name, const char *target);
/* Flag those lines of resp HTTP1_HDR_DROP: neither stored nor relayed. */
void cachectl_strip_targeted(struct http1_msg *resp, const char *target);

/* The cache key of a Location or Content-Location value loc of a
 * response to a request for host and path (RFC 9111 4.4: invalidated
 * with the target URI after an unsafe method succeeds): an absolute URI
 * with that host, an absolute path, or a path relative to path's
 * directory, joined to the lowercased host as cachectl_key does. -1 for
 * another host, another form, or one that does not fit in len. */
ssize_t cachectl_location_key(struct http1_str host, struct http1_str path,
			      struct http1_str loc, char *buf, size_t len);

/* A client's conditional GET/HEAD against a stored response with etag
 * (len 0: none) and last_modified (-1: none): true when the answer is
 * 304. If-None-Match (weak comparison, "*" matching any) decides when
 * present; otherwise If-Modified-Since. now bounds two-digit years. */
bool cachectl_not_modified(const struct http1_msg *req, struct http1_str etag,
			   int64_t last_modified, int64_t now);

/* The lines an answer from the cache puts after its stored head: "Age:
 * age", "Cache-Status: ringproxy; how; ttl=ttl" (RFC 9111 5.1, RFC 9211),
 * "hdr: be" with "; cached" when cached (none when hdr or be is empty),
 * "Via: 1.1 ringproxy", then conn (a Connection line, or "") and the blank
 * line, into buf. No printf: a hit runs it. Their length, or -1 when they
 * do not fit in cap. */
int cachectl_hit_lines(char *buf, size_t cap, int64_t age, int64_t ttl, const char *how,
		       const char *hdr, struct http1_str be, bool cached, const char *conn);

/* ---- dates ------------------------------------------------------------ */

/* Parse an HTTP-date: IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT") or
 * the obsolete RFC 850 ("Sunday, 06-Nov-94 08:49:37 GMT") and asctime
 * ("Sun Nov  6 08:49:37 1994") forms. A two-digit year that would be more
 * than 50 years after now is taken in the past century (RFC 9110 5.6.7).
 * Returns 0 and *t (seconds since the epoch), or -1. */
int cachectl_date(struct http1_str s, int64_t now, int64_t *t);

/* IMF-fixdate of t into buf (at least 30 bytes), NUL-terminated. */
void cachectl_date_format(int64_t t, char *buf);

/* The If-None-Match / If-Modified-Since lines (each ending CRLF) that
 * revalidate a stored response with entity tag etag (len 0: none) and
 * Last-Modified lm (-1: none), into buf: their length, 0 when there is no
 * validator or they do not fit (the request path and refresh.c send them).
 * Pure. */
size_t cachectl_cond_lines(struct http1_str etag, int64_t lm, char *buf, size_t cap);

#endif
