/*
 * worker.c -- one request-serving thread. It owns an event base (epoll,
 * no locks: nothing else touches it), a listening
 * socket of its own (SO_REUSEPORT lets the kernel spread connections), free
 * lists of client and backend connection structs so that steady traffic
 * allocates nothing, and one idle pool per backend.
 *
 * The main thread talks to a worker only through its mailbox: a mutex-held
 * slot and an eventfd that wakes the loop. That keeps the event base
 * single-threaded and lock-free.
 */
#include "path/worker.h"

#include <errno.h>
#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "path/conn.h"
#include "base/freelist.h"
#include "base/log.h"
#include "base/mbox.h"
#include "base/md5.h"
#include "path/proxy-t.h"
#include "backend/snapshot.h"

#define WORKER_FREE_MAX 1024    /* client structs kept for reuse (~600 B) */
#define WORKER_UP_FREE_MAX 64   /* backend connection structs, and (at
				   least, worker_stock) their buffer sets:
				   in the pool they have none */
/* Busy-connection memory kept for reuse: enough for the connections a
 * worker serves at once under steady load, few enough that a burst of
 * thousands does not stay pinned (past it, blocks are freed and the
 * memory handed back, worker_trim_soon). About 30 KB each. */
#define WORKER_MEM_FREE_MAX 64
/* HTTP/2 streams kept for reuse by any connection of the worker (about
 * 15 KB each with their buffers; h2.c), at least: two connections' worth
 * of max_concurrent_streams at the default. Kept per connection instead,
 * each burst of 100 streams was malloc'd and freed, and the heap kept
 * the pages of the bursts in between. */
#define WORKER_H2_FREE_MAX 200
/* The stocks' bounds are reviewed this often while one holds more than
 * its base (worker_stock). */
#define WORKER_REVIEW_MS 1000
/* A client's first read buffer: a request head fits; a larger head or a
 * request body gets buffer_size (front.c). */
#define WORKER_BUF_SMALL 4096
#define WORKER_TRIM_MS 1000     /* after frees, before handing back */
/* A parked client's memory goes back after 1 to 2 sweeps of idleness: a
 * keep-alive client that sends its next request sooner (the usual one
 * under load) is served without the lend, the put and the request's
 * set-up (worker_client_mem, req_init: about 230 instructions a hit). */
#define WORKER_WARM_MS 50
#define WORKER_ACCEPT_BATCH 64  /* accepts per wake-up, for fairness */
#define WORKER_ACCEPT_PAUSE_MS 100 /* after EMFILE and the like */
/* A new connection goes to another worker when that one has at least this
 * many fewer client connections: the kernel's SO_REUSEPORT hash splits 64
 * connections between two listeners as unevenly as 40 to 24, and the
 * clients of the busier worker wait longer (p99). With 2 a worker keeps a
 * connection while it has at most one more than the least busy, so the
 * split stays within 2 and an even one is left alone. */
#define WORKER_BALANCE_SLACK 2

/* The buffers a connection struct owns, kept across reuse. */
struct worker_bufs {
	struct rbuf in;
	struct http1_header *hdrs;
	unsigned hdrs_cap;
	char *scratch;
	size_t scratch_cap;
};

static void worker_bufs_free(struct worker_bufs *b)
{
	free(b->in.data);
	free(b->hdrs);
	free(b->scratch);
}

/* Size the buffers for the current config (a reload may change them), the
 * read buffer to in_cap. */
static int worker_bufs_size(struct worker_bufs *b, const struct conf *conf, size_t in_cap)
{
	size_t scap = conf->max_head_size + WORKER_SCRATCH_EXTRA;

	if (b->in.cap != in_cap) {
		char *d = realloc(b->in.data, in_cap);

		if (!d)
			return -1;
		b->in.data = d;
		b->in.cap = in_cap;
	}
	if (b->hdrs_cap != conf->max_headers) {
		struct http1_header *h = realloc(b->hdrs, conf->max_headers * sizeof(*h));

		if (!h)
			return -1;
		b->hdrs = h;
		b->hdrs_cap = conf->max_headers;
	}
	if (b->scratch_cap != scap) {
		char *sc = realloc(b->scratch, scap);

		if (!sc)
			return -1;
		b->scratch = sc;
		b->scratch_cap = scap;
	}
	b->in.pos = b->in.len = 0;
	return 0;
}

