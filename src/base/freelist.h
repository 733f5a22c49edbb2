/*
 * freelist.h -- a bounded intrusive free list: structs kept for reuse
 * instead of freed, linked through a struct freelist_link inside each, at
 * most max of them (past that the owner frees). Worker.c keeps its client
 * and backend connection structs on two, so steady traffic allocates
 * nothing. One owner thread; no lock, no allocation.
 */
#ifndef RINGPROXY_FREELIST_H
#define RINGPROXY_FREELIST_H

#include <stdbool.h>
#include <stddef.h>

#include "base/freelist-t.h"

/* The struct of type whose member is the link l. */
#define FREELIST_ENTRY(l, type, member) \
	((type *)(void *)((char *)(l) - offsetof(type, member)))

static inline void freelist_init(struct freelist *fl, unsigned max)
{
	fl->head = NULL;
	fl->n = 0;
	fl->max = max;
}

/* Keep the struct whose link is l; false when the list is full (the
 * caller frees it then). */
static inline bool freelist_push(struct freelist *fl, struct freelist_link *l)
{
	if (fl->n >= fl->max)
		return false;
	l->next = fl->head;
	fl->head = l;
	fl->n++;
	return true;
}

/* The link of the struct kept last, taken off the list; NULL if empty. */
static inline struct freelist_link *freelist_pop(struct freelist *fl)
{
	struct freelist_link *l = fl->head;

	if (l) {
		fl->head = l->next;
		fl->n--;
		l->next = NULL;
	}
	return l;
}

#endif
