/*
 * forward.c -- the backend side of a request, on the request's worker
 * thread: a keep-alive connection from the worker's pool (or a new one),
 * the request head rewritten by http1.c and written with one writev
 * together with whatever body is already buffered (a chunked body
 * re-framed: the client's data under chunk-size lines of ours), then the
 * response relayed to the client from this connection's read buffer
 * without a copy.
 *
 * Backpressure: response bytes stay in this buffer until the client has
 * taken them; meanwhile this connection's read event is removed, so a slow
 * client slows the backend instead of growing memory. The same holds the
 * other way for a request body. Memory per request is bounded by the two
 * buffers whatever the body size. Except for a cache fill
 * (req_reads_object): its client reads from the object being filled (a
 * chunked body decoded here, to be framed again: req_rechunks), so
 * the backend is read at its own pace (the object is bounded by
 * max_object) and the fill, and the requests waiting for it, never wait
 * for the leader's client.
 *
 * An idle pooled connection keeps its read event armed: a backend that
 * closes it is noticed at once and the connection is dropped, never handed
 * to a request. Bytes nobody asked for (on an idle connection, or past
 * the end of a response) close the connection too, as NGINX and HAProxy
 * do, and since a response that follows such bytes would be taken for the
 * answer to the next request, no connection to that backend is kept alive
 * for FWD_STRAY_HOLD_US after (fwd_stray). A request sent on a pooled connection that turns out dead
 * before the backend acknowledged any byte of it is resent once on a fresh
 * connection to the same backend (GET/HEAD without a body only; never
 * after a response timeout).
 */
#include "path/forward.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/cachectl.h"
#include "config/conf.h"
#include "path/conn.h"
#include "base/deadline.h"
#include "path/request.h"
#include "base/log.h"
#include "backend/registry.h"
#include "backend/snapshot.h"
#include "http/tier.h"
#include "path/worker.h"

static void fwd_on_event(evutil_socket_t fd, short what, void *arg);
static void fwd_process(struct upstream *u);
/* Send rq on a connection to backend i (a pooled one unless fresh): 0, or
 * -1 with *kind (REQ_FAIL_CONNECT: no connection; REQ_FAIL_LOCAL: ours)
 * and why. The request holds its in-flight slot on i. */
static int fwd_begin(struct request *rq, int i, bool fresh, enum req_fail *kind, char *why,
		     size_t whylen);

static struct backend *fwd_backend(const struct upstream *u)
{
	return registry_get(u->backend_id);
}

/* At most one warning a second per backend: a dead cache under load must
 * not flood the log. */
__attribute__((format(printf, 2, 3)))
static void fwd_warn(struct backend *b, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	int64_t now = (int64_t)time(NULL), last = atomic_load(&b->last_warn);

	if (last == now || !atomic_compare_exchange_strong(&b->last_warn, &last, now))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_warn("%s", msg);
}

/* How long a backend that sent bytes no request asked for gets no
 * connection kept alive: each request then has a connection of its own,
 * so a stray response can only reach the request it came after, not the
 * next one on a reused connection. */
#define FWD_STRAY_HOLD_US (60 * INT64_C(1000000))

/* The backend sent bytes no request asked for, where says where: the
 * caller closes this connection (or does not reuse it); for
 * FWD_STRAY_HOLD_US none to the backend is reused (fwd_finish). HTTP/1.1
 * cannot tell a stray response that comes after a request was sent from
 * the answer to it: a backend that sent one is not trusted with a second
 * request on a connection until it has behaved a while. */
static void fwd_stray(struct upstream *u, const char *where)
{
	struct backend *b = fwd_backend(u);

	atomic_fetch_add(&b->stray_bytes, 1);
	atomic_store(&b->stray_until_us, deadline_now_us() + FWD_STRAY_HOLD_US);
	fwd_warn(b, "backend %s: bytes no request asked for %s: connection closed, and none kept alive to it "
		 "for %llds", b->name, where, (long long)(FWD_STRAY_HOLD_US / 1000000));
}

/* An idle connection's read event fired: the backend closed it (its
 * keep-alive timeout, no news), or sent bytes nobody asked for
 * (fwd_stray). One byte read tells which; the caller closes it. */
static void fwd_idle_news(struct upstream *u)
{
	char c;

	if (conn_recv(u->fd, &c, 1) > 0)
		fwd_stray(u, "on an idle connection");
}

