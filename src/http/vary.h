/*
 * vary.h -- which stored variant of a URL answers a request (RFC 9111
 * 4.1): the request header fields a response's Vary names, normalised so
 * that requests that mean the same select the same variant, and the
 * image-format key of [cache] image_formats.
 *
 * A variant is keyed by its spec: one line per field the response's Vary
 * names (Accept-Encoding aside: cachectl.c keeps that one as a set of
 * codings), in name order, "name:value\n" with the filling request's
 * normalised value, or "name\n" when that request had no such field (it
 * then only matches a request without one either). For an image response
 * (Content-Type image/...) varying on Accept while image formats are set,
 * the line is "accept/image:TYPE\n", TYPE the first listed format the
 * request accepts ("" for none): at most one variant per format and one
 * for the rest, whatever the browsers' Accept strings. "accept/image" is
 * no field name (a name is a token, and '/' is none), so the two kinds
 * never meet.
 *
 * Normalising (RFC 9110 5.2, 5.3, 5.6.1): the field's lines are combined
 * into one list; each element loses the whitespace around it and around
 * its ';' and '='; empty elements go. Fields that are case-insensitive
 * lists whose order means nothing (Accept, Accept-Charset,
 * Accept-Language) are also lowercased and sorted; any other field keeps
 * its case and its order.
 *
 * Pure: no I/O, no allocation; any thread.
 */
#ifndef RINGPROXY_VARY_H
#define RINGPROXY_VARY_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "http/http1.h"

#define VARY_SPEC_MAX    1024   /* longest spec; a longer one is not stored */
#define VARY_FIELDS_MAX  8      /* fields one Vary may name (besides
				   Accept-Encoding); more: not stored */
#define VARY_FORMATS_MAX 4      /* [cache] image_formats entries */
#define VARY_FORMAT_LEN  32     /* "image/" and a subtype, NUL included */

/* [cache] image_formats, in the operator's order (the origin's order of
 * preference): media types such as "image/avif". n 0: off. */
struct vary_formats {
	unsigned n;
	char type[VARY_FORMATS_MAX][VARY_FORMAT_LEN];
};

/* Parse "avif, webp" (subtypes of image/, or whole types "image/avif").
 * 0, or -1 with what is wrong in err. "" is off. */
int vary_formats_parse(const char *s, struct vary_formats *out, char *err, size_t len);

/* Whether resp's Vary names a field other than Accept-Encoding (or
 * "*"): such a response may only be stored with a spec. */
bool vary_other(const struct http1_msg *resp);

/*
 * The spec of resp's Vary for request req into buf: returns its length,
 * 0 when Vary names no field but Accept-Encoding, -1 when it cannot be
 * kept (Vary: *, a malformed or too long list, VARY_FIELDS_MAX fields, a
 * spec longer than len). fm may be NULL (no image formats).
 */
ssize_t vary_spec(const struct http1_msg *resp, const struct http1_msg *req,
		  const struct vary_formats *fm, char *buf, size_t len);

/* The same with each value taken from prev, the spec of the variant the
 * response revalidates or refreshes: -1 when resp names a field prev does
 * not key. */
ssize_t vary_spec_from(const struct http1_msg *resp, struct http1_str prev,
		       char *buf, size_t len);

/* spec's fields with req's values (req NULL: a request without any),
 * into buf: returns the length, -1 when it does not fit or a value is
 * too long to normalise. */
ssize_t vary_rekey(struct http1_str spec, const struct http1_msg *req,
		   const struct vary_formats *fm, char *buf, size_t len);

/* Whether req selects the variant of spec: its values of spec's fields,
 * normalised, are the stored ones. */
bool vary_match(struct http1_str spec, const struct http1_msg *req,
		const struct vary_formats *fm);

/* Whether two specs key the same fields (so they are variants of one
 * Vary, not of an older one). */
bool vary_same_fields(struct http1_str a, struct http1_str b);

/* The first of fm's formats req's Accept names with q > 0 (wildcards do
 * not count: image services send AVIF or WebP only to a client that names
 * it), as an index into fm->type, or -1 for none. */
int vary_image_format(const struct http1_msg *req, const struct vary_formats *fm);

/* The Accept line a fill of spec's image variant sends the backend, so
 * that it answers with the variant's format whoever asked first:
 * the format, then any type at q=0.8 ("Accept: image/avif, " and the
 * wildcard type with ";q=0.8"), and the wildcard alone for the rest; into
 * buf. Returns its length, 0 when spec has no image key or len is
 * too small. */
size_t vary_accept_line(struct http1_str spec, char *buf, size_t len);

/* Whether a fill that asked the backend for the image variant of spec
 * sent (vary_accept_line) got a response whose spec got is not that
 * variant (it stopped being an image, say): it answered another Accept
 * than the one its key would name, and is not stored. False when sent
 * names no image variant (the request's own Accept went). */
bool vary_asked_other(struct http1_str sent, struct http1_str got);

/* Whether resp holds the format spec's image key names, so that it may
 * be stored as that variant: its Content-Type's media type (parameters
 * aside, any case) is the key's format, or, for the key of none
 * ("accept/image:"), none of fm's formats. True when spec has no image
 * key. The key is derived from the request's Accept by our rule, the
 * response chosen by the backend's: a client that asks "image/jxl,
 * image/avif;q=0.1" keys the AVIF variant and may get a JPEG XL; a
 * backend that tests Accept by substring sends AVIF to "image/avif;q=0"
 * (the key of none). Such a response is answered but not stored, so
 * that no client chooses what a variant holds for everyone. */
bool vary_image_holds(struct http1_str spec, const struct http1_msg *resp,
		      const struct vary_formats *fm);

/* The request header lines that make a backend answer with spec's
 * variant, for a fetch that is not req's own (a background refresh): req's
 * lines of each field spec keys, as req sent them, and an image variant's
 * Accept line (vary_accept_line); into buf, each with its CRLF. Returns
 * the length, -1 when they do not fit. */
ssize_t vary_request_lines(struct http1_str spec, const struct http1_msg *req,
			   char *buf, size_t len);

#endif
