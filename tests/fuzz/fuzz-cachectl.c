/*
 * fuzz-cachectl.c -- libFuzzer target for the cache's header rules
 * (cachectl.c): Cache-Control, Accept-Encoding, HTTP dates, the cache key
 * and conditional requests. Byte 0 picks the rule; each checks promises
 * that hold whatever the bytes:
 *
 *   - Cache-Control and Accept-Encoding: a list read the same whether its
 *     elements come on one line, one line each, or in upper case (RFC 9110
 *     5.3 and 5.6.1: a field's lines join with commas; names and codings
 *     are case-insensitive); every value bounded (0 to CACHECTL_DELTA_MAX,
 *     max-stale also -1), a value only with its flag; the request's
 *     decision follows its directives; a response's storability follows
 *     the same invariants as in fuzz-response;
 *   - Accept-Encoding normalisation is idempotent (the canonical string of
 *     a set reads back as that set), a subset of the four codings, and
 *     its string never outgrows the buffer it is given (ASan sees an
 *     exactly sized one);
 *   - dates: a date that parses has a year in 1..9999, formats to a
 *     29-byte IMF-fixdate that parses back to the same time and formats
 *     to the same bytes; a two-digit year lands within 50 years of now;
 *     any time in 0001..9999 survives format then parse;
 *   - the cache key is the lowercased host, the path and the query, and
 *     fits exactly the length it reports;
 *   - a conditional GET with If-None-Match ignores If-Modified-Since
 *     (RFC 9110 13.1.3), and "*" always matches.
 *
 * Input: byte 0 the rule (mod 5), byte 1..8 a time, then the text; list
 * elements are separated by '\n' in it.
 */
#include "http/cachectl.h"
#include "http/http1.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A broken promise: crash so libFuzzer keeps the input. */
#define FUZZ_CHECK(cond) do { if (!(cond)) __builtin_trap(); } while (0)

#define FUZZ_MAXH 40
#define FUZZ_ELEMS 16
#define FUZZ_ELEM_MAX 96

/* 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z: the times an
 * IMF-fixdate can say */
#define FUZZ_T_MIN INT64_C(-62135596800)
#define FUZZ_T_MAX INT64_C(253402300799)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fuzz_buf {
	char *p;
	size_t len, cap;
};

static void fuzz_put(struct fuzz_buf *b, const void *p, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n) * 2 + 64;
		b->p = realloc(b->p, b->cap);
	}
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void fuzz_puts(struct fuzz_buf *b, const char *s)
{
	fuzz_put(b, s, strlen(s));
}

/* A parsed message over its own copy of the bytes. */
struct fuzz_msg {
	struct fuzz_buf raw;
	struct http1_header h[FUZZ_MAXH];
	struct http1_msg m;
};

static bool fuzz_parse(struct fuzz_msg *x, bool response)
{
	static const struct http1_limits lim = { 1u << 16, FUZZ_MAXH };
	ssize_t r;

	http1_msg_init(&x->m);
	r = response ? http1_parse_response(&x->m, x->h, x->raw.p, x->raw.len, &lim, HTTP1_M_GET)
		     : http1_parse_request(&x->m, x->h, x->raw.p, x->raw.len, &lim);
	return r == (ssize_t)x->raw.len;
}

/* The list elements of the text: bytes a field value may hold, without
 * the list's own delimiters (',' and '"', which would join or split
 * elements differently on one line than on several). */
static size_t fuzz_elements(const uint8_t *p, size_t n, char el[][FUZZ_ELEM_MAX + 1])
{
	size_t ne = 0, len = 0;

	for (size_t i = 0; i <= n && ne < FUZZ_ELEMS; i++) {
		if (i == n || p[i] == '\n') {
			el[ne][len] = '\0';
			ne++;
			len = 0;
			continue;
		}
		if (((p[i] >= 0x20 && p[i] < 0x7f) || p[i] == '\t') && p[i] != ',' && p[i] != '"' &&
		    len < FUZZ_ELEM_MAX)
			el[ne][len++] = (char)p[i];
	}
	return ne;
}

static void fuzz_upper(char *s)
{
	for (; *s; s++)
		if (*s >= 'a' && *s <= 'z')
			*s = (char)(*s - 32);
}

