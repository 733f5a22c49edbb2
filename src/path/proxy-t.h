/*
 * proxy-t.h -- the running daemon's process-wide state (struct proxy), for
 * the modules that read or count into it: the workers and the request
 * path, the stats and the admin listener. proxy.h has proxy_run.
 */
#ifndef RINGPROXY_PROXY_T_H
#define RINGPROXY_PROXY_T_H

#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "base/stats-t.h"

struct cache;
struct rates;
struct ring_arc;
struct worker;
struct snapshot;

/* A reload attempt, for the log and the stats endpoint. */
struct proxy_reload {
	time_t when;                    /* 0 = none yet */
	bool ok;
	char text[1536];                /* the report, or the errors */
	double moved;                   /* share of keys moved (ok only) */
	/* the warm ramp's words in text ("; ramping over 5m"): where they
	 * are (ramp_len 0: none) and when that ramp ends (Unix ms), so the
	 * page leaves them out once it has */
	size_t ramp_at, ramp_len;
	long long ramp_end_ms;
	uint64_t seq;                   /* its place among reloads and ctl
					   changes, 1 the first */
};

/* Reload attempts the stats endpoint lists. */
#define PROXY_RELOADS 8
/* Arcs of moved keys kept for the page's ring (a picture: the rest of a
 * finely interleaved change is left out). */
#define PROXY_MOVED_ARCS 4096

struct discover;
struct dnssrv;

/* Process-wide state the workers share. */

struct proxy {
	_Atomic unsigned nconns;        /* client connections open */
	_Atomic unsigned max_conns;     /* from the current config */
	_Atomic unsigned tls_conns;     /* HTTPS client connections open */
	STATS_PROXY(STATS_SHARED_FIELD) /* accepted, refused, ... */
	struct worker **workers;
	unsigned nworkers;
	struct cache *cache;            /* the hot-object cache, shared by the
					   workers (and read by the admin
					   listener: /ring?url= says whether it
					   holds a URL); lives from start to
					   exit, reconfigured on reload; NULL
					   in tests that make none */

	/* main thread only */
	struct snapshot *current;       /* the snapshot new requests get */
	time_t started;                 /* Unix seconds: request ids' prefix */
	int64_t started_ms;             /* registry_now_ms at the start: uptime
					   is monotonic, whatever the wall clock does */
	uint64_t generation;            /* successful loads, 1 = the first */
	struct proxy_reload last_reload;
	double last_moved_share;
	struct proxy_reload reloads[PROXY_RELOADS]; /* the last attempts: */
	unsigned nreloads;              /* reloads[(nreloads - 1) % N] newest */
	struct ring_arc *moved;         /* the keys the last successful reload
					   moved, on the current ring */
	size_t nmoved;
	/* the last runtime state changes (ringproxy ctl, POST /backend),
	 * for the page's list beside the reloads */
	struct proxy_reload ctls[PROXY_RELOADS];
	unsigned nctls;                 /* ctls[(nctls - 1) % N] newest */
	uint64_t changes;               /* reloads and ctl changes so far */
	time_t conf_loaded;             /* when the current config was read */
	struct rates *rates;            /* one sample a second (stats_sample) */
	uint64_t fingerprint;           /* the current ring's (ring_fingerprint) */
	const struct discover *discover;/* [discovery]'s members and counts;
					   NULL without srv */
	const struct dnssrv *dns;       /* its poller; NULL without srv */
};

#endif
