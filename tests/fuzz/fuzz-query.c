/*
 * fuzz-query.c -- libFuzzer target for query normalisation (query.c):
 * from any bytes taken as a query, under each rule set below, the result
 * is never longer than the input, normalises to itself (idempotent), and
 * is the model's: the input's non-empty parameters whose names match no
 * pattern, in the order sent (as-is) or stably sorted by name (sorted),
 * built here the slow way. The same bytes as a request target, parsed by
 * http1.c, go through query_apply: the target stays one the codec
 * accepts and ends with the normalised query, the path untouched.
 *
 * Input: byte 0 picks the rules (low 2 bits: mode and whether the drop
 * list is set); the rest is the query, copied to an exactly sized malloc
 * so ASan catches any read past it.
 */
#include "http/http1.h"
#include "http/query.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CHECK(cond) do { if (!(cond)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fuzz_param {
	const char *p;
	size_t len, nlen, at;
};

static int fuzz_cmp(const void *x, const void *y)
{
	const struct fuzz_param *a = x, *b = y;
	int r = memcmp(a->p, b->p, a->nlen < b->nlen ? a->nlen : b->nlen);

	if (r)
		return r;
	if (a->nlen != b->nlen)
		return a->nlen < b->nlen ? -1 : 1;
	return a->at < b->at ? -1 : a->at > b->at;    /* stable */
}

/* The model: split, drop, sort, join; -1 past the limits. */
static ssize_t fuzz_model(const struct query_rules *r, const char *q, size_t len, char *out)
{
	struct fuzz_param *par = malloc((len + 1) * sizeof(*par));
	size_t np = 0, o = 0, i = 0;

	while (i <= len) {
		size_t end = i;

		while (end < len && q[end] != '&')
			end++;
		if (end > i) {
			size_t nl = 0;

			while (i + nl < end && q[i + nl] != '=')
				nl++;
			if (!query_dropped(r, q + i, nl)) {
				par[np] = (struct fuzz_param){ q + i, end - i, nl, np };
				np++;
			}
		}
		i = end + 1;
	}
	if (np > QUERY_MAX_PARAMS || len > QUERY_TARGET_MAX) {
		free(par);
		return -1;
	}
	if (r->mode == QUERY_SORTED)
		qsort(par, np, sizeof(*par), fuzz_cmp);
	for (size_t k = 0; k < np; k++) {
		if (k)
			out[o++] = '&';
		memcpy(out + o, par[k].p, par[k].len);
		o += par[k].len;
	}
	free(par);
	return (ssize_t)o;
}

static void fuzz_apply(const struct query_rules *r, const char *q, size_t len)
{
	static const struct http1_limits lim = { 1u << 20, 8 };
	struct http1_header h[8];
	struct http1_msg m;
	struct query_sent sent = { { NULL, 0 }, { NULL, 0 } };
	size_t hl = 7 + len + 25;
	char *head = malloc(hl), *buf = malloc(QUERY_TARGET_MAX);
	struct http1_str path;
	int n;

	memcpy(head, "GET /p?", 7);
	memcpy(head + 7, q, len);
	n = snprintf(head + 7 + len, 26, " HTTP/1.1\r\nHost: h\r\n\r\n");
	http1_msg_init(&m);
	if (http1_parse_request(&m, h, head, 7 + len + (size_t)n, &lim) > 0) {
		struct http1_str target = m.target;

		path = m.path;
		if (query_apply(r, &m, buf, &sent)) {
			FUZZ_CHECK(m.path.p == path.p && m.path.len == path.len);
			FUZZ_CHECK(m.target.len < target.len || memcmp(m.target.p, target.p, target.len) != 0);
			FUZZ_CHECK(m.target.len <= target.len && memcmp(m.target.p, "/p", 2) == 0);
			FUZZ_CHECK(m.has_query ? m.target.len == 3 + m.query.len && m.target.p[2] == '?'
					       : m.target.len == 2);
			FUZZ_CHECK(sent.target.p == target.p && sent.target.len == target.len);
		} else {
			FUZZ_CHECK(m.target.p == target.p && m.target.len == target.len && sent.target.p == NULL);
		}
	}
	free(head);
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char drop[] = "utm_*, fbclid, *id, a*b*c, =";
	struct query_rules r;
	char err[160], *q, *out, *again, *want;
	ssize_t n, m, w;
	size_t len;

	if (size < 1)
		return 0;
	memset(&r, 0, sizeof(r));
	r.mode = data[0] & 1 ? QUERY_SORTED : QUERY_AS_IS;
	/* the last pattern is refused: the others are the rules */
	FUZZ_CHECK(query_rules_parse(&r, drop, err, sizeof(err)) < 0);
	FUZZ_CHECK(query_rules_parse(&r, data[0] & 2 ? "utm_*, fbclid, *id, a*b*c" : "", err, sizeof(err)) == 0);
	len = size - 1;
	q = malloc(len ? len : 1);
	memcpy(q, data + 1, len);
	out = malloc(len ? len : 1);
	again = malloc(len ? len : 1);
	want = malloc(len + 1);
	n = query_normalize(&r, q, len, out);
	if (!query_rules_active(&r)) {
		FUZZ_CHECK(n == -1);
	} else {
		w = fuzz_model(&r, q, len, want);
		FUZZ_CHECK(n == w);
		if (n >= 0) {
			FUZZ_CHECK((size_t)n <= len && memcmp(out, want, (size_t)n) == 0);
			m = query_normalize(&r, out, (size_t)n, again);
			FUZZ_CHECK(m == n && memcmp(again, out, (size_t)n) == 0);
		}
	}
	fuzz_apply(&r, q, len);
	free(q);
	free(out);
	free(again);
	free(want);
	return 0;
}
