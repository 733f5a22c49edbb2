/*
 * tier.h -- the cache tier's own verdict on a response: did the backend's
 * cache answer it from store (a hit) or fetch it from the origin (a
 * miss)? Read from the headers that cache sets, on the head the codec
 * already parsed: no allocation, no copy. Pure; any thread.
 */
#ifndef RINGPROXY_TIER_H
#define RINGPROXY_TIER_H

#include "http/http1.h"

/* [proxy] tier_status, in the order of its choices in conf.c. */
enum tier_status {
	TIER_AUTO = 0,          /* the first of the four below present */
	TIER_CACHE_STATUS,      /* Cache-Status (RFC 9211) */
	TIER_X_VARNISH,         /* X-Varnish: two ids = hit */
	TIER_X_CACHE,           /* X-Cache: HIT / MISS (Squid, nginx, CDNs) */
	TIER_AGE,               /* Age > 0 = hit */
	TIER_OFF,               /* no verdict read */
};

enum tier_verdict { TIER_NONE = 0, TIER_HIT, TIER_MISS };

/* The verdict of response head m under mode: TIER_NONE when the header
 * mode reads is absent or says neither (and always under TIER_OFF).
 * Under TIER_AUTO, a response with none of the cache headers is judged
 * by Age (absent or 0: a miss), as under TIER_AGE. */
enum tier_verdict tier_verdict(const struct http1_msg *m, enum tier_status mode);

#endif
