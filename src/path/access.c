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
 *
 * To syslog ([log] access = syslog...), the descriptor is a non-blocking
 * datagram socket, not connected: a batch goes out as one datagram a
 * line, each addressed to the receiver, all of them with one sendmmsg():
 * RFC 3164 framing to a local socket (what syslog(3) writes; journald and
 * rsyslog read it), RFC 5424 to a server over UDP. A datagram the socket
 * cannot take at once (a receiver behind, a socket buffer full, none
 * there) is dropped and counted as a failed write is: the log never holds
 * up a worker. Addressed by name, a local receiver that restarted (a new
 * socket at the path) gets the next datagram, with nothing to connect
 * again: a connect() of the main thread's on the socket the workers send
 * on would race with their sends.
 */
#include "path/access.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include <event2/event.h>

#include "base/addr.h"
#include "base/decfmt.h"
#include "http/http1.h"


static _Atomic int access_fd = -1;      /* where workers write */
static _Atomic int access_on;           /* lines are logged */
static char *access_file;               /* main thread: the path, NULL if
					   off or stderr */
static _Atomic(_Atomic uint64_t *) access_drops;

/* Where lines go: a file or stderr as a stream, or syslog datagrams in
 * one of two framings. Workers read it at each flush. */
enum access_to { ACCESS_TO_FD, ACCESS_TO_LOCAL, ACCESS_TO_REMOTE };
static _Atomic int access_to;
/* The syslog receiver, made by the main thread at each open and never
 * changed after: workers read the newest (acquire) at each flush, and the
 * older ones a flush may still hold stay until access_close. */
struct access_dest {
	struct sockaddr_storage sa;
	socklen_t len;
	struct access_dest *older;
};
static _Atomic(struct access_dest *) access_dest;
/* the part of each syslog header after the time stamp, made at the first
 * syslog open (before access_to says syslog) and never changed: "
 * HOST ringproxy PID access - " (RFC 5424) and " ringproxy[PID]: " */
static char access_tail5424[128], access_tail3164[64];
static size_t access_tail5424_len, access_tail3164_len;

/* The syslog socket for peer (not connected: each datagram names peer);
 * -1 with err when peer cannot be reached now (a connect() on a socket of
 * its own says so at the start and at a reload, not at each line). */
static int access_syslog_open(const struct sockaddr_storage *peer, socklen_t len, const char *spec, char *err,
			      size_t errlen)
{
	int probe = socket(peer->ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int fd = -1;

	if (probe >= 0 && connect(probe, (const struct sockaddr *)peer, len) == 0)
		fd = socket(peer->ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "[log] access %s: %s%s", spec, strerror(errno),
			 peer->ss_family == AF_UNIX ? "; is a syslog daemon (or journald) running?" : "");
		if (probe >= 0)
			close(probe);
		return -1;
	}
	close(probe);
	if (!access_tail5424_len) {
		char host[64] = "-";

		if (gethostname(host, sizeof(host)) < 0 || !host[0])
			snprintf(host, sizeof(host), "-");
		host[strcspn(host, " ")] = '\0';
		access_tail5424_len = (size_t)snprintf(access_tail5424, sizeof(access_tail5424),
						       " %s ringproxy %ld access - ", host, (long)getpid());
		access_tail3164_len = (size_t)snprintf(access_tail3164, sizeof(access_tail3164),
						       " ringproxy[%ld]: ", (long)getpid());
	}
	return fd;
}

