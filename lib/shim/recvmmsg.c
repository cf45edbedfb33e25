/* recvmmsg.c: recvmmsg() on a rock: one counted recvmsg per message, as the kernel does for a stream. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <time.h>

#include "shim.h"

static int64_t
ts_ms(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000 + t->tv_nsec / 1000000;
}

/* The kernel's rules: MSG_WAITFORONE waits for the first message only;
 * the timeout is looked at after each message (not while waiting) and
 * left holding what remained; an error after the first message ends the
 * call with the count so far. */
SHIM_EXPORT int
recvmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags,
    struct timespec *timeout)
{
	int64_t end = 0, left;
	unsigned int i;
	ssize_t got;

	if (!shim_is_rock(fd) || v == NULL)
		return shim_real.recvmmsg(fd, v, n, flags, timeout);
	if (timeout != NULL && (timeout->tv_sec < 0 || timeout->tv_nsec < 0 ||
	    timeout->tv_nsec >= 1000000000)) {
		errno = EINVAL;
		return -1;
	}
	if (timeout != NULL)
		end = shim_now_ms() + ts_ms(timeout);
	if (n > IOV_MAX)
		n = IOV_MAX;
	for (i = 0; i < n; i++) {
		if ((got = shim_rock_recv(fd, &v[i].msg_hdr,
		    flags & ~MSG_WAITFORONE)) < 0) {
			/* The kernel keeps such an error for the next call
			 * (sk_err): the rock's end must not be lost with it. */
			if (i > 0 && errno != EAGAIN && errno != EINTR)
				shim_rock_error_again(fd, errno);
			return i > 0 ? (int)i : -1;
		}
		v[i].msg_len = (unsigned int)got;
		if (flags & MSG_WAITFORONE)
			flags |= MSG_DONTWAIT;
		if (timeout == NULL)
			continue;
		left = end - shim_now_ms();
		*timeout = (struct timespec){ left > 0 ? left / 1000 : 0,
		    left > 0 ? left % 1000 * 1000000 : 0 };
		if (left <= 0)
			return (int)i + 1;
	}
	return (int)n;
}
