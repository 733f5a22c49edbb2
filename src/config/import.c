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
 * network; the NGINX reader follows `include` (import_ngx_read), on disk
 * or within the output of `nginx -T` read from stdin, and carries the
 * listen and the Host of the server that proxies to the upstream.
 * Main thread of a short-lived process.
 */
#include "config/import.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <glob.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

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
	const char *file;               /* where it is written (an include) */
	unsigned next_k;                /* holding a name others derive from:
					   the next "-K" to try for them */
	char src[512];                  /* the source's words, for a comment */
};

/*
 * An open-addressing set of a ring's servers by their name or their id
 * (slot: server index + 1): naming a server and finding its twin cost a
 * probe, not a scan of the servers before it. Scans made naming cubic in
 * the servers sharing a name (4,096 HAProxy servers called `s`: about a
 * minute).
 */
struct import_set {
	uint32_t *slot;
	size_t cap, n;                  /* cap a power of two, or 0 */
	bool by_id;
};

struct import_ring {
	const char *fmt;                /* "nginx", "haproxy", "ketama" */
	const char *scheme;             /* [ring] scheme */
	const char *what;               /* "upstream", "backend", "pool" */
	char pool[256];                 /* its name in the source */
	int pool_line;
	const char *pool_file;          /* where it is (NULL: the file read) */
	char rule[320];                 /* the placement rule, for the comment */
	const char *key;                /* [ring] key; NULL: the scheme's own */
	const char *key_why;
	const char *key_hash;           /* [ring] key_hash; NULL: none */
	long balance_factor;            /* percent; -1: ringproxy's default */
	char dropped[512];              /* directives that change no placement */
	struct import_server *srv;
	size_t n, cap;
	const char *names;              /* --names: "thumbs-%d"; NULL: from
					   the source */
	struct import_set by_name, by_id;
	char **keep;                    /* strings the servers point into
					   (file names), freed with r */
	size_t nkeep;
	/* what the proxy's front says, NULL/"" when it says nothing */
	char listen[300];               /* [proxy] listen */
	char listen_note[600];          /* a comment above it */
	char host[256];                 /* [proxy] backend_host */
	char host_note[800];            /* a comment above it (or why none) */
	char health_path[256];          /* [health] path */
	char health_note[300];          /* where it comes from */
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

/* snprintf for text that may be cut (a comment, a path): no warning. */
__attribute__((format(printf, 3, 4)))
static void import_fmt(char *out, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(out, len, fmt, ap);
	va_end(ap);
}

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
	import_fmt(pat, sizeof(pat), ", %s,", what);
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

/* ---- names and ids: sets of the servers -------------------------------- */

static uint64_t import_hash(const char *k)
{
	uint64_t h = UINT64_C(0xcbf29ce484222325);  /* FNV-1a */

	for (; *k; k++)
		h = (h ^ (unsigned char)*k) * UINT64_C(0x100000001b3);
	return h;
}

static const char *import_set_key(const struct import_ring *r, const struct import_set *t, size_t i)
{
	return t->by_id ? r->srv[i].id : r->srv[i].name;
}

/* The server of r in t whose key is k, or -1. */
static long import_set_find(const struct import_ring *r, const struct import_set *t, const char *k)
{
	if (t->cap == 0)
		return -1;
	for (size_t h = import_hash(k) & (t->cap - 1);; h = (h + 1) & (t->cap - 1)) {
		if (t->slot[h] == 0)
			return -1;
		if (strcmp(import_set_key(r, t, t->slot[h] - 1), k) == 0)
			return (long)t->slot[h] - 1;
	}
}

/* Server i of r into t, which doubles at half full. 0, or -1 out of memory. */
static int import_set_add(const struct import_ring *r, struct import_set *t, size_t i)
{
	if (2 * (t->n + 1) > t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 64;
		uint32_t *slot = calloc(cap, sizeof(*slot));

		if (!slot)
			return -1;
		for (size_t j = 0; j < t->cap; j++) {
			size_t h;

			if (t->slot[j] == 0)
				continue;
			for (h = import_hash(import_set_key(r, t, t->slot[j] - 1)) & (cap - 1); slot[h];
			     h = (h + 1) & (cap - 1))
				;
			slot[h] = t->slot[j];
		}
		free(t->slot);
		t->slot = slot;
		t->cap = cap;
	}
	for (size_t h = import_hash(import_set_key(r, t, i)) & (t->cap - 1);; h = (h + 1) & (t->cap - 1))
		if (t->slot[h] == 0) {
			t->slot[h] = (uint32_t)i + 1;
			break;
		}
	t->n++;
	return 0;
}

/* A copy of text that lives as long as r (for the servers' file names),
 * or NULL out of memory. */
static const char *import_keep(struct import_ring *r, const char *text)
{
	char *copy = strdup(text), **grown;

	if (!copy)
		return NULL;
	grown = realloc(r->keep, (r->nkeep + 1) * sizeof(*grown));
	if (!grown) {
		free(copy);
		return NULL;
	}
	r->keep = grown;
	r->keep[r->nkeep++] = copy;
	return copy;
}

/*
 * sv, the last server of r, is kept: its [backend NAME] from the
 * source's name or address, and its name and id into r's sets. Every
 * character outside conf.c's alphabet (letters, digits, '.', '_', '-')
 * becomes '-', runs of '-' become one, and none is left at either end;
 * at most 64 characters; a name another server of r has taken gets "-2",
 * "-3"... So 10.0.0.1:8080 is 10.0.0.1-8080 and [::1]:8080 is 1-8080.
 * With --names (r->names) the name is its pattern with the server's
 * place in the source, from 1. 0, or -1 with an error at line.
 */
static int import_name(struct import_src *s, struct import_ring *r, const char *from, struct import_server *sv)
{
	char base[IMPORT_NAME_MAX - 5];  /* room for "-65535" after it */
	size_t n = 0;
	long holder;

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
	if (r->names)
		snprintf(base, sizeof(base), r->names, (int)(sv - r->srv) + 1);
	snprintf(sv->name, sizeof(sv->name), "%s", base);
	sv->next_k = 0;
	/* the first "-K" not taken: the holder of the name remembers
	 * where the last search for it ended */
	if ((holder = import_set_find(r, &r->by_name, sv->name)) >= 0) {
		unsigned k = r->srv[holder].next_k ? r->srv[holder].next_k : 2;

		do
			snprintf(sv->name, sizeof(sv->name), "%s-%u", base, k++);
		while (import_set_find(r, &r->by_name, sv->name) >= 0);
		r->srv[holder].next_k = k;
	}
	if (import_set_add(r, &r->by_name, (size_t)(sv - r->srv)) < 0 ||
	    (*sv->id && import_set_add(r, &r->by_id, (size_t)(sv - r->srv)) < 0)) {
		import_err(s, sv->line, "out of memory");
		return -1;
	}
	return 0;
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
	r->srv[r->n].file = s->file;
	r->srv[r->n].was = -1;
	return &r->srv[r->n++];
}

/* A kept server of r with the last one's id, or NULL: two servers the
 * scheme hashes the same would get the same points. */
static const struct import_server *import_same_id(const struct import_ring *r)
{
	long i = import_set_find(r, &r->by_id, r->srv[r->n - 1].id);

	return i >= 0 ? &r->srv[i] : NULL;
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
		 "when ringproxy takes over. Check it, and that every cache answers the health path: "
		 "ringproxy -t --probe -c FILE", r->fmt, r->what, r->pool,
		 r->pool_file ? r->pool_file : file, r->pool_line);
	import_clean(text);
	import_comment(out, text);
	if (strcmp(r->fmt, "ketama") == 0)
		import_comment(out, "A url below is the pool's memcached address: point it at the HTTP "
			       "cache of that host (its id keeps the keys where they are).");
	if (*r->dropped) {
		snprintf(text, sizeof(text), "Not carried over (no placement depends on them): %s", r->dropped);
		import_comment(out, text);
	}
	fputs("\n[proxy]\n", out);
	if (*r->listen_note)
		import_comment(out, r->listen_note);
	fprintf(out, "listen = %s\n"
		"admin_listen = 127.0.0.1:8081   ; /stats /metrics / /ring /health\n",
		*r->listen ? r->listen : "0.0.0.0:8080");
	if (*r->host_note)
		import_comment(out, r->host_note);
	if (*r->host)
		fprintf(out, "backend_host = %s\n", r->host);
	fputs("\n[ring]\n", out);
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
	snprintf(text, sizeof(text), "%s%sA failed request counts against its cache; ringproxy also GETs "
		 "path on every cache every 2s, so a cache that hangs or stops is out of the ring after 3 "
		 "failures, before clients wait on it, and back after 2 good answers. Every cache must answer "
		 "it with 2xx or 3xx, or it is taken out: ringproxy -t --probe -c FILE checks them before the "
		 "switch (a Varnish cache answers it in vcl_recv: ringproxy(7), IN FRONT OF VARNISH).",
		 r->health_note, *r->health_note ? " " : "");
	import_clean(text);
	fputs("\n[health]\n", out);
	import_comment(out, text);
	fprintf(out, "path = %s\n", *r->health_path ? r->health_path : "/health");
	fprintf(out, "\n; A backend's id is what the scheme hashes: its url may change\n"
		"; without moving a key.\n");
	for (size_t i = 0; i < r->n; i++) {
		const struct import_server *sv = &r->srv[i];

		fprintf(out, "\n; %s:%d: %s\n", sv->file ? sv->file : file, sv->line, sv->src);
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
/*
 * A file the NGINX reader reads: on disk (loaded once, its text owned
 * here), or a part of `nginx -T`'s output, which prints every file NGINX
 * read after a "# configuration file PATH:" line, the main one first.
 */
struct import_ngx_file {
	const char *path;               /* kept in r: servers point at it */
	const char *text;
	size_t len;
	char *own;                      /* the loaded text, or NULL */
	dev_t dev;                      /* on disk: what it is, whatever */
	ino_t ino;                      /* the path that named it */
	bool active;                    /* being read: an include of it is a loop */
};

/* Where reading goes on when a file ends: the includer's place (resume),
 * or another file the same include matched, from its start. */
struct import_ngx_frame {
	size_t file;
	const char *p;
	int line;
	bool resume;
};

/* Includes open at once, at most: NGINX has no limit but its stack. */
#define IMPORT_NGX_NEST 32

/* What the front of the proxy says about the upstream: the blocks of
 * the file (http, server, location), each with what it sets. */
enum { IMPORT_NGX_B_OTHER, IMPORT_NGX_B_HTTP, IMPORT_NGX_B_SERVER, IMPORT_NGX_B_LOCATION };

struct import_ngx_block {
	int parent;                     /* index, -1 at the top */
	int kind;
	bool psh;                       /* has a proxy_set_header: its list
					   replaces the enclosing one's */
	const char *host;               /* proxy_set_header Host's value */
	const char *host_file;
	int host_line;
	const char *listen;             /* a server's first listen, as written */
	const char *listen_file;
	int listen_line;
	char more[200];                 /* its other listens */
};

/* A location that proxy_passes to the upstream. */
struct import_ngx_pass {
	int block;
	const char *file;
	int line;
};

#define IMPORT_NGX_OPEN 64              /* blocks followed in depth */

struct import_ngx {
	struct import_src s;
	char buf[16384];                /* the current directive's words */
	char *arg[IMPORT_MAX_ARGS];
	int nargs;
	int dline;                      /* of its first word */
	struct import_ring *r;
	struct import_ngx_file *files;
	size_t nfiles;
	size_t cur;                     /* the file being read */
	struct import_ngx_frame *stack;
	size_t nstack, capstack;
	int nest;                       /* includes open */
	bool dump;                      /* stdin: nginx -T's output ... */
	bool markers;                   /* ... with its file lines */
	char prefix[4096];              /* a relative include is from here */
	struct import_ngx_block *blk;
	size_t nblk, capblk;
	int open[IMPORT_NGX_OPEN];      /* the blocks open, innermost last */
	int nopen, deep;                /* and how many more past that */
	struct import_ngx_pass pass[8];
	int npass;
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

/* A file into x's list: 0, or -1 out of memory (with an error). */
static int import_ngx_add_file(struct import_ngx *x, const char *path, const char *text, size_t len, char *own)
{
	struct import_ngx_file *grown = realloc(x->files, (x->nfiles + 1) * sizeof(*grown));
	const char *kept = import_keep(x->r, path);

	if (!grown || !kept) {
		if (grown)
			x->files = grown;
		free(own);
		import_err(&x->s, x->dline, "out of memory");
		return -1;
	}
	x->files = grown;
	memset(&x->files[x->nfiles], 0, sizeof(x->files[0]));
	x->files[x->nfiles].path = kept;
	x->files[x->nfiles].text = text;
	x->files[x->nfiles].len = len;
	x->files[x->nfiles].own = own;
	x->nfiles++;
	return 0;
}

/* The file at path, read once: its index, or -1 with an error at the
 * include (not a regular file, unreadable, too large). Opened without
 * blocking, so a FIFO cannot hang the import. */
static long import_ngx_load(struct import_ngx *x, const char *path)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	char *text = NULL;
	size_t len = 0;
	ssize_t got;

	if (fd < 0 || fstat(fd, &st) < 0) {
		import_err(&x->s, x->dline, "include %s: cannot open: %s; import reads what NGINX reads: run it "
			   "where NGINX runs, or pipe it nginx -T's output (ringproxy import nginx -)", path,
			   strerror(errno));
		goto fail;
	}
	for (size_t i = 0; i < x->nfiles; i++)
		if (x->files[i].ino && x->files[i].dev == st.st_dev && x->files[i].ino == st.st_ino) {
			close(fd);
			return (long)i;
		}
	if (!S_ISREG(st.st_mode) || st.st_size > (off_t)IMPORT_MAX_FILE) {
		import_err(&x->s, x->dline, "include %s: %s", path, !S_ISREG(st.st_mode) ? "not a regular file" :
			   "larger than 16 MiB: not a config file");
		goto fail;
	}
	text = malloc((size_t)st.st_size + 1);
	while (text && len < (size_t)st.st_size && (got = read(fd, text + len, (size_t)st.st_size - len)) > 0)
		len += (size_t)got;
	if (!text || len < (size_t)st.st_size) {
		import_err(&x->s, x->dline, "include %s: %s", path, text ? "cannot read it whole" : "out of memory");
		goto fail;
	}
	if (memchr(text, '\0', len)) {
		import_err(&x->s, x->dline, "include %s: holds a NUL byte: not a config file", path);
		goto fail;
	}
	close(fd);
	if (import_ngx_add_file(x, path, text, len, text) < 0)
		return -1;
	x->files[x->nfiles - 1].dev = st.st_dev;
	x->files[x->nfiles - 1].ino = st.st_ino;
	return (long)x->nfiles - 1;
fail:
	free(text);
	if (fd >= 0)
		close(fd);
	return -1;
}

/* The files of what was read: the one file (and the directory relative
 * includes start from), or nginx -T's output cut at its file lines; the
 * lines before the first ("nginx: ... syntax is ok" when 2>&1) are not
 * config. 0, or -1 with an error. */
static int import_ngx_files(struct import_ngx *x, const struct import_src *src, bool dump)
{
	static const char mark[] = "# configuration file ";
	const char *p = src->p, *start = NULL, *name = NULL;
	size_t namelen = 0;
	char path[4096];

	x->dump = dump;
	if (dump) {
		while (p < src->end) {
			const char *e = memchr(p, '\n', (size_t)(src->end - p));
			size_t n = (size_t)((e ? e : src->end) - p);

			if (n > sizeof(mark) && strncmp(p, mark, sizeof(mark) - 1) == 0 && p[n - 1] == ':') {
				if (name) {
					snprintf(path, sizeof(path), "%.*s", (int)namelen, name);
					if (import_ngx_add_file(x, path, start, (size_t)(p - start), NULL) < 0)
						return -1;
				}
				name = p + sizeof(mark) - 1;
				namelen = n - sizeof(mark);
				start = e ? e + 1 : src->end;
			}
			p = e ? e + 1 : src->end;
		}
		if (name) {
			snprintf(path, sizeof(path), "%.*s", (int)namelen, name);
			if (import_ngx_add_file(x, path, start, (size_t)(src->end - start), NULL) < 0)
				return -1;
			x->markers = true;
		}
	}
	if (x->nfiles == 0) {
		struct stat st;

		if (import_ngx_add_file(x, src->file, src->p, (size_t)(src->end - src->p), NULL) < 0)
			return -1;
		/* known by what it is, so that an include of it is a loop */
		if (!dump && stat(src->file, &st) == 0) {
			x->files[0].dev = st.st_dev;
			x->files[0].ino = st.st_ino;
		}
	}
	/* NGINX takes a relative include from its configuration's
	 * directory: the main file's ("" for the current one) */
	snprintf(path, sizeof(path), "%s", x->files[0].path);
	snprintf(x->prefix, sizeof(x->prefix), "%s", strchr(path, '/') ? dirname(path) : "");
	return 0;
}

/* Reading starts over at the main file. */
static void import_ngx_start(struct import_ngx *x)
{
	x->nstack = 0;
	x->nest = 0;
	for (size_t i = 0; i < x->nfiles; i++)
		x->files[i].active = false;
	x->cur = 0;
	x->files[0].active = true;
	x->s.file = x->files[0].path;
	x->s.p = x->files[0].text;
	x->s.end = x->files[0].text + x->files[0].len;
	x->s.line = 1;
}

static int import_ngx_push(struct import_ngx *x, size_t file, const char *p, int line, bool resume)
{
	if (x->nstack == x->capstack) {
		size_t cap = x->capstack ? 2 * x->capstack : 16;
		struct import_ngx_frame *grown = realloc(x->stack, cap * sizeof(*grown));

		if (!grown) {
			import_err(&x->s, x->dline, "out of memory");
			return -1;
		}
		x->stack = grown;
		x->capstack = cap;
	}
	x->stack[x->nstack++] = (struct import_ngx_frame){ file, p, line, resume };
	return 0;
}

/* Read file i from its start (or at p, line). */
static void import_ngx_enter(struct import_ngx *x, size_t i, const char *p, int line)
{
	x->cur = i;
	x->files[i].active = true;
	x->s.file = x->files[i].path;
	x->s.p = p ? p : x->files[i].text;
	x->s.end = x->files[i].text + x->files[i].len;
	x->s.line = p ? line : 1;
}

/* Whether file i's path matches the include pattern pat. */
static bool import_ngx_match(const char *pat, bool glob_chars, const char *path)
{
	return glob_chars ? fnmatch(pat, path, FNM_PATHNAME) == 0 : strcmp(pat, path) == 0;
}

/*
 * `include PATTERN`, just read: the files it names, in NGINX's order
 * (glob's, sorted; nginx -T prints them so), read in its place before
 * the rest of this file. A pattern without a glob character must name a
 * file, as NGINX requires; one with may match none. A file already being
 * read (an include loop) is refused. 0, or -1 with an error.
 */
static int import_ngx_include(struct import_ngx *x)
{
	char pat[4096];
	size_t *hit = NULL, nhit = 0;
	bool glob_chars;
	glob_t g;
	int rc = -1;

	if (x->nargs != 2) {
		import_err(&x->s, x->dline, "include takes one file or pattern");
		return -1;
	}
	if (x->dump && !x->markers) {
		import_warn(&x->s, x->dline, "include %s is not followed: stdin is not nginx -T's output (no "
			    "\"# configuration file\" lines); give the file's path, or pipe nginx -T", x->arg[1]);
		return 0;
	}
	import_fmt(pat, sizeof(pat), "%s%s%s", x->arg[1][0] == '/' ? "" : x->prefix,
		   x->arg[1][0] == '/' || !*x->prefix ? "" : "/", x->arg[1]);
	glob_chars = strpbrk(x->arg[1], "*?[") != NULL;
	if (!(hit = malloc(sizeof(*hit) * (x->dump ? x->nfiles + 1 : 1))))
		goto nomem;
	if (x->dump) {
		for (size_t i = 0; i < x->nfiles; i++)
			if (import_ngx_match(pat, glob_chars, x->files[i].path))
				hit[nhit++] = i;
		if (nhit == 0 && !glob_chars) {
			import_err(&x->s, x->dline, "include %s: %s is not in nginx -T's output", x->arg[1], pat);
			goto out;
		}
	} else if (!glob_chars) {
		long i = import_ngx_load(x, pat);

		if (i < 0)
			goto out;
		hit[nhit++] = (size_t)i;
	} else {
		int grc = glob(pat, 0, NULL, &g);

		if (grc != 0 && grc != GLOB_NOMATCH) {
			import_err(&x->s, x->dline, "include %s: cannot list %s", x->arg[1], pat);
			goto out;
		}
		if (grc == 0) {
			size_t *grown = realloc(hit, sizeof(*hit) * (g.gl_pathc ? g.gl_pathc : 1));

			if (!grown) {
				globfree(&g);
				goto nomem;
			}
			hit = grown;
			for (size_t k = 0; k < g.gl_pathc; k++) {
				long i = import_ngx_load(x, g.gl_pathv[k]);

				if (i < 0) {
					globfree(&g);
					goto out;
				}
				hit[nhit++] = (size_t)i;
			}
			globfree(&g);
		}
	}
	if (nhit == 0) {
		rc = 0;
		goto out;
	}
	for (size_t k = 0; k < nhit; k++)
		if (x->files[hit[k]].active) {
			import_err(&x->s, x->dline, "include %s: %s is being read already (an include loop); NGINX "
				   "refuses it too", x->arg[1], x->files[hit[k]].path);
			goto out;
		}
	if (x->nest == IMPORT_NGX_NEST) {
		import_err(&x->s, x->dline, "include %s: more than %d includes inside each other", x->arg[1],
			   IMPORT_NGX_NEST);
		goto out;
	}
	if (import_ngx_push(x, x->cur, x->s.p, x->s.line, true) < 0)
		goto out;
	for (size_t k = nhit; k-- > 1;)
		if (import_ngx_push(x, hit[k], NULL, 1, false) < 0)
			goto out;
	x->nest++;
	import_ngx_enter(x, hit[0], NULL, 1);
	rc = 0;
	goto out;
nomem:
	import_err(&x->s, x->dline, "out of memory");
out:
	free(hit);
	return rc;
}

/* The next directive as import_ngx_next says, includes followed: a file
 * that ends goes on where it was included. */
static int import_ngx_read(struct import_ngx *x)
{
	for (;;) {
		int rc = import_ngx_next(x);

		if (rc == IMPORT_NGX_EOF && x->nstack > 0) {
			struct import_ngx_frame f = x->stack[--x->nstack];

			x->files[x->cur].active = false;
			if (f.resume)
				x->nest--;
			import_ngx_enter(x, f.file, f.p, f.line);
			continue;
		}
		if (rc == IMPORT_NGX_END && strcmp(x->arg[0], "include") == 0) {
			if (import_ngx_include(x) < 0)
				return IMPORT_NGX_ERR;
			continue;
		}
		return rc;
	}
}

static void import_ngx_free(struct import_ngx *x)
{
	for (size_t i = 0; x && i < x->nfiles; i++)
		free(x->files[i].own);
	if (x) {
		free(x->files);
		free(x->stack);
		free(x->blk);
	}
	free(x);
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
	if (import_name(s, r, addr, sv) < 0) {
		r->n--;
		return;
	}
	sv->weight = down ? 0 : weight;
	sv->was = down ? weight : -1;
	import_join(sv->src, sizeof(sv->src), x->arg, x->nargs);
}

/* Read the upstream block whose header was just read (at depth). */
static void import_ngx_upstream(struct import_ngx *x, struct import_ring *r)
{
	bool hashed = false;
	int rc;

	while ((rc = import_ngx_read(x)) != IMPORT_NGX_CLOSE) {
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

/* ---- NGINX: the server that proxies to the upstream -------------------- */

/* A block opens (its name in x->arg[0]). */
static void import_ngx_open(struct import_ngx *x)
{
	const char *w = x->arg[0];
	int kind = strcmp(w, "http") == 0 ? IMPORT_NGX_B_HTTP : strcmp(w, "server") == 0 ? IMPORT_NGX_B_SERVER :
		   strcmp(w, "location") == 0 || strcmp(w, "if") == 0 || strcmp(w, "limit_except") == 0 ?
		   IMPORT_NGX_B_LOCATION : IMPORT_NGX_B_OTHER;

	if (x->deep || x->nopen == IMPORT_NGX_OPEN) {
		x->deep++;
		return;
	}
	if (x->nblk == x->capblk) {
		size_t cap = x->capblk ? 2 * x->capblk : 32;
		struct import_ngx_block *grown = realloc(x->blk, cap * sizeof(*grown));

		if (!grown) {
			x->deep++;      /* not followed: only the front's notes are lost */
			return;
		}
		x->blk = grown;
		x->capblk = cap;
	}
	memset(&x->blk[x->nblk], 0, sizeof(x->blk[0]));
	x->blk[x->nblk].parent = x->nopen ? x->open[x->nopen - 1] : -1;
	x->blk[x->nblk].kind = kind;
	x->open[x->nopen++] = (int)x->nblk++;
}

static void import_ngx_close(struct import_ngx *x)
{
	if (x->deep)
		x->deep--;
	else if (x->nopen)
		x->nopen--;
}

/* A directive of the front: proxy_set_header, a server's listen, a
 * location's proxy_pass to the upstream. */
static void import_ngx_front_line(struct import_ngx *x, struct import_ring *r)
{
	struct import_ngx_block *b;
	const char *d = x->arg[0];

	if (x->deep || x->nopen == 0)
		return;
	b = &x->blk[x->open[x->nopen - 1]];
	if (strcmp(d, "proxy_set_header") == 0 && x->nargs == 3) {
		b->psh = true;
		if (strcasecmp(x->arg[1], "host") == 0 && !b->host) {
			b->host = import_keep(r, x->arg[2]);
			b->host_file = x->s.file;
			b->host_line = x->dline;
		}
	} else if (strcmp(d, "listen") == 0 && b->kind == IMPORT_NGX_B_SERVER && x->nargs > 1) {
		char words[300];

		import_join(words, sizeof(words), x->arg + 1, x->nargs - 1);
		if (!b->listen) {
			b->listen = import_keep(r, words);
			b->listen_file = x->s.file;
			b->listen_line = x->dline;
		} else if (strlen(b->more) + strlen(x->arg[1]) + 3 < sizeof(b->more)) {
			snprintf(b->more + strlen(b->more), sizeof(b->more) - strlen(b->more), "%s%s",
				 *b->more ? ", " : "", x->arg[1]);
		}
	} else if (strcmp(d, "proxy_pass") == 0 && x->nargs == 2 && b->kind == IMPORT_NGX_B_LOCATION) {
		const char *u = x->arg[1];
		size_t n;

		if (strncasecmp(u, "http://", 7) != 0 && strncasecmp(u, "https://", 8) != 0)
			return;
		u += u[4] == ':' ? 7 : 8;
		n = strcspn(u, "/$");
		if (n != strlen(r->pool) || strncasecmp(u, r->pool, n) != 0 || x->npass == IMPORT_COUNT(x->pass))
			return;
		if (x->arg[1][4] != ':')
			import_warn(&x->s, x->dline, "proxy_pass %s: NGINX speaks TLS to the caches; ringproxy's "
				    "backends are http://host:port", x->arg[1]);
		x->pass[x->npass++] = (struct import_ngx_pass){ x->open[x->nopen - 1], x->s.file, x->dline };
	}
}

/* The block whose proxy_set_header list applies at block b (NGINX: a
 * level's own list, if it has one, replaces the enclosing level's), or
 * -1 when none has one. */
static int import_ngx_psh(const struct import_ngx *x, int b)
{
	while (b >= 0 && !x->blk[b].psh)
		b = x->blk[b].parent;
	return b;
}

/* The Host NGINX sends from the location of proxy_pass p: a value, or
 * NULL for its default, $proxy_host (the upstream's name). */
static const char *import_ngx_host_of(const struct import_ngx *x, const struct import_ngx_pass *p, int *hb)
{
	*hb = import_ngx_psh(x, p->block);
	return *hb >= 0 ? x->blk[*hb].host : NULL;
}

/* The Host NGINX sent the caches, as [proxy] backend_host (r->host) and
 * the comment above it. */
static void import_ngx_front_host(struct import_ngx *x, struct import_ring *r)
{
	const struct import_ngx_pass *p = &x->pass[0];
	int hb;
	const char *v = import_ngx_host_of(x, p, &hb), *vf = hb >= 0 ? x->blk[hb].host_file : p->file;
	int vl = hb >= 0 && v ? x->blk[hb].host_line : p->line;
	char set[400] = "";

	for (int i = 1; i < x->npass; i++) {
		int h2;
		const char *v2 = import_ngx_host_of(x, &x->pass[i], &h2);

		if (strcmp(v ? v : "$proxy_host", v2 ? v2 : "$proxy_host") != 0) {
			struct import_src at = x->s;

			at.file = x->pass[i].file;
			import_warn(&at, x->pass[i].line, "this location sends the caches Host %s, the one at %s:%d "
				    "%s: ringproxy sends each cache one Host; the first is written",
				    v2 ? v2 : "$proxy_host", p->file, p->line, v ? v : "$proxy_host");
		}
	}
	if (v && strcmp(v, "$proxy_host") != 0)
		import_fmt(set, sizeof(set), "proxy_set_header Host %s, %s:%d", v, vf, vl);
	else
		import_fmt(set, sizeof(set), "proxy_pass http://%s at %s:%d%s", r->pool, p->file, p->line,
			 v ? ", proxy_set_header Host $proxy_host" : ", no proxy_set_header Host");
	if (!v || strcmp(v, "$proxy_host") == 0 ||
	    (*v && !strchr(v, '$') && v[strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._:[]")] == '\0')) {
		import_fmt(r->host, sizeof(r->host), "%s", v && strcmp(v, "$proxy_host") != 0 ? v : r->pool);
		import_fmt(r->host_note, sizeof(r->host_note), "NGINX sent the caches Host: %s (%s). A cache "
			 "that keys objects by Host (Varnish hashes req.http.host) keeps them only if ringproxy sends "
			 "it the same: remove this line and every object is a miss.", r->host, set);
	} else if (strcmp(v, "$http_host") == 0) {
		import_fmt(r->host_note, sizeof(r->host_note), "NGINX sent the caches the client's Host (%s), "
			 "as ringproxy does without backend_host.", set);
	} else if (strcmp(v, "$host") == 0) {
		import_fmt(r->host_note, sizeof(r->host_note), "NGINX sent the caches $host (%s): the client's "
			 "Host lowercased and without its port. ringproxy sends the client's Host as written: the "
			 "same unless clients send a port or capitals.", set);
	} else {
		struct import_src at = x->s;

		at.file = vf;
		import_fmt(r->host_note, sizeof(r->host_note), "NGINX sent the caches Host %s (%s), which is not "
			 "reproduced: set backend_host to the Host your caches key objects by.",
			 *v ? v : "\"\" (none at all)", set);
		import_warn(&at, vl, "proxy_set_header Host %s is not reproduced: ringproxy sends the client's "
			    "Host, or one [proxy] backend_host; set it to the Host the caches key objects by (Varnish "
			    "hashes req.http.host)", *v ? v : "\"\"");
	}
}

/* NGINX's listen (its words after "listen") as [proxy] listen, into r. */
static void import_ngx_front_listen(struct import_ngx *x, struct import_ring *r, int sb)
{
	const struct import_ngx_block *b = &x->blk[sb];
	const char *w = b->listen ? b->listen : "*:80";
	char addr[256], at[300];
	size_t n = strcspn(w, " ");

	if (b->listen)
		import_fmt(at, sizeof(at), "%s:%d: listen %s", b->listen_file, b->listen_line, w);
	else
		import_fmt(at, sizeof(at), "no listen in its server: NGINX's default, *:80");
	snprintf(addr, sizeof(addr), "%.*s", (int)n, w);
	if (strncmp(addr, "unix:", 5) == 0 || strstr(w, " ssl") || strstr(w, " quic")) {
		import_fmt(r->listen_note, sizeof(r->listen_note), "NGINX's listen for upstream %s (%s) is %s: "
			 "ringproxy listens for plain HTTP over TCP here.", r->pool, at,
			 addr[0] == 'u' ? "a unix socket" : "TLS");
		return;
	}
	if (addr[strspn(addr, "0123456789")] == '\0')
		import_fmt(r->listen, sizeof(r->listen), "0.0.0.0:%s", addr);
	else if (strncmp(addr, "*:", 2) == 0)
		import_fmt(r->listen, sizeof(r->listen), "0.0.0.0:%s", addr + 2);
	else if ((addr[0] == '[' && !strstr(addr, "]:")) || (addr[0] != '[' && !strchr(addr, ':')))
		import_fmt(r->listen, sizeof(r->listen), "%s:80", addr);
	else
		import_fmt(r->listen, sizeof(r->listen), "%s", addr);
	import_fmt(r->listen_note, sizeof(r->listen_note), "NGINX's listen for upstream %s (%s)%s%s%s: stop "
		 "NGINX there before ringproxy starts, or listen elsewhere and switch at the balancer.", r->pool,
		 at, *b->more ? "; it also listened on " : "", b->more, *b->more ? " (one address here)" : "");
	if (strstr(w, " proxy_protocol")) {
		struct import_src s = x->s;

		s.file = b->listen_file;
		import_warn(&s, b->listen_line, "listen %s takes a PROXY protocol header: set [proxy] "
			    "proxy_protocol = on and proxy_protocol_from (the balancers' addresses)", w);
	}
}

/* After the file: what the server that proxies to the upstream says. */
static void import_ngx_front(struct import_ngx *x, struct import_ring *r)
{
	int sb;

	if (x->npass == 0) {
		struct import_src s = x->s;

		s.file = x->files[0].path;
		import_fmt(r->host_note, sizeof(r->host_note), "No location proxy_passes to upstream %s in %s: "
			 "set backend_host to the Host your caches key objects by, if they do (Varnish hashes "
			 "req.http.host).", r->pool, x->files[0].path);
		import_warn(&s, 0, "no location proxy_passes to upstream %s: the Host NGINX sends the caches is "
			    "not known (import the file that has the server too, or nginx -T's output); check "
			    "[proxy] backend_host", r->pool);
		import_clean(r->host_note);
		return;
	}
	import_ngx_front_host(x, r);
	for (sb = x->pass[0].block; sb >= 0 && x->blk[sb].kind != IMPORT_NGX_B_SERVER; sb = x->blk[sb].parent)
		;
	if (sb >= 0)
		import_ngx_front_listen(x, r, sb);
	import_clean(r->listen_note);
	import_clean(r->host_note);
}

/*
 * The file and its includes, twice: first the names of its upstream
 * blocks (at any depth: a conf.d file holds them at the top, nginx.conf
 * inside http), then the chosen one's directives and the front: the
 * server and location that proxy_pass to it. dump: the text is stdin,
 * nginx -T's output.
 */
static void import_nginx(struct import_src *src, const char *which, bool dump, struct import_ring *r)
{
	struct import_ngx *x = calloc(1, sizeof(*x));
	struct import_choice ch = { "upstream", "no upstream block in the file or its includes",
				    "upstream blocks", "--upstream", 0, "" };
	int rc, depth = 0;

	if (!x) {
		import_err(src, 0, "out of memory");
		return;
	}
	r->fmt = "nginx";
	r->scheme = "nginx";
	r->what = "upstream";
	x->r = r;
	x->s = *src;
	if (import_ngx_files(x, src, dump) < 0)
		goto out;
	for (int pass = 0; pass < 2; pass++) {
		import_ngx_start(x);
		depth = 0;
		while ((rc = import_ngx_read(x)) != IMPORT_NGX_EOF && rc != IMPORT_NGX_ERR) {
			bool up = rc == IMPORT_NGX_BLOCK && strcmp(x->arg[0], "upstream") == 0 && x->nargs == 2;

			if (rc == IMPORT_NGX_CLOSE) {
				if (depth-- == 0) {
					import_err(&x->s, x->s.line, "unexpected \"}\"");
					goto out;
				}
				import_ngx_close(x);
				continue;
			}
			if (rc == IMPORT_NGX_END) {
				if (pass > 0)
					import_ngx_front_line(x, r);
				continue;
			}
			depth++;
			if (pass == 0 && up)
				import_offer(&ch, r, x->arg[1], which);
			if (pass > 0 && up && strcmp(x->arg[1], r->pool) == 0 && !r->pool_line) {
				r->pool_line = x->dline;
				r->pool_file = x->s.file;
				import_ngx_upstream(x, r);
				depth--;
				continue;
			}
			import_ngx_open(x);
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
		x->nblk = x->nopen = x->deep = 0;
	}
	if (src->m->nerr == 0 && r->n == 0)
		import_err(src, r->pool_line, "upstream %s has no server", r->pool);
	if (src->m->nerr == 0)
		import_ngx_front(x, r);
out:
	import_ngx_free(x);
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
	char host[256];                 /* http-request set-header Host's value */
	int host_line;
	char chk[256];                  /* option httpchk's (http-check send's) uri */
	int chk_line;
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
	if (import_name(s, r, arg[1], sv) < 0) {
		r->n--;
		return;
	}
	sv->weight = disabled ? 0 : weight;
	sv->was = disabled ? weight : -1;
	import_join(sv->src, sizeof(sv->src), arg, n);
}

static int import_long_cmp(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;

	return x < y ? -1 : x > y;
}

/*
 * HAProxy's numbering of servers without an id (cfgparse.c, checked
 * against haproxy 2.6): a counter starts at 1 and goes up by one after
 * every server, explicit or not; a server without an id takes the first
 * id at or above the counter that no server of the backend has taken
 * (explicit ids count wherever they are in the list), and the counter
 * continues from there. An id numbered so is below the counter ever
 * after: only the explicit ids can be taken.
 */
static void import_hap_number(struct import_src *s, struct import_ring *r)
{
	long next = 1, *taken = malloc((r->n ? r->n : 1) * sizeof(*taken));
	size_t nt = 0, t = 0;

	if (!taken) {
		import_err(s, 0, "out of memory");
		return;
	}
	/* the explicit ids in order: the counter skips them in one walk */
	for (size_t i = 0; i < r->n; i++)
		if (r->srv[i].explicit_id)
			taken[nt++] = strtol(r->srv[i].id, NULL, 10);
	qsort(taken, nt, sizeof(*taken), import_long_cmp);
	for (size_t i = 0; i < r->n; i++, next++) {
		if (r->srv[i].explicit_id)
			continue;
		for (;; next++) {
			while (t < nt && taken[t] < next)
				t++;
			if (t == nt || taken[t] != next)
				break;
		}
		snprintf(r->srv[i].id, sizeof(r->srv[i].id), "%ld", next);
	}
	free(taken);
}

/* The chosen section's Host and health check, into r. */
static void import_hap_front(struct import_src *s, const struct import_hap_proxy *px, struct import_ring *r)
{
	const char *v = px->host;

	if (!*v) {
		import_fmt(r->host_note, sizeof(r->host_note), "HAProxy sent the caches the client's Host (%s %s has "
			   "no http-request set-header Host), as ringproxy does without backend_host.", r->what, px->name);
	} else if (!strchr(v, '%') && v[strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._:[]")] == '\0') {
		import_fmt(r->host, sizeof(r->host), "%s", v);
		import_fmt(r->host_note, sizeof(r->host_note), "HAProxy sent the caches Host: %s (http-request "
			   "set-header Host, line %d). A cache that keys objects by Host (Varnish hashes "
			   "req.http.host) keeps them only if ringproxy sends it the same: remove this line and every "
			   "object is a miss.", v, px->host_line);
	} else {
		import_fmt(r->host_note, sizeof(r->host_note), "HAProxy sent the caches Host %s (line %d), which is "
			   "not reproduced: set backend_host to the Host your caches key objects by.", v, px->host_line);
		import_warn(s, px->host_line, "http-request set-header Host %s is not reproduced: ringproxy sends the "
			    "client's Host, or one [proxy] backend_host; set it to the Host the caches key objects by "
			    "(Varnish hashes req.http.host)", v);
	}
	import_clean(r->host_note);
	if (*px->chk && px->chk[0] == '/' && !strpbrk(px->chk, " \t;#")) {
		import_fmt(r->health_path, sizeof(r->health_path), "%s", px->chk);
		import_fmt(r->health_note, sizeof(r->health_note), "HAProxy checked the caches at %s (line %d).",
			   px->chk, px->chk_line);
		import_clean(r->health_note);
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
	import_hap_front(s, px, r);
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
	} else if (strcmp(arg[0], "http-request") == 0 && n > 3 && strcmp(arg[1], "set-header") == 0 &&
		   strcasecmp(arg[2], "host") == 0) {
		snprintf(px->host, sizeof(px->host), "%s", arg[3]);
		px->host_line = s->line;
	} else if (strcmp(arg[0], "option") == 0 && n > 2 && strcmp(arg[1], "httpchk") == 0) {
		/* option httpchk <uri> | <method> <uri> [<version>] */
		snprintf(px->chk, sizeof(px->chk), "%s", arg[n == 3 ? 2 : 3]);
		px->chk_line = s->line;
	} else if (strcmp(arg[0], "http-check") == 0 && n > 2 && strcmp(arg[1], "send") == 0) {
		for (int i = 2; i + 1 < n; i++)
			if (strcmp(arg[i], "uri") == 0) {
				snprintf(px->chk, sizeof(px->chk), "%s", arg[i + 1]);
				px->chk_line = s->line;
			}
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
	import_hap_number(src, r);
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
	if (import_name(s, r, name && *name ? name : v, sv) < 0) {
		r->n--;
		return;
	}
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

bool import_names_ok(const char *pattern)
{
	const char *d = strstr(pattern, "%d");
	size_t n = strlen(pattern);

	/* one %d, the rest conf.c's alphabet; room for 10 digits in 64 */
	if (!d || strchr(d + 1, '%') || strchr(pattern, '%') != d || n > IMPORT_NAME_MAX - 8)
		return false;
	for (const char *p = pattern; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("._-", *p) && !(p == d || p == d + 1))
			return false;
	return true;
}

int import_text(int format, const char *name, const char *text, size_t len, const struct import_opts *o,
		FILE *out, struct import_msgs *m)
{
	struct import_src s = { name, text, text + len, 1, m };
	const char *which = o ? o->which : NULL;
	struct import_ring r;

	memset(&r, 0, sizeof(r));
	r.balance_factor = -1;
	r.by_id.by_id = true;
	memset(m, 0, sizeof(*m));
	if (memchr(text, '\0', len)) {
		import_err(&s, 0, "holds a NUL byte: not a config file");
		return -1;
	}
	if (o && o->names) {
		if (!import_names_ok(o->names)) {
			import_err(&s, 0, "--names '%s': give a name with one %%d, the server's place (thumbs-%%d), "
				   "in letters, digits, '.', '_' and '-'", o->names);
			return -1;
		}
		r.names = o->names;
	}
	if (format == IMPORT_NGINX)
		import_nginx(&s, which, strcmp(name, "-") == 0, &r);
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
	free(r.by_name.slot);
	free(r.by_id.slot);
	for (size_t i = 0; i < r.nkeep; i++)
		free(r.keep[i]);
	free(r.keep);
	return m->nerr ? -1 : 0;
}

int import_file(int format, const char *path, const struct import_opts *o, FILE *out, struct import_msgs *m)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
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
		rc = import_text(format, path, text, len, o, out, m);
	}
	free(text);
	if (f != stdin)
		fclose(f);
	return rc;
}

static void import_usage(FILE *f)
{
	fprintf(f,
		"usage: ringproxy import nginx FILE|- [--upstream NAME] [--names PATTERN]\n"
		"       ringproxy import haproxy FILE|- [--backend NAME] [--names PATTERN]\n"
		"       ringproxy import ketama FILE|- [--pool NAME] [--names PATTERN]   (nutcracker.yml)\n"
		"  print a ringproxy.ini that places every key where that proxy does\n"
		"  ([ring] scheme, one [backend NAME] per server, its weight and id);\n"
		"  what cannot be reproduced is refused as FILE:LINE\n"
		"  FILE -          read stdin (nginx: the output of nginx -T, whose files\n"
		"                  are followed as the includes name them)\n"
		"  --names PATTERN name the backends PATTERN with %%d their place in the\n"
		"                  source, from 1 (thumbs-%%d), instead of from their\n"
		"                  names or addresses: a name is a backend's identity\n");
}

int import_main(int argc, char **argv, FILE *out)
{
	static const char *const formats[] = { "nginx", "haproxy", "ketama" };
	static const char *const options[] = { "--upstream", "--backend", "--pool" };
	struct import_msgs m;
	const char *path = NULL;
	struct import_opts o = { NULL, NULL };
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
		if (strcmp(argv[i], options[format]) == 0 && i + 1 < argc && !o.which) {
			o.which = argv[++i];
		} else if (strcmp(argv[i], "--names") == 0 && i + 1 < argc && !o.names) {
			o.names = argv[++i];
			if (!import_names_ok(o.names)) {
				fprintf(stderr, "ringproxy import: --names '%s': give a name with one %%d, the server's "
					"place (thumbs-%%d), in letters, digits, '.', '_' and '-'\n", o.names);
				return 2;
			}
		} else if ((argv[i][0] != '-' || strcmp(argv[i], "-") == 0) && !path) {
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
	rc = import_file(format, path, &o, out, &m);
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
