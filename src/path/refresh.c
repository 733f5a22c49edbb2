/*
 * refresh.c -- background refreshes of stale objects: see refresh.h.
 *
 * One libcurl transfer per refresh, on the worker's own curlev (made on
 * the first refresh, so that a worker that never serves stale pays
 * nothing). Curl is told not to decode the transfer coding: the body
 * reaches cache_fill_body() framed as the backend sent it, as the
 * request path's fills get it. The request target is the one the request
 * path would send (http1_write_target), handed to curl verbatim.
 *
 * A refresh is a request to its backend like any other: it holds an
 * in-flight slot (balance_acquire, under max_inflight) while it runs, and
 * a worker runs at most [cache] refresh_max at once. When there is no
 * room, the stale hit is served without a refresh (counted): its client
 * has its answer already, so nothing waits, and the next stale hit of the
 * key tries again. The transfers reuse the connections kept in the
 * worker's one curl multi handle (its connection cache), so successive
 * refreshes to a backend share a few connections; the data path's pooled
 * connections speak our own codec and are not lent to curl.
 */
#include "path/refresh.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/balance.h"
#include "http/cachectl.h"
#include "config/conf.h"
#include "backend/curlev.h"
#include "base/log.h"
#include "http/query.h"
#include "backend/snapshot.h"
#include "http/vary.h"
#include "path/worker.h"

/* The response head is collected here; a larger one is not stored. */
#define REFRESH_HEAD_MAX 16384
#define REFRESH_HEADERS 100

struct refresh {
	struct worker *w;
	CURL *easy;
	struct curl_slist *hdrs;
	struct cache_fill *fill;        /* NULL once ended */
	struct cache_obj *stale;        /* revalidated (a reference) */
	struct cachectl_req cc;
	struct backend *slot;           /* the in-flight slot it holds */
	int64_t sent_at, grace;
	bool began;                     /* the head was handed to the fill */
	size_t hlen;
	char name[128];                 /* the backend's */
	char head[REFRESH_HEAD_MAX];
	struct refresh *next, *prev;
};

static void refresh_end(struct refresh *r)
{
	if (r->fill)
		cache_fill_abort(r->fill);
	if (r->prev)
		r->prev->next = r->next;
	else
		r->w->refreshes = r->next;
	if (r->next)
		r->next->prev = r->prev;
	r->w->nrefreshes--;
	balance_release(r->slot);
	cache_obj_release(r->stale);
	curl_slist_free_all(r->hdrs);
	curl_easy_cleanup(r->easy);
	free(r);
}

/* Header lines as curl hands them over, one a call; an interim (1xx)
 * head is dropped when the next status line starts. */
static size_t refresh_on_header(char *p, size_t size, size_t n, void *arg)
{
	struct refresh *r = arg;
	size_t len = size * n;

	if (len >= 5 && memcmp(p, "HTTP/", 5) == 0)
		r->hlen = 0;
	if (r->hlen + len > sizeof(r->head)) {
		r->hlen = sizeof(r->head) + 1;  /* too large: never parsed */
		return len;
	}
	if (r->hlen <= sizeof(r->head)) {
		memcpy(r->head + r->hlen, p, len);
		r->hlen += len;
	}
	return len;
}

/* The head is complete (the first body bytes came, or the transfer
 * ended): hand it to the fill. */
static void refresh_begin(struct refresh *r)
{
	struct http1_header hdrs[REFRESH_HEADERS];
	struct http1_limits lim = { sizeof(r->head), REFRESH_HEADERS };
	struct cachectl_meta meta;
	struct http1_msg resp;
	char spec[VARY_SPEC_MAX];
	ssize_t vl;

	r->began = true;
	http1_msg_init(&resp);
	if (r->hlen > sizeof(r->head) ||
	    http1_parse_response(&resp, hdrs, r->head, r->hlen, &lim, HTTP1_M_GET) <= 0) {
		cache_fill_abort(r->fill);
		r->fill = NULL;
		return;
	}
	/* the backend's own header of our backend header's name is not
	 * stored (as fwd_head): a hit sends ours */
	http1_drop_named(&resp, (struct http1_str){ r->w->snap->conf->backend_header,
						    r->w->snap->backend_header_len });
	if (r->w->snap->conf->cache_strip_targeted)
		cachectl_strip_targeted(&resp, r->w->snap->conf->cache_target_field);
	if (resp.status == 304 && r->stale) {
		struct cache_obj *o = NULL;

		cache_fill_not_modified(r->fill, r->stale, &resp, &r->cc, r->sent_at,
					(int64_t)time(NULL), cache_now(), r->grace, &o);
		cache_obj_release(o);
		r->fill = NULL;
		return;
	}
	cachectl_response(&r->cc, HTTP1_M_GET, &resp, r->sent_at, (int64_t)time(NULL), r->grace,
			  &meta);
	meta.resident_at = cache_now();
	/* the variant refreshed: the values its fetch was made with */
	vl = vary_spec_from(&resp, cache_fill_vary(r->fill), spec, sizeof(spec));
	if (vl > 0)
		meta.vary = (struct http1_str){ spec, (size_t)vl };
	/* an image variant's refresh that came back in another format (the
	 * backend changed its mind): not stored, the stale copy stays */
	if (vl > 0 && !vary_image_holds(meta.vary, &resp, &r->w->snap->conf->cache_formats)) {
		cache_fill_abort(r->fill);
		r->fill = NULL;
		return;
	}
	if (cache_fill_begin(r->fill, &resp, &meta, r->name, strlen(r->name)) < 0)
		r->fill = NULL;         /* not storable: the stale copy stays */
}

