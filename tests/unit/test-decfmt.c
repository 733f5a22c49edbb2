/*
 * test-decfmt.c -- decfmt.c writes what glibc's printf writes: "%.Ng" and
 * "%.Nf" of the values the admin pages show (weights, shares, ratios,
 * rates, seconds, Unix times), of the edges (ties, powers of ten, a
 * rounding that carries into a new digit, the switch to e-notation, -0,
 * infinities, NaN) and of a million pseudo-random doubles over every
 * magnitude, compared byte for byte with snprintf.
 */
#include "base/decfmt.h"
#include "tap.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static uint64_t test_rng = 0x9e3779b97f4a7c15ULL;

/* splitmix64 (Steele, Lea, Flood 2014), so a failure repeats */
static uint64_t test_next(void)
{
	uint64_t z = (test_rng += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* 1 when decfmt's text of v is snprintf's; the first mismatch named */
static int test_same(double v, char conv, int prec, int *shown)
{
	char want[400], got[DECFMT_MAX + 1];
	char *e = conv == 'g' ? decfmt_g(got, v, prec) : decfmt_f(got, v, prec);

	*e = 0;
	snprintf(want, sizeof(want), conv == 'g' ? "%.*g" : "%.*f", prec, v);
	if (strcmp(want, got) == 0)
		return 1;
	if ((*shown)++ < 5)
		tap_diag("%%.%d%c of %a: want %s got %s", prec, conv, v, want, got);
	return 0;
}

static const double test_edges[] = {
	0.0, -0.0, 1.0, -1.0, 2.0, 0.5, 0.1, 0.2, 0.3, 1.0 / 3, 2.0 / 3, 0.125, 0.000244140625,
	1e-5, 9.9999999999999995e-6, 1e-4, 0.00012345678901234567, 1e16, 9999999999999998.0,
	1e17, 99999999999999984.0, 123456.5, 999999.5, 999995.0, 9999995.0, 0.9999995, 0.99999949,
	1.5, 2.5, 0.0625, 1e6, 999999.0, 1000000.0, 1e-300, 1e300, 5e-324, 1.7976931348623157e308,
	1764600000.123, 1764600000.0005, 0.0005, 0.0015, 0.0025, 4096.0, 1.0 / 4096, 1.0 / 2000,
	0.00048828125, 0.000999999999999999, 123.456, 1e9, 1e15 + 0.3,
};

int main(void)
{
	static const int gprec[] = { 6, 17, 1, 3, 15, 16 }, fprec[] = { 6, 3, 0, 1, 9 };
	int bad = 0, shown = 0;
	size_t n = 0;

	for (size_t i = 0; i < sizeof(test_edges) / sizeof(test_edges[0]); i++)
		for (size_t j = 0; j < 6; j++) {
			bad += !test_same(test_edges[i], 'g', gprec[j], &shown);
			bad += !test_same(-test_edges[i], 'g', gprec[j], &shown);
			bad += j < 5 && !test_same(test_edges[i], 'f', fprec[j], &shown);
			n += 3;
		}
	tap_ok(bad == 0, "the edges: %d of %zu differ from printf", bad, n);
	bad += !test_same(INFINITY, 'g', 17, &shown) + !test_same(-INFINITY, 'f', 6, &shown);
	bad += !test_same(NAN, 'g', 6, &shown) + !test_same(NAN, 'f', 3, &shown);
	tap_ok(bad == 0, "infinities and NaN as printf writes them");

	/* random bit patterns (every magnitude: most go to snprintf), then
	 * random values of the magnitudes the pages write (1e-6 .. 1e12),
	 * and ratios of small integers, where the ties are */
	bad = 0;
	n = 0;
	for (int i = 0; i < 1000000; i++) {
		uint64_t r = test_next();
		double v;

		if (i % 3 == 0) {
			memcpy(&v, &r, sizeof(v));
		} else if (i % 3 == 1) {
			v = ldexp((double)(r >> 11), -53) * pow(10, (double)(int)(test_next() % 19) - 6);
		} else {
			v = (double)(r % 100000) / (double)(1 + test_next() % 4096);
		}
		bad += !test_same(v, 'g', 17, &shown) + !test_same(v, 'g', 6, &shown);
		bad += !test_same(v, 'f', 6, &shown) + !test_same(v, 'f', 3, &shown);
		n += 4;
	}
	tap_ok(bad == 0, "random doubles: %d of %zu differ from printf", bad, n);
	return tap_done();
}
