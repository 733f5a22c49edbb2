/*
 * test-http1.c -- the HTTP/1.1 codec against tables of valid, invalid and
 * smuggling messages, each with its exact outcome. Every case is also fed
 * incrementally (a byte at a time, and split in two at every position) and
 * must give the same result; accepted heads are written back out by the
 * writers and must parse to the same fields.
 */
#include "http/http1.h"
#include "tap.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define OK 1            /* complete: head length = end of the first head */
#define MORE 0

#define NONE HTTP1_BODY_NONE
#define LEN HTTP1_BODY_LENGTH
#define CHK HTTP1_BODY_CHUNKED
#define CLOSE HTTP1_BODY_CLOSE

struct rq_case {
	const char *name;
	const char *in;
	size_t len;
	int want;               /* OK, MORE or -status */
	enum http1_framing framing;
	uint64_t cl;
	int ka;
	const char *path;       /* NULL: not checked */
	const char *query;      /* NULL: no query expected (when path given) */
	unsigned max_headers;   /* 0: default */
	size_t max_head;        /* 0: default */
};

#define S(lit) lit, sizeof(lit) - 1
#define H "Host: a\r\n"

/* request: name, bytes, outcome, framing, content length, keep-alive */
#define RQ(n, lit, w, f, cl, ka) { n, S(lit), w, f, cl, ka, NULL, NULL, 0, 0 }
#define RQP(n, lit, path, q) { n, S(lit), OK, NONE, 0, 1, path, q, 0, 0 }
#define RQE(n, lit, w) { n, S(lit), w, NONE, 0, 0, NULL, NULL, 0, 0 }
#define RQL(n, lit, w, mh, mb) { n, S(lit), w, NONE, 0, 1, NULL, NULL, mh, mb }

