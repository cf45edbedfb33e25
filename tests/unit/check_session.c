/* check_session.c: every session state transition, client and server engines in one process. */
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
#include "suites.h"

/* ---- a small rock echo server on its own thread and event base */

/* The server engine's configuration: NULL, the defaults; and where it
 * routes other workers' reconnects (set before its thread starts). */
static const struct rock_engine_config *server_cfg;
static rock_route_fn server_route;
static void *server_route_arg;
static rock_node_gone_fn server_node_gone;

enum server_mode { ECHO, REFUSE };

struct server {
	pthread_t thread;
	struct event_base *base;
	struct rock_engine *e;
	struct rock_log log;
	struct rock_config logcfg;
	int lfd;
	struct sockaddr_in addr;
	struct event *ev_accept, *ev_stop;
	enum server_mode mode;
	struct rock_session *last;	/* the newest session */
	int stop;
};

/* Every byte any server session's owner was given. */
static unsigned long server_got;

static void
echo_data(struct rock_session *s, const uint8_t *p, size_t n, void *arg)
{
	(void)arg;
	__atomic_add_fetch(&server_got, n, __ATOMIC_RELAXED);
	rock_session_send(s, p, n);
}

static void
echo_eof(struct rock_session *s, void *arg)
{
	(void)arg;
	rock_session_shutdown(s);
}

static void
server_closed(struct rock_session *s, int err, void *arg)
{
	struct server *sv = arg;

	(void)err;
	if (sv->last == s)
		sv->last = NULL;
	rock_session_free(s);
}

static const struct rock_session_cbs echo_cbs = {
	echo_data, echo_eof, NULL, NULL, server_closed, NULL
};

static void
server_hello(struct rock_handshake *hs, void *arg)
{
	struct server *sv = arg;
	struct rock_session *s;

	if (hs == NULL)
		return;
	if (sv->mode == REFUSE) {
		rock_handshake_reject(hs, ROCK_WERR_BACKEND, "test refuses");
		return;
	}
	if (rock_handshake_accept(hs, &echo_cbs, sv, &s) == 0)
		sv->last = s;
}

/* The first bytes decide, as in rockd; a test server may block briefly. */
static void
server_accept(evutil_socket_t lfd, short what, void *arg)
{
	struct server *sv = arg;
	struct pollfd p;
	uint8_t buf[ROCK_MAGIC_LEN];
	size_t have = 0;
	ssize_t n;
	int fd = accept(lfd, NULL, NULL);

	(void)what;
	if (fd < 0)
		return;
	p.fd = fd;
	p.events = POLLIN;
	while (have < sizeof(buf) && poll(&p, 1, 2000) == 1 &&
	    (n = recv(fd, buf + have, sizeof(buf) - have, 0)) > 0)
		have += (size_t)n;
	if (have == 0) {
		send(fd, rock_engine_announcement(sv->e), ROCK_ANNOUNCE_LEN, MSG_NOSIGNAL);
		close(fd);
	} else if (rock_sniff(buf, have) == ROCK_SNIFF_ANNOUNCE) {
		rock_server_handshake(sv->e, fd, buf, have, -1, server_hello, sv);
	} else if (rock_sniff(buf, have) == ROCK_SNIFF_RECONNECT) {
		rock_server_reconnect(sv->e, fd, buf, have);
	} else {
		close(fd);
	}
}

static void
server_poll_stop(evutil_socket_t fd, short what, void *arg)
{
	struct server *sv = arg;

	(void)fd;
	(void)what;
	if (__atomic_load_n(&sv->stop, __ATOMIC_ACQUIRE))
		event_base_loopbreak(sv->base);
}

static void *
server_main(void *arg)
{
	struct server *sv = arg;

	event_base_dispatch(sv->base);
	return NULL;
}

