/*
 * front.c -- the client side of a connection, on its worker's thread.
 *
 * A client connection reads into one buffer and parses request heads in
 * place (http1.c) into its request object (request.c), which
 * routes and answers it; the routing key is computed here (front_key).
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
 */
#include "front.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "conf.h"
#include "conn.h"
#include "proxy.h"
#include "request.h"
#include "snapshot.h"
#include "worker.h"

/* ---- routing key (pure) ---------------------------------------------- */

static int front_param_cmp(const struct http1_str *a, const struct http1_str *b)
{
	size_t n = a->len < b->len ? a->len : b->len;
	int r = memcmp(a->p, b->p, n);

	if (r)
		return r;
	return a->len < b->len ? -1 : a->len > b->len;
}

static void front_part(struct iovec *v, size_t *n, const char *p, size_t len)
{
	v[*n].iov_base = (void *)(uintptr_t)p;
	v[*n].iov_len = len;
	(*n)++;
}

/* The key is never copied: its pieces point into the request buffer (or
 * at the parser's literal "/" for "http://h?q", and the separators here),
 * so no key is too long to route and none is cut short. */
size_t front_key(int mode, const struct http1_msg *req, struct iovec *v)
{
	struct http1_str params[FRONT_MAX_PARAMS];
	size_t np = 0, n = 0;
	const char *p, *e;

	/* HAProxy's balance uri: the target as the client sent it, up to
	 * its '?' unless "whole" */
	if (mode == CONF_KEY_URI || mode == CONF_KEY_URI_QUERY) {
		e = mode == CONF_KEY_URI ? memchr(req->target.p, '?', req->target.len) : NULL;
		front_part(v, &n, req->target.p, e ? (size_t)(e - req->target.p) : req->target.len);
		return n;
	}
	front_part(v, &n, req->path.p, req->path.len);
	if (mode == CONF_KEY_PATH || !req->has_query)
		return n;
	if (mode == CONF_KEY_PATH_SORTED_QUERY) {
		p = req->query.p;
		e = p + req->query.len;
		while (p < e) {
			const char *amp = memchr(p, '&', (size_t)(e - p));
			const char *end = amp ? amp : e;

			if (end > p) {          /* empty parameters carry nothing */
				if (np == FRONT_MAX_PARAMS)
					break;  /* too many: the query as sent */
				params[np].p = p;
				params[np].len = (size_t)(end - p);
				/* insertion sort: parameter lists are short */
				for (size_t j = np; j > 0 && front_param_cmp(&params[j - 1], &params[j]) > 0; j--) {
					struct http1_str t = params[j];

					params[j] = params[j - 1];
					params[j - 1] = t;
				}
				np++;
			}
			p = end + 1;
		}
		if (p < e) {
			np = 0;
		} else if (np == 0) {
			return n;
		} else {
			front_part(v, &n, "?", 1);
			for (size_t i = 0; i < np; i++) {
				if (i)
					front_part(v, &n, "&", 1);
				front_part(v, &n, params[i].p, params[i].len);
			}
			return n;
		}
	}
	/* path '?' query: one piece when they are adjacent in the target,
	 * as they are except after the parser's literal "/" */
	if (req->query.p == req->path.p + req->path.len + 1) {
		v[0].iov_len = req->path.len + 1 + req->query.len;
		return n;
	}
	front_part(v, &n, "?", 1);
	front_part(v, &n, req->query.p, req->query.len);
	return n;
}

uint64_t front_key_pos(int scheme, int mode, const struct http1_msg *req, uint64_t *u)
{
	struct iovec v[FRONT_KEY_PARTS];
	size_t n = front_key(mode, req, v);

	return ring_key_pos((enum ring_scheme)scheme, v, n, u);
}

