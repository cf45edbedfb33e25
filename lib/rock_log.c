/* rock_log.c: format and write log lines without disturbing the host program. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "rock_log.h"

static const char *
level_name(enum rock_log_level level)
{
	switch (level) {
	case ROCK_LOG_ERROR:
		return "error";
	case ROCK_LOG_WARN:
		return "warning";
	case ROCK_LOG_INFO:
		return "info";
	case ROCK_LOG_DEBUG:
		return "debug";
	}
	return "?";
}

/* Raw system calls: in the preloaded library write() may be our own hook,
 * and the program may have closed or reused any descriptor we kept. */
static void
write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = syscall(SYS_write, fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		buf += n;
		len -= (size_t)n;
	}
}

static long
open_file(const char *path)
{
	return syscall(SYS_openat, AT_FDCWD, path,
	    O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0644);
}

static void
write_file(const char *path, const char *buf, size_t len)
{
	long fd = open_file(path);

	if (fd < 0)
		return;
	write_all((int)fd, buf, len);
	syscall(SYS_close, fd);
}

/* A log file that cannot be written would swallow every warning: said
 * once, on stderr and syslog, and the default sink is used instead. */
static void
check_file(struct rock_log *log)
{
	long fd = open_file(log->path);
	int err = errno;

	if (fd >= 0) {
		syscall(SYS_close, fd);
		return;
	}
	log->sink = ROCK_LOG_SYSLOG;
	log->warn_to_stderr = 1;
	rock_log_emit(log, ROCK_LOG_WARN, __func__, "ROCK_LOG=\"%s\" ignored "
	    "(cannot write: %s); logging to syslog, warnings to stderr too",
	    log->path, strerror(err));
}

void
rock_log_configure(struct rock_log *log, const struct rock_config *cfg,
    const char *ident)
{
	log->sink = cfg->log_sink;
	log->debug = cfg->debug;
	log->ident = ident;
	log->facility = LOG_USER;
	log->to_syslog = NULL;
	/* A user who sets nothing still sees bad settings reported on the
	 * terminal; ROCK_LOG, once set, is the single place for everything. */
	log->warn_to_stderr = cfg->log_sink == ROCK_LOG_SYSLOG;
	log->path = cfg->log_path;
	log->pid = 0;
	if (log->sink == ROCK_LOG_FILE)
		check_file(log);
}

static size_t
format_prefix(char *buf, size_t size, const struct rock_log *log,
    enum rock_log_level level, const char *func)
{
	struct timespec ts;
	struct tm tm;
	int n;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s[%ld]: %s: %s: ",
	    tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
	    tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000L, log->ident,
	    (long)(log->pid != 0 ? log->pid : getpid()), level_name(level), func);
	return n < 0 ? 0 : (size_t)n >= size ? size - 1 : (size_t)n;
}

/* No openlog(): the ident and options belong to the program. */
static void
to_syslog(const struct rock_log *log, int priority, const char *line)
{
	if (log->to_syslog != NULL)
		log->to_syslog(priority, line);
	else
		syslog(priority, "%s", line);
}

void
rock_log_emit(const struct rock_log *log, enum rock_log_level level,
    const char *func, const char *fmt, ...)
{
	char line[1024];
	size_t off, len;
	int saved = errno;
	va_list ap;

	if (level == ROCK_LOG_DEBUG && !log->debug)
		return;
	off = format_prefix(line, sizeof(line) - 1, log, level, func);
	va_start(ap, fmt);
	len = off + (size_t)vsnprintf(line + off, sizeof(line) - off - 1, fmt, ap);
	va_end(ap);
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2;
	line[len++] = '\n';
	line[len] = '\0';

	if (log->sink == ROCK_LOG_SYSLOG) {
		to_syslog(log, log->facility | (int)level, strchr(line, ' ') + 1);
		if (level <= ROCK_LOG_WARN && log->warn_to_stderr)
			write_all(STDERR_FILENO, line, len);
	} else if (log->sink == ROCK_LOG_STDERR) {
		write_all(STDERR_FILENO, line, len);
	} else {
		write_file(log->path, line, len);
	}
	errno = saved;
}

static int64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
rock_log_limit_flush(const struct rock_log *log, struct rock_log_limit *l)
{
	int64_t now = mono_ms();

	if (l->window_ms != 0 && now - l->window_ms < ROCK_LOG_LIMIT_WINDOW_MS)
		return;
	if (l->suppressed > 0)
		rock_log_emit(log, ROCK_LOG_INFO, "log_limit", "%lu more %s "
		    "lines left out in the last %lld s", l->suppressed,
		    l->what, (long long)(now - l->window_ms) / 1000);
	l->window_ms = now;
	l->lines = 0;
	l->suppressed = 0;
}

int
rock_log_limit_pass(const struct rock_log *log, struct rock_log_limit *l)
{
	rock_log_limit_flush(log, l);
	if (l->lines < ROCK_LOG_LIMIT_LINES) {
		l->lines++;
		return 1;
	}
	l->suppressed++;
	return 0;
}
