/*
 * test-request.c -- one request driven through request.c as the client
 * side and the backend side would drive it, with fakes for both (the ops
 * tables of request.h): a client connection that keeps what it is sent,
 * and a backend side that records which backend a request went to and
 * answers it as the test says. The worker and the cache are real. Each
 * check is about what a user sees: the bytes the client got, the backend
 * chosen, the status.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "backend/balance.h"
#include "cache/cache.h"
#include "config/conf.h"
#include "http/http1.h"
#include "path/proxy-t.h"
#include "path/request.h"
#include "backend/snapshot.h"
#include "tap.h"
#include "path/worker.h"

/* Three backends that are never connected to: the fake backend side
 * answers for them. The cache stores from the first miss. */
static const char test_conf[] =
	"[proxy]\nlisten = 127.0.0.1:0\n"
	"[cache]\nsize = 16m\nmin_uses = 1\n"
	"[backend b0]\nurl = http://127.0.0.1:9\n"
	"[backend b1]\nurl = http://127.0.0.1:9\n"
	"[backend b2]\nurl = http://127.0.0.1:9\n";

/* ---- the fake client connection ------------------------------------------ */

struct tconn {
	struct client cl;               /* first: the ops get &cl */
	struct rbuf in;
	char data[16384];
	struct outq out;
	char *scratch;
	size_t scratch_cap;
	struct http1_header hdrs[64];
	struct request rq;
	char got[65536];                /* every byte the client was sent */
	size_t got_len;
	bool gone;                      /* the client stops reading: send fails */
	bool closed;                    /* the connection was closed */
	int done;                       /* times the request said it is done */
};

static struct tconn *tconn_of(struct client *c)
{
	return (struct tconn *)(void *)c;
}

static int tc_send(struct client *c)
{
	struct tconn *t = tconn_of(c);

	if (t->gone)
		return -1;
	for (int i = t->out.idx; i < t->out.cnt; i++) {
		size_t n = t->out.iov[i].iov_len;

		if (t->got_len + n > sizeof(t->got))
			n = sizeof(t->got) - t->got_len;
		memcpy(t->got + t->got_len, t->out.iov[i].iov_base, n);
		t->got_len += n;
		t->out.sent += t->out.iov[i].iov_len;
	}
	t->out.idx = t->out.cnt;
	return 1;
}

static void tc_nothing(struct client *c)
{
	(void)c;
}

static void tc_done(struct client *c)
{
	tconn_of(c)->done++;
}

/* As front_close: the request ends with its connection. */
static void tc_close(struct client *c)
{
	struct tconn *t = tconn_of(c);

	if (t->closed)
		return;
	t->closed = true;
	req_end(&t->rq);
}

static const struct req_client_ops tc_ops = {
	.send = tc_send,
	.resume = tc_nothing,
	.body_taken = tc_nothing,
	.done = tc_done,
	.close = tc_close,
};

/* ---- the fake backend side ----------------------------------------------- */

#define TB_MAX 16

/* One backend connection: the request it serves and its response bytes
 * (which the client's queue may point into until it drains). */
struct tup {
	struct upstream u;              /* first: request.c holds &u */
	struct request *rq;
	int ring_index;
	bool closed;
	char buf[4096];
	size_t len;
	struct http1_msg resp;
	struct http1_header hdrs[32];
};

static struct tup tb_ups[TB_MAX];
static int tb_started[TB_MAX];          /* ring index of each start */
static int tb_nstarts;

static struct tup *tup_of(struct upstream *u)
{
	return (struct tup *)(void *)u;
}

static int tb_start(struct request *rq, int i, enum req_fail *kind, char *why, size_t whylen)
{
	struct tup *tu;

	if (tb_nstarts == TB_MAX) {
		*kind = REQ_FAIL_LOCAL;
		snprintf(why, whylen, "test: too many starts");
		return -1;
	}
	tb_started[tb_nstarts] = i;
	tu = &tb_ups[tb_nstarts++];
	memset(tu, 0, sizeof(*tu));
	tu->rq = rq;
	tu->ring_index = i;
	req_bind(rq, &tu->u);
	return 0;
}

static bool tb_sending(const struct upstream *u)
{
	(void)u;
	return false;
}

static void tb_nothing(struct upstream *u)
{
	(void)u;
}

/* As forward.c's unbind: the request no longer has this connection (its
 * in-flight slot is the request's business). */
