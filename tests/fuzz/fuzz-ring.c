/*
 * fuzz-ring.c -- libFuzzer target for the ring's arithmetic (ring.c):
 * build, lookup, the distinct walk, exact shares and the exact diff, over
 * two memberships the input describes. Each result is checked against a
 * model computed here the slow way, in 128-bit integers:
 *
 *   - lookup: the owner is the first point at or after the position,
 *     wrapping past the last (a linear scan);
 *   - walk: every backend with points exactly once, owner first, then in
 *     the order of first appearance clockwise;
 *   - shares: the arcs (previous point, point] summed per backend add up
 *     to exactly 2^64, and each share is that exact sum over 2^64;
 *   - diff: the keyspace whose owner's name differs, swept over the union
 *     of both rings' points, is moved_share, and the flows are exactly
 *     its (from, to) pairs; no key moves between two backends whose
 *     points are the same in both rings (consistent hashing's promise),
 *     checked on the flows and on sampled keys.
 *
 * Two kinds of ring. Built (byte 0 even): ring_build() from up to 8
 * members of a pool of names, vnodes and weights from the input, with
 * backends added, removed, reweighted or left alone between ring a and
 * ring b (and vnodes changed if byte 1 says so); a repeated name must be
 * refused; b built from a (ring_build_from) must be b. Bits 1-3 of byte 0 pick the scheme of both rings: ringproxy,
 * nginx, haproxy, ketama (either key hash) or envoy (whole weights; ids
 * "1".."8" by name for haproxy, the names for the others), so the compat
 * builders' rings meet the same model. Synthetic (byte 0 odd): the points themselves come from the
 * input, so positions 0, 2^64-1 and ties between backends (broken by
 * name), which MD5 never produces in practice, reach shares and diff;
 * the struct is laid out as ring_build documents it (sorted by position
 * then name, the lookup index by its definition in ring.h). The rest of
 * the input is sample positions, 8 bytes each.
 */
#include "ring/ring.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A broken promise: crash so libFuzzer keeps the input. */
#define FUZZ_CHECK(cond) do { if (!(cond)) __builtin_trap(); } while (0)

#define FUZZ_NAMES 8            /* the pool of backend names */
#define FUZZ_SYN_POINTS 24      /* points of a synthetic ring, at most */
#define FUZZ_SAMPLES 16
#define FUZZ_SYN_SHIFT 62       /* a synthetic ring's index: 4 buckets */

typedef unsigned __int128 fuzz_u128;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const fuzz_names[FUZZ_NAMES] = {
	"a", "b", "cache-1", "cache-10", "cache-2", "thumbs-a", "x", "x-",
};
/* scheme haproxy's server id of each name */
static const char *const fuzz_ids[FUZZ_NAMES] = { "1", "2", "3", "4", "5", "6", "7", "4095" };

/* The scheme bits 1-3 of byte 0 pick, the fixed one twice as often. */
static const enum ring_scheme fuzz_schemes[8] = {
	RING_SCHEME_RINGPROXY, RING_SCHEME_NGINX, RING_SCHEME_HAPROXY, RING_SCHEME_KETAMA,
	RING_SCHEME_ENVOY, RING_SCHEME_KETAMA_FNV1A64, RING_SCHEME_RINGPROXY, RING_SCHEME_RINGPROXY,
};

/* Input reader: bytes past the end read as 0. */
struct fuzz_in {
	const uint8_t *p;
	size_t n, off;
};

static uint8_t fuzz_byte(struct fuzz_in *in)
{
	return in->off < in->n ? in->p[in->off++] : 0;
}

static uint64_t fuzz_u64(struct fuzz_in *in)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | fuzz_byte(in);
	return v;
}

static double fuzz_to_double(fuzz_u128 v)
{
	/* as ring.c converts: the whole circle is 1, else v / 2^64 */
	return v == (fuzz_u128)1 << 64 ? 1.0 : (double)(uint64_t)v / 18446744073709551616.0;
}

/* ---- the model ------------------------------------------------------- */

/* Index of the owner point of pos: the first at or after it, else 0. */
static size_t fuzz_owner_point(const struct ring *r, uint64_t pos)
{
	for (size_t i = 0; i < r->npoints; i++)
		if (r->points[i].pos >= pos)
			return i;
	return 0;
}

/* Name owning pos, "" for a ring without points. */
static const char *fuzz_owner_name(const struct ring *r, uint64_t pos)
{
	if (r->npoints == 0)
		return "";
	return r->names[r->points[fuzz_owner_point(r, pos)].backend];
}

