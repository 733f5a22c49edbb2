/*
 * ticketkeys.c -- [tls] ticket_keys: the file of session ticket keys a
 * fleet shares, so that a client resumes on whichever proxy an L4
 * balancer sends it to. One key a line, base64 of 80 bytes: a 16-byte
 * name, a 32-byte AES-256 key, a 32-byte HMAC-SHA256 key (HAProxy's
 * order, name|AES|HMAC; NGINX's 80-byte files are name|HMAC|AES, so they
 * are not interchangeable). The first key encrypts new tickets; every key
 * decrypts. Blank lines and lines starting with '#' are skipped. Pure
 * (libcrypto's base64 only); main thread at a load, and the fuzz target.
 */
#include "tls/ticketkeys.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

int ticketkeys_parse(const char *text, size_t len, struct ticketkey *keys, size_t max, int *line_no,
		     char *why, size_t whylen)
{
	size_t n = 0, pos = 0;
	int line = 0;

	while (pos < len) {
		const char *s = text + pos, *nl = memchr(s, '\n', len - pos);
		size_t l = nl ? (size_t)(nl - s) : len - pos;
		unsigned char out[96];
		char b64[120];
		int got;

		pos += l + (nl ? 1 : 0);
		line++;
		while (l > 0 && (s[l - 1] == '\r' || s[l - 1] == ' ' || s[l - 1] == '\t'))
			l--;
		while (l > 0 && (*s == ' ' || *s == '\t')) {
			s++;
			l--;
		}
		if (l == 0 || *s == '#')
			continue;
		*line_no = line;
		/* 80 bytes are 108 characters of base64, the last one '=' */
		if (l != 108) {
			snprintf(why, whylen, "a key is 80 bytes in base64 (108 characters: openssl rand 80 | base64 -w0); "
				 "this line has %zu characters", l);
			return -1;
		}
		memcpy(b64, s, l);
		b64[l] = '\0';
		got = EVP_DecodeBlock(out, (const unsigned char *)b64, (int)l);
		if (got != 81 || b64[107] != '=' || b64[106] == '=') {
			snprintf(why, whylen, "not base64 of 80 bytes (openssl rand 80 | base64 -w0 makes one)");
			return -1;
		}
		if (n == max) {
			snprintf(why, whylen, "more than %zu keys; keep the newest few", max);
			return -1;
		}
		memcpy(keys[n].name, out, 16);
		memcpy(keys[n].aes, out + 16, 32);
		memcpy(keys[n].hmac, out + 48, 32);
		for (size_t i = 0; i < n; i++)
			if (memcmp(keys[i].name, keys[n].name, 16) == 0) {
				snprintf(why, whylen, "two keys with the same name (the first 16 bytes)");
				return -1;
			}
		n++;
	}
	*line_no = line;
	if (n == 0) {
		snprintf(why, whylen, "no key in it; one base64 line of 80 bytes at least (openssl rand 80 | base64 -w0)");
		return -1;
	}
	return (int)n;
}
