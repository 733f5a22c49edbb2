/*
 * front.c -- the client side of a connection, on its worker's thread.
 *
 * A client connection reads into one fixed buffer and parses request
 * heads in place (http1.c). For each request it takes the worker's current
 * snapshot, hashes the key, walks the ring through balance.c, and hands the
 * request to forward.c. Requests on a connection are served one at a time,
 * in order, by one loop (front_serve); pipelined requests simply wait in
 * the buffer. The read event
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
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "balance.h"
#include "conf.h"
#include "conn.h"
#include "forward.h"
#include "health.h"
#include "log.h"
#include "proxy.h"
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

uint64_t front_key_pos(int mode, const struct http1_msg *req, uint64_t *u)
{
	struct iovec v[FRONT_KEY_PARTS];
	size_t n = front_key(mode, req, v);

	return ring_hash_parts2(v, n, u);
}

/* ---- connection plumbing --------------------------------------------- */

static void front_on_read(evutil_socket_t fd, short what, void *arg);
static void front_on_write(evutil_socket_t fd, short what, void *arg);
static void front_on_timeout(evutil_socket_t fd, short what, void *arg);
static void front_serve(struct client *c);

/* What a connection lost after the request went out is called when it is
 * counted against a backend's health. */
#define FRONT_LOST_WHAT "connection lost before a response"

/* A failure held back by front_backend_failed (a connection lost after the
 * request went out, then retried elsewhere) is its backend's after all,
 * since no second backend lost the request the same way: count it now. */
static void front_settle(struct client *c)
{
	if (c->lost >= 0 && c->snap) {
		const struct snap_backend *sb = &c->snap->be[c->lost];

		health_request_failed(sb->state, c->snap->conf, sb->conf, FRONT_LOST_WHAT);
	}
	c->lost = -1;
}

/* Let go of the current request: its backend connection (abandoned), a
 * failure held back, and its snapshot. */
static void front_detach(struct client *c)
{
	if (c->up)
		fwd_close(c->up);
	front_settle(c);
	worker_snap_drop(c->w, c->snap);
	c->snap = NULL;
}