/* A backend connection's buffers while not lent to one. */
struct worker_bufnode {
	struct freelist_link reuse;
	struct worker_bufs b;
};

static void worker_bufnode_release(struct freelist_link *l)
{
	struct worker_bufnode *n = FREELIST_ENTRY(l, struct worker_bufnode, reuse);

	worker_bufs_free(&n->b);
	free(n);
}

#define WORKER_BUFS_OF(x) { (x)->in, (x)->hdrs, (x)->hdrs_cap, (x)->scratch, (x)->scratch_cap }
#define WORKER_BUFS_TO(x, b) do { \
		(x)->in = (b).in; (x)->hdrs = (b).hdrs; (x)->hdrs_cap = (b).hdrs_cap; \
		(x)->scratch = (b).scratch; (x)->scratch_cap = (b).scratch_cap; \
	} while (0)

static void worker_on_warm(evutil_socket_t fd, short what, void *arg);

/* Memory freed past the free lists (a burst of connections that went
 * idle or closed) stays in the allocator's arenas, counted in the
 * process's RSS, unless handed back: once a while after such frees, so
 * the cost (a walk of the free chunks) is not paid per connection. */
static void worker_on_trim(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;

	(void)fd;
	(void)what;
	w->trim_due = false;
#ifdef __GLIBC__
	malloc_trim(0);
#endif
}

static void worker_trim_soon(struct worker *w)
{
	static const struct timeval later = { WORKER_TRIM_MS / 1000, (WORKER_TRIM_MS % 1000) * 1000 };

	if (w->trim_due || w->stopping)
		return;
	w->trim_due = true;
	evtimer_add(&w->ev_trim, &later);
}

/* ---- stocks: free lists bounded by recent use -------------------------------- */

static void worker_stock_init(struct worker_stock *s, unsigned base, void (*release)(struct freelist_link *))
{
	freelist_init(&s->fl, base);
	s->release = release;
	s->base = base;
	s->out = s->peak = s->prev = 0;
}

static unsigned worker_stock_bound(const struct worker_stock *s)
{
	unsigned b = s->peak > s->prev ? s->peak : s->prev;

	return b > s->base ? b : s->base;
}

struct freelist_link *worker_stock_take(struct worker_stock *s)
{
	if (++s->out > s->peak)
		s->peak = s->out;
	return freelist_pop(&s->fl);
}

void worker_stock_forget(struct worker_stock *s)
{
	s->out--;
}

void worker_stock_give(struct worker *w, struct worker_stock *s, struct freelist_link *l)
{
	static const struct timeval later = { WORKER_REVIEW_MS / 1000, (WORKER_REVIEW_MS % 1000) * 1000 };

	s->out--;
	s->fl.max = worker_stock_bound(s);
	if (w->stopping || !freelist_push(&s->fl, l)) {
		s->release(l);
		worker_trim_soon(w);
		return;
	}
	if (s->fl.n > s->base && !w->review_due) {
		w->review_due = true;
		evtimer_add(&w->ev_review, &later);
	}
}

/* The period ends: the bound becomes the most out over it and the one
 * before; what is kept past it is freed. Whether more than base is
 * still kept. */
static bool worker_stock_review(struct worker *w, struct worker_stock *s)
{
	struct freelist_link *l;
	bool freed = false;

	s->prev = s->peak;
	s->peak = s->out;
	s->fl.max = worker_stock_bound(s);
	while (s->fl.n > s->fl.max && s->release && (l = freelist_pop(&s->fl))) {
		s->release(l);
		freed = true;
	}
	if (freed)
		worker_trim_soon(w);
	return s->fl.n > s->base;
}

static void worker_on_review(evutil_socket_t fd, short what, void *arg)
{
	static const struct timeval later = { WORKER_REVIEW_MS / 1000, (WORKER_REVIEW_MS % 1000) * 1000 };
	struct worker *w = arg;
	bool more;

	(void)fd;
	(void)what;
	more = worker_stock_review(w, &w->free_bufs);
	more |= worker_stock_review(w, &w->free_h2);
	w->review_due = more && !w->stopping;
	if (w->review_due)
		evtimer_add(&w->ev_review, &later);
}

void worker_stock_drain(struct worker_stock *s)
{
	struct freelist_link *l;

	while (s->release && (l = freelist_pop(&s->fl)))
		s->release(l);
}

