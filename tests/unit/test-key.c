/*
 * test-key.c -- the routing key (key_parts, key_pos) for each
 * [ring] key mode, computed from requests parsed by the real codec: the
 * pieces must join to the expected key, and the position must be MD5 of
 * that whole key, as `ringproxy plan --keys` computes it, however long the
 * key (the proxy once copied keys into a 2,048-byte buffer and hashed
 * garbage when one did not fit).
 */
#include "config/conf.h"
#include "path/key.h"
#include "http/http1.h"
#include "ring/ring.h"
#include "ring/ring-compat.h"
#include "tap.h"

#include <stdlib.h>

/* Heads up to 1 MiB, as the largest max_head_size allows. */
#define TEST_MAX_HEAD (1u << 20)

/* The key of "GET target" under mode joined from its pieces; malloc'd. */
static char *joined(int mode, const struct http1_msg *m, size_t *len)
{
	struct iovec v[KEY_PARTS];
	size_t n = key_parts(mode, m, v), total = 0;
	char *out;

	for (size_t i = 0; i < n; i++)
		total += v[i].iov_len;
	out = malloc(total + 1);
	*len = 0;
	for (size_t i = 0; i < n; i++) {
		memcpy(out + *len, v[i].iov_base, v[i].iov_len);
		*len += v[i].iov_len;
	}
	out[*len] = '\0';
	return out;
}

/* Parse "GET target HTTP/1.1" and check its key under mode is want (any
 * length) and its position MD5(want), and under the compat schemes their
 * own hash of the same whole key (pieces joined however long). */
static void check(int mode, const char *target, const char *want, const char *what)
{
	size_t tlen = strlen(target), rlen = tlen + 64, klen;
	char *req = malloc(rlen), *key;
	struct http1_header hdrs[16];
	struct http1_limits lim = { TEST_MAX_HEAD, 16 };
	struct http1_msg m;
	int n = snprintf(req, rlen, "GET %s HTTP/1.1\r\nHost: a\r\n\r\n", target);

	http1_msg_init(&m);
	if (!tap_ok(http1_parse_request(&m, hdrs, req, (size_t)n, &lim) > 0, "%s: parses", what)) {
		free(req);
		return;
	}
	key = joined(mode, &m, &klen);
	if (strlen(want) < 200)
		tap_is_str(key, want, "%s (%s)", what, conf_key_mode_name(mode));
	else
		tap_ok(klen == strlen(want) && memcmp(key, want, klen) == 0,
		       "%s (%s): the whole %zu-byte key", what, conf_key_mode_name(mode), strlen(want));
	tap_ok(key_pos(RING_SCHEME_RINGPROXY, mode, &m, NULL) == ring_hash(want, strlen(want)),
	       "%s (%s): position is MD5 of the whole key", what, conf_key_mode_name(mode));
	tap_ok(key_pos(RING_SCHEME_NGINX, mode, &m, NULL) == ring_nginx_key(want, strlen(want)) &&
	       key_pos(RING_SCHEME_HAPROXY, mode, &m, NULL) == ring_haproxy_key(want, strlen(want)),
	       "%s (%s): nginx's and haproxy's positions hash the whole key", what, conf_key_mode_name(mode));
	free(key);
	free(req);
}

static char *repeat(const char *prefix, char c, size_t n, const char *suffix)
{
	size_t pl = strlen(prefix), sl = strlen(suffix);
	char *s = malloc(pl + n + sl + 1);

	memcpy(s, prefix, pl);
	memset(s + pl, c, n);
	memcpy(s + pl + n, suffix, sl + 1);
	return s;
}

/* Keys longer than any scratch buffer, in every mode and request form. */
static void test_long(void)
{
	static const size_t lens[] = { 2046, 2047, 2048, 2049, 5000, 65536, 900000 };

	for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
		size_t n = lens[k];
		char *q = repeat("", 'a', n, ""), *t, *w, *p;
		char what[96];

		/* the request: absolute-form, empty path, long query */
		t = repeat("http://x?", 'a', n, "");
		w = repeat("/?", 'a', n, "");
		snprintf(what, sizeof(what), "http://x? + %zu x a", n);
		check(CONF_KEY_PATH_QUERY, t, w, what);
		check(CONF_KEY_PATH_SORTED_QUERY, t, w, what);
		check(CONF_KEY_PATH, t, "/", what);
		free(t);
		free(w);

		/* origin-form, long query */
		t = repeat("/t/1.jpg?", 'a', n, "");
		snprintf(what, sizeof(what), "/t/1.jpg? + %zu x a", n);
		check(CONF_KEY_PATH_QUERY, t, t, what);
		check(CONF_KEY_PATH_SORTED_QUERY, t, t, what);
		check(CONF_KEY_PATH, t, "/t/1.jpg", what);
		free(t);

		/* long path, absolute-form with a path */
		p = repeat("/", 'p', n, "");
		t = repeat("http://img.example/", 'p', n, "?z=1&y=2");
		w = repeat("/", 'p', n, "?z=1&y=2");
		snprintf(what, sizeof(what), "absolute-form, %zu-byte path", n + 1);
		check(CONF_KEY_PATH_QUERY, t, w, what);
		free(w);
		w = repeat("/", 'p', n, "?y=2&z=1");
		check(CONF_KEY_PATH_SORTED_QUERY, t, w, what);
		check(CONF_KEY_PATH, t, p, what);
		free(w);
		free(t);
		free(p);

		/* sorted parameters, one of them long */
		t = repeat("/s?z=1&b=", 'b', n, "&&a=2");
		w = repeat("/s?a=2&b=", 'b', n, "&z=1");
		snprintf(what, sizeof(what), "sorted query with a %zu-byte parameter", n + 2);
		check(CONF_KEY_PATH_SORTED_QUERY, t, w, what);
		check(CONF_KEY_PATH_QUERY, t, t, what);
		free(w);
		free(t);
		free(q);
	}
}

