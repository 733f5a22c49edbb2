/*
 * proxy.h -- the running daemon: listeners, workers, signals, the current
 * snapshot. main() hands it a loaded config; it returns the exit status.
 */
#ifndef RINGPROXY_PROXY_H
#define RINGPROXY_PROXY_H

#include <stdatomic.h>

#include "conf.h"

struct worker;

/* Process-wide state the workers share. */
struct proxy {
	_Atomic unsigned nconns;        /* client connections open */
	_Atomic unsigned max_conns;     /* from the current config */
	_Atomic uint64_t accepted;
	_Atomic uint64_t refused;       /* over max_connections */
	struct worker **workers;
	unsigned nworkers;
};

/* Run until SIGTERM/SIGINT; conf is taken over. Returns the exit code. */
int proxy_run(const char *path, struct conf *conf);

#endif
