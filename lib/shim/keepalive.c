/* keepalive.c: when and to which sockets the shim applies the keepalive options. */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>

#include "shim.h"

int
shim_fd_is_tcp(int fd)
{
	int proto = 0;
	socklen_t len = sizeof(proto);

	/* IPPROTO_TCP implies an AF_INET or AF_INET6 stream socket. */
	if (shim_real.getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len) != 0)
		return 0;
	return proto == IPPROTO_TCP;
}

int
shim_ka_apply(int fd, unsigned skip, const char *why)
{
	struct shim_settings s;

	shim_settings(&s);
	if (s.cfg->mode == ROCK_MODE_OFF) {
		rlog_debug(s.log, "fd %d: mode off, %s left alone", fd, why);
		return 0;
	}
	rlog_debug(s.log, "fd %d: TCP socket, %s: applying keepalive options",
	    fd, why);
	(void)rock_ka_apply(fd, s.cfg, skip,
	    (rock_setsockopt_fn *)shim_real.setsockopt, s.log);
	return 1;
}

void
shim_ka_before_use(int fd, int family, const char *why)
{
	unsigned entry = shim_fd_get(fd);
	int saved = errno;

	if (family != AF_INET && family != AF_INET6 && family != AF_UNSPEC)
		return;
	switch (shim_fd_state_of(entry)) {
	case SHIM_FD_TCP_PENDING:
		break;
	case SHIM_FD_UNKNOWN:
		if (!shim_fd_is_tcp(fd)) {
			shim_fd_set(fd, SHIM_FD_OTHER, 0);
			errno = saved;
			return;
		}
		break;
	default:
		return;
	}
	shim_ka_apply(fd, entry & SHIM_FD_OPTS_MASK, why);
	shim_fd_set(fd, SHIM_FD_TCP_DONE, entry & SHIM_FD_OPTS_MASK);
	errno = saved;
}
