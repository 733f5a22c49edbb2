/*
 * test-discover.c -- the answer-handling rules of discovery
 * (config/discover.c), driven by a fake resolver: a script of answers
 * and failures at given times. Identity from the SRV target; address and
 * port beside it; failures of every kind change nothing; hysteresis both
 * ways; a pod restart (its name gone 20 s, back on another port) leaves
 * the ring as it was; alternating answers never change it; a mass
 * removal is held until released or reverted; the ring is never emptied.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/conf.h"
#include "config/discover.h"
#include "tap.h"

#define SVC ".cache.ns.svc.cluster.local."

/* The fake resolver's answer: "a b c" names pods cache-a, cache-b...
 * at 10.0.0.x, port 80 unless "name:port". */
struct test_answer {
	struct discover_target t[64];
	char target[64][128], addr[64][32];
	size_t n;
};

static void test_parse(struct test_answer *a, const char *spec)
{
	char buf[512], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", spec);
	a->n = 0;
	for (char *w = strtok_r(buf, " ", &save); w && a->n < 64; w = strtok_r(NULL, " ", &save)) {
		char *colon = strchr(w, ':');
		unsigned port = 80;

		if (colon) {
			*colon = '\0';
			port = (unsigned)atoi(colon + 1);
		}
		snprintf(a->target[a->n], sizeof(a->target[a->n]), "cache-%s" SVC, w);
		snprintf(a->addr[a->n], sizeof(a->addr[a->n]), "10.0.0.%u", (unsigned)(w[0] & 0x7f));
		a->t[a->n] = (struct discover_target){ a->target[a->n], a->addr[a->n], (uint16_t)port, 33 };
		a->n++;
	}
}

static int test_warns;
static char test_last_warn[256];

static void test_warn(void *arg, const char *target, const char *why)
{
	(void)arg;
	(void)why;
	test_warns++;
	snprintf(test_last_warn, sizeof(test_last_warn), "%s", target);
}

/* A good answer spec at t seconds. */
static void test_good(struct discover *d, double t, const char *spec)
{
	struct test_answer a;

	test_parse(&a, spec);
	if (discover_good(d, (int64_t)(t * 1000), a.t, a.n, test_warn, NULL) < 0)
		tap_diag("discover_good: out of memory");
}

/* The ring's discovered names as they would be once the due changes
 * are applied, "cache-a cache-b". */
static const char *test_ring(const struct discover *d)
{
	static char out[1024];
	size_t used = 0;

	out[0] = '\0';
	for (size_t i = 0; i < d->n; i++)
		if (discover_member_next(d, i))
			used += (size_t)snprintf(out + used, sizeof(out) - used, "%s%s", used ? " " : "", d->m[i].name);
	return out;
}

static void test_seed3(struct discover *d, const struct discover_params *p)
{
	discover_init(d, p);
	discover_seed(d, "cache-a", "cache-a" SVC, "10.0.0.97", 80, 1);
	discover_seed(d, "cache-b", "cache-b" SVC, "10.0.0.98", 80, 1);
	discover_seed(d, "cache-c", "cache-c" SVC, "10.0.0.99", 80, 1);
}

static const struct discover_params test_params = {
	.naming = DISCOVER_NAME_FIRST_LABEL, .srv_weights = false, .add_after = 2,
	.remove_after_ms = 120000, .max_remove = 0.5,
};

