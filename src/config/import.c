/*
 * import.c -- `ringproxy import`: the operator's NGINX upstream, HAProxy
 * backend or nutcracker pool as a ringproxy.ini whose [ring] scheme puts
 * every key on the cache that proxy puts it on, so a tier switches to
 * ringproxy without going cold.
 *
 * Each format has a small reader of its own grammar that fills one
 * struct import_ring (the scheme, the key mode, the servers with their
 * identities and weights); one writer prints it. A reader refuses what
 * the scheme cannot reproduce (another balancing method, another key or
 * hash, backup servers, names resolved at run time) with FILE:LINE, and
 * collects every such error before giving up. Nothing here touches the
 * network or any file but the one read: an `include` is not followed.
 * Main thread of a short-lived process.
 */
#include "config/import.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ring/ring.h"

/* A file larger than this is not a proxy's config. */
#define IMPORT_MAX_FILE (16u << 20)
/* ringproxy's own bounds of a backend's weight and name (conf.c) */
#define IMPORT_MAX_WEIGHT 1000
#define IMPORT_NAME_MAX 64
/* words of one directive or config line */
#define IMPORT_MAX_ARGS 64

struct import_server {
	char name[IMPORT_NAME_MAX + 1]; /* [backend NAME] */
	char id[256];                   /* what the scheme hashes */
	char host[256];                 /* for url: brackets kept for IPv6 */
	unsigned port;
	long weight;                    /* as written in ringproxy.ini */
	long was;                       /* down in the source: its weight
					   there (written 0), else -1 */
	bool explicit_id;               /* haproxy: `id N` given */
	int line;
	char src[512];                  /* the source's words, for a comment */
};

struct import_ring {
	const char *fmt;                /* "nginx", "haproxy", "ketama" */
	const char *scheme;             /* [ring] scheme */
	const char *what;               /* "upstream", "backend", "pool" */
	char pool[256];                 /* its name in the source */
	int pool_line;
	char rule[320];                 /* the placement rule, for the comment */
	const char *key;                /* [ring] key; NULL: the scheme's own */
	const char *key_why;
	const char *key_hash;           /* [ring] key_hash; NULL: none */
	long balance_factor;            /* percent; -1: ringproxy's default */
	char dropped[512];              /* directives that change no placement */
	struct import_server *srv;
	size_t n, cap;
};

/* One reader's state: the text, the position, the messages. */
struct import_src {
	const char *file;
	const char *p, *end;
	int line;
	struct import_msgs *m;
};

/* ---- messages ---------------------------------------------------------- */

static void import_msgv(struct import_msgs *m, bool error, const char *file, int line,
			const char *fmt, va_list ap)
{
	char text[1024], *full, **grown;
	int n;

	vsnprintf(text, sizeof(text), fmt, ap);
	if (line > 0)
		n = asprintf(&full, "%s:%d: %s%s", file, line, error ? "" : "warning: ", text);
	else
		n = asprintf(&full, "%s: %s%s", file, error ? "" : "warning: ", text);
	if (n < 0)
		return;
	grown = realloc(m->msg, (m->n + 1) * sizeof(*grown));
	if (!grown) {
		free(full);
		return;
	}
	m->msg = grown;
	m->msg[m->n++] = full;
	if (error)
		m->nerr++;
}

__attribute__((format(printf, 3, 4)))
static void import_err(struct import_src *s, int line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	import_msgv(s->m, true, s->file, line, fmt, ap);
	va_end(ap);
	/* a message that could not be stored must still fail the import */
	if (s->m->nerr == 0)
		s->m->nerr = 1;
}

__attribute__((format(printf, 3, 4)))
static void import_warn(struct import_src *s, int line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	import_msgv(s->m, false, s->file, line, fmt, ap);
	va_end(ap);
}

void import_msgs_free(struct import_msgs *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++)
		free(m->msg[i]);
	free(m->msg);
	m->msg = NULL;
	m->n = m->nerr = 0;
}

/* ---- what every format shares ------------------------------------------ */

/* A control character (a quoted newline) would end a comment of the INI
 * early: each becomes '?'. In place. */
static void import_clean(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
}

/* words[0..n) joined by spaces into out (a comment of the INI). */
static void import_join(char *out, size_t len, char **words, int n)
{
	size_t used = 0;

	out[0] = '\0';
	for (int i = 0; i < n && used + 1 < len; i++)
		used += (size_t)snprintf(out + used, len - used, "%s%s", i ? " " : "", words[i]);
	import_clean(out);
}

/* Add what to r->dropped once: a directive or parameter the import
 * leaves out because it changes no placement. */
static void import_drop(struct import_ring *r, const char *what)
{
	char have[sizeof(r->dropped) + 4], pat[72];
	size_t used = strlen(r->dropped);

	snprintf(have, sizeof(have), ", %s,", r->dropped);
	snprintf(pat, sizeof(pat), ", %s,", what);
	if (strstr(have, pat))
		return;
	if (used + strlen(what) + 3 < sizeof(r->dropped))
		snprintf(r->dropped + used, sizeof(r->dropped) - used, "%s%s", used ? ", " : "", what);
}

/* A decimal number 0..max, all digits. */
static int import_number(const char *s, long max, long *out)
{
	char *end;
	long v;

	if (!isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v > max)
		return -1;
	*out = v;
	return 0;
}

/*
 * A [backend NAME] from a source's name or address: every character
 * outside conf.c's alphabet (letters, digits, '.', '_', '-') becomes '-',
 * runs of '-' become one, and none is left at either end; at most 64
 * characters; a name another server of r has taken gets "-2", "-3"...
 * So 10.0.0.1:8080 is 10.0.0.1-8080 and [::1]:8080 is 1-8080. out may be
 * the name field of one of r's servers (it is not compared with itself).
 */
static void import_name(const struct import_ring *r, const char *from, char *out)
{
	char base[IMPORT_NAME_MAX - 5];  /* room for "-65535" after it */
	size_t n = 0;

	for (const char *p = from; *p && n + 1 < sizeof(base); p++) {
		char c = isalnum((unsigned char)*p) || strchr("._-", *p) ? *p : '-';

		if (c == '-' && (n == 0 || base[n - 1] == '-'))
			continue;
		base[n++] = c;
	}
	while (n > 0 && base[n - 1] == '-')
		n--;
	base[n] = '\0';
	if (n == 0)
		snprintf(base, sizeof(base), "server");
	snprintf(out, IMPORT_NAME_MAX + 1, "%s", base);
	for (unsigned short k = 2;; k++) {
		size_t i;

		for (i = 0; i < r->n && (r->srv[i].name == out || strcmp(r->srv[i].name, out) != 0); i++)
			;
		if (i == r->n)
			return;
		snprintf(out, IMPORT_NAME_MAX + 1, "%s-%u", base, k);
	}
}

/* A new server at the end of r; NULL (and an error) when out of room. */
static struct import_server *import_server_add(struct import_src *s, struct import_ring *r, int line)
{
	struct import_server *grown;

