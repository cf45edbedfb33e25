/* sockopt.c: setsockopt(): remember the keepalive options the program set itself. */
#include "config.h"

#include "shim.h"

/* The program's own value wins, also over options we apply later. */
SHIM_EXPORT int
setsockopt(int fd, int level, int optname, const void *val, socklen_t len)
{
	const struct shim_state *st = shim_state();
	int r = shim_real.setsockopt(fd, level, optname, val, len);
	unsigned bit;

	if (r == 0 && st->active && !shim_busy && (bit = rock_ka_opt_of(level, optname)) != 0)
		shim_fd_add_opts(fd, bit);
	return r;
}
