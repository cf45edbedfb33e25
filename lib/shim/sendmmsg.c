/* sendmmsg.c: sendmmsg() on a rock: one counted sendmsg per message, as the kernel does for a stream. */
#include "config.h"

#include <errno.h>
#include <limits.h>

#include "shim.h"

/* The kernel's rules: at most UIO_MAXIOV messages; an error after the
 * first message ends the call with the count so far. A short write ends
 * it too: the next message's bytes must not follow a gap. */
SHIM_EXPORT int
sendmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags)
{
	unsigned int i;
	ssize_t w;
	size_t want, k;

	if (!shim_is_rock(fd) || v == NULL)
		return shim_real.sendmmsg(fd, v, n, flags);
	if (n > IOV_MAX)
		n = IOV_MAX;
	for (i = 0; i < n; i++) {
		if ((w = shim_rock_send(fd, &v[i].msg_hdr, flags & ~MSG_FASTOPEN)) < 0) {
			/* As recvmmsg: the rock's end is the next call's. */
			if (i > 0 && errno != EAGAIN && errno != EINTR)
				shim_rock_error_again(fd, errno);
			return i > 0 ? (int)i : -1;
		}
		v[i].msg_len = (unsigned int)w;
		for (want = 0, k = 0; k < v[i].msg_hdr.msg_iovlen; k++)
			want += v[i].msg_hdr.msg_iov[k].iov_len;
		if ((size_t)w < want)
			return (int)i + 1;
	}
	return (int)n;
}
