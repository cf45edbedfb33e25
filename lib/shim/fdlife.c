/* fdlife.c: close(), dup*() and fcntl(F_DUPFD*): keep the descriptor tables in step with the kernel's. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <unistd.h>

#include "shim.h"

/* Lock not held. fd stops naming whatever rock it named. */
static void
forget(int fd)
{
	struct shim_rock *r;

	shim_lock();
	if ((r = shim_rock_of(fd)) != NULL)
		shim_rock_drop_fd(r, fd);
	shim_epoll_forget_epfd(fd);
	shim_unlock();
}

/* Lock not held. Before fd is closed: forget before closing, so that a
 * number reused by another thread in between is at worst unknown, which
 * is classified by asking the kernel. */
void
shim_fd_forget(int fd)
{
	if (shim_is_rock(fd) || shim_nregs_hint())
		forget(fd);
	shim_fd_set(fd, SHIM_FD_UNKNOWN, 0);
}

SHIM_EXPORT int
close(int fd)
{
	if (shim_busy || !shim_state()->active)
		return shim_real.close(fd);
	shim_listener_forget(fd);
	shim_fd_forget(fd);
	return shim_real.close(fd);
}

/* Lock not held. A new descriptor fd2 names what fd names. A rock takes
 * SHIM_ROCK_FDS names at most: past that the copy is refused. */
static int
share(int fd, int fd2)
{
	struct shim_rock *r;
	int ok = 1;

	if (!shim_is_rock(fd)) {
		shim_fd_copy(fd, fd2);
		return 0;
	}
	shim_lock();
	if ((r = shim_rock_of(fd)) != NULL && r->nfds < SHIM_ROCK_FDS) {
		r->fds[r->nfds++] = fd2;
		shim_rock_bind(fd2, r);
	} else if (r != NULL) {
		ok = 0;
	} else {
		shim_fd_copy(fd, fd2);
	}
	shim_unlock();
	return ok ? 0 : -1;
}

static int
refuse(int fd2)
{
	shim_real.close(fd2);
	errno = EMFILE;
	return -1;
}

/* Copies of a rock are made under the lock: a swap in between would put
 * the new socket under the old numbers but not under the copy. */
static int
dup_rock(int fd, int cmd, int arg)
{
	int r;

	shim_lock();
	r = cmd < 0 ? shim_real.dup(fd) : shim_real.fcntl(fd, cmd, arg);
	shim_unlock();
	if (r < 0)
		return r;
	return share(fd, r) == 0 ? r : refuse(r);
}

SHIM_EXPORT int
dup(int fd)
{
	int r;

	if (shim_is_rock(fd))
		return dup_rock(fd, -1, 0);
	r = shim_real.dup(fd);
	if (r < 0 || shim_busy || !shim_state()->active)
		return r;
	return share(fd, r) == 0 ? r : refuse(r);
}

static int
dup_onto(int fd, int fd2, int flags, int three)
{
	int r;

	if (shim_busy || !shim_state()->active || fd == fd2)
		return three ? shim_real.dup3(fd, fd2, flags) : shim_real.dup2(fd, fd2);
	if (fcntl(fd, F_GETFD) < 0)
		return -1;	/* EBADF, and fd2 stays open */
	/* stdin, stdout and stderr are stdio's streams. */
	if (fd2 <= STDERR_FILENO)
		shim_stdio_relay(fd, "dup2 onto a standard stream");
	if (shim_is_rock(fd2) || shim_nregs_hint())
		forget(fd2);
	shim_listener_forget(fd2);
	if (shim_is_rock(fd))
		shim_lock();
	r = three ? shim_real.dup3(fd, fd2, flags) : shim_real.dup2(fd, fd2);
	if (shim_is_rock(fd))
		shim_unlock();
	if (r < 0)
		return r;
	return share(fd, fd2) == 0 ? r : refuse(fd2);
}

SHIM_EXPORT int
dup2(int fd, int fd2)
{
	return dup_onto(fd, fd2, 0, 0);
}

SHIM_EXPORT int
dup3(int fd, int fd2, int flags)
{
	return dup_onto(fd, fd2, flags, 1);
}

static int
do_fcntl(int fd, int cmd, void *arg)
{
	int r;

	if ((cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) && shim_is_rock(fd))
		return dup_rock(fd, cmd, (int)(intptr_t)arg);
	r = shim_real.fcntl(fd, cmd, arg);

	if (r >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) &&
	    !shim_busy && shim_state()->active)
		return share(fd, r) == 0 ? r : refuse(r);
	return r;
}

/* glibc passes the third argument as a pointer-sized value whatever it is. */
SHIM_EXPORT int
fcntl(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return do_fcntl(fd, cmd, arg);
}

/* The name newer glibc headers give fcntl. */
SHIM_EXPORT int fcntl64(int fd, int cmd, ...) __attribute__((alias("fcntl")));
