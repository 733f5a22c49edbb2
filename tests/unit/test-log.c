/* test-log.c -- level parsing and filtering of log.c, and libevent's own
 * messages routed through it. */
#include "base/log.h"
#include "tap.h"

#include <event2/util.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* 100 libevent warnings at once (evutil_make_socket_nonblocking on a bad
 * descriptor warns each time) come out as our lines, time stamp and
 * level, at most 5 a second. */
static void test_libevent(void)
{
	char path[] = "/tmp/test-log-XXXXXX", buf[16384];
	int fd = mkstemp(path), saved = dup(2), lines = 0, ours = 0;
	ssize_t n;

	if (fd < 0 || saved < 0 || dup2(fd, 2) < 0) {
		tap_ok(false, "stderr to a file");
		return;
	}
	log_set_level(LOG_INFO);
	log_route_libevent();
	for (int i = 0; i < 100; i++)
		evutil_make_socket_nonblocking(-1);
	dup2(saved, 2);
	close(saved);
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	close(fd);
	unlink(path);
	buf[n > 0 ? n : 0] = '\0';
	for (char *l = buf; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
		lines++;
		/* 2026-11-29T18:05:00.123Z warn: libevent: fcntl(-1, F_GETFL): ... */
		ours += l[0] >= '0' && l[0] <= '9' && strncmp(l + 23, "Z warn: libevent: fcntl(-1", 26) == 0;
	}
	tap_ok(ours >= 1 && ours == lines - (strstr(buf, "more messages not logged") != NULL),
	       "libevent's warnings come as our lines: time stamp, level, \"libevent: \"");
	tap_ok(lines >= 1 && lines <= 11, "100 of them at once: at most 5 a second are written");
	if (lines < 1 || lines > 11 || ours < 1)
		tap_diag("%s", buf);
}

int main(void)
{
	tap_is_int(log_level_parse("error"), LOG_ERROR, "error parses");
	tap_is_int(log_level_parse("WARN"), LOG_WARN, "level names are case-insensitive");
	tap_is_int(log_level_parse("debug"), LOG_DEBUG, "debug parses");
	tap_is_int(log_level_parse("verbose"), -1, "unknown level is refused");
	test_libevent();
	log_set_level(LOG_WARN);
	tap_is_int(log_get_level(), LOG_WARN, "level is kept");
	return tap_done();
}
