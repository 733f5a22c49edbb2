/*
 * certs.h -- one load's TLS settings and certificates ([tls] in the
 * config): the OpenSSL context new handshakes start from, the
 * certificates by file with the names they serve, and the choice of a
 * certificate by a client's SNI. Built on the main thread at a load or a
 * reload, published with the snapshot, immutable after; the workers' TLS
 * connections (path/tls.c) read it. Reference-counted: a handshake holds
 * its set until it ends, so a reload frees an old set under no one.
 */
#ifndef RINGPROXY_CERTS_H
#define RINGPROXY_CERTS_H

#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct conf;
struct certs;

/* Why a handshake failed, as the stats count it (certs_failure). */
enum certs_fail {
	CERTS_FAIL_NONE,
	CERTS_FAIL_SNI,         /* strict_sni: no certificate for the name */
	CERTS_FAIL_CIPHER,      /* no cipher suite or version in common */
	CERTS_FAIL_PROTOCOL,    /* not TLS, or broken TLS */
	CERTS_FAIL_ALPN,        /* only protocols this build does not serve */
};

/* Build the set for c's [tls]: every file of certs (a glob, name order),
 * each its certificate, chain and key, checked (parses, the key matches,
 * not expired, not yet valid); the protocols and cipher lists, checked
 * against the weak ones. NULL with the reasons in err ("FILE: reason" or
 * "CONFIG:LINE: reason", one a line) when any is wrong, and NULL with err
 * "" when c has no [tls] listen (no set needed). warn(line) is called for
 * each warning (a certificate that expires within 14 days, one without a
 * DNS name). Main thread. The set holds one reference. */
struct certs *certs_new(const struct conf *c, void (*warn)(const char *line), char *err, size_t errlen);
struct certs *certs_ref(struct certs *s);
void certs_unref(struct certs *s);

/* The context new connections start from (the first file's certificate;
 * the ClientHello callback puts in the one the SNI names). */
SSL_CTX *certs_ctx(const struct certs *s);

/* The certificates, for the stats: count, and each one's file, names
 * (comma-separated) and the end of its validity (Unix seconds). */
size_t certs_count(const struct certs *s);
const char *certs_file(const struct certs *s, size_t i);
const char *certs_names(const struct certs *s, size_t i);
time_t certs_not_after(const struct certs *s, size_t i);

/* The reason the last handshake that failed on this thread failed inside
 * one of the set's callbacks (CERTS_FAIL_NONE: not there), cleared by the
 * call. Worker thread. */
enum certs_fail certs_failure(void);

#endif
