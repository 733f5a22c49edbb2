/*
 * test-front.c -- the routing key (front_key) for each [ring] key mode,
 * computed from requests parsed by the real codec.
 */
#include "conf.h"
#include "front.h"
#include "http1.h"
#include "tap.h"

static void check(int mode, const char *target, const char *want, const char *what)
{
	char req[512], scratch[256], got[256];
	struct http1_header hdrs[16];
	struct http1_limits lim = { 8192, 16 };
	struct http1_msg m;
	const char *key;
	size_t keylen;
	int rc;

	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: a\r\n\r\n", target);
	http1_msg_init(&m);
	if (!tap_ok(http1_parse_request(&m, hdrs, req, strlen(req), &lim) > 0, "%s: parses", what))
		return;
	rc = front_key(mode, &m, scratch, sizeof(scratch), &key, &keylen);
	snprintf(got, sizeof(got), "%.*s", (int)keylen, key);
	tap_ok(rc == 0, "%s: key made", what);
	tap_is_str(got, want, "%s", what);
}

int main(void)
{
	char scratch[8];
	struct http1_header hdrs[16];
	struct http1_limits lim = { 8192, 16 };
	struct http1_msg m;
	const char *key;
	size_t keylen;
	const char *req = "GET /a?z=1&y=2 HTTP/1.1\r\nHost: a\r\n\r\n";

	check(CONF_KEY_PATH_QUERY, "/t/1.jpg", "/t/1.jpg", "path+query, no query");
	check(CONF_KEY_PATH_QUERY, "/t/1.jpg?w=200&h=100", "/t/1.jpg?w=200&h=100", "path+query keeps the query as sent");
	check(CONF_KEY_PATH_QUERY, "/t/1.jpg?", "/t/1.jpg?", "path+query keeps an empty query");
	check(CONF_KEY_PATH_QUERY, "http://img.example/t/1.jpg?v=2", "/t/1.jpg?v=2", "absolute-form: host ignored");
	check(CONF_KEY_PATH, "/t/1.jpg?w=200", "/t/1.jpg", "path drops the query");
	check(CONF_KEY_PATH_SORTED_QUERY, "/t/1.jpg?w=200&h=100", "/t/1.jpg?h=100&w=200", "sorted-query sorts parameters");
	check(CONF_KEY_PATH_SORTED_QUERY, "/t/1.jpg?h=100&w=200", "/t/1.jpg?h=100&w=200", "sorted-query: already sorted");
	check(CONF_KEY_PATH_SORTED_QUERY, "/t?b=2&&a=1&", "/t?a=1&b=2", "sorted-query drops empty parameters");
	check(CONF_KEY_PATH_SORTED_QUERY, "/t?", "/t", "sorted-query: empty query is no query");
	check(CONF_KEY_PATH_SORTED_QUERY, "/t?a=2&a=1&a", "/t?a&a=1&a=2", "sorted-query: bytewise, duplicates kept");
	check(CONF_KEY_PATH_SORTED_QUERY, "/t?ab=1&a=1", "/t?a=1&ab=1", "sorted-query: a prefix sorts first");

	http1_msg_init(&m);
	http1_parse_request(&m, hdrs, req, strlen(req), &lim);
	tap_ok(front_key(CONF_KEY_PATH_SORTED_QUERY, &m, scratch, sizeof(scratch), &key, &keylen) < 0,
	       "a key that does not fit the scratch buffer is refused (caller falls back)");
	return tap_done();
}
