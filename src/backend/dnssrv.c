/*
 * dnssrv.c -- [discovery] srv on the main thread's event base. Every
 * interval one round: c-ares asks each SRV name, then each target's
 * address (A, else AAAA), all at once and without blocking: c-ares'
 * sockets are libevent events (its socket-state callback adds, changes
 * and deletes them) and its timeouts one timer. A reply with the TC bit
 * is asked again over TCP by c-ares itself (ARES_FLAG_IGNTC not set), so
 * an answer of more targets than 512 bytes of UDP carry arrives whole.
 *
 * A round is a good answer only when every SRV name answered NOERROR
 * with at least one target; else it is the first failure's kind. Either
 * goes to the rules (config/discover.c), which decide what changes, and
 * then to the caller's callback. A target whose address cannot be found
 * is passed without one: the rules keep the address they knew. Main
 * thread only; the poller owns the queries' contexts, which c-ares gives
 * back through each query's callback, also when it is cancelled.
 */
#include "backend/dnssrv.h"

#include <ares.h>
#include <arpa/inet.h>
#include <errno.h>
#include <arpa/nameser.h>
#include <event2/event.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "config/conf.h"
#include "config/discover.h"

/* One socket c-ares has open, as a libevent event. */
struct dnssrv_sock {
	ares_socket_t fd;
	struct event *ev;
	struct dnssrv_sock *next;
	struct dnssrv *s;
};

/* A target of this round, with its address once found. */
struct dnssrv_target {
	char *name;
	char addr[INET6_ADDRSTRLEN];
	uint16_t port, weight;
};

struct dnssrv {
	struct event_base *base;
	ares_channel ch;
	bool ch_ok;
	struct event *timer;            /* c-ares' next timeout */
	struct event *poll;             /* the next round */
	struct dnssrv_sock *socks;
	struct discover *d;
	dnssrv_round_fn *done;
	void *arg;
	char *srv;                      /* the names as written */
	char *buf;                      /* ... split, for names */
	char **names;
	size_t nnames;
	char resolver[64];
	uint64_t interval_ms;
	/* the round in progress */
	bool busy;
	uint64_t round;                 /* its number: a late reply of an
					   older round is dropped */
	int pending;                    /* queries not answered */
	int fail;                       /* the first failure's kind, -1 */
	struct dnssrv_target *t;
	size_t nt, cap;
	size_t asked;                   /* targets whose address was asked */
	unsigned addr_out;              /* address queries in flight */
	uint32_t ttl;
	int tcp;
	struct timespec started;
	/* shown */
	struct dnssrv_info info;
};

/* What a query's callback needs: its poller, its round, and for an
 * address query the target's index. */
struct dnssrv_q {
	struct dnssrv *s;
	uint64_t round;
	size_t target;
	int type;
};

static void dnssrv_arm(struct dnssrv *s)
{
	struct timeval tv, *tvp;

	if (!s->ch_ok)
		return;
	tvp = ares_timeout(s->ch, NULL, &tv);
	if (tvp)
		evtimer_add(s->timer, tvp);
	else
		evtimer_del(s->timer);
}

static void dnssrv_on_sock(evutil_socket_t fd, short what, void *arg)
{
	struct dnssrv_sock *k = arg;
	struct dnssrv *s = k->s;

	ares_process_fd(s->ch, (what & EV_READ) ? fd : ARES_SOCKET_BAD, (what & EV_WRITE) ? fd : ARES_SOCKET_BAD);
	dnssrv_arm(s);
}

static void dnssrv_on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct dnssrv *s = arg;

	(void)fd;
	(void)what;
	ares_process_fd(s->ch, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
	dnssrv_arm(s);
}

