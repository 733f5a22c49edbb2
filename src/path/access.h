/*
 * access.h -- the access log ([log] access, access_format): one line per
 * request, formatted by its worker into the worker's own buffer and
 * written when the buffer is full or ACCESS_FLUSH_MS after its first
 * line, so a request costs no syscall and a slow disk never holds one up.
 */
#ifndef RINGPROXY_ACCESS_H
#define RINGPROXY_ACCESS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <stdbool.h>
#include <sys/time.h>

#include "path/access-t.h"
#include "http/http1.h"

struct access_fields;
struct event_base;

#define ACCESS_FLUSH_MS 100
#define ACCESS_BUF (64 * 1024)

/* Main thread: open (or, on a reload, switch to) spec: "off", "stderr",
 * a file path, appended to, or a syslog target (addr_syslog). dropped is where lines that could not be
 * written are counted (the proxy's access_log_dropped). 0, or -1 with
 * err (the previous log stays). */
int access_open(const char *spec, _Atomic uint64_t *dropped, char *err, size_t len);
/* Main thread (SIGUSR1): open the file's path again (after a rename, a
 * new file). 1 reopened, 0 nothing to reopen (off, stderr), -1 err. */
int access_reopen(char *err, size_t len);
/* The file path, or NULL when the log is off or on stderr. */
const char *access_path(void);
/* Main thread, at the end: close it. */
void access_close(void);

/* A worker's buffer b, whose flush timer runs on base: set up (main
 * thread, before the worker starts), flushed and freed (after its last
 * request). The log knows nothing of the worker but these two. */
void access_buf_init(struct access_buf *b, struct event_base *base);
void access_buf_free(struct access_buf *b);

/* Worker thread: is the log on? A request fills a line's fields only
 * then (a relaxed load). */
bool access_wanted(void);
/* Worker thread: does a request ringproxy's cache answered get a line in
 * b, per [log] access_hits read as every (1 all, 0 none, N one in N,
 * counted in b)? */
bool access_hit_wanted(struct access_buf *b, unsigned every);

/* Worker thread: log, into its worker's buffer b, the request of f (log,
 * ip, iplen, minor and dur_us set) that just ended: it began at t_begin
 * (worker_now_us), and head is its parsed head (Referer, User-Agent; not
 * read when f->log.line_copied); json: the line as JSON, else combined. */
void access_log(struct access_buf *b, bool json, struct access_fields *f,
		const struct http1_msg *head, int64_t t_begin);

/* ---- the line (pure but for the buffer's flush; unit-tested) ------------ */

/* Bytes of each field a line holds at most (longer ones are cut). */
#define ACCESS_IP_BUF 48                /* the client's address buffer */
#define ACCESS_METHOD_MAX 32
#define ACCESS_TARGET_MAX 1024
#define ACCESS_HDR_MAX 256              /* Referer, User-Agent */
#define ACCESS_NAME_MAX 128             /* the backend's name */
/* The longest line: those fields escaped (6 bytes a byte at worst, JSON's
 * \u00HH), the fixed text and numbers, and the few bytes a formatter may
 * write past its end. A line is formatted only when this much is free. */
#define ACCESS_TLS_MAX 64               /* a TLS version's or cipher's name */
#define ACCESS_SNI_MAX 255
#define ACCESS_LINE_MAX (6 * (ACCESS_IP_BUF + ACCESS_METHOD_MAX + ACCESS_TARGET_MAX + \
			      2 * ACCESS_HDR_MAX + ACCESS_NAME_MAX + 2 * ACCESS_TLS_MAX + ACCESS_SNI_MAX) + 600)

/* What a request says of itself in its line (request.c fills it as the
 * request ends). */
struct access_req {
	struct http1_str method, target;
	int status;                     /* 499: the client left before any
					   response, as NGINX logs it */
	uint64_t bytes;                 /* sent to the client, head included */
	const char *backend;            /* the backend that answered, NULL if
					   none did (a cache hit, our reply) */
	const char *cache;              /* hit, collapsed, miss, request,
					   bypass, or "-" (no cache) */
	const char *why;                /* owner, replica, spill, failover, ramp, retry,
					   cache, or "-" (no backend) */
	int64_t upstream_us;            /* from its last try handed to a
					   backend to the end; -1: none */
	const char *tier;               /* the backend's cache: hit, miss,
					   or "-" (no verdict, no backend) */
	char rid[24];                   /* the request id */
	bool line_copied;               /* method and target are a copy: the
					   head's other bytes may be gone */
};
/* What a line says: a plain record, filled by the request path (request.c)
 * or a test; access_log adds the stamp and the head's two headers. */
struct access_fields {
	struct access_req log;          /* the request's part */
	const char *ip;                 /* the client's address: a buffer of
					   ACCESS_IP_BUF bytes, iplen used */
	size_t iplen;
	int minor;                      /* HTTP/1.minor */
	uint32_t h2_stream;             /* HTTP/2: its stream id; 0: HTTP/1.x */
	struct http1_str referer, user_agent;   /* len 0: "-" / "" */
	int64_t dur_us;
	/* an HTTPS request's TLS (NULL for plain HTTP): the version and
	 * cipher OpenSSL names, and the SNI (NULL: none sent) */
	const char *tls_version, *tls_cipher, *sni;
	struct timeval now;             /* wall clock, for the stamp */
};

/*
 * s[0..n) (at most max bytes of it) as quoted text: '"', '\\', control
 * bytes and bytes >= 0x7f escaped, as \xHH in combined (as NGINX does) or
 * \" \\ \u00HH in JSON; "-" for an empty field in combined. Writes at p,
 * which must have 6 x min(n, max) + 16 bytes of room; returns the end.
 */
char *access_escape(char *p, const char *s, size_t n, size_t max, bool json);
/* One line of f at p (ACCESS_LINE_MAX bytes of room), with b's stamps of
 * the second (remade when the second changed); returns its end. */
char *access_format(char *p, struct access_buf *b, const struct access_fields *f, bool json);
/* Append f's line to b, writing b out first when the line might not fit
 * (its data is allocated on the first line). false: no memory, no line. */
bool access_append(struct access_buf *b, const struct access_fields *f, bool json);
/* Write b out now; the lines that could not be written are counted as
 * dropped. */
void access_buf_flush(struct access_buf *b);

#endif
