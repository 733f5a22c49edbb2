/*
 * test-query.c -- query normalisation ([ring] query, drop_params): the
 * rules query.c states, each with the query that shows it (orderings,
 * trackers, empty parameters, names without '=', percent-encoding, the
 * limits), the pattern list's parsing and errors, and query_apply on
 * requests parsed by the real codec (origin and absolute form, a '?' left
 * without parameters, the target as received kept for the log).
 */
#include "config/conf.h"
#include "http/http1.h"
#include "http/query.h"
#include "tap.h"

#include <stdlib.h>

static struct query_rules rules(int mode, const char *drop)
{
	struct query_rules r;
	char err[160];

	memset(&r, 0, sizeof(r));
	r.mode = mode;
	if (query_rules_parse(&r, drop, err, sizeof(err)) < 0)
		tap_diag("'%s': %s", drop, err);
	return r;
}

/* query_normalize of q under r is want (NULL: stays as sent, -1). */
static void norm_is(const struct query_rules *r, const char *q, const char *want, const char *what)
{
	size_t len = strlen(q);
	char *out = malloc(len + 1);
	ssize_t n = query_normalize(r, q, len, out);

	if (!want) {
		tap_ok(n == -1, "%s: '%s' stays as sent", what, q);
	} else if (tap_ok(n >= 0 && (size_t)n == strlen(want) && memcmp(out, want, (size_t)n) == 0,
			  "%s: '%s' -> '%s'", what, q, want)) {
		/* idempotent: the result normalises to itself */
		char *again = malloc((size_t)n + 1);
		ssize_t m = query_normalize(r, out, (size_t)n, again);

		if (m != n || memcmp(again, out, (size_t)n) != 0)
			tap_ok(0, "%s: '%s' normalises to itself", what, want);
		free(again);
	} else {
		tap_diag("  got %zd '%.*s'", n, n > 0 ? (int)n : 0, out);
	}
	free(out);
}

static void test_sorted(void)
{
	struct query_rules s = rules(QUERY_SORTED, "");

	norm_is(&s, "w=200&h=200", "h=200&w=200", "sorted");
	norm_is(&s, "h=200&w=200", "h=200&w=200", "sorted");
	/* HAProxy's examples of query-sort-by-name */
	norm_is(&s, "c=3&a=1&b=2", "a=1&b=2&c=3", "sorted");
	norm_is(&s, "aaa=3&a=1&aa=2", "a=1&aa=2&aaa=3", "shorter names first");
	norm_is(&s, "a=3&b=4&a=1&b=5&a=2", "a=3&a=1&a=2&b=4&b=5", "equal names keep their order");
	/* std.querysort's prefix compare would call these equal */
	norm_is(&s, "a=10&a=1", "a=10&a=1", "values never reorder");
	norm_is(&s, "ab=1&a=2", "a=2&ab=1", "a name that is a prefix first");
	norm_is(&s, "a[]=2&a[]=1&b=0", "a[]=2&a[]=1&b=0", "array parameters in order");
	norm_is(&s, "b&a=&a", "a=&a&b", "no '=': the whole parameter is the name");
	norm_is(&s, "&&b=1&&a=2&", "a=2&b=1", "empty parameters removed");
	norm_is(&s, "", "", "an empty query: the '?' goes");
	norm_is(&s, "&&&", "", "only '&': the '?' goes");
	norm_is(&s, "b=%26&a=%3D", "a=%3D&b=%26", "encoded '&' and '=' stay in their parameter");
	norm_is(&s, "%61=1&a=2&B=3", "%61=1&B=3&a=2", "raw bytes, not decoded, case-sensitive");
	norm_is(&s, "\xc3\xa9=1&z=2", "z=2&\xc3\xa9=1", "unsigned bytes: UTF-8 after ASCII");
	norm_is(&s, "x==1&x=0", "x==1&x=0", "the name ends at the first '='");
}

