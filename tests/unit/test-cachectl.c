/*
 * test-cachectl.c -- RFC 9111's rules in cachectl.c, each pinned by a table
 * row with its exact outcome: storability and lifetime of responses, what
 * requests may take from the cache, Accept-Encoding sets, invalidation,
 * keys, conditional requests and the three HTTP date formats.
 *
 * Times: "now" is 1700000000 = Tue, 14 Nov 2023 22:13:20 GMT (D0 below);
 * expected epoch values were computed with Python's email.utils and time.
 */
#include "http/cachectl.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>

#define NOW INT64_C(1700000000)
#define D0      "Tue, 14 Nov 2023 22:13:20 GMT"
#define D_M100  "Tue, 14 Nov 2023 22:11:40 GMT"      /* NOW - 100 */
#define D_P3600 "Tue, 14 Nov 2023 23:13:20 GMT"      /* NOW + 3600 */
#define D_M3600 "Tue, 14 Nov 2023 21:13:20 GMT"      /* NOW - 3600 */

static const struct http1_limits lim = { 16384, 64 };
static struct http1_header hq[64], hr[64];

static int parse_req(struct http1_msg *m, const char *s)
{
	http1_msg_init(m);
	return http1_parse_request(m, hq, s, strlen(s), &lim) > 0 ? 0 : -1;
}

static int parse_resp(struct http1_msg *m, const char *s, enum http1_method meth)
{
	http1_msg_init(m);
	return http1_parse_response(m, hr, s, strlen(s), &lim, meth) > 0 ? 0 : -1;
}

/* ---- responses ------------------------------------------------------- */

#define GET "GET /x HTTP/1.1\r\nHost: a\r\n\r\n"
#define GET_AE(v) "GET /x HTTP/1.1\r\nHost: a\r\nAccept-Encoding: " v "\r\n\r\n"
#define GET_AUTH "GET /x HTTP/1.1\r\nHost: a\r\nAuthorization: Basic eDp5\r\n\r\n"
#define R(status, hdrs) "HTTP/1.1 " status "\r\n" hdrs "Content-Length: 0\r\n\r\n"
#define CC(v) "Cache-Control: " v "\r\n"
#define DATE "Date: " D0 "\r\n"

#define AUTH CACHECTL_M_AUTH_OK
#define REVAL CACHECTL_M_REVALIDATE
#define VARY CACHECTL_M_VARY_AE
#define NOCACHE CACHECTL_M_NO_CACHE

struct resp_case {
	const char *name;
	const char *req;
	const char *resp;
	const char *why;        /* NULL: storable */
	int64_t lifetime, age, swr, sie;
	unsigned flags;
	int64_t grace;
	int64_t delay;          /* request sent this long before NOW */
};

/* storable: name, request, response, lifetime, age, swr, sie, flags */
#define OK(n, rq, rs, lt, ag, swr, sie, fl) { n, rq, rs, NULL, lt, ag, swr, sie, fl, 0, 0 }
#define NO(n, rq, rs, why) { n, rq, rs, why, 0, 0, 0, 0, 0, 0, 0 }