int access_open(const char *spec, _Atomic uint64_t *dropped, char *err, size_t len)
{
	int fd, cur = atomic_load(&access_fd), to = ACCESS_TO_FD;
	char *file = NULL;
	struct sockaddr_storage peer;
	socklen_t peerlen = 0;
	struct access_dest *dest = NULL;

	atomic_store(&access_drops, dropped);
	if (strcmp(spec, "off") == 0 || !*spec) {
		atomic_store(&access_on, 0);
		return 0;
	}
	switch (addr_syslog(spec, &peer, &peerlen, err, len)) {
	case -1:
		return -1;
	case 1:
		fd = access_syslog_open(&peer, peerlen, spec, err, len);
		if (fd < 0)
			return -1;
		file = strdup(spec);
		dest = calloc(1, sizeof(*dest));
		if (!dest) {
			close(fd);
			free(file);
			snprintf(err, len, "[log] access %s: out of memory", spec);
			return -1;
		}
		dest->sa = peer;
		dest->len = peerlen;
		to = peer.ss_family == AF_UNIX ? ACCESS_TO_LOCAL : ACCESS_TO_REMOTE;
		break;
	default:
		break;
	}
	if (to != ACCESS_TO_FD) {
		/* the socket, opened above */
	} else if (strcmp(spec, "stderr") == 0) {
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
		free(dest);
		return -1;
	}
	if (cur >= 0) {
		/* the workers keep writing to cur, which now is the new file */
		if (dup2(fd, cur) < 0) {
			snprintf(err, len, "[log] access %s: %s", spec, strerror(errno));
			close(fd);
			free(file);
			free(dest);
			return -1;
		}
		close(fd);
	} else {
		atomic_store(&access_fd, fd);
	}
	free(access_file);
	access_file = file;
	if (dest) {
		dest->older = atomic_load_explicit(&access_dest, memory_order_relaxed);
		atomic_store_explicit(&access_dest, dest, memory_order_release);
	}
	/* release: a worker that reads a syslog framing sees the tails */
	atomic_store_explicit(&access_to, to, memory_order_release);
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
	struct access_dest *d = atomic_exchange(&access_dest, NULL);

	if (fd >= 0)
		close(fd);
	while (d) {
		struct access_dest *older = d->older;

		free(d);
		d = older;
	}
	atomic_store(&access_on, 0);
	free(access_file);
	access_file = NULL;
}

/* ---- the worker's buffer ------------------------------------------------- */

static char *access_put(char *p, const char *s, size_t n)
{
	memcpy(p, s, n);
	return p + n;
}

#define ACCESS_PUTS(p, lit) access_put(p, lit, sizeof(lit) - 1)

/* The datagrams a sendmmsg() takes at most. */
#define ACCESS_MSGS 64

/* b's lines to syslog, one datagram a line (without its '\n'), each after
 * a header: the priority (local7.info), the stamp of b's second (the
 * lines are of it, or of the ACCESS_FLUSH_MS before) in to's framing, and
 * the tail. Returns the lines not sent. */
static uint64_t access_flush_syslog(struct access_buf *b, int fd, int to, const struct access_dest *dest)
{
	struct mmsghdr msg[ACCESS_MSGS];
	struct iovec iov[ACCESS_MSGS][2];
	char head[256], *p = head;
	size_t off = 0;
	uint64_t lost = 0;

	/* b->iso is '","time":"2026-11-30T16:41:49.', b->clf
	 * ' - - [30/Nov/2026:16:41:49 +0000] "' */
	p = ACCESS_PUTS(p, "<190>");
	if (to == ACCESS_TO_REMOTE) {
		p = ACCESS_PUTS(p, "1 ");
		p = access_put(p, b->iso + 10, 19);
		*p++ = 'Z';
		p = access_put(p, access_tail5424, access_tail5424_len);
	} else {
		/* "Nov 30 16:41:49": month, day (space-padded), time */
		p = access_put(p, b->clf + 9, 3);
		*p++ = ' ';
		*p++ = b->clf[6] == '0' ? ' ' : b->clf[6];
		*p++ = b->clf[7];
		*p++ = ' ';
		p = access_put(p, b->clf + 18, 8);
		p = access_put(p, access_tail3164, access_tail3164_len);
	}
	while (off < b->len) {
		unsigned n = 0;
		int sent;

		for (; n < ACCESS_MSGS && off < b->len; n++) {
			const char *nl = memchr(b->data + off, '\n', b->len - off);
			size_t end = nl ? (size_t)(nl - b->data) : b->len;

			iov[n][0] = (struct iovec){ head, (size_t)(p - head) };
			iov[n][1] = (struct iovec){ b->data + off, end - off };
			memset(&msg[n], 0, sizeof(msg[n]));
			msg[n].msg_hdr.msg_name = (void *)&dest->sa;
			msg[n].msg_hdr.msg_namelen = dest->len;
			msg[n].msg_hdr.msg_iov = iov[n];
			msg[n].msg_hdr.msg_iovlen = 2;
			off = end + 1;
		}
		do
			sent = sendmmsg(fd, msg, n, MSG_DONTWAIT | MSG_NOSIGNAL);
		while (sent < 0 && errno == EINTR);
		if (sent < (int)n) {
			/* the socket takes no more now: the rest of the batch
			 * is dropped rather than waited for */
			lost += n - (unsigned)(sent > 0 ? sent : 0);
			for (size_t i = off; i < b->len; i++)
				lost += b->data[i] == '\n';
			break;
		}
	}
	return lost;
}

