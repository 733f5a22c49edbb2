/*
 * vary.c -- Vary: which stored variant answers a request (see vary.h for
 * the spec and the normalising rules).
 *
 * Everything works on slices of the parsed messages and writes into the
 * caller's buffers: a lookup of a URL that varies rekeys the request for
 * each stored variant's fields (vary_match) under the cache's shard lock,
 * so it allocates nothing and formats nothing.
 */
#include "http/vary.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "http/cachectl.h"

#define VARY_ELEMS_MAX 64       /* list elements of one field normalised */
#define VARY_NAME_MAX  64       /* longest field name a Vary may give */
#define VARY_IMAGE     "accept/image"

/* Fields whose value is a case-insensitive list with no meaning in its
 * order (RFC 9110 12.5: media ranges, charsets, language ranges; their
 * weights are parameters of each element, which sorting keeps). */
static const char *const vary_sorted[] = { "accept", "accept-charset", "accept-language" };

/* A field name of a Vary line, lowercased into out. */
struct vary_name {
	char p[VARY_NAME_MAX];
	size_t len;
};

static bool vary_ows(char c)
{
	return c == ' ' || c == '\t';
}

static char vary_lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c | 0x20) : c;
}

/* RFC 9110 5.6.2 tchar. */
static bool vary_tchar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
	       || (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* The next element of a list (cachectl_list_next, quoted strings with
 * their escapes kept whole). */
static bool vary_next(const char **pp, const char *e, struct http1_str *out)
{
	return cachectl_list_next(pp, e, out, true);
}

static bool vary_is_sorted(struct http1_str name)
{
	for (size_t i = 0; i < sizeof(vary_sorted) / sizeof(vary_sorted[0]); i++)
		if (http1_str_ieq(name, vary_sorted[i]))
			return true;
	return false;
}

/* One element normalised into out (room for el.len bytes: it never
 * grows): no whitespace around ';' and '=' outside quotes, lowercased
 * outside quotes when lower. Returns its length. */
static size_t vary_elem(struct http1_str el, bool lower, char *out)
{
	size_t n = 0;
	bool quoted = false;

	for (size_t i = 0; i < el.len; i++) {
		char c = el.p[i];

		if (quoted) {
			out[n++] = c;
			if (c == '\\' && i + 1 < el.len)
				out[n++] = el.p[++i];
			else if (c == '"')
				quoted = false;
			continue;
		}
		if (c == '"') {
			quoted = true;
		} else if (vary_ows(c)) {
			size_t j = i;

			while (j < el.len && vary_ows(el.p[j]))
				j++;
			/* whitespace before ';' or '=', or after them, goes */
			if (j < el.len && (el.p[j] == ';' || el.p[j] == '='))
				continue;
			if (n > 0 && (out[n - 1] == ';' || out[n - 1] == '='))
				continue;
			c = ' ';
			i = j - 1;
		} else if (lower) {
			c = vary_lower(c);
		}
		out[n++] = c;
	}
	return n;
}

static int vary_slice_cmp(const char *a, size_t al, const char *b, size_t bl)
{
	int r = memcmp(a, b, al < bl ? al : bl);

	return r != 0 ? r : (al > bl) - (al < bl);
}

/*
 * req's value of field name, normalised, appended at buf[*n] (room up to
 * len): ":value" when req has the field, nothing when it has not.
 * Returns 0, or -1 when it does not fit.
 */
static int vary_value(const struct http1_msg *req, struct http1_str name,
		      char *buf, size_t *n, size_t len)
{
	struct { uint16_t off, len; } el[VARY_ELEMS_MAX];
	bool sorted = vary_is_sorted(name), present = false;
	size_t start, w, nel = 0, i, j;
	char tmp[VARY_SPEC_MAX];

	if (req == NULL)
		return 0;
	w = 0;
	for (i = 0; i < req->nheaders; i++) {
		const struct http1_header *h = &req->headers[i];
		const char *p = h->value.p, *e = p + h->value.len;
		struct http1_str v;

		if (h->name.len != name.len || strncasecmp(h->name.p, name.p, name.len) != 0)
			continue;
		present = true;
		while (vary_next(&p, e, &v)) {
			if (nel == VARY_ELEMS_MAX || w + v.len > sizeof(tmp))
				return -1;
			el[nel].off = (uint16_t)w;
			el[nel].len = (uint16_t)vary_elem(v, sorted, tmp + w);
			w += el[nel].len;
			nel++;
		}
	}
	if (!present)
		return 0;
	/* insertion sort: lists are short */
	for (i = 1; sorted && i < nel; i++)
		for (j = i; j > 0 && vary_slice_cmp(tmp + el[j - 1].off, el[j - 1].len,
						    tmp + el[j].off, el[j].len) > 0; j--) {
			uint16_t o = el[j].off, l = el[j].len;

			el[j] = el[j - 1];
			el[j - 1].off = o;
			el[j - 1].len = l;
		}
	start = *n;
	if (start + 1 + w + nel > len)
		return -1;
	buf[start++] = ':';
	for (i = 0; i < nel; i++) {
		if (i > 0)
			buf[start++] = ',';
		memcpy(buf + start, tmp + el[i].off, el[i].len);
		start += el[i].len;
	}
	*n = start;
	return 0;
}

/* ---- image formats ------------------------------------------------------ */

int vary_formats_parse(const char *s, struct vary_formats *out, char *err, size_t len)
{
	struct http1_str el;
	const char *p = s, *e = s + strlen(s);

	memset(out, 0, sizeof(*out));
	while (vary_next(&p, e, &el)) {
		bool whole = el.len > 6 && strncasecmp(el.p, "image/", 6) == 0;
		size_t sub = whole ? 6 : 0, n = 0;
		char *t;

		if (out->n == VARY_FORMATS_MAX) {
			snprintf(err, len, "more than %d formats", VARY_FORMATS_MAX);
			return -1;
		}
		if (el.len - sub + 7 > VARY_FORMAT_LEN) {
			snprintf(err, len, "format '%.*s' is too long", (int)el.len, el.p);
			return -1;
		}
		for (size_t i = sub; i < el.len; i++)
			if (!vary_tchar(el.p[i]) || el.p[i] == '*') {
				snprintf(err, len, "'%.*s' is not an image format such as avif or webp",
					 (int)el.len, el.p);
				return -1;
			}
		t = out->type[out->n];
		memcpy(t, "image/", 6);
		n = 6;
		for (size_t i = sub; i < el.len; i++)
			t[n++] = vary_lower(el.p[i]);
		t[n] = '\0';
		for (unsigned k = 0; k < out->n; k++)
			if (strcmp(out->type[k], t) == 0) {
				snprintf(err, len, "'%s' is listed twice", t);
				return -1;
			}
		out->n++;
	}
	return 0;
}

/* Whether a media-range element's parameters give it q=0 (RFC 9110
 * 12.4.2: "0", "0.", "0.0" to three decimals). */
static bool vary_q_zero(struct http1_str el)
{
	const char *p = memchr(el.p, ';', el.len), *e = el.p + el.len;

	while (p != NULL && p < e) {
		const char *q = p + 1;

		while (q < e && vary_ows(*q))
			q++;
		if (q + 1 < e && (*q == 'q' || *q == 'Q') && q[1] == '=') {
			for (q += 2; q < e && vary_ows(*q); q++)
				;
			if (q >= e || *q != '0')
				return false;
			for (q++; q < e && (*q == '0' || *q == '.'); q++)
				;
			return q >= e || vary_ows(*q) || *q == ';';
		}
		p = memchr(q, ';', (size_t)(e - q));
	}
	return false;
}

int vary_image_format(const struct http1_msg *req, const struct vary_formats *fm)
{
	unsigned accepted = 0;

	if (req == NULL || fm == NULL || fm->n == 0)
		return -1;
	for (unsigned i = 0; i < req->nheaders; i++) {
		const struct http1_header *h = &req->headers[i];
		const char *p = h->value.p, *e = p + h->value.len;
		struct http1_str el;

		if (!http1_str_ieq(h->name, "accept"))
			continue;
		while (vary_next(&p, e, &el)) {
			const char *semi = memchr(el.p, ';', el.len);
			size_t tl = semi ? (size_t)(semi - el.p) : el.len;

			while (tl > 0 && vary_ows(el.p[tl - 1]))
				tl--;
			for (unsigned k = 0; k < fm->n; k++)
				if (strlen(fm->type[k]) == tl
				    && strncasecmp(fm->type[k], el.p, tl) == 0 && !vary_q_zero(el))
					accepted |= 1u << k;
		}
	}
	for (unsigned k = 0; k < fm->n; k++)
		if (accepted & (1u << k))
			return (int)k;
	return -1;
}

/* ":TYPE" (":" alone for none) of req's image key, appended at buf[*n]. */
static int vary_image_value(const struct http1_msg *req, const struct vary_formats *fm,
			    char *buf, size_t *n, size_t len)
{
	int k = vary_image_format(req, fm);
	size_t tl = k < 0 ? 0 : strlen(fm->type[k]);

	if (*n + 1 + tl > len)
		return -1;
	buf[(*n)++] = ':';
	if (tl > 0)
		memcpy(buf + *n, fm->type[k], tl);
	*n += tl;
	return 0;
}

size_t vary_accept_line(struct http1_str spec, char *buf, size_t len)
{
	static const char line[] = VARY_IMAGE ":";
	const char *p = spec.p, *e = spec.p + spec.len, *eol;
	int n;

	for (; p < e; p = eol + 1) {
		eol = memchr(p, '\n', (size_t)(e - p));
		if (eol == NULL)
			return 0;
		if ((size_t)(eol - p) < sizeof(line) - 1 || memcmp(p, line, sizeof(line) - 1) != 0)
			continue;
		p += sizeof(line) - 1;
		if (p == eol)
			n = snprintf(buf, len, "Accept: */*\r\n");
		else
			n = snprintf(buf, len, "Accept: %.*s, */*;q=0.8\r\n", (int)(eol - p), p);
		return n > 0 && (size_t)n < len ? (size_t)n : 0;
	}
	return 0;
}

/* The media type of resp's Content-Type, parameters and whitespace
 * aside; false when there is none, or more than one line. */
static bool vary_media_type(const struct http1_msg *resp, struct http1_str *out)
{
	bool found = false;

	for (unsigned i = 0; i < resp->nheaders; i++) {
		const struct http1_header *h = &resp->headers[i];
		const char *p = h->value.p, *e = p + h->value.len, *t;

		if (!http1_str_ieq(h->name, "content-type"))
			continue;
		if (found)
			return false;
		found = true;
		while (p < e && vary_ows(*p))
			p++;
		for (t = p; t < e && *t != ';'; t++)
			;
		while (t > p && vary_ows(t[-1]))
			t--;
		out->p = p;
		out->len = (size_t)(t - p);
	}
	return found;
}

bool vary_image_holds(struct http1_str spec, const struct http1_msg *resp,
		      const struct vary_formats *fm)
{
	static const char line[] = VARY_IMAGE ":";
	const char *p = spec.p, *e = spec.p + spec.len, *eol;
	struct http1_str type = { NULL, 0 };
	bool typed = vary_media_type(resp, &type);

	for (; p < e; p = eol + 1) {
		eol = memchr(p, '\n', (size_t)(e - p));
		if (eol == NULL)
			return false;
		if ((size_t)(eol - p) < sizeof(line) - 1 || memcmp(p, line, sizeof(line) - 1) != 0)
			continue;
		p += sizeof(line) - 1;
		if (p < eol)    /* the key's format, and nothing else */
			return typed && type.len == (size_t)(eol - p) && strncasecmp(type.p, p, type.len) == 0;
		if (!typed)
			return false;
		for (unsigned k = 0; fm != NULL && k < fm->n; k++)
			if (strlen(fm->type[k]) == type.len && strncasecmp(fm->type[k], type.p, type.len) == 0)
				return false;
		return true;
	}
	return true;
}

bool vary_asked_other(struct http1_str sent, struct http1_str got)
{
	char a[128], b[128];
	size_t na = vary_accept_line(sent, a, sizeof(a)), nb;

	if (na == 0)
		return false;
	nb = vary_accept_line(got, b, sizeof(b));
	return na != nb || memcmp(a, b, na) != 0;
}

/* ---- specs -------------------------------------------------------------- */

/* The fields resp's Vary names, Accept-Encoding aside, lowercased, sorted,
 * each once, into names; *n their count. -1 for "*" or a list that cannot
 * be kept. */
static int vary_names(const struct http1_msg *resp, struct vary_name *names, size_t *n)
{
	*n = 0;
	for (unsigned i = 0; i < resp->nheaders; i++) {
		const struct http1_header *h = &resp->headers[i];
		const char *p = h->value.p, *e = p + h->value.len;
		struct http1_str el;

		if (!http1_str_ieq(h->name, "vary"))
			continue;
		while (vary_next(&p, e, &el)) {
			struct vary_name nm;
			size_t j;

			if (el.len == 1 && el.p[0] == '*')
				return -1;
			if (http1_str_ieq(el, "accept-encoding"))
				continue;
			if (el.len >= VARY_NAME_MAX)
				return -1;
			for (j = 0; j < el.len; j++) {
				if (!vary_tchar(el.p[j]))
					return -1;
				nm.p[j] = vary_lower(el.p[j]);
			}
			nm.len = el.len;
			for (j = 0; j < *n; j++)
				if (names[j].len == nm.len && memcmp(names[j].p, nm.p, nm.len) == 0)
					break;
			if (j < *n)
				continue;
			if (*n == VARY_FIELDS_MAX)
				return -1;
			for (j = *n; j > 0 && vary_slice_cmp(names[j - 1].p, names[j - 1].len,
							      nm.p, nm.len) > 0; j--)
				names[j] = names[j - 1];
			names[j] = nm;
			(*n)++;
		}
	}
	return 0;
}

bool vary_other(const struct http1_msg *resp)
{
	struct vary_name names[VARY_FIELDS_MAX];
	size_t n;

	return vary_names(resp, names, &n) < 0 || n > 0;
}

/* Whether resp is an image (Content-Type image/...). */
static bool vary_is_image(const struct http1_msg *resp)
{
	for (unsigned i = 0; i < resp->nheaders; i++) {
		const struct http1_header *h = &resp->headers[i];
		const char *p = h->value.p;
		size_t l = h->value.len;

		if (!http1_str_ieq(h->name, "content-type"))
			continue;
		while (l > 0 && vary_ows(*p)) {
			p++;
			l--;
		}
		return l > 6 && strncasecmp(p, "image/", 6) == 0;
	}
	return false;
}

static int vary_put(char *buf, size_t *n, size_t len, const char *p, size_t l)
{
	if (*n + l > len)
		return -1;
	memcpy(buf + *n, p, l);
	*n += l;
	return 0;
}

ssize_t vary_spec(const struct http1_msg *resp, const struct http1_msg *req,
		  const struct vary_formats *fm, char *buf, size_t len)
{
	struct vary_name names[VARY_FIELDS_MAX];
	size_t nnames, n = 0;
	bool image;

	if (vary_names(resp, names, &nnames) < 0)
		return -1;
	image = nnames > 0 && fm != NULL && fm->n > 0 && vary_is_image(resp);
	if (len > VARY_SPEC_MAX)
		len = VARY_SPEC_MAX;
	for (size_t i = 0; i < nnames; i++) {
		struct http1_str nm = { names[i].p, names[i].len };

		if (image && http1_str_ieq(nm, "accept")) {
			if (vary_put(buf, &n, len, VARY_IMAGE, sizeof(VARY_IMAGE) - 1) < 0
			    || vary_image_value(req, fm, buf, &n, len) < 0)
				return -1;
		} else if (vary_put(buf, &n, len, nm.p, nm.len) < 0
			   || vary_value(req, nm, buf, &n, len) < 0) {
			return -1;
		}
		if (vary_put(buf, &n, len, "\n", 1) < 0)
			return -1;
	}
	return (ssize_t)n;
}

/* The next line of a spec: its field name (up to ':' or the end) and the
 * whole line with its '\n'. false at the end (or on a broken spec). */
static bool vary_line(const char **pp, const char *e, struct http1_str *name,
		      struct http1_str *line)
{
	const char *p = *pp, *eol, *colon;

	if (p >= e || (eol = memchr(p, '\n', (size_t)(e - p))) == NULL)
		return false;
	colon = memchr(p, ':', (size_t)(eol - p));
	name->p = p;
	name->len = (size_t)((colon ? colon : eol) - p);
	line->p = p;
	line->len = (size_t)(eol + 1 - p);
	*pp = eol + 1;
	return true;
}

ssize_t vary_spec_from(const struct http1_msg *resp, struct http1_str prev,
		       char *buf, size_t len)
{
	struct vary_name names[VARY_FIELDS_MAX];
	size_t nnames, n = 0;

	if (vary_names(resp, names, &nnames) < 0)
		return -1;
	for (size_t i = 0; i < nnames; i++) {
		const char *p = prev.p, *e = prev.p + prev.len;
		struct http1_str nm, line;
		bool found = false;

		while (!found && vary_line(&p, e, &nm, &line))
			found = (nm.len == names[i].len && memcmp(nm.p, names[i].p, nm.len) == 0)
				|| (names[i].len == 6 && memcmp(names[i].p, "accept", 6) == 0
				    && http1_str_ieq(nm, VARY_IMAGE));
		if (!found || vary_put(buf, &n, len, line.p, line.len) < 0)
			return -1;
	}
	return (ssize_t)n;
}

ssize_t vary_rekey(struct http1_str spec, const struct http1_msg *req,
		   const struct vary_formats *fm, char *buf, size_t len)
{
	const char *p = spec.p, *e = spec.p + spec.len;
	struct http1_str nm, line;
	size_t n = 0;

	while (vary_line(&p, e, &nm, &line)) {
		if (vary_put(buf, &n, len, nm.p, nm.len) < 0)
			return -1;
		if (http1_str_ieq(nm, VARY_IMAGE)) {
			if (vary_image_value(req, fm, buf, &n, len) < 0)
				return -1;
		} else if (vary_value(req, nm, buf, &n, len) < 0) {
			return -1;
		}
		if (vary_put(buf, &n, len, "\n", 1) < 0)
			return -1;
	}
	return (ssize_t)n;
}

bool vary_match(struct http1_str spec, const struct http1_msg *req,
		const struct vary_formats *fm)
{
	char buf[VARY_SPEC_MAX];
	ssize_t n = vary_rekey(spec, req, fm, buf, sizeof(buf));

	return n >= 0 && (size_t)n == spec.len && memcmp(buf, spec.p, spec.len) == 0;
}

bool vary_same_fields(struct http1_str a, struct http1_str b)
{
	const char *pa = a.p, *ea = a.p + a.len, *pb = b.p, *eb = b.p + b.len;
	struct http1_str na, nb, la, lb;

	for (;;) {
		bool ma = vary_line(&pa, ea, &na, &la), mb = vary_line(&pb, eb, &nb, &lb);

		if (!ma || !mb)
			return ma == mb;
		if (na.len != nb.len || memcmp(na.p, nb.p, na.len) != 0)
			return false;
	}
}

ssize_t vary_request_lines(struct http1_str spec, const struct http1_msg *req,
			   char *buf, size_t len)
{
	const char *p = spec.p, *e = spec.p + spec.len;
	struct http1_str nm, line;
	size_t n = 0;

	while (vary_line(&p, e, &nm, &line)) {
		if (http1_str_ieq(nm, VARY_IMAGE)) {
			size_t l = vary_accept_line(spec, buf + n, len - n);

			if (l == 0)
				return -1;
			n += l;
			continue;
		}
		for (unsigned i = 0; req != NULL && i < req->nheaders; i++) {
			const struct http1_header *h = &req->headers[i];

			if (h->name.len != nm.len || strncasecmp(h->name.p, nm.p, nm.len) != 0)
				continue;
			if (vary_put(buf, &n, len, h->name.p, h->name.len) < 0
			    || vary_put(buf, &n, len, ": ", 2) < 0
			    || vary_put(buf, &n, len, h->value.p, h->value.len) < 0
			    || vary_put(buf, &n, len, "\r\n", 2) < 0)
				return -1;
		}
	}
	return (ssize_t)n;
}