	if (r->n == RING_MAX_BACKENDS) {
		import_err(s, line, "more than %u servers, ringproxy's limit of backends", RING_MAX_BACKENDS);
		return NULL;
	}
	if (r->n == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 16;

		grown = realloc(r->srv, cap * sizeof(*grown));
		if (!grown) {
			import_err(s, line, "out of memory");
			return NULL;
		}
		r->srv = grown;
		r->cap = cap;
	}
	memset(&r->srv[r->n], 0, sizeof(r->srv[r->n]));
	r->srv[r->n].line = line;
	r->srv[r->n].was = -1;
	return &r->srv[r->n++];
}

/* The server of r before the last one with the last one's id, or NULL:
 * two servers the scheme hashes the same would get the same points. */
static const struct import_server *import_same_id(const struct import_ring *r)
{
	const struct import_server *sv = &r->srv[r->n - 1];

	for (size_t i = 0; i + 1 < r->n; i++)
		if (strcmp(r->srv[i].id, sv->id) == 0)
			return &r->srv[i];
	return NULL;
}

/* The sections of a file a reader may take (upstream blocks, backends,
 * pools), as it meets them, and the words of the messages about them. */
struct import_choice {
	const char *word;               /* "upstream" */
	const char *none;               /* the message when there is none */
	const char *several;            /* "upstream blocks" */
	const char *option;             /* "--upstream" */
	int found;
	char names[512];                /* for a message */
};

/* A section named name was met: list it, and take it into r->pool when it
 * is the one asked for (which), or the first without. */
static void import_offer(struct import_choice *c, struct import_ring *r, const char *name, const char *which)
{
	size_t l = strlen(c->names);

	c->found++;
	if (which ? strcmp(name, which) == 0 : c->found == 1)
		snprintf(r->pool, sizeof(r->pool), "%s", name);
	if (l + strlen(name) + 3 < sizeof(c->names))
		snprintf(c->names + l, sizeof(c->names) - l, "%s%s", l ? ", " : "", name);
}

/* Once every section has been offered: 0 when one is taken, else -1 with
 * the error (none, not the one asked for, several and none asked for). */
static int import_chosen(struct import_src *s, const struct import_choice *c, const struct import_ring *r,
			 const char *which)
{
	if (c->found == 0)
		import_err(s, 0, "%s", c->none);
	else if (which && strcmp(r->pool, which) != 0)
		import_err(s, 0, "no %s %s; there is %s", c->word, which, c->names);
	else if (!which && c->found > 1)
		import_err(s, 0, "%d %s (%s); choose one with %s NAME", c->found, c->several, c->names, c->option);
	else
		return 0;
	return -1;
}

/*
 * host[:port] (or [v6][:port]) of addr into sv; dport when no port is
 * written (-1: a port is required). 0, or -1 with an error at line.
 */
static int import_hostport(struct import_src *s, int line, const char *addr, long dport,
			   struct import_server *sv)
{
	const char *colon, *hend;
	long port = dport;

	if (addr[0] == '[') {
		hend = strchr(addr, ']');
		if (!hend || (hend[1] && hend[1] != ':'))
			goto bad;
		hend++;
		colon = *hend ? hend : NULL;
	} else {
		colon = strrchr(addr, ':');
		if (colon && strchr(addr, ':') != colon)
			goto bad;       /* a bare IPv6 address needs brackets */
		hend = colon ? colon : addr + strlen(addr);
	}
	if (hend == addr || (size_t)(hend - addr) >= sizeof(sv->host))
		goto bad;
	if (colon && import_number(colon + 1, 65535, &port) < 0)
		goto bad;
	if (port <= 0) {
		import_err(s, line, "'%s' has no port; write the server as host:port", addr);
		return -1;
	}
	for (const char *p = addr; p < hend; p++)
		if (!isalnum((unsigned char)*p) && !strchr(".-_:[]", *p))
			goto bad;
	snprintf(sv->host, sizeof(sv->host), "%.*s", (int)(hend - addr), addr);
	sv->port = (unsigned)port;
	return 0;
bad:
	import_err(s, line, "'%s' is not host:port (a name, an IPv4 address or [IPv6], then the port)", addr);
	return -1;
}

/* ---- the INI ----------------------------------------------------------- */

/* text as comment lines of at most 72 columns, broken at spaces. */
static void import_comment(FILE *out, const char *text)
{
	const char *p = text;

	while (*p) {
		size_t n = strlen(p), cut = n;

		if (n > 70) {
			for (cut = 70; cut > 0 && p[cut] != ' '; cut--)
				;
			if (cut == 0)
				cut = strcspn(p, " ");
		}
		fprintf(out, "; %.*s\n", (int)cut, p);
		p += cut;
		while (*p == ' ')
			p++;
	}
}

static void import_write(const struct import_ring *r, const char *file, FILE *out)
{
	char text[2048], kv[64];

	snprintf(text, sizeof(text), "ringproxy.ini made by `ringproxy import %s` from %s %s of %s "
		 "(line %d): the same placement, server for server, so that the caches keep their keys "
		 "when ringproxy takes over. Check it: ringproxy -t -c FILE", r->fmt, r->what, r->pool,
		 file, r->pool_line);
	import_clean(text);
	import_comment(out, text);
	if (strcmp(r->fmt, "ketama") == 0)
		import_comment(out, "A url below is the pool's memcached address: point it at the HTTP "
			       "cache of that host (its id keeps the keys where they are).");
	if (*r->dropped) {
		snprintf(text, sizeof(text), "Not carried over (no placement depends on them): %s", r->dropped);
		import_comment(out, text);
	}
	fprintf(out, "\n[proxy]\n"
		"listen = 0.0.0.0:8080\n"
		"admin_listen = 127.0.0.1:8081   ; /stats /metrics / /ring /health\n"
		"\n[ring]\n");
	snprintf(kv, sizeof(kv), "scheme = %s", r->scheme);
	fprintf(out, "%-32s; %s\n", kv, r->rule);
	if (r->key) {
		snprintf(kv, sizeof(kv), "key = %s", r->key);
		fprintf(out, "%-32s; %s\n", kv, r->key_why);
	}
	if (r->key_hash)
		fprintf(out, "key_hash = %s\n", r->key_hash);
	if (r->balance_factor >= 0) {
		snprintf(kv, sizeof(kv), "balance_factor = %ld.%02ld", r->balance_factor / 100,
			 r->balance_factor % 100);
		fprintf(out, "%-32s; hash-balance-factor %ld\n", kv, r->balance_factor);
	}
	fprintf(out, "\n; A backend's id is what the scheme hashes: its url may change\n"
		"; without moving a key.\n");
	for (size_t i = 0; i < r->n; i++) {
		const struct import_server *sv = &r->srv[i];

		fprintf(out, "\n; %s:%d: %s\n", file, sv->line, sv->src);
		if (sv->was >= 0)
			fprintf(out, "; down there: weight = %ld brings it back\n", sv->was);
		fprintf(out, "[backend %s]\nurl = http://%s:%u\nweight = %ld\nid = %s\n",
			sv->name, sv->host, sv->port, sv->weight, sv->id);
	}
}

/* ---- NGINX ------------------------------------------------------------- */