/* c-ares: socket fd opened, changed or closed. */
static void dnssrv_sock_state(void *data, ares_socket_t fd, int readable, int writable)
{
	struct dnssrv *s = data;
	struct dnssrv_sock **pp, *k;

	for (pp = &s->socks; (k = *pp) && k->fd != fd; pp = &k->next)
		;
	if (!readable && !writable) {
		if (k) {
			*pp = k->next;
			event_free(k->ev);
			free(k);
		}
		return;
	}
	if (!k) {
		if (!(k = calloc(1, sizeof(*k))))
			goto fail;
		k->fd = fd;
		k->s = s;
		k->next = s->socks;
		s->socks = k;
	} else if (k->ev) {
		event_free(k->ev);
	}
	k->ev = event_new(s->base, fd, EV_PERSIST | (readable ? EV_READ : 0) | (writable ? EV_WRITE : 0),
			  dnssrv_on_sock, k);
	if (k->ev && event_add(k->ev, NULL) == 0)
		return;
fail:
	/* the query times out and the round fails: nothing is changed */
	log_error("discovery: cannot watch a DNS socket (out of memory); this poll will fail");
}

/* The failure kind of a c-ares status. */
static int dnssrv_kind(int status)
{
	switch (status) {
	case ARES_ETIMEOUT:
		return DISCOVER_F_TIMEOUT;
	case ARES_ESERVFAIL:
		return DISCOVER_F_SERVFAIL;
	case ARES_EREFUSED:
		return DISCOVER_F_REFUSED;
	case ARES_ENOTFOUND:
		return DISCOVER_F_NXDOMAIN;
	case ARES_ENODATA:
		return DISCOVER_F_EMPTY;
	case ARES_EBADRESP:
	case ARES_EFORMERR:
		return DISCOVER_F_PARSE;
	default:
		return DISCOVER_F_OTHER;
	}
}

/* The smallest TTL of abuf's answer records (ares_parse_srv_reply
 * drops them); UINT32_MAX when none could be read. */
static uint32_t dnssrv_ttl(const unsigned char *abuf, int alen)
{
	const unsigned char *p = abuf + 12;
	uint32_t ttl = UINT32_MAX;
	unsigned qd, an;
	long enclen;
	char *name;

	if (alen < 12)
		return ttl;
	qd = (unsigned)(abuf[4] << 8 | abuf[5]);
	an = (unsigned)(abuf[6] << 8 | abuf[7]);
	for (unsigned i = 0; i < qd + an; i++) {
		if (ares_expand_name(p, abuf, alen, &name, &enclen) != ARES_SUCCESS)
			return ttl;
		ares_free_string(name);
		p += enclen;
		if (i < qd) {
			p += 4;
			if (p > abuf + alen)
				return ttl;
			continue;
		}
		if (p + 10 > abuf + alen)
			return ttl;
		uint32_t t = (uint32_t)p[4] << 24 | (uint32_t)p[5] << 16 | (uint32_t)p[6] << 8 | p[7];
		if (t < ttl)
			ttl = t;
		p += 10 + (p[8] << 8 | p[9]);
		if (p > abuf + alen)
			return ttl;
	}
	return ttl;
}

static void dnssrv_schedule(struct dnssrv *s)
{
	uint64_t ms = s->interval_ms;
	struct timeval tv;

	/* never faster than the answer may be cached */
	if (s->ttl != UINT32_MAX && (uint64_t)s->ttl * 1000 > ms)
		ms = (uint64_t)s->ttl * 1000;
	s->info.interval_ms = ms;
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000) * 1000;
	evtimer_add(s->poll, &tv);
}

static void dnssrv_round_free(struct dnssrv *s)
{
	for (size_t i = 0; i < s->nt; i++)
		free(s->t[i].name);
	s->nt = 0;
}

/* The rules' word on a target that cannot be a member, or a stable one. */
static void dnssrv_warn(void *arg, const char *target, const char *why)
{
	(void)arg;
	log_warn("discovery: target %s: %s", target, why);
}

