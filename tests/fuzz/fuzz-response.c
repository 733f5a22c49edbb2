/*
 * fuzz-response.c -- libFuzzer target for the response side: bytes from a
 * backend -> response head parse (http1.c) -> the relay's framing
 * decisions -> what the client receives, and the cache's decision whether
 * the response may be stored (cachectl_response).
 *
 * The relay here is forward.c's decision procedure on the codec's
 * functions, without sockets: interim responses relayed to HTTP/1.1
 * clients and dropped for 1.0, 101 refused, the head rewritten with the
 * backend header and Connection: close when the body ends with the
 * connection or the request body was not all read, a chunked body passed
 * through to an HTTP/1.1 client and decoded (then ending with the
 * connection) for 1.0, a Content-Length body cut at its length, and the
 * outcome when the backend's bytes end: 502 before a final head, the
 * client connection closed in the middle of a body. It checks:
 *
 *   - the bytes the client gets, and the outcome, are the same whether the
 *     backend's bytes arrive at once or in pieces of the sizes the input
 *     picks (the relay's decisions cannot depend on segmentation);
 *   - the client can read what it gets: each head parses, interim ones
 *     only for 1.1; the final status is the backend's; no hop-by-hop
 *     header but our own Connection; the backend header once; a 1.0
 *     client never gets chunked; a 1xx or 204 carries no framing header;
 *     a connection that will close says so;
 *   - the body the client reads under the framing it was told is the data
 *     the backend sent (decoded the codec's other way, in one piece), to
 *     the byte; nothing after it; a body cut short never reads complete
 *     under a Content-Length or chunked framing;
 *   - storable implies a GET, a status of the allowed set, no no-store /
 *     no-cache / private (in either message) nor Set-Cookie, Authorization
 *     only with public or s-maxage, a lifetime and ages >= 0, no stale
 *     windows under must-revalidate / proxy-revalidate / s-maxage, not
 *     stale on arrival beyond its windows; not storable has a reason.
 *
 * Input: byte 0: the client's HTTP/1.minor (bit 0), its method (bits 1-2:
 * GET, HEAD, POST, GET), the request body all read (bit 3; else the
 * response came early); byte 1: request headers (bits: Cache-Control
 * no-store, no-cache, max-age=0, Authorization, Accept-Encoding gzip,
 * Accept-Encoding br, Range); byte 2: the clock (seconds between request
 * and response, bits 0-2) and the cache's grace (bits 3-7, x 10 s); byte
 * 3 seeds the read sizes; the rest is what the backend sends, then it
 * closes.
 */
#include "http/cachectl.h"
#include "http/http1.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A broken promise: crash so libFuzzer keeps the input. */
#define FUZZ_CHECK(cond) do { if (!(cond)) __builtin_trap(); } while (0)

#define FUZZ_MAXH 100           /* [proxy] max_headers default */
#define FUZZ_MAX_HEAD 16384     /* [proxy] max_head_size default */
#define FUZZ_IOV (4 * FUZZ_MAXH + 16)
#define FUZZ_SCRATCH 32768
#define FUZZ_BACKEND_HDR "X-Ringproxy-Backend"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fuzz_buf {
	char *p;
	size_t len, cap;
};

static void fuzz_put(struct fuzz_buf *b, const void *p, size_t n)
{
	if (b->p == NULL || b->len + n > b->cap) {
		b->cap = (b->len + n) * 2 + 64;
		b->p = realloc(b->p, b->cap);
	}
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
}

enum fuzz_outcome {
	FUZZ_MORE = 0,          /* still reading */
	FUZZ_DONE,              /* response complete */
	FUZZ_502,               /* failed before any final head reached the client */
	FUZZ_CUT,               /* client connection closed in the middle of a body */
};

/* The client and request as the relay sees them. */
struct fuzz_req {
	int minor;
	enum http1_method method;
	bool req_done;
};

struct fuzz_relay {
	const struct fuzz_req *rq;
	struct fuzz_buf in;             /* backend bytes received */
	size_t pos;                     /* consumed up to here */
	struct fuzz_buf out;            /* bytes for the client */
	struct http1_header hdrs[FUZZ_MAXH];
	struct http1_msg resp;
	bool body;                      /* past the final head */
	bool close_after, dechunk;
	uint64_t body_left;
	struct http1_chunked chunk;
	enum fuzz_outcome outcome;
	size_t final_head_at;           /* offset in in of the final head */
	size_t final_head_len;
	size_t body_at;                 /* offset in in where the body starts */
	int interim;                    /* interim heads relayed */
};

