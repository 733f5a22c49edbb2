/*
 * balance.c -- eligibility of a backend for one more request, and the walk
 * that applies it: the ring owner first, then each next distinct backend
 * clockwise (the fixed scheme of ARCHITECTURE.md). A down backend is
 * skipped but keeps its points, so its keys come back when it does.
 *
 * Loads are read from the registry's atomic in-flight counters, shared by
 * every worker; a reading may be a request or two stale, which the cap's
 * slack absorbs.
 */
#include "backend/balance.h"

#include <limits.h>
#include <math.h>
#include <string.h>

#include "backend/health.h"
#include "backend/registry.h"
#include "base/sketch.h"

_Static_assert(BALANCE_LIST_MAX == RING_LIST_MAX, "a pick holds any preference list");

/*
 * Which keys are hot: a count-min sketch (sketch.h) of the keys of this
 * process's requests, 8-bit counters, halved every BALANCE_HOT_WINDOW
 * requests, so a count is the key's requests over the last one to two
 * windows. In steady state a key with share p of requests counts p x
 * window right after a halving and 2 p x window just before the next,
 * while the requests counted since the halving run from window to 2 x
 * window with them: p = estimate / (window + requests since the halving).
 * Sized for about 1,024 distinct keys in a window: many more rare keys
 * only raise the estimates by a count or two (collisions), far below the
 * threshold (BALANCE_HOT_MIN). Its own sketch, not the cache's: the cache
 * may be off, and its sketch counts admissions with 4-bit counters.
 * Created by the first request; any worker increments it, lock-free.
 */
#define BALANCE_HOT_KEYS   1024
/* the sketch's window (sketch_window): read as this constant, a power of
 * two, so the divisions by it on every forward are shifts, not divides */
#define BALANCE_HOT_WINDOW 1024
/* The fewest counts that make a key hot whatever the concurrency: under
 * 8 of 1,024 to 2,048 requests (0.4-0.8%) is noise of a count-min. */
#define BALANCE_HOT_MIN    8

static _Atomic(struct sketch *) balance_sketch;
/* recent requests for a hot key, and the sketch window they were last
 * halved for (balance_count_hot) */
static _Atomic uint64_t balance_nhot, balance_hot_epoch;

static struct sketch *balance_hot_sketch(void)
{
	struct sketch *s = atomic_load_explicit(&balance_sketch, memory_order_acquire);
	struct sketch *none = NULL;

	if (s)
		return s;
	s = sketch_new(BALANCE_HOT_KEYS, 8, BALANCE_HOT_WINDOW, 0);
	if (s == NULL)
		return NULL;
	if (!atomic_compare_exchange_strong_explicit(&balance_sketch, &none, s,
						     memory_order_acq_rel, memory_order_acquire)) {
		sketch_free(s);         /* another worker's came first */
		return none;
	}
	return s;
}

void balance_seen(uint64_t pos)
{
	struct sketch *s = balance_hot_sketch();

	if (s)
		sketch_increment(s, pos);
}

void balance_hot_reset(void)
{
	sketch_free(atomic_exchange(&balance_sketch, NULL));
	atomic_store(&balance_nhot, 0);
	atomic_store(&balance_hot_epoch, 0);
}

/* What the sketch's counters of `samples` requests add up to, halved at
 * every window: the requests since the last halving, plus half of the
 * window before, a quarter of the one before that, and so on. A key's
 * estimate over this is its share p of the requests; before the first
 * halving it is plain samples, and in steady state window plus the
 * requests since the halving. (Taking window + samples % window from the
 * first halving on, as a steady state, halved the shares read in the
 * second window: in hotkey.sh the hot share fell from 1/2 to 1/4 there.) */
static uint64_t balance_decayed(uint64_t samples, uint64_t window)
{
	uint64_t k = samples / window;

	return samples % window + (k >= 64 ? window : window - (window >> k));
}

/* Whether a key whose estimate in sketch s is est is hot (see
 * balance_is_hot). */
