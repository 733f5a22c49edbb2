/*
 * test-cache.c -- cache.c: what is stored and replayed, exact byte
 * accounting, eviction and resizing, admission against a scan, freshness
 * and stale windows, request flags, variants, fills that fail or grow too
 * large, and coalescing with real threads (one leader, every waiter woken
 * once, cancellation racing completion). Run under ASan/UBSan by the
 * suite, so a use after free in any of these paths fails the test.
 */
#include "cache/cache.h"
#include "tap.h"
#include "http/vary.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NOW INT64_C(1700000000)
#define BACKEND "cache-1"

static const struct http1_limits lim = { 16384, 64 };

static struct cache *mk(size_t size, size_t max_object, unsigned shards,
			enum cache_policy policy)
{
	struct cache_params p = { .size = size, .max_object = max_object, .shards = shards,
				  .policy = policy, .seed = 42 };
	char err[128];
	struct cache *c = cache_new(&p, err, sizeof(err));

	if (c == NULL)
		tap_diag("cache_new: %s", err);
	return c;
}

static void rq(const struct cache *c, struct cache_req *r, const char *key,
	       unsigned flags, unsigned ae, int64_t now)
{
	memset(r, 0, sizeof(*r));
	cache_key_init(c, &r->key, key, strlen(key));
	r->flags = flags;
	r->ae = ae;
	r->now = now;
	r->max_age = -1;
}

/* A parsed response head and what cachectl decides about it. */
struct resp {
	char buf[4096];
	struct http1_msg m;
	struct http1_header h[64];
	struct cachectl_meta meta;
};

static int mkresp(struct resp *r, const char *head, unsigned ae, int64_t now)
{
	struct cachectl_req cr = { .kind = CACHECTL_LOOKUP, .ae = ae, .max_age = -1 };

	snprintf(r->buf, sizeof(r->buf), "%s", head);
	http1_msg_init(&r->m);
	if (http1_parse_response(&r->m, r->h, r->buf, strlen(r->buf), &lim,
				 HTTP1_M_GET) <= 0)
		return -1;
	cachectl_response(&cr, HTTP1_M_GET, &r->m, now, now, 0, &r->meta);
	return 0;
}

/* Begin f with head (may be not storable), then body, then done. */
static int fill_all(struct cache_fill *f, const char *head, const void *body,
		    size_t len, unsigned ae, int64_t now)
{
	struct resp r;

	if (mkresp(&r, head, ae, now) < 0) {
		cache_fill_abort(f);
		return -1;
	}
	if (cache_fill_begin(f, &r.m, &r.meta, BACKEND, strlen(BACKEND)) < 0)
		return -1;
	if (len > 0 && cache_fill_body(f, body, len) < 0)
		return -1;
	return cache_fill_done(f);
}

/* Store key with a body of len bytes (filled with c0) and extra header
 * lines, through a normal lookup miss. Returns 0 if the fill completed. */
static int put(struct cache *c, const char *key, size_t len, char c0,
	       const char *extra, unsigned ae, int64_t now)
{
	struct cache_req r;
	struct cache_obj *o;
	struct cache_fill *f;
	char head[1024], *body = malloc(len + 1);
	int rc = -1;

	memset(body, c0, len);
	snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\n%sContent-Length: %zu\r\n\r\n",
		 extra != NULL ? extra : "Cache-Control: max-age=60\r\n", len);
	rq(c, &r, key, 0, ae, now);
	if (cache_lookup(c, &r, NULL, &o, &f) == CACHE_MISS)
		rc = fill_all(f, head, body, len, ae, now);
	cache_obj_release(o);
	free(body);
	return rc;
}

/* Look key up; on a hit return the object (reference), on a miss abort
 * the fill. */
static enum cache_result get(struct cache *c, const char *key, unsigned flags,
			     unsigned ae, int64_t now, struct cache_obj **out)
{
	struct cache_req r;
	struct cache_obj *o;
	struct cache_fill *f;
	enum cache_result res;

	rq(c, &r, key, flags, ae, now);
	res = cache_lookup(c, &r, NULL, &o, &f);
	if (f != NULL)
		cache_fill_abort(f);
	if (out != NULL)
		*out = o;
	else
		cache_obj_release(o);
	return res;
}

static bool hits(struct cache *c, const char *key, int64_t now)
{
	return get(c, key, 0, 0, now, NULL) == CACHE_HIT;
}

static struct cache_stats stats(const struct cache *c)
{
	struct cache_stats s;

	cache_stats(c, &s);
	return s;
}

static bool iov_is(struct iovec v, const char *want)
{
	return v.iov_len == strlen(want) && memcmp(v.iov_base, want, v.iov_len) == 0;
}

/* ---- what is stored ---------------------------------------------------- */

static void test_store_and_hit(void)
{
	struct cache *c = mk(1 << 20, 1 << 16, 1, CACHE_POLICY_DEFAULT);
	struct cache_obj *o = NULL;
	struct cache_stats s;
	struct http1_str b;

	tap_is_int(put(c, "a/x", 11, 'h', "Cache-Control: max-age=60\r\n"
		       "Content-Type: text/plain\r\nConnection: keep-alive\r\n"
		       "Keep-Alive: timeout=5\r\nAge: 3\r\nVia: 1.1 cachebox\r\n"
		       "X-Forwarded-Proto: http\r\nETag: \"v1\"\r\n", 0, NOW), 0,
		   "a miss leads a fill that completes");
	tap_is_int(get(c, "a/x", 0, 0, NOW + 5, &o), CACHE_HIT, "then a hit");
	if (o == NULL)
		return;
	tap_ok(iov_is(cache_obj_head(o), "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\n"
		      "Content-Type: text/plain\r\nVia: 1.1 cachebox\r\nETag: \"v1\"\r\n"
		      "Content-Length: 11\r\n"),
	       "stored head: hop-by-hop, Age, X-Forwarded-Proto dropped; our Content-Length");
	tap_ok(iov_is(cache_obj_body(o), "hhhhhhhhhhh"), "stored body");
	tap_is_int(cache_obj_status(o), 200, "status");
	b = cache_obj_backend(o);
	tap_ok(b.len == 7 && memcmp(b.p, BACKEND, 7) == 0, "backend name kept");
	b = cache_obj_etag(o);
	tap_ok(b.len == 4 && memcmp(b.p, "\"v1\"", 4) == 0, "ETag kept");
	tap_is_int(cache_obj_age(o, NOW + 5), 8, "age: Age 3 + 5 s in the cache");
	tap_is_int(cache_obj_ttl(o, NOW + 5), 52, "ttl: 60 - 8");
	s = stats(c);
	tap_ok(s.stores == 1 && s.hits == 1 && s.misses == 1 && s.objects == 1
	       && s.bytes == cache_obj_charge(o),
	       "stats: 1 store, 1 hit, 1 miss, 1 object of its charge in bytes");
	cache_obj_release(o);
	cache_free(c);
}

/* Exactness: charge = a constant struct size + every byte stored (key,
 * backend, ETag, head, the Content-Length room, body), rounded up to the
 * allocation's size class (32 per doubling: a multiple of the largest
 * power of two at most 1/32 of it, under 1/32 of rounding);
 * bytes = the sum. */
static void test_accounting(void)
{
	struct cache *c = mk(1 << 22, 1 << 20, 1, CACHE_POLICY_LRU);
	static const struct {
		const char *key, *extra;
		size_t len;
	} t[] = {
		{ "k/1", NULL, 100 },
		{ "k/22222222222222222222", "Cache-Control: max-age=60\r\nETag: \"abcdef\"\r\n", 1100 },
		{ "k/3", "Cache-Control: max-age=60\r\nX-Long: 0123456789012345678901234567890123456789\r\n", 0 },
		{ "k/4", NULL, 100000 },
	};
	size_t i, sum = 0, base = 256, over[4] = { 0 }, steps[4] = { 0 };
	unsigned same = 0, classed = 0;

	for (i = 0; i < 4; i++) {
		struct cache_obj *o;
		struct iovec h;
		char cl[64];
		size_t visible;

		put(c, t[i].key, t[i].len, 'x', t[i].extra, 0, NOW);
		if (get(c, t[i].key, 0, 0, NOW, &o) != CACHE_HIT)
			continue;
		h = cache_obj_head(o);
		snprintf(cl, sizeof(cl), "Content-Length: %zu\r\n", t[i].len);
		visible = strlen(t[i].key) + strlen(BACKEND) + cache_obj_etag(o).len
			  + h.iov_len - strlen(cl) + 40 + cache_obj_body(o).iov_len;
		size_t ch = cache_obj_charge(o), step = 16;

		while (step * 64 <= ch)
			step *= 2;
		classed += ch % step == 0;
		over[i] = ch > visible ? ch - visible : 0;
		steps[i] = step;
		if (over[i] < base)
			base = over[i];
		sum += ch;
		cache_obj_release(o);
	}
	for (i = 0; i < 4; i++)         /* struct + under one step of rounding */
		same += over[i] >= base && over[i] - base < steps[i];
	tap_ok(base > 0 && base <= 256, "object struct: %zu bytes", base);
	tap_is_int(same, 4, "every object charged struct + key + backend + ETag + head + 40 + body, rounded");
	tap_is_int(classed, 4, "every charge is on a size class");
	tap_is_int(stats(c).bytes, sum, "bytes = the sum of the charges");
	for (i = 0; i < 4; i++) {
		struct cache_key k;

		cache_key_init(c, &k, t[i].key, strlen(t[i].key));
		cache_invalidate(c, &k);
	}
	tap_ok(stats(c).bytes == 0 && stats(c).objects == 0, "all removed: 0 bytes, 0 objects");
	cache_free(c);
}

/* ---- eviction, resizing, references ------------------------------------ */

static void test_eviction(void)
{
	size_t size = 20 * 4400;
	struct cache *c = mk(size, 1 << 20, 1, CACHE_POLICY_DEFAULT);
	struct cache_stats s;
	unsigned i, over = 0;
	char key[32];

	for (i = 0; i < 200; i++) {
		snprintf(key, sizeof(key), "ev/%u", i);
		put(c, key, 4096, 'e', NULL, 0, NOW);
		over += stats(c).bytes > size;
	}
	s = stats(c);
	tap_is_int(over, 0, "200 x 4 KiB into %zu bytes: never over", size);
	tap_ok(s.objects >= 17 && s.objects <= 20, "%llu objects held",
	       (unsigned long long)s.objects);
	tap_is_int(s.stores, 200, "200 stored");
	tap_is_int(s.objects, s.stores - s.evictions - s.admissions_refused,
		   "objects = stores - evictions - refused");
	cache_free(c);
}

static void test_resize(void)
{
	size_t size = 100 * 4400;
	struct cache *c = mk(size, 1 << 20, 4, CACHE_POLICY_DEFAULT);
	struct cache_obj *o = NULL;
	unsigned i;
	char key[32];

	for (i = 0; i < 100; i++) {
		snprintf(key, sizeof(key), "rs/%u", i);
		put(c, key, 4000, 'r', NULL, 0, NOW);
	}
	tap_ok(stats(c).objects > 60, "filled: %llu objects",
	       (unsigned long long)stats(c).objects);
	get(c, "rs/99", 0, 0, NOW, &o);
	cache_configure(c, size / 2, 1 << 20, 0, 0);
	tap_ok(stats(c).bytes <= size / 2 && stats(c).objects > 20,
	       "resized to half: %llu bytes, %llu objects",
	       (unsigned long long)stats(c).bytes, (unsigned long long)stats(c).objects);
	cache_configure(c, 0, 1 << 20, 0, 0);
	tap_ok(stats(c).bytes == 0 && stats(c).objects == 0, "resized to 0: empty");
	tap_is_int(get(c, "rs/1", 0, 0, NOW, NULL), CACHE_OFF, "size 0: lookups say off");
	tap_ok(o != NULL && iov_is(cache_obj_body(o), "") == false
	       && ((char *)cache_obj_body(o).iov_base)[3999] == 'r',
	       "an object referenced across the emptying stays readable");
	cache_obj_release(o);
	cache_configure(c, size, 1 << 20, 0, 0);
	tap_is_int(put(c, "rs/new", 100, 'n', NULL, 0, NOW), 0, "size back: stores again");
	tap_ok(hits(c, "rs/new", NOW), "and hits");
	cache_free(c);
}

