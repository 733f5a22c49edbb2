/*
 * fuzz-ticketkeys.c -- libFuzzer target for the [tls] ticket_keys file
 * reader (tls/ticketkeys.c). The bytes are a file, copied to a buffer of
 * exactly their size. Promises, whatever the bytes: the count is -1 (with
 * a reason and a line of the file) or 1 to the maximum; each key's bytes
 * are a base64 line's decoding (encoding them again gives a line of the
 * file); no two keys share a name; a file of the same keys with a comment
 * and blank lines between reads the same.
 */
#include "tls/ticketkeys.h"

#include <openssl/evp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CHECK(cond) do { if (!(cond)) __builtin_trap(); } while (0)
#define FUZZ_KEYS 4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ticketkey keys[FUZZ_KEYS], again[FUZZ_KEYS];
	char *buf = malloc(size ? size : 1), why[256], *text;
	int line = 0, n, lines = 1;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	for (size_t i = 0; i < size; i++)
		lines += buf[i] == '\n';
	why[0] = '\0';
	n = ticketkeys_parse(buf, size, keys, FUZZ_KEYS, &line, why, sizeof(why));
	FUZZ_CHECK(n == -1 || (n >= 1 && n <= FUZZ_KEYS));
	FUZZ_CHECK(line >= 0 && line <= lines);
	if (n < 0) {
		FUZZ_CHECK(why[0] != '\0');
		free(buf);
		return 0;
	}
	text = malloc((size_t)n * 130 + 32);
	if (text) {
		size_t at = 0;

		memcpy(text, "# again\n\n", 9);
		at = 9;
		for (int i = 0; i < n; i++) {
			unsigned char raw[80];

			memcpy(raw, keys[i].name, 16);
			memcpy(raw + 16, keys[i].aes, 32);
			memcpy(raw + 48, keys[i].hmac, 32);
			FUZZ_CHECK(EVP_EncodeBlock((unsigned char *)text + at, raw, 80) == 108);
			at += 108;
			memcpy(text + at, "\r\n\n", 3);
			at += 3;
			for (int j = 0; j < i; j++)
				FUZZ_CHECK(memcmp(keys[i].name, keys[j].name, 16) != 0);
		}
		FUZZ_CHECK(ticketkeys_parse(text, at, again, FUZZ_KEYS, &line, why, sizeof(why)) == n);
		FUZZ_CHECK(memcmp(keys, again, (size_t)n * sizeof(keys[0])) == 0);
		free(text);
	}
	free(buf);
	return 0;
}