/*
 * The nginx config grammar (ngx_conf_file.c): words separated by blanks;
 * a directive ends with ';' or opens a block with '{'; '}' closes one; '#'
 * at the start of a word comments to the end of the line; a word may be
 * "double" or 'single' quoted; '\' escapes the next character (\t \r \n
 * become the control characters, \" \' \\ the character, any other pair
 * is kept as written); in a word, '{' right after '$' is part of it
 * (${var}), and '}' is an ordinary character.
 */
struct import_ngx {
	struct import_src s;
	char buf[16384];                /* the current directive's words */
	char *arg[IMPORT_MAX_ARGS];
	int nargs;
	int dline;                      /* of its first word */
};

enum { IMPORT_NGX_EOF, IMPORT_NGX_END, IMPORT_NGX_BLOCK, IMPORT_NGX_ERR, IMPORT_NGX_CLOSE };

/* Copy the word [start, e) into the directive with nginx's escapes. */
static int import_ngx_word(struct import_ngx *x, size_t *used, const char *start, const char *e)
{
	char *dst = x->buf + *used;

	if (x->nargs == IMPORT_MAX_ARGS || *used + (size_t)(e - start) + 1 > sizeof(x->buf)) {
		import_err(&x->s, x->s.line, "directive too long for import");
		return -1;
	}
	x->arg[x->nargs++] = dst;
	for (const char *p = start; p < e; p++) {
		if (*p == '\\' && p + 1 < e) {
			switch (p[1]) {
			case '"': case '\'': case '\\':
				*dst++ = *++p;
				continue;
			case 't': *dst++ = '\t'; p++; continue;
			case 'r': *dst++ = '\r'; p++; continue;
			case 'n': *dst++ = '\n'; p++; continue;
			}
		}
		*dst++ = *p;
	}
	*dst++ = '\0';
	*used = (size_t)(dst - x->buf);
	return 0;
}

/* The next directive: IMPORT_NGX_END (words then ';'), _BLOCK (words then
 * '{'), _CLOSE ('}'), _EOF, or _ERR (with an error). */
static int import_ngx_next(struct import_ngx *x)
{
	struct import_src *s = &x->s;
	size_t used = 0;

	x->nargs = 0;
	x->dline = 0;
	while (s->p < s->end) {
		const char *start;
		char ch = *s->p;

		if (ch == '\n') {
			s->line++;
			s->p++;
			continue;
		}
		if (ch == ' ' || ch == '\t' || ch == '\r') {
			s->p++;
			continue;
		}
		if (ch == '#') {
			while (s->p < s->end && *s->p != '\n')
				s->p++;
			continue;
		}
		if (ch == ';' || ch == '{') {
			s->p++;
			if (x->nargs == 0) {
				import_err(s, s->line, "unexpected \"%c\"", ch);
				return IMPORT_NGX_ERR;
			}
			return ch == ';' ? IMPORT_NGX_END : IMPORT_NGX_BLOCK;
		}
		if (ch == '}') {
			s->p++;
			if (x->nargs) {
				import_err(s, s->line, "unexpected \"}\"; a directive ends with ';'");
				return IMPORT_NGX_ERR;
			}
			return IMPORT_NGX_CLOSE;
		}
		if (!x->dline)
			x->dline = s->line;
		if (ch == '"' || ch == '\'') {
			int line = s->line;

			start = ++s->p;
			while (s->p < s->end && *s->p != ch) {
				if (*s->p == '\\' && s->p + 1 < s->end)
					s->p++;
				if (*s->p == '\n')
					s->line++;
				s->p++;
			}
			if (s->p == s->end) {
				import_err(s, line, "unterminated %s-quoted string", ch == '"' ? "double" : "single");
				return IMPORT_NGX_ERR;
			}
			if (import_ngx_word(x, &used, start, s->p++) < 0)
				return IMPORT_NGX_ERR;
			if (s->p < s->end && !strchr(" \t\r\n;{", *s->p)) {
				import_err(s, s->line, "unexpected \"%c\" after a quoted string", *s->p);
				return IMPORT_NGX_ERR;
			}
			continue;
		}
		start = s->p;
		while (s->p < s->end && !strchr(" \t\r\n;{", *s->p)) {
			if (*s->p == '\\' && s->p + 1 < s->end)
				s->p++;
			else if (*s->p == '$' && s->p + 1 < s->end && s->p[1] == '{')
				s->p++;
			if (*s->p == '\n')
				s->line++;
			s->p++;
		}
		if (import_ngx_word(x, &used, start, s->p) < 0)
			return IMPORT_NGX_ERR;
	}
	if (x->nargs) {
		import_err(s, s->line, "unexpected end of file, expecting \";\" or \"}\"");
		return IMPORT_NGX_ERR;
	}
	return IMPORT_NGX_EOF;
}

/* Directives of an upstream block that change no placement. */
static const char *const import_ngx_ignored[] = {
	"zone", "keepalive", "keepalive_requests", "keepalive_time", "keepalive_timeout", "queue",
};

/* Balancing methods that are not `hash`. */
static const char *const import_ngx_methods[] = {
	"ip_hash", "least_conn", "least_time", "random", "sticky", "ntlm",
};

#define IMPORT_COUNT(a) (sizeof(a) / sizeof((a)[0]))

static bool import_in(const char *w, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(w, list[i]) == 0)
			return true;
	return false;
}

/* `hash KEY [consistent]`. */
static void import_ngx_hash(struct import_ngx *x, struct import_ring *r)
{
	const char *k = x->arg[1];
	int line = x->dline;

	if (x->nargs < 2 || x->nargs > 3 || (x->nargs == 3 && strcmp(x->arg[2], "consistent") != 0)) {
		import_err(&x->s, line, "expected hash KEY [consistent]");
		return;
	}
	if (x->nargs == 2) {
		import_err(&x->s, line, "hash without consistent places a key by its hash modulo the servers' "
			   "weights, which is not reproduced; ringproxy reproduces hash ... consistent");
		return;
	}
	if (strcmp(k, "$request_uri") == 0 || strcmp(k, "${request_uri}") == 0) {
		r->key = NULL;  /* the nginx scheme's own key: the target as received */
	} else if (strcmp(k, "$uri") == 0 || strcmp(k, "${uri}") == 0) {
		r->key = "path";
		r->key_why = "hash $uri";
		import_warn(&x->s, line, "nginx hashes $uri decoded and normalised (%%XX, '//', '.' and '..'); "
			    "key = path hashes the path as received: a URL with an escape or such a "
			    "segment may be placed elsewhere");
	} else {
		import_err(&x->s, line, "hash %s: only $request_uri or $uri is reproduced (ringproxy keys a "
			   "request by its target, not by other variables)", k);
		return;
	}
	snprintf(r->rule, sizeof(r->rule), "hash %s consistent", k);
}