void access_buf_flush(struct access_buf *b)
{
	int fd = atomic_load_explicit(&access_fd, memory_order_relaxed);
	int to = atomic_load_explicit(&access_to, memory_order_acquire);
	const struct access_dest *dest = atomic_load_explicit(&access_dest, memory_order_acquire);
	size_t off = 0;

	if (fd >= 0 && to != ACCESS_TO_FD && dest && b->len) {
		uint64_t lost = access_flush_syslog(b, fd, to, dest);
		_Atomic uint64_t *d = atomic_load(&access_drops);

		if (lost && d)
			atomic_fetch_add_explicit(d, lost, memory_order_relaxed);
		b->len = 0;
		b->lines = 0;
		return;
	}

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

		/* what was written ends at a line's end or inside one: the
		 * lines that did not end in it are lost */
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
	access_buf_flush(b);
}

void access_buf_init(struct access_buf *b, struct event_base *base)
{
	evtimer_assign(&b->flush_ev, base, access_on_timer, b);
	b->sec = -1;
}

void access_buf_free(struct access_buf *b)
{
	if (b->data) {
		access_buf_flush(b);
		event_del(&b->flush_ev);
		free(b->data);
		b->data = NULL;
	}
}

/*
 * ---- formatting ----------------------------------------------------------
 * No printf, and few instructions a byte: a line is about 250 bytes, and
 * the goal is a few hundred instructions a line (tests/bench/logcost.sh).
 * A field that needs escaping may be written up to 15 bytes past its end
 * (whole blocks are stored before they are known to be clean); the next
 * field or the line's reserve (ACCESS_LINE_MAX) covers them.
 */

/* A short NUL-terminated string that needs no escaping (the cache
 * outcome, the route, a backend's name: conf.c allows only letters,
 * digits, '.', '_' and '-' in one, at most 64). */
static char *access_cstr(char *p, const char *s)
{
	/* a loop, two bytes a turn: cheaper than strlen and a copy for the
	 * few bytes these have */
	while (s[0] && s[1]) {
		p[0] = s[0];
		p[1] = s[1];
		p += 2;
		s += 2;
	}
	if (s[0])
		*p++ = s[0];
	return p;
}

static char *access_2d(char *p, unsigned v)
{
	memcpy(p, decfmt_digits2 + 2 * v, 2);
	return p + 2;
}

/* us microseconds as seconds with 6 decimals. */
static char *access_secs(char *p, int64_t us)
{
	uint64_t frac;

	if (us < 0)
		us = 0;
	if (us < 1000000) {
		*p++ = '0';     /* most requests */
	} else {
		p = decfmt_u64(p, (uint64_t)us / 1000000);
	}
	*p++ = '.';
	frac = (uint64_t)us % 1000000;
	p = access_2d(p, (unsigned)(frac / 10000));
	p = access_2d(p, (unsigned)(frac / 100 % 100));
	return access_2d(p, (unsigned)(frac % 100));
}

/* A byte written as it is in a quoted field: printable ASCII but '"' and
 * '\\'. */
static bool access_plain(unsigned char c)
{
	return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
}

/*
 * The bytes of the word x (8 bytes, the first in the low byte) that are
 * not plain: each such byte's high bit set in the result, and only
 * theirs. Each test is exact per byte (no carry crosses a byte: every sum
 * stays below 0x100), so the lowest set bit is the first such byte:
 *   >= 0x7f:  (low 7 bits + 1) reaches 0x80 only from 0x7f, or the byte's
 *             own high bit is set;
 *   <  0x20:  low 7 bits + 0x60 stays below 0x80, and no high bit;
 *   '"', '\\': the byte xor the character is zero: (low 7 + 0x7f) has no
 *             high bit and neither has the byte.
 */
static uint64_t access_bad8(uint64_t x)
{
	const uint64_t l7f = 0x7f7f7f7f7f7f7f7full, h = 0x8080808080808080ull;
	const uint64_t q = x ^ 0x2222222222222222ull, s = x ^ 0x5c5c5c5c5c5c5c5cull;
	uint64_t lo = x & l7f;

	return ((((lo + 0x0101010101010101ull) | x) & h) |
		(~((lo + 0x6060606060606060ull) | x) & h) |
		(~(((q & l7f) + l7f) | q) & h) |
		(~(((s & l7f) + l7f) | s) & h));
}

