/* io.c: reads and writes on a rock: counted, ring-copied, and blocking through suspension. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>

#include "shim.h"

#define IOV_LOCAL 64

/* How one program call may wait: its descriptor's blocking mode and its
 * SO_RCVTIMEO/SO_SNDTIMEO, looked up only when it has to wait. */
struct call {
	int fd;
	int flags;
	int timeo_opt;
	int nonblock;		/* -1: not looked up */
	int64_t deadline;	/* -2: not looked up; -1: none */
	int no_rdhup;		/* the peer half-closed: wait for POLLOUT only */
};

static int
nonblocking(struct call *c)
{
	int fl;

	if (c->flags & MSG_DONTWAIT)
		return 1;
	if (c->nonblock < 0) {
		fl = shim_real.fcntl(c->fd, F_GETFL);
		c->nonblock = fl >= 0 && (fl & O_NONBLOCK);
	}
	return c->nonblock;
}

static int64_t
deadline(struct call *c)
{
	struct timeval tv;
	socklen_t len = sizeof(tv);

	if (c->deadline != -2)
		return c->deadline;
	c->deadline = -1;
	if (shim_real.getsockopt(c->fd, SOL_SOCKET, c->timeo_opt, &tv, &len) == 0 &&
	    (tv.tv_sec != 0 || tv.tv_usec != 0))
		c->deadline = shim_now_ms() + (int64_t)tv.tv_sec * 1000 +
		    tv.tv_usec / 1000;
	return c->deadline;
}

/* Lock held: wait for the rock to change. -1 with EAGAIN: the program's
 * own timeout passed (what a blocking socket with SO_*TIMEO reports). */
static int
wait_rock(struct call *c)
{
	if (shim_wait(deadline(c)) == ETIMEDOUT && deadline(c) >= 0 &&
	    shim_now_ms() >= deadline(c)) {
		errno = EAGAIN;
		return -1;
	}
	return 0;
}

/* Lock not held: wait for the socket. A suspension shuts its read side,
 * which POLLRDHUP reports, so this never sleeps through one. */
static int
wait_fd(struct call *c, short events)
{
	struct pollfd p = { c->fd, (short)(events | (c->no_rdhup ? 0 : POLLRDHUP)), 0 };
	int64_t d = deadline(c), left = d < 0 ? -1 : d - shim_now_ms();
	int ms = left < 0 && d >= 0 ? 0 : (int)left, r;

	if (c->no_rdhup && (ms < 0 || ms > 100))
		ms = 100;
	r = shim_real.poll(&p, 1, ms);
	if (r < 0)
		return -1;
	if (r == 0 && d >= 0 && shim_now_ms() >= d) {
		errno = EAGAIN;
		return -1;
	}
	if ((events & POLLOUT) && (p.revents & POLLRDHUP) && !(p.revents & POLLOUT))
		c->no_rdhup = 1;
	return 0;
}

static size_t
iov_total(const struct iovec *iov, size_t n)
{
	size_t t = 0, i;

	for (i = 0; i < n; i++)
		t += iov[i].iov_len;
	return t;
}

/* Drop the first n bytes of an iovec copy. */
static void
iov_advance(struct msghdr *m, size_t n)
{
	while (n > 0 && m->msg_iovlen > 0) {
		size_t k = n < m->msg_iov->iov_len ? n : m->msg_iov->iov_len;

		m->msg_iov->iov_base = (char *)m->msg_iov->iov_base + k;
		m->msg_iov->iov_len -= k;
		n -= k;
		if (m->msg_iov->iov_len == 0) {
			m->msg_iov++;
			m->msg_iovlen--;
		}
	}
}

/* One segment, no address, no control: send(2) and recv(2) take the
 * kernel's short path (no msghdr or iovec to import: about a tenth of a
 * small write's cost); anything else goes as the program shaped it. */
static int
plain_shape(const struct msghdr *m)
{
	return m->msg_iovlen == 1 && m->msg_name == NULL &&
	    m->msg_control == NULL;
}

