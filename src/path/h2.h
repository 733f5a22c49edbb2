/*
 * h2.h -- HTTP/2 on the client side (RFC 9113), on a connection the
 * client side (front.c) or the TLS layer hands over: an nghttp2 server
 * session driven from the worker's event loop on the connection's own
 * socket, each stream served as a request (request.h) like an HTTP/1.1
 * one. Worker thread only.
 */
#ifndef RINGPROXY_H2_H
#define RINGPROXY_H2_H

#include <stdbool.h>
#include <stddef.h>

#include "path/worker-t.h"

struct ssl_st;

/* The HTTP/2 client preface's first line: a connection whose first bytes
 * are these is HTTP/2 with prior knowledge (RFC 9113 3.3). */
#define H2_PREFACE_LINE "PRI * HTTP/2.0\r\n"
#define H2_PREFACE_LINE_LEN 16

/*
 * Serve client connection c as HTTP/2 from now on: its socket fd, ssl the
 * TLS session over it (NULL: cleartext), peer the client's address (text,
 * as the access log and X-Forwarded-For take it) and data[0..n) the bytes
 * already read from it (the preface, and whatever followed), which h2
 * copies. c keeps its place in the worker's lists and counts; its events
 * and timer are h2's from here on, its lent memory (c->mem) must be given
 * back by the caller after a successful return. 0, or -1 (out of memory:
 * the caller closes c as before).
 */
int h2_start(struct client *c, int fd, struct ssl_st *ssl, const char *peer, const void *data, size_t n);

/* The worker drains (a stop, a listener change): GOAWAY with the last
 * stream id; the open streams finish, then the connection closes. */
void h2_drain(struct client *c);

/* Close the connection now, its requests with it. */
void h2_close(struct client *c);

#endif