static int fuzz_index_of(const struct ring *r, const char *name)
{
	for (size_t i = 0; i < r->nbackends; i++)
		if (strcmp(r->names[i], name) == 0)
			return (int)i;
	return -1;
}

/* Whether name has the same points in both rings (and exists in both):
 * then no key may move between it and another such backend. */
static bool fuzz_unchanged(const struct ring *a, const struct ring *b, const char *name)
{
	int ia = fuzz_index_of(a, name), ib = fuzz_index_of(b, name);
	size_t j = 0;

	if (ia < 0 || ib < 0 || a->npoints_of[ia] != b->npoints_of[ib])
		return false;
	/* both point lists are sorted by position: compare in step */
	for (size_t i = 0; i < a->npoints; i++) {
		if (a->points[i].backend != (uint32_t)ia)
			continue;
		while (j < b->npoints && b->points[j].backend != (uint32_t)ib)
			j++;
		if (j == b->npoints || b->points[j].pos != a->points[i].pos)
			return false;
		j++;
	}
	return true;
}

static void fuzz_check_ring(const struct ring *r, const uint64_t *samples, size_t ns)
{
	fuzz_u128 *sum = calloc(r->nbackends ? r->nbackends : 1, sizeof(*sum));
	double *share = calloc(r->nbackends ? r->nbackends : 1, sizeof(*share));
	fuzz_u128 total = 0;
	uint32_t active = 0;

	for (size_t i = 0; i < r->nbackends; i++)
		active += r->npoints_of[i] > 0;
	FUZZ_CHECK(active == r->nactive);
	/* sorted by position, ties by name */
	for (size_t i = 1; i < r->npoints; i++) {
		const struct ring_point *p = &r->points[i - 1], *q = &r->points[i];

		FUZZ_CHECK(p->pos < q->pos || (p->pos == q->pos &&
			   strcmp(r->names[p->backend], r->names[q->backend]) < 0));
	}
	/* exact shares: the arcs sum to 2^64 */
	for (size_t j = 0; j < r->npoints; j++) {
		fuzz_u128 arc = j > 0 ? (fuzz_u128)(r->points[j].pos - r->points[j - 1].pos)
				      : ((fuzz_u128)1 << 64) - (r->points[r->npoints - 1].pos - r->points[0].pos);

		sum[r->points[j].backend] += arc;
		total += arc;
	}
	FUZZ_CHECK(total == (r->npoints ? (fuzz_u128)1 << 64 : 0));
	ring_shares(r, share);
	for (size_t i = 0; i < r->nbackends; i++)
		FUZZ_CHECK(share[i] == fuzz_to_double(sum[i]));

	/* lookup and walk at the samples, and at up to 16 points and just
	 * past each (a boundary's own position and its successor) */
	for (size_t k = 0; k < ns + 2 * (r->npoints < 16 ? r->npoints : 16); k++) {
		size_t stride = r->npoints < 16 ? 1 : r->npoints / 16;
		uint64_t pos = k < ns ? samples[k] : r->points[(k - ns) / 2 * stride].pos + (k - ns) % 2;
		struct ring_walk w;
		uint64_t seen = 0;
		size_t start = fuzz_owner_point(r, pos), step = 0;
		uint32_t n = 0;
		int got;

		if (r->npoints == 0) {
			FUZZ_CHECK(ring_lookup_point(r, pos) == -1 && ring_lookup(r, pos) == -1);
			ring_walk_init(&w, r, pos);
			FUZZ_CHECK(ring_walk_next(&w) == -1);
			continue;
		}
		FUZZ_CHECK(ring_lookup_point(r, pos) == (long)start);
		FUZZ_CHECK(ring_lookup(r, pos) == (int)r->points[start].backend);
		ring_walk_init(&w, r, pos);
		while ((got = ring_walk_next(&w)) >= 0) {
			uint32_t want;

			/* the model: next point clockwise of a backend not yet seen */
			do {
				want = r->points[(start + step++) % r->npoints].backend;
			} while (seen & (UINT64_C(1) << want));
			seen |= UINT64_C(1) << want;
			FUZZ_CHECK((uint32_t)got == want);
			n++;
		}
		FUZZ_CHECK(n == r->nactive);
	}
	free(sum);
	free(share);
}

/* One (from, to) pair of the model's diff. */
struct fuzz_flow {
	const char *from, *to;
	fuzz_u128 len;
};