static bool balance_hot_est(struct sketch *s, unsigned est, long total)
{
	uint64_t window, seen;

	if (est < BALANCE_HOT_MIN)
		return false;
	/* a saturated counter: 255 of at most 2,048 requests, 1 in 8 */
	if (est >= sketch_max(s))
		return true;
	window = BALANCE_HOT_WINDOW;    /* sketch_window(s), as a constant */
	seen = balance_decayed(sketch_samples(s), window);
	/* the key's expected share of the requests in flight, p x (total +
	 * 1), is at least one whole request: moving it frees a slot */
	return (uint64_t)est * (uint64_t)(total + 1) >= seen;
}

bool balance_is_hot(uint64_t pos, long total)
{
	struct sketch *s = atomic_load_explicit(&balance_sketch, memory_order_acquire);

	return s != NULL && balance_hot_est(s, sketch_estimate(s, pos), total);
}

/* balance_is_hot for a request's key: from the count balance_start saw
 * (hot_est, see struct balance_pick) when there is one, so the sketch's
 * rows are not read again for the owner's verdict and for owner_hot. */
static bool balance_pick_hot(uint64_t pos, unsigned hot_est, long total)
{
	struct sketch *s;

	if (hot_est == 0)
		return balance_is_hot(pos, total);
	s = atomic_load_explicit(&balance_sketch, memory_order_acquire);
	return s != NULL && balance_hot_est(s, hot_est - 1, total);
}

/*
 * The share of recent requests whose key was hot when placed
 * (balance_start counts them): the part of the load in flight that the cap
 * may move. Kept like one more key of the sketch: a counter of hot
 * requests halved at each of the sketch's windows (balance_hot_epoch is
 * the window it was last halved for), read against the sketch's requests
 * the same way as a key's estimate. Only a hot request writes it, so under
 * even load no request writes a shared line (the sketch's own request
 * count is published in per-thread batches). The halving races with
 * increments; the share is approximate, which is all the rare keys' bound
 * needs.
 */
static void balance_hot_decay(uint64_t epoch)
{
	uint64_t e = atomic_load_explicit(&balance_hot_epoch, memory_order_relaxed);

	if (epoch > e && atomic_compare_exchange_strong_explicit(&balance_hot_epoch, &e, epoch,
								  memory_order_relaxed,
								  memory_order_relaxed)) {
		uint64_t h = atomic_load_explicit(&balance_nhot, memory_order_relaxed);
		uint64_t keep = epoch - e >= 64 ? 0 : h >> (epoch - e);

		atomic_fetch_sub_explicit(&balance_nhot, h - keep, memory_order_relaxed);
	}
}

static void balance_count_hot(void)
{
	struct sketch *s = atomic_load_explicit(&balance_sketch, memory_order_acquire);

	if (s == NULL)
		return;
	balance_hot_decay(sketch_samples(s) / BALANCE_HOT_WINDOW);
	atomic_fetch_add_explicit(&balance_nhot, 1, memory_order_relaxed);
}

double balance_hot_share(void)
{
	struct sketch *s = atomic_load_explicit(&balance_sketch, memory_order_acquire);
	uint64_t window, seen, h, e, epoch;

	if (s == NULL)
		return 0;
	window = BALANCE_HOT_WINDOW;
	seen = sketch_samples(s);
	epoch = seen / window;
	h = atomic_load_explicit(&balance_nhot, memory_order_relaxed);
	e = atomic_load_explicit(&balance_hot_epoch, memory_order_relaxed);
	/* no hot request since windows went by: as if halved for each */
	if (epoch > e)
		h = epoch - e >= 64 ? 0 : h >> (epoch - e);
	seen = balance_decayed(seen, window);
	return seen == 0 ? 0 : h >= seen ? 1 : (double)h / (double)seen;
}

long balance_rare_cap(long cap, double hot_share)
{
	double room;

	if (hot_share <= 0)
		return LONG_MAX;
	if (hot_share >= 1)
		return cap;
	room = (double)cap * (1 - hot_share) / (2 * hot_share);
	if (room >= (double)(LONG_MAX / 2))
		return LONG_MAX;
	/* a rounding error of the share is not a request more */
	return room > (double)cap + 1e-6 ? (long)ceil(room - 1e-6) : cap;
}

