/* check_stream.c: a stream-mode rock's queue: its owner, who stops feeding a full one, hears once it is low again, however it got there. */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
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
static int drains;

static void
on_drain(struct rock_session *s, void *arg)
{
	(void)s;
	(void)arg;
	drains++;
}

static void
on_closed(struct rock_session *s, int err, void *arg)
{
	(void)err;
	(void)arg;
	rock_session_free(s);
}

static const struct rock_session_cbs cbs = {
	NULL, NULL, on_drain, NULL, on_closed, NULL
};

static void
setup(void)
{
	struct sockaddr_in lo = { .sin_family = AF_INET,
	    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

	drains = 0;
	rock_config_defaults(&logcfg);
	logcfg.log_sink = ROCK_LOG_STDERR;
	rock_log_configure(&lg, &logcfg, "test-stream");
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

/* A server rock on a socketpair; the test keeps the peer's end. */
static struct rock_session *
connected(int *peer)
{
	struct rock_session *s;
	struct rock_keys k;
	uint8_t id[ROCK_ID_LEN];
	int sv[2];

	rock_random(id, sizeof(id));
	rock_random(&k, sizeof(k));
	ck_assert_int_eq(rock_session_new(eng, ROCK_ROLE_SERVER, id, &k,
	    4 << 20, &cbs, NULL, &s), 0);
	s->features = ROCK_FEAT_ALL;
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	ck_assert_int_eq(rock_stream_attach(s, sv[0]), 0);
	*peer = sv[1];
	return s;
}

/* The bytes that take the queue under the low mark leave in a write
 * that then fails (the connection reset mid-flush): the rock suspends
 * with the queue already low. The owner still hears of it, once the
 * rock writes again; before, only a write that crossed the mark told,
 * and the owner's source stayed paused for good (a rockd download that
 * stopped after a reconnect, nothing unacknowledged, nothing detected). */
START_TEST(test_drain_told_after_failed_flush)
{
	static uint8_t buf[300 * 1024];
	struct rock_session *s;
	int peer, sv[2];

	s = connected(&peer);
	ck_assert_int_eq(rock_session_send(s, buf, sizeof(buf)), 0);
	rock_session_fail(s, "test: reset mid-flush");
	close(peer);
	ck_assert_int_eq(s->state, ROCK_ST_SUSPENDED);
	/* What that flush had written before the reset. */
	evbuffer_drain(s->outq, 200 * 1024);
	ck_assert_int_eq(drains, 0);
	/* The reconnect's new connection: the queue is low, the owner hears. */
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	ck_assert_int_eq(rock_stream_attach(s, sv[0]), 0);
	ck_assert_int_eq(drains, 1);
	close(sv[1]);
}
END_TEST

/* The ordinary way: the queue drains through the connection; the owner
 * hears once, when it is under the low mark, and not again. */
START_TEST(test_drain_told_once)
{
	static uint8_t buf[300 * 1024], sink[64 * 1024];
	struct rock_session *s;
	int peer, i;

	s = connected(&peer);
	ck_assert_int_eq(rock_session_send(s, buf, sizeof(buf)), 0);
	for (i = 0; i < 200 && rock_session_pending(s) > 0; i++) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		while (recv(peer, sink, sizeof(sink), MSG_DONTWAIT) > 0)
			;
		ck_assert_int_eq(drains, rock_session_pending(s) <= ROCK_OUTQ_LOW ? 1 : 0);
	}
	ck_assert_uint_eq(rock_session_pending(s), 0);
	ck_assert_int_eq(rock_session_send(s, buf, 1000), 0);
	event_base_loop(base, EVLOOP_NONBLOCK);
	ck_assert_int_eq(drains, 1);
	close(peer);
}
END_TEST

Suite *
stream_suite(void)
{
	Suite *su = suite_create("stream");
	TCase *tc = tcase_create("stream");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, test_drain_told_after_failed_flush);
	tcase_add_test(tc, test_drain_told_once);
	suite_add_tcase(su, tc);
	return su;
}
