/* rock_control.c: the UDP control channel: heartbeats, acks, failure detection. */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rock_engine_int.h"
#include "rock_err.h"
#include "rock_sys.h"


static void on_udp(evutil_socket_t fd, short what, void *arg);
static int read_udp(struct rock_engine *e, int fd, unsigned max);
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

static void set_anchor(struct rock_session *s, const struct rock_session *a);

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
	set_anchor(s, NULL);
	s->peer_slot = 0;
	rock_udp_peer_from_tcp(s, port);
}

/* Two intervals without an authentic record or packet from the peer. */
static int
hears_nothing(const struct rock_session *s, int64_t now)
{
	return now - s->last_heard_ms >= 2 * s->e->cfg.hb_interval_ms;
}

static int
can_heartbeat(const struct rock_session *s)
{
	return s->udp_peer_len > 0 && (s->features & ROCK_FEAT_UDP) &&
	    s->state != ROCK_ST_CLOSED;
}

/* ---- groups: the rocks between two control sockets share one packet
 * per interval, tagged with one of them, the anchor (PROTOCOL 3.1). A
 * rock joins by naming the anchor in a record tagged with its own key:
 * neither key alone can speak for the other's rock. */

static void
set_anchor(struct rock_session *s, const struct rock_session *a)
{
	if (a == NULL || a == s) {
		if (!s->has_anchor)
			return;
		s->has_anchor = 0;
	} else {
		if (s->has_anchor && memcmp(s->anchor_id, a->id, ROCK_ID_LEN) == 0)
			return;
		memcpy(s->anchor_id, a->id, ROCK_ID_LEN);
		s->has_anchor = 1;
	}
	/* The peer must hear the new anchor named: until then our counts
	 * count as unconfirmed. */
	s->announced = 0;
	s->sent_pkt = s->sent_pkt2 = 0;
}

/* The rock whose packets speak for s: its anchor while that lives, else
 * s itself (a closed anchor's rocks fall back at once). */
static struct rock_session *
group_of(struct rock_session *s)
{
	struct rock_session *a;

	if (!s->has_anchor)
		return s;
	a = rock_engine_find(s->e, s->anchor_id);
	if (a != NULL && a != s && can_heartbeat(a) && a->role == s->role &&
	    (s->role != ROCK_ROLE_CLIENT ||
	    memcmp(a->server_ident, s->server_ident, ROCK_IDENT_LEN) == 0))
		return a;
	set_anchor(s, NULL);
	return s;
}

static int
peer_is(const struct rock_peer *p, const struct rock_session *s)
{
	return p->len == s->udp_peer_len && memcmp(&p->addr, &s->udp_peer, p->len) == 0;
}

/* The slot of s's control address. The slot found last is tried first: a
 * client of many servers has as many self-anchored rocks, each asking on
 * every tick (a walk each was rocks x servers per tick). */
static struct rock_peer *
peer_for(struct rock_engine *e, struct rock_session *s)
{
	struct rock_peer *p, *free_slot = NULL;
	size_t i;

	if (s->peer_slot > 0 && s->peer_slot <= e->npeers &&
	    peer_is(&e->peers[s->peer_slot - 1], s))
		return &e->peers[s->peer_slot - 1];
	for (i = 0; i < e->npeers; i++) {
		p = &e->peers[i];
		if (peer_is(p, s)) {
			s->peer_slot = i + 1;
			return p;
		}
		if (!p->has && free_slot == NULL)
			free_slot = p;
	}
	if (free_slot == NULL) {
		if ((p = reallocarray(e->peers, e->npeers + 1, sizeof(*p))) == NULL)
			return NULL;
		e->peers = p;
		free_slot = &p[e->npeers++];
	}
	memset(free_slot, 0, sizeof(*free_slot));
	free_slot->addr = s->udp_peer;
	free_slot->len = s->udp_peer_len;
	s->peer_slot = (size_t)(free_slot - e->peers) + 1;
	return free_slot;
}

/* The oldest connected rock to p's address: the one likeliest to last
 * (a new anchor costs every rock of the group a record). Once per
 * anchor, so a walk over all rocks. */
