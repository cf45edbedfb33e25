/* check_replay.c: a server against recorded and early flights, engines in one process: a replayed first flight passes nothing on, CLIENT_EARLY admitted once and held back else, FINISHED late (doc/PROTOCOL.md 2.8, 2.9). */
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

/* ---- a recording proxy: what clients send through it, per connection */

#define TAPS 8
struct tap {
	int fd;
	struct sockaddr_in to;
	uint8_t up[8192];		/* the client's first bytes */
	size_t nup;
	int done;
};

static struct tap taps[TAPS];
static int tap_stop;
/* The client's bytes past the first tap_hold_at wait tap_hold_ms. */
static size_t tap_hold_at;
static int tap_hold_ms;

static void
tap_pass(int from, int to, struct tap *t, int record, int *open)
{
	uint8_t buf[4096];
	ssize_t n = read(from, buf, sizeof(buf));

	if (n <= 0) {
		shutdown(to, SHUT_WR);
		*open = 0;
		return;
	}
	if (record && tap_hold_at > 0 && t->nup + (size_t)n > tap_hold_at) {
		size_t first = tap_hold_at > t->nup ? tap_hold_at - t->nup : 0;

		(void)send(to, buf, first, MSG_NOSIGNAL);
		t->nup += first;	/* (not recorded: a held test replays none) */
		usleep((useconds_t)tap_hold_ms * 1000);
		memmove(buf, buf + first, (size_t)n - first);
		n -= (ssize_t)first;
		tap_hold_at = 0;
	}
	if (record && t->nup + (size_t)n <= sizeof(t->up)) {
		memcpy(t->up + t->nup, buf, (size_t)n);
		t->nup += (size_t)n;
	}
	(void)send(to, buf, (size_t)n, MSG_NOSIGNAL);
}

