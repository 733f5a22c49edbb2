/*
 * fuzz-h2.c -- libFuzzer target for the HTTP/2 side: arbitrary frames
 * after the client preface, fed to a real connection of a worker built
 * in-process (its event loop run here, on this thread) through the
 * project's own code: front.c takes the connection and hands it to h2.c
 * at the preface, h2.c's nghttp2 session and callbacks make requests of
 * the streams (request.c, key, ring walk, forward.c to a backend that
 * refuses connections: each request ends in the proxy's own 502), and
 * its output goes back through the socket. A crash, an ASan or UBSan
 * report, or a connection still open after the client left is a finding
 * (the last checked with FUZZ_CHECK: every connection must have given
 * its struct back).
 *
 * Input: the bytes after the preface and an empty SETTINGS, written to
 * the proxy's end of a socket pair in one go; the loop then runs until
 * the proxy is quiet, the client's end is closed, and the loop runs
 * again until the connection is gone.
 */
#include "backend/snapshot.h"
#include "base/md5.h"
#include "config/conf.h"
#include "path/conn.h"
#include "path/forward.h"
#include "path/front.h"
#include "path/proxy-t.h"
#include "path/worker.h"

#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define FUZZ_CHECK(cond) do { if (!(cond)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One backend on a port nothing listens on: a connect is refused at once. */
static const char fuzz_conf[] =
	"[proxy]\nretries = 0\nmax_headers = 32\nmax_head_size = 4k\n"
	"[h2]\nmax_concurrent_streams = 8\nmax_glitches = 50\n"
	"[cache]\nsize = 0\n"
	"[backend c0]\nurl = http://127.0.0.1:1\n";

static void fuzz_start(struct worker *w)
{
	(void)w;
}

static void fuzz_stop(struct worker *w)
{
	(void)w;
}

static const struct worker_ops fuzz_ops = {
	.start = fuzz_start,
	.accept = front_accept,
	.drain = front_drain,
	.close = front_close,
	.close_idle = fwd_close,
	.stop = fuzz_stop,
	.end = fuzz_stop,
};

static struct worker *fuzz_worker(void)
{
	static struct worker *w;
	static struct proxy p;
	struct conf_errors errs = { 0 };
	struct snapshot *s;
	struct conf *c;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char err[256];
	int lfd;

	if (w)
		return w;
	c = conf_load_string("fuzz.ini", fuzz_conf, &errs);
	conf_errors_free(&errs);
	FUZZ_CHECK(c != NULL);
	s = snapshot_new(c, 1, err, sizeof(err));
	FUZZ_CHECK(s != NULL);
	atomic_store(&p.max_conns, 1000);
	lfd = conn_listen((struct sockaddr *)&a, sizeof(a), err, sizeof(err));
	FUZZ_CHECK(lfd >= 0);
	{
		struct worker_listener l = { .fd = lfd, .kind = 0 };   /* plain */

		w = worker_new(&p, 0, &l, 1, s, &fuzz_ops, err, sizeof(err));
	}
	FUZZ_CHECK(w != NULL);
	md5_use(w->md5);
	return w;
}

/* Run the loop until a pass did nothing for the client to read, at most
 * rounds passes; what the proxy wrote is read and dropped. */
static void fuzz_run(struct worker *w, int client, int rounds)
{
	char buf[65536];

	for (int i = 0; i < rounds; i++) {
		ssize_t n;
		bool got = false;

		event_base_loop(w->base, EVLOOP_NONBLOCK);
		while (client >= 0 && (n = recv(client, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
			got = true;
		if (!got && i > 4)
			break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\4\0\0\0\0\0";
	struct worker *w = fuzz_worker();
	struct sockaddr_storage peer = { 0 };
	int sv[2];
	char *in;

	if (size > 60000)
		return 0;
	FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
	((struct sockaddr_in *)&peer)->sin_family = AF_INET;
	atomic_fetch_add(&w->proxy->nconns, 1);
	FUZZ_CHECK(front_accept(w, sv[0], &peer, 0) == 0);
	in = malloc(sizeof(preface) - 1 + size);
	memcpy(in, preface, sizeof(preface) - 1);
	if (size)
		memcpy(in + sizeof(preface) - 1, data, size);
	/* the socket pair's buffer holds it: at most 60 kB */
	(void)!send(sv[1], in, sizeof(preface) - 1 + size, MSG_NOSIGNAL);
	free(in);
	fuzz_run(w, sv[1], 200);
	close(sv[1]);
	fuzz_run(w, -1, 50);
	/* the client left: its connection (and every stream) is gone */
	FUZZ_CHECK(atomic_load(&w->proxy->nconns) == 0);
	return 0;
}
