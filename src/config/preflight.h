/*
 * preflight.h -- what `ringproxy -t` and the start check beyond the file
 * itself, on this host: the log file's directory, backend names, and the
 * listen addresses (free, and allowed to this process). conf.c checks the
 * file; these checks need the system. Main thread, before anything binds.
 */
#ifndef RINGPROXY_PREFLIGHT_H
#define RINGPROXY_PREFLIGHT_H

#include "config/conf.h"

enum preflight_flags {
	PREFLIGHT_START = 1,            /* at start, not -t: see preflight.c */
	PREFLIGHT_SHARE_LISTEN = 2,     /* --share-listen: another process on
					   our addresses is expected */
};

/* What the checks found: errors stop -t (exit 1) and the start;
 * warnings are reported and change nothing. Each message is
 * "FILE[:LINE]: what; what to do". */
struct preflight {
	struct conf_errors errors;
	struct conf_errors warnings;
};

/* Run the checks of c with flags (enum preflight_flags) into pf, which
 * the caller frees with preflight_free. Returns the number of errors. */
size_t preflight_run(const struct conf *c, unsigned flags, struct preflight *pf);
void preflight_free(struct preflight *pf);

/* Is process pid a ringproxy (its command name, into comm of len bytes,
 * is ours or "ringproxy"; "" when it cannot be read: no such process)? */
bool preflight_is_ringproxy(long pid, char *comm, size_t len);

#endif