static struct rock_session *
elect(struct rock_engine *e, const struct rock_peer *p)
{
	struct rock_session *x, *best = NULL;

	for (x = e->all; x != NULL; x = x->next)
		if (x->role == ROCK_ROLE_CLIENT && x->state == ROCK_ST_CONNECTED &&
		    can_heartbeat(x) && x->udp_peer_len == p->len &&
		    memcmp(&x->udp_peer, &p->addr, p->len) == 0 &&
		    group_of(x) == x &&
		    (best == NULL || x->connected_at_ms < best->connected_at_ms))
			best = x;
	return best;
}

/* Client: the oldest rock to a server's control address anchors the
 * others to it, and when it ends, the oldest left. The server takes the
 * client's choice from the records (accept_record). */
static void
choose_anchor(struct rock_session *s)
{
	struct rock_session *a;
	struct rock_peer *p;

	if (s->role != ROCK_ROLE_CLIENT || s->has_anchor)
		return;
	if ((p = peer_for(s->e, s)) == NULL)
		return;		/* no memory: s speaks for itself */
	if (!p->has || (a = rock_engine_find(s->e, p->anchor)) == NULL ||
	    !can_heartbeat(a) || a->has_anchor) {
		if ((a = elect(s->e, p)) == NULL)
			a = s;
		memcpy(p->anchor, a->id, ROCK_ID_LEN);
		p->has = 1;
	}
	set_anchor(s, a);
}

/* How long a rock may go without a record of its own: half the suspend
 * timeout between refreshes, the whole of it before its group's signs of
 * life stop being its own (a peer that dropped the rock without a word,
 * closed while suspended, say, must not keep it connected for as long as
 * the group lives: v4 ended such a rock at the suspend timeout). */
static int64_t
own_word_ms(const struct rock_session *s)
{
	long t = s->e->cfg.suspend_timeout_s;

	return t > 0 && t < 30L * 24 * 3600 ? (int64_t)t * 1000 : 30LL * 24 * 3600 * 1000;
}

/* Its anchor's signs of life are a rock's own (same sockets, same path),
 * except for a rock that only waits for the peer's last word (both ends
 * closed: its farewell lost, it must end on its own silence, as
 * rock_path_only_farewell_missing says) or whose own record is older
 * than own_word_ms. A closed rock still owed more than the farewell
 * keeps following for a while (rock_path_close_owed). */
static void
follow_group(struct rock_session *s, int64_t now)
{
	struct rock_session *g = group_of(s);
	uint32_t closed = ROCK_FLAG_WR_SHUT | ROCK_FLAG_EOF_SEEN;
	int64_t own = s->own_heard_ms > s->connected_at_ms ? s->own_heard_ms :
	    s->connected_at_ms;

	if (g == s || now - own > own_word_ms(s))
		return;
	if ((s->flags & closed) == closed && !rock_path_close_owed(s, now))
		return;
	if (g->last_heard_ms > s->last_heard_ms)
		s->last_heard_ms = g->last_heard_ms;
	if (g->udp_verified)
		s->udp_verified = 1;
	s->peer_quiet = g->peer_quiet;
	s->udp_peer = g->udp_peer;
	s->udp_peer_len = g->udp_peer_len;
}

/* ---- acknowledgement: each packet says which of the last 65 packets
 * under its anchor arrived; a record counts as received once a packet
 * that carried it is acknowledged. */

static int
acked(const struct rock_session *g, uint64_t seq)
{
	uint64_t d;

	if (seq == 0 || seq > g->ack_top)
		return 0;
	d = g->ack_top - seq;
	return d == 0 || (d <= 64 && ((g->ack_bits >> (d - 1)) & 1));
}

/* The bits of an ack window below its newest packet, top, that name
 * packets at all (numbers start at 1). */
static uint64_t
window_mask(uint64_t top)
{
	return top > 64 ? UINT64_MAX : (UINT64_C(1) << (top - 1)) - 1;
}

/* No loss seen lately on s's path: every one of the last packets each
 * way under its anchor (up to 65 of ours, 64 before the peer's newest)
 * arrived. None sent or received yet is no evidence either way: 0. */
