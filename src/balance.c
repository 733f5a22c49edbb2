/*
 * balance.c -- eligibility of a backend for one more request, and the
 * walk that applies it: the ring owner first, then each next distinct
 * backend clockwise (the fixed scheme of ARCHITECTURE.md). Today a
 * backend is eligible when it has points on the ring; health and the
 * bounded-load cap plug in here.
 */
#include "balance.h"

int balance_eligible(const struct snapshot *s, int i)
{
	return s->ring->npoints_of[i] > 0;
}

int balance_next(const struct snapshot *s, struct ring_walk *w)
{
	int i;

	while ((i = ring_walk_next(w)) >= 0)
		if (balance_eligible(s, i))
			return i;
	return -1;
}