static void test_refcount(void)
{
	struct cache *c = mk(5 * 4400, 1 << 20, 1, CACHE_POLICY_LRU);
	struct cache_obj *o = NULL;
	struct cache_key k;
	unsigned i;
	char key[32];

	put(c, "ref/a", 4000, 'A', NULL, 0, NOW);
	get(c, "ref/a", 0, 0, NOW, &o);
	cache_key_init(c, &k, "ref/a", 5);
	tap_is_int(cache_invalidate(c, &k), 1, "invalidated while referenced");
	tap_ok(o != NULL && ((char *)cache_obj_body(o).iov_base)[3999] == 'A',
	       "the reference still reads the body");
	cache_obj_release(o);

	put(c, "ref/b", 4000, 'B', NULL, 0, NOW);
	get(c, "ref/b", 0, 0, NOW, &o);
	for (i = 0; i < 20; i++) {
		snprintf(key, sizeof(key), "ref/x%u", i);
		put(c, key, 4000, 'x', NULL, 0, NOW);
	}
	tap_ok(!hits(c, "ref/b", NOW), "evicted while referenced");
	tap_ok(o != NULL && ((char *)cache_obj_body(o).iov_base)[0] == 'B'
	       && ((char *)cache_obj_body(o).iov_base)[3999] == 'B',
	       "the reference still reads the body");
	cache_obj_release(o);
	cache_free(c);
}

/* The table grows past its first size and keeps every key through
 * removals from the middle of probe runs. */
static void test_table(void)
{
	struct cache *c = mk(4 << 20, 1 << 20, 1, CACHE_POLICY_LRU);
	unsigned i, lost = 0, kept = 0;
	char key[32];

	for (i = 0; i < 6000; i++) {
		snprintf(key, sizeof(key), "t/%u", i);
		put(c, key, 1, 't', NULL, 0, NOW);
	}
	tap_is_int(stats(c).objects, 6000, "6000 small objects stored");
	for (i = 0; i < 6000; i += 3) {
		struct cache_key k;

		snprintf(key, sizeof(key), "t/%u", i);
		cache_key_init(c, &k, key, strlen(key));
		cache_invalidate(c, &k);
	}
	for (i = 0; i < 6000; i++) {
		snprintf(key, sizeof(key), "t/%u", i);
		if (i % 3 == 0)
			kept += hits(c, key, NOW);
		else
			lost += !hits(c, key, NOW);
	}
	tap_is_int(lost, 0, "after removing every third: all others found");
	tap_is_int(kept, 0, "and none of the removed");
	cache_free(c);
}

/* A frequency-aware policy keeps 20 hot objects through a flood of 500
 * one-time objects; a plain LRU loses them all. */
static unsigned scan_survivors(enum cache_policy p)
{
	struct cache *c = mk(50 * 4400, 1 << 20, 1, p);
	unsigned i, j, n = 0;
	char key[32];

	for (j = 0; j < 10; j++)
		for (i = 0; i < 20; i++) {
			snprintf(key, sizeof(key), "hot/%u", i);
			if (!hits(c, key, NOW))
				put(c, key, 4000, 'h', NULL, 0, NOW);
		}
	for (i = 0; i < 500; i++) {
		snprintf(key, sizeof(key), "scan/%u", i);
		put(c, key, 4000, 's', NULL, 0, NOW);
	}
	for (i = 0; i < 20; i++) {
		snprintf(key, sizeof(key), "hot/%u", i);
		n += hits(c, key, NOW);
	}
	cache_free(c);
	return n;
}

static void test_admission(void)
{
	unsigned wt = scan_survivors(CACHE_POLICY_WTINYLFU);
	unsigned s3 = scan_survivors(CACHE_POLICY_S3FIFO);
	unsigned lru = scan_survivors(CACHE_POLICY_LRU);

	tap_ok(wt >= 19, "W-TinyLFU: %u of 20 hot objects survive a scan of 500", wt);
	tap_ok(s3 >= 19, "S3-FIFO + TinyLFU: %u of 20 survive", s3);
	tap_is_int(lru, 0, "LRU: none survive (the test tells them apart)");
}

struct wake_rec {
	struct cache_waiter w;
	struct cache_obj *obj;
	_Atomic int woken;
};

static void rec_wake(struct cache_waiter *w, struct cache_obj *obj)
{
	struct wake_rec *r = (struct wake_rec *)w;

	r->obj = obj;
	atomic_fetch_add(&r->woken, 1);
}

/* ---- freshness ---------------------------------------------------------- */

/* Resident time on the cache's own clock (cache_now): an object stored
 * at wall time NOW (its Date) and at 500 on the monotonic clock is aged by
 * the monotonic clock alone, so a wall clock that jumps back an hour
 * cannot keep a max-age=2 object fresh (RFC 9111 4.2.3: resident time is
 * the time spent here, only response_time and now meet Date). */
static void test_resident_clock(void)
{
	struct cache *c = mk(1 << 20, 1 << 20, 1, CACHE_POLICY_DEFAULT);
	struct cache_req r;
	struct cache_obj *o = NULL;
	struct cache_fill *f = NULL;
	struct resp resp;
	char head[] = "HTTP/1.1 200 OK\r\nCache-Control: max-age=2\r\nContent-Length: 1\r\n\r\n";

	rq(c, &r, "rc/a", 0, 0, 500);
	cache_lookup(c, &r, NULL, &o, &f);
	if (f == NULL || mkresp(&resp, head, 0, NOW) < 0) {
		tap_ok(false, "a fill for the resident clock");
		cache_fill_abort(f);
		cache_free(c);
		return;
	}
	resp.meta.resident_at = 500;
	tap_ok(cache_fill_begin(f, &resp.m, &resp.meta, BACKEND, strlen(BACKEND)) == 0 &&
	       cache_fill_body(f, "x", 1) == 0 && cache_fill_done(f) == 0, "max-age=2 stored at 500 s of the cache clock");
	tap_ok(hits(c, "rc/a", 501), "a hit 1 s later on the cache clock");
	tap_is_int(get(c, "rc/a", 0, 0, 502, NULL), CACHE_MISS,
		   "not fresh 2 s later on the cache clock, whatever its Date (the wall clock) says");
	cache_free(c);
}

static void test_freshness(void)
{
	struct cache *c = mk(1 << 20, 1 << 20, 1, CACHE_POLICY_DEFAULT);
	struct wake_rec w = { { rec_wake, NULL, NULL, NULL, NULL, 0, 0 }, NULL, 0 };
	struct cache_req r;
	struct cache_obj *o, *o2;
	struct cache_fill *f, *f2;

	put(c, "fr/a", 10, 'a', NULL, 0, NOW);
	tap_ok(hits(c, "fr/a", NOW + 59), "max-age=60: a hit at 59 s");
	tap_is_int(get(c, "fr/a", 0, 0, NOW + 60, NULL), CACHE_MISS, "a miss at 60 s");
	tap_is_int(get(c, "fr/a", CACHE_L_KEEP_STALE, 0, NOW + 60, &o), CACHE_MISS,
		   "KEEP_STALE: still a miss");
	tap_ok(o != NULL && iov_is(cache_obj_body(o), "aaaaaaaaaa"),
	       "KEEP_STALE hands out the expired object");
	tap_ok(o != NULL && !cache_obj_stale_if_error(o, NOW + 60),
	       "no stale-if-error window: not usable on error");
	cache_obj_release(o);
	rq(c, &r, "fr/a", 0, 0, NOW + 60);
	cache_lookup(c, &r, NULL, &o, &f);
	rq(c, &r, "fr/a", CACHE_L_KEEP_STALE, 0, NOW + 60);
	tap_is_int(cache_lookup(c, &r, &w.w, &o, &f2), CACHE_WAIT,
		   "KEEP_STALE behind a fetch in flight: waits");
	tap_ok(o != NULL && iov_is(cache_obj_body(o), "aaaaaaaaaa"),
	       "holding the expired object in case the fetch fails");
	cache_obj_release(o);
	cache_fill_abort(f);
	tap_ok(w.woken == 1 && w.obj == NULL, "the fetch failed: woken with NULL");

	put(c, "fr/age", 10, 'a', "Cache-Control: max-age=60\r\nAge: 50\r\n", 0, NOW);
	tap_ok(hits(c, "fr/age", NOW + 9) && !hits(c, "fr/age", NOW + 10),
	       "Age: 50 leaves 10 s");

	rq(c, &r, "fr/a", 0, 0, NOW + 30);
	put(c, "fr/a", 10, 'a', NULL, 0, NOW);
	r.max_age = 10;
	tap_is_int(cache_lookup(c, &r, NULL, &o, &f), CACHE_MISS, "request max-age=10, age 30: miss");
	cache_fill_abort(f);
	r.max_age = -1;
	r.min_fresh = 40;
	tap_is_int(cache_lookup(c, &r, NULL, &o, &f), CACHE_MISS, "request min-fresh=40, 30 left: miss");
	cache_fill_abort(f);

	put(c, "fr/swr", 10, 'a', "Cache-Control: max-age=60, stale-while-revalidate=30, stale-if-error=100\r\n", 0, NOW);
	tap_is_int(get(c, "fr/swr", 0, 0, NOW + 70, NULL), CACHE_MISS,
		   "swr: a miss for a request not taking stale");
	rq(c, &r, "fr/swr", CACHE_L_STALE, 0, NOW + 70);
	tap_is_int(cache_lookup(c, &r, NULL, &o, &f), CACHE_STALE, "swr: stale within 30 s");
	tap_ok(o != NULL && f != NULL, "with the object and a refresh to lead");
	tap_is_int(cache_lookup(c, &r, NULL, &o2, &f2), CACHE_STALE, "a second: stale too");
	tap_ok(o2 != NULL && f2 == NULL, "without a second refresh");
	tap_ok(cache_obj_stale_if_error(o, NOW + 159) && !cache_obj_stale_if_error(o, NOW + 160),
	       "stale-if-error=100: usable on error until 160 s");
	cache_obj_release(o);
	cache_obj_release(o2);
	fill_all(f, "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 2\r\n\r\n",
		 "nn", 2, 0, NOW + 70);
	tap_ok(hits(c, "fr/swr", NOW + 100), "the refresh replaced it");
	tap_is_int(get(c, "fr/swr", CACHE_L_STALE, 0, NOW + 101, &o), CACHE_HIT, "fresh again");
	tap_ok(o != NULL && iov_is(cache_obj_body(o), "nn"), "with the new body");
	cache_obj_release(o);
	tap_is_int(get(c, "fr/swr", CACHE_L_STALE, 0, NOW + 100 + 60, NULL), CACHE_MISS,
		   "no window named now: a miss once stale");

	put(c, "fr/mr", 10, 'a', "Cache-Control: max-age=60, must-revalidate, stale-while-revalidate=30\r\n", 0, NOW);
	tap_is_int(get(c, "fr/mr", CACHE_L_STALE, 0, NOW + 70, NULL), CACHE_MISS,
		   "must-revalidate: never stale");
	cache_free(c);
}

/* ---- request flags ------------------------------------------------------ */