static ssize_t
kernel_send(int fd, const struct msghdr *m, int flags)
{
	if (plain_shape(m))
		return shim_real.send(fd, m->msg_iov[0].iov_base,
		    m->msg_iov[0].iov_len, flags);
	return shim_real.sendmsg(fd, m, flags);
}

static ssize_t
kernel_recv(int fd, struct msghdr *m, int flags)
{
	if (!plain_shape(m))
		return shim_real.recvmsg(fd, m, flags);
	m->msg_flags = 0;
	return shim_real.recv(fd, m->msg_iov[0].iov_base, m->msg_iov[0].iov_len,
	    flags);
}

/* Lock held. The record's answer once the engine let go: the error of an
 * aborted connection once, then the socket's own (disconnected: ENOTCONN,
 * EPIPE). A call that moved `done` bytes returns them and leaves the error
 * to the next call, as the kernel does (a MSG_WAITALL read took it along,
 * and the next read had the dead connection's FIN: a clean end). 1:
 * answered. */
static int
engine_gone(struct shim_rock *r, const struct call *c, size_t done,
    ssize_t *ret)
{
	if (!shim_rock_error_pending(r))
		return 0;
	if (done > 0) {
		*ret = (ssize_t)done;
		return 1;
	}
	errno = shim_rock_take_error(r, c->fd);
	*ret = -1;
	return 1;
}

/* Lock held, r ended with an error not yet taken: what its connection
 * still holds comes first, as a reset TCP connection gives its queued
 * bytes before the reset (an authenticated reset overtakes the bytes
 * sent before it). A non-blocking look: the lock stays held. */
static ssize_t
queued_before_error(struct shim_rock *r, const struct call *c,
    struct msghdr *m)
{
	ssize_t n;

	if (!shim_rock_error_pending(r))
		return 0;
	n = kernel_recv(c->fd, m, (c->flags & ~MSG_WAITALL) | MSG_DONTWAIT);
	return n > 0 ? n : 0;
}

/* Errors that say the connection is gone: the engine's business. Any
 * other (EINVAL for MSG_OOB, EFAULT, EBADF) is the program's. */
static int
link_error(int e)
{
	switch (e) {
	case ECONNRESET: case EPIPE: case ETIMEDOUT: case ECONNABORTED:
	case EHOSTUNREACH: case ENETUNREACH: case ENETDOWN: case ENOTCONN:
	case EHOSTDOWN: case ENETRESET:
		return 1;
	}
	return 0;
}

/* Lock held, a call inside the kernel on r ended. */
static void
leave_kernel(struct shim_rock *r)
{
	if (--r->inflight == 0)
		shim_wake();
}

/* One recvmsg on the rock. 1: done (*ret set), 0: go round again. */
static int
recv_once(struct shim_rock *r, struct call *c, struct msghdr *m, ssize_t *ret,
    int *err)
{
	ssize_t n;

	r->inflight++;
	shim_unlock();
	n = kernel_recv(c->fd, m, c->flags | MSG_DONTWAIT);
	*err = errno;
	shim_lock();
	leave_kernel(r);
	/* The rock ended with an error while the call was in the kernel:
	 * its 0 or its error is not the answer; the loop gives the rock's. */
	if (n <= 0 && shim_rock_error_pending(r))
		return 0;
	if (n > 0) {
		if (!(c->flags & MSG_PEEK) && r->s != NULL)
			rock_direct_consumed(r->s, (size_t)n);
		*ret = n;
		return 1;
	}
	if (n == 0 && iov_total(m->msg_iov, m->msg_iovlen) > 0 && !r->rd_shut) {
		if (!r->ready)
			return 0;	/* our own SHUT_RD at a suspension */
		/* A read of 0 is a FIN, the peer's or anyone's (forged on
		 * the path, its kernel's when it died), or a reset whose
		 * error another thread took: the end of the stream only at
		 * the length the peer stated, authenticated. Until the
		 * engine has that word the program waits, as in a
		 * suspension. */
		if (r->s != NULL && !rock_direct_peer_ended(r->s)) {
			shim_rock_eof_wait(r);
			return 0;
		}
		if (r->s != NULL)
			shim_post(r, SHIM_CMD_EOF);
	}
	if (n == 0) {
		*ret = 0;
		return 1;
	}
	if (!link_error(*err) || r->dead || r->s == NULL || r->released) {
		*ret = -1;
		return 1;
	}
	if (r->ready)
		shim_rock_failed(r);
	return 0;
}

