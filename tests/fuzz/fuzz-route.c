/*
 * fuzz-route.c -- libFuzzer target from bytes to the forwarding decision,
 * the road a request takes before any socket: head parse (http1.c) ->
 * routing key (key_parts) -> position (key_pos) -> ring walk with
 * eligibility (balance_next) over a fixed snapshot of four backends built
 * once in-process. A codec fuzzer cannot see a key built wrong or a walk
 * that picks the wrong backend; this one checks each step against a plain
 * model of it:
 *
 *   - the key's pieces join to the key ringproxy(7) defines for the mode,
 *     built here the slow way (split, sort, join), and its position is MD5
 *     of that whole key, however long;
 *   - each pick of the walk (the first and the retries after it) is the
 *     first backend along ring_walk's distinct order whose verdict is OK,
 *     else the first one only over its bounded cap, else none; the owner
 *     is the ring's owner of the position.
 *
 * Input: byte 0 picks the [ring] key mode (low 2 bits) and which backends
 * are down (bits 2-5); byte 1 their requests in flight (2 bits each); the
 * rest is the request head, copied to an exactly sized malloc so ASan
 * catches any read past it.
 */
#include "backend/balance.h"
#include "config/conf.h"
#include "path/key.h"
#include "http/http1.h"
#include "backend/registry.h"
#include "ring/ring.h"
#include "backend/snapshot.h"

#include <stdlib.h>
#include <string.h>

#define FUZZ_NB 4
#define FUZZ_MAXH 64

/* A broken promise: crash so libFuzzer keeps the input. */
#define FUZZ_CHECK(cond) do { if (!(cond)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Four caches, bounded loads on, the last with a hard cap of 2; active
 * checks configured so that a down backend is never let through for a
 * passive trial (the verdicts stay a function of the state set here). */
static const char fuzz_conf[] =
	"[ring]\nvnodes = 40\nbalance_factor = 1.25\n"
	"[health]\npath = /h\n"
	"[backend c0]\nurl = http://127.0.0.1:9\n"
	"[backend c1]\nurl = http://127.0.0.1:9\nweight = 2\n"
	"[backend c2]\nurl = http://127.0.0.1:9\n"
	"[backend c3]\nurl = http://127.0.0.1:9\nmax_inflight = 2\n";

static struct snapshot *fuzz_snap(void)
{
	static struct snapshot *s;
	struct conf_errors errs = { 0 };
	struct conf *c;
	char err[256];

	if (s)
		return s;
	c = conf_load_string("fuzz.ini", fuzz_conf, &errs);
	conf_errors_free(&errs);
	FUZZ_CHECK(c != NULL);
	s = snapshot_new(c, 1, err, sizeof(err));
	FUZZ_CHECK(s != NULL && s->nbe == FUZZ_NB);
	return s;
}

struct fuzz_buf {
	char *p;
	size_t len, cap;
};

static void fuzz_put(struct fuzz_buf *b, const void *p, size_t n)
{
	if (b->len + n > b->cap) {
		b->cap = (b->len + n) * 2 + 16;
		b->p = realloc(b->p, b->cap);
	}
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
}

static int fuzz_param_cmp(const void *x, const void *y)
{
	const struct http1_str *a = x, *b = y;
	int r = memcmp(a->p, b->p, a->len < b->len ? a->len : b->len);

	return r ? r : (a->len > b->len) - (a->len < b->len);
}

/* The key as ringproxy(7) defines it, built the slow way. */
static void fuzz_model_key(int mode, const struct http1_msg *m, struct fuzz_buf *out)
{
	struct http1_str *params;
	size_t np = 0;
	const char *p, *e;

	fuzz_put(out, m->path.p, m->path.len);
	if (mode == CONF_KEY_PATH || !m->has_query)
		return;
	p = m->query.p;
	e = p + m->query.len;
	if (mode == CONF_KEY_PATH_QUERY) {
		fuzz_put(out, "?", 1);
		fuzz_put(out, m->query.p, m->query.len);
		return;
	}
	params = malloc((m->query.len / 2 + 1) * sizeof(*params));
	while (p <= e) {
		const char *amp = memchr(p, '&', (size_t)(e - p));
		const char *end = amp ? amp : e;

		if (end > p) {
			params[np].p = p;
			params[np].len = (size_t)(end - p);
			np++;
		}
		p = end + 1;
	}
	if (np > KEY_MAX_PARAMS) {            /* too many: as sent */
		fuzz_put(out, "?", 1);
		fuzz_put(out, m->query.p, m->query.len);
	} else if (np > 0) {
		qsort(params, np, sizeof(*params), fuzz_param_cmp);
		for (size_t i = 0; i < np; i++) {
			fuzz_put(out, i ? "&" : "?", 1);
			fuzz_put(out, params[i].p, params[i].len);
		}
	}
	free(params);
}

