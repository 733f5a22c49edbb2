/*
 * ring-nginx.c -- NGINX's consistent hash (`hash KEY consistent`,
 * ngx_http_upstream_update_chash and ngx_http_upstream_init_chash_peer in
 * src/http/modules/ngx_http_upstream_hash_module.c), itself compatible
 * with Cache::Memcached::Fast:
 *  - a server's identity is its `server` string as written, never its
 *    resolved address; "unix:PATH" is the host PATH with no port, else the
 *    port is what follows the last ':' when only digits follow it, and the
 *    host what precedes it ("[::1]:80" -> "[::1]" and "80"; "cache.example"
 *    -> the whole string and no port);
 *  - weight w gives 160 w points: point k is the CRC-32 of host, one NUL
 *    byte, port, then the four bytes of point k-1 least significant first
 *    (zeros for point 0), which is what NGINX hashes on either endianness;
 *  - a key is the CRC-32 of its bytes; its owner the first point >= it.
 * The CRC-32 is zlib's (ISO-HDLC: polynomial 0x04C11DB7 reflected, init
 * and final xor 0xFFFFFFFF), the same function as ngx_crc32_*; zlib's
 * crc32() continues a finished CRC, so host/port is hashed once a server.
 * Pure; ring.c sorts the points and collapses equal ones to the first, as
 * NGINX's qsort (stable in glibc) and its dedup loop do.
 */
#include "ring/ring-compat.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

/* NGINX's points per unit of weight. */
#define RING_NGINX_POINTS 160

/* The host and port of server string s, as NGINX splits it. */
static void ring_nginx_split(const char *s, size_t len, size_t *hostoff, size_t *hostlen,
			     size_t *portoff, size_t *portlen)
{
	*hostoff = 0;
	*hostlen = len;
	*portoff = len;
	*portlen = 0;
	if (len >= 5 && strncasecmp(s, "unix:", 5) == 0) {
		*hostoff = 5;
		*hostlen = len - 5;
		return;
	}
	for (size_t j = 0; j < len; j++) {
		char c = s[len - j - 1];

		if (c == ':') {
			*hostlen = len - j - 1;
			*portoff = len - j;
			*portlen = j;
			return;
		}
		if (c < '0' || c > '9')
			return;
	}
}

/* Whole weights only: NGINX's weight=N is an integer. */
static int ring_nginx_weight(const struct ring_member *m, uint32_t *w, char *err, size_t errlen)
{
	if (!isfinite(m->weight) || m->weight < 0 || m->weight != floor(m->weight) ||
	    m->weight > (double)(RING_MAX_POINTS / RING_NGINX_POINTS)) {
		snprintf(err, errlen, "backend %s: weight %g is not a whole number from 0 to %u; "
			 "NGINX weights are whole", m->name, m->weight, RING_MAX_POINTS / RING_NGINX_POINTS);
		return -1;
	}
	*w = (uint32_t)m->weight;
	return 0;
}

int ring_nginx_points(const struct ring_member *m, size_t n, struct ring_point **out, size_t *nout,
		      char *err, size_t errlen)
{
	struct ring_point *p = NULL;
	uint64_t total = 0;
	size_t k = 0;
	int rc = -1;

	*out = NULL;
	*nout = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t w;

		if (ring_nginx_weight(&m[i], &w, err, errlen) < 0)
			goto out;
		total += (uint64_t)w * RING_NGINX_POINTS;
	}
	if (ring_compat_limit(total, err, errlen) != 0)
		goto out;
	p = malloc((total ? total : 1) * sizeof(*p));
	if (!p) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const char *id = m[i].id ? m[i].id : m[i].name;
		size_t len = strlen(id), ho, hl, po, pl;
		unsigned char prev[4] = { 0, 0, 0, 0 };
		uLong base = crc32(0L, Z_NULL, 0);
		/* the first loop checked every weight; = 0 only for the
		 * optimiser, which cannot see that it sets w */
		uint32_t w = 0;

		(void)ring_nginx_weight(&m[i], &w, err, errlen);
		ring_nginx_split(id, len, &ho, &hl, &po, &pl);
		base = crc32(base, (const Bytef *)id + ho, (uInt)hl);
		base = crc32(base, (const Bytef *)"", 1);
		base = crc32(base, (const Bytef *)id + po, (uInt)pl);
		for (uint32_t j = 0; j < w * RING_NGINX_POINTS; j++) {
			uint32_t h = (uint32_t)crc32(base, prev, 4);

			p[k].pos = (uint64_t)h << 32;
			p[k].backend = (uint32_t)i;
			k++;
			prev[0] = (unsigned char)h;
			prev[1] = (unsigned char)(h >> 8);
			prev[2] = (unsigned char)(h >> 16);
			prev[3] = (unsigned char)(h >> 24);
		}
	}
	*out = p;
	*nout = k;
	p = NULL;
	rc = 0;
out:
	free(p);
	return rc;
}

uint64_t ring_nginx_key(const void *key, size_t len)
{
	uLong h = crc32(0L, Z_NULL, 0);
	const Bytef *b = key;

	/* crc32() takes an unsigned int length: long keys in pieces */
	while (len > 0) {
		uInt part = len > 0x40000000u ? 0x40000000u : (uInt)len;

		h = crc32(h, b, part);
		b += part;
		len -= part;
	}
	return (uint64_t)(uint32_t)h << 32;
}
