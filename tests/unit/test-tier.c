/*
 * test-tier.c -- the cache tier's verdict (tier.c) on response heads as
 * the codec parses them: one row per case, the exact verdict expected
 * under the mode named. The header values are the ones the caches send:
 * varnishd 7 (X-Varnish), Squid and nginx (X-Cache), RFC 9211's examples
 * (Cache-Status).
 */
#include "http/http1.h"
#include "tap.h"
#include "http/tier.h"

static const struct {
	const char *headers;            /* header lines, each ending \r\n */
	enum tier_status mode;
	enum tier_verdict want;
	const char *what;
} cases[] = {
	{ "", TIER_AUTO, TIER_MISS, "no cache header, no Age: a miss" },
	{ "", TIER_X_VARNISH, TIER_NONE, "x-varnish mode without X-Varnish: no verdict" },
	{ "", TIER_OFF, TIER_NONE, "off: none" },
	{ "X-Varnish: 32770\r\n", TIER_AUTO, TIER_MISS, "X-Varnish one id: a miss" },
	{ "X-Varnish: 32770 3\r\nAge: 5\r\n", TIER_AUTO, TIER_HIT, "X-Varnish two ids: a hit" },
	{ "X-Varnish: 32770\r\nAge: 5\r\n", TIER_AUTO, TIER_MISS, "X-Varnish is read before Age" },
	{ "x-varnish: 5 6 7\r\n", TIER_X_VARNISH, TIER_NONE, "three ids: no verdict" },
	{ "X-Varnish: abc\r\nAge: 3\r\n", TIER_AUTO, TIER_HIT, "an X-Varnish that says nothing: on to Age" },
	{ "X-Varnish: 1 2\r\n", TIER_OFF, TIER_NONE, "off: not read" },
	{ "X-Varnish: 1 2\r\n", TIER_X_CACHE, TIER_NONE, "x-cache mode ignores X-Varnish" },
	{ "X-Cache: HIT\r\n", TIER_AUTO, TIER_HIT, "X-Cache: HIT" },
	{ "X-Cache: MISS\r\nAge: 10\r\n", TIER_AUTO, TIER_MISS, "X-Cache: MISS, before Age" },
	{ "X-Cache: MISS from squid.example\r\n", TIER_X_CACHE, TIER_MISS, "Squid's MISS from host" },
	{ "X-Cache: TCP_MEM_HIT\r\n", TIER_X_CACHE, TIER_HIT, "Squid's TCP_MEM_HIT" },
	{ "X-Cache: MISS, HIT\r\n", TIER_X_CACHE, TIER_HIT, "a list: the last is the nearest" },
	{ "X-Cache: HIT, MISS\r\n", TIER_X_CACHE, TIER_MISS, "a list, the other way" },
	{ "X-Cache: EXPIRED\r\n", TIER_X_CACHE, TIER_MISS, "nginx EXPIRED went to the origin" },
	{ "X-Cache: STALE\r\n", TIER_X_CACHE, TIER_HIT, "nginx STALE came from store" },
	{ "X-Cache: BYPASS\r\n", TIER_X_CACHE, TIER_MISS, "nginx BYPASS" },
	{ "X-Cache: whatever\r\nAge: 0\r\n", TIER_AUTO, TIER_MISS, "an X-Cache that says nothing: on to Age" },
	{ "Cache-Status: ExampleCache; hit\r\n", TIER_AUTO, TIER_HIT, "Cache-Status hit" },
	{ "Cache-Status: ExampleCache; fwd=uri-miss\r\n", TIER_AUTO, TIER_MISS, "Cache-Status fwd=uri-miss" },
	{ "Cache-Status: ExampleCache; fwd=stale; fwd-status=304\r\n", TIER_CACHE_STATUS, TIER_MISS,
	  "fwd=stale: revalidated at the origin" },
	{ "Cache-Status: OriginCache; hit; ttl=1100, \"CDN Company Here\"; fwd=uri-miss\r\n", TIER_CACHE_STATUS,
	  TIER_MISS, "RFC 9211's list: the last member is the nearest cache" },
	{ "Cache-Status: OriginCache; fwd=uri-miss, CDN; hit; ttl=10\r\n", TIER_CACHE_STATUS, TIER_HIT,
	  "the last member's hit" },
	{ "Cache-Status: A; fwd=miss\r\nCache-Status: B; hit\r\n", TIER_CACHE_STATUS, TIER_HIT,
	  "two lines: one list, the last line's last member" },
	{ "Cache-Status: C; detail=\"hit, then; fwd\"; fwd=miss\r\n", TIER_CACHE_STATUS, TIER_MISS,
	  "commas and semicolons in a quoted detail separate nothing" },
	{ "Cache-Status: C; hit=?0; fwd=miss\r\n", TIER_CACHE_STATUS, TIER_MISS, "hit=?0 is not a hit" },
	{ "Cache-Status: C; hit=?1\r\n", TIER_CACHE_STATUS, TIER_HIT, "hit=?1 is" },
	{ "Cache-Status: C; stored\r\nX-Varnish: 1 2\r\n", TIER_AUTO, TIER_HIT,
	  "a Cache-Status with neither: on to X-Varnish" },
	{ "Cache-Status: C; hit\r\n", TIER_X_VARNISH, TIER_NONE, "x-varnish mode ignores Cache-Status" },
	{ "Age: 12\r\n", TIER_AGE, TIER_HIT, "Age 12: a hit" },
	{ "Age: 0\r\n", TIER_AGE, TIER_MISS, "Age 0: a miss" },
	{ "Age: 00\r\n", TIER_AGE, TIER_MISS, "Age 00: a miss" },
	{ "Age: -1\r\n", TIER_AGE, TIER_MISS, "an invalid Age: a miss" },
	{ "X-Cache: HIT\r\n", TIER_AGE, TIER_MISS, "age mode: X-Cache ignored, no Age: a miss" },
	{ "Age: 3\r\nAge: 0\r\n", TIER_AGE, TIER_MISS, "the last Age line" },
	/* the parser notes the four names in any case, wherever they are */
	{ "X-A: 1\r\naGE: 7\r\nX-Cache-Node: n\r\n", TIER_AUTO, TIER_HIT, "auto: aGE in any case, between others" },
	{ "Content-Type: t\r\nX-VARNISH: 1 2\r\n", TIER_AUTO, TIER_HIT, "auto: X-VARNISH upper case" },
	{ "x-cAcHe: MISS\r\nVia: 1.1 v\r\n", TIER_AUTO, TIER_MISS, "auto: x-cAcHe mixed case, first" },
	{ "Age: 9\r\nCACHE-STATUS: e; fwd=uri-miss\r\n", TIER_AUTO, TIER_MISS,
	  "auto: CACHE-STATUS upper case before Age" },
	{ "X-Varnishes: 1 2\r\nX-Cache-Hit: 1\r\nAges: 4\r\nCache-Statuses: c; hit\r\n", TIER_AUTO, TIER_MISS,
	  "auto: longer names are none of them" },
};

int main(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct http1_limits lim = { 8192, 64 };
		struct http1_header h[64];
		struct http1_msg m;
		char buf[1024];
		int n = snprintf(buf, sizeof(buf), "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n%s\r\n",
				 cases[i].headers);

		http1_msg_init(&m);
		if (!tap_ok(http1_parse_response(&m, h, buf, (size_t)n, &lim, HTTP1_M_GET) > 0,
			    "parses: %s", cases[i].what))
			continue;
		tap_is_int(tier_verdict(&m, cases[i].mode), cases[i].want, "%s", cases[i].what);
	}
	return tap_done();
}