/* ---- the pool --------------------------------------------------------- */

static void fwd_pool_push(struct pool *p, struct upstream *u)
{
	u->prev = NULL;
	u->next = p->head;
	if (p->head)
		p->head->prev = u;
	p->head = u;
	p->n++;
}

static void fwd_pool_remove(struct pool *p, struct upstream *u)
{
	if (u->prev)
		u->prev->next = u->next;
	else
		p->head = u->next;
	if (u->next)
		u->next->prev = u->prev;
	u->next = u->prev = NULL;
	p->n--;
}

/* ---- lifecycle -------------------------------------------------------- */

static void fwd_unbind(struct upstream *u)
{
	struct request *rq = u->rq;

	if (!rq)
		return;
	/* what went out for this request: its head and body */
	if (u->out.sent > u->sent_before) {
		if (u->pool)
			worker_add(&u->pool->bytes_out, u->out.sent - u->sent_before);
	}
	req_unbind(rq);
	u->rq = NULL;
}

/*
 * Closing, with one owner (Redis closes a client asked to close from
 * inside its own handler the same way, later): whoever asks, the
 * connection leaves its pool or its request and its events at once; its
 * socket and struct go now only when none of forward.c's entry points
 * runs on it. Asked from inside one (the request answered otherwise, or
 * its client went, while this file relays), they go as that entry point
 * unwinds (fwd_leave), so no caller up the stack holds a freed pointer
 * and none needs telling that it does.
 */
void fwd_close(struct upstream *u)
{
	struct worker *w = u->w;

	if (u->close_due)
		return;
	if (u->state == UP_IDLE)
		fwd_pool_remove(u->pool, u);
	else
		fwd_unbind(u);
	event_del(&u->rev);
	event_del(&u->wev);
	u->writing = false;
	deadline_stop(&u->tev);
	if (u->busy) {
		u->close_due = true;
		return;
	}
	close(u->fd);
	worker_up_put(w, u);
}

/* Around each entry point into this file that may lead to fwd_close: its
 * events, and the request's ops that act on a connection. */
static void fwd_enter(struct upstream *u)
{
	u->busy++;
}

static void fwd_leave(struct upstream *u)
{
	if (--u->busy == 0 && u->close_due) {
		close(u->fd);
		worker_up_put(u->w, u);
	}
}

/* Did the backend acknowledge any byte of the current request? The kernel
 * counts the bytes the peer acknowledged over the connection's life (the
 * SYN counts one); u->sent_before is what went out before this request.
 * Not knowing counts as yes: then nothing is resent. Failure path only
 * (one getsockopt). */
static bool fwd_acked(const struct upstream *u)
{
	uint64_t acked;

	if (conn_acked(u->fd, &acked) < 0)
		return true;
	return acked > u->sent_before + 1;
}

/* The request failed on this connection before any response byte went to
 * the client. fmt is a printf format naming what happened. */
__attribute__((format(printf, 4, 5)))
static void fwd_fail(struct upstream *u, int status, enum req_fail kind, const char *fmt, ...)
{
	struct request *rq = u->rq;
	int i = u->ring_index;
	const struct snap_backend *sb = &rq->snap->be[i];
	/* Resent on a fresh connection to the same backend: only a request
	 * that a reused keep-alive connection lost (closed or reset) before
	 * the backend acknowledged any byte of it: the backend had closed the
	 * connection as we used it, and never saw the request. One it took
	 * may have been acted on, or may be what broke the connection; a
	 * response timeout means it is still at work: neither is resent. */
	bool resend = kind == REQ_FAIL_LOST && u->reused && !u->got_bytes &&
		      req_retryable(rq) && !fwd_acked(u);
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	/* the request counts the backend's health (and keeps its slot on i
	 * through a resend) */
	if (!resend)
		fwd_warn(sb->state, "backend %s (%s): %s", sb->conf->name, sb->addr_text, what);
	fwd_close(u);
	if (resend && fwd_begin(rq, i, true, &kind, what, sizeof(what)) == 0)
		return;
	req_failed(rq, status, kind, what);
}

/*
 * Queue the data of the client's chunks that its buffer holds, each piece
 * behind a chunk-size line of ours, then the last chunk without trailers:
 * the client's sizes, extensions and trailers stay behind, so a backend
 * never depends on reading them as we do. Stops when the lines or the
 * queue run out; the rest is taken after the next flush. 0, or -1 on a
 * malformed body.
 */
