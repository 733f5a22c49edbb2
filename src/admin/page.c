/*
 * page.c -- the admin listener's page: what an operator looks at first.
 * The ring as a circle (each backend's arcs in its own colour, the keys
 * the last reload moved marked outside it), the proxy's totals and rates,
 * one row per backend (state, share, in flight against its caps, rates,
 * a sparkline of the last 5 minutes; past PAGE_ROWS backends, the most
 * troubled of them first), the last reloads, and every counter
 * of the stats lists with its help text as its label.
 *
 * Self-contained on purpose: inline CSS and SVG, no script, no external
 * asset, so it works from an air-gapped admin network and through an
 * SSH tunnel. It refreshes itself every 5 s. Main thread only.
 */
#include "admin/page.h"

#include <event2/buffer.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "path/proxy-t.h"
#include "ring/ring.h"
#include "admin/stats.h"
#include "config/discover.h"
#include "tls/certs.h"

#define PAGE_CX 150.0           /* the ring's centre and radii, SVG units */
#define PAGE_R 112.0
#define PAGE_R_MOVED 133.0
#define PAGE_SPARK_W 120.0
#define PAGE_SPARK_H 26.0
#define PAGE_ROWS 100           /* backends in the table, the most troubled */

/* A literal, its length counted by the compiler. */
#define PAGE_ADD(out, lit) evbuffer_add(out, lit, sizeof(lit) - 1)

static void page_str(struct evbuffer *out, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<': PAGE_ADD(out, "&lt;"); break;
		case '>': PAGE_ADD(out, "&gt;"); break;
		case '&': PAGE_ADD(out, "&amp;"); break;
		case '"': PAGE_ADD(out, "&quot;"); break;
		default: evbuffer_add(out, s, 1); break;
		}
	}
}

/* Backend i's colour: hues a golden angle apart stay apart for any count. */
static void page_colour(char *out, size_t len, size_t i)
{
	snprintf(out, len, "hsl(%.0f,62%%,46%%)", fmod((double)i * 137.508 + 210.0, 360.0));
}

static void page_time(char *out, size_t len, long long t)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (t <= 0 || !gmtime_r(&tt, &tm) || !strftime(out, len, "%Y-%m-%d %H:%M:%S UTC", &tm))
		snprintf(out, len, "never");
}

static void page_duration(char *out, size_t len, uint64_t s)
{
	if (s >= 86400)
		snprintf(out, len, "%llu d %llu h", (unsigned long long)(s / 86400),
			 (unsigned long long)(s % 86400 / 3600));
	else if (s >= 3600)
		snprintf(out, len, "%llu h %llu min", (unsigned long long)(s / 3600),
			 (unsigned long long)(s % 3600 / 60));
	else if (s >= 60)
		snprintf(out, len, "%llu min %llu s", (unsigned long long)(s / 60), (unsigned long long)(s % 60));
	else
		snprintf(out, len, "%llu s", (unsigned long long)s);
}

/* A rate for people: 3 significant digits, no exponent. */
static void page_rate(char *out, size_t len, double r)
{
	snprintf(out, len, r >= 100 ? "%.0f" : r >= 10 ? "%.1f" : r > 0 ? "%.2f" : "0", r);
}

/* A size for people: MiB from 0.1 MiB up, KiB from 1 KiB, else bytes
 * (a small cache does not read "0.0 MiB"). */
static void page_size(char *out, size_t len, uint64_t b)
{
	if (b >= 104858)
		snprintf(out, len, "%.1f MiB", (double)b / 1048576.0);
	else if (b >= 1024)
		snprintf(out, len, "%.1f KiB", (double)b / 1024.0);
	else
		snprintf(out, len, "%llu B", (unsigned long long)b);
}

/* ---- the ring ----------------------------------------------------------- */

static double page_angle(uint64_t pos)
{
	return (double)pos / 18446744073709551616.0 * 2.0 * M_PI;
}

/* An arc of the circle of radius r over the keys (start, end], clockwise
 * from the top; start == end is the whole circle. */
static void page_arc(struct evbuffer *out, const char *cls, const char *name, const char *colour,
		     double r, uint64_t start, uint64_t end)
{
	double a0 = page_angle(start), span = page_angle(end - start), a1 = a0 + span;

	evbuffer_add_printf(out, "<path class=\"%s\"", cls);
	if (name) {
		PAGE_ADD(out, " data-backend=\"");
		page_str(out, name);
		PAGE_ADD(out, "\"");
	}
	if (start == end) {     /* two half circles: one arc cannot close */
		evbuffer_add_printf(out, " d=\"M %.2f %.2f A %.1f %.1f 0 1 1 %.2f %.2f A %.1f %.1f 0 1 1 %.2f %.2f\"",
				    PAGE_CX, PAGE_CX - r, r, r, PAGE_CX, PAGE_CX + r, r, r, PAGE_CX, PAGE_CX - r);
	} else {
		evbuffer_add_printf(out, " d=\"M %.2f %.2f A %.1f %.1f 0 %d 1 %.2f %.2f\"",
				    PAGE_CX + r * sin(a0), PAGE_CX - r * cos(a0), r, r, span > M_PI ? 1 : 0,
				    PAGE_CX + r * sin(a1), PAGE_CX - r * cos(a1));
	}
	evbuffer_add_printf(out, " stroke=\"%s\"/>\n", colour);
}

