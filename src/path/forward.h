/*
 * forward.h -- the backend side of the request path: pooled keep-alive
 * connections, sending the rewritten request, relaying the response to the
 * client with backpressure. Worker thread only.
 */
#ifndef RINGPROXY_FORWARD_H
#define RINGPROXY_FORWARD_H

#include "path/request.h"
#include "path/worker-t.h"

/* Close an upstream: an idle one leaves its pool; an active one is
 * detached from its request (req_unbind; the request is abandoned). Its
 * socket and struct go at once, or, asked from inside this file's own
 * handling of it (a request answered otherwise, a client gone while its
 * response is relayed), as that handling unwinds. */
void fwd_close(struct upstream *u);

/* The backend side of a request (request.h), given to req_init: start
 * (send the request to ring index i of rq->snap: a pooled connection if
 * one is idle, else a new one; rq holds the slot on i that balance_next
 * took, given back when the request leaves i, or before -1 is returned),
 * sending, request_body, client_drained and close (fwd_close). */
extern const struct req_backend_ops fwd_req_ops;

#endif
