/*
 * log.c -- leveled log lines on stderr: "2026-11-29T18:05:00.123Z info: ...".
 * ringproxy runs in the foreground and lets systemd or the container runtime
 * own its output, so there is no log file to reopen; stderr is written with
 * one write(2) per line, which keeps lines whole across threads.
 */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static _Atomic int log_level = LOG_INFO;

static const char *const log_names[] = { "error", "warn", "info", "debug" };

void log_set_level(enum log_level level)
{
	atomic_store(&log_level, (int)level);
}

enum log_level log_get_level(void)
{
	return (enum log_level)atomic_load(&log_level);
}

int log_level_parse(const char *s)
{
	for (size_t i = 0; i < sizeof(log_names) / sizeof(log_names[0]); i++)
		if (strcasecmp(s, log_names[i]) == 0)
			return (int)i;
	return -1;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	char line[2048];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int n, m;

	if ((int)level > atomic_load(&log_level))
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = snprintf(line, sizeof(line),
		     "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s: ",
		     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		     tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000L,
		     log_names[level]);
	va_start(ap, fmt);
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	n += m;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	/* A short write to stderr is not worth retrying: the line is lost
	 * either way, and the request path must never block on logging. */
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}
