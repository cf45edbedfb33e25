/* pathprobe.c: measures a path at its receiver: numbered UDP datagrams (loss, duplicates, reordering) and TCP goodput. */
/*
 * pathprobe udp-send ADDR PORT COUNT INTERVAL_US
 * pathprobe udp-recv PORT QUIET_MS        prints: received N distinct D
 *                                         duplicates X reordered R lost L
 *                                         (ends QUIET_MS after the last
 *                                         datagram, 5 s later with none)
 * pathprobe tcp-send ADDR PORT SECONDS
 * pathprobe tcp-recv PORT SKIP_S          prints: bytes B seconds S mbit M
 *                                         (goodput after the first SKIP_S)
 * A datagram carries its number and the count sent; "reordered" counts
 * the datagrams that overtook a lower-numbered one.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "testtool.h"

static double
now_s(void)
{
	return (double)tt_mono_us() / 1e6;
}

static int
bound(const char *port, int type)
{
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT };
	int fd = socket(AF_INET6, type, 0), one = 1, off = 0;

	if (fd < 0)
		tt_die("socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
	sa.sin6_port = htons((uint16_t)tt_number(port, 65535));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		tt_die("bind");
	if (type == SOCK_STREAM && listen(fd, 1) != 0)
		tt_die("listen");
	return fd;
}

static int
udp_send(char **av)
{
	int fd = tt_dial(av[0], av[1], SOCK_DGRAM);
	uint32_t count = (uint32_t)tt_number(av[2], 10000000), i, msg[2];
	long gap_us = tt_number(av[3], 10000000);
	struct timespec ts = { gap_us / 1000000, (gap_us % 1000000) * 1000 };

	for (i = 0; i < count; i++) {
		msg[0] = htonl(i);
		msg[1] = htonl(count);
		if (send(fd, msg, sizeof(msg), 0) < 0 && errno != ECONNREFUSED)
			tt_die("send");
		nanosleep(&ts, NULL);
	}
	return 0;
}

/* Packets that arrived ahead of a lower-numbered one that came later:
 * those the path sent early (netem's reorder), not the ones they passed. */
static unsigned long
count_early(const uint32_t *order, unsigned long n)
{
	unsigned long early = 0, i;
	uint32_t min_after = UINT32_MAX;

	for (i = n; i-- > 0;) {
		if (min_after < order[i])
			early++;
		if (order[i] < min_after)
			min_after = order[i];
	}
	return early;
}

#define FIRST_WAIT_MS 5000

static int
udp_recv(char **av)
{
	int fd = bound(av[0], SOCK_DGRAM);
	int quiet = (int)tt_number(av[1], 600000);
	uint32_t msg[2], seq, count = 0, *order = NULL;
	unsigned long received = 0, distinct = 0, dups = 0;
	unsigned char *seen = NULL;
	struct pollfd p = { .fd = fd, .events = POLLIN };

	/* The first datagram comes within the path's delay of the sender's
	 * start (300 ms one way on the slowest profile): FIRST_WAIT_MS more
	 * than QUIET_MS bounds it, and a blocked path counts 0 then. After
	 * it, QUIET_MS of silence ends the count. */
	while (poll(&p, 1, received == 0 ? FIRST_WAIT_MS + quiet : quiet) > 0) {
		if (recv(fd, msg, sizeof(msg), 0) != (ssize_t)sizeof(msg))
			continue;
		seq = ntohl(msg[0]);
		if (seen == NULL) {
			count = ntohl(msg[1]);
			if (count == 0 || count > 10000000 ||
			    (seen = calloc(count, 1)) == NULL ||
			    (order = calloc(count, sizeof(*order))) == NULL)
				tt_die("count");
		}
		if (seq >= count)
			continue;
		received++;
		if (seen[seq]) {
			dups++;
			continue;
		}
		seen[seq] = 1;
		order[distinct++] = seq;
	}
	printf("received %lu distinct %lu duplicates %lu reordered %lu lost %lu\n",
	    received, distinct, dups, count_early(order, distinct),
	    (unsigned long)count - distinct);
	free(seen);
	free(order);
	return 0;
}

static int
tcp_send(char **av)
{
	int fd = tt_dial(av[0], av[1], SOCK_STREAM);
	double end = now_s() + (double)tt_number(av[2], 3600);
	static char buf[65536];

	while (now_s() < end)
		if (send(fd, buf, sizeof(buf), MSG_NOSIGNAL) < 0)
			tt_die("send");
	close(fd);
	return 0;
}

static int
tcp_recv(char **av)
{
	int lfd = bound(av[0], SOCK_STREAM), fd;
	double skip = (double)tt_number(av[1], 3600), t0, start = 0, last = 0;
	unsigned long long bytes = 0;
	static char buf[65536];
	ssize_t n;

	if ((fd = accept(lfd, NULL, NULL)) < 0)
		tt_die("accept");
	t0 = now_s();
	while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) {
		double t = now_s();

		if (t - t0 < skip)
			continue;
		if (start == 0)
			start = t;
		bytes += (unsigned long long)n;
		last = t;
	}
	if (last <= start) {
		fprintf(stderr, "pathprobe: no data after the first %.0f s\n", skip);
		return 1;
	}
	printf("bytes %llu seconds %.3f mbit %.3f\n", bytes, last - start,
	    bytes * 8 / (last - start) / 1e6);
	return 0;
}

int
main(int argc, char **argv)
{
	if (argc == 6 && strcmp(argv[1], "udp-send") == 0)
		return udp_send(argv + 2);
	if (argc == 4 && strcmp(argv[1], "udp-recv") == 0)
		return udp_recv(argv + 2);
	if (argc == 5 && strcmp(argv[1], "tcp-send") == 0)
		return tcp_send(argv + 2);
	if (argc == 4 && strcmp(argv[1], "tcp-recv") == 0)
		return tcp_recv(argv + 2);
	fprintf(stderr, "usage: pathprobe udp-send ADDR PORT COUNT INTERVAL_US\n"
	    "       pathprobe udp-recv PORT QUIET_MS\n"
	    "       pathprobe tcp-send ADDR PORT SECONDS\n"
	    "       pathprobe tcp-recv PORT SKIP_S\n");
	return 2;
}
