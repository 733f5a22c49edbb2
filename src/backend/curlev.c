/*
 * curlev.c -- the glue between one CURLM and one libevent base, the
 * pattern libcurl documents for event loops: libcurl says which sockets to
 * watch (CURLMOPT_SOCKETFUNCTION) and when to wake it (CURLMOPT_
 * TIMERFUNCTION); events and the timer call curl_multi_socket_action; ended
 * transfers are drained with curl_multi_info_read. One curlev is used by
 * one thread: the main thread's for health checks, a worker's for its
 * refreshes. curlev_easy_new makes every easy handle ringproxy uses.
 *
 * Neither callback ever returns -1 to libcurl: that marks the whole multi
 * dead, and every later transfer is refused for the life of the process
 * (a moment without memory would end every health check for good). A
 * socket that cannot be watched fails its own transfer instead, with
 * CURLE_OUT_OF_MEMORY, from an event of ours (libcurl may not be called
 * from inside its callbacks); a timer that cannot be armed fires at once.
 */
#include "backend/curlev.h"

#include <stdlib.h>
#include <time.h>

#include "base/log.h"

/* Transfers whose socket could not be watched, failed at the next turn
 * of the loop; more at once than this and the rest wait for their
 * timeout. */
#define CURLEV_NFAILED 64

struct curlev {
	struct event_base *base;
	CURLM *multi;
	struct event *timer;
	struct event *ev_failed;        /* active-only: curlev_on_failed */
	CURL *failed[CURLEV_NFAILED];
	unsigned nfailed;
	int64_t warned;                 /* the second it last warned */
	curlev_done_fn done;
	void *arg;
};

/* One watched socket. */
struct curlev_sock {
	struct curlev *ce;
	struct event *ev;
};

/* easy is no longer the multi's (ended, or removed by its owner, who may
 * free it next): it must not be failed later. */
static void curlev_unfail(struct curlev *ce, CURL *easy)
{
	for (unsigned i = 0; i < ce->nfailed; i++) {
		if (ce->failed[i] == easy) {
			ce->failed[i] = ce->failed[--ce->nfailed];
			return;
		}
	}
}

static void curlev_drain(struct curlev *ce)
{
	CURLMsg *msg;
	int left;

	while ((msg = curl_multi_info_read(ce->multi, &left))) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		CURL *easy = msg->easy_handle;
		CURLcode rc = msg->data.result;

		curl_multi_remove_handle(ce->multi, easy);
		curlev_unfail(ce, easy);
		ce->done(easy, rc, ce->arg);
	}
}

static void curlev_on_event(evutil_socket_t fd, short what, void *arg)
{
	struct curlev *ce = arg;
	int running, flags = 0;

	if (what & EV_READ)
		flags |= CURL_CSELECT_IN;
	if (what & EV_WRITE)
		flags |= CURL_CSELECT_OUT;
	curl_multi_socket_action(ce->multi, fd, flags, &running);
	curlev_drain(ce);
}

static void curlev_on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct curlev *ce = arg;
	int running;

	(void)fd;
	(void)what;
	curl_multi_socket_action(ce->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	curlev_drain(ce);
}

/* The transfers curlev_socket_cb could not watch: each ends now, as
 * failed for want of memory. */
static void curlev_on_failed(evutil_socket_t fd, short what, void *arg)
{
	struct curlev *ce = arg;

	(void)fd;
	(void)what;
	while (ce->nfailed) {
		CURL *easy = ce->failed[--ce->nfailed];

		curl_multi_remove_handle(ce->multi, easy);
		ce->done(easy, CURLE_OUT_OF_MEMORY, ce->arg);
	}
}

/* Inside curlev_socket_cb: easy's socket cannot be watched. */
static void curlev_fail(struct curlev *ce, CURL *easy)
{
	for (unsigned i = 0; i < ce->nfailed; i++)
		if (ce->failed[i] == easy)
			return;
	if (ce->nfailed < CURLEV_NFAILED)
		ce->failed[ce->nfailed++] = easy;
	event_active(ce->ev_failed, EV_TIMEOUT, 0);
}