static void fuzz_flow_add(struct fuzz_flow *f, size_t *nf, const char *from, const char *to,
			  fuzz_u128 len)
{
	for (size_t i = 0; i < *nf; i++) {
		if (strcmp(f[i].from, from) == 0 && strcmp(f[i].to, to) == 0) {
			f[i].len += len;
			return;
		}
	}
	f[*nf].from = from;
	f[*nf].to = to;
	f[*nf].len = len;
	(*nf)++;
}

static int fuzz_u64_cmp(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

static void fuzz_check_diff(const struct ring *a, const struct ring *b,
			    const uint64_t *samples, size_t ns)
{
	size_t nq = a->npoints + b->npoints, nu = 0, nf = 0;
	uint64_t *q = malloc((nq ? nq : 1) * sizeof(*q));
	/* at most one flow per segment */
	struct fuzz_flow *f = calloc(nq + 1, sizeof(*f));
	fuzz_u128 moved = 0;
	struct ring_diff d;

	for (size_t i = 0; i < a->npoints; i++)
		q[i] = a->points[i].pos;
	for (size_t i = 0; i < b->npoints; i++)
		q[a->npoints + i] = b->points[i].pos;
	qsort(q, nq, sizeof(*q), fuzz_u64_cmp);
	for (size_t i = 0; i < nq; i++)
		if (nu == 0 || q[nu - 1] != q[i])
			q[nu++] = q[i];
	/* segment (q[i-1], q[i]], and the wrap (q[nu-1], q[0]]: owned in
	 * each ring by its first point at or after q[i] (q ascends, so the
	 * scan goes on where it stopped) */
	for (size_t i = 0, ia = 0, ib = 0; i < nu; i++) {
		fuzz_u128 len = i > 0 ? (fuzz_u128)(q[i] - q[i - 1])
				      : ((fuzz_u128)1 << 64) - (q[nu - 1] - q[0]);
		const char *oa = "", *ob = "";

		while (ia < a->npoints && a->points[ia].pos < q[i])
			ia++;
		while (ib < b->npoints && b->points[ib].pos < q[i])
			ib++;
		if (a->npoints)
			oa = a->names[a->points[ia == a->npoints ? 0 : ia].backend];
		if (b->npoints)
			ob = b->names[b->points[ib == b->npoints ? 0 : ib].backend];

		if (strcmp(oa, ob) == 0)
			continue;
		moved += len;
		fuzz_flow_add(f, &nf, oa, ob, len);
	}
	FUZZ_CHECK(ring_diff(a, b, &d) == 0);
	FUZZ_CHECK(d.moved_share == fuzz_to_double(moved));
	FUZZ_CHECK(d.nflows == nf);
	for (size_t k = 0; k < d.nflows; k++) {
		bool found = false;

		FUZZ_CHECK(strcmp(d.flows[k].from, d.flows[k].to) != 0);
		FUZZ_CHECK(k == 0 || d.flows[k - 1].share >= d.flows[k].share);
		for (size_t i = 0; i < nf && !found; i++) {
			if (strcmp(f[i].from, d.flows[k].from) == 0 &&
			    strcmp(f[i].to, d.flows[k].to) == 0) {
				FUZZ_CHECK(d.flows[k].share == fuzz_to_double(f[i].len));
				found = true;
			}
		}
		FUZZ_CHECK(found);
		/* no key moves between two backends that kept their points */
		FUZZ_CHECK(!(fuzz_unchanged(a, b, d.flows[k].from) &&
			     fuzz_unchanged(a, b, d.flows[k].to)));
	}
	for (size_t k = 0; k < ns; k++) {
		const char *oa = fuzz_owner_name(a, samples[k]), *ob = fuzz_owner_name(b, samples[k]);

		FUZZ_CHECK(strcmp(oa, ob) == 0 || !fuzz_unchanged(a, b, oa) || !fuzz_unchanged(a, b, ob));
	}
	ring_diff_free(&d);
	free(f);
	free(q);
}

/* ---- rings from the input -------------------------------------------- */

/* b built from a (ring_build_from, the points a has taken from it) is
 * b as ring_build made it, point for point. */
static void fuzz_check_from(const struct ring *a, const struct ring *b, const struct ring_member *mb,
			    size_t nb, enum ring_scheme scheme, unsigned vb)
{
	char err[256];
	struct ring *f = ring_build_from(a, mb, nb, scheme, vb, err, sizeof(err));
	size_t ni = b->index ? ((size_t)1 << (64 - b->index_shift)) + 1 : 0;

	FUZZ_CHECK(f != NULL && f->npoints == b->npoints && f->nbackends == b->nbackends &&
		   f->nactive == b->nactive && f->index_shift == b->index_shift &&
		   (f->index == NULL) == (b->index == NULL));
	for (size_t i = 0; i < b->npoints; i++)
		FUZZ_CHECK(f->points[i].pos == b->points[i].pos && f->points[i].backend == b->points[i].backend);
	for (size_t i = 0; i < b->nbackends; i++)
		FUZZ_CHECK(f->npoints_of[i] == b->npoints_of[i] && f->share[i] == b->share[i]);
	FUZZ_CHECK(ni == 0 || memcmp(f->index, b->index, ni * sizeof(*b->index)) == 0);
	ring_free(f);
}

/* Ring a and b by ring_build: per member 2 bytes, name (low 3 bits), in
 * a (bit 3), in b (bit 4), reweighted in b (bit 5); weight in quarters,
 * a's in the low and b's in the high nibble. A repeated name is refused
 * by ring_build (checked), and the member is then left out. */
static void fuzz_built(struct fuzz_in *in, enum ring_scheme scheme, struct ring **ra, struct ring **rb)
{
	struct ring_member ma[FUZZ_NAMES + 1], mb[FUZZ_NAMES];
	uint8_t ctl = fuzz_byte(in), nm = fuzz_byte(in) % (FUZZ_NAMES + 1);
	unsigned va = 1 + ctl % 16, vb = (ctl & 0x80) ? 1 + (ctl >> 4) % 8 : va;
	size_t na = 0, nb = 0;
	unsigned used = 0, ina = 0;
	char err[256];

	for (uint8_t i = 0; i < nm; i++) {
		uint8_t x = fuzz_byte(in), w = fuzz_byte(in);
		const char *name = fuzz_names[x % FUZZ_NAMES];
		const char *id = scheme == RING_SCHEME_HAPROXY ? fuzz_ids[x % FUZZ_NAMES] : NULL;
		double wa = (w & 15) / 4.0, wb = (x & 0x20) ? (w >> 4) / 4.0 : wa;

		if (scheme != RING_SCHEME_RINGPROXY) {
			wa = floor(wa);         /* the proxies' weights are whole */
			wb = floor(wb);
		}
		if (used & (1u << (x % FUZZ_NAMES))) {
			/* a name twice: refused, whatever the weights */
			struct ring_member two[2] = { { name, wa, id }, { name, wb, id } };
			struct ring *r;

			err[0] = '\0';
			if (ina & (1u << (x % FUZZ_NAMES))) {
				ma[na] = two[0];
				r = ring_build(ma, na + 1, scheme, va, err, sizeof(err));
			} else {
				r = ring_build(two, 2, scheme, va, err, sizeof(err));
			}
			FUZZ_CHECK(r == NULL && strstr(err, "listed twice") != NULL);
			continue;
		}
		used |= 1u << (x % FUZZ_NAMES);
		if (x & 0x08) {
			ina |= 1u << (x % FUZZ_NAMES);
			ma[na++] = (struct ring_member){ name, wa, id };
		}
		if (x & 0x10)
			mb[nb++] = (struct ring_member){ name, wb, id };
	}
	*ra = ring_build(ma, na, scheme, va, err, sizeof(err));
	*rb = ring_build(mb, nb, scheme, vb, err, sizeof(err));
	FUZZ_CHECK(*ra != NULL && *rb != NULL && (*ra)->scheme == scheme);
	fuzz_check_from(*ra, *rb, mb, nb, scheme, vb);
	for (size_t i = 0; i < na; i++) {
		uint32_t w = (uint32_t)ma[i].weight, n = (*ra)->npoints_of[i];

		/* NGINX collapses a CRC-32 shared by two points; ketama gives
		 * a server of the largest share (3 of 3) 160 x 8 points at most;
		 * with weights of 0 to 3 and 8 servers no share rounds to none */
		FUZZ_CHECK(scheme == RING_SCHEME_NGINX ? n <= 160 * w && (n > 0) == (w > 0) :
			   scheme == RING_SCHEME_HAPROXY ? n == 16 * w :
			   scheme == RING_SCHEME_KETAMA || scheme == RING_SCHEME_KETAMA_FNV1A64 ?
			   n <= 160 * FUZZ_NAMES && (n > 0) == (w > 0) :
			   scheme == RING_SCHEME_ENVOY ? (n > 0) == (w > 0) :
			   n == ring_points_for(va, ma[i].weight));
		FUZZ_CHECK(strcmp((*ra)->names[i], ma[i].name) == 0);
	}
}

/* A synthetic ring freed with ring_free: up to FUZZ_SYN_POINTS points,
 * each a name byte and a position of 8 bytes. The members are the names
 * of the points plus those the mask byte adds (without points: drained). */
static struct ring *fuzz_synthetic(struct fuzz_in *in)
{
	struct ring *r = calloc(1, sizeof(*r));
	uint8_t np = fuzz_byte(in) % (FUZZ_SYN_POINTS + 1), mask = fuzz_byte(in);
	uint8_t who[FUZZ_SYN_POINTS];
	uint64_t pos[FUZZ_SYN_POINTS];
	int idx[FUZZ_NAMES];
	size_t nb = 0, nbuckets = (size_t)1 << (64 - FUZZ_SYN_SHIFT);

	for (uint8_t i = 0; i < np; i++) {
		who[i] = fuzz_byte(in) % FUZZ_NAMES;
		pos[i] = fuzz_u64(in);
		mask |= (uint8_t)(1u << who[i]);
	}
	r->names = calloc(FUZZ_NAMES, sizeof(*r->names));
	r->weights = calloc(FUZZ_NAMES, sizeof(*r->weights));
	r->npoints_of = calloc(FUZZ_NAMES, sizeof(*r->npoints_of));
	r->points = calloc(np ? np : 1, sizeof(*r->points));
	r->vnodes = 1;
	for (int k = 0; k < FUZZ_NAMES; k++) {
		idx[k] = -1;
		if (mask & (1u << k)) {
			idx[k] = (int)nb;
			r->names[nb] = strdup(fuzz_names[k]);
			r->weights[nb] = 1;
			nb++;
		}
	}
	r->nbackends = nb;
	/* insertion sort by (position, name); the name pool is in strcmp
	 * order, so a name's pool index is its rank; a name's second point
	 * at one position is dropped (MD5 of two different strings) */
	for (uint8_t i = 0; i < np; i++) {
		size_t j = r->npoints;
		bool dup = false;

		for (size_t k = 0; k < r->npoints; k++)
			dup |= r->points[k].pos == pos[i] && r->points[k].backend == (uint32_t)idx[who[i]];
		if (dup)
			continue;
		while (j > 0 && (r->points[j - 1].pos > pos[i] ||
				 (r->points[j - 1].pos == pos[i] &&
				  strcmp(r->names[r->points[j - 1].backend], fuzz_names[who[i]]) > 0))) {
			r->points[j] = r->points[j - 1];
			j--;
		}
		r->points[j].pos = pos[i];
		r->points[j].backend = (uint32_t)idx[who[i]];
		r->npoints++;
		r->npoints_of[idx[who[i]]]++;
	}
	for (size_t i = 0; i < nb; i++)
		r->nactive += r->npoints_of[i] > 0;
	if (r->npoints) {
		size_t k = 0;

		r->index_shift = FUZZ_SYN_SHIFT;
		r->index = malloc((nbuckets + 1) * sizeof(*r->index));
		for (size_t bkt = 0; bkt < nbuckets; bkt++) {
			while (k < r->npoints && r->points[k].pos < (uint64_t)bkt << FUZZ_SYN_SHIFT)
				k++;
			r->index[bkt] = (uint32_t)k;
		}
		r->index[nbuckets] = (uint32_t)r->npoints;
	}
	return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size, 0 };
	uint64_t samples[FUZZ_SAMPLES];
	struct ring *a, *b;
	size_t ns = 0;
	uint8_t kind;

	if (size < 1)
		return 0;
	kind = fuzz_byte(&in);
	if (kind & 1) {
		a = fuzz_synthetic(&in);
		b = fuzz_synthetic(&in);
	} else {
		fuzz_built(&in, fuzz_schemes[(kind >> 1) % 8], &a, &b);
	}
	while (ns < FUZZ_SAMPLES && in.off < in.n)
		samples[ns++] = fuzz_u64(&in);
	fuzz_check_ring(a, samples, ns);
	fuzz_check_ring(b, samples, ns);
	fuzz_check_diff(a, b, samples, ns);
	fuzz_check_diff(b, a, samples, ns);
	ring_free(a);
	ring_free(b);
	return 0;
}
