/*
 * http1-t.h -- the codec's types (http1.h has its functions): a parsed head
 * and its slices, the parse limits, the chunked walker's state. Shared by
 * every module that holds a head or a body in progress.
 */
#ifndef RINGPROXY_HTTP1_T_H
#define RINGPROXY_HTTP1_T_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
				     in a response, neither the cache nor
				     the response writer keeps it
				     (http1_drop_named) */
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

/* In http1_msg.seen only, never on a header: a header named Age,
 * X-Cache, X-Varnish or Cache-Status, those the cache tier's verdict is
 * read from (tier.c), is among them. */
#define HTTP1_SEEN_TIER    0x100u

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

	struct http1_str line;      /* the start line as received, its CRLF
				       included (len 0: none): a writer sends
				       it as it is when it would write the
				       same bytes */
	unsigned seen;              /* every flag the parser set on a header
				       (HTTP1_HDR_*, never HTTP1_HDR_DROP), and
				       HTTP1_SEEN_TIER: a flag not in it is on
				       no header, and a writer (or tier.c)
				       skips the walk that looks for it */

	size_t head_len;            /* bytes of the head, once complete */
	const char *error;          /* static text describing a parse error */

	size_t scan_;               /* private: resume point of the head scan */
	size_t line_;               /* private: start of the line being scanned */
	size_t start_;              /* private: first byte after leading CRLFs */
};

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

/* The longest line http1_chunk_line writes: CRLF, 16 hex digits, CRLF. */
#define HTTP1_CHUNK_LINE_MAX 20

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
	struct http1_str query;     /* p not NULL: sent after a '?' instead
				       of m's query ([ring] normalize_forward
				       off: the query as received) */
	bool host_fixed;            /* default_host sent in place of the
				       client's Host ([proxy] backend_host,
				       [backend] host) */
};

/* A field of a relayed response as another protocol's writer takes it
 * (HTTP/2): slices of the parsed buffer, of f's strings, or of the
 * caller's scratch (http1_response_fields). */
struct http1_field {
	struct http1_str name;
	struct http1_str value;
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

#endif
