/*
 * admin.c -- the admin listener ([proxy] admin_listen), libevent's evhttp
 * on the main thread's event base: what stats.c collects, as JSON
 * (/stats), Prometheus text (/metrics), an HTML page (/), the ring (/ring),
 * and a health answer for the proxy itself (/health: 200 while some backend
 * is up and not failing, 503 when none is). Read-only: GET and HEAD, else
 * 405; except POST /purge?url=, which removes a URL from the cache and the
 * backends, and POST /backend?name=&state= (or &weight=), which sets a
 * backend's runtime state (runstate.h, through the proxy's callback).
 * A browser is kept from using it for a web page elsewhere: without a
 * token a Host must name the listener (DNS rebinding), and nothing
 * cross-site gets past GET and HEAD (admin_admit).
 *
 * evhttp buffers whatever a client sends unless told otherwise, so the
 * listener is bounded: a request head to ADMIN_MAX_HEAD (else 400), a body
 * to ADMIN_MAX_BODY (else 413, decided from the Content-Length before the
 * body is read; no path takes one), and ADMIN_MAX_CONNS connections at
 * once. At that count the listener stops accepting and the kernel's
 * backlog holds further connections until one closes. evhttp 2.1 has no
 * connection limit and no hook for a new connection, only one that makes
 * its bufferevent: see admin_new_bev for how connections are counted.
 */
#include "admin/admin.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <arpa/inet.h>
#include <curl/curl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "base/addr.h"
#include "backend/balance.h"
#include "http/cachectl.h"
#include "path/conn.h"
#include "backend/curlev.h"
#include "admin/explain.h"
#include "base/log.h"
#include "admin/page.h"
#include "path/proxy-t.h"
#include "backend/snapshot.h"
#include "admin/stats.h"

#define ADMIN_MAX_HEAD  (16 * 1024)    /* request line + headers */
#define ADMIN_MAX_BODY  1024            /* a small body still gets its 405 */
#define ADMIN_MAX_CONNS 64              /* scrapers and a few browsers */
#define ADMIN_NHOSTS    4               /* names a Host may give the listener */

struct admin {
	struct evhttp *http;
	struct evconnlistener *listener;    /* owned by http */
	const struct proxy *p;
	int port;
	/* what a Host names the listener by without a token, with ":PORT"
	 * (admin_host_ok): 127.0.0.1, localhost, [::1], the bound address */
	char hosts[ADMIN_NHOSTS][INET6_ADDRSTRLEN + 16];
	unsigned conns;                 /* connections open (pending included) */
	bool paused;                    /* listener disabled at ADMIN_MAX_CONNS */
	bool accept_paused;             /* ... or for a moment after accept
					   failed (admin_on_accept_error) */
	int64_t accept_warned;          /* the second it last warned of that */
	struct event *ev_accept_resume; /* ends that moment */
	struct admin *next;             /* admin_all */
	bool closing;                   /* in admin_free */
	struct event *ev_resolve;       /* active-only: admin_resolve */
	/* bufferevents made for new connections, not yet looked at (each
	 * holds a reference of ours); at most one per open connection */
	struct bufferevent *pending[ADMIN_MAX_CONNS];
	unsigned npending;
	admin_state_fn on_state;        /* POST /backend; NULL: none */
	void *state_arg;
};

typedef void (*admin_render_fn)(const struct stats *st, struct evbuffer *out);

static void admin_reply_text(struct evhttp_request *req, int code, const char *reason,
			     const char *text)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	struct evbuffer *body = evbuffer_new();

	evhttp_add_header(h, "Content-Type", "text/plain; charset=utf-8");
	evhttp_add_header(h, "Cache-Control", "no-store");
	if (body)
		evbuffer_add(body, text, strlen(text));
	evhttp_send_reply(req, code, reason, body);
	if (body)
		evbuffer_free(body);
}

/* Read-only: GET and HEAD; anything else is 405 with the Allow header
 * (RFC 9110 15.5.6). Not evhttp_send_error: it drops the headers set. */
static int admin_method_ok(struct evhttp_request *req)
{
	enum evhttp_cmd_type m = evhttp_request_get_command(req);

	if (m == EVHTTP_REQ_GET || m == EVHTTP_REQ_HEAD)
		return 1;
	evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, HEAD");
	admin_reply_text(req, 405, "Method Not Allowed", "the admin listener is read-only: GET or HEAD\n");
	return 0;
}

/* SHA-256 of s[0..n): the token comparison compares digests, so that
 * its time depends on neither the length nor the bytes of the token. */
static void admin_digest(const char *s, size_t n, unsigned char out[32])
{
	unsigned int len = 32;

	if (!EVP_Digest(s, n, out, &len, EVP_sha256(), NULL))
		memset(out, 0, 32);
}

/*
 * [proxy] admin_token: when set, a request must carry "Authorization:
 * Bearer TOKEN" (RFC 6750 2.1); else 401 with a WWW-Authenticate
 * challenge (RFC 9110 11.6.1). The token is read from the current
 * snapshot, so a reload changes it. Compared in constant time.
 */
