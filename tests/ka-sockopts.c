/* ka-sockopts.c: run under librock, checks the keepalive options every kind of socket ends up with. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

/* Expected values; -1 means "the system default" (what an untouched socket has). */
struct expect {
	int keepalive, idle, intvl, cnt, uto;
};

static int failures;

static void
die(const char *what)
{
	fprintf(stderr, "ka-sockopts: %s: %s\n", what, strerror(errno));
	exit(2);
}

static int
get_opt(int fd, int level, int name)
{
	int v = -12345;
	socklen_t len = sizeof(v);

	if (getsockopt(fd, level, name, &v, &len) != 0)
		return -12345;
	return v;
}

/* The values a TCP socket has when nobody touched it, made past our hooks. */
static struct expect
system_defaults(void)
{
	int fd = (int)syscall(SYS_socket, AF_INET, SOCK_STREAM, 0);
	struct expect d;

	if (fd < 0)
		die("raw socket");
	d.keepalive = get_opt(fd, SOL_SOCKET, SO_KEEPALIVE);
	d.idle = get_opt(fd, IPPROTO_TCP, TCP_KEEPIDLE);
	d.intvl = get_opt(fd, IPPROTO_TCP, TCP_KEEPINTVL);
	d.cnt = get_opt(fd, IPPROTO_TCP, TCP_KEEPCNT);
	d.uto = get_opt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT);
	syscall(SYS_close, fd);
	return d;
}

static struct expect
resolve(struct expect want)
{
	struct expect d = system_defaults();

	if (want.keepalive < 0) want.keepalive = d.keepalive;
	if (want.idle < 0) want.idle = d.idle;
	if (want.intvl < 0) want.intvl = d.intvl;
	if (want.cnt < 0) want.cnt = d.cnt;
	if (want.uto < 0) want.uto = d.uto;
	return want;
}

static void
check_tcp(const char *what, int fd, struct expect want)
{
	struct expect got = {
		get_opt(fd, SOL_SOCKET, SO_KEEPALIVE),
		get_opt(fd, IPPROTO_TCP, TCP_KEEPIDLE),
		get_opt(fd, IPPROTO_TCP, TCP_KEEPINTVL),
		get_opt(fd, IPPROTO_TCP, TCP_KEEPCNT),
		get_opt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT),
	};
	int ok = memcmp(&got, &want, sizeof(got)) == 0;

	printf("%s: %s: SO_KEEPALIVE=%d TCP_KEEPIDLE=%d TCP_KEEPINTVL=%d "
	    "TCP_KEEPCNT=%d TCP_USER_TIMEOUT=%d", ok ? "PASS" : "FAIL", what,
	    got.keepalive, got.idle, got.intvl, got.cnt, got.uto);
	if (!ok)
		printf(" (want %d %d %d %d %d)", want.keepalive, want.idle,
		    want.intvl, want.cnt, want.uto);
	printf("\n");
	failures += !ok;
}

static void
check_untouched(const char *what, int fd)
{
	int v = get_opt(fd, SOL_SOCKET, SO_KEEPALIVE);

	printf("%s: %s: SO_KEEPALIVE=%d (want 0)\n", v == 0 ? "PASS" : "FAIL",
	    what, v);
	failures += v != 0;
}

