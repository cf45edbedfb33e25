/* chan.c: rockd's hand-over channel: framed messages with descriptors (SCM_RIGHTS) over a unix socket, each read and write bounded in time. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "rock_err.h"
#include "rockd.h"

#define CHAN_MAGIC 0x524b484fu		/* "RKHO" */
#define CHAN_HEADER 16
/* A session's record holds its ring and queues; far more is corrupt. */
#define CHAN_MAX_BODY (1024u * 1024 * 1024)

int64_t
rockd_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait for fd to be ready for `events` until the deadline: 0, or -1 with
 * errno ETIMEDOUT. */
static int
ready(int fd, short events, int64_t deadline)
{
	struct pollfd p = { .fd = fd, .events = events };
	int64_t left;
	int n;

	for (;;) {
		if ((left = deadline - rockd_now_ms()) <= 0) {
			errno = ETIMEDOUT;
			return -1;
		}
		n = poll(&p, 1, left > 1000 ? 1000 : (int)left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -1;
	}
}

static int
write_full(int fd, const uint8_t *p, size_t n, int64_t deadline)
{
	ssize_t w;

	while (n > 0) {
		if ((w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT)) > 0) {
			p += w;
			n -= (size_t)w;
		} else if (w < 0 && errno != EAGAIN && errno != EINTR) {
			return -1;
		} else if (ready(fd, POLLOUT, deadline) != 0) {
			return -1;
		}
	}
	return 0;
}

static int
read_full(int fd, uint8_t *p, size_t n, int64_t deadline)
{
	ssize_t got;

	while (n > 0) {
		if ((got = recv(fd, p, n, MSG_DONTWAIT)) > 0) {
			p += got;
			n -= (size_t)got;
		} else if (got == 0) {
			errno = EPIPE;		/* the other side is gone */
			return -1;
		} else if (errno != EAGAIN && errno != EINTR) {
			return -1;
		} else if (ready(fd, POLLIN, deadline) != 0) {
			return -1;
		}
	}
	return 0;
}

int
rockd_chan_send(int fd, uint32_t type, const int *fds, int nfds,
    struct evbuffer *body, int timeout_ms)
{
	int64_t deadline = rockd_now_ms() + timeout_ms;
	size_t len = body != NULL ? evbuffer_get_length(body) : 0;
	uint32_t h[4] = { htonl(CHAN_MAGIC), htonl(type), htonl((uint32_t)nfds),
	    htonl((uint32_t)len) };
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * ROCKD_CHAN_MAXFDS)];
	} u;
	struct iovec iov = { h, sizeof(h) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *c;
	ssize_t w;

	if (nfds < 0 || nfds > ROCKD_CHAN_MAXFDS || len > CHAN_MAX_BODY) {
		errno = EINVAL;
		return -1;
	}
	if (nfds > 0) {
		memset(&u, 0, sizeof(u));
		m.msg_control = u.buf;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	/* The header alone, with the descriptors: the reader takes exactly
	 * these bytes in its first call, and the descriptors with them. */
	while ((w = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT)) < 0) {
		if ((errno != EAGAIN && errno != EINTR) ||
		    ready(fd, POLLOUT, deadline) != 0)
			return -1;
	}
	if (write_full(fd, (uint8_t *)h + w, sizeof(h) - (size_t)w, deadline) != 0)
		return -1;
	return len == 0 ? 0 :
	    write_full(fd, evbuffer_pullup(body, -1), len, deadline);
}

/* Descriptors that came with a message, however many and whatever the
 * header claims: all are kept, so none leaks when the header lies. */
static int
take_fds(struct msghdr *m, int *fds, int *nfds)
{
	struct cmsghdr *c;
	size_t i, n;
	int bad = 0;

	*nfds = 0;
	for (c = CMSG_FIRSTHDR(m); c != NULL; c = CMSG_NXTHDR(m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < n; i++) {
			int f;

			memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(f));
			if (*nfds < ROCKD_CHAN_MAXFDS)
				fds[(*nfds)++] = f;
			else {
				close(f);
				bad = 1;
			}
		}
	}
	return (m->msg_flags & MSG_CTRUNC) || bad ? -1 : 0;
}

void
rockd_chan_close_fds(int *fds, int nfds)
{
	int i;

	for (i = 0; i < nfds; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

int
rockd_chan_recv(int fd, struct rockd_msg *msg, int timeout_ms)
{
	int64_t deadline = rockd_now_ms() + timeout_ms;
	uint32_t h[4];
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * ROCKD_CHAN_MAXFDS)];
	} u;
	struct iovec iov = { h, sizeof(h) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
	    .msg_control = u.buf, .msg_controllen = sizeof(u.buf) };
	ssize_t got;
	uint32_t len;

	memset(msg, 0, sizeof(*msg));
	while ((got = recvmsg(fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC)) < 0) {
		if ((errno != EAGAIN && errno != EINTR) ||
		    ready(fd, POLLIN, deadline) != 0)
			return -1;
	}
	if (got == 0) {
		errno = EPIPE;
		return -1;
	}
	if (take_fds(&m, msg->fds, &msg->nfds) != 0)
		goto garbled;
	if (read_full(fd, (uint8_t *)h + got, sizeof(h) - (size_t)got,
	    deadline) != 0)
		goto fail;
	if (ntohl(h[0]) != CHAN_MAGIC || ntohl(h[2]) != (uint32_t)msg->nfds ||
	    (len = ntohl(h[3])) > CHAN_MAX_BODY)
		goto garbled;
	msg->type = ntohl(h[1]);
	msg->len = len;
	if (len > 0 && (msg->body = malloc(len)) == NULL)
		goto fail;
	if (len > 0 && read_full(fd, msg->body, len, deadline) != 0)
		goto fail;
	return 0;
garbled:
	errno = EPROTO;
fail:
	rockd_msg_free(msg);
	return -1;
}

void
rockd_msg_free(struct rockd_msg *msg)
{
	rockd_chan_close_fds(msg->fds, msg->nfds);
	msg->nfds = 0;
	free(msg->body);
	msg->body = NULL;
}

/* One exported connection onto the channel. e is its export's outcome:
 * ROCK_ERR_INVALID means not handed over (counted in left). body is
 * freed. 0, or -1 with the reason logged. */
int
rockd_chan_send_export(struct rockd *d, int chan, uint32_t type, int e,
    struct evbuffer *body, const int *fds, int nfds, const char *what,
    unsigned *sent, unsigned *left)
{
	int r = 0;

	if (e == ROCK_ERR_INVALID) {
		(*left)++;
	} else if (e != 0 || rockd_chan_send(chan, type, fds, nfds, body,
	    CHAN_SEND_TIMEOUT_MS) != 0) {
		rlog_error(&d->log, "hand-over: %s: %s", what,
		    e != 0 ? rock_err(e) : strerror(errno));
		r = -1;
	} else {
		(*sent)++;
	}
	evbuffer_free(body);
	return r;
}