static void test_flags(void)
{
	struct cache *c = mk(1 << 20, 1 << 20, 1, CACHE_POLICY_DEFAULT);
	struct cache_req r;
	struct cache_waiter w = { NULL, NULL, NULL, NULL, NULL, 0, 0 };
	struct cache_obj *o;
	struct cache_fill *f, *f2;

	tap_is_int(get(c, "fl/h", CACHE_L_HEAD, 0, NOW, NULL), CACHE_PASS, "HEAD miss: pass");
	tap_is_int(get(c, "fl/h", CACHE_L_NO_STORE, 0, NOW, NULL), CACHE_PASS, "no-store miss: pass");
	put(c, "fl/h", 5, 'h', NULL, 0, NOW);
	tap_is_int(get(c, "fl/h", CACHE_L_HEAD, 0, NOW, NULL), CACHE_HIT, "HEAD hit on a GET's object");
	tap_is_int(get(c, "fl/h", CACHE_L_NO_STORE, 0, NOW, NULL), CACHE_HIT, "no-store hit");

	rq(c, &r, "fl/w", 0, 0, NOW);
	tap_is_int(cache_lookup(c, &r, NULL, &o, &f), CACHE_MISS, "a fetch in flight");
	tap_is_int(get(c, "fl/w", 0, 0, NOW, NULL), CACHE_PASS, "no waiter given: pass");
	rq(c, &r, "fl/w", CACHE_L_HEAD, 0, NOW);
	tap_is_int(cache_lookup(c, &r, &w, &o, &f2), CACHE_WAIT, "HEAD waits for a GET's fetch");
	tap_ok(cache_wait_cancel(c, &w), "and cancels before the end: true");
	tap_ok(!cache_wait_cancel(c, &w), "cancelling again: false (no longer attached)");
	rq(c, &r, "fl/w", CACHE_L_REFRESH, 0, NOW);
	tap_is_int(cache_lookup(c, &r, &w, &o, &f2), CACHE_MISS,
		   "refresh with a fetch in flight: its own fetch");
	cache_fill_abort(f2);
	cache_fill_abort(f);

	put(c, "fl/a", 5, 'a', NULL, 0, NOW);
	rq(c, &r, "fl/a", CACHE_L_AUTH, 0, NOW);
	tap_is_int(cache_lookup(c, &r, &w, &o, &f), CACHE_MISS, "Authorization, not public: miss");
	tap_is_int(cache_lookup(c, &r, &w, &o, &f2), CACHE_MISS, "another at once: miss, never waits");
	cache_fill_abort(f2);
	tap_is_int(fill_all(f, "HTTP/1.1 200 OK\r\nCache-Control: public, max-age=60\r\n"
			    "Content-Length: 1\r\n\r\n", "p", 1, 0, NOW), 0, "it stores a public response");
	tap_is_int(get(c, "fl/a", CACHE_L_AUTH, 0, NOW, NULL), CACHE_HIT, "Authorization, public: hit");

	rq(c, &r, "fl/a", CACHE_L_REFRESH, 0, NOW);
	tap_is_int(cache_lookup(c, &r, &w, &o, &f), CACHE_MISS, "refresh over a fresh object: miss");
	tap_ok(hits(c, "fl/a", NOW), "others still hit the old object meanwhile");
	fill_all(f, "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 3\r\n\r\n",
		 "new", 3, 0, NOW);
	get(c, "fl/a", 0, 0, NOW, &o);
	tap_ok(o != NULL && iov_is(cache_obj_body(o), "new"), "the refresh replaced it");
	cache_obj_release(o);
	cache_free(c);
}

/* ---- variants ----------------------------------------------------------- */

#define GZ CACHECTL_AE_GZIP
#define BR CACHECTL_AE_BR
#define VARY_GZ "Cache-Control: max-age=60\r\nVary: Accept-Encoding\r\nContent-Encoding: gzip\r\n"
#define VARY_BR "Cache-Control: max-age=60\r\nVary: Accept-Encoding\r\nContent-Encoding: br\r\n"

static void test_variants(void)
{
	struct cache *c = mk(1 << 20, 1 << 20, 1, CACHE_POLICY_DEFAULT);
	struct wake_rec a = { { rec_wake, NULL, NULL, NULL, NULL, 0, 0 }, NULL, 0 };
	struct wake_rec b = a;
	struct cache_req r;
	struct cache_obj *o;
	struct cache_fill *f, *fx;
	struct cache_key k;

	put(c, "v/1", 2, 'g', VARY_GZ, GZ, NOW);
	tap_is_int(get(c, "v/1", 0, GZ, NOW, NULL), CACHE_HIT, "gzip variant: hit for gzip");
	tap_is_int(get(c, "v/1", 0, BR, NOW, NULL), CACHE_MISS, "miss for br");
	tap_is_int(get(c, "v/1", 0, 0, NOW, NULL), CACHE_MISS, "miss for identity");
	put(c, "v/1", 2, 'b', VARY_BR, BR, NOW);
	tap_ok(hits(c, "v/1", NOW) == false && get(c, "v/1", 0, GZ, NOW, NULL) == CACHE_HIT
	       && get(c, "v/1", 0, BR, NOW, NULL) == CACHE_HIT, "both variants kept apart");
	tap_is_int(stats(c).objects, 2, "two objects");
	cache_key_init(c, &k, "v/1", 3);
	tap_is_int(cache_invalidate(c, &k), 2, "invalidation removes every variant");

	put(c, "v/2", 2, 'g', VARY_GZ, GZ, NOW);
	put(c, "v/2", 2, 'p', NULL, BR, NOW);
	tap_ok(stats(c).objects == 1 && get(c, "v/2", 0, GZ, NOW, NULL) == CACHE_HIT
	       && get(c, "v/2", 0, 0, NOW, NULL) == CACHE_HIT,
	       "an unvarying object replaces the variants and serves all");

	/* a fetch for gzip in flight: a br request waits (the key is not
	 * known to vary); the response varies, so br gets NULL, gzip the object */
	rq(c, &r, "v/3", 0, GZ, NOW);
	cache_lookup(c, &r, NULL, &o, &f);
	rq(c, &r, "v/3", 0, BR, NOW);
	tap_is_int(cache_lookup(c, &r, &a.w, &o, &fx), CACHE_WAIT, "br waits on a gzip fetch");
	rq(c, &r, "v/3", 0, GZ, NOW);
	tap_is_int(cache_lookup(c, &r, &b.w, &o, &fx), CACHE_WAIT, "gzip waits too");
	fill_all(f, "HTTP/1.1 200 OK\r\n" VARY_GZ "Content-Length: 1\r\n\r\n", "z", 1, GZ, NOW);
	tap_ok(a.woken == 1 && a.obj == NULL, "the br waiter: woken once with NULL");
	tap_ok(b.woken == 1 && b.obj != NULL && iov_is(cache_obj_body(b.obj), "z"),
	       "the gzip waiter: woken once with the object");
	cache_obj_release(b.obj);
	cache_free(c);
}

/* ---- Vary on request header fields ---------------------------------------- */

/* A request head with header lines hdrs, for the lookup's msg. */
struct vreq {
	char buf[1024];
	struct http1_msg m;
	struct http1_header h[16];
};

static const struct http1_msg *vmsg(struct vreq *v, const char *hdrs)
{
	snprintf(v->buf, sizeof(v->buf), "GET /x HTTP/1.1\r\nHost: h\r\n%s\r\n", hdrs);
	http1_msg_init(&v->m);
	if (http1_parse_request(&v->m, v->h, v->buf, strlen(v->buf), &lim) <= 0)
		tap_diag("bad request head: %s", hdrs);
	return &v->m;
}

/* Look key up as a request with header lines hdrs. */
static enum cache_result vlookup(struct cache *c, const char *key, const char *hdrs,
				 struct cache_waiter *w, struct cache_obj **o,
				 struct cache_fill **f, struct vreq *v)
{
	struct cache_req r;

	/* a refresh when hdrs says so: it replaces a fresh variant */
	rq(c, &r, key, strstr(hdrs, "Cache-Control: no-cache") ? CACHE_L_REFRESH : 0, 0, NOW);
	r.msg = vmsg(v, hdrs);
	return cache_lookup(c, &r, w, o, f);
}

/* Fill f with response head extra (its Vary keyed for request v) and
 * body, now. Returns what cache_fill_begin said, or the done's. */
static int vfill(struct cache_fill *f, const struct vreq *v, const char *extra,
		 const char *body, int64_t now)
{
	char head[512], spec[VARY_SPEC_MAX];
	struct resp r;
	ssize_t n;

	snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\n%sContent-Length: %zu\r\n\r\n",
		 extra, strlen(body));
	if (mkresp(&r, head, 0, now) < 0) {
		cache_fill_abort(f);
		return -1;
	}
	n = v != NULL ? vary_spec(&r.m, &v->m, NULL, spec, sizeof(spec)) : 0;
	if (n > 0)
		r.meta.vary = (struct http1_str){ spec, (size_t)n };
	if (cache_fill_begin(f, &r.m, &r.meta, BACKEND, strlen(BACKEND)) < 0)
		return -1;
	if (cache_fill_body(f, body, strlen(body)) < 0)
		return -1;
	return cache_fill_done(f);
}

/* Store key's variant for request hdrs (a miss that leads the fill). */
static int vput(struct cache *c, const char *key, const char *hdrs, const char *extra,
		const char *body, int64_t now)
{
	struct vreq v;
	struct cache_obj *o;
	struct cache_fill *f;
	int rc = -1;

	if (vlookup(c, key, hdrs, NULL, &o, &f, &v) == CACHE_MISS)
		rc = vfill(f, &v, extra, body, now);
	cache_obj_release(o);
	return rc;
}

/* The body key's lookup with hdrs hits, or "" for anything but a hit. */
static bool vhit(struct cache *c, const char *key, const char *hdrs, const char *body)
{
	struct vreq v;
	struct cache_obj *o;
	struct cache_fill *f;
	enum cache_result res = vlookup(c, key, hdrs, NULL, &o, &f, &v);
	bool ok = res == CACHE_HIT && iov_is(cache_obj_body(o), body);

	if (f != NULL)
		cache_fill_abort(f);
	cache_obj_release(o);
	return ok;
}

#define VDEV "Cache-Control: max-age=60\r\nVary: X-Device\r\n"