static void
server_start_at(struct server *sv, enum server_mode mode,
    const struct sockaddr_in *at)
{
	struct sockaddr_in any = *at;
	struct timeval tick = { 0, 20000 };
	socklen_t len = sizeof(sv->addr);

	memset(sv, 0, sizeof(*sv));
	sv->mode = mode;
	rock_config_defaults(&sv->logcfg);
	sv->logcfg.log_sink = ROCK_LOG_STDERR;
	rock_log_configure(&sv->log, &sv->logcfg, "test-server");
	ck_assert_ptr_nonnull(sv->base = event_base_new());
	any.sin_port = 0;	/* the control channel's port: any */
	ck_assert_int_eq(rock_engine_new(&sv->e, sv->base, &sv->log, server_cfg,
	    (struct sockaddr *)&any, sizeof(any)), 0);
	if (server_route != NULL)
		rock_engine_set_router(sv->e, server_route, server_route_arg);
	if (server_node_gone != NULL)
		rock_engine_set_node_watch(sv->e, server_node_gone, NULL);
	any = *at;
	sv->lfd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(sv->lfd, SOL_SOCKET, SO_REUSEADDR, &(int){ 1 }, sizeof(int));
	ck_assert_int_eq(bind(sv->lfd, (struct sockaddr *)&any, sizeof(any)), 0);
	ck_assert_int_eq(listen(sv->lfd, 16), 0);
	ck_assert_int_eq(getsockname(sv->lfd, (struct sockaddr *)&sv->addr, &len), 0);
	sv->ev_accept = event_new(sv->base, sv->lfd, EV_READ | EV_PERSIST,
	    server_accept, sv);
	sv->ev_stop = event_new(sv->base, -1, EV_PERSIST, server_poll_stop, sv);
	event_add(sv->ev_accept, NULL);
	event_add(sv->ev_stop, &tick);
	ck_assert_int_eq(pthread_create(&sv->thread, NULL, server_main, sv), 0);
}

static void
server_start(struct server *sv, enum server_mode mode)
{
	struct sockaddr_in lo = { .sin_family = AF_INET,
	    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

	server_start_at(sv, mode, &lo);
}

static void
server_stop(struct server *sv)
{
	__atomic_store_n(&sv->stop, 1, __ATOMIC_RELEASE);
	pthread_join(sv->thread, NULL);
	close(sv->lfd);
}

/* After server_stop: the engine frees the sessions it still has. */
static void
server_free(struct server *sv)
{
	event_free(sv->ev_accept);
	event_free(sv->ev_stop);
	rock_engine_free(sv->e);
	event_base_free(sv->base);
}

/* ---- the client side, driven from the test's thread */

struct client {
	struct event_base *base;
	struct rock_engine *e;
	struct rock_log log;
	struct rock_config logcfg;
	struct rock_session *s;
	uint8_t got[4 << 20];
	size_t ngot;
	int eof, closed, closed_err;
	int states[8];			/* count of transitions into each state */
};

static struct client cl;

static void
client_data(struct rock_session *s, const uint8_t *p, size_t n, void *arg)
{
	(void)s;
	(void)arg;
	ck_assert_uint_le(cl.ngot + n, sizeof(cl.got));
	memcpy(cl.got + cl.ngot, p, n);
	cl.ngot += n;
}

static void
client_eof(struct rock_session *s, void *arg)
{
	(void)s;
	(void)arg;
	cl.eof = 1;
}

static void
client_state(struct rock_session *s, enum rock_state from, enum rock_state to,
    void *arg)
{
	(void)s;
	(void)from;
	(void)arg;
	cl.states[to]++;
}

static void
client_closed(struct rock_session *s, int err, void *arg)
{
	(void)s;
	(void)arg;
	cl.closed = 1;
	cl.closed_err = err;
}

static const struct rock_session_cbs client_cbs = {
	client_data, client_eof, NULL, client_state, client_closed, NULL
};

static void
client_engine(const struct rock_engine_config *cfg)
{
	memset(&cl, 0, sizeof(cl));
	rock_config_defaults(&cl.logcfg);
	cl.logcfg.log_sink = ROCK_LOG_STDERR;
	rock_log_configure(&cl.log, &cl.logcfg, "test-client");
	ck_assert_ptr_nonnull(cl.base = event_base_new());
	ck_assert_int_eq(rock_engine_new(&cl.e, cl.base, &cl.log, cfg, NULL, 0), 0);
	cl.s = NULL;
}

/* A session still there goes with the engine. */
static void
client_free(void)
{
	rock_engine_free(cl.e);
	event_base_free(cl.base);
}

static int
client_connect(const struct server *sv)
{
	return rock_client_open(cl.e, (const struct sockaddr *)&sv->addr,
	    sizeof(sv->addr), 5000, &client_cbs, NULL, &cl.s);
}

/* The usual start: an echo server and a connected client rock to it. */
static void
pair_up(struct server *sv, const struct rock_engine_config *cfg)
{
	server_start(sv, ECHO);
	client_engine(cfg);
	ck_assert_int_eq(client_connect(sv), 0);
}

/* Both engines go, with whatever sessions they still have. */
static void
pair_down(struct server *sv)
{
	server_stop(sv);
	server_free(sv);
	client_free();
}

/* Run the client's loop until cond() holds or ms pass; returns cond(). */
static int
run_until(int (*cond)(void), int ms)
{
	int64_t end = rock_now_ms() + ms;

	while (!cond() && rock_now_ms() < end)
		event_base_loop(cl.base, EVLOOP_ONCE | EVLOOP_NONBLOCK), usleep(1000);
	return cond();
}

static size_t want_bytes;
static int got_all(void) { return cl.ngot >= want_bytes; }
static int is_closed(void) { return cl.closed; }
static int is_suspended_once(void) { return cl.states[ROCK_ST_SUSPENDED] >= 1; }
static int is_connected(void)
{
	return cl.s != NULL && rock_session_state(cl.s) == ROCK_ST_CONNECTED;
}

static void
fill_pattern(uint8_t *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)((i * 131 + seed) ^ (i >> 9));
}

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
	__atomic_store_n(&sv.stop, 0, __ATOMIC_RELEASE);
	sv.lfd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_eq(setsockopt(sv.lfd, SOL_SOCKET, SO_REUSEADDR, &(int){ 1 },
	    sizeof(int)), 0);
	ck_assert_int_eq(bind(sv.lfd, (struct sockaddr *)&sv.addr, sizeof(sv.addr)), 0);
	ck_assert_int_eq(listen(sv.lfd, 16), 0);
	event_free(sv.ev_accept);
	sv.ev_accept = event_new(sv.base, sv.lfd, EV_READ | EV_PERSIST,
	    server_accept, &sv);
	event_add(sv.ev_accept, NULL);
	ck_assert_int_eq(pthread_create(&sv.thread, NULL, server_main, &sv), 0);
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