static void *
tap_main(void *arg)
{
	struct tap *t = arg;
	int up = socket(AF_INET, SOCK_STREAM, 0), open[2] = { 1, 1 };
	struct pollfd p[2];

	if (connect(up, (struct sockaddr *)&t->to, sizeof(t->to)) != 0)
		open[0] = open[1] = 0;
	while ((open[0] || open[1]) && !__atomic_load_n(&tap_stop,
	    __ATOMIC_ACQUIRE)) {
		p[0].fd = open[0] ? t->fd : -1;
		p[1].fd = open[1] ? up : -1;
		p[0].events = p[1].events = POLLIN;
		if (poll(p, 2, 50) <= 0)
			continue;
		if (p[0].revents)
			tap_pass(t->fd, up, t, 1, &open[0]);
		if (p[1].revents)
			tap_pass(up, t->fd, t, 0, &open[1]);
	}
	close(up);
	close(t->fd);
	__atomic_store_n(&t->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *
tap_accept(void *arg)
{
	int lfd = *(int *)arg, i;
	struct pollfd p = { lfd, POLLIN, 0 };
	pthread_t th;

	for (i = 0; i < TAPS && !__atomic_load_n(&tap_stop, __ATOMIC_ACQUIRE);)
		if (poll(&p, 1, 50) == 1 && (taps[i].fd = accept(lfd, NULL,
		    NULL)) >= 0) {
			pthread_create(&th, NULL, tap_main, &taps[i++]);
			pthread_detach(th);
		}
	return NULL;
}

/* The longest connection recorded since *from: the data connection (the
 * probe sends nothing). */
static struct tap *
tap_longest(int from, int *next)
{
	struct tap *best = NULL;
	int i;

	for (i = from; i < TAPS && taps[i].fd != 0; i++)
		if (best == NULL || taps[i].nup > best->nup)
			best = &taps[i];
	*next = i;
	return best;
}

/* A tap in front of the server: *addr is where clients reach it. */
static void
tap_start(const struct server *sv, int *lfd, pthread_t *acc,
    struct sockaddr_in *addr)
{
	socklen_t len = sizeof(*addr);
	int i;

	memset(taps, 0, sizeof(taps));
	tap_stop = 0;
	memset(addr, 0, sizeof(*addr));
	addr->sin_family = AF_INET;
	addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	*lfd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_eq(bind(*lfd, (struct sockaddr *)addr, sizeof(*addr)), 0);
	ck_assert_int_eq(listen(*lfd, 8), 0);
	ck_assert_int_eq(getsockname(*lfd, (struct sockaddr *)addr, &len), 0);
	for (i = 0; i < TAPS; i++)
		taps[i].to = sv->addr;
	ck_assert_int_eq(pthread_create(acc, NULL, tap_accept, lfd), 0);
}

static void
tap_end(int lfd, pthread_t acc)
{
	__atomic_store_n(&tap_stop, 1, __ATOMIC_RELEASE);
	pthread_join(acc, NULL);
	close(lfd);
}

/* What a recorded client stream, sent again on a new connection, gets
 * back: bytes read until the server ends it. */
static size_t
replay(const struct server *sv, const struct tap *t, uint8_t *in, size_t nin)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct pollfd p;
	size_t have = 0;
	ssize_t n;

	ck_assert_int_eq(connect(fd, (const struct sockaddr *)&sv->addr,
	    sizeof(sv->addr)), 0);
	ck_assert_int_eq(send(fd, t->up, t->nup, MSG_NOSIGNAL), (ssize_t)t->nup);
	p.fd = fd;
	p.events = POLLIN;
	while (have < nin && poll(&p, 1, 5000) == 1 &&
	    (n = recv(fd, in + have, nin - have, 0)) > 0)
		have += (size_t)n;
	close(fd);
	return have;
}

/* A recorded first flight with its FINISHED and first bytes, replayed to
 * the server, gets an answer (the server cannot tell yet) and nothing
 * more: the recorded FINISHED does not prove the new exchange's keys, so
 * the session ends and no byte reaches its owner. For a full handshake
 * and a resumption alike. */
START_TEST(test_replayed_flight)
{
	static const char msg[] = "GET /transfer?amount=100 HTTP/1.0\r\n\r\n";
	struct sockaddr_in tapaddr;
	uint8_t in[4096];
	unsigned long got;
	struct server sv;
	struct tap *t;
	pthread_t acc;
	int lfd, round, next = 0;

	server_start(&sv, ECHO);
	client_engine(NULL);
	tap_start(&sv, &lfd, &acc, &tapaddr);
	for (round = 0; round < 2; round++) {
		/* Through the tap: a full handshake, then a resumption. */
		ck_assert_int_eq(rock_client_open(cl.e, (struct sockaddr *)&tapaddr,
		    sizeof(tapaddr), 5000, &client_cbs, NULL, &cl.s), 0);
		ck_assert_uint_eq(rock_engine_stats(cl.e)->resumed,
		    (unsigned)round);
		cl.ngot = 0;
		ck_assert_int_eq(rock_session_send(cl.s, msg, sizeof(msg)), 0);
		want_bytes = sizeof(msg);
		ck_assert(run_until(got_all, 5000));
		ck_assert_mem_eq(cl.got, msg, sizeof(msg));
		t = tap_longest(next, &next);
		ck_assert_ptr_nonnull(t);
		ck_assert_uint_eq(t->nup, (round == 0 ? ROCK_HELLO_TOTAL :
		    ROCK_RESUME_TOTAL) + ROCK_FINISHED_LEN + sizeof(msg));
		got = __atomic_load_n(&server_got, __ATOMIC_RELAXED);
		/* The answer, whole or cut by the reset; never the echo. */
		ck_assert_uint_le(replay(&sv, t, in, sizeof(in)), round == 0 ?
		    ROCK_SERVER_HELLO_LEN + ROCK_TICKET_MSG_LEN :
		    ROCK_SERVER_RESUME_LEN + ROCK_TICKET_MSG_LEN);
		ck_assert_uint_eq(server_count(&sv.e->stats.handshake_failed[
		    ROCK_HS_FINISHED], (unsigned long)round + 1),
		    (unsigned long)round + 1);
		ck_assert_uint_eq(__atomic_load_n(&server_got, __ATOMIC_RELAXED),
		    got);
	}
	tap_end(lfd, acc);
	pair_down(&sv);
}
END_TEST

/* ---- CLIENT_EARLY, the server's side (doc/PROTOCOL.md 2.9) */

#define EARLY_ANSWER (ROCK_SERVER_RESUME_LEN + ROCK_TICKET_MSG_LEN)

/* A CLIENT_EARLY to sv under the ticket the client engine holds for it,
 * nonce filled with `fill`, claiming age_ms; msg after it. Its length. */
static size_t
early_flight(const struct server *sv, uint8_t fill, uint32_t age_ms,
    const char *msg, uint8_t *out)
{
	const struct sockaddr *sa = (const struct sockaddr *)&sv->addr;
	struct rock_client_resume cr;
	struct rock_ticket_entry tk;
	int fo;

	ck_assert(rock_probe_cached(cl.e, sa, sizeof(sv->addr), out, &fo));
	ck_assert(rock_ticket_find(cl.e, sa, sizeof(sv->addr), &tk));
	memset(&cr, 0, sizeof(cr));
	cr.version = ROCK_VERSION;
	cr.features = ROCK_FEAT_ALL | ROCK_FEAT_EARLY;
	cr.rcvbuf = 131072;
	cr.sndbuf = 16384;
	memset(cr.nonce, fill, sizeof(cr.nonce));
	memcpy(cr.ticket, tk.ticket, ROCK_TICKET_LEN);
	rock_client_early_encode(&cr, age_ms, out + ROCK_ANNOUNCE_LEN);
	rock_early_tag(out + ROCK_EARLY_TOTAL - ROCK_TAG_LEN, tk.rms, out);
	memcpy(out + ROCK_EARLY_TOTAL, msg, strlen(msg));
	rock_wipe(&tk, sizeof(tk));
	return ROCK_EARLY_TOTAL + strlen(msg);
}

static uint16_t
granted(const uint8_t *answer)
{
	return (uint16_t)(answer[2] << 8 | answer[3]);
}

/* 1 once the server's handshakes in progress are down to n, within ms. */
static int
handshakes_drop_to(const struct server *sv, size_t n, int ms)
{
	int64_t end = rock_now_ms() + ms;

	while (__atomic_load_n(&sv->e->nhandshakes, __ATOMIC_RELAXED) > n &&
	    rock_now_ms() < end)
		usleep(1000);
	return __atomic_load_n(&sv->e->nhandshakes, __ATOMIC_RELAXED) <= n;
}

/* Bytes after an admitted CLIENT_EARLY reach the server's owner at once
 * (its echo follows the answer, no FINISHED sent); the same flight sent
 * again gets an answer without EARLY and nothing more, as do a flight
 * outside the clock's window; a flight altered after its tag, a TICKET
 * refusal; one to a server with no register (EARLY never offered), a
 * PROTOCOL refusal. Held flights' sessions end at the handshake's
 * deadline with nothing passed. */
START_TEST(test_early_flight)
{
	static const char msg[] = "POST /transfer?amount=100 HTTP/1.0\r\n\r\n";
	uint8_t out[ROCK_EARLY_TOTAL + sizeof(msg)], in[1024];
	struct rock_strike *st;
	struct server sv;
	unsigned long got;
	size_t n;

	pair_up_early(&sv, &st, 2000);
	ck_assert_uint_eq(sv.e->announcement[11] & ROCK_FEAT_EARLY,
	    ROCK_FEAT_EARLY);
	n = early_flight(&sv, 0x11, 0, msg, out);
	got = __atomic_load_n(&server_got, __ATOMIC_RELAXED);
	ck_assert_uint_eq(early_exchange(&sv, out, n, in, EARLY_ANSWER +
	    strlen(msg), 2000), EARLY_ANSWER + strlen(msg));
	ck_assert_uint_eq(in[0], ROCK_MSG_SERVER_RESUME);
	ck_assert_uint_eq(granted(in), ROCK_FEAT_ALL | ROCK_FEAT_EARLY);
	ck_assert_mem_eq(in + EARLY_ANSWER, msg, strlen(msg));
	ck_assert_uint_eq(server_count(&server_got, got + strlen(msg)),
	    got + strlen(msg));
	ck_assert_uint_eq(sv.e->stats.early[ROCK_EARLY_ADMITTED], 1);
	/* The recording, again: answered, held back. */
	got = __atomic_load_n(&server_got, __ATOMIC_RELAXED);
	ck_assert_uint_eq(early_exchange(&sv, out, n, in, sizeof(in), 500),
	    EARLY_ANSWER);
	ck_assert_uint_eq(in[0], ROCK_MSG_SERVER_RESUME);
	ck_assert_uint_eq(granted(in), ROCK_FEAT_ALL);
	ck_assert_uint_eq(server_count(&sv.e->stats.early[ROCK_EARLY_REPLAY],
	    1), 1);
	/* Its connection gone, it is no handshake in progress any more (a
	 * hand-over does not wait for it), well before its deadline. */
	ck_assert(handshakes_drop_to(&sv, 0, 800));
	/* Sent (by its age) 11 s after the ticket was sealed: held back. */
	n = early_flight(&sv, 0x22, ROCK_EARLY_WINDOW_MS + 1000, msg, out);
	ck_assert_uint_eq(early_exchange(&sv, out, n, in, sizeof(in), 500),
	    EARLY_ANSWER);
	ck_assert_uint_eq(granted(in), ROCK_FEAT_ALL);
	ck_assert_uint_eq(sv.e->stats.early[ROCK_EARLY_CLOCK], 1);
	/* A nonce changed after the tag: refused, unsigned. */
	n = early_flight(&sv, 0x33, 0, msg, out);
	out[ROCK_ANNOUNCE_LEN + 14] ^= 1;
	ck_assert_uint_ge(early_exchange(&sv, out, n, in, sizeof(in), 2000), 3);
	ck_assert_uint_eq(in[0], ROCK_MSG_ERROR);
	ck_assert_uint_eq(in[1], ROCK_WERR_TICKET);
	/* The held sessions ended at their deadline, unheard of. */
	ck_assert_uint_eq(server_count(&sv.e->stats.handshake_failed[
	    ROCK_HS_FINISHED], 2), 2);
	ck_assert_uint_eq(__atomic_load_n(&server_got, __ATOMIC_RELAXED), got);
	pair_down(&sv);
	/* A server with no register offers no EARLY, and refuses one. */
	pair_up(&sv, NULL);
	ck_assert_uint_eq(sv.e->announcement[11] & ROCK_FEAT_EARLY, 0);
	n = early_flight(&sv, 0x44, 0, msg, out);
	got = __atomic_load_n(&server_got, __ATOMIC_RELAXED);
	ck_assert_uint_ge(early_exchange(&sv, out, n, in, sizeof(in), 2000), 3);
	ck_assert_uint_eq(in[0], ROCK_MSG_ERROR);
	ck_assert_uint_eq(in[1], ROCK_WERR_PROTOCOL);
	ck_assert_uint_eq(sv.e->stats.early[ROCK_EARLY_OFF], 1);
	ck_assert_uint_eq(__atomic_load_n(&server_got, __ATOMIC_RELAXED), got);
	pair_down(&sv);
	rock_strike_free(st);
}
END_TEST

/* out (n bytes) on a new connection to sv, refused: the ERROR with code
 * read. The connection, open. */
static int
refused_flight(const struct server *sv, const uint8_t *out, size_t n,
    uint8_t code)
{
	struct pollfd p = { socket(AF_INET, SOCK_STREAM, 0), POLLIN, 0 };
	uint8_t in[ROCK_ERROR_MAX_LEN];
	size_t have = 0;
	ssize_t r;

	ck_assert_int_eq(connect(p.fd, (const struct sockaddr *)&sv->addr,
	    sizeof(sv->addr)), 0);
	ck_assert_int_eq(send(p.fd, out, n, MSG_NOSIGNAL), (ssize_t)n);
	while (have < 3 && poll(&p, 1, 2000) == 1 &&
	    (r = recv(p.fd, in + have, sizeof(in) - have, 0)) > 0)
		have += (size_t)r;
	ck_assert_uint_ge(have, 3);
	ck_assert_uint_eq(in[0], ROCK_MSG_ERROR);
	ck_assert_uint_eq(in[1], code);
	return p.fd;
}

/* After its ERROR the client sends on (its flight's later segments),
 * shuts its side and gets the server's clean end, well before the
 * drain's bound: a close over the unread bytes would have reset it. */
static void
sends_on_then_clean_end(int fd)
{
	static const char more[] = "the flight's later segment";
	struct pollfd p = { fd, POLLIN, 0 };
	uint8_t in[ROCK_ERROR_MAX_LEN];
	int64_t shut_ms;
	ssize_t r = -1;

	ck_assert_int_eq(send(fd, more, sizeof(more), MSG_NOSIGNAL),
	    (ssize_t)sizeof(more));
	shut_ms = rock_now_ms();
	ck_assert_int_eq(shutdown(fd, SHUT_WR), 0);
	while (poll(&p, 1, 3000) == 1 && (r = recv(fd, in, sizeof(in), 0)) > 0)
		;
	ck_assert_int_eq(r, 0);
	ck_assert_int_lt(rock_now_ms() - shut_ms, ROCK_FAREWELL_MS / 2);
	close(fd);
}

/* A refused CLIENT_EARLY's bytes are read, not left for close() to
 * answer with a reset (which on a lossy path can overtake the ERROR):
 * for a TICKET refusal and a STALE one. Anyone can be refused, so the
 * engine holds at most ROCK_DRAIN_REFUSED_MAX such connections; the
 * next is closed at once. Nothing reaches the server's owner. */
START_TEST(test_early_refused_drained)
{
	static const char msg[] = "GET / HTTP/1.0\r\n\r\n";
	uint8_t out[ROCK_EARLY_TOTAL + sizeof(msg)];
	static int held[ROCK_DRAIN_REFUSED_MAX];
	struct rock_strike *st;
	struct server sv;
	struct pollfd p = { -1, POLLIN, 0 };
	unsigned long got;
	int64_t t0;
	size_t n;
	int i;

	pair_up_early(&sv, &st, 0);
	got = __atomic_load_n(&server_got, __ATOMIC_RELAXED);
	n = early_flight(&sv, 0x55, 0, msg, out);
	out[ROCK_ANNOUNCE_LEN + 14] ^= 1;	/* the tag fails: TICKET */
	p.fd = refused_flight(&sv, out, n, ROCK_WERR_TICKET);
	ck_assert(handshakes_drop_to(&sv, 0, 1000));
	sends_on_then_clean_end(p.fd);
	n = early_flight(&sv, 0x66, 0, msg, out);
	out[100] ^= 1;		/* another server's announcement: STALE */
	p.fd = refused_flight(&sv, out, n, ROCK_WERR_STALE);
	ck_assert(handshakes_drop_to(&sv, 0, 1000));
	sends_on_then_clean_end(p.fd);
	/* The bound: these stay held (nothing to read: no end yet), the
	 * one after is closed at once (its end arrives unasked). Only
	 * while the first is younger than the drain's 1.5 s: a machine
	 * that slow checks the bound's count alone. */
	t0 = rock_now_ms();
	for (i = 0; i < ROCK_DRAIN_REFUSED_MAX; i++)
		held[i] = refused_flight(&sv, out, n, ROCK_WERR_STALE);
	p.fd = refused_flight(&sv, out, n, ROCK_WERR_STALE);
	ck_assert(handshakes_drop_to(&sv, 0, 2000));
	ck_assert_uint_le(__atomic_load_n(&sv.e->ndrains_refused,
	    __ATOMIC_RELAXED), ROCK_DRAIN_REFUSED_MAX);
	if (rock_now_ms() - t0 < ROCK_FAREWELL_MS / 2) {
		ck_assert_int_eq(poll(&p, 1, ROCK_FAREWELL_MS / 2), 1);
		ck_assert_int_eq(recv(p.fd, out, 1, 0), 0);
	}
	close(p.fd);
	for (i = 0; i < ROCK_DRAIN_REFUSED_MAX; i++) {
		p.fd = held[i];
		if (rock_now_ms() - t0 < ROCK_FAREWELL_MS / 2)
			ck_assert_int_eq(poll(&p, 1, 0), 0);
		close(held[i]);
	}
	ck_assert_uint_eq(__atomic_load_n(&server_got, __ATOMIC_RELAXED), got);
	pair_down(&sv);
	rock_strike_free(st);
}
END_TEST

/* A FINISHED that takes its time (a slow path, a loaded client) is
 * waited for past the engine's ticks: the rock connects and carries the
 * bytes. A FINISHED that never comes ends the session at the deadline. */
START_TEST(test_finished_late)
{
	static const char msg[] = "late but proven";
	struct sockaddr_in tapaddr;
	struct server sv;
	pthread_t acc;
	int lfd;

	server_start(&sv, ECHO);
	client_engine(NULL);
	tap_start(&sv, &lfd, &acc, &tapaddr);
	tap_hold_at = ROCK_HELLO_TOTAL;
	tap_hold_ms = 700;
	ck_assert_int_eq(rock_client_open(cl.e, (struct sockaddr *)&tapaddr,
	    sizeof(tapaddr), 5000, &client_cbs, NULL, &cl.s), 0);
	ck_assert_int_eq(rock_session_send(cl.s, msg, sizeof(msg)), 0);
	want_bytes = sizeof(msg);
	ck_assert(run_until(got_all, 5000));
	ck_assert_mem_eq(cl.got, msg, sizeof(msg));
	ck_assert_uint_eq(sv.e->stats.handshake_failed[ROCK_HS_FINISHED], 0);
	tap_end(lfd, acc);
	tap_hold_at = 0;
	pair_down(&sv);
}
END_TEST

Suite *
replay_suite(void)
{
	Suite *s = suite_create("replay");
	TCase *tc = tcase_create("recorded and early flights");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_replayed_flight);
	tcase_add_test(tc, test_early_flight);
	tcase_add_test(tc, test_early_refused_drained);
	tcase_add_test(tc, test_finished_late);
	suite_add_tcase(s, tc);
	return s;
}
