/* echod.c: an echo server for many connections in one process (epoll): every byte back, then the end; a backend for tests with thousands of rocks. */
/*
 * Usage: echod PORT       listens on 127.0.0.1:PORT until killed
 *
 * Each connection's bytes are written back in order; what the kernel does
 * not take yet waits, and reading that connection pauses meanwhile. At the
 * client's end of stream, once all is written back, the write side is shut
 * too; the connection is closed when both are done or on any error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "testtool.h"

#define BUF 4096

struct conn {
	int fd;
	size_t have, off;	/* bytes held; the next to write */
	int eof;		/* the client's end was read */
	uint8_t buf[BUF];
};

static int ep;

static void
watch(struct conn *c, int op)
{
	struct epoll_event ev = { .data.ptr = c };

	ev.events = c->off < c->have ? EPOLLOUT : EPOLLIN;
	if (epoll_ctl(ep, op, c->fd, &ev) != 0)
		tt_die("epoll_ctl");
}

static void
drop(struct conn *c)
{
	close(c->fd);
	free(c);
}

/* 0: keep the connection; -1: it is over. */
static int
step(struct conn *c)
{
	ssize_t n;

	if (c->off < c->have) {
		n = send(c->fd, c->buf + c->off, c->have - c->off, MSG_NOSIGNAL);
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		c->off += (size_t)n;
	} else {
		n = recv(c->fd, c->buf, sizeof(c->buf), 0);
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		c->eof = n == 0;
		c->have = (size_t)n;
		c->off = 0;
	}
	if (c->eof && c->off == c->have) {
		shutdown(c->fd, SHUT_WR);
		return -1;
	}
	return 0;
}

static void
accept_all(int lfd)
{
	struct conn *c;
	int fd;

	while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		if ((c = calloc(1, sizeof(*c))) == NULL)
			tt_die("calloc");
		c->fd = fd;
		watch(c, EPOLL_CTL_ADD);
	}
	if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
		tt_die("accept");
}

int
main(int argc, char **argv)
{
	struct epoll_event evs[256], lev = { .events = EPOLLIN };
	struct conn listener;
	struct rlimit rl;
	int lfd, n, i;

	if (argc != 2) {
		static const char usage[] = "usage: echod PORT\n";

		(void)!write(2, usage, sizeof(usage) - 1);
		return 2;
	}
	/* Thousands of connections: all the descriptors the hard limit gives. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	lfd = tt_listen(argv[1], 4096);
	if ((ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
		tt_die("epoll_create1");
	lev.data.ptr = &listener;
	if (fcntl(lfd, F_SETFL, O_NONBLOCK) != 0 ||
	    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev) != 0)
		tt_die("listener");
	for (;;) {
		if ((n = epoll_wait(ep, evs, 256, -1)) < 0) {
			if (errno == EINTR)
				continue;
			tt_die("epoll_wait");
		}
		for (i = 0; i < n; i++) {
			struct conn *c = evs[i].data.ptr;

			if (c == &listener)
				accept_all(lfd);
			else if (step(c) != 0)
				drop(c);
			else
				watch(c, EPOLL_CTL_MOD);
		}
	}
}
