/*
 * certs.c -- the [tls] section made into OpenSSL's terms: one SSL_CTX
 * with the protocol versions, the cipher lists and the options every
 * handshake shares, and the certificates of [tls] certs, each with the
 * DNS names of its subjectAltName. A ClientHello's SNI picks the
 * certificates of the name (certs_on_hello, run inside the handshake on
 * the worker's thread), an exact name before a wildcard; an RSA and an
 * ECDSA certificate of the same names both go in, and OpenSSL takes the
 * one the client's signature algorithms allow. No SNI, or a name no
 * certificate has, keeps the first file's (or fails, with strict_sni).
 *
 * Built on the main thread (certs_new) at each load and reload, never
 * changed after: a reload builds a new set, and a handshake that began on
 * the old one finishes on it (it holds a reference). OpenSSL keeps its
 * own count of the SSL_CTX, so an established connection keeps its
 * certificate and settings whatever reloads come.
 *
 * The defaults follow Mozilla's "intermediate" configuration: TLS 1.2 and
 * 1.3, AEAD suites with forward secrecy, the client's order of suites, no
 * compression, no renegotiation (OpenSSL's SSL_OP_NO_RENEGOTIATION),
 * session tickets on (OpenSSL's own keys, random per set).
 */
#include "tls/certs.h"

#include <ctype.h>
#include <glob.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/conf.h"
#include "http/sni.h"
#include "tls/ticketkeys.h"

#include <errno.h>
#include <openssl/core_names.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

/* Certificates a set holds at most (files of the glob). */
#define CERTS_MAX 4096
/* Names of one certificate kept (a SAN list can be long). */
#define CERTS_NAMES_MAX 256
/* Days before expiry -t and a load warn. */
#define CERTS_WARN_DAYS 14
/* Ticket keys of a ticket_keys file kept at most; the largest file read. */
#define CERTS_TICKET_KEYS 16
#define CERTS_TICKET_FILE_MAX 65536
/* Without a file: the period of the process's own keys (HAProxy's
 * documentation suggests rotating every 12 h). */
#define CERTS_TICKET_PERIOD (12 * 3600)

struct certs_one {
	char *file;
	X509 *cert;
	EVP_PKEY *key;
	STACK_OF(X509) *chain;
	char **names;           /* lower case; "*.example.com" for wildcards */
	size_t nnames;
	char *names_text;       /* comma-separated, for the stats */
	time_t not_after;
};

struct certs {
	_Atomic long refs;
	SSL_CTX *ctx;
	bool strict_sni;
	unsigned char alpn[64]; /* the offered list, ALPN wire format */
	size_t alpn_len;
	struct certs_one *one;
	size_t n;
	struct ticketkey keys[CERTS_TICKET_KEYS];      /* ticket_keys' */
	size_t nkeys;                   /* 0: the process's own (certs_key_at) */
};

/* The process's secret its own ticket keys are made from: random at the
 * first load, the same for every load after (a reload keeps resumption
 * working). Written once on the main thread before any worker runs. */
static unsigned char certs_secret[32];
static bool certs_have_secret;

static _Thread_local enum certs_fail certs_fail_last;

enum certs_fail certs_failure(void)
{
	enum certs_fail f = certs_fail_last;

	certs_fail_last = CERTS_FAIL_NONE;
	return f;
}

/* ---- names ------------------------------------------------------------- */

/* The best certificate for a name: an exact match before a wildcard, the
 * first file in name order among equals. -1 when none. */
static long certs_find(const struct certs *s, const char *name, size_t len, bool wild)
{
	for (size_t i = 0; i < s->n; i++)
		for (size_t j = 0; j < s->one[i].nnames; j++) {
			const char *p = s->one[i].names[j];

			if ((p[0] == '*') == wild && sni_match(p, name, len))
				return (long)i;
		}
	return -1;
}

/* Whether certificate i serves the same name (an RSA and an ECDSA
 * certificate of one site). */
