/*
 * front.c -- the client side of a connection, on its worker's thread.
 *
 * A client connection reads into one buffer and parses request heads in
 * place (http1.c) into its request object (request.c), which
 * routes and answers it (the routing key is key.c's).
 * Requests on a connection are served one at a time, in order, by one
 * loop (front_serve: parse -> serve -> next); pipelined requests simply
 * wait in the buffer. The read event stays armed for the connection's life
 * (it also reports a client that goes away mid-response); it is removed
 * only while the buffer is full.
 *
 * Memory: an idle connection (nothing buffered, no request, no wake-up
 * due) holds no buffer, request or output queue: worker.c lends them
 * (struct client_mem) when the socket becomes readable and takes them back
 * when front_serve leaves the connection idle. The first read buffer is
 * small; it grows to buffer_size only where nothing points into it: a head
 * that does not fit (before it is parsed), or a request with a body (then
 * the head is parsed again in the larger buffer).
 *
 * Buffer discipline: the parsed request's slices point into the buffer, and
 * so does the backend's pending output of the head and body, so the buffer
 * is compacted only between requests, or during a request with a body once
 * its head has been sent (such requests are never retried): the request
 * says from where (req_keep_from).
 *
 * PROXY protocol ([proxy] proxy_protocol = on): a new connection starts in
 * CL_PROXY, where its first bytes are read before any request
 * (front_proxy): from a proxy_protocol_from source they must be a PROXY
 * header (proxyproto.c), whose source becomes the connection's client
 * address, c->ip, which every later reader takes (X-Forwarded-For, the
 * access log, purge_allow, the log lines of replies); from any other
 * source they must not be one. Which of the two is decided by the
 * socket's peer alone, never guessed from the bytes (the spec forbids
 * guessing). The header is parsed once, in the read buffer, and what
 * follows it there is the first request's. With proxy_protocol off a
 * connection starts in CL_HEAD and nothing of this runs.
 */
#include "path/front.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/addr.h"
#include "config/conf.h"
#include "path/conn.h"
#include "base/deadline.h"
#include "path/forward.h"
#include "path/h2.h"
#include "http/http1.h"
#include "base/log.h"
#include "path/proxy-t.h"
#include "http/proxyproto.h"
#include "path/request.h"
#include "backend/snapshot.h"
#include "path/tls.h"
#include "path/worker.h"

/* A connection's TLS state let go: its session (and its count among the
 * TLS connections open) and the certificate set its handshake holds. */
static void front_tls_drop(struct client *c)
{
	if (c->ssl) {
		tls_free(c->ssl);
		c->ssl = NULL;
		atomic_fetch_sub(&c->w->proxy->tls_conns, 1);
	}
	certs_unref(c->hs_certs);
	c->hs_certs = NULL;
}

/* ---- connection plumbing --------------------------------------------- */

static void front_on_event(evutil_socket_t fd, short what, void *arg);
static void front_serve(struct client *c);
static int front_send(struct client *c);
static void front_resume(struct client *c);
static void front_body_taken(struct client *c);
static void front_request_done(struct client *c);
static void front_read(evutil_socket_t fd, short what, void *arg);
static void front_handshake(struct client *c);

const struct req_client_ops front_req_ops = {
	.send = front_send,
	.resume = front_resume,
	.body_taken = front_body_taken,
	.done = front_request_done,
	.close = front_close,
};

void front_close(struct client *c)
{
	struct worker *w = c->w;
	bool release;

	if (c->state == CL_H2) {
		h2_close(c);
		return;
	}
	if (c->closed) {
		/* kept for a posted wake-up (req_end returned false) after the
		 * worker's loop ended: none will run now */
		if (!c->busy && worker_done(w))
			worker_client_put(w, c);
		return;
	}
	release = c->rq ? req_end(c->rq) : true;
	event_del(&c->rev);
	event_del(&c->wev);
	c->writing = false;
	deadline_stop(&c->tev);
	front_tls_drop(c);
	close(c->fd);
	c->fd = -1;
	c->closed = true;
	worker_conn_closed(w);
	/* one owner gives the struct back: asked to close from inside a
	 * handler of its own (directly, or through its request and the
	 * backend side), the struct is still in use up the stack, and the
	 * handler gives it back as it unwinds (front_leave); a request that
	 * waits for a posted wake-up keeps it until the wake-up came
	 * (front_request_done) */
	if (!c->busy && release)
		worker_client_put(w, c);
}

