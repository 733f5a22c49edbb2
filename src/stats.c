/*
 * stats.c -- collecting and rendering the counters listed in stats.h.
 * Main thread only (the admin listener). Reads shared state without
 * stopping anyone: registry counters are atomics, per-worker counters have
 * a single writer and are read with relaxed loads, so a reading is a
 * consistent-enough snapshot, not a transaction.
 */
#include "stats.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proxy.h"
#include "registry.h"
#include "snapshot.h"
#include "worker.h"

int stats_collect(struct stats *st, const struct proxy *p)
{
	const struct snapshot *s = p->current;
	double *share;

	memset(st, 0, sizeof(*st));
	st->uptime_seconds = (uint64_t)(time(NULL) - p->started);
	st->generation = p->generation;
	st->reloads_failed = p->failed_reloads;
	st->connections = atomic_load(&p->nconns);
	st->accepted = atomic_load(&p->accepted);
	st->refused = atomic_load(&p->refused);
	{
		long n = atomic_load(&registry_total_inflight);

		st->inflight = n > 0 ? (uint64_t)n : 0;
	}
	st->reload_time = (long long)p->last_reload.when;
	st->reload_ok = p->last_reload.ok;
	st->reload_text = p->last_reload.text;
	st->reload_moved = p->last_moved_share;
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
		struct backend *b = s->be[i].state;
		long inflight = atomic_load(&b->inflight);

		o->name = s->be[i].conf->name;
		o->url = s->be[i].conf->url;
		o->weight = s->be[i].conf->weight;
		o->points = s->ring->npoints_of[i];
		o->share = share[i];
		o->up = !atomic_load(&b->down);
		o->inflight = inflight > 0 ? (uint64_t)inflight : 0;
		o->connects = atomic_load(&b->connects);
		o->connect_errors = atomic_load(&b->connect_errors);
		o->timeouts = atomic_load(&b->timeouts);
		o->bad_responses = atomic_load(&b->bad_responses);
		o->retries_away = atomic_load(&b->retries_away);
		o->spilled_away = atomic_load(&b->spilled_away);
		o->spilled_in = atomic_load(&b->spilled_in);
		o->failovers = atomic_load(&b->failovers);
		o->transitions = atomic_load(&b->transitions);
		for (unsigned w = 0; w < p->nworkers; w++) {
			const struct pool *pool = worker_pool_peek(p->workers[w], b->id);

			if (!pool)
				continue;
			o->requests += atomic_load_explicit(&pool->requests, memory_order_relaxed);
			o->responses += atomic_load_explicit(&pool->responses, memory_order_relaxed);
		}
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
#define STATS_J(n, type, help) evbuffer_add_printf(out, "\"" #n "\": %llu, ", (unsigned long long)st->n);
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
	evbuffer_add(out, ", \"backends\": [", 15);
	for (size_t i = 0; i < st->nbe; i++) {
		const struct stats_backend *b = &st->be[i];

		evbuffer_add(out, i ? ", {\"name\": " : "{\"name\": ", i ? 11 : 9);
		stats_json_str(out, b->name);
		evbuffer_add(out, ", \"url\": ", 9);
		stats_json_str(out, b->url);
		evbuffer_add_printf(out, ", \"weight\": %.17g, \"points\": %u, \"share\": %.17g",
				    b->weight, b->points, b->share);
#define STATS_J(n, type, help) evbuffer_add_printf(out, ", \"" #n "\": %llu", (unsigned long long)b->n);
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
#define STATS_P(n, type, help) \
	evbuffer_add_printf(out, "# HELP ringproxy_%s%s %s\n# TYPE ringproxy_%s%s %s\nringproxy_%s%s %llu\n", \
			    #n, stats_suffix(#type), help, #n, stats_suffix(#type), #type, \
			    #n, stats_suffix(#type), (unsigned long long)st->n);
	STATS_PROXY(STATS_P)
#undef STATS_P
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
#define STATS_P(n, type, help) \
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
#define STATS_H(n, type, help) evbuffer_add_printf(out, "<span title=\"%s\">" #n " <b>%llu</b></span> &middot; ", help, \
						     (unsigned long long)st->n);
	STATS_PROXY(STATS_H)
#undef STATS_H
	evbuffer_add_printf(out, "ring: %zu points, vnodes %u</p>\n", st->npoints, st->vnodes);
	if (st->reload_time) {
		evbuffer_add_printf(out, "<p>last reload: <b>%s</b> ", st->reload_ok ? "ok" : "failed");
		stats_html_str(out, st->reload_text);
		evbuffer_add(out, "</p>\n", 5);
	}
	evbuffer_add_printf(out, "<table><tr><th class=\"l\">backend</th><th class=\"l\">url</th><th>weight</th>"
			    "<th>points</th><th>share</th>");
#define STATS_H(n, type, help) stats_html_th(out, #n, help);
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
#define STATS_H(n, type, help) \
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
