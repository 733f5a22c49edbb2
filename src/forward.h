/*
 * forward.h -- the backend side of the request path: pooled keep-alive
 * connections, sending the rewritten request, relaying the response to the
 * client with backpressure. Worker thread only.
 */
#ifndef RINGPROXY_FORWARD_H
#define RINGPROXY_FORWARD_H

#include "worker-t.h"

/* Send request rq to backend ring index i of rq->snap: a pooled
 * connection if one is idle, else a new one. Returns 0 when under way
 * (the request then hears of it through request.h: req_response_head,
 * req_body, req_done, req_failed), -1 when it failed at once (why says
 * how). rq holds the slot on i that balance_next took; it is given back
 * when the request leaves i, or before -1 is returned. Called by
 * request.c only. */
int fwd_start(struct request *rq, int i, char *why, size_t whylen);

/* Is request bytes still queued for the backend (slices into the client's
 * buffer, which must not move)? */
bool fwd_sending(const struct upstream *u);

/* The client has more request body in its buffer. */
void fwd_request_body(struct upstream *u);

/* The client's output queue drained: continue relaying the response. */
void fwd_client_drained(struct upstream *u);

/* Close an upstream: an idle one leaves its pool; an active one is
 * detached from its request (req_unbind; the request is abandoned). */
void fwd_close(struct upstream *u);

#endif
