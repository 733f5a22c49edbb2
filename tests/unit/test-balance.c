/*
 * test-balance.c -- balance.c and the passive half of health.c over a
 * hand-built snapshot: the cap formula against known values, then the walk
 * with registry counters set by hand (in-flight, down, slow start), each
 * verdict checked against ring_walk's independent order of backends.
 *
 * Registry entries are keyed by name and outlive snapshots, so every case
 * resets the counters it depends on (test_reset).
 */
#include "balance.h"
#include "conf.h"
#include "health.h"
#include "log.h"
#include "registry.h"
#include "ring.h"
#include "snapshot.h"
#include "tap.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NB 4
#define EXPLAIN_N 4

static struct snapshot *test_snap(const char *extra_ring, const char *extra_be,
				  const char *extra_health)
{
	char text[4096], err[512];
	struct conf_errors errs = { 0 };
	struct conf *c;
	struct snapshot *s;
	int n = snprintf(text, sizeof(text), "[ring]\nvnodes = 160\n%s\n[health]\n%s\n",
			 extra_ring, extra_health);

	for (int i = 0; i < NB; i++)
		n += snprintf(text + n, sizeof(text) - (size_t)n,
			      "[backend cache-%d]\nurl = http://127.0.0.1:%d\n%s\n",
			      i, 9100 + i, extra_be);
	c = conf_load_string("t.ini", text, &errs);
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

static struct balance_pick test_pick(const struct snapshot *s, uint64_t pos)
{
	struct ring_walk w;
	struct balance_pick p = { .backend = -1, .owner = -1 };

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
		char key[64];

		test_reset(s);
		for (int k = 0; k < 200; k++) {
			int len = snprintf(key, sizeof(key), "/k/%d.jpg", k);
			uint64_t kp = ring_hash(key, (size_t)len);
			int o[NB];

			test_order(s, kp, o);
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
	health_request_failed(b, s->conf, cb, "connect: Connection refused");
	health_request_failed(b, s->conf, cb, "connect: Connection refused");
	tap_is_int(atomic_load(&b->down), 0, "2 failures of fall 3: still up");
	health_request_ok(b, cb);
	tap_is_int(atomic_load(&b->fails), 0, "a success resets the failure count");
	health_request_failed(b, s->conf, cb, "connect: Connection refused");
	health_request_failed(b, s->conf, cb, "connect: Connection refused");
	tap_is_int(atomic_load(&b->down), 0, "failures must be consecutive");
	health_request_failed(b, s->conf, cb, "connect: Connection refused");
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
	health_request_failed(b, s->conf, cb, "connect: Connection refused");
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
		health_request_failed(s->be[0].state, s->conf, s->be[0].conf, "timeout");
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
	health_request_failed(b, s->conf, cb, "timeout");
	tap_is_int(atomic_load(&b->down), 1, "active checks on: a passive failure still takes it down");
	atomic_store(&b->retry_at_ms, 0);
	tap_ok(!health_trial(b, cb, s->conf), "active checks on: no passive trial");
	health_request_ok(b, cb);
	tap_is_int(atomic_load(&b->down), 1,
		   "active checks on: a late response from before the fall does not bring it up");
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

int main(void)
{
	log_set_level(LOG_ERROR);
	test_explain();
	test_cap();
	test_bounded();
	test_hard_cap();
	test_factor_off();
	test_bounded_fallback();
	test_acquire();
	test_trial_all_down();
	test_slow_start();
	test_cache_pair();
	test_ramp_race();
	test_passive();
	registry_free();
	return tap_done();
}
