/*
 * explain.c -- where a key goes and why (explain.h): the request path's
 * own key function (key_parts) on a target parsed by http1.c, and
 * balance.c's verdicts read without taking anything (balance_explain), so
 * that what /ring?key= says is what a request meets, not a second model of
 * it that could drift. Main thread (admin listener) or plan's process.
 */
#include "admin/explain.h"

#include <event2/buffer.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/conf.h"
#include "path/key.h"
#include "ring/ring.h"
#include "backend/registry.h"
#include "admin/stats.h"

#define EXPLAIN_HOST "ringproxy.invalid"

int explain_target_parse(struct explain_target *t, int scheme, int mode, const struct query_rules *q,
			 const char *target, size_t len, const char *host, char *err, size_t errlen)
{
	static const struct http1_limits lim = { .max_head = SIZE_MAX / 4, .max_headers = 4 };
	struct iovec v[KEY_PARTS];
	size_t hostlen = host ? strlen(host) : strlen(EXPLAIN_HOST);
	/* head, the normalised target (never longer), then room for the
	 * key: the target's bytes and at most one separator between any two
	 * of them */
	size_t head = 4 + len + 11 + 6 + hostlen + 4, norm = head, need = norm + len + 2 * len + 4, n;
	ssize_t r;
	char *p;

	if (memchr(target, '\r', len) || memchr(target, '\n', len) ||
	    (host && strpbrk(host, "\r\n"))) {
		snprintf(err, errlen, "a request target or Host has no line breaks");
		return -1;
	}
	if (need > t->cap) {
		p = realloc(t->buf, need);
		if (!p) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		t->buf = p;
		t->cap = need;
	}
	p = t->buf;
	memcpy(p, "GET ", 4);
	memcpy(p + 4, target, len);
	n = (size_t)snprintf(p + 4 + len, t->cap - 4 - len, " HTTP/1.1\r\nHost: %s\r\n\r\n",
			     host ? host : EXPLAIN_HOST) + 4 + len;
	http1_msg_init(&t->msg);
	r = http1_parse_request(&t->msg, t->hdrs, p, n, &lim);
	if (r <= 0) {
		snprintf(err, errlen, "not a request target a client could send (%s)",
			 r == 0 ? "incomplete" : t->msg.error ? t->msg.error : "invalid");
		return -1;
	}
	t->sent = (struct query_sent){ { NULL, 0 }, { NULL, 0 } };
	if (q)
		query_apply(q, &t->msg, p + norm, &t->sent);
	head = norm + len;
	n = key_parts(mode, &t->msg, v);
	t->key = p + head;
	t->keylen = 0;
	for (size_t i = 0; i < n; i++) {
		memcpy(p + head + t->keylen, v[i].iov_base, v[i].iov_len);
		t->keylen += v[i].iov_len;
	}
	t->pos = ring_key_pos((enum ring_scheme)scheme, v, n, &t->u);
	return 0;
}

void explain_target_free(struct explain_target *t)
{
	free(t->buf);
	t->buf = NULL;
	t->cap = 0;
}

/* The warm ramp's part, as balance_next applies it (balance_held): while
 * the ramp runs, a key whose previous owner differs from its owner is
 * asked of that previous owner first until its own moment of the window,
 * and goes there if that backend would take it; otherwise the walk's
 * target stands. */
static void explain_ramp(struct explain *e, const struct snapshot *s, const struct http1_msg *req,
			 uint64_t u, int64_t now_ms)
{
	const struct snap_ramp *r = s->ramp;
	uint64_t pos[SNAP_RAMP_STEPS];
	struct iovec v = { (void *)(uintptr_t)e->key, e->keylen };
	int prev, to;

	e->ramp_prev = -1;
	if (!r || now_ms >= r->end_ms || e->owner < 0)
		return;
	/* a step's ring made under another scheme or [ring] key places the
	 * key elsewhere: from the request as the request path does, or for
	 * a key given as such by each scheme's hash of it */
	for (size_t i = 0; i < r->nsteps; i++)
		pos[i] = req || r->step[i].ring->scheme == s->ring->scheme ? e->pos :
			 ring_key_pos(r->step[i].ring->scheme, &v, 1, NULL);
	if (req)
		key_ramp(s, req, pos);
	to = ring_ramp_owner_at(r->step, r->nsteps, pos, u, now_ms, &prev);
	if (prev < 0 || prev == e->owner)
		return;
	e->ramp_prev = prev;
	if (to != prev)
		return;
	e->ramp_held = true;
	e->ramp_switch_in_ms = ring_ramp_moment(&r->step[0], u) - now_ms;
	if (e->ramp_switch_in_ms < 0)
		e->ramp_switch_in_ms = 0;
	balance_explain_held(s, prev, e->pos, &e->held_why);
	if (e->held_why.verdict == BALANCE_OK) {
		e->target = prev;
		e->ramp_target = true;
	}
}

