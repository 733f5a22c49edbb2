/*
 * md5.h -- MD5 through OpenSSL's libcrypto without an allocation per
 * digest: the ring's points and request keys (ring.c) are hashed with it.
 * Each thread uses its own digest state; no locks.
 */
#ifndef RINGPROXY_MD5_H
#define RINGPROXY_MD5_H

#include <stddef.h>
#include <sys/uio.h>

#define MD5_LEN 16

/* One thread's digest state. */
struct md5;

/* A state made on the calling thread (the main thread, before a worker
 * starts) for a thread that must not fail later: NULL with err when
 * OpenSSL has no MD5 (a FIPS-only provider configuration) or memory ran
 * out. The caller owns it: md5_free once no thread uses it. */
struct md5 *md5_new(char *err, size_t errlen);
void md5_free(struct md5 *m);

/* Make m the calling thread's state (m stays the caller's). Worker threads
 * call it first thing, so hashing a request key never allocates. */
void md5_use(struct md5 *m);

/* Make sure the calling thread has a state, making one if it has none
 * (freed when the thread exits). 0, or -1 with err as md5_new. */
int md5_thread_init(char *err, size_t errlen);

/* MD5 of the n pieces v[] one after the other into out, with the calling
 * thread's state (made on first use). Pieces so that "NAME#i" and a request
 * key made of slices of a request need no buffer of their own. 0, or -1
 * with err (err may be NULL when errlen is 0). */
int md5_digest(const struct iovec *v, size_t n, unsigned char out[MD5_LEN],
	       char *err, size_t errlen);

#endif
