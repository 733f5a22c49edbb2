/*
 * ring.c -- the consistent-hash ring of Karger et al. 1997 ("Consistent
 * hashing and random trees", STOC '97) in the fixed scheme of ARCHITECTURE.md:
 * points, build, lookup, the distinct clockwise walk, exact arc shares and the
 * exact diff between two rings, and the owner of a key during a warm ramp
 * from one ring to the next. The compat schemes ([ring] scheme) come in
 * through one table (ring_schemes): their builders (ring-compat.h) give
 * the points and the key hash, everything after that is this file's.
 *
 * Pure: no I/O and no shared mutable state; the digest comes from md5.c,
 * which keeps one context per thread so that hashing a request key
 * allocates nothing. A built ring is immutable, so any thread may read it. ring_build() and ring_diff() run
 * on the main thread (config load, `ringproxy plan`); lookups and walks run
 * on the workers.
 */
#include "ring/ring.h"

#include <endian.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "base/decfmt.h"
#include "base/md5.h"
#include "ring/ring-compat.h"

/* Arc lengths reach 2^64 (one point owns the whole circle), so sums are
 * kept in 128 bits and only the final ratio is rounded to a double. */
__extension__ typedef unsigned __int128 ring_u128;

/* "None": the owner in a ring without points; no backend of the same
 * name in the other ring. */
#define RING_NONE UINT32_MAX

static uint32_t *ring_match(const struct ring *a, const struct ring *b);
static void ring_sum_shares(const struct ring *r, double *share);

/* The fixed scheme's position of the n pieces v[] one after the other:
 * the first 8 bytes of their MD5 read big-endian; and in *u (unless
 * NULL) the last 8 read the same way. 0, or -1 with err. */
static int ring_digest(const struct iovec *v, size_t n, uint64_t *pos, uint64_t *u,
		       char *err, size_t errlen)
{
	unsigned char d[MD5_LEN];
	uint64_t x, y;

	if (md5_digest(v, n, d, err, errlen) != 0)
		return -1;
	/* the digest's two halves, big-endian: two loads, not a loop of
	 * sixteen shifts (50 instructions a request) */
	memcpy(&x, d, 8);
	memcpy(&y, d + 8, 8);
	*pos = be64toh(x);
	if (u)
		*u = be64toh(y);
	return 0;
}

uint64_t ring_hash_parts2(const struct iovec *v, size_t n, uint64_t *u)
{
	uint64_t pos = 0;

	/* The threads that hash keys have their digest state before the
	 * first key (workers are given one, plan makes its own), and
	 * ring_build() has hashed already, so failing here means the library
	 * broke under us: a broken invariant, not bad input, and routing keys
	 * to a made-up position would be worse. */
	if (ring_digest(v, n, &pos, u, NULL, 0) != 0)
		abort();
	return pos;
}

uint64_t ring_hash_parts(const struct iovec *v, size_t n)
{
	return ring_hash_parts2(v, n, NULL);
}

uint64_t ring_hash2(const void *key, size_t len, uint64_t *u)
{
	struct iovec v = { (void *)(uintptr_t)key, len };

	return ring_hash_parts2(&v, 1, u);
}

uint64_t ring_hash(const void *key, size_t len)
{
	return ring_hash2(key, len, NULL);
}

/* ------------------------------------------------------------------ */
/* Schemes                                                             */

typedef int ring_points_fn(const struct ring_member *m, size_t n, struct ring_point **out,
			   size_t *nout, char *err, size_t errlen);
typedef uint64_t ring_key_fn(const void *key, size_t len);

/* Envoy's ring at its default sizes, minimum_ring_size 1024 and
 * maximum_ring_size 8388608: a tier's Envoy config rarely sets them, and
 * a ring of a size that differs places keys elsewhere anyway. */
static int ring_envoy_default_points(const struct ring_member *m, size_t n, struct ring_point **out,
				     size_t *nout, char *err, size_t errlen)
{
	return ring_envoy_points(m, n, RING_ENVOY_MIN_RING_SIZE, RING_ENVOY_MAX_RING_SIZE, out, nout,
				 err, errlen);
}

/* A scheme: its name in [ring] scheme, and for a compat scheme its
 * builder and key hash (NULL for the fixed scheme, whose are this file's;
 * and for a scheme this build lacks). */
struct ring_scheme_def {
	const char *name;
	ring_points_fn *points;
	ring_key_fn *key;
};

static const struct ring_scheme_def ring_schemes[RING_NSCHEMES] = {
	[RING_SCHEME_RINGPROXY] = { "ringproxy", NULL, NULL },
	[RING_SCHEME_NGINX] = { "nginx", ring_nginx_points, ring_nginx_key },
	[RING_SCHEME_HAPROXY] = { "haproxy", ring_haproxy_points, ring_haproxy_key },
	[RING_SCHEME_KETAMA] = { "ketama", ring_ketama_points, ring_ketama_key },
	[RING_SCHEME_ENVOY] = { "envoy", ring_envoy_default_points, ring_envoy_key },
	[RING_SCHEME_KETAMA_FNV1A64] = { "ketama", ring_ketama_points, ring_ketama_key_fnv1a64 },
};

int ring_compat_limit(uint64_t total, char *err, size_t errlen)
{
	if (total <= RING_MAX_POINTS)
		return 0;
	snprintf(err, errlen, "ring would have %llu points, more than the limit of %u; lower the weights",
		 (unsigned long long)total, RING_MAX_POINTS);
	return -1;
}

const char *ring_scheme_name(enum ring_scheme s)
{
	return (unsigned)s < RING_NSCHEMES ? ring_schemes[s].name : "?";
}

int ring_scheme_built(enum ring_scheme s)
{
	return s == RING_SCHEME_RINGPROXY || ((unsigned)s < RING_NSCHEMES && ring_schemes[s].points);
}

uint64_t ring_key_pos(enum ring_scheme s, const struct iovec *v, size_t n, uint64_t *u)
{
	char buf[RING_KEY_JOIN], *join = buf;
	size_t len = 0;
	uint64_t pos;

	if (s == RING_SCHEME_RINGPROXY || !ring_scheme_built(s))
		return ring_hash_parts2(v, n, u);
	if (u)
		(void)ring_hash_parts2(v, n, u);
	if (n == 1)
		return ring_schemes[s].key(v[0].iov_base, v[0].iov_len);
	/* The proxies hash one string: pieces (sorted parameters, the
	 * parser's literal "/") are joined, on the stack unless long. */
	for (size_t i = 0; i < n; i++)
		len += v[i].iov_len;
	if (len > sizeof(buf) && !(join = malloc(len)))
		abort();        /* no memory for one key: as ring_hash_parts2 */
	len = 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i].iov_len)
			memcpy(join + len, v[i].iov_base, v[i].iov_len);
		len += v[i].iov_len;
	}
	pos = ring_schemes[s].key(join, len);
	if (join != buf)
		free(join);
	return pos;
}

