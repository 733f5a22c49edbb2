/*
 * balance.h -- which backend a request goes to: the ring walk from the
 * key's position, asking one eligibility question of each candidate:
 * has points, is up (or due a trial after a back-off), is under its hard
 * cap, is under the bounded-load cap, and is past the slow-start ramp for
 * this key; during a warm ramp, the key's previous owner first.
 * Called by workers on the request path: no locks, no allocation.
 */
#ifndef RINGPROXY_BALANCE_H
#define RINGPROXY_BALANCE_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/balance-t.h"
#include "backend/registry-t.h"
#include "ring/ring.h"
#include "backend/snapshot.h"


/*
 * The bounded-loads cap (Mirrokni, Thorup, Zadimoghaddam, "Consistent
 * Hashing with Bounded Loads", arXiv:1608.01350): a backend of weight w
 * may hold ceil(c * (total + 1) * w / W) requests in flight, total being
 * the requests in flight to all backends (the +1 is the one being placed)
 * and W the weight of the eligible backends. Pure.
 */
long balance_cap(double c, long total, double w, double W);

/* The up weight cached in c for health generation gen into *w, or false
 * when c holds another generation (or a writer is filling it). Any
 * thread; exposed for the unit test. */
bool balance_cache_get(const struct balance_cache *c, uint64_t gen, double *w);
/* Cache w for gen in c, unless another thread is writing it just then. */
void balance_cache_put(struct balance_cache *c, uint64_t gen, double w);

/* Count one request for the key at pos in the process's sketch of recent
 * keys (balance_start does). Any thread, lock-free. */
void balance_seen(uint64_t pos);

/* Whether the key at pos is hot with total requests in flight: its
 * estimated share p of recent requests is at least 8 counts of the
 * sketch's window and p x (total + 1) >= 1, the key alone holds a request
 * in flight on average. A hot key is moved by the bounded-load cap; a
 * rare one only by balance_rare_cap. Any thread. */
bool balance_is_hot(uint64_t pos, long total);

/* The share of recent requests (the last one to two sketch windows) whose
 * key was hot when balance_start counted it: 0 .. 1. Any thread. */
double balance_hot_share(void);

/*
 * The in-flight count at which a backend whose bounded-load cap is cap
 * refuses a key that is not hot, hot_share being balance_hot_share():
 * cap x (1 - h) / (2 h), never below cap; none (LONG_MAX) when no recent
 * request was hot. Under even load rare keys stay on their owners, which
 * hold their objects, whatever their in-flight counts (a stalled cache is
 * max_inflight's to bound). When hot keys carry a third of the requests
 * or more, h >= 1/3, every key is bounded by the cap as the bounded-loads
 * guarantee has it: the hot key's overflow fills the other backends up to
 * their caps, and rare keys landing on a backend it keeps full, or piling
 * up on a stalled one, would push it past any bound. In between, rare keys
 * get room in proportion to the rare load against the hot load. Pure.
 */
long balance_rare_cap(long cap, double hot_share);

/* Forget every count (the next request starts a new sketch); for tests. */
void balance_hot_reset(void);

/* Begin one request's choice: the walk w from pos on s's ring, pick
 * cleared, u the key's ramp value (ring_hash2's second half). */
void balance_start(const struct snapshot *s, struct ring_walk *w, struct balance_pick *pick,
		   uint64_t pos, uint64_t u);

/* Verdict for one more request to backend i of s for a key at pos. A down
 * backend due a trial after its back-off is let through once (health.c). */
enum balance_verdict balance_check(const struct snapshot *s, int i, uint64_t pos);

/* Why backend i would or would not take a request for a key at pos now,
 * with the numbers behind the verdict (balance_explain). */
struct balance_why {
	enum balance_verdict verdict;
	long inflight;          /* requests in flight to it, all workers */
	long max_inflight;      /* its hard cap; 0 = none */
	long cap;               /* its bounded-load cap now; -1 = not computed
				   (balance_factor 0, or decided before) */
	long total;             /* in flight to all backends, for the cap */
	double up_weight;       /* W of the cap: weight of the up backends */
	bool trial;             /* down, but due a trial request */
	long rare_cap;          /* the count that moves a key that is not
				   hot (balance_rare_cap); -1 = not computed
				   or the key is hot */
	bool hot;               /* the key counts as hot now: the
				   bounded-load cap may move it */
	double ramp;            /* slow start: the fraction of keys back (1:
				   not ramping) */
};

/* The verdict for backend i and a key at pos, as a request would get it
 * now, without taking a slot or a down backend's trial and without
 * writing anything: for the admin listener's /ring. Any thread. */
void balance_explain(const struct snapshot *s, int i, uint64_t pos, struct balance_why *why);

/* As balance_explain, for backend i holding a key during s's warm ramp
 * (s->ramp): the verdict balance_next asks of a key's previous owner
 * (drained or not, capped at its ramp weight). Writes nothing. */
void balance_explain_held(const struct snapshot *s, int i, uint64_t pos, struct balance_why *why);

/* The walk of a key at pos explained: the first n distinct backends into
 * order[] and why[] (*nout of them), and the backend index a request
 * would go to now as balance_next would choose it (-1: none would take
 * it: 503). Reads on past n until the target is found. Writes nothing
 * shared. */
int balance_explain_walk(const struct snapshot *s, uint64_t pos, int *order,
			 struct balance_why *why, int n, int *nout);

/* The next eligible backend of the walk w (initialised at pos), recording
 * the owner's verdict on the first call. The chosen backend's slot is
 * taken (balance_acquire): the caller owns it and gives it back with
 * balance_release. When none is eligible, the first
 * one that was only over its bounded cap or ramping up: those two move a
 * request along the walk but never turn it away.
 * During a warm ramp ([ring] ramp, s->ramp) the first call first asks the
 * key's previous owner, while the key is held back and that backend can
 * take it (up, under its caps): it is then the pick, and the walk skips
 * it if the request comes back for another backend. */
void balance_next(const struct snapshot *s, struct ring_walk *w, uint64_t pos,
		  struct balance_pick *pick);

/* A request's slot on backend b: one more in flight on b and in the
 * total. With a max_inflight hard cap the increment is a compare-and-swap
 * that fails (false) once b holds cb->max_inflight, so the cap holds
 * exactly across workers, not only as read a moment before. */
bool balance_acquire(struct backend *b, const struct conf_backend *cb);
/* Take a slot whatever the cap (a request re-sent on a fresh connection
 * keeps the slot it had). */
void balance_hold(struct backend *b);
void balance_release(struct backend *b);

#endif