static void test_vary_fields(void)
{
	struct cache_params p = { .size = 1 << 20, .max_object = 1 << 20, .shards = 1, .seed = 42,
				  .max_variants = 3 };
	char err[128];
	struct cache *c = cache_new(&p, err, sizeof(err));
	struct wake_rec a = { { rec_wake, NULL, NULL, NULL, NULL, 0, 0 }, NULL, 0 };
	struct wake_rec b = a, d = a;
	struct cache_obj *o;
	struct cache_fill *f, *fx, *fb, *fc, *fy;
	struct cache_key k;
	struct vreq v, va, vb, vd;

	tap_is_int(vput(c, "vf/1", "X-Device: mobile\r\n", VDEV, "M", NOW), 0, "Vary: X-Device stored");
	tap_ok(vhit(c, "vf/1", "x-device:  mobile \r\n", "M"), "the same device (spelt otherwise): a hit");
	tap_ok(!vhit(c, "vf/1", "X-Device: desktop\r\n", "M"), "another device: no hit");
	tap_ok(!vhit(c, "vf/1", "", "M"), "no X-Device: no hit");
	vput(c, "vf/1", "X-Device: desktop\r\n", VDEV, "D", NOW + 1);
	vput(c, "vf/1", "", VDEV, "N", NOW + 2);
	tap_ok(vhit(c, "vf/1", "X-Device: mobile\r\n", "M") && vhit(c, "vf/1", "X-Device: desktop\r\n", "D")
	       && vhit(c, "vf/1", "", "N"), "three variants kept apart, each a hit");
	tap_is_int(stats(c).objects, 3, "three objects");
	vput(c, "vf/1", "X-Device: tv\r\n", VDEV, "T", NOW + 3);
	tap_ok(stats(c).objects == 3 && !vhit(c, "vf/1", "X-Device: mobile\r\n", "M")
	       && vhit(c, "vf/1", "X-Device: tv\r\n", "T") && vhit(c, "vf/1", "", "N"),
	       "max_variants 3: a fourth removes the oldest");
	vput(c, "vf/1", "X-Device: tv\r\nCache-Control: no-cache\r\n", VDEV, "T2", NOW + 4);
	tap_ok(stats(c).objects == 3 && vhit(c, "vf/1", "X-Device: tv\r\n", "T2")
	       && vhit(c, "vf/1", "X-Device: desktop\r\n", "D"), "a variant stored again replaces itself only");
	cache_key_init(c, &k, "vf/1", 4);
	tap_is_int(cache_invalidate(c, &k), 3, "an invalidation (a purge) removes every variant");
	tap_ok(!vhit(c, "vf/1", "X-Device: tv\r\n", "T2"), "none is left");

	vput(c, "vf/2", "X-Device: mobile\r\n", VDEV, "M", NOW);
	vput(c, "vf/2", "X-Device: mobile\r\nCache-Control: no-cache\r\n",
	     "Cache-Control: max-age=60\r\nVary: X-Other\r\n", "O", NOW + 1);
	tap_ok(stats(c).objects == 1 && vhit(c, "vf/2", "X-Device: tv\r\n", "O"),
	       "a response of another Vary supersedes the old variants");

	/* a response varying on a field nobody keyed is not stored */
	tap_is_int(vlookup(c, "vf/3", "X-Device: a\r\n", NULL, &o, &f, &v), CACHE_MISS, "vf/3 misses");
	tap_is_int(vfill(f, NULL, VDEV, "x", NOW), -1, "Vary on a field without its spec: not stored");
	tap_is_int(vlookup(c, "vf/4", "", NULL, &o, &f, &v), CACHE_MISS, "vf/4 misses");
	tap_is_int(vfill(f, &v, "Cache-Control: max-age=60\r\nVary: *\r\n", "x", NOW), -1,
		   "Vary: * is never stored");

	/* coalescing, cold: everyone waits on the first fetch; the response
	 * varies, and each waiter checks it on its own (cache_obj_matches) */
	vlookup(c, "vf/5", "X-Device: a\r\n", NULL, &o, &f, &v);
	tap_is_int(vlookup(c, "vf/5", "X-Device: a\r\n", &a.w, &o, &fx, &va), CACHE_WAIT, "cold: a waits");
	tap_is_int(vlookup(c, "vf/5", "X-Device: b\r\n", &b.w, &o, &fx, &vb), CACHE_WAIT, "cold: b waits too");
	vfill(f, &v, VDEV, "A", NOW);
	tap_ok(a.woken == 1 && a.obj != NULL && cache_obj_matches(a.obj, &va.m, NULL),
	       "the waiter of the same device gets its variant");
	tap_ok(b.woken == 1 && b.obj != NULL && !cache_obj_matches(b.obj, &vb.m, NULL),
	       "the other one is told it is not its variant");
	cache_obj_release(a.obj);
	cache_obj_release(b.obj);

	/* coalescing, warm: the key is known to vary, so a fetch is per
	 * variant and only requests of that variant wait for it */
	a.woken = b.woken = 0;
	a.obj = b.obj = NULL;
	tap_is_int(vlookup(c, "vf/5", "X-Device: b\r\n", NULL, &o, &fb, &v), CACHE_MISS, "b's variant: a miss");
	tap_ok(cache_fill_vary(fb).len == 11 && memcmp(cache_fill_vary(fb).p, "x-device:b\n", 11) == 0,
	       "its fill knows the variant it fetches");
	tap_is_int(vlookup(c, "vf/5", "X-Device: b\r\n", &b.w, &o, &fy, &vb), CACHE_WAIT,
		   "another b waits for it");
	tap_is_int(vlookup(c, "vf/5", "X-Device: c\r\n", &d.w, &o, &fc, &vd), CACHE_MISS,
		   "a c leads a fetch of its own instead");
	tap_is_int(vlookup(c, "vf/5", "X-Device: c\r\n", &a.w, &o, &fy, &va), CACHE_WAIT,
		   "and a second c waits on that one");
	vfill(fc, &vd, VDEV, "C", NOW);
	tap_ok(a.woken == 1 && a.obj != NULL && iov_is(cache_obj_body(a.obj), "C") && b.woken == 0,
	       "c's fetch wakes c's waiter only");
	vfill(fb, &v, VDEV, "B", NOW);
	tap_ok(b.woken == 1 && b.obj != NULL && iov_is(cache_obj_body(b.obj), "B")
	       && vhit(c, "vf/5", "X-Device: b\r\n", "B") && vhit(c, "vf/5", "X-Device: c\r\n", "C"),
	       "b's fetch wakes b's, and both variants are stored");
	cache_obj_release(a.obj);
	cache_obj_release(b.obj);
	cache_free(c);
}

/* ---- fills that end badly, and framings -------------------------------- */

static void test_fills(void)
{
	struct cache *c = mk(1 << 20, 1000, 1, CACHE_POLICY_DEFAULT);
	struct wake_rec a = { { rec_wake, NULL, NULL, NULL, NULL, 0, 0 }, NULL, 0 };
	struct cache_req r;
	struct cache_obj *o;
	struct cache_fill *f, *f2;
	struct resp rs;
	struct cache_key k;
	static const char ck[] = "5\r\nhello\r\n6;x=y\r\n world\r\n0\r\nT: v\r\n\r\n";
	size_t i;
	char big[600];

	memset(big, 'x', sizeof(big));
	rq(c, &r, "f/big", 0, 0, NOW);
	cache_lookup(c, &r, NULL, &o, &f);
	cache_lookup(c, &r, &a.w, &o, &f2);
	tap_is_int(fill_all(f, "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 1001\r\n\r\n",
			    NULL, 0, 0, NOW), -1, "Content-Length over max_object: not stored");
	tap_ok(a.woken == 1 && a.obj == NULL, "its waiter woken with NULL");

	a.woken = 0;
	cache_lookup(c, &r, NULL, &o, &f);
	cache_lookup(c, &r, &a.w, &o, &f2);
	mkresp(&rs, "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nTransfer-Encoding: chunked\r\n\r\n", 0, NOW);
	tap_is_int(cache_fill_begin(f, &rs.m, &rs.meta, "b", 1), 0, "chunked: begun");
	tap_is_int(cache_fill_body(f, "258\r\n", 5), 0, "a 600-byte chunk announced");
	tap_is_int(cache_fill_body(f, big, 600), 0, "600 bytes stored");
	tap_is_int(cache_fill_body(f, "\r\n258\r\n", 7), 0, "another 600 announced");
	tap_is_int(cache_fill_body(f, big, 600), -1, "growing past max_object: dropped");
	tap_ok(a.woken == 1 && a.obj == NULL, "its waiter woken with NULL");
	tap_is_int(get(c, "f/big", 0, 0, NOW, NULL), CACHE_MISS, "nothing stored, no fetch left");

	rq(c, &r, "f/ck", 0, 0, NOW);
	cache_lookup(c, &r, NULL, &o, &f);
	mkresp(&rs, "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nTransfer-Encoding: chunked\r\n\r\n", 0, NOW);
	cache_fill_begin(f, &rs.m, &rs.meta, "b", 1);
	for (i = 0; i + 1 < sizeof(ck); i++)
		cache_fill_body(f, ck + i, 1);
	tap_is_int(cache_fill_done(f), 0, "a chunked body fed a byte at a time completes");
	get(c, "f/ck", 0, 0, NOW, &o);
	tap_ok(o != NULL && iov_is(cache_obj_body(o), "hello world")
	       && iov_is(cache_obj_head(o), "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\n"
			 "Content-Length: 11\r\n"),
	       "stored de-chunked, with a Content-Length");
	cache_obj_release(o);

	rq(c, &r, "f/short", 0, 0, NOW);
	cache_lookup(c, &r, NULL, &o, &f);
	cache_lookup(c, &r, &a.w, &o, &f2);
	a.woken = 0;
	mkresp(&rs, "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 10\r\n\r\n", 0, NOW);
	cache_fill_begin(f, &rs.m, &rs.meta, "b", 1);
	cache_fill_body(f, "12345", 5);
	tap_is_int(cache_fill_done(f), -1, "a short body: done fails");
	tap_ok(a.woken == 1 && a.obj == NULL, "its waiter woken with NULL");

	rq(c, &r, "f/close", 0, 0, NOW);
	cache_lookup(c, &r, NULL, &o, &f);
	snprintf(rs.buf, sizeof(rs.buf), "HTTP/1.0 200 OK\r\nCache-Control: max-age=60\r\n\r\n");
	http1_msg_init(&rs.m);
	http1_parse_response(&rs.m, rs.h, rs.buf, strlen(rs.buf), &lim, HTTP1_M_GET);
	tap_is_int(rs.m.framing, HTTP1_BODY_CLOSE, "a body until close");
	cache_fill_begin(f, &rs.m, &rs.meta, "b", 1);
	cache_fill_body(f, "abc", 3);
	cache_fill_body(f, "def", 3);
	tap_is_int(cache_fill_done(f), 0, "complete at the close");
	get(c, "f/close", 0, 0, NOW, &o);
	tap_ok(o != NULL && iov_is(cache_obj_body(o), "abcdef")
	       && iov_is(cache_obj_head(o), "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\n"
			 "Content-Length: 6\r\n"), "stored with a Content-Length");
	cache_obj_release(o);

	rq(c, &r, "f/204", 0, 0, NOW);
	cache_lookup(c, &r, NULL, &o, &f);
	fill_all(f, "HTTP/1.1 204 No Content\r\nCache-Control: max-age=60\r\n\r\n", NULL, 0, 0, NOW);
	get(c, "f/204", 0, 0, NOW, &o);
	tap_ok(o != NULL && iov_is(cache_obj_head(o), "HTTP/1.1 204 No Content\r\n"
				   "Cache-Control: max-age=60\r\n"), "204: no Content-Length line");
	cache_obj_release(o);

	/* invalidated while in flight: the waiter gets it, nothing is kept */
	rq(c, &r, "f/inv", 0, 0, NOW);
	cache_lookup(c, &r, NULL, &o, &f);
	cache_lookup(c, &r, &a.w, &o, &f2);
	a.woken = 0;
	cache_key_init(c, &k, "f/inv", 5);
	cache_invalidate(c, &k);
	fill_all(f, "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 1\r\n\r\n", "i", 1, 0, NOW);
	tap_ok(a.woken == 1 && a.obj != NULL, "invalidated in flight: the waiter still gets it");
	cache_obj_release(a.obj);
	tap_is_int(get(c, "f/inv", 0, 0, NOW, NULL), CACHE_MISS, "but it was not stored");
	cache_free(c);
}

/* Not storable: waiters get NULL; where some queued, the key is then
 * known uncacheable and requests stop queueing behind each other. */
static void test_uncacheable(void)
{
	struct cache *c = mk(1 << 20, 1 << 20, 1, CACHE_POLICY_DEFAULT);
	struct wake_rec a = { { rec_wake, NULL, NULL, NULL, NULL, 0, 0 }, NULL, 0 };
	struct cache_req r;
	struct cache_obj *o;
	struct cache_fill *f, *f2;
	static const char priv[] = "HTTP/1.1 200 OK\r\nCache-Control: private\r\nContent-Length: 0\r\n\r\n";

	rq(c, &r, "u/1", 0, 0, NOW);
	cache_lookup(c, &r, NULL, &o, &f);
	tap_is_int(fill_all(f, priv, NULL, 0, 0, NOW), -1, "private, nobody waiting: begin refuses");
	cache_lookup(c, &r, NULL, &o, &f);
	tap_is_int(cache_lookup(c, &r, &a.w, &o, &f2), CACHE_WAIT, "no marker: the next ones queue");
	tap_is_int(fill_all(f, priv, NULL, 0, 0, NOW), -1, "private again");
	tap_ok(a.woken == 1 && a.obj == NULL, "the waiter woken with NULL");
	tap_is_int(cache_lookup(c, &r, &a.w, &o, &f), CACHE_MISS, "now known uncacheable: a miss");
	tap_is_int(cache_lookup(c, &r, &a.w, &o, &f2), CACHE_MISS, "and another at once: a miss, no queue");
	cache_fill_abort(f2);
	cache_fill_abort(f);
	r.now = NOW + 61;
	cache_lookup(c, &r, NULL, &o, &f);
	tap_is_int(cache_lookup(c, &r, &a.w, &o, &f2), CACHE_WAIT,
		   "a minute later the marker has expired: requests queue again");
	cache_wait_cancel(c, &a.w);
	tap_is_int(fill_all(f, "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 1\r\n\r\n",
			    "c", 1, 0, NOW + 61), 0, "the URL turns cacheable");
	tap_ok(hits(c, "u/1", NOW + 61), "and is stored over the marker");

	/* a copy within its stale-if-error window is never displaced */
	tap_is_int(put(c, "u/sie", 4, 's', "Cache-Control: max-age=1, stale-if-error=60\r\n", 0, NOW), 0,
		   "an object with stale-if-error stored");
	rq(c, &r, "u/sie", CACHE_L_KEEP_STALE, 0, NOW + 10);
	cache_lookup(c, &r, NULL, &o, &f);
	cache_obj_release(o);
	a.woken = 0;
	tap_is_int(cache_lookup(c, &r, &a.w, &o, &f2), CACHE_WAIT, "expired: the next one waits");
	cache_obj_release(o);
	tap_is_int(fill_all(f, priv, NULL, 0, 0, NOW + 10), -1, "the fetch answers private");
	tap_ok(a.woken == 1 && a.obj == NULL, "its waiter woken with NULL");
	tap_is_int(cache_lookup(c, &r, &a.w, &o, &f), CACHE_MISS, "the next request leads a fetch");
	tap_ok(o != NULL && iov_is(cache_obj_body(o), "ssss"),
	       "... and still has the stale-if-error copy to answer with: no marker unlinked it");
	cache_obj_release(o);
	cache_fill_abort(f);
	cache_free(c);
}

