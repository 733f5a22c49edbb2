/*
 * discover.h -- membership from discovery answers (DNS SRV): the rules
 * that decide what an answer may change on the ring. Pure: no I/O and no
 * clock of its own (callers give the time), so a unit test drives it with
 * made-up answers. Main thread.
 *
 * The rules (ringproxy(7), DISCOVERY):
 *  - a member's identity is its SRV target's name, lower-cased, by
 *    default its first label; its address and port are kept beside it
 *    and never touch the ring;
 *  - only a good answer (successful, complete, at least one target) is
 *    evidence; a failure of any kind changes nothing but its counter;
 *  - a name joins after add_after good answers in a row, leaves after
 *    remove_after of absence measured across good answers;
 *  - a change that removes more than max_remove of the members is held
 *    until an operator releases it (or it reverts); no change leaves
 *    the ring without a member.
 */
#ifndef RINGPROXY_DISCOVER_H
#define RINGPROXY_DISCOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Why an answer was no evidence. */
enum discover_fail {
	DISCOVER_F_TIMEOUT = 0, /* no answer (the server down or stopped) */
	DISCOVER_F_SERVFAIL,
	DISCOVER_F_REFUSED,
	DISCOVER_F_NXDOMAIN,    /* Kubernetes' "no ready endpoints" */
	DISCOVER_F_EMPTY,       /* NOERROR without a target */
	DISCOVER_F_PARSE,       /* a reply that does not parse */
	DISCOVER_F_OTHER,       /* a connection refused, out of memory... */
};
#define DISCOVER_NFAIL 7

/* "timeout", "servfail", ... (the stats' and the log's word). */
const char *discover_fail_name(int kind);

enum discover_naming { DISCOVER_NAME_FIRST_LABEL = 0, DISCOVER_NAME_FQDN };

struct discover_params {
	int naming;                     /* enum discover_naming */
	bool srv_weights;               /* weights = srv: the SRV weight is
					   the member's (else 1) */
	unsigned add_after;             /* good answers in a row to join */
	uint64_t remove_after_ms;       /* absent this long to leave */
	double max_remove;              /* share of the members (0..1) a
					   change may remove without an
					   operator */
};

/* One SRV target of a good answer. */
struct discover_target {
	const char *target;             /* "cache-0.cache.ns.svc.cluster.local."
					   as the answer has it */
	const char *addr;               /* its address ("10.0.0.7", "fd00::7"),
					   or "" when it did not resolve */
	uint16_t port, weight;
};

#define DISCOVER_NAME_MAX 64

/* One name discovery knows: on the ring, joining or leaving. */
struct discover_member {
	char name[DISCOVER_NAME_MAX + 1];
	char target[256];               /* lower-cased, no trailing dot */
	char addr[64];                  /* "" until known */
	uint16_t port;
	unsigned weight;                /* the ring weight it has (or gets) */
	unsigned next_weight;           /* the last good answer's (weights =
					   srv; else 1) */
	bool in_ring;                   /* applied (or seeded) */
	bool present;                   /* in the last good answer */
	unsigned seen;                  /* good answers in a row it was in */
	uint64_t absent_ms;             /* absent this long, across good
					   answers (0 while present) */
	bool due;                       /* discover_due: joins or leaves now */
};

struct discover {
	struct discover_params p;
	struct discover_member *m;      /* sorted by name */
	size_t n, cap;
	size_t nfixed;                  /* members the file names itself
					   (discover_fixed): counted for
					   "never empty" */
	int64_t last_good_ms;           /* of the last good answer; -1 none */
	bool prev_good;                 /* the answer before was good */
	uint64_t good;                  /* good answers */
	uint64_t failures[DISCOVER_NFAIL];
	int last_fail;                  /* -1 none since the last good */
	size_t held;                    /* removals held (max_remove) */
	bool release;                   /* the operator applied them */
	bool moved;                     /* an address or port of a member on
					   the ring changed: a snapshot
					   with it is due (not a ring
					   change) */
};

/* A membership change that is due: counts of discover_member.due. */
struct discover_change {
	size_t nadd, nremove;
	size_t held;                    /* removals held back (max_remove) */
	bool weights;                   /* a member's SRV weight changed */
};

void discover_init(struct discover *d, const struct discover_params *p);
void discover_free(struct discover *d);

/* The identity target gives under naming, lower-cased, into out (at
 * least DISCOVER_NAME_MAX + 1 bytes): 0, or -1 when it makes no backend
 * name (empty, over 64 bytes, a byte other than a letter, digit, '.',
 * '_' or '-'). */
int discover_name(const char *target, int naming, char *out, size_t len);

/* Why target cannot name one cache for long (a first label that is a
 * dashed IP: a pod without a hostname; Consul's hex-IP *.addr.*.consul),
 * or NULL. */
const char *discover_unstable(const char *target);

/* A member on the ring before any answer: one applied before a restart
 * (the state file). NULL when out of memory, else the member. */
struct discover_member *discover_seed(struct discover *d, const char *name, const char *target,
				      const char *addr, uint16_t port, unsigned weight);

/* How many members the file itself names (they stay whatever discovery
 * says): discovery never leaves the ring with fewer than one member,
 * counting these. */
void discover_fixed(struct discover *d, size_t n);

/* A good answer at now_ms: t[0..n) (n >= 1), the targets of every SRV
 * name. A name given twice (two targets with one first label, Consul's
 * instances on one node) keeps the first in (target, port) order, so
 * every instance picks the same. warn(arg, target, why) is called for
 * each target that cannot be a member or a stable one, the first time
 * its name is seen. 0, or -1 when out of memory (nothing changed). */
typedef void discover_warn_fn(void *arg, const char *target, const char *why);
int discover_good(struct discover *d, int64_t now_ms, const struct discover_target *t, size_t n,
		  discover_warn_fn *warn, void *arg);

/* An answer that is no evidence: counted, nothing else. */
void discover_failed(struct discover *d, int kind);

/* Mark what is due now (discover_member.due) and count it: names that
 * were seen add_after times in a row join; names absent remove_after
 * leave, unless they are more than max_remove of the members on the
 * ring (then all are held, until discover_release or until they are
 * no longer due) or would leave none. Returns nadd + nremove (+1 when
 * only weights changed). */
size_t discover_due(struct discover *d, struct discover_change *ch);

/* The due changes were applied: members in or out of the ring as
 * discover_due marked them; left members are forgotten. */
void discover_commit(struct discover *d);

/* At start with nothing on the ring (no member known, none in the file):
 * every member of the last good answer with an address joins at once,
 * add_after or not. Returns how many. */
size_t discover_adopt(struct discover *d);

/* The operator's `ringproxy ctl discovery apply`: the held removals go
 * with the next discover_due. Returns how many are held. */
size_t discover_release(struct discover *d);

/* Would member i be on the ring once the due changes are applied? */
bool discover_member_next(const struct discover *d, size_t i);

/* The member named name, or NULL. */
struct discover_member *discover_find(const struct discover *d, const char *name);

#endif
