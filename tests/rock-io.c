/* rock-io.c: an ordinary TCP client, one I/O style per mode, streaming a pattern through an echo server and checking every byte. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/*
 * Usage: rock-io MODE HOST PORT BYTES
 *        rock-io connect HOST PORT WAIT_MS
 * It knows nothing of rocks: run under `rock`, every call it makes must
 * behave as on a healthy TCP connection while the harness breaks the path.
 * Prints "MODE: N bytes echoed byte-exact" and exits 0, or says what broke.
 * Two modes know they run as a rock: sockopts (the options it set hold on
 * every data connection, and the two a rock keeps to itself do not reach
 * them) and mmsg (sendmmsg and recvmmsg are counted; splice and
 * copy_file_range refused with EINVAL, as for a socket they cannot serve).
 * stdio-tail and stdio-abort need servers of their own (rock-relay-ends.sh).
 */

#define CHUNK 16384

static const char *mode;
static size_t total;

static void
die(const char *what)
{
	fprintf(stderr, "rock-io %s: %s: %s\n", mode, what, strerror(errno));
	exit(1);
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void
fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "rock-io %s: ", mode);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static uint8_t
pat(size_t i)
{
	return (uint8_t)(i % 251 + i / 65536);
}

static void
fill(uint8_t *p, size_t off, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = pat(off + i);
}

static void
check(const uint8_t *p, size_t off, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != pat(off + i))
			fail("byte %zu differs", off + i);
}

static struct sockaddr_in dst;

/* connect's outcome, blocking and non-blocking, as errno names: it must
 * read the same under rock as without it. A non-blocking attempt is
 * given wait_ms (its own connect timeout), then abandoned. */
static const char *
errname(int e)
{
	switch (e) {
	case 0: return "ok";
	case ECONNREFUSED: return "ECONNREFUSED";
	case ETIMEDOUT: return "ETIMEDOUT";
	case ENETUNREACH: return "ENETUNREACH";
	case EHOSTUNREACH: return "EHOSTUNREACH";
	case EINPROGRESS: return "EINPROGRESS";
	}
	return strerror(e);
}

static void run_connect(int wait_ms) __attribute__((noreturn));

static void
run_connect(int wait_ms)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0), err = 0, r;
	socklen_t len = sizeof(err);
	struct pollfd p;
	struct timespec t0, t1;

	r = connect(fd, (struct sockaddr *)&dst, sizeof(dst));
	printf("blocking: %s\n", errname(r == 0 ? 0 : errno));
	close(fd);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	r = connect(fd, (struct sockaddr *)&dst, sizeof(dst));
	printf("non-blocking connect: %s\n", errname(r == 0 ? 0 : errno));
	if (r != 0 && errno == EINPROGRESS) {
		p = (struct pollfd){ fd, POLLOUT, 0 };
		r = poll(&p, 1, wait_ms);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (r == 0) {
			long ms = (t1.tv_sec - t0.tv_sec) * 1000 +
			    (t1.tv_nsec - t0.tv_nsec) / 1000000;

			printf("non-blocking: own timeout%s\n",
			    ms >= wait_ms && ms < wait_ms + 500 ? " kept" : " NOT kept");
		} else {
			getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
			printf("non-blocking: SO_ERROR %s\n", errname(err));
		}
	}
	close(fd);
	exit(0);
}

/* getpeername shows what the program connected to. */
static int
check_peer(int fd)
{
	struct sockaddr_in peer;
	socklen_t len = sizeof(peer);

	if (getpeername(fd, (struct sockaddr *)&peer, &len) != 0)
		die("getpeername");
	if (len != sizeof(peer) || peer.sin_port != dst.sin_port ||
	    peer.sin_addr.s_addr != dst.sin_addr.s_addr)
		fail("getpeername says port %u, connected to %u",
		    ntohs(peer.sin_port), ntohs(dst.sin_port));
	return fd;
}

static int
dial_fd(int fd, int nonblock)
{
	int err = 0;
	socklen_t len = sizeof(err);
	struct pollfd p;

	if (fd < 0)
		die("socket");
	if (nonblock && fcntl(fd, F_SETFL, O_NONBLOCK) != 0)
		die("fcntl");
	if (connect(fd, (struct sockaddr *)&dst, sizeof(dst)) == 0)
		return check_peer(fd);
	if (!nonblock || errno != EINPROGRESS)
		die("connect");
	p = (struct pollfd){ fd, POLLOUT, 0 };
	if (poll(&p, 1, 30000) != 1)
		die("poll for the connect");
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
		errno = err;
		die("SO_ERROR after connect");
	}
	return check_peer(fd);
}

static int
dial(int nonblock)
{
	return dial_fd(socket(AF_INET, SOCK_STREAM, 0), nonblock);
}

/* ---- blocking styles: write a chunk, read it back */

static void
write_all(int fd, const uint8_t *p, size_t n)
{
	ssize_t w;

	while (n > 0) {
		if ((w = write(fd, p, n)) < 0)
			die("write");
		p += w;
		n -= (size_t)w;
	}
}

