/*
 * page.h -- the admin listener's page (/): one self-contained HTML
 * document (no script, no external asset) drawn from a stats reading.
 */
#ifndef RINGPROXY_PAGE_H
#define RINGPROXY_PAGE_H

#include <stddef.h>

struct ring;

struct evbuffer;
struct stats;

/* Above this many runs of one backend's consecutive points, the ring is
 * drawn in half-degree steps (what a screen can show) instead. */
#define PAGE_MAX_ARCS 3000

/* The page for st, appended to out. Main thread. */
void page_html(const struct stats *st, struct evbuffer *out);

/* The runs of consecutive points of one backend, going round once (the
 * first and last joined when they are one backend's): the number of arcs
 * the page draws. Pure; exposed for the unit test. */
size_t page_runs(const struct ring *r);

#endif