/* The first point that starts a run (its backend differs from the point
 * before it), or -1 when every point is one backend's. */
static long page_run_start(const struct ring *r)
{
	for (size_t i = 0; i < r->npoints; i++)
		if (r->points[i].backend != r->points[(i + r->npoints - 1) % r->npoints].backend)
			return (long)i;
	return -1;
}

size_t page_runs(const struct ring *r)
{
	size_t n = 0;

	if (r->npoints == 0)
		return 0;
	if (page_run_start(r) < 0)
		return 1;
	for (size_t i = 0; i < r->npoints; i++)
		n += r->points[i].backend != r->points[(i + r->npoints - 1) % r->npoints].backend;
	return n;
}

/* One arc per run of a backend's consecutive points: the keys (the point
 * before the run, the run's last point] are its. */
static void page_ring_runs(struct evbuffer *out, const struct ring *r, const struct stats *st)
{
	long s0 = page_run_start(r);
	char colour[40];

	if (s0 < 0) {
		page_colour(colour, sizeof(colour), r->points[0].backend);
		page_arc(out, "arc", r->names[r->points[0].backend], colour, PAGE_R, 0, 0);
		return;
	}
	for (size_t k = 0; k < r->npoints;) {
		size_t first = ((size_t)s0 + k) % r->npoints, last = first;
		uint32_t b = r->points[first].backend;

		while (++k < r->npoints && r->points[((size_t)s0 + k) % r->npoints].backend == b)
			last = ((size_t)s0 + k) % r->npoints;
		page_colour(colour, sizeof(colour), b);
		page_arc(out, b < st->nbe && !st->be[b].up ? "arc down" : "arc", r->names[b], colour, PAGE_R,
			 r->points[(first + r->npoints - 1) % r->npoints].pos, r->points[last].pos);
	}
}

/* Too many runs to draw one by one: half-degree steps, each the colour
 * of the backend that owns its middle. */
static void page_ring_steps(struct evbuffer *out, const struct ring *r)
{
	const uint64_t step = UINT64_MAX / 720 + 1;
	char colour[40];
	int k = 0;

	while (k < 720) {
		int b = ring_lookup(r, (uint64_t)k * step + step / 2), j = k + 1;

		while (j < 720 && ring_lookup(r, (uint64_t)j * step + step / 2) == b)
			j++;
		page_colour(colour, sizeof(colour), (size_t)b);
		page_arc(out, "arc binned", r->names[b], colour, PAGE_R, (uint64_t)k * step,
			 j == 720 ? 0 : (uint64_t)j * step);
		k = j;
	}
}

static void page_ring(struct evbuffer *out, const struct stats *st)
{
	const struct ring *r = st->ring;
	size_t runs = r ? page_runs(r) : 0;

	evbuffer_add_printf(out, "<figure class=\"ring\"><svg id=\"ring\" width=\"300\" height=\"300\" viewBox=\"0 0 300 300\" "
			    "role=\"img\" aria-label=\"the hash ring: each backend's arcs in its colour\" "
			    "data-points=\"%zu\" data-runs=\"%zu\">\n<g class=\"arcs\" fill=\"none\" stroke-width=\"24\">\n",
			    r ? r->npoints : 0, runs);
	if (runs && runs <= PAGE_MAX_ARCS)
		page_ring_runs(out, r, st);
	else if (runs)
		page_ring_steps(out, r);
	PAGE_ADD(out, "</g>\n<g class=\"moved-arcs\" fill=\"none\" stroke=\"#d92d20\" stroke-width=\"7\">\n");
	for (size_t i = 0; i < st->nmoved; i++)
		page_arc(out, "moved", NULL, "#d92d20", PAGE_R_MOVED, st->moved[i].start, st->moved[i].end);
	evbuffer_add_printf(out, "</g>\n<text x=\"150\" y=\"146\" text-anchor=\"middle\" class=\"big\">%zu points</text>\n"
			    "<text x=\"150\" y=\"166\" text-anchor=\"middle\" class=\"small\">", r ? r->npoints : 0);
	/* a compat scheme has its proxy's count, not vnodes */
	if (st->vnodes)
		evbuffer_add_printf(out, "%u per unit of weight", st->vnodes);
	else
		evbuffer_add_printf(out, "scheme %s", st->scheme);
	PAGE_ADD(out, "</text>\n</svg><figcaption>");
	if (runs > PAGE_MAX_ARCS)
		evbuffer_add_printf(out, "%zu runs of points, drawn in half-degree steps. ", runs);
	if (st->nmoved)
		evbuffer_add_printf(out, "<span class=\"mv\"></span>keys the last reload moved (%.2f%%).",
				    100.0 * st->reload_moved);
	else
		PAGE_ADD(out, "Clockwise from the top; a key belongs to the first point at or after it.");
	PAGE_ADD(out, "</figcaption></figure>\n");
}

/* ---- the proxy and its backends ----------------------------------------- */

/* A tile; cls adds a class to it ("" none): "amber" or "red" colour its
 * value. */
static void page_tile_cls(struct evbuffer *out, const char *id, const char *cls, const char *label,
			  const char *value, const char *more)
{
	evbuffer_add_printf(out, "<div class=\"tile%s%s\" id=\"%s\"><span>%s</span><b>%s</b>%s%s%s</div>\n",
			    *cls ? " " : "", cls, id, label, value, more ? "<small>" : "", more ? more : "",
			    more ? "</small>" : "");
}

