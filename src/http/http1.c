/*
 * http1.c -- ringproxy's HTTP/1.1 codec (RFC 9110, RFC 9112): parses request
 * and response heads in place, decides body framing and connection handling
 * once, walks chunked bodies as they stream, and writes heads back out as an
 * iovec gather. Pure: no I/O, no allocation; any thread may call it, a
 * struct belongs to the one connection that uses it.
 *
 * Strictness is the point: a proxy that reads a message differently from the
 * server behind it lets a client smuggle a second request past it. Every
 * ambiguity is refused, and the framing we forward is always one canonical
 * line we generate ourselves, so a backend never sees the client's framing
 * headers. Decisions where RFC 9112 leaves a choice:
 *  - bare LF as a line end is refused (400/502), never treated as CRLF: a
 *    backend that does accept it would see different lines than we do.
 *  - empty lines (CRLF) before a request line are skipped, any number, all
 *    counted against max_head (RFC 9112 section 2.2: clients sometimes add a
 *    CRLF after a POST body). Not before a status line.
 *  - Transfer-Encoding in a request: we decode no transfer coding, so the
 *    only accepted value is exactly "chunked" (one coding, in one or more
 *    headers). A last coding other than chunked, chunked twice, an empty list
 *    element, or TE in an HTTP/1.0 request is 400; chunked after other
 *    codings ("gzip, chunked") is 501. TE with Content-Length is 400.
 *  - Transfer-Encoding in a response: exactly "chunked" frames the body.
 *    Any other coding ("gzip", "chunked, gzip", "gzip, chunked") or chunked
 *    in an HTTP/1.0 response is 502: RFC 9112 6.3 would read such a body
 *    until close, but Transfer-Encoding is hop-by-hop, so the client would
 *    get coded bytes as plain content. A response without a body (HEAD,
 *    1xx, 204, 304) is not refused for its codings.
 *  - Content-Length on a 1xx or 204 response (RFC 9110 8.6 forbids it) is
 *    dropped; on a 304 or a response to HEAD it is relayed.
 *  - OWS around field values is not part of the value, so "chunked " and
 *    "\tchunked" are chunked; whitespace between name and colon is 400.
 *  - Content-Length: a comma list of identical values is one value; any
 *    difference, empty element, sign, non-digit or a value above 2^63-1 is
 *    400/502. Lengths and chunk sizes are bounded by 2^63-1 (the largest
 *    off_t; RFC 9110 8.6 asks a recipient to guard against overflow), so
 *    no peer that keeps them in a signed 64-bit integer reads a negative
 *    length where we read a large one.
 *  - Request paths: dot-segments ("." and "..", also as %2e) between '/'
 *    are removed before forwarding (RFC 3986 5.2.4), so a backend URL's
 *    prefix confines every path; one delimited by %2f, a backslash, %5c or
 *    followed by ";" is 400 (see http1_path_dots). %2f itself is relayed.
 *  - Connection may not make Host or the headers the writer generates
 *    (framing, X-Forwarded-For, X-Forwarded-Proto, Via) hop-by-hop.
 *  - Forwarding headers a client can set and a backend may build URLs
 *    from (Forwarded, X-Forwarded-Host/-Port/-Prefix/-Scheme/-Server/-Ssl,
 *    X-Host, X-Original-URL, X-Rewrite-URL) are flagged, so the writer
 *    leaves them out of a request whose answer may be shared.
 */
#include "http/http1.h"

#include <string.h>
#include <strings.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "base/decfmt.h"

/* Character classes, one table lookup per byte on the hot loops. */
#define C_TOKEN  0x01u  /* tchar (RFC 9110 5.6.2) */
#define C_VALUE  0x02u  /* field-vchar, SP, HTAB, obs-text */
#define C_TARGET 0x04u  /* request-target: VCHAR except '#' */
#define C_HOST   0x08u  /* Host: reg-name, IP literal, port */
#define C_NAME   0x10u  /* tchar but '_': a header name's span stops at
			   the '_' that flags it (HTTP1_HDR_UNDERSCORE) */

#define C_IS_ALNUM(c) (((c) >= '0' && (c) <= '9') || ((c) >= 'a' && (c) <= 'z') \
		       || ((c) >= 'A' && (c) <= 'Z'))
#define C_IS_TOKEN(c) (C_IS_ALNUM(c) || (c) == '!' || (c) == '#' || (c) == '$' \
		       || (c) == '%' || (c) == '&' || (c) == '\'' || (c) == '*' \
		       || (c) == '+' || (c) == '-' || (c) == '.' || (c) == '^' \
		       || (c) == '_' || (c) == '`' || (c) == '|' || (c) == '~')
#define C_IS_HOST(c) (C_IS_ALNUM(c) || (c) == '-' || (c) == '.' || (c) == '_' \
		      || (c) == '~' || (c) == '!' || (c) == '$' || (c) == '&' \
		      || (c) == '\'' || (c) == '(' || (c) == ')' || (c) == '*' \
		      || (c) == '+' || (c) == ',' || (c) == ';' || (c) == '=' \
		      || (c) == ':' || (c) == '[' || (c) == ']' || (c) == '%')
#define C_OF(c) ((C_IS_TOKEN(c) ? C_TOKEN : 0u) \
		 | ((C_IS_TOKEN(c) && (c) != '_') ? C_NAME : 0u) \
		 | (((c) == '\t' || ((c) >= 0x20 && (c) != 0x7f)) ? C_VALUE : 0u) \
		 | (((c) > 0x20 && (c) < 0x7f && (c) != '#') ? C_TARGET : 0u) \
		 | (C_IS_HOST(c) ? C_HOST : 0u))
#define C_4(c)   C_OF(c), C_OF((c) + 1), C_OF((c) + 2), C_OF((c) + 3)
#define C_16(c)  C_4(c), C_4((c) + 4), C_4((c) + 8), C_4((c) + 12)
#define C_64(c)  C_16(c), C_16((c) + 16), C_16((c) + 32), C_16((c) + 48)

static const unsigned char http1_cls[256] = {
	C_64(0), C_64(64), C_64(128), C_64(192)
};

#define HTTP1_IS(c, k) (http1_cls[(unsigned char)(c)] & (k))
/* Whether all four bytes at p are in class k: one test for four. */
#define HTTP1_IS4(p, k) (http1_cls[(unsigned char)(p)[0]] & http1_cls[(unsigned char)(p)[1]] \
			 & http1_cls[(unsigned char)(p)[2]] & http1_cls[(unsigned char)(p)[3]] & (k))
#define HTTP1_OWS(c) ((c) == ' ' || (c) == '\t')
/* HTTP1_OWS of a byte of a value http1_value_end found good, or of its
 * CR: SP and HTAB are the only value bytes at or below SP, so one compare
 * (two and an OR were 60 instructions of a forward's trimming) */
#define HTTP1_VOWS(c) ((unsigned char)(c) <= ' ')

static unsigned char http1_lower(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') ? (unsigned char)(c | 0x20) : c;
}

/* Eight bytes of p, in memory order. */
static inline uint64_t http1_load8(const char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* Four bytes of p, in memory order. */
static inline uint32_t http1_load4(const char *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* Case-insensitive compare of n bytes of a parsed name or value with a
 * lowercase literal; inlined on the header classification path, where
 * most names differ in byte one. Eight bytes at a time, from four on four
 * (the first and the last four, which may overlap: byte by byte, Host
 * and Date were 30 instructions a forward more): OR-ing 0x20 into each
 * byte folds a letter's case, and the only other bytes it maps onto a
 * literal's ('-', digits) are CTLs ('\r', 0x11...), which no parsed name
 * or value holds. */
static inline bool http1_ieqn(const char *p, const char *lower, size_t n)
{
	const uint64_t fold = 0x2020202020202020u;
	size_t i;

	if (n >= 8) {
		for (i = 0; i + 8 < n; i += 8) {
			if ((http1_load8(p + i) | fold) != http1_load8(lower + i))
				return false;
		}
		return (http1_load8(p + n - 8) | fold) == http1_load8(lower + n - 8);
	}
	if (n >= 4)
		return (http1_load4(p) | (uint32_t)fold) == http1_load4(lower)
		       && (http1_load4(p + n - 4) | (uint32_t)fold) == http1_load4(lower + n - 4);
	for (i = 0; i < n; i++) {
		if (http1_lower((unsigned char)p[i]) != (unsigned char)lower[i])
			return false;
	}
	return true;
}

#define HTTP1_IEQ(s, lit) ((s).len == sizeof(lit) - 1 && http1_ieqn((s).p, (lit), sizeof(lit) - 1))

static bool http1_slice_ieq(struct http1_str a, struct http1_str b)
{
	size_t i;

	if (a.len != b.len)
		return false;
	for (i = 0; i < a.len; i++) {
		if (http1_lower((unsigned char)a.p[i]) != http1_lower((unsigned char)b.p[i]))
			return false;
	}
	return true;
}

void http1_msg_init(struct http1_msg *m)
{
	memset(m, 0, sizeof(*m));
}

#ifdef __SSE2__
/* The bytes of x that are CTLs but HTAB (unsigned < 0x20) or DEL: a
 * byte-wise minimum with 0x1f leaves exactly those below 0x20 equal. */
static __m128i http1_bad16(__m128i x)
{
	__m128i ctl = _mm_cmpeq_epi8(_mm_min_epu8(x, _mm_set1_epi8(0x1f)), x);

	return _mm_or_si128(_mm_andnot_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('\t')), ctl),
			    _mm_cmpeq_epi8(x, _mm_set1_epi8(0x7f)));
}
#endif

#ifdef __SSE2__
/* Bytes of x in [lo, lo + n]: unsigned x - lo at most n. */
static __m128i http1_in16(__m128i x, char lo, char n)
{
	__m128i t = _mm_sub_epi8(x, _mm_set1_epi8(lo));

	return _mm_cmpeq_epi8(_mm_min_epu8(t, _mm_set1_epi8(n)), t);
}

/* The bytes of x in C_NAME (tchar but '_'), as a 16-bit mask: letters
 * (folded to lower case), digits, '!' to '\'' but '"', '*' to '.' but
 * ',', and '^', '`', '|', '~'. */
