/*
 * snapshot.h -- what a request routes by: the config, the ring, and each
 * ring backend's resolved address and registry entry. Immutable once
 * published; reference-counted so a request keeps the snapshot it started
 * with and an old one is freed when its last user lets go. A snapshot's
 * backends point into the registry (registry.h), whose state outlives it.
 */
#ifndef RINGPROXY_SNAPSHOT_H
#define RINGPROXY_SNAPSHOT_H

#include <netinet/in.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>

#include "backend/balance-t.h"
#include "config/conf.h"
#include "backend/registry-t.h"
#include "ring/ring.h"

/* The rings a warm ramp keeps at most: the current one and up to three
 * it ramps from (a chain made by reloads during ramps in progress). */
#define SNAP_RAMP_STEPS BALANCE_RAMP_STEPS

/* A ring with a reference count, so that a warm ramp can keep an older
 * snapshot's ring after that snapshot is gone (snapshot.c). */
struct snap_ring;
/* A config with a reference count (snapshot.c). */
struct snap_conf;

/*
 * A warm ramp ([ring] ramp): the chain of ring.h's struct ring_ramp that
 * says who owns a key during the window, step 0 being the snapshot's own
 * ring. Made by snapshot_ramp before the snapshot is published; immutable
 * after. Times are registry_now_ms()'s (monotonic), but for the start on
 * the wall clock that the stats show.
 */
struct snap_ramp {
	size_t nsteps;                          /* 2..SNAP_RAMP_STEPS */
	struct ring_ramp step[SNAP_RAMP_STEPS];
	struct snap_ring *hold[SNAP_RAMP_STEPS];/* references to the rings of
						   steps 1.. (hold[0] NULL) */
	int32_t *map[SNAP_RAMP_STEPS];          /* owned; map[0] NULL */
	int key[SNAP_RAMP_STEPS];               /* the [ring] key (enum
						   conf_key) each step's ring
						   was keyed by: with its
						   scheme, what places a key
						   on it (key_ramp) */
	double *weight;                         /* per backend of the
						   snapshot: its largest weight
						   in any step, the bounded-load
						   weight of keys held on it */
	int64_t end_ms;                         /* step 0's start + span */
	int64_t start_wall_ms;                  /* step 0's start, Unix ms */
	double moved_share;                     /* keyspace whose owner the
						   change that began it moved */
};

/* One backend as this snapshot sees it (index = ring backend index). */
struct snap_backend {
	struct backend *state;          /* registry entry, never NULL */
	const struct conf_backend *conf;
	struct sockaddr_storage addr;
	socklen_t addrlen;              /* 0: the name did not resolve; the
					   backend is skipped (balance.c) */
	int resolve_rc;                 /* then getaddrinfo's code, else 0 */
	char addr_text[64];             /* "127.0.0.1:9001" for messages, or
					   "unresolved" */
	char host_hdr[300];             /* Host for clients that sent none,
					   or for all (host_fixed) */
	size_t host_hdr_len;
	bool host_fixed;                /* [backend] host or [proxy]
					   backend_host: host_hdr always */
	size_t name_len, prefix_len;    /* of conf->name and conf->prefix */
};

struct certs;

struct snapshot {
	_Atomic long refs;
	uint64_t generation;
	struct conf *conf;              /* owned */
	struct ring *ring;              /* owned */
	struct snap_backend *be;        /* ring->nbackends entries */
	size_t nbe;
	size_t backend_header_len;      /* of conf->backend_header */
	struct balance_cache *cache;    /* owned: what balance.c caches for
					   this snapshot, kept outside it so
					   that nothing writes into a
					   published snapshot */
	struct snapshot *base;          /* NULL, or the snapshot whose conf
					   and ring this one shares (made by
					   snapshot_readdress; a reference) */
	struct snap_ring *ring_ref;     /* the ring's counted holder (NULL
					   when base holds it) */
	struct snap_conf *conf_ref;     /* the config's likewise */
	const struct snap_ramp *ramp;   /* a warm ramp, or NULL; owned by
					   the snapshot (base's when shared) */
	struct certs *certs;            /* [tls]: the certificates new
					   handshakes use (one reference),
					   NULL without HTTPS */
	struct snapshot *retired_next;  /* once unreferenced, waiting for
					   the reaper (snapshot_reap) */
};

/* Build a snapshot from a loaded config (taking ownership of conf on
 * success): resolves every backend address (blocking getaddrinfo, so the
 * main thread only; a name that does not resolve leaves its backend
 * without an address, addrlen 0, and is no error), builds the ring,
 * finds or makes registry entries.
 * Returns NULL with err on failure, which names the file ("FILE: ..." or
 * "FILE:LINE: ..."); conf then still belongs to the caller.
 * The result holds one reference. */
