/*
 * plan.c -- `ringproxy plan OLD.ini [NEW.ini] [--keys FILE]
 * [--balance-factor C] [--json] [--probe]`.
 *
 * Shares are exact (sums of ring arcs, ring_shares/ring_diff), not samples.
 * With --keys, each key is hashed once and assigned on each ring, so counts
 * and movement are what the proxy would do with that key list. The check
 * that no key moves between two backends both files keep unchanged is the
 * consistent-hashing promise (Karger et al. 1997); plan exits 3 if the ring
 * ever breaks it.
 */
#include "admin/plan.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admin/explain.h"
#include "backend/health.h"
#include "base/md5.h"

/* A key's moment in a ramp's window is u * span / 2^64, in 128 bits. */
__extension__ typedef unsigned __int128 plan_u128;

struct ring *plan_ring(const struct conf *c, char *err, size_t errlen)
{
	struct ring_member *m = calloc(c->nbackends ? c->nbackends : 1, sizeof(*m));
	struct ring *r;

	if (!m) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	for (size_t i = 0; i < c->nbackends; i++) {
		m[i].name = c->backends[i].name;
		m[i].weight = c->backends[i].weight;
		m[i].id = *c->backends[i].id ? c->backends[i].id : NULL;
	}
	r = ring_build(m, c->nbackends, (enum ring_scheme)c->scheme, c->vnodes, err, errlen);
	free(m);
	return r;
}

/* Split a key line of len bytes into the key and its count: a trailing
 * space or tab then 1 to 19 digits is a count (a request target holds no
 * whitespace, so no key ends that way); else the whole line, count 1. */
static size_t plan_key_count(const char *line, size_t len, uint64_t *count)
{
	size_t d = len, k;

	*count = 1;
	while (d > 0 && line[d - 1] >= '0' && line[d - 1] <= '9')
		d--;
	if (d == len || len - d > 19 || d == 0 || (line[d - 1] != ' ' && line[d - 1] != '\t'))
		return len;
	*count = 0;
	for (size_t i = d; i < len; i++)
		*count = *count * 10 + (uint64_t)(line[i] - '0');
	k = d;
	while (k > 0 && (line[k - 1] == ' ' || line[k - 1] == '\t'))
		k--;
	return k;
}

/* The position of line[0..n) under scheme and mode, in *pos: 1, 0 to skip
 * it (an empty line under a key mode), or -1 with err (not a request
 * target). */
static int plan_key_pos(struct explain_target *t, int scheme, int mode, const struct query_rules *q,
			const char *line, size_t n, uint64_t *pos, uint64_t *u, char *err, size_t errlen)
{
	if (mode == PLAN_RAW) {
		struct iovec v = { (void *)(uintptr_t)line, n };

		*pos = ring_key_pos((enum ring_scheme)scheme, &v, 1, u);
		return 1;
	}
	if (n == 0)
		return 0;
	if (explain_target_parse(t, scheme, mode, q, line, n, NULL, err, errlen) < 0)
		return -1;
	*pos = t->pos;
	*u = t->u;
	return 1;
}

/* Whether rules a and b (NULL: as sent) key every query alike. */
static bool plan_query_same(const struct query_rules *a, const struct query_rules *b)
{
	static const struct query_rules as_sent = { .mode = QUERY_AS_IS };

	return query_rules_same(a ? a : &as_sent, b ? b : &as_sent);
}

/* Room for one more key (and its line, n bytes, when kept). */
static int plan_keys_grow(struct plan_keys *k, size_t *alloc, size_t *text_alloc, int keep, size_t n)
{
	if (k->n == *alloc) {
		size_t na = *alloc ? *alloc * 2 : 65536;
		uint64_t *p = realloc(k->pos, na * sizeof(*p));

		if (!p)
			return -1;
		k->pos = p;
		if (!(p = realloc(k->u, na * sizeof(*p))))
			return -1;
		k->u = p;
		if (!(p = realloc(k->count, na * sizeof(*p))))
			return -1;
		k->count = p;
		if (k->pos2 || keep) {
			uint64_t *p2 = k->pos2 ? realloc(k->pos2, na * sizeof(*p2)) : NULL;
			size_t *o = keep ? realloc(k->off, na * sizeof(*o)) : NULL;

			if ((k->pos2 && !p2) || (keep && !o))
				return -1;
			if (k->pos2)
				k->pos2 = p2;
			if (keep)
				k->off = o;
		}
		*alloc = na;
	}
	if (keep && k->lines_len + n + 1 > *text_alloc) {
		size_t na = *text_alloc ? *text_alloc : 1 << 20;
		char *t;

		while (k->lines_len + n + 1 > na)
			na *= 2;
		t = realloc(k->lines, na);
		if (!t)
			return -1;
		k->lines = t;
		*text_alloc = na;
	}
	return 0;
}

int plan_keys_read(struct plan_keys *k, const char *path, int scheme1, int mode1, const struct query_rules *q1,
		   int scheme2, int mode2, const struct query_rules *q2, int keep, int progress, char *err,
		   size_t errlen)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
	struct explain_target t = { 0 };
	char *line = NULL, why[256];
	size_t cap = 0, alloc = 0, text_alloc = 0, lineno = 0;
	ssize_t n;
	int rc = -1;

	memset(k, 0, sizeof(*k));
	if (!f) {
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return -1;
	}
	/* ring_hash cannot say why it failed: make its state here */
	if (md5_thread_init(err, errlen) < 0)
		goto fail;
	/* a first element, so that pos2 is grown with pos from then on */
	if ((mode2 != mode1 || scheme2 != scheme1 || (mode1 != PLAN_RAW && !plan_query_same(q1, q2))) &&
	    !(k->pos2 = malloc(sizeof(*k->pos2)))) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	while ((n = getline(&line, &cap, f)) >= 0) {
		uint64_t p1, p2 = 0, u = 0, cnt = 1;
		size_t len;
		int r;

		lineno++;

		if (n > 0 && line[n - 1] == '\n')
			n--;
		if (n > 0 && line[n - 1] == '\r')
			n--;
		len = plan_key_count(line, (size_t)n, &cnt);
		r = plan_key_pos(&t, scheme1, mode1, q1, line, len, &p1, &u, why, sizeof(why));
		if (r > 0 && k->pos2)
			r = plan_key_pos(&t, scheme2, mode2, q2, line, len, &p2, &u, why, sizeof(why));
		if (r < 0) {
			snprintf(err, errlen, "%s:%zu: '%.*s' is %s; keys are request targets keyed by [ring] key, "
				 "or give --raw-keys to hash lines as written", path, lineno, n > 80 ? 80 : (int)n, line, why);
			goto fail;
		}
		if (r == 0)
			continue;
		if (plan_keys_grow(k, &alloc, &text_alloc, keep, (size_t)n) < 0) {
			snprintf(err, errlen, "%s: out of memory after %zu keys", path, k->n);
			goto fail;
		}
		/* the key as written, without its count: --per-key prints
		 * the key in a column of its own */
		if (keep) {
			k->off[k->n] = k->lines_len;
			memcpy(k->lines + k->lines_len, line, len);
			k->lines[k->lines_len + len] = '\0';
			k->lines_len += len + 1;
		}
		if (k->pos2)
			k->pos2[k->n] = p2;
		k->u[k->n] = u;
		k->count[k->n] = cnt;
		k->pos[k->n++] = p1;
		if (progress && k->n % 1000000 == 0)
			fprintf(stderr, "\rhashed %zu keys", k->n);
	}
	if (ferror(f)) {
		snprintf(err, errlen, "%s: read error: %s", path, strerror(errno));
		goto fail;
	}
	if (progress && k->n >= 1000000)
		fprintf(stderr, "\rhashed %zu keys\n", k->n);
	rc = 0;
