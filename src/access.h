/*
 * access.h -- the access log ([log] access, access_format): one line per
 * request, formatted by its worker into the worker's own buffer and
 * written when the buffer is full or ACCESS_FLUSH_MS after its first
 * line, so a request costs no syscall and a slow disk never holds one up.
 */
#ifndef RINGPROXY_ACCESS_H
#define RINGPROXY_ACCESS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "access-t.h"

struct request;
struct worker;

#define ACCESS_FLUSH_MS 100
#define ACCESS_BUF (64 * 1024)

/* Main thread: open (or, on a reload, switch to) spec: "off", "stderr"
 * or a file path, appended to. dropped is where lines that could not be
 * written are counted (the proxy's access_log_dropped). 0, or -1 with
 * err (the previous log stays). */
int access_open(const char *spec, _Atomic uint64_t *dropped, char *err, size_t len);
/* Main thread (SIGUSR1): open the file's path again (after a rename, a
 * new file). 1 reopened, 0 nothing to reopen (off, stderr), -1 err. */
int access_reopen(char *err, size_t len);
/* The file path, or NULL when the log is off or on stderr. */
const char *access_path(void);
/* Main thread, at the end: close it. */
void access_close(void);

/* Worker thread: set up / flush and free w's buffer. */
void access_worker_init(struct worker *w);
void access_worker_free(struct worker *w);

/* Worker thread: log the request that just ended (req_end), which took
 * dur microseconds. */
void access_log(struct request *rq, int64_t dur);

#endif