/* 8 bytes of s as a word, the first in the low byte. */
static uint64_t access_load8(const char *s)
{
	uint64_t x;

	memcpy(&x, s, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	x = __builtin_bswap64(x);
#endif
	return x;
}

/* The word x as access_load8 read it, stored as 8 bytes. */
static void access_store8(char *p, uint64_t x)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	x = __builtin_bswap64(x);
#endif
	memcpy(p, &x, 8);
}

/* One byte that is not plain, escaped: \xHH in combined as NGINX does,
 * \" \\ or \u00HH in JSON (every line is ASCII, and valid JSON whatever
 * bytes a client sent: a reader gets byte b back as the code point b). */
static char *access_esc1(char *p, unsigned char c, bool json)
{
	static const char hex[] = "0123456789abcdef";

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
	return p;
}

#ifdef __SSE2__
/* The bytes of s[0..16) that are not plain, as a bit mask (bit i: s[i]):
 * a signed compare below 0x20 finds control bytes and bytes >= 0x80 at
 * once; DEL, '"' and '\\' by equality. */
static __m128i access_bad16v(__m128i x)
{
	return _mm_or_si128(_mm_cmplt_epi8(x, _mm_set1_epi8(0x20)),
			    _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8(0x7f)),
					 _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')),
						      _mm_cmpeq_epi8(x, _mm_set1_epi8('\\')))));
}

static unsigned access_bad16(__m128i x)
{
	return (unsigned)_mm_movemask_epi8(access_bad16v(x));
}

/* Fields of 16 bytes or more, 16 at a time (SSE2, every x86-64 has it);
 * the last, partial block is the field's last 16 bytes, its new part
 * moved down through a small buffer, so nothing past s[n - 1] is read. */
static char *access_escape16(char *p, const char *s, size_t n, bool json)
{
	size_t i = 0;

	while (i < n) {
		size_t left = n - i;
		unsigned take = 16, bad;
		__m128i x;

		if (left >= 16) {
			x = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
			_mm_storeu_si128((__m128i *)(void *)p, x);
			bad = access_bad16(x);
		} else {
			char t[32];

			x = _mm_loadu_si128((const __m128i *)(const void *)(s + n - 16));
			_mm_storeu_si128((__m128i *)(void *)t, x);
			memset(t + 16, 0, 16);
			memcpy(p, t + 16 - left, 16);
			bad = access_bad16(x) >> (16 - left);
			take = (unsigned)left;
		}
		if (!bad) {
			p += take;
			i += take;
			continue;
		}
		take = (unsigned)__builtin_ctz(bad);
		p += take;
		i += take;
		p = access_esc1(p, (unsigned char)s[i], json);
		i++;
	}
	return p;
}
#endif

/* The common case, a field with nothing to escape, in a few
 * instructions: below 4 bytes s[0], s[n / 2] and s[n - 1] are all of it;
 * up to 16, two overlapping loads; above, blocks of 16 (SSE2) or 8 and an
 * overlapping last one. The bytes are stored as they are loaded (the
 * stores overlap where the loads did) and checked at once. True when
 * s[0..n) was plain and is now at p; false (nothing to rely on at p)
 * otherwise. Inlined into each field's call: the call and the constants
 * would cost more than the check. */
