/*
 * ring-compat.h -- the builders of the compat schemes ([ring] scheme other
 * than ringproxy): each reproduces another proxy's ring and key hash bit
 * for bit, so that a tier moved behind ringproxy keeps every key on the
 * cache it was on.
 *
 * Every scheme gives two functions, both pure:
 *  - ring_X_points(m, n, &out, &nout, err, errlen): the points of the n
 *    members m[] (identity m[i].id, or m[i].name when NULL; weight
 *    m[i].weight), as a malloc'd array the caller owns, each {pos, index
 *    into m}, in the order the proxy makes them (ring_build sorts them,
 *    ties in this order, and collapses equal neighbours to the first).
 *    0, or -1 with err ("backend cache-1: weight 1.5 is not a whole
 *    number; nginx weights are whole").
 *  - ring_X_key(key, len): the key's position.
 * Positions live on ringproxy's 64-bit circle: a 32-bit proxy's point h
 * is (uint64_t)h << 32 and its key k is (uint64_t)k << 32, so "the first
 * point >= the key, wrapping" is the same lookup for every scheme, and so
 * are the walk, shares, diffs and warm ramps.
 *
 * A member of weight 0 is treated as absent from the proxy's list
 * (drained): it gets no points and does not count in the others' shares.
 * The builders run on the main thread (config load, plan), the key
 * functions on any thread (MD5 through md5.c's per-thread state).
 */
#ifndef RINGPROXY_RING_COMPAT_H
#define RINGPROXY_RING_COMPAT_H

#include <stddef.h>
#include <stdint.h>

#include "ring/ring-t.h"

/* For a builder, before it allocates: 0 when total points fit the ring's
 * limit (RING_MAX_POINTS), else -1 with err saying so. */
int ring_compat_limit(uint64_t total, char *err, size_t errlen);

/* NGINX's `hash $request_uri consistent` (ngx_http_upstream_hash_module.c):
 * identity the server string as written ("10.0.0.1:8080"), split into host
 * and port at the last ':' followed by digits only; 160 points per unit of
 * weight, point k the CRC-32 of host, '\0', port and the little-endian
 * bytes of point k-1 (0 for the first); key the CRC-32 of $request_uri. */
int ring_nginx_points(const struct ring_member *m, size_t n, struct ring_point **out, size_t *nout,
		      char *err, size_t errlen);
uint64_t ring_nginx_key(const void *key, size_t len);

/* HAProxy 2.6's `balance uri` + `hash-type consistent` (lb_chash.c,
 * backend.c): identity the numeric server id; 16 nodes per unit of
 * weight, node j at full_hash(id x 4096 + j); key full_hash(sdbm(uri));
 * the owner the nearest node either side, ties to the lower, turned into
 * the equivalent first-point->=-key ring (ring-haproxy.c). */
/* Ids from 1 to this: below 2^20, id x 4096 + j never wraps 32 bits, so
 * no two servers' nodes can fall on one key. */
#define RING_HAPROXY_ID_MAX 1048575u
int ring_haproxy_points(const struct ring_member *m, size_t n, struct ring_point **out, size_t *nout,
			char *err, size_t errlen);
uint64_t ring_haproxy_key(const void *key, size_t len);
/* HAProxy's full_hash: a node at full_hash(id x 4096 + j). */
uint32_t ring_haproxy_full_hash(uint32_t a);

