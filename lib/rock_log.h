/* rock_log.h: the library's log, written to syslog, stderr or a file. */
#ifndef ROCK_LOG_H
#define ROCK_LOG_H

#include <limits.h>
#include <sys/types.h>
#include <stdint.h>

#include "rock_config.h"

enum rock_log_level {
	ROCK_LOG_ERROR = 3,
	ROCK_LOG_WARN = 4,
	ROCK_LOG_INFO = 6,
	ROCK_LOG_DEBUG = 7
};

struct rock_log {
	enum rock_log_sink sink;
	int debug;			/* emit ROCK_LOG_DEBUG lines */
	int warn_to_stderr;		/* sink is the default: warnings go to stderr too */
	const char *path;		/* the configuration's log_path: outlives us */
	const char *ident;		/* "librock", "rockd", ... */
	/* Passed with each line: a daemon's own (rockd: LOG_DAEMON), or
	 * LOG_USER, which rock_log_configure sets, for a program's librock. */
	int facility;
	/* NULL: syslog(3). A test records what would be sent. */
	void (*to_syslog)(int priority, const char *line);
	/* Set by a process that will not fork again (rockd, once detached):
	 * a getpid() per line saved. 0: asked per line, as a program's
	 * librock must (its children log their own). */
	pid_t pid;
};

/* Take the sink and debug flag from a configuration. */
void rock_log_configure(struct rock_log *log, const struct rock_config *cfg,
    const char *ident);

/* Write one line; keeps errno; never touches stdio or signal state. */
void rock_log_emit(const struct rock_log *log, enum rock_log_level level,
    const char *func, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A budget for lines that strangers can cause (hostile handshakes,
 * refusals): a burst per window, then a count of what was left out. */
struct rock_log_limit {
	const char *what;		/* names the lines in the count */
	int64_t window_ms;		/* start of the current window */
	unsigned lines;			/* written in it */
	unsigned long suppressed;	/* left out in it */
};
#define ROCK_LOG_LIMIT_LINES 20
#define ROCK_LOG_LIMIT_WINDOW_MS 10000

/* 1: write the line (a new window may start here). */
int rock_log_limit_pass(const struct rock_log *log, struct rock_log_limit *l);
/* Once the window is over: how many lines were left out in it, if any;
 * a new window starts. Called from a timer, so the count is never held
 * back until the next stranger comes. */
void rock_log_limit_flush(const struct rock_log *log, struct rock_log_limit *l);

#define rlog_error(log, ...) \
	rock_log_emit((log), ROCK_LOG_ERROR, __func__, __VA_ARGS__)
#define rlog_warn(log, ...) \
	rock_log_emit((log), ROCK_LOG_WARN, __func__, __VA_ARGS__)
#define rlog_info(log, ...) \
	rock_log_emit((log), ROCK_LOG_INFO, __func__, __VA_ARGS__)
/* A line within a budget (struct rock_log_limit). */
#define rlog_limited(log, lim, level, ...) do { \
	if (rock_log_limit_pass((log), (lim))) \
		rock_log_emit((log), (level), __func__, __VA_ARGS__); \
} while (0)
/* The test keeps the formatting cost off every hot path when debug is off. */
#define rlog_debug(log, ...) do { \
	if ((log)->debug) \
		rock_log_emit((log), ROCK_LOG_DEBUG, __func__, __VA_ARGS__); \
} while (0)

#endif
