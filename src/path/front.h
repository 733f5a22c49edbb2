/*
 * front.h -- the client side of the request path: accept, read and parse
 * requests into the connection's request object (request.h), and the loop
 * that serves a connection's requests one after the other. Worker thread
 * only.
 */
#ifndef RINGPROXY_FRONT_H
#define RINGPROXY_FRONT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "path/request.h"
#include "path/worker-t.h"

/* A new client connection on fd; 0, or -1 (the caller closes fd). */
int front_accept(struct worker *w, int fd, const struct sockaddr_storage *peer, unsigned kind);

/* The worker is draining: close the connection if it is idle, else after
 * the response in progress. */
void front_drain(struct client *c);

/* Close the connection now, dropping whatever it was doing. */
void front_close(struct client *c);

/* The connection's side of its request (request.h), given to req_init:
 * request.c acts on its connection only through these. */
extern const struct req_client_ops front_req_ops;

#endif
