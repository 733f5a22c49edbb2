/*
 * discover.c -- membership from discovery answers (discover.h): which
 * names join and leave the ring, and when. Pure: the DNS side
 * (backend/dnssrv.c) feeds it answers and failures, proxy.c asks what is
 * due and applies it as a reload. Main thread.
 *
 * Members are kept sorted by name, so what is due and in what order is
 * the same on every instance that saw the same answers, whatever order
 * the DNS server gave the records in.
 */
#include "config/discover.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const discover_fail_names[DISCOVER_NFAIL] = {
	"timeout", "servfail", "refused", "nxdomain", "empty", "parse", "other",
};

const char *discover_fail_name(int kind)
{
	return kind >= 0 && kind < DISCOVER_NFAIL ? discover_fail_names[kind] : "?";
}

void discover_init(struct discover *d, const struct discover_params *p)
{
	memset(d, 0, sizeof(*d));
	d->p = *p;
	d->last_good_ms = -1;
	d->last_fail = -1;
}

void discover_free(struct discover *d)
{
	free(d->m);
	d->m = NULL;
	d->n = d->cap = 0;
}

/* target lower-cased without its trailing dot, into out. -1: too long. */
static int discover_lower(const char *target, char *out, size_t len)
{
	size_t n = strlen(target);

	if (n && target[n - 1] == '.')
		n--;
	if (n + 1 > len)
		return -1;
	for (size_t i = 0; i < n; i++)
		out[i] = (char)tolower((unsigned char)target[i]);
	out[n] = '\0';
	return 0;
}

int discover_name(const char *target, int naming, char *out, size_t len)
{
	char low[256];
	size_t n;

	if (discover_lower(target, low, sizeof(low)) < 0)
		return -1;
	n = naming == DISCOVER_NAME_FQDN ? strlen(low) : strcspn(low, ".");
	if (n == 0 || n > DISCOVER_NAME_MAX || n + 1 > len)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)low[i]) && low[i] != '.' && low[i] != '_' && low[i] != '-')
			return -1;
	memcpy(out, low, n);
	out[n] = '\0';
	return 0;
}

/* Is the label s[0..n) an IPv4 address with '-' for '.' (CoreDNS names
 * an endpoint without a hostname so: 10-1-2-3)? */
static bool discover_dashed_ip(const char *s, size_t n)
{
	unsigned parts = 0, digits = 0;

	for (size_t i = 0; i <= n; i++) {
		if (i == n || s[i] == '-') {
			if (digits == 0 || digits > 3)
				return false;
			parts++;
			digits = 0;
		} else if (isdigit((unsigned char)s[i])) {
			digits++;
		} else {
			return false;
		}
	}
	return parts == 4;
}

const char *discover_unstable(const char *target)
{
	char low[256];
	const char *addr;
	size_t first;

	if (discover_lower(target, low, sizeof(low)) < 0)
		return NULL;
	first = strcspn(low, ".");
	if (discover_dashed_ip(low, first))
		return "its first label is an IP address (an endpoint without a hostname, a Deployment's pod): it "
		       "changes when the pod restarts and moves its keys; use a StatefulSet, whose pods keep their names";
	/* Consul: <8 hex digits>.addr.<dc>.consul, or 32 for IPv6 */
	addr = strstr(low, ".addr.");
	if (addr && (addr - low == 8 || addr - low == 32) && strspn(low, "0123456789abcdef") == (size_t)(addr - low) &&
	    strlen(low) > 7 && strcmp(low + strlen(low) - 7, ".consul") == 0)
		return "it is Consul's name for an address (*.addr.*.consul): it changes with the instance's IP and "
		       "moves its keys; give the service a node of its own, or name members in the file";
	return NULL;
}

/* Where name is or would go in the sorted members. */
static size_t discover_slot(const struct discover *d, const char *name, bool *found)
{
	size_t lo = 0, hi = d->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(d->m[mid].name, name);

		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

struct discover_member *discover_find(const struct discover *d, const char *name)
{
	bool found;
	size_t i = discover_slot(d, name, &found);

	return found ? &d->m[i] : NULL;
}

/* A new member named name at its place; NULL when out of memory. */
static struct discover_member *discover_insert(struct discover *d, const char *name)
{
	bool found;
	size_t i = discover_slot(d, name, &found);

	if (found)
		return &d->m[i];
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 16;
		struct discover_member *m = realloc(d->m, cap * sizeof(*m));

		if (!m)
			return NULL;
		d->m = m;
		d->cap = cap;
	}
	memmove(&d->m[i + 1], &d->m[i], (d->n - i) * sizeof(*d->m));
	d->n++;
	memset(&d->m[i], 0, sizeof(d->m[i]));
	snprintf(d->m[i].name, sizeof(d->m[i].name), "%s", name);
	d->m[i].weight = d->m[i].next_weight = 1;
	return &d->m[i];
}