static void
read_exact(int fd, uint8_t *p, size_t n, int waitall)
{
	ssize_t r;

	while (n > 0) {
		r = waitall ? recv(fd, p, n, MSG_WAITALL) : read(fd, p, n);
		if (r < 0)
			die(waitall ? "recv(MSG_WAITALL)" : "read");
		if (r == 0)
			fail("end of stream with %zu of %zu bytes left", n, total);
		if (waitall && (size_t)r != n)
			fail("MSG_WAITALL returned %zu of %zu", (size_t)r, n);
		p += r;
		n -= (size_t)r;
	}
}

static void
run_blocking(int waitall, int use_sendfile, int halfclose)
{
	uint8_t out[CHUNK], in[CHUNK];
	int fd = dial(0), file = -1;
	size_t off, n;
	char path[] = "/tmp/rock-io.XXXXXX";
	off_t foff = 0;

	if (use_sendfile) {
		if ((file = mkstemp(path)) < 0)
			die("mkstemp");
		unlink(path);
		for (off = 0; off < total; off += n) {
			n = total - off < CHUNK ? total - off : CHUNK;
			fill(out, off, n);
			if (write(file, out, n) != (ssize_t)n)
				die("write to the file");
		}
	}
	for (off = 0; off < total; off += n) {
		n = total - off < CHUNK ? total - off : CHUNK;
		if (use_sendfile) {
			size_t left = n;

			while (left > 0) {
				ssize_t w = sendfile(fd, file, &foff, left);

				if (w <= 0)
					die("sendfile");
				left -= (size_t)w;
			}
		} else {
			fill(out, off, n);
			write_all(fd, out, n);
		}
		if (halfclose && off + n == total && shutdown(fd, SHUT_WR) != 0)
			die("shutdown(SHUT_WR)");
		if (waitall) {
			/* A peek, not waiting: what is there (or EAGAIN), not
			 * consumed, then the same bytes again for real. */
			ssize_t k = recv(fd, in, n, MSG_PEEK | MSG_DONTWAIT);

			if (k < 0 && errno != EAGAIN)
				die("recv(MSG_PEEK | MSG_DONTWAIT)");
			if (k > 0)
				check(in, off, (size_t)k);
		}
		read_exact(fd, in, n, waitall);
		check(in, off, n);
	}
	if (halfclose) {
		ssize_t r = read(fd, in, sizeof(in));

		if (r != 0)
			fail("expected end of stream after %zu bytes, read returned %zu",
			    total, (size_t)r);
	}
	if (file >= 0)
		close(file);
	close(fd);
}

/* ---- copies of the descriptor: dup, F_DUPFD_CLOEXEC, dup2, and closes */

static void
run_dup(void)
{
	uint8_t out[CHUNK], in[CHUNK];
	int fd = dial(0), w = dup(fd), r = fcntl(fd, F_DUPFD_CLOEXEC, 100);
	int late = dup2(fd, 200);
	size_t off, n;

	if (w < 0 || r < 100 || late != 200)
		die("dup");
	if (!(fcntl(r, F_GETFD) & FD_CLOEXEC) || (fcntl(late, F_GETFD) & FD_CLOEXEC))
		fail("descriptor flags of the copies are wrong");
	for (off = 0; off < total; off += n) {
		n = total - off < CHUNK ? total - off : CHUNK;
		if (off >= total / 2 && fd >= 0) {
			/* Half way: the original and one copy go; the rest carry on. */
			close(fd);
			close(w);
			fd = -1;
			w = late;
			/* O_NONBLOCK belongs to the open socket, shared by copies. */
			if (fcntl(w, F_SETFL, fcntl(w, F_GETFL) | O_NONBLOCK) != 0 ||
			    !(fcntl(r, F_GETFL) & O_NONBLOCK) ||
			    fcntl(w, F_SETFL, fcntl(w, F_GETFL) & ~O_NONBLOCK) != 0 ||
			    (fcntl(r, F_GETFL) & O_NONBLOCK))
				fail("O_NONBLOCK not shared by the copies at %zu", off);
		}
		fill(out, off, n);
		write_all(w, out, n);
		read_exact(r, in, n, 0);
		check(in, off, n);
	}
	if (!(fcntl(r, F_GETFD) & FD_CLOEXEC))
		fail("FD_CLOEXEC of a copy lost (after %zu bytes)", total);
	close(r);
	close(late);
}

/* ---- stdio: dprintf, then FILEs from fdopen (glibc's stdio calls its
 * internal read and write); after fclose the number is free for others */

/* A line written with write() on standard input, read back with fgets. */
static void
stdin_line(const char *what)
{
	char line[64];

	if (write(STDIN_FILENO, what, strlen(what)) != (ssize_t)strlen(what))
		die("write on standard input");
	if (fgets(line, sizeof(line), stdin) == NULL || strcmp(line, what) != 0)
		fail("fgets on standard input: \"%s\"", ferror(stdin) ?
		    strerror(errno) : feof(stdin) ? "end of file" : line);
}

