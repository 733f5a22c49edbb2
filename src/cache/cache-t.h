/*
 * cache-t.h -- the hot-object cache's types a request holds (cache.h has
 * the functions): a key, and a waiter attached to another request's fetch.
 */
#ifndef RINGPROXY_CACHE_T_H
#define RINGPROXY_CACHE_T_H

#include <stddef.h>
#include <stdint.h>

struct cache_obj;
struct cache_fill;

/* A cache key (cachectl_key()) and its seeded 64-bit hash. p is borrowed:
 * valid until the lookup or invalidation using it returns. */
struct cache_key {
	const char *p;
	size_t len;
	uint64_t hash;
};

/*
 * A request waiting for another's fetch. The caller owns the memory and
 * sets wake (and arg, free for its use) before cache_lookup(); the other
 * fields are cache.c's.
 *
 * The protocol, once cache_lookup() has returned CACHE_WAIT for w:
 * exactly one of these happens, never both, never twice:
 *   (a) the cache calls w->wake(w, obj), once, from the thread that ends
 *       the fill, holding no lock. obj carries a reference the callee owns
 *       (release it), or is NULL: the fetch failed, was not storable, is a
 *       variant of another Accept-Encoding, or its leader gave up; the
 *       request then goes to the backend on its own. An obj whose Vary
 *       names other fields may be another request's variant: the callee
 *       checks cache_obj_matches() before it answers with it. After
 *       calling wake the cache never touches w again, so wake may free w.
 *   (b) cache_wait_cancel(c, w) returns true: w was detached before any
 *       wake was claimed; the cache forgets it, w is the caller's again.
 * cache_wait_cancel() returning false means (a) has happened or is about
 * to (on another thread): keep w valid until wake runs, and release the
 * object wake hands over. A request that stops waiting (its lock_timeout
 * timer, its client gone) therefore calls cache_wait_cancel() and, if it
 * returns false, treats the coming wake as its answer or discards it.
 */
struct cache_waiter {
	void (*wake)(struct cache_waiter *w, struct cache_obj *obj);
	void *arg;
	/* private to cache.c */
	struct cache_waiter *next_, *prev_;
	struct cache_fill *fill_;       /* set while attached (shard lock) */
	unsigned shard_;
	unsigned ae_;
};

#endif
