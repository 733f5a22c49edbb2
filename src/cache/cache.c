/*
 * cache.c -- the shared hot-object cache (see cache.h for the contract).
 *
 * Layout: shards, each an open-addressing hash table of nodes (stored
 * objects and fills in flight share it, so a miss costs one probe run),
 * its own eviction lists, byte budget, TinyLFU sketch and counters, all
 * behind one mutex. Nothing is ever held across two shards' locks.
 *
 * An object is one allocation: the struct, then key, backend name, ETag,
 * Vary spec, the stored head (with room for our Content-Length line) and the body.
 * The table holds one reference while the object is linked; a reader
 * takes its own under the shard lock. Whoever drops the last reference
 * frees the object, outside any lock.
 *
 * Policies (per shard, in bytes; the default is W-TinyLFU, measured by
 * tests/bench/cachesim.c: the two admission policies are within a point
 * of each other on every trace, and W-TinyLFU stores no more objects for
 * it on any (a third as many on a long tail at 64 MiB, a tenth on Zipf
 * 0.7), which is what the cache costs a request that does not hit):
 *  - W-TinyLFU (Einziger, Friedman, Manes, ACM ToS 2017): new objects
 *    enter a 1% LRU window; the window's victim is admitted to the main
 *    segmented LRU (probation 20%, protected 80%) only if the sketch says
 *    it is more frequent than the main space's victim.
 *  - S3-FIFO (Yang et al., SOSP 2023) with TinyLFU in place of its ghost
 *    queue: a 10% small FIFO, a main FIFO with 2-bit reinsertion counts; a
 *    small-queue object never hit goes to main only if the sketch ranks it
 *    above main's victim.
 *  - LRU, no admission: the simulator's baseline.
 * Both admission policies also make TinyLFU's comparison when a fetch
 * starts (cache_door_refuses), and their sketches have the doorkeeper, so
 * a long tail of rare keys neither inflates the counts nor gets stored.
 */
#include "cache/cache.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "base/sketch.h"
#include "http/vary.h"

#define CACHE_SHARD_BYTES   (4u << 20)  /* auto shards: one per 4 MiB */
#define CACHE_AUTO_SHARDS   16u         /* most auto shards */
#define CACHE_TYPICAL       4096u       /* object size the sketch and the
					   table are first sized for */
#define CACHE_CL_ROOM       40u         /* "Content-Length: " 20 digits CRLF */
#define CACHE_GROW_FIRST    16384u      /* body room before the length is known */
#define CACHE_MARKER_TTL    60          /* seconds a key is known uncacheable */
#define CACHE_WINDOW_PCT    1           /* W-TinyLFU window */
#define CACHE_PROTECTED_PCT 80          /* of W-TinyLFU's main space */
#define CACHE_SMALL_PCT     10          /* S3-FIFO small queue */
#define CACHE_FREQ_MAX      3           /* S3-FIFO reinsertion count */
#define CACHE_FILLING_DIV   16          /* fills in flight hold at most
					   size / 16 between them */
#define CACHE_CLASS_STEPS   32u         /* object size classes per doubling */
#define CACHE_TRIM_DIV      16          /* hand freed memory back after
					   size / 16 bytes of objects freed */
#define CACHE_TRIM_GAP_NS   INT64_C(1000000000) /* and at most once a second */
#define CACHE_VARIANTS      16u         /* max_variants when 0 is given */
#define CACHE_MEMO_SLOTS    128u        /* a memo's slots (a power of two) */
#define CACHE_MEMO_FLUSH    16u         /* memo hits told to the shard at once */
#define CACHE_MEMO_DIV      64u         /* a memo holds at most size / 64 */

enum cache_kind { CACHE_K_OBJ = 1, CACHE_K_FILL };

/* Eviction lists. W-TinyLFU: window, probation, protected. S3-FIFO:
 * small, main. LRU: one. */
enum { CACHE_Q_NONE = 0, CACHE_Q_A, CACHE_Q_B, CACHE_Q_C, CACHE_NQ };

#define CACHE_O_MARKER 0x80u    /* flags: an uncacheable-key marker */

/* Why a fill is stored only if others come to wait for it. */
enum { CACHE_PROBE_NONE = 0, CACHE_PROBE_MIN_USES, CACHE_PROBE_ADMISSION };

struct cache_node {
	uint64_t hash;
	uint8_t kind;
};

/* A slot of a shard's table (open addressing, linear probing, at most
 * half full). The hash sits beside the pointer, so a probe compares
 * hashes in the table's own cache lines and touches a node only when the
 * hashes match: a miss reads no object at all. */
struct cache_slot {
	uint64_t hash;
	struct cache_node *node;        /* NULL: empty */
};

struct cache_obj {
	struct cache_node node;         /* first: tables hold nodes */
	struct cache_obj *prev, *next;  /* eviction list, prev toward head */
	_Atomic unsigned refs;
	_Atomic unsigned memos;         /* memos holding it (cache_memo_adopt):
					   its unlinking tells them */
	uint8_t q;                      /* CACHE_Q_*: NONE when not linked */
	uint8_t freq;                   /* S3-FIFO */
	uint8_t ae;                     /* the variant's codings */
	uint8_t flags;                  /* CACHECTL_M_* | CACHE_O_MARKER */
	uint16_t status;
	_Atomic bool gone;              /* out of the table for good (set
					   under the shard lock): a memo
					   holding it never answers with it
					   again */
	uint32_t keylen, backlen, etaglen, varylen;
	size_t headlen;                 /* head with our Content-Length line */
	size_t head_off, body_off, bodylen, charge;
	int64_t resp_time, initial_age, lifetime, swr, sie, last_modified;
	char data[];                    /* key, backend, etag, vary, head,
					   body */
};

struct cache_fill {
	struct cache_node node;
	struct cache *c;
	unsigned shard;
	bool registered;                /* in its table: waiters may attach */
	bool doomed;                    /* invalidated in flight: not stored */
	bool had_waiters;
	uint8_t probe;                  /* CACHE_PROBE_*: stored only if others
					   wait (cache_fill_want) */
	uint8_t ae;
	struct cache_waiter *waiters;   /* shard lock */
	struct cache_obj *obj;          /* being built, after begin */
	size_t cap;                     /* bytes reserved for obj */
	size_t alloc;                   /* bytes allocated for it: cap, or
					   room for max_object when held
					   (cache_fill_hold; reserved as
					   it fills, as its pages are) */
	size_t reserved;                /* of c->filling, this fill's */
	enum http1_framing framing;
	uint64_t expect;                /* HTTP1_BODY_LENGTH */
	struct http1_chunked ck;
	size_t keylen, varylen;
	char key[];                     /* the key, then its Vary spec (the
					   variant it fetches, if known) */
};

struct cache_list {
	struct cache_obj *head, *tail;
	size_t bytes;
};

#define CACHE_COUNTER(name, type, help) _Atomic uint64_t name;

struct cache_shard {
	alignas(64) pthread_mutex_t lock;
	struct cache *c;
	struct cache_slot *slots;
	size_t nslots, nnodes;          /* nslots: a power of two */
	struct cache_list q[CACHE_NQ];
	size_t share;                   /* size / shards: all the shard may
					   hold, its own structures included */
	size_t budget;                  /* of it, what objects may take: the
					   share less the table and sketch */
	struct sketch *sk;
	size_t sk_expected;             /* what sk was sized for */
	struct {
		CACHE_STATS(CACHE_COUNTER)
	} st;
};

struct cache {
	unsigned nshards, shard_shift;
	enum cache_policy policy;
	bool doorkeeper;
	bool door_admission;
	uint64_t seed;
	_Atomic size_t size, max_object;
	_Atomic unsigned min_uses;
	_Atomic unsigned max_variants;
	_Atomic size_t filling;         /* bytes of objects being filled */
	_Atomic size_t freed;           /* bytes of objects freed since the
					   last trim (cache_dead_free_trim) */
	_Atomic int64_t trimmed;        /* its time, CLOCK_MONOTONIC ns */
	struct cache_shard *shards;
	/* the workers' memos (cache_memo_*): read on every memo hit,
	 * written only when a memoized object leaves or a reload configures,
	 * so on a line of their own */
	alignas(64) _Atomic uint64_t memo_gone; /* memoized objects unlinked */
	_Atomic uint64_t memo_gen;      /* cache_configure calls */
	alignas(64) pthread_mutex_t memo_lock; /* the list, for cache_stats */
	struct cache_memo *memos;
	uint64_t memo_hits_gone;        /* hits of memos freed (memo_lock) */
};

/* Counters change under the shard lock (one writer), and are read by
 * cache_stats() from any thread: relaxed atomics, no read-modify-write. */
#define CACHE_ADD(s, name, n) atomic_store_explicit(&(s)->st.name, \
	atomic_load_explicit(&(s)->st.name, memory_order_relaxed) + (uint64_t)(n), \
	memory_order_relaxed)
#define CACHE_SUB(s, name, n) CACHE_ADD(s, name, -(uint64_t)(n))

/* ---- hashing ---------------------------------------------------------- */

