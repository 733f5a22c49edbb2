/*
 * access.c -- the access log: one line per request, in NGINX's/Apache's
 * combined format with ringproxy's fields after it (so existing log tools
 * read the first part), or as JSON lines with the same names.
 *
 * A worker formats each line into its own buffer (no lock, no syscall,
 * no allocation after the first) and writes the buffer with one write()
 * when the next line would not fit or ACCESS_FLUSH_MS after the first
 * line in it, whichever comes first. A write that fails or falls short
 * (a full disk, /dev/full) drops the lines it did not write and counts
 * them (access_log_dropped); requests never wait for the log. The file
 * is opened O_APPEND, so the workers' batches never overwrite each
 * other; each batch holds whole lines.
 *
 * The main thread opens the log and reopens it on SIGUSR1: the new file
 * is dup2()ed onto the descriptor the workers write to, so a worker
 * never sees a closed or reused descriptor.
 */
#include "access.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "conf.h"
#include "http1.h"
#include "request.h"
#include "snapshot.h"
#include "worker.h"

/* The longest line: the bounded fields below, escaped (4 bytes a byte at
 * worst), and the fixed ones. A line is formatted only when this much is
 * free in the buffer. */
#define ACCESS_TARGET_MAX 1024
#define ACCESS_HDR_MAX 256
#define ACCESS_LINE_MAX (4 * (ACCESS_TARGET_MAX + 2 * ACCESS_HDR_MAX + 32 + 64) + 512)

static _Atomic int access_fd = -1;      /* where workers write */
static _Atomic int access_on;           /* lines are logged */
static char *access_file;               /* main thread: the path, NULL if
					   off or stderr */
static _Atomic(_Atomic uint64_t *) access_drops;

static void access_plain_init(void);
static pthread_once_t access_plain_once = PTHREAD_ONCE_INIT;