static int admin_authorized(struct admin *a, struct evhttp_request *req)
{
	const char *token = a->p->current->conf->admin_token;
	const char *got = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
	unsigned char want[32], have[32];
	bool ok = false;

	if (!*token)
		return 1;
	if (got && strncasecmp(got, "Bearer ", 7) == 0) {
		got += 7;
		while (*got == ' ')
			got++;
		admin_digest(token, strlen(token), want);
		admin_digest(got, strlen(got), have);
		ok = CRYPTO_memcmp(want, have, sizeof(want)) == 0 && *got;
	}
	if (ok)
		return 1;
	evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
			  got ? "Bearer realm=\"ringproxy\", error=\"invalid_token\"" : "Bearer realm=\"ringproxy\"");
	admin_reply_text(req, 401, "Unauthorized",
			 got ? "wrong token: send Authorization: Bearer TOKEN with [proxy] admin_token\n"
			     : "this admin listener needs Authorization: Bearer TOKEN ([proxy] admin_token)\n");
	return 0;
}

/*
 * DNS rebinding: a web page the operator's browser visits can point a name
 * of its own at 127.0.0.1 and then read our answers as its own origin's;
 * only the Host it sends gives it away. Without admin_token the listener is
 * on loopback (conf.c) and its clients are local programs, which name it by
 * its address or localhost: any other Host is refused with 421 (RFC 9110
 * 15.5.20). A request without Host (HTTP/1.0) is no browser's and passes.
 * With a token a page cannot authenticate, and any name is fine.
 */
static int admin_host_ok(struct admin *a, struct evhttp_request *req)
{
	const char *host = evhttp_find_header(evhttp_request_get_input_headers(req), "Host");
	char text[640];
	bool bound;

	if (*a->p->current->conf->admin_token || !host)
		return 1;
	for (int i = 0; i < ADMIN_NHOSTS; i++) {
		size_t n = strlen(a->hosts[i]);

		/* a browser leaves out port 80 */
		if (strcasecmp(host, a->hosts[i]) == 0 ||
		    (a->port == 80 && n > 3 && strncasecmp(host, a->hosts[i], n - 3) == 0 && !host[n - 3]))
			return 1;
	}
	/* the bound address is said when it is not one of the others */
	bound = strcmp(a->hosts[3], a->hosts[0]) != 0 && strcmp(a->hosts[3], a->hosts[2]) != 0;
	snprintf(text, sizeof(text), "Host: %.100s does not name this admin listener: without [proxy] admin_token "
		 "it answers requests for %s, %s%s%s or %s only (a web page must not reach it through a name "
		 "of its own that points here)\n", host, a->hosts[0], a->hosts[1], bound ? ", " : "",
		 bound ? a->hosts[3] : "", a->hosts[2]);
	admin_reply_text(req, 421, "Misdirected Request", text);
	return 0;
}

/* Does Content-Type value v name a type an HTML form (or a page's fetch
 * without a CORS preflight) can send: urlencoded, multipart or text/plain? */
static bool admin_form_type(const char *v)
{
	static const char *const types[] = { "application/x-www-form-urlencoded", "multipart/form-data",
					     "text/plain" };

	for (size_t i = 0; v && i < sizeof(types) / sizeof(types[0]); i++) {
		size_t n = strlen(types[i]);

		if (strncasecmp(v, types[i], n) == 0 && (!v[n] || v[n] == ';' || v[n] == ' '))
			return true;
	}
	return false;
}

/*
 * Cross-site request forgery: a page elsewhere can make the operator's
 * browser POST here (a form needs no script), so a request other than GET
 * and HEAD is refused with 403 when the browser says it is cross-site
 * (Sec-Fetch-Site other than same-origin or none: same-site takes in other
 * ports of localhost), when its Origin does not name the Host it was sent
 * to, or, from a browser that sends neither (its User-Agent starts
 * "Mozilla/"), when it carries a form's content type. Programs (curl,
 * `ringproxy purge`) send none of these and pass. The order of the checks
 * is the one of Go's net/http CrossOriginProtection (Go 1.25, proposed in
 * golang/go#73626).
 */
