/*
 * health.c -- backend health, passive and active.
 *
 * Passive (worker threads): consecutive failed requests (connect errors,
 * timeouts, optionally 5xx) reaching [health] fall mark a backend down.
 * Without active checks, a down backend gets one trial request per
 * back-off period and is up again when it succeeds. Passive checks never
 * take down the last backend up of a snapshot (NGINX never marks the only
 * server of a group unavailable): with none to send its requests to, a
 * down backend would turn failures of a few requests into a 503 for every
 * request of the back-off; kept in service, it goes on failing only what
 * fails, counts the failures (stats: "failing") and is back as soon as a
 * request succeeds.
 *
 * Active (main thread): a libcurl GET of the health path every interval
 * per backend, through curlev.c on the main event base. rise passed checks
 * bring a backend up, fall failed ones take it down. The first check of
 * each backend starts at a random point of its interval so that checks of
 * many backends do not all fire together; a backend new in its snapshot
 * (at start, or added by a reload) is `checking` and checked at once: it
 * takes requests after its first passed check, and is down after a
 * failed one.
 *
 * Names (main thread): a backend whose name did not resolve when its
 * snapshot was built has no address and is down; its name is looked up
 * again every health interval on the resolver thread (resolve.c), so a
 * slow name server never holds the event loop, and once it resolves the
 * proxy makes a snapshot with the address (snapshot_readdress) and the
 * backend comes back as any down backend does: rise passed checks, or a
 * trial request.
 *
 * Transitions are compare-and-swaps on the registry's `down` flag, so
 * exactly one thread logs each one; every transition bumps
 * registry_health_gen, which tells balance.c to recompute the up weight.
 * health.c knows nothing of balance.c: balance.c asks health_trial.
 */
#include "backend/health.h"

#include <curl/curl.h>
#include <errno.h>
#include <event2/event.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "backend/curlev.h"
#include "base/log.h"
#include "backend/registry.h"
#include "backend/resolve.h"
#include "backend/snapshot.h"

/* The transition of b to down (or up), decided here by one thread: the
 * log line says why, and so does b's reason, prefixed with src (what saw
 * it, "" when why says so itself) for the page and /stats. */
__attribute__((format(printf, 5, 6)))
static void health_set(struct backend *b, int down, const struct conf_backend *cb, const char *src,
		       const char *fmt, ...)
{
	char why[256], reason[300];
	int expect = !down;
	bool checking = atomic_load(&b->checking);
	va_list ap;

	if (!atomic_compare_exchange_strong(&b->down, &expect, down))
		return;
	atomic_store(&b->checking, 0);
	atomic_fetch_add(&registry_health_gen, 1);
	atomic_fetch_add(&b->transitions, 1);
	atomic_store(&b->fails, 0);
	atomic_store(&b->check_ok, 0);
	/* failed checks go on counting while down: the operator's "failed
	 * in a row" */
	if (!down)
		atomic_store(&b->check_fail, 0);
	atomic_store(&b->trial, 0);
	atomic_store(&b->state_ms, registry_now_ms());
	if (!down && cb && cb->slow_start_ms)
		atomic_store(&b->up_since_ms, registry_now_ms());
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	snprintf(reason, sizeof(reason), "%s%s%s", src, src[0] ? ": " : "", why);
	registry_note_set(&b->reason, reason);
	/* one a reload added that never answered was never up but in name */
	if (down && atomic_exchange(&b->fresh, 0))
		log_warn("backend %s: new, never answered -> down (%s)", b->name, why);
	else if (down)
		log_warn("backend %s: up -> down (%s)", b->name, why);
	else
		log_info("backend %s: %s -> up (%s)", b->name, checking ? "checking" : "down", why);
}

/* b is new in its snapshot with active checks on: down, as "checking",
 * until its first check says (HAProxy's init-state down); it is checked
 * at once. balance.c still sends it requests while no backend of the
 * snapshot is up: at start every backend is new, and a 503 for each
 * request until the first checks answer would be an outage of our own
 * making. */
