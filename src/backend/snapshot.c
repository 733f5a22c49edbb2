/*
 * snapshot.c -- building and retiring routing snapshots. The main thread
 * builds a snapshot off the request path (resolution, ring build, registry
 * entries) and hands references to workers; workers only take and drop
 * references. A backend whose name does not resolve is kept, without an
 * address (addrlen 0): balance.c skips it, and when its name resolves
 * later (health.c) snapshot_readdress makes the snapshot that has it.
 *
 * A warm ramp ([ring] ramp) is part of the snapshot a reload makes: the
 * chain of rings that says where each moved key is until its moment
 * (ring.h). Rings are reference-counted apart from their snapshots, so a
 * ramp keeps the rings it ramps from, not the snapshots (whose own ramps
 * would otherwise keep older ones alive, reload after reload).
 */
#include "backend/snapshot.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/registry.h"
#include "backend/runstate.h"
#include "tls/certs.h"

struct snap_ring {
	_Atomic long refs;
	struct ring *ring;
};

/* A config with a reference count: the snapshots a runtime state change
 * makes (snapshot_reweigh) share the config of the one they replace. */
struct snap_conf {
	_Atomic long refs;
	struct conf *conf;
};

static struct snap_conf *snap_conf_new(struct conf *c)
{
	struct snap_conf *h = malloc(sizeof(*h));

	if (h) {
		atomic_init(&h->refs, 1);
		h->conf = c;
	}
	return h;
}

static void snap_conf_unref(struct snap_conf *h)
{
	if (h && atomic_fetch_sub_explicit(&h->refs, 1, memory_order_acq_rel) == 1) {
		conf_free(h->conf);
		free(h);
	}
}

static struct snap_ring *snap_ring_new(struct ring *r)
{
	struct snap_ring *h = malloc(sizeof(*h));

	if (h) {
		atomic_init(&h->refs, 1);
		h->ring = r;
	}
	return h;
}

static void snap_ring_ref(struct snap_ring *h)
{
	atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed);
}

static void snap_ring_unref(struct snap_ring *h)
{
	if (h && atomic_fetch_sub_explicit(&h->refs, 1, memory_order_acq_rel) == 1) {
		ring_free(h->ring);
		free(h);
	}
}

static void snap_ramp_free(struct snap_ramp *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < SNAP_RAMP_STEPS; i++) {
		snap_ring_unref(r->hold[i]);
		free(r->map[i]);
	}
	free(r->weight);
	free(r);
}

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
 * it again. -1 when the lookup failed on our side (memory, descriptors):
 * that says nothing of the name, and the snapshot is not made rather
 * than have the backend down. Also the Host the backend is sent:
 * [backend] host, else [proxy] backend_host (host_fixed), else its url's,
 * for a client that sent none. Blocking: main thread, at load and
 * reload. */
static int snapshot_resolve(struct snap_backend *sb, const struct conf *conf)
{
	const struct conf_backend *cb = sb->conf;
	struct addrinfo hints, *res = NULL;
	char port[8];
	int rc;

	conf_hostport(cb, sb->host_hdr, sizeof(sb->host_hdr));
	sb->host_fixed = false;
	if (*cb->host_header || *conf->backend_host) {
		snprintf(sb->host_hdr, sizeof(sb->host_hdr), "%s",
			 *cb->host_header ? cb->host_header : conf->backend_host);
		sb->host_fixed = true;
	}
	sb->host_hdr_len = strlen(sb->host_hdr);
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_family = AF_UNSPEC;
	snprintf(port, sizeof(port), "%u", cb->port);
	rc = getaddrinfo(cb->host, port, &hints, &res);
	if (rc == EAI_MEMORY || (rc == EAI_SYSTEM && (errno == ENOMEM || errno == EMFILE || errno == ENFILE)))
		return -1;
	if (rc != 0 || !res) {
		sb->addrlen = 0;
		sb->resolve_rc = rc ? rc : EAI_NONAME;
		snprintf(sb->addr_text, sizeof(sb->addr_text), "unresolved");
	} else {
		snapshot_set_addr(sb, res->ai_addr, res->ai_addrlen);
	}
	if (res)
		freeaddrinfo(res);
	return 0;
}

/* What the ring knows of backend cb, whose registry entry is b: its
 * weight is the runtime state's (runstate.h). */