static void fuzz_write_head(struct fuzz_relay *r, const struct http1_fwd_resp *f)
{
	struct iovec iov[FUZZ_IOV];
	static char scratch[FUZZ_SCRATCH];
	int n = http1_write_response(&r->resp, f, iov, FUZZ_IOV, scratch, sizeof(scratch));

	if (n < 0) {            /* forward.c: 502, head too large to rewrite */
		r->outcome = FUZZ_502;
		return;
	}
	for (int i = 0; i < n; i++)
		fuzz_put(&r->out, iov[i].iov_base, iov[i].iov_len);
}

/* forward.c's fwd_head: the final head's decisions and its rewrite. */
static void fuzz_final_head(struct fuzz_relay *r, size_t head_len)
{
	struct http1_fwd_resp f;

	r->close_after = r->resp.framing == HTTP1_BODY_CLOSE || !r->rq->req_done;
	r->dechunk = r->rq->minor == 0 && r->resp.framing == HTTP1_BODY_CHUNKED;
	if (r->dechunk)
		r->close_after = true;
	memset(&f, 0, sizeof(f));
	f.backend_hdr.p = FUZZ_BACKEND_HDR;
	f.backend_hdr.len = strlen(FUZZ_BACKEND_HDR);
	f.backend_name.p = "b1";
	f.backend_name.len = 2;
	f.via.p = r->resp.minor == 0 ? "1.0 ringproxy" : "1.1 ringproxy";
	f.via.len = 13;
	f.close = r->close_after;
	f.keep_alive_10 = r->rq->minor == 0 && !r->close_after;
	f.dechunk = r->dechunk;
	fuzz_write_head(r, &f);
	if (r->outcome)
		return;
	r->final_head_at = r->pos;
	r->final_head_len = head_len;
	r->pos += head_len;
	r->body_at = r->pos;
	r->body = true;
	r->body_left = r->resp.content_length;
	http1_chunked_init(&r->chunk);
	if (r->resp.framing == HTTP1_BODY_NONE ||
	    (r->resp.framing == HTTP1_BODY_LENGTH && r->body_left == 0))
		r->outcome = FUZZ_DONE;
}

/* forward.c's fwd_body: relay what the buffer holds of the body. */
static void fuzz_body(struct fuzz_relay *r)
{
	const char *p = r->in.p + r->pos;
	size_t avail = r->in.len - r->pos, n = 0;
	ssize_t k;

	switch (r->resp.framing) {
	case HTTP1_BODY_LENGTH:
		n = avail < r->body_left ? avail : (size_t)r->body_left;
		r->body_left -= n;
		if (r->body_left == 0)
			r->outcome = FUZZ_DONE;
		break;
	case HTTP1_BODY_CHUNKED:
		if (r->dechunk) {
			while (avail && !r->chunk.done) {
				size_t off, dlen;

				k = http1_chunked_decode(&r->chunk, p, avail, &off, &dlen);
				if (k < 0) {
					r->outcome = FUZZ_CUT;
					return;
				}
				if (k == 0)
					break;
				FUZZ_CHECK((size_t)k <= avail && off + dlen <= (size_t)k);
				fuzz_put(&r->out, p + off, dlen);
				p += k;
				avail -= (size_t)k;
				r->pos += (size_t)k;
			}
			if (r->chunk.done)
				r->outcome = FUZZ_DONE;
			return;
		}
		k = http1_chunked_scan(&r->chunk, p, avail);
		if (k < 0) {
			r->outcome = FUZZ_CUT;
			return;
		}
		FUZZ_CHECK((size_t)k <= avail);
		n = (size_t)k;
		if (r->chunk.done)
			r->outcome = FUZZ_DONE;
		break;
	case HTTP1_BODY_CLOSE:
		n = avail;
		break;
	case HTTP1_BODY_NONE:
		r->outcome = FUZZ_DONE;
		break;
	}
	fuzz_put(&r->out, p, n);
	r->pos += n;
}