static unsigned http1_name16(__m128i x)
{
	__m128i ok = _mm_or_si128(http1_in16(_mm_or_si128(x, _mm_set1_epi8(0x20)), 'a', 25),
				  http1_in16(x, '0', 9));

	ok = _mm_or_si128(ok, _mm_andnot_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')), http1_in16(x, '!', 6)));
	ok = _mm_or_si128(ok, _mm_andnot_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8(',')), http1_in16(x, '*', 4)));
	ok = _mm_or_si128(ok, _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('^')),
					   _mm_cmpeq_epi8(x, _mm_set1_epi8('`'))));
	ok = _mm_or_si128(ok, _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('|')),
					   _mm_cmpeq_epi8(x, _mm_set1_epi8('~'))));
	return (unsigned)_mm_movemask_epi8(ok);
}

/* The bytes of x that are letters, digits or '-', as a 16-bit mask: a
 * third of http1_name16's work, and all that most names hold. */
static unsigned http1_alnum16(__m128i x)
{
	__m128i ok = _mm_or_si128(http1_in16(_mm_or_si128(x, _mm_set1_epi8(0x20)), 'a', 25),
				  http1_in16(x, '0', 9));

	return (unsigned)_mm_movemask_epi8(_mm_or_si128(ok, _mm_cmpeq_epi8(x, _mm_set1_epi8('-'))));
}
#endif

/* The first byte at or after p that is not field-vchar, SP, HTAB or
 * obs-text: the CR that ends a valid value, or the byte that makes it
 * invalid; e when [p, e) has none (bytes that stop before the head's
 * end). [lo, e) are the bytes of the head that may be read.
 * Values (User-Agent, cookies, a response's dates and types) are most of a
 * head's bytes: sixteen a step with SSE2 (a debugoptimized -O2 build does
 * not vectorise the loop: with a memchr for the CR first, the two took
 * 1,900 instructions of a forwarded request). The last step is the 16
 * bytes that end at e, of which only those from p count, so no load
 * leaves the head; only a head under 16 bytes takes the byte loop. */
static const char *http1_value_end(const char *lo, const char *p, const char *e)
{
#ifdef __SSE2__
	unsigned m;

	for (; e - p >= 16; p += 16) {
		m = (unsigned)_mm_movemask_epi8(http1_bad16(_mm_loadu_si128((const __m128i *)(const void *)p)));
		if (m)
			return p + __builtin_ctz(m);
	}
	if (e - lo >= 16) {
		/* bit i is byte e - 16 + i: p's are the top e - p bits */
		m = (unsigned)_mm_movemask_epi8(
			http1_bad16(_mm_loadu_si128((const __m128i *)(const void *)(e - 16))));
		m >>= 16 - (e - p);
		return m ? p + __builtin_ctz(m) : e;
	}
#else
	(void)lo;
#endif
	while (p < e && HTTP1_IS(*p, C_VALUE))
		p++;
	return p;
}

/* First byte at or after p outside class k, or e when [p, e) has none
 * (CR and LF are in no span class, so a complete head always has one).
 * Unrolled: names and targets are the hot loops. */
static const char *http1_span(const char *p, const char *e, unsigned k)
{
	while (e - p >= 4 && HTTP1_IS4(p, k))
		p += 4;
	while (p < e && HTTP1_IS(*p, k))
		p++;
	return p;
}

/* The first byte at or after p that is not in C_NAME, or e: sixteen bytes
 * a step while they are before e, then http1_span. Names are a head's
 * hottest loop after values: a byte at a time they took 870 instructions
 * of a forwarded request. */
static const char *http1_name_end(const char *p, const char *e)
{
#ifdef __SSE2__
	/* the usual name is letters, digits and '-' up to its ':', which
	 * is not in C_NAME: its end is the first other byte when that is
	 * the ':'; any other byte there is classified in full */
	for (; e - p >= 16; p += 16) {
		unsigned m = ~http1_alnum16(_mm_loadu_si128((const __m128i *)(const void *)p)) & 0xffffu;

		if (m) {
			p += __builtin_ctz(m);
			if (*p == ':')
				return p;
			break;
		}
	}
	for (; e - p >= 16; p += 16) {
		unsigned m = ~http1_name16(_mm_loadu_si128((const __m128i *)(const void *)p)) & 0xffffu;

		if (m)
			return p + __builtin_ctz(m);
	}
#endif
	return http1_span(p, e, C_NAME);
}

/* Sets m->error and returns -status: the caller's single way to fail. */
static ssize_t http1_fail(struct http1_msg *m, int status, const char *why)
{
	m->error = why;
	return -(ssize_t)status;
}

/* What the head's parts return when its bytes ran out before its end:
 * only the one-pass parse sees it (http1_parse), since a head that
 * http1_find_end found ends in CRLF, where every scan stops. */
#define HTTP1_SHORT (-1)

/*
 * Finds the end of the head, resuming at m->scan_ so a head that arrives a
 * byte at a time costs O(n) in all. Every LF must follow a CR. Returns the
 * head length, 0 for need more, or -status.
 */
static ssize_t http1_find_end(struct http1_msg *m, const char *buf, size_t len,
			      size_t max_head, bool request)
{
	size_t lim = len < max_head ? len : max_head;
	size_t i = m->scan_;
	const char *lf;

	while (i < lim) {
		lf = memchr(buf + i, '\n', lim - i);
		if (lf == NULL) {
			i = lim;
			break;
		}
		i = (size_t)(lf - buf);
		if (i == 0 || buf[i - 1] != '\r')
			return http1_fail(m, 400, "bare LF line ending");
		i++;
		if (i - m->line_ == 2) {
			if (m->line_ != m->start_)
				return (ssize_t)i;
			if (!request)
				return http1_fail(m, 400, "empty line before status line");
			m->start_ = i;          /* leading CRLF before a request line */
		}
		m->line_ = i;
	}
	m->scan_ = i;
	if (len > max_head)
		return http1_fail(m, 431, "head larger than max_head");
	return 0;
}

static enum http1_method http1_method_id(const char *p, size_t n)
{
	switch (n) {
	case 3:
		if (memcmp(p, "GET", 3) == 0)
			return HTTP1_M_GET;
		if (memcmp(p, "PUT", 3) == 0)
			return HTTP1_M_PUT;
		break;
	case 4:
		if (memcmp(p, "HEAD", 4) == 0)
			return HTTP1_M_HEAD;
		if (memcmp(p, "POST", 4) == 0)
			return HTTP1_M_POST;
		break;
	case 5:
		if (memcmp(p, "PATCH", 5) == 0)
			return HTTP1_M_PATCH;
		if (memcmp(p, "TRACE", 5) == 0)
			return HTTP1_M_TRACE;
		break;
	case 6:
		if (memcmp(p, "DELETE", 6) == 0)
			return HTTP1_M_DELETE;
		break;
	case 7:
		if (memcmp(p, "OPTIONS", 7) == 0)
			return HTTP1_M_OPTIONS;
		if (memcmp(p, "CONNECT", 7) == 0)
			return HTTP1_M_CONNECT;
		break;
	}
	return HTTP1_M_OTHER;
}

/*
 * "HTTP/" DIGIT "." DIGIT at p, followed by CR. Returns the minor version,
 * or -status: 400 when malformed, 505 for a well-formed version we do not
 * speak.
 */
static int http1_version(const char *p, const char **after)
{
	if (http1_load8(p) == http1_load8("HTTP/1.1")) {       /* the usual one: one test */
		*after = p + 8;
		return 1;
	}
	if (memcmp(p, "HTTP/", 5) != 0 || p[5] < '0' || p[5] > '9' || p[6] != '.'
	    || p[7] < '0' || p[7] > '9')
		return -400;
	*after = p + 8;
	if (p[5] != '1' || p[7] > '1')
		return -505;
	return p[7] - '0';
}

/* ---- request paths ----------------------------------------------------- */

/* What the path segment [s, e) is: 1 ".", 2 "..", -1 either followed by
 * ";" parameters (read as a dot-segment by servers that drop path
 * parameters first), 0 a name. */
static int http1_dot_segment(const char *s, const char *e)
{
	int dots = 0;

	while (s < e && *s != ';') {
		if (*s == '.')
			s++;
		else if (e - s >= 3 && s[0] == '%' && s[1] == '2' && (s[2] == 'e' || s[2] == 'E'))
			s += 3;
		else
			return 0;
		if (++dots > 2)
			return 0;
	}
	if (dots == 0)
		return 0;
	return s < e ? -1 : dots;
}

/* Bytes of the segment delimiter at p[0..n): 1 for '/' (*slash set) or a
 * backslash, 3 for %2f or %5c in either case, 0 for none. */
static size_t http1_path_delim(const char *p, size_t n, bool *slash)
{
	*slash = p[0] == '/';
	if (p[0] == '/' || p[0] == '\\')
		return 1;
	if (p[0] == '%' && n >= 3 && ((p[1] == '2' && (p[2] == 'f' || p[2] == 'F'))
				      || (p[1] == '5' && (p[2] == 'c' || p[2] == 'C'))))
		return 3;
	return 0;
}

/* Whether p starts a segment of path: at its start or after a delimiter. */
static bool http1_seg_start(const char *path, const char *p)
{
	bool slash;

	if (p == path || p[-1] == '/' || p[-1] == '\\')
		return true;
	return p - path >= 3 && http1_path_delim(p - 3, 3, &slash) == 3;
}

/* Whether path may hold a dot-segment: a '.' or "%2e" starting a segment.
 * Two memchr scans, so the usual path ("/t/a.jpg") costs a few ns. */
static bool http1_maybe_dots(const char *path, size_t len)
{
	const char *e = path + len, *p;

	for (p = memchr(path, '.', len); p; p = memchr(p + 1, '.', (size_t)(e - p - 1)))
		if (http1_seg_start(path, p))
			return true;
	for (p = memchr(path, '%', len); p; p = memchr(p + 1, '%', (size_t)(e - p - 1)))
		if (e - p >= 3 && p[1] == '2' && (p[2] == 'e' || p[2] == 'E') && http1_seg_start(path, p))
			return true;
	return false;
}

