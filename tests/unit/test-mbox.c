/*
 * test-mbox.c -- the worker mailbox: wake-ups posted from several threads
 * at once all arrive, each once, in the order each thread posted them,
 * and the eventfd says so when (and only when) something was posted.
 */
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/mbox.h"
#include "tap.h"

#define PRODUCERS 4
#define PER_PRODUCER 20000

struct msg {
	struct mbox_msg m;
	int producer;
	int seq;
};

static struct mbox box;
static struct msg msgs[PRODUCERS][PER_PRODUCER];
static int next_seq[PRODUCERS];
static int received, out_of_order;

static void on_msg(struct mbox_msg *m)
{
	struct msg *x = (struct msg *)m;

	if (x->seq != next_seq[x->producer])
		out_of_order++;
	next_seq[x->producer] = x->seq + 1;
	received++;
}

static void *producer(void *arg)
{
	int id = (int)(long)arg;

	for (int i = 0; i < PER_PRODUCER; i++) {
		msgs[id][i].m.fn = on_msg;
		msgs[id][i].producer = id;
		msgs[id][i].seq = i;
		mbox_post(&box, &msgs[id][i].m);
	}
	return NULL;
}

static bool readable(int timeout_ms)
{
	struct pollfd p = { .fd = box.fd, .events = POLLIN };

	return poll(&p, 1, timeout_ms) == 1;
}

static void run(struct mbox_msg *list)
{
	while (list) {
		struct mbox_msg *m = list;

		list = m->next;
		m->fn(m);
	}
}

int main(void)
{
	pthread_t t[PRODUCERS];
	struct msg one = { .m.fn = on_msg, .producer = 0, .seq = 0 };
	int rounds = 0, idle = 0;

	tap_ok(mbox_init(&box) == 0, "mbox_init");
	tap_ok(!readable(0), "an empty mailbox is not readable");
	tap_ok(mbox_take(&box) == NULL, "nothing to take from an empty mailbox");

	mbox_post(&box, &one.m);
	tap_ok(readable(0), "a post makes the eventfd readable");
	run(mbox_take(&box));
	tap_is_int(received, 1, "the posted message ran once");
	tap_ok(!readable(0), "taking clears the eventfd");
	received = 0;
	next_seq[0] = 0;

	{
		struct msg three[3] = {
			{ .m.fn = on_msg, .producer = 0, .seq = 0 },
			{ .m.fn = on_msg, .producer = 0, .seq = 1 },
			{ .m.fn = on_msg, .producer = 0, .seq = 2 },
		};
		uint64_t v = 0;

		for (int i = 0; i < 3; i++)
			mbox_post(&box, &three[i].m);
		/* what mbox_take does, with the counter kept */
		tap_ok(read(box.fd, &v, sizeof(v)) == sizeof(v) && v == 1,
		       "three posts to an idle mailbox poke it once (counter %llu)", (unsigned long long)v);
		pthread_mutex_lock(&box.lock);
		run(box.head);
		box.head = NULL;
		box.tail = &box.head;
		pthread_mutex_unlock(&box.lock);
		tap_is_int(received, 3, "and all three are taken by that one wake-up");
	}
	received = 0;
	next_seq[0] = 0;

	for (long i = 0; i < PRODUCERS; i++)
		pthread_create(&t[i], NULL, producer, (void *)i);
	/* the owner's loop: wait for the poke, take, run; bounded in time
	 * (a message left without a poke would leave it waiting: 3 s in a
	 * row without one ends the loop) */
	while (received < PRODUCERS * PER_PRODUCER && rounds < 1000000 && idle < 3) {
		if (readable(1000)) {
			run(mbox_take(&box));
			idle = 0;
		} else {
			idle++;
		}
		rounds++;
	}
	for (int i = 0; i < PRODUCERS; i++)
		pthread_join(t[i], NULL);
	tap_is_int(received, PRODUCERS * PER_PRODUCER, "every message arrived through a poke (none left unannounced)");
	run(mbox_take(&box));
	tap_is_int(received, PRODUCERS * PER_PRODUCER, "every message posted from %d threads arrived once",
		   PRODUCERS);
	tap_is_int(out_of_order, 0, "each thread's messages arrived in the order it posted them");
	tap_ok(!readable(0), "nothing left once all were taken");
	mbox_destroy(&box);
	return tap_done();
}
