/*
 * proxy.c -- the running daemon, on the main thread: builds the first
 * snapshot, opens one SO_REUSEPORT listener per worker, starts the workers,
 * then runs the main event loop for signals until told to stop.
 *
 * ringproxy never forks into the background: it runs in the foreground and
 * logs to stderr, as systemd and containers expect.
 */
#include "proxy.h"

#include <curl/curl.h>
#include <errno.h>
#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conn.h"
#include "health.h"
#include "log.h"
#include "snapshot.h"
#include "worker.h"

struct proxy_main {
	struct proxy p;
	struct event_base *base;
	struct snapshot *snap;
	struct health *health;
	int stop_signal;
};

static void proxy_on_stop(evutil_socket_t sig, short what, void *arg)
{
	struct proxy_main *m = arg;

	(void)what;
	m->stop_signal = (int)sig;
	event_base_loopbreak(m->base);
}

/* The signals the main loop handles: one table. */
static const struct {
	int sig;
	event_callback_fn cb;
} proxy_signals[] = {
	{ SIGTERM, proxy_on_stop },
	{ SIGINT, proxy_on_stop },
};

#define PROXY_NSIGNALS (sizeof(proxy_signals) / sizeof(proxy_signals[0]))

int proxy_run(const char *path, struct conf *conf)
{
	struct proxy_main m;
	struct event *sigev[PROXY_NSIGNALS] = { 0 };
	struct sockaddr_storage addr;
	socklen_t addrlen;
	char err[512];
	unsigned nworkers;
	int port = -1, rc = 1;
	long ncpu;

	memset(&m, 0, sizeof(m));
	signal(SIGPIPE, SIG_IGN);
	nworkers = conf->workers;
	if (nworkers == 0) {
		ncpu = sysconf(_SC_NPROCESSORS_ONLN);
		nworkers = ncpu > 0 ? (unsigned)ncpu : 1;
	}
	if (conn_parse_addr(conf->listen, &addr, &addrlen, err, sizeof(err)) < 0) {
		log_error("%s: %s", path, err);
		conf_free(conf);
		return 1;
	}
	atomic_store(&m.p.max_conns, conf->max_connections);
	m.snap = snapshot_new(conf, 1, err, sizeof(err));
	if (!m.snap) {
		log_error("%s: %s", path, err);
		conf_free(conf);
		return 1;
	}
	m.base = event_base_new();
	m.p.workers = calloc(nworkers, sizeof(*m.p.workers));
	if (!m.base || !m.p.workers) {
		log_error("out of memory");
		goto out;
	}
	for (unsigned i = 0; i < nworkers; i++) {
		int fd = conn_listen((struct sockaddr *)&addr, addrlen, err, sizeof(err));

		if (fd < 0) {
			log_error("listen on %s: %s", conf->listen, err);
			goto out;
		}
		if (port < 0) {
			/* port 0 asks for any free port: every worker's
			 * listener then shares the one the first got */
			port = conn_local_port(fd);
			if (addr.ss_family == AF_INET6)
				((struct sockaddr_in6 *)&addr)->sin6_port = htons((uint16_t)port);
			else
				((struct sockaddr_in *)&addr)->sin_port = htons((uint16_t)port);
		}
		snapshot_ref(m.snap);
		m.p.workers[i] = worker_new(&m.p, (int)i, fd, m.snap, err, sizeof(err));
		if (!m.p.workers[i]) {
			snapshot_unref(m.snap);
			close(fd);
			log_error("%s", err);
			goto out;
		}
		m.p.nworkers++;
	}
	for (unsigned i = 0; i < m.p.nworkers; i++) {
		if (worker_start(m.p.workers[i], err, sizeof(err)) < 0) {
			log_error("%s", err);
			goto out;
		}
	}
	for (size_t i = 0; i < PROXY_NSIGNALS; i++) {
		sigev[i] = evsignal_new(m.base, proxy_signals[i].sig, proxy_signals[i].cb, &m);
		if (!sigev[i] || event_add(sigev[i], NULL) < 0) {
			log_error("cannot handle signal %d", proxy_signals[i].sig);
			goto out;
		}
	}
	m.health = health_new(m.base);
	if (!m.health) {
		log_error("cannot set up health checks");
		goto out;
	}
	health_apply(m.health, m.snap);
	{
		char host[64];

		conn_peer_ip(&addr, host, sizeof(host));
		log_info("listening on %s%s%s:%d with %u workers; %zu backends, %zu ring points (%s)",
			 addr.ss_family == AF_INET6 ? "[" : "", host,
			 addr.ss_family == AF_INET6 ? "]" : "", port, m.p.nworkers,
			 m.snap->nbe, m.snap->ring->npoints, path);
	}
	event_base_dispatch(m.base);
	log_info("stopping on %s", strsignal(m.stop_signal));
	rc = 0;
out:
	for (unsigned i = 0; i < m.p.nworkers; i++)
		worker_post_stop(m.p.workers[i]);
	for (unsigned i = 0; i < m.p.nworkers; i++)
		worker_free(m.p.workers[i]);
	health_free(m.health);
	for (size_t i = 0; i < PROXY_NSIGNALS; i++)
		if (sigev[i])
			event_free(sigev[i]);
	free(m.p.workers);
	snapshot_unref(m.snap);
	snapshot_registry_free();
	if (m.base)
		event_base_free(m.base);
	return rc;
}
