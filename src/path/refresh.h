/*
 * refresh.h -- background refreshes of stale cached objects
 * (stale-while-revalidate, RFC 5861): the request that found the object
 * stale is answered from it at once, and the fill cache_lookup() handed it
 * is led here instead, by a transfer of its own to the backend (libcurl,
 * driven by the worker's event base through curlev.c). The client never
 * waits for it; concurrent lookups of the key see the fill in flight and
 * start none (cache.c coalesces them). Worker thread only.
 */
#ifndef RINGPROXY_REFRESH_H
#define RINGPROXY_REFRESH_H

#include "cache/cache.h"
#include "http/query-t.h"
#include "path/worker-t.h"

/* What a refresh takes of the request that found the object stale: its
 * worker, the snapshot it routes by and its key's position there, its head
 * (Host and target; valid for the call only) and what the cache may do for
 * it (its Accept-Encoding variant). */
struct refresh_req {
	struct worker *w;
	struct snapshot *snap;
	uint64_t keypos;
	const struct http1_msg *msg;
	const struct query_sent *qsent; /* msg's target as received
					   (query_apply), NULL: as msg */
	struct cachectl_req cc;
};

/*
 * Lead fill f in the background for request rq (its head, Host and
 * target, Accept-Encoding variant; rq->snap for the backend and the
 * timeouts): GET the object from the backend a request for it would go
 * to now, conditional on stale's validators, and store what comes back
 * (on a 304, stale's body under the updated head). f is ended either
 * way (stored, or aborted when the backend fails or the response is not
 * storable). stale is referenced as long as needed.
 */
void refresh_start(const struct refresh_req *rq, struct cache_fill *f, const struct cache_obj *stale);

/* On the worker's teardown, after its thread stopped: abort every
 * refresh still running. */
void refresh_free_all(struct worker *w);

#endif
