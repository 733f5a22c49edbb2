/*
 * proxy.c -- the running daemon, on the main thread: builds the first
 * snapshot, opens one SO_REUSEPORT listener per worker, starts the workers,
 * then runs the main event loop for signals and health checks.
 *
 * Reload (SIGHUP): the file is read and validated here, off the request
 * threads; on any error every error is logged and the running config keeps
 * serving. On success the new snapshot (ring, resolved addresses) is built
 * here too and handed to each worker, which swaps it in between requests; a
 * request keeps the snapshot it started with. SIGHUPs that arrive during a
 * reload coalesce into one more reload afterwards.
 *
 * Stop (SIGTERM/SIGINT): listeners close (new connections are refused),
 * idle connections close, requests in flight finish up to
 * [proxy] shutdown_timeout, then the process exits 0. A second signal stops
 * at once.
 *
 * ringproxy never forks into the background: it runs in the foreground and
 * logs to stderr, as systemd and containers expect, and tells systemd
 * about its state through notify.c when NOTIFY_SOCKET is set.
 */
#include "proxy.h"

#include <curl/curl.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <arpa/inet.h>
#include <math.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/addr.h"
#include "path/access.h"
#include "admin/admin.h"
#include "cache/cache.h"
#include "path/conn.h"
#include "path/forward.h"
#include "path/front.h"
#include "backend/dnssrv.h"
#include "backend/health.h"
#include "base/log.h"
#include "base/notify.h"
#include "config/pidfile.h"
#include "admin/plan.h"
#include "config/preflight.h"
#include "path/refresh.h"
#include "base/rates.h"
#include "backend/registry.h"
#include "backend/resolve.h"
#include "backend/runstate.h"
#include "config/discover.h"
#include "backend/snapshot.h"
#include "admin/stats.h"
#include "config/watch.h"
#include "path/worker.h"
#include "tls/certs.h"

struct proxy_main {
	struct proxy p;
	const char *path;
	struct event_base *base;
	struct snapshot *snap;
	struct health *health;
	struct event *ev_reload;        /* activated by SIGHUP, coalescing */
	struct event *ev_poll;          /* while stopping: are workers done? */
	struct event *ev_deadline;      /* while stopping: shutdown_timeout */
	struct event *ev_sample;        /* every second: stats_sample */
	struct event *ev_tier;          /* a minute after a reload: the tier's
					   miss ratio since (proxy_on_tier) */
	uint64_t tier_gen;              /* the reload it tells of */
	double tier_before;             /* its minute before; -1: no verdicts */
	bool stopping;
	int stop_signal;
	char listen_text[80];           /* the address in use, port resolved:
					   a reload never changes it (the
					   first of the listeners) */
	struct proxy_addr {             /* every listen address, plain then
					   [tls]'s: bound at start */
		struct sockaddr_storage ss;
		socklen_t len;
		unsigned kind;          /* WORKER_L_* */
	} addrs[2 * CONF_LISTEN_MAX];
	unsigned naddrs;
	bool tls;                       /* any [tls] listen address */
	char tls_conf[320];             /* [tls] listen as at start */
	char listen_conf[320];          /* listen and workers as the first
					   load gave them: what a reload's */
	unsigned workers_conf;          /* values must equal to take effect */
	char admin_conf[320];           /* admin_listen likewise */
	char pid_conf[4096];            /* pid_file likewise */
	const char *pid_file;           /* written after listen ("": none):
					   --pid-file's, else pid_conf */
	struct admin *admin;
	struct watch *watch;            /* with [proxy] watch_config */
	bool state_gone_warned;         /* the state file's disappearance,
					   once (proxy_state_watch) */
	struct discover disc;           /* [discovery]: its members (discover.h) */
	bool disc_init;                 /* disc set up */
	struct dnssrv *dns;             /* its poller; NULL without srv */
	struct event *ev_apply;         /* the next apply_every point */
	bool disc_failing;              /* the last answer was no evidence */
	size_t disc_held_said;          /* the held removals the log told of */
	struct resolver *rr;            /* the file's host names looked up
					   again every [discovery] interval */
	struct event *ev_rr;
	size_t rr_next;                 /* the backend index looked up next */
	char rr_name[DISCOVER_NAME_MAX + 1]; /* the one being looked up */
	int64_t down_seen_ms;           /* the latest health change acted on
					   (proxy_resolve_down) */
};

static void proxy_status(struct proxy_main *m)
{
	notify_send("READY=1\nSTATUS=generation %llu, %zu backend%s, listening on %s",
		    (unsigned long long)m->snap->generation, m->snap->nbe, m->snap->nbe == 1 ? "" : "s", m->listen_text);
}

static void proxy_record(struct proxy_main *m, bool ok, const char *text, double moved)
{
	struct proxy_reload *r = &m->p.last_reload;

	r->when = time(NULL);
	r->ok = ok;
	r->moved = ok ? moved : 0;
	r->ramp_at = r->ramp_len = 0;
	r->ramp_end_ms = 0;
	r->seq = ++m->p.changes;
	snprintf(r->text, sizeof(r->text), "%s", text);
	m->p.reloads[m->p.nreloads++ % PROXY_RELOADS] = *r;
	if (ok) {
		m->p.generation = m->snap->generation;
		m->p.conf_loaded = r->when;
	} else {
		atomic_fetch_add(&m->p.reloads_failed, 1);
	}
}

/* The reload just recorded: its text holds the warm ramp's words at
 * [at, at + len), that ramp ending at end_ms (Unix ms). */
static void proxy_record_ramp(struct proxy_main *m, size_t at, size_t len, long long end_ms)
{
	struct proxy_reload *r = &m->p.last_reload;

	if (!len || at + len > strlen(r->text))
		return;
	r->ramp_at = at;
	r->ramp_len = len;
	r->ramp_end_ms = end_ms;
	m->p.reloads[(m->p.nreloads - 1) % PROXY_RELOADS] = *r;
}

/* The backends of s whose name did not resolve: said at each load, as
 * the file would say it, and down until the name resolves (health.c
 * looks it up again every interval). */
static void proxy_unresolved(const struct snapshot *s)
{
	for (size_t i = 0; i < s->nbe; i++) {
		const struct snap_backend *sb = &s->be[i];
		const char *why;

		if (sb->addrlen)
			continue;
		why = gai_strerror(sb->resolve_rc);
		log_warn("%s:%d: backend %s: cannot resolve '%s': %s; it is down, and its name is resolved again every %gs (its health interval)",
			 s->conf->path, conf_backend_line(sb->conf, "url"), sb->conf->name, sb->conf->host, why,
			 (double)sb->conf->health.interval_ms / 1000);
		health_unresolved(sb->state, sb->conf->host, why);
	}
}

/* Hand s to every worker and to the health checks; it becomes current. */
static void proxy_publish(struct proxy_main *m, struct snapshot *s)
{
	for (unsigned i = 0; i < m->p.nworkers; i++) {
		snapshot_ref(s);
		worker_post_snapshot(m->p.workers[i], s);
	}
	health_apply(m->health, s);
	snapshot_unref(m->snap);
	m->snap = s;
	m->p.current = s;
	m->p.fingerprint = ring_fingerprint(s->ring);
}

/* health.c: a backend name that did not resolve does now. The snapshot
 * that has its address replaces the current one; the backend stays down
 * until its checks pass (or a passive trial succeeds). */
static int proxy_on_resolved(void *arg, const char *name, const struct sockaddr *addr, socklen_t len)
{
	struct proxy_main *m = arg;
	struct snapshot *s = snapshot_readdress(m->snap, name, addr, len);
	size_t i;

	if (!s) {
		log_error("backend %s: its name resolves now, but no snapshot could be made (out of memory); "
			  "tried again at the next interval", name);
		return -1;
	}
	for (i = 0; i < s->nbe && strcmp(s->be[i].conf->name, name) != 0; i++)
		;
	log_info("backend %s: '%s' resolves now, to %s; it comes back when it passes its %s", name,
		 s->be[i].conf->host, s->be[i].addr_text,
		 s->be[i].conf->health.path[0] ? "health checks" : "trial request");
	proxy_publish(m, s);
	return 0;
}

/* watch.c: the file changed. The reload is SIGHUP's, coalesced with it. */
static void proxy_on_file_changed(void *arg)
{
	struct proxy_main *m = arg;

	if (!m->stopping)
		event_active(m->ev_reload, EV_READ, 0);
}

/* [proxy] watch_config as the config in force says: start or stop
 * following the file (a reload may turn it on or off). */
static void proxy_watch(struct proxy_main *m, const struct conf *c)
{
	char err[256];

	if (c->watch_config && !m->watch) {
		m->watch = watch_new(m->base, m->path, proxy_on_file_changed, m, err, sizeof(err));
		if (m->watch)
			log_info("watch_config: following %s; a change reloads it", m->path);
		else
			log_error("watch_config: %s: %s; reload with SIGHUP", m->path, err);
	} else if (!c->watch_config && m->watch) {
		watch_free(m->watch);
		m->watch = NULL;
		log_info("watch_config: no longer following %s", m->path);
	}
}

/* The wall clock in Unix milliseconds: a warm ramp's start as the stats
 * show it (so instances that reloaded together show the same). */