static struct ring_member snapshot_member(const struct conf_backend *cb, const struct backend *b)
{
	return (struct ring_member){ cb->name, runstate_weight(b, cb->weight), *cb->id ? cb->id : NULL };
}

void snapshot_set_certs(struct snapshot *s, struct certs *certs)
{
	s->certs = certs;
}

struct snapshot *snapshot_new(struct conf *conf, uint64_t generation,
			      char *err, size_t errlen)
{
	return snapshot_next(conf, generation, NULL, err, errlen);
}

struct snapshot *snapshot_next(struct conf *conf, uint64_t generation, const struct snapshot *prev,
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
		s->be[i].conf = &conf->backends[i];
		s->be[i].name_len = strlen(conf->backends[i].name);
		s->be[i].prefix_len = strlen(conf->backends[i].prefix);
		if (snapshot_resolve(&s->be[i], conf) < 0) {
			snprintf(err, errlen, "%s:%d: backend %s: out of memory resolving '%s'", conf->path,
				 conf->backends[i].line, conf->backends[i].name, conf->backends[i].host);
			goto fail;
		}
		s->be[i].state = registry_find(conf->backends[i].name, why, sizeof(why));
		if (!s->be[i].state) {
			snprintf(err, errlen, "%s:%d: backend %s: %s", conf->path,
				 conf->backends[i].line, conf->backends[i].name, why);
			goto fail;
		}
		m[i] = snapshot_member(&conf->backends[i], s->be[i].state);
	}
	s->ring = ring_build_from(prev ? prev->ring : NULL, m, conf->nbackends, (enum ring_scheme)conf->scheme,
				  conf->vnodes, why, sizeof(why));
	if (!s->ring) {
		snprintf(err, errlen, "%s: %s", conf->path, why);
		goto fail;
	}
	s->ring_ref = snap_ring_new(s->ring);
	s->conf_ref = snap_conf_new(conf);
	if (!s->ring_ref || !s->conf_ref) {
		snap_ring_unref(s->ring_ref);
		if (!s->ring_ref)
			ring_free(s->ring);
		free(s->conf_ref);
		goto nomem;
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

/* s with backend i at addr: config, ring and generation shared. */
static struct snapshot *snapshot_with_addr(struct snapshot *s, size_t i, const struct sockaddr *addr, socklen_t len)
{
	struct snapshot *n;

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
	n->ramp = s->ramp;
	n->certs = certs_ref(s->certs);
	/* the config, the ring and the ramp stay with the snapshot that
	 * built them */
	n->base = s->base ? s->base : s;
	snapshot_ref(n->base);
	atomic_store(&n->refs, 1);
	return n;
}

struct snapshot *snapshot_readdress(struct snapshot *s, const char *name,
				    const struct sockaddr *addr, socklen_t len)
{
	size_t i;

	for (i = 0; i < s->nbe; i++)
		if (s->be[i].addrlen == 0 && strcmp(s->be[i].conf->name, name) == 0)
			break;
	return snapshot_with_addr(s, i, addr, len);
}

struct snapshot *snapshot_moved(struct snapshot *s, const char *name, const struct sockaddr *addr, socklen_t len)
{
	size_t i;

	for (i = 0; i < s->nbe; i++)
		if (strcmp(s->be[i].conf->name, name) == 0)
			break;
	if (i < s->nbe && s->be[i].addrlen == len && memcmp(&s->be[i].addr, addr, len) == 0)
		return NULL;
	return snapshot_with_addr(s, i, addr, len);
}

struct snapshot *snapshot_reweigh(const struct snapshot *s, char *err, size_t errlen)
{
	const struct snapshot *owner = s->base ? s->base : s;
	const struct conf *conf = s->conf;
	struct ring_member *m = calloc(s->nbe ? s->nbe : 1, sizeof(*m));
	struct snapshot *n = calloc(1, sizeof(*n));
	char why[256];

	if (!m || !n)
		goto nomem;
	n->be = malloc((s->nbe ? s->nbe : 1) * sizeof(*n->be));
	n->cache = calloc(1, sizeof(*n->cache));
	if (!n->be || !n->cache)
		goto nomem;
	memcpy(n->be, s->be, s->nbe * sizeof(*n->be));
	for (size_t i = 0; i < s->nbe; i++)
		m[i] = snapshot_member(s->be[i].conf, s->be[i].state);
	n->ring = ring_build_from(s->ring, m, s->nbe, (enum ring_scheme)conf->scheme, conf->vnodes, why,
				  sizeof(why));
	if (!n->ring) {
		snprintf(err, errlen, "%s", why);
		goto fail;
	}
	n->ring_ref = snap_ring_new(n->ring);
	if (!n->ring_ref) {
		ring_free(n->ring);
		goto nomem;
	}
	n->conf_ref = owner->conf_ref;
	atomic_fetch_add_explicit(&n->conf_ref->refs, 1, memory_order_relaxed);
	n->conf = s->conf;
	n->nbe = s->nbe;
	n->backend_header_len = s->backend_header_len;
	n->generation = s->generation;
	n->certs = certs_ref(s->certs);
	atomic_store(&n->refs, 1);
	free(m);
	return n;
nomem:
	snprintf(err, errlen, "out of memory");
fail:
	free(m);
	if (n) {
		free(n->be);
		free(n->cache);
		free(n);
	}
	return NULL;
}

/* ---- warm ramps --------------------------------------------------------- */

/* The counted holder of s's ring. */
static struct snap_ring *snapshot_ring_ref(const struct snapshot *s)
{
	return s->base ? s->base->ring_ref : s->ring_ref;
}

/* Step k of r: its ring's holder (step 0's is the snapshot's). */
static struct snap_ring *snapshot_step_ring(const struct snapshot *owner, const struct snap_ramp *r,
					    size_t k)
{
	return k == 0 ? snapshot_ring_ref(owner) : r->hold[k];
}

/* Fill r's maps (each step's backends in s's ring) and the held-key
 * weights; the steps' rings are set. 0, or -1 without memory. */
static int snapshot_ramp_maps(struct snap_ramp *r, const struct snapshot *s)
{
	r->weight = calloc(s->nbe ? s->nbe : 1, sizeof(*r->weight));
	if (!r->weight)
		return -1;
	for (size_t i = 0; i < s->nbe; i++)
		r->weight[i] = s->ring->weights[i];
	for (size_t k = 1; k < r->nsteps; k++) {
		const struct ring *ring = r->step[k].ring;

		r->map[k] = ring_map(ring, s->ring);
		if (!r->map[k])
			return -1;
		r->step[k].map = r->map[k];
		/* a backend in maintenance is, to the ramp, one that left
		 * the file: nothing is held on it, its keys move at once */
		for (size_t b = 0; b < ring->nbackends; b++)
			if (r->map[k][b] >= 0 &&
			    atomic_load(&s->be[r->map[k][b]].state->admin_state) == RUNSTATE_MAINT)
				r->map[k][b] = -1;
		/* a drained backend (weight 0 now) still holds its keys
		 * until they switch: it is capped at the weight it had */
		for (size_t b = 0; b < ring->nbackends; b++)
			if (r->map[k][b] >= 0 && ring->weights[b] > r->weight[r->map[k][b]])
				r->weight[r->map[k][b]] = ring->weights[b];
	}
	return 0;
}

/* Whether a key of the diff d moved from a backend still in s's file:
 * the keys of removed backends move at once (there is nothing to ramp
 * from), so a change that only removes needs no ramp. */
static bool snapshot_rampable(const struct ring_diff *d, const struct snapshot *s)
{
	for (size_t i = 0; i < d->nflows; i++)
		if (d->flows[i].from[0] && conf_backend_find(s->conf, d->flows[i].from))
			return true;
	return false;
}

int snapshot_ramp(struct snapshot *s, const struct snapshot *prev, int64_t now_ms,
		  int64_t wall_ms, struct snap_ramp_info *info)
{
	return snapshot_ramp_over(s, prev, now_ms, wall_ms, s->conf->ramp_ms, info);
}

int snapshot_ramp_over(struct snapshot *s, const struct snapshot *prev, int64_t now_ms,
		       int64_t wall_ms, uint64_t span_ms, struct snap_ramp_info *info)
{
	const struct snap_ramp *pr = prev ? prev->ramp : NULL;
	struct snap_ramp *r = NULL;
	struct ring_diff d;
	size_t n = 0;
	int rc = -1;

	memset(info, 0, sizeof(*info));
	if (span_ms == 0 || !prev || s->base)
		return 0;
	if (pr && now_ms >= pr->end_ms)
		pr = NULL;      /* over: prev's ring alone is where keys are */
	if (ring_diff(prev->ring, s->ring, &d) < 0)
		return -1;
	r = calloc(1, sizeof(*r));
	if (!r)
		goto out;
	if (d.moved_share == 0) {
		/* no key changes owner: a ramp in progress goes on as it
		 * was, with this snapshot's ring (the same owners) */
		if (!pr) {
			rc = 0;
			goto out;
		}
		*r = *pr;
		memset(r->hold, 0, sizeof(r->hold));
		memset(r->map, 0, sizeof(r->map));
		r->weight = NULL;
		for (size_t k = 1; k < r->nsteps; k++) {
			r->hold[k] = pr->hold[k];
			snap_ring_ref(r->hold[k]);
		}
		info->kind = SNAP_RAMP_CARRIED;
	} else if (!pr && !snapshot_rampable(&d, s)) {
		rc = 0;         /* keys moved only off removed backends */
		goto out;
	} else {
		/* step 0: this ring from now; then prev's chain (prev's
		 * ring, then what prev ramped from, each as it stood when
		 * the step after it began) */
		r->step[n++] = (struct ring_ramp){ s->ring, NULL, now_ms, span_ms };
		for (size_t k = 0; k < (pr ? pr->nsteps : 1); k++) {
			struct ring_ramp st = pr ? pr->step[k] : (struct ring_ramp){ prev->ring, NULL, 0, 0 };
			struct snap_ring *h = snapshot_step_ring(prev, pr, k);

			if (n == SNAP_RAMP_STEPS) {
				info->dropped = (pr ? pr->nsteps : 1) - k;
				break;
			}
			st.map = NULL;
			r->step[n] = st;
			r->key[n] = pr ? pr->key[k] : prev->conf->key;
			r->hold[n] = h;
			snap_ring_ref(h);
			n++;
			/* every key had switched to this step when the next
			 * one began: nothing older matters */
			if (r->step[n - 2].start_ms - st.start_ms >= (int64_t)st.span_ms)
				break;
		}
		r->nsteps = n;
		r->end_ms = now_ms + (int64_t)span_ms;
		r->start_wall_ms = wall_ms;
		r->moved_share = d.moved_share;
		info->kind = n > 2 ? SNAP_RAMP_CHAINED : SNAP_RAMP_NEW;
	}
	r->step[0].ring = s->ring;
	r->step[0].map = NULL;
	r->key[0] = s->conf->key;
	if (snapshot_ramp_maps(r, s) < 0)
		goto out;
	info->nsteps = r->nsteps;
	info->left_ms = r->end_ms - now_ms;
	s->ramp = r;
	r = NULL;
	rc = 0;
out:
	if (rc < 0)
		memset(info, 0, sizeof(*info));
	snap_ramp_free(r);
	ring_diff_free(&d);
	return rc;
}

void snapshot_ref(struct snapshot *s)
{
	atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
}

/* Snapshots whose last reference a thread other than the reaper let go
 * of: a stack that any thread pushes onto and the reaper empties in one
 * exchange (no pop of single entries, so no ABA). Freeing a snapshot of
 * thousands of backends is thousands of free() calls: a worker that did
 * it after a reload held its requests for a millisecond. */
static _Atomic(struct snapshot *) snap_retired;
static atomic_bool snap_have_reaper;
static _Thread_local bool snap_is_reaper;

static void snapshot_destroy(struct snapshot *s)
{
	certs_unref(s->certs);
	if (s->base) {
		snapshot_unref(s->base);
	} else {
		snap_ramp_free((struct snap_ramp *)s->ramp);
		snap_ring_unref(s->ring_ref);
		snap_conf_unref(s->conf_ref);
	}
	free(s->be);
	free(s->cache);
	free(s);
}

void snapshot_reaper(void)
{
	snap_is_reaper = true;
	atomic_store(&snap_have_reaper, true);
}

void snapshot_reap(void)
{
	struct snapshot *s = atomic_exchange_explicit(&snap_retired, NULL, memory_order_acquire);

	while (s) {
		struct snapshot *next = s->retired_next;

		snapshot_destroy(s);
		s = next;
	}
}

void snapshot_unref(struct snapshot *s)
{
	if (!s)
		return;
	if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
		return;
	if (!atomic_load_explicit(&snap_have_reaper, memory_order_relaxed) || snap_is_reaper) {
		snapshot_destroy(s);
		return;
	}
	s->retired_next = atomic_load_explicit(&snap_retired, memory_order_relaxed);
	while (!atomic_compare_exchange_weak_explicit(&snap_retired, &s->retired_next, s, memory_order_release,
						      memory_order_relaxed))
		;
}
