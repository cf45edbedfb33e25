/* rock_blocking.c: the initial connection's blocking connect, write and read, each bounded by a deadline (the program's connect() waits on them). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rock_engine_int.h"
#include "rock_err.h"
#include "rock_probe_file.h"
#include "rock_sys.h"

#ifndef TCP_FASTOPEN_CONNECT
#define TCP_FASTOPEN_CONNECT 30	/* Linux 4.11 */
#endif

int
rock_blocking_wait(int fd, short events, int64_t deadline)
{
	struct pollfd p = { .fd = fd, .events = events };
	int64_t left = deadline - rock_now_ms();
	int r;

	if (left <= 0)
		return ROCK_ERR_TIMEOUT;
	do
		r = rock_sys.poll(&p, 1, (int)left);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return ROCK_ERR_SYSTEM;
	return r == 0 ? ROCK_ERR_TIMEOUT : 0;
}

/* Connect fd within the deadline. With data and Fast Open: where the
 * kernel holds a cookie for the server, connect() only arms it and `data`
 * goes with the SYN (*in_syn); where it holds none, the SYN asks for one.
 * Without data (the probe), no Fast Open: a SYN carrying a cookie and
 * nothing else would make the server accept before the handshake, and
 * time our first bytes from there. *sent: how much of data went. */
int
rock_blocking_connect(int fd, const struct sockaddr *addr, socklen_t len,
    int64_t deadline, const uint8_t *data, size_t n, int fastopen,
    size_t *sent, int *in_syn)
{
	int err = 0, one = 1, armed = 0, r;
	socklen_t el = sizeof(err);
	ssize_t w;

	*sent = 0;
	if (in_syn != NULL)
		*in_syn = 0;
	if (n > 0 && fastopen)
		(void)rock_sys.setsockopt(fd, IPPROTO_TCP, TCP_FASTOPEN_CONNECT, &one,
		    sizeof(one));
	if (rock_sys.connect(fd, addr, len) == 0)
		armed = 1;	/* Fast Open: the send below makes the SYN */
	else if (errno != EINPROGRESS)
		return ROCK_ERR_SYSTEM;
	/* Else a short path (loopback, a LAN) is often connected by now: the
	 * data goes at once, and a send that takes it says so, with no wait
	 * for writability and no SO_ERROR read (EAGAIN: connecting still; a
	 * refusal or reset is the connect's error). */
	if (armed || n > 0) {
		w = rock_sys.send(fd, data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w > 0) {
			*sent = (size_t)w;
			if (!armed)
				return 0;
			if (in_syn != NULL)
				*in_syn = 1;
		} else if (w < 0 && errno != EINPROGRESS && errno != EAGAIN) {
			return ROCK_ERR_SYSTEM;
		}
	}
	if ((r = rock_blocking_wait(fd, POLLOUT, deadline)) != 0)
		return r;
	if (rock_sys.getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0) {
		errno = err;
		return ROCK_ERR_SYSTEM;
	}
	return 0;
}

int
rock_blocking_dial(const struct sockaddr *addr, socklen_t len, int64_t deadline,
    int *out)
{
	int fd = rock_sys.socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int err, r;
	size_t sent;

	if (fd < 0)
		return ROCK_ERR_SYSTEM;
	if ((r = rock_blocking_connect(fd, addr, len, deadline, NULL, 0, 0,
	    &sent, NULL)) != 0) {
		err = errno;
		rock_sys.close(fd);
		errno = err;
		return r;
	}
	*out = fd;
	return 0;
}

int
rock_blocking_write(int fd, const uint8_t *p, size_t n, int64_t deadline)
{
	ssize_t w;
	int r;

	while (n > 0) {
		w = rock_sys.send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EAGAIN) {
			if ((r = rock_blocking_wait(fd, POLLOUT, deadline)) != 0)
				return r;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return ROCK_ERR_SYSTEM;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Exactly n bytes; ROCK_ERR_SHORT on end of file before that. */
int
rock_blocking_read(int fd, uint8_t *p, size_t n, int64_t deadline)
{
	ssize_t got;
	int r;

	while (n > 0) {
		got = rock_sys.recv(fd, p, n, MSG_DONTWAIT);
		if (got < 0 && errno == EAGAIN) {
			if ((r = rock_blocking_wait(fd, POLLIN, deadline)) != 0)
				return r;
			continue;
		}
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return ROCK_ERR_SYSTEM;
		if (got == 0)
			return ROCK_ERR_SHORT;
		p += got;
		n -= (size_t)got;
	}
	return 0;
}