/* Three requests (or responses) with field name over the elements: all
 * on one line, one line each, one line in upper case. */
static void fuzz_three(struct fuzz_msg x[3], const char *start, const char *field,
		       char el[][FUZZ_ELEM_MAX + 1], size_t ne, bool response)
{
	for (int k = 0; k < 3; k++) {
		memset(&x[k].raw, 0, sizeof(x[k].raw));
		fuzz_puts(&x[k].raw, start);
		if (k != 1) {
			fuzz_puts(&x[k].raw, field);
			fuzz_puts(&x[k].raw, ": ");
		}
		for (size_t i = 0; i < ne; i++) {
			char tmp[FUZZ_ELEM_MAX + 1];

			memcpy(tmp, el[i], sizeof(tmp));
			if (k == 2)
				fuzz_upper(tmp);
			if (k == 1) {
				fuzz_puts(&x[k].raw, field);
				fuzz_puts(&x[k].raw, ": ");
			} else if (i > 0) {
				fuzz_puts(&x[k].raw, ", ");
			}
			fuzz_puts(&x[k].raw, tmp);
			if (k == 1)
				fuzz_puts(&x[k].raw, "\r\n");
		}
		fuzz_puts(&x[k].raw, k == 1 ? "\r\n" : "\r\n\r\n");
		FUZZ_CHECK(fuzz_parse(&x[k], response));
	}
}

static void fuzz_free3(struct fuzz_msg x[3])
{
	for (int k = 0; k < 3; k++)
		free(x[k].raw.p);
}

static void fuzz_cc_bounds(const struct cachectl_cc *cc)
{
	FUZZ_CHECK((cc->flags & ~0x3fffu) == 0);
	FUZZ_CHECK(cc->max_age >= 0 && cc->max_age <= CACHECTL_DELTA_MAX);
	FUZZ_CHECK(cc->s_maxage >= 0 && cc->s_maxage <= CACHECTL_DELTA_MAX);
	FUZZ_CHECK(cc->min_fresh >= 0 && cc->min_fresh <= CACHECTL_DELTA_MAX);
	FUZZ_CHECK(cc->swr >= 0 && cc->swr <= CACHECTL_DELTA_MAX);
	FUZZ_CHECK(cc->sie >= 0 && cc->sie <= CACHECTL_DELTA_MAX);
	FUZZ_CHECK(cc->max_stale >= -1 && cc->max_stale <= CACHECTL_DELTA_MAX);
	FUZZ_CHECK(cc->max_age == 0 || (cc->flags & CACHECTL_MAX_AGE));
	FUZZ_CHECK(cc->s_maxage == 0 || (cc->flags & CACHECTL_S_MAXAGE));
	FUZZ_CHECK(cc->min_fresh == 0 || (cc->flags & CACHECTL_MIN_FRESH));
	FUZZ_CHECK(cc->max_stale == 0 || (cc->flags & CACHECTL_MAX_STALE));
	FUZZ_CHECK(cc->swr == 0 || (cc->flags & CACHECTL_SWR));
	FUZZ_CHECK(cc->sie == 0 || (cc->flags & CACHECTL_SIE));
}

static bool fuzz_cc_eq(const struct cachectl_cc *a, const struct cachectl_cc *b)
{
	return a->flags == b->flags && a->max_age == b->max_age && a->s_maxage == b->s_maxage &&
	       a->min_fresh == b->min_fresh && a->max_stale == b->max_stale &&
	       a->swr == b->swr && a->sie == b->sie;
}

