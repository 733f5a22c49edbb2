/*
 * test-proxyproto.c -- proxyproto.c, the PROXY protocol header reader: a
 * table of version 1 lines and version 2 blocks, valid and invalid, each
 * with its exact outcome (length, family, addresses, ports, or the reason
 * it is refused). The spec is HAProxy's doc/proxy-protocol.txt; its
 * examples (2.1: the line before an HTTP request, the longest lines of
 * each kind) are among the cases. Every valid header is also fed in every
 * shorter piece (each must wait, 0) and with an HTTP request after it
 * (the length stays the header's: the request is never read).
 */
#include "http/proxyproto.h"
#include "tap.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <sys/socket.h>

/* version 2's signature, then version/command, family/transport */
#define SIG2 "\r\n\r\n\0\r\nQUIT\n"
/* big enough for every case */
#define MAX 65551

struct pp_case {
	const char *name;
	const char *bytes;
	size_t len;
	ssize_t want;           /* the header's length, 0 (wait) or -1 */
	int version, family;
	const char *src, *dst;  /* text, for AF_INET and AF_INET6 */
	unsigned sport, dport;
	const char *error;      /* for -1 */
};

#define B(s) s, sizeof(s) - 1
#define OK4(n, s, l, src, dst, sp, dp) { n, B(s), l, 0, AF_INET, src, dst, sp, dp, NULL }
#define BAD(n, s, why) { n, B(s), -1, 0, 0, NULL, NULL, 0, 0, why }