/* Around each of this file's handlers of a connection (its events,
 * front_serve): the struct outlives a close asked for inside. */
static void front_enter(struct client *c)
{
	c->busy++;
}

static void front_leave(struct client *c)
{
	if (--c->busy == 0 && c->closed && (!c->rq || !c->rq->wake_due))
		worker_client_put(c->w, c);
}

/* How long a connection closed on a client that may still be sending is
 * drained before the close. */
#define FRONT_LINGER_MS 2000

/* Close after the final reply is out. A client may still be sending (a
 * request body we did not read, bytes after a bad request): closing with
 * unread data makes the kernel answer with a reset, which can destroy the
 * reply before the client has read it. So our side is shut, what arrives
 * is read and dropped until the client closes or FRONT_LINGER_MS pass,
 * then the connection closes (HTTP servers call this a lingering close).
 * A backend's response to a request read to its last byte, with nothing
 * after it, closes at once. */
static void front_end(struct client *c)
{
	const struct request *rq = c->rq;

	if (c->read_eof ||
	    (rq->body_done && c->in.len == rq->body_end && rq->end_kind != REQ_END_REPLY)) {
		front_close(c);
		return;
	}
	/* the request's log line before the TLS goes (it names the SNI) */
	req_end(c->rq);
	if (c->ssl) {
		/* close_notify before our side shuts (tls_free sends it) */
		tls_free(c->ssl);
		c->ssl = NULL;
		atomic_fetch_sub(&c->w->proxy->tls_conns, 1);
	}
	if (shutdown(c->fd, SHUT_WR) < 0) {
		front_close(c);
		return;
	}
	c->state = CL_LINGER;
	c->in.pos = c->in.len = 0;
	event_del(&c->wev);
	c->writing = false;
	if (c->read_paused) {
		event_add(&c->rev, NULL);
		c->read_paused = false;
	}
	deadline_set(&c->tev, (int64_t)FRONT_LINGER_MS * 1000);
}

/* Whether a connection from a listener of kind begins with a PROXY
 * header: the address's own proxy_protocol=, else its section's. */
static bool front_proxy_on(const struct conf *conf, unsigned kind)
{
	if (kind & (WORKER_L_PP_ON | WORKER_L_PP_OFF))
		return kind & WORKER_L_PP_ON;
	return kind & WORKER_L_TLS ? conf->tls_proxy_protocol : conf->proxy_protocol;
}

/* An HTTPS connection's TLS, on the snapshot's certificates (held until
 * the handshake ends); its timer is the handshake's. 0 or -1. */
static int front_tls_start(struct worker *w, struct client *c)
{
	struct certs *set = w->snap->certs;

	if (!set || !(c->ssl = tls_new(set, c->fd)))
		return -1;
	c->hs_certs = certs_ref(set);
	atomic_fetch_add(&w->proxy->tls_conns, 1);
	return 0;
}

