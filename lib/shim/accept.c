/* accept.c: accept(), accept4(): accepted TCP sockets carry the options; with ROCK_SERVE=1 they may be rocks (listener.c, serve.c). */
#include "config.h"

#include <errno.h>

#include "shim.h"

void
shim_accepted(int lfd, int fd)
{
	const struct shim_state *st = shim_state();
	unsigned entry = shim_fd_get(lfd);
	int saved = errno;

	switch (shim_fd_state_of(entry)) {
	case SHIM_FD_LISTEN_OURS:
		rlog_debug(&st->log, "fd %d: accepted on fd %d, inherits its "
		    "keepalive options", fd, lfd);
		shim_fd_set(fd, SHIM_FD_TCP_DONE, 0);
		break;
	case SHIM_FD_OTHER:
		shim_fd_set(fd, SHIM_FD_OTHER, 0);
		break;
	case SHIM_FD_UNKNOWN:
		/* A listener handed down by a parent (inetd, systemd). */
		if (!shim_fd_is_tcp(lfd)) {
			shim_fd_set(lfd, SHIM_FD_OTHER, 0);
			shim_fd_set(fd, SHIM_FD_OTHER, 0);
			break;
		}
		shim_fd_set(lfd, SHIM_FD_LISTEN_TCP, 0);
		/* fall through */
	default:
		/* The program's own settings on the listener were inherited. */
		shim_ka_apply(fd, entry & SHIM_FD_OPTS_MASK, "accept");
		shim_fd_set(fd, SHIM_FD_TCP_DONE, 0);
		break;
	}
	errno = saved;
}

/* Under ROCK_MODE=rock with ROCK_SERVE=1 a listener the program made is
 * the engine's, which hands it only ready connections (listener.c). One
 * it did not make (inetd's, systemd's) is served here: the engine's
 * connections (probes, reconnects) are taken and the next is accepted: a
 * blocking listener waits for one of the program's, a non-blocking one
 * says EAGAIN (doc/transparency.md). Without ROCK_SERVE every connection
 * is the program's, a probe too. */
static int
accept_any(int lfd, struct sockaddr *addr, socklen_t *len, int flags)
{
	const struct shim_state *st = shim_state();
	int fd, ours;

	if (!shim_busy && st->active) {
		fd = shim_listener_accept(lfd, addr, len, flags, &ours);
		if (ours)
			return fd;
	}
	for (;;) {
		fd = shim_real.accept4(lfd, addr, len, flags);
		if (fd < 0 || !st->active || shim_busy)
			return fd;
		shim_accepted(lfd, fd);
		if (st->cfg.mode != ROCK_MODE_ROCK || !st->cfg.serve ||
		    shim_fd_state_of(shim_fd_get(fd)) != SHIM_FD_TCP_DONE)
			return fd;
		if ((fd = shim_serve(lfd, fd, flags)) >= 0)
			return fd;
	}
}

SHIM_EXPORT int
accept(int lfd, struct sockaddr *addr, socklen_t *len)
{
	return accept_any(lfd, addr, len, 0);
}

SHIM_EXPORT int
accept4(int lfd, struct sockaddr *addr, socklen_t *len, int flags)
{
	return accept_any(lfd, addr, len, flags);
}
