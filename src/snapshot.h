/*
 * snapshot.h -- what a request routes by: the config, the ring, and each
 * ring backend's resolved address and registry entry. Immutable once
 * published; reference-counted so a request keeps the snapshot it started
 * with and an old one is freed when its last user lets go.
 *
 * The registry holds the per-backend state that outlives a reload (in-flight
 * count, counters), keyed by backend name: a name keeps its entry for the
 * life of the process.
 */
#ifndef RINGPROXY_SNAPSHOT_H
#define RINGPROXY_SNAPSHOT_H

#include <netinet/in.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>

#include "conf.h"
#include "ring.h"

/* Per-backend state shared by all workers and every snapshot that names
 * the backend. Counters are atomic: workers add, the stats reader sums. */
struct backend {
	char *name;
	uint32_t id;                    /* stable index in the registry */
	_Atomic long inflight;          /* requests in flight, all workers */
	/* requests and responses are counted per worker (struct pool in
	 * worker-t.h): every request would write these otherwise */
	_Atomic uint64_t connects;      /* new connections opened */
	_Atomic uint64_t connect_errors;
	_Atomic uint64_t timeouts;
	_Atomic uint64_t bad_responses;
	_Atomic uint64_t retries_away;  /* requests retried elsewhere after
					   a failure on this backend */
	_Atomic int64_t last_warn;      /* time(NULL) of the last warning */
	_Atomic uint64_t spilled_away;  /* owner, but over its load cap */
	_Atomic uint64_t spilled_in;    /* taken for a key it does not own */
	_Atomic uint64_t failovers;     /* owner, but down */

	/* health (health.c): workers report requests, the main thread runs
	 * active checks; transitions are decided by compare-and-swap */
	_Atomic int down;               /* 0 up, 1 down */
	_Atomic unsigned fails;         /* consecutive failed requests */
	_Atomic int64_t retry_at_ms;    /* passive back-off: try again after */
	_Atomic int trial;              /* a passive trial request is out */
	_Atomic int64_t up_since_ms;    /* slow start began; 0 = not ramping */
	_Atomic uint64_t transitions;
	_Atomic unsigned check_ok;      /* consecutive passed active checks */
	_Atomic unsigned check_fail;    /* consecutive failed active checks */
};

/* Requests in flight to all backends, all workers (bounded loads). */
extern _Atomic long snapshot_total_inflight;
/* Bumped on every health transition: cached sums recompute. */
extern _Atomic uint64_t snapshot_health_gen;

/* One backend as this snapshot sees it (index = ring backend index). */
struct snap_backend {
	struct backend *state;          /* registry entry, never NULL */
	const struct conf_backend *conf;
	struct sockaddr_storage addr;
	socklen_t addrlen;
	char addr_text[64];             /* "127.0.0.1:9001" for messages */
	char host_hdr[300];             /* Host for clients that sent none */
	size_t host_hdr_len;
	size_t name_len, prefix_len;    /* of conf->name and conf->prefix */
};

struct snapshot {
	_Atomic long refs;
	uint64_t generation;
	struct conf *conf;              /* owned */
	struct ring *ring;              /* owned */
	struct snap_backend *be;        /* ring->nbackends entries */
	size_t nbe;
	size_t backend_header_len;      /* of conf->backend_header */
	/* weight of the backends with points that are up, cached for the
	 * health generation it was computed at */
	_Atomic uint64_t up_weight_gen;
	_Atomic double up_weight;
};

/* Build a snapshot from a loaded config (taking ownership of conf on
 * success): resolves every backend address (blocking getaddrinfo, so the
 * main thread only), builds the ring, finds or creates registry entries.
 * Returns NULL with err on failure, which names the file ("FILE: ..." or
 * "FILE:LINE: ..."); conf then still belongs to the caller.
 * The result holds one reference. */
struct snapshot *snapshot_new(struct conf *conf, uint64_t generation,
			      char *err, size_t errlen);

/* Any thread. */
void snapshot_ref(struct snapshot *s);
void snapshot_unref(struct snapshot *s);

/* The registry: the number of entries so far, and entry by id. Entries are
 * never removed, so a pointer stays valid for the process lifetime. */
uint32_t snapshot_registry_size(void);
struct backend *snapshot_registry_get(uint32_t id);
/* Free the registry at exit (after every worker stopped). */
void snapshot_registry_free(void);

#endif
