/* daemon.c: daemon(3), whose parent leaves by _exit: the rocks it shares with the child go to a keeper first, as exit() would send them. */
#include "config.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "shim.h"

/* glibc's daemon() forks and its parent calls _exit, which runs no
 * destructor: the relay of the rocks the fork shared (fork.c) would die
 * with it under the child (ssh -f). Done here as glibc does it, except
 * that the parent leaves as exit() would, without flushing stdio (the
 * child holds the same buffers). */
SHIM_EXPORT int
daemon(int nochdir, int noclose)
{
	pid_t pid;
	int fd;

	if (shim_real.daemon == NULL)	/* before librock's constructor */
		shim_resolve();
	if (shim_busy || shim_engine_running() == NULL)
		return shim_real.daemon(nochdir, noclose);
	if ((pid = fork()) < 0)
		return -1;
	if (pid > 0) {
		shim_engine_leave();
		_exit(0);
	}
	if (setsid() < 0)
		return -1;
	if (!nochdir && chdir("/") != 0)
		return -1;
	if (!noclose && (fd = open("/dev/null", O_RDWR)) >= 0) {
		(void)dup2(fd, STDIN_FILENO);
		(void)dup2(fd, STDOUT_FILENO);
		(void)dup2(fd, STDERR_FILENO);
		if (fd > STDERR_FILENO)
			(void)close(fd);
	}
	return 0;
}
