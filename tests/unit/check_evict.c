/* check_evict.c: how server sessions end (who is evicted when rockd is full, unproven rocks expiring, a finished rock's farewell) and what their control channel says meanwhile (one packet per client's group, records only until confirmed). */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rock_engine_int.h"
#include "rock_err.h"
#include "suites.h"

static struct event_base *base;
static struct rock_engine *eng;
static struct rock_log lg;
static struct rock_config logcfg;
static int nclosed;
static const char *closed_name[8];

static void
on_closed(struct rock_session *s, int err, void *arg)
{
	(void)err;
	(void)arg;
	if (nclosed < 8)
		closed_name[nclosed] = (const char *)s->arg;
	nclosed++;
	rock_session_free(s);
}

static const struct rock_session_cbs cbs = {
	NULL, NULL, NULL, NULL, on_closed, NULL
};

static void
setup(void)
{
	struct sockaddr_in lo = { .sin_family = AF_INET,
	    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

	nclosed = 0;
	memset(closed_name, 0, sizeof(closed_name));
	rock_config_defaults(&logcfg);
	logcfg.log_sink = ROCK_LOG_STDERR;
	rock_log_configure(&lg, &logcfg, "test-evict");
	ck_assert_ptr_nonnull(base = event_base_new());
	ck_assert_int_eq(rock_engine_new(&eng, base, &lg, NULL,
	    (struct sockaddr *)&lo, sizeof(lo)), 0);
}

static void
teardown(void)
{
	rock_engine_free(eng);
	event_base_free(base);
}

static struct sockaddr_in
v4(const char *host, uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };

	ck_assert_int_eq(inet_pton(AF_INET, host, &a.sin_addr), 1);
	return a;
}

/* A server session named name from host; suspended (or connected) at
 * at_ms, proven or not. */
/* Our end of a loopback TCP connection, the other in *peer; with shut,
 * our FIN sent and acknowledged, none back (FIN_WAIT2). */