static void worker_set_timeouts(struct worker *w)
{
	const struct conf *c = w->snap->conf;

	w->us_client = (int64_t)c->client_timeout_ms * 1000;
	w->us_connect = (int64_t)c->connect_timeout_ms * 1000;
	w->us_response = (int64_t)c->response_timeout_ms * 1000;
	w->us_idle = (int64_t)c->backend_idle_timeout_ms * 1000;
}

static void worker_on_accept_resume(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;

	(void)fd;
	(void)what;
	if (w->accept_paused && !w->stopping)
		for (unsigned i = 0; i < w->nlis; i++)
			event_add(&w->lis[i].ev, NULL);
	w->accept_paused = false;
}

/* accept failed for want of fds (or memory): the pending connection stays
 * in the queue and the listener stays readable, so trying again at once
 * would spin the thread and flood the log. Stop accepting for a moment;
 * warn at most once a second. */
static void worker_pause_accept(struct worker *w, int err)
{
	static const struct timeval tv = { 0, WORKER_ACCEPT_PAUSE_MS * 1000 };
	int64_t now = (int64_t)time(NULL);

	if (now != w->accept_warned) {
		w->accept_warned = now;
		log_warn("worker %d: accept: %s; raise the fd limit or lower max_connections",
			 w->id, strerror(err));
	}
	if (!w->accept_paused) {
		for (unsigned i = 0; i < w->nlis; i++)
			event_del(&w->lis[i].ev);
		w->accept_paused = true;
		evtimer_add(&w->ev_accept_resume, &tv);
	}
}

/* A connection on its way from the worker that accepted it to a less
 * busy one (worker_balance_to). */
struct worker_handoff {
	struct mbox_msg m;              /* first: the message is the struct */
	struct worker *to;
	int fd;
	unsigned kind;
	struct sockaddr_storage peer;
};

/* Any worker thread: a worker's client connections as the others see them. */
static unsigned worker_load(const struct worker *w)
{
	return worker_clients(w) + atomic_load_explicit(&w->clients_coming, memory_order_relaxed);
}

/* The worker's own thread: one writer, so a store, not a locked add. */
static void worker_set_clients(struct worker *w, unsigned n)
{
	atomic_store_explicit(&w->nclients, n, memory_order_relaxed);
}

/* The least busy of the other workers still accepting, if it has at least
 * WORKER_BALANCE_SLACK fewer client connections than w; NULL to keep the
 * connection. Read at accept only, never per request. The counts may be
 * a moment old: two workers accepting at once may each keep one, and the
 * split stays within the slack or a connection of it. */
static struct worker *worker_balance_to(struct worker *w)
{
	struct proxy *p = w->proxy;
	struct worker *best = NULL;
	unsigned mine = worker_load(w);
	unsigned least = mine;

	if (p->workers == NULL || p->nworkers < 2)
		return NULL;
	for (unsigned i = 0; i < p->nworkers; i++) {
		struct worker *o = p->workers[i];
		unsigned n;

		if (o == NULL || o == w || atomic_load(&o->mbox_drain) || atomic_load(&o->mbox_stop))
			continue;
		n = worker_load(o);
		if (n < least) {
			least = n;
			best = o;
		}
	}
	return best && least + WORKER_BALANCE_SLACK <= mine ? best : NULL;
}

/* On the receiving worker's thread (or in worker_free, after it ended). */
static void worker_on_handoff(struct mbox_msg *m)
{
	struct worker_handoff *h = (struct worker_handoff *)m;
	struct worker *w = h->to;

	atomic_fetch_sub_explicit(&w->clients_coming, 1, memory_order_relaxed);
	if (w->stopping || w->ops->accept(w, h->fd, &h->peer, h->kind) < 0) {
		atomic_fetch_sub(&w->proxy->nconns, 1);
		close(h->fd);
	}
	free(h);
}

/* Serve the accepted fd here, or hand it to a less busy worker. */
static int worker_take(struct worker *w, int fd, const struct sockaddr_storage *ss, unsigned kind)
{
	struct worker *to = worker_balance_to(w);
	struct worker_handoff *h = to ? malloc(sizeof(*h)) : NULL;

	if (h == NULL) {
		return w->ops->accept(w, fd, ss, kind) < 0 ? -1 : 0;
	}
	h->kind = kind;
	h->m.next = NULL;
	h->m.fn = worker_on_handoff;
	h->to = to;
	h->fd = fd;
	h->peer = *ss;
	atomic_fetch_add_explicit(&to->clients_coming, 1, memory_order_relaxed);
	atomic_fetch_add(&w->proxy->accept_handoffs, 1);
	mbox_post(&to->mbox, &h->m);
	return 0;
}

