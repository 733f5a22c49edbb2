/*
 * request.h -- one request's state and the few functions the client side,
 * the backend side and (next) the cache act on it by. The struct is in
 * request-t.h; only request.c writes its fields.
 *
 * The road of a request, and who calls what:
 *
 *   front.c   req_init (once per connection, with the two sides' ops
 *             tables below), then per parsed head:
 *             req_begin -> req_serve; req_refuse for a head that failed;
 *             req_client_data / req_client_drained on socket events;
 *             req_end when the connection's loop (or a close) ends it.
 *   request.c key (key.c) -> [cache] -> ring walk + eligibility
 *             (balance.c) -> the backend side's start; the proxy's own
 *             replies; retries along the walk.
 *   forward.c req_bind / req_unbind, req_take_body, req_head_sent,
 *             req_want_body, req_response_interim, req_response_head,
 *             req_body, req_send, and one of req_done / req_failed /
 *             req_abort to end its part.
 *
 * Every function runs on the request's worker thread, except req_wake.
 * A request that is answered at once (the proxy's own reply fully written)
 * is REQ_DONE when req_serve returns; one answered later becomes REQ_DONE
 * from an event and tells the connection (its client ops' done). The
 * connection's loop (front_serve) then ends it and parses the next: so
 * pipelined requests are served by a loop, never by recursion.
 */
#ifndef RINGPROXY_REQUEST_H
#define RINGPROXY_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/time.h>

#include "path/request-t.h"

/* How a backend failed a request, for the retry and health decisions. */
enum req_fail {
	REQ_FAIL_CONNECT,       /* no connection: the request never reached
				   the backend */
	REQ_FAIL_LOST,          /* the connection closed or reset after the
				   request went out, before any response
				   byte (counted here: see request.c) */
	REQ_FAIL_TIMEOUT,       /* no response within response_timeout */
	REQ_FAIL_BAD,           /* an invalid response */
	REQ_FAIL_CLIENT,        /* the client's fault (a bad request body) */
	REQ_FAIL_LOCAL,         /* the proxy could not send it (out of
				   memory, a head too large to rewrite):
				   retried like REQ_FAIL_CONNECT, not
				   counted against the backend */
};

/* ---- the two sides, as the request reaches them ------------------------- */

/*
 * The request acts on its client connection and on its backend connection
 * through these two tables, given at req_init, never by the names of the
 * files that own them (front.c's front_req_ops, forward.c's fwd_req_ops):
 * the way HAProxy's stream reaches its connectors. So request.c sits below
 * both sides in the include graph, and a test drives it with fakes.
 */
struct req_client_ops {
	/* Write the pending response bytes: 1 all out, 0 the rest waits for
	 * the socket, -1 the client is gone (then close follows). */
	int (*send)(struct client *c);
	/* Read more of the request body: its taker has what we had. */
	void (*resume)(struct client *c);
	/* The request body was taken to its end. */
	void (*body_taken)(struct client *c);
	/* The request is REQ_DONE (or its last posted wake-up came): the
	 * connection's loop goes on. */
	void (*done)(struct client *c);
	/* Close the connection now, the request with it (req_end). */
	void (*close)(struct client *c);
	/* NULL, or how a backend's final response head (resp, with what f
	 * adds) goes to a client that does not take it in HTTP/1.1 form
	 * (HTTP/2: fields, no head to parse again): 0 taken, and the body
	 * follows in the output queue; -1 it could not be. Its interim
	 * (1xx) responses go to interim. */
	int (*head)(struct client *c, const struct http1_msg *resp, const struct http1_fwd_resp *f);
	/* NULL, or how a backend's interim (1xx) response goes to a client
	 * with a head op (HTTP/2: a HEADERS frame before the final one). */
	void (*interim)(struct client *c, const struct http1_msg *resp);
};

