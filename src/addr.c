/*
 * addr.c -- reading a listen address. Any thread; no state.
 */
#include "addr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

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
