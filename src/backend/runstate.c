/*
 * runstate.c -- the backends' runtime states (runstate.h): their words,
 * the weight a ring gives each, and [proxy] state_file. Main thread only:
 * the admin listener sets a state, the snapshot builds read it, the
 * stats show it.
 *
 * The state file is a few lines of text, one per backend whose state is
 * not the file's: "NAME STATE WEIGHT DRAIN_START_MS DRAIN_SPAN_MS", WEIGHT
 * "-" when none is set at runtime, the drain's start on the wall clock so
 * that a restart resumes it where it had got.
 */
#include "backend/runstate.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config/conf.h"
#include "base/log.h"
#include "backend/registry.h"
#include "ring/ring-t.h"

static const char *const runstate_names[RUNSTATE_N] = { "ready", "drain", "maint" };

const char *runstate_name(int st)
{
	return st >= 0 && st < RUNSTATE_N ? runstate_names[st] : "?";
}

int runstate_parse(const char *word)
{
	for (int i = 0; i < RUNSTATE_N; i++)
		if (strcmp(word, runstate_names[i]) == 0)
			return i;
	return -1;
}

double runstate_weight(const struct backend *b, double conf_weight)
{
	if (atomic_load(&b->admin_state) != RUNSTATE_READY)
		return 0;
	return atomic_load(&b->admin_weighted) ? atomic_load(&b->admin_weight) : conf_weight;
}

double runstate_drain_progress(const struct backend *b, int64_t now_ms)
{
	int64_t start = atomic_load(&b->drain_mono_ms);
	uint64_t span = atomic_load(&b->drain_span_ms);

	if (atomic_load(&b->admin_state) != RUNSTATE_DRAIN)
		return -1;
	if (now_ms <= start)
		return span == 0 ? 1 : 0;
	/* compared as gone >= span: start + span may not fit */
	if ((uint64_t)(now_ms - start) >= span)
		return 1;
	return (double)(now_ms - start) / (double)span;
}

/* Whether b's state is not what the file alone gives. */
static int runstate_set(const struct backend *b)
{
	return atomic_load(&b->admin_state) != RUNSTATE_READY || atomic_load(&b->admin_weighted);
}

void runstate_get(const struct backend *b, struct runstate_of *rs)
{
	rs->state = atomic_load(&b->admin_state);
	rs->weighted = atomic_load(&b->admin_weighted);
	rs->weight = atomic_load(&b->admin_weight);
	rs->drain_start_ms = atomic_load(&b->drain_start_ms);
	rs->drain_span_ms = atomic_load(&b->drain_span_ms);
	rs->drain_mono_ms = atomic_load(&b->drain_mono_ms);
}

void runstate_put(struct backend *b, const struct runstate_of *rs)
{
	atomic_store(&b->admin_state, rs->state);
	atomic_store(&b->admin_weighted, rs->weighted);
	atomic_store(&b->admin_weight, rs->weight);
	int64_t mono = rs->drain_mono_ms;

	if (mono == 0 && rs->drain_start_ms != 0) {
		/* a start read from the state file: where it lies on the
		 * monotonic clock, by the wall clock now (the one moment it is
		 * read on the wall clock) */
		struct timespec ts;
		int64_t wall;

		clock_gettime(CLOCK_REALTIME, &ts);
		wall = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
		mono = registry_now_ms() - (wall > rs->drain_start_ms ? wall - rs->drain_start_ms : 0);
	}
	atomic_store(&b->drain_start_ms, rs->drain_start_ms);
	atomic_store(&b->drain_span_ms, rs->drain_span_ms);
	atomic_store(&b->drain_mono_ms, mono);
}

/* fsync the directory of path, so that the rename is on disk too. */
static int runstate_sync_dir(const char *path)
{
	char *copy = strdup(path);
	int fd = copy ? open(dirname(copy), O_RDONLY | O_DIRECTORY) : -1;
	int rc = fd >= 0 && fsync(fd) == 0 ? 0 : -1;

	if (fd >= 0)
		close(fd);
	free(copy);
	return rc;
}