/* forward.c's fwd_process on n more bytes from the backend. */
static void fuzz_feed(struct fuzz_relay *r, const char *p, size_t n)
{
	fuzz_put(&r->in, p, n);
	while (!r->outcome) {
		if (!r->body) {
			static const struct http1_limits lim = { FUZZ_MAX_HEAD, FUZZ_MAXH };
			ssize_t k = http1_parse_response(&r->resp, r->hdrs, r->in.p + r->pos,
							 r->in.len - r->pos, &lim, r->rq->method);

			if (k == 0)
				return;
			if (k < 0 || r->resp.status == 101) {
				FUZZ_CHECK(k > 0 || r->resp.error != NULL);
				r->outcome = FUZZ_502;
				return;
			}
			if (r->resp.status < 200) {
				if (r->rq->minor == 1) {
					struct http1_fwd_resp f;

					memset(&f, 0, sizeof(f));
					fuzz_write_head(r, &f);
					r->interim++;
				}
				r->pos += (size_t)k;
				http1_msg_init(&r->resp);
				continue;
			}
			fuzz_final_head(r, (size_t)k);
			continue;
		}
		fuzz_body(r);
		return;
	}
}

/* The backend closed: forward.c's fwd_on_read at end of stream. */
static void fuzz_eof(struct fuzz_relay *r)
{
	if (r->outcome)
		return;
	if (!r->body)
		r->outcome = FUZZ_502;
	else if (r->resp.framing == HTTP1_BODY_CLOSE)
		r->outcome = FUZZ_DONE;
	else
		r->outcome = FUZZ_CUT;
}

static void fuzz_relay_init(struct fuzz_relay *r, const struct fuzz_req *rq)
{
	memset(r, 0, sizeof(*r));
	r->rq = rq;
	http1_msg_init(&r->resp);
}

static void fuzz_relay_free(struct fuzz_relay *r)
{
	free(r->in.p);
	free(r->out.p);
}

/* ---- what the client reads ------------------------------------------- */

static bool fuzz_has(const struct http1_msg *m, const char *lower)
{
	for (unsigned i = 0; i < m->nheaders; i++)
		if (http1_str_ieq(m->headers[i].name, lower))
			return true;
	return false;
}

static unsigned fuzz_count(const struct http1_msg *m, const char *lower)
{
	unsigned n = 0;

	for (unsigned i = 0; i < m->nheaders; i++)
		n += http1_str_ieq(m->headers[i].name, lower);
	return n;
}

/* The body data the backend sent, read independently of the relay: the
 * Content-Length bytes, everything until close, or the chunked data
 * decoded in one pass. Returns false when the body did not complete. */
static bool fuzz_backend_body(const struct fuzz_relay *r, struct fuzz_buf *data)
{
	const char *p = r->in.p + r->body_at;
	size_t avail = r->in.len - r->body_at;
	struct http1_chunked c;
	ssize_t k;

	switch (r->resp.framing) {
	case HTTP1_BODY_NONE:
		return true;
	case HTTP1_BODY_LENGTH:
		fuzz_put(data, p, avail < r->resp.content_length ? avail : (size_t)r->resp.content_length);
		return avail >= r->resp.content_length;
	case HTTP1_BODY_CLOSE:
		fuzz_put(data, p, avail);
		return true;
	case HTTP1_BODY_CHUNKED:
		http1_chunked_init(&c);
		while (avail && !c.done) {
			size_t off, dlen;

			k = http1_chunked_decode(&c, p, avail, &off, &dlen);
			if (k <= 0)
				break;
			fuzz_put(data, p + off, dlen);
			p += k;
			avail -= (size_t)k;
		}
		return c.done;
	}
	return false;
}

/* A header the backend's Connection lists is hop-by-hop (RFC 9110
 * 7.6.1): it must not reach the client, unless it is one the proxy
 * writes itself. */
