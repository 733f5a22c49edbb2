/*
 * testcache.c -- a stand-in for one thumbnail cache server (Varnish, nginx)
 * used by the end-to-end tests, the demo and the benchmarks.
 *
 * It answers any URL with a body that depends only on the request URI, so the
 * same URL gives the same bytes on every instance and a test can tell which
 * backend served it only from the X-Backend header.  Query parameters turn on
 * faults per request (delay, status, drop, chunked, wrong length).  Special
 * paths report and reset counters (/__stats, /__reset; /__series: requests
 * per 100 ms of CLOCK_MONOTONIC since the start) and drive the health
 * check (/__health, /__set).
 *
 * Body formula (tests recompute it; keep this comment exact):
 *     pattern = URI + "\n"       URI = the request-target exactly as received,
 *                                 path and query, e.g. "/t/a.jpg?size=10"
 *     body    = (pattern * ceil(size / len(pattern)))[:size]
 * POST and PUT instead echo the request body back.
 *
 * libevent 2.1.12's evhttp on one event loop per thread (--threads N, default
 * 1; the main thread runs loop 0 and takes the signals).  Counters are shared
 * atomics, settings sit under one mutex.  Replies that must wait (delay) or
 * stream (large, chunked, wrong length) keep a struct tc_reply; large bodies
 * are produced one piece at a time as the socket drains, so a 50 MB body
 * never sits in memory.  evhttp 2.1.12 does not watch a connection while its
 * request waits for a reply, so a client that leaves during a delay stays in
 * "inflight" until the delay ends; one that leaves mid-body is seen at once.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/http_struct.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <event2/thread.h>
#include <event2/util.h>

/* Bodies up to this size are built whole; larger ones stream in pieces. */
#define TC_WHOLE_MAX (64 * 1024)
#define TC_PIECE (64 * 1024)
#define TC_CHUNK (16 * 1024)
#define TC_MAX_SIZE ((uint64_t)1 << 40)
#define TC_MAX_BODY (128 * 1024 * 1024)
/* How many bytes --wrong-length promises beyond what it sends. */
#define TC_WRONGLEN_EXTRA 1000

/* Requests per 100 ms of CLOCK_MONOTONIC since the start, for an hour
 * (/__series): a benchmark reads when its requests came, as the server
 * saw them, without polling on time. */
#define TC_SLOT_MS 100
#define TC_SLOTS 36000

/* The fault knobs; command-line defaults, overridable per request. */
struct tc_knobs {
	uint64_t size;
	unsigned delay_ms;
	int status;
	bool chunked;
	bool drop;
	bool wronglen;
	char cc[256];
};

struct tc_reply;
TAILQ_HEAD(tc_reply_list, tc_reply);

/* State shared by all workers: counters are atomic, settings locked. */
struct tc_server {
	const char *name;
	pthread_mutex_t lock;       /* guards defaults and health_status */
	struct tc_knobs defaults;
	int health_status;
	_Atomic uint64_t requests;
	_Atomic uint64_t connections;
	_Atomic uint64_t inflight;
	_Atomic uint64_t max_inflight;
	const char *count_prefix;   /* --count-prefix, or NULL */
	size_t count_prefix_len;
	_Atomic uint64_t prefix_requests;
	uint64_t start_ms;          /* CLOCK_MONOTONIC at the start */
	_Atomic uint32_t *slot_requests, *slot_prefix;  /* TC_SLOTS each */
};

static uint64_t tc_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* One event loop: its own base, evhttp and SO_REUSEPORT listener. */
struct tc_worker {
	struct tc_server *srv;
	struct event_base *base;
	struct evhttp *http;
	pthread_t thread;
	bool started;
	/* replies waiting on a timer or a draining socket, freed at exit */
	struct tc_reply_list pending;
};

/*
 * A reply that outlives the request callback.  req stays valid while the
 * connection lives; the connection's close callback (tc_reply_closed) ends the
 * reply early when the client goes away.
 */
struct tc_reply {
	TAILQ_ENTRY(tc_reply) link;
	struct tc_worker *w;
	struct evhttp_request *req;
	struct event *timer;
	struct evbuffer *echo;  /* request body for POST/PUT, else NULL */
	struct tc_knobs k;
	uint64_t size;          /* body bytes to send */
	uint64_t sent;
	uint64_t count;         /* this request's number, for X-Request-Count */
	char *uri;
	size_t urilen;
};

/* Request headers echoed back as X-Echo-<Name>, for hop-by-hop tests. */
static const char *const tc_echo_names[] = {
	"X-Forwarded-For", "X-Forwarded-Proto", "Via", "Connection",
	"Keep-Alive", "TE", "Upgrade", "Proxy-Connection", "X-Hop-Test",
	"Host", "Transfer-Encoding", "Content-Length",
};

