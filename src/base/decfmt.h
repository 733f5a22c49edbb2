#ifndef RINGPROXY_DECFMT_H
#define RINGPROXY_DECFMT_H

/*
 * decfmt.h -- numbers in decimal without printf, digit for digit what
 * glibc's printf writes: integers, and doubles as "%.<prec>g" and
 * "%.<prec>f". Pure; any thread.
 */
#include <stddef.h>
#include <stdint.h>

/* "00" .. "99", two bytes each: the digits of v % 100 at 2 * (v % 100). */
extern const char decfmt_digits2[201];

/* v in decimal at p (room for 20 bytes, not NUL-terminated); returns
 * the end. */
char *decfmt_u64(char *p, uint64_t v);

/* v in decimal, '-' first when negative; room for 20 bytes. */
char *decfmt_i64(char *p, int64_t v);

/* Room a result needs: "%.9f" of the largest double has 309 digits
 * before the point. */
#define DECFMT_MAX 328

/* v as "%.<prec>g" writes it (1 <= prec <= 17), at p (DECFMT_MAX
 * bytes, not NUL-terminated); returns the end. */
char *decfmt_g(char *p, double v, int prec);

/* v as "%.<prec>f" writes it (0 <= prec <= 9); returns the end. Values
 * p has DECFMT_MAX bytes. */
char *decfmt_f(char *p, double v, int prec);

#endif
