/* rock_path.c: what a rock knows of its path (round trip, signs of life, progress) and the timers derived from it. */
#include "config.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <netinet/in.h>
/* The kernel's tcp_info: glibc's copy stops before segs_in and bytes_acked. */
#include <linux/tcp.h>

#include "rock_engine_int.h"
#include "rock_sys.h"

/* The kernel's TCP states (include/net/tcp_states.h), not in its uapi. */
#define TCP_STATE_SYN_RECV 3
#define TCP_STATE_FIN_WAIT2 5
#define TCP_STATE_TIME_WAIT 6
#define TCP_STATE_CLOSE 7
#define TCP_STATE_CLOSE_WAIT 8

int
rock_tcp_sample(int fd, struct rock_tcp_sample *out)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	memset(out, 0, sizeof(*out));
	if (fd < 0 || rock_sys.getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
		return -1;
	out->state = ti.tcpi_state;
	out->rtt_us = ti.tcpi_rtt;
	out->rttvar_us = ti.tcpi_rttvar;
	out->unacked = ti.tcpi_unacked;
	out->last_ack_recv_ms = ti.tcpi_last_ack_recv;
	out->last_data_recv_ms = ti.tcpi_last_data_recv;
	/* Older kernels fill less: the fields they lack read as 0. */
	out->segs_in = ti.tcpi_segs_in;
	out->bytes_acked = ti.tcpi_bytes_acked;
	out->ca_state = ti.tcpi_ca_state;
	out->backoff = ti.tcpi_backoff;
	out->rto_us = ti.tcpi_rto;
	out->lost = ti.tcpi_lost;
	out->retrans = ti.tcpi_retrans;
	out->snd_wnd = ti.tcpi_snd_wnd;
	out->last_data_sent_ms = ti.tcpi_last_data_sent;
	return 0;
}

/* Linux's first retransmission timeout: rtt + max(2 rtt, 200 ms). */
static int
first_rto_ms(int rtt_ms)
{
	return rtt_ms + (2 * rtt_ms > 200 ? 2 * rtt_ms : 200);
}

int
rock_tcp_rtt_ms(int fd)
{
	struct rock_tcp_sample t;

	return rock_tcp_sample(fd, &t) == 0 ? (int)(t.rtt_us / 1000) : 0;
}

int
rock_exchange_ms(int rtt_ms)
{
	/* The request resent once, then the answer. */
	return first_rto_ms(rtt_ms) + rtt_ms + 100;
}

int
rock_first_bytes_ms(int fd, int floor_ms, int *rtt_ms)
{
	struct rock_tcp_sample t;
	int rtt, ms;

	if (rtt_ms != NULL)
		*rtt_ms = -1;
	if (rock_tcp_sample(fd, &t) != 0)
		return floor_ms;
	if (t.state == TCP_STATE_SYN_RECV) {
		/* Accepted at a Fast Open SYN: the handshake measured nothing
		 * yet. TCP's initial RTO (1 s) for the resend, 2 s for the
		 * round trips around it. */
		ms = 3100;
	} else {
		/* Sent with the handshake's last ACK or just after it; if lost,
		 * resent after the client's first RTO, R + max(2R, 200 ms),
		 * which the path's jitter may stretch by 2R (a probe's FIN
		 * taken for silence makes its rock a plain connection). */
		rtt = (int)(t.rtt_us / 1000);
		ms = first_rto_ms(rtt) + 2 * rtt + 100;
		if (rtt_ms != NULL)
			*rtt_ms = rtt;
	}
	return ms > floor_ms ? ms : floor_ms;
}

int
rock_handshake_ms(const struct rock_engine *e, int rtt_ms)
{
	int ms = 4 * rock_exchange_ms(rtt_ms);

	return ms > e->cfg.handshake_timeout_ms ? ms : e->cfg.handshake_timeout_ms;
}

