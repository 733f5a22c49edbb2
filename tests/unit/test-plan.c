/*
 * test-plan.c -- plan.c's reload summary (what the log says after SIGHUP),
 * the bounded-load simulation over a key list, key files with counts and
 * the expected misses of `plan --ramp`.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/conf.h"
#include "admin/plan.h"
#include "ring/ring.h"
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


/* Key lines with counts: "KEY COUNT" (space or tab), else count 1 and the
 * line as written; each key hashed without its count. */
static void test_key_counts(void)
{
	static const struct { const char *key; uint64_t count; } want[] = {
		{ "/a.jpg", 7 }, { "/b.jpg", 1 }, { "/c d.jpg", 12 }, { "/e 9x", 1 }, { "123", 1 },
		{ "/f.jpg", 3 }, { "/g.jpg", 0 }, { "/h.jpg 12345678901234567890", 1 },
	};
	const char *text = "/a.jpg 7\n/b.jpg\n/c d.jpg\t12\n/e 9x\n123\n/f.jpg  3\r\n/g.jpg 0\n"
			   "/h.jpg 12345678901234567890\n";
	char path[] = "/tmp/rp-test-plan-XXXXXX", err[256];
	struct plan_keys k;
	int fd = mkstemp(path), ok = 1;

	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
		tap_ok(0, "key file written");
		return;
	}
	close(fd);
	if (!tap_ok(plan_keys_read(&k, path, RING_SCHEME_RINGPROXY, PLAN_RAW, NULL, RING_SCHEME_RINGPROXY, PLAN_RAW, NULL, 0, 0, err, sizeof(err)) == 0 && k.n == 8, "key file with counts read"))
		goto out;
	for (size_t i = 0; i < 8; i++) {
		uint64_t u, pos = ring_hash2(want[i].key, strlen(want[i].key), &u);

		if (k.pos[i] != pos || k.u[i] != u || k.count[i] != want[i].count) {
			tap_diag("  line %zu: want '%s' x %llu", i + 1, want[i].key, (unsigned long long)want[i].count);
			ok = 0;
		}
	}
	tap_ok(ok, "each line's key hashed without its count; no count (or not one) = the whole line, 1");
	plan_keys_free(&k);
out:
	unlink(path);
}

/* plan_miss_curve against the Poisson model worked by hand, and a
 * ramp's curve for hot keys: flat at n / window while it runs. */
static void test_miss_curve(void)
{
	uint64_t count[3] = { 60, 60, 0 }, at[3] = { 0, 90000, 0 };
	double rows[4], later, total, sum = 0;
	uint64_t *hc = malloc(6000 * sizeof(*hc)), *ha = malloc(6000 * sizeof(*ha));
	double hot[8];
	int flat = 1;

	/* 60 requests an hour: one a minute */
	plan_miss_curve(count, NULL, 1, 3600000, 4, rows, &later, &total);
	tap_ok(fabs(rows[0] - (1 - exp(-1))) < 1e-12 && fabs(rows[1] - (exp(-1) - exp(-2))) < 1e-12 &&
	       total == 1 && fabs(rows[0] + rows[1] + rows[2] + rows[3] + later - 1) < 1e-12,
	       "miss curve: a key requested once a minute misses in minute 1 with 1 - e^-1, then e^-1 - e^-2");
	plan_miss_curve(count + 1, at + 1, 2, 3600000, 4, rows, &later, &total);
	tap_ok(rows[0] == 0 && fabs(rows[1] - (1 - exp(-0.5))) < 1e-12 && total == 1,
	       "miss curve: switching at 90 s, nothing in minute 1, 1 - e^-0.5 in minute 2; a key never "
	       "requested never misses");
	if (!hc || !ha) {
		tap_ok(0, "memory");
		goto out;
	}
	for (int i = 0; i < 6000; i++) {
		hc[i] = 360000;                         /* 100 a second */
		ha[i] = (uint64_t)i * 300000 / 6000;    /* over 5 minutes */
	}
	plan_miss_curve(hc, ha, 6000, 3600000, 8, hot, &later, &total);
	for (int m = 0; m < 8; m++) {
		sum += hot[m];
		flat &= m < 5 ? fabs(hot[m] - 1200) < 1 : hot[m] < 0.01;
	}
	tap_ok(flat && fabs(sum + later - 6000) < 1e-6 && total == 6000,
	       "miss curve: 6000 hot keys over a 5-minute ramp: 1200 a minute for 5 minutes, then (almost) none");
out:
	free(hc);
	free(ha);
}

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
	test_key_counts();
	test_miss_curve();
	return tap_done();
}