static const struct resp_case resp_cases[] = {
	OK("max-age", GET, R("200 OK", DATE CC("max-age=60")), 60, 0, 0, 0, 0),
	OK("s-maxage wins over max-age", GET, R("200 OK", DATE CC("max-age=60, s-maxage=120")), 120, 0, 0, 0, AUTH | REVAL),
	OK("Expires minus Date", GET, R("200 OK", DATE "Expires: " D_P3600 "\r\n"), 3600, 0, 0, 0, 0),
	OK("Expires without Date: minus now", GET, R("200 OK", "Expires: " D_P3600 "\r\n"), 3600, 0, 0, 0, 0),
	OK("Expires, Date 100 s old", GET, R("200 OK", "Date: " D_M100 "\r\nExpires: " D_P3600 "\r\n"), 3700, 100, 0, 0, 0),
	NO("invalid Expires is expired", GET, R("200 OK", DATE "Expires: 0\r\n"), "stale on arrival"),
	NO("Expires in the past", GET, R("200 OK", DATE "Expires: " D_M3600 "\r\n"), "stale on arrival"),
	/* a second of freshness can end between the Date and the arrival */
	OK("stale on arrival with an ETag: kept to be revalidated", GET,
	   R("200 OK", "Date: " D_M100 "\r\nExpires: " D_M100 "\r\nETag: \"abc\"\r\n"), 0, 100, 0, 0, NOCACHE),
	OK("stale on arrival with Last-Modified: kept to be revalidated", GET,
	   R("200 OK", DATE CC("max-age=60") "Age: 60\r\nLast-Modified: " D_M3600 "\r\n"), 60, 60, 0, 0, NOCACHE),
	OK("max-age wins over Expires", GET, R("200 OK", DATE CC("max-age=10") "Expires: " D_P3600 "\r\n"), 10, 0, 0, 0, 0),
	OK("Age reduces what is left", GET, R("200 OK", DATE CC("max-age=60") "Age: 50\r\n"), 60, 50, 0, 0, 0),
	NO("Age reaching the lifetime", GET, R("200 OK", DATE CC("max-age=60") "Age: 60\r\n"), "stale on arrival"),
	OK("apparent age from an old Date", GET, R("200 OK", "Date: " D_M100 "\r\n" CC("max-age=300")), 300, 100, 0, 0, 0),
	OK("invalid Age is ignored (RFC 9111 5.1)", GET, R("200 OK", DATE CC("max-age=60") "Age: ten\r\n"), 60, 0, 0, 0, 0),
	OK("invalid Date: now", GET, R("200 OK", "Date: yesterday\r\n" CC("max-age=60")), 60, 0, 0, 0, 0),
	NO("no freshness information", GET, R("200 OK", DATE), "no explicit freshness"),
	NO("Last-Modified is no freshness (no heuristics)", GET, R("200 OK", DATE "Last-Modified: " D_M3600 "\r\n"), "no explicit freshness"),
	OK("203", GET, R("203 Non-Authoritative Information", CC("max-age=5")), 5, 0, 0, 0, 0),
	OK("204", GET, "HTTP/1.1 204 No Content\r\nCache-Control: max-age=5\r\n\r\n", 5, 0, 0, 0, 0),
	OK("300", GET, R("300 Multiple Choices", CC("max-age=5")), 5, 0, 0, 0, 0),
	OK("301", GET, R("301 Moved Permanently", CC("max-age=5") "Location: /y\r\n"), 5, 0, 0, 0, 0),
	OK("308", GET, R("308 Permanent Redirect", CC("max-age=5") "Location: /y\r\n"), 5, 0, 0, 0, 0),
	OK("404", GET, R("404 Not Found", CC("max-age=5")), 5, 0, 0, 0, 0),
	OK("410", GET, R("410 Gone", CC("max-age=5")), 5, 0, 0, 0, 0),
	OK("201 with explicit freshness", GET, R("201 Created", CC("max-age=5")), 5, 0, 0, 0, 0),
	NO("206", GET, R("206 Partial Content", CC("max-age=5")), "status not cacheable"),
	OK("302 with explicit freshness", GET, R("302 Found", CC("max-age=5")), 5, 0, 0, 0, 0),
	OK("307 with explicit freshness", GET, R("307 Temporary Redirect", CC("max-age=5")), 5, 0, 0, 0, 0),
	OK("500 with explicit freshness", GET, R("500 Internal Server Error", CC("max-age=5")), 5, 0, 0, 0, 0),
	OK("503 with explicit freshness", GET, R("503 Service Unavailable", CC("max-age=5")), 5, 0, 0, 0, 0),
	NO("no-store", GET, R("200 OK", CC("max-age=60, no-store")), "no-store"),
	NO("no-cache without a validator", GET, R("200 OK", CC("no-cache, max-age=60")), "no-cache without a validator"),
	OK("no-cache with an ETag: stored, revalidated", GET, R("200 OK", CC("no-cache, max-age=60") "ETag: \"a\"\r\n"), 60, 0, 0, 0, NOCACHE | REVAL),
	OK("no-cache, Last-Modified, no freshness", GET, R("200 OK", DATE CC("no-cache") "Last-Modified: " D_M3600 "\r\n"), 0, 0, 0, 0, NOCACHE | REVAL),
	OK("no-cache qualified: the rest is stored", GET, R("200 OK", CC("no-cache=\"Set-Cookie\", max-age=60")), 60, 0, 0, 0, 0),
	NO("206", GET, R("206 Partial Content", CC("max-age=5") "Content-Range: bytes 0-0/5\r\n"), "status not cacheable"),
	NO("304", GET, R("304 Not Modified", CC("max-age=5")), "status not cacheable"),
	OK("599 with explicit freshness", GET, R("599 Whatever", CC("max-age=5")), 5, 0, 0, 0, 0),
	NO("599 must-understand", GET, R("599 Whatever", CC("max-age=5, must-understand")), "must-understand with a status not known"),
	OK("must-understand overrides no-store", GET, R("200 OK", CC("max-age=5, must-understand, no-store")), 5, 0, 0, 0, 0),
	/* RFC 9111 5.1: a list counts by its first member; an invalid
	 * one is ignored, as if there were no Age */
	OK("Age 0, 0: the first member", GET, R("200 OK", DATE CC("max-age=60") "Age: 0, 0\r\n"), 60, 0, 0, 0, 0),
	OK("Age 0,7200: the first member", GET, R("200 OK", DATE CC("max-age=3600") "Age: 0,7200\r\n"), 3600, 0, 0, 0, 0),
	OK("Age on two lines: the first", GET, R("200 OK", DATE CC("max-age=60") "Age: 30\r\nAge: 7200\r\n"), 60, 30, 0, 0, 0),
	NO("Age 7200,0: the first member, stale", GET, R("200 OK", DATE CC("max-age=3600") "Age: 7200,0\r\n"), "stale on arrival"),
	NO("Age 7200, then junk: the first member, stale", GET, R("200 OK", DATE CC("max-age=3600") "Age: 7200, abc\r\n"), "stale on arrival"),
	OK("Age junk, then 7200: ignored", GET, R("200 OK", DATE CC("max-age=3600") "Age: abc, 7200\r\n"), 3600, 0, 0, 0, 0),
	OK("negative Age: ignored", GET, R("200 OK", DATE CC("max-age=3600") "Age: -7200\r\n"), 3600, 0, 0, 0, 0),
	OK("Age with a parameter: ignored", GET, R("200 OK", DATE CC("max-age=3600") "Age: 7200;foo=111\r\n"), 3600, 0, 0, 0, 0),
	OK("Age as a fraction: ignored", GET, R("200 OK", DATE CC("max-age=3600") "Age: 7.0\r\n"), 3600, 0, 0, 0, 0),
	OK("Age +7200: ignored", GET, R("200 OK", DATE CC("max-age=3600") "Age: +7200\r\n"), 3600, 0, 0, 0, 0),
	NO("private", GET, R("200 OK", CC("private, max-age=60")), "private"),
	NO("private qualified", GET, R("200 OK", CC("max-age=60, private=\"X-A, X-B\"")), "private"),
	NO("Set-Cookie", GET, R("200 OK", CC("max-age=60") "Set-Cookie: a=b\r\n"), "Set-Cookie"),
	NO("Vary: *", GET, R("200 OK", CC("max-age=60") "Vary: *\r\n"), "Vary: *"),
	NO("Vary: *, among others", GET, R("200 OK", CC("max-age=60") "Vary: Accept\r\nVary: , *\r\n"), "Vary: *"),
	/* other fields are keyed by the caller (vary.c, test-vary) */
	OK("Vary: Cookie", GET, R("200 OK", CC("max-age=60") "Vary: Cookie\r\n"), 60, 0, 0, 0, 0),
	OK("Vary: Accept-Encoding, User-Agent", GET, R("200 OK", CC("max-age=60") "Vary: Accept-Encoding, User-Agent\r\n"), 60, 0, 0, 0, VARY),
	OK("Vary on two lines", GET, R("200 OK", CC("max-age=60") "Vary: accept-encoding\r\nVary: Origin\r\n"), 60, 0, 0, 0, VARY),
	OK("Vary: Accept-Encoding", GET, R("200 OK", CC("max-age=60") "Vary: Accept-Encoding\r\n"), 60, 0, 0, 0, VARY),
	OK("Vary: accept-encoding, gzip accepted", GET_AE("gzip"), R("200 OK", CC("max-age=60") "Vary: accept-encoding\r\nContent-Encoding: gzip\r\n"), 60, 0, 0, 0, VARY),
	NO("Vary, gzip not accepted", GET_AE("br"), R("200 OK", CC("max-age=60") "Vary: Accept-Encoding\r\nContent-Encoding: gzip\r\n"), "Content-Encoding the request did not accept"),
	NO("Vary, unknown coding", GET_AE("gzip"), R("200 OK", CC("max-age=60") "Vary: Accept-Encoding\r\nContent-Encoding: foo\r\n"), "Content-Encoding the request did not accept"),
	OK("Vary, identity coding", GET, R("200 OK", CC("max-age=60") "Vary: Accept-Encoding\r\nContent-Encoding: identity\r\n"), 60, 0, 0, 0, VARY),
	OK("empty Vary", GET, R("200 OK", CC("max-age=60") "Vary: \r\n"), 60, 0, 0, 0, 0),
	NO("Authorization, max-age only", GET_AUTH, R("200 OK", CC("max-age=60")), "Authorization without public or s-maxage"),
	OK("Authorization, public", GET_AUTH, R("200 OK", CC("public, max-age=60")), 60, 0, 0, 0, AUTH),
	OK("Authorization, s-maxage", GET_AUTH, R("200 OK", CC("s-maxage=60")), 60, 0, 0, 0, AUTH | REVAL),
	NO("request no-store", "GET /x HTTP/1.1\r\nHost: a\r\nCache-Control: no-store\r\n\r\n", R("200 OK", CC("max-age=60")), "request no-store"),
	OK("request no-cache: the response may be stored", "GET /x HTTP/1.1\r\nHost: a\r\nCache-Control: no-cache\r\n\r\n", R("200 OK", CC("max-age=60")), 60, 0, 0, 0, 0),
	NO("Range request", "GET /x HTTP/1.1\r\nHost: a\r\nRange: bytes=0-1\r\n\r\n", R("200 OK", CC("max-age=60")), "request no-store"),
	NO("multi-range request", "GET /x HTTP/1.1\r\nHost: a\r\nRange: bytes=0-1,3-4\r\n\r\n", R("200 OK", CC("max-age=60")), "request not cacheable"),
	OK("stale-while-revalidate, stale-if-error", GET, R("200 OK", CC("max-age=60, stale-while-revalidate=30, stale-if-error=600")), 60, 0, 30, 600, 0),
	OK("max-age=0 with a stale window", GET, R("200 OK", CC("max-age=0, stale-while-revalidate=30")), 0, 0, 30, 0, 0),
	NO("max-age=0", GET, R("200 OK", CC("max-age=0")), "stale on arrival"),
	{ "grace when none named", GET, R("200 OK", CC("max-age=60")), NULL, 60, 0, 10, 10, 0, 10, 0 },
	{ "named windows win over grace", GET, R("200 OK", CC("max-age=60, stale-while-revalidate=30")), NULL, 60, 0, 30, 10, 0, 10, 0 },
	{ "must-revalidate: no stale windows", GET, R("200 OK", CC("max-age=60, must-revalidate, stale-if-error=60")), NULL, 60, 0, 0, 0, REVAL, 10, 0 },
	{ "proxy-revalidate: no stale windows", GET, R("200 OK", CC("max-age=60, proxy-revalidate")), NULL, 60, 0, 0, 0, REVAL, 10, 0 },
	{ "response delay added to Age", GET, R("200 OK", DATE CC("max-age=60") "Age: 10\r\n"), NULL, 60, 15, 0, 0, 0, 0, 5 },
	OK("first of two max-age", GET, R("200 OK", CC("max-age=60, max-age=10")), 60, 0, 0, 0, 0),
	OK("quoted max-age", GET, R("200 OK", CC("max-age=\"30\"")), 30, 0, 0, 0, 0),
	NO("malformed max-age reads 0", GET, R("200 OK", CC("max-age=abc")), "stale on arrival"),
	NO("negative max-age reads 0", GET, R("200 OK", CC("max-age=-5")), "stale on arrival"),
	OK("huge max-age clamped", GET, R("200 OK", CC("max-age=99999999999999")), CACHECTL_DELTA_MAX, 0, 0, 0, 0),
	OK("two Cache-Control lines", GET, R("200 OK", CC("public") CC("max-age=5")), 5, 0, 0, 0, AUTH),
	OK("directive names any case", GET, R("200 OK", "CACHE-CONTROL: MAX-AGE=7\r\n"), 7, 0, 0, 0, 0),
	OK("a comma inside a quoted extension", GET, R("200 OK", CC("x-ext=\"a, max-age=1\", max-age=5")), 5, 0, 0, 0, 0),
	OK("empty list elements", GET, R("200 OK", CC(", ,max-age=5,,")), 5, 0, 0, 0, 0),
	OK("Pragma: no-cache is not read", GET, R("200 OK", CC("max-age=5") "Pragma: no-cache\r\n"), 5, 0, 0, 0, 0),
};