int http1_path_dots(const char *path, size_t len)
{
	size_t i = 0, s = 0, d;
	bool left = true, right;        /* delimiters are '/', not encoded */
	int found = 0, k;

	if (!http1_maybe_dots(path, len))
		return 0;
	for (;;) {
		if (i == len) {
			d = 0;
			right = true;
		} else {
			char ch = path[i];

			if (ch != '/' && ch != '\\' && ch != '%') {
				i++;
				continue;
			}
			d = http1_path_delim(path + i, len - i, &right);
			if (d == 0) {
				i++;
				continue;
			}
		}
		k = i > s ? http1_dot_segment(path + s, path + i) : 0;
		if (k < 0 || (k > 0 && !(left && right)))
			return -1;
		if (k > 0)
			found = 1;
		if (i == len)
			return found;
		left = right;
		i += d;
		s = i;
	}
}

size_t http1_path_clean(const char *path, size_t len, char *out)
{
	size_t i = 0, o = 0, e;
	int k;

	while (i < len) {               /* path[i] is '/' */
		for (e = i + 1; e < len && path[e] != '/'; e++)
			;
		k = http1_dot_segment(path + i + 1, path + e);
		if (k == 2) {           /* drop the last output segment */
			while (o > 0 && out[--o] != '/')
				;
		}
		if (k > 0) {
			if (e == len)   /* "/a/.." ends as "/a/" would: "/" */
				out[o++] = '/';
		} else {
			memcpy(out + o, path + i, e - i);
			o += e - i;
		}
		i = e;
	}
	return o;
}

/* What the request line's sixteen-byte scan saw of a target it found the
 * end of: where its first '?' is (NULL: none) and
 * whether its part before it is free of '%' and of a '.' that starts a
 * segment, so holds no dot-segment (http1_maybe_dots would say false). */
struct http1_hint {
	bool known;
	bool clean;
	const char *q;
};

#ifdef __SSE2__
/* The end of a request target at p, with *hint, scanned sixteen bytes a
 * step while a whole step lies before e; NULL when the target goes on
 * past the last such step (then it is scanned a byte at a time). A
 * thumbnail's path is longer than sixteen bytes ("/thumbs/1/1_200x200.jpg"):
 * by bytes, with the memchr for its '?' and the dot-segment scan, it was
 * 140 instructions of a hit. */
static const char *http1_target16(const char *p, const char *e, struct http1_hint *hint)
{
	const char *q = NULL;
	bool clean = true, in_path = true;
	unsigned carry = 1;     /* a segment starts at the target's start */

	for (; e - p >= 16; p += 16) {
		__m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
		__m128i ok = _mm_andnot_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('#')),
					      http1_in16(x, '!', 0x7e - '!'));
		unsigned end = ~(unsigned)_mm_movemask_epi8(ok) & 0xffffu;
		unsigned path = end ? (1u << __builtin_ctz(end)) - 1 : 0xffffu, qm, dots, pct, sep;

		if (in_path) {
			qm = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8('?'))) & path;
			if (qm) {
				q = p + __builtin_ctz(qm);
				path = (1u << __builtin_ctz(qm)) - 1;
				in_path = false;
			}
			dots = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8('.')));
			pct = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8('%')));
			/* a segment starts after '/' and after a backslash */
			sep = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('/')),
								       _mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))));
			if (((pct | (dots & (sep << 1 | carry))) & path) != 0)
				clean = false;
			carry = sep >> 15;
		}
		if (end) {
			hint->known = true;
			hint->clean = clean;
			hint->q = q;
			return p + __builtin_ctz(end);
		}
	}
	return NULL;
}
#endif

/* Splits the request target into path and query; -status on a bad form.
 * hint, when known, is of an origin-form target's bytes: no memchr for
 * the '?', and no dot-segment scan of a clean path. */
static ssize_t http1_target(struct http1_msg *m, const struct http1_hint *hint)
{
	const char *t = m->target.p, *e = t + m->target.len, *p, *q;
	bool origin = t[0] == '/' && hint->known;

	if (m->method_id == HTTP1_M_CONNECT)
		return http1_fail(m, 405, "CONNECT is not supported");
	if (t[0] == '*') {
		if (m->target.len != 1 || m->method_id != HTTP1_M_OPTIONS)
			return http1_fail(m, 400, "asterisk-form only with OPTIONS");
		m->path = m->target;
		return 0;
	}
	p = t;
	if (t[0] != '/') {
		struct http1_str s = { t, 0 };
		size_t skip = 0;

		s.len = m->target.len < 7 ? m->target.len : 7;
		if (http1_str_ieq(s, "http://"))
			skip = 7;
		s.len = m->target.len < 8 ? m->target.len : 8;
		if (http1_str_ieq(s, "https://"))
			skip = 8;
		if (skip == 0) {
			if (memchr(t, ':', m->target.len) != NULL && memchr(t, '/', m->target.len) == NULL)
				return http1_fail(m, 405, "authority-form is not supported");
			return http1_fail(m, 400, "invalid request target");
		}
		/* absolute-form: routing uses the path; the authority replaces
		 * Host when forwarding (RFC 9112 section 3.2.2) */
		p = t + skip;
		while (p < e && *p != '/' && *p != '?')
			p++;
		if (p == t + skip)
			return http1_fail(m, 400, "absolute-form without authority");
		m->authority.p = t + skip;
		m->authority.len = (size_t)(p - (t + skip));
		for (size_t i = 0; i < m->authority.len; i++)
			if (!HTTP1_IS(m->authority.p[i], C_HOST) || m->authority.p[i] == '@')
				return http1_fail(m, 400, "invalid authority in the request target");
	}
	q = origin ? hint->q : memchr(p, '?', (size_t)(e - p));
	if (q == NULL) {
		m->path.p = p;
		m->path.len = (size_t)(e - p);
	} else {
		m->path.p = p;
		m->path.len = (size_t)(q - p);
		m->query.p = q + 1;
		m->query.len = (size_t)(e - q - 1);
		m->has_query = true;
	}
	if (m->path.len == 0) {
		m->path.p = "/";                /* "http://h" or "http://h?x" */
		m->path.len = 1;
	}
	if (origin && hint->clean)
		return 0;
	switch (http1_path_dots(m->path.p, m->path.len)) {
	case -1:
		return http1_fail(m, 400, "a dot-segment next to an encoded slash, a backslash or a ';'");
	case 1:
		m->path_dots = m->path.p[0] == '/';
		break;
	}
	return 0;
}

/* What a header name means to the proxy. */
enum http1_kind {
	K_OTHER = 0, K_CONNECTION, K_HOP, K_TE, K_CL, K_XFF, K_GEN, K_HOST, K_FWD,
	K_EXPECT, K_UPGRADE, K_TIER,
};

static enum http1_kind http1_kind(struct http1_str n)
{
	switch (n.len) {
	case 2:
		return HTTP1_IEQ(n, "te") ? K_HOP : K_OTHER;
	case 3:
		if (HTTP1_IEQ(n, "via"))
			return K_GEN;
		return HTTP1_IEQ(n, "age") ? K_TIER : K_OTHER;
	case 4:
		return HTTP1_IEQ(n, "host") ? K_HOST : K_OTHER;
	case 6:
		if (HTTP1_IEQ(n, "expect"))
			return K_EXPECT;
		return HTTP1_IEQ(n, "x-host") ? K_FWD : K_OTHER;
	case 7:
		if (HTTP1_IEQ(n, "upgrade"))
			return K_UPGRADE;
		if (HTTP1_IEQ(n, "trailer"))
			return K_HOP;
		return HTTP1_IEQ(n, "x-cache") ? K_TIER : K_OTHER;
	case 9:
		if (HTTP1_IEQ(n, "forwarded"))
			return K_FWD;
		return HTTP1_IEQ(n, "x-varnish") ? K_TIER : K_OTHER;
	case 10:
		if (HTTP1_IEQ(n, "connection"))
			return K_CONNECTION;
		return HTTP1_IEQ(n, "keep-alive") ? K_HOP : K_OTHER;
	case 12:
		return HTTP1_IEQ(n, "cache-status") ? K_TIER : K_OTHER;
	case 13:
		return HTTP1_IEQ(n, "x-rewrite-url") ? K_FWD : K_OTHER;
	case 14:
		if (HTTP1_IEQ(n, "content-length"))
			return K_CL;
		return HTTP1_IEQ(n, "x-original-url") ? K_FWD : K_OTHER;
	case 15:
		if (HTTP1_IEQ(n, "x-forwarded-for"))
			return K_XFF;
		return HTTP1_IEQ(n, "x-forwarded-ssl") ? K_FWD : K_OTHER;
	case 16:
		if (HTTP1_IEQ(n, "proxy-connection"))
			return K_HOP;
		return HTTP1_IEQ(n, "x-forwarded-host") || HTTP1_IEQ(n, "x-forwarded-port") ? K_FWD : K_OTHER;
	case 17:
		if (HTTP1_IEQ(n, "transfer-encoding"))
			return K_TE;
		return HTTP1_IEQ(n, "x-forwarded-proto") ? K_GEN : K_OTHER;
	case 18:
		return HTTP1_IEQ(n, "x-forwarded-prefix") || HTTP1_IEQ(n, "x-forwarded-scheme")
		       || HTTP1_IEQ(n, "x-forwarded-server") ? K_FWD : K_OTHER;
	}
	return K_OTHER;
}

/* Next element of a comma list in [*pp, e), OWS trimmed; false at the end. */
static bool http1_list_next(const char **pp, const char *e, struct http1_str *out)
{
	const char *p = *pp, *s, *t;

	if (p > e)
		return false;
	s = p;
	while (p < e && *p != ',')
		p++;
	t = p;
	while (s < t && HTTP1_OWS(*s))
		s++;
	while (t > s && HTTP1_OWS(t[-1]))
		t--;
	out->p = s;
	out->len = (size_t)(t - s);
	*pp = p + 1;
	return true;
}

/* Content-Length: a list of identical decimal values, each at most
 * HTTP1_MAX_LENGTH. 0 or -1. */