static void health_checking(struct backend *b)
{
	atomic_store(&b->checking, 1);
	if (atomic_exchange(&b->down, 1) == 0)
		atomic_fetch_add(&registry_health_gen, 1);
	atomic_store(&b->fails, 0);
	atomic_store(&b->check_ok, 0);
	atomic_store(&b->check_fail, 0);
	atomic_store(&b->trial, 0);
	atomic_store(&b->up_since_ms, 0);
	atomic_store(&b->state_ms, registry_now_ms());
	registry_note_set(&b->reason, "checking: new, no traffic until its first health check passes");
	log_info("backend %s: checking (no traffic until its first health check passes)", b->name);
}

/* The first check of a checking backend failed: it is down, as any,
 * until rise checks pass. */
static void health_checked_down(struct backend *b, const char *why)
{
	char reason[CURL_ERROR_SIZE + 64];

	atomic_store(&b->checking, 0);
	atomic_fetch_add(&registry_health_gen, 1);
	atomic_store(&b->state_ms, registry_now_ms());
	snprintf(reason, sizeof(reason), "first health check: %s", why);
	registry_note_set(&b->reason, reason);
	log_warn("backend %s: checking -> down (first health check: %s)", b->name, why);
}

void health_request_ok(struct backend *b, const struct conf_backend *cb)
{
	if (atomic_load_explicit(&b->fails, memory_order_relaxed))
		atomic_store_explicit(&b->fails, 0, memory_order_relaxed);
	if (atomic_load_explicit(&b->fresh, memory_order_relaxed))
		atomic_store_explicit(&b->fresh, 0, memory_order_relaxed);
	/* only the trial request brings a backend back (and with active
	 * checks only they do): a response to a request sent before the fall
	 * is no evidence it has recovered */
	if (atomic_load_explicit(&b->down, memory_order_relaxed) && !cb->health.path[0]) {
		int expect = 1;

		if (atomic_compare_exchange_strong(&b->trial, &expect, 0))
			health_set(b, 0, cb, "", "a request succeeded after the back-off");
	}
}

/* Is a backend of s other than i up, with points and an address: one
 * the walk can send i's requests to? */
static bool health_other_up(const struct snapshot *s, int i)
{
	for (size_t j = 0; j < s->nbe; j++)
		if ((int)j != i && s->ring->npoints_of[j] && s->be[j].addrlen &&
		    !atomic_load(&s->be[j].state->down))
			return true;
	return false;
}

/* Passive take-downs one at a time, so that two backends failing at once
 * on two workers cannot both see the other up and both go down. Taken
 * only by a request that failed with its backend at fall. */
static pthread_mutex_t health_fall_lock = PTHREAD_MUTEX_INITIALIZER;

void health_request_failed(const struct snapshot *s, int i, const char *why)
{
	const struct conf *conf = s->conf;
	const struct conf_backend *cb = s->be[i].conf;
	struct backend *b = s->be[i].state;
	unsigned n;

	if (!conf->passive)
		return;
	n = atomic_fetch_add(&b->fails, 1) + 1;
	registry_note_set(&b->last_fail, why);
	if (atomic_load(&b->down)) {
		/* a trial failed: wait a whole back-off again */
		atomic_store(&b->trial, 0);
		atomic_store(&b->retry_at_ms, registry_now_ms() + (int64_t)conf->backoff_ms);
		return;
	}
	if (n < cb->health.fall)
		return;
	pthread_mutex_lock(&health_fall_lock);
	if (health_other_up(s, i)) {
		atomic_store(&b->retry_at_ms, registry_now_ms() + (int64_t)conf->backoff_ms);
		health_set(b, 1, cb, "failed requests", "%s x%u", why, n);
	} else if (n == cb->health.fall) {
		log_warn("backend %s: %s x%u, but it is the last backend up: it stays in service "
			 "(passive checks never take the last one down)", b->name, why, n);
	}
	pthread_mutex_unlock(&health_fall_lock);
}

bool health_trial(struct backend *b, const struct conf_backend *cb, const struct conf *conf)
{
	int64_t at, now;

	if (cb->health.path[0])
		return false;           /* active checks decide */
	at = atomic_load(&b->retry_at_ms);
	now = registry_now_ms();
	if (now < at)
		return false;
	if (!atomic_compare_exchange_strong(&b->retry_at_ms, &at, now + (int64_t)conf->backoff_ms))
		return false;
	atomic_store(&b->trial, 1);
	return true;
}

void health_unresolved(struct backend *b, const char *host, const char *why)
{
	health_set(b, 1, NULL, "", "cannot resolve '%s': %s", host, why);
	/* once it has an address, a passive trial may go at once */
	atomic_store(&b->retry_at_ms, 0);
}