static bool certs_serves(const struct certs_one *o, const char *name, size_t len)
{
	for (size_t j = 0; j < o->nnames; j++)
		if (sni_match(o->names[j], name, len))
			return true;
	return false;
}

/* SSL_CTX_set_client_hello_cb: the worker's thread, inside the handshake,
 * before a certificate is chosen. OpenSSL recommends this callback over
 * the servername one (SSL_CTX_set_client_hello_cb(3)). */
static int certs_on_hello(SSL *ssl, int *al, void *arg)
{
	const struct certs *s = arg;
	const unsigned char *ext, *name;
	size_t elen, nlen;
	long i;
	int key_types = 0;

	if (!SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &ext, &elen) ||
	    sni_parse(ext, elen, &name, &nlen) < 0) {
		if (!s->strict_sni)
			return SSL_CLIENT_HELLO_SUCCESS;
		certs_fail_last = CERTS_FAIL_SNI;
		*al = SSL_AD_UNRECOGNIZED_NAME;
		return SSL_CLIENT_HELLO_ERROR;
	}
	i = certs_find(s, (const char *)name, nlen, false);
	if (i < 0)
		i = certs_find(s, (const char *)name, nlen, true);
	if (i < 0) {
		if (!s->strict_sni)
			return SSL_CLIENT_HELLO_SUCCESS;
		certs_fail_last = CERTS_FAIL_SNI;
		*al = SSL_AD_UNRECOGNIZED_NAME;
		return SSL_CLIENT_HELLO_ERROR;
	}
	if (i == 0)
		return SSL_CLIENT_HELLO_SUCCESS;        /* the context's own */
	/* the connection's own certificates, in place of the context's:
	 * the one found, and one of each other key type serving the name */
	SSL_certs_clear(ssl);
	for (size_t k = (size_t)i; k < s->n; k++) {
		const struct certs_one *o = &s->one[k];
		int type = EVP_PKEY_get_base_id(o->key);
		int bit = type == EVP_PKEY_RSA ? 1 : type == EVP_PKEY_EC ? 2 : 4;

		if ((key_types & bit) || (k != (size_t)i && !certs_serves(o, (const char *)name, nlen)))
			continue;
		if (SSL_use_cert_and_key(ssl, o->cert, o->key, o->chain, 1) != 1) {
			*al = SSL_AD_INTERNAL_ERROR;
			return SSL_CLIENT_HELLO_ERROR;
		}
		key_types |= bit;
	}
	return SSL_CLIENT_HELLO_SUCCESS;
}

/* SSL_CTX_set_alpn_select_cb: the first protocol of ours the client
 * offers; none in common, no ALPN answer (the client then speaks
 * HTTP/1.1, which every listener serves). It never picks a protocol the
 * configured list (checked by conf.c against what the build serves) does
 * not have. */
static int certs_on_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
			 const unsigned char *in, unsigned int inlen, void *arg)
{
	const struct certs *s = arg;

	(void)ssl;
	for (size_t i = 0; i < s->alpn_len; i += 1u + s->alpn[i]) {
		const unsigned char *ours = s->alpn + i;

		for (unsigned j = 0; j < inlen; j += 1u + in[j]) {
			if (j + 1u + in[j] > inlen)
				break;
			if (in[j] == ours[0] && memcmp(in + j + 1, ours + 1, ours[0]) == 0) {
				*out = in + j + 1;
				*outlen = in[j];
				return SSL_TLSEXT_ERR_OK;
			}
		}
	}
	return SSL_TLSEXT_ERR_NOACK;
}