static void tc_reply_go(struct tc_reply *r);

static uint32_t tc_fnv1a(const unsigned char *p, size_t n, uint32_t h)
{
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 16777619u;
	}
	return h;
}

/*
 * Fill dst[0..n) with the body bytes at offsets [off, off+n) of the pattern
 * uri+"\n" repeated.  Copies the pattern once, then doubles what is written,
 * so a 64 KiB piece costs a handful of memcpy calls.
 */
static void tc_fill(const char *uri, size_t urilen, uint64_t off,
	char *dst, size_t n)
{
	size_t plen = urilen + 1;
	size_t start = (size_t)(off % plen);
	size_t done = 0;

	if (n == 0)
		return;
	/* the pattern, rotated to start at the right phase, one period long */
	while (done < n && done < plen) {
		size_t pos = (start + done) % plen;
		size_t take;
		if (pos == urilen) {
			dst[done++] = '\n';
			continue;
		}
		take = urilen - pos;
		if (take > plen - done)
			take = plen - done;
		if (take > n - done)
			take = n - done;
		memcpy(dst + done, uri + pos, take);
		done += take;
	}
	/* dst[0..done) is a whole period; doubling keeps the phase right */
	while (done < n) {
		size_t take = done;
		if (take > n - done)
			take = n - done;
		memcpy(dst + done, dst, take);
		done += take;
	}
}

/* Append n body bytes from offset off to buf.  Returns 0, or -1 on ENOMEM. */
static int tc_add_body(struct evbuffer *buf, const char *uri, size_t urilen,
	uint64_t off, size_t n)
{
	struct evbuffer_iovec v;

	if (n == 0)
		return 0;
	if (evbuffer_reserve_space(buf, (ev_ssize_t)n, &v, 1) != 1)
		return -1;
	tc_fill(uri, urilen, off, v.iov_base, n);
	v.iov_len = n;
	return evbuffer_commit_space(buf, &v, 1);
}

