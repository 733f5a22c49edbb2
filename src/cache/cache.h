/*
 * cache.h -- the hot-object cache: one per process, shared by every worker.
 *
 * Objects are stored once and found by any worker: a hash table sharded by
 * the key's hash, a mutex per shard held only while a lookup, an insert or
 * an unlink runs. Objects are reference-counted, so a hit is sent without
 * any lock: the caller points its iovecs at cache_obj_head() and
 * cache_obj_body() and calls cache_obj_release() when the bytes are gone.
 *
 * Admission and eviction: TinyLFU (sketch.c, with its doorkeeper) in front
 * of W-TinyLFU's window and segmented LRU, its comparison made when a
 * fetch starts as well as when an object leaves the window; chosen over
 * S3-FIFO's small and main FIFO queues by tests/bench/cachesim.c
 * (tests/bench/README.md, "Cache policy"). Each shard runs its own policy against size / shards
 * bytes.
 * Bytes are accounted exactly: the object struct, key, backend name,
 * ETag, stored head and body of every linked object count against size.
 *
 * Coalescing: the first lookup that misses leads a fill (cache_fill_*);
 * concurrent lookups of the same key from any thread attach a waiter to
 * it and are woken once, from the thread that ends the fill, outside
 * every lock. The protocol is spelled out at struct cache_waiter.
 *
 * Thread safety: every function may be called from any thread, except
 * that one fill is driven by one thread at a time (its leader), and
 * cache_free() runs after every other call has returned.
 */
#ifndef RINGPROXY_CACHE_H
#define RINGPROXY_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "cache/cache-t.h"

#include "http/cachectl.h"
#include "http/http1.h"

struct cache;
struct cache_obj;
struct cache_fill;
struct vary_formats;

#define CACHE_MAX_SHARDS 64u

enum cache_policy {
	CACHE_POLICY_DEFAULT = 0,   /* the measured choice: W-TinyLFU */
	CACHE_POLICY_WTINYLFU,      /* TinyLFU + window LRU + segmented LRU */
	CACHE_POLICY_S3FIFO,        /* TinyLFU + S3-FIFO's small and main FIFOs */
	CACHE_POLICY_LRU,           /* plain LRU, no admission (a baseline) */
};

struct cache_params {
	size_t size;            /* bytes; 0: the cache is off */
	size_t max_object;      /* largest body stored, bytes */
	unsigned shards;        /* a power of two <= CACHE_MAX_SHARDS; 0: one
				   shard per 4 MiB of size (64 MiB if size is
				   0), at most 16 */
	enum cache_policy policy;
	bool no_doorkeeper;     /* no doorkeeper in front of the sketch (it
				   absorbs first occurrences, so a long tail
				   of rare keys does not inflate the counts
				   min_uses and admission read) */
	bool late_admission;    /* TinyLFU's comparison only when an object
				   leaves the window (or small queue), not
				   also when its fetch starts
				   (cache_fill_want) */
	uint64_t seed;          /* key hash seed; 0: random */
	unsigned min_uses;      /* a miss of a key nothing is stored for is
				   kept only from its min_uses-th request
				   within the sketch's window, or when others
				   wait for it (cache_fill_want); 0, 1: from
				   the first */
	unsigned max_variants;  /* objects one key may hold when its
				   responses vary (Vary): storing one more
				   removes the oldest; 0: 16 */
};

/* The cache's counters (name, Prometheus type, help), for stats.h. Hit
 * ratio = hits / (hits + misses + coalesced). */
#define CACHE_STATS(X) \
	X(hits, counter, "requests answered from the cache") \
	X(misses, counter, "cacheable requests that found no usable object and went to a backend") \
	X(coalesced, counter, "requests that waited for another request's fetch of the same object") \
	X(stores, counter, "objects stored") \
	X(admissions_refused, counter, "misses not stored, or objects dropped, because the frequency sketch ranked the key no higher than the eviction victim") \
	X(evictions, counter, "objects evicted to make room") \
	X(below_min_uses, counter, "misses not stored: the key's first request within the sketch's window ([cache] min_uses) and nobody waiting for it") \
	X(invalidations, counter, "objects removed by unsafe methods and purges") \
	X(objects, gauge, "objects in the cache") \
	X(bytes, gauge, "bytes accounted against [cache] size")

