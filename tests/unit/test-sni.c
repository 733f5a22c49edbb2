/*
 * test-sni.c -- the ClientHello's server name (RFC 6066 3) and the match
 * of a certificate's names against it (RFC 6125 6.4), known answers.
 */
#include "http/sni.h"
#include "tap.h"

#include <string.h>

static void test_match(void)
{
	static const struct {
		const char *pattern, *name;
		bool want;
	} cases[] = {
		{ "img.example.com", "img.example.com", true },
		{ "img.example.com", "IMG.Example.COM", true },
		{ "img.example.com", "img.example.com.", true },
		{ "img.example.com.", "img.example.com", true },
		{ "img.example.com", "img.example.co", false },
		{ "img.example.com", "xmg.example.com", false },
		{ "img.example.com", "img.example.com.evil", false },
		{ "*.example.com", "img.example.com", true },
		{ "*.example.com", "a.example.com", true },
		{ "*.example.com", "IMG.EXAMPLE.com", true },
		{ "*.example.com", "example.com", false },
		{ "*.example.com", ".example.com", false },
		{ "*.example.com", "a.b.example.com", false },
		{ "*.example.com", "imgexample.com", false },
		{ "*.example.com", "img.example.com.", true },
		{ "*.example.com", "img.example.org", false },
		{ "*.example.com", "*.example.com", true },
		{ "*", "a", false },
		{ "", "", true },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		tap_is_int(sni_match(cases[i].pattern, cases[i].name, strlen(cases[i].name)), cases[i].want,
			   "%s %s %s", cases[i].pattern, cases[i].want ? "serves" : "does not serve", cases[i].name);
}

static void test_parse(void)
{
	static const struct {
		const char *what;
		const char *ext;
		size_t len;
		const char *want;       /* NULL: refused */
	} cases[] = {
		{ "one host_name", "\x00\x09\x00\x00\x06" "a.test", 11, "a.test" },
		{ "a name of 255 bytes is the most", NULL, 0, NULL },
		{ "an empty extension", "", 0, NULL },
		{ "a list length that is not the extension's", "\x00\x0a\x00\x00\x06" "a.test", 11, NULL },
		{ "a name type other than host_name", "\x00\x09\x01\x00\x06" "a.test", 11, NULL },
		{ "a name longer than the list", "\x00\x09\x00\x00\x07" "a.test", 11, NULL },
		{ "an empty name", "\x00\x03\x00\x00\x00", 5, NULL },
		{ "a NUL in the name", "\x00\x09\x00\x00\x06" "a\0test", 11, NULL },
		{ "bytes after the name in the list: the first name", "\x00\x0a\x00\x00\x06" "a.testX", 12, "a.test" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const unsigned char *name = NULL;
		size_t n = 0;
		int r;

		if (!cases[i].ext)
			continue;
		r = sni_parse((const unsigned char *)cases[i].ext, cases[i].len, &name, &n);
		if (cases[i].want)
			tap_ok(r == 0 && n == strlen(cases[i].want) && memcmp(name, cases[i].want, n) == 0, "%s: %s",
			       cases[i].what, cases[i].want);
		else
			tap_is_int(r, -1, "%s: refused", cases[i].what);
	}
	{
		unsigned char ext[2 + 3 + 256];
		const unsigned char *name;
		size_t n;

		memset(ext, 'a', sizeof(ext));
		ext[0] = 0x01;
		ext[1] = 0x02;  /* 258 = 3 + 255 */
		ext[2] = 0;
		ext[3] = 0;
		ext[4] = 0xff;
		tap_ok(sni_parse(ext, 2 + 3 + 255, &name, &n) == 0 && n == 255, "a name of 255 bytes is taken");
		ext[1] = 0x03;
		ext[4] = 0xff;
		ext[3] = 0x01;  /* 511: over 255 */
		tap_is_int(sni_parse(ext, 2 + 3 + 256, &name, &n), -1, "a name over 255 bytes is refused");
	}
}

int main(void)
{
	test_match();
	test_parse();
	return tap_done();
}