static int64_t proxy_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The warm ramp's part of the reload line, appended to report. */
static void proxy_ramp_report(const struct snap_ramp_info *r, uint64_t span_ms, char *report,
			      size_t len)
{
	size_t used = strlen(report);
	char span[32], left[32];
	uint64_t left_ms = (uint64_t)(r->left_ms > 0 ? r->left_ms : 0);

	/* a window cut to what a ramp in progress has left ("ramping over
	 * 119976ms") is said to the second: "1m59s" */
	conf_fmt_ms(span_ms >= 10000 ? (span_ms + 500) / 1000 * 1000 : span_ms, span, sizeof(span));
	conf_fmt_ms(left_ms >= 10000 ? (left_ms + 500) / 1000 * 1000 : left_ms, left, sizeof(left));
	if (used + 1 >= len)
		return;
	switch (r->kind) {
	case SNAP_RAMP_NEW:
		snprintf(report + used, len - used, "; ramping over %s", span);
		break;
	case SNAP_RAMP_CHAINED:
		snprintf(report + used, len - used, "; ramping over %s from where the ramp in progress had got "
			 "(%zu rings%s)", span, r->nsteps,
			 r->dropped ? "; the oldest change's held keys moved at once" : "");
		break;
	case SNAP_RAMP_CARRIED:
		snprintf(report + used, len - used, "; the ramp in progress goes on (%s left)", left);
		break;
	default:
		break;
	}
}

/* The admin listener's address with its port as bound ("127.0.0.1:9091";
 * "" without one). */
static void proxy_admin_bound(const struct proxy_main *m, char *out, size_t len)
{
	out[0] = '\0';
	if (m->admin)
		snprintf(out, len, "%.*s:%d", (int)(strrchr(m->admin_conf, ':') - m->admin_conf),
			 m->admin_conf, admin_port(m->admin));
}

/* A reload refused after the file loaded (err says why, as a config
 * error would): the same shape as a config error, the error then the
 * sum; the running config stays. */
static void proxy_reload_refused(struct proxy_main *m, const char *err)
{
	char text[sizeof(m->p.last_reload.text)];

	log_error("%s", err);
	snprintf(text, sizeof(text), "%s: 1 error; still serving generation %llu: %s", m->path,
		 (unsigned long long)m->snap->generation, err);
	log_error("reload failed: %s", text);
	proxy_record(m, false, text, 0);
	proxy_status(m);
}

/* The tier's miss ratio (the backends' own caches' verdicts) in the
 * minute before reload gen: a line after its report, when there were any
 * verdicts (none: tier_status off, or no traffic); the minute after is a
 * line of its own once it has passed (proxy_on_tier). The report line
 * itself stays as it was: scripts read it. A reload within that minute
 * takes the timer over: the earlier one's minute after is then the later
 * one's minute before. */
static void proxy_tier_before(struct proxy_main *m, uint64_t gen)
{
	struct timeval minute = { 60, 0 };
	double verdicts, requests;

	m->tier_gen = gen;
	m->tier_before = stats_tier_miss_ratio(&m->p, 60);
	stats_tier_counts(&m->p, 60, &verdicts, &requests);
	/* the count beside the ratio: 100% of 2 responses is a quiet
	 * minute, not a cold tier */
	if (m->tier_before >= 0)
		log_info("tier miss ratio before reload %llu: %.1f%% in the minute before (%.0f response%s)",
			 (unsigned long long)gen, 100.0 * m->tier_before, verdicts, llround(verdicts) == 1 ? "" : "s");
	else if (requests < 0.5)
		log_info("tier miss ratio before reload %llu: no requests in the minute before", (unsigned long long)gen);
	if (m->ev_tier)
		evtimer_add(m->ev_tier, &minute);
}

static void proxy_on_tier(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_main *m = arg;
	double after = stats_tier_miss_ratio(&m->p, 60), verdicts, requests;
	char b[48];

	(void)fd;
	(void)what;
	if (after < 0 && m->tier_before < 0)
		return;                 /* no verdicts: tier_status off, or idle */
	if (m->tier_before >= 0)
		snprintf(b, sizeof(b), "%.1f%%", 100.0 * m->tier_before);
	else
		snprintf(b, sizeof(b), "none");
	stats_tier_counts(&m->p, 60, &verdicts, &requests);
	if (after >= 0)
		log_info("tier miss ratio after reload %llu: %.1f%% in the minute after (%.0f response%s; %s before)",
			 (unsigned long long)m->tier_gen, 100.0 * after, verdicts, llround(verdicts) == 1 ? "" : "s", b);
	else
		log_info("tier miss ratio after reload %llu: %s in the minute after (%s before)",
			 (unsigned long long)m->tier_gen, requests < 0.5 ? "no requests" : "no verdicts", b);
}

/* ---- runtime states (runstate.h) ---------------------------------------- */

/* A drain's window when none is given and [ring] ramp is 0. */
#define PROXY_DRAIN_MS 300000

/* b's runtime state in words, "NAME maint", "NAME weight 2", appended
 * to out (of len) after a ", " when it holds some already; nothing when
 * b is ready at its file weight. Whether it said something. */
static bool proxy_state_words(const struct backend *b, char *out, size_t len)
{
	struct runstate_of rs;
	size_t at = strlen(out);

	runstate_get(b, &rs);
	if (rs.state == RUNSTATE_READY && !rs.weighted)
		return false;
	if (at < len)
		snprintf(out + at, len - at, "%s%s%s%s%s", at ? ", " : "", b->name,
			 rs.state != RUNSTATE_READY ? " " : "", rs.state != RUNSTATE_READY ? runstate_name(rs.state) : "",
			 rs.weighted ? " weight" : "");
	at = strlen(out);
	if (rs.weighted && at < len)
		snprintf(out + at, len - at, " %g", rs.weight);
	return true;
}

/* At start, after the state file was read: what it set, or that it was
 * not there, in one log line (a start that silently brings a backend in
 * maint back ready, or keeps one out, is what an operator must see). */
static void proxy_state_loaded(const struct conf *c, bool missing)
{
	char set[1024] = "", err[256];
	size_t n = 0;

	if (missing) {
		log_info("state_file %s: missing; every backend starts ready (ringproxy ctl writes it)",
			 c->state_file);
		return;
	}
	for (size_t i = 0; i < c->nbackends; i++) {
		struct backend *b = registry_find(c->backends[i].name, err, sizeof(err));

		n += b && proxy_state_words(b, set, sizeof(set));
	}
	log_info("state_file %s: %s", c->state_file, n ? set : "every backend ready at its weight");
}

/* Every second: a state file that disappeared while some backend is not
 * ready at its file weight is warned about, once until it is back (or
 * every state is the default again): the next start would bring them
 * all back ready. The next ctl change writes it again. */
static void proxy_state_watch(struct proxy_main *m)
{
	const struct conf *c = m->snap->conf;
	char set[512] = "";
	struct stat st;
	size_t n = 0;

	if (!*c->state_file || stat(c->state_file, &st) == 0 || errno != ENOENT) {
		m->state_gone_warned = false;
		return;
	}
	for (size_t i = 0; i < m->snap->nbe; i++)
		n += proxy_state_words(m->snap->be[i].state, set, sizeof(set));
	if (n == 0) {
		m->state_gone_warned = false;
		return;
	}
	if (m->state_gone_warned)
		return;
	m->state_gone_warned = true;
	log_warn("state_file %s: gone while %s; a restart now would start every backend ready (the next ringproxy "
		 "ctl change writes it again)", c->state_file, set);
}

/* The state file after a change (what, for the log): backends a reload
 * removed are dropped from it, and it is written when [proxy] state_file
 * is set. "saved", "off" or the error into res. */
static void proxy_state_save(struct proxy_main *m, const char *what, char *res, size_t len)
{
	const struct conf *c = m->snap->conf;
	struct backend **be = calloc(m->snap->nbe ? m->snap->nbe : 1, sizeof(*be));
	char err[512];

	if (!be) {
		log_error("%s: out of memory; the state file is not written", what);
		snprintf(res, len, "out of memory");
		return;
	}
	for (size_t i = 0; i < m->snap->nbe; i++)
		be[i] = m->snap->be[i].state;
	runstate_forget(be, m->snap->nbe, c->path);
	snprintf(res, len, "off");
	if (!*c->state_file)
		goto out;
	if (runstate_save(c->state_file, be, m->snap->nbe, err, sizeof(err)) < 0) {
		log_error("%s: %s; the change holds until a restart", what, err);
		snprintf(res, len, "%s", err);
		goto out;
	}
	snprintf(res, len, "saved");
out:
	free(be);
}

/* A refused runtime state change: {"error": .., "valid": [..]} with the
 * n strings of valid, or the backends' names when valid is NULL. */
static int proxy_state_refuse(struct proxy_main *m, struct evbuffer *out, int code, const char *error,
			      const char *const *valid, size_t n)
{
	evbuffer_add(out, "{\"error\": ", 10);
	stats_json_str(out, error);
	evbuffer_add(out, ", \"valid\": [", 12);
	for (size_t i = 0; i < (valid ? n : m->snap->nbe); i++) {
		if (i)
			evbuffer_add(out, ", ", 2);
		stats_json_str(out, valid ? valid[i] : m->snap->be[i].conf->name);
	}
	evbuffer_add(out, "]}\n", 3);
	return code;
}

static int proxy_discovery_ctl(struct proxy_main *m, const char *action, const char *peer, struct evbuffer *out);

/* What a verb and its value make of was into *now (0), or a refusal's
 * status with its JSON in out. */
