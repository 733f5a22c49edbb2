/*
 * admin.c -- the admin listener ([proxy] admin_listen), libevent's evhttp
 * on the main thread's event base: what stats.c collects, as JSON
 * (/stats), Prometheus text (/metrics), an HTML page (/), the ring (/ring),
 * and a health answer for the proxy itself (/health: 200 while some backend
 * is up, 503 when none is). Read-only: GET and HEAD.
 */
#include "admin.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "addr.h"
#include "conn.h"
#include "log.h"
#include "proxy.h"
#include "stats.h"

struct admin {
	struct evhttp *http;
	const struct proxy *p;
	int port;
};

typedef void (*admin_render_fn)(const struct stats *st, struct evbuffer *out);

/* Read-only: GET and HEAD; anything else is 405 with the Allow header. */
static int admin_method_ok(struct evhttp_request *req)
{
	enum evhttp_cmd_type m = evhttp_request_get_command(req);

	if (m == EVHTTP_REQ_GET || m == EVHTTP_REQ_HEAD)
		return 1;
	evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, HEAD");
	evhttp_send_error(req, 405, "the admin listener is read-only");
	return 0;
}

static void admin_send(struct evhttp_request *req, const struct proxy *p, admin_render_fn render,
		       const char *type)
{
	struct evbuffer *out;
	struct stats st;

	if (!admin_method_ok(req))
		return;
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

	admin_send(req, a->p, stats_json, "application/json");
}

static void admin_on_metrics(struct evhttp_request *req, void *arg)
{
	struct admin *a = arg;

	admin_send(req, a->p, stats_prometheus, "text/plain; version=0.0.4");
}

static void admin_on_page(struct evhttp_request *req, void *arg)
{
	struct admin *a = arg;

	admin_send(req, a->p, stats_html, "text/html; charset=utf-8");
}

static void admin_on_ring(struct evhttp_request *req, void *arg)
{
	struct admin *a = arg;

	admin_send(req, a->p, stats_ring_json, "application/json");
}

static void admin_on_health(struct evhttp_request *req, void *arg)
{
	struct admin *a = arg;
	struct evbuffer *out;
	struct stats st;
	size_t up = 0;

	if (!admin_method_ok(req))
		return;
	out = evbuffer_new();
	if (!out || stats_collect(&st, a->p) < 0) {
		evhttp_send_error(req, HTTP_INTERNAL, "out of memory");
		if (out)
			evbuffer_free(out);
		return;
	}
	for (size_t i = 0; i < st.nbe; i++)
		up += st.be[i].up && st.be[i].points;
	evbuffer_add_printf(out, "%s: %zu of %zu backends up\n", up ? "ok" : "unavailable", up, st.nbe);
	stats_free(&st);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "text/plain");
	evhttp_send_reply(req, up ? HTTP_OK : HTTP_SERVUNAVAIL, up ? "OK" : "Service Unavailable", out);
	evbuffer_free(out);
}

static void admin_on_other(struct evhttp_request *req, void *arg)
{
	(void)arg;
	evhttp_send_error(req, HTTP_NOTFOUND, "try / /stats /metrics /ring /health");
}

struct admin *admin_new(struct event_base *base, const char *listen, const struct proxy *p,
			char *err, size_t errlen)
{
	struct sockaddr_storage addr;
	socklen_t addrlen;
	struct admin *a = calloc(1, sizeof(*a));
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
	a->http = evhttp_new(base);
	if (!a->http || !evhttp_accept_socket_with_handle(a->http, fd)) {
		snprintf(err, errlen, "cannot serve HTTP on it");
		goto fail;
	}
	fd = -1;        /* evhttp owns it now */
	/* every method reaches the callbacks, which answer 405 (evhttp's
	 * own filter would say 501) */
	evhttp_set_allowed_methods(a->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
				   EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
				   EVHTTP_REQ_PATCH);
	evhttp_set_timeout(a->http, 10);
	evhttp_set_cb(a->http, "/", admin_on_page, a);
	evhttp_set_cb(a->http, "/stats", admin_on_stats, a);
	evhttp_set_cb(a->http, "/metrics", admin_on_metrics, a);
	evhttp_set_cb(a->http, "/ring", admin_on_ring, a);
	evhttp_set_cb(a->http, "/health", admin_on_health, a);
	evhttp_set_gencb(a->http, admin_on_other, a);
	return a;
fail:
	if (fd >= 0)
		close(fd);
	admin_free(a);
	return NULL;
}

int admin_port(const struct admin *a)
{
	return a ? a->port : -1;
}

void admin_free(struct admin *a)
{
	if (!a)
		return;
	if (a->http)
		evhttp_free(a->http);
	free(a);
}