static void tb_unbind(struct tup *tu)
{
	if (!tu->rq)
		return;
	req_unbind(tu->rq);
	tu->rq = NULL;
}

static void tb_close(struct upstream *u)
{
	struct tup *tu = tup_of(u);

	tb_unbind(tu);
	tu->closed = true;
}

static const struct req_backend_ops tb_ops = {
	.start = tb_start,
	.sending = tb_sending,
	.request_body = tb_nothing,
	.client_drained = tb_nothing,
	.close = tb_close,
};

/* The latest backend connection. */
static struct tup *tb_last(void)
{
	return tb_nstarts ? &tb_ups[tb_nstarts - 1] : NULL;
}

/* The backend sends a final response head (and the body bytes after it
 * in resp, body_now of them), as forward.c relays one. Returns 0 when it
 * was relayed, 1 when the request was answered otherwise (it let go of
 * the connection), -1 when the head did not fit. */
static int tb_respond(struct tup *tu, const char *resp, size_t body_now, bool complete)
{
	struct request *rq = tu->rq;
	const struct snap_backend *sb = &rq->snap->be[tu->ring_index];
	struct http1_limits lim = { sizeof(tu->buf) - 1, 32 };
	struct http1_fwd_resp fr;
	ssize_t head;
	int rc;

	tu->len = strlen(resp);
	memcpy(tu->buf, resp, tu->len);
	http1_msg_init(&tu->resp);
	head = http1_parse_response(&tu->resp, tu->hdrs, tu->buf, tu->len, &lim, rq->msg.method_id);
	if (head <= 0)
		return -1;
	memset(&fr, 0, sizeof(fr));
	fr.backend_hdr.p = rq->snap->conf->backend_header;
	fr.backend_hdr.len = rq->snap->backend_header_len;
	fr.backend_name.p = sb->conf->name;
	fr.backend_name.len = sb->name_len;
	fr.via.p = "1.1 ringproxy";
	fr.via.len = 13;
	rc = req_response_head(rq, &tu->resp, &fr);
	if (!tu->rq)
		return 1;
	if (rc < 0)
		return -1;
	if (body_now)
		req_body(rq, tu->buf + head, body_now);
	if (complete)
		req_response_end(rq);
	req_send(rq);
	if (!tu->rq)
		return 0;               /* the client went: so did the request */
	if (complete) {
		tb_unbind(tu);
		req_done(rq);
	}
	return 0;
}

/* More body bytes [from, from + n) of the response in tu->buf. */
static void tb_more(struct tup *tu, size_t from, size_t n, bool complete)
{
	struct request *rq = tu->rq;

	req_body(rq, tu->buf + from, n);
	if (complete)
		req_response_end(rq);
	req_send(rq);
	if (!tu->rq)
		return;
	if (complete) {
		tb_unbind(tu);
		req_done(rq);
	}
}

/* The backend fails the request before any response byte, as forward.c
 * reports it: the connection is let go of first. */
static void tb_fail(struct tup *tu, int status, enum req_fail kind, const char *what)
{
	struct request *rq = tu->rq;

	tb_unbind(tu);
	tu->closed = true;
	req_failed(rq, status, kind, what);
}

/* ---- the worker, the request's road --------------------------------------- */

static struct proxy test_proxy;
static struct worker *test_w;

static int tw_accept(struct worker *w, int fd, const struct sockaddr_storage *peer, unsigned kind)
{
	(void)kind;
	(void)w;
	(void)fd;
	(void)peer;
	return -1;
}

static void tw_nothing(struct worker *w)
{
	(void)w;
}

static void tw_client(struct client *c)
{
	(void)c;
}

static void tw_up(struct upstream *u)
{
	(void)u;
}

static const struct worker_ops tw_ops = {
	.start = tw_nothing,
	.accept = tw_accept,
	.drain = tw_client,
	.close = tw_client,
	.close_idle = tw_up,
	.stop = tw_nothing,
	.end = tw_nothing,
};