int front_accept(struct worker *w, int fd, const struct sockaddr_storage *peer, unsigned kind)
{
	struct client *c = worker_client_get(w);

	if (!c)
		return -1;
	c->w = w;
	c->fd = fd;
	c->kind = kind;
	c->https = kind & WORKER_L_TLS;
	if ((kind & WORKER_L_TLS) && front_tls_start(w, c) < 0) {
		worker_client_put(w, c);
		return -1;
	}
	conn_peer_ip(peer, c->ip, sizeof(c->ip));
	c->iplen = strlen(c->ip);
	event_assign(&c->rev, w->base, fd, EV_READ | EV_PERSIST, front_on_event, c);
	event_assign(&c->wev, w->base, fd, EV_WRITE | EV_PERSIST, front_on_event, c);
	c->writing = false;
	deadline_assign(&c->tev, w->base, front_on_event, c);
	if (event_add(&c->rev, NULL) < 0) {
		front_tls_drop(c);
		worker_client_put(w, c);
		return -1;
	}
	deadline_set(&c->tev, w->us_client);
	c->state = c->ssl ? CL_TLS : CL_HEAD;
	if (front_proxy_on(w->snap->conf, kind)) {
		char err[8];

		c->proxied = addr_in_list(w->snap->conf->proxy_protocol_from, c->ip, err, sizeof(err)) == 1;
		/* on HTTPS, a source not in the list goes straight to its
		 * handshake (a PROXY header then fails it) */
		if (!c->ssl || c->proxied)
			c->state = CL_PROXY;
	}
	if (c->ssl)
		deadline_set(&c->tev, (int64_t)w->snap->conf->tls_handshake_timeout_ms * 1000);
	/* a client sends its hello as soon as it is connected, so it is
	 * mostly here already: begin without waiting for the event (a
	 * handshake that fails closes c; the accept still succeeded) */
	if (c->state == CL_TLS)
		front_handshake(c);
	return 0;
}

void front_drain(struct client *c)
{
	if (c->state == CL_H2) {
		h2_drain(c);
		return;
	}
	if ((c->state == CL_HEAD && c->in.len == c->in.pos) || c->state == CL_PROXY || c->state == CL_TLS)
		front_close(c);
	else if (c->state == CL_FORWARD)
		req_close_after(c->rq);
	/* a head in progress: req_begin sees the worker stopping */
}

static int front_send(struct client *c)
{
	int rc = c->ssl ? tls_flush(c->ssl, c->out) : conn_flush(c->fd, c->out);

	if (rc == 1) {
		if (c->writing) {
			event_del(&c->wev);
			c->writing = false;
			/* the write-stall timer; an upload keeps its own */
			if (c->state == CL_FORWARD && c->rq->body_done)
				deadline_clear(&c->tev);
		}
		return 1;
	}
	if (rc == 0) {
		if (!c->writing) {
			if (event_add(&c->wev, NULL) < 0)
				return -1;      /* out of memory: as a write error */
			c->writing = true;
		}
		/* a client that stops reading is timed out; one that reads
		 * slowly but steadily is not: the timer restarts on progress */
		deadline_set(&c->tev, c->w->us_client);
		return 0;
	}
	return -1;
}

static void front_pause(struct client *c)
{
	if (!c->read_paused) {
		event_del(&c->rev);
		c->read_paused = true;
	}
}

static void front_resume(struct client *c)
{
	if (c->read_paused && !c->read_eof) {
		event_add(&c->rev, NULL);
		c->read_paused = false;
		/* bytes OpenSSL decrypted already raise no socket event */
		if (c->ssl && tls_pending(c->ssl))
			event_active(&c->rev, EV_READ, 1);
	}
}

static void front_body_taken(struct client *c)
{
	/* the client timer watched the upload; the response has its own */
	if (c->state == CL_FORWARD)
		deadline_clear(&c->tev);
}

/* ---- the connection's loop ------------------------------------------- */

/* The current request is answered and its response is out: let go of it.
 * Returns true when the connection waits for its next request, false when
 * it is closing or closed (c may then be gone). */
static bool front_request_end(struct client *c)
{
	struct worker *w = c->w;
	const struct request *rq = c->rq;
	size_t next = rq->body_end;

	/* the backend answered before the whole body arrived: the rest of
	 * it cannot be told from a next request, so the connection ends.
	 * A client that half-closed still gets the answers to the requests
	 * it pipelined before (front_serve closes when none is left). */
	if (rq->close_after || !rq->body_done || w->stopping) {
		front_end(c);
		return false;
	}
	req_end(c->rq);
	c->state = CL_HEAD;
	c->in.pos = next;
	if (c->in.pos == c->in.len)
		c->in.pos = c->in.len = 0;
	outq_reset(c->out);
	deadline_set(&c->tev, w->us_client);
	front_resume(c);
	return true;
}

