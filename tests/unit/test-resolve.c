/*
 * test-resolve.c -- resolve.c on a real event base (names from /etc/hosts
 * and under .invalid, RFC 6761, so no network is needed), and what a name
 * that does not resolve does to a snapshot: the backend keeps its points,
 * has no address, the walk skips it whatever its health says, and
 * snapshot_readdress gives it an address while sharing config and ring.
 */
#include "backend/balance.h"
#include "config/conf.h"
#include "backend/resolve.h"
#include "ring/ring.h"
#include "backend/snapshot.h"
#include "tap.h"

#include <arpa/inet.h>
#include <event2/event.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>

struct outcome {
	int calls;
	int rc;
	char ip[64];
	struct event_base *base;
	int *left;              /* loop until this reaches 0 */
};

static void on_done(void *arg, int rc, const struct sockaddr *addr, socklen_t len)
{
	struct outcome *o = arg;

	(void)len;
	o->calls++;
	o->rc = rc;
	if (rc == 0 && addr->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)addr)->sin_addr, o->ip, sizeof(o->ip));
	if (--*o->left == 0)
		event_base_loopbreak(o->base);
}

static void check_resolver(void)
{
	struct event_base *base = event_base_new();
	struct resolver *r = resolver_new(base);
	struct outcome found = { 0 }, missing = { 0 }, dropped = { 0 };
	struct timeval limit = { 10, 0 };
	int left = 2;

	if (!tap_ok(base && r, "a resolver on an event base"))
		return;
	found.base = missing.base = dropped.base = base;
	found.left = missing.left = dropped.left = &left;
	tap_ok(resolver_lookup(r, "localhost", 80, on_done, &found) == 0 &&
	       resolver_lookup(r, "cache.invalid", 80, on_done, &dropped) == 0 &&
	       resolver_lookup(r, "cache-2.invalid", 80, on_done, &missing) == 0,
	       "three lookups queued");
	/* dropped before the loop runs: its callback must never come */
	resolver_cancel(r, &dropped);
	event_base_loopexit(base, &limit);
	event_base_dispatch(base);
	tap_is_int(found.calls, 1, "localhost: one callback on the loop");
	tap_ok(found.rc == 0 && strcmp(found.ip, "127.0.0.1") == 0, "localhost is 127.0.0.1 (%s)", found.ip);
	tap_ok(missing.calls == 1 && missing.rc != 0, "a name under .invalid: one callback, not found (%s)",
	       missing.rc ? gai_strerror(missing.rc) : "found?");
	tap_is_int(dropped.calls, 0, "a cancelled lookup calls nobody");

	/* freeing with lookups queued and one in progress: no leak, no call */
	tap_ok(resolver_lookup(r, "cache-3.invalid", 80, on_done, &dropped) == 0 &&
	       resolver_lookup(r, "localhost", 80, on_done, &dropped) == 0, "two more queued");
	resolver_free(r);
	tap_is_int(dropped.calls, 0, "freed with lookups out: nobody is called");
	resolver_free(NULL);
	event_base_free(base);
}

static void check_snapshot(void)
{
	struct conf_errors errs = { 0 };
	struct conf *c = conf_load_string("t.ini",
		"[ring]\nvnodes = 40\nbalance_factor = 0\n"
		"[backend a]\nurl = http://127.0.0.1:9001\n"
		"[backend gone]\nurl = http://cache-gone.invalid:9002\n", &errs);
	struct snapshot *s, *s2, *s3;
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(9002) };
	char err[256];
	int skipped = 0, gone_owns = 0, taken = 0;

	conf_errors_free(&errs);
	if (!tap_ok(c != NULL, "a config with a name under .invalid loads"))
		return;
	s = snapshot_new(c, 7, err, sizeof(err));
	if (!tap_ok(s != NULL, "its snapshot is built (the name is no error)")) {
		tap_diag("%s", err);
		conf_free(c);
		return;
	}
	tap_ok(s->be[1].addrlen == 0 && s->be[1].resolve_rc != 0, "gone has no address, and why");
	tap_ok(s->ring->npoints_of[1] == 40, "gone keeps its 40 points");
	/* up in the registry, yet skipped: no address to send to */
	atomic_store(&s->be[1].state->down, 0);
	for (int k = 0; k < 200; k++) {
		char key[32];
		uint64_t pos;
		struct ring_walk w;
		struct balance_pick pick;

		snprintf(key, sizeof(key), "/k/%d", k);
		pos = ring_hash(key, strlen(key));
		/* as a request starts its choice: the pick cleared, the walk
		 * from pos (a pick of stack garbage has a list to read) */
		balance_start(s, &w, &pick, pos, 0);
		balance_next(s, &w, pos, &pick);
		if (ring_lookup(s->ring, pos) == 1) {
			gone_owns++;
			skipped += pick.backend == 0;
		}
		if (pick.backend >= 0) {
			balance_release(s->be[pick.backend].state);
			taken += pick.backend == 1;
		}
	}
	tap_ok(gone_owns > 0 && skipped == gone_owns && taken == 0,
	       "its %d keys go to the next backend, none to it", gone_owns);

	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	tap_ok(snapshot_readdress(s, "a", (struct sockaddr *)&sin, sizeof(sin)) == NULL,
	       "readdress refuses a backend that has an address");
	s2 = snapshot_readdress(s, "gone", (struct sockaddr *)&sin, sizeof(sin));
	if (!tap_ok(s2 != NULL, "readdress: a snapshot with gone's address"))
		goto out;
	tap_ok(s2->be[1].addrlen == sizeof(sin) && strcmp(s2->be[1].addr_text, "127.0.0.1:9002") == 0,
	       "gone is at 127.0.0.1:9002 (%s)", s2->be[1].addr_text);
	tap_ok(s->be[1].addrlen == 0, "the old snapshot is unchanged");
	tap_ok(s2->conf == s->conf && s2->ring == s->ring && s2->generation == 7 && s2->base == s,
	       "config, ring and generation are shared, not copied");
	s3 = snapshot_readdress(s2, "gone", (struct sockaddr *)&sin, sizeof(sin));
	tap_ok(s3 == NULL, "a second readdress of the same name finds nothing to do");
	/* the old one goes first (as when workers drop it): s2 keeps it */
	snapshot_unref(s);
	s = NULL;
	tap_ok(strcmp(s2->conf->backends[1].name, "gone") == 0, "the shared config outlives the old snapshot");
out:
	snapshot_unref(s2);
	snapshot_unref(s);
}

int main(void)
{
	check_resolver();
	check_snapshot();
	return tap_done();
}