static int admin_same_origin(struct evhttp_request *req)
{
	struct evkeyvalq *in = evhttp_request_get_input_headers(req);
	enum evhttp_cmd_type m = evhttp_request_get_command(req);
	const char *site = evhttp_find_header(in, "Sec-Fetch-Site");
	const char *origin = evhttp_find_header(in, "Origin");
	const char *host = evhttp_find_header(in, "Host");
	const char *ua = evhttp_find_header(in, "User-Agent");
	const char *why = NULL;
	char text[400];

	if (m == EVHTTP_REQ_GET || m == EVHTTP_REQ_HEAD)
		return 1;
	if (site) {
		if (strcasecmp(site, "same-origin") != 0 && strcasecmp(site, "none") != 0)
			why = "Sec-Fetch-Site";
	} else if (origin) {
		/* the scheme aside: a TLS proxy in front makes it https */
		const char *o = strstr(origin, "://");

		if (!host || !o || strcasecmp(o + 3, host) != 0)
			why = "Origin";
	} else if (ua && strncmp(ua, "Mozilla/", 8) == 0 &&
		   admin_form_type(evhttp_find_header(in, "Content-Type"))) {
		why = "Content-Type";
	}
	if (!why)
		return 1;
	snprintf(text, sizeof(text), "a cross-site request is refused (%s: %.100s): the admin listener "
		 "changes state only for requests of its own origin or from programs\n", why,
		 evhttp_find_header(in, why));
	admin_reply_text(req, 403, "Forbidden", text);
	return 0;
}

/* Every request passes here first: the Host, the token, where it comes
 * from. */
static int admin_admit(struct admin *a, struct evhttp_request *req)
{
	return admin_host_ok(a, req) && admin_authorized(a, req) && admin_same_origin(req);
}

/* ... then the method. */
static int admin_gate(struct admin *a, struct evhttp_request *req)
{
	return admin_admit(a, req) && admin_method_ok(req);
}

static void admin_send(struct evhttp_request *req, const struct proxy *p, admin_render_fn render,
		       const char *type)
{
	struct evbuffer *out;
	struct stats st;

	out = evbuffer_new();
	if (!out || stats_collect(&st, p) < 0) {
		evhttp_send_error(req, HTTP_INTERNAL, "out of memory");
		if (out)
			evbuffer_free(out);
		return;
	}
	render(&st, out);
	stats_free(&st);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", type);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Cache-Control", "no-store");
	evhttp_send_reply(req, HTTP_OK, "OK", out);
	evbuffer_free(out);
}

static void admin_on_stats(struct evhttp_request *req, void *arg)
{
	struct admin *a = arg;

	if (admin_gate(a, req))
		admin_send(req, a->p, stats_json, "application/json");
}

static void admin_on_metrics(struct evhttp_request *req, void *arg)
{
	struct admin *a = arg;

	if (admin_gate(a, req))
		admin_send(req, a->p, stats_prometheus, "text/plain; version=0.0.4");
}

static void admin_on_page(struct evhttp_request *req, void *arg)
{
	struct admin *a = arg;

	if (admin_gate(a, req))
		admin_send(req, a->p, page_html, "text/html; charset=utf-8");
}

/* A query parameter, decoded; NULL when absent. */
static const char *admin_param(struct evkeyvalq *q, const char *name)
{
	return evhttp_find_header(q, name);
}

/*
 * /ring: the ring (vnodes, points, each backend's share), or with
 * ?key=KEY (the string hashed, as written) or ?url=TARGET (a request
 * target keyed by [ring] key, as the request path keys it; &host= the Host
 * an origin-form target comes with, for the cache key) where a request
 * with that key goes now and why (explain.h). &format=text for people,
 * &walk=N distinct backends listed (default 4).
 */
static void admin_on_ring(struct evhttp_request *req, void *arg)
{
	struct admin *a = arg;
	const struct snapshot *s = a->p->current;
	const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
	struct explain_target t = { 0 };
	struct evkeyvalq q;
	const char *key, *url, *host, *format, *walk;
	struct cache_key ck;
	char err[256], ckbuf[8192];
	struct explain *e = NULL;
	struct evbuffer *out;
	bool text;
	int nwalk = 4;

	if (!admin_gate(a, req))
		return;
	TAILQ_INIT(&q);
	if (!query || evhttp_parse_query_str(query, &q) < 0 ||
	    (!admin_param(&q, "key") && !admin_param(&q, "url"))) {
		evhttp_clear_headers(&q);
		admin_send(req, a->p, stats_ring_json, "application/json");
		return;
	}
	key = admin_param(&q, "key");
	url = admin_param(&q, "url");
	host = admin_param(&q, "host");
	format = admin_param(&q, "format");
	walk = admin_param(&q, "walk");
	text = format && strcmp(format, "text") == 0;
	if (walk)
		nwalk = atoi(walk);
	e = malloc(sizeof(*e));
	out = evbuffer_new();
	if (!e || !out) {
		evhttp_send_error(req, HTTP_INTERNAL, "out of memory");
		goto done;
	}
	if (key && url) {
		admin_reply_text(req, 400, "Bad Request", "give key= (the string hashed) or url= (a request target), not both\n");
		goto done;
	}
	if (key && (strncasecmp(key, "http://", 7) == 0 || strncasecmp(key, "https://", 8) == 0)) {
		/* no key is a full URL ([ring] key hashes its path): one
		 * answered as the string would send the reader elsewhere */
		char *esc = evhttp_uriencode(key, -1, 0);

		snprintf(ckbuf, sizeof(ckbuf), "key=%.200s is a full URL, and key= takes the string hashed (a path, "
			 "as [ring] key makes it); ask /ring?url=%.2000s for where a request for that URL goes\n",
			 key, esc ? esc : key);
		free(esc);
		admin_reply_text(req, 400, "Bad Request", ckbuf);
		goto done;
	}
	if (key) {
		explain_key(e, s, key, strlen(key), nwalk, NULL, NULL, 0);
	} else {
		if (explain_target_parse(&t, s->conf->scheme, s->conf->key, &s->conf->query, url, strlen(url), host,
					 err, sizeof(err)) < 0) {
			snprintf(ckbuf, sizeof(ckbuf), "url=%.200s: %s\n", url, err);
			admin_reply_text(req, 400, "Bad Request", ckbuf);
			goto done;
		}
		if (a->p->cache && (t.msg.authority.len || host)) {
			ssize_t n = cachectl_key(&t.msg, ckbuf, sizeof(ckbuf));

			if (n >= 0)
				cache_key_init(a->p->cache, &ck, ckbuf, (size_t)n);
			explain_url(e, s, &t, nwalk, n >= 0 ? a->p->cache : NULL, &ck, cache_now());
		} else {
			explain_url(e, s, &t, nwalk, NULL, NULL, 0);
		}
	}
	if (text)
		explain_text(e, s, out);
	else
		explain_json(e, s, out);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
			  text ? "text/plain; charset=utf-8" : "application/json");
	evhttp_add_header(evhttp_request_get_output_headers(req), "Cache-Control", "no-store");
	evhttp_send_reply(req, HTTP_OK, "OK", out);
