/*
 * decfmt.c -- doubles in decimal without printf: /stats, /metrics and the
 * page write a dozen floats for each backend, and with thousands of
 * backends printf's own conversion was most of their time.
 *
 * The conversion is exact, so the text is the one glibc's printf writes
 * (it rounds the binary value exactly, ties to even): v = m * 2^e with m
 * an integer below 2^53, and v * 10^k rounded to an integer is
 * (m * 10^k) >> -e with its remainder, computed in 128 bits. That holds
 * for 10^k up to 10^22 (m * 10^22 < 2^127), which covers every value of
 * the admin pages (ratios, weights, seconds, rates); anything else
 * (huge, tiny, infinite, NaN) goes to snprintf. Pure; any thread.
 */
#include "base/decfmt.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

__extension__ typedef unsigned __int128 decfmt_u128;

/* floor(a * 10^k) in *fl and a * 10^k rounded to the nearest, ties to
 * even, in *q, a finite and >= 0, 0 <= k <= 22; -1 when either does not
 * fit 64 bits. */
static int decfmt_scaled(double a, int k, uint64_t *fl, uint64_t *q)
{
	decfmt_u128 n = 1, r, half;
	int ex, s;
	uint64_t m = (uint64_t)ldexp(frexp(a, &ex), 53);

	for (int i = 0; i < k; i++)
		n *= 10;
	n *= m;                        /* a * 10^k = n * 2^(ex - 53) */
	s = 53 - ex;
	if (s <= 0) {
		if (s < -10 || n >> (64 + s))
			return -1;
		*fl = *q = (uint64_t)(n << -s);
		return 0;
	}
	if (s >= 127) {                /* n < 2^127: below one half */
		*fl = *q = 0;
		return 0;
	}
	if (n >> s >> 64)
		return -1;
	*fl = (uint64_t)(n >> s);
	r = n & (((decfmt_u128)1 << s) - 1);
	half = (decfmt_u128)1 << (s - 1);
	*q = *fl + (r > half || (r == half && (*fl & 1)));
	return *q < *fl ? -1 : 0;
}

static const uint64_t decfmt_pow10[] = {
	1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL, 100000000ULL,
	1000000000ULL, 10000000000ULL, 100000000000ULL, 1000000000000ULL, 10000000000000ULL,
	100000000000000ULL, 1000000000000000ULL, 10000000000000000ULL, 100000000000000000ULL,
};

/* The n digits of q, leading zeros written, at p; returns the end. */
static char *decfmt_digits(char *p, uint64_t q, int n)
{
	char b[20];
	int l = (int)(decfmt_u64(b, q) - b);

	memset(p, '0', (size_t)(n - l));
	memcpy(p + n - l, b, (size_t)l);
	return p + n;
}

/* p..e without the trailing zeros of its fraction, nor a bare point. */
static char *decfmt_trim(char *p, char *e)
{
	if (!memchr(p, '.', (size_t)(e - p)))
		return e;
	while (e[-1] == '0')
		e--;
	return e[-1] == '.' ? e - 1 : e;
}

char *decfmt_g(char *p, double v, int prec)
{
	double a = fabs(v);
	uint64_t fl, q;
	int x, k, tries = 0;
	char *d, *e;

	if (!isfinite(v) || prec < 1 || prec > 17 || (a != 0 && (a < 1e-5 || a >= 1e17)))
		return p + snprintf(p, DECFMT_MAX, "%.*g", prec, v);
	if (signbit(v))
		*p++ = '-';
	if (a == 0) {
		*p++ = '0';
		return p;
	}
	/* x: the decimal exponent of a, from log10 and then made exact by
	 * the digits: floor(a * 10^(prec-1-x)) has prec of them */
	x = (int)floor(log10(a));
	for (;;) {
		k = prec - 1 - x;
		if (k < 0 || k > 22 || decfmt_scaled(a, k, &fl, &q) < 0 || ++tries > 3)
			return p + snprintf(p, DECFMT_MAX, "%.*g", prec, a);
		if (fl >= decfmt_pow10[prec])
			x++;
		else if (fl < decfmt_pow10[prec - 1])
			x--;
		else
			break;
	}
	if (q == decfmt_pow10[prec]) { /* rounded up to the next power */
		q = decfmt_pow10[prec - 1];
		x++;
	}
	d = p;
	if (x < -4 || x >= prec) {     /* %e: d.ddde+XX */
		e = decfmt_digits(d + 1, q, prec);
		d[0] = d[1];
		d[1] = '.';
		e = decfmt_trim(d, e);
		*e++ = 'e';
		*e++ = x < 0 ? '-' : '+';
		x = x < 0 ? -x : x;
		if (x < 10)
			*e++ = '0';
		return decfmt_u64(e, (uint64_t)x);
	}
	if (x < 0) {                   /* 0.000ddd */
		memcpy(d, "0.0000", (size_t)(1 - x));
		return decfmt_trim(d, decfmt_digits(d + 1 - x, q, prec));
	}
	/* ddd.ddd: x + 1 digits before the point */
	e = decfmt_digits(d, q, prec);
	memmove(d + x + 2, d + x + 1, (size_t)(prec - x - 1));
	d[x + 1] = '.';
	return decfmt_trim(d, e + 1);
}

char *decfmt_f(char *p, double v, int prec)
{
	double a = fabs(v);
	uint64_t fl, q;

	if (!isfinite(v) || prec < 0 || prec > 9 || a >= 1e9 * 1e9 / decfmt_pow10[prec] ||
	    decfmt_scaled(a, prec, &fl, &q) < 0)
		return p + snprintf(p, DECFMT_MAX, "%.*f", prec, v);
	if (signbit(v))
		*p++ = '-';
	p = decfmt_u64(p, q / decfmt_pow10[prec]);
	if (!prec)
		return p;
	*p++ = '.';
	return decfmt_digits(p, q % decfmt_pow10[prec], prec);
}

const char decfmt_digits2[201] =
	"00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899";

static unsigned decfmt_ndigits(uint64_t v)
{
	unsigned n = 1;

	while (v >= 10000) {
		v /= 10000;
		n += 4;
	}
	return n + (v >= 10) + (v >= 100) + (v >= 1000);
}

/* two digits a division by 100 (by a constant: a multiplication) */
char *decfmt_u64(char *p, uint64_t v)
{
	char *e = p + decfmt_ndigits(v), *q = e;

	while (v >= 100) {
		q -= 2;
		memcpy(q, decfmt_digits2 + 2 * (v % 100), 2);
		v /= 100;
	}
	if (v >= 10) {
		q -= 2;
		memcpy(q, decfmt_digits2 + 2 * v, 2);
	} else {
		*--q = (char)('0' + v);
	}
	return e;
}

char *decfmt_i64(char *p, int64_t v)
{
	if (v >= 0)
		return decfmt_u64(p, (uint64_t)v);
	*p++ = '-';
	return decfmt_u64(p, -(uint64_t)v);
}
