/*
 * mbox.c -- a worker's mailbox: an intrusive FIFO of wake-ups under one
 * mutex plus an eventfd that wakes the worker's event loop. Posters are
 * any thread (the main thread's reloads and stops, and the cache waking a
 * request that waited for another request's fetch); the taker is the
 * worker's own thread. The mutex is held for a few pointer stores; the
 * eventfd counter folds any number of posts into one wake-up.
 */
#include "base/mbox.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

int mbox_init(struct mbox *b)
{
	b->head = NULL;
	b->tail = &b->head;
	b->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (b->fd < 0)
		return -1;
	if (pthread_mutex_init(&b->lock, NULL) != 0) {
		close(b->fd);
		b->fd = -1;
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

void mbox_destroy(struct mbox *b)
{
	if (b->fd < 0)
		return;
	close(b->fd);
	b->fd = -1;
	pthread_mutex_destroy(&b->lock);
	b->head = NULL;
	b->tail = &b->head;
}

void mbox_poke(struct mbox *b)
{
	uint64_t one = 1;

	/* EAGAIN means the counter is at its maximum: a wake-up is due
	 * anyway */
	(void)!write(b->fd, &one, sizeof(one));
}

void mbox_post(struct mbox *b, struct mbox_msg *m)
{
	bool first;

	m->next = NULL;
	pthread_mutex_lock(&b->lock);
	first = b->head == NULL;
	*b->tail = m;
	b->tail = &m->next;
	pthread_mutex_unlock(&b->lock);
	/* only the post that finds the queue empty pokes: the owner reads
	 * the eventfd before it takes the queue (mbox_take), so a message
	 * queued behind another is taken with it, and one posted after the
	 * take finds the queue empty again. A fetch that ends with 200
	 * waiters on a worker makes one write(2), not 200. */
	if (first)
		mbox_poke(b);
}

struct mbox_msg *mbox_take(struct mbox *b)
{
	struct mbox_msg *list;
	uint64_t v;

	/* clear the counter first: a post after this read pokes again, so
	 * nothing posted is left without a wake-up */
	(void)!read(b->fd, &v, sizeof(v));
	pthread_mutex_lock(&b->lock);
	list = b->head;
	b->head = NULL;
	b->tail = &b->head;
	pthread_mutex_unlock(&b->lock);
	return list;
}
