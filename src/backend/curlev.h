/*
 * curlev.h -- libcurl's multi interface driven by a libevent event base
 * (the socket and timer callbacks), for the main thread's health checks
 * and each worker's background refreshes.
 * Knows nothing of HTTP semantics: it runs easy handles and reports each
 * one's end.
 */
#ifndef RINGPROXY_CURLEV_H
#define RINGPROXY_CURLEV_H

#include <curl/curl.h>
#include <event2/event.h>

struct curlev;

/* done(easy, result, arg) runs on the base's thread when a transfer ends;
 * the easy handle has been removed from the multi and belongs to the
 * callback again. */
typedef void (*curlev_done_fn)(CURL *easy, CURLcode result, void *arg);

/*
 * A new easy handle for every transfer ringproxy makes (health checks, the
 * -t --probe check, refreshes, purges, the purge command), set up once so
 * none can miss it: straight to the URL's host, never through a proxy
 * named by the environment (http_proxy, all_proxy: CURLOPT_PROXY "" and
 * CURLOPT_NOPROXY "*"), whose answers a refresh would store and serve;
 * the path sent as given (CURLOPT_PATH_AS_IS: the caller has already made
 * it what the request path sends, and libcurl's own squashing of "/../"
 * would climb out of a backend's prefix); http only; no signals. NULL when
 * memory ran out; curl_easy_cleanup frees it. Any thread.
 */
CURL *curlev_easy_new(void);

struct curlev *curlev_new(struct event_base *base, curlev_done_fn done, void *arg);
/* Start a transfer. 0 or -1. */
int curlev_add(struct curlev *ce, CURL *easy);
/* Abandon a transfer in progress (no done callback). */
void curlev_remove(struct curlev *ce, CURL *easy);
/* Call after every easy handle was removed; before event_base_free. */
void curlev_free(struct curlev *ce);

#endif
