/* listen.c: listen(): configure the listener so accepted sockets inherit; under ROCK_SERVE the engine takes it (listener.c). */
#include "config.h"

#include <errno.h>

#include "shim.h"

/* Linux copies SO_KEEPALIVE and the TCP keepalive and user-timeout values
 * from a listener to the sockets it accepts, so accept() then costs nothing.
 * Re-reading the environment per socket gives that up on purpose. */
SHIM_EXPORT int
listen(int fd, int backlog)
{
	const struct shim_state *st = shim_state();
	unsigned entry;
	int saved = errno, r, ours, serve = 0;

	if (!st->active || shim_busy)
		return shim_real.listen(fd, backlog);
	r = shim_listener_listen(fd, backlog, &ours);
	if (ours)
		return r;
	entry = shim_fd_get(fd);
	switch (shim_fd_state_of(entry)) {
	case SHIM_FD_UNKNOWN:
		if (!shim_fd_is_tcp(fd)) {
			shim_fd_set(fd, SHIM_FD_OTHER, 0);
			break;
		}
		/* fall through */
	case SHIM_FD_TCP_PENDING:
	case SHIM_FD_TCP_DONE:
		if (st->cfg.eval_env_once &&
		    shim_ka_apply(fd, entry & SHIM_FD_OPTS_MASK, "listen"))
			shim_fd_set(fd, SHIM_FD_LISTEN_OURS,
			    entry & SHIM_FD_OPTS_MASK);
		else
			shim_fd_set(fd, SHIM_FD_LISTEN_TCP,
			    entry & SHIM_FD_OPTS_MASK);
		serve = st->cfg.mode == ROCK_MODE_ROCK && st->cfg.serve;
		break;
	default:
		break;
	}
	errno = saved;
	if ((r = shim_real.listen(fd, backlog)) == 0 && serve) {
		shim_listener_take(fd, backlog);
		errno = saved;
	}
	return r;
}
