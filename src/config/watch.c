/*
 * watch.c -- [proxy] watch_config: the config file followed with inotify.
 * Main thread, on the main event base.
 *
 * What is watched is the directory the file's path is in, not the file:
 * a watch on a file follows its inode, and most ways of changing a config
 * replace the inode. Every way shows in the directory: a write in place
 * (IN_CLOSE_WRITE), an editor's or sed -i's new file renamed over the old
 * (IN_MOVED_TO), Kubernetes swapping a ConfigMap volume's `..data` symlink
 * to a new timestamped directory (IN_MOVED_TO `..data`: the config's path
 * is a symlink through it). When the path is a symlink, the directory of
 * the file it resolves to is watched too (a file written in place behind
 * a link); that second watch moves whenever the link does.
 *
 * A burst of events makes one check: each relevant event (re)arms a quiet
 * timer, and the check runs once nothing came for WATCH_QUIET_MS, or at
 * the latest WATCH_MAX_MS after the burst began (a file rewritten without
 * pause still gets checked). The check reads the file and compares a hash
 * of its bytes with what the last check saw: the same bytes (a touch, a
 * rewrite with the same text) do not reload. A file that cannot be read
 * (deleted, say) counts as a change: the reload then fails, says why and
 * keeps the running config, as a bad file does.
 */
#include "config/watch.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "base/log.h"

#define WATCH_QUIET_MS 200
#define WATCH_MAX_MS 2000
#define WATCH_EVENTS (IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | \
		      IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF)

struct watch {
	struct event_base *base;
	char *path;                     /* as configured */
	void (*changed)(void *arg);
	void *arg;
	int fd;                         /* inotify */
	struct event *ev;
	struct event *timer;
	int wd_dir;                     /* the path's directory */
	char *base_name;                /* the path's last component */
	int wd_target;                  /* the resolved file's directory, or -1 */
	char *target_dir, *target_name;
	uint64_t first_ms;              /* when the pending burst began; 0 = none */
	uint64_t hash;                  /* of the bytes the last check read */
};

static uint64_t watch_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* FNV-1a over the file's bytes; a fixed value when it cannot be read. */
static uint64_t watch_hash_file(const char *path)
{
	uint64_t h = 14695981039346656037ull;
	unsigned char buf[8192];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n; i++)
			h = (h ^ buf[i]) * 1099511628211ull;
	close(fd);
	return n < 0 ? 0 : h;
}

/* Watch the directory of the file path resolves to, when that is not the
 * path's own directory (a symlink); moved when the link moved. */
static void watch_follow_target(struct watch *w)
{
	char real[PATH_MAX], *copy, *dir, *name;

	if (!realpath(w->path, real))
		return;         /* dangling for now: the next check tries again */
	if (!(copy = strdup(real)))
		return;
	dir = dirname(copy);
	name = strrchr(real, '/') + 1;
	if (w->target_dir && strcmp(w->target_dir, dir) == 0 && strcmp(w->target_name, name) == 0) {
		free(copy);
		return;
	}
	if (w->wd_target >= 0 && w->wd_target != w->wd_dir)
		inotify_rm_watch(w->fd, w->wd_target);
	free(w->target_dir);
	free(w->target_name);
	w->target_dir = copy;
	w->target_name = strdup(name);
	w->wd_target = inotify_add_watch(w->fd, dir, WATCH_EVENTS);
}

static void watch_on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct watch *w = arg;
	uint64_t h;

	(void)fd;
	(void)what;
	w->first_ms = 0;
	watch_follow_target(w);
	h = watch_hash_file(w->path);
	if (h == w->hash) {
		log_debug("watch_config: %s: changes in its directory, the same content; no reload", w->path);
		return;
	}
	w->hash = h;
	log_info("watch_config: %s changed; reloading", w->path);
	w->changed(w->arg);
}

/* Does an event with this name in directory wd concern our file? */
static bool watch_relevant(const struct watch *w, int wd, const char *name)
{
	if (!name || !*name)
		return true;            /* the directory itself */
	if (wd == w->wd_dir && (strcmp(name, w->base_name) == 0 || strncmp(name, "..", 2) == 0))
		return true;            /* the file, or a ConfigMap's ..data */
	return wd == w->wd_target && w->target_name && strcmp(name, w->target_name) == 0;
}

static void watch_on_inotify(evutil_socket_t fd, short what, void *arg)
{
	struct watch *w = arg;
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool hit = false;
	ssize_t n;

	(void)what;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;

			if (ev->mask & IN_Q_OVERFLOW)
				hit = true;     /* events were lost: check anyway */
			else if (!(ev->mask & IN_IGNORED) && watch_relevant(w, ev->wd, ev->len ? ev->name : NULL))
				hit = true;
			if ((ev->mask & IN_IGNORED) && ev->wd == w->wd_target) {
				/* its directory went (an old ConfigMap version) */
				w->wd_target = -1;
				free(w->target_dir);
				w->target_dir = NULL;
			}
			p += sizeof(*ev) + ev->len;
		}
	}
	if (hit) {
		uint64_t now = watch_now_ms(), wait = WATCH_QUIET_MS;
		struct timeval tv;

		if (!w->first_ms)
			w->first_ms = now;
		if (now - w->first_ms + wait > WATCH_MAX_MS)
			wait = now - w->first_ms >= WATCH_MAX_MS ? 0 : WATCH_MAX_MS - (now - w->first_ms);
		tv.tv_sec = (time_t)(wait / 1000);
		tv.tv_usec = (suseconds_t)((wait % 1000) * 1000);
		evtimer_add(w->timer, &tv);
	}
}

struct watch *watch_new(struct event_base *base, const char *path,
			void (*changed)(void *arg), void *arg,
			char *err, size_t errlen)
{
	struct watch *w = calloc(1, sizeof(*w));
	char *copy = NULL;

	if (!w) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	w->fd = -1;
	w->wd_dir = w->wd_target = -1;
	w->base = base;
	w->changed = changed;
	w->arg = arg;
	w->path = strdup(path);
	copy = strdup(path);
	w->base_name = strdup(strrchr(path, '/') ? strrchr(path, '/') + 1 : path);
	if (!w->path || !copy || !w->base_name) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w->fd < 0) {
		snprintf(err, errlen, "inotify: %s", strerror(errno));
		goto fail;
	}
	w->wd_dir = inotify_add_watch(w->fd, dirname(copy), WATCH_EVENTS);
	if (w->wd_dir < 0) {
		snprintf(err, errlen, "cannot watch %s: %s", copy, strerror(errno));
		goto fail;
	}
	watch_follow_target(w);
	w->hash = watch_hash_file(path);
	w->ev = event_new(base, w->fd, EV_READ | EV_PERSIST, watch_on_inotify, w);
	w->timer = evtimer_new(base, watch_on_timer, w);
	if (!w->ev || !w->timer || event_add(w->ev, NULL) < 0) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	free(copy);
	return w;
fail:
	free(copy);
	watch_free(w);
	return NULL;
}

void watch_free(struct watch *w)
{
	if (!w)
		return;
	if (w->ev)
		event_free(w->ev);
	if (w->timer)
		event_free(w->timer);
	if (w->fd >= 0)
		close(w->fd);
	free(w->path);
	free(w->base_name);
	free(w->target_dir);
	free(w->target_name);
	free(w);
}