static uint64_t cache_fmix(uint64_t z)
{
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* A seeded multiply-rotate hash over 8-byte words, finished with the
 * splitmix64 mixer. Not cryptographic: the random seed only keeps runs
 * from being lined up by chosen URLs from outside. */
static uint64_t cache_hash(uint64_t seed, const void *key, size_t n)
{
	const unsigned char *p = key;
	uint64_t h = seed ^ (n * UINT64_C(0x9e3779b97f4a7c15)), w;

	while (n >= 8) {
		memcpy(&w, p, 8);
		h ^= w * UINT64_C(0x87c37b91114253d5);
		h = ((h << 31) | (h >> 33)) * UINT64_C(0x4cf5ad432745937f);
		p += 8;
		n -= 8;
	}
	w = 0;
	if (p != key && n != 0) {
		/* a key of eight bytes or more: its last eight, only the n
		 * not yet taken kept (what the copy below gives), one load,
		 * not a call of memcpy for a length not known here */
		memcpy(&w, p + n - 8, 8);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		w >>= 8 * (8 - n);
#else
		w &= (UINT64_C(1) << (8 * n)) - 1;
#endif
	} else {
		memcpy(&w, p, n);
	}
	h ^= w * UINT64_C(0x52dce729da3ed1c5);
	return cache_fmix(h);
}

void cache_key_init(const struct cache *c, struct cache_key *k,
		    const char *p, size_t len)
{
	k->p = p;
	k->len = len;
	k->hash = cache_hash(c->seed, p, len);
}

void cache_req_init(struct cache_req *r, const struct cache *c,
		    const char *key, size_t keylen,
		    const struct cachectl_req *rq, int64_t now)
{
	memset(r, 0, sizeof(*r));
	cache_key_init(c, &r->key, key, keylen);
	r->ae = rq->ae;
	r->now = now;
	r->max_age = rq->max_age;
	r->min_fresh = rq->min_fresh;
	if (rq->kind == CACHECTL_REFRESH)
		r->flags |= CACHE_L_REFRESH;
	if (rq->flags & CACHECTL_RQ_HEAD)
		r->flags |= CACHE_L_HEAD;
	if (rq->flags & CACHECTL_RQ_AUTH)
		r->flags |= CACHE_L_AUTH;
	if (rq->flags & CACHECTL_RQ_NO_STORE)
		r->flags |= CACHE_L_NO_STORE;
}

static struct cache_shard *cache_shard_of(const struct cache *c, uint64_t hash,
					  unsigned *idx)
{
	unsigned i = c->shard_shift == 64 ? 0 : (unsigned)(hash >> c->shard_shift);

	if (idx != NULL)
		*idx = i;
	return &c->shards[i];
}

/* ---- objects ---------------------------------------------------------- */

static const char *cache_obj_key(const struct cache_obj *o)
{
	return o->data;
}

struct iovec cache_obj_head(const struct cache_obj *o)
{
	struct iovec v = { (void *)(o->data + o->head_off), o->headlen };

	return v;
}

struct iovec cache_obj_body(const struct cache_obj *o)
{
	struct iovec v = { (void *)(o->data + o->body_off), o->bodylen };

	return v;
}

int cache_obj_status(const struct cache_obj *o)
{
	return o->status;
}

struct http1_str cache_obj_backend(const struct cache_obj *o)
{
	struct http1_str s = { o->data + o->keylen, o->backlen };

	return s;
}

struct http1_str cache_obj_etag(const struct cache_obj *o)
{
	struct http1_str s = { o->data + o->keylen + o->backlen, o->etaglen };

	return s;
}

struct http1_str cache_obj_vary(const struct cache_obj *o)
{
	struct http1_str s = { o->data + o->keylen + o->backlen + o->etaglen, o->varylen };

	return s;
}

bool cache_obj_matches(const struct cache_obj *o, const struct http1_msg *msg,
		       const struct vary_formats *fm)
{
	return o->varylen == 0 || vary_match(cache_obj_vary(o), msg, fm);
}

int64_t cache_obj_last_modified(const struct cache_obj *o)
{
	return o->last_modified;
}

int64_t cache_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (int64_t)ts.tv_sec;
}

int64_t cache_obj_age(const struct cache_obj *o, int64_t now)
{
	return o->initial_age + (now > o->resp_time ? now - o->resp_time : 0);
}

int64_t cache_obj_ttl(const struct cache_obj *o, int64_t now)
{
	return o->lifetime - cache_obj_age(o, now);
}

bool cache_obj_stale_if_error(const struct cache_obj *o, int64_t now)
{
	int64_t ttl = cache_obj_ttl(o, now);

	/* no-cache: used only once validated, never in a failure's place */
	if (o->flags & CACHECTL_M_NO_CACHE)
		return false;
	return ttl > 0 || (!(o->flags & CACHECTL_M_REVALIDATE) && -ttl < o->sie);
}

size_t cache_obj_charge(const struct cache_obj *o)
{
	return o->charge;
}

struct cache_obj *cache_obj_ref(struct cache_obj *o)
{
	atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);
	return o;
}

void cache_obj_release(struct cache_obj *o)
{
	if (o != NULL && atomic_fetch_sub_explicit(&o->refs, 1, memory_order_acq_rel) == 1)
		free(o);
}

/* ---- eviction lists ----------------------------------------------------- */

static void cache_list_push(struct cache_shard *s, int q, struct cache_obj *o)
{
	struct cache_list *l = &s->q[q];

	o->q = (uint8_t)q;
	o->prev = NULL;
	o->next = l->head;
	if (l->head != NULL)
		l->head->prev = o;
	else
		l->tail = o;
	l->head = o;
	l->bytes += o->charge;
}

static void cache_list_remove(struct cache_shard *s, struct cache_obj *o)
{
	struct cache_list *l = &s->q[o->q];

	if (o->prev != NULL)
		o->prev->next = o->next;
	else
		l->head = o->next;
	if (o->next != NULL)
		o->next->prev = o->prev;
	else
		l->tail = o->prev;
	l->bytes -= o->charge;
	o->q = CACHE_Q_NONE;
	o->prev = o->next = NULL;
}

static size_t cache_shard_bytes(const struct cache_shard *s)
{
	return s->q[CACHE_Q_A].bytes + s->q[CACHE_Q_B].bytes + s->q[CACHE_Q_C].bytes;
}

/* ---- hash tables -------------------------------------------------------- */

static bool cache_node_is(const struct cache_node *n, uint64_t hash,
			  const char *key, size_t len)
{
	if (n->hash != hash)
		return false;
	if (n->kind == CACHE_K_OBJ) {
		const struct cache_obj *o = (const struct cache_obj *)n;

		return o->keylen == len && (!key || memcmp(cache_obj_key(o), key, len) == 0);
	}
	return ((const struct cache_fill *)n)->keylen == len
	       && (!key || memcmp(((const struct cache_fill *)n)->key, key, len) == 0);
}

/* The next node of key (hash, key, len) from slot *pos on (start at
 * hash & (nslots - 1)); NULL at the end of the probe run. */
static struct cache_node *cache_tab_next(const struct cache_shard *s,
					 uint64_t hash, const char *key,
					 size_t len, size_t *pos)
{
	size_t mask = s->nslots - 1, i = *pos;

	for (; s->slots[i].node != NULL; i = (i + 1) & mask) {
		if (s->slots[i].hash == hash
		    && cache_node_is(s->slots[i].node, hash, key, len)) {
			*pos = (i + 1) & mask;
			return s->slots[i].node;
		}
	}
	*pos = i;
	return NULL;
}

static void cache_tab_put(struct cache_slot *slots, size_t nslots,
			  struct cache_node *n)
{
	size_t i = n->hash & (nslots - 1);

	while (slots[i].node != NULL)
		i = (i + 1) & (nslots - 1);
	slots[i].hash = n->hash;
	slots[i].node = n;
}

/* The share less what the shard's table and sketch hold: the bytes left
 * to objects (so RSS follows size, whatever the object count). */
static void cache_shard_budget(struct cache_shard *s)
{
	size_t own = s->nslots * sizeof(*s->slots) + sketch_bytes(s->sk);

	s->budget = s->share > own ? s->share - own : 0;
}

/* Add n, doubling the table past half full (the shard's budget for
 * objects shrinks by the growth: the caller's policy evicts down to it).
 * -1 when the table is three quarters full and cannot grow (the caller
 * then stores nothing). */
static int cache_tab_add(struct cache_shard *s, struct cache_node *n)
{
	struct cache_slot *t;
	size_t i, nn = s->nslots * 2;

	if ((s->nnodes + 1) * 2 > s->nslots) {
		t = calloc(nn, sizeof(*t));
		if (t != NULL) {
			for (i = 0; i < s->nslots; i++)
				if (s->slots[i].node != NULL)
					cache_tab_put(t, nn, s->slots[i].node);
			free(s->slots);
			s->slots = t;
			s->nslots = nn;
			cache_shard_budget(s);
		} else if ((s->nnodes + 1) * 4 > s->nslots * 3) {
			return -1;
		}
	}
	cache_tab_put(s->slots, s->nslots, n);
	s->nnodes++;
	return 0;
}

/* Whether slot i lies on the probe path from home slot k to slot j. */
static bool cache_tab_between(size_t k, size_t i, size_t j)
{
	return k <= j ? (k <= i && i < j) : (k <= i || i < j);
}

/* Remove n; the later entries of its run move back over the hole when
 * their probe path crosses it (Knuth's deletion for linear probing), so
 * no tombstones are left. Positions in the run change: a caller that was
 * walking it starts again from the home slot. */
static void cache_tab_del(struct cache_shard *s, struct cache_node *n)
{
	size_t mask = s->nslots - 1, i = n->hash & mask, j;

	while (s->slots[i].node != n)
		i = (i + 1) & mask;
	for (j = (i + 1) & mask; s->slots[j].node != NULL; j = (j + 1) & mask) {
		if (cache_tab_between(s->slots[j].hash & mask, i, j)) {
			s->slots[i] = s->slots[j];
			i = j;
		}
	}
	s->slots[i].node = NULL;
	s->nnodes--;
}

/* Objects whose last reference was dropped under a shard lock, freed once
 * it is released. */
struct cache_dead {
	struct cache_obj *list;
};

static void cache_drop(struct cache_dead *d, struct cache_obj *o)
{
	if (atomic_fetch_sub_explicit(&o->refs, 1, memory_order_acq_rel) == 1) {
		o->next = d->list;
		d->list = o;
	}
}

static void cache_dead_free(struct cache_dead *d)
{
	struct cache_obj *o, *next;

	for (o = d->list; o != NULL; o = next) {
		next = o->next;
		free(o);
	}
	d->list = NULL;
}

/* Free d's objects, and when the cache has freed size / CACHE_TRIM_DIV
 * bytes since the last time (and a second has passed), hand free memory
 * back to the system. Each worker allocates from its own malloc arena:
 * objects one worker stored and another's stores evict leave free chunks
 * in the first's arena that the second never reuses, and the arena keeps
 * them (only its top is ever returned), so RSS grows past size by as much
 * as a whole cache (+40 MB on 64m when the storing moved from one worker
 * to the other). malloc_trim gives back the pages inside free chunks;
 * about 1 ms on a 64 MB heap, from one thread at a time. */
static void cache_dead_free_trim(struct cache *c, struct cache_dead *d)
{
	size_t n = 0, freed, lim;
	struct cache_obj *o;
	struct timespec ts;
	int64_t now, last;

	for (o = d->list; o != NULL; o = o->next)
		n += o->charge;
	cache_dead_free(d);
	if (n == 0)
		return;
	freed = atomic_fetch_add_explicit(&c->freed, n, memory_order_relaxed) + n;
	lim = atomic_load_explicit(&c->size, memory_order_relaxed) / CACHE_TRIM_DIV;
	if (freed < lim)
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	last = atomic_load_explicit(&c->trimmed, memory_order_relaxed);
	if (now - last < CACHE_TRIM_GAP_NS
	    || !atomic_compare_exchange_strong_explicit(&c->trimmed, &last, now,
							memory_order_relaxed,
							memory_order_relaxed))
		return;
	atomic_store_explicit(&c->freed, 0, memory_order_relaxed);
#ifdef __GLIBC__
	malloc_trim(0);
#endif
}

/* Take o out of the table and its list; the table's reference goes. A
 * memo that holds o sees it gone from its next request on: the flag is
 * stored before a memo's adoption can have missed it (cache_memo_adopt
 * counts itself in memos, then reads gone; both sequentially consistent), and a
 * memoized object's leaving makes every memo sweep its slots, so that
 * what memos keep alive of objects out of the table does not wait for
 * their next hit of the same slot. */
