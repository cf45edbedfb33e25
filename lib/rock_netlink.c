/* rock_netlink.c: watch local addresses and routes so reconnects need not wait. */
#include "config.h"

#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rock_engine_int.h"
#include "rock_err.h"
#include "rock_sys.h"

static void on_netlink(evutil_socket_t fd, short what, void *arg);

int
rock_netlink_open(struct rock_engine *e)
{
	struct sockaddr_nl sa;

	e->nl_fd = rock_sys_aside(rock_sys.socket(AF_NETLINK,
	    SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE));
	if (e->nl_fd < 0)
		return ROCK_ERR_SYSTEM;
	memset(&sa, 0, sizeof(sa));
	sa.nl_family = AF_NETLINK;
	sa.nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR |
	    RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE;
	if (rock_sys.bind(e->nl_fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    (e->ev_nl = event_new(e->base, e->nl_fd, EV_READ | EV_PERSIST,
	    on_netlink, e)) == NULL || event_add(e->ev_nl, NULL) != 0) {
		rock_netlink_close(e);
		return ROCK_ERR_SYSTEM;
	}
	return 0;
}

void
rock_netlink_close(struct rock_engine *e)
{
	if (e->ev_nl != NULL)
		event_free(e->ev_nl);
	if (e->nl_fd >= 0)
		rock_sys.close(e->nl_fd);
	e->ev_nl = NULL;
	e->nl_fd = -1;
}

/* 1 if the socket's local address is the one in the RTM_DELADDR message. */
static int
bound_to(int fd, const struct ifaddrmsg *ifa, const void *addr, size_t alen)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	const void *mine;

	const struct in6_addr *v6 = &((struct sockaddr_in6 *)&ss)->sin6_addr;

	if (fd < 0 || rock_sys.getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
		return 0;
	/* A dual-stack listener's IPv4 connections (rockd's) are IPv6
	 * sockets with mapped addresses. */
	if (ss.ss_family == AF_INET6 && ifa->ifa_family == AF_INET &&
	    IN6_IS_ADDR_V4MAPPED(v6))
		mine = &v6->s6_addr[12];
	else if (ss.ss_family != ifa->ifa_family)
		return 0;
	else
		mine = ss.ss_family == AF_INET ?
		    (const void *)&((struct sockaddr_in *)&ss)->sin_addr :
		    (const void *)v6;
	return alen <= sizeof(*v6) && memcmp(mine, addr, alen) == 0;
}

/* A removed local address kills the connections bound to it: fail them
 * now instead of waiting for the heartbeat timeout. A server's too: its
 * heartbeats, sent from its new address, would keep the client's rock
 * connected to the old one; suspended, it falls silent, and the client
 * redials (and looks the server's name up again). */
static void
address_removed(struct rock_engine *e, const struct nlmsghdr *nh)
{
	const struct ifaddrmsg *ifa = NLMSG_DATA(nh);
	int len = (int)IFA_PAYLOAD(nh);
	const struct rtattr *rta;
	struct rock_session *s, *next;

	for (rta = IFA_RTA(ifa); RTA_OK(rta, len); rta = RTA_NEXT(rta, len)) {
		if (rta->rta_type != IFA_LOCAL && rta->rta_type != IFA_ADDRESS)
			continue;
		for (s = e->all; s != NULL; s = next) {
			next = s->next;
			if (s->state == ROCK_ST_CONNECTED &&
			    bound_to(s->fd, ifa, RTA_DATA(rta), RTA_PAYLOAD(rta))) {
				rock_session_hold(s);
				rock_session_fail(s, "local address removed");
				rock_session_release(s);
			}
		}
	}
}

static void
read_netlink(struct rock_engine *e, int fd)
{
	char buf[8192] __attribute__((aligned(NLMSG_ALIGNTO)));
	const struct nlmsghdr *nh;
	int news = 0;
	ssize_t n;

	while ((n = rock_sys.recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
		int len = (int)n;

		for (nh = (struct nlmsghdr *)buf; NLMSG_OK(nh, len);
		    nh = NLMSG_NEXT(nh, len)) {
			if (nh->nlmsg_type == RTM_DELADDR)
				address_removed(e, nh);
			else if (nh->nlmsg_type == RTM_NEWADDR ||
			    nh->nlmsg_type == RTM_NEWROUTE)
				news = 1;
		}
	}
	if (news) {
		rlog_debug(e->log, "new local address or route: reconnecting now");
		rock_dial_all_now(e);
	}
}

static void
on_netlink(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	rock_engine_enter(arg);
	read_netlink(arg, fd);
	rock_engine_leave(arg);
}