struct req_backend_ops {
	/* Send rq to backend ring index i of rq->snap: 0 under way (the
	 * request hears of it through the functions below), -1 failed at
	 * once (*kind REQ_FAIL_CONNECT or REQ_FAIL_LOCAL, why says how).
	 * The request holds the in-flight slot on i and counts the
	 * backend's health: the backend side does neither. */
	int (*start)(struct request *rq, int i, enum req_fail *kind, char *why, size_t whylen);
	/* Are request bytes still queued for the backend (slices into the
	 * client's buffer, which must not move)? */
	bool (*sending)(const struct upstream *u);
	/* The client has more request body in its buffer. */
	void (*request_body)(struct upstream *u);
	/* The client's output queue drained: relay more of the response. */
	void (*client_drained)(struct upstream *u);
	/* Let go of u: detached from its request (req_unbind) at once, and
	 * closed; asked from inside the backend side's own handling of u,
	 * its memory stays valid until that handling unwinds. */
	void (*close)(struct upstream *u);
};

/* ---- the client side (front.c) ---------------------------------------- */

/* Once per connection: its worker, what the request borrows from it (the
 * read buffer, the output queue, the scratch buffer for response heads,
 * the peer's address; all owned by the connection and valid while it
 * lives) and the two sides' tables (static storage). */
void req_init(struct request *rq, struct worker *w, struct client *c, const struct rbuf *in,
	      struct outq *out, char **scratch, size_t *scratch_cap,
	      const char *ip, size_t iplen,
	      const struct req_client_ops *client, const struct req_backend_ops *backend);
/* The client's address as a PROXY header named it, before any request of
 * the connection began (front.c): ip and iplen as for req_init. */
void req_client_ip(struct request *rq, const char *ip, size_t iplen);
/* The client came over TLS (or its terminator says so): before req_begin. */
void req_client_https(struct request *rq, bool https);
/* The client's TLS for the access log (static strings of OpenSSL's, the
 * SNI the connection's own): NULL version for plain HTTP. */
void req_client_tls(struct request *rq, const char *version, const char *cipher, const char *sni);

/* A head of head_len bytes at in->pos was parsed into rq->msg: take the
 * worker's current snapshot (held until req_end), set up the body's
 * framing and whether the connection closes after the response. rid is
 * the request id. */
void req_begin(struct request *rq, size_t head_len, uint64_t rid);

/* The request is HTTP/2 stream id (h2.c, before req_begin or
 * req_refuse): the access log says so. */
void req_h2_stream(struct request *rq, uint32_t id);

/* Route and answer it: key -> [cache] -> walk -> forward, or the proxy's
 * own reply. May finish before it returns (state REQ_DONE). */
void req_serve(struct request *rq);

/* A head that failed to parse (or came too slowly): answer status with
 * why (for the log; the client gets general words for 5xx) and close
 * after it. rid is the request id. */
void req_refuse(struct request *rq, uint64_t rid, int status, const char *why);

/* More request body arrived in the client's buffer. */
void req_client_data(struct request *rq);

/* The client's output queue drained: the backend side may relay more, or
 * the proxy's own reply is out. */
void req_client_drained(struct request *rq);

/* Offset in the client's buffer before which nothing is needed any more
 * (a request body whose head went out and whose queued slices were
 * written), or 0 when nothing may move; after front.c moved the buffer's
 * bytes down by shift, req_rebase follows. */
size_t req_keep_from(const struct request *rq);
void req_rebase(struct request *rq, size_t shift);

/* Close the connection after this response (the worker drains). */
void req_close_after(struct request *rq);

/* Let go of the request: its backend connection (abandoned if still
 * busy), a failure held back (counted now), its snapshot. Returns false
 * when a wake-up posted to it may still arrive (req_wait): the connection
 * must then keep the struct until req_woken_late() says it may go. */
bool req_end(struct request *rq);

/* ---- the answering side (forward.c, next the cache) --------------------- */

/* The backend connection u now serves rq / no longer does. */
void req_bind(struct request *rq, struct upstream *u);
void req_unbind(struct request *rq);

/* May the request be sent again elsewhere (GET or HEAD, no body, nothing
 * of a response sent yet)? */
bool req_retryable(const struct request *rq);