static void test_drop(void)
{
	struct query_rules a = rules(QUERY_AS_IS, "utm_*, fbclid,gclid");
	struct query_rules s = rules(QUERY_SORTED, "utm_*, fbclid,gclid");
	struct query_rules all = rules(QUERY_AS_IS, "*");
	struct query_rules mid = rules(QUERY_AS_IS, "x*y*z");

	norm_is(&a, "w=2&utm_source=x&h=1&fbclid=abc", "w=2&h=1", "as-is: trackers dropped, order kept");
	norm_is(&a, "utm_source=x", "", "as-is: nothing left, the '?' goes");
	norm_is(&a, "utm_=1&utm=2", "utm=2", "utm_* needs the '_'");
	norm_is(&a, "UTM_source=1&gclid2=3&xfbclid", "UTM_source=1&gclid2=3&xfbclid",
		"names match whole, case-sensitively");
	norm_is(&a, "utm%5Fsource=1", "utm%5Fsource=1", "an encoded name is not decoded");
	norm_is(&a, "fbclid&fbclid=&fbclid=1&a", "a", "with or without '=' and value");
	norm_is(&a, "b=1&&a=2", "b=1&a=2", "as-is with a drop list: empty parameters go");
	norm_is(&s, "w=200&utm_medium=m&h=200&gclid=g", "h=200&w=200", "sorted and dropped");
	norm_is(&all, "a=1&b=2", "", "'*' drops every parameter");
	norm_is(&mid, "xyz&x_y_z=1&xaybzc&xzy", "xaybzc&xzy", "stars in the middle");

	struct query_rules none = rules(QUERY_AS_IS, "");

	norm_is(&none, "b=1&&a=2&utm_source=x", NULL, "as-is without a drop list changes nothing");
	tap_ok(!query_rules_active(&none) && query_rules_active(&a) && query_rules_active(&s),
	       "as-is without a drop list is the only inactive rule set");
}

static void test_limits(void)
{
	struct query_rules s = rules(QUERY_SORTED, "");
	char *q = malloc(QUERY_TARGET_MAX + 8), *out = malloc(QUERY_TARGET_MAX + 8);
	size_t n = 0;

	/* QUERY_MAX_PARAMS parameters are sorted, one more stays as sent */
	for (int i = QUERY_MAX_PARAMS; i > 0; i--)
		n += (size_t)snprintf(q + n, 16, "%s%c%d", n ? "&" : "", 'a' + i % 26, i);
	tap_ok(query_normalize(&s, q, n, out) == (ssize_t)n && out[0] == 'a',
	       "%d parameters are sorted", QUERY_MAX_PARAMS);
	n += (size_t)snprintf(q + n, 16, "&z0");
	tap_ok(query_normalize(&s, q, n, out) == -1, "%d parameters stay as sent", QUERY_MAX_PARAMS + 1);
	/* but empty ones and dropped ones are not counted */
	memset(q, '&', QUERY_TARGET_MAX);
	memcpy(q + 10, "b=1", 3);
	memcpy(q + 100, "a=1", 3);
	tap_ok(query_normalize(&s, q, QUERY_TARGET_MAX, out) == 7 && memcmp(out, "a=1&b=1", 7) == 0,
	       "%d bytes of mostly '&' normalise", QUERY_TARGET_MAX);
	tap_ok(query_normalize(&s, q, QUERY_TARGET_MAX + 1, out) == -1, "a longer query stays as sent");
	free(q);
	free(out);
}

static void parse_fails(const char *list, const char *want)
{
	struct query_rules r;
	char err[160] = "";

	tap_ok(query_rules_parse(&r, list, err, sizeof(err)) < 0 && strstr(err, want) != NULL,
	       "drop_params '%s' refused: %s", list, err);
}

