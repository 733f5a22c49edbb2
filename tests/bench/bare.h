/* bare.h -- what tests/bench's two bare programs (bare-respond.c,
 * bare-forward.c) share: their listeners and threads. */
#ifndef RINGPROXY_BENCH_BARE_H
#define RINGPROXY_BENCH_BARE_H

/* Binds THREADS SO_REUSEPORT listeners on HOST:PORT (0: one from the
 * kernel, the same for all), runs FN(listener fd) on a thread each, writes
 * the port to PORT_FILE (NULL: none) and waits for ever. Returns 1 (to be
 * main's exit status) when any of it fails. */
int bare_run(const char *host, int port, int threads, void *(*fn)(void *), const char *port_file);

#endif
