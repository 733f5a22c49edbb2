/*
 * test-balance.c -- balance.c and the passive half of health.c over a
 * hand-built snapshot: the cap formula against known values, then the walk
 * with registry counters set by hand (in-flight, down, slow start), each
 * verdict checked against ring_walk's independent order of backends.
 *
 * Registry entries are keyed by name and outlive snapshots, so every case
 * resets the counters it depends on (test_reset).
 */
#include "backend/balance.h"
#include "config/conf.h"
#include "backend/health.h"
#include "base/log.h"
#include "backend/registry.h"
#include "ring/ring.h"
#include "backend/snapshot.h"
#include "tap.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NB 4
#define EXPLAIN_N 4

/* A snapshot of the config text; NULL on error (printed). */
static struct snapshot *test_snap_text(const char *text)
{
	char err[512];
	struct conf_errors errs = { 0 };
	struct conf *c = conf_load_string("t.ini", text, &errs);
	struct snapshot *s;

	if (!c) {
		for (size_t i = 0; i < errs.n; i++)
			tap_diag("%s", errs.msg[i]);
		conf_errors_free(&errs);
		return NULL;
	}
	conf_errors_free(&errs);
	s = snapshot_new(c, 1, err, sizeof(err));
	if (!s) {
		tap_diag("snapshot_new: %s", err);
		conf_free(c);
	}
	return s;
}

static struct snapshot *test_snap(const char *extra_ring, const char *extra_be,
				  const char *extra_health)
{
	char text[4096];
	int n = snprintf(text, sizeof(text), "[ring]\nvnodes = 160\n%s\n[health]\n%s\n",
			 extra_ring, extra_health);

	for (int i = 0; i < NB; i++)
		n += snprintf(text + n, sizeof(text) - (size_t)n,
			      "[backend cache-%d]\nurl = http://127.0.0.1:%d\n%s\n",
			      i, 9100 + i, extra_be);
	return test_snap_text(text);
}

static void test_reset(struct snapshot *s)
{
	for (size_t i = 0; i < s->nbe; i++) {
		struct backend *b = s->be[i].state;

		atomic_store(&b->inflight, 0);
		atomic_store(&b->down, 0);
		atomic_store(&b->fails, 0);
		atomic_store(&b->retry_at_ms, 0);
		atomic_store(&b->trial, 0);
		atomic_store(&b->up_since_ms, 0);
		atomic_store(&b->check_ok, 0);
		atomic_store(&b->check_fail, 0);
	}
	atomic_store(&registry_total_inflight, 0);
	atomic_fetch_add(&registry_health_gen, 1);
	balance_hot_reset();
}

static void test_set_down(struct snapshot *s, int i, int down)
{
	atomic_store(&s->be[i].state->down, down);
	/* no passive trial during the case */
	atomic_store(&s->be[i].state->retry_at_ms, registry_now_ms() + 3600000);
	atomic_fetch_add(&registry_health_gen, 1);
}

static void test_set_inflight(struct snapshot *s, int i, long n)
{
	long old = atomic_exchange(&s->be[i].state->inflight, n);

	atomic_fetch_add(&registry_total_inflight, n - old);
}

/* The walk order of key pos, from ring.c's own walk. */
static int test_order(const struct snapshot *s, uint64_t pos, int *order)
{
	struct ring_walk w;
	int n = 0, i;

	ring_walk_init(&w, s->ring, pos);
	while ((i = ring_walk_next(&w)) >= 0)
		order[n++] = i;
	return n;
}

/* The position of key number k, "/k/K.jpg", with its walk in o[]. */
static uint64_t test_key_order(const struct snapshot *s, int k, int *o)
{
	char key[64];
	int len = snprintf(key, sizeof(key), "/k/%d.jpg", k);
	uint64_t kp = ring_hash(key, (size_t)len);

	test_order(s, kp, o);
	return kp;
}

/* 16 requests for the key at pos: the cases test the walk for a key that
 * is all of the recent requests, one the bounded-load cap moves (test_hot
 * tests which keys it moves). */
static void test_heat(uint64_t pos)
{
	for (int k = 0; k < 16; k++)
		balance_seen(pos);
}

/* A request for a hot key at pos. */
static struct balance_pick test_pick(const struct snapshot *s, uint64_t pos)
{
	struct ring_walk w;
	struct balance_pick p = { .backend = -1, .owner = -1 };

	test_heat(pos);
	ring_walk_init(&w, s->ring, pos);
	balance_next(s, &w, pos, &p);
	if (p.backend >= 0)
		balance_release(s->be[p.backend].state);  /* keep the case's counts */
	return p;
}

static void test_cap(void)
{
	tap_is_int(balance_cap(1.25, 0, 1, 4), 1, "cap: empty tier, c=1.25, 1 of 4 -> 1");
	tap_is_int(balance_cap(1.25, 7, 1, 2), 5, "cap: c=1.25, total 7, 1 of 2 -> ceil(5.0) = 5");
	tap_is_int(balance_cap(1.25, 8, 1, 4), 3, "cap: c=1.25, total 8, 1 of 4 -> ceil(2.8125) = 3");
	tap_is_int(balance_cap(1.25, 99, 1, 4), 32, "cap: c=1.25, total 99, 1 of 4 -> ceil(31.25) = 32");
	tap_is_int(balance_cap(2, 9, 2, 5), 8, "cap: c=2, total 9, weight 2 of 5 -> 8");
	tap_is_int(balance_cap(1, 3, 1, 4), 1, "cap: c=1, total 3, 1 of 4 -> 1");
	tap_is_int(balance_cap(1.25, 10, 1, 0), 0, "cap: no up weight -> 0");
}

/* The bound of rare keys against the hot share: none under even load,
 * the cap from a hot third of the requests on. */
static void test_rare_cap(void)
{
	tap_ok(balance_rare_cap(21, 0) == LONG_MAX, "rare cap: no hot request, no bound");
	tap_is_int((int)balance_rare_cap(21, 0.5), 21, "rare cap: half hot: the cap");
	tap_is_int((int)balance_rare_cap(21, 1.0 / 3), 21, "rare cap: a third hot: the cap");
	tap_is_int((int)balance_rare_cap(21, 0.2), 42, "rare cap: a fifth hot: twice the cap");
	tap_is_int((int)balance_rare_cap(20, 0.1), 90, "rare cap: a tenth hot: 4.5 x the cap");
	tap_ok(balance_rare_cap(21, 1e-30) == LONG_MAX, "rare cap: a vanishing hot share does not overflow");
}

static void test_bounded(void)
{
	struct snapshot *s = test_snap("balance_factor = 1.25", "", "");
	int order[NB];
	uint64_t pos = ring_hash("/hot.jpg", 8);
	struct balance_pick p;

	if (!tap_ok(s != NULL, "snapshot of 4 backends"))
		return;
	tap_is_int(test_order(s, pos, order), NB, "the walk yields every backend once");
	test_reset(s);

	p = test_pick(s, pos);
	tap_is_int(p.backend, order[0], "idle tier: the ring owner is chosen");
	tap_is_int(p.owner, order[0], "the owner is recorded");
	tap_is_int(p.owner_verdict, BALANCE_OK, "the owner's verdict is OK");

	/* total 8: cap = ceil(1.25 * 9 / 4) = 3 */
	test_set_inflight(s, order[0], 2);
	test_set_inflight(s, order[3], 6);
	p = test_pick(s, pos);
	tap_is_int(p.backend, order[0], "owner at 2 in flight, cap 3: still the owner");
	test_set_inflight(s, order[0], 3);
	test_set_inflight(s, order[3], 5);
	p = test_pick(s, pos);
	tap_is_int(p.backend, order[1], "owner at its cap of 3: spills to the next distinct backend of the walk");
	tap_is_int(p.owner_verdict, BALANCE_BOUNDED, "the owner's verdict is BOUNDED");
	tap_is_int(p.any_full, 0, "a bounded owner is not 'full'");
	test_set_inflight(s, order[1], 3);
	test_set_inflight(s, order[3], 2);
	p = test_pick(s, pos);
	tap_is_int(p.backend, order[2], "owner and second both at the cap: the third backend of the walk");

	/* the spill target is the walk's, key by key */
	{
		int agree = 0, n = 0;

		test_reset(s);
		for (int k = 0; k < 200; k++) {
			int o[NB];
			uint64_t kp = test_key_order(s, k, o);

			test_reset(s);
			test_set_inflight(s, o[0], 10);   /* cap ceil(1.25*11/4) = 4 */
			p = test_pick(s, kp);
			agree += p.backend == o[1];
			n++;
		}
		tap_is_int(agree, n, "200 keys with a loaded owner: each goes to its walk's second backend");
	}

	/* a down backend is skipped; its keys come back */
	test_reset(s);
	test_set_down(s, order[0], 1);
	p = test_pick(s, pos);
	tap_is_int(p.backend, order[1], "owner down: the next distinct backend");
	tap_is_int(p.owner_verdict, BALANCE_DOWN, "the owner's verdict is DOWN");
	test_set_down(s, order[0], 0);
	p = test_pick(s, pos);
	tap_is_int(p.backend, order[0], "owner up again: its key comes back");

	/* the up weight shrinks with a down backend: W = 3 of 4 */
	test_reset(s);
	test_set_down(s, order[3], 1);
	test_set_inflight(s, order[0], 3);
	test_set_inflight(s, order[1], 5);      /* total 8: cap ceil(1.25*9/3) = 4 */
	p = test_pick(s, pos);
	tap_is_int(p.backend, order[0], "one backend down: the cap is over the up weight (3 < 4)");

	/* every backend down */
	test_reset(s);
	for (int i = 0; i < NB; i++)
		test_set_down(s, i, 1);
	p = test_pick(s, pos);
	tap_is_int(p.backend, -1, "every backend down: none");
	tap_is_int(p.any_full, 0, "every backend down: not 'full'");
	test_reset(s);
	snapshot_unref(s);
}

