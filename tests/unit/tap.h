/*
 * tap.h -- a minimal TAP producer for the unit tests (meson's protocol:
 * 'tap'). Header-only; each test program includes it once.
 */
#ifndef RINGPROXY_TAP_H
#define RINGPROXY_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_n;
static int tap_failed;

/* Record one check; prints "ok N - msg" or "not ok N - msg". Returns cond. */
__attribute__((format(printf, 2, 3)))
static int tap_ok(int cond, const char *fmt, ...)
{
	va_list ap;

	tap_n++;
	if (!cond)
		tap_failed++;
	printf("%sok %d - ", cond ? "" : "not ", tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	return cond;
}

__attribute__((format(printf, 1, 2)))
static void tap_diag(const char *fmt, ...)
{
	va_list ap;

	fputs("# ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

#define tap_is_int(got, want, ...) \
	(tap_ok((long long)(got) == (long long)(want), __VA_ARGS__) ? 1 : \
	 (tap_diag("  got %lld, want %lld", (long long)(got), (long long)(want)), 0))

#define tap_is_str(got, want, ...) \
	(tap_ok(strcmp((got), (want)) == 0, __VA_ARGS__) ? 1 : \
	 (tap_diag("  got  \"%s\"", (got)), tap_diag("  want \"%s\"", (want)), 0))

/* The whole text of the file at path (a fixture, an expected output):
 * the caller frees it; NULL when it cannot be opened. */
__attribute__((unused))
static char *tap_slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t cap = 0;
	ssize_t n;

	if (!f)
		return NULL;
	n = getdelim(&buf, &cap, '\0', f);
	fclose(f);
	if (n < 0) {
		free(buf);
		return strdup("");
	}
	return buf;
}

/* Print the plan and return the exit status for main(). */
static int tap_done(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

#endif