static int curlev_socket_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
	struct curlev *ce = userp;
	struct curlev_sock *cs = socketp;
	short kind;

	(void)easy;
	if (what == CURL_POLL_REMOVE) {
		if (cs) {
			if (cs->ev)
				event_free(cs->ev);
			free(cs);
			curl_multi_assign(ce->multi, s, NULL);
		}
		return 0;
	}
	kind = (short)(EV_PERSIST | ((what & CURL_POLL_IN) ? EV_READ : 0) |
		       ((what & CURL_POLL_OUT) ? EV_WRITE : 0));
	if (!cs) {
		cs = calloc(1, sizeof(*cs));
		if (!cs) {
			curlev_fail(ce, easy);
			return 0;
		}
		cs->ce = ce;
		curl_multi_assign(ce->multi, s, cs);
	} else if (cs->ev) {
		event_free(cs->ev);
	}
	cs->ev = event_new(ce->base, s, kind, curlev_on_event, ce);
	if (!cs->ev || event_add(cs->ev, NULL) < 0)
		curlev_fail(ce, easy);
	return 0;
}

/* Never calls libcurl: it only arms or disarms our one timer. */
static int curlev_timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
	struct curlev *ce = userp;
	struct timeval tv;

	(void)multi;
	if (timeout_ms < 0) {
		evtimer_del(ce->timer);
		return 0;
	}
	tv.tv_sec = timeout_ms / 1000;
	tv.tv_usec = (timeout_ms % 1000) * 1000;
	if (evtimer_add(ce->timer, &tv) < 0)
		event_active(ce->timer, EV_TIMEOUT, 0);
	return 0;
}

CURL *curlev_easy_new(void)
{
	CURL *easy = curl_easy_init();

	if (!easy)
		return NULL;
	if (curl_easy_setopt(easy, CURLOPT_PROXY, "") != CURLE_OK ||
	    curl_easy_setopt(easy, CURLOPT_NOPROXY, "*") != CURLE_OK ||
	    curl_easy_setopt(easy, CURLOPT_PATH_AS_IS, 1L) != CURLE_OK ||
	    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http") != CURLE_OK ||
	    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L) != CURLE_OK) {
		curl_easy_cleanup(easy);
		return NULL;
	}
	return easy;
}

struct curlev *curlev_new(struct event_base *base, curlev_done_fn done, void *arg)
{
	struct curlev *ce = calloc(1, sizeof(*ce));

	if (!ce)
		return NULL;
	ce->base = base;
	ce->done = done;
	ce->arg = arg;
	ce->multi = curl_multi_init();
	ce->timer = evtimer_new(base, curlev_on_timer, ce);
	ce->ev_failed = event_new(base, -1, 0, curlev_on_failed, ce);
	if (!ce->multi || !ce->timer || !ce->ev_failed) {
		curlev_free(ce);
		return NULL;
	}
	curl_multi_setopt(ce->multi, CURLMOPT_SOCKETFUNCTION, curlev_socket_cb);
	curl_multi_setopt(ce->multi, CURLMOPT_SOCKETDATA, ce);
	curl_multi_setopt(ce->multi, CURLMOPT_TIMERFUNCTION, curlev_timer_cb);
	curl_multi_setopt(ce->multi, CURLMOPT_TIMERDATA, ce);
	return ce;
}

int curlev_add(struct curlev *ce, CURL *easy)
{
	CURLMcode rc = curl_multi_add_handle(ce->multi, easy);

	if (rc != CURLM_OK) {
		int64_t now = (int64_t)time(NULL);

		if (now != ce->warned) {        /* once a second at most */
			ce->warned = now;
			log_warn("curl: cannot start a transfer: %s", curl_multi_strerror(rc));
		}
		return -1;
	}
	return 0;
}

void curlev_remove(struct curlev *ce, CURL *easy)
{
	curlev_unfail(ce, easy);
	curl_multi_remove_handle(ce->multi, easy);
}

void curlev_free(struct curlev *ce)
{
	if (!ce)
		return;
	if (ce->multi)
		curl_multi_cleanup(ce->multi);
	if (ce->timer)
		event_free(ce->timer);
	if (ce->ev_failed)
		event_free(ce->ev_failed);
	free(ce);
}
