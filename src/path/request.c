/*
 * request.c -- one request's state, from its parsed head to its end, on
 * its worker's thread (HAProxy's stream). The client side (front.c)
 * creates and ends it; between the two it is routed here (key ->
 * [cache] -> ring walk and eligibility -> a backend through the backend
 * side's ops, forward.c's)
 * and answered through the few functions request.h names: a response
 * head, body bytes, done, failed. The proxy's own replies, the request
 * id, retries along the walk and the passive-health accounting of a lost
 * request live here too, since they are about the request, not about a
 * socket.
 *
 * This file owns every field of struct request; the others read them.
 */
#include "path/request.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/addr.h"
#include "path/access.h"
#include "backend/balance.h"
#include "cache/cache.h"
#include "http/cachectl.h"
#include "config/conf.h"
#include "path/conn.h"
#include "base/deadline.h"
#include "backend/health.h"
#include "path/key.h"
#include "base/log.h"
#include "path/proxy-t.h"
#include "http/range.h"
#include "http/tier.h"
#include "path/refresh.h"
#include "backend/snapshot.h"
#include "http/vary.h"
#include "path/worker.h"

/* What a connection lost after the request went out is called when it is
 * counted against a backend's health. */
#define REQ_LOST_WHAT "connection lost before a response"

/* The longest cache key (Host and target) a request is cached under; a
 * longer one bypasses the cache. On the stack, never in the struct. */
#define REQ_KEY_MAX 4096

/* The transitions of a request's state (request-t.h), the only ones
 * req_set_state lets happen: from each state, the set it may go to. A
 * request ends (REQ_IDLE) from any state, the connection closing under
 * it. */
#define REQ_TO(s) (1u << (s))
static const unsigned req_next[] = {
	[REQ_IDLE] = REQ_TO(REQ_IDLE) | REQ_TO(REQ_ROUTE),
	[REQ_ROUTE] = REQ_TO(REQ_IDLE) | REQ_TO(REQ_ROUTE) | REQ_TO(REQ_BACKEND) | REQ_TO(REQ_WAIT) |
		      REQ_TO(REQ_REPLY),
	[REQ_BACKEND] = REQ_TO(REQ_IDLE) | REQ_TO(REQ_ROUTE) | REQ_TO(REQ_BACKEND) | REQ_TO(REQ_REPLY) |
			REQ_TO(REQ_DONE),
	[REQ_WAIT] = REQ_TO(REQ_IDLE) | REQ_TO(REQ_ROUTE) | REQ_TO(REQ_REPLY),
	[REQ_REPLY] = REQ_TO(REQ_IDLE) | REQ_TO(REQ_DONE),
	[REQ_DONE] = REQ_TO(REQ_IDLE),
};

/* Every change of rq->state goes through here. The check is kept in
 * release builds (meson.build: b_ndebug=false), as Varnish and HAProxy
 * keep theirs: a request in a state its code did not plan for would
 * answer twice or never, and stopping says where. */
static void req_set_state(struct request *rq, enum req_state to)
{
	bool planned = (unsigned)rq->state < sizeof(req_next) / sizeof(req_next[0]) &&
		       (req_next[rq->state] & REQ_TO(to));

	assert(planned);
	(void)planned;          /* a build with -Db_ndebug=true */
	rq->state = to;
}

static void req_dispatch(struct request *rq, int last_status);
static void req_reply(struct request *rq, int status, const char *why, bool force_close);
static void req_reply_send(struct request *rq);
static void req_on_wait_timeout(evutil_socket_t fd, short what, void *arg);
static void req_on_wake(struct mbox_msg *m);
static bool req_cache_lookup(struct request *rq);
static int req_reply_obj(struct request *rq, struct cache_obj *o, const char *how);
static bool req_stale_if_error(struct request *rq);
static bool req_conditional(const struct http1_msg *m);
static void req_revalidated(struct request *rq, const struct http1_msg *resp);
static void req_log_fields(struct request *rq, struct access_req *l, int64_t end_us);
static void req_obj_drop(struct request *rq, struct cache_obj *o);

void req_init(struct request *rq, struct worker *w, struct client *c, const struct rbuf *in,
	      struct outq *out, char **scratch, size_t *scratch_cap,
	      const char *ip, size_t iplen,
	      const struct req_client_ops *client, const struct req_backend_ops *backend)
{
	memset(rq, 0, offsetof(struct request, walk));
	rq->cl = c;
	rq->w = w;
	rq->client = client;
	rq->backend = backend;
	rq->in = in;
	rq->out = out;
	rq->scratch = scratch;
	rq->scratch_cap = scratch_cap;
	rq->ip = ip;
	rq->iplen = iplen;
	rq->lost = -1;
	rq->wake.fn = req_on_wake;
	/* rq->msg is zeroed, as http1_msg_init would; wait_ev is assigned
	 * when a wait begins (req_wait), the only time it is added */
}

void req_h2_stream(struct request *rq, uint32_t id)
{
	rq->h2_stream = id;
}

void req_client_ip(struct request *rq, const char *ip, size_t iplen)
{
	rq->ip = ip;
	rq->iplen = iplen;
}

void req_client_https(struct request *rq, bool https)
{
	rq->https = https;
}

void req_client_tls(struct request *rq, const char *version, const char *cipher, const char *sni)
{
	rq->tls_version = version;
	rq->tls_cipher = cipher;
	rq->sni = sni;
}

/* Keep the method and target of a request with a body for its log line. */
static void req_copy_line(struct request *rq)
{
	size_t ml = rq->msg.method.len < 32 ? rq->msg.method.len : 32;
	size_t tl = rq->msg.target.len < sizeof(rq->line) - ml ? rq->msg.target.len : sizeof(rq->line) - ml;

	memcpy(rq->line, rq->msg.method.p, ml);
	memcpy(rq->line + ml, rq->msg.target.p, tl);
	rq->line_mlen = (uint16_t)ml;
	rq->line_tlen = (uint16_t)tl;
	rq->line_copied = true;
}

/* The request's method and target for a log line: the copy when there is
 * one (a request with a body: its head may be gone from the read buffer,
 * compacted while the body streamed); the target as the client sent it,
 * before [ring] query normalised it. */
static void req_line(const struct request *rq, struct http1_str *method, struct http1_str *target)
{
	if (rq->line_copied) {
		*method = (struct http1_str){ rq->line, rq->line_mlen };
		*target = (struct http1_str){ rq->line + rq->line_mlen, rq->line_tlen };
	} else {
		*method = rq->msg.method;
		*target = rq->qsent.target.p ? rq->qsent.target : rq->msg.target;
	}
}

void req_begin(struct request *rq, size_t head_len, uint64_t rid)
{
	struct worker *w = rq->w;

	req_set_state(rq, REQ_ROUTE);
	rq->end_kind = REQ_END_NONE;
	rq->rid = rid;
	rq->t_begin = worker_now_us(w);
	rq->status = 0;
	rq->out_sent0 = rq->out->sent;
	rq->route = NULL;
	rq->line_copied = false;
	if (rq->msg.framing != HTTP1_BODY_NONE)
		req_copy_line(rq);
	rq->snap = worker_snap_take(w);
	rq->body_end = rq->in->pos + head_len;
	rq->head_sent = false;
	rq->resp_started = false;
	rq->tries = 0;
	rq->lost = -1;
	rq->why[0] = '\0';
	rq->body_left = 0;
	rq->body_done = true;
	if (rq->msg.framing == HTTP1_BODY_LENGTH && rq->msg.content_length > 0) {
		rq->body_left = rq->msg.content_length;
		rq->body_done = false;
	} else if (rq->msg.framing == HTTP1_BODY_CHUNKED) {
		http1_chunked_init(&rq->chunk);
		rq->body_done = false;
	}
	rq->close_after = !rq->msg.keep_alive || w->stopping;
	rq->up_t0 = 0;
	rq->tier = 0;
	rq->cache_fwd = NULL;
	rq->shared = false;
	rq->inval.len = 0;
	rq->collapsed = false;
	rq->from_fill = false;
	rq->rechunk = false;
	rq->body_in = false;
	rq->last_chunk = false;
	rq->fill_queued = 0;
	rq->stale = NULL;
	rq->cond_len = 0;
	rq->ae_len = 0;
}

