/* ka-idle-client.c: connect, then block in read() on an idle connection and report how it ends. */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int
dial(const char *host, const char *port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
	int fd = -1, r;

	if ((r = getaddrinfo(host, port, &hints, &res)) != 0) {
		fprintf(stderr, "ka-idle-client: %s: %s\n", host, gai_strerror(r));
		return -1;
	}
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
		if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return fd;
}

/* Prints "connected", then one line when read() returns:
 * "read ret=R errno=NAME at_ms=T" (T: wall clock, for the caller's arithmetic). */
int
main(int argc, char **argv)
{
	char buf[64];
	ssize_t n;
	int fd;

	if (argc != 3) {
		fprintf(stderr, "usage: ka-idle-client HOST PORT\n");
		return 2;
	}
	if ((fd = dial(argv[1], argv[2])) < 0) {
		fprintf(stderr, "ka-idle-client: connect: %s\n", strerror(errno));
		return 1;
	}
	printf("connected\n");
	fflush(stdout);
	do
		n = read(fd, buf, sizeof(buf));
	while (n > 0);
	printf("read ret=%zd errno=%s at_ms=%lld\n", n,
	    n < 0 ? strerrorname_np(errno) : "0", now_ms());
	return 0;
}