/* ------------------------------------------------------------------ */
/* Build                                                               */

uint32_t ring_points_for(unsigned vnodes, double weight)
{
	double x = (double)vnodes * weight;
	uint32_t n = 0;

	/* !(x > 0) also catches NaN. Past UINT32_MAX we saturate: such a
	 * ring is refused by ring_build() anyway. round() is half away from
	 * zero, as the fixed scheme says (not to even: 2.5 gives 3). */
	if (!(x > 0))
		goto out;
	if (x >= (double)UINT32_MAX) {
		n = UINT32_MAX;
		goto out;
	}
	n = (uint32_t)round(x);
out:
	return n;
}

/* Sort record: rank is the backend's place in name order, so comparing
 * ranks breaks position ties by name without a strcmp per comparison. */
struct ring_sortpt {
	uint64_t pos;
	uint32_t rank;
	uint32_t backend;
};

static int ring_sortpt_cmp(const void *x, const void *y)
{
	const struct ring_sortpt *a = x, *b = y;

	if (a->pos != b->pos)
		return a->pos < b->pos ? -1 : 1;
	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	return 0;
}

/* Sort indices into a name array; qsort has no context argument, so the
 * names travel with the index. */
struct ring_byname {
	const char *name;
	uint32_t idx;
};

static int ring_byname_cmp(const void *x, const void *y)
{
	const struct ring_byname *a = x, *b = y;

	return strcmp(a->name, b->name);
}

/* The n names sorted, for ranks (build) and matching by name (diff).
 * Caller frees. */
static struct ring_byname *ring_byname_new(char *const *names, size_t n)
{
	struct ring_byname *v = malloc((n ? n : 1) * sizeof(*v));

	if (v == NULL)
		goto out;
	for (size_t i = 0; i < n; i++) {
		v[i].name = names[i];
		v[i].idx = (uint32_t)i;
	}
	qsort(v, n, sizeof(*v), ring_byname_cmp);
out:
	return v;
}

void ring_free(struct ring *r)
{
	if (r != NULL) {
		for (size_t i = 0; r->names != NULL && i < r->nbackends; i++)
			free(r->names[i]);
		free(r->names);
		free(r->weights);
		free(r->npoints_of);
		free(r->share);
		free(r->points);
		free(r->index);
		free(r);
	}
}

/* Check the members and copy names and weights into r. */
static int ring_build_members(struct ring *r, const struct ring_member *m,
			      size_t n, char *err, size_t errlen)
{
	uint64_t total = 0;
	int rc = -1;

	for (size_t i = 0; i < n; i++) {
		if (m[i].name == NULL || m[i].name[0] == '\0') {
			snprintf(err, errlen, "backend %zu has no name; "
				 "give every backend a name", i);
			goto out;
		}
		if (!isfinite(m[i].weight) || m[i].weight < 0) {
			snprintf(err, errlen, "backend %s: weight %g is not a "
				 "finite number >= 0; use 0 to drain it",
				 m[i].name, m[i].weight);
			goto out;
		}
		r->names[i] = strdup(m[i].name);
		if (r->names[i] == NULL) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		r->nbackends = i + 1;
		r->weights[i] = m[i].weight;
		r->npoints_of[i] = ring_points_for(r->vnodes, m[i].weight);
		total += r->npoints_of[i];
		if (r->npoints_of[i] > 0)
			r->nactive++;
	}
	if (total > RING_MAX_POINTS) {
		snprintf(err, errlen, "ring would have %llu points, more than "
			 "the limit of %u; lower vnodes or the weights",
			 (unsigned long long)total, RING_MAX_POINTS);
		goto out;
	}
	r->npoints = (size_t)total;
	rc = 0;
out:
	return rc;
}

/* The names sorted, each backend's rank in that order into rank[] (when
 * not NULL), refusing a name listed twice: the caller frees the result.
 * NULL with err. */
static struct ring_byname *ring_byname_distinct(const struct ring *r, uint32_t *rank, char *err,
						size_t errlen)
{
	struct ring_byname *byname = ring_byname_new(r->names, r->nbackends);

	if (byname == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < r->nbackends; i++) {
		/* Identity is the name: two backends of one name would be
		 * one set of points counted twice. */
		if (i > 0 && strcmp(byname[i - 1].name, byname[i].name) == 0) {
			snprintf(err, errlen, "backend %s is listed twice; "
				 "give each backend its own name",
				 byname[i].name);
			free(byname);
			byname = NULL;
			goto out;
		}
		if (rank)
			rank[byname[i].idx] = (uint32_t)i;
	}
out:
	return byname;
}

/* The n points sp[] into r->points, sorted by (pos, rank), merged with
 * the points of prev (NULL: none) whose backend map[] gives an index of r
 * (RING_NONE: not taken), and each backend's count; collapse: equal
 * neighbours kept once, the first. prev's points are sorted by position
 * with ties in name order, which is r's rank order too, so the merge
 * gives the order one sort of all of them would. */
static void ring_merge_points(struct ring *r, struct ring_sortpt *sp, size_t n,
			      const struct ring *prev, const uint32_t *map, const uint32_t *rank,
			      bool collapse)
{
	size_t k = 0, j = 0, np = prev ? prev->npoints : 0;

	qsort(sp, n, sizeof(*sp), ring_sortpt_cmp);
	memset(r->npoints_of, 0, r->nbackends * sizeof(*r->npoints_of));
	r->nactive = 0;
	for (size_t i = 0; i < n || j < np;) {
		uint64_t lim = i < n ? sp[i].pos : UINT64_MAX;
		struct ring_point p;

		/* prev's points before the next new one, in one tight loop:
		 * a reload's new points are few (no collapse here: prev is
		 * only given for the fixed scheme, which keeps equal points) */
		for (; j < np && prev->points[j].pos < lim; j++) {
			uint32_t b = map[prev->points[j].backend];

			if (b == RING_NONE)
				continue;
			r->points[k].pos = prev->points[j].pos;
			r->points[k++].backend = b;
			if (r->npoints_of[b]++ == 0)
				r->nactive++;
		}
		while (j < np && map[prev->points[j].backend] == RING_NONE)
			j++;
		if (j < np && (i == n || prev->points[j].pos < sp[i].pos ||
			       (prev->points[j].pos == sp[i].pos &&
				rank[map[prev->points[j].backend]] < sp[i].rank))) {
			p.pos = prev->points[j].pos;
			p.backend = map[prev->points[j++].backend];
		} else if (i < n) {
			p.pos = sp[i].pos;
			p.backend = sp[i++].backend;
		} else {
			break;
		}
		if (collapse && k > 0 && r->points[k - 1].pos == p.pos)
			continue;
		r->points[k++] = p;
		if (r->npoints_of[p.backend]++ == 0)
			r->nactive++;
	}
	r->npoints = k;
}