static void front_request_done(struct client *c)
{
	if (c->in_loop)
		return;         /* the loop takes it from here */
	if (c->closed) {
		/* the posted wake-up a closed connection's request waited
		 * for has come: the struct may go (now, or as the handler
		 * running on it unwinds) */
		if (!c->busy)
			worker_client_put(c->w, c);
		return;
	}
	front_serve(c);
}

/* A connection whose first bytes are the HTTP/2 preface goes to h2.c,
 * with them; its lent memory comes back. Returns whether it went. */
__attribute__((noinline, cold)) static bool front_h2(struct client *c)
{
	size_t n = c->in.len - c->in.pos;

	if (n < H2_PREFACE_LINE_LEN ||
	    memcmp(c->in.data + c->in.pos, H2_PREFACE_LINE, H2_PREFACE_LINE_LEN) != 0)
		return false;
	if (h2_start(c, c->fd, NULL, c->ip, c->in.data + c->in.pos, n) < 0)
		return false;
	worker_client_mem_put(c->w, c);
	return true;
}

/* Requests answered at once (the proxy's own replies) served in one go
 * before the loop lets the worker's other connections have their turn. */
#define FRONT_BURST 64

/*
 * The connection's loop: end the request that was answered, parse the
 * next from the buffer, serve it, and go on while requests are answered
 * at once. Whatever answers a request (a backend, the proxy itself, next
 * the cache) marks it done: an answer made at once lets this loop go on,
 * one that comes later (a backend's response, a reply the client must
 * drain first, a wake-up from another request's fetch) comes back here
 * through front_request_done. So a connection's requests are served by
 * this one loop, not by a call chain that grows with each pipelined
 * request. After FRONT_BURST requests it yields to the event loop and
 * comes back through the client's timer; the rest waits in the buffer,
 * so the order holds.
 */
static void front_serve(struct client *c)
{
	unsigned n = 0;

	if (c->yielded) {
		/* back from a yield (or more bytes came first): the client's
		 * timer is its timeout again */
		c->yielded = false;
		deadline_set(&c->tev, c->w->us_client);
	}
	front_enter(c);
	c->in_loop = true;
	while (!c->closed) {
		const struct conf *conf = c->w->snap->conf;
		struct http1_limits lim;
		size_t big;
		ssize_t r;

		if (c->rq && c->rq->state == REQ_DONE && !front_request_end(c))
			break;
		if (c->state != CL_HEAD)
			break;          /* an answer still to come */
		if (c->in.pos == c->in.len) {
			if (c->read_eof)        /* nothing more will come */
				front_close(c);
			break;
		}
		if (n++ == FRONT_BURST) {
			/* a timer due now runs after the next poll, so the
			 * events of other connections come first (an event
			 * made active would run before any poll) */
			c->yielded = true;
			deadline_set(&c->tev, 0);
			break;
		}
		/* a head must fit the read buffer too: a connection made
		 * before a reload that raised max_head_size has a buffer
		 * sized for the old one, and a full buffer without the end of
		 * the head would wait for room that never comes */
		big = c->in.cap > conf->buffer_size ? c->in.cap : conf->buffer_size;
		lim.max_head = conf->max_head_size < big - 1 ? conf->max_head_size : big - 1;
		lim.max_headers = conf->max_headers < c->hdrs_cap ? conf->max_headers : c->hdrs_cap;
		r = http1_parse_request(&c->rq->msg, c->hdrs, c->in.data + c->in.pos,
					c->in.len - c->in.pos, &lim);
		if (r > 0 && c->rq->msg.framing != HTTP1_BODY_NONE &&
		    c->in.cap < conf->buffer_size && worker_client_grow(c->w, c) == 0)
			/* a body gets the large buffer: the head's slices
			 * pointed into the small one, so parse it again */
			r = http1_parse_request(&c->rq->msg, c->hdrs, c->in.data + c->in.pos,
						c->in.len - c->in.pos, &lim);
		if (r == 0) {
			if (c->read_eof)        /* the rest of a head never comes */
				front_close(c);
			break;
		}
		c->state = CL_FORWARD;
		/* HTTP/2 with prior knowledge ([proxy] h2c): its preface
		 * fails the HTTP/1.1 parse, so the check costs nothing on a
		 * request that parses */
		if (r < 0 && conf->h2c && c->out->sent == 0 && front_h2(c))
			break;
		worker_count(&c->w->h1_requests);
		if (!c->h1_seen) {
			c->h1_seen = true;
			worker_count(&c->w->h1_connections);
		}
		if (r < 0) {
			req_refuse(c->rq, worker_next_rid(c->w), (int)-r,
				   c->rq->msg.error ? c->rq->msg.error : "bad request");
			continue;
		}
		req_begin(c->rq, (size_t)r, worker_next_rid(c->w));
		/* while the request is served, the client timer watches only
		 * a body upload or a client that stops reading */
		if (c->rq->body_done)
			deadline_clear(&c->tev);
		else
			deadline_set(&c->tev, c->w->us_client);
		req_serve(c->rq);
	}
	c->in_loop = false;
	if (!c->closed && c->state == CL_HEAD && c->in.len == 0 && c->rq &&
	    c->rq->state == REQ_IDLE && !c->rq->wake_due) {
		/* idle between requests: nothing buffered, nothing points
		 * into the buffer, the last response is out; the memory goes
		 * back to the worker until the client sends again, unless
		 * that is soon (worker_client_park) */
		if (c->writing) {
			event_del(&c->wev);
			c->writing = false;
		}
		worker_client_park(c->w, c);
	}
	front_leave(c);
}

