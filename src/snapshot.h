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

#include "balance-t.h"
#include "conf.h"
#include "registry-t.h"
#include "ring.h"

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
	struct balance_cache *cache;    /* owned: what balance.c caches for
					   this snapshot, kept outside it so
					   that nothing writes into a
					   published snapshot */
	struct snapshot *base;          /* NULL, or the snapshot whose conf
					   and ring this one shares (made by
					   snapshot_readdress; a reference) */
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

/* Main thread: the snapshot s with the unresolved backend name now at
 * addr: same config, ring and generation (shared with s, not copied).
 * NULL when s has no unresolved backend of that name, or out of memory.
 * The result holds one reference; s is not changed. */
struct snapshot *snapshot_readdress(struct snapshot *s, const char *name,
				    const struct sockaddr *addr, socklen_t len);

/* Any thread. */
void snapshot_ref(struct snapshot *s);
void snapshot_unref(struct snapshot *s);

#endif