void
rock_path_init(struct rock_session *s, int rtt_ms)
{
	/* RFC 6298's first sample: variation half the round trip. */
	s->rtt_ms = rtt_ms > 0 ? rtt_ms : 0;
	s->rttvar_ms = s->rtt_ms / 2;
	rock_path_new_connection(s);
}

#define RTO_BOUND_FLOOR_MS 3000

/* The system's bound (net.ipv4.tcp_rto_max_ms, Linux 6.15): ours never
 * raises an administrator's lower one. */
static int
system_rto_max_ms(struct rock_engine *e)
{
	char buf[32];
	ssize_t n;
	int fd, v;

	if (e->tcp_rto_max_ms > 0)
		return e->tcp_rto_max_ms;
	e->tcp_rto_max_ms = ROCK_TCP_RTO_MAX_HIGH_MS;
	if ((fd = open("/proc/sys/net/ipv4/tcp_rto_max_ms",
	    O_RDONLY | O_CLOEXEC)) < 0)
		return e->tcp_rto_max_ms;
	n = rock_sys.read(fd, buf, sizeof(buf) - 1);
	rock_sys.close(fd);
	if (n > 0) {
		buf[n] = '\0';
		if ((v = atoi(buf)) >= ROCK_TCP_RTO_MAX_LOW_MS &&
		    v < ROCK_TCP_RTO_MAX_HIGH_MS)
			e->tcp_rto_max_ms = v;
	}
	return e->tcp_rto_max_ms;
}

/* TCP's retransmission timeout held to twice the path's first one, 3 s at
 * least. On a reordering path the ACK of new data after an idle gap can
 * echo the timestamp of a segment from before the gap; TCP takes the gap
 * for a round trip (seen on the cellular profile, plain TCP too: an RTT
 * sample of 19 s after 19 s idle, RTO 20-55 s), and the next lost tail
 * segment stalls the stream that long, a path otherwise healthy. The
 * round trip is the new connection's handshake's; unknown (a Fast Open
 * accept, a sub-millisecond path), the floor holds until TCP's first
 * sample (take_rtt). Kernels without the option keep TCP's timeout. */
void
rock_path_bound_rto(struct rock_session *s, int fd)
{
	int rtt = s->rtt_ms < 60000 ? s->rtt_ms : 60000;
	int ms = 2 * first_rto_ms(rtt), sys = system_rto_max_ms(s->e);

	if (ms < RTO_BOUND_FLOOR_MS)
		ms = RTO_BOUND_FLOOR_MS;
	if (ms > sys)
		ms = sys;
	s->rto_bound_rtt = s->rtt_ms > 0;
	s->rto_bound_ms = fd >= 0 && rock_sys.setsockopt(fd, IPPROTO_TCP,
	    TCP_RTO_MAX_MS, &ms, sizeof(ms)) == 0 ? ms : 0;
}

static void
watch_anew(struct rock_session *s)
{
	s->tcp_watched = 0;
	s->fin_asked = 0;
	s->stall_since_ms = 0;
	s->eof_unconfirmed_ms = 0;
	s->fin_read = 0;
}

void
rock_path_new_connection(struct rock_session *s)
{
	rock_path_bound_rto(s, s->fd);
	watch_anew(s);
}

void
rock_path_same_connection(struct rock_session *s)
{
	watch_anew(s);
}

void
rock_path_adopted_connection(struct rock_session *s)
{
	int ms = 0;
	socklen_t len = sizeof(ms);

	/* The record's round trip is TCP's last estimate, maybe the very
	 * sample the bound is against: the predecessor's bound stays. */
	if (rock_sys.getsockopt(s->fd, IPPROTO_TCP, TCP_RTO_MAX_MS, &ms, &len) == 0 &&
	    ms < system_rto_max_ms(s->e)) {
		s->rto_bound_ms = ms;
		s->rto_bound_rtt = 1;
	} else {
		rock_path_bound_rto(s, s->fd);
	}
	watch_anew(s);
}