/* The target /ring would name for the key at pos now. */
static int test_explain_target(const struct snapshot *s, uint64_t pos)
{
	int order[EXPLAIN_N], n;
	struct balance_why why[EXPLAIN_N];

	return balance_explain_walk(s, pos, order, why, 1, &n);
}

/* [ring] replicas: the least loaded of the key's first R distinct
 * backends, ties to the first, under the bounded-load cap; past the list
 * only when none of it can take the request; a retry goes to the list's
 * others first. */
/* A snapshot of 4 backends with [ring] replicas = r and counters reset,
 * the walk of the key at pos in order[]; NULL (a failed check) if none. */
static struct snapshot *test_replica_snap(int r, uint64_t pos, int *order)
{
	char ring[64];
	struct snapshot *s;

	snprintf(ring, sizeof(ring), "balance_factor = 1.25\nreplicas = %d", r);
	s = test_snap(ring, "", "");
	if (!tap_ok(s != NULL, "replicas = %d: snapshot of 4 backends", r))
		return NULL;
	test_order(s, pos, order);
	test_reset(s);
	return s;
}

/* One case of test_replicas: in-flight counts and down flags by walk
 * position, and the pick wanted: its walk position, its place in the list
 * (-1: past it), the request's owner (walk position) and its verdict. */
struct test_replica_case {
	long load[NB];
	int down[NB];
	int want, replica, owner;
	enum balance_verdict verdict;
	const char *what;
};

/* With 9 in flight off the list the total is 10 or more and the cap
 * ceil(1.25 x 11 / 4) = 4 or more (5 with one down), so the cap moves
 * nothing where a case does not say so. */
static const struct test_replica_case cases[] = {
	{ { 0, 0, 0, 0 }, { 0 }, 0, 0, 0, BALANCE_OK, "idle: a tie goes to the list's first" },
	{ { 1, 0, 0, 9 }, { 0 }, 1, 1, 1, BALANCE_OK,
	  "primary at 1 in flight, replica at 0: the replica, no spill (the request's owner)" },
	{ { 1, 1, 0, 9 }, { 0 }, 0, 0, 0, BALANCE_OK, "both at 1: the tie goes to the primary" },
	{ { 0, 0, 9, 9 }, { 0 }, 0, 0, 0, BALANCE_OK, "loaded backends off the list change nothing" },
	/* total 4: cap = ceil(1.25 x 5 / 4) = 2 */
	{ { 2, 2, 0, 0 }, { 0 }, 2, -1, 0, BALANCE_BOUNDED,
	  "both members at the bounded-load cap: the hot key spills past the list, counted on the primary" },
	{ { 2, 1, 0, 0 }, { 0 }, 1, 1, 1, BALANCE_OK, "the primary at the cap, the replica under it: the replica" },
	{ { 0, 1, 0, 9 }, { 1, 0, 0, 0 }, 1, 1, 0, BALANCE_DOWN,
	  "primary down: its replica, though loaded and the walk's next backend idle (a failover)" },
	{ { 0, 1, 0, 9 }, { 1, 1, 0, 0 }, 2, -1, 0, BALANCE_DOWN, "both members down: the walk's third backend" },
	{ { 0, 0, 0, 9 }, { 0, 1, 0, 0 }, 0, 0, 0, BALANCE_OK, "replica down: the primary" },
};

static void test_replicas(void)
{
	int order[NB], same = 1;
	uint64_t pos = ring_hash("/hot.jpg", 8);
	struct snapshot *s = test_replica_snap(2, pos, order);
	struct balance_pick p;

	if (s == NULL)
		return;
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		const struct test_replica_case *k = &cases[c];

		test_reset(s);
		for (int i = 0; i < NB; i++) {
			if (k->down[i])
				test_set_down(s, order[i], 1);
			test_set_inflight(s, order[i], k->load[i]);
		}
		p = test_pick(s, pos);
		tap_ok(p.backend == order[k->want] && p.replica == k->replica &&
		       p.owner == order[k->owner] && p.owner_verdict == k->verdict,
		       "replicas = 2: %s", k->what);
		same &= test_explain_target(s, pos) == p.backend;
	}

	/* a retry (the request failed on its pick): the list's other
	 * member, then the walk */
	{
		struct ring_walk w;
		int got[3];

		test_reset(s);
		memset(&p, 0, sizeof(p));
		p.backend = p.owner = -1;
		ring_walk_init(&w, s->ring, pos);
		test_set_inflight(s, order[0], 1);
		for (int k = 0; k < 3; k++) {
			balance_next(s, &w, pos, &p);
			got[k] = p.backend;
		}
		tap_ok(got[0] == order[1] && got[1] == order[0] && got[2] == order[2],
		       "retries: the least loaded member, the other member, then the walk past the list");
		for (int k = 0; k < 3; k++)
			if (got[k] >= 0)
				balance_release(s->be[got[k]].state);
	}
	tap_ok(same, "/ring's target is the pick in every case above");
	test_reset(s);
	snapshot_unref(s);

	/* three members of four */
	if ((s = test_replica_snap(3, pos, order)) == NULL)
		return;
	test_set_inflight(s, order[0], 1);
	test_set_inflight(s, order[1], 1);
	p = test_pick(s, pos);
	tap_ok(p.backend == order[2] && p.replica == 2, "replicas = 3: the third member, the least loaded");
	{
		/* many keys: the pick is always on the key's list */
		int on = 0;

		test_reset(s);
		for (int k = 0; k < 200; k++) {
			int o[NB];
			uint64_t kp = test_key_order(s, k, o);

			test_set_inflight(s, o[0], 1 + k % 2);
			p = test_pick(s, kp);
			on += p.backend == o[0] || p.backend == o[1] || p.backend == o[2];
			test_set_inflight(s, o[0], 0);
		}
		tap_is_int(on, 200, "200 keys: every pick is one of the key's 3 members");
	}
	test_reset(s);
	snapshot_unref(s);
}

static void test_hard_cap(void)
{
	struct snapshot *s = test_snap("balance_factor = 0", "max_inflight = 2", "");
	int order[NB];
	uint64_t pos = ring_hash("/hot.jpg", 8);
	struct balance_pick p;

	if (!tap_ok(s != NULL, "snapshot with max_inflight = 2"))
		return;
	test_order(s, pos, order);
	test_reset(s);
	test_set_inflight(s, order[0], 1);
	p = test_pick(s, pos);
	tap_is_int(p.backend, order[0], "max_inflight 2, owner at 1: the owner");
	test_set_inflight(s, order[0], 2);
	p = test_pick(s, pos);
	tap_is_int(p.backend, order[1], "owner at max_inflight: the next backend");
	tap_is_int(p.owner_verdict, BALANCE_FULL, "the owner's verdict is FULL");
	tap_is_int(p.any_full, 1, "any_full is set");
	for (int i = 0; i < NB; i++)
		test_set_inflight(s, i, 2);
	p = test_pick(s, pos);
	tap_is_int(p.backend, -1, "every backend at max_inflight: none");
	tap_is_int(p.any_full, 1, "every backend at max_inflight: any_full (503 + Retry-After)");
	test_reset(s);
	snapshot_unref(s);
}