/* Parse a decimal in [min, max]; 0 on success. */
static int tc_parse_u64(const char *s, uint64_t min, uint64_t max,
	uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (s == NULL || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0' || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

/* Decode %XX and '+' in place; bad escapes are left as they are. */
static void tc_unescape(char *s)
{
	char *w = s;

	for (; *s; s++) {
		if (*s == '+') {
			*w++ = ' ';
		} else if (*s == '%' && isxdigit((unsigned char)s[1]) &&
		    isxdigit((unsigned char)s[2])) {
			char hex[3] = { s[1], s[2], '\0' };
			*w++ = (char)strtol(hex, NULL, 16);
			s += 2;
		} else {
			*w++ = *s;
		}
	}
	*w = '\0';
}

static bool tc_truthy(const char *v)
{
	return strcmp(v, "") != 0 && strcmp(v, "0") != 0 &&
	    strcasecmp(v, "false") != 0 && strcasecmp(v, "no") != 0;
}

/*
 * Apply one knob "key=value" to k.  Unknown keys are ignored (they are part
 * of the URL, which is the cache key, so tests may add anything).  Returns -1
 * on a known key with a bad value.  health goes to *health when not NULL.
 */
static int tc_knob_set(struct tc_knobs *k, const char *key, const char *val,
	int *health)
{
	uint64_t v;

	if (strcmp(key, "size") == 0) {
		if (tc_parse_u64(val, 0, TC_MAX_SIZE, &v) < 0)
			return -1;
		k->size = v;
	} else if (strcmp(key, "delay") == 0) {
		if (tc_parse_u64(val, 0, 3600 * 1000, &v) < 0)
			return -1;
		k->delay_ms = (unsigned)v;
	} else if (strcmp(key, "status") == 0) {
		if (tc_parse_u64(val, 200, 599, &v) < 0)
			return -1;
		k->status = (int)v;
	} else if (strcmp(key, "health") == 0 && health != NULL) {
		if (tc_parse_u64(val, 200, 599, &v) < 0)
			return -1;
		*health = (int)v;
	} else if (strcmp(key, "chunked") == 0) {
		k->chunked = tc_truthy(val);
	} else if (strcmp(key, "drop") == 0) {
		k->drop = tc_truthy(val);
	} else if (strcmp(key, "wronglen") == 0) {
		k->wronglen = tc_truthy(val);
	} else if (strcmp(key, "cc") == 0) {
		if (strlen(val) >= sizeof(k->cc) || strpbrk(val, "\r\n"))
			return -1;
		strcpy(k->cc, val);
	}
	return 0;
}

/*
 * Apply every "key=value" of the query in uri (after '?', split on '&'; a
 * value may hold '=') to k.  Returns -1 if a known knob had a bad value.
 */
static int tc_knobs_from_query(struct tc_knobs *k, const char *uri,
	int *health)
{
	const char *q = strchr(uri, '?');
	char *copy, *save = NULL, *tok;
	int rc = 0;

	if (q == NULL)
		return 0;
	copy = strdup(q + 1);
	if (copy == NULL)
		return -1;
	for (tok = strtok_r(copy, "&", &save); tok != NULL;
	    tok = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(tok, '=');
		const char *val = "1";  /* a bare "chunked" means on */
		if (eq != NULL) {
			*eq = '\0';
			val = eq + 1;
			tc_unescape(eq + 1);
		}
		if (tc_knob_set(k, tok, val, health) < 0)
			rc = -1;
	}
	free(copy);
	return rc;
}

/* Does the path of uri (query ignored) equal p? */
static bool tc_path_is(const char *uri, const char *p)
{
	size_t n = strlen(p);
	return strncmp(uri, p, n) == 0 && (uri[n] == '\0' || uri[n] == '?');
}

static void tc_add_header_u64(struct evkeyvalq *h, const char *name,
	uint64_t v)
{
	char num[24];
	snprintf(num, sizeof(num), "%llu", (unsigned long long)v);
	evhttp_add_header(h, name, num);
}

static void tc_send_text(struct evhttp_request *req, int code,
	const char *type, const char *text)
{
	struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
	struct evbuffer *out = evhttp_request_get_output_buffer(req);

	evhttp_add_header(oh, "Content-Type", type);
	evhttp_add_header(oh, "Cache-Control", "no-store");
	evbuffer_add(out, text, strlen(text));
	evhttp_send_reply(req, code, NULL, NULL);
}

static int tc_health(struct tc_server *srv)
{
	int health;

	pthread_mutex_lock(&srv->lock);
	health = srv->health_status;
	pthread_mutex_unlock(&srv->lock);
	return health;
}

/* The admin paths: handled at once, never counted, no knobs but /__set's. */
static bool tc_admin(struct tc_server *srv, struct evhttp_request *req,
	const char *uri)
{
	struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
	char json[512];

	if (strncmp(uri, "/__", 3) != 0)
		return false;
	evhttp_add_header(oh, "X-Backend", srv->name);
	if (tc_path_is(uri, "/__stats")) {
		snprintf(json, sizeof(json),
		    "{\"name\": \"%s\", \"requests\": %llu, "
		    "\"connections\": %llu, \"inflight\": %llu, "
		    "\"max_inflight\": %llu, \"health\": %d, "
		    "\"prefix_requests\": %llu}\n",
		    srv->name, (unsigned long long)atomic_load(&srv->requests),
		    (unsigned long long)atomic_load(&srv->connections),
		    (unsigned long long)atomic_load(&srv->inflight),
		    (unsigned long long)atomic_load(&srv->max_inflight),
		    tc_health(srv),
		    (unsigned long long)atomic_load(&srv->prefix_requests));
		tc_send_text(req, 200, "application/json", json);
	} else if (tc_path_is(uri, "/__series")) {
		struct evbuffer *out = evhttp_request_get_output_buffer(req);
		uint64_t n = (tc_now_ms() - srv->start_ms) / TC_SLOT_MS + 1;

		if (n > TC_SLOTS)
			n = TC_SLOTS;
		evhttp_add_header(oh, "Content-Type", "application/json");
		evhttp_add_header(oh, "Cache-Control", "no-store");
		evbuffer_add_printf(out, "{\"start_ms\": %llu, \"slot_ms\": %d, \"requests\": [",
		    (unsigned long long)srv->start_ms, TC_SLOT_MS);
		for (uint64_t i = 0; i < n; i++)
			evbuffer_add_printf(out, "%s%u", i ? "," : "",
			    atomic_load(&srv->slot_requests[i]));
		evbuffer_add_printf(out, "], \"prefix_requests\": [");
		for (uint64_t i = 0; i < n; i++)
			evbuffer_add_printf(out, "%s%u", i ? "," : "",
			    atomic_load(&srv->slot_prefix[i]));
		evbuffer_add_printf(out, "]}\n");
		evhttp_send_reply(req, 200, NULL, NULL);
	} else if (tc_path_is(uri, "/__reset")) {
		atomic_store(&srv->requests, 0);
		atomic_store(&srv->prefix_requests, 0);
		atomic_store(&srv->connections, 0);
		atomic_store(&srv->max_inflight, atomic_load(&srv->inflight));
		tc_send_text(req, 200, "text/plain", "reset\n");
	} else if (tc_path_is(uri, "/__health")) {
		int health = tc_health(srv);
		tc_send_text(req, health, "text/plain",
		    health < 400 ? "ok\n" : "unhealthy\n");
	} else if (tc_path_is(uri, "/__set")) {
		struct tc_knobs k;
		int health, bad;
		/* all or nothing: a bad knob changes no setting */
		pthread_mutex_lock(&srv->lock);
		k = srv->defaults;
		health = srv->health_status;
		bad = tc_knobs_from_query(&k, uri, &health);
		if (bad == 0) {
			srv->defaults = k;
			srv->health_status = health;
		}
		pthread_mutex_unlock(&srv->lock);
		tc_send_text(req, bad ? 400 : 200, "text/plain",
		    bad ? "bad knob\n" : "set\n");
	} else {
		return false;
	}
	return true;
}

/* Ends the server's part of a reply: counters, list, memory.  req untouched. */
static void tc_reply_free(struct tc_reply *r)
{
	if (r == NULL)
		return;
	atomic_fetch_sub(&r->w->srv->inflight, 1);
	TAILQ_REMOVE(&r->w->pending, r, link);
	if (r->timer != NULL)
		event_free(r->timer);
	if (r->echo != NULL)
		evbuffer_free(r->echo);
	free(r->uri);
	free(r);
}

/*
 * The client's connection is going away while r still needs it.  If evhttp
 * has already detached the request from the connection it will not free it,
 * so we do; otherwise evhttp frees it with the connection right after this.
 */
static void tc_reply_closed(struct evhttp_connection *conn, void *arg)
{
	struct tc_reply *r = arg;

	if (evhttp_request_get_connection(r->req) == NULL)
		evhttp_request_free(r->req);
	tc_reply_free(r);
}

/* Close the client's connection without (more) response bytes. */
static void tc_reply_abort(struct tc_reply *r)
{
	struct evhttp_connection *conn = evhttp_request_get_connection(r->req);

	if (conn != NULL) {
		evhttp_connection_set_closecb(conn, NULL, NULL);
		evhttp_connection_free(conn);  /* frees r->req too */
	} else {
		evhttp_request_free(r->req);
	}
	tc_reply_free(r);
}

/*
 * Write callback of a streamed reply: the socket has drained, so queue the
 * next piece, or finish (wrong length: close short of the promise).
 */
static void tc_reply_next(struct evhttp_connection *conn, void *arg)
{
	struct tc_reply *r = arg;
	struct evbuffer *piece;
	size_t n;

	if (r->sent >= r->size) {
		if (r->k.wronglen) {
			tc_reply_abort(r);
			return;
		}
		evhttp_connection_set_closecb(conn, NULL, NULL);
		evhttp_send_reply_end(r->req);
		tc_reply_free(r);
		return;
	}
	n = r->k.chunked ? TC_CHUNK : TC_PIECE;
	/* small chunked bodies still arrive in a few chunks */
	if (r->k.chunked && r->size < 4 * TC_CHUNK)
		n = (size_t)(r->size + 3) / 4;
	if (n > r->size - r->sent)
		n = (size_t)(r->size - r->sent);
	piece = evbuffer_new();
	if (piece == NULL)
		goto fail;
	if (r->echo != NULL) {
		if (evbuffer_remove_buffer(r->echo, piece, n) != (int)n)
			goto fail;
	} else if (tc_add_body(piece, r->uri, r->urilen, r->sent, n) < 0) {
		goto fail;
	}
	r->sent += n;
	evhttp_send_reply_chunk_with_cb(r->req, piece, tc_reply_next, r);
	evbuffer_free(piece);
	return;
fail:
	evbuffer_free(piece);
	tc_reply_abort(r);
}

static void tc_reply_timer(evutil_socket_t fd, short what, void *arg)
{
	tc_reply_go(arg);
}

/* Response headers shared by every non-admin reply. */
static void tc_reply_headers(struct tc_reply *r)
{
	struct evhttp_request *req = r->req;
	struct evkeyvalq *ih = evhttp_request_get_input_headers(req);
	struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	struct evkeyval *kv;
	char version[16];

	evhttp_add_header(oh, "X-Backend", r->w->srv->name);
	evhttp_add_header(oh, "Cache-Control", r->k.cc);
	evhttp_add_header(oh, "Content-Type",
	    cmd == EVHTTP_REQ_POST || cmd == EVHTTP_REQ_PUT ?
	    "application/octet-stream" : "image/jpeg");
	tc_add_header_u64(oh, "X-Request-Count", r->count);
	snprintf(version, sizeof(version), "%d.%d", req->major, req->minor);
	evhttp_add_header(oh, "X-Echo-Version", version);
	TAILQ_FOREACH(kv, ih, next) {
		for (size_t i = 0; i < sizeof(tc_echo_names) /
		    sizeof(tc_echo_names[0]); i++) {
			char name[64];
			if (strcasecmp(kv->key, tc_echo_names[i]) != 0)
				continue;
			snprintf(name, sizeof(name), "X-Echo-%s",
			    tc_echo_names[i]);
			evhttp_add_header(oh, name, kv->value);
		}
	}
	if (cmd == EVHTTP_REQ_POST || cmd == EVHTTP_REQ_PUT) {
		struct evbuffer *in = evhttp_request_get_input_buffer(req);
		size_t len = evbuffer_get_length(in);
		char sum[16];
		uint32_t h = 2166136261u;
		int nv = evbuffer_peek(in, -1, NULL, NULL, 0);
		struct evbuffer_iovec *v = nv > 0 ? calloc((size_t)nv, sizeof(*v)) : NULL;

		/* sum the body in place, segment by segment, without copying it */
		if (v != NULL) {
			nv = evbuffer_peek(in, -1, NULL, v, nv);
			for (int i = 0; i < nv; i++)
				h = tc_fnv1a(v[i].iov_base, v[i].iov_len, h);
			free(v);
		}
		snprintf(sum, sizeof(sum), "%08x", h);
		tc_add_header_u64(oh, "X-Body-Length", len);
		evhttp_add_header(oh, "X-Body-Sum", sum);
	}
}

/*
 * Send the reply r describes, now that any delay has passed.  Small plain
 * bodies go out in one evhttp_send_reply; the rest stream via tc_reply_next.
 */
static void tc_reply_go(struct tc_reply *r)
{
	struct evhttp_request *req = r->req;
	struct evhttp_connection *conn = evhttp_request_get_connection(req);
	struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
	enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
	bool nobody = cmd == EVHTTP_REQ_HEAD || r->k.status == 204 ||
	    r->k.status == 304;

	if (conn == NULL || r->k.drop) {
		tc_reply_abort(r);
		return;
	}
	tc_reply_headers(r);
	if (cmd == EVHTTP_REQ_POST || cmd == EVHTTP_REQ_PUT) {
		r->echo = evbuffer_new();
		if (r->echo == NULL) {
			tc_reply_abort(r);
			return;
		}
		evbuffer_add_buffer(r->echo,
		    evhttp_request_get_input_buffer(req));
		r->size = evbuffer_get_length(r->echo);
	} else {
		r->size = r->k.size;
	}

	if (nobody) {
		if (cmd == EVHTTP_REQ_HEAD)
			tc_add_header_u64(oh, "Content-Length", r->size);
		evhttp_connection_set_closecb(conn, NULL, NULL);
		evhttp_send_reply(req, r->k.status, NULL, NULL);
		tc_reply_free(r);
		return;
	}
	if (!r->k.chunked && !r->k.wronglen && r->size <= TC_WHOLE_MAX) {
		struct evbuffer *out = evhttp_request_get_output_buffer(req);
		if (r->echo != NULL)
			evbuffer_add_buffer(out, r->echo);
		else if (tc_add_body(out, r->uri, r->urilen, 0,
		    (size_t)r->size) < 0) {
			tc_reply_abort(r);
			return;
		}
		evhttp_connection_set_closecb(conn, NULL, NULL);
		evhttp_send_reply(req, r->k.status, NULL, NULL);
		tc_reply_free(r);
		return;
	}
	/* with Content-Length set, evhttp_send_reply_start does not chunk */
	if (!r->k.chunked)
		tc_add_header_u64(oh, "Content-Length", r->size +
		    (r->k.wronglen ? TC_WRONGLEN_EXTRA : 0));
	evhttp_connection_set_closecb(conn, tc_reply_closed, r);
	evhttp_send_reply_start(req, r->k.status, NULL);
	tc_reply_next(conn, r);
}

static void tc_handle(struct evhttp_request *req, void *arg)
{
	struct tc_worker *w = arg;
	struct tc_server *srv = w->srv;
	const char *uri = evhttp_request_get_uri(req);
	struct evhttp_connection *conn = evhttp_request_get_connection(req);
	struct tc_reply *r;
	uint64_t now, peak;

	if (tc_admin(srv, req, uri))
		return;
	r = calloc(1, sizeof(*r));
	if (r == NULL || (r->uri = strdup(uri)) == NULL) {
		free(r);
		evhttp_send_error(req, 500, NULL);
		return;
	}
	r->w = w;
	r->req = req;
	r->urilen = strlen(uri);
	r->count = atomic_fetch_add(&srv->requests, 1) + 1;
	{
		uint64_t slot = (tc_now_ms() - srv->start_ms) / TC_SLOT_MS;
		bool in = srv->count_prefix &&
		    strncmp(uri, srv->count_prefix, srv->count_prefix_len) == 0;

		if (in)
			atomic_fetch_add(&srv->prefix_requests, 1);
		if (slot < TC_SLOTS) {
			atomic_fetch_add(&srv->slot_requests[slot], 1);
			if (in)
				atomic_fetch_add(&srv->slot_prefix[slot], 1);
		}
	}
	pthread_mutex_lock(&srv->lock);
	r->k = srv->defaults;
	pthread_mutex_unlock(&srv->lock);
	TAILQ_INSERT_TAIL(&w->pending, r, link);
	now = atomic_fetch_add(&srv->inflight, 1) + 1;
	peak = atomic_load(&srv->max_inflight);
	while (now > peak &&
	    !atomic_compare_exchange_weak(&srv->max_inflight, &peak, now))
		;
	if (tc_knobs_from_query(&r->k, uri, NULL) < 0) {
		evhttp_send_error(req, 400, "bad knob");
		tc_reply_free(r);
		return;
	}
	if (r->k.delay_ms == 0) {
		tc_reply_go(r);
		return;
	}
	/* wait without blocking the loop; a client that leaves ends the wait */
	r->timer = evtimer_new(w->base, tc_reply_timer, r);
	if (r->timer == NULL) {
		tc_reply_abort(r);
		return;
	}
	evhttp_connection_set_closecb(conn, tc_reply_closed, r);
	struct timeval tv = { r->k.delay_ms / 1000,
	    (r->k.delay_ms % 1000) * 1000 };
	evtimer_add(r->timer, &tv);
}

/* Called by evhttp once per accepted connection: the place to count them. */
static struct bufferevent *tc_new_bev(struct event_base *base, void *arg)
{
	struct tc_server *srv = arg;

	atomic_fetch_add(&srv->connections, 1);
	return bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
}

static void tc_on_signal(evutil_socket_t sig, short what, void *arg)
{
	event_base_loopbreak(arg);
}

/* Write the port to path via path.tmp + rename so readers see all or none. */
static int tc_write_port_file(const char *path, unsigned port)
{
	char tmp[PATH_MAX];
	FILE *f;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -1;
	f = fopen(tmp, "w");
	if (f == NULL)
		return -1;
	fprintf(f, "%u\n", port);
	if (fclose(f) != 0 || rename(tmp, path) != 0)
		return -1;
	return 0;
}

static void tc_usage(FILE *f)
{
	fprintf(f,
	    "usage: testcache --listen HOST:PORT --name NAME [--port-file FILE]\n"
	    "       [--size BYTES] [--delay MS] [--status CODE] [--chunked]\n"
	    "       [--drop] [--wrong-length] [--cache-control VALUE]\n"
	    "       [--health-status CODE] [--threads N] [--count-prefix PATH]\n"
	    "Per-request query knobs: size delay status chunked drop wronglen cc.\n"
	    "Admin paths: /__stats /__series /__reset /__health /__set?health=&delay=...\n");
}

/* Split "host:port" (last colon; "[v6]:port" too) into host and port. */
static int tc_parse_listen(const char *s, char *host, size_t hostlen,
	unsigned *port)
{
	const char *colon = strrchr(s, ':');
	const char *h = s;
	size_t n;
	uint64_t p;

	if (colon == NULL || tc_parse_u64(colon + 1, 0, 65535, &p) < 0)
		return -1;
	n = (size_t)(colon - s);
	if (n >= 2 && s[0] == '[' && s[n - 1] == ']') {
		h = s + 1;
		n -= 2;
	}
	if (n == 0 || n >= hostlen)
		return -1;
	memcpy(host, h, n);
	host[n] = '\0';
	*port = (unsigned)p;
	return 0;
}

static bool tc_name_ok(const char *name)
{
	if (*name == '\0' || strlen(name) > 64)
		return false;
	for (const char *p = name; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("._-", *p))
			return false;
	return true;
}

/* Fill ss with the numeric address host and port (the 0 that libevent's
 * evutil_parse_sockaddr_port refuses is fine here).  Returns 0 or -1. */
static int tc_sockaddr(const char *host, unsigned port,
	struct sockaddr_storage *ss, int *len)
{
	struct sockaddr_in *in = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (evutil_inet_pton(AF_INET, host, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)port);
		*len = sizeof(*in);
		return 0;
	}
	if (evutil_inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*in6);
		return 0;
	}
	return -1;
}