long balance_cap(double c, long total, double w, double W)
{
	if (W <= 0)
		return 0;
	return (long)ceil(c * (double)(total + 1) * w / W);
}

/* Whether backend a, with load la, is less loaded than b with lb: in
 * flight per unit of weight, as the bounded-load cap measures a fair
 * share. */
static bool balance_less(const struct snapshot *s, int a, long la, int b, long lb)
{
	return (double)la * s->ring->weights[b] < (double)lb * s->ring->weights[a];
}

bool balance_cache_get(const struct balance_cache *c, uint64_t gen, double *w)
{
	uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
	uint64_t g;
	double v;

	if (seq & 1)
		return false;
	g = atomic_load_explicit(&c->gen, memory_order_relaxed);
	v = atomic_load_explicit(&c->up_weight, memory_order_relaxed);
	/* the two loads above happen before seq is read again */
	atomic_thread_fence(memory_order_acquire);
	if (atomic_load_explicit(&c->seq, memory_order_relaxed) != seq || g != gen)
		return false;
	*w = v;
	return true;
}

void balance_cache_put(struct balance_cache *c, uint64_t gen, double w)
{
	uint64_t seq = atomic_load_explicit(&c->seq, memory_order_relaxed);

	/* One writer at a time, or a pair could mix two writers' halves: the
	 * others leave it (they have their weight; the next caller computes
	 * again at worst). */
	if ((seq & 1) || !atomic_compare_exchange_strong_explicit(&c->seq, &seq, seq + 1,
								   memory_order_relaxed,
								   memory_order_relaxed))
		return;
	/* readers that see the new halves see the odd seq */
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&c->gen, gen, memory_order_relaxed);
	atomic_store_explicit(&c->up_weight, w, memory_order_relaxed);
	atomic_store_explicit(&c->seq, seq + 2, memory_order_release);
}

/* Weight of the backends with points that are up; recomputed only when a
 * health transition happened since. */
static double balance_up_weight(const struct snapshot *s)
{
	uint64_t gen = atomic_load_explicit(&registry_health_gen, memory_order_acquire);
	double W = 0;

	if (balance_cache_get(s->cache, gen, &W))
		return W;
	for (size_t i = 0; i < s->nbe; i++)
		if (s->ring->npoints_of[i] && !atomic_load(&s->be[i].state->down))
			W += s->ring->weights[i];
	balance_cache_put(s->cache, gen, W);
	return W;
}

/* Slow start: a fraction of keys, growing with time since recovery, goes
 * back to the backend; a key's own hash decides, so a key that has come
 * back stays back. *back gets that fraction (1: not ramping). A request
 * (pure false) also ends a ramp that is over; an explanation (pure true)
 * writes nothing. */
static int balance_ramping(const struct snapshot *s, int i, uint64_t pos, bool pure,
			   double *back)
{
	struct backend *b = s->be[i].state;
	int64_t since = atomic_load_explicit(&b->up_since_ms, memory_order_relaxed);
	uint64_t span = s->be[i].conf->slow_start_ms;
	int64_t now;
	uint64_t mixed;

	*back = 1;
	if (since == 0)
		return 0;
	now = registry_now_ms();
	if (span == 0 || now - since >= (int64_t)span) {
		/* the ramp that began at since is over; one that began since
		 * (the backend fell and came back meanwhile) is kept */
		if (!pure)
			atomic_compare_exchange_strong_explicit(&b->up_since_ms, &since, 0,
								memory_order_relaxed,
								memory_order_relaxed);
		return 0;
	}
	*back = (double)(now - since) / (double)span;
	/* the low bits of the position, mixed: independent of which arc */
	mixed = (pos ^ (pos >> 29)) * 0xbf58476d1ce4e5b9ull;
	return (double)(mixed >> 40) / (double)(1ull << 24) >= *back;
}