/* TCP's own estimate, whenever we read one: it follows the path as it
 * is now, queues and all. */
static void
take_rtt(struct rock_session *s, const struct rock_tcp_sample *t)
{
	if (t->rtt_us == 0)
		return;
	s->rtt_ms = (int)(t->rtt_us / 1000);
	s->rttvar_ms = (int)(t->rttvar_us / 1000);
	if (!s->rto_bound_rtt && s->rtt_ms > 0)
		rock_path_bound_rto(s, s->fd);
}

/* As TCP retransmits: its estimate, under the bound it was given. */
int
rock_path_rto_ms(const struct rock_session *s)
{
	int rto = s->rtt_ms + 4 * s->rttvar_ms;

	return s->rto_bound_ms > 0 && rto > s->rto_bound_ms ?
	    s->rto_bound_ms : rto;
}

/* The silence allowed on top of the LAN's: TCP's RTO, but its variance
 * term no more than half a round trip and 250 ms (a connection that has
 * carried little still holds TCP's first guess, rttvar = rtt / 2): an idle
 * rock on a dead path is suspended within 3 s + 2 RTT (the last record in
 * flight, the dead time, one check interval). */
int
rock_path_dead_ms(const struct rock_session *s)
{
	int rto = rock_path_rto_ms(s), cap = s->rtt_ms + s->rtt_ms / 2 + 250;

	return s->e->cfg.hb_timeout_ms + (rto < cap ? rto : cap);
}

int
rock_path_stall_ms(const struct rock_session *s)
{
	int ms = 16 * rock_path_rto_ms(s);

	return ms > s->e->cfg.stall_ms ? ms : s->e->cfg.stall_ms;
}

/* Any segment from the peer proves the path, even one TCP discards: the
 * peer's keepalive probe, its zero-window probe (segs_in counts them all). */
int64_t
rock_path_tcp_heard(struct rock_session *s, int64_t now)
{
	struct rock_tcp_sample t;
	uint32_t ago;

	if (rock_tcp_sample(s->fd, &t) != 0)
		return s->tcp_heard_ms;
	take_rtt(s, &t);
	/* The peer's side of this connection ended without its word (no
	 * WR_SHUT from it yet): whatever still answers there (a balancer's
	 * kernel, our keepalives acknowledged after its server died) is not
	 * the peer, and the peer will send nothing more on it. A client asks
	 * the peer where its stream ends, once: a live peer's answer is a
	 * sign of life and brings its WR_SHUT (a half-close whose records
	 * UDP did not carry); a dead one's fleet gives none. */
	if (t.state == TCP_STATE_CLOSE_WAIT &&
	    !(s->peer_flags & ROCK_FLAG_WR_SHUT)) {
		if (s->role == ROCK_ROLE_CLIENT && !s->fin_asked) {
			s->fin_asked = 1;
			s->status_wanted = 1;
		}
		return s->tcp_heard_ms;
	}
	if (!s->tcp_watched) {
		/* First look: what the kernel remembers is all we know. */
		ago = t.last_ack_recv_ms < t.last_data_recv_ms ?
		    t.last_ack_recv_ms : t.last_data_recv_ms;
		s->tcp_heard_ms = now - (int64_t)ago;
		s->tcp_watched = 1;
	} else if (t.segs_in != s->segs_in) {
		s->tcp_heard_ms = now;
	}
	s->segs_in = t.segs_in;
	return s->tcp_heard_ms;
}

/* Unacknowledged data that TCP has not moved for the stall time, while
 * the control channel says the peer is there: the data connection is
 * stuck (a lost NAT or firewall state for TCP only). Progress is TCP's
 * acknowledged byte count, so the first write after a long idle time
 * starts a fresh clock instead of inheriting the idle time. */