/* A reconnect request for id (the rest of it random), sent on a new
 * connection: the connection. */
static int
request_sent(const struct sockaddr_in *to, const uint8_t id[ROCK_ID_LEN],
    uint8_t sent[ROCK_RECONNECT_REQ_LEN])
{
	struct rock_reconnect_req rq;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (const struct sockaddr *)to, sizeof(*to)), 0);
	memset(&rq, 0, sizeof(rq));
	rq.version = ROCK_VERSION;
	memcpy(rq.id, id, sizeof(rq.id));
	rock_random(rq.nonce, sizeof(rq.nonce));
	rq.attempt = rq.since = 1;
	rock_reconnect_req_encode(&rq, sent);
	ck_assert_int_eq(send(fd, sent, ROCK_RECONNECT_REQ_LEN, MSG_NOSIGNAL),
	    ROCK_RECONNECT_REQ_LEN);
	return fd;
}

/* The answer's first byte, or -1 at a clean end, -2 reset. */
static int
request_for(const struct sockaddr_in *to, const uint8_t id[ROCK_ID_LEN],
    uint8_t sent[ROCK_RECONNECT_REQ_LEN])
{
	uint8_t in[1];
	int fd = request_sent(to, id, sent);
	ssize_t n = recv(fd, in, 1, 0);

	close(fd);
	return n == 1 ? in[0] : n == 0 ? -1 : -2;
}

/* What the router was given (on the server's thread; read after it is
 * joined). */
static struct {
	int calls, worker;
	uint8_t req[ROCK_RECONNECT_REQ_LEN];
	size_t len;
} routed;

static void
route_to_test(void *arg, int fd, const uint8_t *req, size_t len, int worker)
{
	(void)arg;
	routed.calls++;
	routed.worker = worker;
	routed.len = len;
	memcpy(routed.req, req, len < sizeof(routed.req) ? len : sizeof(routed.req));
	/* The connection is the router's now: a mark, so the client knows. */
	(void)send(fd, "R", 1, MSG_NOSIGNAL);
	close(fd);
}

/* Worker 1 of 2: the ids it hands out say 1 at ROCK_ID_WORKER; a
 * reconnect for worker 0's id goes to the router whole, with its
 * connection, before any check; one for its own id or a worker past the
 * count is judged here (UNKNOWN); its own rock reconnects here. */
