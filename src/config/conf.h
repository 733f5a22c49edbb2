/*
 * conf.h -- the INI configuration: [proxy], [ring], [health], [cache] and
 * one [backend NAME] per cache server. conf_load() parses (inih) and validates a file and collects
 * every error as "FILE:LINE: what is wrong; what to do". A struct conf is
 * immutable once loaded; the main thread builds it, snapshots keep it.
 */
#ifndef RINGPROXY_CONF_H
#define RINGPROXY_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "http/query.h"
#include "http/vary.h"

enum conf_hash { CONF_HASH_MD5 = 0 };

enum conf_key {
	CONF_KEY_PATH_QUERY = 0,     /* "path+query": the target as sent */
	CONF_KEY_PATH,               /* "path": the query is ignored */
	CONF_KEY_PATH_SORTED_QUERY,  /* "path+sorted-query": parameters sorted */
	CONF_KEY_URI,                /* "uri": the request target as sent up
					to its '?' (HAProxy's balance uri) */
	CONF_KEY_URI_QUERY,          /* "uri+query": the whole request target
					as sent (balance uri whole) */
};
#define CONF_NKEYMODES 5

/* Active health check settings: [health], overridable per backend. */
struct conf_health {
	char *path;             /* GET this; "" = no active checks */
	uint64_t interval_ms;
	uint64_t timeout_ms;
	unsigned rise;          /* successes to come back up */
	unsigned fall;          /* failures to go down (also passive) */
	int expect_lo, expect_hi; /* healthy status range */
};

struct conf_backend {
	char *name;             /* what ringproxy knows it by; the identity
				   on the ring of scheme ringproxy */
	char *id;               /* the identity a compat scheme hashes: as
				   written, else the scheme's default (the
				   url's host[:port] for nginx, HAProxy's
				   automatic number, host or host:port for
				   ketama, ip:port for envoy); "" under ringproxy
				   unless written */
	char *url;              /* as written */
	char *host;             /* from the URL, brackets removed for IPv6 */
	uint16_t port;
	char *prefix;           /* path prefix without trailing '/'; "" if none */
	char *host_header;      /* [backend] host: the Host sent to it; "" =
				   [proxy] backend_host */
	double weight;
	unsigned max_inflight;  /* 0 = no hard cap */
	uint64_t slow_start_ms; /* ramp after recovery; 0 = off */
	struct conf_health health; /* [health] with this backend's overrides */
	int line;               /* of the [backend NAME] header */
	int *lines;             /* where each of its keys was set, 0 = not
				   set: read with conf_backend_line() */
};

/* [ring] key_hash: ketama's hash of a key. */
enum conf_key_hash { CONF_KEY_HASH_MD5, CONF_KEY_HASH_FNV1A64 };

enum conf_access_format { CONF_ACCESS_COMBINED, CONF_ACCESS_JSON };

/* [tls] ciphers' default: the nine suites of Mozilla's "intermediate"
 * configuration for TLS 1.2 (version 5.7,
 * https://ssl-config.mozilla.org/guidelines/5.7.json: ECDHE and DHE-RSA
 * with AES-GCM and ChaCha20-Poly1305), written short. */
#define CONF_TLS_CIPHERS "ECDHE+AESGCM:ECDHE+CHACHA20:DHE+AESGCM:DHE+CHACHA20:!PSK:!DSS:!aNULL"

/* One address of a listen list ([proxy] listen, [tls] listen). */
#define CONF_LISTEN_MAX 16
struct conf_listen {
	char addr[80];          /* IP:port / [IPv6]:port as written */
	int proxy_protocol;     /* -1: the section's proxy_protocol; 0 off,
				   1 on: the address's own */
};

struct conf {
	char *path;             /* the file it came from ("-" for a string) */
	char sha256[65];        /* SHA-256 of its bytes, hex; "" if unknown */