/* `server ADDRESS [weight=N] [down] [max_fails=N] ...`. */
static void import_ngx_server(struct import_ngx *x, struct import_ring *r)
{
	struct import_src *s = &x->s;
	const struct import_server *twin;
	struct import_server *sv;
	const char *addr = x->arg[1];
	int line = x->dline, bad = 0;
	long weight = 1;
	bool down = false;

	if (x->nargs < 2) {
		import_err(s, line, "server needs an address");
		return;
	}
	for (int i = 2; i < x->nargs; i++) {
		const char *a = x->arg[i];

		if (strncmp(a, "weight=", 7) == 0) {
			if (import_number(a + 7, IMPORT_MAX_WEIGHT, &weight) < 0 || weight == 0) {
				import_err(s, line, "server %s %s: expected a weight from 1 to %d", addr, a,
					   IMPORT_MAX_WEIGHT);
				bad = 1;
			}
		} else if (strcmp(a, "down") == 0) {
			down = true;
		} else if (strcmp(a, "backup") == 0) {
			import_err(s, line, "server %s is a backup server: ringproxy has no backup tier; remove "
				   "it or make it a server of its own", addr);
			bad = 1;
		} else if (strcmp(a, "resolve") == 0 || strncmp(a, "service=", 8) == 0) {
			import_err(s, line, "server %s %s: its addresses come from DNS at run time, which "
				   "changes its peers; import reproduces servers written out", addr, a);
			bad = 1;
		} else if (strncmp(a, "max_fails=", 10) == 0 || strncmp(a, "fail_timeout=", 13) == 0 ||
			   strncmp(a, "max_conns=", 10) == 0 || strncmp(a, "slow_start=", 11) == 0 ||
			   strncmp(a, "route=", 6) == 0 || strcmp(a, "drain") == 0) {
			char what[32];

			snprintf(what, sizeof(what), "%.*s", (int)strcspn(a, "="), a);
			import_drop(r, what);
		} else {
			import_err(s, line, "server %s: unknown parameter '%s'", addr, a);
			bad = 1;
		}
	}
	if (strncmp(addr, "unix:", 5) == 0) {
		import_err(s, line, "server %s is a unix socket: ringproxy's backends are http://host:port", addr);
		return;
	}
	if (bad || !(sv = import_server_add(s, r, line)))
		return;
	if (import_hostport(s, line, addr, 80, sv) < 0) {
		r->n--;
		return;
	}
	/* the identity is the server string as written (ngx_http_upstream_hash_module) */
	snprintf(sv->id, sizeof(sv->id), "%s", addr);
	if ((twin = import_same_id(r))) {
		import_err(s, line, "server %s is also written at line %d: nginx gives both the same "
			   "points, which ringproxy does not reproduce; keep one", addr, twin->line);
		r->n--;
		return;
	}
	import_name(r, addr, sv->name);
	sv->weight = down ? 0 : weight;
	sv->was = down ? weight : -1;
	import_join(sv->src, sizeof(sv->src), x->arg, x->nargs);
}

/* Read the upstream block whose header was just read (at depth). */
static void import_ngx_upstream(struct import_ngx *x, struct import_ring *r)
{
	bool hashed = false;
	int rc;

	while ((rc = import_ngx_next(x)) != IMPORT_NGX_CLOSE) {
		const char *d;

		if (rc == IMPORT_NGX_EOF) {
			import_err(&x->s, x->s.line, "unexpected end of file, expecting \"}\"");
			return;
		}
		if (rc == IMPORT_NGX_ERR)
			return;
		d = x->arg[0];
		if (rc == IMPORT_NGX_BLOCK) {
			import_err(&x->s, x->dline, "unexpected block \"%s\" in upstream %s", d, r->pool);
			return;
		}
		if (strcmp(d, "server") == 0) {
			import_ngx_server(x, r);
		} else if (strcmp(d, "hash") == 0) {
			hashed = true;
			import_ngx_hash(x, r);
		} else if (import_in(d, import_ngx_methods, IMPORT_COUNT(import_ngx_methods))) {
			hashed = true;
			import_err(&x->s, x->dline, "upstream %s balances by %s, not by hash ... consistent: it "
				   "has no placement to keep", r->pool, d);
		} else if (strcmp(d, "include") == 0) {
			import_err(&x->s, x->dline, "include in upstream %s: import reads one file; give it the "
				   "output of nginx -T, or a copy with the file written in", r->pool);
		} else if (import_in(d, import_ngx_ignored, IMPORT_COUNT(import_ngx_ignored))) {
			import_drop(r, d);
		} else {
			import_err(&x->s, x->dline, "unknown directive \"%s\" in upstream %s", d, r->pool);
		}
	}
	if (!hashed)
		import_err(&x->s, r->pool_line, "upstream %s has no hash directive: NGINX balances it round "
			   "robin, which has no placement to keep; ringproxy reproduces hash $request_uri "
			   "consistent", r->pool);
}

/*
 * The file, twice: first the names of its upstream blocks (at any depth:
 * a conf.d file holds them at the top, nginx.conf and nginx -T's output
 * inside http), then the chosen one's directives.
 */
static void import_nginx(struct import_src *src, const char *which, struct import_ring *r)
{
	struct import_ngx *x = calloc(1, sizeof(*x));
	struct import_choice ch = { "upstream", "no upstream block; import reads the file that holds it "
				    "(an include is not followed: give it the output of nginx -T)",
				    "upstream blocks", "--upstream", 0, "" };
	int rc, depth = 0;

	if (!x) {
		import_err(src, 0, "out of memory");
		return;
	}
	r->fmt = "nginx";
	r->scheme = "nginx";
	r->what = "upstream";
	for (int pass = 0; pass < 2; pass++) {
		x->s = *src;
		depth = 0;
		while ((rc = import_ngx_next(x)) != IMPORT_NGX_EOF && rc != IMPORT_NGX_ERR) {
			bool up = rc == IMPORT_NGX_BLOCK && strcmp(x->arg[0], "upstream") == 0 && x->nargs == 2;

			if (rc == IMPORT_NGX_CLOSE) {
				if (depth-- == 0) {
					import_err(&x->s, x->s.line, "unexpected \"}\"");
					goto out;
				}
				continue;
			}
			if (rc == IMPORT_NGX_BLOCK)
				depth++;
			if (!up)
				continue;
			if (pass == 0) {
				import_offer(&ch, r, x->arg[1], which);
				continue;
			}
			if (strcmp(x->arg[1], r->pool) == 0 && !r->pool_line) {
				r->pool_line = x->dline;
				import_ngx_upstream(x, r);
				depth--;
			}
		}
		if (rc == IMPORT_NGX_ERR)
			goto out;
		if (depth > 0) {
			import_err(&x->s, x->s.line, "unexpected end of file, expecting \"}\"");
			goto out;
		}
		if (pass > 0)
			break;
		if (import_chosen(src, &ch, r, which) < 0)
			goto out;
	}
	if (src->m->nerr == 0 && r->n == 0)
		import_err(src, r->pool_line, "upstream %s has no server", r->pool);
out:
	free(x);
}

/* ---- HAProxy ----------------------------------------------------------- */

/* Section keywords: a line that starts with one starts a section. */
static const char *const import_hap_sections[] = {
	"global", "defaults", "frontend", "backend", "listen", "peers", "resolvers", "userlist",
	"mailers", "program", "http-errors", "ring", "cache", "fcgi-app", "log-forward",
};

/* Server keywords that take one argument (the others are flags): what
 * lets a line's `id` and `weight` be found among the rest. */
