/*
 * front.c -- the client side of a connection, on its worker's thread.
 *
 * A client connection reads into one fixed buffer and parses request
 * heads in place (http1.c). For each request it takes the worker's current
 * snapshot, hashes the key, walks the ring through balance.c, and hands the
 * request to forward.c. Requests on a connection are served one at a time,
 * in order; pipelined requests simply wait in the buffer. The read event
 * stays armed for the connection's life (it also reports a client that goes
 * away mid-response); it is removed only while the buffer is full.
 *
 * Buffer discipline: the parsed request's slices point into the buffer, and
 * so does the backend's pending output of the head and body, so the buffer
 * is compacted only between requests, or during a request with a body once
 * its head has been sent (such requests are never retried).
 */
#include "front.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "balance.h"
#include "conf.h"
#include "conn.h"
#include "forward.h"
#include "log.h"
#include "proxy.h"
#include "snapshot.h"
#include "worker.h"

#define FRONT_MAX_PARAMS 128    /* query parameters sorted for the key */

/* ---- routing key (pure) ---------------------------------------------- */

static int front_param_cmp(const struct http1_str *a, const struct http1_str *b)
{
	size_t n = a->len < b->len ? a->len : b->len;
	int r = memcmp(a->p, b->p, n);

	if (r)
		return r;
	return a->len < b->len ? -1 : a->len > b->len;
}