static void fuzz_cache_control(const uint8_t *p, size_t n, int64_t now)
{
	char el[FUZZ_ELEMS][FUZZ_ELEM_MAX + 1];
	size_t ne = fuzz_elements(p, n, el);
	struct fuzz_msg q[3], r[3];
	struct cachectl_cc cc[3];
	struct cachectl_req rq;
	struct cachectl_meta meta;
	char date[32], start[128];

	/* as a request's directives */
	fuzz_three(q, "GET /t/1.jpg HTTP/1.1\r\nHost: h\r\n", "Cache-Control", el, ne, false);
	for (int k = 0; k < 3; k++) {
		cachectl_parse_cc(&q[k].m, &cc[k]);
		fuzz_cc_bounds(&cc[k]);
	}
	FUZZ_CHECK(fuzz_cc_eq(&cc[0], &cc[1]) && fuzz_cc_eq(&cc[0], &cc[2]));
	cachectl_request(&q[0].m, &rq);
	FUZZ_CHECK(rq.kind == ((cc[0].flags & CACHECTL_NO_CACHE) ||
			       ((cc[0].flags & CACHECTL_MAX_AGE) && cc[0].max_age == 0) ?
			       CACHECTL_REFRESH : CACHECTL_LOOKUP));
	FUZZ_CHECK(!!(rq.flags & CACHECTL_RQ_NO_STORE) == !!(cc[0].flags & CACHECTL_NO_STORE));

	/* as a response's, to a plain GET: storable only as RFC 9111 lets */
	cachectl_date_format(now, date);
	snprintf(start, sizeof(start), "HTTP/1.1 200 OK\r\nDate: %s\r\nContent-Length: 0\r\n", date);
	fuzz_three(r, start, "Cache-Control", el, ne, true);
	for (int k = 0; k < 3; k++) {
		struct cachectl_cc c;

		cachectl_parse_cc(&r[k].m, &c);
		FUZZ_CHECK(fuzz_cc_eq(&c, &cc[0]));
	}
	{
		struct fuzz_msg plain = { 0 };

		fuzz_puts(&plain.raw, "GET /t/1.jpg HTTP/1.1\r\nHost: h\r\n\r\n");
		FUZZ_CHECK(fuzz_parse(&plain, false));
		cachectl_request(&plain.m, &rq);
		free(plain.raw.p);
	}
	if (cachectl_response(&rq, HTTP1_M_GET, &r[0].m, now, now, 30, &meta)) {
		/* no-store only beside must-understand (the status is a 200,
		 * one it knows: RFC 9111 5.2.2.3); no-cache only qualified
		 * (no-cache="f": the rest is stored, f is not, 5.2.2.4), as
		 * the response has no validator to revalidate a plain one */
		FUZZ_CHECK(!(cc[0].flags & CACHECTL_PRIVATE));
		FUZZ_CHECK(!(cc[0].flags & CACHECTL_NO_STORE) || (cc[0].flags & CACHECTL_MUST_UNDERSTAND));
		FUZZ_CHECK(!(cc[0].flags & CACHECTL_NO_CACHE) || meta.omit.len > 0);
		FUZZ_CHECK(cc[0].flags & (CACHECTL_MAX_AGE | CACHECTL_S_MAXAGE));
		FUZZ_CHECK(meta.lifetime == ((cc[0].flags & CACHECTL_S_MAXAGE) ? cc[0].s_maxage
										 : cc[0].max_age));
		FUZZ_CHECK(meta.initial_age == 0 && meta.date == now);
		if (cc[0].flags & (CACHECTL_MUST_REVALIDATE | CACHECTL_PROXY_REVALIDATE |
				   CACHECTL_S_MAXAGE))
			FUZZ_CHECK(meta.swr == 0 && meta.sie == 0 && meta.lifetime > 0);
	} else {
		FUZZ_CHECK(meta.why != NULL);
	}
	fuzz_free3(q);
	fuzz_free3(r);
}

static void fuzz_accept_encoding(const uint8_t *p, size_t n)
{
	char el[FUZZ_ELEMS][FUZZ_ELEM_MAX + 1];
	size_t ne = fuzz_elements(p, n, el);
	struct fuzz_msg q[3], again = { 0 };
	unsigned set = 0;
	char canon[32];
	int len;

	fuzz_three(q, "GET /t/1.jpg HTTP/1.1\r\nHost: h\r\n", "Accept-Encoding", el, ne, false);
	for (int k = 0; k < 3; k++) {
		unsigned s = cachectl_ae(&q[k].m);

		FUZZ_CHECK((s & ~CACHECTL_AE_ALL) == 0);
		FUZZ_CHECK(k == 0 || s == set);
		set = s;
	}
	/* the canonical string: bounded, and never written past len */
	len = cachectl_ae_string(set, canon, sizeof(canon));
	FUZZ_CHECK(len >= 0 && len <= 23 && (size_t)len == strlen(canon));
	for (size_t cap = 0; cap < sizeof(canon); cap++) {
		char *b = malloc(cap ? cap : 1);
		int l2 = cachectl_ae_string(set, cap ? b : NULL, cap);

		FUZZ_CHECK(l2 == -1 || (l2 == len && memcmp(b, canon, (size_t)len + 1) == 0));
		FUZZ_CHECK(l2 == -1 || (size_t)len < cap);
		free(b);
	}
	/* idempotent: the canonical value reads back as the same set */
	fuzz_puts(&again.raw, "GET /t/1.jpg HTTP/1.1\r\nHost: h\r\nAccept-Encoding: ");
	fuzz_puts(&again.raw, canon);
	fuzz_puts(&again.raw, "\r\n\r\n");
	FUZZ_CHECK(fuzz_parse(&again, false));
	FUZZ_CHECK(cachectl_ae(&again.m) == set);
	free(again.raw.p);
	fuzz_free3(q);
}

