/*
 * worker.h -- a request-serving thread: its event base, its SO_REUSEPORT
 * listener, its connection free lists and backend pools. The main thread
 * creates, starts, feeds (snapshots) and stops workers; everything else
 * here runs on the worker's own thread.
 */
#ifndef RINGPROXY_WORKER_H
#define RINGPROXY_WORKER_H

#include <event2/event.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>

#include "base/deadline.h"
#include "path/worker-t.h"

struct snapshot;
struct proxy;

/*
 * What a worker runs, given by whoever makes it (proxy.c): worker.c owns
 * the thread, the listener, the mailbox and the connection structs, and
 * knows none of the tenants that serve on them (the client side, the
 * backend side, background refreshes, the access log), so that it sits
 * below them in the include graph. start and stop/end run on the main
 * thread (worker_new; worker_free, after the worker's thread ended), the
 * rest on the worker's thread.
 */
struct worker_ops {
	/* worker_new: the tenants' per-thread state (the access log's
	 * buffer) */
	void (*start)(struct worker *w);
	/* A new client connection on fd from a listener of kind (WORKER_L_*);
	 * 0, or -1 (the worker closes fd). */
	int (*accept)(struct worker *w, int fd, const struct sockaddr_storage *peer, unsigned kind);
	/* worker_post_drain: close c if it is idle, else after its response. */
	void (*drain)(struct client *c);
	/* worker_free: close c now. */
	void (*close)(struct client *c);
	/* Close a pooled idle backend connection (it leaves the pool). */
	void (*close_idle)(struct upstream *u);
	/* worker_free, before the connections close / after them. */
	void (*stop)(struct worker *w);
	void (*end)(struct worker *w);
};

/* Main thread. snap: a reference handed to the worker; ops: static
 * storage. */
/* lis[0..nlis): the worker's listening sockets (fd and kind), the
 * worker's to close from its success on (the caller's after a failure). */
struct worker *worker_new(struct proxy *p, int id, const struct worker_listener *lis, unsigned nlis,
			  struct snapshot *snap, const struct worker_ops *ops, char *err, size_t errlen);
int worker_start(struct worker *w, char *err, size_t errlen);
/* Hand a new snapshot (one reference, given away) to the worker. */
void worker_post_snapshot(struct worker *w, struct snapshot *s);
/* Graceful stop: close the listener and idle connections, let requests in
 * flight finish (their connections close after), then end the loop. */
void worker_post_drain(struct worker *w);
/* Ask the worker to end its loop now; worker_join waits for it. */
void worker_post_stop(struct worker *w);
/* Wait for the worker's thread to end. Every worker is joined before any
 * is freed: until then one may still hand a connection to another. */
void worker_join(struct worker *w);
/* Any thread: run m->fn on the worker's thread soon (see mbox.h for who
 * owns m). Used to wake a request that waits for another request's fetch
 * (request.h, req_wait). */
void worker_post(struct worker *w, struct mbox_msg *m);
/* Any thread: the worker's client connections, as it last counted them. */
unsigned worker_clients(const struct worker *w);
/* Has the worker's loop ended (drained or stopped)? Any thread. */
bool worker_done(struct worker *w);
void worker_free(struct worker *w);

/* Worker thread only. */
struct client *worker_client_get(struct worker *w);
void worker_client_put(struct worker *w, struct client *c);
/* Lend c the memory of a busy connection (struct client_mem: request,
 * output queue, a small read buffer, header array, scratch), and take it
 * back when c is idle again (nothing buffered, no request, no wake-up due)
 * or goes. 0 or -1 (out of memory). */
int worker_client_mem(struct worker *w, struct client *c);
void worker_client_mem_put(struct worker *w, struct client *c);
/* c is idle between requests: it keeps its memory until it sends again
 * (worker_client_unpark, then no lend and no request set-up) or has been
 * idle a whole sweep of the worker's (WORKER_WARM_MS), when it goes back
 * as worker_client_mem_put gives it; past WORKER_WARM parked clients the
 * one parked longest gives it back now. A put unparks. */