static void test_names(void)
{
	char name[DISCOVER_NAME_MAX + 1], longt[300];

	tap_ok(discover_name("Cache-0.Cache.NS.svc.cluster.local.", DISCOVER_NAME_FIRST_LABEL, name, sizeof(name)) == 0 &&
	       strcmp(name, "cache-0") == 0, "identity: the first label, lower-cased");
	tap_ok(discover_name("Cache-0.cache.ns.svc.cluster.local.", DISCOVER_NAME_FQDN, name, sizeof(name)) == 0 &&
	       strcmp(name, "cache-0.cache.ns.svc.cluster.local") == 0, "name = fqdn: the whole name, no trailing dot");
	tap_ok(discover_name("ca$he.x.", DISCOVER_NAME_FIRST_LABEL, name, sizeof(name)) < 0, "a byte a backend name cannot have");
	memset(longt, 'a', 80);
	strcpy(longt + 80, ".svc.");
	tap_ok(discover_name(longt, DISCOVER_NAME_FIRST_LABEL, name, sizeof(name)) < 0, "a first label over 64 bytes");
	tap_ok(discover_name(".", DISCOVER_NAME_FIRST_LABEL, name, sizeof(name)) < 0, "the root: no name");
	tap_ok(discover_unstable("10-244-1-7.cache.ns.svc.cluster.local.") != NULL, "a dashed-IP first label is unstable");
	tap_ok(discover_unstable("7f000002.addr.dc1.consul.") != NULL, "Consul's *.addr.*.consul is unstable");
	tap_ok(discover_unstable("cache-0.cache.ns.svc.cluster.local.") == NULL, "a StatefulSet pod's name is stable");
	tap_ok(discover_unstable("10-244-1.cache.ns.svc.") == NULL, "three dashed numbers are a name");
	tap_ok(discover_unstable("node-1.node.dc1.consul.") == NULL, "a Consul node name is stable");
}

static void test_join(void)
{
	struct discover d;
	struct discover_change ch;

	test_seed3(&d, &test_params);
	test_good(&d, 0, "a b c d");
	tap_is_int(discover_due(&d, &ch), 0, "a new name seen once is not due");
	tap_is_str(test_ring(&d), "cache-a cache-b cache-c", "the ring as it was");
	test_good(&d, 5, "a b c d");
	tap_is_int(discover_due(&d, &ch), 1, "seen twice in a row: due");
	tap_is_int(ch.nadd, 1, "one to add");
	tap_is_str(test_ring(&d), "cache-a cache-b cache-c cache-d", "cache-d joins");
	discover_commit(&d);
	tap_ok(discover_find(&d, "cache-d")->in_ring && strcmp(discover_find(&d, "cache-d")->addr, "10.0.0.100") == 0 &&
	       discover_find(&d, "cache-d")->port == 80, "with its address and port");
	tap_is_int(discover_due(&d, &ch), 0, "nothing due after the commit");
	/* seen, missed, seen: never twice in a row */
	test_good(&d, 10, "a b c d e");
	test_good(&d, 15, "a b c d");
	test_good(&d, 20, "a b c d e");
	tap_is_int(discover_due(&d, &ch), 0, "a name that comes and goes every answer never joins");
	discover_free(&d);
}

static void test_failures(void)
{
	struct discover d;
	struct discover_change ch;
	int kinds[] = { DISCOVER_F_NXDOMAIN, DISCOVER_F_SERVFAIL, DISCOVER_F_TIMEOUT, DISCOVER_F_REFUSED,
			DISCOVER_F_EMPTY, DISCOVER_F_PARSE };

	test_seed3(&d, &test_params);
	test_good(&d, 0, "a b c");
	for (int r = 0; r < 100; r++)
		discover_failed(&d, kinds[r % 6]);
	tap_is_int(discover_due(&d, &ch), 0, "100 failed answers of six kinds: nothing due");
	tap_is_str(test_ring(&d), "cache-a cache-b cache-c", "the ring as it was");
	tap_is_int(d.failures[DISCOVER_F_NXDOMAIN], 17, "NXDOMAIN counted by kind");
	tap_is_int(d.failures[DISCOVER_F_TIMEOUT], 17, "timeouts counted by kind");
	tap_is_int(d.failures[DISCOVER_F_PARSE], 16, "parse errors counted by kind");
	tap_is_int(d.last_good_ms, 0, "the last success's time is kept");
	tap_is_str(discover_fail_name(d.last_fail), "refused", "the last failure's kind");
	/* absence is measured across good answers only: a name missing
	 * from one answer, then 10 minutes of failures, then missing again,
	 * is absent 0 s, not 10 min */
	test_good(&d, 10, "a b");
	for (int r = 0; r < 120; r++)
		discover_failed(&d, DISCOVER_F_TIMEOUT);
	test_good(&d, 610, "a b");
	tap_is_int(discover_due(&d, &ch), 0, "an outage between two answers is no absence");
	tap_is_int(discover_find(&d, "cache-c")->absent_ms, 0, "cache-c's absence did not grow over the outage");
	discover_free(&d);
}