static void test_factor_off(void)
{
	struct snapshot *s = test_snap("balance_factor = 0", "", "");
	int order[NB];
	uint64_t pos = ring_hash("/hot.jpg", 8);

	if (!tap_ok(s != NULL, "snapshot with balance_factor = 0"))
		return;
	test_order(s, pos, order);
	test_reset(s);
	test_set_inflight(s, order[0], 1000);
	tap_is_int(test_pick(s, pos).backend, order[0], "balance_factor 0: the owner takes 1000 in flight, no spill");
	test_reset(s);
	snapshot_unref(s);
}

/* Bounded loads never turn a request away on its own: when hard caps or
 * down backends leave only bounded ones, the least loaded of the walk is
 * better than a 503 that claims every backend is at max_inflight. */
static void test_bounded_fallback(void)
{
	struct snapshot *s = test_snap("balance_factor = 1.25", "", "");
	int order[NB];
	uint64_t pos = ring_hash("/hot.jpg", 8);
	struct balance_pick p;

	if (!tap_ok(s != NULL, "snapshot for the fallback"))
		return;
	test_order(s, pos, order);
	test_reset(s);
	test_set_down(s, order[1], 1);
	test_set_down(s, order[2], 1);
	test_set_down(s, order[3], 1);
	/* a trial-less down backend does not count in W; the owner alone is
	 * up: cap = ceil(1.25 * (total + 1)) > total, always eligible */
	test_set_inflight(s, order[0], 40);
	p = test_pick(s, pos);
	tap_is_int(p.backend, order[0], "the only up backend is never over its bounded cap");
	test_reset(s);
	snapshot_unref(s);

	s = test_snap("balance_factor = 1.25", "", "");
	if (!tap_ok(s != NULL, "snapshot for the fallback with hard caps"))
		return;
	test_order(s, pos, order);
	test_reset(s);
	/* the other three at a hard cap of 2 (total 6 + owner's 4 = 10):
	 * the owner's bounded cap is ceil(1.25 * 11 / 4) = 4, so it is over
	 * it, yet it is the only backend that can take the request */
	for (int k = 1; k < NB; k++) {
		((struct conf_backend *)s->be[order[k]].conf)->max_inflight = 2;
		test_set_inflight(s, order[k], 2);
	}
	test_set_inflight(s, order[0], 4);
	p = test_pick(s, pos);
	tap_is_int(p.backend, order[0], "others at max_inflight, owner only over the bounded cap: the owner");
	test_reset(s);
	snapshot_unref(s);
}

struct test_race {
	struct backend *b;
	const struct conf_backend *cb;
	_Atomic long peak;
	_Atomic long taken;
};

static void *test_racer(void *arg)
{
	struct test_race *r = arg;

	for (int k = 0; k < 200000; k++) {
		if (!balance_acquire(r->b, r->cb))
			continue;
		long now = atomic_load(&r->b->inflight);
		long peak = atomic_load(&r->peak);

		while (now > peak && !atomic_compare_exchange_weak(&r->peak, &peak, now))
			;
		atomic_fetch_add(&r->taken, 1);
		balance_release(r->b);
	}
	return NULL;
}

/* The hard cap is a reservation: 4 threads taking and giving back slots
 * never see more than max_inflight held at once. */
static void test_acquire(void)
{
	struct snapshot *s = test_snap("balance_factor = 0", "max_inflight = 3", "");
	struct test_race r = { 0 };
	pthread_t t[4];
	struct backend *b;
	const struct conf_backend *cb;

	if (!tap_ok(s != NULL, "snapshot with max_inflight = 3"))
		return;
	test_reset(s);
	b = s->be[0].state;
	cb = s->be[0].conf;
	tap_ok(balance_acquire(b, cb) && balance_acquire(b, cb) && balance_acquire(b, cb),
	       "three slots of max_inflight 3");
	tap_ok(!balance_acquire(b, cb), "no fourth");
	tap_is_int(atomic_load(&registry_total_inflight), 3, "the total counts the three");
	balance_release(b);
	tap_ok(balance_acquire(b, cb), "a slot given back can be taken");
	balance_hold(b);
	tap_is_int(atomic_load(&b->inflight), 4, "balance_hold takes a slot whatever the cap");
	test_reset(s);
	r.b = b;
	r.cb = cb;
	for (int k = 0; k < 4; k++)
		pthread_create(&t[k], NULL, test_racer, &r);
	for (int k = 0; k < 4; k++)
		pthread_join(t[k], NULL);
	tap_ok(atomic_load(&r.peak) <= 3 && atomic_load(&r.taken) > 0,
	       "4 threads x 200000 tries: peak held %ld <= 3 (%ld taken)",
	       atomic_load(&r.peak), atomic_load(&r.taken));
	tap_is_int(atomic_load(&b->inflight), 0, "every slot given back");
	tap_is_int(atomic_load(&registry_total_inflight), 0, "the total is back to 0");

	/* the walk takes the chosen backend's slot */
	{
		struct ring_walk w;
		struct balance_pick p = { .backend = -1, .owner = -1 };
		uint64_t pos = ring_hash("/hot.jpg", 8);

		ring_walk_init(&w, s->ring, pos);
		balance_next(s, &w, pos, &p);
		tap_ok(p.backend >= 0 && atomic_load(&s->be[p.backend].state->inflight) == 1,
		       "balance_next holds a slot on the backend it picks");
		if (p.backend >= 0)
			balance_release(s->be[p.backend].state);
	}
	test_reset(s);
	snapshot_unref(s);
}

static void test_slow_start(void)
{
	struct snapshot *s = test_snap("balance_factor = 0", "slow_start = 10s", "");
	char key[64];
	int owned = 0, at25 = 0, at75 = 0, kept = 0, full = 0, x = -1;
	static uint64_t keys[20000];
	static char back25[20000];

	if (!tap_ok(s != NULL, "snapshot with slow_start = 10s"))
		return;
	test_reset(s);
	x = 0;
	for (int k = 0; k < 20000; k++) {
		int len = snprintf(key, sizeof(key), "/s/%d.jpg", k);
		uint64_t kp = ring_hash(key, (size_t)len);

		if (ring_lookup(s->ring, kp) == x)
			keys[owned++] = kp;
	}
	tap_ok(owned > 3000, "backend 0 owns %d of 20000 keys", owned);
	atomic_store(&s->be[x].state->up_since_ms, registry_now_ms() - 2500);
	for (int k = 0; k < owned; k++) {
		back25[k] = test_pick(s, keys[k]).backend == x;
		at25 += back25[k];
	}
	tap_ok(at25 > owned * 0.20 && at25 < owned * 0.30,
	       "slow start at 25%%: %d of %d keys back (20-30%%)", at25, owned);
	atomic_store(&s->be[x].state->up_since_ms, registry_now_ms() - 7500);
	for (int k = 0; k < owned; k++) {
		int back = test_pick(s, keys[k]).backend == x;

		at75 += back;
		kept += back25[k] && back;
	}
	tap_ok(at75 > owned * 0.70 && at75 < owned * 0.80,
	       "slow start at 75%%: %d of %d keys back (70-80%%)", at75, owned);
	tap_is_int(kept, at25, "a key that came back at 25%% stays back at 75%%");
	{
		struct balance_pick p = test_pick(s, keys[0]);

		tap_ok(p.backend == x || p.owner_verdict == BALANCE_RAMPING,
		       "a key not yet back is RAMPING, not DOWN or BOUNDED");
	}
	atomic_store(&s->be[x].state->up_since_ms, registry_now_ms() - 10001);
	for (int k = 0; k < owned; k++)
		full += test_pick(s, keys[k]).backend == x;
	tap_is_int(full, owned, "slow start over: every key back");
	tap_is_int(atomic_load(&s->be[x].state->up_since_ms), 0, "the ramp ends (up_since_ms cleared)");

	/* ramping alone never turns a request away */
	test_reset(s);
	for (int i = 1; i < NB; i++)
		test_set_down(s, i, 1);
	atomic_store(&s->be[x].state->up_since_ms, registry_now_ms() - 1);
	tap_is_int(test_pick(s, keys[0]).backend, x,
		   "the only up backend takes every key even at the start of its ramp");
	test_reset(s);
	snapshot_unref(s);
}

