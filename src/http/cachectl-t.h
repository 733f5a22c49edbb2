/*
 * cachectl-t.h -- what the cache may do for a request (cachectl.h has the
 * functions that decide it), held in each request (request-t.h).
 */
#ifndef RINGPROXY_CACHECTL_T_H
#define RINGPROXY_CACHECTL_T_H

#include <stdint.h>

enum cachectl_req_kind {
	CACHECTL_PASS = 0,      /* forward, neither served from nor stored */
	CACHECTL_LOOKUP,        /* GET/HEAD: may be served from the cache */
	CACHECTL_REFRESH,       /* GET/HEAD with no-cache or max-age=0: go to
				   the backend, the response may be stored */
	CACHECTL_INVALIDATE,    /* unsafe method: a non-error response
				   invalidates the URL (cachectl_invalidates) */
};

#define CACHECTL_RQ_HEAD     0x1u   /* HEAD: served from a stored GET */
#define CACHECTL_RQ_AUTH     0x2u   /* has Authorization */
#define CACHECTL_RQ_NO_STORE 0x4u   /* no-store: the response is not stored */
#define CACHECTL_RQ_RANGE    0x8u   /* one byte range (range_first, range_last):
				       answered from a stored complete GET,
				       else forwarded and nothing stored
				       (with CACHECTL_RQ_NO_STORE) */
#define CACHECTL_RQ_COND     0x10u  /* has If-None-Match or If-Modified-Since
				       (cachectl_not_modified may say 304) */

struct cachectl_req {
	enum cachectl_req_kind kind;
	unsigned flags;             /* CACHECTL_RQ_* */
	unsigned ae;                /* normalised Accept-Encoding */
	int64_t max_age;            /* request max-age, -1 if none */
	int64_t min_fresh;          /* 0 if none */
	const char *why;            /* static text for PASS / REFRESH */
	/* CACHECTL_RQ_RANGE: bytes=first-last; first -1 for a suffix
	 * (-last), last -1 for an open end (first-) */
	int64_t range_first, range_last;
	/* The cache's own policy, set by the caller after
	 * cachectl_request() (zero: none): the targeted field read before
	 * CDN-Cache-Control ([cache] target_field; NULL: none), and the
	 * cap on heuristic freshness ([cache] heuristic_max, seconds; 0:
	 * no heuristic freshness). Read by cachectl_response(). */
	const char *target_field;
	int64_t heuristic_max;
};

#endif
