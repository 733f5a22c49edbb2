/*
 * statsdoc.h -- what the admin listener emits, as a sample: /metrics and
 * /stats of a reading with every optional part present (a cache, a
 * backend that was checked, a reload, a warm ramp) and every value 0,
 * rendered by stats.c's own writers. ringproxy-stats(7) is made from it
 * at build time (`ringproxy --help-stats`), so the page lists what the
 * writers write and cannot drift from them.
 */
#ifndef RINGPROXY_STATSDOC_H
#define RINGPROXY_STATSDOC_H

#include <stdio.h>

/* Writes "@@ prometheus", the /metrics text, "@@ json", the /stats
 * document, "@@ rates", one "proxy|backend NAME HELP" line per rate, to
 * out. 0, or -1 out of memory or on a write error. */
int statsdoc_print(FILE *out);

#endif
