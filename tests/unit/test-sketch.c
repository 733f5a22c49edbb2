/*
 * test-sketch.c -- sketch.c: exact counts while keys are few, saturation,
 * halving at the window's end, the doorkeeper, bounded over-estimation
 * when the sketch is full, and no lost increment when threads count the
 * same keys at once.
 */
#include "base/sketch.h"
#include "tap.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

static uint64_t test_rng = 0x5eed5ce7;

static uint64_t test_rand(void)
{
	uint64_t z = (test_rng += UINT64_C(0x9e3779b97f4a7c15));

	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* Keys as a caller hashes them: here just distinct 64-bit values. */
static uint64_t key(unsigned i)
{
	return UINT64_C(0x1234567) * (i + 1);
}

/* sketch_increment's return is the estimate right after it, in every
 * mode (the cache's min_uses reads it instead of a second lookup). */
static void test_increment_returns(void)
{
	static const unsigned flags[] = { 0, SKETCH_LOCKED, SKETCH_DOORKEEPER,
					  SKETCH_LOCKED | SKETCH_DOORKEEPER };
	unsigned f, i, bad = 0, first_one = 0;

	for (f = 0; f < 4; f++) {
		struct sketch *s = sketch_new(1000, 4, 1000000, flags[f]);

		for (i = 0; i < 3000; i++) {
			uint64_t h = (uint64_t)(i % 700) * UINT64_C(0x9e3779b97f4a7c15);
			unsigned got = sketch_increment(s, h);

			bad += got != sketch_estimate(s, h);
			first_one += i < 700 && got == 1;
		}
		sketch_free(s);
	}
	tap_is_int(bad, 0, "sketch_increment returns the estimate with the occurrence counted");
	tap_ok(first_one > 4 * 700 * 9 / 10, "a key's first occurrence reads 1 (%u of %u)", first_one, 4 * 700);
}

/* A long tail: many more distinct keys than the sketch was sized for, as
 * a shard sees when URLs rarely repeat. Its default window (10 x expected
 * increments) fills each counter a few times over, so without the
 * doorkeeper a key never seen reads 2 or more (the cache's min_uses would
 * take it for a repeat and store it); with it, new keys are absorbed by
 * the filter and the counters hold only keys seen twice. */
static unsigned tail_false_repeats(unsigned flags)
{
	struct sketch *s = sketch_new(1024, 4, 0, flags);
	unsigned i, fresh = 0;

	/* 2.5 windows of keys each seen once, then new keys' first reads */
	for (i = 0; i < 25600; i++)
		sketch_increment(s, key(1000000 + i));
	for (i = 0; i < 1000; i++)
		fresh += sketch_increment(s, key(5000000 + i)) >= 2;
	sketch_free(s);
	return fresh;
}

static void test_long_tail(void)
{
	unsigned plain = tail_false_repeats(SKETCH_LOCKED);
	unsigned door = tail_false_repeats(SKETCH_LOCKED | SKETCH_DOORKEEPER);

	tap_ok(door <= 200, "long tail, doorkeeper: %u of 1000 new keys read as repeats", door);
	tap_ok(plain >= 400, "without it: %u of 1000 do (the test tells them apart)", plain);
}

static void test_counts(void)
{
	struct sketch *s = sketch_new(1000, 4, 1000000, 0);
	unsigned i, bad = 0;

	tap_ok(s != NULL, "4-bit sketch for 1000 keys");
	tap_is_int(sketch_max(s), 15, "4-bit counters saturate at 15");
	tap_is_int(sketch_window(s), 1000000, "window as given");
	tap_is_int(sketch_estimate(s, key(1)), 0, "an unseen key estimates 0");
	for (i = 0; i < 10; i++)
		sketch_increment(s, key(i));
	for (i = 0; i < 10; i++)
		sketch_increment(s, key(3));
	for (i = 0; i < 10; i++)
		if (sketch_estimate(s, key(i)) != (i == 3 ? 11u : 1u))
			bad++;
	tap_is_int(bad, 0, "ten keys counted exactly (key 3: 11, the others 1)");
	for (i = 0; i < 100; i++)
		sketch_increment(s, key(3));
	tap_is_int(sketch_estimate(s, key(3)), 15, "a counter stops at 15");
	sketch_halve(s);
	tap_is_int(sketch_estimate(s, key(3)), 7, "halving: 15 -> 7");
	tap_is_int(sketch_estimate(s, key(4)), 0, "halving: 1 -> 0");
	sketch_free(s);

	s = sketch_new(100, 8, 1000000, 0);
	for (i = 0; i < 300; i++)
		sketch_increment(s, key(7));
	tap_is_int(sketch_estimate(s, key(7)), 255, "8-bit counters saturate at 255");
	sketch_free(s);
	tap_ok(sketch_new(100, 5, 0, 0) == NULL, "5-bit counters refused");
	sketch_free(NULL);
}

static void test_window(void)
{
	struct sketch *s = sketch_new(4096, 4, 1000, 0);
	unsigned i;

	tap_is_int(sketch_window(s), 1000, "window 1000");
	for (i = 0; i < 12; i++)
		sketch_increment(s, key(1));
	/* 12 counted; 988 more increments of other keys end the window */
	for (i = 0; i < 987; i++)
		sketch_increment(s, key(1000 + i % 500));
	tap_is_int(sketch_estimate(s, key(1)), 12, "before the window's end: 12");
	sketch_increment(s, key(1000));
	tap_is_int(sketch_estimate(s, key(1)), 6, "the 1000th increment halves: 6");
	tap_is_int(sketch_samples(s), 1000, "1000 samples counted");
	sketch_free(s);
}

/* The same counts and halving when the caller serialises increments. */
static void test_locked(void)
{
	struct sketch *s = sketch_new(4096, 4, 1000, SKETCH_LOCKED);
	unsigned i;

	for (i = 0; i < 12; i++)
		sketch_increment(s, key(1));
	for (i = 0; i < 987; i++)
		sketch_increment(s, key(1000 + i % 500));
	tap_is_int(sketch_estimate(s, key(1)), 12, "locked: 12 before the window's end");
	sketch_increment(s, key(1000));
	tap_is_int(sketch_estimate(s, key(1)), 6, "locked: the 1000th increment halves");
	for (i = 0; i < 1000; i++)
		sketch_increment(s, key(2000 + i % 500));
	tap_is_int(sketch_estimate(s, key(1)), 3, "locked: and the 2000th again");
	tap_is_int(sketch_samples(s), 2000, "locked: 2000 samples");
	for (i = 0; i < 40; i++)
		sketch_increment(s, key(3));
	tap_is_int(sketch_estimate(s, key(3)), 15, "locked: saturates at 15");
	sketch_free(s);
}

static void test_default_window(void)
{
	struct sketch *s = sketch_new(5000, 4, 0, 0);

	tap_is_int(sketch_window(s), 50000, "default window: 10 x expected");
	sketch_free(s);
}

static void test_doorkeeper(void)
{
	struct sketch *s = sketch_new(1000, 4, 100000, SKETCH_DOORKEEPER);
	unsigned i, ones = 0;

	sketch_increment(s, key(1));
	tap_is_int(sketch_estimate(s, key(1)), 1, "doorkeeper: first occurrence counts 1");
	sketch_increment(s, key(1));
	sketch_increment(s, key(1));
	tap_is_int(sketch_estimate(s, key(1)), 3, "doorkeeper: three occurrences count 3");
	for (i = 0; i < 20; i++)
		sketch_increment(s, key(1));
	tap_is_int(sketch_estimate(s, key(1)), 16, "doorkeeper: 15 in the sketch + 1");
	sketch_halve(s);
	tap_is_int(sketch_estimate(s, key(1)), 7, "halving clears the doorkeeper");
	/* one-hit wonders stay out of the counters */
	for (i = 0; i < 2000; i++)
		sketch_increment(s, key(100 + i));
	for (i = 0; i < 2000; i++)
		ones += sketch_estimate(s, key(100 + i)) == 1;
	tap_ok(ones >= 1900, "2000 one-hit keys estimate 1 (%u did)", ones);
	sketch_free(s);
}

/* Sized for 4096 keys and given 4096 distinct ones with known counts:
 * never under the truth, and on average well within one count above. */
static void test_accuracy(void)
{
	struct sketch *s = sketch_new(4096, 4, UINT64_C(1) << 40, 0);
	unsigned *truth = calloc(4096, sizeof(*truth)), i, under = 0;
	double over = 0;

	for (i = 0; i < 40000; i++) {
		unsigned k = (unsigned)(test_rand() % 4096);

		k = k * k / 4096;       /* skewed toward small k */
		truth[k]++;
		sketch_increment(s, key(k));
	}
	for (i = 0; i < 4096; i++) {
		unsigned t = truth[i] > 15 ? 15 : truth[i], e = sketch_estimate(s, key(i));

		under += e < t;
		over += e - (e < t ? e : t);
	}
	tap_is_int(under, 0, "no key is under-estimated");
	tap_ok(over / 4096 < 0.5, "mean over-estimate %.3f < 0.5", over / 4096);
	free(truth);
	sketch_free(s);
}

struct conc {
	struct sketch *s;
	pthread_barrier_t *bar;
};

#define CONC_KEYS 32
#define CONC_EACH 60            /* 4 threads x 60 = 240 <= 255 */

static void *conc_run(void *arg)
{
	struct conc *cc = arg;
	unsigned i, k;

	pthread_barrier_wait(cc->bar);
	for (i = 0; i < CONC_EACH; i++)
		for (k = 0; k < CONC_KEYS; k++)
			sketch_increment(cc->s, key(k));
	return NULL;
}

/* Four threads raise the same counters at once: with 8-bit counters and
 * no halving, every key must reach exactly 4 x 60 (a lost update shows as
 * less; with 32 keys in a sketch for 4096 none collide on all four).
 * Repeated over fresh sketches, since a race needs the threads to meet. */
static void test_threads(void)
{
	pthread_barrier_t bar;
	pthread_t t[4];
	unsigned i, round, lost = 0, more = 0, badsamples = 0;

	pthread_barrier_init(&bar, NULL, 4);
	for (round = 0; round < 30; round++) {
		struct sketch *s = sketch_new(4096, 8, UINT64_C(1) << 40, 0);
		struct conc cc = { s, &bar };
		uint64_t n;

		for (i = 0; i < 4; i++)
			pthread_create(&t[i], NULL, conc_run, &cc);
		for (i = 0; i < 4; i++)
			pthread_join(t[i], NULL);
		for (i = 0; i < CONC_KEYS; i++) {
			unsigned e = sketch_estimate(s, key(i));

			lost += e < 4 * CONC_EACH;
			more += e > 4 * CONC_EACH;
		}
		n = sketch_samples(s);
		badsamples += n > 4u * CONC_EACH * CONC_KEYS
			      || n + 4 * 64 < 4u * CONC_EACH * CONC_KEYS;
		sketch_free(s);
	}
	tap_is_int(lost, 0, "30 x 4 threads x 60 increments of 32 keys: none lost");
	tap_is_int(more, 0, "and none counted twice");
	tap_is_int(badsamples, 0, "samples within a batch per thread of the truth");
	pthread_barrier_destroy(&bar);
}

/* sketch_add(n) counts what n sketch_increment calls would: the same
 * estimates (the doorkeeper's first occurrence, saturation) and samples,
 * in every mode, and a window it crosses halves. */
static void test_add(void)
{
	static const unsigned flags[] = { 0, SKETCH_LOCKED, SKETCH_DOORKEEPER,
					  SKETCH_LOCKED | SKETCH_DOORKEEPER };
	static const unsigned ns[] = { 1, 2, 3, 7, 16, 40 };
	unsigned f, j, i, bad = 0;

	for (f = 0; f < 4; f++) {
		for (j = 0; j < sizeof(ns) / sizeof(ns[0]); j++) {
			struct sketch *a = sketch_new(1000, 4, 1000000, flags[f]);
			struct sketch *b = sketch_new(1000, 4, 1000000, flags[f]);
			unsigned ea, eb = 0;

			ea = sketch_add(a, key(7), ns[j]);
			for (i = 0; i < ns[j]; i++)
				eb = sketch_increment(b, key(7));
			bad += ea != eb || sketch_estimate(a, key(7)) != sketch_estimate(b, key(7))
			       || ((flags[f] & SKETCH_LOCKED) && sketch_samples(a) != sketch_samples(b));
			sketch_free(a);
			sketch_free(b);
		}
	}
	tap_is_int(bad, 0, "sketch_add(n): the estimate and samples of n increments, in all 4 modes");
	{
		struct sketch *s = sketch_new(4096, 4, 1000, SKETCH_LOCKED);

		sketch_add(s, key(1), 12);
		sketch_add(s, key(2), 990);
		tap_is_int(sketch_estimate(s, key(1)), 6, "sketch_add: crossing the window's end halves");
		tap_is_int(sketch_samples(s), 1002, "sketch_add: every occurrence counted");
		sketch_free(s);
	}
}

int main(void)
{
	test_increment_returns();
	test_counts();
	test_window();
	test_locked();
	test_default_window();
	test_doorkeeper();
	test_long_tail();
	test_accuracy();
	test_threads();
	test_add();
	return tap_done();
}
