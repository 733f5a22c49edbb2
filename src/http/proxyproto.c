/*
 * proxyproto.c -- reading a PROXY protocol header, versions 1 and 2
 * (HAProxy's doc/proxy-protocol.txt). Pure; any thread; no state.
 *
 * The reader is strict where the spec is ("any sequence which does not
 * exactly match the protocol must be discarded and cause the receiver to
 * abort the connection", 2.1): single spaces, canonical numbers, CRLF
 * within 107 bytes, version 2 only, the commands, families and transports
 * it defines, an address block at least as long as its family's, and TLVs
 * that end where the header ends. It is tolerant where the spec asks it
 * to be: a header may arrive in pieces (0: wait), the TLVs other than
 * a TLS terminator's are skipped unread, and what carries no IP client (UNKNOWN, LOCAL, AF_UNIX) leaves
 * the connection's own address. Every check of a piece runs as soon as
 * its bytes are there, so garbage is refused at once, not after a wait.
 */
#include "http/proxyproto.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>

static const unsigned char proxyproto_sig2[12] = {
	0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a
};
static const char proxyproto_sig1[] = "PROXY ";
#define PROXYPROTO_SIG1_LEN (sizeof(proxyproto_sig1) - 1)

static ssize_t proxyproto_fail(struct proxyproto_hdr *h, const char *why)
{
	h->error = why;
	return -1;
}

/* Is p[0..len) the beginning of (or all of) sig[0..siglen)? */
static bool proxyproto_prefix(const unsigned char *p, size_t len, const void *sig, size_t siglen)
{
	return memcmp(p, sig, len < siglen ? len : siglen) == 0;
}

int proxyproto_sniff(const void *buf, size_t len)
{
	const unsigned char *p = buf;

	if (len >= sizeof(proxyproto_sig2) && memcmp(p, proxyproto_sig2, sizeof(proxyproto_sig2)) == 0)
		return 1;
	if (len >= PROXYPROTO_SIG1_LEN && memcmp(p, proxyproto_sig1, PROXYPROTO_SIG1_LEN) == 0)
		return 1;
	if ((len < sizeof(proxyproto_sig2) && proxyproto_prefix(p, len, proxyproto_sig2, sizeof(proxyproto_sig2))) ||
	    (len < PROXYPROTO_SIG1_LEN && proxyproto_prefix(p, len, proxyproto_sig1, PROXYPROTO_SIG1_LEN)))
		return -1;
	return 0;
}

/* ---- version 1: one line of text (spec 2.1) --------------------------- */

/* A decimal number of at most max, without a heading zero (spec: "to
 * avoid any possible confusion with octal numbers"). */
static int proxyproto_dec(const char *s, size_t n, unsigned max, unsigned *out)
{
	unsigned v = 0;

	if (n == 0 || n > 5 || (n > 1 && s[0] == '0'))
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v > max)
		return -1;
	*out = v;
	return 0;
}

/* "exactly 4 integers in the range [0..255] inclusive written in decimal
 * representation separated by exactly one dot" */
static int proxyproto_v4(const char *s, size_t n, unsigned char out[4])
{
	const char *e = s + n;

	for (int i = 0; i < 4; i++) {
		const char *dot = i < 3 ? memchr(s, '.', (size_t)(e - s)) : e;
		unsigned v;

		if (!dot || proxyproto_dec(s, (size_t)(dot - s), 255, &v) < 0)
			return -1;
		out[i] = (unsigned char)v;
		s = dot + 1;
	}
	return 0;
}

/* The spec's IPv6 text: hexadecimal groups with at most one "::", 128
 * bits; inet_pton reads exactly that (and the dotted IPv4 tail of a
 * mapped address). */
static int proxyproto_v6(const char *s, size_t n, unsigned char out[16])
{
	char text[INET6_ADDRSTRLEN];

	if (n == 0 || n >= sizeof(text))
		return -1;
	memcpy(text, s, n);
	text[n] = '\0';
	return inet_pton(AF_INET6, text, out) == 1 ? 0 : -1;
}

/* The next field of the line: up to the next space (consumed) or the end
 * of the line; NULL when the field is empty (two spaces, or none left). */