/* A fill of key begun with the response head resp, and its hold. */
static struct cache_obj *hold_fill(struct cache *c, const char *key, const char *resp,
				   struct cache_fill **f)
{
	struct cache_req r;
	struct cache_obj *o;
	struct resp rs;

	rq(c, &r, key, 0, 0, NOW);
	cache_lookup(c, &r, NULL, &o, f);
	mkresp(&rs, resp, 0, NOW);
	cache_fill_begin(*f, &rs.m, &rs.meta, "b", 1);
	return cache_fill_hold(*f);
}

/* The leader's hold on the object it fills: the bytes stay put and valid
 * whatever becomes of the fill, of known length or not. */
static void test_hold(void)
{
	struct cache *c = mk(1 << 20, 1 << 16, 1, CACHE_POLICY_DEFAULT);
	struct cache_obj *h, *g;
	struct cache_fill *f;
	struct iovec b;
	const char *base;

	h = hold_fill(c, "h/1", "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 10\r\n\r\n", &f);
	tap_ok(h != NULL, "a Content-Length fill can be held");
	cache_fill_body(f, "01234", 5);
	base = cache_obj_body(h).iov_base;
	cache_fill_body(f, "56789", 5);
	b = cache_obj_body(h);
	tap_ok(b.iov_base == base && iov_is(b, "0123456789"), "its body fills in place");
	cache_fill_done(f);
	tap_is_int(get(c, "h/1", 0, 0, NOW, &g), CACHE_HIT, "stored");
	tap_ok(g == h, "... the held object itself");
	cache_obj_release(g);
	cache_obj_release(h);

	h = hold_fill(c, "h/2", "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 10\r\n\r\n", &f);
	cache_fill_body(f, "abc", 3);
	cache_fill_abort(f);
	tap_ok(iov_is(cache_obj_body(h), "abc"), "an aborted fill's held bytes stay valid");
	cache_obj_release(h);
	tap_is_int(get(c, "h/2", 0, 0, NOW, NULL), CACHE_MISS, "and nothing was stored");

	h = hold_fill(c, "h/3", "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nTransfer-Encoding: chunked\r\n\r\n", &f);
	tap_ok(h != NULL, "a chunked fill can be held");
	{
		static char big[40000];
		size_t i;

		for (i = 0; i < sizeof(big); i++)
			big[i] = (char)('a' + i % 26);
		/* held, it is fed decoded, and never moves */
		cache_fill_body(f, big, 100);
		base = cache_obj_body(h).iov_base;
		tap_is_int(cache_fill_body(f, big + 100, sizeof(big) - 100), 0,
			   "... past the first room a growing object gets");
		b = cache_obj_body(h);
		tap_ok(b.iov_base == base && b.iov_len == sizeof(big)
		       && memcmp(b.iov_base, big, sizeof(big)) == 0, "... its body fills in place, decoded");
		cache_fill_done(f);
		tap_is_int(get(c, "h/3", 0, 0, NOW, &g), CACHE_HIT, "stored");
		b = cache_obj_body(g);
		tap_ok(g != h && b.iov_len == sizeof(big) && memcmp(b.iov_base, big, sizeof(big)) == 0,
		       "... a copy trimmed to its body, the held one still the leader's");
		tap_ok(cache_obj_charge(g) < sizeof(big) + 2048, "... charged for what it uses, not max_object");
		tap_ok(memcmp(cache_obj_body(h).iov_base, big, sizeof(big)) == 0, "... the held bytes stay valid");
		cache_obj_release(g);
		cache_obj_release(h);

		h = hold_fill(c, "h/4", "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nTransfer-Encoding: chunked\r\n\r\n", &f);
		cache_fill_body(f, big, sizeof(big));
		tap_is_int(cache_fill_body(f, big, sizeof(big)), -1, "a held chunked fill past max_object is dropped");
		tap_ok(cache_obj_body(h).iov_len == sizeof(big)
		       && memcmp(cache_obj_body(h).iov_base, big, sizeof(big)) == 0,
		       "... its held bytes stay valid");
		cache_obj_release(h);
		tap_is_int(get(c, "h/4", 0, 0, NOW, NULL), CACHE_MISS, "... and nothing was stored");
	}
	cache_free(c);
}

/* ---- coalescing with threads ------------------------------------------- */

#define CO_THREADS 8
#define CO_BODY 3000

enum co_mode { CO_DONE, CO_ABORT, CO_UNCACHEABLE };

struct co_round {
	struct cache *c;
	char key[32];
	enum co_mode mode;
	pthread_barrier_t bar;
	uint64_t coalesced0;            /* the counter before the round */
	_Atomic int leaders, waiters, others;
};