static ssize_t
recv_loop(struct shim_rock *r, struct call *c, struct msghdr *m)
{
	size_t want = iov_total(m->msg_iov, m->msg_iovlen), got = 0;
	int waitall = (c->flags & MSG_WAITALL) && !(c->flags & MSG_PEEK);
	ssize_t ret = -1;
	int err = 0;

	for (;;) {
		if (r->dead)
			return got > 0 ? (ssize_t)got : (errno = EBADF, -1);
		if (got == 0 && (ret = queued_before_error(r, c, m)) > 0)
			return ret;
		if (engine_gone(r, c, got, &ret))
			return ret;
		if (r->rd_shut)
			return (ssize_t)got;
		if (r->s == NULL && !r->connecting) {
			shim_unlock();
			ret = shim_real.recvmsg(c->fd, m, c->flags);
			shim_lock();
			return got > 0 && ret <= 0 ? (ssize_t)got :
			    ret > 0 ? (ssize_t)got + ret : ret;
		}
		if (!r->ready) {
			if (got > 0 && !waitall)
				return (ssize_t)got;
			if (nonblocking(c))
				return got > 0 ? (ssize_t)got : (errno = EAGAIN, -1);
			if (wait_rock(c) != 0)
				return got > 0 ? (ssize_t)got : -1;
			continue;
		}
		if (!recv_once(r, c, m, &ret, &err))
			continue;
		if (ret > 0) {
			got += (size_t)ret;
			if (!waitall || got == want || nonblocking(c))
				return (ssize_t)got;
			iov_advance(m, (size_t)ret);
			continue;
		}
		if (ret == 0)
			return (ssize_t)got;
		if (err != EAGAIN || nonblocking(c) || (got > 0 && !waitall)) {
			errno = err;
			return got > 0 ? (ssize_t)got : -1;
		}
		shim_unlock();
		err = wait_fd(c, POLLIN) == 0 ? 0 : errno;
		shim_lock();
		if (err != 0) {
			errno = err;
			return got > 0 ? (ssize_t)got : -1;
		}
	}
}