bool health_trial_due(const struct backend *b, const struct conf_backend *cb)
{
	return !cb->health.path[0] && registry_now_ms() >= atomic_load(&b->retry_at_ms);
}

void health_reset(struct backend *b, const char *url)
{
	/* a checking one waits for its first check still */
	if (atomic_load(&b->down) && !atomic_load(&b->checking))
		health_set(b, 0, NULL, "", "new url %s: checked afresh", url);
	atomic_store(&b->fails, 0);
	atomic_store(&b->check_ok, 0);
	atomic_store(&b->check_fail, 0);
}

/* ---- active checks (main thread) ------------------------------------ */

/* A check of b that failed on our side (health_local_failure): counted
 * apart, b's state and its run of passes or failures kept; warned at most
 * once a second, whatever the number of backends. */
static void health_local_error(struct backend *b, const char *why)
{
	static int64_t warned_ms;
	int64_t now = registry_now_ms();

	atomic_fetch_add_explicit(&b->health_local_errors, 1, memory_order_relaxed);
	if (now - warned_ms < 1000)
		return;
	warned_ms = now;
	log_warn("backend %s: health check failed here, not at the backend (%s); its state is kept",
		 b->name, why);
}

struct health_check {
	struct health *h;
	struct backend *b;
	const struct conf_backend *cb;  /* valid while h->snap is held */
	struct conf_health settings;    /* what it was started with; the path
					   is compared through url (this copy's
					   path pointer is not used) */
	char url[600];
	char errbuf[CURL_ERROR_SIZE];
	CURL *easy;
	struct event *timer;
	bool running;
};

/* A backend name that did not resolve, looked up every interval. */
struct health_name {
	struct health *h;
	char name[65];
	char *host;
	uint16_t port;
	uint64_t interval_ms;
	struct event *timer;
	bool pending;                   /* a lookup is out */
};

struct health {
	struct event_base *base;
	struct curlev *ce;
	struct snapshot *snap;
	struct health_check **checks;
	size_t n;
	struct resolver *res;
	struct health_name **names;
	size_t nnames;
	health_resolved_fn *resolved;
	void *resolved_arg;
};

static size_t health_discard(char *p, size_t size, size_t n, void *arg)
{
	(void)p;
	(void)arg;
	return size * n;
}

static void health_url(char *out, size_t len, const struct conf_backend *cb, const char *path)
{
	char hp[300];

	conf_hostport(cb, hp, sizeof(hp));
	snprintf(out, len, "http://%s%s", hp, path);
}

/* 0, or -1 when a setting could not be stored (libcurl copies the URL:
 * out of memory), which would send the check without a URL. */
static int health_easy_setup(CURL *easy, const char *url, uint64_t timeout_ms, char *errbuf)
{
	errbuf[0] = '\0';
	if (curl_easy_setopt(easy, CURLOPT_URL, url) != CURLE_OK ||
	    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, (long)timeout_ms) != CURLE_OK ||
	    curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, (long)timeout_ms) != CURLE_OK ||
	    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, health_discard) != CURLE_OK ||
	    curl_easy_setopt(easy, CURLOPT_USERAGENT, "ringproxy-health/" RINGPROXY_VERSION) != CURLE_OK ||
	    curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, errbuf) != CURLE_OK)
		return -1;
	return 0;
}

static void health_schedule(struct health_check *hc, uint64_t ms)
{
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000) };

	evtimer_add(hc->timer, &tv);
}

static void health_on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct health_check *hc = arg;

	(void)fd;
	(void)what;
	if (health_easy_setup(hc->easy, hc->url, hc->cb->health.timeout_ms, hc->errbuf) < 0) {
		health_local_error(hc->b, "out of memory");
		health_schedule(hc, hc->cb->health.interval_ms);
		return;
	}
	curl_easy_setopt(hc->easy, CURLOPT_PRIVATE, hc);
	if (curlev_add(hc->h->ce, hc->easy) == 0) {
		hc->running = true;
	} else {
		health_local_error(hc->b, "the check could not be started");
		health_schedule(hc, hc->cb->health.interval_ms);
	}
}

