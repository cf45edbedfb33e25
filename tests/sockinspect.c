/* sockinspect.c: prints the keepalive options of every TCP socket of another process (pidfd_getfd). */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * Usage: sockinspect PID
 *
 * For each TCP socket of PID, one line:
 *   fd=N family=inet|inet6 state=listen|connected|other keepalive=K idle=I
 *   intvl=V cnt=C user_timeout=U
 * An option that cannot be read prints as -1.
 * Exit 0 when the process was inspected, 77 (with a "SKIP: " line) when the
 * kernel does not let us copy its descriptors (pidfd_getfd: EPERM or ENOSYS;
 * or no access to /proc/PID/fd), 1 on any other error.
 */

static int
sys_pidfd_open(pid_t pid)
{
#ifdef SYS_pidfd_open
	return (int)syscall(SYS_pidfd_open, pid, 0);
#else
	(void)pid;
	errno = ENOSYS;
	return -1;
#endif
}

static int
sys_pidfd_getfd(int pidfd, int targetfd)
{
#ifdef SYS_pidfd_getfd
	return (int)syscall(SYS_pidfd_getfd, pidfd, targetfd, 0);
#else
	(void)pidfd;
	(void)targetfd;
	errno = ENOSYS;
	return -1;
#endif
}

static int
get_int(int fd, int level, int name)
{
	int v = 0;
	socklen_t len = sizeof(v);

	if (getsockopt(fd, level, name, &v, &len) != 0)
		return -1;
	return v;
}

static const char *
family_name(int domain)
{
	switch (domain) {
	case AF_INET:
		return "inet";
	case AF_INET6:
		return "inet6";
	default:
		return "other";
	}
}

static const char *
state_name(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (get_int(fd, SOL_SOCKET, SO_ACCEPTCONN) == 1)
		return "listen";
	if (getpeername(fd, (struct sockaddr *)&ss, &len) == 0)
		return "connected";
	return "other";
}

/* Print the line for our copy FD of the target's descriptor TARGETFD, if it is TCP. */
static void
inspect(int fd, int targetfd)
{
	if (get_int(fd, SOL_SOCKET, SO_PROTOCOL) != IPPROTO_TCP)
		return;
	printf("fd=%d family=%s state=%s keepalive=%d idle=%d intvl=%d cnt=%d user_timeout=%d\n",
	    targetfd, family_name(get_int(fd, SOL_SOCKET, SO_DOMAIN)), state_name(fd),
	    get_int(fd, SOL_SOCKET, SO_KEEPALIVE), get_int(fd, IPPROTO_TCP, TCP_KEEPIDLE),
	    get_int(fd, IPPROTO_TCP, TCP_KEEPINTVL), get_int(fd, IPPROTO_TCP, TCP_KEEPCNT),
	    get_int(fd, IPPROTO_TCP, TCP_USER_TIMEOUT));
}

int
main(int argc, char **argv)
{
	char dirpath[64], linkpath[PATH_MAX], target[128];
	struct dirent *de;
	DIR *dir;
	char *end;
	long pid;
	int pidfd;

	if (argc != 2) {
		fprintf(stderr, "usage: sockinspect PID\n");
		return 1;
	}
	errno = 0;
	pid = strtol(argv[1], &end, 10);
	if (errno != 0 || end == argv[1] || *end != '\0' || pid <= 0 || pid > INT_MAX) {
		fprintf(stderr, "sockinspect: bad pid '%s'\n", argv[1]);
		return 1;
	}
	pidfd = sys_pidfd_open((pid_t)pid);
	if (pidfd < 0) {
		if (errno == ENOSYS) {
			printf("SKIP: pidfd_open: %s\n", strerror(errno));
			return 77;
		}
		fprintf(stderr, "sockinspect: pidfd_open %ld: %s\n", pid, strerror(errno));
		return 1;
	}
	snprintf(dirpath, sizeof(dirpath), "/proc/%ld/fd", pid);
	dir = opendir(dirpath);
	if (dir == NULL && (errno == EACCES || errno == EPERM)) {
		/* The same ptrace access check that pidfd_getfd would fail. */
		printf("SKIP: %s: %s\n", dirpath, strerror(errno));
		return 77;
	}
	if (dir == NULL) {
		fprintf(stderr, "sockinspect: %s: %s\n", dirpath, strerror(errno));
		return 1;
	}
	while ((de = readdir(dir)) != NULL) {
		ssize_t n;
		long targetfd;
		int fd;

		if (de->d_name[0] == '.')
			continue;
		targetfd = strtol(de->d_name, &end, 10);
		if (*end != '\0' || targetfd < 0 || targetfd > INT_MAX)
			continue;
		snprintf(linkpath, sizeof(linkpath), "%s/%s", dirpath, de->d_name);
		n = readlink(linkpath, target, sizeof(target) - 1);
		if (n < 0)
			continue; /* closed meanwhile */
		target[n] = '\0';
		if (strncmp(target, "socket:[", 8) != 0)
			continue;
		fd = sys_pidfd_getfd(pidfd, (int)targetfd);
		if (fd < 0) {
			if (errno == EBADF)
				continue; /* closed meanwhile */
			if (errno == EPERM || errno == ENOSYS) {
				printf("SKIP: pidfd_getfd: %s\n", strerror(errno));
				return 77;
			}
			fprintf(stderr, "sockinspect: pidfd_getfd %ld/%ld: %s\n", pid, targetfd,
			    strerror(errno));
			return 1;
		}
		inspect(fd, (int)targetfd);
		close(fd);
	}
	closedir(dir);
	close(pidfd);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "sockinspect: write error\n");
		return 1;
	}
	return 0;
}
