/* write-bench-epoll.c: an epoll client with many connections doing 64-byte request/response rounds; prints its main thread's CPU split (see write-bench.sh). */
#include "config.h"

/*
 * Usage: write-bench-epoll HOST PORT N [SECONDS [HOLD_MS]]
 * Opens N connections to HOST:PORT (an echo service), makes them
 * non-blocking, registers each with one epoll set (EPOLLIN, level-triggered;
 * those ADDs timed), then for SECONDS (default 2) runs rounds: 64 bytes
 * written on every connection, and epoll_wait() until every one has had its
 * 64 bytes back (checked). Prints
 *   "epoll register MS user S sys S trips T process_user S process_sys S"
 * with the main thread's user and system CPU over the rounds (getrusage
 * RUSAGE_THREAD), then the whole process's (RUSAGE_SELF: with the engine's
 * thread under rock). Errors: a message and exit status 1.
 * With HOLD_MS, "window" is printed (and flushed) as the rounds start, and
 * the connections stay open HOLD_MS after the result line: a script that
 * samples other processes' CPU at those two lines counts the rounds alone,
 * not the connects nor the closes (relay-bench.sh).
 */

#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MSG 64

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

static void
die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "write-bench-epoll: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static double
tv_s(struct timeval tv)
{
	return (double)tv.tv_sec + tv.tv_usec / 1e6;
}

int
main(int argc, char **argv)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	struct epoll_event ev, *evs;
	struct rusage r0, r1, p0, p1;
	int n, i, ep, *fds, *got, pending, g;
	double secs, t0, reg_ms, until;
	long hold_ms;
	long trips = 0;
	char out[MSG], *in;

	if (argc < 4 || argc > 6)
		die("usage: write-bench-epoll HOST PORT N [SECONDS [HOLD_MS]]");
	n = atoi(argv[3]);
	secs = argc >= 5 ? atof(argv[4]) : 2.0;
	hold_ms = argc == 6 ? atol(argv[5]) : -1;
	if (n <= 0 || secs <= 0 || (argc == 6 && hold_ms < 0))
		die("bad N, SECONDS or HOLD_MS");
	if ((g = getaddrinfo(argv[1], argv[2], &hints, &ai)) != 0)
		die("%s: %s", argv[1], gai_strerror(g));
	fds = calloc((size_t)n, sizeof(*fds));
	got = calloc((size_t)n, sizeof(*got));
	evs = calloc((size_t)n, sizeof(*evs));
	in = calloc((size_t)n, MSG);
	if (fds == NULL || got == NULL || evs == NULL || in == NULL)
		die("out of memory");
	for (i = 0; i < n; i++) {
		if ((fds[i] = socket(ai->ai_family, SOCK_STREAM, 0)) < 0)
			die("socket %d: %s", i, strerror(errno));
		if (connect(fds[i], ai->ai_addr, ai->ai_addrlen) != 0)
			die("connect %d: %s", i, strerror(errno));
		if (fcntl(fds[i], F_SETFL, O_NONBLOCK) != 0)
			die("fcntl: %s", strerror(errno));
	}
	if ((ep = epoll_create1(0)) < 0)
		die("epoll_create1: %s", strerror(errno));
	t0 = now_s();
	for (i = 0; i < n; i++) {
		ev.events = EPOLLIN;
		ev.data.u64 = (uint64_t)i;
		if (epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev) != 0)
			die("epoll_ctl: %s", strerror(errno));
	}
	reg_ms = (now_s() - t0) * 1000;
	for (i = 0; i < MSG; i++)
		out[i] = (char)(i * 7 + 1);
	if (hold_ms >= 0) {
		printf("window\n");
		fflush(stdout);
	}
	getrusage(RUSAGE_THREAD, &r0);
	getrusage(RUSAGE_SELF, &p0);
	until = now_s() + secs;
	while (now_s() < until) {
		for (i = 0; i < n; i++) {
			if (write(fds[i], out, MSG) != MSG)
				die("write %d: %s", i, strerror(errno));
			got[i] = 0;
		}
		for (pending = n; pending > 0;) {
			int k = epoll_wait(ep, evs, n, 10000);

			if (k <= 0)
				die("epoll_wait: %s", k == 0 ? "timed out" : strerror(errno));
			for (g = 0; g < k; g++) {
				int c = (int)evs[g].data.u64;
				ssize_t m = read(fds[c], in + (size_t)c * MSG + got[c], (size_t)(MSG - got[c]));

				if (m < 0 && errno == EAGAIN)
					continue;
				if (m <= 0)
					die("read %d: %s", c, m == 0 ? "end of stream" : strerror(errno));
				got[c] += (int)m;
				if (got[c] == MSG) {
					if (memcmp(in + (size_t)c * MSG, out, MSG) != 0)
						die("connection %d: wrong bytes echoed", c);
					pending--;
					trips++;
				}
			}
		}
	}
	getrusage(RUSAGE_THREAD, &r1);
	getrusage(RUSAGE_SELF, &p1);
	printf("epoll register %.2f user %.3f sys %.3f trips %ld process_user %.3f "
	    "process_sys %.3f\n", reg_ms,
	    tv_s(r1.ru_utime) - tv_s(r0.ru_utime),
	    tv_s(r1.ru_stime) - tv_s(r0.ru_stime), trips,
	    tv_s(p1.ru_utime) - tv_s(p0.ru_utime),
	    tv_s(p1.ru_stime) - tv_s(p0.ru_stime));
	if (hold_ms >= 0) {
		struct timespec ts = { hold_ms / 1000, (hold_ms % 1000) * 1000000 };

		fflush(stdout);
		nanosleep(&ts, NULL);
	}
	for (i = 0; i < n; i++)
		close(fds[i]);
	freeaddrinfo(ai);
	return 0;
}
