/*
 * cachectl.c -- RFC 9111's rules for a shared cache over parsed heads (see
 * cachectl.h). Every decision is a function of the heads and the times
 * the caller passes; nothing here keeps state, so the unit test can pin
 * each rule with a table of messages and exact outcomes.
 *
 * Where the RFC lets a cache choose, this file takes the conservative
 * side: a qualified private="..." is treated as the unqualified directive
 * (RFC 9111 5.2.2.7 allows storing the rest; we store nothing), heuristic
 * freshness (4.2.2) is bounded by the caller's cap, a response with Set-Cookie is
 * never stored (another client would get the cookie), and the deprecated
 * Pragma header is not read.
 */
#include "http/cachectl.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/decfmt.h"

static unsigned char cachectl_lower(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : c;
}

/* Whether [p, p + n) starts with the lowercase s, ignoring case. */
static bool cachectl_prefix(const char *p, size_t n, const char *s)
{
	size_t l = strlen(s), i;

	if (n < l)
		return false;
	for (i = 0; i < l; i++)
		if (cachectl_lower((unsigned char)p[i]) != (unsigned char)s[i])
			return false;
	return true;
}

static bool cachectl_is_ows(char c)
{
	return c == ' ' || c == '\t';
}

/*
 * Next element of a comma-separated list in [*pp, e), with OWS trimmed
 * and a quoted string kept whole even if it holds commas; empty elements
 * (",,") are skipped. False at the end. A backslash inside quotes escapes
 * the next byte in a quoted-string (RFC 9110 5.6.4), but is a byte like
 * any other in an entity-tag (8.8.3: no quoted-pair there), whose list
 * cachectl_next_etag reads.
 */
bool cachectl_list_next(const char **pp, const char *e, struct http1_str *out,
			bool escapes)
{
	const char *p = *pp, *s, *t;
	bool quoted = false;

	for (;;) {
		while (p < e && (cachectl_is_ows(*p) || *p == ','))
			p++;
		if (p >= e) {
			*pp = p;
			return false;
		}
		s = p;
		while (p < e && (quoted || *p != ',')) {
			if (*p == '"')
				quoted = !quoted;
			else if (*p == '\\' && quoted && escapes && p + 1 < e)
				p++;
			p++;
		}
		t = p;
		while (t > s && cachectl_is_ows(t[-1]))
			t--;
		if (t > s)
			break;
	}
	*pp = p;
	out->p = s;
	out->len = (size_t)(t - s);
	return true;
}

static bool cachectl_next(const char **pp, const char *e, struct http1_str *out)
{
	return cachectl_list_next(pp, e, out, true);
}

static bool cachectl_next_etag(const char **pp, const char *e, struct http1_str *out)
{
	return cachectl_list_next(pp, e, out, false);
}

/* Split "name=value" (value maybe quoted) into its parts; value.p is NULL
 * when there is no '='. Quotes are removed, escapes are not undone (no
 * directive we read has a backslash in a valid value). */
static void cachectl_split(struct http1_str el, struct http1_str *name,
			   struct http1_str *value)
{
	const char *p = el.p, *e = el.p + el.len, *q;

	q = memchr(p, '=', el.len);
	value->p = NULL;
	value->len = 0;
	if (q == NULL) {
		name->p = p;
		name->len = el.len;
		return;
	}
	name->p = p;
	name->len = (size_t)(q - p);
	while (name->len > 0 && cachectl_is_ows(p[name->len - 1]))
		name->len--;
	q++;
	while (q < e && cachectl_is_ows(*q))
		q++;
	if (q < e && *q == '"' && e - q >= 2 && e[-1] == '"') {
		q++;
		e--;
	}
	value->p = q;
	value->len = (size_t)(e - q);
}

/* delta-seconds (RFC 9111 1.2.2): digits only; malformed reads as 0, too
 * large as CACHECTL_DELTA_MAX. */
static int64_t cachectl_delta(struct http1_str v)
{
	int64_t n = 0;
	size_t i;

	if (v.p == NULL || v.len == 0)
		return 0;
	for (i = 0; i < v.len; i++) {
		if (v.p[i] < '0' || v.p[i] > '9')
			return 0;
		n = n * 10 + (v.p[i] - '0');
		if (n > CACHECTL_DELTA_MAX)
			n = CACHECTL_DELTA_MAX;
	}
	return n;
}

/* Directives without a value, and those with one, by name. */
static const struct {
	const char *name;
	unsigned flag;
	size_t off;             /* offset of the value in cachectl_cc, or 0 */
} cachectl_dirs[] = {
	{ "no-store", CACHECTL_NO_STORE, 0 },
	{ "no-cache", CACHECTL_NO_CACHE, 0 },
	{ "private", CACHECTL_PRIVATE, 0 },
	{ "public", CACHECTL_PUBLIC, 0 },
	{ "must-revalidate", CACHECTL_MUST_REVALIDATE, 0 },
	{ "proxy-revalidate", CACHECTL_PROXY_REVALIDATE, 0 },
	{ "only-if-cached", CACHECTL_ONLY_IF_CACHED, 0 },
	{ "no-transform", CACHECTL_NO_TRANSFORM, 0 },
	{ "must-understand", CACHECTL_MUST_UNDERSTAND, 0 },
	{ "max-age", CACHECTL_MAX_AGE, offsetof(struct cachectl_cc, max_age) },
	{ "s-maxage", CACHECTL_S_MAXAGE, offsetof(struct cachectl_cc, s_maxage) },
	{ "min-fresh", CACHECTL_MIN_FRESH, offsetof(struct cachectl_cc, min_fresh) },
	{ "max-stale", CACHECTL_MAX_STALE, offsetof(struct cachectl_cc, max_stale) },
	{ "stale-while-revalidate", CACHECTL_SWR, offsetof(struct cachectl_cc, swr) },
	{ "stale-if-error", CACHECTL_SIE, offsetof(struct cachectl_cc, sie) },
};

static void cachectl_directive(struct cachectl_cc *cc, struct http1_str el)
{
	struct http1_str name, value;
	size_t i;

	cachectl_split(el, &name, &value);
	for (i = 0; i < sizeof(cachectl_dirs) / sizeof(cachectl_dirs[0]); i++) {
		if (!http1_str_ieq(name, cachectl_dirs[i].name))
			continue;
		if (cc->flags & cachectl_dirs[i].flag)
			return;         /* the first occurrence counts */
		cc->flags |= cachectl_dirs[i].flag;
		if (cachectl_dirs[i].off != 0) {
			int64_t *v = (int64_t *)((char *)cc + cachectl_dirs[i].off);

			/* max-stale alone accepts any staleness */
			if (cachectl_dirs[i].flag == CACHECTL_MAX_STALE && value.p == NULL)
				*v = -1;
			else
				*v = cachectl_delta(value);
		}
		return;
	}
}

/* Whether header name n is name, in any case on either side (the
 * operator's target_field is spelled as the config has it). */
static bool cachectl_name_is(struct http1_str n, const char *name)
{
	return strlen(name) == n.len && strncasecmp(n.p, name, n.len) == 0;
}

/* ---- targeted fields as Structured Field Dictionaries ------------------ */

/*
 * RFC 9213 2.1: a targeted field (CDN-Cache-Control, the operator's
 * target_field) is a Dictionary (RFC 8941 3.2), parsed as RFC 8941 4.2
 * says, its directives typed as RFC 9213 infers them: max-age, s-maxage,
 * stale-while-revalidate and stale-if-error a non-negative Integer;
 * private and no-cache true or a String (the qualified form); the others
 * RFC 9111 names true. A value that does not parse, or a known directive
 * of another type, makes the whole field ignored (RFC 9213 2.1: "as if
 * the field were not present"), so Cache-Control rules. Each field line
 * is parsed as a Dictionary of its own (RFC 8941 joins lines with ", ",
 * which only a string spanning two lines would tell apart). A key given
 * twice takes its last value (RFC 8941 4.2.2).
 */