/* The cached up weight is one (generation, weight) pair: two threads
 * storing pairs of their own while a third reads never make the reader
 * see one thread's weight under the other's generation. Stored as two
 * separate atomics this mixes within a few thousand rounds. */
struct test_pair {
	struct balance_cache c;
	_Atomic uint64_t latest;
	atomic_int next;
	atomic_int stop;
};

static void *test_pair_writer(void *arg)
{
	struct test_pair *p = arg;
	uint64_t first = (uint64_t)atomic_fetch_add(&p->next, 1) + 2;

	for (uint64_t g = first; g < 100000000 && !atomic_load(&p->stop); g += 2) {
		balance_cache_put(&p->c, g, (double)g + 0.25);
		atomic_store(&p->latest, g);
		/* a breath between writes, or no read would ever see the
		 * pair settled */
		for (int k = 0; k < 64 && !atomic_load(&p->stop); k++)
			;
	}
	return NULL;
}

static void test_cache_pair(void)
{
	static struct test_pair p;
	pthread_t t[2];
	long hits = 0, mixed = 0;
	int64_t t0 = registry_now_ms();
	uint64_t last;
	double w;

	for (int k = 0; k < 2; k++)
		pthread_create(&t[k], NULL, test_pair_writer, &p);
	while (atomic_load(&p.latest) == 0)
		;
	/* until 20000 reads found a pair, for at most 5 s: a writer that
	 * lost its CPU half-way leaves every read missing meanwhile */
	for (long k = 0; hits < 20000 && (k % 1024 || registry_now_ms() < t0 + 5000); k++) {
		uint64_t g = atomic_load(&p.latest);

		for (uint64_t d = g - 1; d <= g + 1; d++) {
			if (!balance_cache_get(&p.c, d, &w))
				continue;
			hits++;
			mixed += w != (double)d + 0.25;
		}
	}
	atomic_store(&p.stop, 1);
	for (int k = 0; k < 2; k++)
		pthread_join(t[k], NULL);
	tap_ok(hits > 1000, "the up-weight cache was read %ld times while two threads wrote it", hits);
	tap_is_int(mixed, 0, "no read saw one writer's weight under the other's generation");
	last = atomic_load(&p.latest);
	balance_cache_put(&p.c, last + 2, 7.5);
	tap_ok(balance_cache_get(&p.c, last + 2, &w) && w == 7.5, "a pair written alone reads back");
	tap_ok(!balance_cache_get(&p.c, last + 4, &w), "another generation is a miss");
	/* a writer half-way (seq odd): readers miss, a second writer waits
	 * for nobody and leaves the pair alone */
	atomic_fetch_add(&p.c.seq, 1);
	tap_ok(!balance_cache_get(&p.c, last + 2, &w), "a pair being written is not read");
	balance_cache_put(&p.c, last + 4, 9.5);
	atomic_fetch_add(&p.c.seq, 1);
	tap_ok(balance_cache_get(&p.c, last + 2, &w) && w == 7.5 && !balance_cache_get(&p.c, last + 4, &w),
	       "a second writer leaves a pair being written alone");
}

/* Ending a slow start must not erase a newer one: while one thread keeps
 * asking for a ramping backend whose ramp is over (which ends it), another
 * marks a fresh recovery; the fresh time must survive. With a plain store
 * of 0 the asking thread erases it whenever the recovery lands between its
 * read and its store. */
struct test_ramp {
	struct snapshot *s;
	int x;
	uint64_t pos;
	atomic_int stop;
	atomic_long calls;
};

static void *test_ramp_asker(void *arg)
{
	struct test_ramp *r = arg;

	while (!atomic_load(&r->stop)) {
		balance_check(r->s, r->x, r->pos);
		atomic_fetch_add(&r->calls, 1);
	}
	return NULL;
}

static void test_ramp_race(void)
{
	static struct test_ramp r;
	struct backend *b;
	pthread_t t;
	long erased = 0, rounds = 20000;

	r.s = test_snap("balance_factor = 0", "slow_start = 10s", "");
	if (!tap_ok(r.s != NULL, "snapshot with slow_start = 10s for the race"))
		return;
	test_reset(r.s);
	r.x = 0;
	r.pos = ring_hash("/ramp.jpg", 9);
	b = r.s->be[r.x].state;
	atomic_store(&r.stop, 0);
	pthread_create(&t, NULL, test_ramp_asker, &r);
	for (long k = 0; k < rounds; k++) {
		int64_t now = registry_now_ms();
		long c0;

		atomic_store(&b->up_since_ms, now - 20000);     /* a ramp that is over */
		c0 = atomic_load(&r.calls);
		while (atomic_load(&r.calls) == c0)             /* let it be read */
			;
		atomic_store(&b->up_since_ms, now);             /* a recovery now */
		c0 = atomic_load(&r.calls);
		while (atomic_load(&r.calls) < c0 + 2)          /* any call in flight ends */
			;
		erased += atomic_load(&b->up_since_ms) != now;
	}
	atomic_store(&r.stop, 1);
	pthread_join(t, NULL);
	tap_is_int(erased, 0, "%ld fresh recoveries raced with the end of an old ramp: none erased", rounds);
	test_reset(r.s);
	snapshot_unref(r.s);
}

static void test_passive(void)
{
	struct snapshot *s = test_snap("", "", "fall = 3\nbackoff = 1s");
	struct backend *b;
	const struct conf_backend *cb;
	uint64_t t0;

	if (!tap_ok(s != NULL, "snapshot with fall 3, backoff 1s"))
		return;
	test_reset(s);
	b = s->be[0].state;
	cb = s->be[0].conf;
	t0 = atomic_load(&b->transitions);
	health_request_failed(s, 0, "connect: Connection refused");
	health_request_failed(s, 0, "connect: Connection refused");
	tap_is_int(atomic_load(&b->down), 0, "2 failures of fall 3: still up");
	health_request_ok(b, cb);
	tap_is_int(atomic_load(&b->fails), 0, "a success resets the failure count");
	health_request_failed(s, 0, "connect: Connection refused");
	health_request_failed(s, 0, "connect: Connection refused");
	tap_is_int(atomic_load(&b->down), 0, "failures must be consecutive");
	health_request_failed(s, 0, "connect: Connection refused");
	tap_is_int(atomic_load(&b->down), 1, "the 3rd consecutive failure: down");
	tap_is_int(atomic_load(&b->transitions) - t0, 1, "one transition");
	tap_ok(atomic_load(&b->retry_at_ms) > registry_now_ms() + 500, "a trial is due after the back-off");
	tap_ok(!health_trial(b, cb, s->conf), "no trial before the back-off");
	health_request_ok(b, cb);
	tap_is_int(atomic_load(&b->down), 0 + 1,
		   "a late response to a request sent before the fall does not bring it up");
	tap_is_int(test_pick(s, ring_hash("x", 1)).backend == 0, 0, "the down backend takes no request");
	atomic_store(&b->retry_at_ms, registry_now_ms() - 1);
	tap_ok(health_trial(b, cb, s->conf), "after the back-off: one trial");
	tap_ok(!health_trial(b, cb, s->conf), "and only one per back-off");
	health_request_failed(s, 0, "connect: Connection refused");
	tap_is_int(atomic_load(&b->down), 1, "a failed trial: still down");
	tap_ok(atomic_load(&b->retry_at_ms) > registry_now_ms() + 500, "a failed trial waits a whole back-off");
	atomic_store(&b->retry_at_ms, registry_now_ms() - 1);
	tap_ok(health_trial(b, cb, s->conf), "the next trial");
	health_request_ok(b, cb);
	tap_is_int(atomic_load(&b->down), 0, "a successful trial: up");
	tap_is_int(atomic_load(&b->transitions) - t0, 2, "two transitions");
	test_reset(s);
	snapshot_unref(s);

	s = test_snap("", "", "passive = off\nfall = 1");
	if (!tap_ok(s != NULL, "snapshot with passive off"))
		return;
	test_reset(s);
	for (int k = 0; k < 10; k++)
		health_request_failed(s, 0, "timeout");
	tap_is_int(atomic_load(&s->be[0].state->down), 0, "passive off: 10 failures leave it up");
	test_reset(s);
	snapshot_unref(s);

	/* with active checks, they alone bring a backend back */
	s = test_snap("", "", "path = /__health\nfall = 1");
	if (!tap_ok(s != NULL, "snapshot with active checks"))
		return;
	test_reset(s);
	b = s->be[0].state;
	cb = s->be[0].conf;
	health_request_failed(s, 0, "timeout");
	tap_is_int(atomic_load(&b->down), 1, "active checks on: a passive failure still takes it down");
	atomic_store(&b->retry_at_ms, 0);
	tap_ok(!health_trial(b, cb, s->conf), "active checks on: no passive trial");
	health_request_ok(b, cb);
	tap_is_int(atomic_load(&b->down), 1,
		   "active checks on: a late response from before the fall does not bring it up");
	test_reset(s);
	snapshot_unref(s);
}

