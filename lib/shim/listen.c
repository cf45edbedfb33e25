/* listen.c: listen(): configure the listener so accepted sockets inherit. */
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
	int saved = errno;

	if (!st->active || shim_busy)
		return shim_real.listen(fd, backlog);
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
		break;
	default:
		break;
	}
	errno = saved;
	return shim_real.listen(fd, backlog);
}