fail:
	free(line);
	explain_target_free(&t);
	if (f != stdin)
		fclose(f);
	if (rc < 0)
		plan_keys_free(k);
	return rc;
}

void plan_keys_free(struct plan_keys *k)
{
	free(k->pos);
	free(k->pos2);
	free(k->lines);
	free(k->off);
	free(k->u);
	free(k->count);
	memset(k, 0, sizeof(*k));
}

void plan_miss_curve(const uint64_t *count, const uint64_t *at_ms, size_t n, uint64_t period_ms,
		     size_t minutes, double *rows, double *later, double *total)
{
	*later = *total = 0;
	memset(rows, 0, minutes * sizeof(*rows));
	for (size_t i = 0; i < n; i++) {
		/* requests per minute, and the switch in minutes */
		double rate = (double)count[i] * 60000.0 / (double)period_ms;
		double at = at_ms ? (double)at_ms[i] / 60000.0 : 0;
		double seen = 0;        /* P(first request after `at` is before m) */

		if (count[i] == 0)
			continue;
		for (size_t m = (size_t)at; m < minutes; m++) {
			double upto = -expm1(-rate * ((double)(m + 1) - at));

			rows[m] += upto - seen;
			seen = upto;
		}
		*later += 1 - seen;
		*total += 1;
	}
}

void plan_assign(const struct ring *r, const struct plan_keys *k, double c,
		 int32_t *out, uint64_t *counts)
{
	uint64_t *cap = NULL;
	double wsum = 0;

	memset(counts, 0, r->nbackends * sizeof(*counts));
	if (c > 0) {
		cap = calloc(r->nbackends ? r->nbackends : 1, sizeof(*cap));
		for (size_t b = 0; b < r->nbackends; b++)
			if (r->npoints_of[b])
				wsum += r->weights[b];
		for (size_t b = 0; cap && b < r->nbackends; b++)
			cap[b] = r->npoints_of[b] ?
				(uint64_t)ceil(c * (double)k->n * r->weights[b] / wsum) : 0;
	}
	for (size_t i = 0; i < k->n; i++) {
		int b;

		if (!cap) {
			b = ring_lookup(r, k->pos[i]);
		} else {
			struct ring_walk w;
			int first;

			ring_walk_init(&w, r, k->pos[i]);
			first = b = ring_walk_next(&w);
			while (b >= 0 && counts[b] >= cap[b])
				b = ring_walk_next(&w);
			/* c >= 1 always leaves room somewhere; a smaller c
			 * may not, and then the owner takes the key */
			if (b < 0)
				b = first;
		}
		out[i] = b;
		if (b >= 0)
			counts[b]++;
	}
	free(cap);
}

/* ---- output ----------------------------------------------------------- */

/* Names are restricted to [A-Za-z0-9._-] by conf.c; escape anyway. */
static void plan_json_str(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(out, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(out, "\\u%04x", *s);
		else
			fputc(*s, out);
	}
	fputc('"', out);
}

struct plan_side {
	const char *path;
	struct conf *conf;
	struct ring *ring;
	double *share;
	double *replica;        /* [ring] replicas > 1: each backend's share
				   of keys as a replica (ring_list_shares) */
	uint64_t *counts;       /* with keys */
	int32_t *owner;         /* with keys: backend per key */
};

static void plan_side_free(struct plan_side *s)
{
	conf_free(s->conf);
	ring_free(s->ring);
	free(s->share);
	free(s->replica);
	free(s->counts);
	free(s->owner);
}

/* Load the config of a side. 0, or -1 with err (its errors printed). */
static int plan_side_conf(struct plan_side *s, const char *path, char *err, size_t errlen)
{
	struct conf_errors errs;

	memset(s, 0, sizeof(*s));
	s->path = path;
	s->conf = conf_load(path, &errs);
	if (!s->conf) {
		size_t n = errs.n;

		for (size_t i = 0; i < n; i++)
			fprintf(stderr, "%s\n", errs.msg[i]);
		conf_errors_free(&errs);
		snprintf(err, errlen, "%s: %zu error%s; nothing planned", path, n, n == 1 ? "" : "s");
		return -1;
	}
	conf_errors_free(&errs);
	return 0;
}

/* Build a side's ring, its shares and, with keys, each key's backend. */
static int plan_side_ring(struct plan_side *s, const struct plan_keys *keys, double bf,
			  char *err, size_t errlen)
{
	s->ring = plan_ring(s->conf, err, errlen);
	if (!s->ring)
		return -1;
	s->share = calloc(s->ring->nbackends + 1, sizeof(double));
	s->counts = calloc(s->ring->nbackends + 1, sizeof(uint64_t));
	if (!s->share || !s->counts) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	ring_shares(s->ring, s->share);
	if (s->conf->replicas > 1 &&
	    ((s->replica = calloc(s->ring->nbackends + 1, sizeof(double))) == NULL ||
	     ring_list_shares(s->ring, s->conf->replicas, s->share, s->replica) < 0)) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (keys) {
		s->owner = malloc((keys->n ? keys->n : 1) * sizeof(int32_t));
		if (!s->owner) {
			snprintf(err, errlen, "out of memory for %zu keys", keys->n);
			return -1;
		}
		plan_assign(s->ring, keys, bf, s->owner, s->counts);
	}
	return 0;
}

static void plan_json_backends(FILE *out, const struct plan_side *s, int with_keys)
{
	fputc('[', out);
	for (size_t b = 0; b < s->ring->nbackends; b++) {
		fprintf(out, "%s{\"name\": ", b ? ", " : "");
		plan_json_str(out, s->ring->names[b]);
		fprintf(out, ", \"weight\": %.17g, \"points\": %u, \"share\": %.17g",
			s->ring->weights[b], s->ring->npoints_of[b], s->share[b]);
		if (s->replica)
			fprintf(out, ", \"replica_share\": %.17g", s->replica[b]);
		if (with_keys)
			fprintf(out, ", \"keys\": %llu", (unsigned long long)s->counts[b]);
		fputc('}', out);
	}
	fputc(']', out);
}

/* A ring's scheme as the config says it: ketama's two key hashes are
 * two rings of one scheme, so a move between them names the key_hash. */
static const char *plan_scheme_name(enum ring_scheme s)
{
	return s == RING_SCHEME_KETAMA_FNV1A64 ? "ketama (key_hash fnv1a_64)" : ring_scheme_name(s);
}

static void plan_text_backends(FILE *out, const struct plan_side *s,
			       const struct plan_keys *keys)
{
	size_t wname = 7;

	for (size_t b = 0; b < s->ring->nbackends; b++)
		if (strlen(s->ring->names[b]) > wname)
			wname = strlen(s->ring->names[b]);
	if (s->ring->scheme == RING_SCHEME_RINGPROXY)
		fprintf(out, "%s: %zu backend%s, %zu points, vnodes %u\n\n", s->path,
			s->ring->nbackends, s->ring->nbackends == 1 ? "" : "s", s->ring->npoints, s->ring->vnodes);
	else
		fprintf(out, "%s: %zu backend%s, %zu points, scheme %s\n\n", s->path,
			s->ring->nbackends, s->ring->nbackends == 1 ? "" : "s", s->ring->npoints,
			plan_scheme_name(s->ring->scheme));
	if (s->replica)
		fprintf(out, "  replicas %u: each key on the first %u distinct backends of its walk; share is\n"
			"  the keyspace a backend heads the list of (primary), replica where it follows\n\n",
			s->conf->replicas, s->conf->replicas);
	fprintf(out, "  %-*s  %8s  %7s  %8s", (int)wname, "backend", "weight", "points", "share");
	if (s->replica)
		fprintf(out, "  %8s", "replica");
	if (keys)
		fprintf(out, "  %10s  %8s", "keys", "of keys");
	fputc('\n', out);
	for (size_t b = 0; b < s->ring->nbackends; b++) {
		fprintf(out, "  %-*s  %8.3g  %7u  %7.3f%%", (int)wname, s->ring->names[b],
			s->ring->weights[b], s->ring->npoints_of[b], 100.0 * s->share[b]);
		if (s->replica)
			fprintf(out, "  %7.3f%%", 100.0 * s->replica[b]);
		if (keys)
			fprintf(out, "  %10llu  %7.3f%%", (unsigned long long)s->counts[b],
				keys->n ? 100.0 * (double)s->counts[b] / (double)keys->n : 0.0);
		fputc('\n', out);
	}
}