static const char *const import_hap_argkw[] = {
	"addr", "agent-addr", "agent-inter", "agent-port", "agent-send", "alpn", "ca-file",
	"check-alpn", "check-proto", "check-sni", "ciphers", "ciphersuites", "client-sigalgs",
	"cookie", "crl-file", "crt", "curves", "downinter", "error-limit", "fall", "fastinter",
	"init-addr", "inter", "log-proto", "max-reuse", "maxconn", "maxqueue", "minconn",
	"namespace", "npn", "observe", "on-error", "on-marked-down", "on-marked-up",
	"pool-low-conn", "pool-max-conn", "pool-purge-delay", "port", "proto", "proxy-v2-options",
	"redir", "resolve-net", "resolve-opts", "resolve-prefer", "resolvers", "rise", "shard",
	"sigalgs", "slowstart", "sni", "socks4", "source", "ssl-max-ver", "ssl-min-ver", "tcp-ut",
	"track", "usesrc", "verify", "verifyhost", "ws", "guid",
};

/* One section's placement settings, as `defaults` hands them on. */
struct import_hap_proxy {
	char name[256];
	int line;
	bool is_defaults;
	bool has_servers;
	char mode[16];
	char balance[256];              /* `balance` words after the keyword, "" none */
	int balance_line;
	char hashtype[64];
	int hashtype_line;
	long dflt_weight;               /* default-server weight */
	long hbf;                       /* hash-balance-factor; -1 none */
};

/* Split one line into words (HAProxy's parse_line): blanks separate;
 * '#' outside quotes ends the line; "..." with \ escapes, '...' as is; \
 * escapes outside quotes. Returns the word count, or -1 with an error. */
static int import_hap_words(struct import_src *s, const char *line, size_t len, char *buf,
			    size_t buflen, char **arg)
{
	size_t o = 0;
	int n = 0;
	const char *p = line, *e = line + len;

	while (p < e) {
		char q = 0;

		while (p < e && (*p == ' ' || *p == '\t' || *p == '\r'))
			p++;
		if (p == e || *p == '#')
			break;
		if (n == IMPORT_MAX_ARGS) {
			import_err(s, s->line, "line too long for import");
			return -1;
		}
		arg[n++] = buf + o;
		while (p < e && (q || !strchr(" \t\r#", *p))) {
			if (o + 2 >= buflen) {
				import_err(s, s->line, "line too long for import");
				return -1;
			}
			if (!q && (*p == '"' || *p == '\'')) {
				q = *p++;
				continue;
			}
			if (q && *p == q) {
				q = 0;
				p++;
				continue;
			}
			if (*p == '\\' && q != '\'' && p + 1 < e)
				p++;
			buf[o++] = *p++;
		}
		if (q) {
			import_err(s, s->line, "unmatched quote");
			return -1;
		}
		buf[o++] = '\0';
	}
	return n;
}

/* `server NAME ADDRESS [id N] [weight W] ...` of a backend or listen. */
static void import_hap_server(struct import_src *s, const struct import_hap_proxy *px,
			      struct import_ring *r, char **arg, int n)
{
	struct import_server *sv;
	const char *addr = n > 2 ? arg[2] : "";
	long weight = px->dflt_weight, id = 0;
	bool disabled = false;
	int bad = 0;

	if (n < 3) {
		import_err(s, s->line, "server needs a name and an address");
		return;
	}
	for (int i = 3; i < n; i++) {
		const char *a = arg[i], *v = i + 1 < n ? arg[i + 1] : NULL;

		if (strcmp(a, "id") == 0 || strcmp(a, "weight") == 0) {
			long *to = a[0] == 'i' ? &id : &weight;

			if (!v || import_number(v, a[0] == 'i' ? INT_MAX : 256, to) < 0 || (a[0] == 'i' && *to == 0)) {
				import_err(s, s->line, "server %s %s %s: expected %s", arg[1], a, v ? v : "",
					   a[0] == 'i' ? "a positive integer" : "a weight from 0 to 256");
				bad = 1;
			}
			i++;
		} else if (strcmp(a, "hash-key") == 0) {
			if (!v || strcmp(v, "id") != 0) {
				import_err(s, s->line, "server %s: hash-key %s is not reproduced; ringproxy's "
					   "haproxy scheme hashes the server id (hash-key id, the default)",
					   arg[1], v ? v : "");
				bad = 1;
			}
			i++;
		} else if (strcmp(a, "backup") == 0) {
			import_err(s, s->line, "server %s is a backup server: ringproxy has no backup tier; "
				   "remove it or make it a server of its own", arg[1]);
			bad = 1;
		} else if (strcmp(a, "disabled") == 0) {
			disabled = true;
		} else if (import_in(a, import_hap_argkw, IMPORT_COUNT(import_hap_argkw))) {
			i++;
		}
	}
	if (strchr(addr, '$')) {
		import_err(s, s->line, "server %s: '%s' names an environment variable; import reads the "
			   "file alone: expand it first", arg[1], addr);
		return;
	}
	if (strncmp(addr, "ipv4@", 5) == 0 || strncmp(addr, "ipv6@", 5) == 0)
		addr += 5;
	else if (strchr(addr, '@') || addr[0] == '/') {
		import_err(s, s->line, "server %s: %s is not an address ringproxy can reach; its "
			   "backends are http://host:port", arg[1], addr);
		return;
	}
	if (bad || !(sv = import_server_add(s, r, s->line)))
		return;
	if (import_hostport(s, s->line, addr, -1, sv) < 0) {
		r->n--;
		return;
	}
	if (id) {
		const struct import_server *twin;

		snprintf(sv->id, sizeof(sv->id), "%ld", id);
		sv->explicit_id = true;
		if ((twin = import_same_id(r))) {
			import_err(s, s->line, "server %s: id %ld is also server %s's (line %d)", arg[1], id,
				   twin->name, twin->line);
			r->n--;
			return;
		}
	}
	import_name(r, arg[1], sv->name);
	sv->weight = disabled ? 0 : weight;
	sv->was = disabled ? weight : -1;
	import_join(sv->src, sizeof(sv->src), arg, n);
}

/*
 * HAProxy's numbering of servers without an id (cfgparse.c, checked
 * against haproxy 2.6): a counter starts at 1 and goes up by one after
 * every server, explicit or not; a server without an id takes the first
 * id at or above the counter that no server of the backend has taken
 * (explicit ids count wherever they are in the list), and the counter
 * continues from there.
 */
static void import_hap_number(struct import_ring *r)
{
	long next = 1;

	for (size_t i = 0; i < r->n; i++, next++) {
		if (r->srv[i].explicit_id)
			continue;
		for (;; next++) {
			size_t j;

			/* a server not numbered yet has id "", which reads as 0 */
			for (j = 0; j < r->n && strtol(r->srv[j].id, NULL, 10) != next; j++)
				;
			if (j == r->n)
				break;
		}
		snprintf(r->srv[i].id, sizeof(r->srv[i].id), "%ld", next);
	}
}

