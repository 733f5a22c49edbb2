/*
 * pidfile.c -- the daemon's pid in a file (pidfile.h): checked before the
 * listeners open, written once they are, removed at exit. Main thread.
 *
 * A pid in the file is live when that process exists and is a ringproxy
 * (preflight.c reads its command name): after a crash and a reboot the
 * pid may be any other program's, and refusing to start for it would turn
 * a stale file into an outage.
 */
#include "config/pidfile.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/preflight.h"

/* The pid path holds: > 0, 0 when there is no file or no pid in it, -1
 * (errno) when it cannot be read. */
static long pidfile_read(const char *path)
{
	char buf[32], *end;
	ssize_t n;
	long pid;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	pid = strtol(buf, &end, 10);
	return pid > 0 && end != buf && (*end == '\n' || *end == '\0') ? pid : 0;
}

int pidfile_check(const char *path, bool share, char *err, size_t len)
{
	long pid = pidfile_read(path);
	char comm[32];

	if (pid < 0) {
		snprintf(err, len, "pid_file %s: %s", path, strerror(errno));
		return -1;
	}
	if (pid == 0 || pid == (long)getpid() || share)
		return 0;
	if ((kill((pid_t)pid, 0) == 0 || errno == EPERM) && preflight_is_ringproxy(pid, comm, sizeof(comm))) {
		snprintf(err, len, "pid_file %s: ringproxy (pid %ld) is running with it; stop it first, "
			 "give this one another pid_file, or, for a binary upgrade, start with --share-listen",
			 path, pid);
		return -1;
	}
	return 0;
}

int pidfile_write(const char *path, char *err, size_t len)
{
	char tmp[4200], text[32];
	int fd, n;

	n = snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", path, (long)getpid());
	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		snprintf(err, len, "pid_file %s: the path is too long", path);
		return -1;
	}
	n = snprintf(text, sizeof(text), "%ld\n", (long)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, text, (size_t)n) != n || fsync(fd) < 0) {
		snprintf(err, len, "pid_file %s: cannot write %s: %s", path, tmp, strerror(errno));
		goto fail;
	}
	close(fd);
	fd = -1;
	if (rename(tmp, path) < 0) {
		snprintf(err, len, "pid_file %s: %s", path, strerror(errno));
		goto fail;
	}
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	return -1;
}

void pidfile_remove(const char *path)
{
	if (path && *path && pidfile_read(path) == (long)getpid())
		unlink(path);
}
