/* check_session.c: every session state transition, client and server engines in one process (resumption and early flights: check_resume.c). */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rock_engine_int.h"
#include "rock_err.h"
#include "session_fixture.h"
#include "suites.h"

/* ---- tests */

START_TEST(test_connect_and_echo)
{
	static uint8_t msg[100000];
	struct server sv;

	pair_up(&sv, NULL);
	ck_assert_int_eq(rock_session_state(cl.s), ROCK_ST_CONNECTED);
	ck_assert_int_eq(cl.states[ROCK_ST_CONNECTED], 1);
	fill_pattern(msg, sizeof(msg), 1);
	ck_assert_int_eq(rock_session_send(cl.s, msg, sizeof(msg)), 0);
	want_bytes = sizeof(msg);
	ck_assert(run_until(got_all, 5000));
	ck_assert_mem_eq(cl.got, msg, sizeof(msg));
	ck_assert_uint_eq(rock_session_consumed(cl.s), sizeof(msg));
	ck_assert_uint_eq(rock_session_sent(cl.s), sizeof(msg));
	pair_down(&sv);
}
END_TEST

/* CONNECTED -> SUSPENDED -> CONNECTED, three times during a transfer:
 * every byte arrives once, in order. */
START_TEST(test_fail_reconnect_replay)
{
	static uint8_t msg[3 << 20];
	struct server sv;
	int round;

	pair_up(&sv, NULL);
	fill_pattern(msg, sizeof(msg), 7);
	ck_assert_int_eq(rock_session_send(cl.s, msg, sizeof(msg)), 0);
	want_bytes = sizeof(msg);
	for (round = 0; round < 3; round++) {
		want_bytes = (size_t)(round + 1) * sizeof(msg) / 4;
		ck_assert(run_until(got_all, 10000));
		rock_session_fail(cl.s, "test: forced failure");
		ck_assert_int_eq(rock_session_state(cl.s), ROCK_ST_SUSPENDED);
		ck_assert(run_until(is_connected, 5000));
	}
	want_bytes = sizeof(msg);
	ck_assert(run_until(got_all, 10000));
	ck_assert_uint_eq(cl.ngot, sizeof(msg));
	ck_assert_mem_eq(cl.got, msg, sizeof(msg));
	ck_assert_int_eq(cl.states[ROCK_ST_SUSPENDED], 3);
	ck_assert_int_eq(cl.states[ROCK_ST_CONNECTED], 4);
	ck_assert_uint_eq(rock_engine_stats(cl.e)->reconnects, 3);
	pair_down(&sv);
}
END_TEST

/* Both sides shut down and everything consumed: CONNECTED -> CLOSED, err 0. */
START_TEST(test_graceful_close)
{
	struct server sv;

	pair_up(&sv, NULL);
	ck_assert_int_eq(rock_session_send(cl.s, "bye", 3), 0);
	rock_session_shutdown(cl.s);
	ck_assert(run_until(is_closed, 5000));
	ck_assert_int_eq(cl.closed_err, 0);
	ck_assert_int_eq(cl.eof, 1);
	ck_assert_uint_eq(cl.ngot, 3);
	ck_assert_mem_eq(cl.got, "bye", 3);
	ck_assert_int_eq(cl.states[ROCK_ST_CLOSED], 1);
	/* The server's FIN was read: its connection closed at once. */
	ck_assert_uint_eq(cl.e->ndrains, 0);
	pair_down(&sv);
}
END_TEST

/* A half-close made while the connection is failing is restored after the
 * reconnect: the server still gets every byte, then end of file, once. */
START_TEST(test_half_close_across_reconnect)
{
	static uint8_t msg[200000];
	struct server sv;

	pair_up(&sv, NULL);
	fill_pattern(msg, sizeof(msg), 3);
	ck_assert_int_eq(rock_session_send(cl.s, msg, sizeof(msg)), 0);
	rock_session_shutdown(cl.s);
	rock_session_fail(cl.s, "test: forced failure");
	ck_assert(run_until(is_closed, 10000));
	ck_assert_int_eq(cl.closed_err, 0);
	ck_assert_int_eq(cl.eof, 1);
	ck_assert_uint_eq(cl.ngot, sizeof(msg));
	ck_assert_mem_eq(cl.got, msg, sizeof(msg));
	pair_down(&sv);
}
END_TEST

