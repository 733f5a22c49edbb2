/*
 * front.h -- the client side of the request path: accept, read and parse
 * requests, pick the backend (key -> ring walk -> eligibility), retries,
 * and the proxy's own replies. Worker thread only, except front_key which
 * is pure.
 */
#ifndef RINGPROXY_FRONT_H
#define RINGPROXY_FRONT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "http1.h"
#include "worker-t.h"

/* The routing key of a request per [ring] key (enum conf_key): a slice of
 * the request buffer, or for path+sorted-query a copy with the query's
 * '&'-separated parameters sorted bytewise, written to scratch. Returns 0,
 * or -1 if scratch is too small (the caller then uses path+query). Pure. */
int front_key(int mode, const struct http1_msg *req, char *scratch, size_t len,
	      const char **key, size_t *keylen);

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
/* The backend failed before any response byte reached the client: if
 * retry (the failure says nothing about the request) and the request may
 * be resent, try the next distinct backend; else reply status with why. */
void front_backend_failed(struct client *c, int status, const char *why, bool retry);
/* The response is complete and flushed; the backend is detached. */
void front_response_done(struct client *c);

#endif