done:
	if (out)
		evbuffer_free(out);
	free(e);
	explain_target_free(&t);
	evhttp_clear_headers(&q);
}

static void admin_on_health(struct evhttp_request *req, void *arg)
{
	struct admin *a = arg;
	struct evbuffer *out;
	struct stats st;
	size_t up = 0, failing = 0;

	if (!admin_gate(a, req))
		return;
	out = evbuffer_new();
	if (!out || stats_collect(&st, a->p) < 0) {
		evhttp_send_error(req, HTTP_INTERNAL, "out of memory");
		if (out)
			evbuffer_free(out);
		return;
	}
	/* a failing backend is up only because it is the last one (health.c):
	 * it serves nothing well */
	for (size_t i = 0; i < st.nbe; i++) {
		up += st.be[i].up && st.be[i].points && strcmp(st.be[i].state, "failing") != 0;
		failing += strcmp(st.be[i].state, "failing") == 0;
	}
	evbuffer_add_printf(out, "%s: %zu of %zu backends up", up ? "ok" : "unavailable", up, st.nbe);
	if (failing)
		evbuffer_add_printf(out, "; %zu failing (the last one up, kept in service)", failing);
	evbuffer_add_printf(out, "\n");
	stats_free(&st);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "text/plain");
	evhttp_send_reply(req, up ? HTTP_OK : HTTP_SERVUNAVAIL, up ? "OK" : "Service Unavailable", out);
	evbuffer_free(out);
}

/* A purge's request to one backend. */
struct admin_purge_be {
	CURL *easy;
	struct curl_slist *hdrs;
	int index;                      /* in the snapshot */
	long status;                    /* 0: no response */
	char err[CURL_ERROR_SIZE];
};

/* A backend purged the URL: 2xx, or 404 (it held nothing to purge).
 * Anything else (501: it does not take PURGE; 403: its ACL) leaves its
 * copy, so the purge failed. */
static bool admin_purge_ok(const struct admin_purge_be *be)
{
	return (be->status >= 200 && be->status < 300) || be->status == 404;
}

static size_t admin_discard(char *p, size_t size, size_t n, void *arg)
{
	(void)p;
	(void)arg;
	return size * n;
}

/*
 * PURGE the URL on backends be[0..n) at once and wait for them all,
 * each bounded by the connect and response timeouts (at most 5 s): the
 * admin listener is the operator's, and a purge is rare, so its thread
 * waits here rather than keep a purge's state across callbacks.
 */