ssize_t
shim_rock_recv(int fd, struct msghdr *m, int flags)
{
	struct call c = { fd, flags, SO_RCVTIMEO, -1, -2, 0 };
	struct iovec local[IOV_LOCAL];
	struct msghdr mm = *m;
	struct shim_rock *r;
	ssize_t ret;
	int err, cancel;

	/* MSG_WAITALL advances through a copy of the program's iovec. */
	if ((flags & MSG_WAITALL) && m->msg_iovlen <= IOV_LOCAL) {
		memcpy(local, m->msg_iov, m->msg_iovlen * sizeof(*local));
		mm.msg_iov = local;
	}
	shim_lock();
	if ((r = shim_rock_of(fd)) == NULL) {
		shim_unlock();
		return shim_real.recvmsg(fd, m, flags);
	}
	/* A cancelled thread would leave the lock or a count behind. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	shim_rock_hold(r);
	ret = recv_loop(r, &c, &mm);
	err = errno;
	shim_rock_release(r);
	shim_unlock();
	pthread_setcancelstate(cancel, NULL);
	m->msg_flags = mm.msg_flags;
	m->msg_namelen = mm.msg_namelen;
	m->msg_controllen = mm.msg_controllen;
	errno = err;
	return ret;
}

/* The first `limit` bytes of m's iovec, in out (at most IOV_LOCAL). */
static void
iov_clip(const struct msghdr *m, size_t limit, struct msghdr *out,
    struct iovec *iov)
{
	size_t i, n = 0;

	*out = *m;
	out->msg_iov = iov;
	for (i = 0; i < m->msg_iovlen && i < IOV_LOCAL && limit > 0; i++) {
		iov[n] = m->msg_iov[i];
		if (iov[n].iov_len > limit)
			iov[n].iov_len = limit;
		limit -= iov[n].iov_len;
		n++;
	}
	out->msg_iovlen = n;
}

/* Lock held: room for at least one byte, and no other writer between its
 * send and its ring copy (ring order is wire order). 1: go ahead, 0: go
 * round again, -1: fail with errno. */
static int
writable(struct shim_rock *r, struct call *c)
{
	/* connect() returned and its early handshake runs (a round trip,
	 * bounded by the handshake's time): a first write on a new
	 * connection finds room, so it waits, also a non-blocking one.
	 * Past that (the whole EDP again) a non-blocking one is told EAGAIN. */
	if (r->s == NULL && r->connecting && r->returned && r->early != NULL &&
	    nonblocking(c))
		return shim_wait(-1), 0;
	if (r->s == NULL && nonblocking(c)) {
		errno = EAGAIN;		/* still connecting */
		return -1;
	}
	if (r->s == NULL)
		return wait_rock(c) == 0 ? 0 : -1;
	if (r->ready && !r->writer && rock_direct_space(r->s) > 0)
		return 1;
	if (r->ready && !r->writer)
		r->ring_blocked = 1;	/* room again: a new EPOLLOUT edge */
	/* Another writer is inside a non-blocking send: a moment, not an
	 * EAGAIN the socket's readiness would never explain. */
	if (r->ready && r->writer)
		return wait_rock(c) == 0 ? 0 : -1;
	if (nonblocking(c)) {
		errno = EAGAIN;
		return -1;
	}
	if (r->ready) {
		/* Room may come from the TCP bound, which nothing announces. */
		int64_t d = deadline(c), slice = shim_now_ms() + 10;

		if (shim_wait(d >= 0 && d < slice ? d : slice) == ETIMEDOUT &&
		    d >= 0 && shim_now_ms() >= d) {
			errno = EAGAIN;
			return -1;
		}
		return 0;
	}
	return wait_rock(c) == 0 ? 0 : -1;
}

/* The program's first bytes go now, behind the handshake's last small
 * segment, even where Nagle would wait for its ack: setting TCP_NODELAY
 * pushes what waits, and the program's own setting is put back. */
static void
push_first(int fd)
{
	int nodelay = 0, one = 1;
	socklen_t len = sizeof(nodelay);

	if (shim_real.getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nodelay,
	    &len) != 0 || nodelay)
		return;
	(void)shim_real.setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
	    sizeof(one));
	(void)shim_real.setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nodelay,
	    sizeof(nodelay));
}

/* One sendmsg of what fits the ring. >0 bytes sent; 0 go round; -1 errno. */
static ssize_t
send_once(struct shim_rock *r, struct call *c, const struct msghdr *m)
{
	struct iovec iov[IOV_LOCAL];
	struct msghdr mm;
	size_t space = rock_direct_space(r->s);
	ssize_t n;
	int err;

	iov_clip(m, space, &mm, iov);
	if (iov_total(iov, mm.msg_iovlen) < iov_total(m->msg_iov, m->msg_iovlen))
		r->ring_blocked = 1;	/* cut short by the ring */
	r->writer = 1;
	r->inflight++;
	rock_direct_sending(r->s, iov_total(iov, mm.msg_iovlen));
	shim_unlock();
	n = kernel_send(c->fd, &mm, c->flags | MSG_DONTWAIT | MSG_NOSIGNAL);
	err = errno;
	shim_lock();
	if (n > 0 && r->finished_sent) {
		r->finished_sent = 0;
		push_first(c->fd);
	}
	r->writer = 0;
	leave_kernel(r);
	if (r->s != NULL)
		rock_direct_sent(r->s, iov, (int)mm.msg_iovlen, n > 0 ? (size_t)n : 0);
	shim_wake();
	if (n >= 0 || !link_error(err) || r->s == NULL || r->dead || r->released) {
		errno = err;
		return n < 0 ? -1 : n;
	}
	if (r->ready)
		shim_rock_failed(r);
	return 0;
}