/* The last answer of the round came: hand it to the rules. */
static void dnssrv_round_end(struct dnssrv *s)
{
	struct discover_target *dt = NULL;
	struct timespec now;
	int64_t now_ms;

	clock_gettime(CLOCK_MONOTONIC, &now);
	now_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
	s->info.last_round_us = (uint64_t)((now.tv_sec - s->started.tv_sec) * 1000000 +
					   (now.tv_nsec - s->started.tv_nsec) / 1000);
	s->busy = false;
	if (s->fail < 0 && s->nt == 0)
		s->fail = DISCOVER_F_EMPTY;
	if (s->fail < 0 && !(dt = calloc(s->nt, sizeof(*dt))))
		s->fail = DISCOVER_F_OTHER;
	if (s->fail >= 0) {
		discover_failed(s->d, s->fail);
	} else {
		for (size_t i = 0; i < s->nt; i++)
			dt[i] = (struct discover_target){ s->t[i].name, s->t[i].addr, s->t[i].port, s->t[i].weight };
		if (discover_good(s->d, now_ms, dt, s->nt, dnssrv_warn, NULL) < 0)
			log_error("discovery: out of memory for an answer; the ring stays as it is");
		s->info.targets = s->nt;
		s->info.ttl = s->ttl;
		s->info.tcp = s->tcp;
	}
	free(dt);
	dnssrv_round_free(s);
	dnssrv_schedule(s);
	s->done(s->arg);
}

static void dnssrv_answered(struct dnssrv *s)
{
	if (--s->pending == 0)
		dnssrv_round_end(s);
}

static void dnssrv_ask_addrs(struct dnssrv *s);

/* A target's address query answered. */
static void dnssrv_on_addr(void *arg, int status, int timeouts, unsigned char *abuf, int alen)
{
	struct dnssrv_q *q = arg;
	struct dnssrv *s = q->s;
	struct dnssrv_target *t;

	(void)timeouts;
	if (status == ARES_EDESTRUCTION || status == ARES_ECANCELLED || q->round != s->round) {
		free(q);
		return;
	}
	t = &s->t[q->target];
	if (status == ARES_SUCCESS && q->type == ns_t_a) {
		struct ares_addrttl a[4];
		int n = 4;

		if (ares_parse_a_reply(abuf, alen, NULL, a, &n) == ARES_SUCCESS && n > 0)
			inet_ntop(AF_INET, &a[0].ipaddr, t->addr, sizeof(t->addr));
	} else if (status == ARES_SUCCESS) {
		struct ares_addr6ttl a[4];
		int n = 4;

		if (ares_parse_aaaa_reply(abuf, alen, NULL, a, &n) == ARES_SUCCESS && n > 0)
			inet_ntop(AF_INET6, &a[0].ip6addr, t->addr, sizeof(t->addr));
	}
	if (!t->addr[0] && q->type == ns_t_a) {
		/* no IPv4 address: its IPv6 one */
		q->type = ns_t_aaaa;
		ares_query(s->ch, t->name, ns_c_in, ns_t_aaaa, dnssrv_on_addr, q);
		return;
	}
	free(q);
	s->addr_out--;
	dnssrv_ask_addrs(s);
	dnssrv_answered(s);
}

/* Address queries in flight at most: a thousand at once overflow a DNS
 * server's socket buffer (unbound with one thread dropped them, and each
 * was asked again after a timeout: a poll of 1,000 targets took 4 s). */
#define DNSSRV_ADDR_WINDOW 32

/* Ask the addresses of the targets not asked yet, up to the window. Each
 * target was counted in pending when its SRV reply came. */
static void dnssrv_ask_addrs(struct dnssrv *s)
{
	while (s->asked < s->nt && s->addr_out < DNSSRV_ADDR_WINDOW) {
		size_t i = s->asked++;
		struct dnssrv_q *q = s->fail < 0 ? malloc(sizeof(*q)) : NULL;

		if (!q) {
			/* failed already, or no memory: the target counts as
			 * answered, the round ends as a failure */
			if (s->fail < 0)
				s->fail = DISCOVER_F_OTHER;
			s->pending--;
			continue;
		}
		*q = (struct dnssrv_q){ s, s->round, i, ns_t_a };
		s->addr_out++;
		ares_query(s->ch, s->t[i].name, ns_c_in, ns_t_a, dnssrv_on_addr, q);
	}
}