static void discover_set_addr(struct discover_member *m, const char *addr, uint16_t port)
{
	snprintf(m->addr, sizeof(m->addr), "%s", addr);
	m->port = port;
}

struct discover_member *discover_seed(struct discover *d, const char *name, const char *target,
				      const char *addr, uint16_t port, unsigned weight)
{
	struct discover_member *m = discover_insert(d, name);

	if (!m)
		return NULL;
	discover_lower(target, m->target, sizeof(m->target));
	discover_set_addr(m, addr, port);
	m->weight = m->next_weight = weight;
	m->in_ring = true;
	m->present = true;
	m->seen = d->p.add_after;
	return m;
}

void discover_fixed(struct discover *d, size_t n)
{
	d->nfixed = n;
}

/* Order of targets: by (target, port), so that of two with one name
 * every instance keeps the same. */
static int discover_cmp_target(const void *a, const void *b)
{
	const struct discover_target *x = *(const struct discover_target *const *)a;
	const struct discover_target *y = *(const struct discover_target *const *)b;
	int c = strcasecmp(x->target, y->target);

	return c ? c : (int)x->port - (int)y->port;
}

/* Target t seen in this answer: its member present, its address kept
 * (an address that did not resolve keeps the one known). */
static int discover_see(struct discover *d, const struct discover_target *t, const char *name)
{
	struct discover_member *m = discover_insert(d, name);

	if (!m)
		return -1;
	discover_lower(t->target, m->target, sizeof(m->target));
	if (t->addr[0] && (strcmp(m->addr, t->addr) != 0 || m->port != t->port)) {
		if (m->in_ring && m->addr[0])
			d->moved = true;
		discover_set_addr(m, t->addr, t->port);
	} else if (!t->addr[0] && !m->addr[0]) {
		/* no address yet: no evidence it can serve */
		return 0;
	}
	m->next_weight = d->p.srv_weights ? t->weight : 1;
	m->present = true;
	m->absent_ms = 0;
	if (m->seen < d->p.add_after)
		m->seen++;
	return 0;
}

/* A member absent from a good answer at now_ms: its absence grows by the
 * time since the previous good answer when that one was good too (a gap
 * of failures in between is no evidence of anything); one not on the
 * ring starts over. */
static void discover_absent(struct discover *d, struct discover_member *m, int64_t now_ms)
{
	if (m->present) {
		m->present = false;
		m->absent_ms = 0;
	} else if (d->prev_good && d->last_good_ms >= 0 && now_ms > d->last_good_ms) {
		m->absent_ms += (uint64_t)(now_ms - d->last_good_ms);
	}
	m->seen = 0;
}