static ssize_t
send_loop(struct shim_rock *r, struct call *c, struct msghdr *m)
{
	size_t want = iov_total(m->msg_iov, m->msg_iovlen), sent = 0;
	ssize_t n = -1;
	int w, err;

	for (;;) {
		if (r->dead)
			return sent > 0 ? (ssize_t)sent : (errno = EBADF, -1);
		if (engine_gone(r, c, sent, &n))
			return n;
		if (r->wr_shut) {
			errno = EPIPE;
			return sent > 0 ? (ssize_t)sent : -1;
		}
		/* Nothing to send: 0, as the kernel says (a zero-length send
		 * would go round for ever below, taken for "no room"). */
		if (want == 0)
			return 0;
		if (r->s == NULL && !r->connecting) {
			shim_unlock();
			n = shim_real.sendmsg(c->fd, m, c->flags);
			shim_lock();
			return n > 0 ? (ssize_t)sent + n : sent > 0 ? (ssize_t)sent : n;
		}
		/* connect() returned, its CLIENT_EARLY out: bytes follow it
		 * at once, up to a bound, before the answer. */
		if (r->s == NULL && r->early != NULL && !(c->flags & MSG_OOB) &&
		    m->msg_controllen == 0 && (n = (ssize_t)rock_early_send(
		    r->early, m->msg_iov, (int)m->msg_iovlen)) > 0) {
			sent += (size_t)n;
			if (sent == want || nonblocking(c))
				return (ssize_t)sent;
			iov_advance(m, (size_t)n);
			continue;
		}
		if ((w = writable(r, c)) < 0)
			return sent > 0 ? (ssize_t)sent : -1;
		if (w == 0)
			continue;
		if ((n = send_once(r, c, m)) > 0) {
			sent += (size_t)n;
			if (sent == want || nonblocking(c))
				return (ssize_t)sent;
			iov_advance(m, (size_t)n);
			continue;
		}
		if (n == 0)
			continue;
		err = errno;
		if (err != EAGAIN || nonblocking(c)) {
			errno = err;
			return sent > 0 ? (ssize_t)sent : -1;
		}
		shim_unlock();
		err = wait_fd(c, POLLOUT) == 0 ? 0 : errno;
		shim_lock();
		if (err != 0) {
			errno = err;
			return sent > 0 ? (ssize_t)sent : -1;
		}
	}
}

ssize_t
shim_rock_send(int fd, const struct msghdr *m, int flags)
{
	struct call c = { fd, flags, SO_SNDTIMEO, -1, -2, 0 };
	struct iovec local[IOV_LOCAL];
	struct msghdr mm = *m;
	struct shim_rock *r;
	ssize_t ret;
	int err, cancel;

	if (m->msg_iovlen > IOV_LOCAL) {
		/* Rare: the first IOV_LOCAL segments this time; a short
		 * write, which stream sockets may always return. */
		mm.msg_iovlen = IOV_LOCAL;
	}
	memcpy(local, m->msg_iov, mm.msg_iovlen * sizeof(*local));
	mm.msg_iov = local;
	shim_lock();
	if ((r = shim_rock_of(fd)) == NULL) {
		shim_unlock();
		return shim_real.sendmsg(fd, m, flags);
	}
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	shim_rock_hold(r);
	ret = send_loop(r, &c, &mm);
	err = errno;
	shim_rock_release(r);
	shim_unlock();
	pthread_setcancelstate(cancel, NULL);
	errno = err;
	return ret;
}

/* ---- the calls */

static ssize_t
recv_buf(int fd, void *buf, size_t n, int flags, struct sockaddr *from,
    socklen_t *fromlen)
{
	struct iovec iov = { buf, n };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t r;

	if (from != NULL && fromlen != NULL) {
		m.msg_name = from;
		m.msg_namelen = *fromlen;
	}
	r = shim_rock_recv(fd, &m, flags);
	if (r >= 0 && from != NULL && fromlen != NULL)
		*fromlen = m.msg_namelen;
	return r;
}