/* The verdict, and in *limit the in-flight count the backend may reach
 * (its hard cap, or the bounded-load cap, whichever is lower; LONG_MAX for
 * none): workers race between checking and taking a slot, so the slot is
 * taken by compare-and-swap against that limit. held: for a key a warm
 * ramp holds on i, its previous owner, which may have been drained (weight
 * 0 now: it still has the key's object) and is capped at weight w. With ex
 * (an explanation, not a request) nothing is written: a down backend's
 * trial is looked at, not claimed, and ex gets the numbers behind the
 * verdict. */
static enum balance_verdict balance_verdict(const struct snapshot *s, int i, uint64_t pos,
					    unsigned hot_est, bool held, double w, long *limit,
					    struct balance_why *ex)
{
	struct backend *b = s->be[i].state;
	const struct conf *conf = s->conf;
	long inflight;
	bool trial = false, stand_in = false;
	double back;
	enum balance_verdict v = BALANCE_OK;

	*limit = LONG_MAX;
	if (!held && s->ring->npoints_of[i] == 0)
		return BALANCE_DRAINED;
	/* a name that did not resolve: no address to send to, whatever its
	 * health says (snapshot.c) */
	if (s->be[i].addrlen == 0)
		return BALANCE_DOWN;
	if (atomic_load_explicit(&b->down, memory_order_relaxed)) {
		/* a backend new with active checks (health.c) waits for its
		 * first check, unless none is up: then it stands in, as the
		 * ring places it, rather than every request getting a 503 */
		stand_in = atomic_load_explicit(&b->checking, memory_order_relaxed) &&
			   balance_up_weight(s) == 0;
		if (!stand_in)
			trial = ex ? health_trial_due(b, s->be[i].conf) : health_trial(b, s->be[i].conf, conf);
		if (ex)
			ex->trial = trial;
		if (!trial && !stand_in)
			return BALANCE_DOWN;
	}
	inflight = atomic_load_explicit(&b->inflight, memory_order_relaxed);
	if (ex)
		ex->inflight = inflight;
	if (s->be[i].conf->max_inflight) {
		*limit = (long)s->be[i].conf->max_inflight;
		if (inflight >= *limit)
			return BALANCE_FULL;
	}
	/* a trial is one request, and a down backend is not in the up
	 * weight: its cap would be 0 when every backend is down (as it is
	 * while they stand in) */
	if (conf->balance_factor > 0 && !trial && !stand_in) {
		long total = atomic_load_explicit(&registry_total_inflight, memory_order_relaxed);
		double W = balance_up_weight(s);
		long cap = balance_cap(conf->balance_factor, total, w, W);
		/* the cap moves hot keys (balance_is_hot); a rare key stays
		 * on its owner, which holds its object, up to a cap that
		 * shrinks to this one as hot keys take over the load
		 * (balance_rare_cap): none under even load. A key a warm
		 * ramp holds on its previous owner is a rare key there unless
		 * hot: holding it is the ramp's point. */
		bool hot = balance_pick_hot(pos, hot_est, total);
		long bound = hot ? cap : balance_rare_cap(cap, balance_hot_share());

		if (ex) {
			ex->total = total;
			ex->up_weight = W;
			ex->cap = cap;
			ex->rare_cap = hot ? -1 : bound;
			ex->hot = hot;
		}
		if (inflight >= bound)
			v = BALANCE_BOUNDED;
		else if (bound < *limit)
			*limit = bound;
	}
	/* an explanation still says how far a bounded backend ramps */
	if ((v == BALANCE_OK || ex) && balance_ramping(s, i, pos, ex != NULL, &back) && v == BALANCE_OK)
		v = BALANCE_RAMPING;
	if (ex)
		ex->ramp = back;
	return v;
}

enum balance_verdict balance_check(const struct snapshot *s, int i, uint64_t pos)
{
	long limit;

	return balance_verdict(s, i, pos, 0, false, s->ring->weights[i], &limit, NULL);
}

/* The verdict for backend i with its numbers in why, as a request for
 * the key at pos would meet it (held: on a warm ramp's previous owner,
 * capped at weight w). */
