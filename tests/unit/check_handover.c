/* check_handover.c: rockd's USR2 records: a server session (its ring wrapped) survives export and import byte for byte; truncated, padded and garbled records are refused and leave nothing behind. */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "rock_engine_int.h"
#include "rock_err.h"
#include "suites.h"

static struct event_base *base;
static struct rock_engine *from, *to;
static struct rock_log lg;
static struct rock_config logcfg;
static uint8_t rec[1 << 16];
static size_t reclen;

#define CAP 4096

static void
setup(void)
{
	rock_config_defaults(&logcfg);
	logcfg.log_sink = ROCK_LOG_STDERR;
	rock_log_configure(&lg, &logcfg, "test-handover");
	ck_assert_ptr_nonnull(base = event_base_new());
	ck_assert_int_eq(rock_engine_new(&from, base, &lg, NULL, NULL, 0), 0);
	ck_assert_int_eq(rock_engine_new(&to, base, &lg, NULL, NULL, 0), 0);
}

static void
teardown(void)
{
	rock_engine_free(from);
	rock_engine_free(to);
	event_base_free(base);
}

static void
pattern(uint8_t *p, size_t n, uint8_t seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 7 + seed);
}

/* A suspended server session whose ring wraps round its storage, with a
 * queue, a peer's end and counts all different; its record in rec. */
static struct rock_session *
make_session(void)
{
	static const struct rock_session_cbs none = { 0 };
	struct rock_session *s;
	struct rock_keys k;
	uint8_t id[ROCK_ID_LEN], buf[3000];
	struct iovec iov[2];
	struct evbuffer *out;
	int n;

	pattern(id, sizeof(id), 1);
	pattern(k.tx, sizeof(k.tx), 2);
	pattern(k.rx, sizeof(k.rx), 3);
	ck_assert_int_eq(rock_session_new(from, ROCK_ROLE_SERVER, id, &k, CAP,
	    &none, NULL, &s), 0);
	pattern(buf, sizeof(buf), 4);
	ck_assert_int_eq(rock_ring_append(&s->ring, buf, sizeof(buf)), 0);
	ck_assert_int_eq(rock_ring_ack(&s->ring, 2500), 0);
	pattern(buf, sizeof(buf), 5);
	ck_assert_int_eq(rock_ring_append(&s->ring, buf, sizeof(buf)), 0);
	ck_assert_int_eq(rock_ring_peek(&s->ring, 2500, iov, &n), 0);
	ck_assert_int_eq(n, 2);		/* wrapped */
	s->features = ROCK_FEAT_ALL;
	s->consumed = 12345;
	s->acked_consumed = 12000;
	s->peer_consumed = 2500;
	s->replay_from = 4000;
	s->peer_flags = ROCK_FLAG_WR_SHUT;
	s->peer_end = 20000;
	s->flags = ROCK_FLAG_EOF_SEEN;
	s->want_shut = 1;
	s->seq_out = 77;
	s->seq_in = 99;
	s->has_anchor = 1;
	memset(s->anchor_id, 0x5a, ROCK_ID_LEN);
	s->pkt_out = 31;
	s->pkt_in = 42;
	s->rx_bits = 0x8001;
	s->announced = 1;
	s->proven = 1;
	s->rtt_ms = 40;
	s->rttvar_ms = 9;
	s->suspended_at_ms = 123456789;
	s->last_attempt = 3;
	evbuffer_add(s->outq, "queued bytes", 12);
	ck_assert_ptr_nonnull(out = evbuffer_new());
	ck_assert_int_eq(rock_session_export(s, out), 0);
	reclen = evbuffer_get_length(out);
	ck_assert_uint_le(reclen, sizeof(rec));
	evbuffer_remove(out, rec, reclen);
	evbuffer_free(out);
	return s;
}

/* All the ring holds, from its base, contiguous. */
static size_t
ring_bytes(const struct rock_session *s, uint8_t *out)
{
	struct iovec iov[2];
	size_t len = 0;
	int n, i;

	ck_assert_int_eq(rock_ring_peek(&s->ring, rock_ring_base(&s->ring),
	    iov, &n), 0);
	for (i = 0; i < n; i++) {
		memcpy(out + len, iov[i].iov_base, iov[i].iov_len);
		len += iov[i].iov_len;
	}
	return len;
}