static int fwd_take_chunks(struct upstream *u)
{
	static const char last[] = "\r\n0\r\n\r\n";
	struct request *rq = u->rq;

	while (!rq->body_done && u->ck_used < UP_CHUNK_LINES && u->out.cnt <= OUT_IOV_MAX - 3) {
		size_t before = rq->body_end, n;
		const char *p;

		if (req_take_body(rq, &p, &n) < 0)
			return -1;
		if (n) {
			char *line = u->ck_lines[u->ck_used++];

			outq_add(&u->out, line, http1_chunk_line(line, n, u->ck_open));
			outq_add(&u->out, p, n);
			u->ck_open = true;
		}
		if (rq->body_done) {
			size_t skip = u->ck_open ? 0 : 2;       /* no data: no CRLF */

			outq_add(&u->out, last + skip, sizeof(last) - 1 - skip);
		}
		if (rq->body_end == before)
			break;          /* the rest of the body is still to come */
	}
	return 0;
}

/* Queue more request body and write what is queued. */
static void fwd_pump(struct upstream *u)
{
	struct request *rq = u->rq;
	int rc;

	for (;;) {
		if (!rq->body_done && rq->msg.framing == HTTP1_BODY_CHUNKED) {
			if (fwd_take_chunks(u) < 0) {
				req_failed(rq, 400, REQ_FAIL_CLIENT, "invalid chunked request body");
				return;
			}
		} else if (!rq->body_done) {
			const char *p;
			size_t n;

			if (req_take_body(rq, &p, &n) < 0) {
				req_failed(rq, 400, REQ_FAIL_CLIENT, "invalid chunked request body");
				return;
			}
			if (n && outq_add(&u->out, p, n) < 0) {
				/* cannot happen: one body slice per flush */
				req_abort(rq);
				return;
			}
		}
		rc = conn_flush(u->fd, &u->out);
		if (rc < 0) {
			fwd_fail(u, 502, REQ_FAIL_LOST, "sending the request: %s", strerror(errno));
			return;
		}
		if (rc == 0) {
			if (!u->writing) {
				if (event_add(&u->wev, NULL) < 0) {
					fwd_fail(u, 503, REQ_FAIL_LOCAL, "out of memory");
					return;
				}
				u->writing = true;
			}
			return;
		}
		if (u->writing) {
			event_del(&u->wev);
			u->writing = false;
		}
		u->ck_used = 0;                 /* the queue no longer holds them */
		req_head_sent(rq);
		if (!rq->body_done) {
			if (rq->in->len > rq->body_end)
				continue;
			req_want_body(rq);
			return;
		}
		if (u->state == UP_HEAD && !u->got_bytes)
			deadline_set(&u->tev, u->w->us_response);
		return;
	}
}

/* A connection to backend sb, or NULL with *kind and why. */
static struct upstream *fwd_connect(struct worker *w, const struct snap_backend *sb,
				    enum req_fail *kind, char *why, size_t whylen)
{
	struct upstream *u;
	int fd = conn_connect((const struct sockaddr *)&sb->addr, sb->addrlen);

	if (fd < 0) {
		atomic_fetch_add(&sb->state->connect_errors, 1);
		snprintf(why, whylen, "connect: %s", strerror(errno));
		fwd_warn(sb->state, "backend %s (%s): %s", sb->conf->name, sb->addr_text, why);
		*kind = REQ_FAIL_CONNECT;
		return NULL;
	}
	u = worker_up_get(w);
	if (!u) {
		close(fd);
		snprintf(why, whylen, "out of memory");
		*kind = REQ_FAIL_LOCAL;
		return NULL;
	}
	u->w = w;
	u->fd = fd;
	memcpy(&u->addr, &sb->addr, sb->addrlen);
	u->addrlen = sb->addrlen;
	u->state = UP_CONNECTING;
	event_assign(&u->rev, w->base, fd, EV_READ | EV_PERSIST, fwd_on_event, u);
	event_assign(&u->wev, w->base, fd, EV_WRITE | EV_PERSIST, fwd_on_event, u);
	deadline_assign(&u->tev, w->base, fwd_on_event, u);
	/* a new descriptor number may need memory in libevent's map: without
	 * it the response would never be read (a 504 ten seconds later) */
	if (event_add(&u->rev, NULL) < 0 || event_add(&u->wev, NULL) < 0) {
		event_del(&u->rev);
		close(fd);
		worker_up_put(w, u);
		snprintf(why, whylen, "out of memory");
		*kind = REQ_FAIL_LOCAL;
		return NULL;
	}
	u->writing = true;
	deadline_set(&u->tev, w->us_connect);
	atomic_fetch_add_explicit(&sb->state->connects, 1, memory_order_relaxed);
	return u;
}

