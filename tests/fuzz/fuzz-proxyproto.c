/*
 * fuzz-proxyproto.c -- libFuzzer target for the PROXY protocol header
 * reader (proxyproto.c). The bytes are a connection's first bytes, copied
 * to a buffer of exactly their size (ASan sees any read past it); each
 * run checks promises that hold whatever the bytes:
 *
 *   - the result is a length no longer than the input, 0 (wait) or -1
 *     with a reason; a length is 16 + the block length for version 2
 *     and at most 107 for version 1, and the bytes sniff as a header;
 *   - the header's length and contents do not change when more bytes
 *     follow it (the request after a header is never read), and every
 *     piece of it shorter than the header waits (0);
 *   - a version 2 header longer than max is refused;
 *   - the source's text is inet_ntop's, and a TCP4 line's source and
 *     destination read back as the text the line has (canonical IPv4:
 *     no heading zeros);
 *   - a TLS terminator's TLVs (ALPN, authority) point inside the header,
 *     only version 2 has them, and an h2 verdict needs an ALPN TLV.
 */
#include "http/proxyproto.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* A broken promise: crash so libFuzzer keeps the input. */
#define FUZZ_CHECK(cond) do { if (!(cond)) __builtin_trap(); } while (0)

#define FUZZ_MAX (16 + 65535)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool fuzz_same(const struct proxyproto_hdr *a, const struct proxyproto_hdr *b)
{
	return a->version == b->version && a->family == b->family && a->src_port == b->src_port &&
	       a->ssl == b->ssl && a->alpn_len == b->alpn_len && a->authority_len == b->authority_len &&
	       a->dst_port == b->dst_port && memcmp(a->src, b->src, sizeof(a->src)) == 0 &&
	       memcmp(a->dst, b->dst, sizeof(a->dst)) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char *buf = malloc(size ? size : 1), *more;
	struct proxyproto_hdr h, h2;
	ssize_t r, r2;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	r = proxyproto_parse(buf, size, FUZZ_MAX, &h);
	FUZZ_CHECK(r >= -1 && r <= (ssize_t)size);
	if (r < 0)
		FUZZ_CHECK(h.error != NULL && *h.error);
	if (r <= 0) {
		/* a piece that waits may go on to be a header: so may each
		 * shorter piece (never refused before the whole is) */
		if (r == 0 && size > 0)
			FUZZ_CHECK(proxyproto_parse(buf, size - 1, FUZZ_MAX, &h2) == 0);
		free(buf);
		return 0;
	}
	FUZZ_CHECK(h.version == 1 || h.version == 2);
	FUZZ_CHECK(proxyproto_sniff(buf, size) == 1);
	if (h.version == 1) {
		FUZZ_CHECK(r <= PROXYPROTO_V1_MAX && buf[r - 2] == '\r' && buf[r - 1] == '\n');
	} else {
		FUZZ_CHECK(r >= PROXYPROTO_V2_FIXED && (size_t)r == PROXYPROTO_V2_FIXED + ((size_t)buf[14] << 8 | buf[15]));
		FUZZ_CHECK(proxyproto_parse(buf, size, (size_t)r - 1, &h2) == -1);
	}
	FUZZ_CHECK(h.family == AF_UNSPEC || h.family == AF_INET || h.family == AF_INET6);
	/* the TLVs' values are slices of the header */
	FUZZ_CHECK(!h.alpn || (h.version == 2 && h.alpn >= buf + PROXYPROTO_V2_FIXED &&
				h.alpn + h.alpn_len <= buf + r));
	FUZZ_CHECK(!h.authority || (h.version == 2 && h.authority >= buf + PROXYPROTO_V2_FIXED &&
				     h.authority + h.authority_len <= buf + r));
	FUZZ_CHECK(!h.ssl || h.version == 2);
	FUZZ_CHECK(!proxyproto_alpn_h2(&h) || h.alpn);
	/* the pieces: the last byte short, and half */
	FUZZ_CHECK(proxyproto_parse(buf, (size_t)r - 1, FUZZ_MAX, &h2) == 0);
	FUZZ_CHECK(proxyproto_parse(buf, (size_t)r / 2, FUZZ_MAX, &h2) == 0);
	/* what follows the header is not read: the header alone (an exactly
	 * sized copy) and with a request after it say the same */
	more = malloc((size_t)r + 16);
	if (more) {
		memcpy(more, buf, (size_t)r);
		r2 = proxyproto_parse(more, (size_t)r, FUZZ_MAX, &h2);
		FUZZ_CHECK(r2 == r && fuzz_same(&h, &h2));
		memcpy(more + r, "GET / HTTP/1.1\r\n", 16);
		r2 = proxyproto_parse(more, (size_t)r + 16, FUZZ_MAX, &h2);
		FUZZ_CHECK(r2 == r && fuzz_same(&h, &h2));
		free(more);
	}
	if (h.family != AF_UNSPEC) {
		char src[INET6_ADDRSTRLEN], dst[INET6_ADDRSTRLEN], line[PROXYPROTO_V1_MAX + 1];

		FUZZ_CHECK(proxyproto_src_text(&h, src, sizeof(src)) == 0);
		FUZZ_CHECK(inet_ntop(h.family, h.src, dst, sizeof(dst)) != NULL && strcmp(src, dst) == 0);
		if (h.version == 1 && h.family == AF_INET) {
			FUZZ_CHECK(inet_ntop(AF_INET, h.dst, dst, sizeof(dst)) != NULL);
			snprintf(line, sizeof(line), "PROXY TCP4 %s %s %u %u\r\n", src, dst, h.src_port, h.dst_port);
			FUZZ_CHECK(strlen(line) == (size_t)r && memcmp(line, buf, (size_t)r) == 0);
		}
	} else {
		FUZZ_CHECK(proxyproto_src_text(&h, (char[INET6_ADDRSTRLEN]){ 0 }, INET6_ADDRSTRLEN) == -1);
	}
	free(buf);
	return 0;
}
