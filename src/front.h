/*
 * front.h -- the client side of the request path: accept, read and parse
 * requests into the connection's request object (request.h), the routing
 * key, and the loop that serves a connection's requests one after the
 * other. Worker thread only, except front_key and front_key_pos which are
 * pure.
 */
#ifndef RINGPROXY_FRONT_H
#define RINGPROXY_FRONT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "http1.h"
#include "snapshot.h"
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
/* The key's position on a ring of scheme (enum ring_scheme): the
 * scheme's hash of the whole key (ring_key_pos of front_key's pieces); in
 * *u (unless NULL) MD5's second half, the key's place in a warm ramp's
 * window (ring_hash_parts2). Pure. */
uint64_t front_key_pos(int scheme, int mode, const struct http1_msg *req, uint64_t *u);
/* While snapshot s has a warm ramp: ramp_pos[i] (balance_start set every
 * one to the key's position on s's ring) becomes the key's position in
 * the ring of each step i whose ring a reload made under another [ring]
 * scheme or key, for ring_ramp_owner_at. Without a ramp, nothing. Pure. */
void front_key_ramp(const struct snapshot *s, const struct http1_msg *req, uint64_t *ramp_pos);

/* A new client connection on fd; 0, or -1 (the caller closes fd). */
int front_accept(struct worker *w, int fd, const struct sockaddr_storage *peer);

/* The worker is draining: close the connection if it is idle, else after
 * the response in progress. */
void front_drain(struct client *c);

/* Close the connection now, dropping whatever it was doing. */
void front_close(struct client *c);

/* The connection's side of its request, for request.c (the request acts
 * on its connection only through these). */
struct worker *front_worker(const struct client *c);
/* Write the pending response bytes. Returns 1 when all are out, 0 when the
 * rest waits for the socket (EV_WRITE armed), -1 when the client is gone
 * (then the caller must call front_close). */
int front_send(struct client *c);
/* Read more of the request (body) once its taker has what we had. */
void front_resume(struct client *c);
/* The request body was taken to its end: the client timer stops watching
 * the upload. */
void front_body_taken(struct client *c);
/* The request is REQ_DONE (or, after the connection closed, its last
 * posted wake-up came): the connection's loop goes on. */
void front_request_done(struct client *c);

#endif