/* PURGE and BAN on the proxy port: a backend's own ACL sees the proxy's
 * address, not the client's, so the proxy decides: only clients in
 * [cache] purge_allow may send them (the admin listener's /purge is the
 * way to purge). */
static bool req_purge_refused(struct request *rq)
{
	const char *allow = rq->snap->conf->cache_purge_allow;
	char err[8];

	if (!cachectl_is_purge(rq->msg.method))
		return false;
	if (allow && *allow && addr_in_list(allow, rq->ip, err, sizeof(err)) == 1)
		return false;
	req_reply(rq, 405, "PURGE and BAN are served only for [cache] purge_allow clients; purge through the "
		  "admin listener (POST /purge?url=)", false);
	return true;
}

/* The ring key's position and the start of the walk (balance_start also
 * counts the key for hot-key detection): for a request that goes to a
 * backend, waits for another's fetch or revalidates, not for a fresh hit,
 * which never loads a backend. */
static void req_route(struct request *rq)
{
	uint64_t keyu = 0;

	rq->keypos = key_pos(rq->snap->conf->scheme, rq->snap->conf->key, &rq->msg,
			     rq->snap->ramp ? &keyu : NULL);
	balance_start(rq->snap, &rq->walk, &rq->pick, rq->keypos, keyu);
	key_ramp(rq->snap, &rq->msg, rq->pick.ramp_pos);
}

void req_serve(struct request *rq)
{
	if (req_purge_refused(rq))
		return;
	/* one normalised target for the ring key, the cache key and the
	 * backend ([ring] query, drop_params) */
	query_apply(&rq->snap->conf->query, &rq->msg, rq->qbuf, &rq->qsent);
	/* [cache]: the lookup goes first: a fresh hit answers from memory,
	 * a fetch in flight elsewhere parks the request with req_wait (the
	 * walk is ready for when the wait ends without an answer); every
	 * request not answered from a fresh object is routed there */
	if (req_cache_lookup(rq))
		return;
	req_dispatch(rq, 503);
}

void req_refuse(struct request *rq, uint64_t rid, int status, const char *why)
{
	rq->rid = rid;
	rq->t_begin = worker_now_us(rq->w);
	rq->end_kind = REQ_END_NONE;
	rq->status = 0;
	rq->out_sent0 = rq->out->sent;
	rq->route = NULL;
	rq->line_copied = false;
	req_set_state(rq, REQ_ROUTE);
	rq->body_done = false;          /* forces the close */
	rq->resp_started = false;
	req_reply(rq, status, why, true);
}

void req_close_after(struct request *rq)
{
	rq->close_after = true;
}

/* The request leaves its backend (cur): its connection, if it still has
 * one, is let go of, and its in-flight slot given back. The slot is the
 * request's from balance_next to here, whatever the backend side did:
 * a resend on a fresh connection to the same backend keeps it. */
static void req_leave(struct request *rq)
{
	if (rq->up)
		rq->backend->close(rq->up);      /* unbinds */
	if (rq->slot) {
		balance_release(rq->snap->be[rq->cur].state);
		rq->slot = false;
	}
}

/* A failure held back by req_failed (a connection lost after the request
 * went out, then retried elsewhere) is its backend's after all, since no
 * second backend lost the request the same way: count it now. */
static void req_settle(struct request *rq)
{
	if (rq->lost >= 0 && rq->snap)
		health_request_failed(rq->snap, rq->lost, REQ_LOST_WHAT);
	rq->lost = -1;
}

bool req_end(struct request *rq)
{
	req_leave(rq);
	if (rq->state == REQ_WAIT) {
		event_del(&rq->wait_ev);
		/* false: the wake-up is on its way; the connection keeps the
		 * struct until it came (req_on_wake) */
		if (cache_wait_cancel(rq->w->proxy->cache, &rq->waiter))
			rq->wake_due = false;
	}
	/* the leader's client went away (or the backend failed it): its
	 * waiters go to the backend on their own */
	if (rq->fill) {
		cache_fill_abort(rq->fill);
		rq->fill = NULL;
	}
	req_obj_drop(rq, rq->obj);
	rq->obj = NULL;
	rq->from_fill = false;
	rq->rechunk = false;
	cache_obj_release(rq->stale);
	rq->stale = NULL;
	req_settle(rq);
	if (rq->state != REQ_IDLE) {
		/* one clock read for the histogram and the log line: the
		 * clock, not the turn's start, which may be t_begin's */
		int64_t took = deadline_clock_us() - rq->t_begin;

		if (rq->state != REQ_DONE && rq->end_kind == REQ_END_NONE)
			rq->end_kind = REQ_END_ABORT;
		else if (rq->state == REQ_DONE)
			worker_hist(&rq->w->request, took);
		/* [log] access_hits: the cache's answers, all, none or a
		 * sample. The worker's config, not the request's: a reply
		 * of the proxy's own to a head it could not parse has no
		 * snapshot */
		if (access_wanted() && (rq->end_kind != REQ_END_CACHE ||
					access_hit_wanted(&rq->w->alog, rq->w->snap->conf->access_hits_every))) {
			struct access_fields f;

			req_log_fields(rq, &f.log, rq->t_begin + took);
			f.ip = rq->ip;
			f.iplen = rq->iplen;
			f.minor = rq->msg.minor;
			f.h2_stream = rq->h2_stream;
			f.dur_us = took;
			f.tls_version = rq->tls_version;
			f.tls_cipher = rq->tls_cipher;
			f.sni = rq->sni;
			access_log(&rq->w->alog, rq->w->snap->conf->access_format == CONF_ACCESS_JSON,
				   &f, &rq->msg, rq->t_begin);
		}
	}
	worker_snap_drop(rq->w, rq->snap);
	rq->snap = NULL;
	req_set_state(rq, REQ_IDLE);
	rq->resp_started = false;
	http1_msg_init(&rq->msg);
	rq->qsent = (struct query_sent){ { NULL, 0 }, { NULL, 0 } };
	return !rq->wake_due;
}

/* ---- the client's buffer ------------------------------------------------ */

size_t req_keep_from(const struct request *rq)
{
	if (rq->state == REQ_IDLE || !rq->head_sent || rq->msg.framing == HTTP1_BODY_NONE ||
	    (rq->up && rq->backend->sending(rq->up)))
		return 0;
	return rq->body_end;
}

void req_rebase(struct request *rq, size_t shift)
{
	rq->body_end -= shift;
}

int req_take_body(struct request *rq, const char **p, size_t *n)
{
	size_t avail = rq->in->len - rq->body_end, used;

	*p = rq->in->data + rq->body_end;
	*n = 0;
	if (rq->body_done || avail == 0)
		return 0;
	if (rq->msg.framing == HTTP1_BODY_LENGTH) {
		*n = avail < rq->body_left ? avail : (size_t)rq->body_left;
		used = *n;
		rq->body_left -= *n;
		rq->body_done = rq->body_left == 0;
	} else {
		size_t off;
		ssize_t r = http1_chunked_decode(&rq->chunk, *p, avail, &off, n);

		if (r < 0)
			return -1;
		*p += off;
		used = (size_t)r;
		rq->body_done = rq->chunk.done;
	}
	rq->body_end += used;
	if (rq->body_done)
		rq->client->body_taken(rq->cl);
	return 0;
}

void req_head_sent(struct request *rq)
{
	rq->head_sent = true;
}

void req_upstream_begin(struct request *rq, int64_t t_us)
{
	rq->up_t0 = t_us;
	rq->tier = 0;
}

void req_tier(struct request *rq, int verdict)
{
	rq->tier = (uint8_t)verdict;
}