static void
run_stdio(void)
{
	uint8_t out[CHUNK], in[CHUNK];
	char line[64];
	int fd, w, p[2], s2 = dial(0);
	FILE *fin, *fout;
	size_t off, n;

	/* A second connection as standard input, stdio's own stream. */
	if (dup2(s2, STDIN_FILENO) != STDIN_FILENO)
		die("dup2 onto standard input");
	close(s2);
	stdin_line("ping\n");
	fd = dial(0);
	if ((w = dup(fd)) < 0)
		die("dup");
	if (dprintf(w, "hello %d\n", 42) != 9)
		die("dprintf");
	if ((fin = fdopen(fd, "r")) == NULL || (fout = fdopen(w, "w")) == NULL)
		die("fdopen");
	if (fgets(line, sizeof(line), fin) == NULL || strcmp(line, "hello 42\n") != 0)
		fail("fgets after dprintf: \"%s\"", ferror(fin) ? strerror(errno) : line);
	check_peer(fd);
	for (off = 0; off < total; off += n) {
		n = total - off < CHUNK ? total - off : CHUNK;
		fill(out, off, n);
		if (fwrite(out, 1, n, fout) != n || fflush(fout) != 0)
			die("fwrite");
		if (fread(in, 1, n, fin) != n)
			fail("fread: %s at %zu of %zu bytes", ferror(fin) ?
			    strerror(errno) : "end of stream", off, total);
		check(in, off, n);
	}
	if (fclose(fout) != 0 || fclose(fin) != 0)
		die("fclose");
	stdin_line("pong\n");
	if (fclose(stdin) != 0)
		die("fclose(stdin)");
	/* The number, reused behind librock's back (as another library's
	 * internal call would), names what it names now, not the rock. */
	if (pipe(p) != 0)
		die("pipe");
	if (p[1] == fd && (p[1] = fcntl(fd, F_DUPFD, fd + 1)) < 0)
		die("F_DUPFD");
	if (p[0] != fd && syscall(SYS_dup3, p[0], fd, 0) != fd)
		die("dup3 onto the closed number");
	if (write(p[1], "x", 1) != 1 || read(fd, line, 1) != 1 || line[0] != 'x')
		fail("descriptor %d, reused for a pipe after fclose, does not read "
		    "the pipe", fd);
	close(p[1]);
	close(fd);
	if (p[0] != fd)
		close(p[0]);
}

/* stdio-tail: a word with dprintf (the rock goes behind a relay), our
 * end, then a pause while the server sends BYTES and its end: the relay
 * finishes while the bytes wait for us; all must come, then the end. */
static void
run_stdio_tail(void)
{
	uint8_t in[CHUNK];
	int fd = dial(0);
	size_t got = 0;
	ssize_t n;

	if (dprintf(fd, "go\n") != 3)
		die("dprintf");
	if (shutdown(fd, SHUT_WR) != 0)
		die("shutdown(SHUT_WR)");
	sleep(2);
	while ((n = read(fd, in, sizeof(in))) > 0)
		got += (size_t)n;
	if (n < 0)
		fail("read after %zu of %zu bytes: %s", got, total, strerror(errno));
	if (got != total)
		fail("end of stream after %zu of %zu bytes", got, total);
	close(fd);
}

/* stdio-abort: a word with dprintf, then BYTES written (or, with 0,
 * writes until the rock holds the relay back: the server reads nothing
 * for a while), then a close with the server's greeting unread: a reset,
 * which may drop what was still on its way to the relay. The peer must
 * hear a reset, not an end. The greeting is waited for (not read): a
 * close before it came would be an ordinary end, as in TCP. */
static void
run_stdio_abort(void)
{
	uint8_t out[CHUNK];
	int fd = dial(0), idle = 0;
	struct pollfd pfd;
	size_t sent = 0, n0;
	ssize_t n;

	memset(out, 'a', sizeof(out));
	if (dprintf(fd, "go\n") != 3)
		die("dprintf");
	for (; sent < total; sent += n0) {
		n0 = total - sent < CHUNK ? total - sent : CHUNK;
		write_all(fd, out, n0);
	}
	if (total == 0 && fcntl(fd, F_SETFL, O_NONBLOCK) != 0)
		die("fcntl");
	while (total == 0 && idle < 100) {
		if ((n = write(fd, out, sizeof(out))) > 0) {
			sent += (size_t)n;
			idle = 0;
		} else if (n < 0 && errno == EAGAIN) {
			idle++;
			usleep(10000);
		} else {
			die("write");
		}
	}
	pfd.fd = fd;
	pfd.events = POLLIN;
	if (poll(&pfd, 1, 10000) != 1)
		fail("no greeting from the server in 10 s");
	close(fd);
	total = sent;
	sleep(1);
}

/* ---- two threads on one descriptor: one writes, one reads */

static void *
writer(void *arg)
{
	int fd = *(int *)arg;
	uint8_t a[CHUNK / 2], b[CHUNK / 2];
	size_t off, n;

	for (off = 0; off < total; off += n) {
		struct iovec iov[2];
		size_t h;
		ssize_t w;

		n = total - off < CHUNK ? total - off : CHUNK;
		h = n / 2;
		fill(a, off, h);
		fill(b, off + h, n - h);
		iov[0] = (struct iovec){ a, h };
		iov[1] = (struct iovec){ b, n - h };
		w = writev(fd, iov, 2);
		if (w < 0)
			die("writev");
		n = (size_t)w;
	}
	return NULL;
}