struct cache_stats {
#define CACHE_STATS_FIELD(name, type, help) uint64_t name;
	CACHE_STATS(CACHE_STATS_FIELD)
#undef CACHE_STATS_FIELD
};

/* Returns NULL with err set on a bad parameter or out of memory. */
struct cache *cache_new(const struct cache_params *p, char *err, size_t len);

/* Unlinks everything. Objects still referenced stay valid until their
 * last cache_obj_release(); no fill may be in progress. */
void cache_free(struct cache *c);

/* A reload: a smaller size evicts down to it now, 0 empties the cache and
 * turns it off (lookups return CACHE_OFF), a larger one just allows more;
 * min_uses and max_variants as in struct cache_params (a lower
 * max_variants applies as each key next stores).
 * The shard count stays what cache_new() chose. Fills in flight finish
 * normally (and store nothing if the cache is off). */
void cache_configure(struct cache *c, size_t size, size_t max_object,
		     unsigned min_uses, unsigned max_variants);

/* Sums the shards' counters and the memos' hits; any thread, no shard
 * lock taken (only the memo list's, which no request takes). */
void cache_stats(const struct cache *c, struct cache_stats *out);

/* ---- lookup ----------------------------------------------------------- */

void cache_key_init(const struct cache *c, struct cache_key *k,
		    const char *p, size_t len);

#define CACHE_L_HEAD       0x01u  /* HEAD: a miss does not lead a fill
				     (CACHE_PASS) but may wait for a GET's */
#define CACHE_L_REFRESH    0x02u  /* request no-cache / max-age=0: never a
				     hit; leads a fill that replaces */
#define CACHE_L_AUTH       0x04u  /* Authorization: only objects stored
				     public / s-maxage; never waits */
#define CACHE_L_NO_STORE   0x08u  /* request no-store: a hit is fine, a miss
				     is CACHE_PASS */
#define CACHE_L_STALE      0x10u  /* accept an object within its
				     stale-while-revalidate window
				     (CACHE_STALE) */
#define CACHE_L_KEEP_STALE 0x20u  /* on CACHE_MISS or CACHE_WAIT over an
				     expired object, hand it out too
				     (revalidation, stale-if-error) */

struct cache_req {
	struct cache_key key;
	unsigned ae;            /* normalised Accept-Encoding (cachectl_ae) */
	const struct http1_msg *msg; /* the request's header lines, read
				   while the lookup runs to select among
				   variants of a Vary (vary_match); NULL:
				   a request without any (borrowed) */
	const struct vary_formats *fm; /* [cache] image_formats, NULL: off
				   (borrowed) */
	unsigned flags;         /* CACHE_L_* */
	int64_t now;            /* wall clock, seconds since the epoch */
	int64_t max_age;        /* request max-age, -1 for none */
	int64_t min_fresh;      /* request min-fresh, 0 for none */
};

/* Fill r from a request cachectl_request() classified as LOOKUP or
 * REFRESH, keyed by key[0..keylen) (borrowed, see struct cache_key); msg
 * and fm are left NULL for the caller to set. */
void cache_req_init(struct cache_req *r, const struct cache *c,
		    const char *key, size_t keylen,
		    const struct cachectl_req *rq, int64_t now);

/* Whether o is the variant for request msg (fm as in struct cache_req):
 * the request header fields o's Vary names have the values, normalised,
 * of the request that stored it. A waiter woken with an object checks
 * this on its own thread: a fetch whose response turned out to vary on a
 * field serves only the waiters that match (the others go on their own).
 * Any thread; o referenced by the caller. */
bool cache_obj_matches(const struct cache_obj *o, const struct http1_msg *msg,
		       const struct vary_formats *fm);