static void balance_explain_as(const struct snapshot *s, int i, uint64_t pos, bool held, double w,
			       struct balance_why *why)
{
	long limit;

	memset(why, 0, sizeof(*why));
	why->cap = -1;
	why->rare_cap = -1;
	why->ramp = 1;
	why->max_inflight = s->be[i].conf->max_inflight;
	why->inflight = atomic_load_explicit(&s->be[i].state->inflight, memory_order_relaxed);
	why->verdict = balance_verdict(s, i, pos, 0, held, w, &limit, why);
}

void balance_explain(const struct snapshot *s, int i, uint64_t pos, struct balance_why *why)
{
	balance_explain_as(s, i, pos, false, s->ring->weights[i], why);
}

void balance_explain_held(const struct snapshot *s, int i, uint64_t pos, struct balance_why *why)
{
	balance_explain_as(s, i, pos, true, s->ramp->weight[i], why);
}

int balance_explain_walk(const struct snapshot *s, uint64_t pos, int *order,
			 struct balance_why *why, int n, int *nout)
{
	struct ring_walk w;
	int i, k = 0, target = -1, soft = -1, best = -1;
	long best_load = 0;
	uint32_t list = s->conf->replicas;

	ring_walk_init(&w, s->ring, pos);
	while ((i = ring_walk_next(&w)) >= 0 && (k < n || target < 0 || w.yielded <= list)) {
		struct balance_why one;

		balance_explain(s, i, pos, &one);
		if (k < n) {
			order[k] = i;
			why[k++] = one;
		}
		/* as balance_list: the least loaded of the key's list */
		if (list > 1 && w.yielded <= list && one.verdict == BALANCE_OK &&
		    (best < 0 || balance_less(s, i, one.inflight, best, best_load))) {
			best = i;
			best_load = one.inflight;
		}
		if (target < 0 && one.verdict == BALANCE_OK)
			target = i;
		if (soft < 0 && (one.verdict == BALANCE_BOUNDED || one.verdict == BALANCE_RAMPING))
			soft = i;
	}
	if (best >= 0)
		target = best;
	/* as balance_next: the first soft candidate, if its hard cap has
	 * room (balance_acquire) */
	if (target < 0 && soft >= 0 &&
	    (!s->be[soft].conf->max_inflight ||
	     atomic_load_explicit(&s->be[soft].state->inflight, memory_order_relaxed) <
	     (long)s->be[soft].conf->max_inflight))
		target = soft;
	*nout = k;
	return target;
}

/* Take a slot if the count is below limit. */
static bool balance_take(struct backend *b, long limit)
{
	long n = atomic_load_explicit(&b->inflight, memory_order_relaxed);

	if (limit == LONG_MAX) {
		atomic_fetch_add_explicit(&b->inflight, 1, memory_order_relaxed);
	} else {
		do {
			if (n >= limit)
				return false;
		} while (!atomic_compare_exchange_weak_explicit(&b->inflight, &n, n + 1,
								memory_order_relaxed,
								memory_order_relaxed));
	}
	atomic_fetch_add_explicit(&registry_total_inflight, 1, memory_order_relaxed);
	return true;
}

bool balance_acquire(struct backend *b, const struct conf_backend *cb)
{
	return balance_take(b, cb->max_inflight ? (long)cb->max_inflight : LONG_MAX);
}

void balance_hold(struct backend *b)
{
	atomic_fetch_add_explicit(&b->inflight, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&registry_total_inflight, 1, memory_order_relaxed);
}

void balance_release(struct backend *b)
{
	atomic_fetch_sub_explicit(&b->inflight, 1, memory_order_relaxed);
	atomic_fetch_sub_explicit(&registry_total_inflight, 1, memory_order_relaxed);
}