static void
run_threads(void)
{
	uint8_t in[CHUNK];
	int fd = dial(0);
	pthread_t t;
	size_t off = 0;

	if (pthread_create(&t, NULL, writer, &fd) != 0)
		die("pthread_create");
	while (off < total) {
		struct iovec iov = { in, sizeof(in) };
		ssize_t r = readv(fd, &iov, 1);

		if (r < 0)
			die("readv");
		if (r == 0)
			fail("end of stream at %zu of %zu", off, total);
		check(in, off, (size_t)r);
		off += (size_t)r;
	}
	pthread_join(t, NULL);
	close(fd);
}

/* ---- non-blocking styles: one loop, readiness from poll/select/epoll */

struct nb {
	int fd;
	size_t sent, got;
};

/* 1: sent something or would block; sends stay within 1 MiB of the reads
 * so the echo never stalls on full buffers. */
static void
nb_write(struct nb *s)
{
	uint8_t out[CHUNK];

	while (s->sent < total && s->sent - s->got < (1u << 20)) {
		size_t n = total - s->sent < CHUNK ? total - s->sent : CHUNK;
		struct iovec iov = { out, n };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
		ssize_t w;

		fill(out, s->sent, n);
		if ((w = sendmsg(s->fd, &m, MSG_NOSIGNAL)) < 0) {
			if (errno == EAGAIN)
				return;
			die("sendmsg");
		}
		s->sent += (size_t)w;
	}
}

static void
nb_read(struct nb *s)
{
	uint8_t in[CHUNK];
	ssize_t r;

	for (;;) {
		struct iovec iov = { in, sizeof(in) };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };

		if ((r = recvmsg(s->fd, &m, 0)) < 0) {
			if (errno == EAGAIN)
				return;
			die("recvmsg");
		}
		if (r == 0)
			fail("end of stream at %zu of %zu", s->got, total);
		check(in, s->got, (size_t)r);
		s->got += (size_t)r;
	}
}

static void
run_poll(int use_select)
{
	struct nb s = { dial(1), 0, 0 };

	while (s.got < total) {
		int want_out = s.sent < total && s.sent - s.got < (1u << 20);
		int rd, wr, n;

		if (use_select) {
			fd_set r, w;

			FD_ZERO(&r);
			FD_ZERO(&w);
			FD_SET(s.fd, &r);
			if (want_out)
				FD_SET(s.fd, &w);
			n = select(s.fd + 1, &r, &w, NULL, NULL);
			rd = n > 0 && FD_ISSET(s.fd, &r);
			wr = n > 0 && FD_ISSET(s.fd, &w);
		} else {
			struct pollfd p = { s.fd, (short)(POLLIN | (want_out ? POLLOUT : 0)), 0 };

			n = poll(&p, 1, -1);
			if (n > 0 && (p.revents & (POLLERR | POLLHUP | POLLNVAL)))
				fail("poll reported an error (revents %zu at %zu)",
				    (size_t)p.revents, s.got);
			rd = n > 0 && (p.revents & POLLIN);
			wr = n > 0 && (p.revents & POLLOUT);
		}
		if (n < 0)
			die(use_select ? "select" : "poll");
		if (n == 0)
			fail("woke with nothing ready (%zu, %zu)", s.got, s.sent);
		if (wr)
			nb_write(&s);
		if (rd)
			nb_read(&s);
	}
	close(s.fd);
}

/* Many rocks in one process, one poll over all of them. */
#define MANY 8

static void
run_many(void)
{
	struct nb s[MANY];
	struct pollfd p[MANY];
	int i, done = 0;

	for (i = 0; i < MANY; i++)
		s[i] = (struct nb){ dial(1), 0, 0 };
	while (done < MANY) {
		for (i = 0; i < MANY; i++)
			p[i] = (struct pollfd){ s[i].got < total ? s[i].fd : -1,
			    (short)(POLLIN | (s[i].sent < total &&
			    s[i].sent - s[i].got < (1u << 20) ? POLLOUT : 0)), 0 };
		if (poll(p, MANY, -1) <= 0)
			die("poll");
		for (i = 0; i < MANY; i++) {
			if (p[i].revents & (POLLERR | POLLHUP | POLLNVAL))
				fail("poll reported an error on rock %d", i);
			if (p[i].revents & POLLOUT)
				nb_write(&s[i]);
			if (p[i].revents & POLLIN) {
				nb_read(&s[i]);
				if (s[i].got == total)
					done++;
			}
		}
	}
	for (i = 0; i < MANY; i++)
		close(s[i].fd);
}

/* Many rocks in one epoll set, one-shot: each re-arm gives the rock new
 * data (generation and index), so an event that comes back with stale or
 * foreign data is the shim's bookkeeping losing track of a registration. */