static void worker_on_accept(evutil_socket_t lfd, short what, void *arg)
{
	struct worker_listener *l = arg;
	struct worker *w = l->w;
	struct proxy *p = w->proxy;

	(void)what;
	for (int i = 0; i < WORKER_ACCEPT_BATCH; i++) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		int fd, one = 1;

		fd = accept4(lfd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				worker_pause_accept(w, errno);
			return;
		}
		if (atomic_fetch_add(&p->nconns, 1) >= atomic_load(&p->max_conns)) {
			atomic_fetch_sub(&p->nconns, 1);
			atomic_fetch_add(&p->refused, 1);
			close(fd);
			continue;
		}
		atomic_fetch_add(&p->accepted, 1);
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (worker_take(w, fd, &ss, l->kind) < 0) {
			atomic_fetch_sub(&p->nconns, 1);
			close(fd);
		}
	}
}

static void worker_adopt(struct worker *w, struct snapshot *s)
{
	struct snapshot *old = w->snap;

	if (w->snap_users) {
		if (w->nretired == w->retired_cap) {
			unsigned cap = w->retired_cap ? w->retired_cap * 2 : 4;
			struct snapref *r = realloc(w->retired, cap * sizeof(*r));

			if (!r) {
				/* keep serving on the old one rather than free
				 * it under requests; the next reload retries */
				log_error("worker %d: out of memory adopting a new config", w->id);
				snapshot_unref(s);
				return;
			}
			w->retired = r;
			w->retired_cap = cap;
		}
		w->retired[w->nretired].snap = old;
		w->retired[w->nretired].users = w->snap_users;
		w->nretired++;
	} else {
		snapshot_unref(old);
	}
	w->snap = s;
	w->snap_users = 0;
	worker_set_timeouts(w);
}

struct snapshot *worker_snap_take(struct worker *w)
{
	w->snap_users++;
	return w->snap;
}

void worker_snap_drop(struct worker *w, struct snapshot *s)
{
	if (!s)
		return;
	if (s == w->snap) {
		w->snap_users--;
		return;
	}
	for (unsigned i = 0; i < w->nretired; i++) {
		if (w->retired[i].snap != s)
			continue;
		if (--w->retired[i].users == 0) {
			snapshot_unref(s);
			w->retired[i] = w->retired[--w->nretired];
		}
		return;
	}
}

/* Close every idle pooled backend connection. */
static void worker_close_idle(struct worker *w)
{
	for (uint32_t ci = 0; ci < WORKER_POOL_CHUNKS; ci++) {
		struct pool *chunk = atomic_load_explicit(&w->pool_chunks[ci], memory_order_relaxed);

		for (uint32_t i = 0; chunk && i < WORKER_POOL_CHUNK; i++)
			while (chunk[i].head)
				w->ops->close_idle(chunk[i].head);
	}
}

/* Stop accepting; close what is idle; the rest closes as it finishes
 * (front.c and forward.c look at w->stopping). */
static void worker_drain(struct worker *w)
{
	struct client *c, *next;

	w->stopping = true;
	event_del(&w->ev_accept_resume);
	for (unsigned i = 0; i < w->nlis; i++) {
		event_del(&w->lis[i].ev);
		close(w->lis[i].fd);
		w->lis[i].fd = -1;
	}
	for (c = w->clients; c; c = next) {
		next = c->next;
		w->ops->drain(c);
	}
	worker_close_idle(w);
	if (worker_clients(w) == 0)
		event_base_loopbreak(w->base);
}

/* Run posted wake-ups, oldest first; fn may post again (to this or another
 * worker): the list taken is ours alone. */
static void worker_run_posted(struct mbox_msg *msgs)
{
	while (msgs) {
		struct mbox_msg *m = msgs;

		msgs = m->next;
		m->next = NULL;
		m->fn(m);
	}
}

static void worker_on_mbox(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;
	struct snapshot *s;
	struct mbox_msg *msgs;

	(void)what;
	msgs = mbox_take(&w->mbox);
	pthread_mutex_lock(&w->mbox.lock);
	s = w->mbox_snap;
	w->mbox_snap = NULL;
	pthread_mutex_unlock(&w->mbox.lock);
	if (s)
		worker_adopt(w, s);
	worker_run_posted(msgs);
	if (atomic_load(&w->mbox_stop)) {
		w->stopping = true;
		event_base_loopbreak(w->base);
	} else if (atomic_load(&w->mbox_drain) && !w->stopping) {
		worker_drain(w);
	}
}

