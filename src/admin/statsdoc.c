/*
 * statsdoc.c -- the sample reading of statsdoc.h. The reading is filled
 * by hand, not collected: it needs no running proxy, and each optional
 * part is switched on so that its keys and series are written. The names
 * and help texts are the writers' (stats.c) and the lists' (stats-t.h,
 * cache.h, rates.h); nothing here names a counter.
 */
#include "admin/statsdoc.h"

#include <event2/buffer.h>
#include <stdbool.h>
#include <string.h>

#include "path/proxy-t.h"
#include "base/rates.h"
#include "admin/stats.h"

static int statsdoc_flush(FILE *out, struct evbuffer *b)
{
	size_t n = evbuffer_get_length(b);
	const unsigned char *p = evbuffer_pullup(b, -1);

	if (n && (!p || fwrite(p, 1, n, out) != n))
		return -1;
	return evbuffer_drain(b, n);
}

/* One backend, NAME, up, checked and draining with a runtime weight; the proxy with a cache, a reload
 * and a ramp in progress. */
static void statsdoc_fill(struct stats *st, struct stats_backend *be, struct proxy_reload *r)
{
	memset(st, 0, sizeof(*st));
	memset(be, 0, sizeof(*be));
	memset(r, 0, sizeof(*r));
	be->name = "NAME";
	be->url = "http://HOST:PORT";
	be->weight = 1;
	be->state = "up";
	be->checked = true;
	be->check_passed = 1;
	snprintf(be->check_text, sizeof(be->check_text), "passed");
	be->admin_state = "drain";
	be->drain_progress = 0.5;
	be->drain_end = 2;
	be->drain_seconds = 1;
	be->runtime_weight = 1;
	be->ring_weight = 1;
	st->be = be;
	st->nbe = 1;
	st->scheme = "ringproxy";
	st->build = (struct stats_build){ RINGPROXY_VERSION, "VERSION", "VERSION", "VERSION", "VERSION" };
	st->conf_path = "FILE";
	st->conf_sha256 = "SHA256";
	st->conf_on_disk = "same";
	r->when = 1;
	r->ok = true;
	st->reload_time = 1;
	st->reloads[0] = r;
	st->nreloads = 1;
	st->has_cache = true;
	st->ramp_rings = 1;
	st->ramp_in_progress = 1;
}

int statsdoc_print(FILE *out)
{
	struct stats st;
	struct stats_backend be;
	struct proxy_reload r;
	struct evbuffer *b = evbuffer_new();
	int rc = -1;

	if (!b)
		return -1;
	statsdoc_fill(&st, &be, &r);
	fputs("@@ prometheus\n", out);
	stats_prometheus(&st, b);
	if (statsdoc_flush(out, b) < 0)
		goto fail;
	fputs("@@ json\n", out);
	stats_json(&st, b);
	if (statsdoc_flush(out, b) < 0)
		goto fail;
	fputs("@@ rates\n", out);
#define STATSDOC_P(n, help) fprintf(out, "proxy %s %s\n", #n, help);
#define STATSDOC_B(n, help) fprintf(out, "backend %s %s\n", #n, help);
	RATES_PROXY(STATSDOC_P)
	RATES_BACKEND(STATSDOC_B)
#undef STATSDOC_P
#undef STATSDOC_B
	rc = fflush(out) == 0 && !ferror(out) ? 0 : -1;
fail:
	evbuffer_free(b);
	return rc;
}