static size_t refresh_on_body(char *p, size_t size, size_t n, void *arg)
{
	struct refresh *r = arg;
	size_t len = size * n;

	if (!r->began)
		refresh_begin(r);
	if (r->fill && cache_fill_body(r->fill, p, len) < 0)
		r->fill = NULL;
	return len;
}

static void refresh_on_done(CURL *easy, CURLcode rc, void *arg)
{
	struct refresh *r = NULL;

	(void)arg;
	curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&r);
	if (rc == CURLE_OK) {
		if (!r->began)
			refresh_begin(r);
		if (r->fill) {
			cache_fill_done(r->fill);
			r->fill = NULL;
		}
	}
	refresh_end(r);
}

/* The backend a request for rq's key would go to now, -1 if none would
 * take it (down, or at max_inflight); *owner the key's owner then (-1:
 * the ring is empty). */
static int refresh_backend(const struct refresh_req *rq, int *owner)
{
	int order[1], nout = 0, i;
	struct balance_why why[1];

	i = balance_explain_walk(rq->snap, rq->keypos, order, why, 1, &nout);
	*owner = i >= 0 ? i : nout > 0 ? order[0] : -1;
	return i;
}

/* Header lines "A: b\r\nC: d\r\n" (NUL-terminated, cut in place), one
 * slist entry a line without its CRLF. */
static void refresh_lines(struct refresh *r, char *p)
{
	char *e;

	while ((e = strstr(p, "\r\n")) != NULL) {
		*e = '\0';
		r->hdrs = curl_slist_append(r->hdrs, p);
		p = e + 2;
	}
}

/* The request lines of r's GET, in curl's list (r->hdrs): the request's
 * Host (or the one sb is always sent, [proxy] backend_host), the stale variant's Accept-Encoding and Vary fields, and the
 * conditional lines of stale (NULL: none), whose reference r then takes.
 * 0, or -1 when the Vary fields do not fit (r is the caller's to free). */
static int refresh_headers(struct refresh *r, const struct refresh_req *rq, const struct snap_backend *sb,
			   struct cache_fill *f, const struct cache_obj *stale)
{
	const struct http1_header *host = NULL;
	char line[600], ae[32], vlines[VARY_SPEC_MAX];
	ssize_t vlen;

	for (unsigned h = 0; h < rq->msg->nheaders && !host; h++)
		if (http1_str_ieq(rq->msg->headers[h].name, "host"))
			host = &rq->msg->headers[h];
	if (sb->host_fixed) {
		snprintf(line, sizeof(line), "Host: %s", sb->host_hdr);
		r->hdrs = curl_slist_append(r->hdrs, line);
	} else if (host) {
		snprintf(line, sizeof(line), "Host: %.*s", (int)host->value.len, host->value.p);
		r->hdrs = curl_slist_append(r->hdrs, line);
	}
	/* the variant the stale object is: the same canonical
	 * Accept-Encoding line the request path sends (req_canonical_ae),
	 * identity for a request that named no coding */
	if (cachectl_ae_string(rq->cc.ae, ae, sizeof(ae)) >= 0) {
		snprintf(line, sizeof(line), "Accept-Encoding: %s", ae[0] != '\0' ? ae : "identity");
		r->hdrs = curl_slist_append(r->hdrs, line);
	} else {
		r->hdrs = curl_slist_append(r->hdrs, "Accept-Encoding:");
	}
	/* no Accept of curl's; the fields the variant's Vary names, as
	 * this request sent them (an image variant: its format's Accept,
	 * which curl sends instead) */
	r->hdrs = curl_slist_append(r->hdrs, "Accept:");
	vlen = vary_request_lines(cache_fill_vary(f), rq->msg, vlines, sizeof(vlines) - 1);
	if (vlen < 0)
		return -1;
	vlines[vlen] = '\0';
	refresh_lines(r, vlines);
	if (stale) {
		char cond[320];
		size_t clen = cachectl_cond_lines(cache_obj_etag(stale), cache_obj_last_modified(stale), cond, sizeof(cond));

		r->stale = cache_obj_ref((struct cache_obj *)stale);
		cond[clen] = '\0';
		refresh_lines(r, cond);
	}
	r->hdrs = curl_slist_append(r->hdrs, "Via: 1.1 ringproxy");
	return 0;
}

