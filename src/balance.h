/*
 * balance.h -- which backend a request goes to: the ring walk from the
 * key's position, asking one eligibility question of each candidate.
 * Called by workers on the request path: no locks, no allocation.
 */
#ifndef RINGPROXY_BALANCE_H
#define RINGPROXY_BALANCE_H

#include "ring.h"
#include "snapshot.h"

/* Is backend i of snapshot s eligible to take one more request now? */
int balance_eligible(const struct snapshot *s, int i);

/* The next eligible backend of the walk (owner first on the first call),
 * as an index into s->be, or -1 when the walk has no more candidates. */
int balance_next(const struct snapshot *s, struct ring_walk *w);

#endif