static void admin_purge_send(const struct snapshot *s, struct admin_purge_be *be, int n,
			     const struct http1_msg *m, const char *host)
{
	const struct conf *conf = s->conf;
	long timeout = (long)(conf->connect_timeout_ms + conf->response_timeout_ms);
	CURLM *multi = curl_multi_init();
	char url[300], target[8192], line[600];
	int running = 0;

	if (timeout > 5000)
		timeout = 5000;
	for (int i = 0; i < n; i++) {
		const struct snap_backend *sb = &s->be[be[i].index];

		snprintf(be[i].err, sizeof(be[i].err), "not sent");
		/* the target a request for the URL would be sent with */
		if (http1_write_target(m, (struct http1_str){ sb->conf->prefix, sb->prefix_len },
				       target, sizeof(target)) < 0)
			continue;
		be[i].easy = multi ? curlev_easy_new() : NULL;
		if (!be[i].easy)
			continue;
		snprintf(url, sizeof(url), "http://%s/", sb->addr_text);
		/* the Host the cache stored it under: the one it is always sent */
		snprintf(line, sizeof(line), "Host: %s", sb->host_fixed ? sb->host_hdr : host);
		be[i].hdrs = curl_slist_append(NULL, line);
		be[i].err[0] = '\0';
		curl_easy_setopt(be[i].easy, CURLOPT_URL, url);
		curl_easy_setopt(be[i].easy, CURLOPT_REQUEST_TARGET, target);
		curl_easy_setopt(be[i].easy, CURLOPT_CUSTOMREQUEST, "PURGE");
		curl_easy_setopt(be[i].easy, CURLOPT_HTTPHEADER, be[i].hdrs);
		curl_easy_setopt(be[i].easy, CURLOPT_TIMEOUT_MS, timeout);
		curl_easy_setopt(be[i].easy, CURLOPT_CONNECTTIMEOUT_MS, (long)conf->connect_timeout_ms);
		curl_easy_setopt(be[i].easy, CURLOPT_WRITEFUNCTION, admin_discard);
		curl_easy_setopt(be[i].easy, CURLOPT_ERRORBUFFER, be[i].err);
		curl_easy_setopt(be[i].easy, CURLOPT_USERAGENT, "ringproxy-purge/" RINGPROXY_VERSION);
		curl_multi_add_handle(multi, be[i].easy);
	}
	if (multi) {
		do {
			if (curl_multi_perform(multi, &running) != CURLM_OK)
				break;
			if (running)
				curl_multi_poll(multi, NULL, 0, 100, NULL);
		} while (running);
	}
	for (int i = 0; i < n; i++) {
		if (!be[i].easy)
			continue;
		curl_easy_getinfo(be[i].easy, CURLINFO_RESPONSE_CODE, &be[i].status);
		if (admin_purge_ok(&be[i]))
			snprintf(be[i].err, sizeof(be[i].err), be[i].status == 404 ? "ok: nothing stored there" : "ok");
		else if (be[i].status)
			snprintf(be[i].err, sizeof(be[i].err), "refused: status %ld", be[i].status);
		else if (be[i].err[0] == '\0')
			snprintf(be[i].err, sizeof(be[i].err), "no response");
		curl_multi_remove_handle(multi, be[i].easy);
		curl_easy_cleanup(be[i].easy);
		curl_slist_free_all(be[i].hdrs);
	}
	if (multi)
		curl_multi_cleanup(multi);
}

/*
 * POST /purge?url=URL[&host=HOST]: remove every stored variant of URL
 * from the hot-object cache, and PURGE it on the first [cache]
 * purge_fanout distinct backends of its walk (its owner, then where
 * spill-over and failover send its requests and so leave copies), and
 * at least the [ring] replicas of its list.
 * URL is a full URL, or a target with host=. Answers JSON: the cache
 * key, the objects removed here, each backend's status.
 */
