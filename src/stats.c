/*
 * stats.c -- collecting and rendering the counters listed in stats-t.h.
 * Main thread only (the admin listener). Reads shared state without
 * stopping anyone: registry counters are atomics, per-worker counters have
 * a single writer and are read with relaxed loads, so a reading is a
 * consistent-enough snapshot, not a transaction.
 */
#include "stats.h"

#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proxy.h"
#include "registry.h"
#include "snapshot.h"
#include "worker.h"

/* The DERIVED values of stats-t.h: one function each, named after the
 * scope and the counter. */
static uint64_t stats_proxy_uptime_seconds(const struct proxy *p)
{
	return (uint64_t)(time(NULL) - p->started);
}

static uint64_t stats_proxy_generation(const struct proxy *p)
{
	return p->generation;
}

static uint64_t stats_proxy_connections(const struct proxy *p)
{
	return atomic_load(&p->nconns);
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

static uint64_t stats_backend_inflight(const struct backend *b)
{
	long n = atomic_load(&b->inflight);

	return n > 0 ? (uint64_t)n : 0;
}

/* Reading one value by where it is kept (stats-t.h). */
#define STATS_PROXY_GET(n, type, where, help) STATS_PROXY_GET_##where(n)
#define STATS_PROXY_GET_SHARED(n) st->n = atomic_load(&p->n);
#define STATS_PROXY_GET_DERIVED(n) st->n = stats_proxy_##n(p);

#define STATS_BACKEND_GET(n, type, where, help) STATS_BACKEND_GET_##where(n)
#define STATS_BACKEND_GET_SHARED(n) o->n = atomic_load_explicit(&b->n, memory_order_relaxed);
#define STATS_BACKEND_GET_WORKER(n)
#define STATS_BACKEND_GET_DERIVED(n) o->n = stats_backend_##n(b);

#define STATS_BACKEND_SUM(n, type, where, help) STATS_BACKEND_SUM_##where(n)
#define STATS_BACKEND_SUM_SHARED(n)
#define STATS_BACKEND_SUM_WORKER(n) o->n += atomic_load_explicit(&pool->n, memory_order_relaxed);
#define STATS_BACKEND_SUM_DERIVED(n)

/* One backend's counters: the registry's, then each worker's summed. */
static void stats_collect_backend(struct stats_backend *o, const struct backend *b,
				  const struct proxy *p)
{
	STATS_BACKEND(STATS_BACKEND_GET)
	for (unsigned w = 0; w < p->nworkers; w++) {
		const struct pool *pool = worker_pool_peek(p->workers[w], b->id);

		if (!pool)
			continue;
		STATS_BACKEND(STATS_BACKEND_SUM)
	}
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
	st->vnodes = s->conf->vnodes;
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
	}
	free(share);
	return 0;
}

void stats_free(struct stats *st)
{
	free(st->be);
	st->be = NULL;
	st->nbe = 0;
}

/* ---- rendering ---------------------------------------------------------- */

static void stats_json_str(struct evbuffer *out, const char *s)
{
	evbuffer_add(out, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			evbuffer_add_printf(out, "\\%c", c);
		else if (c < 0x20)
			evbuffer_add_printf(out, "\\u%04x", c);
		else
			evbuffer_add(out, s, 1);
	}
	evbuffer_add(out, "\"", 1);
}

static void stats_html_str(struct evbuffer *out, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<': evbuffer_add(out, "&lt;", 4); break;
		case '>': evbuffer_add(out, "&gt;", 4); break;
		case '&': evbuffer_add(out, "&amp;", 5); break;
		case '"': evbuffer_add(out, "&quot;", 6); break;
		default: evbuffer_add(out, s, 1); break;
		}
	}
}

