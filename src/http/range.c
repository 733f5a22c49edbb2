/*
 * range.c -- a single byte range answered from a stored complete response
 * (see range.h): If-Range, the 206's head (the stored lines, with our
 * Content-Length and Content-Range) and the 416 of a range past the end.
 * Called by the worker that answers a hit; nothing here keeps state.
 */
#include "http/range.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "http/cachectl.h"

bool range_if_range(const struct http1_msg *req, struct http1_str etag,
		    int64_t last_modified, int64_t now)
{
	const struct http1_header *h = NULL;
	int64_t t;

	for (unsigned i = 0; i < req->nheaders; i++)
		if (http1_str_ieq(req->headers[i].name, "if-range"))
			h = &req->headers[i];
	if (h == NULL)
		return true;
	/* an entity-tag: strong comparison (RFC 9110 8.8.3.2), W/ never
	 * matches */
	if (h->value.len > 0 && (h->value.p[0] == '"' || h->value.p[0] == 'W'))
		return h->value.p[0] == '"' && etag.len >= 2 && etag.p[0] == '"'
		       && etag.len == h->value.len
		       && memcmp(etag.p, h->value.p, etag.len) == 0;
	return last_modified >= 0 && cachectl_date(h->value, now, &t) == 0
	       && t == last_modified;
}

/* The length of head's status line, and where its last line (ours,
 * "Content-Length: N\r\n") starts; -1 when it is not there. */
static int range_head_split(struct iovec head, size_t *status_len, size_t *cl_at)
{
	const char *p = head.iov_base, *nl;
	size_t n = head.iov_len, i;

	nl = memchr(p, '\n', n);
	if (nl == NULL || n < 2 || p[n - 1] != '\n')
		return -1;
	*status_len = (size_t)(nl + 1 - p);
	for (i = n - 1; i > *status_len && p[i - 1] != '\n'; i--)
		;
	if (i < *status_len || n - i < 16 || strncasecmp(p + i, "content-length:", 15) != 0)
		return -1;
	*cl_at = i;
	return 0;
}

void range_reply(int64_t first, int64_t last, struct iovec head, size_t bodylen,
		 char *buf, size_t cap, struct range_reply *out)
{
	static const char s206[] = "HTTP/1.1 206 Partial Content\r\n";
	static const char s416[] = "HTTP/1.1 416 Range Not Satisfiable\r\n";
	int64_t len = (int64_t)bodylen;
	size_t status_len, cl_at;
	int m;

	memset(out, 0, sizeof(*out));
	out->status = 200;
	if (range_head_split(head, &status_len, &cl_at) < 0)
		return;
	if (first < 0) {                /* the last `last` bytes */
		first = last >= len ? 0 : len - last;
		last = len - 1;
	} else if (last < 0 || last >= len) {
		last = len - 1;
	}
	if (first >= len || first > last) {
		m = snprintf(buf, cap, "Content-Range: bytes */%lld\r\nContent-Length: 0\r\n",
			     (long long)len);
		if (m < 0 || (size_t)m >= cap)
			return;
		out->status = 416;
		out->iov[0] = (struct iovec){ (void *)s416, sizeof(s416) - 1 };
		out->iov[1] = (struct iovec){ buf, (size_t)m };
		out->n = 2;
		return;
	}
	m = snprintf(buf, cap, "Content-Length: %lld\r\nContent-Range: bytes %lld-%lld/%lld\r\n",
		     (long long)(last - first + 1), (long long)first, (long long)last,
		     (long long)len);
	if (m < 0 || (size_t)m >= cap)
		return;
	out->status = 206;
	out->iov[0] = (struct iovec){ (void *)s206, sizeof(s206) - 1 };
	out->iov[1] = (struct iovec){ (char *)head.iov_base + status_len, cl_at - status_len };
	out->iov[2] = (struct iovec){ buf, (size_t)m };
	out->n = 3;
	out->off = (size_t)first;
	out->len = (size_t)(last - first + 1);
}
