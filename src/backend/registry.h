/*
 * registry.h -- backend state by name that outlives a reload: in-flight
 * counts, health, counters (struct backend), the totals shared by every
 * backend, and the clock its times are read on. The main thread adds
 * entries while building a snapshot; any thread reads them, without a
 * lock. A name keeps its entry for the life of the process.
 */
#ifndef RINGPROXY_REGISTRY_H
#define RINGPROXY_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "backend/registry-t.h"

/* Requests in flight to all backends, all workers (bounded loads). */
extern _Atomic long registry_total_inflight;
/* Bumped on every health transition: sums over "up" backends cached
 * elsewhere know to recompute. Starts at 1, so 0 never matches. */
extern _Atomic uint64_t registry_health_gen;

/* Main thread: the entry for name, made the first time the name is seen.
 * NULL with err when memory ran out or more distinct names were seen than
 * the registry holds. */
struct backend *registry_find(const char *name, char *err, size_t errlen);

/* Any thread: the number of entries so far, and an entry by id (NULL past
 * the end). Entries are never removed, so a pointer stays valid for the
 * process lifetime. */
uint32_t registry_size(void);
struct backend *registry_get(uint32_t id);

/* Free every entry at exit, after every thread that could read one has
 * stopped. */
void registry_free(void);

/* Any thread: set note n to text (cut to what it holds), or, when
 * another thread is writing it this moment, leave it to that one. No
 * allocation, no formatting: a failing request may call it. */
void registry_note_set(struct registry_note *n, const char *text);
/* Any thread: n's text into buf (NUL-terminated; "" when no writer let a
 * consistent copy be taken within a few tries). */
void registry_note_get(const struct registry_note *n, char *buf, size_t len);

/* Monotonic milliseconds (a coarse clock, cheap enough for every request):
 * the clock of the registry's times (back-off, slow start). */
int64_t registry_now_ms(void);

#endif