enum cache_result {
	CACHE_OFF = 0,  /* the cache is off: forward, store nothing */
	CACHE_HIT,      /* *obj: a fresh object; a reference for the caller */
	CACHE_STALE,    /* (CACHE_L_STALE only) *obj: a stale object within
			   its stale-while-revalidate window, reference for
			   the caller; *fill: a background refresh for the
			   caller to lead, or NULL when one is running */
	CACHE_MISS,     /* *fill: the caller leads the fetch and must end the
			   fill (done or abort); *obj: with
			   CACHE_L_KEEP_STALE the expired object (reference),
			   else NULL */
	CACHE_WAIT,     /* w is attached to another request's fetch; *obj:
			   with CACHE_L_KEEP_STALE the expired object
			   (reference) to fall back on if the fetch fails,
			   else NULL */
	CACHE_PASS,     /* forward and store nothing: a HEAD or no-store
			   miss, or a fetch in flight and no waiter given */
};

/*
 * Look r up. w may be NULL (the caller will not wait: CACHE_PASS instead
 * of CACHE_WAIT). *obj and *fill are set as the result says, NULL
 * otherwise; every object handed out carries a reference for the caller.
 * Counts the key in the shard's sketch.
 */
enum cache_result cache_lookup(struct cache *c, const struct cache_req *r,
			       struct cache_waiter *w, struct cache_obj **obj,
			       struct cache_fill **fill);

/* What the cache holds for a key, as cache_peek() saw it. */
struct cache_peek {
	unsigned objects;       /* stored variants (Vary) */
	unsigned fresh;         /* of them, fresh at now */
	int64_t ttl;            /* freshness left of the freshest, seconds
				   (negative once stale); 0 when none */
	bool filling;           /* a fetch for it is in flight */
};

/* Look at what is stored for k without counting or touching anything: no
 * sketch increment, no hit, no change of eviction order (for the admin
 * listener's /ring). Any thread. */
void cache_peek(const struct cache *c, const struct cache_key *k, int64_t now,
		struct cache_peek *out);

/* Stop waiting: see struct cache_waiter. */
bool cache_wait_cancel(struct cache *c, struct cache_waiter *w);

/* Remove every stored variant of key, whatever it varies on (a
 * successful unsafe method, a purge); fetches in flight for it will not be stored. Returns the number
 * of objects removed. k->p NULL: every key of k's hash and length (a
 * request whose head left the buffer keeps only those; another key that
 * shares both, at odds of 2^-64 with the seeded hash, loses its copy
 * too: a miss, never a wrong answer). */
size_t cache_invalidate(struct cache *c, const struct cache_key *k);

/* After a successful unsafe method on host and path (as cachectl_key
 * writes them): remove what is stored for the URLs resp names in
 * Location and Content-Location on the same host (RFC 9111 4.4,
 * cachectl_location_key); a key longer than CACHE_LOCATION_KEY_MAX is
 * left alone. Returns the number of objects removed. */
#define CACHE_LOCATION_KEY_MAX 4096
size_t cache_invalidate_locations(struct cache *c, struct http1_str host, struct http1_str path,
				  const struct http1_msg *resp);

/* ---- a worker's memo of its hits ------------------------------------ */

/*
 * A small table a worker owns of objects it answered as fresh hits, so
 * that the next hit of one costs no lock and writes no line another
 * worker reads: no sketch increment, no list move, no shared counter, no
 * reference count (cache.c says how the shard still learns of the hits).
 * It answers exactly what cache_lookup would answer with a plain
 * CACHE_HIT; an object that leaves the table (purge, invalidation,
 * eviction, replacement, a variant stored over it, a resize) and every
 * object after cache_configure is never answered from it again, from the
 * next cache_memo_get on. It keeps at most size / 64 bytes of objects,
 * and lets go of those that left at the next get after they did.
 *
 * cache_memo_new and cache_memo_free on any thread (the free after every
 * request of its worker ended, before cache_free); the others on the
 * memo's own thread only.
 */
struct cache_memo;

struct cache_memo *cache_memo_new(struct cache *c);
void cache_memo_free(struct cache_memo *m);

/* r's object when the memo may answer r with it (counted as a hit): the
 * object is borrowed, valid until cache_memo_put(m, *slot). NULL: ask
 * cache_lookup. m NULL: NULL. */
struct cache_obj *cache_memo_get(struct cache_memo *m, const struct cache_req *r,
				 unsigned *slot);

/* After cache_lookup answered r with CACHE_HIT o: 0 when the memo took
 * the caller's reference to o and the caller now borrows it (return it
 * with cache_memo_put(m, *slot), not cache_obj_release), -1 when it did
 * not (the reference stays the caller's). */