static void
run_epoll_many(void)
{
	struct nb s[MANY];
	uint32_t gen[MANY];
	int ep = epoll_create1(EPOLL_CLOEXEC), i, done = 0;

	if (ep < 0)
		die("epoll_create1");
	for (i = 0; i < MANY; i++) {
		struct epoll_event ev = { EPOLLIN | EPOLLOUT | EPOLLONESHOT,
		    { .u64 = (uint64_t)i } };

		s[i] = (struct nb){ dial(1), 0, 0 };
		gen[i] = 0;
		if (epoll_ctl(ep, EPOLL_CTL_ADD, s[i].fd, &ev) != 0)
			die("epoll_ctl ADD");
	}
	while (done < MANY) {
		struct epoll_event got[MANY];
		int n = epoll_wait(ep, got, MANY, -1), k;

		if (n <= 0)
			die("epoll_wait");
		for (k = 0; k < n; k++) {
			struct epoll_event ev;

			i = (int)(got[k].data.u64 & 0xff);
			if (i >= MANY || got[k].data.u64 >> 8 != gen[i])
				fail("epoll data %llx: not a live registration",
				    (unsigned long long)got[k].data.u64);
			if (got[k].events & (EPOLLERR | EPOLLHUP))
				fail("epoll reported an error on rock %d", i);
			if (got[k].events & EPOLLOUT)
				nb_write(&s[i]);
			if (got[k].events & EPOLLIN) {
				nb_read(&s[i]);
				nb_write(&s[i]);
				if (s[i].got == total) {
					done++;
					continue;	/* not re-armed */
				}
			}
			gen[i]++;
			ev.events = EPOLLIN | EPOLLONESHOT | (s[i].sent < total &&
			    s[i].sent - s[i].got < (1u << 20) ? EPOLLOUT : 0);
			ev.data.u64 = (uint64_t)gen[i] << 8 | (uint64_t)i;
			if (epoll_ctl(ep, EPOLL_CTL_MOD, s[i].fd, &ev) != 0)
				die("epoll_ctl MOD");
		}
	}
	close(ep);
	for (i = 0; i < MANY; i++)
		close(s[i].fd);
}

static void
run_epoll(uint32_t how)
{
	struct nb s = { dial(1), 0, 0 };
	struct epoll_event ev = { EPOLLIN | EPOLLOUT | how, { .fd = 0 } };
	int ep = epoll_create1(EPOLL_CLOEXEC), out_on = 1;

	ev.data.fd = s.fd;
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, s.fd, &ev) != 0)
		die("epoll_ctl ADD");
	while (s.got < total) {
		struct epoll_event got;
		int n = epoll_wait(ep, &got, 1, -1);

		if (n < 0)
			die("epoll_wait");
		if (n == 0 || got.data.fd != s.fd)
			fail("epoll_wait returned %zu events, not ours (%zu)", (size_t)n, s.got);
		if (got.events & (EPOLLERR | EPOLLHUP))
			fail("epoll reported an error (events %zu at %zu)",
			    (size_t)got.events, s.got);
		if (got.events & EPOLLOUT)
			nb_write(&s);
		if (got.events & EPOLLIN) {
			nb_read(&s);
			nb_write(&s);	/* the window may have opened */
		}
		/* Level-triggered interest in EPOLLOUT only while there is
		 * something to send; one-shot interest is re-armed each time. */
		if ((how & EPOLLONESHOT) || (!(how & EPOLLET) && out_on &&
		    s.sent == total)) {
			out_on = s.sent < total;
			ev.events = EPOLLIN | (out_on ? EPOLLOUT : 0) | how;
			if (epoll_ctl(ep, EPOLL_CTL_MOD, s.fd, &ev) != 0)
				die("epoll_ctl MOD");
		}
	}
	close(ep);
	close(s.fd);
}

/* ---- socket options: what the program set, on every data connection */

static void
set_int(int fd, int level, int opt, int v, const char *name)
{
	if (setsockopt(fd, level, opt, &v, sizeof(v)) != 0)
		die(name);
}

/* kernel: past any preloaded library, the socket the descriptor names. */
static int
get_int(int fd, int level, int opt, int kernel)
{
	int v = -1;
	socklen_t len = sizeof(v);

	if ((kernel ? syscall(SYS_getsockopt, fd, level, opt, &v, &len) :
	    getsockopt(fd, level, opt, &v, &len)) != 0)
		die("getsockopt");
	return v;
}

static struct {
	int level, opt;
	const char *name;
	int program, kernel;	/* what getsockopt says; the data connection */
} want[] = {
	{ SOL_SOCKET, SO_RCVBUF, "SO_RCVBUF", 0, 0 },	/* the kernel's doubling */
	{ SOL_SOCKET, SO_SNDBUF, "SO_SNDBUF", 0, 0 },
	{ IPPROTO_TCP, TCP_NODELAY, "TCP_NODELAY", 1, 1 },
	{ SOL_SOCKET, SO_KEEPALIVE, "SO_KEEPALIVE", 1, 1 },
	/* 2 + 3 * 4 = 14 s: sooner than the engine's backstop (21 s) */
	{ IPPROTO_TCP, TCP_KEEPIDLE, "TCP_KEEPIDLE", 2, 2 },
	{ IPPROTO_TCP, TCP_KEEPINTVL, "TCP_KEEPINTVL", 3, 3 },
	{ IPPROTO_TCP, TCP_KEEPCNT, "TCP_KEEPCNT", 4, 4 },
	/* kept by the rock, never on a data connection */
	{ IPPROTO_TCP, TCP_USER_TIMEOUT, "TCP_USER_TIMEOUT", 5000, 0 },
};
#define NWANT (sizeof(want) / sizeof(want[0]))