static int proxy_state_parse(struct proxy_main *m, const char *verb, const char *value,
			     const struct runstate_of *was, struct runstate_of *now, struct evbuffer *out)
{
	static const char *const verbs[] = { "ready", "drain", "maint", "weight" };
	static const char *const durations[] = { "a duration from 1ms to 24h: 500ms, 30s, 5m, 1h" };
	static const char *const weights[] = { "a number from 0 to 1000 (a whole one under a scheme other than ringproxy)" };
	const struct conf *c = m->snap->conf;
	int st = runstate_parse(verb);
	char text[300], *end;

	*now = *was;
	if (strcmp(verb, "weight") == 0) {
		double w = value ? strtod(value, &end) : -1;

		if (!value || !*value || *end || !isfinite(w) || w < 0 || w > RUNSTATE_WEIGHT_MAX) {
			snprintf(text, sizeof(text), "weight '%.100s' is not a weight", value ? value : "");
			return proxy_state_refuse(m, out, 400, text, weights, 1);
		}
		now->weighted = 1;
		now->weight = w;
		return 0;
	}
	if (st < 0) {
		snprintf(text, sizeof(text), "'%.100s' is not a runtime state (give state= or weight=)", verb);
		return proxy_state_refuse(m, out, 400, text, verbs, 4);
	}
	/* a drain asked again goes on in its window, which a ramp in
	 * progress cannot be given again */
	if (st == RUNSTATE_DRAIN && was->state == RUNSTATE_DRAIN) {
		if (!value)
			return 0;
		snprintf(text, sizeof(text), "it is draining already: ready it first to drain it over another window");
		return proxy_state_refuse(m, out, 409, text, verbs, 4);
	}
	now->state = st;
	now->drain_start_ms = 0;
	now->drain_mono_ms = 0;
	now->drain_span_ms = 0;
	if (st != RUNSTATE_DRAIN) {
		if (!value)
			return 0;
		snprintf(text, sizeof(text), "state %s takes no value (only drain takes a duration)", verb);
		return proxy_state_refuse(m, out, 400, text, verbs, 4);
	}
	now->drain_span_ms = c->ramp_ms ? c->ramp_ms : PROXY_DRAIN_MS;
	if (value && (conf_parse_duration(value, &now->drain_span_ms) < 0 || now->drain_span_ms == 0 ||
		      now->drain_span_ms > RUNSTATE_DRAIN_MAX_MS)) {
		snprintf(text, sizeof(text), "duration '%.100s' is not a drain's window", value);
		return proxy_state_refuse(m, out, 400, text, durations, 1);
	}
	now->drain_start_ms = proxy_wall_ms();
	now->drain_mono_ms = registry_now_ms();
	return 0;
}

/* A runtime state change (what, and its report text with the warm
 * ramp's words at [at, at + len) ending at end_ms), for the page's list
 * of changes; not a reload: /stats' reloads stay the file's. */
static void proxy_record_ctl(struct proxy_main *m, const char *what, const char *text, double moved,
			     size_t at, size_t len, long long end_ms)
{
	struct proxy_reload *r = &m->p.ctls[m->p.nctls++ % PROXY_RELOADS];
	int pre;

	memset(r, 0, sizeof(*r));
	r->when = time(NULL);
	r->ok = true;
	r->moved = moved;
	r->seq = ++m->p.changes;
	pre = snprintf(r->text, sizeof(r->text), "ctl %s: ", what);
	snprintf(r->text + pre, sizeof(r->text) - (size_t)pre, "%s", text);
	if (len && pre + at + len <= strlen(r->text)) {
		r->ramp_at = (size_t)pre + at;
		r->ramp_len = len;
		r->ramp_end_ms = end_ms;
	}
}

/*
 * admin.c's POST /backend: backend name to the state verb asks. Its ring
 * weight changes (runstate_weight), so a snapshot with the new ring
 * replaces the current one, as a reload's does, and the keys that change
 * owner move over the warm ramp's machinery (snapshot_ramp_over): a
 * drain's over its window, a weight's or a ready's over [ring] ramp, a
 * maint's at once (a ramp in progress then goes on to its end, without
 * holding anything on the backend in maintenance). Refused, with the
 * state left as it was, when it would leave no backend with keys.
 */
static int proxy_on_state(void *arg, const char *name, const char *verb, const char *value, const char *peer,
			  struct evbuffer *out)
{
	struct proxy_main *m = arg;
	struct snapshot *cur = m->snap, *s = NULL;
	const struct conf *c = cur->conf;
	struct runstate_of was, now;
	struct snap_ramp_info ramp;
	struct ring_diff d;
	char err[512], text[1024], what[160], saved[600];
	int64_t now_ms = registry_now_ms();
	uint64_t span;
	double moved;
	size_t i, ramp_at;
	int code;

	if (strcmp(verb, "discovery") == 0)
		return proxy_discovery_ctl(m, name, peer, out);
	for (i = 0; i < cur->nbe && strcmp(cur->be[i].conf->name, name) != 0; i++)
		;
	if (i == cur->nbe) {
		snprintf(text, sizeof(text), "no backend '%.100s' in %s", name, c->path);
		return proxy_state_refuse(m, out, 404, text, NULL, 0);
	}
	runstate_get(cur->be[i].state, &was);
	code = proxy_state_parse(m, verb, value, &was, &now, out);
	if (code)
		return code;
	runstate_put(cur->be[i].state, &now);
	s = snapshot_reweigh(cur, err, sizeof(err));
	if (!s || !s->ring->npoints) {
		runstate_put(cur->be[i].state, &was);
		snapshot_unref(s);
		if (s)
			snprintf(err, sizeof(err), "%s %s would leave no backend with keys: ready another one first", verb,
				 name);
		return proxy_state_refuse(m, out, s ? 409 : 400, err, NULL, 0);
	}
	span = strcmp(verb, "drain") == 0 ? now.drain_span_ms : strcmp(verb, "maint") == 0 ? 0 : c->ramp_ms;
	/* without a window of its own, a ramp in progress still ends when
	 * it would have: its held keys keep their moments */
	if (span == 0 && cur->ramp && now_ms < cur->ramp->end_ms)
		span = (uint64_t)(cur->ramp->end_ms - now_ms);
	if (snapshot_ramp_over(s, cur, now_ms, proxy_wall_ms(), span, &ramp) < 0 || ring_diff(cur->ring, s->ring, &d) < 0) {
		runstate_put(cur->be[i].state, &was);
		snapshot_unref(s);
		return proxy_state_refuse(m, out, 500, "out of memory", NULL, 0);
	}
	snprintf(what, sizeof(what), "%s %s", verb, name);
	if (strcmp(verb, "drain") == 0) {
		char win[32];

		conf_fmt_ms(now.drain_span_ms, win, sizeof(win));
		snprintf(what + strlen(what), sizeof(what) - strlen(what), " over %s", win);
	} else if (value) {
		snprintf(what + strlen(what), sizeof(what) - strlen(what), " %s", value);
	}
	moved = d.moved_share;
	snprintf(text, sizeof(text), "%.3f%% of keys moved", 100.0 * moved);
	plan_flows(&d, text, sizeof(text));
	ramp_at = strlen(text);
	proxy_ramp_report(&ramp, span, text, sizeof(text));
	ring_diff_free(&d);
	proxy_publish(m, s);
	proxy_state_save(m, what, saved, sizeof(saved));
	log_info("ctl from %s: %s: %s", peer, what, text);
	proxy_record_ctl(m, what, text, moved, ramp_at, strlen(text) - ramp_at,
			 ramp.kind ? proxy_wall_ms() + ramp.left_ms : 0);
	evbuffer_add(out, "{\"backend\": ", 12);
	stats_json_str(out, name);
	evbuffer_add_printf(out, ", \"admin_state\": \"%s\", \"ring_weight\": %.17g, \"moved_share\": %.17g, "
			    "\"ramp_seconds\": %.3f, \"state_file\": ", runstate_name(now.state), s->ring->weights[i],
			    moved, ramp.kind ? (double)ramp.left_ms / 1000 : 0.0);
	stats_json_str(out, saved);
	evbuffer_add(out, ", \"log\": ", 9);
	stats_json_str(out, text);
	evbuffer_add(out, "}\n", 2);
	return 200;
}

/* At start, before the first snapshot: the drains of the state file
 * still within their window are made ready again for it, into held[]
 * (c's backends at most); proxy_drains_resume then drains them from it. */
static size_t proxy_drains_hold(const struct conf *c, struct backend **held)
{
	int64_t now = registry_now_ms();
	size_t n = 0;
	char err[256];

	for (size_t i = 0; i < c->nbackends; i++) {
		struct backend *b = registry_find(c->backends[i].name, err, sizeof(err));

		struct runstate_of rs;

		if (b && runstate_drain_progress(b, now) >= 0 && runstate_drain_progress(b, now) < 1) {
			runstate_get(b, &rs);
			rs.state = RUNSTATE_READY;
			runstate_put(b, &rs);
			held[n++] = b;
		}
	}
	return n;
}

/* ... where they had got: a snapshot with them drained, whose ramp began
 * when the drain did (the one ending last, when several were), so a key
 * past its moment moves at once and the others keep theirs. */
static void proxy_drains_resume(struct proxy_main *m, struct backend **held, size_t n)
{
	struct snap_ramp_info ramp;
	struct snapshot *s;
	int64_t start = 0, wall = proxy_wall_ms();
	uint64_t span = 0;
	char err[512];

	for (size_t i = 0; i < n; i++) {
		struct runstate_of rs;

		runstate_get(held[i], &rs);
		rs.state = RUNSTATE_DRAIN;
		runstate_put(held[i], &rs);
		if (i == 0 || rs.drain_start_ms + (int64_t)rs.drain_span_ms > start + (int64_t)span) {
			start = rs.drain_start_ms;
			span = rs.drain_span_ms;
		}
		log_info("%s: backend %s goes on draining: %.0f%% of its window gone", m->snap->conf->state_file,
			 held[i]->name, 100.0 * runstate_drain_progress(held[i], registry_now_ms()));
	}
	s = snapshot_reweigh(m->snap, err, sizeof(err));
	if (s && snapshot_ramp_over(s, m->snap, registry_now_ms() - (wall - start), start, span, &ramp) == 0) {
		snapshot_unref(m->snap);
		m->snap = s;
		m->p.current = s;
		return;
	}
	log_error("%s: the drains could not be resumed (%s): their backends are out of the ring at once",
		  m->snap->conf->state_file, s ? "out of memory" : err);
	snapshot_unref(s);
}