static void cache_unlink(struct cache_shard *s, struct cache_obj *o,
			 struct cache_dead *d)
{
	atomic_store(&o->gone, true);
	if (atomic_load(&o->memos) != 0)
		atomic_fetch_add_explicit(&s->c->memo_gone, 1, memory_order_release);
	cache_tab_del(s, &o->node);
	if (o->q != CACHE_Q_NONE)
		cache_list_remove(s, o);
	CACHE_SUB(s, objects, 1);
	CACHE_SUB(s, bytes, o->charge);
	cache_drop(d, o);
}

static void cache_evict(struct cache_shard *s, struct cache_obj *o,
			struct cache_dead *d)
{
	cache_unlink(s, o, d);
	CACHE_ADD(s, evictions, 1);
}

/* ---- policies ----------------------------------------------------------- */

static unsigned cache_freq(const struct cache_shard *s, const struct cache_obj *o)
{
	return sketch_estimate(s->sk, o->node.hash);
}

/* What W-TinyLFU's main space (probation and protected) may hold, and
 * what it holds. */
static size_t cache_wt_main_target(const struct cache_shard *s)
{
	return s->budget - s->budget * CACHE_WINDOW_PCT / 100;
}

static size_t cache_wt_main_bytes(const struct cache_shard *s)
{
	return s->q[CACHE_Q_B].bytes + s->q[CACHE_Q_C].bytes;
}

/* What S3-FIFO's main queue may hold. */
static size_t cache_s3_main_target(const struct cache_shard *s)
{
	return s->budget - s->budget * CACHE_SMALL_PCT / 100;
}

/* The W-TinyLFU main space's next victim: probation's LRU end, else
 * protected's. */
static struct cache_obj *cache_wt_victim(struct cache_shard *s)
{
	return s->q[CACHE_Q_B].tail != NULL ? s->q[CACHE_Q_B].tail : s->q[CACHE_Q_C].tail;
}

/* A window victim asks into the main space (TinyLFU's admission). */
static void cache_wt_admit(struct cache_shard *s, struct cache_obj *cand,
			   struct cache_dead *d)
{
	size_t main_target = cache_wt_main_target(s);
	struct cache_obj *v = cache_wt_victim(s);

	if (v != NULL && cache_wt_main_bytes(s) + cand->charge > main_target) {
		if (cache_freq(s, cand) <= cache_freq(s, v)) {
			cache_unlink(s, cand, d);
			CACHE_ADD(s, admissions_refused, 1);
			return;
		}
		while ((v = cache_wt_victim(s)) != NULL
		       && cache_wt_main_bytes(s) + cand->charge > main_target)
			cache_evict(s, v, d);
	}
	cache_list_push(s, CACHE_Q_B, cand);
}

static void cache_wt_balance(struct cache_shard *s, struct cache_dead *d)
{
	size_t win_target = s->budget * CACHE_WINDOW_PCT / 100;
	struct cache_obj *o;

	while (s->q[CACHE_Q_A].bytes > win_target) {
		o = s->q[CACHE_Q_A].tail;
		cache_list_remove(s, o);
		cache_wt_admit(s, o, d);
	}
	while (cache_shard_bytes(s) > s->budget) {
		o = cache_wt_victim(s);
		cache_evict(s, o != NULL ? o : s->q[CACHE_Q_A].tail, d);
	}
}

static void cache_wt_hit(struct cache_shard *s, struct cache_obj *o)
{
	size_t prot_target = cache_wt_main_target(s) * CACHE_PROTECTED_PCT / 100;
	struct cache_obj *t;
	int q = o->q == CACHE_Q_A ? CACHE_Q_A : CACHE_Q_C;

	cache_list_remove(s, o);
	cache_list_push(s, q, o);
	while (q == CACHE_Q_C && s->q[CACHE_Q_C].bytes > prot_target
	       && (t = s->q[CACHE_Q_C].tail) != o) {
		cache_list_remove(s, t);
		cache_list_push(s, CACHE_Q_B, t);
	}
}

/* S3-FIFO: the small queue's oldest object leaves it. */
static void cache_s3_small_out(struct cache_shard *s, struct cache_dead *d)
{
	struct cache_obj *o = s->q[CACHE_Q_A].tail, *v = s->q[CACHE_Q_B].tail;

	cache_list_remove(s, o);
	if (o->freq == 0 && v != NULL
	    && s->q[CACHE_Q_B].bytes + o->charge > cache_s3_main_target(s)
	    && cache_freq(s, o) <= cache_freq(s, v)) {
		cache_unlink(s, o, d);
		CACHE_ADD(s, admissions_refused, 1);
		return;
	}
	o->freq = 0;
	cache_list_push(s, CACHE_Q_B, o);
}

static void cache_s3_balance(struct cache_shard *s, struct cache_dead *d)
{
	size_t small_target = s->budget * CACHE_SMALL_PCT / 100;
	struct cache_obj *o;

	while (cache_shard_bytes(s) > s->budget) {
		if (s->q[CACHE_Q_A].tail != NULL
		    && (s->q[CACHE_Q_A].bytes > small_target || s->q[CACHE_Q_B].tail == NULL)) {
			cache_s3_small_out(s, d);
			continue;
		}
		o = s->q[CACHE_Q_B].tail;
		if (o == NULL)
			break;
		cache_list_remove(s, o);
		if (o->freq > 0) {
			o->freq--;
			cache_list_push(s, CACHE_Q_B, o);
		} else {
			CACHE_ADD(s, evictions, 1);
			cache_unlink(s, o, d);
		}
	}
}

static void cache_policy_insert(const struct cache *c, struct cache_shard *s,
				struct cache_obj *o, struct cache_dead *d)
{
	o->freq = 0;
	cache_list_push(s, CACHE_Q_A, o);
	switch (c->policy) {
	case CACHE_POLICY_S3FIFO:
		cache_s3_balance(s, d);
		break;
	case CACHE_POLICY_LRU:
		while (cache_shard_bytes(s) > s->budget)
			cache_evict(s, s->q[CACHE_Q_A].tail, d);
		break;
	default:
		cache_wt_balance(s, d);
		break;
	}
}

static void cache_policy_hit(const struct cache *c, struct cache_shard *s,
			     struct cache_obj *o)
{
	switch (c->policy) {
	case CACHE_POLICY_S3FIFO:
		if (o->freq < CACHE_FREQ_MAX)
			o->freq++;
		break;
	case CACHE_POLICY_LRU:
		cache_list_remove(s, o);
		cache_list_push(s, CACHE_Q_A, o);
		break;
	default:
		cache_wt_hit(s, o);
		break;
	}
}

/* Evict until the shard is within its budget (after it shrank). */
static void cache_policy_trim(const struct cache *c, struct cache_shard *s,
			      struct cache_dead *d)
{
	struct cache_obj *o;

	if (c->policy == CACHE_POLICY_S3FIFO) {
		cache_s3_balance(s, d);
		return;
	}
	while (cache_shard_bytes(s) > s->budget) {
		o = c->policy == CACHE_POLICY_LRU ? NULL : cache_wt_victim(s);
		cache_evict(s, o != NULL ? o : s->q[CACHE_Q_A].tail, d);
	}
}

/* ---- the cache ---------------------------------------------------------- */

static size_t cache_pow2(size_t n)
{
	size_t p = 1;

	while (p < n)
		p <<= 1;
	return p;
}

/* Keys a shard of budget bytes is expected to hold, for the sketch. */
static size_t cache_expected(size_t budget)
{
	size_t n = budget / CACHE_TYPICAL;

	return n < 64 ? 64 : n;
}

/* An adaptive mutex: a lookup holds it for about 100 ns, so a contending
 * thread spins briefly before sleeping instead of paying two futex calls
 * (bench-cache, two threads: about half the CPU a lookup of a plain
 * mutex; a spinlock is no faster alone and burns CPU when the holder is
 * preempted on a busy machine). */
static int cache_lock_init(pthread_mutex_t *m)
{
	pthread_mutexattr_t a;
	int rc;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ADAPTIVE_NP);
	rc = pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
	return rc == 0 ? 0 : -1;
}

/* A shard's sketch is only touched under the shard's lock. */
static unsigned cache_sketch_flags(const struct cache *c)
{
	return SKETCH_LOCKED | (c->doorkeeper ? SKETCH_DOORKEEPER : 0u);
}

static int cache_shard_init(struct cache *c, struct cache_shard *s, size_t budget)
{
	s->c = c;
	s->share = budget;
	s->sk_expected = cache_expected(budget);
	s->sk = sketch_new(s->sk_expected, 4, 0, cache_sketch_flags(c));
	s->nslots = cache_pow2(2 * s->sk_expected);
	s->slots = calloc(s->nslots, sizeof(*s->slots));
	if (s->sk == NULL || s->slots == NULL)
		return -1;
	cache_shard_budget(s);
	return cache_lock_init(&s->lock);
}

static unsigned cache_auto_shards(size_t size)
{
	size_t basis = size != 0 ? size : (size_t)64 << 20;
	unsigned n = 1;

	while (n < CACHE_AUTO_SHARDS && (size_t)n * 2 * CACHE_SHARD_BYTES <= basis)
		n *= 2;
	return n;
}

struct cache *cache_new(const struct cache_params *p, char *err, size_t len)
{
	struct cache *c = NULL;
	unsigned n = p->shards != 0 ? p->shards : cache_auto_shards(p->size), i;

	if (n > CACHE_MAX_SHARDS || (n & (n - 1)) != 0) {
		snprintf(err, len, "cache shards must be a power of two up to %u",
			 CACHE_MAX_SHARDS);
		return NULL;
	}
	c = aligned_alloc(64, sizeof(*c));     /* a multiple of 64 */
	if (c == NULL)
		goto oom;
	memset(c, 0, sizeof(*c));
	c->nshards = n;
	c->shard_shift = 64;
	for (i = n; i > 1; i >>= 1)
		c->shard_shift--;
	c->policy = p->policy == CACHE_POLICY_DEFAULT ? CACHE_POLICY_WTINYLFU : p->policy;
	c->doorkeeper = !p->no_doorkeeper;
	c->door_admission = !p->late_admission;
	c->seed = p->seed;
	if (c->seed == 0 && getrandom(&c->seed, sizeof(c->seed), 0) != sizeof(c->seed))
		c->seed = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)c;
	atomic_init(&c->size, p->size);
	atomic_init(&c->max_object, p->max_object);
	atomic_init(&c->min_uses, p->min_uses);
	atomic_init(&c->max_variants, p->max_variants ? p->max_variants : CACHE_VARIANTS);
	if (cache_lock_init(&c->memo_lock) < 0) {
		free(c);
		c = NULL;
		goto oom;
	}
	c->shards = aligned_alloc(64, n * sizeof(*c->shards));
	if (c->shards == NULL)
		goto oom;
	memset(c->shards, 0, n * sizeof(*c->shards));
	for (i = 0; i < n; i++) {
		if (cache_shard_init(c, &c->shards[i], p->size / n) < 0) {
			c->nshards = i + 1;
			goto oom;
		}
	}
	return c;
