/*
 * curlev.h -- libcurl's multi interface driven by a libevent event base
 * (the socket and timer callbacks), for the main thread's health checks.
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

struct curlev *curlev_new(struct event_base *base, curlev_done_fn done, void *arg);
/* Start a transfer. 0 or -1. */
int curlev_add(struct curlev *ce, CURL *easy);
/* Abandon a transfer in progress (no done callback). */
void curlev_remove(struct curlev *ce, CURL *easy);
/* Call after every easy handle was removed; before event_base_free. */
void curlev_free(struct curlev *ce);

#endif
