/*
 * snapshot.c -- building and retiring routing snapshots, and the backend
 * registry. The main thread builds a snapshot off the request path
 * (resolution, ring build) and hands references to workers; workers only
 * take and drop references. The registry is appended to by the main thread
 * and read by workers: entries are allocated once and their pointers
 * published in a fixed-size array, so readers need no lock.
 */
#include "snapshot.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Atomic long snapshot_total_inflight;
_Atomic uint64_t snapshot_health_gen = 1;

static struct backend *_Atomic snapshot_registry[RING_MAX_BACKENDS * 4];
static _Atomic uint32_t snapshot_nregistry;
static pthread_mutex_t snapshot_registry_lock = PTHREAD_MUTEX_INITIALIZER;

uint32_t snapshot_registry_size(void)
{
	return atomic_load(&snapshot_nregistry);
}

struct backend *snapshot_registry_get(uint32_t id)
{
	return id < atomic_load(&snapshot_nregistry) ? atomic_load(&snapshot_registry[id]) : NULL;
}

/* Find or create the entry for name. NULL when out of memory or when the
 * registry is full (names ever seen > its size). */
static struct backend *snapshot_registry_find(const char *name)
{
	struct backend *b = NULL;
	uint32_t n;

	pthread_mutex_lock(&snapshot_registry_lock);
	n = atomic_load(&snapshot_nregistry);
	for (uint32_t i = 0; i < n; i++) {
		if (strcmp(snapshot_registry[i]->name, name) == 0) {
			b = snapshot_registry[i];
			goto out;
		}
	}
	if (n == sizeof(snapshot_registry) / sizeof(snapshot_registry[0]))
		goto out;
	b = calloc(1, sizeof(*b));
	if (!b)
		goto out;
	b->name = strdup(name);
	if (!b->name) {
		free(b);
		b = NULL;
		goto out;
	}
	b->id = n;
	atomic_store(&snapshot_registry[n], b);
	atomic_store(&snapshot_nregistry, n + 1);
out:
	pthread_mutex_unlock(&snapshot_registry_lock);
	return b;
}

void snapshot_registry_free(void)
{
	uint32_t n = atomic_load(&snapshot_nregistry);

	for (uint32_t i = 0; i < n; i++) {
		free(snapshot_registry[i]->name);
		free(snapshot_registry[i]);
		snapshot_registry[i] = NULL;
	}
	atomic_store(&snapshot_nregistry, 0);
}

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
	if (!m || !s->be)
		goto nomem;
	for (size_t i = 0; i < conf->nbackends; i++) {
		m[i].name = conf->backends[i].name;
		m[i].weight = conf->backends[i].weight;
		s->be[i].conf = &conf->backends[i];
		s->be[i].name_len = strlen(conf->backends[i].name);
		s->be[i].prefix_len = strlen(conf->backends[i].prefix);
		if (snapshot_resolve(conf, &s->be[i], err, errlen) < 0)
			goto fail;
		s->be[i].state = snapshot_registry_find(conf->backends[i].name);
		if (!s->be[i].state) {
			snprintf(err, errlen, "%s:%d: backend %s: too many distinct backend names over this process's life; restart ringproxy",
				 conf->path, conf->backends[i].line, conf->backends[i].name);
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
	free(s);
}
