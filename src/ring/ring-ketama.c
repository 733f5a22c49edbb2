/*
 * ring-ketama.c -- the ring of libmemcached's weighted ketama and
 * twemproxy's `distribution: ketama` (ring-compat.h says what each does),
 * rebuilt from what they compute so that a tier behind either keeps its
 * keys on the same servers: the points of each server and the two key
 * hashes, MD5 and twemproxy's 32-bit fnv1a_64.
 *
 * Pure; MD5 comes from md5.c (the calling thread's state). The builder
 * runs on the main thread, the key functions on any.
 */
#include "ring/ring-compat.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "base/md5.h"

/* Both proxies: 160 points per server at an even share, 4 per digest. */
#define KETAMA_POINTS_PER_SERVER 160
#define KETAMA_POINTS_PER_HASH   4

/* twemproxy's fnv1a_64: the 64-bit FNV constants cut to their low 32 bits. */
#define KETAMA_FNV_INIT  UINT32_C(0x84222325)
#define KETAMA_FNV_PRIME UINT32_C(0x000001b3)

static const char *ketama_identity(const struct ring_member *m)
{
	return m->id != NULL ? m->id : m->name;
}

/* Points for a server of weight w of total among nlive servers: both
 * sources compute pct = (float)w / (float)total, then
 * floor((float)(pct * 160 / 4 * (float)nlive + 1e-10)) * 4. Each step is
 * kept in a float so that no wider evaluation changes a rounding; the
 * 1e-10 (a float in libmemcached, a double in twemproxy that the cast
 * brings back) is below half a float step of any count that reaches 1,
 * and is kept for the letter of it. */
static uint32_t ketama_points_for(uint32_t w, uint32_t total, uint32_t nlive)
{
	float pct = (float)w / (float)total;
	float share = pct * KETAMA_POINTS_PER_SERVER;
	float quarter = share / KETAMA_POINTS_PER_HASH;
	float scaled = quarter * (float)nlive;
	float nudged = scaled + 0.0000000001F;

	return (uint32_t)floorf(nudged) * KETAMA_POINTS_PER_HASH;
}

/* Check the members: a name or id to hash, and whole weights whose total
 * fits the uint32_t that twemproxy adds them in. Counts in *total and
 * *nlive the weight and number of members with points. 0, or -1 with err. */
static int ketama_check(const struct ring_member *m, size_t n, uint32_t *total,
			uint32_t *nlive, char *err, size_t errlen)
{
	uint64_t sum = 0;

	if (n > RING_MAX_BACKENDS) {
		snprintf(err, errlen, "%zu backends, more than the limit of %u; "
			 "split the tier", n, RING_MAX_BACKENDS);
		return -1;
	}
	*nlive = 0;
	for (size_t i = 0; i < n; i++) {
		const char *ident = ketama_identity(&m[i]);

		if (ident == NULL || ident[0] == '\0') {
			snprintf(err, errlen, "backend %zu has no name or id; "
				 "ketama hashes the server's name", i);
			return -1;
		}
		if (!(m[i].weight >= 0 && m[i].weight < 4294967296.0) ||
		    m[i].weight != floor(m[i].weight)) {
			snprintf(err, errlen, "backend %s: weight %g is not a whole "
				 "number from 0 to 4294967295; ketama weights are "
				 "integers", m[i].name ? m[i].name : ident, m[i].weight);
			return -1;
		}
		sum += (uint64_t)m[i].weight;
		if (m[i].weight > 0)
			(*nlive)++;
	}
	if (sum > UINT32_MAX) {
		snprintf(err, errlen, "total weight %llu is more than 4294967295, "
			 "which twemproxy adds weights in; scale the weights down",
			 (unsigned long long)sum);
		return -1;
	}
	*total = (uint32_t)sum;
	return 0;
}

/* The four points of the digest of "ident-j", written to p[0..3]. 0, or -1
 * with err. */
static int ketama_digest_points(const char *ident, uint32_t j, uint32_t backend,
				struct ring_point *p, char *err, size_t errlen)
{
	char suffix[16];
	unsigned char d[MD5_LEN];
	int len = snprintf(suffix, sizeof(suffix), "-%u", (unsigned)j);
	struct iovec v[2] = {
		{ (void *)(uintptr_t)ident, strlen(ident) },
		{ suffix, (size_t)len },
	};

	if (md5_digest(v, 2, d, err, errlen) != 0)
		return -1;
	for (int k = 0; k < KETAMA_POINTS_PER_HASH; k++) {
		const unsigned char *b = d + 4 * k;
		uint32_t h = (uint32_t)b[0] | (uint32_t)b[1] << 8 |
			     (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;

		p[k].pos = (uint64_t)h << 32;
		p[k].backend = backend;
	}
	return 0;
}

int ring_ketama_points(const struct ring_member *m, size_t n, struct ring_point **out,
		       size_t *nout, char *err, size_t errlen)
{
	struct ring_point *p = NULL;
	uint32_t total, nlive;
	size_t count = 0, at = 0;

	*out = NULL;
	*nout = 0;
	if (ketama_check(m, n, &total, &nlive, err, errlen) != 0)
		goto fail;
	for (size_t i = 0; i < n; i++)
		if (m[i].weight > 0)
			count += ketama_points_for((uint32_t)m[i].weight, total, nlive);
	if (count == 0)
		return 0;
	p = malloc(count * sizeof(*p));
	if (p == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t np = m[i].weight > 0 ?
			ketama_points_for((uint32_t)m[i].weight, total, nlive) : 0;

		for (uint32_t j = 0; j < np / KETAMA_POINTS_PER_HASH; j++) {
			if (ketama_digest_points(ketama_identity(&m[i]), j, (uint32_t)i,
						 p + at, err, errlen) != 0)
				goto fail;
			at += KETAMA_POINTS_PER_HASH;
		}
	}
	*out = p;
	*nout = count;
	return 0;
fail:
	free(p);
	return -1;
}

uint64_t ring_ketama_key(const void *key, size_t len)
{
	unsigned char d[MD5_LEN];
	struct iovec v = { (void *)(uintptr_t)key, len };

	/* As ring_hash: a thread that hashes keys has its digest state, so a
	 * failure is the library breaking under us, not bad input. */
	if (md5_digest(&v, 1, d, NULL, 0) != 0)
		abort();
	return (uint64_t)((uint32_t)d[0] | (uint32_t)d[1] << 8 |
			  (uint32_t)d[2] << 16 | (uint32_t)d[3] << 24) << 32;
}

uint64_t ring_ketama_key_fnv1a64(const void *key, size_t len)
{
	const signed char *s = key;
	uint32_t h = KETAMA_FNV_INIT;

	/* twemproxy reads the key as char and widens it to uint32_t: a byte
	 * of 0x80 or more becomes 0xffffff80 and up on x86-64, where char is
	 * signed, and that is what its owners were chosen by. */
	for (size_t i = 0; i < len; i++) {
		h ^= (uint32_t)(int32_t)s[i];
		h *= KETAMA_FNV_PRIME;
	}
	return (uint64_t)h << 32;
}
