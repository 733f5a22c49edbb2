/*
 * sketch.c -- TinyLFU's count-min sketch (see sketch.h): a table of 64-byte
 * blocks of 64-bit words, each word holding 16 four-bit or 8 eight-bit
 * counters. A key's hash, mixed again, picks one block and, in each of
 * four rows, one of two words and one counter in it; the estimate is the
 * smallest of the four (Cormode and Muthukrishnan's count-min). With the
 * doorkeeper, a block holds one counter word a row and, in its other four
 * words, the doorkeeper's bits for the keys of that block (a blocked Bloom
 * filter: a key's two bits in one word), so whatever a key's occurrence
 * reads or writes is one cache line: the shards' sketches are written by
 * every worker, and each line a lookup touches is one more the cores pass
 * between them.
 *
 * Any thread, no lock: counters change by compare-and-swap on their word,
 * the doorkeeper by fetch-or, and the halving by compare-and-swap word by
 * word, so a concurrent increment lands before or after the halving of its
 * word, never lost. Exactly one thread halves at each window boundary: the
 * one whose published batch crosses it.
 */
#include "base/sketch.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define SKETCH_ROWS    4
#define SKETCH_WORDS   8        /* words a block: one 64-byte cache line */
#define SKETCH_SLOTS   8        /* thread slots of the increment count */
#define SKETCH_BATCH   64       /* most increments a slot holds back */

/* A thread's share of the increment count, alone on its cache line. */
struct sketch_slot {
	alignas(64) _Atomic uint64_t n;
};

struct sketch {
	_Atomic uint64_t *words;        /* nblocks * SKETCH_WORDS */
	uint64_t block_mask;            /* nblocks - 1 */
	unsigned bits;                  /* counter width: 4 or 8 */
	unsigned index_mask;            /* counters a word - 1 */
	uint64_t max;                   /* a counter's largest value */
	uint64_t half_mask;             /* keeps each counter's low bits
					   after a word is shifted right */
	uint64_t window;
	uint64_t batch;                 /* power of two, <= SKETCH_BATCH */
	bool door;                      /* SKETCH_DOORKEEPER */
	unsigned row_words;             /* words a row has in a block: 2, or
					   1 with the doorkeeper */
	size_t nwords;
	bool locked;                    /* SKETCH_LOCKED */
	uint64_t next_halve;            /* SKETCH_LOCKED: total that halves */
	_Atomic uint64_t total;         /* published increments */
	struct sketch_slot slots[SKETCH_SLOTS];
};

/* Each thread takes a slot number once, round robin. */
static _Atomic unsigned sketch_next_slot;
static _Thread_local unsigned sketch_my_slot;

static uint64_t sketch_pow2(uint64_t n)
{
	uint64_t p = 1;

	while (p < n)
		p <<= 1;
	return p;
}