/* Keep the targets of one SRV reply; -1 when out of memory. */
static int dnssrv_keep(struct dnssrv *s, const struct ares_srv_reply *r, size_t *first)
{
	*first = s->nt;
	for (; r; r = r->next) {
		if (s->nt == s->cap) {
			size_t cap = s->cap ? 2 * s->cap : 64;
			struct dnssrv_target *t = realloc(s->t, cap * sizeof(*t));

			if (!t)
				return -1;
			s->t = t;
			s->cap = cap;
		}
		memset(&s->t[s->nt], 0, sizeof(s->t[s->nt]));
		if (!(s->t[s->nt].name = strdup(r->host)))
			return -1;
		s->t[s->nt].port = r->port;
		s->t[s->nt].weight = r->weight;
		s->nt++;
	}
	return 0;
}

/* An SRV name answered. */
static void dnssrv_on_srv(void *arg, int status, int timeouts, unsigned char *abuf, int alen)
{
	struct dnssrv_q *q = arg;
	struct dnssrv *s = q->s;
	struct ares_srv_reply *r = NULL;
	size_t first;
	int rc;

	(void)timeouts;
	if (status == ARES_EDESTRUCTION || status == ARES_ECANCELLED || q->round != s->round) {
		free(q);
		return;
	}
	free(q);
	if (status != ARES_SUCCESS) {
		if (s->fail < 0)
			s->fail = dnssrv_kind(status);
		dnssrv_answered(s);
		return;
	}
	rc = ares_parse_srv_reply(abuf, alen, &r);
	if (rc != ARES_SUCCESS || !r) {
		if (s->fail < 0)
			s->fail = rc == ARES_ENODATA || (rc == ARES_SUCCESS && !r) ? DISCOVER_F_EMPTY : DISCOVER_F_PARSE;
	} else if (dnssrv_keep(s, r, &first) < 0) {
		if (s->fail < 0)
			s->fail = DISCOVER_F_OTHER;
	} else {
		uint32_t ttl = dnssrv_ttl(abuf, alen);

		if (ttl < s->ttl)
			s->ttl = ttl;
		/* UDP without EDNS carries 512 bytes: more came over TCP */
		if (alen > 512)
			s->tcp = 1;
		s->pending += (int)(s->nt - first);
		dnssrv_ask_addrs(s);
	}
	if (r)
		ares_free_data(r);
	dnssrv_answered(s);
}

static void dnssrv_on_poll(evutil_socket_t fd, short what, void *arg)
{
	struct dnssrv *s = arg;

	(void)fd;
	(void)what;
	dnssrv_poll_now(s);
}

int dnssrv_poll_now(struct dnssrv *s)
{
	if (s->busy || !s->ch_ok)
		return -1;
	evtimer_del(s->poll);
	s->busy = true;
	s->round++;
	s->fail = -1;
	s->ttl = UINT32_MAX;
	s->tcp = 0;
	s->asked = 0;
	s->addr_out = 0;
	s->pending = 1;                 /* this function's own, so that a
					   reply given at once cannot end the
					   round while names are still asked */
	s->info.rounds++;
	clock_gettime(CLOCK_MONOTONIC, &s->started);
	for (size_t i = 0; i < s->nnames; i++) {
		struct dnssrv_q *q = malloc(sizeof(*q));

		if (!q) {
			s->fail = DISCOVER_F_OTHER;
			break;
		}
		*q = (struct dnssrv_q){ s, s->round, 0, ns_t_srv };
		s->pending++;
		ares_query(s->ch, s->names[i], ns_c_in, ns_t_srv, dnssrv_on_srv, q);
	}
	dnssrv_answered(s);
	if (s->busy)
		dnssrv_arm(s);
	return 0;
}