/* The next slice of request body in the client's buffer, per the
 * request's framing: bytes to send as they are for Content-Length; for a
 * chunked body the data of one chunk (or part of one), its framing
 * consumed and not included, so the caller frames it anew. *n = 0 if no
 * data yet (call again while bytes were consumed). -1 on a malformed
 * chunked body. */
int req_take_body(struct request *rq, const char **p, size_t *n);
/* The head and the body taken so far are written upstream. */
void req_head_sent(struct request *rq);
/* A try of the request is handed to a backend connection at t_us
 * (deadline_clock_us), and the verdict of that backend's own cache on its
 * response (enum tier_verdict, tier.h): for the access log. */
void req_upstream_begin(struct request *rq, int64_t t_us);
void req_tier(struct request *rq, int verdict);
/* The backend took the body we had: read more from the client. */
void req_want_body(struct request *rq);

/* Queue an interim (1xx) response for an HTTP/1.1 client, or hand it to
 * the client's interim op (HTTP/2); dropped for 1.0. */
void req_response_interim(struct request *rq, const struct http1_msg *resp);

/* A final response head is ready: queue it rewritten per fr (fr->close is
 * set here from the request's close_after). 0, or -1 when it does not fit
 * (nothing queued). A request answered otherwise (a 5xx replaced by a
 * stale copy, stale-if-error; a 304 revalidating one) lets go of its
 * backend connection (req_unbind through the backend side's close): the
 * caller sees that on its own connection and stops relaying. */
int req_response_head(struct request *rq, const struct http1_msg *resp, struct http1_fwd_resp *fr);
/* Queue n body bytes (borrowed: unchanged until the queue drains). -1 when
 * the queue is full. */
int req_body(struct request *rq, const void *p, size_t n);
/* Every byte of the backend's response is queued: a fill this request
 * leads is complete (stored, its waiters woken) without waiting for the
 * client to read it. May be called more than once. */
void req_response_end(struct request *rq);
/* Does the client take the response body from the object this request
 * fills (cache_fill_hold), not from the backend's buffer? Then the
 * backend is read at its own pace, not the client's, and its connection
 * is done with once the response has arrived (req_done with bytes still
 * queued: they go out as a hit's would). Of the backend's buffer only the
 * response head (and interim responses before it) may still be queued,
 * until req_head_out. */
bool req_reads_object(const struct request *rq);
bool req_head_out(const struct request *rq);
/* Is a chunked body given to req_body decoded, to be framed again here?
 * (The leader's client of a held chunked fill: req_reads_object, or the
 * relay after its fill was dropped.) */
bool req_rechunks(const struct request *rq);
/* Has the client taken every queued byte? */
bool req_sent_all(const struct request *rq);
/* Room in the client's queue for more slices. */
bool req_body_room(const struct request *rq, int slices);
/* Write what is queued: 1 all out, 0 the rest waits for the client
 * (req_client_drained follows) or the client is gone: then the
 * connection was closed, the request with it, and it let go of its
 * backend connection (req_unbind), which the caller sees on its own. */
int req_send(struct request *rq);

/* The response is complete and the client has all of it, or
 * req_reads_object; the caller has unbound. */
void req_done(struct request *rq);
/* The backend failed before any response byte reached the client: a
 * connect failure or a lost connection is retried on the next distinct
 * backend if the request may be resent; else the client gets status.
 * what says what happened (for the log, with the backend's name). */
void req_failed(struct request *rq, int status, enum req_fail kind, const char *what);
/* The response broke after it started (or the request body did): the
 * client connection is closed, the request with it. */
void req_abort(struct request *rq);

/* ---- waiting for another request's fetch --------------------------------- */

/*
 * Park the request (REQ_WAIT) until req_wake is called, from any thread,
 * or tv passes (the cache's lock_timeout). Either way the wait ends on
 * the worker's thread and the request goes on along the walk to a backend
 * of its own, unless the waker answered it first. The caller (the cache
 * side) arranges that exactly one req_wake may come and says so with
 * wake_due = true; req_end then keeps the struct until it has arrived.
 */
void req_wait(struct request *rq, const struct timeval *tv);
/* Any thread: end rq's wait (posted through the worker's mailbox). */
void req_wake(struct request *rq);

#endif
