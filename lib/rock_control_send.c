/* rock_control_send.c: heartbeat groups, their anchors and acknowledgement, and the packets sent each interval (doc/PROTOCOL.md 3.1 to 3.3). */
#include "config.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "rock_control_int.h"
#include "rock_engine_int.h"
#include "rock_err.h"
#include "rock_sys.h"

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

void
rock_group_set_anchor(struct rock_session *s, const struct rock_session *a)
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
	rock_group_set_anchor(s, NULL);
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
	rock_group_set_anchor(s, a);
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
void
rock_group_follow(struct rock_session *s, int64_t now)
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
	if (rock_hears_nothing(g, now))
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
void
rock_control_send_backlog(struct rock_session *g, int64_t now)
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
void
rock_control_owe_ack(struct rock_session *a, int64_t now)
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
void
rock_control_send_heartbeats(struct rock_engine *e, int64_t now)
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
