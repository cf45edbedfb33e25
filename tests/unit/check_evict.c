/* check_evict.c: how server sessions end: who is evicted when rockd is full, unproven rocks expiring, a finished rock's farewell. */
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

/* A record from the peer to the engine, sealed with key. */
static void
peer_send(const uint8_t id[ROCK_ID_LEN], uint64_t seq, const uint8_t key[ROCK_KEY_LEN])
{
	struct rock_hb_record r = { .seq = seq, .flags = ROCK_FLAG_WR_SHUT };
	struct sockaddr_in to = v4("127.0.0.1", eng->udp_port);
	uint8_t pkt[ROCK_HB_HEADER_LEN + ROCK_HB_RECORD_LEN];

	memcpy(r.id, id, ROCK_ID_LEN);
	rock_control_seal(&r, key, pkt + ROCK_HB_HEADER_LEN);
	rock_hb_header_encode(1, pkt);
	ck_assert_int_eq(sendto(peer_fd, pkt, sizeof(pkt), 0,
	    (struct sockaddr *)&to, sizeof(to)), (ssize_t)sizeof(pkt));
	usleep(20000);
	event_base_loop(base, EVLOOP_NONBLOCK);
}

START_TEST(test_farewell)
{
	struct rock_session *s = add("done", "192.0.2.1", 0, rock_now_ms(), 1);
	struct rock_keys k = s->keys, wrong;
	struct rock_hb_record r;
	uint8_t id[ROCK_ID_LEN];
	uint64_t seq;
	int i;

	/* The ticks are driven by hand: the timer would say it at random. */
	event_del(eng->ev_tick);
	memcpy(id, s->id, ROCK_ID_LEN);
	peer_open(s);
	s->features |= ROCK_FEAT_UDP;
	s->flags = ROCK_FLAG_WR_SHUT | ROCK_FLAG_EOF_SEEN;
	s->peer_flags = ROCK_FLAG_WR_SHUT | ROCK_FLAG_EOF_SEEN;
	s->consumed = 0;
	rock_session_maybe_finish(s);
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
	suite_add_tcase(su, tc);
	return su;
}
