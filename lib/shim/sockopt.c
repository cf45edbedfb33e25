/* sockopt.c: setsockopt(): remember the keepalive options the program set itself; a rock's go to its record. */
#include "config.h"

#include "shim.h"

static unsigned
opt_bit(int level, int optname)
{
	unsigned ka;

	if (level == SOL_SOCKET && optname == SO_SNDBUF)
		return SHIM_FD_SNDBUF_SET;
	if (level == SOL_SOCKET && optname == SO_RCVBUF)
		return SHIM_FD_RCVBUF_SET;
	return (ka = rock_ka_opt_of(level, optname)) != 0 ? ka :
	    SHIM_FD_OTHER_SET;
}

/* The program's own value wins, also over options we apply later. */
SHIM_EXPORT int
setsockopt(int fd, int level, int optname, const void *val, socklen_t len)
{
	const struct shim_state *st = shim_state();
	unsigned bit;
	int r, tcp;

	if (shim_is_rock(fd) && shim_opts_set(fd, level, optname, val, len, &r))
		return r;
	/* A listener of ours: what accepted sockets inherit is the TCP
	 * listener's; accept()'s timeout is the unix one's. */
	if (!shim_busy && (tcp = shim_listener_tcp(fd)) >= 0) {
		r = shim_real.setsockopt(tcp, level, optname, val, len);
		if (level == SOL_SOCKET && optname == SO_RCVTIMEO)
			r = shim_real.setsockopt(fd, level, optname, val, len);
	} else {
		r = shim_real.setsockopt(fd, level, optname, val, len);
	}

	if (r == 0 && st->active && !shim_busy && (bit = opt_bit(level, optname)) != 0)
		shim_fd_add_opts(fd, bit);
	return r;
}
