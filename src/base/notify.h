/*
 * notify.h -- the systemd notification protocol (sd_notify) without a
 * dependency on libsystemd: one datagram to $NOTIFY_SOCKET per call. A
 * no-op when the variable is unset. Main thread.
 */
#ifndef RINGPROXY_NOTIFY_H
#define RINGPROXY_NOTIFY_H

/* Send "KEY=VALUE\n..." lines. Returns 0, or -1 (logged once). */
__attribute__((format(printf, 1, 2)))
int notify_send(const char *fmt, ...);

/* CLOCK_MONOTONIC in microseconds, for RELOADING=1's MONOTONIC_USEC. */
unsigned long long notify_monotonic_usec(void);

#endif
