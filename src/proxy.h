/*
 * proxy.h -- the running daemon: listeners, workers, signals, the current
 * snapshot. main() hands it a loaded config; it returns the exit status.
 */
#ifndef RINGPROXY_PROXY_H
#define RINGPROXY_PROXY_H

#include "config/conf.h"
#include "path/proxy-t.h"

/* Run until SIGTERM/SIGINT; conf is taken over. flags: enum
 * preflight_flags (PREFLIGHT_SHARE_LISTEN for --share-listen). pid_file:
 * --pid-file's path, or NULL for conf's [proxy] pid_file. Returns the
 * exit code. */
int proxy_run(const char *path, struct conf *conf, unsigned flags, const char *pid_file);

#endif
