/*
 * query.c -- query normalisation (query.h): split, drop, sort, join.
 *
 * The rules, and why (the issue left them to us):
 *  - Parameters are split at '&' only, as HTML forms and WHATWG's
 *    URLSearchParams write them, and as Varnish's std.querysort and
 *    HAProxy's query-sort-by-name split them.
 *  - The sort key is the name (the bytes before the first '='), and
 *    equal names keep the order they were sent in: HAProxy's rule. Not
 *    the whole "name=value" as std.querysort compares it: the order of
 *    repeated names (a[]=2&a[]=1, ordered filter chains) is what an
 *    application reads, and the target is forwarded rewritten, so only
 *    the order of different names, which no form decoder reports, may
 *    change. std.querysort also compares only up to the shorter
 *    parameter with an unstable qsort, so "a=1&a=10" and "a=10&a=1" may
 *    stay two keys; a stable sort with shorter-first gives one.
 *  - Empty parameters ("&&", a leading or trailing '&') are removed, as
 *    std.querysort (and Fastly's querystring.sort) do; HAProxy keeps them
 *    and sorts them first. They carry nothing a form decoder reads.
 *  - A query left without a parameter loses its '?': "/a.jpg?" and
 *    "/a.jpg?utm_source=x" become "/a.jpg", the URL the other clients
 *    send. RFC 3986 6.2.3 does not make "/a?" and "/a" equivalent by
 *    itself; turning normalisation on is the operator saying they are.
 *  - A parameter without '=' is its own name: "a" and "a=" have the same
 *    name (they keep their order) and stay as sent.
 *  - Bytes are compared raw, never percent-decoded: "%61" is not "a", and
 *    an encoded '&' or '=' (%26, %3D) stays inside its parameter. Decoding
 *    would need one canonical encoding to forward; HAProxy keeps that to
 *    its separate percent-* normalizers.
 *  - Names are compared as unsigned bytes, case-sensitively, as memcmp.
 * The sort is a binary insertion sort over at most QUERY_MAX_PARAMS
 * entries on the stack: O(n log n) comparisons, moves of small structs,
 * stable by inserting after equal names.
 */
#include "http/query.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* One parameter: its offset and length in the query, its name's length. */
struct query_param {
	uint16_t off, len, nlen;
};

/* A pattern's bytes: a name cannot hold '&' (it ends the parameter) or
 * '=' (it ends the name), and a request target holds no space, control
 * byte or '#'; ',' separates patterns. */
static bool query_pattern_byte(unsigned char c)
{
	return c > 0x20 && c < 0x7f && c != '&' && c != '=' && c != '#' && c != ',';
}

int query_rules_parse(struct query_rules *r, const char *list, char *err, size_t errlen)
{
	const char *p = list;

	r->ndrop = 0;
	while (*p) {
		const char *s, *e;

		while (*p == ' ' || *p == '\t')
			p++;
		s = p;
		while (*p && *p != ',')
			p++;
		e = p;
		while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		if (e == s) {
			snprintf(err, errlen, "an empty pattern; write names or globs separated by commas, e.g. utm_*, fbclid");
			return -1;
		}
		for (const char *c = s; c < e; c++) {
			if (!query_pattern_byte((unsigned char)*c)) {
				snprintf(err, errlen, "pattern '%.*s' has a byte a parameter name cannot hold "
					 "(space, '&', '=', '#' or a control byte)", (int)(e - s), s);
				return -1;
			}
		}
		if (r->ndrop == QUERY_MAX_DROP) {
			snprintf(err, errlen, "more than %d patterns", QUERY_MAX_DROP);
			return -1;
		}
		r->drop[r->ndrop].p = s;
		r->drop[r->ndrop].len = (size_t)(e - s);
		r->ndrop++;
		if (*p == ',' && !*++p) {
			snprintf(err, errlen, "an empty pattern after the last ','; remove the ','");
			return -1;
		}
	}
	return 0;
}

bool query_rules_active(const struct query_rules *r)
{
	return r->mode != QUERY_AS_IS || r->ndrop != 0;
}

bool query_rules_same(const struct query_rules *a, const struct query_rules *b)
{
	if (!query_rules_active(a) || !query_rules_active(b))
		return query_rules_active(a) == query_rules_active(b);
	if (a->mode != b->mode || a->ndrop != b->ndrop)
		return false;
	for (unsigned i = 0; i < a->ndrop; i++)
		if (a->drop[i].len != b->drop[i].len || memcmp(a->drop[i].p, b->drop[i].p, a->drop[i].len) != 0)
			return false;
	return true;
}