static int http1_content_length(struct http1_str v, uint64_t *cl, bool *have)
{
	const char *p = v.p, *e = v.p + v.len;
	struct http1_str el;
	uint64_t n = 0;
	size_t i;

	/* the usual value, one number of up to 18 digits (below 2^63), is
	 * read without the list's split or the overflow test per digit; a
	 * comma or any other byte takes the loop below. Up to eight digits,
	 * as one word: the eight bytes that end the value (the name and its
	 * colon are before it), those before it made '0', every byte tested
	 * for a digit at once and the digits combined in pairs, fours and
	 * eights (a digit a step was 40 instructions of a forward) */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	/* (the combining takes the first digit from the lowest byte) */
	if (v.len >= 1 && v.len <= 8) {
		uint64_t x = http1_load8(v.p + v.len - 8), keep = ~UINT64_C(0) << (8 * (8 - v.len));

		x = (x & keep) | (UINT64_C(0x3030303030303030) & ~keep);
		if ((x & UINT64_C(0xf0f0f0f0f0f0f0f0)) == UINT64_C(0x3030303030303030)
		    && ((x + UINT64_C(0x0606060606060606)) & UINT64_C(0xf0f0f0f0f0f0f0f0))
		       == UINT64_C(0x3030303030303030)) {
			x = (x & UINT64_C(0x0f0f0f0f0f0f0f0f)) * 2561 >> 8;
			x = (x & UINT64_C(0x00ff00ff00ff00ff)) * 6553601 >> 16;
			n = (x & UINT64_C(0x0000ffff0000ffff)) * UINT64_C(42949672960001) >> 32;
			i = v.len;
			goto one;
		}
	}
#endif
	for (i = 0; i < v.len && i < 18 && (unsigned)((unsigned char)v.p[i] - '0') <= 9u; i++)
		n = n * 10 + (unsigned)((unsigned char)v.p[i] - '0');
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
one:
#endif
	if (i == v.len && i != 0) {
		if (*have && n != *cl)
			return -1;
		*cl = n;
		*have = true;
		return 0;
	}
	while (http1_list_next(&p, e, &el)) {
		if (el.len == 0)
			return -1;
		n = 0;
		for (i = 0; i < el.len; i++) {
			unsigned d = (unsigned char)el.p[i] - '0';

			if (d > 9 || n > (HTTP1_MAX_LENGTH - d) / 10)
				return -1;
			n = n * 10 + d;
		}
		if (*have && n != *cl)
			return -1;
		*cl = n;
		*have = true;
	}
	return 0;
}

/* Transfer-Encoding codings, accumulated over all TE headers. */
struct http1_te {
	unsigned ncodings;
	unsigned nchunked;
	bool last_chunked;
	bool bad;               /* empty element */
};

static void http1_te_add(struct http1_te *te, struct http1_str v)
{
	const char *p = v.p, *e = v.p + v.len;
	struct http1_str el;

	while (http1_list_next(&p, e, &el)) {
		if (el.len == 0) {
			te->bad = true;
			continue;
		}
		te->ncodings++;
		te->last_chunked = HTTP1_IEQ(el, "chunked");
		if (te->last_chunked)
			te->nchunked++;
	}
}

/* Connection: close / keep-alive / upgrade tokens, and names it makes
 * hop-by-hop. Host and the headers the writer owns stay as they are. */
static void http1_connection(struct http1_msg *m, struct http1_str v,
			     bool *close, bool *ka, bool *upg)
{
	const char *p = v.p, *e = v.p + v.len;
	struct http1_str el;
	unsigned i;

	while (http1_list_next(&p, e, &el)) {
		if (el.len == 0)
			continue;
		if (HTTP1_IEQ(el, "close")) {
			*close = true;
			continue;
		}
		if (HTTP1_IEQ(el, "keep-alive")) {
			*ka = true;
			continue;
		}
		if (HTTP1_IEQ(el, "upgrade"))
			*upg = true;
		for (i = 0; i < m->nheaders; i++) {
			struct http1_header *h = &m->headers[i];

			if ((h->flags & ~HTTP1_HDR_FWD) == 0 && http1_slice_ieq(h->name, el)
			    && !HTTP1_IEQ(h->name, "host"))
				h->flags = HTTP1_HDR_HOP;
		}
	}
}

/* What the header fields said about framing and the connection, for
 * the framing functions. */
struct http1_seen {
	struct http1_te te;
	bool have_cl, has_upgrade, has_te;
	unsigned nhost, nconn;
};

/* The request line from *pp (at the method) to its CR: method, target,
 * version. 0 (*pp at the CR, before e - 1), a negative status (http1_fail)
 * or HTTP1_SHORT. */
static ssize_t http1_request_line(struct http1_msg *m, const char **pp, const char *e)
{
	const char *p = *pp, *s;
	struct http1_hint hint = { false, false, NULL };
	/* the usual method: no byte loop, no lookup */
	bool get = e - p >= 4 && memcmp(p, "GET ", 4) == 0;
	ssize_t r;
	int v;

	s = p;
	p += get ? 3 : 0;
	while (p < e && HTTP1_IS(*p, C_TOKEN))
		p++;
	if (p == e)
		return HTTP1_SHORT;
	if (p == s || *p != ' ')
		return http1_fail(m, 400, "invalid method");
	m->method.p = s;
	m->method.len = (size_t)(p - s);
	m->method_id = get ? HTTP1_M_GET : http1_method_id(s, m->method.len);
	s = ++p;
#ifdef __SSE2__
	if ((p = http1_target16(s, e, &hint)) == NULL)
		p = http1_span(s, e, C_TARGET);
#else
	p = http1_span(p, e, C_TARGET);
#endif
	if (e - p < 2)
		return HTTP1_SHORT;
	if (p == s)
		return http1_fail(m, 400, "invalid request target");
	m->target.p = s;
	m->target.len = (size_t)(p - s);
	if (*p == '\r' && p[1] == '\n')
		return http1_fail(m, 505, "HTTP/0.9 request line");
	if (*p != ' ')
		return http1_fail(m, 400, "invalid character in request target");
	p++;
	if (e - p < 10)
		return http1_fail(m, 400, "malformed HTTP version");
	v = http1_version(p, &p);
	if (v == -400 || *p != '\r')
		return http1_fail(m, 400, "malformed HTTP version");
	if (v < 0)
		return http1_fail(m, 505, "HTTP version not supported");
	m->minor = v;
	r = http1_target(m, &hint);
	if (r < 0)
		return r;
	*pp = p;
	return 0;
}

/* The status line from *pp to its CR: version, status, reason. 0 (*pp at
 * the CR, before e - 1), a negative status or HTTP1_SHORT. */
static ssize_t http1_status_line(struct http1_msg *m, const char **pp, const char *e)
{
	const char *p = *pp, *s;
	int v;

	if (e - p < 14)
		return http1_fail(m, 400, "malformed status line");
	v = http1_version(p, &p);
	if (v == -400 || *p != ' ')
		return http1_fail(m, 400, "malformed HTTP version");
	if (v < 0)
		return http1_fail(m, 505, "HTTP version not supported");
	m->minor = v;
	p++;
	if (p[0] < '1' || p[0] > '5' || p[1] < '0' || p[1] > '9' || p[2] < '0' || p[2] > '9')
		return http1_fail(m, 400, "invalid status code");
	m->status = (p[0] - '0') * 100 + (p[1] - '0') * 10 + (p[2] - '0');
	p += 3;
	if (*p == ' ') {
		s = ++p;
		while (p < e && HTTP1_IS(*p, C_VALUE))
			p++;
		m->reason.p = s;
		m->reason.len = (size_t)(p - s);
	} else {
		m->reason.p = p;        /* tolerated: no SP, no reason */
		m->reason.len = 0;
	}
	if (e - p < 2)
		return HTTP1_SHORT;
	if (*p != '\r')
		return http1_fail(m, 400, "invalid character in status line");
	*pp = p;
	return 0;
}

/* What the header h just read means: its flags (the caller adds them to
 * m->seen), and what the framing functions need in seen. 0, or a
 * negative status (http1_fail). */
static ssize_t http1_field(struct http1_msg *m, struct http1_header *h, bool request,
			   struct http1_seen *seen)
{
	switch (http1_kind(h->name)) {
	case K_OTHER:
		break;
	case K_TIER:
		m->seen |= HTTP1_SEEN_TIER;
		break;
	case K_CONNECTION:
		h->flags = HTTP1_HDR_HOP;
		seen->nconn++;
		break;
	case K_HOP:
		h->flags = HTTP1_HDR_HOP;
		break;
	case K_UPGRADE:
		h->flags = HTTP1_HDR_HOP;
		seen->has_upgrade = true;
		break;
	case K_TE:
		h->flags = HTTP1_HDR_HOP | HTTP1_HDR_FRAMING;
		seen->has_te = true;
		http1_te_add(&seen->te, h->value);
		break;
	case K_CL:
		h->flags = HTTP1_HDR_FRAMING;
		if (http1_content_length(h->value, &m->content_length, &seen->have_cl) < 0)
			return http1_fail(m, 400, "invalid Content-Length");
		break;
	case K_XFF:
		h->flags = HTTP1_HDR_XFF;
		break;
	case K_GEN:
		h->flags = HTTP1_HDR_GENERATED;
		break;
	case K_FWD:
		if (request)
			h->flags = HTTP1_HDR_FWD;
		break;
	case K_HOST:
		if (request) {
			seen->nhost++;
			m->host = h->value;
			h->flags = HTTP1_HDR_HOST;
		}
		break;
	case K_EXPECT:
		if (request && m->minor == 1 && HTTP1_IEQ(h->value, "100-continue"))
			m->expect_continue = true;
		break;
	}
	return 0;
}

/* The header fields from *pp (after the start line's CRLF) to the empty
 * line, in the head [head, e): each is classified as it is read, what
 * framing needs goes to seen. 0 (*pp at the empty line's CR, before e - 1),
 * a negative status, or HTTP1_SHORT. */