int cache_memo_adopt(struct cache_memo *m, const struct cache_req *r, struct cache_obj *o,
		     unsigned *slot);

/* The borrower of *slot is done with the object. */
void cache_memo_put(struct cache_memo *m, unsigned slot);

/* What the memo's user keeps with a slot's object: bytes it derives from
 * the object and would otherwise make again for each hit (the lines a
 * hit sends after the stored head), with its own tag and time to tell
 * when they no longer apply. Emptied (len 0, tag 0, at 0) whenever the
 * slot takes another object; the borrower of slot may read and write it
 * while it borrows. */
#define CACHE_MEMO_NOTE 176
struct cache_memo_note {
	int64_t at;
	uint64_t tag;
	size_t len;
	char buf[CACHE_MEMO_NOTE];
};

struct cache_memo_note *cache_memo_note(struct cache_memo *m, unsigned slot);

/* ---- the leader's fill ------------------------------------------------ */

/*
 * The response head arrived; call this before analysing it. Returns 0
 * when the fill goes on (analyse the response, then cache_fill_begin);
 * -1 when the cache does not want it: nothing is stored for the key, no
 * request waits for this fetch, and either the lookup was the key's first
 * request within the sketch's window (min_uses; counted below_min_uses)
 * or the cache is full and the sketch ranks the key no higher than the
 * object its store would evict (TinyLFU's comparison, made now rather
 * than after the copy; counted admissions_refused). f is then over
 * (freed, and requests that come from now on lead their own fill).
 * This keeps one-hit wonders and a long tail that repeats too rarely to
 * hit from costing a copy, an allocation and an eviction each (NGINX's
 * proxy_cache_min_uses, TinyLFU's doorkeeper and admission), while a
 * burst of concurrent misses still makes one fetch and stores it.
 */
int cache_fill_want(struct cache_fill *f);

/*
 * The response head arrived (and cache_fill_want() said so): resp (parsed by http1_parse_response for a
 * GET), m (cachectl_response() on it), the backend's name. When m says
 * storable and the body fits max_object, the fill goes on: returns 0.
 * Otherwise returns -1 and the fill is over (f is freed; its waiters are
 * woken with NULL; when some were waiting, the key is remembered as
 * uncacheable for a minute so that later requests go straight to the
 * backend instead of queueing behind each other, unless a response
 * stored for it can still answer: fresh, or within its
 * stale-while-revalidate or stale-if-error window; a marker never
 * displaces one). A caller whose answer is not the URL's own (a 304 to
 * the request's own validators, a 400 for its header) ends the fill with
 * cache_fill_abort() instead: no marker.
 * A response whose Vary names fields other than Accept-Encoding is stored
 * only with m->vary, the spec of the request the fetch was made for
 * (vary_spec); without one it is not storable.
 * The stored head is resp's status line and headers without hop-by-hop,
 * framing, Age and X-Forwarded-Proto lines, plus a Content-Length of our
 * own; resp's buffer may change once this returns.
 */
int cache_fill_begin(struct cache_fill *f, const struct http1_msg *resp,
		     const struct cachectl_meta *m, const char *backend,
		     size_t backend_len);

/* The spec a fill was started for (len 0: none): the variant of a stored
 * object of the key the request matched in the fields that object's Vary
 * names (vary_rekey), so that the leader can ask the backend for exactly
 * it (vary_accept_line) and only requests of that variant wait for it.
 * Valid until the fill ends. */
struct http1_str cache_fill_vary(const struct cache_fill *f);

/*
 * The object being filled, a reference for the leader (cache_fill_begin
 * said 0): its body (cache_obj_body) holds the bytes cache_fill_body took
 * so far, at a place that stays put, and stays valid until the leader
 * releases it whatever becomes of the fill (done, aborted, not stored).
 * So the leader sends its own client the body from here and reads the
 * backend at the backend's pace, not its client's (NGINX's cache lock,
 * Varnish's busy object). A body of unknown length (chunked, to the
 * close) gets room for max_object now, so that it never moves either;
 * the reservation (a tenth of size for all fills) may refuse it: NULL,
 * the fill goes on without a hold. A chunked body is then fed to
 * cache_fill_body decoded (the holder frames its client's copy itself).
 * When the fill ends while held, what is stored is a trimmed copy.
 * NULL too for a response without a body. Leader's thread; nobody else
 * sees the object before it is published.
 */
