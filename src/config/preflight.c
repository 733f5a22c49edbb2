/*
 * preflight.c -- the checks `ringproxy -t` and the start make on this host
 * before anything is bound: the log file's directory exists, the state
 * file's is writable, backend names resolve, and the listen addresses are
 * free and allowed to this process.
 * Main thread.
 *
 * One set of checks serves both, with one difference. What depends on who
 * runs the check, where and when is a warning at -t and an error at start:
 * -t may run as another user than the service (which may have
 * CAP_NET_BIND_SERVICE), on another host (a config checked in CI), or
 * while the running service holds the address (systemd runs -t before
 * every reload). A name that does not resolve is a warning in both: the
 * backend starts down and its name is resolved again every health
 * interval (health.c), so a cache whose DNS record is missing while it
 * restarts does not stop the proxy. At start the snapshot resolves the
 * names itself; only -t resolves them here.
 *
 * An address is probed by binding it without SO_REUSEPORT: every
 * ringproxy listener sets SO_REUSEPORT, so a second ringproxy would bind
 * the same address without complaint and the kernel would split the
 * clients between the two. The probe sees the other listener and the
 * start is refused unless --share-listen says it is meant (a binary
 * upgrade: the new process starts beside the old, which is then stopped).
 * The holder is named when /proc shows it (the listening socket's inode
 * in /proc/net/tcp, then the process with that inode among its fds:
 * another user's fds are readable as root only), and --share-listen
 * shares with a ringproxy only: another program that set SO_REUSEPORT
 * (a cache on the same host) would take half of the clients.
 *
 * One check is of the file alone, a warning in both: two backends that
 * reach one cache (the same url under two names, a copy-paste mistake)
 * give that cache two shares of the keys.
 */
#include "config/preflight.h"

#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/addr.h"

__attribute__((format(printf, 4, 5)))
static void preflight_add(struct conf_errors *list, const char *file, int line,
			  const char *fmt, ...)
{
	char msg[1024], *full;
	char **grown;
	va_list ap;
	int n;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	n = line > 0 ? asprintf(&full, "%s:%d: %s", file, line, msg) :
		       asprintf(&full, "%s: %s", file, msg);
	if (n < 0)
		return;
	grown = realloc(list->msg, (list->n + 1) * sizeof(*grown));
	if (!grown) {
		free(full);
		return;
	}
	list->msg = grown;
	list->msg[list->n++] = full;
}

/* The log file's directory: open() would fail at start, or at the first
 * SIGUSR1 after a rotation script removed it. */
static void preflight_log_dir(const struct conf *c, struct preflight *pf)
{
	struct stat st;
	char *copy, *dir;

	if (!c->log_file[0])
		return;
	copy = strdup(c->log_file);
	if (!copy)
		return;
	dir = dirname(copy);
	if (stat(dir, &st) < 0) {
		if (errno == ENOENT)
			preflight_add(&pf->errors, c->path, conf_line(c, "log_file"),
				      "log_file: the directory %s does not exist; create it (under systemd, "
				      "LogsDirectory=ringproxy makes /var/log/ringproxy) or choose another path",
				      dir);
	} else if (!S_ISDIR(st.st_mode)) {
		preflight_add(&pf->errors, c->path, conf_line(c, "log_file"),
			      "log_file: %s is not a directory; choose a path in a directory", dir);
	}
	free(copy);
}

/* The state file's directory: the file is written beside itself (a
 * temporary, then a rename) at each ringproxy ctl change, so the
 * directory must exist and be writable by the service, or every change
 * holds only until a restart. An error at -t (systemd runs it as the
 * service's user before the start), a warning at start: the states the
 * file holds still apply. */
static void preflight_state_dir(const struct conf *c, unsigned flags, struct preflight *pf)
{
	struct conf_errors *to = flags & PREFLIGHT_START ? &pf->warnings : &pf->errors;
	int line = conf_line(c, "state_file");
	struct stat st;
	char *copy, *dir;

	if (!c->state_file[0])
		return;
	copy = strdup(c->state_file);
	if (!copy)
		return;
	dir = dirname(copy);
	if (stat(dir, &st) < 0)
		preflight_add(to, c->path, line,
			      "state_file: the directory %s %s; create it (under systemd, StateDirectory=ringproxy "
			      "makes /var/lib/ringproxy) or choose another path", dir,
			      errno == ENOENT ? "does not exist" : strerror(errno));
	else if (!S_ISDIR(st.st_mode))
		preflight_add(to, c->path, line, "state_file: %s is not a directory; choose a path in a directory",
			      dir);
	else if (access(dir, W_OK | X_OK) < 0)
		preflight_add(to, c->path, line,
			      "state_file: the directory %s is not writable by this user (%s), so ringproxy ctl "
			      "changes would hold only until a restart; give the service's user write access "
			      "(under systemd, StateDirectory=ringproxy) or choose another path", dir, strerror(errno));
	free(copy);
}

