/*
 * log.h -- leveled logging to stderr, one write(2) per line so lines from
 * several threads never interleave. Any thread may call. Not for the
 * request path's steady state: only for events (errors, reloads, starts).
 */
#ifndef RINGPROXY_LOG_H
#define RINGPROXY_LOG_H

#include <stddef.h>

enum log_level { LOG_ERROR = 0, LOG_WARN, LOG_INFO, LOG_DEBUG };

/* Messages above level are dropped. Default LOG_INFO. */
void log_set_level(enum log_level level);
enum log_level log_get_level(void);
/* Parse "error", "warn", "info", "debug"; -1 if unknown. */
int log_level_parse(const char *s);

/* Send log lines to path (appending) instead of stderr, by putting the
 * file on fd 2; NULL or "" goes back to nothing (stderr stays as it is).
 * log_reopen() opens the same path again, for log rotation (SIGUSR1).
 * Main thread. 0, or -1 with err. */
int log_open(const char *path, char *err, size_t errlen);
int log_reopen(char *err, size_t errlen);
/* The log file in use, or NULL when logging goes to the original stderr. */
const char *log_file_path(void);

/* libevent's own messages through log_msg ("libevent: ..."), rate
 * limited. Call once, before libevent is used. */
void log_route_libevent(void);

__attribute__((format(printf, 2, 3)))
void log_msg(enum log_level level, const char *fmt, ...);

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