static void test_leave(void)
{
	struct discover d;
	struct discover_change ch;
	double t;

	test_seed3(&d, &test_params);
	discover_seed(&d, "cache-d", "cache-d" SVC, "10.0.0.100", 80, 1);
	for (t = 0; t < 120; t += 5) {
		test_good(&d, t, "a b c");
		if (discover_due(&d, &ch))
			break;
	}
	tap_ok(t >= 120 || ch.nremove == 0, "not removed before remove_after");
	test_good(&d, 125, "a b c");
	discover_due(&d, &ch);
	tap_is_int(ch.nremove, 1, "absent 120 s: due to leave");
	tap_is_str(test_ring(&d), "cache-a cache-b cache-c", "cache-d leaves");
	discover_commit(&d);
	tap_ok(discover_find(&d, "cache-d") == NULL, "and is forgotten");
	discover_free(&d);
}

/* A pod restart: its name is gone from DNS for 20 s and comes back on
 * another port: never due, the ring untouched, its port followed. */
static void test_restart(void)
{
	struct discover d;
	struct discover_change ch;
	size_t due = 0;

	test_seed3(&d, &test_params);
	for (double t = 0; t <= 60; t += 5) {
		if (t >= 20 && t < 40)
			test_good(&d, t, "a b");
		else if (t >= 40)
			test_good(&d, t, "a b c:8081");
		else
			test_good(&d, t, "a b c");
		due += discover_due(&d, &ch);
	}
	tap_is_int(due, 0, "a restart with a gap of 20 s changes no membership");
	tap_is_int(discover_find(&d, "cache-c")->port, 8081, "its new port is followed");
	tap_ok(d.moved, "the change of address is flagged for a snapshot (not a ring change)");
	discover_free(&d);
}

static void test_alternating(void)
{
	struct discover d;
	struct discover_change ch;
	size_t due = 0;

	test_seed3(&d, &test_params);
	for (int r = 0; r < 200; r++) {
		test_good(&d, r * 5.0, r % 2 ? "a b c d" : "a b");
		due += discover_due(&d, &ch);
	}
	tap_is_int(due, 0, "200 answers alternating between two sets: nothing ever due");
	tap_is_str(test_ring(&d), "cache-a cache-b cache-c", "the ring as it was");
	discover_free(&d);
}

static void test_mass(void)
{
	struct discover d;
	struct discover_change ch;

	test_seed3(&d, &test_params);
	discover_seed(&d, "cache-d", "cache-d" SVC, "10.0.0.100", 80, 1);
	for (double t = 0; t <= 130; t += 5)
		test_good(&d, t, "a");
	discover_due(&d, &ch);
	tap_is_int(ch.held, 3, "3 of 4 leaving (over max_remove 50%%): held");
	tap_is_int(ch.nremove, 0, "and none removed");
	tap_is_str(test_ring(&d), "cache-a cache-b cache-c cache-d", "the ring as it was");
	/* they come back: the held change reverts */
	test_good(&d, 135, "a b c d");
	discover_due(&d, &ch);
	tap_ok(ch.held == 0 && ch.nremove == 0 && d.held == 0, "the names came back: nothing held, nothing due");
	for (double t = 140; t <= 270; t += 5)
		test_good(&d, t, "a");
	discover_due(&d, &ch);
	tap_is_int(ch.held, 3, "gone again: held again");
	tap_is_int(discover_release(&d), 3, "the operator applies it");
	discover_due(&d, &ch);
	tap_is_int(ch.nremove, 3, "the held removals are due");
	discover_commit(&d);
	tap_is_str(test_ring(&d), "cache-a", "cache-a alone");
	tap_ok(!d.release, "the release is spent");
	discover_free(&d);
}