/* explain_key's body; req: the request the key is of, or NULL. */
static void explain_key_of(struct explain *e, const struct snapshot *s, const char *key, size_t len,
			   const struct http1_msg *req, int walk, const struct cache *cache,
			   const struct cache_key *ckey, int64_t now)
{
	uint64_t u;

	memset(e, 0, sizeof(*e));
	e->key = key;
	e->keylen = len;
	e->pos = ring_key_pos(s->ring->scheme, &(struct iovec){ (void *)(uintptr_t)key, len }, 1, &u);
	e->owner = ring_lookup(s->ring, e->pos);
	if (walk < 1)
		walk = 1;
	if (walk < (int)s->conf->replicas)
		walk = (int)s->conf->replicas;
	if (walk > EXPLAIN_MAX_WALK)
		walk = EXPLAIN_MAX_WALK;
	e->target = e->owner < 0 ? -1 : balance_explain_walk(s, e->pos, e->order, e->why, walk, &e->n);
	e->nlist = e->n < (int)s->conf->replicas ? e->n : (int)s->conf->replicas;
	explain_ramp(e, s, req, u, registry_now_ms());
	if (cache && ckey) {
		e->cache_known = true;
		cache_peek(cache, ckey, now, &e->peek);
	}
}

void explain_key(struct explain *e, const struct snapshot *s, const char *key, size_t len,
		 int walk, const struct cache *cache, const struct cache_key *ckey, int64_t now)
{
	explain_key_of(e, s, key, len, NULL, walk, cache, ckey, now);
}

void explain_url(struct explain *e, const struct snapshot *s, const struct explain_target *t, int walk,
		 const struct cache *cache, const struct cache_key *ckey, int64_t now)
{
	explain_key_of(e, s, t->key, t->keylen, &t->msg, walk, cache, ckey, now);
	e->by_url = true;
	/* an origin-form target without host= has the stand-in Host only */
	e->has_host = t->msg.authority.len ||
		      (t->msg.host.len && (t->msg.host.len != strlen(EXPLAIN_HOST) ||
					   memcmp(t->msg.host.p, EXPLAIN_HOST, t->msg.host.len) != 0));
}

static const char *explain_verdict_name(enum balance_verdict v)
{
	switch (v) {
	case BALANCE_OK: return "ok";
	case BALANCE_DRAINED: return "drained";
	case BALANCE_DOWN: return "down";
	case BALANCE_FULL: return "full";
	case BALANCE_BOUNDED: return "bounded";
	case BALANCE_RAMPING: return "ramping";
	}
	return "?";
}

void explain_why_text(const struct balance_why *w, const struct snapshot *s, int i,
		      char *out, size_t len)
{
	switch (w->verdict) {
	case BALANCE_OK:
		if (w->trial)
			snprintf(out, len, "down, but a trial request is due: it would get this one");
		else
			*out = '\0';
		break;
	case BALANCE_DRAINED:
		snprintf(out, len, "drained: weight 0, it owns no keys");
		break;
	case BALANCE_DOWN:
		snprintf(out, len, "down: health checks took it out");
		break;
	case BALANCE_FULL:
		snprintf(out, len, "at max_inflight: %ld in flight of %ld", w->inflight, w->max_inflight);
		break;
	case BALANCE_BOUNDED:
		if (w->hot || w->rare_cap < 0)
			snprintf(out, len, "over its bounded-load cap: %ld in flight, cap %ld = ceil(%g x (%ld in flight in all + 1) x weight %g / up weight %g)",
				 w->inflight, w->cap, s->conf->balance_factor, w->total,
				 s->ring->weights[i], w->up_weight);
		else
			snprintf(out, len, "over the bound of keys that are not hot: %ld in flight, bound %ld = cap %ld x (1 - h) / 2h, h = %.0f%% of recent requests for hot keys",
				 w->inflight, w->rare_cap, w->cap, 100.0 * balance_hot_share());
		break;
	case BALANCE_RAMPING:
		snprintf(out, len, "ramping up after recovery: %.0f%% of its keys are back, not this one yet",
			 100.0 * w->ramp);
		break;
	}
}

/* Whether the target is a copy of the key's list other than its primary
 * sharing its load (balance.c, balance_list): the primary up and not at
 * its hard cap or ramping, so not a failover or a spill. */
static bool explain_replica(const struct explain *e)
{
	enum balance_verdict v = e->n ? e->why[0].verdict : BALANCE_DOWN;

	if (e->ramp_target || e->target == e->owner || (v != BALANCE_OK && v != BALANCE_BOUNDED))
		return false;
	for (int k = 1; k < e->nlist; k++)
		if (e->order[k] == e->target)
			return true;
	return false;
}