oom:
	snprintf(err, len, "cache: out of memory");
	cache_free(c);
	return NULL;
}

void cache_free(struct cache *c)
{
	struct cache_dead d = { NULL };
	unsigned i;
	size_t b;

	if (c == NULL)
		return;
	for (i = 0; c->shards != NULL && i < c->nshards; i++) {
		struct cache_shard *s = &c->shards[i];

		/* no fill is in flight: every node is an object */
		for (b = 0; s->slots != NULL && b < s->nslots; b++)
			if (s->slots[b].node != NULL)
				cache_drop(&d, (struct cache_obj *)s->slots[b].node);
		cache_dead_free(&d);
		free(s->slots);
		sketch_free(s->sk);
		pthread_mutex_destroy(&s->lock);
	}
	free(c->shards);
	pthread_mutex_destroy(&c->memo_lock);
	free(c);
}

void cache_configure(struct cache *c, size_t size, size_t max_object,
		     unsigned min_uses, unsigned max_variants)
{
	unsigned i;

	atomic_store_explicit(&c->min_uses, min_uses, memory_order_relaxed);
	atomic_store_explicit(&c->max_variants, max_variants ? max_variants : CACHE_VARIANTS,
			      memory_order_relaxed);
	atomic_store_explicit(&c->max_object, max_object, memory_order_relaxed);
	atomic_store_explicit(&c->size, size, memory_order_relaxed);
	/* the memos let go of everything they hold before their next hit */
	atomic_fetch_add_explicit(&c->memo_gen, 1, memory_order_release);
	for (i = 0; i < c->nshards; i++) {
		struct cache_shard *s = &c->shards[i];
		struct cache_dead d = { NULL };
		size_t want = cache_expected(size / c->nshards);
		struct sketch *sk = NULL, *old = NULL;

		/* a sketch far from the new size ranks badly: start afresh
		 * (allocated outside the lock) */
		if (size != 0 && (want > 4 * s->sk_expected || want * 4 < s->sk_expected))
			sk = sketch_new(want, 4, 0, cache_sketch_flags(c));
		pthread_mutex_lock(&s->lock);
		s->share = size / c->nshards;
		if (sk != NULL) {
			old = s->sk;
			s->sk = sk;
			s->sk_expected = want;
		}
		cache_shard_budget(s);
		cache_policy_trim(c, s, &d);
		pthread_mutex_unlock(&s->lock);
		sketch_free(old);
		cache_dead_free(&d);
	}
}

static uint64_t cache_memo_hits(const struct cache *c);

void cache_stats(const struct cache *c, struct cache_stats *out)
{
	unsigned i;

	memset(out, 0, sizeof(*out));
	out->hits = cache_memo_hits(c);
	for (i = 0; i < c->nshards; i++) {
		const struct cache_shard *s = &c->shards[i];

#define CACHE_SUM(name, type, help) \
		out->name += atomic_load_explicit(&s->st.name, memory_order_relaxed);
		CACHE_STATS(CACHE_SUM)
#undef CACHE_SUM
	}
}

/* ---- lookup ------------------------------------------------------------- */

/* What a lookup found in its probe run. */
struct cache_found {
	struct cache_obj *obj;          /* the request's variant, or NULL */
	struct cache_fill *fill;        /* a fetch to wait for, or NULL */
	struct cache_obj *shape;        /* a stored object whose Vary names
					   other fields (the newest), or NULL */
	bool varies;                    /* a stored variant of the key varies
					   on Accept-Encoding */
	unsigned seen;                  /* the key's sketch estimate, this
					   request counted */
};

/* Whether o is the variant of Accept-Encoding set ae (all the cache can
 * tell of a waiter when its fetch ends: cache_obj_matches is its own). */
static bool cache_variant_ae(const struct cache_obj *o, unsigned ae)
{
	return !(o->flags & CACHECTL_M_VARY_AE) || o->ae == ae;
}

static bool cache_variant_ok(const struct cache_obj *o, const struct cache_req *r)
{
	return cache_variant_ae(o, r->ae) && cache_obj_matches(o, r->msg, r->fm);
}

static struct http1_str cache_fill_spec(const struct cache_fill *f)
{
	struct http1_str v = { f->key + f->keylen, f->varylen };

	return v;
}

struct http1_str cache_fill_vary(const struct cache_fill *f)
{
	return cache_fill_spec(f);
}

/*
 * The probe run of r's key: the newest stored object that is r's variant
 * (RFC 9111 4.1: the most recent of those that match), and a fetch r may
 * wait for. A fetch of a known variant serves only the requests that
 * match it; one started before the key was known to vary serves anyone
 * unless a stored object says it varies (then a fetch of r's own variant
 * is better: it is stored for all who match).
 */
static void cache_find(struct cache_shard *s, const struct cache_req *r,
		       struct cache_found *fd)
{
	size_t pos = r->key.hash & (s->nslots - 1);
	struct cache_fill *any = NULL, *same = NULL;
	struct cache_node *n;

	memset(fd, 0, sizeof(*fd));
	while ((n = cache_tab_next(s, r->key.hash, r->key.p, r->key.len, &pos)) != NULL) {
		struct cache_obj *o = (struct cache_obj *)n;

		if (n->kind == CACHE_K_FILL) {
			struct cache_fill *f = (struct cache_fill *)n;

			if (f->varylen != 0 && !vary_match(cache_fill_spec(f), r->msg, r->fm))
				continue;       /* another variant's fetch */
			if (f->ae == r->ae)
				same = f;
			else if (any == NULL)
				any = f;
			continue;
		}
		if (o->flags & CACHECTL_M_VARY_AE)
			fd->varies = true;
		if (o->varylen != 0 && (fd->shape == NULL || o->resp_time >= fd->shape->resp_time))
			fd->shape = o;
		if (cache_variant_ok(o, r) && (fd->obj == NULL || o->resp_time >= fd->obj->resp_time))
			fd->obj = o;
	}
	/* a fetch for another Accept-Encoding serves us unless the key is
	 * known to vary on it */
	fd->fill = same != NULL ? same : (fd->varies ? NULL : any);
	if (fd->fill != NULL && fd->fill->varylen == 0 && fd->shape != NULL)
		fd->fill = NULL;
}

enum cache_state { CACHE_S_FRESH, CACHE_S_SWR, CACHE_S_EXPIRED };

static enum cache_state cache_state(const struct cache_obj *o,
				    const struct cache_req *r)
{
	int64_t age = cache_obj_age(o, r->now), left = o->lifetime - age;

	if (o->flags & CACHECTL_M_NO_CACHE)
		return CACHE_S_EXPIRED;         /* revalidated before each use */
	if (left > 0 && left >= r->min_fresh && (r->max_age < 0 || age <= r->max_age))
		return CACHE_S_FRESH;
	if (left <= 0 && -left < o->swr && r->max_age < 0
	    && !(o->flags & CACHECTL_M_REVALIDATE))
		return CACHE_S_SWR;
	return CACHE_S_EXPIRED;
}

/* A fill of r's key; shape (NULL: none) a stored object whose Vary
 * names other fields: the fill is then for r's variant of those. */
static struct cache_fill *cache_fill_new(struct cache *c, struct cache_shard *s,
					 unsigned idx, const struct cache_req *r,
					 const struct cache_obj *shape, bool registered)
{
	char spec[VARY_SPEC_MAX];
	ssize_t vl = shape != NULL ? vary_rekey(cache_obj_vary(shape), r->msg, r->fm,
						spec, sizeof(spec)) : 0;
	struct cache_fill *f;

	if (vl < 0)
		vl = 0;         /* a variant it cannot key: stored as it comes */
	f = malloc(sizeof(*f) + r->key.len + (size_t)vl);
	if (f == NULL)
		return NULL;
	memset(f, 0, sizeof(*f));
	f->node.hash = r->key.hash;
	f->node.kind = CACHE_K_FILL;
	f->c = c;
	f->shard = idx;
	f->ae = (uint8_t)r->ae;
	f->keylen = r->key.len;
	memcpy(f->key, r->key.p, r->key.len);
	f->varylen = (size_t)vl;
	if (vl > 0)
		memcpy(f->key + r->key.len, spec, (size_t)vl);
	if (registered) {
		if (cache_tab_add(s, &f->node) < 0) {
			free(f);
			return NULL;
		}
		f->registered = true;
	}
	return f;
}

static void cache_attach(struct cache_fill *f, struct cache_waiter *w,
			 unsigned idx, const struct cache_req *r)
{
	w->fill_ = f;
	w->shard_ = idx;
	w->ae_ = r->ae;
	w->prev_ = NULL;
	w->next_ = f->waiters;
	if (f->waiters != NULL)
		f->waiters->prev_ = w;
	f->waiters = w;
	f->had_waiters = true;
}

/*
 * TinyLFU's comparison, made when the fetch starts as well as when the
 * object would leave W-TinyLFU's window (or S3-FIFO's small queue): with
 * the main space full, a key the sketch ranks no higher than main's
 * victim is not stored. Such an object would most likely have been
 * refused there anyway, after its body had been copied, allocated and
 * queued: on a long tail that repeats too rarely to hit, that was most of
 * what the cache cost a request. S3-FIFO's main tail is its victim only
 * when it has no hits to spend (it is reinserted otherwise); comparing
 * with a tail that has them froze the cache at its first contents and
 * cost up to 5 points of hit ratio (tests/bench/cachesim.c).
 */
static bool cache_door_refuses(const struct cache *c, struct cache_shard *s,
			       unsigned seen)
{
	struct cache_obj *v;

	if (c->policy == CACHE_POLICY_LRU || !c->door_admission)
		return false;
	if (c->policy == CACHE_POLICY_S3FIFO) {
		v = s->q[CACHE_Q_B].tail;
		if (v == NULL || v->freq != 0
		    || s->q[CACHE_Q_B].bytes + CACHE_TYPICAL <= cache_s3_main_target(s))
			return false;
	} else {
		v = cache_wt_victim(s);
		if (v == NULL || cache_wt_main_bytes(s) + CACHE_TYPICAL <= cache_wt_main_target(s))
			return false;
	}
	return seen <= cache_freq(s, v);
}

/*
 * The decision, under the shard lock, once the table has been searched.
 * A fresh object is a hit; otherwise a fetch in flight is waited for, and
 * failing that the caller leads one. A fill is "private" (not in the
 * table, so nobody waits on it) for requests with Authorization, for a
 * refresh while another fetch runs, and for a key known uncacheable.
 */