START_TEST(test_roundtrip_wrapped_ring)
{
	struct rock_session *a = make_session(), *b = NULL;
	uint8_t ra[CAP], rb[CAP], q[32];
	size_t na, nb;

	ck_assert_int_eq(rock_session_import(to, rec, reclen, -1, NULL, NULL, &b), 0);
	ck_assert_mem_eq(b->id, a->id, ROCK_ID_LEN);
	ck_assert_mem_eq(b->keys.tx, a->keys.tx, ROCK_KEY_LEN);
	ck_assert_mem_eq(b->keys.rx, a->keys.rx, ROCK_KEY_LEN);
	ck_assert_int_eq(b->state, ROCK_ST_SUSPENDED);
	ck_assert_int_eq(b->fd, -1);
	ck_assert_uint_eq(b->consumed, 12345);
	ck_assert_uint_eq(b->acked_consumed, 12000);
	ck_assert_uint_eq(b->peer_consumed, 2500);
	ck_assert_uint_eq(b->replay_from, 4000);
	ck_assert_uint_eq(b->peer_end, 20000);
	ck_assert_uint_eq(b->peer_flags, ROCK_FLAG_WR_SHUT);
	ck_assert_uint_eq(b->flags, ROCK_FLAG_EOF_SEEN);
	ck_assert_int_eq(b->want_shut, 1);
	ck_assert_int_eq(b->shut_sent, 0);
	ck_assert_uint_eq(b->seq_out, 77);
	ck_assert_uint_eq(b->seq_in, 99);
	ck_assert_int_eq(b->has_anchor, 1);
	ck_assert_mem_eq(b->anchor_id, a->anchor_id, ROCK_ID_LEN);
	ck_assert_uint_eq(b->pkt_out, 31);
	ck_assert_uint_eq(b->pkt_in, 42);
	ck_assert_uint_eq(b->rx_bits, 0x8001);
	/* What the client confirmed is not carried: records go again. */
	ck_assert_int_eq(b->announced, 0);
	ck_assert_int_eq(b->proven, 1);
	ck_assert_int_eq(b->rtt_ms, 40);
	ck_assert_int_eq(b->rttvar_ms, 9);
	ck_assert_int_eq(b->suspended_at_ms, 123456789);
	ck_assert_uint_eq(b->last_attempt, 3);
	ck_assert_uint_eq(b->features, ROCK_FEAT_ALL);
	ck_assert_uint_eq(b->ring.cap, CAP);
	ck_assert_uint_eq(rock_ring_base(&b->ring), 2500);
	ck_assert_uint_eq(rock_ring_end(&b->ring), 6000);
	na = ring_bytes(a, ra);
	nb = ring_bytes(b, rb);
	ck_assert_uint_eq(na, 3500);
	ck_assert_uint_eq(nb, na);
	ck_assert_mem_eq(rb, ra, na);
	ck_assert_uint_eq(evbuffer_get_length(b->outq), 12);
	evbuffer_copyout(b->outq, q, 12);
	ck_assert_mem_eq(q, "queued bytes", 12);
	ck_assert_ptr_eq(rock_engine_find(to, a->id), b);
	/* The same rock twice in one engine is a broken hand-over. */
	ck_assert_int_eq(rock_session_import(to, rec, reclen, -1, NULL, NULL, &b),
	    ROCK_ERR_PROTOCOL);
	ck_assert_uint_eq(rock_engine_nsessions(to), 1);
}
END_TEST

/* A connected rock moves with its socket, and only with one. */
START_TEST(test_connected_takes_its_fd)
{
	struct rock_session *a, *b = NULL;
	struct evbuffer *out = evbuffer_new();
	int sv[2];

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	a = make_session();
	a->state = ROCK_ST_CONNECTED;
	a->fd = sv[0];
	ck_assert_int_eq(rock_session_export(a, out), 0);
	reclen = evbuffer_get_length(out);
	evbuffer_remove(out, rec, reclen);
	evbuffer_free(out);
	ck_assert_int_eq(rock_session_import(to, rec, reclen, -1, NULL, NULL, &b),
	    ROCK_ERR_INVALID);
	ck_assert_uint_eq(rock_engine_nsessions(to), 0);
	ck_assert_int_eq(rock_session_import(to, rec, reclen, sv[1], NULL, NULL,
	    &b), 0);
	ck_assert_int_eq(rock_session_fd(b), sv[1]);
	ck_assert_int_eq(b->state, ROCK_ST_CONNECTED);
	/* The client side is not movable: its dial lives in this process. */
	a->role = ROCK_ROLE_CLIENT;
	out = evbuffer_new();
	ck_assert_int_eq(rock_session_export(a, out), ROCK_ERR_INVALID);
	ck_assert_uint_eq(evbuffer_get_length(out), 0);
	evbuffer_free(out);
}
END_TEST

START_TEST(test_truncated_refused)
{
	struct rock_session *b = NULL;
	size_t n;

	make_session();
	for (n = 0; n < reclen; n++)
		ck_assert_int_ne(rock_session_import(to, rec, n, -1, NULL, NULL,
		    &b), 0);
	ck_assert_uint_eq(rock_engine_nsessions(to), 0);
}
END_TEST

