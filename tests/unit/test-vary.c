/*
 * test-vary.c -- vary.c: the spec a response's Vary gives a request, the
 * normalising (whitespace, case of the case-insensitive lists, list order,
 * repeated lines combined), Vary: * and malformed lists, and the image
 * key of [cache] image_formats against real browsers' Accept strings.
 */
#include "http/vary.h"
#include "tap.h"

#include <stdio.h>
#include <string.h>

static const struct http1_limits lim = { 16384, 64 };

struct msg {
	char buf[4096];
	struct http1_msg m;
	struct http1_header h[64];
};

/* A GET with the header lines hdrs ("Name: value\r\n"...). */
static const struct http1_msg *req(struct msg *r, const char *hdrs)
{
	snprintf(r->buf, sizeof(r->buf), "GET /t/1.jpg HTTP/1.1\r\nHost: img\r\n%s\r\n", hdrs);
	http1_msg_init(&r->m);
	if (http1_parse_request(&r->m, r->h, r->buf, strlen(r->buf), &lim) <= 0)
		tap_diag("bad request: %s", hdrs);
	return &r->m;
}

static const struct http1_msg *resp(struct msg *r, const char *hdrs)
{
	snprintf(r->buf, sizeof(r->buf), "HTTP/1.1 200 OK\r\n%sContent-Length: 0\r\n\r\n", hdrs);
	http1_msg_init(&r->m);
	if (http1_parse_response(&r->m, r->h, r->buf, strlen(r->buf), &lim, HTTP1_M_GET) <= 0)
		tap_diag("bad response: %s", hdrs);
	return &r->m;
}

/* The spec of response head rs for request head rq, NUL-terminated in
 * out ("<-1>" when none can be kept). */
static const char *spec(const char *rs, const char *rq, const struct vary_formats *fm,
			char *out, size_t len)
{
	struct msg a, b;
	ssize_t n = vary_spec(resp(&a, rs), req(&b, rq), fm, out, len - 1);

	if (n < 0)
		snprintf(out, len, "<-1>");
	else
		out[n] = '\0';
	return out;
}

static void is_spec(const char *rs, const char *rq, const char *want, const char *what)
{
	char got[VARY_SPEC_MAX + 1];

	spec(rs, rq, NULL, got, sizeof(got));
	if (!tap_ok(strcmp(got, want) == 0, "%s", what))
		tap_diag("got '%s', want '%s'", got, want);
}

/* Whether the variant stored for request a is the one request b selects. */
static bool same_variant(const char *rs, const char *a, const char *b,
			 const struct vary_formats *fm)
{
	char s[VARY_SPEC_MAX + 1];
	struct msg m;

	spec(rs, a, fm, s, sizeof(s));
	return strcmp(s, "<-1>") != 0
	       && vary_match((struct http1_str){ s, strlen(s) }, req(&m, b), fm);
}

static void test_spec(void)
{
	is_spec("Vary: Accept-Encoding\r\n", "Accept-Encoding: gzip\r\n", "",
		"Accept-Encoding alone: no spec (cachectl keeps the codings)");
	is_spec("Vary: X-Device\r\n", "X-Device: mobile\r\n", "x-device:mobile\n",
		"one field: its lowercased name and the request's value");
	is_spec("Vary: X-Device\r\n", "", "x-device\n", "a field the request lacks: the name alone");
	is_spec("Vary: X-Device\r\n", "X-Device:\r\n", "x-device:\n",
		"an empty field is not an absent one");
	is_spec("Vary: foo, Bar\r\nVary: accept-encoding, FOO\r\n", "Foo: 1\r\nBar: 2\r\n",
		"bar:2\nfoo:1\n", "names sorted, each once, over every Vary line");
	is_spec("Vary: *\r\n", "", "<-1>", "Vary: * is never kept");
	is_spec("Vary: Foo, *\r\n", "Foo: 1\r\n", "<-1>", "nor * among names");
	is_spec("Vary: Foo\r\nVary: , *\r\n", "Foo: 1\r\n", "<-1>", "nor * on a later line");
	is_spec("Vary: Fo o\r\n", "", "<-1>", "a name that is not a token");
	is_spec("Vary: a, b, c, d, e, f, g, h, i\r\n", "", "<-1>", "more fields than VARY_FIELDS_MAX");
	is_spec("Vary: , ,\r\n", "", "", "empty list elements are nothing");
	is_spec("Vary: Foo\r\n", "Foo: \"a, b\" , c\r\n", "foo:\"a, b\",c\n",
		"a quoted comma is no list separator");
}