/* Flows counted over the key list: (from, to) -> keys. */
struct plan_kflow {
	int32_t from, to;
	uint64_t keys;
	const char *from_name, *to_name;  /* "" for no backend */
	bool in_ring;                   /* also a flow of the ring diff; else
					   moved by the bounded-load caps */
};

static int plan_kflow_cmp(const void *a, const void *b)
{
	const struct plan_kflow *x = a, *y = b;

	if (x->from != y->from)
		return x->from < y->from ? -1 : 1;
	return x->to < y->to ? -1 : x->to > y->to;
}

/* The name of backend i of a side, "" for none. */
static const char *plan_name(const struct plan_side *s, int32_t i)
{
	return i >= 0 ? s->ring->names[i] : "";
}

/* Is (from, to) one of the ring's flows? */
static bool plan_ring_flow(const struct ring_diff *d, const char *from, const char *to)
{
	for (size_t i = 0; i < d->nflows; i++)
		if (strcmp(d->flows[i].from, from) == 0 && strcmp(d->flows[i].to, to) == 0)
			return true;
	return false;
}

/* Count keys per (from, to) pair where the owner changed. Returns the
 * number of distinct pairs in *flows (caller frees), -1 on no memory. */
static long plan_key_flows(const struct plan_side *a, const struct plan_side *b,
			   const struct ring_diff *d, const struct plan_keys *keys,
			   struct plan_kflow **flows, uint64_t *moved)
{
	struct plan_kflow *f;
	size_t n = 0, out = 0;

	*moved = 0;
	f = malloc((keys->n ? keys->n : 1) * sizeof(*f));
	if (!f)
		return -1;
	for (size_t i = 0; i < keys->n; i++) {
		if (strcmp(plan_name(a, a->owner[i]), plan_name(b, b->owner[i])) == 0)
			continue;
		f[n].from = a->owner[i];
		f[n].to = b->owner[i];
		f[n].keys = 1;
		n++;
	}
	*moved = n;
	qsort(f, n, sizeof(*f), plan_kflow_cmp);
	for (size_t i = 0; i < n; i++) {
		if (out && f[out - 1].from == f[i].from && f[out - 1].to == f[i].to)
			f[out - 1].keys++;
		else
			f[out++] = f[i];
	}
	for (size_t i = 0; i < out; i++) {
		f[i].from_name = plan_name(a, f[i].from);
		f[i].to_name = plan_name(b, f[i].to);
		f[i].in_ring = plan_ring_flow(d, f[i].from_name, f[i].to_name);
	}
	*flows = f;
	return (long)out;
}

static uint64_t plan_flow_keys(const struct plan_kflow *f, long nf, const char *from, const char *to)
{
	for (long i = 0; i < nf; i++)
		if (strcmp(f[i].from_name, from) == 0 && strcmp(f[i].to_name, to) == 0)
			return f[i].keys;
	return 0;
}

/* How a backend differs between the files. */
enum plan_change { PLAN_SAME, PLAN_ADDED, PLAN_REMOVED, PLAN_REWEIGHTED, PLAN_READDRESSED };

static enum plan_change plan_change_of(const struct plan_side *a, const struct plan_side *b,
				       const char *name)
{
	const struct conf_backend *x = conf_backend_find(a->conf, name);
	const struct conf_backend *y = conf_backend_find(b->conf, name);

	if (!x)
		return PLAN_ADDED;
	if (!y)
		return PLAN_REMOVED;
	/* what places its keys: the weight, and the scheme with what it
	 * counts (vnodes) and hashes (a compat scheme's id) */
	if (x->weight != y->weight || a->conf->scheme != b->conf->scheme ||
	    (b->conf->scheme == RING_SCHEME_RINGPROXY ? a->conf->vnodes != b->conf->vnodes :
	     strcmp(x->id, y->id) != 0))
		return PLAN_REWEIGHTED;
	if (strcmp(x->url, y->url) != 0)
		return PLAN_READDRESSED;
	return PLAN_SAME;
}

/* The promise of consistent hashing: keys move only to added or
 * reweighted backends, or from removed or reweighted ones. Returns the
 * number of flows breaking it (each printed to stderr). */
static int plan_check_flows(const struct plan_side *a, const struct plan_side *b,
			    const struct ring_diff *d)
{
	int bad = 0;

	for (size_t i = 0; i < d->nflows; i++) {
		enum plan_change cf = *d->flows[i].from ? plan_change_of(a, b, d->flows[i].from) : PLAN_ADDED;
		enum plan_change ct = *d->flows[i].to ? plan_change_of(a, b, d->flows[i].to) : PLAN_REMOVED;

		if ((cf == PLAN_SAME || cf == PLAN_READDRESSED) &&
		    (ct == PLAN_SAME || ct == PLAN_READDRESSED)) {
			fprintf(stderr, "ringproxy plan: BUG: %.6f%% of keys move from %s to %s, "
				"though neither changed\n", 100.0 * d->flows[i].share,
				d->flows[i].from, d->flows[i].to);
			bad++;
		}
	}
	return bad;
}

static void plan_list_json(FILE *out, const struct plan_side *a, const struct plan_side *b,
			   enum plan_change want)
{
	int first = 1;
	const struct plan_side *s = want == PLAN_REMOVED ? a : b;

	fputc('[', out);
	for (size_t i = 0; i < s->ring->nbackends; i++) {
		enum plan_change ch = plan_change_of(a, b, s->ring->names[i]);

		if (ch == want || (want == PLAN_REWEIGHTED && ch == PLAN_READDRESSED)) {
			if (!first)
				fputs(", ", out);
			plan_json_str(out, s->ring->names[i]);
			first = 0;
		}
	}
	fputc(']', out);
}

static void plan_list_text(FILE *out, const struct plan_side *a, const struct plan_side *b,
			   enum plan_change want, const char *label)
{
	int first = 1;
	const struct plan_side *s = want == PLAN_REMOVED ? a : b;

	fprintf(out, "  %-9s", label);
	for (size_t i = 0; i < s->ring->nbackends; i++) {
		const char *name = s->ring->names[i];
		enum plan_change ch = plan_change_of(a, b, name);

		if (ch != want && !(want == PLAN_REWEIGHTED && ch == PLAN_READDRESSED))
			continue;
		fprintf(out, "%s%s", first ? "" : ", ", name);
		if (ch == PLAN_REWEIGHTED) {
			const struct conf_backend *x = conf_backend_find(a->conf, name);
			const struct conf_backend *y = conf_backend_find(b->conf, name);

			if (x->weight != y->weight)
				fprintf(out, " (weight %g -> %g)", x->weight, y->weight);
			else if (a->conf->scheme == b->conf->scheme && b->conf->scheme != RING_SCHEME_RINGPROXY)
				fprintf(out, " (id %s -> %s)", x->id, y->id);
			else if (a->conf->scheme == b->conf->scheme)
				fprintf(out, " (vnodes %u -> %u)", a->conf->vnodes, b->conf->vnodes);
		} else if (ch == PLAN_READDRESSED) {
			fprintf(out, " (url %s -> %s; no key moves)",
				conf_backend_find(a->conf, name)->url,
				conf_backend_find(b->conf, name)->url);
		}
		first = 0;
	}
	fprintf(out, "%s\n", first ? "(none)" : "");
}