static enum cache_result cache_decide(struct cache *c, struct cache_shard *s,
				      unsigned idx, const struct cache_req *r,
				      struct cache_waiter *w, struct cache_found *fd,
				      struct cache_obj **obj, struct cache_fill **fill)
{
	struct cache_obj *o = fd->obj;
	enum cache_state st = o != NULL ? cache_state(o, r) : CACHE_S_EXPIRED;
	bool private = (r->flags & CACHE_L_AUTH) != 0;

	if (o != NULL && (o->flags & CACHE_O_MARKER)) {
		private = private || st == CACHE_S_FRESH;
		o = NULL;
	}
	if (o != NULL && (r->flags & CACHE_L_AUTH) && !(o->flags & CACHECTL_M_AUTH_OK))
		o = NULL;
	if (o != NULL && !(r->flags & CACHE_L_REFRESH)) {
		if (st == CACHE_S_FRESH) {
			cache_policy_hit(c, s, o);
			*obj = cache_obj_ref(o);
			return CACHE_HIT;
		}
		if (st == CACHE_S_SWR && (r->flags & CACHE_L_STALE)) {
			cache_policy_hit(c, s, o);
			*obj = cache_obj_ref(o);
			/* a background refresh of o's own variant */
			if (fd->fill == NULL && !private
			    && !(r->flags & (CACHE_L_HEAD | CACHE_L_NO_STORE)))
				*fill = cache_fill_new(c, s, idx, r, o->varylen ? o : NULL, true);
			return CACHE_STALE;
		}
	}
	if (fd->fill != NULL && !private && !(r->flags & CACHE_L_REFRESH)) {
		if (w == NULL)
			return CACHE_PASS;
		cache_attach(fd->fill, w, idx, r);
		if (o != NULL && (r->flags & CACHE_L_KEEP_STALE))
			*obj = cache_obj_ref(o);
		return CACHE_WAIT;
	}
	if (r->flags & (CACHE_L_HEAD | CACHE_L_NO_STORE))
		return CACHE_PASS;
	*fill = cache_fill_new(c, s, idx, r, fd->shape, !private && fd->fill == NULL);
	if (*fill == NULL)
		return CACHE_PASS;
	/* nothing stored for the key, and seen fewer than min_uses times
	 * (this request included) or ranked below what its store would
	 * evict: store only if others come to wait */
	if (fd->obj == NULL
	    && fd->seen < atomic_load_explicit(&c->min_uses, memory_order_relaxed))
		(*fill)->probe = CACHE_PROBE_MIN_USES;
	else if (fd->obj == NULL && cache_door_refuses(c, s, fd->seen))
		(*fill)->probe = CACHE_PROBE_ADMISSION;
	if (o != NULL && (r->flags & CACHE_L_KEEP_STALE))
		*obj = cache_obj_ref(o);
	return CACHE_MISS;
}

enum cache_result cache_lookup(struct cache *c, const struct cache_req *r,
			       struct cache_waiter *w, struct cache_obj **obj,
			       struct cache_fill **fill)
{
	struct cache_found fd;
	struct cache_shard *s;
	enum cache_result res;
	unsigned idx, seen;

	*obj = NULL;
	*fill = NULL;
	if (atomic_load_explicit(&c->size, memory_order_relaxed) == 0)
		return CACHE_OFF;
	s = cache_shard_of(c, r->key.hash, &idx);
	pthread_mutex_lock(&s->lock);
	seen = sketch_increment(s->sk, r->key.hash);
	cache_find(s, r, &fd);
	fd.seen = seen;
	res = cache_decide(c, s, idx, r, w, &fd, obj, fill);
	if (res == CACHE_HIT || res == CACHE_STALE)
		CACHE_ADD(s, hits, 1);
	else if (res == CACHE_WAIT)
		CACHE_ADD(s, coalesced, 1);
	else
		CACHE_ADD(s, misses, 1);
	pthread_mutex_unlock(&s->lock);
	return res;
}

void cache_peek(const struct cache *c, const struct cache_key *k, int64_t now,
		struct cache_peek *out)
{
	struct cache_shard *s = cache_shard_of(c, k->hash, NULL);
	struct cache_node *n;
	size_t pos;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&s->lock);
	pos = k->hash & (s->nslots - 1);
	while ((n = cache_tab_next(s, k->hash, k->p, k->len, &pos)) != NULL) {
		int64_t ttl;

		if (n->kind == CACHE_K_FILL) {
			out->filling = true;
			continue;
		}
		ttl = cache_obj_ttl((const struct cache_obj *)n, now);
		if (out->objects++ == 0 || ttl > out->ttl)
			out->ttl = ttl;
		out->fresh += ttl > 0;
	}
	pthread_mutex_unlock(&s->lock);
}

bool cache_wait_cancel(struct cache *c, struct cache_waiter *w)
{
	struct cache_shard *s = &c->shards[w->shard_];
	struct cache_fill *f;

	pthread_mutex_lock(&s->lock);
	f = w->fill_;
	if (f != NULL) {
		if (w->prev_ != NULL)
			w->prev_->next_ = w->next_;
		else
			f->waiters = w->next_;
		if (w->next_ != NULL)
			w->next_->prev_ = w->prev_;
		w->fill_ = NULL;
	}
	pthread_mutex_unlock(&s->lock);
	return f != NULL;
}

size_t cache_invalidate(struct cache *c, const struct cache_key *k)
{
	struct cache_shard *s = cache_shard_of(c, k->hash, NULL);
	struct cache_dead d = { NULL };
	struct cache_node *n;
	size_t removed = 0, pos;

	pthread_mutex_lock(&s->lock);
	do {
		pos = k->hash & (s->nslots - 1);
		while ((n = cache_tab_next(s, k->hash, k->p, k->len, &pos)) != NULL) {
			if (n->kind == CACHE_K_FILL) {
				((struct cache_fill *)n)->doomed = true;
				continue;
			}
			cache_unlink(s, (struct cache_obj *)n, &d);
			CACHE_ADD(s, invalidations, 1);
			removed++;
			break;          /* the run moved: walk it again */
		}
	} while (n != NULL);
	pthread_mutex_unlock(&s->lock);
	cache_dead_free_trim(c, &d);
	return removed;
}

size_t cache_invalidate_locations(struct cache *c, struct http1_str host, struct http1_str path,
				  const struct http1_msg *resp)
{
	char key[CACHE_LOCATION_KEY_MAX];
	size_t removed = 0;

	for (unsigned i = 0; i < resp->nheaders; i++) {
		const struct http1_header *h = &resp->headers[i];
		struct cache_key k;
		ssize_t n;

		if (!http1_str_ieq(h->name, "location") && !http1_str_ieq(h->name, "content-location"))
			continue;
		n = cachectl_location_key(host, path, h->value, key, sizeof(key));
		if (n <= 0)
			continue;
		cache_key_init(c, &k, key, (size_t)n);
		removed += cache_invalidate(c, &k);
	}
	return removed;
}

/* ---- a worker's memo -------------------------------------------------- */

/*
 * A memo answers a worker's repeated hits without the shard: no lock, no
 * sketch, no list move, no shared counter, no reference count written.
 * Each slot holds one reference to an object this worker found as a
 * plain fresh hit; a request served from it borrows that reference with
 * a count only this worker touches. The shard still learns of the hits:
 * a slot's are told to its sketch and policy under one lock every
 * CACHE_MEMO_FLUSH hits, at its first hit of each second, and when the
 * slot lets the object go, so a hot object keeps its frequency and
 * recency there. Sixteen because the sketch's 4-bit counters saturate at
 * 15: one batch carries a key as far as sixteen increments would, and the
 * lock and the lines it writes are taken one hit in sixteen.
 */
struct cache_memo_slot {
	struct cache_obj *obj;          /* the memo's reference; NULL: empty */
	unsigned borrowers;             /* requests sending obj now */
	unsigned pending;               /* hits not yet told to the shard */
	int64_t told;                   /* second of the last telling */
	bool dead;                      /* gone or dropped while borrowed:
					   no new hit; released by the last
					   borrower */
	bool used;                      /* hit since another key asked for the
					   slot (its second chance) */
	struct cache_memo_note note;    /* the user's, for obj */
};

struct cache_memo {
	struct cache *c;
	struct cache_memo *next, *prev; /* c->memos (c->memo_lock) */
	_Atomic uint64_t hits;          /* one writer: the memo's thread */
	uint64_t gone_seen, gen_seen;   /* c->memo_gone, c->memo_gen swept at */
	size_t bytes;                   /* charges of the objects held */
	struct cache_memo_slot slot[CACHE_MEMO_SLOTS];
};

static uint64_t cache_memo_hits(const struct cache *c)
{
	/* the lock only orders the list against memos coming and going
	 * (never taken on a request's path): mutable in a const cache */
	pthread_mutex_t *lk = (pthread_mutex_t *)&c->memo_lock;
	const struct cache_memo *m;
	uint64_t n;

	pthread_mutex_lock(lk);
	n = c->memo_hits_gone;
	for (m = c->memos; m != NULL; m = m->next)
		n += atomic_load_explicit(&m->hits, memory_order_relaxed);
	pthread_mutex_unlock(lk);
	return n;
}

struct cache_memo *cache_memo_new(struct cache *c)
{
	struct cache_memo *m = calloc(1, sizeof(*m));

	if (m == NULL)
		return NULL;
	m->c = c;
	m->gone_seen = atomic_load_explicit(&c->memo_gone, memory_order_acquire);
	m->gen_seen = atomic_load_explicit(&c->memo_gen, memory_order_acquire);
	pthread_mutex_lock(&c->memo_lock);
	m->next = c->memos;
	if (c->memos != NULL)
		c->memos->prev = m;
	c->memos = m;
	pthread_mutex_unlock(&c->memo_lock);
	return m;
}

/* Tell the slot's object's shard of its pending hits: the sketch counts
 * them, the policy moves it as one hit would (a list move is the same
 * whether one hit or sixteen asked for it). */
static void cache_memo_tell(struct cache_memo *m, struct cache_memo_slot *sl, int64_t now)
{
	struct cache_obj *o = sl->obj;
	struct cache_shard *s;

	sl->told = now;
	if (sl->pending == 0)
		return;
	s = cache_shard_of(m->c, o->node.hash, NULL);
	pthread_mutex_lock(&s->lock);
	if (!atomic_load_explicit(&o->gone, memory_order_relaxed)) {
		sketch_add(s->sk, o->node.hash, sl->pending);
		cache_policy_hit(m->c, s, o);
	}
	pthread_mutex_unlock(&s->lock);
	sl->pending = 0;
}

/* Let the slot's object go: now, or by its last borrower. */
static void cache_memo_drop(struct cache_memo *m, struct cache_memo_slot *sl)
{
	if (sl->obj == NULL)
		return;
	if (sl->borrowers > 0) {
		sl->dead = true;
		return;
	}
	cache_memo_tell(m, sl, sl->told);
	m->bytes -= sl->obj->charge;
	atomic_fetch_sub(&sl->obj->memos, 1);
	cache_obj_release(sl->obj);
	memset(sl, 0, offsetof(struct cache_memo_slot, note));
	sl->note.at = 0;
	sl->note.tag = 0;
	sl->note.len = 0;
}