static void certs_err(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- session tickets --------------------------------------------------------- */

/* The process's own key of period p (a 12-hour slot of the clock): each
 * part an HMAC-SHA256 of the period under the secret, so that keys rotate
 * with the clock without a writer on the workers' path. */
static void certs_key_at(uint64_t p, struct ticketkey *k)
{
	unsigned char msg[9], md[32];
	unsigned mdlen = sizeof(md);

	for (int i = 0; i < 8; i++)
		msg[i] = (unsigned char)(p >> (8 * i));
	msg[8] = 'n';
	HMAC(EVP_sha256(), certs_secret, sizeof(certs_secret), msg, sizeof(msg), md, &mdlen);
	memcpy(k->name, md, 16);
	msg[8] = 'a';
	HMAC(EVP_sha256(), certs_secret, sizeof(certs_secret), msg, sizeof(msg), k->aes, &mdlen);
	msg[8] = 'h';
	HMAC(EVP_sha256(), certs_secret, sizeof(certs_secret), msg, sizeof(msg), k->hmac, &mdlen);
}

/* The process's own keys of the period certs_own_period, this one and the
 * one before, as this thread last derived them. */
static _Thread_local uint64_t certs_own_period = UINT64_MAX;
static _Thread_local struct ticketkey certs_own[2];

/* SSL_CTX_set_tlsext_ticket_key_evp_cb: encrypt (enc 1) with the first
 * key, decrypt (enc 0) with the key the ticket names: 1, or 2 for a key
 * that only decrypts (the client gets a new ticket), 0 for a ticket of no
 * key we have (a full handshake), -1 on error. RFC 5077 4's construction:
 * AES-256-CBC with HMAC-SHA256, as OpenSSL's own keys are used. */
static int certs_on_ticket(SSL *ssl, unsigned char name[16], unsigned char *iv, EVP_CIPHER_CTX *ctx,
			   EVP_MAC_CTX *hctx, int enc)
{
	const struct certs *s = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
	const struct ticketkey *keys = s->keys, *k = NULL;
	size_t n = s->nkeys;
	OSSL_PARAM params[2];
	int rc = 1;

	if (n == 0) {
		uint64_t p = (uint64_t)time(NULL) / CERTS_TICKET_PERIOD;

		/* six HMACs a handshake were most of a resumption's cost:
		 * derived once a period a thread (the secret never changes
		 * once made) */
		if (p != certs_own_period) {
			certs_key_at(p, &certs_own[0]);
			certs_key_at(p - 1, &certs_own[1]);
			certs_own_period = p;
		}
		keys = certs_own;
		n = 2;
	}
	if (enc) {
		k = &keys[0];
		memcpy(name, k->name, 16);
		if (RAND_bytes(iv, EVP_CIPHER_get_iv_length(EVP_aes_256_cbc())) != 1)
			return -1;
		if (EVP_EncryptInit_ex(ctx, EVP_aes_256_cbc(), NULL, k->aes, iv) != 1)
			return -1;
	} else {
		for (size_t i = 0; i < n && !k; i++)
			if (memcmp(name, keys[i].name, 16) == 0) {
				k = &keys[i];
				rc = i == 0 ? 1 : 2;
			}
		if (!k)
			return 0;
		if (EVP_DecryptInit_ex(ctx, EVP_aes_256_cbc(), NULL, k->aes, iv) != 1)
			return -1;
	}
	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0);
	params[1] = OSSL_PARAM_construct_end();
	if (EVP_MAC_init(hctx, k->hmac, sizeof(k->hmac), params) != 1)
		return -1;
	return rc;
}

/* ticket_keys: the file read and parsed into s (NULL path: the
 * process's own keys, its secret made at the first load). 0, or -1 with
 * the reason in err. */
