/*
 * test-stats.c -- stats.c: every counter of the lists in stats-t.h is
 * collected from where the list says it is kept (the proxy's and the
 * registry's atomics, the sum over workers' pools, or derived) and appears
 * in every rendering: JSON, Prometheus (with # HELP and # TYPE) and the
 * HTML page. Values are distinct per counter, so a counter read from the
 * wrong place or rendered under the wrong name is caught; the checks are
 * generated from the same lists, so a counter added there is checked too.
 */
#include "config/conf.h"
#include "base/log.h"
#include "proxy.h"
#include "backend/registry.h"
#include "backend/snapshot.h"
#include "admin/page.h"
#include "admin/stats.h"
#include "tap.h"
#include "path/worker.h"

#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The text of a rendering, NUL-terminated (caller frees). */
static char *test_text(struct evbuffer *b)
{
	size_t n = evbuffer_get_length(b);
	char *s = malloc(n + 1);

	evbuffer_remove(b, s, n);
	s[n] = '\0';
	return s;
}

static int test_has(const char *text, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int test_has(const char *text, const char *fmt, ...)
{
	char want[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(want, sizeof(want), fmt, ap);
	va_end(ap);
	return strstr(text, want) != NULL;
}

/* A value as the JSON writes its type. */
static const char *test_val(const char *type, uint64_t v)
{
	static char buf[8][32];
	static int k;

	k = (k + 1) % 8;
	if (strcmp(type, "flag") == 0)
		return v ? "true" : "false";
	snprintf(buf[k], sizeof(buf[k]), "%llu", (unsigned long long)v);
	return buf[k];
}

static const char *test_ptype(const char *type)
{
	return strcmp(type, "flag") == 0 ? "gauge" : type;
}

/* Count occurrences of needle in text. */
static int test_count(const char *text, const char *needle)
{
	int n = 0;

	for (const char *p = text; (p = strstr(p, needle)) != NULL; p++)
		n++;
	return n;
}

/* The row of backend name in page text ("" when none), cut at its end. */
static const char *test_row(const char *text, const char *name, char *buf, size_t len)
{
	char head[128];
	const char *a, *b;

	snprintf(head, sizeof(head), "<tr class=\"backend\" data-backend=\"%s\"", name);
	a = strstr(text, head);
	b = a ? strstr(a, "</tr>") : NULL;
	snprintf(buf, len, "%.*s", a && b ? (int)(b - a) : 0, a ? a : "");
	return buf;
}

/* What an operator reads on the page: the headline rate with a cache that
 * answers most requests, the bounded-load cap only when it bites, a down
 * backend without its last rates, the up count in amber, a warm ramp's
 * and a drain's progress, a ramp's words gone from the list once it has
 * ended, and the ctl changes in that list. */
static void test_page_words(struct stats *st)
{
	struct evbuffer *out = evbuffer_new();
	struct proxy_reload rl = { .ok = true, .seq = 1 }, ctl = { .ok = true, .seq = 2 };
	struct timespec ts;
	long long now_ms;
	char row[8192], *text;
	const char *words = "; ramping over 5m";

	clock_gettime(CLOCK_REALTIME, &ts);
	now_ms = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	st->has_cache = true;
	st->cache.hits = 5880;
	st->cache.misses = 120;
	st->rate[STATS_WIN_10][RATES_P_client_requests] = 6000;
	st->rate[STATS_WIN_10][RATES_P_requests] = 120;
	st->rate[STATS_WIN_10][RATES_P_cache_answers] = 5880;
	st->be[0].up = 1;
	st->be[0].state = "up";
	st->be[0].cap = 2;
	st->be[0].drain_progress = -1;
	st->be[1].up = 0;
	st->be[1].state = "down";
	st->be[1].cap = 2;
	st->be[1].rate[STATS_WIN_10][RATES_B_requests] = 40;
	st->be[1].rate[STATS_WIN_300][RATES_B_requests] = 40;
	st->be[1].drain_progress = 0.4;
	st->be[1].drain_end = (double)(now_ms + 182500) / 1000;
	st->ramp_rings = 2;
	st->ramp_in_progress = 1;
	st->ramp_switched = 0.36;
	st->ramp_end_ms = now_ms + 76500;
	/* a reload whose ramp has ended, and a ctl change after it */
	rl.when = ts.tv_sec - 600;
	snprintf(rl.text, sizeof(rl.text), "reload 2: +b1; 50%% of keys moved%s; settings: log_level info -> debug",
		 words);
	rl.ramp_at = (size_t)(strstr(rl.text, words) - rl.text);
	rl.ramp_len = strlen(words);
	rl.ramp_end_ms = now_ms - 300000;
	ctl.when = ts.tv_sec - 10;
	snprintf(ctl.text, sizeof(ctl.text), "ctl drain b1 over 5m: 50%% of keys moved; ramping over 5m");
	st->reloads[0] = &rl;
	st->nreloads = 1;
	st->ctls[0] = &ctl;
	st->nctls = 1;
	page_html(st, out);
	text = test_text(out);
	tap_ok(test_has(text, "<span>Client requests per second, last 10 s</span><b>6000</b><small>"
			"<span class=\"sent\">120 sent to the caches</span>"
			"<span class=\"answered\">98.0%% answered by its own cache</span>"),
	       "the headline is what clients ask (6000/s), with the 120/s sent to the caches and the cache's 98.0%% under it");
	tap_ok(test_has(text, "<div class=\"tile amber\" id=\"t-up\"><span>Backends up</span><b>1 of 2</b>"),
	       "1 of 2 up: the tile is amber");
	test_row(text, "b0", row, sizeof(row));
	if (!tap_ok(strstr(row, "cap grows with load") && !strstr(row, "spills at") &&
		    strstr(row, "no requests in 5 min") && !strstr(row, ">0.0%"),
		    "an idle backend: 'cap grows with load', 'no requests', no 0.0%% error rate"))
		fprintf(stderr, "# %s\n", row);
	test_row(text, "b1", row, sizeof(row));
	tap_ok(strstr(row, "down: no traffic") && !strstr(row, ">40<") && !strstr(row, ">0.0%"),
	       "a down backend shows no last rates and no error rate");
	tap_ok(test_has(text, "<p class=\"progress\" id=\"ramp\">ramp: 36%% of moved keys switched, 1 min 17 s left</p>"),
	       "a warm ramp in progress: its line with the share switched and the time left");
	tap_ok(test_has(text, "drain b1: 40%% of its keys moved to their next owners, 3 min 3 s left</p>") &&
	       strstr(row, "draining: 40% of its keys gone to their next owners, 3 min 3 s left"),
	       "a drain in progress: its line and its row say how far and how long");
	if (!tap_ok(test_has(text, "reload 2: +b1; 50%% of keys moved; settings: log_level info -&gt; debug "
			     "<small class=\"ramped\">(its warm ramp has ended)</small>") &&
		    !test_has(text, "50%% of keys moved; ramping over 5m; settings"),
		    "a reload whose ramp has ended: its 'ramping over' is gone from the list"))
		fprintf(stderr, "# %s\n", strstr(text, "<ul class=\"reloads\">"));
	tap_ok(test_has(text, "<b>changed</b> ctl drain b1 over 5m") &&
	       strstr(text, "ctl drain b1") < strstr(text, "reload 2: +b1"),
	       "a ctl change is in the list of changes, newest first");
	free(text);
	st->be[0].rate[STATS_WIN_300][RATES_B_spilled_away] = 2.5;
	st->be[0].rate[STATS_WIN_300][RATES_B_requests] = 10;
	st->be[1].up = 1;
	st->be[1].state = "up";
	st->ramp_in_progress = 0;
	page_html(st, out);
	text = test_text(out);
	test_row(text, "b0", row, sizeof(row));
	tap_ok(strstr(row, "spills at 2 in flight") && strstr(row, "2.50/s sent on") && !strstr(row, "cap grows"),
	       "a cap that bit in the last 5 minutes: 'spills at 2 in flight', and how much it sent on");
	tap_ok(test_has(text, "<div class=\"tile\" id=\"t-up\">") && !test_has(text, "id=\"ramp\""),
	       "all up: the tile is not amber; no ramp line after the ramp");
	free(text);
	st->nreloads = st->nctls = 0;
	evbuffer_free(out);
}

/* The page's ring for a ring of one backend, and for one with more runs
 * than PAGE_MAX_ARCS (drawn in half-degree steps). */
static void test_page_ring(const char *ini, int want_binned, const char *what)
{
	struct conf_errors errs = { 0 };
	struct conf *c = conf_load_string("r.ini", ini, &errs);
	struct snapshot *s;
	struct proxy p;
	struct stats st;
	struct evbuffer *out = evbuffer_new();
	char err[256], *text;
	size_t runs;

	conf_errors_free(&errs);
	s = c ? snapshot_new(c, 1, err, sizeof(err)) : NULL;
	if (!tap_ok(s != NULL, "%s: snapshot", what))
		return;
	memset(&p, 0, sizeof(p));
	p.current = s;
	runs = page_runs(s->ring);
	if (stats_collect(&st, &p) == 0) {
		page_html(&st, out);
		text = test_text(out);
		if (want_binned)
			tap_ok(runs > PAGE_MAX_ARCS && test_count(text, "class=\"arc binned\"") > 0 &&
			       test_count(text, "class=\"arc binned\"") <= 720 && !test_count(text, "class=\"arc\""),
			       "%s: %zu runs drawn in at most 720 half-degree steps", what, runs);
		else
			tap_ok(runs == 1 && test_count(text, "class=\"arc\"") == 1 && test_count(text, " A 112.0 112.0 0 1 1 ") == 2,
			       "%s: one run, drawn as a whole circle", what);
		free(text);
		stats_free(&st);
	}
	evbuffer_free(out);
	snapshot_unref(s);
}

int main(void)
{
	struct conf_errors errs = { 0 };
	struct conf *c = conf_load_string("s.ini", "[backend b0]\nurl = http://127.0.0.1:9100\n"
					  "[backend b1]\nurl = http://127.0.0.1:9101\n", &errs);
	struct proxy p;
	struct worker *w[2];
	struct snapshot *s;
	struct stats st;
	struct evbuffer *out = evbuffer_new();
	char err[256], *text;
	uint64_t v;

	log_set_level(LOG_ERROR);
	conf_errors_free(&errs);
	s = c ? snapshot_new(c, 1, err, sizeof(err)) : NULL;
	if (!tap_ok(s != NULL && out != NULL, "a snapshot of two backends"))
		return tap_done();
	memset(&p, 0, sizeof(p));
	p.current = s;
	p.started = time(NULL) - 42;
	p.started_ms = registry_now_ms() - 42000;     /* uptime is on the monotonic clock */
	p.generation = 7;
	p.conf_loaded = 1700000000;
	atomic_store(&p.nconns, 3);
	/* two workers, for the sums over their counters and pools */
	for (int k = 0; k < 2; k++)
		w[k] = calloc(1, sizeof(*w[k]));
	p.workers = w;
	p.nworkers = 2;

	/* a distinct value per counter: 100, 101, ... for the proxy (a WORKER
	 * one's k + 10 on worker 0 and k + 20 on worker 1); backend
	 * i's SHARED counters 1000 * (i + 1) + k; its WORKER ones k + 10 on
	 * worker 0 and k + 20 on worker 1 */
	v = 100;
#define SET(n, type, where, help) SET_##where(n)
#define SET_SHARED(n) atomic_store(&p.n, v); v++;
#define SET_WORKER(n) atomic_store(&w[0]->n, v + 10); atomic_store(&w[1]->n, v + 20); v++;
#define SET_DERIVED(n) v++;
	STATS_PROXY(SET)
#undef SET_SHARED
#undef SET_WORKER
#undef SET_DERIVED
#undef SET
	for (size_t i = 0; i < s->nbe; i++) {
		struct backend *b = s->be[i].state;
		struct pool *pl0 = worker_pool(w[0], b->id), *pl1 = worker_pool(w[1], b->id);

		v = 1000 * (i + 1);
#define SET(n, type, where, help) SET_##where(n) v++;
#define SET_SHARED(n) atomic_store(&b->n, v);
#define SET_WORKER(n) atomic_store(&pl0->n, v + 10); atomic_store(&pl1->n, v + 20);
#define SET_DERIVED(n)
		STATS_BACKEND(SET)
#undef SET_SHARED
#undef SET_WORKER
#undef SET_DERIVED
#undef SET
	}
	atomic_store(&s->be[1].state->down, 1);
	atomic_store(&s->be[0].state->inflight, 5);
	atomic_store(&registry_total_inflight, 5);

	/* histograms: b1's response times, 90 of 300 us on worker 0 and 10
	 * of 3 ms on worker 1; the requests' the same on the workers */
	for (int i = 0; i < 100; i++) {
		struct pool *pl = worker_pool(w[i < 90 ? 0 : 1], s->be[1].state->id);

		worker_hist(&pl->response, i < 90 ? 300 : 3000);
		worker_hist(&w[i < 90 ? 0 : 1]->request, i < 90 ? 300 : 3000);
	}

	if (!tap_ok(stats_collect(&st, &p) == 0, "stats_collect"))
		return tap_done();
	tap_ok(st.be[1].response.count == 100 && st.be[1].response.sum_us == 57000 &&
	       st.be[0].response.count == 0 && st.request.count == 100,
	       "histograms summed over the workers");
	tap_ok(st.be[1].response.p50 > 0.000388 && st.be[1].response.p50 < 0.000389,
	       "p50 interpolated in its bucket (250-500 us): 388.9 us (%g)", st.be[1].response.p50);
	tap_ok(st.be[1].response.p99 > 0.004749 && st.be[1].response.p99 < 0.004751,
	       "p99 interpolated in its bucket (2.5-5 ms): 4.75 ms (%g)", st.be[1].response.p99);
	tap_ok(st.be[0].response.p50 == 0, "an empty histogram reads 0");
	tap_ok(st.uptime_seconds >= 42 && st.uptime_seconds < 60, "uptime_seconds derived from the start time");
	tap_is_int(st.generation, 7, "generation derived from the proxy");
	tap_is_int(st.connections, 3, "connections derived from the open count");
	tap_is_int(st.inflight, 5, "inflight derived from the registry total");
	v = 100;
#define CHECK(n, type, where, help) CHECK_##where(n) v++;
#define CHECK_SHARED(n) tap_is_int(st.n, v, "proxy " #n " collected from the proxy's atomic");
#define CHECK_WORKER(n) tap_is_int(st.n, 2 * v + 30, "proxy " #n " summed over the workers");
#define CHECK_DERIVED(n)
	STATS_PROXY(CHECK)
#undef CHECK_SHARED
#undef CHECK_WORKER
#undef CHECK_DERIVED
#undef CHECK
	for (size_t i = 0; i < s->nbe; i++) {
		const struct stats_backend *o = &st.be[i];

		v = 1000 * (i + 1);
#define CHECK(n, type, where, help) CHECK_##where(n) v++;
#define CHECK_SHARED(n) tap_is_int(o->n, v, "%s " #n " collected from the registry", o->name);
#define CHECK_WORKER(n) tap_is_int(o->n, 2 * v + 30, "%s " #n " summed over the workers", o->name);
#define CHECK_DERIVED(n)
		STATS_BACKEND(CHECK)
#undef CHECK_SHARED
#undef CHECK_WORKER
#undef CHECK_DERIVED
#undef CHECK
	}
	tap_ok(st.be[0].up == 1 && st.be[1].up == 0, "up derived from the health state");
	tap_ok(st.be[0].inflight == 5 && st.be[1].inflight == 0, "inflight derived from the registry");

	/* every counter in every rendering, under its name, with its value */
	stats_json(&st, out);
	text = test_text(out);
#define J(n, type, where, help) \
	tap_ok(test_has(text, "\"" #n "\": %s", test_val(#type, st.n)), "JSON has " #n);
	STATS_PROXY(J)
#undef J
#define J(n, type, where, help) \
	tap_ok(test_has(text, "\"" #n "\": %s", test_val(#type, st.be[1].n)), "JSON has backend " #n);
	STATS_BACKEND(J)
#undef J
	tap_ok(test_has(text, "\"up\": true") && test_has(text, "\"up\": false") && !test_has(text, "\"up\": 1"),
	       "JSON spells up as true/false");
	tap_ok(test_has(text, "\"build\": {\"version\": \"" RINGPROXY_VERSION "\", \"libevent\": \"2."),
	       "JSON has the build: version and libraries");
	/* the config was made from text: no s.ini to read */
	tap_ok(test_has(text, "\"config\": {\"path\": \"s.ini\", \"sha256\": \"%s\", \"loaded\": 1700000000, "
			"\"on_disk\": \"unreadable\"}", s->conf->sha256),
	       "JSON has the config's path, hash, load time and whether the file is still it");
	tap_ok(test_has(text, "\"rates\": {\"10s\": {\"accepted\": 0, \"requests\": 0, \"errors\": 0, "
			 "\"tier_hits\": 0, \"tier_misses\": 0, \"client_requests\": 0, \"cache_answers\": 0}, "
			 "\"5m\": {"),
	       "JSON has the proxy's rates over 10 s and 5 min");
	tap_ok(test_has(text, "\"state\": \"down\""), "JSON has a backend's state in a word");
	free(text);
	stats_ring_json(&st, out);
	text = test_text(out);
	tap_ok(test_has(text, "\"up\": true") && test_has(text, "\"up\": false"), "/ring spells up the same way");
	free(text);
	stats_prometheus(&st, out);
	text = test_text(out);
	/* HELP is the help text, then (a name with a code in it) where its
	 * series went */
#define P(n, type, where, help) \
	tap_ok(test_has(text, "# HELP ringproxy_" #n "%s " help, #type[0] == 'c' ? "_total" : "") && \
	       test_has(text, "\n# TYPE ringproxy_" #n "%s %s\n" \
			"ringproxy_" #n "%s %llu\n", \
			#type[0] == 'c' ? "_total" : "", test_ptype(#type), #type[0] == 'c' ? "_total" : "", \
			(unsigned long long)st.n), "Prometheus has " #n " with HELP and TYPE");
	STATS_PROXY(P)
#undef P
	tap_ok(test_has(text, "# HELP ringproxy_replies_400_total the proxy's own 400 replies (a request it could not "
			"parse); deprecated, to be removed in the next release: ringproxy_replies_total{code=\"400\"}\n") &&
	       test_has(text, "# TYPE ringproxy_replies_total counter\nringproxy_replies_total{code=\"400\"} %llu\n",
			(unsigned long long)st.replies_400) &&
	       test_has(text, "ringproxy_replies_total{code=\"other\"} %llu\n", (unsigned long long)st.replies_other) &&
	       test_has(text, "ringproxy_backend_http_responses_total{backend=\"b1\",code=\"2xx\"} %llu\n"
			"ringproxy_backend_http_responses_total{backend=\"b1\",code=\"3xx\"} %llu\n",
			(unsigned long long)st.be[1].responses_2xx, (unsigned long long)st.be[1].responses_3xx),
	       "Prometheus: statuses as a code label; the old names say where their series went");
#define P(n, type, where, help) \
	tap_ok(test_has(text, "# HELP ringproxy_backend_" #n "%s " help, #type[0] == 'c' ? "_total" : "") && \
	       test_has(text, "\n# TYPE ringproxy_backend_" #n "%s %s\n", \
			#type[0] == 'c' ? "_total" : "", test_ptype(#type)) && \
	       test_has(text, "ringproxy_backend_" #n "%s{backend=\"b1\"} %llu\n", #type[0] == 'c' ? "_total" : "", \
			(unsigned long long)st.be[1].n), "Prometheus has backend " #n " with HELP and TYPE");
	STATS_BACKEND(P)
#undef P
	tap_ok(test_has(text, "ringproxy_build_info{version=\"" RINGPROXY_VERSION "\",libevent=\"2.") &&
	       test_has(text, "ringproxy_config_info{path=\"s.ini\",sha256=\"%s\"} 1\n", s->conf->sha256) &&
	       test_has(text, "ringproxy_config_loaded_timestamp_seconds 1700000000\n"),
	       "Prometheus has the build and the config");
	tap_ok(test_has(text, "# TYPE ringproxy_backend_response_seconds histogram\n") &&
	       test_has(text, "ringproxy_backend_response_seconds_bucket{backend=\"b1\",le=\"0.00025\"} 0\n") &&
	       test_has(text, "ringproxy_backend_response_seconds_bucket{backend=\"b1\",le=\"0.0005\"} 90\n") &&
	       test_has(text, "ringproxy_backend_response_seconds_bucket{backend=\"b1\",le=\"0.0025\"} 90\n") &&
	       test_has(text, "ringproxy_backend_response_seconds_bucket{backend=\"b1\",le=\"0.005\"} 100\n") &&
	       test_has(text, "ringproxy_backend_response_seconds_bucket{backend=\"b1\",le=\"+Inf\"} 100\n") &&
	       test_has(text, "ringproxy_backend_response_seconds_sum{backend=\"b1\"} 0.057000\n") &&
	       test_has(text, "ringproxy_backend_response_seconds_count{backend=\"b1\"} 100\n") &&
	       test_has(text, "ringproxy_request_seconds_bucket{le=\"0.0005\"} 90\n") &&
	       test_has(text, "ringproxy_request_seconds_count 100\n"),
	       "Prometheus histograms: cumulative buckets, _sum in seconds, _count");
	tap_ok(test_has(text, "ringproxy_backend_up{backend=\"b0\"} 1\n") &&
	       test_has(text, "ringproxy_backend_up{backend=\"b1\"} 0\n"), "Prometheus has up as a 0/1 gauge");
	free(text);
	page_html(&st, out);
	text = test_text(out);
#define H(n, type, where, help) \
	tap_ok(test_has(text, "<tr data-counter=\"" #n "\"><td class=\"l\">" help "</td><td>%llu</td></tr>", \
			(unsigned long long)st.n), "the page has " #n ", labelled in words");
	STATS_PROXY(H)
#undef H
#define H(n, type, where, help) \
	tap_ok(test_has(text, "<tr data-counter=\"backend_" #n "\"><td class=\"l\">" help "</td>"), \
	       "the page has a row for backend " #n ", labelled in words");
	STATS_BACKEND(H)
#undef H
	tap_ok(test_has(text, "<tr class=\"backend\" data-backend=\"b1\" data-state=\"down\">"),
	       "the page has a row per backend with its state");
	free(text);
	test_page_words(&st);

	stats_free(&st);
	evbuffer_free(out);
	test_page_ring("[backend only]\nurl = http://127.0.0.1:9100\n", 0, "one backend");
	test_page_ring("[ring]\nvnodes = 2000\n[backend b0]\nurl = http://127.0.0.1:9100\n"
		       "[backend b1]\nurl = http://127.0.0.1:9101\n[backend b2]\nurl = http://127.0.0.1:9102\n",
		       1, "6000 points");
	for (int k = 0; k < 2; k++) {
		for (uint32_t ci = 0; ci < WORKER_POOL_CHUNKS; ci++)
			free(atomic_load(&w[k]->pool_chunks[ci]));
		free(w[k]);
	}
	snapshot_unref(s);
	registry_free();
	return tap_done();
}