/* ---- the file's host names, looked up again ----------------------------- */

/* Whether host is an IP address (nothing to look up). */
static bool proxy_is_ip(const char *host)
{
	unsigned char a[sizeof(struct in6_addr)];

	return inet_pton(AF_INET, host, a) == 1 || inet_pton(AF_INET6, host, a) == 1;
}

static void proxy_on_rr(void *arg, int rc, const struct sockaddr *addr, socklen_t len);

/* Look up the next of the file's backends with a host name (one at a
 * time, on resolve.c's thread); after the last, the next round in
 * [discovery] interval. Names that did not resolve are health.c's. */
static void proxy_rr_next(struct proxy_main *m)
{
	const struct snapshot *s = m->snap;
	uint64_t ms = s->conf->disc_interval_ms;
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };

	while (!m->stopping && m->rr_next < s->conf->nstatic && m->rr_next < s->nbe) {
		const struct snap_backend *sb = &s->be[m->rr_next++];

		if (!sb->addrlen || proxy_is_ip(sb->conf->host))
			continue;
		snprintf(m->rr_name, sizeof(m->rr_name), "%s", sb->conf->name);
		if (resolver_lookup(m->rr, sb->conf->host, sb->conf->port, proxy_on_rr, m) == 0)
			return;
	}
	evtimer_add(m->ev_rr, &tv);
}

/* resolve.c: a host name's address now. Another than the snapshot's (a
 * pod that restarted behind its name): a snapshot with it, the ring and
 * generation unchanged, so no key moves. */
static void proxy_on_rr(void *arg, int rc, const struct sockaddr *addr, socklen_t len)
{
	struct proxy_main *m = arg;
	struct snapshot *s = rc == 0 && !m->stopping ? snapshot_moved(m->snap, m->rr_name, addr, len) : NULL;

	if (s) {
		for (size_t i = 0; i < s->nbe; i++)
			if (strcmp(s->be[i].conf->name, m->rr_name) == 0)
				log_info("backend %s: '%s' resolves to %s now; no key moves", m->rr_name, s->be[i].conf->host,
					 s->be[i].addr_text);
		proxy_publish(m, s);
	}
	proxy_rr_next(m);
}

static void proxy_on_rr_timer(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_main *m = arg;

	(void)fd;
	(void)what;
	m->rr_next = 0;
	proxy_rr_next(m);
}

/* ---- discovery ([discovery] srv: config/discover.h, backend/dnssrv.c) -- */

static struct conf *proxy_load(struct proxy_main *m, bool next, char *text, size_t len);
static int proxy_reload_conf(struct proxy_main *m, struct conf *c, const char *source);


/* The rules' settings from c. */
static void proxy_discovery_params(const struct conf *c, struct discover_params *p)
{
	p->naming = c->disc_name;
	p->srv_weights = c->disc_weights == 1;
	p->add_after = c->disc_add_after;
	p->remove_after_ms = c->disc_remove_after_ms;
	p->max_remove = c->disc_max_remove / 100;
}

/* Where the members discovery last applied are kept: beside [proxy]
 * state_file ("" when none). */
static void proxy_members_path(const struct conf *c, char *out, size_t len)
{
	out[0] = '\0';
	if (*c->state_file)
		snprintf(out, len, "%s.members", c->state_file);
}

/* Add discovery's members to c, after the file's backends: those on the
 * ring, or (next) those that will be once the due changes are applied,
 * at the weights they will have. 0, or -1 with err. */
static int proxy_discovered(struct proxy_main *m, struct conf *c, bool next, char *err, size_t len)
{
	const struct discover *d = &m->disc;
	struct conf_found *f = calloc(d->n ? d->n : 1, sizeof(*f));
	size_t n = 0;
	int rc;

	if (!f) {
		snprintf(err, len, "%s: out of memory for the discovered backends", c->path);
		return -1;
	}
	for (size_t i = 0; i < d->n; i++) {
		const struct discover_member *mb = &d->m[i];

		if (!(next ? discover_member_next(d, i) : mb->in_ring) || !mb->addr[0])
			continue;
		f[n++] = (struct conf_found){ mb->name, mb->addr, mb->port, next ? mb->next_weight : mb->weight };
	}
	rc = conf_add_backends(c, f, n, err, len);
	free(f);
	return rc;
}

/* Discovery's change as a reload: the file again, with the due changes
 * applied (changes), or only the members' new addresses (a pod that
 * restarted: no key moves). The members are saved for a restart. */
static void proxy_discovery_apply(struct proxy_main *m, bool changes)
{
	char text[sizeof(m->p.last_reload.text)], err[512], path[4200];
	struct conf *c = proxy_load(m, changes, text, sizeof(text));

	if (!c) {
		log_error("discovery: the membership change waits for a file that loads: %s", text);
		return;
	}
	if (proxy_reload_conf(m, c, "dns-srv") < 0)
		return;
	if (changes)
		discover_commit(&m->disc);
	m->disc.moved = false;
	proxy_members_path(m->snap->conf, path, sizeof(path));
	if (*path && dnssrv_save(&m->disc, path, err, sizeof(err)) < 0)
		log_error("discovery: %s; a restart starts from the next answer", err);
}

/* What is held, said once each time it changes. */
static void proxy_discovery_held(struct proxy_main *m, const struct discover_change *ch)
{
	if (ch->held == m->disc_held_said)
		return;
	m->disc_held_said = ch->held;
	if (ch->held)
		log_warn("discovery: %zu members absent for remove_after would leave, more than max_remove (%g%%) of "
			 "them: held; `ringproxy ctl discovery apply` removes them, their return cancels it",
			 ch->held, 100 * m->disc.p.max_remove);
	else
		log_info("discovery: the held removal is no longer due; nothing is held");
}

/* Pending changes wait for the next wall-clock multiple of apply_every,
 * so that proxies which saw the same answers switch together. */
static void proxy_discovery_arm(struct proxy_main *m)
{
	uint64_t every = m->snap->conf->disc_apply_every_ms, wait;
	struct timeval tv;

	if (evtimer_pending(m->ev_apply, NULL))
		return;
	if (!every) {
		event_active(m->ev_apply, EV_TIMEOUT, 0);
		return;
	}
	wait = every - (uint64_t)proxy_wall_ms() % every;
	tv.tv_sec = (time_t)(wait / 1000);
	tv.tv_usec = (suseconds_t)(wait % 1000) * 1000;
	evtimer_add(m->ev_apply, &tv);
}

static void proxy_on_apply(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_main *m = arg;
	struct discover_change ch;

	(void)fd;
	(void)what;
	if (!m->disc_init || m->stopping)
		return;
	if (discover_due(&m->disc, &ch))
		proxy_discovery_apply(m, true);
	proxy_discovery_held(m, &ch);
}

/* dnssrv.c: a round ended, its answer given to the rules. */
static void proxy_on_discovery(void *arg)
{
	struct proxy_main *m = arg;
	struct discover *d = &m->disc;
	struct discover_change ch;

	if (d->last_fail >= 0) {
		char ago[32] = "none yet";

		if (d->last_good_ms >= 0)
			snprintf(ago, sizeof(ago), "%.1fs ago", (double)(registry_now_ms() - d->last_good_ms) / 1000);
		if (!m->disc_failing)
			log_warn("discovery: %s: %s; the ring stays as it is (last good answer: %s)", dnssrv_names(m->dns),
				 discover_fail_name(d->last_fail), ago);
		m->disc_failing = true;
		return;
	}
	if (m->disc_failing)
		log_info("discovery: %s answers again", dnssrv_names(m->dns));
	m->disc_failing = false;
	if (m->stopping)
		return;
	if (d->moved)
		proxy_discovery_apply(m, false);
	if (discover_due(d, &ch))
		proxy_discovery_arm(m);
	proxy_discovery_held(m, &ch);
}

/* `ringproxy ctl discovery apply` (POST /discovery?action=apply): the
 * held removals go now. */
static int proxy_discovery_ctl(struct proxy_main *m, const char *action, const char *peer, struct evbuffer *out)
{
	static const char *const actions[] = { "apply" };
	struct discover_change ch;
	size_t held;

	if (!m->dns)
		return proxy_state_refuse(m, out, 404, "no [discovery] srv in the config", actions, 0);
	if (strcmp(action, "apply") != 0)
		return proxy_state_refuse(m, out, 400, "not a discovery action", actions, 1);
	held = discover_release(&m->disc);
	if (!held)
		return proxy_state_refuse(m, out, 409, "no discovery change is held", actions, 1);
	log_info("ctl from %s: discovery apply: the %zu held removals go", peer, held);
	m->disc_held_said = 0;          /* applied, not reverted */
	if (discover_due(&m->disc, &ch))
		proxy_discovery_apply(m, true);
	proxy_discovery_held(m, &ch);
	evbuffer_add_printf(out, "{\"released\": %zu, \"generation\": %llu, \"ring\": \"%016llx\"}\n", held,
			    (unsigned long long)m->snap->generation, (unsigned long long)m->p.fingerprint);
	return 200;
}

