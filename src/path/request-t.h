/*
 * request-t.h -- one request's state (HAProxy calls it a stream), shared by
 * the client side (front.c: creates it for each parsed head and ends it),
 * request.c (its functions, the only writers of these fields) and the
 * sides that answer it (forward.c now, the cache next), which read it and
 * act on it only through request.h. It lives inside its client
 * connection: a connection serves one request at a time, so the struct is
 * reused from one request to the next. Worker thread only, except
 * wake (posted from any thread, see req_wait).
 */
#ifndef RINGPROXY_REQUEST_T_H
#define RINGPROXY_REQUEST_T_H

#include <event2/event_struct.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/balance-t.h"
#include "cache/cache-t.h"
#include "http/cachectl-t.h"
#include "path/conn-t.h"
#include "http/http1-t.h"
#include "base/mbox-t.h"
#include "http/query-t.h"
#include "ring/ring-t.h"

struct client;
struct upstream;
struct req_client_ops;
struct req_backend_ops;
struct worker;
struct snapshot;

enum req_state {
	REQ_IDLE,               /* none: the connection waits for a head */
	REQ_ROUTE,              /* walking the ring for a backend */
	REQ_BACKEND,            /* a backend connection answers it */
	REQ_WAIT,               /* waiting for another request's fetch of
				   the same object: a posted wake-up or
				   its timer ends the wait (req_wait) */
	REQ_REPLY,              /* the proxy's own response is going out */
	REQ_DONE,               /* answered and flushed: the connection's
				   loop ends it and takes the next */
};

/* What happened to a request in the end (the log and the next issue's
 * Cache-Status draw on it). */
enum req_end {
	REQ_END_NONE,
	REQ_END_BACKEND,        /* a backend's response was relayed */
	REQ_END_REPLY,          /* the proxy answered (an error, a 503) */
	REQ_END_CACHE,          /* answered from a cached object */
	REQ_END_ABORT,          /* the connection closed under it */
};

struct request {
	struct client *cl;              /* the connection it came on */
	struct worker *w;
	const struct req_client_ops *client;    /* how it acts on cl */
	const struct req_backend_ops *backend;  /* how it acts on up */
	enum req_state state;
	enum req_end end_kind;
	uint64_t rid;                   /* request id: the worker's count */
	int64_t t_begin;                /* worker_now_us at its head */
	/* for the access log */
	int status;                     /* of the response, 0 = none yet */
	uint32_t h2_stream;             /* its HTTP/2 stream id; 0: HTTP/1.x
					   (in the hole before out_sent0) */
	uint64_t out_sent0;             /* out->sent at its start */
	const char *route;              /* why its backend: "owner", "replica",
					   "spill", "failover", "ramp", "retry" */
	uint16_t line_mlen, line_tlen;  /* of line */
	bool line_copied;               /* line holds them */

	/* the head, parsed in place in the client's read buffer (front.c
	 * parses into msg with http1.c); hdrs is the connection's array */
	struct http1_msg msg;
	struct query_sent qsent;        /* msg's target as received, when
					   [ring] query or drop_params
					   rewrote it into qbuf */
	const struct rbuf *in;          /* the client's read buffer */
	struct outq *out;               /* the client's output queue: the
					   response is queued here, front.c
					   writes it to the socket */
	const char *ip;                 /* the client's address, for
					   X-Forwarded-For and the log */
	size_t iplen;
	bool https;                     /* the client came over TLS (ours, or
					   a terminator's PROXY v2 SSL TLV):
					   X-Forwarded-Proto says so */
	const char *tls_version;        /* over our TLS: its version, cipher */
	const char *tls_cipher;         /* and SNI for the access log (NULL:
					   plain, or no SNI) */
	const char *sni;
	size_t body_end;                /* in->pos + head + body taken so far */
	uint64_t body_left;             /* HTTP1_BODY_LENGTH */
	struct http1_chunked chunk;     /* HTTP1_BODY_CHUNKED */

	/* routing: the snapshot it started with, held to its end */
	struct snapshot *snap;
	uint64_t keypos;                /* the key's position on the ring */
	unsigned tries;                 /* backends tried */
	int cur;                        /* ring index of the current backend */
	bool slot;                      /* it holds an in-flight slot on cur
					   (balance_next took it): given back
					   when it leaves cur (req_leave) */
	int lost;                       /* ring index of a backend that lost
					   the request (counted against its
					   health unless a second one loses it
					   too), -1 if none */
	struct upstream *up;            /* the backend connection serving it
					   (forward.c's, opaque here) */

	/* progress */
	bool head_sent;                 /* the head is fully written upstream */
	bool body_done;                 /* the request body is fully taken */
	bool resp_started;              /* any response byte queued for the
					   client */
	bool close_after;               /* the connection closes after this
					   response */

