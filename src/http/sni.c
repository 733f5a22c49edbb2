/*
 * sni.c -- the server name a TLS client asks for (RFC 6066 3) and whether
 * a certificate's DNS name serves it (RFC 6125 6.4: exact, or a wildcard
 * for one label). Pure: no OpenSSL, no state; any thread (the workers'
 * TLS handshakes call it from OpenSSL's ClientHello callback).
 */
#include "http/sni.h"

#include <string.h>
#include <strings.h>

bool sni_match(const char *pattern, const char *name, size_t len)
{
	size_t plen = strlen(pattern);

	/* a fully qualified name's root dot, on either side */
	if (len > 0 && name[len - 1] == '.')
		len--;
	if (plen > 0 && pattern[plen - 1] == '.')
		plen--;
	if (plen >= 2 && pattern[0] == '*' && pattern[1] == '.') {
		/* one label, not empty, then exactly the rest */
		const char *dot = memchr(name, '.', len);
		size_t rest;

		if (!dot || dot == name)
			return false;
		rest = len - (size_t)(dot - name);
		return rest == plen - 1 && strncasecmp(dot, pattern + 1, rest) == 0;
	}
	return plen == len && strncasecmp(pattern, name, len) == 0;
}

int sni_parse(const unsigned char *ext, size_t len, const unsigned char **name, size_t *namelen)
{
	size_t list, n;

	/* ServerNameList: uint16 length, then entries of a type byte and
	 * a uint16-prefixed name; host_name is type 0, the one defined */
	if (len < 2)
		return -1;
	list = (size_t)ext[0] << 8 | ext[1];
	if (list != len - 2 || list < 3)
		return -1;
	if (ext[2] != 0)
		return -1;
	n = (size_t)ext[3] << 8 | ext[4];
	if (n == 0 || n > list - 3 || n > 255)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (ext[5 + i] == 0)
			return -1;
	*name = ext + 5;
	*namelen = n;
	return 0;
}