struct snapshot *snapshot_new(struct conf *conf, uint64_t generation,
			      char *err, size_t errlen);
/* Give s the certificate set of its load (a reference, taken over; NULL:
 * none), before s is published. */
void snapshot_set_certs(struct snapshot *s, struct certs *certs);

/* The same for a reload: prev (NULL: none) is the snapshot the result
 * will replace, whose ring's points the new ring takes where they are
 * the same (ring_build_from) instead of hashing them again. prev is only
 * read. */
struct snapshot *snapshot_next(struct conf *conf, uint64_t generation, const struct snapshot *prev,
			       char *err, size_t errlen);

/* Main thread: the snapshot s with the unresolved backend name now at
 * addr: same config, ring and generation (shared with s, not copied).
 * NULL when s has no unresolved backend of that name, or out of memory.
 * The result holds one reference; s is not changed. */
struct snapshot *snapshot_readdress(struct snapshot *s, const char *name,
				    const struct sockaddr *addr, socklen_t len);

/* Main thread: the same for a backend whose name now resolves to
 * another address (a static backend's host name looked up again: a pod
 * that restarted): NULL when s has no backend of that name, it has that
 * address already, or memory ran out. */
struct snapshot *snapshot_moved(struct snapshot *s, const char *name, const struct sockaddr *addr, socklen_t len);

/* Main thread: the snapshot s with each ring weight as the backends'
 * runtime states give it now (runstate.h): same config (shared) and
 * generation, a ring of its own built from them, no ramp yet
 * (snapshot_ramp_over gives it one). NULL with err when the ring cannot
 * be built (a compat scheme refuses a weight) or memory ran out. The
 * result holds one reference; s is not changed. */
struct snapshot *snapshot_reweigh(const struct snapshot *s, char *err, size_t errlen);

/* What snapshot_ramp made. */
enum snap_ramp_kind {
	SNAP_RAMP_NONE,         /* no ramp: keys moved at once, or none moved */
	SNAP_RAMP_NEW,          /* a ramp from the previous snapshot's ring */
	SNAP_RAMP_CHAINED,      /* from a ramp in progress, where it had got */
	SNAP_RAMP_CARRIED,      /* nothing moved: the ramp in progress goes on */
};

struct snap_ramp_info {
	enum snap_ramp_kind kind;
	size_t nsteps;          /* rings in the chain */
	size_t dropped;         /* older steps left out over SNAP_RAMP_STEPS:
				   keys they still held moved at once */
	int64_t left_ms;        /* time left of the ramp */
};

/*
 * Main thread, before s is published (s made by snapshot_new): give s the
 * warm ramp its config asks for ([ring] ramp) from prev, the snapshot it
 * replaces, starting at now_ms (registry_now_ms) and wall_ms (Unix ms).
 *  - ramp = 0, or no prev: none (every moved key moves at once);
 *  - prev's ring and s's give every key the same owner: prev's ramp, if
 *    one is in progress, goes on unchanged (a new url, a log level);
 *  - keys that moved only off backends no longer in the file (removed):
 *    none, they move at once (nothing to ramp from);
 *  - otherwise a new ramp over [ring] ramp from the owner every key has
 *    at now_ms under prev (its ramp, if one is in progress, frozen where
 *    it got: that is the previous assignment). The chain keeps at most
 *    SNAP_RAMP_STEPS rings; a step whose ramp had ended when the next
 *    began ends it, and beyond the limit the oldest are dropped.
 * Returns 0 with info, or -1 when memory ran out (s is unchanged).
 */
int snapshot_ramp(struct snapshot *s, const struct snapshot *prev, int64_t now_ms,
		  int64_t wall_ms, struct snap_ramp_info *info);

/* The same over span_ms instead of [ring] ramp (a runtime state change:
 * a drain's window). Either way a backend in maintenance (runstate.h)
 * holds no key: its keys move at once, while the others' keep their
 * moments. */
int snapshot_ramp_over(struct snapshot *s, const struct snapshot *prev, int64_t now_ms,
		       int64_t wall_ms, uint64_t span_ms, struct snap_ramp_info *info);

/* Any thread. The last unref frees the snapshot, unless a reaper thread
 * is named (snapshot_reaper) and this is another: the snapshot is then
 * left for the reaper's next snapshot_reap. */
void snapshot_ref(struct snapshot *s);
void snapshot_unref(struct snapshot *s);
/* Name the calling thread (the main thread) the one that frees
 * snapshots, so that a worker dropping the last reference to an old one
 * does not spend its time on thousands of free() calls. */
void snapshot_reaper(void);
/* The reaper: free the snapshots other threads let go of. */
void snapshot_reap(void);

#endif