static void worker_poke(struct worker *w)
{
	mbox_poke(&w->mbox);
}

void worker_post(struct worker *w, struct mbox_msg *m)
{
	mbox_post(&w->mbox, m);
}

void worker_post_snapshot(struct worker *w, struct snapshot *s)
{
	struct snapshot *dropped;

	pthread_mutex_lock(&w->mbox.lock);
	dropped = w->mbox_snap;         /* never adopted: superseded */
	w->mbox_snap = s;
	pthread_mutex_unlock(&w->mbox.lock);
	snapshot_unref(dropped);
	worker_poke(w);
}

void worker_post_drain(struct worker *w)
{
	atomic_store(&w->mbox_drain, true);
	worker_poke(w);
}

unsigned worker_clients(const struct worker *w)
{
	return atomic_load_explicit(&w->nclients, memory_order_relaxed);
}

bool worker_done(struct worker *w)
{
	return atomic_load(&w->done);
}

void worker_post_stop(struct worker *w)
{
	atomic_store(&w->mbox_stop, true);
	worker_poke(w);
}

void worker_join(struct worker *w)
{
	if (w && w->started) {
		pthread_join(w->thread, NULL);
		w->started = false;
	}
}

struct worker *worker_new(struct proxy *p, int id, const struct worker_listener *lis, unsigned nlis,
			  struct snapshot *snap, const struct worker_ops *ops, char *err, size_t errlen)
{
	struct event_config *cfg = NULL;
	struct worker *w = calloc(1, sizeof(*w));
	char why[256];

	if (!w) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	w->id = id;
	w->proxy = p;
	w->ops = ops;
	w->started_at = (uint32_t)p->started;
	if (nlis > WORKER_LISTENERS_MAX) {
		snprintf(err, errlen, "worker %d: more than %d listeners", id, WORKER_LISTENERS_MAX);
		free(w);
		return NULL;
	}
	for (unsigned i = 0; i < nlis; i++) {
		w->lis[i].fd = lis[i].fd;
		w->lis[i].kind = lis[i].kind;
		w->lis[i].w = w;
	}
	freelist_init(&w->free_clients, WORKER_FREE_MAX);
	freelist_init(&w->free_ups, WORKER_UP_FREE_MAX);
	worker_stock_init(&w->free_bufs, WORKER_UP_FREE_MAX, worker_bufnode_release);
	freelist_init(&w->free_mems, WORKER_MEM_FREE_MAX);
	/* release: h2.c's, set as its first connection starts */
	worker_stock_init(&w->free_h2, WORKER_H2_FREE_MAX, NULL);
	if (mbox_init(&w->mbox) < 0) {
		snprintf(err, errlen, "worker %d: mailbox: %s", id, strerror(errno));
		free(w);
		return NULL;
	}
	/* made here, where a failure stops the start, so that hashing a
	 * request key on the worker never allocates */
	w->md5 = md5_new(why, sizeof(why));
	if (!w->md5) {
		snprintf(err, errlen, "worker %d: %s", id, why);
		goto fail_md5;
	}
	cfg = event_config_new();
	if (!cfg)
		goto fail;
	/* Not EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST: it holds an event_del
	 * back until the next loop pass, after the caller has closed the fd,
	 * when another worker may have been given the same number (libevent
	 * documents the hazard). A connection's events are added once and
	 * deleted once, so the changelist had nothing to batch:
	 * tests/bench/README.md, "The epoll changelist", measures it. */
	event_config_set_flag(cfg, EVENT_BASE_FLAG_NOLOCK);
	w->base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	if (!w->base)
		goto fail;
	if (event_assign(&w->ev_mbox, w->base, w->mbox.fd, EV_READ | EV_PERSIST, worker_on_mbox, w) < 0 ||
	    event_add(&w->ev_mbox, NULL) < 0)
		goto fail;
	for (unsigned i = 0; i < nlis; i++) {
		if (event_assign(&w->lis[i].ev, w->base, lis[i].fd, EV_READ | EV_PERSIST, worker_on_accept,
				 &w->lis[i]) < 0 || event_add(&w->lis[i].ev, NULL) < 0)
			goto fail;
		w->nlis++;
	}
	if (evtimer_assign(&w->ev_accept_resume, w->base, worker_on_accept_resume, w) < 0 ||
	    evtimer_assign(&w->ev_trim, w->base, worker_on_trim, w) < 0 ||
	    evtimer_assign(&w->ev_review, w->base, worker_on_review, w) < 0 ||
	    evtimer_assign(&w->ev_warm, w->base, worker_on_warm, w) < 0)
		goto fail;
	w->snap = snap;
	worker_set_timeouts(w);
	ops->start(w);
	return w;
fail:
	snprintf(err, errlen, "worker %d: cannot set up its event loop: %s", id, strerror(errno));
fail_md5:
	if (w->base)
		event_base_free(w->base);
	md5_free(w->md5);
	mbox_destroy(&w->mbox);
	free(w);
	return NULL;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	md5_use(w->md5);
	event_base_dispatch(w->base);
	atomic_store(&w->done, true);
	return NULL;
}

