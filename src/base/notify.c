/*
 * notify.c -- sd_notify in a few lines: systemd passes the path of a unix
 * datagram socket in NOTIFY_SOCKET (a leading '@' means the abstract
 * namespace); each state change is one datagram of newline-separated
 * KEY=VALUE assignments. Used for READY=1, RELOADING=1, STOPPING=1 and
 * STATUS=.
 */
#include "base/notify.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"

unsigned long long notify_monotonic_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000ull;
}

int notify_send(const char *fmt, ...)
{
	static int warned;
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sun;
	socklen_t len;
	char msg[1024];
	va_list ap;
	int fd, n, rc = -1;

	if (!path || !*path)
		return 0;
	if ((path[0] != '/' && path[0] != '@') || strlen(path) >= sizeof(sun.sun_path))
		goto fail;
	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(msg))
		goto fail;
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	memcpy(sun.sun_path, path, strlen(path));
	if (path[0] == '@')
		sun.sun_path[0] = '\0';
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path));
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto fail;
	if (sendto(fd, msg, (size_t)n, MSG_NOSIGNAL, (struct sockaddr *)&sun, len) == n)
		rc = 0;
	close(fd);
	if (rc == 0)
		return 0;
fail:
	if (!warned++)
		log_warn("cannot notify the service manager at NOTIFY_SOCKET=%s", path);
	return -1;
}
