/*
 * test-scheme.c -- the compat schemes ([ring] scheme, ring-compat.h)
 * against the proxies they reproduce: a config as an operator writes it
 * (conf_load_string, the identities and key mode it defaults), the ring
 * the daemon builds from it (plan_ring) and each request target keyed as
 * a request would be (explain_target_parse), owner for owner.
 *
 * Vectors (tests/unit/scheme/):
 *  - nginx-upstream.csv: 1,001 URIs and the server real NGINX chose for
 *    each (pingora-ketama's test data), and pingora's matches_nginx_sample;
 *  - haproxy-uri.txt: request targets and the cache real HAProxy 2.6 sent
 *    each to, in three key modes (made by haproxy-vectors.py).
 * Then HAProxy's nearest-node rule, checked against a direct reading of
 * chash_get_server_hash at every midpoint, and what a change of scheme
 * reports and ramps.
 */
#include "config/conf.h"
#include "admin/explain.h"
#include "admin/plan.h"
#include "ring/ring.h"
#include "ring/ring-compat.h"
#include "tap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *test_dir;

/* A config from text, or NULL with every error as a diagnostic. */
static struct conf *test_conf(const char *text)
{
	struct conf_errors errs;
	struct conf *c = conf_load_string("t.ini", text, &errs);

	if (!c)
		tap_diag("%s", errs.n ? errs.msg[0] : "no config");
	conf_errors_free(&errs);
	return c;
}

/* The backend a request with target t goes to under c and r. */
static const char *test_owner_of(const struct conf *c, const struct ring *r, const char *t)
{
	struct explain_target et = { 0 };
	char err[256];
	const char *name = "(not a target)";
	int b;

	if (explain_target_parse(&et, c->scheme, c->key, &c->query, t, strlen(t), "thumbs.example", err,
				 sizeof(err)) == 0) {
		b = ring_lookup(r, et.pos);
		name = b < 0 ? "(none)" : r->names[b];
	}
	explain_target_free(&et);
	return name;
}

static FILE *test_open(const char *name)
{
	char path[1024];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", test_dir, name);
	f = fopen(path, "r");
	if (!f)
		tap_diag("cannot open %s", path);
	return f;
}

/* NGINX: nine servers written as in pingora's nginx.conf; the url's
 * authority is the identity, so no id is written. */
static void test_nginx_sample(void)
{
	static const char text[] =
		"[ring]\nscheme = nginx\n"
		"[backend s1]\nurl = http://10.0.0.1:443\nweight = 100\n"
		"[backend s2]\nurl = http://10.0.0.2:443\nweight = 100\n"
		"[backend s3]\nurl = http://10.0.0.3:443\nweight = 100\n"
		"[backend s4]\nurl = http://10.0.0.4:443\nweight = 100\n"
		"[backend s5]\nurl = http://10.0.0.5:443\nweight = 100\n"
		"[backend s6]\nurl = http://10.0.0.6:443\nweight = 100\n"
		"[backend s7]\nurl = http://10.0.0.7:443\nweight = 100\n"
		"[backend s8]\nurl = http://10.0.0.8:443\nweight = 100\n"
		"[backend s9]\nurl = http://10.0.0.9:443\nweight = 100\n";
	struct conf *c = test_conf(text);
	struct ring *r = NULL;
	char err[256], line[512];
	size_t n = 0, bad = 0;
	FILE *f = test_open("nginx-upstream.csv");

	if (!tap_ok(c != NULL && f != NULL, "nginx: the config and the vectors load"))
		goto out;
	tap_is_str(c->backends[0].id, "10.0.0.1:443", "nginx: a backend's identity is its url's host:port as written");
	tap_is_int(c->key, CONF_KEY_PATH_QUERY, "nginx: the key is path+query as sent ($request_uri)");
	r = plan_ring(c, err, sizeof(err));
	if (!tap_ok(r != NULL, "nginx: the ring builds%s%s", r ? "" : ": ", r ? "" : err))
		goto out;
	tap_is_int((long)r->npoints, 9 * 100 * 160, "nginx: 160 points per unit of weight");
	while (fgets(line, sizeof(line), f)) {
		char *comma = strchr(line, ','), want[16];

		if (line[0] == '#' || !comma)
			continue;
		*comma = '\0';
		/* 10.0.0.K:443 is backend sK */
		snprintf(want, sizeof(want), "s%c", comma[1 + strlen("10.0.0.")]);
		n++;
		if (strcmp(test_owner_of(c, r, line), want) != 0 && bad++ < 5)
			tap_diag("%s: got %s, NGINX chose %s", line, test_owner_of(c, r, line), want);
	}
	tap_ok(n == 1001 && bad == 0, "nginx: each of the %zu URIs real NGINX placed goes to its server (%zu differ)",
	       n, bad);
out:
	if (f)
		fclose(f);
	ring_free(r);
	conf_free(c);
}