int discover_good(struct discover *d, int64_t now_ms, const struct discover_target *t, size_t n,
		  discover_warn_fn *warn, void *arg)
{
	const struct discover_target **order = calloc(n ? n : 1, sizeof(*order));
	bool *seen = NULL;
	char name[DISCOVER_NAME_MAX + 1];
	size_t i;

	if (!order)
		return -1;
	for (i = 0; i < n; i++)
		order[i] = &t[i];
	qsort(order, n, sizeof(*order), discover_cmp_target);
	/* make room first, so that running out of memory changes nothing */
	for (i = 0; i < n; i++) {
		if (discover_name(order[i]->target, d->p.naming, name, sizeof(name)) < 0)
			continue;
		if (!discover_find(d, name) && !discover_insert(d, name))
			goto nomem;
		discover_find(d, name)->due = false;
	}
	seen = calloc(d->n ? d->n : 1, sizeof(*seen));
	if (!seen)
		goto nomem;
	for (i = 0; i < n; i++) {
		bool known, found;
		size_t at;

		if (discover_name(order[i]->target, d->p.naming, name, sizeof(name)) < 0) {
			if (warn)
				warn(arg, order[i]->target, "it makes no backend name (1-64 letters, digits, '.', '_' or '-' "
				     "in the part that names it)");
			continue;
		}
		at = discover_slot(d, name, &found);
		if (seen[at])
			continue;       /* a second target of the name */
		known = d->m[at].target[0] != '\0';
		if (!known && warn && discover_unstable(order[i]->target))
			warn(arg, order[i]->target, discover_unstable(order[i]->target));
		seen[at] = true;
		discover_see(d, order[i], name);
	}
	for (i = 0; i < d->n; i++)
		if (!seen[i] || !d->m[i].addr[0])
			discover_absent(d, &d->m[i], now_ms);
	/* names seen once and gone again are not kept */
	for (i = d->n; i-- > 0;) {
		struct discover_member *m = &d->m[i];

		if (!m->in_ring && !m->present) {
			memmove(m, m + 1, (d->n - i - 1) * sizeof(*m));
			d->n--;
		}
	}
	d->good++;
	d->last_good_ms = now_ms;
	d->prev_good = true;
	d->last_fail = -1;
	free(seen);
	free(order);
	return 0;
nomem:
	/* members inserted above without a sighting are dropped again */
	for (i = d->n; i-- > 0;)
		if (!d->m[i].in_ring && !d->m[i].present && !d->m[i].seen) {
			memmove(&d->m[i], &d->m[i + 1], (d->n - i - 1) * sizeof(d->m[i]));
			d->n--;
		}
	free(seen);
	free(order);
	return -1;
}

void discover_failed(struct discover *d, int kind)
{
	if (kind < 0 || kind >= DISCOVER_NFAIL)
		kind = DISCOVER_F_OTHER;
	d->failures[kind]++;
	d->last_fail = kind;
	d->prev_good = false;
}

size_t discover_due(struct discover *d, struct discover_change *ch)
{
	size_t in = d->nfixed, leaving = 0, members = 0;

	memset(ch, 0, sizeof(*ch));
	for (size_t i = 0; i < d->n; i++) {
		struct discover_member *m = &d->m[i];

		m->due = false;
		if (m->in_ring) {
			members++;
			if (!m->present && m->absent_ms >= d->p.remove_after_ms)
				leaving++;
			else
				in++;
		} else if (m->present && m->seen >= d->p.add_after) {
			m->due = true;
			ch->nadd++;
			in++;
		}
	}
	/* never empty; more than max_remove of the members only by hand */
	if (leaving && (in == 0 || (!d->release && (double)leaving > d->p.max_remove * (double)members))) {
		ch->held = in ? leaving : 0;
		d->held = ch->held;
	} else {
		for (size_t i = 0; i < d->n; i++) {
			struct discover_member *m = &d->m[i];

			if (m->in_ring && !m->present && m->absent_ms >= d->p.remove_after_ms) {
				m->due = true;
				ch->nremove++;
			}
		}
		d->held = 0;
	}
	if (!leaving)
		d->release = false;     /* reverted: nothing to apply */
	for (size_t i = 0; i < d->n; i++)
		if (d->m[i].in_ring && !d->m[i].due && d->m[i].weight != d->m[i].next_weight)
			ch->weights = true;
	return ch->nadd + ch->nremove + (ch->weights && !ch->nadd && !ch->nremove);
}

bool discover_member_next(const struct discover *d, size_t i)
{
	return d->m[i].in_ring != d->m[i].due;
}

void discover_commit(struct discover *d)
{
	for (size_t i = d->n; i-- > 0;) {
		struct discover_member *m = &d->m[i];

		if (m->due && m->in_ring) {
			memmove(m, m + 1, (d->n - i - 1) * sizeof(*m));
			d->n--;
			continue;
		}
		if (m->due)
			m->in_ring = true;
		m->due = false;
		m->weight = m->next_weight;
	}
	if (d->release && !d->held)
		d->release = false;
	d->moved = false;
}

size_t discover_adopt(struct discover *d)
{
	size_t n = 0;

	for (size_t i = 0; i < d->n; i++) {
		struct discover_member *m = &d->m[i];

		if (m->present && m->addr[0] && !m->in_ring) {
			m->in_ring = true;
			m->weight = m->next_weight;
			m->seen = d->p.add_after;
			n++;
		}
	}
	return n;
}

size_t discover_release(struct discover *d)
{
	if (d->held)
		d->release = true;
	return d->held;
}
