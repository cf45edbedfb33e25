/* check_resume.c: resumption between client and server engines in one process: tickets, their keys and chains, a client's early flight (doc/PROTOCOL.md 2.7, 2.9). */
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

/* A second connect resumes by the ticket the first left (no key
 * exchange, no signature); the resumed keys carry the data and prove a
 * reconnect, and every byte arrives once, in order. */
START_TEST(test_resumption)
{
	static uint8_t msg[400000];
	struct server sv;

	pair_up(&sv, NULL);
	ck_assert_uint_eq(rock_engine_stats(cl.e)->resumed, 0);
	ck_assert_int_eq(client_connect(&sv), 0);
	ck_assert_uint_eq(rock_engine_stats(cl.e)->resumed, 1);
	ck_assert_uint_eq(server_count(&sv.e->stats.resumed, 1), 1);
	ck_assert_uint_eq(server_count(&sv.e->stats.handshakes, 2), 2);
	cl.ngot = 0;
	fill_pattern(msg, sizeof(msg), 3);
	ck_assert_int_eq(rock_session_send(cl.s, msg, sizeof(msg)), 0);
	want_bytes = sizeof(msg) / 4;
	ck_assert(run_until(got_all, 10000));
	rock_session_fail(cl.s, "test: forced failure");
	ck_assert(run_until(is_connected, 5000));
	want_bytes = sizeof(msg);
	ck_assert(run_until(got_all, 10000));
	ck_assert_uint_eq(cl.ngot, sizeof(msg));
	ck_assert_mem_eq(cl.got, msg, sizeof(msg));
	ck_assert_uint_eq(rock_engine_stats(cl.e)->reconnects, 1);
	/* A third: the ticket the resumption left resumes too. */
	ck_assert_int_eq(client_connect(&sv), 0);
	ck_assert_uint_eq(rock_engine_stats(cl.e)->resumed, 2);
	pair_down(&sv);
}
END_TEST

/* connect() at TCP up (rock_early.c): with the announcement and a ticket
 * from an earlier connect, the start connects and sends the resumption;
 * the loop takes the answer and the session comes to the callback. */
static struct {
	int calls, r;
	struct rock_session *s;
	struct rock_early *x;
	uint8_t bytes[ROCK_EARLY_MAX];	/* handed back with no session */
	size_t nbytes;
} early;

static void
early_done(struct rock_engine *e, struct rock_session *s, int r,
    const uint8_t *bytes, size_t nbytes, void *arg)
{
	(void)e;
	ck_assert_ptr_eq(arg, &early);
	ck_assert_uint_le(nbytes, sizeof(early.bytes));
	if (nbytes > 0)
		memcpy(early.bytes, bytes, nbytes);
	early.nbytes = nbytes;
	early.calls++;
	early.r = r;
	early.s = s;
}

static int early_over(void) { return early.calls > 0; }
static int never(void) { return 0; }

static int
early_start(struct server *sv)
{
	memset(&early, 0, sizeof(early));
	return rock_early_start(cl.e, (const struct sockaddr *)&sv->addr,
	    sizeof(sv->addr), &client_cbs, NULL, early_done, &early, &early.x);
}

START_TEST(test_early_resumption)
{
	static uint8_t msg[100000];
	struct server sv;

	server_start(&sv, ECHO);
	client_engine(NULL);
	/* Nothing cached yet: not this way, and nothing started. */
	ck_assert_int_eq(early_start(&sv), ROCK_ERR_NOT_ENHANCED);
	ck_assert_ptr_null(early.x);
	ck_assert_int_eq(client_connect(&sv), 0);
	ck_assert_int_eq(early_start(&sv), 0);
	ck_assert_ptr_nonnull(early.x);
	ck_assert_int_eq(early.calls, 0);	/* the answer is the loop's */
	rock_early_arm(cl.e);
	ck_assert(run_until(early_over, 5000));
	ck_assert_int_eq(early.calls, 1);
	ck_assert_int_eq(early.r, 0);
	ck_assert_ptr_null(early.x);
	ck_assert_ptr_nonnull(early.s);
	ck_assert_int_eq(rock_session_state(early.s), ROCK_ST_CONNECTED);
	ck_assert_uint_eq(rock_engine_stats(cl.e)->resumed, 1);
	ck_assert_uint_eq(server_count(&sv.e->stats.resumed, 1), 1);
	cl.ngot = 0;
	fill_pattern(msg, sizeof(msg), 5);
	ck_assert_int_eq(rock_session_send(early.s, msg, sizeof(msg)), 0);
	want_bytes = sizeof(msg);
	ck_assert(run_until(got_all, 10000));
	ck_assert_mem_eq(cl.got, msg, sizeof(msg));
	pair_down(&sv);
}
END_TEST