static void test_never_empty(void)
{
	struct discover_params p = test_params;
	struct discover d;
	struct discover_change ch;

	p.max_remove = 1;
	test_seed3(&d, &p);
	for (double t = 0; t <= 130; t += 5)
		test_good(&d, t, "a b c");
	for (double t = 135; t <= 270; t += 5)
		test_good(&d, t, "z");
	/* z was seen many times by now: it joins as the others leave */
	discover_due(&d, &ch);
	tap_ok(ch.nadd == 1 && ch.nremove == 3, "a whole new set: the new joins as the old leaves");
	discover_commit(&d);
	tap_is_str(test_ring(&d), "cache-z", "the ring has the new set");
	discover_free(&d);
	/* answers alternate between two new names, neither ever joining:
	 * the old members are held, not emptied */
	test_seed3(&d, &p);
	for (int r = 0; r <= 30; r++)
		test_good(&d, r * 5.0, r % 2 ? "x" : "y");
	discover_due(&d, &ch);
	tap_ok(ch.nremove == 0 && ch.nadd == 0, "nothing would be left: nothing removed");
	tap_is_str(test_ring(&d), "cache-a cache-b cache-c", "the ring as it was");
	discover_free(&d);
}

static void test_weights_and_order(void)
{
	struct discover_params p = test_params;
	struct discover d, e;
	struct discover_change ch;
	struct discover_target t[3] = {
		{ "node-1.node.dc1.consul.", "10.0.0.1", 8081, 10 },
		{ "NODE-1.node.dc1.consul.", "10.0.0.1", 8080, 10 },
		{ "7f000002.addr.dc1.consul.", "127.0.0.2", 8080, 10 },
	};
	struct discover_target r[3] = { t[2], t[0], t[1] };

	discover_init(&d, &p);
	test_warns = 0;
	discover_good(&d, 0, t, 3, test_warn, NULL);
	discover_good(&d, 5, t, 3, test_warn, NULL);
	tap_is_int(test_warns, 1, "one warning: the *.addr.*.consul target, once");
	tap_is_str(test_last_warn, "7f000002.addr.dc1.consul.", "naming it");
	discover_due(&d, &ch);
	discover_commit(&d);
	tap_is_int(discover_find(&d, "node-1")->port, 8080, "two targets of one name: the first by (target, port)");
	tap_is_int(discover_find(&d, "node-1")->weight, 1, "SRV weights ignored by default");
	discover_init(&e, &p);
	discover_good(&e, 0, r, 3, NULL, NULL);
	discover_good(&e, 5, r, 3, NULL, NULL);
	discover_due(&e, &ch);
	discover_commit(&e);
	tap_ok(e.n == d.n && discover_find(&e, "node-1")->port == 8080, "the same in any answer order");
	discover_free(&d);
	discover_free(&e);

	p.srv_weights = true;
	test_seed3(&d, &p);
	test_good(&d, 0, "a b c");
	discover_due(&d, &ch);
	tap_ok(ch.weights, "weights = srv: the answer's weight (33) is a change");
	discover_commit(&d);
	tap_is_int(discover_find(&d, "cache-a")->weight, 33, "and is the member's weight");
	discover_free(&d);
}

/* The [discovery] keys as the file gives them, and what -t refuses. */
static int test_conf_errors(const char *text, const char *want)
{
	struct conf_errors errs = { 0 };
	struct conf *c = conf_load_string("d.ini", text, &errs);
	int ok = !c && errs.n >= 1 && strstr(errs.msg[0], want) != NULL;

	if (!ok)
		tap_diag("got: %s", errs.n ? errs.msg[0] : c ? "(loaded)" : "(nothing)");
	conf_free(c);
	conf_errors_free(&errs);
	return ok;
}

