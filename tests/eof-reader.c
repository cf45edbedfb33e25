/* eof-reader.c: a download client, one way of waiting for data per mode, that tells a clean end of file from an error exactly. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testtool.h"

/*
 * Usage: eof-reader MODE HOST PORT OUT
 *
 * Connects, then reads the stream to its end into OUT, waiting for data
 * the MODE's way:
 *   read       blocking read(2)
 *   waitall    blocking recv(2) with MSG_WAITALL, 64 KiB at a time
 *   readv      blocking readv(2) into three buffers
 *   recvmmsg   blocking recvmmsg(2), MSG_WAITFORONE, four messages
 *   poll       non-blocking, poll(2) for POLLIN|POLLRDHUP, read to EAGAIN
 *   ppoll      so, with ppoll(2) and an empty signal mask
 *   select     non-blocking, select(2), read to EAGAIN
 *   pselect    so, with pselect(2) and an empty signal mask
 *   epoll      non-blocking, level-triggered epoll, one read per event
 *   epoll-et   non-blocking, edge-triggered epoll with EPOLLRDHUP, read
 *              to EAGAIN
 *   stdio      the socket made standard input, read with fgets(3): the
 *              pattern's bytes are text-safe (tests/traffic's are not, so
 *              the server sends bytes with no NUL: see traffic serve)
 *   fork       a forked child reads (blocking read); the parent waits
 * Exit 0 at a clean end of file, 1 with "eof-reader MODE: error ENAME
 * after N bytes" on stderr when a call failed, 2 on a usage error. Then
 * "eof-reader MODE: empty wakeups N": how often the waiting modes were
 * woken for a read that found nothing (EAGAIN at once). An end
 * of file is a clean one only when read() said 0; the verdict (all the
 * bytes, or a prefix) is the caller's.
 */

#define BUF 65536

static const char *mode;
static int out;
static unsigned long long got;
/* Wakeups whose first read found nothing: readiness for no data, as a
 * FIN shown before the engine judged it would be. */
static unsigned long empty;

static void
fail(int err)
{
	fprintf(stderr, "eof-reader %s: error %s after %llu bytes (%s)\n", mode,
	    strerrorname_np(err) ? strerrorname_np(err) : "E?", got, strerror(err));
	fprintf(stderr, "eof-reader %s: empty wakeups %lu\n", mode, empty);
	exit(1);
}

static void
put(const void *p, size_t n)
{
	const char *c = p;
	ssize_t w;

	got += n;
	while (n > 0) {
		if ((w = write(out, c, n)) < 0) {
			if (errno == EINTR)
				continue;
			tt_die("write OUT");
		}
		c += w;
		n -= (size_t)w;
	}
}

static void
nonblocking(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		tt_die("fcntl");
}

/* After a wakeup: non-blocking reads until EAGAIN (0) or the end (1). */
static int
drain(int fd, int once)
{
	static char buf[BUF];
	ssize_t n;
	int first = 1;

	for (;; first = 0) {
		if ((n = read(fd, buf, sizeof(buf))) > 0) {
			put(buf, (size_t)n);
			if (once)
				return 0;
			continue;
		}
		if (n == 0)
			return 1;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN) {
			empty += first;
			return 0;
		}
		fail(errno);
	}
}

/* Blocking read(2), or recv(2) with MSG_WAITALL, whose short count is
 * the end's or an error's: the next call says which. */
