/* bare-respond.c -- the floor of a cache hit (issue 28): a program that does
 * nothing but the syscalls answering from memory needs. One thread per core
 * (--threads), each with its own SO_REUSEPORT listener and level-triggered
 * epoll loop: accept, read the request, one write of a fixed response with a
 * --size byte body, keep-alive. It parses nothing but the blank line that
 * ends a head, so it is what ringproxy's hit path is measured against by
 * tests/bench/floor.sh, not a server.
 *
 * Usage: bare-respond --listen 127.0.0.1:PORT [--threads N] [--size BYTES]
 *                     [--port-file FILE]
 * PORT 0 takes one from the kernel (the other threads bind the same one);
 * --port-file receives it once every thread listens. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bare.h"

enum { BARE_EVENTS = 256, BARE_READ = 16384 };

static char *bare_resp;         /* the whole response, built once */
static size_t bare_resp_len;

/* bare_heads: the number of complete heads in BUF[0..N), carrying the last
 * three bytes seen in *TAIL so a "\r\n\r\n" split across reads counts. */
static int bare_heads(const char *buf, ssize_t n, unsigned *tail)
{
	unsigned t = *tail;
	int heads = 0;

	for (ssize_t i = 0; i < n; i++) {
		t = t << 8 | (unsigned char)buf[i];
		if (t == 0x0d0a0d0a)
			heads++;
	}
	*tail = t;
	return heads;
}

/* a connection: its fd and the head-end state; data.ptr of its epoll event */
struct bare_conn {
	int fd;
	unsigned tail;
};

static void bare_close(int ep, struct bare_conn *c)
{
	epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	free(c);
}

/* bare_serve: a complete request in each head of what C sent gets the
 * response, one write each (wrk does not pipeline: one head a read). A write
 * the socket cannot take whole closes the connection: a bare program does
 * not queue. */
static void bare_serve(int ep, struct bare_conn *c, char *buf)
{
	ssize_t n = read(c->fd, buf, BARE_READ);

	if (n <= 0) {
		if (n < 0 && errno == EAGAIN)
			return;
		bare_close(ep, c);
		return;
	}
	for (int h = bare_heads(buf, n, &c->tail); h > 0; h--)
		if (write(c->fd, bare_resp, bare_resp_len) != (ssize_t)bare_resp_len) {
			bare_close(ep, c);
			return;
		}
}

static void *bare_thread(void *arg)
{
	int lfd = (int)(intptr_t)arg, ep = epoll_create1(0), one = 1;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL }, evs[BARE_EVENTS];
	static __thread char buf[BARE_READ];

	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) < 0) {
		perror("bare-respond: epoll");
		exit(1);
	}
	for (;;) {
		int n = epoll_wait(ep, evs, BARE_EVENTS, -1);

		for (int i = 0; i < n; i++) {
			struct bare_conn *c = evs[i].data.ptr;

			if (c) {
				bare_serve(ep, c, buf);
				continue;
			}
			int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
			if (fd < 0)
				continue;
			c = calloc(1, sizeof *c);
			if (!c) {
				close(fd);
				continue;
			}
			c->fd = fd;
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
			ev.data.ptr = c;
			if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
				bare_close(ep, c);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	const char *listen_at = NULL, *port_file = NULL;
	int threads = 2, port;
	long size = 4096;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--listen"))
			listen_at = argv[i + 1];
		else if (!strcmp(argv[i], "--threads"))
			threads = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--size"))
			size = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--port-file"))
			port_file = argv[i + 1];
	}
	char host[64];
	if (!listen_at || sscanf(listen_at, "%63[^:]:%d", host, &port) != 2 || size < 0 || size > 1 << 24) {
		fprintf(stderr, "usage: bare-respond --listen ADDR:PORT [--threads N] "
		    "[--size BYTES] [--port-file FILE]\n");
		return 2;
	}
	char head[128];
	int hl = snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Type: image/jpeg\r\n"
	    "Content-Length: %ld\r\n\r\n", size);
	bare_resp_len = (size_t)hl + (size_t)size;
	bare_resp = malloc(bare_resp_len);
	if (!bare_resp)
		return 1;
	memcpy(bare_resp, head, (size_t)hl);
	memset(bare_resp + hl, 'x', (size_t)size);
	return bare_run(host, port, threads, bare_thread, port_file);
}