/* What check hc saw, in words into why (the log's and the reason's), and
 * kept in its backend as the last check: when, how long, the status. A
 * refused or timed-out connection is said so, in the words a failed
 * request's are (curl's own message names neither plainly). */
static void health_check_result(struct health_check *hc, CURL *easy, CURLcode rc, long status, bool ok,
				char *why, size_t len)
{
	const struct conf_health *cfg = &hc->cb->health;
	struct backend *b = hc->b;
	curl_off_t us = 0;
	long oserr = 0;

	curl_easy_getinfo(easy, CURLINFO_TOTAL_TIME_T, &us);
	curl_easy_getinfo(easy, CURLINFO_OS_ERRNO, &oserr);
	if (rc == CURLE_COULDNT_CONNECT && oserr)
		snprintf(why, len, "connect: %s", strerror((int)oserr));
	else if (rc == CURLE_OPERATION_TIMEDOUT)
		snprintf(why, len, "timeout: no answer within %llums", (unsigned long long)cfg->timeout_ms);
	else if (rc != CURLE_OK)
		snprintf(why, len, "%s", hc->errbuf[0] ? hc->errbuf : curl_easy_strerror(rc));
	else if (!ok)
		snprintf(why, len, "status %ld, expected %d-%d", status, cfg->expect_lo, cfg->expect_hi);
	else
		snprintf(why, len, "status %ld", status);
	atomic_store(&b->check_at_ms, registry_now_ms());
	atomic_store(&b->check_us, us > 0 ? (uint64_t)us : 0);
	atomic_store(&b->check_status, rc == CURLE_OK ? (int)status : 0);
	atomic_store(&b->check_passed, ok);
	registry_note_set(&b->check_text, why);
}

/* Did check easy fail for want of something of ours (memory, file
 * descriptors) rather than for anything the backend did? Such a failure
 * says nothing of the backend: counting it would mark every backend down
 * at once when the proxy itself runs short. */
static bool health_local_failure(CURL *easy, CURLcode rc)
{
	long oserr = 0;

	if (rc == CURLE_OUT_OF_MEMORY || rc == CURLE_FAILED_INIT)
		return true;
	curl_easy_getinfo(easy, CURLINFO_OS_ERRNO, &oserr);
	return rc == CURLE_COULDNT_CONNECT &&
	       (oserr == EMFILE || oserr == ENFILE || oserr == ENOMEM || oserr == ENOBUFS);
}

static void health_on_done(CURL *easy, CURLcode rc, void *arg)
{
	struct health_check *hc = NULL;
	const struct conf_health *cfg;
	long status = 0;
	char why[CURL_ERROR_SIZE + 32];
	bool ok;

	(void)arg;
	curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&hc);
	if (!hc)
		return;
	hc->running = false;
	cfg = &hc->cb->health;
	if (health_local_failure(easy, rc)) {
		health_local_error(hc->b, hc->errbuf[0] ? hc->errbuf : curl_easy_strerror(rc));
		health_schedule(hc, cfg->interval_ms);
		return;
	}
	curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
	ok = rc == CURLE_OK && status >= cfg->expect_lo && status <= cfg->expect_hi;
	health_check_result(hc, easy, rc, status, ok, why, sizeof(why));
	if (ok) {
		unsigned n = atomic_fetch_add(&hc->b->check_ok, 1) + 1;

		atomic_store(&hc->b->check_fail, 0);
		atomic_store(&hc->b->fails, 0);
		if (atomic_load(&hc->b->checking))
			health_set(hc->b, 0, hc->cb, "", "first health check passed");
		else if (atomic_load(&hc->b->down) && n >= cfg->rise)
			health_set(hc->b, 0, hc->cb, "", "health check passed x%u", n);
	} else {
		unsigned n = atomic_fetch_add(&hc->b->check_fail, 1) + 1;

		atomic_store(&hc->b->check_ok, 0);
		if (atomic_load(&hc->b->checking))
			health_checked_down(hc->b, why);
		else if (!atomic_load(&hc->b->down) && n >= cfg->fall)
			health_set(hc->b, 1, hc->cb, "", "health check: %s x%u", why, n);
		else
			log_debug("backend %s: health check failed: %s", hc->b->name, why);
	}
	health_schedule(hc, cfg->interval_ms);
}

