/*
 * balance-t.h -- the types of a backend choice, shared by balance.c and
 * the client side that records it per request.
 */
#ifndef RINGPROXY_BALANCE_T_H
#define RINGPROXY_BALANCE_T_H

enum balance_verdict {
	BALANCE_OK = 0,
	BALANCE_DRAINED,        /* weight 0: no points */
	BALANCE_DOWN,           /* marked down by health checks */
	BALANCE_FULL,           /* at its max_inflight hard cap */
	BALANCE_BOUNDED,        /* over c x its fair share of the load */
	BALANCE_RAMPING,        /* slow start: not taking this key yet */
};

/* Outcome of a walk; the caller zeroes it (owner = -1) per request. */
struct balance_pick {
	int backend;            /* index into s->be, -1 if none eligible */
	int owner;              /* the ring owner, -1 until the walk starts */
	enum balance_verdict owner_verdict;
	int any_full;           /* some candidate was at its hard cap */
};

#endif