static void fuzz_check_listed(const struct http1_msg *resp, const struct http1_msg *sent)
{
	/* what the writer generates, and what Connection may not make
	 * hop-by-hop (http1.c) */
	static const char *const ours[] = { "connection", "close", "keep-alive", "via",
					    "x-ringproxy-backend", "content-length",
					    "transfer-encoding", "host", "x-forwarded-for",
					    "x-forwarded-proto" };

	for (unsigned i = 0; i < resp->nheaders; i++) {
		const char *p = resp->headers[i].value.p, *e = p + resp->headers[i].value.len;

		if (!http1_str_ieq(resp->headers[i].name, "connection"))
			continue;
		/* list elements (RFC 9110 5.6.1), OWS trimmed: an element
		 * that is not a token names no header */
		while (p < e) {
			struct http1_str t;
			bool own = false;

			while (p < e && (*p == ' ' || *p == '\t' || *p == ','))
				p++;
			t.p = p;
			while (p < e && *p != ',')
				p++;
			t.len = (size_t)(p - t.p);
			while (t.len && (t.p[t.len - 1] == ' ' || t.p[t.len - 1] == '\t'))
				t.len--;
			if (t.len == 0)
				continue;
			for (size_t k = 0; k < sizeof(ours) / sizeof(ours[0]); k++)
				own |= http1_str_ieq(t, ours[k]);
			for (unsigned j = 0; !own && j < sent->nheaders; j++)
				FUZZ_CHECK(!(sent->headers[j].name.len == t.len &&
					     strncasecmp(sent->headers[j].name.p, t.p, t.len) == 0));
		}
	}
}

static void fuzz_check_client(const struct fuzz_relay *r)
{
	static const struct http1_limits big = { 1u << 20, 4 * FUZZ_MAXH };
	static const char *const hop[] = { "keep-alive", "proxy-connection", "te",
					   "trailer", "upgrade" };
	struct http1_header h[4 * FUZZ_MAXH];
	struct http1_msg m;
	struct fuzz_buf want = { 0 }, got = { 0 };
	const char *p = r->out.p;
	size_t left = r->out.len;
	bool complete;
	ssize_t k;
	int interim = 0;

	/* interim heads, then the final one, each whole */
	for (;;) {
		http1_msg_init(&m);
		k = http1_parse_response(&m, h, p, left, &big, r->rq->method);
		FUZZ_CHECK(k > 0);
		p += k;
		left -= (size_t)k;
		if (m.status >= 200)
			break;
		interim++;
		FUZZ_CHECK(r->rq->minor == 1);
	}
	FUZZ_CHECK(interim == r->interim);
	FUZZ_CHECK(m.status == r->resp.status);
	FUZZ_CHECK(fuzz_count(&m, "x-ringproxy-backend") == 1);
	for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
		FUZZ_CHECK(!fuzz_has(&m, hop[i]));
	FUZZ_CHECK(fuzz_count(&m, "connection") <= 1);
	fuzz_check_listed(&r->resp, &m);
	if (r->close_after)
		FUZZ_CHECK(!m.keep_alive);
	if (r->rq->minor == 0)
		FUZZ_CHECK(m.framing != HTTP1_BODY_CHUNKED);
	if (m.status < 200 || m.status == 204)
		FUZZ_CHECK(!fuzz_has(&m, "content-length") && !fuzz_has(&m, "transfer-encoding"));
	/* the framing the client is told, against the backend's */
	switch (r->resp.framing) {
	case HTTP1_BODY_NONE:
		FUZZ_CHECK(m.framing == HTTP1_BODY_NONE);
		break;
	case HTTP1_BODY_LENGTH:
		FUZZ_CHECK(m.framing == HTTP1_BODY_LENGTH && m.content_length == r->resp.content_length);
		break;
	case HTTP1_BODY_CHUNKED:
		FUZZ_CHECK(m.framing == (r->dechunk ? HTTP1_BODY_CLOSE : HTTP1_BODY_CHUNKED));
		break;
	case HTTP1_BODY_CLOSE:
		FUZZ_CHECK(m.framing == HTTP1_BODY_CLOSE && !m.keep_alive);
		break;
	}
	/* the body as the client reads it */
	complete = fuzz_backend_body(r, &want);
	switch (m.framing) {
	case HTTP1_BODY_NONE:
		FUZZ_CHECK(left == 0);
		break;
	case HTTP1_BODY_LENGTH:
		/* a length body is relayed as it is: never more, and cut
		 * short it cannot read complete */
		FUZZ_CHECK(left <= m.content_length);
		FUZZ_CHECK((left == m.content_length) == (r->outcome == FUZZ_DONE));
		fuzz_put(&got, p, left);
		break;
	case HTTP1_BODY_CHUNKED: {
		struct http1_chunked c;
		size_t off, dlen;

		http1_chunked_init(&c);
		k = http1_chunked_scan(&c, p, left);
		FUZZ_CHECK(k >= 0 && (size_t)k == left);
		FUZZ_CHECK(c.done == (r->outcome == FUZZ_DONE));
		http1_chunked_init(&c);
		while (left && !c.done) {
			k = http1_chunked_decode(&c, p, left, &off, &dlen);
			FUZZ_CHECK(k > 0);
			fuzz_put(&got, p + off, dlen);
			p += k;
			left -= (size_t)k;
		}
		break;
	}
	case HTTP1_BODY_CLOSE:
		/* read until close: decoded data for a 1.0 client (which
		 * cannot tell a cut from an end: HTTP/1.0's own limit) */
		fuzz_put(&got, p, left);
		break;
	}
	if (r->outcome == FUZZ_DONE) {
		FUZZ_CHECK(complete);
		FUZZ_CHECK(got.len == want.len && (got.len == 0 || memcmp(got.p, want.p, got.len) == 0));
	} else {
		/* cut: what the client has is a prefix of the data */
		FUZZ_CHECK(got.len <= want.len && (got.len == 0 || memcmp(got.p, want.p, got.len) == 0));
	}
	free(want.p);
	free(got.p);
}