static void test_responses(void)
{
	size_t i;

	for (i = 0; i < sizeof(resp_cases) / sizeof(resp_cases[0]); i++) {
		const struct resp_case *c = &resp_cases[i];
		struct http1_msg rq, rs;
		struct cachectl_req cr;
		struct cachectl_meta m;
		bool st;

		if (parse_req(&rq, c->req) < 0 || parse_resp(&rs, c->resp, rq.method_id) < 0) {
			tap_ok(0, "%s: test heads parse", c->name);
			continue;
		}
		cachectl_request(&rq, &cr);
		st = cachectl_response(&cr, rq.method_id, &rs, NOW - c->delay, NOW,
				       c->grace, &m);
		if (c->why != NULL) {
			tap_ok(!st && m.why != NULL && strcmp(m.why, c->why) == 0,
			       "%s: not stored (%s)", c->name, c->why);
			if (st || m.why == NULL || strcmp(m.why, c->why) != 0)
				tap_diag("  got storable=%d why=%s", st, m.why ? m.why : "(null)");
			continue;
		}
		tap_ok(st && m.lifetime == c->lifetime && m.initial_age == c->age
		       && m.swr == c->swr && m.sie == c->sie && m.flags == c->flags,
		       "%s: stored, lifetime %lld, age %lld, swr %lld, sie %lld, flags %#x",
		       c->name, (long long)c->lifetime, (long long)c->age,
		       (long long)c->swr, (long long)c->sie, c->flags);
		if (!st || m.lifetime != c->lifetime || m.initial_age != c->age
		    || m.swr != c->swr || m.sie != c->sie || m.flags != c->flags)
			tap_diag("  got storable=%d (%s) lifetime %lld age %lld swr %lld sie %lld flags %#x",
				 st, m.why ? m.why : "", (long long)m.lifetime,
				 (long long)m.initial_age, (long long)m.swr,
				 (long long)m.sie, m.flags);
	}
}

/* The cache's own policy (struct cachectl_req's target_field and
 * heuristic_max): heuristic freshness and the targeted fields. */
struct policy_case {
	const char *name;
	const char *resp;
	const char *target;
	int64_t heuristic_max;
	const char *why;        /* NULL: storable */
	int64_t lifetime;
	unsigned flags;
};

#define LM_DAY "Last-Modified: Mon, 13 Nov 2023 22:13:20 GMT\r\n"   /* NOW - 86400 */
#define LM_YEAR "Last-Modified: Mon, 14 Nov 2022 22:13:20 GMT\r\n"  /* NOW - 365 d */
#define TGT "Ringproxy-Cache-Control"