/* The splitmix64 finalizer: a caller's hash may be weak in some bits. */
static uint64_t sketch_mix(uint64_t z)
{
	z ^= UINT64_C(0x9e3779b97f4a7c15);
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

struct sketch *sketch_new(size_t expected, unsigned bits, uint64_t window,
			  unsigned flags)
{
	struct sketch *s = NULL;
	uint64_t keys, nblocks;

	if (bits != 4 && bits != 8)
		goto fail;
	s = aligned_alloc(64, sizeof(*s));
	if (s == NULL)
		goto fail;
	memset(s, 0, sizeof(*s));
	keys = sketch_pow2(expected < 16 ? 16 : expected);
	/* 16 counters a key in each case: ample for a count-min of 4 rows;
	 * with the doorkeeper, blocks are half counters, half filter (64
	 * filter bits a key: about 6 a key seen in a window, so a false
	 * positive rate near 8% at the window's end, less before; a false
	 * positive only costs one count) */
	s->door = (flags & SKETCH_DOORKEEPER) != 0;
	s->row_words = s->door ? 1 : 2;
	s->nwords = (size_t)(bits == 4 ? keys : 2 * keys) * (s->door ? 2 : 1);
	nblocks = s->nwords / SKETCH_WORDS;
	s->block_mask = nblocks - 1;
	s->bits = bits;
	s->locked = (flags & SKETCH_LOCKED) != 0;
	s->index_mask = 64 / bits - 1;
	s->max = (UINT64_C(1) << bits) - 1;
	s->half_mask = bits == 4 ? UINT64_C(0x7777777777777777)
				 : UINT64_C(0x7f7f7f7f7f7f7f7f);
	s->window = window != 0 ? window : 10 * (uint64_t)(expected < 16 ? 16 : expected);
	s->next_halve = s->window;
	s->batch = 1;
	while (s->batch < SKETCH_BATCH && s->batch * 256 <= s->window)
		s->batch <<= 1;
	s->words = aligned_alloc(64, s->nwords * sizeof(uint64_t));
	if (s->words == NULL)
		goto fail;
	memset((void *)s->words, 0, s->nwords * sizeof(uint64_t));
	return s;
fail:
	sketch_free(s);
	return NULL;
}

void sketch_free(struct sketch *s)
{
	if (s == NULL)
		return;
	free((void *)s->words);
	free(s);
}

/* Where row r of the key mixed to g lives: its word and bit shift. */
static _Atomic uint64_t *sketch_cell(const struct sketch *s, uint64_t g,
				     unsigned r, unsigned *shift)
{
	_Atomic uint64_t *blk = s->words + ((g >> 32) & s->block_mask) * SKETCH_WORDS;

	*shift = (unsigned)((g >> (4 * r)) & s->index_mask) * s->bits;
	return blk + s->row_words * r + ((g >> (16 + r)) & (s->row_words - 1));
}

/* The key's doorkeeper word (one of its block's last four) and its two
 * bits there. */
static _Atomic uint64_t *sketch_door_word(const struct sketch *s, uint64_t g,
					  uint64_t *mask)
{
	uint64_t h = sketch_mix(g);

	*mask = (UINT64_C(1) << (h & 63)) | (UINT64_C(1) << ((h >> 6) & 63));
	return s->words + ((g >> 32) & s->block_mask) * SKETCH_WORDS
	       + SKETCH_ROWS + ((h >> 12) & 3);
}

/* Set the key's doorkeeper bits; true if they were not all set before
 * (the first occurrence in this window, as far as the filter knows). */
static bool sketch_door_add(struct sketch *s, uint64_t g)
{
	uint64_t m, old;
	_Atomic uint64_t *w = sketch_door_word(s, g, &m);

	old = atomic_load_explicit(w, memory_order_relaxed);
	if ((old & m) == m)
		return false;
	if (s->locked) {
		atomic_store_explicit(w, old | m, memory_order_relaxed);
		return true;
	}
	old = atomic_fetch_or_explicit(w, m, memory_order_relaxed);
	return (old & m) != m;
}

static bool sketch_door_has(const struct sketch *s, uint64_t g)
{
	uint64_t m;
	_Atomic uint64_t *w = sketch_door_word(s, g, &m);

	return (atomic_load_explicit(w, memory_order_relaxed) & m) == m;
}

/* Raise the key's four counters by n, each up to saturation. (Conservative
 * update, raising only the counters at the minimum, over-counts less but
 * loses increments when threads race: one sees the other's raise and
 * skips its own.) */
static unsigned sketch_raise(struct sketch *s, uint64_t g, uint64_t n)
{
	uint64_t min = s->max;
	unsigned r, sh;

	for (r = 0; r < SKETCH_ROWS; r++) {
		_Atomic uint64_t *w = sketch_cell(s, g, r, &sh);
		uint64_t old = atomic_load_explicit(w, memory_order_relaxed), v, k;

		/* a saturated counter is not written: the hottest keys'
		 * lines stay shared between cores */
		if (s->locked) {
			v = (old >> sh) & s->max;
			k = s->max - v < n ? s->max - v : n;
			if (k != 0) {
				atomic_store_explicit(w, old + (k << sh), memory_order_relaxed);
				v += k;
			}
			min = v < min ? v : min;
			continue;
		}
		do {
			v = (old >> sh) & s->max;
			k = s->max - v < n ? s->max - v : n;
		} while (k != 0 && !atomic_compare_exchange_weak_explicit(w, &old, old + (k << sh),
				memory_order_relaxed, memory_order_relaxed));
		v += k;
		min = v < min ? v : min;
	}
	return (unsigned)min;
}

void sketch_halve(struct sketch *s)
{
	size_t i;

	for (i = 0; i < s->nwords; i++) {
		uint64_t old;

		if (s->door && i % SKETCH_WORDS >= SKETCH_ROWS) {
			/* a doorkeeper word: cleared */
			atomic_store_explicit(&s->words[i], 0, memory_order_relaxed);
			continue;
		}
		old = atomic_load_explicit(&s->words[i], memory_order_relaxed);
		if (s->locked) {
			atomic_store_explicit(&s->words[i], (old >> 1) & s->half_mask,
					      memory_order_relaxed);
			continue;
		}
		while (!atomic_compare_exchange_weak_explicit(&s->words[i], &old,
				(old >> 1) & s->half_mask,
				memory_order_relaxed, memory_order_relaxed))
			;
	}
}

/* Count n increments in this thread's slot; publish each whole batch to
 * the total, and halve when that crosses a window boundary. */
static void sketch_count(struct sketch *s, uint64_t k)
{
	unsigned slot = sketch_my_slot;
	uint64_t n, before, batches;

	if (s->locked) {
		/* one writer: no batching needed, and no locked instruction */
		n = atomic_load_explicit(&s->total, memory_order_relaxed) + k;
		atomic_store_explicit(&s->total, n, memory_order_relaxed);
		if (n >= s->next_halve) {
			s->next_halve += s->window;
			sketch_halve(s);
		}
		return;
	}
	if (slot == 0) {
		slot = atomic_fetch_add_explicit(&sketch_next_slot, 1,
						 memory_order_relaxed) % SKETCH_SLOTS + 1;
		sketch_my_slot = slot;
	}
	n = atomic_fetch_add_explicit(&s->slots[slot - 1].n, k,
				      memory_order_relaxed) + k;
	batches = n / s->batch - (n - k) / s->batch;
	if (batches == 0)
		return;
	before = atomic_fetch_add_explicit(&s->total, batches * s->batch, memory_order_relaxed);
	if ((before + batches * s->batch) / s->window != before / s->window)
		sketch_halve(s);
}

/* The smallest of the key's four counters. */
static unsigned sketch_least(const struct sketch *s, uint64_t g)
{
	uint64_t min = s->max;
	unsigned r, sh;

	for (r = 0; r < SKETCH_ROWS; r++) {
		_Atomic uint64_t *w = sketch_cell(s, g, r, &sh);
		uint64_t v = (atomic_load_explicit(w, memory_order_relaxed) >> sh) & s->max;

		if (v < min)
			min = v;
	}
	return (unsigned)min;
}

unsigned sketch_add(struct sketch *s, uint64_t hash, unsigned n)
{
	uint64_t g = sketch_mix(hash), k = n;
	unsigned est;

	if (n == 0)
		return sketch_estimate(s, hash);
	/* the filter takes a key's first occurrence of the window */
	if (s->door && sketch_door_add(s, g))
		k--;
	est = k != 0 ? sketch_raise(s, g, k) : sketch_least(s, g);
	sketch_count(s, n);
	return est + s->door;
}

unsigned sketch_increment(struct sketch *s, uint64_t hash)
{
	return sketch_add(s, hash, 1);
}

unsigned sketch_estimate(const struct sketch *s, uint64_t hash)
{
	uint64_t g = sketch_mix(hash);

	return sketch_least(s, g) + (s->door && sketch_door_has(s, g));
}

uint64_t sketch_window(const struct sketch *s)
{
	return s->window;
}

uint64_t sketch_samples(const struct sketch *s)
{
	return atomic_load_explicit(&s->total, memory_order_relaxed);
}

size_t sketch_bytes(const struct sketch *s)
{
	return sizeof(*s) + s->nwords * sizeof(uint64_t);
}

unsigned sketch_max(const struct sketch *s)
{
	return (unsigned)s->max;
}
