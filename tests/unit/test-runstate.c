/*
 * test-runstate.c -- runtime states (runstate.c) and the rings and ramps
 * they make (snapshot_reweigh, snapshot_ramp_over): the weight each state
 * gives, the state file's exact text, its reading back (a backend no
 * longer in the file dropped, a malformed line refused with FILE:LINE), a
 * drain's keys held on the draining backend until their moments, and a
 * backend in maintenance holding none even while a ramp is in progress.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/conf.h"
#include "backend/registry.h"
#include "ring/ring.h"
#include "backend/runstate.h"
#include "backend/snapshot.h"
#include "tap.h"

#define CONF3 "[ring]\nvnodes = 100\n[backend a]\nurl = http://127.0.0.1:1\n" \
	"[backend b]\nurl = http://127.0.0.1:2\n[backend c]\nurl = http://127.0.0.1:3\n"

static struct snapshot *test_snap(const char *text)
{
	struct conf_errors errs = { 0 };
	struct conf *c = conf_load_string("t.ini", text, &errs);
	struct snapshot *s = NULL;
	char err[512];

	conf_errors_free(&errs);
	if (c && !(s = snapshot_new(c, 1, err, sizeof(err)))) {
		tap_diag("snapshot_new: %s", err);
		conf_free(c);
	}
	return s;
}

static void test_write(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	fputs(text, f);
	fclose(f);
}

/* The first key position b owns in r (by walking a few thousand). */
/* The registry entries of s's backends, as proxy.c hands them over. */
static size_t test_backends(const struct snapshot *s, struct backend **be, size_t cap)
{
	size_t n = 0;

	for (; n < s->nbe && n < cap; n++)
		be[n] = s->be[n].state;
	return n;
}

static uint64_t test_pos_of(const struct ring *r, int b, uint64_t *u, int nth)
{
	char key[32];

	for (int i = 0; i < 100000; i++) {
		snprintf(key, sizeof(key), "/k/%d", i);
		uint64_t pos = ring_hash2(key, strlen(key), u);

		if (ring_lookup(r, pos) == b && nth-- == 0)
			return pos;
	}
	return 0;
}

/* How many entries dir holds (. and .. aside). */
static int test_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)) != NULL)
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	if (d)
		closedir(d);
	return n;
}

/* The state file's lines are held to ctl's bounds, each refusal
 * FILE:LINE; runstate_check (ringproxy -t) refuses what runstate_load
 * does, and sets nothing. */
static void test_bounds(struct snapshot *s, const char *bad)
{
	static const struct {
		const char *line, *why;
	} cases[] = {
		{ "b ready 1e300 0 0\n", ":1: weight '1e300' is not a number from 0 to 1000, or -; fix it" },
		{ "b ready 1001 0 0\n", ":1: weight '1001' is not a number from 0 to 1000" },
		{ "b ready nan 0 0\n", ":1: weight 'nan' is not a number" },
		{ "b drain - 1700000000000 9223372036854775807\n", ":1: drain span '9223372036854775807' is not a drain's window (1 to 86400000 ms)" },
		{ "b drain - 1700000000000 0\n", ":1: drain span '0' is not a drain's window" },
		{ "b drain - 9223372036854775807 1000\n", ":1: drain start '9223372036854775807' is not a time in Unix milliseconds" },
		{ "b drain - -5 1000\n", ":1: drain start '-5' is not a time" },
		{ "b maint - 0 0 extra\n", ":1: not a runtime state line" },
	};
	struct runstate_of rs;
	struct conf_errors errs = { 0 };
	struct conf *compat;
	char err[512], name[64];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		test_write(bad, cases[i].line);
		runstate_put(s->be[1].state, &(struct runstate_of){ 0 });
		tap_ok(runstate_load(bad, s->conf, err, sizeof(err)) < 0 && strstr(err, cases[i].why) &&
		       strncmp(err, bad, strlen(bad)) == 0 && atomic_load(&s->be[1].state->admin_state) == RUNSTATE_READY,
		       "state file '%.*s': refused as STATE_FILE:LINE, the state left as it was",
		       (int)strlen(cases[i].line) - 1, cases[i].line);
		if (!strstr(err, cases[i].why))
			tap_diag("got: %s", err);
		tap_ok(runstate_check(bad, s->conf, err, sizeof(err)) < 0 && strstr(err, cases[i].why),
		       "... and by -t's check");
	}
	test_write(bad, "b drain 1000 1700000000000 86400000\nc maint - 0 0\n");
	tap_ok(runstate_check(bad, s->conf, err, sizeof(err)) == 0 &&
	       atomic_load(&s->be[1].state->admin_state) == RUNSTATE_READY &&
	       atomic_load(&s->be[2].state->admin_state) == RUNSTATE_READY,
	       "the bounds themselves are taken; -t's check sets nothing");
	compat = conf_load_string("n.ini", "[ring]\nscheme = nginx\n[backend b]\nurl = http://127.0.0.1:2\n", &errs);
	conf_errors_free(&errs);
	tap_ok(compat && runstate_check_line("b ready 1.5 0 0\n", compat, name, sizeof(name), &rs, err, sizeof(err)) < 0 &&
	       strstr(err, "(a whole one under this scheme)") &&
	       runstate_check_line("b ready 2 0 0\n", compat, name, sizeof(name), &rs, err, sizeof(err)) == 0 &&
	       rs.weighted && rs.weight == 2 && strcmp(name, "b") == 0,
	       "under a compat scheme a weight is whole, as ctl has it");
	conf_free(compat);
}