struct health *health_new(struct event_base *base, health_resolved_fn *resolved, void *arg)
{
	struct health *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	h->base = base;
	h->resolved = resolved;
	h->resolved_arg = arg;
	h->ce = curlev_new(base, health_on_done, h);
	h->res = resolver_new(base);
	if (!h->ce || !h->res) {
		curlev_free(h->ce);
		resolver_free(h->res);
		free(h);
		return NULL;
	}
	return h;
}

/* ---- names that did not resolve (main thread) ------------------------ */

static void health_name_free(struct health *h, struct health_name *hn)
{
	if (!hn)
		return;
	resolver_cancel(h->res, hn);
	if (hn->timer)
		event_free(hn->timer);
	free(hn->host);
	free(hn);
}

static void health_name_schedule(struct health_name *hn)
{
	struct timeval tv = { (time_t)(hn->interval_ms / 1000),
			      (suseconds_t)((hn->interval_ms % 1000) * 1000) };

	evtimer_add(hn->timer, &tv);
}

static void health_on_resolved(void *arg, int rc, const struct sockaddr *addr, socklen_t len)
{
	struct health_name *hn = arg;
	struct health *h = hn->h;
	char name[sizeof(hn->name)];

	hn->pending = false;
	if (rc != 0) {
		log_debug("backend %s: '%s' still does not resolve: %s", hn->name, hn->host, gai_strerror(rc));
		health_name_schedule(hn);
		return;
	}
	/* the callback makes a new snapshot and applies it here, which
	 * frees hn: nothing of it is used after, unless it failed */
	memcpy(name, hn->name, sizeof(name));
	if (h->resolved(h->resolved_arg, name, addr, len) < 0)
		health_name_schedule(hn);
}

static void health_on_name_timer(evutil_socket_t fd, short what, void *arg)
{
	struct health_name *hn = arg;

	(void)fd;
	(void)what;
	if (hn->pending)
		return;
	if (resolver_lookup(hn->h->res, hn->host, hn->port, health_on_resolved, hn) == 0)
		hn->pending = true;
	else
		health_name_schedule(hn);
}

/* The lookups for the backends of s without an address: those of the
 * previous snapshot that go on (same name, host and port) keep their
 * place in their interval, as checks do. */
static void health_apply_names(struct health *h, struct snapshot *s)
{
	struct health_name **names = calloc(s->nbe ? s->nbe : 1, sizeof(*names));
	size_t n = 0;

	if (!names) {
		log_error("health: out of memory; names that do not resolve are not looked up again");
		return;
	}
	for (size_t i = 0; i < s->nbe; i++) {
		const struct conf_backend *cb = s->be[i].conf;
		struct health_name *hn = NULL;

		if (s->be[i].addrlen)
			continue;
		for (size_t j = 0; j < h->nnames; j++) {
			struct health_name *old = h->names[j];

			if (old && strcmp(old->name, cb->name) == 0 && strcmp(old->host, cb->host) == 0 &&
			    old->port == cb->port) {
				hn = old;
				h->names[j] = NULL;
				break;
			}
		}
		if (!hn) {
			hn = calloc(1, sizeof(*hn));
			if (hn) {
				hn->h = h;
				snprintf(hn->name, sizeof(hn->name), "%s", cb->name);
				hn->host = strdup(cb->host);
				hn->port = cb->port;
				hn->timer = evtimer_new(h->base, health_on_name_timer, hn);
			}
			if (!hn || !hn->host || !hn->timer) {
				log_error("health: out of memory; backend %s's name is not looked up again",
					  cb->name);
				health_name_free(h, hn);
				continue;
			}
			hn->interval_ms = cb->health.interval_ms;
			health_name_schedule(hn);
		}
		hn->interval_ms = cb->health.interval_ms;
		names[n++] = hn;
	}
	for (size_t j = 0; j < h->nnames; j++)
		health_name_free(h, h->names[j]);
	free(h->names);
	h->names = names;
	h->nnames = n;
}

static void health_check_free(struct health *h, struct health_check *hc)
{
	if (!hc)
		return;
	if (hc->running)
		curlev_remove(h->ce, hc->easy);
	if (hc->easy)
		curl_easy_cleanup(hc->easy);
	if (hc->timer)
		event_free(hc->timer);
	free(hc);
}