START_TEST(test_oversized_refused)
{
	struct rock_session *b = NULL;

	make_session();
	rec[reclen] = 0;
	ck_assert_int_eq(rock_session_import(to, rec, reclen + 1, -1, NULL, NULL,
	    &b), ROCK_ERR_TOO_LARGE);
	/* The header's length says one byte more than the body has. */
	rec[11]++;
	ck_assert_int_eq(rock_session_import(to, rec, reclen, -1, NULL, NULL, &b),
	    ROCK_ERR_SHORT);
	ck_assert_uint_eq(rock_engine_nsessions(to), 0);
}
END_TEST

/* Record offsets of make_session's record (no addresses): the state,
 * the flags, replay_from, the ring's cap and its length. */
#define AT_STATE 12
#define AT_FLAGS 151
#define AT_REPLAY 160
#define AT_RING_CAP 270
#define AT_RING_LEN 286
#define AT_HAS_ANCHOR 184

static void
put_be(size_t at, uint64_t v, size_t width)
{
	while (width-- > 0) {
		rec[at + width] = (uint8_t)v;
		v >>= 8;
	}
}

static int
import_garbled(size_t at, uint64_t v, size_t width)
{
	struct rock_session *b = NULL;
	uint8_t saved[8];
	int r;

	memcpy(saved, rec + at, width);
	put_be(at, v, width);
	r = rock_session_import(to, rec, reclen, -1, NULL, NULL, &b);
	memcpy(rec + at, saved, width);
	return r;
}

START_TEST(test_garbled_refused)
{
	struct rock_session *b = NULL;

	make_session();
	ck_assert_int_eq(import_garbled(0, 0x524b5354, 4), ROCK_ERR_PROTOCOL);
	ck_assert_int_eq(import_garbled(4, 2, 4), ROCK_ERR_PROTOCOL);
	ck_assert_int_eq(import_garbled(4, 4, 4), ROCK_ERR_PROTOCOL);
	ck_assert_int_eq(import_garbled(AT_HAS_ANCHOR, 2, 1), ROCK_ERR_TOO_LARGE);
	ck_assert_int_eq(import_garbled(AT_STATE, ROCK_ST_CLOSED, 1), ROCK_ERR_PROTOCOL);
	ck_assert_int_eq(import_garbled(AT_STATE, 9, 1), ROCK_ERR_PROTOCOL);
	ck_assert_int_eq(import_garbled(AT_FLAGS, 0x100, 4), ROCK_ERR_PROTOCOL);
	ck_assert_int_eq(import_garbled(AT_REPLAY, 6001, 8), ROCK_ERR_PROTOCOL);
	ck_assert_int_eq(import_garbled(AT_RING_CAP, 0, 8), ROCK_ERR_PROTOCOL);
	ck_assert_int_eq(import_garbled(AT_RING_CAP, 3499, 8), ROCK_ERR_PROTOCOL);
	ck_assert_int_eq(import_garbled(AT_RING_CAP, 1ULL << 40, 8),
	    ROCK_ERR_TOO_LARGE);
	ck_assert_int_ne(import_garbled(AT_RING_LEN, 3501, 4), 0);
	ck_assert_uint_eq(rock_engine_nsessions(to), 0);
	/* And the offsets were the right ones: untouched, it imports. */
	ck_assert_int_eq(rock_session_import(to, rec, reclen, -1, NULL, NULL, &b), 0);
}
END_TEST

/* The announcement moves, so cached probes stay good, and the ticket
 * keys, so tickets the old process sealed resume on the new. */
START_TEST(test_engine_announcement_moves)
{
	struct evbuffer *out = evbuffer_new();
	uint8_t buf[4096], rms[ROCK_KEY_LEN], got[ROCK_KEY_LEN];
	uint8_t ticket[ROCK_TICKET_MSG_LEN], nonce[ROCK_TICKET_NONCE_LEN];
	struct rock_ticket_msg tm;
	int64_t origin = 0;
	size_t n;

	memset(rms, 0x5a, sizeof(rms));
	rock_random(nonce, sizeof(nonce));
	rock_ticket_issue(from, rms, rock_ticket_now_ms(), nonce, ticket);
	ck_assert_int_eq(rock_ticket_msg_decode(&tm, ticket), 0);
	ck_assert_int_eq(rock_ticket_accept(to, tm.ticket, got, &origin, NULL),
	    ROCK_ERR_AUTH);
	ck_assert_mem_ne(rock_engine_announcement(to),
	    rock_engine_announcement(from), ROCK_ANNOUNCE_LEN);
	ck_assert_int_eq(rock_engine_export(from, out), 0);
	n = evbuffer_get_length(out);
	ck_assert_uint_le(n, sizeof(buf));
	evbuffer_remove(out, buf, n);
	evbuffer_free(out);
	ck_assert_int_eq(rock_engine_import(to, buf, n - 1), ROCK_ERR_SHORT);
	ck_assert_int_eq(rock_engine_import(to, buf, n), 0);
	ck_assert_mem_eq(rock_engine_announcement(to),
	    rock_engine_announcement(from), ROCK_ANNOUNCE_LEN);
	ck_assert_int_eq(rock_ticket_accept(to, tm.ticket, got, &origin, NULL), 0);
	ck_assert_mem_eq(got, rms, sizeof(rms));
}
END_TEST

