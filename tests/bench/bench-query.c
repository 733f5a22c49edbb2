/*
 * bench-query.c -- the request path's cost of [ring] query and
 * drop_params: query_apply on a parsed thumbnail request, in nanoseconds
 * per request, for each rule set (as-is without a drop list is the
 * default, and must cost nothing but its test), on a query already in
 * order and on one with its parameters shuffled and two trackers. For
 * instructions per request, run one rule set under callgrind:
 *   valgrind --tool=callgrind --toggle-collect=query_apply \
 *     ./bench-query sorted-drop 10000 shuffled      (or: in-order)
 * Not a test: run it by hand on a release build.
 */
#include "http/http1.h"
#include "http/query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const bench_targets[] = {
	"/thumbs/320x240/2f9a1c0e5b7d4e83.jpg?fit=crop&h=240&q=80&v=3&w=320",
	"/thumbs/320x240/2f9a1c0e5b7d4e83.jpg?w=320&utm_source=news&h=240&fit=crop&fbclid=IwAR2x&v=3&q=80",
};

static const struct {
	const char *name;
	int mode;
	const char *drop;
} bench_rules[] = {
	{ "as-is", QUERY_AS_IS, "" },
	{ "as-is-drop", QUERY_AS_IS, "utm_*, fbclid, gclid" },
	{ "sorted", QUERY_SORTED, "" },
	{ "sorted-drop", QUERY_SORTED, "utm_*, fbclid, gclid" },
};

static double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* n rounds of query_apply on target under r: ns per request. */
static double bench_one(const struct query_rules *r, const char *target, long n)
{
	static const struct http1_limits lim = { 16384, 16 };
	struct http1_header h[16];
	struct http1_msg m, parsed;
	struct query_sent sent;
	char head[512], buf[QUERY_TARGET_MAX];
	int len = snprintf(head, sizeof(head), "GET %s HTTP/1.1\r\nHost: img.example.com\r\n\r\n", target);
	long changed = 0;
	double t0;

	http1_msg_init(&parsed);
	if (http1_parse_request(&parsed, h, head, (size_t)len, &lim) <= 0)
		abort();
	t0 = bench_now();
	for (long i = 0; i < n; i++) {
		m = parsed;
		changed += query_apply(r, &m, buf, &sent);
		__asm__ volatile("" : : "r"(m.target.p), "r"(buf) : "memory");
	}
	if (changed != 0 && changed != n)
		abort();
	return (bench_now() - t0) / (double)n;
}

int main(int argc, char **argv)
{
	long n = argc > 2 ? atol(argv[2]) : 2000000;

	for (size_t i = 0; i < sizeof(bench_rules) / sizeof(bench_rules[0]); i++) {
		struct query_rules r = { .mode = bench_rules[i].mode };
		char err[160];

		if (argc > 1 && strcmp(argv[1], bench_rules[i].name) != 0)
			continue;
		if (query_rules_parse(&r, bench_rules[i].drop, err, sizeof(err)) < 0)
			return 1;
		if (argc > 3) {         /* one target alone, for callgrind */
			printf("%-12s %s %6.1f ns/request\n", bench_rules[i].name, argv[3],
			       bench_one(&r, bench_targets[strcmp(argv[3], "shuffled") == 0], n));
			continue;
		}
		printf("%-12s in order %6.1f ns/request   shuffled+trackers %6.1f ns/request\n", bench_rules[i].name,
		       bench_one(&r, bench_targets[0], n), bench_one(&r, bench_targets[1], n));
	}
	return 0;
}