static int fwd_begin(struct request *rq, int i, bool fresh, enum req_fail *kind, char *why,
		     size_t whylen)
{
	struct worker *w = rq->w;
	const struct snap_backend *sb = &rq->snap->be[i];
	struct pool *pool = worker_pool(w, sb->state->id);
	struct upstream *u = NULL;
	struct http1_fwd_req f;
	int n;

	/* a backend that sent stray bytes lately: the connections it has
	 * idle may hold more of them, none is reused (they close as they
	 * come, or at their idle timeout) */
	if (deadline_now_us() < atomic_load_explicit(&sb->state->stray_until_us, memory_order_relaxed))
		fresh = true;
	while (!fresh && pool && pool->head) {
		u = pool->head;
		fwd_pool_remove(pool, u);
		/* libevent has its read event queued in this turn: bytes or a
		 * close came while it was idle, which its handler has not seen
		 * yet (the turn's other events ran first); a request sent now
		 * would read them as its answer. A flag of the struct, no
		 * system call. */
		if (u->rev.ev_evcallback.evcb_flags & (EVLIST_ACTIVE | EVLIST_ACTIVE_LATER)) {
			u->state = UP_CONNECTING;       /* not idle any more */
			fwd_idle_news(u);
			fwd_close(u);
			u = NULL;
			continue;
		}
		if (conn_same_addr(&u->addr, u->addrlen, &sb->addr, sb->addrlen))
			break;
		/* the backend moved to a new address on reload */
		u->state = UP_CONNECTING;       /* not idle any more */
		fwd_close(u);
		u = NULL;
	}
	if (u) {
		u->reused = true;
		u->state = UP_HEAD;
		deadline_clear(&u->tev);
	} else {
		u = fwd_connect(w, sb, kind, why, whylen);
		if (!u)
			return -1;
		u->reused = false;
	}
	u->rq = rq;
	req_bind(rq, u);
	if (!u->bufnode && worker_up_bufs(w, u) < 0) {
		snprintf(why, whylen, "out of memory");
		*kind = REQ_FAIL_LOCAL;
		fwd_close(u);
		return -1;
	}
	u->ring_index = i;
	u->backend_id = sb->state->id;
	u->pool = pool;
	u->got_bytes = false;
	u->sent_before = u->out.sent;
	u->t_sent = deadline_clock_us();        /* not the turn's: it goes out now */
	req_upstream_begin(rq, u->t_sent);
	u->resp_done = false;
	u->eof = false;
	u->dechunk = false;
	u->decode = false;
	u->ck_used = 0;
	u->ck_open = false;
	u->in.pos = u->in.len = 0;
	http1_msg_init(&u->resp);
	outq_reset(&u->out);
	if (pool)
		worker_count(&pool->requests);

	f.prefix.p = sb->conf->prefix;
	f.prefix.len = sb->prefix_len;
	f.client_ip.p = rq->ip;
	f.client_ip.len = rq->iplen;
	f.proto.p = rq->https ? "https" : "http";
	f.proto.len = rq->https ? 5 : 4;
	/* Via names the protocol received (RFC 9110 7.6.3), not ours */
	f.via.p = rq->msg.minor == 0 ? "1.0 ringproxy" : "1.1 ringproxy";
	f.via.len = 13;
	f.default_host.p = sb->host_hdr;
	f.default_host.len = sb->host_hdr_len;
	f.host_fixed = sb->host_fixed;
	f.keep_underscores = rq->snap->conf->underscores_in_headers;
	f.drop_fwd = rq->shared;
	f.query = rq->snap->conf->normalize_forward ? (struct http1_str){ NULL, 0 } : rq->qsent.query;
	f.extra.p = rq->cond;
	f.extra.len = rq->cond_len + rq->ae_len;
	n = worker_scratch_fit(w, &u->scratch, &u->scratch_cap) < 0 ? -1 :
	    http1_write_request(&rq->msg, &f, u->out.iov, OUT_IOV_MAX - 1, u->scratch, u->scratch_cap);
	if (n < 0) {
		snprintf(why, whylen, "request head too large to rewrite");
		*kind = REQ_FAIL_LOCAL;
		fwd_close(u);
		return -1;
	}
	u->out.cnt = n;
	if (u->state != UP_CONNECTING) {
		fwd_enter(u);
		fwd_pump(u);
		fwd_leave(u);
	}
	return 0;
}

