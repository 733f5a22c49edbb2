/*
 * fuzz-sni.c -- libFuzzer target for what the TLS side parses itself: a
 * ClientHello's server_name extension (sni.c's sni_parse) and the match of
 * a certificate name against the host it names (sni_match). The bytes are
 * the extension's body, copied to a buffer of exactly their size (ASan
 * sees any read past it). Promises, whatever the bytes:
 *
 *   - a name taken lies inside the extension, is 1 to 255 bytes with no
 *     NUL, and the extension's list length is the rest of it;
 *   - a name serves itself, in any case, and with a root dot after it;
 *   - "*." followed by what comes after the name's first dot serves the
 *     name when its first label is not empty, and never serves that rest
 *     alone (the wildcard stands for one label, not none);
 *   - no pattern made of the name plus a byte serves the name.
 */
#include "http/sni.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CHECK(cond) do { if (!(cond)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char *ext = malloc(size ? size : 1);
	const unsigned char *name;
	char n[260], pat[264], up[260];
	size_t len;

	if (!ext)
		return 0;
	memcpy(ext, data, size);
	if (sni_parse(ext, size, &name, &len) < 0) {
		free(ext);
		return 0;
	}
	FUZZ_CHECK(name >= ext && name + len <= ext + size && len >= 1 && len <= 255);
	FUZZ_CHECK(memchr(name, 0, len) == NULL);
	FUZZ_CHECK(((size_t)ext[0] << 8 | ext[1]) == size - 2);
	memcpy(n, name, len);
	n[len] = '\0';
	for (size_t i = 0; i <= len; i++)
		up[i] = (char)toupper((unsigned char)n[i]);
	FUZZ_CHECK(sni_match(n, n, len));
	if (n[len - 1] != '.') {
		FUZZ_CHECK(sni_match(n, up, len));
		memcpy(pat, n, len);
		pat[len] = '.';
		FUZZ_CHECK(sni_match(n, pat, len + 1));
		pat[len] = 'x';
		pat[len + 1] = '\0';
		FUZZ_CHECK(!sni_match(pat, n, len));
	}
	{
		const char *dot = memchr(n, '.', len);

		if (dot && dot != n && n[len - 1] != '.') {
			/* a first label, then the rest: *.rest serves */
			pat[0] = '*';
			memcpy(pat + 1, dot, len - (size_t)(dot - n));
			pat[1 + len - (size_t)(dot - n)] = '\0';
			FUZZ_CHECK(sni_match(pat, n, len));
			FUZZ_CHECK(!sni_match(pat, dot + 1, len - (size_t)(dot + 1 - n)));
		}
	}
	free(ext);
	return 0;
}
