/* send.c: sendto(), sendmsg(): TCP Fast Open sends data with the SYN. */
#include "config.h"

#include "shim.h"

static int
family_of(const struct sockaddr *addr, socklen_t len)
{
	return addr != NULL && len >= sizeof(addr->sa_family) ?
	    addr->sa_family : AF_UNSPEC;
}

SHIM_EXPORT ssize_t
sendto(int fd, const void *buf, size_t n, int flags,
    const struct sockaddr *addr, socklen_t len)
{
	if ((flags & MSG_FASTOPEN) && shim_state()->active)
		shim_ka_before_use(fd, family_of(addr, len), "sendto(MSG_FASTOPEN)");
	return shim_real.sendto(fd, buf, n, flags, addr, len);
}

SHIM_EXPORT ssize_t
sendmsg(int fd, const struct msghdr *msg, int flags)
{
	if ((flags & MSG_FASTOPEN) && shim_state()->active)
		shim_ka_before_use(fd, family_of(msg->msg_name,
		    msg->msg_namelen), "sendmsg(MSG_FASTOPEN)");
	return shim_real.sendmsg(fd, msg, flags);
}
