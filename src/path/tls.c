/*
 * tls.c -- a client connection's TLS on the worker's thread: OpenSSL's
 * record layer on the connection's own non-blocking socket (SSL_set_fd),
 * driven by front.c from the connection's events. Errors follow
 * SSL_get_error(3): the thread's error queue is cleared before each call,
 * WANT_READ and WANT_WRITE mean "call again when the socket is ready",
 * and a connection that failed gets no close_notify.
 *
 * Output: the queue's slices are staged into records of up to 16 KiB (a
 * thread-local copy, so many small slices of a response head and a
 * small body make one record and one system call, not one each); a slice
 * of 16 KiB or more goes out from where it is. A write OpenSSL could not
 * finish is retried with the same bytes at the head of the queue, from
 * wherever they are (SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER), and never
 * fewer of them: the queue only grows at its tail until it advances.
 */
#include "path/tls.h"

#include <errno.h>
#include <openssl/err.h>
#include <string.h>

/* One TLS record's plaintext at most (RFC 8446 5.1). */
#define TLS_STAGE 16384

static _Thread_local unsigned char tls_stage[TLS_STAGE];
static _Thread_local enum certs_fail tls_last_why;

SSL *tls_new(struct certs *set, int fd)
{
	SSL *ssl = SSL_new(certs_ctx(set));

	if (!ssl)
		goto fail;
	if (SSL_set_fd(ssl, fd) != 1) {
		SSL_free(ssl);
		goto fail;
	}
	SSL_set_accept_state(ssl);
	return ssl;
fail:
	ERR_clear_error();
	return NULL;
}

/* What the error queue says about a failed handshake. */
static enum certs_fail tls_classify(int e)
{
	enum certs_fail f = certs_failure();
	unsigned long err = ERR_peek_error();

	if (f != CERTS_FAIL_NONE)
		return f;
	/* the peer went away mid-handshake: a reset, or (with
	 * SSL_OP_IGNORE_UNEXPECTED_EOF) an EOF or close_notify, which is how
	 * a browser drops the spare connection it opened in parallel */
	if ((e == SSL_ERROR_SYSCALL || e == SSL_ERROR_ZERO_RETURN) && err == 0)
		return CERTS_FAIL_NONE;
	switch (ERR_GET_REASON(err)) {
	case SSL_R_NO_SHARED_CIPHER:
	case SSL_R_UNSUPPORTED_PROTOCOL:
	case SSL_R_VERSION_TOO_LOW:
	case SSL_R_VERSION_TOO_HIGH:
	case SSL_R_NO_SHARED_SIGNATURE_ALGORITHMS:
	case SSL_R_NO_SUITABLE_SIGNATURE_ALGORITHM:
	case SSL_R_NO_SHARED_GROUPS:
	case SSL_R_NO_CIPHERS_AVAILABLE:
		return CERTS_FAIL_CIPHER;
	case SSL_R_NO_APPLICATION_PROTOCOL:
		return CERTS_FAIL_ALPN;
	default:
		return CERTS_FAIL_PROTOCOL;
	}
}

int tls_handshake(SSL *ssl)
{
	int r, e;

	ERR_clear_error();
	r = SSL_do_handshake(ssl);
	if (r == 1)
		return 1;
	e = SSL_get_error(ssl, r);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
		return 0;
	tls_last_why = tls_classify(e);
	ERR_clear_error();
	return -1;
}

enum certs_fail tls_why(void)
{
	return tls_last_why;
}

/* errno for a failed read or write: the socket's own, or EPROTO for
 * TLS gone wrong (a bad record, a fatal alert). After either no more is
 * written, close_notify included (SSL_get_error(3): no SSL_shutdown
 * after SSL_ERROR_SYSCALL or SSL_ERROR_SSL); a reset peer would only
 * answer it with EPIPE. */
static void tls_errno(SSL *ssl, int e, int saved)
{
	SSL_set_shutdown(ssl, SSL_get_shutdown(ssl) | SSL_SENT_SHUTDOWN);
	if (e == SSL_ERROR_SYSCALL && saved != 0 && saved != EAGAIN)
		errno = saved;
	else if (e == SSL_ERROR_SYSCALL)
		errno = ECONNRESET;
	else
		errno = EPROTO;
	ERR_clear_error();
}

ssize_t tls_recv(SSL *ssl, void *buf, size_t len)
{
	size_t n;
	int e;

	ERR_clear_error();
	errno = 0;
	if (SSL_read_ex(ssl, buf, len, &n) == 1)
		return (ssize_t)n;
	e = SSL_get_error(ssl, 0);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		errno = EAGAIN;
		return -1;
	}
	if (e == SSL_ERROR_ZERO_RETURN) {
		/* close_notify, or an EOF (SSL_OP_IGNORE_UNEXPECTED_EOF) */
		return 0;
	}
	tls_errno(ssl, e, errno);
	return -1;
}

/* Advance q past n bytes written. */
static void tls_advance(struct outq *q, size_t n)
{
	q->sent += n;
	while (n > 0 && q->idx < q->cnt) {
		struct iovec *v = &q->iov[q->idx];

		if (n >= v->iov_len) {
			n -= v->iov_len;
			q->idx++;
		} else {
			v->iov_base = (char *)v->iov_base + n;
			v->iov_len -= n;
			n = 0;
		}
	}
}

int tls_flush(SSL *ssl, struct outq *q)
{
	while (q->idx < q->cnt) {
		const struct iovec *v = &q->iov[q->idx];
		const void *p = v->iov_base;
		size_t len = v->iov_len, wrote;
		int e;

		if (len < TLS_STAGE && q->idx + 1 < q->cnt) {
			/* several slices: one record of as many as fit */
			len = 0;
			for (int i = q->idx; i < q->cnt && len < TLS_STAGE; i++) {
				size_t take = q->iov[i].iov_len;

				if (take > TLS_STAGE - len)
					take = TLS_STAGE - len;
				memcpy(tls_stage + len, q->iov[i].iov_base, take);
				len += take;
			}
			p = tls_stage;
		}
		ERR_clear_error();
		errno = 0;
		if (SSL_write_ex(ssl, p, len, &wrote) != 1) {
			e = SSL_get_error(ssl, 0);
			if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ)
				return 0;
			tls_errno(ssl, e, errno);
			return -1;
		}
		tls_advance(q, wrote);
	}
	q->idx = q->cnt = 0;
	return 1;
}

const char *tls_alpn(const SSL *ssl, size_t *len)
{
	const unsigned char *p = NULL;
	unsigned n = 0;

	SSL_get0_alpn_selected(ssl, &p, &n);
	*len = n;
	return n ? (const char *)p : NULL;
}

void tls_shutdown(SSL *ssl)
{
	/* after a fatal error the session is in its error state and
	 * SSL_shutdown refuses; after a clean run it queues close_notify
	 * and tries to send it once, never waiting for the peer's */
	if (SSL_is_init_finished(ssl) && !(SSL_get_shutdown(ssl) & SSL_SENT_SHUTDOWN)) {
		ERR_clear_error();
		SSL_shutdown(ssl);
	}
	/* nothing more is written, whatever happened: the socket goes */
	SSL_set_shutdown(ssl, SSL_get_shutdown(ssl) | SSL_SENT_SHUTDOWN);
	ERR_clear_error();
}

void tls_free(SSL *ssl)
{
	if (!ssl)
		return;
	tls_shutdown(ssl);
	SSL_free(ssl);
}
