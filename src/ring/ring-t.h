/*
 * ring-t.h -- the ring's types (ring.h has its functions): a built ring, its
 * points and members, and a walk's state, for the headers that hold one
 * (request-t.h: a request's walk) and for the compat schemes' builders
 * (ring-compat.h).
 */
#ifndef RINGPROXY_RING_T_H
#define RINGPROXY_RING_T_H

#include <stddef.h>
#include <stdint.h>

/* Upper bounds. A config that would exceed them is refused at build time
 * with a clear message instead of eating memory: 2^21 points is 32 MiB. */
#define RING_MAX_POINTS   (1u << 21)
#define RING_MAX_BACKENDS 4096u

/* Whose placement a ring reproduces ([ring] scheme). RINGPROXY is the
 * fixed scheme above; each other one is another proxy's, bit for bit, with
 * its own identity, point count and key hash (ring-compat.h). */
enum ring_scheme {
	RING_SCHEME_RINGPROXY = 0,
	RING_SCHEME_NGINX,      /* hash $request_uri consistent */
	RING_SCHEME_HAPROXY,    /* balance uri + hash-type consistent */
	RING_SCHEME_KETAMA,     /* libmemcached / twemproxy ketama */
	RING_SCHEME_ENVOY,      /* ring_hash */
	/* Not a [ring] scheme of its own: ketama with [ring] key_hash =
	 * fnv1a_64 (twemproxy's default), the same points and another key
	 * hash, chosen when the config is read so that placing a key stays
	 * one call through the scheme's row. Named "ketama". */
	RING_SCHEME_KETAMA_FNV1A64,
};
#define RING_NSCHEMES 6

/* What the ring needs to know of a backend. name and id are borrowed for
 * the duration of ring_build() only (the ring keeps its own copy of the
 * name). */
struct ring_member {
	const char *name;
	double weight;          /* >= 0; 0 = listed, drained, no points */
	const char *id;         /* the identity a compat scheme hashes (the
				   nginx server string, the HAProxy server
				   id...); NULL = the name. The fixed scheme
				   hashes the name alone. */
};

/* One point on the ring: its position and the index of its backend in the
 * member array the ring was built from. */
struct ring_point {
	uint64_t pos;
	uint32_t backend;
};

struct ring {
	struct ring_point *points;  /* sorted by (pos, backend name) */
	size_t npoints;
	size_t nbackends;
	char **names;               /* nbackends copies, same order as members */
	double *weights;
	uint32_t *npoints_of;       /* points per backend */
	double *share;              /* each backend's exact share of the
				     * keyspace, as ring_shares gives it:
				     * summed once at build, since /stats
				     * reads it on every request (NULL: not
				     * summed, ring_shares then sums) */
	enum ring_scheme scheme;
	unsigned vnodes;            /* the fixed scheme's; 0 for the others */
	uint32_t nactive;           /* backends with at least one point: the
				     * walk stops after yielding this many */
	/* Lookup accelerator: index[k] is the first point with pos >=
	 * k << index_shift, index[1 << (64 - index_shift)] = npoints. It
	 * turns a cache-missing binary search over the whole ring into a
	 * scan of a handful of points. NULL for a ring without points. */
	uint32_t *index;
	unsigned index_shift;
};

/* A clockwise walk from a key yielding each distinct backend once, owner
 * first. Lives on the caller's stack; no allocation. */
struct ring_walk {
	const struct ring *ring;
	long start;             /* index of the owner point, -1 = empty ring */
	size_t step;            /* points visited so far */
	uint32_t yielded;       /* distinct backends yielded so far */
	uint64_t seen[RING_MAX_BACKENDS / 64];
};

#endif
