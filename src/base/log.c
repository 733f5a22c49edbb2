/*
 * log.c -- leveled log lines on stderr: "2026-11-29T18:05:00.123Z info: ...".
 * ringproxy runs in the foreground and normally lets systemd or the
 * container runtime own its output. With [proxy] log_file the file is put
 * on fd 2 itself (dup2), so every writer keeps writing to fd 2 and a reopen
 * for log rotation swaps the file atomically; the stderr we were given is
 * kept aside so that a reload without log_file can put it back. One
 * write(2) per line keeps lines whole across threads. Main thread for
 * open/reopen, any thread for log_msg.
 *
 * Under systemd, stderr is a stream to the journal, which says so in
 * JOURNAL_STREAM (the device and inode of that stream). When fd 2 is that
 * stream, each line starts with its syslog priority as sd-daemon(3)
 * writes it ("<3>" error, "<4>" warning, "<6>" info, "<7>" debug), so
 * that journalctl -p filters and colours them, and without our time
 * stamp, which the journal keeps itself. A log_file on fd 2 is not the
 * journal: its lines keep the plain format.
 *
 * libevent's own messages (evhttp's, a failed accept's) come here too
 * (log_route_libevent), with our time stamp and level, at most
 * LOG_LIBEVENT_PER_SEC a second: a condition it reports at each turn of
 * a loop must not fill a disk.
 */
#include "base/log.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static _Atomic int log_level = LOG_INFO;

static const char *const log_names[] = { "error", "warn", "info", "debug" };
/* sd-daemon's prefixes: LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG */
static const char *const log_prio[] = { "<3>", "<4>", "<6>", "<7>" };

/* Is fd 2 the journal's stream? -1 until first asked; set again after
 * every open and reopen, which change what fd 2 is. */
static _Atomic int log_journal = -1;

static int log_journal_detect(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (!js || sscanf(js, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) < 0)
		return 0;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

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

static char *log_path;
static int log_stderr = -1;     /* the stderr we started with, kept while
				   a log file sits on fd 2, so that a reload
				   without log_file can put it back */

int log_open(const char *path, char *err, size_t errlen)
{
	char *dup = NULL;

	if (path && *path) {
		dup = strdup(path);
		if (!dup) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		if (log_stderr < 0) {
			log_stderr = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
			if (log_stderr < 0) {
				snprintf(err, errlen, "log file %s: %s", path, strerror(errno));
				free(dup);
				return -1;
			}
		}
	} else if (log_stderr >= 0) {
		/* log_file removed: back to the stderr systemd gave us */
		if (dup2(log_stderr, STDERR_FILENO) < 0) {
			snprintf(err, errlen, "back to stderr: %s", strerror(errno));
			return -1;
		}
		close(log_stderr);
		log_stderr = -1;
	}
	if (dup) {
		/* a file that cannot be opened leaves everything as it was,
		 * SIGUSR1 included */
		char *was = log_path;

		log_path = dup;
		if (log_reopen(err, errlen) < 0) {
			log_path = was;
			free(dup);
			return -1;
		}
		free(was);
		return 0;
	}
	free(log_path);
	log_path = NULL;
	atomic_store(&log_journal, log_journal_detect());
	return 0;
}

const char *log_file_path(void)
{
	return log_path;
}

int log_reopen(char *err, size_t errlen)
{
	int fd;

	if (!log_path)
		return 0;
	fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	if (fd < 0) {
		snprintf(err, errlen, "log file %s: %s", log_path, strerror(errno));
		return -1;
	}
	if (fd != STDERR_FILENO) {
		if (dup2(fd, STDERR_FILENO) < 0) {
			snprintf(err, errlen, "log file %s: %s", log_path, strerror(errno));
			close(fd);
			return -1;
		}
		close(fd);
	}
	atomic_store(&log_journal, log_journal_detect());
	return 0;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	char line[2048];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int n, m, journal;

	if ((int)level > atomic_load(&log_level))
		return;
	journal = atomic_load(&log_journal);
	if (journal < 0) {
		/* threads that race here compute the same answer */
		journal = log_journal_detect();
		atomic_store(&log_journal, journal);
	}
	if (journal) {
		n = snprintf(line, sizeof(line), "%s%s: ", log_prio[level], log_names[level]);
	} else {
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		n = snprintf(line, sizeof(line),
			     "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s: ",
			     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
			     tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000L,
			     log_names[level]);
	}
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

/* At most this many libevent lines a second, all threads together; the
 * rest are counted and said in one line the next second one comes. */
#define LOG_LIBEVENT_PER_SEC 5

static _Atomic int64_t log_ev_second;
static atomic_uint log_ev_count, log_ev_dropped;

static void log_on_libevent(int severity, const char *msg)
{
	static const enum log_level levels[] = { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };
	enum log_level level = severity >= 0 && severity < 4 ? levels[severity] : LOG_ERROR;
	struct timespec ts;
	int64_t was = atomic_load(&log_ev_second);

	if ((int)level > atomic_load(&log_level))
		return;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	if ((int64_t)ts.tv_sec != was && atomic_compare_exchange_strong(&log_ev_second, &was, (int64_t)ts.tv_sec)) {
		unsigned dropped = atomic_exchange(&log_ev_dropped, 0);

		atomic_store(&log_ev_count, 0);
		if (dropped)
			log_warn("libevent: %u more message%s not logged (at most %d a second)", dropped,
				 dropped == 1 ? "" : "s", LOG_LIBEVENT_PER_SEC);
	}
	if (atomic_fetch_add(&log_ev_count, 1) >= LOG_LIBEVENT_PER_SEC) {
		atomic_fetch_add(&log_ev_dropped, 1);
		return;
	}
	log_msg(level, "libevent: %s", msg);
}

void log_route_libevent(void)
{
	event_set_log_callback(log_on_libevent);
}
