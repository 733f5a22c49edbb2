/*
 * fuzz-http1.c -- libFuzzer target for the HTTP/1.1 codec. The first input
 * byte picks request head, response head or chunked body, the second a split
 * position; the rest is the message, copied to an exactly sized malloc so
 * ASan catches any read past it. Besides "no crash", it checks the codec's
 * promises: a split parse ends as the whole one does, an accepted request or
 * response written back out parses to the same fields (a path with
 * dot-segments cleaned), the two chunked walkers agree with each other in
 * any pieces, and a body re-framed with our chunk-size lines decodes to
 * the same data.
 */
#include "http/http1.h"

#include <stdlib.h>
#include <string.h>

#define FUZZ_MAXH 32

/* A broken promise: crash so libFuzzer keeps the input. */
#define FUZZ_CHECK(cond) do { if (!(cond)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fuzz_slice_eq(struct http1_str a, struct http1_str b)
{
	return a.len == b.len && (a.len == 0 || memcmp(a.p, b.p, a.len) == 0);
}

/* Concatenates iov into an exactly sized malloc. */
static char *fuzz_gather(const struct iovec *iov, int n, size_t *len)
{
	char *out;
	size_t total = 0;
	int i;

	for (i = 0; i < n; i++)
		total += iov[i].iov_len;
	out = malloc(total ? total : 1);
	*len = 0;
	for (i = 0; i < n; i++) {
		memcpy(out + *len, iov[i].iov_base, iov[i].iov_len);
		*len += iov[i].iov_len;
	}
	return out;
}

static ssize_t fuzz_parse(struct http1_msg *m, struct http1_header *h, const char *buf,
			  size_t len, const struct http1_limits *lim, int resp,
			  enum http1_method req)
{
	http1_msg_init(m);
	if (resp)
		return http1_parse_response(m, h, buf, len, lim, req);
	return http1_parse_request(m, h, buf, len, lim);
}

static void fuzz_request_round_trip(const struct http1_msg *m)
{
	static const struct http1_fwd_req f = {
		{ "", 0 }, { "10.0.0.1", 8 }, { "http", 4 }, { "1.1 ringproxy", 13 },
		{ "be", 2 }, false, { NULL, 0 }, false, { NULL, 0 }, false,
	};
	static const struct http1_limits big = { 1u << 20, 4 * FUZZ_MAXH };
	struct http1_header h2[4 * FUZZ_MAXH];
	struct iovec iov[4 * FUZZ_MAXH];
	char scratch[16384], clean[4096], *out;
	struct http1_str want_path = m->path;
	struct http1_msg m2;
	size_t len;
	unsigned i, j;
	int n;

	/* a path with dot-segments goes out cleaned: never longer, rooted,
	 * and free of dot-segments */
	FUZZ_CHECK(m->path_dots == (m->path.p[0] == '/' && http1_path_dots(m->path.p, m->path.len) == 1));
	if (m->path_dots) {
		FUZZ_CHECK(m->path.len <= sizeof(clean));
		want_path.len = http1_path_clean(m->path.p, m->path.len, clean);
		want_path.p = clean;
		FUZZ_CHECK(want_path.len >= 1 && want_path.len <= m->path.len && clean[0] == '/'
			   && http1_path_dots(clean, want_path.len) == 0);
	}
	n = http1_write_request(m, &f, iov, 4 * FUZZ_MAXH, scratch, sizeof(scratch));
	FUZZ_CHECK(n > 0);
	out = fuzz_gather(iov, n, &len);
	FUZZ_CHECK(fuzz_parse(&m2, h2, out, len, &big, 0, HTTP1_M_OTHER) == (ssize_t)len);
	FUZZ_CHECK(fuzz_slice_eq(m2.method, m->method) && fuzz_slice_eq(m2.path, want_path)
		   && m2.has_query == m->has_query && fuzz_slice_eq(m2.query, m->query)
		   && m2.framing == m->framing && m2.content_length == m->content_length);
	for (i = 0, j = 0; i < m->nheaders; i++) {
		if (m->headers[i].flags)
			continue;
		while (j < m2.nheaders && (m2.headers[j].flags
		       || (m->host.p == NULL && http1_str_ieq(m2.headers[j].name, "host"))))
			j++;
		FUZZ_CHECK(j < m2.nheaders);
		FUZZ_CHECK(fuzz_slice_eq(m2.headers[j].name, m->headers[i].name)
			   && fuzz_slice_eq(m2.headers[j].value, m->headers[i].value));
		j++;
	}
	for (; j < m2.nheaders; j++)
		FUZZ_CHECK(m2.headers[j].flags || (m->host.p == NULL
			   && http1_str_ieq(m2.headers[j].name, "host")));
	free(out);
}

static void fuzz_response_round_trip(const struct http1_msg *m, enum http1_method req)
{
	static const struct http1_fwd_resp f = {
		{ "X-Backend", 9 }, { "b", 1 }, { "1.1 ringproxy", 13 }, false, false, false,
		{ "", 0 },
	};
	static const struct http1_limits big = { 1u << 20, 4 * FUZZ_MAXH };
	struct http1_header h2[4 * FUZZ_MAXH];
	struct iovec iov[4 * FUZZ_MAXH];
	char scratch[16384], *out;
	struct http1_msg m2;
	size_t len;
	int n;

	n = http1_write_response(m, &f, iov, 4 * FUZZ_MAXH, scratch, sizeof(scratch));
	FUZZ_CHECK(n > 0);
	out = fuzz_gather(iov, n, &len);
	FUZZ_CHECK(fuzz_parse(&m2, h2, out, len, &big, 1, req) == (ssize_t)len);
	FUZZ_CHECK(m2.status == m->status && m2.framing == m->framing
		   && m2.content_length == m->content_length);
	free(out);
}