static const struct policy_case policy_cases[] = {
	{ "heuristic: 10% of a day", R("200 OK", DATE LM_DAY), TGT, 86400, NULL, 8640, 0 },
	{ "heuristic capped by heuristic_max", R("200 OK", DATE LM_YEAR), TGT, 86400, NULL, 86400, 0 },
	{ "heuristic off (0)", R("200 OK", DATE LM_DAY), TGT, 0, "no explicit freshness", 0, 0 },
	{ "heuristic: 404", R("404 Not Found", DATE LM_DAY), TGT, 86400, NULL, 8640, 0 },
	{ "heuristic: 501", R("501 Not Implemented", DATE LM_DAY), TGT, 86400, NULL, 8640, 0 },
	{ "no heuristic for 302", R("302 Found", DATE LM_DAY), TGT, 86400, "no explicit freshness", 0, 0 },
	{ "no heuristic for 503", R("503 Service Unavailable", DATE LM_DAY), TGT, 86400, "no explicit freshness", 0, 0 },
	{ "heuristic for 599 with public", R("599 Whatever", DATE CC("public") LM_DAY), TGT, 86400, NULL, 8640, AUTH },
	{ "no heuristic without Last-Modified", R("200 OK", DATE), TGT, 86400, "no explicit freshness", 0, 0 },
	{ "explicit freshness wins over heuristic", R("200 OK", DATE CC("max-age=7") LM_DAY), TGT, 86400, NULL, 7, 0 },
	{ "CDN-Cache-Control max-age over Cache-Control", R("200 OK", DATE CC("max-age=5") "CDN-Cache-Control: max-age=600\r\n"), TGT, 0, NULL, 600, 0 },
	{ "CDN-Cache-Control no-store", R("200 OK", DATE CC("max-age=600") "CDN-Cache-Control: no-store\r\n"), TGT, 0, "no-store", 0, 0 },
	{ "CDN-Cache-Control over Cache-Control no-store", R("200 OK", DATE CC("no-store") "CDN-Cache-Control: max-age=60\r\n"), TGT, 0, NULL, 60, 0 },
	{ "CDN-Cache-Control private", R("200 OK", DATE CC("max-age=60") "CDN-Cache-Control: private\r\n"), TGT, 0, "private", 0, 0 },
	{ "CDN-Cache-Control ignores Expires", R("200 OK", DATE "Expires: " D_P3600 "\r\nCDN-Cache-Control: public\r\n"), TGT, 0, "no explicit freshness", 0, 0 },
	{ "CDN-Cache-Control no-cache: revalidated", R("200 OK", DATE CC("max-age=60") "ETag: \"x\"\r\nCDN-Cache-Control: no-cache\r\n"), TGT, 0, NULL, 0, NOCACHE | REVAL },
	{ "target field over CDN-Cache-Control", R("200 OK", DATE "CDN-Cache-Control: no-store\r\n" TGT ": max-age=30\r\n"), TGT, 0, NULL, 30, 0 },
	{ "target field no-store", R("200 OK", DATE CC("max-age=30") TGT ": no-store\r\n"), TGT, 0, "no-store", 0, 0 },
	{ "another target field name", R("200 OK", DATE CC("max-age=30") TGT ": no-store\r\n"), "Edge-Cache-Control", 0, NULL, 30, 0 },
	{ "empty target field: CDN-Cache-Control", R("200 OK", DATE TGT ": \r\nCDN-Cache-Control: max-age=9\r\n"), TGT, 0, NULL, 9, 0 },
	{ "Surrogate-Control max-age", R("200 OK", DATE "Surrogate-Control: max-age=3600\r\n"), TGT, 0, NULL, 3600, 0 },
	{ "Surrogate-Control no-store over Cache-Control", R("200 OK", DATE CC("max-age=10000") "Surrogate-Control: no-store\r\n"), TGT, 0, "no-store", 0, 0 },
	{ "Surrogate-Control for ringproxy", R("200 OK", DATE CC("no-store") "Surrogate-Control: max-age=100;ringproxy\r\n"), TGT, 0, NULL, 100, 0 },
	{ "Surrogate-Control for another device", R("200 OK", DATE "Surrogate-Control: max-age=100;other\r\n"), TGT, 0, "no explicit freshness", 0, 0 },
	{ "CDN-Cache-Control over Surrogate-Control", R("200 OK", DATE "Surrogate-Control: max-age=100\r\nCDN-Cache-Control: max-age=7\r\n"), TGT, 0, NULL, 7, 0 },
	/* a targeted field that says nothing to this cache about storage or
	 * freshness is absent: it never voids Cache-Control's private and
	 * no-store (under heuristic freshness, Last-Modified would store it) */
	{ "Surrogate-Control for another device: Cache-Control's no-store", R("200 OK", DATE CC("private, no-store") LM_DAY "Surrogate-Control: max-age=600;othercdn\r\n"), TGT, 86400, "no-store", 0, 0 },
	{ "Surrogate-Control content=ESI/1.0: Cache-Control's no-store", R("200 OK", DATE CC("private, no-store") LM_DAY "Surrogate-Control: content=\"ESI/1.0\"\r\n"), TGT, 86400, "no-store", 0, 0 },
	{ "Surrogate-Control \"; ringproxy\" (a space): another device's", R("200 OK", DATE CC("private, no-store") LM_DAY "Surrogate-Control: max-age=600; ringproxy\r\n"), TGT, 86400, "no-store", 0, 0 },
	{ "Surrogate-Control for another device: Cache-Control's private", R("200 OK", DATE CC("private") LM_DAY "Surrogate-Control: max-age=600;othercdn\r\n"), TGT, 86400, "private", 0, 0 },
	{ "CDN-Cache-Control: foo: Cache-Control's private", R("200 OK", DATE CC("private") LM_DAY "CDN-Cache-Control: foo\r\n"), TGT, 86400, "private", 0, 0 },
	{ "CDN-Cache-Control: foo: Cache-Control's no-store", R("200 OK", DATE CC("no-store") LM_DAY "CDN-Cache-Control: foo\r\n"), TGT, 86400, "no-store", 0, 0 },
	{ "CDN-Cache-Control: foo: Cache-Control's max-age", R("200 OK", DATE CC("max-age=60") "CDN-Cache-Control: foo\r\n"), TGT, 0, NULL, 60, 0 },
	{ "CDN-Cache-Control: foo: Expires still read", R("200 OK", DATE "Expires: " D_P3600 "\r\nCDN-Cache-Control: foo\r\n"), TGT, 0, NULL, 3600, 0 },
	{ "CDN-Cache-Control swr alone: Cache-Control's private", R("200 OK", DATE CC("private") LM_DAY "CDN-Cache-Control: stale-while-revalidate=60\r\n"), TGT, 86400, "private", 0, 0 },
	{ "target field foo: Surrogate-Control for us rules", R("200 OK", DATE CC("no-store") TGT ": foo\r\nSurrogate-Control: max-age=100;ringproxy\r\n"), TGT, 0, NULL, 100, 0 },
	{ "CDN-Cache-Control public: over Cache-Control's private", R("200 OK", DATE CC("private") "CDN-Cache-Control: public, max-age=30\r\n"), TGT, 0, NULL, 30, AUTH },
	/* RFC 9213 2.1: a targeted field is a Dictionary (RFC 8941); one
	 * that does not parse, or a known directive of the wrong type, is
	 * ignored whole and Cache-Control rules */
#define CDN(v) CC("max-age=5") "CDN-Cache-Control: " v "\r\n"
	{ "CDN-Cache-Control a Dictionary with parameters and an inner list", R("200 OK", DATE CDN("max-age=600;x=\"y\", x-ext=(a 1 ?0), public")), TGT, 0, NULL, 600, AUTH },
	{ "CDN-Cache-Control: a key's last value counts", R("200 OK", DATE CDN("max-age=10, max-age=600")), TGT, 0, NULL, 600, 0 },
	{ "CDN-Cache-Control private=\"f\": a String is private's type", R("200 OK", DATE CDN("private=\"set-cookie\"")), TGT, 0, "private", 0, 0 },
	{ "CDN-Cache-Control no-store=?0: false", R("200 OK", DATE CDN("no-store=?0, max-age=60")), TGT, 0, NULL, 60, 0 },
	{ "CDN-Cache-Control not a Dictionary: Cache-Control", R("200 OK", DATE CDN("max-age=600, foo=bar baz")), TGT, 0, NULL, 5, 0 },
	{ "CDN-Cache-Control an unknown type: Cache-Control", R("200 OK", DATE CDN("max-age=600, foo={x}")), TGT, 0, NULL, 5, 0 },
	{ "CDN-Cache-Control uppercase key: Cache-Control", R("200 OK", DATE CDN("Max-Age=600")), TGT, 0, NULL, 5, 0 },
	{ "CDN-Cache-Control trailing comma: Cache-Control", R("200 OK", DATE CDN("max-age=600,")), TGT, 0, NULL, 5, 0 },
	{ "CDN-Cache-Control unterminated string: Cache-Control", R("200 OK", DATE CDN("max-age=600, x=\"y")), TGT, 0, NULL, 5, 0 },
	{ "CDN-Cache-Control max-age a Decimal: Cache-Control", R("200 OK", DATE CDN("max-age=600.5")), TGT, 0, NULL, 5, 0 },
	{ "CDN-Cache-Control max-age a String: Cache-Control", R("200 OK", DATE CDN("max-age=\"600\"")), TGT, 0, NULL, 5, 0 },
	{ "CDN-Cache-Control max-age negative: Cache-Control", R("200 OK", DATE CDN("max-age=-600")), TGT, 0, NULL, 5, 0 },
	{ "CDN-Cache-Control no-store=1, an Integer: Cache-Control", R("200 OK", DATE CDN("no-store=1")), TGT, 0, NULL, 5, 0 },
	{ "CDN-Cache-Control a bad second line: Cache-Control", R("200 OK", DATE CDN("max-age=600") "CDN-Cache-Control: no-store=x\r\n"), TGT, 0, NULL, 5, 0 },
	{ "CDN-Cache-Control not a Dictionary, with private in Cache-Control", R("200 OK", DATE CC("private") "CDN-Cache-Control: max-age=600, s-maxage\r\n"), TGT, 0, "private", 0, 0 },
	{ "target field not a Dictionary: CDN-Cache-Control", R("200 OK", DATE TGT ": max-age=1.5\r\nCDN-Cache-Control: max-age=9\r\n"), TGT, 0, NULL, 9, 0 },
	{ "Surrogate-Control keeps its own grammar", R("200 OK", DATE CC("max-age=5") "Surrogate-Control: max-age=\"100\";ringproxy\r\n"), TGT, 0, NULL, 100, 0 },
#undef CDN
};

static void test_policy(void)
{
	size_t i;

	for (i = 0; i < sizeof(policy_cases) / sizeof(policy_cases[0]); i++) {
		const struct policy_case *c = &policy_cases[i];
		struct http1_msg rq, rs;
		struct cachectl_req cr;
		struct cachectl_meta m;
		bool st, ok;

		if (parse_req(&rq, GET) < 0 || parse_resp(&rs, c->resp, rq.method_id) < 0) {
			tap_ok(0, "%s: test heads parse", c->name);
			continue;
		}
		cachectl_request(&rq, &cr);
		cr.target_field = c->target;
		cr.heuristic_max = c->heuristic_max;
		st = cachectl_response(&cr, rq.method_id, &rs, NOW, NOW, 0, &m);
		if (c->why != NULL)
			ok = !st && m.why != NULL && strcmp(m.why, c->why) == 0;
		else
			ok = st && m.lifetime == c->lifetime && m.flags == c->flags;
		tap_ok(ok, "%s: %s %lld flags %#x", c->name, c->why ? c->why : "stored",
		       (long long)c->lifetime, c->flags);
		if (!ok)
			tap_diag("  got storable=%d (%s) lifetime %lld flags %#x", st,
				 m.why ? m.why : "", (long long)m.lifetime, m.flags);
	}
}