/* TCP_RTO_MAX_MS (Linux 6.15): the program's value recorded and reported,
 * checked as the kernel checks it; the data connection keeps the engine's
 * bound, 3 s on this path (doc/paths.md). */
#ifndef TCP_RTO_MAX_MS
#define TCP_RTO_MAX_MS 44
#endif
/* The engine's bound on the data connection: 3 s on this path, unless its
 * handshake's round trip was not this path's. A SYN-ACK the tbf queue
 * dropped makes the client resend its SYN a second later, and the answer
 * echoes the first SYN's timestamp: TCP's first sample is then over 1 s,
 * and the bound 2 x 3R (doc/paths.md) from it. The connection says so: a
 * retransmission on its record. */
static int
engine_rto_bound(int fd, int sys)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	int v = get_int(fd, IPPROTO_TCP, TCP_RTO_MAX_MS, 1);

	if (v == (sys < 3000 ? sys : 3000))
		return 1;
	if (syscall(SYS_getsockopt, fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
		die("getsockopt(TCP_INFO)");
	/* 2 x 3R with R over a second (the resent SYN's), as the kernel
	 * keeps it: in jiffies, so 6570 ms reads back as 6572 at HZ=250,
	 * within 10 ms at HZ=100. */
	if (ti.tcpi_total_retrans == 0 || v < 6000 - 10 || v > sys)
		return 0;
	fprintf(stderr, "rock-io sockopts: the data connection's bound is %d ms, "
	    "from a handshake round trip of %d ms (%u retransmissions)\n",
	    v, v / 6, ti.tcpi_total_retrans);
	return 1;
}

static void
check_rto_max(int fd)
{
	int v = -1, sys = -1;
	socklen_t len = sizeof(v);
	FILE *f;

	if (syscall(SYS_getsockopt, fd, IPPROTO_TCP, TCP_RTO_MAX_MS, &v, &len) != 0)
		return;	/* an older kernel: nothing to bound, nothing to report */
	if ((f = fopen("/proc/sys/net/ipv4/tcp_rto_max_ms", "r")) == NULL ||
	    fscanf(f, "%d", &sys) != 1)
		die("/proc/sys/net/ipv4/tcp_rto_max_ms");
	fclose(f);
	if ((v = get_int(fd, IPPROTO_TCP, TCP_RTO_MAX_MS, 0)) != sys)
		fail("getsockopt(TCP_RTO_MAX_MS) says %d before any set, the "
		    "system's is %d", v, sys);
	if (!engine_rto_bound(fd, sys))
		fail("the data connection's TCP_RTO_MAX_MS is %d, want the "
		    "engine's 3000", get_int(fd, IPPROTO_TCP, TCP_RTO_MAX_MS, 1));
	if (setsockopt(fd, IPPROTO_TCP, TCP_RTO_MAX_MS, &(int){ 999 },
	    sizeof(int)) == 0 || errno != EINVAL)
		fail("TCP_RTO_MAX_MS 999: want EINVAL, as the kernel says");
	set_int(fd, IPPROTO_TCP, TCP_RTO_MAX_MS, 5000, "TCP_RTO_MAX_MS");
	if ((v = get_int(fd, IPPROTO_TCP, TCP_RTO_MAX_MS, 0)) != 5000 ||
	    !engine_rto_bound(fd, sys))
		fail("TCP_RTO_MAX_MS set to 5000: getsockopt says %d, the data "
		    "connection's %d", v, get_int(fd, IPPROTO_TCP, TCP_RTO_MAX_MS, 1));
}

static void
check_opts(int fd, const char *when, size_t upto)
{
	struct linger l = { -1, -1 }, k = { -1, -1 };
	socklen_t len = sizeof(l);
	size_t i;
	int v;

	for (i = 0; i < upto; i++) {
		if ((v = get_int(fd, want[i].level, want[i].opt, 0)) != want[i].program)
			fail("%s: getsockopt(%s) says %d, set %d", when,
			    want[i].name, v, want[i].program);
		if ((v = get_int(fd, want[i].level, want[i].opt, 1)) != want[i].kernel)
			fail("%s: the data connection's %s is %d, want %d", when,
			    want[i].name, v, want[i].kernel);
	}
	if (getsockopt(fd, SOL_SOCKET, SO_LINGER, &l, &len) != 0 ||
	    syscall(SYS_getsockopt, fd, SOL_SOCKET, SO_LINGER, &k, &len) != 0)
		die("getsockopt(SO_LINGER)");
	if (l.l_onoff != 1 || l.l_linger != 7 || k.l_onoff != 0)
		fail("%s: SO_LINGER says {%d, %d}, the data connection's {%d, %d}; "
		    "want {1, 7} and {0, _}", when, l.l_onoff, l.l_linger,
		    k.l_onoff, k.l_linger);
}

/* A rock says of the options its program never set what the kernel said
 * of its socket just before it became one: the first rock of a process
 * reads it, later ones take the library's record of that reading. Two
 * rocks opened here, with nothing set, must say the same. */
static void
unset_options_agree(void)
{
	static const struct { int level, opt; const char *name; } o[] = {
		{ SOL_SOCKET, SO_KEEPALIVE, "SO_KEEPALIVE" },
		{ IPPROTO_TCP, TCP_KEEPIDLE, "TCP_KEEPIDLE" },
		{ IPPROTO_TCP, TCP_KEEPINTVL, "TCP_KEEPINTVL" },
		{ IPPROTO_TCP, TCP_KEEPCNT, "TCP_KEEPCNT" },
		{ IPPROTO_TCP, TCP_USER_TIMEOUT, "TCP_USER_TIMEOUT" },
	};
	struct linger la, lb;
	socklen_t len = sizeof(la);
	int a = dial(0), b = dial(0);
	size_t i;

	for (i = 0; i < sizeof(o) / sizeof(o[0]); i++) {
		int va = get_int(a, o[i].level, o[i].opt, 0);
		int vb = get_int(b, o[i].level, o[i].opt, 0);

		if (va != vb)
			fail("%s never set: the first rock says %d, the second %d",
			    o[i].name, va, vb);
	}
	if (getsockopt(a, SOL_SOCKET, SO_LINGER, &la, &len) != 0 ||
	    getsockopt(b, SOL_SOCKET, SO_LINGER, &lb, &len) != 0)
		die("getsockopt(SO_LINGER)");
	if (la.l_onoff != 0 || lb.l_onoff != 0)
		fail("SO_LINGER never set: the rocks say {%d, %d} and {%d, %d}; "
		    "want off", la.l_onoff, la.l_linger, lb.l_onoff, lb.l_linger);
	close(a);
	close(b);
}

static void
run_sockopts(void)
{
	uint8_t out[CHUNK], in[CHUNK];
	struct linger l = { 1, 7 };
	int fd, probe = socket(AF_INET, SOCK_STREAM, 0);
	size_t off, n;

	unset_options_agree();
	/* The doubled sizes, as a plain socket reports them. */
	set_int(probe, SOL_SOCKET, SO_RCVBUF, 65536, "SO_RCVBUF");
	set_int(probe, SOL_SOCKET, SO_SNDBUF, 98304, "SO_SNDBUF");
	want[0].program = want[0].kernel = get_int(probe, SOL_SOCKET, SO_RCVBUF, 0);
	want[1].program = want[1].kernel = get_int(probe, SOL_SOCKET, SO_SNDBUF, 0);
	close(probe);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	set_int(fd, SOL_SOCKET, SO_RCVBUF, 65536, "SO_RCVBUF");
	set_int(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY");
	set_int(fd, SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE");
	set_int(fd, IPPROTO_TCP, TCP_KEEPIDLE, 2, "TCP_KEEPIDLE");
	set_int(fd, IPPROTO_TCP, TCP_KEEPINTVL, 3, "TCP_KEEPINTVL");
	set_int(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, 5000, "TCP_USER_TIMEOUT");
	if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l)) != 0)
		die("SO_LINGER");
	fd = dial_fd(fd, 0);
	if (setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &(int){ -1 }, sizeof(int)) == 0 ||
	    errno != EINVAL)
		fail("TCP_USER_TIMEOUT -1: want EINVAL, as the kernel says");
	if (setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &(int){ 0 }, sizeof(int)) == 0 ||
	    errno != EINVAL)
		fail("TCP_KEEPCNT 0: want EINVAL, as the kernel says");
	/* The rest once connected, on what is a rock by now. */
	set_int(fd, SOL_SOCKET, SO_SNDBUF, 98304, "SO_SNDBUF");
	set_int(fd, IPPROTO_TCP, TCP_KEEPCNT, 4, "TCP_KEEPCNT");
	check_opts(fd, "connected", NWANT);
	check_rto_max(fd);
	for (off = 0; off < total; off += n) {
		n = total - off < CHUNK ? total - off : CHUNK;
		fill(out, off, n);
		write_all(fd, out, n);
		read_exact(fd, in, n, 0);
		check(in, off, n);
	}
	check_opts(fd, "at the end", NWANT);
	close(fd);
}

