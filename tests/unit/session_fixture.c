/* session_fixture.c: the engine tests' shared fixture: a rock echo server on its own thread, a client engine driven from the test's, and what they wait on. */
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

/* ---- a small rock echo server on its own thread and event base */

/* The server engine's configuration: NULL, the defaults; and where it
 * routes other workers' reconnects (set before its thread starts). */
const struct rock_engine_config *server_cfg;
rock_route_fn server_route;
void *server_route_arg;
rock_node_gone_fn server_node_gone;



/* Every byte any server session's owner was given. */
unsigned long server_got;

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

void
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

void
server_start(struct server *sv, enum server_mode mode)
{
	struct sockaddr_in lo = { .sin_family = AF_INET,
	    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

	server_start_at(sv, mode, &lo);
}

void
server_stop(struct server *sv)
{
	__atomic_store_n(&sv->stop, 1, __ATOMIC_RELEASE);
	pthread_join(sv->thread, NULL);
	close(sv->lfd);
}

void
server_restart(struct server *sv)
{
	__atomic_store_n(&sv->stop, 0, __ATOMIC_RELEASE);
	sv->lfd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_eq(setsockopt(sv->lfd, SOL_SOCKET, SO_REUSEADDR,
	    &(int){ 1 }, sizeof(int)), 0);
	ck_assert_int_eq(bind(sv->lfd, (struct sockaddr *)&sv->addr,
	    sizeof(sv->addr)), 0);
	ck_assert_int_eq(listen(sv->lfd, 16), 0);
	event_free(sv->ev_accept);
	sv->ev_accept = event_new(sv->base, sv->lfd, EV_READ | EV_PERSIST,
	    server_accept, sv);
	event_add(sv->ev_accept, NULL);
	ck_assert_int_eq(pthread_create(&sv->thread, NULL, server_main, sv), 0);
}

/* After server_stop: the engine frees the sessions it still has. */
void
server_free(struct server *sv)
{
	event_free(sv->ev_accept);
	event_free(sv->ev_stop);
	rock_engine_free(sv->e);
	event_base_free(sv->base);
}

/* ---- the client side, driven from the test's thread */


struct client cl;

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

const struct rock_session_cbs client_cbs = {
	client_data, client_eof, NULL, client_state, client_closed, NULL
};

void
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
void
client_free(void)
{
	rock_engine_free(cl.e);
	event_base_free(cl.base);
}

int
client_connect(const struct server *sv)
{
	return rock_client_open(cl.e, (const struct sockaddr *)&sv->addr,
	    sizeof(sv->addr), 5000, &client_cbs, NULL, &cl.s);
}

/* The usual start: an echo server and a connected client rock to it. */
void
pair_up(struct server *sv, const struct rock_engine_config *cfg)
{
	server_start(sv, ECHO);
	client_engine(cfg);
	ck_assert_int_eq(client_connect(sv), 0);
}

/* Both engines go, with whatever sessions they still have. */
void
pair_down(struct server *sv)
{
	server_stop(sv);
	server_free(sv);
	client_free();
}

/* Run the client's loop until cond() holds or ms pass; returns cond(). */
int
run_until(int (*cond)(void), int ms)
{
	int64_t end = rock_now_ms() + ms;

	while (!cond() && rock_now_ms() < end)
		event_base_loop(cl.base, EVLOOP_ONCE | EVLOOP_NONBLOCK), usleep(1000);
	return cond();
}

size_t want_bytes;
int got_all(void) { return cl.ngot >= want_bytes; }
int is_closed(void) { return cl.closed; }
int is_suspended_once(void) { return cl.states[ROCK_ST_SUSPENDED] >= 1; }
int
is_connected(void)
{
	return cl.s != NULL && rock_session_state(cl.s) == ROCK_ST_CONNECTED;
}

void
fill_pattern(uint8_t *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)((i * 131 + seed) ^ (i >> 9));
}

/* The server's count, read from our thread: it is set on the server's
 * just after its answer left, so it is waited for. */
unsigned long
server_count(const unsigned long *counter, unsigned long want)
{
	int64_t end = rock_now_ms() + 3000;

	while (__atomic_load_n(counter, __ATOMIC_RELAXED) < want &&
	    rock_now_ms() < end)
		usleep(1000);
	return __atomic_load_n(counter, __ATOMIC_RELAXED);
}

/* What bytes sent on a new connection to sv get back within wait_ms of
 * quiet (or until the server ends the connection), into in. */
size_t
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

/* A server that offers EARLY (a replay register of its own, in *st) and
 * the client engine; handshake_ms: the server's bound (0: its default). */
void
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
