/*
 * http1.h -- ringproxy's HTTP/1.1 codec (RFC 9110, RFC 9112): strict,
 * incremental, allocation-free. Parses request and response heads in place
 * (every field is a slice of the caller's buffer), decides the body framing
 * and connection handling once, walks chunked bodies as they stream, and
 * writes heads back out as an iovec gather of slices plus a few generated
 * lines.
 *
 * Pure: no I/O, no allocation, no globals that change. Any thread may call
 * any function; a struct belongs to the one connection that uses it.
 */
#ifndef RINGPROXY_HTTP1_H
#define RINGPROXY_HTTP1_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* A slice of the parse buffer. Valid while that buffer is unchanged. */
struct http1_str {
	const char *p;
	size_t len;
};

enum http1_method {
	HTTP1_M_OTHER = 0,      /* a valid token we do not know: forwarded */
	HTTP1_M_GET,
	HTTP1_M_HEAD,
	HTTP1_M_POST,
	HTTP1_M_PUT,
	HTTP1_M_DELETE,
	HTTP1_M_OPTIONS,
	HTTP1_M_PATCH,
	HTTP1_M_TRACE,
	HTTP1_M_CONNECT,
};

enum http1_framing {
	HTTP1_BODY_NONE = 0,    /* no body (or a response that cannot have one) */
	HTTP1_BODY_LENGTH,      /* Content-Length: content_length bytes */
	HTTP1_BODY_CHUNKED,     /* Transfer-Encoding ending in chunked */
	HTTP1_BODY_CLOSE,       /* response only: read until the peer closes */
};

/* Header flags, set by the parser. */
#define HTTP1_HDR_HOP      0x01u  /* hop-by-hop: never forwarded */
#define HTTP1_HDR_FRAMING  0x02u  /* Content-Length / Transfer-Encoding:
				     the writer emits its own canonical line */
#define HTTP1_HDR_XFF      0x04u  /* X-Forwarded-For: merged by the writer */
#define HTTP1_HDR_GENERATED 0x08u /* X-Forwarded-Proto, Via: replaced by
				     the writer's own (Via is appended to) */
#define HTTP1_HDR_HOST     0x10u  /* Host (requests) */
#define HTTP1_HDR_DROP     0x40u  /* set by the caller, not the parser:
				     the request writer leaves the line out
				     (the caller sends its own in extra);
				     in a response, the cache does not
				     store it (http1_drop_named) */
#define HTTP1_HDR_FWD      0x80u  /* requests: a forwarding header a
				     client can set (Forwarded,
				     X-Forwarded-Host, -Port, X-Original-URL,
				     ...: see http1.c); dropped when the
				     writer is told to (drop_fwd) */
#define HTTP1_HDR_UNDERSCORE 0x20u /* a '_' in the name: dropped from
				     forwarded requests unless asked to keep
				     (servers that map headers to variables
				     treat '_' and '-' alike: X_User can pose
				     as X-User behind the proxy) */

struct http1_header {
	struct http1_str name;
	struct http1_str value;     /* leading/trailing OWS trimmed */
	unsigned flags;
};

struct http1_limits {
	size_t max_head;            /* bytes of request/status line + headers,
				       final CRLF included; over it: 431 */
	unsigned max_headers;       /* header lines; over it: 431 */
};

/* One parsed message head. Zero it with http1_msg_init() before the first
 * parse call of each message; keep it across "need more" calls so the
 * parser resumes its scan where it stopped. */
struct http1_msg {
	/* request line */
	struct http1_str method;
	enum http1_method method_id;
	struct http1_str target;    /* exactly as sent */
	struct http1_str authority; /* absolute-form: host[:port] of the
				       target (it replaces Host when the
				       request is forwarded); len 0 otherwise */
	struct http1_str path;      /* origin-form path ("/a/b"); for
				       absolute-form the path part (host is
				       ignored); "*" for asterisk-form */
	struct http1_str query;     /* after '?', '?' excluded */
	bool has_query;             /* a '?' was present (query may be "") */
	bool path_dots;             /* path has dot-segments: the writer
				       sends it through http1_path_clean */