/* ---- the PROXY protocol header ------------------------------------------ */

/* Log lines of refused PROXY headers a worker writes in a second at most
 * (a flood of garbage must not flood the log). */
#define FRONT_PROXY_LOG_PER_SEC 100

/* Close a connection whose first bytes are refused, saying why and from
 * where (the socket's peer: the balancer, or whoever it is). */
static void front_proxy_refuse(struct client *c, const char *why)
{
	atomic_fetch_add(&c->w->proxy->proxy_protocol_refused, 1);
	if (worker_log_allow(c->w, FRONT_PROXY_LOG_PER_SEC))
		log_warn("PROXY protocol: closed the connection from %s: %s (%zu bytes received)",
			 c->ip, why, c->in.len);
	front_close(c);
}

/* A TLS terminator's TLVs in the header: a client that came over TLS
 * is an https one. */
static void front_proxy_tlv(struct client *c, const struct proxyproto_hdr *h)
{
	if (h->ssl) {
		c->https = true;
		if (c->rq)
			req_client_https(c->rq, true);
	}
}

/* A PROXY header whose ALPN TLV says h2 (hitch or HAProxy in front,
 * offering h2 and http/1.1): the terminator negotiated HTTP/2 with the
 * client, so what follows the header is HTTP/2 whatever [proxy] h2c says
 * (that is about clients speaking it in clear without asking); the bytes
 * after the header in the buffer go to h2.c with it. On failure (out of
 * memory) c is closed. */
static void front_proxy_h2(struct client *c, size_t at)
{
	c->alpn_h2 = true;
	if (h2_start(c, c->fd, NULL, c->ip, c->in.data + at, c->in.len - at) < 0) {
		front_close(c);
		return;
	}
	worker_client_mem_put(c->w, c);
}

/* CL_PROXY: what the connection's first bytes are. The spec's receiver
 * "MUST NOT start processing the connection before it receives a complete
 * and valid PROXY protocol header": until then nothing is parsed as
 * HTTP; a header in pieces waits for the rest (under the client timer),
 * anything not exactly a header closes the connection at once. */
