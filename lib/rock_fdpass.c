/* rock_fdpass.c: one message with one descriptor attached, over a unix socket (rockd's worker inboxes, a served listener's hand-over, the rendezvous). */
#include "config.h"

#include <string.h>
#include <sys/socket.h>

#include "rock_fdpass.h"
#include "rock_sys.h"

union fd_control {
	struct cmsghdr h;
	char space[CMSG_SPACE(sizeof(int))];
};

ssize_t
rock_fd_send(int u, const void *buf, size_t len, int fd)
{
	union fd_control ctl;
	struct iovec iov;
	struct msghdr m;
	struct cmsghdr *c;

	/* sendmsg does not write through iov_base; the cast is its API's. */
	memcpy(&iov.iov_base, &buf, sizeof(buf));
	iov.iov_len = len;
	memset(&m, 0, sizeof(m));
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
	return rock_sys.sendmsg(u, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
}

ssize_t
rock_fd_recv(int u, void *buf, size_t len, int *fd, int *flags)
{
	union fd_control ctl;
	struct iovec iov = { buf, len };
	struct msghdr m;
	struct cmsghdr *c;
	ssize_t n;

	*fd = -1;
	memset(&m, 0, sizeof(m));
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = ctl.space;
	m.msg_controllen = sizeof(ctl.space);
	n = rock_sys.recvmsg(u, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (flags != NULL)
		*flags = n < 0 ? 0 : m.msg_flags;
	if (n < 0)
		return n;
	for (c = CMSG_FIRSTHDR(&m); c != NULL; c = CMSG_NXTHDR(&m, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
		    c->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(fd, CMSG_DATA(c), sizeof(int));
	if ((m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) && *fd >= 0) {
		rock_sys.close(*fd);
		*fd = -1;
	}
	return n;
}