void req_want_body(struct request *rq)
{
	rq->client->resume(rq->cl);
}

void req_client_data(struct request *rq)
{
	if (rq->up)
		rq->backend->request_body(rq->up);
}

static bool req_fill_pump(struct request *rq);

void req_client_drained(struct request *rq)
{
	if (req_fill_pump(rq) && req_send(rq) <= 0)
		return;
	if (rq->up) {
		rq->backend->client_drained(rq->up);
	} else if (rq->state == REQ_REPLY) {
		req_set_state(rq, REQ_DONE);
		rq->client->done(rq->cl);
	}
}

/* ---- the answering side --------------------------------------------------- */

void req_bind(struct request *rq, struct upstream *u)
{
	rq->up = u;
	req_set_state(rq, REQ_BACKEND);
}

void req_unbind(struct request *rq)
{
	rq->up = NULL;
}

bool req_retryable(const struct request *rq)
{
	return (rq->msg.method_id == HTTP1_M_GET || rq->msg.method_id == HTTP1_M_HEAD) &&
	       rq->msg.framing == HTTP1_BODY_NONE && !rq->resp_started;
}

void req_response_interim(struct request *rq, const struct http1_msg *resp)
{
	struct http1_fwd_resp fr;
	struct iovec *v;
	int room, n;

	if (rq->client->head) {
		if (rq->client->interim)
			rq->client->interim(rq->cl, resp);
		return;
	}
	if (rq->msg.minor != 1)
		return;
	memset(&fr, 0, sizeof(fr));
	v = outq_tail(rq->out, &room);
	n = http1_write_response(resp, &fr, v, room - 1, *rq->scratch, *rq->scratch_cap);
	if (n > 0)
		outq_grow(rq->out, n);
}

/* The Cache-Status line of a forwarded response (RFC 9211): fwd is one of
 * the values req_cache_lookup sets. Static strings: no formatting on a
 * miss. */
static const char *req_cache_status(const char *fwd, bool stored)
{
	if (strcmp(fwd, "miss") == 0)
		return stored ? "Cache-Status: ringproxy; fwd=miss; stored\r\n" : "Cache-Status: ringproxy; fwd=miss\r\n";
	if (strcmp(fwd, "request") == 0)
		return stored ? "Cache-Status: ringproxy; fwd=request; stored\r\n" :
				"Cache-Status: ringproxy; fwd=request\r\n";
	return "Cache-Status: ringproxy; fwd=bypass\r\n";
}

/* Whether the backend's answer to this request is the URL's own, so that
 * a non-storable one may mark the key uncacheable for everyone
 * (cache_fill_begin): not when the request was conditional (a 304 to its
 * own validators), and not for a status that speaks of this request or of
 * a passing state (a 400 for its oversized header, a 503 in an outage). */
static bool req_answer_of_url(const struct request *rq, const struct http1_msg *resp)
{
	return cachectl_status_ok(resp->status) && !req_conditional(&rq->msg);
}

/* The cache's part in a backend's response head: start storing it when
 * this request leads a fill and it may be stored, invalidate the URL after
 * a successful unsafe method, and say what happened (Cache-Status, in
 * fr->extra). */
static void req_cache_response(struct request *rq, const struct http1_msg *resp,
			       struct http1_fwd_resp *fr)
{
	struct cache *cache = rq->w->proxy->cache;
	bool stored = false;

	/* a key's first use with nobody waiting: not stored, and the
	 * response not even analysed (an all-miss load costs about what it
	 * does with the cache off) */
	if (rq->fill && cache_fill_want(rq->fill) < 0)
		rq->fill = NULL;
	if (rq->fill) {
		struct cachectl_meta meta;
		char spec[VARY_SPEC_MAX];
		ssize_t vl;

		cachectl_response(&rq->cc, rq->msg.method_id, resp, rq->sent_at, (int64_t)time(NULL),
				  (int64_t)(rq->snap->conf->cache_grace_ms / 1000), &meta);
		meta.resident_at = cache_now();
		/* the variant this request selects, if the response varies */
		vl = vary_spec(resp, &rq->msg, &rq->snap->conf->cache_formats, spec, sizeof(spec));
		if (vl > 0)
			meta.vary = (struct http1_str){ spec, (size_t)vl };
		if (fr->dechunk ||      /* bytes go out decoded: not what a fill takes */
		    (!meta.storable && !req_answer_of_url(rq, resp)) ||
		    (meta.storable && (vl < 0 ||        /* a value it cannot key */
				       vary_asked_other(cache_fill_vary(rq->fill),
							(struct http1_str){ spec, vl > 0 ? (size_t)vl : 0 }) ||
				       /* an image variant holds its key's format,
					* whatever Accept this client sent */
				       !vary_image_holds((struct http1_str){ spec, vl > 0 ? (size_t)vl : 0 }, resp,
							 &rq->snap->conf->cache_formats))))
			cache_fill_abort(rq->fill);     /* waiters go on, no marker */
		else
			stored = cache_fill_begin(rq->fill, resp, &meta, fr->backend_name.p,
						  fr->backend_name.len) == 0;
		if (!stored)
			rq->fill = NULL;        /* freed by begin or abort */
	}
	if (rq->inval.len && cachectl_invalidates(&rq->msg, resp->status)) {
		cache_invalidate(cache, &rq->inval);
		if (rq->inval_path_len)
			cache_invalidate_locations(cache, (struct http1_str){ rq->inval_base, rq->inval_host_len },
						   (struct http1_str){ rq->inval_base + rq->inval_host_len,
								       rq->inval_path_len }, resp);
	}
	if (!rq->cache_fwd)
		return;
	fr->extra.p = req_cache_status(rq->cache_fwd, stored);
	fr->extra.len = strlen(fr->extra.p);
}

int req_response_head(struct request *rq, const struct http1_msg *resp, struct http1_fwd_resp *fr)
{
	const struct snap_backend *sb = &rq->snap->be[rq->cur];
	struct iovec *v;
	int room, n;

	/* passive health: a final response is a backend that answers, but
	 * a 5xx one counts as a failure with [health] passive_5xx */
	if (resp->status >= 500 && rq->snap->conf->passive_5xx)
		health_request_failed(rq->snap, rq->cur, "5xx responses");
	else
		health_request_ok(sb->state, sb->conf);
	/* stale-if-error: a 5xx for an expired object still in its window
	 * is dropped (with its connection) and the stale copy answers */
	if (resp->status >= 500 && req_stale_if_error(rq))
		return 0;
	if (resp->status == 304 && rq->cond_len && rq->stale) {
		req_revalidated(rq, resp);
		return 0;
	}
	req_cache_response(rq, resp, fr);
	fr->close = rq->close_after;
	fr->keep_alive_10 = rq->msg.minor == 0 && !rq->close_after;
	if (rq->client->head) {
		if (rq->client->head(rq->cl, resp, fr) < 0)
			return -1;
	} else {
		v = outq_tail(rq->out, &room);
		n = *rq->scratch ? http1_write_response(resp, fr, v, room - 1, *rq->scratch, *rq->scratch_cap) : -1;
		if (n < 0 && worker_scratch_fit(rq->w, rq->scratch, rq->scratch_cap) > 0)
			n = http1_write_response(resp, fr, v, room - 1, *rq->scratch, *rq->scratch_cap);
		if (n < 0)
			return -1;
		outq_grow(rq->out, n);
	}
	rq->resp_started = true;
	rq->status = resp->status;
	/* the client reads the body from the object as it fills, once the
	 * head (slices of the backend's buffer) is out; a chunked one
	 * decoded, and framed again here */
	if (rq->fill && (rq->obj = cache_fill_hold(rq->fill)) != NULL) {
		rq->from_fill = true;
		rq->rechunk = resp->framing == HTTP1_BODY_CHUNKED;
		rq->fill_head_end = rq->out->sent + outq_bytes(rq->out);
	}
	return 0;
}

