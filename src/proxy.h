/*
 * proxy.h -- the running daemon: listeners, workers, signals, the current
 * snapshot. main() hands it a loaded config; it returns the exit status.
 */
#ifndef RINGPROXY_PROXY_H
#define RINGPROXY_PROXY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#include "conf.h"
#include "stats-t.h"

struct worker;
struct snapshot;

/* The last reload attempt, for the log and the stats endpoint. */
struct proxy_reload {
	time_t when;                    /* 0 = none yet */
	bool ok;
	char text[1536];                /* the report, or the errors */
};

/* Process-wide state the workers share. */
struct cache;

struct proxy {
	_Atomic unsigned nconns;        /* client connections open */
	_Atomic unsigned max_conns;     /* from the current config */
	STATS_PROXY(STATS_SHARED_FIELD) /* accepted, refused, ... */
	struct worker **workers;
	unsigned nworkers;
	struct cache *cache;            /* the hot-object cache, shared by the
					   workers; lives from start to exit,
					   reconfigured on reload */

	/* main thread only */
	struct snapshot *current;       /* the snapshot new requests get */
	time_t started;
	uint64_t generation;            /* successful loads, 1 = the first */
	struct proxy_reload last_reload;
	double last_moved_share;
};

/* Run until SIGTERM/SIGINT; conf is taken over. flags: enum
 * preflight_flags (PREFLIGHT_SHARE_LISTEN for --share-listen). Returns
 * the exit code. */
int proxy_run(const char *path, struct conf *conf, unsigned flags);

#endif