void front_key_ramp(const struct snapshot *s, const struct http1_msg *req, uint64_t *ramp_pos)
{
	const struct snap_ramp *r = s->ramp;

	/* a step whose ring a reload made under another scheme or key
	 * places the key elsewhere; the others share step 0's position */
	for (size_t i = 1; r && i < r->nsteps; i++) {
		const struct ring_ramp *st = &r->step[i];

		if (st->ring->scheme != s->ring->scheme || r->key[i] != s->conf->key)
			ramp_pos[i] = front_key_pos(st->ring->scheme, r->key[i], req, NULL);
	}
}

/* ---- connection plumbing --------------------------------------------- */

static void front_on_read(evutil_socket_t fd, short what, void *arg);
static void front_on_write(evutil_socket_t fd, short what, void *arg);
static void front_on_timeout(evutil_socket_t fd, short what, void *arg);
static void front_serve(struct client *c);

struct worker *front_worker(const struct client *c)
{
	return c->w;
}

void front_close(struct client *c)
{
	struct worker *w = c->w;
	bool release;

	if (c->closed) {
		/* kept for a posted wake-up (req_end returned false) after the
		 * worker's loop ended: none will run now */
		if (!c->in_loop && worker_done(w))
			worker_client_put(w, c);
		return;
	}
	release = c->rq ? req_end(c->rq) : true;
	event_del(&c->rev);
	event_del(&c->wev);
	event_del(&c->tev);
	close(c->fd);
	c->fd = -1;
	c->closed = true;
	worker_conn_closed(w);
	/* inside front_serve the struct is still in use up the stack: the
	 * loop gives it back when it unwinds; a request that waits for a
	 * posted wake-up keeps it until the wake-up came (front_request_done) */
	if (!c->in_loop && release)
		worker_client_put(w, c);
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
	static const struct timeval linger = { FRONT_LINGER_MS / 1000, (FRONT_LINGER_MS % 1000) * 1000 };
	const struct request *rq = c->rq;

	if (c->read_eof ||
	    (rq->body_done && c->in.len == rq->body_end && rq->end_kind != REQ_END_REPLY) ||
	    shutdown(c->fd, SHUT_WR) < 0) {
		front_close(c);
		return;
	}
	req_end(c->rq);
	c->state = CL_LINGER;
	c->in.pos = c->in.len = 0;
	event_del(&c->wev);
	if (c->read_paused) {
		event_add(&c->rev, NULL);
		c->read_paused = false;
	}
	event_add(&c->tev, &linger);
}

int front_accept(struct worker *w, int fd, const struct sockaddr_storage *peer)
{
	struct client *c = worker_client_get(w);

	if (!c)
		return -1;
	c->w = w;
	c->fd = fd;
	conn_peer_ip(peer, c->ip, sizeof(c->ip));
	c->iplen = strlen(c->ip);
	event_assign(&c->rev, w->base, fd, EV_READ | EV_PERSIST, front_on_read, c);
	event_assign(&c->wev, w->base, fd, EV_WRITE | EV_PERSIST, front_on_write, c);
	evtimer_assign(&c->tev, w->base, front_on_timeout, c);
	if (event_add(&c->rev, NULL) < 0) {
		worker_client_put(w, c);
		return -1;
	}
	event_add(&c->tev, w->tv_client);
	c->state = CL_HEAD;
	return 0;
}

void front_drain(struct client *c)
{
	if (c->state == CL_HEAD && c->in.len == c->in.pos)
		front_close(c);
	else if (c->state == CL_FORWARD)
		req_close_after(c->rq);
	/* a head in progress: req_begin sees the worker stopping */
}