int worker_start(struct worker *w, char *err, size_t errlen)
{
	int rc = pthread_create(&w->thread, NULL, worker_main, w);

	if (rc) {
		snprintf(err, errlen, "worker %d: pthread_create: %s", w->id, strerror(rc));
		return -1;
	}
	w->started = true;
	return 0;
}

/* After the thread has stopped: close every connection, free everything. */
void worker_free(struct worker *w)
{
	struct freelist_link *l;

	if (!w)
		return;
	worker_join(w);
	w->stopping = true;
	/* wake-ups posted as the workers stopped (a fetch another worker's
	 * teardown ended): run them here, after the thread, so that the
	 * objects they carry are released and their requests end */
	worker_run_posted(mbox_take(&w->mbox));
	w->ops->stop(w);
	while (w->clients)
		w->ops->close(w->clients);
	worker_close_idle(w);
	w->ops->end(w);
	for (uint32_t i = 0; i < WORKER_POOL_CHUNKS; i++)
		free(atomic_load(&w->pool_chunks[i]));
	while ((l = freelist_pop(&w->free_clients))) {
		struct client *c = FREELIST_ENTRY(l, struct client, reuse);
		struct worker_bufs b = WORKER_BUFS_OF(c);

		worker_bufs_free(&b);
		free(c);
	}
	while ((l = freelist_pop(&w->free_mems))) {
		struct client_mem *m = FREELIST_ENTRY(l, struct client_mem, reuse);
		struct worker_bufs b = WORKER_BUFS_OF(m);

		worker_bufs_free(&b);
		free(m);
	}
	while ((l = freelist_pop(&w->free_ups)))
		free(FREELIST_ENTRY(l, struct upstream, reuse));
	worker_stock_drain(&w->free_bufs);
	worker_stock_drain(&w->free_h2);
	event_del(&w->ev_accept_resume);
	event_del(&w->ev_mbox);
	event_del(&w->ev_trim);
	event_del(&w->ev_review);
	event_del(&w->ev_warm);
	for (unsigned i = 0; i < w->nlis; i++) {
		event_del(&w->lis[i].ev);
		if (w->lis[i].fd >= 0)
			close(w->lis[i].fd);
	}
	snapshot_unref(w->mbox_snap);
	snapshot_unref(w->snap);
	for (unsigned i = 0; i < w->nretired; i++)
		snapshot_unref(w->retired[i].snap);
	free(w->retired);
	event_base_free(w->base);
	md5_free(w->md5);
	mbox_destroy(&w->mbox);
	free(w);
}

/* Keep obj (with its buffers b) on fl for reuse, or free it when the list
 * is full or the worker is stopping. */
static void worker_conn_drop(struct worker *w, struct freelist *fl, struct freelist_link *l,
			     void *obj, struct worker_bufs *b)
{
	if (w->stopping || !freelist_push(fl, l)) {
		worker_bufs_free(b);
		free(obj);
		worker_trim_soon(w);
	}
}

struct client *worker_client_get(struct worker *w)
{
	struct freelist_link *l = freelist_pop(&w->free_clients);
	struct client *c = l ? FREELIST_ENTRY(l, struct client, reuse) : malloc(sizeof(*c));

	if (!c)
		return NULL;
	/* no buffer yet: front.c asks for one when the socket is readable */
	memset(c, 0, sizeof(*c));
	c->next = w->clients;
	if (w->clients)
		w->clients->prev = c;
	w->clients = c;
	worker_set_clients(w, worker_clients(w) + 1);
	return c;
}

