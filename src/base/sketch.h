/*
 * sketch.h -- a count-min sketch of recent key frequencies with periodic
 * halving: the frequency estimator of TinyLFU (Einziger, Friedman, Manes,
 * "TinyLFU: A Highly Efficient Cache Admission Policy", ACM ToS 2017).
 *
 * Four counters a key, one in each of four rows, all in one 64-byte block
 * of the table so an increment or an estimate touches one cache line.
 * Counters are 4 bits (saturating at 15: enough to rank keys for admission)
 * or 8 bits (saturating at 255: for estimating a key's share of a short
 * window). Every `window` increments all counters are halved, so the
 * sketch forgets: a count is an exponentially decayed frequency over the
 * last one or two windows. An optional doorkeeper (a Bloom filter cleared
 * at each halving) absorbs a key's first occurrence, so one-hit wonders do
 * not take counter space.
 *
 * Thread-safe without a lock: any number of threads may increment and
 * estimate at once. Counters are updated with relaxed compare-and-swap on
 * their 64-bit word (an increment is never lost, a halving never undone);
 * an estimate may see a concurrent increment or not. The increment count
 * that triggers the halving is kept per thread slot and published in
 * batches, so threads do not all write one shared counter.
 */
#ifndef RINGPROXY_SKETCH_H
#define RINGPROXY_SKETCH_H

#include <stddef.h>
#include <stdint.h>

#define SKETCH_DOORKEEPER 0x1u  /* flag: absorb first occurrences */
#define SKETCH_LOCKED     0x2u  /* flag: the caller never runs two
				   increments of this sketch at once (it
				   holds its own lock): plain stores instead
				   of compare-and-swap. Estimates may still
				   run concurrently. */

struct sketch;

/*
 * A sketch for about `expected` distinct keys (at least 16 are assumed)
 * with `bits`-bit counters (4 or 8), halved every `window` increments
 * (0: 10 x expected, the TinyLFU paper's sample size). flags: 0,
 * SKETCH_DOORKEEPER, SKETCH_LOCKED. Returns NULL on a bad argument or out
 * of memory.
 */
struct sketch *sketch_new(size_t expected, unsigned bits, uint64_t window,
			  unsigned flags);
void sketch_free(struct sketch *s);

/* Count one occurrence of the key whose 64-bit hash is `hash` (any good
 * hash: the sketch mixes it again). Returns the key's estimate with this
 * occurrence counted, as sketch_estimate() would say right after (before
 * a halving this increment may trigger), without reading the counters
 * twice. */
unsigned sketch_increment(struct sketch *s, uint64_t hash);

/* Count n occurrences at once (what n sketch_increment calls would count,
 * each counter saturating as they would; a halving their window crossing
 * triggers comes after all n): for a caller that batches a hot key's
 * occurrences. Returns the estimate with them counted; n 0 counts
 * nothing. */
unsigned sketch_add(struct sketch *s, uint64_t hash, unsigned n);

/* The key's estimated recent frequency: 0 .. sketch_max() (+1 with a
 * doorkeeper). Never below the true decayed count, sometimes above. */
unsigned sketch_estimate(const struct sketch *s, uint64_t hash);

/* Increments between halvings. A key's share of recent requests is about
 * estimate / (window / 2) right after a halving and estimate / window just
 * before the next (see sketch_samples). */
uint64_t sketch_window(const struct sketch *s);

/* Increments counted since creation (published in batches of at most 64
 * per thread, so it may lag by that much per thread). The number since
 * the last halving is sketch_samples() % sketch_window(). */
uint64_t sketch_samples(const struct sketch *s);

/* Bytes the sketch holds (its counters, doorkeeper and struct). */
size_t sketch_bytes(const struct sketch *s);

/* Largest value a counter holds (15 or 255). */
unsigned sketch_max(const struct sketch *s);

/* Halve every counter now and clear the doorkeeper (what every window
 * end does; exposed for tests). */
void sketch_halve(struct sketch *s);

#endif
