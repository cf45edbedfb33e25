/* fdlife.c: close() and dup*(): keep the descriptor table in step with the kernel's. */
#include "config.h"

#include <fcntl.h>
#include <unistd.h>

#include "shim.h"

/* Forget before closing: a number reused by another thread in between is
 * then at worst unknown, which is classified by asking the kernel. */
SHIM_EXPORT int
close(int fd)
{
	if (shim_state()->active)
		shim_fd_set(fd, SHIM_FD_UNKNOWN, 0);
	return shim_real.close(fd);
}

SHIM_EXPORT int
dup(int fd)
{
	int r = shim_real.dup(fd);

	if (r >= 0 && shim_state()->active)
		shim_fd_copy(fd, r);
	return r;
}

SHIM_EXPORT int
dup2(int fd, int fd2)
{
	int r = shim_real.dup2(fd, fd2);

	if (r >= 0 && fd != fd2 && shim_state()->active)
		shim_fd_copy(fd, fd2);
	return r;
}

SHIM_EXPORT int
dup3(int fd, int fd2, int flags)
{
	int r = shim_real.dup3(fd, fd2, flags);

	if (r >= 0 && shim_state()->active)
		shim_fd_copy(fd, fd2);
	return r;
}
