/*
 * registry.c -- the backend registry: one entry per backend name ever
 * configured, appended to by the main thread when a snapshot is built and
 * read by every thread. Entries are allocated once and their pointers
 * published in a fixed-size array, so readers need no lock; the lock only
 * keeps two appends apart.
 */
#include "backend/registry.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ring/ring.h"

_Atomic long registry_total_inflight;
_Atomic uint64_t registry_health_gen = 1;

/* A name keeps its entry, so the array bounds the names of a process's
 * life, not of one config: four configs' worth of distinct names. */
static struct backend *_Atomic registry_entries[RING_MAX_BACKENDS * 4];
static _Atomic uint32_t registry_n;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
/* Where the last find ended (under the lock): a snapshot looks its
 * backends up in the file's order, which is the order they were found in
 * the last time, so starting after the last hit finds each at the first
 * try instead of scanning thousands of names per backend. */
static uint32_t registry_next;

uint32_t registry_size(void)
{
	return atomic_load(&registry_n);
}

struct backend *registry_get(uint32_t id)
{
	return id < atomic_load(&registry_n) ? atomic_load(&registry_entries[id]) : NULL;
}

struct backend *registry_find(const char *name, char *err, size_t errlen)
{
	struct backend *b = NULL;
	uint32_t n;

	pthread_mutex_lock(&registry_lock);
	n = atomic_load(&registry_n);
	for (uint32_t k = 0; k < n; k++) {
		uint32_t i = (registry_next + k) % n;

		if (strcmp(registry_entries[i]->name, name) == 0) {
			b = registry_entries[i];
			registry_next = i + 1;
			goto out;
		}
	}
	if (n == sizeof(registry_entries) / sizeof(registry_entries[0])) {
		snprintf(err, errlen, "too many distinct backend names over this process's life; restart ringproxy");
		goto out;
	}
	b = calloc(1, sizeof(*b));
	if (b)
		b->name = strdup(name);
	if (!b || !b->name) {
		free(b);
		b = NULL;
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	b->id = n;
	registry_next = n + 1;
	atomic_store(&b->state_ms, registry_now_ms());
	atomic_store(&registry_entries[n], b);
	atomic_store(&registry_n, n + 1);
out:
	pthread_mutex_unlock(&registry_lock);
	return b;
}

void registry_free(void)
{
	uint32_t n = atomic_load(&registry_n);

	for (uint32_t i = 0; i < n; i++) {
		free(registry_entries[i]->name);
		free(registry_entries[i]);
		registry_entries[i] = NULL;
	}
	atomic_store(&registry_n, 0);
}

void registry_note_set(struct registry_note *n, const char *text)
{
	uint64_t seq = atomic_load_explicit(&n->seq, memory_order_relaxed);
	size_t len = strnlen(text, sizeof(n->w) - 1);

	if ((seq & 1) || !atomic_compare_exchange_strong(&n->seq, &seq, seq + 1))
		return;
	atomic_thread_fence(memory_order_release);
	for (size_t i = 0; i < REGISTRY_NOTE_WORDS; i++) {
		unsigned char bytes[8] = { 0 };
		uint64_t w;

		for (size_t k = 0; k < 8 && i * 8 + k < len; k++)
			bytes[k] = (unsigned char)text[i * 8 + k];
		memcpy(&w, bytes, sizeof(w));
		atomic_store_explicit(&n->w[i], w, memory_order_relaxed);
	}
	atomic_store_explicit(&n->seq, seq + 2, memory_order_release);
}

void registry_note_get(const struct registry_note *n, char *buf, size_t len)
{
	char text[sizeof(n->w)];

	if (!len)
		return;
	buf[0] = '\0';
	for (int tries = 0; tries < 8; tries++) {
		uint64_t s1 = atomic_load_explicit(&n->seq, memory_order_acquire), s2;

		if (s1 & 1)
			continue;
		for (size_t i = 0; i < REGISTRY_NOTE_WORDS; i++) {
			uint64_t w = atomic_load_explicit(&n->w[i], memory_order_relaxed);

			memcpy(text + i * 8, &w, sizeof(w));
		}
		atomic_thread_fence(memory_order_acquire);
		s2 = atomic_load_explicit(&n->seq, memory_order_relaxed);
		if (s1 == s2) {
			text[sizeof(text) - 1] = '\0';
			snprintf(buf, len, "%s", text);
			return;
		}
	}
}

int64_t registry_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