/* c's srv split into names (s->buf), kept as written for messages
 * (s->srv); the interval. -1 with err. */
static int dnssrv_settings(struct dnssrv *s, const struct conf *c, char *err, size_t len)
{
	char *srv = strdup(c->disc_srv), *buf = strdup(c->disc_srv), **names = NULL, *save = NULL;
	size_t n = 0;

	if (!srv || !buf || !(names = calloc(strlen(c->disc_srv) / 2 + 2, sizeof(*names)))) {
		free(srv);
		free(buf);
		snprintf(err, len, "out of memory");
		return -1;
	}
	for (char *w = strtok_r(buf, " \t,", &save); w; w = strtok_r(NULL, " \t,", &save))
		names[n++] = w;
	free(s->srv);
	free(s->buf);
	free(s->names);
	s->srv = srv;
	s->buf = buf;
	s->names = names;
	s->nnames = n;
	s->interval_ms = c->disc_interval_ms;
	return 0;
}

/* A c-ares channel asking resolver ("" = resolv.conf's servers). */
static int dnssrv_channel(struct dnssrv *s, const char *resolver, char *err, size_t len)
{
	struct ares_options o;
	int rc;

	memset(&o, 0, sizeof(o));
	o.sock_state_cb = dnssrv_sock_state;
	o.sock_state_cb_data = s;
	o.timeout = 1000;               /* ms, per try */
	o.tries = 2;
	/* TC -> TCP (no IGNTC); a SERVFAIL or REFUSED comes back as such
	 * (NOCHECKRESP) rather than as "connection refused" after every
	 * server was tried: the stats count failures by kind, and the next
	 * poll asks again */
	o.flags = ARES_FLAG_NOCHECKRESP;
	rc = ares_init_options(&s->ch, &o, ARES_OPT_SOCK_STATE_CB | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_FLAGS);
	if (rc != ARES_SUCCESS) {
		snprintf(err, len, "cannot set up the DNS client: %s", ares_strerror(rc));
		return -1;
	}
	if (*resolver && (rc = ares_set_servers_ports_csv(s->ch, resolver)) != ARES_SUCCESS) {
		snprintf(err, len, "resolver %s: %s", resolver, ares_strerror(rc));
		ares_destroy(s->ch);
		return -1;
	}
	snprintf(s->resolver, sizeof(s->resolver), "%s", resolver);
	s->ch_ok = true;
	return 0;
}

struct dnssrv *dnssrv_new(struct event_base *base, const struct conf *c, struct discover *d,
			  dnssrv_round_fn *done, void *arg, char *err, size_t len)
{
	static bool lib;
	struct dnssrv *s = calloc(1, sizeof(*s));

	if (!s) {
		snprintf(err, len, "out of memory");
		return NULL;
	}
	if (!lib && ares_library_init(ARES_LIB_INIT_ALL) != ARES_SUCCESS) {
		snprintf(err, len, "cannot initialise c-ares");
		free(s);
		return NULL;
	}
	lib = true;
	s->base = base;
	s->d = d;
	s->done = done;
	s->arg = arg;
	s->fail = -1;
	s->timer = evtimer_new(base, dnssrv_on_timer, s);
	s->poll = evtimer_new(base, dnssrv_on_poll, s);
	if (!s->timer || !s->poll) {
		snprintf(err, len, "out of memory");
		goto fail;
	}
	if (dnssrv_settings(s, c, err, len) < 0 || dnssrv_channel(s, c->disc_resolver, err, len) < 0)
		goto fail;
	event_active(s->poll, EV_TIMEOUT, 0);
	return s;
fail:
	dnssrv_free(s);
	return NULL;
}