/* ---- sendmmsg and recvmmsg: four messages a chunk */

static void
refused(ssize_t r, const char *what)
{
	if (r != -1 || errno != EINVAL)
		fail("%s on a rock: returned %zd (%s), want -1 EINVAL", what, r,
		    r < 0 ? strerror(errno) : "no error");
}

static void
splice_refused(int fd)
{
	int p[2], file;
	char path[] = "/tmp/rock-io.XXXXXX";

	if (pipe(p) != 0 || (file = mkstemp(path)) < 0)
		die("pipe or mkstemp");
	unlink(path);
	if (write(p[1], "x", 1) != 1 || write(file, "y", 1) != 1)
		die("write");
	/* Into first: without a refusal it returns at once, uncounted. */
	refused(splice(p[0], NULL, fd, NULL, 1, 0), "splice into");
	refused(splice(fd, NULL, p[1], NULL, 4096, SPLICE_F_NONBLOCK), "splice out of");
	refused(copy_file_range(file, &(off_t){ 0 }, fd, NULL, 1, 0),
	    "copy_file_range into");
	refused(copy_file_range(fd, NULL, file, &(off_t){ 0 }, 1, 0),
	    "copy_file_range out of");
	close(p[0]);
	close(p[1]);
	close(file);
}

static void
mmsg_chunk(int fd, uint8_t *out, uint8_t *in, size_t n)
{
	struct iovec iov[4];
	struct mmsghdr m[4];
	static uint8_t bufs[4][CHUNK / 4];
	size_t got = 0, q = (n + 3) / 4, i;
	int k, sent = 0;

	memset(m, 0, sizeof(m));
	for (i = 0; i < 4; i++) {
		iov[i] = (struct iovec){ out + i * q, i * q >= n ? 0 : n - i * q < q ? n - i * q : q };
		m[i].msg_hdr = (struct msghdr){ .msg_iov = &iov[i], .msg_iovlen = 1 };
	}
	while (sent < 4) {
		if ((k = sendmmsg(fd, m + sent, (unsigned)(4 - sent), 0)) <= 0)
			die("sendmmsg");
		for (i = (size_t)sent; i < (size_t)(sent + k); i++)
			if (m[i].msg_len != iov[i].iov_len)
				fail("sendmmsg sent %u of %zu", m[i].msg_len, iov[i].iov_len);
		sent += k;
	}
	/* A stream fills the messages in order, each with what has come:
	 * their bytes, one after the other, are the stream's. */
	while (got < n) {
		for (i = 0; i < 4; i++) {
			iov[i] = (struct iovec){ bufs[i], sizeof(bufs[i]) };
			m[i].msg_hdr = (struct msghdr){ .msg_iov = &iov[i], .msg_iovlen = 1 };
		}
		if ((k = recvmmsg(fd, m, 4, MSG_WAITFORONE, NULL)) <= 0)
			die("recvmmsg");
		for (i = 0; i < (size_t)k; i++) {
			if (m[i].msg_len == 0)
				fail("end of stream with %zu of %zu left", n - got, total);
			if (m[i].msg_len > n - got)
				fail("recvmmsg: %zu bytes more than were sent",
				    m[i].msg_len - (n - got));
			memcpy(in + got, bufs[i], m[i].msg_len);
			got += m[i].msg_len;
		}
	}
}