/* pingora-ketama's matches_nginx_sample: two servers of weight 1, given
 * by id (the url elsewhere: the address may change, the placement not). */
static void test_nginx_pingora(void)
{
	static const char text[] =
		"[ring]\nscheme = nginx\n"
		"[backend a]\nurl = http://127.0.0.1:9001\nid = 127.0.0.1:7777\n"
		"[backend b]\nurl = http://127.0.0.1:9002\nid = 127.0.0.1:7778\n";
	static const struct { const char *uri, *want; } v[] = {
		{ "/some/path", "b" }, { "/some/longer/path", "a" }, { "/sad/zaidoon", "b" },
		{ "/g", "a" }, { "/pingora/team/is/cool/and/this/is/a/long/uri", "b" },
		{ "/i/am/not/confident/in/this/code", "a" },
	};
	struct conf *c = test_conf(text);
	struct ring *r = c ? plan_ring(c, (char[256]){ 0 }, 256) : NULL;
	int ok = r != NULL;

	for (size_t i = 0; ok && i < sizeof(v) / sizeof(v[0]); i++)
		ok = tap_ok(strcmp(test_owner_of(c, r, v[i].uri), v[i].want) == 0,
			    "nginx: %s goes where pingora's matches_nginx_sample says (%s)", v[i].uri, v[i].want);
	if (!ok)
		tap_ok(0, "nginx: matches_nginx_sample");
	ring_free(r);
	conf_free(c);
}

/* One ring of one member with identity id, under scheme s. */
static struct ring *test_one(enum ring_scheme s, const char *id, double w)
{
	struct ring_member m = { "x", w, id };
	char err[256];
	struct ring *r = ring_build(&m, 1, s, 0, err, sizeof(err));

	if (!r)
		tap_diag("%s: %s", id, err);
	return r;
}

static int test_same_points(const struct ring *a, const struct ring *b)
{
	if (!a || !b || a->npoints != b->npoints)
		return 0;
	for (size_t i = 0; i < a->npoints; i++)
		if (a->points[i].pos != b->points[i].pos)
			return 0;
	return 1;
}

/* NGINX splits host and port at the last ':' that only digits follow:
 * "host:" and "host" are one identity, so are "unix:/s" and "/s";
 * "[::1]:80" is host "[::1]" port "80", not the same as "[::1]" or
 * "[::1]80". */
static void test_nginx_split(void)
{
	static const struct { const char *a, *b; int same; } v[] = {
		{ "cache.example:", "cache.example", 1 },
		{ "unix:/run/c.sock", "/run/c.sock", 1 },
		{ "UNIX:/run/c.sock", "/run/c.sock", 1 },
		{ "[::1]:80", "[::1]", 0 },
		{ "[::1]:80", "[::1]80", 0 },
		{ "10.0.0.1:8080", "10.0.0.1:80", 0 },
		{ "a:b", "a:b:", 1 },
	};

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		struct ring *a = test_one(RING_SCHEME_NGINX, v[i].a, 1);
		struct ring *b = test_one(RING_SCHEME_NGINX, v[i].b, 1);

		tap_ok(test_same_points(a, b) == v[i].same, "nginx: \"%s\" and \"%s\" are %s", v[i].a, v[i].b,
		       v[i].same ? "one identity" : "two identities");
		ring_free(a);
		ring_free(b);
	}
}

/* HAProxy: the real HAProxy's choices, in its three key modes, from the
 * config an operator copies its servers into: ids as written, the others
 * numbered by ringproxy as HAProxy numbers them. */
