/*
 * rates.c -- a ring of one-a-second samples of the summed counters
 * (rates.h), and the per-second rates read from it: the difference of
 * two samples over the time between them, so a late or missed tick
 * changes nothing but the resolution. Main thread only.
 */
#include "base/rates.h"

#include <stdlib.h>
#include <string.h>

struct rates {
	int64_t t[RATES_SAMPLES];       /* when, monotonic ms */
	uint64_t p[RATES_SAMPLES][RATES_NPROXY];
	uint64_t *b;                    /* [id][sample][counter] */
	size_t nbe;                     /* backend ids with a history */
	unsigned head;                  /* the newest sample */
	unsigned count;                 /* samples so far, up to RATES_SAMPLES */
};

struct rates *rates_new(void)
{
	return calloc(1, sizeof(struct rates));
}

void rates_free(struct rates *r)
{
	if (!r)
		return;
	free(r->b);
	free(r);
}

static uint64_t *rates_be(const struct rates *r, size_t id, unsigned sample)
{
	return r->b + (id * RATES_SAMPLES + sample) * RATES_NBACKEND;
}

int rates_add(struct rates *r, int64_t now_ms, const uint64_t *pv, const uint64_t *bv, size_t nbe)
{
	unsigned head = r->count ? (r->head + 1) % RATES_SAMPLES : 0;

	if (nbe > r->nbe) {
		uint64_t *b = realloc(r->b, nbe * RATES_SAMPLES * RATES_NBACKEND * sizeof(*b));

		if (!b)
			return -1;
		r->b = b;
		/* no history yet: every past sample holds today's values */
		for (size_t id = r->nbe; id < nbe; id++)
			for (unsigned s = 0; s < RATES_SAMPLES; s++)
				memcpy(rates_be(r, id, s), bv + id * RATES_NBACKEND,
				       RATES_NBACKEND * sizeof(*b));
		r->nbe = nbe;
	}
	r->head = head;
	if (r->count < RATES_SAMPLES)
		r->count++;
	r->t[head] = now_ms;
	memcpy(r->p[head], pv, sizeof(r->p[head]));
	for (size_t id = 0; id < nbe; id++)
		memcpy(rates_be(r, id, head), bv + id * RATES_NBACKEND, RATES_NBACKEND * sizeof(*bv));
	return 0;
}

/* The sample age samples before the newest. */
static unsigned rates_at(const struct rates *r, unsigned age)
{
	return (r->head + RATES_SAMPLES - age) % RATES_SAMPLES;
}

/* The rate between the samples aged a0 > a1 of the value v reads. */
static double rates_between(const struct rates *r, unsigned a0, unsigned a1,
			    uint64_t (*v)(const struct rates *, unsigned, size_t, int),
			    size_t id, int counter)
{
	unsigned s0, s1;
	uint64_t v0, v1;
	int64_t dt;

	if (r->count < 2 || a1 >= r->count - 1)
		return 0;
	if (a0 > r->count - 1)
		a0 = r->count - 1;
	s0 = rates_at(r, a0);
	s1 = rates_at(r, a1);
	v0 = v(r, s0, id, counter);
	v1 = v(r, s1, id, counter);
	dt = r->t[s1] - r->t[s0];
	if (dt <= 0 || v1 < v0)
		return 0;
	return (double)(v1 - v0) * 1000.0 / (double)dt;
}

static uint64_t rates_pv(const struct rates *r, unsigned s, size_t id, int counter)
{
	(void)id;
	return r->p[s][counter];
}

static uint64_t rates_bv(const struct rates *r, unsigned s, size_t id, int counter)
{
	return rates_be(r, id, s)[counter];
}

double rates_proxy(const struct rates *r, int counter, int seconds)
{
	return rates_between(r, (unsigned)seconds, 0, rates_pv, 0, counter);
}

double rates_backend(const struct rates *r, size_t id, int counter, int seconds)
{
	if (id >= r->nbe)
		return 0;
	return rates_between(r, (unsigned)seconds, 0, rates_bv, id, counter);
}

size_t rates_series(const struct rates *r, size_t id, int counter, int step, double *out)
{
	size_t n = RATES_SECONDS / (size_t)step;

	for (size_t j = 0; j < n; j++) {
		unsigned a1 = (unsigned)((n - 1 - j) * (size_t)step);

		out[j] = id < r->nbe ? rates_between(r, a1 + (unsigned)step, a1, rates_bv, id, counter) : 0;
	}
	return n;
}