static int64_t fuzz_year(int64_t t)
{
	time_t tt = (time_t)t;
	struct tm tm;

	FUZZ_CHECK(gmtime_r(&tt, &tm) != NULL);
	return (int64_t)tm.tm_year + 1900;
}

static void fuzz_dates(const uint8_t *p, size_t n, int64_t now, uint64_t seed)
{
	char *s = malloc(n ? n : 1), out[32], out2[32];
	struct http1_str str = { s, n };
	int64_t t, t2, t0;

	memcpy(s, p, n);        /* exactly sized: a read past it is caught */
	if (cachectl_date(str, now, &t) == 0) {
		FUZZ_CHECK(t >= FUZZ_T_MIN && t <= FUZZ_T_MAX);
		cachectl_date_format(t, out);
		FUZZ_CHECK(strlen(out) == 29);
		FUZZ_CHECK(cachectl_date((struct http1_str){ out, 29 }, now, &t2) == 0 && t2 == t);
		cachectl_date_format(t2, out2);
		FUZZ_CHECK(memcmp(out, out2, 30) == 0);
		/* RFC 850 (a day name longer than 3 before the comma): its
		 * two-digit year is not more than 50 years ahead of now, and
		 * less than 100 behind (a leap second on 31 December rolls
		 * into the next year: one more) */
		if (memchr(s, ',', n) != NULL && (const char *)memchr(s, ',', n) - s > 3) {
			int64_t y = fuzz_year(t), yn = fuzz_year(now);

			FUZZ_CHECK(y > yn - 50 && y <= yn + 51);
		}
	}
	/* any time in 0001..9999 survives format then parse */
	t0 = FUZZ_T_MIN + (int64_t)(seed % (uint64_t)(FUZZ_T_MAX - FUZZ_T_MIN));
	cachectl_date_format(t0, out);
	FUZZ_CHECK(strlen(out) == 29);
	FUZZ_CHECK(cachectl_date((struct http1_str){ out, 29 }, now, &t) == 0 && t == t0);
	free(s);
}

static void fuzz_key(const uint8_t *p, size_t n)
{
	struct fuzz_msg x = { 0 };
	static const struct http1_limits lim = { 1u << 16, FUZZ_MAXH };
	struct http1_str host;
	ssize_t r, k;
	char *b;

	fuzz_put(&x.raw, p, n);
	http1_msg_init(&x.m);
	r = http1_parse_request(&x.m, x.h, x.raw.p, x.raw.len, &lim);
	if (r <= 0)
		goto out;
	host = x.m.authority.len ? x.m.authority : x.m.host;
	k = cachectl_key(&x.m, NULL, 0);
	FUZZ_CHECK(k == -1 || (k == 0 && host.len == 0 && x.m.path.len == 0 && !x.m.has_query));
	b = malloc(n + 8);
	k = cachectl_key(&x.m, b, n + 8);
	FUZZ_CHECK(k >= 0 && (size_t)k == host.len + x.m.path.len + (x.m.has_query ? 1 + x.m.query.len : 0));
	for (size_t i = 0; i < host.len; i++)
		FUZZ_CHECK(b[i] == (host.p[i] >= 'A' && host.p[i] <= 'Z' ? host.p[i] + 32 : host.p[i]));
	FUZZ_CHECK(memcmp(b + host.len, x.m.path.p, x.m.path.len) == 0);
	if (x.m.has_query)
		FUZZ_CHECK(b[host.len + x.m.path.len] == '?' &&
			   memcmp(b + host.len + x.m.path.len + 1, x.m.query.p, x.m.query.len) == 0);
	free(b);
	/* exactly sized, and one byte short */
	b = malloc((size_t)k ? (size_t)k : 1);
	FUZZ_CHECK(cachectl_key(&x.m, b, (size_t)k) == k);
	if (k > 0)
		FUZZ_CHECK(cachectl_key(&x.m, b, (size_t)k - 1) == -1);
	free(b);
out:
	free(x.raw.p);
}