int
rock_control_lossless(struct rock_session *s)
{
	struct rock_session *g = group_of(s);

	if (g->pkt_out == 0 || g->pkt_in == 0 || g->ack_top != g->pkt_out)
		return 0;
	return (g->ack_bits & window_mask(g->pkt_out)) == window_mask(g->pkt_out) &&
	    (g->rx_bits & window_mask(g->pkt_in)) == window_mask(g->pkt_in);
}

/* Counts (or the anchor) the peer has not confirmed. */
static int
dirty(struct rock_session *s, const struct rock_session *g, int64_t now)
{
	if (s->sent_pkt != 0 && (acked(g, s->sent_pkt) || acked(g, s->sent_pkt2))) {
		s->conf_consumed = s->acked_consumed;
		s->conf_flags = s->sent_flags;
		s->announced = 1;
		s->sent_pkt = s->sent_pkt2 = 0;
		s->conf_ms = now;
	}
	return !s->announced || s->consumed != s->conf_consumed ||
	    s->flags != s->conf_flags || now - s->conf_ms > own_word_ms(s) / 2;
}

void
rock_control_seal(struct rock_hb_record *r, const uint8_t tx[ROCK_KEY_LEN],
    uint8_t out[ROCK_HB_RECORD_LEN])
{
	memset(r->tag, 0, sizeof(r->tag));
	rock_hb_record_encode(r, out);
	rock_hb_tag(out + ROCK_HB_RECORD_LEN - ROCK_TAG_LEN, tx, out);
}

static size_t
packet_len(const uint8_t *pkt)
{
	return ROCK_HB_HEADER_LEN + (size_t)pkt[6] * ROCK_HB_RECORD_LEN;
}

void
rock_control_send_packet(struct rock_engine *e,
    const struct sockaddr_storage *to, socklen_t tolen, const uint8_t *pkt)
{
	/* Loss is normal on this channel: the next interval sends again. */
	(void)rock_sys.sendto(e->udp_fd, pkt, packet_len(pkt),
	    MSG_DONTWAIT | MSG_NOSIGNAL, (const struct sockaddr *)to, tolen);
}