static void test_haproxy_vectors(void)
{
	static const char *const modes[] = { "uri", "uri+query", "path" };
	char text[4096], line[1024];
	size_t used = 0, n[3] = { 0 }, bad[3] = { 0 };
	struct conf *c[3] = { NULL };
	struct ring *r[3] = { NULL };
	FILE *f = test_open("haproxy-uri.txt");

	if (!tap_ok(f != NULL, "haproxy: the vectors open"))
		return;
	while (fgets(line, sizeof(line), f)) {
		char name[64], id[16], mode[16], target[900], want[64];
		int w, m = -1;

		line[strcspn(line, "\n")] = '\0';
		if (sscanf(line, "server %63s %15s %d", name, id, &w) == 3) {
			used += (size_t)snprintf(text + used, sizeof(text) - used,
						 "[backend %s]\nurl = http://127.0.0.1:1\nweight = %d\n%s%s%s", name,
						 w, strcmp(id, "-") ? "id = " : "", strcmp(id, "-") ? id : "",
						 strcmp(id, "-") ? "\n" : "");
			continue;
		}
		if (line[0] == '#' || sscanf(line, "%15s %899s %63s", mode, target, want) != 3)
			continue;
		for (int i = 0; i < 3; i++)
			if (strcmp(mode, modes[i]) == 0)
				m = i;
		if (m < 0)
			continue;
		if (!c[m]) {
			char full[4200];

			/* HAProxy's default key is uri: say the others */
			snprintf(full, sizeof(full), "[ring]\nscheme = haproxy\n%s%s%s\n%s", m ? "key = " : "",
				 m ? modes[m] : "", m ? "" : "; key: uri by default", text);
			c[m] = test_conf(full);
			r[m] = c[m] ? plan_ring(c[m], (char[256]){ 0 }, 256) : NULL;
			if (!tap_ok(r[m] != NULL, "haproxy %s: the config loads and its ring builds", mode))
				break;
		}
		n[m]++;
		if (strcmp(test_owner_of(c[m], r[m], target), want) != 0 && bad[m]++ < 5)
			tap_diag("%s %s: got %s, HAProxy chose %s", mode, target, test_owner_of(c[m], r[m], target),
				 want);
	}
	fclose(f);
	if (c[0]) {
		tap_is_int(c[0]->key, CONF_KEY_URI, "haproxy: the key is uri by default (balance uri)");
		tap_ok(strcmp(c[0]->backends[0].id, "1") == 0 && strcmp(c[0]->backends[1].id, "3") == 0 &&
		       strcmp(c[0]->backends[2].id, "4") == 0 && strcmp(c[0]->backends[3].id, "5") == 0 &&
		       strcmp(c[0]->backends[4].id, "6") == 0,
		       "haproxy: ids numbered as HAProxy does, skipping the one taken (1, id 3, 4, 5, 6)");
		tap_is_int((long)r[0]->npoints, 11 * 16, "haproxy: 16 nodes per unit of weight");
	}
	for (int m = 0; m < 3; m++) {
		tap_ok(n[m] >= 400 && bad[m] == 0, "haproxy %s: each of the %zu targets goes where real HAProxy sent it "
		       "(%zu differ)", modes[m], n[m], bad[m]);
		ring_free(r[m]);
		conf_free(c[m]);
	}
}

struct test_node {
	uint32_t key;
	int backend;
};

/* chash_get_server_hash as written: the node >= h (else the first), the
 * one before it (else the last), prev when dp <= dn. */
static int test_nearest(const struct test_node *node, size_t n, uint32_t h)
{
	size_t next = 0, prev;

	while (next < n && node[next].key < h)
		next++;
	if (next == n)
		next = 0;
	prev = next ? next - 1 : n - 1;
	return h - node[prev].key <= node[next].key - h ? node[prev].backend : node[next].backend;
}

/* The first-point->= ring gives the nearest node, ties to the lower, at
 * every node, every midpoint and the keys on either side of both. */