static void front_proxy(struct client *c)
{
	const struct conf *conf = c->w->snap->conf;
	struct proxyproto_hdr h;
	ssize_t r;

	if (!c->proxied) {
		int s = proxyproto_sniff(c->in.data, c->in.len);

		if (s > 0)
			front_proxy_refuse(c, "a PROXY header from a source not in proxy_protocol_from");
		if (s != 0)
			return;
		c->state = CL_HEAD;
		front_serve(c);
		return;
	}
	r = proxyproto_parse(c->in.data, c->in.len,
			     c->in.cap > conf->buffer_size ? c->in.cap : conf->buffer_size, &h);
	if (r == 0)
		return;
	if (r < 0) {
		front_proxy_refuse(c, h.error);
		return;
	}
	front_proxy_tlv(c, &h);
	if (proxyproto_src_text(&h, c->ip, sizeof(c->ip)) == 0) {
		/* the request was set up with the socket's address when the
		 * memory was lent, and has not begun */
		c->iplen = strlen(c->ip);
		req_client_ip(c->rq, c->ip, c->iplen);
	}
	if (proxyproto_alpn_h2(&h)) {
		front_proxy_h2(c, (size_t)r);
		return;
	}
	c->in.pos = (size_t)r;
	if (c->in.pos == c->in.len)
		c->in.pos = c->in.len = 0;
	c->state = CL_HEAD;
	front_serve(c);
}

/* ---- HTTPS: the handshake -------------------------------------------------- */

/* Count a failed handshake by why (tls.h), then close. */
static void front_tls_failed(struct client *c, enum certs_fail why)
{
	struct proxy *p = c->w->proxy;

	switch (why) {
	case CERTS_FAIL_SNI: atomic_fetch_add(&p->tls_failed_sni, 1); break;
	case CERTS_FAIL_CIPHER: atomic_fetch_add(&p->tls_failed_cipher, 1); break;
	case CERTS_FAIL_NONE: atomic_fetch_add(&p->tls_abandoned, 1); break;
	default: atomic_fetch_add(&p->tls_failed_protocol, 1); break;
	}
	front_close(c);
}

/* A handshake that chose ALPN h2 hands the connection to h2.c with its
 * session: h2's reads and writes go through tls_recv and tls_flush from
 * here on. Returns whether it went; on failure (out of memory) c is
 * closed. */
static bool front_tls_h2(struct client *c)
{
	size_t n;
	const char *p = tls_alpn(c->ssl, &n);

	if (!p || n != 2 || memcmp(p, "h2", 2) != 0)
		return false;
	if (h2_start(c, c->fd, c->ssl, c->ip, NULL, 0) < 0) {
		front_close(c);
		return true;
	}
	/* the handshake holds no buffer of ours; a PROXY header before it
	 * gave back what it had been read into */
	if (c->mem)
		worker_client_mem_put(c->w, c);
	return true;
}

/* CL_TLS: go on with the handshake on either event. It holds no buffer
 * of ours (OpenSSL's record buffers are its own, released when idle);
 * done, the connection waits for its first request under client_timeout,
 * as a plain one does after its accept. */
static void front_handshake(struct client *c)
{
	struct proxy *p = c->w->proxy;
	int r = tls_handshake(c->ssl);

	if (r == 0) {
		bool wr = tls_want_write(c->ssl);

		if (wr != c->writing) {
			if (wr)
				event_add(&c->wev, NULL);
			else
				event_del(&c->wev);
			c->writing = wr;
		}
		return;
	}
	if (r < 0) {
		front_tls_failed(c, tls_why());
		return;
	}
	if (c->writing) {
		event_del(&c->wev);
		c->writing = false;
	}
	atomic_fetch_add(SSL_session_reused(c->ssl) ? &p->tls_resumed : &p->tls_handshakes, 1);
	certs_unref(c->hs_certs);
	c->hs_certs = NULL;
	if (front_tls_h2(c))
		return;
	c->state = CL_HEAD;
	deadline_set(&c->tev, c->w->us_client);
	/* a request that came in the handshake's last flight was decrypted
	 * already: no socket event will say so */
	if (tls_pending(c->ssl))
		front_read(c->fd, EV_READ, c);
}

/* CL_PROXY on HTTPS: the PROXY header is read before the handshake, and
 * no byte after it may be taken from the socket (they are OpenSSL's). So
 * the socket is peeked; the bytes of a header not complete yet are all
 * its own and are taken, so no peek sees them twice; once it is complete,
 * the rest of it is taken, and the handshake begins on what follows. */