/* How the target relates to the owner, in words. */
static const char *explain_route(const struct explain *e)
{
	if (e->owner < 0)
		return "the ring has no points: 503";
	if (e->ramp_target)
		return "ramp: held on its previous owner until its moment of the warm ramp";
	if (e->target < 0)
		return "no backend of the walk would take it now: 503";
	if (e->target == e->owner)
		return e->why[0].verdict == BALANCE_OK ? "owner" : "owner, over its bounded-load cap or ramping, as no other backend would take it";
	if (explain_replica(e))
		return "replica: the least loaded of the key's list";
	if (e->n && e->why[0].verdict == BALANCE_DOWN)
		return "failover: the owner is down";
	return "spill: the owner would not take it now";
}

/* The route in one word, as the access log's why= says it. */
static const char *explain_reason(const struct explain *e)
{
	if (e->target < 0)
		return "none";
	if (e->ramp_target)
		return "ramp";
	if (e->target == e->owner)
		return "owner";
	if (explain_replica(e))
		return "replica";
	if (e->n && e->why[0].verdict == BALANCE_DOWN)
		return "failover";
	return e->n && e->why[0].verdict == BALANCE_RAMPING ? "ramp" : "spill";
}

static void explain_json_name(struct evbuffer *out, const struct snapshot *s, int i)
{
	if (i < 0)
		evbuffer_add(out, "null", 4);
	else
		stats_json_str(out, s->ring->names[i]);
}

void explain_json(const struct explain *e, const struct snapshot *s, struct evbuffer *out)
{
	char why[512];

	evbuffer_add(out, "{\"key\": ", 8);
	stats_json_strn(out, e->key, e->keylen);
	evbuffer_add_printf(out, ", \"position\": %" PRIu64 ", \"position_hex\": \"%016" PRIx64 "\", \"owner\": ",
			    e->pos, e->pos);
	explain_json_name(out, s, e->owner);
	evbuffer_add(out, ", \"list\": [", 11);
	for (int k = 0; k < e->nlist; k++) {
		if (k)
			evbuffer_add(out, ", ", 2);
		explain_json_name(out, s, e->order[k]);
	}
	evbuffer_add(out, "]", 1);
	evbuffer_add(out, ", \"walk\": [", 11);
	for (int k = 0; k < e->n; k++) {
		const struct balance_why *w = &e->why[k];

		evbuffer_add(out, k ? ", {\"name\": " : "{\"name\": ", k ? 11 : 9);
		explain_json_name(out, s, e->order[k]);
		explain_why_text(w, s, e->order[k], why, sizeof(why));
		evbuffer_add_printf(out, ", \"eligible\": %s, \"verdict\": \"%s\", \"why\": ",
				    w->verdict == BALANCE_OK ? "true" : "false", explain_verdict_name(w->verdict));
		stats_json_str(out, why);
		evbuffer_add_printf(out, ", \"inflight\": %ld, \"max_inflight\": %ld, \"cap\": ", w->inflight,
				    w->max_inflight);
		if (w->cap >= 0)
			evbuffer_add_printf(out, "%ld, \"total_inflight\": %ld, \"up_weight\": %.17g", w->cap,
					    w->total, w->up_weight);
		else
			evbuffer_add(out, "null", 4);
		/* the count that moves this key when it is not hot: null when
		 * it is hot (the cap applies) or nothing bounds it (even load) */
		if (w->cap >= 0 && !w->hot && w->rare_cap >= 0 && w->rare_cap != LONG_MAX)
			evbuffer_add_printf(out, ", \"rare_cap\": %ld", w->rare_cap);
		else
			evbuffer_add(out, ", \"rare_cap\": null", sizeof(", \"rare_cap\": null") - 1);
		evbuffer_add_printf(out, ", \"hot\": %s, \"ramp\": %.17g}", w->hot ? "true" : "false", w->ramp);
	}
	evbuffer_add(out, "], \"ramp\": ", 11);
	if (e->ramp_prev < 0) {
		evbuffer_add(out, "null", 4);
	} else {
		const struct balance_why *w = &e->held_why;

		evbuffer_add(out, "{\"previous_owner\": ", 19);
		explain_json_name(out, s, e->ramp_prev);
		evbuffer_add_printf(out, ", \"held\": %s", e->ramp_held ? "true" : "false");
		if (e->ramp_held) {
			explain_why_text(w, s, e->ramp_prev, why, sizeof(why));
			evbuffer_add_printf(out, ", \"switch_in_ms\": %" PRId64 ", \"eligible\": %s, \"verdict\": \"%s\", \"why\": ",
					    e->ramp_switch_in_ms, w->verdict == BALANCE_OK ? "true" : "false",
					    explain_verdict_name(w->verdict));
			stats_json_str(out, why);
		}
		evbuffer_add(out, "}", 1);
	}
	evbuffer_add(out, ", \"held\": ", 10);
	explain_json_name(out, s, e->ramp_target ? e->ramp_prev : -1);
	evbuffer_add(out, ", \"reason\": ", 12);
	stats_json_str(out, explain_reason(e));
	evbuffer_add(out, ", \"target\": ", 12);
	explain_json_name(out, s, e->target);
	evbuffer_add(out, ", \"route\": ", 11);
	stats_json_str(out, explain_route(e));
	evbuffer_add(out, ", \"cached\": ", 12);
	if (!e->cache_known)
		evbuffer_add(out, "null", 4);
	else
		evbuffer_add_printf(out, "%s, \"cache\": {\"objects\": %u, \"fresh\": %u, \"ttl\": %" PRId64 ", \"filling\": %s}",
				    e->peek.fresh ? "true" : "false", e->peek.objects, e->peek.fresh,
				    e->peek.ttl, e->peek.filling ? "true" : "false");
	evbuffer_add(out, "}\n", 2);
}