/* no-cache="a, b": the names the stored head leaves out. */
static void test_no_cache_fields(void)
{
	struct http1_msg rq, rs;
	struct cachectl_req cr;
	struct cachectl_meta m;

	parse_req(&rq, GET);
	cachectl_request(&rq, &cr);
	parse_resp(&rs, R("200 OK", CC("no-cache=\"a, b\"") "a: 1\r\nb: 2\r\n" CC("max-age=3600")), rq.method_id);
	tap_ok(cachectl_response(&cr, rq.method_id, &rs, NOW, NOW, 0, &m)
	       && m.omit.len == 4 && memcmp(m.omit.p, "a, b", 4) == 0 && m.lifetime == 3600,
	       "no-cache=\"a, b\": stored for 3600 s without a and b");
	parse_resp(&rs, R("200 OK", CC("max-age=3600")), rq.method_id);
	tap_ok(cachectl_response(&cr, rq.method_id, &rs, NOW, NOW, 0, &m) && m.omit.len == 0,
	       "no qualified no-cache: nothing left out");
}

/* Which header lines strip_targeted keeps from clients. */
static void test_targeted_names(void)
{
	static const struct {
		const char *name, *target;
		bool targeted;
	} c[] = {
		{ "CDN-Cache-Control", TGT, true },
		{ "cdn-cache-control", NULL, true },
		{ "Surrogate-Control", TGT, true },
		{ "ringproxy-cache-control", TGT, true },
		{ "Ringproxy-Cache-Control", NULL, false },
		{ "Cache-Control", TGT, false },
	};
	size_t i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct http1_str n = { c[i].name, strlen(c[i].name) };

		tap_ok(cachectl_is_targeted(n, c[i].target) == c[i].targeted,
		       "%s with target %s: %s", c[i].name, c[i].target ? c[i].target : "none",
		       c[i].targeted ? "targeted" : "not targeted");
	}
}

/* Location and Content-Location targets invalidated after an unsafe
 * method (RFC 9111 4.4): the same host only. */
static void test_location_key(void)
{
	static const struct {
		const char *loc, *key;  /* key NULL: -1 */
	} c[] = {
		{ "/test/abc/location_target", "img.example/test/abc/location_target" },
		{ "http://IMG.example/t/y?q=1", "img.example/t/y?q=1" },
		{ "https://img.example", "img.example/" },
		{ "http://other.example/t/y", NULL },
		{ "http://img.example.evil/t/y", NULL },
		{ "z/w", "img.example/t/z/w" },
		{ "/t/y#frag", "img.example/t/y" },
		{ "//img.example/t/y", NULL },
		{ "mailto:a@b", NULL },
		{ "", NULL },
	};
	struct http1_str host = { "Img.Example", 11 }, path = { "/t/x", 4 };
	char buf[256];
	size_t i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct http1_str l = { c[i].loc, strlen(c[i].loc) };
		ssize_t n = cachectl_location_key(host, path, l, buf, sizeof(buf));

		if (c[i].key == NULL)
			tap_ok(n == -1, "Location %s: not invalidated", c[i].loc);
		else
			tap_ok(n == (ssize_t)strlen(c[i].key) && memcmp(buf, c[i].key, (size_t)n) == 0,
			       "Location %s: key %s", c[i].loc, c[i].key);
	}
	tap_ok(cachectl_location_key(host, path, (struct http1_str){ "/t/y", 4 }, buf, 10) == -1,
	       "Location key that does not fit: -1");
}

/* Methods other than GET: never stored, whatever the response says. */
static void test_response_methods(void)
{
	struct http1_msg rq, rs;
	struct cachectl_req cr;
	struct cachectl_meta m;

	parse_req(&rq, "HEAD /x HTTP/1.1\r\nHost: a\r\n\r\n");
	parse_resp(&rs, R("200 OK", CC("max-age=60")), HTTP1_M_HEAD);
	cachectl_request(&rq, &cr);
	tap_ok(!cachectl_response(&cr, HTTP1_M_HEAD, &rs, NOW, NOW, 0, &m)
	       && strcmp(m.why, "not a GET") == 0, "a HEAD response is not stored");
	parse_req(&rq, "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n");
	parse_resp(&rs, R("200 OK", CC("max-age=60")), HTTP1_M_POST);
	cachectl_request(&rq, &cr);
	tap_ok(!cachectl_response(&cr, HTTP1_M_POST, &rs, NOW, NOW, 0, &m),
	       "a POST response is not stored");
}

static void test_validators(void)
{
	struct http1_msg rq, rs;
	struct cachectl_req cr;
	struct cachectl_meta m;

	parse_req(&rq, GET);
	parse_resp(&rs, R("200 OK", CC("max-age=60") "ETag: W/\"v1\"\r\nLast-Modified: " D_M3600 "\r\n"),
		   HTTP1_M_GET);
	cachectl_request(&rq, &cr);
	cachectl_response(&cr, HTTP1_M_GET, &rs, NOW, NOW, 0, &m);
	tap_ok(m.etag.len == 6 && memcmp(m.etag.p, "W/\"v1\"", 6) == 0, "ETag extracted");
	tap_is_int(m.last_modified, NOW - 3600, "Last-Modified parsed");
	parse_resp(&rs, R("200 OK", CC("max-age=60") "Last-Modified: never\r\n"), HTTP1_M_GET);
	cachectl_response(&cr, HTTP1_M_GET, &rs, NOW, NOW, 0, &m);
	tap_ok(m.etag.len == 0 && m.last_modified == -1, "no ETag, invalid Last-Modified: -1");
}

/* ---- requests -------------------------------------------------------- */

struct req_case {
	const char *name;
	const char *req;
	enum cachectl_req_kind kind;
	unsigned flags;
	int64_t max_age, min_fresh;
};

#define RQ(n, h, k, f, ma, mf) { n, "GET /x HTTP/1.1\r\nHost: a\r\n" h "\r\n", k, f, ma, mf }
#define RM(n, line, k) { n, line " /x HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", k, 0, -1, 0 }

