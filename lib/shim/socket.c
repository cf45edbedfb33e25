/* socket.c: socket(): note which descriptors are TCP sockets. */
#include "config.h"

#include <netinet/in.h>

#include "shim.h"

static int
is_tcp_request(int domain, int type, int protocol)
{
	return (domain == AF_INET || domain == AF_INET6) &&
	    (type & 0xf) == SOCK_STREAM &&
	    (protocol == 0 || protocol == IPPROTO_TCP);
}

/* Setting options costs system calls; a socket that never connects or
 * listens never carries data, so they wait for connect() or listen(). */
SHIM_EXPORT int
socket(int domain, int type, int protocol)
{
	const struct shim_state *st = shim_state();
	int fd = shim_real.socket(domain, type, protocol);

	if (fd < 0 || !st->active)
		return fd;
	if (shim_busy) {
		/* The library's own: never a rock, never configured. */
		shim_fd_set(fd, SHIM_FD_OTHER, 0);
		return fd;
	}
	if (is_tcp_request(domain, type, protocol)) {
		shim_fd_set(fd, SHIM_FD_TCP_PENDING, SHIM_FD_BORN);
		rlog_debug(&st->log, "fd %d: socket(%d, %#x, %d) is TCP; "
		    "options follow at connect or listen", fd, domain, type,
		    protocol);
	} else {
		shim_fd_set(fd, SHIM_FD_OTHER, 0);
		rlog_debug(&st->log, "fd %d: socket(%d, %#x, %d) is not TCP; "
		    "left alone", fd, domain, type, protocol);
	}
	return fd;
}