/* A finished rock's farewell in e, its id and keys from seed (random ones
 * with seed 0). */
static void
farewell_of(struct rock_engine *e, uint8_t seed)
{
	static const struct rock_session_cbs none = { 0 };
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(9),
	    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct rock_session *s;
	struct rock_keys k;
	uint8_t id[ROCK_ID_LEN];

	if (seed == 0) {
		rock_random(id, sizeof(id));
		rock_random(&k, sizeof(k));
	} else {
		pattern(id, sizeof(id), seed);
		pattern(k.tx, sizeof(k.tx), (uint8_t)(seed + 50));
		pattern(k.rx, sizeof(k.rx), (uint8_t)(seed + 100));
	}
	ck_assert_int_eq(rock_session_new(e, ROCK_ROLE_SERVER, id, &k, CAP,
	    &none, NULL, &s), 0);
	memcpy(&s->udp_peer, &a, sizeof(a));
	s->udp_peer_len = sizeof(a);
	s->features = ROCK_FEAT_ALL;
	rock_farewell_add(s);
	rock_session_free(s);
}

/* Whether e still holds seed's farewell: it takes an authentic record of
 * the peer's for it. */
static int
farewell_answers(struct rock_engine *e, uint8_t seed)
{
	struct rock_hb_record r = { .seq = 1000 }, got;
	struct sockaddr_storage a = { .ss_family = AF_INET };
	uint8_t peer_tx[ROCK_KEY_LEN], buf[ROCK_HB_RECORD_LEN];

	pattern(r.id, sizeof(r.id), seed);
	memcpy(r.anchor, r.id, ROCK_ID_LEN);
	pattern(peer_tx, sizeof(peer_tx), (uint8_t)(seed + 100));
	rock_control_seal(&r, peer_tx, buf);
	rock_hb_record_decode(&got, buf);
	return rock_farewell_answer(e, &got, buf, &a, sizeof(struct sockaddr_in)) == 0;
}

/* Farewells move in their order: the successor exports what it took byte
 * for byte, and past the bound it drops the predecessor's oldest first. */
START_TEST(test_farewells_keep_their_order)
{
	struct evbuffer *out = evbuffer_new();
	static uint8_t a[1 << 16], b[1 << 16];
	size_t na, nb;
	int i;

	for (i = 0; i < 3; i++)
		farewell_of(from, (uint8_t)(10 + i));	/* 10 the oldest */
	ck_assert_int_eq(rock_engine_export(from, out), 0);
	na = evbuffer_get_length(out);
	ck_assert_uint_le(na, sizeof(a));
	evbuffer_remove(out, a, na);
	ck_assert_int_eq(rock_engine_import(to, a, na), 0);
	ck_assert_uint_eq(rock_engine_nfarewells(to), 3);
	ck_assert_int_eq(rock_engine_export(to, out), 0);
	nb = evbuffer_get_length(out);
	ck_assert_uint_eq(nb, na);
	evbuffer_remove(out, b, nb);
	ck_assert_mem_eq(a, b, na);
	evbuffer_free(out);
	for (i = 0; i < ROCK_FAREWELL_MAX - 2; i++)
		farewell_of(to, 0);
	ck_assert_uint_eq(rock_engine_nfarewells(to), ROCK_FAREWELL_MAX);
	ck_assert(!farewell_answers(to, 10));
	ck_assert(farewell_answers(to, 11));
	ck_assert(farewell_answers(to, 12));
}
END_TEST

Suite *
handover_suite(void)
{
	Suite *s = suite_create("handover");
	TCase *tc = tcase_create("records");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_roundtrip_wrapped_ring);
	tcase_add_test(tc, test_connected_takes_its_fd);
	tcase_add_test(tc, test_truncated_refused);
	tcase_add_test(tc, test_oversized_refused);
	tcase_add_test(tc, test_garbled_refused);
	tcase_add_test(tc, test_engine_announcement_moves);
	tcase_add_test(tc, test_farewells_keep_their_order);
	suite_add_tcase(s, tc);
	return s;
}
