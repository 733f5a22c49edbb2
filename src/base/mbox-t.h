/*
 * mbox-t.h -- a mailbox's types (mbox.h has its functions): the message an
 * owner embeds in its struct, and the queue a worker keeps.
 */
#ifndef RINGPROXY_MBOX_T_H
#define RINGPROXY_MBOX_T_H

#include <pthread.h>

/* One wake-up. The poster owns the memory and sets fn; next is mbox.c's
 * while the message is queued. A message may be queued once at a time:
 * the poster must not post it again (nor free it) before fn has run. */
struct mbox_msg {
	struct mbox_msg *next;
	void (*fn)(struct mbox_msg *m);         /* runs on the owner's thread */
};

struct mbox {
	pthread_mutex_t lock;
	int fd;                                 /* eventfd, non-blocking */
	struct mbox_msg *head, **tail;          /* posted, oldest first */
};

#endif
