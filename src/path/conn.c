/*
 * conn.c -- the few socket calls the request path makes, each checked and
 * named. Any worker thread may call these on its own sockets; the main
 * thread uses conn_listen at start.
 */
#include "path/conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/sockios.h>
#include <limits.h>
#include <netinet/in.h>
#include <linux/tcp.h>  /* struct tcp_info with tcpi_bytes_acked */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int conn_listen(const struct sockaddr *addr, socklen_t addrlen, char *err, size_t errlen)
{
	int fd, one = 1;

	fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0)
		goto fail;
	if (bind(fd, addr, addrlen) < 0)
		goto fail;
	if (listen(fd, 4096) < 0)
		goto fail;
	return fd;
fail:
	snprintf(err, errlen, "%s", strerror(errno));
	if (fd >= 0)
		close(fd);
	return -1;
}

int conn_local_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return -1;
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

int conn_connect(const struct sockaddr *addr, socklen_t addrlen)
{
	int fd, one = 1, saved;

	fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	/* Heads and small bodies go out in one writev: Nagle only delays. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, addr, addrlen) < 0 && errno != EINPROGRESS) {
		saved = errno;
		close(fd);
		errno = saved;
		return -1;
	}
	return fd;
}

void conn_peer_ip(const struct sockaddr_storage *ss, char *out, size_t outlen)
{
	if (ss->ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, out, (socklen_t)outlen);
	else if (ss->ss_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, out, (socklen_t)outlen);
	else
		snprintf(out, outlen, "unknown");
}

long conn_unacked(int fd)
{
	int n;

	if (ioctl(fd, SIOCOUTQ, &n) < 0)
		return -1;
	return n;
}

int conn_acked(int fd, uint64_t *acked)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0 ||
	    len < offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof(ti.tcpi_bytes_acked))
		return -1;
	*acked = ti.tcpi_bytes_acked;
	return 0;
}

/* recv, sendto and sendmsg of the request path are made as the system
 * calls themselves: glibc's named wrappers are cancellation points, with
 * two atomic compare-and-swaps on the thread's cancel state around each
 * call (45 instructions; four calls a forward), and no thread of ours is
 * ever cancelled (nothing calls pthread_cancel). */
ssize_t conn_recv(int fd, void *buf, size_t len)
{
	return syscall(SYS_recvfrom, fd, buf, len, 0, NULL, NULL);
}

int conn_flush(int fd, struct outq *q)
{
	while (q->idx < q->cnt) {
		int cnt = q->cnt - q->idx;
		ssize_t n;

		if (cnt > IOV_MAX)
			cnt = IOV_MAX;
		/* sendmsg rather than writev: the socket call skips the
		 * generic file layer (measured 0.4-0.6 us a request), and
		 * MSG_NOSIGNAL makes a peer's reset an error, not SIGPIPE */
		if (cnt == 1) {
			n = syscall(SYS_sendto, fd, q->iov[q->idx].iov_base, q->iov[q->idx].iov_len,
				    MSG_NOSIGNAL, NULL, 0);
		} else {
			struct msghdr mh = { .msg_iov = &q->iov[q->idx], .msg_iovlen = (size_t)cnt };

			n = syscall(SYS_sendmsg, fd, &mh, MSG_NOSIGNAL);
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return -1;
		}
		q->sent += (uint64_t)n;
		/* advance past what the kernel took */
		while (n > 0 && q->idx < q->cnt) {
			struct iovec *v = &q->iov[q->idx];

			if ((size_t)n >= v->iov_len) {
				n -= (ssize_t)v->iov_len;
				q->idx++;
			} else {
				v->iov_base = (char *)v->iov_base + n;
				v->iov_len -= (size_t)n;
				n = 0;
			}
		}
		/* a short write means the socket buffer is full: asking
		 * again would only return EAGAIN */
		if (q->idx < q->cnt)
			return 0;
	}
	q->idx = q->cnt = 0;
	return 1;
}