static ssize_t http1_fields(struct http1_msg *m, struct http1_header *hdrs, const char *head,
			    const char **pp, const char *e, const struct http1_limits *lim,
			    bool request, struct http1_seen *seen)
{
	const char *p = *pp, *s, *cr;
	unsigned n = m->nheaders, max = lim->max_headers, flags_seen = 0;
	ssize_t r;

	for (;;) {
		struct http1_header *h;
		unsigned flags;

		if (e - p < 2)
			return HTTP1_SHORT;
		if (!HTTP1_IS(*p, C_NAME)) {    /* a name's byte: the usual one */
			if (*p == '\r')
				break;
			if (HTTP1_OWS(*p))
				return http1_fail(m, 400, "obsolete line folding");
		}
		s = p;
		p = http1_name_end(p, e);
		flags = 0;
		if (p == e)
			return HTTP1_SHORT;
		if (*p == '_') {
			flags = HTTP1_HDR_UNDERSCORE;
			p = http1_span(p, e, C_TOKEN);
			if (p == e)
				return HTTP1_SHORT;
		}
		if (*p != ':') {
			if (HTTP1_OWS(*p))
				return http1_fail(m, 400, "whitespace before colon");
			return http1_fail(m, 400, "invalid character in header name");
		}
		if (p == s)
			return http1_fail(m, 400, "empty header name");
		if (n >= max)
			return http1_fail(m, 431, "too many headers");
		/* counted only once its value is known good: a refused
		 * request's headers are still read (the access log's
		 * Referer and User-Agent), and a slot counted early would
		 * show the previous message's value, a slice of a buffer
		 * that another connection may own or that is freed */
		h = &hdrs[n];
		h->name.p = s;
		h->name.len = (size_t)(p - s);
		h->flags = flags;
		/* OWS is a value byte: the end is found from the colon, OWS trimmed within */
		s = ++p;
		cr = http1_value_end(head, p, e);
		if (e - cr < 2)
			return HTTP1_SHORT;
		if (*cr != '\r' || cr[1] != '\n')
			return http1_fail(m, 400, *cr != '\r' ? "invalid character in header value" : "bare CR");
		if (*s == ' ' && !HTTP1_VOWS(s[1])) {
			s++;    /* the usual single SP; s[1] is *cr at most */
		} else {
			while (s < cr && HTTP1_VOWS(*s))
				s++;
		}
		p = cr;
		while (HTTP1_VOWS(p[-1]) && p > s)      /* p[-1]: the colon at most */
			p--;
		h->value.p = s;
		h->value.len = (size_t)(p - s);
		m->nheaders = ++n;
		p = cr + 2;

		r = http1_field(m, h, request, seen);
		if (r < 0)
			return r;
		flags_seen |= h->flags;
	}
	m->seen |= flags_seen;
	*pp = p;
	return 0;
}

#ifdef __SSE2__
/* The bytes of x in C_HOST, as a 16-bit mask: letters, digits, '$' to
 * '.', ':', ';', and '!', '=', '[', ']', '_', '~'. */
static unsigned http1_host16(__m128i x)
{
	__m128i ok = _mm_or_si128(http1_in16(_mm_or_si128(x, _mm_set1_epi8(0x20)), 'a', 25),
				  http1_in16(x, '0', ';' - '0'));

	ok = _mm_or_si128(ok, http1_in16(x, '$', '.' - '$'));
	ok = _mm_or_si128(ok, _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('!')),
					   _mm_cmpeq_epi8(x, _mm_set1_epi8('='))));
	ok = _mm_or_si128(ok, _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('[')),
					   _mm_cmpeq_epi8(x, _mm_set1_epi8(']'))));
	ok = _mm_or_si128(ok, _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('_')),
					   _mm_cmpeq_epi8(x, _mm_set1_epi8('~'))));
	return (unsigned)_mm_movemask_epi8(ok);
}
#endif

/* Whether every byte of v, a slice of the head that starts at lo, is in
 * C_HOST: sixteen a step with SSE2, the last step the sixteen bytes that
 * end with v, so no load leaves the head (the request line is before
 * any Host); a byte at a time they were 90 instructions of a request
 * with "Host: 127.0.0.1:8080". */
static bool http1_host_ok(const char *lo, struct http1_str v)
{
	const char *p = v.p, *end;

	if (v.len == 0)
		return true;    /* none: p may be NULL */
	end = p + v.len;

#ifdef __SSE2__
	for (; end - p >= 16; p += 16)
		if (http1_host16(_mm_loadu_si128((const __m128i *)(const void *)p)) != 0xffffu)
			return false;
	if (p == end)
		return true;
	if (end - lo >= 16)     /* bit i is byte end - 16 + i: p's are the top end - p */
		return http1_host16(_mm_loadu_si128((const __m128i *)(const void *)(end - 16)))
		       >> (16 - (end - p)) == (1u << (end - p)) - 1;
#else
	(void)lo;
#endif
	for (; p < end; p++)
		if (!HTTP1_IS(*p, C_HOST))
			return false;
	return true;
}

/* A request's body framing from what its fields said (RFC 9112 6.3),
 * refusing every ambiguous combination; lo is the head's start. 0, or a
 * negative status. */
static ssize_t http1_framing_request(struct http1_msg *m, const struct http1_seen *seen,
				     const char *lo)
{
	if (seen->nhost > 1)
		return http1_fail(m, 400, "more than one Host");
	if (seen->nhost == 0 && m->minor == 1)
		return http1_fail(m, 400, "HTTP/1.1 request without Host");
	if (!http1_host_ok(lo, m->host))
		return http1_fail(m, 400, "invalid Host");
	if (seen->has_te) {
		if (m->minor == 0)
			return http1_fail(m, 400, "Transfer-Encoding in HTTP/1.0");
		if (seen->te.bad)
			return http1_fail(m, 400, "empty Transfer-Encoding element");
		if (seen->te.nchunked > 1)
			return http1_fail(m, 400, "chunked applied twice");
		if (!seen->te.last_chunked)
			return http1_fail(m, 400, "Transfer-Encoding not ending in chunked");
		if (seen->te.ncodings > 1)
			return http1_fail(m, 501, "codings before chunked (e.g. gzip, chunked): only chunked alone is relayed");
		m->framing = HTTP1_BODY_CHUNKED;
	} else if (seen->have_cl) {
		m->framing = HTTP1_BODY_LENGTH;
	} else {
		m->framing = HTTP1_BODY_NONE;
	}
	return 0;
}

/* A response's body framing: req_method is the request's (a HEAD's
 * response has no body). 0, or a negative status. */
static ssize_t http1_framing_response(struct http1_msg *m, const struct http1_seen *seen,
				      enum http1_method req_method)
{
	bool no_body;
	unsigned i;

	no_body = req_method == HTTP1_M_HEAD || m->status < 200
		  || m->status == 204 || m->status == 304;
	if (seen->has_te && (seen->te.bad || seen->te.nchunked > 1))
		return http1_fail(m, 400, "invalid Transfer-Encoding");
	if (seen->has_te && seen->te.last_chunked && seen->te.ncodings > 1)
		return http1_fail(m, 400, "codings before chunked in a response: only chunked alone is relayed");
	if (no_body) {
		m->framing = HTTP1_BODY_NONE;
		/* HEAD and 304 describe a body they do not carry: the
		 * client needs that Content-Length, so it is not ours.
		 * 1xx and 204 may not have one (RFC 9110 8.6): it
		 * stays flagged, so the writer drops it */
		for (i = 0; i < m->nheaders; i++) {
			if (m->headers[i].flags == HTTP1_HDR_FRAMING
			    && m->status >= 200 && m->status != 204)
				m->headers[i].flags = 0;
		}
		if (m->status < 200 || m->status == 204)
			m->content_length = 0;
	} else if (seen->has_te && (!seen->te.last_chunked || m->minor == 0)) {
		/* a coding we do not decode ("gzip"), or chunked in
		 * HTTP/1.0 (RFC 9112 6.1): the body would reach the
		 * client still coded and without the header that
		 * says so, since Transfer-Encoding is hop-by-hop */
		return http1_fail(m, 400, "a transfer coding the proxy does not decode");
	} else if (seen->has_te) {
		m->framing = HTTP1_BODY_CHUNKED;
	} else if (seen->have_cl) {
		m->framing = HTTP1_BODY_LENGTH;
	} else {
		m->framing = HTTP1_BODY_CLOSE;
	}
	if (m->framing == HTTP1_BODY_CLOSE)
		m->keep_alive = false;
	return 0;
}

/*
 * The head in [p, e) from its start line: the start line and the fields,
 * each classified as it is read, what framing needs going to seen.
 * Returns the offset in buf of the head's end (after its empty line), a
 * negative status, or HTTP1_SHORT when e came first.
 */
static ssize_t http1_head(struct http1_msg *m, struct http1_header *hdrs, const char *buf,
			  const char *p, const char *e, const struct http1_limits *lim,
			  bool request, struct http1_seen *seen)
{
	const char *head = p;
	ssize_t r;

	m->headers = hdrs;
	m->nheaders = 0;
	r = request ? http1_request_line(m, &p, e) : http1_status_line(m, &p, e);
	if (r < 0)
		return r;
	if (p[1] != '\n')
		return http1_fail(m, 400, "bare CR");
	p += 2;
	m->line.p = head;
	m->line.len = (size_t)(p - head);
	r = http1_fields(m, hdrs, head, &p, e, lim, request, seen);
	if (r < 0)
		return r;
	if (p[1] != '\n')
		return http1_fail(m, 400, "malformed head");
	return p + 2 - buf;
}

/*
 * The common head parser. request selects the grammar; every error status is
 * the request's (400, 431, ...); the response caller maps them to 502.
 *
 * A head that arrives whole (the usual case) is read once: the start line
 * and fields are parsed straight from the bytes there are, up to max_head,
 * and the first empty line ends the head. Every byte of a head parsed so
 * is a token, target, value or version byte, CR only before LF, so it is
 * the head http1_find_end finds, parsed the same way. Anything else --
 * bytes that end before the head does, any error -- is forgotten and taken
 * the way it always was: http1_find_end, then the parse, so which error a
 * bad head gets (bare LF before a bad name, 431 before all) stays as it
 * was, and a head that trickles in is tried in one pass only on its first
 * call (m->scan_ 0), which keeps it O(n). Finding the end first cost a
 * memchr a line, 700 instructions of a forwarded request.
 */