/* The chosen section's placement settings, checked. */
static void import_hap_check(struct import_src *s, const struct import_hap_proxy *px, struct import_ring *r)
{
	int bl = px->balance_line ? px->balance_line : px->line, nb = 0;
	const char *ht = px->hashtype;
	char words[sizeof(px->balance)], *b[IMPORT_MAX_ARGS], *save = NULL;

	snprintf(words, sizeof(words), "%s", px->balance);
	for (char *w = strtok_r(words, " ", &save); w && nb < IMPORT_MAX_ARGS; w = strtok_r(NULL, " ", &save))
		b[nb++] = w;

	if (strcmp(px->mode, "http") != 0)
		import_err(s, px->line, "%s %s runs in mode %s%s: balance uri needs mode http", r->what,
			   px->name, *px->mode ? px->mode : "tcp", *px->mode ? "" : " (HAProxy's default)");
	if (nb == 0 || strcmp(b[0], "uri") != 0) {
		import_err(s, bl, "%s %s balances by %s, not by balance uri: it has no placement to keep "
			   "(ringproxy reproduces balance uri with hash-type consistent)", r->what, px->name,
			   nb ? b[0] : "roundrobin (HAProxy's default)");
	} else {
		bool whole = false, path_only = false;

		for (int i = 1; i < nb; i++) {
			if (strcmp(b[i], "whole") == 0)
				whole = true;
			else if (strcmp(b[i], "path-only") == 0)
				path_only = true;
			else {
				/* len N and depth N: the parameter and its value in one message */
				bool arg = (strcmp(b[i], "len") == 0 || strcmp(b[i], "depth") == 0) && i + 1 < nb;

				import_err(s, bl, "balance uri %s%s%s is not reproduced; ringproxy reproduces "
					   "balance uri [whole | path-only]", b[i], arg ? " " : "", arg ? b[i + 1] : "");
				i += arg;
			}
		}
		if (whole && path_only)
			import_err(s, bl, "balance uri with both whole and path-only is not reproduced; "
				   "ringproxy reproduces one of them or neither");
		/* the haproxy scheme's own key is uri; written all the same */
		r->key = whole ? "uri+query" : path_only ? "path" : "uri";
		r->key_why = whole ? "balance uri whole" : path_only ? "balance uri path-only" : "balance uri";
	}
	/* hash-type consistent alone is sdbm with avalanche (cfgparse-listen.c);
	 * naming sdbm without avalanche is another hash */
	if (strncmp(ht, "consistent", 10) != 0) {
		import_err(s, px->hashtype_line ? px->hashtype_line : px->line,
			   "hash-type %s: HAProxy places a key by its hash modulo the servers' weights, which "
			   "is not reproduced; ringproxy reproduces hash-type consistent",
			   *ht ? ht : "map-based (HAProxy's default)");
	} else if (strcmp(ht, "consistent") != 0 && strcmp(ht, "consistent sdbm avalanche") != 0) {
		import_err(s, px->hashtype_line, "hash-type %s is not reproduced; ringproxy reproduces "
			   "hash-type consistent (sdbm with avalanche, its default)", ht);
	}
	snprintf(r->rule, sizeof(r->rule), "balance %s, hash-type consistent", px->balance);
	r->balance_factor = px->hbf;
}

/* A section keyword's line: a new section, which copies what defaults
 * hands on (the last unnamed defaults, or `from NAME`). */
static void import_hap_section(struct import_src *s, char **arg, int n, struct import_hap_proxy *cur,
			       struct import_hap_proxy *dflt, size_t ndflt)
{
	const struct import_hap_proxy *from = ndflt ? &dflt[0] : NULL;

	memset(cur, 0, sizeof(*cur));
	cur->dflt_weight = 1;
	cur->hbf = -1;
	for (int i = 1; i + 1 < n; i++)
		if (strcmp(arg[i], "from") == 0) {
			from = NULL;
			for (size_t j = 1; j < ndflt; j++)
				if (strcmp(dflt[j].name, arg[i + 1]) == 0)
					from = &dflt[j];
			if (!from)
				import_err(s, s->line, "no defaults section named %s", arg[i + 1]);
		}
	if (from)
		*cur = *from;
	cur->is_defaults = strcmp(arg[0], "defaults") == 0;
	cur->has_servers = false;
	snprintf(cur->name, sizeof(cur->name), "%s", n > 1 && strcmp(arg[1], "from") != 0 ? arg[1] : "");
	cur->line = s->line;
}

/* One line inside a defaults, backend or listen section. */
static void import_hap_line(struct import_src *s, struct import_hap_proxy *px, bool chosen,
			    struct import_ring *r, char **arg, int n)
{
	long v;

	if (strcmp(arg[0], "mode") == 0 && n > 1) {
		snprintf(px->mode, sizeof(px->mode), "%s", arg[1]);
	} else if (strcmp(arg[0], "balance") == 0) {
		import_join(px->balance, sizeof(px->balance), arg + 1, n - 1);
		px->balance_line = s->line;
	} else if (strcmp(arg[0], "hash-type") == 0) {
		import_join(px->hashtype, sizeof(px->hashtype), arg + 1, n - 1);
		px->hashtype_line = s->line;
	} else if (strcmp(arg[0], "hash-balance-factor") == 0 && n > 1 &&
		   import_number(arg[1], 10000, &v) == 0) {
		px->hbf = v;
	} else if (strcmp(arg[0], "default-server") == 0) {
		for (int i = 1; i + 1 < n; i++)
			if (strcmp(arg[i], "weight") == 0 && import_number(arg[i + 1], 256, &v) == 0)
				px->dflt_weight = v;
		for (int i = 1; chosen && i < n; i++)
			if (strcmp(arg[i], "backup") == 0 || strcmp(arg[i], "hash-key") == 0 ||
			    strcmp(arg[i], "disabled") == 0)
				import_err(s, s->line, "default-server %s is not reproduced; write it on the "
					   "servers it is meant for", arg[i]);
	} else if (strcmp(arg[0], "server") == 0 && !px->is_defaults) {
		px->has_servers = true;
		if (chosen)
			import_hap_server(s, px, r, arg, n);
	} else if (strcmp(arg[0], "server-template") == 0 && chosen) {
		import_err(s, s->line, "server-template makes servers from DNS at run time; import "
			   "reproduces servers written out");
	}
}

/*
 * The file, twice: first the backend and listen sections that have
 * servers, then the chosen one's lines, each section starting from what
 * its defaults hand on.
 */