/* A reload configured the cache (all), or a memoized object left the
 * table (those gone): let them go before the next answer. */
static void cache_memo_sweep(struct cache_memo *m)
{
	uint64_t gen = atomic_load_explicit(&m->c->memo_gen, memory_order_acquire);
	uint64_t gone = atomic_load_explicit(&m->c->memo_gone, memory_order_acquire);
	bool all = gen != m->gen_seen;

	if (!all && gone == m->gone_seen)
		return;
	m->gen_seen = gen;
	m->gone_seen = gone;
	for (unsigned i = 0; i < CACHE_MEMO_SLOTS; i++) {
		struct cache_memo_slot *sl = &m->slot[i];

		if (sl->obj != NULL
		    && (all || atomic_load_explicit(&sl->obj->gone, memory_order_acquire)))
			cache_memo_drop(m, sl);
	}
}

void cache_memo_free(struct cache_memo *m)
{
	struct cache *c;

	if (m == NULL)
		return;
	c = m->c;
	for (unsigned i = 0; i < CACHE_MEMO_SLOTS; i++) {
		m->slot[i].borrowers = 0;       /* every request has ended */
		cache_memo_drop(m, &m->slot[i]);
	}
	pthread_mutex_lock(&c->memo_lock);
	if (m->prev != NULL)
		m->prev->next = m->next;
	else
		c->memos = m->next;
	if (m->next != NULL)
		m->next->prev = m->prev;
	c->memo_hits_gone += atomic_load_explicit(&m->hits, memory_order_relaxed);
	pthread_mutex_unlock(&c->memo_lock);
	free(m);
}

/* Whether r asks for nothing but a fresh object: what cache_decide
 * answers with a plain CACHE_HIT, whatever else it does. HEAD, no-store,
 * Range and a client's conditional are all served from a fresh object
 * (the caller makes the 304, the 206), so they qualify. */
static bool cache_memo_plain(const struct cache_req *r)
{
	return !(r->flags & (CACHE_L_REFRESH | CACHE_L_AUTH)) && r->max_age < 0
	       && r->min_fresh <= 0;
}

/* Whether o can sit in a memo: an object cache_find picks by key and
 * Accept-Encoding alone (none of its Vary's other fields), and one that
 * answers as a hit while fresh (no marker, no no-cache). Such an object
 * is the only one of its key and variant in the table: storing another
 * unlinks it (cache_publish, cache_variant_keeps). */
static bool cache_memo_fits(const struct cache_obj *o)
{
	return o->varylen == 0 && !(o->flags & (CACHE_O_MARKER | CACHECTL_M_NO_CACHE));
}

