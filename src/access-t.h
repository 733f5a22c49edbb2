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

struct access_buf {
	char *data;                     /* NULL until the first line */
	size_t len;
	unsigned lines;                 /* lines in data, for the drop count */
	struct event flush_ev;          /* ACCESS_FLUSH_MS after the first line */
	bool armed;
	int64_t mono_to_wall;           /* wall clock - monotonic clock (us),
					   read at each batch's first line */
	int64_t sec;                    /* the second the stamps are of */
	char clf[80];                   /* [30/Nov/2026:16:41:49 +0000] (room
					   for any int the compiler imagines) */
	char iso[80];                   /* 2026-11-30T16:41:49 */
	size_t clf_len, iso_len;
};

#endif