static void front_proxy_tls(struct client *c)
{
	size_t have = c->in.len;
	struct proxyproto_hdr h;
	ssize_t n, r;

	n = recv(c->fd, c->in.data + have, c->in.cap - have, MSG_PEEK);
	if (n <= 0) {
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (have > 0)
			front_proxy_refuse(c, "the connection ended inside the PROXY header");
		else
			front_close(c);
		return;
	}
	c->in.len = have + (size_t)n;
	r = proxyproto_parse(c->in.data, c->in.len, c->in.cap, &h);
	if (r < 0) {
		front_proxy_refuse(c, h.error);
		return;
	}
	if (r == 0) {
		if (conn_recv(c->fd, c->in.data + have, (size_t)n) != n)
			front_close(c);
		return;
	}
	if (conn_recv(c->fd, c->in.data + have, (size_t)r - have) != (ssize_t)((size_t)r - have)) {
		front_close(c);
		return;
	}
	/* an ALPN TLV here is a balancer's guess: our handshake's ALPN
	 * decides the protocol */
	front_proxy_tlv(c, &h);
	if (proxyproto_src_text(&h, c->ip, sizeof(c->ip)) == 0)
		c->iplen = strlen(c->ip);
	c->in.pos = c->in.len = 0;
	c->state = CL_TLS;
	/* the handshake holds no buffer: the request is set up again, with
	 * the header's address, when the first request's bytes come */
	worker_client_mem_put(c->w, c);
	front_handshake(c);
}

/* ---- events ------------------------------------------------------------ */

/* Room to read into, compacting when the buffer allows it. */
static size_t front_room(struct client *c)
{
	struct rbuf *b = &c->in;
	size_t keep;

	if (b->len < b->cap)
		return b->cap - b->len;
	if (c->state == CL_HEAD || c->state == CL_PROXY) {
		if (b->pos > 0) {
			memmove(b->data, b->data + b->pos, b->len - b->pos);
			b->len -= b->pos;
			b->pos = 0;
		}
		/* a head larger than the small first buffer: nothing points
		 * into it before a head is parsed, so it may move */
		if (b->len == b->cap)
			worker_client_grow(c->w, c);
	} else if (c->state == CL_FORWARD && (keep = req_keep_from(c->rq)) > 0) {
		memmove(b->data, b->data + keep, b->len - keep);
		b->len -= keep;
		b->pos = 0;
		req_rebase(c->rq, keep);
	}
	return b->cap - b->len;
}

