/*
 * preflight.c -- the checks `ringproxy -t` and the start make on this host
 * before anything is bound: the log file's directory exists, backend names
 * resolve, and the listen addresses are free and allowed to this process.
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
 */
#include "preflight.h"

#include <errno.h>
#include <libgen.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "addr.h"

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
static void preflight_addr(const struct conf *c, const char *key, const char *text,
			   unsigned flags, struct preflight *pf)
{
	bool start = flags & PREFLIGHT_START;
	struct conf_errors *to = start ? &pf->errors : &pf->warnings;
	struct sockaddr_storage addr;
	socklen_t len;
	char why[256];
	int line = conf_line(c, key), port, rc;

	if (!*text || addr_parse(text, &addr, &len, why, sizeof(why)) < 0)
		return;         /* none, or conf.c said what is wrong */
	port = addr.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&addr)->sin6_port) :
					    ntohs(((struct sockaddr_in *)&addr)->sin_port);
	if (port == 0)
		return;         /* any free port: nothing to collide with */
	rc = preflight_bind(&addr, len);
	if (rc == EADDRINUSE && start && !(flags & PREFLIGHT_SHARE_LISTEN))
		preflight_add(to, c->path, line,
			      "%s %s: another process listens there (a ringproxy already running?); "
			      "stop it, or start with --share-listen to share the address with it on purpose "
			      "(a binary upgrade: start the new one, then SIGTERM the old)", key, text);
	else if (rc == EADDRINUSE && !start)
		preflight_add(to, c->path, line,
			      "%s %s: another process listens there (the running ringproxy, when this checks "
			      "a reload); a start beside it is refused unless --share-listen", key, text);
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

size_t preflight_run(const struct conf *c, unsigned flags, struct preflight *pf)
{
	memset(pf, 0, sizeof(*pf));
	preflight_log_dir(c, pf);
	if (!(flags & PREFLIGHT_START))
		preflight_names(c, pf);
	preflight_addr(c, "listen", c->listen, flags, pf);
	preflight_addr(c, "admin_listen", c->admin_listen, flags, pf);
	return pf->errors.n;
}

void preflight_free(struct preflight *pf)
{
	if (!pf)
		return;
	conf_errors_free(&pf->errors);
	conf_errors_free(&pf->warnings);
}