static int
tcp_listener(int family, struct sockaddr_storage *ss, socklen_t *len)
{
	int fd = socket(family, SOCK_STREAM, 0);

	memset(ss, 0, sizeof(*ss));
	ss->ss_family = (sa_family_t)family;
	if (family == AF_INET)
		((struct sockaddr_in *)ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	else
		((struct sockaddr_in6 *)ss)->sin6_addr = in6addr_loopback;
	*len = family == AF_INET ? sizeof(struct sockaddr_in) :
	    sizeof(struct sockaddr_in6);
	if (fd < 0 || bind(fd, (struct sockaddr *)ss, *len) != 0 ||
	    listen(fd, 16) != 0 ||
	    getsockname(fd, (struct sockaddr *)ss, len) != 0)
		die("listener");
	return fd;
}

/* The connection that client made: under ROCK_MODE=rock the first
 * connect to a listener is preceded by an EDP probe, a connection too. */
static int
accept_match(int l, int client, int use_accept4)
{
	struct sockaddr_storage mine, peer;
	socklen_t mlen = sizeof(mine), plen;
	int a;

	if (getsockname(client, (struct sockaddr *)&mine, &mlen) != 0)
		return -1;
	for (;;) {
		plen = sizeof(peer);
		a = use_accept4 ? accept4(l, (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC) :
		    accept(l, (struct sockaddr *)&peer, &plen);
		if (a < 0 || plen != mlen || memcmp(&peer, &mine, mlen) == 0)
			return a;
		close(a);
	}
}

static int
connect_to(int fd, const struct sockaddr_storage *ss, socklen_t len)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };

	if (connect(fd, (const struct sockaddr *)ss, len) == 0)
		return fd;
	if (errno != EINPROGRESS || poll(&p, 1, 5000) != 1)
		die("connect");
	return fd;
}

static void
check_stream_kinds(struct expect want)
{
	struct sockaddr_storage ss4, ss6;
	socklen_t len4, len6;
	int l4 = tcp_listener(AF_INET, &ss4, &len4);
	int l6 = tcp_listener(AF_INET6, &ss6, &len6);
	int fd, a;

	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		die("socket");
	/* Nothing is set until the socket is about to carry data. */
	check_tcp("ipv4 socket before connect", fd, resolve((struct expect){ -1, -1, -1, -1, -1 }));
	check_tcp("ipv4 connect", connect_to(fd, &ss4, len4), want);
	if ((a = accept_match(l4, fd, 0)) < 0)
		die("accept");
	check_tcp("ipv4 accept", a, want);
	close(a);
	close(fd);

	fd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
	if (fd < 0)
		die("socket6");
	check_tcp("ipv6 nonblock+cloexec IPPROTO_TCP connect",
	    connect_to(fd, &ss6, len6), want);
	if ((a = accept_match(l6, fd, 1)) < 0)
		die("accept4");
	check_tcp("ipv6 accept4", a, want);
	close(a);
	close(fd);

	/* A socket made past our hooks (inherited, say) is classified at connect. */
	fd = (int)syscall(SYS_socket, AF_INET, SOCK_STREAM, 0);
	check_tcp("ipv4 socket made without socket() connect",
	    connect_to(fd, &ss4, len4), want);
	close(fd);
	if ((a = accept(l4, NULL, NULL)) >= 0)
		close(a);
	close(l4);
	close(l6);
}

/* The program's own values win, before connect and on a listener. */
static void
check_program_wins(struct expect want)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = tcp_listener(AF_INET, &ss, &len);
	int fd = socket(AF_INET, SOCK_STREAM, 0), a, v;
	struct expect mine = want;

	v = 77;
	if (setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &v, sizeof(v)) != 0)
		die("setsockopt");
	mine.idle = 77;
	check_tcp("program's TCP_KEEPIDLE before connect wins",
	    connect_to(fd, &ss, len), mine);
	close(fd);
	if ((a = accept(l, NULL, NULL)) >= 0)
		close(a);

	fd = socket(AF_INET, SOCK_STREAM, 0);
	v = 0;
	if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &v, sizeof(v)) != 0)
		die("setsockopt");
	connect_to(fd, &ss, len);
	v = get_opt(fd, SOL_SOCKET, SO_KEEPALIVE);
	printf("%s: program's SO_KEEPALIVE=0 before connect wins: %d\n",
	    v == 0 ? "PASS" : "FAIL", v);
	failures += v != 0;
	close(fd);

	v = 55;
	if (setsockopt(l, IPPROTO_TCP, TCP_KEEPINTVL, &v, sizeof(v)) != 0)
		die("setsockopt listener");
	if ((a = accept(l, NULL, NULL)) < 0)
		die("accept");
	close(a);
	fd = connect_to(socket(AF_INET, SOCK_STREAM, 0), &ss, len);
	if ((a = accept_match(l, fd, 0)) < 0)
		die("accept");
	mine = want;
	mine.intvl = 55;
	check_tcp("program's TCP_KEEPINTVL on the listener wins for accepted",
	    a, mine);
	close(a);
	close(fd);
	close(l);
}