static ssize_t http1_parse(struct http1_msg *m, struct http1_header *hdrs,
			   const char *buf, size_t len,
			   const struct http1_limits *lim, bool request,
			   enum http1_method req_method)
{
	struct http1_seen seen = { { 0, 0, false, false }, false, false, false, 0, 0 };
	bool conn_close = false, conn_ka = false, conn_upg = false;
	ssize_t end, r;
	unsigned i;

	if (m->scan_ == 0) {
		/* m is as http1_msg_init left it, or holds this same head
		 * parsed before (a caller that moved it to a larger buffer),
		 * which parses the same again */
		const char *p = buf, *e = buf + (len < lim->max_head ? len : lim->max_head);

		while (request && e - p >= 2 && p[0] == '\r' && p[1] == '\n')
			p += 2;         /* empty lines before a request line */
		end = http1_head(m, hdrs, buf, p, e, lim, request, &seen);
		if (end > 0) {
			m->start_ = (size_t)(p - buf);
			goto fields;
		}
		http1_msg_init(m);
		seen = (struct http1_seen){ { 0, 0, false, false }, false, false, false, 0, 0 };
	}
	end = http1_find_end(m, buf, len, lim->max_head, request);
	if (end <= 0)
		return end;
	r = http1_head(m, hdrs, buf, buf + m->start_, buf + end, lim, request, &seen);
	if (r == HTTP1_SHORT || (r > 0 && r != end))
		return http1_fail(m, 400, "malformed head");    /* invariant */
	if (r < 0)
		return r;

fields:
	if (seen.nconn > 0) {
		for (i = 0; i < m->nheaders; i++) {
			if (m->headers[i].flags == HTTP1_HDR_HOP
			    && HTTP1_IEQ(m->headers[i].name, "connection"))
				http1_connection(m, m->headers[i].value, &conn_close,
						 &conn_ka, &conn_upg);
		}
	}
	m->upgrade = conn_upg && seen.has_upgrade;
	m->keep_alive = !conn_close && (m->minor == 1 || conn_ka);

	if (seen.has_te && seen.have_cl)
		return http1_fail(m, 400, "both Transfer-Encoding and Content-Length");
	r = request ? http1_framing_request(m, &seen, buf) : http1_framing_response(m, &seen, req_method);
	if (r < 0)
		return r;
	m->head_len = (size_t)end;
	return end;
}

ssize_t http1_parse_request(struct http1_msg *m, struct http1_header *hdrs,
			    const char *buf, size_t len,
			    const struct http1_limits *lim)
{
	return http1_parse(m, hdrs, buf, len, lim, true, HTTP1_M_OTHER);
}

ssize_t http1_parse_response(struct http1_msg *m, struct http1_header *hdrs,
			     const char *buf, size_t len,
			     const struct http1_limits *lim,
			     enum http1_method method_id)
{
	ssize_t r = http1_parse(m, hdrs, buf, len, lim, false, method_id);

	return r < 0 ? -502 : r;
}

/* ---- chunked bodies ---------------------------------------------------- */

enum http1_ck_state {
	CK_SIZE0 = 0,   /* first hex digit of a chunk-size */
	CK_SIZE,        /* more digits, ';', BWS or CR */
	CK_BWS,         /* whitespace after the size: only ';' may follow */
	CK_EXT,         /* chunk-ext: tokens, '=', ';', BWS */
	CK_EXT_Q,       /* inside a quoted chunk-ext value */
	CK_EXT_QP,      /* after a backslash in a quoted value */
	CK_SIZE_LF,     /* LF ending the chunk-size line */
	CK_DATA,
	CK_DATA_CR,
	CK_DATA_LF,
	CK_TR_START,    /* start of a trailer line, or the final CRLF */
	CK_TR_NAME,
	CK_TR_VALUE,
	CK_TR_LF,
	CK_END_LF,
	CK_DONE,
};

void http1_chunked_init(struct http1_chunked *c)
{
	memset(c, 0, sizeof(*c));
	c->max_trailer = HTTP1_MAX_TRAILER;
}

