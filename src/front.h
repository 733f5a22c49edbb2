/*
 * front.h -- the client side of the request path: accept, read and parse
 * requests, pick the backend (key -> ring walk -> eligibility), retries,
 * and the proxy's own replies. Worker thread only, except front_key and
 * front_key_pos which are pure.
 */
#ifndef RINGPROXY_FRONT_H
#define RINGPROXY_FRONT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "http1.h"
#include "worker-t.h"

/* Query parameters sorted for a path+sorted-query key; a query with more
 * is keyed as sent (path+query). */
#define FRONT_MAX_PARAMS 128
/* Pieces of a key at most: path, '?', and parameters with '&' between. */
#define FRONT_KEY_PARTS (2 * FRONT_MAX_PARAMS + 2)

/* The routing key of a request per [ring] key (enum conf_key), as the
 * pieces v[0..n) whose concatenation is the key, n returned: slices of the
 * request buffer, and "?" and "&" between them where the key is not one
 * slice of the target (sorted parameters, or the parser's literal "/" of
 * "http://h?q"). v has room for FRONT_KEY_PARTS. Never fails: a key of any
 * length is hashed whole, as `ringproxy plan --keys` hashes it. Pure. */
size_t front_key(int mode, const struct http1_msg *req, struct iovec *v);
/* The key's position on the ring: MD5 of the whole key (ring_hash_parts
 * of front_key's pieces); in *u (unless NULL) the same digest's second
 * half, the key's place in a warm ramp's window (ring_hash_parts2). Pure. */
uint64_t front_key_pos(int mode, const struct http1_msg *req, uint64_t *u);

/* A new client connection on fd; 0, or -1 (the caller closes fd). */
int front_accept(struct worker *w, int fd, const struct sockaddr_storage *peer);

/* Close the connection now, dropping whatever it was doing. */
void front_close(struct client *c);

/* Write the pending response bytes. Returns 1 when all are out, 0 when the
 * rest waits for the socket (EV_WRITE armed), -1 when the client is gone
 * (then the caller must call front_close). */
int front_flush(struct client *c);

/* May the current request be sent again elsewhere (GET or HEAD, no body,
 * nothing of a response sent yet)? */
bool front_retryable(const struct client *c);

/* From forward.c. */
/* The next slice of request body in the client buffer, per the request's
 * framing: bytes to send as they are for Content-Length; for a chunked
 * body the data of one chunk (or part of one), its framing consumed and
 * not included, so the caller frames it anew. *n = 0 if no data yet (call
 * again while bytes were consumed). Returns -1 on a malformed chunked
 * body. */
int front_take_body(struct client *c, const char **p, size_t *n);
/* Read more of the request (body) once the backend took what we had. */
void front_resume(struct client *c);
/* How a backend failed a request, for the retry and health decisions. */
enum front_fail {
	FRONT_FAIL_CONNECT,     /* no connection: the request never reached
				   the backend (counted by forward.c) */
	FRONT_FAIL_LOST,        /* the connection closed or reset after the
				   request went out, before any response
				   byte (counted here: see front.c) */
	FRONT_FAIL_TIMEOUT,     /* no response within response_timeout */
	FRONT_FAIL_BAD,         /* an invalid response */
	FRONT_FAIL_CLIENT,      /* the client's fault (a bad request body) */
};
/* The backend failed before any response byte reached the client: a
 * connect failure or a lost connection is retried on the next distinct
 * backend if the request may be resent; else the client gets status.
 * what says what happened (for the log, with the backend's name). */
void front_backend_failed(struct client *c, int status, enum front_fail kind, const char *what);
/* The response is complete and flushed; the backend is detached. */
void front_response_done(struct client *c);

#endif