enum cachectl_sf_type { CACHECTL_SF_NONE, CACHECTL_SF_INT, CACHECTL_SF_DEC, CACHECTL_SF_STR,
			CACHECTL_SF_TOKEN, CACHECTL_SF_BIN, CACHECTL_SF_BOOL, CACHECTL_SF_LIST };

static bool cachectl_sf_lcalpha(char c)
{
	return c >= 'a' && c <= 'z';
}

static bool cachectl_sf_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* tchar (RFC 9110 5.6.2) */
static bool cachectl_sf_tchar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || cachectl_sf_digit(c) ||
	       (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* A key (RFC 8941 3.1.2) at *pp; false if none. */
static bool cachectl_sf_key(const char **pp, const char *e, struct http1_str *key)
{
	const char *p = *pp;

	if (p >= e || !(cachectl_sf_lcalpha(*p) || *p == '*'))
		return false;
	for (p++; p < e && (cachectl_sf_lcalpha(*p) || cachectl_sf_digit(*p) || (*p && strchr("_-.*", *p))); p++)
		;
	key->p = *pp;
	key->len = (size_t)(p - *pp);
	*pp = p;
	return true;
}

/* A bare item (RFC 8941 4.2.3.1) at *pp: its type, its text in *v (a
 * string's without its quotes), or CACHECTL_SF_NONE if it does not parse. */
static enum cachectl_sf_type cachectl_sf_bare(const char **pp, const char *e, struct http1_str *v)
{
	const char *p = *pp, *s = p;
	enum cachectl_sf_type t = CACHECTL_SF_NONE;

	if (p >= e)
		return CACHECTL_SF_NONE;
	if (*p == '-' || cachectl_sf_digit(*p)) {
		size_t nd = 0, nf = 0;

		if (*p == '-')
			p++;
		for (; p < e && cachectl_sf_digit(*p); p++)
			nd++;
		t = CACHECTL_SF_INT;
		if (p < e && *p == '.') {
			t = CACHECTL_SF_DEC;
			for (p++; p < e && cachectl_sf_digit(*p); p++)
				nf++;
			if (nd > 12 || nf == 0 || nf > 3)
				return CACHECTL_SF_NONE;
		}
		if (nd == 0 || nd > 15)
			return CACHECTL_SF_NONE;
	} else if (*p == '"') {
		for (p++, s = p; p < e && *p != '"'; p++) {
			if (*p == '\\' && (p + 1 >= e || (p[1] != '"' && p[1] != '\\')))
				return CACHECTL_SF_NONE;
			if (*p == '\\')
				p++;
			else if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
				return CACHECTL_SF_NONE;
		}
		if (p >= e)
			return CACHECTL_SF_NONE;
		v->p = s;
		v->len = (size_t)(p - s);
		*pp = p + 1;
		return CACHECTL_SF_STR;
	} else if (*p == '*' || (*p >= 'A' && *p <= 'Z') || cachectl_sf_lcalpha(*p)) {
		for (p++; p < e && (cachectl_sf_tchar(*p) || *p == ':' || *p == '/'); p++)
			;
		t = CACHECTL_SF_TOKEN;
	} else if (*p == ':') {
		for (p++; p < e && ((cachectl_sf_tchar(*p) && !strchr("!#$%&'*-.^_`|~", *p)) || (*p && strchr("+/=", *p))); p++)
			;
		if (p >= e || *p != ':')
			return CACHECTL_SF_NONE;
		p++;
		t = CACHECTL_SF_BIN;
	} else if (*p == '?') {
		if (e - p < 2 || (p[1] != '0' && p[1] != '1'))
			return CACHECTL_SF_NONE;
		p += 2;
		t = CACHECTL_SF_BOOL;
	}
	v->p = s;
	v->len = (size_t)(p - s);
	*pp = p;
	return t;
}

/* Parameters (RFC 8941 4.2.3.2) at *pp: false if they do not parse. */
static bool cachectl_sf_params(const char **pp, const char *e)
{
	const char *p = *pp;

	while (p < e && *p == ';') {
		struct http1_str k, v;

		for (p++; p < e && *p == ' '; p++)
			;
		if (!cachectl_sf_key(&p, e, &k))
			return false;
		if (p < e && *p == '=') {
			p++;
			if (cachectl_sf_bare(&p, e, &v) == CACHECTL_SF_NONE)
				return false;
		}
	}
	*pp = p;
	return true;
}

/* A member's value after '=' (RFC 8941 4.2.1.1: an item or an inner
 * list) at *pp, parameters included; its type, and its bare item in *v. */
static enum cachectl_sf_type cachectl_sf_value(const char **pp, const char *e, struct http1_str *v)
{
	const char *p = *pp;
	enum cachectl_sf_type t;

	if (p < e && *p == '(') {
		for (p++;;) {
			while (p < e && *p == ' ')
				p++;
			if (p < e && *p == ')') {
				p++;
				break;
			}
			if (cachectl_sf_bare(&p, e, v) == CACHECTL_SF_NONE || !cachectl_sf_params(&p, e))
				return CACHECTL_SF_NONE;
			if (p >= e || (*p != ' ' && *p != ')'))
				return CACHECTL_SF_NONE;
		}
		t = CACHECTL_SF_LIST;
	} else if ((t = cachectl_sf_bare(&p, e, v)) == CACHECTL_SF_NONE) {
		return CACHECTL_SF_NONE;
	}
	if (!cachectl_sf_params(&p, e))
		return CACHECTL_SF_NONE;
	*pp = p;
	return t;
}

/* Whether the directive called key may have a value of type t (RFC
 * 9213 2.1); an unknown directive may have any. */
static bool cachectl_sf_typed(struct http1_str key, enum cachectl_sf_type t, struct http1_str v)
{
	size_t i;

	for (i = 0; i < sizeof(cachectl_dirs) / sizeof(cachectl_dirs[0]); i++) {
		if (!http1_str_ieq(key, cachectl_dirs[i].name))
			continue;
		if (cachectl_dirs[i].off != 0)
			return t == CACHECTL_SF_INT && v.p[0] != '-';
		if (cachectl_dirs[i].flag == CACHECTL_PRIVATE || cachectl_dirs[i].flag == CACHECTL_NO_CACHE)
			return t == CACHECTL_SF_BOOL || t == CACHECTL_SF_STR;
		return t == CACHECTL_SF_BOOL;
	}
	return true;
}

/* A directive met again in a Dictionary: its last value counts (RFC
 * 8941 4.2.2), so the earlier one is forgotten. */
static void cachectl_sf_forget(struct cachectl_cc *cc, struct http1_str key)
{
	size_t i;

	for (i = 0; i < sizeof(cachectl_dirs) / sizeof(cachectl_dirs[0]); i++)
		if (http1_str_ieq(key, cachectl_dirs[i].name))
			cc->flags &= ~cachectl_dirs[i].flag;
}

/* One line of a targeted field into cc; false when it is not a
 * Dictionary of well-typed directives (cc then holds part of it). */
static bool cachectl_sf_line(struct http1_str line, struct cachectl_cc *cc)
{
	const char *p = line.p, *e = line.p + line.len;

	while (p < e && *p == ' ')
		p++;
	while (e > p && e[-1] == ' ')
		e--;
	for (;;) {
		struct http1_str key, v = { "?1", 2 }, el;
		enum cachectl_sf_type t = CACHECTL_SF_BOOL;

		if (!cachectl_sf_key(&p, e, &key))
			return false;
		el = key;
		if (p < e && *p == '=') {
			p++;
			t = cachectl_sf_value(&p, e, &v);
			/* as Cache-Control writes it: name=value, a
			 * string with its quotes */
			if (t == CACHECTL_SF_INT || t == CACHECTL_SF_STR)
				el.len = (size_t)(v.p + v.len + (t == CACHECTL_SF_STR) - key.p);
		} else if (!cachectl_sf_params(&p, e)) {
			t = CACHECTL_SF_NONE;
		}
		if (t == CACHECTL_SF_NONE || !cachectl_sf_typed(key, t, v))
			return false;
		cachectl_sf_forget(cc, key);
		/* a Boolean false is as if the directive were not there */
		if (!(t == CACHECTL_SF_BOOL && v.p[1] == '0'))
			cachectl_directive(cc, el);
		while (p < e && cachectl_is_ows(*p))
			p++;
		if (p == e)
			return true;
		if (*p++ != ',')
			return false;
		while (p < e && cachectl_is_ows(*p))
			p++;
		if (p == e)
			return false;   /* a trailing comma */
	}
}

/* A targeted field as a Dictionary: every line of name into cc. Returns
 * whether some line had a value, and false (cc empty) when a line does
 * not parse: the field is then ignored. */
static bool cachectl_parse_sf(const struct http1_msg *m, const char *name, struct cachectl_cc *cc)
{
	bool any = false;
	unsigned i;

	memset(cc, 0, sizeof(*cc));
	for (i = 0; i < m->nheaders; i++) {
		const struct http1_header *h = &m->headers[i];

		if (!cachectl_name_is(h->name, name) || h->value.len == 0)
			continue;
		if (!cachectl_sf_line(h->value, cc)) {
			memset(cc, 0, sizeof(*cc));
			return false;
		}
		any = true;
	}
	return any;
}

/* Parse every line of field name into cc: a directive given twice keeps
 * its first value (RFC 9111 4.2.1). surrogate: Surrogate-Control, whose
 * directive names its device after a ';' ("max-age=3600;ringproxy"):
 * ours (CACHECTL_SURROGATE_DEVICE, the name a fill advertises in
 * Surrogate-Capability) or none applies, another is not for us.
 * Returns whether some line had a non-empty value. */
static bool cachectl_parse_field(const struct http1_msg *m, const char *name,
				 bool surrogate, struct cachectl_cc *cc)
{
	bool any = false;
	unsigned i;

	/* a targeted field but Surrogate-Control is a Dictionary */
	if (!surrogate && strcasecmp(name, "cache-control") != 0)
		return cachectl_parse_sf(m, name, cc);
	memset(cc, 0, sizeof(*cc));
	for (i = 0; i < m->nheaders; i++) {
		const struct http1_header *h = &m->headers[i];
		const char *p = h->value.p, *e = p + h->value.len;
		struct http1_str el;

		if (!cachectl_name_is(h->name, name))
			continue;
		while (cachectl_next(&p, e, &el)) {
			const char *semi = surrogate ? memchr(el.p, ';', el.len) : NULL;

			any = true;
			if (semi != NULL) {
				struct http1_str dev = { semi + 1, (size_t)(el.p + el.len - semi - 1) };

				if (!http1_str_ieq(dev, CACHECTL_SURROGATE_DEVICE))
					continue;
				el.len = (size_t)(semi - el.p);
			}
			cachectl_directive(cc, el);
		}
	}
	return any;
}

void cachectl_parse_cc(const struct http1_msg *m, struct cachectl_cc *cc)
{
	cachectl_parse_field(m, "cache-control", false, cc);
}

/* The first header called name (lowercase), or NULL. */
static const struct http1_header *cachectl_header(const struct http1_msg *m,
						  const char *name)
{
	unsigned i;

	for (i = 0; i < m->nheaders; i++)
		if (http1_str_ieq(m->headers[i].name, name))
			return &m->headers[i];
	return NULL;
}

/* ---- Accept-Encoding -------------------------------------------------- */

static const struct {
	const char *name;
	size_t len;
	unsigned bit;
} cachectl_codings[] = {
	{ "br", 2, CACHECTL_AE_BR },
	{ "deflate", 7, CACHECTL_AE_DEFLATE },
	{ "gzip", 4, CACHECTL_AE_GZIP },
	{ "zstd", 4, CACHECTL_AE_ZSTD },
	{ "x-gzip", 6, CACHECTL_AE_GZIP },
};

/* A known coding's bit, CACHECTL_AE_ALL + 1 for "*", 0 for any other. */
static unsigned cachectl_coding(struct http1_str name)
{
	size_t i;

	if (name.len == 1 && name.p[0] == '*')
		return CACHECTL_AE_ALL + 1;
	for (i = 0; i < sizeof(cachectl_codings) / sizeof(cachectl_codings[0]); i++)
		if (name.len == cachectl_codings[i].len
		    && http1_str_ieq(name, cachectl_codings[i].name))
			return cachectl_codings[i].bit;
	return 0;
}

/* An Accept-Encoding element "coding[;q=v][;...]": its coding, and
 * whether its weight is zero (q=0, 0., 0.0, 0.00, 0.000). */
static struct http1_str cachectl_weight(struct http1_str el, bool *zero)
{
	const char *p = el.p, *e = el.p + el.len, *semi;
	struct http1_str name = el;

	*zero = false;
	semi = memchr(p, ';', el.len);
	if (semi == NULL)
		return name;
	name.len = (size_t)(semi - p);
	while (name.len > 0 && cachectl_is_ows(p[name.len - 1]))
		name.len--;
	for (p = semi + 1; p < e; p++) {
		const char *v;

		while (p < e && (cachectl_is_ows(*p) || *p == ';'))
			p++;
		if (e - p < 2 || cachectl_lower((unsigned char)p[0]) != 'q' || p[1] != '=')
			continue;
		v = p + 2;
		if (v < e && *v == '0') {
			v++;
			if (v < e && *v == '.')
				for (v++; v < e && *v == '0'; v++)
					;
			*zero = (v == e || cachectl_is_ows(*v) || *v == ';');
		}
		break;
	}
	return name;
}

/* What Accept-Encoding lines say so far: the codings accepted, refused,
 * and "*" with its weight. */
struct cachectl_aeacc {
	unsigned yes, no;
	bool star, star_zero;
};

static void cachectl_ae_line(struct cachectl_aeacc *a, struct http1_str v)
{
	const char *p = v.p, *e = p + v.len;
	struct http1_str el;

	while (cachectl_next(&p, e, &el)) {
		bool zero;
		unsigned bit = cachectl_coding(cachectl_weight(el, &zero));

		if (bit == CACHECTL_AE_ALL + 1) {
			a->star = true;
			a->star_zero = zero;
		} else if (zero) {
			a->no |= bit;
		} else {
			a->yes |= bit;
		}
	}
}

static unsigned cachectl_ae_set(const struct cachectl_aeacc *a)
{
	/* a coding named with q=0 and also with q>0 is taken as accepted */
	if (a->star && !a->star_zero)
		return a->yes | (CACHECTL_AE_ALL & ~a->no);
	return a->yes;
}

unsigned cachectl_ae(const struct http1_msg *req)
{
	struct cachectl_aeacc a = { 0, 0, false, false };
	unsigned i;

	for (i = 0; i < req->nheaders; i++)
		if (http1_str_ieq(req->headers[i].name, "accept-encoding"))
			cachectl_ae_line(&a, req->headers[i].value);
	return cachectl_ae_set(&a);
}

int cachectl_ae_string(unsigned set, char *buf, size_t len)
{
	size_t n = 0, i, l;

	for (i = 0; i < 4; i++) {
		if (!(set & cachectl_codings[i].bit))
			continue;
		l = strlen(cachectl_codings[i].name);
		if (n + l + 3 > len)
			return -1;
		if (n > 0) {
			memcpy(buf + n, ", ", 2);
			n += 2;
		}
		memcpy(buf + n, cachectl_codings[i].name, l);
		n += l;
	}
	if (len == 0)
		return -1;
	buf[n] = '\0';
	return (int)n;
}

/* The canonical request line of each set, indexed by it (bits in
 * cachectl_ae_string's order): a table, so a miss writes it without
 * formatting. */
#define CACHECTL_LINE(s) { s, sizeof(s) - 1 }
static const struct http1_str cachectl_ae_lines[CACHECTL_AE_ALL + 1] = {
	CACHECTL_LINE("Accept-Encoding: identity\r\n"),
	CACHECTL_LINE("Accept-Encoding: br\r\n"),
	CACHECTL_LINE("Accept-Encoding: deflate\r\n"),
	CACHECTL_LINE("Accept-Encoding: br, deflate\r\n"),
	CACHECTL_LINE("Accept-Encoding: gzip\r\n"),
	CACHECTL_LINE("Accept-Encoding: br, gzip\r\n"),
	CACHECTL_LINE("Accept-Encoding: deflate, gzip\r\n"),
	CACHECTL_LINE("Accept-Encoding: br, deflate, gzip\r\n"),
	CACHECTL_LINE("Accept-Encoding: zstd\r\n"),
	CACHECTL_LINE("Accept-Encoding: br, zstd\r\n"),
	CACHECTL_LINE("Accept-Encoding: deflate, zstd\r\n"),
	CACHECTL_LINE("Accept-Encoding: br, deflate, zstd\r\n"),
	CACHECTL_LINE("Accept-Encoding: gzip, zstd\r\n"),
	CACHECTL_LINE("Accept-Encoding: br, gzip, zstd\r\n"),
	CACHECTL_LINE("Accept-Encoding: deflate, gzip, zstd\r\n"),
	CACHECTL_LINE("Accept-Encoding: br, deflate, gzip, zstd\r\n"),
};

#undef CACHECTL_LINE

struct http1_str cachectl_ae_header(unsigned set)
{
	return cachectl_ae_lines[set & CACHECTL_AE_ALL];
}

/* ---- requests --------------------------------------------------------- */

/* A GET's Range (RFC 9110 14.1.2): one byte range, "bytes=a-b", "a-" or
 * "-n", into out (CACHECTL_RQ_RANGE: answered from a stored complete
 * response, never stored, CACHECTL_RQ_NO_STORE). false for anything else
 * (another unit, several ranges, a malformed one), forwarded as it is. */
static bool cachectl_request_range(struct http1_str v, struct cachectl_req *out)
{
	const char *p = v.p, *e = v.p + v.len;
	int64_t n[2] = { -1, -1 };

	if (!(out->flags & CACHECTL_RQ_HEAD) && v.len > 6 && cachectl_prefix(p, v.len, "bytes=")) {
		p += 6;
		for (int k = 0; k < 2; k++) {
			const char *s = p;

			for (; p < e && *p >= '0' && *p <= '9' && p - s < 18; p++)
				n[k] = (n[k] < 0 ? 0 : n[k] * 10) + (*p - '0');
			if (p < e && *p >= '0' && *p <= '9')
				return false;   /* past any body we hold */
			if (k == 0 && (p == e || *p++ != '-'))
				return false;
		}
		if (p != e || (n[0] < 0 && n[1] < 0) || (n[1] >= 0 && n[0] > n[1]))
			return false;
		out->flags |= CACHECTL_RQ_RANGE | CACHECTL_RQ_NO_STORE;
		out->range_first = n[0];
		out->range_last = n[1];
		return true;
	}
	return false;
}

void cachectl_request(const struct http1_msg *req, struct cachectl_req *out)
{
	struct cachectl_aeacc a = { 0, 0, false, false };
	struct cachectl_cc cc;
	const struct http1_header *range = NULL;
	bool auth = false, ranges = false;
	unsigned i;

	memset(out, 0, sizeof(*out));
	out->max_age = -1;
	switch (req->method_id) {
	case HTTP1_M_GET:
		break;
	case HTTP1_M_HEAD:
		out->flags |= CACHECTL_RQ_HEAD;
		break;
	case HTTP1_M_POST:
	case HTTP1_M_PUT:
	case HTTP1_M_DELETE:
	case HTTP1_M_PATCH:
	case HTTP1_M_OTHER:
		out->kind = CACHECTL_INVALIDATE;
		out->why = "unsafe method";
		return;
	default:
		out->why = "method not cached";
		return;
	}
	/* a GET with a body (RFC 9110 9.3.1 gives it no meaning) goes to
	 * the backend with it, but its answer is keyed by the URL alone:
	 * stored, it would serve what the body asked for to everyone
	 * (fat-GET poisoning). Such requests bypass the cache instead:
	 * neither served from it, nor stored, nor coalesced */
	if (req->framing == HTTP1_BODY_CHUNKED ||
	    (req->framing == HTTP1_BODY_LENGTH && req->content_length > 0)) {
		out->why = "request body";
		return;
	}
	/* no Host (HTTP/1.0) or an empty one: the backend gets its URL's
	 * host or an empty Host, chosen per backend after the lookup, so
	 * no one key names what was fetched */
	if (req->authority.len == 0 && req->host.len == 0) {
		out->why = "no Host";
		return;
	}
	/* one pass over the header lines (this runs on every cacheable
	 * request, hit or miss): the names' lengths tell most apart */
	memset(&cc, 0, sizeof(cc));
	for (i = 0; i < req->nheaders; i++) {
		const struct http1_header *h = &req->headers[i];

		switch (h->name.len) {
		case 5:
			if (http1_str_ieq(h->name, "range")) {
				ranges = range != NULL;
				range = h;
			}
			break;
		case 13:
			if (http1_str_ieq(h->name, "authorization")) {
				auth = true;
			} else if (http1_str_ieq(h->name, "if-none-match")) {
				out->flags |= CACHECTL_RQ_COND;
			} else if (http1_str_ieq(h->name, "cache-control")) {
				const char *p = h->value.p, *e = p + h->value.len;
				struct http1_str el;

				while (cachectl_next(&p, e, &el))
					cachectl_directive(&cc, el);
			}
			break;
		case 15:
			if (http1_str_ieq(h->name, "accept-encoding"))
				cachectl_ae_line(&a, h->value);
			break;
		case 17:
			if (http1_str_ieq(h->name, "if-modified-since"))
				out->flags |= CACHECTL_RQ_COND;
			break;
		default:
			break;
		}
	}
	if (range != NULL && (ranges || !cachectl_request_range(range->value, out))) {
		out->why = "Range";
		return;
	}
	if (auth)
		out->flags |= CACHECTL_RQ_AUTH;
	if (cc.flags & CACHECTL_NO_STORE)
		out->flags |= CACHECTL_RQ_NO_STORE;
	if (cc.flags & CACHECTL_MIN_FRESH)
		out->min_fresh = cc.min_fresh;
	out->ae = cachectl_ae_set(&a);
	out->kind = CACHECTL_LOOKUP;
	if (cc.flags & CACHECTL_NO_CACHE) {
		out->kind = CACHECTL_REFRESH;
		out->why = "request no-cache";
	} else if (cc.flags & CACHECTL_MAX_AGE) {
		out->max_age = cc.max_age;
		if (cc.max_age == 0) {
			out->kind = CACHECTL_REFRESH;
			out->why = "request max-age=0";
		}
	}
}

/* A request's freshness directives are the client's preference (RFC 9111
 * 5.2.1.4: it "prefers" a validated response); NGINX and Varnish decline
 * it by default, since every client could otherwise send any request past
 * the cache, and replace the stored object for everyone. */
void cachectl_request_plain(struct cachectl_req *r)
{
	if (r->kind == CACHECTL_REFRESH) {
		r->kind = CACHECTL_LOOKUP;
		r->why = NULL;
	}
	r->max_age = -1;
	r->min_fresh = 0;
}

bool cachectl_is_purge(struct http1_str method)
{
	return (method.len == 5 && memcmp(method.p, "PURGE", 5) == 0) ||
	       (method.len == 3 && memcmp(method.p, "BAN", 3) == 0);
}

bool cachectl_invalidates(const struct http1_msg *req, int status)
{
	switch (req->method_id) {
	case HTTP1_M_POST:
	case HTTP1_M_PUT:
	case HTTP1_M_DELETE:
	case HTTP1_M_PATCH:
		return status >= 200 && status < 400;
	case HTTP1_M_OTHER:
		/* PURGE and BAN (only a purge_allow client's get this far):
		 * the client asked for the object to be gone, and a backend
		 * that refuses (501) or holds none (404) does not keep our
		 * copy. Any other unknown method is unsafe: RFC 9111 4.4's
		 * rule, a non-error answer only. */
		if (cachectl_is_purge(req->method))
			return status >= 200;
		return status >= 200 && status < 400;
	default:
		return false;
	}
}

/* cachectl_lower of eight bytes at once: bit 7 of (b & 0x7f) + 0x3f is
 * set from 'A' on, of (b & 0x7f) + 0x25 from '[' on (neither carries
 * into the next byte), and bytes with bit 7 set stay as they are; the
 * bytes 'A'..'Z' get 0x20. */
static uint64_t cachectl_lower8(uint64_t w)
{
	const uint64_t low7 = UINT64_C(0x7f7f7f7f7f7f7f7f), high = ~low7;
	uint64_t from_a = (w & low7) + UINT64_C(0x3f3f3f3f3f3f3f3f);
	uint64_t past_z = (w & low7) + UINT64_C(0x2525252525252525);

	return w | ((from_a & ~past_z & ~w & high) >> 2);
}

ssize_t cachectl_key(const struct http1_msg *req, char *buf, size_t len)
{
	struct http1_str host = req->authority.len ? req->authority : req->host;
	size_t n = host.len + req->path.len + (req->has_query ? 1 + req->query.len : 0);
	size_t i;
	uint64_t w;

	if (n > len)
		return -1;
	/* every cacheable request runs this: the host a word at a time, the
	 * last word the eight bytes that end it (lowering twice is lowering
	 * once), so "127.0.0.1:8080" is two words and no byte loop */
	for (i = 0; i + 8 <= host.len; i += 8) {
		memcpy(&w, host.p + i, 8);
		w = cachectl_lower8(w);
		memcpy(buf + i, &w, 8);
	}
	if (i < host.len && host.len >= 8) {
		memcpy(&w, host.p + host.len - 8, 8);
		w = cachectl_lower8(w);
		memcpy(buf + host.len - 8, &w, 8);
		i = host.len;
	}
	for (; i < host.len; i++)
		buf[i] = (char)cachectl_lower((unsigned char)host.p[i]);
	memcpy(buf + host.len, req->path.p, req->path.len);
	if (req->has_query) {
		buf[host.len + req->path.len] = '?';
		memcpy(buf + host.len + req->path.len + 1, req->query.p, req->query.len);
	}
	return (ssize_t)n;
}

ssize_t cachectl_location_key(struct http1_str host, struct http1_str path,
			      struct http1_str loc, char *buf, size_t len)
{
	const char *p = loc.p, *e = loc.p + loc.len, *dir = NULL;
	size_t i, dirlen = 0, n;

	if (host.len == 0 || loc.len == 0)
		return -1;
	if (cachectl_prefix(p, loc.len, "http://") || cachectl_prefix(p, loc.len, "https://")) {
		const char *a = memchr(p, '/', loc.len) + 2, *slash;

		slash = memchr(a, '/', (size_t)(e - a));
		if (slash == NULL)
			slash = e;
		if ((size_t)(slash - a) != host.len)
			return -1;
		for (i = 0; i < host.len; i++)
			if (cachectl_lower((unsigned char)a[i]) != cachectl_lower((unsigned char)host.p[i]))
				return -1;
		p = slash;
		if (p == e)
			p = "/", e = p + 1;
	} else if (*p != '/') {
		/* a relative path: after the last '/' of the request's */
		if (memchr(p, ':', loc.len) != NULL || path.len == 0)
			return -1;
		dir = path.p;
		for (dirlen = path.len; dirlen > 0 && dir[dirlen - 1] != '/'; dirlen--)
			;
	} else if (loc.len > 1 && p[1] == '/') {
		return -1;      /* //authority/path: not worth the parse */
	}
	/* the fragment is not part of the key */
	for (i = 0; p + i < e; i++)
		if (p[i] == '#')
			break;
	n = host.len + dirlen + i;
	if (n > len)
		return -1;
	for (size_t k = 0; k < host.len; k++)
		buf[k] = (char)cachectl_lower((unsigned char)host.p[k]);
	if (dirlen > 0)
		memcpy(buf + host.len, dir, dirlen);
	memcpy(buf + host.len + dirlen, p, i);
	return (ssize_t)n;
}

/* ---- responses -------------------------------------------------------- */

bool cachectl_status_ok(int status)
{
	switch (status) {
	case 200: case 203: case 204: case 300: case 301: case 308:
	case 404: case 410:
		return true;
	}
	return false;
}

/* Vary: NULL and *vary_ae when storable, else why not. Fields other
 * than Accept-Encoding are the caller's to key (vary.c: the spec it puts
 * in the meta for cache_fill_begin); "*" never matches (RFC 9111 4.1). */
static const char *cachectl_vary(const struct http1_msg *m, bool *vary_ae)
{
	unsigned i;

	*vary_ae = false;
	for (i = 0; i < m->nheaders; i++) {
		const struct http1_header *h = &m->headers[i];
		const char *p = h->value.p, *e = p + h->value.len;
		struct http1_str el;

		if (!http1_str_ieq(h->name, "vary"))
			continue;
		while (cachectl_next(&p, e, &el)) {
			if (el.len == 1 && el.p[0] == '*')
				return "Vary: *";
			if (http1_str_ieq(el, "accept-encoding"))
				*vary_ae = true;
		}
	}
	return NULL;
}

/* A variant may only be stored under the request's set of codings if its
 * Content-Encoding is in that set (else another client with the same set
 * would get a coding it did not ask for). */
static bool cachectl_coding_ok(const struct http1_msg *m, unsigned ae)
{
	unsigned i;

	for (i = 0; i < m->nheaders; i++) {
		const struct http1_header *h = &m->headers[i];
		const char *p = h->value.p, *e = p + h->value.len;
		struct http1_str el;

		if (!http1_str_ieq(h->name, "content-encoding"))
			continue;
		while (cachectl_next(&p, e, &el)) {
			unsigned bit = cachectl_coding(el);

			if (http1_str_ieq(el, "identity"))
				continue;
			if (bit == 0 || bit > CACHECTL_AE_ALL || !(ae & bit))
				return false;
		}
	}
	return true;
}

/* ---- targeted fields, Age, heuristics, no-cache="..." ---------------- */

/* The targeted fields in RFC 9213's order: the operator's own first. */
static const char *const cachectl_targets[] = {
	"cdn-cache-control", "surrogate-control",
};

/* The directives by which a targeted field tells this cache whether it
 * may store a response, or for how long. A field whose elements for this
 * cache name none of them (only another device's, as in
 * "max-age=600;othercdn", or content="ESI/1.0", or "foo", or a
 * stale-while-revalidate alone) is as if absent: Cache-Control rules.
 * Otherwise a field aimed elsewhere, or one we do not understand, would
 * void Cache-Control's private and no-store, and with Last-Modified the
 * response would be stored under heuristic freshness and served to
 * everyone. RFC 9213 2.1 has a cache behave as if an empty or unparsable
 * targeted field were not there; this extends it to one that says
 * nothing this cache can act on. */
#define CACHECTL_SPEAKS (CACHECTL_NO_STORE | CACHECTL_NO_CACHE | CACHECTL_PRIVATE | CACHECTL_PUBLIC | \
			 CACHECTL_MAX_AGE | CACHECTL_S_MAXAGE)