static void
run_mmsg(void)
{
	uint8_t out[CHUNK], in[CHUNK];
	int fd = dial(0);
	size_t off, n;

	splice_refused(fd);
	for (off = 0; off < total; off += n) {
		n = total - off < CHUNK ? total - off : CHUNK;
		fill(out, off, n);
		mmsg_chunk(fd, out, in, n);
		check(in, off, n);
	}
	close(fd);
}

int
main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: rock-io MODE HOST PORT BYTES\n");
		return 2;
	}
	mode = argv[1];
	dst.sin_family = AF_INET;
	dst.sin_port = htons((uint16_t)atoi(argv[3]));
	if (inet_pton(AF_INET, argv[2], &dst.sin_addr) != 1)
		fail("bad address %s", argv[2]);
	total = strtoull(argv[4], NULL, 10);
	alarm(600);
	if (strcmp(mode, "connect") == 0)
		run_connect((int)total);
	if (strcmp(mode, "blocking") == 0)
		run_blocking(0, 0, 0);
	else if (strcmp(mode, "waitall") == 0)
		run_blocking(1, 0, 0);
	else if (strcmp(mode, "sendfile") == 0)
		run_blocking(0, 1, 0);
	else if (strcmp(mode, "halfclose") == 0)
		run_blocking(0, 0, 1);
	else if (strcmp(mode, "threads") == 0)
		run_threads();
	else if (strcmp(mode, "poll") == 0)
		run_poll(0);
	else if (strcmp(mode, "select") == 0)
		run_poll(1);
	else if (strcmp(mode, "dup") == 0)
		run_dup();
	else if (strcmp(mode, "many") == 0)
		run_many();
	else if (strcmp(mode, "epoll-many") == 0)
		run_epoll_many();
	else if (strcmp(mode, "epoll-lt") == 0)
		run_epoll(0);
	else if (strcmp(mode, "epoll-et") == 0)
		run_epoll(EPOLLET);
	else if (strcmp(mode, "epoll-oneshot") == 0)
		run_epoll(EPOLLONESHOT);
	else if (strcmp(mode, "sockopts") == 0)
		run_sockopts();
	else if (strcmp(mode, "mmsg") == 0)
		run_mmsg();
	else if (strcmp(mode, "stdio") == 0)
		run_stdio();
	else if (strcmp(mode, "stdio-tail") == 0)
		run_stdio_tail();
	else if (strcmp(mode, "stdio-abort") == 0)
		run_stdio_abort();
	else {
		fprintf(stderr, "rock-io: unknown mode %s\n", mode);
		return 2;
	}
	if (strcmp(mode, "stdio-tail") == 0)
		printf("%s: %zu bytes, then the end\n", mode, total);
	else if (strcmp(mode, "stdio-abort") == 0)
		printf("%s: %zu bytes written, then closed unread\n", mode, total);
	else
		printf("%s: %zu bytes echoed byte-exact%s\n", mode, total,
		    strcmp(mode, "many") == 0 || strcmp(mode, "epoll-many") == 0 ?
		    " on each of 8 connections" : "");
	return 0;
}
