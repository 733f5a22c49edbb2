/*
 * watch.h -- [proxy] watch_config: the config file followed with inotify,
 * so that a change reloads as SIGHUP does. Main thread, main event base.
 */
#ifndef RINGPROXY_WATCH_H
#define RINGPROXY_WATCH_H

#include <stddef.h>

struct event_base;
struct watch;

/* Follow the file at path; changed(arg) runs on base's loop once per
 * burst of changes that left the file's content different from what the
 * previous call (or watch_new) saw. NULL with err when inotify cannot be
 * set up. */
struct watch *watch_new(struct event_base *base, const char *path,
			void (*changed)(void *arg), void *arg,
			char *err, size_t errlen);

/* NULL is a no-op. */
void watch_free(struct watch *w);

#endif