static void test_normalise(void)
{
	static const char foo[] = "Vary: Foo\r\n", al[] = "Vary: Accept-Language\r\n";

	/* the public cache suite's vary-normalise-* cases */
	tap_ok(same_variant(foo, "Foo: 1, 2\r\n", "Foo: 1\r\nFoo: 2\r\n", NULL),
	       "repeated lines combine into one list");
	tap_ok(same_variant(foo, "Foo: 1,2\r\n", "Foo:  1 ,  2 \r\n", NULL),
	       "whitespace around elements goes");
	tap_ok(same_variant(al, "Accept-Language: en, de\r\n", "Accept-Language: de, en\r\n", NULL),
	       "Accept-Language: order means nothing");
	tap_ok(same_variant(al, "Accept-Language: en, de\r\n", "Accept-Language: eN, De\r\n", NULL),
	       "Accept-Language: case means nothing");
	tap_ok(same_variant(al, "Accept-Language: en;q=0.5, de\r\n",
			    "Accept-Language: de ,en ; q = 0.5\r\n", NULL),
	       "whitespace around ';' and '=' goes");
	tap_ok(!same_variant(al, "Accept-Language: en;q=0.5\r\n", "Accept-Language: en;q=0.6\r\n", NULL),
	       "weights still count");
	tap_ok(!same_variant(foo, "Foo: 1, 2\r\n", "Foo: 2, 1\r\n", NULL),
	       "an unknown field keeps its order");
	tap_ok(!same_variant(foo, "Foo: a\r\n", "Foo: A\r\n", NULL), "and its case");
	tap_ok(!same_variant(foo, "Foo: 1\r\n", "", NULL), "absent does not match present");
	tap_ok(!same_variant(foo, "", "Foo: 1\r\n", NULL), "present does not match absent");
	tap_ok(same_variant(foo, "", "Other: 1\r\n", NULL), "absent matches absent");
	tap_ok(same_variant("Vary: Foo, Bar, Baz\r\n", "Foo: 1\r\nBar: 2\r\nBaz: 3\r\n",
			    "Baz: 3\r\nFoo: 1\r\nBar: 2\r\nOther: 4\r\n", NULL),
	       "three fields, lines in any order, fields not named ignored");
	tap_ok(!same_variant("Vary: Foo, Bar, Baz\r\n", "Foo: 1\r\nBar: 2\r\nBaz: 3\r\n",
			     "Foo: 1\r\nBar: 2\r\nBaz: 4\r\n", NULL),
	       "one of three differs: no match");
	tap_ok(same_variant("Vary: Accept\r\n", "Accept: text/html, application/json;q=0.9\r\n",
			    "Accept: Application/JSON; q=0.9,text/HTML\r\n", NULL),
	       "a non-image Vary: Accept is keyed by the normalised Accept");
}

/* Image requests' Accept strings of real browsers, from MDN's "List of
 * default Accept values" (Values for an image) and Safari 17.6's own
 * requests. */
static const char chrome[] = "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8";
static const char firefox[] = "image/avif,image/webp,image/png,image/svg+xml,image/*;q=0.8,*/*;q=0.5";
static const char safari[] = "image/webp,image/avif,image/jxl,image/heic,image/heic-sequence,"
			     "video/*;q=0.8,image/png,image/svg+xml,image/*;q=0.8,*/*;q=0.5";
