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
/* The port it listens on. */
int admin_port(const struct admin *a);
void admin_free(struct admin *a);

#endif
