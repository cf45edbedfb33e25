/* fdpass.c: one message with one descriptor attached, over a unix stream (the served listeners' hand-over, the rendezvous). */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "shim.h"

union fd_control {
	struct cmsghdr h;
	char space[CMSG_SPACE(sizeof(int))];
};

ssize_t
shim_send_fd(int u, const void *buf, size_t len, int fd)
{
	union fd_control ctl;
	struct iovec iov;
	struct msghdr m = { 0 };
	struct cmsghdr *c;

	/* sendmsg does not write through iov_base; the cast is its API's. */
	memcpy(&iov.iov_base, &buf, sizeof(buf));
	iov.iov_len = len;
	memset(&ctl, 0, sizeof(ctl));
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = ctl.space;
	m.msg_controllen = sizeof(ctl.space);
	c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return shim_real.sendmsg(u, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
}

ssize_t
shim_recv_fd(int u, void *buf, size_t len, int *fd)
{
	union fd_control ctl;
	struct iovec iov = { buf, len };
	struct msghdr m = { 0 };
	struct cmsghdr *c;
	ssize_t n;

	*fd = -1;
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = ctl.space;
	m.msg_controllen = sizeof(ctl.space);
	n = shim_real.recvmsg(u, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return n;
	for (c = CMSG_FIRSTHDR(&m); c != NULL; c = CMSG_NXTHDR(&m, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
		    c->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(fd, CMSG_DATA(c), sizeof(int));
	/* A truncated message or its descriptor cut: neither is ours. */
	if ((m.msg_flags & MSG_CTRUNC) && *fd >= 0) {
		shim_real.close(*fd);
		*fd = -1;
	}
	return n;
}
