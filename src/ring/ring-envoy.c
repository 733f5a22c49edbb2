/*
 * ring-envoy.c -- the ring of Envoy's ring_hash load balancer with its
 * default hash, xxHash64 (ring-compat.h says what it does), rebuilt from
 * what Envoy computes so that a tier behind Envoy keeps its keys on the
 * same hosts. xxHash itself is libxxhash's.
 *
 * Pure; the builder runs on the main thread, the key function on any.
 */
#include "ring/ring-compat.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

static const char *envoy_identity(const struct ring_member *m)
{
	return m->id != NULL ? m->id : m->name;
}

/* Check the members and the ring bounds as Envoy's config validation and
 * normalizeHostWeights do; the weight sum in *sum. 0, or -1 with err. */
static int envoy_check(const struct ring_member *m, size_t n, unsigned min_ring_size,
		       unsigned max_ring_size, uint64_t *sum, char *err, size_t errlen)
{
	if (n > RING_MAX_BACKENDS) {
		snprintf(err, errlen, "%zu backends, more than the limit of %u; "
			 "split the tier", n, RING_MAX_BACKENDS);
		return -1;
	}
	if (min_ring_size == 0 || min_ring_size > max_ring_size ||
	    max_ring_size > RING_ENVOY_MAX_RING_SIZE) {
		snprintf(err, errlen, "ring sizes %u to %u: Envoy needs 1 <= "
			 "minimum_ring_size <= maximum_ring_size <= %u",
			 min_ring_size, max_ring_size, RING_ENVOY_MAX_RING_SIZE);
		return -1;
	}
	*sum = 0;
	for (size_t i = 0; i < n; i++) {
		const char *ident = envoy_identity(&m[i]);

		if (ident == NULL || ident[0] == '\0') {
			snprintf(err, errlen, "backend %zu has no name or id; "
				 "Envoy hashes the host's address or hash_key", i);
			return -1;
		}
		if (!(m[i].weight >= 0 && m[i].weight < 4294967296.0) ||
		    m[i].weight != floor(m[i].weight)) {
			snprintf(err, errlen, "backend %s: weight %g is not a whole "
				 "number from 0 to 4294967295; Envoy's "
				 "load_balancing_weight is an integer",
				 m[i].name ? m[i].name : ident, m[i].weight);
			return -1;
		}
		*sum += (uint64_t)m[i].weight;
	}
	if (*sum > UINT32_MAX) {
		snprintf(err, errlen, "total weight %llu is more than 4294967295, "
			 "which Envoy refuses; scale the weights down",
			 (unsigned long long)*sum);
		return -1;
	}
	return 0;
}

/* Ring::Ring's loop over the hosts with weight > 0, in order: each adds
 * scale * its normalised weight to the target and takes points while the
 * running count is below it. With p NULL only counts; otherwise writes the
 * points, hashing "identity_i" in buf (big enough for the longest identity
 * and "_" and 20 digits). Returns the number of points, or -1 when it
 * would pass limit. */
static long envoy_fill(const struct ring_member *m, size_t n, uint64_t sum, double scale,
		       size_t limit, struct ring_point *p, char *buf)
{
	double current = 0.0, target = 0.0;
	size_t at = 0;

	for (size_t b = 0; b < n; b++) {
		const char *ident = envoy_identity(&m[b]);
		size_t len = strlen(ident);

		if (m[b].weight <= 0)
			continue;
		/* normalizeHostWeights: weight * 1.0 (the locality's share
		 * without locality weighting) / sum, in double */
		target += scale * (m[b].weight * 1.0 / (double)sum);
		if (p != NULL)
			memcpy(buf, ident, len);
		for (uint64_t i = 0; current < target; i++, current += 1.0) {
			if (at == limit)
				return -1;
			if (p != NULL) {
				int d = snprintf(buf + len, 23, "_%llu", (unsigned long long)i);

				p[at].pos = XXH64(buf, len + (size_t)d, 0);
				p[at].backend = (uint32_t)b;
			}
			at++;
		}
	}
	return (long)at;
}

int ring_envoy_points(const struct ring_member *m, size_t n, unsigned min_ring_size,
		      unsigned max_ring_size, struct ring_point **out, size_t *nout,
		      char *err, size_t errlen)
{
	struct ring_point *p = NULL;
	char *buf = NULL;
	uint64_t sum;
	double min_w = 1.0, scale;
	size_t longest = 0;
	long count;

	*out = NULL;
	*nout = 0;
	if (envoy_check(m, n, min_ring_size, max_ring_size, &sum, err, errlen) != 0)
		goto fail;
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(envoy_identity(&m[i]));

		if (m[i].weight > 0) {
			min_w = fmin(min_w, m[i].weight * 1.0 / (double)sum);
			longest = len > longest ? len : longest;
		}
	}
	if (sum == 0)
		return 0;
	scale = fmin(ceil(min_w * min_ring_size) / min_w, (double)max_ring_size);
	count = envoy_fill(m, n, sum, scale, RING_MAX_POINTS, NULL, NULL);
	if (count < 0) {
		snprintf(err, errlen, "ring would have more than %u points, the "
			 "limit; lower maximum_ring_size or even out the weights",
			 RING_MAX_POINTS);
		goto fail;
	}
	p = malloc((size_t)(count ? count : 1) * sizeof(*p));
	buf = malloc(longest + 24);
	if (p == NULL || buf == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	envoy_fill(m, n, sum, scale, (size_t)count, p, buf);
	free(buf);
	*out = p;
	*nout = (size_t)count;
	return 0;
fail:
	free(buf);
	free(p);
	return -1;
}

uint64_t ring_envoy_key(const void *key, size_t len)
{
	return XXH64(key, len, 0);
}
