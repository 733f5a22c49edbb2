/*
 * admin.h -- the admin HTTP listener (stats, metrics, page, ring, health),
 * on the main thread's event base.
 */
#ifndef RINGPROXY_ADMIN_H
#define RINGPROXY_ADMIN_H

#include <event2/event.h>
#include <stddef.h>

struct proxy;
struct admin;

/* Listen on listen ("IP:port"; port 0 = any free port) and serve p's
 * statistics. NULL with err on failure. Main thread. */
struct admin *admin_new(struct event_base *base, const char *listen, const struct proxy *p,
			char *err, size_t errlen);
/* A runtime state change asked through POST /backend (runstate.h), on
 * the main thread: backend name, verb ("ready", "drain", "maint",
 * "weight"), its value (a drain's duration, a weight; NULL when none was
 * given) and who asked ("127.0.0.1:40312"). The answer is an HTTP status
 * with its JSON body appended to out. */
struct evbuffer;
typedef int (*admin_state_fn)(void *arg, const char *name, const char *verb, const char *value,
			      const char *peer, struct evbuffer *out);
/* Serve POST /backend with fn (without it, the path is 404). */
void admin_on_state(struct admin *a, admin_state_fn fn, void *arg);

/* The port it listens on. */
int admin_port(const struct admin *a);
void admin_free(struct admin *a);

#endif