	/* [proxy] */
	char *listen;
	bool h2c;                       /* HTTP/2 prior knowledge on listen */
	bool proxy_protocol;            /* a PROXY header from the sources
					   of proxy_protocol_from */
	char *proxy_protocol_from;      /* addresses, CIDR blocks; "" = none */
	char *admin_listen;             /* "" = no admin listener */
	char *admin_token;              /* "" = none: admin requests need no
					   Authorization */
	unsigned workers;               /* 0 = one per online CPU */
	uint64_t connect_timeout_ms;
	uint64_t response_timeout_ms;
	uint64_t client_timeout_ms;
	uint64_t backend_idle_timeout_ms;
	uint64_t shutdown_timeout_ms;
	unsigned max_connections;
	uint64_t max_head_size;
	unsigned max_headers;
	unsigned retries;
	unsigned pool_size;
	uint64_t buffer_size;
	char *backend_header;
	char *backend_host;             /* Host sent to every cache; "" = the
					   client's */
	bool underscores_in_headers;    /* forward header names with '_' */
	int log_level;                  /* enum log_level */
	int tier_status;                /* enum tier_status (tier.h) */
	char *log_file;                 /* "" = stderr as given */
	char *pid_file;                 /* "" = none (pidfile.c) */
	char *access_log;               /* [log] access: "off", "stderr" or a path */
	int access_format;              /* enum conf_access_format */
	char *access_hits;              /* [log] access_hits as written */
	unsigned access_hits_every;     /* and as read: 1 all the cache's
					   answers logged, 0 none, N one in N */
	bool watch_config;              /* reload when the file changes */
	char *state_file;               /* the backends' runtime states
					   (runstate.c); "" = not kept */

	/* [h2] */
	unsigned h2_max_streams;
	unsigned h2_max_requests;
	uint64_t h2_window;
	uint64_t h2_idle_timeout_ms;
	uint64_t h2_send_timeout_ms;
	unsigned h2_max_glitches;
	/* [tls] */
	char *tls_listen;               /* "" = no HTTPS listener */
	bool tls_proxy_protocol;
	char *tls_certs;                /* a glob of PEM files */
	bool tls_strict_sni;
	char *tls_protocols;            /* "TLSv1.2 TLSv1.3" */
	char *tls_ciphers;              /* TLS 1.2, OpenSSL's syntax */
	char *tls_ciphersuites;         /* TLS 1.3 */
	char *tls_alpn;                 /* "http/1.1" */
	uint64_t tls_handshake_timeout_ms;
	char *tls_ticket_keys;          /* "" = the process's own, rotated */

	/* [ring] */
	int hash;                       /* enum conf_hash */
	int scheme;                     /* enum ring_scheme: as written, but
					   RING_SCHEME_KETAMA_FNV1A64 for
					   ketama with key_hash fnv1a_64 */
	int key_hash;                   /* enum conf_key_hash (ketama) */
	unsigned vnodes;
	int key;                        /* enum conf_key */
	struct query_rules query;       /* [ring] query (query.mode) and
					   drop_params, parsed */
	char *drop_params;              /* as written: query's patterns
					   point into it */
	bool normalize_forward;         /* the target forwarded is the
					   normalised one too */
	double balance_factor;
	unsigned replicas;              /* a key's preference list: the first
					   R distinct backends of its walk */
	uint64_t ramp_ms;               /* warm ramp after a reload; 0 = off */

	/* [health] */
	struct conf_health health;
	bool passive;                   /* count request failures */
	bool passive_5xx;               /* ... including 5xx responses */
	uint64_t backoff_ms;            /* passive: retry a down backend after */