/*
 * ketama: libmemcached's weighted ketama (libmemcached/hosts.cc,
 * update_continuum) and twemproxy's (src/hashkit/nc_ketama.c,
 * ketama_update), which place points the same way.
 *
 * Identity: libmemcached hashes "host" when the port is 11211 and
 * "host:port" otherwise; twemproxy hashes a server's name when its line
 * has one ("127.0.0.1:11212:1 cache-a") and else the same "host" or
 * "host:port" rule. Whoever reads such a config passes that string as id.
 * (twemproxy builds "identity-j" in an 86-byte buffer, so a name of more
 * than about 80 bytes hashes there as nothing defines; libmemcached has
 * no such limit, nor has this builder.)
 *
 * A server of weight w among k servers of total weight W gets
 * floor((float)w / W * 40 * k) * 4 points, in float arithmetic as both
 * compute it: the MD5 digest of "identity-j" for j = 0, 1, ... gives four
 * points, its bytes 0-3, 4-7, 8-11, 12-15 each read little-endian.
 * Both look a key up as the first point >= the key's hash, wrapping to
 * the first point when the hash is past the last; equal positions go to
 * the lower server index (libmemcached sorts them so; twemproxy's qsort,
 * glibc's merge sort, keeps them in build order, which is index order).
 * Not this ring: libmemcached's unweighted ketama, which it falls back to
 * when every server has weight 1 and MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED is
 * off (MEMCACHED_POINTS_PER_SERVER points a server, one a digest).
 *
 * Refused with a message in err: an empty identity, a weight that is not
 * a whole number in [0, 2^32), a total weight of 2^32 or more, more than
 * RING_MAX_BACKENDS members. 0, or -1 with err. No member of weight > 0:
 * 0 with *out NULL and *nout 0.
 */
int ring_ketama_points(const struct ring_member *m, size_t n, struct ring_point **out,
		       size_t *nout, char *err, size_t errlen);
/* A key's position as libmemcached's ketama hashes it (MD5, the digest's
 * first 4 bytes little-endian; also twemproxy's `hash: md5`), << 32. */
uint64_t ring_ketama_key(const void *key, size_t len);
/* twemproxy's `hash: fnv1a_64` (its default): FNV-1a with the 64-bit
 * offset basis and prime truncated to 32 bits, each key byte taken as a
 * signed char (as x86-64 builds of twemproxy do), << 32. */
uint64_t ring_ketama_key_fnv1a64(const void *key, size_t len);

/*
 * envoy: Envoy's ring_hash load balancer (ring_hash_lb.cc, Ring::Ring and
 * chooseHost) with its default xxHash64.
 *
 * Identity: the host's hash_key metadata (envoy.lb / hash_key) when it has
 * one, else its hostname with use_hostname_for_hashing, else its address
 * as Envoy prints it: "10.0.0.1:8080", "[2001:db8::1]:8080". Whoever reads
 * such a config passes that string as id.
 *
 * Weights are normalised, w / sum; scale = min(ceil(min_w * min_ring_size)
 * / min_w, max_ring_size) with min_w the smallest normalised weight; in
 * member order each host adds scale * w to a running target and takes
 * points "identity_0", "identity_1", ... (xxHash64, seed 0) while a
 * running count of points is below it. A key's position is xxHash64 of
 * the request's hash input (the :path header for a header hash policy on
 * it), seed 0; the owner is the first point >= it, wrapping: chooseHost's
 * binary search finds exactly that point, equal positions included.
 * Envoy sorts with std::sort, which leaves equal positions in no defined
 * order; only two hosts with one identity make them, so give each its own.
 *
 * min_ring_size 1024 and max_ring_size 8388608 are Envoy's defaults.
 * Refused with a message in err: an empty identity, a weight that is not
 * a whole number in [0, 2^32), a total weight of 2^32 or more (Envoy
 * refuses that too), min_ring_size 0 or above max_ring_size, max_ring_size
 * above Envoy's limit of 8388608, a ring of more than RING_MAX_POINTS
 * points, more than RING_MAX_BACKENDS members. 0, or -1 with err. No
 * member of weight > 0: 0 with *out NULL and *nout 0.
 */
#define RING_ENVOY_MIN_RING_SIZE 1024u
#define RING_ENVOY_MAX_RING_SIZE 8388608u
int ring_envoy_points(const struct ring_member *m, size_t n, unsigned min_ring_size,
		      unsigned max_ring_size, struct ring_point **out, size_t *nout,
		      char *err, size_t errlen);
/* xxHash64 of the key, seed 0, as Envoy hashes a header's value. */
uint64_t ring_envoy_key(const void *key, size_t len);

#endif