/* The poller as the config in force says: started, reconfigured or
 * stopped (a reload may turn discovery on or off). */
static void proxy_discovery_configure(struct proxy_main *m)
{
	const struct conf *c = m->snap->conf;
	struct discover_params p;
	char err[512];

	if (!*c->disc_srv) {
		if (m->dns)
			log_info("discovery: off; the backends are the file's");
		dnssrv_free(m->dns);
		m->dns = NULL;
		m->p.dns = NULL;
		m->p.discover = NULL;
		return;
	}
	proxy_discovery_params(c, &p);
	if (!m->disc_init) {
		discover_init(&m->disc, &p);
		m->disc_init = true;
	}
	m->disc.p = p;
	discover_fixed(&m->disc, c->nstatic);
	if (m->dns && dnssrv_configure(m->dns, c, err, sizeof(err)) < 0)
		log_error("discovery: %s; polling goes on as it was", err);
	if (!m->dns) {
		m->dns = dnssrv_new(m->base, c, &m->disc, proxy_on_discovery, m, err, sizeof(err));
		if (m->dns)
			log_info("discovery: asking %s every %gs (%s)", c->disc_srv, (double)c->disc_interval_ms / 1000,
				 *c->disc_resolver ? c->disc_resolver : "the name servers of /etc/resolv.conf");
		else
			log_error("discovery: %s; the members stay as they are", err);
	}
	m->p.dns = m->dns;
	m->p.discover = &m->disc;
}

struct proxy_first {
	struct event_base *base;
	bool done;
};

static void proxy_on_first_round(void *arg)
{
	struct proxy_first *f = arg;

	f->done = true;
	event_base_loopbreak(f->base);
}

/* At start with no backend in the file and no member kept: the first
 * good answer is taken whole, asked on an event base of its own before
 * anything serves (three polls, each bounded by the resolver's
 * timeouts). 0, or -1 (logged): nothing to serve with. */
static int proxy_discovery_first(struct proxy_main *m, const struct conf *c)
{
	struct proxy_first f = { event_base_new(), false };
	struct dnssrv *s = NULL;
	char err[512];
	int rc = -1;

	if (!f.base || !(s = dnssrv_new(f.base, c, &m->disc, proxy_on_first_round, &f, err, sizeof(err)))) {
		log_error("discovery: %s", f.base ? err : "out of memory");
		goto out;
	}
	for (int i = 0; i < 3 && !m->disc.good; i++) {
		f.done = false;
		if (i)
			dnssrv_poll_now(s);
		while (!f.done && event_base_loop(f.base, EVLOOP_ONCE) == 0)
			;
	}
	if (!m->disc.good || !discover_adopt(&m->disc)) {
		log_error("%s: [discovery] %s: no good answer (%s) and no backend in the file or kept in a state "
			  "file: nothing to serve with", c->path, c->disc_srv,
			  m->disc.last_fail >= 0 ? discover_fail_name(m->disc.last_fail) : "no target with an address");
		goto out;
	}
	log_info("discovery: starting with the %zu members of the first answer", m->disc.n);
	rc = 0;
out:
	dnssrv_free(s);
	if (f.base)
		event_base_free(f.base);
	return rc;
}

/* At start, before the state file is read: the members discovery last
 * applied (kept beside the state file), else the first answer, added to
 * conf as backends. 0, or -1 (logged). */
static int proxy_discovery_start(struct proxy_main *m, struct conf *conf)
{
	struct discover_params p;
	char path[4200], err[512];

	proxy_discovery_params(conf, &p);
	discover_init(&m->disc, &p);
	m->disc_init = true;
	discover_fixed(&m->disc, conf->nbackends);
	proxy_members_path(conf, path, sizeof(path));
	if (*path && dnssrv_load(&m->disc, path, err, sizeof(err)) < 0) {
		log_error("%s", err);
		return -1;
	}
	if (m->disc.n)
		log_info("discovery: starting with the %zu members last applied (%s); the answers change them", m->disc.n,
			 path);
	else if (!conf->nbackends && proxy_discovery_first(m, conf) < 0)
		return -1;
	if (proxy_discovered(m, conf, false, err, sizeof(err)) < 0) {
		log_error("%s", err);
		return -1;
	}
	return 0;
}

/* The file loaded again, with the members discovery has on the ring
 * (next: as they will be once its due changes are applied) after its
 * backends. NULL when the file has errors (each logged; the sum in text)
 * or the members cannot be added (err in text). */
static struct conf *proxy_load(struct proxy_main *m, bool next, char *text, size_t len)
{
	struct conf_errors errs;
	struct conf *c = conf_load(m->path, &errs);
	char err[512];

	if (!c) {
		for (size_t i = 0; i < errs.n; i++)
			log_error("%s", errs.msg[i]);
		if (errs.oom)   /* the old config keeps serving, as for a bad file */
			snprintf(text, len, "%s: out of memory while loading it; still serving generation %llu",
				 m->path, (unsigned long long)m->snap->generation);
		else
			snprintf(text, len, "%s: %zu error%s; still serving generation %llu%s%s",
				 m->path, errs.n, errs.n == 1 ? "" : "s",
				 (unsigned long long)m->snap->generation,
				 errs.n ? ": " : "", errs.n ? errs.msg[0] : "");
		conf_errors_free(&errs);
		return NULL;
	}
	conf_errors_free(&errs);
	if (*c->disc_srv && proxy_discovered(m, c, next, err, sizeof(err)) < 0) {
		snprintf(text, len, "%s; still serving generation %llu", err, (unsigned long long)m->snap->generation);
		conf_free(c);
		return NULL;
	}
	return c;
}

/* SIGHUP, or the file changed: load it again and apply it. */
static void proxy_cert_warn(const char *line)
{
	log_warn("%s", line);
}

/* The certificates of c's [tls] for a load (the listeners' at start: a
 * reload that drops [tls] listen keeps the running set). 0 with *out (a
 * reference, or NULL without HTTPS), or -1 with the reasons logged and
 * the reload refused (FILE: reason, the old set serving). */
static int proxy_certs(struct proxy_main *m, const struct conf *c, struct certs **out)
{
	char err[2048];

	*out = NULL;
	if (!m->tls)
		return 0;
	if (!*c->tls_listen) {
		*out = certs_ref(m->snap->certs);
		return 0;
	}
	*out = certs_new(c, proxy_cert_warn, err, sizeof(err));
	if (*out)
		return 0;
	if (m->snap)
		proxy_reload_refused(m, err);
	else
		log_error("%s", err);
	return -1;
}

static void proxy_reload(struct proxy_main *m)
{
	char text[sizeof(m->p.last_reload.text)];
	struct conf *c;

	notify_send("RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading %s",
		    notify_monotonic_usec(), m->path);
	c = proxy_load(m, false, text, sizeof(text));
	if (!c) {
		log_error("reload failed: %s", text);
		proxy_record(m, false, text, 0);
		proxy_status(m);
		return;
	}
	proxy_reload_conf(m, c, NULL);
	proxy_discovery_configure(m);
}

/* Apply c, loaded and with its discovered members (proxy_load), as the
 * next generation: validated against what runs, planned, ramped,
 * published and reported as "reload N[ (source)]: ...". 0, or -1 when
 * refused (logged and recorded; c freed either way). */