static const char *proxyproto_field(const char **p, const char *e, size_t *n, bool last)
{
	const char *s = *p;
	const char *sp = memchr(s, ' ', (size_t)(e - s));

	if (last ? sp != NULL : sp == NULL)
		return NULL;
	*n = (size_t)((last ? e : sp) - s);
	*p = last ? e : sp + 1;
	return *n ? s : NULL;
}

static ssize_t proxyproto_v1(const unsigned char *b, size_t len, struct proxyproto_hdr *h)
{
	size_t n = len < PROXYPROTO_V1_MAX ? len : PROXYPROTO_V1_MAX;
	const char *line = (const char *)b, *p, *e, *f[4];
	size_t cr = 0, fl[4];
	unsigned sport, dport;
	int fam;
	bool found = false;

	h->version = 1;
	for (size_t i = PROXYPROTO_SIG1_LEN; i < n; i++) {
		if (b[i] == '\n')
			return proxyproto_fail(h, "v1: a line feed without a carriage return before it");
		if (b[i] == '\r') {
			if (i + 1 == PROXYPROTO_V1_MAX)
				break;          /* its LF would be the 108th byte */
			if (i + 1 == len)
				return 0;       /* its LF is still to come */
			if (b[i + 1] != '\n')
				return proxyproto_fail(h, "v1: a carriage return without a line feed after it");
			cr = i;
			found = true;
			break;
		}
		if (b[i] < 0x20 || b[i] > 0x7e)
			return proxyproto_fail(h, "v1: a byte that is not printable US-ASCII");
	}
	if (!found)
		return len >= PROXYPROTO_V1_MAX ? proxyproto_fail(h, "v1: no CRLF within the first 107 bytes") : 0;
	p = line + PROXYPROTO_SIG1_LEN;
	e = line + cr;
	/* "UNKNOWN": the rest of the line is ignored, the connection's own
	 * addresses stand (2.1) */
	if ((size_t)(e - p) >= 7 && memcmp(p, "UNKNOWN", 7) == 0 && (e - p == 7 || p[7] == ' ')) {
		h->family = AF_UNSPEC;
		return (ssize_t)(cr + 2);
	}
	if ((size_t)(e - p) >= 5 && memcmp(p, "TCP4 ", 5) == 0)
		fam = AF_INET;
	else if ((size_t)(e - p) >= 5 && memcmp(p, "TCP6 ", 5) == 0)
		fam = AF_INET6;
	else
		return proxyproto_fail(h, "v1: the protocol is not TCP4, TCP6 or UNKNOWN, each followed by one space");
	p += 5;
	for (int i = 0; i < 4; i++)
		if (!(f[i] = proxyproto_field(&p, e, &fl[i], i == 3)))
			return proxyproto_fail(h, "v1: not four fields (source, destination, their ports) "
						  "separated by single spaces");
	if (fam == AF_INET ? proxyproto_v4(f[0], fl[0], h->src) < 0 : proxyproto_v6(f[0], fl[0], h->src) < 0)
		return proxyproto_fail(h, fam == AF_INET ? "v1: the source is not an IPv4 address (TCP4)"
							 : "v1: the source is not an IPv6 address (TCP6)");
	if (fam == AF_INET ? proxyproto_v4(f[1], fl[1], h->dst) < 0 : proxyproto_v6(f[1], fl[1], h->dst) < 0)
		return proxyproto_fail(h, fam == AF_INET ? "v1: the destination is not an IPv4 address (TCP4)"
							 : "v1: the destination is not an IPv6 address (TCP6)");
	if (proxyproto_dec(f[2], fl[2], 65535, &sport) < 0 || proxyproto_dec(f[3], fl[3], 65535, &dport) < 0)
		return proxyproto_fail(h, "v1: a port that is not a decimal 0-65535 without heading zeros");
	h->family = fam;
	h->src_port = (uint16_t)sport;
	h->dst_port = (uint16_t)dport;
	return (ssize_t)(cr + 2);
}

/* ---- version 2: a binary block (spec 2.2) ----------------------------- */