/* Passive checks never take down the last backend up: it stays in
 * service and counts its failures, and goes down once another is up. */
static void test_passive_last(void)
{
	struct snapshot *s = test_snap("", "", "fall = 3\nbackoff = 30s");
	struct backend *b;

	if (!tap_ok(s != NULL, "snapshot with fall 3, backoff 30s"))
		return;
	test_reset(s);
	b = s->be[0].state;
	for (int i = 1; i < NB; i++)
		test_set_down(s, i, 1);
	for (int k = 0; k < 5; k++)
		health_request_failed(s, 0, "connection lost");
	tap_is_int(atomic_load(&b->down), 0, "the last backend up: 5 failures of fall 3 leave it up");
	tap_is_int(atomic_load(&b->fails), 5, "... and are counted");
	tap_is_int(test_pick(s, ring_hash("x", 1)).backend, 0, "... and it takes the requests");
	health_request_ok(b, s->be[0].conf);
	tap_is_int(atomic_load(&b->fails), 0, "a success: no longer failing");
	test_set_down(s, 1, 0);
	for (int k = 0; k < 3; k++)
		health_request_failed(s, 0, "connection lost");
	tap_is_int(atomic_load(&b->down), 1, "with another backend up, fall failures take it down");
	for (int k = 0; k < 3; k++)
		health_request_failed(s, 1, "connection lost");
	tap_is_int(atomic_load(&s->be[1].state->down), 0, "... and that one, the last up now, stays up");
	test_reset(s);
	snapshot_unref(s);
}

struct test_fall_arg {
	struct snapshot *s;
	int i, rounds;
	pthread_barrier_t *go, *done;   /* main and both threads, each round */
};

static void *test_fall_thread(void *arg)
{
	struct test_fall_arg *a = arg;

	for (int r = 0; r < a->rounds; r++) {
		pthread_barrier_wait(a->go);
		health_request_failed(a->s, a->i, "connection lost");
		pthread_barrier_wait(a->done);
	}
	return NULL;
}

/* The last two backends up, each one failure short of fall, fail at once
 * on two threads: one of them stays up, every round. */
static void test_passive_last_race(void)
{
	struct snapshot *s = test_snap("", "", "fall = 3\nbackoff = 30s");
	enum { rounds = 20000 };
	pthread_barrier_t go, done;
	struct test_fall_arg a0 = { s, 0, rounds, &go, &done }, a1 = { s, 1, rounds, &go, &done };
	pthread_t t0, t1;
	int bad = 0;

	if (!tap_ok(s != NULL, "snapshot with fall 3"))
		return;
	pthread_barrier_init(&go, NULL, 3);
	pthread_barrier_init(&done, NULL, 3);
	pthread_create(&t0, NULL, test_fall_thread, &a0);
	pthread_create(&t1, NULL, test_fall_thread, &a1);
	for (int r = 0; r < rounds; r++) {
		test_reset(s);
		for (int i = 2; i < NB; i++)
			test_set_down(s, i, 1);
		atomic_store(&s->be[0].state->fails, 2);
		atomic_store(&s->be[1].state->fails, 2);
		pthread_barrier_wait(&go);
		pthread_barrier_wait(&done);
		bad += atomic_load(&s->be[0].state->down) && atomic_load(&s->be[1].state->down);
	}
	pthread_join(t0, NULL);
	pthread_join(t1, NULL);
	pthread_barrier_destroy(&go);
	pthread_barrier_destroy(&done);
	tap_is_int(bad, 0, "%d rounds of the last two backends failing at once: one always stays up", rounds);
	test_reset(s);
	snapshot_unref(s);
}

/* Passive checks only, every backend down: after the back-off a trial
 * request must reach one, or the tier never recovers. With bounded loads
 * on, the up weight is 0 then, so the cap of a backend on trial is 0. */
static void test_trial_all_down(void)
{
	struct snapshot *s = test_snap("balance_factor = 1.25", "", "backoff = 1s");
	int order[NB];
	uint64_t pos = ring_hash("/hot.jpg", 8);
	struct balance_pick p;

	if (!tap_ok(s != NULL, "snapshot with passive checks only"))
		return;
	test_order(s, pos, order);
	test_reset(s);
	for (int i = 0; i < NB; i++)
		test_set_down(s, i, 1);
	p = test_pick(s, pos);
	tap_is_int(p.backend, -1, "every backend down, back-off running: none");
	atomic_store(&s->be[order[0]].state->retry_at_ms, registry_now_ms() - 1);
	p = test_pick(s, pos);
	tap_is_int(p.backend, order[0], "every backend down, the owner's back-off over: it gets the trial");
	p = test_pick(s, pos);
	tap_is_int(p.backend, -1, "one trial per back-off");
	test_reset(s);
	snapshot_unref(s);
}

/* The registry fields an explanation must leave as they were. */
static void test_state(const struct snapshot *s, int64_t *out)
{
	for (size_t i = 0; i < s->nbe; i++) {
		const struct backend *b = s->be[i].state;

		out[5 * i] = atomic_load(&b->inflight);
		out[5 * i + 1] = atomic_load(&b->retry_at_ms);
		out[5 * i + 2] = atomic_load(&b->trial);
		out[5 * i + 3] = atomic_load(&b->up_since_ms);
		out[5 * i + 4] = atomic_load(&b->down);
	}
}

/* balance_explain_walk against balance_next: over random states of
 * in-flight counts, hard caps, down backends (some due a trial), slow
 * starts (some over), the explained target is the backend a request
 * takes, and explaining writes nothing. */
static void test_explain(void)
{
	struct snapshot *s = test_snap("balance_factor = 1.25", "max_inflight = 6\nslow_start = 10s", "");
	int agree = 0, pure = 0, full = 0, bounded = 0, down = 0, ramping = 0, trial = 0;
	unsigned seed = 12345;

	if (!tap_ok(s != NULL, "snapshot for the explanations"))
		return;
	for (int round = 0; round < 400; round++) {
		int order[EXPLAIN_N], n, target;
		struct balance_why why[EXPLAIN_N];
		int64_t before[5 * NB], after[5 * NB];
		char key[32];
		int len = snprintf(key, sizeof(key), "/e/%d", round);
		uint64_t pos = ring_hash(key, (size_t)len);

		test_reset(s);
		for (int i = 0; i < NB; i++) {
			test_set_inflight(s, i, rand_r(&seed) % 8);
			if (rand_r(&seed) % 5 == 0) {
				test_set_down(s, i, 1);
				if (rand_r(&seed) % 2)
					atomic_store(&s->be[i].state->retry_at_ms, 0);  /* due */
			}
			if (rand_r(&seed) % 4 == 0)
				atomic_store(&s->be[i].state->up_since_ms,
					     registry_now_ms() - (rand_r(&seed) % 2 ? 5000 : 20000));
		}
		test_heat(pos);
		test_state(s, before);
		target = balance_explain_walk(s, pos, order, why, 2, &n);
		test_state(s, after);
		pure += memcmp(before, after, sizeof(before)) == 0;
		for (int k = 0; k < n; k++) {
			full += why[k].verdict == BALANCE_FULL;
			bounded += why[k].verdict == BALANCE_BOUNDED;
			down += why[k].verdict == BALANCE_DOWN;
			ramping += why[k].verdict == BALANCE_RAMPING;
			trial += why[k].trial;
		}
		agree += test_pick(s, pos).backend == target;
	}
	tap_is_int(pure, 400, "explaining writes nothing: no slot, no trial, no ramp end");
	tap_is_int(agree, 400, "the explained target is the backend balance_next picks, in 400 random states");
	tap_ok(full && bounded && down && ramping && trial,
	       "the states met every reason (full %d, bounded %d, down %d, ramping %d, trial %d)",
	       full, bounded, down, ramping, trial);
	test_reset(s);
	snapshot_unref(s);
}