static int proxy_reload_conf(struct proxy_main *m, struct conf *c, const char *source)
{
	const struct conf *old = m->snap->conf;
	struct snapshot *s;
	char err[512], report[1024], settings[768], text[sizeof(m->p.last_reload.text)];
	char running[340];
	struct ring_arc *arcs = NULL;
	long narcs;
	uint64_t gen = m->snap->generation + 1;
	struct snap_ramp_info ramp;
	struct certs *certs = NULL;
	double moved = 0;
	size_t ramp_at;
	int pre;

	/* the listener that runs keeps its token rule: admin_listen is
	 * start-only, admin_token is not */
	proxy_admin_bound(m, running, sizeof(running));
	if (conf_check_admin_running(c, running, err, sizeof(err)) < 0) {
		proxy_reload_refused(m, err);
		conf_free(c);
		return -1;
	}
	/* compared with the first load, not the previous one: a reload that
	 * changed them did not apply them */
	if (strcmp(c->listen, m->listen_conf) != 0 || c->workers != m->workers_conf)
		log_warn("reload: listen and workers change only with a restart; still listening on %s with %u worker%s",
			 m->listen_text, m->p.nworkers, m->p.nworkers == 1 ? "" : "s");
	if (strcmp(c->pid_file, m->pid_conf) != 0)
		log_warn("reload: pid_file changes only with a restart; the pid stays in %s",
			 m->pid_file[0] ? m->pid_file : "no file");
	if (strcmp(c->admin_listen, m->admin_conf) != 0)
		log_warn("reload: admin_listen changes only with a restart; still %s%s",
			 m->admin ? "serving stats on " : "without an admin listener", m->admin ? m->admin_conf : "");
	if (c->nbackends == 0) {
		snprintf(err, sizeof(err), "%s: no backend: the file names none and [discovery] has found none yet; "
			 "keeping the running ones", c->path);
		proxy_reload_refused(m, err);
		conf_free(c);
		return -1;
	}
	if (strcmp(c->tls_listen, m->tls_conf) != 0)
		log_warn("reload: [tls] listen changes only with a restart; still %s%s",
			 m->tls ? "serving HTTPS on " : "without HTTPS", m->tls ? m->tls_conf : "");
	if (proxy_certs(m, c, &certs) < 0) {
		conf_free(c);
		return -1;
	}
	s = snapshot_next(c, gen, m->snap, err, sizeof(err));
	if (!s) {
		certs_unref(certs);
		proxy_reload_refused(m, err);
		conf_free(c);
		return -1;
	}
	snapshot_set_certs(s, certs);
	if (snapshot_ramp(s, m->snap, registry_now_ms(), proxy_wall_ms(), &ramp) < 0) {
		snprintf(text, sizeof(text), "%s: out of memory for the warm ramp; still serving generation %llu",
			 m->path, (unsigned long long)m->snap->generation);
		log_error("reload failed: %s", text);
		proxy_record(m, false, text, 0);
		snapshot_unref(s);
		proxy_status(m);
		return -1;
	}
	if (plan_summary(old, m->snap->ring, s->conf, s->ring, report, sizeof(report), &moved) < 0)
		snprintf(report, sizeof(report), "(no memory for the movement report)");
	/* what else changed: without it a reload that only turned on
	 * log_file reads as if nothing had */
	if (conf_diff(old, s->conf, settings + 12, sizeof(settings) - 12) > 0)
		memcpy(settings, "; settings: ", 12);
	else
		settings[0] = '\0';
	narcs = ring_moved_arcs(m->snap->ring, s->ring, PROXY_MOVED_ARCS, &arcs);
	ramp_at = strlen(report);
	proxy_ramp_report(&ramp, s->conf->ramp_ms, report, sizeof(report));
	for (size_t i = 0; i < s->nbe; i++) {
		const struct conf_backend *was = conf_backend_find(old, s->be[i].conf->name);

		if (was && strcmp(was->url, s->be[i].conf->url) != 0)
			health_reset(s->be[i].state, s->be[i].conf->url);
	}
	if (strcmp(c->log_file, old->log_file) != 0 && log_open(c->log_file, err, sizeof(err)) < 0)
		log_error("reload: %s; logging continues where it was", err);
	if ((strcmp(c->access_log, old->access_log) != 0) &&
	    access_open(c->access_log, &m->p.access_log_dropped, err, sizeof(err)) < 0)
		log_error("reload: %s; the access log stays as it was", err);
	log_set_level((enum log_level)c->log_level);
	atomic_store(&m->p.max_conns, c->max_connections);
	/* the cache survives the reload: a smaller size evicts down to it,
	 * 0 empties it */
	cache_configure(m->p.cache, c->cache_size, c->cache_max_object, c->cache_min_uses,
			c->cache_max_variants);
	proxy_unresolved(s);
	proxy_publish(m, s);
	proxy_state_save(m, "reload", err, sizeof(err));
	proxy_watch(m, s->conf);
	m->p.last_moved_share = moved;
	free(m->p.moved);
	m->p.moved = narcs > 0 ? arcs : NULL;
	m->p.nmoved = narcs > 0 ? (size_t)narcs : 0;
	if (narcs <= 0)
		free(arcs);
	pre = snprintf(text, sizeof(text), "reload %llu%s%s%s: ", (unsigned long long)gen,
		       source ? " (" : "", source ? source : "", source ? ")" : "");
	snprintf(text + pre, sizeof(text) - (size_t)pre, "%s; ring %016llx%s", report,
		 (unsigned long long)m->p.fingerprint, settings);
	log_info("%s", text);
	proxy_tier_before(m, gen);
	proxy_record(m, true, text, moved);
	if (ramp.kind)
		proxy_record_ramp(m, (size_t)pre + ramp_at, strlen(report) - ramp_at, proxy_wall_ms() + ramp.left_ms);
	proxy_status(m);
	return 0;
}

static void proxy_on_reload(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	proxy_reload(arg);
}

/* Once a second: a backend whose health changed since (down after a
 * failed connect or check, and maybe up again already after a trial)
 * may have moved: its name is looked up again now, not at the next
 * interval: a discovered one by a poll, one of the file's by a round of
 * its host names. At most once a second either way. */
static void proxy_resolve_down(struct proxy_main *m)
{
	const struct snapshot *s = m->snap;
	int64_t latest = m->down_seen_ms;
	bool disc = false, file = false;

	for (size_t i = 0; i < s->nbe; i++) {
		const struct backend *b = s->be[i].state;
		int64_t at = atomic_load(&b->state_ms);

		if (at <= m->down_seen_ms)
			continue;
		if (at > latest)
			latest = at;
		if (i >= s->conf->nstatic)
			disc = true;
		else if (!proxy_is_ip(s->be[i].conf->host))
			file = true;
	}
	m->down_seen_ms = latest;
	if (disc && m->dns && dnssrv_poll_now(m->dns) == 0)
		log_info("discovery: a discovered backend went down or came back: polling now");
	if (file && evtimer_pending(m->ev_rr, NULL)) {
		evtimer_del(m->ev_rr);
		event_active(m->ev_rr, EV_TIMEOUT, 0);
	}
}

static void proxy_on_sample(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_main *m = arg;

	(void)fd;
	(void)what;
	stats_sample(&m->p);
	snapshot_reap();
	proxy_state_watch(m);
	if (!m->stopping && m->ev_rr)
		proxy_resolve_down(m);
}

static void proxy_on_hup(evutil_socket_t sig, short what, void *arg)
{
	struct proxy_main *m = arg;

	(void)sig;
	(void)what;
	/* activating an event that is already active does nothing: a burst
	 * of SIGHUPs during a reload becomes one reload after it */
	if (!m->stopping)
		event_active(m->ev_reload, EV_READ, 0);
}

static void proxy_on_usr1(evutil_socket_t sig, short what, void *arg)
{
	char err[256];

	(void)sig;
	(void)what;
	(void)arg;
	if (!log_file_path())
		log_info("SIGUSR1: no [proxy] log_file is set; logs go to stderr, nothing to reopen");
	else if (log_reopen(err, sizeof(err)) < 0)
		log_error("SIGUSR1: %s", err);
	else
		log_info("SIGUSR1: log file %s reopened", log_file_path());
	switch (access_reopen(err, sizeof(err))) {
	case 1:
		log_info("SIGUSR1: access log %s reopened", access_path());
		break;
	case -1:
		log_error("SIGUSR1: %s; access log lines go where they went", err);
		break;
	default:
		break;
	}
}

static void proxy_on_poll(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_main *m = arg;

	(void)fd;
	(void)what;
	for (unsigned i = 0; i < m->p.nworkers; i++)
		if (!worker_done(m->p.workers[i]))
			return;
	event_base_loopbreak(m->base);
}

static void proxy_on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct proxy_main *m = arg;

	(void)fd;
	(void)what;
	log_warn("shutdown_timeout reached: closing the connections still open");
	event_base_loopbreak(m->base);
}

static void proxy_on_stop(evutil_socket_t sig, short what, void *arg)
{
	struct proxy_main *m = arg;
	const struct conf *c = m->snap->conf;
	struct timeval poll = { 0, 20000 };
	struct timeval deadline = { (time_t)(c->shutdown_timeout_ms / 1000),
				    (suseconds_t)((c->shutdown_timeout_ms % 1000) * 1000) };

	(void)what;
	if (m->stopping) {
		log_warn("second %s: stopping now", strsignal((int)sig));
		event_base_loopbreak(m->base);
		return;
	}
	m->stopping = true;
	m->stop_signal = (int)sig;
	notify_send("STOPPING=1\nSTATUS=stopping on %s", strsignal((int)sig));
	log_info("stopping on %s: no new connections; waiting up to %llums for requests in flight",
		 strsignal((int)sig), (unsigned long long)c->shutdown_timeout_ms);
	for (unsigned i = 0; i < m->p.nworkers; i++)
		worker_post_drain(m->p.workers[i]);
	m->ev_poll = event_new(m->base, -1, EV_PERSIST, proxy_on_poll, m);
	m->ev_deadline = evtimer_new(m->base, proxy_on_deadline, m);
	if (!m->ev_poll || !m->ev_deadline || event_add(m->ev_poll, &poll) < 0 ||
	    evtimer_add(m->ev_deadline, &deadline) < 0)
		event_base_loopbreak(m->base);
}

/* The signals the main loop handles: one table. */
static const struct {
	int sig;
	event_callback_fn cb;
} proxy_signals[] = {
	{ SIGTERM, proxy_on_stop },
	{ SIGINT, proxy_on_stop },
	{ SIGHUP, proxy_on_hup },
	{ SIGUSR1, proxy_on_usr1 },
};

#define PROXY_NSIGNALS (sizeof(proxy_signals) / sizeof(proxy_signals[0]))

/* Descriptors besides the clients': listeners, event and timer fds per
 * worker, logs, the admin listener, health checks. */
#define PROXY_FD_RESERVE 64

/*
 * Raise the soft fd limit to the hard one (a shell's 1,024 is a soft
 * limit: the start raises it, no operator needs to), then warn only when
 * max_connections clients cannot fit under it; accept then pauses briefly
 * instead of failing in a loop. A client connection holds a backend
 * connection only while its request is forwarded (a cache hit holds
 * none), so the limit need not be twice max_connections: with less than
 * that, an info line says how many backend connections fit beside a full
 * house of clients.
 */