void balance_start(const struct snapshot *s, struct ring_walk *w, struct balance_pick *pick,
		   uint64_t pos, uint64_t u)
{
	struct sketch *sk = balance_hot_sketch();
	/* balance_seen, whose increment also gives the key's estimate */
	unsigned est = sk != NULL ? sketch_increment(sk, pos) : 0;

	if (sk != NULL && s->conf->balance_factor > 0 &&
	    balance_hot_est(sk, est, atomic_load_explicit(&registry_total_inflight, memory_order_relaxed)))
		balance_count_hot();
	ring_walk_init(w, s->ring, pos);
	pick->backend = -1;
	pick->owner = -1;
	pick->owner_verdict = BALANCE_OK;
	pick->owner_hot = 0;
	pick->any_full = 0;
	pick->key_u = u;
	pick->hot_est = sk != NULL ? est + 1 : 0;
	for (size_t i = 0; i < BALANCE_RAMP_STEPS; i++)
		pick->ramp_pos[i] = pos;
	pick->nlist = 0;
	pick->replica = 0;
	pick->ramp = 0;
}

/*
 * The warm ramp's part of a choice (ring.h, snapshot.h): a key whose owner
 * the last reload changed goes on to its previous owner until its own
 * moment of the window, so the new owner fills gradually. Only while that
 * backend can take the request: down, at its hard cap or over its
 * bounded-load cap (for a held key that is not hot, the rare keys' bound:
 * none under even load, as holding it is the point), the key goes to its
 * new owner at once, for this request (a previous owner that comes back
 * gets its held keys back).
 * True when the previous owner took the request (its slot is held).
 */
static bool balance_held(const struct snapshot *s, struct ring_walk *w, uint64_t pos,
			 struct balance_pick *pick)
{
	const struct snap_ramp *r = s->ramp;
	int64_t now = registry_now_ms();
	int owner, prev, to;
	long limit;
	enum balance_verdict v;

	if (now >= r->end_ms)
		return false;
	owner = w->start >= 0 ? (int)s->ring->points[w->start].backend : -1;
	to = ring_ramp_owner_at(r->step, r->nsteps, pick->ramp_pos, pick->key_u, now, &prev);
	if (prev < 0 || prev == owner)
		return false;           /* not moved, or nothing to ramp from */
	if (to == prev) {
		v = balance_verdict(s, prev, pos, pick->hot_est, true, r->weight[prev], &limit, NULL);
		if (v == BALANCE_OK && balance_take(s->be[prev].state, limit)) {
			pick->backend = pick->owner = prev;
			pick->owner_verdict = BALANCE_OK;
			pick->ramp = 3;
			ring_walk_skip(w, prev);
			atomic_fetch_add_explicit(&s->be[prev].state->ramp_held, 1, memory_order_relaxed);
			return true;
		}
		if (v == BALANCE_FULL)
			pick->any_full = 1;
	}
	pick->ramp = 2;
	return false;
}

/*
 * [ring] replicas > 1: the key's preference list, the first R distinct
 * backends of its walk, read from w on the first call. The request goes
 * to the least loaded member that can take it (up, under its caps), ties
 * to the first, so every member stays warm and a hot key's load is
 * shared by its copies before it spills: only when no member can take it
 * does balance_next go on along the walk. Each member is looked at
 * without a side effect (balance_explain: a down backend's trial is not
 * claimed by a member that is not chosen), then the chosen one is asked
 * as balance_next asks. *soft gets the first member that was only over
 * its bounded cap or ramping up. True when a member's slot is taken.
 */
static bool balance_list(const struct snapshot *s, struct ring_walk *w, uint64_t pos,
			 struct balance_pick *pick, int *soft)
{
	uint32_t lost = 0;      /* members that lost a race for their slot */
	bool first = pick->nlist == 0;
	int i;