static int certs_tickets(struct certs *s, const struct conf *c, char *err, size_t errlen)
{
	char buf[CERTS_TICKET_FILE_MAX + 1], why[256];
	FILE *f;
	size_t len;
	int line = 0, n;

	if (!*c->tls_ticket_keys) {
		if (!certs_have_secret && RAND_bytes(certs_secret, sizeof(certs_secret)) != 1) {
			certs_err(err, errlen, "[tls]: no random bytes for the session ticket keys");
			return -1;
		}
		certs_have_secret = true;
		return 0;
	}
	f = fopen(c->tls_ticket_keys, "r");
	if (!f) {
		certs_err(err, errlen, "%s:%d: ticket_keys %s: %s", c->path, conf_tls_line(c, "ticket_keys"),
			  c->tls_ticket_keys, strerror(errno));
		return -1;
	}
	len = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	if (len > CERTS_TICKET_FILE_MAX) {
		certs_err(err, errlen, "%s: larger than %d bytes; keep the newest few keys", c->tls_ticket_keys,
			  CERTS_TICKET_FILE_MAX);
		return -1;
	}
	n = ticketkeys_parse(buf, len, s->keys, CERTS_TICKET_KEYS, &line, why, sizeof(why));
	OPENSSL_cleanse(buf, sizeof(buf));
	if (n < 0) {
		certs_err(err, errlen, "%s:%d: %s", c->tls_ticket_keys, line, why);
		return -1;
	}
	s->nkeys = (size_t)n;
	return 0;
}

/* ---- building ------------------------------------------------------------ */

/* Append one line to err (a reason; lines after the first are kept while
 * they fit). */
static void certs_err(char *err, size_t len, const char *fmt, ...)
{
	size_t at = strlen(err);
	va_list ap;

	if (at + 2 >= len)
		return;
	if (at > 0)
		err[at++] = '\n';
	va_start(ap, fmt);
	vsnprintf(err + at, len - at, fmt, ap);
	va_end(ap);
}

/* OpenSSL's reason for the last failure, for a message. */
static const char *certs_ssl_reason(char *buf, size_t len)
{
	unsigned long e = ERR_peek_last_error();

	if (!e)
		snprintf(buf, len, "unknown error");
	else
		ERR_error_string_n(e, buf, len);
	ERR_clear_error();
	return buf;
}

static void certs_one_free(struct certs_one *o)
{
	free(o->file);
	X509_free(o->cert);
	EVP_PKEY_free(o->key);
	sk_X509_pop_free(o->chain, X509_free);
	for (size_t i = 0; i < o->nnames; i++)
		free(o->names[i]);
	free(o->names);
	free(o->names_text);
}

/* The DNS names of o's subjectAltName, lower case. */
static int certs_names_of(struct certs_one *o)
{
	GENERAL_NAMES *gens = X509_get_ext_d2i(o->cert, NID_subject_alt_name, NULL, NULL);
	int n = gens ? sk_GENERAL_NAME_num(gens) : 0;
	size_t textlen = 1;

	o->names = calloc((size_t)(n > 0 ? n : 1), sizeof(*o->names));
	if (!o->names)
		goto fail;
	for (int i = 0; i < n && o->nnames < CERTS_NAMES_MAX; i++) {
		const GENERAL_NAME *g = sk_GENERAL_NAME_value(gens, i);
		const unsigned char *d;
		int dl;
		char *name;

		if (g->type != GEN_DNS)
			continue;
		d = ASN1_STRING_get0_data(g->d.dNSName);
		dl = ASN1_STRING_length(g->d.dNSName);
		if (dl <= 0 || memchr(d, 0, (size_t)dl))
			continue;
		name = strndup((const char *)d, (size_t)dl);
		if (!name)
			goto fail;
		for (char *p = name; *p; p++)
			*p = (char)tolower((unsigned char)*p);
		o->names[o->nnames++] = name;
		textlen += (size_t)dl + 1;
	}
	o->names_text = calloc(1, textlen);
	if (!o->names_text)
		goto fail;
	for (size_t i = 0; i < o->nnames; i++) {
		if (i)
			strcat(o->names_text, ",");
		strcat(o->names_text, o->names[i]);
	}
	GENERAL_NAMES_free(gens);
	return 0;
fail:
	GENERAL_NAMES_free(gens);
	return -1;
}

/* Read one PEM file: its first certificate, the chain after it, its key;
 * checked. 0, or -1 with the reason added to err. */