static const char firefox_72[] = "image/webp,*/*";         /* Firefox 65 to 91 */
static const char safari_14[] = "image/webp,image/png,image/svg+xml,image/*;q=0.8,video/*;q=0.8,*/*;q=0.5";
static const char firefox_63[] = "*/*";                    /* Firefox 47 to 63 */

static int fmt(const struct vary_formats *fm, const char *accept)
{
	char h[512];
	struct msg m;

	snprintf(h, sizeof(h), "Accept: %s\r\n", accept);
	return vary_image_format(req(&m, h), fm);
}

static void test_formats(void)
{
	struct vary_formats fm;
	char err[128], s[VARY_SPEC_MAX + 1], line[128];
	static const char img[] = "Content-Type: image/jpeg\r\nVary: Accept\r\n";
	size_t n;

	tap_ok(vary_formats_parse("avif, WebP", &fm, err, sizeof(err)) == 0 && fm.n == 2
	       && strcmp(fm.type[0], "image/avif") == 0 && strcmp(fm.type[1], "image/webp") == 0,
	       "image_formats: subtypes become image/ types, in order");
	tap_ok(vary_formats_parse("image/avif", &fm, err, sizeof(err)) == 0 && fm.n == 1,
	       "image_formats: a whole type is taken too");
	tap_ok(vary_formats_parse("", &fm, err, sizeof(err)) == 0 && fm.n == 0, "empty: off");
	tap_ok(vary_formats_parse("avif, avif", &fm, err, sizeof(err)) < 0, "a format twice: refused");
	tap_ok(vary_formats_parse("a, b, c, d, e", &fm, err, sizeof(err)) < 0,
	       "more than VARY_FORMATS_MAX: refused");
	tap_ok(vary_formats_parse("*", &fm, err, sizeof(err)) < 0, "a wildcard: refused");

	vary_formats_parse("avif, webp", &fm, err, sizeof(err));
	tap_is_int(fmt(&fm, chrome), 0, "Chrome: AVIF");
	tap_is_int(fmt(&fm, firefox), 0, "Firefox: AVIF");
	tap_is_int(fmt(&fm, safari), 0, "Safari 17: AVIF (it lists WebP first at the same q)");
	tap_is_int(fmt(&fm, firefox_72), 1, "Firefox 65-91: WebP");
	tap_is_int(fmt(&fm, safari_14), 1, "Safari 14-15: WebP");
	tap_is_int(fmt(&fm, firefox_63), -1, "Firefox 47-63: neither (wildcards do not count)");
	tap_is_int(fmt(&fm, "image/avif;q=0, image/webp"), 1, "q=0 refuses a format");
	tap_is_int(fmt(&fm, "image/avif ; q=0.000,image/webp;q=0.001"), 1, "q=0.000 too; 0.001 does not");
	tap_is_int(fmt(&fm, "IMAGE/AVIF"), 0, "media types are case-insensitive");

	tap_ok(same_variant(img, "Accept: " "image/avif,image/webp,*/*" "\r\n",
			    "Accept: image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8\r\n", &fm),
	       "image variant: Firefox 92's and Chrome's strings select one variant");
	tap_ok(!same_variant(img, "Accept: image/webp,*/*\r\n", "Accept: image/avif\r\n", &fm),
	       "WebP and AVIF are two variants");
	tap_ok(same_variant(img, "Accept: */*\r\n", "", &fm), "no Accept is the rest's variant");
	spec(img, "Accept: image/webp,*/*\r\n", &fm, s, sizeof(s));
	tap_ok(strcmp(s, "accept/image:image/webp\n") == 0, "the spec names the format");
	n = vary_accept_line((struct http1_str){ s, strlen(s) }, line, sizeof(line));
	line[n] = '\0';
	tap_ok(strcmp(line, "Accept: image/webp, */*;q=0.8\r\n") == 0, "the fill asks for it");
	spec(img, "Accept: image/png\r\n", &fm, s, sizeof(s));
	n = vary_accept_line((struct http1_str){ s, strlen(s) }, line, sizeof(line));
	line[n] = '\0';
	tap_ok(strcmp(line, "Accept: */*\r\n") == 0, "the rest's fill asks for anything");
	spec("Content-Type: text/html\r\nVary: Accept\r\n", "Accept: image/webp\r\n", &fm, s, sizeof(s));
	tap_ok(strcmp(s, "accept:image/webp\n") == 0
	       && vary_accept_line((struct http1_str){ s, strlen(s) }, line, sizeof(line)) == 0,
	       "not an image: keyed by the normalised Accept, forwarded as sent");
	spec(img, "Accept: image/webp\r\n", NULL, s, sizeof(s));
	tap_ok(strcmp(s, "accept:image/webp\n") == 0, "formats off: the same for images");
}