/* ---- warm ramps ([ring] ramp) ------------------------------------------ */

/* A snapshot of the backends "name:weight" in list (space-separated), with
 * [ring] lines ring; NULL on error (printed). */
static struct snapshot *test_snap_of(const char *ring, const char *list)
{
	char text[4096], name[64];
	int n = snprintf(text, sizeof(text), "[ring]\nvnodes = 160\n%s\n", ring);
	double w;
	int used;

	while (sscanf(list, " %63[^: ]:%lf%n", name, &w, &used) == 2) {
		n += snprintf(text + n, sizeof(text) - (size_t)n,
			      "[backend %s]\nurl = http://127.0.0.1:%d\nweight = %g\n", name,
			      9100 + (int)strlen(text) % 800, w);
		list += used;
	}
	return test_snap_text(text);
}

/* Index of backend name in s, -1 if absent. */
static int test_be(const struct snapshot *s, const char *name)
{
	for (size_t i = 0; i < s->nbe; i++)
		if (strcmp(s->be[i].conf->name, name) == 0)
			return (int)i;
	return -1;
}

/* What snapshot_ramp makes: none without a ramp or a previous snapshot;
 * a new ramp when keys move; the ramp in progress carried on when the
 * ring is the same; a chain from a ramp in progress, cut where a ramp had
 * ended and at SNAP_RAMP_STEPS rings; every snapshot freed in any order. */
static void test_warm_snapshot(void)
{
	const char *r = "balance_factor = 0\nramp = 10s";
	struct snapshot *s4 = test_snap_of(r, "c1:1 c2:1 c3:1 c4:1");
	struct snapshot *s5 = test_snap_of(r, "c1:1 c2:1 c3:1 c4:1 c5:1");
	struct snapshot *s5u = test_snap_of(r, "c5:1 c4:1 c3:1 c2:1 c1:1");   /* same ring */
	struct snapshot *s5late = test_snap_of(r, "c1:1 c2:1 c3:1 c4:1 c5:1");
	struct snapshot *off = test_snap_of("balance_factor = 0", "c1:1 c2:1 c3:1 c4:1 c5:1");
	struct snapshot *s6 = test_snap_of(r, "c1:1 c2:1 c3:1 c4:1 c5:1 c6:1");
	struct snapshot *chain[6] = { 0 };
	struct snap_ramp_info info;
	int ok = 1;

	if (!s4 || !s5 || !s5u || !s5late || !off || !s6) {
		tap_ok(0, "warm ramp: snapshots built");
		goto out;
	}
	tap_ok(snapshot_ramp(s4, NULL, 1000, 0, &info) == 0 && info.kind == SNAP_RAMP_NONE && !s4->ramp,
	       "warm ramp: none at the first load (nothing before it)");
	tap_ok(snapshot_ramp(off, s4, 1000, 0, &info) == 0 && info.kind == SNAP_RAMP_NONE && !off->ramp,
	       "warm ramp: none with ramp = 0, whatever moved (today's behaviour)");
	{
		struct snapshot *rm = test_snap_of(r, "c1:1 c2:1 c3:1");

		tap_ok(rm && snapshot_ramp(rm, s4, 1000, 0, &info) == 0 && info.kind == SNAP_RAMP_NONE && !rm->ramp,
		       "warm ramp: none when keys move only off a removed backend (nothing to ramp from)");
		snapshot_unref(rm);
	}
	tap_ok(snapshot_ramp(s5, s4, 1000, 1700000000000, &info) == 0 && info.kind == SNAP_RAMP_NEW &&
	       s5->ramp && s5->ramp->nsteps == 2 && s5->ramp->end_ms == 11000 &&
	       s5->ramp->start_wall_ms == 1700000000000 && info.left_ms == 10000 &&
	       s5->ramp->step[0].ring == s5->ring && s5->ramp->step[1].ring == s4->ring &&
	       s5->ramp->moved_share > 0.1 && s5->ramp->moved_share < 0.3,
	       "warm ramp: adding a cache makes a ramp of two rings over 10s from the reload");
	tap_ok(snapshot_ramp(s5u, s5, 4000, 1700000003000, &info) == 0 && info.kind == SNAP_RAMP_CARRIED &&
	       s5u->ramp && s5u->ramp->end_ms == 11000 && s5u->ramp->start_wall_ms == 1700000000000 &&
	       info.left_ms == 7000 && s5u->ramp->step[0].ring == s5u->ring,
	       "warm ramp: a reload that moves nothing carries the ramp in progress on (same end)");
	tap_ok(snapshot_ramp(s5late, s5, 12000, 0, &info) == 0 && info.kind == SNAP_RAMP_NONE && !s5late->ramp,
	       "warm ramp: a reload that moves nothing after the ramp ended makes none");
	tap_ok(snapshot_ramp(s6, s5u, 6000, 0, &info) == 0 && info.kind == SNAP_RAMP_CHAINED &&
	       s6->ramp && s6->ramp->nsteps == 3 && s6->ramp->step[1].ring == s5u->ring &&
	       s6->ramp->step[1].start_ms == 1000 && s6->ramp->step[2].ring == s4->ring,
	       "warm ramp: a change during a ramp chains three rings (the carried one's own start kept)");
	/* the rings outlive their snapshots: drop the older ones first */
	snapshot_unref(s4);
	snapshot_unref(s5);
	snapshot_unref(s5u);
	s4 = s5 = s5u = NULL;
	{
		uint64_t u = 0, pos = ring_hash2("/x", 2, &u);
		int64_t t = 6000 + 5000;

		tap_ok(ring_ramp_owner(s6->ramp->step, s6->ramp->nsteps, pos, u, t, NULL) >= 0,
		       "warm ramp: the chain's older rings are alive after their snapshots went");
	}
	/* changes every 2s with a 10s ramp: the chain grows to its limit,
	 * then the oldest steps are dropped */
	chain[0] = s6;
	s6 = NULL;
	for (int i = 1; i < 6; i++) {
		char list[256];
		int n = 0;

		for (int b = 1; b <= 6 + i; b++)
			n += snprintf(list + n, sizeof(list) - (size_t)n, "c%d:1 ", b);
		chain[i] = test_snap_of(r, list);
		if (!chain[i] || snapshot_ramp(chain[i], chain[i - 1], 6000 + 2000 * i, 0, &info) < 0) {
			ok = 0;
			break;
		}
		ok &= chain[i]->ramp && chain[i]->ramp->nsteps <= SNAP_RAMP_STEPS;
		if (i >= 2)
			ok &= chain[i]->ramp->nsteps == SNAP_RAMP_STEPS && info.dropped > 0;
		snapshot_unref(chain[i - 1]);
		chain[i - 1] = NULL;
	}
	tap_ok(ok, "warm ramp: changes every 2s during 10s ramps keep at most %d rings, the oldest dropped",
	       SNAP_RAMP_STEPS);
	{
		/* a ramp that had ended when the next change came ends the chain */
		struct snapshot *late = test_snap_of(r, "c1:1 c2:1 c3:1 c4:1 c5:1 c6:1 c7:1 c8:1 c9:1 c10:1 c11:1 c12:1");

		tap_ok(late && snapshot_ramp(late, chain[5], 6000 + 2000 * 5 + 10000, 0, &info) == 0 &&
		       info.kind == SNAP_RAMP_NEW && late->ramp->nsteps == 2,
		       "warm ramp: a change after the ramp in progress ended ramps from the last ring alone");
		snapshot_unref(late);
	}
out:
	for (int i = 0; i < 6; i++)
		snapshot_unref(chain[i]);
	snapshot_unref(s4);
	snapshot_unref(s5);
	snapshot_unref(s5u);
	snapshot_unref(s5late);
	snapshot_unref(off);
	snapshot_unref(s6);
}

