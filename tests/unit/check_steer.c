/* check_steer.c: unit tests of rockd's worker steering: a client address's connections reach the listener its address names, IPv4, IPv6 and IPv4 on a dual-stack listener. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../daemon/rockd.h"
#include "suites.h"

#define GROUP 3

/* GROUP listeners on one port, joined in order, the program on each
 * once it listens, as rockd's. */
static in_port_t
group_listen(int family, int fds[GROUP])
{
	struct sockaddr_storage ss;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
	socklen_t len;
	in_port_t port = 0;
	int k, one = 1, zero = 0;

	for (k = 0; k < GROUP; k++) {
		memset(&ss, 0, sizeof(ss));
		if (family == AF_INET) {
			sin->sin_family = AF_INET;
			sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
			sin->sin_port = port;
			len = sizeof(*sin);
		} else {
			sin6->sin6_family = AF_INET6;
			sin6->sin6_addr = in6addr_any;
			sin6->sin6_port = port;
			len = sizeof(*sin6);
		}
		fds[k] = socket(family, SOCK_STREAM, 0);
		ck_assert_int_ge(fds[k], 0);
		ck_assert_int_eq(setsockopt(fds[k], SOL_SOCKET, SO_REUSEPORT,
		    &one, sizeof(one)), 0);
		if (family == AF_INET6)
			ck_assert_int_eq(setsockopt(fds[k], IPPROTO_IPV6,
			    IPV6_V6ONLY, &zero, sizeof(zero)), 0);
		ck_assert_int_eq(bind(fds[k], (struct sockaddr *)&ss, len), 0);
		ck_assert_int_eq(listen(fds[k], 64), 0);
		ck_assert_int_eq(rockd_steer_attach(fds[k], GROUP), 0);
		ck_assert_int_eq(getsockname(fds[k], (struct sockaddr *)&ss,
		    &len), 0);
		port = family == AF_INET ? sin->sin_port : sin6->sin6_port;
	}
	return port;
}

/* A connection from SRC to the group's port; the index of the listener
 * that has it. */
static int
landed(int fds[GROUP], const struct sockaddr *src, const struct sockaddr *dst,
    socklen_t len)
{
	struct pollfd p[GROUP];
	int c, k, got = -1;

	c = socket(src->sa_family, SOCK_STREAM, 0);
	ck_assert_int_ge(c, 0);
	ck_assert_int_eq(bind(c, src, len), 0);
	ck_assert_int_eq(connect(c, dst, len), 0);
	for (k = 0; k < GROUP; k++) {
		p[k].fd = fds[k];
		p[k].events = POLLIN;
	}
	ck_assert_int_eq(poll(p, GROUP, 2000), 1);
	for (k = 0; k < GROUP; k++)
		if (p[k].revents & POLLIN) {
			int a = accept(fds[k], NULL, NULL);

			ck_assert_int_ge(a, 0);
			close(a);
			got = k;
		}
	close(c);
	return got;
}

static void
group_close(int fds[GROUP])
{
	int k;

	for (k = 0; k < GROUP; k++)
		close(fds[k]);
}

/* 127.0.0.10 to 127.0.0.21, each twice: listener (address mod 3). */
static void
ipv4_sources(int family)
{
	struct sockaddr_in src, dst;
	struct sockaddr_in6 src6, dst6;
	int fds[GROUP], i, rep;
	in_port_t port = group_listen(family, fds);

	for (i = 10; i < 22; i++)
		for (rep = 0; rep < 2; rep++) {
			uint32_t a = (127u << 24) | (uint32_t)i;

			if (family == AF_INET) {
				memset(&src, 0, sizeof(src));
				src.sin_family = AF_INET;
				src.sin_addr.s_addr = htonl(a);
				dst = src;
				dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
				dst.sin_port = port;
				ck_assert_int_eq(landed(fds,
				    (struct sockaddr *)&src,
				    (struct sockaddr *)&dst, sizeof(src)),
				    (int)(a % GROUP));
				continue;
			}
			/* IPv4 to the dual-stack listener, as ::ffff:a */
			memset(&src6, 0, sizeof(src6));
			src6.sin6_family = AF_INET6;
			src6.sin6_addr.s6_addr[10] = 0xff;
			src6.sin6_addr.s6_addr[11] = 0xff;
			dst6 = src6;
			a = htonl(a);
			memcpy(&src6.sin6_addr.s6_addr[12], &a, 4);
			a = htonl(INADDR_LOOPBACK);
			memcpy(&dst6.sin6_addr.s6_addr[12], &a, 4);
			dst6.sin6_port = port;
			ck_assert_int_eq(landed(fds, (struct sockaddr *)&src6,
			    (struct sockaddr *)&dst6, sizeof(src6)),
			    (int)(((127u << 24) | (uint32_t)i) % GROUP));
		}
	group_close(fds);
}

START_TEST(test_steer_ipv4)
{
	ipv4_sources(AF_INET);
}
END_TEST

START_TEST(test_steer_ipv4_on_dual_stack)
{
	ipv4_sources(AF_INET6);
}
END_TEST

/* ::1 folds to 1: listener 1 of 3, every time. */
START_TEST(test_steer_ipv6)
{
	struct sockaddr_in6 a;
	int fds[GROUP], rep;
	in_port_t port = group_listen(AF_INET6, fds);

	memset(&a, 0, sizeof(a));
	a.sin6_family = AF_INET6;
	a.sin6_addr = in6addr_loopback;
	for (rep = 0; rep < 6; rep++) {
		struct sockaddr_in6 dst = a;

		dst.sin6_port = port;
		ck_assert_int_eq(landed(fds, (struct sockaddr *)&a,
		    (struct sockaddr *)&dst, sizeof(a)), 1);
	}
	group_close(fds);
}
END_TEST

START_TEST(test_steer_bad)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_eq(rockd_steer_attach(fd, 0), -EINVAL);
	close(fd);
	ck_assert_int_eq(rockd_steer_attach(-1, 2), -EBADF);
}
END_TEST

Suite *
steer_suite(void)
{
	Suite *s = suite_create("steer");
	TCase *tc = tcase_create("steer");

	tcase_set_timeout(tc, 20);
	tcase_add_test(tc, test_steer_ipv4);
	tcase_add_test(tc, test_steer_ipv4_on_dual_stack);
	tcase_add_test(tc, test_steer_ipv6);
	tcase_add_test(tc, test_steer_bad);
	suite_add_tcase(s, tc);
	return s;
}