static const struct pp_case pp_cases[] = {
	/* ---- version 1, valid (spec 2.1) */
	{ "v1: the spec's example before an HTTP request",
	  B("PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\nGET / HTTP/1.1\r\nHost: 192.168.0.11\r\n\r\n"),
	  47, 1, AF_INET, "192.168.0.1", "192.168.0.11", 56324, 443, NULL },
	{ "v1: the longest TCP4 line (56 bytes)",
	  B("PROXY TCP4 255.255.255.255 255.255.255.255 65535 65535\r\n"),
	  56, 1, AF_INET, "255.255.255.255", "255.255.255.255", 65535, 65535, NULL },
	{ "v1: the longest TCP6 line (104 bytes)",
	  B("PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n"),
	  104, 1, AF_INET6, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
	  65535, 65535, NULL },
	{ "v1: UNKNOWN, the short form (15 bytes)", B("PROXY UNKNOWN\r\nGET / HTTP/1.1\r\n\r\n"),
	  15, 1, AF_UNSPEC, NULL, NULL, 0, 0, NULL },
	{ "v1: UNKNOWN, the worst case (107 bytes): the rest of the line is ignored",
	  B("PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n"),
	  107, 1, AF_UNSPEC, NULL, NULL, 0, 0, NULL },
	{ "v1: UNKNOWN followed by anything printable", B("PROXY UNKNOWN what ever\r\n"),
	  25, 1, AF_UNSPEC, NULL, NULL, 0, 0, NULL },
	{ "v1: TCP6 with a compressed address", B("PROXY TCP6 2001:db8::1 ::1 0 8080\r\n"),
	  35, 1, AF_INET6, "2001:db8::1", "::1", 0, 8080, NULL },
	{ "v1: TCP4, port 0", B("PROXY TCP4 10.0.0.1 10.0.0.2 0 0\r\n"),
	  34, 1, AF_INET, "10.0.0.1", "10.0.0.2", 0, 0, NULL },

	/* ---- version 1, refused */
	BAD("v1: the line over 107 bytes",
	    "PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 655355\r\n",
	    "v1: no CRLF within the first 107 bytes"),
	BAD("v1: 107 bytes without CRLF",
	    "PROXY UNKNOWN xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	    "v1: no CRLF within the first 107 bytes"),
	BAD("v1: a bare LF ends the line", "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n",
	    "v1: a line feed without a carriage return before it"),
	BAD("v1: a bare CR ends the line", "PROXY TCP4 1.2.3.4 5.6.7.8 1 2\rGET",
	    "v1: a carriage return without a line feed after it"),
	BAD("v1: a NUL in the line", "PROXY TCP4 1.2.3.4\0 5.6.7.8 1 2\r\n",
	    "v1: a byte that is not printable US-ASCII"),
	BAD("v1: TCP5", "PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n",
	    "v1: the protocol is not TCP4, TCP6 or UNKNOWN, each followed by one space"),
	BAD("v1: lower-case tcp4", "PROXY tcp4 1.2.3.4 5.6.7.8 1 2\r\n",
	    "v1: the protocol is not TCP4, TCP6 or UNKNOWN, each followed by one space"),
	BAD("v1: UNKNOWNX", "PROXY UNKNOWNX\r\n",
	    "v1: the protocol is not TCP4, TCP6 or UNKNOWN, each followed by one space"),
	BAD("v1: two spaces after PROXY", "PROXY  TCP4 1.2.3.4 5.6.7.8 1 2\r\n",
	    "v1: the protocol is not TCP4, TCP6 or UNKNOWN, each followed by one space"),
	BAD("v1: two spaces between fields", "PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n",
	    "v1: not four fields (source, destination, their ports) separated by single spaces"),
	BAD("v1: a field missing", "PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n",
	    "v1: not four fields (source, destination, their ports) separated by single spaces"),
	BAD("v1: a field too many", "PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n",
	    "v1: not four fields (source, destination, their ports) separated by single spaces"),
	BAD("v1: a trailing space", "PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n",
	    "v1: not four fields (source, destination, their ports) separated by single spaces"),
	BAD("v1: TCP4 with a heading zero (octal?)", "PROXY TCP4 01.2.3.4 5.6.7.8 1 2\r\n",
	    "v1: the source is not an IPv4 address (TCP4)"),
	BAD("v1: TCP4 with 256", "PROXY TCP4 1.2.3.256 5.6.7.8 1 2\r\n",
	    "v1: the source is not an IPv4 address (TCP4)"),
	BAD("v1: TCP4 with three numbers", "PROXY TCP4 1.2.3 5.6.7.8 1 2\r\n",
	    "v1: the source is not an IPv4 address (TCP4)"),
	BAD("v1: TCP4 with five numbers", "PROXY TCP4 1.2.3.4.5 5.6.7.8 1 2\r\n",
	    "v1: the source is not an IPv4 address (TCP4)"),
	BAD("v1: TCP4 with an IPv6 address", "PROXY TCP4 ::1 5.6.7.8 1 2\r\n",
	    "v1: the source is not an IPv4 address (TCP4)"),
	BAD("v1: TCP6 with an IPv4 address", "PROXY TCP6 1.2.3.4 ::1 1 2\r\n",
	    "v1: the source is not an IPv6 address (TCP6)"),
	BAD("v1: a bad destination", "PROXY TCP4 1.2.3.4 5.6.7.x 1 2\r\n",
	    "v1: the destination is not an IPv4 address (TCP4)"),
	BAD("v1: TCP6 with a bad destination", "PROXY TCP6 ::1 ::g 1 2\r\n",
	    "v1: the destination is not an IPv6 address (TCP6)"),
	BAD("v1: port 65536", "PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n",
	    "v1: a port that is not a decimal 0-65535 without heading zeros"),
	BAD("v1: port with a heading zero", "PROXY TCP4 1.2.3.4 5.6.7.8 1 080\r\n",
	    "v1: a port that is not a decimal 0-65535 without heading zeros"),
	BAD("v1: a signed port", "PROXY TCP4 1.2.3.4 5.6.7.8 +1 2\r\n",
	    "v1: a port that is not a decimal 0-65535 without heading zeros"),
	BAD("no header: an HTTP request", "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
	    "no PROXY header: the connection does not begin with \"PROXY \" or version 2's signature"),
	BAD("no header: PROXY without its space", "PROXY\r\n",
	    "no PROXY header: the connection does not begin with \"PROXY \" or version 2's signature"),
	BAD("no header: garbage at once", "\x16\x03\x01\x02\x00",
	    "no PROXY header: the connection does not begin with \"PROXY \" or version 2's signature"),

	/* ---- version 2, valid (spec 2.2) */
	{ "v2: PROXY TCP over IPv4, then an HTTP request",
	  B(SIG2 "\x21\x11\x00\x0c" "\xc0\x00\x02\x01" "\xc6\x33\x64\x02" "\x1f\x90" "\x00\x50" "GET / HTTP/1.1\r\n\r\n"),
	  28, 2, AF_INET, "192.0.2.1", "198.51.100.2", 8080, 80, NULL },
	{ "v2: PROXY TCP over IPv6",
	  B(SIG2 "\x21\x21\x00\x24" "\x20\x01\x0d\xb8\0\0\0\0\0\0\0\0\0\0\0\x07" "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\x01"
	    "\xd4\x31" "\x01\xbb"),
	  52, 2, AF_INET6, "2001:db8::7", "::1", 54321, 443, NULL },
	{ "v2: TLVs after the addresses are skipped (NOOP, AUTHORITY, a custom 0xEA)",
	  B(SIG2 "\x21\x11\x00\x1b" "\x0a\x00\x00\x01" "\x0a\x00\x00\x02" "\x00\x01" "\x00\x02"
	    "\x04\x00\x00" "\x02\x00\x04host" "\xea\x00\x02\xff\xff" "GET"),
	  43, 2, AF_INET, "10.0.0.1", "10.0.0.2", 1, 2, NULL },
	{ "v2: LOCAL (a balancer's health check): the connection's own address",
	  B(SIG2 "\x20\x00\x00\x00" "GET / HTTP/1.1\r\n\r\n"),
	  16, 2, AF_UNSPEC, NULL, NULL, 0, 0, NULL },
	{ "v2: LOCAL with an address block: skipped whole, family ignored",
	  B(SIG2 "\x20\xff\x00\x03" "abc"),
	  19, 2, AF_UNSPEC, NULL, NULL, 0, 0, NULL },
	{ "v2: PROXY over AF_UNSPEC: the connection's own address",
	  B(SIG2 "\x21\x00\x00\x02" "xy"),
	  18, 2, AF_UNSPEC, NULL, NULL, 0, 0, NULL },
	{ "v2: UDP over IPv4: not a client for HTTP, the connection's own address",
	  B(SIG2 "\x21\x12\x00\x0c" "\x0a\x00\x00\x01" "\x0a\x00\x00\x02" "\x00\x01" "\x00\x02"),
	  28, 2, AF_UNSPEC, NULL, NULL, 0, 0, NULL },

	/* ---- version 2, refused */
	BAD("v2: version 1 in the binary block", SIG2 "\x11\x11\x00\x0c",
	    "v2: the version is not 2"),
	BAD("v2: version 3", SIG2 "\x31", "v2: the version is not 2"),
	BAD("v2: command 2", SIG2 "\x22\x11\x00\x0c", "v2: the command is neither LOCAL nor PROXY"),
	BAD("v2: family 4", SIG2 "\x21\x41\x00\x0c",
	    "v2: the address family is not AF_UNSPEC, AF_INET, AF_INET6 or AF_UNIX"),
	BAD("v2: transport 3", SIG2 "\x21\x13\x00\x0c", "v2: the transport is not UNSPEC, STREAM or DGRAM"),
	BAD("v2: IPv4 with an 11-byte block", SIG2 "\x21\x11\x00\x0b",
	    "v2: the address block is shorter than its family's addresses"),
	BAD("v2: IPv6 with IPv4's 12 bytes", SIG2 "\x21\x21\x00\x0c" "\x0a\x00\x00\x01\x0a\x00\x00\x02\x00\x01\x00\x02",
	    "v2: the address block is shorter than its family's addresses"),
	BAD("v2: AF_UNIX with 12 bytes", SIG2 "\x21\x31\x00\x0c",
	    "v2: the address block is shorter than its family's addresses"),
	BAD("v2: a TLV that runs past the header",
	    SIG2 "\x21\x11\x00\x10" "\x0a\x00\x00\x01" "\x0a\x00\x00\x02" "\x00\x01" "\x00\x02" "\x02\x00\x05" "h",
	    "v2: a TLV runs past the end of the header"),
	BAD("v2: two bytes after the addresses (half a TLV)",
	    SIG2 "\x21\x11\x00\x0e" "\x0a\x00\x00\x01" "\x0a\x00\x00\x02" "\x00\x01" "\x00\x02" "\x04\x00",
	    "v2: a TLV runs past the end of the header"),
	BAD("v2: a signature that breaks at its 5th byte", "\r\n\r\nX\r\nQUIT\n\x21\x11\x00\x0c",
	    "no PROXY header: the bytes are not version 2's signature"),
	BAD("v2: a signature that breaks at its 12th byte", "\r\n\r\n\0\r\nQUIT\r\x21\x11\x00\x0c",
	    "no PROXY header: the bytes are not version 2's signature"),
};

/* The header's addresses as text, when it has them. */
static void pp_text(int family, const unsigned char *a, char *out, size_t len)
{
	if (!inet_ntop(family, a, out, (socklen_t)len))
		snprintf(out, len, "?");
}

static void pp_check(const struct pp_case *c)
{
	struct proxyproto_hdr h;
	ssize_t r = proxyproto_parse(c->bytes, c->len, MAX, &h);
	char src[INET6_ADDRSTRLEN], dst[INET6_ADDRSTRLEN];
	bool waited = true;

	tap_is_int(r, c->want, "%s: %s", c->name, c->want > 0 ? "its length" : "refused");
	if (c->want < 0) {
		tap_is_str(h.error ? h.error : "(none)", c->error, "%s: the reason", c->name);
		/* the refusal comes as soon as the bytes show it: no prefix
		 * is refused for a reason other than the whole's */
		for (size_t n = 0; n < c->len; n++) {
			ssize_t p = proxyproto_parse(c->bytes, n, MAX, &h);

			if (p > 0 || (p < 0 && strcmp(h.error, c->error) != 0))
				waited = false;
		}
		tap_ok(waited, "%s: every piece of it waits or is refused for the same reason", c->name);
		return;
	}
	tap_is_int(h.version, c->version, "%s: version", c->name);
	tap_is_int(h.family, c->family, "%s: family", c->name);
	if (c->family != AF_UNSPEC) {
		pp_text(c->family, h.src, src, sizeof(src));
		pp_text(c->family, h.dst, dst, sizeof(dst));
		tap_is_str(src, c->src, "%s: source", c->name);
		tap_is_str(dst, c->dst, "%s: destination", c->name);
		tap_is_int(h.src_port, c->sport, "%s: source port", c->name);
		tap_is_int(h.dst_port, c->dport, "%s: destination port", c->name);
		tap_ok(proxyproto_src_text(&h, src, sizeof(src)) == 0 && strcmp(src, c->src) == 0,
		       "%s: proxyproto_src_text gives the source", c->name);
	} else {
		tap_ok(proxyproto_src_text(&h, src, sizeof(src)) == -1, "%s: no source to use", c->name);
	}
	/* a header in pieces: every piece shorter than the header waits */
	for (size_t n = 0; n < (size_t)c->want; n++)
		if (proxyproto_parse(c->bytes, n, MAX, &h) != 0)
			waited = false;
	tap_ok(waited, "%s: each of its first %zd pieces waits for more", c->name, c->want);
	tap_is_int(proxyproto_sniff(c->bytes, c->len), 1, "%s: sniffed as a PROXY header", c->name);
}

/* A version 2 header longer than the reader's buffer is refused as soon
 * as its length is read, and one that fits is taken. */
static void test_max(void)
{
	static const char hdr[] = SIG2 "\x21\x11\x00\x0c" "\x0a\x00\x00\x01" "\x0a\x00\x00\x02" "\x00\x01" "\x00\x02";
	static const char big[] = SIG2 "\x20\x00\xff\xff";
	struct proxyproto_hdr h;

	tap_is_int(proxyproto_parse(hdr, sizeof(hdr) - 1, 28, &h), 28, "v2: a header of exactly max bytes is taken");
	tap_is_int(proxyproto_parse(hdr, 16, 27, &h), -1, "v2: one a byte longer than max is refused at its 16th byte");
	tap_is_str(h.error, "v2: the header is longer than the read buffer ([proxy] buffer_size)", "v2: the reason");
	tap_is_int(proxyproto_parse(big, sizeof(big) - 1, MAX, &h), 0,
		   "v2: the longest header (16 + 65535 bytes) waits for its bytes when max allows it");
}

/* AF_UNIX: two 108-byte paths; no IP client, so the connection's own
 * address stands, and the TLVs after them are checked like any. */
static void test_unix(void)
{
	unsigned char b[16 + 216 + 4];
	struct proxyproto_hdr h;

	memset(b, 0, sizeof(b));
	memcpy(b, SIG2 "\x21\x31\x00\xd8", 16);
	memcpy(b + 16, "/run/a.sock", 11);
	memcpy(b + 16 + 108, "/run/b.sock", 11);
	tap_is_int(proxyproto_parse(b, 16 + 216, MAX, &h), 16 + 216, "v2: AF_UNIX stream: its 232 bytes");
	tap_is_int(h.family, AF_UNSPEC, "v2: AF_UNIX stream: treated as unknown (the connection's own address)");
	b[15] = 0xdc;   /* 4 bytes more: a NOOP TLV of one byte */
	memcpy(b + 16 + 216, "\x04\x00\x01" "z", 4);
	tap_is_int(proxyproto_parse(b, sizeof(b), MAX, &h), (long long)sizeof(b), "v2: AF_UNIX with a TLV after the paths");
	b[15] = 0xd7;
	tap_is_int(proxyproto_parse(b, sizeof(b), MAX, &h), -1, "v2: AF_UNIX with 215 address bytes is refused");
}

/* The client's address as text is inet_ntop's, which the socket's peer
 * is written with: fixed cases (RFC 5952's compression rules, mapped and
 * compatible IPv4) and 50,000 addresses from a fixed-seed generator whose
 * groups are mostly zero, so every arrangement of zero runs comes up. */
static void test_text(void)
{
	static const char *const fixed[] = {
		"::", "::1", "1::", "2001:db8::1", "2001:db8:0:0:1:0:0:1", "2001:0:0:1:0:0:0:1",
		"1:0:1:0:1:0:1:0", "0:1:0:0:1:0:0:0", "::ffff:192.0.2.1", "::192.0.2.1", "::ffff:0:192.0.2.1",
		"::1:0:0:0:1", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "0.0.0.0", "255.255.255.255", "10.0.0.1",
	};
	struct proxyproto_hdr h;
	char got[INET6_ADDRSTRLEN], want[INET6_ADDRSTRLEN];
	unsigned long x = 12345;
	unsigned bad = 0;

	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		memset(&h, 0, sizeof(h));
		h.family = strchr(fixed[i], ':') ? AF_INET6 : AF_INET;
		inet_pton(h.family, fixed[i], h.src);
		inet_ntop(h.family, h.src, want, sizeof(want));
		tap_ok(proxyproto_src_text(&h, got, sizeof(got)) == 0 && strcmp(got, want) == 0,
		       "text of %s is inet_ntop's (%s): %s", fixed[i], want, got);
	}
	for (int n = 0; n < 50000; n++) {
		memset(&h, 0, sizeof(h));
		h.family = n % 5 ? AF_INET6 : AF_INET;
		for (int g = 0; g < 8; g++) {
			x = x * 6364136223846793005ul + 1442695040888963407ul;
			if ((x >> 60) < 4) {    /* a quarter of the groups non-zero */
				h.src[2 * g] = (unsigned char)(x >> 24) & (x >> 40 & 1 ? 0xff : 0);
				h.src[2 * g + 1] = (unsigned char)(x >> 32);
			}
		}
		if (n % 7 == 0)
			memcpy(h.src, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12);
		inet_ntop(h.family, h.src, want, sizeof(want));
		if (proxyproto_src_text(&h, got, sizeof(got)) != 0 || strcmp(got, want) != 0) {
			if (bad++ < 5)
				tap_diag("  got %s, inet_ntop %s", got, want);
		}
	}
	tap_is_int(bad, 0, "50,000 generated addresses: the text is inet_ntop's for each");
	h.family = AF_INET6;
	memset(h.src, 0xff, 16);
	tap_is_int(proxyproto_src_text(&h, got, 39), -1, "a buffer one byte short of the text is refused");
	tap_is_int(proxyproto_src_text(&h, got, 40), 0, "one that fits is filled");
}