int front_key(int mode, const struct http1_msg *req, char *scratch, size_t len,
	      const char **key, size_t *keylen)
{
	struct http1_str params[FRONT_MAX_PARAMS];
	size_t np = 0, out = 0;
	const char *p, *e;

	if (mode == CONF_KEY_PATH || !req->has_query) {
		*key = req->path.p;
		*keylen = req->path.len;
		return 0;
	}
	if (mode == CONF_KEY_PATH_QUERY) {
		/* path and query are adjacent in the target: one slice */
		if (req->query.p == req->path.p + req->path.len + 1) {
			*key = req->path.p;
			*keylen = req->path.len + 1 + req->query.len;
			return 0;
		}
	} else {
		p = req->query.p;
		e = p + req->query.len;
		while (p < e) {
			const char *amp = memchr(p, '&', (size_t)(e - p));
			const char *end = amp ? amp : e;

			if (end > p) {          /* empty parameters carry nothing */
				if (np == FRONT_MAX_PARAMS)
					return -1;
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
		if (np == 0) {
			*key = req->path.p;
			*keylen = req->path.len;
			return 0;
		}
	}
	/* build path '?' query in scratch */
	if (req->path.len + 1 > len)
		return -1;
	memcpy(scratch, req->path.p, req->path.len);
	out = req->path.len;
	scratch[out++] = '?';
	if (mode == CONF_KEY_PATH_QUERY) {
		if (out + req->query.len > len)
			return -1;
		memcpy(scratch + out, req->query.p, req->query.len);
		out += req->query.len;
	} else {
		for (size_t i = 0; i < np; i++) {
			if (out + params[i].len + 1 > len)
				return -1;
			if (i)
				scratch[out++] = '&';
			memcpy(scratch + out, params[i].p, params[i].len);
			out += params[i].len;
		}
	}
	*key = scratch;
	*keylen = out;
	return 0;
}

/* ---- connection plumbing --------------------------------------------- */

static void front_on_read(evutil_socket_t fd, short what, void *arg);
static void front_on_write(evutil_socket_t fd, short what, void *arg);
static void front_on_timeout(evutil_socket_t fd, short what, void *arg);
static void front_process(struct client *c);

/* Let go of the current request: its backend connection (abandoned) and
 * its snapshot. */
static void front_detach(struct client *c)
{
	if (c->up)
		fwd_close(c->up);
	worker_snap_drop(c->w, c->snap);
	c->snap = NULL;
}

void front_close(struct client *c)
{
	struct worker *w = c->w;

	front_detach(c);
	event_del(&c->rev);
	event_del(&c->wev);
	event_del(&c->tev);
	close(c->fd);
	atomic_fetch_sub(&w->proxy->nconns, 1);
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
 * then the connection closes (HTTP servers call this a lingering close). */
static void front_end(struct client *c)
{
	static const struct timeval linger = { FRONT_LINGER_MS / 1000, (FRONT_LINGER_MS % 1000) * 1000 };

	if (c->read_eof || (c->req_done && c->in.len == c->req_end && c->state != CL_CLOSING) ||
	    shutdown(c->fd, SHUT_WR) < 0) {
		front_close(c);
		return;
	}
	front_detach(c);
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
	http1_msg_init(&c->req);
	return 0;
}

int front_flush(struct client *c)
{
	int rc = conn_flush(c->fd, &c->out);

	if (rc == 1) {
		if (event_pending(&c->wev, EV_WRITE, NULL)) {
			event_del(&c->wev);
			/* the write-stall timer; an upload keeps its own */
			if (c->state == CL_FORWARD && c->req_done)
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

/* Reply with the proxy's own response. Closes after it unless the request
 * was read completely and the client wants to keep the connection. */
static void front_reply(struct client *c, int status, const char *why, bool force_close)
{
	const char *extra = status == 503 ? "Retry-After: 1\r\n" : "";
	char body[384];
	ssize_t n;
	int blen;

	if (c->resp_started) {          /* too late for a clean reply */
		front_close(c);
		return;
	}
	if (c->up)
		fwd_close(c->up);
	blen = snprintf(body, sizeof(body), "ringproxy: %s\n", why);
	if (blen < 0 || (size_t)blen >= sizeof(body))
		blen = (int)sizeof(body) - 1;
	/* our replies carry no Connection: keep-alive, without which an
	 * HTTP/1.0 client takes the connection as closing: so close it */
	c->close_after = force_close || !c->req_done || !c->req.keep_alive || c->req.minor == 0;
	n = http1_write_simple(c->msg, sizeof(c->msg), status, c->close_after, extra, body, (size_t)blen);
	if (n < 0) {
		front_close(c);
		return;
	}
	/* the answer to a HEAD has the headers of the GET's and no body:
	 * body bytes would be read as the next response */
	if (c->req.method_id == HTTP1_M_HEAD)
		n -= blen;
	outq_reset(&c->out);
	outq_add(&c->out, c->msg, (size_t)n);
	c->resp_started = true;
	if (c->close_after)
		c->state = CL_CLOSING;  /* then front_end() */
	switch (front_flush(c)) {
	case 1:
		if (c->close_after)
			front_end(c);
		else
			front_response_done(c);
		break;
	case 0:
		break;
	default:
		front_close(c);
		break;
	}
}

bool front_retryable(const struct client *c)
{
	return (c->req.method_id == HTTP1_M_GET || c->req.method_id == HTTP1_M_HEAD) &&
	       c->req.framing == HTTP1_BODY_NONE && !c->resp_started;
}

/* Try backends along the walk until one takes the request. */
static void front_dispatch(struct client *c, const char *last_why, int last_status)
{
	const struct snapshot *s = c->snap;
	char why[256];
	int i;

	for (;;) {
		if (c->tries > s->conf->retries) {
			front_reply(c, last_status, last_why, false);
			return;
		}
		balance_next(s, &c->walk, c->keypos, &c->pick);
		i = c->pick.backend;
		if (i < 0) {
			if (c->tries)
				front_reply(c, last_status, last_why, false);
			else if (c->pick.any_full)
				front_reply(c, 503, "every backend is at its max_inflight; retry shortly", false);
			else
				front_reply(c, 503, "no backend available: every backend is down", false);
			return;
		}
		if (c->tries == 0 && i != c->pick.owner && c->pick.owner >= 0) {
			struct backend *owner = s->be[c->pick.owner].state;

			if (c->pick.owner_verdict == BALANCE_DOWN)
				atomic_fetch_add_explicit(&owner->failovers, 1, memory_order_relaxed);
			else
				atomic_fetch_add_explicit(&owner->spilled_away, 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&s->be[i].state->spilled_in, 1, memory_order_relaxed);
		}
		c->tries++;
		c->cur = i;
		if (fwd_start(c, i, why, sizeof(why)) == 0)
			return;
		snprintf(c->why, sizeof(c->why), "%s", why);
		last_why = c->why;
		last_status = 502;
		if (!front_retryable(c)) {
			front_reply(c, last_status, last_why, false);
			return;
		}
		atomic_fetch_add(&s->be[i].state->retries_away, 1);
	}
}

void front_backend_failed(struct client *c, int status, const char *why, bool retry)
{
	const struct snapshot *s = c->snap;

	if (c->resp_started) {
		front_close(c);
		return;
	}
	/* forward.c passes retry = false for a timeout waiting for the
	 * response: the backend may still be working on it, and a retry
	 * doubles the load exactly when the tier is slow */
	if (retry && front_retryable(c) && c->tries <= s->conf->retries) {
		atomic_fetch_add(&s->be[c->cur].state->retries_away, 1);
		front_dispatch(c, why, status);
		return;
	}
	front_reply(c, status, why, false);
}

/* A request head is complete: route it. */
static void front_start(struct client *c, size_t head_len)
{
	struct worker *w = c->w;
	const char *key;
	size_t keylen;

	c->state = CL_FORWARD;
	c->snap = worker_snap_take(w);
	c->req_end = c->in.pos + head_len;
	c->head_sent = false;
	c->resp_started = false;
	c->tries = 0;
	c->body_left = 0;
	c->req_done = true;
	if (c->req.framing == HTTP1_BODY_LENGTH && c->req.content_length > 0) {
		c->body_left = c->req.content_length;
		c->req_done = false;
	} else if (c->req.framing == HTTP1_BODY_CHUNKED) {
		http1_chunked_init(&c->chunk);
		c->req_done = false;
	}
	c->close_after = !c->req.keep_alive || w->stopping;
	/* while the request is served, the client timer watches only a
	 * body upload or a client that stops reading */
	if (c->req_done)
		event_del(&c->tev);
	else
		event_add(&c->tev, w->tv_client);
	if (front_key(c->snap->conf->key, &c->req, c->key, sizeof(c->key), &key, &keylen) < 0)
		front_key(CONF_KEY_PATH_QUERY, &c->req, c->key, sizeof(c->key), &key, &keylen);
	c->keypos = ring_hash(key, keylen);
	ring_walk_init(&c->walk, c->snap->ring, c->keypos);
	c->pick.owner = -1;
	c->pick.any_full = 0;
	front_dispatch(c, "no backend available", 503);
}

int front_take_body(struct client *c, const char **p, size_t *n)
{
	size_t avail = c->in.len - c->req_end, used;

	*p = c->in.data + c->req_end;
	*n = 0;
	if (c->req_done || avail == 0)
		return 0;
	if (c->req.framing == HTTP1_BODY_LENGTH) {
		*n = avail < c->body_left ? avail : (size_t)c->body_left;
		used = *n;
		c->body_left -= *n;
		c->req_done = c->body_left == 0;
	} else {
		size_t off;
		ssize_t r = http1_chunked_decode(&c->chunk, *p, avail, &off, n);

		if (r < 0)
			return -1;
		*p += off;
		used = (size_t)r;
		c->req_done = c->chunk.done;
	}
	c->req_end += used;
	if (c->req_done && c->state == CL_FORWARD)
		event_del(&c->tev);
	return 0;
}

void front_response_done(struct client *c)
{
	struct worker *w = c->w;

	worker_snap_drop(c->w, c->snap);
	c->snap = NULL;
	/* the backend answered before the whole body arrived: the rest of
	 * it cannot be told from a next request, so the connection ends.
	 * A client that half-closed still gets the answers to the requests
	 * it pipelined before (front_process closes when none is left). */
	if (c->close_after || !c->req_done || w->stopping) {
		front_end(c);
		return;
	}
	c->state = CL_HEAD;
	c->in.pos = c->req_end;
	if (c->in.pos == c->in.len)
		c->in.pos = c->in.len = 0;
	http1_msg_init(&c->req);
	c->resp_started = false;
	outq_reset(&c->out);
	event_add(&c->tev, w->tv_client);
	front_resume(c);
	if (c->in.len > c->in.pos)
		front_process(c);
	else if (c->read_eof)
		front_close(c);
}

static void front_process(struct client *c)
{
	const struct conf *conf = c->w->snap->conf;
	struct http1_limits lim;
	ssize_t r;

	if (c->state != CL_HEAD)
		return;
	/* a head must fit the read buffer too: a connection made before a
	 * reload that raised max_head_size has a buffer sized for the old
	 * one, and a full buffer without the end of the head would wait for
	 * room that never comes */
	lim.max_head = conf->max_head_size < c->in.cap - 1 ? conf->max_head_size : c->in.cap - 1;
	lim.max_headers = conf->max_headers < c->hdrs_cap ? conf->max_headers : c->hdrs_cap;
	r = http1_parse_request(&c->req, c->hdrs, c->in.data + c->in.pos,
				c->in.len - c->in.pos, &lim);
	if (r == 0) {
		if (c->read_eof)        /* the rest of a head never comes */
			front_close(c);
		return;
	}
	if (r < 0) {
		c->req_done = false;    /* forces the close */
		front_reply(c, (int)-r, c->req.error ? c->req.error : "bad request", true);
		return;
	}
	front_start(c, (size_t)r);
}

/* Room to read into, compacting when the buffer allows it. */
static size_t front_room(struct client *c)
{
	struct rbuf *b = &c->in;
	size_t keep;

	if (b->len < b->cap)
		return b->cap - b->len;
	if (c->state == CL_HEAD && b->pos > 0) {
		memmove(b->data, b->data + b->pos, b->len - b->pos);
		b->len -= b->pos;
		b->pos = 0;
	} else if (c->state == CL_FORWARD && c->head_sent && c->req.framing != HTTP1_BODY_NONE &&
		   (!c->up || outq_empty(&c->up->out)) && c->req_end > 0) {
		keep = b->len - c->req_end;
		memmove(b->data, b->data + c->req_end, keep);
		b->len = keep;
		b->pos = c->req_end = 0;
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
		n = recv(fd, c->in.data, c->in.cap, 0);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
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
			front_process(c);
		} else if (c->state == CL_FORWARD) {
			if (!c->req_done) {
				event_add(&c->tev, c->w->tv_client);
				if (c->up)
					fwd_request_body(c->up);
			}
		}
		return;
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	/* EOF or error */
	c->read_eof = true;
	event_del(&c->rev);
	if (c->state == CL_FORWARD && c->req_done && n == 0)
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
	rc = front_flush(c);
	if (rc < 0) {
		front_close(c);
		return;
	}
	if (rc == 0)
		return;
	if (c->state == CL_CLOSING) {
		front_end(c);
		return;
	}
	if (c->req_done || c->state != CL_FORWARD)
		event_del(&c->tev);
	if (c->up)
		fwd_client_drained(c->up);
	else if (c->state == CL_FORWARD && c->resp_started)
		front_response_done(c);   /* our own reply, kept alive */
}

static void front_on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct client *c = arg;

	(void)fd;
	(void)what;
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

		if (q > 0 && (uint64_t)q <= c->out.sent && c->out.sent - (uint64_t)q != c->delivered) {
			c->delivered = c->out.sent - (uint64_t)q;
			event_add(&c->tev, c->w->tv_client);
			return;
		}
	}
	if (c->state == CL_HEAD && c->in.len > c->in.pos) {
		c->req_done = false;
		front_reply(c, 408, "request head not received in time", true);
		return;
	}
	front_close(c);
}
