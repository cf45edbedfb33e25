/* exec.c: execve and its family (execveat, fexecve, the exec[lv]* forms): the engine does not survive exec, so the rocks the new image inherits are handed to a keeper that relays them (engine.c). */
#include "config.h"

#include <alloca.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shim.h"

extern char **environ;

/*
 * Only an exec that will run is worth the hand-over: after one, this image
 * goes on without an engine (its rocks relayed, its new connections plain),
 * so a search that fails (execvp's PATH walk, a missing file, a directory)
 * must not start one. The checks race with the file system; losing the
 * race costs only that.
 */
static int
runnable_at(int dirfd, const char *path, int flags)
{
	struct stat st;

	if (path == NULL || (path[0] == '\0' && !(flags & AT_EMPTY_PATH)) ||
	    fstatat(dirfd, path, &st, flags) != 0)
		return 0;
	if (!S_ISREG(st.st_mode))
		return 0;
	if (faccessat(dirfd, path, X_OK, AT_EACCESS | (flags & AT_EMPTY_PATH)) == 0)
		return 1;
	/* Without faccessat2 (Linux before 5.8) glibc cannot check an empty
	 * path: the mode bits say enough. */
	return (errno == EINVAL || errno == ENOSYS) && (st.st_mode & 0111) != 0;
}

static int
runnable(const char *path)
{
	return runnable_at(AT_FDCWD, path, 0);
}

/* execvp's search: some directory of PATH holds file, executable. */
static int
found_in_path(const char *file)
{
	const char *path = getenv("PATH"), *p, *end;
	char cand[PATH_MAX];
	int len;

	if (file[0] == '\0')
		return 0;
	if (strchr(file, '/') != NULL)
		return runnable(file);
	if (path == NULL)
		path = "/bin:/usr/bin";
	for (p = path;; p = end + 1) {
		end = strchrnul(p, ':');
		len = (int)(end - p);
		/* An empty entry is the working directory. */
		if (snprintf(cand, sizeof(cand), "%.*s/%s", len > 0 ? len : 1,
		    len > 0 ? p : ".", file) < (int)sizeof(cand) && runnable(cand))
			return 1;
		if (*end == '\0')
			return 0;
	}
}

/* An exec from another library's constructor may come before ours,
 * which resolves the real calls. */
static void
before_exec(int will_run)
{
	if (shim_real.execve == NULL)
		shim_resolve();
	if (will_run && !shim_busy)
		shim_engine_exec();
}

SHIM_EXPORT int
execve(const char *path, char *const argv[], char *const envp[])
{
	before_exec(runnable(path));
	return shim_real.execve(path, argv, envp);
}

SHIM_EXPORT int
execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
    int flags)
{
	before_exec(runnable_at(dirfd, path, flags &
	    (AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW)));
	if (shim_real.execveat == NULL)		/* an older libc's */
		return (int)syscall(SYS_execveat, dirfd, path, argv, envp, flags);
	return shim_real.execveat(dirfd, path, argv, envp, flags);
}

SHIM_EXPORT int
execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

SHIM_EXPORT int
execvpe(const char *file, char *const argv[], char *const envp[])
{
	before_exec(found_in_path(file));
	return shim_real.execvpe(file, argv, envp);
}

SHIM_EXPORT int
execvp(const char *file, char *const argv[])
{
	before_exec(found_in_path(file));
	return shim_real.execvp(file, argv);
}

SHIM_EXPORT int
fexecve(int fd, char *const argv[], char *const envp[])
{
	before_exec(runnable_at(fd, "", AT_EMPTY_PATH));
	return shim_real.fexecve(fd, argv, envp);
}

/* The list forms: their arguments as a vector (on the stack, as exec must
 * work in a forked child of a threaded program), for the calls above. */
static size_t
count_args(const char *arg, va_list ap)
{
	va_list aq;
	size_t n = 1;

	va_copy(aq, ap);
	for (; arg != NULL; arg = va_arg(aq, const char *))
		n++;
	va_end(aq);
	return n;	/* with the terminating NULL */
}

static void
collect_args(char **argv, size_t n, const char *arg, va_list *ap)
{
	size_t i;

	argv[0] = (char *)(uintptr_t)arg;
	for (i = 1; i < n; i++)
		argv[i] = va_arg(*ap, char *);
}

/* argv: the list from arg on, in the caller's frame. */
#define ARGV_FROM_LIST(argv, arg, ap) do {				\
	size_t n_ = count_args((arg), (ap));				\
									\
	(argv) = alloca(n_ * sizeof(*(argv)));				\
	collect_args((argv), n_, (arg), &(ap));				\
} while (0)

SHIM_EXPORT int
execl(const char *path, const char *arg, ...)
{
	va_list ap;
	char **argv;

	va_start(ap, arg);
	ARGV_FROM_LIST(argv, arg, ap);
	va_end(ap);
	return execve(path, argv, environ);
}

SHIM_EXPORT int
execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	char **argv;

	va_start(ap, arg);
	ARGV_FROM_LIST(argv, arg, ap);
	va_end(ap);
	return execvp(file, argv);
}

/* execle: the environment follows the terminating NULL. */
SHIM_EXPORT int
execle(const char *path, const char *arg, ...)
{
	va_list ap;
	char **argv, *const *envp;

	va_start(ap, arg);
	ARGV_FROM_LIST(argv, arg, ap);
	envp = va_arg(ap, char *const *);
	va_end(ap);
	return execve(path, argv, envp);
}