START_TEST(test_workers_route)
{
	struct rock_engine_config cfg;
	uint8_t id[ROCK_ID_LEN], sent[ROCK_RECONNECT_REQ_LEN];
	struct server sv;

	rock_engine_config_defaults(&cfg);
	cfg.workers = 2;
	cfg.worker = 1;
	server_cfg = &cfg;
	server_route = route_to_test;
	memset(&routed, 0, sizeof(routed));
	pair_up(&sv, NULL);
	server_cfg = NULL;
	server_route = NULL;
	ck_assert_uint_eq(cl.s->id[ROCK_ID_WORKER], 1);
	rock_random(id, sizeof(id));
	id[ROCK_ID_WORKER] = 0;
	ck_assert_int_eq(request_for(&sv.addr, id, sent), 'R');
	id[ROCK_ID_WORKER] = 1;
	ck_assert_int_eq(request_for(&sv.addr, id, sent), ROCK_MSG_ERROR);
	id[ROCK_ID_WORKER] = 2;
	ck_assert_int_eq(request_for(&sv.addr, id, sent), ROCK_MSG_ERROR);
	rock_session_fail(cl.s, "test: forced failure");
	ck_assert(run_until(is_connected, 5000));
	ck_assert_uint_eq(rock_engine_stats(cl.e)->reconnects, 1);
	server_stop(&sv);
	ck_assert_int_eq(routed.calls, 1);
	ck_assert_int_eq(routed.worker, 0);
	ck_assert_uint_eq(routed.len, ROCK_RECONNECT_REQ_LEN);
	/* The first request, whole: its id as sent. */
	id[ROCK_ID_WORKER] = 0;
	ck_assert_mem_eq(routed.req + 9, id, ROCK_ID_LEN);
	ck_assert_uint_eq(rock_engine_stats(sv.e)->reconnects_routed, 1);
	ck_assert_uint_eq(rock_engine_stats(sv.e)->reconnect_rejected, 2);
	ck_assert_uint_eq(rock_engine_stats(sv.e)->reconnects, 1);
	server_free(&sv);
	client_free();
}
END_TEST

/* The whole answer to a reconnect request for id on a new connection,
 * read to the server's close; its length. */
static size_t
answer_for(const struct sockaddr_in *to, const uint8_t id[ROCK_ID_LEN],
    uint8_t *in, size_t cap)
{
	uint8_t sent[ROCK_RECONNECT_REQ_LEN];
	int fd = request_sent(to, id, sent);
	size_t have = 0;
	ssize_t n;

	while (have < cap && (n = recv(fd, in + have, cap - have, 0)) > 0)
		have += (size_t)n;
	close(fd);
	return have;
}

static int is_suspended_now(void)
{
	return cl.s != NULL && rock_session_state(cl.s) == ROCK_ST_SUSPENDED;
}

/* The fleet's watch, as rockd's would say: node 5 is gone. */
static int
node5_gone(void *arg, int node)
{
	(void)arg;
	return node == 5;
}

/* Node 3 of a fleet: its ids and ticket keys' ids say 3 at ROCK_ID_NODE.
 * A reconnect for node 4's session is answered ELSEWHERE, unsigned, and
 * counted apart from refusals; one for node 5's, a node gone, UNKNOWN
 * signed; one for an id of its own that it does not hold is UNKNOWN,
 * signed. A client told ELSEWHERE keeps its rock suspended and dials
 * again: it is back once its request names node 3. */