/* Whether field name of resp speaks to this cache (CACHECTL_SPEAKS). */
static bool cachectl_speaks(const struct http1_msg *resp, const char *name, bool surrogate)
{
	struct cachectl_cc cc;

	return cachectl_parse_field(resp, name, surrogate, &cc) && (cc.flags & CACHECTL_SPEAKS) != 0;
}

const char *cachectl_targeted(const struct http1_msg *resp, const char *target)
{
	size_t i;

	if (target != NULL && target[0] && cachectl_speaks(resp, target, false))
		return target;
	for (i = 0; i < sizeof(cachectl_targets) / sizeof(cachectl_targets[0]); i++)
		if (cachectl_speaks(resp, cachectl_targets[i], i == 1))
			return cachectl_targets[i];
	return NULL;
}

bool cachectl_is_targeted(struct http1_str name, const char *target)
{
	size_t i;

	if (target != NULL && target[0] && cachectl_name_is(name, target))
		return true;
	for (i = 0; i < sizeof(cachectl_targets) / sizeof(cachectl_targets[0]); i++)
		if (http1_str_ieq(name, cachectl_targets[i]))
			return true;
	return false;
}

void cachectl_strip_targeted(struct http1_msg *resp, const char *target)
{
	for (unsigned i = 0; i < resp->nheaders; i++)
		if (cachectl_is_targeted(resp->headers[i].name, target))
			resp->headers[i].flags |= HTTP1_HDR_DROP;
}

