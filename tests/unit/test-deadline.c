/*
 * test-deadline.c -- a lazily re-armed timeout on a real event base: it
 * ends at the last deadline set, never at an earlier one its timer was
 * still armed for, never before it; a cleared one never ends; one set
 * sooner than its timer moves the timer; one set to 0 ends at the next
 * turn of the loop; one set in a handler's turn runs from the turn's start.
 */
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <event2/event.h>

#include "base/deadline.h"
#include "tap.h"

struct probe {
	struct deadline d;
	struct event_base *base;
	int fired;              /* deadline_fired said true */
	int calls;              /* the callback ran */
	int64_t at;             /* when it said true */
};

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct probe *p = arg;

	(void)fd;
	(void)what;
	p->calls++;
	if (deadline_fired(&p->d)) {
		p->fired++;
		p->at = now_us();
	}
}

/* Runs the loop for ms milliseconds (a timer of its own ends it). */
static void run_for(struct event_base *base, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
}

int main(void)
{
	struct event_base *base = event_base_new();
	struct probe p = { .base = base };
	int64_t set_at, turn_at, outer;

	deadline_assign(&p.d, base, on_timer, &p);

	/* restarted while its timer runs: the end moves, the timer does not */
	deadline_set(&p.d, 100000);
	run_for(base, 60);
	set_at = now_us();
	deadline_set(&p.d, 100000);
	run_for(base, 300);
	tap_is_int(p.fired, 1, "restarted at 60 ms: the timeout ends once");
	tap_ok(p.at - set_at >= 100000, "... not before 100 ms after the restart (%lld µs)",
	       (long long)(p.at - set_at));
	tap_ok(p.at - set_at < 100000 + 50000, "... and not long after it (%lld µs)",
	       (long long)(p.at - set_at));
	tap_ok(p.calls == 2, "... the timer ran at the old deadline and again at the new one (%d)", p.calls);

	/* cleared: the timer may still run, the timeout does not end */
	p.fired = p.calls = 0;
	deadline_set(&p.d, 50000);
	deadline_clear(&p.d);
	run_for(base, 150);
	tap_is_int(p.fired, 0, "cleared: the timeout does not end");

	/* set sooner than the timer is armed for: the timer moves */
	p.fired = p.calls = 0;
	deadline_set(&p.d, 1000000);
	set_at = now_us();
	deadline_set(&p.d, 50000);
	run_for(base, 200);
	tap_ok(p.fired == 1 && p.at - set_at >= 50000 && p.at - set_at < 150000,
	       "set sooner than before: ends at the sooner deadline (%lld µs)", (long long)(p.at - set_at));

	/* 0: the next turn of the loop */
	p.fired = p.calls = 0;
	deadline_set(&p.d, 0);
	event_base_loop(base, EVLOOP_ONCE);
	tap_is_int(p.fired, 1, "set to 0: ends at the next turn of the loop");

	/* a handler's turn: one clock reading for what it sets; a timeout
	 * set in it runs from the turn's start, never from before it */
	p.fired = p.calls = 0;
	outer = deadline_turn_begin();
	turn_at = deadline_now_us();
	for (int spin = 0; spin < 100000000 && now_us() - turn_at < 2000; spin++)
		;
	tap_ok(deadline_now_us() == turn_at, "in a turn: now is the turn's start");
	deadline_set(&p.d, 50000);
	deadline_turn_end(outer);
	tap_ok(outer == 0 && deadline_now_us() >= turn_at + 2000, "after the turn: the clock again");
	run_for(base, 200);
	tap_ok(p.fired == 1 && p.at - turn_at >= 50000 && p.at - turn_at < 150000,
	       "set in a turn: ends 50 ms after the turn's start (%lld µs)", (long long)(p.at - turn_at));

	/* stopped: removed from the base */
	p.fired = p.calls = 0;
	deadline_set(&p.d, 20000);
	deadline_stop(&p.d);
	tap_ok(!event_pending(&p.d.ev, EV_TIMEOUT, NULL), "stopped: the timer is not pending");
	run_for(base, 60);
	tap_is_int(p.calls, 0, "... and does not run");

	event_base_free(base);
	return tap_done();
}
