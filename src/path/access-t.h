/*
 * access-t.h -- a worker's access log buffer (access.c writes it, the
 * worker keeps it in struct worker). One writer: the worker's thread.
 */
#ifndef RINGPROXY_ACCESS_T_H
#define RINGPROXY_ACCESS_T_H

#include <event2/event_struct.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ACCESS_CLF_LEN 35
#define ACCESS_ISO_LEN 30

struct access_buf {
	char *data;                     /* NULL until the first line */
	size_t len;
	unsigned lines;                 /* lines in data, for the drop count */
	struct event flush_ev;          /* ACCESS_FLUSH_MS after the first line */
	bool armed;
	int64_t mono_to_wall;           /* wall clock - monotonic clock (us),
					   read at each batch's first line */
	int64_t sec;                    /* the second the stamps are of */
	/* the second's stamp with the text around it in a line (one copy):
	 * ' - - [30/Nov/2026:16:41:49 +0000] "' (ACCESS_CLF_LEN bytes) and
	 * '","time":"2026-11-30T16:41:49.' (ACCESS_ISO_LEN) */
	char clf[48];
	char iso[48];
	size_t clf_len, iso_len;
	unsigned hits;                  /* the cache's answers seen, for
					   [log] access_hits = 1/N */
};

#endif