static void test_parse(void)
{
	struct query_rules r;
	char err[160], many[200] = "";

	tap_ok(query_rules_parse(&r, "  utm_* ,\tfbclid ", err, sizeof(err)) == 0 && r.ndrop == 2 &&
	       r.drop[0].len == 5 && memcmp(r.drop[0].p, "utm_*", 5) == 0 && r.drop[1].len == 6,
	       "patterns split at ',' with the spaces around them trimmed");
	tap_ok(query_rules_parse(&r, "", err, sizeof(err)) == 0 && r.ndrop == 0, "empty: no pattern");
	parse_fails("utm_*,,fbclid", "empty pattern");
	parse_fails("fbclid,", "after the last ','");
	parse_fails("a=b", "cannot hold");
	parse_fails("a&b", "cannot hold");
	parse_fails("a b", "cannot hold");
	for (int i = 0; i <= QUERY_MAX_DROP; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many), "%sp%d", i ? "," : "", i);
	parse_fails(many, "more than");

	struct query_rules x = rules(QUERY_SORTED, "a,b"), y = rules(QUERY_SORTED, "a, b"),
			   z = rules(QUERY_SORTED, "b,a"), n1 = rules(QUERY_AS_IS, ""), n2 = rules(QUERY_AS_IS, "");

	tap_ok(query_rules_same(&x, &y) && !query_rules_same(&x, &z) && query_rules_same(&n1, &n2) &&
	       !query_rules_same(&x, &n1), "rules compare by mode and patterns");
}

/* query_apply on "GET target": the new target (want), or want NULL for
 * no change; the target as received in sent. */
static void apply_is(const struct query_rules *r, const char *target, const char *want, bool has_query)
{
	static const struct http1_limits lim = { 65536, 16 };
	struct http1_header h[16];
	struct http1_msg m;
	struct query_sent sent = { { NULL, 0 }, { NULL, 0 } };
	char head[8192], buf[QUERY_TARGET_MAX];
	struct http1_str path;
	int n = snprintf(head, sizeof(head), "GET %s HTTP/1.1\r\nHost: h\r\n\r\n", target);
	bool changed;

	http1_msg_init(&m);
	if (!tap_ok(http1_parse_request(&m, h, head, (size_t)n, &lim) > 0, "'%s' parses", target))
		return;
	path = m.path;
	changed = query_apply(r, &m, buf, &sent);
	if (!want) {
		tap_ok(!changed && sent.target.p == NULL && m.target.p == head + 4, "'%s' is left alone", target);
		return;
	}
	tap_ok(changed && m.target.len == strlen(want) && memcmp(m.target.p, want, m.target.len) == 0 &&
	       m.has_query == has_query && m.path.p == path.p && m.path.len == path.len &&
	       sent.target.p == head + 4 && sent.target.len == strlen(target) &&
	       (!has_query || (m.query.p == m.target.p + m.target.len - m.query.len && m.query.p[-1] == '?')),
	       "'%s' becomes '%.*s'", target, (int)m.target.len, m.target.p);
	query_restore(&m, &sent);
	tap_ok(m.target.p == head + 4 && m.has_query && m.query.p == sent.query.p, "'%s' restored as received",
	       target);
}

static void test_apply(void)
{
	struct query_rules s = rules(QUERY_SORTED, "utm_*");
	struct query_rules none = rules(QUERY_AS_IS, "");

	apply_is(&s, "/t/a.jpg?w=2&h=1", "/t/a.jpg?h=1&w=2", true);
	apply_is(&s, "/t/a.jpg?h=1&w=2", NULL, true);
	apply_is(&s, "/t/a.jpg?utm_source=x", "/t/a.jpg", false);
	apply_is(&s, "/t/a.jpg?", "/t/a.jpg", false);
	apply_is(&s, "/t/a.jpg", NULL, false);
	apply_is(&s, "http://img.example/a.jpg?w=2&h=1", "http://img.example/a.jpg?h=1&w=2", true);
	apply_is(&s, "http://img.example?utm_x=1", "http://img.example", false);
	apply_is(&none, "/t/a.jpg?w=2&h=1", NULL, true);
}

int main(void)
{
	test_sorted();
	test_drop();
	test_limits();
	test_parse();
	test_apply();
	return tap_done();
}