static int
tcp_pair(int *peer, int shut)
{
	struct sockaddr_in a = v4("127.0.0.1", 0);
	socklen_t len = sizeof(a);
	int l, c;

	ck_assert_int_ge(l = socket(AF_INET, SOCK_STREAM, 0), 0);
	ck_assert_int_eq(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(l, 1), 0);
	ck_assert_int_eq(getsockname(l, (struct sockaddr *)&a, &len), 0);
	ck_assert_int_ge(c = socket(AF_INET, SOCK_STREAM, 0), 0);
	ck_assert_int_eq(connect(c, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_ge(*peer = accept(l, NULL, NULL), 0);
	close(l);
	if (shut) {
		ck_assert_int_eq(shutdown(c, SHUT_WR), 0);
		usleep(20000);	/* loopback: the FIN's ack is back by now */
	}
	return c;
}

static struct rock_session *
add(const char *name, const char *host, int suspended, int64_t at_ms, int proven)
{
	struct rock_session *s;
	struct rock_keys k;
	uint8_t id[ROCK_ID_LEN];
	struct sockaddr_in a = v4(host, 40000);

	rock_random(id, sizeof(id));
	rock_random(&k, sizeof(k));
	ck_assert_int_eq(rock_session_new(eng, ROCK_ROLE_SERVER, id, &k, 65536,
	    &cbs, (void *)(uintptr_t)name, &s), 0);
	memcpy(&s->peer, &a, sizeof(a));
	s->peer_len = sizeof(a);
	s->state = suspended ? ROCK_ST_SUSPENDED : ROCK_ST_CONNECTED;
	s->suspended_at_ms = suspended ? at_ms : 0;
	s->connected_at_ms = suspended ? 0 : at_ms;
	s->proven = proven;
	return s;
}

START_TEST(test_room_strangers_first)
{
	int64_t now = rock_now_ms();
	struct sockaddr_in newcomer = v4("198.51.100.7", 5000);
	struct sockaddr_in user = v4("192.0.2.1", 5001);

	add("user", "192.0.2.1", 1, now - 5000, 1);
	add("stranger-connected", "203.0.113.9", 0, now - 9000, 0);
	add("stranger-suspended", "203.0.113.9", 1, now - 1000, 0);
	/* Below the limit: nobody goes. */
	ck_assert_int_eq(rock_engine_make_room(eng, 4, (struct sockaddr *)&newcomer), 0);
	ck_assert_int_eq(nclosed, 0);
	/* Unproven first, suspended before connected. */
	ck_assert_int_eq(rock_engine_make_room(eng, 3, (struct sockaddr *)&newcomer), 0);
	ck_assert_int_eq(nclosed, 1);
	ck_assert_str_eq(closed_name[0], "stranger-suspended");
	ck_assert_int_eq(rock_engine_make_room(eng, 2, (struct sockaddr *)&newcomer), 0);
	ck_assert_str_eq(closed_name[1], "stranger-connected");
	/* A proven user's suspended rock: not for a stranger to push out. */
	ck_assert_int_eq(rock_engine_make_room(eng, 1, (struct sockaddr *)&newcomer), -1);
	ck_assert_int_eq(nclosed, 2);
	ck_assert_int_eq(rock_engine_make_room(eng, 1, NULL), -1);
	/* Its own newcomer may replace it. */
	ck_assert_int_eq(rock_engine_make_room(eng, 1, (struct sockaddr *)&user), 0);
	ck_assert_str_eq(closed_name[2], "user");
	ck_assert_uint_eq(rock_engine_nsessions(eng), 0);
}
END_TEST

START_TEST(test_room_own_oldest)
{
	int64_t now = rock_now_ms();
	struct sockaddr_in6 mapped = { .sin6_family = AF_INET6 };

	ck_assert_int_eq(inet_pton(AF_INET6, "::ffff:192.0.2.1", &mapped.sin6_addr), 1);
	add("newer", "192.0.2.1", 1, now - 1000, 1);
	add("older", "192.0.2.1", 1, now - 8000, 1);
	add("connected", "192.0.2.1", 0, now - 60000, 1);
	/* The same host written v4-mapped is the same peer. */
	ck_assert_int_eq(rock_engine_make_room(eng, 3, (struct sockaddr *)&mapped), 0);
	ck_assert_str_eq(closed_name[0], "older");
	ck_assert_int_eq(rock_engine_make_room(eng, 2, (struct sockaddr *)&mapped), 0);
	ck_assert_str_eq(closed_name[1], "newer");
	/* A connected rock is never evicted, even one's own. */
	ck_assert_int_eq(rock_engine_make_room(eng, 1, (struct sockaddr *)&mapped), -1);
}
END_TEST

START_TEST(test_unproven_expire)
{
	int64_t now = rock_now_ms();
	struct rock_session *c;

	add("stranger", "203.0.113.9", 1, now - ROCK_UNPROVEN_MS - 1, 0);
	add("young-stranger", "203.0.113.9", 1, now - ROCK_UNPROVEN_MS + 3000, 0);
	add("user", "192.0.2.1", 1, now - ROCK_UNPROVEN_MS - 1, 1);
	c = add("client", "192.0.2.2", 1, now - ROCK_UNPROVEN_MS - 1, 0);
	c->role = ROCK_ROLE_CLIENT;	/* a client never expires its own */
	rock_control_tick(eng);
	ck_assert_int_eq(nclosed, 1);
	ck_assert_str_eq(closed_name[0], "stranger");
	ck_assert_uint_eq(rock_engine_nsessions(eng), 3);
}
END_TEST

START_TEST(test_long_connection_proves)
{
	struct rock_session *s = add("user", "192.0.2.1", 0,
	    rock_now_ms() - ROCK_UNPROVEN_MS, 0);

	s->fd = -1;
	s->last_heard_ms = rock_now_ms();
	rock_control_tick(eng);
	ck_assert_int_eq(s->proven, 1);
}
END_TEST

/* ---- the farewell: a UDP socket of ours plays the peer */

static int peer_fd;

static void
peer_open(struct rock_session *s)
{
	struct sockaddr_in a = v4("127.0.0.1", 0);
	socklen_t len = sizeof(a);

	ck_assert_int_ge(peer_fd = socket(AF_INET, SOCK_DGRAM, 0), 0);
	ck_assert_int_eq(bind(peer_fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(getsockname(peer_fd, (struct sockaddr *)&a, &len), 0);
	memcpy(&s->udp_peer, &a, sizeof(a));
	s->udp_peer_len = sizeof(a);
}

/* The next record the peer gets within ms, checked with the sender's key;
 * 0, or -1 if none came. */
static int
peer_read(const struct rock_keys *k, struct rock_hb_record *r, int ms)
{
	struct pollfd p = { .fd = peer_fd, .events = POLLIN };
	uint8_t buf[ROCK_HB_MAX_LEN], tag[ROCK_TAG_LEN];
	unsigned n;
	ssize_t got;

	if (poll(&p, 1, ms) != 1)
		return -1;
	got = recv(peer_fd, buf, sizeof(buf), 0);
	ck_assert_int_eq(rock_hb_packet_check(buf, (size_t)got, &n), 0);
	ck_assert_uint_eq(n, 1);
	rock_hb_record_decode(r, buf + ROCK_HB_HEADER_LEN);
	rock_hb_tag(tag, k->tx, buf + ROCK_HB_HEADER_LEN);
	ck_assert(rock_equal(tag, r->tag, ROCK_TAG_LEN));
	return 0;
}

/* peer_read's, with the packet's header too. */
static int
peer_read_packet(const struct rock_keys *k, struct rock_hb_header *h,
    struct rock_hb_record *r, int ms)
{
	struct pollfd p = { .fd = peer_fd, .events = POLLIN };
	uint8_t buf[ROCK_HB_MAX_LEN], tag[ROCK_TAG_LEN];
	unsigned n;
	ssize_t got;

	if (poll(&p, 1, ms) != 1)
		return -1;
	got = recv(peer_fd, buf, sizeof(buf), 0);
	ck_assert_int_eq(rock_hb_packet_check(buf, (size_t)got, &n), 0);
	ck_assert_uint_eq(n, 1);
	rock_hb_header_decode(h, buf);
	rock_hb_packet_tag(tag, k->tx, buf, (size_t)got);
	ck_assert(rock_equal(tag, h->tag, ROCK_TAG_LEN));
	rock_hb_record_decode(r, buf + ROCK_HB_HEADER_LEN);
	return 0;
}

/* The next packet the peer gets within ms, checked with the sender's key,
 * whatever its records: their number, or -1 if none came. */
static int
peer_read_header(const struct rock_keys *k, struct rock_hb_header *h, int ms)
{
	struct pollfd p = { .fd = peer_fd, .events = POLLIN };
	uint8_t buf[ROCK_HB_MAX_LEN], tag[ROCK_TAG_LEN];
	unsigned n;
	ssize_t got;

	if (poll(&p, 1, ms) != 1)
		return -1;
	got = recv(peer_fd, buf, sizeof(buf), 0);
	ck_assert_int_eq(rock_hb_packet_check(buf, (size_t)got, &n), 0);
	rock_hb_header_decode(h, buf);
	rock_hb_packet_tag(tag, k->tx, buf, (size_t)got);
	ck_assert(rock_equal(tag, h->tag, ROCK_TAG_LEN));
	return (int)n;
}

/* peer_send's packet acknowledging ack (0: none). */
static void
peer_send_ack(const uint8_t id[ROCK_ID_LEN], uint64_t seq, uint64_t ack,
    const uint8_t key[ROCK_KEY_LEN]);

/* A record from the peer to the engine in a packet of its own rock,
 * both sealed with key. */
static void
peer_send(const uint8_t id[ROCK_ID_LEN], uint64_t seq, const uint8_t key[ROCK_KEY_LEN])
{
	peer_send_ack(id, seq, 0, key);
}

/* A packet of the peer's with one record (flags), sent, not yet read. */
static void
peer_send_packet(const uint8_t id[ROCK_ID_LEN], uint64_t seq, uint64_t ack,
    uint32_t flags, const uint8_t key[ROCK_KEY_LEN])
{
	struct rock_hb_record r = { .seq = seq, .flags = flags };
	struct rock_hb_header h = { .seq = seq, .ack = ack, .nrecords = 1 };
	struct sockaddr_in to = v4("127.0.0.1", eng->udp_port);
	uint8_t pkt[ROCK_HB_HEADER_LEN + ROCK_HB_RECORD_LEN];

	memcpy(r.id, id, ROCK_ID_LEN);
	memcpy(r.anchor, id, ROCK_ID_LEN);
	memcpy(h.anchor, id, ROCK_ID_LEN);
	rock_control_seal(&r, key, pkt + ROCK_HB_HEADER_LEN);
	rock_hb_packet_seal(&h, key, pkt);
	ck_assert_int_eq(sendto(peer_fd, pkt, sizeof(pkt), 0,
	    (struct sockaddr *)&to, sizeof(to)), (ssize_t)sizeof(pkt));
}

static void
peer_send_ack(const uint8_t id[ROCK_ID_LEN], uint64_t seq, uint64_t ack,
    const uint8_t key[ROCK_KEY_LEN])
{
	peer_send_packet(id, seq, ack, ROCK_FLAG_WR_SHUT, key);
	usleep(20000);
	event_base_loop(base, EVLOOP_NONBLOCK);
}

/* s has shut its end and read the peer's, its control channel to a peer
 * socket of ours (the ticks driven by hand: the timer would say things at
 * random). id: s's. */
static void
farewell_ready(struct rock_session *s, uint8_t id[ROCK_ID_LEN])
{
	event_del(eng->ev_tick);
	memcpy(id, s->id, ROCK_ID_LEN);
	peer_open(s);
	s->features |= ROCK_FEAT_UDP;
	s->flags = ROCK_FLAG_WR_SHUT | ROCK_FLAG_EOF_SEEN;
}

/* Then it ends, both ends closed, its farewell said to that socket; it
 * sent pkt_out packets of its own before. */
static void
farewell_begin(struct rock_session *s, uint8_t id[ROCK_ID_LEN],
    uint64_t pkt_out)
{
	farewell_ready(s, id);
	s->peer_flags = ROCK_FLAG_WR_SHUT | ROCK_FLAG_EOF_SEEN;
	s->pkt_out = pkt_out;
	rock_session_maybe_finish(s);
}

START_TEST(test_farewell)
{
	struct rock_session *s = add("done", "192.0.2.1", 0, rock_now_ms(), 1);
	struct rock_keys k = s->keys, wrong;
	struct rock_hb_record r;
	uint8_t id[ROCK_ID_LEN];
	uint64_t seq;
	int i;

	farewell_begin(s, id, 0);
	ck_assert_int_eq(nclosed, 1);
	ck_assert_uint_eq(rock_engine_nsessions(eng), 0);
	/* Said six times at once: WR_SHUT and EOF_SEEN, fresh sequence numbers. */
	for (i = 0, seq = 0; i < 6; i++) {
		ck_assert_int_eq(peer_read(&k, &r, 500), 0);
		ck_assert(rock_equal(r.id, id, ROCK_ID_LEN));
		ck_assert_uint_eq(r.flags & (ROCK_FLAG_WR_SHUT | ROCK_FLAG_EOF_SEEN),
		    ROCK_FLAG_WR_SHUT | ROCK_FLAG_EOF_SEEN);
		ck_assert_uint_gt(r.seq, seq);
		seq = r.seq;
	}
	ck_assert_int_eq(peer_read(&k, &r, 50), -1);
	/* The peer's record, sealed with its key (our rx), is answered... */
	peer_send(id, 1, k.rx);
	ck_assert_int_eq(peer_read(&k, &r, 500), 0);
	ck_assert_uint_gt(r.seq, seq);
	/* ...a replayed one, or a forged one, is not... */
	peer_send(id, 1, k.rx);
	ck_assert_int_eq(peer_read(&k, &r, 100), -1);
	rock_random(&wrong, sizeof(wrong));
	peer_send(id, 2, wrong.rx);
	ck_assert_int_eq(peer_read(&k, &r, 100), -1);
	ck_assert_uint_eq(eng->stats.hb_unknown, 2);
	/* ...nor a second authentic one before the next tick (two farewells
	 * would answer each other without end). */
	peer_send(id, 3, k.rx);
	ck_assert_int_eq(peer_read(&k, &r, 100), -1);
	ck_assert_uint_eq(eng->stats.hb_unknown, 2);
	/* The ticks repeat it, and answer again after one; then it is gone. */
	rock_control_tick(eng);
	ck_assert_int_eq(peer_read(&k, &r, 500), 0);
	peer_send(id, 4, k.rx);
	ck_assert_int_eq(peer_read(&k, &r, 500), 0);
	usleep(1600 * 1000);
	rock_control_tick(eng);
	ck_assert_uint_eq(eng->nfarewells, 0);
	ck_assert_int_eq(peer_read(&k, &r, 50), -1);
	peer_send(id, 5, k.rx);
	ck_assert_int_eq(peer_read(&k, &r, 100), -1);
	close(peer_fd);
}
END_TEST

/* A farewell the peer acknowledges (it has the last word, and may have
 * ended too): it answers that packet once, acknowledging it, then says
 * nothing more, neither at the ticks nor to the peer's later packets. An
 * acknowledgement of a packet the session sent before the farewell is
 * none of the farewell's. */
START_TEST(test_farewell_acked)
{
	struct rock_session *s = add("done", "192.0.2.1", 0, rock_now_ms(), 1);
	struct rock_keys k = s->keys;
	struct rock_hb_header h;
	struct rock_hb_record r;
	uint8_t id[ROCK_ID_LEN];
	uint64_t first = 0;
	int i;

	farewell_begin(s, id, 5);	/* the session's own packets: 1 to 5 */
	for (i = 0; i < 6; i++) {
		ck_assert_int_eq(peer_read_packet(&k, &h, &r, 500), 0);
		if (first == 0)
			first = h.seq;
		ck_assert_uint_eq(h.seq, first + (uint64_t)i);
	}
	ck_assert_uint_eq(first, 6);
	/* A packet acknowledging the session's last packet, none of the
	 * farewell's, is answered as ever, the answer acknowledging it... */
	peer_send_ack(id, 1, 5, k.rx);
	ck_assert_int_eq(peer_read_packet(&k, &h, &r, 500), 0);
	ck_assert_uint_eq(h.ack, 1);
	/* ...and the farewell goes on at the ticks. */
	rock_control_tick(eng);
	ck_assert_int_eq(peer_read_packet(&k, &h, &r, 500), 0);
	/* One that acknowledges the farewell's third packet: one answer,
	 * acknowledging it (the tick made it free to answer). */
	peer_send_ack(id, 2, first + 2, k.rx);
	ck_assert_int_eq(peer_read_packet(&k, &h, &r, 500), 0);
	ck_assert_uint_eq(h.ack, 2);
	ck_assert_uint_eq(h.ack_bits & 1, 1);	/* and 1 before it */
	ck_assert_uint_eq(r.flags & (ROCK_FLAG_WR_SHUT | ROCK_FLAG_EOF_SEEN),
	    ROCK_FLAG_WR_SHUT | ROCK_FLAG_EOF_SEEN);
	/* Then nothing: not at the ticks, not to the peer's next packets,
	 * with the acknowledgement or without, each after a tick. */
	rock_control_tick(eng);
	ck_assert_int_eq(peer_read_packet(&k, &h, &r, 100), -1);
	peer_send_ack(id, 3, first + 6, k.rx);
	ck_assert_int_eq(peer_read_packet(&k, &h, &r, 100), -1);
	rock_control_tick(eng);
	peer_send(id, 4, k.rx);
	ck_assert_int_eq(peer_read_packet(&k, &h, &r, 100), -1);
	rock_control_tick(eng);
	ck_assert_int_eq(peer_read_packet(&k, &h, &r, 100), -1);
	/* Kept for its time all the same: the peer's packets are its, not
	 * a stranger's. */
	ck_assert_uint_eq(eng->nfarewells, 1);
	ck_assert_uint_eq(eng->stats.hb_unknown, 0);
	close(peer_fd);
}
END_TEST

/* Copies of the farewell said at once, s having sent out packets (acked:
 * the acknowledgement bits before the last, which the peer acknowledged)
 * and received in (rx: the bits before that one); those read within
 * 200 ms. */
static int
farewell_copies(uint64_t out, uint64_t acked, uint64_t in, uint64_t rx)
{
	struct rock_session *s = add("done", "192.0.2.1", 0, rock_now_ms(), 1);
	struct rock_keys k = s->keys;
	struct rock_hb_header h;
	struct rock_hb_record r;
	uint8_t id[ROCK_ID_LEN];
	int n = 0;

	s->ack_top = out;
	s->ack_bits = acked;
	s->pkt_in = in;
	s->rx_bits = rx;
	farewell_begin(s, id, out);
	while (peer_read_packet(&k, &h, &r, 200) == 0) {
		ck_assert(rock_equal(r.id, id, ROCK_ID_LEN));
		ck_assert_uint_eq(h.seq, out + 1 + (uint64_t)n);
		n++;
	}
	close(peer_fd);
	return n;
}

/* A path that lost none of the last packets either way gets its
 * farewell twice (the ticks repeat it as ever); one that lost a packet of
 * ours, or of the peer's, six times; so does one with nothing sent or
 * received yet. */
START_TEST(test_farewell_lossless)
{
	ck_assert_int_eq(farewell_copies(5, 0xf, 3, 0x3), 2);
	ck_assert_int_eq(farewell_copies(5, 0xd, 3, 0x3), 6);	/* our 3rd lost */
	ck_assert_int_eq(farewell_copies(5, 0xf, 3, 0x2), 6);	/* the peer's 2nd */
	ck_assert_int_eq(farewell_copies(5, 0x7, 3, 0x3), 6);	/* our 1st */
	ck_assert_int_eq(farewell_copies(5, 0xf, 1, 0), 2);	/* its first */
	ck_assert_int_eq(farewell_copies(5, 0xf, 0, 0), 6);	/* none yet */
	ck_assert_int_eq(farewell_copies(0, 0, 3, 0x3), 6);	/* none of ours */
	/* The windows' ends: 65 of ours, 64 before the peer's newest. */
	ck_assert_int_eq(farewell_copies(70, UINT64_MAX, 65, UINT64_MAX), 2);
	ck_assert_int_eq(farewell_copies(70, UINT64_MAX >> 1, 65, UINT64_MAX), 6);
	ck_assert_int_eq(farewell_copies(70, UINT64_MAX, 65, UINT64_MAX >> 1), 6);
	ck_assert_int_eq(farewell_copies(70, UINT64_MAX, 64, UINT64_MAX >> 1), 2);
}
END_TEST

/* The peer's farewell, six copies read in one batch, ends the session:
 * its farewell's six copies acknowledge the first, and the rest of the
 * batch gets no answer of its own. A copy in a later batch does, once. */
START_TEST(test_farewell_batch)
{
	struct rock_session *s = add("done", "192.0.2.1", 0, rock_now_ms(), 1);
	struct rock_keys k = s->keys;
	struct rock_hb_header h;
	struct rock_hb_record r;
	uint8_t id[ROCK_ID_LEN];
	uint64_t i;

	farewell_ready(s, id);
	for (i = 1; i <= 6; i++)
		peer_send_packet(id, i, 0, ROCK_FLAG_WR_SHUT | ROCK_FLAG_EOF_SEEN, k.rx);
	usleep(20000);
	event_base_loop(base, EVLOOP_NONBLOCK);
	ck_assert_int_eq(nclosed, 1);
	for (i = 0; i < 6; i++) {
		ck_assert_int_eq(peer_read_packet(&k, &h, &r, 500), 0);
		ck_assert_uint_eq(h.ack, 1);
	}
	ck_assert_int_eq(peer_read_packet(&k, &h, &r, 100), -1);
	/* A copy in a batch of its own, resent at the peer's tick: answered,
	 * acknowledged with everything before it. */
	peer_send_ack(id, 7, 0, k.rx);
	ck_assert_int_eq(peer_read_packet(&k, &h, &r, 500), 0);
	ck_assert_uint_eq(h.ack, 7);
	ck_assert_uint_eq(h.ack_bits & 0x3f, 0x3f);
	close(peer_fd);
}
END_TEST

/* s, ready for its farewell, has sent its final counts in its packet 1,
 * which the peer read. */
static void
final_counts_sent(struct rock_session *s, uint8_t id[ROCK_ID_LEN])
{
	struct rock_hb_header h;
	struct rock_hb_record r;

	farewell_ready(s, id);
	rock_control_ack_now(s);
	ck_assert_int_eq(peer_read_packet(&s->keys, &h, &r, 500), 0);
	ck_assert_uint_eq(h.seq, 1);
}

/* A packet of the peer's without records, acknowledging ack. */
static void
peer_send_bare(const uint8_t id[ROCK_ID_LEN], uint64_t seq, uint64_t ack,
    const uint8_t key[ROCK_KEY_LEN])
{
	struct rock_hb_header h = { .seq = seq, .ack = ack, .nrecords = 0 };
	struct sockaddr_in to = v4("127.0.0.1", eng->udp_port);
	uint8_t pkt[ROCK_HB_HEADER_LEN];

	memcpy(h.anchor, id, ROCK_ID_LEN);
	rock_hb_packet_seal(&h, key, pkt);
	ck_assert_int_eq(sendto(peer_fd, pkt, sizeof(pkt), 0,
	    (struct sockaddr *)&to, sizeof(to)), (ssize_t)sizeof(pkt));
	usleep(20000);
	event_base_loop(base, EVLOOP_NONBLOCK);
}

/* The peer's farewell, copies FIRST to LAST acknowledging ack, read in one
 * batch. */
static void
peer_farewell(const uint8_t id[ROCK_ID_LEN], uint64_t first, uint64_t last,
    uint64_t ack, const uint8_t key[ROCK_KEY_LEN])
{
	uint64_t i;

	for (i = first; i <= last; i++)
		peer_send_packet(id, i, ack, ROCK_FLAG_WR_SHUT | ROCK_FLAG_EOF_SEEN, key);
	usleep(20000);
	event_base_loop(base, EVLOOP_NONBLOCK);
}

/* The peer acknowledged the packet with our final counts, then ended:
 * its farewell ends us, and ours would say nothing it lacks. One packet
 * without records, at the end of the batch, acknowledges every copy read
 * in it (the peer's farewell then stops); nothing at the ticks; a copy
 * resent later is acknowledged; a packet without records is not; a key
 * holder's flood gets at most 8 a tick. */
START_TEST(test_farewell_quiet)
{
	struct rock_session *s = add("done", "192.0.2.1", 0, rock_now_ms(), 1);
	struct rock_keys k = s->keys;
	struct rock_hb_header h;
	uint8_t id[ROCK_ID_LEN];
	uint64_t i;
	int acks;

	final_counts_sent(s, id);
	peer_farewell(id, 1, 6, 1, k.rx);
	ck_assert_int_eq(nclosed, 1);
	ck_assert_int_eq(peer_read_header(&k, &h, 500), 0);
	ck_assert_uint_eq(h.seq, 2);
	ck_assert_uint_eq(h.ack, 6);	/* the batch's last copy... */
	ck_assert_uint_eq(h.ack_bits & 0x1f, 0x1f);	/* ...and the rest */
	ck_assert_int_eq(peer_read_header(&k, &h, 100), -1);
	rock_control_tick(eng);
	ck_assert_int_eq(peer_read_header(&k, &h, 100), -1);
	/* A copy resent at the peer's tick (ours lost): acknowledged. */
	peer_farewell(id, 7, 7, 1, k.rx);
	ck_assert_int_eq(peer_read_header(&k, &h, 500), 0);
	ck_assert_uint_eq(h.ack, 7);
	/* Without records: no answer. */
	peer_send_bare(id, 8, h.seq, k.rx);
	ck_assert_int_eq(peer_read_header(&k, &h, 100), -1);
	/* Ten packets with records, each a batch of its own, in one tick. */
	rock_control_tick(eng);
	for (i = 9, acks = 0; i < 19; i++) {
		peer_farewell(id, i, i, 1, k.rx);
		while (peer_read_header(&k, &h, 50) == 0)
			acks++;
	}
	ck_assert_int_eq(acks, 8);
	ck_assert_uint_eq(eng->nfarewells, 1);
	ck_assert_uint_eq(eng->stats.hb_unknown, 0);
	close(peer_fd);
}
END_TEST

/* The peer's record that ends us comes before its farewell, in a batch
 * of its own (it read our end and told us, then said its farewell): the
 * acknowledgement names that record's packet, not the farewell, whose
 * copies, read next, are acknowledged; so is its answer to ours. */
START_TEST(test_farewell_quiet_record_first)
{
	struct rock_session *s = add("done", "192.0.2.1", 0, rock_now_ms(), 1);
	struct rock_keys k = s->keys;
	struct rock_hb_header h;
	uint8_t id[ROCK_ID_LEN];

	final_counts_sent(s, id);
	peer_farewell(id, 1, 1, 1, k.rx);	/* its record: ends us */
	ck_assert_int_eq(nclosed, 1);
	ck_assert_int_eq(peer_read_header(&k, &h, 500), 0);
	ck_assert_uint_eq(h.ack, 1);
	peer_farewell(id, 2, 7, 1, k.rx);	/* its farewell's six copies */
	ck_assert_int_eq(peer_read_header(&k, &h, 500), 0);
	ck_assert_uint_eq(h.ack, 7);
	ck_assert_int_eq(peer_read_header(&k, &h, 100), -1);
	/* Its farewell answers our first (which named no copy of it), naming
	 * it: acknowledged too. */
	peer_farewell(id, 8, 8, 2, k.rx);
	ck_assert_int_eq(peer_read_header(&k, &h, 500), 0);
	ck_assert_uint_eq(h.ack, 8);
	rock_control_tick(eng);
	ck_assert_int_eq(peer_read_header(&k, &h, 100), -1);
	close(peer_fd);
}
END_TEST

/* A server rock whose data connection (a socketpair: other, the
 * client's end) just gave the client's authenticated end of stream. */
static struct rock_session *
server_at_eof(uint8_t id[ROCK_ID_LEN], int *other)
{
	struct rock_session *s = add("srv", "192.0.2.1", 0, rock_now_ms(), 1);
	int sv[2];

	event_del(eng->ev_tick);
	memcpy(id, s->id, ROCK_ID_LEN);
	peer_open(s);
	s->features |= ROCK_FEAT_UDP;
	s->udp_verified = 1;
	s->peer_flags = ROCK_FLAG_WR_SHUT;	/* its end: 0 bytes */
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	ck_assert_int_eq(rock_stream_attach(s, sv[0]), 0);
	*other = sv[1];
	ck_assert_int_eq(shutdown(sv[1], SHUT_WR), 0);
	usleep(20000);
	event_base_loop(base, EVLOOP_NONBLOCK);
	ck_assert(s->flags & ROCK_FLAG_EOF_SEEN);
	return s;
}

/* A server that read its client's end and shuts its own at once says
 * both in one record (one datagram, where two went); one that does not
 * says EOF_SEEN alone, a moment later. */
START_TEST(test_eof_seen_with_shut)
{
	struct rock_hb_header h;
	struct rock_hb_record r;
	uint8_t id[ROCK_ID_LEN];
	int other;
	struct rock_session *s = server_at_eof(id, &other);
	struct rock_keys k = s->keys;

	/* Not at once... */
	ck_assert_int_eq(peer_read_header(&k, &h, 0), -1);
	rock_session_shutdown(s);	/* the owner's end, as rockd's backend's */
	ck_assert_int_eq(peer_read_packet(&k, &h, &r, 500), 0);
	ck_assert_uint_eq(r.flags, ROCK_FLAG_WR_SHUT | ROCK_FLAG_EOF_SEEN);
	usleep(20000);
	event_base_loop(base, EVLOOP_NONBLOCK);
	ck_assert_int_eq(peer_read_header(&k, &h, 50), -1);
	close(other);
	close(peer_fd);
}
END_TEST

START_TEST(test_eof_seen_alone)
{
	struct pollfd p = { .events = POLLIN };
	struct rock_hb_header h;
	struct rock_hb_record r;
	uint8_t id[ROCK_ID_LEN];
	int other;
	struct rock_session *s = server_at_eof(id, &other);
	struct rock_keys k = s->keys;
	int64_t t0 = rock_now_ms();

	p.fd = peer_fd;
	ck_assert_int_eq(poll(&p, 1, 0), 0);
	while (poll(&p, 1, 1) == 0 && rock_now_ms() - t0 < 400)
		event_base_loop(base, EVLOOP_NONBLOCK);
	ck_assert_int_eq(peer_read_packet(&k, &h, &r, 0), 0);
	ck_assert_uint_eq(r.flags, ROCK_FLAG_EOF_SEEN);
	ck_assert_int_eq(peer_read_header(&k, &h, 50), -1);
	close(other);
	close(peer_fd);
}
END_TEST

/* An acknowledgement of a packet the farewell never sent is no
 * acknowledgement: it is answered, and the farewell goes on. */
START_TEST(test_farewell_ack_beyond)
{
	struct rock_session *s = add("done", "192.0.2.1", 0, rock_now_ms(), 1);
	struct rock_keys k = s->keys;
	struct rock_hb_header h;
	struct rock_hb_record r;
	uint8_t id[ROCK_ID_LEN];
	uint64_t last = 0;
	int i;

	farewell_begin(s, id, 0);
	for (i = 0; i < 6; i++) {
		ck_assert_int_eq(peer_read_packet(&k, &h, &r, 500), 0);
		last = h.seq;
	}
	/* Acknowledging a packet never sent: the farewell is not taken for
	 * heard, and goes on at the ticks. */
	peer_send_ack(id, 1, last + 1, k.rx);
	ck_assert_int_eq(peer_read_packet(&k, &h, &r, 500), 0);
	rock_control_tick(eng);
	ck_assert_int_eq(peer_read_packet(&k, &h, &r, 500), 0);
	ck_assert_uint_eq(h.seq, last + 2);
	close(peer_fd);
}
END_TEST

/* Ids are bucketed by SipHash-2-4 under a key of the engine's own: the
 * reference vector (key 00..0f, message 00..0f: bytes db 9b .. 2a 3f),
 * and two engines hash the same id differently. */
START_TEST(test_id_hash_keyed)
{
	uint8_t key[ROCK_ID_HASH_KEY_LEN], id[ROCK_ID_LEN];
	struct rock_engine *other;
	size_t i;

	for (i = 0; i < sizeof(key); i++)
		key[i] = (uint8_t)i;
	for (i = 0; i < sizeof(id); i++)
		id[i] = (uint8_t)i;
	ck_assert_uint_eq(rock_id_hash(key, id, sizeof(id)), 0x3f2acc7f57c29bdbull);
	ck_assert_int_eq(rock_engine_new(&other, base, &lg, NULL, NULL, 0), 0);
	ck_assert_mem_ne(other->id_hash_key, eng->id_hash_key, ROCK_ID_HASH_KEY_LEN);
	ck_assert_uint_ne(rock_id_hash(other->id_hash_key, id, sizeof(id)),
	    rock_id_hash(eng->id_hash_key, id, sizeof(id)));
	rock_engine_free(other);
}
END_TEST

/* Past the bound the oldest farewell goes, and each of thousands is found
 * by its id (a bucket, not a scan of them all). */
START_TEST(test_farewell_many)
{
	enum { N = ROCK_FAREWELL_MAX + 1 };
	static uint8_t ids[N][ROCK_ID_LEN];
	static struct rock_keys keys[N];
	struct sockaddr_storage peer;
	struct rock_hb_record r;
	unsigned long unknown;
	uint8_t junk[ROCK_HB_MAX_LEN];
	int i, last = N - 1;

	event_del(eng->ev_tick);
	for (i = 0; i < N; i++) {
		struct rock_session *s = add("done", "192.0.2.1", 0, rock_now_ms(), 1);

		if (i == 0)
			peer_open(s);
		else
			memcpy(&s->udp_peer, &peer, sizeof(peer));
		memcpy(&peer, &s->udp_peer, sizeof(peer));
		s->udp_peer_len = sizeof(struct sockaddr_in);
		memcpy(ids[i], s->id, ROCK_ID_LEN);
		keys[i] = s->keys;
		s->features |= ROCK_FEAT_UDP;
		s->flags = s->peer_flags = ROCK_FLAG_WR_SHUT | ROCK_FLAG_EOF_SEEN;
		s->consumed = 0;
		rock_session_maybe_finish(s);
	}
	ck_assert_int_eq(nclosed, N);
	ck_assert_uint_eq(eng->nfarewells, ROCK_FAREWELL_MAX);
	while (recv(peer_fd, junk, sizeof(junk), MSG_DONTWAIT) > 0)
		;
	/* The first is gone: its peer's record is a stranger's... */
	unknown = eng->stats.hb_unknown;
	peer_send(ids[0], 100, keys[0].rx);
	ck_assert_int_eq(peer_read(&keys[0], &r, 100), -1);
	ck_assert_uint_eq(eng->stats.hb_unknown, unknown + 1);
	/* ...the second, now the oldest, and the last still answer. */
	peer_send(ids[1], 100, keys[1].rx);
	ck_assert_int_eq(peer_read(&keys[1], &r, 500), 0);
	ck_assert_mem_eq(r.id, ids[1], ROCK_ID_LEN);
	peer_send(ids[last], 100, keys[last].rx);
	ck_assert_int_eq(peer_read(&keys[last], &r, 500), 0);
	ck_assert_mem_eq(r.id, ids[last], ROCK_ID_LEN);
	ck_assert_uint_eq(eng->stats.hb_unknown, unknown + 1);
	/* Then they all expire, each out of its bucket. */
	usleep(1600 * 1000);
	rock_control_tick(eng);
	ck_assert_uint_eq(eng->nfarewells, 0);
	peer_send(ids[last], 101, keys[last].rx);
	ck_assert_int_eq(peer_read(&keys[last], &r, 100), -1);
	close(peer_fd);
}
END_TEST

/* ---- groups: a UDP socket of ours plays the client's engine */

/* The next packet within ms: its anchor (one of ours), its tag checked
 * with that rock's tx key; NULL if none came. */
static struct rock_session *
peer_packet(uint8_t buf[ROCK_HB_MAX_LEN], struct rock_hb_header *h, int ms)
{
	struct pollfd p = { .fd = peer_fd, .events = POLLIN };
	struct rock_session *a;
	uint8_t tag[ROCK_TAG_LEN];
	unsigned n;
	ssize_t got;

	if (poll(&p, 1, ms) != 1)
		return NULL;
	got = recv(peer_fd, buf, ROCK_HB_MAX_LEN, 0);
	ck_assert_int_eq(rock_hb_packet_check(buf, (size_t)got, &n), 0);
	rock_hb_header_decode(h, buf);
	ck_assert_ptr_nonnull(a = rock_engine_find(eng, h->anchor));
	rock_hb_packet_tag(tag, a->keys.tx, buf, (size_t)got);
	ck_assert(rock_equal(tag, h->tag, ROCK_TAG_LEN));
	return a;
}

/* Record i of a packet: for rock s, tagged with its key, naming anchor. */
static void
packet_record(const uint8_t *buf, unsigned i, const struct rock_session *s,
    const struct rock_session *anchor, struct rock_hb_record *r)
{
	const uint8_t *rec = buf + ROCK_HB_HEADER_LEN + i * ROCK_HB_RECORD_LEN;
	uint8_t tag[ROCK_TAG_LEN];

	rock_hb_record_decode(r, rec);
	ck_assert_mem_eq(r->id, s->id, ROCK_ID_LEN);
	ck_assert_mem_eq(r->anchor, anchor->id, ROCK_ID_LEN);
	rock_hb_tag(tag, s->keys.tx, rec);
	ck_assert(rock_equal(tag, r->tag, ROCK_TAG_LEN));
}

/* Each of a packet's n records: for one of our rocks, other than the
 * anchor unless with_anchor, tagged with its key, naming anchor. */
static void
records_name(const uint8_t *buf, unsigned n, const struct rock_session *anchor,
    int with_anchor)
{
	struct rock_hb_record rec;
	struct rock_session *s;
	unsigned i;

	for (i = 0; i < n; i++) {
		rock_hb_record_decode(&rec, buf + ROCK_HB_HEADER_LEN + i * ROCK_HB_RECORD_LEN);
		ck_assert_ptr_nonnull(s = rock_engine_find(eng, rec.id));
		ck_assert(with_anchor || s != anchor);
		packet_record(buf, i, s, anchor, &rec);
	}
}

/* The client's packet number seq under anchor a, sealed with key (a's
 * client key is our rx), acknowledging ack, with a record naming a (number
 * seq) for each of rocks[0..n). */
static void
client_packet_queued(const struct rock_session *a, uint64_t seq, uint64_t ack,
    struct rock_session **rocks, unsigned n, const uint8_t *key)
{
	struct rock_hb_header h = { .seq = seq, .ack = ack, .nrecords = (uint8_t)n };
	struct sockaddr_in to = v4("127.0.0.1", eng->udp_port);
	uint8_t pkt[ROCK_HB_MAX_LEN];
	size_t len = ROCK_HB_HEADER_LEN + n * ROCK_HB_RECORD_LEN;
	unsigned i;

	memcpy(h.anchor, a->id, ROCK_ID_LEN);
	for (i = 0; i < n; i++) {
		struct rock_hb_record r = { .seq = seq };

		memcpy(r.id, rocks[i]->id, ROCK_ID_LEN);
		memcpy(r.anchor, a->id, ROCK_ID_LEN);
		rock_control_seal(&r, rocks[i]->keys.rx,
		    pkt + ROCK_HB_HEADER_LEN + i * ROCK_HB_RECORD_LEN);
	}
	rock_hb_packet_seal(&h, key, pkt);
	ck_assert_int_eq(sendto(peer_fd, pkt, len, 0, (struct sockaddr *)&to,
	    sizeof(to)), (ssize_t)len);
	usleep(20000);
}

/* The same, taken by the engine's loop. */
static void
client_packet(const struct rock_session *a, uint64_t seq, uint64_t ack,
    struct rock_session **rocks, unsigned n, const uint8_t *key)
{
	client_packet_queued(a, seq, ack, rocks, n, key);
	event_base_loop(base, EVLOOP_NONBLOCK);
}

/* One interval's heartbeats (they go out on every other tick). */
static void
heartbeat_round(void)
{
	if (eng->ticks % 2 != 0)
		rock_control_tick(eng);
	rock_control_tick(eng);
}

/* One interval: a single packet, under anchor, with n records naming it. */
static void
one_packet(const struct rock_session *anchor, unsigned n, int with_anchor)
{
	struct rock_hb_header h;
	uint8_t buf[ROCK_HB_MAX_LEN];

	heartbeat_round();
	ck_assert_ptr_eq(peer_packet(buf, &h, 500), anchor);
	ck_assert_uint_eq(h.nrecords, n);
	records_name(buf, n, anchor, with_anchor);
	ck_assert_ptr_null(peer_packet(buf, &h, 50));
}

/* Three rocks of one client: each speaks for itself until the client's
 * records name one of them; then one packet per interval carries the
 * records the client has not confirmed, none once it has, and a changed
 * count once more; the anchor's packets are every rock's signs of life;
 * a replayed or forged packet changes nothing. */
START_TEST(test_group)
{
	struct rock_session *r[3], *a, *got;
	struct rock_hb_header h;
	struct rock_hb_record rec;
	uint8_t buf[ROCK_HB_MAX_LEN];
	struct rock_keys wrong;
	int i, seen = 0, peer;

	event_del(eng->ev_tick);
	for (i = 0; i < 3; i++) {
		r[i] = add("member", "192.0.2.1", 0, rock_now_ms(), 1);
		r[i]->features |= ROCK_FEAT_UDP;
	}
	a = r[0];
	peer_open(a);
	for (i = 1; i < 3; i++) {
		r[i]->udp_peer = a->udp_peer;
		r[i]->udp_peer_len = a->udp_peer_len;
	}
	/* No group yet: a packet each, under itself, with its own record. */
	heartbeat_round();
	for (i = 0; i < 3; i++) {
		ck_assert_ptr_nonnull(got = peer_packet(buf, &h, 500));
		ck_assert_uint_eq(h.nrecords, 1);
		ck_assert_uint_eq(h.seq, 1);
		packet_record(buf, 0, got, got, &rec);
		seen |= 1 << (got == r[0] ? 0 : got == r[1] ? 1 : 2);
	}
	ck_assert_int_eq(seen, 7);
	ck_assert_ptr_null(peer_packet(buf, &h, 50));

	/* The client names a as the anchor of all three, and acknowledges
	 * a's packet 1: a's record is confirmed, the others join. */
	client_packet(a, 1, 1, r, 3, a->keys.rx);
	ck_assert_uint_eq(eng->stats.hb_ok, 4);
	ck_assert_int_eq(r[1]->has_anchor, 1);
	ck_assert_mem_eq(r[1]->anchor_id, a->id, ROCK_ID_LEN);
	ck_assert_int_eq(r[2]->has_anchor, 1);
	ck_assert_int_eq(a->has_anchor, 0);
	heartbeat_round();
	ck_assert_ptr_eq(peer_packet(buf, &h, 500), a);
	ck_assert_uint_eq(h.seq, 2);
	ck_assert_uint_eq(h.ack, 1);
	ck_assert_uint_eq(h.nrecords, 2);	/* r[1], r[2]: their new anchor */
	records_name(buf, 2, a, 0);
	ck_assert_ptr_null(peer_packet(buf, &h, 50));
	/* Not acknowledged yet: the same two again. */
	heartbeat_round();
	ck_assert_ptr_eq(peer_packet(buf, &h, 500), a);
	ck_assert_uint_eq(h.seq, 3);
	ck_assert_uint_eq(h.nrecords, 2);

	/* Acknowledged (packet 2: an earlier carrier counts too): from now
	 * on one empty packet per interval for the three. */
	client_packet(a, 2, 2, r, 0, a->keys.rx);
	for (i = 0; i < 3; i++) {
		heartbeat_round();
		ck_assert_ptr_eq(peer_packet(buf, &h, 500), a);
		ck_assert_uint_eq(h.seq, (uint64_t)4 + (uint64_t)i);
		ck_assert_uint_eq(h.ack, 2);
		ck_assert_uint_eq(h.ack_bits, 1);	/* packet 1 came too */
		ck_assert_uint_eq(h.nrecords, 0);
		ck_assert_ptr_null(peer_packet(buf, &h, 50));
	}

	/* A count changes: its record goes, under a, until confirmed. */
	r[2]->consumed = 4096;
	heartbeat_round();
	ck_assert_ptr_eq(peer_packet(buf, &h, 500), a);
	ck_assert_uint_eq(h.seq, 7);
	ck_assert_uint_eq(h.nrecords, 1);
	packet_record(buf, 0, r[2], a, &rec);
	ck_assert_uint_eq(rec.consumed, 4096);
	client_packet(a, 3, 7, r, 0, a->keys.rx);
	heartbeat_round();
	ck_assert_ptr_eq(peer_packet(buf, &h, 500), a);
	ck_assert_uint_eq(h.nrecords, 0);

	/* The anchor's packet is a sign of life for every rock of its group
	 * (taken on the next tick); a replayed or forged one is not. */
	for (i = 0; i < 3; i++)
		r[i]->last_heard_ms = rock_now_ms() - 900;
	client_packet(a, 3, 7, r, 0, a->keys.rx);
	ck_assert_uint_eq(eng->stats.hb_replayed, 1);
	rock_random(&wrong, sizeof(wrong));
	client_packet(a, 4, 7, r, 0, wrong.rx);
	ck_assert_uint_eq(eng->stats.hb_bad_tag, 1);
	rock_control_tick(eng);
	ck_assert_int_lt(r[1]->last_heard_ms, rock_now_ms() - 800);
	client_packet(a, 4, 7, r, 0, a->keys.rx);
	ck_assert_int_ge(a->last_heard_ms, rock_now_ms() - 100);
	rock_control_tick(eng);
	ck_assert_int_eq(r[1]->last_heard_ms, a->last_heard_ms);
	ck_assert_int_eq(r[2]->last_heard_ms, a->last_heard_ms);

	/* A rock with both ends closed and more than the farewell owed
	 * (here: no FIN of ours sent yet) still takes its group's signs of
	 * life: thousands closing at once wait for records to go round. */
	r[1]->fd = tcp_pair(&peer, 0);
	r[1]->flags |= ROCK_FLAG_WR_SHUT | ROCK_FLAG_EOF_SEEN;
	r[1]->last_heard_ms = rock_now_ms() - 900;
	client_packet(a, 5, 7, r, 0, a->keys.rx);
	rock_control_tick(eng);
	ck_assert_int_eq(r[1]->last_heard_ms, a->last_heard_ms);
	/* For four dead times from the close at most. */
	r[1]->both_closed_ms = rock_now_ms() - 4 * rock_path_dead_ms(r[1]) - 1;
	r[1]->last_heard_ms = rock_now_ms() - 900;
	client_packet(a, 6, 7, r, 0, a->keys.rx);
	rock_control_tick(eng);
	ck_assert_int_lt(r[1]->last_heard_ms, rock_now_ms() - 800);
	close(r[1]->fd);
	close(peer);

	/* Not one that only waits for the peer's last word (our FIN sent
	 * and acknowledged): its farewell lost, it ends on its own silence.
	 * Nor one whose own record is older than the suspend timeout: its
	 * peer may have dropped it without a word. */
	r[1]->fd = tcp_pair(&peer, 1);
	r[1]->shut_sent = 1;
	r[1]->both_closed_ms = 0;
	r[1]->last_heard_ms = r[2]->last_heard_ms = rock_now_ms() - 900;
	r[2]->own_heard_ms = rock_now_ms() - eng->cfg.suspend_timeout_s * 1000 - 1;
	r[2]->connected_at_ms = r[2]->own_heard_ms;
	client_packet(a, 7, 7, r, 0, a->keys.rx);
	rock_control_tick(eng);
	ck_assert_int_lt(r[1]->last_heard_ms, rock_now_ms() - 800);
	ck_assert_int_lt(r[2]->last_heard_ms, rock_now_ms() - 800);
	/* Its own record refreshes it, and the next tick resends one for a
	 * rock the peer last confirmed half a suspend timeout ago. */
	r[2]->own_heard_ms = rock_now_ms();
	client_packet(a, 8, 7, r, 0, a->keys.rx);
	rock_control_tick(eng);
	ck_assert_int_eq(r[2]->last_heard_ms, a->last_heard_ms);
	r[1]->flags &= ~(ROCK_FLAG_WR_SHUT | ROCK_FLAG_EOF_SEEN);
	while (peer_packet(buf, &h, 50) != NULL)
		;
	r[2]->conf_ms = rock_now_ms() - eng->cfg.suspend_timeout_s * 500 - 1;
	heartbeat_round();
	ck_assert_ptr_eq(peer_packet(buf, &h, 500), a);
	ck_assert_uint_ge(h.nrecords, 1);

	/* A packet overtaken by a later one is taken, once; one older than
	 * the window (64 behind the latest) is not. */
	i = (int)eng->stats.hb_replayed;
	client_packet(a, 10, 7, r, 0, a->keys.rx);
	client_packet(a, 9, 7, r, 0, a->keys.rx);
	ck_assert_uint_eq(eng->stats.hb_replayed, (unsigned)i);
	client_packet(a, 9, 7, r, 0, a->keys.rx);
	ck_assert_uint_eq(eng->stats.hb_replayed, (unsigned)i + 1);
	client_packet(a, 82, 7, r, 0, a->keys.rx);
	client_packet(a, 17, 7, r, 0, a->keys.rx);
	ck_assert_uint_eq(eng->stats.hb_replayed, (unsigned)i + 2);
	client_packet(a, 18, 7, r, 0, a->keys.rx);
	ck_assert_uint_eq(eng->stats.hb_replayed, (unsigned)i + 2);

	/* The anchor ends: the others speak for themselves again. */
	rock_session_close(a, 0, "test");
	heartbeat_round();
	ck_assert_int_eq(r[1]->has_anchor, 0);
	ck_assert_int_eq(r[2]->has_anchor, 0);
	close(peer);
	close(peer_fd);
}
END_TEST

/* The client's side: the oldest of its rocks to a server anchors them
 * all at once; when it ends, the oldest left anchors the rest, each rock
 * naming it in a record again. */
START_TEST(test_group_client)
{
	struct rock_session *r[3];
	uint8_t buf[ROCK_HB_MAX_LEN];
	int64_t now = rock_now_ms();
	unsigned i;

	event_del(eng->ev_tick);
	for (i = 0; i < 3; i++) {
		/* r[1] the oldest, then r[2], then r[0]. */
		r[i] = add("client", "192.0.2.1", 0, now - (i == 1 ? 3000 :
		    i == 2 ? 2000 : 1000), 1);
		r[i]->role = ROCK_ROLE_CLIENT;
		r[i]->features |= ROCK_FEAT_UDP;
	}
	peer_open(r[0]);
	for (i = 1; i < 3; i++) {
		r[i]->udp_peer = r[0]->udp_peer;
		r[i]->udp_peer_len = r[0]->udp_peer_len;
	}
	one_packet(r[1], 3, 1);
	ck_assert_int_eq(r[0]->has_anchor, 1);
	ck_assert_int_eq(r[2]->has_anchor, 1);
	ck_assert_int_eq(r[1]->has_anchor, 0);

	/* The anchor ends (its farewell, under itself, is not ours to read). */
	rock_session_close(r[1], 0, "test");
	rock_farewell_free_all(eng);
	while (poll(&(struct pollfd){ .fd = peer_fd, .events = POLLIN }, 1, 50) == 1)
		(void)recv(peer_fd, buf, sizeof(buf), 0);
	one_packet(r[2], 2, 1);
	ck_assert_int_eq(r[0]->has_anchor, 1);
	ck_assert_mem_eq(r[0]->anchor_id, r[2]->id, ROCK_ID_LEN);
	close(peer_fd);
}
END_TEST

/* More rocks with news than an interval's packets hold, and no ack: the
 * next interval carries the ones the first left out. */
START_TEST(test_group_rotates)
{
	enum { N = 800 };
	static struct rock_session *r[N];
	static int seen[N];
	struct rock_hb_header h;
	struct rock_hb_record rec;
	struct rock_session *s;
	uint8_t buf[ROCK_HB_MAX_LEN];
	int64_t now = rock_now_ms();
	unsigned i, j, got, missing = 0;

	event_del(eng->ev_tick);
	for (i = 0; i < N; i++) {
		r[i] = add("client", "192.0.2.1", 0, now - 100000 + i, 1);
		r[i]->role = ROCK_ROLE_CLIENT;
		r[i]->features |= ROCK_FEAT_UDP;
		seen[i] = 0;
	}
	peer_open(r[0]);
	for (i = 1; i < N; i++) {
		r[i]->udp_peer = r[0]->udp_peer;
		r[i]->udp_peer_len = r[0]->udp_peer_len;
	}
	for (j = 0; j < 2; j++) {
		heartbeat_round();
		for (got = 0; peer_packet(buf, &h, 200) != NULL; got++) {
			for (i = 0; i < h.nrecords; i++) {
				rock_hb_record_decode(&rec, buf + ROCK_HB_HEADER_LEN +
				    i * ROCK_HB_RECORD_LEN);
				ck_assert_ptr_nonnull(s = rock_engine_find(eng, rec.id));
				seen[(size_t)(s->connected_at_ms - (now - 100000))]++;
			}
		}
		/* One interval: at most its 48 packets (a first packet of the
		 * anchor's own before the group formed aside). */
		ck_assert_uint_le(got, 49);
	}
	for (i = 0; i < N; i++)
		missing += seen[i] == 0;
	ck_assert_uint_eq(missing, 0);
	close(peer_fd);
}
END_TEST

/* The peer's packet number seq under anchor a, without records,
 * acknowledging ack and the 64 before it as bits says. */
static void
peer_ack(const struct rock_session *a, uint64_t seq, uint64_t ack, uint64_t bits)
{
	struct rock_hb_header h = { .seq = seq, .ack = ack, .ack_bits = bits };
	struct sockaddr_in to = v4("127.0.0.1", eng->udp_port);
	uint8_t pkt[ROCK_HB_MAX_LEN];

	memcpy(h.anchor, a->id, ROCK_ID_LEN);
	rock_hb_packet_seal(&h, a->keys.rx, pkt);
	ck_assert_int_eq(sendto(peer_fd, pkt, ROCK_HB_HEADER_LEN, 0,
	    (struct sockaddr *)&to, sizeof(to)), ROCK_HB_HEADER_LEN);
	usleep(20000);
	event_base_loop(base, EVLOOP_NONBLOCK);
}

/* The packets that arrive, the rocks their records are for counted in
 * seen (by age, as client_rocks made them), the highest number in *top,
 * the first record's rock of the first packet in *first (if not NULL). */
static unsigned
drain_records(int *seen, int64_t now, uint64_t *top, struct rock_session **first)
{
	struct rock_hb_header h;
	struct rock_hb_record rec;
	struct rock_session *s;
	uint8_t buf[ROCK_HB_MAX_LEN];
	unsigned got, i;

	for (got = 0; peer_packet(buf, &h, 200) != NULL; got++) {
		if (h.seq > *top)
			*top = h.seq;
		for (i = 0; i < h.nrecords; i++) {
			rock_hb_record_decode(&rec, buf + ROCK_HB_HEADER_LEN +
			    i * ROCK_HB_RECORD_LEN);
			ck_assert_ptr_nonnull(s = rock_engine_find(eng, rec.id));
			seen[(size_t)(s->connected_at_ms - (now - 100000))]++;
			if (first != NULL && got == 0 && i == 0)
				*first = s;
		}
	}
	return got;
}

static unsigned
count_seen(const int *seen, unsigned n, int times)
{
	unsigned i, c = 0;

	for (i = 0; i < n; i++)
		c += seen[i] == times;
	return c;
}

/* n client rocks to one server address, r[0] the oldest (the anchor);
 * with last_oldest, r[n - 1] (made last). */
static void
client_rocks_aged(struct rock_session **r, unsigned n, int64_t now,
    int last_oldest)
{
	unsigned i;

	for (i = 0; i < n; i++) {
		r[i] = add("client", "192.0.2.1", 0,
		    now - 100000 + (last_oldest ? n - 1 - i : i), 1);
		r[i]->role = ROCK_ROLE_CLIENT;
		r[i]->features |= ROCK_FEAT_UDP;
	}
	peer_open(r[0]);
	for (i = 1; i < n; i++) {
		r[i]->udp_peer = r[0]->udp_peer;
		r[i]->udp_peer_len = r[0]->udp_peer_len;
	}
}

static void
client_rocks(struct rock_session **r, unsigned n, int64_t now)
{
	client_rocks_aged(r, n, now, 0);
}

/* The anchor's own record goes first, wherever the anchor stands among
 * its group's rocks: the peer speaks under it only once it has heard it
 * name itself. */
START_TEST(test_group_anchor_first)
{
	enum { N = 40 };
	static struct rock_session *r[N];
	static int seen[N];
	struct rock_session *first = NULL;
	int64_t now = rock_now_ms();
	uint64_t top = 0;

	event_del(eng->ev_tick);
	client_rocks_aged(r, N, now, 1);
	memset(seen, 0, sizeof(seen));
	heartbeat_round();
	ck_assert_uint_eq(drain_records(seen, now, &top, &first), 3);
	ck_assert_ptr_eq(first, r[N - 1]);
	ck_assert_uint_eq(count_seen(seen, N, 1), N);
	close(peer_fd);
}
END_TEST

/* More records than a burst holds: the anchor's own goes first; once the
 * peer's bits show the whole burst arrived (not before), the next leaves
 * at once with the records not sent yet, each once; a false or repeated
 * ack in the same interval makes nothing go again. */
START_TEST(test_group_burst_on_ack)
{
	enum { N = 800 };
	static struct rock_session *r[N];
	static int seen[N];
	struct rock_session *first = NULL;
	struct rock_hb_header h;
	uint8_t buf[ROCK_HB_MAX_LEN];
	int64_t now = rock_now_ms();
	uint64_t top = 0;
	unsigned i;

	event_del(eng->ev_tick);
	client_rocks(r, N, now);
	memset(seen, 0, sizeof(seen));
	heartbeat_round();
	ck_assert_uint_eq(drain_records(seen, now, &top, &first), 48);
	ck_assert_ptr_eq(first, r[0]);
	ck_assert_uint_eq(count_seen(seen, N, 1), 48 * 15);
	/* Every count moves again: the 720 are due again, but not before
	 * the next interval. */
	for (i = 0; i < N; i++)
		r[i]->consumed++;
	/* Only the last packet arrived: the burst is not through. */
	peer_ack(r[0], 1, top, 0);
	ck_assert_ptr_null(peer_packet(buf, &h, 100));
	/* All of it: the 80 not sent yet, once each, and nothing else. */
	peer_ack(r[0], 2, top, ~(uint64_t)0);
	ck_assert_uint_eq(drain_records(seen, now, &top, NULL), 6);
	ck_assert_uint_eq(count_seen(seen, N, 1), N);
	close(peer_fd);
}
END_TEST

/* A receiver acknowledges at once every 16 packets with records, in a
 * packet without records; not before. */
START_TEST(test_group_ack_every)
{
	enum { N = 20 };
	static struct rock_session *r[N];
	struct rock_hb_header h;
	uint8_t buf[ROCK_HB_MAX_LEN];
	int64_t now = rock_now_ms();
	unsigned i;

	event_del(eng->ev_tick);
	client_rocks(r, N, now);
	heartbeat_round();
	while (peer_packet(buf, &h, 100) != NULL)
		;
	for (i = 1; i <= 15; i++)
		client_packet(r[0], i, 0, &r[i], 1, r[0]->keys.rx);
	ck_assert_ptr_null(peer_packet(buf, &h, 50));
	client_packet(r[0], 16, 0, &r[16], 1, r[0]->keys.rx);
	ck_assert_ptr_eq(peer_packet(buf, &h, 200), r[0]);
	ck_assert_uint_eq(h.nrecords, 0);
	ck_assert_uint_eq(h.ack, 16);
	ck_assert_uint_eq(h.ack_bits, 0x7fff);
	ck_assert_ptr_null(peer_packet(buf, &h, 50));
	/* Packets without records ask for nothing. */
	for (i = 17; i <= 40; i++)
		peer_ack(r[0], i, 0, 0);
	ck_assert_ptr_null(peer_packet(buf, &h, 50));
	close(peer_fd);
}
END_TEST

/* A tick judges on what has arrived: a record waiting in the socket
 * (the loop busy elsewhere) is read before a rock is found silent. */
START_TEST(test_tick_reads_first)
{
	int64_t now = rock_now_ms();
	struct rock_session *r;

	event_del(eng->ev_tick);
	r = add("member", "192.0.2.1", 0, now - 60000, 1);
	r->features |= ROCK_FEAT_UDP;
	peer_open(r);
	r->last_heard_ms = r->own_heard_ms = now - 60000;
	client_packet_queued(r, 1, 0, &r, 1, r->keys.rx);
	rock_session_hold(r);	/* a failed rock would be freed */
	rock_control_tick(eng);
	ck_assert_int_eq(r->state, ROCK_ST_CONNECTED);
	ck_assert_int_ge(r->last_heard_ms, now);
	rock_session_release(r);
	close(peer_fd);
}
END_TEST

Suite *
evict_suite(void)
{
	Suite *su = suite_create("evict");
	TCase *tc = tcase_create("evict");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_room_strangers_first);
	tcase_add_test(tc, test_room_own_oldest);
	tcase_add_test(tc, test_unproven_expire);
	tcase_add_test(tc, test_long_connection_proves);
	tcase_add_test(tc, test_farewell);
	tcase_add_test(tc, test_farewell_acked);
	tcase_add_test(tc, test_farewell_lossless);
	tcase_add_test(tc, test_farewell_ack_beyond);
	tcase_add_test(tc, test_farewell_batch);
	tcase_add_test(tc, test_farewell_quiet);
	tcase_add_test(tc, test_farewell_quiet_record_first);
	tcase_add_test(tc, test_eof_seen_with_shut);
	tcase_add_test(tc, test_eof_seen_alone);
	tcase_add_test(tc, test_farewell_many);
	tcase_add_test(tc, test_id_hash_keyed);
	tcase_add_test(tc, test_group);
	tcase_add_test(tc, test_group_client);
	tcase_add_test(tc, test_group_rotates);
	tcase_add_test(tc, test_group_burst_on_ack);
	tcase_add_test(tc, test_group_anchor_first);
	tcase_add_test(tc, test_group_ack_every);
	tcase_add_test(tc, test_tick_reads_first);
	suite_add_tcase(su, tc);
	return su;
}
