/*
 * stats.c -- collecting and rendering the counters listed in stats-t.h.
 * Main thread only (the admin listener). Reads shared state without
 * stopping anyone: registry counters are atomics, per-worker counters have
 * a single writer and are read with relaxed loads, so a reading is a
 * consistent-enough snapshot, not a transaction.
 */
#include "admin/stats.h"

#include <curl/curl.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/balance.h"
#include "base/decfmt.h"
#include "http/http1.h"
#include "path/proxy-t.h"
#include "backend/registry.h"
#include "backend/runstate.h"
#include "backend/snapshot.h"
#include "backend/dnssrv.h"
#include "config/discover.h"
#include "path/worker.h"
#include "tls/certs.h"

/* The DERIVED values of stats-t.h: one function each, named after the
 * scope and the counter. */
static uint64_t stats_proxy_uptime_seconds(const struct proxy *p)
{
	int64_t ms = registry_now_ms() - p->started_ms;

	return ms > 0 ? (uint64_t)ms / 1000 : 0;
}

static uint64_t stats_proxy_generation(const struct proxy *p)
{
	return p->generation;
}

static uint64_t stats_proxy_connections(const struct proxy *p)
{
	return atomic_load(&p->nconns);
}

static uint64_t stats_proxy_tls_connections(const struct proxy *p)
{
	return atomic_load(&p->tls_conns);
}

static uint64_t stats_proxy_connections_busiest_worker(const struct proxy *p)
{
	unsigned most = 0;

	for (unsigned i = 0; i < p->nworkers; i++) {
		unsigned n = p->workers[i] ? worker_clients(p->workers[i]) : 0;

		if (n > most)
			most = n;
	}
	return most;
}

static uint64_t stats_proxy_ring_fingerprint(const struct proxy *p)
{
	return p->fingerprint >> 12;
}

static uint64_t stats_proxy_discovery_answers(const struct proxy *p)
{
	return p->discover ? p->discover->good : 0;
}