/* Glob match of s[0..n) against pattern p[0..m): '*' matches any run of
 * bytes. On a mismatch the last '*' takes one byte more (the classic
 * greedy matcher, linear in n for each star tried). */
static bool query_glob(const char *p, size_t m, const char *s, size_t n)
{
	size_t i = 0, j = 0, star = SIZE_MAX, from = 0;

	while (j < n) {
		if (i < m && p[i] == '*') {
			star = i++;
			from = j;
		} else if (i < m && p[i] == s[j]) {
			i++;
			j++;
		} else if (star != SIZE_MAX) {
			i = star + 1;
			j = ++from;
		} else {
			return false;
		}
	}
	while (i < m && p[i] == '*')
		i++;
	return i == m;
}

bool query_dropped(const struct query_rules *r, const char *name, size_t len)
{
	for (unsigned i = 0; i < r->ndrop; i++)
		if (query_glob(r->drop[i].p, r->drop[i].len, name, len))
			return true;
	return false;
}

/* Names of a and b in q, as memcmp orders them, a shorter name first. */
static int query_name_cmp(const char *q, const struct query_param *a, const struct query_param *b)
{
	size_t n = a->nlen < b->nlen ? a->nlen : b->nlen;
	int r = memcmp(q + a->off, q + b->off, n);

	if (r)
		return r;
	return (a->nlen > b->nlen) - (a->nlen < b->nlen);
}

ssize_t query_normalize(const struct query_rules *r, const char *q, size_t len, char *out)
{
	struct query_param par[QUERY_MAX_PARAMS];
	size_t np = 0, o = 0, i = 0;

	if (!query_rules_active(r))
		return -1;
	if (len > QUERY_TARGET_MAX)
		return -1;
	while (i <= len) {
		const char *amp = memchr(q + i, '&', len - i);
		size_t end = amp ? (size_t)(amp - q) : len;
		const char *eq;
		struct query_param p;

		if (end == i) {                 /* empty: nothing to keep */
			i = end + 1;
			continue;
		}
		eq = memchr(q + i, '=', end - i);
		p.off = (uint16_t)i;
		p.len = (uint16_t)(end - i);
		p.nlen = (uint16_t)(eq ? (size_t)(eq - q) - i : end - i);
		i = end + 1;
		if (query_dropped(r, q + p.off, p.nlen))
			continue;
		if (np == QUERY_MAX_PARAMS)
			return -1;
		if (r->mode == QUERY_SORTED) {
			/* after the last name not greater: stable */
			size_t lo = 0, hi = np;

			while (lo < hi) {
				size_t mid = lo + (hi - lo) / 2;

				if (query_name_cmp(q, &par[mid], &p) <= 0)
					lo = mid + 1;
				else
					hi = mid;
			}
			memmove(&par[lo + 1], &par[lo], (np - lo) * sizeof(par[0]));
			par[lo] = p;
		} else {
			par[np] = p;
		}
		np++;
	}
	for (size_t k = 0; k < np; k++) {
		if (k)
			out[o++] = '&';
		memcpy(out + o, q + par[k].off, par[k].len);
		o += par[k].len;
	}
	return (ssize_t)o;
}

bool query_apply(const struct query_rules *r, struct http1_msg *m, char *buf, struct query_sent *sent)
{
	size_t pre;
	ssize_t n;

	if (!m->has_query || !query_rules_active(r) || m->target.len > QUERY_TARGET_MAX)
		return false;
	/* the target up to its '?', then the query: the query is the
	 * target's last part in every form http1.c accepts */
	pre = (size_t)(m->query.p - m->target.p);
	n = query_normalize(r, m->query.p, m->query.len, buf + pre);
	/* unchanged: the same parameters in the same order ("?" alone
	 * changes: it goes) */
	if (n < 0 || (n > 0 && (size_t)n == m->query.len && memcmp(buf + pre, m->query.p, m->query.len) == 0))
		return false;
	memcpy(buf, m->target.p, pre);
	sent->target = m->target;
	sent->query = m->query;
	if (n == 0) {
		m->has_query = false;
		m->target = (struct http1_str){ buf, pre - 1 };
		m->query = (struct http1_str){ buf + pre, 0 };
	} else {
		m->target = (struct http1_str){ buf, pre + (size_t)n };
		m->query = (struct http1_str){ buf + pre, (size_t)n };
	}
	return true;
}

void query_restore(struct http1_msg *m, const struct query_sent *sent)
{
	if (!sent->target.p)
		return;
	m->target = sent->target;
	m->query = sent->query;
	m->has_query = true;
}