START_TEST(test_fleet_node)
{
	struct rock_engine_config cfg;
	uint8_t id[ROCK_ID_LEN], in[ROCK_ERROR_MAX_LEN], zero[ROCK_SIG_LEN] = { 0 };
	struct rock_error_msg em;
	struct server sv;
	size_t n, used;

	rock_engine_config_defaults(&cfg);
	cfg.node = 3;
	server_cfg = &cfg;
	server_node_gone = node5_gone;
	pair_up(&sv, NULL);
	server_cfg = NULL;
	server_node_gone = NULL;
	ck_assert_uint_eq(cl.s->id[ROCK_ID_NODE], 3);
	ck_assert_uint_eq(sv.e->ticket_keys[0].id[ROCK_ID_NODE], 3);
	rock_random(id, sizeof(id));
	id[ROCK_ID_NODE] = 4;
	n = answer_for(&sv.addr, id, in, sizeof(in));
	ck_assert_int_eq(rock_error_decode(&em, in, n, &used), 0);
	ck_assert_uint_eq(used, n);
	ck_assert_uint_eq(em.code, ROCK_WERR_ELSEWHERE);
	ck_assert_mem_eq(in + n - ROCK_SIG_LEN, zero, ROCK_SIG_LEN);
	id[ROCK_ID_NODE] = 5;
	n = answer_for(&sv.addr, id, in, sizeof(in));
	ck_assert_int_eq(rock_error_decode(&em, in, n, &used), 0);
	ck_assert_uint_eq(em.code, ROCK_WERR_UNKNOWN);
	ck_assert_int_ne(memcmp(in + n - ROCK_SIG_LEN, zero, ROCK_SIG_LEN), 0);
	id[ROCK_ID_NODE] = 3;
	n = answer_for(&sv.addr, id, in, sizeof(in));
	ck_assert_int_eq(rock_error_decode(&em, in, n, &used), 0);
	ck_assert_uint_eq(em.code, ROCK_WERR_UNKNOWN);
	ck_assert_int_ne(memcmp(in + n - ROCK_SIG_LEN, zero, ROCK_SIG_LEN), 0);

	/* The client's own rock, its requests naming node 4 for a while. */
	cl.s->id[ROCK_ID_NODE] = 4;
	rock_session_fail(cl.s, "test: forced failure");
	ck_assert(!run_until(is_closed, 1500));
	ck_assert(is_suspended_now());
	cl.s->id[ROCK_ID_NODE] = 3;
	ck_assert(run_until(is_connected, 5000));
	ck_assert_uint_eq(rock_engine_stats(cl.e)->reconnects, 1);
	server_stop(&sv);
	ck_assert_uint_ge(rock_engine_stats(sv.e)->reconnects_elsewhere, 3);
	ck_assert_uint_eq(rock_engine_stats(sv.e)->reconnects_node_gone, 1);
	ck_assert_uint_eq(rock_engine_stats(sv.e)->reconnect_rejected, 2);
	ck_assert_uint_eq(rock_engine_stats(sv.e)->reconnects, 1);
	server_free(&sv);
	client_free();
}
END_TEST

/* Workers share ticket keys: what one seals another opens, both ways;
 * an engine without the store opens neither. */
START_TEST(test_ticket_store)
{
	struct rock_engine_config cfg;
	struct rock_ticket_store *st;
	struct rock_engine *a, *b, *lone;
	struct event_base *base = event_base_new();
	struct rock_log log;
	struct rock_config logcfg;
	uint8_t rms[ROCK_KEY_LEN], got[ROCK_KEY_LEN];
	uint8_t nonce[ROCK_TICKET_NONCE_LEN] = { 7 };
	uint8_t msg[ROCK_TICKET_MSG_LEN];
	struct rock_ticket_msg m;
	uint8_t first[ROCK_TICKET_KEY_ID_LEN];
	int64_t origin = 0, issued = 0, now = rock_ticket_now_ms();

	rock_config_defaults(&logcfg);
	logcfg.log_sink = ROCK_LOG_STDERR;
	rock_log_configure(&log, &logcfg, "test-store");
	ck_assert_int_eq(rock_ticket_store_new(&st), 0);
	rock_engine_config_defaults(&cfg);
	cfg.ticket_store = st;
	ck_assert_int_eq(rock_engine_new(&a, base, &log, &cfg, NULL, 0), 0);
	ck_assert_int_eq(rock_engine_new(&b, base, &log, &cfg, NULL, 0), 0);
	ck_assert_int_eq(rock_engine_new(&lone, base, &log, NULL, NULL, 0), 0);
	rock_random(rms, sizeof(rms));
	rock_ticket_issue(a, rms, now, nonce, msg);
	ck_assert_int_eq(rock_ticket_msg_decode(&m, msg), 0);
	memcpy(first, m.ticket, sizeof(first));
	/* No copy of the key is left in the engine between uses. */
	ck_assert_int_eq(a->ticket_keys[0].set, 0);
	ck_assert_int_eq(rock_ticket_accept(b, m.ticket, got, &origin,
	    &issued), 0);
	ck_assert_mem_eq(got, rms, sizeof(rms));
	ck_assert_int_eq(origin, now);
	/* When it was sealed: what an early flight's age counts from. */
	ck_assert_int_ge(issued, now);
	ck_assert_int_le(issued, rock_ticket_now_ms());
	ck_assert_int_eq(rock_ticket_accept(lone, m.ticket, got, &origin,
	    NULL), ROCK_ERR_AUTH);
	/* b seals with the key a made (one key, not one each): a opens it. */
	rock_ticket_issue(b, rms, now - 99, nonce, msg);
	ck_assert_int_eq(rock_ticket_msg_decode(&m, msg), 0);
	ck_assert_int_eq(rock_ticket_accept(a, m.ticket, got, &origin, NULL),
	    0);
	ck_assert_int_eq(origin, now - 99);
	ck_assert_mem_eq(m.ticket, first, ROCK_TICKET_KEY_ID_LEN);
	rock_engine_free(lone);
	rock_engine_free(b);
	rock_engine_free(a);
	rock_ticket_store_free(st);
	event_base_free(base);
}
END_TEST

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

