/*
 * ring-haproxy.c -- HAProxy 2.6's consistent hash for `balance uri` with
 * `hash-type consistent` (chash_init_server_tree and
 * chash_get_server_hash in src/lb_chash.c, get_server_uh and gen_hash in
 * src/backend.c, __full_hash in include/haproxy/intops.h):
 *  - a server's identity is its numeric id (`id`, else the automatic
 *    number: conf.c gives it as HAProxy does);
 *  - weight w gives w x BE_WEIGHT_SCALE (16) nodes, node j at
 *    full_hash(id x SRV_EWGHT_RANGE (4096) + j) in 32-bit arithmetic;
 *  - a key is full_hash(sdbm(uri)): with no function named, `hash-type
 *    consistent` is sdbm with the avalanche modifier;
 *  - its owner is the NEAREST node on either side, the lower one when
 *    both are as near (dp <= dn picks prev).
 * full_hash is Bob Jenkins' 32-bit integer hash
 * (http://burtleburtle.net/bob/hash/integer.html) times 3221225473.
 *
 * Nearest-node is turned into the ring every other scheme has, "first
 * point >= key": between consecutive nodes a < b (modulo 2^32, gap
 * g = b - a) a key a + d goes to a while d <= g - d, that is d <=
 * floor(g / 2), so a's point is at a + floor(g / 2) and owns (the
 * previous point, a + floor(g / 2)], a itself included. With one node it
 * owns the circle. Lookup, the walk (the next nodes clockwise, as HAProxy
 * looks past a server to avoid), shares and diffs then need nothing of
 * their own. Pure.
 */
#include "ring/ring-compat.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* include/haproxy/backend-t.h, server-t.h */
#define RING_HAPROXY_SCALE 16u          /* BE_WEIGHT_SCALE */
#define RING_HAPROXY_RANGE 4096u        /* SRV_EWGHT_RANGE: 256 x 16 */
#define RING_HAPROXY_MAX_WEIGHT 256u    /* SRV_UWGHT_MAX */

uint32_t ring_haproxy_full_hash(uint32_t a)
{
	a = (a + 0x7ed55d16u) + (a << 12);
	a = (a ^ 0xc761c23cu) ^ (a >> 19);
	a = (a + 0x165667b1u) + (a << 5);
	a = (a + 0xd3a2646cu) ^ (a << 9);
	a = (a + 0xfd7046c5u) + (a << 3);
	a = (a ^ 0xb55a4f09u) ^ (a >> 16);
	return a * 3221225473u;
}

static uint32_t ring_haproxy_sdbm(const unsigned char *p, size_t len)
{
	uint32_t h = 0;

	while (len--)
		h = *p++ + (h << 6) + (h << 16) - h;
	return h;
}

uint64_t ring_haproxy_key(const void *key, size_t len)
{
	return (uint64_t)ring_haproxy_full_hash(ring_haproxy_sdbm(key, len)) << 32;
}

/* A node while sorting: its key and its server. */
struct ring_haproxy_node {
	uint32_t key;
	uint32_t backend;
};

static int ring_haproxy_node_cmp(const void *x, const void *y)
{
	const struct ring_haproxy_node *a = x, *b = y;

	return a->key < b->key ? -1 : a->key > b->key;
}

/* Member m's id and whole weight. 0, or -1 with err. */
static int ring_haproxy_member(const struct ring_member *m, uint32_t *id, uint32_t *w, char *err,
			       size_t errlen)
{
	unsigned long v = 0;
	char *end = NULL;

	if (m->id) {
		errno = 0;
		v = strtoul(m->id, &end, 10);
	}
	if (!m->id || *m->id < '1' || *m->id > '9' || *end || errno || v > RING_HAPROXY_ID_MAX) {
		snprintf(err, errlen, "backend %s: id '%s' is not a HAProxy server id from 1 to %u",
			 m->name, m->id ? m->id : "", RING_HAPROXY_ID_MAX);
		return -1;
	}
	if (!isfinite(m->weight) || m->weight < 0 || m->weight != floor(m->weight) ||
	    m->weight > RING_HAPROXY_MAX_WEIGHT) {
		snprintf(err, errlen, "backend %s: weight %g is not a whole number from 0 to %u; "
			 "HAProxy weights are whole", m->name, m->weight, RING_HAPROXY_MAX_WEIGHT);
		return -1;
	}
	*id = (uint32_t)v;
	*w = (uint32_t)m->weight;
	return 0;
}

int ring_haproxy_points(const struct ring_member *m, size_t n, struct ring_point **out, size_t *nout,
			char *err, size_t errlen)
{
	struct ring_haproxy_node *node = NULL;
	struct ring_point *p = NULL;
	uint64_t total = 0;
	size_t k = 0;
	int rc = -1;

	*out = NULL;
	*nout = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t id, w;

		if (ring_haproxy_member(&m[i], &id, &w, err, errlen) < 0)
			goto out;
		total += (uint64_t)w * RING_HAPROXY_SCALE;
	}
	if (ring_compat_limit(total, err, errlen) != 0)
		goto out;
	node = malloc((total ? total : 1) * sizeof(*node));
	p = malloc((total ? total : 1) * sizeof(*p));
	if (!node || !p) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t id, w;

		(void)ring_haproxy_member(&m[i], &id, &w, err, errlen);
		for (uint32_t j = 0; j < w * RING_HAPROXY_SCALE; j++) {
			node[k].key = ring_haproxy_full_hash(id * RING_HAPROXY_RANGE + j);
			node[k].backend = (uint32_t)i;
			k++;
		}
	}
	/* ids below 2^20 keep id x 4096 + j distinct, and full_hash is a
	 * bijection of 32 bits: no two nodes share a key */
	qsort(node, k, sizeof(*node), ring_haproxy_node_cmp);
	for (size_t i = 0; i < k; i++) {
		uint32_t gap = node[i + 1 < k ? i + 1 : 0].key - node[i].key;

		p[i].pos = (uint64_t)(uint32_t)(node[i].key + gap / 2) << 32;
		p[i].backend = node[i].backend;
	}
	*out = p;
	*nout = k;
	p = NULL;
	rc = 0;
out:
	free(node);
	free(p);
	return rc;
}