static void test_sniff(void)
{
	static const struct {
		const char *bytes;
		size_t len;
		int want;
		const char *what;
	} cases[] = {
		{ B("GET / HTTP/1.1\r\n"), 0, "an HTTP request is not a PROXY header" },
		{ B("PROXY "), 1, "\"PROXY \" is" },
		{ B("PROXY /x HTTP/1.1\r\n"), 1, "a request with the method PROXY is taken for one" },
		{ B("PROX"), -1, "\"PROX\" may still be one" },
		{ B(""), -1, "nothing yet may still be one" },
		{ B("\r\n\r\n\0\r\nQUI"), -1, "11 bytes of the v2 signature may still be one" },
		{ B("\r\n\r\n\0\r\nQUIT\n"), 1, "the v2 signature is one" },
		{ B("\r\nGET / HTTP/1.1\r\n"), 0, "an empty line before a request is not one" },
		{ B("PROXYX"), 0, "\"PROXYX\" is not one" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		tap_is_int(proxyproto_sniff(cases[i].bytes, cases[i].len), cases[i].want, "sniff: %s", cases[i].what);
}

/* A TLS terminator's TLVs (hitch's write-proxy-v2, HAProxy's
 * send-proxy-v2-ssl): the SSL TLV's client bit, the ALPN it negotiated
 * (a bare protocol ID, or a list holding h2), the SNI; other TLVs are
 * skipped, a TLV without the SSL client bit says nothing. */
static void test_tlvs(void)
{
	static const unsigned char addrs[12] = { 192, 0, 2, 1, 127, 0, 0, 1, 0x9c, 0x40, 0x01, 0xbb };
	static const struct {
		const char *name;
		const char *tlv;
		size_t len;
		int ssl, h2;
		const char *alpn, *authority;
	} cases[] = {
		{ "hitch's TLVs: ALPN http/1.1, authority, SSL with version and cipher",
		  "\x01\x00\x08http/1.1" "\x02\x00\x06" "a.test"
		  "\x20\x00\x0f\x01\x00\x00\x00\x00" "\x21\x00\x07TLSv1.3", 11 + 9 + 18, 1, 0, "http/1.1", "a.test" },
		{ "ALPN h2 and SSL", "\x01\x00\x02h2" "\x20\x00\x05\x01\x00\x00\x00\x00", 5 + 8, 1, 1, "h2", NULL },
		{ "ALPN as a list with h2 in it", "\x01\x00\x0c\x08http/1.1\x02h2", 15, 0, 1, "\x08http/1.1\x02h2", NULL },
		{ "SSL without the client bit (a client without TLS)", "\x20\x00\x05\x00\x00\x00\x00\x00", 8, 0, 0,
		  NULL, NULL },
		{ "an SSL TLV shorter than its fixed part", "\x20\x00\x01\x01", 4, 0, 0, NULL, NULL },
		{ "a NOOP and an unknown TLV only", "\x04\x00\x01z" "\xe9\x00\x02zz", 9, 0, 0, NULL, NULL },
		{ "ALPN h2c is not h2", "\x01\x00\x03h2c", 6, 0, 0, "h2c", NULL },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		unsigned char b[128];
		size_t blen = 12 + cases[i].len;
		struct proxyproto_hdr h;

		memcpy(b, SIG2 "\x21\x11", 14);
		b[14] = 0;
		b[15] = (unsigned char)blen;
		memcpy(b + 16, addrs, 12);
		memcpy(b + 28, cases[i].tlv, cases[i].len);
		tap_is_int(proxyproto_parse(b, 16 + blen, MAX, &h), (long long)(16 + blen), "TLVs, %s: parsed",
			   cases[i].name);
		tap_is_int(h.ssl, cases[i].ssl, "TLVs, %s: the client used TLS: %s", cases[i].name,
			   cases[i].ssl ? "yes" : "no");
		tap_is_int(proxyproto_alpn_h2(&h), cases[i].h2, "TLVs, %s: h2 negotiated: %s", cases[i].name,
			   cases[i].h2 ? "yes" : "no");
		tap_ok(cases[i].alpn ? h.alpn && h.alpn_len == strlen(cases[i].alpn) &&
		       memcmp(h.alpn, cases[i].alpn, h.alpn_len) == 0 : h.alpn == NULL,
		       "TLVs, %s: the ALPN TLV", cases[i].name);
		tap_ok(cases[i].authority ? h.authority && h.authority_len == strlen(cases[i].authority) &&
		       memcmp(h.authority, cases[i].authority, h.authority_len) == 0 : h.authority == NULL,
		       "TLVs, %s: the authority (SNI)", cases[i].name);
	}
}

int main(void)
{
	for (size_t i = 0; i < sizeof(pp_cases) / sizeof(pp_cases[0]); i++)
		pp_check(&pp_cases[i]);
	test_max();
	test_unix();
	test_text();
	test_sniff();
	test_tlvs();
	return tap_done();
}
