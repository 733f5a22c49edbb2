/*
 * addr.c -- reading a listen address, or a syslog target. Any thread; no
 * state.
 */
#include "base/addr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

int addr_parse(const char *text, struct sockaddr_storage *addr,
	       socklen_t *addrlen, char *err, size_t errlen)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)addr;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)addr;
	const char *colon, *hs = text, *p;
	char host[INET6_ADDRSTRLEN];
	size_t hl;
	long port = 0;

	memset(addr, 0, sizeof(*addr));
	if (*text == '[') {
		const char *rb = strchr(text, ']');

		if (!rb || rb[1] != ':') {
			snprintf(err, errlen, "an IPv6 address is written [addr]:port");
			return -1;
		}
		hs = text + 1;
		hl = (size_t)(rb - hs);
		colon = rb + 1;
	} else {
		colon = strrchr(text, ':');
		if (!colon || colon == text) {
			snprintf(err, errlen, "expected host:port, e.g. 0.0.0.0:8080");
			return -1;
		}
		hl = (size_t)(colon - text);
	}
	for (p = colon + 1; *p >= '0' && *p <= '9' && port <= 65535; p++)
		port = port * 10 + (*p - '0');
	if (p == colon + 1 || *p || port > 65535) {
		snprintf(err, errlen, "the port must be a number from 0 to 65535");
		return -1;
	}
	if (hl == 1 && *hs == '*') {
		hs = "0.0.0.0";
		hl = 7;
	}
	if (hl >= sizeof(host))
		goto not_ip;
	memcpy(host, hs, hl);
	host[hl] = '\0';
	if (inet_pton(AF_INET, host, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)port);
		*addrlen = sizeof(*sin);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons((uint16_t)port);
		*addrlen = sizeof(*sin6);
		return 0;
	}
not_ip:
	snprintf(err, errlen, "the host must be an IP address (a listener binds to one), e.g. 0.0.0.0:8080");
	return -1;
}

int addr_is_loopback(const struct sockaddr_storage *addr)
{
	if (addr->ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)addr)->sin_addr.s_addr) >> 24) == 127;
	if (addr->ss_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)addr)->sin6_addr;

		return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return 0;
}

/* An address as 16 bytes (IPv4 as ::ffff:a.b.c.d) and its family's bit
 * offset in them (96 for IPv4): 0, or -1 when text is no address. */
static int addr_bytes(const char *text, unsigned char out[16], unsigned *off)
{
	struct in_addr a4;

	if (inet_pton(AF_INET, text, &a4) == 1) {
		memset(out, 0, 10);
		out[10] = out[11] = 0xff;
		memcpy(out + 12, &a4, 4);
		*off = 96;
		return 0;
	}
	if (inet_pton(AF_INET6, text, out) == 1) {
		static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

		*off = memcmp(out, mapped, 12) == 0 ? 96 : 0;
		return 0;
	}
	return -1;
}

int addr_in_list(const char *list, const char *ip, char *err, size_t errlen)
{
	unsigned char want[16], net[16];
	unsigned woff = 0, noff;
	bool have = ip && addr_bytes(ip, want, &woff) == 0;
	const char *p = list;
	int found = 0;

	while (*p) {
		char entry[64], *slash = NULL;
		const char *start = p;
		size_t n = strcspn(p, ", \t");
		unsigned long bits;

		if (n == 0) {
			p++;
			continue;
		}
		if (n >= sizeof(entry))
			goto bad;
		memcpy(entry, p, n);
		entry[n] = '\0';
		p += n;
		slash = strchr(entry, '/');
		if (slash)
			*slash = '\0';
		if (addr_bytes(entry, net, &noff) < 0)
			goto bad;
		bits = 128 - noff;
		if (slash) {
			char *end;

			bits = strtoul(slash + 1, &end, 10);
			if (!slash[1] || *end || bits > 128 - noff)
				goto bad;
		}
		bits += noff;
		if (have && woff == noff) {
			size_t full = bits / 8;
			unsigned rest = bits % 8;

			if (memcmp(want, net, full) == 0 &&
			    (rest == 0 || ((want[full] ^ net[full]) & (0xffu << (8 - rest)) & 0xffu) == 0))
				found = 1;
		}
		continue;
bad:
		snprintf(err, errlen, "\"%.*s\" is not an address or CIDR block (e.g. 10.0.0.0/8, ::1)",
			 (int)n, start);
		return -1;
	}
	return found;
}

int addr_syslog(const char *text, struct sockaddr_storage *addr, socklen_t *addrlen, char *err,
		size_t errlen)
{
	struct sockaddr_un *sun = (struct sockaddr_un *)addr;
	const char *path = "/dev/log", *rest = text + 7;
	char hp[80];

	if (strncmp(text, "syslog", 6) != 0 || (text[6] != '\0' && text[6] != ':'))
		return 0;
	memset(addr, 0, sizeof(*addr));
	if (text[6] == ':' && *rest != '/') {
		/* a bare IPv4 address: syslog's own port */
		if (!strchr(rest, ':') && *rest != '[' && strlen(rest) < sizeof(hp) - 5) {
			snprintf(hp, sizeof(hp), "%s:514", rest);
			rest = hp;
		}
		/* addr_parse's words are about listeners */
		if (addr_parse(rest, addr, addrlen, err, errlen) < 0) {
			snprintf(err, errlen, "expected syslog (the local /dev/log), syslog:/PATH or syslog:IP:PORT, "
				 "the address numeric (e.g. syslog:127.0.0.1:514)");
			return -1;
		}
		if ((addr->ss_family == AF_INET ? ((struct sockaddr_in *)addr)->sin_port
						: ((struct sockaddr_in6 *)addr)->sin6_port) == 0) {
			snprintf(err, errlen, "a syslog server needs a port (514 is syslog's)");
			return -1;
		}
		return 1;
	}
	if (text[6] == ':')
		path = rest;
	if (strlen(path) >= sizeof(sun->sun_path)) {
		snprintf(err, errlen, "the socket path is longer than %zu bytes", sizeof(sun->sun_path) - 1);
		return -1;
	}
	sun->sun_family = AF_UNIX;
	memcpy(sun->sun_path, path, strlen(path) + 1);
	*addrlen = (socklen_t)sizeof(*sun);
	return 1;
}