static inline __attribute__((always_inline)) bool access_plain_copy(char *p, const char *s, size_t n)
{
	uint64_t a, b;

	if (n < 4) {
		unsigned char x = (unsigned char)s[0], y = (unsigned char)s[n >> 1],
			      z = (unsigned char)s[n - 1];

		p[0] = (char)x;
		p[n >> 1] = (char)y;
		p[n - 1] = (char)z;
		/* the other five bytes: spaces, which are plain */
		a = 0x2020202020000000ull | x | (uint64_t)y << 8 | (uint64_t)z << 16;
		b = a;
	} else if (n <= 8) {
		uint32_t x, y;

		memcpy(&x, s, 4);
		memcpy(&y, s + n - 4, 4);
		memcpy(p, &x, 4);
		memcpy(p + n - 4, &y, 4);
		a = (uint64_t)x | (uint64_t)y << 32;
		b = a;
	} else if (n <= 16) {
		memcpy(&a, s, 8);
		memcpy(&b, s + n - 8, 8);
		memcpy(p, &a, 8);
		memcpy(p + n - 8, &b, 8);
	} else {
#ifdef __SSE2__
		__m128i x, bad = _mm_setzero_si128();

		for (size_t i = 0; i + 16 < n; i += 16) {
			x = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
			_mm_storeu_si128((__m128i *)(void *)(p + i), x);
			bad = _mm_or_si128(bad, access_bad16v(x));
		}
		x = _mm_loadu_si128((const __m128i *)(const void *)(s + n - 16));
		_mm_storeu_si128((__m128i *)(void *)(p + n - 16), x);
		bad = _mm_or_si128(bad, access_bad16v(x));
		return _mm_movemask_epi8(bad) == 0;
#else
		b = 0;
		for (size_t i = 0; i + 8 < n; i += 8) {
			memcpy(p + i, s + i, 8);
			b |= access_bad8(access_load8(s + i));
		}
		memcpy(p + n - 8, s + n - 8, 8);
		return (b | access_bad8(access_load8(s + n - 8))) == 0;
#endif
	}
	/* up to 16 bytes in a and b (byte order does not matter for "any") */
#ifdef __SSE2__
	return _mm_movemask_epi8(access_bad16v(_mm_set_epi64x((long long)b, (long long)a))) == 0;
#else
	return (access_bad8(a) | access_bad8(b)) == 0;
#endif
}

/* s[0..n) (n > 0) that access_plain_copy found not plain, escaped. */
static char *access_escape_some(char *p, const char *s, size_t n, bool json)
{
	size_t i = 0;

	if (n < 8) {
		/* short (a method, a name): byte by byte */
		for (; i < n; i++) {
			unsigned char c = (unsigned char)s[i];

			if (access_plain(c))
				*p++ = (char)c;
			else
				p = access_esc1(p, c, json);
		}
		return p;
	}
#ifdef __SSE2__
	if (n >= 16)
		return access_escape16(p, s, n, json);
#endif
	/* A word at a time: stored whole, then the output advances over its
	 * plain bytes. The last, partial word is the field's last 8 bytes
	 * shifted down, so nothing past s[n - 1] is read. */
	while (i < n) {
		size_t left = n - i;
		unsigned take = 8;
		uint64_t x, bad;

		if (left >= 8) {
			memcpy(p, s + i, 8);
			x = access_load8(s + i);
			bad = access_bad8(x);
		} else {
			x = access_load8(s + n - 8) >> (8 * (8 - left));
			access_store8(p, x);
			bad = access_bad8(x) & ((1ull << (8 * left)) - 1);
			take = (unsigned)left;
		}
		if (!bad) {
			p += take;
			i += take;
			continue;
		}
		take = (unsigned)__builtin_ctzll(bad) >> 3;
		p += take;
		i += take;
		p = access_esc1(p, (unsigned char)s[i], json);
		i++;
	}
	return p;
}

/* A field: plain ones copied inline, the others escaped. */
static inline __attribute__((always_inline)) char *access_field(char *p, const char *s, size_t n,
								 size_t max, bool json)
{
	if (!s)
		n = 0;
	if (n > max)
		n = max;
	if (!n) {
		if (!json)
			*p++ = '-';
		return p;
	}
	if (access_plain_copy(p, s, n))
		return p + n;
	return access_escape_some(p, s, n, json);
}

char *access_escape(char *p, const char *s, size_t n, size_t max, bool json)
{
	return access_field(p, s, n, max, json);
}

/* The second's stamps, made once a second (civil from days: Howard
 * Hinnant's algorithm, so no gmtime and no snprintf). */