static int certs_load_one(struct certs_one *o, const char *file, void (*warn)(const char *),
			  char *err, size_t errlen)
{
	char why[256], line[600];
	BIO *b = BIO_new_file(file, "r");
	X509 *x;
	int days = 0, secs = 0;

	memset(o, 0, sizeof(*o));
	o->file = strdup(file);
	if (!b) {
		certs_err(err, errlen, "%s: cannot read: %s", file, certs_ssl_reason(why, sizeof(why)));
		return -1;
	}
	o->cert = PEM_read_bio_X509_AUX(b, NULL, NULL, NULL);
	if (!o->cert) {
		certs_err(err, errlen, "%s: no certificate in it (PEM, BEGIN CERTIFICATE): %s", file,
			  certs_ssl_reason(why, sizeof(why)));
		goto fail;
	}
	o->chain = sk_X509_new_null();
	while (o->chain && (x = PEM_read_bio_X509(b, NULL, NULL, NULL)))
		sk_X509_push(o->chain, x);
	ERR_clear_error();
	BIO_free(b);
	b = BIO_new_file(file, "r");
	o->key = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;
	if (!o->key) {
		certs_err(err, errlen, "%s: no private key in it (PEM, unencrypted): %s", file,
			  certs_ssl_reason(why, sizeof(why)));
		goto fail;
	}
	if (X509_check_private_key(o->cert, o->key) != 1) {
		ERR_clear_error();
		certs_err(err, errlen, "%s: the private key does not match the certificate", file);
		goto fail;
	}
	if (X509_cmp_current_time(X509_get0_notAfter(o->cert)) <= 0) {
		certs_err(err, errlen, "%s: the certificate has expired; renew it", file);
		goto fail;
	}
	if (X509_cmp_current_time(X509_get0_notBefore(o->cert)) >= 0) {
		certs_err(err, errlen, "%s: the certificate is not valid yet (notBefore in the future; is the "
			  "clock right?)", file);
		goto fail;
	}
	{
		struct tm tm;

		if (ASN1_TIME_to_tm(X509_get0_notAfter(o->cert), &tm) == 1)
			o->not_after = timegm(&tm);
	}
	if (certs_names_of(o) < 0) {
		certs_err(err, errlen, "%s: out of memory", file);
		goto fail;
	}
	if (ASN1_TIME_diff(&days, &secs, NULL, X509_get0_notAfter(o->cert)) == 1 &&
	    days < CERTS_WARN_DAYS && warn) {
		snprintf(line, sizeof(line), "%s: the certificate expires in %d days %d hours; renew it", file,
			 days, secs / 3600);
		warn(line);
	}
	if (o->nnames == 0 && warn) {
		snprintf(line, sizeof(line), "%s: the certificate has no DNS name in its subjectAltName: "
			 "no SNI selects it (it serves only as the default)", file);
		warn(line);
	}
	BIO_free(b);
	return 0;
fail:
	BIO_free(b);
	return -1;
}

/* A TLS 1.2 suite that passes a review: forward secrecy (ECDHE or DHE
 * key exchange) and authenticated encryption (AEAD). */
static bool certs_suite_ok(const SSL_CIPHER *ci)
{
	int kx = SSL_CIPHER_get_kx_nid(ci);

	if (kx == NID_kx_any)
		return true;    /* TLS 1.3's: all AEAD, all ephemeral */
	return (kx == NID_kx_ecdhe || kx == NID_kx_dhe) && SSL_CIPHER_is_aead(ci);
}

/* protocols, ciphers, ciphersuites, the options and callbacks into ctx;
 * 0, or -1 with reasons in err. */
