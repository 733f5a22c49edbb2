/*
 * test-explain.c -- explain.c: a request target keyed under each [ring]
 * key mode as the request path keys it (the key string and its position),
 * targets no client could send refused with a reason, and the explanation
 * of a walk over a hand-built snapshot in JSON and text.
 */
#include "config/conf.h"
#include "admin/explain.h"
#include "base/log.h"
#include "backend/registry.h"
#include "tap.h"

#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>

static void key_is(struct explain_target *t, int mode, const char *target, const char *want)
{
	char err[256] = "";

	if (!tap_ok(explain_target_parse(t, RING_SCHEME_RINGPROXY, mode, NULL, target, strlen(target), NULL, err, sizeof(err)) == 0,
		    "'%s' parses (%s)", target, err))
		return;
	tap_ok(t->keylen == strlen(want) && memcmp(t->key, want, t->keylen) == 0,
	       "%s: '%s' is keyed '%.*s'", conf_key_mode_name(mode), target, (int)t->keylen, t->key);
	tap_ok(t->pos == ring_hash(want, strlen(want)), "%s: its position is MD5 of the key", target);
}

static char *text_of(struct evbuffer *b)
{
	size_t n = evbuffer_get_length(b);
	char *s = malloc(n + 1);

	evbuffer_remove(b, s, n);
	s[n] = '\0';
	return s;
}

int main(void)
{
	struct explain_target t = { 0 };
	struct conf_errors errs;
	struct conf *c;
	struct snapshot *s;
	struct explain e;
	struct evbuffer *out = evbuffer_new();
	char err[256], *text;

	log_set_level(LOG_ERROR);
	key_is(&t, CONF_KEY_PATH_QUERY, "/a/b.jpg?w=2&h=1", "/a/b.jpg?w=2&h=1");
	key_is(&t, CONF_KEY_PATH, "/a/b.jpg?w=2&h=1", "/a/b.jpg");
	key_is(&t, CONF_KEY_PATH_SORTED_QUERY, "/a/b.jpg?w=2&h=1&&", "/a/b.jpg?h=1&w=2");
	key_is(&t, CONF_KEY_PATH_QUERY, "http://img.example/a.jpg?x=1", "/a.jpg?x=1");
	key_is(&t, CONF_KEY_PATH_QUERY, "http://img.example?x=1", "/?x=1");
	key_is(&t, CONF_KEY_PATH, "/", "/");
	tap_ok(explain_target_parse(&t, RING_SCHEME_RINGPROXY, CONF_KEY_PATH, NULL, "img/a.jpg", 9, NULL, err, sizeof(err)) < 0 &&
	       strstr(err, "not a request target a client could send"), "no leading slash: refused (%s)", err);
	tap_ok(explain_target_parse(&t, RING_SCHEME_RINGPROXY, CONF_KEY_PATH, NULL, "/a b", 4, NULL, err, sizeof(err)) < 0, "a space: refused");
	tap_ok(explain_target_parse(&t, RING_SCHEME_RINGPROXY, CONF_KEY_PATH, NULL, "/a\r\nX: y", 8, NULL, err, sizeof(err)) < 0 &&
	       strstr(err, "line breaks"), "a line break: refused, not read as a header");
	tap_ok(explain_target_parse(&t, RING_SCHEME_RINGPROXY, CONF_KEY_PATH, NULL, "/", 1, "bad host", err, sizeof(err)) < 0,
	       "a Host no client could send: refused");
	explain_target_free(&t);

	c = conf_load_string("e.ini", "[ring]\nvnodes = 40\nbalance_factor = 0\n"
			     "[backend x]\nurl = http://127.0.0.1:9201\nmax_inflight = 3\n"
			     "[backend y]\nurl = http://127.0.0.1:9202\nmax_inflight = 3\n"
			     "[backend z]\nurl = http://127.0.0.1:9203\nmax_inflight = 3\n", &errs);
	conf_errors_free(&errs);
	s = c ? snapshot_new(c, 1, err, sizeof(err)) : NULL;
	if (!tap_ok(s != NULL && out != NULL, "a snapshot of three backends"))
		return tap_done();
	explain_key(&e, s, "/k.jpg", 6, 3, NULL, NULL, 0);
	tap_is_int(e.n, 3, "walk=3: three backends listed");
	tap_ok(e.owner == ring_lookup(s->ring, ring_hash("/k.jpg", 6)) && e.target == e.owner &&
	       e.order[0] == e.owner, "an idle tier: the owner is the target");
	atomic_store(&s->be[e.owner].state->inflight, 3);
	atomic_store(&registry_total_inflight, 3);
	explain_key(&e, s, "/k.jpg", 6, 1, NULL, NULL, 0);
	tap_ok(e.n == 1 && e.why[0].verdict == BALANCE_FULL && e.target >= 0 && e.target != e.owner,
	       "the owner at max_inflight: walk=1 lists it, the target is read on past it");
	explain_json(&e, s, out);
	text = text_of(out);
	tap_ok(strstr(text, "\"key\": \"/k.jpg\"") && strstr(text, "\"eligible\": false, \"verdict\": \"full\", "
	       "\"why\": \"at max_inflight: 3 in flight of 3\"") && strstr(text, "\"cached\": null") &&
	       strstr(text, "\"route\": \"spill: the owner would not take it now\""),
	       "JSON: the key, the reason with its numbers, the route, cached null without a cache");
	free(text);
	explain_text(&e, s, out);
	text = text_of(out);
	tap_ok(strstr(text, "walk\n  1. ") && strstr(text, "would not take it: at max_inflight: 3 in flight of 3"),
	       "text: the same for people");
	free(text);
	atomic_store(&s->be[e.owner].state->inflight, 0);
	atomic_store(&registry_total_inflight, 0);
	evbuffer_free(out);
	snapshot_unref(s);
	registry_free();
	return tap_done();
}