	/* status line (responses) */
	int status;
	struct http1_str reason;

	int minor;                  /* HTTP/1.minor: 0 or 1 */

	struct http1_header *headers; /* the caller's array (see parse) */
	unsigned nheaders;

	/* decided once for the proxy */
	enum http1_framing framing;
	uint64_t content_length;    /* when framing == HTTP1_BODY_LENGTH */
	bool keep_alive;            /* the connection may carry another message
				       after this one (version + Connection) */
	bool expect_continue;       /* request: Expect: 100-continue */
	bool upgrade;               /* Connection: upgrade + Upgrade present */
	struct http1_str host;      /* Host header value (requests), len 0 if none */

	size_t head_len;            /* bytes of the head, once complete */
	const char *error;          /* static text describing a parse error */

	size_t scan_;               /* private: resume point of the head scan */
	size_t line_;               /* private: start of the line being scanned */
	size_t start_;              /* private: first byte after leading CRLFs */
};

void http1_msg_init(struct http1_msg *m);

/*
 * Parse a request head at buf[0..len). hdrs is the caller's array with room
 * for lim->max_headers entries; m->headers points to it afterwards.
 * Returns the head length (> 0) once the head is complete and valid,
 * 0 if more bytes are needed, or a negative HTTP status for an invalid
 * request: -400, -405 (CONNECT / authority-form), -431 (head too large,
 * too many headers), -501 (codings before chunked, as "gzip, chunked": we
 * decode none; a last coding other than chunked is -400), -505 (version
 * other than 1.0/1.1). m->error then says why. Bare LF line ends are -400,
 * so are a Content-Length above HTTP1_MAX_LENGTH and a path whose
 * dot-segments are ambiguous (http1_path_dots); empty lines before the
 * request line are skipped (see http1.c).
 * Slices point into buf, except path "/" for "http://host" (a literal).
 * Bytes after the head (body, pipelined requests) are not looked at.
 */
ssize_t http1_parse_request(struct http1_msg *m, struct http1_header *hdrs,
			    const char *buf, size_t len,
			    const struct http1_limits *lim);

/*
 * Parse a response head. method_id is the request's method: a response to
 * HEAD, and any 1xx, 204 or 304, has no body whatever its headers say
 * (the Content-Length of a 1xx or 204 stays flagged, so the writer drops
 * it). Returns > 0 (head length), 0 (need more) or -502 for an invalid
 * response (m->error says why), among them a body in a transfer coding
 * other than chunked, chunked in HTTP/1.0, or a Content-Length above
 * HTTP1_MAX_LENGTH.
 */
ssize_t http1_parse_response(struct http1_msg *m, struct http1_header *hdrs,
			     const char *buf, size_t len,
			     const struct http1_limits *lim,
			     enum http1_method method_id);

/* Chunked body walker (RFC 9112 section 7.1), streaming: state survives
 * between calls, any split of the input gives the same result. */
struct http1_chunked {
	int state;
	uint64_t left;              /* bytes left in the current chunk data */
	unsigned ndigits;
	bool done;                  /* the last chunk and trailers were seen */
	size_t trailer_bytes;       /* bounded: trailers over max -> error */
	size_t max_trailer;         /* set by init (HTTP1_MAX_TRAILER); the
				       caller may change it before use */
	size_t ext_bytes;           /* chunk-ext bytes of the current chunk,
				       bounded by HTTP1_MAX_CHUNK_EXT */
	const char *error;
};

/* The largest Content-Length and chunk size accepted: 2^63-1. Larger
 * values are refused (400 in a request, 502 in a response), not relayed. */
#define HTTP1_MAX_LENGTH ((uint64_t)INT64_MAX)