/* ---- the cache's decision -------------------------------------------- */

static void fuzz_check_cache(const struct fuzz_relay *r, uint8_t hbits, uint8_t clock)
{
	static const struct http1_limits lim = { 8192, 32 };
	struct http1_header rh[32];
	struct http1_msg req;
	struct cachectl_req rq;
	struct cachectl_meta meta;
	struct cachectl_cc rcc, cc;
	struct fuzz_buf head = { 0 };
	int64_t req_time = 1767225600, resp_time = req_time + (clock & 7);
	int64_t grace = (int64_t)(clock >> 3) * 10;
	const char *m = r->rq->method == HTTP1_M_HEAD ? "HEAD" :
			r->rq->method == HTTP1_M_POST ? "POST" : "GET";
	bool storable;

	fuzz_put(&head, m, strlen(m));
	fuzz_put(&head, " /t/1.jpg HTTP/1.1\r\nHost: img.example\r\n", 39);
	if (hbits & 0x01)
		fuzz_put(&head, "Cache-Control: no-store\r\n", 25);
	if (hbits & 0x02)
		fuzz_put(&head, "Cache-Control: no-cache\r\n", 25);
	if (hbits & 0x04)
		fuzz_put(&head, "Cache-Control: max-age=0\r\n", 26);
	if (hbits & 0x08)
		fuzz_put(&head, "Authorization: Basic eDp5\r\n", 27);
	if (hbits & 0x10)
		fuzz_put(&head, "Accept-Encoding: gzip\r\n", 23);
	if (hbits & 0x20)
		fuzz_put(&head, "Accept-Encoding: br;q=0.5\r\n", 27);
	if (hbits & 0x40)
		fuzz_put(&head, "Range: bytes=0-9\r\n", 18);
	fuzz_put(&head, "\r\n", 2);
	http1_msg_init(&req);
	FUZZ_CHECK(http1_parse_request(&req, rh, head.p, head.len, &lim) == (ssize_t)head.len);
	cachectl_request(&req, &rq);
	cachectl_parse_cc(&req, &rcc);
	cachectl_parse_cc(&r->resp, &cc);

	storable = cachectl_response(&rq, req.method_id, &r->resp, req_time, resp_time, grace, &meta);
	FUZZ_CHECK(storable == meta.storable);
	if (!storable) {
		FUZZ_CHECK(meta.why != NULL);
		goto out;
	}
	FUZZ_CHECK(req.method_id == HTTP1_M_GET);
	FUZZ_CHECK(rq.kind == CACHECTL_LOOKUP || rq.kind == CACHECTL_REFRESH);
	/* any final status but 206 and 304 (RFC 9111 3) */
	FUZZ_CHECK(r->resp.status >= 200 && r->resp.status != 206 && r->resp.status != 304);
	FUZZ_CHECK(!(rcc.flags & CACHECTL_NO_STORE) && !(rq.flags & CACHECTL_RQ_NO_STORE));
	FUZZ_CHECK(!fuzz_has(&r->resp, "set-cookie"));
	/* a targeted field (CDN-Cache-Control, Surrogate-Control) rules in
	 * place of Cache-Control: the checks of its directives are for a
	 * response without one */
	if (!cachectl_targeted(&r->resp, NULL)) {
		FUZZ_CHECK(!(cc.flags & CACHECTL_PRIVATE));
		FUZZ_CHECK(!(cc.flags & CACHECTL_NO_STORE) || (cc.flags & CACHECTL_MUST_UNDERSTAND));
		if (rq.flags & CACHECTL_RQ_AUTH)
			FUZZ_CHECK((cc.flags & (CACHECTL_PUBLIC | CACHECTL_S_MAXAGE)) &&
				   (meta.flags & CACHECTL_M_AUTH_OK));
		if (cc.flags & (CACHECTL_MUST_REVALIDATE | CACHECTL_PROXY_REVALIDATE | CACHECTL_S_MAXAGE))
			FUZZ_CHECK((meta.flags & CACHECTL_M_REVALIDATE) && meta.swr == 0 && meta.sie == 0);
	}
	FUZZ_CHECK(meta.lifetime >= 0 && meta.initial_age >= 0 && meta.swr >= 0 && meta.sie >= 0);
	FUZZ_CHECK(meta.resp_time == resp_time);
	/* fresh on arrival, or inside a stale window still, or kept only to
	 * be revalidated (no-cache, or stale on arrival with a validator) */
	FUZZ_CHECK(meta.lifetime > meta.initial_age ||
		   (meta.swr > meta.sie ? meta.swr : meta.sie) > meta.initial_age - meta.lifetime ||
		   ((meta.flags & CACHECTL_M_NO_CACHE) && (meta.etag.len || meta.last_modified >= 0)));
	/* the validator is a slice of the response head */
	if (meta.etag.len)
		FUZZ_CHECK(meta.etag.p >= r->in.p + r->final_head_at &&
			   meta.etag.p + meta.etag.len <= r->in.p + r->final_head_at + r->final_head_len);
out:
	free(head.p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum http1_method methods[] = { HTTP1_M_GET, HTTP1_M_HEAD, HTTP1_M_POST,
						     HTTP1_M_GET };
	struct fuzz_relay whole, split;
	struct fuzz_req rq;
	const char *p;
	size_t len, off = 0;
	unsigned seed;

	if (size < 4)
		return 0;
	rq.minor = data[0] & 1;
	rq.method = methods[(data[0] >> 1) & 3];
	rq.req_done = (data[0] & 8) != 0;
	seed = data[3];
	p = (const char *)data + 4;
	len = size - 4;

	fuzz_relay_init(&whole, &rq);
	fuzz_feed(&whole, p, len);
	fuzz_eof(&whole);

	/* the same bytes in pieces of 1 to 16 bytes, sizes from the seed */
	fuzz_relay_init(&split, &rq);
	while (off < len && !split.outcome) {
		size_t n = 1 + (seed & 15);

		seed = seed * 1103515245u + 12345u;
		seed ^= seed >> 16;
		if (n > len - off)
			n = len - off;
		fuzz_feed(&split, p + off, n);
		off += n;
	}
	fuzz_eof(&split);
	FUZZ_CHECK(split.outcome == whole.outcome);
	if (whole.outcome == FUZZ_CUT) {
		/* a body broken in the middle: the pieces before the break
		 * may have gone out already, so one is a prefix of the other */
		size_t n = split.out.len < whole.out.len ? split.out.len : whole.out.len;

		FUZZ_CHECK(n == 0 || memcmp(split.out.p, whole.out.p, n) == 0);
	} else {
		FUZZ_CHECK(split.out.len == whole.out.len &&
			   (whole.out.len == 0 || memcmp(split.out.p, whole.out.p, whole.out.len) == 0));
	}

	if (whole.body) {
		fuzz_check_client(&whole);
		fuzz_check_cache(&whole, data[1], data[2]);
	}
	fuzz_relay_free(&whole);
	fuzz_relay_free(&split);
	return 0;
}
