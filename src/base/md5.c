/*
 * md5.c -- the digest plumbing behind ring.c's hashes: MD5 from OpenSSL's
 * provider, one context per thread, reused for every digest.
 *
 * Why not EVP_DigestInit_ex2() on a reused EVP_MD_CTX: in OpenSSL 3.0
 * (Debian 12 ships 3.0.x) every init frees the provider's digest context
 * and allocates a new one (md5_prov.c), a malloc/free pair per request
 * key. So this file asks the provider that EVP_MD_fetch() chose for its
 * MD5 implementation (OSSL_PROVIDER_query_operation, public API) and keeps
 * one provider-side context per thread, calling the implementation's
 * init/update/final directly: what EVP does inside, minus the
 * reallocation. The fetched EVP_MD is held so the provider stays loaded.
 *
 * A thread's state is either given to it (md5_use: workers, made on the
 * main thread where an error can stop the start) or made on its first
 * digest and freed at its exit (pthread key destructor).
 */
#include "base/md5.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/core_dispatch.h>
#include <openssl/evp.h>
#include <openssl/provider.h>

struct md5 {
	EVP_MD *md;
	void *algctx;
	OSSL_FUNC_digest_init_fn *init;
	OSSL_FUNC_digest_update_fn *update;
	OSSL_FUNC_digest_final_fn *final;
	OSSL_FUNC_digest_freectx_fn *freectx;
};

static _Thread_local struct md5 *md5_cur;
static pthread_key_t md5_key;
static pthread_once_t md5_once = PTHREAD_ONCE_INIT;
static int md5_key_ok;

void md5_free(struct md5 *m)
{
	if (m != NULL) {
		if (m->algctx != NULL && m->freectx != NULL)
			m->freectx(m->algctx);
		EVP_MD_free(m->md);
		free(m);
	}
}

/* Runs at thread exit so that a state made on first use does not outlive
 * its thread; the main thread's stays reachable through its TLS. */
static void md5_key_free(void *p)
{
	md5_free(p);
}

static void md5_key_init(void)
{
	md5_key_ok = pthread_key_create(&md5_key, md5_key_free) == 0;
}

/* Whether the colon-separated provider name list names has the name. */
static int md5_named(const char *names, const char *name)
{
	size_t len = strlen(name);
	const char *p = names;
	int found = 0;

	while (p != NULL && !found) {
		found = strncasecmp(p, name, len) == 0 &&
			(p[len] == ':' || p[len] == '\0');
		p = strchr(p, ':');
		if (p != NULL)
			p++;
	}
	return found;
}

/* Take the functions md5_digest calls from the implementation's dispatch
 * table and make the provider-side context. 0, or -1 with err. */
static int md5_bind(struct md5 *m, char *err, size_t errlen)
{
	const OSSL_PROVIDER *prov = EVP_MD_get0_provider(m->md);
	const OSSL_ALGORITHM *algs = NULL, *a;
	OSSL_FUNC_digest_newctx_fn *newctx = NULL;
	int nocache = 0, rc = -1;

	snprintf(err, errlen, "MD5 is not available from OpenSSL; enable the default provider (not FIPS-only)");
	if (prov == NULL)
		goto out;
	algs = OSSL_PROVIDER_query_operation(prov, OSSL_OP_DIGEST, &nocache);
	for (a = algs; a != NULL && a->algorithm_names != NULL; a++)
		if (md5_named(a->algorithm_names, EVP_MD_get0_name(m->md)))
			break;
	if (a == NULL || a->algorithm_names == NULL)
		goto unquery;
	for (const OSSL_DISPATCH *f = a->implementation; f->function_id; f++) {
		switch (f->function_id) {
		case OSSL_FUNC_DIGEST_NEWCTX:
			newctx = OSSL_FUNC_digest_newctx(f);
			break;
		case OSSL_FUNC_DIGEST_INIT:
			m->init = OSSL_FUNC_digest_init(f);
			break;
		case OSSL_FUNC_DIGEST_UPDATE:
			m->update = OSSL_FUNC_digest_update(f);
			break;
		case OSSL_FUNC_DIGEST_FINAL:
			m->final = OSSL_FUNC_digest_final(f);
			break;
		case OSSL_FUNC_DIGEST_FREECTX:
			m->freectx = OSSL_FUNC_digest_freectx(f);
			break;
		default:
			break;
		}
	}
	if (newctx == NULL || m->init == NULL || m->update == NULL ||
	    m->final == NULL || m->freectx == NULL)
		goto unquery;
	m->algctx = newctx(OSSL_PROVIDER_get0_provider_ctx(prov));
	if (m->algctx == NULL) {
		snprintf(err, errlen, "out of memory");
		goto unquery;
	}
	rc = 0;
unquery:
	OSSL_PROVIDER_unquery_operation(prov, OSSL_OP_DIGEST, algs);
out:
	return rc;
}

struct md5 *md5_new(char *err, size_t errlen)
{
	struct md5 *m = calloc(1, sizeof(*m));

	if (m == NULL) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	m->md = EVP_MD_fetch(NULL, "MD5", NULL);
	if (m->md == NULL) {
		snprintf(err, errlen, "MD5 is not available from OpenSSL; enable the default provider (not FIPS-only)");
		goto fail;
	}
	if (md5_bind(m, err, errlen) != 0)
		goto fail;
	goto out;
fail:
	md5_free(m);
	m = NULL;
out:
	return m;
}

void md5_use(struct md5 *m)
{
	md5_cur = m;
}

int md5_thread_init(char *err, size_t errlen)
{
	struct md5 *m;
	int rc = -1;

	if (md5_cur != NULL)
		return 0;
	pthread_once(&md5_once, md5_key_init);
	m = md5_new(err, errlen);
	if (m == NULL)
		goto out;
	if (md5_key_ok && pthread_setspecific(md5_key, m) != 0) {
		snprintf(err, errlen, "out of memory");
		md5_free(m);
		goto out;
	}
	md5_cur = m;
	rc = 0;
out:
	return rc;
}

int md5_digest(const struct iovec *v, size_t n, unsigned char out[MD5_LEN],
	       char *err, size_t errlen)
{
	struct md5 *m = md5_cur;
	size_t dlen = 0;
	int rc = -1;

	if (m == NULL) {
		if (md5_thread_init(err, errlen) != 0)
			goto out;
		m = md5_cur;
	}
	if (!m->init(m->algctx, NULL))
		goto failed;
	for (size_t i = 0; i < n; i++)
		if (v[i].iov_len > 0 && !m->update(m->algctx, v[i].iov_base, v[i].iov_len))
			goto failed;
	if (!m->final(m->algctx, out, &dlen, MD5_LEN) || dlen != MD5_LEN) {
failed:
		snprintf(err, errlen, "the MD5 digest failed inside OpenSSL");
		goto out;
	}
	rc = 0;
out:
	return rc;
}
