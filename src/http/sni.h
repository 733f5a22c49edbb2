/*
 * sni.h -- a ClientHello's server name and the match of a certificate's
 * DNS names against it. Pure; any thread.
 */
#ifndef RINGPROXY_SNI_H
#define RINGPROXY_SNI_H

#include <stdbool.h>
#include <stddef.h>

/* Does a certificate name (pattern: "img.example.com", or a wildcard
 * "*.example.com" standing for exactly one label, not empty) serve the
 * host name name[0..len) (a trailing root dot ignored)? Case-insensitive,
 * as DNS names are (RFC 6125 6.4). */
bool sni_match(const char *pattern, const char *name, size_t len);

/* The host name of a ClientHello's server_name extension body
 * ext[0..len) (RFC 6066 3: a list of one host_name, type 0, of 1 to 255
 * bytes without a NUL): *name points into ext. 0, or -1 when the
 * extension is malformed or names no host. */
int sni_parse(const unsigned char *ext, size_t len, const unsigned char **name, size_t *namelen);

#endif
