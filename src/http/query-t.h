/*
 * query-t.h -- the types of query normalisation ([ring] query,
 * drop_params) that a config and a request hold; query.h has the
 * functions.
 */
#ifndef RINGPROXY_QUERY_T_H
#define RINGPROXY_QUERY_T_H

#include <stddef.h>

#include "http/http1-t.h"

/* [ring] query */
enum query_mode {
	QUERY_AS_IS = 0,        /* the order as sent */
	QUERY_SORTED,           /* sorted by name, equal names in the order
				   sent (HAProxy's query-sort-by-name) */
};

/* The longest target normalised, prefix and query together: the cache
 * key's bound (a longer target is not cached either). Longer targets,
 * and queries of more than QUERY_MAX_PARAMS parameters, stay as sent. */
#define QUERY_TARGET_MAX 4096
#define QUERY_MAX_PARAMS 128
/* Patterns in [ring] drop_params at most. */
#define QUERY_MAX_DROP 32

struct query_pattern {
	const char *p;          /* borrowed: the conf's drop_params text */
	size_t len;
};

struct query_rules {
	int mode;                       /* enum query_mode */
	unsigned ndrop;
	struct query_pattern drop[QUERY_MAX_DROP];
};

/* The request's target and query as received, when query_apply changed
 * them (target.p NULL: it did not). */
struct query_sent {
	struct http1_str target;
	struct http1_str query;
};

#endif