static void test_haproxy_nearest(void)
{
	const struct ring_member m[] = { { "a", 1, "1" }, { "b", 2, "7" }, { "c", 1, "3" } };
	struct test_node node[64];
	size_t n = 0, bad = 0, checked = 0;
	char err[256];
	struct ring *r = ring_build(m, 3, RING_SCHEME_HAPROXY, 0, err, sizeof(err));

	if (!tap_ok(r != NULL, "haproxy: a ring of ids 1, 7, 3"))
		return;
	/* HAProxy's tree: every node, in key order (insertion sort) */
	for (int b = 0; b < 3; b++) {
		for (uint32_t j = 0; j < (uint32_t)m[b].weight * 16; j++) {
			struct test_node x = { ring_haproxy_full_hash((uint32_t)atoi(m[b].id) * 4096 + j), b };
			size_t at = n++;

			for (; at > 0 && node[at - 1].key > x.key; at--)
				node[at] = node[at - 1];
			node[at] = x;
		}
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t gap = node[(i + 1) % n].key - node[i].key, mid = node[i].key + gap / 2;
		uint32_t probe[] = { node[i].key - 1, node[i].key, node[i].key + 1, mid - 1, mid, mid + 1, mid + 2 };

		for (size_t k = 0; k < sizeof(probe) / sizeof(probe[0]); k++) {
			checked++;
			if (ring_lookup(r, (uint64_t)probe[k] << 32) != test_nearest(node, n, probe[k]) && bad++ < 5)
				tap_diag("hash %08x: got %d, nearest %d", probe[k], ring_lookup(r, (uint64_t)probe[k] << 32),
					 test_nearest(node, n, probe[k]));
		}
	}
	tap_ok(bad == 0, "haproxy: the nearest node owns each of %zu hashes at nodes and midpoints, ties to the lower",
	       checked);
	ring_free(r);
}

/* The nginx and the native ring of the three members m[] (ids: the
 * NGINX servers), or 0 with the failure said. */
static int test_two_rings(const struct ring_member *m, struct ring **rn, struct ring **rp)
{
	char err[256];

	*rn = ring_build(m, 3, RING_SCHEME_NGINX, 0, err, sizeof(err));
	*rp = ring_build(m, 3, RING_SCHEME_RINGPROXY, 160, err, sizeof(err));
	return tap_ok(*rn && *rp, "the nginx and the native ring of %s, %s, %s", m[0].name, m[1].name, m[2].name);
}

/* Two schemes place a key by unrelated hashes: the diff is the share of
 * keys expected to change owner, 1 - sum of share_a x share_b, and a key
 * list hashed both ways moves that much. */
static void test_cross_diff(void)
{
	const struct ring_member m[] = { { "a", 1, "10.0.0.1:80" }, { "b", 2, "10.0.0.2:80" },
					 { "c", 1, "10.0.0.3:80" } };
	char key[64];
	struct ring *rn, *rp;
	double sn[3], sp[3], keep = 0;
	struct ring_diff d;
	struct ring_arc *arcs = NULL;
	int moved = 0, n = 200000;

	if (!test_two_rings(m, &rn, &rp) || !tap_ok(ring_diff(rn, rp, &d) == 0, "cross-scheme diff runs"))
		goto out;
	ring_shares(rn, sn);
	ring_shares(rp, sp);
	for (int i = 0; i < 3; i++)
		keep += sn[i] * sp[i];
	tap_ok(fabs(d.moved_share - (1 - keep)) < 1e-9, "nginx -> ringproxy: %.4f of keys move, 1 - sum of shares^2",
	       d.moved_share);
	for (int i = 0; i < n; i++) {
		int len = snprintf(key, sizeof(key), "/t/%d.jpg", i);
		struct iovec v = { key, (size_t)len };

		moved += ring_lookup(rn, ring_key_pos(RING_SCHEME_NGINX, &v, 1, NULL)) !=
			 ring_lookup(rp, ring_key_pos(RING_SCHEME_RINGPROXY, &v, 1, NULL));
	}
	tap_ok(fabs((double)moved / n - d.moved_share) < 0.01, "%d keys hashed both ways: %.4f move (diff %.4f)", n,
	       (double)moved / n, d.moved_share);
	tap_is_int(ring_moved_arcs(rn, rp, 10, &arcs), 0, "no arcs in common between two schemes");
	ring_diff_free(&d);
	tap_ok(ring_diff(rn, rn, &d) == 0 && d.moved_share == 0, "nginx -> nginx, same members: nothing moves");
	ring_diff_free(&d);
out:
	free(arcs);
	ring_free(rn);
	ring_free(rp);
}

/* A ramp from an nginx ring to the native one: until a key's moment its
 * owner is the nginx owner of its nginx position; after, the native
 * owner of its native position. */