	/* [cache] */
	uint64_t cache_size;            /* bytes; 0 = off */
	uint64_t cache_max_object;      /* bytes */
	unsigned cache_min_uses;        /* store on a key's Nth request */
	uint64_t cache_lock_timeout_ms;
	uint64_t cache_grace_ms;        /* stale window of responses naming
					   none (cachectl_response) */
	unsigned cache_refresh_max;     /* background refreshes a worker
					   runs at once */
	uint64_t cache_heuristic_max_ms; /* cap on heuristic freshness; 0 off */
	char *cache_target_field;       /* read before CDN-Cache-Control */
	bool cache_strip_targeted;      /* targeted fields not sent to clients */
	bool cache_honor_client_no_cache; /* a request's no-cache, max-age and
					   min-fresh are followed */
	bool cache_key_scheme;          /* https requests keyed apart */
	unsigned cache_purge_fanout;    /* backends of the walk a purge reaches */
	char *cache_purge_allow;        /* who may PURGE/BAN on the proxy port */
	unsigned cache_max_variants;    /* variants one URL may hold */
	char *cache_image_formats;      /* as written: "avif, webp" */
	struct vary_formats cache_formats; /* parsed from it (n 0: off) */

	/* [discovery] (config/discover.h) */
	char *disc_srv;                 /* SRV names, space-separated; "" = off */
	char *disc_resolver;            /* "IP:PORT"; "" = resolv.conf's */
	uint64_t disc_interval_ms;
	int disc_name;                  /* enum discover_naming */
	int disc_weights;               /* 0 ignore, 1 srv */
	unsigned disc_add_after;
	uint64_t disc_remove_after_ms;
	double disc_max_remove;         /* percent */
	uint64_t disc_apply_every_ms;   /* 0 = at once */

	struct conf_backend *backends;
	size_t nbackends;
	size_t nstatic;                 /* the first nstatic backends are the
					   file's; the others were discovered
					   (conf_add_backends) */
	struct conf_backend *templates; /* with [discovery] srv: the sections
					   without a url, the settings of the
					   names discovery finds */
	size_t ntemplates;
	/* backends by name for conf_backend_find: open addressing, slot
	 * value index + 1 (0: empty), be_nslots a power of two; kept by the
	 * parser (NULL, or fewer indexed than nbackends: a linear search) */
	uint32_t *be_slots;
	size_t be_nslots, be_nindexed;

	int *lines;                     /* where each [proxy], [ring] and
					   [health] key was set, 0 = its
					   default: read with conf_line() */
};

/* Every error of one load, in file order. */
struct conf_errors {
	char **msg;
	size_t n;
	bool oom;       /* an allocation failed: the load failed whatever n
			   says (the error saying so may not have been kept) */
};

/* Load and validate FILE. Returns the config, or NULL with every problem in
 * errs (which the caller frees with conf_errors_free even on success: it
 * may then hold nothing). */
struct conf *conf_load(const char *path, struct conf_errors *errs);

/* The same from a string; name stands for the file name in messages. */
struct conf *conf_load_string(const char *name, const char *text,
			      struct conf_errors *errs);

void conf_free(struct conf *c);
void conf_errors_free(struct conf_errors *errs);

/* "host:port" of a backend as a Host header or URL authority writes it
 * ("[v6]:port" for IPv6). */
void conf_hostport(const struct conf_backend *b, char *out, size_t len);

/* The line of the file where [proxy], [ring] or [health] key was set, or
 * 0 when it has its default (messages then name the file alone). */
int conf_line(const struct conf *c, const char *key);
/* The same for a key of [tls] (whose listen and proxy_protocol share
 * their names with [proxy]'s). */
int conf_tls_line(const struct conf *c, const char *key);

/* Parse a listen list ("IP:port[ proxy_protocol=on|off], ..."): the
 * addresses into out (at most max), each checked with addr_parse. Returns
 * how many (0 for ""), or -1 with why. Pure. */
int conf_listen_parse(const char *text, struct conf_listen *out, size_t max, char *why, size_t len);

/* The same for a key of one backend (url, weight, health_path...). */
int conf_backend_line(const struct conf_backend *be, const char *key);

/* A reload's admin rule, against the listener that runs: admin_listen
 * changes only with a restart, so the one bound at start on running ("" for
 * none) keeps needing a token while it is not a loopback address, whatever
 * c's own admin_listen says. 0, or -1 with "FILE:LINE: what; what to do"
 * in err. Pure. */