/* (rechunk) Queue as one chunk the object's bytes not queued yet, then
 * p[0..n) (the backend's buffer, once the fill is dropped); and the
 * last-chunk when the body is complete. Its chunk-size line is the one
 * not in use: at most one other is still on its way (req_fill_pump and
 * req_body_room queue a chunk only once the queue is empty, but for the
 * one that takes over when the fill is dropped). Returns 1 when it
 * queued something, 0 when there was nothing to queue, -1 when the
 * queue is full. */
static int req_chunk_out(struct request *rq, const char *p, size_t n)
{
	struct iovec b = cache_obj_body(rq->obj);
	size_t k = b.iov_len - rq->fill_queued;
	char *line;

	if (rq->out->cnt > OUT_IOV_MAX - 5)
		return -1;
	if (k + n > 0) {
		line = rq->chunk_line[rq->chunk_line_i ^= 1];
		outq_add(rq->out, line, http1_chunk_line(line, k + n, false));
		outq_add(rq->out, (const char *)b.iov_base + rq->fill_queued, k);
		outq_add(rq->out, p, n);
		outq_add(rq->out, "\r\n", 2);
		rq->fill_queued += k;
	} else if (!rq->body_in || rq->last_chunk) {
		return 0;
	}
	if (rq->body_in && !rq->last_chunk) {
		/* trailers are not relayed (nor stored) */
		outq_add(rq->out, "0\r\n\r\n", 5);
		rq->last_chunk = true;
	}
	return 1;
}

/* (rechunk) Once the client has taken all that is queued, queue what the
 * fill added since. Whether it queued anything. */
static bool req_fill_pump(struct request *rq)
{
	if (!rq->rechunk || !rq->from_fill || !outq_empty(rq->out))
		return false;
	return req_chunk_out(rq, NULL, 0) > 0;
}

bool req_rechunks(const struct request *rq)
{
	return rq->rechunk;
}

int req_body(struct request *rq, const void *p, size_t n)
{
	/* a fill that grows past max_object (or whose framing breaks) is
	 * dropped; the client's copy streams on (from here on from the
	 * backend's buffer: the object holds only what came before) */
	if (rq->fill && n && cache_fill_body(rq->fill, p, n) < 0) {
		rq->fill = NULL;
		rq->from_fill = false;
	}
	if (rq->rechunk) {
		if (rq->from_fill) {
			req_fill_pump(rq);
			return 0;
		}
		return req_chunk_out(rq, p, n) < 0 ? -1 : 0;
	}
	if (rq->from_fill) {
		struct iovec b = cache_obj_body(rq->obj);

		/* the n bytes just copied: the end of what it holds */
		return outq_append(rq->out, (const char *)b.iov_base + b.iov_len - n, n);
	}
	return outq_add(rq->out, p, n);
}

bool req_reads_object(const struct request *rq)
{
	return rq->from_fill;
}

bool req_head_out(const struct request *rq)
{
	return rq->out->sent >= rq->fill_head_end;
}

void req_response_end(struct request *rq)
{
	/* stored, and its waiters woken, now: not once this client has
	 * read it all */
	if (rq->fill) {
		cache_fill_done(rq->fill);
		rq->fill = NULL;
	}
	rq->body_in = true;
	/* relayed after a dropped fill: the last-chunk goes after the rest
	 * (from the object, req_send queues it) */
	if (rq->rechunk && !rq->from_fill)
		req_chunk_out(rq, NULL, 0);
}

bool req_sent_all(const struct request *rq)
{
	return outq_empty(rq->out);
}

bool req_body_room(const struct request *rq, int slices)
{
	if (rq->rechunk && !rq->from_fill)
		return outq_empty(rq->out);     /* one chunk-size line at a time */
	return rq->out->cnt <= OUT_IOV_MAX - slices;
}

int req_send(struct request *rq)
{
	int rc;

	/* a chunk of what the fill added, and again if the client took all */
	req_fill_pump(rq);
	rc = rq->client->send(rq->cl);
	if (rc == 1 && req_fill_pump(rq))
		rc = rq->client->send(rq->cl);

	if (rc < 0) {
		rq->client->close(rq->cl);
		return 0;
	}
	return rc;
}

void req_done(struct request *rq)
{
	req_leave(rq);
	req_response_end(rq);
	rq->end_kind = REQ_END_BACKEND;
	if (!req_sent_all(rq)) {
		/* the rest goes from the object (req_reads_object), as a hit's
		 * would: req_client_drained ends it */
		req_set_state(rq, REQ_REPLY);
		return;
	}
	req_set_state(rq, REQ_DONE);
	rq->client->done(rq->cl);
}

void req_abort(struct request *rq)
{
	rq->client->close(rq->cl);
}

/* ---- the proxy's own replies ------------------------------------------------ */

/* v's 8 hex digits at out, a word at a time (the log formats one a
 * request): each nibble spread into a byte, then '0' or 'a' - 10 added. */
static void req_hex8(char *out, uint32_t v)
{
	uint64_t x = v;

	x = (x | x << 16) & 0x0000ffff0000ffffull;
	x = (x | x << 8) & 0x00ff00ff00ff00ffull;
	x = (x | x << 4) & 0x0f0f0f0f0f0f0f0full;
	/* bytes now hold the nibbles, the lowest nibble in the lowest byte */
	x += 0x3030303030303030ull + 0x27 * (((x + 0x0606060606060606ull) >> 4) & 0x0101010101010101ull);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	x = __builtin_bswap64(x);
#endif
	memcpy(out, &x, 8);
}

/* A request id: the process's start time (Unix seconds), the worker and
 * the worker's count of requests, in hex: 8 + 2 + 10 digits, e.g.
 * 66a1f3c0 01 000000002a without the spaces, at out (21 bytes with the
 * NUL). Unique within a process run (and across runs started in
 * different seconds); it costs a counter per request, and is formatted
 * only for a reply or a log line, without printf: the worker's part is
 * the same for all its requests. */
static void req_rid(const struct request *rq, char *out)
{
	static const char hex[] = "0123456789abcdef";
	struct worker *w = rq->w;
	uint64_t v = rq->rid & 0xffffffffffu;

	if (!w->rid_prefix[0]) {
		req_hex8(w->rid_prefix, w->started_at);
		w->rid_prefix[8] = hex[((unsigned)w->id >> 4) & 15];
		w->rid_prefix[9] = hex[(unsigned)w->id & 15];
	}
	memcpy(out, w->rid_prefix, 10);
	out[10] = hex[v >> 36 & 15];
	out[11] = hex[v >> 32 & 15];
	req_hex8(out + 12, (uint32_t)v);
	out[20] = '\0';
}

static void req_log_fields(struct request *rq, struct access_req *l, int64_t end_us)
{
	l->line_copied = rq->line_copied;
	req_line(rq, &l->method, &l->target);
	l->status = rq->status ? rq->status : 499;
	l->bytes = rq->out->sent - rq->out_sent0;
	l->backend = NULL;
	l->why = "-";
	if (rq->end_kind == REQ_END_CACHE) {
		l->why = "cache";
	} else if (rq->route && rq->snap && (rq->end_kind == REQ_END_BACKEND || rq->resp_started)) {
		l->backend = rq->snap->be[rq->cur].conf->name;
		l->why = rq->route;
	} else if (rq->route) {
		l->why = rq->route;     /* where it went before it failed */
	}
	l->cache = rq->end_kind == REQ_END_CACHE ? (rq->collapsed ? "collapsed" : "hit") :
		   rq->cache_fwd ? rq->cache_fwd : "-";
	/* what the backend behind took and what its own cache said; none
	 * for an answer from ringproxy's cache (a revalidation's backend
	 * time is the backend's still) */
	l->upstream_us = rq->up_t0 && rq->end_kind != REQ_END_CACHE ? end_us - rq->up_t0 : -1;
	l->tier = rq->tier == TIER_HIT ? "hit" : rq->tier == TIER_MISS ? "miss" : "-";
	req_rid(rq, l->rid);
}