static void import_haproxy(struct import_src *src, const char *which, struct import_ring *r)
{
	struct import_hap_proxy *dflt = NULL, cur;
	char *buf = malloc(16384), *arg[IMPORT_MAX_ARGS];
	struct import_choice ch = { "backend", "no backend or listen section with servers",
				    "backends with servers", "--backend", 0, "" };
	size_t ndflt = 0;

	r->fmt = "haproxy";
	r->scheme = "haproxy";
	r->what = "backend";
	if (!buf) {
		import_err(src, 0, "out of memory");
		return;
	}
	memset(&cur, 0, sizeof(cur));
	for (int pass = 0; pass < 2; pass++) {
		struct import_src s = *src;
		bool in_proxy = false, chosen = false;

		ndflt = 0;
		free(dflt);
		/* slot 0: what the last unnamed defaults hands on */
		dflt = calloc(1, sizeof(*dflt));
		if (!dflt) {
			import_err(src, 0, "out of memory");
			goto out;
		}
		dflt[0].dflt_weight = 1;
		dflt[0].hbf = -1;
		ndflt = 1;
		for (s.line = 1; s.p < s.end; s.line++) {
			const char *nl = memchr(s.p, '\n', (size_t)(s.end - s.p));
			size_t len = (size_t)((nl ? nl : s.end) - s.p);
			int n = import_hap_words(&s, s.p, len, buf, 16384, arg);

			s.p += len + (nl != NULL);
			if (n < 0)
				goto out;
			if (n == 0)
				continue;
			if (import_in(arg[0], import_hap_sections, IMPORT_COUNT(import_hap_sections))) {
				if (in_proxy && cur.is_defaults) {
					/* a named defaults is kept by name, and any defaults is the new default */
					if (*cur.name) {
						struct import_hap_proxy *g = realloc(dflt, (ndflt + 1) * sizeof(*g));

						if (!g) {
							import_err(&s, s.line, "out of memory");
							goto out;
						}
						dflt = g;
						dflt[ndflt++] = cur;
					}
					dflt[0] = cur;
				}
				if (pass == 0 && in_proxy && cur.has_servers)
					import_offer(&ch, r, cur.name, which);
				if (pass == 1 && chosen)
					import_hap_check(&s, &cur, r);
				in_proxy = strcmp(arg[0], "defaults") == 0 || strcmp(arg[0], "backend") == 0 ||
					   strcmp(arg[0], "listen") == 0;
				if (in_proxy)
					import_hap_section(&s, arg, n, &cur, dflt, ndflt);
				chosen = pass == 1 && in_proxy && !cur.is_defaults && !r->pool_line &&
					 strcmp(cur.name, r->pool) == 0;
				if (chosen) {
					r->pool_line = s.line;
					r->what = strcmp(arg[0], "listen") == 0 ? "listen section" : "backend";
				}
				continue;
			}
			if (in_proxy)
				import_hap_line(&s, &cur, chosen, r, arg, n);
		}
		if (pass == 0 && in_proxy && cur.has_servers)
			import_offer(&ch, r, cur.name, which);
		if (pass == 1) {
			if (chosen)
				import_hap_check(&s, &cur, r);
			break;
		}
		if (import_chosen(src, &ch, r, which) < 0)
			goto out;
	}
	import_hap_number(r);
out:
	free(dflt);
	free(buf);
}

/* ---- nutcracker (twemproxy) ---------------------------------------------- */

/* Keys of a nutcracker pool that change no placement. */
static const char *const import_nc_ignored[] = {
	"listen", "timeout", "backlog", "preconnect", "redis", "redis_auth", "redis_db",
	"server_connections", "auto_eject_hosts", "server_retry_timeout", "server_failure_limit",
	"client_connections", "tcpkeepalive",
};

/* A YAML scalar as nutcracker.yml writes one: trimmed, its comment cut,
 * quotes removed. In place. */