int conf_check_admin_running(const struct conf *c, const char *running, char *err, size_t len);

/* A backend found by discovery: its name, address and port. */
struct conf_found {
	const char *name;
	const char *addr;       /* an IP address */
	uint16_t port;
	double weight;
};

/* Add found[0..n) to c, a config just loaded and not yet in use, as
 * backends after the file's: url http://ADDR:PORT, [health]'s checks,
 * weight as found; a name whose [backend] section has no url (a
 * template) takes that section's weight (when written), max_inflight,
 * slow_start and health settings. A name the file has a [backend] with a
 * url of is skipped (that section is the backend). 0, or -1 with "FILE: what" in err (out of
 * memory, over the backend limit). */
int conf_add_backends(struct conf *c, const struct conf_found *found, size_t n, char *err, size_t len);

/* Find a backend by name; NULL if none. */
const struct conf_backend *conf_backend_find(const struct conf *c,
					     const char *name);

/* Parse "500ms", "5s", "2m", "1h" or a bare number of seconds into ms.
 * Returns 0 or -1. Exposed for the unit test. */
int conf_parse_duration(const char *s, uint64_t *ms);
/* [log] access_hits: "all" (1), "none" (0) or "1/N" (N) into *every; 0,
 * or -1 when s is none of those. */
int conf_parse_access_hits(const char *s, unsigned *every);
/* A duration in ms as the config writes it: "5m", "90s", "1500ms" (the
 * largest whole unit; 0 is "0s"). Pure. */
void conf_fmt_ms(uint64_t ms, char *out, size_t len);

/* Parse "65536", "64k", "16m", "1g" (powers of 1024). 0 or -1. */
int conf_parse_size(const char *s, uint64_t *bytes);

/* `ringproxy -T`: c as an INI file that loads back to the same config,
 * every key written (those left at their default say so in a comment;
 * a backend's health overrides that it does not set are comments, so
 * that they keep following [health]). 0, or -1 on a write error. */
int conf_write(const struct conf *c, FILE *out);
/* The settings that differ from a to b, driven by the key table, as
 * "balance_factor 1.25 -> 2, log_file (empty) -> /var/log/rp.log,
 * cache-1 max_inflight 0 -> 10" into out (cut to len): [proxy], [ring]
 * and [health] keys, then the keys of backends in both, but not [ring]
 * scheme nor a backend's url, weight and id (the ring's changes, which
 * `plan` says) and not
 * the value of admin_token. Returns the number of differences. */
int conf_diff(const struct conf *a, const struct conf *b, char *out, size_t len);

/* One setting that differs between two configs (conf_diff_each). */
struct conf_change {
	const char *section;    /* "proxy", "ring", ...; a backend's name when
				   backend */
	bool backend;
	const char *key;
	const char *from, *to;  /* as written; both NULL for a secret
				   (admin_token), said to change */
	bool restart;           /* a reload does not apply it (listen,
				   workers, admin_listen, pid_file): a
				   restart does */
};
typedef void conf_change_fn(void *arg, const struct conf_change *ch);
/* Each setting that differs from a to b, in key-table order: fn(arg,
 * change) for every key of [proxy], [ring], [health], [cache] and [log],
 * then the keys of backends in both but a backend's url, weight and id
 * (its membership, which plan says) and health values it inherits on both
 * sides. The change's strings live only during the call. Returns the
 * number of differences. */
int conf_diff_each(const struct conf *a, const struct conf *b, conf_change_fn *fn, void *arg);

/* The name of a [ring] key mode as the file writes it ("path+query"). */
const char *conf_key_mode_name(int mode);

/* Print every key with its type, default, range and help (--help-config). */
void conf_help(FILE *out);
/* The same as scdoc text (## [section], then each key with its default,
 * help and range): the key list of ringproxy.ini(5), which the build
 * makes with `ringproxy --help-config=scdoc`. */
void conf_help_scdoc(FILE *out);

#endif
