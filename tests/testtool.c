/* testtool.c: what the test programs share: dying with a reason, numbers from the command line, dialing and listening, clocks. */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include "testtool.h"

void
tt_die(const char *what)
{
	fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what,
	    strerror(errno));
	exit(1);
}

long long
tt_number(const char *s, long long max)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (end == s || *end != '\0' || errno != 0 || v < 0 || v > max) {
		fprintf(stderr, "%s: bad number '%s' (0..%lld)\n",
		    program_invocation_short_name, s, max);
		exit(2);
	}
	return v;
}

int
tt_dial(const char *host, const char *port, int type)
{
	struct addrinfo hints = { .ai_socktype = type }, *ai;
	int fd, r;

	if ((r = getaddrinfo(host, port, &hints, &ai)) != 0) {
		fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name,
		    host, gai_strerror(r));
		exit(1);
	}
	if ((fd = socket(ai->ai_family, type, 0)) < 0 ||
	    connect(fd, ai->ai_addr, ai->ai_addrlen) != 0)
		tt_die("connect");
	freeaddrinfo(ai);
	return fd;
}

int
tt_listen(const char *port, int backlog)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int fd, one = 1;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)tt_number(port, 65535));
	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
		tt_die("socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(fd, backlog) != 0)
		tt_die("listen");
	return fd;
}

static int64_t
clock_us(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t
tt_mono_us(void)
{
	return clock_us(CLOCK_MONOTONIC);
}

int64_t
tt_mono_ms(void)
{
	return clock_us(CLOCK_MONOTONIC) / 1000;
}

int64_t
tt_wall_ms(void)
{
	return clock_us(CLOCK_REALTIME) / 1000;
}