static void page_tile(struct evbuffer *out, const char *id, const char *label, const char *value,
		      const char *more)
{
	page_tile_cls(out, id, "", label, value, more);
}

/* A ratio in percent, or "none" (-1: nothing to divide). */
static void page_ratio(char *buf, size_t len, double r)
{
	if (r < 0)
		snprintf(buf, len, "none");
	else
		snprintf(buf, len, "%.1f%%", 100.0 * r);
}

/* The backends of the snapshot up (health's word: a weight 0 one may be). */
static size_t page_nup(const struct stats *st)
{
	size_t n = 0;

	for (size_t i = 0; i < st->nbe; i++)
		n += st->be[i].up != 0;
	return n;
}

/* The headline: what clients ask per second, whoever answers; under it
 * the part sent to the caches and the part the proxy's own cache
 * answered (a cache answering 98% of 6,000/s leaves 120/s for the tier:
 * the tier's rate alone hid the load). */
static void page_requests(struct evbuffer *out, const struct stats *st)
{
	const double *r10 = st->rate[STATS_WIN_10];
	char a[32], b[32], c[32], m[192];
	int n;

	page_rate(a, sizeof(a), r10[RATES_P_client_requests]);
	page_rate(b, sizeof(b), r10[RATES_P_requests]);
	n = snprintf(m, sizeof(m), "<span class=\"sent\">%s sent to the caches</span>", b);
	/* the cache's share once it was asked at all ([cache] size 0: never) */
	if (st->has_cache && st->cache.hits + st->cache.misses + st->cache.coalesced > 0 &&
	    r10[RATES_P_client_requests] > 0)
		n += snprintf(m + n, sizeof(m) - (size_t)n, "<span class=\"answered\">%.1f%% answered by its own cache</span>",
			      100.0 * fmin(1.0, r10[RATES_P_cache_answers] / r10[RATES_P_client_requests]));
	page_rate(c, sizeof(c), st->rate[STATS_WIN_300][RATES_P_client_requests]);
	snprintf(m + n, sizeof(m) - (size_t)n, "%s over 5 minutes", c);
	page_tile(out, "t-requests", "Client requests per second, last 10 s", a, m);
}

static void page_tiles(struct evbuffer *out, const struct stats *st)
{
	char v[64], m[128], a[32], b[32], size[32];

	PAGE_ADD(out, "<div class=\"tiles\">\n");
	snprintf(v, sizeof(v), "%zu of %zu", page_nup(st), st->nbe);
	snprintf(m, sizeof(m), "%zu down", st->nbe - page_nup(st));
	/* some down: amber, as a backend's "checking" is; none up: red */
	page_tile_cls(out, "t-up", page_nup(st) == st->nbe ? "" : page_nup(st) ? "amber" : "red", "Backends up", v, m);
	page_requests(out, st);
	page_rate(a, sizeof(a), st->rate[STATS_WIN_10][RATES_P_errors]);
	page_rate(b, sizeof(b), st->rate[STATS_WIN_300][RATES_P_errors]);
	snprintf(m, sizeof(m), "%s over 5 minutes", b);
	page_tile(out, "t-errors", "Backend errors per second", a, m);
	snprintf(v, sizeof(v), "%llu", (unsigned long long)st->inflight);
	page_tile(out, "t-inflight", "Requests in flight", v, NULL);
	snprintf(v, sizeof(v), "%llu", (unsigned long long)st->connections);
	page_rate(a, sizeof(a), st->rate[STATS_WIN_10][RATES_P_accepted]);
	snprintf(m, sizeof(m), "%s new per second", a);
	page_tile(out, "t-conns", "Client connections open", v, m);
	if (st->has_cache) {
		uint64_t asked = st->cache.hits + st->cache.misses + st->cache.coalesced;

		snprintf(v, sizeof(v), "%.1f%%", asked ? 100.0 * (double)st->cache.hits / (double)asked : 0.0);
		page_size(size, sizeof(size), st->cache.bytes);
		snprintf(m, sizeof(m), "%llu objects, %s", (unsigned long long)st->cache.objects, size);
		page_tile(out, "t-cache", "Cache hit ratio", v, m);
	}
	page_ratio(v, sizeof(v), st->tier_hit_ratio_5m);
	page_rate(a, sizeof(a), st->tier_fetches_5m);
	snprintf(m, sizeof(m), "%s origin fetches per second, 5 min", a);
	page_tile(out, "t-tier", "Tier hit ratio, 5 min", v, m);
	snprintf(v, sizeof(v), "%llu", (unsigned long long)st->generation);
	snprintf(m, sizeof(m), "%llu refused", (unsigned long long)st->reloads_failed);
	page_tile(out, "t-generation", "Config loads", v, m);
	PAGE_ADD(out, "</div>\n");
}

/* The last 5 minutes of a backend: requests per second, and in red the
 * errors on a scale of their own, drawn only when there were any (a red
 * line on every baseline made healthy rows look failed); the scales are
 * written under it. */
