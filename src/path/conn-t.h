/*
 * conn-t.h -- the two buffer types of a connection on the request path,
 * shared by conn.c (which writes an output queue to a socket), worker.c
 * (which owns the buffers across reuse), front.c and forward.c. Each
 * buffer belongs to one connection, so to one worker thread.
 */
#ifndef RINGPROXY_CONN_T_H
#define RINGPROXY_CONN_T_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* A fixed read buffer: bytes [pos, len) are unconsumed. */
struct rbuf {
	char *data;
	size_t cap;
	size_t pos;
	size_t len;
};

/* Pending output: a gather list written as the peer accepts it. The slices
 * point into buffers that the owner keeps unchanged until it is empty. */
#define OUT_IOV_MAX 300
struct outq {
	struct iovec iov[OUT_IOV_MAX];
	int idx, cnt;
	uint64_t sent;                  /* bytes written over the queue's life */
};

#endif
