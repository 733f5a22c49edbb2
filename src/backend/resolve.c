/*
 * resolve.c -- getaddrinfo on a thread of its own, for the main loop.
 *
 * The main thread queues a job (host, port, callback) under a mutex; one
 * resolver thread, started with the first job, takes jobs in order, looks
 * each up and writes the job's pointer into a pipe; the main loop reads
 * the pipe and runs the callbacks. Lookups are few (a backend whose name
 * did not resolve, once per health interval), so one thread doing them
 * one at a time is enough, and nothing else in the process waits for
 * them. A job belongs to the thread between taking it and writing it to
 * the pipe; cancelling marks it, and the main loop frees it unrun when it
 * comes back. Stopping joins the thread, which waits for the lookup in
 * progress to end: bounded by the name servers' timeouts (resolv.conf).
 */
#include "backend/resolve.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"

struct resolve_job {
	struct resolve_job *next;       /* in the queue, under lock */
	struct resolve_job *prev_out, *next_out; /* main thread only: every
					   job not yet back from the thread */
	char *host;
	char port[8];
	resolve_done_fn *done;
	void *arg;
	bool cancelled;                 /* main thread only */
	/* written by the resolver thread before it hands the job back */
	int rc;
	struct sockaddr_storage addr;
	socklen_t len;
};

struct resolver {
	struct event_base *base;
	struct event *ev;               /* the pipe's read end */
	int pipe[2];
	pthread_mutex_t lock;
	pthread_cond_t wake;
	struct resolve_job *head, **tail;       /* queued, under lock */
	struct resolve_job *busy;       /* the thread's job, under lock */
	struct resolve_job *out;        /* main thread only: jobs queued, in
					   progress or in the pipe */
	bool stop;                      /* under lock */
	bool started;                   /* main thread only */
	pthread_t thread;
};

static void resolve_job_free(struct resolve_job *j)
{
	if (!j)
		return;
	free(j->host);
	free(j);
}

/* Main thread: j is back (or dropped); off the list of jobs out. */
static void resolve_unlink(struct resolver *r, struct resolve_job *j)
{
	if (j->prev_out)
		j->prev_out->next_out = j->next_out;
	else
		r->out = j->next_out;
	if (j->next_out)
		j->next_out->prev_out = j->prev_out;
}

static void *resolve_thread(void *arg)
{
	struct resolver *r = arg;

	for (;;) {
		struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_family = AF_UNSPEC };
		struct addrinfo *res = NULL;
		struct resolve_job *j;

		pthread_mutex_lock(&r->lock);
		while (!r->head && !r->stop)
			pthread_cond_wait(&r->wake, &r->lock);
		if (r->stop) {
			pthread_mutex_unlock(&r->lock);
			return NULL;
		}
		j = r->head;
		r->head = j->next;
		if (!r->head)
			r->tail = &r->head;
		r->busy = j;
		pthread_mutex_unlock(&r->lock);

		j->rc = getaddrinfo(j->host, j->port, &hints, &res);
		if (j->rc == 0 && !res)
			j->rc = EAI_NONAME;
		if (j->rc == 0) {
			memcpy(&j->addr, res->ai_addr, res->ai_addrlen);
			j->len = res->ai_addrlen;
		}
		if (res)
			freeaddrinfo(res);

		pthread_mutex_lock(&r->lock);
		r->busy = NULL;
		pthread_mutex_unlock(&r->lock);
		/* a pointer is far below PIPE_BUF: the write is whole; the
		 * pipe blocks on this side (the main loop reads it as soon as
		 * it runs) and is closed only after this thread ended */
		if (write(r->pipe[1], &j, sizeof(j)) != (ssize_t)sizeof(j))
			log_error("resolve %s: the result is lost: %s", j->host, strerror(errno));
	}
}

/* The main loop: finished jobs come back through the pipe. */
static void resolve_on_pipe(evutil_socket_t fd, short what, void *arg)
{
	struct resolver *r = arg;
	struct resolve_job *j;

	(void)what;
	while (read(fd, &j, sizeof(j)) == (ssize_t)sizeof(j)) {
		resolve_unlink(r, j);
		if (!j->cancelled)
			j->done(j->arg, j->rc, (const struct sockaddr *)&j->addr, j->len);
		resolve_job_free(j);
	}
}

struct resolver *resolver_new(struct event_base *base)
{
	struct resolver *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->base = base;
	r->tail = &r->head;
	r->pipe[0] = r->pipe[1] = -1;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->wake, NULL);
	if (pipe2(r->pipe, O_CLOEXEC) < 0 || fcntl(r->pipe[0], F_SETFL, O_NONBLOCK) < 0)
		goto fail;
	r->ev = event_new(base, r->pipe[0], EV_READ | EV_PERSIST, resolve_on_pipe, r);
	if (!r->ev || event_add(r->ev, NULL) < 0)
		goto fail;
	return r;
fail:
	resolver_free(r);
	return NULL;
}

int resolver_lookup(struct resolver *r, const char *host, uint16_t port,
		    resolve_done_fn *done, void *arg)
{
	struct resolve_job *j = calloc(1, sizeof(*j));
	int rc;

	if (!j || !(j->host = strdup(host))) {
		resolve_job_free(j);
		log_error("resolve %s: out of memory", host);
		return -1;
	}
	snprintf(j->port, sizeof(j->port), "%u", port);
	j->done = done;
	j->arg = arg;
	if (!r->started) {
		rc = pthread_create(&r->thread, NULL, resolve_thread, r);
		if (rc != 0) {
			log_error("resolve %s: cannot start the resolver thread: %s", host, strerror(rc));
			resolve_job_free(j);
			return -1;
		}
		r->started = true;
	}
	j->next_out = r->out;
	if (r->out)
		r->out->prev_out = j;
	r->out = j;
	pthread_mutex_lock(&r->lock);
	*r->tail = j;
	r->tail = &j->next;
	pthread_cond_signal(&r->wake);
	pthread_mutex_unlock(&r->lock);
	return 0;
}

void resolver_cancel(struct resolver *r, void *arg)
{
	struct resolve_job **pp, *j;

	if (!r)
		return;
	/* the queued ones need no lookup any more */
	pthread_mutex_lock(&r->lock);
	for (pp = &r->head; (j = *pp);) {
		if (j->arg == arg) {
			*pp = j->next;
			resolve_unlink(r, j);
			resolve_job_free(j);
		} else {
			pp = &j->next;
		}
	}
	r->tail = &r->head;
	while (*r->tail)
		r->tail = &(*r->tail)->next;
	pthread_mutex_unlock(&r->lock);
	/* the one in progress and those in the pipe come back unrun */
	for (j = r->out; j; j = j->next_out)
		if (j->arg == arg)
			j->cancelled = true;
}

void resolver_free(struct resolver *r)
{
	struct resolve_job *j;

	if (!r)
		return;
	if (r->started) {
		pthread_mutex_lock(&r->lock);
		r->stop = true;
		pthread_cond_signal(&r->wake);
		pthread_mutex_unlock(&r->lock);
		pthread_join(r->thread, NULL);
	}
	/* queued, or finished and not read: nobody waits for them now */
	while ((j = r->out)) {
		resolve_unlink(r, j);
		resolve_job_free(j);
	}
	if (r->ev)
		event_free(r->ev);
	if (r->pipe[0] >= 0)
		close(r->pipe[0]);
	if (r->pipe[1] >= 0)
		close(r->pipe[1]);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->wake);
	free(r);
}