static void page_spark(struct evbuffer *out, const struct stats_backend *b, const char *colour)
{
	double max = 1, emax = 0, top[2];
	char a[32], e[32];

	for (size_t k = 0; k < STATS_SPARK; k++) {
		if (b->spark_requests[k] > max)
			max = b->spark_requests[k];
		if (b->spark_errors[k] > emax)
			emax = b->spark_errors[k];
	}
	top[0] = max;
	top[1] = emax;
	page_rate(a, sizeof(a), max);
	page_rate(e, sizeof(e), emax);
	evbuffer_add_printf(out, "<svg class=\"spark\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" "
			    "aria-label=\"requests per second, last 5 minutes, at most %s%s%s\">",
			    PAGE_SPARK_W, PAGE_SPARK_H, PAGE_SPARK_W, PAGE_SPARK_H, a,
			    emax > 0 ? "; errors per second at most " : "", emax > 0 ? e : "");
	for (int line = 0; line < (emax > 0 ? 2 : 1); line++) {
		const double *v = line ? b->spark_errors : b->spark_requests;
		double scale = top[line];

		evbuffer_add_printf(out, "<polyline class=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"",
				    line ? "errors" : "requests", line ? "#d92d20" : colour);
		for (size_t k = 0; k < STATS_SPARK; k++)
			evbuffer_add_printf(out, "%s%.1f,%.1f", k ? " " : "",
					    (double)k * PAGE_SPARK_W / (STATS_SPARK - 1),
					    PAGE_SPARK_H - 1 - v[k] / scale * (PAGE_SPARK_H - 2));
		PAGE_ADD(out, "\"/>");
	}
	evbuffer_add_printf(out, "</svg><small class=\"scale\">top %s/s", a);
	if (emax > 0)
		evbuffer_add_printf(out, "; <span class=\"err\">errors, top %s/s</span>", e);
	PAGE_ADD(out, "</small>");
}

static const char *page_state_word(const char *state)
{
	return strcmp(state, "up") == 0 ? "up" : strcmp(state, "down") == 0 ? "down" :
	       strcmp(state, "checking") == 0 ? "checking (new: no traffic until its first health check passes)" :
	       strcmp(state, "failing") == 0 ? "failing (the last one up: kept in service)" :
	       strcmp(state, "ramping") == 0 ? "ramping up" : strcmp(state, "full") == 0 ? "at its hard cap" :
	       "drained (weight 0)";
}

/* A duration in words: 850 µs, 12.5 ms, 1.20 s. */
static void page_seconds(char *buf, size_t len, double s)
{
	if (s < 0.001)
		snprintf(buf, len, "%.0f \u00b5s", s * 1e6);
	else if (s < 1)
		snprintf(buf, len, "%.1f ms", s * 1e3);
	else
		snprintf(buf, len, "%.2f s", s);
}

/* The latency cell: p50 and p99 of a backend's response times. */
static void page_latency(struct evbuffer *out, const struct stats_hist_sum *h)
{
	char a[32], b[32];

	if (!h->count) {
		PAGE_ADD(out, "<td class=\"latency\">none yet</td>");
		return;
	}
	page_seconds(a, sizeof(a), h->p50);
	page_seconds(b, sizeof(b), h->p99);
	evbuffer_add_printf(out, "<td class=\"latency\">%s<small>p99 %s</small></td>", a, b);
}

/* Why a backend is in its state, under the word: for how long, the
 * reason of its last transition, its failures in a row with the last
 * one's cause, and the last active check. */
static void page_why(struct evbuffer *out, const struct stats_backend *b)
{
	char d[64], t[32];

	page_duration(d, sizeof(d), b->state_since_seconds);
	evbuffer_add_printf(out, "<small class=\"since\">%s for %s</small>", b->up ? "up" : "down", d);
	if (b->reason[0]) {
		PAGE_ADD(out, "<small class=\"reason\">");
		page_str(out, b->reason);
		PAGE_ADD(out, "</small>");
	}
	if (b->fails && b->last_fail[0]) {
		evbuffer_add_printf(out, "<small class=\"fails\">%llu failed requests in a row, the last: ",
				    (unsigned long long)b->fails);
		page_str(out, b->last_fail);
		PAGE_ADD(out, "</small>");
	}
	if (b->checked) {
		page_seconds(t, sizeof(t), b->check_seconds);
		evbuffer_add_printf(out, "<small class=\"check\">last check %s: ", b->check_passed ? "passed" : "failed");
		page_str(out, b->check_text);
		evbuffer_add_printf(out, ", %s", t);
		if (b->check_fails)
			evbuffer_add_printf(out, " (%llu failed in a row)", (unsigned long long)b->check_fails);
		PAGE_ADD(out, "</small>");
	}
}

/* The limits cell: the hard cap, and the bounded-load cap, which follows
 * the load (at rest it is 1 or 2 in flight, which read as a limit of
 * one request): its number only when it bit in the last 5 minutes. */