static int certs_ctx_setup(struct certs *s, const struct conf *c, char *err, size_t errlen)
{
	SSL_CTX *ctx = s->ctx;
	char why[256], buf[256], *save = NULL, *tok;
	int lo = 0, hi = 0, rc = 0;
	STACK_OF(SSL_CIPHER) *list;

	snprintf(buf, sizeof(buf), "%s", c->tls_protocols);
	for (tok = strtok_r(buf, " ,", &save); tok; tok = strtok_r(NULL, " ,", &save)) {
		int v = strcmp(tok, "TLSv1.3") == 0 ? TLS1_3_VERSION : TLS1_2_VERSION;

		lo = lo == 0 || v < lo ? v : lo;
		hi = v > hi ? v : hi;
	}
	SSL_CTX_set_min_proto_version(ctx, lo ? lo : TLS1_2_VERSION);
	SSL_CTX_set_max_proto_version(ctx, hi ? hi : TLS1_3_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
			    SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_SINGLE_ECDH_USE | SSL_OP_SINGLE_DH_USE);
	/* no record buffers on an idle connection; a write may report what
	 * went out record by record, and be retried from a copy in another
	 * place (path/tls.c stages the gather list) */
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ENABLE_PARTIAL_WRITE |
			 SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	/* a read takes what the socket has, not a record's 5-byte header
	 * and then its body: one system call a record, or one for a
	 * handshake's whole flight (path/tls.h's tls_pending then counts
	 * the bytes held that no socket event will tell of) */
	SSL_CTX_set_read_ahead(ctx, 1);
	SSL_CTX_set_dh_auto(ctx, 1);
	SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"ringproxy", 9);
	/* resumption by tickets, no per-process session cache to lock */
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	if (SSL_CTX_set_cipher_list(ctx, c->tls_ciphers) != 1) {
		certs_err(err, errlen, "%s:%d: ciphers: OpenSSL knows no cipher of '%s': %s", c->path,
			  conf_tls_line(c, "ciphers"), c->tls_ciphers, certs_ssl_reason(why, sizeof(why)));
		rc = -1;
	}
	if (*c->tls_ciphersuites && SSL_CTX_set_ciphersuites(ctx, c->tls_ciphersuites) != 1) {
		certs_err(err, errlen, "%s:%d: ciphersuites: OpenSSL cannot use '%s': %s", c->path,
			  conf_tls_line(c, "ciphersuites"), c->tls_ciphersuites, certs_ssl_reason(why, sizeof(why)));
		rc = -1;
	}
	list = SSL_CTX_get_ciphers(ctx);
	for (int i = 0; rc == 0 && list && i < sk_SSL_CIPHER_num(list); i++) {
		const SSL_CIPHER *ci = sk_SSL_CIPHER_value(list, i);

		if (!certs_suite_ok(ci)) {
			certs_err(err, errlen, "%s:%d: ciphers: %s is refused: it has no forward secrecy or no "
				  "authenticated encryption (ECDHE or DHE with GCM or ChaCha20-Poly1305 pass); leave "
				  "ciphers at its default (Mozilla's intermediate list)", c->path,
				  conf_tls_line(c, "ciphers"), SSL_CIPHER_get_name(ci));
			rc = -1;
		}
	}
	SSL_CTX_set_client_hello_cb(ctx, certs_on_hello, s);
	SSL_CTX_set_app_data(ctx, s);
	SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, certs_on_ticket);
	SSL_CTX_set_alpn_select_cb(ctx, certs_on_alpn, s);
	return rc;
}

/* The ALPN list of [tls] alpn in wire format. */
static void certs_alpn(struct certs *s, const char *alpn)
{
	char buf[128], *save = NULL, *tok;

	snprintf(buf, sizeof(buf), "%s", alpn);
	for (tok = strtok_r(buf, " ,", &save); tok; tok = strtok_r(NULL, " ,", &save)) {
		size_t n = strlen(tok);

		if (n == 0 || n > 255 || s->alpn_len + 1 + n > sizeof(s->alpn))
			continue;
		s->alpn[s->alpn_len++] = (unsigned char)n;
		memcpy(s->alpn + s->alpn_len, tok, n);
		s->alpn_len += n;
	}
}

