/*
 * conn.h -- socket plumbing for the request path: listeners with
 * SO_REUSEPORT, non-blocking connects, and gather writes that report how
 * far they got. Thin wrappers: every function is one or two syscalls.
 */
#ifndef RINGPROXY_CONN_H
#define RINGPROXY_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "path/conn-t.h"

/* A non-blocking listening socket with SO_REUSEPORT bound to addr. Returns
 * the fd or -1 with err. */
int conn_listen(const struct sockaddr *addr, socklen_t addrlen, char *err, size_t errlen);

/* The port a socket is bound to. */
int conn_local_port(int fd);

/* Start a non-blocking connect. Returns the fd (connected or in progress)
 * or -1 with errno set. */
int conn_connect(const struct sockaddr *addr, socklen_t addrlen);

/* Text form of a peer address, without the port. */
void conn_peer_ip(const struct sockaddr_storage *ss, char *out, size_t outlen);

/* Bytes written to a TCP socket that the peer has not acknowledged yet
 * (SIOCOUTQ), or -1. */
long conn_unacked(int fd);

/* Bytes of a TCP socket's output that the peer acknowledged over the
 * connection's life, the SYN counted as one (TCP_INFO tcpi_bytes_acked,
 * Linux 4.1+). 0, or -1 when the kernel does not say. */
int conn_acked(int fd, uint64_t *acked);

/* Whether a[0..alen) and b[0..blen) are the same address: an IPv4 one (16
 * bytes, every request asks it of a pooled connection) in two word
 * compares, not a call of memcmp. */
static inline bool conn_same_addr(const struct sockaddr_storage *a, socklen_t alen,
				  const struct sockaddr_storage *b, socklen_t blen)
{
	uint64_t x[2], y[2];

	if (alen != blen)
		return false;
	if (alen != 16)
		return memcmp(a, b, alen) == 0;
	memcpy(x, a, 16);
	memcpy(y, b, 16);
	return ((x[0] ^ y[0]) | (x[1] ^ y[1])) == 0;
}

/* recv(fd, buf, len, 0), without glibc's cancellation point (conn.c). */
ssize_t conn_recv(int fd, void *buf, size_t len);

/* Write as much of q as the socket takes. Returns 1 when q is empty, 0 when
 * the socket would block (q advanced past what was written), -1 on error
 * (errno set). */
int conn_flush(int fd, struct outq *q);

/* Output queue helpers, inline: they run several times a request. */
static inline bool outq_empty(const struct outq *q)
{
	return q->idx >= q->cnt;
}

static inline void outq_reset(struct outq *q)
{
	q->idx = q->cnt = 0;
}

/* Append a slice; returns -1 when the queue is full. */
static inline int outq_add(struct outq *q, const void *p, size_t n)
{
	if (n == 0)
		return 0;
	if (q->cnt >= OUT_IOV_MAX)
		return -1;
	q->iov[q->cnt].iov_base = (void *)p;
	q->iov[q->cnt].iov_len = n;
	q->cnt++;
	return 0;
}

/* Append a slice that may continue the last one in memory (a body sent
 * from one buffer as it fills): then that slice grows, so a body of any
 * length takes one. -1 when the queue is full. */
static inline int outq_append(struct outq *q, const void *p, size_t n)
{
	if (n > 0 && q->cnt > q->idx) {
		struct iovec *v = &q->iov[q->cnt - 1];

		if ((const char *)v->iov_base + v->iov_len == (const char *)p) {
			v->iov_len += n;
			return 0;
		}
	}
	return outq_add(q, p, n);
}

/* Bytes queued and not yet written. */
static inline size_t outq_bytes(const struct outq *q)
{
	size_t n = 0;

	for (int i = q->idx; i < q->cnt; i++)
		n += q->iov[i].iov_len;
	return n;
}

/* Where a writer that fills iovecs in place (http1_write_response) puts
 * them: the free tail of q, *room slots; outq_grow then counts the n it
 * filled. */
static inline struct iovec *outq_tail(struct outq *q, int *room)
{
	*room = OUT_IOV_MAX - q->cnt;
	return q->iov + q->cnt;
}

static inline void outq_grow(struct outq *q, int n)
{
	q->cnt += n;
}

#endif