/* A key the change from a to b moved from backend `from` (by name), with
 * u in [lo, hi) of the window; its position and u. false if none of 20000
 * keys is one. */
static bool test_moved_key(const struct snapshot *a, const struct snapshot *b, const char *from,
			   double lo, double hi, uint64_t *pos, uint64_t *u)
{
	char key[64];

	for (int i = 0; i < 20000; i++) {
		int n = snprintf(key, sizeof(key), "/w/%d.jpg", i);
		int oa, ob;
		double f;

		*pos = ring_hash2(key, (size_t)n, u);
		oa = ring_lookup(a->ring, *pos);
		ob = ring_lookup(b->ring, *pos);
		f = (double)*u / 18446744073709551616.0;
		if (strcmp(a->ring->names[oa], b->ring->names[ob]) != 0 &&
		    (!from || strcmp(a->ring->names[oa], from) == 0) && f >= lo && f < hi)
			return true;
	}
	return false;
}

static struct balance_pick test_pick_u(const struct snapshot *s, struct ring_walk *w, uint64_t pos,
				       uint64_t u)
{
	struct balance_pick p;

	balance_start(s, w, &p, pos, u);
	balance_next(s, w, pos, &p);
	if (p.backend >= 0)
		balance_release(s->be[p.backend].state);
	return p;
}

/* balance_next during a ramp: a held key goes to its previous owner
 * (counted as ramp_held, no spill), a switched one to its new owner
 * (ramp_moved_in); a previous owner that is down, at its hard cap or
 * over its bounded cap sends the key to the new owner at once; a retry
 * after the previous owner failed walks on without it; unmoved keys are
 * untouched; a drained backend holds its keys. */
static void test_warm_pick(void)
{
	const char *r = "balance_factor = 1.25\nramp = 1h";
	struct snapshot *a = test_snap_of(r, "c1:1 c2:1 c3:1 c4:1");
	struct snapshot *b = test_snap_of(r, "c1:1 c2:1 c3:1 c4:1 c5:1");
	struct snapshot *d = test_snap_of(r, "c1:1 c2:1 c3:1 c4:0");
	struct snap_ramp_info info;
	struct ring_walk w;
	struct balance_pick p;
	uint64_t pos, u, held0, in0;
	int prev, c5, second;
	int64_t now = registry_now_ms();
	bool ok = true;

	if (!a || !b || !d) {
		tap_ok(0, "warm pick: snapshots built");
		goto out;
	}
	test_reset(b);
	/* the ramp began half an hour ago: keys with u < 1/2 switched */
	if (snapshot_ramp(b, a, now - 1800000, 0, &info) < 0 || snapshot_ramp(d, a, now - 1800000, 0, &info) < 0 ||
	    !test_moved_key(a, b, NULL, 0.6, 0.95, &pos, &u)) {
		tap_ok(0, "warm pick: ramps made, a held key found");
		goto out;
	}
	prev = test_be(b, a->ring->names[ring_lookup(a->ring, pos)]);
	c5 = test_be(b, "c5");
	held0 = atomic_load(&b->be[prev].state->ramp_held);
	p = test_pick_u(b, &w, pos, u);
	tap_ok(p.backend == prev && p.owner == prev && p.owner_verdict == BALANCE_OK &&
	       atomic_load(&b->be[prev].state->ramp_held) == held0 + 1,
	       "warm pick: a held key goes to its previous owner (%s), counted as held, no spill",
	       b->be[prev].conf->name);
	/* the previous owner failed: the request walks on without it */
	balance_next(b, &w, pos, &p);
	second = p.backend;
	if (p.backend >= 0)
		balance_release(b->be[p.backend].state);
	tap_ok(second == c5, "warm pick: a retry goes on to the key's new owner, not back to the old");
	while (p.backend >= 0) {
		balance_next(b, &w, pos, &p);
		ok &= p.backend != prev;
		if (p.backend >= 0)
			balance_release(b->be[p.backend].state);
	}
	tap_ok(ok, "warm pick: ... and never to the previous owner again");

	test_set_down(b, prev, 1);
	in0 = atomic_load(&b->be[c5].state->ramp_moved_in);
	p = test_pick_u(b, &w, pos, u);
	tap_ok(p.backend == c5 && atomic_load(&b->be[c5].state->ramp_moved_in) == in0 + 1,
	       "warm pick: previous owner down: the new owner at once (counted as moved in)");
	test_reset(b);
	test_set_inflight(b, prev, 40);
	held0 = atomic_load(&b->be[prev].state->ramp_held);
	p = test_pick_u(b, &w, pos, u);
	tap_ok(p.backend == prev && atomic_load(&b->be[prev].state->ramp_held) == held0 + 1,
	       "warm pick: previous owner over its bounded cap, the key not hot: still held there");
	test_heat(pos);
	p = test_pick_u(b, &w, pos, u);
	tap_ok(p.backend == c5, "warm pick: ... a hot held key: the new owner");
	test_reset(b);

	ok = test_moved_key(a, b, NULL, 0.05, 0.45, &pos, &u);
	p = test_pick_u(b, &w, pos, u);
	tap_ok(ok && p.backend == ring_lookup(b->ring, pos) && p.backend == c5,
	       "warm pick: a switched key goes to its new owner");
	{
		int unmoved_ok = 1, n = 0;
		char key[64];

		for (int i = 0; i < 3000; i++) {
			int len = snprintf(key, sizeof(key), "/w/%d.jpg", i);
			uint64_t kp = ring_hash2(key, (size_t)len, &u);
			int oa = ring_lookup(a->ring, kp), ob = ring_lookup(b->ring, kp);

			if (strcmp(a->ring->names[oa], b->ring->names[ob]) != 0)
				continue;
			n++;
			p = test_pick_u(b, &w, kp, u);
			unmoved_ok &= p.backend == ob;
		}
		tap_ok(unmoved_ok && n > 2000, "warm pick: %d unmoved keys each at their owner", n);
	}
	test_reset(d);
	ok = test_moved_key(a, d, "c4", 0.6, 0.95, &pos, &u);
	p = test_pick_u(d, &w, pos, u);
	tap_ok(ok && p.backend == test_be(d, "c4"),
	       "warm pick: a backend drained to weight 0 still takes its held keys");
	ok = test_moved_key(a, d, "c4", 0.05, 0.45, &pos, &u);
	p = test_pick_u(d, &w, pos, u);
	tap_ok(ok && p.backend == ring_lookup(d->ring, pos) && p.backend != test_be(d, "c4"),
	       "warm pick: ... and its switched keys go to their new owners");
	{
		/* with max_inflight: the held backend at its hard cap */
		struct snapshot *bc = NULL;
		char text[1024], err[256];
		struct conf_errors errs = { 0 };
		struct conf *c;
		int n = snprintf(text, sizeof(text), "[ring]\nvnodes = 160\nbalance_factor = 0\nramp = 1h\n");

		for (int i = 1; i <= 5; i++)
			n += snprintf(text + n, sizeof(text) - (size_t)n,
				      "[backend c%d]\nurl = http://127.0.0.1:%d\nmax_inflight = 2\n", i, 9300 + i);
		c = conf_load_string("t.ini", text, &errs);
		conf_errors_free(&errs);
		if (c && !(bc = snapshot_new(c, 2, err, sizeof(err))))
			conf_free(c);
		ok = bc && snapshot_ramp(bc, a, now - 1800000, 0, &info) == 0 &&
		     test_moved_key(a, bc, NULL, 0.6, 0.95, &pos, &u);
		if (ok) {
			test_reset(bc);
			prev = test_be(bc, a->ring->names[ring_lookup(a->ring, pos)]);
			test_set_inflight(bc, prev, 2);
			p = test_pick_u(bc, &w, pos, u);
			ok = p.backend == test_be(bc, "c5");
			test_reset(bc);
		}
		tap_ok(ok, "warm pick: previous owner at its max_inflight: the new owner");
		snapshot_unref(bc);
	}
out:
	snapshot_unref(a);
	snapshot_unref(b);
	snapshot_unref(d);
}

static uint64_t test_key(int k)
{
	char key[64];
	int len = snprintf(key, sizeof(key), "/u/%d.jpg", k);

	return ring_hash(key, (size_t)len);
}

/* A request as req_serve places it (balance_start counts the key), its
 * in-flight slot released at once: the pick. */