/* Every file of the glob, loaded and checked. 0, or -1 (reasons in err). */
static int certs_load_all(struct certs *s, const struct conf *c, void (*warn)(const char *), char *err,
			  size_t errlen)
{
	glob_t g;
	int rc = 0, grc = glob(c->tls_certs, GLOB_ERR, NULL, &g);

	if (grc != 0 || g.gl_pathc == 0) {
		certs_err(err, errlen, "%s:%d: certs: no file matches %s", c->path, conf_tls_line(c, "certs"),
			  c->tls_certs);
		if (grc == 0)
			globfree(&g);
		return -1;
	}
	s->one = calloc(g.gl_pathc, sizeof(*s->one));
	if (!s->one) {
		globfree(&g);
		certs_err(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < g.gl_pathc && i < CERTS_MAX; i++) {
		if (certs_load_one(&s->one[s->n], g.gl_pathv[i], warn, err, errlen) < 0) {
			certs_one_free(&s->one[s->n]);
			memset(&s->one[s->n], 0, sizeof(s->one[s->n]));
			rc = -1;
			continue;
		}
		s->n++;
	}
	globfree(&g);
	return rc;
}

/* The first file's certificate is the context's, with the first of each
 * other key type that serves the same names (its RSA or ECDSA twin): a
 * handshake without SNI, or naming them, takes them as they are. */
static int certs_ctx_default(struct certs *s, char *err, size_t errlen)
{
	char why[256];
	int types = 0;

	for (size_t k = 0; k < s->n; k++) {
		const struct certs_one *o = &s->one[k];
		int type = EVP_PKEY_get_base_id(o->key);
		int bit = type == EVP_PKEY_RSA ? 1 : type == EVP_PKEY_EC ? 2 : 4;

		if ((types & bit) || (k > 0 && strcmp(o->names_text, s->one[0].names_text) != 0))
			continue;
		if (SSL_CTX_use_cert_and_key(s->ctx, o->cert, o->key, o->chain, 1) != 1) {
			certs_err(err, errlen, "%s: %s", o->file, certs_ssl_reason(why, sizeof(why)));
			return -1;
		}
		types |= bit;
	}
	return 0;
}

struct certs *certs_new(const struct conf *c, void (*warn)(const char *line), char *err, size_t errlen)
{
	struct certs *s;
	char why[256];
	bool bad;

	err[0] = '\0';
	if (!c->tls_listen || !*c->tls_listen)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (!s) {
		certs_err(err, errlen, "out of memory");
		return NULL;
	}
	atomic_store(&s->refs, 1);
	s->strict_sni = c->tls_strict_sni;
	certs_alpn(s, c->tls_alpn);
	s->ctx = SSL_CTX_new(TLS_server_method());
	if (!s->ctx) {
		certs_err(err, errlen, "%s: [tls]: %s", c->path, certs_ssl_reason(why, sizeof(why)));
		goto fail;
	}
	/* each step runs, so that every reason is said at once */
	bad = certs_ctx_setup(s, c, err, errlen) < 0;
	bad |= certs_load_all(s, c, warn, err, errlen) < 0;
	bad |= certs_tickets(s, c, err, errlen) < 0;
	if (bad)
		goto fail;
	/* the first file's certificate is the context's: a handshake
	 * without SNI, or naming it, takes it as it is */
	if (certs_ctx_default(s, err, errlen) < 0)
		goto fail;
	return s;
fail:
	certs_unref(s);
	return NULL;
}

struct certs *certs_ref(struct certs *s)
{
	if (s)
		atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
	return s;
}

void certs_unref(struct certs *s)
{
	if (!s || atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
		return;
	for (size_t i = 0; i < s->n; i++)
		certs_one_free(&s->one[i]);
	free(s->one);
	SSL_CTX_free(s->ctx);
	OPENSSL_cleanse(s->keys, sizeof(s->keys));
	free(s);
}

SSL_CTX *certs_ctx(const struct certs *s)
{
	return s->ctx;
}

size_t certs_count(const struct certs *s)
{
	return s ? s->n : 0;
}

const char *certs_file(const struct certs *s, size_t i)
{
	return s->one[i].file;
}

const char *certs_names(const struct certs *s, size_t i)
{
	return s->one[i].names_text;
}

time_t certs_not_after(const struct certs *s, size_t i)
{
	return s->one[i].not_after;
}
