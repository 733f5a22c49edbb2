/*
 * tls.h -- a client connection's TLS: OpenSSL's libssl driven
 * non-blocking on the connection's own socket from the worker's event
 * loop (no bufferevent, no thread). The record layer reads and writes
 * the socket itself; what it decrypts goes into the caller's buffer (the
 * same lent read buffer the plain path reads into), and what the caller
 * queues (the same output queue) goes out as records. tls_recv and
 * tls_flush keep exactly the conventions of conn_recv and conn_flush
 * (conn.h), so a caller tells the two paths apart by one pointer.
 * Worker thread only.
 */
#ifndef RINGPROXY_TLS_H
#define RINGPROXY_TLS_H

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "path/conn-t.h"
#include "tls/certs.h"

/* A server-side TLS connection on fd, starting from set's context (the
 * SNI callback may put in another certificate). NULL when out of memory. */
SSL *tls_new(struct certs *set, int fd);

/* Go on with the handshake: 1 done, 0 it waits for the socket
 * (tls_want_write says which way), -1 failed (tls_why says why). */
int tls_handshake(SSL *ssl);

/* Does the handshake (or a write) wait for the socket to be writable,
 * rather than readable? */
static inline bool tls_want_write(const SSL *ssl)
{
	return SSL_want_write(ssl);
}

/* Why the last tls_handshake that returned -1 on this thread failed. */
enum certs_fail tls_why(void);

/* As conn_recv: decrypted bytes into buf[0..len) (> 0), 0 at the peer's
 * close (close_notify, or EOF: HTTP's framing tells a truncated message),
 * -1 with errno (EAGAIN: nothing decrypted yet, the socket has no more). */
ssize_t tls_recv(SSL *ssl, void *buf, size_t len);

/* Bytes OpenSSL holds already, decrypted or still a record (it reads
 * ahead): no socket event will tell of them, so the caller reads again
 * without waiting for one. A record only partly there reads as EAGAIN,
 * and its rest raises the event. */
static inline bool tls_pending(const SSL *ssl)
{
	return SSL_has_pending(ssl) == 1;
}

/* As conn_flush: write q as records. 1 when q is empty, 0 when the
 * socket would block (q advanced past what was written; the next call
 * retries the record OpenSSL holds), -1 on error (errno set). */
int tls_flush(SSL *ssl, struct outq *q);

/* The negotiated application protocol ("http/1.1"), or NULL with none;
 * the TLS version and cipher names, for the access log. */
const char *tls_alpn(const SSL *ssl, size_t *len);

/* End the connection's TLS: a close_notify when the session is sound
 * (best effort, never waiting), then free. NULL is a no-op. */
void tls_free(SSL *ssl);

/* tls_free's first half, for a socket about to close while what the
 * session owns (its SNI, read by log lines still to come) must stay:
 * the close_notify now, the free (which then sends nothing) later. */
void tls_shutdown(SSL *ssl);

#endif
