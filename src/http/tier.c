/*
 * tier.c -- the cache tier's own verdict on a response (tier.h), from the
 * header each kind of cache sets: Cache-Status (RFC 9211), Varnish's
 * X-Varnish (the request's id, then the id of the request that stored
 * the object: two ids = a hit, varnishd's vrt.c), X-Cache (Squid "HIT
 * from host", nginx's $upstream_cache_status words, CDNs' "MISS, HIT"),
 * else Age (RFC 9111 5.1: an object served from store has been there a
 * while). One pass over the parsed headers finds the last line of each;
 * the value is read where it lies. Pure; any thread.
 */
#include "http/tier.h"

#include <string.h>

static bool tier_space(char c)
{
	return c == ' ' || c == '\t';
}

/* Case-insensitive: does s[0..n) contain lower (lowercase)? */
static bool tier_has(const char *s, size_t n, const char *lower)
{
	size_t l = strlen(lower);

	for (size_t i = 0; i + l <= n; i++) {
		struct http1_str w = { s + i, l };

		if (http1_str_ieq(w, lower))
			return true;
	}
	return false;
}

/*
 * Cache-Status: a list of caches, the one nearest the origin first, so the
 * backend's own is the last member (RFC 9211 2). Its parameters: "hit"
 * (served from store), "fwd" (forwarded towards the origin: uri-miss,
 * stale, ...). Commas and semicolons in a quoted string (detail="a,b")
 * separate nothing.
 */
static enum tier_verdict tier_cache_status(struct http1_str v)
{
	size_t start = 0, i;
	bool quoted = false;
	enum tier_verdict out = TIER_NONE;

	for (i = 0; i < v.len; i++) {
		if (quoted && v.p[i] == '\\')
			i++;
		else if (v.p[i] == '"')
			quoted = !quoted;
		else if (!quoted && v.p[i] == ',')
			start = i + 1;
	}
	quoted = false;
	for (i = start; i < v.len; i++) {
		struct http1_str key;
		size_t n, e;

		if (quoted) {
			if (v.p[i] == '\\')
				i++;
			else if (v.p[i] == '"')
				quoted = false;
			continue;
		}
		if (v.p[i] == '"') {
			quoted = true;
			continue;
		}
		if (v.p[i] != ';')
			continue;
		/* a parameter: key[=value] up to the next ';' */
		for (n = i + 1; n < v.len && tier_space(v.p[n]); n++)
			;
		for (e = n; e < v.len && v.p[e] != '=' && v.p[e] != ';' && !tier_space(v.p[e]); e++)
			;
		key.p = v.p + n;
		key.len = e - n;
		if (http1_str_ieq(key, "hit")) {
			/* "hit" alone is true (a Boolean parameter); "hit=?0" not */
			if (!(v.len - e >= 3 && v.p[e] == '=' && v.p[e + 1] == '?' && v.p[e + 2] == '0'))
				return TIER_HIT;
		} else if (http1_str_ieq(key, "fwd")) {
			out = TIER_MISS;
		}
		i = e - 1;
	}
	return out;
}

/* X-Varnish: "1234" (a miss or a pass) or "1234 5678" (a hit). */
static enum tier_verdict tier_x_varnish(struct http1_str v)
{
	unsigned ids = 0;

	for (size_t i = 0; i < v.len;) {
		size_t d = i;

		while (d < v.len && v.p[d] >= '0' && v.p[d] <= '9')
			d++;
		if (d == i)
			return TIER_NONE;
		ids++;
		for (i = d; i < v.len && tier_space(v.p[i]); i++)
			;
	}
	return ids == 2 ? TIER_HIT : ids == 1 ? TIER_MISS : TIER_NONE;
}

/* X-Cache: the last of a list ("MISS, HIT": the edge nearest the client
 * last), its first word. nginx's words: STALE and UPDATING are served from
 * store; EXPIRED, BYPASS and REVALIDATED went to the origin. */
static enum tier_verdict tier_x_cache(struct http1_str v)
{
	size_t s = 0, e;

	for (size_t i = 0; i < v.len; i++)
		if (v.p[i] == ',')
			s = i + 1;
	while (s < v.len && tier_space(v.p[s]))
		s++;
	for (e = s; e < v.len && !tier_space(v.p[e]) && v.p[e] != ';'; e++)
		;
	if (tier_has(v.p + s, e - s, "hit") || tier_has(v.p + s, e - s, "stale") ||
	    tier_has(v.p + s, e - s, "updating"))
		return TIER_HIT;
	if (tier_has(v.p + s, e - s, "miss") || tier_has(v.p + s, e - s, "expired") ||
	    tier_has(v.p + s, e - s, "bypass") || tier_has(v.p + s, e - s, "revalidated") ||
	    tier_has(v.p + s, e - s, "pass"))
		return TIER_MISS;
	return TIER_NONE;
}

/* Age: delta-seconds; absent, 0 or invalid: not from store. */
static enum tier_verdict tier_age(const struct http1_str *v)
{
	bool pos = false;

	if (!v || !v->len)
		return TIER_MISS;
	for (size_t i = 0; i < v->len; i++) {
		if (v->p[i] < '0' || v->p[i] > '9')
			return TIER_MISS;
		pos |= v->p[i] != '0';
	}
	return pos ? TIER_HIT : TIER_MISS;
}

enum tier_verdict tier_verdict(const struct http1_msg *m, enum tier_status mode)
{
	const struct http1_str *cs = NULL, *xv = NULL, *xc = NULL, *age = NULL;
	enum tier_verdict v;

	if (mode == TIER_OFF)
		return TIER_NONE;
	if (!(m->seen & HTTP1_SEEN_TIER))       /* the parser saw none of the names */
		return mode == TIER_AUTO || mode == TIER_AGE ? tier_age(NULL) : TIER_NONE;
	/* the last line of each: a list's last member is the nearest cache */
	for (unsigned i = 0; i < m->nheaders; i++) {
		const struct http1_header *h = &m->headers[i];

		switch (h->name.len) {
		case 3:
			if (http1_str_ieq(h->name, "age"))
				age = &h->value;
			break;
		case 7:
			if (http1_str_ieq(h->name, "x-cache"))
				xc = &h->value;
			break;
		case 9:
			if (http1_str_ieq(h->name, "x-varnish"))
				xv = &h->value;
			break;
		case 12:
			if (http1_str_ieq(h->name, "cache-status"))
				cs = &h->value;
			break;
		}
	}
	switch (mode) {
	case TIER_CACHE_STATUS:
		return cs ? tier_cache_status(*cs) : TIER_NONE;
	case TIER_X_VARNISH:
		return xv ? tier_x_varnish(*xv) : TIER_NONE;
	case TIER_X_CACHE:
		return xc ? tier_x_cache(*xc) : TIER_NONE;
	case TIER_AGE:
		return tier_age(age);
	default:
		break;
	}
	if (cs && (v = tier_cache_status(*cs)) != TIER_NONE)
		return v;
	if (xv && (v = tier_x_varnish(*xv)) != TIER_NONE)
		return v;
	if (xc && (v = tier_x_cache(*xc)) != TIER_NONE)
		return v;
	return tier_age(age);
}
