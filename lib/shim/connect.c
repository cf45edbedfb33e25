/* connect.c: connect(): a TCP socket gets its options before the SYN. */
#include "config.h"

#include "shim.h"

SHIM_EXPORT int
connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	const struct shim_state *st = shim_state();

	if (st->active && addr != NULL && len >= sizeof(addr->sa_family))
		shim_ka_before_use(fd, addr->sa_family, "connect");
	return shim_real.connect(fd, addr, len);
}