	/* the hot-object cache's part (cache.h); the cache itself is the
	 * process's (proxy.c) */
	struct cachectl_req cc;         /* what the cache may do for it */
	struct cache_fill *fill;        /* the fetch this request leads, NULL
					   if none: ended by req_done (stored)
					   or req_end (aborted) */
	struct cache_obj *obj;          /* the object being sent (a reference,
					   released by req_end): a stored one,
					   or the one this request fills
					   (from_fill) */
	unsigned memo_slot;             /* obj is borrowed from the worker's
					   memo (cache.h): its slot + 1; 0:
					   obj is a reference */
	bool from_fill;                 /* the client gets the response body
					   from obj as the fill copies it there,
					   not from the backend's buffer */
	bool rechunk;                   /* the client's copy of a chunked body
					   is decoded and framed here: one
					   chunk of the object's bytes at a
					   time (req_fill_pump), then the
					   last-chunk */
	bool body_in;                   /* the backend's body is complete */
	bool last_chunk;                /* the last-chunk is queued */
	size_t fill_queued;             /* (rechunk) bytes of obj's body queued */
	unsigned chunk_line_i;          /* chunk_line in use last */
	uint64_t fill_head_end;         /* out->sent once the response head
					   (which points into the backend's
					   buffer) is written (req_head_out) */
	const char *cache_fwd;          /* Cache-Status fwd= of a forwarded
					   response, NULL: no Cache-Status */
	bool shared;                    /* the cache may serve or store its
					   answer: the client's forwarding
					   headers are not forwarded */
	struct cache_key inval;         /* an unsafe method's URL key as it
					   started (its head may be gone by
					   the response): hash and length
					   only, p NULL; len 0: none */
	uint8_t inval_host_len;         /* of inval_base: its key's host */
	uint8_t inval_path_len;         /* 0: none (did not fit) */
	bool collapsed;                 /* it waited for another's fetch */
	struct cache_obj *stale;        /* the expired object it found (a
					   reference): answers instead of a
					   backend failure (stale-if-error) */
	int64_t sent_at;                /* when it went to the backend */
	int64_t up_t0;                  /* its last try handed to a backend
					   connection (deadline_clock_us), 0:
					   none; the access log's upstream time */
	uint8_t tier;                   /* that backend's cache's verdict on
					   the response (enum tier_verdict) */
	size_t cond_len;                /* 0: not revalidating */
	size_t ae_len;                  /* the variant's lines (Accept-Encoding,
					   Accept) after cond[cond_len]; 0:
					   none */

	/* waiting for another request's fetch (REQ_WAIT) */
	struct cache_waiter waiter;     /* attached to the fetch (cache.h) */
	struct cache_obj *woke_obj;     /* what the wake-up brought: written by
					   the waking thread before it posts */
	struct mbox_msg wake;           /* posted to end the wait */
	bool wake_due;                  /* a posted wake may still come: the
					   struct must outlive it */

	char **scratch;                 /* generated bytes of a response head:
					   the connection's buffer, lent (a
					   reload may grow it) */
	size_t *scratch_cap;

	/* last, and not zeroed by req_init: each is written before it is
	 * read, or read only through a length or flag above; a memset of
	 * them on every lend of a connection's memory cost ~550
	 * instructions a request for qbuf's 4 KiB, ~330 for the rest, and
	 * ~100 for the walk, the pick and the timer, which req_route
	 * (balance_start) and req_wait (evtimer_assign) set in full */
	struct ring_walk walk;          /* (routing) along the ring from keypos */
	struct balance_pick pick;
	struct event wait_ev;           /* lock_timeout (REQ_WAIT) */
	char line[256];                 /* a request with a body: its method
					   and target, copied (the body's bytes
					   may move the head's out of the read
					   buffer); line_copied says so */
	char chunk_line[2][HTTP1_CHUNK_LINE_MAX]; /* chunk-size lines: the one queued
					   and, while it goes out, the next */
	char inval_base[192];           /* inval's host and path (no query),
					   for the Location and
					   Content-Location it invalidates
					   too (RFC 9111 4.4); inval_path_len 0:
					   none */
	char cond[480];                 /* If-None-Match / If-Modified-Since
					   lines revalidating rq->stale, then
					   the canonical Accept-Encoding line,
					   Surrogate-Capability and an image
					   variant's Accept; cond_len, ae_len */
	char reply[512];                /* the proxy's own response */
	char why[512];                  /* the last backend failure, for the
					   reply if no retry succeeds; ""
					   from req_begin */
	char qbuf[QUERY_TARGET_MAX];    /* msg's normalised target (only
					   query_apply writes it, before
					   anything reads it) */
};

#endif
