/*
 * range.h -- single byte ranges of stored responses (RFC 9110 14): a
 * request's If-Range, and the head of the 206 or 416 a stored complete
 * 200 answers a Range with (cachectl_request reads the Range itself:
 * CACHECTL_RQ_RANGE).
 *
 * Pure: no I/O, no allocation, no clock. Any thread may call any function.
 */
#ifndef RINGPROXY_RANGE_H
#define RINGPROXY_RANGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "http/http1.h"

/* Whether the request's If-Range (if any) lets the range be served from
 * a stored response with etag (len 0: none) and last_modified (-1: none):
 * a strong entity-tag equal to etag, or an HTTP-date equal to
 * last_modified (RFC 9110 13.1.5). false: send the whole response. */
bool range_if_range(const struct http1_msg *req, struct http1_str etag,
		    int64_t last_modified, int64_t now);

/* How a stored complete 200 answers a range: status 206 (body bytes
 * [off, off + len)), 416 (no body), or 200 (the whole response, as if no
 * Range: the stored head did not end with its Content-Length line, or
 * buf was too small). iov[0..n) is the head up to our caching lines
 * (cache_obj_head's contract: each line with its CRLF, no blank line):
 * the status line, the stored lines but Content-Length (206 only), and
 * the Content-Length and Content-Range lines written into buf. */
struct range_reply {
	int status;
	struct iovec iov[3];
	int n;
	size_t off, len;
};

/* first, last: as cachectl_req's range_first, range_last. */
void range_reply(int64_t first, int64_t last, struct iovec head, size_t bodylen,
		 char *buf, size_t cap, struct range_reply *out);

#endif