/* Bytes behind a CLIENT_EARLY (a server with a replay register offers
 * EARLY): sent before the answer, admitted, the server's owner gets them
 * once; sent outside the clock's window (the ticket's age doctored),
 * held back: the session reconnects at once and they arrive once, by its
 * replay; a ticket refused (an ERROR: nothing passed on): no session, the
 * bytes handed back to be sent on what comes next; no answer at all
 * (the server's loop stopped): whether they passed is not known, they
 * are not handed back and the connect fails (ROCK_ERR_LOST). */
START_TEST(test_early_bytes)
{
	static char msg[] = "GET / HTTP/1.0\r\n\r\n";
	struct iovec iov = { msg, sizeof(msg) - 1 };
	struct rock_strike *st;
	unsigned long before;
	struct server sv;
	int round;
	unsigned i;

	pair_up_early(&sv, &st, 0);
	for (round = 0; round < 4; round++) {
		if (round == 1)		/* its age: 20 s more than it is */
			for (i = 0; i < ROCK_TICKET_CACHE; i++)
				cl.e->tickets[i].received_ms -= 20000;
		if (round == 2)		/* not the server's ticket any more */
			for (i = 0; i < ROCK_TICKET_CACHE; i++)
				cl.e->tickets[i].ticket[ROCK_TICKET_LEN - 1] ^= 1;
		if (round == 3) {	/* a server that answers nothing: its
					 * loop stopped, its listener open */
			ck_assert_int_eq(client_connect(&sv), 0);
			__atomic_store_n(&sv.stop, 1, __ATOMIC_RELEASE);
			pthread_join(sv.thread, NULL);
			cl.e->cfg.handshake_timeout_ms = 300;
		}
		before = __atomic_load_n(&server_got, __ATOMIC_RELAXED);
		ck_assert_int_eq(early_start(&sv), 0);
		ck_assert_uint_eq(rock_early_send(early.x, &iov, 1),
		    sizeof(msg) - 1);
		rock_early_arm(cl.e);
		ck_assert(run_until(early_over, 5000));
		if (round >= 2) {
			ck_assert_int_eq(early.r, round == 2 ? ROCK_ERR_REFUSED :
			    ROCK_ERR_LOST);
			ck_assert_ptr_null(early.s);
			ck_assert_uint_eq(early.nbytes, round == 2 ?
			    sizeof(msg) - 1 : 0);
			if (round == 2)
				ck_assert_mem_eq(early.bytes, msg, sizeof(msg) - 1);
			usleep(200 * 1000);
			ck_assert_uint_eq(__atomic_load_n(&server_got,
			    __ATOMIC_RELAXED), before);
			continue;
		}
		ck_assert_int_eq(early.r, 0);
		ck_assert_uint_eq(early.nbytes, 0);
		cl.s = early.s;
		cl.ngot = 0;
		want_bytes = sizeof(msg) - 1;
		ck_assert(run_until(got_all, 5000));
		ck_assert_mem_eq(cl.got, msg, sizeof(msg) - 1);
		ck_assert_uint_eq(rock_engine_stats(cl.e)->reconnects,
		    (unsigned)round);
		/* Once: nothing more comes after a quiet while. */
		run_until(never, 300);
		ck_assert_uint_eq(cl.ngot, sizeof(msg) - 1);
		ck_assert_uint_eq(__atomic_load_n(&server_got, __ATOMIC_RELAXED),
		    before + sizeof(msg) - 1);
	}
	ck_assert_uint_eq(sv.e->stats.early[ROCK_EARLY_ADMITTED], 1);
	ck_assert_uint_eq(sv.e->stats.early[ROCK_EARLY_CLOCK], 1);
	close(sv.lfd);
	server_free(&sv);
	client_free();
	rock_strike_free(st);
}
END_TEST

/* Given up before the loop took it (its program went): no callback, the
 * server's owner got nothing, and the server counts the unproven rock
 * as a FINISHED that never came once its connection closed. */
