/*
 * snapshot.c -- building and retiring routing snapshots. The main thread
 * builds a snapshot off the request path (resolution, ring build, registry
 * entries) and hands references to workers; workers only take and drop
 * references. A backend whose name does not resolve is kept, without an
 * address (addrlen 0): balance.c skips it, and when its name resolves
 * later (health.c) snapshot_readdress makes the snapshot that has it.
 */
#include "snapshot.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

static void snapshot_set_addr(struct snap_backend *sb, const struct sockaddr *addr, socklen_t len)
{
	char host[INET6_ADDRSTRLEN];

	memcpy(&sb->addr, addr, len);
	sb->addrlen = len;
	sb->resolve_rc = 0;
	if (addr->sa_family == AF_INET6) {
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)addr)->sin6_addr, host, sizeof(host));
		snprintf(sb->addr_text, sizeof(sb->addr_text), "[%s]:%u", host, sb->conf->port);
	} else {
		inet_ntop(AF_INET, &((const struct sockaddr_in *)addr)->sin_addr, host, sizeof(host));
		snprintf(sb->addr_text, sizeof(sb->addr_text), "%s:%u", host, sb->conf->port);
	}
}

/* The first address of the backend's name, or none: resolve_rc then says
 * why (getaddrinfo's code) and the backend waits for health.c to resolve
 * it again. Blocking: main thread, at load and reload. */
static void snapshot_resolve(struct snap_backend *sb)
{
	const struct conf_backend *cb = sb->conf;
	struct addrinfo hints, *res = NULL;
	char port[8];
	int rc;

	conf_hostport(cb, sb->host_hdr, sizeof(sb->host_hdr));
	sb->host_hdr_len = strlen(sb->host_hdr);
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_family = AF_UNSPEC;
	snprintf(port, sizeof(port), "%u", cb->port);
	rc = getaddrinfo(cb->host, port, &hints, &res);
	if (rc != 0 || !res) {
		sb->addrlen = 0;
		sb->resolve_rc = rc ? rc : EAI_NONAME;
		snprintf(sb->addr_text, sizeof(sb->addr_text), "unresolved");
	} else {
		snapshot_set_addr(sb, res->ai_addr, res->ai_addrlen);
	}
	if (res)
		freeaddrinfo(res);
}

struct snapshot *snapshot_new(struct conf *conf, uint64_t generation,
			      char *err, size_t errlen)
{
	struct ring_member *m = NULL;
	struct snapshot *s = calloc(1, sizeof(*s));
	char why[256];

	if (!s)
		goto nomem;
	m = calloc(conf->nbackends ? conf->nbackends : 1, sizeof(*m));
	s->be = calloc(conf->nbackends ? conf->nbackends : 1, sizeof(*s->be));
	s->cache = calloc(1, sizeof(*s->cache));
	if (!m || !s->be || !s->cache)
		goto nomem;
	for (size_t i = 0; i < conf->nbackends; i++) {
		m[i].name = conf->backends[i].name;
		m[i].weight = conf->backends[i].weight;
		s->be[i].conf = &conf->backends[i];
		s->be[i].name_len = strlen(conf->backends[i].name);
		s->be[i].prefix_len = strlen(conf->backends[i].prefix);
		snapshot_resolve(&s->be[i]);
		s->be[i].state = registry_find(conf->backends[i].name, why, sizeof(why));
		if (!s->be[i].state) {
			snprintf(err, errlen, "%s:%d: backend %s: %s", conf->path,
				 conf->backends[i].line, conf->backends[i].name, why);
			goto fail;
		}
	}
	s->ring = ring_build(m, conf->nbackends, conf->vnodes, why, sizeof(why));
	if (!s->ring) {
		snprintf(err, errlen, "%s: %s", conf->path, why);
		goto fail;
	}
	s->nbe = conf->nbackends;
	s->backend_header_len = strlen(conf->backend_header);
	s->conf = conf;
	s->generation = generation;
	atomic_store(&s->refs, 1);
	free(m);
	return s;
nomem:
	snprintf(err, errlen, "%s: out of memory", conf->path);
fail:
	free(m);
	if (s) {
		free(s->be);
		free(s->cache);
		free(s);
	}
	return NULL;
}

struct snapshot *snapshot_readdress(struct snapshot *s, const char *name,
				    const struct sockaddr *addr, socklen_t len)
{
	struct snapshot *n;
	size_t i;

	for (i = 0; i < s->nbe; i++)
		if (s->be[i].addrlen == 0 && strcmp(s->be[i].conf->name, name) == 0)
			break;
	if (i == s->nbe || len > sizeof(s->be[i].addr))
		return NULL;
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->be = malloc(s->nbe * sizeof(*n->be));
	n->cache = calloc(1, sizeof(*n->cache));
	if (!n->be || !n->cache) {
		free(n->be);
		free(n->cache);
		free(n);
		return NULL;
	}
	memcpy(n->be, s->be, s->nbe * sizeof(*n->be));
	snapshot_set_addr(&n->be[i], addr, len);
	n->nbe = s->nbe;
	n->conf = s->conf;
	n->ring = s->ring;
	n->backend_header_len = s->backend_header_len;
	n->generation = s->generation;
	/* the config and the ring stay with the snapshot that built them */
	n->base = s->base ? s->base : s;
	snapshot_ref(n->base);
	atomic_store(&n->refs, 1);
	return n;
}

void snapshot_ref(struct snapshot *s)
{
	atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
}

void snapshot_unref(struct snapshot *s)
{
	if (!s)
		return;
	if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
		return;
	if (s->base) {
		snapshot_unref(s->base);
	} else {
		ring_free(s->ring);
		conf_free(s->conf);
	}
	free(s->be);
	free(s->cache);
	free(s);
}
