/*
 * mbox.h -- a worker's mailbox: wake-ups posted from any thread, run on the
 * worker's own thread. An eventfd tells the worker's event loop that
 * something is queued; the queue is an intrusive list under one mutex, so
 * posting allocates nothing and a message is as large as its owner wants
 * (it is embedded in the owner's struct).
 */
#ifndef RINGPROXY_MBOX_H
#define RINGPROXY_MBOX_H

#include <pthread.h>

#include "base/mbox-t.h"

/* 0, or -1 (errno set). The owner watches mbox->fd for reading. */
int mbox_init(struct mbox *b);
/* Messages still queued are dropped (not run). NULL-safe fields. */
void mbox_destroy(struct mbox *b);

/* Any thread: queue m, and poke the eventfd if the queue was empty. The
 * only cost on the poster's side is the mutex and at most one write(2). */
void mbox_post(struct mbox *b, struct mbox_msg *m);

/* Owner's thread: whatever lock-free flags ride along with the eventfd
 * (a stop, a snapshot) are the owner's to check; this clears the eventfd
 * and returns the queued messages, oldest first (NULL if none), as a list
 * through next that the caller runs. */
struct mbox_msg *mbox_take(struct mbox *b);

/* Poke the eventfd without a message (the owner checks its flags). */
void mbox_poke(struct mbox *b);

#endif
