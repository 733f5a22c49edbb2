/*
 * balance-t.h -- the types of a backend choice, shared by balance.c and
 * the client side that records it per request.
 */
#ifndef RINGPROXY_BALANCE_T_H
#define RINGPROXY_BALANCE_T_H

#include <stdatomic.h>
#include <stdint.h>

enum balance_verdict {
	BALANCE_OK = 0,
	BALANCE_DRAINED,        /* weight 0: no points */
	BALANCE_DOWN,           /* marked down by health checks */
	BALANCE_FULL,           /* at its max_inflight hard cap */
	BALANCE_BOUNDED,        /* over c x its fair share of the load */
	BALANCE_RAMPING,        /* slow start: not taking this key yet */
};

/* The rings a warm ramp keeps at most (snapshot.h's SNAP_RAMP_STEPS). */
#define BALANCE_RAMP_STEPS 4
/* The longest preference list ([ring] replicas; ring.h's RING_LIST_MAX). */
#define BALANCE_LIST_MAX 16

/* Outcome of a walk; balance_start sets it up per request (or the caller
 * zeroes it, owner = -1). */
struct balance_pick {
	int backend;            /* index into s->be, -1 if none eligible */
	int owner;              /* the ring owner, -1 until the walk starts;
				   a warm ramp's previous owner when it took
				   the key */
	enum balance_verdict owner_verdict;
	int owner_hot;          /* the owner was over its cap (BOUNDED) for
				   a hot key, not a stalled or full owner
				   moving a rare one (stats: spilled_hot) */
	int any_full;           /* some candidate was at its hard cap */
	uint64_t key_u;         /* the key's ramp value (ring_hash2) */
	unsigned hot_est;       /* the key's count in the hot-key sketch as
				   balance_start counted it, + 1; 0: not
				   counted, the sketch is read */
	uint64_t ramp_pos[BALANCE_RAMP_STEPS];  /* the key's position in each
				   step of a warm ramp: balance_start's pos,
				   unless key_ramp found the step's
				   ring keyed otherwise */
	int list[BALANCE_LIST_MAX];  /* [ring] replicas > 1: the key's
				   preference list, -1 for a member tried */
	int nlist;              /* its length; 0 = not read yet */
	int replica;            /* the pick's place in the list: 0 the
				   primary (or replicas = 1), -1 past it */
	int ramp;               /* 0 = the warm ramp not asked yet, 1 = asked,
				   2 = a moved key going to its new side
				   (counted once it is placed), 3 = held on
				   its previous owner (the pick) */
};

/* What balance.c remembers of a snapshot: the weight of its backends that
 * have points and are up, for the health generation it was computed at
 * (registry_health_gen). Mutable, unlike the snapshot that points to it;
 * written by balance.c only. The pair is read and written as one: seq is
 * odd while a writer fills it, and a reader that saw it change retries
 * nothing but computes the weight itself. */
struct balance_cache {
	_Atomic uint64_t seq;
	_Atomic uint64_t gen;
	_Atomic double up_weight;
};

#endif