static void test_helpers(void)
{
	char a[VARY_SPEC_MAX + 1], b[VARY_SPEC_MAX + 1], out[VARY_SPEC_MAX];
	struct msg m, r;
	struct vary_formats fm2;
	ssize_t n;

	vary_formats_parse("avif, webp", &fm2, out, sizeof(out));
	spec("Vary: Foo, Bar\r\n", "Foo: 1\r\nBar: 2\r\n", NULL, a, sizeof(a));
	spec("Vary: bar, foo\r\n", "Foo: 3\r\n", NULL, b, sizeof(b));
	tap_ok(vary_same_fields((struct http1_str){ a, strlen(a) }, (struct http1_str){ b, strlen(b) }),
	       "same fields, other values");
	spec("Vary: Foo\r\n", "Foo: 1\r\n", NULL, b, sizeof(b));
	tap_ok(!vary_same_fields((struct http1_str){ a, strlen(a) }, (struct http1_str){ b, strlen(b) }),
	       "other fields");
	n = vary_rekey((struct http1_str){ a, strlen(a) }, req(&m, "Bar: 9\r\n"), NULL, out, sizeof(out));
	tap_ok(n == 10 && memcmp(out, "bar:9\nfoo\n", 10) == 0,
	       "rekey: the spec's fields with another request's values");
	n = vary_spec_from(resp(&r, "Vary: Foo\r\n"), (struct http1_str){ a, strlen(a) }, out, sizeof(out));
	tap_ok(n == 6 && memcmp(out, "foo:1\n", 6) == 0, "spec_from: values from the stored variant");
	n = vary_spec_from(resp(&r, "Vary: Baz\r\n"), (struct http1_str){ a, strlen(a) }, out, sizeof(out));
	tap_is_int(n, -1, "spec_from: a field the variant did not key");
	spec("Content-Type: image/png\r\nVary: Accept, X-Device\r\n", "Accept: image/webp\r\nX-Device: a\r\nx-device: b\r\n",
	     &fm2, a, sizeof(a));
	n = vary_request_lines((struct http1_str){ a, strlen(a) },
			       req(&m, "Accept: image/webp\r\nX-Device: a\r\nx-device: b\r\n"), out, sizeof(out));
	tap_ok(n == 57 && memcmp(out, "Accept: image/webp, */*;q=0.8\r\nX-Device: a\r\nx-device: b\r\n", 57) == 0,
	       "request_lines: the image variant's Accept, then the field's lines as sent");
	tap_is_int(vary_request_lines((struct http1_str){ a, strlen(a) }, &m.m, out, 20), -1,
		   "request_lines: -1 when they do not fit");
	spec("Content-Type: image/png\r\nVary: Accept\r\n", "Accept: image/webp\r\n", &fm2, b, sizeof(b));
	tap_ok(!vary_asked_other((struct http1_str){ b, strlen(b) }, (struct http1_str){ b, strlen(b) }),
	       "asked_other: the image variant asked for came");
	tap_ok(!vary_asked_other((struct http1_str){ "", 0 }, (struct http1_str){ b, strlen(b) }),
	       "asked_other: a fill that sent its own Accept may store any");
	spec("Content-Type: text/html\r\nVary: Accept\r\n", "Accept: image/webp\r\n", &fm2, a, sizeof(a));
	tap_ok(vary_asked_other((struct http1_str){ b, strlen(b) }, (struct http1_str){ a, strlen(a) }),
	       "asked_other: a fill that asked for WebP and got a page keyed by Accept");
	tap_ok(!vary_other(resp(&r, "Vary: accept-encoding\r\n")) && vary_other(resp(&r, "Vary: X\r\n"))
	       && vary_other(resp(&r, "Vary: *\r\n")) && !vary_other(resp(&r, "")),
	       "vary_other: fields besides Accept-Encoding, or *");
}

