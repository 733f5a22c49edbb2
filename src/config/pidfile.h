/*
 * pidfile.h -- [proxy] pid_file (or --pid-file): the daemon's pid in a
 * file, for the scripts and init systems that look there (HAProxy's -p,
 * NGINX's pid). Main thread, at start and at exit.
 */
#ifndef RINGPROXY_PIDFILE_H
#define RINGPROXY_PIDFILE_H

#include <stdbool.h>
#include <stddef.h>

/* Before the listeners: may this process take path? A file naming a
 * running ringproxy other than this one is refused (-1 with err), unless
 * share (--share-listen: a binary upgrade, whose new process takes the
 * file over); one naming no process, or a process that is no ringproxy
 * (its pid reused), is stale: 0, and pidfile_write replaces it. */
int pidfile_check(const char *path, bool share, char *err, size_t len);

/* After the listeners: write this process's pid to path, whole or not at
 * all (a file beside it, renamed over it). 0, or -1 with err. */
int pidfile_write(const char *path, char *err, size_t len);

/* At exit: remove path if it still holds this process's pid (a binary
 * upgrade's new process may have taken it over). */
void pidfile_remove(const char *path);

#endif
