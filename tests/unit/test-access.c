/* test-access.c -- the access log's line (access.c): escaping in both
 * formats against a byte-at-a-time reference (quotes, backslashes,
 * control bytes, DEL, UTF-8 and other high bytes, every length and
 * alignment around the word size), cut fields, the stamps, whole lines,
 * and the buffer: written out when the next line might not fit, lines
 * never split, and lines that cannot be written counted as dropped. */
#include "path/access.h"
#include "tap.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The rules, one byte at a time: what access_escape must produce. */
static size_t ref_escape(char *out, const unsigned char *s, size_t n, size_t max, bool json)
{
	static const char hex[] = "0123456789abcdef";
	char *p = out;

	if (n > max)
		n = max;
	if (!n && !json) {
		*p++ = '-';
		return 1;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned c = s[i];

		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
			*p++ = (char)c;
		else if (json && (c == '"' || c == '\\'))
			p += sprintf(p, "\\%c", c);
		else if (json)
			p += sprintf(p, "\\u00%c%c", hex[c >> 4], hex[c & 15]);
		else
			p += sprintf(p, "\\x%c%c", hex[c >> 4], hex[c & 15]);
	}
	return (size_t)(p - out);
}

/* access_escape of s[0..n) into a fresh buffer, compared with the
 * reference; the input is copied to the end of an exact-size allocation
 * so a read past it is caught by ASan. */
static int esc_matches(const unsigned char *s, size_t n, size_t max, bool json, char *got, size_t *glen)
{
	char want[6 * 2048 + 16];
	char *in = malloc(n ? n : 1);
	size_t wl = ref_escape(want, s, n, max, json);
	char *out = malloc(6 * (n < max ? n : max) + 16);
	int same;

	memcpy(in, s, n);
	*glen = (size_t)(access_escape(out, in, n, max, json) - out);
	same = *glen == wl && memcmp(out, want, wl) == 0;
	memcpy(got, out, *glen < 200 ? *glen : 200);
	got[*glen < 200 ? *glen : 200] = '\0';
	free(out);
	free(in);
	return same;
}

static const char *esc(const char *s, bool json)
{
	static char buf[4096];
	char *e = access_escape(buf, s, strlen(s), 1024, json);

	*e = '\0';
	return buf;
}

static void test_escape_cases(void)
{
	tap_is_str(esc("Tester/1.0 (\"quoted\")", false), "Tester/1.0 (\\x22quoted\\x22)",
		   "combined: quotes as \\x22 (NGINX's escaping)");
	tap_is_str(esc("Tester/1.0 (\"quoted\")", true), "Tester/1.0 (\\\"quoted\\\")",
		   "JSON: quotes as \\\"");
	tap_is_str(esc("a\\b", false), "a\\x5cb", "combined: a backslash as \\x5c");
	tap_is_str(esc("a\\b", true), "a\\\\b", "JSON: a backslash doubled");
	tap_is_str(esc("tab\there\x01\x1f\x7f", false), "tab\\x09here\\x01\\x1f\\x7f",
		   "combined: control bytes and DEL as \\xHH");
	tap_is_str(esc("tab\there\x01\x1f\x7f", true), "tab\\u0009here\\u0001\\u001f\\u007f",
		   "JSON: control bytes and DEL as \\u00HH");
	tap_is_str(esc("caf\xc3\xa9 \xff", false), "caf\\xc3\\xa9 \\xff",
		   "combined: UTF-8 and other high bytes as \\xHH, one per byte");
	tap_is_str(esc("caf\xc3\xa9 \xff", true), "caf\\u00c3\\u00a9 \\u00ff",
		   "JSON: high bytes as \\u00HH (ASCII lines, valid JSON whatever the bytes)");
	tap_is_str(esc("", false), "-", "combined: an empty field is -");
	tap_is_str(esc("", true), "", "JSON: an empty field is empty");
	tap_is_str(esc("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36", false),
		   "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36", "plain text is copied as it is");
}

/* Every length from 0 to 40 and every position of one byte to escape,
 * for each kind of byte, then random bytes: the word-at-a-time scan
 * agrees with the byte-at-a-time rules everywhere. */