static const struct rq_case rq_cases[] = {
	/* valid */
	RQ("simple GET", "GET / HTTP/1.1\r\n" H "\r\n", OK, NONE, 0, 1),
	RQP("path and query", "GET /t/x.jpg?w=100&h=200 HTTP/1.1\r\n" H "\r\n", "/t/x.jpg", "w=100&h=200"),
	RQP("empty query", "GET /a? HTTP/1.1\r\n" H "\r\n", "/a", ""),
	RQP("percent-encoded path", "GET /a%20b/%E2%82%AC HTTP/1.1\r\n" H "\r\n", "/a%20b/%E2%82%AC", NULL),
	RQP("absolute-form", "GET http://example.com/p?q=1 HTTP/1.1\r\n" H "\r\n", "/p", "q=1"),
	RQP("absolute-form, no path", "GET http://example.com HTTP/1.1\r\n" H "\r\n", "/", NULL),
	RQP("absolute-form, query only", "GET http://example.com?x HTTP/1.1\r\n" H "\r\n", "/", "x"),
	RQP("absolute-form https uppercase", "GET HTTPS://h:8443/x HTTP/1.1\r\n" H "\r\n", "/x", NULL),
	RQP("asterisk-form with OPTIONS", "OPTIONS * HTTP/1.1\r\n" H "\r\n", "*", NULL),
	RQ("HTTP/1.0 without Host closes", "GET / HTTP/1.0\r\n\r\n", OK, NONE, 0, 0),
	RQ("HTTP/1.0 keep-alive", "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", OK, NONE, 0, 1),
	RQ("HTTP/1.0 Keep-Alive any case", "GET / HTTP/1.0\r\nconnection: Keep-Alive\r\n\r\n", OK, NONE, 0, 1),
	RQ("HTTP/1.0 keep-alive, close", "GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n", OK, NONE, 0, 0),
	RQ("HTTP/1.1 Connection: close", "GET / HTTP/1.1\r\n" H "Connection: close\r\n\r\n", OK, NONE, 0, 0),
	RQ("HTTP/1.1 Connection: CLOSE", "GET / HTTP/1.1\r\n" H "Connection: CLOSE\r\n\r\n", OK, NONE, 0, 0),
	RQ("HTTP/1.1 close in a later Connection", "GET / HTTP/1.1\r\n" H "Connection: x\r\nConnection: te, close\r\n\r\n", OK, NONE, 0, 0),
	RQ("HTTP/1.1 keep-alive, upgrade", "GET / HTTP/1.1\r\n" H "Connection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n", OK, NONE, 0, 1),
	RQ("POST Content-Length", "POST /u HTTP/1.1\r\n" H "Content-Length: 5\r\n\r\nhello", OK, LEN, 5, 1),
	RQ("POST Content-Length 0", "POST /u HTTP/1.1\r\n" H "Content-Length: 0\r\n\r\n", OK, LEN, 0, 1),
	RQ("Content-Length leading zeros", "POST /u HTTP/1.1\r\n" H "Content-Length: 005\r\n\r\nhello", OK, LEN, 5, 1),
	RQ("Content-Length with OWS", "POST /u HTTP/1.1\r\n" H "Content-Length:\t 5 \t\r\n\r\nhello", OK, LEN, 5, 1),
	RQ("Content-Length no space", "POST /u HTTP/1.1\r\n" H "Content-Length:5\r\n\r\nhello", OK, LEN, 5, 1),
	RQ("Content-Length list of equal values", "POST /u HTTP/1.1\r\n" H "Content-Length: 5, 5\r\n\r\nhello", OK, LEN, 5, 1),
	RQ("Content-Length repeated equal", "POST /u HTTP/1.1\r\n" H "Content-Length: 5\r\ncontent-length: 5\r\n\r\nhello", OK, LEN, 5, 1),
	RQ("Content-Length 2^63-1", "POST /u HTTP/1.1\r\n" H "Content-Length: 9223372036854775807\r\n\r\n", OK, LEN, INT64_MAX, 1),
	RQ("chunked", "POST /u HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", OK, CHK, 0, 1),
	/* names compared eight bytes at a time: any case matches, a byte
	 * that only folds onto the literal's ('_' onto '-') does not */
	RQ("CONTENT-LENGTH uppercase", "POST /u HTTP/1.1\r\n" H "CONTENT-LENGTH: 5\r\n\r\nhello", OK, LEN, 5, 1),
	RQ("tRaNsFeR-eNcOdInG mixed case", "POST /u HTTP/1.1\r\n" H "tRaNsFeR-eNcOdInG: chunked\r\n\r\n", OK, CHK, 0, 1),
	RQ("Content_Length is another header", "POST /u HTTP/1.1\r\n" H "Content_Length: 5\r\n\r\n", OK, NONE, 0, 1),
	RQ("Content-Lengtx is another header", "POST /u HTTP/1.1\r\n" H "Content-Lengtx: 5\r\n\r\n", OK, NONE, 0, 1),
	RQ("Xontent-Length is another header", "POST /u HTTP/1.1\r\n" H "Xontent-Length: 5\r\n\r\n", OK, NONE, 0, 1),
	RQ("Transfer-Encoding: CHUNKED, 8 bytes or more", "POST /u HTTP/1.1\r\n" H "Transfer-Encoding: CHUNKED\r\nConnection: KEEP-ALIVE\r\n\r\n", OK, CHK, 0, 1),
	RQ("Chunked uppercase", "POST /u HTTP/1.1\r\n" H "Transfer-Encoding: CHUNKED\r\n\r\n", OK, CHK, 0, 1),
	RQ("chunked with trailing SP (OWS)", "POST /u HTTP/1.1\r\n" H "Transfer-Encoding: chunked \r\n\r\n", OK, CHK, 0, 1),
	RQ("chunked after HTAB (OWS)", "POST /u HTTP/1.1\r\n" H "Transfer-Encoding:\tchunked\r\n\r\n", OK, CHK, 0, 1),
	RQ("chunked no space", "POST /u HTTP/1.1\r\n" H "Transfer-Encoding:chunked\r\n\r\n", OK, CHK, 0, 1),
	RQ("Transfer_Encoding is another header", "POST /u HTTP/1.1\r\n" H "Transfer_Encoding: chunked\r\n\r\n", OK, NONE, 0, 1),
	RQ("one leading CRLF skipped", "\r\nGET / HTTP/1.1\r\n" H "\r\n", OK, NONE, 0, 1),
	RQ("three leading CRLF skipped", "\r\n\r\n\r\nGET / HTTP/1.1\r\n" H "\r\n", OK, NONE, 0, 1),
	RQ("pipelined second request untouched", "GET /1 HTTP/1.1\r\n" H "\r\nGET /2 HTTP/1.1\r\n" H "\r\n", OK, NONE, 0, 1),
	RQ("pipelined garbage untouched", "GET /1 HTTP/1.1\r\n" H "\r\n\n\x01\x02 garbage", OK, NONE, 0, 1),
	RQ("unknown method forwarded", "PURGE /x HTTP/1.1\r\n" H "\r\n", OK, NONE, 0, 1),
	RQ("method with token chars", "M-SEARCH! /x HTTP/1.1\r\n" H "\r\n", OK, NONE, 0, 1),
	RQ("lowercase method is a token", "get / HTTP/1.1\r\n" H "\r\n", OK, NONE, 0, 1),
	RQ("obs-text in value", "GET / HTTP/1.1\r\n" H "X-A: caf\xc3\xa9\xff\r\n\r\n", OK, NONE, 0, 1),
	RQ("HTAB inside value", "GET / HTTP/1.1\r\n" H "X-A: a\tb\r\n\r\n", OK, NONE, 0, 1),
	RQ("empty value", "GET / HTTP/1.1\r\n" H "X-Empty:\r\n\r\n", OK, NONE, 0, 1),
	RQ("value of spaces only", "GET / HTTP/1.1\r\n" H "X-Empty:    \r\n\r\n", OK, NONE, 0, 1),
	RQ("all tchar in a name", "GET / HTTP/1.1\r\n" H "!#$%&'*+-.^_`|~09azAZ: v\r\n\r\n", OK, NONE, 0, 1),
	RQ("Host with port", "GET / HTTP/1.1\r\nHost: a.example:8080\r\n\r\n", OK, NONE, 0, 1),
	RQ("Host IPv6 literal", "GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n", OK, NONE, 0, 1),
	RQ("empty Host (RFC 9112 3.2)", "GET / HTTP/1.1\r\nHost:\r\n\r\n", OK, NONE, 0, 1),
	RQ("Host in any case", "GET / HTTP/1.1\r\nhOsT: a\r\n\r\n", OK, NONE, 0, 1),
	RQ("Expect 100-continue", "PUT /x HTTP/1.1\r\n" H "Expect: 100-continue\r\nContent-Length: 3\r\n\r\n", OK, LEN, 3, 1),
	RQ("XFF, Via, X-Forwarded-Proto", "GET / HTTP/1.1\r\n" H "X-Forwarded-For: 1.2.3.4\r\nVia: 1.0 a\r\nX-Forwarded-Proto: https\r\n\r\n", OK, NONE, 0, 1),
	RQ("Connection names a header", "GET / HTTP/1.1\r\n" H "Connection: X-Secret\r\nX-Secret: 1\r\n\r\n", OK, NONE, 0, 1),
	RQ("Connection cannot name Host", "GET / HTTP/1.1\r\n" H "Connection: host\r\n\r\n", OK, NONE, 0, 1),
	RQ("Proxy-Connection and Keep-Alive", "GET / HTTP/1.1\r\n" H "Proxy-Connection: keep-alive\r\nKeep-Alive: 300\r\nTE: trailers\r\nTrailer: X\r\n\r\n", OK, NONE, 0, 1),
	RQL("exactly max_headers", "GET / HTTP/1.1\r\n" H "A: 1\r\nB: 2\r\n\r\n", OK, 3, 0),
	RQL("head exactly max_head", "GET / HTTP/1.1\r\n" H "\r\n", OK, 0, 27),
	RQL("leading CRLF count against max_head", "\r\n\r\nGET / HTTP/1.1\r\n" H "\r\n", -431, 0, 27),

	/* incomplete */
	RQE("need more: request line", "GET / HTTP/1.1", MORE),
	RQE("need more: one CRLF", "GET / HTTP/1.1\r\n" H, MORE),
	RQE("need more: final CR", "GET / HTTP/1.1\r\n" H "\r", MORE),
	RQE("need more: only CRLFs", "\r\n\r\n", MORE),
	RQE("need more: empty", "", MORE),
	RQL("need more: len == max_head", "GET / HTTP/1.1\r\n" H "\r", MORE, 0, 26),

	/* line endings */
	RQE("bare LF everywhere", "GET / HTTP/1.1\n" H "\n", -400),
	RQE("bare LF after a header", "GET / HTTP/1.1\r\nHost: a\n\r\n", -400),
	RQE("bare LF as final line", "GET / HTTP/1.1\r\n" H "\n", -400),
	RQE("bare LF before request line", "\nGET / HTTP/1.1\r\n" H "\r\n", -400),
	RQE("bare CR inside value", "GET / HTTP/1.1\r\n" H "X: a\rb\r\n\r\n", -400),
	RQE("CR CR LF", "GET / HTTP/1.1\r\nHost: a\r\r\n\r\n", -400),
	RQE("bare CR in request line", "GET /\r HTTP/1.1\r\n" H "\r\n", -400),
	RQE("lone CR before request line", "\rGET / HTTP/1.1\r\n" H "\r\n", -400),

	/* characters */
	RQE("NUL in value", "GET / HTTP/1.1\r\n" H "X: a\0b\r\n\r\n", -400),
	RQE("NUL in name", "GET / HTTP/1.1\r\n" H "X\0Y: a\r\n\r\n", -400),
	RQE("NUL in target", "GET /a\0b HTTP/1.1\r\n" H "\r\n", -400),
	RQE("NUL in method", "GE\0T / HTTP/1.1\r\n" H "\r\n", -400),
	RQE("CTL 0x01 in value", "GET / HTTP/1.1\r\n" H "X: a\x01\r\n\r\n", -400),
	RQE("CTL 0x01 as a User-Agent after two headers", "GET /a HTTP/1.1\r\nHost: h\r\nX: y\r\nUser-Agent: \x01\r\n\r\n", -400),
	RQE("DEL in value", "GET / HTTP/1.1\r\n" H "X: a\x7f\r\n\r\n", -400),
	RQE("VT in value", "GET / HTTP/1.1\r\n" H "X: \x0b" "a\r\n\r\n", -400),
	RQE("'@' in name", "GET / HTTP/1.1\r\n" H "X@Y: a\r\n\r\n", -400),
	RQE("'(' in name", "GET / HTTP/1.1\r\n" H "X(Y): a\r\n\r\n", -400),
	RQE("'\"' in name", "GET / HTTP/1.1\r\n" H "\"X\": a\r\n\r\n", -400),
	RQE("'/' in name", "GET / HTTP/1.1\r\n" H "X/Y: a\r\n\r\n", -400),
	RQE("obs-text in name", "GET / HTTP/1.1\r\n" H "X\xc3\xa9: a\r\n\r\n", -400),
	RQE("empty header name", "GET / HTTP/1.1\r\n" H ": a\r\n\r\n", -400),
	RQE("header without colon", "GET / HTTP/1.1\r\n" H "Host2 a\r\n\r\n", -400),
	RQE("whitespace before colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n", -400),
	RQE("tab before colon", "GET / HTTP/1.1\r\n" H "X\t: a\r\n\r\n", -400),
	RQE("obs-fold", "GET / HTTP/1.1\r\n" H "X: a\r\n b\r\n\r\n", -400),
	RQE("obs-fold with HTAB", "GET / HTTP/1.1\r\n" H "X: a\r\n\tb\r\n\r\n", -400),
	RQE("first header line folded", "GET / HTTP/1.1\r\n Host: a\r\n\r\n", -400),
	RQE("'(' in method", "GE(T / HTTP/1.1\r\n" H "\r\n", -400),
	RQE("empty method", " / HTTP/1.1\r\n" H "\r\n", -400),
	RQE("TAB after method", "GET\t/ HTTP/1.1\r\n" H "\r\n", -400),
	RQE("two spaces after method", "GET  / HTTP/1.1\r\n" H "\r\n", -400),
	RQE("two spaces before version", "GET /  HTTP/1.1\r\n" H "\r\n", -400),
	RQE("space inside target", "GET /a b HTTP/1.1\r\n" H "\r\n", -400),
	RQE("'#' in target", "GET /a#frag HTTP/1.1\r\n" H "\r\n", -400),
	RQE("obs-text in target", "GET /caf\xc3\xa9 HTTP/1.1\r\n" H "\r\n", -400),
	RQE("DEL in target", "GET /\x7f HTTP/1.1\r\n" H "\r\n", -400),
	RQE("leading SP before request line", " GET / HTTP/1.1\r\n" H "\r\n", -400),

	/* version */
	RQE("HTTP/2.0", "GET / HTTP/2.0\r\n" H "\r\n", -505),
	RQE("HTTP/1.2", "GET / HTTP/1.2\r\n" H "\r\n", -505),
	RQE("HTTP/0.9 version", "GET / HTTP/0.9\r\n" H "\r\n", -505),
	RQE("HTTP/3.0", "GET / HTTP/3.0\r\n" H "\r\n", -505),
	RQE("HTTP/0.9 request line", "GET /\r\n\r\n", -505),
	RQE("trailing space after version", "GET / HTTP/1.1 \r\n" H "\r\n", -400),
	RQE("lowercase version", "GET / http/1.1\r\n" H "\r\n", -400),
	RQE("HTTP/1.10", "GET / HTTP/1.10\r\n" H "\r\n", -400),
	RQE("HTTP/11", "GET / HTTP/11\r\n" H "\r\n", -400),
	RQE("HTTP/1", "GET / HTTP/1\r\n" H "\r\n", -400),
	RQE("HTTP/2", "GET / HTTP/2\r\n" H "\r\n", -400),
	RQE("no version, trailing space", "GET / \r\n" H "\r\n", -400),
	RQE("garbage version", "GET / XTTP/1.1\r\n" H "\r\n", -400),
	RQE("TLS ClientHello", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", -400),

	/* Host */
	RQE("HTTP/1.1 without Host", "GET / HTTP/1.1\r\n\r\n", -400),
	RQE("two Host headers", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", -400),
	RQE("two identical Host headers", "GET / HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n", -400),
	RQE("Host with space", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", -400),
	RQE("Host with slash", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", -400),
	RQE("Host with userinfo", "GET / HTTP/1.1\r\nHost: u@a\r\n\r\n", -400),
	RQE("two Host in HTTP/1.0", "GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", -400),

	/* target forms */
	RQE("CONNECT", "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n", -405),
	RQE("CONNECT origin-form", "CONNECT / HTTP/1.1\r\n" H "\r\n", -405),
	RQE("authority-form with GET", "GET a:443 HTTP/1.1\r\n" H "\r\n", -405),
	RQE("bare word target", "GET example.com HTTP/1.1\r\n" H "\r\n", -400),
	RQE("asterisk with GET", "GET * HTTP/1.1\r\n" H "\r\n", -400),
	RQE("asterisk with suffix", "OPTIONS *x HTTP/1.1\r\n" H "\r\n", -400),
	RQE("ftp scheme", "GET ftp://h/x HTTP/1.1\r\n" H "\r\n", -400),
	RQE("absolute-form without authority", "GET http:///x HTTP/1.1\r\n" H "\r\n", -400),
	RQE("absolute-form scheme only", "GET http:// HTTP/1.1\r\n" H "\r\n", -400),

	/* dot-segments (issue 9): removable ones parse, the path slice as
	 * sent (the writer cleans it); ambiguous ones are refused */
	RQP("dot-segment ..", "GET /../secret HTTP/1.1\r\n" H "\r\n", "/../secret", NULL),
	RQP("dot-segment %2e%2e", "GET /%2e%2e/secret HTTP/1.1\r\n" H "\r\n", "/%2e%2e/secret", NULL),
	RQP("dot-segments . and ..", "GET /a/./../../b?q HTTP/1.1\r\n" H "\r\n", "/a/./../../b", "q"),
	RQP("absolute-form with ..", "GET http://x/../secret HTTP/1.1\r\n" H "\r\n", "/../secret", NULL),
	RQP("encoded slash without dots", "GET /a%2Fb/c HTTP/1.1\r\n" H "\r\n", "/a%2Fb/c", NULL),
	RQE("dot-segment before %2f", "GET /..%2fsecret HTTP/1.1\r\n" H "\r\n", -400),
	RQE("dot-segment before %2F", "GET /a/..%2Fsecret HTTP/1.1\r\n" H "\r\n", -400),
	RQE("dot-segment between %2f", "GET /a%2f%2e%2e%2fb HTTP/1.1\r\n" H "\r\n", -400),
	RQE("dot-segment before a backslash", "GET /..\\secret HTTP/1.1\r\n" H "\r\n", -400),
	RQE("dot-segment before %5c", "GET /..%5Csecret HTTP/1.1\r\n" H "\r\n", -400),
	RQE("dot-segment with ;", "GET /..;/secret HTTP/1.1\r\n" H "\r\n", -400),
	RQE("absolute-form dot-segment before %2f", "GET http://x/..%2fsecret HTTP/1.1\r\n" H "\r\n", -400),

	/* limits */
	RQL("one header too many", "GET / HTTP/1.1\r\n" H "A: 1\r\nB: 2\r\n\r\n", -431, 2, 0),
	RQL("head one byte over max_head", "GET / HTTP/1.1\r\n" H "\r\n", -431, 0, 26),
	RQL("incomplete head over max_head", "GET / HTTP/1.1\r\nX-Long: aaaaaaaaaaaaaaaaaaaaaaa", -431, 0, 32),

	/* smuggling: CL.TE, TE.CL, TE.TE (RFC 9112 6.1, 6.3; Kettle 2019) */
	RQE("CL.TE", "POST / HTTP/1.1\r\n" H "Content-Length: 13\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nSMUGGLED", -400),
	RQE("TE.CL", "POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n8\r\nSMUGGLED\r\n0\r\n\r\n", -400),
	RQE("CL with TE: identity", "POST / HTTP/1.1\r\n" H "Content-Length: 3\r\nTransfer-Encoding: identity\r\n\r\n", -400),
	RQE("TE.TE: second TE bogus", "POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n\r\n", -400),
	RQE("TE.TE: chunked twice in headers", "POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", -400),
	RQE("TE chunked, chunked", "POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked, chunked\r\n\r\n", -400),
	RQE("TE xchunked", "POST / HTTP/1.1\r\n" H "Transfer-Encoding: xchunked\r\n\r\n", -400),
	RQE("TE chunkedx", "POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunkedx\r\n\r\n", -400),
	RQE("TE chunked, identity", "POST / HTTP/1.1\r\n" H "Transfer-encoding: chunked, identity\r\n\r\n", -400),
	RQE("TE identity", "POST / HTTP/1.1\r\n" H "Transfer-Encoding: identity\r\n\r\n", -400),
	RQE("TE gzip", "POST / HTTP/1.1\r\n" H "Transfer-Encoding: gzip\r\n\r\n", -400),
	RQE("TE gzip, chunked: 501", "POST / HTTP/1.1\r\n" H "Transfer-Encoding: gzip, chunked\r\n\r\n", -501),
	RQE("TE identity, chunked: 501", "POST / HTTP/1.1\r\n" H "Transfer-Encoding: identity, chunked\r\n\r\n", -501),
	RQE("TE gzip then TE chunked: 501", "POST / HTTP/1.1\r\n" H "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n", -501),
	RQE("TE quoted chunked", "POST / HTTP/1.1\r\n" H "Transfer-Encoding: \"chunked\"\r\n\r\n", -400),
	RQE("TE chunked with parameter", "POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked;q=1\r\n\r\n", -400),
	RQE("TE with empty element", "POST / HTTP/1.1\r\n" H "Transfer-Encoding: ,chunked\r\n\r\n", -400),
	RQE("TE trailing comma", "POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked,\r\n\r\n", -400),
	RQE("TE empty", "POST / HTTP/1.1\r\n" H "Transfer-Encoding:\r\n\r\n", -400),
	RQE("TE ch unked", "POST / HTTP/1.1\r\n" H "Transfer-Encoding: ch unked\r\n\r\n", -400),
	RQE("TE with VT", "POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked\x0b\r\n\r\n", -400),
	RQE("TE with leading VT", "POST / HTTP/1.1\r\n" H "Transfer-Encoding: \x0b" "chunked\r\n\r\n", -400),
	RQE("TE with FF", "POST / HTTP/1.1\r\n" H "Transfer-Encoding: \x0c" "chunked\r\n\r\n", -400),
	RQE("TE with NUL", "POST / HTTP/1.1\r\n" H "Transfer-Encoding: chunked\0\r\n\r\n", -400),
	RQE("TE name with NUL", "POST / HTTP/1.1\r\n" H "Transfer-Encoding\0: chunked\r\n\r\n", -400),
	RQE("Transfer-Encoding : chunked", "POST / HTTP/1.1\r\n" H "Transfer-Encoding : chunked\r\n\r\n", -400),
	RQE("TE folded onto a header", "POST / HTTP/1.1\r\n" H "X: y\r\n Transfer-Encoding: chunked\r\n\r\n", -400),
	RQE("TE value folded", "POST / HTTP/1.1\r\n" H "Transfer-Encoding:\r\n chunked\r\n\r\n", -400),
	RQE("TE after bare LF", "POST / HTTP/1.1\r\n" H "X: y\nTransfer-Encoding: chunked\r\n\r\n", -400),
	RQE("TE in HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", -400),
	RQE("CL +5", "POST / HTTP/1.1\r\n" H "Content-Length: +5\r\n\r\nhello", -400),
	RQE("CL -5", "POST / HTTP/1.1\r\n" H "Content-Length: -5\r\n\r\n", -400),
	RQE("CL 0x5", "POST / HTTP/1.1\r\n" H "Content-Length: 0x5\r\n\r\n", -400),
	RQE("CL 5, 6", "POST / HTTP/1.1\r\n" H "Content-Length: 5, 6\r\n\r\n", -400),
	RQE("CL 5 then 6", "POST / HTTP/1.1\r\n" H "Content-Length: 5\r\nContent-Length: 6\r\n\r\n", -400),
	RQE("CL 5 then 5, 6", "POST / HTTP/1.1\r\n" H "Content-Length: 5\r\nContent-Length: 5, 6\r\n\r\n", -400),
	RQE("CL empty", "POST / HTTP/1.1\r\n" H "Content-Length:\r\n\r\n", -400),
	RQE("CL empty element", "POST / HTTP/1.1\r\n" H "Content-Length: 5,\r\n\r\n", -400),
	RQE("CL 5 5", "POST / HTTP/1.1\r\n" H "Content-Length: 5 5\r\n\r\n", -400),
	RQE("CL 5.0", "POST / HTTP/1.1\r\n" H "Content-Length: 5.0\r\n\r\n", -400),
	RQE("CL 1e3", "POST / HTTP/1.1\r\n" H "Content-Length: 1e3\r\n\r\n", -400),
	RQE("CL 2^63", "POST / HTTP/1.1\r\n" H "Content-Length: 9223372036854775808\r\n\r\n", -400),
	RQE("CL 2^64-1 (issue 9)", "POST /u HTTP/1.1\r\n" H "Content-Length: 18446744073709551615\r\n\r\n", -400),
	RQE("CL 2^63 after leading zeros", "POST / HTTP/1.1\r\n" H "Content-Length: 009223372036854775808\r\n\r\n", -400),
	RQE("CL overflow 2^64", "POST / HTTP/1.1\r\n" H "Content-Length: 18446744073709551616\r\n\r\n", -400),
	RQE("CL huge", "POST / HTTP/1.1\r\n" H "Content-Length: 99999999999999999999999999\r\n\r\n", -400),
	RQE("CL with NUL", "POST / HTTP/1.1\r\n" H "Content-Length: 5\0\r\n\r\n", -400),
	RQE("CL with space before colon", "POST / HTTP/1.1\r\n" H "Content-Length : 5\r\n\r\n", -400),
	RQE("CL quoted", "POST / HTTP/1.1\r\n" H "Content-Length: \"5\"\r\n\r\n", -400),
};

#define NRQ (sizeof(rq_cases) / sizeof(rq_cases[0]))

struct rs_case {
	const char *name;
	const char *in;
	size_t len;
	enum http1_method req;
	int want;
	enum http1_framing framing;
	uint64_t cl;
	int ka;
	int status;
};

#define RS(n, lit, req, w, f, cl, ka, st) { n, S(lit), req, w, f, cl, ka, st }
#define RSE(n, lit) { n, S(lit), HTTP1_M_GET, -502, NONE, 0, 0, 0 }
#define G HTTP1_M_GET

static const struct rs_case rs_cases[] = {
	RS("200 Content-Length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", G, OK, LEN, 5, 1, 200),
	RS("200 chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", G, OK, CHK, 0, 1, 200),
	RS("200 chunked, close", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n", G, OK, CHK, 0, 0, 200),
	RS("200 no framing: until close", "HTTP/1.1 200 OK\r\nX: y\r\n\r\nbody...", G, OK, CLOSE, 0, 0, 200),
	RS("204 no body", "HTTP/1.1 204 No Content\r\n\r\n", G, OK, NONE, 0, 1, 204),
	RS("304 keeps its Content-Length", "HTTP/1.1 304 Not Modified\r\nContent-Length: 100\r\n\r\n", G, OK, NONE, 100, 1, 304),
	RS("HEAD response with Content-Length", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", HTTP1_M_HEAD, OK, NONE, 100, 1, 200),
	RS("HEAD response chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", HTTP1_M_HEAD, OK, NONE, 0, 1, 200),
	RS("100 Continue", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n", G, OK, NONE, 0, 1, 100),
	RS("101 Switching Protocols", "HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n", G, OK, NONE, 0, 1, 101),
	RS("HTTP/1.0 Content-Length closes", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi", G, OK, LEN, 2, 0, 200),
	RS("HTTP/1.0 keep-alive", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nhi", G, OK, LEN, 2, 1, 200),
	RS("Connection: close", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", G, OK, LEN, 0, 0, 200),
	RS("empty reason", "HTTP/1.1 404 \r\nContent-Length: 0\r\n\r\n", G, OK, LEN, 0, 1, 404),
	RS("no reason, no SP", "HTTP/1.1 404\r\nContent-Length: 0\r\n\r\n", G, OK, LEN, 0, 1, 404),
	RS("reason with SP, HTAB, obs-text", "HTTP/1.1 599 Very\tOdd \xe2\x9c\x93\r\nContent-Length: 0\r\n\r\n", G, OK, LEN, 0, 1, 599),
	RS("204 with Content-Length (dropped by the writer)", "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n", G, OK, NONE, 0, 1, 204),
	RS("103 with Content-Length (dropped by the writer)", "HTTP/1.1 103 Early Hints\r\nContent-Length: 5\r\n\r\n", G, OK, NONE, 0, 1, 103),
	RS("HEAD response TE gzip: no body, not refused", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", HTTP1_M_HEAD, OK, NONE, 0, 1, 200),
	RS("304 TE gzip: no body, not refused", "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: gzip\r\n\r\n", G, OK, NONE, 0, 1, 304),
	RS("CL 2^63-1", "HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775807\r\n\r\n", G, OK, LEN, INT64_MAX, 1, 200),
	RS("CL list of equal values", "HTTP/1.1 200 OK\r\nContent-Length: 7, 7\r\n\r\n", G, OK, LEN, 7, 1, 200),
	RS("500 with body", "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 1\r\n\r\nx", G, OK, LEN, 1, 1, 500),
	RS("need more", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n", G, MORE, NONE, 0, 0, 0),
	RSE("TE gzip (issue 9)", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"),
	RSE("TE chunked, gzip", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"),
	RSE("TE identity", "HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\n\r\n"),
	RSE("TE gzip on an error status", "HTTP/1.1 500 Oops\r\nTransfer-Encoding: gzip\r\n\r\n"),
	RSE("HTTP/1.0 chunked", "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
	RSE("TE gzip, chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
	RSE("TE chunked twice", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"),
	RSE("TE and CL", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"),
	RSE("CL and TE on a 304", "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"),
	RSE("CL 5, 6", "HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\n"),
	RSE("CL -1", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"),
	RSE("CL +1", "HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\n"),
	RSE("CL 2^63", "HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775808\r\n\r\n"),
	RSE("CL 2^64-1", "HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551615\r\n\r\n"),
	RSE("CL overflow", "HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551616\r\n\r\n"),
	RSE("status 099", "HTTP/1.1 099 X\r\n\r\n"),
	RSE("status 600", "HTTP/1.1 600 X\r\n\r\n"),
	RSE("status 2 digits", "HTTP/1.1 20 OK\r\n\r\n"),
	RSE("status 4 digits", "HTTP/1.1 2000 OK\r\n\r\n"),
	RSE("status with letters", "HTTP/1.1 2x0 OK\r\n\r\n"),
	RSE("HTTP/2.0", "HTTP/2.0 200 OK\r\n\r\n"),
	RSE("HTTP/1.2", "HTTP/1.2 200 OK\r\n\r\n"),
	RSE("ICY", "ICY 200 OK\r\n\r\n"),
	RSE("bare LF", "HTTP/1.1 200 OK\nContent-Length: 0\n\n"),
	RSE("obs-fold", "HTTP/1.1 200 OK\r\nX: a\r\n b\r\nContent-Length: 0\r\n\r\n"),
	RSE("space before colon", "HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n"),
	RSE("empty line before status line", "\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
	RSE("NUL in reason", "HTTP/1.1 200 O\0K\r\nContent-Length: 0\r\n\r\n"),
	RSE("NUL in value", "HTTP/1.1 200 OK\r\nX: \0\r\nContent-Length: 0\r\n\r\n"),
	RSE("no space after version", "HTTP/1.1200 OK\r\n\r\n"),
};

#define NRS (sizeof(rs_cases) / sizeof(rs_cases[0]))

static const struct http1_limits lim_default = { 8192, 64 };

/* The offset after the first head: skips leading CRLFs as the parser does. */
static size_t head_end(const char *in, size_t len)
{
	size_t i = 0;

	while (i + 1 < len && in[i] == '\r' && in[i + 1] == '\n')
		i += 2;
	for (; i + 3 < len; i++) {
		if (memcmp(in + i, "\r\n\r\n", 4) == 0)
			return i + 4;
	}
	return 0;
}

static int str_eq(struct http1_str s, const char *want)
{
	return s.len == strlen(want) && memcmp(s.p, want, s.len) == 0;
}

static int slice_eq(struct http1_str a, struct http1_str b)
{
	return a.len == b.len && (a.len == 0 || memcmp(a.p, b.p, a.len) == 0);
}

static int same_msg(const struct http1_msg *a, const struct http1_msg *b)
{
	unsigned i;

	if (a->method.p != b->method.p || a->method.len != b->method.len
	    || a->target.p != b->target.p || a->target.len != b->target.len
	    || a->path.p != b->path.p || a->path.len != b->path.len
	    || a->query.p != b->query.p || a->query.len != b->query.len
	    || a->has_query != b->has_query || a->status != b->status
	    || a->reason.len != b->reason.len || a->minor != b->minor
	    || a->nheaders != b->nheaders || a->framing != b->framing
	    || a->content_length != b->content_length || a->keep_alive != b->keep_alive
	    || a->expect_continue != b->expect_continue || a->upgrade != b->upgrade
	    || a->host.len != b->host.len || a->head_len != b->head_len
	    || a->method_id != b->method_id)
		return 0;
	for (i = 0; i < a->nheaders; i++) {
		if (a->headers[i].name.p != b->headers[i].name.p
		    || a->headers[i].value.p != b->headers[i].value.p
		    || a->headers[i].value.len != b->headers[i].value.len
		    || a->headers[i].flags != b->headers[i].flags)
			return 0;
	}
	return 1;
}

static ssize_t parse_any(struct http1_msg *m, struct http1_header *h, const char *buf,
			 size_t len, const struct http1_limits *lim, int resp,
			 enum http1_method req)
{
	if (resp)
		return http1_parse_response(m, h, buf, len, lim, req);
	return http1_parse_request(m, h, buf, len, lim);
}

/*
 * Splits the input in two at every position: the first call, on the first
 * part alone in an exactly sized buffer (ASan sees a read past it), must
 * say "need more" or give the whole-buffer result, and the second call
 * must end with the whole-buffer result, the same error text and the same
 * fields (slices at the same places). A whole head is parsed in one pass,
 * a split one by finding its end first: they must not differ.
 */
static int splits_agree(const char *in, size_t len, const struct http1_limits *lim,
			int resp, enum http1_method req, ssize_t whole)
{
	static struct http1_header h[64], h0[64];
	struct http1_msg m, m0;
	size_t k;
	ssize_t r;
	char *buf = malloc(len ? len : 1);
	int ok = 1;

	memcpy(buf, in, len);           /* exactly sized: ASan sees overreads */
	http1_msg_init(&m0);
	if (parse_any(&m0, h0, buf, len, lim, resp, req) != whole)
		ok = 0;
	for (k = 0; k <= len && ok; k++) {
		char *part = malloc(k ? k : 1);

		memcpy(part, in, k);
		http1_msg_init(&m);
		r = parse_any(&m, h, part, k, lim, resp, req);
		free(part);
		if (r > 0) {    /* the head was all there: its slices were part's */
			if (r != whole || m.head_len != m0.head_len || m.nheaders != m0.nheaders)
				ok = 0;
			continue;
		}
		if (r == 0)
			r = parse_any(&m, h, buf, len, lim, resp, req);
		if (r != whole || (r > 0 && !same_msg(&m, &m0)) || (r < 0 && m.error != m0.error))
			ok = 0;
	}
	free(buf);
	return ok;
}

static int byte_at_a_time(const char *in, size_t len, const struct http1_limits *lim,
			  int resp, enum http1_method req, ssize_t whole)
{
	static struct http1_header h[64];
	struct http1_msg m;
	size_t k;
	ssize_t r = 0;

	http1_msg_init(&m);
	for (k = 0; k <= len; k++) {
		r = parse_any(&m, h, in, k, lim, resp, req);
		if (r != 0)
			break;
	}
	return r == whole;
}

/* Writes m back out and reparses it: same method, path, query, framing,
 * and the same forwarded headers in the same order. */
static int round_trip_request(const struct http1_msg *m)
{
	static const struct http1_fwd_req f = {
		{ "", 0 }, { "10.0.0.1", 8 }, { "http", 4 }, { "1.1 ringproxy", 13 },
		{ "backend", 7 }, false, { "", 0 }, false, { NULL, 0 }, false,
	};
	struct iovec iov[64];
	char scratch[4096], out[16384];
	struct http1_header h2[80];
	struct http1_msg m2;
	struct http1_limits lim = { sizeof(out), 80 };
	char clean[8192];
	struct http1_str want_path = m->path;
	size_t len = 0;
	unsigned i, j;
	int n, k;

	n = http1_write_request(m, &f, iov, 64, scratch, sizeof(scratch));
	if (n < 0)
		return 0;
	for (k = 0; k < n; k++) {
		memcpy(out + len, iov[k].iov_base, iov[k].iov_len);
		len += iov[k].iov_len;
	}
	http1_msg_init(&m2);
	if (http1_parse_request(&m2, h2, out, len, &lim) != (ssize_t)len)
		return 0;
	if (m->path_dots) {
		want_path.len = http1_path_clean(m->path.p, m->path.len, clean);
		want_path.p = clean;
	}
	if (!slice_eq(m2.method, m->method) || !slice_eq(m2.path, want_path)
	    || m2.has_query != m->has_query || !slice_eq(m2.query, m->query)
	    || m2.framing != m->framing
	    || m2.content_length != m->content_length || m2.minor != 1)
		return 0;
	for (i = 0, j = 0; i < m->nheaders; i++) {
		if (m->headers[i].flags)
			continue;
		while (j < m2.nheaders && m2.headers[j].flags)
			j++;
		if (j == m2.nheaders || !slice_eq(m2.headers[j].name, m->headers[i].name)
		    || !slice_eq(m2.headers[j].value, m->headers[i].value))
			return 0;
		j++;
	}
	return 1;
}

/* Every header the parse counted is a slice of in[0..len): a refused
 * request's headers are logged, and a slot left from an earlier message
 * would show that message's bytes. */
static int own_headers(const struct http1_msg *m, const char *in, size_t len)
{
	for (unsigned i = 0; i < m->nheaders; i++) {
		const struct http1_header *hd = &m->headers[i];

		if (hd->name.p < in || hd->name.p + hd->name.len > in + len
		    || hd->value.p < in || hd->value.p + hd->value.len > in + len)
			return 0;
	}
	return 1;
}

static void test_requests(void)
{
	static const char stale[] = "session=VICTIM-TOKEN";
	static struct http1_header h[64];
	unsigned i;

	for (i = 0; i < NRQ; i++) {
		const struct rq_case *c = &rq_cases[i];
		struct http1_limits lim = lim_default;
		struct http1_msg m;
		ssize_t r, want;
		int good;

		if (c->max_headers)
			lim.max_headers = c->max_headers;
		if (c->max_head)
			lim.max_head = c->max_head;
		want = c->want == OK ? (ssize_t)head_end(c->in, c->len) : c->want;
		/* the array as an earlier message on the connection left it */
		for (size_t k = 0; k < sizeof(h) / sizeof(h[0]); k++)
			h[k] = (struct http1_header){ { "User-Agent", 10 }, { stale, sizeof(stale) - 1 }, 0 };
		http1_msg_init(&m);
		r = http1_parse_request(&m, h, c->in, c->len, &lim);
		good = r == want && (m.headers == NULL || own_headers(&m, c->in, c->len));
		if (good && r > 0) {
			good = m.framing == c->framing && m.content_length == c->cl
			       && m.keep_alive == (c->ka != 0) && m.head_len == (size_t)r;
			if (good && c->path != NULL)
				good = str_eq(m.path, c->path)
				       && m.has_query == (c->query != NULL)
				       && (c->query == NULL || str_eq(m.query, c->query));
		}
		if (!tap_ok(good, "request: %s -> %zd", c->name, want))
			tap_diag("  got %zd (%s) framing %d cl %llu ka %d", r,
				 m.error ? m.error : "", (int)m.framing,
				 (unsigned long long)m.content_length, (int)m.keep_alive);
		tap_ok(byte_at_a_time(c->in, c->len, &lim, 0, 0, want)
		       && splits_agree(c->in, c->len, &lim, 0, 0, want),
		       "request: %s: every split agrees", c->name);
		if (r > 0)
			tap_ok(round_trip_request(&m), "request: %s: round trip", c->name);
	}
}

static void test_responses(void)
{
	static struct http1_header h[64];
	unsigned i;

	for (i = 0; i < NRS; i++) {
		const struct rs_case *c = &rs_cases[i];
		struct http1_msg m;
		ssize_t r, want;
		int good;

		want = c->want == OK ? (ssize_t)head_end(c->in, c->len) : c->want;
		http1_msg_init(&m);
		r = http1_parse_response(&m, h, c->in, c->len, &lim_default, c->req);
		good = r == want;
		if (good && r > 0)
			good = m.framing == c->framing && m.content_length == c->cl
			       && m.keep_alive == (c->ka != 0) && m.status == c->status;
		if (!tap_ok(good, "response: %s -> %zd", c->name, want))
			tap_diag("  got %zd (%s) framing %d cl %llu ka %d", r,
				 m.error ? m.error : "", (int)m.framing,
				 (unsigned long long)m.content_length, (int)m.keep_alive);
		tap_ok(byte_at_a_time(c->in, c->len, &lim_default, 1, c->req, want)
		       && splits_agree(c->in, c->len, &lim_default, 1, c->req, want),
		       "response: %s: every split agrees", c->name);
	}
}

/* ---- chunked ------------------------------------------------------------ */

struct ck_case {
	const char *name;
	const char *in;
	size_t len;
	ssize_t want;           /* bytes of the body, or -1 */
	int done;
	const char *data;       /* decoded data (when want >= 0) */
	size_t datalen;
};

#define CK(n, lit, w, d, data) { n, S(lit), w, d, S(data) }
#define CKE(n, lit) { n, S(lit), -1, 0, "", 0 }

static const struct ck_case ck_cases[] = {
	CK("one chunk", "5\r\nhello\r\n0\r\n\r\n", 15, 1, "hello"),
	CK("stops before the next message", "5\r\nhello\r\n0\r\n\r\nGET / HTTP/1.1\r\n", 15, 1, "hello"),
	CK("three chunks", "3\r\nabc\r\n2\r\nde\r\n1\r\nf\r\n0\r\n\r\n", 26, 1, "abcdef"),
	CK("uppercase hex", "A\r\n0123456789\r\n0\r\n\r\n", 20, 1, "0123456789"),
	CK("lowercase hex", "a\r\n0123456789\r\n0\r\n\r\n", 20, 1, "0123456789"),
	CK("leading zeros", "0005\r\nhello\r\n0\r\n\r\n", 18, 1, "hello"),
	CK("last chunk 000", "000\r\n\r\n", 7, 1, ""),
	CK("16 hex digits", "0000000000000003\r\nabc\r\n0\r\n\r\n", 28, 1, "abc"),
	CK("binary data with NUL and CRLF", "4\r\n\0\r\n\n\r\n0\r\n\r\n", 14, 1, "\0\r\n\n"),
	CK("extension", "5;foo=bar\r\nhello\r\n0\r\n\r\n", 23, 1, "hello"),
	CK("extension without value", "5;foo\r\nhello\r\n0\r\n\r\n", 19, 1, "hello"),
	CK("two extensions", "5;a=1;b\r\nhello\r\n0\r\n\r\n", 21, 1, "hello"),
	CK("quoted extension", "5;foo=\"a b\\\"c\"\r\nhello\r\n0\r\n\r\n", 28, 1, "hello"),
	CK("BWS before extension", "5 \t;foo\r\nhello\r\n0\r\n\r\n", 21, 1, "hello"),
	CK("extension on last chunk", "0;x=y\r\n\r\n", 9, 1, ""),
	CK("trailers", "0\r\nX-T: 1\r\nY:2\r\n\r\n", 18, 1, ""),
	CK("trailer with empty value", "1\r\na\r\n0\r\nX:\r\n\r\n", 15, 1, "a"),
	CK("incomplete data", "5\r\nhel", 6, 0, "hel"),
	CK("incomplete size line", "5", 1, 0, ""),
	CK("incomplete trailers", "0\r\nX: 1\r\n", 9, 0, ""),
	CK("incomplete final CRLF", "0\r\n\r", 4, 0, ""),
	CK("max size prefix", "7fffffffffffffff\r\nab", 20, 0, "ab"),
	CK("max size with leading zeros", "00007fffffffffff\r\nab", 20, 0, "ab"),
	CKE("empty size", "\r\n"),
	CKE("invalid size", "g\r\n"),
	CKE("negative size", "-5\r\nhello\r\n"),
	CKE("plus size", "+5\r\nhello\r\n"),
	CKE("0x prefix", "0x5\r\nhello\r\n"),
	CKE("17 hex digits", "10000000000000000\r\n"),
	CKE("size 2^63", "8000000000000000\r\n"),
	CKE("size 2^64-1", "ffffffffffffffff\r\nab"),
	CKE("17 digits of zeros", "00000000000000000\r\n"),
	CKE("space after size", "5 \r\nhello\r\n0\r\n\r\n"),
	CKE("space before size", " 5\r\nhello\r\n"),
	CKE("data too long", "5\r\nhelloX\r\n0\r\n\r\n"),
	CKE("data too short", "5\r\nhell\r\n0\r\n\r\n"),
	CKE("bare LF after size", "5\nhello\r\n0\r\n\r\n"),
	CKE("bare LF after data", "5\r\nhello\n0\r\n\r\n"),
	CKE("CR without LF after size", "5\rhello\r\n"),
	CKE("bad extension char", "5;fo@o\r\nhello\r\n"),
	CKE("CTL in extension", "5;a\x01\r\nhello\r\n"),
	CKE("CTL in quoted extension", "5;a=\"\x01\"\r\nhello\r\n"),
	CKE("trailer folded", "0\r\nX: 1\r\n y\r\n\r\n"),
	CKE("trailer without colon", "0\r\nX\r\n\r\n"),
	CKE("trailer space before colon", "0\r\nX : 1\r\n\r\n"),
	CKE("trailer bare LF", "0\r\nX: 1\n\r\n"),
	CKE("trailer with NUL", "0\r\nX: \0\r\n\r\n"),
	CKE("final CR not followed by LF", "0\r\n\rX"),
	CKE("LF-only last chunk", "0\n\n"),
};

#define NCK (sizeof(ck_cases) / sizeof(ck_cases[0]))

/* Scan in the given pieces; returns the total or -1. */
static ssize_t ck_scan_split(const char *in, size_t len, size_t step, size_t first,
			     int *done)
{
	struct http1_chunked c;
	size_t off = 0, n;
	ssize_t r;

	http1_chunked_init(&c);
	while (off < len && !c.done) {
		n = off == 0 && first ? first : step;
		if (n > len - off)
			n = len - off;
		r = http1_chunked_scan(&c, in + off, n);
		if (r < 0)
			return -1;
		off += (size_t)r;
		if ((size_t)r < n)
			break;          /* stopped at the end of the body */
	}
	*done = c.done;
	return (ssize_t)off;
}

/* Decode in pieces of step bytes; data appended to out. */
static ssize_t ck_decode_split(const char *in, size_t len, size_t step, char *out,
			       size_t *outlen, int *done)
{
	struct http1_chunked c;
	size_t off = 0, n, doff, dlen, piece_off, piece_end;
	ssize_t r;

	http1_chunked_init(&c);
	*outlen = 0;
	while (off < len && !c.done) {
		piece_end = off + step < len ? off + step : len;
		piece_off = off;
		while (piece_off < piece_end && !c.done) {
			n = piece_end - piece_off;
			r = http1_chunked_decode(&c, in + piece_off, n, &doff, &dlen);
			if (r < 0)
				return -1;
			if (r == 0)
				break;
			memcpy(out + *outlen, in + piece_off + doff, dlen);
			*outlen += dlen;
			piece_off += (size_t)r;
		}
		off = piece_off;
		if (piece_off < piece_end)
			break;
	}
	*done = c.done;
	return (ssize_t)off;
}

static void test_chunked(void)
{
	unsigned i;
	size_t k, outlen;
	char out[256];
	int done = 0, d2 = 0, ok;
	ssize_t r;

	for (i = 0; i < NCK; i++) {
		const struct ck_case *c = &ck_cases[i];

		r = ck_scan_split(c->in, c->len, c->len ? c->len : 1, 0, &done);
		tap_ok(r == c->want && (r < 0 || done == c->done),
		       "chunked: %s -> %zd%s", c->name, c->want, c->done ? " done" : "");
		ok = 1;
		for (k = 1; k < c->len; k++) {
			if (ck_scan_split(c->in, c->len, c->len, k, &d2) != r || (r >= 0 && d2 != done))
				ok = 0;
			if (ck_scan_split(c->in, c->len, k, 0, &d2) != r || (r >= 0 && d2 != done))
				ok = 0;
		}
		tap_ok(ok, "chunked: %s: every split scans the same", c->name);
		ok = 1;
		for (k = 1; k <= (c->len ? c->len : 1); k++) {
			ssize_t rd = ck_decode_split(c->in, c->len, k, out, &outlen, &d2);

			if (rd != r)
				ok = 0;
			else if (r >= 0 && (d2 != done || outlen != c->datalen
					    || memcmp(out, c->data, outlen) != 0))
				ok = 0;
		}
		tap_ok(ok, "chunked: %s: decoding in any pieces gives the data", c->name);
	}
}

static void test_chunked_limits(void)
{
	struct http1_chunked c;
	char buf[4096];
	size_t n;

	http1_chunked_init(&c);
	c.max_trailer = 10;
	tap_ok(http1_chunked_scan(&c, S("0\r\nX: 12345\r\n\r\n")) == 15 && c.done,
	       "chunked: trailer line of 9 bytes (CR counted) fits 10");
	http1_chunked_init(&c);
	c.max_trailer = 10;
	tap_ok(http1_chunked_scan(&c, S("0\r\nX: 1\r\nY: 23\r\n\r\n")) == -1,
	       "chunked: trailers over max_trailer refused");
	http1_chunked_init(&c);
	memcpy(buf, "1;", 2);
	memset(buf + 2, 'a', HTTP1_MAX_CHUNK_EXT);
	memcpy(buf + 2 + HTTP1_MAX_CHUNK_EXT - 1, "\r\n", 2);
	n = 2 + HTTP1_MAX_CHUNK_EXT + 1;
	tap_ok(http1_chunked_scan(&c, buf, n) == (ssize_t)n, "chunked: extension at the bound accepted");
	http1_chunked_init(&c);
	memset(buf + 2, 'a', HTTP1_MAX_CHUNK_EXT + 1);
	memcpy(buf + 2 + HTTP1_MAX_CHUNK_EXT + 1, "\r\n", 2);
	tap_ok(http1_chunked_scan(&c, buf, n + 2) == -1 && c.error != NULL,
	       "chunked: extension over the bound refused");
	tap_ok(http1_chunked_scan(&c, S("0\r\n\r\n")) == -1, "chunked: an error is sticky");
}

/* Re-framing (issue 9): our chunk-size lines, and a client's body with
 * padded sizes, extensions and trailers re-framed the way forward.c does
 * it (decode, then a line of ours before each piece of data). */
static void test_chunk_lines(void)
{
	static const struct {
		uint64_t size;
		bool close_prev;
		const char *want;
	} cases[] = {
		{ 0, false, "0\r\n" },
		{ 1, false, "1\r\n" },
		{ 10, true, "\r\na\r\n" },
		{ 255, false, "ff\r\n" },
		{ 4096, false, "1000\r\n" },
		{ 0xABCDEF, true, "\r\nabcdef\r\n" },
		{ INT64_MAX, true, "\r\n7fffffffffffffff\r\n" },
		{ UINT64_MAX, true, "\r\nffffffffffffffff\r\n" },
	};
	static const char body[] =
		"0005;ext=1\r\nhello\r\n00A;x=\"y\"\r\n0123456789\r\n0\r\n"
		"Content-Length: 5\r\nTransfer-Encoding: chunked\r\nX-T: 1\r\n\r\nGET /next";
	static const char want[] = "5\r\nhello\r\na\r\n0123456789\r\n0\r\n\r\n";
	char line[HTTP1_CHUNK_LINE_MAX + 1], out[256];
	struct http1_chunked c;
	size_t i, n, o = 0, off = 0, doff, dlen;
	bool open = false;
	ssize_t r;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		n = http1_chunk_line(line, cases[i].size, cases[i].close_prev);
		line[n] = '\0';
		tap_ok(n <= HTTP1_CHUNK_LINE_MAX && strcmp(line, cases[i].want) == 0,
		       "chunk line %llx%s", (unsigned long long)cases[i].size,
		       cases[i].close_prev ? " after data" : "");
	}
	http1_chunked_init(&c);
	while (!c.done && (r = http1_chunked_decode(&c, body + off, sizeof(body) - 1 - off,
						    &doff, &dlen)) > 0) {
		if (dlen) {
			o += http1_chunk_line(out + o, dlen, open);
			memcpy(out + o, body + off + doff, dlen);
			o += dlen;
			open = true;
		}
		off += (size_t)r;
	}
	memcpy(out + o, open ? "\r\n0\r\n\r\n" : "0\r\n\r\n", open ? 7 : 5);
	o += open ? 7 : 5;
	out[o] = '\0';
	tap_ok(c.done && strcmp(body + off, "GET /next") == 0,
	       "re-framing: the client's body ends where its framing says");
	tap_is_str(out, want, "re-framing: our sizes, no extensions, no trailers");
}

/* ---- request paths (issue 9) ------------------------------------------- */

struct path_case {
	const char *in;
	int dots;               /* http1_path_dots */
	const char *clean;      /* http1_path_clean when dots == 1 */
};

static const struct path_case path_cases[] = {
	{ "/", 0, NULL },
	{ "/a/b.jpg", 0, NULL },
	{ "/a/.../b", 0, NULL },
	{ "/a/..b/c.", 0, NULL },
	{ "/a/%2e%2e%2e/b", 0, NULL },
	{ "/a/..%2", 0, NULL },
	{ "/a%2Fb/c", 0, NULL },
	{ "/a%2fb%5c", 0, NULL },
	{ "/a;x=1/b", 0, NULL },
	{ "/a\\b", 0, NULL },
	{ "/../secret", 1, "/secret" },
	{ "/%2e%2e/secret", 1, "/secret" },
	{ "/%2E%2e/secret", 1, "/secret" },
	{ "/.%2e/secret", 1, "/secret" },
	{ "/%2e./secret", 1, "/secret" },
	{ "/a/./../../b", 1, "/b" },
	{ "/a/b/../c", 1, "/a/c" },
	{ "/a/b/./c/.", 1, "/a/b/c/" },
	{ "/a/.", 1, "/a/" },
	{ "/a/..", 1, "/" },
	{ "/a/%2e%2E", 1, "/" },
	{ "/.", 1, "/" },
	{ "/..", 1, "/" },
	{ "/%2e", 1, "/" },
	{ "/../../../..", 1, "/" },
	{ "/a//../b", 1, "/a/b" },
	{ "//..//x", 1, "//x" },
	{ "/a;x/../b", 1, "/b" },
	{ "/a/%2e%2E/b%2e", 1, "/b%2e" },
	{ "/..%2fsecret", -1, NULL },
	{ "/..%2Fsecret", -1, NULL },
	{ "/a%2f..", -1, NULL },
	{ "/a%2F.%2Fb", -1, NULL },
	{ "/..\\secret", -1, NULL },
	{ "/a\\..", -1, NULL },
	{ "/..%5csecret", -1, NULL },
	{ "/..%5Csecret", -1, NULL },
	{ "/..;/secret", -1, NULL },
	{ "/.;x/a", -1, NULL },
	{ "/a/%2e%2e;x", -1, NULL },
};

static void test_paths(void)
{
	unsigned i;

	for (i = 0; i < sizeof(path_cases) / sizeof(path_cases[0]); i++) {
		const struct path_case *c = &path_cases[i];
		size_t len = strlen(c->in), n;
		char *in = malloc(len), out[64];
		int dots;

		memcpy(in, c->in, len);         /* exactly sized: ASan sees overreads */
		dots = http1_path_dots(in, len);
		tap_ok(dots == c->dots, "path %s: dots %d", c->in, c->dots);
		if (c->dots == 1 && c->clean != NULL) {
			const char *want = c->clean;

			memset(out, 'X', sizeof(out));
			n = http1_path_clean(in, len, out);
			out[n <= len ? n : 0] = '\0';
			if (!tap_ok(n <= len && strcmp(out, want) == 0, "path %s: clean %s", c->in, want))
				tap_diag("  got %s", out);
		}
		free(in);
	}
}

/* ---- writers ------------------------------------------------------------ */

static size_t gather(const struct iovec *iov, int n, char *out)
{
	size_t len = 0;
	int i;

	for (i = 0; i < n; i++) {
		memcpy(out + len, iov[i].iov_base, iov[i].iov_len);
		len += iov[i].iov_len;
	}
	out[len] = '\0';
	return len;
}

static void test_write_request(void)
{
	static const char in[] =
		"POST /img/a.jpg?w=1 HTTP/1.1\r\n"
		"Host: cdn\r\n"
		"Connection: keep-alive, X-Hop\r\n"
		"X-Hop: secret\r\n"
		"User-Agent: t\r\n"
		"X-Forwarded-For: 1.1.1.1\r\n"
		"Accept: */*\r\n"
		"Transfer-Encoding: chunked\r\n"
		"X-Forwarded-For: 2.2.2.2, 3.3.3.3\r\n"
		"Via: 1.0 edge\r\n"
		"X-Forwarded-Proto: https\r\n"
		"Keep-Alive: 5\r\n"
		"\r\n";
	static const char want[] =
		"POST /pre/img/a.jpg?w=1 HTTP/1.1\r\n"
		"Host: cdn\r\n"
		"User-Agent: t\r\n"
		"Accept: */*\r\n"
		"Transfer-Encoding: chunked\r\n"
		"X-Forwarded-For: 1.1.1.1, 2.2.2.2, 3.3.3.3, 10.0.0.9\r\n"
		"X-Forwarded-Proto: http\r\n"
		"Via: 1.0 edge, 1.1 ringproxy\r\n"
		"\r\n";
	static const char in10[] = "GET http://x/y HTTP/1.0\r\nContent-Length: 3\r\n\r\n";
	static const char want10[] =
		"GET /y HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
		"X-Forwarded-For: 10.0.0.9\r\nVia: 1.1 ringproxy\r\n\r\n";
	static const char in10o[] = "GET /y HTTP/1.0\r\n\r\n";
	static const char inuser[] = "GET http://u@h/ HTTP/1.1\r\nHost: h\r\n\r\n";
	static const char indots[] = "GET /a/./../../b/%2e%2e/secret?x=/../y HTTP/1.1\r\nHost: h\r\n\r\n";
	static const char wantdots[] =
		"GET /pre/secret?x=/../y HTTP/1.1\r\nHost: h\r\n"
		"X-Forwarded-For: 10.0.0.9\r\nVia: 1.1 ringproxy\r\n\r\n";
	static const char inabsdots[] = "GET http://x/../secret HTTP/1.1\r\nHost: h\r\n\r\n";
	static const char wantabsdots[] =
		"GET /pre/secret HTTP/1.1\r\nHost: x\r\n"
		"X-Forwarded-For: 10.0.0.9\r\nVia: 1.1 ringproxy\r\n\r\n";
	static const char want10o[] =
		"GET /y HTTP/1.1\r\nHost: be\r\n"
		"X-Forwarded-For: 10.0.0.9\r\nVia: 1.1 ringproxy\r\n\r\n";
	static const char inabs[] = "GET http://img.example:8080/y?q HTTP/1.1\r\nHost: other.example\r\nA: 1\r\n\r\n";
	static const char wantabs[] =
		"GET /y?q HTTP/1.1\r\nHost: img.example:8080\r\nA: 1\r\n"
		"X-Forwarded-For: 10.0.0.9\r\nVia: 1.1 ringproxy\r\n\r\n";
	struct http1_fwd_req f = {
		{ "/pre", 4 }, { "10.0.0.9", 8 }, { "http", 4 }, { "1.1 ringproxy", 13 },
		{ "be", 2 }, false, { "", 0 }, false, { NULL, 0 }, false,
	};
	struct http1_header h[32];
	struct http1_msg m;
	struct iovec iov[16];
	char scratch[512], out[1024];
	int n;

	http1_msg_init(&m);
	tap_ok(http1_parse_request(&m, h, in, sizeof(in) - 1, &lim_default) == sizeof(in) - 1,
	       "writer: request parses");
	n = http1_write_request(&m, &f, iov, 16, scratch, sizeof(scratch));
	tap_ok(n > 0 && n <= 5, "writer: request in %d iovecs", n);
	gather(iov, n, out);
	tap_is_str(out, want, "writer: request head exact");
	tap_is_int(http1_write_request(&m, &f, iov, 2, scratch, sizeof(scratch)), -1,
		   "writer: too few iovecs -> -1");
	tap_is_int(http1_write_request(&m, &f, iov, 16, scratch, 40), -1,
		   "writer: scratch too small -> -1");

	f.prefix.len = 0;
	f.proto.len = 0;
	http1_msg_init(&m);
	tap_ok(http1_parse_request(&m, h, in10, sizeof(in10) - 1, &lim_default) > 0,
	       "writer: HTTP/1.0 absolute-form parses");
	f.prefix = (struct http1_str){ "", 0 };
	n = http1_write_request(&m, &f, iov, 16, scratch, sizeof(scratch));
	gather(iov, n, out);
	tap_is_str(out, want10, "writer: absolute-form: Host from the target, origin-form sent");
	http1_msg_init(&m);
	tap_ok(http1_parse_request(&m, h, in10o, sizeof(in10o) - 1, &lim_default) > 0,
	       "writer: HTTP/1.0 without Host parses");
	n = http1_write_request(&m, &f, iov, 16, scratch, sizeof(scratch));
	gather(iov, n, out);
	tap_is_str(out, want10o, "writer: HTTP/1.0 request without Host gets the backend's");
	http1_msg_init(&m);
	tap_ok(http1_parse_request(&m, h, inabs, sizeof(inabs) - 1, &lim_default) > 0,
	       "writer: absolute-form with another Host parses");
	n = http1_write_request(&m, &f, iov, 16, scratch, sizeof(scratch));
	gather(iov, n, out);
	tap_is_str(out, wantabs, "writer: absolute-form replaces the client's Host (RFC 9112 3.2.2)");
	/* [proxy] backend_host: the Host a cache keyed its objects by
	 * under the proxy before, in place of the client's */
	{
		static const char inh[] = "GET /y?q HTTP/1.1\r\nA: 1\r\nHost: img.example\r\nB: 2\r\n\r\n";
		static const char wanth[] = "GET /y?q HTTP/1.1\r\nHost: thumbs\r\nA: 1\r\nB: 2\r\n"
			"X-Forwarded-For: 10.0.0.9\r\nVia: 1.1 ringproxy\r\n\r\n";
		struct http1_fwd_req fh = f;

		fh.default_host = (struct http1_str){ "thumbs", 6 };
		fh.host_fixed = true;
		http1_msg_init(&m);
		tap_ok(http1_parse_request(&m, h, inh, sizeof(inh) - 1, &lim_default) > 0, "writer: a request with a Host parses");
		n = http1_write_request(&m, &fh, iov, 16, scratch, sizeof(scratch));
		gather(iov, n, out);
		tap_is_str(out, wanth, "writer: host_fixed sends its Host in place of the client's, once");
		http1_msg_init(&m);
		tap_ok(http1_parse_request(&m, h, inabs, sizeof(inabs) - 1, &lim_default) > 0, "writer: absolute-form parses");
		n = http1_write_request(&m, &fh, iov, 16, scratch, sizeof(scratch));
		gather(iov, n, out);
		tap_is_str(out, "GET /y?q HTTP/1.1\r\nHost: thumbs\r\nA: 1\r\nX-Forwarded-For: 10.0.0.9\r\n"
			   "Via: 1.1 ringproxy\r\n\r\n", "writer: host_fixed over an absolute-form target's authority too");
	}
	http1_msg_init(&m);
	tap_is_int(http1_parse_request(&m, h, inuser, sizeof(inuser) - 1, &lim_default),
		   -400, "absolute-form with userinfo is refused");

	f.prefix = (struct http1_str){ "/pre", 4 };
	http1_msg_init(&m);
	tap_ok(http1_parse_request(&m, h, indots, sizeof(indots) - 1, &lim_default) > 0,
	       "writer: a path with dot-segments parses");
	n = http1_write_request(&m, &f, iov, 16, scratch, sizeof(scratch));
	gather(iov, n, out);
	tap_is_str(out, wantdots, "writer: dot-segments removed before the prefix, query untouched");
	http1_msg_init(&m);
	tap_ok(http1_parse_request(&m, h, inabsdots, sizeof(inabsdots) - 1, &lim_default) > 0,
	       "writer: absolute-form with dot-segments parses");
	n = http1_write_request(&m, &f, iov, 16, scratch, sizeof(scratch));
	gather(iov, n, out);
	tap_is_str(out, wantabsdots, "writer: absolute-form dot-segments removed before the prefix");

	/* a target rewritten after the parse (query_apply, normalize_forward
	 * = on, puts the normalised one in a buffer of its own): the line
	 * written is the new target's, not the one received */
	{
		static const char inq[] = "GET /t/1.jpg?w=200&utm_source=x HTTP/1.1\r\nHost: h\r\n\r\n";
		static const char wantq[] = "GET /t/1.jpg?w=200 HTTP/1.1\r\nHost: h\r\n"
					    "X-Forwarded-For: 10.0.0.9\r\nVia: 1.1 ringproxy\r\n\r\n";
		static const char wantnone[] = "GET /t/1.jpg HTTP/1.1\r\nHost: h\r\n"
					       "X-Forwarded-For: 10.0.0.9\r\nVia: 1.1 ringproxy\r\n\r\n";
		static char rewritten[] = "/t/1.jpg?w=200";

		f.prefix = (struct http1_str){ "", 0 };
		http1_msg_init(&m);
		tap_ok(http1_parse_request(&m, h, inq, sizeof(inq) - 1, &lim_default) > 0,
		       "writer: a request with a tracker parses");
		m.target = (struct http1_str){ rewritten, sizeof(rewritten) - 1 };
		m.query = (struct http1_str){ rewritten + 9, 5 };
		n = http1_write_request(&m, &f, iov, 16, scratch, sizeof(scratch));
		gather(iov, n, out);
		tap_is_str(out, wantq, "writer: a target rewritten after the parse is the one sent");
		m.target = (struct http1_str){ rewritten, 8 };
		m.query = (struct http1_str){ rewritten + 9, 0 };
		m.has_query = false;
		n = http1_write_request(&m, &f, iov, 16, scratch, sizeof(scratch));
		gather(iov, n, out);
		tap_is_str(out, wantnone, "writer: a query rewritten away goes with its '?'");
		f.prefix = (struct http1_str){ "/pre", 4 };
		http1_msg_init(&m);
		http1_parse_request(&m, h, inabsdots, sizeof(inabsdots) - 1, &lim_default);
	}

	/* the target alone, for the proxy's own requests: the request
	 * line's, byte for byte */
	tap_is_int(http1_write_target(&m, f.prefix, out, sizeof(out)), 11, "target: its length");
	tap_is_str(out, "/pre/secret", "target: absolute-form dot-segments removed before the prefix");
	http1_msg_init(&m);
	http1_parse_request(&m, h, indots, sizeof(indots) - 1, &lim_default);
	tap_is_int(http1_write_target(&m, f.prefix, out, sizeof(out)), 19, "target: with a query");
	tap_is_str(out, "/pre/secret?x=/../y", "target: %%2e%%2e removed as .., the query untouched");
	http1_msg_init(&m);
	http1_parse_request(&m, h, in, sizeof(in) - 1, &lim_default);
	tap_is_int(http1_write_target(&m, f.prefix, out, 19), 18, "target: exactly room -> written");
	tap_is_str(out, "/pre/img/a.jpg?w=1", "target: a clean path as sent");
	tap_is_int(http1_write_target(&m, f.prefix, out, 18), -1, "target: no room for its NUL -> -1");

	/* the forwarding headers a client can set: left out when the answer
	 * may be shared, relayed otherwise (or when Connection names one) */
	{
		static const char infwd[] =
			"GET /f HTTP/1.1\r\nHost: h\r\nX-Forwarded-Host: evil.example\r\n"
			"Forwarded: host=evil.example;proto=https\r\nX-Forwarded-Port: 8443\r\n"
			"X-Original-URL: /admin\r\nx-rewrite-url: /a\r\nX-Forwarded-Prefix: /p\r\n"
			"X-Forwarded-Scheme: https\r\nX-Forwarded-Server: s\r\nX-Forwarded-Ssl: on\r\n"
			"X-Host: x\r\nX-Forwarded-Hostx: kept\r\n\r\n";
		static const char wantfwd[] =
			"GET /f HTTP/1.1\r\nHost: h\r\nX-Forwarded-Hostx: kept\r\n"
			"X-Forwarded-For: 10.0.0.9\r\nVia: 1.1 ringproxy\r\n\r\n";
		static const char inconn[] =
			"GET /f HTTP/1.1\r\nHost: h\r\nConnection: X-Forwarded-Host\r\n"
			"X-Forwarded-Host: e\r\n\r\n";
		static const char wantconn[] =
			"GET /f HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 10.0.0.9\r\nVia: 1.1 ringproxy\r\n\r\n";

		f.prefix = (struct http1_str){ "", 0 };
		http1_msg_init(&m);
		tap_ok(http1_parse_request(&m, h, infwd, sizeof(infwd) - 1, &lim_default) > 0,
		       "writer: forwarding headers parse");
		f.drop_fwd = true;
		n = http1_write_request(&m, &f, iov, 16, scratch, sizeof(scratch));
		gather(iov, n, out);
		tap_is_str(out, wantfwd, "writer: drop_fwd leaves out Forwarded, X-Forwarded-Host/-Port/..., "
			   "X-Original-URL, X-Rewrite-URL, X-Host");
		f.drop_fwd = false;
		n = http1_write_request(&m, &f, iov, 16, scratch, sizeof(scratch));
		gather(iov, n, out);
		tap_ok(strstr(out, "X-Forwarded-Host: evil.example\r\n") && strstr(out, "X-Original-URL: /admin\r\n"),
		       "writer: without drop_fwd they are relayed");
		http1_msg_init(&m);
		http1_parse_request(&m, h, inconn, sizeof(inconn) - 1, &lim_default);
		n = http1_write_request(&m, &f, iov, 16, scratch, sizeof(scratch));
		gather(iov, n, out);
		tap_is_str(out, wantconn, "writer: Connection can still make one hop-by-hop");
	}
}

static void test_write_response(void)
{
	static const char in[] =
		"HTTP/1.1 200 OK\r\n"
		"Content-Type: image/jpeg\r\n"
		"Transfer-Encoding: chunked\r\n"
		"Connection: close\r\n"
		"Via: 1.1 varnish\r\n"
		"Cache-Control: max-age=60\r\n"
		"\r\n";
	static const char want[] =
		"HTTP/1.1 200 OK\r\n"
		"Content-Type: image/jpeg\r\n"
		"Cache-Control: max-age=60\r\n"
		"Transfer-Encoding: chunked\r\n"
		"X-Ringproxy-Backend: cache1\r\n"
		"Via: 1.1 varnish, 1.1 ringproxy\r\n"
		"\r\n";
	static const char want_dechunk[] =
		"HTTP/1.1 200 OK\r\n"
		"Content-Type: image/jpeg\r\n"
		"Cache-Control: max-age=60\r\n"
		"Via: 1.1 varnish\r\n"
		"Connection: close\r\n"
		"\r\n";
	static const char in304[] =
		"HTTP/1.1 304 Not Modified\r\nContent-Length: 1234\r\nETag: \"x\"\r\n\r\n";
	static const char want304[] =
		"HTTP/1.1 304 Not Modified\r\nContent-Length: 1234\r\nETag: \"x\"\r\n"
		"Connection: keep-alive\r\n\r\n";
	/* issue 9: a 204 or 1xx with a Content-Length (or Transfer-Encoding)
	 * reaches the client without it (RFC 9110 8.6, 9112 6.1) */
	static const char in204[] = "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n";
	static const char want204[] = "HTTP/1.1 204 No Content\r\n\r\n";
	static const char in204te[] =
		"HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\nX: 1\r\n\r\n";
	static const char want204te[] = "HTTP/1.1 204 No Content\r\nX: 1\r\n\r\n";
	static const char in100[] = "HTTP/1.1 100 Continue\r\nContent-Length: 5\r\n\r\n";
	static const char want100[] = "HTTP/1.1 100 Continue\r\n\r\n";
	struct http1_fwd_resp f = {
		{ "X-Ringproxy-Backend", 19 }, { "cache1", 6 }, { "1.1 ringproxy", 13 },
		false, false, false, { "", 0 },
	};
	struct http1_header h[32];
	struct http1_msg m;
	struct iovec iov[16];
	char scratch[512], out[1024];
	int n;

	http1_msg_init(&m);
	tap_ok(http1_parse_response(&m, h, in, sizeof(in) - 1, &lim_default, HTTP1_M_GET) > 0,
	       "writer: response parses");
	n = http1_write_response(&m, &f, iov, 16, scratch, sizeof(scratch));
	gather(iov, n, out);
	tap_is_str(out, want, "writer: response head exact");
	f.backend_hdr.len = 0;
	f.via.len = 0;
	f.dechunk = true;
	n = http1_write_response(&m, &f, iov, 16, scratch, sizeof(scratch));
	gather(iov, n, out);
	tap_is_str(out, want_dechunk, "writer: dechunked response closes, keeps Via");

	http1_msg_init(&m);
	tap_ok(http1_parse_response(&m, h, in304, sizeof(in304) - 1, &lim_default, HTTP1_M_GET) > 0,
	       "writer: 304 parses");
	f.dechunk = false;
	f.keep_alive_10 = true;
	n = http1_write_response(&m, &f, iov, 16, scratch, sizeof(scratch));
	gather(iov, n, out);
	tap_is_str(out, want304, "writer: 304 keeps Content-Length, keep-alive for 1.0");

	memset(&f, 0, sizeof(f));
	http1_msg_init(&m);
	tap_ok(http1_parse_response(&m, h, in204, sizeof(in204) - 1, &lim_default, HTTP1_M_GET) > 0,
	       "writer: 204 with Content-Length parses");
	n = http1_write_response(&m, &f, iov, 16, scratch, sizeof(scratch));
	gather(iov, n, out);
	tap_is_str(out, want204, "writer: 204 without the backend's Content-Length");
	http1_msg_init(&m);
	tap_ok(http1_parse_response(&m, h, in204te, sizeof(in204te) - 1, &lim_default, HTTP1_M_GET) > 0,
	       "writer: 204 with Transfer-Encoding parses");
	n = http1_write_response(&m, &f, iov, 16, scratch, sizeof(scratch));
	gather(iov, n, out);
	tap_is_str(out, want204te, "writer: 204 without the backend's Transfer-Encoding");
	http1_msg_init(&m);
	tap_ok(http1_parse_response(&m, h, in100, sizeof(in100) - 1, &lim_default, HTTP1_M_GET) > 0,
	       "writer: 100 with Content-Length parses");
	n = http1_write_response(&m, &f, iov, 16, scratch, sizeof(scratch));
	gather(iov, n, out);
	tap_is_str(out, want100, "writer: 1xx without the backend's Content-Length");
}

/* The fields an HTTP/2 response is made of (http1_response_fields): the
 * lines http1_write_response writes but the status line and the
 * connection's own, in its order; NUL-terminated "name: value\r\n" lines
 * in out. */
static int render_fields(const struct http1_field *fl, int n, char *out)
{
	out[0] = '\0';
	for (int i = 0; i < n; i++)
		sprintf(out + strlen(out), "%.*s: %.*s\r\n", (int)fl[i].name.len, fl[i].name.p,
			(int)fl[i].value.len, fl[i].value.p);
	return n;
}

static void test_response_fields(void)
{
	static const char in[] =
		"HTTP/1.1 200 OK\r\n"
		"Content-Type: image/jpeg\r\n"
		"Connection: keep-alive, X-Secret\r\n"
		"X-Secret: 1\r\n"
		"Keep-Alive: timeout=5\r\n"
		"Via: 1.0 varnish\r\n"
		"X-Ringproxy-Backend: made-up\r\n"
		"Content-Length: 42\r\n"
		"Via: 1.1 edge\r\n"
		"Cache-Control: max-age=60\r\n"
		"\r\n";
	static const char want[] =
		"Content-Type: image/jpeg\r\n"
		"Cache-Control: max-age=60\r\n"
		"Content-Length: 42\r\n"
		"X-Ringproxy-Backend: cache1\r\n"
		"Cache-Status: ringproxy; fwd=miss\r\n"
		"Via: 1.0 varnish, 1.1 edge, 1.1 ringproxy\r\n";
	static const char chunked[] =
		"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\nTE: trailers\r\nTrailer: X\r\n"
		"Upgrade: h2c\r\nX: 1\r\n\r\n";
	struct http1_fwd_resp f = {
		{ "X-Ringproxy-Backend", 19 }, { "cache1", 6 }, { "1.1 ringproxy", 13 },
		false, false, false, { "Cache-Status: ringproxy; fwd=miss\r\n", 35 },
	};
	struct http1_header h[32];
	struct http1_field fl[16];
	struct http1_msg m;
	struct iovec iov[16];
	char scratch[512], scratch2[512], out[1024], head[1024];
	int n;

	http1_msg_init(&m);
	tap_ok(http1_parse_response(&m, h, in, sizeof(in) - 1, &lim_default, HTTP1_M_GET) > 0,
	       "fields: response parses");
	n = render_fields(fl, http1_response_fields(&m, &f, fl, 16, scratch, sizeof(scratch)), out);
	tap_is_str(out, want, "fields: the connection's, the framing's and a backend's own copy of ours "
	       "left out; Content-Length, ours, Cache-Status and the merged Via after");
	/* the same lines as the HTTP/1.1 writer's, but its status line */
	n = http1_write_response(&m, &f, iov, 16, scratch2, sizeof(scratch2));
	gather(iov, n, head);
	tap_is_str(head + strlen("HTTP/1.1 200 OK\r\n"), strcat(out, "\r\n"),
		   "fields: the lines http1_write_response writes");
	tap_ok(http1_response_fields(&m, &f, fl, 5, scratch, sizeof(scratch)) == -1,
	       "fields: -1 when they do not all fit");
	tap_ok(http1_response_fields(&m, &f, fl, 16, scratch, 8) == -1, "fields: -1 when the scratch is short");

	memset(&f, 0, sizeof(f));
	http1_msg_init(&m);
	tap_ok(http1_parse_response(&m, h, chunked, sizeof(chunked) - 1, &lim_default, HTTP1_M_GET) > 0,
	       "fields: chunked response parses");
	render_fields(fl, http1_response_fields(&m, &f, fl, 16, scratch, sizeof(scratch)), out);
	tap_is_str(out, "X: 1\r\n", "fields: no Transfer-Encoding, TE, Trailer, Upgrade (RFC 9113 8.2.2)");
}

/* Headers the writers drop besides hop-by-hop: request header names with
 * '_' (unless kept), and a response's own copy of our backend header. */
static void test_write_dropped(void)
{
	static const char in[] =
		"GET /u HTTP/1.1\r\nHost: x\r\nX_User: admin\r\nX-User: bob\r\n_: 1\r\nA: 2\r\n\r\n";
	static const char want_drop[] =
		"GET /u HTTP/1.1\r\nHost: x\r\nX-User: bob\r\nA: 2\r\n"
		"X-Forwarded-For: 10.0.0.9\r\nVia: 1.1 ringproxy\r\n\r\n";
	static const char want_keep[] =
		"GET /u HTTP/1.1\r\nHost: x\r\nX_User: admin\r\nX-User: bob\r\n_: 1\r\nA: 2\r\n"
		"X-Forwarded-For: 10.0.0.9\r\nVia: 1.1 ringproxy\r\n\r\n";
	static const char resp[] =
		"HTTP/1.1 200 OK\r\nx-ringproxy-backend: evil\r\nX-Cache-Node: n1\r\n"
		"X-Ringproxy-Backend2: ok\r\nContent-Length: 0\r\n\r\n";
	static const char want_resp[] =
		"HTTP/1.1 200 OK\r\nX-Cache-Node: n1\r\nX-Ringproxy-Backend2: ok\r\n"
		"Content-Length: 0\r\nX-Ringproxy-Backend: cache1\r\n\r\n";
	static const char want_resp2[] =
		"HTTP/1.1 200 OK\r\nx-ringproxy-backend: evil\r\nX-Ringproxy-Backend2: ok\r\n"
		"Content-Length: 0\r\nX-Cache-Node: cache1\r\n\r\n";
	struct http1_fwd_req f = {
		{ "", 0 }, { "10.0.0.9", 8 }, { "", 0 }, { "1.1 ringproxy", 13 }, { "be", 2 }, false, { "", 0 }, false, { NULL, 0 }, false,
	};
	struct http1_fwd_resp fr = {
		{ "X-Ringproxy-Backend", 19 }, { "cache1", 6 }, { "", 0 }, false, false, false, { "", 0 },
	};
	struct http1_header h[32];
	struct http1_msg m;
	struct iovec iov[16];
	char scratch[512], out[1024];
	int n;

	http1_msg_init(&m);
	tap_ok(http1_parse_request(&m, h, in, sizeof(in) - 1, &lim_default) > 0, "underscores: request parses");
	tap_ok(h[1].flags == HTTP1_HDR_UNDERSCORE && h[2].flags == 0 && h[3].flags == HTTP1_HDR_UNDERSCORE,
	       "underscores: names with '_' are flagged");
	n = http1_write_request(&m, &f, iov, 16, scratch, sizeof(scratch));
	gather(iov, n, out);
	tap_is_str(out, want_drop, "underscores: dropped from the forwarded request by default");
	f.keep_underscores = true;
	n = http1_write_request(&m, &f, iov, 16, scratch, sizeof(scratch));
	gather(iov, n, out);
	tap_is_str(out, want_keep, "underscores: kept when asked (underscores_in_headers = on)");

	http1_msg_init(&m);
	tap_ok(http1_parse_response(&m, h, resp, sizeof(resp) - 1, &lim_default, HTTP1_M_GET) > 0,
	       "backend header: response parses");
	n = http1_write_response(&m, &fr, iov, 16, scratch, sizeof(scratch));
	gather(iov, n, out);
	tap_is_str(out, want_resp, "backend header: the backend's own (any case) is dropped, ours sent once");
	fr.backend_hdr = (struct http1_str){ "X-Cache-Node", 12 };
	n = http1_write_response(&m, &fr, iov, 16, scratch, sizeof(scratch));
	gather(iov, n, out);
	tap_is_str(out, want_resp2, "backend header renamed: the backend's header of the new name is dropped");
}

/* The writers' output for a table of heads, byte for byte: each head is
 * parsed, then written with the variant v of our additions (see
 * write_table). The outputs are those of the writers before they took
 * shortcuts from what the parser saw (the request line or status line
 * reused from the buffer, merges skipped when no header has their flag):
 * a shortcut taken when it should not be changes a line here. */
struct wr_case {
	const char *name;
	const char *in;
	size_t len;
	int v;
	const char *want;
};

#define WR(n, lit, v, want) { n, S(lit), v, want }

static const struct wr_case wr_requests[] = {
	WR("plain",
	   "GET /a HTTP/1.1\r\n"
		"Host: h\r\n"
		"\r\n",
	   0, "GET /a HTTP/1.1\r\n"
		"Host: h\r\n"
		"X-Forwarded-For: 10.0.0.9\r\n"
		"X-Forwarded-Proto: http\r\n"
		"Via: 1.1 ringproxy\r\n"
		"\r\n"),
	WR("plain, no headers but Host, query",
	   "GET /a?b=1&c HTTP/1.1\r\n"
		"Host: h\r\n"
		"Accept: */*\r\n"
		"\r\n",
	   0, "GET /a?b=1&c HTTP/1.1\r\n"
		"Host: h\r\n"
		"Accept: */*\r\n"
		"X-Forwarded-For: 10.0.0.9\r\n"
		"X-Forwarded-Proto: http\r\n"
		"Via: 1.1 ringproxy\r\n"
		"\r\n"),
	WR("lower-case via and xff",
	   "GET /a HTTP/1.1\r\n"
		"host: h\r\n"
		"via: 1.0 a\r\n"
		"x-forwarded-for: 1.2.3.4\r\n"
		"\r\n",
	   0, "GET /a HTTP/1.1\r\n"
		"host: h\r\n"
		"X-Forwarded-For: 1.2.3.4, 10.0.0.9\r\n"
		"X-Forwarded-Proto: http\r\n"
		"Via: 1.0 a, 1.1 ringproxy\r\n"
		"\r\n"),
	WR("upper-case, an empty xff",
	   "GET /a HTTP/1.1\r\n"
		"Host: h\r\n"
		"VIA: 1.0 a\r\n"
		"X-FORWARDED-FOR: 1.2.3.4\r\n"
		"X-Forwarded-For:   \r\n"
		"vIa:\r\n"
		"\r\n",
	   0, "GET /a HTTP/1.1\r\n"
		"Host: h\r\n"
		"X-Forwarded-For: 1.2.3.4, 10.0.0.9\r\n"
		"X-Forwarded-Proto: http\r\n"
		"Via: 1.0 a, 1.1 ringproxy\r\n"
		"\r\n"),
	WR("Connection lists via, xff and a header",
	   "GET /a HTTP/1.1\r\n"
		"Connection: via, X-Forwarded-For, x-a\r\n"
		"X-A: 1\r\n"
		"Host: h\r\n"
		"Via: 1.0 e\r\n"
		"X-Forwarded-For: 9.9.9.9\r\n"
		"\r\n",
	   0, "GET /a HTTP/1.1\r\n"
		"Host: h\r\n"
		"X-Forwarded-For: 9.9.9.9, 10.0.0.9\r\n"
		"X-Forwarded-Proto: http\r\n"
		"Via: 1.0 e, 1.1 ringproxy\r\n"
		"\r\n"),
	WR("Connection lists an earlier header",
	   "GET /a HTTP/1.1\r\n"
		"X-B: 1\r\n"
		"Host: h\r\n"
		"X-C: 2\r\n"
		"connection: X-b , keep-alive\r\n"
		"X-D: 3\r\n"
		"\r\n",
	   0, "GET /a HTTP/1.1\r\n"
		"Host: h\r\n"
		"X-C: 2\r\n"
		"X-D: 3\r\n"
		"X-Forwarded-For: 10.0.0.9\r\n"
		"X-Forwarded-Proto: http\r\n"
		"Via: 1.1 ringproxy\r\n"
		"\r\n"),
	WR("via first, xff last",
	   "GET /a HTTP/1.1\r\n"
		"Via: 1.1 first\r\n"
		"Host: h\r\n"
		"A: 1\r\n"
		"X-Forwarded-For: 5.5.5.5\r\n"
		"\r\n",
	   0, "GET /a HTTP/1.1\r\n"
		"Host: h\r\n"
		"A: 1\r\n"
		"X-Forwarded-For: 5.5.5.5, 10.0.0.9\r\n"
		"X-Forwarded-Proto: http\r\n"
		"Via: 1.1 first, 1.1 ringproxy\r\n"
		"\r\n"),
	WR("hop-by-hop first",
	   "GET /a HTTP/1.1\r\n"
		"Keep-Alive: 5\r\n"
		"Host: h\r\n"
		"TE: trailers\r\n"
		"A: 1\r\n"
		"Proxy-Connection: x\r\n"
		"\r\n",
	   0, "GET /a HTTP/1.1\r\n"
		"Host: h\r\n"
		"A: 1\r\n"
		"X-Forwarded-For: 10.0.0.9\r\n"
		"X-Forwarded-Proto: http\r\n"
		"Via: 1.1 ringproxy\r\n"
		"\r\n"),
	WR("only X-Forwarded-Proto",
	   "GET /a HTTP/1.1\r\n"
		"Host: h\r\n"
		"X-Forwarded-Proto: https\r\n"
		"B: 2\r\n"
		"\r\n",
	   0, "GET /a HTTP/1.1\r\n"
		"Host: h\r\n"
		"B: 2\r\n"
		"X-Forwarded-For: 10.0.0.9\r\n"
		"X-Forwarded-Proto: http\r\n"
		"Via: 1.1 ringproxy\r\n"
		"\r\n"),
	WR("HTTP/1.0, no Host",
	   "GET /a HTTP/1.0\r\n"
		"A: 1\r\n"
		"\r\n",
	   0, "GET /a HTTP/1.1\r\n"
		"Host: be\r\n"
		"A: 1\r\n"
		"X-Forwarded-For: 10.0.0.9\r\n"
		"X-Forwarded-Proto: http\r\n"
		"Via: 1.1 ringproxy\r\n"
		"\r\n"),
	WR("HTTP/1.0 with Host",
	   "GET /a HTTP/1.0\r\n"
		"Host: h\r\n"
		"Via: 1.0 x\r\n"
		"\r\n",
	   0, "GET /a HTTP/1.1\r\n"
		"Host: h\r\n"
		"X-Forwarded-For: 10.0.0.9\r\n"
		"X-Forwarded-Proto: http\r\n"
		"Via: 1.0 x, 1.1 ringproxy\r\n"
		"\r\n"),
	WR("leading empty lines",
	   "\r\n"
		"\r\n"
		"GET /a HTTP/1.1\r\n"
		"Host: h\r\n"
		"\r\n",
	   0, "GET /a HTTP/1.1\r\n"
		"Host: h\r\n"
		"X-Forwarded-For: 10.0.0.9\r\n"
		"X-Forwarded-Proto: http\r\n"
		"Via: 1.1 ringproxy\r\n"
		"\r\n"),
	WR("absolute-form",
	   "GET http://Auth:81/p?q HTTP/1.1\r\n"
		"Host: other\r\n"
		"A: 1\r\n"
		"\r\n",
	   0, "GET /p?q HTTP/1.1\r\n"
		"Host: Auth:81\r\n"
		"A: 1\r\n"
		"X-Forwarded-For: 10.0.0.9\r\n"
		"X-Forwarded-Proto: http\r\n"
		"Via: 1.1 ringproxy\r\n"
		"\r\n"),
	WR("dot-segments",
	   "GET /x/../y/./z HTTP/1.1\r\n"
		"Host: h\r\n"
		"\r\n",
	   0, "GET /y/z HTTP/1.1\r\n"
		"Host: h\r\n"
		"X-Forwarded-For: 10.0.0.9\r\n"
		"X-Forwarded-Proto: http\r\n"
		"Via: 1.1 ringproxy\r\n"
		"\r\n"),
	WR("asterisk",
	   "OPTIONS * HTTP/1.1\r\n"
		"Host: h\r\n"
		"\r\n",
	   1, "OPTIONS * HTTP/1.1\r\n"
		"Host: h\r\n"
		"X-Forwarded-For: 10.0.0.9\r\n"
		"X-Forwarded-Proto: http\r\n"
		"Via: 1.1 ringproxy\r\n"
		"\r\n"),
	WR("with a prefix",
	   "GET /a?q HTTP/1.1\r\n"
		"Host: h\r\n"
		"\r\n",
	   1, "GET /pre/a?q HTTP/1.1\r\n"
		"Host: h\r\n"
		"X-Forwarded-For: 10.0.0.9\r\n"
		"X-Forwarded-Proto: http\r\n"
		"Via: 1.1 ringproxy\r\n"
		"\r\n"),
	WR("query as received",
	   "GET /a?z=1&a=2 HTTP/1.1\r\n"
		"Host: h\r\n"
		"\r\n",
	   2, "GET /a?a=2&z=1 HTTP/1.1\r\n"
		"Host: h\r\n"
		"X-Forwarded-For: 10.0.0.9\r\n"
		"X-Forwarded-Proto: http\r\n"
		"Via: 1.1 ringproxy\r\n"
		"\r\n"),
	WR("forwarding headers dropped",
	   "GET /a HTTP/1.1\r\n"
		"Host: h\r\n"
		"Forwarded: for=1\r\n"
		"X-Forwarded-Host: e\r\n"
		"A: 1\r\n"
		"\r\n",
	   3, "GET /a HTTP/1.1\r\n"
		"Host: h\r\n"
		"A: 1\r\n"
		"X-Forwarded-For: 10.0.0.9\r\n"
		"X-Forwarded-Proto: http\r\n"
		"Via: 1.1 ringproxy\r\n"
		"\r\n"),
	WR("extra lines, underscores kept",
	   "GET /a HTTP/1.1\r\n"
		"Host: h\r\n"
		"X_Y: 1\r\n"
		"\r\n",
	   4, "GET /a HTTP/1.1\r\n"
		"Host: h\r\n"
		"X_Y: 1\r\n"
		"X-Forwarded-For: 10.0.0.9\r\n"
		"X-Forwarded-Proto: http\r\n"
		"Via: 1.1 ringproxy\r\n"
		"If-None-Match: \"e\"\r\n"
		"\r\n"),
	WR("underscore dropped",
	   "GET /a HTTP/1.1\r\n"
		"X_Y: 1\r\n"
		"Host: h\r\n"
		"_: 2\r\n"
		"\r\n",
	   0, "GET /a HTTP/1.1\r\n"
		"Host: h\r\n"
		"X-Forwarded-For: 10.0.0.9\r\n"
		"X-Forwarded-Proto: http\r\n"
		"Via: 1.1 ringproxy\r\n"
		"\r\n"),
	WR("framing",
	   "POST /u HTTP/1.1\r\n"
		"Content-Length: 5\r\n"
		"Host: h\r\n"
		"X: y\r\n"
		"\r\n",
	   0, "POST /u HTTP/1.1\r\n"
		"Host: h\r\n"
		"X: y\r\n"
		"Content-Length: 5\r\n"
		"X-Forwarded-For: 10.0.0.9\r\n"
		"X-Forwarded-Proto: http\r\n"
		"Via: 1.1 ringproxy\r\n"
		"\r\n"),
	WR("chunked",
	   "POST /u HTTP/1.1\r\n"
		"Host: h\r\n"
		"Transfer-Encoding: chunked\r\n"
		"\r\n",
	   0, "POST /u HTTP/1.1\r\n"
		"Host: h\r\n"
		"Transfer-Encoding: chunked\r\n"
		"X-Forwarded-For: 10.0.0.9\r\n"
		"X-Forwarded-Proto: http\r\n"
		"Via: 1.1 ringproxy\r\n"
		"\r\n"),
	WR("no proto",
	   "GET /a HTTP/1.1\r\n"
		"Host: h\r\n"
		"X-Forwarded-Proto: x\r\n"
		"\r\n",
	   5, "GET /a HTTP/1.1\r\n"
		"Host: h\r\n"
		"X-Forwarded-For: 10.0.0.9\r\n"
		"Via: 1.0 ringproxy\r\n"
		"\r\n"),
	WR("unknown method",
	   "PURGEX /a HTTP/1.1\r\n"
		"Host: h\r\n"
		"Upgrade: z\r\n"
		"Connection: upgrade\r\n"
		"\r\n",
	   0, "PURGEX /a HTTP/1.1\r\n"
		"Host: h\r\n"
		"X-Forwarded-For: 10.0.0.9\r\n"
		"X-Forwarded-Proto: http\r\n"
		"Via: 1.1 ringproxy\r\n"
		"\r\n"),
};

static const struct wr_case wr_responses[] = {
	WR("testcache's",
	   "HTTP/1.1 200 OK\r\n"
		"X-Backend: a\r\n"
		"Cache-Control: public, max-age=3600\r\n"
		"Content-Type: image/jpeg\r\n"
		"X-Request-Count: 1\r\n"
		"X-Echo-Version: 1.1\r\n"
		"Date: Tue, 01 Dec 2026 18:24:27 GMT\r\n"
		"Content-Length: 4096\r\n"
		"\r\n",
	   0, "HTTP/1.1 200 OK\r\n"
		"X-Backend: a\r\n"
		"Cache-Control: public, max-age=3600\r\n"
		"Content-Type: image/jpeg\r\n"
		"X-Request-Count: 1\r\n"
		"X-Echo-Version: 1.1\r\n"
		"Date: Tue, 01 Dec 2026 18:24:27 GMT\r\n"
		"Content-Length: 4096\r\n"
		"X-Ringproxy-Backend: cache1\r\n"
		"Via: 1.1 ringproxy\r\n"
		"\r\n"),
	WR("lower and upper via",
	   "HTTP/1.1 200 OK\r\n"
		"via: 1.1 a\r\n"
		"A: 1\r\n"
		"VIA: 1.0 b\r\n"
		"Content-Length: 3\r\n"
		"\r\n",
	   0, "HTTP/1.1 200 OK\r\n"
		"A: 1\r\n"
		"Content-Length: 3\r\n"
		"X-Ringproxy-Backend: cache1\r\n"
		"Via: 1.1 a, 1.0 b, 1.1 ringproxy\r\n"
		"\r\n"),
	WR("no reason, no SP",
	   "HTTP/1.1 200\r\n"
		"Content-Length: 0\r\n"
		"\r\n",
	   0, "HTTP/1.1 200 \r\n"
		"Content-Length: 0\r\n"
		"X-Ringproxy-Backend: cache1\r\n"
		"Via: 1.1 ringproxy\r\n"
		"\r\n"),
	WR("empty reason",
	   "HTTP/1.1 404 \r\n"
		"A: 1\r\n"
		"\r\n",
	   0, "HTTP/1.1 404 \r\n"
		"A: 1\r\n"
		"X-Ringproxy-Backend: cache1\r\n"
		"Via: 1.1 ringproxy\r\n"
		"Connection: close\r\n"
		"\r\n"),
	WR("reason with tabs and obs-text",
	   "HTTP/1.1 200 O\tK \xe9""t\xe9""\r\n"
		"Content-Length: 0\r\n"
		"\r\n",
	   0, "HTTP/1.1 200 O\tK \xe9""t\xe9""\r\n"
		"Content-Length: 0\r\n"
		"X-Ringproxy-Backend: cache1\r\n"
		"Via: 1.1 ringproxy\r\n"
		"\r\n"),
	WR("HTTP/1.0",
	   "HTTP/1.0 200 OK\r\n"
		"A: 1\r\n"
		"Content-Length: 0\r\n"
		"\r\n",
	   0, "HTTP/1.1 200 OK\r\n"
		"A: 1\r\n"
		"Content-Length: 0\r\n"
		"X-Ringproxy-Backend: cache1\r\n"
		"Via: 1.1 ringproxy\r\n"
		"\r\n"),
	WR("Connection first",
	   "HTTP/1.1 200 OK\r\n"
		"Connection: close, X-Z\r\n"
		"X-Z: 1\r\n"
		"B: 2\r\n"
		"Content-Length: 0\r\n"
		"\r\n",
	   0, "HTTP/1.1 200 OK\r\n"
		"B: 2\r\n"
		"Content-Length: 0\r\n"
		"X-Ringproxy-Backend: cache1\r\n"
		"Via: 1.1 ringproxy\r\n"
		"\r\n"),
	WR("X-Forwarded-Proto only",
	   "HTTP/1.1 200 OK\r\n"
		"X-Forwarded-Proto: http\r\n"
		"B: 2\r\n"
		"Content-Length: 0\r\n"
		"\r\n",
	   0, "HTTP/1.1 200 OK\r\n"
		"B: 2\r\n"
		"Content-Length: 0\r\n"
		"X-Ringproxy-Backend: cache1\r\n"
		"Via: 1.1 ringproxy\r\n"
		"\r\n"),
	WR("xff relayed",
	   "HTTP/1.1 200 OK\r\n"
		"X-Forwarded-For: 1.1.1.1\r\n"
		"Content-Length: 0\r\n"
		"\r\n",
	   0, "HTTP/1.1 200 OK\r\n"
		"X-Forwarded-For: 1.1.1.1\r\n"
		"Content-Length: 0\r\n"
		"X-Ringproxy-Backend: cache1\r\n"
		"Via: 1.1 ringproxy\r\n"
		"\r\n"),
	WR("backend header, any case, and Via",
	   "HTTP/1.1 200 OK\r\n"
		"X-RINGPROXY-BACKEND: x\r\n"
		"Via: 1.1 v\r\n"
		"Content-Length: 0\r\n"
		"x-ringproxy-backend: y\r\n"
		"\r\n",
	   0, "HTTP/1.1 200 OK\r\n"
		"Content-Length: 0\r\n"
		"X-Ringproxy-Backend: cache1\r\n"
		"Via: 1.1 v, 1.1 ringproxy\r\n"
		"\r\n"),
	WR("close announced",
	   "HTTP/1.1 200 OK\r\n"
		"Content-Length: 0\r\n"
		"\r\n",
	   1, "HTTP/1.1 200 OK\r\n"
		"Content-Length: 0\r\n"
		"X-Ringproxy-Backend: cache1\r\n"
		"Via: 1.1 ringproxy\r\n"
		"Connection: close\r\n"
		"\r\n"),
	WR("keep-alive for 1.0, extra",
	   "HTTP/1.1 200 OK\r\n"
		"Content-Length: 0\r\n"
		"A: b\r\n"
		"\r\n",
	   2, "HTTP/1.1 200 OK\r\n"
		"A: b\r\n"
		"Content-Length: 0\r\n"
		"X-Ringproxy-Backend: cache1\r\n"
		"Cache-Status: ringproxy; fwd=miss\r\n"
		"Via: 1.1 ringproxy\r\n"
		"Connection: keep-alive\r\n"
		"\r\n"),
	WR("dechunked",
	   "HTTP/1.1 200 OK\r\n"
		"Transfer-Encoding: chunked\r\n"
		"A: b\r\n"
		"\r\n",
	   3, "HTTP/1.1 200 OK\r\n"
		"A: b\r\n"
		"X-Ringproxy-Backend: cache1\r\n"
		"Via: 1.1 ringproxy\r\n"
		"Connection: close\r\n"
		"\r\n"),
	WR("until close",
	   "HTTP/1.1 200 OK\r\n"
		"A: b\r\n"
		"\r\n",
	   0, "HTTP/1.1 200 OK\r\n"
		"A: b\r\n"
		"X-Ringproxy-Backend: cache1\r\n"
		"Via: 1.1 ringproxy\r\n"
		"Connection: close\r\n"
		"\r\n"),
	WR("204 with Content-Length",
	   "HTTP/1.1 204 No Content\r\n"
		"Content-Length: 5\r\n"
		"A: 1\r\n"
		"\r\n",
	   0, "HTTP/1.1 204 No Content\r\n"
		"A: 1\r\n"
		"X-Ringproxy-Backend: cache1\r\n"
		"Via: 1.1 ringproxy\r\n"
		"\r\n"),
	WR("no backend header, no via",
	   "HTTP/1.1 301 Moved\r\n"
		"Location: /x\r\n"
		"Content-Length: 0\r\n"
		"\r\n",
	   4, "HTTP/1.1 301 Moved\r\n"
		"Location: /x\r\n"
		"Content-Length: 0\r\n"
		"\r\n"),
	WR("chunked",
	   "HTTP/1.1 200 OK\r\n"
		"A: 1\r\n"
		"Transfer-Encoding: chunked\r\n"
		"\r\n",
	   0, "HTTP/1.1 200 OK\r\n"
		"A: 1\r\n"
		"Transfer-Encoding: chunked\r\n"
		"X-Ringproxy-Backend: cache1\r\n"
		"Via: 1.1 ringproxy\r\n"
		"\r\n"),
};

static void test_write_table(void)
{
	size_t k;

	for (k = 0; k < sizeof(wr_requests) / sizeof(wr_requests[0]); k++) {
		const struct wr_case *c = &wr_requests[k];
		struct http1_fwd_req f = {
			{ "", 0 }, { "10.0.0.9", 8 }, { "http", 4 }, { "1.1 ringproxy", 13 },
			{ "be", 2 }, false, { "", 0 }, false, { NULL, 0 }, false,
		};
		struct http1_header h[64];
		struct http1_msg m;
		struct iovec iov[32];
		char scratch[1024], out[4096];
		int n;

		if (c->v == 1)
			f.prefix = (struct http1_str){ "/pre", 4 };
		else if (c->v == 2)
			f.query = (struct http1_str){ "a=2&z=1", 7 };
		else if (c->v == 3)
			f.drop_fwd = true;
		else if (c->v == 4) {
			f.keep_underscores = true;
			f.extra = (struct http1_str){ "If-None-Match: \"e\"\r\n", 20 };
		} else if (c->v == 5) {
			f.proto.len = 0;
			f.via = (struct http1_str){ "1.0 ringproxy", 13 };
		}
		http1_msg_init(&m);
		n = http1_parse_request(&m, h, c->in, c->len, &lim_default) > 0 ?
		    http1_write_request(&m, &f, iov, 32, scratch, sizeof(scratch)) : -1;
		if (n >= 0)
			gather(iov, n, out);
		tap_is_str(n >= 0 ? out : "(no head)", c->want, "write table, request: %s", c->name);
	}
	for (k = 0; k < sizeof(wr_responses) / sizeof(wr_responses[0]); k++) {
		const struct wr_case *c = &wr_responses[k];
		struct http1_fwd_resp f = {
			{ "X-Ringproxy-Backend", 19 }, { "cache1", 6 }, { "1.1 ringproxy", 13 },
			false, false, false, { "", 0 },
		};
		struct http1_header h[64];
		struct http1_msg m;
		struct iovec iov[32];
		char scratch[1024], out[4096];
		int n;

		if (c->v == 1)
			f.close = true;
		else if (c->v == 2) {
			f.keep_alive_10 = true;
			f.extra = (struct http1_str){ "Cache-Status: ringproxy; fwd=miss\r\n", 35 };
		} else if (c->v == 3)
			f.dechunk = true;
		else if (c->v == 4)
			f.backend_hdr.len = f.via.len = 0;
		http1_msg_init(&m);
		n = -1;
		if (http1_parse_response(&m, h, c->in, c->len, &lim_default, HTTP1_M_GET) > 0) {
			http1_drop_named(&m, f.backend_hdr);
			n = http1_write_response(&m, &f, iov, 32, scratch, sizeof(scratch));
		}
		if (n >= 0)
			gather(iov, n, out);
		tap_is_str(n >= 0 ? out : "(no head)", c->want, "write table, response: %s", c->name);
	}
}

static void test_simple(void)
{
	char out[256];
	ssize_t n;

	n = http1_write_simple(out, sizeof(out), 502, true, "Retry-After: 1\r\n", "bad\n", 4);
	out[n > 0 ? n : 0] = '\0';
	tap_is_str(out, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\n"
		   "Content-Length: 4\r\nConnection: close\r\nRetry-After: 1\r\n\r\nbad\n",
		   "write_simple: exact bytes");
	tap_is_int(http1_write_simple(out, 20, 502, true, "", "bad\n", 4), -1,
		   "write_simple: too small -> -1");
	tap_is_str(http1_reason(431), "Request Header Fields Too Large", "reason 431");
	tap_is_str(http1_reason(299), "Unknown", "reason unknown");
	tap_ok(http1_str_ieq((struct http1_str){ "ChUnKeD", 7 }, "chunked"), "str_ieq folds case");
	tap_ok(!http1_str_ieq((struct http1_str){ "chunk", 5 }, "chunked"), "str_ieq wants full length");
}

/* Details the tables do not show: flags, slices, Expect, upgrade. */
static void test_details(void)
{
	static const char in[] =
		"PUT /x HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\nConnection: upgrade, X-A\r\n"
		"Upgrade: h2c\r\nX-A: 1\r\nX-Forwarded-For: a\r\nVia: v\r\nContent-Length: 1\r\n"
		"X-B:  b c  \r\n\r\n";
	static const char rs[] = "HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n";
	struct http1_header h[32];
	struct http1_msg m;

	http1_msg_init(&m);
	http1_parse_request(&m, h, in, sizeof(in) - 1, &lim_default);
	tap_ok(m.expect_continue && m.upgrade && m.method_id == HTTP1_M_PUT,
	       "details: expect, upgrade, method id");
	tap_ok(str_eq(m.host, "h") && m.nheaders == 9, "details: host slice, header count");
	tap_ok(h[1].flags == 0 && h[2].flags == HTTP1_HDR_HOP && h[3].flags == HTTP1_HDR_HOP
	       && h[4].flags == HTTP1_HDR_HOP && h[5].flags == HTTP1_HDR_XFF
	       && h[6].flags == HTTP1_HDR_GENERATED && h[7].flags == HTTP1_HDR_FRAMING,
	       "details: header flags");
	tap_ok(str_eq(h[8].value, "b c"), "details: value OWS trimmed");
	http1_msg_init(&m);
	http1_parse_request(&m, h, S("GET / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n"), &lim_default);
	tap_ok(!m.expect_continue, "details: Expect ignored in HTTP/1.0 (RFC 9110 10.1.1)");
	http1_msg_init(&m);
	http1_parse_request(&m, h, S("GET /a HTTP/1.1\r\nHost: h\r\nX: 1\r\n\r\n"), &lim_default);
	tap_ok(m.error == NULL && str_eq(m.method, "GET") && str_eq(m.target, "/a")
	       && m.minor == 1, "details: request line slices");
	http1_msg_init(&m);
	tap_ok(http1_parse_request(&m, h, S("GET / HTTP/1.1\r\n\r\n"), &lim_default) == -400
	       && m.error != NULL, "details: error text set");
	http1_msg_init(&m);
	http1_parse_response(&m, h, rs, sizeof(rs) - 1, &lim_default, HTTP1_M_GET);
	tap_ok(h[0].flags == 0, "details: a 304's Content-Length is not framing");
}

/* buf := pre, len bytes of fill with c at at, post; returns the length. */
static int byte_request(char *buf, size_t cap, const char *pre, char fill, size_t len, size_t at,
			int c, const char *post)
{
	int n = snprintf(buf, cap, "%s", pre);

	memset(buf + n, fill, len);
	buf[n + (int)at] = (char)c;
	n += (int)len;
	return n + snprintf(buf + n, cap - (size_t)n, "%s", post);
}

/* one(variant, len, at, c) for both variants, every length of lens, every
 * place and every byte but CR and LF (they end the line): 1 when the
 * parse was wrong, 0 when right, -1 for a case left out. The wrong ones;
 * *cases counts the others. */
static int byte_cases(const size_t *lens, size_t nlens, int (*one)(int, size_t, size_t, int), int *cases)
{
	int wrong = 0;

	for (int v = 0; v < 2; v++)
		for (size_t l = 0; l < nlens; l++)
			for (size_t at = 0; at < lens[l]; at++)
				for (int c = 0; c < 256; c++) {
					int r = c == '\r' || c == '\n' ? -1 : one(v, lens[l], at, c);

					if (r >= 0) {
						wrong += r;
						(*cases)++;
					}
				}
	return wrong;
}

/* A header value (variant 1: the value alone, so a short one's check sees
 * the CRLF and the name before it in the same 16 bytes, which must not
 * count): refused exactly when c is a CTL other than HTAB, or DEL; taken,
 * its slice is the value with the SP and HTAB at either end trimmed (and
 * nothing else: obs-text at an end stays). */
static int value_byte(int bare, size_t len, size_t at, int c)
{
	static struct http1_header h[64];
	bool ok = (c >= 0x20 && c != 0x7f) || c == '\t';
	struct http1_msg m;
	char buf[256], want[64];
	int n = byte_request(buf, sizeof(buf), bare ? "GET / HTTP/1.1\r\nHost: a\r\nX-V: "
			     : "GET / HTTP/1.1\r\nHost: a\r\nX-V: <", 'v', len, at, c,
			     bare ? "\r\n\r\n" : ">\r\n\r\n");
	size_t lo = 0, hi = len, wl;
	ssize_t r;

	http1_msg_init(&m);
	r = http1_parse_request(&m, h, buf, (size_t)n, &lim_default);
	if (!ok)
		return r >= 0;
	if (r != n)
		return 1;
	memset(want, 'v', len);
	want[at] = (char)c;
	if (bare) {
		while (lo < hi && (want[lo] == ' ' || want[lo] == '\t'))
			lo++;
		while (hi > lo && (want[hi - 1] == ' ' || want[hi - 1] == '\t'))
			hi--;
	}
	wl = hi - lo + (bare ? 0 : 2);
	return h[1].value.len != wl ||
	       memcmp(h[1].value.p + (bare ? 0 : 1), want + lo, hi - lo) != 0;
}

/* A header name (variant 1: the head goes on for 16 bytes and more after
 * it, so it is read sixteen at a time): tchar taken ('_' flagged),
 * anything else refused. */
static int name_byte(int pad, size_t len, size_t at, int c)
{
	static const char tchar[] = "!#$%&'*+-.^_`|~";
	static struct http1_header h[64];
	bool ok = (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')
		  || (c > 0 && c < 0x80 && strchr(tchar, c) != NULL);
	struct http1_msg m;
	char buf[256];
	int n;
	ssize_t r;

	if (c == ':')
		return -1;      /* it ends the name */
	n = byte_request(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: a\r\n", 'n', len, at, c,
			 pad ? ": v\r\nX-Pad: 0123456789abcdef0123456789\r\n\r\n" : ": v\r\n\r\n");
	http1_msg_init(&m);
	r = http1_parse_request(&m, h, buf, (size_t)n, &lim_default);
	if (!ok)
		return r >= 0;
	return r != n || h[1].name.len != len || (h[1].flags == HTTP1_HDR_UNDERSCORE) != (c == '_');
}

/* A Host value (variant 1: more header lines after it): taken exactly
 * when every byte is a reg-name, IP-literal or port byte (RFC 3986:
 * unreserved, sub-delims, ':', '[', ']', '%'), OWS at either end being
 * trimmed. */
static int host_byte(int more, size_t len, size_t at, int c)
{
	static const char other[] = "-._~!$&'()*+,;=:[]%";
	static struct http1_header h[64];
	bool ows = c == ' ' || c == '\t';
	bool ok = (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')
		  || (c > 0 && c < 0x80 && strchr(other, c) != NULL) || (ows && (at == 0 || at == len - 1));
	struct http1_msg m;
	char buf[256];
	int n = byte_request(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: ", 'h', len, at, c,
			     more ? "\r\nX-Pad: 0123456789abcdef0123456789\r\n\r\n" : "\r\n\r\n");
	ssize_t r;

	http1_msg_init(&m);
	r = http1_parse_request(&m, h, buf, (size_t)n, &lim_default);
	return ok ? r != n : r != -400;
}

/* Every byte at every place of header values and names, and of Host. */
static void test_value_bytes(void)
{
	static const size_t vlens[] = { 1, 2, 15, 16, 17, 31, 32, 33, 48 };
	static const size_t nlens[] = { 1, 2, 15, 16, 17, 31, 33 };
	int cases = 0, wrong = byte_cases(vlens, sizeof(vlens) / sizeof(vlens[0]), value_byte, &cases);

	tap_ok(wrong == 0, "%d header values with each byte at each place: CTLs but HTAB and DEL refused, "
	       "the rest taken (%d wrong)", cases, wrong);
	cases = 0;
	wrong = byte_cases(nlens, sizeof(nlens) / sizeof(nlens[0]), name_byte, &cases);
	tap_ok(wrong == 0, "%d header names with each byte at each place: tchar taken ('_' flagged), "
	       "the rest refused (%d wrong)", cases, wrong);
	cases = 0;
	wrong = byte_cases(vlens, sizeof(vlens) / sizeof(vlens[0]), host_byte, &cases);
	tap_ok(wrong == 0, "%d Host values with each byte at each place: reg-name, IP-literal and port "
	       "bytes taken, the rest 400 (%d wrong)", cases, wrong);
}

/* Content-Length values of 1 to 19 digits with every byte but CR, LF, OWS
 * and ',' (which end, trim or split the value) at every place: taken
 * exactly when every byte is a digit and the number is below 2^63, with
 * that number (the word-wide read of up to eight digits, and the loop). */
static void test_length_bytes(void)
{
	static struct http1_header h[8];
	int wrong = 0, cases = 0;

	for (size_t len = 1; len <= 19; len++)
		for (size_t at = 0; at < len; at++)
			for (int c = 0; c < 256; c++) {
				char digits[24], buf[96];
				struct http1_msg m;
				unsigned long long want;
				bool ok = c >= '0' && c <= '9';
				int n;
				ssize_t r;

				if (c == '\r' || c == '\n' || c == ' ' || c == '\t' || c == ',')
					continue;
				for (size_t i = 0; i < len; i++)
					digits[i] = (char)('1' + (i * 7 + len) % 9);
				digits[at] = (char)c;
				digits[len] = '\0';
				want = ok ? strtoull(digits, NULL, 10) : 0;
				ok = ok && want <= (unsigned long long)INT64_MAX;
				n = snprintf(buf, sizeof(buf), "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: ");
				memcpy(buf + n, digits, len);       /* c may be NUL */
				memcpy(buf + n + (int)len, "\r\n\r\n", 4);
				n += (int)len + 4;
				http1_msg_init(&m);
				r = http1_parse_request(&m, h, buf, (size_t)n, &lim_default);
				cases++;
				wrong += ok ? r != n || m.content_length != want : r != -400;
			}
	tap_ok(wrong == 0, "%d Content-Length values with each byte at each place: digits taken "
	       "with their number, below 2^63, the rest 400 (%d wrong)", cases, wrong);
}

/* Names of two to seven bytes, each one the parser knows with one byte
 * changed to every tchar but '_' (which is flagged), at every place: the
 * flags are those of the known name exactly when the name is still that
 * one, case folded, byte by byte; and every case of each is that name. */
static void test_short_names(void)
{
	static const struct {
		const char *name;
		unsigned flags;
	} known[] = {
		{ "te", HTTP1_HDR_HOP }, { "via", HTTP1_HDR_GENERATED }, { "x-host", HTTP1_HDR_FWD },
		{ "upgrade", HTTP1_HDR_HOP }, { "trailer", HTTP1_HDR_HOP },
	};
	static const char tchar[] = "!#$%&'*+-.^`|~0123456789abcdefghijklmnopqrstuvwxyz"
				    "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
	static struct http1_header h[8];
	int wrong = 0, cases = 0;

	for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++) {
		size_t len = strlen(known[k].name);

		for (size_t at = 0; at < len; at++)
			for (const char *t = tchar; *t; t++) {
				char name[8], buf[64];
				struct http1_msg m;
				int n;
				ssize_t r;

				memcpy(name, known[k].name, len + 1);
				name[at] = *t;
				n = snprintf(buf, sizeof(buf), "GET / HTTP/1.0\r\n%s: v\r\n\r\n", name);
				http1_msg_init(&m);
				r = http1_parse_request(&m, h, buf, (size_t)n, &lim_default);
				cases++;
				wrong += r != n || h[0].flags != (strcasecmp(name, known[k].name) == 0
								  ? known[k].flags : 0u);
			}
	}
	tap_ok(wrong == 0, "%d names of 2 to 7 bytes a byte from a known one: classified as a "
	       "case-folded compare says (%d wrong)", cases, wrong);
}

/* Origin-form targets of every length to 80, made of the pieces that
 * matter to the request line's sixteen-byte scan ('/', '\\', '.', "..",
 * "%2e", "%2f", '?', '#', ';') among letters: parsed in a request, each
 * must give what the byte-wise rules say: the path up to the first '?',
 * the query after it, 400 at a '#' or where http1_path_dots refuses the
 * path, and the path_dots mark where it finds one. */
static void test_targets(void)
{
	static const char *const piece[] = {
		"/", "/", "/", ".", "..", "%2e", "%2E", "%2f", "%5c", "\\", "?", "#", ";",
		"a", "bc", "x_1", "thumbs", "200x200.jpg", "-", "%41",
	};
	static struct http1_header h[8];
	uint64_t x = 88172645463325252u;        /* xorshift64, a fixed seed */
	int cases = 0, wrong = 0, dotted = 0;

	for (int k = 0; k < 40000; k++) {
		char t[128], buf[192];
		size_t len = 1 + (size_t)(k % 80), plen, i = 1;
		const char *q;
		struct http1_msg m;
		ssize_t r;
		int n, dots;

		t[0] = '/';
		while (i < len) {
			const char *pc;
			size_t pl;

			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			pc = piece[x % (sizeof(piece) / sizeof(piece[0]))];
			pl = strlen(pc);
			memcpy(t + i, pc, pl < len - i ? pl : len - i);
			i += pl < len - i ? pl : len - i;
		}
		n = snprintf(buf, sizeof(buf), "GET %.*s HTTP/1.1\r\nHost: a\r\n\r\n", (int)len, t);
		http1_msg_init(&m);
		r = http1_parse_request(&m, h, buf, (size_t)n, &lim_default);
		cases++;
		if (memchr(t, '#', len) != NULL) {
			wrong += r != -400;
			continue;
		}
		q = memchr(t, '?', len);
		plen = q ? (size_t)(q - t) : len;
		dots = http1_path_dots(t, plen);
		if (dots < 0) {
			wrong += r != -400;
			continue;
		}
		dotted += dots == 1;
		if (r != n || m.path.len != plen || memcmp(m.path.p, t, plen) != 0
		    || m.has_query != (q != NULL) || (q && m.query.len != len - plen - 1)
		    || m.path_dots != (dots == 1)) {
			if (wrong++ < 5)
				tap_diag("  target %.*s: r %zd path %.*s dots %d", (int)len, t, r,
					 (int)m.path.len, m.path.p, (int)m.path_dots);
		}
	}
	tap_ok(wrong == 0 && dotted > 1000, "%d origin-form targets of 1 to 80 bytes (%d with a "
	       "dot-segment): path, query, 400 and dot-segment mark as the byte-wise rules say "
	       "(%d wrong)", cases, dotted, wrong);
}

int main(void)
{
	test_value_bytes();
	test_short_names();
	test_length_bytes();
	test_requests();
	test_responses();
	tap_diag("table: %zu request, %zu response, %zu chunked cases", NRQ, NRS, NCK);
	test_chunked();
	test_chunked_limits();
	test_paths();
	test_targets();
	test_chunk_lines();
	test_write_request();
	test_write_response();
	test_response_fields();
	test_write_dropped();
	test_write_table();
	test_simple();
	test_details();
	return tap_done();
}