void worker_client_put(struct worker *w, struct client *c)
{
	if (c->mem)
		worker_client_mem_put(w, c);
	if (c->prev)
		c->prev->next = c->next;
	else
		w->clients = c->next;
	if (c->next)
		c->next->prev = c->prev;
	worker_set_clients(w, worker_clients(w) - 1);
	if (w->stopping && worker_clients(w) == 0)
		event_base_loopbreak(w->base);
	if (w->stopping || !freelist_push(&w->free_clients, &c->reuse)) {
		free(c);
		worker_trim_soon(w);
	}
}

int worker_client_mem(struct worker *w, struct client *c)
{
	struct freelist_link *l = freelist_pop(&w->free_mems);
	struct client_mem *m = l ? FREELIST_ENTRY(l, struct client_mem, reuse) : malloc(sizeof(*m));
	const struct conf *conf = w->snap->conf;
	size_t small = WORKER_BUF_SMALL < conf->buffer_size ? WORKER_BUF_SMALL : conf->buffer_size;
	struct worker_bufs b = { 0 };

	if (!m)
		return -1;
	if (l)
		b = (struct worker_bufs)WORKER_BUFS_OF(m);
	if (worker_bufs_size(&b, conf, small) < 0) {
		worker_bufs_free(&b);
		free(m);
		return -1;
	}
	WORKER_BUFS_TO(c, b);
	c->mem = m;
	c->rq = &m->rq;
	c->out = &m->out;
	outq_reset(c->out);
	c->out->sent = c->sent;
	return 0;
}

void worker_client_unpark(struct worker *w, struct client *c)
{
	if (c->warm == 0)
		return;
	w->warm[c->warm - 1] = NULL;
	w->warm_n--;
	c->warm = 0;
}

static void worker_warm_arm(struct worker *w)
{
	static const struct timeval tick = { 0, WORKER_WARM_MS * 1000 };

	if (!w->warm_due && evtimer_add(&w->ev_warm, &tick) == 0)
		w->warm_due = true;
}

void worker_client_park(struct worker *w, struct client *c)
{
	unsigned i = w->warm_next;

	if (!w->stopping)
		worker_warm_arm(w);
	if (w->stopping || !w->warm_due) {      /* no sweep would take it back */
		worker_client_mem_put(w, c);
		return;
	}
	w->warm_next = (i + 1) % WORKER_WARM;
	if (w->warm[i] != NULL)
		worker_client_mem_put(w, w->warm[i]);   /* the longest parked there */
	w->warm[i] = c;
	w->warm_n++;
	c->warm = i + 1;
	c->warm_tick = w->warm_tick;
}

/* The sweep: the memory of clients parked before this tick goes back;
 * the timer runs again while any is left. */
static void worker_on_warm(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;

	(void)fd;
	(void)what;
	w->warm_due = false;
	for (unsigned i = 0; i < WORKER_WARM && w->warm_n > 0; i++) {
		struct client *c = w->warm[i];

		if (c != NULL && c->warm_tick != w->warm_tick)
			worker_client_mem_put(w, c);
	}
	w->warm_tick++;
	if (w->warm_n > 0)
		worker_warm_arm(w);
}

void worker_client_mem_put(struct worker *w, struct client *c)
{
	struct client_mem *m = c->mem;
	struct worker_bufs b = WORKER_BUFS_OF(c);

	worker_client_unpark(w, c);
	c->sent = c->out->sent;
	c->mem = NULL;
	c->rq = NULL;
	c->out = NULL;
	memset(&c->in, 0, sizeof(c->in));
	c->hdrs = NULL;
	c->hdrs_cap = 0;
	c->scratch = NULL;
	c->scratch_cap = 0;
	/* a buffer grown for a large head or a body goes now; the list
	 * keeps small ones. The header array goes with the memory still
	 * holding slices of the old buffer: none is read again, since a
	 * parse counts only the slots it filled (http1_fields) */
	if (b.in.cap > WORKER_BUF_SMALL) {
		free(b.in.data);
		b.in.data = NULL;
		b.in.cap = 0;
	}
	WORKER_BUFS_TO(m, b);
	worker_conn_drop(w, &w->free_mems, &m->reuse, m, &b);
}