int access_open(const char *spec, _Atomic uint64_t *dropped, char *err, size_t len)
{
	int fd, cur = atomic_load(&access_fd);
	char *file = NULL;

	atomic_store(&access_drops, dropped);
	/* once: a reopen (SIGUSR1, main thread) while workers format lines
	 * must not write the table they read, even the same values */
	pthread_once(&access_plain_once, access_plain_init);
	if (strcmp(spec, "off") == 0 || !*spec) {
		atomic_store(&access_on, 0);
		return 0;
	}
	if (strcmp(spec, "stderr") == 0) {
		fd = dup(STDERR_FILENO);
	} else {
		fd = open(spec, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
		file = strdup(spec);
	}
	if (fd < 0 || (!file && strcmp(spec, "stderr") != 0)) {
		snprintf(err, len, "[log] access %s: %s; check the directory exists and is writable", spec,
			 fd < 0 ? strerror(errno) : "out of memory");
		if (fd >= 0)
			close(fd);
		free(file);
		return -1;
	}
	if (cur >= 0) {
		/* the workers keep writing to cur, which now is the new file */
		if (dup2(fd, cur) < 0) {
			snprintf(err, len, "[log] access %s: %s", spec, strerror(errno));
			close(fd);
			free(file);
			return -1;
		}
		close(fd);
	} else {
		atomic_store(&access_fd, fd);
	}
	free(access_file);
	access_file = file;
	atomic_store(&access_on, 1);
	return 0;
}

int access_reopen(char *err, size_t len)
{
	char *path;
	int rc;

	if (!access_file || !atomic_load(&access_on))
		return 0;
	path = strdup(access_file);
	if (!path) {
		snprintf(err, len, "out of memory");
		return -1;
	}
	rc = access_open(path, atomic_load(&access_drops), err, len);
	free(path);
	return rc < 0 ? -1 : 1;
}

const char *access_path(void)
{
	return atomic_load(&access_on) ? access_file : NULL;
}

void access_close(void)
{
	int fd = atomic_exchange(&access_fd, -1);

	if (fd >= 0)
		close(fd);
	atomic_store(&access_on, 0);
	free(access_file);
	access_file = NULL;
}

/* ---- the worker's buffer ------------------------------------------------- */

/* Write the buffer out; what is not written is dropped and counted. */
static void access_flush(struct access_buf *b)
{
	int fd = atomic_load_explicit(&access_fd, memory_order_relaxed);
	size_t off = 0;

	while (fd >= 0 && off < b->len) {
		ssize_t n = write(fd, b->data + off, b->len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	if (off < b->len) {
		_Atomic uint64_t *d = atomic_load(&access_drops);
		uint64_t lost = 0;

		for (size_t i = off; i < b->len; i++)
			lost += b->data[i] == '\n';
		if (d)
			atomic_fetch_add_explicit(d, lost, memory_order_relaxed);
	}
	b->len = 0;
	b->lines = 0;
}

static void access_on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct access_buf *b = arg;

	(void)fd;
	(void)what;
	b->armed = false;
	access_flush(b);
}

void access_worker_init(struct worker *w)
{
	evtimer_assign(&w->alog.flush_ev, w->base, access_on_timer, &w->alog);
	w->alog.sec = -1;
}

void access_worker_free(struct worker *w)
{
	struct access_buf *b = &w->alog;

	if (b->data) {
		access_flush(b);
		event_del(&b->flush_ev);
		free(b->data);
		b->data = NULL;
	}
}

/* ---- formatting (no printf: a few hundred nanoseconds a line matter) ---- */

static char *access_put(char *p, const char *s, size_t n)
{
	memcpy(p, s, n);
	return p + n;
}

#define ACCESS_PUTS(p, lit) access_put(p, lit, sizeof(lit) - 1)

static char *access_u64(char *p, uint64_t v)
{
	char t[20];
	int n = 0;

	do {
		t[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*p++ = t[--n];
	return p;
}

/* us microseconds as seconds with 6 decimals (constant divisors only:
 * a division by a variable costs tens of cycles). */
static char *access_secs(char *p, int64_t us)
{
	uint64_t frac;

	if (us < 0)
		us = 0;
	p = access_u64(p, (uint64_t)us / 1000000);
	*p++ = '.';
	frac = (uint64_t)us % 1000000;
	for (int i = 6; i-- > 0;) {
		p[i] = (char)('0' + frac % 10);
		frac /= 10;
	}
	return p + 6;
}

/* Bytes written as they are in a quoted field: printable ASCII but '"'
 * and '\\'. Filled once, by the first access_open (main thread) before any
 * worker starts; read-only after. */
static bool access_plain_tab[256];

static void access_plain_init(void)
{
	for (int c = 0; c < 256; c++)
		access_plain_tab[c] = c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
}


/* s[0..n), at most max bytes, quoted text: '"', '\\', control and
 * non-ASCII bytes escaped (\xHH in combined as NGINX does, \u00HH in
 * JSON); "-" when empty (combined). Runs of plain bytes go in one copy. */
static char *access_str(char *p, const char *s, size_t n, size_t max, bool json)
{
	static const char hex[] = "0123456789abcdef";
	size_t i = 0;

	if (!s)
		n = 0;
	if (n > max)
		n = max;
	if (!n && !json)
		return ACCESS_PUTS(p, "-");
	while (i < n) {
		size_t run = i;
		unsigned char c;

		while (run < n && access_plain_tab[(unsigned char)s[run]])
			run++;
		p = access_put(p, s + i, run - i);
		if (run == n)
			break;
		c = (unsigned char)s[run];
		if (json && (c == '"' || c == '\\')) {
			*p++ = '\\';
			*p++ = (char)c;
		} else if (json) {
			p = ACCESS_PUTS(p, "\\u00");
			*p++ = hex[c >> 4];
			*p++ = hex[c & 15];
		} else {
			*p++ = '\\';
			*p++ = 'x';
			*p++ = hex[c >> 4];
			*p++ = hex[c & 15];
		}
		i = run + 1;
	}
	return p;
}

/* The value of request header name (lower case, n bytes), or an empty
 * slice. */
static struct http1_str access_header(const struct http1_msg *m, const char *name, size_t n)
{
	struct http1_str none = { NULL, 0 };

	for (unsigned i = 0; i < m->nheaders; i++)
		if (m->headers[i].name.len == n && http1_str_ieq(m->headers[i].name, name))
			return m->headers[i].value;
	return none;
}

/* The second's stamps, made once a second. */
static void access_stamps(struct access_buf *b, int64_t sec)
{
	static const char mon[12][4] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
					 "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
	time_t t = (time_t)sec;
	struct tm tm;

	gmtime_r(&t, &tm);
	b->clf_len = (size_t)snprintf(b->clf, sizeof(b->clf), "[%02d/%s/%04d:%02d:%02d:%02d +0000]", tm.tm_mday,
		 mon[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
	b->iso_len = (size_t)snprintf(b->iso, sizeof(b->iso), "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
	b->sec = sec;
}

void access_log(struct request *rq, int64_t dur)
{
	struct worker *w = rq->w;
	struct access_buf *b = &w->alog;
	const struct http1_msg *m = &rq->msg;
	struct req_log l;
	struct http1_str ref, ua;
	struct timeval tv;
	int64_t wall_ms;
	bool json;
	char *p;

	if (!atomic_load_explicit(&access_on, memory_order_relaxed))
		return;
	if (!b->data) {
		b->data = malloc(ACCESS_BUF);
		if (!b->data)
			return;
	}
	if (b->len + ACCESS_LINE_MAX > ACCESS_BUF)
		access_flush(b);
	req_log_fields(rq, &l);
	/* the wall clock of the loop's turn, for the stamp (no syscall) */
	event_base_gettimeofday_cached(w->base, &tv);
	wall_ms = (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
	if (tv.tv_sec != b->sec)
		access_stamps(b, tv.tv_sec);
	/* a request with a body: its head's bytes may have been moved out
	 * of the read buffer (only its method and target were copied) */
	ref.p = ua.p = NULL;
	ref.len = ua.len = 0;
	if (!l.line_copied) {
		ref = access_header(m, "referer", 7);
		ua = access_header(m, "user-agent", 10);
	}
	json = w->snap->conf->access_format == CONF_ACCESS_JSON;
	p = b->data + b->len;
	if (json) {
		p = ACCESS_PUTS(p, "{\"client\":\"");
		p = access_str(p, rq->ip, rq->iplen, 64, true);
		p = ACCESS_PUTS(p, "\",\"time\":\"");
		p = access_put(p, b->iso, b->iso_len);
		*p++ = '.';
		p = access_u64(p, (uint64_t)(wall_ms / 100 % 10));
		p = access_u64(p, (uint64_t)(wall_ms / 10 % 10));
		p = access_u64(p, (uint64_t)(wall_ms % 10));
		p = ACCESS_PUTS(p, "Z\",\"method\":\"");
		p = access_str(p, l.method.p, l.method.len, 32, true);
		p = ACCESS_PUTS(p, "\",\"target\":\"");
		p = access_str(p, l.target.p, l.target.len, ACCESS_TARGET_MAX, true);
		p = ACCESS_PUTS(p, "\",\"protocol\":\"HTTP/1.");
		*p++ = m->minor ? '1' : '0';
		p = ACCESS_PUTS(p, "\",\"status\":");
		p = access_u64(p, (uint64_t)l.status);
		p = ACCESS_PUTS(p, ",\"bytes\":");
		p = access_u64(p, l.bytes);
		p = ACCESS_PUTS(p, ",\"referer\":\"");
		p = access_str(p, ref.p, ref.len, ACCESS_HDR_MAX, true);
		p = ACCESS_PUTS(p, "\",\"user_agent\":\"");
		p = access_str(p, ua.p, ua.len, ACCESS_HDR_MAX, true);
		p = ACCESS_PUTS(p, "\",\"duration\":");
		p = access_secs(p, dur);
		p = ACCESS_PUTS(p, ",\"backend\":");
		if (l.backend) {
			*p++ = '"';
			p = access_str(p, l.backend, strlen(l.backend), 128, true);
			*p++ = '"';
		} else {
			p = ACCESS_PUTS(p, "null");
		}
		p = ACCESS_PUTS(p, ",\"cache\":\"");
		p = access_put(p, l.cache, strlen(l.cache));
		p = ACCESS_PUTS(p, "\",\"why\":\"");
		p = access_put(p, l.why, strlen(l.why));
		p = ACCESS_PUTS(p, "\",\"request_id\":\"");
		p = access_put(p, l.rid, 20);
		p = ACCESS_PUTS(p, "\"}\n");
	} else {
		p = access_str(p, rq->ip, rq->iplen, 64, false);
		p = ACCESS_PUTS(p, " - - ");
		p = access_put(p, b->clf, b->clf_len);
		p = ACCESS_PUTS(p, " \"");
		p = access_str(p, l.method.p, l.method.len, 32, false);
		*p++ = ' ';
		p = access_str(p, l.target.p, l.target.len, ACCESS_TARGET_MAX, false);
		p = ACCESS_PUTS(p, " HTTP/1.");
		*p++ = m->minor ? '1' : '0';
		p = ACCESS_PUTS(p, "\" ");
		p = access_u64(p, (uint64_t)l.status);
		*p++ = ' ';
		p = access_u64(p, l.bytes);
		p = ACCESS_PUTS(p, " \"");
		p = access_str(p, ref.p, ref.len, ACCESS_HDR_MAX, false);
		p = ACCESS_PUTS(p, "\" \"");
		p = access_str(p, ua.p, ua.len, ACCESS_HDR_MAX, false);
		p = ACCESS_PUTS(p, "\" duration=");
		p = access_secs(p, dur);
		p = ACCESS_PUTS(p, " backend=");
		if (l.backend)
			p = access_str(p, l.backend, strlen(l.backend), 128, false);
		else
			*p++ = '-';
		p = ACCESS_PUTS(p, " cache=");
		p = access_put(p, l.cache, strlen(l.cache));
		p = ACCESS_PUTS(p, " why=");
		p = access_put(p, l.why, strlen(l.why));
		p = ACCESS_PUTS(p, " request_id=");
		p = access_put(p, l.rid, 20);
		*p++ = '\n';
	}
	b->len = (size_t)(p - b->data);
	b->lines++;
	if (!b->armed) {
		static const struct timeval after = { 0, ACCESS_FLUSH_MS * 1000 };

		event_add(&b->flush_ev, &after);
		b->armed = true;
	}
}
