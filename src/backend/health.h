/*
 * health.h -- is a backend up? Passive checks count failed requests
 * (worker threads); active checks GET a health path with libcurl on the
 * main thread's event base, with rise/fall hysteresis. Every transition is
 * logged with its reason. A down backend keeps its ring points: the walk
 * skips it, and its keys come back when it does.
 */
#ifndef RINGPROXY_HEALTH_H
#define RINGPROXY_HEALTH_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/socket.h>

#include "config/conf.h"
#include "backend/registry-t.h"

struct event_base;
struct snapshot;

/* Worker threads: a request to b succeeded (a response head arrived). */
void health_request_ok(struct backend *b, const struct conf_backend *cb);
/* Worker threads: a request to backend i of snapshot s (the request's)
 * failed (connect error, timeout, or a 5xx when passive_5xx); why is a
 * short reason for the log. At [health] fall failures in a row it goes
 * down, unless it is the last backend of s up: then it stays in service,
 * its failures counted (stats: "failing"). */
void health_request_failed(const struct snapshot *s, int i, const char *why);
/* Worker threads: may a down backend take one request as a trial? Only
 * without active checks, once per back-off period. */
bool health_trial(struct backend *b, const struct conf_backend *cb, const struct conf *conf);
/* Any thread: would health_trial let one through now? Claims nothing. */
bool health_trial_due(const struct backend *b, const struct conf_backend *cb);

/* Main thread: b got a new address on reload; forget what was known of
 * the old one (an up backend stays up, a down one comes up to be checked
 * afresh). */
void health_reset(struct backend *b, const char *url);

/* Main thread: b's name did not resolve (why: getaddrinfo's words). It
 * is down until the name resolves and it passes its checks (or, with
 * passive checks only, a trial request). */
void health_unresolved(struct backend *b, const char *host, const char *why);

/* Main thread: a backend name of the current snapshot that did not
 * resolve does now, to addr. Returns 0 when the address was taken (a new
 * snapshot applied), -1 to look the name up again next interval. */
typedef int health_resolved_fn(void *arg, const char *name, const struct sockaddr *addr,
			       socklen_t len);

/* Main thread: active checks of the backends of a snapshot, and lookups
 * of the names that did not resolve, every health interval, off the
 * event loop (resolve.c); resolved(arg, ...) tells of each that does. */
struct health;
struct health *health_new(struct event_base *base, health_resolved_fn *resolved, void *arg);
/* Check the backends of s from now on (a reference to s is taken; the
 * previous snapshot's checks stop). A backend without an address is not
 * checked: its name is looked up instead. */
void health_apply(struct health *h, struct snapshot *s);
void health_free(struct health *h);

/* `ringproxy -t --probe` (known NULL) and `plan --probe`: GET the health
 * path (or / when none is set) of every backend of c, or with known those
 * new to it (not there, or with another url), all at once; print
 * reachability, status and time per backend (or that there is none to
 * probe). Returns 0, or 1 if a backend
 * with weight > 0 is unreachable or answers outside its expected status
 * range. */
int health_probe(const struct conf *c, const struct conf *known, FILE *out);

#endif