int main(void)
{
	char dir[] = "/tmp/test-runstate.XXXXXX", path[512], bad[128], err[512];
	struct snapshot *s, *r, *m;
	struct backend *be[8];
	struct snap_ramp_info info;
	struct backend *a, *b, *c;
	char *text;
	int held = 0, moved = 0;

	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof(path), "%s/state", dir);
	snprintf(bad, sizeof(bad), "%s/bad", dir);
	s = test_snap(CONF3);
	if (!tap_ok(s != NULL, "a snapshot of three backends"))
		return 1;
	a = s->be[0].state, b = s->be[1].state, c = s->be[2].state;
	/* a find starts where the last one ended: any order finds the
	 * same entries, and a new name gets one of its own, once */
	tap_ok(registry_find(c->name, err, sizeof(err)) == c && registry_find(a->name, err, sizeof(err)) == a &&
	       registry_find(a->name, err, sizeof(err)) == a && registry_find(b->name, err, sizeof(err)) == b &&
	       registry_find(c->name, err, sizeof(err)) == c,
	       "the registry finds each name's entry in any order");
	{
		struct backend *z = registry_find("zz-new", err, sizeof(err));

		tap_ok(z && z != a && z != b && z != c && registry_find(a->name, err, sizeof(err)) == a &&
		       registry_find("zz-new", err, sizeof(err)) == z, "... and a new name once");
	}

	tap_is_str(runstate_name(RUNSTATE_MAINT), "maint", "the states' words");
	tap_is_int(runstate_parse("drain"), RUNSTATE_DRAIN, "... and back");
	tap_is_int(runstate_parse("down"), -1, "a word that is no state: -1");

	/* the weights each state gives, and the ring they make */
	runstate_put(b, &(struct runstate_of){ .state = RUNSTATE_MAINT });
	runstate_put(c, &(struct runstate_of){ .weighted = 1, .weight = 2.5 });
	tap_ok(runstate_weight(a, 1) == 1 && runstate_weight(b, 1) == 0 && runstate_weight(c, 1) == 2.5,
	       "ready: the file's weight; maint: 0; a runtime weight: its own");
	r = snapshot_reweigh(s, err, sizeof(err));
	tap_ok(r && r->ring->npoints_of[0] == 100 && r->ring->npoints_of[1] == 0 && r->ring->npoints_of[2] == 250 &&
	       r->conf == s->conf && r->generation == s->generation,
	       "snapshot_reweigh: the ring of the runtime weights, the same config and generation");

	/* the state file */
	tap_ok(runstate_save(path, be, test_backends(r, be, 8), err, sizeof(err)) == 0, "runstate_save");
	text = tap_slurp(path);
	tap_is_str(text ? text : "", "# ringproxy runtime states (ringproxy ctl), written at each change and read at start\n"
		   "# NAME STATE WEIGHT DRAIN_START_MS DRAIN_SPAN_MS\nb maint - 0 0\nc ready 2.5 0 0\n",
		   "the file holds the states other than the file's, one a line");
	free(text);
	tap_is_int(test_files(dir), 1, "no temporary file is left beside it");
	/* a link planted where a fixed temporary name would be is not
	 * followed: the file it points to is neither made nor written */
	snprintf(err, sizeof(err), "%s/state.tmp", dir);
	snprintf(bad, sizeof(bad), "%s/victim", dir);
	tap_ok(symlink(bad, err) == 0 && runstate_save(path, be, test_backends(r, be, 8), err + 256, 256) == 0 &&
	       access(bad, F_OK) != 0, "a link planted at STATE.tmp is not followed");
	unlink(err);
	snprintf(bad, sizeof(bad), "%s/bad", dir);
	runstate_put(b, &(struct runstate_of){ 0 });
	runstate_put(c, &(struct runstate_of){ 0 });
	tap_ok(runstate_load(path, s->conf, err, sizeof(err)) == 0 && atomic_load(&b->admin_state) == RUNSTATE_MAINT &&
	       runstate_weight(c, 1) == 2.5, "runstate_load sets them back");
	runstate_put(b, &(struct runstate_of){ 0 });
	runstate_put(c, &(struct runstate_of){ 0 });
	{
		struct snapshot *two = test_snap("[ring]\nvnodes = 100\n[backend a]\nurl = http://127.0.0.1:1\n"
						 "[backend b]\nurl = http://127.0.0.1:2\n");

		tap_ok(two && runstate_load(path, two->conf, err, sizeof(err)) == 0 &&
		       atomic_load(&b->admin_state) == RUNSTATE_MAINT && runstate_weight(c, 1) == 1,
		       "a backend no longer in the file is not given its state");
		runstate_put(c, &(struct runstate_of){ .state = RUNSTATE_DRAIN });
		tap_is_int(runstate_forget(be, test_backends(two, be, 8), two->conf->path), 1, "runstate_forget drops the state of a backend not in the snapshot");
		tap_ok(atomic_load(&c->admin_state) == RUNSTATE_READY && atomic_load(&b->admin_state) == RUNSTATE_MAINT,
		       "... and keeps the others'");
		snapshot_unref(two);
	}
	test_write(bad, "# ok\nb maint -\n");
	tap_ok(runstate_load(bad, s->conf, err, sizeof(err)) < 0, "a malformed line is refused");
	snprintf(path, sizeof(path), "%s:2: not a runtime state line (NAME ready|drain|maint WEIGHT|- DRAIN_START_MS "
		 "DRAIN_SPAN_MS); fix it, or remove the file to start every backend ready", bad);
	tap_is_str(err, path, "... with FILE:LINE and what to do");
	test_write(bad, "b maint heavy 0 0\n");
	tap_ok(runstate_load(bad, s->conf, err, sizeof(err)) < 0 && strstr(err, ":1: weight 'heavy'"),
	       "a bad weight is refused");
	test_bounds(s, bad);
	snprintf(path, sizeof(path), "%s/none", dir);
	tap_ok(runstate_load(path, s->conf, err, sizeof(err)) == 0, "a missing file holds nothing");

	/* a drain's progress */
	runstate_put(b, &(struct runstate_of){ .state = RUNSTATE_DRAIN, .drain_start_ms = 1000, .drain_span_ms = 4000,
					      .drain_mono_ms = 1000 });
	tap_ok(runstate_drain_progress(b, 1000) == 0 && runstate_drain_progress(b, 2000) == 0.25 &&
	       runstate_drain_progress(b, 9000) == 1 && runstate_drain_progress(a, 2000) == -1,
	       "a drain's progress: the share of its window gone by; -1 when not draining");
	/* its wall clock start an hour ahead of now (the clock jumped back
	 * since): the progress is read on the monotonic clock alone */
	runstate_put(b, &(struct runstate_of){ .state = RUNSTATE_DRAIN, .drain_start_ms = INT64_C(4102444800000),
					      .drain_span_ms = 4000, .drain_mono_ms = 1000 });
	tap_ok(runstate_drain_progress(b, 3000) == 0.5, "... read on the monotonic clock, whatever the wall clock says");
	runstate_put(b, &(struct runstate_of){ .state = RUNSTATE_DRAIN, .drain_start_ms = 1000,
					      .drain_span_ms = UINT64_MAX >> 1, .drain_mono_ms = 1000 });
	tap_ok(runstate_drain_progress(b, INT64_MAX) < 1, "... a window of 2^63-1 ms does not overflow");

	/* a drain from s (all ready): b's keys held on b until their moments */
	runstate_put(b, &(struct runstate_of){ 0 });
	snapshot_unref(r);
	runstate_put(b, &(struct runstate_of){ .state = RUNSTATE_DRAIN, .drain_start_ms = 0, .drain_span_ms = 1000 });
	r = snapshot_reweigh(s, err, sizeof(err));
	tap_ok(r && snapshot_ramp_over(r, s, 5000, 0, 1000, &info) == 0 && info.kind == SNAP_RAMP_NEW && r->ramp,
	       "a drain ramps over its own window");
	for (int k = 0; r && r->ramp && k < 200; k++) {
		uint64_t u, pos = test_pos_of(s->ring, 1, &u, k);
		int prev, at0 = ring_ramp_owner(r->ramp->step, r->ramp->nsteps, pos, u, 5000, &prev);
		int mid = ring_ramp_owner(r->ramp->step, r->ramp->nsteps, pos, u, 5500, NULL);
		int end = ring_ramp_owner(r->ramp->step, r->ramp->nsteps, pos, u, 6000, NULL);
		int due = ring_ramp_switched(&r->ramp->step[0], u, 5500);

		held += at0 == 1 && end != 1 && (mid == 1) == !due;
		moved += mid != 1;
	}
	tap_is_int(held, 200, "each of b's keys stays on b until its moment, then leaves it");
	tap_ok(moved > 60 && moved < 140, "at the midpoint about half have left (%d of 200)", moved);

	/* maint of a while the drain's ramp is in progress: a holds nothing,
	 * b's keys keep their moments */
	runstate_put(a, &(struct runstate_of){ .state = RUNSTATE_MAINT });
	m = r ? snapshot_reweigh(r, err, sizeof(err)) : NULL;
	tap_ok(m && snapshot_ramp_over(m, r, 5500, 0, 500, &info) == 0 && m->ramp, "maint during the drain");
	held = moved = 0;
	for (int k = 0; m && m->ramp && k < 200; k++) {
		uint64_t u, pos = test_pos_of(s->ring, 0, &u, k);

		moved += ring_ramp_owner(m->ramp->step, m->ramp->nsteps, pos, u, 5500, NULL) != 0;
		/* keys of c's now, some still held on b by the drain */
		pos = test_pos_of(r->ring, 2, &u, k);
		held += ring_ramp_owner(m->ramp->step, m->ramp->nsteps, pos, u, 5500, NULL) ==
			ring_ramp_owner(r->ramp->step, r->ramp->nsteps, pos, u, 5500, NULL);
	}
	tap_is_int(moved, 200, "every key of the backend in maint leaves it at once");
	tap_is_int(held, 200, "the keys of the others stay where the drain had them");
	snapshot_unref(m);
	snapshot_unref(r);
	snapshot_unref(s);
	registry_free();
	snprintf(path, sizeof(path), "rm -rf %s", dir);
	if (system(path) != 0)
		tap_diag("could not remove %s", dir);
	return tap_done();
}
