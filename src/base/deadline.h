/*
 * deadline.h -- a connection's timeout, re-armed lazily: restarting it
 * (every request restarts two or three) only stores the new deadline;
 * the libevent timer stays where it is when that is no later, and when it
 * fires early it is set again for what is left. Worker thread only.
 */
#ifndef RINGPROXY_DEADLINE_H
#define RINGPROXY_DEADLINE_H

#include <event2/event.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "base/deadline-t.h"

/* The clock in microseconds, CLOCK_MONOTONIC: read through the vDSO (no
 * syscall; about 20 ns with the TSC clocksource). Not libevent's cached
 * loop time: on 2.1 that is CLOCK_MONOTONIC_COARSE, a tick of 1-4 ms,
 * which would end a timeout early and put every short duration at 0; its
 * precise mode would add a timerfd_settime per turn of the loop. */
static inline int64_t deadline_clock_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The thread's turn: the clock when the event handler running now began
 * (deadline_turn_begin), 0 outside one. */
extern _Thread_local int64_t deadline_turn_us;

/* Now in microseconds: the start of the running handler's turn when it
 * began one, else the clock. A forward's handlers set and read a timeout
 * or a timestamp nine times; one clock read each serves them all, and
 * what a timeout set in a turn loses is the handler's own run so far
 * (microseconds). */
static inline int64_t deadline_now_us(void)
{
	return deadline_turn_us ? deadline_turn_us : deadline_clock_us();
}

/* A connection's event handler begins a turn: until deadline_turn_end,
 * deadline_now_us is this moment. Returns what deadline_turn_end gets
 * back (the turn around this one, 0: none). */
static inline int64_t deadline_turn_begin(void)
{
	int64_t outer = deadline_turn_us;

	deadline_turn_us = deadline_clock_us();
	return outer;
}

static inline void deadline_turn_end(int64_t outer)
{
	deadline_turn_us = outer;
}

/* Sets up d's timer on base (cb(fd -1, EV_TIMEOUT, arg) when it fires);
 * no timeout is due. */
void deadline_assign(struct deadline *d, struct event_base *base, event_callback_fn cb,
		     void *arg);

/* The timeout is reached us µs from now (0: at the next turn of the
 * loop, after the events already waiting), whatever was due before. */
void deadline_set(struct deadline *d, int64_t us);

/* No timeout is due. The timer may still fire; deadline_fired tells. */
void deadline_clear(struct deadline *d);

/* No timeout is due and the timer is removed from the base: before the
 * connection's struct is reused or freed. */
void deadline_stop(struct deadline *d);

/* Asked first by the timer's callback: true when the timeout is reached
 * (it is then no longer due), false when the timer fired early or for a
 * timeout since cleared; it is set again for what is left, if anything. */
bool deadline_fired(struct deadline *d);

#endif