static void page_limits(struct evbuffer *out, const struct stats_backend *b, double balance_factor)
{
	double spilled = b->rate[STATS_WIN_300][RATES_B_spilled_away];
	char a[32];

	if (b->max_inflight)
		evbuffer_add_printf(out, "hard cap %ld<small>never more in flight</small>", b->max_inflight);
	if (b->cap >= 0 && spilled > 0) {
		page_rate(a, sizeof(a), spilled);
		evbuffer_add_printf(out, "<span class=\"cap bites\">spills at %ld in flight</span><small>%s/s sent on "
				    "over 5 min: new requests go to the next backend then (bounded loads: %g &times; "
				    "its fair share of what is in flight now)</small>", b->cap, a, balance_factor);
	} else if (b->cap >= 0) {
		evbuffer_add_printf(out, "<span class=\"cap\">cap grows with load</span><small>bounded loads: spills past "
				    "%g &times; its fair share of what is in flight; none spilled in 5 min</small>",
				    balance_factor);
	}
	if (!b->max_inflight && b->cap < 0)
		PAGE_ADD(out, "none");
}

/* The rates and error cells: a backend that is down shows none (its last
 * ones would read as traffic it still takes), one without requests says
 * so rather than "0.0%". */
static void page_rates(struct evbuffer *out, const struct stats_backend *b)
{
	double req5 = b->rate[STATS_WIN_300][RATES_B_requests], err5 = b->rate[STATS_WIN_300][RATES_B_errors];
	char a[32], c[32], r[32];

	if (!b->up) {
		PAGE_ADD(out, "<td class=\"idle\">none<small>down: no traffic but its trials</small></td>"
			 "<td class=\"idle\">none<small>down: see its state</small></td>");
		return;
	}
	page_rate(a, sizeof(a), b->rate[STATS_WIN_10][RATES_B_requests]);
	page_rate(c, sizeof(c), req5);
	page_ratio(r, sizeof(r), b->tier_hit_ratio_5m);
	evbuffer_add_printf(out, "<td>%s<small>%s over 5 min</small><small class=\"tier\">its cache hits %s"
			    "</small></td>", a, c, r);
	page_rate(a, sizeof(a), err5);
	if (req5 > 0)
		evbuffer_add_printf(out, "<td>%.1f%%<small>%s per second</small></td>", 100.0 * err5 / req5, a);
	else
		PAGE_ADD(out, "<td class=\"idle\">none<small>no requests in 5 min</small></td>");
}

/* Unix seconds now, for the time left of a drain. */
static double page_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void page_backend_row(struct evbuffer *out, const struct stats_backend *b, size_t i,
			     double balance_factor)
{
	char colour[40], left[64];

	page_colour(colour, sizeof(colour), i);
	PAGE_ADD(out, "<tr class=\"backend\" data-backend=\"");
	page_str(out, b->name);
	evbuffer_add_printf(out, "\" data-state=\"%s\"><td class=\"l\"><span class=\"sw\" style=\"background:%s\"></span>"
			    "<span class=\"name\">", b->state, colour);
	page_str(out, b->name);
	PAGE_ADD(out, "</span><div class=\"url\">");
	page_str(out, b->url);
	evbuffer_add_printf(out, "</div></td><td class=\"l state st-%s\">%s", b->state, page_state_word(b->state));
	if (strcmp(b->state, "ramping") == 0)
		evbuffer_add_printf(out, " <small>%.0f%% of keys back</small>", 100.0 * b->ramp);
	/* the operator's runtime state (ringproxy ctl) */
	if (b->drain_progress >= 0 && b->drain_progress < 1) {
		page_duration(left, sizeof(left), (uint64_t)fmax(0.0, ceil(b->drain_end - page_now())));
		evbuffer_add_printf(out, " <small class=\"admin\">draining: %.0f%% of its keys gone to their next "
				    "owners, %s left</small>", 100.0 * b->drain_progress, left);
	} else if (b->drain_progress >= 0) {
		PAGE_ADD(out, " <small class=\"admin\">drained: all its keys gone to their next owners</small>");
	} else if (strcmp(b->admin_state, "maint") == 0) {
		PAGE_ADD(out, " <small class=\"admin\">in maintenance: out of the ring</small>");
	}
	page_why(out, b);
	evbuffer_add_printf(out, "</td><td>%.2f%%<small>%u points, weight %g", 100.0 * b->share, b->points, b->weight);
	if (b->runtime_weight >= 0)
		evbuffer_add_printf(out, ", runtime weight %g", b->runtime_weight);
	evbuffer_add_printf(out, "</small></td><td>%llu</td><td class=\"l\">", (unsigned long long)b->inflight);
	page_limits(out, b, balance_factor);
	PAGE_ADD(out, "</td>");
	page_rates(out, b);
	page_latency(out, &b->response);
	PAGE_ADD(out, "<td>");
	page_spark(out, b, colour);
	PAGE_ADD(out, "</td></tr>\n");
}

/* A backend's place in a long table: the most troubled first. */
struct page_rank {
	int state;              /* down, failing, full, ramping, drained, up */
	double err5;            /* errors per second over 5 min */
	uint64_t fails;
	size_t i;               /* its index: the colour, and the last tie */
};

static int page_rank_cmp(const void *pa, const void *pb)
{
	const struct page_rank *a = pa, *b = pb;

	if (a->state != b->state)
		return a->state < b->state ? -1 : 1;
	if (a->err5 != b->err5)
		return a->err5 > b->err5 ? -1 : 1;
	if (a->fails != b->fails)
		return a->fails > b->fails ? -1 : 1;
	return a->i < b->i ? -1 : a->i > b->i;
}