struct co_thread {
	struct co_round *rd;
	struct wake_rec wr;
	bool waited, good;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void co_lead(struct co_round *rd, struct cache_fill *f)
{
	static char body[CO_BODY];
	double end = now_s() + 10;

	/* hold the fetch until every other thread is queued on it */
	while (stats(rd->c).coalesced < rd->coalesced0 + CO_THREADS - 1 && now_s() < end)
		sched_yield();
	memset(body, 'c', sizeof(body));
	if (rd->mode == CO_ABORT)
		cache_fill_abort(f);
	else
		fill_all(f, rd->mode == CO_DONE
			 ? "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 3000\r\n\r\n"
			 : "HTTP/1.1 200 OK\r\nCache-Control: no-store\r\nContent-Length: 3000\r\n\r\n",
			 body, sizeof(body), 0, NOW);
}

static void *co_run(void *arg)
{
	struct co_thread *t = arg;
	struct co_round *rd = t->rd;
	struct cache_req r;
	struct cache_obj *o;
	struct cache_fill *f;
	double end;

	rq(rd->c, &r, rd->key, 0, 0, NOW);
	pthread_barrier_wait(&rd->bar);
	switch (cache_lookup(rd->c, &r, &t->wr.w, &o, &f)) {
	case CACHE_MISS:
		atomic_fetch_add(&rd->leaders, 1);
		co_lead(rd, f);
		break;
	case CACHE_WAIT:
		atomic_fetch_add(&rd->waiters, 1);
		t->waited = true;
		end = now_s() + 10;
		while (atomic_load(&t->wr.woken) == 0 && now_s() < end)
			sched_yield();
		o = t->wr.obj;
		t->good = rd->mode == CO_DONE
			  ? o != NULL && cache_obj_body(o).iov_len == CO_BODY
			    && ((char *)cache_obj_body(o).iov_base)[CO_BODY - 1] == 'c'
			  : o == NULL;
		cache_obj_release(o);
		break;
	default:
		atomic_fetch_add(&rd->others, 1);
		cache_obj_release(o);
		break;
	}
	return NULL;
}

static void test_coalescing(enum co_mode mode, const char *what)
{
	struct cache *c = mk(1 << 22, 1 << 20, 4, CACHE_POLICY_DEFAULT);
	struct co_thread t[CO_THREADS];
	pthread_t th[CO_THREADS];
	unsigned round, i, bad_counts = 0, bad_wakes = 0, wrong = 0;

	for (round = 0; round < 20; round++) {
		struct co_round rd;

		memset(&rd, 0, sizeof(rd));
		rd.c = c;
		rd.mode = mode;
		rd.coalesced0 = stats(c).coalesced;
		snprintf(rd.key, sizeof(rd.key), "co/%d/%u", (int)mode, round);
		pthread_barrier_init(&rd.bar, NULL, CO_THREADS);
		for (i = 0; i < CO_THREADS; i++) {
			memset(&t[i], 0, sizeof(t[i]));
			t[i].rd = &rd;
			t[i].wr.w.wake = rec_wake;
			pthread_create(&th[i], NULL, co_run, &t[i]);
		}
		for (i = 0; i < CO_THREADS; i++)
			pthread_join(th[i], NULL);
		bad_counts += rd.leaders != 1 || rd.waiters != CO_THREADS - 1 || rd.others != 0;
		for (i = 0; i < CO_THREADS; i++) {
			bad_wakes += t[i].waited && atomic_load(&t[i].wr.woken) != 1;
			wrong += t[i].waited && !t[i].good;
		}
		pthread_barrier_destroy(&rd.bar);
	}
	tap_is_int(bad_counts, 0, "%s: 20 rounds of 8 threads, each exactly 1 leader and 7 waiters", what);
	tap_is_int(bad_wakes, 0, "%s: every waiter woken exactly once", what);
	tap_is_int(wrong, 0, "%s: %s", what, mode == CO_DONE
		   ? "every waiter got the whole object" : "every waiter got NULL");
	cache_free(c);
}

/* A waiter cancels while the leader ends the fill on another thread:
 * exactly one of "wake called" and "cancel returned true", every time. */
struct race {
	struct cache *c;
	pthread_barrier_t bar;
	struct wake_rec wr;
	char key[32];
	bool cancelled, waited;
	unsigned spin;
};

static void race_spin(unsigned n)
{
	volatile unsigned i;

	for (i = 0; i < n; i++)
		;
}

#define RACE_ITERS 3000

static void *race_waiter(void *arg)
{
	struct race *rc = arg;
	struct cache_req r;
	struct cache_obj *o;
	struct cache_fill *f;
	unsigned i;

	for (i = 0; i < RACE_ITERS; i++) {
		pthread_barrier_wait(&rc->bar);         /* the fetch exists */
		rq(rc->c, &r, rc->key, 0, 0, NOW);
		rc->waited = cache_lookup(rc->c, &r, &rc->wr.w, &o, &f) == CACHE_WAIT;
		pthread_barrier_wait(&rc->bar);         /* both race now */
		race_spin(rc->spin);
		rc->cancelled = rc->waited && cache_wait_cancel(rc->c, &rc->wr.w);
		if (rc->waited && !rc->cancelled) {
			while (atomic_load(&rc->wr.woken) == 0)
				sched_yield();
			cache_obj_release(rc->wr.obj);
		}
		pthread_barrier_wait(&rc->bar);         /* the main thread checks */
		pthread_barrier_wait(&rc->bar);         /* and resets */
	}
	return NULL;
}

static void test_cancel_race(void)
{
	static struct race rc;
	struct cache_req r;
	struct cache_obj *o;
	struct cache_fill *f;
	pthread_t th;
	unsigned i, bad = 0, nwait = 0, ncancel = 0, nwoken = 0;

	rc.c = mk(1 << 22, 1 << 20, 4, CACHE_POLICY_DEFAULT);
	rc.wr.w.wake = rec_wake;
	pthread_barrier_init(&rc.bar, NULL, 2);
	pthread_create(&th, NULL, race_waiter, &rc);
	for (i = 0; i < RACE_ITERS; i++) {
		snprintf(rc.key, sizeof(rc.key), "race/%u", i);
		rc.spin = (i * 7919u) % 4000;
		rq(rc.c, &r, rc.key, 0, 0, NOW);
		cache_lookup(rc.c, &r, NULL, &o, &f);
		pthread_barrier_wait(&rc.bar);
		pthread_barrier_wait(&rc.bar);
		race_spin((i * 104729u) % 4000);
		if (i % 2)
			cache_fill_abort(f);
		else
			fill_all(f, "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 1\r\n\r\n",
				 "r", 1, 0, NOW);
		pthread_barrier_wait(&rc.bar);
		nwait += rc.waited;
		ncancel += rc.cancelled;
		nwoken += atomic_load(&rc.wr.woken) == 1;
		bad += !rc.waited || (rc.cancelled ? 1 : 0) + atomic_load(&rc.wr.woken) != 1;
		atomic_store(&rc.wr.woken, 0);
		rc.wr.obj = NULL;
		pthread_barrier_wait(&rc.bar);
	}
	pthread_join(th, NULL);
	tap_is_int(nwait, RACE_ITERS, "cancel race: the waiter queued %u times", RACE_ITERS);
	tap_is_int(bad, 0, "exactly one of wake and cancel each time (%u cancelled, %u woken)",
		   ncancel, nwoken);
	tap_ok(ncancel > 0 && nwoken > 0, "both outcomes happened");
	pthread_barrier_destroy(&rc.bar);
	cache_free(rc.c);
}

/* cache_peek: what is stored, fresh or not, a fill in flight; and that
 * looking counts nothing (the admin listener's /ring?url=). */
static void test_peek(void)
{
	struct cache *c = mk(1 << 20, 1 << 16, 1, CACHE_POLICY_DEFAULT);
	struct cache_stats before, after;
	struct cache_peek pk;
	struct cache_key k;
	struct cache_req r;
	struct cache_obj *o;
	struct cache_fill *f;

	if (!tap_ok(c != NULL, "peek: cache made"))
		return;
	cache_key_init(c, &k, "h/p.jpg", 7);
	cache_peek(c, &k, 1000, &pk);
	tap_ok(pk.objects == 0 && !pk.filling && pk.fresh == 0, "peek: nothing stored");
	tap_ok(put(c, "h/p.jpg", 100, 'p', NULL, 0, 1000) == 0, "peek: stored with max-age=60");
	before = stats(c);
	cache_peek(c, &k, 1010, &pk);
	after = stats(c);
	tap_ok(pk.objects == 1 && pk.fresh == 1 && pk.ttl == 50, "peek: one fresh object, 50 s left (ttl %lld)",
	       (long long)pk.ttl);
	tap_ok(memcmp(&before, &after, sizeof(before)) == 0, "peek: no counter moved (no hit, no miss)");
	cache_peek(c, &k, 1070, &pk);
	tap_ok(pk.objects == 1 && pk.fresh == 0 && pk.ttl == -10, "peek: stale 10 s after its lifetime");
	rq(c, &r, "h/q.jpg", 0, 0, 1000);
	tap_is_int(cache_lookup(c, &r, NULL, &o, &f), CACHE_MISS, "peek: a miss leads a fill");
	cache_key_init(c, &k, "h/q.jpg", 7);
	cache_peek(c, &k, 1000, &pk);
	tap_ok(pk.objects == 0 && pk.filling, "peek: the fill in flight is seen");
	cache_fill_abort(f);
	cache_free(c);
}

/* A backend's response head (a 304, a 201), parsed into nm (its lines
 * point into nm->buf). */
static void parse304(struct resp *nm, const char *head)
{
	snprintf(nm->buf, sizeof(nm->buf), "%s", head);
	http1_msg_init(&nm->m);
	http1_parse_response(&nm->m, nm->h, nm->buf, strlen(nm->buf), &lim, HTTP1_M_GET);
}

/* Revalidation: a 304 to the conditional fetch of an expired object
 * stores its body under the merged head with the 304's lifetime. */
static void test_not_modified(void)
{
	struct cache *c = mk(1 << 20, 1 << 20, 1, CACHE_POLICY_DEFAULT);
	struct cachectl_req cr = { .kind = CACHECTL_LOOKUP, .max_age = -1 };
	struct cache_obj *old = NULL, *o = NULL;
	struct cache_fill *f = NULL;
	struct cache_req r;
	struct resp nm;
	struct iovec h;
	int rc;

	put(c, "nm/a", 10, 'a', "Cache-Control: max-age=10\r\nETag: \"v1\"\r\nX-Kept: yes\r\n", 0, NOW);
	rq(c, &r, "nm/a", CACHE_L_KEEP_STALE, 0, NOW + 20);
	tap_is_int(cache_lookup(c, &r, NULL, &old, &f), CACHE_MISS, "expired at 20 s: a miss, leading a fill");
	tap_ok(old != NULL && cache_obj_etag(old).len == 4, "the expired object with its ETag");
	parse304(&nm, "HTTP/1.1 304 Not Modified\r\nCache-Control: max-age=100\r\n"
		 "ETag: \"v1\"\r\nContent-Length: 999\r\n\r\n");
	rc = cache_fill_not_modified(f, old, &nm.m, &cr, NOW + 20, NOW + 20, NOW + 20, 0, &o);
	tap_is_int(rc, 0, "cache_fill_not_modified stores");
	tap_ok(o != NULL && iov_is(cache_obj_body(o), "aaaaaaaaaa") && cache_obj_status(o) == 200,
	       "the new object: the stored body, status 200");
	h = o ? cache_obj_head(o) : (struct iovec){ NULL, 0 };
	tap_ok(h.iov_base && memmem(h.iov_base, h.iov_len, "max-age=100", 11) &&
	       !memmem(h.iov_base, h.iov_len, "max-age=10\r", 12) &&
	       memmem(h.iov_base, h.iov_len, "X-Kept: yes", 11) &&
	       memmem(h.iov_base, h.iov_len, "Content-Length: 10", 18) &&
	       !memmem(h.iov_base, h.iov_len, "999", 3),
	       "its head: the 304's Cache-Control replaces the stored one, other lines kept, "
	       "the body's Content-Length");
	tap_ok(o && cache_obj_ttl(o, NOW + 20) == 100, "the 304's lifetime: 100 s from now");
	tap_ok(hits(c, "nm/a", NOW + 119) && !hits(c, "nm/a", NOW + 120), "a hit until 120 s, not after");
	cache_obj_release(o);
	cache_obj_release(old);
	cache_free(c);
}

/* no-cache: stored, never a hit (each use a revalidating miss that hands
 * the object out); no-cache="..." fields left out of the stored head; a
 * 304 leaves the stored ETag, Content-Encoding, Content-MD5 and
 * Content-Range as they were. */
static void test_rules(void)
{
	struct cache *c = mk(1 << 20, 1 << 20, 1, CACHE_POLICY_DEFAULT);
	struct cachectl_req cr = { .kind = CACHECTL_LOOKUP, .max_age = -1 };
	struct cache_obj *old = NULL, *o = NULL;
	struct cache_fill *f = NULL;
	struct cache_req r;
	struct resp nm;
	struct iovec h;

	put(c, "rule/nc", 4, 'n', "Cache-Control: no-cache, max-age=3600\r\nETag: \"n\"\r\n", 0, NOW);
	tap_is_int(get(c, "rule/nc", 0, 0, NOW, NULL), CACHE_MISS, "no-cache, fresh for an hour: still a miss");
	rq(c, &r, "rule/nc", CACHE_L_KEEP_STALE | CACHE_L_STALE, 0, NOW);
	tap_is_int(cache_lookup(c, &r, NULL, &old, &f), CACHE_MISS, "... with stale windows allowed too");
	tap_ok(old != NULL && cache_obj_etag(old).len == 3, "... handing out the stored object to revalidate");
	tap_ok(old != NULL && !cache_obj_stale_if_error(old, NOW), "... which never answers a failure");
	cache_fill_abort(f);
	cache_obj_release(old);
	old = NULL;

	put(c, "rule/omit", 4, 'o', "Cache-Control: no-cache=\"X-A, x-b\", max-age=60\r\nX-A: 1\r\n"
	    "X-B: 2\r\nX-C: 3\r\n", 0, NOW);
	tap_is_int(get(c, "rule/omit", 0, 0, NOW, &o), CACHE_HIT, "no-cache=\"X-A, x-b\": stored, a hit");
	h = o ? cache_obj_head(o) : (struct iovec){ NULL, 0 };
	tap_ok(h.iov_base && !memmem(h.iov_base, h.iov_len, "X-A:", 4) && !memmem(h.iov_base, h.iov_len, "X-B:", 4)
	       && memmem(h.iov_base, h.iov_len, "X-C: 3", 6),
	       "... without the lines it names (any case), the others kept");
	cache_obj_release(o);
	o = NULL;

	put(c, "rule/304", 4, 'u', "Cache-Control: max-age=10\r\nETag: \"v1\"\r\nContent-Encoding: gzip\r\n"
	    "Content-MD5: AAAA\r\nX-New: old\r\n", 0, NOW);
	rq(c, &r, "rule/304", CACHE_L_KEEP_STALE, 0, NOW + 20);
	cache_lookup(c, &r, NULL, &old, &f);
	parse304(&nm, "HTTP/1.1 304 Not Modified\r\nCache-Control: max-age=100\r\n"
		 "ETag: \"v2\"\r\nContent-Encoding: br\r\nContent-MD5: BBBB\r\nX-New: new\r\n\r\n");
	tap_is_int(old && f ? cache_fill_not_modified(f, old, &nm.m, &cr, NOW + 20, NOW + 20, NOW + 20, 0, &o) : -1, 0,
		   "a 304 with new validators and codings: stored");
	h = o ? cache_obj_head(o) : (struct iovec){ NULL, 0 };
	tap_ok(h.iov_base && memmem(h.iov_base, h.iov_len, "ETag: \"v1\"", 10) &&
	       memmem(h.iov_base, h.iov_len, "Content-Encoding: gzip", 22) &&
	       memmem(h.iov_base, h.iov_len, "Content-MD5: AAAA", 17) &&
	       memmem(h.iov_base, h.iov_len, "X-New: new", 10) && !memmem(h.iov_base, h.iov_len, "br\r", 3),
	       "... the stored ETag, Content-Encoding and Content-MD5 stay; X-New is updated");
	tap_ok(o && cache_obj_etag(o).len == 4 && memcmp(cache_obj_etag(o).p, "\"v1\"", 4) == 0,
	       "... and the object's validator is still \"v1\"");
	cache_obj_release(o);
	cache_obj_release(old);

	put(c, "h/loc", 4, 'l', NULL, 0, NOW);
	put(c, "h/t/cl", 4, 'c', NULL, 0, NOW);
	put(c, "other/x", 4, 'x', NULL, 0, NOW);
	parse304(&nm, "HTTP/1.1 201 Created\r\nLocation: /loc\r\nContent-Location: cl\r\n"
		 "Location: http://other/x\r\nContent-Length: 0\r\n\r\n");
	tap_is_int(cache_invalidate_locations(c, (struct http1_str){ "h", 1 }, (struct http1_str){ "/t/form", 7 },
					      &nm.m), 2,
		   "Location /loc and Content-Location cl of a POST to h/t/form: both removed");
	tap_ok(!hits(c, "h/loc", NOW) && !hits(c, "h/t/cl", NOW) && hits(c, "other/x", NOW),
	       "... and the Location on another host is not");
	cache_free(c);
}

/* A waiter that records its wake-up (single thread). */
struct mu_waiter {
	struct cache_waiter w;
	int woken;
	struct cache_obj *obj;
};

static void mu_wake(struct cache_waiter *w, struct cache_obj *obj)
{
	struct mu_waiter *m = (struct mu_waiter *)w;

	m->woken++;
	m->obj = obj;
}

/* min_uses 2: a key's first miss is not stored (cache_fill_want says so
 * before the response is even analysed), its second is; a first miss
 * others wait for is stored, and wakes them with the object. */
static void test_min_uses(void)
{
	struct cache_params p = { .size = 1 << 20, .max_object = 1 << 16, .shards = 1,
				  .seed = 42, .min_uses = 2 };
	const char *head = "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 5\r\n\r\n";
	struct mu_waiter mw = { .w = { .wake = mu_wake } };
	struct cache_req r;
	struct cache_obj *o;
	struct cache_fill *f, *f2;
	struct cache_stats s;
	char err[128];
	struct cache *c = cache_new(&p, err, sizeof(err));

	rq(c, &r, "h/once", 0, 0, NOW);
	tap_is_int(cache_lookup(c, &r, NULL, &o, &f), CACHE_MISS, "min_uses 2: a first request misses");
	tap_is_int(cache_fill_want(f), -1, "... and its fill is not wanted: nobody waits, first use");
	tap_is_int(get(c, "h/once", 0, 0, NOW, NULL), CACHE_MISS, "so nothing is stored: a one-hit wonder costs no copy");
	/* the get() above was the key's second request: its fill would store */
	rq(c, &r, "h/once", 0, 0, NOW);
	tap_is_int(cache_lookup(c, &r, NULL, &o, &f), CACHE_MISS, "a third request misses too");
	tap_is_int(cache_fill_want(f), 0, "... but the key was seen before: its fill goes on");
	tap_is_int(fill_all(f, head, "hello", 5, 0, NOW), 0, "and completes");
	tap_ok(hits(c, "h/once", NOW), "the next request is a hit");

	rq(c, &r, "h/viral", 0, 0, NOW);
	tap_is_int(cache_lookup(c, &r, NULL, &o, &f), CACHE_MISS, "a viral key's first request leads");
	tap_is_int(cache_lookup(c, &r, &mw.w, &o, &f2), CACHE_WAIT, "a concurrent one waits on its fetch");
	tap_is_int(cache_fill_want(f), 0, "a first use with a waiter is wanted");
	tap_is_int(fill_all(f, head, "viral", 5, 0, NOW), 0, "the one fetch completes");
	tap_ok(mw.woken == 1 && mw.obj != NULL && cache_obj_body(mw.obj).iov_len == 5,
	       "the waiter is woken once with the object");
	cache_obj_release(mw.obj);
	tap_ok(hits(c, "h/viral", NOW), "and it is stored: the burst's next request is a hit");

	s = stats(c);
	tap_ok(s.below_min_uses == 1 && s.stores == 2, "stats: 1 miss not stored below min_uses, 2 stores");
	cache_configure(c, 1 << 20, 1 << 16, 1, 0);
	rq(c, &r, "h/new", 0, 0, NOW);
	tap_is_int(cache_lookup(c, &r, NULL, &o, &f), CACHE_MISS, "min_uses 1 (reloaded): a first request misses");
	tap_is_int(cache_fill_want(f), 0, "... and its fill is wanted at once");
	cache_fill_abort(f);
	cache_free(c);
}

/* Request key n times without storing it (the sketch counts each). */
static void seen(struct cache *c, const char *key, unsigned n)
{
	while (n-- > 0)
		get(c, key, 0, 0, NOW, NULL);
}

/* TinyLFU's comparison at the fetch's start: in a full cache whose main
 * space holds keys requested often, a key seen twice is refused by
 * cache_fill_want (before its response is read, so its body is never
 * copied), one seen more often than the victim is stored, and a refused
 * key with requests waiting on its fetch is stored all the same. */
static void door_admission(enum cache_policy policy, const char *name)
{
	struct cache_params p = { .size = 24 * 4400, .max_object = 1 << 16, .shards = 1,
				  .policy = policy, .seed = 42, .min_uses = 2 };
	char head[128], err[128], key[32], *body = malloc(4096);
	struct mu_waiter mw = { .w = { .wake = mu_wake } };
	struct cache *c = cache_new(&p, err, sizeof(err));
	struct cache_fill *f, *f2;
	struct cache_obj *o;
	struct cache_req r;
	struct cache_stats st;
	unsigned i;

	memset(body, 'd', 4096);
	snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\n"
		 "Content-Length: 4096\r\n\r\n");
	for (i = 0; i < 40; i++) {
		snprintf(key, sizeof(key), "often/%u", i);
		seen(c, key, 6);
		put(c, key, 4096, 'o', NULL, 0, NOW);
	}
	st = stats(c);
	tap_ok(st.objects >= 18, "%s: a full cache of keys seen 7 times (%llu objects)", name,
	       (unsigned long long)st.objects);