/* -t: each backend's name, resolved as the start will resolve it. */
static void preflight_names(const struct conf *c, struct preflight *pf)
{
	for (size_t i = 0; i < c->nbackends; i++) {
		const struct conf_backend *be = &c->backends[i];
		struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_family = AF_UNSPEC };
		struct addrinfo *res = NULL;
		char port[8];
		int rc;

		snprintf(port, sizeof(port), "%u", be->port);
		rc = getaddrinfo(be->host, port, &hints, &res);
		if (rc == 0 && res) {
			freeaddrinfo(res);
			continue;
		}
		preflight_add(&pf->warnings, c->path, conf_backend_line(be, "url"),
			      "backend %s: cannot resolve '%s': %s; it starts down and its name is resolved "
			      "again every %gs (its health interval)", be->name, be->host,
			      rc ? gai_strerror(rc) : "no address", (double)be->health.interval_ms / 1000);
	}
}

/* Backends in the order of what they reach: host (any case), port,
 * prefix, then the Host they send. */
static int preflight_reach_cmp(const void *x, const void *y)
{
	const struct conf_backend *a = *(const struct conf_backend *const *)x;
	const struct conf_backend *b = *(const struct conf_backend *const *)y;
	int d = strcasecmp(a->host ? a->host : "", b->host ? b->host : "");

	if (d == 0)
		d = a->port != b->port ? (a->port < b->port ? -1 : 1) : strcmp(a->prefix, b->prefix);
	/* one cache under two Hosts ([backend] host) is two keyspaces */
	if (d == 0)
		d = strcmp(a->host_header ? a->host_header : "", b->host_header ? b->host_header : "");
	return d;
}

/* Two backends with the same url: one cache under two names takes two
 * shares of the keys. Each pair named once, at the later one's url. */
static void preflight_twins(const struct conf *c, struct preflight *pf)
{
	const struct conf_backend **by = calloc(c->nbackends ? c->nbackends : 1, sizeof(*by));

	if (!by)
		return;
	for (size_t i = 0; i < c->nbackends; i++)
		by[i] = &c->backends[i];
	qsort(by, c->nbackends, sizeof(*by), preflight_reach_cmp);
	for (size_t i = 1; i < c->nbackends; i++) {
		const struct conf_backend *a = by[i - 1], *b = by[i];

		if (!a->url || !b->url || preflight_reach_cmp(&by[i - 1], &by[i]) != 0)
			continue;
		if (b->line < a->line) {
			const struct conf_backend *t = a;

			a = b;
			b = t;
		}
		preflight_add(&pf->warnings, c->path, conf_backend_line(b, "url"),
			      "backends %s and %s have the same url %s (line %d): that cache takes the keys of "
			      "both, twice its share; give each its own url, or remove one", a->name, b->name,
			      b->url, conf_backend_line(a, "url"));
	}
	free(by);
}

/* Try to bind addr without SO_REUSEPORT (SO_REUSEADDR only skips
 * connections in TIME_WAIT): 0, or the errno of the failure. */
static int preflight_bind(const struct sockaddr_storage *addr, socklen_t len)
{
	int fd, one = 1, rc = 0;

	fd = socket(addr->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (const struct sockaddr *)addr, len) < 0)
		rc = errno;
	close(fd);
	return rc;
}

/* The inodes of the sockets listening on TCP port, IPv4 and IPv6, into
 * ino[0..max); returns how many. */
static size_t preflight_listeners(int port, unsigned long *ino, size_t max)
{
	static const char *const tables[] = { "/proc/net/tcp", "/proc/net/tcp6" };
	size_t n = 0;
	char line[512];

	for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
		FILE *f = fopen(tables[t], "r");
		unsigned lport, state;
		unsigned long inode;

		if (!f)
			continue;
		while (n < max && fgets(line, sizeof(line), f))
			if (sscanf(line, " %*d: %*[0-9A-Fa-f]:%x %*s %x %*s %*s %*s %*u %*d %lu",
				   &lport, &state, &inode) == 3 && (int)lport == port && state == 0x0A && inode)
				ino[n++] = inode;
		fclose(f);
	}
	return n;
}

