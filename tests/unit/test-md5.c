/*
 * test-md5.c -- md5.c: the RFC 1321 test suite's digests, a digest in two
 * parts equal to one of the whole, and the promise workers rely on: a
 * thread given its state (md5_use) digests without allocating.
 */
#include "base/md5.h"
#include "tap.h"

#include <openssl/crypto.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* OpenSSL's allocations, counted through its own hook. */
static atomic_long test_allocs;

static void *test_malloc(size_t n, const char *file, int line)
{
	atomic_fetch_add(&test_allocs, 1);
	return malloc(n);
}

static void *test_realloc(void *p, size_t n, const char *file, int line)
{
	atomic_fetch_add(&test_allocs, 1);
	return realloc(p, n);
}

static void test_free(void *p, const char *file, int line)
{
	free(p);
}

static void test_hex(const unsigned char *d, char *out)
{
	for (int i = 0; i < MD5_LEN; i++)
		sprintf(out + 2 * i, "%02x", d[i]);
}

static void test_vectors(void)
{
	/* RFC 1321, appendix A.5 */
	static const struct { const char *s, *want; } v[] = {
		{ "", "d41d8cd98f00b204e9800998ecf8427e" },
		{ "a", "0cc175b9c0f1b6a831c399e269772661" },
		{ "abc", "900150983cd24fb0d6963f7d28e17f72" },
		{ "message digest", "f96b697d7cb7938d525a2f31aaf161d0" },
		{ "abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b" },
		{ "12345678901234567890123456789012345678901234567890123456789012345678901234567890",
		  "57edf4a22be3c955ac49da2e2107b67a" },
	};
	unsigned char d[MD5_LEN];
	char hex[2 * MD5_LEN + 1], err[256] = "";

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		size_t n = strlen(v[i].s);

		struct iovec whole = { (void *)v[i].s, n };
		struct iovec halves[2] = { { (void *)v[i].s, n / 2 }, { (void *)(v[i].s + n / 2), n - n / 2 } };

		if (!tap_ok(md5_digest(&whole, 1, d, err, sizeof(err)) == 0,
			    "MD5(\"%.20s\") computed", v[i].s)) {
			tap_diag("  %s", err);
			continue;
		}
		test_hex(d, hex);
		tap_is_str(hex, v[i].want, "MD5(\"%.20s\")", v[i].s);
		/* the same string in two parts, cut in the middle */
		memset(d, 0, sizeof(d));
		md5_digest(halves, 2, d, NULL, 0);
		test_hex(d, hex);
		tap_is_str(hex, v[i].want, "MD5(\"%.20s\") in two parts", v[i].s);
	}
}

static const struct iovec test_abc = { (void *)"abc", 3 };

struct test_given {
	struct md5 *m;
	long allocs;
	char hex[2 * MD5_LEN + 1];
};

static void *test_given_thread(void *arg)
{
	struct test_given *g = arg;
	unsigned char d[MD5_LEN];
	long before;

	md5_use(g->m);
	before = atomic_load(&test_allocs);
	for (int i = 0; i < 100; i++)
		md5_digest(&test_abc, 1, d, NULL, 0);
	g->allocs = atomic_load(&test_allocs) - before;
	test_hex(d, g->hex);
	return NULL;
}

static void *test_fresh_thread(void *arg)
{
	long *allocs = arg;
	unsigned char d[MD5_LEN];
	long before = atomic_load(&test_allocs);

	md5_digest(&test_abc, 1, d, NULL, 0);
	*allocs = atomic_load(&test_allocs) - before;
	return NULL;
}

static void test_given(void)
{
	struct test_given g = { 0 };
	char err[256] = "";
	long fresh = 0;
	pthread_t t;

	g.m = md5_new(err, sizeof(err));
	if (!tap_ok(g.m != NULL, "md5_new on the main thread")) {
		tap_diag("  %s", err);
		return;
	}
	pthread_create(&t, NULL, test_fresh_thread, &fresh);
	pthread_join(t, NULL);
	tap_ok(fresh > 0, "a thread without a state makes one on its first digest (%ld allocations)", fresh);
	pthread_create(&t, NULL, test_given_thread, &g);
	pthread_join(t, NULL);
	tap_is_int(g.allocs, 0, "a thread given its state digests 100 times without allocating");
	tap_is_str(g.hex, "900150983cd24fb0d6963f7d28e17f72", "and gets the right digest");
	md5_free(g.m);
	md5_free(NULL);
}

int main(void)
{
	tap_ok(CRYPTO_set_mem_functions(test_malloc, test_realloc, test_free),
	       "OpenSSL allocation hook installed");
	test_vectors();
	test_given();
	return tap_done();
}