static char *import_nc_scalar(char *v)
{
	char *e;

	while (*v == ' ' || *v == '\t')
		v++;
	if (*v == '"' || *v == '\'') {
		char q = *v++;

		e = strchr(v, q);
		if (e)
			*e = '\0';
		return v;
	}
	for (e = v; *e; e++)
		if (*e == '#' && (e == v || e[-1] == ' ' || e[-1] == '\t')) {
			*e = '\0';
			break;
		}
	e = v + strlen(v);
	while (e > v && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		*--e = '\0';
	return v;
}

/* `- host:port:weight [name]` of a pool's servers. */
static void import_nc_server(struct import_src *s, struct import_ring *r, char *v)
{
	const struct import_server *twin;
	struct import_server *sv;
	char *name = strpbrk(v, " \t"), *w;
	long weight;

	if (name) {
		*name++ = '\0';
		name = import_nc_scalar(name);
	}
	w = strrchr(v, ':');
	if (!w || import_number(w + 1, IMPORT_MAX_WEIGHT, &weight) < 0) {
		import_err(s, s->line, "server '%s': expected host:port:weight [name], a weight from 0 to %d",
			   v, IMPORT_MAX_WEIGHT);
		return;
	}
	*w = '\0';
	if (v[0] == '/') {
		import_err(s, s->line, "server %s is a unix socket: ringproxy's backends are http://host:port", v);
		return;
	}
	if (!(sv = import_server_add(s, r, s->line)))
		return;
	if (import_hostport(s, s->line, v, -1, sv) < 0) {
		r->n--;
		return;
	}
	/* twemproxy's identity (nc_conf.c): the name, else the host, with
	 * ":port" unless the port is memcached's 11211 (libmemcached's rule) */
	if (name && name[strcspn(name, " \t;#")]) {
		import_err(s, s->line, "server %s: name '%s' holds a blank, ';' or '#', which an INI "
			   "value cannot carry", v, name);
		r->n--;
		return;
	}
	if (name && *name)
		snprintf(sv->id, sizeof(sv->id), "%s", name);
	else if (sv->port == 11211)
		snprintf(sv->id, sizeof(sv->id), "%s", sv->host);
	else
		snprintf(sv->id, sizeof(sv->id), "%s", v);
	if ((twin = import_same_id(r))) {
		import_err(s, s->line, "server %s: its identity '%s' is also the server's at line %d: "
			   "ketama gives both the same points; give one a name of its own", v, sv->id,
			   twin->line);
		r->n--;
		return;
	}
	import_name(r, name && *name ? name : v, sv->name);
	sv->weight = weight;
	snprintf(sv->src, sizeof(sv->src), "- %s:%ld%s%s", v, weight, name ? " " : "", name ? name : "");
}

/* The pool's settings: distribution, hash, hash_tag, the rest ignored. */
static void import_nc_key(struct import_src *s, struct import_ring *r, const char *k, const char *v,
			  char *hash)
{
	if (strcmp(k, "distribution") == 0) {
		if (strcmp(v, "ketama") != 0)
			import_err(s, s->line, "distribution %s is not reproduced; ringproxy reproduces ketama", v);
	} else if (strcmp(k, "hash") == 0) {
		snprintf(hash, 32, "%s", v);
		if (strcmp(v, "md5") != 0 && strcmp(v, "fnv1a_64") != 0)
			import_err(s, s->line, "hash %s is not reproduced; ringproxy's ketama scheme hashes keys "
				   "with md5 or fnv1a_64", v);
	} else if (strcmp(k, "hash_tag") == 0) {
		import_err(s, s->line, "hash_tag hashes part of a key, which is not reproduced");
	} else if (import_in(k, import_nc_ignored, IMPORT_COUNT(import_nc_ignored))) {
		import_drop(r, k);
	} else {
		import_err(s, s->line, "unknown key '%s' in pool %s", k, r->pool);
	}
}

/*
 * The YAML of nutcracker.yml: pools are the keys at column 0, each a
 * block of `key: value` lines indented under it; `servers:` is followed
 * by `- ` items. Flow style ([a, b], {a: b}), anchors and multi-line
 * values are not part of it and are refused.
 */
static void import_ketama(struct import_src *src, const char *which, struct import_ring *r)
{
	struct import_src s = *src;
	struct import_choice ch = { "pool", "no pool", "pools", "--pool", 0, "" };
	char *line = NULL, hash[32] = "";
	bool in_pool = false, in_servers = false;

	r->fmt = "ketama";
	r->scheme = "ketama";
	r->what = "pool";
	for (s.line = 1; s.p < s.end; s.line++) {
		const char *nl = memchr(s.p, '\n', (size_t)(s.end - s.p));
		size_t len = (size_t)((nl ? nl : s.end) - s.p);
		char *k, *v, *colon;
		size_t indent;

		free(line);
		line = strndup(s.p, len);
		s.p += len + (nl != NULL);
		if (!line) {
			import_err(&s, s.line, "out of memory");
			break;
		}
		indent = strspn(line, " ");
		k = import_nc_scalar(line);
		if (!*k || *k == '#' || strcmp(k, "---") == 0)
			continue;
		if (line[indent] == '\t') {
			import_err(&s, s.line, "a tab in the indentation; YAML indents with spaces");
			continue;
		}
		if (indent == 0) {
			colon = strchr(k, ':');
			if (!colon || colon[1]) {
				import_err(&s, s.line, "expected a pool name and ':' at the start of the line");
				in_pool = false;
				continue;
			}
			*colon = '\0';
			import_offer(&ch, r, k, which);
			in_pool = !r->pool_line && strcmp(r->pool, k) == 0;
			in_servers = false;
			if (in_pool)
				r->pool_line = s.line;
			continue;
		}
		if (!in_pool)
			continue;
		if (*k == '-' && (k[1] == ' ' || k[1] == '\0')) {
			if (!in_servers)
				import_err(&s, s.line, "a list item outside servers:");
			else
				import_nc_server(&s, r, import_nc_scalar(k + 1));
			continue;
		}
		colon = strchr(k, ':');
		if (!colon || (colon[1] && colon[1] != ' ')) {
			import_err(&s, s.line, "expected key: value");
			continue;
		}
		*colon = '\0';
		v = colon + 1 + strspn(colon + 1, " ");
		if (*v == '[' || *v == '{' || *v == '&' || *v == '*' || *v == '|' || *v == '>') {
			import_err(&s, s.line, "%s: '%s' is YAML nutcracker.yml does not use; write the value "
				   "plainly", k, import_nc_scalar(v));
			continue;
		}
		v = import_nc_scalar(v);
		in_servers = strcmp(k, "servers") == 0;
		if (in_servers) {
			if (*v)
				import_err(&s, s.line, "servers: is a list of - host:port:weight [name] lines "
					   "(flow style is not read)");
			continue;
		}
		import_nc_key(&s, r, k, v, hash);
	}
	free(line);
	if (src->m->nerr)
		return;
	if (import_chosen(src, &ch, r, which) == 0 && r->n == 0)
		import_err(src, r->pool_line, "pool %s has no server", r->pool);
	/* twemproxy's defaults: distribution ketama, hash fnv1a_64 */
	if (!*hash || strcmp(hash, "fnv1a_64") == 0)
		r->key_hash = "fnv1a_64";
	snprintf(r->rule, sizeof(r->rule), "distribution ketama, hash %s%s", *hash ? hash : "fnv1a_64",
		 *hash ? "" : " (its default)");
}

/* ---- the command ------------------------------------------------------- */

int import_text(int format, const char *name, const char *text, size_t len, const char *which,
		FILE *out, struct import_msgs *m)
{
	struct import_src s = { name, text, text + len, 1, m };
	struct import_ring r;

	memset(&r, 0, sizeof(r));
	r.balance_factor = -1;
	memset(m, 0, sizeof(*m));
	if (memchr(text, '\0', len)) {
		import_err(&s, 0, "holds a NUL byte: not a config file");
		return -1;
	}
	if (format == IMPORT_NGINX)
		import_nginx(&s, which, &r);
	else if (format == IMPORT_HAPROXY)
		import_haproxy(&s, which, &r);
	else
		import_ketama(&s, which, &r);
	if (m->nerr == 0) {
		bool any = false;

		for (size_t i = 0; i < r.n; i++)
			any |= r.srv[i].weight > 0;
		if (!any)
			import_err(&s, r.pool_line, "%s %s has no server with a weight above 0", r.what, r.pool);
	}
	if (m->nerr == 0)
		import_write(&r, name, out);
	free(r.srv);
	return m->nerr ? -1 : 0;
}

int import_file(int format, const char *path, const char *which, FILE *out, struct import_msgs *m)
{
	FILE *f = fopen(path, "rb");
	char *text = NULL;
	size_t len = 0;
	int rc = -1;

	memset(m, 0, sizeof(*m));
	if (!f) {
		struct import_src s = { path, NULL, NULL, 0, m };

		import_err(&s, 0, "cannot open: %s", strerror(errno));
		return -1;
	}
	text = malloc(IMPORT_MAX_FILE + 1);
	if (text)
		len = fread(text, 1, IMPORT_MAX_FILE + 1, f);
	if (!text || ferror(f) || len > IMPORT_MAX_FILE) {
		struct import_src s = { path, NULL, NULL, 0, m };

		import_err(&s, 0, "%s", !text ? "out of memory" : ferror(f) ? strerror(errno) :
			   "larger than 16 MiB: not a config file");
	} else {
		rc = import_text(format, path, text, len, which, out, m);
	}
	free(text);
	fclose(f);
	return rc;
}

static void import_usage(FILE *f)
{
	fprintf(f,
		"usage: ringproxy import nginx FILE [--upstream NAME]\n"
		"       ringproxy import haproxy FILE [--backend NAME]\n"
		"       ringproxy import ketama FILE [--pool NAME]      (nutcracker.yml)\n"
		"  print a ringproxy.ini that places every key where that proxy does\n"
		"  ([ring] scheme, one [backend NAME] per server, its weight and id);\n"
		"  what cannot be reproduced is refused as FILE:LINE\n");
}

int import_main(int argc, char **argv, FILE *out)
{
	static const char *const formats[] = { "nginx", "haproxy", "ketama" };
	static const char *const options[] = { "--upstream", "--backend", "--pool" };
	struct import_msgs m;
	const char *path = NULL, *which = NULL;
	int format = -1, rc;

	if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		import_usage(out);
		return 0;
	}
	for (int i = 0; argc > 1 && i < 3; i++)
		if (strcmp(argv[1], formats[i]) == 0)
			format = i;
	if (format < 0 || argc < 3) {
		import_usage(stderr);
		return 2;
	}
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], options[format]) == 0 && i + 1 < argc && !which) {
			which = argv[++i];
		} else if (argv[i][0] != '-' && !path) {
			path = argv[i];
		} else {
			fprintf(stderr, "ringproxy import: unexpected argument '%s'\n", argv[i]);
			import_usage(stderr);
			return 2;
		}
	}
	if (!path) {
		import_usage(stderr);
		return 2;
	}
	rc = import_file(format, path, which, out, &m);
	for (size_t i = 0; i < m.n; i++)
		fprintf(stderr, "%s\n", m.msg[i]);
	if (rc < 0)
		fprintf(stderr, "ringproxy import: %s: %zu error%s; nothing written\n", path, m.nerr,
			m.nerr == 1 ? "" : "s");
	import_msgs_free(&m);
	if (rc == 0 && fflush(out) != 0)
		return 1;
	return rc < 0 ? 1 : 0;
}