static int fwd_start(struct request *rq, int i, enum req_fail *kind, char *why, size_t whylen)
{
	return fwd_begin(rq, i, false, kind, why, whylen);
}

static bool fwd_sending(const struct upstream *u)
{
	return !outq_empty(&u->out);
}

static void fwd_request_body(struct upstream *u)
{
	if (u->state == UP_CONNECTING || u->writing)
		return;         /* sent when the socket takes more */
	fwd_enter(u);
	fwd_pump(u);
	fwd_leave(u);
}

/* The response is complete and the client has all of it. */
static void fwd_finish(struct upstream *u)
{
	struct request *rq = u->rq;
	struct worker *w = u->w;
	/* the pool outlives the request: its size is the current config's */
	const struct conf *conf = w->snap->conf;
	struct pool *pool = u->pool;
	bool reuse;

	if (pool) {
		worker_count(&pool->responses);
		worker_hist(&pool->response, worker_now_us(w) - u->t_sent);
	}
	reuse = u->resp.keep_alive && u->resp.framing != HTTP1_BODY_CLOSE && !u->eof &&
		u->in.pos == u->in.len && rq->body_done && outq_empty(&u->out) &&
		!w->stopping && pool && pool->n < conf->pool_size &&
		deadline_now_us() >= atomic_load_explicit(&fwd_backend(u)->stray_until_us, memory_order_relaxed);
	fwd_unbind(u);
	if (reuse) {
		u->state = UP_IDLE;
		/* nothing buffered, nothing queued: an idle pooled
		 * connection holds no buffer */
		worker_up_bufs_put(w, u);
		if (u->read_paused && event_add(&u->rev, NULL) < 0) {
			fwd_close(u);   /* it could not see its own close */
			req_done(rq);
			return;
		}
		u->read_paused = false;
		deadline_set(&u->tev, w->us_idle);
		fwd_pool_push(pool, u);
	} else {
		fwd_close(u);
	}
	req_done(rq);
}

/* Stop reading the response until the client has taken what we hold.
 * Meanwhile the client side's timer watches the client; the backend's body
 * timer would only blame the backend for the client's slowness. */
static void fwd_pause(struct upstream *u)
{
	if (!u->read_paused) {
		event_del(&u->rev);
		if (u->state == UP_BODY)
			deadline_clear(&u->tev);
		u->read_paused = true;
	}
}

static void fwd_drained(struct upstream *u)
{
	if (u->resp_done && u->in.pos == u->in.len) {
		fwd_finish(u);
		return;
	}
	if (u->read_paused && !u->eof) {
		if (event_add(&u->rev, NULL) < 0) {
			fwd_fail(u, 503, REQ_FAIL_LOCAL, "out of memory");
			return;
		}
		if (u->state == UP_BODY)
			deadline_set(&u->tev, u->w->us_response);
		u->read_paused = false;
	}
	if (u->in.pos == u->in.len)
		u->in.pos = u->in.len = 0;
	else
		fwd_process(u);
}

static void fwd_client_drained(struct upstream *u)
{
	fwd_enter(u);
	fwd_drained(u);
	fwd_leave(u);
}

/* The final response's status class, and for a GET or HEAD the verdict
 * of the backend's own cache (tier.c), counted per backend. */
static void fwd_count_class(struct upstream *u)
{
	struct pool *pool = u->pool;
	int st = u->resp.status;
	enum tier_verdict v;

	if (!pool)
		return;
	v = u->rq->msg.method_id == HTTP1_M_GET || u->rq->msg.method_id == HTTP1_M_HEAD ?
	    tier_verdict(&u->resp, (enum tier_status)u->rq->snap->conf->tier_status) : TIER_NONE;
	req_tier(u->rq, v);
	if (v == TIER_HIT)
		worker_count(&pool->tier_hits);
	else if (v == TIER_MISS)
		worker_count(&pool->tier_misses);
	if (st >= 500)
		worker_count(&pool->responses_5xx);
	else if (st >= 400)
		worker_count(&pool->responses_4xx);
	else if (st >= 300)
		worker_count(&pool->responses_3xx);
	else if (st >= 200)
		worker_count(&pool->responses_2xx);
}

