/* bind.c: bind(): note that the program gave the socket an address of its own. */
#include "config.h"

#include <errno.h>

#include "shim.h"

SHIM_EXPORT int
bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	int r = shim_real.bind(fd, addr, len), saved = errno;

	if (r == 0 && !shim_busy && shim_state()->active)
		shim_fd_add_opts(fd, SHIM_FD_BOUND);
	errno = saved;
	return r;
}