static void admin_on_purge(struct evhttp_request *req, void *arg)
{
	struct admin *a = arg;
	const struct snapshot *s = a->p->current;
	const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
	struct explain_target t = { 0 };
	struct admin_purge_be be[16];
	struct balance_why why[16];
	int order[16], n = 0;
	struct evkeyvalq q;
	const char *url, *host;
	char err[256], ck[8192], hostbuf[300];
	struct evbuffer *out = NULL;
	size_t removed = 0;
	ssize_t cklen;
	int failed = 0;

	if (!admin_admit(a, req))
		return;
	if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "POST");
		admin_reply_text(req, 405, "Method Not Allowed", "purge with POST /purge?url=URL\n");
		return;
	}
	TAILQ_INIT(&q);
	url = query && evhttp_parse_query_str(query, &q) == 0 ? admin_param(&q, "url") : NULL;
	host = url ? admin_param(&q, "host") : NULL;
	if (!url || !*url) {
		admin_reply_text(req, 400, "Bad Request", "give url=URL (a full URL, or a target with host=)\n");
		goto done;
	}
	if (explain_target_parse(&t, s->conf->scheme, s->conf->key, &s->conf->query, url, strlen(url), host,
				 err, sizeof(err)) < 0) {
		snprintf(ck, sizeof(ck), "url=%.200s: %s\n", url, err);
		admin_reply_text(req, 400, "Bad Request", ck);
		goto done;
	}
	if (!t.msg.authority.len && !host) {
		admin_reply_text(req, 400, "Bad Request", "url= has no host: give a full URL or host=\n");
		goto done;
	}
	if (!host) {
		snprintf(hostbuf, sizeof(hostbuf), "%.*s", (int)t.msg.authority.len, t.msg.authority.p);
		host = hostbuf;
	}
	cklen = cachectl_key(&t.msg, ck, sizeof(ck));
	if (a->p->cache && cklen >= 0) {
		struct cache_key k;

		cache_key_init(a->p->cache, &k, ck, (size_t)cklen);
		removed = cache_invalidate(a->p->cache, &k);
		if (s->conf->cache_key_scheme && (size_t)cklen + 6 <= sizeof(ck)) {
			/* the object fetched over https ([cache] key_scheme):
			 * a purge is of the URL, whichever scheme */
			char hk[sizeof(ck)];

			memcpy(hk, "https ", 6);
			memcpy(hk + 6, ck, (size_t)cklen);
			cache_key_init(a->p->cache, &k, hk, (size_t)cklen + 6);
			removed += cache_invalidate(a->p->cache, &k);
		}
	}
	if (s->conf->cache_purge_fanout > 0) {
		int want = (int)s->conf->cache_purge_fanout;

		/* every copy of the key's list, whatever the fanout says */
		if (want < (int)s->conf->replicas)
			want = (int)s->conf->replicas;
		if (want > 16)
			want = 16;
		balance_explain_walk(s, t.pos, order, why, want, &n);
		for (int i = 0; i < n; i++) {
			memset(&be[i], 0, sizeof(be[i]));
			be[i].index = order[i];
		}
		/* the backends hold what they were sent */
		if (!s->conf->normalize_forward)
			query_restore(&t.msg, &t.sent);
		admin_purge_send(s, be, n, &t.msg, host);
	}
	log_msg(LOG_INFO, "purge %.*s: %zu object%s removed here, sent to %d backend%s",
		(int)(cklen >= 0 ? cklen : 0), ck, removed, removed == 1 ? "" : "s", n, n == 1 ? "" : "s");
	out = evbuffer_new();
	if (!out) {
		evhttp_send_error(req, HTTP_INTERNAL, "out of memory");
		goto done;
	}
	evbuffer_add_printf(out, "{\"url\": ");
	stats_json_str(out, url);
	evbuffer_add_printf(out, ", \"key\": ");
	stats_json_strn(out, ck, cklen >= 0 ? (size_t)cklen : 0);
	evbuffer_add_printf(out, ", \"removed\": %zu, \"backends\": [", removed);
	for (int i = 0; i < n; i++) {
		const struct snap_backend *sb = &s->be[be[i].index];

		evbuffer_add_printf(out, "%s{\"name\": ", i ? ", " : "");
		stats_json_str(out, sb->conf->name);
		evbuffer_add_printf(out, ", \"address\": ");
		stats_json_str(out, sb->addr_text);
		evbuffer_add_printf(out, ", \"status\": %ld, \"result\": ", be[i].status);
		stats_json_str(out, be[i].err);
		evbuffer_add_printf(out, "}");
		failed += !admin_purge_ok(&be[i]);
	}
	/* a backend that kept its copy fails the purge: 502, as a gateway
	 * whose upstream did not do what was asked */
	evbuffer_add_printf(out, "], \"result\": \"%s\", \"failed\": %d}\n", failed ? "failed" : "ok", failed);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
	evhttp_add_header(evhttp_request_get_output_headers(req), "Cache-Control", "no-store");
	evhttp_send_reply(req, failed ? 502 : HTTP_OK, failed ? "Bad Gateway" : "OK", out);
done:
	if (out)
		evbuffer_free(out);
	explain_target_free(&t);
	evhttp_clear_headers(&q);
}

static const char *admin_status_reason(int code)
{
	return code == 200 ? "OK" : code == 400 ? "Bad Request" : code == 404 ? "Not Found" :
	       code == 409 ? "Conflict" : "Internal Server Error";
}

/*
 * POST /backend?name=NAME&state=ready|drain|maint[&duration=D] or
 * ?name=NAME&weight=N: a backend's runtime state, set by the proxy's
 * callback (runstate.h), which answers with a status and JSON; the peer
 * is named in its log line.
 */
static void admin_on_backend(struct evhttp_request *req, void *arg)
{
	struct admin *a = arg;
	const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
	const char *name, *state, *weight, *value, *verb, *ip = NULL;
	struct evbuffer *out = NULL;
	struct evkeyvalq q;
	char peer[INET6_ADDRSTRLEN + 16];
	ev_uint16_t port = 0;
	int code;

	if (!admin_admit(a, req))
		return;
	if (!a->on_state) {
		evhttp_send_error(req, HTTP_NOTFOUND, "try / /stats /metrics /ring /health");
		return;
	}
	if (evhttp_request_get_command(req) != EVHTTP_REQ_POST) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "POST");
		admin_reply_text(req, 405, "Method Not Allowed",
				 "set a runtime state with POST /backend?name=NAME&state=ready|drain|maint or &weight=N\n");
		return;
	}
	TAILQ_INIT(&q);
	if (query)
		evhttp_parse_query_str(query, &q);
	name = admin_param(&q, "name");
	state = admin_param(&q, "state");
	weight = admin_param(&q, "weight");
	verb = weight && state ? "" : weight ? "weight" : state ? state : "";
	value = weight && !state ? weight : admin_param(&q, "duration");
	/* POST /discovery?action=apply: discovery's held change */
	if (evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req)) &&
	    strcmp(evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req)), "/discovery") == 0) {
		verb = "discovery";
		name = admin_param(&q, "action");
		value = NULL;
	}
	evhttp_connection_get_peer(evhttp_request_get_connection(req), (char **)&ip, &port);
	snprintf(peer, sizeof(peer), "%s%s%s:%u", ip && strchr(ip, ':') ? "[" : "", ip ? ip : "?",
		 ip && strchr(ip, ':') ? "]" : "", (unsigned)port);
	out = evbuffer_new();
	if (!out) {
		evhttp_send_error(req, HTTP_INTERNAL, "out of memory");
		goto done;
	}
	code = a->on_state(a->state_arg, name ? name : "", verb, value, peer, out);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
	evhttp_add_header(evhttp_request_get_output_headers(req), "Cache-Control", "no-store");
	evhttp_send_reply(req, code, admin_status_reason(code), out);
