/*
 * deadline.c -- a connection's timeout as a lazily re-armed libevent timer,
 * on the connection's worker thread.
 *
 * Each request restarts its connections' timeouts two or three times (the
 * client's after the response, the backend's response timeout when the
 * request is out and again for the body, the idle timeout in the pool).
 * Re-adding the timer each time took about 1,900 instructions of a
 * forwarded request in libevent (a delete and an insert). Here a restart
 * only stores the new deadline when the timer already fires no later
 * than it; a timer that fires before the deadline is set again for the
 * rest (NGINX defers its timers the same way, NGX_TIMER_LAZY_DELAY).
 * Clearing leaves the timer as it is: when it fires, nothing is due.
 *
 * Accuracy: the deadline is now + timeout on CLOCK_MONOTONIC (precise,
 * through the vDSO; in a handler's turn, the clock at the handler's
 * start, so a timeout set there ends early by at most what the handler
 * had run, microseconds) and it is compared with the same clock when the
 * timer fires, so a timeout never ends earlier than that. libevent's own
 * clock (the loop's cached CLOCK_MONOTONIC_COARSE on 2.1) is never ahead
 * of it, so the timer
 * fires at most a tick early, which costs one more short wait, and late
 * by what libevent's timers are late anyway (its tick, the loop's 1 ms
 * rounding of epoll_wait, the callbacks before it). A timer set again
 * for the rest is an exact duration, so these use libevent's heap, not
 * its common timeouts; they are rare (one a period of the shortest
 * timeout per connection, not one a request).
 */
#include "base/deadline.h"

_Thread_local int64_t deadline_turn_us;

/* The timer fires us µs from now, at the latest. */
static void deadline_arm(struct deadline *d, int64_t now, int64_t us)
{
	struct timeval tv = { (time_t)(us / 1000000), (suseconds_t)(us % 1000000) };

	event_add(&d->ev, &tv);
	d->armed = now + us;
}

void deadline_assign(struct deadline *d, struct event_base *base, event_callback_fn cb,
		     void *arg)
{
	evtimer_assign(&d->ev, base, cb, arg);
	d->due = 0;
	d->armed = 0;
}

void deadline_set(struct deadline *d, int64_t us)
{
	int64_t now = deadline_now_us();

	d->due = now + us;
	/* a timer that fires no later than the new deadline stays: when it
	 * does, it is set again for the rest */
	if (d->armed != 0 && d->armed <= d->due)
		return;
	deadline_arm(d, now, us);
}

void deadline_clear(struct deadline *d)
{
	d->due = 0;
}

void deadline_stop(struct deadline *d)
{
	event_del(&d->ev);
	d->due = 0;
	d->armed = 0;
}

bool deadline_fired(struct deadline *d)
{
	int64_t now;

	d->armed = 0;
	if (d->due == 0)
		return false;
	now = deadline_now_us();
	if (now >= d->due) {
		d->due = 0;
		return true;
	}
	deadline_arm(d, now, d->due - now);
	return false;
}