/* n packets (at most ROCK_CONTROL_BATCH) to one address, in one call. */
void
rock_control_send_packets(struct rock_engine *e,
    const struct sockaddr_storage *to, socklen_t tolen,
    uint8_t *const pkts[], unsigned n)
{
	struct mmsghdr v[ROCK_CONTROL_BATCH];
	struct iovec iov[ROCK_CONTROL_BATCH];
	unsigned i;

	ROCK_ASSERT(n <= ROCK_CONTROL_BATCH);
	memset(v, 0, sizeof(v));
	for (i = 0; i < n; i++) {
		iov[i] = (struct iovec){ pkts[i], packet_len(pkts[i]) };
		v[i].msg_hdr.msg_name = (void *)(uintptr_t)to;
		v[i].msg_hdr.msg_namelen = tolen;
		v[i].msg_hdr.msg_iov = &iov[i];
		v[i].msg_hdr.msg_iovlen = 1;
	}
	(void)rock_sys.sendmmsg(e->udp_fd, v, n, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* A packet being filled under anchor g. */
struct out_packet {
	struct rock_hb_header h;
	uint8_t buf[ROCK_HB_MAX_LEN];
};

static void
packet_open(struct out_packet *p, struct rock_session *g)
{
	memset(&p->h, 0, sizeof(p->h));
	memcpy(p->h.anchor, g->id, ROCK_ID_LEN);
	p->h.seq = ++g->pkt_out;
}

static void
packet_send(struct out_packet *p, struct rock_session *g, int64_t now)
{
	/* UDP may pass one way only: the peer then arms its keepalive, so
	 * its data connections speak to us even when they have nothing to
	 * say. */
	if (hears_nothing(g, now))
		p->h.flags |= ROCK_HB_QUIET;
	p->h.ack = g->pkt_in;
	p->h.ack_bits = g->rx_bits;
	g->acks_owed = 0;
	rock_hb_packet_seal(&p->h, g->keys.tx, p->buf);
	rock_control_send_packet(g->e, &g->udp_peer, g->udp_peer_len, p->buf);
}

static void
add_record(struct out_packet *p, struct rock_session *s,
    const struct rock_session *g)
{
	struct rock_hb_record r;
	uint8_t *out = p->buf + ROCK_HB_HEADER_LEN +
	    (size_t)p->h.nrecords++ * ROCK_HB_RECORD_LEN;

	memcpy(r.id, s->id, ROCK_ID_LEN);
	r.seq = ++s->seq_out;
	r.consumed = s->consumed;
	r.end = rock_session_end(s);
	r.flags = s->flags;
	memcpy(r.anchor, g->id, ROCK_ID_LEN);
	rock_control_seal(&r, s->keys.tx, out);
	/* The previous packet still counts if it carried the same. */
	s->sent_pkt2 = s->acked_consumed == s->consumed &&
	    s->sent_flags == s->flags ? s->sent_pkt : 0;
	s->sent_pkt = p->h.seq;
	s->acked_consumed = s->consumed;
	s->sent_flags = s->flags;
	s->rec_interval = (uint32_t)s->e->hb_stamp;
}

/* The peer confirmed s's counts and flags as they are now. */
static int
confirmed_now(const struct rock_session *s)
{
	return s->announced && s->conf_consumed == s->consumed &&
	    s->conf_flags == s->flags;
}

/* The last packet with s's record carried its counts and flags as they
 * are now. */
static int
sent_now(const struct rock_session *s)
{
	return s->sent_pkt != 0 && s->acked_consumed == s->consumed &&
	    s->sent_flags == s->flags;
}

/* The peer acknowledged a packet that carried s's counts and flags as
 * they are now: it has the word a farewell would say (PROTOCOL 6). */
int
rock_control_word_heard(struct rock_session *s)
{
	struct rock_session *g = group_of(s);

	return confirmed_now(s) || (sent_now(s) &&
	    (acked(g, s->sent_pkt) || acked(g, s->sent_pkt2)));
}

/* A record with s's counts and flags as they are now went out (the
 * peer's acknowledgement aside). */
int
rock_control_word_sent(const struct rock_session *s)
{
	return confirmed_now(s) || sent_now(s);
}

void
rock_control_ack_now(struct rock_session *s)
{
	struct out_packet p;
	struct rock_session *g;

	if (!can_heartbeat(s))
		return;
	choose_anchor(s);
	g = group_of(s);
	packet_open(&p, g);
	add_record(&p, s, g);
	packet_send(&p, g, rock_now_ms());
}

/* Packets per group and burst: records beyond wait for the next burst,
 * so that every packet of a burst stays within the 64 that an
 * acknowledgement describes. */
#define GROUP_PACKETS 48

/* A receiver acknowledges at once, in a packet without records, after
 * this many packets with records under one anchor; and a sender whose
 * burst left records behind sends the next once the peer's bits show
 * every packet of the last burst arrived but its last ACK_EVERY - 1.
 * So a group with thousands of changed counts (a mass close, a new
 * anchor) is confirmed in a few round trips, not one burst per
 * interval. */
#define ACK_EVERY 16

/* Bursts per group and interval, the interval's own included; and each
 * record at most once per interval: an ack, authentic but false or
 * replayed by a key holder, cannot make us send more than every changed
 * count once an interval. */
#define GROUP_BURSTS 16

/* Sends g's listed records, up to GROUP_PACKETS packets; rotate: the
 * interval's burst starts where the last one stopped (a backlog burst
 * lists only records not sent this interval, so it starts at its head). */
static void
send_group(struct rock_session *g, int64_t now, int rotate)
{
	size_t n = 0, sent = 0, cap = GROUP_PACKETS * ROCK_HB_MAX_RECORDS, i;
	struct rock_session *s;
	struct out_packet p;
	int k, self = g->hb_self;

	g->hb_self = 0;
	for (s = g->hb_list; s != NULL; s = s->hb_next)
		n++;
	/* The anchor's own record first: the peer speaks under a new anchor
	 * only once it has heard it name itself. */
	if (self)
		cap--;
	/* More than a burst holds: start where the last one stopped, or
	 * while no ack comes the same rocks would go every time and the
	 * rest never. */
	s = g->hb_list;
	if (n > cap && rotate) {
		for (i = g->hb_rot % n; i > 0; i--)
			s = s->hb_next;
		g->hb_rot = g->hb_rot % n + cap;
	}
	g->burst_first = g->pkt_out + 1;
	for (k = 0; k == 0 || (sent < n && k < GROUP_PACKETS); k++) {
		packet_open(&p, g);
		if (self) {
			add_record(&p, g, g);
			self = 0;
		}
		for (; sent < n && p.h.nrecords < ROCK_HB_MAX_RECORDS; sent++) {
			add_record(&p, s, g);
			s = s->hb_next != NULL ? s->hb_next : g->hb_list;
		}
		packet_send(&p, g, now);
	}
	g->hb_backlog = sent < n;
}

/* Lists s for its group's packet when the peer has not confirmed its
 * counts: the anchor itself apart, to go first. */
static void
list_record(struct rock_session *s, struct rock_session *g, int64_t now)
{
	if (!dirty(s, g, now))
		return;
	if (s == g) {
		g->hb_self = 1;
		return;
	}
	s->hb_next = g->hb_list;
	g->hb_list = s;
}

/* The peer's bits show the last burst arrived, but for its last
 * ACK_EVERY - 1 packets (their ack may be on its way). */
static int
burst_arrived(const struct rock_session *g)
{
	uint64_t seq, last = g->burst_first + ACK_EVERY - 1 <= g->pkt_out ?
	    g->pkt_out - (ACK_EVERY - 1) : g->burst_first;

	for (seq = g->burst_first; seq <= last; seq++)
		if (!acked(g, seq))
			return 0;
	return 1;
}

/* The next burst of a group with a backlog once the last arrived: the
 * records still unconfirmed and not sent this interval. */
static void
send_backlog(struct rock_session *g, int64_t now)
{
	uint32_t interval = (uint32_t)g->e->hb_stamp;
	struct rock_session *s;

	if (!g->hb_backlog || g->hb_bursts >= GROUP_BURSTS ||
	    g->state != ROCK_ST_CONNECTED || !can_heartbeat(g) ||
	    !burst_arrived(g))
		return;
	g->hb_list = NULL;
	g->hb_self = 0;
	for (s = g->e->all; s != NULL; s = s->next)
		if (s->state == ROCK_ST_CONNECTED && can_heartbeat(s) &&
		    s->rec_interval != interval && group_of(s) == g)
			list_record(s, g, now);
	if (g->hb_list == NULL && !g->hb_self) {
		g->hb_backlog = 0;
		return;
	}
	g->hb_bursts++;
	send_group(g, now, 0);
}

/* What a packet with records asks of its receiver: an ack at once every
 * ACK_EVERY such packets. */
static void
owe_ack(struct rock_session *a, int64_t now)
{
	struct out_packet p;

	if (++a->acks_owed < ACK_EVERY || a->state != ROCK_ST_CONNECTED ||
	    !can_heartbeat(a))
		return;
	packet_open(&p, a);
	packet_send(&p, a, now);
}

/* A server address whose anchor is gone frees its slot: the table
 * holds the servers the client speaks to now, not all it ever did. */
static void
forget_gone_peers(struct rock_engine *e)
{
	size_t i;

	for (i = 0; i < e->npeers; i++)
		if (e->peers[i].has &&
		    rock_engine_find(e, e->peers[i].anchor) == NULL)
			e->peers[i].has = 0;
}

/* One packet per group each interval, with a record for each connected
 * rock whose counts the peer has not confirmed; none for the others. */
static void
send_heartbeats(struct rock_engine *e, int64_t now)
{
	struct rock_session *s, *g, *groups = NULL;
	unsigned long stamp = ++e->hb_stamp;

	forget_gone_peers(e);
	for (s = e->all; s != NULL; s = s->next) {
		if (s->state != ROCK_ST_CONNECTED || !can_heartbeat(s))
			continue;
		choose_anchor(s);
		g = group_of(s);
		if (g->hb_stamp != stamp) {
			g->hb_stamp = stamp;
			g->hb_list = NULL;
			g->hb_self = 0;
			g->hb_gnext = groups;
			groups = g;
		}
		list_record(s, g, now);
	}
	for (g = groups; g != NULL; g = g->hb_gnext) {
		g->hb_bursts = 1;
		send_group(g, now, 1);
	}
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
		follow_group(s, now);
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
	while (e->udp_fd >= 0 && read_udp(e, e->udp_fd, 256) != 0 &&
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
		send_heartbeats(e, now);
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

/* A record names the rock that speaks for its own: the server takes the
 * client's choice when the packet that brought it is that anchor's. */
static void
take_anchor(struct rock_session *s, const struct rock_hb_record *r,
    const struct rock_session *a)
{
	if (s->role != ROCK_ROLE_SERVER)
		return;
	if (rock_equal(r->anchor, s->id, ROCK_ID_LEN))
		set_anchor(s, NULL);
	else if (a != NULL && rock_equal(r->anchor, a->id, ROCK_ID_LEN))
		set_anchor(s, a);
}

/* A record stands on its own tag: it is taken even when its packet's
 * anchor is unknown here (a finished rock's farewell, a record naming an
 * anchor this side closed). */
static void
accept_record(struct rock_engine *e, const uint8_t *rec,
    const struct sockaddr_storage *from, socklen_t fromlen,
    const struct rock_session *a)
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
	s->last_heard_ms = s->own_heard_ms = rock_now_ms();
	s->udp_verified = 1;
	s->proven = 1;
	/* Follow the peer's latest source: NAT rebinding, address change. */
	s->udp_peer = *from;
	s->udp_peer_len = fromlen;
	take_anchor(s, &r, a);
	rock_session_hold(s);
	(void)rock_session_peer_count(s, r.consumed, r.end, r.flags);
	rock_session_release(s);
}

/* Received packet numbers for our acknowledgement: the newest, and a bit
 * for each of the 64 before it. */
void
rock_rx_window_note(uint64_t *top, uint64_t *bits, uint64_t seq)
{
	uint64_t d;

	if (seq < *top) {		/* late: its freshness was checked */
		*bits |= (uint64_t)1 << (*top - seq - 1);
		return;
	}
	d = seq - *top;
	*bits = d >= 64 ? 0 : *bits << d;
	if (*top != 0 && d <= 64)
		*bits |= (uint64_t)1 << (d - 1);
	*top = seq;
}

static void
note_received(struct rock_session *a, uint64_t seq)
{
	rock_rx_window_note(&a->pkt_in, &a->rx_bits, seq);
}

/* Never accepted before, and not too old to tell: a packet overtaken by
 * a later one (an interval's burst can be 48 packets) still counts, as in
 * IPsec's and QUIC's replay windows. */
static int
fresh(const struct rock_session *a, uint64_t seq)
{
	uint64_t d;

	if (seq > a->pkt_in)
		return 1;
	d = a->pkt_in - seq;
	return seq != 0 && d >= 1 && d <= 64 && ((a->rx_bits >> (d - 1)) & 1) == 0;
}

/* The packet's own tag and number, under an anchor we know: an
 * authentic, fresh packet is a sign of life for the anchor's group and
 * brings the peer's acknowledgement; any other is dropped whole. */
static int
accept_header(struct rock_session *a, const struct rock_hb_header *h,
    const uint8_t *pkt, size_t len, const struct sockaddr_storage *from,
    socklen_t fromlen)
{
	struct rock_engine *e = a->e;
	uint8_t tag[ROCK_TAG_LEN];

	rock_hb_packet_tag(tag, a->keys.rx, pkt, len);
	if (!rock_equal(tag, h->tag, ROCK_TAG_LEN)) {
		e->stats.hb_bad_tag++;
		return -1;
	}
	if (!fresh(a, h->seq)) {
		e->stats.hb_replayed++;
		return -1;
	}
	e->stats.hb_ok++;
	a->last_heard_ms = rock_now_ms();
	a->udp_verified = 1;
	a->proven = 1;
	/* The latest packet's word on the path; a late one has older news. */
	if (h->seq > a->pkt_in) {
		a->peer_quiet = (h->flags & ROCK_HB_QUIET) != 0;
		a->udp_peer = *from;
		a->udp_peer_len = fromlen;
	}
	note_received(a, h->seq);
	/* Never beyond what we sent: the peer cannot confirm the unsent. */
	if (h->ack <= a->pkt_out) {
		if (h->ack > a->ack_top) {
			a->ack_top = h->ack;
			a->ack_bits = h->ack_bits;
		} else if (h->ack == a->ack_top) {
			a->ack_bits |= h->ack_bits;
		}
	}
	return 0;
}

void
rock_control_datagram(struct rock_engine *e, const uint8_t *buf, size_t len,
    const struct sockaddr_storage *from, socklen_t fromlen)
{
	struct rock_hb_header h;
	struct rock_session *a;
	unsigned n, i;

	if (rock_hb_packet_check(buf, len, &n) != 0) {
		e->stats.hb_malformed++;
		return;
	}
	rock_hb_header_decode(&h, buf);
	a = rock_engine_find(e, h.anchor);
	if (a != NULL && a->state == ROCK_ST_CLOSED)
		a = NULL;
	if (a == NULL) {
		if (rock_farewell_answer_packet(e, &h, buf, from, fromlen) != 0 &&
		    n == 0)
			e->stats.hb_unknown++;
	} else if (accept_header(a, &h, buf, len, from, fromlen) != 0) {
		return;
	} else {
		rock_session_hold(a);
	}
	for (i = 0; i < n; i++)
		accept_record(e, buf + ROCK_HB_HEADER_LEN + i * ROCK_HB_RECORD_LEN,
		    from, fromlen, a);
	if (a != NULL) {
		if (n > 0)
			owe_ack(a, rock_now_ms());
		send_backlog(a, rock_now_ms());
		rock_session_release(a);
	}
}

/* Up to max datagrams waiting on the control socket; 1 if it had that
 * many (more may wait), 0 once it is empty. */
static int
read_udp(struct rock_engine *e, int fd, unsigned max)
{
	/* One byte over the largest packet: a longer datagram is seen as
	 * too long, not cut to a valid length. */
	uint8_t (*buf)[ROCK_HB_MAX_LEN + 1] = e->udp_in;
	struct sockaddr_storage from[ROCK_CONTROL_BATCH];
	struct iovec iov[ROCK_CONTROL_BATCH];
	struct mmsghdr v[ROCK_CONTROL_BATCH];
	unsigned budget, i;
	int got;

	for (budget = 0; budget < max; budget += (unsigned)got) {
		memset(v, 0, sizeof(v));
		for (i = 0; i < ROCK_CONTROL_BATCH; i++) {
			iov[i] = (struct iovec){ buf[i], sizeof(buf[i]) };
			v[i].msg_hdr.msg_name = &from[i];
			v[i].msg_hdr.msg_namelen = sizeof(from[i]);
			v[i].msg_hdr.msg_iov = &iov[i];
			v[i].msg_hdr.msg_iovlen = 1;
		}
		got = rock_sys.recvmmsg(fd, v, ROCK_CONTROL_BATCH, MSG_DONTWAIT);
		if (got <= 0)
			return 0;
		e->udp_batch = ++e->udp_batches;
		for (i = 0; i < (unsigned)got; i++)
			rock_control_datagram(e, buf[i], v[i].msg_len, &from[i],
			    v[i].msg_hdr.msg_namelen);
		e->udp_batch = 0;
		rock_farewell_batch_end(e);
		/* A short batch emptied the queue: no call to hear EAGAIN. */
		if (got < ROCK_CONTROL_BATCH)
			return 0;
	}
	return 1;
}

static void
on_udp(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	rock_engine_enter(arg);
	(void)read_udp(arg, fd, 64);
	rock_engine_leave(arg);
}
