/*
 * query.h -- query normalisation ([ring] query, drop_params): the rules a
 * request's query string is rewritten by before it is keyed on the ring,
 * keyed in the cache and (normalize_forward) forwarded, so that
 * "?w=200&h=200", "?h=200&w=200" and "?h=200&w=200&utm_source=x" are one
 * object everywhere. Pure: no I/O, no allocation; any thread may call
 * any function. The rules are parsed once (main thread, conf.c) and read
 * by every worker.
 */
#ifndef RINGPROXY_QUERY_H
#define RINGPROXY_QUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "http/http1.h"
#include "http/query-t.h"

/* Parse list, comma-separated glob patterns of parameter names ('*' any
 * run of bytes, every other byte itself; spaces around a pattern are
 * not part of it), into r->drop, whose slices point into list (which
 * must outlive r). 0, or -1 with err: an empty pattern, a byte a name
 * cannot hold, more than QUERY_MAX_DROP. */
int query_rules_parse(struct query_rules *r, const char *list, char *err, size_t errlen);

/* Whether r changes anything: false for as-is without a drop list, whose
 * keys and targets are the request's bytes exactly. */
bool query_rules_active(const struct query_rules *r);

/* Whether a and b normalise every query the same way. */
bool query_rules_same(const struct query_rules *a, const struct query_rules *b);

/* Whether parameter name[0..len) matches one of r's patterns. */
bool query_dropped(const struct query_rules *r, const char *name, size_t len);

/*
 * The query q[0..len) ('?' excluded) normalised by r into out, which has
 * room for len bytes (the result is never longer): parameters split at
 * '&'; empty ones and those whose name (the bytes before the first '=',
 * all of them without one) matches a drop pattern removed; sorted by
 * name as unsigned bytes, a shorter name first, equal names in the order
 * sent (QUERY_SORTED); joined by '&'. Bytes are compared raw, never
 * percent-decoded. Returns the length written (0: no parameter left, so
 * the '?' goes too), or -1 when q stays as sent: r is not active, or q
 * is longer than QUERY_TARGET_MAX or has more than QUERY_MAX_PARAMS
 * parameters. Idempotent.
 */
ssize_t query_normalize(const struct query_rules *r, const char *q, size_t len, char *out);

/*
 * Normalise request m's query (query_normalize) in place of its slices:
 * when that changes it, m->target and m->query point into buf (room for
 * QUERY_TARGET_MAX bytes, or for m->target.len if fewer), m->has_query
 * is false when no parameter is left, and *sent keeps the slices as
 * received; otherwise m and *sent ({0}) are left alone. m->path is never
 * touched. Returns whether m changed.
 */
bool query_apply(const struct query_rules *r, struct http1_msg *m, char *buf, struct query_sent *sent);

/* m's target and query put back as received (sent from query_apply; no
 * change when it changed nothing): for the requests the proxy makes of
 * its own under normalize_forward off (a refresh, a purge's fan-out). */
void query_restore(struct http1_msg *m, const struct query_sent *sent);

#endif
