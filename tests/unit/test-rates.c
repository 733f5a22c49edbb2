/*
 * test-rates.c -- rates.c: per-second rates over 10 s and 5 min from
 * one-a-second samples, against counts made to grow at known speeds;
 * the ring wrapping past 5 min, a late tick, a backend seen late, and the
 * sparkline series.
 */
#include "base/rates.h"
#include "tap.h"

#include <math.h>
#include <string.h>

static int near(double a, double b)
{
	return fabs(a - b) < 1e-9 * (fabs(b) + 1);
}

int main(void)
{
	struct rates *r = rates_new();
	uint64_t pv[RATES_NPROXY], bv[3 * RATES_NBACKEND];
	double series[RATES_SECONDS];
	int64_t t = 1000000;

	if (!tap_ok(r != NULL, "rates_new"))
		return tap_done();
	memset(pv, 0, sizeof(pv));
	memset(bv, 0, sizeof(bv));
	tap_ok(rates_proxy(r, RATES_P_requests, 10) == 0, "no sample: rate 0");
	rates_add(r, t, pv, bv, 2);
	tap_ok(rates_proxy(r, RATES_P_requests, 10) == 0, "one sample: rate 0");
	/* 400 s: proxy requests at 50/s, backend 0 at 10/s for the first
	 * 200 s then 30/s, backend 1 errors at 2/s */
	for (int s = 1; s <= 400; s++) {
		t += 1000;
		pv[RATES_P_requests] += 50;
		bv[RATES_B_requests] += s <= 200 ? 10 : 30;
		bv[RATES_NBACKEND + RATES_B_errors] += 2;
		if (s == 395)
			t += 1000;      /* a late tick: the counts took 2 s */
		if (rates_add(r, t, pv, bv, s < 350 ? 2 : 3) < 0)
			tap_ok(0, "rates_add at %d", s);
	}
	tap_ok(near(rates_backend(r, 0, RATES_B_requests, 10), 30.0 * 10 / 11),
	       "10 s across a late tick: 300 counts over 11 s (%.4f)", rates_backend(r, 0, RATES_B_requests, 10));
	tap_ok(near(rates_proxy(r, RATES_P_requests, 300), 50.0 * 300 / 301),
	       "5 min: 15000 counts over 301 s, the ring wrapped (%.4f)", rates_proxy(r, RATES_P_requests, 300));
	tap_ok(near(rates_backend(r, 1, RATES_B_errors, 300), 2.0 * 300 / 301), "backend 1 errors over 5 min");
	tap_ok(near(rates_backend(r, 0, RATES_B_requests, 300), (10.0 * 100 + 30.0 * 200) / 301),
	       "5 min: 100 s at 10/s and 200 s at 30/s over 301 s (%.4f)", rates_backend(r, 0, RATES_B_requests, 300));
	tap_ok(rates_backend(r, 2, RATES_B_requests, 10) == 0, "a backend seen late has no history: 0");
	tap_ok(rates_backend(r, 7, RATES_B_requests, 10) == 0, "an id never sampled: 0");
	tap_is_int(rates_series(r, 0, RATES_B_requests, 5, series), RATES_SECONDS / 5, "series: 60 steps of 5 s");
	tap_ok(near(series[0], 10.0) && near(series[58], 30.0 * 5 / 6) && near(series[59], 30.0),
	       "series: the oldest step at 10/s, the late tick's step, the newest at 30/s (%.3f, %.3f, %.3f)",
	       series[0], series[58], series[59]);
	rates_free(r);

	/* a young ring: the window is what there is */
	r = rates_new();
	memset(pv, 0, sizeof(pv));
	for (int s = 0; s < 4; s++) {
		pv[RATES_P_accepted] = (uint64_t)s * 7;
		rates_add(r, 5000 + s * 1000, pv, bv, 1);
	}
	tap_ok(near(rates_proxy(r, RATES_P_accepted, 300), 7.0), "4 samples: 5 min reads the 3 s there are");
	rates_series(r, 0, RATES_B_requests, 5, series);
	tap_ok(series[0] == 0 && series[58] == 0, "series: steps before the first sample are 0");
	rates_free(r);
	rates_free(NULL);
	return tap_done();
}