static void test_conf(void)
{
	struct conf_errors errs = { 0 };
	struct conf *c = conf_load_string("d.ini", "[discovery]\nsrv = _http._tcp.a.ns.svc.cluster.local "
					  "_http._tcp.b.ns.svc.cluster.local\nmax_remove = 25%\nresolver = 127.0.0.1:5353\n"
					  "[backend s]\nurl = http://127.0.0.1:1\n", &errs);
	struct conf_found f[2] = { { "cache-0", "10.0.0.1", 8080, 1 }, { "s", "10.0.0.2", 80, 1 } };
	char err[256];

	tap_ok(c != NULL, "[discovery] with two SRV names, a resolver and a share in percent loads");
	conf_errors_free(&errs);
	if (!c)
		return;
	tap_ok(c->disc_max_remove == 25 && c->disc_interval_ms == 5000 && c->disc_add_after == 2 &&
	       c->disc_remove_after_ms == 120000 && c->disc_apply_every_ms == 10000 && c->nstatic == 1,
	       "defaults: interval 5s, add_after 2, remove_after 120s, apply_every 10s");
	tap_ok(conf_add_backends(c, f, 2, err, sizeof(err)) == 0 && c->nbackends == 2, "a discovered name joins; one "
	       "the file names is the file's");
	tap_is_str(conf_backend_find(c, "cache-0")->url, "http://10.0.0.1:8080", "its url from address and port");
	tap_is_str(conf_backend_find(c, "s")->url, "http://127.0.0.1:1", "the file's section wins");
	conf_free(c);
	c = conf_load_string("d.ini", "[discovery]\nsrv = _http._tcp.c.ns.svc.cluster.local\n", &errs);
	tap_ok(c && c->nbackends == 0, "srv and no [backend]: valid");
	conf_free(c);
	conf_errors_free(&errs);
	c = conf_load_string("d.ini", "[discovery]\nsrv = _http._tcp.c.ns.svc.cluster.local\n[backend cache-0]\n"
			     "weight = 3\nmax_inflight = 7\nhealth_path = /ok\n", &errs);
	tap_ok(c && c->nbackends == 0 && c->ntemplates == 1, "a [backend] without url beside srv: the settings of a "
	       "name, not a backend");
	conf_errors_free(&errs);
	if (c && conf_add_backends(c, f, 1, err, sizeof(err)) == 0 && c->nbackends == 1) {
		const struct conf_backend *be = conf_backend_find(c, "cache-0");

		tap_ok(be && be->weight == 3 && be->max_inflight == 7 && strcmp(be->health.path, "/ok") == 0 &&
		       strcmp(be->url, "http://10.0.0.1:8080") == 0,
		       "discovered, the name takes its section's weight, cap and checks, at the answer's address");
	} else {
		tap_ok(0, "discovered, the name takes its section's weight, cap and checks, at the answer's address");
	}
	conf_free(c);
	tap_ok(test_conf_errors("[backend a]\nweight = 2\n", "d.ini:1: [backend a] has no url"),
	       "without srv a [backend] without url is still an error");
	tap_ok(test_conf_errors("[discovery]\nsrv = bad/name\n", "d.ini:2: srv: 'bad/name' is not a DNS name"),
	       "a bad SRV name, at its line");
	tap_ok(test_conf_errors("[discovery]\nsrv = _a._tcp.x\nresolver = nowhere\n", "d.ini:3: resolver: nowhere"),
	       "a resolver that is no address, at its line");
	tap_ok(test_conf_errors("[ring]\nscheme = nginx\n[discovery]\nsrv = _a._tcp.x\n",
				"needs [ring] scheme ringproxy"), "discovery under a compat scheme is refused");
	tap_ok(test_conf_errors("[discovery]\nsrv = _a._tcp.x\nname = last-label\n", "d.ini:3:"),
	       "name takes first-label or fqdn");
	tap_ok(test_conf_errors("[discovery]\nsrv = _a._tcp.x\nmax_remove = 150%\n", "d.ini:3:"),
	       "max_remove over 100%% is refused");
}

int main(void)
{
	test_conf();
	test_names();
	test_join();
	test_failures();
	test_leave();
	test_restart();
	test_alternating();
	test_mass();
	test_never_empty();
	test_weights_and_order();
	return tap_done();
}
