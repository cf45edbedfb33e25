/* rock_sys.h: the engine's one way to the kernel, a table of real functions that no preloaded hook can stand in front of. */
#ifndef ROCK_SYS_H
#define ROCK_SYS_H

#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

/*
 * In librock.so the engine shares the program's process with the preload
 * shim, which exports socket(), close(), send() and the rest: a plain call
 * from an engine file binds to those hooks and passes through their
 * bookkeeping and lock. The engine calls these instead. System calls go
 * straight to the kernel (syscall(2)); the few libc functions (stdio on
 * the engine's own files, the resolver) are looked up past the object
 * that calls them (dlsym RTLD_NEXT), which is libc in rockd, the tools
 * and librock.so alike. The table is constant: nothing to set up, nothing
 * to share. tests/engine-calls.sh fails when an engine object calls a
 * name librock.so exports.
 *
 * Descriptors the engine opens for itself (its listeners and data
 * connections, its UDP and netlink sockets) are moved out of the low
 * numbers: a program thread that closed 3 and is about to dup2 onto 3
 * must not find one of ours there (see rock_sys_aside).
 */
struct rock_sys {
	int (*socket)(int domain, int type, int protocol);
	int (*close)(int fd);
	int (*connect)(int fd, const struct sockaddr *addr, socklen_t len);
	int (*bind)(int fd, const struct sockaddr *addr, socklen_t len);
	int (*listen)(int fd, int backlog);
	int (*accept4)(int fd, struct sockaddr *addr, socklen_t *len, int flags);
	int (*shutdown)(int fd, int how);
	int (*getsockopt)(int fd, int level, int opt, void *val, socklen_t *len);
	int (*setsockopt)(int fd, int level, int opt, const void *val,
	    socklen_t len);
	int (*getpeername)(int fd, struct sockaddr *addr, socklen_t *len);
	int (*getsockname)(int fd, struct sockaddr *addr, socklen_t *len);
	int (*fcntl)(int fd, int cmd, long arg);
	int (*poll)(struct pollfd *fds, nfds_t n, int timeout_ms);
	ssize_t (*read)(int fd, void *buf, size_t len);
	ssize_t (*write)(int fd, const void *buf, size_t len);
	ssize_t (*readv)(int fd, const struct iovec *iov, int n);
	ssize_t (*recv)(int fd, void *buf, size_t len, int flags);
	ssize_t (*recvfrom)(int fd, void *buf, size_t len, int flags,
	    struct sockaddr *from, socklen_t *fromlen);
	ssize_t (*send)(int fd, const void *buf, size_t len, int flags);
	ssize_t (*sendto)(int fd, const void *buf, size_t len, int flags,
	    const struct sockaddr *to, socklen_t tolen);
	ssize_t (*sendmsg)(int fd, const struct msghdr *msg, int flags);
	ssize_t (*recvmsg)(int fd, struct msghdr *msg, int flags);
	int (*sendmmsg)(int fd, struct mmsghdr *v, unsigned n, int flags);
	int (*recvmmsg)(int fd, struct mmsghdr *v, unsigned n, int flags);
	FILE *(*fdopen)(int fd, const char *mode);
	int (*fclose)(FILE *f);
	int (*getaddrinfo)(const char *node, const char *service,
	    const struct addrinfo *hints, struct addrinfo **res);
};

extern const struct rock_sys rock_sys;

/* fd, or its copy at ROCK_SYS_FD_FLOOR or above (fd closed): a number of
 * the library's own, out of the program's way; fd itself when no such
 * number is free. */
#define ROCK_SYS_FD_FLOOR 100
int rock_sys_aside(int fd);

#endif
