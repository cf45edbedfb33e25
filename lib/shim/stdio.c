/* stdio.c: a rock handed to stdio (fdopen, dprintf, a standard stream) goes behind a relay first; fclose keeps the descriptor table in step. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "shim.h"

/*
 * glibc's stdio reads and writes with its internal calls, which no preload
 * can intercept: bytes moved through a FILE on a rock's descriptor would
 * reach the kernel uncounted, and the rock's peer would take the counts
 * for a protocol violation. So before stdio gets the descriptor, the rock
 * is put behind a relay, as at fork (fork.c): the descriptor becomes one
 * end of a loopback connection, and the relay counts every byte. And
 * glibc's fclose closes with its internal close: the number is forgotten
 * here, as close() forgets it.
 */

/* Lock held. 0: r is relayed (or r failed and its descriptors now read a
 * reset, r freed); 1: r is a plain connection after all; else why not. */
static const char *
relay_or_reset(struct shim_rock *r, int *plain)
{
	*plain = 0;
	if (r->s != NULL)
		return shim_fork_relay_one(r) == 0 ? NULL :
		    "which another call is using";
	if (r->connecting)
		return "which is still connecting";
	if (r->err == 0) {
		*plain = 1;		/* no rock: a plain connection */
		return NULL;
	}
	return shim_fork_relay_failed(r) == 0 ? NULL :
	    "which failed and another call is using";
}

/* Lock not held. fd may be a rock: behind a relay from now on, or a
 * warning (once per rock) that stdio's bytes on it go uncounted. Not in
 * a vfork child: the relay would be made in the parent's memory but in
 * the child's descriptor table. shim_state() resolves libc's calls, as
 * for close(), when another library's constructor comes first. */
void
shim_stdio_relay(int fd, const char *call)
{
	struct shim_rock *r;
	const char *why;
	int err = errno, plain;

	if (shim_busy || !shim_state()->active || !shim_is_rock(fd) ||
	    (shim_engine_running() != NULL && !shim_engine_here()))
		return;
	shim_lock();
	if ((r = shim_rock_of(fd)) == NULL) {
		shim_unlock();
		return;
	}
	shim_rock_hold(r);
	shim_rock_settle_wait(r, -1);
	if (!shim_rock_release(r)) {
		shim_unlock();
		return;
	}
	why = relay_or_reset(r, &plain);
	if (why != NULL && !r->stdio_warned) {
		r->stdio_warned = 1;
		rlog_warn(&shim_state()->log, "%s on rock descriptor %d, %s: "
		    "what stdio moves on it is not counted, and its peer may end "
		    "it", call, fd, why);
	}
	shim_unlock();
	if (why == NULL && !plain)
		shim_fork_relay_start();
	errno = err;
}

SHIM_EXPORT FILE *
fdopen(int fd, const char *mode)
{
	shim_stdio_relay(fd, "fdopen");
	return shim_real.fdopen(fd, mode);
}

SHIM_EXPORT int
vdprintf(int fd, const char *fmt, va_list ap)
{
	shim_stdio_relay(fd, "dprintf");
	return shim_real.vdprintf(fd, fmt, ap);
}

SHIM_EXPORT int
dprintf(int fd, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vdprintf(fd, fmt, ap);
	va_end(ap);
	return n;
}

/* _FORTIFY_SOURCE's forms (glibc declares them only under it). */
int __vdprintf_chk(int, int, const char *, va_list);
int __dprintf_chk(int, int, const char *, ...);

SHIM_EXPORT int
__vdprintf_chk(int fd, int flag, const char *fmt, va_list ap)
{
	shim_stdio_relay(fd, "dprintf");
	if (shim_real.vdprintf_chk == NULL)
		return shim_real.vdprintf(fd, fmt, ap);
	return shim_real.vdprintf_chk(fd, flag, fmt, ap);
}

SHIM_EXPORT int
__dprintf_chk(int fd, int flag, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = __vdprintf_chk(fd, flag, fmt, ap);
	va_end(ap);
	return n;
}

/* The number is forgotten before the stream closes it, as in close(). */
SHIM_EXPORT int
fclose(FILE *f)
{
	int fd;

	if (shim_busy || !shim_state()->active || f == NULL ||
	    (fd = fileno(f)) < 0)
		return shim_real.fclose(f);
	shim_fd_forget(fd);
	return shim_real.fclose(f);
}