/* After a FIN the peer never stated made the client suspend: it
 * reconnects, the stream's second half follows byte-exact, and no end of
 * file reached the owner. */
static void
second_half_after_reconnect(const uint8_t *msg, size_t len)
{
	ck_assert(run_until(is_connected, 5000));
	ck_assert_int_eq(rock_session_send(cl.s, msg + len / 2, len / 2), 0);
	want_bytes = len;
	ck_assert(run_until(got_all, 10000));
	ck_assert_mem_eq(cl.got, msg, len);
	ck_assert_int_eq(cl.eof, 0);
}

/* A FIN the client's program never asked for (here sent behind the
 * engine's back, as a box on the path or a dying peer's kernel would) is
 * not the end of the stream: the server holds it, finds no word from the
 * client, fails the connection; the reconnect carries on, byte-exact, and
 * nobody sees an end of file. */
START_TEST(test_fin_without_end_of_stream)
{
	static uint8_t msg[300000];
	struct server sv;

	pair_up(&sv, NULL);
	fill_pattern(msg, sizeof(msg), 5);
	ck_assert_int_eq(rock_session_send(cl.s, msg, sizeof(msg) / 2), 0);
	want_bytes = sizeof(msg) / 2;
	ck_assert(run_until(got_all, 5000));
	ck_assert_int_eq(shutdown(rock_direct_fd(cl.s), SHUT_WR), 0);
	/* The server's dead time on loopback (2.5 s and TCP's RTO), then
	 * the reconnect. */
	ck_assert(run_until(is_suspended_once, 5000));
	second_half_after_reconnect(msg, sizeof(msg));
	ck_assert_int_eq(cl.closed, 0);
	ck_assert_uint_eq(rock_engine_stats(cl.e)->reconnects, 1);
	/* And the real end still works after it. */
	rock_session_shutdown(cl.s);
	ck_assert(run_until(is_closed, 5000));
	ck_assert_int_eq(cl.closed_err, 0);
	ck_assert_int_eq(cl.eof, 1);
	pair_down(&sv);
}
END_TEST

/* The same toward the client, which asks the server over TCP (a status
 * exchange) once a heartbeat interval has passed without the server's word:
 * told the server has not shut its side, it fails the connection at once,
 * well before the dead time, and the stream goes on. */
START_TEST(test_fin_to_client_asked)
{
	static uint8_t msg[300000];
	struct server sv;
	int64_t t0;

	pair_up(&sv, NULL);
	fill_pattern(msg, sizeof(msg), 9);
	ck_assert_int_eq(rock_session_send(cl.s, msg, sizeof(msg) / 2), 0);
	want_bytes = sizeof(msg) / 2;
	ck_assert(run_until(got_all, 5000));
	ck_assert_ptr_nonnull(sv.last);
	t0 = rock_now_ms();
	ck_assert_int_eq(shutdown(rock_direct_fd(sv.last), SHUT_WR), 0);
	ck_assert(run_until(is_suspended_once, 5000));
	ck_assert_int_lt(rock_now_ms() - t0, 2000);
	ck_assert_uint_ge(rock_engine_stats(cl.e)->status_exchanges, 1);
	second_half_after_reconnect(msg, sizeof(msg));
	pair_down(&sv);
}
END_TEST

/* SUSPENDED -> CLOSED when nobody answers within the suspend timeout. */
START_TEST(test_suspend_timeout)
{
	struct rock_engine_config cfg;
	struct server sv;

	rock_engine_config_defaults(&cfg);
	cfg.suspend_timeout_s = 1;
	pair_up(&sv, &cfg);
	server_stop(&sv);		/* the server is gone for good */
	rock_session_fail(cl.s, "test: forced failure");
	ck_assert(run_until(is_closed, 4000));
	ck_assert_int_eq(cl.closed_err, ROCK_ERR_TIMEOUT);
	server_free(&sv);
	client_free();
}
END_TEST