static const struct req_case req_cases[] = {
	RQ("plain GET", "", CACHECTL_LOOKUP, 0, -1, 0),
	{ "HEAD", "HEAD /x HTTP/1.1\r\nHost: a\r\n\r\n", CACHECTL_LOOKUP, CACHECTL_RQ_HEAD, -1, 0 },
	RM("POST", "POST", CACHECTL_INVALIDATE),
	RM("PUT", "PUT", CACHECTL_INVALIDATE),
	RM("DELETE", "DELETE", CACHECTL_INVALIDATE),
	RM("PATCH", "PATCH", CACHECTL_INVALIDATE),
	RM("PURGE (safety unknown)", "PURGE", CACHECTL_INVALIDATE),
	RM("OPTIONS", "OPTIONS", CACHECTL_PASS),
	RM("TRACE", "TRACE", CACHECTL_PASS),
	RQ("Range", "Range: bytes=0-99\r\n", CACHECTL_LOOKUP, CACHECTL_RQ_RANGE | CACHECTL_RQ_NO_STORE, -1, 0),
	RQ("Range: two ranges", "Range: bytes=0-1, 5-9\r\n", CACHECTL_PASS, 0, -1, 0),
	RQ("Range: two lines", "Range: bytes=0-1\r\nRange: bytes=5-9\r\n", CACHECTL_PASS, 0, -1, 0),
	RQ("Range: another unit", "Range: items=0-1\r\n", CACHECTL_PASS, 0, -1, 0),
	RQ("Range: last before first", "Range: bytes=9-1\r\n", CACHECTL_PASS, 0, -1, 0),
	RQ("Range: no numbers", "Range: bytes=-\r\n", CACHECTL_PASS, 0, -1, 0),
	RQ("Range: junk after", "Range: bytes=0-1x\r\n", CACHECTL_PASS, 0, -1, 0),
	RQ("Range: 19 digits", "Range: bytes=1000000000000000000-\r\n", CACHECTL_PASS, 0, -1, 0),
	{ "HEAD with Range", "HEAD /x HTTP/1.1\r\nHost: a\r\nRange: bytes=0-1\r\n\r\n", CACHECTL_PASS, CACHECTL_RQ_HEAD, -1, 0 },
	RQ("no-cache", "Cache-Control: no-cache\r\n", CACHECTL_REFRESH, 0, -1, 0),
	RQ("max-age=0", "Cache-Control: max-age=0\r\n", CACHECTL_REFRESH, 0, 0, 0),
	RQ("max-age=5", "Cache-Control: max-age=5\r\n", CACHECTL_LOOKUP, 0, 5, 0),
	RQ("min-fresh=10", "Cache-Control: min-fresh=10\r\n", CACHECTL_LOOKUP, 0, -1, 10),
	RQ("no-store", "Cache-Control: no-store\r\n", CACHECTL_LOOKUP, CACHECTL_RQ_NO_STORE, -1, 0),
	RQ("Authorization", "Authorization: Bearer x\r\n", CACHECTL_LOOKUP, CACHECTL_RQ_AUTH, -1, 0),
	RQ("Pragma: no-cache not read", "Pragma: no-cache\r\n", CACHECTL_LOOKUP, 0, -1, 0),
	RQ("If-None-Match", "if-none-match: \"a\"\r\n", CACHECTL_LOOKUP, CACHECTL_RQ_COND, -1, 0),
	RQ("If-Modified-Since", "If-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n", CACHECTL_LOOKUP,
	   CACHECTL_RQ_COND, -1, 0),
	RQ("If-Match is no conditional of ours", "If-Match: \"a\"\r\n", CACHECTL_LOOKUP, 0, -1, 0),
	/* a body, or no Host to key by: neither served nor stored */
	{ "GET with a body", "GET /page HTTP/1.1\r\nHost: h.example\r\nCache-Control: no-cache\r\n"
	  "Content-Length: 12\r\n\r\nPOISON-CL-01", CACHECTL_PASS, 0, -1, 0 },
	{ "GET with a chunked body", "GET /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
	  CACHECTL_PASS, 0, -1, 0 },
	{ "HEAD with a body", "HEAD /x HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\nx",
	  CACHECTL_PASS, CACHECTL_RQ_HEAD, -1, 0 },
	RQ("Content-Length: 0 is no body", "Content-Length: 0\r\n", CACHECTL_LOOKUP, 0, -1, 0),
	{ "HTTP/1.0 without Host", "GET /x HTTP/1.0\r\n\r\n", CACHECTL_PASS, 0, -1, 0 },
	{ "empty Host", "GET /x HTTP/1.1\r\nHost: \r\n\r\n", CACHECTL_PASS, 0, -1, 0 },
	{ "HTTP/1.0 absolute-form: its authority", "GET http://a/x HTTP/1.0\r\n\r\n", CACHECTL_LOOKUP, 0, -1, 0 },
};

static void test_requests(void)
{
	size_t i;

	for (i = 0; i < sizeof(req_cases) / sizeof(req_cases[0]); i++) {
		const struct req_case *c = &req_cases[i];
		struct http1_msg rq;
		struct cachectl_req cr;

		if (parse_req(&rq, c->req) < 0) {
			tap_ok(0, "%s: test head parses", c->name);
			continue;
		}
		cachectl_request(&rq, &cr);
		tap_ok(cr.kind == c->kind && cr.flags == c->flags
		       && cr.max_age == c->max_age && cr.min_fresh == c->min_fresh,
		       "request %s: kind %d flags %#x max-age %lld min-fresh %lld",
		       c->name, c->kind, c->flags, (long long)c->max_age,
		       (long long)c->min_fresh);
	}
}

/* honor_client_no_cache = off: the client's freshness is forgotten, the
 * rest of the request's verdict is kept. */
static void test_request_plain(void)
{
	static const char *const heads[] = {
		"GET /x HTTP/1.1\r\nHost: a\r\nCache-Control: no-cache\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: a\r\nCache-Control: max-age=0\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: a\r\nCache-Control: max-age=5, min-fresh=30\r\n\r\n",
		"HEAD /x HTTP/1.1\r\nHost: a\r\nCache-Control: no-cache, no-store\r\n\r\n",
	};
	static const unsigned flags[] = { 0, 0, 0, CACHECTL_RQ_HEAD | CACHECTL_RQ_NO_STORE };
	struct http1_msg rq;
	struct cachectl_req cr;

	for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
		if (parse_req(&rq, heads[i]) < 0) {
			tap_ok(0, "plain %zu: test head parses", i);
			continue;
		}
		cachectl_request(&rq, &cr);
		cachectl_request_plain(&cr);
		tap_ok(cr.kind == CACHECTL_LOOKUP && cr.max_age == -1 && cr.min_fresh == 0 && cr.why == NULL &&
		       cr.flags == flags[i], "client freshness ignored: a plain lookup (%zu), flags %#x kept", i,
		       flags[i]);
	}
	parse_req(&rq, "POST /x HTTP/1.1\r\nHost: a\r\nCache-Control: no-cache\r\nContent-Length: 0\r\n\r\n");
	cachectl_request(&rq, &cr);
	cachectl_request_plain(&cr);
	tap_ok(cr.kind == CACHECTL_INVALIDATE, "client freshness ignored: a POST still invalidates");
	parse_req(&rq, "GET /x HTTP/1.1\r\nHost: a\r\nRange: bytes=0-1,5-6\r\nCache-Control: no-cache\r\n\r\n");
	cachectl_request(&rq, &cr);
	cachectl_request_plain(&cr);
	tap_ok(cr.kind == CACHECTL_PASS && strcmp(cr.why, "Range") == 0,
	       "client freshness ignored: a multi-range request still passes");
}

/* The one byte range a GET asks for (range_first, range_last). */
static void test_request_range(void)
{
	static const struct {
		const char *v;
		int64_t first, last;
	} c[] = {
		{ "bytes=0-1", 0, 1 },
		{ "bytes=5-", 5, -1 },
		{ "bytes=-7", -1, 7 },
		{ "bytes=-0", -1, 0 },
		{ "BYTES=3-3", 3, 3 },
	};
	char buf[128];

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct http1_msg rq;
		struct cachectl_req cr;

		snprintf(buf, sizeof(buf), "GET /x HTTP/1.1\r\nHost: a\r\nRange: %s\r\n\r\n", c[i].v);
		parse_req(&rq, buf);
		cachectl_request(&rq, &cr);
		tap_ok(cr.kind == CACHECTL_LOOKUP && (cr.flags & CACHECTL_RQ_RANGE)
		       && cr.range_first == c[i].first && cr.range_last == c[i].last,
		       "Range: %s: first %lld, last %lld", c[i].v, (long long)c[i].first,
		       (long long)c[i].last);
	}
}

static void test_invalidates(void)
{
	static const struct {
		const char *method;
		int status;
		bool want;
	} t[] = {
		{ "POST", 200, true }, { "POST", 303, true },
		{ "POST", 404, false }, { "PUT", 204, true },
		{ "DELETE", 500, false }, { "PATCH", 201, true },
		{ "PURGE", 200, true }, { "GET", 200, false },
		{ "HEAD", 200, false }, { "OPTIONS", 200, false },
		{ "POST", 100, false }, { "PURGE", 501, true },
		{ "BAN", 404, true }, { "PURGE", 100, false },
		{ "M-SEARCH", 200, true }, { "M-SEARCH", 501, false },
	};
	size_t i, bad = 0;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		char head[96];
		struct http1_msg m;

		snprintf(head, sizeof(head), "%s /x HTTP/1.1\r\nHost: a\r\n\r\n", t[i].method);
		parse_req(&m, head);
		if (cachectl_invalidates(&m, t[i].status) != t[i].want) {
			bad++;
			tap_diag("  method %s status %d", t[i].method, t[i].status);
		}
	}
	tap_is_int(bad, 0, "invalidation: unsafe methods (M-SEARCH too) with 2xx/3xx, PURGE and BAN with any "
		   "final status (16 cases)");
}

/* ---- Accept-Encoding ------------------------------------------------- */