/* Log lines of the proxy's own replies, per worker and second: a flood of
 * bad requests or a dead tier must not flood the log. */
#define REQ_LOG_PER_SEC 100

/* How much of a target a log line shows. */
#define REQ_LOG_TARGET 512

/* Bytes of s that are safe in a log line: it stops at the first byte that
 * is not printable ASCII (a head the parser refused may hold any). */
static int req_printable(struct http1_str s, size_t max)
{
	size_t n = 0;

	while (s.p && n < s.len && n < max && s.p[n] > ' ' && s.p[n] < 0x7f)
		n++;
	return (int)n;
}

/* The log line of a reply of the proxy's own: the request id the client
 * saw, the status, the request and the detail the client is not shown
 * (for a backend failure: its name, address and what happened). */
static void req_log_reply(struct request *rq, int status, const char *rid, const char *detail)
{
	struct worker *w = rq->w;
	enum log_level level = status == 502 || status == 504 ? LOG_WARN : LOG_INFO;
	struct http1_str method, target;
	int ml, tl;

	if ((int)level > (int)log_get_level())
		return;
	if (!worker_log_allow(w, REQ_LOG_PER_SEC))
		return;
	req_line(rq, &method, &target);
	ml = req_printable(method, 32);
	tl = req_printable(target, REQ_LOG_TARGET);
	log_msg(level, "request %s: %d for %.*s %.*s%s from %s: %s", rid, status,
		ml ? ml : 1, ml ? method.p : "-", tl ? tl : 1, tl ? target.p : "-",
		(size_t)tl < rq->msg.target.len ? "..." : "", rq->ip, detail);
}

/* What the client is told: a backend failure in general words only (the
 * backend's name and address stay in the log); otherwise the proxy's own
 * words about the request (the codec's reason, why no backend took it). */
static const char *req_public(int status, const char *why)
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

/* A response made here (the proxy's own, or a cached object) is queued:
 * write it. Written at once, the request is REQ_DONE on return; else
 * req_client_drained ends it. */
static void req_reply_send(struct request *rq)
{
	rq->resp_started = true;
	req_set_state(rq, REQ_REPLY);
	switch (rq->client->send(rq->cl)) {
	case 1:
		req_set_state(rq, REQ_DONE);
		rq->client->done(rq->cl);
		break;
	case 0:
		break;
	default:
		rq->client->close(rq->cl);
		break;
	}
}

/* The head of a 304 for a stored head (status line, then lines ending
 * CRLF, no final CRLF): our status line and the stored lines a 304 keeps
 * (RFC 9110 15.4.5: Cache-Control, Date, ETag, Expires, Vary, and
 * Last-Modified), into buf. Its length, or -1 if it does not fit. */
static int req_not_modified_head(struct iovec head, char *buf, size_t cap, int minor)
{
	static const char *const keep[] = { "cache-control", "date", "etag", "expires", "vary",
					     "last-modified" };
	const char *p = head.iov_base, *end = p + head.iov_len, *eol;
	int n = snprintf(buf, cap, "HTTP/1.%d 304 Not Modified\r\n", minor == 0 ? 0 : 1);

	/* skip the status line */
	eol = memchr(p, '\n', (size_t)(end - p));
	p = eol ? eol + 1 : end;
	for (; p < end; p = eol + 1) {
		const char *colon;
		struct http1_str name;

		eol = memchr(p, '\n', (size_t)(end - p));
		if (!eol)
			eol = end - 1;
		colon = memchr(p, ':', (size_t)(eol - p));
		if (!colon)
			continue;
		name.p = p;
		name.len = (size_t)(colon - p);
		for (size_t k = 0; k < sizeof(keep) / sizeof(keep[0]); k++) {
			if (!http1_str_ieq(name, keep[k]) || strlen(keep[k]) != name.len)
				continue;
			if ((size_t)n + (size_t)(eol + 1 - p) >= cap)
				return -1;
			memcpy(buf + n, p, (size_t)(eol + 1 - p));
			n += (int)(eol + 1 - p);
		}
	}
	return n;
}

/* The lines after the stored head of a hit of o at now ("hit" or how;
 * plain: how is the plain "hit"), without the Connection line and blank
 * line that end them, into buf. A hit from the worker's memo keeps them
 * with the object for the second and config they were made for (each hit
 * of a hot object would make the same ones again). Their length, or -1
 * when they do not fit. */
static int req_hit_lines(struct request *rq, struct cache_obj *o, const char *how, bool plain,
			 int64_t now, char *buf, size_t cap)
{
	const struct conf *conf = rq->snap->conf;
	struct cache_memo_note *note = NULL;
	int m;

	if (rq->memo_slot != 0 && plain) {
		note = cache_memo_note(rq->w->memo, rq->memo_slot - 1);
		if (note->len != 0 && note->at == now && note->tag == rq->snap->generation) {
			if (note->len > cap)
				return -1;
			memcpy(buf, note->buf, note->len);
			return (int)note->len;
		}
	}
	/* "; cached": the bytes are this cache's, filled by be (the ring may
	 * send the URL elsewhere now); a collapsed wait got a fresh fill */
	m = cachectl_hit_lines(buf, cap, cache_obj_age(o, now), cache_obj_ttl(o, now), how,
			       conf->backend_header, cache_obj_backend(o),
			       strncmp(how, "fwd=miss", 8) != 0, "");
	if (m < 2)
		return -1;
	m -= 2;                 /* the blank line: the caller's */
	if (note != NULL && (size_t)m <= sizeof(note->buf)) {
		memcpy(note->buf, buf, (size_t)m);
		note->len = (size_t)m;
		note->at = now;
		note->tag = rq->snap->generation;
	}
	return m;
}

/* Answer from cached object o (a reference, now the request's, or a
 * borrow from the worker's memo: memo_slot): its stored head, our Age,
 * Cache-Status, backend header, Via and connection lines, and its body
 * (none for a HEAD: the head's Content-Length is the GET's). One writev;
 * with the read of the request, two syscalls a hit. -1 when the lines
 * do not fit (the caller forwards instead). */
static int req_reply_obj(struct request *rq, struct cache_obj *o, const char *how)
{
	struct iovec head = cache_obj_head(o), body = cache_obj_body(o);
	/* the wall clock only for what meets a client's dates (the age is
	 * on the cache's clock): a plain hit reads one clock, as before */
	int64_t wall = rq->cc.flags & (CACHECTL_RQ_COND | CACHECTL_RQ_RANGE) ? (int64_t)time(NULL) : 0;
	size_t cap = sizeof(rq->reply);
	struct range_reply rr = { .status = 200 };
	const char *conn = rq->close_after ? "Connection: close\r\n" :
			   rq->msg.minor == 0 ? "Connection: keep-alive\r\n" : "";
	size_t clen = strlen(conn);
	bool nm = false, plain = how == NULL && !rq->collapsed;     /* how is "hit" */
	int n, m;

	if (!how)
		how = rq->collapsed ? "fwd=miss; collapsed" : "hit";
	/* a client's own conditional that the fresh object matches: 304,
	 * with the stored validators and caching lines (RFC 9110 15.4.5) */
	if ((rq->cc.flags & CACHECTL_RQ_COND) && plain && cache_obj_status(o) == 200 &&
	    cachectl_not_modified(&rq->msg, cache_obj_etag(o), cache_obj_last_modified(o), wall))
		nm = true;
	n = 0;
	if (nm) {
		n = req_not_modified_head(head, rq->reply, cap, rq->msg.minor);
		if (n < 0)
			return -1;
	} else if ((rq->cc.flags & CACHECTL_RQ_RANGE) && cache_obj_status(o) == 200 &&
		   range_if_range(&rq->msg, cache_obj_etag(o), cache_obj_last_modified(o), wall)) {
		/* one byte range of the stored body: a 206 (or 416) from it */
		range_reply(rq->cc.range_first, rq->cc.range_last, head, body.iov_len,
			    rq->reply, cap / 2, &rr);
		if (rr.status != 200)
			n = (int)rr.iov[rr.n - 1].iov_len;
	}
	m = req_hit_lines(rq, o, how, plain, cache_now(), rq->reply + n, cap - (size_t)n);
	if (m < 0 || (size_t)(n + m) + clen + 2 >= cap)
		return -1;
	n += m;
	memcpy(rq->reply + n, conn, clen);
	memcpy(rq->reply + n + clen, "\r\n", 2);
	n += (int)clen + 2;
	rq->obj = o;
	outq_reset(rq->out);
	if (rr.status != 200) {
		for (int i = 0; i < rr.n - 1; i++)
			outq_add(rq->out, rr.iov[i].iov_base, rr.iov[i].iov_len);
		body.iov_base = (char *)body.iov_base + rr.off;
		body.iov_len = rr.len;
	} else if (!nm) {
		outq_add(rq->out, head.iov_base, head.iov_len);
	}
	outq_add(rq->out, rq->reply, (size_t)n);
	if (rq->msg.method_id != HTTP1_M_HEAD && !nm && body.iov_len)
		outq_add(rq->out, body.iov_base, body.iov_len);
	rq->end_kind = REQ_END_CACHE;
	rq->status = rr.status != 200 ? rr.status : cache_obj_status(o);
	req_reply_send(rq);
	return 0;
}

