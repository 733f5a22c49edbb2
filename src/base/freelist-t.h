/*
 * freelist-t.h -- a free list's types (freelist.h has its functions): the
 * link a kept struct carries, and the list.
 */
#ifndef RINGPROXY_FREELIST_T_H
#define RINGPROXY_FREELIST_T_H

struct freelist_link {
	struct freelist_link *next;
};

struct freelist {
	struct freelist_link *head;     /* the most recently kept first */
	unsigned n, max;
};

#endif
