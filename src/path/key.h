/*
 * key.h -- the routing key of a request per [ring] key, and its position
 * on a ring of any [ring] scheme. Pure; any thread.
 */
#ifndef RINGPROXY_KEY_H
#define RINGPROXY_KEY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "http/http1-t.h"

struct snapshot;

/* Query parameters sorted for a path+sorted-query key; a query with more
 * is keyed as sent (path+query). */
#define KEY_MAX_PARAMS 128
/* Pieces of a key at most: path, '?', and parameters with '&' between. */
#define KEY_PARTS (2 * KEY_MAX_PARAMS + 2)

/* The routing key of a request per [ring] key (enum conf_key), as the
 * pieces v[0..n) whose concatenation is the key, n returned: slices of the
 * request buffer, and "?" and "&" between them where the key is not one
 * slice of the target (sorted parameters, or the parser's literal "/" of
 * "http://h?q"). v has room for KEY_PARTS. Never fails: a key of any
 * length is hashed whole, as `ringproxy plan --keys` hashes it. Pure. */
size_t key_parts(int mode, const struct http1_msg *req, struct iovec *v);
/* The key's position on a ring of scheme (enum ring_scheme): the
 * scheme's hash of the whole key (ring_key_pos of key_parts's pieces); in
 * *u (unless NULL) MD5's second half, the key's place in a warm ramp's
 * window (ring_hash_parts2). Pure. */
uint64_t key_pos(int scheme, int mode, const struct http1_msg *req, uint64_t *u);
/* While snapshot s has a warm ramp: ramp_pos[i] (balance_start set every
 * one to the key's position on s's ring) becomes the key's position in
 * the ring of each step i whose ring a reload made under another [ring]
 * scheme or key, for ring_ramp_owner_at. Without a ramp, nothing. Pure. */
void key_ramp(const struct snapshot *s, const struct http1_msg *req, uint64_t *ramp_pos);

#endif