/* A backend of a that b no longer has, under another name that b adds
 * with the same url: a rename (NULL when added is not one). Under the
 * fixed scheme the name is the identity, so all of the old name's keys
 * move; and the ramp holds a key on its previous owner only when NEW.ini
 * still has it, so they move at once. */
static const struct conf_backend *plan_renamed_from(const struct plan_side *a, const struct plan_side *b,
						      const char *added)
{
	const struct conf_backend *y = conf_backend_find(b->conf, added);

	if (!y || conf_backend_find(a->conf, added))
		return NULL;
	for (size_t i = 0; i < a->conf->nbackends; i++) {
		const struct conf_backend *x = &a->conf->backends[i];

		if (strcmp(x->url, y->url) == 0 && !conf_backend_find(b->conf, x->name))
			return x;
	}
	return NULL;
}

/* "renamed:" lines of the text comparison, one a rename. */
static void plan_renames_text(FILE *out, const struct plan_side *a, const struct plan_side *b)
{
	for (size_t i = 0; i < b->conf->nbackends; i++) {
		const char *name = b->conf->backends[i].name;
		const struct conf_backend *x = plan_renamed_from(a, b, name);

		if (x)
			fprintf(out, "  %-9s%s -> %s (url %s): a rename moves all of %s's keys and is not ramped "
				"(the name is the identity: %s's points are new, and take some keys of the others "
				"too); keep the old name to keep its keys\n", "renamed:", x->name, name, x->url,
				x->name, name);
	}
}

static void plan_renames_json(FILE *out, const struct plan_side *a, const struct plan_side *b)
{
	int first = 1;

	fputs(", \"renamed\": [", out);
	for (size_t i = 0; i < b->conf->nbackends; i++) {
		const char *name = b->conf->backends[i].name;
		const struct conf_backend *x = plan_renamed_from(a, b, name);

		if (!x)
			continue;
		fputs(first ? "{\"from\": " : ", {\"from\": ", out);
		plan_json_str(out, x->name);
		fputs(", \"to\": ", out);
		plan_json_str(out, name);
		fputs(", \"url\": ", out);
		plan_json_str(out, x->url);
		fputc('}', out);
		first = 0;
	}
	fputc(']', out);
}

int plan_print_conf(const struct conf *c, FILE *out)
{
	struct plan_side s;
	char err[512];
	int rc = -1;

	memset(&s, 0, sizeof(s));
	s.path = c->path;
	s.ring = plan_ring(c, err, sizeof(err));
	if (!s.ring) {
		fprintf(stderr, "%s: %s\n", c->path, err);
		return -1;
	}
	s.share = calloc(s.ring->nbackends + 1, sizeof(double));
	if (s.share) {
		ring_shares(s.ring, s.share);
		plan_text_backends(out, &s, NULL);
		rc = 0;
	}
	ring_free(s.ring);
	free(s.share);
	return rc;
}