static ssize_t proxyproto_v2(const unsigned char *b, size_t len, size_t max, struct proxyproto_hdr *h)
{
	/* the address block's length by family (AF_UNSPEC, AF_INET,
	 * AF_INET6, AF_UNIX): two addresses, and two ports for IP */
	static const size_t addrlen[4] = { 0, 2 * 4 + 2 * 2, 2 * 16 + 2 * 2, 2 * 108 };
	unsigned cmd, fam, tr;
	size_t total, pos, alen;

	h->version = 2;
	if (len > 12 && (b[12] >> 4) != 2)
		return proxyproto_fail(h, "v2: the version is not 2");
	if (len > 12 && (b[12] & 0x0f) > 1)
		return proxyproto_fail(h, "v2: the command is neither LOCAL nor PROXY");
	cmd = len > 12 ? b[12] & 0x0fu : 0;
	fam = len > 13 ? b[13] >> 4 : 0;
	tr = len > 13 ? b[13] & 0x0fu : 0;
	/* a LOCAL command's family is ignored (2.2) */
	if (cmd == 1 && fam > 3)
		return proxyproto_fail(h, "v2: the address family is not AF_UNSPEC, AF_INET, AF_INET6 or AF_UNIX");
	if (cmd == 1 && tr > 2)
		return proxyproto_fail(h, "v2: the transport is not UNSPEC, STREAM or DGRAM");
	if (len < PROXYPROTO_V2_FIXED)
		return 0;
	total = PROXYPROTO_V2_FIXED + ((size_t)b[14] << 8 | b[15]);
	if (total > max)
		return proxyproto_fail(h, "v2: the header is longer than the read buffer ([proxy] buffer_size)");
	/* the addresses' layout is defined for a family with a transport
	 * (\x11 ... \x32); under an UNSPEC one their size is unknown and
	 * the block is ignored whole */
	alen = cmd == 1 && fam && tr ? addrlen[fam] : 0;
	if (cmd == 1 && total - PROXYPROTO_V2_FIXED < alen)
		return proxyproto_fail(h, "v2: the address block is shorter than its family's addresses");
	if (len < total)
		return 0;
	h->family = AF_UNSPEC;
	if (cmd == 0 || alen == 0)
		return (ssize_t)total;  /* LOCAL, or addresses of no known
					   layout: the block is discarded */
	/* the TLVs after the addresses: type, 16-bit length, value; each
	 * must end inside the header; those a TLS terminator sends are read
	 * (2.2.1: PP2_TYPE_ALPN, PP2_TYPE_AUTHORITY; 2.2.5: PP2_TYPE_SSL,
	 * whose first byte's PP2_CLIENT_SSL bit says the client used TLS),
	 * the others skipped */
	for (pos = PROXYPROTO_V2_FIXED + alen; pos < total;) {
		size_t vlen;

		if (total - pos < 3 || total - pos - 3 < ((size_t)b[pos + 1] << 8 | b[pos + 2]))
			return proxyproto_fail(h, "v2: a TLV runs past the end of the header");
		vlen = (size_t)b[pos + 1] << 8 | b[pos + 2];
		if (b[pos] == PROXYPROTO_TLV_ALPN) {
			h->alpn = b + pos + 3;
			h->alpn_len = vlen;
		} else if (b[pos] == PROXYPROTO_TLV_AUTHORITY) {
			h->authority = b + pos + 3;
			h->authority_len = vlen;
		} else if (b[pos] == PROXYPROTO_TLV_SSL && vlen >= 5) {
			h->ssl = (b[pos + 3] & PROXYPROTO_CLIENT_SSL) != 0;
		}
		pos += 3 + vlen;
	}
	/* only TCP over IP carries a client for HTTP; the rest falls back
	 * to UNSPEC, as the spec lets a receiver do */
	if ((fam == 1 || fam == 2) && tr == 1) {
		size_t n = fam == 1 ? 4 : 16;
		const unsigned char *a = b + PROXYPROTO_V2_FIXED;

		h->family = fam == 1 ? AF_INET : AF_INET6;
		memcpy(h->src, a, n);
		memcpy(h->dst, a + n, n);
		h->src_port = (uint16_t)(a[2 * n] << 8 | a[2 * n + 1]);
		h->dst_port = (uint16_t)(a[2 * n + 2] << 8 | a[2 * n + 3]);
	}
	return (ssize_t)total;
}

