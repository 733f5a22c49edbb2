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
 */
#ifndef RINGPROXY_RING_COMPAT_H
#define RINGPROXY_RING_COMPAT_H

#include <stddef.h>
#include <stdint.h>

#include "ring.h"

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

#endif
