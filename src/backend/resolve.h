/*
 * resolve.h -- host names looked up off the main event loop: getaddrinfo
 * blocks (a name server that does not answer holds it for seconds), so
 * lookups run on a thread of their own and their results come back to
 * the main loop. Main thread API.
 */
#ifndef RINGPROXY_RESOLVE_H
#define RINGPROXY_RESOLVE_H

#include <stdint.h>
#include <sys/socket.h>

struct event_base;
struct resolver;

/* The outcome of one lookup, on the main loop: rc is getaddrinfo's (0 =
 * found; then addr/len is the first address, as snapshot.c takes it). */
typedef void resolve_done_fn(void *arg, int rc, const struct sockaddr *addr, socklen_t len);

/* NULL when out of memory. The thread starts with the first lookup. */
struct resolver *resolver_new(struct event_base *base);

/* Look host:port up; done(arg, ...) runs on base's loop once it is
 * known, unless resolver_cancel(r, arg) came first. 0, or -1 (out of
 * memory, or no thread could be started; logged). */
int resolver_lookup(struct resolver *r, const char *host, uint16_t port,
		    resolve_done_fn *done, void *arg);

/* Forget every lookup made for arg: done is not called for them. */
void resolver_cancel(struct resolver *r, void *arg);

/* Stop: waits for a lookup in progress to end (a lookup cannot be
 * interrupted), drops the others. NULL is a no-op. */
void resolver_free(struct resolver *r);

#endif
