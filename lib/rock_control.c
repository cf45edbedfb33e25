/* rock_control.c: the UDP control channel: heartbeats, acks, failure detection. */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rock_engine_int.h"
#include "rock_err.h"


static void on_udp(evutil_socket_t fd, short what, void *arg);
static void read_udp(struct rock_engine *e, int fd);
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

	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof(v)) != 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &v, sizeof(v)) != 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
}

static int
open_socket(struct rock_engine *e, int family, const struct sockaddr *bind_to,
    socklen_t len)
{
	struct sockaddr_storage any;
	int fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int off = 0;

	if (fd < 0)
		return -1;
	if (family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
	if (bind_to == NULL) {
		memset(&any, 0, sizeof(any));
		any.ss_family = (sa_family_t)family;
		bind_to = (struct sockaddr *)&any;
		len = family == AF_INET6 ? sizeof(struct sockaddr_in6) :
		    sizeof(struct sockaddr_in);
	}
	if (bind(fd, bind_to, len) != 0) {
		close(fd);
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

	if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
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

	if (getsockname(e->udp_fd, (struct sockaddr *)&ss, &sl) != 0)
		return ROCK_ERR_SYSTEM;
	e->udp_port = ntohs(ss.ss_family == AF_INET6 ?
	    ((struct sockaddr_in6 *)&ss)->sin6_port :
	    ((struct sockaddr_in *)&ss)->sin_port);
	e->ev_udp = event_new(e->base, e->udp_fd, EV_READ | EV_PERSIST, on_udp, e);
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
	if (e->ev_udp != NULL)
		event_free(e->ev_udp);
	if (e->ev_tick != NULL)
		event_free(e->ev_tick);
	if (e->udp_fd >= 0)
		close(e->udp_fd);
	e->ev_udp = e->ev_tick = NULL;
	e->udp_fd = -1;
}

void
rock_udp_peer_from_tcp(struct rock_session *s, uint16_t udp_port)
{
	struct sockaddr_storage ss = s->peer;
	socklen_t len = s->peer_len;

	if (udp_port == 0 || !(s->features & ROCK_FEAT_UDP)) {
		s->udp_peer_len = 0;
		return;
	}
	if (ss.ss_family == AF_INET6)
		((struct sockaddr_in6 *)&ss)->sin6_port = htons(udp_port);
	else
		((struct sockaddr_in *)&ss)->sin_port = htons(udp_port);
	normalize(s->e, &ss, &len);
	s->udp_peer = ss;
	s->udp_peer_len = len;
}

/* Two intervals without an authentic record from the peer. */
static int
hears_nothing(const struct rock_session *s, int64_t now)
{
	return now - s->last_heard_ms >= 2 * s->e->cfg.hb_interval_ms;
}

void
rock_control_seal(struct rock_hb_record *r, const uint8_t tx[ROCK_KEY_LEN],
    uint8_t out[ROCK_HB_RECORD_LEN])
{
	memset(r->tag, 0, sizeof(r->tag));
	rock_hb_record_encode(r, out);
	rock_hb_tag(out + ROCK_HB_RECORD_LEN - ROCK_TAG_LEN, tx, out);
}

static void
make_record(struct rock_session *s, uint8_t out[ROCK_HB_RECORD_LEN])
{
	struct rock_hb_record r;

	memcpy(r.id, s->id, ROCK_ID_LEN);
	r.seq = ++s->seq_out;
	r.consumed = s->consumed;
	r.end = rock_session_end(s);
	r.flags = s->flags;
	/* UDP may pass one way only: the peer then arms its keepalive, so
	 * its data connection speaks to us even when it has nothing to say. */
	if (hears_nothing(s, rock_now_ms()))
		r.flags |= ROCK_FLAG_QUIET;
	rock_control_seal(&r, s->keys.tx, out);
	s->acked_consumed = s->consumed;
}

static void
send_packet(struct rock_engine *e, struct out_packet *p)
{
	size_t len = ROCK_HB_HEADER_LEN + p->n * ROCK_HB_RECORD_LEN;

	if (p->n == 0)
		return;
	rock_hb_header_encode((uint8_t)p->n, p->buf);
	/* Loss is normal on this channel: the next tick sends again. */
	(void)sendto(e->udp_fd, p->buf, len, MSG_DONTWAIT | MSG_NOSIGNAL,
	    (struct sockaddr *)&p->to, p->tolen);
	p->n = 0;
}

static int
can_heartbeat(const struct rock_session *s)
{
	return s->udp_peer_len > 0 && (s->features & ROCK_FEAT_UDP) &&
	    s->state != ROCK_ST_CLOSED;
}

void
rock_control_ack_now(struct rock_session *s)
{
	struct out_packet p;

	if (!can_heartbeat(s))
		return;
	p.to = s->udp_peer;
	p.tolen = s->udp_peer_len;
	p.n = 1;
	make_record(s, p.buf + ROCK_HB_HEADER_LEN);
	send_packet(s->e, &p);
}

void
rock_control_send_record(struct rock_engine *e,
    const struct sockaddr_storage *to, socklen_t tolen,
    const uint8_t rec[ROCK_HB_RECORD_LEN])
{
	struct out_packet p;

	p.to = *to;
	p.tolen = tolen;
	p.n = 1;
	memcpy(p.buf + ROCK_HB_HEADER_LEN, rec, ROCK_HB_RECORD_LEN);
	send_packet(e, &p);
}

static struct out_packet *
packet_for(struct out_packet *open, unsigned *nopen, struct rock_engine *e,
    const struct rock_session *s)
{
	unsigned i;

	for (i = 0; i < *nopen; i++)
		if (open[i].tolen == s->udp_peer_len &&
		    memcmp(&open[i].to, &s->udp_peer, s->udp_peer_len) == 0)
			return &open[i];
	if (*nopen == OPEN_PACKETS) {
		send_packet(e, &open[0]);
		i = 0;
	} else {
		i = (*nopen)++;
	}
	open[i].to = s->udp_peer;
	open[i].tolen = s->udp_peer_len;
	open[i].n = 0;
	return &open[i];
}

/* One record per connected rock, one packet per peer (22 records each). */
static void
send_heartbeats(struct rock_engine *e)
{
	struct out_packet *open = e->open_packets;
	struct rock_session *s;
	unsigned nopen = 0, i;

	for (s = e->all; s != NULL; s = s->next) {
		struct out_packet *p;

		if (s->state != ROCK_ST_CONNECTED || !can_heartbeat(s))
			continue;
		p = packet_for(open, &nopen, e, s);
		make_record(s, p->buf + ROCK_HB_HEADER_LEN + p->n * ROCK_HB_RECORD_LEN);
		if (++p->n == ROCK_HB_MAX_RECORDS)
			send_packet(e, p);
	}
	for (i = 0; i < nopen; i++)
		send_packet(e, &open[i]);
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

	if (!hears_nothing(s, now)) {
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
	    !s->proven && now - s->suspended_at_ms >= ROCK_UNPROVEN_MS) {
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
	int64_t now = rock_now_ms();
	struct rock_session *s, *next;
	int i;

	for (s = e->all; s != NULL; s = next) {
		next = s->next;
		rock_session_hold(s);
		check_session(s, now);
		rock_session_release(s);
	}
	if (e->ticks++ % 2 == 0)
		send_heartbeats(e);
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
	rock_engine_leave(arg);
}

static void
accept_record(struct rock_engine *e, const uint8_t *rec,
    const struct sockaddr_storage *from, socklen_t fromlen)
{
	struct rock_hb_record r;
	struct rock_session *s;
	uint8_t tag[ROCK_TAG_LEN];

	rock_hb_record_decode(&r, rec);
	if ((s = rock_engine_find(e, r.id)) == NULL) {
		if (rock_farewell_answer(e, &r, rec, from, fromlen) != 0)
			e->stats.hb_unknown++;
		return;
	}
	rock_hb_tag(tag, s->keys.rx, rec);
	if (!rock_equal(tag, r.tag, ROCK_TAG_LEN)) {
		e->stats.hb_bad_tag++;
		return;
	}
	if (r.seq <= s->seq_in) {
		e->stats.hb_replayed++;
		return;
	}
	e->stats.hb_ok++;
	s->seq_in = r.seq;
	s->last_heard_ms = rock_now_ms();
	s->udp_verified = 1;
	s->proven = 1;
	s->peer_quiet = (r.flags & ROCK_FLAG_QUIET) != 0;
	/* Follow the peer's latest source: NAT rebinding, address change. */
	s->udp_peer = *from;
	s->udp_peer_len = fromlen;
	rock_session_hold(s);
	(void)rock_session_peer_count(s, r.consumed, r.end, r.flags);
	rock_session_release(s);
}

void
rock_control_datagram(struct rock_engine *e, const uint8_t *buf, size_t len,
    const struct sockaddr_storage *from, socklen_t fromlen)
{
	unsigned n, i;

	if (rock_hb_packet_check(buf, len, &n) != 0) {
		e->stats.hb_malformed++;
		return;
	}
	for (i = 0; i < n; i++)
		accept_record(e, buf + ROCK_HB_HEADER_LEN + i * ROCK_HB_RECORD_LEN,
		    from, fromlen);
}

static void
read_udp(struct rock_engine *e, int fd)
{
	uint8_t buf[ROCK_HB_MAX_LEN + 1];
	struct sockaddr_storage from;
	socklen_t fromlen;
	unsigned budget;
	ssize_t got;

	for (budget = 0; budget < 64; budget++) {
		fromlen = sizeof(from);
		got = recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT,
		    (struct sockaddr *)&from, &fromlen);
		if (got < 0)
			return;
		rock_control_datagram(e, buf, (size_t)got, &from, fromlen);
	}
}

static void
on_udp(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	rock_engine_enter(arg);
	read_udp(arg, fd);
	rock_engine_leave(arg);
}