/* A version 3 client (the announcement it echoes says 3..3, its hello is
 * 46 bytes) is told STALE as soon as the announcement is in, not after
 * the handshake's 10 s: it then probes, finds no common version and
 * makes a plain connection. */
START_TEST(test_older_client_stale)
{
	struct server sv;
	uint8_t hello[ROCK_ANNOUNCE_LEN + 46], in[ROCK_ERROR_MAX_LEN];
	struct pollfd p;
	int64_t t0;
	ssize_t n;
	int fd;

	server_start(&sv, ECHO);
	memcpy(hello, rock_engine_announcement(sv.e), ROCK_ANNOUNCE_LEN);
	hello[8] = hello[9] = 3;
	hello[12] ^= 0xff;		/* another server instance's */
	memset(hello + ROCK_ANNOUNCE_LEN, 0, 46);
	hello[ROCK_ANNOUNCE_LEN] = ROCK_MSG_CLIENT_HELLO;
	hello[ROCK_ANNOUNCE_LEN + 1] = 3;
	ck_assert_int_ge(fd = socket(AF_INET, SOCK_STREAM, 0), 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sv.addr, sizeof(sv.addr)), 0);
	t0 = rock_now_ms();
	ck_assert_int_eq(send(fd, hello, sizeof(hello), 0), (ssize_t)sizeof(hello));
	p.fd = fd;
	p.events = POLLIN;
	ck_assert_int_eq(poll(&p, 1, 3000), 1);
	n = recv(fd, in, sizeof(in), MSG_WAITALL);
	ck_assert_int_lt(rock_now_ms() - t0, 1000);
	/* type, STALE, its text, the signature: what a v3 client reads
	 * first is a v3 ERROR; the rest it never reads. */
	ck_assert_int_eq(n, 3 + (ssize_t)strlen("stale announcement") + ROCK_SIG_LEN);
	ck_assert_uint_eq(in[0], ROCK_MSG_ERROR);
	ck_assert_uint_eq(in[1], ROCK_WERR_STALE);
	ck_assert_int_eq(memcmp(in + 3, "stale announcement", in[2]), 0);
	close(fd);
	server_stop(&sv);
	server_free(&sv);
}
END_TEST

/* The server no longer knows the session: the reconnect gets UNKNOWN and
 * the client gives up with ROCK_ERR_RESET instead of retrying forever. */
START_TEST(test_reconnect_unknown)
{
	struct server sv;
	struct rock_session *victim;

	pair_up(&sv, NULL);
	/* Read once the server's thread is joined: it sets last just after
	 * its hello went out, which the client may see first. */
	server_stop(&sv);
	victim = sv.last;
	ck_assert_ptr_nonnull(victim);
	rock_session_free(victim);	/* the server forgets; its thread is stopped */
	server_restart(&sv);
	rock_session_fail(cl.s, "test: forced failure");
	ck_assert(run_until(is_closed, 5000));
	ck_assert_int_eq(cl.closed_err, ROCK_ERR_RESET);
	pair_down(&sv);
}
END_TEST

/* One forged reconnect request (a random id): 1 when a refusal came
 * back, 0 when the connection was reset unanswered; fails on anything
 * else (a clean end without an answer is neither). */