int worker_client_grow(struct worker *w, struct client *c)
{
	size_t cap = w->snap->conf->buffer_size;
	char *d;

	if (c->in.cap >= cap)
		return -1;
	d = realloc(c->in.data, cap);
	if (!d)
		return -1;
	c->in.data = d;
	c->in.cap = cap;
	return 0;
}

struct upstream *worker_up_get(struct worker *w)
{
	struct freelist_link *l = freelist_pop(&w->free_ups);
	struct upstream *u = l ? FREELIST_ENTRY(l, struct upstream, reuse) : malloc(sizeof(*u));

	/* no buffers yet: forward.c asks for them with the request */
	if (u)
		memset(u, 0, sizeof(*u));
	return u;
}

void worker_up_put(struct worker *w, struct upstream *u)
{
	if (u->bufnode)
		worker_up_bufs_put(w, u);
	if (w->stopping || !freelist_push(&w->free_ups, &u->reuse)) {
		free(u);
		worker_trim_soon(w);
	}
}

int worker_up_bufs(struct worker *w, struct upstream *u)
{
	struct freelist_link *l = worker_stock_take(&w->free_bufs);
	struct worker_bufnode *n = l ? FREELIST_ENTRY(l, struct worker_bufnode, reuse) : calloc(1, sizeof(*n));
	const struct conf *conf = w->snap->conf;

	if (!n) {
		worker_stock_forget(&w->free_bufs);
		return -1;
	}
	if (worker_bufs_size(&n->b, conf, conf->buffer_size) < 0) {
		worker_stock_forget(&w->free_bufs);
		worker_bufs_free(&n->b);
		free(n);
		return -1;
	}
	WORKER_BUFS_TO(u, n->b);
	u->bufnode = n;
	return 0;
}

void worker_up_bufs_put(struct worker *w, struct upstream *u)
{
	struct worker_bufnode *n = u->bufnode;

	n->b = (struct worker_bufs)WORKER_BUFS_OF(u);
	u->bufnode = NULL;
	memset(&u->in, 0, sizeof(u->in));
	u->hdrs = NULL;
	u->hdrs_cap = 0;
	u->scratch = NULL;
	u->scratch_cap = 0;
	worker_stock_give(w, &w->free_bufs, &n->reuse);
}

void worker_conn_closed(struct worker *w)
{
	atomic_fetch_sub(&w->proxy->nconns, 1);
}

bool worker_log_allow(struct worker *w, unsigned per_sec)
{
	int64_t now = (int64_t)time(NULL);

	if (now != w->log_sec) {
		if (w->log_skipped)
			log_info("worker %d: %u more replies of the proxy's own not logged in a second",
				 w->id, w->log_skipped);
		w->log_sec = now;
		w->log_n = w->log_skipped = 0;
	}
	if (w->log_n >= per_sec) {
		w->log_skipped++;
		return false;
	}
	w->log_n++;
	return true;
}

int worker_scratch_fit(struct worker *w, char **scratch, size_t *cap)
{
	size_t need = w->snap->conf->max_head_size + WORKER_SCRATCH_EXTRA;
	char *p;

	if (*cap >= need)
		return 0;
	p = realloc(*scratch, need);
	if (!p)
		return -1;
	*scratch = p;
	*cap = need;
	return 1;
}

struct pool *worker_pool(struct worker *w, uint32_t backend_id)
{
	uint32_t ci = backend_id / WORKER_POOL_CHUNK;
	struct pool *chunk;

	if (ci >= WORKER_POOL_CHUNKS)
		return NULL;
	chunk = atomic_load_explicit(&w->pool_chunks[ci], memory_order_relaxed);
	if (!chunk) {
		chunk = calloc(WORKER_POOL_CHUNK, sizeof(*chunk));
		if (!chunk)
			return NULL;
		atomic_store_explicit(&w->pool_chunks[ci], chunk, memory_order_release);
	}
	return &chunk[backend_id % WORKER_POOL_CHUNK];
}

const struct pool *worker_pool_peek(struct worker *w, uint32_t backend_id)
{
	uint32_t ci = backend_id / WORKER_POOL_CHUNK;
	struct pool *chunk;

	if (ci >= WORKER_POOL_CHUNKS)
		return NULL;
	chunk = atomic_load_explicit(&w->pool_chunks[ci], memory_order_acquire);
	return chunk ? &chunk[backend_id % WORKER_POOL_CHUNK] : NULL;
}