static ssize_t
send_buf(int fd, const void *buf, size_t n, int flags)
{
	struct iovec iov = { (void *)(uintptr_t)buf, n };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };

	return shim_rock_send(fd, &m, flags);
}

SHIM_EXPORT ssize_t
read(int fd, void *buf, size_t n)
{
	if (!shim_is_rock(fd))
		return shim_real.read(fd, buf, n);
	return recv_buf(fd, buf, n, 0, NULL, NULL);
}

SHIM_EXPORT ssize_t
recv(int fd, void *buf, size_t n, int flags)
{
	if (!shim_is_rock(fd))
		return shim_real.recv(fd, buf, n, flags);
	return recv_buf(fd, buf, n, flags, NULL, NULL);
}

SHIM_EXPORT ssize_t
recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *from,
    socklen_t *fromlen)
{
	if (!shim_is_rock(fd))
		return shim_real.recvfrom(fd, buf, n, flags, from, fromlen);
	return recv_buf(fd, buf, n, flags, from, fromlen);
}

SHIM_EXPORT ssize_t
readv(int fd, const struct iovec *iov, int n)
{
	struct msghdr m = { .msg_iov = (struct iovec *)(uintptr_t)iov,
	    .msg_iovlen = n < 0 ? 0 : (size_t)n };

	if (!shim_is_rock(fd) || n < 0)
		return shim_real.readv(fd, iov, n);
	return shim_rock_recv(fd, &m, 0);
}

SHIM_EXPORT ssize_t
recvmsg(int fd, struct msghdr *m, int flags)
{
	if (!shim_is_rock(fd) || m == NULL)
		return shim_real.recvmsg(fd, m, flags);
	return shim_rock_recv(fd, m, flags);
}

SHIM_EXPORT ssize_t
write(int fd, const void *buf, size_t n)
{
	if (!shim_is_rock(fd))
		return shim_real.write(fd, buf, n);
	return send_buf(fd, buf, n, 0);
}

SHIM_EXPORT ssize_t
send(int fd, const void *buf, size_t n, int flags)
{
	if (!shim_is_rock(fd))
		return shim_real.send(fd, buf, n, flags);
	return send_buf(fd, buf, n, flags);
}

SHIM_EXPORT ssize_t
writev(int fd, const struct iovec *iov, int n)
{
	struct msghdr m = { .msg_iov = (struct iovec *)(uintptr_t)iov,
	    .msg_iovlen = n < 0 ? 0 : (size_t)n };

	if (!shim_is_rock(fd) || n < 0)
		return shim_real.writev(fd, iov, n);
	return shim_rock_send(fd, &m, 0);
}

static int
family_of(const struct sockaddr *addr, socklen_t len)
{
	return addr != NULL && len >= sizeof(addr->sa_family) ?
	    addr->sa_family : AF_UNSPEC;
}

/* TCP Fast Open sends data with the SYN: options go on before it. A
 * connected stream socket ignores the address, so a rock may too. */
SHIM_EXPORT ssize_t
sendto(int fd, const void *buf, size_t n, int flags,
    const struct sockaddr *addr, socklen_t len)
{
	if (shim_is_rock(fd))
		return send_buf(fd, buf, n, flags & ~MSG_FASTOPEN);
	if ((flags & MSG_FASTOPEN) && !shim_busy && shim_state()->active)
		shim_ka_before_use(fd, family_of(addr, len), "sendto(MSG_FASTOPEN)");
	return shim_real.sendto(fd, buf, n, flags, addr, len);
}

SHIM_EXPORT ssize_t
sendmsg(int fd, const struct msghdr *msg, int flags)
{
	if (msg != NULL && shim_is_rock(fd))
		return shim_rock_send(fd, msg, flags & ~MSG_FASTOPEN);
	if ((flags & MSG_FASTOPEN) && msg != NULL && !shim_busy &&
	    shim_state()->active)
		shim_ka_before_use(fd, family_of(msg->msg_name,
		    msg->msg_namelen), "sendmsg(MSG_FASTOPEN)");
	return shim_real.sendmsg(fd, msg, flags);
}