static void test_cross_ramp(void)
{
	const struct ring_member m[] = { { "d", 1, "10.0.0.1:80" }, { "e", 1, "10.0.0.2:80" },
					 { "f", 1, "10.0.0.3:80" } };
	char key[64];
	struct ring *rn, *rp;
	int32_t *map = test_two_rings(m, &rn, &rp) ? ring_map(rn, rp) : NULL;
	struct ring_ramp st[2] = { { rp, NULL, 1000, 60000 }, { rn, map, 0, 0 } };
	int bad = 0, held = 0;

	if (!tap_ok(map != NULL, "ramp nginx -> ringproxy: the map by name"))
		goto out;
	for (int i = 0; i < 5000; i++) {
		int len = snprintf(key, sizeof(key), "/r/%d.jpg", i);
		struct iovec v = { key, (size_t)len };
		uint64_t u, pos[2];
		int was, now, at_start, at_end, at_moment;

		pos[0] = ring_key_pos(RING_SCHEME_RINGPROXY, &v, 1, &u);
		pos[1] = ring_key_pos(RING_SCHEME_NGINX, &v, 1, NULL);
		was = map[ring_lookup(rn, pos[1])];
		now = ring_lookup(rp, pos[0]);
		at_start = ring_ramp_owner_at(st, 2, pos, u, 1000, NULL);
		at_moment = ring_ramp_owner_at(st, 2, pos, u, ring_ramp_moment(&st[0], u), NULL);
		at_end = ring_ramp_owner_at(st, 2, pos, u, 61000, NULL);
		held += was != now;
		bad += at_start != was || at_end != now || at_moment != now ||
		       (ring_ramp_moment(&st[0], u) > 1000 &&
			ring_ramp_owner_at(st, 2, pos, u, ring_ramp_moment(&st[0], u) - 1, NULL) != was);
	}
	tap_ok(bad == 0 && held > 2000, "ramp nginx -> ringproxy: %d of 5000 keys held on their nginx owner until their "
	       "moment, then native (%d wrong)", held, bad);
out:
	free(map);
	ring_free(rn);
	ring_free(rp);
}

/* The identity each scheme gives a backend without an id, from its url:
 * libmemcached's and twemproxy's host, or host:port off port 11211;
 * Envoy's address as it prints it, an IPv6 literal canonical. And ketama
 * with key_hash fnv1a_64 is twemproxy's key hash on the same points. */
static void test_default_ids(void)
{
	static const struct { const char *text, *ids[3]; } t[] = {
		{ "[ring]\nscheme = ketama\n[backend a]\nurl = http://10.0.0.1:11211/p\n"
		  "[backend b]\nurl = http://10.0.0.2:6081\n[backend c]\nurl = http://thumbs-3.example\n",
		  { "10.0.0.1", "10.0.0.2:6081", "thumbs-3.example:80" } },
		{ "[ring]\nscheme = envoy\n[backend a]\nurl = http://[2001:DB8:0:0::1]:8080/p\n"
		  "[backend b]\nurl = http://10.0.0.2\n[backend c]\nurl = http://thumbs-3.example:6081\n",
		  { "[2001:db8::1]:8080", "10.0.0.2:80", "thumbs-3.example:6081" } },
	};
	struct conf *c;
	struct ring *md5 = NULL, *fnv = NULL;
	const char *key = "/thumbs/1.jpg";
	struct iovec v = { (void *)(uintptr_t)key, strlen(key) };

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		int same = 0;

		c = test_conf(t[i].text);
		for (size_t b = 0; c && b < 3 && b < c->nbackends; b++)
			same += strcmp(c->backends[b].id, t[i].ids[b]) == 0;
		tap_is_int(same, 3, "%s: the default ids %s, %s, %s", c ? ring_scheme_name(c->scheme) : "?",
			   t[i].ids[0], t[i].ids[1], t[i].ids[2]);
		if (i == 0 && c)
			md5 = plan_ring(c, (char[256]){ 0 }, 256);
		conf_free(c);
	}
	c = test_conf("[ring]\nscheme = ketama\nkey_hash = fnv1a_64\n[backend a]\nurl = http://10.0.0.1:11211/p\n"
		      "[backend b]\nurl = http://10.0.0.2:6081\n[backend c]\nurl = http://thumbs-3.example\n");
	if (c)
		fnv = plan_ring(c, (char[256]){ 0 }, 256);
	tap_ok(md5 && fnv && md5->scheme == RING_SCHEME_KETAMA && fnv->scheme == RING_SCHEME_KETAMA_FNV1A64 &&
	       test_same_points(md5, fnv) && ring_key_pos(fnv->scheme, &v, 1, NULL) == ring_ketama_key_fnv1a64(key, v.iov_len) &&
	       ring_key_pos(md5->scheme, &v, 1, NULL) == ring_ketama_key(key, v.iov_len),
	       "ketama: key_hash fnv1a_64 keeps the points and hashes a key as twemproxy's fnv1a_64");
	conf_free(c);
	ring_free(md5);
	ring_free(fnv);
}