#define HTTP1_MAX_TRAILER   8192u  /* default trailer section bound */
#define HTTP1_MAX_CHUNK_EXT 1024u  /* chunk extensions of one chunk */

void http1_chunked_init(struct http1_chunked *c);

/* Pass-through: how many bytes of buf[0..len) belong to this chunked body
 * (framing included), to be relayed unchanged. Stops at the end of the
 * message (c->done), leaving later bytes (a pipelined message) alone.
 * Returns that count, or -1 on a framing error (c->error). */
ssize_t http1_chunked_scan(struct http1_chunked *c, const char *buf, size_t len);

/* Decoding: consumes bytes from buf[0..len) up to and including at most one
 * run of chunk data and reports that run as buf[*data_off .. +*data_len)
 * (*data_len = 0 when the consumed bytes were framing only). Returns the
 * bytes consumed (0 = need more), or -1 on a framing error. */
ssize_t http1_chunked_decode(struct http1_chunked *c, const char *buf,
			     size_t len, size_t *data_off, size_t *data_len);

/* The longest line http1_chunk_line writes: CRLF, 16 hex digits, CRLF. */
#define HTTP1_CHUNK_LINE_MAX 20

/*
 * Re-framing a chunked body: the line that goes before size bytes of chunk
 * data, "HEX\r\n" in lowercase without leading zeros, preceded by the
 * "\r\n" that ends the previous chunk's data when close_prev. size 0 is
 * the last-chunk line ("0\r\n"; the caller adds the final CRLF, sending
 * no trailers). Writes at most HTTP1_CHUNK_LINE_MAX bytes to out, returns
 * how many. Pure.
 */
size_t http1_chunk_line(char *out, uint64_t size, bool close_prev);

/* What the proxy adds to a request head it forwards. */
struct http1_fwd_req {
	struct http1_str prefix;    /* backend URL path prefix, "" for none;
				       no trailing '/' */
	struct http1_str client_ip; /* appended to X-Forwarded-For */
	struct http1_str proto;     /* X-Forwarded-Proto value, e.g. "http" */
	struct http1_str via;       /* Via entry, e.g. "1.1 ringproxy" */
	struct http1_str default_host; /* Host sent when the client sent none
					  (HTTP/1.0); may be empty */
	bool keep_underscores;      /* forward header names with '_' too */
	struct http1_str extra;     /* more header lines of ours, each ending
				       in CRLF (a revalidation's
				       If-None-Match); len 0: none */
	bool drop_fwd;              /* leave out HTTP1_HDR_FWD headers: the
				       answer may be stored under a key
				       they are not part of */
};

/* What the proxy adds to a response head it relays. */
struct http1_fwd_resp {
	struct http1_str backend_hdr;  /* e.g. "X-Ringproxy-Backend"; len 0: none;
					  the response's own header of that
					  name is dropped */
	struct http1_str backend_name;
	struct http1_str via;
	bool close;                 /* announce Connection: close */
	bool keep_alive_10;         /* HTTP/1.0 client kept alive: announce
				       Connection: keep-alive */
	bool dechunk;               /* body will be sent decoded until close:
				       no Transfer-Encoding line */
	struct http1_str extra;     /* more header lines of ours, each ending
				       in CRLF (Cache-Status), after the
				       response's own; len 0: none */
};

/*
 * Writers: fill iov[0..iovmax) with the head, slices of the parsed buffer
 * interleaved with generated bytes placed in scratch[0..scratchlen).
 * Hop-by-hop and framing headers of m are dropped; the writer emits one
 * canonical framing line (Content-Length: N or Transfer-Encoding: chunked).
 * The request line is always "METHOD PREFIX+PATH[?QUERY] HTTP/1.1"; the
 * status line "HTTP/1.1 STATUS REASON". Returns the iov count, or -1 when
 * iov or scratch is too small.
 */