/* The proxy's own replies by status, and their bytes (stats-t.h). Rare
 * enough for shared atomics. */
static void req_count_reply(struct request *rq, int status, uint64_t bytes)
{
	struct proxy *p = rq->w->proxy;
	_Atomic uint64_t *c;

	switch (status) {
	case 400: c = &p->replies_400; break;
	case 408: c = &p->replies_408; break;
	case 431: c = &p->replies_431; break;
	case 502: c = &p->replies_502; break;
	case 503: c = &p->replies_503; break;
	case 504: c = &p->replies_504; break;
	default: c = &p->replies_other; break;
	}
	atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&p->reply_bytes, bytes, memory_order_relaxed);
}

/* Reply with the proxy's own response. Closes after it unless the request
 * was read completely and the client wants to keep the connection. why is
 * the detail for the log line (see req_public for what the client gets).
 * When the reply is written at once the request is REQ_DONE on return. */
static void req_reply(struct request *rq, int status, const char *why, bool force_close)
{
	const char *extra = status == 503 ? "Retry-After: 1\r\n" : "";
	char body[256], rid[24];
	ssize_t n;
	int blen;

	if (rq->resp_started) {         /* too late for a clean reply */
		rq->client->close(rq->cl);
		return;
	}
	/* stale-if-error: the walk's retries are over and the backend
	 * failed (connect error, connection lost, timeout, none left) */
	if (status >= 500 && req_stale_if_error(rq))
		return;
	req_leave(rq);
	req_rid(rq, rid);
	req_log_reply(rq, status, rid, why);
	blen = snprintf(body, sizeof(body), "ringproxy: %s (request %s)\n", req_public(status, why), rid);
	if (blen < 0 || (size_t)blen >= sizeof(body))
		blen = (int)sizeof(body) - 1;
	/* our replies carry no Connection: keep-alive, without which an
	 * HTTP/1.0 client takes the connection as closing: so close it */
	rq->close_after = force_close || !rq->body_done || !rq->msg.keep_alive || rq->msg.minor == 0;
	n = http1_write_simple(rq->reply, sizeof(rq->reply), status, rq->close_after, extra, body,
			       (size_t)blen);
	if (n < 0) {
		rq->client->close(rq->cl);
		return;
	}
	/* the answer to a HEAD has the headers of the GET's and no body:
	 * body bytes would be read as the next response */
	if (rq->msg.method_id == HTTP1_M_HEAD)
		n -= blen;
	req_count_reply(rq, status, (uint64_t)n);
	outq_reset(rq->out);
	outq_add(rq->out, rq->reply, (size_t)n);
	rq->end_kind = REQ_END_REPLY;
	rq->status = status;
	req_reply_send(rq);
}

/* ---- backend choice, retries ------------------------------------------- */

/* rq->why: what went wrong on backend i, with its name and address (for
 * the log, never for the client). */
static void req_failed_on(struct request *rq, int i, const char *what)
{
	const struct snap_backend *sb = &rq->snap->be[i];

	snprintf(rq->why, sizeof(rq->why), "backend %s (%s): %s", sb->conf->name, sb->addr_text, what);
}

/* Try backends along the walk until one takes the request. last_status
 * (with rq->why) is the answer if none does after a failure. */