ssize_t proxyproto_parse(const void *buf, size_t len, size_t max, struct proxyproto_hdr *h)
{
	const unsigned char *b = buf;

	memset(h, 0, sizeof(*h));
	h->family = AF_UNSPEC;
	/* the version is told by the signature (2.2, the end) */
	if (len > 0 && b[0] == proxyproto_sig2[0]) {
		if (!proxyproto_prefix(b, len, proxyproto_sig2, sizeof(proxyproto_sig2)))
			return proxyproto_fail(h, "no PROXY header: the bytes are not version 2's signature");
		return len < sizeof(proxyproto_sig2) ? 0 : proxyproto_v2(b, len, max, h);
	}
	if (!proxyproto_prefix(b, len, proxyproto_sig1, PROXYPROTO_SIG1_LEN))
		return proxyproto_fail(h, "no PROXY header: the connection does not begin with \"PROXY \" "
					  "or version 2's signature");
	return len < PROXYPROTO_SIG1_LEN ? 0 : proxyproto_v1(b, len, h);
}

/* ---- the client's address as text -------------------------------------- */

/* Formatted here, not by inet_ntop, which prints each number with
 * sprintf: this runs once per connection on the request path. */

static char *proxyproto_put_v4(char *p, const unsigned char a[4])
{
	for (int i = 0; i < 4; i++) {
		unsigned v = a[i];

		if (i)
			*p++ = '.';
		if (v >= 100)
			*p++ = (char)('0' + v / 100);
		if (v >= 10)
			*p++ = (char)('0' + v / 10 % 10);
		*p++ = (char)('0' + v % 10);
	}
	return p;
}

/* RFC 5952's text (section 4): lower-case hex groups without heading
 * zeros, the longest run of two or more zero groups (the first of equal
 * ones) as "::"; an IPv4-mapped address (and a deprecated IPv4-compatible
 * one) ends in dotted form, as inet_ntop writes it, so an address reads
 * the same whether the socket or a header named it. */
static char *proxyproto_put_v6(char *p, const unsigned char a[16])
{
	static const char hex[] = "0123456789abcdef";
	unsigned w[8];
	int best = -1, bestlen = 0, cur = -1;

	for (int i = 0; i < 8; i++) {
		w[i] = (unsigned)a[2 * i] << 8 | a[2 * i + 1];
		if (w[i] != 0) {
			cur = -1;
			continue;
		}
		if (cur < 0)
			cur = i;
		if (i + 1 - cur > bestlen) {
			best = cur;
			bestlen = i + 1 - cur;
		}
	}
	if (bestlen < 2)
		best = -1;
	for (int i = 0; i < 8; i++) {
		if (best >= 0 && i >= best && i < best + bestlen) {
			if (i == best)
				*p++ = ':';
			continue;
		}
		if (i)
			*p++ = ':';
		if (i == 6 && best == 0 && (bestlen == 6 || (bestlen == 5 && w[5] == 0xffff)))
			return proxyproto_put_v4(p, a + 12);
		for (int sh = 12; sh >= 0; sh -= 4)
			if (w[i] >> sh || sh == 0)
				*p++ = hex[(w[i] >> sh) & 0xf];
	}
	if (best >= 0 && best + bestlen == 8)
		*p++ = ':';
	return p;
}

int proxyproto_src_text(const struct proxyproto_hdr *h, char *out, size_t len)
{
	char text[INET6_ADDRSTRLEN], *e;

	if (h->family == AF_INET)
		e = proxyproto_put_v4(text, h->src);
	else if (h->family == AF_INET6)
		e = proxyproto_put_v6(text, h->src);
	else
		return -1;
	if ((size_t)(e - text) >= len)
		return -1;
	memcpy(out, text, (size_t)(e - text));
	out[e - text] = '\0';
	return 0;
}

int proxyproto_alpn_h2(const struct proxyproto_hdr *h)
{
	const unsigned char *p = h->alpn;
	size_t n = h->alpn_len;

	if (!p)
		return 0;
	if (n == 2 && p[0] == 'h' && p[1] == '2')
		return 1;
	/* a length-prefixed list (the exact copy of the extension the spec
	 * mentions): h2 anywhere in it */
	for (size_t i = 0; i < n; i += 1u + p[i])
		if (p[i] == 2 && i + 3 <= n && p[i + 1] == 'h' && p[i + 2] == '2')
			return 1;
	return 0;
}