/* The directives that rule resp for this cache into cc: the targeted
 * field's if there is one (returns true: Expires is then ignored too,
 * RFC 9213 2.2), else Cache-Control's. */
static bool cachectl_policy(const struct http1_msg *resp, const char *target,
			    struct cachectl_cc *cc)
{
	const char *field = cachectl_targeted(resp, target);

	if (field == NULL) {
		cachectl_parse_cc(resp, cc);
		return false;
	}
	cachectl_parse_field(resp, field, strcmp(field, "surrogate-control") == 0, cc);
	return true;
}

/* Age (RFC 9111 5.1): delta-seconds. A list (a comma, or several lines)
 * counts by its first member; a member that is not digits alone (a sign,
 * a fraction, a parameter, a word) is invalid and the field is ignored,
 * as if the response had no Age: 0. */
static int64_t cachectl_age(const struct http1_msg *m)
{
	unsigned i;

	for (i = 0; i < m->nheaders; i++) {
		const char *p = m->headers[i].value.p, *e = p + m->headers[i].value.len;
		struct http1_str el;
		size_t k;

		if (!http1_str_ieq(m->headers[i].name, "age") || !cachectl_next(&p, e, &el))
			continue;
		for (k = 0; k < el.len; k++)
			if (el.p[k] < '0' || el.p[k] > '9')
				return 0;
		return cachectl_delta(el);
	}
	return 0;
}