static int
forged_answered(const struct sockaddr_in *to)
{
	struct rock_reconnect_req rq;
	uint8_t out[ROCK_RECONNECT_REQ_LEN], in[ROCK_ERROR_MAX_LEN];
	int fd = socket(AF_INET, SOCK_STREAM, 0), got = 0;
	ssize_t n;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (const struct sockaddr *)to, sizeof(*to)), 0);
	memset(&rq, 0, sizeof(rq));
	rq.version = ROCK_VERSION;
	rock_random(rq.id, sizeof(rq.id));
	rock_random(rq.nonce, sizeof(rq.nonce));
	rq.attempt = rq.since = 1;
	rock_reconnect_req_encode(&rq, out);
	ck_assert_int_eq(send(fd, out, sizeof(out), MSG_NOSIGNAL), (ssize_t)sizeof(out));
	while ((n = recv(fd, in, sizeof(in), 0)) > 0)
		got = 1;
	if (!got)
		ck_assert_msg(n < 0 && errno == ECONNRESET, "an unanswered "
		    "refusal ended with %s, not a reset", n == 0 ? "a clean end" :
		    strerror(errno));
	close(fd);
	return got;
}

/* Refusals are signed from a budget: a second's worth is answered, then
 * forgeries are reset unanswered, while a proven reconnect beside them is
 * taken as ever. 20 a second here: one more every 50 ms, slower than
 * forgeries come even under a sanitizer. */
START_TEST(test_refusals_budget)
{
	struct rock_engine_config cfg;
	struct server sv;
	int answered = 0, tries;

	rock_engine_config_defaults(&cfg);
	cfg.refusal_signs_per_s = 20;
	server_cfg = &cfg;
	pair_up(&sv, NULL);
	server_cfg = NULL;
	for (tries = 0; tries < 200; tries++)
		if (!forged_answered(&sv.addr))
			break;
		else
			answered++;
	ck_assert_int_ge(answered, 20);
	ck_assert_int_lt(tries, 200);
	rock_session_fail(cl.s, "test: forced failure");
	ck_assert(run_until(is_connected, 5000));
	ck_assert_uint_eq(rock_engine_stats(cl.e)->reconnects, 1);
	server_stop(&sv);
	ck_assert_uint_ge(rock_engine_stats(sv.e)->reconnect_unanswered, 1);
	ck_assert_uint_ge(rock_engine_stats(sv.e)->reconnect_rejected,
	    (unsigned long)answered + 1);
	server_free(&sv);
	client_free();
}
END_TEST

/* A peer acknowledging bytes never sent ends only that session. */
START_TEST(test_protocol_violation)
{
	struct server sv;

	pair_up(&sv, NULL);
	ck_assert_int_eq(rock_session_send(cl.s, "abc", 3), 0);
	want_bytes = 3;
	ck_assert(run_until(got_all, 5000));
	ck_assert_int_eq(rock_session_peer_count(cl.s, 4, 0, 0), ROCK_ERR_PROTOCOL);
	ck_assert_int_eq(cl.closed, 1);
	ck_assert_int_eq(cl.closed_err, ROCK_ERR_PROTOCOL);
	ck_assert_int_eq(rock_session_state(cl.s), ROCK_ST_CLOSED);
	pair_down(&sv);
}
END_TEST

START_TEST(test_backend_refused)
{
	struct server sv;

	server_start(&sv, REFUSE);
	client_engine(NULL);
	ck_assert_int_eq(client_connect(&sv), ROCK_ERR_REFUSED);
	ck_assert_uint_eq(rock_engine_nsessions(cl.e), 0);
	pair_down(&sv);
}
END_TEST

/* A second connection to a known server costs no probe; a restarted server
 * (new announcement) answers STALE, and the client probes again. */
START_TEST(test_probe_cache)
{
	struct sockaddr_in addr;
	struct server sv;
	struct rock_session *first;

	pair_up(&sv, NULL);
	first = cl.s;
	ck_assert_int_eq(client_connect(&sv), 0);
	ck_assert_ptr_ne(first, cl.s);
	ck_assert_uint_eq(rock_engine_stats(cl.e)->probes, 1);
	ck_assert_uint_eq(rock_engine_stats(cl.e)->probe_cache_hits, 1);
	addr = sv.addr;
	server_stop(&sv);
	server_free(&sv);
	server_start_at(&sv, ECHO, &addr);
	ck_assert_int_eq(client_connect(&sv), 0);
	ck_assert_int_eq(rock_session_state(cl.s), ROCK_ST_CONNECTED);
	ck_assert_uint_eq(rock_engine_stats(cl.e)->probes, 2);
	ck_assert_uint_eq(rock_engine_stats(cl.e)->probe_cache_hits, 2);
	pair_down(&sv);
}
END_TEST