int runstate_save(const char *path, struct backend *const *be, size_t nbe, char *err, size_t errlen)
{
	char tmp[4096];
	FILE *f = NULL;
	int fd, ok;

	/* a name of its own in the file's directory, made by mkostemp
	 * (O_EXCL): a link planted at a fixed PATH.tmp is never followed,
	 * and the rename stays within one file system */
	if (snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path) >= (int)sizeof(tmp)) {
		snprintf(err, errlen, "state_file %s: path too long", path);
		return -1;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "state_file %s: cannot write %s: %s", path, tmp, strerror(errno));
		return -1;
	}
	/* mkostemp's 0600: the states are no secret, monitoring may read them */
	if (fchmod(fd, 0644) < 0 || !(f = fdopen(fd, "w"))) {
		snprintf(err, errlen, "state_file %s: cannot write %s: %s", path, tmp, strerror(errno));
		close(fd);
		unlink(tmp);
		return -1;
	}
	fprintf(f, "# ringproxy runtime states (ringproxy ctl), written at each change and read at start\n"
		"# NAME STATE WEIGHT DRAIN_START_MS DRAIN_SPAN_MS\n");
	for (size_t i = 0; i < nbe; i++) {
		const struct backend *b = be[i];
		char w[40] = "-";

		if (!runstate_set(b))
			continue;
		if (atomic_load(&b->admin_weighted))
			snprintf(w, sizeof(w), "%.17g", atomic_load(&b->admin_weight));
		fprintf(f, "%s %s %s %" PRId64 " %" PRIu64 "\n", b->name, runstate_name(atomic_load(&b->admin_state)),
			w, atomic_load(&b->drain_start_ms), atomic_load(&b->drain_span_ms));
	}
	ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
	ok = (fclose(f) == 0) && ok;
	if (!ok || rename(tmp, path) < 0) {
		snprintf(err, errlen, "state_file %s: cannot write it: %s", path, strerror(errno));
		unlink(tmp);
		return -1;
	}
	if (runstate_sync_dir(path) < 0) {
		snprintf(err, errlen, "state_file %s: written, but its directory could not be synced: %s", path,
			 strerror(errno));
		return -1;
	}
	return 0;
}

int runstate_check_line(const char *line, const struct conf *c, char *name, size_t namelen,
			struct runstate_of *rs, char *why, size_t whylen)
{
	char nm[256], state[16], weight[64], start[32], span[32], extra[2], *end;
	unsigned long long v;

	memset(rs, 0, sizeof(*rs));
	if (sscanf(line, "%255s %15s %63s %31s %31s %1s", nm, state, weight, start, span, extra) != 5 ||
	    (rs->state = runstate_parse(state)) < 0) {
		snprintf(why, whylen, "not a runtime state line (NAME ready|drain|maint WEIGHT|- DRAIN_START_MS "
			 "DRAIN_SPAN_MS)");
		return -1;
	}
	if (strcmp(weight, "-") != 0) {
		errno = 0;
		rs->weight = strtod(weight, &end);
		rs->weighted = 1;
		/* ctl's bounds (proxy.c): 0 to RUNSTATE_WEIGHT_MAX, whole
		 * under a scheme other than ringproxy */
		if (errno || *end || !isfinite(rs->weight) || rs->weight < 0 || rs->weight > RUNSTATE_WEIGHT_MAX ||
		    (c->scheme != RING_SCHEME_RINGPROXY && rs->weight != floor(rs->weight))) {
			snprintf(why, whylen, "weight '%s' is not a number from 0 to %d%s, or -", weight,
				 RUNSTATE_WEIGHT_MAX, c->scheme != RING_SCHEME_RINGPROXY ? " (a whole one under this "
				 "scheme)" : "");
			return -1;
		}
	}
	/* digits only, then the bounds: a wall-clock start from 1970 to
	 * 9999, a drain's window as ctl takes it; no sum of the two can
	 * overflow */
	errno = 0;
	v = start[strspn(start, "0123456789")] == '\0' ? strtoull(start, NULL, 10) : ULLONG_MAX;
	if (errno || v > RUNSTATE_WALL_MAX_MS) {
		snprintf(why, whylen, "drain start '%s' is not a time in Unix milliseconds", start);
		return -1;
	}
	rs->drain_start_ms = (int64_t)v;
	errno = 0;
	v = span[strspn(span, "0123456789")] == '\0' ? strtoull(span, NULL, 10) : ULLONG_MAX;
	if (errno || v > RUNSTATE_DRAIN_MAX_MS || (rs->state == RUNSTATE_DRAIN && v == 0)) {
		snprintf(why, whylen, "drain span '%s' is not a drain's window (1 to %d ms)", span, RUNSTATE_DRAIN_MAX_MS);
		return -1;
	}
	rs->drain_span_ms = v;
	snprintf(name, namelen, "%s", nm);
	return 0;
}