void explain_text(const struct explain *e, const struct snapshot *s, struct evbuffer *out)
{
	char why[512];

	evbuffer_add(out, "key       ", 10);
	evbuffer_add(out, e->key, e->keylen);
	evbuffer_add_printf(out, "\nposition  %" PRIu64 " (0x%016" PRIx64 ", %.4f%% around the ring)\n", e->pos,
			    e->pos, 100.0 * ((double)e->pos / 18446744073709551616.0));
	evbuffer_add_printf(out, "owner     %s\n", e->owner >= 0 ? s->ring->names[e->owner] : "(none: the ring has no points)");
	if (e->nlist > 1) {
		evbuffer_add(out, "list     ", 9);
		for (int k = 0; k < e->nlist; k++)
			evbuffer_add_printf(out, " %s", s->ring->names[e->order[k]]);
		evbuffer_add_printf(out, " (replicas = %d: the first %d distinct backends of the walk)\n",
				    (int)s->conf->replicas, e->nlist);
	}
	evbuffer_add_printf(out, "goes to   %s (%s)\n", e->target >= 0 ? s->ring->names[e->target] : "(none)",
			    explain_route(e));
	if (e->ramp_prev >= 0 && e->ramp_held) {
		explain_why_text(&e->held_why, s, e->ramp_prev, why, sizeof(why));
		evbuffer_add_printf(out, "ramp      moved from %s by the warm ramp, held there for %" PRId64 " ms more: %s%s%s\n",
				    s->ring->names[e->ramp_prev], e->ramp_switch_in_ms,
				    e->ramp_target ? "it would take it" : "it would not take it",
				    *why ? ": " : "", why);
	} else if (e->ramp_prev >= 0) {
		evbuffer_add_printf(out, "ramp      moved from %s by the warm ramp; switched to its new owner\n",
				    s->ring->names[e->ramp_prev]);
	}
	if (!e->cache_known && !e->by_url)
		evbuffer_add_printf(out, "cache     not known: a key is not a cache key (ask with url= and host=)\n");
	else if (!e->cache_known && !e->has_host)
		evbuffer_add_printf(out, "cache     not known: the cache keys by host and target; give a full URL, "
				    "or host= too\n");
	else if (!e->cache_known)
		evbuffer_add_printf(out, "cache     not known: the proxy has no cache ([cache] size = 0)\n");
	else if (e->peek.objects)
		evbuffer_add_printf(out, "cache     %u stored variant%s, %s (%" PRId64 " s of freshness left)%s\n",
				    e->peek.objects, e->peek.objects == 1 ? "" : "s",
				    e->peek.fresh ? "fresh: a request would be answered from memory" : "stale",
				    e->peek.ttl, e->peek.filling ? "; a fetch is in flight" : "");
	else
		evbuffer_add_printf(out, "cache     not stored%s\n", e->peek.filling ? "; a fetch is in flight" : "");
	evbuffer_add(out, "walk\n", 5);
	for (int k = 0; k < e->n; k++) {
		const struct balance_why *w = &e->why[k];

		explain_why_text(w, s, e->order[k], why, sizeof(why));
		evbuffer_add_printf(out, "  %d. %-20s %s%s%s\n", k + 1, s->ring->names[e->order[k]],
				    w->verdict == BALANCE_OK ? "would take it" : "would not take it",
				    *why ? ": " : "", why);
	}
}