/* The port a listening socket really got (the one the kernel chose for 0). */
static unsigned tc_bound_port(evutil_socket_t fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
		return 0;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return 0;
}

/*
 * Set up worker w listening on sa; *port gets the port bound.  Every worker
 * binds with SO_REUSEPORT so that with --threads N the kernel spreads
 * connections over N loops.  Returns 0, or -1 with errno set by the failing
 * call; tc_worker_free cleans up either way.
 */
static int tc_worker_init(struct tc_worker *w, struct tc_server *srv,
	const struct sockaddr *sa, int salen, unsigned *port)
{
	struct evconnlistener *lev;
	struct evhttp_bound_socket *bs;

	w->srv = srv;
	TAILQ_INIT(&w->pending);
	w->base = event_base_new();
	if (w->base == NULL)
		return -1;
	w->http = evhttp_new(w->base);
	if (w->http == NULL)
		return -1;
	evhttp_set_gencb(w->http, tc_handle, w);
	evhttp_set_bevcb(w->http, tc_new_bev, srv);
	evhttp_set_max_body_size(w->http, TC_MAX_BODY);
	evhttp_set_allowed_methods(w->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD |
	    EVHTTP_REQ_POST | EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
	    EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
	lev = evconnlistener_new_bind(w->base, NULL, NULL,
	    LEV_OPT_REUSEABLE | LEV_OPT_REUSEABLE_PORT | LEV_OPT_CLOSE_ON_FREE |
	    LEV_OPT_CLOSE_ON_EXEC, 1024, sa, salen);
	if (lev == NULL)
		return -1;
	/* evhttp owns the listener from here: evhttp_free frees it */
	bs = evhttp_bind_listener(w->http, lev);
	if (bs == NULL) {
		evconnlistener_free(lev);
		return -1;
	}
	*port = tc_bound_port(evhttp_bound_socket_get_fd(bs));
	return 0;
}

/*
 * Free w: replies still pending are first detached from their connections so
 * that evhttp_free's close callbacks do not reach freed memory; evhttp frees
 * the requests still attached, the detached ones are ours.
 */
static void tc_worker_free(struct tc_worker *w)
{
	struct tc_reply *r;

	while ((r = TAILQ_FIRST(&w->pending)) != NULL) {
		struct evhttp_connection *conn =
		    evhttp_request_get_connection(r->req);
		if (conn != NULL)
			evhttp_connection_set_closecb(conn, NULL, NULL);
		else
			evhttp_request_free(r->req);
		tc_reply_free(r);
	}
	if (w->http != NULL)
		evhttp_free(w->http);
	if (w->base != NULL)
		event_base_free(w->base);
}

static void *tc_worker_run(void *arg)
{
	struct tc_worker *w = arg;

	event_base_dispatch(w->base);
	return NULL;
}

int main(int argc, char **argv)
{
	struct tc_server srv = {
		.defaults = { .size = 4096, .status = 200,
		    .cc = "public, max-age=3600" },
		.health_status = 200,
	};
	const char *listen = NULL, *port_file = NULL;
	char host[256];
	unsigned port = 0, nthreads = 1;
	struct sockaddr_storage ss;
	int sslen;
	struct tc_worker *workers = NULL;
	struct event *sigterm = NULL, *sigint = NULL;
	int rc = 1;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		uint64_t n;
		int bad = 0;

		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			tc_usage(stdout);
			return 0;
		} else if (strcmp(a, "--chunked") == 0) {
			srv.defaults.chunked = true;
			continue;
		} else if (strcmp(a, "--drop") == 0) {
			srv.defaults.drop = true;
			continue;
		} else if (strcmp(a, "--wrong-length") == 0) {
			srv.defaults.wronglen = true;
			continue;
		} else if (v == NULL) {
			bad = 1;
		} else if (strcmp(a, "--listen") == 0) {
			listen = v;
		} else if (strcmp(a, "--name") == 0) {
			srv.name = v;
		} else if (strcmp(a, "--port-file") == 0) {
			port_file = v;
		} else if (strcmp(a, "--size") == 0) {
			bad = tc_knob_set(&srv.defaults, "size", v, NULL);
		} else if (strcmp(a, "--delay") == 0) {
			bad = tc_knob_set(&srv.defaults, "delay", v, NULL);
		} else if (strcmp(a, "--status") == 0) {
			bad = tc_knob_set(&srv.defaults, "status", v, NULL);
		} else if (strcmp(a, "--cache-control") == 0) {
			bad = tc_knob_set(&srv.defaults, "cc", v, NULL);
		} else if (strcmp(a, "--health-status") == 0) {
			bad = tc_parse_u64(v, 200, 599, &n);
			srv.health_status = (int)n;
		} else if (strcmp(a, "--count-prefix") == 0) {
			srv.count_prefix = v;
			srv.count_prefix_len = strlen(v);
		} else if (strcmp(a, "--threads") == 0) {
			bad = tc_parse_u64(v, 1, 64, &n);
			nthreads = (unsigned)n;
		} else {
			bad = 1;
		}
		if (bad) {
			fprintf(stderr, "testcache: bad or incomplete option "
			    "'%s'\n", a);
			tc_usage(stderr);
			return 2;
		}
		i++;
	}
	if (listen == NULL || srv.name == NULL || !tc_name_ok(srv.name) ||
	    tc_parse_listen(listen, host, sizeof(host), &port) < 0 ||
	    tc_sockaddr(host, port, &ss, &sslen) < 0) {
		fprintf(stderr, "testcache: need --listen HOST:PORT and "
		    "--name NAME (letters, digits, . _ -)\n");
		tc_usage(stderr);
		return 2;
	}
	/* a client that vanishes mid-body must not kill the server */
	signal(SIGPIPE, SIG_IGN);
	pthread_mutex_init(&srv.lock, NULL);
	/* cross-thread loopbreak needs libevent's locking; one loop does not */
	if (nthreads > 1 && evthread_use_pthreads() < 0)
		goto out;

	srv.start_ms = tc_now_ms();
	srv.slot_requests = calloc(TC_SLOTS, sizeof(*srv.slot_requests));
	srv.slot_prefix = calloc(TC_SLOTS, sizeof(*srv.slot_prefix));
	workers = calloc(nthreads, sizeof(*workers));
	if (workers == NULL || srv.slot_requests == NULL || srv.slot_prefix == NULL)
		goto out;
	for (unsigned i = 0; i < nthreads; i++) {
		if (tc_worker_init(&workers[i], &srv,
		    (struct sockaddr *)&ss, sslen, &port) < 0) {
			fprintf(stderr, "testcache: cannot listen on %s: %s\n",
			    listen, strerror(errno));
			goto out;
		}
		/* the other workers join the port the kernel chose for 0 */
		if (ss.ss_family == AF_INET)
			((struct sockaddr_in *)&ss)->sin_port =
			    htons((uint16_t)port);
		else
			((struct sockaddr_in6 *)&ss)->sin6_port =
			    htons((uint16_t)port);
	}
	if (port_file != NULL && tc_write_port_file(port_file, port) < 0) {
		fprintf(stderr, "testcache: cannot write %s: %s\n", port_file,
		    strerror(errno));
		goto out;
	}
	printf(strchr(host, ':') ? "listening on [%s]:%u\n" :
	    "listening on %s:%u\n", host, port);
	fflush(stdout);

	/* worker 0 runs on this thread and takes the signals */
	sigterm = evsignal_new(workers[0].base, SIGTERM, tc_on_signal,
	    workers[0].base);
	sigint = evsignal_new(workers[0].base, SIGINT, tc_on_signal,
	    workers[0].base);
	if (sigterm == NULL || sigint == NULL ||
	    evsignal_add(sigterm, NULL) < 0 || evsignal_add(sigint, NULL) < 0)
		goto out;
	for (unsigned i = 1; i < nthreads; i++) {
		if (pthread_create(&workers[i].thread, NULL, tc_worker_run,
		    &workers[i]) != 0)
			goto out;
		workers[i].started = true;
	}
	if (event_base_dispatch(workers[0].base) < 0)
		goto out;
	rc = 0;
out:
	for (unsigned i = 1; workers != NULL && i < nthreads; i++) {
		if (!workers[i].started)
			continue;
		event_base_loopbreak(workers[i].base);
		pthread_join(workers[i].thread, NULL);
	}
	if (sigterm != NULL)
		event_free(sigterm);
	if (sigint != NULL)
		event_free(sigint);
	if (workers != NULL) {
		for (unsigned i = 0; i < nthreads; i++)
			tc_worker_free(&workers[i]);
		free(workers);
	}
	free((void *)srv.slot_requests);
	free((void *)srv.slot_prefix);
	pthread_mutex_destroy(&srv.lock);
	/* frees evthread's locks, so a leak checker sees a clean exit */
	libevent_global_shutdown();
	return rc;
}
