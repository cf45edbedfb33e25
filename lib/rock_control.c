/* rock_control.c: the UDP control channel: its socket, where a rock's records go, and the tick that judges each rock alive or not. */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rock_control_int.h"
#include "rock_engine_int.h"
#include "rock_err.h"
#include "rock_sys.h"


static void on_tick(evutil_socket_t fd, short what, void *arg);

/* The control socket is dual-stack where the kernel allows, so IPv4 peers
 * are spoken to as v4-mapped addresses. */
static void
normalize(const struct rock_engine *e, struct sockaddr_storage *ss, socklen_t *len)
{
	struct sockaddr_in sin;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

	if (e->udp_family != AF_INET6 || ss->ss_family != AF_INET)
		return;
	memcpy(&sin, ss, sizeof(sin));
	memset(ss, 0, sizeof(*ss));
	s6->sin6_family = AF_INET6;
	s6->sin6_port = sin.sin_port;
	s6->sin6_addr.s6_addr[10] = 0xff;
	s6->sin6_addr.s6_addr[11] = 0xff;
	memcpy(&s6->sin6_addr.s6_addr[12], &sin.sin_addr, 4);
	*len = sizeof(*s6);
}

/* Records for many rocks come and go in bursts (a tick's heartbeats, the
 * farewells of rocks closed at once): the default buffers (about 200
 * datagrams) drop them. Privileged, past net.core's maximum; else up to it. */
#define CONTROL_BUFFER (4 * 1024 * 1024)

static void
size_buffers(int fd)
{
	int v = CONTROL_BUFFER;

	if (rock_sys.setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof(v)) != 0)
		(void)rock_sys.setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
	if (rock_sys.setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &v, sizeof(v)) != 0)
		(void)rock_sys.setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
}