int front_send(struct client *c)
{
	int rc = conn_flush(c->fd, c->out);

	if (rc == 1) {
		if (event_pending(&c->wev, EV_WRITE, NULL)) {
			event_del(&c->wev);
			/* the write-stall timer; an upload keeps its own */
			if (c->state == CL_FORWARD && c->rq->body_done)
				event_del(&c->tev);
		}
		return 1;
	}
	if (rc == 0) {
		if (!event_pending(&c->wev, EV_WRITE, NULL))
			event_add(&c->wev, NULL);
		/* a client that stops reading is timed out; one that reads
		 * slowly but steadily is not: the timer restarts on progress */
		event_add(&c->tev, c->w->tv_client);
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

void front_resume(struct client *c)
{
	if (c->read_paused && !c->read_eof) {
		event_add(&c->rev, NULL);
		c->read_paused = false;
	}
}

void front_body_taken(struct client *c)
{
	/* the client timer watched the upload; the response has its own */
	if (c->state == CL_FORWARD)
		event_del(&c->tev);
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
	event_add(&c->tev, w->tv_client);
	front_resume(c);
	return true;
}

void front_request_done(struct client *c)
{
	if (c->in_loop)
		return;         /* the loop takes it from here */
	if (c->closed) {
		/* the posted wake-up a closed connection's request waited
		 * for has come: the struct may go */
		worker_client_put(c->w, c);
		return;
	}
	front_serve(c);
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
		event_add(&c->tev, c->w->tv_client);
	}
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
			static const struct timeval now = { 0, 0 };

			c->yielded = true;
			event_add(&c->tev, &now);
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
		if (r < 0) {
			req_refuse(c->rq, worker_next_rid(c->w), (int)-r,
				   c->rq->msg.error ? c->rq->msg.error : "bad request");
			continue;
		}
		req_begin(c->rq, (size_t)r, worker_next_rid(c->w));
		/* while the request is served, the client timer watches only
		 * a body upload or a client that stops reading */
		if (c->rq->body_done)
			event_del(&c->tev);
		else
			event_add(&c->tev, c->w->tv_client);
		req_serve(c->rq);
	}
	c->in_loop = false;
	if (c->closed) {
		if (!c->rq || !c->rq->wake_due)
			worker_client_put(c->w, c);
	} else if (c->state == CL_HEAD && c->in.len == 0 && c->rq &&
		   c->rq->state == REQ_IDLE && !c->rq->wake_due) {
		/* idle between requests: nothing buffered, nothing points
		 * into the buffer, the last response is out; the memory goes
		 * back to the worker until the client sends again */
		event_del(&c->wev);
		worker_client_mem_put(c->w, c);
	}
}

/* ---- events ------------------------------------------------------------ */

/* Room to read into, compacting when the buffer allows it. */
static size_t front_room(struct client *c)
{
	struct rbuf *b = &c->in;
	size_t keep;

	if (b->len < b->cap)
		return b->cap - b->len;
	if (c->state == CL_HEAD) {
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

static void front_on_read(evutil_socket_t fd, short what, void *arg)
{
	struct client *c = arg;
	size_t room;
	ssize_t n;

	(void)what;
	if (c->state == CL_LINGER) {
		/* drop what a closing client still sends */
		char drop[4096];

		n = recv(fd, drop, sizeof(drop), 0);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			front_close(c);
		return;
	}
	if (!c->mem && worker_client_mem(c->w, c) < 0) {
		/* out of memory: closing frees the socket's buffers too;
		 * leaving the bytes in it would wake us again at once */
		front_close(c);
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
	n = recv(fd, c->in.data + c->in.len, room, 0);
	if (n > 0) {
		c->in.len += (size_t)n;
		if (c->state == CL_HEAD) {
			front_serve(c);
		} else if (c->state == CL_FORWARD && !c->rq->body_done) {
			event_add(&c->tev, c->w->tv_client);
			req_client_data(c->rq);
		}
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
	front_close(c);
}

static void front_on_write(evutil_socket_t fd, short what, void *arg)
{
	struct client *c = arg;
	int rc;

	(void)fd;
	(void)what;
	rc = front_send(c);
	if (rc < 0) {
		front_close(c);
		return;
	}
	if (rc == 0)
		return;
	if (c->state != CL_FORWARD || c->rq->body_done)
		event_del(&c->tev);
	if (c->state == CL_FORWARD)
		req_client_drained(c->rq);
}

static void front_on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct client *c = arg;

	(void)fd;
	(void)what;
	if (c->yielded) {               /* front_serve yielded: go on */
		front_serve(c);
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
			event_add(&c->tev, c->w->tv_client);
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