static void test_ae(void)
{
	static const struct {
		const char *hdrs;
		unsigned want;
	} t[] = {
		{ "", 0 },
		{ "Accept-Encoding: gzip\r\n", CACHECTL_AE_GZIP },
		{ "Accept-Encoding: gzip, deflate, br\r\n", CACHECTL_AE_GZIP | CACHECTL_AE_DEFLATE | CACHECTL_AE_BR },
		{ "Accept-Encoding: deflate,gzip\r\n", CACHECTL_AE_GZIP | CACHECTL_AE_DEFLATE },
		{ "Accept-Encoding: br;q=0, gzip\r\n", CACHECTL_AE_GZIP },
		{ "Accept-Encoding: gzip;q=0.000\r\n", 0 },
		{ "Accept-Encoding: gzip;q=0.\r\n", 0 },
		{ "Accept-Encoding: gzip;q=0.001\r\n", CACHECTL_AE_GZIP },
		{ "Accept-Encoding: gzip ; q=0.5\r\n", CACHECTL_AE_GZIP },
		{ "Accept-Encoding: gzip;Q=0\r\n", 0 },
		{ "Accept-Encoding: *\r\n", CACHECTL_AE_ALL },
		{ "Accept-Encoding: *;q=0, gzip\r\n", CACHECTL_AE_GZIP },
		{ "Accept-Encoding: gzip;q=0, *\r\n", CACHECTL_AE_ALL & ~CACHECTL_AE_GZIP },
		{ "Accept-Encoding: x-gzip\r\n", CACHECTL_AE_GZIP },
		{ "Accept-Encoding: identity\r\n", 0 },
		{ "Accept-Encoding: compress, foo\r\n", 0 },
		{ "Accept-Encoding: GZIP, Zstd\r\n", CACHECTL_AE_GZIP | CACHECTL_AE_ZSTD },
		{ "Accept-Encoding: gzip\r\nAccept-Encoding: br\r\n", CACHECTL_AE_GZIP | CACHECTL_AE_BR },
		{ "Accept-Encoding: \r\n", 0 },
	};
	char buf[128];
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct http1_msg rq;

		snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: a\r\n%s\r\n", t[i].hdrs);
		parse_req(&rq, buf);
		tap_is_int(cachectl_ae(&rq), t[i].want, "Accept-Encoding set %zu (%#x)",
			   i, t[i].want);
	}
	tap_ok(cachectl_ae_string(CACHECTL_AE_ALL, buf, sizeof(buf)) == 23
	       && strcmp(buf, "br, deflate, gzip, zstd") == 0, "canonical: all four");
	tap_ok(cachectl_ae_string(CACHECTL_AE_GZIP | CACHECTL_AE_BR, buf, sizeof(buf)) == 8
	       && strcmp(buf, "br, gzip") == 0, "canonical: br, gzip");
	tap_ok(cachectl_ae_string(0, buf, sizeof(buf)) == 0 && buf[0] == '\0', "canonical: empty");
	{
		unsigned set, bad = 0;

		for (set = 0; set <= CACHECTL_AE_ALL; set++) {
			struct http1_str l = cachectl_ae_header(set);
			char want[64];
			int n = cachectl_ae_string(set, buf, sizeof(buf));

			snprintf(want, sizeof(want), "Accept-Encoding: %s\r\n", n > 0 ? buf : "identity");
			bad += l.len != strlen(want) || memcmp(l.p, want, l.len) != 0;
		}
		tap_is_int(bad, 0, "the request line of every set: its canonical value, identity for none");
	}
	tap_is_int(cachectl_ae_string(CACHECTL_AE_ALL, buf, 10), -1, "canonical: too small a buffer");
}

/* ---- keys ------------------------------------------------------------ */

static void test_key(void)
{
	static const struct {
		const char *req;
		const char *want;
	} t[] = {
		{ "GET /a/b?x=1 HTTP/1.1\r\nHost: Img.Example\r\n\r\n", "img.example/a/b?x=1" },
		{ "GET /a? HTTP/1.1\r\nHost: a\r\n\r\n", "a/a?" },
		{ "GET http://H:8080/p?q HTTP/1.1\r\nHost: other\r\n\r\n", "h:8080/p?q" },
		{ "GET /x HTTP/1.0\r\n\r\n", "/x" },
	};
	struct http1_msg rq;
	char buf[64];
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		ssize_t n;

		parse_req(&rq, t[i].req);
		n = cachectl_key(&rq, buf, sizeof(buf));
		buf[n < 0 ? 0 : n] = '\0';
		tap_is_str(buf, t[i].want, "key %s", t[i].want);
	}
	parse_req(&rq, t[0].req);
	tap_is_int(cachectl_key(&rq, buf, 10), -1, "key: too small a buffer");
	{
		/* every byte value at every place of a word: only A-Z change */
		char host[264], out[300];
		unsigned bad = 0;

		for (size_t off = 0; off < 8; off++) {
			for (i = 0; i < 256; i++)
				host[off + i] = (char)i;
			http1_msg_init(&rq);
			rq.host = (struct http1_str){ host + off, 256 };
			rq.path = (struct http1_str){ "/", 1 };
			if (cachectl_key(&rq, out, sizeof(out)) != 257)
				bad++;
			for (i = 0; i < 256; i++)
				bad += (unsigned char)out[i] != (i >= 'A' && i <= 'Z' ? i + 32 : i);
			bad += out[256] != '/';
		}
		tap_is_int(bad, 0, "key: every byte of the host at every offset, only A-Z lowered");
		/* hosts of 1 to 24 bytes, so the last word overlaps the one
		 * before it: each byte lowered once, nothing past the host */
		bad = 0;
		for (size_t len = 1; len <= 24; len++) {
			for (size_t k = 0; k < 256; k += 7) {
				for (i = 0; i < len; i++)
					host[i] = (char)((k + i * 29) % 256);
				memset(out, '#', sizeof(out));
				http1_msg_init(&rq);
				rq.host = (struct http1_str){ host, len };
				rq.path = (struct http1_str){ "/", 1 };
				bad += cachectl_key(&rq, out, sizeof(out)) != (ssize_t)len + 1;
				for (i = 0; i < len; i++) {
					unsigned c = (unsigned char)host[i];

					bad += (unsigned char)out[i] != (c >= 'A' && c <= 'Z' ? c + 32 : c);
				}
				bad += out[len] != '/' || out[len + 1] != '#';
			}
		}
		tap_is_int(bad, 0, "key: hosts of 1 to 24 bytes, only A-Z lowered, each byte once");
	}
}

/* ---- conditional requests -------------------------------------------- */

static void test_conditional(void)
{
	static const struct {
		const char *name;
		const char *hdrs;
		const char *etag;
		int64_t lm;
		bool want;
	} t[] = {
		{ "INM equal", "If-None-Match: \"abc\"\r\n", "\"abc\"", -1, true },
		{ "INM weak vs strong", "If-None-Match: W/\"abc\"\r\n", "\"abc\"", -1, true },
		{ "INM strong vs weak", "If-None-Match: \"abc\"\r\n", "W/\"abc\"", -1, true },
		{ "INM list", "If-None-Match: \"x\", \"abc\"\r\n", "\"abc\"", -1, true },
		{ "INM other", "If-None-Match: \"x\"\r\n", "\"abc\"", -1, false },
		/* a backslash is a byte of an entity-tag, not an escape */
		{ "INM list after a tag ending in a backslash", "If-None-Match: \"a\\\", \"abc\"\r\n", "\"abc\"", -1, true },
		{ "INM a tag with a backslash", "If-None-Match: \"a\\b\"\r\n", "\"a\\b\"", -1, true },
		{ "INM * after a tag ending in a backslash", "If-None-Match: \"a\\\", *\r\n", "\"abc\"", -1, true },
		{ "INM *", "If-None-Match: *\r\n", "", -1, true },
		{ "INM, no stored ETag", "If-None-Match: \"abc\"\r\n", "", -1, false },
		{ "INM decides over IMS", "If-None-Match: \"x\"\r\nIf-Modified-Since: " D0 "\r\n", "\"abc\"", NOW - 3600, false },
		{ "IMS after Last-Modified", "If-Modified-Since: " D0 "\r\n", "", NOW - 3600, true },
		{ "IMS equal", "If-Modified-Since: " D_M3600 "\r\n", "", NOW - 3600, true },
		{ "IMS before Last-Modified", "If-Modified-Since: " D_M3600 "\r\n", "", NOW, false },
		{ "IMS invalid", "If-Modified-Since: soon\r\n", "", NOW - 3600, false },
		{ "IMS, no Last-Modified", "If-Modified-Since: " D0 "\r\n", "", -1, false },
		{ "no conditional", "", "\"abc\"", NOW - 3600, false },
	};
	struct http1_msg rq;
	char buf[256];
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct http1_str e = { t[i].etag, strlen(t[i].etag) };

		snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: a\r\n%s\r\n", t[i].hdrs);
		parse_req(&rq, buf);
		tap_is_int(cachectl_not_modified(&rq, e, t[i].lm, NOW), t[i].want,
			   "conditional: %s", t[i].name);
	}
	parse_req(&rq, "POST / HTTP/1.1\r\nHost: a\r\nIf-None-Match: *\r\nContent-Length: 0\r\n\r\n");
	tap_is_int(cachectl_not_modified(&rq, (struct http1_str){ "\"a\"", 3 }, -1, NOW), 0,
		   "conditional: never for a POST");
}

