/*
 * key.c -- the routing key of a request ([ring] key) and its position on a
 * ring, for the request path (request.c), `ringproxy plan` and the admin's
 * /ring?url= (explain.c). Pure: no I/O, no allocation; any thread (the
 * digest state is the thread's, md5.c).
 */
#include "path/key.h"

#include <stdint.h>
#include <string.h>

#include "config/conf.h"
#include "ring/ring.h"
#include "backend/snapshot.h"

static int key_param_cmp(const struct http1_str *a, const struct http1_str *b)
{
	size_t n = a->len < b->len ? a->len : b->len;
	int r = memcmp(a->p, b->p, n);

	if (r)
		return r;
	return a->len < b->len ? -1 : a->len > b->len;
}

static void key_part(struct iovec *v, size_t *n, const char *p, size_t len)
{
	v[*n].iov_base = (void *)(uintptr_t)p;
	v[*n].iov_len = len;
	(*n)++;
}

/* The key is never copied: its pieces point into the request buffer (or
 * at the parser's literal "/" for "http://h?q", and the separators here),
 * so no key is too long to route and none is cut short. */
size_t key_parts(int mode, const struct http1_msg *req, struct iovec *v)
{
	struct http1_str params[KEY_MAX_PARAMS];
	size_t np = 0, n = 0;
	const char *p, *e;

	/* HAProxy's balance uri: the target as the client sent it, up to
	 * its '?' unless "whole" */
	if (mode == CONF_KEY_URI || mode == CONF_KEY_URI_QUERY) {
		e = mode == CONF_KEY_URI ? memchr(req->target.p, '?', req->target.len) : NULL;
		key_part(v, &n, req->target.p, e ? (size_t)(e - req->target.p) : req->target.len);
		return n;
	}
	key_part(v, &n, req->path.p, req->path.len);
	if (mode == CONF_KEY_PATH || !req->has_query)
		return n;
	if (mode == CONF_KEY_PATH_SORTED_QUERY) {
		p = req->query.p;
		e = p + req->query.len;
		while (p < e) {
			const char *amp = memchr(p, '&', (size_t)(e - p));
			const char *end = amp ? amp : e;

			if (end > p) {          /* empty parameters carry nothing */
				if (np == KEY_MAX_PARAMS)
					break;  /* too many: the query as sent */
				params[np].p = p;
				params[np].len = (size_t)(end - p);
				/* insertion sort: parameter lists are short */
				for (size_t j = np; j > 0 && key_param_cmp(&params[j - 1], &params[j]) > 0; j--) {
					struct http1_str t = params[j];

					params[j] = params[j - 1];
					params[j - 1] = t;
				}
				np++;
			}
			p = end + 1;
		}
		if (p < e) {
			np = 0;
		} else if (np == 0) {
			return n;
		} else {
			key_part(v, &n, "?", 1);
			for (size_t i = 0; i < np; i++) {
				if (i)
					key_part(v, &n, "&", 1);
				key_part(v, &n, params[i].p, params[i].len);
			}
			return n;
		}
	}
	/* path '?' query: one piece when they are adjacent in the target,
	 * as they are except after the parser's literal "/" */
	if (req->query.p == req->path.p + req->path.len + 1) {
		v[0].iov_len = req->path.len + 1 + req->query.len;
		return n;
	}
	key_part(v, &n, "?", 1);
	key_part(v, &n, req->query.p, req->query.len);
	return n;
}

uint64_t key_pos(int scheme, int mode, const struct http1_msg *req, uint64_t *u)
{
	struct iovec v[KEY_PARTS];
	size_t n = key_parts(mode, req, v);

	return ring_key_pos((enum ring_scheme)scheme, v, n, u);
}

void key_ramp(const struct snapshot *s, const struct http1_msg *req, uint64_t *ramp_pos)
{
	const struct snap_ramp *r = s->ramp;

	/* a step whose ring a reload made under another scheme or key
	 * places the key elsewhere; the others share step 0's position */
	for (size_t i = 1; r && i < r->nsteps; i++) {
		const struct ring_ramp *st = &r->step[i];

		if (st->ring->scheme != s->ring->scheme || r->key[i] != s->conf->key)
			ramp_pos[i] = key_pos(st->ring->scheme, r->key[i], req, NULL);
	}
}
