/*
 * addr.h -- listen addresses (and syslog targets) as the config writes
 * them. Pure: no socket,
 * no libevent, so config validation (conf.c) and binding (proxy.c,
 * admin.c) read an address the same way.
 */
#ifndef RINGPROXY_ADDR_H
#define RINGPROXY_ADDR_H

#include <stddef.h>
#include <sys/socket.h>

/* Parse "IP:port", "[IPv6]:port" or "*:port" (any IPv4 address) into addr
 * and *addrlen; port 0..65535. Host names are refused: a listener binds to
 * an address, and resolving at validation time would accept a file that
 * cannot be bound later. 0, or -1 with err saying what is wrong. */
int addr_parse(const char *text, struct sockaddr_storage *addr,
	       socklen_t *addrlen, char *err, size_t errlen);

/* Is addr (from addr_parse) a loopback address: 127.0.0.0/8, ::1, or
 * ::ffff:127.0.0.0/104? Only this host can reach a listener bound to one. */
int addr_is_loopback(const struct sockaddr_storage *addr);

/* Is the address ip (text, e.g. "127.0.0.1" or "::1"; an IPv4-mapped IPv6
 * one counts as IPv4) in list, addresses and CIDR blocks separated by
 * commas or spaces ("127.0.0.1, 10.0.0.0/8, ::1")? 1 or 0; -1 with err
 * when list has an entry that is neither (ip NULL: only check list). */
int addr_in_list(const char *list, const char *ip, char *err, size_t errlen);

/* [log] access's syslog targets: "syslog" (the local socket, /dev/log),
 * "syslog:/PATH" (another local socket), "syslog:IP:PORT" or
 * "syslog:[IPv6]:PORT" (UDP; "syslog:IP" is port 514) into addr and
 * *addrlen (AF_UNIX or AF_INET/AF_INET6). 1 for one of these, 0 when text
 * is not a syslog target at all, -1 with err when it is one written
 * wrong. */
int addr_syslog(const char *text, struct sockaddr_storage *addr, socklen_t *addrlen, char *err,
		size_t errlen);

#endif