/* The server's count, read from our thread: it is set on the server's
 * just after its answer left, so it is waited for. */
static unsigned long
server_count(const unsigned long *counter, unsigned long want)
{
	int64_t end = rock_now_ms() + 3000;

	while (__atomic_load_n(counter, __ATOMIC_RELAXED) < want &&
	    rock_now_ms() < end)
		usleep(1000);
	return __atomic_load_n(counter, __ATOMIC_RELAXED);
}

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

/* A server that offers EARLY (a replay register of its own, in *st) and
 * the client engine; handshake_ms: the server's bound (0: its default). */
static void
pair_up_early(struct server *sv, struct rock_strike **st, int handshake_ms)
{
	struct rock_engine_config cfg;

	ck_assert_int_eq(rock_strike_new(st), 0);
	rock_engine_config_defaults(&cfg);
	cfg.strike = *st;
	if (handshake_ms > 0)
		cfg.handshake_timeout_ms = handshake_ms;
	server_cfg = &cfg;
	pair_up(sv, NULL);
	server_cfg = NULL;
}

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

/* What bytes sent on a new connection to sv get back within wait_ms of
 * quiet (or until the server ends the connection), into in. */
static size_t
early_exchange(const struct server *sv, const uint8_t *out, size_t nout,
    uint8_t *in, size_t nin, int wait_ms)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct pollfd p = { fd, POLLIN, 0 };
	size_t have = 0;
	ssize_t n;

	ck_assert_int_eq(connect(fd, (const struct sockaddr *)&sv->addr,
	    sizeof(sv->addr)), 0);
	ck_assert_int_eq(send(fd, out, nout, MSG_NOSIGNAL), (ssize_t)nout);
	while (have < nin && poll(&p, 1, wait_ms) == 1 &&
	    (n = recv(fd, in + have, nin - have, 0)) > 0)
		have += (size_t)n;
	close(fd);
	return have;
}

static uint16_t
granted(const uint8_t *answer)
{
	return (uint16_t)(answer[2] << 8 | answer[3]);
}

/* ---- a node behind a balancer names its UDP address (PROTOCOL 2.10) */

static const struct server *named_sv;

/* Records both ways: the server heard the client's at the named address,
 * and answered at the source it learnt (it had no UDP peer before). */
static int
records_both_ways(void)
{
	return __atomic_load_n(&named_sv->e->stats.hb_ok, __ATOMIC_RELAXED) > 0 &&
	    rock_engine_stats(cl.e)->hb_ok > 0;
}

/* ss as IPv4 (or IPv4 mapped into IPv6): the address, host order, and
 * the port; 0 when it is neither. */
static uint32_t
v4_of(const struct sockaddr_storage *ss, uint16_t *port)
{
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;
	const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;
	uint32_t a;

	if (ss->ss_family == AF_INET) {
		*port = ntohs(s4->sin_port);
		return ntohl(s4->sin_addr.s_addr);
	}
	if (ss->ss_family != AF_INET6 || !IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr))
		return 0;
	memcpy(&a, &s6->sin6_addr.s6_addr[12], 4);
	*port = ntohs(s6->sin6_port);
	return ntohl(a);
}

/* A server with an address to name (udp-address HOST:PORT; 127.0.0.2,
 * its own port, its sockets on every address): a client, which asks,
 * sends its records there, not to the TCP address, and the server
 * answers where they came from; a resumption is told the same. A hello
 * that does not ask (an older client's) is told no port, and its answer
 * has no UDP_ADDRESS. */