void front_close(struct client *c)
{
	struct worker *w = c->w;

	if (c->closed)
		return;
	front_detach(c);
	event_del(&c->rev);
	event_del(&c->wev);
	event_del(&c->tev);
	close(c->fd);
	c->fd = -1;
	c->closed = true;
	atomic_fetch_sub(&w->proxy->nconns, 1);
	/* inside front_serve the struct is still in use up the stack: the
	 * loop gives it back when it unwinds */
	if (!c->in_loop)
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
	c->lost = -1;
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

/* ---- request ids and the proxy's own replies -------------------------- */

/* A request id: the process's start time (Unix seconds), the worker and
 * the worker's count of requests, in hex: 8 + 2 + 10 digits, e.g.
 * 66a1f3c0 01 000000002a without the spaces. Unique within a process
 * run (and across runs started in different seconds); it costs a counter
 * per request, and is formatted only for a reply or a log line. */
static void front_rid(const struct client *c, char *out, size_t len)
{
	snprintf(out, len, "%08" PRIx32 "%02x%010" PRIx64, c->w->started_at,
		 (unsigned)c->w->id & 0xffu, c->rid & 0xffffffffffu);
}

/* Log lines of the proxy's own replies, per worker and second: a flood of
 * bad requests or a dead tier must not flood the log. */
#define FRONT_LOG_PER_SEC 100

/* How much of a target a log line shows. */
#define FRONT_LOG_TARGET 512

/* Bytes of s that are safe in a log line: it stops at the first byte that
 * is not printable ASCII (a head the parser refused may hold any). */
static int front_printable(struct http1_str s, size_t max)
{
	size_t n = 0;

	while (s.p && n < s.len && n < max && s.p[n] > ' ' && s.p[n] < 0x7f)
		n++;
	return (int)n;
}

/* The log line of a reply of the proxy's own: the request id the client
 * saw, the status, the request and the detail the client is not shown
 * (for a backend failure: its name, address and what happened). */
static void front_log_reply(struct client *c, int status, const char *rid, const char *detail)
{
	struct worker *w = c->w;
	enum log_level level = status == 502 || status == 504 ? LOG_WARN : LOG_INFO;
	int64_t now;
	int ml, tl;

	if ((int)level > (int)log_get_level())
		return;
	now = (int64_t)time(NULL);
	if (now != w->log_sec) {
		if (w->log_skipped)
			log_info("worker %d: %u more replies of the proxy's own not logged in a second",
				 w->id, w->log_skipped);
		w->log_sec = now;
		w->log_n = w->log_skipped = 0;
	}
	if (w->log_n >= FRONT_LOG_PER_SEC) {
		w->log_skipped++;
		return;
	}
	w->log_n++;
	ml = front_printable(c->req.method, 32);
	tl = front_printable(c->req.target, FRONT_LOG_TARGET);
	log_msg(level, "request %s: %d for %.*s %.*s%s from %s: %s", rid, status,
		ml ? ml : 1, ml ? c->req.method.p : "-", tl ? tl : 1, tl ? c->req.target.p : "-",
		(size_t)tl < c->req.target.len ? "..." : "", c->ip, detail);
}

/* What the client is told: a backend failure in general words only (the
 * backend's name and address stay in the log); otherwise the proxy's own
 * words about the request (the codec's reason, why no backend took it). */
static const char *front_public(int status, const char *why)
{
	switch (status) {
	case 502:
		return "bad gateway: the backend failed to answer";
	case 504:
		return "gateway timeout: the backend did not answer in time";
	case 500:
		return "internal error";
	default:
		return why;
	}
}

/* Reply with the proxy's own response. Closes after it unless the request
 * was read completely and the client wants to keep the connection. why is
 * the detail for the log line (see front_public for what the client gets). */
static void front_reply(struct client *c, int status, const char *why, bool force_close)
{
	const char *extra = status == 503 ? "Retry-After: 1\r\n" : "";
	char body[256], rid[24];
	ssize_t n;
	int blen;

	if (c->resp_started) {          /* too late for a clean reply */
		front_close(c);
		return;
	}
	if (c->up)
		fwd_close(c->up);
	front_rid(c, rid, sizeof(rid));
	front_log_reply(c, status, rid, why);
	blen = snprintf(body, sizeof(body), "ringproxy: %s (request %s)\n", front_public(status, why), rid);
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

/* ---- backend choice, retries ------------------------------------------ */

bool front_retryable(const struct client *c)
{
	return (c->req.method_id == HTTP1_M_GET || c->req.method_id == HTTP1_M_HEAD) &&
	       c->req.framing == HTTP1_BODY_NONE && !c->resp_started;
}

/* c->why: what went wrong on backend i, with its name and address (for
 * the log, never for the client). */
static void front_failed_on(struct client *c, int i, const char *what)
{
	const struct snap_backend *sb = &c->snap->be[i];

	snprintf(c->why, sizeof(c->why), "backend %s (%s): %s", sb->conf->name, sb->addr_text, what);
}

/* Try backends along the walk until one takes the request. last_status
 * (with c->why) is the answer if none does after a failure. */
static void front_dispatch(struct client *c, int last_status)
{
	const struct snapshot *s = c->snap;
	char what[256];
	int i;

	for (;;) {
		if (c->tries > s->conf->retries) {
			front_reply(c, last_status, c->why, false);
			return;
		}
		balance_next(s, &c->walk, c->keypos, &c->pick);
		i = c->pick.backend;
		if (i < 0) {
			if (c->tries)
				front_reply(c, last_status, c->why, false);
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
		if (fwd_start(c, i, what, sizeof(what)) == 0)
			return;
		/* failed at once (a connect error, counted by forward.c) */
		front_failed_on(c, i, what);
		last_status = 502;
		if (!front_retryable(c)) {
			front_reply(c, last_status, c->why, false);
			return;
		}
		atomic_fetch_add(&s->be[i].state->retries_away, 1);
	}
}

/*
 * A connection lost after the request went out says nothing on its own:
 * the backend may have crashed, or the request may be one that makes
 * caches crash (a poison URL: an image that kills the resizer), and then
 * retrying it along the walk takes every cache it reaches down with it.
 * So the first such loss is retried on the next backend but counted
 * against the first one's health only once the request ends otherwise
 * (front_settle); when a second backend loses it the same way, the fault
 * is the request's: it is not retried further, counts against no
 * backend's health, and its log line names the URL and the request id.
 */
void front_backend_failed(struct client *c, int status, enum front_fail kind, const char *what)
{
	const struct snapshot *s = c->snap;
	int i = c->cur;
	bool retry;

	if (c->resp_started) {
		front_close(c);
		return;
	}
	if (kind == FRONT_FAIL_CLIENT) {
		front_reply(c, status, what, false);
		return;
	}
	front_failed_on(c, i, what);
	if (kind == FRONT_FAIL_LOST && c->lost >= 0) {
		char why[sizeof(c->why) + 160];

		snprintf(why, sizeof(why), "%s, as backend %s lost it before: a request that fails the "
			 "same way on two backends is not retried further nor counted against their health",
			 c->why, s->be[c->lost].conf->name);
		c->lost = -1;
		front_reply(c, status, why, false);
		return;
	}
	/* a timeout waiting for the response is never retried: the backend
	 * may still be working on it, and a retry doubles the load exactly
	 * when the tier is slow; nor is an invalid response (the request
	 * reached a backend that answered) */
	retry = (kind == FRONT_FAIL_CONNECT || kind == FRONT_FAIL_LOST) && front_retryable(c) &&
		c->tries <= s->conf->retries;
	if (kind == FRONT_FAIL_LOST) {
		if (retry)
			c->lost = i;
		else
			health_request_failed(s->be[i].state, s->conf, s->be[i].conf, FRONT_LOST_WHAT);
	}
	if (retry) {
		atomic_fetch_add(&s->be[i].state->retries_away, 1);
		front_dispatch(c, status);
		return;
	}
	front_reply(c, status, c->why, false);
}

/* ---- one request ------------------------------------------------------ */

/* A request head is complete: route it. */
static void front_start(struct client *c, size_t head_len)
{
	struct worker *w = c->w;
	uint64_t keyu;

	c->state = CL_FORWARD;
	c->snap = worker_snap_take(w);
	c->req_end = c->in.pos + head_len;
	c->head_sent = false;
	c->resp_started = false;
	c->tries = 0;
	c->lost = -1;
	c->why[0] = '\0';
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
	c->keypos = front_key_pos(c->snap->conf->key, &c->req, &keyu);
	balance_start(c->snap, &c->walk, &c->pick, c->keypos, keyu);
	front_dispatch(c, 503);
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

/* The current request is answered and its response is out: let go of it.
 * Returns true when the connection waits for its next request, false when
 * it is closing or closed (c may then be gone). */
static bool front_request_end(struct client *c)
{
	struct worker *w = c->w;

	front_detach(c);
	/* the backend answered before the whole body arrived: the rest of
	 * it cannot be told from a next request, so the connection ends.
	 * A client that half-closed still gets the answers to the requests
	 * it pipelined before (front_serve closes when none is left). */
	if (c->close_after || !c->req_done || w->stopping) {
		front_end(c);
		return false;
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
	return true;
}

void front_response_done(struct client *c)
{
	/* inside front_serve the loop goes on to the next request itself */
	if (front_request_end(c) && !c->in_loop)
		front_serve(c);
}

/* Requests answered at once (the proxy's own replies) served in one go
 * before the loop lets the worker's other connections have their turn. */
#define FRONT_BURST 64

/*
 * The connection's loop: take the next request from the buffer, serve it,
 * and when it is answered take the next. Whatever answers a request (a
 * backend, or the proxy itself) ends it with front_response_done: an
 * answer made at once lets this loop go on, one that comes later (a
 * backend's response, a reply the client must drain first) comes back
 * here from that event. So a connection's requests are served by this one
 * loop, not by a call chain that grows with each pipelined request.
 * After FRONT_BURST requests it yields to the event loop and comes back
 * through the client's timer; the rest waits in the buffer, so the order
 * holds.
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
	while (c->state == CL_HEAD && !c->closed) {
		const struct conf *conf = c->w->snap->conf;
		struct http1_limits lim;
		ssize_t r;

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
		lim.max_head = conf->max_head_size < c->in.cap - 1 ? conf->max_head_size : c->in.cap - 1;
		lim.max_headers = conf->max_headers < c->hdrs_cap ? conf->max_headers : c->hdrs_cap;
		r = http1_parse_request(&c->req, c->hdrs, c->in.data + c->in.pos,
					c->in.len - c->in.pos, &lim);
		if (r == 0) {
			if (c->read_eof)        /* the rest of a head never comes */
				front_close(c);
			break;
		}
		c->rid = ++c->w->rid_seq;
		if (r < 0) {
			c->req_done = false;    /* forces the close */
			front_reply(c, (int)-r, c->req.error ? c->req.error : "bad request", true);
			break;
		}
		front_start(c, (size_t)r);
	}
	c->in_loop = false;
	if (c->closed)
		worker_client_put(c->w, c);
}

/* ---- events ------------------------------------------------------------ */

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
			front_serve(c);
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

		if (q > 0 && (uint64_t)q <= c->out.sent && c->out.sent - (uint64_t)q != c->delivered) {
			c->delivered = c->out.sent - (uint64_t)q;
			event_add(&c->tev, c->w->tv_client);
			return;
		}
	}
	if (c->state == CL_HEAD && c->in.len > c->in.pos) {
		c->rid = ++c->w->rid_seq;
		c->req_done = false;
		front_reply(c, 408, "request head not received in time", true);
		return;
	}
	front_close(c);
}
