/*
 * test-range.c -- range.c's answers to one byte range of a stored complete
 * 200: the 206's head and body slice, the 416 past the end, the fallback
 * to the whole response, and If-Range, each pinned by a table row.
 */
#include "http/range.h"
#include "tap.h"

#include <stdio.h>

#define HEAD "HTTP/1.1 200 OK\r\nETag: \"e\"\r\nContent-Type: image/jpeg\r\nContent-Length: 16\r\n"

/* The head range_reply's iovecs make, with the slice it names. */
static void flat(const struct range_reply *r, const char *body, char *out, size_t cap)
{
	size_t n = 0;

	for (int i = 0; i < r->n; i++) {
		n += (size_t)snprintf(out + n, cap - n, "%.*s", (int)r->iov[i].iov_len,
				      (const char *)r->iov[i].iov_base);
	}
	snprintf(out + n, cap - n, "|%.*s", (int)r->len, body + r->off);
}

static void test_reply(void)
{
	static const struct {
		int64_t first, last;
		int status;
		const char *want;       /* flat(); NULL for a 200 */
	} c[] = {
		{ 2, 5, 206, "HTTP/1.1 206 Partial Content\r\nETag: \"e\"\r\nContent-Type: image/jpeg\r\n"
		  "Content-Length: 4\r\nContent-Range: bytes 2-5/16\r\n|2345" },
		{ 10, -1, 206, "HTTP/1.1 206 Partial Content\r\nETag: \"e\"\r\nContent-Type: image/jpeg\r\n"
		  "Content-Length: 6\r\nContent-Range: bytes 10-15/16\r\n|ABCDEF" },
		{ -1, 3, 206, "HTTP/1.1 206 Partial Content\r\nETag: \"e\"\r\nContent-Type: image/jpeg\r\n"
		  "Content-Length: 3\r\nContent-Range: bytes 13-15/16\r\n|DEF" },
		{ -1, 99, 206, "HTTP/1.1 206 Partial Content\r\nETag: \"e\"\r\nContent-Type: image/jpeg\r\n"
		  "Content-Length: 16\r\nContent-Range: bytes 0-15/16\r\n|0123456789ABCDEF" },
		{ 0, 99, 206, "HTTP/1.1 206 Partial Content\r\nETag: \"e\"\r\nContent-Type: image/jpeg\r\n"
		  "Content-Length: 16\r\nContent-Range: bytes 0-15/16\r\n|0123456789ABCDEF" },
		{ 16, -1, 416, "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */16\r\n"
		  "Content-Length: 0\r\n|" },
		{ -1, 0, 416, "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */16\r\n"
		  "Content-Length: 0\r\n|" },
	};
	const char *body = "0123456789ABCDEF";
	char buf[128], out[512];

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct iovec head = { HEAD, sizeof(HEAD) - 1 };
		struct range_reply r;

		range_reply(c[i].first, c[i].last, head, 16, buf, sizeof(buf), &r);
		flat(&r, body, out, sizeof(out));
		tap_ok(r.status == c[i].status && strcmp(out, c[i].want) == 0, "range %lld-%lld of 16: %d",
		       (long long)c[i].first, (long long)c[i].last, c[i].status);
		if (r.status != c[i].status || strcmp(out, c[i].want) != 0)
			tap_diag("  got %d: %s", r.status, out);
	}
}

static void test_fallback(void)
{
	struct iovec nocl = { "HTTP/1.1 200 OK\r\nETag: \"e\"\r\n", 29 };
	struct iovec head = { HEAD, sizeof(HEAD) - 1 };
	struct range_reply r;
	char buf[128];

	range_reply(0, 1, nocl, 16, buf, sizeof(buf), &r);
	tap_ok(r.status == 200, "a head without its Content-Length line last: the whole response");
	range_reply(0, 1, head, 16, buf, 10, &r);
	tap_ok(r.status == 200, "our lines do not fit: the whole response");
	range_reply(0, -1, head, 0, buf, sizeof(buf), &r);
	tap_ok(r.status == 416, "any range of an empty body: 416");
}

static void test_if_range(void)
{
	static const struct {
		const char *line;       /* NULL: no If-Range */
		bool range;
	} c[] = {
		{ NULL, true },
		{ "\"e\"", true },
		{ "\"f\"", false },
		{ "W/\"e\"", false },
		{ "Tue, 14 Nov 2023 22:13:20 GMT", true },
		{ "Tue, 14 Nov 2023 22:13:21 GMT", false },
		{ "yesterday", false },
	};
	static struct http1_header hq[16];
	static const struct http1_limits lim = { 4096, 16 };
	struct http1_str etag = { "\"e\"", 3 };
	char req[256];

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct http1_msg m;

		snprintf(req, sizeof(req), "GET /x HTTP/1.1\r\nHost: a\r\nRange: bytes=0-1\r\n%s%s%s\r\n",
			 c[i].line ? "If-Range: " : "", c[i].line ? c[i].line : "", c[i].line ? "\r\n" : "");
		http1_msg_init(&m);
		if (http1_parse_request(&m, hq, req, strlen(req), &lim) <= 0) {
			tap_ok(0, "request %zu parses", i);
			continue;
		}
		tap_ok(range_if_range(&m, etag, INT64_C(1700000000), INT64_C(1700000000)) == c[i].range,
		       "If-Range: %s: %s", c[i].line ? c[i].line : "(none)", c[i].range ? "the range" : "the whole");
	}
}

int main(void)
{
	test_reply();
	test_fallback();
	test_if_range();
	return tap_done();
}