void worker_client_park(struct worker *w, struct client *c);
void worker_client_unpark(struct worker *w, struct client *c);
/* Grow c's read buffer to buffer_size, only while nothing points into it
 * (no parsed request). -1 when it is that big already or memory ran out. */
int worker_client_grow(struct worker *w, struct client *c);
struct upstream *worker_up_get(struct worker *w);
void worker_up_put(struct worker *w, struct upstream *u);

/* One object of a stock (worker-t.h): a kept one, or NULL (the caller
 * makes one); either way counted out until given back or forgotten. */
struct freelist_link *worker_stock_take(struct worker_stock *s);
/* Back: kept, or freed (release) when past the bound. */
void worker_stock_give(struct worker *w, struct worker_stock *s, struct freelist_link *l);
/* An object taken could not be made (it is freed, not given back). */
void worker_stock_forget(struct worker_stock *s);
/* Every kept object freed (release); the worker has ended. */
void worker_stock_drain(struct worker_stock *s);
/* Lend u its buffers (read buffer of buffer_size, header array, scratch)
 * for a request, and take them back when it waits in the pool with
 * nothing buffered, or goes. 0 or -1 (out of memory). */
int worker_up_bufs(struct worker *w, struct upstream *u);
void worker_up_bufs_put(struct worker *w, struct upstream *u);
/* The snapshot a new request routes by, and letting go of it when the
 * request ends (the worker frees a replaced snapshot's reference once its
 * last request here is done). */
struct snapshot *worker_snap_take(struct worker *w);
void worker_snap_drop(struct worker *w, struct snapshot *s);
/* Make sure *scratch holds a head of the current max_head_size: a reload
 * may have raised it since the connection's buffers were sized (rare, so
 * the allocation is not on the steady path). 1 it grew, 0 it was big
 * enough, -1 out of memory. */
int worker_scratch_fit(struct worker *w, char **scratch, size_t *cap);
/* A client connection accepted here closed (the count max_connections
 * is checked against). */
void worker_conn_closed(struct worker *w);
/* The next request id of this worker (request.c formats it). */
static inline uint64_t worker_next_rid(struct worker *w)
{
	return ++w->rid_seq;
}
/* May a log line of the proxy's own replies be written now? At most
 * per_sec a second per worker; the rest are counted and summed up in one
 * line: a flood of bad requests or a dead tier must not flood the log. */
bool worker_log_allow(struct worker *w, unsigned per_sec);
/* Count one on a counter only this worker writes: a plain add, no locked
 * instruction; readers on other threads load it atomically. */
static inline void worker_count(_Atomic uint64_t *counter)
{
	atomic_store_explicit(counter, atomic_load_explicit(counter, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

/* worker_count by n. */
static inline void worker_add(_Atomic uint64_t *counter, uint64_t n)
{
	atomic_store_explicit(counter, atomic_load_explicit(counter, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

/* Now in microseconds, on the clock the connections' timeouts use
 * (deadline_now_us: precise, not libevent's coarse cached time, which put
 * every local miss at 0 and made the sub-millisecond buckets
 * meaningless). Worker thread. */
static inline int64_t worker_now_us(const struct worker *w)
{
	(void)w;
	return deadline_now_us();
}

/* Count a duration of us microseconds (negative: 0) into h; one writer. */
static inline void worker_hist(struct stats_hist *h, int64_t us)
{
	static const int64_t bounds[STATS_NBOUNDS] = { STATS_BOUNDS_US };
	int i = 0;

	if (us < 0)
		us = 0;
	while (i < STATS_NBOUNDS && us > bounds[i])
		i++;
	worker_count(&h->n[i]);
	worker_add(&h->sum_us, (uint64_t)us);
}

/* The idle pool for a registry id; NULL if it cannot be grown. */
struct pool *worker_pool(struct worker *w, uint32_t backend_id);
/* Any thread: the pool for a registry id if the worker has made it (for
 * reading its counters), else NULL. */
const struct pool *worker_pool_peek(struct worker *w, uint32_t backend_id);

#endif
