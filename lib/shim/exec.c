/* exec.c: execve and its family: the engine does not survive exec, so the rocks the new image inherits are handed to a keeper that relays them (engine.c). */
#include "config.h"

#include <alloca.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim.h"

extern char **environ;

/*
 * Only an exec that will run is worth the hand-over: after one, this image
 * goes on without an engine (its rocks relayed, its new connections plain),
 * so a search that fails (execvp's PATH walk, a missing file) must not
 * start one. The checks race with the file system; losing the race costs
 * only that.
 */
static int
runnable(const char *path)
{
	return access(path, X_OK) == 0;
}

/* execvp's search: some directory of PATH holds file, executable. */
static int
found_in_path(const char *file)
{
	const char *path = getenv("PATH"), *p, *end;
	char cand[PATH_MAX];
	int len;

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

static void
before_exec(int will_run)
{
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
	before_exec(1);
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

SHIM_EXPORT int
execl(const char *path, const char *arg, ...)
{
	va_list ap;
	char **argv;
	size_t n;

	va_start(ap, arg);
	n = count_args(arg, ap);
	argv = alloca(n * sizeof(*argv));
	collect_args(argv, n, arg, &ap);
	va_end(ap);
	return execve(path, argv, environ);
}

SHIM_EXPORT int
execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	char **argv;
	size_t n;

	va_start(ap, arg);
	n = count_args(arg, ap);
	argv = alloca(n * sizeof(*argv));
	collect_args(argv, n, arg, &ap);
	va_end(ap);
	return execvp(file, argv);
}

/* execle: the environment follows the terminating NULL. */
SHIM_EXPORT int
execle(const char *path, const char *arg, ...)
{
	va_list ap;
	char **argv, *const *envp;
	size_t n;

	va_start(ap, arg);
	n = count_args(arg, ap);
	argv = alloca(n * sizeof(*argv));
	collect_args(argv, n, arg, &ap);
	envp = va_arg(ap, char *const *);
	va_end(ap);
	return execve(path, argv, envp);
}