static void test_escape_exhaustive(void)
{
	static const unsigned char specials[] = { '"', '\\', 0x00, 0x01, 0x09, 0x1f, 0x7f, 0x80,
						  0xc3, 0xff, 0x20, 0x7e, 0x21, 0x5b, 0x5d, 0x23 };
	unsigned char s[2048];
	char got[256];
	size_t gl;
	int bad = 0, cases = 0;
	uint64_t r = 0x9e3779b97f4a7c15ull;

	for (size_t n = 0; n <= 40; n++)
		for (size_t at = 0; at < (n ? n : 1); at++)
			for (size_t k = 0; k < sizeof(specials); k++)
				for (int json = 0; json < 2; json++) {
					for (size_t i = 0; i < n; i++)
						s[i] = (unsigned char)('a' + i % 26);
					if (n)
						s[at] = specials[k];
					cases++;
					if (!esc_matches(s, n, 1024, json, got, &gl) && bad++ < 3)
						tap_diag("  n %zu at %zu byte 0x%02x json %d: got \"%s\"", n, at,
							 specials[k], json, got);
				}
	for (int t = 0; t < 20000; t++) {
		size_t n;

		r = r * 6364136223846793005ull + 1442695040888963407ull;
		n = (size_t)(r >> 33) % 300;
		for (size_t i = 0; i < n; i++) {
			r = r * 6364136223846793005ull + 1442695040888963407ull;
			/* mostly plain text, some of anything */
			s[i] = (r >> 60) < 2 ? (unsigned char)(r >> 40) : (unsigned char)(0x20 + (r >> 40) % 95);
		}
		cases++;
		if (!esc_matches(s, n, 1024, t & 1, got, &gl) && bad++ < 3)
			tap_diag("  random case %d (%zu bytes) differs: \"%s\"", t, n, got);
	}
	tap_ok(bad == 0, "word-at-a-time escaping = byte-at-a-time rules in %d cases (all lengths "
	       "0-40, every position of each kind of byte, random bytes), nothing read past the field", cases);
}

static void test_escape_long(void)
{
	unsigned char s[2048];
	char got[256];
	size_t gl;

	memset(s, 'x', sizeof(s));
	tap_ok(esc_matches(s, 2000, 256, false, got, &gl) && gl == 256,
	       "a 2,000-byte field is cut at its limit (256 bytes)");
	memset(s, 0xe9, sizeof(s));
	tap_ok(esc_matches(s, 2000, 256, true, got, &gl) && gl == 6 * 256,
	       "a field of high bytes cut at 256 bytes takes 6 x 256 in JSON (the worst case the "
	       "line's room is made for)");
}

static struct access_fields sample(char *ip)
{
	struct access_fields f;

	memset(&f, 0, sizeof(f));
	strcpy(ip, "127.0.0.1");
	f.ip = ip;
	f.iplen = strlen(ip);
	f.minor = 1;
	f.log.method.p = "GET";
	f.log.method.len = 3;
	f.log.target.p = "/img/a\"b.jpg?x=1";
	f.log.target.len = strlen(f.log.target.p);
	f.log.status = 200;
	f.log.bytes = 4321;
	f.log.backend = "cache-1";
	f.log.cache = "miss";
	f.log.why = "owner";
	f.log.upstream_us = 1200345;
	f.log.tier = "hit";
	memcpy(f.log.rid, "692c5f8d010000000001", 21);
	f.referer.p = "http://example.com/";
	f.referer.len = strlen(f.referer.p);
	f.user_agent.p = "curl/7.88.1";
	f.user_agent.len = strlen(f.user_agent.p);
	f.dur_us = 1234567;
	f.now.tv_sec = 1796056909;      /* 2026-11-30 16:41:49 UTC */
	f.now.tv_usec = 7000;
	return f;
}

/* access_format's line, as a string. */
static void format_line(char *line, struct access_buf *b, const struct access_fields *f, bool json)
{
	*access_format(line, b, f, json) = '\0';
}

static void test_lines(void)
{
	struct access_buf b = { .sec = -1 };
	char ip[ACCESS_IP_BUF] = { 0 }, line[ACCESS_LINE_MAX];
	struct access_fields f = sample(ip);

	format_line(line, &b, &f, false);
	tap_is_str(line, "127.0.0.1 - - [30/Nov/2026:16:41:49 +0000] \"GET /img/a\\x22b.jpg?x=1 HTTP/1.1\" "
		   "200 4321 \"http://example.com/\" \"curl/7.88.1\" duration=1.234567 backend=cache-1 "
		   "cache=miss why=owner upstream_time=1.200345 tier=hit request_id=692c5f8d010000000001\n",
		   "a combined line, field by field: the backend's time and its cache's verdict too");
	format_line(line, &b, &f, true);
	tap_is_str(line, "{\"client\":\"127.0.0.1\",\"time\":\"2026-11-30T16:41:49.007Z\",\"method\":\"GET\","
		   "\"target\":\"/img/a\\\"b.jpg?x=1\",\"protocol\":\"HTTP/1.1\",\"status\":200,\"bytes\":4321,"
		   "\"referer\":\"http://example.com/\",\"user_agent\":\"curl/7.88.1\",\"duration\":1.234567,"
		   "\"backend\":\"cache-1\",\"cache\":\"miss\",\"why\":\"owner\",\"upstream_time\":1.200345,"
		   "\"tier\":\"hit\",\"request_id\":\"692c5f8d010000000001\"}\n",
		   "a JSON line, field by field");
	f.log.backend = NULL;
	f.log.why = "-";
	f.log.cache = "-";
	f.log.upstream_us = -1;
	f.log.tier = "-";
	f.log.status = 499;
	f.log.bytes = 0;
	f.referer.len = f.user_agent.len = 0;
	f.dur_us = 42;
	f.minor = 0;
	strcpy(ip, "2001:db8:85a3:0:0:8a2e:370:7334");
	f.iplen = strlen(ip);
	f.now.tv_sec = 951782400;       /* 2000-02-29 00:00:00, a leap day */
	f.now.tv_usec = 999999;
	format_line(line, &b, &f, false);
	tap_is_str(line, "2001:db8:85a3:0:0:8a2e:370:7334 - - [29/Feb/2000:00:00:00 +0000] \"GET /img/a\\x22b.jpg?x=1 "
		   "HTTP/1.0\" 499 0 \"-\" \"-\" duration=0.000042 backend=- cache=- why=- "
		   "upstream_time=- tier=- request_id=692c5f8d010000000001\n",
		   "no backend, no referer or user agent, an IPv6 client, HTTP/1.0, a leap day's stamp");
	format_line(line, &b, &f, true);
	tap_ok(strstr(line, "\"time\":\"2000-02-29T00:00:00.999Z\"") && strstr(line, "\"backend\":null") &&
	       strstr(line, "\"upstream_time\":null,\"tier\":null,") &&
	       strstr(line, "\"referer\":\"\",\"user_agent\":\"\""), "JSON: the stamp's milliseconds, null backend, "
	       "empty referer and user agent");
	/* the stamps of every day of 1970-2100 against gmtime's */
	{
		int wrong = 0;

		for (int64_t t = 0; t < 4102444800; t += 86400 + 3661) {
			struct tm tm;
			time_t tt = (time_t)t;
			char want[64];

			gmtime_r(&tt, &tm);
			strftime(want, sizeof(want), "[%d/%b/%Y:%H:%M:%S +0000]", &tm);
			f.now.tv_sec = t;
			access_format(line, &b, &f, false);
			wrong += memcmp(b.clf + 5, want, 28) != 0;
		}
		tap_ok(wrong == 0 && b.clf_len == ACCESS_CLF_LEN && b.iso_len == ACCESS_ISO_LEN,
		       "the [day/Mon/year:h:m:s] stamp = strftime's for days of 1970-2100");
	}
}

