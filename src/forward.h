/*
 * forward.h -- the backend side of the request path: pooled keep-alive
 * connections, sending the rewritten request, relaying the response to the
 * client with backpressure. Worker thread only.
 */
#ifndef RINGPROXY_FORWARD_H
#define RINGPROXY_FORWARD_H

#include "worker-t.h"

/* Send client c's current request to backend ring index i of c->snap:
 * a pooled connection if one is idle, else a new one. Returns 0 when
 * under way (failures are then reported through front_backend_failed),
 * -1 when it failed at once (why says how). c holds the slot on i that
 * balance_next took; it is given back when the request leaves i, or
 * before -1 is returned. */
int fwd_start(struct client *c, int i, char *why, size_t whylen);

/* The client has more request body in its buffer. */
void fwd_request_body(struct upstream *u);

/* The client's output queue drained: continue relaying the response. */
void fwd_client_drained(struct upstream *u);

/* Close an upstream: an idle one leaves its pool; an active one is
 * detached from its client (the request is abandoned). */
void fwd_close(struct upstream *u);

#endif