/* "#i" of point i at p (16 bytes): its length. */
static size_t ring_vnode_suffix(char *p, uint32_t i)
{
	p[0] = '#';
	return (size_t)(decfmt_u64(p + 1, i) - p);
}

/* The fixed scheme's points of the backends that skip[] (NULL: none)
 * does not name, each ranked by its backend's name (rank[], so ties go by
 * name): *n of them, the caller frees. NULL with err. */
static struct ring_sortpt *ring_hash_points(struct ring *r, const uint32_t *rank, const bool *skip,
					    size_t *n, char *err, size_t errlen)
{
	struct ring_sortpt *sp = NULL;
	size_t k = 0, total = 0;

	for (size_t b = 0; b < r->nbackends; b++)
		total += skip && skip[b] ? 0 : r->npoints_of[b];
	sp = malloc((total ? total : 1) * sizeof(*sp));
	if (sp == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	for (size_t b = 0; b < r->nbackends; b++) {
		size_t nlen = strlen(r->names[b]);

		for (uint32_t i = 0; !(skip && skip[b]) && i < r->npoints_of[b]; i++) {
			char suffix[16];
			struct iovec v[2] = { { r->names[b], nlen }, { suffix, ring_vnode_suffix(suffix, i) } };

			if (ring_digest(v, 2, &sp[k].pos, NULL, err, errlen) != 0)
				goto fail;
			sp[k].rank = rank[b];
			sp[k].backend = (uint32_t)b;
			k++;
		}
	}
	*n = k;
	goto out;
fail:
	free(sp);
	sp = NULL;
out:
	return sp;
}

/* A compat scheme's points from its builder, each ranked by its place in
 * the builder's order (ties keep it): n of them, the caller frees. NULL
 * with err. */
static struct ring_sortpt *ring_compat_points(struct ring *r, const struct ring_member *m, size_t *n,
					      char *err, size_t errlen)
{
	struct ring_byname *byname = NULL;
	struct ring_sortpt *sp = NULL;
	struct ring_point *p = NULL;
	size_t np = 0;

	if (!ring_scheme_built(r->scheme)) {
		snprintf(err, errlen, "scheme %s is not built in this version", ring_scheme_name(r->scheme));
		goto out;
	}
	byname = ring_byname_distinct(r, NULL, err, errlen);
	if (byname == NULL ||
	    ring_schemes[r->scheme].points(m, r->nbackends, &p, &np, err, errlen) != 0 ||
	    ring_compat_limit(np, err, errlen) != 0)
		goto out;
	sp = malloc((np ? np : 1) * sizeof(*sp));
	if (sp == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < np; i++) {
		sp[i].pos = p[i].pos;
		sp[i].rank = (uint32_t)i;
		sp[i].backend = p[i].backend;
	}
	*n = np;
out:
	free(p);
	free(byname);
	return sp;
}

/* Which of r's backends have their points in prev (a fixed-scheme ring)
 * already: those of the same name and the same number of points, since
 * point i is MD5("NAME#i") whatever else the ring holds. Returns, for
 * each of prev's backends, the index in r of such a backend, RING_NONE
 * for the others, and marks them in reused[] (r's); NULL without memory.
 * The caller frees. */
static uint32_t *ring_reusable(const struct ring *r, const struct ring *prev, bool *reused)
{
	uint32_t *map = ring_match(prev, r);

	for (size_t j = 0; map != NULL && j < prev->nbackends; j++) {
		uint32_t i = map[j];

		if (i != RING_NONE && prev->npoints_of[j] == r->npoints_of[i])
			reused[i] = true;
		else
			map[j] = RING_NONE;
	}
	return map;
}

/* The fixed scheme's points, sorted by (pos, name): those prev (NULL, or
 * a ring of another scheme: none) has are taken from it, the others
 * hashed. A reload that changes a few backends of thousands hashes and
 * sorts only theirs, and merges them into the rest in one pass. */
static int ring_build_fixed(struct ring *r, const struct ring *prev, char *err, size_t errlen)
{
	struct ring_byname *byname = NULL;
	struct ring_sortpt *sp = NULL;
	uint32_t *rank = NULL, *map = NULL;
	bool *reused = NULL;
	size_t cap = r->nbackends ? r->nbackends : 1, n = 0;
	int rc = -1;

	if (prev != NULL && prev->scheme != RING_SCHEME_RINGPROXY)
		prev = NULL;    /* none of its points is one of ours */
	rank = malloc(cap * sizeof(*rank));
	r->points = malloc((r->npoints ? r->npoints : 1) * sizeof(*r->points));
	if (rank == NULL || r->points == NULL || (prev && !(reused = calloc(cap, sizeof(*reused)))))
		goto nomem;
	byname = ring_byname_distinct(r, rank, err, errlen);
	if (byname == NULL)
		goto out;
	if (prev && !(map = ring_reusable(r, prev, reused)))
		goto nomem;
	sp = ring_hash_points(r, rank, reused, &n, err, errlen);
	if (sp == NULL)
		goto out;
	ring_merge_points(r, sp, n, prev, map, rank, false);
	rc = 0;
	goto out;
nomem:
	snprintf(err, errlen, "out of memory");
out:
	free(sp);
	free(map);
	free(byname);
	free(reused);
	free(rank);
	return rc;
}

/* A compat scheme's points, sorted by (pos, builder's order), equal
 * neighbours collapsed to the first, as NGINX does (a lookup finds the
 * first of equal points anyway; the collapse keeps the walk and the
 * counts to the points that own keys). */
static int ring_build_compat(struct ring *r, const struct ring_member *m, char *err, size_t errlen)
{
	size_t n = 0;
	struct ring_sortpt *sp = ring_compat_points(r, m, &n, err, errlen);
	int rc = -1;

	if (sp == NULL)
		goto out;
	r->points = malloc((n ? n : 1) * sizeof(*r->points));
	if (r->points == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	ring_merge_points(r, sp, n, NULL, NULL, NULL, true);
	rc = 0;
out:
	free(sp);
	return rc;
}

/* About four points a bucket: one cache line of points to search after
 * the index. Capped so the index stays under 1 MiB. */
#define RING_INDEX_MAX_BITS 18

static int ring_build_index(struct ring *r, char *err, size_t errlen)
{
	unsigned bits = 1;
	size_t nb, k = 0;
	int rc = -1;

	if (r->npoints == 0) {
		rc = 0;
		goto out;
	}
	while (bits < RING_INDEX_MAX_BITS && ((size_t)4 << bits) <= r->npoints)
		bits++;
	nb = (size_t)1 << bits;
	r->index_shift = 64 - bits;
	r->index = malloc((nb + 1) * sizeof(*r->index));
	if (r->index == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (size_t b = 0; b < nb; b++) {
		uint64_t lo = (uint64_t)b << r->index_shift;

		while (k < r->npoints && r->points[k].pos < lo)
			k++;
		r->index[b] = (uint32_t)k;
	}
	r->index[nb] = (uint32_t)r->npoints;
	rc = 0;
out:
	return rc;
}

struct ring *ring_build(const struct ring_member *members, size_t n, enum ring_scheme scheme,
			unsigned vnodes, char *err, size_t errlen)
{
	return ring_build_from(NULL, members, n, scheme, vnodes, err, errlen);
}

struct ring *ring_build_from(const struct ring *prev, const struct ring_member *members, size_t n,
			     enum ring_scheme scheme, unsigned vnodes, char *err, size_t errlen)
{
	struct ring *r = NULL;
	size_t cap = n ? n : 1;

	if (n > RING_MAX_BACKENDS) {
		snprintf(err, errlen, "%zu backends, more than the limit of %u; "
			 "split the tier", n, RING_MAX_BACKENDS);
		goto fail;
	}
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		goto nomem;
	r->scheme = scheme;
	/* a compat scheme counts its own points (ring_build_compat) */
	r->vnodes = scheme == RING_SCHEME_RINGPROXY ? vnodes : 0;
	r->names = calloc(cap, sizeof(*r->names));
	r->weights = calloc(cap, sizeof(*r->weights));
	r->npoints_of = calloc(cap, sizeof(*r->npoints_of));
	r->share = calloc(cap, sizeof(*r->share));
	if (r->names == NULL || r->weights == NULL || r->npoints_of == NULL || r->share == NULL)
		goto nomem;
	if (ring_build_members(r, members, n, err, errlen) != 0 ||
	    (scheme == RING_SCHEME_RINGPROXY ? ring_build_fixed(r, prev, err, errlen) :
	     ring_build_compat(r, members, err, errlen)) != 0 ||
	    ring_build_index(r, err, errlen) != 0)
		goto fail;
	ring_sum_shares(r, r->share);
	goto out;
nomem:
	snprintf(err, errlen, "out of memory");
fail:
	ring_free(r);
	r = NULL;
out:
	return r;
}

/* ------------------------------------------------------------------ */
/* Lookup and walk                                                     */

long ring_lookup_point(const struct ring *r, uint64_t pos)
{
	const struct ring_point *p = r->points;
	size_t base, len, k;
	long owner = -1;

	if (r->npoints == 0)
		goto out;
	/* Karger et al.'s successor rule: the first point at or after pos.
	 * The bucket of pos holds every point that can be its owner, unless
	 * none is >= pos: then the answer is the next bucket's first point,
	 * which is where the search below ends anyway. */
	k = (size_t)(pos >> r->index_shift);
	base = r->index[k];
	len = r->index[k + 1] - base;
	while (len > 0) {
		size_t half = len / 2;

		if (p[base + half].pos < pos) {
			base += half + 1;
			len -= half + 1;
		} else {
			len = half;
		}
	}
	/* Past the last point the circle wraps to the first. */
	owner = base == r->npoints ? 0 : (long)base;
out:
	return owner;
}

int ring_lookup(const struct ring *r, uint64_t pos)
{
	long i = ring_lookup_point(r, pos);

	return i < 0 ? -1 : (int)r->points[i].backend;
}

void ring_walk_init(struct ring_walk *w, const struct ring *r, uint64_t pos)
{
	w->ring = r;
	w->start = ring_lookup_point(r, pos);
	w->step = 0;
	w->yielded = 0;
	/* Only the words that can hold a bit of this ring need clearing. */
	memset(w->seen, 0, (r->nbackends + 63) / 64 * sizeof(w->seen[0]));
}

/* The walk is what spill-over under bounded loads (Mirrokni, Thorup,
 * Zadimoghaddam, arXiv:1608.01350) and failover follow: the next distinct
 * backends clockwise, so a key's second choice is as stable as its first. */
int ring_walk_next(struct ring_walk *w)
{
	const struct ring *r = w->ring;
	int b = -1;

	if (w->start < 0 || w->yielded >= r->nactive)
		goto out;
	while (w->step < r->npoints) {
		size_t i = (size_t)w->start + w->step++;
		uint32_t c;

		if (i >= r->npoints)
			i -= r->npoints;
		c = r->points[i].backend;
		if (w->seen[c / 64] & (UINT64_C(1) << (c % 64)))
			continue;
		w->seen[c / 64] |= UINT64_C(1) << (c % 64);
		w->yielded++;
		b = (int)c;
		break;
	}
out:
	return b;
}

void ring_walk_skip(struct ring_walk *w, int b)
{
	uint64_t bit;

	if (b < 0 || (size_t)b >= w->ring->nbackends)
		return;
	bit = UINT64_C(1) << (b % 64);
	if (w->seen[b / 64] & bit)
		return;
	w->seen[b / 64] |= bit;
	/* the walk ends after nactive yields: a skipped backend with points
	 * counts as one of them */
	if (w->ring->npoints_of[b])
		w->yielded++;
}

/* ------------------------------------------------------------------ */
/* Warm ramps                                                          */

int ring_ramp_switched(const struct ring_ramp *st, uint64_t u, int64_t now_ms)
{
	int64_t e = now_ms - st->start_ms;

	if (e < 0)
		return 0;
	if ((uint64_t)e >= st->span_ms)
		return 1;
	/* now >= start + span * u / 2^64, exactly: no rounding can make a
	 * key switch back as now grows */
	return (ring_u128)u * st->span_ms <= (ring_u128)(uint64_t)e << 64;
}

int64_t ring_ramp_moment(const struct ring_ramp *st, uint64_t u)
{
	ring_u128 x = (ring_u128)u * st->span_ms;

	return st->start_ms + (int64_t)(uint64_t)(x >> 64) + ((uint64_t)x != 0);
}

/* The owner of pos in step st, as an index of the current ring's
 * backends (-1: none, or not in the current file). */
static int ring_ramp_at(const struct ring_ramp *st, uint64_t pos)
{
	int b = ring_lookup(st->ring, pos);

	if (b < 0 || st->map == NULL)
		return b;
	return st->map[b];
}

/* ring_ramp_owner's body: the key's position in step i is pos[i * stride]
 * (stride 0: one position for every step). */
static int ring_ramp_owner_of(const struct ring_ramp *st, size_t n, const uint64_t *pos, size_t stride,
			      uint64_t u, int64_t now_ms, int *prev)
{
	int owner = ring_lookup(st[0].ring, pos[0]);
	int p = -1;

	if (n > 1) {
		size_t i = 1;

		/* The previous assignment as it stood when step 0 began: the
		 * first older step the key had switched to by the time the
		 * step after it began, or the last step, a plain ring. */
		while (i + 1 < n && !ring_ramp_switched(&st[i], u, st[i - 1].start_ms))
			i++;
		p = ring_ramp_at(&st[i], pos[i * stride]);
		/* an owner no longer in the file holds nothing back: the key
		 * was where the newer step put it */
		while (p < 0 && i > 1) {
			i--;
			p = ring_ramp_at(&st[i], pos[i * stride]);
		}
	}
	if (prev)
		*prev = p;
	if (p >= 0 && p != owner && !ring_ramp_switched(&st[0], u, now_ms))
		owner = p;
	return owner;
}

int ring_ramp_owner(const struct ring_ramp *st, size_t n, uint64_t pos, uint64_t u,
		    int64_t now_ms, int *prev)
{
	return ring_ramp_owner_of(st, n, &pos, 0, u, now_ms, prev);
}

int ring_ramp_owner_at(const struct ring_ramp *st, size_t n, const uint64_t *pos, uint64_t u,
		       int64_t now_ms, int *prev)
{
	return ring_ramp_owner_of(st, n, pos, 1, u, now_ms, prev);
}

/* ------------------------------------------------------------------ */
/* Shares and diff                                                     */

/* 2^64 as a double, to turn an exact 128-bit arc sum into a fraction. */
#define RING_CIRCLE 18446744073709551616.0

/* The arc owned by point j: (pos[j-1], pos[j]]. Point 0's arc wraps from
 * the last point; when every point sits at one position it is the whole
 * circle, 2^64, which is why this is 128 bits. */
static ring_u128 ring_arc(const struct ring_point *p, size_t n, size_t j)
{
	if (j > 0)
		return (ring_u128)(p[j].pos - p[j - 1].pos);
	return ((ring_u128)1 << 64) - (p[n - 1].pos - p[0].pos);
}

static void ring_sum_shares(const struct ring *r, double *share)
{
	uint32_t b0 = r->npoints ? r->points[0].backend : UINT32_MAX;
	uint64_t s;

	/* Allocation-free and exact: each backend's sum is kept modulo 2^64
	 * in the bytes of its own share[] slot (memcpy, so no aliasing
	 * rule is bent), then converted in place. A true sum of 2^64 reads
	 * as 0; only point 0's backend can have it, since point 0's arc is
	 * never empty and belongs to nobody else. */
	_Static_assert(sizeof(double) == sizeof(uint64_t), "8-byte double");
	memset(share, 0, r->nbackends * sizeof(*share));
	for (size_t j = 0; j < r->npoints; j++) {
		double *slot = &share[r->points[j].backend];

		memcpy(&s, slot, sizeof(s));
		s += (uint64_t)ring_arc(r->points, r->npoints, j);
		memcpy(slot, &s, sizeof(s));
	}
	for (size_t i = 0; i < r->nbackends; i++) {
		memcpy(&s, &share[i], sizeof(s));
		share[i] = (i == b0 && s == 0) ? 1.0 : (double)s / RING_CIRCLE;
	}
}

void ring_shares(const struct ring *r, double *share)
{
	/* a ring laid out by hand (the fuzzer's) has no sums: make them */
	if (r->share == NULL)
		ring_sum_shares(r, share);
	else
		memcpy(share, r->share, r->nbackends * sizeof(*share));
}


/* Flow accumulator: open addressing on (from, to), grown at half load, so
 * its size follows the pairs that occur rather than na x nb. */
struct ring_flowacc {
	uint32_t from, to;
	int used;
	ring_u128 len;
};

struct ring_flowtab {
	struct ring_flowacc *e;
	size_t cap, n;
};

static size_t ring_flowtab_slot(const struct ring_flowtab *t, uint32_t from,
				uint32_t to)
{
	uint64_t h = ((uint64_t)from << 32 | to) * UINT64_C(0x9e3779b97f4a7c15);
	size_t i = (size_t)(h >> 20) & (t->cap - 1);

	while (t->e[i].used && (t->e[i].from != from || t->e[i].to != to))
		i = (i + 1) & (t->cap - 1);
	return i;
}

static int ring_flowtab_add(struct ring_flowtab *t, uint32_t from, uint32_t to,
			    ring_u128 len)
{
	size_t i;
	int rc = -1;

	if ((t->n + 1) * 2 > t->cap) {
		struct ring_flowtab g = { NULL, t->cap ? t->cap * 2 : 64, t->n };

		g.e = calloc(g.cap, sizeof(*g.e));
		if (g.e == NULL)
			goto out;
		for (size_t k = 0; k < t->cap; k++)
			if (t->e[k].used)
				g.e[ring_flowtab_slot(&g, t->e[k].from,
						      t->e[k].to)] = t->e[k];
		free(t->e);
		*t = g;
	}
	i = ring_flowtab_slot(t, from, to);
	if (!t->e[i].used) {
		t->e[i].used = 1;
		t->e[i].from = from;
		t->e[i].to = to;
		t->n++;
	}
	t->e[i].len += len;
	rc = 0;
out:
	return rc;
}

/* For each backend of a, the index of the same name in b, or RING_NONE. */
static uint32_t *ring_match(const struct ring *a, const struct ring *b)
{
	struct ring_byname *bn = ring_byname_new(b->names, b->nbackends);
	uint32_t *map = malloc((a->nbackends ? a->nbackends : 1) * sizeof(*map));

	if (bn == NULL || map == NULL) {
		free(map);
		map = NULL;
		goto out;
	}
	for (size_t i = 0; i < a->nbackends; i++) {
		struct ring_byname k = { a->names[i], 0 };
		struct ring_byname *hit = bsearch(&k, bn, b->nbackends,
						  sizeof(*bn), ring_byname_cmp);

		map[i] = hit ? hit->idx : RING_NONE;
	}
out:
	free(bn);
	return map;
}

/* Owner index (in that ring) of the segment ending at q, where i is the
 * first point of the ring at or after q (or npoints: wrap). */
static uint32_t ring_owner_at(const struct ring *r, size_t i)
{
	if (r->npoints == 0)
		return RING_NONE;
	return r->points[i == r->npoints ? 0 : i].backend;
}

/* Whether a segment owned by oa in a and ob in b keeps its owner: the
 * same name, or no owner on either side. A backend of a that b does not
 * list maps to RING_NONE too, so "no owner in b" is tested first: its
 * keys move to none. */
static int ring_same(const uint32_t *map, uint32_t oa, uint32_t ob)
{
	if (oa == RING_NONE || ob == RING_NONE)
		return oa == ob;
	return map[oa] == ob;
}

/* Sort flows by exact share (largest first), then names for a stable
 * order between runs. */
static int ring_flowacc_cmp(const void *x, const void *y)
{
	const struct ring_flowacc *a = x, *b = y;

	if (a->len != b->len)
		return a->len > b->len ? -1 : 1;
	if (a->from != b->from)
		return a->from < b->from ? -1 : 1;
	return a->to < b->to ? -1 : a->to > b->to;
}

static const char *ring_name_or_none(const struct ring *r, uint32_t i)
{
	return i == RING_NONE ? "" : r->names[i];
}

/* A segment (start, end] of the keyspace that changes owner from oa (in
 * a) to ob (in b); len its length (2^64 for the whole circle). Returns 0,
 * or -1 to stop the sweep (no memory). */
typedef int ring_moved_fn(void *arg, uint64_t start, uint64_t end, uint32_t oa, uint32_t ob,
			  ring_u128 len);

/* Sweep the union of both rings' boundaries: between two consecutive
 * boundaries neither owner changes, so each segment is compared once.
 * Segment (q_prev, q] is owned in each ring by its first point >= q.
 * Calls moved for each segment whose owner changes, in keyspace order,
 * the wrapping one last. 0, or -1 if moved stopped it. */
static int ring_sweep(const struct ring *a, const struct ring *b, const uint32_t *map,
		      ring_moved_fn *moved, void *arg)
{
	size_t ia = 0, ib = 0, nseg = 0;
	uint64_t first = 0, prev = 0;

	while (ia < a->npoints || ib < b->npoints) {
		const struct ring_point *pa = &a->points[ia], *pb = &b->points[ib];
		uint64_t q;
		uint32_t oa, ob;

		/* A reload's rings share most of their points: a point both
		 * have, alone at its position in each and of one backend,
		 * ends a segment that keeps its owner. What the general case
		 * below does with it, at a fraction of the cost. */
		if (nseg > 0 && ia < a->npoints && ib < b->npoints && pa->pos == pb->pos &&
		    map[pa->backend] == pb->backend && (ia + 1 == a->npoints || pa[1].pos != pa->pos) &&
		    (ib + 1 == b->npoints || pb[1].pos != pb->pos)) {
			prev = pa->pos;
			ia++;
			ib++;
			continue;
		}
		if (ib == b->npoints ||
		    (ia < a->npoints && a->points[ia].pos <= b->points[ib].pos))
			q = a->points[ia].pos;
		else
			q = b->points[ib].pos;
		oa = ring_owner_at(a, ia);
		ob = ring_owner_at(b, ib);
		while (ia < a->npoints && a->points[ia].pos == q)
			ia++;
		while (ib < b->npoints && b->points[ib].pos == q)
			ib++;
		if (nseg++ == 0) {
			first = q;  /* its segment wraps: settled below */
			prev = q;
			continue;
		}
		if (!ring_same(map, oa, ob) && moved(arg, prev, q, oa, ob, (ring_u128)(q - prev)) != 0)
			return -1;
		prev = q;
	}
	if (nseg > 0) {
		/* The wrap segment (last, first] belongs to point 0 of each
		 * ring; with one boundary it is the whole circle. */
		ring_u128 len = ((ring_u128)1 << 64) - (prev - first);
		uint32_t oa = ring_owner_at(a, 0), ob = ring_owner_at(b, 0);

		if (!ring_same(map, oa, ob) && moved(arg, prev, first, oa, ob, len) != 0)
			return -1;
	}
	return 0;
}

/* Each backend's exact share of the circle in 2^-64 units (2^64: the
 * whole of it) into sum[], r->nbackends entries. */
static void ring_sums(const struct ring *r, ring_u128 *sum)
{
	memset(sum, 0, r->nbackends * sizeof(*sum));
	for (size_t j = 0; j < r->npoints; j++)
		sum[r->points[j].backend] += ring_arc(r->points, r->npoints, j);
}

/* x y / 2^64 for x, y <= 2^64, exactly rounded down. */
static ring_u128 ring_mul_share(ring_u128 x, ring_u128 y)
{
	if (x == (ring_u128)1 << 64)
		return y;
	if (y == (ring_u128)1 << 64)
		return x;
	return x * y >> 64;
}

/* The sweep's counterpart for rings of two schemes (ring.h, ring_diff):
 * every pair of owners (x in a, y in b, y not x's name) as one "segment"
 * of length share_a(x) share_b(y), in no keyspace (start = end = 0); a
 * ring without points contributes its "none" owner with the whole
 * circle. 0, or -1 if moved stopped it or memory ran out. */
static int ring_cross(const struct ring *a, const struct ring *b, const uint32_t *map,
		      ring_moved_fn *moved, void *arg)
{
	ring_u128 one = (ring_u128)1 << 64, *sa, *sb;
	size_t na = a->npoints ? a->nbackends : 1, nb = b->npoints ? b->nbackends : 1;
	int rc = -1;

	sa = malloc(na * sizeof(*sa));
	sb = malloc(nb * sizeof(*sb));
	if (!sa || !sb)
		goto out;
	if (a->npoints)
		ring_sums(a, sa);
	else
		sa[0] = one;
	if (b->npoints)
		ring_sums(b, sb);
	else
		sb[0] = one;
	for (size_t i = 0; i < na; i++) {
		uint32_t x = a->npoints ? (uint32_t)i : RING_NONE;

		for (size_t j = 0; j < nb && sa[i]; j++) {
			uint32_t y = b->npoints ? (uint32_t)j : RING_NONE;

			if (sb[j] && !ring_same(map, x, y) &&
			    moved(arg, 0, 0, x, y, ring_mul_share(sa[i], sb[j])) != 0)
				goto out;
		}
	}
	rc = 0;
out:
	free(sa);
	free(sb);
	return rc;
}

struct ring_diff_acc {
	struct ring_flowtab t;
	ring_u128 moved;
};

static int ring_diff_moved(void *arg, uint64_t start, uint64_t end, uint32_t oa, uint32_t ob,
			   ring_u128 len)
{
	struct ring_diff_acc *acc = arg;

	(void)start;
	(void)end;
	acc->moved += len;
	return ring_flowtab_add(&acc->t, oa, ob, len);
}

int ring_diff(const struct ring *a, const struct ring *b, struct ring_diff *d)
{
	struct ring_diff_acc acc = { { NULL, 0, 0 }, 0 };
	struct ring_flowtab *t = &acc.t;
	uint32_t *map = NULL;
	size_t k = 0;
	int rc = -1;

	memset(d, 0, sizeof(*d));
	map = ring_match(a, b);
	if (map == NULL || (a->scheme == b->scheme ? ring_sweep : ring_cross)(a, b, map, ring_diff_moved,
									     &acc) != 0)
		goto out;
	d->moved_share = (double)acc.moved / RING_CIRCLE;
	if (t->n > 0) {
		for (size_t i = 0; i < t->cap; i++)
			if (t->e[i].used)
				t->e[k++] = t->e[i];
		qsort(t->e, t->n, sizeof(*t->e), ring_flowacc_cmp);
		d->flows = calloc(t->n, sizeof(*d->flows));
		if (d->flows == NULL)
			goto out;
		for (size_t i = 0; i < t->n; i++) {
			d->flows[i].from = ring_name_or_none(a, t->e[i].from);
			d->flows[i].to = ring_name_or_none(b, t->e[i].to);
			d->flows[i].share = (double)t->e[i].len / RING_CIRCLE;
		}
		d->nflows = t->n;
	}
	rc = 0;
out:
	if (rc != 0)
		ring_diff_free(d);
	free(t->e);
	free(map);
	return rc;
}

struct ring_arcs_acc {
	struct ring_arc *arcs;
	size_t n, cap, max;
	int whole;
};

static int ring_arcs_moved(void *arg, uint64_t start, uint64_t end, uint32_t oa, uint32_t ob,
			   ring_u128 len)
{
	struct ring_arcs_acc *acc = arg;

	(void)oa;
	(void)ob;
	if (len == (ring_u128)1 << 64)
		acc->whole = 1;
	/* adjacent moved segments are one arc */
	if (acc->n && acc->arcs[acc->n - 1].end == start) {
		acc->arcs[acc->n - 1].end = end;
		return 0;
	}
	if (acc->n == acc->max)
		return 0;
	if (acc->n == acc->cap) {
		size_t cap = acc->cap ? 2 * acc->cap : 64;
		struct ring_arc *g = realloc(acc->arcs, cap * sizeof(*g));

		if (!g)
			return -1;
		acc->arcs = g;
		acc->cap = cap;
	}
	acc->arcs[acc->n].start = start;
	acc->arcs[acc->n].end = end;
	acc->n++;
	return 0;
}

long ring_moved_arcs(const struct ring *a, const struct ring *b, size_t max, struct ring_arc **arcs)
{
	struct ring_arcs_acc acc = { NULL, 0, 0, max, 0 };
	uint32_t *map = ring_match(a, b);
	long rc = -1;

	*arcs = NULL;
	if (map != NULL && a->scheme != b->scheme) {
		rc = 0;         /* no keyspace in common: no arcs */
		goto out;
	}
	if (map == NULL || ring_sweep(a, b, map, ring_arcs_moved, &acc) != 0)
		goto out;
	/* the wrapping segment may continue the first arc */
	if (acc.n > 1 && acc.arcs[acc.n - 1].end == acc.arcs[0].start) {
		acc.arcs[0].start = acc.arcs[acc.n - 1].start;
		acc.n--;
	}
	if (acc.whole && acc.n) {
		acc.arcs[0].start = acc.arcs[0].end;    /* (x, x]: all of it */
		acc.n = 1;
	}
	*arcs = acc.arcs;
	acc.arcs = NULL;
	rc = (long)acc.n;
out:
	free(acc.arcs);
	free(map);
	return rc;
}

int32_t *ring_map(const struct ring *from, const struct ring *to)
{
	uint32_t *m = ring_match(from, to);
	int32_t *out = malloc((from->nbackends ? from->nbackends : 1) * sizeof(*out));

	if (m == NULL || out == NULL) {
		free(out);
		out = NULL;
		goto done;
	}
	for (size_t i = 0; i < from->nbackends; i++)
		out[i] = m[i] == RING_NONE ? -1 : (int32_t)m[i];
done:
	free(m);
	return out;
}

void ring_diff_free(struct ring_diff *d)
{
	if (d != NULL) {
		free(d->flows);
		d->flows = NULL;
		d->nflows = 0;
		d->moved_share = 0;
	}
}

/* ------------------------------------------------------------------ */
/* Preference lists (replicas)                                         */

unsigned ring_list(const struct ring *r, uint64_t pos, int *list, unsigned n)
{
	struct ring_walk w;
	unsigned k = 0;
	int b;

	ring_walk_init(&w, r, pos);
	while (k < n && (b = ring_walk_next(&w)) >= 0)
		list[k++] = b;
	return k;
}

int ring_list_shares(const struct ring *r, unsigned n, double *primary, double *replica)
{
	ring_u128 *sum = calloc(2 * (r->nbackends ? r->nbackends : 1), sizeof(*sum));
	int list[RING_LIST_MAX];

	if (sum == NULL)
		return -1;
	if (n > RING_LIST_MAX)
		n = RING_LIST_MAX;
	/* every key of point j's arc has the walk from point j; a point at
	 * its predecessor's position has an empty arc */
	for (size_t j = 0; j < r->npoints; j++) {
		ring_u128 len = ring_arc(r->points, r->npoints, j);
		unsigned k = len ? ring_list(r, r->points[j].pos, list, n) : 0;

		for (unsigned i = 0; i < k; i++)
			sum[2 * (size_t)list[i] + (i > 0)] += len;
	}
	for (size_t i = 0; i < r->nbackends; i++) {
		primary[i] = (double)sum[2 * i] / RING_CIRCLE;
		replica[i] = (double)sum[2 * i + 1] / RING_CIRCLE;
	}
	free(sum);
	return 0;
}

/* A ring's list of n at pos as a sorted set of ids common to both rings
 * of a change: map[] turns the ring's index into the other ring's (NULL:
 * the identity), an index it lacks into one of its own past off. */
static unsigned ring_list_ids(const struct ring *r, const uint32_t *map, uint32_t off, uint64_t pos,
			      unsigned n, uint32_t *ids)
{
	int list[RING_LIST_MAX];
	unsigned k = ring_list(r, pos, list, n);

	for (unsigned i = 0; i < k; i++) {
		uint32_t id = map == NULL ? (uint32_t)list[i] :
			      map[list[i]] == RING_NONE ? off + (uint32_t)list[i] : map[list[i]];
		unsigned j = i;

		for (; j > 0 && ids[j - 1] > id; j--)
			ids[j] = ids[j - 1];
		ids[j] = id;
	}
	for (unsigned i = k; i < RING_LIST_MAX; i++)
		ids[i] = RING_NONE;
	return k;
}

struct ring_lists_acc {
	const struct ring *a, *b;
	const uint32_t *map;    /* a's index -> b's, RING_NONE */
	unsigned na, nb;
	ring_u128 moved;
};

/* ring_sweep's segment (start, end], called for every one (see
 * ring_list_moved): its keys' lists are the walks from end. */
static int ring_lists_seg(void *arg, uint64_t start, uint64_t end, uint32_t oa, uint32_t ob,
			  ring_u128 len)
{
	struct ring_lists_acc *acc = arg;
	uint32_t la[RING_LIST_MAX], lb[RING_LIST_MAX];

	(void)start;
	(void)oa;
	(void)ob;
	ring_list_ids(acc->a, acc->map, (uint32_t)acc->b->nbackends, end, acc->na, la);
	ring_list_ids(acc->b, NULL, 0, end, acc->nb, lb);
	if (memcmp(la, lb, sizeof(la)) != 0)
		acc->moved += len;
	return 0;
}

/* One list of a ring with the keyspace it covers (ring_list_moved across
 * schemes). */
struct ring_listlen {
	uint32_t ids[RING_LIST_MAX];
	ring_u128 len;
};

static int ring_listlen_cmp(const void *x, const void *y)
{
	const struct ring_listlen *p = x, *q = y;

	for (unsigned i = 0; i < RING_LIST_MAX; i++)
		if (p->ids[i] != q->ids[i])
			return p->ids[i] < q->ids[i] ? -1 : 1;
	return 0;
}

/* r's lists, one per point with an arc, sorted by list: NULL on no
 * memory. */
static struct ring_listlen *ring_listlens(const struct ring *r, const uint32_t *map, uint32_t off,
					  unsigned n)
{
	struct ring_listlen *e = calloc(r->npoints ? r->npoints : 1, sizeof(*e));

	if (e == NULL)
		return NULL;
	for (size_t j = 0; j < r->npoints; j++) {
		e[j].len = ring_arc(r->points, r->npoints, j);
		ring_list_ids(r, map, off, r->points[j].pos, n, e[j].ids);
	}
	qsort(e, r->npoints, sizeof(*e), ring_listlen_cmp);
	return e;
}

/* The length of the run of lists equal to e[*i] from *i on, *i moved
 * past it. */
static ring_u128 ring_listlen_run(const struct ring_listlen *e, size_t n, size_t *i)
{
	ring_u128 len = 0;
	size_t j = *i;

	for (; j < n && ring_listlen_cmp(&e[j], &e[*i]) == 0; j++)
		len += e[j].len;
	*i = j;
	return len;
}

/* Across schemes: 1 - sum over lists L of share_a(L) share_b(L). */
static double ring_list_cross(const struct ring *a, unsigned na, const struct ring *b, unsigned nb,
			      const uint32_t *map)
{
	struct ring_listlen *ea = ring_listlens(a, map, (uint32_t)b->nbackends, na);
	struct ring_listlen *eb = ring_listlens(b, NULL, 0, nb);
	ring_u128 same = 0;
	size_t i = 0, j = 0;
	double moved = -1;

	if (ea == NULL || eb == NULL)
		goto out;
	while (i < a->npoints && j < b->npoints) {
		int c = ring_listlen_cmp(&ea[i], &eb[j]);

		if (c < 0) {
			ring_listlen_run(ea, a->npoints, &i);
		} else if (c > 0) {
			ring_listlen_run(eb, b->npoints, &j);
		} else {
			ring_u128 la = ring_listlen_run(ea, a->npoints, &i);

			same += ring_mul_share(la, ring_listlen_run(eb, b->npoints, &j));
		}
	}
	moved = 1.0 - (double)same / RING_CIRCLE;
out:
	free(ea);
	free(eb);
	return moved;
}

double ring_list_moved(const struct ring *a, unsigned na, const struct ring *b, unsigned nb)
{
	struct ring_lists_acc acc = { a, b, NULL, na > RING_LIST_MAX ? RING_LIST_MAX : na,
				      nb > RING_LIST_MAX ? RING_LIST_MAX : nb, 0 };
	uint32_t *map = ring_match(a, b);
	uint32_t *never = malloc((a->nbackends ? a->nbackends : 1) * sizeof(*never));
	double moved = -1;

	if (map == NULL || never == NULL)
		goto out;
	if (a->npoints == 0 || b->npoints == 0) {
		moved = a->npoints == b->npoints ? 0 : 1;
		goto out;
	}
	if (a->scheme != b->scheme) {
		moved = ring_list_cross(a, acc.na, b, acc.nb, map);
		goto out;
	}
	/* a map under which no owner is kept makes ring_sweep call for
	 * every segment of the union of boundaries */
	for (size_t i = 0; i < a->nbackends; i++)
		never[i] = RING_NONE - 1;
	acc.map = map;
	if (ring_sweep(a, b, never, ring_lists_seg, &acc) == 0)
		moved = (double)acc.moved / RING_CIRCLE;
out:
	free(never);
	free(map);
	return moved;
}

bool ring_list_changed(const struct ring *a, uint64_t pa, unsigned na, const struct ring *b,
		       uint64_t pb, unsigned nb)
{
	int la[RING_LIST_MAX], lb[RING_LIST_MAX];
	unsigned ka = ring_list(a, pa, la, na > RING_LIST_MAX ? RING_LIST_MAX : na);
	unsigned kb = ring_list(b, pb, lb, nb > RING_LIST_MAX ? RING_LIST_MAX : nb);

	if (ka != kb)
		return true;
	for (unsigned i = 0; i < ka; i++) {
		unsigned j = 0;

		while (j < kb && strcmp(a->names[la[i]], b->names[lb[j]]) != 0)
			j++;
		if (j == kb)
			return true;
	}
	return false;
}

/* FNV-1a 64 of n bytes of p, going on from h. */
static uint64_t ring_fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * UINT64_C(0x100000001b3);
	return h;
}

uint64_t ring_fingerprint(const struct ring *r)
{
	uint64_t h = UINT64_C(0xcbf29ce484222325), *of = NULL;
	uint32_t scheme = (uint32_t)r->scheme;

	h = ring_fnv(h, &scheme, sizeof(scheme));
	/* each backend's name and weight hashed once, folded into each of
	 * its points */
	of = calloc(r->nbackends ? r->nbackends : 1, sizeof(*of));
	for (size_t i = 0; of && i < r->nbackends; i++) {
		of[i] = ring_fnv(UINT64_C(0xcbf29ce484222325), r->names[i], strlen(r->names[i]) + 1);
		of[i] = ring_fnv(of[i], &r->weights[i], sizeof(r->weights[i]));
	}
	for (size_t i = 0; i < r->npoints; i++) {
		const struct ring_point *pt = &r->points[i];
		uint64_t w[2] = { pt->pos, of ? of[pt->backend]
					     : ring_fnv(UINT64_C(0xcbf29ce484222325), r->names[pt->backend],
							strlen(r->names[pt->backend])) };

		h = ring_fnv(h, w, sizeof(w));
	}
	free(of);
	return h;
}