done:
	if (out)
		evbuffer_free(out);
	evhttp_clear_headers(&q);
}

static void admin_on_other(struct evhttp_request *req, void *arg)
{
	if (!admin_admit(arg, req))
		return;
	evhttp_send_error(req, HTTP_NOTFOUND, "try / /stats /metrics /ring /health");
}

/* A connection ended (or was never set up). */
static void admin_conn_gone(struct admin *a)
{
	a->conns--;
	if (a->paused && !a->closing && a->conns < ADMIN_MAX_CONNS) {
		if (!a->accept_paused)
			evconnlistener_enable(a->listener);
		a->paused = false;
	}
}

/* evhttp frees a connection: called from evhttp_connection_free, also
 * from evhttp_free in admin_free. */
static void admin_on_close(struct evhttp_connection *evcon, void *arg)
{
	(void)evcon;
	admin_conn_gone(arg);
}

/*
 * evhttp's bufferevent for a connection it has just accepted: a plain
 * socket one, as evhttp would make itself (options 0: evhttp closes the
 * socket), counted here. evhttp then creates the connection around it
 * and sets it as the bufferevent's callback argument (http.c of 2.1,
 * evhttp_connection_base_bufferevent_new), so admin_resolve, run from the
 * loop once this accept is done, finds the connection there and asks for
 * its close callback. Our reference keeps the bufferevent readable until
 * then: one that evhttp freed meanwhile has its callbacks cleared by
 * bufferevent_free, and is counted out instead. NULL (evhttp then makes
 * an uncounted one) only without memory.
 */
static struct bufferevent *admin_new_bev(struct event_base *base, void *arg)
{
	struct admin *a = arg;
	struct bufferevent *bev = bufferevent_socket_new(base, -1, 0);

	if (!bev)
		return NULL;
	bufferevent_incref(bev);
	a->pending[a->npending++] = bev;        /* npending <= conns < max */
	event_active(a->ev_resolve, 0, 0);
	if (++a->conns >= ADMIN_MAX_CONNS && !a->paused) {
		evconnlistener_disable(a->listener);
		a->paused = true;
	}
	return bev;
}

static void admin_resolve(evutil_socket_t fd, short what, void *arg)
{
	struct admin *a = arg;

	(void)fd;
	(void)what;
	for (unsigned i = 0; i < a->npending; i++) {
		struct bufferevent *bev = a->pending[i];
		bufferevent_data_cb rd, wr;
		bufferevent_event_cb ev;
		void *cbarg;

		bufferevent_getcb(bev, &rd, &wr, &ev, &cbarg);
		if (rd && cbarg && evhttp_connection_get_bufferevent(cbarg) == bev)
			evhttp_connection_set_closecb(cbarg, admin_on_close, a);
		else
			admin_conn_gone(a);     /* freed before we looked */
		bufferevent_decref(bev);
	}
	a->npending = 0;
}

/* The admin listeners that live (one per process in practice; main
 * thread): evhttp's listener hands its error callback the evhttp, not
 * us, so the callback finds its admin here. */
static struct admin *admin_all;

/* How long accepting stops after it failed for want of descriptors or
 * memory: the worker listeners' pause (worker.c). */
#define ADMIN_ACCEPT_PAUSE_MS 100

static void admin_on_accept_resume(evutil_socket_t fd, short what, void *arg)
{
	struct admin *a = arg;

	(void)fd;
	(void)what;
	a->accept_paused = false;
	if (!a->paused && !a->closing)
		evconnlistener_enable(a->listener);
}

/* accept failed (EMFILE, ENFILE, ENOMEM, ENOBUFS): the connection stays
 * queued and the listener readable, so libevent would try again at once,
 * for ever, logging each time. Stop accepting for a moment instead, as
 * the workers do, and warn at most once a second. */