static struct balance_pick test_served(const struct snapshot *s, uint64_t pos)
{
	struct ring_walk w;
	struct balance_pick p;

	balance_start(s, &w, &p, pos, 0);
	balance_next(s, &w, pos, &p);
	if (p.backend >= 0)
		balance_release(s->be[p.backend].state);
	return p;
}

static int test_request(const struct snapshot *s, uint64_t pos, int *owner)
{
	struct balance_pick p = test_served(s, pos);

	*owner = p.owner;
	return p.backend;
}

/* Issue 17: the bounded-load cap moves hot keys, and rare ones only as hot
 * keys take over the load. Under even load (3,000 keys, each 1/3000 of
 * the requests) an owner over its cap keeps every key; a key with 1 in 10
 * of the requests spills while rare keys of its owner stay; with half of
 * the requests on one key every key is bounded by the cap again. */
static void test_hot(void)
{
	struct snapshot *s = test_snap("balance_factor = 1.25", "", "");
	uint64_t hot = ring_hash("/hot/viral.jpg", 14);
	int order[NB], spilled = 0, over = 0, owner, b, hotkeys = 0;
	struct balance_why why;

	if (!tap_ok(s != NULL, "snapshot for hot keys"))
		return;
	test_reset(s);
	/* even load: 9,000 requests over 3,000 keys, several windows */
	for (int r = 0; r < 9000; r++)
		(void)test_request(s, test_key(r % 3000), &owner);
	/* then every key once more, its owner far over the cap: 64 of 80 in
	 * flight against cap ceil(1.25 x 81 / 4) = 26 */
	for (int k = 0; k < 3000; k++) {
		uint64_t kp = test_key(k);

		test_order(s, kp, order);
		test_set_inflight(s, order[0], 64);
		test_set_inflight(s, order[1], 16);
		b = test_request(s, kp, &owner);
		over++;
		spilled += b != owner;
		balance_explain(s, order[0], kp, &why);
		hotkeys += why.hot;
		test_set_inflight(s, order[0], 0);
		test_set_inflight(s, order[1], 0);
	}
	tap_is_int(spilled, 0, "even load over 3,000 keys, each owner over its cap: no request spills");
	tap_is_int(hotkeys, 0, "even load: /ring says no key is hot");
	tap_is_int(over, 3000, "each of the 3,000 keys asked with its owner over the cap");
	{
		int n = 0, agree = 0;

		/* 256 in flight, a key's threshold is 1/257 of the requests:
		 * still far above 1/3000 */
		for (int k = 0; k < 500; k++) {
			uint64_t kp = test_key(k);

			test_order(s, kp, order);
			test_set_inflight(s, order[0], 200);
			test_set_inflight(s, order[1], 56);
			b = test_request(s, kp, &owner);
			agree += b == order[0];
			n++;
			test_set_inflight(s, order[0], 0);
			test_set_inflight(s, order[1], 0);
		}
		tap_is_int(agree, n, "even load, 256 in flight, owners over the cap: every key stays on its owner");
	}

	/* a hot key with 1 in 10 of the requests, 100 in flight while they
	 * are placed (25 on each backend): hot (1/10 x 101 >= 1), and a
	 * tenth of the load hot, so rare keys get cap x 0.9 / 0.2 */
	test_reset(s);
	test_order(s, hot, order);
	for (int k = 0; k < NB; k++)
		test_set_inflight(s, k, 25);
	for (int r = 0; r < 9000; r++)
		(void)test_request(s, r % 10 ? test_key(r % 3000) : hot, &owner);
	tap_ok(balance_hot_share() > 0.08 && balance_hot_share() < 0.12,
	       "hot share: 1 in 10 of the requests hot (%.3f)", balance_hot_share());
	test_set_inflight(s, order[0], 40);     /* cap ceil(1.25 x 116 / 4) = 37 */
	balance_explain(s, order[0], hot, &why);
	tap_ok(why.hot && why.verdict == BALANCE_BOUNDED && why.cap == 37,
	       "a key with 1 in 10 of the requests is hot; its owner over the cap (40 of 37) is bounded");
	{
		struct balance_pick p = test_served(s, hot);

		tap_ok(p.owner == order[0] && p.backend == order[1] && p.owner_hot,
		       "the hot key spills to the next distinct backend, counted as hot (spilled_hot)");
	}
	/* a rare key with the same owner over its cap stays: its bound is
	 * ceil(37 x 0.9 / 0.2) = 167 or so */
	{
		int stayed = 0, n = 0;

		for (int k = 0; k < 3000 && n < 20; k++) {
			uint64_t kp = test_key(k);
			int o[NB];

			test_order(s, kp, o);
			if (o[0] != order[0])
				continue;
			n++;
			b = test_request(s, kp, &owner);
			stayed += b == order[0];
		}
		balance_explain(s, order[0], test_key(0), &why);
		tap_ok(n == 20 && stayed == n, "meanwhile rare keys of the same loaded owner stay on it");
		tap_ok(!why.hot && why.rare_cap > 150 && why.rare_cap < 190,
		       "/ring: a rare key's bound there is %ld", why.rare_cap);
	}

	/* the viral key: half of the requests, the rest over the 3,000, 40
	 * in flight while they are placed: now every key is bounded by the
	 * cap (the rare keys' bound shrinks to it at a hot share of 1/3),
	 * so the owner a stalled cache or the hot key keeps full gathers no
	 * more than the cap, as the bounded-loads guarantee has it */
	test_reset(s);
	for (int k = 0; k < NB; k++)
		test_set_inflight(s, k, 10);
	for (int r = 0; r < 9000; r++)
		(void)test_request(s, r % 2 ? hot : test_key(r % 3000), &owner);
	tap_ok(balance_hot_share() > 0.45 && balance_hot_share() < 0.55,
	       "hot share: half of the requests hot (%.3f)", balance_hot_share());
	{
		/* early in the second window of the sketch: counts halved
		 * once, the share still a half (not a quarter) */
		double h;

		balance_hot_reset();
		for (int r = 0; r < 1100; r++)
			(void)test_request(s, r % 2 ? hot : test_key(r % 3000), &owner);
		h = balance_hot_share();
		tap_ok(h > 0.4 && h < 0.6, "hot share after the first halving: still a half (%.3f)", h);
	}
	test_set_inflight(s, order[0], 20);     /* cap ceil(1.25 x 51 / 4) = 16 */
	{
		int moved = 0, n = 0, counted_hot = 0;

		for (int k = 0; k < 3000 && n < 20; k++) {
			uint64_t kp = test_key(k);
			int o[NB];
			struct balance_pick p;

			test_order(s, kp, o);
			if (o[0] != order[0])
				continue;
			n++;
			p = test_served(s, kp);
			moved += p.backend == o[1];
			counted_hot += p.owner_hot;
		}
		tap_ok(n == 20 && moved == n, "viral key: rare keys of an owner over the cap move too");
		tap_is_int(counted_hot, 0, "... and are not counted as hot spills");
	}
	balance_explain(s, order[0], test_key(1), &why);
	tap_ok(!why.hot && why.cap == 16 && why.rare_cap == why.cap,
	       "viral key: /ring gives a rare key the cap as its bound (%ld)", why.rare_cap);

	/* a warm key, 1 in 50 of the requests: hot with many requests in
	 * flight (1/50 x 201 >= 1), not with few (1/50 x 11 < 1) */
	test_reset(s);
	for (int r = 0; r < 9000; r++)
		(void)test_request(s, r % 50 ? test_key(r % 3000) : hot, &owner);
	tap_ok(!balance_is_hot(hot, 10), "a key with 1 in 50 of the requests, 10 in flight: not hot");
	tap_ok(balance_is_hot(hot, 200), "the same key, 200 in flight: hot");
	test_reset(s);
	snapshot_unref(s);
}

int main(void)
{
	log_set_level(LOG_ERROR);
	test_explain();
	test_cap();
	test_rare_cap();
	test_bounded();
	test_replicas();
	test_hot();
	test_hard_cap();
	test_factor_off();
	test_bounded_fallback();
	test_acquire();
	test_trial_all_down();
	test_slow_start();
	test_cache_pair();
	test_ramp_race();
	test_passive();
	test_passive_last();
	test_passive_last_race();
	test_warm_snapshot();
	test_warm_pick();
	balance_hot_reset();
	registry_free();
	return tap_done();
}