static void fuzz_head(const char *buf, size_t len, size_t split, int resp,
		      enum http1_method req)
{
	static const struct http1_limits lim = { 4096, FUZZ_MAXH };
	struct http1_header h[FUZZ_MAXH], h2[FUZZ_MAXH];
	struct http1_msg m, m2;
	ssize_t r, r2;

	r = fuzz_parse(&m, h, buf, len, &lim, resp, req);
	FUZZ_CHECK(r <= (ssize_t)len && (r >= 0 || m.error != NULL));
	r2 = fuzz_parse(&m2, h2, buf, split, &lim, resp, req);
	if (r2 == 0)
		r2 = resp ? http1_parse_response(&m2, h2, buf, len, &lim, req)
			  : http1_parse_request(&m2, h2, buf, len, &lim);
	FUZZ_CHECK(r2 == r);
	if (r <= 0)
		return;
	FUZZ_CHECK(m2.framing == m.framing && m2.nheaders == m.nheaders
		   && m2.keep_alive == m.keep_alive && m2.head_len == m.head_len);
	if (resp)
		fuzz_response_round_trip(&m, req);
	else
		fuzz_request_round_trip(&m);
}

/* A complete body re-framed as forward.c does it (our size line before
 * each piece of data, no extensions, no trailers) must scan to its end
 * and decode to the same data. */
static void fuzz_reframed(const char *out, size_t olen, const char *data, size_t dlen)
{
	struct http1_chunked c;
	char *copy = malloc(olen), *got = malloc(dlen ? dlen : 1);
	size_t off = 0, glen = 0, doff, n;
	ssize_t r;

	memcpy(copy, out, olen);        /* exactly sized */
	http1_chunked_init(&c);
	FUZZ_CHECK(http1_chunked_scan(&c, copy, olen) == (ssize_t)olen && c.done);
	http1_chunked_init(&c);
	while (off < olen && !c.done) {
		r = http1_chunked_decode(&c, copy + off, olen - off, &doff, &n);
		FUZZ_CHECK(r > 0 && glen + n <= dlen);
		memcpy(got + glen, copy + off + doff, n);
		glen += n;
		off += (size_t)r;
	}
	FUZZ_CHECK(c.done && off == olen && glen == dlen && memcmp(got, data, dlen) == 0);
	free(copy);
	free(got);
}

static void fuzz_chunked(const char *buf, size_t len, size_t step)
{
	struct http1_chunked a, b;
	size_t off = 0, doff, dlen, n, olen = 0, datalen = 0;
	/* each piece of data costs at most one line and comes from at least
	 * one input byte */
	char *out = malloc(len * (HTTP1_CHUNK_LINE_MAX + 1) + 8), *data = malloc(len ? len : 1);
	bool open = false;
	ssize_t whole, r;

	http1_chunked_init(&a);
	whole = http1_chunked_scan(&a, buf, len);
	FUZZ_CHECK(whole <= (ssize_t)len);
	http1_chunked_init(&b);
	if (step == 0)
		step = 1;
	while (off < len && !b.done) {
		n = len - off < step ? len - off : step;
		r = http1_chunked_decode(&b, buf + off, n, &doff, &dlen);
		if (r < 0)
			break;
		FUZZ_CHECK((size_t)r <= n && doff + dlen <= (size_t)r);
		if (r == 0)
			break;
		if (dlen) {
			olen += http1_chunk_line(out + olen, dlen, open);
			memcpy(out + olen, buf + off + doff, dlen);
			olen += dlen;
			memcpy(data + datalen, buf + off + doff, dlen);
			datalen += dlen;
			open = true;
		}
		off += (size_t)r;
	}
	if (whole < 0) {
		FUZZ_CHECK(b.error != NULL);
	} else {
		FUZZ_CHECK(b.error == NULL && (size_t)whole == off && a.done == b.done);
	}
	if (b.done) {
		memcpy(out + olen, open ? "\r\n0\r\n\r\n" : "0\r\n\r\n", open ? 7 : 5);
		fuzz_reframed(out, olen + (open ? 7 : 5), data, datalen);
	}
	free(out);
	free(data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf;
	size_t len, split;
	unsigned mode;

	if (size < 2)
		return 0;
	mode = data[0] % 4;
	len = size - 2;
	split = len ? data[1] % (len + 1) : 0;
	buf = malloc(len ? len : 1);
	memcpy(buf, data + 2, len);
	switch (mode) {
	case 0:
		fuzz_head(buf, len, split, 0, HTTP1_M_OTHER);
		break;
	case 1:
		fuzz_head(buf, len, split, 1, HTTP1_M_GET);
		break;
	case 2:
		fuzz_head(buf, len, split, 1, HTTP1_M_HEAD);
		break;
	case 3:
		fuzz_chunked(buf, len, data[1] % 16);
		break;
	}
	free(buf);
	return 0;
}