int http1_write_request(const struct http1_msg *m, const struct http1_fwd_req *f,
			struct iovec *iov, int iovmax, char *scratch,
			size_t scratchlen);
int http1_write_response(const struct http1_msg *m, const struct http1_fwd_resp *f,
			 struct iovec *iov, int iovmax, char *scratch,
			 size_t scratchlen);

/*
 * The request target http1_write_request sends for m to a backend whose
 * URL path prefix is prefix ("" for none): PREFIX+PATH[?QUERY], the
 * path's dot-segments removed first (http1_path_clean), so the prefix
 * confines it. Written NUL-terminated to out; returns its length, or -1
 * when it does not fit in outlen. For the requests the proxy makes of
 * its own (a background refresh, a purge), so they ask a backend for what
 * the request path would. Pure.
 */
ssize_t http1_write_target(const struct http1_msg *m, struct http1_str prefix, char *out, size_t outlen);

/* A complete small response generated by the proxy itself (errors, 100
 * Continue excluded): status line, Content-Type: text/plain, Content-Length,
 * Connection: close when close, extra (already CRLF-terminated header lines
 * or ""), then body. Returns bytes written to out, or -1 if it does not fit. */
ssize_t http1_write_simple(char *out, size_t outlen, int status, bool close,
			   const char *extra, const char *body, size_t bodylen);

/* Reason phrase for a status code ("Bad Gateway"), "Unknown" if none. */
const char *http1_reason(int status);

/* Flag every header of m named name (any case; len 0: none)
 * HTTP1_HDR_DROP: a backend's own header of the name of ours is neither
 * stored by the cache nor, through f->backend_hdr, relayed. Pure. */
void http1_drop_named(struct http1_msg *m, struct http1_str name);

/* Case-insensitive compare of a slice with a NUL-terminated lowercase
 * literal. */
static inline bool http1_str_ieq(struct http1_str s, const char *lower)
{
	size_t i;

	/* inline: the cache's rules look up header and directive names
	 * this way many times a request, and most differ in byte one */
	for (i = 0; i < s.len; i++) {
		unsigned char c = (unsigned char)s.p[i];

		if (c >= 'A' && c <= 'Z')
			c |= 0x20;
		if (lower[i] == '\0' || c != (unsigned char)lower[i])
			return false;
	}
	return lower[i] == '\0';
}

/*
 * Dot-segments of a request path (RFC 3986 3.3): "." and "..", also
 * written %2e / %2E. Between '/' they are removed by http1_path_clean
 * before the path is forwarded, so a backend URL's prefix confines every
 * path. One that an encoded slash (%2f), a backslash (raw or %5c) or a
 * path parameter (";") delimits is ambiguous -- some backends decode or
 * split there and then climb, others do not -- and the request is refused.
 * Returns 0 when path[0..len) has no dot-segment, 1 when it has only
 * removable ones, -1 when it is to be refused. Pure.
 */
int http1_path_dots(const char *path, size_t len);

/*
 * remove_dot_segments (RFC 3986 5.2.4) of a path that starts with '/' and
 * for which http1_path_dots did not return -1, with %2e read as '.':
 * writes the result to out (room for len bytes: it is never longer) and
 * returns its length. The result starts with '/' and never climbs above
 * the root: "/a/./../../b" -> "/b", "/%2e%2e/x" -> "/x", "/a/.." -> "/".
 * Other bytes, %2e in names included, are copied as they are. Pure.
 */
size_t http1_path_clean(const char *path, size_t len, char *out);

/* "00" .. "99", two bytes each: the digits of v % 100 at 2 * (v % 100). */
extern const char http1_digits2[201];

/* v in decimal at p, which has room for 20 bytes; returns the end. No
 * printf: a hit's head and the access log write their numbers with it. */
char *http1_dec_u64(char *p, uint64_t v);

/* v in decimal, '-' first when negative; room for 20 bytes. */
char *http1_dec_i64(char *p, int64_t v);

#endif