static int test_setup(void)
{
	struct conf_errors errs = { 0 };
	struct cache_params cp = { 0 };
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct snapshot *s;
	struct conf *c;
	char err[256];
	int fd;

	c = conf_load_string("test.ini", test_conf, &errs);
	conf_errors_free(&errs);
	if (!c)
		return -1;
	s = snapshot_new(c, 1, err, sizeof(err));
	if (!s) {
		tap_diag("snapshot_new: %s", err);
		return -1;
	}
	cp.size = c->cache_size;
	cp.max_object = c->cache_max_object;
	cp.min_uses = c->cache_min_uses;
	test_proxy.cache = cache_new(&cp, err, sizeof(err));
	test_proxy.started = time(NULL);
	if (!test_proxy.cache) {
		tap_diag("cache_new: %s", err);
		return -1;
	}
	/* the worker's listener: on loopback, a port from the kernel; the
	 * test never accepts on it */
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 1) < 0)
		return -1;
	{
		struct worker_listener l = { .fd = fd, .kind = 0 };

		test_w = worker_new(&test_proxy, 0, &l, 1, s, &tw_ops, err, sizeof(err));
	}
	if (!test_w) {
		tap_diag("worker_new: %s", err);
		return -1;
	}
	return 0;
}

static struct tconn *tconn_new(void)
{
	struct tconn *t = calloc(1, sizeof(*t));

	if (!t)
		abort();
	t->in.data = t->data;
	t->in.cap = sizeof(t->data);
	t->scratch_cap = 8192 + WORKER_SCRATCH_EXTRA;
	t->scratch = malloc(t->scratch_cap);
	if (!t->scratch)
		abort();
	t->cl.w = test_w;
	req_init(&t->rq, test_w, &t->cl, &t->in, &t->out, &t->scratch, &t->scratch_cap,
		 "127.0.0.1", 9, &tc_ops, &tb_ops);
	return t;
}

static void tconn_free(struct tconn *t)
{
	if (!t->closed)
		req_end(&t->rq);
	free(t->scratch);
	free(t);
}

/* The client sends a request head: parsed and served as front.c does. */
static void tc_request(struct tconn *t, const char *head)
{
	struct http1_limits lim = { sizeof(t->data) - 1, 64 };
	size_t n = strlen(head);
	ssize_t r;

	t->in.pos = t->in.len = 0;
	memcpy(t->data, head, n);
	t->in.len = n;
	t->got_len = 0;
	t->out.idx = t->out.cnt = 0;
	r = http1_parse_request(&t->rq.msg, t->hdrs, t->data, n, &lim);
	if (r <= 0) {
		tap_diag("unparsable test request: %s", head);
		abort();
	}
	req_begin(&t->rq, (size_t)r, worker_next_rid(test_w));
	req_serve(&t->rq);
}

/* The connection's loop after a response: end the request, as front.c's
 * does when it is REQ_DONE. */
static void tc_next(struct tconn *t)
{
	if (t->rq.state == REQ_DONE)
		req_end(&t->rq);
	t->out.idx = t->out.cnt = 0;
}

/* Does what the client got hold s? */
static bool tc_saw(const struct tconn *t, const char *s)
{
	return memmem(t->got, t->got_len, s, strlen(s)) != NULL;
}

static bool tc_status(const struct tconn *t, int status)
{
	char line[32];

	snprintf(line, sizeof(line), "HTTP/1.1 %d ", status);
	return t->got_len >= strlen(line) && memcmp(t->got, line, strlen(line)) == 0;
}

/* Does the client end with body (its last bytes)? */
static bool tc_ends(const struct tconn *t, const char *body)
{
	size_t n = strlen(body);

	return t->got_len >= n && memcmp(t->got + t->got_len - n, body, n) == 0;
}

/* Run the worker's loop until the request is done (a posted wake-up or a
 * timer), at most a second. */
static void tw_run_until_done(struct tconn *t)
{
	for (int i = 0; i < 100 && t->rq.state != REQ_DONE && !t->closed; i++) {
		struct timeval tv = { 0, 10000 };

		event_base_loopexit(test_w->base, &tv);
		event_base_loop(test_w->base, 0);
	}
}

static const char *backend_name(int i)
{
	return test_w->snap->be[i].conf->name;
}

/* Requests in flight to the backends, as /stats counts them: every
 * request that ended gave its slot back. */
static long inflight(void)
{
	long n = 0;

	for (size_t i = 0; i < test_w->snap->nbe; i++)
		n += atomic_load(&test_w->snap->be[i].state->inflight);
	return n;
}

/* ---- the cases ------------------------------------------------------------ */

