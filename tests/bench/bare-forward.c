/* bare-forward.c -- the floor of a forwarded request (issue 28): each client
 * connection is paired with its own connection to one backend, opened when
 * the client's is accepted, and bytes are relayed both ways unparsed. One
 * thread per core (--threads), each with its own SO_REUSEPORT listener and
 * level-triggered epoll loop. What the socket cannot take waits in the
 * reading side's buffer, whose reads stop until it is written. The yardstick
 * of ringproxy's forward path in tests/bench/floor.sh, not a proxy.
 *
 * Usage: bare-forward --listen 127.0.0.1:PORT --to 127.0.0.1:PORT
 *                     [--threads N] [--port-file FILE]
 * PORT 0 takes one from the kernel (the other threads bind the same one). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
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

enum { BARE_EVENTS = 256, BARE_BUF = 65536 };

static struct sockaddr_in bare_to;

/* one end of a pair: BUF[OFF..LEN) was read from FD and not yet written to
 * PEER's fd */
struct bare_end {
	int fd;
	struct bare_end *peer;
	struct bare_pair *pair;
	size_t off, len;
	char buf[BARE_BUF];
};

struct bare_pair {
	struct bare_end a, b;
	int dead;               /* closed in this batch, freed after it */
	struct bare_pair *next; /* the batch's dead pairs */
};

/* bare_events: E waits to read while its buffer is empty and to write
 * while its peer's is not */
static void bare_events(int ep, int op, struct bare_end *e)
{
	struct epoll_event ev = { .data.ptr = e };

	ev.events = (e->len ? 0 : EPOLLIN) | (e->peer->len ? EPOLLOUT : 0);
	epoll_ctl(ep, op, e->fd, &ev);
}

/* bare_kill: closes both ends of P; it is freed once the batch of events
 * that may still name it is done */
static void bare_kill(struct bare_pair *p, struct bare_pair **dead)
{
	if (p->dead)
		return;
	p->dead = 1;
	close(p->a.fd);
	close(p->b.fd);
	p->next = *dead;
	*dead = p;
}

/* bare_flush: writes what E holds to its peer; 1 when all of it went,
 * 0 when some waits for EPOLLOUT on the peer, -1 on error */
static int bare_flush(struct bare_end *e)
{
	while (e->off < e->len) {
		ssize_t n = write(e->peer->fd, e->buf + e->off, e->len - e->off);
		if (n < 0)
			return errno == EAGAIN ? 0 : -1;
		e->off += (size_t)n;
	}
	e->off = e->len = 0;
	return 1;
}

/* bare_relay: E is readable (EPOLLIN) or its peer's bytes may be written to
 * it (EPOLLOUT): moves bytes on and flips which events the pair waits for */
static void bare_relay(int ep, struct bare_end *e, uint32_t what, struct bare_pair **dead)
{
	int r;

	if (what & EPOLLOUT) {
		r = bare_flush(e->peer);
		if (r < 0)
			goto fail;
		if (r > 0) {
			bare_events(ep, EPOLL_CTL_MOD, e);
			bare_events(ep, EPOLL_CTL_MOD, e->peer);
		}
	}
	if (!(what & (EPOLLIN | EPOLLHUP | EPOLLERR)) || e->len)
		return;
	ssize_t n = read(e->fd, e->buf, sizeof e->buf);
	if (n == 0 || (n < 0 && errno != EAGAIN))
		goto fail;
	if (n < 0)
		return;
	e->len = (size_t)n;
	r = bare_flush(e);
	if (r < 0)
		goto fail;
	if (r == 0) {
		bare_events(ep, EPOLL_CTL_MOD, e);
		bare_events(ep, EPOLL_CTL_MOD, e->peer);
	}
	return;
fail:
	bare_kill(e->pair, dead);
}

/* bare_accept: pairs a new client with a new backend connection (a blocking
 * connect on loopback, then non-blocking: once a connection, not a request) */
static void bare_accept(int ep, int lfd)
{
	int one = 1, cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK), bfd = -1;
	struct bare_pair *p = NULL;

	if (cfd < 0)
		return;
	bfd = socket(AF_INET, SOCK_STREAM, 0);
	if (bfd < 0 || connect(bfd, (struct sockaddr *)&bare_to, sizeof bare_to) < 0 ||
	    fcntl(bfd, F_SETFL, O_NONBLOCK) < 0 || !(p = calloc(1, sizeof *p)))
		goto fail;
	setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	setsockopt(bfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	p->a = (struct bare_end){ .fd = cfd, .peer = &p->b, .pair = p };
	p->b = (struct bare_end){ .fd = bfd, .peer = &p->a, .pair = p };
	bare_events(ep, EPOLL_CTL_ADD, &p->a);
	bare_events(ep, EPOLL_CTL_ADD, &p->b);
	return;
fail:
	close(cfd);
	if (bfd >= 0)
		close(bfd);
}

static void *bare_thread(void *arg)
{
	int lfd = (int)(intptr_t)arg, ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL }, evs[BARE_EVENTS];

	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) < 0) {
		perror("bare-forward: epoll");
		exit(1);
	}
	for (;;) {
		int n = epoll_wait(ep, evs, BARE_EVENTS, -1);
		struct bare_pair *dead = NULL;

		for (int i = 0; i < n; i++) {
			struct bare_end *e = evs[i].data.ptr;

			if (!e)
				bare_accept(ep, lfd);
			else if (!e->pair->dead)
				bare_relay(ep, e, evs[i].events, &dead);
		}
		while (dead) {
			struct bare_pair *next = dead->next;
			free(dead);
			dead = next;
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	const char *listen_at = NULL, *to = NULL, *port_file = NULL;
	int threads = 2, port, to_port;
	char host[64], to_host[64];

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--listen"))
			listen_at = argv[i + 1];
		else if (!strcmp(argv[i], "--to"))
			to = argv[i + 1];
		else if (!strcmp(argv[i], "--threads"))
			threads = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--port-file"))
			port_file = argv[i + 1];
	}
	if (!listen_at || !to || sscanf(listen_at, "%63[^:]:%d", host, &port) != 2 ||
	    sscanf(to, "%63[^:]:%d", to_host, &to_port) != 2 ||
	    inet_pton(AF_INET, to_host, &bare_to.sin_addr) != 1) {
		fprintf(stderr, "usage: bare-forward --listen ADDR:PORT --to ADDR:PORT "
		    "[--threads N] [--port-file FILE]\n");
		return 2;
	}
	bare_to.sin_family = AF_INET;
	bare_to.sin_port = htons((uint16_t)to_port);
	return bare_run(host, port, threads, bare_thread, port_file);
}