static void health_stop(struct health *h)
{
	for (size_t i = 0; i < h->n; i++)
		health_check_free(h, h->checks[i]);
	free(h->checks);
	h->checks = NULL;
	h->n = 0;
	snapshot_unref(h->snap);
	h->snap = NULL;
}

/* A check of the previous snapshot that can go on as it is: same backend,
 * same URL, same settings. Taken out of the old list. */
static struct health_check *health_keep(struct health *h, const struct conf_backend *cb,
					const char *url)
{
	for (size_t i = 0; i < h->n; i++) {
		struct health_check *hc = h->checks[i];

		if (hc && strcmp(hc->b->name, cb->name) == 0 && strcmp(hc->url, url) == 0 &&
		    hc->settings.interval_ms == cb->health.interval_ms &&
		    hc->settings.timeout_ms == cb->health.timeout_ms &&
		    hc->settings.rise == cb->health.rise && hc->settings.fall == cb->health.fall &&
		    hc->settings.expect_lo == cb->health.expect_lo &&
		    hc->settings.expect_hi == cb->health.expect_hi) {
			h->checks[i] = NULL;
			return hc;
		}
	}
	return NULL;
}

/* Is name new in a snapshot that follows prev (NULL: the first)? */
static bool health_is_new(const struct snapshot *prev, const char *name)
{
	for (size_t i = 0; prev && i < prev->nbe; i++)
		if (strcmp(prev->be[i].conf->name, name) == 0)
			return false;
	return true;
}

/* Reloads keep the running checks of unchanged backends where they are in
 * their interval: frequent reloads must not keep postponing the checks. */
void health_apply(struct health *h, struct snapshot *s)
{
	struct health_check **checks = calloc(s->nbe ? s->nbe : 1, sizeof(*checks));
	size_t n = 0;

	if (!checks) {
		log_error("health: out of memory; active checks keep the previous config");
		return;
	}
	for (size_t i = 0; i < s->nbe; i++) {
		const struct conf_backend *cb = s->be[i].conf;
		struct health_check *hc;
		char url[sizeof(hc->url)];

		/* a reload's new backend: in service by presumption until it
		 * answers (with active checks it is "checking" instead) */
		if (h->snap && health_is_new(h->snap, cb->name))
			atomic_store(&s->be[i].state->fresh, !cb->health.path[0]);
		if (!cb->health.path[0] || !s->be[i].addrlen)
			continue;
		health_url(url, sizeof(url), cb, cb->health.path);
		hc = health_keep(h, cb, url);
		if (hc) {
			hc->cb = cb;            /* now in the new snapshot */
			checks[n++] = hc;
			continue;
		}
		hc = calloc(1, sizeof(*hc));
		if (!hc) {
			log_error("health: out of memory; backend %s is not checked", cb->name);
			continue;
		}
		hc->h = h;
		hc->b = s->be[i].state;
		hc->cb = cb;
		hc->settings = cb->health;
		hc->settings.path = NULL;
		memcpy(hc->url, url, sizeof(url));
		hc->easy = curlev_easy_new();
		hc->timer = evtimer_new(h->base, health_on_timer, hc);
		if (!hc->easy || !hc->timer) {
			log_error("health: out of memory; backend %s is not checked", cb->name);
			health_check_free(h, hc);
			continue;
		}
		if (health_is_new(h->snap, cb->name)) {
			health_checking(hc->b);
			health_schedule(hc, 0);
		} else {
			health_schedule(hc, (uint64_t)random() % cb->health.interval_ms);
		}
		checks[n++] = hc;
	}
	health_stop(h);         /* what was not kept, and the old snapshot */
	snapshot_ref(s);
	h->snap = s;
	h->checks = checks;
	h->n = n;
	health_apply_names(h, s);
}

void health_free(struct health *h)
{
	if (!h)
		return;
	health_stop(h);
	for (size_t j = 0; j < h->nnames; j++)
		health_name_free(h, h->names[j]);
	free(h->names);
	resolver_free(h->res);
	curlev_free(h->ce);
	free(h);
}

/* ---- -t --probe --------------------------------------------------------- */

/* Is backend cb of a config new to known (NULL: every backend is): not
 * there, or there with another url? */
static bool health_probe_wanted(const struct conf_backend *cb, const struct conf *known)
{
	const struct conf_backend *was = known ? conf_backend_find(known, cb->name) : NULL;

	return !was || strcmp(was->url, cb->url) != 0;
}