/* A final response head was parsed: queue the rewritten head. Returns 0,
 * or -1 after failing the request. */
static int fwd_head(struct upstream *u, size_t head_len)
{
	struct request *rq = u->rq;
	const struct conf *conf = rq->snap->conf;
	const struct snap_backend *sb = &rq->snap->be[u->ring_index];
	struct http1_fwd_resp fr;
	int rc;

	fwd_count_class(u);
	/* a response before the whole request body arrived: the rest of the
	 * body cannot be told from a next request, so the connection ends
	 * after this response, and the client is told so */
	if (u->resp.framing == HTTP1_BODY_CLOSE || !rq->body_done)
		req_close_after(rq);
	/* an HTTP/1.0 client cannot read chunked: decode, end with close */
	u->dechunk = rq->msg.minor == 0 && u->resp.framing == HTTP1_BODY_CHUNKED;
	if (u->dechunk)
		req_close_after(rq);
	memset(&fr, 0, sizeof(fr));
	fr.backend_hdr.p = conf->backend_header;
	fr.backend_hdr.len = rq->snap->backend_header_len;
	/* the writer leaves out the backend's own header of that name by
	 * itself; the cache stores every line not flagged, in a fill or a
	 * revalidation, both of which hold rq->fill */
	if (rq->fill)
		http1_drop_named(&u->resp, fr.backend_hdr);
	if (conf->cache_strip_targeted)
		cachectl_strip_targeted(&u->resp, conf->cache_target_field);
	fr.backend_name.p = sb->conf->name;
	fr.backend_name.len = sb->name_len;
	fr.via.p = u->resp.minor == 0 ? "1.0 ringproxy" : "1.1 ringproxy";
	fr.via.len = 13;
	fr.dechunk = u->dechunk;
	rc = req_response_head(rq, &u->resp, &fr);
	if (!u->rq)
		return -1;      /* answered otherwise (a stale copy): let go of */
	if (rc < 0) {
		atomic_fetch_add(&fwd_backend(u)->bad_responses, 1);
		fwd_fail(u, 502, REQ_FAIL_BAD, "response head too large to rewrite");
		return -1;
	}
	u->decode = u->dechunk || req_rechunks(rq);
	u->in.pos += head_len;
	u->head_end = u->in.pos;
	u->state = UP_BODY;
	u->body_left = u->resp.content_length;
	http1_chunked_init(&u->chunk);
	u->resp_done = u->resp.framing == HTTP1_BODY_NONE ||
		       (u->resp.framing == HTTP1_BODY_LENGTH && u->body_left == 0);
	return 0;
}

/* Queue the body bytes of the buffer. Returns 0, or -1 when the body is
 * malformed (the client connection is then closed). */
static int fwd_body(struct upstream *u)
{
	struct request *rq = u->rq;
	const char *p = u->in.data + u->in.pos;
	size_t avail = u->in.len - u->in.pos, n = 0;
	ssize_t r;

	switch (u->resp.framing) {
	case HTTP1_BODY_LENGTH:
		n = avail < u->body_left ? avail : (size_t)u->body_left;
		u->body_left -= n;
		u->resp_done = u->body_left == 0;
		break;
	case HTTP1_BODY_CHUNKED:
		if (u->decode) {
			while (avail && !u->chunk.done && req_body_room(rq, 2)) {
				size_t off, dlen;

				r = http1_chunked_decode(&u->chunk, p, avail, &off, &dlen);
				if (r < 0)
					return -1;
				if (r == 0)
					break;
				if (dlen)
					req_body(rq, p + off, dlen);
				p += r;
				avail -= (size_t)r;
				u->in.pos += (size_t)r;
			}
			u->resp_done = u->chunk.done;
			return 0;
		}
		r = http1_chunked_scan(&u->chunk, p, avail);
		if (r < 0)
			return -1;
		n = (size_t)r;
		u->resp_done = u->chunk.done;
		break;
	case HTTP1_BODY_CLOSE:
		n = avail;
		break;
	case HTTP1_BODY_NONE:
		u->resp_done = true;
		break;
	}
	req_body(rq, p, n);
	u->in.pos += n;
	return 0;
}

/* The response head (after any interim ones) from the buffer. Returns 1
 * when the body may follow, 0 when more bytes are needed or the request
 * was failed or answered otherwise (then u was closed, and goes as its
 * entry point unwinds). */