static int http1_hex(unsigned char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	ch = http1_lower(ch);
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

static ssize_t http1_ck_fail(struct http1_chunked *c, const char *why)
{
	c->error = why;
	return -1;
}

/* One byte of a chunk-size line: the size in hex, whitespace, extensions
 * (read and dropped, bounded), its CRLF. 0, or -1 with c->error. */
static int http1_ck_size_line(struct http1_chunked *c, unsigned char ch)
{
	int d;

	switch (c->state) {
	case CK_SIZE0:
	case CK_SIZE:
		d = http1_hex(ch);
		if (d >= 0) {
			if (c->ndigits >= 16 || c->left > (HTTP1_MAX_LENGTH >> 4))
				return (int)http1_ck_fail(c, "chunk size too large");
			c->left = (c->left << 4) | (uint64_t)d;
			c->ndigits++;
			c->state = CK_SIZE;
		} else if (c->state == CK_SIZE0) {
			return (int)http1_ck_fail(c, "invalid chunk size");
		} else if (ch == '\r') {
			c->state = CK_SIZE_LF;
		} else if (ch == ';') {
			c->state = CK_EXT;
		} else if (HTTP1_OWS(ch)) {
			c->state = CK_BWS;
		} else {
			return (int)http1_ck_fail(c, "invalid chunk size");
		}
		break;
	case CK_BWS:
		if (ch == ';')
			c->state = CK_EXT;
		else if (!HTTP1_OWS(ch))
			return (int)http1_ck_fail(c, "invalid chunk size");
		break;
	case CK_EXT:
	case CK_EXT_Q:
	case CK_EXT_QP:
		if (++c->ext_bytes > HTTP1_MAX_CHUNK_EXT)
			return (int)http1_ck_fail(c, "chunk extension too long");
		if (c->state == CK_EXT_QP) {
			if (!HTTP1_IS(ch, C_VALUE))
				return (int)http1_ck_fail(c, "invalid chunk extension");
			c->state = CK_EXT_Q;
		} else if (c->state == CK_EXT_Q) {
			if (ch == '"')
				c->state = CK_EXT;
			else if (ch == '\\')
				c->state = CK_EXT_QP;
			else if (!HTTP1_IS(ch, C_VALUE))
				return (int)http1_ck_fail(c, "invalid chunk extension");
		} else if (ch == '\r') {
			c->state = CK_SIZE_LF;
		} else if (ch == '"') {
			c->state = CK_EXT_Q;
		} else if (!HTTP1_IS(ch, C_TOKEN) && ch != '=' && ch != ';' && !HTTP1_OWS(ch)) {
			return (int)http1_ck_fail(c, "invalid chunk extension");
		}
		break;
	case CK_SIZE_LF:
		if (ch != '\n')
			return (int)http1_ck_fail(c, "missing LF after chunk size");
		c->ext_bytes = 0;
		c->ndigits = 0;
		c->state = c->left == 0 ? CK_TR_START : CK_DATA;
		break;
	default:
		break;
	}
	return 0;
}

/* One byte after a chunk's data: its CRLF, the trailer fields (bounded),
 * the final CRLF. 0, or -1 with c->error. */
static int http1_ck_framing(struct http1_chunked *c, unsigned char ch)
{
	switch (c->state) {
	case CK_DATA_CR:
		if (ch != '\r')
			return (int)http1_ck_fail(c, "missing CRLF after chunk data");
		c->state = CK_DATA_LF;
		break;
	case CK_DATA_LF:
		if (ch != '\n')
			return (int)http1_ck_fail(c, "missing CRLF after chunk data");
		c->state = CK_SIZE0;
		break;
	case CK_TR_START:
		if (ch == '\r') {
			c->state = CK_END_LF;
			break;
		}
		if (!HTTP1_IS(ch, C_TOKEN))
			return (int)http1_ck_fail(c, "invalid trailer field");
		if (++c->trailer_bytes > c->max_trailer)
			return (int)http1_ck_fail(c, "trailers too large");
		c->state = CK_TR_NAME;
		break;
	case CK_TR_NAME:
	case CK_TR_VALUE:
		if (++c->trailer_bytes > c->max_trailer)
			return (int)http1_ck_fail(c, "trailers too large");
		if (c->state == CK_TR_NAME) {
			if (ch == ':')
				c->state = CK_TR_VALUE;
			else if (!HTTP1_IS(ch, C_TOKEN))
				return (int)http1_ck_fail(c, "invalid trailer field");
		} else if (ch == '\r') {
			c->state = CK_TR_LF;
		} else if (!HTTP1_IS(ch, C_VALUE)) {
			return (int)http1_ck_fail(c, "invalid trailer field");
		}
		break;
	case CK_TR_LF:
		if (ch != '\n')
			return (int)http1_ck_fail(c, "bare CR in trailer");
		c->state = CK_TR_START;
		break;
	case CK_END_LF:
		if (ch != '\n')
			return (int)http1_ck_fail(c, "missing final CRLF");
		c->state = CK_DONE;
		c->done = true;
		break;
	default:
		break;
	}
	return 0;
}

/*
 * The walker both modes share. Consumes buf[0..len) until the body ends or,
 * when stop_at_data, just after one run of chunk data (reported in
 * *doff and *dlen). Returns the bytes consumed or -1.
 */
static ssize_t http1_ck_run(struct http1_chunked *c, const char *buf, size_t len,
			    bool stop_at_data, size_t *doff, size_t *dlen)
{
	size_t i = 0;

	if (c->error != NULL)
		return -1;
	while (i < len && c->state != CK_DONE) {
		unsigned char ch = (unsigned char)buf[i];
		int rc;

		if (c->state == CK_DATA) {
			size_t n = len - i;

			if ((uint64_t)n > c->left)
				n = (size_t)c->left;
			c->left -= n;
			if (c->left == 0)
				c->state = CK_DATA_CR;
			if (stop_at_data) {
				*doff = i;
				*dlen = n;
				return (ssize_t)(i + n);
			}
			i += n;
			continue;
		}
		/* the states up to CK_SIZE_LF are the size line's */
		rc = c->state <= CK_SIZE_LF ? http1_ck_size_line(c, ch) : http1_ck_framing(c, ch);
		if (rc < 0)
			return -1;
		i++;
	}
	return (ssize_t)i;
}

ssize_t http1_chunked_scan(struct http1_chunked *c, const char *buf, size_t len)
{
	return http1_ck_run(c, buf, len, false, NULL, NULL);
}

ssize_t http1_chunked_decode(struct http1_chunked *c, const char *buf,
			     size_t len, size_t *data_off, size_t *data_len)
{
	*data_off = 0;
	*data_len = 0;
	return http1_ck_run(c, buf, len, true, data_off, data_len);
}

size_t http1_chunk_line(char *out, uint64_t size, bool close_prev)
{
	static const char hex[] = "0123456789abcdef";
	char digits[16];
	size_t i = sizeof(digits), o = 0;

	do {
		digits[--i] = hex[size & 15];
		size >>= 4;
	} while (size != 0);
	if (close_prev) {
		out[o++] = '\r';
		out[o++] = '\n';
	}
	memcpy(out + o, digits + i, sizeof(digits) - i);
	o += sizeof(digits) - i;
	out[o++] = '\r';
	out[o++] = '\n';
	return o;
}

/* ---- writers ------------------------------------------------------------ */

/* Generated bytes go to scratch; a full scratch or iov array sets bad. */
struct http1_out {
	char *p, *end;
	struct iovec *iov;
	int n, max;
	char *mark;             /* start of the scratch run not yet in iov */
	bool bad;
};

/* n (1 to 16) bytes from s to p: two loads and two stores that overlap,
 * none outside either range. The slices the writers copy (an address,
 * a Via entry, a backend's name) are this short; memcpy's call for them
 * cost 30 instructions each. */
static inline void http1_copy16(char *p, const char *s, size_t n)
{
	uint64_t a, b;
	uint32_t c, d;

	if (n >= 8) {
		memcpy(&a, s, 8);
		memcpy(&b, s + n - 8, 8);
		memcpy(p, &a, 8);
		memcpy(p + n - 8, &b, 8);
	} else if (n >= 4) {
		memcpy(&c, s, 4);
		memcpy(&d, s + n - 4, 4);
		memcpy(p, &c, 4);
		memcpy(p + n - 4, &d, 4);
	} else {
		p[0] = s[0];
		p[n / 2] = s[n / 2];
		p[n - 1] = s[n - 1];
	}
}

/* Inlined everywhere, as is http1_merge: a literal's length is then a
 * constant and its copy a few moves, not a call of memcpy (with the
 * calls, the writers' generated lines were 165 instructions more). */
static inline __attribute__((always_inline)) void http1_put(struct http1_out *o, const char *s, size_t n)
{
	if (n == 0)
		return;         /* s may be NULL: an absent slice */
	if ((size_t)(o->end - o->p) < n) {
		o->bad = true;
		return;
	}
	if (!__builtin_constant_p(n) && n <= 16)
		http1_copy16(o->p, s, n);
	else
		memcpy(o->p, s, n);
	o->p += n;
}

#define HTTP1_PUTS(o, lit) http1_put((o), (lit), sizeof(lit) - 1)

/* Inlined too: a called copy of a slice cost its call and its spills,
 * about 18 instructions a slice, and a forward writes seven. */
static inline __attribute__((always_inline)) void http1_put_str(struct http1_out *o, struct http1_str s)
{
	http1_put(o, s.p, s.len);
}

static void http1_put_u64(struct http1_out *o, uint64_t v)
{
	char tmp[20];

	http1_put(o, tmp, (size_t)(decfmt_u64(tmp, v) - tmp));
}

static void http1_iov(struct http1_out *o, const char *p, size_t n)
{
	if (n == 0)
		return;
	if (o->n >= o->max) {
		o->bad = true;
		return;
	}
	o->iov[o->n].iov_base = (void *)(uintptr_t)p;
	o->iov[o->n].iov_len = n;
	o->n++;
}

/* Closes the pending scratch run into an iovec. */
static void http1_flush(struct http1_out *o)
{
	http1_iov(o, o->mark, (size_t)(o->p - o->mark));
	o->mark = o->p;
}

/* End of a header's line in the parse buffer, its CRLF included. */
static const char *http1_line_end(const struct http1_header *h)
{
	const char *p = h->value.p + h->value.len;

	while (*p != '\r')
		p++;
	return p + 2;
}

/* The start line when line.len (the one received, sent as it is), then
 * the headers without any flag in drop and not named named (len 0: no
 * such name), as runs of contiguous lines. A parsed head's lines lie one
 * after the other from its start line on, so a run ends where the next
 * line left out starts, and only the last run's end is looked for.
 * Inlined in both writers: the request's has no name to test. */
static inline __attribute__((always_inline)) void http1_copy_headers(struct http1_out *o,
								     const struct http1_msg *m,
								     unsigned drop, struct http1_str named,
								     struct http1_str line)
{
	const char *run = line.len ? line.p : NULL;
	unsigned i;

	for (i = 0; i < m->nheaders; i++) {
		const struct http1_header *h = &m->headers[i];

		if ((h->flags & drop) || (named.len != 0 && h->name.len == named.len &&
					  strncasecmp(h->name.p, named.p, named.len) == 0)) {
			if (run != NULL)
				http1_iov(o, run, (size_t)(h->name.p - run));
			run = NULL;
		} else if (run == NULL) {
			run = h->name.p;
		}
	}
	if (run != NULL)
		http1_iov(o, run, (size_t)((m->nheaders ? http1_line_end(&m->headers[m->nheaders - 1])
					   : line.p + line.len) - run));
}

/* "Name: v1, v2[, ours]\r\n" from every header with flag and name_len
 * (name_len 0: any), nothing when there is nothing to say. */
static inline __attribute__((always_inline)) void http1_merge(struct http1_out *o, const struct http1_msg *m,
							      unsigned flag, size_t name_len,
							      const char *line, size_t line_len,
							      struct http1_str ours)
{
	bool any = false;
	unsigned i;

	for (i = 0; i < m->nheaders && (m->seen & flag); i++) {
		const struct http1_header *h = &m->headers[i];

		if (!(h->flags & flag) || (name_len != 0 && h->name.len != name_len)
		    || h->value.len == 0)
			continue;
		if (any)
			HTTP1_PUTS(o, ", ");
		else
			http1_put(o, line, line_len);
		http1_put_str(o, h->value);
		any = true;
	}
	if (ours.len != 0) {
		if (any)
			HTTP1_PUTS(o, ", ");
		else
			http1_put(o, line, line_len);
		http1_put_str(o, ours);
		any = true;
	}
	if (any)
		HTTP1_PUTS(o, "\r\n");
}

/* The canonical framing line; inlined, as the copier is, in both writers. */
static inline __attribute__((always_inline)) void http1_framing_line(struct http1_out *o,
								     const struct http1_msg *m)
{
	if (m->framing == HTTP1_BODY_LENGTH) {
		HTTP1_PUTS(o, "Content-Length: ");
		http1_put_u64(o, m->content_length);
		HTTP1_PUTS(o, "\r\n");
	} else if (m->framing == HTTP1_BODY_CHUNKED) {
		HTTP1_PUTS(o, "Transfer-Encoding: chunked\r\n");
	}
}

static void http1_out_init(struct http1_out *o, struct iovec *iov, int iovmax,
			   char *scratch, size_t scratchlen)
{
	o->p = o->mark = scratch;
	o->end = scratch + scratchlen;
	o->iov = iov;
	o->n = 0;
	o->max = iovmax;
	o->bad = false;
}

/* The request target sent for m: prefix, the path, the query (query.p
 * not NULL: that one instead of m's). */
static void http1_put_target(struct http1_out *o, const struct http1_msg *m, struct http1_str prefix,
			     struct http1_str query)
{
	if (!(m->path.len == 1 && m->path.p[0] == '*'))
		http1_put_str(o, prefix);
	if (!m->path_dots)
		http1_put_str(o, m->path);
	else if ((size_t)(o->end - o->p) < m->path.len)
		o->bad = true;
	else                    /* a prefix confines only a clean path */
		o->p += http1_path_clean(m->path.p, m->path.len, o->p);
	if (query.p) {
		HTTP1_PUTS(o, "?");
		http1_put_str(o, query);
	} else if (m->has_query) {
		HTTP1_PUTS(o, "?");
		http1_put_str(o, m->query);
	}
}

ssize_t http1_write_target(const struct http1_msg *m, struct http1_str prefix, char *out, size_t outlen)
{
	struct http1_out o;

	if (outlen == 0)
		return -1;
	http1_out_init(&o, NULL, 0, out, outlen - 1);
	http1_put_target(&o, m, prefix, (struct http1_str){ NULL, 0 });
	if (o.bad)
		return -1;
	*o.p = '\0';
	return o.p - out;
}

void http1_drop_named(struct http1_msg *m, struct http1_str name)
{
	if (name.len == 0)
		return;
	for (unsigned i = 0; i < m->nheaders; i++)
		if (m->headers[i].name.len == name.len && http1_slice_ieq(m->headers[i].name, name))
			m->headers[i].flags |= HTTP1_HDR_DROP;
}

int http1_write_request(const struct http1_msg *m, const struct http1_fwd_req *f,
			struct iovec *iov, int iovmax, char *scratch,
			size_t scratchlen)
{
	struct http1_out o;
	static const char xff[] = "X-Forwarded-For: ", via[] = "Via: ";

	/* the request line received is the one we would write for an
	 * HTTP/1.1 request in origin- or asterisk-form with a Host (and no
	 * Host of ours to put in its place), a clean
	 * path, no prefix and its own query, its target still the one in the
	 * line (query_apply may have rewritten it elsewhere) */
	uintptr_t lp = (uintptr_t)m->line.p, tp = (uintptr_t)m->target.p;
	struct http1_str line = { m->line.p, m->minor == 1 && m->authority.len == 0 && m->host.p != NULL
				  && !f->host_fixed && !m->path_dots && f->prefix.len == 0 && f->query.p == NULL
				  && tp > lp && tp + m->target.len < lp + m->line.len ? m->line.len : 0 };

	http1_out_init(&o, iov, iovmax, scratch, scratchlen);
	if (line.len == 0) {
		http1_put_str(&o, m->method);
		HTTP1_PUTS(&o, " ");
		http1_put_target(&o, m, f->prefix, f->query);
		HTTP1_PUTS(&o, " HTTP/1.1\r\n");
	}
	if (f->host_fixed) {
		HTTP1_PUTS(&o, "Host: ");
		http1_put_str(&o, f->default_host);
		HTTP1_PUTS(&o, "\r\n");
	} else if (m->authority.len != 0) {
		HTTP1_PUTS(&o, "Host: ");
		http1_put_str(&o, m->authority);
		HTTP1_PUTS(&o, "\r\n");
	} else if (m->host.p == NULL) {
		HTTP1_PUTS(&o, "Host: ");
		http1_put_str(&o, f->default_host);
		HTTP1_PUTS(&o, "\r\n");
	}
	http1_flush(&o);
	http1_copy_headers(&o, m, HTTP1_HDR_HOP | HTTP1_HDR_FRAMING | HTTP1_HDR_XFF
			   | HTTP1_HDR_GENERATED | HTTP1_HDR_DROP | (m->authority.len || f->host_fixed ? HTTP1_HDR_HOST : 0u)
			   | (f->keep_underscores ? 0u : HTTP1_HDR_UNDERSCORE)
			   | (f->drop_fwd ? HTTP1_HDR_FWD : 0u), (struct http1_str){ NULL, 0 }, line);
	http1_framing_line(&o, m);
	http1_merge(&o, m, HTTP1_HDR_XFF, 0, xff, sizeof(xff) - 1, f->client_ip);
	if (f->proto.len != 0) {
		HTTP1_PUTS(&o, "X-Forwarded-Proto: ");
		http1_put_str(&o, f->proto);
		HTTP1_PUTS(&o, "\r\n");
	}
	http1_merge(&o, m, HTTP1_HDR_GENERATED, 3, via, sizeof(via) - 1, f->via);
	http1_put_str(&o, f->extra);
	HTTP1_PUTS(&o, "\r\n");
	http1_flush(&o);
	return o.bad ? -1 : o.n;
}

int http1_write_response(const struct http1_msg *m, const struct http1_fwd_resp *f,
			 struct iovec *iov, int iovmax, char *scratch,
			 size_t scratchlen)
{
	struct http1_out o;
	static const char via[] = "Via: ";
	/* the status line received is the one we would write when it is
	 * HTTP/1.1 with a SP before its reason: "HTTP/1.1 " 3DIGIT SP */
	struct http1_str line = { m->line.p, m->minor == 1 && m->line.len == 13 + m->reason.len + 2
				  ? m->line.len : 0 };
	char code[3];

	http1_out_init(&o, iov, iovmax, scratch, scratchlen);
	if (line.len == 0) {
		code[0] = (char)('0' + m->status / 100);
		code[1] = (char)('0' + m->status / 10 % 10);
		code[2] = (char)('0' + m->status % 10);
		HTTP1_PUTS(&o, "HTTP/1.1 ");
		http1_put(&o, code, 3);
		HTTP1_PUTS(&o, " ");
		http1_put_str(&o, m->reason);
		HTTP1_PUTS(&o, "\r\n");
		http1_flush(&o);
	}
	/* a response's X-Forwarded-For is relayed; its Via is merged with
	 * ours and X-Forwarded-Proto, meaningless there, is dropped; so is
	 * the backend's own header of our backend header's name: the client
	 * must read ours, not one a backend made up; and any line the caller
	 * flagged HTTP1_HDR_DROP ([cache] strip_targeted) */
	http1_copy_headers(&o, m, HTTP1_HDR_HOP | HTTP1_HDR_FRAMING | HTTP1_HDR_GENERATED | HTTP1_HDR_DROP,
			   f->backend_hdr, line);
	if (!f->dechunk)
		http1_framing_line(&o, m);
	if (f->backend_hdr.len != 0) {
		http1_put_str(&o, f->backend_hdr);
		HTTP1_PUTS(&o, ": ");
		http1_put_str(&o, f->backend_name);
		HTTP1_PUTS(&o, "\r\n");
	}
	http1_put_str(&o, f->extra);
	http1_merge(&o, m, HTTP1_HDR_GENERATED, 3, via, sizeof(via) - 1, f->via);
	if (f->close || f->dechunk || m->framing == HTTP1_BODY_CLOSE)
		HTTP1_PUTS(&o, "Connection: close\r\n");
	else if (f->keep_alive_10)
		HTTP1_PUTS(&o, "Connection: keep-alive\r\n");
	HTTP1_PUTS(&o, "\r\n");
	http1_flush(&o);
	return o.bad ? -1 : o.n;
}

static bool http1_field_add(struct http1_field *out, int max, int *n, struct http1_str name,
			    struct http1_str value)
{
	if (*n >= max)
		return false;
	out[(*n)++] = (struct http1_field){ name, value };
	return true;
}

/* Each "Name: value\r\n" line of lines (f->extra) as a field. */
static bool http1_lines_add(struct http1_field *out, int max, int *n, struct http1_str lines)
{
	const char *p = lines.p, *e = lines.p + lines.len;

	while (p < e) {
		const char *eol = memchr(p, '\n', (size_t)(e - p)), *colon, *v;

		if (!eol)
			eol = e;
		colon = memchr(p, ':', (size_t)(eol - p));
		if (colon) {
			const char *ve = eol > p && eol[-1] == '\r' ? eol - 1 : eol;

			for (v = colon + 1; v < ve && (*v == ' ' || *v == '\t'); v++)
				;
			if (!http1_field_add(out, max, n, (struct http1_str){ p, (size_t)(colon - p) },
					     (struct http1_str){ v, (size_t)(ve - v) }))
				return false;
		}
		p = eol + 1;
	}
	return true;
}

int http1_response_fields(const struct http1_msg *m, const struct http1_fwd_resp *f,
			  struct http1_field *out, int max, char *scratch, size_t scratchlen)
{
	struct http1_out o;
	int n = 0;
	const unsigned drop = HTTP1_HDR_HOP | HTTP1_HDR_FRAMING | HTTP1_HDR_GENERATED | HTTP1_HDR_DROP;

	http1_out_init(&o, NULL, 0, scratch, scratchlen);
	for (unsigned i = 0; i < m->nheaders; i++) {
		const struct http1_header *h = &m->headers[i];

		if ((h->flags & drop) || (f->backend_hdr.len != 0 && h->name.len == f->backend_hdr.len &&
					  strncasecmp(h->name.p, f->backend_hdr.p, h->name.len) == 0))
			continue;
		if (!http1_field_add(out, max, &n, h->name, h->value))
			return -1;
	}
	if (m->framing == HTTP1_BODY_LENGTH && !f->dechunk) {
		/* decfmt itself: a third caller of http1_put_u64 made it a call
		 * in http1_write_response, 27 instructions a forward more */
		if (scratchlen < 20)
			return -1;
		o.p = decfmt_u64(o.p, m->content_length);
		if (!http1_field_add(out, max, &n, (struct http1_str){ "Content-Length", 14 },
				     (struct http1_str){ o.mark, (size_t)(o.p - o.mark) }))
			return -1;
		o.mark = o.p;
	}
	if (f->backend_hdr.len != 0 && !http1_field_add(out, max, &n, f->backend_hdr, f->backend_name))
		return -1;
	if (!http1_lines_add(out, max, &n, f->extra))
		return -1;
	/* Via: the backend's values, then ours, joined as the HTTP/1.1
	 * writer joins them (its line without the name, CRLF dropped) */
	http1_merge(&o, m, HTTP1_HDR_GENERATED, 3, "", 0, f->via);
	if (o.p - o.mark >= 2 && !http1_field_add(out, max, &n, (struct http1_str){ "Via", 3 },
						   (struct http1_str){ o.mark, (size_t)(o.p - o.mark - 2) }))
		return -1;
	return o.bad ? -1 : n;
}

ssize_t http1_write_simple(char *out, size_t outlen, int status, bool close,
			   const char *extra, const char *body, size_t bodylen)
{
	struct http1_out o;
	struct iovec unused;
	char code[3];

	if (status < 100 || status > 999)
		status = 500;
	http1_out_init(&o, &unused, 0, out, outlen);
	code[0] = (char)('0' + status / 100);
	code[1] = (char)('0' + status / 10 % 10);
	code[2] = (char)('0' + status % 10);
	HTTP1_PUTS(&o, "HTTP/1.1 ");
	http1_put(&o, code, 3);
	HTTP1_PUTS(&o, " ");
	http1_put(&o, http1_reason(status), strlen(http1_reason(status)));
	HTTP1_PUTS(&o, "\r\nContent-Type: text/plain\r\nContent-Length: ");
	http1_put_u64(&o, bodylen);
	HTTP1_PUTS(&o, "\r\n");
	if (close)
		HTTP1_PUTS(&o, "Connection: close\r\n");
	if (extra != NULL)
		http1_put(&o, extra, strlen(extra));
	HTTP1_PUTS(&o, "\r\n");
	if (bodylen != 0)
		http1_put(&o, body, bodylen);
	return o.bad ? -1 : (ssize_t)(o.p - out);
}

const char *http1_reason(int status)
{
	switch (status) {
	case 100: return "Continue";
	case 101: return "Switching Protocols";
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 206: return "Partial Content";
	case 301: return "Moved Permanently";
	case 302: return "Found";
	case 303: return "See Other";
	case 304: return "Not Modified";
	case 307: return "Temporary Redirect";
	case 308: return "Permanent Redirect";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 411: return "Length Required";
	case 413: return "Content Too Large";
	case 414: return "URI Too Long";
	case 417: return "Expectation Failed";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 505: return "HTTP Version Not Supported";
	}
	return "Unknown";
}
