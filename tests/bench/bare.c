/* bare.c -- the listeners and threads of the bare programs (bare.h). */
#include "bare.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

enum { BARE_MAX_THREADS = 64 };

/* A non-blocking SO_REUSEPORT listener on ADDR; *PORT 0 takes one from the
 * kernel and is set to it. -1 with errno on failure. */
static int bare_listen(const char *addr, int *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)*port) };
	socklen_t sl = sizeof sa;
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

	if (fd < 0 || inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
		goto fail;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 1024) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) < 0)
		goto fail;
	*port = ntohs(sa.sin_port);
	return fd;
fail:
	if (fd >= 0)
		close(fd);
	return -1;
}

int bare_run(const char *host, int port, int threads, void *(*fn)(void *), const char *port_file)
{
	int fds[BARE_MAX_THREADS];
	pthread_t t;

	if (threads < 1 || threads > BARE_MAX_THREADS) {
		fprintf(stderr, "bare: 1 to %d threads\n", BARE_MAX_THREADS);
		return 1;
	}
	for (int i = 0; i < threads; i++)
		if ((fds[i] = bare_listen(host, &port)) < 0) {
			perror("bare: listen");
			return 1;
		}
	for (int i = 0; i < threads; i++)
		if (pthread_create(&t, NULL, fn, (void *)(intptr_t)fds[i]) != 0)
			return 1;
	if (port_file) {
		FILE *f = fopen(port_file, "w");

		if (!f || fprintf(f, "%d\n", port) < 0 || fclose(f) != 0) {
			perror(port_file);
			return 1;
		}
	}
	for (;;)
		pause();
}