/* TCP Fast Open carries data in the SYN: options must be there first. */
static void
check_fastopen(struct expect want)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = tcp_listener(AF_INET, &ss, &len);
	int fd = socket(AF_INET, SOCK_STREAM, 0), a;

	if (sendto(fd, "x", 1, MSG_FASTOPEN, (struct sockaddr *)&ss, len) != 1)
		die("sendto MSG_FASTOPEN");
	check_tcp("ipv4 sendto(MSG_FASTOPEN)", fd, want);
	if ((a = accept(l, NULL, NULL)) >= 0)
		close(a);
	close(fd);
	close(l);
}

static void
check_not_tcp(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(9),
	    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd, sv[2];

	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0)
		die("udp");
	check_untouched("udp connect", fd);
	close(fd);

	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	snprintf(sun.sun_path, sizeof(sun.sun_path), "/tmp/ka-sockopts.%d",
	    (int)getpid());
	if (fd < 0 || bind(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0 ||
	    listen(fd, 1) != 0)
		die("unix");
	check_untouched("unix listen", fd);
	unlink(sun.sun_path);
	close(fd);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		die("socketpair");
	check_untouched("unix socketpair", sv[0]);
	close(sv[0]);
	close(sv[1]);

	fd = socket(AF_INET, SOCK_RAW, IPPROTO_TCP);
	if (fd >= 0) {
		if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0)
			die("raw connect");
		check_untouched("raw IPPROTO_TCP connect", fd);
		close(fd);
	} else {
		printf("SKIP: raw socket: %s\n", strerror(errno));
	}
}

/* DD_EVAL_ENVIRONMENT_ONCE=0: a value changed at run time applies to the next socket. */
static void
check_reread(struct expect want)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int l = tcp_listener(AF_INET, &ss, &len);
	int fd = connect_to(socket(AF_INET, SOCK_STREAM, 0), &ss, len), a;

	check_tcp("before setenv", fd, want);
	close(fd);
	setenv("ROCK_KEEPALIVE_TIME", "21", 1);
	fd = connect_to(socket(AF_INET, SOCK_STREAM, 0), &ss, len);
	want.idle = 21;
	check_tcp("after setenv ROCK_KEEPALIVE_TIME=21", fd, want);
	if ((a = accept(l, NULL, NULL)) >= 0)
		close(a);
	if ((a = accept(l, NULL, NULL)) >= 0)
		check_tcp("accepted after setenv", a, want);
	close(fd);
	close(l);
}

int
main(int argc, char **argv)
{
	struct expect want;

	if (argc != 7 || (strcmp(argv[1], "check") != 0 &&
	    strcmp(argv[1], "reread") != 0)) {
		fprintf(stderr, "usage: ka-sockopts check|reread KEEPALIVE IDLE "
		    "INTVL CNT USER_TIMEOUT  (-1: system default)\n");
		return 2;
	}
	want = resolve((struct expect){ atoi(argv[2]), atoi(argv[3]),
	    atoi(argv[4]), atoi(argv[5]), atoi(argv[6]) });
	if (strcmp(argv[1], "reread") == 0) {
		check_reread(want);
	} else {
		check_stream_kinds(want);
		check_program_wins(want);
		check_fastopen(want);
		check_not_tcp();
	}
	return failures == 0 ? 0 : 1;
}