static void proxy_fd_limit(const struct conf *c)
{
	struct rlimit rl;
	unsigned long long was, clients = (unsigned long long)c->max_connections + PROXY_FD_RESERVE;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	was = rl.rlim_cur;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0 && getrlimit(RLIMIT_NOFILE, &rl) < 0)
			return;
	}
	if (rl.rlim_cur == RLIM_INFINITY)
		return;
	if (rl.rlim_cur < clients)
		log_warn("max_connections = %u needs at least %llu file descriptors (and one more for each request "
			 "forwarded at once), but the limit is %llu%s; raise it (LimitNOFILE=, ulimit -Hn) or lower "
			 "max_connections", c->max_connections, clients, (unsigned long long)rl.rlim_cur,
			 rl.rlim_cur == rl.rlim_max ? ", the hard limit" : "");
	else if (rl.rlim_cur < clients + c->max_connections)
		log_info("file descriptors: limit %llu%s; %u clients (max_connections) leave room for %llu backend "
			 "connections", (unsigned long long)rl.rlim_cur, was < rl.rlim_cur ? " (raised from the soft "
			 "limit)" : "", c->max_connections, (unsigned long long)rl.rlim_cur - clients);
}

/* A worker's own state beside its thread's: the access log's buffer and
 * its memo of cache hits (cache.h; none if it cannot be had: every hit
 * then takes the shared path). Main thread. */
static void proxy_worker_start(struct worker *w)
{
	access_buf_init(&w->alog, w->base);
	w->memo = cache_memo_new(w->proxy->cache);
}

/* After the worker's last request: its memo goes before the cache. */
static void proxy_worker_end(struct worker *w)
{
	cache_memo_free(w->memo);
	w->memo = NULL;
	access_buf_free(&w->alog);
}

/* What a worker runs (worker.h): the client side (front.c) on its
 * connections, the backend side (forward.c) on its pools; background
 * refreshes end before the connections close, the access log's buffer is
 * flushed after their last lines. */
static const struct worker_ops proxy_worker_ops = {
	.start = proxy_worker_start,
	.accept = front_accept,
	.drain = front_drain,
	.close = front_close,
	.close_idle = fwd_close,
	.stop = refresh_free_all,
	.end = proxy_worker_end,
};

/* One listener per worker on each address; port 0 becomes the port the
 * first worker's listener got, for the others (*port: the first
 * address's). */
static int proxy_listen(struct proxy_main *m, unsigned nworkers, int *port)
{
	char err[512];

	*port = -1;
	for (unsigned i = 0; i < nworkers; i++) {
		struct worker_listener lis[2 * CONF_LISTEN_MAX];

		for (unsigned a = 0; a < m->naddrs; a++) {
			struct proxy_addr *pa = &m->addrs[a];
			int fd = conn_listen((struct sockaddr *)&pa->ss, pa->len, err, sizeof(err));

			if (fd < 0) {
				char host[64];

				conn_peer_ip(&pa->ss, host, sizeof(host));
				log_error("%slisten on %s: %s", pa->kind & WORKER_L_TLS ? "[tls] " : "", host, err);
				while (a-- > 0)
					close(lis[a].fd);
				return -1;
			}
			if (i == 0) {
				/* port 0 asks for any free port: every worker's
				 * listener then shares the one the first got */
				int got = conn_local_port(fd);

				if (pa->ss.ss_family == AF_INET6)
					((struct sockaddr_in6 *)&pa->ss)->sin6_port = htons((uint16_t)got);
				else
					((struct sockaddr_in *)&pa->ss)->sin_port = htons((uint16_t)got);
				if (a == 0)
					*port = got;
			}
			lis[a].fd = fd;
			lis[a].kind = pa->kind;
		}
		snapshot_ref(m->snap);
		m->p.workers[i] = worker_new(&m->p, (int)i, lis, m->naddrs, m->snap, &proxy_worker_ops, err,
					     sizeof(err));
		if (!m->p.workers[i]) {
			snapshot_unref(m->snap);
			for (unsigned a = 0; a < m->naddrs; a++)
				close(lis[a].fd);
			log_error("%s", err);
			return -1;
		}
		m->p.nworkers++;
	}
	return 0;
}

/* The host checks of preflight.c, as errors: 0, or -1 when the start
 * must not go on (each reason logged). */
static int proxy_preflight(const char *path, const struct conf *conf, unsigned flags)
{
	struct preflight pf;
	size_t n = preflight_run(conf, PREFLIGHT_START | flags, &pf);

	for (size_t i = 0; i < pf.warnings.n; i++)
		log_warn("%s", pf.warnings.msg[i]);
	for (size_t i = 0; i < pf.errors.n; i++)
		log_error("%s", pf.errors.msg[i]);
	if (n)
		log_error("%s: %zu error%s; nothing started", path, n, n == 1 ? "" : "s");
	preflight_free(&pf);
	return n ? -1 : 0;
}

/* The process's one hot-object cache, made even when size is 0 (off): a
 * reload may turn it on. NULL (logged) when it cannot be made. */
static struct cache *proxy_cache_new(const char *path, const struct conf *conf)
{
	struct cache_params cp = { .size = conf->cache_size, .max_object = conf->cache_max_object,
				   .min_uses = conf->cache_min_uses,
				   .max_variants = conf->cache_max_variants };
	struct cache *c;
	char err[256];

	c = cache_new(&cp, err, sizeof(err));
	if (!c)
		log_error("%s: [cache]: %s", path, err);
	return c;
}

/* The signal table's events on the main loop; -1 (logged) on failure, the
 * events made so far left in sigev for the caller to free. */
static int proxy_signals_add(struct proxy_main *m, struct event **sigev)
{
	for (size_t i = 0; i < PROXY_NSIGNALS; i++) {
		sigev[i] = evsignal_new(m->base, proxy_signals[i].sig, proxy_signals[i].cb, m);
		if (!sigev[i] || event_add(sigev[i], NULL) < 0) {
			log_error("cannot handle signal %d", proxy_signals[i].sig);
			return -1;
		}
	}
	return 0;
}

/* Start-up checks: everything that can refuse the start (the host, the
 * pid file, the logs, the listen address, the state file) runs before a
 * listener or a thread exists, so a refusal has nothing to undo. 0, or -1
 * (logged); conf stays the caller's either way. */
/* The listen addresses of [proxy] listen and [tls] listen, each with
 * the kind of its listener. 0, or -1 (logged). */
static int proxy_addrs(struct proxy_main *m, const struct conf *conf)
{
	struct conf_listen l[CONF_LISTEN_MAX];
	char err[256];

	for (int t = 0; t < 2; t++) {
		const char *list = t ? conf->tls_listen : conf->listen;
		int n = conf_listen_parse(list, l, CONF_LISTEN_MAX, err, sizeof(err));

		if (n < 0) {
			log_error("%s: %slisten: %s", m->path, t ? "[tls] " : "", err);
			return -1;
		}
		for (int i = 0; i < n; i++) {
			struct proxy_addr *pa = &m->addrs[m->naddrs];

			if (addr_parse(l[i].addr, &pa->ss, &pa->len, err, sizeof(err)) < 0) {
				log_error("%s: listen: %s", m->path, err);
				return -1;
			}
			pa->kind = (t ? WORKER_L_TLS : 0) | (l[i].proxy_protocol == 1 ? WORKER_L_PP_ON : 0) |
				   (l[i].proxy_protocol == 0 ? WORKER_L_PP_OFF : 0);
			m->naddrs++;
			m->tls |= t == 1;
		}
	}
	return 0;
}

static int proxy_start_checks(struct proxy_main *m, struct conf *conf, unsigned flags,
			      const char *pid_file)
{
	char err[512];

	if (proxy_preflight(m->path, conf, flags) < 0)
		goto fail;
	snprintf(m->pid_conf, sizeof(m->pid_conf), "%s", conf->pid_file);
	m->pid_file = pid_file ? pid_file : m->pid_conf;
	if (m->pid_file[0] &&
	    pidfile_check(m->pid_file, flags & PREFLIGHT_SHARE_LISTEN, err, sizeof(err)) < 0) {
		log_error("%s", err);
		goto fail;
	}
	if (log_open(conf->log_file, err, sizeof(err)) < 0 ||
	    access_open(conf->access_log, &m->p.access_log_dropped, err, sizeof(err)) < 0) {
		log_error("%s: %s", m->path, err);
		goto fail;
	}
	proxy_fd_limit(conf);
	snprintf(m->listen_conf, sizeof(m->listen_conf), "%s", conf->listen);
	snprintf(m->admin_conf, sizeof(m->admin_conf), "%s", conf->admin_listen);
	snprintf(m->tls_conf, sizeof(m->tls_conf), "%s", conf->tls_listen);
	m->workers_conf = conf->workers;
	m->p.started = time(NULL);
	m->p.started_ms = registry_now_ms();
	if (proxy_addrs(m, conf) < 0)
		goto fail;
	atomic_store(&m->p.max_conns, conf->max_connections);
	if (*conf->disc_srv && proxy_discovery_start(m, conf) < 0)
		goto fail;
	if (*conf->state_file) {
		struct stat st;
		bool missing = stat(conf->state_file, &st) < 0 && errno == ENOENT;

		if (runstate_load(conf->state_file, conf, err, sizeof(err)) < 0) {
			log_error("%s", err);
			goto fail;
		}
		proxy_state_loaded(conf, missing);
	}
	return 0;
fail:
	return -1;
}

/* The first snapshot, generation 1; a drain the state file left within
 * its window goes on where it had got (proxy_drains_hold, then
 * proxy_drains_resume), neither begun again nor ended at once. 0, or -1
 * (logged; conf stays the caller's); on success the snapshot owns conf. */