static void req_dispatch(struct request *rq, int last_status)
{
	const struct snapshot *s = rq->snap;
	enum req_fail kind;
	char what[256];
	int i;

	req_set_state(rq, REQ_ROUTE);
	for (;;) {
		if (rq->tries > s->conf->retries) {
			req_reply(rq, last_status, rq->why, false);
			return;
		}
		balance_next(s, &rq->walk, rq->keypos, &rq->pick);
		i = rq->pick.backend;
		if (i < 0) {
			if (rq->tries)
				req_reply(rq, last_status, rq->why, false);
			else if (rq->pick.any_full)
				req_reply(rq, 503, "every backend is at its max_inflight; retry shortly", false);
			else
				req_reply(rq, 503, "no backend available: every backend is down", false);
			return;
		}
		if (rq->tries == 0 && i != rq->pick.owner && rq->pick.owner >= 0) {
			struct backend *owner = s->be[rq->pick.owner].state;

			if (rq->pick.owner_verdict == BALANCE_DOWN)
				atomic_fetch_add_explicit(&owner->failovers, 1, memory_order_relaxed);
			else
				atomic_fetch_add_explicit(&owner->spilled_away, 1, memory_order_relaxed);
			if (rq->pick.owner_verdict == BALANCE_BOUNDED && rq->pick.owner_hot)
				atomic_fetch_add_explicit(&owner->spilled_hot, 1, memory_order_relaxed);
			atomic_fetch_add_explicit(&s->be[i].state->spilled_in, 1, memory_order_relaxed);
		}
		rq->route = rq->tries ? "retry" :
			    i == rq->pick.owner && rq->pick.ramp == 3 ? "ramp" :
			    i == rq->pick.owner && rq->pick.replica > 0 ? "replica" :
			    i == rq->pick.owner || rq->pick.owner < 0 ? "owner" :
			    rq->pick.owner_verdict == BALANCE_DOWN ? "failover" :
			    rq->pick.owner_verdict == BALANCE_RAMPING ? "ramp" : "spill";
		rq->tries++;
		rq->cur = i;
		rq->slot = true;
		if (rq->backend->start(rq, i, &kind, what, sizeof(what)) == 0)
			return;
		/* failed at once: a connect error is the backend's */
		if (kind == REQ_FAIL_CONNECT)
			health_request_failed(s, i, what);
		req_leave(rq);
		req_failed_on(rq, i, what);
		/* out of memory or descriptors here: ours, not the backend's */
		last_status = kind == REQ_FAIL_LOCAL ? 503 : 502;
		if (!req_retryable(rq)) {
			req_reply(rq, last_status, rq->why, false);
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
 * (req_settle); when a second backend loses it the same way, the fault
 * is the request's: it is not retried further, counts against no
 * backend's health, and its log line names the URL and the request id.
 */
void req_failed(struct request *rq, int status, enum req_fail kind, const char *what)
{
	const struct snapshot *s = rq->snap;
	int i = rq->cur;
	bool retry;

	req_leave(rq);
	/* passive health: a lost connection is counted below, once it is
	 * known whether the request or the backend is to blame */
	if (kind == REQ_FAIL_CONNECT || kind == REQ_FAIL_TIMEOUT || kind == REQ_FAIL_BAD)
		health_request_failed(s, i, what);
	if (rq->resp_started) {
		rq->client->close(rq->cl);
		return;
	}
	if (kind == REQ_FAIL_CLIENT) {
		req_reply(rq, status, what, false);
		return;
	}
	req_failed_on(rq, i, what);
	if (kind == REQ_FAIL_LOST && rq->lost >= 0) {
		char why[sizeof(rq->why) + 160];

		snprintf(why, sizeof(why), "%s, as backend %s lost it before: a request that fails the "
			 "same way on two backends is not retried further nor counted against their health",
			 rq->why, s->be[rq->lost].conf->name);
		rq->lost = -1;
		req_reply(rq, status, why, false);
		return;
	}
	/* a timeout waiting for the response is never retried: the backend
	 * may still be working on it, and a retry doubles the load exactly
	 * when the tier is slow; nor is an invalid response (the request
	 * reached a backend that answered) */
	retry = (kind == REQ_FAIL_CONNECT || kind == REQ_FAIL_LOCAL || kind == REQ_FAIL_LOST) &&
		req_retryable(rq) &&
		rq->tries <= s->conf->retries;
	if (kind == REQ_FAIL_LOST) {
		if (retry)
			rq->lost = i;
		else
			health_request_failed(s, i, REQ_LOST_WHAT);
	}
	if (retry) {
		atomic_fetch_add(&s->be[i].state->retries_away, 1);
		req_dispatch(rq, status);
		return;
	}
	req_reply(rq, status, rq->why, false);
}

/* ---- the cache's step: lookup, waiting for another request's fetch ---- */

/* Whether the client's request is conditional itself (then its own
 * validators go to the backend, and a 304 is for the client). */
static bool req_conditional(const struct http1_msg *m)
{
	for (unsigned i = 0; i < m->nheaders; i++)
		if (http1_str_ieq(m->headers[i].name, "if-none-match") ||
		    http1_str_ieq(m->headers[i].name, "if-modified-since"))
			return true;
	return false;
}

/* The backend answered 304 to the revalidation of rq->stale: store the
 * object with its head updated and its body (cache_fill_not_modified),
 * and answer with it; the 304's connection is let go of (the request
 * was answered otherwise, see req_response_head). */
static void req_revalidated(struct request *rq, const struct http1_msg *resp)
{
	struct cache_obj *o = NULL;

	if (rq->fill)
		cache_fill_not_modified(rq->fill, rq->stale, resp, &rq->cc, rq->sent_at,
					(int64_t)time(NULL), cache_now(),
					(int64_t)(rq->snap->conf->cache_grace_ms / 1000), &o);
	rq->fill = NULL;
	req_leave(rq);
	if (!o) {               /* not stored: the old copy, still valid */
		o = rq->stale;
		rq->stale = NULL;
	}
	if (req_reply_obj(rq, o, "fwd=stale; fwd-status=304") < 0) {
		cache_obj_release(o);
		req_reply(rq, 502, "cached response head too large to send", false);
	}
}

/* stale-if-error: when rq holds an expired object still in its
 * stale-if-error window, answer with it instead of a failure (the
 * backend connection, if any, is closed; the fill this request leads is
 * given up so that its waiters go on). Returns whether it answered. */
static bool req_stale_if_error(struct request *rq)
{
	struct cache_obj *o = rq->stale;

	if (!o || rq->resp_started || !cache_obj_stale_if_error(o, cache_now()))
		return false;
	req_leave(rq);
	if (rq->fill) {
		cache_fill_abort(rq->fill);
		rq->fill = NULL;
	}
	rq->stale = NULL;
	if (req_reply_obj(rq, o, "hit; fwd=stale; detail=stale-if-error") == 0)
		return true;
	rq->stale = o;
	return false;
}

/* Room kept after the conditional lines for "Accept-Encoding: br,
 * deflate, gzip, zstd" and its CRLF, an image variant's Accept line
 * (vary_accept_line) and the Surrogate-Capability line. */
#define REQ_AE_ROOM (48 + 32 + VARY_FORMAT_LEN + sizeof(CACHECTL_SURROGATE_CAPABILITY) - 1)

/* A cacheable GET that leads a fill asks the backend for exactly the
 * variant its cache key names: its Accept-Encoding lines are replaced by
 * the normalised set (cachectl_ae: q=0 and unknown codings gone, x-gzip
 * as gzip), "identity" when that is empty. So a backend that varies on
 * the field answers with the variant stored under the key, not one
 * chosen by this client's spelling of it (a request with none would
 * otherwise let the backend pick any coding, stored as identity).
 * The Surrogate-Capability line that follows names this cache to the
 * origin (CACHECTL_SURROGATE_CAPABILITY). */
static void req_canonical_ae(struct request *rq)
{
	struct http1_str line = cachectl_ae_header(rq->cc.ae);
	size_t cap = sizeof(CACHECTL_SURROGATE_CAPABILITY) - 1;

	if (line.len + cap > sizeof(rq->cond) - rq->cond_len)
		return;
	memcpy(rq->cond + rq->cond_len, line.p, line.len);
	for (unsigned i = 0; i < rq->msg.nheaders; i++)
		if (http1_str_ieq(rq->msg.headers[i].name, "accept-encoding"))
			rq->msg.headers[i].flags |= HTTP1_HDR_DROP;
	/* and the fill says which Surrogate-Control targets are ours */
	memcpy(rq->cond + rq->cond_len + line.len, CACHECTL_SURROGATE_CAPABILITY, cap);
	rq->ae_len = line.len + cap;
}

/* A fill of an image variant (vary.h) asks the backend for its format:
 * the Accept lines are replaced by the variant's (vary_accept_line), so
 * the object stored is the one every request of the variant would get. */
static void req_canonical_accept(struct request *rq)
{
	size_t at = rq->cond_len + rq->ae_len;
	size_t n = vary_accept_line(cache_fill_vary(rq->fill), rq->cond + at, sizeof(rq->cond) - at);

	if (n == 0)
		return;
	for (unsigned i = 0; i < rq->msg.nheaders; i++)
		if (http1_str_ieq(rq->msg.headers[i].name, "accept"))
			rq->msg.headers[i].flags |= HTTP1_HDR_DROP;
	rq->ae_len += n;
}

/* The lock_timeout of the request's config. */
static void req_lock_timeout(const struct request *rq, struct timeval *tv)
{
	uint64_t ms = rq->snap->conf->cache_lock_timeout_ms;

	tv->tv_sec = (time_t)(ms / 1000);
	tv->tv_usec = (suseconds_t)(ms % 1000 * 1000);
}

/* Let go of object o the request answered with (NULL: none): a borrow
 * from the worker's memo (memo_slot), else a reference. */
static void req_obj_drop(struct request *rq, struct cache_obj *o)
{
	if (rq->memo_slot != 0) {
		cache_memo_put(rq->w->memo, rq->memo_slot - 1);
		rq->memo_slot = 0;
		return;
	}
	cache_obj_release(o);
}

/* Any thread (the one ending the fill): the fetch rq waited for is over;
 * obj is the object (a reference for rq) or NULL. Handed to rq's worker. */
static void req_on_cache_wake(struct cache_waiter *wt, struct cache_obj *obj)
{
	struct request *rq = wt->arg;

	rq->woke_obj = obj;
	req_wake(rq);
}

/* The lookup of cr: this worker's memo first (a repeated hit without the
 * shared table's lock and lines), then the cache; a fresh hit found there
 * is offered to the memo, which then lends it to the request. */
static enum cache_result req_cache_find(struct request *rq, struct cache *cache,
					const struct cache_req *cr, struct cache_obj **obj)
{
	enum cache_result res;
	unsigned slot;

	*obj = cache_memo_get(rq->w->memo, cr, &slot);
	if (*obj != NULL) {
		rq->memo_slot = slot + 1;
		return CACHE_HIT;
	}
	res = cache_lookup(cache, cr, &rq->waiter, obj, &rq->fill);
	if (res == CACHE_HIT && cache_memo_adopt(rq->w->memo, cr, *obj, &slot) == 0)
		rq->memo_slot = slot + 1;
	return res;
}

/* The request's cache key (cachectl_key: Host and target); over https
 * with [cache] key_scheme, behind "https " (a space: never in a Host, so
 * no http key is one). Length, or -1 when it does not fit. */
static ssize_t req_cache_key(const struct request *rq, char *key, size_t len)
{
	ssize_t n;

	if (!rq->https || !rq->snap->conf->cache_key_scheme)
		return cachectl_key(&rq->msg, key, len);
	n = cachectl_key(&rq->msg, key + 6, len - 6);
	if (n < 0)
		return n;
	memcpy(key, "https ", 6);
	return n + 6;
}

/*
 * The cache's step on the road, between the key and the walk. Returns
 * true when the request was answered from the cache or waits for another
 * request's fetch of the same object; false when it goes on to a backend,
 * leading a fill (rq->fill) when the cache wants the response. Routes
 * (req_route) every request but a fresh hit's. The cache
 * key is the Host and the whole target (cachectl_key), not the ring key.
 */
static bool req_cache_lookup(struct request *rq)
{
	struct cache *cache = rq->w->proxy->cache;
	struct cache_obj *obj = NULL;
	struct cache_req cr;
	enum cache_result res;
	char key[REQ_KEY_MAX];
	ssize_t klen;
	int64_t now;

	if (rq->snap->conf->cache_size == 0) {
		req_route(rq);
		return false;           /* off: no Cache-Status either */
	}
	cachectl_request(&rq->msg, &rq->cc);
	rq->cc.target_field = rq->snap->conf->cache_target_field;
	rq->cc.heuristic_max = (int64_t)(rq->snap->conf->cache_heuristic_max_ms / 1000);
	if (rq->cc.kind == CACHECTL_INVALIDATE) {
		/* the key now (RFC 9111 4.4 names the request's URL): once a
		 * large body has streamed through the read buffer, its head's
		 * bytes are gone */
		klen = req_cache_key(rq, key, sizeof(key));
		if (klen > 0) {
			size_t hl = (size_t)klen - rq->msg.path.len -
				    (rq->msg.has_query ? 1 + rq->msg.query.len : 0);

			cache_key_init(cache, &rq->inval, key, (size_t)klen);
			rq->inval.p = NULL;
			rq->inval_path_len = 0;
			if (hl <= UINT8_MAX && rq->msg.path.len <= UINT8_MAX
			    && hl + rq->msg.path.len <= sizeof(rq->inval_base)) {
				memcpy(rq->inval_base, key, hl + rq->msg.path.len);
				rq->inval_host_len = (uint8_t)hl;
				rq->inval_path_len = (uint8_t)rq->msg.path.len;
			}
		}
	}
	if (!rq->snap->conf->cache_honor_client_no_cache)
		cachectl_request_plain(&rq->cc);
	if (rq->cc.kind == CACHECTL_PASS || rq->cc.kind == CACHECTL_INVALIDATE) {
		rq->cache_fwd = "bypass";
		req_route(rq);
		return false;
	}
	rq->shared = true;
	klen = req_cache_key(rq, key, sizeof(key));
	if (klen < 0) {
		rq->cache_fwd = "bypass";       /* a key too long to keep */
		req_route(rq);
		return false;
	}
	now = cache_now();
	cache_req_init(&cr, cache, key, (size_t)klen, &rq->cc, now);
	cr.msg = &rq->msg;
	cr.fm = &rq->snap->conf->cache_formats;
	/* stale-while-revalidate, and the expired object kept at hand for
	 * stale-if-error */
	cr.flags |= CACHE_L_STALE | CACHE_L_KEEP_STALE;
	rq->waiter.wake = req_on_cache_wake;
	rq->waiter.arg = rq;
	res = req_cache_find(rq, cache, &cr, &obj);
	if (res == CACHE_HIT && req_reply_obj(rq, obj, NULL) == 0)
		return true;
	req_route(rq);
	switch (res) {
	case CACHE_HIT:
		req_obj_drop(rq, obj);
		rq->cache_fwd = "miss";
		return false;
	case CACHE_STALE:
		/* started before the answer: a reply written at once ends the
		 * request, and the connection may reuse its head */
		if (rq->fill) {
			struct refresh_req rr = { rq->w, rq->snap, rq->keypos, &rq->msg, &rq->qsent, rq->cc };

			refresh_start(&rr, rq->fill, obj);
			rq->fill = NULL;
		}
		if (req_reply_obj(rq, obj, "hit; fwd=stale") == 0)
			return true;
		cache_obj_release(obj);
		rq->sent_at = (int64_t)time(NULL);     /* request_time: wall, as Date */
		rq->cache_fwd = "miss";
		return false;
	case CACHE_WAIT: {
		struct timeval tv;

		rq->stale = obj;
		rq->collapsed = true;
		req_lock_timeout(rq, &tv);
		req_wait(rq, &tv);
		return true;
	}
	case CACHE_MISS:
		rq->stale = obj;
		rq->sent_at = (int64_t)time(NULL);     /* request_time: wall, as Date */
		/* an expired object with a validator: ask the backend whether
		 * it changed (a 304 keeps the stored body) */
		if (obj && rq->fill && !req_conditional(&rq->msg))
			rq->cond_len = cachectl_cond_lines(cache_obj_etag(obj), cache_obj_last_modified(obj), rq->cond,
							   sizeof(rq->cond) - REQ_AE_ROOM);
		if (rq->fill) {
			req_canonical_ae(rq);
			req_canonical_accept(rq);
		}
		rq->cache_fwd = rq->cc.kind == CACHECTL_REFRESH ? "request" : "miss";
		return false;
	case CACHE_PASS:
		rq->cache_fwd = "miss";
		return false;
	case CACHE_OFF:
	default:
		return false;
	}
}

void req_wait(struct request *rq, const struct timeval *tv)
{
	req_set_state(rq, REQ_WAIT);
	rq->wake_due = true;
	/* not pending: a request waits once, and a wait ends with its
	 * event_del (req_end, req_wait_over, req_on_wake) */
	evtimer_assign(&rq->wait_ev, rq->w->base, req_on_wait_timeout, rq);
	event_add(&rq->wait_ev, tv);
}

void req_wake(struct request *rq)
{
	worker_post(rq->w, &rq->wake);
}

/* The wait is over without an answer: go to a backend of its own along
 * the walk (storing nothing). */
static void req_wait_over(struct request *rq)
{
	event_del(&rq->wait_ev);
	rq->cache_fwd = "miss";
	rq->collapsed = false;          /* not answered by the other's fetch */
	req_dispatch(rq, 503);
}

static void req_on_wait_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct request *rq = arg;

	(void)fd;
	(void)what;
	if (rq->state != REQ_WAIT)
		return;
	/* false: the fetch just ended and the wake-up is on its way: it
	 * ends the wait, with the object if there is one */
	if (!cache_wait_cancel(rq->w->proxy->cache, &rq->waiter))
		return;
	rq->wake_due = false;
	req_wait_over(rq);
}

/* A posted wake-up, on the request's worker: the one the waiter was due.
 * If the request ended meanwhile (its client went away) the connection
 * kept the struct for this moment and may let it go now. */
static void req_on_wake(struct mbox_msg *m)
{
	struct request *rq = (struct request *)((char *)m - offsetof(struct request, wake));
	struct cache_obj *obj = rq->woke_obj;

	rq->woke_obj = NULL;
	rq->wake_due = false;
	if (rq->state == REQ_WAIT) {
		event_del(&rq->wait_ev);
		/* a fetch that turned out to vary may be another variant */
		if (obj && cache_obj_matches(obj, &rq->msg, &rq->snap->conf->cache_formats)
		    && req_reply_obj(rq, obj, NULL) == 0)
			return;
		cache_obj_release(obj);
		req_wait_over(rq);
		return;
	}
	cache_obj_release(obj);
	if (rq->state == REQ_IDLE)
		rq->client->done(rq->cl);
}