void stats_json(const struct stats *st, struct evbuffer *out)
{
	evbuffer_add(out, "{", 1);
#define STATS_J(n, type, where, help) evbuffer_add_printf(out, "\"" #n "\": %llu, ", (unsigned long long)st->n);
	STATS_PROXY(STATS_J)
#undef STATS_J
	evbuffer_add_printf(out, "\"vnodes\": %u, \"points\": %zu, \"last_reload\": ", st->vnodes, st->npoints);
	if (st->reload_time) {
		evbuffer_add_printf(out, "{\"time\": %lld, \"ok\": %s, \"moved_share\": %.17g, \"report\": ",
				    st->reload_time, st->reload_ok ? "true" : "false", st->reload_ok ? st->reload_moved : 0.0);
		stats_json_str(out, st->reload_text);
		evbuffer_add(out, "}", 1);
	} else {
		evbuffer_add(out, "null", 4);
	}
	evbuffer_add(out, ", \"ramp\": ", 10);
	if (st->ramp_rings)
		evbuffer_add_printf(out, "{\"in_progress\": %s, \"start\": %.3f, \"end\": %.3f, \"seconds\": %.3f, "
				    "\"switched_share\": %.6f, \"moved_share\": %.17g, \"rings\": %zu}",
				    st->ramp_in_progress ? "true" : "false", (double)st->ramp_start_ms / 1000,
				    (double)st->ramp_end_ms / 1000,
				    (double)(st->ramp_end_ms - st->ramp_start_ms) / 1000, st->ramp_switched,
				    st->ramp_moved, st->ramp_rings);
	else
		evbuffer_add(out, "null", 4);
	evbuffer_add(out, ", \"backends\": [", 15);
	for (size_t i = 0; i < st->nbe; i++) {
		const struct stats_backend *b = &st->be[i];

		evbuffer_add(out, i ? ", {\"name\": " : "{\"name\": ", i ? 11 : 9);
		stats_json_str(out, b->name);
		evbuffer_add(out, ", \"url\": ", 9);
		stats_json_str(out, b->url);
		evbuffer_add_printf(out, ", \"weight\": %.17g, \"points\": %u, \"share\": %.17g",
				    b->weight, b->points, b->share);
#define STATS_J(n, type, where, help) evbuffer_add_printf(out, ", \"" #n "\": %llu", (unsigned long long)b->n);
		STATS_BACKEND(STATS_J)
#undef STATS_J
		evbuffer_add(out, "}", 1);
	}
	evbuffer_add(out, "]}\n", 3);
}

void stats_ring_json(const struct stats *st, struct evbuffer *out)
{
	evbuffer_add_printf(out, "{\"vnodes\": %u, \"points\": %zu, \"backends\": [", st->vnodes, st->npoints);
	for (size_t i = 0; i < st->nbe; i++) {
		const struct stats_backend *b = &st->be[i];

		evbuffer_add(out, i ? ", {\"name\": " : "{\"name\": ", i ? 11 : 9);
		stats_json_str(out, b->name);
		evbuffer_add_printf(out, ", \"weight\": %.17g, \"points\": %u, \"share\": %.17g, \"up\": %s}",
				    b->weight, b->points, b->share, b->up ? "true" : "false");
	}
	evbuffer_add(out, "]}\n", 3);
}

/* Prometheus counters are named *_total. */
static const char *stats_suffix(const char *type)
{
	return strcmp(type, "counter") == 0 ? "_total" : "";
}