/* FO: what the cache says of Fast Open for a, with a cached
 * announcement (no probe). */
static int
fastopen_for(const struct sockaddr_in *a)
{
	uint8_t ann[ROCK_ANNOUNCE_LEN];
	int cached, fo;

	ck_assert_int_eq(rock_probe_announcement(cl.e, (const struct sockaddr *)a,
	    sizeof(*a), rock_now_ms() + 1000, ann, &cached, &fo), 0);
	ck_assert_int_eq(cached, 1);
	return fo;
}

/* Fast Open is tried, once more after a SYN that carried nothing (it
 * asked for the cookie), given up after a second, and tried again once
 * a SYN carries the flight (a server that turned it on) or the cache
 * entry is new. */
START_TEST(test_fastopen_given_up)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(9),
	    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) }, b = a;
	const struct sockaddr *sa = (const struct sockaddr *)&a;
	uint8_t ann[ROCK_ANNOUNCE_LEN] = { 0 };

	client_engine(NULL);
	b.sin_port = htons(10);
	rock_probe_remember(cl.e, sa, sizeof(a), ann);
	rock_probe_remember(cl.e, (const struct sockaddr *)&b, sizeof(b), ann);
	ck_assert_int_eq(fastopen_for(&a), ROCK_FO_TRY);
	rock_probe_fastopen_note(cl.e, sa, sizeof(a), ROCK_FO_TRY, 0);
	ck_assert_int_eq(fastopen_for(&a), ROCK_FO_MISSED);
	rock_probe_fastopen_note(cl.e, sa, sizeof(a), ROCK_FO_MISSED, 0);
	ck_assert_int_eq(fastopen_for(&a), ROCK_FO_NO);
	/* Another destination's are its own. */
	ck_assert_int_eq(fastopen_for(&b), ROCK_FO_TRY);
	/* One that carried it: tried again. */
	rock_probe_fastopen_note(cl.e, sa, sizeof(a), ROCK_FO_MISSED, 1);
	ck_assert_int_eq(fastopen_for(&a), ROCK_FO_TRY);
	rock_probe_fastopen_note(cl.e, sa, sizeof(a), ROCK_FO_TRY, 0);
	rock_probe_fastopen_note(cl.e, sa, sizeof(a), ROCK_FO_MISSED, 0);
	ck_assert_int_eq(fastopen_for(&a), ROCK_FO_NO);
	/* A new answer for the destination starts afresh. */
	rock_probe_forget(cl.e, sa, sizeof(a));
	rock_probe_remember(cl.e, sa, sizeof(a), ann);
	ck_assert_int_eq(fastopen_for(&a), ROCK_FO_TRY);
	client_free();
}
END_TEST

/* An ordinary server that closes on end of file: not enhanced, fast. */
START_TEST(test_not_enhanced)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
	    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	int64_t t0;

	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(lfd, 4), 0);
	ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&a, &len), 0);
	client_engine(NULL);
	t0 = rock_now_ms();
	/* Nobody accepts: the kernel completes the connection, then silence
	 * until the probe timeout. */
	ck_assert_int_eq(rock_client_open(cl.e, (struct sockaddr *)&a, sizeof(a),
	    5000, &client_cbs, NULL, &cl.s), ROCK_ERR_NOT_ENHANCED);
	ck_assert_int_lt(rock_now_ms() - t0, 3000);
	close(lfd);
	client_free();
}
END_TEST

/* ---- a finished rock's data connection (rock_drain.c) */

