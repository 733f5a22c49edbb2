#ifndef RINGPROXY_DECFMT_H
#define RINGPROXY_DECFMT_H

/*
 * decfmt.h -- doubles in decimal without printf, digit for digit what
 * glibc's printf writes: "%.<prec>g" and "%.<prec>f". Pure; any thread.
 */
#include <stddef.h>

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