static int fwd_parse_head(struct upstream *u)
{
	struct request *rq = u->rq;
	const struct conf *conf = rq->snap->conf;
	/* the head must fit the read buffer (see front_serve) */
	struct http1_limits lim = {
		conf->max_head_size < u->in.cap - 1 ? conf->max_head_size : u->in.cap - 1,
		conf->max_headers < u->hdrs_cap ? conf->max_headers : u->hdrs_cap };
	ssize_t r = http1_parse_response(&u->resp, u->hdrs, u->in.data + u->in.pos,
					 u->in.len - u->in.pos, &lim, rq->msg.method_id);

	if (r == 0)
		return 0;
	if (r < 0) {
		atomic_fetch_add(&fwd_backend(u)->bad_responses, 1);
		fwd_fail(u, 502, REQ_FAIL_BAD, "invalid response: %s",
			 u->resp.error ? u->resp.error : "unparsable");
		return 0;
	}
	if (u->resp.status == 101) {
		atomic_fetch_add(&fwd_backend(u)->bad_responses, 1);
		fwd_fail(u, 502, REQ_FAIL_BAD, "101 Switching Protocols without an upgrade request");
		return 0;
	}
	if (u->resp.status < 200) {
		/* interim (100 Continue, 103): relayed to HTTP/1.1 clients,
		 * dropped for 1.0 */
		req_response_interim(rq, &u->resp);
		u->in.pos += (size_t)r;
		http1_msg_init(&u->resp);
		return 1;
	}
	if (fwd_head(u, (size_t)r) < 0)
		return 0;
	/* body inactivity from here */
	deadline_set(&u->tev, u->w->us_response);
	return 1;
}

static void fwd_process(struct upstream *u)
{
	struct request *rq = u->rq;
	int rc;

	for (;;) {
		size_t before = u->in.pos;

		if (u->state == UP_HEAD && fwd_parse_head(u) == 0)
			return;
		if (u->state == UP_BODY && fwd_body(u) < 0) {
			atomic_fetch_add(&fwd_backend(u)->bad_responses, 1);
			fwd_warn(fwd_backend(u), "backend %s: invalid chunked response body; client connection closed",
				 fwd_backend(u)->name);
			req_abort(rq);
			return;
		}
		if (u->state == UP_BODY && u->resp_done)
			req_response_end(rq);   /* a fill completes now */
		rc = req_send(rq);
		if (!u->rq)
			return;         /* the client went: so did the request */
		if (rc == 0 && req_reads_object(rq)) {
			/* the client reads from the object being filled: the
			 * backend goes on at its own pace, and the connection
			 * is done with once the response is in; until the
			 * client has the head, its slices keep their place and
			 * the body is read after it */
			if (u->in.pos == u->in.len)
				u->in.pos = u->in.len = req_head_out(rq) ? 0 : u->head_end;
			if (u->state == UP_BODY && u->resp_done) {
				if (u->in.pos != u->in.len) {
					u->eof = true;
					fwd_stray(u, "after a response");
				}
				fwd_finish(u);
			}
			return;
		}
		if (rc == 0) {
			fwd_pause(u);
			return;
		}
		if (u->in.pos == u->in.len)
			u->in.pos = u->in.len = 0;
		if (u->state == UP_BODY && u->resp_done) {
			if (u->in.pos != u->in.len) {
				u->eof = true;  /* bytes after the response: not reusable */
				fwd_stray(u, "after a response");
			}
			fwd_finish(u);
			return;
		}
		/* more to do only for bytes after an interim response or
		 * chunks decoded in several passes; stop when none moved */
		if (u->in.pos == u->in.len || u->in.pos == before ||
		    (u->state == UP_BODY && !u->decode))
			return;
	}
}