struct cache_obj *cache_memo_get(struct cache_memo *m, const struct cache_req *r,
				 unsigned *slot)
{
	struct cache_memo_slot *sl;
	struct cache_obj *o;
	unsigned i;

	if (m == NULL || !cache_memo_plain(r))
		return NULL;
	cache_memo_sweep(m);
	i = (unsigned)r->key.hash & (CACHE_MEMO_SLOTS - 1);
	sl = &m->slot[i];
	o = sl->obj;
	if (o == NULL || sl->dead || o->node.hash != r->key.hash || o->keylen != r->key.len
	    || memcmp(cache_obj_key(o), r->key.p, r->key.len) != 0 || !cache_variant_ae(o, r->ae))
		return NULL;
	if (atomic_load_explicit(&o->gone, memory_order_acquire)) {
		cache_memo_drop(m, sl);
		return NULL;
	}
	if (cache_obj_ttl(o, r->now) <= 0)
		return NULL;    /* expired: the shard decides (stale, refresh) */
	atomic_store_explicit(&m->hits, atomic_load_explicit(&m->hits, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	sl->borrowers++;
	sl->used = true;
	if (++sl->pending >= CACHE_MEMO_FLUSH || r->now != sl->told)
		cache_memo_tell(m, sl, r->now);
	*slot = i;
	return o;
}

int cache_memo_adopt(struct cache_memo *m, const struct cache_req *r, struct cache_obj *o,
		     unsigned *slot)
{
	size_t lim;
	struct cache_memo_slot *sl;
	unsigned i;

	if (m == NULL || !cache_memo_plain(r) || !cache_memo_fits(o))
		return -1;
	i = (unsigned)r->key.hash & (CACHE_MEMO_SLOTS - 1);
	sl = &m->slot[i];
	if (sl->obj == o)
		return -1;      /* this worker's earlier copy went dead */
	if (sl->obj != NULL && (sl->borrowers > 0 || sl->used)) {
		sl->used = false;       /* a second chance, used by the next ask */
		return -1;
	}
	lim = atomic_load_explicit(&m->c->size, memory_order_relaxed) / CACHE_MEMO_DIV;
	if (m->bytes - (sl->obj != NULL ? sl->obj->charge : 0) + o->charge > lim)
		return -1;
	cache_memo_drop(m, sl);
	atomic_fetch_add(&o->memos, 1);
	if (atomic_load(&o->gone)) {
		atomic_fetch_sub(&o->memos, 1);
		return -1;      /* it left as it came: no memo keeps it */
	}
	sl->obj = o;            /* the caller's reference is the memo's now */
	sl->borrowers = 1;
	sl->told = r->now;
	m->bytes += o->charge;
	*slot = i;
	return 0;
}

struct cache_memo_note *cache_memo_note(struct cache_memo *m, unsigned slot)
{
	return &m->slot[slot].note;
}

void cache_memo_put(struct cache_memo *m, unsigned slot)
{
	struct cache_memo_slot *sl = &m->slot[slot];

	if (--sl->borrowers == 0 && sl->dead)
		cache_memo_drop(m, sl);
}

/* ---- fills -------------------------------------------------------------- */

/* Under the shard lock: take f out of its table and claim its waiters
 * (from here on they are woken, never cancelled). */
static struct cache_waiter *cache_fill_detach(struct cache_shard *s,
					      struct cache_fill *f)
{
	struct cache_waiter *list = f->waiters, *w;

	if (f->registered) {
		cache_tab_del(s, &f->node);
		f->registered = false;
	}
	for (w = list; w != NULL; w = w->next_)
		w->fill_ = NULL;
	f->waiters = NULL;
	return list;
}

/* Outside every lock: wake a claimed list, each waiter with o if its
 * variant matches (its reference already taken), else NULL. The next
 * pointer is read before wake, which may free the waiter. */
static void cache_wake(struct cache_waiter *list, struct cache_obj *o)
{
	struct cache_waiter *w;

	while ((w = list) != NULL) {
		list = w->next_;
		w->wake(w, o != NULL && cache_variant_ae(o, w->ae_) ? o : NULL);
	}
}

/* Fills' buffers are outside the stored bytes until they are published:
 * all of them together may hold size / CACHE_FILLING_DIV (one at a time
 * always may), so a burst of concurrent misses of large objects cannot
 * take RSS past size + its tenth. A fill that would go past it is not
 * stored; its response streams to the client as usual. */
static bool cache_fill_reserve(struct cache_fill *f, size_t n)
{
	struct cache *c = f->c;
	size_t lim = atomic_load_explicit(&c->size, memory_order_relaxed) / CACHE_FILLING_DIV;
	size_t before = atomic_fetch_add_explicit(&c->filling, n, memory_order_relaxed);

	if (before != 0 && before + n > lim) {
		atomic_fetch_sub_explicit(&c->filling, n, memory_order_relaxed);
		return false;
	}
	f->reserved += n;
	return true;
}

static void cache_fill_free(struct cache_fill *f)
{
	if (f->reserved != 0)
		atomic_fetch_sub_explicit(&f->c->filling, f->reserved, memory_order_relaxed);
	cache_obj_release(f->obj);      /* a hold (cache_fill_hold) keeps it */
	free(f);
}

int cache_fill_want(struct cache_fill *f)
{
	struct cache_shard *s = &f->c->shards[f->shard];

	if (!f->probe)
		return 0;
	pthread_mutex_lock(&s->lock);
	if (f->had_waiters) {
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	if (f->registered) {
		cache_tab_del(s, &f->node);
		f->registered = false;
	}
	if (f->probe == CACHE_PROBE_MIN_USES)
		CACHE_ADD(s, below_min_uses, 1);
	else
		CACHE_ADD(s, admissions_refused, 1);
	pthread_mutex_unlock(&s->lock);
	cache_fill_free(f);
	return -1;
}

void cache_fill_abort(struct cache_fill *f)
{
	struct cache_shard *s = &f->c->shards[f->shard];
	struct cache_waiter *list = NULL;

	if (f->registered) {
		pthread_mutex_lock(&s->lock);
		list = cache_fill_detach(s, f);
		pthread_mutex_unlock(&s->lock);
	}
	cache_wake(list, NULL);
	cache_fill_free(f);
}

/* Whether old stays beside o, a newer object of its key: both vary on
 * the same fields (Accept-Encoding, the fields of their specs) and are
 * variants for other values of them. An object of another Vary, one that
 * does not vary and o's own variant are superseded. */
static bool cache_variant_keeps(const struct cache_obj *old, const struct cache_obj *o)
{
	bool vae = (o->flags & CACHECTL_M_VARY_AE) != 0;
	struct http1_str a = cache_obj_vary(old), b = cache_obj_vary(o);

	if (vae != ((old->flags & CACHECTL_M_VARY_AE) != 0) || (!vae && b.len == 0)
	    || (old->flags & CACHE_O_MARKER) || !vary_same_fields(a, b))
		return false;
	return (vae && old->ae != o->ae) || a.len != b.len || memcmp(a.p, b.p, a.len) != 0;
}

/* Link o (its reference becomes the table's), replacing the variants it
 * supersedes (cache_variant_keeps), and the oldest of those it keeps
 * beyond max_variants, so that a field with many values (a User-Agent)
 * cannot fill a shard with one URL. */
static void cache_publish(const struct cache *c, struct cache_shard *s,
			  struct cache_obj *o, struct cache_dead *d)
{
	unsigned maxv = atomic_load_explicit(&c->max_variants, memory_order_relaxed), kept;
	struct cache_obj *oldest;
	struct cache_node *n;
	size_t pos;

	do {
		kept = 0;
		oldest = NULL;
		pos = o->node.hash & (s->nslots - 1);
		while ((n = cache_tab_next(s, o->node.hash, cache_obj_key(o), o->keylen,
					   &pos)) != NULL) {
			struct cache_obj *old = (struct cache_obj *)n;

			if (n->kind != CACHE_K_OBJ)
				continue;
			if (cache_variant_keeps(old, o)) {
				kept++;
				if (oldest == NULL || old->resp_time < oldest->resp_time)
					oldest = old;
				continue;
			}
			cache_unlink(s, old, d);
			break;          /* the run moved: walk it again */
		}
		if (n == NULL && kept + 1 > maxv) {
			cache_unlink(s, oldest, d);
			n = &oldest->node;      /* count again */
		}
	} while (n != NULL);
	if (cache_tab_add(s, &o->node) < 0) {
		cache_drop(d, o);
		return;
	}
	CACHE_ADD(s, objects, 1);
	CACHE_ADD(s, bytes, o->charge);
	if (!(o->flags & CACHE_O_MARKER))
		CACHE_ADD(s, stores, 1);
	cache_policy_insert(c, s, o, d);
}

/* The room after the header for an object needing cap bytes: its whole
 * allocation rounded up to a size class (CACHE_CLASS_STEPS per doubling,
 * so at most 1/32 more). Churn frees objects in one order and stores new
 * ones of slightly different sizes: with exact sizes, a freed chunk is
 * too small for most of its successors and the allocator's heap fills
 * with holes no object fits (8 MB of free 4.4-4.7 KB chunks on a 64 MB
 * cache of 4 KiB bodies); in classes, a freed object's chunk fits the
 * next one of its class exactly. The rounding is charged. */
static size_t cache_obj_cap(size_t cap)
{
	size_t n = sizeof(struct cache_obj) + cap, step = 16;

	while (step * 2 * CACHE_CLASS_STEPS <= n)
		step *= 2;
	n = (n + step - 1) & ~(step - 1);
	return n - sizeof(struct cache_obj);
}

static struct cache_obj *cache_obj_alloc(const struct cache_fill *f, size_t cap)
{
	struct cache_obj *o = malloc(sizeof(*o) + cap);

	if (o == NULL)
		return NULL;
	memset(o, 0, sizeof(*o));
	o->node.hash = f->node.hash;
	o->node.kind = CACHE_K_OBJ;
	atomic_init(&o->refs, 1);
	o->keylen = (uint32_t)f->keylen;
	memcpy(o->data, f->key, f->keylen);
	o->last_modified = -1;
	return o;
}

/* Whether o can still answer a request by itself: fresh, or within its
 * stale-while-revalidate or stale-if-error window. */
static bool cache_obj_usable(const struct cache_obj *o, int64_t now)
{
	int64_t ttl = cache_obj_ttl(o, now);

	if (o->flags & CACHE_O_MARKER)
		return false;
	return cache_obj_stale_if_error(o, now)
	       || (!(o->flags & CACHECTL_M_REVALIDATE) && -ttl < o->swr);
}

/* Under the shard lock: whether a stored response of f's key is usable.
 * A marker would unlink it (cache_publish), and a copy that answers while
 * the backend fails (stale-if-error) is worth more than the queueing a
 * marker saves. */
static bool cache_key_usable(const struct cache_shard *s, const struct cache_fill *f,
			     int64_t now)
{
	size_t pos = f->node.hash & (s->nslots - 1);
	struct cache_node *n;

	while ((n = cache_tab_next(s, f->node.hash, f->key, f->keylen, &pos)) != NULL)
		if (n->kind == CACHE_K_OBJ && cache_obj_usable((const struct cache_obj *)n, now))
			return true;
	return false;
}

/* The response was not storable. If requests queued behind it, remember
 * the key as uncacheable for a while (a marker object), so the next ones
 * go to the backend at once instead of queueing for nothing; unless a
 * usable response is stored for it (cache_key_usable). */
static void cache_fill_uncacheable(struct cache_fill *f, int64_t now)
{
	struct cache_shard *s = &f->c->shards[f->shard];
	struct cache_dead d = { NULL };
	struct cache_waiter *list = NULL;
	struct cache_obj *m = NULL;
	bool queued = false;

	if (f->registered) {
		pthread_mutex_lock(&s->lock);
		queued = f->had_waiters;
		list = cache_fill_detach(s, f);
		pthread_mutex_unlock(&s->lock);
	}
	cache_wake(list, NULL);
	if (queued && (m = cache_obj_alloc(f, f->keylen)) != NULL) {
		m->flags = CACHE_O_MARKER;
		m->resp_time = now;
		m->lifetime = CACHE_MARKER_TTL;
		m->charge = sizeof(*m) + m->keylen;
		m->head_off = m->body_off = m->keylen;
		pthread_mutex_lock(&s->lock);
		if (s->budget >= m->charge && !cache_key_usable(s, f, now))
			cache_publish(f->c, s, m, &d);
		else
			cache_drop(&d, m);
		pthread_mutex_unlock(&s->lock);
		cache_dead_free(&d);
	}
	cache_fill_free(f);
}

/* A stored header line: not hop-by-hop, not framing (we write our own
 * Content-Length), not Age (sent afresh), not X-Forwarded-Proto, not one
 * the caller dropped (the backend's own of our backend header's name: a
 * hit sends ours). Via stays: the sender's own Via line follows it. */
static bool cache_head_keep(const struct http1_header *h)
{
	if (h->flags & (HTTP1_HDR_HOP | HTTP1_HDR_FRAMING | HTTP1_HDR_DROP))
		return false;
	if ((h->flags & HTTP1_HDR_GENERATED) && h->name.len != 3)
		return false;
	return !http1_str_ieq(h->name, "age");
}

/* Whether h is one of the field names listed in omit (no-cache="a, b",
 * cachectl_meta): not stored. */
static bool cache_head_omitted(const struct http1_header *h, struct http1_str omit)
{
	const char *p = omit.p, *e = omit.p + omit.len;

	while (p < e) {
		const char *q = p;

		while (q < e && *q != ',')
			q++;
		struct http1_str n = { p, (size_t)(q - p) };

		while (n.len && (n.p[0] == ' ' || n.p[0] == '\t'))
			n.p++, n.len--;
		while (n.len && (n.p[n.len - 1] == ' ' || n.p[n.len - 1] == '\t'))
			n.len--;
		if (n.len == h->name.len && strncasecmp(n.p, h->name.p, n.len) == 0)
			return true;
		p = q + 1;
	}
	return false;
}

/* Write the stored head into p (NULL: only measure), without the lines
 * omit names; returns its length. */
static size_t cache_head_write(char *p, const struct http1_msg *m, struct http1_str omit)
{
	size_t n = 0, i;

#define CACHE_PUT(s, l) do { if (p != NULL) memcpy(p + n, (s), (l)); n += (l); } while (0)
	CACHE_PUT("HTTP/1.1 ", 9);
	if (p != NULL) {
		p[n] = (char)('0' + m->status / 100 % 10);
		p[n + 1] = (char)('0' + m->status / 10 % 10);
		p[n + 2] = (char)('0' + m->status % 10);
	}
	n += 3;
	CACHE_PUT(" ", 1);
	CACHE_PUT(m->reason.p, m->reason.len);
	CACHE_PUT("\r\n", 2);
	for (i = 0; i < m->nheaders; i++) {
		const struct http1_header *h = &m->headers[i];

		if (!cache_head_keep(h) || (omit.len && cache_head_omitted(h, omit)))
			continue;
		CACHE_PUT(h->name.p, h->name.len);
		CACHE_PUT(": ", 2);
		CACHE_PUT(h->value.p, h->value.len);
		CACHE_PUT("\r\n", 2);
	}
#undef CACHE_PUT
	return n;
}

int cache_fill_begin(struct cache_fill *f, const struct http1_msg *resp,
		     const struct cachectl_meta *m, const char *backend,
		     size_t backend_len)
{
	size_t maxo = atomic_load_explicit(&f->c->max_object, memory_order_relaxed);
	size_t headlen, body_cap, cap;
	struct cache_obj *o;

	/* a Vary on fields the caller did not key (vary_spec) is not
	 * storable: it would answer every request whatever they send */
	if (!m->storable || (m->vary.len == 0 && vary_other(resp))) {
		cache_fill_uncacheable(f, m->resident_at);
		return -1;
	}
	if (f->obj != NULL || (resp->framing == HTTP1_BODY_LENGTH
			       && resp->content_length > maxo))
		goto fail;
	headlen = cache_head_write(NULL, resp, m->omit);
	if (resp->framing == HTTP1_BODY_LENGTH)
		body_cap = (size_t)resp->content_length;
	else if (resp->framing == HTTP1_BODY_NONE)
		body_cap = 0;
	else
		body_cap = maxo < CACHE_GROW_FIRST ? maxo : CACHE_GROW_FIRST;
	cap = cache_obj_cap(f->keylen + backend_len + m->etag.len + m->vary.len + headlen
			    + CACHE_CL_ROOM + body_cap);
	if (!cache_fill_reserve(f, sizeof(*o) + cap))
		goto fail;
	o = cache_obj_alloc(f, cap);
	if (o == NULL)
		goto fail;
	o->backlen = (uint32_t)backend_len;
	o->etaglen = (uint32_t)m->etag.len;
	if (backend_len > 0)
		memcpy(o->data + o->keylen, backend, backend_len);
	if (m->etag.len > 0)
		memcpy(o->data + o->keylen + backend_len, m->etag.p, m->etag.len);
	o->varylen = (uint32_t)m->vary.len;
	if (m->vary.len > 0)
		memcpy(o->data + o->keylen + backend_len + m->etag.len, m->vary.p, m->vary.len);
	o->head_off = o->keylen + backend_len + m->etag.len + m->vary.len;
	o->headlen = cache_head_write(o->data + o->head_off, resp, m->omit);
	o->body_off = o->head_off + headlen + CACHE_CL_ROOM;
	o->status = (uint16_t)resp->status;
	o->flags = (uint8_t)m->flags;
	o->ae = (m->flags & CACHECTL_M_VARY_AE) ? f->ae : 0;
	o->resp_time = m->resident_at;
	o->initial_age = m->initial_age;
	o->lifetime = m->lifetime;
	o->swr = m->swr;
	o->sie = m->sie;
	o->last_modified = m->last_modified;
	f->obj = o;
	f->cap = f->alloc = cap;
	f->framing = resp->framing;
	f->expect = resp->content_length;
	http1_chunked_init(&f->ck);
	return 0;
fail:
	cache_fill_abort(f);
	return -1;
}

struct cache_obj *cache_fill_hold(struct cache_fill *f)
{
	size_t maxo = atomic_load_explicit(&f->c->max_object, memory_order_relaxed);
	struct cache_obj *o = f->obj;
	size_t cap;

	if (o == NULL || f->framing == HTTP1_BODY_NONE)
		return NULL;
	if (f->framing != HTTP1_BODY_LENGTH) {
		/* room for max_object now, while nobody holds it: from here on
		 * it never moves; its pages cost nothing until filled, so it
		 * is reserved as it fills (cache_fill_append) */
		cap = cache_obj_cap(o->body_off + maxo);
		if (cap > f->alloc) {
			if ((o = realloc(o, sizeof(*o) + cap)) == NULL)
				return NULL;
			f->obj = o;
			f->alloc = cap;
		}
		/* the holder takes the chunked framing off (and puts its own
		 * on its client's copy) */
		f->framing = HTTP1_BODY_CLOSE;
	}
	return cache_obj_ref(o);
}

/* Append n body bytes, growing the object (not yet visible to anyone)
 * up to max_object; a held object never grows (cache_fill_begin or
 * cache_fill_hold allocated all of it), so it stays where it is, even
 * when a reload raises max_object. */
static int cache_fill_append(struct cache_fill *f, const char *p, size_t n)
{
	size_t maxo = atomic_load_explicit(&f->c->max_object, memory_order_relaxed);
	struct cache_obj *o = f->obj;
	size_t need = o->body_off + o->bodylen + n, cap;

	if (o->bodylen + n > maxo)
		return -1;
	if (need > f->cap) {
		cap = f->cap * 2 < need ? need : f->cap * 2;
		if (cap > o->body_off + maxo)
			cap = o->body_off + maxo;
		cap = cache_obj_cap(cap);
		if (cap > f->alloc && atomic_load_explicit(&o->refs, memory_order_relaxed) != 1)
			return -1;
		if (!cache_fill_reserve(f, cap - f->cap))
			return -1;
		if (cap > f->alloc) {
			o = realloc(o, sizeof(*o) + cap);
			if (o == NULL)
				return -1;
			f->obj = o;
			f->alloc = cap;
		}
		f->cap = cap;
	}
	memcpy(o->data + o->body_off + o->bodylen, p, n);
	o->bodylen += n;
	return 0;
}

int cache_fill_body(struct cache_fill *f, const void *p, size_t n)
{
	const char *b = p;
	size_t off, len;
	ssize_t used;

	if (f->obj == NULL)
		goto fail;
	if (f->framing != HTTP1_BODY_CHUNKED) {
		if ((f->framing == HTTP1_BODY_LENGTH && f->obj->bodylen + n > f->expect)
		    || (f->framing == HTTP1_BODY_NONE && n > 0)
		    || cache_fill_append(f, b, n) < 0)
			goto fail;
		return 0;
	}
	while (n > 0 && !f->ck.done) {
		used = http1_chunked_decode(&f->ck, b, n, &off, &len);
		if (used <= 0 || (len > 0 && cache_fill_append(f, b + off, len) < 0))
			goto fail;
		b += used;
		n -= (size_t)used;
	}
	return 0;
fail:
	cache_fill_abort(f);
	return -1;
}

/* The body is complete: our Content-Length line, then the allocation
 * trimmed to the size class of what is used, which is what the object
 * counts. */
static void cache_obj_finish(struct cache_fill *f)
{
	struct cache_obj *o = f->obj, *t;
	size_t used;

	if (o->status != 204) {
		/* by hand: snprintf was a tenth of a store's cost */
		char *p = o->data + o->head_off + o->headlen, digits[20];
		size_t v = o->bodylen, n = 0;

		do {
			digits[n++] = (char)('0' + v % 10);
			v /= 10;
		} while (v > 0);
		memcpy(p, "Content-Length: ", 16);
		for (size_t i = 0; i < n; i++)
			p[16 + i] = digits[n - 1 - i];
		memcpy(p + 16 + n, "\r\n", 2);
		o->headlen += 16 + n + 2;
	}
	used = cache_obj_cap(o->body_off + o->bodylen);
	if (used < f->alloc && atomic_load_explicit(&o->refs, memory_order_relaxed) == 1) {
		if ((t = realloc(o, sizeof(*o) + used)) != NULL) {
			f->obj = o = t;
			f->alloc = used;
		}
	} else if (used < f->alloc && (t = malloc(sizeof(*o) + used)) != NULL) {
		/* never moved while its leader holds it (cache_fill_hold):
		 * what is stored is a copy of what is used, and the leader's
		 * reference keeps the original until its client has it */
		memcpy(t, o, sizeof(*o) + o->body_off + o->bodylen);
		atomic_init(&t->refs, 1);
		cache_obj_release(o);
		f->obj = o = t;
		f->alloc = used;
	}
	o->charge = sizeof(*o) + f->alloc;
}

int cache_fill_done(struct cache_fill *f)
{
	return cache_fill_done_ref(f, NULL);
}

int cache_fill_done_ref(struct cache_fill *f, struct cache_obj **out)
{
	struct cache_shard *s = &f->c->shards[f->shard];
	struct cache_dead d = { NULL };
	struct cache_waiter *list = NULL, *w;
	struct cache_obj *o = f->obj;
	unsigned refs = 2;      /* the table's (or ours), and one held
				   while waking: o may be evicted as soon as
				   the lock drops */
	bool stored = false;

	if (out != NULL) {
		*out = NULL;
		refs++;         /* the caller's */
	}
	if (o == NULL || (f->framing == HTTP1_BODY_LENGTH && o->bodylen != f->expect)
	    || (f->framing == HTTP1_BODY_CHUNKED && !f->ck.done)) {
		cache_fill_abort(f);
		return -1;
	}
	cache_obj_finish(f);
	o = f->obj;
	f->obj = NULL;
	pthread_mutex_lock(&s->lock);
	list = cache_fill_detach(s, f);
	for (w = list; w != NULL; w = w->next_)
		refs += cache_variant_ae(o, w->ae_);
	/* every reference exists before anyone else can see o (the fill's
	 * own becomes the table's, a hold stays its leader's) */
	atomic_fetch_add_explicit(&o->refs, refs - 1, memory_order_relaxed);
	if (!f->doomed && s->budget >= o->charge) {
		cache_publish(f->c, s, o, &d);
		stored = true;
	} else if (!f->doomed && s->budget > 0) {
		CACHE_ADD(s, admissions_refused, 1);
	}
	pthread_mutex_unlock(&s->lock);
	cache_wake(list, o);
	if (!stored)
		cache_obj_release(o);
	cache_obj_release(o);
	cache_dead_free_trim(f->c, &d);
	cache_fill_free(f);
	if (out != NULL)
		*out = o;
	return 0;
}

/* Header lines of a merged head: at most this many. */
#define CACHE_MERGE_HEADERS 128

/* Whether a 304's header line updates the stored head: the lines a stored
 * head keeps, but never the framing (a 304's Content-Length describes the
 * selected representation, not a body of its own, and the parser does not
 * flag it as framing; the stored body keeps its own), nor the lines that
 * describe the stored bytes themselves (RFC 9111 3.2: the body is the
 * stored one, so its coding, digest, range and entity-tag stay its own). */
static bool cache_merge_takes(const struct http1_header *h)
{
	static const char *const keep[] = {
		"content-length", "transfer-encoding", "content-encoding",
		"content-md5", "content-range", "etag",
	};

	if (!cache_head_keep(h))
		return false;
	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
		if (http1_str_ieq(h->name, keep[i]))
			return false;
	return true;
}

/* Whether the stored line at p (up to its CRLF) names a header that
 * resp carries (and that a stored head keeps): then resp's line wins. */
static bool cache_merge_replaced(const char *p, const char *eol, const struct http1_msg *resp)
{
	const char *colon = memchr(p, ':', (size_t)(eol - p));
	struct http1_str name;

	if (colon == NULL)
		return false;
	name.p = p;
	name.len = (size_t)(colon - p);
	for (unsigned i = 0; i < resp->nheaders; i++) {
		const struct http1_header *h = &resp->headers[i];

		if (cache_merge_takes(h) && h->name.len == name.len
		    && strncasecmp(h->name.p, name.p, name.len) == 0)
			return true;
	}
	return false;
}

int cache_fill_not_modified(struct cache_fill *f, const struct cache_obj *old,
			    const struct http1_msg *resp, const struct cachectl_req *rq,
			    int64_t req_time, int64_t resp_time, int64_t resident_at, int64_t grace,
			    struct cache_obj **out)
{
	struct iovec head = cache_obj_head(old), body = cache_obj_body(old);
	struct http1_str be = cache_obj_backend(old);
	struct http1_header hdrs[CACHE_MERGE_HEADERS];
	struct http1_limits lim;
	struct cachectl_meta meta;
	struct http1_msg m;
	const char *p = head.iov_base, *end = p + head.iov_len, *eol;
	size_t cap = head.iov_len + 8, n = 0;
	char *buf, spec[VARY_SPEC_MAX];
	ssize_t vl;

	*out = NULL;
	for (unsigned i = 0; i < resp->nheaders; i++)
		cap += resp->headers[i].name.len + resp->headers[i].value.len + 4;
	buf = malloc(cap);
	if (buf == NULL)
		goto fail;
	/* the stored status line, then its lines resp does not replace */
	eol = memchr(p, '\n', (size_t)(end - p));
	if (eol == NULL)
		goto fail;
	memcpy(buf, p, (size_t)(eol + 1 - p));
	n = (size_t)(eol + 1 - p);
	/* each line, the last one without its CRLF (cache_obj_head) */
	for (p = eol + 1; p < end; p = eol + 1) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len;

		eol = nl ? nl : end - 1;
		len = nl ? (size_t)(nl + 1 - p) : (size_t)(end - p);
		if (cache_merge_replaced(p, eol, resp))
			continue;
		memcpy(buf + n, p, len);
		n += len;
		if (!nl) {
			memcpy(buf + n, "\r\n", 2);
			n += 2;
		}
	}
	for (unsigned i = 0; i < resp->nheaders; i++) {
		const struct http1_header *h = &resp->headers[i];

		if (!cache_merge_takes(h))
			continue;
		memcpy(buf + n, h->name.p, h->name.len);
		n += h->name.len;
		memcpy(buf + n, ": ", 2);
		n += 2;
		memcpy(buf + n, h->value.p, h->value.len);
		n += h->value.len;
		memcpy(buf + n, "\r\n", 2);
		n += 2;
	}
	memcpy(buf + n, "\r\n", 2);
	n += 2;
	lim.max_head = n + 1;
	lim.max_headers = CACHE_MERGE_HEADERS;
	http1_msg_init(&m);
	if (http1_parse_response(&m, hdrs, buf, n, &lim, HTTP1_M_GET) <= 0)
		goto fail;
	cachectl_response(rq, HTTP1_M_GET, &m, req_time, resp_time, grace, &meta);
	meta.resident_at = resident_at;
	/* the same variant: the values old was stored for */
	vl = vary_spec_from(&m, cache_obj_vary(old), spec, sizeof(spec));
	if (vl > 0)
		meta.vary = (struct http1_str){ spec, (size_t)vl };
	if (cache_fill_begin(f, &m, &meta, be.p, be.len) < 0) {
		f = NULL;
		goto fail;
	}
	free(buf);
	buf = NULL;
	if (cache_fill_body(f, body.iov_base, body.iov_len) < 0)
		return -1;
	return cache_fill_done_ref(f, out);
fail:
	free(buf);
	if (f != NULL)
		cache_fill_abort(f);
	return -1;
}