static void test_hit(void)
{
	struct tconn *t = tconn_new();
	int starts = tb_nstarts;

	tc_request(t, "GET /hit HTTP/1.1\r\nHost: img\r\n\r\n");
	tap_ok(tb_nstarts == starts + 1, "hit: the first request goes to a backend");
	tb_respond(tb_last(), "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\n"
		   "Content-Length: 5\r\n\r\nhello", 5, true);
	tap_ok(tc_status(t, 200) && tc_ends(t, "hello") && tc_saw(t, "fwd=miss; stored"),
	       "hit: the client gets the backend's 200 and body, stored on the way");
	tap_ok(t->rq.state == REQ_DONE && t->done == 1, "hit: the request is done, and says so once");
	tc_next(t);
	tc_request(t, "GET /hit HTTP/1.1\r\nHost: img\r\n\r\n");
	tap_ok(tb_nstarts == starts + 1, "hit: the second request goes to no backend");
	tap_ok(tc_status(t, 200) && tc_ends(t, "hello") && tc_saw(t, "Cache-Status: ringproxy; hit"),
	       "hit: the client gets the stored 200 and body, Cache-Status hit");
	tc_next(t);
	tap_ok(inflight() == 0, "hit: no request is left in flight to a backend");
	tconn_free(t);
}

static void test_waiters(void)
{
	struct tconn *a = tconn_new(), *b = tconn_new(), *c = tconn_new();
	int starts = tb_nstarts;

	tc_request(a, "GET /wait HTTP/1.1\r\nHost: img\r\n\r\n");
	tc_request(b, "GET /wait HTTP/1.1\r\nHost: img\r\n\r\n");
	tc_request(c, "GET /wait HTTP/1.1\r\nHost: img\r\n\r\n");
	tap_ok(tb_nstarts == starts + 1, "waiters: three clients of one URL, one backend request");
	tap_ok(b->rq.state == REQ_WAIT && c->rq.state == REQ_WAIT && b->got_len == 0 && c->got_len == 0,
	       "waiters: the other two wait, with nothing sent yet");
	tb_respond(tb_last(), "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\n"
		   "Content-Length: 6\r\n\r\nshared", 6, true);
	tap_ok(tc_status(a, 200) && tc_ends(a, "shared"), "waiters: the leader gets the backend's answer");
	tw_run_until_done(b);
	tw_run_until_done(c);
	tap_ok(tc_status(b, 200) && tc_ends(b, "shared") && tc_saw(b, "collapsed") &&
	       tc_status(c, 200) && tc_ends(c, "shared") && tc_saw(c, "collapsed"),
	       "waiters: each waiter gets the same 200 and body, Cache-Status collapsed");
	tap_ok(tb_nstarts == starts + 1, "waiters: still one backend request");
	tc_next(a);
	tc_next(b);
	tc_next(c);
	tap_ok(inflight() == 0, "waiters: no request is left in flight to a backend");
	tconn_free(a);
	tconn_free(b);
	tconn_free(c);
}

static void test_retry(void)
{
	struct tconn *t = tconn_new();
	int starts = tb_nstarts, first, second;
	char hdr[64];

	tc_request(t, "GET /retry HTTP/1.1\r\nHost: img\r\n\r\n");
	tap_ok(tb_nstarts == starts + 1, "retry: the request goes to a backend");
	first = tb_started[tb_nstarts - 1];
	tb_fail(tb_last(), 502, REQ_FAIL_CONNECT, "connect: refused");
	tap_ok(tb_nstarts == starts + 2 && t->got_len == 0,
	       "retry: a connect failure sends it on, with nothing sent to the client");
	second = tb_started[tb_nstarts - 1];
	tap_ok(second != first, "retry: to the next distinct backend (%s, then %s)",
	       backend_name(first), backend_name(second));
	tb_respond(tb_last(), "HTTP/1.1 200 OK\r\nCache-Control: no-store\r\n"
		   "Content-Length: 2\r\n\r\nok", 2, true);
	snprintf(hdr, sizeof(hdr), "X-Ringproxy-Backend: %s\r\n", backend_name(second));
	tap_ok(tc_status(t, 200) && tc_ends(t, "ok") && tc_saw(t, hdr),
	       "retry: the client gets the second backend's 200, named as its answerer");
	tc_next(t);
	tap_ok(inflight() == 0, "retry: no request is left in flight to a backend");
	tconn_free(t);
}