/* r's transfer as the request path would make it: GET target from the
 * backend at url, the body as framed on the wire, conf's timeouts, and
 * r's callbacks. */
static void refresh_easy_setup(struct refresh *r, const struct conf *conf, const char *url,
			       const char *target)
{
	curl_easy_setopt(r->easy, CURLOPT_URL, url);
	curl_easy_setopt(r->easy, CURLOPT_REQUEST_TARGET, target);
	curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, r->hdrs);
	curl_easy_setopt(r->easy, CURLOPT_USERAGENT, NULL);
	curl_easy_setopt(r->easy, CURLOPT_HTTP_TRANSFER_DECODING, 0L);
	curl_easy_setopt(r->easy, CURLOPT_CONNECTTIMEOUT_MS, (long)conf->connect_timeout_ms);
	curl_easy_setopt(r->easy, CURLOPT_TIMEOUT_MS,
			 (long)(conf->connect_timeout_ms + conf->response_timeout_ms));
	/* an idle connection in the multi's cache is reused as long as a
	 * pooled one would be kept (curl counts whole seconds) */
	curl_easy_setopt(r->easy, CURLOPT_MAXAGE_CONN,
			 conf->backend_idle_timeout_ms < 1000 ? 1L : (long)(conf->backend_idle_timeout_ms / 1000));
	curl_easy_setopt(r->easy, CURLOPT_HEADERFUNCTION, refresh_on_header);
	curl_easy_setopt(r->easy, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, refresh_on_body);
	curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(r->easy, CURLOPT_PRIVATE, (char *)r);
}

void refresh_start(const struct refresh_req *rq, struct cache_fill *f, const struct cache_obj *stale)
{
	const struct conf *conf = rq->snap->conf;
	struct worker *w = rq->w;
	struct refresh *r = NULL;
	struct backend *slot = NULL;
	char url[80], target[4096];
	int owner, i = refresh_backend(rq, &owner);
	const struct snap_backend *sb;
	struct pool *pool = NULL;
	struct http1_msg sent;

	if (owner < 0 || rq->msg->target.len == 0 || rq->msg->target.p[0] != '/')
		goto fail;
	/* a refresh nobody has room for is counted on the backend that
	 * would take it, or on the key's owner when none would */
	pool = worker_pool(w, rq->snap->be[i >= 0 ? i : owner].state->id);
	if (i < 0 || w->nrefreshes >= conf->cache_refresh_max ||
	    !balance_acquire(rq->snap->be[i].state, rq->snap->be[i].conf)) {
		if (pool)
			worker_count(&pool->refreshes_skipped);
		goto fail;
	}
	sb = &rq->snap->be[i];
	slot = sb->state;
	/* the target the request itself went with: as received under
	 * normalize_forward off */
	sent = *rq->msg;
	if (!conf->normalize_forward && rq->qsent)
		query_restore(&sent, rq->qsent);
	if (http1_write_target(&sent, (struct http1_str){ sb->conf->prefix, sb->prefix_len },
			       target, sizeof(target)) < 0)
		goto fail;
	snprintf(url, sizeof(url), "http://%s/", sb->addr_text);
	if (!w->refresh_ce) {
		w->refresh_ce = curlev_new(w->base, refresh_on_done, NULL);
		if (!w->refresh_ce)
			goto fail;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		goto fail;
	r->w = rq->w;
	r->fill = f;
	r->cc = rq->cc;
	r->grace = (int64_t)(conf->cache_grace_ms / 1000);
	r->sent_at = (int64_t)time(NULL);
	snprintf(r->name, sizeof(r->name), "%s", sb->conf->name);
	r->easy = curlev_easy_new();
	if (!r->easy)
		goto fail;
	if (refresh_headers(r, rq, sb, f, stale) < 0)
		goto fail;
	refresh_easy_setup(r, conf, url, target);
	r->slot = slot;                 /* refresh_end gives it back */
	r->next = w->refreshes;
	if (w->refreshes)
		w->refreshes->prev = r;
	w->refreshes = r;
	w->nrefreshes++;
	if (curlev_add(w->refresh_ce, r->easy) < 0) {
		refresh_end(r);
		return;
	}
	if (pool)
		worker_count(&pool->refreshes);
	return;
fail:
	if (slot)
		balance_release(slot);
	if (r) {
		curl_slist_free_all(r->hdrs);
		curl_easy_cleanup(r->easy);
		free(r);
	}
	cache_fill_abort(f);
}

void refresh_free_all(struct worker *w)
{
	while (w->refreshes) {
		curlev_remove(w->refresh_ce, w->refreshes->easy);
		refresh_end(w->refreshes);
	}
	if (w->refresh_ce)
		curlev_free(w->refresh_ce);
	w->refresh_ce = NULL;
}