/* Many parameters: up to KEY_MAX_PARAMS sorted, more keyed as sent. */
static void test_many_params(void)
{
	for (int np = KEY_MAX_PARAMS; np <= KEY_MAX_PARAMS + 1; np++) {
		size_t cap = (size_t)np * 40 + 16, tl, wl;
		char *t = malloc(cap), *w = malloc(cap);
		char what[64];

		tl = (size_t)snprintf(t, cap, "/m?");
		wl = (size_t)snprintf(w, cap, "/m?");
		for (int i = np - 1; i >= 0; i--)
			tl += (size_t)snprintf(t + tl, cap - tl, "%sp%04d=%s", i == np - 1 ? "" : "&", i,
					       "vvvvvvvvvvvvvvvvvvvvvvvvvvvvvv");
		for (int i = 0; i < np; i++)
			wl += (size_t)snprintf(w + wl, cap - wl, "%sp%04d=%s", i ? "&" : "", i,
					       "vvvvvvvvvvvvvvvvvvvvvvvvvvvvvv");
		snprintf(what, sizeof(what), "%d parameters in reverse order", np);
		check(CONF_KEY_PATH_SORTED_QUERY, t, np <= KEY_MAX_PARAMS ? w : t, what);
		free(t);
		free(w);
	}
}

int main(void)
{
	check(CONF_KEY_PATH_QUERY, "/t/1.jpg", "/t/1.jpg", "path+query, no query");
	check(CONF_KEY_PATH_QUERY, "/t/1.jpg?w=200&h=100", "/t/1.jpg?w=200&h=100", "path+query keeps the query as sent");
	check(CONF_KEY_PATH_QUERY, "/t/1.jpg?", "/t/1.jpg?", "path+query keeps an empty query");
	check(CONF_KEY_PATH_QUERY, "http://img.example/t/1.jpg?v=2", "/t/1.jpg?v=2", "absolute-form: host ignored");
	check(CONF_KEY_PATH_QUERY, "http://img.example?v=2", "/?v=2", "absolute-form, empty path: / and the query");
	check(CONF_KEY_PATH_QUERY, "http://img.example", "/", "absolute-form, empty path, no query");
	check(CONF_KEY_PATH_QUERY, "http://img.example?", "/?", "absolute-form, empty path, empty query");
	check(CONF_KEY_PATH, "/t/1.jpg?w=200", "/t/1.jpg", "path drops the query");
	check(CONF_KEY_PATH, "http://img.example?v=2", "/", "path: absolute-form, empty path");
	check(CONF_KEY_PATH_SORTED_QUERY, "/t/1.jpg?w=200&h=100", "/t/1.jpg?h=100&w=200", "sorted-query sorts parameters");
	check(CONF_KEY_PATH_SORTED_QUERY, "/t/1.jpg?h=100&w=200", "/t/1.jpg?h=100&w=200", "sorted-query: already sorted");
	check(CONF_KEY_PATH_SORTED_QUERY, "/t?b=2&&a=1&", "/t?a=1&b=2", "sorted-query drops empty parameters");
	check(CONF_KEY_PATH_SORTED_QUERY, "/t?", "/t", "sorted-query: empty query is no query");
	check(CONF_KEY_PATH_SORTED_QUERY, "/t?&&", "/t", "sorted-query: only empty parameters is no query");
	check(CONF_KEY_PATH_SORTED_QUERY, "/t?a=2&a=1&a", "/t?a&a=1&a=2", "sorted-query: bytewise, duplicates kept");
	check(CONF_KEY_PATH_SORTED_QUERY, "/t?ab=1&a=1", "/t?a=1&ab=1", "sorted-query: a prefix sorts first");
	check(CONF_KEY_PATH_SORTED_QUERY, "http://img.example?b=1&a=2", "/?a=2&b=1",
	      "sorted-query: absolute-form, empty path");
	/* HAProxy's balance uri: the target as sent, up to '?' unless whole */
	check(CONF_KEY_URI, "/t/1.jpg?w=200", "/t/1.jpg", "uri stops at the '?'");
	check(CONF_KEY_URI, "/t/1.jpg?w=200?x", "/t/1.jpg", "uri stops at the first '?'");
	check(CONF_KEY_URI, "http://img.example/t/1.jpg?v=2", "http://img.example/t/1.jpg",
	      "uri: absolute-form keeps scheme and host");
	check(CONF_KEY_URI, "http://img.example?v=2", "http://img.example", "uri: absolute-form, empty path");
	check(CONF_KEY_URI_QUERY, "/t/1.jpg?w=200&h=100", "/t/1.jpg?w=200&h=100", "uri+query: the target as sent");
	check(CONF_KEY_URI_QUERY, "http://img.example/t?v=2", "http://img.example/t?v=2",
	      "uri+query: absolute-form whole");
	test_long();
	test_many_params();
	return tap_done();
}