START_TEST(test_early_cancelled)
{
	struct server sv;
	unsigned long before;

	pair_up(&sv, NULL);
	before = __atomic_load_n(&server_got, __ATOMIC_RELAXED);
	ck_assert_int_eq(early_start(&sv), 0);
	rock_early_cancel(early.x);
	ck_assert_ptr_null(early.x);
	rock_early_arm(cl.e);
	usleep(200 * 1000);
	event_base_loop(cl.base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	ck_assert_int_eq(early.calls, 0);
	ck_assert_uint_eq(server_count(&sv.e->stats.handshake_failed[
	    ROCK_HS_FINISHED], 1), 1);
	ck_assert_uint_eq(__atomic_load_n(&server_got, __ATOMIC_RELAXED), before);
	pair_down(&sv);
}
END_TEST

/* A ticket the server cannot open (a byte changed on the way, or another
 * instance's): refused with TICKET, and the connect goes on as a full
 * handshake, which leaves a ticket that resumes. */
START_TEST(test_ticket_refused)
{
	struct server sv;
	unsigned i, n = 0;

	pair_up(&sv, NULL);
	for (i = 0; i < ROCK_TICKET_CACHE; i++)
		if (cl.e->tickets[i].len != 0) {
			cl.e->tickets[i].ticket[ROCK_TICKET_LEN - 1] ^= 1;
			n++;
		}
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(client_connect(&sv), 0);
	ck_assert_int_eq(rock_session_state(cl.s), ROCK_ST_CONNECTED);
	ck_assert_uint_eq(rock_engine_stats(cl.e)->resumed, 0);
	ck_assert_uint_eq(server_count(
	    &sv.e->stats.handshake_failed[ROCK_HS_TICKET], 1), 1);
	ck_assert_uint_eq(server_count(&sv.e->stats.handshakes, 2), 2);
	ck_assert_int_eq(client_connect(&sv), 0);
	ck_assert_uint_eq(rock_engine_stats(cl.e)->resumed, 1);
	pair_down(&sv);
}
END_TEST

/* The one ticket the client holds; NULL when none. */
static struct rock_ticket_entry *
the_ticket(void)
{
	struct rock_ticket_entry *t = NULL;
	unsigned i, n = 0;

	for (i = 0; i < ROCK_TICKET_CACHE; i++)
		if (cl.e->tickets[i].len != 0) {
			t = &cl.e->tickets[i];
			n++;
		}
	ck_assert_uint_le(n, 1);
	return t;
}

/* A SERVER_RESUME whose tag the client's secret does not give (here the
 * client's copy changed; on the wire, an answer from whoever does not
 * hold the ticket key) proves nothing: a full handshake follows, and the
 * server counts the resumption it answered as never proven. */
START_TEST(test_resume_tag_checked)
{
	struct server sv;

	pair_up(&sv, NULL);
	ck_assert_ptr_nonnull(the_ticket());
	the_ticket()->rms[0] ^= 1;
	ck_assert_int_eq(client_connect(&sv), 0);
	ck_assert_int_eq(rock_session_state(cl.s), ROCK_ST_CONNECTED);
	ck_assert_uint_eq(rock_engine_stats(cl.e)->resumed, 0);
	/* The server answered the resumption; the client, finding the tag
	 * wrong, never sent its FINISHED and left: no handshake made. */
	ck_assert_uint_eq(server_count(&sv.e->stats.handshake_failed[
	    ROCK_HS_FINISHED], 1), 1);
	ck_assert_uint_eq(server_count(&sv.e->stats.handshakes, 2), 2);
	ck_assert_uint_eq(sv.e->stats.resumed, 0);
	pair_down(&sv);
}
END_TEST

/* A refusal of a resumption (the backend down) is signed over the
 * resumption's first flight and decides the connect as a full handshake's
 * would: refused, and the ticket kept for later. */
START_TEST(test_resume_refused)
{
	uint8_t kept[ROCK_TICKET_LEN];
	struct server sv;

	pair_up(&sv, NULL);
	memcpy(kept, the_ticket()->ticket, sizeof(kept));
	__atomic_store_n(&sv.mode, REFUSE, __ATOMIC_RELAXED);
	ck_assert_int_eq(client_connect(&sv), ROCK_ERR_REFUSED);
	ck_assert_ptr_nonnull(the_ticket());
	ck_assert_mem_eq(the_ticket()->ticket, kept, sizeof(kept));
	ck_assert_uint_eq(server_count(&sv.e->stats.handshake_failed[
	    ROCK_HS_BACKEND], 1), 1);
	pair_down(&sv);
}
END_TEST

/* Ticket keys rotate: a ticket sealed by the key just retired still
 * resumes (and the new ticket is the new key's); once the retired key is
 * wiped its tickets are refused (TICKET) and a full handshake follows. */
START_TEST(test_ticket_rotation)
{
	struct rock_ticket_entry old;
	uint8_t first_id[ROCK_TICKET_KEY_ID_LEN];
	struct server sv;

	pair_up(&sv, NULL);
	old = *the_ticket();
	memcpy(first_id, old.ticket, sizeof(first_id));
	/* The server is idle: its loop does not touch the keys now. */
	sv.e->ticket_keys[0].born_ms -= ROCK_TICKET_ROTATE_S * 1000LL;
	ck_assert_int_eq(client_connect(&sv), 0);
	ck_assert_uint_eq(rock_engine_stats(cl.e)->resumed, 1);
	ck_assert_mem_ne(the_ticket()->ticket, first_id, sizeof(first_id));
	ck_assert_uint_eq(server_count(&sv.e->stats.resumed, 1), 1);
	sv.e->ticket_keys[1].retired_ms -= ROCK_TICKET_LIFETIME_S * 1000LL;
	*the_ticket() = old;	/* the first key's ticket, offered again */
	ck_assert_int_eq(client_connect(&sv), 0);
	ck_assert_uint_eq(rock_engine_stats(cl.e)->resumed, 1);
	ck_assert_uint_eq(server_count(
	    &sv.e->stats.handshake_failed[ROCK_HS_TICKET], 1), 1);
	ck_assert_int_eq(sv.e->ticket_keys[1].set, 0);
	pair_down(&sv);
}
END_TEST

/* A chain of resumptions ends two hours after its full handshake: the
 * client stops keeping its tickets, and the server refuses one offered
 * anyway (the chain's start is in the sealed part). */
START_TEST(test_ticket_chain_bound)
{
	struct rock_ticket_key *k;
	uint8_t nonce[ROCK_TICKET_NONCE_LEN] = { 0 };
	int64_t now;
	struct server sv;

	pair_up(&sv, NULL);
	ck_assert_ptr_nonnull(the_ticket());
	the_ticket()->origin_ms -= ROCK_TICKET_CHAIN_S * 1000LL;
	ck_assert_int_eq(client_connect(&sv), 0);
	ck_assert_uint_eq(rock_engine_stats(cl.e)->resumed, 1);
	ck_assert_ptr_null(the_ticket());	/* its chain is over */
	ck_assert_int_eq(client_connect(&sv), 0);
	ck_assert_uint_eq(rock_engine_stats(cl.e)->resumed, 1);
	ck_assert_ptr_nonnull(the_ticket());
	/* The server's side: a ticket of its own key, fresh, whose chain
	 * began more than two hours ago. */
	k = &sv.e->ticket_keys[0];
	now = rock_ticket_now_ms();
	rock_ticket_seal(the_ticket()->ticket, k->id, k->key, nonce,
	    (uint64_t)now, (uint64_t)(now - ROCK_TICKET_CHAIN_S * 1000LL - 1),
	    the_ticket()->rms);
	ck_assert_int_eq(client_connect(&sv), 0);
	ck_assert_uint_eq(rock_engine_stats(cl.e)->resumed, 1);
	ck_assert_uint_eq(server_count(
	    &sv.e->stats.handshake_failed[ROCK_HS_TICKET], 1), 1);
	pair_down(&sv);
}
END_TEST

Suite *
resume_suite(void)
{
	Suite *s = suite_create("resume");
	TCase *tc = tcase_create("tickets and early flights");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_resumption);
	tcase_add_test(tc, test_early_resumption);
	tcase_add_test(tc, test_early_cancelled);
	tcase_add_test(tc, test_ticket_refused);
	tcase_add_test(tc, test_resume_tag_checked);
	tcase_add_test(tc, test_early_bytes);
	tcase_add_test(tc, test_resume_refused);
	tcase_add_test(tc, test_ticket_rotation);
	tcase_add_test(tc, test_ticket_chain_bound);
	suite_add_tcase(s, tc);
	return s;
}