/* A connected TCP pair on loopback: *ours and the *peer's end. */
static void
tcp_pair(int *ours, int *peer)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
	    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int lfd = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(lfd, 1), 0);
	ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&a, &len), 0);
	ck_assert_int_ge(*peer = socket(AF_INET, SOCK_STREAM, 0), 0);
	ck_assert_int_eq(connect(*peer, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_ge(*ours = accept(lfd, NULL, NULL), 0);
	close(lfd);
}

/* The peer, once our end is closed: it reads our FIN, and no reset came
 * (SO_ERROR would say ECONNRESET or EPIPE) however long it looks. */
static int
peer_error(int peer)
{
	struct pollfd p = { peer, POLLIN, 0 };
	char c;
	int err = 0;
	socklen_t len = sizeof(err);

	ck_assert_int_eq(poll(&p, 1, 2000), 1);
	ck_assert_int_eq(recv(peer, &c, 1, 0), 0);
	usleep(50000);
	ck_assert_int_eq(getsockopt(peer, SOL_SOCKET, SO_ERROR, &err, &len), 0);
	return err;
}

static int no_drains(void) { return cl.e->ndrains == 0; }

/* The peer's bytes and FIN come after the rock finished: they are read
 * and dropped, the connection closes at the FIN, and the peer sees an
 * end, never a reset. Closed at once instead, the same bytes draw one. */
START_TEST(test_drain_until_fin)
{
	static const uint8_t late[1000];
	int ours, peer;

	client_engine(NULL);
	tcp_pair(&ours, &peer);
	close(ours);
	ck_assert_int_eq(send(peer, late, sizeof(late), 0), (ssize_t)sizeof(late));
	ck_assert_int_ne(peer_error(peer), 0);
	close(peer);

	tcp_pair(&ours, &peer);
	rock_drain_close(cl.e, ours, 0);
	ck_assert_uint_eq(cl.e->ndrains, 1);
	ck_assert_int_eq(send(peer, late, sizeof(late), 0), (ssize_t)sizeof(late));
	ck_assert_int_eq(shutdown(peer, SHUT_WR), 0);
	ck_assert(run_until(no_drains, ROCK_FAREWELL_MS / 2));
	ck_assert_int_eq(peer_error(peer), 0);
	close(peer);
	client_free();
}
END_TEST

/* A peer that sends no FIN holds the connection until the farewell's
 * end, no longer; what it sent meanwhile is dropped, and the close sends
 * no reset. */
START_TEST(test_drain_ends_at_farewell)
{
	static const uint8_t late[1000];
	int ours, peer;
	int64_t t0;

	client_engine(NULL);
	tcp_pair(&ours, &peer);
	t0 = rock_now_ms();
	rock_drain_close(cl.e, ours, 0);
	ck_assert_int_eq(send(peer, late, sizeof(late), 0), (ssize_t)sizeof(late));
	ck_assert(run_until(no_drains, 2 * ROCK_FAREWELL_MS));
	ck_assert_int_ge(rock_now_ms() - t0, ROCK_FAREWELL_MS - 50);
	ck_assert_int_eq(peer_error(peer), 0);
	close(peer);
	client_free();
}
END_TEST

Suite *
session_suite(void)
{
	Suite *s = suite_create("session");
	TCase *tc = tcase_create("transitions");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_connect_and_echo);
	tcase_add_test(tc, test_fail_reconnect_replay);
	tcase_add_test(tc, test_graceful_close);
	tcase_add_test(tc, test_half_close_across_reconnect);
	tcase_add_test(tc, test_fin_without_end_of_stream);
	tcase_add_test(tc, test_fin_to_client_asked);
	tcase_add_test(tc, test_suspend_timeout);
	tcase_add_test(tc, test_reconnect_unknown);
	tcase_add_test(tc, test_refusals_budget);
	tcase_add_test(tc, test_older_client_stale);
	tcase_add_test(tc, test_protocol_violation);
	tcase_add_test(tc, test_backend_refused);
	tcase_add_test(tc, test_probe_cache);
	tcase_add_test(tc, test_fastopen_given_up);
	tcase_add_test(tc, test_not_enhanced);
	tcase_add_test(tc, test_drain_until_fin);
	tcase_add_test(tc, test_drain_ends_at_farewell);
	suite_add_tcase(s, tc);
	return s;
}