/* Whether process pid holds one of the sockets ino[0..n). */
static bool preflight_holds(const char *pid, const unsigned long *ino, size_t n)
{
	char dir[300], path[600], link[64];
	struct dirent *e;
	bool found = false;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%s/fd", pid);
	d = opendir(dir);
	if (!d)
		return false;   /* gone, or another user's without root */
	while (!found && (e = readdir(d))) {
		ssize_t len;
		unsigned long inode;

		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		len = readlink(path, link, sizeof(link) - 1);
		if (len <= 0)
			continue;
		link[len] = '\0';
		if (sscanf(link, "socket:[%lu]", &inode) != 1)
			continue;
		for (size_t i = 0; i < n && !found; i++)
			found = inode == ino[i];
	}
	closedir(d);
	return found;
}

/* A process's command name (/proc/PID/comm, at most 15 bytes). */
static void preflight_comm(const char *pid, char *comm, size_t len)
{
	char path[300];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%s/comm", pid);
	comm[0] = '\0';
	f = fopen(path, "r");
	if (!f)
		return;
	if (fgets(comm, (int)len, f))
		comm[strcspn(comm, "\n")] = '\0';
	fclose(f);
}

static bool preflight_ours(const char *comm);

/*
 * Who listens on TCP port: the first process found holding a listening
 * socket of the port, its pid and command name into *pid and comm (of
 * len bytes), and whether it is a ringproxy (its command name is ours,
 * or "ringproxy": a binary upgrade's old binary may have another path).
 * false with *pid 0 when none can be seen.
 */
static bool preflight_holder(int port, long *pid, char *comm, size_t len)
{
	unsigned long ino[16];
	size_t n = preflight_listeners(port, ino, sizeof(ino) / sizeof(ino[0]));
	char self[32];
	struct dirent *e;
	DIR *d;

	*pid = 0;
	comm[0] = '\0';
	if (!n || !(d = opendir("/proc")))
		return false;
	snprintf(self, sizeof(self), "%ld", (long)getpid());
	while ((e = readdir(d))) {
		if (e->d_name[strspn(e->d_name, "0123456789")] != '\0' || strcmp(e->d_name, self) == 0)
			continue;
		if (preflight_holds(e->d_name, ino, n)) {
			*pid = strtol(e->d_name, NULL, 10);
			preflight_comm(e->d_name, comm, len);
			break;
		}
	}
	closedir(d);
	return *pid && preflight_ours(comm);
}

/* Is a command name a ringproxy's: ours, or "ringproxy"? */
static bool preflight_ours(const char *comm)
{
	char self[32], me[32];

	snprintf(self, sizeof(self), "%ld", (long)getpid());
	preflight_comm(self, me, sizeof(me));
	return comm[0] && (strcmp(comm, "ringproxy") == 0 || strcmp(comm, me) == 0);
}

bool preflight_is_ringproxy(long pid, char *comm, size_t len)
{
	char p[32];

	snprintf(p, sizeof(p), "%ld", pid);
	preflight_comm(p, comm, len);
	return preflight_ours(comm);
}

/* An address in use (key, text at line): name its holder, and allow
 * --share-listen only beside a ringproxy. */
static void preflight_in_use(const struct conf *c, const char *key, const char *text, int line,
			     int port, unsigned flags, struct preflight *pf)
{
	bool start = flags & PREFLIGHT_START, share = flags & PREFLIGHT_SHARE_LISTEN;
	char comm[32], who[80];
	long pid;
	bool ours = preflight_holder(port, &pid, comm, sizeof(comm));

	if (pid)
		snprintf(who, sizeof(who), "%s (pid %ld)", comm[0] ? comm : "a process", pid);
	if (ours && start && share)
		return;
	if (ours && start)
		preflight_add(&pf->errors, c->path, line,
			      "%s %s: %s, a ringproxy, listens there; stop it, or start with --share-listen to "
			      "share the address with it on purpose (a binary upgrade: start the new one, then "
			      "SIGTERM the old)", key, text, who);
	else if (ours)
		preflight_add(&pf->warnings, c->path, line,
			      "%s %s: %s, a ringproxy, listens there (the running one, when this checks a reload); "
			      "a start beside it is refused unless --share-listen", key, text, who);
	else if (pid)
		preflight_add(start ? &pf->errors : &pf->warnings, c->path, line,
			      "%s %s: %s listens there, not a ringproxy; stop it or listen elsewhere%s", key, text,
			      who, start && share ? " (--share-listen shares an address with a ringproxy only)" :
			      start ? "" : " (a start would be refused)");
	else
		preflight_add(start ? &pf->errors : &pf->warnings, c->path, line,
			      "%s %s: another process listens there, one this user cannot see (run as root, or "
			      "ss -ltnp, to name it); stop it or listen elsewhere%s", key, text,
			      start && share ? " (--share-listen shares an address with a ringproxy only, and "
			      "this one cannot be told to be one)" : start ? "" : " (a start would be refused)");
}

