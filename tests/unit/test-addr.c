/*
 * test-addr.c -- addr.c, the listen-address parser config validation and
 * binding share. Built from addr.c alone, without the core library or its
 * dependencies: config code can read an address without libevent.
 */
#include "base/addr.h"
#include "tap.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <string.h>
#include <sys/un.h>

static void test_ok(const char *text, int family, const char *ip, int port)
{
	struct sockaddr_storage ss;
	socklen_t len = 0;
	char err[256] = "", got[INET6_ADDRSTRLEN] = "";
	int gport = -1;

	if (!tap_ok(addr_parse(text, &ss, &len, err, sizeof(err)) == 0, "%s parses", text)) {
		tap_diag("  %s", err);
		return;
	}
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &sin->sin_addr, got, sizeof(got));
		gport = ntohs(sin->sin_port);
		tap_is_int(len, sizeof(*sin), "%s: the length of an IPv4 address", text);
	} else if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &sin6->sin6_addr, got, sizeof(got));
		gport = ntohs(sin6->sin6_port);
		tap_is_int(len, sizeof(*sin6), "%s: the length of an IPv6 address", text);
	}
	tap_is_int(ss.ss_family, family, "%s: family", text);
	tap_is_str(got, ip, "%s: address", text);
	tap_is_int(gport, port, "%s: port", text);
}

static void test_bad(const char *text, const char *want)
{
	struct sockaddr_storage ss;
	socklen_t len = 0;
	char err[256] = "";

	tap_ok(addr_parse(text, &ss, &len, err, sizeof(err)) == -1, "'%s' is refused", text);
	tap_is_str(err, want, "'%s': the reason", text);
}

static void test_loopback(const char *text, int want)
{
	struct sockaddr_storage ss;
	socklen_t len = 0;
	char err[256] = "";

	if (!tap_ok(addr_parse(text, &ss, &len, err, sizeof(err)) == 0, "%s parses", text))
		return;
	tap_is_int(addr_is_loopback(&ss), want, "%s is %sa loopback address", text, want ? "" : "not ");
}

static void test_list(const char *list, const char *ip, int want)
{
	char err[256] = "";
	int got = addr_in_list(list, ip, err, sizeof(err));

	if (!tap_ok(got == want, "%s in [%s]: %d", ip ? ip : "(check)", list, want))
		tap_diag("  got %d (%s)", got, err);
}

static void test_syslog(const char *text, int rc, int family, const char *path, int port)
{
	struct sockaddr_storage a;
	socklen_t len = 0;
	char err[160] = "";
	int got = addr_syslog(text, &a, &len, err, sizeof(err));
	bool same = got == rc;

	if (same && rc == 1 && family == AF_UNIX)
		same = a.ss_family == AF_UNIX && strcmp(((struct sockaddr_un *)&a)->sun_path, path) == 0;
	else if (same && rc == 1)
		same = a.ss_family == family &&
		       ntohs(family == AF_INET ? ((struct sockaddr_in *)&a)->sin_port
					       : ((struct sockaddr_in6 *)&a)->sin6_port) == port;
	if (same && rc < 0)
		same = err[0] != '\0';
	tap_ok(same, "addr_syslog(%s) = %d%s%s", text, rc, rc < 0 ? ": " : "", err);
}

int main(void)
{
	test_ok("127.0.0.1:8080", AF_INET, "127.0.0.1", 8080);
	test_ok("0.0.0.0:0", AF_INET, "0.0.0.0", 0);
	test_ok("*:65535", AF_INET, "0.0.0.0", 65535);
	test_ok("[::1]:9000", AF_INET6, "::1", 9000);
	test_ok("[::]:80", AF_INET6, "::", 80);
	/* without brackets the last colon separates the port */
	test_ok("::1:8080", AF_INET6, "::1", 8080);
	test_bad("127.0.0.1", "expected host:port, e.g. 0.0.0.0:8080");
	test_bad(":80", "expected host:port, e.g. 0.0.0.0:8080");
	test_bad("127.0.0.1:65536", "the port must be a number from 0 to 65535");
	test_bad("127.0.0.1:", "the port must be a number from 0 to 65535");
	test_bad("127.0.0.1:8o", "the port must be a number from 0 to 65535");
	test_bad("127.0.0.1:99999999999999999999", "the port must be a number from 0 to 65535");
	test_bad("[::1]8080", "an IPv6 address is written [addr]:port");
	test_bad("[::1:8080", "an IPv6 address is written [addr]:port");
	test_bad("localhost:8080",
		 "the host must be an IP address (a listener binds to one), e.g. 0.0.0.0:8080");
	test_loopback("127.0.0.1:9000", 1);
	test_loopback("127.1.2.3:9000", 1);
	test_loopback("[::1]:9000", 1);
	test_loopback("[::ffff:127.0.0.1]:9000", 1);
	test_loopback("0.0.0.0:9000", 0);
	test_loopback("*:9000", 0);
	test_loopback("[::]:9000", 0);
	test_loopback("10.0.0.1:9000", 0);
	test_loopback("128.0.0.1:9000", 0);
	test_loopback("[::ffff:10.0.0.1]:9000", 0);

	/* purge_allow: addresses and CIDR blocks */
	test_list("127.0.0.1", "127.0.0.1", 1);
	test_list("127.0.0.1", "127.0.0.2", 0);
	test_list("127.0.0.0/8", "127.0.0.2", 1);
	test_list("10.0.0.0/8, 127.0.0.1", "127.0.0.1", 1);
	test_list("10.0.0.0/8 192.168.1.0/24", "192.168.1.77", 1);
	test_list("10.0.0.0/8,192.168.1.0/24", "192.168.2.1", 0);
	test_list("10.1.2.3/31", "10.1.2.2", 1);
	test_list("10.1.2.3/31", "10.1.2.4", 0);
	test_list("0.0.0.0/0", "203.0.113.9", 1);
	test_list("::1", "::1", 1);
	test_list("2001:db8::/32", "2001:db8:1::5", 1);
	test_list("2001:db8::/32", "2001:db9::5", 0);
	test_list("127.0.0.1", "::ffff:127.0.0.1", 1);       /* mapped counts as IPv4 */
	test_list("::/0", "127.0.0.1", 0);                   /* an IPv6 block is not IPv4 */
	test_list("", "127.0.0.1", 0);
	test_list("127.0.0.1", "not-an-ip", 0);
	test_list("10.0.0.0/33", NULL, -1);
	test_list("10.0.0.0/", NULL, -1);
	test_list("localhost", NULL, -1);
	test_list("10.0.0.0/8, ::1/129", NULL, -1);
	test_list("10.0.0.0/8, ::1", NULL, 0);

	/* [log] access's syslog targets */
	test_syslog("syslog", 1, AF_UNIX, "/dev/log", 0);
	test_syslog("syslog:/run/rsyslog.sock", 1, AF_UNIX, "/run/rsyslog.sock", 0);
	test_syslog("syslog:127.0.0.1:5514", 1, AF_INET, NULL, 5514);
	test_syslog("syslog:10.1.2.3", 1, AF_INET, NULL, 514);
	test_syslog("syslog:[::1]:514", 1, AF_INET6, NULL, 514);
	test_syslog("syslog:127.0.0.1:0", -1, 0, NULL, 0);
	test_syslog("syslog:loghost:514", -1, 0, NULL, 0);
	test_syslog("syslog:", -1, 0, NULL, 0);
	test_syslog("syslogd", 0, 0, NULL, 0);
	test_syslog("/var/log/access.log", 0, 0, NULL, 0);
	test_syslog("stderr", 0, 0, NULL, 0);
	return tap_done();
}
