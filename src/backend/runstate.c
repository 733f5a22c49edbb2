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
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config/conf.h"
#include "base/log.h"
#include "backend/registry.h"

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

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
		snprintf(err, errlen, "state_file %s: path too long", path);
		return -1;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		snprintf(err, errlen, "state_file %s: cannot write %s: %s", path, tmp, strerror(errno));
		if (fd >= 0)
			close(fd);
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

int runstate_load(const char *path, const struct conf *c, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char line[1024], name[256], state[16], weight[64];
	int lineno = 0, rc = -1;

	if (!f) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errlen, "%s: cannot read the state file: %s; fix its permissions, or remove it to start "
			 "every backend ready", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		int64_t start;
		uint64_t span;
		struct backend *b;
		char why[256], *end;
		double w = 0;
		int st;

		lineno++;
		if (line[0] == '#' || line[strspn(line, " \t\r\n")] == '\0')
			continue;
		if (sscanf(line, "%255s %15s %63s %" SCNd64 " %" SCNu64, name, state, weight, &start, &span) != 5 ||
		    (st = runstate_parse(state)) < 0) {
			snprintf(err, errlen, "%s:%d: not a runtime state line (NAME ready|drain|maint WEIGHT|- "
				 "DRAIN_START_MS DRAIN_SPAN_MS); fix it, or remove the file to start every backend "
				 "ready", path, lineno);
			goto out;
		}
		if (strcmp(weight, "-") != 0) {
			errno = 0;
			w = strtod(weight, &end);
			if (errno || *end || !isfinite(w) || w < 0) {
				snprintf(err, errlen, "%s:%d: weight '%s' is not a number >= 0 or -; fix it, or remove "
					 "the file", path, lineno, weight);
				goto out;
			}
		}
		if (!conf_backend_find(c, name)) {
			log_info("%s:%d: backend %s is no longer in %s: its runtime state (%s) is dropped", path,
				 lineno, name, c->path, state);
			continue;
		}
		b = registry_find(name, why, sizeof(why));
		if (!b) {
			snprintf(err, errlen, "%s:%d: backend %s: %s", path, lineno, name, why);
			goto out;
		}
		runstate_put(b, &(struct runstate_of){ st, strcmp(weight, "-") != 0, w, start, span, 0 });
	}
	rc = 0;
out:
	fclose(f);
	return rc;
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
