/* rock_sys.c: the table of real functions the engine calls (rock_sys.h): system calls made directly, libc's stdio and resolver found past us. */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "rock_sys.h"

static int
sys_socket(int domain, int type, int protocol)
{
	return (int)syscall(SYS_socket, domain, type, protocol);
}

static int
sys_close(int fd)
{
	return (int)syscall(SYS_close, fd);
}

static int
sys_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	return (int)syscall(SYS_connect, fd, addr, len);
}

static int
sys_bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	return (int)syscall(SYS_bind, fd, addr, len);
}

static int
sys_listen(int fd, int backlog)
{
	return (int)syscall(SYS_listen, fd, backlog);
}

static int
sys_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
	return (int)syscall(SYS_accept4, fd, addr, len, flags);
}

static int
sys_shutdown(int fd, int how)
{
	return (int)syscall(SYS_shutdown, fd, how);
}

static int
sys_getsockopt(int fd, int level, int opt, void *val, socklen_t *len)
{
	return (int)syscall(SYS_getsockopt, fd, level, opt, val, len);
}

static int
sys_setsockopt(int fd, int level, int opt, const void *val, socklen_t len)
{
	return (int)syscall(SYS_setsockopt, fd, level, opt, val, len);
}

static int
sys_getpeername(int fd, struct sockaddr *addr, socklen_t *len)
{
	return (int)syscall(SYS_getpeername, fd, addr, len);
}

static int
sys_getsockname(int fd, struct sockaddr *addr, socklen_t *len)
{
	return (int)syscall(SYS_getsockname, fd, addr, len);
}

static int
sys_fcntl(int fd, int cmd, long arg)
{
	return (int)syscall(SYS_fcntl, fd, cmd, arg);
}

/* poll where the kernel has it (and 32-bit time_t's ppoll would read our
 * timespec wrong); else ppoll, on 64-bit architectures only. */
static int
sys_poll(struct pollfd *fds, nfds_t n, int timeout_ms)
{
#ifdef SYS_poll
	return (int)syscall(SYS_poll, fds, n, timeout_ms);
#else
	struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000 };

	return (int)syscall(SYS_ppoll, fds, n, timeout_ms < 0 ? NULL : &ts,
	    NULL, (size_t)8);
#endif
}

static ssize_t
sys_read(int fd, void *buf, size_t len)
{
	return syscall(SYS_read, fd, buf, len);
}

static ssize_t
sys_write(int fd, const void *buf, size_t len)
{
	return syscall(SYS_write, fd, buf, len);
}

static ssize_t
sys_readv(int fd, const struct iovec *iov, int n)
{
	return syscall(SYS_readv, fd, iov, n);
}

static ssize_t
sys_recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *from,
    socklen_t *fromlen)
{
	return syscall(SYS_recvfrom, fd, buf, len, flags, from, fromlen);
}

static ssize_t
sys_recv(int fd, void *buf, size_t len, int flags)
{
	return sys_recvfrom(fd, buf, len, flags, NULL, NULL);
}

static ssize_t
sys_sendto(int fd, const void *buf, size_t len, int flags,
    const struct sockaddr *to, socklen_t tolen)
{
	return syscall(SYS_sendto, fd, buf, len, flags, to, tolen);
}

static ssize_t
sys_send(int fd, const void *buf, size_t len, int flags)
{
	return sys_sendto(fd, buf, len, flags, NULL, 0);
}

static ssize_t
sys_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	return syscall(SYS_sendmsg, fd, msg, flags);
}

static ssize_t
sys_recvmsg(int fd, struct msghdr *msg, int flags)
{
	return syscall(SYS_recvmsg, fd, msg, flags);
}

static int
sys_sendmmsg(int fd, struct mmsghdr *v, unsigned n, int flags)
{
	return (int)syscall(SYS_sendmmsg, fd, v, n, flags);
}

static int
sys_recvmmsg(int fd, struct mmsghdr *v, unsigned n, int flags)
{
	return (int)syscall(SYS_recvmmsg, fd, v, n, flags, NULL);
}

/* libc's, past this object (a hook in front of it comes before us). */
static void *
libc_next(const char *name)
{
	void *p = dlsym(RTLD_NEXT, name);

	if (p == NULL)
		errno = ENOSYS;
	return p;
}

static FILE *
libc_fdopen(int fd, const char *mode)
{
	FILE *(*f)(int, const char *) = (FILE *(*)(int, const char *))
	    libc_next("fdopen");

	return f == NULL ? NULL : f(fd, mode);
}

static int
libc_fclose(FILE *fp)
{
	int (*f)(FILE *) = (int (*)(FILE *))libc_next("fclose");

	return f == NULL ? EOF : f(fp);
}

static int
libc_getaddrinfo(const char *node, const char *service,
    const struct addrinfo *hints, struct addrinfo **res)
{
	int (*f)(const char *, const char *, const struct addrinfo *,
	    struct addrinfo **) = (int (*)(const char *, const char *,
	    const struct addrinfo *, struct addrinfo **))libc_next("getaddrinfo");

	return f == NULL ? EAI_SYSTEM : f(node, service, hints, res);
}

const struct rock_sys rock_sys = {
	.socket = sys_socket,
	.close = sys_close,
	.connect = sys_connect,
	.bind = sys_bind,
	.listen = sys_listen,
	.accept4 = sys_accept4,
	.shutdown = sys_shutdown,
	.getsockopt = sys_getsockopt,
	.setsockopt = sys_setsockopt,
	.getpeername = sys_getpeername,
	.getsockname = sys_getsockname,
	.fcntl = sys_fcntl,
	.poll = sys_poll,
	.read = sys_read,
	.write = sys_write,
	.readv = sys_readv,
	.recv = sys_recv,
	.recvfrom = sys_recvfrom,
	.send = sys_send,
	.sendto = sys_sendto,
	.sendmsg = sys_sendmsg,
	.recvmsg = sys_recvmsg,
	.sendmmsg = sys_sendmmsg,
	.recvmmsg = sys_recvmmsg,
	.fdopen = libc_fdopen,
	.fclose = libc_fclose,
	.getaddrinfo = libc_getaddrinfo,
};

int
rock_sys_aside(int fd)
{
	int high;

	if (fd < 0 || fd >= ROCK_SYS_FD_FLOOR ||
	    (high = sys_fcntl(fd, F_DUPFD_CLOEXEC, ROCK_SYS_FD_FLOOR)) < 0)
		return fd;
	sys_close(fd);
	return high;
}