/* Read path: each line checked (runstate_check_line), and with apply its
 * state set on the registry entry of its backend in c. */
static int runstate_read(const char *path, const struct conf *c, bool apply, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	char line[1024], name[256];
	int lineno = 0, rc = -1;

	if (!f) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errlen, "%s: cannot read the state file: %s; fix its permissions, or remove it to start "
			 "every backend ready", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		struct runstate_of rs;
		struct backend *b;
		char why[256];

		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			snprintf(err, errlen, "%s:%d: line longer than %zu bytes; fix it, or remove the file to start "
				 "every backend ready", path, lineno, sizeof(line) - 2);
			goto out;
		}
		if (line[0] == '#' || line[strspn(line, " \t\r\n")] == '\0')
			continue;
		if (runstate_check_line(line, c, name, sizeof(name), &rs, why, sizeof(why)) < 0) {
			snprintf(err, errlen, "%s:%d: %s; fix it, or remove the file to start every backend ready", path,
				 lineno, why);
			goto out;
		}
		if (!conf_backend_find(c, name)) {
			if (apply)
				log_info("%s:%d: backend %s is no longer in %s: its runtime state (%s) is dropped", path,
					 lineno, name, c->path, runstate_name(rs.state));
			continue;
		}
		if (!apply)
			continue;
		b = registry_find(name, why, sizeof(why));
		if (!b) {
			snprintf(err, errlen, "%s:%d: backend %s: %s", path, lineno, name, why);
			goto out;
		}
		rs.drain_mono_ms = 0;   /* runstate_put places the file's start */
		runstate_put(b, &rs);
	}
	if (ferror(f)) {
		snprintf(err, errlen, "%s: cannot read the state file: %s", path, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	fclose(f);
	return rc;
}

int runstate_load(const char *path, const struct conf *c, char *err, size_t errlen)
{
	return runstate_read(path, c, true, err, errlen);
}

int runstate_check(const char *path, const struct conf *c, char *err, size_t errlen)
{
	return runstate_read(path, c, false, err, errlen);
}

size_t runstate_forget(struct backend *const *be, size_t nbe, const char *conf_path)
{
	size_t n = 0;

	for (uint32_t id = 0; id < registry_size(); id++) {
		struct backend *b = registry_get(id);
		size_t i;

		/* few have a state: look for the others in be[] only then,
		 * which keeps a reload of thousands from being n^2 */
		if (!runstate_set(b))
			continue;
		for (i = 0; i < nbe && be[i] != b; i++)
			;
		if (i < nbe)
			continue;
		log_info("backend %s is no longer in %s: its runtime state (%s%s) is dropped", b->name, conf_path,
			 runstate_name(atomic_load(&b->admin_state)), atomic_load(&b->admin_weighted) ? ", weight" : "");
		runstate_put(b, &(struct runstate_of){ 0 });
		n++;
	}
	return n;
}