int
rock_path_stalled(struct rock_session *s, int64_t now)
{
	struct rock_tcp_sample t;

	if (rock_tcp_sample(s->fd, &t) != 0)
		return 0;
	take_rtt(s, &t);
	if (t.unacked == 0 || s->stall_since_ms == 0 ||
	    t.bytes_acked != s->stall_acked) {
		s->stall_acked = t.bytes_acked;
		s->stall_since_ms = t.unacked == 0 ? 0 : now;
		return 0;
	}
	if (now - s->stall_since_ms < rock_path_stall_ms(s))
		return 0;
	/* TCP has not retransmitted yet: its own timer is longer than our
	 * bound (seen at 26 s on cellular after an idle gap, 0 lost, nothing
	 * resent), so its silence says nothing about the path yet. A path
	 * that lost TCP's state shows as retransmissions going unanswered. */
	if (t.backoff == 0 && t.retrans == 0 && t.lost == 0)
		return 0;
	/* One retransmission out and TCP's timer for it still running: on a
	 * lossy path that is a lost segment being repaired, not a dead path
	 * (cellular, under load: RTO 28.7 s after one backoff, 14 s into
	 * the stall). A path that lost TCP's state leaves the retransmission
	 * itself unanswered for a whole RTO (backoff 2). */
	if (t.backoff < 2 && now - s->stall_since_ms < (int64_t)(t.rto_us / 1000))
		return 0;
	rlog_info(s->e->log, "rock %s: TCP moved nothing for %lld ms: %u segments "
	    "unacknowledged, %u lost, %u retransmitted, backoff %u, RTO %u ms, "
	    "congestion state %u, peer's window %u, last sent %u ms ago, "
	    "last ack %u ms ago", s->name, (long long)(now - s->stall_since_ms),
	    t.unacked, t.lost, t.retrans, t.backoff, t.rto_us / 1000, t.ca_state,
	    t.snd_wnd, t.last_data_sent_ms, t.last_ack_recv_ms);
	return 1;
}

void
rock_path_progress(struct rock_session *s)
{
	s->stall_since_ms = 0;
}

/* Only the farewell missing, on sample t of the data connection. */
static int
farewell_only(struct rock_session *s, const struct rock_tcp_sample *t)
{
	uint32_t ours = ROCK_FLAG_WR_SHUT | ROCK_FLAG_EOF_SEEN;
	int err = 0;
	socklen_t len = sizeof(err);

	if ((s->flags & ours) != ours || !s->shut_sent || t->unacked != 0)
		return 0;
	/* A reset or TCP's own timeout also leaves nothing unacknowledged
	 * (the queue purged): that is a failure, not a close. */
	if (rock_sys.getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0)
		return 0;
	return t->state == TCP_STATE_FIN_WAIT2 || t->state == TCP_STATE_TIME_WAIT ||
	    t->state == TCP_STATE_CLOSE;
}

/* Both ends shut, the peer's end read, and the peer's TCP acknowledged
 * everything we sent, our FIN included: all that is missing is the
 * peer's last word (its farewell, rock_farewell.c). A peer silent now
 * has finished and its words were lost; TCP itself would call this
 * connection closed. */
int
rock_path_only_farewell_missing(struct rock_session *s)
{
	struct rock_tcp_sample t;

	return rock_tcp_sample(s->fd, &t) == 0 && farewell_only(s, &t);
}

/* While thousands close at once their records take a while to go round:
 * a rock still owed more than the farewell takes its group's signs of
 * life meanwhile, but not on a dead data connection (reset, or TCP's own
 * timeout: state CLOSE), nor for longer than four dead times after it
 * was first seen closed at both ends. */
int
rock_path_close_owed(struct rock_session *s, int64_t now)
{
	struct rock_tcp_sample t;

	if (s->both_closed_ms == 0)
		s->both_closed_ms = now;
	if (now - s->both_closed_ms > 4 * (int64_t)rock_path_dead_ms(s))
		return 0;
	if (rock_tcp_sample(s->fd, &t) != 0 || t.state == TCP_STATE_CLOSE)
		return 0;
	return !farewell_only(s, &t);
}