	if (first) {
		while (pick->nlist < (int)s->conf->replicas && pick->nlist < BALANCE_LIST_MAX &&
		       (i = ring_walk_next(w)) >= 0)
			pick->list[pick->nlist++] = i;
		if (pick->nlist == 0)
			return false;
		pick->owner = pick->list[0];
	}
	for (;;) {
		int best = -1;
		long best_load = 0, limit;
		enum balance_verdict v;

		for (int k = 0; k < pick->nlist; k++) {
			struct balance_why why;
			int m = pick->list[k];

			if (m < 0 || (lost >> k & 1))
				continue;
			balance_explain(s, m, pos, &why);
			if (first && k == 0 && lost == 0) {
				pick->owner_verdict = why.verdict;
				pick->owner_hot = why.verdict == BALANCE_BOUNDED && why.hot;
			}
			if (why.verdict == BALANCE_FULL)
				pick->any_full = 1;
			if (why.verdict == BALANCE_OK &&
			    (best < 0 || balance_less(s, m, why.inflight, pick->list[best], best_load))) {
				best = k;
				best_load = why.inflight;
			}
			if (*soft < 0 && (why.verdict == BALANCE_BOUNDED || why.verdict == BALANCE_RAMPING))
				*soft = m;
		}
		if (best < 0)
			return false;
		i = pick->list[best];
		v = balance_verdict(s, i, pos, pick->hot_est, false, s->ring->weights[i], &limit, NULL);
		if (v == BALANCE_OK && balance_take(s->be[i].state, limit)) {
			pick->backend = i;
			pick->replica = best;
			/* a copy shares the key's load: no spill, no failover,
			 * unless the primary could not have taken it */
			if (i != pick->owner && (pick->owner_verdict == BALANCE_OK ||
						 pick->owner_verdict == BALANCE_BOUNDED)) {
				pick->owner = i;
				pick->owner_verdict = BALANCE_OK;
				pick->owner_hot = 0;
			}
			return true;
		}
		lost |= UINT32_C(1) << best;
	}
}

void balance_next(const struct snapshot *s, struct ring_walk *w, uint64_t pos,
		  struct balance_pick *pick)
{
	int i, soft = -1;

	pick->backend = -1;
	if (pick->ramp == 0) {
		pick->ramp = 1;
		if (s->ramp && balance_held(s, w, pos, pick))
			return;
	}
	if (s->conf->replicas > 1) {
		if (balance_list(s, w, pos, pick, &soft))
			goto placed;
		pick->replica = -1;
	}
	while ((i = ring_walk_next(w)) >= 0) {
		long limit;
		enum balance_verdict v = balance_verdict(s, i, pos, pick->hot_est, false, s->ring->weights[i],
							 &limit, NULL);

		if (w->yielded == 1) {
			pick->owner = i;
			pick->owner_verdict = v;
		}
		if (v == BALANCE_OK && !balance_take(s->be[i].state, limit)) {
			/* another worker took the last slot since the check */
			v = s->be[i].conf->max_inflight &&
			    atomic_load(&s->be[i].state->inflight) >= (long)s->be[i].conf->max_inflight ?
			    BALANCE_FULL : BALANCE_BOUNDED;
			if (w->yielded == 1)
				pick->owner_verdict = v;
		}
		if (w->yielded == 1)
			pick->owner_hot = v == BALANCE_BOUNDED &&
					  balance_pick_hot(pos, pick->hot_est,
							   atomic_load_explicit(&registry_total_inflight,
										memory_order_relaxed));
		if (v == BALANCE_FULL)
			pick->any_full = 1;
		if (v == BALANCE_OK) {
			pick->backend = i;
			goto placed;
		}
		/* the bounded cap and the slow-start ramp are preferences:
		 * they move a request along the walk, never turn it away */
		if (soft < 0 && (v == BALANCE_BOUNDED || v == BALANCE_RAMPING))
			soft = i;
	}
	if (soft >= 0 && balance_acquire(s->be[soft].state, s->be[soft].conf))
		pick->backend = soft;
placed:
	/* a retry goes to the list's other members first */
	for (int k = 0; k < pick->nlist && pick->backend >= 0; k++)
		if (pick->list[k] == pick->backend) {
			pick->list[k] = -1;
			if (pick->replica < 0)
				pick->replica = k;
		}
	if (pick->ramp == 2 && pick->backend >= 0) {
		pick->ramp = 1;
		atomic_fetch_add_explicit(&s->be[pick->backend].state->ramp_moved_in, 1,
					  memory_order_relaxed);
	}
}