/* [log] access_hits: all, none, and one in N per buffer, the first of
 * each N. */
static void test_hits(void)
{
	struct access_buf b = { .sec = -1 }, c = { .sec = -1 };
	int all = 0, none = 0, tenth = 0, first = access_hit_wanted(&c, 10);

	for (int i = 0; i < 1000; i++) {
		all += access_hit_wanted(&b, 1);
		none += access_hit_wanted(&b, 0);
	}
	for (int i = 0; i < 1000; i++)
		tenth += access_hit_wanted(&b, 10);
	tap_ok(all == 1000 && none == 0 && tenth == 100 && first,
	       "access_hits: all logs 1000 of 1000 hits, none 0, 1/10 100 (the first of each ten)");
}

static void test_buffer(void)
{
	char path[] = "/tmp/test-access.XXXXXX";
	int fd = mkstemp(path);
	struct access_buf b = { .sec = -1 };
	char ip[ACCESS_IP_BUF] = { 0 }, err[256], big[4096], *text;
	struct access_fields f = sample(ip);
	_Atomic uint64_t dropped = 0;
	size_t lines = 0, flushes = 0, whole = 1, n = 0, cap = 1 << 22;
	ssize_t r;
	FILE *fp;

	close(fd);
	tap_ok(access_open(path, &dropped, err, sizeof(err)) == 0, "open a file log");
	/* long escaped fields: lines of about 3 KB */
	memset(big, '"', sizeof(big));
	f.user_agent.p = big;
	f.user_agent.len = sizeof(big);
	f.referer.p = big;
	f.referer.len = sizeof(big);
	for (int i = 0; i < 200; i++) {
		size_t before = b.len;

		access_append(&b, &f, i & 1);
		flushes += b.len < before;
		whole &= b.len <= ACCESS_BUF && b.data[b.len - 1] == '\n';
		lines++;
	}
	tap_ok(flushes >= 5 && whole, "lines of ~3 KB: the buffer is written out %zu times before a line "
	       "could overflow it, and always ends with a whole line", flushes);
	access_buf_flush(&b);
	tap_is_int(b.len, 0, "flushed: empty");
	text = malloc(cap);
	fp = fopen(path, "r");
	r = fp ? (ssize_t)fread(text, 1, cap, fp) : -1;
	if (fp)
		fclose(fp);
	for (ssize_t i = 0; i < r; i++)
		n += text[i] == '\n';
	tap_ok(n == lines && r > 0 && text[r - 1] == '\n', "every line reached the file whole (%zu of %zu)",
	       n, lines);
	tap_is_int(atomic_load(&dropped), 0, "nothing dropped");
	free(text);

	/* a full disk: the lines are counted as dropped, nothing blocks */
	tap_ok(access_open("/dev/full", &dropped, err, sizeof(err)) == 0, "switch to /dev/full");
	f.user_agent.len = f.referer.len = 10;
	for (int i = 0; i < 50; i++)
		access_append(&b, &f, false);
	access_buf_flush(&b);
	tap_is_int(atomic_load(&dropped), 50, "/dev/full: the 50 lines of the failed write are counted as dropped");
	access_close();
	free(b.data);
	unlink(path);
}

int main(void)
{
	test_escape_cases();
	test_escape_exhaustive();
	test_escape_long();
	test_lines();
	test_hits();
	test_buffer();
	return tap_done();
}