int health_probe(const struct conf *c, const struct conf *known, FILE *out)
{
	CURLM *multi = curl_multi_init();
	CURL **easy = calloc(c->nbackends ? c->nbackends : 1, sizeof(*easy));
	char (*err)[CURL_ERROR_SIZE] = calloc(c->nbackends ? c->nbackends : 1, sizeof(*err));
	char (*url)[600] = calloc(c->nbackends ? c->nbackends : 1, sizeof(*url));
	size_t wname = 7, wurl = 3, n = 0;
	int running = 1, rc = 0;

	if (!multi || !easy || !err || !url) {
		fprintf(stderr, "ringproxy: out of memory\n");
		rc = 1;
		goto out;
	}
	for (size_t i = 0; i < c->nbackends; i++) {
		const struct conf_backend *cb = &c->backends[i];

		if (!health_probe_wanted(cb, known))
			continue;
		health_url(url[i], sizeof(url[i]), cb, cb->health.path[0] ? cb->health.path : "/");
		easy[i] = curlev_easy_new();
		if (!easy[i]) {
			rc = 1;
			goto out;
		}
		if (health_easy_setup(easy[i], url[i], cb->health.timeout_ms, err[i]) < 0) {
			rc = 1;
			goto out;
		}
		curl_multi_add_handle(multi, easy[i]);
		n++;
		if (strlen(cb->name) > wname)
			wname = strlen(cb->name);
		if (strlen(url[i]) > wurl)
			wurl = strlen(url[i]);
	}
	if (n == 0) {
		fprintf(out, "\nprobe: no backend is new or has a new url; nothing to probe\n");
		goto out;
	}
	while (running) {
		if (curl_multi_perform(multi, &running) != CURLM_OK)
			break;
		if (running)
			curl_multi_poll(multi, NULL, 0, 100, NULL);
	}
	/* results in file order */
	{
		CURLMsg *msg;
		int left;
		CURLcode *res = calloc(c->nbackends ? c->nbackends : 1, sizeof(*res));

		if (!res) {
			rc = 1;
			goto out;
		}
		for (size_t i = 0; i < c->nbackends; i++)
			res[i] = CURLE_OPERATION_TIMEDOUT;
		while ((msg = curl_multi_info_read(multi, &left)))
			for (size_t i = 0; i < c->nbackends; i++)
				if (msg->msg == CURLMSG_DONE && msg->easy_handle == easy[i])
					res[i] = msg->data.result;
		fprintf(out, "\nprobe: GET each %sbackend's health path, or / without one (timeout from [health])\n\n",
			known ? "new or readdressed " : "");
		fprintf(out, "  %-*s  %-*s  %-8s  %s\n", (int)wname, "backend", (int)wurl, "url", "time", "result");
		for (size_t i = 0; i < c->nbackends; i++) {
			const struct conf_backend *cb = &c->backends[i];
			long status = 0;
			double secs = 0;
			bool good;

			if (!easy[i])
				continue;

			curl_easy_getinfo(easy[i], CURLINFO_RESPONSE_CODE, &status);
			curl_easy_getinfo(easy[i], CURLINFO_TOTAL_TIME, &secs);
			good = res[i] == CURLE_OK && status >= cb->health.expect_lo &&
			       status <= cb->health.expect_hi;
			fprintf(out, "  %-*s  %-*s  %6.1fms  ", (int)wname, cb->name, (int)wurl, url[i], secs * 1000);
			if (res[i] != CURLE_OK)
				fprintf(out, "unreachable: %s", err[i][0] ? err[i] : curl_easy_strerror(res[i]));
			else
				fprintf(out, "%ld %s", status, good ? "ok" : "unhealthy (outside expect)");
			if (!good && cb->weight == 0)
				fprintf(out, " (weight 0: ignored)");
			fputc('\n', out);
			if (!good && cb->weight > 0)
				rc = 1;
		}
		free(res);
	}
out:
	for (size_t i = 0; easy && i < c->nbackends; i++) {
		if (easy[i]) {
			curl_multi_remove_handle(multi, easy[i]);
			curl_easy_cleanup(easy[i]);
		}
	}
	if (multi)
		curl_multi_cleanup(multi);
	free(easy);
	free(err);
	free(url);
	return rc;
}