static void access_stamps(struct access_buf *b, int64_t sec)
{
	static const char mon[12][4] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
					 "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
	int64_t days = sec >= 0 ? sec / 86400 : (sec - 86399) / 86400;
	int64_t s = sec - days * 86400, z = days + 719468;
	int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	int64_t doe = z - era * 146097;
	int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	int64_t mp = (5 * doy + 2) / 153;
	unsigned d = (unsigned)(doy - (153 * mp + 2) / 5 + 1);
	unsigned m = (unsigned)(mp < 10 ? mp + 3 : mp - 9);
	uint64_t y = (uint64_t)(yoe + era * 400 + (m <= 2));
	unsigned hh = (unsigned)(s / 3600), mm = (unsigned)(s / 60 % 60), ss = (unsigned)(s % 60);
	char *p = b->clf;

	if (y > 9999)
		y = 9999;
	/* - - [30/Nov/2026:16:41:49 +0000] " : the text around it too */
	p = ACCESS_PUTS(p, " - - [");
	p = access_2d(p, d);
	*p++ = '/';
	p = access_put(p, mon[m - 1], 3);
	*p++ = '/';
	p = access_2d(p, (unsigned)(y / 100));
	p = access_2d(p, (unsigned)(y % 100));
	*p++ = ':';
	p = access_2d(p, hh);
	*p++ = ':';
	p = access_2d(p, mm);
	*p++ = ':';
	p = access_2d(p, ss);
	p = ACCESS_PUTS(p, " +0000] \"");
	b->clf_len = (size_t)(p - b->clf);
	/* ","time":"2026-11-30T16:41:49. */
	p = ACCESS_PUTS(b->iso, "\",\"time\":\"");
	p = access_2d(p, (unsigned)(y / 100));
	p = access_2d(p, (unsigned)(y % 100));
	*p++ = '-';
	p = access_2d(p, m);
	*p++ = '-';
	p = access_2d(p, d);
	*p++ = 'T';
	p = access_2d(p, hh);
	*p++ = ':';
	p = access_2d(p, mm);
	*p++ = ':';
	p = access_2d(p, ss);
	*p++ = '.';
	b->iso_len = (size_t)(p - b->iso);
	b->sec = sec;
}

/* The fields only some lines have, at a line's end: an HTTP/2 request's
 * stream, an HTTPS request's TLS version, cipher and SNI (a plain HTTP/1.1
 * request's line is as it was before either existed). JSON members after
 * a closed value, or combined's "name=value" words. */
static char *access_extras(char *p, const struct access_fields *f, bool json)
{
	if (f->h2_stream) {
		p = json ? ACCESS_PUTS(p, ",\"stream\":") : ACCESS_PUTS(p, " stream=");
		p = decfmt_u64(p, f->h2_stream);
	}
	if (!f->tls_version)
		return p;
	p = json ? ACCESS_PUTS(p, ",\"tls\":\"") : ACCESS_PUTS(p, " tls=");
	p = access_field(p, f->tls_version, strlen(f->tls_version), ACCESS_TLS_MAX, json);
	p = json ? ACCESS_PUTS(p, "\",\"cipher\":\"") : ACCESS_PUTS(p, " cipher=");
	p = access_field(p, f->tls_cipher, strlen(f->tls_cipher), ACCESS_TLS_MAX, json);
	p = json ? ACCESS_PUTS(p, "\",\"sni\":") : ACCESS_PUTS(p, " sni=");
	if (!f->sni)
		return json ? ACCESS_PUTS(p, "null") : ACCESS_PUTS(p, "-");
	if (json)
		*p++ = '"';
	p = access_field(p, f->sni, strlen(f->sni), ACCESS_SNI_MAX, json);
	if (json)
		*p++ = '"';
	return p;
}

/* The client's address: inet_ntop's text (digits, hex, '.', ':'), which
 * needs no escaping, in a buffer of ACCESS_IP_BUF bytes (struct client's
 * ip[]); copied as whole blocks of that buffer. */
static char *access_ip(char *p, const char *ip, size_t len, bool json)
{
	if (len == 0 || len >= ACCESS_IP_BUF)
		return access_escape(p, ip, len, ACCESS_IP_BUF, json);
	memcpy(p, ip, 16);
	if (len > 16)
		memcpy(p + 16, ip + 16, ACCESS_IP_BUF - 16);
	return p + len;
}

static char *access_status(char *p, int status)
{
	if (status >= 100 && status <= 999) {
		*p++ = (char)('0' + status / 100);
		return access_2d(p, (unsigned)(status % 100));
	}
	return decfmt_u64(p, status < 0 ? 0 : (uint64_t)status);
}

