/* rock_control_recv.c: what arrives on the control socket: packets and records checked, their news taken (doc/PROTOCOL.md 3.1, 3.2). */
#include "config.h"

#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "rock_control_int.h"
#include "rock_engine_int.h"
#include "rock_err.h"
#include "rock_sys.h"

/* A record names the rock that speaks for its own: the server takes the
 * client's choice when the packet that brought it is that anchor's. */
static void
take_anchor(struct rock_session *s, const struct rock_hb_record *r,
    const struct rock_session *a)
{
	if (s->role != ROCK_ROLE_SERVER)
		return;
	if (rock_equal(r->anchor, s->id, ROCK_ID_LEN))
		rock_group_set_anchor(s, NULL);
	else if (a != NULL && rock_equal(r->anchor, a->id, ROCK_ID_LEN))
		rock_group_set_anchor(s, a);
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
			rock_control_owe_ack(a, rock_now_ms());
		rock_control_send_backlog(a, rock_now_ms());
		rock_session_release(a);
	}
}

/* Up to max datagrams waiting on the control socket; 1 if it had that
 * many (more may wait), 0 once it is empty. */
int
rock_control_read(struct rock_engine *e, int fd, unsigned max)
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

void
rock_control_on_udp(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	rock_engine_enter(arg);
	(void)rock_control_read(arg, fd, 64);
	rock_engine_leave(arg);
}