void stats_prometheus(const struct stats *st, struct evbuffer *out)
{
#define STATS_P(n, type, where, help) \
	evbuffer_add_printf(out, "# HELP ringproxy_%s%s %s\n# TYPE ringproxy_%s%s %s\nringproxy_%s%s %llu\n", \
			    #n, stats_suffix(#type), help, #n, stats_suffix(#type), #type, \
			    #n, stats_suffix(#type), (unsigned long long)st->n);
	STATS_PROXY(STATS_P)
#undef STATS_P
	evbuffer_add_printf(out, "# HELP ringproxy_ramp_in_progress 1 while a warm ramp moves keys to their new owners\n"
			    "# TYPE ringproxy_ramp_in_progress gauge\nringproxy_ramp_in_progress %d\n"
			    "# HELP ringproxy_ramp_switched_share share of the keys the last change moved that have "
			    "switched to their new owner (1 with no ramp)\n"
			    "# TYPE ringproxy_ramp_switched_share gauge\nringproxy_ramp_switched_share %.6f\n",
			    st->ramp_in_progress, st->ramp_rings ? st->ramp_switched : 1.0);
	evbuffer_add_printf(out, "# HELP ringproxy_backend_share exact share of the keyspace the backend owns\n"
			    "# TYPE ringproxy_backend_share gauge\n");
	for (size_t i = 0; i < st->nbe; i++)
		evbuffer_add_printf(out, "ringproxy_backend_share{backend=\"%s\"} %.17g\n", st->be[i].name,
				    st->be[i].share);
	evbuffer_add_printf(out, "# HELP ringproxy_backend_weight configured weight\n"
			    "# TYPE ringproxy_backend_weight gauge\n");
	for (size_t i = 0; i < st->nbe; i++)
		evbuffer_add_printf(out, "ringproxy_backend_weight{backend=\"%s\"} %.17g\n", st->be[i].name,
				    st->be[i].weight);
	/* backend names are [A-Za-z0-9._-] (conf.c): no label escaping */
#define STATS_P(n, type, where, help) \
	evbuffer_add_printf(out, "# HELP ringproxy_backend_%s%s %s\n# TYPE ringproxy_backend_%s%s %s\n", \
			    #n, stats_suffix(#type), help, #n, stats_suffix(#type), #type); \
	for (size_t i = 0; i < st->nbe; i++) \
		evbuffer_add_printf(out, "ringproxy_backend_%s%s{backend=\"%s\"} %llu\n", #n, \
				    stats_suffix(#type), st->be[i].name, (unsigned long long)st->be[i].n);
	STATS_BACKEND(STATS_P)
#undef STATS_P
}

/* A column head: words rather than an identifier, so it can wrap. */
static void stats_html_th(struct evbuffer *out, const char *name, const char *help)
{
	evbuffer_add_printf(out, "<th title=\"%s\">", help);
	for (const char *p = name; *p; p++)
		evbuffer_add(out, *p == '_' ? " " : p, 1);
	evbuffer_add(out, "</th>", 5);
}

void stats_html(const struct stats *st, struct evbuffer *out)
{
	evbuffer_add_printf(out,
		"<!doctype html>\n<html><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"2\">"
		"<title>ringproxy</title><style>body{font:14px system-ui,sans-serif;margin:1.5em}"
		"table{border-collapse:collapse}td,th{padding:.25em .6em;border-bottom:1px solid #ddd;text-align:right}"
		"th{background:#f4f4f4;max-width:6em;vertical-align:bottom}td.l,th.l{text-align:left}.down{color:#b00;font-weight:bold}"
		".up{color:#070}</style></head><body>\n<h1>ringproxy</h1>\n<p>");
#define STATS_H(n, type, where, help) evbuffer_add_printf(out, "<span title=\"%s\">" #n " <b>%llu</b></span> &middot; ", help, \
						     (unsigned long long)st->n);
	STATS_PROXY(STATS_H)
#undef STATS_H
	evbuffer_add_printf(out, "ring: %zu points, vnodes %u</p>\n", st->npoints, st->vnodes);
	if (st->reload_time) {
		evbuffer_add_printf(out, "<p>last reload: <b>%s</b> ", st->reload_ok ? "ok" : "failed");
		stats_html_str(out, st->reload_text);
		evbuffer_add(out, "</p>\n", 5);
	}
	if (st->ramp_in_progress)
		evbuffer_add_printf(out, "<p>warm ramp: <b>%.1f%%</b> of the moved keys (%.3f%% of the keyspace) switched to "
				    "their new owners; %.0f s left</p>\n", 100.0 * st->ramp_switched,
				    100.0 * st->ramp_moved, (double)(st->ramp_end_ms - st->ramp_start_ms) / 1000 *
				    (1 - st->ramp_switched));
	evbuffer_add_printf(out, "<table><tr><th class=\"l\">backend</th><th class=\"l\">url</th><th>weight</th>"
			    "<th>points</th><th>share</th>");
#define STATS_H(n, type, where, help) stats_html_th(out, #n, help);
	STATS_BACKEND(STATS_H)
#undef STATS_H
	evbuffer_add(out, "</tr>\n", 6);
	for (size_t i = 0; i < st->nbe; i++) {
		const struct stats_backend *b = &st->be[i];

		evbuffer_add(out, "<tr><td class=\"l\">", 18);
		stats_html_str(out, b->name);
		evbuffer_add(out, "</td><td class=\"l\">", 19);
		stats_html_str(out, b->url);
		evbuffer_add_printf(out, "</td><td>%g</td><td>%u</td><td>%.3f%%</td>", b->weight, b->points,
				    100.0 * b->share);
#define STATS_H(n, type, where, help) \
		if (strcmp(#n, "up") == 0) \
			evbuffer_add_printf(out, "<td class=\"%s\">%s</td>", b->up ? "up" : "down", b->up ? "up" : "DOWN"); \
		else \
			evbuffer_add_printf(out, "<td>%llu</td>", (unsigned long long)b->n);
		STATS_BACKEND(STATS_H)
#undef STATS_H
		evbuffer_add(out, "</tr>\n", 6);
	}
	evbuffer_add_printf(out, "</table>\n<p><a href=\"/stats\">/stats</a> (JSON) &middot; "
			    "<a href=\"/metrics\">/metrics</a> (Prometheus) &middot; <a href=\"/ring\">/ring</a> "
			    "&middot; <a href=\"/health\">/health</a></p>\n</body></html>\n");
}