static void front_read(evutil_socket_t fd, short what, void *arg)
{
	struct client *c = arg;
	size_t room;
	ssize_t n;

	(void)what;
	if (c->state == CL_TLS) {
		front_handshake(c);
		return;
	}
	if (c->state == CL_LINGER) {
		/* drop what a closing client still sends */
		char drop[4096];

		n = conn_recv(fd, drop, sizeof(drop));
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			front_close(c);
		return;
	}
	worker_client_unpark(c->w, c);
	if (!c->mem) {
		if (worker_client_mem(c->w, c) < 0) {
			/* out of memory: closing frees the socket's buffers
			 * too; leaving the bytes in it would wake us again */
			front_close(c);
			return;
		}
		req_init(c->rq, c->w, c, &c->in, c->out, &c->scratch, &c->scratch_cap, c->ip,
			 c->iplen, &front_req_ops, &fwd_req_ops);
		if (c->https)
			req_client_https(c->rq, true);
		if (c->ssl)
			req_client_tls(c->rq, SSL_get_version(c->ssl), SSL_get_cipher_name(c->ssl),
				       SSL_get_servername(c->ssl, TLSEXT_NAMETYPE_host_name));
	}
	if (c->state == CL_PROXY && c->ssl) {
		front_proxy_tls(c);
		return;
	}
	room = front_room(c);
	if (room == 0) {
		/* a head that fills the buffer is over max_head_size and was
		 * refused by the parser; so this is body or pipelining
		 * waiting for the backend: stop reading until it moves */
		front_pause(c);
		return;
	}
	n = c->ssl ? tls_recv(c->ssl, c->in.data + c->in.len, room) : conn_recv(fd, c->in.data + c->in.len, room);
	if (n > 0) {
		c->in.len += (size_t)n;
		if (c->state == CL_HEAD) {
			front_serve(c);
		} else if (c->state == CL_FORWARD && !c->rq->body_done) {
			deadline_set(&c->tev, c->w->us_client);
			req_client_data(c->rq);
		} else if (c->state == CL_PROXY) {
			front_proxy(c);
		}
		/* more decrypted than the buffer took: no socket event will
		 * say so, so the read event runs again */
		if (c->ssl && !c->closed && !c->read_paused && tls_pending(c->ssl))
			event_active(&c->rev, EV_READ, 1);
		return;
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	/* EOF or error */
	c->read_eof = true;
	event_del(&c->rev);
	if (c->state == CL_FORWARD && c->rq->body_done && n == 0)
		return; /* a half-close after a complete request: answer it and
			   any pipelined after it, then close */
	if (c->state == CL_PROXY && c->proxied && c->in.len > 0) {
		front_proxy_refuse(c, "the connection ended inside the PROXY header");
		return;
	}
	front_close(c);
}

static void front_write(evutil_socket_t fd, short what, void *arg)
{
	struct client *c = arg;
	int rc;

	(void)fd;
	(void)what;
	if (c->state == CL_TLS) {
		front_handshake(c);
		return;
	}
	rc = front_send(c);
	if (rc < 0) {
		front_close(c);
		return;
	}
	if (rc == 0)
		return;
	if (c->state != CL_FORWARD || c->rq->body_done)
		deadline_clear(&c->tev);
	if (c->state == CL_FORWARD)
		req_client_drained(c->rq);
}

static void front_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct client *c = arg;

	(void)fd;
	(void)what;
	if (c->yielded) {               /* front_serve yielded: go on */
		front_serve(c);
		return;
	}
	if (c->state == CL_TLS) {
		atomic_fetch_add(&c->w->proxy->tls_failed_timeout, 1);
		front_close(c);
		return;
	}
	if (c->state == CL_PROXY) {
		/* nothing sent (a balancer's TCP check) closes quietly */
		if (c->proxied && c->in.len > 0)
			front_proxy_refuse(c, "the PROXY header was not complete within client_timeout");
		else
			front_close(c);
		return;
	}
	{
		/* Output still on its way: the kernel's send buffer
		 * (megabytes when autotuned) can hide a slow but steady
		 * reader from us for longer than client_timeout, both while
		 * we wait to write and after the last byte was handed over
		 * (closing then would orphan the socket with the rest of the
		 * response). Ask the kernel whether the client took anything
		 * since the timer last fired; only a client that took nothing
		 * for a whole period is timed out. */
		long q = conn_unacked(c->fd);

		uint64_t sent = c->out ? c->out->sent : c->sent;

		if (q > 0 && (uint64_t)q <= sent && sent - (uint64_t)q != c->delivered) {
			c->delivered = sent - (uint64_t)q;
			deadline_set(&c->tev, c->w->us_client);
			return;
		}
	}
	if (c->state == CL_HEAD && c->in.len > c->in.pos) {
		c->state = CL_FORWARD;
		req_refuse(c->rq, worker_next_rid(c->w), 408, "request head not received in time");
		return;
	}
	front_close(c);
}

/* The one handler of the connection's three events (the read and write
 * events and the timer, told apart by what): the struct outlives a close
 * asked for inside. */
static void front_on_event(evutil_socket_t fd, short what, void *arg)
{
	struct client *c = arg;
	/* one clock read for the turn's timeouts and timestamps */
	int64_t outer = deadline_turn_begin();

	front_enter(c);
	if (what & EV_TIMEOUT) {
		if (deadline_fired(&c->tev))
			front_timeout(fd, what, c);
	} else if (what & EV_READ)
		front_read(fd, what, c);
	else
		front_write(fd, what, c);
	front_leave(c);
	deadline_turn_end(outer);
}