START_TEST(test_udp_address)
{
	static const char msg[] = "to the node";
	const struct sockaddr *sa;
	struct sockaddr_in any = { .sin_family = AF_INET };
	struct sockaddr_in *named;
	struct rock_engine_config cfg;
	struct rock_client_hello ch;
	struct rock_server_hello sh;
	uint8_t out[ROCK_HELLO_TOTAL], in[1024];
	struct server sv;
	uint16_t port = 0;
	int round, fo;

	rock_engine_config_defaults(&cfg);
	named = (struct sockaddr_in *)&cfg.udp_address;
	named->sin_family = AF_INET;
	named->sin_addr.s_addr = htonl(0x7f000002);
	cfg.udp_address_len = sizeof(*named);
	server_cfg = &cfg;
	server_start_at(&sv, ECHO, &any);
	server_cfg = NULL;
	named_sv = &sv;
	client_engine(NULL);
	for (round = 0; round < 2; round++) {
		ck_assert_int_eq(client_connect(&sv), 0);
		ck_assert_uint_eq(rock_engine_stats(cl.e)->resumed,
		    (unsigned)round);
		ck_assert_uint_eq(cl.s->features, ROCK_FEAT_REQUESTED);
		ck_assert_uint_eq(v4_of(&cl.s->udp_peer, &port), 0x7f000002);
		ck_assert_uint_eq(port, sv.e->udp_port);
		cl.ngot = 0;
		ck_assert_int_eq(rock_session_send(cl.s, msg, sizeof(msg)), 0);
		want_bytes = sizeof(msg);
		ck_assert(run_until(got_all, 5000));
		ck_assert_mem_eq(cl.got, msg, sizeof(msg));
		ck_assert(round > 0 || run_until(records_both_ways, 5000));
	}
	sa = (const struct sockaddr *)&sv.addr;
	ck_assert(rock_probe_cached(cl.e, sa, sizeof(sv.addr), out, &fo));
	memset(&ch, 0, sizeof(ch));
	ch.version = ROCK_VERSION;
	ch.features = ROCK_FEAT_ALL;
	ch.rcvbuf = 131072;
	ch.sndbuf = 16384;
	ch.udp_port = 4434;
	rock_random(ch.pk, sizeof(ch.pk));
	rock_random(ch.nonce, sizeof(ch.nonce));
	rock_client_hello_encode(&ch, out + ROCK_ANNOUNCE_LEN);
	ck_assert_uint_eq(early_exchange(&sv, out, sizeof(out), in, sizeof(in),
	    500), ROCK_SERVER_HELLO_LEN + ROCK_TICKET_MSG_LEN);
	ck_assert_int_eq(rock_server_hello_decode(&sh, in), 0);
	ck_assert_uint_eq(sh.features, ROCK_FEAT_ALL);
	ck_assert_uint_eq(sh.udp_port, 0);
	pair_down(&sv);
}
END_TEST

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
	tcase_add_test(tc, test_workers_route);
	tcase_add_test(tc, test_fleet_node);
	tcase_add_test(tc, test_udp_address);
	tcase_add_test(tc, test_ticket_store);
	tcase_add_test(tc, test_older_client_stale);
	tcase_add_test(tc, test_protocol_violation);
	tcase_add_test(tc, test_backend_refused);
	tcase_add_test(tc, test_probe_cache);
	tcase_add_test(tc, test_fastopen_given_up);
	tcase_add_test(tc, test_resumption);
	tcase_add_test(tc, test_early_resumption);
	tcase_add_test(tc, test_early_cancelled);
	tcase_add_test(tc, test_ticket_refused);
	tcase_add_test(tc, test_early_refused_drained);
	tcase_add_test(tc, test_resume_tag_checked);
	tcase_add_test(tc, test_replayed_flight);
	tcase_add_test(tc, test_early_flight);
	tcase_add_test(tc, test_early_bytes);
	tcase_add_test(tc, test_finished_late);
	tcase_add_test(tc, test_resume_refused);
	tcase_add_test(tc, test_ticket_rotation);
	tcase_add_test(tc, test_ticket_chain_bound);
	tcase_add_test(tc, test_not_enhanced);
	tcase_add_test(tc, test_drain_until_fin);
	tcase_add_test(tc, test_drain_ends_at_farewell);
	suite_add_tcase(s, tc);
	return s;
}