/* Whether response head rs, keyed for request rq, may be stored as that
 * variant (vary_image_holds). */
static bool holds(const char *rs, const char *rq, const struct vary_formats *fm)
{
	char s[VARY_SPEC_MAX + 1];
	struct msg m;

	spec(rs, rq, fm, s, sizeof(s));
	return vary_image_holds((struct http1_str){ s, strlen(s) }, resp(&m, rs), fm);
}

static void test_image_holds(void)
{
	struct vary_formats fm;
	char err[64];

	vary_formats_parse("avif, webp", &fm, err, sizeof(err));
	tap_ok(holds("Content-Type: image/avif\r\nVary: Accept\r\n", "Accept: image/avif,*/*\r\n", &fm),
	       "holds: AVIF under the AVIF key");
	tap_ok(holds("Content-Type:  IMAGE/AVIF ; x=1\r\nVary: Accept\r\n", "Accept: image/avif\r\n", &fm),
	       "holds: the media type in any case, parameters aside");
	tap_ok(!holds("Content-Type: image/jxl\r\nVary: Accept\r\n", "Accept: image/jxl, image/avif;q=0.1\r\n", &fm),
	       "a JPEG XL under the AVIF key (Accept: image/jxl, image/avif;q=0.1): not stored");
	tap_ok(!holds("Content-Type: image/avif\r\nVary: Accept\r\n", "Accept: image/avif;q=0, image/png\r\n", &fm),
	       "AVIF under the key of none (a substring-testing origin): not stored");
	tap_ok(!holds("Content-Type: image/webp\r\nVary: Accept\r\n", "Accept: image/png\r\n", &fm),
	       "WebP under the key of none: not stored");
	tap_ok(holds("Content-Type: image/jpeg\r\nVary: Accept\r\n", "Accept: image/png\r\n", &fm),
	       "JPEG under the key of none: stored");
	tap_ok(!holds("Content-Type: image/avif\r\nContent-Type: image/webp\r\nVary: Accept\r\n",
		      "Accept: image/avif\r\n", &fm), "two Content-Type lines: not stored");
	tap_ok(!vary_image_holds((struct http1_str){ "accept/image:image/avif\n", 24 },
				 resp(&(struct msg){ 0 }, "Vary: Accept\r\n"), &fm),
	       "no Content-Type under the AVIF key (a refresh): not stored");
	tap_ok(holds("Content-Type: text/html\r\nVary: Accept\r\n", "Accept: image/avif\r\n", &fm),
	       "no image key (a page): holds whatever it is");
	tap_ok(holds("Content-Type: image/jxl\r\nVary: Accept\r\n", "Accept: image/jxl, image/avif\r\n", NULL),
	       "formats off: no image key");
}

int main(void)
{
	test_spec();
	test_normalise();
	test_formats();
	test_helpers();
	test_image_holds();
	return tap_done();
}