static int page_state_rank(const char *state)
{
	static const char *const order[] = { "down", "failing", "full", "ramping", "drained" };

	for (int k = 0; k < (int)(sizeof(order) / sizeof(order[0])); k++)
		if (strcmp(state, order[k]) == 0)
			return k;
	return (int)(sizeof(order) / sizeof(order[0]));
}

/* Up to PAGE_ROWS backends: all of them in the config's order. More: the
 * PAGE_ROWS most troubled (down, failing, at the hard cap, ramping,
 * drained, then by error rate and failures in a row), and a line with how
 * many are left out (every one is in /stats and /metrics), so a tier of
 * thousands gives a page that loads and shows what needs a look first. */
static void page_backends(struct evbuffer *out, const struct stats *st)
{
	struct page_rank *rank = NULL;
	size_t n = st->nbe;

	PAGE_ADD(out, "<h2>Backends</h2>\n<table id=\"backends\"><thead><tr><th class=\"l\">Backend</th>"
		     "<th class=\"l\">State</th><th>Share of keys</th><th>In flight</th><th class=\"l\">Limits</th>"
		     "<th>Requests per second, 10 s</th><th>Error rate, 5 min</th><th>Response time, median</th>"
		     "<th>Last 5 minutes</th>"
		     "</tr></thead>\n<tbody>\n");
	if (n > PAGE_ROWS && (rank = malloc(n * sizeof(*rank))) != NULL) {
		for (size_t i = 0; i < n; i++)
			rank[i] = (struct page_rank){ page_state_rank(st->be[i].state),
						      st->be[i].rate[STATS_WIN_300][RATES_B_errors],
						      st->be[i].fails, i };
		qsort(rank, n, sizeof(*rank), page_rank_cmp);
		n = PAGE_ROWS;
	}
	for (size_t k = 0; k < n; k++) {
		size_t i = rank ? rank[k].i : k;

		page_backend_row(out, &st->be[i], i, st->balance_factor);
	}
	if (rank)
		evbuffer_add_printf(out, "<tr class=\"more\"><td class=\"l\" colspan=\"9\">the %d most troubled "
				    "of %zu backends, the most troubled first; the other %zu are in "
				    "<a href=\"/stats\">/stats</a> and <a href=\"/metrics\">/metrics</a></td></tr>\n",
				    PAGE_ROWS, st->nbe, st->nbe - (size_t)PAGE_ROWS);
	free(rank);
	PAGE_ADD(out, "</tbody></table>\n");
}

/* One entry of the list of changes: its text, the warm ramp's words left
 * out once that ramp has ended (they said "ramping over 5m" for good). */
static void page_change(struct evbuffer *out, const struct proxy_reload *r, bool ctl, double now)
{
	char when[64], buf[sizeof(r->text)];

	page_time(when, sizeof(when), (long long)r->when);
	evbuffer_add_printf(out, "<li class=\"%s%s\"><time>%s</time> <b>%s</b> ", r->ok ? "ok" : "fail",
			    ctl ? " ctl" : "", when, ctl ? "changed" : r->ok ? "applied" : "refused");
	if (r->ramp_len && now * 1000 >= (double)r->ramp_end_ms) {
		snprintf(buf, sizeof(buf), "%.*s%s", (int)r->ramp_at, r->text, r->text + r->ramp_at + r->ramp_len);
		page_str(out, buf);
		PAGE_ADD(out, " <small class=\"ramped\">(its warm ramp has ended)</small>");
	} else {
		page_str(out, r->text);
	}
	PAGE_ADD(out, "</li>\n");
}

/* The reloads and the runtime state changes (ringproxy ctl), newest
 * first. */
static void page_reloads(struct evbuffer *out, const struct stats *st)
{
	unsigned i = st->nreloads, j = st->nctls;
	double now = page_now();

	/* no list numbers: after a refused reload they would not be the
	 * reload ids ("reload 3:" in an applied one's report) */
	PAGE_ADD(out, "<h2>Reloads and changes</h2>\n<ul class=\"reloads\">\n");
	if (!i && !j)
		PAGE_ADD(out, "<li class=\"none\">none since the start</li>\n");
	while (i || j) {
		bool ctl = j && (!i || st->ctls[j - 1]->seq > st->reloads[i - 1]->seq);

		page_change(out, ctl ? st->ctls[--j] : st->reloads[--i], ctl, now);
	}
	PAGE_ADD(out, "</ul>\n");
}

/* [tls]'s certificates: each file's names and the days left, the
 * soonest first in attention (amber under 14 days, as -t warns). Nothing
 * without HTTPS. */
static void page_certs(struct evbuffer *out, const struct stats *st)
{
	time_t now = time(NULL);

	if (certs_count(st->certs) == 0)
		return;
	PAGE_ADD(out, "<h2>Certificates</h2>\n<table id=\"certs\"><thead><tr><th class=\"l\">File</th>"
		      "<th class=\"l\">Names</th><th>Expires in</th></tr></thead><tbody>\n");
	for (size_t i = 0; i < certs_count(st->certs); i++) {
		long long left = (long long)(certs_not_after(st->certs, i) - now);

		PAGE_ADD(out, "<tr><td class=\"l\">");
		page_str(out, certs_file(st->certs, i));
		PAGE_ADD(out, "</td><td class=\"l\">");
		page_str(out, certs_names(st->certs, i));
		evbuffer_add_printf(out, "</td><td%s>%lld days</td></tr>\n", left < 14 * 86400 ? " class=\"warn\"" : "",
				    left / 86400);
	}
	PAGE_ADD(out, "</tbody></table>\n");
}