	seen(c, "door/rare", 1);
	rq(c, &r, "door/rare", 0, 0, NOW);
	tap_is_int(cache_lookup(c, &r, NULL, &o, &f), CACHE_MISS, "%s: a key's second request misses", name);
	tap_is_int(cache_fill_want(f), -1, "%s: ... and is refused at the fetch's start", name);
	tap_is_int(stats(c).admissions_refused - st.admissions_refused, 1,
		   "%s: counted as an admission refused", name);
	tap_is_int(get(c, "door/rare", 0, 0, NOW, NULL), CACHE_MISS, "%s: nothing stored", name);

	seen(c, "door/often", 12);
	rq(c, &r, "door/often", 0, 0, NOW);
	tap_is_int(cache_lookup(c, &r, NULL, &o, &f), CACHE_MISS, "%s: a key seen 13 times misses", name);
	tap_is_int(cache_fill_want(f), 0, "%s: ... and ranks above the victim: its fill goes on", name);
	tap_is_int(fill_all(f, head, body, 4096, 0, NOW), 0, "%s: stored", name);
	tap_ok(hits(c, "door/often", NOW), "%s: and hit", name);

	seen(c, "door/burst", 1);
	rq(c, &r, "door/burst", 0, 0, NOW);
	tap_is_int(cache_lookup(c, &r, NULL, &o, &f), CACHE_MISS, "%s: a rare key's fetch leads", name);
	tap_is_int(cache_lookup(c, &r, &mw.w, &o, &f2), CACHE_WAIT, "%s: another request waits on it", name);
	tap_is_int(cache_fill_want(f), 0, "%s: with a waiter it is wanted", name);
	tap_is_int(fill_all(f, head, body, 4096, 0, NOW), 0, "%s: stored", name);
	tap_ok(mw.woken == 1 && mw.obj != NULL, "%s: the waiter gets the object", name);
	cache_obj_release(mw.obj);
	cache_free(c);

	/* the same with the comparison only at the small queue's end */
	p.late_admission = true;
	c = cache_new(&p, err, sizeof(err));
	for (i = 0; i < 40; i++) {
		snprintf(key, sizeof(key), "often/%u", i);
		seen(c, key, 6);
		put(c, key, 4096, 'o', NULL, 0, NOW);
	}
	seen(c, "door/rare", 1);
	rq(c, &r, "door/rare", 0, 0, NOW);
	cache_lookup(c, &r, NULL, &o, &f);
	tap_is_int(cache_fill_want(f), 0, "%s, late admission: the fill goes on (the test tells them apart)", name);
	cache_fill_abort(f);
	cache_free(c);
	free(body);
}

static void test_door_admission(void)
{
	door_admission(CACHE_POLICY_S3FIFO, "S3-FIFO");
	door_admission(CACHE_POLICY_WTINYLFU, "W-TinyLFU");
}

/* What the cache holds outside its objects counts too: the table's slots
 * and the sketch come out of size, and fills in flight together hold at
 * most size / 16 (one at a time always may). */
static void test_overhead(void)
{
	size_t size = 1 << 20, i;
	struct cache *c = mk(size, 1 << 20, 1, CACHE_POLICY_DEFAULT);
	const char *head = "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 3000\r\n\r\n";
	struct cache_fill *f1, *f2, *f3;
	struct cache_req r;
	struct cache_obj *o;
	struct resp rp;
	char key[32], body[3000];
	unsigned over = 0;

	for (i = 0; i < 2000; i++) {
		snprintf(key, sizeof(key), "ov/%zu", i);
		put(c, key, 1000, 'o', NULL, 0, NOW);
		over += stats(c).bytes > size - (16u << 10);
	}
	tap_is_int(over, 0, "2000 x 1 KB into 1 MiB: objects never take the table's slots' share (>= 16 KiB)");
	cache_free(c);

	c = mk(64 << 10, 1 << 20, 1, CACHE_POLICY_DEFAULT);
	memset(body, 'f', sizeof(body));
	mkresp(&rp, head, 0, NOW);
	rq(c, &r, "fl/1", 0, 0, NOW);
	cache_lookup(c, &r, NULL, &o, &f1);
	rq(c, &r, "fl/2", 0, 0, NOW);
	cache_lookup(c, &r, NULL, &o, &f2);
	rq(c, &r, "fl/3", 0, 0, NOW);
	cache_lookup(c, &r, NULL, &o, &f3);
	tap_is_int(cache_fill_begin(f1, &rp.m, &rp.meta, BACKEND, strlen(BACKEND)), 0,
		   "size 64 KiB: a fill of 3 KB begins");
	tap_is_int(cache_fill_begin(f2, &rp.m, &rp.meta, BACKEND, strlen(BACKEND)), -1,
		   "a second at once would pass size / 16: not stored (it streams)");
	tap_ok(cache_fill_body(f1, body, sizeof(body)) == 0 && cache_fill_done(f1) == 0, "the first completes");
	tap_is_int(cache_fill_begin(f3, &rp.m, &rp.meta, BACKEND, strlen(BACKEND)), 0,
		   "then another may begin");
	cache_fill_abort(f3);
	tap_ok(hits(c, "fl/1", NOW) && !hits(c, "fl/2", NOW), "the first is stored, the refused one not");
	cache_free(c);
}

/* ---- a worker's memo ---------------------------------------------------- */

/* A shared lookup of key whose hit memo m takes: the object, borrowed
 * (*slot), or NULL when it was no hit or m did not take it. */
static struct cache_obj *memo_take(struct cache *c, struct cache_memo *m, const char *key,
				   unsigned ae, int64_t now, unsigned *slot)
{
	struct cache_req r;
	struct cache_obj *o;
	struct cache_fill *f;

	rq(c, &r, key, 0, ae, now);
	if (cache_lookup(c, &r, NULL, &o, &f) != CACHE_HIT) {
		if (f != NULL)
			cache_fill_abort(f);
		cache_obj_release(o);
		return NULL;
	}
	if (cache_memo_adopt(m, &r, o, slot) < 0) {
		cache_obj_release(o);
		return NULL;
	}
	return o;
}

/* What the memo answers for key (flags, ae as in rq): the object (a
 * borrow, returned at once) or NULL. */
static struct cache_obj *memo_hit(struct cache_memo *m, const struct cache *c, const char *key,
				  unsigned flags, unsigned ae, int64_t now)
{
	struct cache_req r;
	struct cache_obj *o;
	unsigned slot;

	rq(c, &r, key, flags, ae, now);
	o = cache_memo_get(m, &r, &slot);
	if (o != NULL)
		cache_memo_put(m, slot);
	return o;
}

static char first_byte(const struct cache_obj *o)
{
	return o != NULL && cache_obj_body(o).iov_len ? ((const char *)cache_obj_body(o).iov_base)[0] : 0;
}

/* Stored with one body, then with another: the memo answers with the
 * one in the table, never with one that left it, and counts every hit. */