static void fuzz_key(int mode, const struct http1_msg *m)
{
	struct iovec v[KEY_PARTS];
	struct fuzz_buf got = { 0 }, want = { 0 };
	size_t n = key_parts(mode, m, v);

	FUZZ_CHECK(n >= 1 && n <= KEY_PARTS);
	for (size_t i = 0; i < n; i++)
		fuzz_put(&got, v[i].iov_base, v[i].iov_len);
	fuzz_model_key(mode, m, &want);
	FUZZ_CHECK(got.len == want.len && (got.len == 0 || memcmp(got.p, want.p, got.len) == 0));
	FUZZ_CHECK(key_pos(RING_SCHEME_RINGPROXY, mode, m, NULL) == ring_hash(want.p, want.len));
	free(got.p);
	free(want.p);
}

/* The walk from pos, pick after pick (a request and its retries), each
 * against the model; slots are given back as a failed try does. */
static void fuzz_walk(const struct snapshot *s, uint64_t pos)
{
	struct ring_walk w, mw;
	struct balance_pick pick = { .backend = -1, .owner = -1 };
	int order[FUZZ_NB], n = 0, k = 0, i;

	ring_walk_init(&mw, s->ring, pos);
	while ((i = ring_walk_next(&mw)) >= 0)
		order[n++] = i;
	FUZZ_CHECK(n == FUZZ_NB);
	FUZZ_CHECK(order[0] == ring_lookup(s->ring, pos));
	ring_walk_init(&w, s->ring, pos);
	for (int tries = 0; tries < FUZZ_NB + 1; tries++) {
		int want = -1, soft = -1, j;

		for (j = k; j < n && want < 0; j++) {
			enum balance_verdict v = balance_check(s, order[j], pos);

			if (v == BALANCE_OK)
				want = order[j];
			else if (soft < 0 && (v == BALANCE_BOUNDED || v == BALANCE_RAMPING))
				soft = order[j];
		}
		k = want >= 0 ? j : n;
		if (want < 0)
			want = soft;
		balance_next(s, &w, pos, &pick);
		FUZZ_CHECK(pick.backend == want);
		if (tries == 0)
			FUZZ_CHECK(pick.owner == order[0]);
		if (pick.backend < 0)
			break;
		balance_release(s->be[pick.backend].state);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct http1_limits lim = { 1u << 20, FUZZ_MAXH };
	struct snapshot *s = fuzz_snap();
	struct http1_header h[FUZZ_MAXH];
	struct http1_msg m;
	long total = 0;
	int mode;
	char *buf;
	ssize_t r;

	if (size < 2)
		return 0;
	mode = data[0] & 3;
	if (mode > CONF_KEY_PATH_SORTED_QUERY)
		mode = CONF_KEY_PATH_QUERY;
	for (int i = 0; i < FUZZ_NB; i++) {
		long inflight = (data[1] >> (2 * i)) & 3;

		atomic_store(&s->be[i].state->down, (data[0] >> (2 + i)) & 1);
		atomic_store(&s->be[i].state->inflight, inflight);
		total += inflight;
	}
	atomic_store(&registry_total_inflight, total);
	atomic_fetch_add(&registry_health_gen, 1);

	buf = malloc(size - 2 ? size - 2 : 1);
	memcpy(buf, data + 2, size - 2);
	http1_msg_init(&m);
	r = http1_parse_request(&m, h, buf, size - 2, &lim);
	if (r > 0) {
		fuzz_key(mode, &m);
		fuzz_walk(s, key_pos(RING_SCHEME_RINGPROXY, mode, &m, NULL));
	}
	free(buf);
	return 0;
}