/* ---- dates ----------------------------------------------------------- */

static void test_dates(void)
{
	static const struct {
		const char *s;
		int64_t want;   /* -1: invalid */
	} t[] = {
		{ "Sun, 06 Nov 1994 08:49:37 GMT", 784111777 },
		{ "Sunday, 06-Nov-94 08:49:37 GMT", 784111777 },
		{ "Sun Nov  6 08:49:37 1994", 784111777 },
		{ "Tue Nov 14 22:13:20 2023", 1700000000 },
		{ "Tuesday, 14-Nov-23 22:13:20 GMT", 1700000000 },
		{ "Thu, 01 Jan 1970 00:00:00 GMT", 0 },
		{ "Tue, 29 Feb 2000 00:00:00 GMT", 951782400 },
		{ "Thu, 31 Dec 2099 23:59:59 GMT", 4102444799 },
		{ "Friday, 31-Dec-99 23:59:59 GMT", 946684799 },    /* not 2099 */
		{ "Thursday, 31-Dec-70 23:59:59 GMT", 3187295999 }, /* 2070 */
		{ "Fri, 31 Dec 9999 23:59:59 GMT", 253402300799 },
		/* a leap second past the last date that can be written */
		{ "Fri, 31 Dec 9999 23:59:60 GMT", 253402300799 },
		{ "Thu, 29 Feb 2001 00:00:00 GMT", -1 },
		{ "Sun, 31 Apr 1994 08:49:37 GMT", -1 },
		{ "Sun, 06 Nov 1994 08:49:37 UTC", -1 },
		{ "Sun, 6 Nov 1994 08:49:37 GMT", -1 },
		{ "Sun, 06 Nov 1994 24:00:00 GMT", -1 },
		{ "Sun, 06 nov 1994 08:49:37 GMT", -1 },
		{ "Xyz, 06 Nov 1994 08:49:37 GMT", -1 },
		{ "Sun, 06 Nov 1994 08:49:37 GMT ", -1 },
		{ "Sonntag, 06-Nov-94 08:49:37 GMT", -1 },
		{ "Sun Nov 6 08:49:37 1994", -1 },
		{ "0", -1 },
		{ "", -1 },
	};
	size_t i;
	unsigned bad = 0;
	char buf[32];

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct http1_str s = { t[i].s, strlen(t[i].s) };
		int64_t v = -1;
		int r = cachectl_date(s, NOW, &v);

		tap_is_int(r < 0 ? -1 : v, t[i].want, "date \"%s\"", t[i].s);
	}
	/* RFC 850's two-digit year against a clock early in a century:
	 * 2009 is 39 years ahead of 1970, so -09 is 2009, not 1909 (the
	 * cachectl fuzzer's find); -21 is 51 years ahead, so 1921 */
	{
		const char *s850 = "Sunday, 06-Nov-09 08:49:18 GMT";
		struct http1_str s = { s850, strlen(s850) };
		int64_t v = -1, now1970 = 5570745;   /* 1970-03-06 */
		int r = cachectl_date(s, now1970, &v);

		tap_ok(r == 0 && v == 1257497358,
		       "\"%s\" with the clock in 1970: 2009 (%lld)", s850, (long long)v);
		s850 = "Sunday, 06-Nov-21 08:49:18 GMT";
		s = (struct http1_str){ s850, strlen(s850) };
		r = cachectl_date(s, now1970, &v);
		tap_ok(r == 0 && v == -1519571442,
		       "\"%s\" with the clock in 1970: 1921 (%lld)", s850, (long long)v);
	}
	/* the formatter and the parser agree over two centuries */
	for (i = 0; i < 20000; i++) {
		int64_t tt = (int64_t)i * 317539 + 13, v;
		struct http1_str s = { buf, 29 };

		cachectl_date_format(tt, buf);
		if (cachectl_date(s, NOW, &v) < 0 || v != tt)
			bad++;
	}
	tap_is_int(bad, 0, "20000 formatted dates parse back");
	cachectl_date_format(784111777, buf);
	tap_is_str(buf, "Sun, 06 Nov 1994 08:49:37 GMT", "IMF-fixdate formatted");
}

/* The lines after a stored head, against what snprintf makes of the
 * same values, and refused exactly when snprintf's text and its NUL do
 * not fit. */
static void test_hit_lines(void)
{
	static const struct {
		int64_t age, ttl;
		const char *how, *hdr, *be, *conn;
		bool cached;
	} cases[] = {
		{ 0, 3600, "hit", "X-Ringproxy-Backend", "cache-1", "", true },
		{ 12, -5, "hit; fwd=stale", "X-Ringproxy-Backend", "c", "Connection: close\r\n", true },
		{ 9, 0, "fwd=miss; collapsed", "X-Be", "cache-22", "Connection: keep-alive\r\n", false },
		{ 2147483648, INT64_MIN, "hit", "", "cache-1", "", true },
		{ INT64_MAX, 1, "hit", "X-Be", "", "", true },
	};
	char want[512], got[512];
	int bad = 0, refused = 0;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct http1_str be = { cases[i].be, strlen(cases[i].be) };
		int w = snprintf(want, sizeof(want), "Age: %lld\r\nCache-Status: ringproxy; %s; ttl=%lld\r\n",
				 (long long)cases[i].age, cases[i].how, (long long)cases[i].ttl);

		if (cases[i].hdr[0] && be.len)
			w += snprintf(want + w, sizeof(want) - (size_t)w, "%s: %s%s\r\n", cases[i].hdr,
				      cases[i].be, cases[i].cached ? "; cached" : "");
		w += snprintf(want + w, sizeof(want) - (size_t)w, "Via: 1.1 ringproxy\r\n%s\r\n", cases[i].conn);
		for (size_t cap = (size_t)w - 2; cap <= (size_t)w + 2; cap++) {
			int n = cachectl_hit_lines(got, cap, cases[i].age, cases[i].ttl, cases[i].how,
						   cases[i].hdr, be, cases[i].cached, cases[i].conn);

			if (cap <= (size_t)w)
				refused += n == -1;
			else if (n != w || memcmp(got, want, (size_t)w) != 0)
				bad++;
		}
	}
	tap_is_int(bad, 0, "a hit's lines are snprintf's, byte for byte");
	tap_is_int(refused, 3 * 5, "and are refused exactly when they and a NUL do not fit");
}

int main(void)
{
	test_responses();
	test_policy();
	test_no_cache_fields();
	test_targeted_names();
	test_location_key();
	test_request_range();
	test_response_methods();
	test_validators();
	test_requests();
	test_request_plain();
	test_invalidates();
	test_ae();
	test_key();
	test_conditional();
	test_dates();
	test_hit_lines();
	return tap_done();
}