/* The status codes RFC 9110 defines (15): what must-understand asks a
 * cache to know before it stores. */
static bool cachectl_status_known(int status)
{
	static const short known[] = {
		200, 201, 202, 203, 204, 205, 206, 300, 301, 302, 303, 304, 305,
		307, 308, 400, 401, 402, 403, 404, 405, 406, 407, 408, 409, 410,
		411, 412, 413, 414, 415, 416, 417, 421, 422, 426, 500, 501, 502,
		503, 504, 505,
	};
	size_t i;

	for (i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (known[i] == status)
			return true;
	return false;
}

/* Heuristically cacheable (RFC 9110 15.1): these statuses, or any with
 * public (RFC 9111 4.2.2). */
static bool cachectl_heuristic_status(int status, const struct cachectl_cc *cc)
{
	switch (status) {
	case 200: case 203: case 204: case 300: case 301: case 308:
	case 404: case 405: case 410: case 414: case 501:
		return true;
	}
	return (cc->flags & CACHECTL_PUBLIC) != 0;
}

/* Heuristic freshness (RFC 9111 4.2.2): 10% of the time since
 * Last-Modified, at most max (0: none). Returns whether it applies. */
static bool cachectl_heuristic(const struct cachectl_cc *cc, int status, int64_t max,
			       struct cachectl_meta *out)
{
	int64_t l;

	if (max <= 0 || out->last_modified < 0 || out->last_modified >= out->date
	    || !cachectl_heuristic_status(status, cc))
		return false;
	l = (out->date - out->last_modified) / 10;
	out->lifetime = l < max ? l : max;
	return true;
}

/* The value of no-cache="a, b" in field (Cache-Control or the targeted
 * one), quotes removed, into *out; false when no-cache is unqualified or
 * absent. The first no-cache counts, as in cachectl_directive. */
static bool cachectl_no_cache_fields(const struct http1_msg *m, const char *field,
				     struct http1_str *out)
{
	unsigned i;

	for (i = 0; i < m->nheaders; i++) {
		const struct http1_header *h = &m->headers[i];
		const char *p = h->value.p, *e = p + h->value.len;
		struct http1_str el, name, value;

		if (!cachectl_name_is(h->name, field))
			continue;
		while (cachectl_next(&p, e, &el)) {
			cachectl_split(el, &name, &value);
			if (!http1_str_ieq(name, "no-cache"))
				continue;
			*out = value;
			return value.p != NULL && value.len > 0;
		}
	}
	return false;
}

/* The storage rules this section adds, once cachectl_policy has read
 * cc: must-understand, no-cache (qualified: the rest is stored; plain:
 * stored to be revalidated, if it has a validator). Clears the flags it
 * has dealt with so that cachectl_refusal does not refuse them again.
 * Returns why not storable, or NULL. */
static const char *cachectl_policy_refusal(const struct http1_msg *resp,
					   const char *target, struct cachectl_cc *cc,
					   struct cachectl_meta *out)
{
	const char *field = cachectl_targeted(resp, target);

	if (cc->flags & CACHECTL_MUST_UNDERSTAND) {
		if (!cachectl_status_known(resp->status))
			return "must-understand with a status not known";
		cc->flags &= ~CACHECTL_NO_STORE;    /* RFC 9111 5.2.2.3 */
	}
	if (!(cc->flags & CACHECTL_NO_CACHE))
		return NULL;
	if (cachectl_no_cache_fields(resp, field ? field : "cache-control", &out->omit)) {
		cc->flags &= ~CACHECTL_NO_CACHE;
		return NULL;
	}
	if (out->etag.len == 0 && out->last_modified < 0)
		return "no-cache without a validator";
	cc->flags &= ~CACHECTL_NO_CACHE;
	out->flags |= CACHECTL_M_NO_CACHE | CACHECTL_M_REVALIDATE;
	return NULL;
}

/* Freshness lifetime (RFC 9111 4.2.1) into out->lifetime; false when the
 * response gives no explicit freshness. */
static bool cachectl_lifetime(const struct http1_msg *m,
			      const struct cachectl_cc *cc, int64_t now,
			      struct cachectl_meta *out)
{
	const struct http1_header *h;
	int64_t expires;

	if (cc->flags & CACHECTL_S_MAXAGE) {
		out->lifetime = cc->s_maxage;
		return true;
	}
	if (cc->flags & CACHECTL_MAX_AGE) {
		out->lifetime = cc->max_age;
		return true;
	}
	h = cachectl_header(m, "expires");
	if (h == NULL)
		return false;
	/* an invalid Expires ("0", "-1") means already expired */
	if (cachectl_date(h->value, now, &expires) < 0 || expires <= out->date)
		out->lifetime = 0;
	else
		out->lifetime = expires - out->date;
	return true;
}

/* Date, Age, the corrected initial age (RFC 9111 4.2.3), validators. */
static void cachectl_times(const struct http1_msg *m, int64_t req_time,
			   int64_t resp_time, struct cachectl_meta *out)
{
	const struct http1_header *h;
	int64_t age = 0, apparent, delay, corrected;

	out->resp_time = resp_time;
	out->resident_at = resp_time;
	out->date = resp_time;
	h = cachectl_header(m, "date");
	if (h != NULL && cachectl_date(h->value, resp_time, &out->date) < 0)
		out->date = resp_time;
	age = cachectl_age(m);
	apparent = resp_time > out->date ? resp_time - out->date : 0;
	delay = resp_time > req_time ? resp_time - req_time : 0;
	corrected = age + delay;
	out->initial_age = apparent > corrected ? apparent : corrected;
	h = cachectl_header(m, "etag");
	if (h != NULL)
		out->etag = h->value;
	out->last_modified = -1;
	h = cachectl_header(m, "last-modified");
	if (h != NULL && cachectl_date(h->value, resp_time, &out->last_modified) < 0)
		out->last_modified = -1;
}

/* Why the response may not be stored, from its method, status and
 * directives alone; NULL if nothing forbids it. */
static const char *cachectl_refusal(const struct cachectl_req *rq,
				    enum http1_method method,
				    const struct http1_msg *resp,
				    const struct cachectl_cc *cc, bool *vary_ae)
{
	const char *why;

	if (method != HTTP1_M_GET)
		return "not a GET";
	if (rq->kind != CACHECTL_LOOKUP && rq->kind != CACHECTL_REFRESH)
		return "request not cacheable";
	if (rq->flags & CACHECTL_RQ_NO_STORE)
		return "request no-store";
	/* any final status may be stored with explicit freshness (RFC 9111
	 * 3), but for a partial response and a 304 (to our own validators) */
	if (resp->status < 200 || resp->status == 206 || resp->status == 304)
		return "status not cacheable";
	if (cc->flags & CACHECTL_NO_STORE)
		return "no-store";
	if (cc->flags & CACHECTL_NO_CACHE)
		return "no-cache";
	if (cc->flags & CACHECTL_PRIVATE)
		return "private";
	if (cachectl_header(resp, "set-cookie") != NULL)
		return "Set-Cookie";
	why = cachectl_vary(resp, vary_ae);
	if (why != NULL)
		return why;
	if ((rq->flags & CACHECTL_RQ_AUTH)
	    && !(cc->flags & (CACHECTL_PUBLIC | CACHECTL_S_MAXAGE)))
		return "Authorization without public or s-maxage";
	if (*vary_ae && !cachectl_coding_ok(resp, rq->ae))
		return "Content-Encoding the request did not accept";
	return NULL;
}

bool cachectl_response(const struct cachectl_req *rq, enum http1_method method,
		       const struct http1_msg *resp, int64_t req_time,
		       int64_t resp_time, int64_t grace, struct cachectl_meta *out)
{
	struct cachectl_cc cc;
	bool vary_ae = false, targeted, fresh;
	int64_t left, window;

	memset(out, 0, sizeof(*out));
	targeted = cachectl_policy(resp, rq->target_field, &cc);
	cachectl_times(resp, req_time, resp_time, out);
	out->why = cachectl_policy_refusal(resp, rq->target_field, &cc, out);
	if (out->why == NULL)
		out->why = cachectl_refusal(rq, method, resp, &cc, &vary_ae);
	if (out->why != NULL)
		return false;
	/* a targeted field's directives replace Expires as well */
	if (targeted && !(cc.flags & (CACHECTL_S_MAXAGE | CACHECTL_MAX_AGE)))
		fresh = false;
	else
		fresh = cachectl_lifetime(resp, &cc, resp_time, out);
	if (!fresh && !cachectl_heuristic(&cc, resp->status, rq->heuristic_max, out)
	    && !(out->flags & CACHECTL_M_NO_CACHE)) {
		out->why = "no explicit freshness";
		return false;
	}
	if (vary_ae)
		out->flags |= CACHECTL_M_VARY_AE;
	if (cc.flags & (CACHECTL_PUBLIC | CACHECTL_S_MAXAGE))
		out->flags |= CACHECTL_M_AUTH_OK;
	/* s-maxage implies proxy-revalidate for a shared cache (5.2.2.10) */
	if ((out->flags & CACHECTL_M_REVALIDATE)
	    || (cc.flags & (CACHECTL_MUST_REVALIDATE | CACHECTL_PROXY_REVALIDATE
			    | CACHECTL_S_MAXAGE))) {
		out->flags |= CACHECTL_M_REVALIDATE;
	} else {
		out->swr = (cc.flags & CACHECTL_SWR) ? cc.swr : grace;
		out->sie = (cc.flags & CACHECTL_SIE) ? cc.sie : grace;
	}
	left = out->lifetime - out->initial_age;
	window = out->swr > out->sie ? out->swr : out->sie;
	if (left <= 0 && window <= -left && !(out->flags & CACHECTL_M_NO_CACHE)) {
		if (out->etag.len == 0 && out->last_modified < 0) {
			out->why = "stale on arrival";
			return false;
		}
		/* with a validator it is kept to be revalidated before its
		 * first use, as a no-cache response is (RFC 9111 4.3): a
		 * lifetime of a second can end between the origin's Date and
		 * its arrival, Date being in whole seconds */
		out->flags |= CACHECTL_M_NO_CACHE;
	}
	out->storable = true;
	return true;
}

/* ---- conditional requests --------------------------------------------- */

/* Weak comparison of two entity-tags (RFC 9110 8.8.3.2): W/ ignored, the
 * opaque quoted strings equal. */
static bool cachectl_etag_weak_eq(struct http1_str a, struct http1_str b)
{
	if (a.len >= 2 && a.p[0] == 'W' && a.p[1] == '/') {
		a.p += 2;
		a.len -= 2;
	}
	if (b.len >= 2 && b.p[0] == 'W' && b.p[1] == '/') {
		b.p += 2;
		b.len -= 2;
	}
	return a.len >= 2 && a.p[0] == '"' && a.len == b.len
	       && memcmp(a.p, b.p, a.len) == 0;
}

bool cachectl_not_modified(const struct http1_msg *req, struct http1_str etag,
			   int64_t last_modified, int64_t now)
{
	const struct http1_header *h;
	int64_t ims;
	unsigned i;
	bool any = false;

	if (req->method_id != HTTP1_M_GET && req->method_id != HTTP1_M_HEAD)
		return false;
	for (i = 0; i < req->nheaders; i++) {
		const struct http1_header *inm = &req->headers[i];
		const char *p = inm->value.p, *e = p + inm->value.len;
		struct http1_str el;

		if (!http1_str_ieq(inm->name, "if-none-match"))
			continue;
		any = true;
		while (cachectl_next_etag(&p, e, &el)) {
			if (el.len == 1 && el.p[0] == '*')
				return true;
			if (etag.len != 0 && cachectl_etag_weak_eq(el, etag))
				return true;
		}
	}
	if (any)
		return false;   /* If-Modified-Since is ignored (RFC 9110 13.1.3) */
	h = cachectl_header(req, "if-modified-since");
	if (h == NULL || last_modified < 0 || cachectl_date(h->value, now, &ims) < 0)
		return false;
	return last_modified <= ims;
}

/* ---- an answer from the cache ----------------------------------------- */

static char *cachectl_put(char *p, const char *s, size_t n)
{
	memcpy(p, s, n);
	return p + n;
}

#define CACHECTL_PUTS(p, lit) cachectl_put(p, lit, sizeof(lit) - 1)

int cachectl_hit_lines(char *buf, size_t cap, int64_t age, int64_t ttl, const char *how,
		       const char *hdr, struct http1_str be, bool cached, const char *conn)
{
	size_t hlen = strlen(how), hdrlen = be.len ? strlen(hdr) : 0, clen = strlen(conn);
	char a[20], t[20];
	size_t alen = (size_t)(decfmt_i64(a, age) - a), tlen = (size_t)(decfmt_i64(t, ttl) - t);
	/* the room snprintf would have asked for, its NUL included */
	size_t need = sizeof("Age: \r\nCache-Status: ringproxy; ; ttl=\r\n" "Via: 1.1 ringproxy\r\n\r\n") +
		      alen + hlen + tlen + clen + (hdrlen ? hdrlen + be.len + sizeof(": \r\n") - 1 + (cached ? 8 : 0) : 0);
	char *p = buf;

	if (need > cap)
		return -1;
	p = CACHECTL_PUTS(p, "Age: ");
	p = cachectl_put(p, a, alen);
	p = CACHECTL_PUTS(p, "\r\nCache-Status: ringproxy; ");
	p = cachectl_put(p, how, hlen);
	p = CACHECTL_PUTS(p, "; ttl=");
	p = cachectl_put(p, t, tlen);
	p = CACHECTL_PUTS(p, "\r\n");
	if (hdrlen) {
		p = cachectl_put(p, hdr, hdrlen);
		p = CACHECTL_PUTS(p, ": ");
		p = cachectl_put(p, be.p, be.len);
		if (cached)
			p = CACHECTL_PUTS(p, "; cached");
		p = CACHECTL_PUTS(p, "\r\n");
	}
	p = CACHECTL_PUTS(p, "Via: 1.1 ringproxy\r\n");
	p = cachectl_put(p, conn, clen);
	p = CACHECTL_PUTS(p, "\r\n");
	return (int)(p - buf);
}

/* ---- dates (RFC 9110 5.6.7) ------------------------------------------- */

static const char cachectl_months[12][4] = {
	"Jan", "Feb", "Mar", "Apr", "May", "Jun",
	"Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
};
static const char cachectl_wdays[7][10] = {
	"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday",
	"Saturday",
};

static bool cachectl_leap(int64_t y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* Days from 1970-01-01 to y-m-d (y >= 1), by counting leap years. */
static int64_t cachectl_days(int64_t y, int m, int d)
{
	static const int before[12] = { 0, 31, 59, 90, 120, 151, 181, 212,
					243, 273, 304, 334 };
	int64_t leaps = (y - 1) / 4 - (y - 1) / 100 + (y - 1) / 400
			- (1969 / 4 - 1969 / 100 + 1969 / 400);

	return (y - 1970) * 365 + leaps + before[m] + (m > 1 && cachectl_leap(y))
	       + d - 1;
}

/* n decimal digits at p; -1 if any is not a digit. */
static int cachectl_num(const char *p, int n)
{
	int v = 0;

	for (; n > 0; n--, p++) {
		if (*p < '0' || *p > '9')
			return -1;
		v = v * 10 + (*p - '0');
	}
	return v;
}

static int cachectl_month(const char *p)
{
	int i;

	for (i = 0; i < 12; i++)
		if (memcmp(p, cachectl_months[i], 3) == 0)
			return i;
	return -1;
}

/* The day name at the start of s ending at len: a 3-letter abbreviation,
 * or the full name (RFC 850). */
static bool cachectl_wday(const char *p, size_t len, bool full)
{
	int i;

	for (i = 0; i < 7; i++) {
		size_t l = full ? strlen(cachectl_wdays[i]) : 3;

		if (len == l && memcmp(p, cachectl_wdays[i], l) == 0)
			return true;
	}
	return false;
}

/* "HH:MM:SS" at p into seconds of the day, -1 if malformed. */
static int64_t cachectl_clock(const char *p)
{
	int h = cachectl_num(p, 2), mi = cachectl_num(p + 3, 2),
	    s = cachectl_num(p + 6, 2);

	if (h < 0 || mi < 0 || s < 0 || p[2] != ':' || p[5] != ':'
	    || h > 23 || mi > 59 || s > 60)
		return -1;
	return (int64_t)h * 3600 + mi * 60 + s;
}

/* 9999-12-31T23:59:59Z */
#define CACHECTL_DATE_LAST INT64_C(253402300799)

static int cachectl_ymd(int64_t y, int mon, int d, int64_t secs, int64_t *t)
{
	static const int mdays[12] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31,
				       30, 31 };

	if (y < 1 || mon < 0 || d < 1 || d > mdays[mon] || secs < 0
	    || (mon == 1 && d == 29 && !cachectl_leap(y)))
		return -1;
	*t = cachectl_days(y, mon, d) * 86400 + secs;
	/* a leap second at the end of 9999 is past every date a four-digit
	 * year can say (cachectl_date_format would write year 0000) */
	if (*t > CACHECTL_DATE_LAST)
		*t = CACHECTL_DATE_LAST;
	return 0;
}

/* The year of now, for RFC 850's two-digit years. */
static int64_t cachectl_year_of(int64_t now)
{
	time_t tt = (time_t)now;
	struct tm tm;

	if (gmtime_r(&tt, &tm) == NULL)
		return 1970;
	return (int64_t)tm.tm_year + 1900;
}

int cachectl_date(struct http1_str s, int64_t now, int64_t *t)
{
	const char *p = s.p, *comma;
	int64_t secs, y;
	int d, mon;

	if (s.len < 24)
		return -1;
	comma = memchr(s.p, ',', s.len);
	if (comma != NULL && comma - p == 3 && s.len == 29) {
		/* IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT */
		if (!cachectl_wday(p, 3, false) || p[4] != ' ' || p[7] != ' '
		    || p[11] != ' ' || p[16] != ' ' || memcmp(p + 25, " GMT", 4) != 0)
			return -1;
		d = cachectl_num(p + 5, 2);
		mon = cachectl_month(p + 8);
		y = cachectl_num(p + 12, 4);
		secs = cachectl_clock(p + 17);
		return cachectl_ymd(y, mon, d, secs, t);
	}
	if (comma != NULL) {
		/* RFC 850: Sunday, 06-Nov-94 08:49:37 GMT */
		size_t wl = (size_t)(comma - p);
		const char *q = comma + 1;

		if (!cachectl_wday(p, wl, true) || s.len != wl + 24 || q[0] != ' '
		    || q[3] != '-' || q[7] != '-' || q[10] != ' '
		    || memcmp(q + 19, " GMT", 4) != 0)
			return -1;
		d = cachectl_num(q + 1, 2);
		mon = cachectl_month(q + 4);
		y = cachectl_num(q + 8, 2);
		secs = cachectl_clock(q + 11);
		if (y < 0)
			return -1;
		/* the most recent year with these two digits that is not
		 * more than 50 years ahead of now: in now's century, the next
		 * (a clock in 1970 reads -09 as 2009) or the one before */
		y += cachectl_year_of(now) / 100 * 100;
		if (y + 100 <= cachectl_year_of(now) + 50)
			y += 100;
		else if (y > cachectl_year_of(now) + 50)
			y -= 100;
		return cachectl_ymd(y, mon, d, secs, t);
	}
	/* asctime: Sun Nov  6 08:49:37 1994 */
	if (s.len != 24 || !cachectl_wday(p, 3, false) || p[3] != ' ' || p[7] != ' '
	    || p[10] != ' ' || p[19] != ' ')
		return -1;
	mon = cachectl_month(p + 4);
	d = p[8] == ' ' ? cachectl_num(p + 9, 1) : cachectl_num(p + 8, 2);
	secs = cachectl_clock(p + 11);
	y = cachectl_num(p + 20, 4);
	return cachectl_ymd(y, mon, d, secs, t);
}

void cachectl_date_format(int64_t t, char *buf)
{
	int64_t days = t >= 0 ? t / 86400 : (t - 86399) / 86400;
	int64_t secs = t - days * 86400, y = 1970;
	int mon = 0, wday = (int)(((days % 7) + 11) % 7); /* 1970-01-01: Thu */
	static const int mdays[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31,
				       30, 31 };
	char *p = buf;

	while (days < 0 || days >= 365 + cachectl_leap(y)) {
		if (days < 0)
			days += 365 + cachectl_leap(--y);
		else
			days -= 365 + cachectl_leap(y++);
	}
	while (days >= mdays[mon] + (mon == 1 && cachectl_leap(y)))
		days -= mdays[mon] + (mon == 1 && cachectl_leap(y)), mon++;
	memcpy(p, cachectl_wdays[wday], 3);
	p[3] = ',';
	p[4] = ' ';
	p[5] = (char)('0' + (days + 1) / 10);
	p[6] = (char)('0' + (days + 1) % 10);
	p[7] = ' ';
	memcpy(p + 8, cachectl_months[mon], 3);
	p[11] = ' ';
	p[12] = (char)('0' + y / 1000 % 10);
	p[13] = (char)('0' + y / 100 % 10);
	p[14] = (char)('0' + y / 10 % 10);
	p[15] = (char)('0' + y % 10);
	p[16] = ' ';
	p[17] = (char)('0' + secs / 36000);
	p[18] = (char)('0' + secs / 3600 % 10);
	p[19] = ':';
	p[20] = (char)('0' + secs % 3600 / 600);
	p[21] = (char)('0' + secs % 3600 / 60 % 10);
	p[22] = ':';
	p[23] = (char)('0' + secs % 60 / 10);
	p[24] = (char)('0' + secs % 10);
	memcpy(p + 25, " GMT", 5);
}

size_t cachectl_cond_lines(struct http1_str etag, int64_t lm, char *buf, size_t cap)
{
	size_t n = 0;
	int m;

	if (etag.len) {
		m = snprintf(buf, cap, "If-None-Match: %.*s\r\n", (int)etag.len, etag.p);
		if (m < 0 || (size_t)m >= cap)
			return 0;
		n = (size_t)m;
	}
	if (lm >= 0) {
		char date[32];

		cachectl_date_format(lm, date);
		m = snprintf(buf + n, cap - n, "If-Modified-Since: %s\r\n", date);
		if (m < 0 || (size_t)m >= cap - n)
			return 0;
		n += (size_t)m;
	}
	return n;
}
