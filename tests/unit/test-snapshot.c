/*
 * test-snapshot.c -- snapshot_moved (backend/snapshot.c): a backend whose
 * host name resolves to another address (a pod that restarted behind its
 * name) gets a snapshot with the new address and the same ring, config
 * and generation, so no key moves; the same address, or a name not in
 * the file, makes none.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "backend/snapshot.h"
#include "config/conf.h"
#include "ring/ring.h"
#include "tap.h"

int main(void)
{
	struct conf_errors errs = { 0 };
	struct conf *c = conf_load_string("t.ini", "[backend a]\nurl = http://localhost:8001\n"
					  "[backend b]\nurl = http://127.0.0.1:8002\n", &errs);
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(8001) };
	struct snapshot *s = NULL, *n;
	char err[256];

	conf_errors_free(&errs);
	if (c)
		s = snapshot_new(c, 7, err, sizeof(err));
	if (!tap_ok(s != NULL, "a snapshot of two backends, one by host name"))
		return tap_done();
	inet_pton(AF_INET, "127.0.0.9", &sin.sin_addr);
	n = snapshot_moved(s, "a", (const struct sockaddr *)&sin, sizeof(sin));
	tap_ok(n != NULL, "a's name resolves elsewhere: a new snapshot");
	if (n) {
		tap_is_str(n->be[0].addr_text, "127.0.0.9:8001", "with a's new address");
		tap_is_str(n->be[1].addr_text, s->be[1].addr_text, "b's as it was");
		tap_ok(n->ring == s->ring && n->conf == s->conf && n->generation == 7,
		       "the same ring, config and generation: no key moves");
		tap_ok(ring_fingerprint(n->ring) == ring_fingerprint(s->ring), "the same fingerprint");
		tap_ok(snapshot_moved(n, "a", (const struct sockaddr *)&sin, sizeof(sin)) == NULL,
		       "the same address again: no snapshot");
		snapshot_unref(n);
	}
	tap_ok(snapshot_moved(s, "zz", (const struct sockaddr *)&sin, sizeof(sin)) == NULL, "a name not in the file: none");
	snapshot_unref(s);
	return tap_done();
}