#define STATS_DISC_FAIL(kind, KIND) \
	static uint64_t stats_proxy_discovery_failures_##kind(const struct proxy *p) \
	{ \
		return p->discover ? p->discover->failures[DISCOVER_F_##KIND] : 0; \
	}
STATS_DISC_FAIL(timeout, TIMEOUT)
STATS_DISC_FAIL(servfail, SERVFAIL)
STATS_DISC_FAIL(refused, REFUSED)
STATS_DISC_FAIL(nxdomain, NXDOMAIN)
STATS_DISC_FAIL(empty, EMPTY)
STATS_DISC_FAIL(parse, PARSE)
STATS_DISC_FAIL(other, OTHER)
#undef STATS_DISC_FAIL

/* The monotonic clock as discover.h's times are kept (dnssrv.c). */
static int64_t stats_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t stats_proxy_discovery_last_good_age_seconds(const struct proxy *p)
{
	int64_t now = stats_mono_ms();

	if (!p->discover || p->discover->last_good_ms < 0 || now < p->discover->last_good_ms)
		return 0;
	return (uint64_t)(now - p->discover->last_good_ms) / 1000;
}

/* Discovery's members counted by what they are about to do. */
static uint64_t stats_disc_count(const struct proxy *p, int what)
{
	const struct discover *d = p->discover;
	uint64_t n = 0;

	for (size_t i = 0; d && i < d->n; i++) {
		const struct discover_member *m = &d->m[i];

		n += what == 0 ? m->in_ring : what == 1 ? (!m->in_ring && m->present) : (m->in_ring && !m->present);
	}
	return n;
}

static uint64_t stats_proxy_discovery_members(const struct proxy *p)
{
	return stats_disc_count(p, 0);
}

static uint64_t stats_proxy_discovery_pending_adds(const struct proxy *p)
{
	return stats_disc_count(p, 1);
}

static uint64_t stats_proxy_discovery_pending_removes(const struct proxy *p)
{
	return stats_disc_count(p, 2);
}

static uint64_t stats_proxy_discovery_held_removes(const struct proxy *p)
{
	return p->discover ? p->discover->held : 0;
}

static uint64_t stats_proxy_inflight(const struct proxy *p)
{
	long n = atomic_load(&registry_total_inflight);

	(void)p;
	return n > 0 ? (uint64_t)n : 0;
}

static uint64_t stats_backend_up(const struct backend *b)
{
	return !atomic_load(&b->down);
}

static uint64_t stats_backend_fails(const struct backend *b)
{
	return atomic_load(&b->fails);
}

static uint64_t stats_backend_check_fails(const struct backend *b)
{
	return atomic_load(&b->check_fail);
}

static uint64_t stats_backend_state_since_seconds(const struct backend *b)
{
	int64_t ms = registry_now_ms() - atomic_load(&b->state_ms);

	return ms > 0 ? (uint64_t)ms / 1000 : 0;
}

static uint64_t stats_backend_last_check_status(const struct backend *b)
{
	int st = atomic_load(&b->check_status);

	return st > 0 ? (uint64_t)st : 0;
}

static uint64_t stats_backend_inflight(const struct backend *b)
{
	long n = atomic_load(&b->inflight);

	return n > 0 ? (uint64_t)n : 0;
}

/* Reading one value by where it is kept (stats-t.h). */
#define STATS_PROXY_GET(n, type, where, help) STATS_PROXY_GET_##where(n)
#define STATS_PROXY_GET_SHARED(n) st->n = atomic_load(&p->n);
#define STATS_PROXY_GET_DERIVED(n) st->n = stats_proxy_##n(p);
#define STATS_PROXY_GET_WORKER(n) \
	for (unsigned w_ = 0; w_ < p->nworkers; w_++) \
		st->n += atomic_load_explicit(&p->workers[w_]->n, memory_order_relaxed);

#define STATS_BACKEND_GET(n, type, where, help) STATS_BACKEND_GET_##where(n)
#define STATS_BACKEND_GET_SHARED(n) o->n = atomic_load_explicit(&b->n, memory_order_relaxed);
#define STATS_BACKEND_GET_WORKER(n)
#define STATS_BACKEND_GET_DERIVED(n) o->n = stats_backend_##n(b);

#define STATS_BACKEND_SUM(n, type, where, help) STATS_BACKEND_SUM_##where(n)
#define STATS_BACKEND_SUM_SHARED(n)
#define STATS_BACKEND_SUM_WORKER(n) o->n += atomic_load_explicit(&pool->n, memory_order_relaxed);
#define STATS_BACKEND_SUM_DERIVED(n)

static const uint64_t stats_bounds_us[STATS_NBOUNDS] = { STATS_BOUNDS_US };

double stats_hist_bound(int i)
{
	return (double)stats_bounds_us[i] / 1e6;
}

static void stats_hist_addup(struct stats_hist_sum *o, const struct stats_hist *h)
{
	for (int i = 0; i < STATS_NBUCKETS; i++) {
		uint64_t v = atomic_load_explicit(&h->n[i], memory_order_relaxed);

		o->n[i] += v;
		o->count += v;
	}
	o->sum_us += atomic_load_explicit(&h->sum_us, memory_order_relaxed);
}

double stats_hist_quantile(const struct stats_hist_sum *h, double q)
{
	double rank = q * (double)h->count, seen = 0;

	if (!h->count)
		return 0;
	for (int i = 0; i < STATS_NBUCKETS; i++) {
		double lo = i ? stats_hist_bound(i - 1) : 0;

		if (h->n[i] && seen + (double)h->n[i] >= rank) {
			if (i == STATS_NBOUNDS)
				return lo;
			return lo + (stats_hist_bound(i) - lo) * (rank - seen) / (double)h->n[i];
		}
		seen += (double)h->n[i];
	}
	return stats_hist_bound(STATS_NBOUNDS - 1);
}

static void stats_hist_read(struct stats_hist_sum *o)
{
	o->p50 = stats_hist_quantile(o, 0.5);
	o->p90 = stats_hist_quantile(o, 0.9);
	o->p99 = stats_hist_quantile(o, 0.99);
}

/* One backend's counters: the registry's, then each worker's summed. */
static void stats_collect_backend(struct stats_backend *o, const struct backend *b,
				  const struct proxy *p)
{
	int64_t now = registry_now_ms(), at = atomic_load(&b->check_at_ms);

	STATS_BACKEND(STATS_BACKEND_GET)
	/* why it is in its state: the times as Unix seconds */
	o->since = (double)time(NULL) - (double)(now - atomic_load(&b->state_ms)) / 1000;
	registry_note_get(&b->reason, o->reason, sizeof(o->reason));
	registry_note_get(&b->last_fail, o->last_fail, sizeof(o->last_fail));
	o->checked = at != 0;
	if (o->checked) {
		o->check_at = (double)time(NULL) - (double)(now - at) / 1000;
		o->check_seconds = (double)atomic_load(&b->check_us) / 1e6;
		o->check_passed = atomic_load(&b->check_passed);
		registry_note_get(&b->check_text, o->check_text, sizeof(o->check_text));
	}
	for (unsigned w = 0; w < p->nworkers; w++) {
		const struct pool *pool = worker_pool_peek(p->workers[w], b->id);

		if (!pool)
			continue;
		STATS_BACKEND(STATS_BACKEND_SUM)
#define STATS_HSUM(n, help) stats_hist_addup(&o->n, &pool->n);
		STATS_HIST_BACKEND(STATS_HSUM)
#undef STATS_HSUM
	}
#define STATS_HREAD(n, help) stats_hist_read(&o->n);
	STATS_HIST_BACKEND(STATS_HREAD)
#undef STATS_HREAD
}

/* The rate counters of rates.h, read from a backend's collected ones. */
static uint64_t stats_rate_b_requests(const struct stats_backend *o)
{
	return o->requests;
}

static uint64_t stats_rate_b_responses(const struct stats_backend *o)
{
	return o->responses;
}

static uint64_t stats_rate_b_errors(const struct stats_backend *o)
{
	return o->connect_errors + o->timeouts + o->bad_responses;
}

static uint64_t stats_rate_b_spilled_in(const struct stats_backend *o)
{
	return o->spilled_in;
}

static uint64_t stats_rate_b_spilled_away(const struct stats_backend *o)
{
	return o->spilled_away;
}

static uint64_t stats_rate_b_tier_hits(const struct stats_backend *o)
{
	return o->tier_hits;
}

static uint64_t stats_rate_b_tier_misses(const struct stats_backend *o)
{
	return o->tier_misses;
}

/* hits / (hits + misses); -1 when there were none. */
static double stats_ratio(double hits, double misses)
{
	return hits + misses > 0 ? hits / (hits + misses) : -1;
}

double stats_tier_miss_ratio(const struct proxy *p, int seconds)
{
	double h, m;

	if (!p->rates)
		return -1;
	h = rates_proxy(p->rates, RATES_P_tier_hits, seconds);
	m = rates_proxy(p->rates, RATES_P_tier_misses, seconds);
	return h + m > 0 ? m / (h + m) : -1;
}

void stats_tier_counts(const struct proxy *p, int seconds, double *verdicts, double *requests)
{
	double span = (double)seconds, up = difftime(time(NULL), p->started);

	*verdicts = *requests = 0;
	if (!p->rates)
		return;
	/* a rate over fewer seconds than asked when the proxy is younger */
	if (up > 0 && up < span)
		span = up;
	*verdicts = (rates_proxy(p->rates, RATES_P_tier_hits, seconds) +
		     rates_proxy(p->rates, RATES_P_tier_misses, seconds)) * span;
	*requests = rates_proxy(p->rates, RATES_P_requests, seconds) * span;
}

void stats_sample(struct proxy *p)
{
	uint32_t n = registry_size();
	uint64_t pv[RATES_NPROXY] = { 0 };
	uint64_t *bv = calloc(n ? n : 1, RATES_NBACKEND * sizeof(*bv));

	if (!bv)
		return;
	/* every backend ever named: one dropped by a reload keeps its
	 * history, should it come back */
	for (uint32_t id = 0; id < n; id++) {
		struct stats_backend o;

		memset(&o, 0, sizeof(o));
		stats_collect_backend(&o, registry_get(id), p);
#define STATS_RATE_B(name, help) bv[id * RATES_NBACKEND + RATES_B_##name] = stats_rate_b_##name(&o);
		RATES_BACKEND(STATS_RATE_B)
#undef STATS_RATE_B
		pv[RATES_P_requests] += o.requests;
		pv[RATES_P_errors] += stats_rate_b_errors(&o);
		pv[RATES_P_tier_hits] += o.tier_hits;
		pv[RATES_P_tier_misses] += o.tier_misses;
	}
	pv[RATES_P_accepted] = atomic_load(&p->accepted);
	/* every request answered, whoever answered it: the count of the
	 * client's-view histogram */
	for (unsigned w = 0; w < p->nworkers; w++)
		for (int k = 0; k < STATS_NBUCKETS; k++)
			pv[RATES_P_client_requests] += atomic_load_explicit(&p->workers[w]->request.n[k],
									    memory_order_relaxed);
	if (p->cache) {
		struct cache_stats cs;

		cache_stats(p->cache, &cs);
		pv[RATES_P_cache_answers] = cs.hits + cs.coalesced;
	}
	rates_add(p->rates, registry_now_ms(), pv, bv, n);
	free(bv);
}

static void stats_build(struct stats_build *b)
{
	b->version = RINGPROXY_VERSION;
	b->libevent = event_get_version();
	b->openssl = OpenSSL_version(OPENSSL_VERSION_STRING);
	b->libcurl = curl_version_info(CURLVERSION_NOW)->version;
	b->inih = RINGPROXY_INIH_VERSION;
}

/* What the page shows of backend i: its state in a word, its caps now
 * (balance.c's own reading), its rates and their last 5 minutes. */
static void stats_collect_view(struct stats_backend *o, const struct snapshot *s, size_t i,
			       const struct proxy *p)
{
	struct balance_why why;

	balance_explain(s, (int)i, 0, &why);
	o->id = s->be[i].state->id;
	o->max_inflight = why.max_inflight;
	o->cap = why.cap;
	o->ramp = why.ramp;
	/* up at fall failures in a row: kept as the last one up (health.c) */
	o->state = !o->points ? "drained" :
		   !o->up && atomic_load(&s->be[i].state->checking) ? "checking" : !o->up ? "down" :
		   s->conf->passive && o->fails >= s->be[i].conf->health.fall ? "failing" :
		   why.ramp < 1 ? "ramping" :
		   o->max_inflight && (long)o->inflight >= o->max_inflight ? "full" : "up";
	o->tier_hit_ratio = stats_ratio((double)o->tier_hits, (double)o->tier_misses);
	if (!p->rates)
		return;
#define STATS_WIN(sec, label) \
	for (int k = 0; k < RATES_NBACKEND; k++) \
		o->rate[STATS_WIN_##sec][k] = rates_backend(p->rates, o->id, k, sec);
	RATES_WINDOWS(STATS_WIN)
#undef STATS_WIN
	o->tier_hit_ratio_5m = stats_ratio(o->rate[STATS_WIN_300][RATES_B_tier_hits],
					   o->rate[STATS_WIN_300][RATES_B_tier_misses]);
	rates_series(p->rates, o->id, RATES_B_requests, STATS_SPARK_STEP, o->spark_requests);
	rates_series(p->rates, o->id, RATES_B_errors, STATS_SPARK_STEP, o->spark_errors);
}

/* Backend b's runtime state (runstate.h), its ring weight being w. */
static void stats_collect_runstate(struct stats_backend *o, const struct backend *b, double w)
{
	struct runstate_of rs;
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	runstate_get(b, &rs);
	o->admin_state = runstate_name(rs.state);
	o->drain_progress = runstate_drain_progress(b, registry_now_ms());
	o->drain_end = (double)(rs.drain_start_ms + (int64_t)rs.drain_span_ms) / 1000;
	o->drain_seconds = (double)rs.drain_span_ms / 1000;
	o->runtime_weight = rs.weighted ? rs.weight : -1;
	o->ring_weight = w;
}

/* Whether the config file on disk is still what runs: its SHA-256 now
 * against the one of the bytes loaded (an edit not reloaded, or one a
 * reload refused, differs). Read at each collection: a few kilobytes on
 * the admin thread, never on the request path. */
static void stats_conf_on_disk(struct stats *st)
{
	unsigned char md[EVP_MAX_MD_SIZE], buf[16384];
	unsigned int len = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	FILE *f = fopen(st->conf_path, "rb");
	bool ok = f && ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	size_t n;

	st->conf_on_disk = "unreadable";
	while (ok && (n = fread(buf, 1, sizeof(buf), f)) > 0)
		ok = EVP_DigestUpdate(ctx, buf, n);
	if (ok && !ferror(f) && EVP_DigestFinal_ex(ctx, md, &len) && len == 32) {
		for (unsigned i = 0; i < len; i++)
			snprintf(st->conf_disk_sha256 + 2 * i, 3, "%02x", md[i]);
		st->conf_on_disk = strcmp(st->conf_disk_sha256, st->conf_sha256) == 0 ? "same" : "differs";
	}
	if (f)
		fclose(f);
	EVP_MD_CTX_free(ctx);
}

int stats_collect(struct stats *st, const struct proxy *p)
{
	const struct snapshot *s = p->current;
	double *share;

	memset(st, 0, sizeof(*st));
	STATS_PROXY(STATS_PROXY_GET)
	st->reload_time = (long long)p->last_reload.when;
	st->reload_ok = p->last_reload.ok;
	st->reload_text = p->last_reload.text;
	st->reload_moved = p->last_moved_share;
	for (unsigned k = p->nreloads > PROXY_RELOADS ? p->nreloads - PROXY_RELOADS : 0; k < p->nreloads; k++)
		st->reloads[st->nreloads++] = &p->reloads[k % PROXY_RELOADS];
	for (unsigned k = p->nctls > PROXY_RELOADS ? p->nctls - PROXY_RELOADS : 0; k < p->nctls; k++)
		st->ctls[st->nctls++] = &p->ctls[k % PROXY_RELOADS];
	stats_build(&st->build);
	st->conf_path = s->conf->path;
	st->conf_sha256 = s->conf->sha256;
	st->conf_loaded = (long long)p->conf_loaded;
	stats_conf_on_disk(st);
	st->balance_factor = s->conf->balance_factor;
	if (p->rates) {
#define STATS_WIN(sec, label) \
		for (int k = 0; k < RATES_NPROXY; k++) \
			st->rate[STATS_WIN_##sec][k] = rates_proxy(p->rates, k, sec);
		RATES_WINDOWS(STATS_WIN)
#undef STATS_WIN
	}
	st->ring = s->ring;
	st->certs = s->certs;
	st->moved = p->moved;
	st->nmoved = p->nmoved;
	if (p->cache) {                 /* NULL in tests that make no cache */
		uint64_t looked;

		st->has_cache = true;
		cache_stats(p->cache, &st->cache);
		looked = st->cache.hits + st->cache.misses + st->cache.coalesced;
		st->cache_hit_ratio = looked ? (double)st->cache.hits / (double)looked : 0.0;
	}
	if (s->ramp) {
		const struct snap_ramp *r = s->ramp;
		int64_t span = r->end_ms - r->step[0].start_ms;
		int64_t in = registry_now_ms() - r->step[0].start_ms;

		st->ramp_rings = r->nsteps;
		st->ramp_in_progress = in < span;
		st->ramp_start_ms = r->start_wall_ms;
		st->ramp_end_ms = r->start_wall_ms + span;
		/* each key switches at its own u, uniform over the window,
		 * so this is the share of the moved keys switched by now */
		st->ramp_switched = in >= span ? 1.0 : in <= 0 ? 0.0 : (double)in / (double)span;
		st->ramp_moved = r->moved_share;
	}
	for (unsigned w = 0; w < p->nworkers; w++) {
#define STATS_HSUM(n, help) stats_hist_addup(&st->n, &p->workers[w]->n); stats_hist_read(&st->n);
		STATS_HIST_PROXY(STATS_HSUM)
#undef STATS_HSUM
	}
	st->discover = p->discover;
	st->dns = p->dns;
	st->fingerprint = p->fingerprint;
	st->disc_remove_after_ms = s->conf->disc_remove_after_ms;
	st->scheme = ring_scheme_name(s->ring->scheme);
	st->vnodes = s->ring->vnodes;
	st->npoints = s->ring->npoints;
	st->nbe = s->nbe;
	st->be = calloc(s->nbe ? s->nbe : 1, sizeof(*st->be));
	share = calloc(s->nbe ? s->nbe : 1, sizeof(*share));
	if (!st->be || !share) {
		free(share);
		stats_free(st);
		return -1;
	}
	ring_shares(s->ring, share);
	for (size_t i = 0; i < s->nbe; i++) {
		struct stats_backend *o = &st->be[i];

		o->name = s->be[i].conf->name;
		o->url = s->be[i].conf->url;
		o->weight = s->be[i].conf->weight;
		o->points = s->ring->npoints_of[i];
		o->share = share[i];
		stats_collect_backend(o, s->be[i].state, p);
		stats_collect_view(o, s, i, p);
		stats_collect_runstate(o, s->be[i].state, s->ring->weights[i]);
		st->tier_hits += o->tier_hits;
		st->tier_misses += o->tier_misses;
	}
	free(share);
	st->tier_hit_ratio = stats_ratio((double)st->tier_hits, (double)st->tier_misses);
	st->tier_hit_ratio_5m = stats_ratio(st->rate[STATS_WIN_300][RATES_P_tier_hits],
					    st->rate[STATS_WIN_300][RATES_P_tier_misses]);
	st->tier_fetches_5m = st->rate[STATS_WIN_300][RATES_P_tier_misses];
	return 0;
}

void stats_free(struct stats *st)
{
	free(st->be);
	st->be = NULL;
	st->nbe = 0;
}

/* ---- rendering ---------------------------------------------------------- */

/* What the renderers write is gathered in a stats_w's buffer and handed
 * to the evbuffer a few kilobytes at a time: with thousands of backends,
 * one evbuffer_add a field (a name's byte, a comma) was the larger part
 * of /stats' time once printf was gone (perf). */
struct stats_w {
	struct evbuffer *out;
	char *b;
	size_t n, size;
};

static void stats_w_flush(struct stats_w *w)
{
	if (w->n)
		evbuffer_add(w->out, w->b, w->n);
	w->n = 0;
}

static void stats_w_add(struct stats_w *w, const void *p, size_t n)
{
	if (n > w->size - w->n) {
		stats_w_flush(w);
		if (n > w->size) {
			evbuffer_add(w->out, p, n);
			return;
		}
	}
	memcpy(w->b + w->n, p, n);
	w->n += n;
}

/* Room for n bytes (n <= the buffer's size) at the returned pointer;
 * stats_w_commit says where the writing ended. */
static char *stats_w_room(struct stats_w *w, size_t n)
{
	if (n > w->size - w->n)
		stats_w_flush(w);
	return w->b + w->n;
}

static void stats_w_commit(struct stats_w *w, const char *end)
{
	w->n = (size_t)(end - w->b);
}

__attribute__((format(printf, 2, 3)))
static void stats_w_printf(struct stats_w *w, const char *fmt, ...)
{
	size_t room = w->size - w->n;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(w->b + w->n, room, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < room) {
		w->n += (size_t)n;
		return;
	}
	stats_w_flush(w);
	va_start(ap, fmt);
	evbuffer_add_vprintf(w->out, fmt, ap);
	va_end(ap);
}

/* The length of the valid UTF-8 sequence at s[0..n), 0 if there is none:
 * an invalid byte becomes U+FFFD, so that the output is valid JSON
 * whatever the key's bytes (a percent-decoded query can hold any). */
static size_t stats_utf8_len(const unsigned char *s, size_t n)
{
	size_t len = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : 2;
	uint32_t cp;

	if (s[0] < 0xc2 || s[0] > 0xf4 || n < len)
		return 0;
	for (size_t i = 1; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	cp = len == 2 ? (s[0] & 0x1fu) << 6 | (s[1] & 0x3fu) :
	     len == 3 ? (s[0] & 0x0fu) << 12 | (s[1] & 0x3fu) << 6 | (s[2] & 0x3fu) :
	     (s[0] & 0x07u) << 18 | (s[1] & 0x3fu) << 12 | (s[2] & 0x3fu) << 6 | (s[3] & 0x3fu);
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp < 0xe000))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return len;
}

static void stats_w_jstrn(struct stats_w *out, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s, *e = p + n;

	stats_w_add(out, "\"", 1);
	while (p < e) {
		unsigned char c = *p;
		size_t l;

		if (c == '"' || c == '\\') {
			stats_w_printf(out, "\\%c", c);
			p++;
		} else if (c < 0x20 || c == 0x7f) {
			stats_w_printf(out, "\\u%04x", c);
			p++;
		} else if (c < 0x80) {          /* the run of plain ASCII at once */
			for (l = 1; p + l < e && p[l] >= 0x20 && p[l] < 0x7f && p[l] != '"' && p[l] != '\\'; l++)
				;
			stats_w_add(out, p, l);
			p += l;
		} else if ((l = stats_utf8_len(p, (size_t)(e - p))) > 0) {
			stats_w_add(out, p, l);
			p += l;
		} else {
			stats_w_add(out, "\\ufffd", 6);
			p++;
		}
	}
	stats_w_add(out, "\"", 1);
}

static void stats_w_jstr(struct stats_w *out, const char *s)
{
	stats_w_jstrn(out, s, strlen(s));
}

void stats_json_strn(struct evbuffer *out, const char *s, size_t n)
{
	char b[512];
	struct stats_w w = { out, b, 0, sizeof(b) };

	stats_w_jstrn(&w, s, n);
	stats_w_flush(&w);
}

void stats_json_str(struct evbuffer *out, const char *s)
{
	stats_json_strn(out, s, strlen(s));
}

/* One value of a list by its type: a flag is true/false in JSON. */
/* Numbers without printf where printf would print an integer: /stats,
 * /metrics and the page write about fifty a backend, and with thousands
 * of backends printf's parsing of the format was most of their time. */
static void stats_u64(struct stats_w *out, uint64_t v)
{
	stats_w_commit(out, decfmt_u64(stats_w_room(out, 20), v));
}

static void stats_i64(struct stats_w *out, int64_t v)
{
	stats_w_commit(out, decfmt_i64(stats_w_room(out, 20), v));
}

/* v as "%.<prec>g" prints it (decfmt.c: printf's conversion was the
 * larger part of the pages' time). */
static void stats_g(struct stats_w *out, double v, int prec)
{
	stats_w_commit(out, decfmt_g(stats_w_room(out, DECFMT_MAX), v, prec));
}

/* s, then v as "%.<prec>f" prints it. */
static void stats_f(struct stats_w *out, const char *s, double v, int prec)
{
	stats_w_add(out, s, strlen(s));
	stats_w_commit(out, decfmt_f(stats_w_room(out, DECFMT_MAX), v, prec));
}

/* One Prometheus sample: the NULL-ended parts of its name and labels
 * joined, a space, v and a newline, written straight into the buffer
 * (thousands of backends make millions of these bytes a scrape). */
static void stats_prom_u64(struct stats_w *out, const char *const *parts, uint64_t v)
{
	size_t len[8], total = 0, k = 0;
	char *p;

	for (; parts[k] && k < 8; k++) {
		len[k] = strlen(parts[k]);
		total += len[k];
	}
	/* a name and its labels are short (names of 64 bytes at most);
	 * room for them, the space, 20 digits and the newline */
	p = stats_w_room(out, total + 22);
	for (size_t i = 0; i < k; i++) {
		memcpy(p, parts[i], len[i]);
		p += len[i];
	}
	*p++ = ' ';
	p = decfmt_u64(p, v);
	*p++ = '\n';
	stats_w_commit(out, p);
}

/* "%g" of histogram bound i, formatted once (main thread only). */
static const char *stats_bound_text(int i)
{
	static char text[STATS_NBOUNDS][24];

	if (!text[i][0])
		snprintf(text[i], sizeof(text[i]), "%g", stats_hist_bound(i));
	return text[i];
}

#define STATS_JVAL(out, type, v) stats_json_val(out, #type, v)
static void stats_json_val(struct stats_w *out, const char *type, uint64_t v)
{
	if (strcmp(type, "flag") == 0) {
		if (v)
			stats_w_add(out, "true", 4);
		else
			stats_w_add(out, "false", 5);
	} else {
		stats_u64(out, v);
	}
}

/* "name": {"count": n, "sum": s, "p50": .., "p90": .., "p99": ..}, in
 * seconds. */
static void stats_json_hist(struct stats_w *out, const char *name, const struct stats_hist_sum *h,
			    bool first)
{
	stats_w_add(out, first ? "\"" : ", \"", first ? 1 : 3);
	stats_w_add(out, name, strlen(name));
	stats_w_add(out, "\": {\"count\": ", 13);
	stats_u64(out, h->count);
	stats_f(out, ", \"sum\": ", (double)h->sum_us / 1e6, 6);
	stats_f(out, ", \"p50\": ", h->p50, 6);
	stats_f(out, ", \"p90\": ", h->p90, 6);
	stats_f(out, ", \"p99\": ", h->p99, 6);
	stats_w_add(out, "}", 1);
}

/* {"10s": {"requests": r, ...}, "5m": {...}} of rate[win][k]. */
static void stats_json_rates(struct stats_w *out, const double *rate, int n, const char *const *names)
{
	int w = 0;

	stats_w_add(out, "{", 1);
#define STATS_WIN(sec, label) \
	stats_w_printf(out, "%s\"" label "\": {", w ? ", " : ""); \
	for (int k = 0; k < n; k++) { \
		if (k) \
			stats_w_add(out, ", ", 2); \
		stats_w_add(out, "\"", 1); \
		stats_w_add(out, names[k], strlen(names[k])); \
		stats_w_add(out, "\": ", 3); \
		stats_g(out, rate[w * n + k], 6); \
	} \
	stats_w_add(out, "}", 1); \
	w++;
	RATES_WINDOWS(STATS_WIN)
#undef STATS_WIN
	stats_w_add(out, "}", 1);
}

#define STATS_NAME(n, help) #n,
static const char *const stats_rate_p_names[] = { RATES_PROXY(STATS_NAME) };
static const char *const stats_rate_b_names[] = { RATES_BACKEND(STATS_NAME) };
#undef STATS_NAME

static void stats_json_reload(struct stats_w *out, const struct proxy_reload *r)
{
	stats_w_printf(out, "{\"time\": %lld, \"ok\": %s, \"moved_share\": %.17g, \"report\": ",
			    (long long)r->when, r->ok ? "true" : "false", r->ok ? r->moved : 0.0);
	stats_w_jstr(out, r->text);
	stats_w_add(out, "}", 1);
}

/* A ratio, null when there was nothing to divide (-1). */
static void stats_json_ratio(struct stats_w *out, double r)
{
	if (r < 0)
		stats_w_add(out, "null", 4);
	else
		stats_f(out, "", r, 6);
}

/* , "since": .., "reason": .., "last_failure": .., "check": {..} | null:
 * why backend b is in its state. */
static void stats_json_why(struct stats_w *out, const struct stats_backend *b)
{
	stats_f(out, ", \"since\": ", b->since, 3);
	stats_w_add(out, ", \"reason\": ", 12);
	stats_w_jstr(out, b->reason);
	stats_w_add(out, ", \"last_failure\": ", 18);
	stats_w_jstr(out, b->last_fail);
	if (!b->checked) {
		stats_w_add(out, ", \"check\": null", 15);
		return;
	}
	stats_w_printf(out, ", \"check\": {\"time\": %.3f, \"seconds\": %.6f, \"passed\": %s, \"status\": %llu, "
			    "\"result\": ", b->check_at, b->check_seconds, b->check_passed ? "true" : "false",
			    (unsigned long long)b->last_check_status);
	stats_w_jstr(out, b->check_text);
	stats_w_add(out, "}", 1);
}

/* , "admin_state": .., "drain": {..} | null, "runtime_weight": .. | null,
 * "ring_weight": ..: backend b's runtime state. */
static void stats_json_runstate(struct stats_w *out, const struct stats_backend *b)
{
	stats_w_printf(out, ", \"admin_state\": \"%s\", \"drain\": ", b->admin_state);
	if (b->drain_progress >= 0)
		stats_w_printf(out, "{\"progress\": %.6f, \"end\": %.3f, \"seconds\": %.3f}", b->drain_progress,
				    b->drain_end, b->drain_seconds);
	else
		stats_w_add(out, "null", 4);
	stats_w_add(out, ", \"runtime_weight\": ", 20);
	if (b->runtime_weight >= 0)
		stats_g(out, b->runtime_weight, 17);
	else
		stats_w_add(out, "null", 4);
	stats_w_add(out, ", \"ring_weight\": ", 17);
	stats_g(out, b->ring_weight, 17);
}

/* , "weight": .., "points": .., "share": .. of backend b (/stats, /ring). */
static void stats_json_share(struct stats_w *out, const struct stats_backend *b)
{
	stats_w_add(out, ", \"weight\": ", 12);
	stats_g(out, b->weight, 17);
	stats_w_add(out, ", \"points\": ", 12);
	stats_u64(out, b->points);
	stats_w_add(out, ", \"share\": ", 11);
	stats_g(out, b->share, 17);
}

static void stats_json_head(const struct stats *st, struct stats_w *out)
{
	const struct stats_build *b = &st->build;

	const char *const kv[][2] = {
		{ "{\"build\": {\"version\": ", b->version }, { ", \"libevent\": ", b->libevent },
		{ ", \"openssl\": ", b->openssl }, { ", \"libcurl\": ", b->libcurl }, { ", \"inih\": ", b->inih },
		{ "}, \"config\": {\"path\": ", st->conf_path }, { ", \"sha256\": ", st->conf_sha256 },
	};

	for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++) {
		stats_w_add(out, kv[i][0], strlen(kv[i][0]));
		stats_w_jstr(out, kv[i][1]);
	}
	stats_w_printf(out, ", \"loaded\": %lld, \"on_disk\": \"%s\"}, ", st->conf_loaded, st->conf_on_disk);
}

/* "discovery": its names, counts, the poll, and each member with what
 * it waits for (null without [discovery] srv). */
static void stats_json_discovery(const struct stats *st, struct stats_w *out)
{
	const struct discover *d = st->discover;
	int64_t now = stats_mono_ms();
	struct dnssrv_info in = { 0 };

	if (!d) {
		stats_w_add(out, "null", 4);
		return;
	}
	if (st->dns)
		dnssrv_info(st->dns, &in);
	stats_w_add(out, "{\"srv\": ", 8);
	stats_w_jstr(out, st->dns ? dnssrv_names(st->dns) : "");
	stats_w_printf(out, ", \"answers\": %llu, \"last_good_age_seconds\": ", (unsigned long long)d->good);
	if (d->last_good_ms >= 0)
		stats_w_printf(out, "%.3f", (double)(now - d->last_good_ms) / 1000);
	else
		stats_w_add(out, "null", 4);
	stats_w_add(out, ", \"last_failure\": ", 18);
	if (d->last_fail >= 0)
		stats_w_printf(out, "\"%s\"", discover_fail_name(d->last_fail));
	else
		stats_w_add(out, "null", 4);
	stats_w_add(out, ", \"failures\": {", 15);
	for (int k = 0; k < DISCOVER_NFAIL; k++)
		stats_w_printf(out, "%s\"%s\": %llu", k ? ", " : "", discover_fail_name(k),
			       (unsigned long long)d->failures[k]);
	stats_w_printf(out, "}, \"held_removes\": %zu, \"poll\": {\"rounds\": %llu, \"interval_ms\": %llu, "
		       "\"targets\": %zu, \"tcp\": %s, \"last_round_us\": %llu}, \"members\": [",
		       d->held, (unsigned long long)in.rounds, (unsigned long long)in.interval_ms, in.targets,
		       in.tcp ? "true" : "false", (unsigned long long)in.last_round_us);
	for (size_t i = 0; i < d->n; i++) {
		const struct discover_member *m = &d->m[i];
		double left = ((double)st->disc_remove_after_ms - (double)m->absent_ms) / 1000;

		stats_w_add(out, i ? ", {\"name\": " : "{\"name\": ", i ? 11 : 9);
		stats_w_jstr(out, m->name);
		stats_w_add(out, ", \"target\": ", 12);
		stats_w_jstr(out, m->target);
		stats_w_add(out, ", \"address\": ", 13);
		stats_w_jstr(out, m->addr);
		stats_w_printf(out, ", \"port\": %u, \"weight\": %u, \"on_ring\": %s, \"in_answer\": %s, "
			       "\"answers_in_a_row\": %u, \"absent_seconds\": %.3f, \"leaves_in_seconds\": ",
			       (unsigned)m->port, m->weight, m->in_ring ? "true" : "false",
			       m->present ? "true" : "false", m->seen, (double)m->absent_ms / 1000);
		if (m->in_ring && !m->present)
			stats_w_printf(out, "%.3f}", left > 0 ? left : 0.0);
		else
			stats_w_add(out, "null}", 5);
	}
	stats_w_add(out, "]}", 2);
}

/* Each certificate of [tls]: its file, names, the end of its validity
 * and the seconds left, so that an alert fires before a browser
 * refuses it. */
static void stats_json_certs(const struct stats *st, struct stats_w *out)
{
	time_t now = time(NULL);

	stats_w_add(out, "\"tls_certificates\": [", 21);
	for (size_t i = 0; i < certs_count(st->certs); i++) {
		const char *n = certs_names(st->certs, i);

		stats_w_add(out, i ? ", {\"file\": " : "{\"file\": ", i ? 11 : 9);
		stats_w_jstr(out, certs_file(st->certs, i));
		stats_w_add(out, ", \"names\": [", 12);
		for (bool first = true; *n; first = false) {
			size_t len = strcspn(n, ",");

			if (!first)
				stats_w_add(out, ", ", 2);
			stats_w_jstrn(out, n, len);
			n += len + (n[len] == ',');
		}
		stats_w_printf(out, "], \"not_after\": %lld, \"expiry_seconds\": %lld}",
			       (long long)certs_not_after(st->certs, i),
			       (long long)(certs_not_after(st->certs, i) - now));
	}
	stats_w_add(out, "], ", 3);
}

static void stats_json_w(const struct stats *st, struct stats_w *out)
{
	stats_json_head(st, out);
#define STATS_J(n, type, where, help) \
	stats_w_add(out, "\"" #n "\": ", sizeof(#n) + 3); \
	STATS_JVAL(out, type, st->n); \
	stats_w_add(out, ", ", 2);
	STATS_PROXY(STATS_J)
#undef STATS_J
	stats_json_certs(st, out);
	stats_w_add(out, "\"latency\": {", 12);
	{
		bool first = true;

#define STATS_JH(n, help) stats_json_hist(out, #n, &st->n, first); first = false;
		STATS_HIST_PROXY(STATS_JH)
#undef STATS_JH
	}
	stats_w_add(out, "}, \"rates\": ", 12);
	stats_json_rates(out, &st->rate[0][0], RATES_NPROXY, stats_rate_p_names);
	stats_w_add(out, ", \"cache\": ", 11);
	if (st->has_cache) {
		stats_w_add(out, "{", 1);
#define STATS_J(n, type, help) stats_w_printf(out, "\"" #n "\": %llu, ", (unsigned long long)st->cache.n);
		CACHE_STATS(STATS_J)
#undef STATS_J
		stats_w_printf(out, "\"hit_ratio\": %.6g}", st->cache_hit_ratio);
	} else {
		stats_w_add(out, "null", 4);
	}
	stats_w_printf(out, ", \"tier\": {\"hits\": %llu, \"misses\": %llu, \"hit_ratio\": ",
			    (unsigned long long)st->tier_hits, (unsigned long long)st->tier_misses);
	stats_json_ratio(out, st->tier_hit_ratio);
	stats_w_printf(out, ", \"hit_ratio_5m\": ");
	stats_json_ratio(out, st->tier_hit_ratio_5m);
	stats_w_printf(out, ", \"origin_fetches_per_second_5m\": %.6g}", st->tier_fetches_5m);
	stats_w_printf(out, ", \"scheme\": \"%s\", \"vnodes\": %u, \"points\": %zu, \"last_reload\": ", st->scheme,
			    st->vnodes, st->npoints);
	if (st->reload_time && st->nreloads)
		stats_json_reload(out, st->reloads[st->nreloads - 1]);
	else
		stats_w_add(out, "null", 4);
	stats_w_add(out, ", \"reloads\": [", 14);
	for (unsigned k = st->nreloads; k-- > 0;) {
		stats_json_reload(out, st->reloads[k]);
		if (k)
			stats_w_add(out, ", ", 2);
	}
	stats_w_add(out, "], \"ramp\": ", 11);
	if (st->ramp_rings)
		stats_w_printf(out, "{\"in_progress\": %s, \"start\": %.3f, \"end\": %.3f, \"seconds\": %.3f, "
				    "\"switched_share\": %.6f, \"moved_share\": %.17g, \"rings\": %zu}",
				    st->ramp_in_progress ? "true" : "false", (double)st->ramp_start_ms / 1000,
				    (double)st->ramp_end_ms / 1000,
				    (double)(st->ramp_end_ms - st->ramp_start_ms) / 1000, st->ramp_switched,
				    st->ramp_moved, st->ramp_rings);
	else
		stats_w_add(out, "null", 4);
	stats_w_printf(out, ", \"ring_fingerprint_hex\": \"%016llx\", \"discovery\": ",
		       (unsigned long long)st->fingerprint);
	stats_json_discovery(st, out);
	stats_w_add(out, ", \"backends\": [", 15);
	for (size_t i = 0; i < st->nbe; i++) {
		const struct stats_backend *b = &st->be[i];

		stats_w_add(out, i ? ", {\"name\": " : "{\"name\": ", i ? 11 : 9);
		stats_w_jstr(out, b->name);
		stats_w_add(out, ", \"url\": ", 9);
		stats_w_jstr(out, b->url);
		stats_json_share(out, b);
		stats_w_add(out, ", \"state\": \"", 12);
		stats_w_add(out, b->state, strlen(b->state));
		stats_w_add(out, "\", \"max_inflight\": ", 19);
		stats_i64(out, b->max_inflight);
		stats_w_add(out, ", \"cap\": ", 9);
		if (b->cap >= 0)
			stats_i64(out, b->cap);
		else
			stats_w_add(out, "null", 4);
#define STATS_J(n, type, where, help) \
		stats_w_add(out, ", \"" #n "\": ", sizeof(#n) + 5); \
		STATS_JVAL(out, type, b->n);
		STATS_BACKEND(STATS_J)
#undef STATS_J
		stats_w_add(out, ", \"tier_hit_ratio\": ", 20);
		stats_json_ratio(out, b->tier_hit_ratio);
		stats_w_add(out, ", \"tier_hit_ratio_5m\": ", 23);
		stats_json_ratio(out, b->tier_hit_ratio_5m);
		stats_json_why(out, b);
		stats_json_runstate(out, b);
		stats_w_add(out, ", \"latency\": {", 14);
		{
			bool first = true;

#define STATS_JH(n, help) stats_json_hist(out, #n, &b->n, first); first = false;
			STATS_HIST_BACKEND(STATS_JH)
#undef STATS_JH
		}
		stats_w_add(out, "}, \"rates\": ", 12);
		stats_json_rates(out, &b->rate[0][0], RATES_NBACKEND, stats_rate_b_names);
		stats_w_add(out, "}", 1);
	}
	stats_w_add(out, "]}\n", 3);
}

static void stats_ring_json_w(const struct stats *st, struct stats_w *out)
{
	stats_w_printf(out, "{\"scheme\": \"%s\", \"vnodes\": %u, \"points\": %zu, \"backends\": [", st->scheme,
			    st->vnodes, st->npoints);
	for (size_t i = 0; i < st->nbe; i++) {
		const struct stats_backend *b = &st->be[i];

		stats_w_add(out, i ? ", {\"name\": " : "{\"name\": ", i ? 11 : 9);
		stats_w_jstr(out, b->name);
		stats_json_share(out, b);
		stats_w_add(out, ", \"up\": ", 8);
		STATS_JVAL(out, flag, b->up);
		stats_w_add(out, "}", 1);
	}
	stats_w_add(out, "]}\n", 3);
}

/* The series of one histogram: its buckets (cumulative), _sum and _count;
 * label is "" or a label pair and a comma. */
static void stats_prom_hist(struct stats_w *out, const char *metric, const char *label,
			    const struct stats_hist_sum *h)
{
	uint64_t cum = 0;
	char sum[DECFMT_MAX + 1], pre[640];
	size_t ml = strlen(metric), ll = strlen(label), n;

	/* every bucket's line starts "METRIC_bucket{LABELle=\"": once */
	if (ml + ll > sizeof(pre) - 16)
		return;         /* names are short: conf.c bounds them */
	memcpy(pre, metric, ml);
	memcpy(pre + ml, "_bucket{", 8);
	memcpy(pre + ml + 8, label, ll);
	memcpy(pre + ml + 8 + ll, "le=\"", 4);
	n = ml + 12 + ll;
	for (int i = 0; i < STATS_NBUCKETS; i++) {
		const char *bound = i < STATS_NBOUNDS ? stats_bound_text(i) : "+Inf";
		size_t bl = strlen(bound);
		char *p = stats_w_room(out, n + bl + 25);

		cum += h->n[i];
		memcpy(p, pre, n);
		memcpy(p + n, bound, bl);
		p += n + bl;
		memcpy(p, "\"} ", 3);
		p = decfmt_u64(p + 3, cum);
		*p++ = '\n';
		stats_w_commit(out, p);
	}
	*decfmt_f(sum, (double)h->sum_us / 1e6, 6) = 0;
	/* "backend=\"x\"," less its comma, in braces; none without */
	if (ll)
		ll--;
	for (int k = 0; k < 2; k++) {
		stats_w_add(out, metric, ml);
		stats_w_add(out, k ? "_count" : "_sum", k ? 6 : 4);
		if (ll) {
			stats_w_add(out, "{", 1);
			stats_w_add(out, label, ll);
			stats_w_add(out, "}", 1);
		}
		stats_w_add(out, " ", 1);
		if (k) {
			char c[24], *e = decfmt_u64(c, h->count);

			*e++ = '\n';
			stats_w_add(out, c, (size_t)(e - c));
		} else {
			stats_w_add(out, sum, strlen(sum));
			stats_w_add(out, "\n", 1);
		}
	}
}

/* Prometheus counters are named *_total; a flag is a gauge. */
static const char *stats_suffix(const char *type)
{
	return strcmp(type, "counter") == 0 ? "_total" : "";
}

static const char *stats_ptype(const char *type)
{
	return strcmp(type, "flag") == 0 ? "gauge" : type;
}

/* A label value (the text exposition format: \\, \" and \n escaped). */
static void stats_prom_label(struct stats_w *out, const char *name, const char *v, bool last)
{
	stats_w_printf(out, "%s=\"", name);
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			stats_w_printf(out, "\\%c", *v);
		else if (*v == '\n')
			stats_w_add(out, "\\n", 2);
		else
			stats_w_add(out, v, 1);
	}
	stats_w_add(out, last ? "\"" : "\",", last ? 1 : 2);
}

static void stats_prom_info(const struct stats *st, struct stats_w *out)
{
	const struct stats_build *b = &st->build;

	stats_w_printf(out, "# HELP ringproxy_build_info the running build: ringproxy's version and the libraries'\n"
			    "# TYPE ringproxy_build_info gauge\nringproxy_build_info{");
	stats_prom_label(out, "version", b->version, false);
	stats_prom_label(out, "libevent", b->libevent, false);
	stats_prom_label(out, "openssl", b->openssl, false);
	stats_prom_label(out, "libcurl", b->libcurl, false);
	stats_prom_label(out, "inih", b->inih, true);
	stats_w_printf(out, "} 1\n# HELP ringproxy_config_info the config file in use and the SHA-256 of its bytes\n"
			    "# TYPE ringproxy_config_info gauge\nringproxy_config_info{");
	stats_prom_label(out, "path", st->conf_path, false);
	stats_prom_label(out, "sha256", st->conf_sha256, true);
	stats_w_printf(out, "} 1\n# HELP ringproxy_config_loaded_timestamp_seconds when the config in use was read\n"
			    "# TYPE ringproxy_config_loaded_timestamp_seconds gauge\n"
			    "ringproxy_config_loaded_timestamp_seconds %lld\n", st->conf_loaded);
}

/*
 * Counters by status as one family with a code label, as Prometheus
 * names things (the label, not the name, carries a value; HAProxy's
 * exporter writes code="2xx" and code="other" the same way). The older
 * names with the code in them are written for one more release, their
 * HELP saying which series replaces them.
 */
struct stats_code {
	const char *name;               /* the counter of the lists */
	const char *code;               /* its code label */
	size_t off;                     /* in struct stats or struct stats_backend */
};

static const struct stats_code stats_reply_codes[] = {
	{ "replies_400", "400", offsetof(struct stats, replies_400) },
	{ "replies_408", "408", offsetof(struct stats, replies_408) },
	{ "replies_431", "431", offsetof(struct stats, replies_431) },
	{ "replies_502", "502", offsetof(struct stats, replies_502) },
	{ "replies_503", "503", offsetof(struct stats, replies_503) },
	{ "replies_504", "504", offsetof(struct stats, replies_504) },
	{ "replies_other", "other", offsetof(struct stats, replies_other) },
};

static const struct stats_code stats_response_codes[] = {
	{ "responses_2xx", "2xx", offsetof(struct stats_backend, responses_2xx) },
	{ "responses_3xx", "3xx", offsetof(struct stats_backend, responses_3xx) },
	{ "responses_4xx", "4xx", offsetof(struct stats_backend, responses_4xx) },
	{ "responses_5xx", "5xx", offsetof(struct stats_backend, responses_5xx) },
};

#define STATS_NCODES(t) (sizeof(t) / sizeof((t)[0]))

/* The HELP text's tail for counter name: "" or where it went. */
static const char *stats_prom_moved(const char *name, char *buf, size_t len)
{
	const struct stats_code *tabs[] = { stats_reply_codes, stats_response_codes };
	const size_t ns[] = { STATS_NCODES(stats_reply_codes), STATS_NCODES(stats_response_codes) };
	const char *family[] = { "ringproxy_replies_total", "ringproxy_backend_http_responses_total" };

	for (size_t t = 0; t < 2; t++)
		for (size_t i = 0; i < ns[t]; i++)
			if (strcmp(tabs[t][i].name, name) == 0) {
				snprintf(buf, len, "; deprecated, to be removed in the next release: %s{code=\"%s\"}",
					 family[t], tabs[t][i].code);
				return buf;
			}
	return "";
}

static void stats_prom_codes(const struct stats *st, struct stats_w *out)
{
	stats_w_printf(out, "# HELP ringproxy_replies_total the proxy's own replies by status code "
			    "(\"other\": any other status)\n# TYPE ringproxy_replies_total counter\n");
	for (size_t i = 0; i < STATS_NCODES(stats_reply_codes); i++)
		stats_w_printf(out, "ringproxy_replies_total{code=\"%s\"} %llu\n", stats_reply_codes[i].code,
				    (unsigned long long)*(const uint64_t *)((const char *)st + stats_reply_codes[i].off));
	stats_w_printf(out, "# HELP ringproxy_backend_http_responses_total final responses from the backend "
			    "by status class\n# TYPE ringproxy_backend_http_responses_total counter\n");
	for (size_t b = 0; b < st->nbe; b++)
		for (size_t i = 0; i < STATS_NCODES(stats_response_codes); i++) {
			const char *parts[] = { "ringproxy_backend_http_responses_total{backend=\"", st->be[b].name,
						"\",code=\"", stats_response_codes[i].code, "\"}", NULL };

			stats_prom_u64(out, parts, *(const uint64_t *)((const char *)&st->be[b] +
								      stats_response_codes[i].off));
		}
}

/* ringproxy_backend_NAME{backend="BE"} v: v as "%.17g" prints it when
 * conv is 'g', as "%.6f" when 'f'. */
static void stats_prom_be_sample(struct stats_w *out, const char *name, const char *be, double v, char conv)
{
	char b[DECFMT_MAX + 1];
	char *e = conv == 'g' ? decfmt_g(b, v, 17) : decfmt_f(b, v, 6);

	stats_w_add(out, "ringproxy_backend_", 18);
	stats_w_add(out, name, strlen(name));
	stats_w_add(out, "{backend=\"", 10);
	stats_w_add(out, be, strlen(be));
	stats_w_add(out, "\"} ", 3);
	*e++ = '\n';
	stats_w_add(out, b, (size_t)(e - b));
}

/* The gauge ringproxy_backend_NAME of every backend: the double at off
 * in its struct stats_backend. */
static void stats_prom_be_double(const struct stats *st, struct stats_w *out, const char *name, const char *help,
				 size_t off)
{
	stats_w_printf(out, "# HELP ringproxy_backend_%s %s\n# TYPE ringproxy_backend_%s gauge\n", name, help, name);
	for (size_t i = 0; i < st->nbe; i++)
		stats_prom_be_sample(out, name, st->be[i].name, *(const double *)((const char *)&st->be[i] + off), 'g');
}

/* ringproxy_tls_certificate_expiry_seconds{file,name}: one sample per
 * name a certificate serves. */
static void stats_prom_certs(const struct stats *st, struct stats_w *out)
{
	time_t now = time(NULL);

	if (certs_count(st->certs) == 0)
		return;
	stats_w_printf(out, "# HELP ringproxy_tls_certificate_expiry_seconds seconds until the certificate "
			    "stops being valid (notAfter), per file and name it serves\n"
			    "# TYPE ringproxy_tls_certificate_expiry_seconds gauge\n");
	for (size_t i = 0; i < certs_count(st->certs); i++) {
		const char *n = certs_names(st->certs, i);
		char name[256];

		do {
			size_t len = strcspn(n, ",");

			snprintf(name, sizeof(name), "%.*s", (int)len, n);
			stats_w_add(out, "ringproxy_tls_certificate_expiry_seconds{", 41);
			stats_prom_label(out, "file", certs_file(st->certs, i), false);
			stats_prom_label(out, "name", name, true);
			stats_w_printf(out, "} %lld\n", (long long)(certs_not_after(st->certs, i) - now));
			n += len + (n[len] == ',');
		} while (*n);
	}
}

static void stats_prometheus_w(const struct stats *st, struct stats_w *out)
{
	char moved[160];

	stats_prom_info(st, out);
#define STATS_P(n, type, where, help) \
	stats_w_printf(out, "# HELP ringproxy_%s%s %s%s\n# TYPE ringproxy_%s%s %s\nringproxy_%s%s %llu\n", \
			    #n, stats_suffix(#type), help, stats_prom_moved(#n, moved, sizeof(moved)), #n, \
			    stats_suffix(#type), stats_ptype(#type), #n, stats_suffix(#type), (unsigned long long)st->n);
	STATS_PROXY(STATS_P)
#undef STATS_P
	stats_prom_certs(st, out);
	stats_prom_codes(st, out);
#define STATS_PH(n, help) \
	stats_w_printf(out, "# HELP ringproxy_%s_seconds %s\n# TYPE ringproxy_%s_seconds histogram\n", \
			    #n, help, #n); \
	stats_prom_hist(out, "ringproxy_" #n "_seconds", "", &st->n);
	STATS_HIST_PROXY(STATS_PH)
#undef STATS_PH
	if (st->has_cache) {
#define STATS_P(n, type, help) \
		stats_w_printf(out, "# HELP ringproxy_cache_%s%s %s\n# TYPE ringproxy_cache_%s%s %s\nringproxy_cache_%s%s %llu\n", \
				    #n, stats_suffix(#type), help, #n, stats_suffix(#type), #type, \
				    #n, stats_suffix(#type), (unsigned long long)st->cache.n);
		CACHE_STATS(STATS_P)
#undef STATS_P
		stats_w_printf(out, "# HELP ringproxy_cache_hit_ratio hits / (hits + misses + coalesced) since start\n"
				    "# TYPE ringproxy_cache_hit_ratio gauge\nringproxy_cache_hit_ratio %.6f\n",
				    st->cache_hit_ratio);
	}
	stats_w_printf(out, "# HELP ringproxy_ramp_in_progress 1 while a warm ramp moves keys to their new owners\n"
			    "# TYPE ringproxy_ramp_in_progress gauge\nringproxy_ramp_in_progress %d\n"
			    "# HELP ringproxy_ramp_switched_share share of the keys the last change moved that have "
			    "switched to their new owner (1 with no ramp)\n"
			    "# TYPE ringproxy_ramp_switched_share gauge\nringproxy_ramp_switched_share %.6f\n",
			    st->ramp_in_progress, st->ramp_rings ? st->ramp_switched : 1.0);
	stats_w_printf(out, "# HELP ringproxy_reload_moved_share share of the keyspace the last successful "
			    "reload gave another owner (0 before any)\n# TYPE ringproxy_reload_moved_share gauge\n"
			    "ringproxy_reload_moved_share %.17g\n", st->reload_moved);
	stats_w_printf(out, "# HELP ringproxy_tier_hit_ratio the backends' own caches: hits / (hits + misses) "
			    "since start (0 before any)\n# TYPE ringproxy_tier_hit_ratio gauge\nringproxy_tier_hit_ratio %.6f\n"
			    "# HELP ringproxy_tier_origin_fetches_per_second misses of the backends' own caches per "
			    "second over the last 5 minutes\n# TYPE ringproxy_tier_origin_fetches_per_second gauge\n"
			    "ringproxy_tier_origin_fetches_per_second %.6f\n",
			    st->tier_hit_ratio < 0 ? 0 : st->tier_hit_ratio, st->tier_fetches_5m);
	stats_w_printf(out, "# HELP ringproxy_backend_tier_hit_ratio the backend's own cache: hits / (hits + "
			    "misses) since start (0 before any)\n# TYPE ringproxy_backend_tier_hit_ratio gauge\n");
	for (size_t i = 0; i < st->nbe; i++)
		stats_prom_be_sample(out, "tier_hit_ratio", st->be[i].name,
				     st->be[i].tier_hit_ratio < 0 ? 0 : st->be[i].tier_hit_ratio, 'f');
	stats_prom_be_double(st, out, "share", "exact share of the keyspace the backend owns",
			     offsetof(struct stats_backend, share));
	stats_prom_be_double(st, out, "weight", "configured weight", offsetof(struct stats_backend, weight));
	stats_prom_be_double(st, out, "ring_weight", "the weight the ring gives the backend now: the file's, or its "
			     "runtime weight, 0 while draining or in maintenance (ringproxy ctl)",
			     offsetof(struct stats_backend, ring_weight));
	stats_w_printf(out, "# HELP ringproxy_backend_admin_state 1 for the backend's runtime state (ready, drain, "
			    "maint: ringproxy ctl), 0 for the others\n# TYPE ringproxy_backend_admin_state gauge\n");
	for (size_t i = 0; i < st->nbe; i++)
		for (int k = 0; k < RUNSTATE_N; k++) {
			const char *parts[] = { "ringproxy_backend_admin_state{backend=\"", st->be[i].name,
						"\",state=\"", runstate_name(k), "\"}", NULL };

			stats_prom_u64(out, parts, strcmp(st->be[i].admin_state, runstate_name(k)) == 0);
		}
	stats_w_printf(out, "# HELP ringproxy_backend_drain_progress share of a drain's window gone by, and so of "
			    "its keys moved to their next owners (absent: not draining)\n"
			    "# TYPE ringproxy_backend_drain_progress gauge\n");
	for (size_t i = 0; i < st->nbe; i++)
		if (st->be[i].drain_progress >= 0)
			stats_prom_be_sample(out, "drain_progress", st->be[i].name, st->be[i].drain_progress, 'f');
	/* backend names are [A-Za-z0-9._-] (conf.c): no label escaping */
#define STATS_P(n, type, where, help) \
	stats_w_printf(out, "# HELP ringproxy_backend_%s%s %s%s\n# TYPE ringproxy_backend_%s%s %s\n", \
			    #n, stats_suffix(#type), help, stats_prom_moved(#n, moved, sizeof(moved)), #n, \
			    stats_suffix(#type), stats_ptype(#type)); \
	for (size_t i = 0; i < st->nbe; i++) { \
		const char *parts[] = { "ringproxy_backend_" #n, stats_suffix(#type), "{backend=\"", \
					st->be[i].name, "\"}", NULL }; \
		stats_prom_u64(out, parts, st->be[i].n); \
	}
	STATS_BACKEND(STATS_P)
#undef STATS_P
	stats_w_printf(out, "# HELP ringproxy_backend_last_check_duration_seconds how long the last active "
			    "health check took (absent: none ran)\n"
			    "# TYPE ringproxy_backend_last_check_duration_seconds gauge\n");
	for (size_t i = 0; i < st->nbe; i++)
		if (st->be[i].checked)
			stats_prom_be_sample(out, "last_check_duration_seconds", st->be[i].name,
					     st->be[i].check_seconds, 'f');
#define STATS_PH(n, help) \
	stats_w_printf(out, "# HELP ringproxy_backend_%s_seconds %s\n" \
			    "# TYPE ringproxy_backend_%s_seconds histogram\n", #n, help, #n); \
	for (size_t i = 0; i < st->nbe; i++) { \
		char label[300]; \
		snprintf(label, sizeof(label), "backend=\"%s\",", st->be[i].name); \
		stats_prom_hist(out, "ringproxy_backend_" #n "_seconds", label, &st->be[i].n); \
	}
	STATS_HIST_BACKEND(STATS_PH)
#undef STATS_PH
}

/* The public renderings: a 64 KiB gathering buffer on the main thread's
 * stack. */
#define STATS_RENDER(fn) \
	void fn(const struct stats *st, struct evbuffer *out) \
	{ \
		char b[65536]; \
		struct stats_w w = { out, b, 0, sizeof(b) }; \
		fn##_w(st, &w); \
		stats_w_flush(&w); \
	}
STATS_RENDER(stats_json)
STATS_RENDER(stats_ring_json)
STATS_RENDER(stats_prometheus)
#undef STATS_RENDER
