/*
 * registry-t.h -- a backend's state that outlives a reload, shared by
 * registry.c (which owns the entries), health.c (up or down), balance.c
 * (in flight), the request path (counters) and stats.c (which reads it).
 * Every field is atomic: any thread may read or update it at any time.
 */
#ifndef RINGPROXY_REGISTRY_T_H
#define RINGPROXY_REGISTRY_T_H

#include <stdatomic.h>
#include <stdint.h>

#include "base/stats-t.h"

/* A short text that any thread may write and any thread read, without a
 * lock: a sequence lock over atomic words (registry_note_set, _get). A
 * writer that finds another at work gives up: both texts are news of the
 * same moment, and either will do. */
#define REGISTRY_NOTE_WORDS 16          /* 128 bytes, the NUL included */
struct registry_note {
	_Atomic uint64_t seq;           /* odd while a writer is at it */
	_Atomic uint64_t w[REGISTRY_NOTE_WORDS];
};

/* One backend by name, for the life of the process: every snapshot that
 * names the backend points to the same entry. */
struct backend {
	char *name;
	uint32_t id;                    /* stable index in the registry */
	_Atomic long inflight;          /* requests in flight, all workers */
	_Atomic int64_t last_warn;      /* time(NULL) of the last warning */
	_Atomic int64_t stray_until_us; /* no connection kept alive to it
					   until then (deadline_now_us): it
					   sent bytes nobody asked for */
	/* the SHARED counters of stats-t.h (connects, timeouts, ...); the
	 * WORKER ones are per worker (struct pool in worker-t.h): every
	 * request would write them otherwise */
	STATS_BACKEND(STATS_SHARED_FIELD)

	/* health (health.c): workers report requests, the main thread runs
	 * active checks; transitions are decided by compare-and-swap */
	_Atomic int down;               /* 0 up, 1 down */
	_Atomic int checking;           /* 1: new with active checks and down
					   until its first check passes, unless
					   no backend is up (health.c) */
	_Atomic unsigned fails;         /* consecutive failed requests */
	_Atomic int fresh;              /* 1: a reload added it and it has
					   not answered yet (health.c): its
					   fall is not "up -> down" */
	_Atomic int64_t retry_at_ms;    /* passive back-off: try again after
					   (registry_now_ms) */
	_Atomic int trial;              /* a passive trial request is out */
	_Atomic int64_t up_since_ms;    /* slow start began; 0 = not ramping */
	_Atomic unsigned check_ok;      /* consecutive passed active checks */
	_Atomic unsigned check_fail;    /* consecutive failed active checks */

	/* why it is in its state (health.c), for the operator: since when
	 * (registry_now_ms of the last transition, or of the entry's making),
	 * the transition's reason, and the cause of the last failed request */
	_Atomic int64_t state_ms;
	struct registry_note reason;
	struct registry_note last_fail;
	/* the last active check (written by the main thread): when
	 * (registry_now_ms; 0 = none yet), how long it took, its HTTP status
	 * (0: no response), whether it passed, and what it saw in words */
	_Atomic int64_t check_at_ms;
	_Atomic uint64_t check_us;
	_Atomic int check_status;
	_Atomic int check_passed;
	struct registry_note check_text;

	/* the operator's runtime state (runstate.h: ready, drain, maint, and
	 * a weight over the file's), set through the admin listener: written
	 * and read on the main thread, which builds the rings from it; the
	 * request path never reads it (it routes by the snapshot's ring) */
	_Atomic int admin_state;        /* enum runstate, 0 = ready */
	_Atomic int admin_weighted;     /* admin_weight is set */
	_Atomic double admin_weight;
	_Atomic int64_t drain_start_ms; /* a drain's start, Unix ms */
	_Atomic int64_t drain_mono_ms;  /* the same on registry_now_ms's clock,
					   which its progress is read on */
	_Atomic uint64_t drain_span_ms; /* and its window */
};

#endif