int dnssrv_configure(struct dnssrv *s, const struct conf *c, char *err, size_t len)
{
	if (strcmp(c->disc_resolver, s->resolver) != 0) {
		ares_channel old = s->ch;

		s->ch_ok = false;
		if (dnssrv_channel(s, c->disc_resolver, err, len) < 0) {
			s->ch = old;
			s->ch_ok = true;
			return -1;
		}
		/* the old channel's queries come back cancelled */
		ares_destroy(old);
		if (s->busy) {
			s->busy = false;
			s->addr_out = 0;
			s->round++;
			dnssrv_round_free(s);
		}
		event_active(s->poll, EV_TIMEOUT, 0);
	}
	if (strcmp(c->disc_srv, s->srv) != 0 || c->disc_interval_ms != s->interval_ms) {
		if (dnssrv_settings(s, c, err, len) < 0)
			return -1;
		if (!s->busy)
			event_active(s->poll, EV_TIMEOUT, 0);
	}
	return 0;
}

const char *dnssrv_names(const struct dnssrv *s)
{
	return s->srv;
}

void dnssrv_info(const struct dnssrv *s, struct dnssrv_info *out)
{
	*out = s->info;
}

void dnssrv_free(struct dnssrv *s)
{
	if (!s)
		return;
	if (s->ch_ok) {
		s->ch_ok = false;
		s->round++;             /* the cancelled replies are dropped */
		ares_destroy(s->ch);
	}
	while (s->socks) {
		struct dnssrv_sock *k = s->socks;

		s->socks = k->next;
		if (k->ev)
			event_free(k->ev);
		free(k);
	}
	if (s->timer)
		event_free(s->timer);
	if (s->poll)
		event_free(s->poll);
	dnssrv_round_free(s);
	free(s->t);
	free(s->srv);
	free(s->buf);
	free(s->names);
	free(s);
}

int dnssrv_save(const struct discover *d, const char *path, char *err, size_t len)
{
	char tmp[4200];
	FILE *f;
	int fd, ok;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f) {
		snprintf(err, len, "%s: %s", tmp, strerror(errno));
		return -1;
	}
	fprintf(f, "# ringproxy: the members discovery last applied (NAME TARGET ADDRESS PORT WEIGHT)\n");
	for (size_t i = 0; i < d->n; i++)
		if (d->m[i].in_ring)
			fprintf(f, "%s %s %s %u %u\n", d->m[i].name, d->m[i].target[0] ? d->m[i].target : d->m[i].name,
				d->m[i].addr[0] ? d->m[i].addr : "-", (unsigned)d->m[i].port, d->m[i].weight);
	fd = fileno(f);
	ok = fflush(f) == 0 && fsync(fd) == 0;
	ok = fclose(f) == 0 && ok;
	if (!ok || rename(tmp, path) < 0) {
		snprintf(err, len, "%s: %s", path, strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}

int dnssrv_load(struct discover *d, const char *path, char *err, size_t len)
{
	char line[512], name[DISCOVER_NAME_MAX + 2], target[256], addr[64];
	unsigned port, weight;
	int lineno = 0, rc = 0;
	FILE *f = fopen(path, "r");

	if (!f) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, len, "%s: %s", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		if (line[0] == '#' || line[0] == '\n')
			continue;
		if (sscanf(line, "%65s %255s %63s %u %u", name, target, addr, &port, &weight) != 5 || port > 65535 ||
		    strlen(name) > DISCOVER_NAME_MAX) {
			snprintf(err, len, "%s:%d: not a member line (NAME TARGET ADDRESS PORT WEIGHT); remove the file "
				 "to start from the next answer", path, lineno);
			rc = -1;
			break;
		}
		if (!discover_seed(d, name, target, strcmp(addr, "-") == 0 ? "" : addr, (uint16_t)port, weight)) {
			snprintf(err, len, "%s: out of memory", path);
			rc = -1;
			break;
		}
	}
	fclose(f);
	return rc;
}