char *access_format(char *p, struct access_buf *b, const struct access_fields *f, bool json)
{
	const struct access_req *l = &f->log;
	int64_t ms;

	if (f->now.tv_sec != b->sec)
		access_stamps(b, f->now.tv_sec);
	if (json) {
		p = ACCESS_PUTS(p, "{\"client\":\"");
		p = access_ip(p, f->ip, f->iplen, true);
		p = access_put(p, b->iso, ACCESS_ISO_LEN);
		ms = f->now.tv_usec / 1000;
		*p++ = (char)('0' + ms / 100);
		p = access_2d(p, (unsigned)(ms % 100));
		p = ACCESS_PUTS(p, "Z\",\"method\":\"");
		p = access_field(p, l->method.p, l->method.len, ACCESS_METHOD_MAX, true);
		p = ACCESS_PUTS(p, "\",\"target\":\"");
		p = access_field(p, l->target.p, l->target.len, ACCESS_TARGET_MAX, true);
		if (f->h2_stream) {
			p = ACCESS_PUTS(p, "\",\"protocol\":\"HTTP/2");
		} else {
			p = ACCESS_PUTS(p, "\",\"protocol\":\"HTTP/1.");
			*p++ = f->minor ? '1' : '0';
		}
		p = ACCESS_PUTS(p, "\",\"status\":");
		p = access_status(p, l->status);
		p = ACCESS_PUTS(p, ",\"bytes\":");
		p = decfmt_u64(p, l->bytes);
		p = ACCESS_PUTS(p, ",\"referer\":\"");
		p = access_field(p, f->referer.p, f->referer.len, ACCESS_HDR_MAX, true);
		p = ACCESS_PUTS(p, "\",\"user_agent\":\"");
		p = access_field(p, f->user_agent.p, f->user_agent.len, ACCESS_HDR_MAX, true);
		p = ACCESS_PUTS(p, "\",\"duration\":");
		p = access_secs(p, f->dur_us);
		p = ACCESS_PUTS(p, ",\"backend\":");
		if (l->backend) {
			*p++ = '"';
			p = access_cstr(p, l->backend);
			*p++ = '"';
		} else {
			p = ACCESS_PUTS(p, "null");
		}
		p = ACCESS_PUTS(p, ",\"cache\":\"");
		p = access_cstr(p, l->cache);
		p = ACCESS_PUTS(p, "\",\"why\":\"");
		p = access_cstr(p, l->why);
		p = ACCESS_PUTS(p, "\",\"upstream_time\":");
		if (l->upstream_us >= 0)
			p = access_secs(p, l->upstream_us);
		else
			p = ACCESS_PUTS(p, "null");
		p = ACCESS_PUTS(p, ",\"tier\":");
		if (l->tier && l->tier[0] != '-') {
			*p++ = '"';
			p = access_cstr(p, l->tier);
			*p++ = '"';
		} else {
			p = ACCESS_PUTS(p, "null");
		}
		p = ACCESS_PUTS(p, ",\"request_id\":\"");
		p = access_put(p, l->rid, 20);
		*p++ = '"';
		p = access_extras(p, f, true);
		p = ACCESS_PUTS(p, "}\n");
	} else {
		p = access_ip(p, f->ip, f->iplen, false);
		p = access_put(p, b->clf, ACCESS_CLF_LEN);
		p = access_field(p, l->method.p, l->method.len, ACCESS_METHOD_MAX, false);
		*p++ = ' ';
		p = access_field(p, l->target.p, l->target.len, ACCESS_TARGET_MAX, false);
		if (f->h2_stream) {
			p = ACCESS_PUTS(p, " HTTP/2");
		} else {
			p = ACCESS_PUTS(p, " HTTP/1.");
			*p++ = f->minor ? '1' : '0';
		}
		p = ACCESS_PUTS(p, "\" ");
		p = access_status(p, l->status);
		*p++ = ' ';
		p = decfmt_u64(p, l->bytes);
		p = ACCESS_PUTS(p, " \"");
		p = access_field(p, f->referer.p, f->referer.len, ACCESS_HDR_MAX, false);
		p = ACCESS_PUTS(p, "\" \"");
		p = access_field(p, f->user_agent.p, f->user_agent.len, ACCESS_HDR_MAX, false);
		p = ACCESS_PUTS(p, "\" duration=");
		p = access_secs(p, f->dur_us);
		p = ACCESS_PUTS(p, " backend=");
		if (l->backend)
			p = access_cstr(p, l->backend);
		else
			*p++ = '-';
		p = ACCESS_PUTS(p, " cache=");
		p = access_cstr(p, l->cache);
		p = ACCESS_PUTS(p, " why=");
		p = access_cstr(p, l->why);
		p = ACCESS_PUTS(p, " upstream_time=");
		if (l->upstream_us >= 0)
			p = access_secs(p, l->upstream_us);
		else
			*p++ = '-';
		p = ACCESS_PUTS(p, " tier=");
		p = access_cstr(p, l->tier ? l->tier : "-");
		p = ACCESS_PUTS(p, " request_id=");
		p = access_put(p, l->rid, 20);
		p = access_extras(p, f, false);
		*p++ = '\n';
	}
	return p;
}