static void
by_read(int fd, int waitall)
{
	static char buf[BUF];
	ssize_t n;

	while ((n = waitall ? recv(fd, buf, sizeof(buf), MSG_WAITALL) :
	    read(fd, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno != EINTR)
			fail(errno);
		if (n > 0)
			put(buf, (size_t)n);
	}
}

static void
by_readv(int fd)
{
	static char a[1000], b[7000], c[BUF];
	struct iovec v[3] = { { a, sizeof(a) }, { b, sizeof(b) }, { c, sizeof(c) } };
	ssize_t n;
	size_t left, k;
	int i;

	while ((n = readv(fd, v, 3)) != 0) {
		if (n < 0 && errno != EINTR)
			fail(errno);
		for (i = 0, left = n > 0 ? (size_t)n : 0; left > 0; i++) {
			k = left < v[i].iov_len ? left : v[i].iov_len;
			put(v[i].iov_base, k);
			left -= k;
		}
	}
}

static void
by_recvmmsg(int fd)
{
	static char buf[4][16384];
	struct mmsghdr m[4];
	struct iovec v[4];
	int n, i;

	for (;;) {
		memset(m, 0, sizeof(m));
		for (i = 0; i < 4; i++) {
			v[i] = (struct iovec){ buf[i], sizeof(buf[i]) };
			m[i].msg_hdr.msg_iov = &v[i];
			m[i].msg_hdr.msg_iovlen = 1;
		}
		if ((n = recvmmsg(fd, m, 4, MSG_WAITFORONE, NULL)) < 0) {
			if (errno == EINTR)
				continue;
			fail(errno);
		}
		for (i = 0; i < n; i++) {
			if (m[i].msg_len == 0)
				return;
			put(buf[i], m[i].msg_len);
		}
	}
}

static void
by_poll(int fd, int pp)
{
	struct pollfd p = { fd, POLLIN | POLLRDHUP, 0 };
	sigset_t none;

	sigemptyset(&none);
	nonblocking(fd);
	for (;;) {
		if ((pp ? ppoll(&p, 1, NULL, &none) : poll(&p, 1, -1)) < 0) {
			if (errno == EINTR)
				continue;
			tt_die("poll");
		}
		/* A hang-up alone is no end: read says what it is. */
		if (p.revents != 0 && drain(fd, 0))
			return;
	}
}

static void
by_select(int fd, int ps)
{
	fd_set rs;
	sigset_t none;

	sigemptyset(&none);
	nonblocking(fd);
	for (;;) {
		FD_ZERO(&rs);
		FD_SET(fd, &rs);
		if ((ps ? pselect(fd + 1, &rs, NULL, NULL, NULL, &none) :
		    select(fd + 1, &rs, NULL, NULL, NULL)) < 0) {
			if (errno == EINTR)
				continue;
			tt_die("select");
		}
		if (FD_ISSET(fd, &rs) && drain(fd, 0))
			return;
	}
}

static void
by_epoll(int fd, int edge)
{
	struct epoll_event ev = { EPOLLIN, { .fd = fd } };
	int ep = epoll_create1(EPOLL_CLOEXEC), n;

	if (edge)
		ev.events |= EPOLLET | EPOLLRDHUP;
	nonblocking(fd);
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
		tt_die("epoll");
	for (;;) {
		if ((n = epoll_wait(ep, &ev, 1, -1)) < 0) {
			if (errno == EINTR)
				continue;
			tt_die("epoll_wait");
		}
		/* Level-triggered: one read per event, the kernel says again. */
		if (n > 0 && drain(fd, !edge))
			return;
	}
}

static void
by_stdio(int fd)
{
	static char line[8192];
	size_t n;

	if (dup2(fd, 0) != 0)
		tt_die("dup2");
	close(fd);
	errno = 0;
	while (fgets(line, sizeof(line), stdin) != NULL) {
		n = strlen(line);
		put(line, n);
	}
	if (ferror(stdin))
		fail(errno != 0 ? errno : EIO);
}

static void
by_child(int fd)
{
	pid_t pid;
	int st;

	if ((pid = fork()) < 0)
		tt_die("fork");
	if (pid == 0) {
		by_read(fd, 0);
		_exit(0);
	}
	close(fd);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			tt_die("waitpid");
	exit(WIFEXITED(st) ? WEXITSTATUS(st) : 3);
}

int
main(int argc, char **argv)
{
	int fd;

	if (argc != 5) {
		fprintf(stderr, "usage: eof-reader MODE HOST PORT OUT\n");
		return 2;
	}
	mode = argv[1];
	signal(SIGPIPE, SIG_IGN);
	if ((out = open(argv[4], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
		tt_die(argv[4]);
	fd = tt_dial(argv[2], argv[3], SOCK_STREAM);
	if (strcmp(mode, "read") == 0 || strcmp(mode, "waitall") == 0)
		by_read(fd, mode[0] == 'w');
	else if (strcmp(mode, "readv") == 0)
		by_readv(fd);
	else if (strcmp(mode, "recvmmsg") == 0)
		by_recvmmsg(fd);
	else if (strcmp(mode, "poll") == 0 || strcmp(mode, "ppoll") == 0)
		by_poll(fd, mode[0] == 'p' && mode[1] == 'p');
	else if (strcmp(mode, "select") == 0 || strcmp(mode, "pselect") == 0)
		by_select(fd, mode[0] == 'p');
	else if (strcmp(mode, "epoll") == 0)
		by_epoll(fd, 0);
	else if (strcmp(mode, "epoll-et") == 0)
		by_epoll(fd, 1);
	else if (strcmp(mode, "stdio") == 0)
		by_stdio(fd);
	else if (strcmp(mode, "fork") == 0)
		by_child(fd);
	else {
		fprintf(stderr, "eof-reader: unknown mode %s\n", mode);
		return 2;
	}
	fprintf(stderr, "eof-reader %s: empty wakeups %lu\n", mode, empty);
	return 0;
}
