/*
 * ticketkeys.h -- the session ticket key file of [tls] ticket_keys (the
 * format is in ticketkeys.c and ringproxy.ini(5)). Pure.
 */
#ifndef RINGPROXY_TICKETKEYS_H
#define RINGPROXY_TICKETKEYS_H

#include <stddef.h>

/* One key: the name a ticket carries, its AES-256-CBC key and its
 * HMAC-SHA256 key (RFC 5077 4's recommended construction). */
struct ticketkey {
	unsigned char name[16];
	unsigned char aes[32];
	unsigned char hmac[32];
};

/* Parse text[0..len) into keys (at most max), in file order (the first
 * encrypts). Returns how many (>= 1), or -1 with why and *line_no the line
 * at fault (the last line when the file holds no key). */
int ticketkeys_parse(const char *text, size_t len, struct ticketkey *keys, size_t max, int *line_no,
		     char *why, size_t whylen);

#endif
