/*
 * snapshot.c -- building and retiring routing snapshots. The main thread
 * builds a snapshot off the request path (resolution, ring build, registry
 * entries) and hands references to workers; workers only take and drop
 * references.
 */
#include "snapshot.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

static int snapshot_resolve(const struct conf *conf, struct snap_backend *sb,
			    char *err, size_t errlen)
{
	const struct conf_backend *cb = sb->conf;
	struct addrinfo hints, *res = NULL;
	char port[8], host[INET6_ADDRSTRLEN];
	int rc;

	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_family = AF_UNSPEC;
	snprintf(port, sizeof(port), "%u", cb->port);
	rc = getaddrinfo(cb->host, port, &hints, &res);
	if (rc != 0 || !res) {
		snprintf(err, errlen, "%s:%d: backend %s: cannot resolve '%s': %s; fix its url or the name service",
			 conf->path, cb->line, cb->name, cb->host, rc ? gai_strerror(rc) : "no address");
		return -1;
	}
	memcpy(&sb->addr, res->ai_addr, res->ai_addrlen);
	sb->addrlen = res->ai_addrlen;
	if (res->ai_family == AF_INET6) {
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)res->ai_addr)->sin6_addr, host, sizeof(host));
		snprintf(sb->addr_text, sizeof(sb->addr_text), "[%s]:%u", host, cb->port);
	} else {
		inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, host, sizeof(host));
		snprintf(sb->addr_text, sizeof(sb->addr_text), "%s:%u", host, cb->port);
	}
	freeaddrinfo(res);
	conf_hostport(cb, sb->host_hdr, sizeof(sb->host_hdr));
	sb->host_hdr_len = strlen(sb->host_hdr);
	return 0;
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
		if (snapshot_resolve(conf, &s->be[i], err, errlen) < 0)
			goto fail;
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
	ring_free(s->ring);
	conf_free(s->conf);
	free(s->be);
	free(s->cache);
	free(s);
}