/* Append to a bounded string; a cut summary stays NUL-terminated. */
__attribute__((format(printf, 3, 4)))
static void plan_cat(char *out, size_t len, const char *fmt, ...)
{
	size_t used = strlen(out);
	va_list ap;

	if (used + 1 >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(out + used, len - used, fmt, ap);
	va_end(ap);
}

/* The share of keys whose preference list ([ring] replicas) changes a
 * member from a to b; -1 on no memory. */
static double plan_list_moved(const struct conf *a, const struct ring *ra, const struct conf *b,
			      const struct ring *rb)
{
	return ring_list_moved(ra, a->replicas, rb, b->replicas);
}

/* Under a change of [ring] query or drop_params, a key whose query the
 * new rules rewrite otherwise lands at an unrelated position: it moves
 * unless both positions have the same owner, so with probability 1 - the
 * sum over backends of old share x new share. -1 when out of memory. */
static double plan_query_moved(const struct ring *a, const struct ring *b)
{
	double *sa = calloc(a->nbackends + 1, sizeof(*sa)), *sb = calloc(b->nbackends + 1, sizeof(*sb));
	double same = 0;

	if (!sa || !sb) {
		free(sa);
		free(sb);
		return -1;
	}
	ring_shares(a, sa);
	ring_shares(b, sb);
	for (size_t i = 0; i < a->nbackends; i++)
		for (size_t j = 0; j < b->nbackends; j++)
			if (strcmp(a->names[i], b->names[j]) == 0)
				same += sa[i] * sb[j];
	free(sa);
	free(sb);
	return same > 1 ? 0 : 1 - same;
}

/* "query as-is -> sorted, drop_params '' -> 'utm_*'": what of a and b's
 * query rules differs, into out (len bytes); "" when nothing. */
static void plan_query_change(const struct conf *a, const struct conf *b, char *out, size_t len)
{
	static const char *const mode[] = { "as-is", "sorted" };
	bool dp = strcmp(a->drop_params, b->drop_params) != 0;

	out[0] = '\0';
	if (a->query.mode != b->query.mode)
		snprintf(out, len, "query %s -> %s%s", mode[a->query.mode != 0], mode[b->query.mode != 0],
			 dp ? ", " : "");
	if (dp)
		snprintf(out + strlen(out), len - strlen(out), "drop_params '%s' -> '%s'", a->drop_params,
			 b->drop_params);
}

int plan_summary(const struct conf *a, const struct ring *ra,
		 const struct conf *b, const struct ring *rb,
		 char *out, size_t len, double *moved)
{
	struct plan_side sa = { .conf = (struct conf *)a, .ring = (struct ring *)ra };
	struct plan_side sb = { .conf = (struct conf *)b, .ring = (struct ring *)rb };
	struct ring_diff d;
	int changes = 0;

	out[0] = '\0';
	if (ring_diff(ra, rb, &d) < 0)
		return -1;
	*moved = d.moved_share;
	for (size_t i = 0; i < rb->nbackends; i++) {
		const char *name = rb->names[i];

		switch (plan_change_of(&sa, &sb, name)) {
		case PLAN_ADDED:
			plan_cat(out, len, "%s+%s", changes++ ? " " : "", name);
			break;
		case PLAN_REWEIGHTED: {
			const struct conf_backend *x = conf_backend_find(a, name);
			const struct conf_backend *y = conf_backend_find(b, name);

			/* a new scheme is said once, below */
			if (x->weight != y->weight)
				plan_cat(out, len, "%s~%s (weight %g -> %g)", changes++ ? " " : "", name,
					 x->weight, y->weight);
			else if (a->scheme == b->scheme && b->scheme != RING_SCHEME_RINGPROXY)
				plan_cat(out, len, "%s~%s (id %s -> %s)", changes++ ? " " : "", name, x->id, y->id);
			break;
		}
		case PLAN_READDRESSED:
			plan_cat(out, len, "%s@%s (new url %s)", changes++ ? " " : "", name,
				 conf_backend_find(b, name)->url);
			break;
		default:
			break;
		}
	}
	for (size_t i = 0; i < ra->nbackends; i++)
		if (!conf_backend_find(b, ra->names[i]))
			plan_cat(out, len, "%s-%s", changes++ ? " " : "", ra->names[i]);
	if (a->scheme != b->scheme)
		plan_cat(out, len, "%sscheme %s -> %s", changes++ ? " " : "", plan_scheme_name(ra->scheme),
			 plan_scheme_name(rb->scheme));
	else if (a->vnodes != b->vnodes && b->scheme == RING_SCHEME_RINGPROXY)
		plan_cat(out, len, "%svnodes %u -> %u", changes++ ? " " : "", a->vnodes, b->vnodes);
	if (!query_rules_same(&a->query, &b->query)) {
		char what[300];
		double qm = plan_query_moved(ra, rb);

		if (qm < 0) {
			ring_diff_free(&d);
			return -1;
		}
		plan_query_change(a, b, what, sizeof(what));
		plan_cat(out, len, "%s%s: each request whose query it rewrites moves with probability %.3f%% "
			 "(ringproxy plan --keys counts a key list)", changes++ ? " " : "", what, 100.0 * qm);
	}
	if (!changes)
		plan_cat(out, len, "no backend changed");
	plan_cat(out, len, "; %.3f%% of keys moved", 100.0 * d.moved_share);
	if (a->replicas > 1 || b->replicas > 1) {
		double lm = plan_list_moved(a, ra, b, rb);

		if (lm < 0) {
			ring_diff_free(&d);
			return -1;
		}
		plan_cat(out, len, ", %.3f%% changed a member of their list of replicas", 100.0 * lm);
	}
	plan_flows(&d, out, len);
	ring_diff_free(&d);
	return 0;
}

void plan_flows(const struct ring_diff *d, char *out, size_t len)
{
	bool one_target = true;

	for (size_t i = 1; i < d->nflows; i++)
		if (strcmp(d->flows[i].to, d->flows[0].to) != 0)
			one_target = false;
	if (d->nflows && one_target && *d->flows[0].to) {
		plan_cat(out, len, ", all to %s", d->flows[0].to);
	} else {
		for (size_t i = 0; i < d->nflows && i < 4; i++)
			plan_cat(out, len, "%s %s -> %s %.3f%%", i ? "," : ":",
				 *d->flows[i].from ? d->flows[i].from : "(none)",
				 *d->flows[i].to ? d->flows[i].to : "(none)", 100.0 * d->flows[i].share);
		if (d->nflows > 4)
			plan_cat(out, len, ", and %zu smaller flows", d->nflows - 4);
	}
}

static void plan_usage(FILE *f)
{
	fprintf(f,
		"usage: ringproxy plan OLD.ini [NEW.ini] [--keys FILE [--raw-keys] [--per-key]]\n"
		"                      [--balance-factor C] [--ramp DURATION [--period DURATION]] [--json]\n"
		"                      [--probe]\n"
		"  one file:  each backend's points and exact share of the keyspace\n"
		"  two files: what is added, removed, changed, and the share of keys that move\n"
		"  --keys FILE          count real keys: one request target per line (/p?q or\n"
		"                       http://host/p?q), keyed by each file's [ring] key as the\n"
		"                       proxy keys a request; a line may end in ' COUNT', its\n"
		"                       requests; - = stdin\n"
		"  --raw-keys           hash each line as written instead\n"
		"  --per-key            print each key with its owner (two files: old and new)\n"
		"  --balance-factor C   simulate bounded loads over the key list, every key bounded\n"
		"                       (the proxy's rule under a viral key; needs --keys)\n"
		"  --ramp DURATION      expected origin misses per minute for the moved keys, with\n"
		"                       no ramp and with [ring] ramp = DURATION (two files, --keys)\n"
		"  --period DURATION    the time the key file's counts cover (default 24h)\n"
		"  --json               machine-readable output (schema in ringproxy(8))\n"
		"  --probe              two files: GET each backend new in NEW.ini (or with a new\n"
		"                       url) at its health path, or /, with [health] timeout;\n"
		"                       exit 4 if one does not answer as expected\n");
}

/* --ramp: the expected origin misses of the moved keys, minute by minute,
 * without a ramp and with one. */
struct plan_misses {
	size_t minutes;                 /* rows */
	double *off, *on;
	double later_off, later_on, total;
	uint64_t moved;                 /* moved keys */
	uint64_t ramped;                /* of them, held back by a ramp (their
					   previous owner is in NEW.ini) */
	uint64_t requests;              /* the moved keys' counts summed */
};

/* What `plan` was asked, and what it computed for the renderers. */
struct plan_run {
	const char *files[2];
	int nfiles;
	const char *keyfile;            /* NULL: no key list */
	int raw_keys;                   /* --raw-keys */
	int per_key;                    /* --per-key */
	double bf;                      /* --balance-factor; 0 = off */
	int json;
	int probe;                      /* --probe */
	struct plan_keys keys;
	struct plan_side a, b;          /* b only with two files */
	struct ring_diff d;             /* a -> b */
	double list_moved;              /* keys whose list of [ring] replicas
					   changed a member (a -> b) */
	struct plan_kflow *kf;          /* with keys: flows of keys */
	long nkf;
	uint64_t moved_keys;
	uint64_t ramp_ms;               /* --ramp; 0 = not asked */
	uint64_t period_ms;             /* --period */
	struct plan_misses misses;      /* with --ramp */
};

static void plan_run_free(struct plan_run *r)
{
	free(r->misses.off);
	free(r->misses.on);
	free(r->kf);
	ring_diff_free(&r->d);
	plan_side_free(&r->a);
	plan_side_free(&r->b);
	plan_keys_free(&r->keys);
}

/* Read the command line into r. -1 to go on, else the exit status (0
 * after --help, 2 on a usage error, which is printed). */
static int plan_args(struct plan_run *r, int argc, char **argv, FILE *out)
{
	static const struct option opts[] = {
		{ "keys", required_argument, NULL, 'k' },
		{ "raw-keys", no_argument, NULL, 'r' },
		{ "per-key", no_argument, NULL, 'p' },
		{ "balance-factor", required_argument, NULL, 'b' },
		{ "json", no_argument, NULL, 'j' },
		{ "ramp", required_argument, NULL, 'R' },
		{ "period", required_argument, NULL, 'P' },
		{ "probe", no_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int opt;

	optind = 1;
	r->period_ms = 86400000;
	while ((opt = getopt_long(argc, argv, "k:b:jh", opts, NULL)) != -1) {
		switch (opt) {
		case 'R':
		case 'P': {
			uint64_t ms;

			if (conf_parse_duration(optarg, &ms) < 0 || ms == 0 || ms > 86400000ull * 365) {
				fprintf(stderr, "ringproxy plan: --%s '%s': expected a duration such as 90s, 5m or 24h\n",
					opt == 'R' ? "ramp" : "period", optarg);
				return 2;
			}
			if (opt == 'R')
				r->ramp_ms = ms;
			else
				r->period_ms = ms;
			break;
		}
		case 'k':
			r->keyfile = optarg;
			break;
		case 'b': {
			char *end;

			errno = 0;
			r->bf = strtod(optarg, &end);
			if (errno || *end || !isfinite(r->bf) || r->bf < 0 || r->bf > 100 ||
			    (r->bf > 0 && r->bf < 1)) {
				fprintf(stderr, "ringproxy plan: --balance-factor '%s': expected 0 (off) or a number from 1 to 100\n", optarg);
				return 2;
			}
			break;
		}
		case 'j':
			r->json = 1;
			break;
		case 'r':
			r->raw_keys = 1;
			break;
		case 'p':
			r->per_key = 1;
			break;
		case 'n':
			r->probe = 1;
			break;
		case 'h':
			plan_usage(out);
			return 0;
		default:
			plan_usage(stderr);
			return 2;
		}
	}
	for (int i = optind; i < argc; i++) {
		if (r->nfiles == 2) {
			fprintf(stderr, "ringproxy plan: at most two config files\n");
			plan_usage(stderr);
			return 2;
		}
		r->files[r->nfiles++] = argv[i];
	}
	if (r->nfiles == 0) {
		plan_usage(stderr);
		return 2;
	}
	if ((r->raw_keys || r->per_key) && !r->keyfile) {
		fprintf(stderr, "ringproxy plan: --raw-keys and --per-key are about a key list; add --keys FILE\n");
		return 2;
	}
	if (r->bf > 0 && !r->keyfile) {
		fprintf(stderr, "ringproxy plan: --balance-factor simulates over a key list; add --keys FILE\n");
		return 2;
	}
	if (r->probe && (r->nfiles != 2 || r->json || r->per_key)) {
		fprintf(stderr, "ringproxy plan: --probe checks the backends NEW.ini adds: give two files, "
			"without --json or --per-key\n");
		return 2;
	}
	if (r->ramp_ms && (r->nfiles != 2 || !r->keyfile)) {
		fprintf(stderr, "ringproxy plan: --ramp compares OLD.ini with NEW.ini over a key list with counts; "
			"give two files and --keys FILE\n");
		return 2;
	}
	return -1;
}

/* Rows of the --ramp table: the window and five minutes more, at most
 * four hours. */
#define PLAN_RAMP_TAIL_MIN 5
#define PLAN_RAMP_MAX_ROWS 240

/* --ramp: which keys move (ring owners, as the proxy routes them; any
 * --balance-factor aside), when each would switch, and the misses
 * without and with the ramp. 0, or -1 on no memory. */
static int plan_ramp(struct plan_run *r)
{
	const struct plan_keys *k = &r->keys;
	struct plan_misses *m = &r->misses;
	uint64_t *count = malloc((k->n ? k->n : 1) * sizeof(*count));
	uint64_t *at = malloc((k->n ? k->n : 1) * sizeof(*at));
	size_t n = 0;
	int rc = -1;

	m->minutes = (size_t)((r->ramp_ms + 59999) / 60000) + PLAN_RAMP_TAIL_MIN;
	if (m->minutes > PLAN_RAMP_MAX_ROWS)
		m->minutes = PLAN_RAMP_MAX_ROWS;
	m->off = calloc(m->minutes, sizeof(double));
	m->on = calloc(m->minutes, sizeof(double));
	if (!count || !at || !m->off || !m->on)
		goto out;
	for (size_t i = 0; i < k->n; i++) {
		/* each file places the key where it keys it (pos2 when
		 * the scheme, [ring] key or query rules differ) */
		int oa = ring_lookup(r->a.ring, k->pos[i]);
		int ob = ring_lookup(r->b.ring, k->pos2 ? k->pos2[i] : k->pos[i]);
		const char *from = plan_name(&r->a, oa);

		if (strcmp(from, plan_name(&r->b, ob)) == 0)
			continue;
		count[n] = k->count[i];
		m->requests += k->count[i];
		/* the key's own moment of the window, as the proxy computes
		 * it; a key whose owner left the file moves at once */
		if (*from && conf_backend_find(r->b.conf, from)) {
			at[n] = (uint64_t)((plan_u128)k->u[i] * r->ramp_ms >> 64);
			m->ramped++;
		} else {
			at[n] = 0;
		}
		n++;
	}
	m->moved = n;
	plan_miss_curve(count, NULL, n, r->period_ms, m->minutes, m->off, &m->later_off, &m->total);
	plan_miss_curve(count, at, n, r->period_ms, m->minutes, m->on, &m->later_on, &m->total);
	rc = 0;
out:
	free(count);
	free(at);
	return rc;
}

/* Load the files and keys, build the rings and compute shares, key
 * assignments, the diff and the key flows. 0, or -1 with err. */
static int plan_compute(struct plan_run *r, char *err, size_t errlen)
{
	const struct plan_keys *keys = r->keyfile ? &r->keys : NULL;
	struct plan_keys kb;
	int m1, m2;

	if (plan_side_conf(&r->a, r->files[0], err, errlen) < 0 ||
	    (r->nfiles == 2 && plan_side_conf(&r->b, r->files[1], err, errlen) < 0))
		return -1;
	/* each file keys requests its own way ([ring] key) */
	m1 = r->raw_keys ? PLAN_RAW : r->a.conf->key;
	m2 = r->raw_keys || r->nfiles < 2 ? m1 : r->b.conf->key;
	if (r->keyfile && plan_keys_read(&r->keys, r->keyfile, r->a.conf->scheme, m1, &r->a.conf->query,
					 r->nfiles < 2 ? r->a.conf->scheme : r->b.conf->scheme, m2,
					 r->nfiles < 2 ? &r->a.conf->query : &r->b.conf->query, r->per_key,
					 isatty(STDERR_FILENO), err, errlen) < 0)
		return -1;
	if (plan_side_ring(&r->a, keys, r->bf, err, errlen) < 0)
		return -1;
	if (r->nfiles < 2)
		return 0;
	kb = r->keys;
	if (kb.pos2)
		kb.pos = kb.pos2;
	if (plan_side_ring(&r->b, keys ? &kb : NULL, r->bf, err, errlen) < 0)
		return -1;
	if (ring_diff(r->a.ring, r->b.ring, &r->d) < 0 ||
	    (r->list_moved = plan_list_moved(r->a.conf, r->a.ring, r->b.conf, r->b.ring)) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (keys && (r->nkf = plan_key_flows(&r->a, &r->b, &r->d, keys, &r->kf, &r->moved_keys)) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (r->ramp_ms && plan_ramp(r) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

/* A key's preference list on side s at pos ([ring] replicas), names
 * joined by commas, or as a JSON array. */
static void plan_list_out(FILE *out, const struct plan_side *s, uint64_t pos, int json)
{
	int list[RING_LIST_MAX];
	unsigned n = ring_list(s->ring, pos, list, s->conf->replicas);

	if (json)
		fputc('[', out);
	for (unsigned i = 0; i < n; i++) {
		if (i)
			fputs(json ? ", " : ",", out);
		if (json)
			plan_json_str(out, s->ring->names[list[i]]);
		else
			fputs(s->ring->names[list[i]], out);
	}
	if (json)
		fputc(']', out);
}

/* With [ring] replicas on either side: the key's lists, after what
 * plan_render_per_key says of its owners. */
static void plan_per_key_lists(const struct plan_run *r, FILE *out, size_t i)
{
	uint64_t pa = r->keys.pos[i], pb = r->keys.pos2 ? r->keys.pos2[i] : pa;

	if (r->nfiles == 2) {
		fputs(r->json ? ", \"old_list\": " : "\t", out);
		plan_list_out(out, &r->a, pa, r->json);
		fputs(r->json ? ", \"new_list\": " : "\t", out);
		plan_list_out(out, &r->b, pb, r->json);
		if (r->json)
			fprintf(out, ", \"list_changed\": %s",
				ring_list_changed(r->a.ring, pa, r->a.conf->replicas, r->b.ring, pb,
						   r->b.conf->replicas) ? "true" : "false");
	} else {
		fputs(r->json ? ", \"list\": " : "\t", out);
		plan_list_out(out, &r->a, pa, r->json);
	}
}

/* --per-key: each key with its owner (and with two files, the new one),
 * tab-separated text or JSON lines; with [ring] replicas, its list too. */
static void plan_render_per_key(const struct plan_run *r, FILE *out)
{
	const struct plan_keys *k = &r->keys;
	bool lists = r->a.conf->replicas > 1 || (r->nfiles == 2 && r->b.conf->replicas > 1);

	for (size_t i = 0; i < k->n; i++) {
		const char *key = k->lines + k->off[i];
		const char *oa = plan_name(&r->a, r->a.owner[i]);
		const char *ob = r->nfiles == 2 ? plan_name(&r->b, r->b.owner[i]) : NULL;

		if (r->json) {
			fputs("{\"key\": ", out);
			plan_json_str(out, key);
			fputs(ob ? ", \"old\": " : ", \"owner\": ", out);
			plan_json_str(out, oa);
			if (ob) {
				fputs(", \"new\": ", out);
				plan_json_str(out, ob);
				fprintf(out, ", \"moved\": %s", strcmp(oa, ob) ? "true" : "false");
			}
			if (lists)
				plan_per_key_lists(r, out, i);
			fputs("}\n", out);
			continue;
		}
		if (ob)
			fprintf(out, "%s\t%s\t%s\t%s", key, oa, ob, strcmp(oa, ob) ? "moved" : "stays");
		else
			fprintf(out, "%s\t%s", key, oa);
		if (lists)
			plan_per_key_lists(r, out, i);
		fputc('\n', out);
	}
}

/* The flows of the comparison as a JSON array. */
static void plan_json_flows(const struct plan_run *r, FILE *out)
{
	const struct ring_diff *d = &r->d;

	fputc('[', out);
	for (size_t i = 0; i < d->nflows; i++) {
		fprintf(out, "%s{\"from\": ", i ? ", " : "");
		plan_json_str(out, d->flows[i].from);
		fputs(", \"to\": ", out);
		plan_json_str(out, d->flows[i].to);
		fprintf(out, ", \"share\": %.17g", d->flows[i].share);
		if (r->keyfile)
			fprintf(out, ", \"keys\": %llu", (unsigned long long)
				plan_flow_keys(r->kf, r->nkf, d->flows[i].from, d->flows[i].to));
		fputc('}', out);
	}
	/* keys the bounded-load simulation moved between backends whose
	 * arcs did not change: share 0 */
	for (long i = 0; i < r->nkf; i++) {
		if (r->kf[i].in_ring)
			continue;
		fprintf(out, "%s{\"from\": ", d->nflows || i ? ", " : "");
		plan_json_str(out, r->kf[i].from_name);
		fputs(", \"to\": ", out);
		plan_json_str(out, r->kf[i].to_name);
		fprintf(out, ", \"share\": 0, \"keys\": %llu}", (unsigned long long)r->kf[i].keys);
	}
	fputc(']', out);
}

/* --ramp as JSON, a member of "compare". */
static void plan_json_ramp(const struct plan_run *r, FILE *out)
{
	const struct plan_misses *m = &r->misses;

	fprintf(out, ", \"ramp\": {\"seconds\": %.3f, \"period_seconds\": %.3f, \"moved_keys\": %llu, "
		"\"ramped_keys\": %llu, \"requests\": %llu, \"minutes\": [",
		(double)r->ramp_ms / 1000, (double)r->period_ms / 1000, (unsigned long long)m->moved,
		(unsigned long long)m->ramped, (unsigned long long)m->requests);
	for (size_t i = 0; i < m->minutes; i++)
		fprintf(out, "%s{\"minute\": %zu, \"off\": %.17g, \"on\": %.17g}", i ? ", " : "", i + 1,
			m->off[i], m->on[i]);
	fprintf(out, "], \"later\": {\"off\": %.17g, \"on\": %.17g}, \"total\": %.17g}", m->later_off,
		m->later_on, m->total);
}

/* plan_settings_text's state: the lines printed so far. */
struct plan_settings {
	FILE *out;
	int n;
};

static void plan_setting_text(void *arg, const struct conf_change *ch)
{
	struct plan_settings *ps = arg;

	fprintf(ps->out, "  %-10s[%s%s] %s", ps->n++ ? "" : "settings:", ch->backend ? "backend " : "",
		ch->section, ch->key);
	if (ch->from)
		fprintf(ps->out, " %s -> %s", ch->from, ch->to);
	else
		fputs(" changed", ps->out);
	fprintf(ps->out, "%s\n", ch->restart ? " (needs a restart)" : "");
}

/* Every setting that differs, one a line, marked where a reload does
 * not apply it. */
static void plan_settings_text(FILE *out, const struct conf *a, const struct conf *b)
{
	struct plan_settings ps = { out, 0 };

	if (conf_diff_each(a, b, plan_setting_text, &ps) == 0)
		fprintf(out, "  %-10s(none)\n", "settings:");
}

static void plan_setting_json(void *arg, const struct conf_change *ch)
{
	struct plan_settings *ps = arg;
	char section[80];

	snprintf(section, sizeof(section), "%s%s", ch->backend ? "backend " : "", ch->section);
	fputs(ps->n++ ? ", {\"section\": " : "{\"section\": ", ps->out);
	plan_json_str(ps->out, section);
	fputs(", \"key\": ", ps->out);
	plan_json_str(ps->out, ch->key);
	fputs(", \"old\": ", ps->out);
	if (ch->from)
		plan_json_str(ps->out, ch->from);
	else
		fputs("null", ps->out);
	fputs(", \"new\": ", ps->out);
	if (ch->to)
		plan_json_str(ps->out, ch->to);
	else
		fputs("null", ps->out);
	fprintf(ps->out, ", \"restart\": %s}", ch->restart ? "true" : "false");
}

static void plan_render_json(const struct plan_run *r, FILE *out)
{
	fputs("{\"backends\": ", out);
	plan_json_backends(out, &r->a, r->keyfile != NULL);
	if (r->keyfile)
		fprintf(out, ", \"keys\": %zu", r->keys.n);
	if (r->nfiles == 2) {
		fputs(", \"compare\": {\"backends\": ", out);
		plan_json_backends(out, &r->b, r->keyfile != NULL);
		fputs(", \"added\": ", out);
		plan_list_json(out, &r->a, &r->b, PLAN_ADDED);
		fputs(", \"removed\": ", out);
		plan_list_json(out, &r->a, &r->b, PLAN_REMOVED);
		fputs(", \"changed\": ", out);
		plan_list_json(out, &r->a, &r->b, PLAN_REWEIGHTED);
		plan_renames_json(out, &r->a, &r->b);
		{
			struct plan_settings ps = { out, 0 };

			fputs(", \"settings\": [", out);
			conf_diff_each(r->a.conf, r->b.conf, plan_setting_json, &ps);
			fputc(']', out);
		}
		fprintf(out, ", \"moved_share\": %.17g", r->d.moved_share);
		if (r->a.conf->replicas > 1 || r->b.conf->replicas > 1)
			fprintf(out, ", \"list_moved_share\": %.17g", r->list_moved);
		if (r->keyfile)
			fprintf(out, ", \"moved_keys\": %llu", (unsigned long long)r->moved_keys);
		fputs(", \"flows\": ", out);
		plan_json_flows(r, out);
		if (r->ramp_ms)
			plan_json_ramp(r, out);
		fputc('}', out);
	}
	fputs("}\n", out);
}

/* The comparison of two files as text: what changed, what moved. */
static void plan_text_compare(const struct plan_run *r, FILE *out)
{
	const struct ring_diff *d = &r->d;
	const struct plan_keys *keys = r->keyfile ? &r->keys : NULL;

	fputc('\n', out);
	plan_text_backends(out, &r->b, keys);
	fprintf(out, "\n%s -> %s\n", r->a.path, r->b.path);
	plan_list_text(out, &r->a, &r->b, PLAN_ADDED, "added:");
	plan_list_text(out, &r->a, &r->b, PLAN_REMOVED, "removed:");
	plan_list_text(out, &r->a, &r->b, PLAN_REWEIGHTED, "changed:");
	plan_renames_text(out, &r->a, &r->b);
	plan_settings_text(out, r->a.conf, r->b.conf);
	if (r->a.conf->scheme != r->b.conf->scheme)
		fprintf(out, "  %-9s[ring] scheme %s -> %s: each places a key by its own hash, so the moved share is "
			"the expectation, 1 - the sum of each backend's share x share%s\n", "scheme:",
			plan_scheme_name(r->a.ring->scheme), plan_scheme_name(r->b.ring->scheme),
			r->keyfile ? "; the key list is placed both ways" : "; give --keys to count a key list");
	if (r->a.conf->key != r->b.conf->key)
		fprintf(out, "  %-9s[ring] key %s -> %s%s\n", "key:", conf_key_mode_name(r->a.conf->key),
			conf_key_mode_name(r->b.conf->key),
			r->keyfile ? (r->raw_keys ? " (not applied: --raw-keys)" : ": the key list is keyed both ways")
				   : ": requests with a query may move; give --keys to count them");
	if (!query_rules_same(&r->a.conf->query, &r->b.conf->query)) {
		char what[300];

		plan_query_change(r->a.conf, r->b.conf, what, sizeof(what));
		fprintf(out, "  %-9s[ring] %s%s\n", "query:", what,
			r->keyfile ? (r->raw_keys ? " (not applied: --raw-keys)" : ": the key list is keyed both ways")
				   : "; a request whose query it rewrites moves with the probability the owners "
				     "of two unrelated positions differ: give --keys to count a key list");
		if (!r->keyfile)
			fprintf(out, "  %-9s%.3f%% of such requests\n", "", 100.0 * plan_query_moved(r->a.ring, r->b.ring));
	}
	fprintf(out, "  %-9s%.3f%% of the keyspace", "moved:", 100.0 * d->moved_share);
	if (keys)
		fprintf(out, ", %llu of %zu keys (%.3f%%)", (unsigned long long)r->moved_keys,
			keys->n, keys->n ? 100.0 * (double)r->moved_keys / (double)keys->n : 0.0);
	fputc('\n', out);
	if (r->a.conf->replicas > 1 || r->b.conf->replicas > 1)
		fprintf(out, "  %-9s%.3f%% of the keyspace changed a member of its list (replicas %u -> %u)\n",
			"lists:", 100.0 * r->list_moved, r->a.conf->replicas, r->b.conf->replicas);
	if (d->nflows) {
		fprintf(out, "\n  %-16s %-16s %9s", "from", "to", "share");
		if (keys)
			fprintf(out, "  %10s", "keys");
		fputc('\n', out);
	}
	for (size_t i = 0; i < d->nflows; i++) {
		fprintf(out, "  %-16s %-16s %8.3f%%", *d->flows[i].from ? d->flows[i].from : "(none)",
			*d->flows[i].to ? d->flows[i].to : "(none)", 100.0 * d->flows[i].share);
		if (keys)
			fprintf(out, "  %10llu", (unsigned long long)
				plan_flow_keys(r->kf, r->nkf, d->flows[i].from, d->flows[i].to));
		fputc('\n', out);
	}
	for (long i = 0; i < r->nkf; i++) {
		if (r->kf[i].in_ring)
			continue;
		fprintf(out, "  %-16s %-16s %9s  %10llu  (%s)\n",
			*r->kf[i].from_name ? r->kf[i].from_name : "(none)",
			*r->kf[i].to_name ? r->kf[i].to_name : "(none)", "-",
			(unsigned long long)r->kf[i].keys,
			r->keys.pos2 ? "keyed differently, or moved by the load caps" : "moved by the load caps");
	}
}

/* --ramp as text: the misses per minute, without and with the ramp. */
static void plan_text_ramp(const struct plan_run *r, FILE *out)
{
	const struct plan_misses *m = &r->misses;
	char span[32], period[32], head[48];
	double peak_off = 0, peak_on = 0;

	conf_fmt_ms(r->ramp_ms, span, sizeof(span));
	conf_fmt_ms(r->period_ms, period, sizeof(period));
	snprintf(head, sizeof(head), "ramp %s", span);
	fprintf(out, "\nwarm ramp over %s: %llu moved keys, %llu requests in %s; %llu held back by the ramp",
		span, (unsigned long long)m->moved, (unsigned long long)m->requests, period,
		(unsigned long long)m->ramped);
	if (m->moved > m->ramped)
		fprintf(out, ", %llu moving at once (their owner left the file)",
			(unsigned long long)(m->moved - m->ramped));
	fprintf(out, "\nexpected origin misses of the moved keys per minute after the reload (each misses\n"
		"once, at its first request after it switches; requests a Poisson stream at its count's rate):\n\n");
	fprintf(out, "  %6s  %12s  %12s\n", "minute", "no ramp", head);
	for (size_t i = 0; i < m->minutes; i++) {
		fprintf(out, "  %6zu  %12.1f  %12.1f\n", i + 1, m->off[i], m->on[i]);
		if (m->off[i] > peak_off)
			peak_off = m->off[i];
		if (m->on[i] > peak_on)
			peak_on = m->on[i];
	}
	fprintf(out, "  %6s  %12.1f  %12.1f\n", "later", m->later_off, m->later_on);
	fprintf(out, "  %6s  %12.1f  %12.1f\n", "peak", peak_off, peak_on);
	fprintf(out, "  %6s  %12.1f  %12.1f\n", "total", m->total, m->total);
}

static void plan_render_text(const struct plan_run *r, FILE *out)
{
	plan_text_backends(out, &r->a, r->keyfile ? &r->keys : NULL);
	if (r->keyfile)
		fprintf(out, "\n  %zu keys, %s%s\n", r->keys.n, r->raw_keys ? "hashed as written (--raw-keys)" :
			"keyed as [ring] key = ", r->raw_keys ? "" : conf_key_mode_name(r->a.conf->key));
	if (r->keyfile && r->bf > 0)
		fprintf(out, "\n  keys assigned with bounded loads, balance factor %g, every key bounded:\n"
			"  the proxy's rule when hot keys carry a third of the requests or more;\n"
			"  under even load it moves no key (ringproxy(7): BOUNDED LOADS)\n", r->bf);
	if (r->nfiles == 2)
		plan_text_compare(r, out);
	if (r->ramp_ms)
		plan_text_ramp(r, out);
}

int plan_main(int argc, char **argv, FILE *out)
{
	struct plan_run r;
	char err[512];
	int rc;

	memset(&r, 0, sizeof(r));
	rc = plan_args(&r, argc, argv, out);
	if (rc >= 0)
		return rc;
	rc = 1;
	if (plan_compute(&r, err, sizeof(err)) < 0) {
		fprintf(stderr, "ringproxy plan: %s\n", err);
		goto out;
	}
	if (r.per_key)
		plan_render_per_key(&r, out);
	else if (r.json)
		plan_render_json(&r, out);
	else
		plan_render_text(&r, out);
	rc = 0;
	if (r.probe && health_probe(r.b.conf, r.a.conf, out) != 0)
		rc = 4;
	if (r.nfiles == 2 && plan_check_flows(&r.a, &r.b, &r.d))
		rc = 3;
out:
	plan_run_free(&r);
	return rc;
}
