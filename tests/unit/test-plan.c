/*
 * test-plan.c -- plan.c's reload summary (what the log says after SIGHUP)
 * and the bounded-load simulation over a key list.
 */
#include <math.h>
#include <stdlib.h>

#include "conf.h"
#include "plan.h"
#include "ring.h"
#include "tap.h"

static struct conf *load(const char *text)
{
	struct conf_errors errs;
	struct conf *c = conf_load_string("t.ini", text, &errs);

	for (size_t i = 0; i < errs.n; i++)
		tap_diag("%s", errs.msg[i]);
	conf_errors_free(&errs);
	return c;
}

static void summary(const char *a_text, const char *b_text, const char *want_prefix,
		    const char *what, double *moved)
{
	struct conf *a = load(a_text), *b = load(b_text);
	char err[256], out[1024];
	struct ring *ra = plan_ring(a, err, sizeof(err)), *rb = plan_ring(b, err, sizeof(err));

	tap_ok(plan_summary(a, ra, b, rb, out, sizeof(out), moved) == 0, "%s: summary made", what);
	if (!tap_ok(strncmp(out, want_prefix, strlen(want_prefix)) == 0, "%s", what)) {
		tap_diag("got  %s", out);
		tap_diag("want %s...", want_prefix);
	}
	ring_free(ra);
	ring_free(rb);
	conf_free(a);
	conf_free(b);
}

#define B(n, port, extra) "[backend " n "]\nurl = http://127.0.0.1:" port "\n" extra

int main(void)
{
	const char *three = B("c1", "1", "") B("c2", "2", "") B("c3", "3", "");
	double moved = -1;
	char err[256];

	summary(three, B("c1", "1", "") B("c2", "2", "") B("c3", "3", "") B("c4", "4", ""),
		"+c4; ", "an added backend is +NAME", &moved);
	tap_ok(moved > 0.1 && moved < 0.45, "about a quarter of the keys move to a fourth backend (%.3f)", moved);
	{
		struct conf *a = load(three), *b = load(B("c1", "1", "") B("c2", "2", "") B("c3", "3", "") B("c4", "4", ""));
		struct ring *ra = plan_ring(a, err, sizeof(err)), *rb = plan_ring(b, err, sizeof(err));
		char out[1024];
		double share[8];

		plan_summary(a, ra, b, rb, out, sizeof(out), &moved);
		ring_shares(rb, share);
		tap_ok(fabs(moved - share[3]) < 1e-12, "the moved share is exactly the new backend's share");
		tap_ok(strstr(out, "% of keys moved, all to c4") != NULL, "every key moves to it: 'all to c4' (%s)", out);
		ring_free(ra);
		ring_free(rb);
		conf_free(a);
		conf_free(b);
	}
	summary(three, B("c1", "1", "") B("c3", "3", ""), "-c2; ", "a removed backend is -NAME", &moved);
	summary(three, B("c1", "1", "") B("c2", "2", "weight = 2\n") B("c3", "3", ""),
		"~c2 (weight 1 -> 2); ", "a reweighted backend is ~NAME with the weights", &moved);
	summary(three, B("c1", "1", "") B("c2", "9", "") B("c3", "3", ""),
		"@c2 (new url http://127.0.0.1:9); 0.000% of keys moved", "a new url moves no key", &moved);
	tap_ok(moved == 0, "moved share 0 for a new url");
	summary(three, three, "no backend changed; 0.000% of keys moved", "nothing changed", &moved);

	/* bounded-load simulation: no backend over ceil(c * K * w / W) */
	{
		struct conf *c = load(three);
		struct ring *r = plan_ring(c, err, sizeof(err));
		struct plan_keys k;
		uint64_t counts[3], cap = (uint64_t)ceil(1.1 * 30000 / 3.0), total = 0;
		int32_t *owner = malloc(30000 * sizeof(*owner));
		int over = 0;

		k.n = 30000;
		k.pos = malloc(k.n * sizeof(uint64_t));
		/* a third of the keys are one hot key */
		for (size_t i = 0; i < k.n; i++)
			k.pos[i] = i % 3 == 0 ? ring_hash("/hot.jpg", 8) : ring_hash(&i, sizeof(i));
		plan_assign(r, &k, 1.1, owner, counts);
		for (int b = 0; b < 3; b++) {
			over |= counts[b] > cap;
			total += counts[b];
		}
		tap_ok(!over, "bounded simulation: every backend within its cap (%llu)", (unsigned long long)cap);
		tap_ok(total == k.n, "bounded simulation: every key placed");
		plan_assign(r, &k, 0, owner, counts);
		tap_ok(counts[ring_lookup(r, ring_hash("/hot.jpg", 8))] >= 10000,
		       "without a balance factor the hot key's owner takes all of it");
		free(owner);
		free(k.pos);
		ring_free(r);
		conf_free(c);
	}
	return tap_done();
}