/* If-None-Match elements from the text, an If-Modified-Since from the
 * time, a stored response's validators from the seed. */
static void fuzz_conditional(const uint8_t *p, size_t n, int64_t now, uint64_t seed)
{
	char el[FUZZ_ELEMS][FUZZ_ELEM_MAX + 1], date[32];
	size_t ne = fuzz_elements(p, n, el);
	struct fuzz_msg with = { 0 }, without = { 0 }, ims = { 0 };
	static const char *const etags[] = { "\"a\"", "W/\"a\"", "\"b\"", "" };
	struct http1_str etag = { etags[seed % 4], strlen(etags[seed % 4]) };
	int64_t lm = (seed >> 2) % 4 == 0 ? -1 : now - (int64_t)((seed >> 4) % 200000);
	bool star = false;

	cachectl_date_format(now - 100000, date);
	/* the elements become quoted entity-tags, or "*" when one is "*" */
	for (int k = 0; k < 2; k++) {
		struct fuzz_msg *x = k ? &with : &without;

		fuzz_puts(&x->raw, "GET /t/1.jpg HTTP/1.1\r\nHost: h\r\nIf-None-Match: ");
		for (size_t i = 0; i < ne; i++) {
			if (i)
				fuzz_puts(&x->raw, ", ");
			if (strcmp(el[i], "*") == 0) {
				fuzz_puts(&x->raw, "*");
				star = true;
				continue;
			}
			if (el[i][0] == 'W')
				fuzz_puts(&x->raw, "W/");
			fuzz_puts(&x->raw, "\"");
			fuzz_puts(&x->raw, el[i] + (el[i][0] == 'W'));
			fuzz_puts(&x->raw, "\"");
		}
		fuzz_puts(&x->raw, "\r\n");
		if (k) {
			fuzz_puts(&x->raw, "If-Modified-Since: ");
			fuzz_puts(&x->raw, date);
			fuzz_puts(&x->raw, "\r\n");
		}
		fuzz_puts(&x->raw, "\r\n");
		if (!fuzz_parse(x, false))
			goto out;       /* OWS the parser trims differently: skip */
	}
	FUZZ_CHECK(cachectl_not_modified(&with.m, etag, lm, now) ==
		   cachectl_not_modified(&without.m, etag, lm, now));
	if (star)
		FUZZ_CHECK(cachectl_not_modified(&with.m, etag, lm, now));
	/* If-Modified-Since alone: 304 exactly when not modified since */
	fuzz_puts(&ims.raw, "GET /t/1.jpg HTTP/1.1\r\nHost: h\r\nIf-Modified-Since: ");
	fuzz_puts(&ims.raw, date);
	fuzz_puts(&ims.raw, "\r\n\r\n");
	FUZZ_CHECK(fuzz_parse(&ims, false));
	FUZZ_CHECK(cachectl_not_modified(&ims.m, etag, lm, now) == (lm >= 0 && lm <= now - 100000));
out:
	free(with.raw.p);
	free(without.raw.p);
	free(ims.raw.p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t seed = 0;
	int64_t now;

	if (size < 9)
		return 0;
	for (int i = 1; i < 9; i++)
		seed = seed << 8 | data[i];
	/* now: 1970 to 2106, as a clock may say */
	now = (int64_t)(seed >> 32);
	switch (data[0] % 5) {
	case 0:
		fuzz_cache_control(data + 9, size - 9, now);
		break;
	case 1:
		fuzz_accept_encoding(data + 9, size - 9);
		break;
	case 2:
		fuzz_dates(data + 9, size - 9, now, seed);
		break;
	case 3:
		fuzz_key(data + 9, size - 9);
		break;
	case 4:
		fuzz_conditional(data + 9, size - 9, now, seed);
		break;
	}
	return 0;
}