static void test_memo(void)
{
	struct cache *c = mk(1 << 20, 1 << 16, 1, CACHE_POLICY_DEFAULT);
	struct cache_memo *m = cache_memo_new(c), *m2 = cache_memo_new(c);
	struct cache_obj *o, *held;
	struct cache_req r;
	struct cache_key k;
	unsigned slot, i, n = 0;

	put(c, "mm/a", 100, 'A', NULL, 0, NOW);
	tap_ok(memo_hit(m, c, "mm/a", 0, 0, NOW) == NULL, "memo: empty at first");
	o = memo_take(c, m, "mm/a", 0, NOW, &slot);
	tap_ok(o != NULL && first_byte(o) == 'A', "a shared hit is taken by the memo");
	if (o != NULL)
		cache_memo_put(m, slot);
	for (i = 0; i < 40; i++)
		n += first_byte(memo_hit(m, c, "mm/a", 0, 0, NOW)) == 'A';
	tap_is_int(n, 40, "then the memo answers 40 hits with it");
	tap_is_int(stats(c).hits, 41, "hits: 1 shared + 40 from the memo, counted at once");
	tap_ok(memo_hit(m, c, "mm/a", 0, 0, NOW + 61) == NULL, "expired: not from the memo");
	tap_ok(memo_hit(m, c, "mm/a", CACHE_L_REFRESH, 0, NOW) == NULL
	       && memo_hit(m, c, "mm/a", CACHE_L_AUTH, 0, NOW) == NULL,
	       "a refresh or Authorization: not from the memo");
	rq(c, &r, "mm/a", 0, 0, NOW);
	r.max_age = 5;
	tap_ok(cache_memo_get(m, &r, &slot) == NULL, "a request max-age: not from the memo");
	tap_ok(memo_hit(m, c, "mm/b", 0, 0, NOW) == NULL, "another key: not from the memo");
	tap_is_int(stats(c).hits, 41, "none of those counted");

	/* purged while a request borrows it */
	rq(c, &r, "mm/a", 0, 0, NOW);
	held = cache_memo_get(m, &r, &slot);
	cache_key_init(c, &k, "mm/a", 4);
	tap_is_int(cache_invalidate(c, &k), 1, "purged");
	tap_ok(memo_hit(m, c, "mm/a", 0, 0, NOW) == NULL, "purged: the memo answers no more");
	tap_ok(first_byte(held) == 'A' && ((char *)cache_obj_body(held).iov_base)[99] == 'A',
	       "a request that borrowed it still reads the body");
	if (held != NULL)
		cache_memo_put(m, slot);
	tap_is_int(stats(c).hits, 42, "hits: the borrowed one counted");

	/* replaced by a newer response: a refresh stores over it */
	put(c, "mm/a", 100, 'B', NULL, 0, NOW);
	o = memo_take(c, m, "mm/a", 0, NOW, &slot);
	tap_ok(first_byte(o) == 'B', "stored again: the memo takes the new object");
	if (o != NULL)
		cache_memo_put(m, slot);
	o = memo_take(c, m2, "mm/a", 0, NOW, &slot);
	if (o != NULL)
		cache_memo_put(m2, slot);
	tap_ok(first_byte(memo_hit(m2, c, "mm/a", 0, 0, NOW)) == 'B', "a second memo holds it too");
	{
		struct cache_fill *f;

		rq(c, &r, "mm/a", CACHE_L_REFRESH, 0, NOW + 1);
		tap_is_int(cache_lookup(c, &r, NULL, &o, &f), CACHE_MISS, "a refresh fetches it anew");
		fill_all(f, "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 3\r\n\r\n",
			 "CCC", 3, 0, NOW + 1);
	}
	tap_ok(memo_hit(m, c, "mm/a", 0, 0, NOW + 1) == NULL && memo_hit(m2, c, "mm/a", 0, 0, NOW + 1) == NULL,
	       "replaced: neither memo answers with the old one");
	o = memo_take(c, m, "mm/a", 0, NOW + 1, &slot);
	tap_ok(first_byte(o) == 'C', "the shared path has the new one");
	if (o != NULL)
		cache_memo_put(m, slot);

	/* a variant of Accept-Encoding stored over it */
	put(c, "mm/v", 10, 'g', "Cache-Control: max-age=60\r\nVary: Accept-Encoding\r\n"
	    "Content-Encoding: gzip\r\n", CACHECTL_AE_GZIP, NOW);
	o = memo_take(c, m, "mm/v", CACHECTL_AE_GZIP, NOW, &slot);
	if (o != NULL)
		cache_memo_put(m, slot);
	tap_ok(first_byte(memo_hit(m, c, "mm/v", 0, CACHECTL_AE_GZIP, NOW)) == 'g'
	       && memo_hit(m, c, "mm/v", 0, 0, NOW) == NULL,
	       "Vary: Accept-Encoding: the memo answers its own coding only");
	put(c, "mm/v", 10, 'p', "Cache-Control: max-age=60\r\n", 0, NOW + 2);
	tap_ok(memo_hit(m, c, "mm/v", 0, CACHECTL_AE_GZIP, NOW + 2) == NULL,
	       "a response without Vary stored over the variant: not from the memo");

	/* a reload that configures the cache, then one that turns it off */
	o = memo_take(c, m, "mm/v", 0, NOW + 2, &slot);
	if (o != NULL)
		cache_memo_put(m, slot);
	tap_ok(memo_hit(m, c, "mm/v", 0, 0, NOW + 2) != NULL, "held again");
	cache_configure(c, 1 << 20, 1 << 16, 0, 0);
	tap_ok(memo_hit(m, c, "mm/v", 0, 0, NOW + 2) == NULL, "configured: the memo let it go");
	tap_ok(hits(c, "mm/v", NOW + 2), "(the cache still has it)");
	o = memo_take(c, m, "mm/v", 0, NOW + 2, &slot);
	if (o != NULL)
		cache_memo_put(m, slot);
	cache_configure(c, 0, 1 << 16, 0, 0);
	tap_ok(memo_hit(m, c, "mm/v", 0, 0, NOW + 2) == NULL, "resized to 0: not from the memo");
	n = (unsigned)stats(c).hits;
	cache_memo_free(m);
	cache_memo_free(m2);
	tap_is_int(stats(c).hits, n, "the memos' hits outlive them in the stats");
	cache_free(c);
}

/* Evicted, the memo answers no more; told of its hits, the shard keeps a
 * hot object that the LRU would have evicted. */
static void test_memo_policy(void)
{
	struct cache *c;
	struct cache_memo *m;
	struct cache_obj *o;
	unsigned cap = 0, i, slot;
	char key[32];

	/* how many objects fill the cache */
	c = mk(1 << 19, 1 << 16, 1, CACHE_POLICY_LRU);
	while (stats(c).evictions == 0 && cap < 1000) {
		snprintf(key, sizeof(key), "mp/x%u", cap++);
		put(c, key, 4000, 'x', NULL, 0, NOW);
	}
	cap--;                          /* the one that evicted */
	cache_free(c);

	c = mk(1 << 19, 1 << 16, 1, CACHE_POLICY_LRU);
	m = cache_memo_new(c);
	put(c, "mp/hot", 4000, 'h', NULL, 0, NOW);
	o = memo_take(c, m, "mp/hot", 0, NOW, &slot);
	if (o != NULL)
		cache_memo_put(m, slot);
	for (i = 1; i < cap; i++) {
		snprintf(key, sizeof(key), "mp/x%u", i);
		put(c, key, 4000, 'x', NULL, 0, NOW);
	}
	tap_ok(o != NULL && stats(c).evictions == 0, "%u objects fill the cache, the oldest in a memo", cap);
	for (i = 0; i < 16; i++)
		memo_hit(m, c, "mp/hot", 0, 0, NOW);
	put(c, "mp/next", 4000, 'x', NULL, 0, NOW);
	tap_ok(stats(c).evictions == 1 && memo_hit(m, c, "mp/hot", 0, 0, NOW) != NULL
	       && hits(c, "mp/hot", NOW) && !hits(c, "mp/x1", NOW),
	       "16 memo hits moved it up the LRU: the next store evicts the one after it");
	for (i = 0; i < cap + 2; i++) {
		snprintf(key, sizeof(key), "mp/y%u", i);
		put(c, key, 4000, 'y', NULL, 0, NOW);
	}
	tap_ok(!hits(c, "mp/hot", NOW) && memo_hit(m, c, "mp/hot", 0, 0, NOW) == NULL,
	       "evicted: the memo answers no more");
	cache_memo_free(m);
	cache_free(c);
}

/* Two threads, each with its own memo, hit one key while the main thread
 * stores version after version of it: once a version is published, no
 * memo answers with an older one. (Under TSan and ASan in CI.) */
#define MR_VERSIONS 300

struct memo_race {
	struct cache *c;
	_Atomic unsigned version;       /* stored and published */
	_Atomic bool done;
	unsigned older, served;
};

static unsigned body_version(const struct cache_obj *o)
{
	char v[9];

	memcpy(v, cache_obj_body(o).iov_base, 8);
	v[8] = '\0';
	return (unsigned)strtoul(v, NULL, 10);
}

static void *memo_racer(void *arg)
{
	struct memo_race *mr = arg;
	struct cache_memo *m = cache_memo_new(mr->c);
	struct cache_req r;
	struct cache_obj *o;
	struct cache_fill *f;
	unsigned slot, seen;

	while (!atomic_load(&mr->done)) {
		seen = atomic_load_explicit(&mr->version, memory_order_acquire);
		rq(mr->c, &r, "mr/k", 0, 0, NOW);
		o = cache_memo_get(m, &r, &slot);
		if (o != NULL) {
			mr->older += body_version(o) < seen;
			mr->served++;
			cache_memo_put(m, slot);
			continue;
		}
		if (cache_lookup(mr->c, &r, NULL, &o, &f) != CACHE_HIT) {
			if (f != NULL)
				cache_fill_abort(f);
			cache_obj_release(o);
			continue;
		}
		mr->older += body_version(o) < seen;
		if (cache_memo_adopt(m, &r, o, &slot) == 0)
			cache_memo_put(m, slot);
		else
			cache_obj_release(o);
	}
	cache_memo_free(m);
	return NULL;
}

static void test_memo_race(void)
{
	struct memo_race mr[2];
	pthread_t th[2];
	struct cache *c = mk(1 << 22, 1 << 16, 4, CACHE_POLICY_DEFAULT);
	char body[16];

	memset(mr, 0, sizeof(mr));
	for (int i = 0; i < 2; i++) {
		mr[i].c = c;
		pthread_create(&th[i], NULL, memo_racer, &mr[i]);
	}
	for (unsigned v = 0; v <= MR_VERSIONS; v++) {
		struct cache_key k;
		struct cache_req r;
		struct cache_obj *o;
		struct cache_fill *f;

		cache_key_init(c, &k, "mr/k", 4);
		if (v % 3 == 0)
			cache_invalidate(c, &k);
		snprintf(body, sizeof(body), "%08u", v);
		rq(c, &r, "mr/k", CACHE_L_REFRESH, 0, NOW);
		if (cache_lookup(c, &r, NULL, &o, &f) == CACHE_MISS)
			fill_all(f, "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 8\r\n\r\n",
				 body, 8, 0, NOW);
		else if (f != NULL)
			cache_fill_abort(f);
		cache_obj_release(o);
		for (int i = 0; i < 2; i++)
			atomic_store_explicit(&mr[i].version, v, memory_order_release);
		for (volatile int spin = 0; spin < 20000; spin++)
			;
	}
	for (int i = 0; i < 2; i++)
		atomic_store(&mr[i].done, true);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	tap_ok(mr[0].older + mr[1].older == 0,
	       "%u versions stored while two memos hit: no answer older than the version published "
	       "before it (%u, %u from the memos)", MR_VERSIONS, mr[0].served, mr[1].served);
	cache_free(c);
}

int main(void)
{
	test_overhead();
	test_min_uses();
	test_door_admission();
	test_peek();
	test_not_modified();
	test_rules();
	test_store_and_hit();
	test_accounting();
	test_eviction();
	test_resize();
	test_refcount();
	test_table();
	test_admission();
	test_freshness();
	test_resident_clock();
	test_flags();
	test_variants();
	test_vary_fields();
	test_fills();
	test_uncacheable();
	test_hold();
	test_coalescing(CO_DONE, "completion");
	test_coalescing(CO_ABORT, "leader abort");
	test_coalescing(CO_UNCACHEABLE, "not storable");
	test_cancel_race();
	test_memo();
	test_memo_policy();
	test_memo_race();
	return tap_done();
}
