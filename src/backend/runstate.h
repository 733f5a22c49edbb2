/*
 * runstate.h -- each backend's runtime state, the operator's (ringproxy
 * ctl, POST /backend on the admin listener): ready, drain (leaving the
 * ring over a window, its keys moving warmly), maint (out of the ring at
 * once), and a runtime weight over the file's. It is kept in the
 * backend's registry entry, so a reload keeps it, and in [proxy]
 * state_file, so a restart does. Main thread only.
 */
#ifndef RINGPROXY_RUNSTATE_H
#define RINGPROXY_RUNSTATE_H

#include <stddef.h>
#include <stdint.h>

#include "backend/registry-t.h"

struct conf;

enum runstate {
	RUNSTATE_READY = 0,     /* in the ring at its weight */
	RUNSTATE_DRAIN,         /* weight 0, its keys moving over a window */
	RUNSTATE_MAINT,         /* weight 0, its keys moved at once */
};
#define RUNSTATE_N 3

/* The bounds of a runtime state, the same for ctl (proxy.c) and the
 * state file: a weight, a drain's window, a drain's start (Unix ms, up to
 * the end of year 9999). */
#define RUNSTATE_WEIGHT_MAX 1000
#define RUNSTATE_DRAIN_MAX_MS 86400000
#define RUNSTATE_WALL_MAX_MS 253402300799999LL

/* A backend's runtime state as one value (the registry entry's fields). */
struct runstate_of {
	int state;              /* enum runstate */
	int weighted;           /* weight is set (else the file's) */
	double weight;
	int64_t drain_start_ms; /* Unix ms: what the state file keeps */
	uint64_t drain_span_ms;
	int64_t drain_mono_ms;  /* the start on registry_now_ms's clock; 0:
				   runstate_put derives it from drain_start_ms
				   and the wall clock now (a state file's) */
};

/* Read and write b's; runstate_put(b, &(struct runstate_of){ 0 }) makes it
 * ready at the file's weight. */
void runstate_get(const struct backend *b, struct runstate_of *rs);
void runstate_put(struct backend *b, const struct runstate_of *rs);

/* "ready", "drain", "maint"; and back (-1: none of them). */
const char *runstate_name(int st);
int runstate_parse(const char *word);

/* The weight backend b has in the ring: 0 when draining or in
 * maintenance, else its runtime weight, else the file's (conf_weight). */
double runstate_weight(const struct backend *b, double conf_weight);

/* A drain's progress at now_ms (registry_now_ms: monotonic, so a wall
 * clock that jumps neither ends nor restarts it): the share of its
 * window gone by, 0..1 (each key leaves at its own moment, uniform over
 * the window, so this is also the share of its keys gone); -1 when b is
 * not draining. */
double runstate_drain_progress(const struct backend *b, int64_t now_ms);

/* Write the runtime states of backends be[0..nbe) that differ from the file's
 * (a state other than ready, or a runtime weight) to path, atomically: a
 * temporary file beside it, fsync, rename, fsync of the directory. 0, or
 * -1 with err. */
int runstate_save(const char *path, struct backend *const *be, size_t nbe, char *err, size_t errlen);

/* Read path (written by runstate_save) and set the states it holds on
 * the registry entries of c's backends; each one no longer in c is
 * dropped with a log line. A missing file holds nothing. 0, or -1 with
 * "FILE:LINE: what; what to do" in err (unreadable, or malformed). */
int runstate_load(const char *path, const struct conf *c, char *err, size_t errlen);

/* What runstate_load does but set anything: each line of path checked,
 * for ringproxy -t. 0, or -1 with "FILE:LINE: what; what to do". */
int runstate_check(const char *path, const struct conf *c, char *err, size_t errlen);

/* One line of the state file ("NAME STATE WEIGHT DRAIN_START_MS
 * DRAIN_SPAN_MS") into name and *rs, checked against ctl's bounds (a
 * weight from 0 to RUNSTATE_WEIGHT_MAX, whole under c's scheme if it is
 * not ringproxy; a drain's window of 1 ms to RUNSTATE_DRAIN_MAX_MS, at
 * most that for the other states; a start from 0 to
 * RUNSTATE_WALL_MAX_MS). 0, or -1 with what is wrong in why. Pure. */
int runstate_check_line(const char *line, const struct conf *c, char *name, size_t namelen,
			struct runstate_of *rs, char *why, size_t whylen);

/* Drop the runtime state of every registry entry that is not one of
 * be[0..nbe) (a reload of conf_path removed it), each with a log line: a
 * backend added again later starts ready. Returns how many were dropped. */
size_t runstate_forget(struct backend *const *be, size_t nbe, const char *conf_path);

#endif
