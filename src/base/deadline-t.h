/*
 * deadline-t.h -- a connection's timeout, a libevent timer that is re-armed
 * lazily (deadline.c has its functions). Shared by the connections of
 * worker-t.h; each belongs to one worker thread.
 */
#ifndef RINGPROXY_DEADLINE_T_H
#define RINGPROXY_DEADLINE_T_H

#include <event2/event_struct.h>
#include <stdint.h>

struct deadline {
	struct event ev;        /* the timer; its callback asks deadline_fired */
	int64_t due;            /* CLOCK_MONOTONIC µs at which the timeout is
				   reached; 0: none */
	int64_t armed;          /* when ev was set to fire (the same clock);
				   0: ev is not pending */
};

#endif