static int
open_socket(struct rock_engine *e, int family, const struct sockaddr *bind_to,
    socklen_t len)
{
	struct sockaddr_storage any;
	int fd = rock_sys_aside(rock_sys.socket(family,
	    SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
	int off = 0;

	if (fd < 0)
		return -1;
	if (family == AF_INET6)
		rock_sys.setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
	if (bind_to == NULL) {
		memset(&any, 0, sizeof(any));
		any.ss_family = (sa_family_t)family;
		bind_to = (struct sockaddr *)&any;
		len = family == AF_INET6 ? sizeof(struct sockaddr_in6) :
		    sizeof(struct sockaddr_in);
	}
	if (rock_sys.bind(fd, bind_to, len) != 0) {
		rock_sys.close(fd);
		return -1;
	}
	e->udp_family = family;
	size_buffers(fd);
	return fd;
}

int
rock_control_open(struct rock_engine *e, const struct sockaddr *bind_to,
    socklen_t len)
{
	e->udp_fd = open_socket(e, bind_to ? bind_to->sa_family : AF_INET6,
	    bind_to, len);
	if (e->udp_fd < 0 && bind_to == NULL)
		e->udp_fd = open_socket(e, AF_INET, NULL, 0);
	if (e->udp_fd < 0)
		return ROCK_ERR_SYSTEM;
	return rock_control_start(e);
}

/* A control socket another process opened and handed over (rockd's
 * USR2): its peers know its port. */
int
rock_control_adopt(struct rock_engine *e, int fd)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (rock_sys.getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
		return ROCK_ERR_SYSTEM;
	if (ss.ss_family != AF_INET && ss.ss_family != AF_INET6)
		return ROCK_ERR_INVALID;
	e->udp_fd = fd;
	e->udp_family = ss.ss_family;
	return rock_control_start(e);
}

int
rock_control_start(struct rock_engine *e)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	/* Checks run twice per heartbeat interval: a dead path is seen half
	 * an interval sooner; heartbeats go out on every other tick. */
	int tick = e->cfg.hb_interval_ms / 2;
	struct timeval tv = { tick / 1000, (tick % 1000) * 1000 };

	if (rock_sys.getsockname(e->udp_fd, (struct sockaddr *)&ss, &sl) != 0)
		return ROCK_ERR_SYSTEM;
	e->udp_port = ntohs(ss.ss_family == AF_INET6 ?
	    ((struct sockaddr_in6 *)&ss)->sin6_port :
	    ((struct sockaddr_in *)&ss)->sin_port);
	e->ev_udp = event_new(e->base, e->udp_fd, EV_READ | EV_PERSIST, rock_control_on_udp, e);
	e->ev_tick = event_new(e->base, -1, EV_PERSIST, on_tick, e);
	if (e->ev_udp == NULL || e->ev_tick == NULL)
		return ROCK_ERR_NOMEM;
	event_add(e->ev_udp, NULL);
	event_add(e->ev_tick, &tv);
	return 0;
}

void
rock_control_close(struct rock_engine *e)
{
	free(e->peers);
	e->peers = NULL;
	e->npeers = 0;
	if (e->ev_udp != NULL)
		event_free(e->ev_udp);
	if (e->ev_tick != NULL)
		event_free(e->ev_tick);
	if (e->udp_fd >= 0)
		rock_sys.close(e->udp_fd);
	e->ev_udp = e->ev_tick = NULL;
	e->udp_fd = -1;
}

void
rock_udp_peer_from_tcp(struct rock_session *s, uint16_t udp_port)
{
	struct sockaddr_storage ss = s->peer;
	socklen_t len = s->peer_len;

	/* A server that told its clients no UDP port sends them no records
	 * either: both keep the control on TCP. One that named its address
	 * is behind a balancer: the client's TCP address is the balancer's,
	 * and its first authentic record says where it is. */
	if (udp_port == 0 || !(s->features & ROCK_FEAT_UDP) ||
	    (s->role == ROCK_ROLE_SERVER && (rock_udp_told(s->e) == 0 ||
	    s->e->cfg.udp_address_len > 0))) {
		s->udp_peer_len = 0;
		return;
	}
	if (s->udp_named_len > 0) {
		ss = s->udp_named;
		len = s->udp_named_len;
		if (ss.ss_family == AF_INET6 && s->e->udp_family != AF_INET6) {
			rlog_warn(s->e->log, "rock %s: the server named an IPv6 "
			    "UDP address, and our control socket is IPv4: the "
			    "control stays on TCP", s->name);
			s->udp_peer_len = 0;
			return;
		}
	} else if (ss.ss_family == AF_INET6)
		((struct sockaddr_in6 *)&ss)->sin6_port = htons(udp_port);
	else
		((struct sockaddr_in *)&ss)->sin_port = htons(udp_port);
	normalize(s->e, &ss, &len);
	s->udp_peer = ss;
	s->udp_peer_len = len;
}

void
rock_control_peer_moved(struct rock_session *s)
{
	const struct sockaddr_storage *u = &s->udp_peer;
	uint16_t port = 0;

	if (s->udp_peer_len > 0)
		port = ntohs(u->ss_family == AF_INET6 ?
		    ((const struct sockaddr_in6 *)u)->sin6_port :
		    ((const struct sockaddr_in *)u)->sin_port);
	/* Its group was the old address's. */
	rock_group_set_anchor(s, NULL);
	s->peer_slot = 0;
	rock_udp_peer_from_tcp(s, port);
}

int
rock_hears_nothing(const struct rock_session *s, int64_t now)
{
	return now - s->last_heard_ms >= 2 * s->e->cfg.hb_interval_ms;
}

/* Heartbeats missing: the data connection is asked to speak (kernel
 * keepalive, both ways: a peer that hears none of our records says so in
 * its own), and any segment it carries is a sign of life. A
 * healthy TCP connection is never suspended only because UDP stopped, nor
 * because its peer does not read (window probes and keepalives still
 * come); a dead path is given up once neither channel has said anything
 * for the path's dead time. */
static void
check_liveness(struct rock_session *s, int64_t now)
{
	int64_t heard = s->last_heard_ms, tcp;

	if (!rock_hears_nothing(s, now)) {
		rock_stream_keepalive(s, !s->udp_verified || s->peer_quiet);
		s->tcp_watched = 0;
		return;
	}
	rock_stream_keepalive(s, 1);
	tcp = rock_path_tcp_heard(s, now);
	if (tcp > heard)
		heard = tcp;
	if (now - heard < rock_path_dead_ms(s))
		return;
	if (rock_path_only_farewell_missing(s))
		rock_session_close(s, 0, "both ends closed; the peer's last "
		    "word was lost");
	else
		rock_session_fail(s, "no heartbeat and no TCP segment");
}

/* Heartbeats pass but TCP moves none of our outstanding data (see
 * rock_path_stalled). The peer's count moving is progress enough, and
 * costs no system call. */
static void
check_stall(struct rock_session *s, int64_t now)
{
	uint64_t mark = s->stall_mark;

	s->stall_mark = s->peer_consumed;
	if (rock_ring_used(&s->ring) == 0 || s->peer_consumed != mark) {
		rock_path_progress(s);
		return;
	}
	if (rock_path_stalled(s, now))
		rock_session_fail(s, "data connection stalled");
}

static void
check_session(struct rock_session *s, int64_t now)
{
	long limit = s->e->cfg.suspend_timeout_s;

	/* Off the data path: storage the in-flight bytes no longer need. */
	rock_ring_compact(&s->ring);
	if (s->state == ROCK_ST_CONNECTED) {
		if (now - s->connected_at_ms >= ROCK_UNPROVEN_MS)
			s->proven = 1;
		rock_group_follow(s, now);
		check_liveness(s, now);
		if (s->state == ROCK_ST_CONNECTED)
			check_stall(s, now);
		rock_session_eof_check(s, now);
		if (s->status_wanted && s->status == NULL &&
		    s->state == ROCK_ST_CONNECTED)
			rock_status_send(s);
	} else if (s->state == ROCK_ST_SUSPENDED && limit > 0 &&
	    now - s->suspended_at_ms >= (int64_t)limit * 1000) {
		rock_session_close(s, ROCK_ERR_TIMEOUT, "suspend timeout");
	} else if (s->state == ROCK_ST_SUSPENDED && s->role == ROCK_ROLE_SERVER &&
	    !s->proven && !rock_finish_pending(s) &&
	    now - s->suspended_at_ms >= ROCK_UNPROVEN_MS) {
		/* (A new rock waiting for its FINISHED has its own deadline.) */
		rock_session_close(s, ROCK_ERR_TIMEOUT, "never proven by its "
		    "client, suspended: expired");
	}
}

static void
log_drops(struct rock_engine *e)
{
	struct rock_engine_stats *st = &e->stats;
	unsigned long bad = st->hb_bad_tag + st->hb_replayed + st->hb_unknown +
	    st->hb_malformed;

	if (bad == e->drops_logged)
		return;
	/* Late records for a session just closed are routine: only forged,
	 * replayed or malformed ones are news. */
	if (bad - st->hb_unknown == e->hostile_logged) {
		rlog_debug(e->log, "control channel: %lu records for unknown "
		    "sessions so far", st->hb_unknown);
		e->drops_logged = bad;
		return;
	}
	e->hostile_logged = bad - st->hb_unknown;
	rlog_info(e->log, "control channel: dropped %lu records so far "
	    "(forged %lu, replayed %lu, unknown session %lu, malformed %lu)",
	    bad, st->hb_bad_tag, st->hb_replayed, st->hb_unknown,
	    st->hb_malformed);
	e->drops_logged = bad;
}

void
rock_control_tick(struct rock_engine *e)
{
	int64_t now;
	struct rock_session *s, *next;
	int i;

	/* Judge on what has arrived, not on what waits in the socket: a
	 * loop busy with thousands of closing connections reads 64
	 * datagrams a turn, and the sign of life may be among the rest. For
	 * 20 ms at most: a flood must not hold the loop. */
	now = rock_now_ms();
	while (e->udp_fd >= 0 && rock_control_read(e, e->udp_fd, 256) != 0 &&
	    rock_now_ms() - now < 20)
		;
	now = rock_now_ms();
	for (s = e->all; s != NULL; s = next) {
		next = s->next;
		rock_session_hold(s);
		check_session(s, now);
		rock_session_release(s);
	}
	if (e->ticks++ % 2 == 0)
		rock_control_send_heartbeats(e, now);
	rock_farewell_tick(e, now);
	for (i = 0; i < ROCK_STRANGER_KINDS; i++)
		rock_log_limit_flush(e->log, &e->stranger_log[i]);
	log_drops(e);
}

static void
on_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	rock_engine_enter(arg);
	rock_control_tick(arg);
	rock_ticket_tick(arg);
	rock_engine_leave(arg);
}
