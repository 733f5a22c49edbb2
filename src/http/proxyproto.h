/*
 * proxyproto.h -- the PROXY protocol header (versions 1 and 2) that an L4
 * balancer in front sends before the first byte of a connection, to say
 * whose connection it relays ([proxy] proxy_protocol). Pure: no socket,
 * no libevent, no allocation; any thread.
 *
 * The format is HAProxy's specification, doc/proxy-protocol.txt ("The
 * PROXY protocol, Versions 1 & 2", Willy Tarreau): section 2.1 for the
 * text line of version 1, 2.2 for the binary block of version 2.
 */
#ifndef RINGPROXY_PROXYPROTO_H
#define RINGPROXY_PROXYPROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The longest version 1 line, CRLF included (spec 2.1: "PROXY UNKNOWN"
 * with two full IPv6 addresses and ports). */
#define PROXYPROTO_V1_MAX 107
/* Version 2's fixed part: signature, version and command, family and
 * transport, length. */
#define PROXYPROTO_V2_FIXED 16

/* What a header says. */
struct proxyproto_hdr {
	int version;            /* 1 or 2 */
	/* AF_INET or AF_INET6: the relayed connection's addresses follow.
	 * AF_UNSPEC: the header carries no client address to use (v1
	 * UNKNOWN, v2 LOCAL, v2 AF_UNSPEC or AF_UNIX, an unspecified or
	 * datagram transport): the connection's own addresses stand, as the
	 * spec asks of a receiver. */
	int family;
	unsigned char src[16], dst[16]; /* network order; 4 bytes for AF_INET */
	uint16_t src_port, dst_port;
	/* v2 TLVs of a TLS terminator in front (hitch, HAProxy's
	 * send-proxy-v2-ssl); values point into the parsed buffer */
	bool ssl;               /* PP2_TYPE_SSL with PP2_CLIENT_SSL: the
				   client's connection was TLS */
	const unsigned char *alpn;      /* PP2_TYPE_ALPN: the protocol it
					   negotiated ("h2"), NULL: none */
	size_t alpn_len;
	const unsigned char *authority; /* PP2_TYPE_AUTHORITY: the SNI */
	size_t authority_len;
	const char *error;      /* after -1: what is wrong (a literal) */
};

/* The TLV types read (spec 2.2.1, 2.2.5). */
#define PROXYPROTO_TLV_ALPN      0x01
#define PROXYPROTO_TLV_AUTHORITY 0x02
#define PROXYPROTO_TLV_SSL       0x20
#define PROXYPROTO_CLIENT_SSL    0x01

/* Is the ALPN TLV's protocol h2 (a bare protocol ID as hitch and HAProxy
 * send it, or a list in ALPN's wire form that holds h2)? Pure. */
int proxyproto_alpn_h2(const struct proxyproto_hdr *h);

/* Parse the header at the start of buf[0..len); a version 2 header longer
 * than max bytes is refused (the reader's buffer must hold it whole).
 * Returns the header's length (> 0), which is never more than len: the
 * bytes after it are the connection's own; 0 when buf is a valid
 * beginning and the rest has to come; -1 when it is no valid header, with
 * h->error saying why. Strict: a byte the spec does not allow where it
 * stands ends it at once, not after a wait. */
ssize_t proxyproto_parse(const void *buf, size_t len, size_t max, struct proxyproto_hdr *h);

/* Does buf begin like a PROXY header of either version ("PROXY " or
 * version 2's 12-byte signature)? 1 yes, 0 no, -1 not known yet: buf is
 * shorter than a signature and equal to its beginning. */
int proxyproto_sniff(const void *buf, size_t len);

/* h's source address as text ("192.0.2.1", "2001:db8::1"; the same text
 * as inet_ntop's) in out; 0, or -1 when h has none (AF_UNSPEC) or out is
 * too small (INET6_ADDRSTRLEN always fits). */
int proxyproto_src_text(const struct proxyproto_hdr *h, char *out, size_t len);

#endif