static void test_stale_if_error(void)
{
	struct tconn *t = tconn_new();
	int starts = tb_nstarts;

	/* stored already expired (Age past max-age), within stale-if-error */
	tc_request(t, "GET /sie HTTP/1.1\r\nHost: img\r\n\r\n");
	tb_respond(tb_last(), "HTTP/1.1 200 OK\r\nCache-Control: max-age=1, stale-if-error=600\r\n"
		   "Age: 30\r\nContent-Length: 5\r\n\r\nstale", 5, true);
	tap_ok(tc_status(t, 200) && tc_ends(t, "stale"), "stale-if-error: the first answer is relayed");
	tc_next(t);
	tc_request(t, "GET /sie HTTP/1.1\r\nHost: img\r\n\r\n");
	tap_ok(tb_nstarts == starts + 2, "stale-if-error: the expired copy is not served as fresh");
	tap_ok(tb_respond(tb_last(), "HTTP/1.1 503 Busy\r\nContent-Length: 4\r\n\r\nbusy", 4, true) == 1,
	       "stale-if-error: the backend's 503 is answered otherwise");
	tap_ok(tc_status(t, 200) && tc_ends(t, "stale") && !tc_saw(t, "busy") &&
	       tc_saw(t, "detail=stale-if-error"),
	       "stale-if-error: the client gets the stale 200 and body instead of the 503");
	tap_ok(tb_last()->closed && !tb_last()->rq, "stale-if-error: the backend connection is let go of");
	tc_next(t);
	tap_ok(inflight() == 0, "stale-if-error: no request is left in flight to a backend");
	tconn_free(t);
}

/* A request for head whose storable 10-byte response the backend starts:
 * its head and 4 body bytes. */
static struct tup *tb_half(struct tconn *t, const char *head, const char *what)
{
	struct tup *tu;

	tc_request(t, head);
	tu = tb_last();
	tb_respond(tu, "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\n"
		   "Content-Length: 10\r\n\r\n0123456789", 4, false);
	tap_ok(tc_status(t, 200) && tc_ends(t, "0123"), "%s: the head and 4 body bytes went out", what);
	return tu;
}

/* After a cut response: the next client of head goes to a backend (the
 * cut one was not stored) and gets all of it; nothing is left in flight. */
static void tc_after_cut(const char *head, int starts, const char *what)
{
	struct tconn *u = tconn_new();

	tc_request(u, head);
	tap_ok(tb_nstarts == starts + 2, "%s: the cut response was not stored: the next goes to a backend",
	       what);
	tb_respond(tb_last(), "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789", 10, true);
	tap_ok(tc_status(u, 200) && tc_ends(u, "0123456789"), "%s: the next client gets all of it", what);
	tc_next(u);
	tap_ok(inflight() == 0, "%s: no request is left in flight to a backend", what);
	tconn_free(u);
}

static void test_client_gone(void)
{
	static const char head[] = "GET /gone HTTP/1.1\r\nHost: img\r\n\r\n";
	struct tconn *t = tconn_new();
	int starts = tb_nstarts;
	struct tup *tu = tb_half(t, head, "client gone");

	t->gone = true;
	tb_more(tu, tu->len - 6, 3, false);
	tap_ok(t->closed && tc_ends(t, "0123"), "client gone: its connection is closed, nothing more sent");
	tap_ok(tu->closed && !tu->rq, "client gone: the backend connection is let go of");
	tc_after_cut(head, starts, "client gone");
	tconn_free(t);
}

static void test_backend_cut(void)
{
	static const char head[] = "GET /cut HTTP/1.1\r\nHost: img\r\n\r\n";
	struct tconn *t = tconn_new();
	int starts = tb_nstarts;
	struct tup *tu = tb_half(t, head, "backend cut");

	req_abort(tu->rq);      /* the backend's connection broke mid-body */
	tap_ok(t->closed, "backend cut: the client connection is closed (its response cannot be completed)");
	tap_ok(tc_ends(t, "0123") && !tc_saw(t, "HTTP/1.1 502"),
	       "backend cut: no error page is appended to the started response");
	tap_ok(tu->closed && !tu->rq, "backend cut: the backend connection is let go of");
	tc_after_cut(head, starts, "backend cut");
	tconn_free(t);
}

int main(void)
{
	if (test_setup() < 0) {
		printf("Bail out! setup failed\n");
		return 1;
	}
	test_hit();
	test_waiters();
	test_retry();
	test_stale_if_error();
	test_client_gone();
	test_backend_cut();
	worker_free(test_w);
	cache_free(test_proxy.cache);
	return tap_done();
}