/* Bytes 0-7 and n-8..n-1 of a header name (7 <= n <= 16) in lower case:
 * names are tokens (http1.c), and in a token only a letter changes with
 * bit 5 set into a letter or '-', so this is exact for names of letters
 * and '-'. */
static bool access_name_is(const char *p, size_t n, const char *lower)
{
	uint64_t a, b, x, y;
	size_t k = n < 8 ? n - 4 : n - 8, w = n < 8 ? 4 : 8;

	if (w == 4) {
		uint32_t a4, b4, x4, y4;

		memcpy(&a4, p, 4);
		memcpy(&b4, p + k, 4);
		memcpy(&x4, lower, 4);
		memcpy(&y4, lower + k, 4);
		return ((a4 | 0x20202020u) == x4) & ((b4 | 0x20202020u) == y4);
	}
	memcpy(&a, p, 8);
	memcpy(&b, p + k, 8);
	memcpy(&x, lower, 8);
	memcpy(&y, lower + k, 8);
	return ((a | 0x2020202020202020ull) == x) & ((b | 0x2020202020202020ull) == y);
}

/* The request's first Referer and User-Agent values: a pass over its
 * headers comparing lengths first (most names are neither 7 nor 10
 * bytes long), then the name a word at a time. */
static void access_headers(const struct http1_msg *m, struct http1_str *ref, struct http1_str *ua)
{
	for (unsigned i = 0; i < m->nheaders; i++) {
		const struct http1_header *h = &m->headers[i];

		if (h->name.len == 7 && !ref->p && access_name_is(h->name.p, 7, "referer"))
			*ref = h->value;
		else if (h->name.len == 10 && !ua->p && access_name_is(h->name.p, 10, "user-agent"))
			*ua = h->value;
	}
}

bool access_append(struct access_buf *b, const struct access_fields *f, bool json)
{
	if (!b->data) {
		b->data = malloc(ACCESS_BUF);
		if (!b->data)
			return false;
	}
	if (b->len + ACCESS_LINE_MAX > ACCESS_BUF)
		access_buf_flush(b);
	b->len = (size_t)(access_format(b->data + b->len, b, f, json) - b->data);
	b->lines++;
	return true;
}

bool access_wanted(void)
{
	return atomic_load_explicit(&access_on, memory_order_relaxed);
}

bool access_hit_wanted(struct access_buf *b, unsigned every)
{
	if (every <= 1)
		return every == 1;
	/* the first of each N: a quiet worker's first hit has its line */
	return b->hits++ % every == 0;
}

void access_log(struct access_buf *b, bool json, struct access_fields *f,
		const struct http1_msg *head, int64_t t_begin)
{
	int64_t wall;

	/* the request's end on the wall clock: its start and duration on
	 * the monotonic clock, moved by the difference of the two clocks,
	 * read once a batch (every ACCESS_FLUSH_MS at most while lines come:
	 * a step of the wall clock shows within that) */
	if (!b->armed) {
		struct timeval tv;
		struct timespec ts;

		gettimeofday(&tv, NULL);
		clock_gettime(CLOCK_MONOTONIC, &ts);
		b->mono_to_wall = (int64_t)tv.tv_sec * 1000000 + tv.tv_usec -
				  ((int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000);
	}
	wall = t_begin + f->dur_us + b->mono_to_wall;
	f->now.tv_sec = (time_t)(wall / 1000000);
	f->now.tv_usec = (suseconds_t)(wall % 1000000);
	/* a request with a body has none: its head's bytes may have been
	 * moved out of the read buffer (only its method and target were
	 * copied) */
	f->referer.p = f->user_agent.p = NULL;
	f->referer.len = f->user_agent.len = 0;
	if (!f->log.line_copied)
		access_headers(head, &f->referer, &f->user_agent);
	if (!access_append(b, f, json))
		return;
	if (!b->armed) {
		static const struct timeval after = { 0, ACCESS_FLUSH_MS * 1000 };

		event_add(&b->flush_ev, &after);
		b->armed = true;
	}
}