static void admin_on_accept_error(struct evconnlistener *lev, void *arg)
{
	static const struct timeval tv = { 0, ADMIN_ACCEPT_PAUSE_MS * 1000 };
	int err = EVUTIL_SOCKET_ERROR();
	int64_t now = (int64_t)time(NULL);
	struct admin *a = admin_all;

	while (a && a->http != arg)
		a = a->next;
	if (!a || a->listener != lev)
		return;
	if (now != a->accept_warned) {
		a->accept_warned = now;
		log_warn("admin listener: accept: %s; raise the fd limit or lower max_connections", strerror(err));
	}
	if (!a->accept_paused) {
		evconnlistener_disable(lev);
		a->accept_paused = true;
		evtimer_add(a->ev_accept_resume, &tv);
	}
}

/* The names of admin_host_ok, for the listener bound to addr. */
static void admin_names(struct admin *a, const struct sockaddr_storage *addr)
{
	char ip[INET6_ADDRSTRLEN];
	bool v6 = addr->ss_family == AF_INET6;

	conn_peer_ip(addr, ip, sizeof(ip));
	snprintf(a->hosts[0], sizeof(a->hosts[0]), "127.0.0.1:%d", a->port);
	snprintf(a->hosts[1], sizeof(a->hosts[1]), "localhost:%d", a->port);
	snprintf(a->hosts[2], sizeof(a->hosts[2]), "[::1]:%d", a->port);
	snprintf(a->hosts[3], sizeof(a->hosts[3]), "%s%s%s:%d", v6 ? "[" : "", ip, v6 ? "]" : "", a->port);
}

struct admin *admin_new(struct event_base *base, const char *listen, const struct proxy *p,
			char *err, size_t errlen)
{
	struct sockaddr_storage addr;
	socklen_t addrlen;
	struct admin *a = calloc(1, sizeof(*a));
	struct evhttp_bound_socket *bound;
	int fd = -1;

	if (!a) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	a->p = p;
	if (addr_parse(listen, &addr, &addrlen, err, errlen) < 0)
		goto fail;
	fd = conn_listen((struct sockaddr *)&addr, addrlen, err, errlen);
	if (fd < 0)
		goto fail;
	a->port = conn_local_port(fd);
	admin_names(a, &addr);
	a->ev_resolve = event_new(base, -1, 0, admin_resolve, a);
	a->ev_accept_resume = evtimer_new(base, admin_on_accept_resume, a);
	a->http = a->ev_resolve && a->ev_accept_resume ? evhttp_new(base) : NULL;
	bound = a->http ? evhttp_accept_socket_with_handle(a->http, fd) : NULL;
	if (!bound) {
		snprintf(err, errlen, "cannot serve HTTP on it");
		goto fail;
	}
	fd = -1;        /* evhttp owns it now */
	a->listener = evhttp_bound_socket_get_listener(bound);
	evconnlistener_set_error_cb(a->listener, admin_on_accept_error);
	a->next = admin_all;
	admin_all = a;
	evhttp_set_bevcb(a->http, admin_new_bev, a);
	evhttp_set_max_headers_size(a->http, ADMIN_MAX_HEAD);
	evhttp_set_max_body_size(a->http, ADMIN_MAX_BODY);
	/* every method evhttp knows reaches the callbacks, which answer 405
	 * (evhttp's own filter would say 501) */
	evhttp_set_allowed_methods(a->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
				   EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
				   EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
	evhttp_set_timeout(a->http, 10);
	evhttp_set_cb(a->http, "/", admin_on_page, a);
	evhttp_set_cb(a->http, "/stats", admin_on_stats, a);
	evhttp_set_cb(a->http, "/metrics", admin_on_metrics, a);
	evhttp_set_cb(a->http, "/ring", admin_on_ring, a);
	evhttp_set_cb(a->http, "/health", admin_on_health, a);
	evhttp_set_cb(a->http, "/purge", admin_on_purge, a);
	evhttp_set_cb(a->http, "/backend", admin_on_backend, a);
	evhttp_set_cb(a->http, "/discovery", admin_on_backend, a);
	evhttp_set_gencb(a->http, admin_on_other, a);
	return a;
fail:
	if (fd >= 0)
		close(fd);
	admin_free(a);
	return NULL;
}

void admin_on_state(struct admin *a, admin_state_fn fn, void *arg)
{
	a->on_state = fn;
	a->state_arg = arg;
}

int admin_port(const struct admin *a)
{
	return a ? a->port : -1;
}

void admin_free(struct admin *a)
{
	if (!a)
		return;
	a->closing = true;      /* evhttp_free takes the listener first */
	for (struct admin **pa = &admin_all; *pa; pa = &(*pa)->next) {
		if (*pa == a) {
			*pa = a->next;
			break;
		}
	}
	for (unsigned i = 0; i < a->npending; i++)
		bufferevent_decref(a->pending[i]);
	a->npending = 0;
	if (a->http)
		evhttp_free(a->http);   /* calls admin_on_close: a still lives */
	if (a->ev_resolve)
		event_free(a->ev_resolve);
	if (a->ev_accept_resume)
		event_free(a->ev_accept_resume);
	free(a);
}