/* Every counter of the lists, labelled by its help text. */
static void page_counters(struct evbuffer *out, const struct stats *st)
{
	PAGE_ADD(out, "<details><summary>Every counter</summary>\n<table class=\"all\"><tr><th class=\"l\">The proxy</th><th></th></tr>\n");
#define PAGE_P(n, type, where, help) \
	evbuffer_add_printf(out, "<tr data-counter=\"" #n "\"><td class=\"l\">%s</td><td>%llu</td></tr>\n", help, \
			    (unsigned long long)st->n);
	STATS_PROXY(PAGE_P)
#undef PAGE_P
	PAGE_ADD(out, "<tr><th class=\"l\">Each backend</th>");
	for (size_t i = 0; i < st->nbe; i++) {
		PAGE_ADD(out, "<th>");
		page_str(out, st->be[i].name);
		PAGE_ADD(out, "</th>");
	}
	PAGE_ADD(out, "</tr>\n");
#define PAGE_B(n, type, where, help) \
	evbuffer_add_printf(out, "<tr data-counter=\"backend_" #n "\"><td class=\"l\">%s</td>", help); \
	for (size_t i = 0; i < st->nbe; i++) { \
		if (strcmp(#type, "flag") == 0) \
			evbuffer_add_printf(out, "<td>%s</td>", st->be[i].n ? "yes" : "no"); \
		else \
			evbuffer_add_printf(out, "<td>%llu</td>", (unsigned long long)st->be[i].n); \
	} \
	PAGE_ADD(out, "</tr>\n");
	STATS_BACKEND(PAGE_B)
#undef PAGE_B
	PAGE_ADD(out, "</table></details>\n");
}

/* The config file on disk when it is not what runs. */
static void page_disk(struct evbuffer *out, const struct stats *st)
{
	if (strcmp(st->conf_on_disk, "differs") == 0)
		evbuffer_add_printf(out, "<p class=\"warn\" id=\"conf-disk\" data-on-disk=\"differs\">The file on disk "
				    "differs from the running config (SHA-256 <code>%.12s&hellip;</code>, %s): check it "
				    "with ringproxy -t, see what it would move with ringproxy plan, then reload "
				    "(systemctl reload ringproxy, or SIGHUP).</p>\n", st->conf_disk_sha256,
				    st->reload_time && !st->reload_ok ? "the last reload refused it: see Reloads" :
				    "edited since it was loaded");
	else if (strcmp(st->conf_on_disk, "same") != 0)
		PAGE_ADD(out, "<p class=\"warn\" id=\"conf-disk\" data-on-disk=\"unreadable\">The config file cannot "
			 "be read now: a reload would fail.</p>\n");
}

/* While a warm ramp runs, or a backend drains: how far it has got and
 * how long is left, one line each (ringproxy(7), WARM RAMP). */
static void page_progress(struct evbuffer *out, const struct stats *st)
{
	double now = page_now();
	char left[64];

	if (st->ramp_rings && st->ramp_in_progress) {
		page_duration(left, sizeof(left),
			      (uint64_t)fmax(0.0, ceil((double)st->ramp_end_ms / 1000 - now)));
		evbuffer_add_printf(out, "<p class=\"progress\" id=\"ramp\">ramp: %.0f%% of moved keys switched, "
				    "%s left</p>\n", 100.0 * st->ramp_switched, left);
	}
	for (size_t i = 0; i < st->nbe; i++) {
		const struct stats_backend *b = &st->be[i];

		if (b->drain_progress < 0 || b->drain_progress >= 1)
			continue;
		page_duration(left, sizeof(left), (uint64_t)fmax(0.0, ceil(b->drain_end - now)));
		PAGE_ADD(out, "<p class=\"progress drain\" data-backend=\"");
		page_str(out, b->name);
		PAGE_ADD(out, "\">drain ");
		page_str(out, b->name);
		evbuffer_add_printf(out, ": %.0f%% of its keys moved to their next owners, %s left</p>\n",
				    100.0 * b->drain_progress, left);
	}
}

/* [discovery]: where the members come from, the last good answer, what
 * waits and what is held (nothing without srv). */
static void page_discovery(struct evbuffer *out, const struct stats *st)
{
	const struct discover *d = st->discover;
	uint64_t fails = 0;

	if (!d)
		return;
	for (int k = 0; k < DISCOVER_NFAIL; k++)
		fails += d->failures[k];
	evbuffer_add_printf(out, "<p class=\"%s\" id=\"discovery\">Members from DNS SRV: %llu on the ring, "
			    "last good answer %llu s ago%s%s; %llu joining, %llu absent (leaving after remove_after); "
			    "%llu failed polls", d->last_fail >= 0 || d->held ? "warn" : "sub",
			    (unsigned long long)st->discovery_members,
			    (unsigned long long)st->discovery_last_good_age_seconds,
			    d->last_fail >= 0 ? ", the last poll failed: " : "",
			    d->last_fail >= 0 ? discover_fail_name(d->last_fail) : "",
			    (unsigned long long)st->discovery_pending_adds,
			    (unsigned long long)st->discovery_pending_removes, (unsigned long long)fails);
	if (d->held)
		evbuffer_add_printf(out, "; <strong>%zu removals held</strong> (more than max_remove): ringproxy ctl "
				    "discovery apply", d->held);
	PAGE_ADD(out, ".</p>\n");
}

static const char page_style[] =
	":root{--fg:#1d232b;--mute:#5b6672;--line:#e3e7ec;--bad:#b42318;--ok:#067647;--warn:#b54708}"
	"*{box-sizing:border-box}"
	"body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;color:var(--fg);margin:0 auto;"
	"padding:14px 20px;max-width:1260px}"
	"h1{font-size:20px;margin:0}h2{font-size:15px;margin:18px 0 6px}"
	".sub{color:var(--mute);margin:2px 0 10px;overflow-wrap:anywhere}code{font-size:12px}"
	".top{display:flex;gap:20px;align-items:flex-start;flex-wrap:wrap}"
	".ring{margin:0;width:300px}figcaption{font-size:12px;color:var(--mute)}"
	".ring .big{font-size:18px;font-weight:600;fill:var(--fg)}.ring .small{font-size:11px;fill:var(--mute)}"
	".arc.down{opacity:.3}.mv{display:inline-block;width:14px;height:4px;background:#d92d20;margin-right:5px;"
	"vertical-align:middle}"
	".tiles{display:grid;grid-template-columns:repeat(auto-fill,minmax(170px,1fr));gap:8px;flex:1;min-width:320px}"
	".tile{border:1px solid var(--line);border-radius:6px;padding:6px 10px}"
	".tile span,small{display:block;color:var(--mute);font-size:12px}.tile b{display:block;font-size:20px}"
	".tile.amber b{color:var(--warn)}.tile.red b{color:var(--bad)}"
	"table{border-collapse:collapse;width:100%}"
	"th,td{padding:5px 8px;border-bottom:1px solid var(--line);text-align:right;vertical-align:middle}"
	"th{font-weight:600;color:var(--mute);font-size:12px}.l{text-align:left}"
	".url{color:var(--mute);font-size:12px;overflow-wrap:anywhere}.name{font-weight:600}"
	".sw{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px}"
	".state{font-weight:600}.st-up{color:var(--ok)}.st-down,.st-failing{color:var(--bad)}.st-checking{color:var(--warn)}"
	".st-ramping,.st-full{color:var(--warn)}.st-drained{color:var(--mute)}"
	".scale{font-size:11px}.scale .err{color:var(--bad)}"
	".progress{color:var(--warn);font-weight:600;margin:4px 0}.idle{color:var(--mute)}"
	".reloads{padding-left:0;list-style:none}.warn{color:var(--warn);font-weight:600}.reloads li{margin:3px 0;overflow-wrap:anywhere}.reloads .fail b{color:var(--bad)}"
	".reloads time{color:var(--mute);font-size:12px}details{margin-top:16px}summary{cursor:pointer;font-weight:600}"
	"table.all{width:auto}footer{margin-top:16px;color:var(--mute);font-size:12px}";

void page_html(const struct stats *st, struct evbuffer *out)
{
	const struct stats_build *b = &st->build;
	char up[64], loaded[64];

	page_duration(up, sizeof(up), st->uptime_seconds);
	page_time(loaded, sizeof(loaded), st->conf_loaded);
	evbuffer_add_printf(out, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
			    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
			    "<meta http-equiv=\"refresh\" content=\"5\"><link rel=\"icon\" href=\"data:,\">"
			    "<title>ringproxy: %zu of %zu up</title><style>%s</style></head><body>\n"
			    "<header><h1>ringproxy</h1><p class=\"sub\">version ", page_nup(st), st->nbe, page_style);
	page_str(out, b->version);
	evbuffer_add_printf(out, " (libevent %s, OpenSSL %s, libcurl %s, inih r%s) &middot; up %s &middot; config <code>",
			    b->libevent, b->openssl, b->libcurl, b->inih, up);
	page_str(out, st->conf_path);
	evbuffer_add_printf(out, "</code> loaded %s, SHA-256 <code title=\"%s\">%.12s&hellip;</code>, generation %llu"
			    ", ring <code id=\"ring-fingerprint\">%016llx</code></p>\n", loaded, st->conf_sha256,
			    st->conf_sha256, (unsigned long long)st->generation, (unsigned long long)st->fingerprint);
	page_disk(out, st);
	page_progress(out, st);
	page_discovery(out, st);
	PAGE_ADD(out, "</header>\n<section class=\"top\">\n");
	page_ring(out, st);
	page_tiles(out, st);
	PAGE_ADD(out, "</section>\n");
	page_backends(out, st);
	page_reloads(out, st);
	page_certs(out, st);
	page_counters(out, st);
	PAGE_ADD(out, "<footer><a href=\"/stats\">/stats</a> (JSON) &middot; <a href=\"/metrics\">/metrics</a> "
		     "(Prometheus) &middot; <a href=\"/ring\">/ring</a> &middot; <a href=\"/ring?url=/&amp;format=text\">"
		     "/ring?url=URL</a> (where a request for a URL or path goes, and why; key= takes the string "
		     "hashed) &middot; <a href=\"/health\">/health</a>"
		     "</footer>\n</body></html>\n");
}