/* Unprivileged processes may bind from this port up (a sysctl of the
 * network namespace; containers often set it to 0). */
static int preflight_unprivileged_port_start(void)
{
	FILE *f = fopen("/proc/sys/net/ipv4/ip_unprivileged_port_start", "r");
	int port = 1024;

	if (f) {
		if (fscanf(f, "%d", &port) != 1)
			port = 1024;
		fclose(f);
	}
	return port;
}

/* One listen address (key is "listen" or "admin_listen"). */
static void preflight_addr(const struct conf *c, const char *key, const char *text, int line,
			   unsigned flags, struct preflight *pf)
{
	bool start = flags & PREFLIGHT_START;
	struct conf_errors *to = start ? &pf->errors : &pf->warnings;
	struct sockaddr_storage addr;
	socklen_t len;
	char why[256];
	int port, rc;

	if (!*text || addr_parse(text, &addr, &len, why, sizeof(why)) < 0)
		return;         /* none, or conf.c said what is wrong */
	port = addr.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&addr)->sin6_port) :
					    ntohs(((struct sockaddr_in *)&addr)->sin_port);
	if (port == 0)
		return;         /* any free port: nothing to collide with */
	rc = preflight_bind(&addr, len);
	if (rc == EADDRINUSE)
		preflight_in_use(c, key, text, line, port, flags, pf);
	else if (rc == EACCES && port < preflight_unprivileged_port_start())
		preflight_add(to, c->path, line,
			      "%s %s: a port below %d needs CAP_NET_BIND_SERVICE, which this process lacks; "
			      "run as root, or give it the capability (AmbientCapabilities=CAP_NET_BIND_SERVICE "
			      "in the unit, setcap cap_net_bind_service=+ep on the binary), or listen on a "
			      "higher port", key, text, preflight_unprivileged_port_start());
	else if (rc == EADDRNOTAVAIL)
		preflight_add(to, c->path, line,
			      "%s %s: no interface of this host has that address; listen on one it has, "
			      "or on 0.0.0.0", key, text);
	else if (rc && rc != EADDRINUSE)
		preflight_add(to, c->path, line, "%s %s: cannot bind: %s", key, text, strerror(rc));
}

/* Each address of a listen list (conf.c said what is wrong with one that
 * does not parse). */
static void preflight_listen(const struct conf *c, const char *key, const char *list, int line,
			     unsigned flags, struct preflight *pf)
{
	struct conf_listen l[CONF_LISTEN_MAX];
	char why[256];
	int n = conf_listen_parse(list ? list : "", l, CONF_LISTEN_MAX, why, sizeof(why));

	for (int i = 0; i < n; i++)
		preflight_addr(c, key, l[i].addr, line, flags, pf);
}

size_t preflight_run(const struct conf *c, unsigned flags, struct preflight *pf)
{
	memset(pf, 0, sizeof(*pf));
	preflight_log_dir(c, pf);
	preflight_state_dir(c, flags, pf);
	preflight_twins(c, pf);
	if (!(flags & PREFLIGHT_START))
		preflight_names(c, pf);
	preflight_listen(c, "listen", c->listen, conf_line(c, "listen"), flags, pf);
	preflight_listen(c, "[tls] listen", c->tls_listen, conf_tls_line(c, "listen"), flags, pf);
	preflight_addr(c, "admin_listen", c->admin_listen, conf_line(c, "admin_listen"), flags, pf);
	return pf->errors.n;
}

void preflight_free(struct preflight *pf)
{
	if (!pf)
		return;
	conf_errors_free(&pf->errors);
	conf_errors_free(&pf->warnings);
}