/* ringproxy -T: a compat config written out (ids the defaults gave,
 * vnodes commented out) loads back to the same ring. */
static void test_write_back(void)
{
	static const char *const text[] = {
		"[ring]\nscheme = haproxy\n[backend a]\nurl = http://127.0.0.1:1\n"
		"[backend b]\nurl = http://127.0.0.1:2\nid = 1\nweight = 3\n",
		"[ring]\nscheme = nginx\n[backend a]\nurl = http://thumbs-1.example:6081/p\n"
		"[backend b]\nurl = http://[::1]:8080\nweight = 2\n",
		"[ring]\nscheme = ketama\nkey_hash = fnv1a_64\n[backend a]\nurl = http://10.0.0.1:6081\n"
		"[backend b]\nurl = http://10.0.0.2:11211\nweight = 2\n",
		"[ring]\nscheme = envoy\n[backend a]\nurl = http://[2001:db8:0::1]:8080\n"
		"[backend b]\nurl = http://10.0.0.2\nweight = 2\n",
	};

	for (size_t i = 0; i < sizeof(text) / sizeof(text[0]); i++) {
		struct conf *c = test_conf(text[i]), *c2 = NULL;
		struct ring *r = NULL, *r2 = NULL;
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);

		if (c && f && conf_write(c, f) == 0 && fclose(f) == 0) {
			f = NULL;
			c2 = test_conf(buf);
		}
		if (f)
			fclose(f);
		if (c && c2) {
			r = plan_ring(c, (char[256]){ 0 }, 256);
			r2 = plan_ring(c2, (char[256]){ 0 }, 256);
		}
		tap_ok(r && r2 && test_same_points(r, r2) && r->scheme == r2->scheme &&
		       strcmp(c->backends[0].id, c2->backends[0].id) == 0,
		       "-T of a %s config loads back to the same ring (a's id %s)", c ? ring_scheme_name(c->scheme) : "?",
		       c ? c->backends[0].id : "?");
		ring_free(r);
		ring_free(r2);
		conf_free(c);
		conf_free(c2);
		free(buf);
	}
}

/* The builders refuse what their proxy cannot express. */
static void test_refusals(void)
{
	const struct ring_member frac[] = { { "a", 1.5, "h:1" } };
	const struct ring_member noid[] = { { "a", 1, "x" } };
	const struct ring_member big[] = { { "a", 257, "1" } };
	char err[256] = "";
	struct ring *r;

	r = ring_build(frac, 1, RING_SCHEME_NGINX, 0, err, sizeof(err));
	tap_ok(!r && strstr(err, "weight 1.5 is not a whole number"), "nginx: a fractional weight is refused (%s)", err);
	r = ring_build(noid, 1, RING_SCHEME_HAPROXY, 0, err, sizeof(err));
	tap_ok(!r && strstr(err, "is not a HAProxy server id"), "haproxy: a non-numeric id is refused (%s)", err);
	r = ring_build(big, 1, RING_SCHEME_HAPROXY, 0, err, sizeof(err));
	tap_ok(!r && strstr(err, "from 0 to 256"), "haproxy: weight 257 is refused (%s)", err);
	r = ring_build(noid, 1, RING_SCHEME_KETAMA, 0, err, sizeof(err));
	if (!ring_scheme_built(RING_SCHEME_KETAMA))
		tap_ok(!r && strstr(err, "not built in"), "a scheme without its builder is refused (%s)", err);
	ring_free(r);
}

int main(int argc, char **argv)
{
	test_dir = argc > 1 ? argv[1] : "scheme";
	test_nginx_sample();
	test_nginx_pingora();
	test_nginx_split();
	test_haproxy_vectors();
	test_haproxy_nearest();
	test_cross_diff();
	test_cross_ramp();
	test_write_back();
	test_default_ids();
	test_refusals();
	return tap_done();
}