struct cache_obj *cache_fill_hold(struct cache_fill *f);

/* Body bytes as they came from the backend (chunked framing included if
 * the response was chunked and not held: it is stored decoded). Returns 0, or -1 when
 * the body grew past max_object or its chunked framing is broken: the
 * fill is then aborted (as cache_fill_abort) and f is freed. */
int cache_fill_body(struct cache_fill *f, const void *p, size_t n);

/* The whole body arrived: store the object (subject to admission) and
 * wake the waiters with it, even if it was not kept. Returns 0, or -1 if
 * the body was incomplete (the fill is aborted). f is freed either way. */
int cache_fill_done(struct cache_fill *f);

/* As cache_fill_done(), and *out a reference to the object (stored or
 * not), NULL on -1. */
int cache_fill_done_ref(struct cache_fill *f, struct cache_obj **out);

/*
 * Revalidation (RFC 9111 4.3.3-4): the backend answered 304 to the
 * conditional request made for the expired object old. The fill stores
 * old's body under old's head updated by resp's header lines (its
 * validators, Cache-Control, Date, Expires...), with the lifetime
 * cachectl_response() finds for the merged head (rq, times and grace as
 * there). Ends f either way; 0 and *out a reference to the new object,
 * or -1 (not storable, out of memory) with *out NULL.
 */
int cache_fill_not_modified(struct cache_fill *f, const struct cache_obj *old,
			    const struct http1_msg *resp, const struct cachectl_req *rq,
			    int64_t req_time, int64_t resp_time, int64_t resident_at, int64_t grace,
			    struct cache_obj **out);

/* The cache's clock in seconds: CLOCK_MONOTONIC, so that a wall clock
 * that jumps neither keeps an object fresh nor ends it early. Every now
 * given to this file's functions (lookups, ages, ttls, peeks) and an
 * object's resident time (cachectl_meta.resident_at, the resident_at of
 * cache_fill_not_modified) are on it; what is compared with Date,
 * Expires or Last-Modified (req_time and resp_time above,
 * cachectl_response, cachectl_not_modified) stays on the wall clock.
 * Any thread. */
int64_t cache_now(void);

/* The fetch failed or the leader gives up: waiters are woken with NULL,
 * nothing is stored, f is freed. Also valid before cache_fill_begin(). */
void cache_fill_abort(struct cache_fill *f);

/* ---- objects ---------------------------------------------------------- */

/* Status line and header lines as they should be replayed, ending with our
 * Content-Length line (none for 204), without the final CRLF: the sender
 * adds Age, Cache-Status, the backend header, Via, Connection and "\r\n". */
struct iovec cache_obj_head(const struct cache_obj *o);
struct iovec cache_obj_body(const struct cache_obj *o);
int cache_obj_status(const struct cache_obj *o);
struct http1_str cache_obj_backend(const struct cache_obj *o);
struct http1_str cache_obj_etag(const struct cache_obj *o);   /* len 0: none */
struct http1_str cache_obj_vary(const struct cache_obj *o);   /* its spec
								(vary.h), len 0:
								none */
int64_t cache_obj_last_modified(const struct cache_obj *o);  /* -1: none */
/* Current age (RFC 9111 4.2.3) and freshness left (negative once stale),
 * in seconds at now. */
int64_t cache_obj_age(const struct cache_obj *o, int64_t now);
int64_t cache_obj_ttl(const struct cache_obj *o, int64_t now);
/* Whether a stale o may still answer when the backend fails (within its
 * stale-if-error window or grace, and neither must-revalidate nor
 * no-cache). */
bool cache_obj_stale_if_error(const struct cache_obj *o, int64_t now);
/* Bytes o counts against size. */
size_t cache_obj_charge(const struct cache_obj *o);

/* Another reference to o (o already referenced by the caller). */
struct cache_obj *cache_obj_ref(struct cache_obj *o);
/* Drop a reference; the last one frees o. NULL is a no-op. */
void cache_obj_release(struct cache_obj *o);

#endif