static int proxy_first_snapshot(struct proxy_main *m, struct conf *conf)
{
	struct backend **held;
	size_t nheld;
	char err[512];

	struct certs *certs;

	snapshot_reaper();
	if (proxy_certs(m, conf, &certs) < 0)
		return -1;
	held = calloc(conf->nbackends ? conf->nbackends : 1, sizeof(*held));
	nheld = held ? proxy_drains_hold(conf, held) : 0;
	m->snap = snapshot_new(conf, 1, err, sizeof(err));
	if (!m->snap) {
		certs_unref(certs);
		log_error("%s", err);
		goto fail;
	}
	snapshot_set_certs(m->snap, certs);
	if (nheld)
		proxy_drains_resume(m, held, nheld);
	free(held);
	m->p.generation = 1;
	m->p.current = m->snap;
	m->p.conf_loaded = time(NULL);
	return 0;
fail:
	free(held);
	return -1;
}

/* workers = 0 means one a CPU: the count the listeners are opened for. */
static unsigned proxy_nworkers(const struct conf *conf)
{
	long ncpu;

	if (conf->workers)
		return conf->workers;
	ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	return ncpu > 0 ? (unsigned)ncpu : 1;
}

/* What the workers share and the main loop runs on: the cache, the main
 * event base and the workers' array, made before the first listener. 0,
 * or -1 (logged). */
static int proxy_shared_new(struct proxy_main *m, const struct conf *conf, unsigned nworkers)
{
	m->p.cache = proxy_cache_new(m->path, conf);
	if (!m->p.cache)
		goto fail;
	m->base = event_base_new();
	m->p.workers = calloc(nworkers, sizeof(*m->p.workers));
	if (!m->base || !m->p.workers) {
		log_error("out of memory");
		goto fail;
	}
	return 0;
fail:
	return -1;
}

/* The workers' threads, then the pid file: written after the listeners,
 * so a script that waits for the file may connect. 0, or -1 (logged). */
static int proxy_workers_start(struct proxy_main *m)
{
	char err[512];

	for (unsigned i = 0; i < m->p.nworkers; i++) {
		if (worker_start(m->p.workers[i], err, sizeof(err)) < 0) {
			log_error("%s", err);
			goto fail;
		}
	}
	if (m->pid_file[0] && pidfile_write(m->pid_file, err, sizeof(err)) < 0) {
		log_error("%s", err);
		goto fail;
	}
	return 0;
fail:
	return -1;
}

/* The main loop's own events: reload, the once-a-second sample, the
 * tier's verdict, health checks, the rates and the signal table, all on
 * m->base. 0, or -1 (logged; what was made is left for proxy_teardown). */
static int proxy_events_add(struct proxy_main *m, struct event **sigev)
{
	m->ev_reload = event_new(m->base, -1, 0, proxy_on_reload, m);
	m->ev_sample = event_new(m->base, -1, EV_PERSIST, proxy_on_sample, m);
	m->ev_tier = evtimer_new(m->base, proxy_on_tier, m);
	m->ev_apply = evtimer_new(m->base, proxy_on_apply, m);
	m->ev_rr = evtimer_new(m->base, proxy_on_rr_timer, m);
	m->rr = resolver_new(m->base);
	m->health = health_new(m->base, proxy_on_resolved, m);
	m->p.rates = rates_new();
	if (!m->ev_reload || !m->ev_sample || !m->ev_tier || !m->ev_apply || !m->ev_rr || !m->rr || !m->health || !m->p.rates ||
	    event_add(m->ev_sample, &(struct timeval){ 1, 0 }) < 0) {
		log_error("out of memory");
		goto fail;
	}
	if (proxy_signals_add(m, sigev) < 0)
		goto fail;
	return 0;
fail:
	return -1;
}

/* The admin listener when admin_listen is set, on the main loop, with
 * its state endpoint answered by proxy_on_state. 0, or -1 (logged). */
static int proxy_admin_start(struct proxy_main *m)
{
	char err[512];

	if (!m->admin_conf[0])
		return 0;
	m->admin = admin_new(m->base, m->admin_conf, &m->p, err, sizeof(err));
	if (!m->admin) {
		log_error("admin_listen %s: %s", m->admin_conf, err);
		return -1;
	}
	admin_on_state(m->admin, proxy_on_state, m);
	return 0;
}

/* Serving starts: the first snapshot's health checks and config watch,
 * and the start said to the log and to systemd, with the port the kernel
 * gave (port) in place of a 0 in the config. */
static void proxy_announce(struct proxy_main *m, int port)
{
	const struct sockaddr_storage *addr = &m->addrs[0].ss;
	char host[64], admin_where[340];

	proxy_unresolved(m->snap);
	health_apply(m->health, m->snap);
	proxy_watch(m, m->snap->conf);
	m->p.fingerprint = ring_fingerprint(m->snap->ring);
	proxy_discovery_configure(m);
	event_active(m->ev_rr, EV_TIMEOUT, 0);
	conn_peer_ip(addr, host, sizeof(host));
	snprintf(m->listen_text, sizeof(m->listen_text), "%s%s%s:%d",
		 addr->ss_family == AF_INET6 ? "[" : "", host,
		 addr->ss_family == AF_INET6 ? "]" : "", port);
	log_info("listening on %s with %u worker%s; %zu backend%s, %zu ring points (%s); ring %016llx",
		 m->listen_text, m->p.nworkers, m->p.nworkers == 1 ? "" : "s", m->snap->nbe, m->snap->nbe == 1 ? "" : "s",
		 m->snap->ring->npoints, m->path, (unsigned long long)m->p.fingerprint);
	for (unsigned a = 1; a < m->naddrs; a++) {
		const struct sockaddr_storage *ss = &m->addrs[a].ss;

		conn_peer_ip(ss, host, sizeof(host));
		log_info("listening %son %s%s%s:%d too", m->addrs[a].kind & WORKER_L_TLS ? "for HTTPS " : "",
			 ss->ss_family == AF_INET6 ? "[" : "", host, ss->ss_family == AF_INET6 ? "]" : "",
			 ntohs(ss->ss_family == AF_INET6 ? ((const struct sockaddr_in6 *)ss)->sin6_port :
			       ((const struct sockaddr_in *)ss)->sin_port));
	}
	if (m->tls)
		log_info("TLS: %zu certificate%s (%s)", certs_count(m->snap->certs),
			 certs_count(m->snap->certs) == 1 ? "" : "s", m->snap->conf->tls_certs);
	if (m->admin) {
		proxy_admin_bound(m, admin_where, sizeof(admin_where));
		log_info("stats on http://%s/ (/stats /metrics /ring /health)", admin_where);
	}
	proxy_status(m);
}

/* Teardown, whatever step the start reached: the workers stop before
 * anything they use is freed, the cache after them (no fill is left),
 * the pid file last. rc is proxy_run's result (0: a clean stop). */
static void proxy_teardown(struct proxy_main *m, struct event **sigev, int rc)
{
	for (unsigned i = 0; i < m->p.nworkers; i++)
		worker_post_stop(m->p.workers[i]);
	for (unsigned i = 0; i < m->p.nworkers; i++)
		worker_join(m->p.workers[i]);
	for (unsigned i = 0; i < m->p.nworkers; i++)
		worker_free(m->p.workers[i]);
	access_close();
	watch_free(m->watch);
	dnssrv_free(m->dns);
	resolver_free(m->rr);
	if (m->ev_rr)
		event_free(m->ev_rr);
	if (m->disc_init)
		discover_free(&m->disc);
	health_free(m->health);
	admin_free(m->admin);
	for (size_t i = 0; i < PROXY_NSIGNALS; i++)
		if (sigev[i])
			event_free(sigev[i]);
	if (m->ev_reload)
		event_free(m->ev_reload);
	if (m->ev_poll)
		event_free(m->ev_poll);
	if (m->ev_deadline)
		event_free(m->ev_deadline);
	if (m->ev_sample)
		event_free(m->ev_sample);
	if (m->ev_tier)
		event_free(m->ev_tier);
	if (m->ev_apply)
		event_free(m->ev_apply);
	rates_free(m->p.rates);
	free(m->p.moved);
	free(m->p.workers);
	cache_free(m->p.cache);
	snapshot_unref(m->snap);
	snapshot_reap();        /* the workers are gone: what they let go of */
	registry_free();
	if (m->base)
		event_base_free(m->base);
	if (m->pid_file)
		pidfile_remove(m->pid_file);
	if (rc == 0)
		log_info("stopped");
}

int proxy_run(const char *path, struct conf *conf, unsigned flags, const char *pid_file)
{
	struct proxy_main m;
	struct event *sigev[PROXY_NSIGNALS] = { 0 };
	unsigned nworkers;
	int port = -1, rc = 1;

	memset(&m, 0, sizeof(m));
	m.path = path;
	signal(SIGPIPE, SIG_IGN);
	srandom((unsigned)time(NULL) ^ (unsigned)getpid());
	if (proxy_start_checks(&m, conf, flags, pid_file) < 0) {
		conf_free(conf);
		return 1;
	}
	nworkers = proxy_nworkers(conf);
	if (proxy_first_snapshot(&m, conf) < 0) {
		conf_free(conf);
		return 1;
	}
	/* conf is the snapshot's from here: use m.snap->conf */
	if (proxy_shared_new(&m, m.snap->conf, nworkers) < 0 ||
	    proxy_listen(&m, nworkers, &port) < 0 ||
	    proxy_workers_start(&m) < 0 || proxy_events_add(&m, sigev) < 0 ||
	    proxy_admin_start(&m) < 0)
		goto out;
	proxy_announce(&m, port);
	event_base_dispatch(m.base);
	rc = 0;
out:
	proxy_teardown(&m, sigev, rc);
	return rc;
}