static void fwd_read(evutil_socket_t fd, short what, void *arg)
{
	struct upstream *u = arg;
	struct request *rq = u->rq;
	struct rbuf *b = &u->in;
	ssize_t n;

	(void)what;
	if (u->state == UP_IDLE) {
		/* drop it before a request picks it */
		fwd_idle_news(u);
		fwd_close(u);
		return;
	}
	if (u->state == UP_CONNECTING)
		return;         /* the write event reports the connect */
	if (b->len == b->cap) {
		/* the head's slices gone, nothing else points here when the
		 * client reads from the object (a chunk-size line cut short
		 * is what stays) */
		if (b->pos > 0 && (req_sent_all(rq) || (req_reads_object(rq) && req_head_out(rq)))) {
			memmove(b->data, b->data + b->pos, b->len - b->pos);
			b->len -= b->pos;
			b->pos = 0;
		} else {
			fwd_pause(u);
			return;
		}
	}
	n = conn_recv(fd, b->data + b->len, b->cap - b->len);
	if (n > 0) {
		struct pool *pool = u->pool;

		if (pool) {
			worker_add(&pool->bytes_in, (uint64_t)n);
			if (!u->got_bytes)
				worker_hist(&pool->ttfb, worker_now_us(u->w) - u->t_sent);
		}
		u->got_bytes = true;
		b->len += (size_t)n;
		/* response_timeout bounds each pause inside a body */
		if (u->state == UP_BODY)
			deadline_set(&u->tev, u->w->us_response);
		fwd_process(u);
		return;
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	u->eof = true;
	if (u->state == UP_HEAD) {
		if (!u->got_bytes)
			fwd_fail(u, 502, REQ_FAIL_LOST, "%s before responding",
				 n == 0 ? "connection closed" : strerror(errno));
		else
			fwd_fail(u, 502, REQ_FAIL_BAD, "response head cut short");
		return;
	}
	/* UP_BODY */
	if (u->resp.framing == HTTP1_BODY_CLOSE && n == 0) {
		event_del(&u->rev);
		u->resp_done = true;
		req_close_after(rq);
		req_response_end(rq);
		if (req_sent_all(rq) || req_reads_object(rq))
			fwd_finish(u);
		return;
	}
	fwd_warn(fwd_backend(u), "backend %s: connection lost in the middle of a response body; client connection closed",
		 fwd_backend(u)->name);
	req_abort(rq);
}

static void fwd_write(evutil_socket_t fd, short what, void *arg)
{
	struct upstream *u = arg;

	(void)what;
	if (u->state == UP_CONNECTING) {
		int err = 0;
		socklen_t len = sizeof(err);

		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			err = errno;
		if (err) {
			atomic_fetch_add(&fwd_backend(u)->connect_errors, 1);
			fwd_fail(u, 502, REQ_FAIL_CONNECT, "connect: %s", strerror(err));
			return;
		}
		u->state = UP_HEAD;
		deadline_clear(&u->tev);
	}
	fwd_pump(u);
}

static void fwd_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct upstream *u = arg;
	const struct conf *conf;

	(void)fd;
	(void)what;
	switch (u->state) {
	case UP_IDLE:
		fwd_close(u);
		return;
	case UP_CONNECTING:
		conf = u->rq->snap->conf;
		atomic_fetch_add(&fwd_backend(u)->timeouts, 1);
		fwd_fail(u, 504, REQ_FAIL_CONNECT, "no connection within %llums",
			 (unsigned long long)conf->connect_timeout_ms);
		return;
	case UP_HEAD:
		conf = u->rq->snap->conf;
		atomic_fetch_add(&fwd_backend(u)->timeouts, 1);
		fwd_fail(u, 504, REQ_FAIL_TIMEOUT, "no response within %llums",
			 (unsigned long long)conf->response_timeout_ms);
		return;
	case UP_BODY:
		atomic_fetch_add(&fwd_backend(u)->timeouts, 1);
		fwd_warn(fwd_backend(u), "backend %s: response body stalled; client connection closed",
			 fwd_backend(u)->name);
		req_abort(u->rq);
		return;
	}
}

/* The one handler of the connection's three events (the read and write
 * events and the timer, told apart by what): the struct outlives a close
 * asked for inside. */
static void fwd_on_event(evutil_socket_t fd, short what, void *arg)
{
	struct upstream *u = arg;
	/* one clock read for the turn's timeouts and timestamps */
	int64_t outer = deadline_turn_begin();

	fwd_enter(u);
	if (what & EV_TIMEOUT) {
		if (deadline_fired(&u->tev))
			fwd_timeout(fd, what, u);
	} else if (what & EV_READ)
		fwd_read(fd, what, u);
	else
		fwd_write(fd, what, u);
	fwd_leave(u);
	deadline_turn_end(outer);
}

const struct req_backend_ops fwd_req_ops = {
	.start = fwd_start,
	.sending = fwd_sending,
	.request_body = fwd_request_body,
	.client_drained = fwd_client_drained,
	.close = fwd_close,
};
