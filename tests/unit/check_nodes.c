/* check_nodes.c: a server of several workers or a fleet's node, client and server engines in one process: reconnects routed by the id's worker byte, ELSEWHERE and a gone node, shared ticket keys, a named UDP address. */
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

Suite *
nodes_suite(void)
{
	Suite *s = suite_create("nodes");
	TCase *tc = tcase_create("workers and fleets");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_workers_route);
	tcase_add_test(tc, test_fleet_node);
	tcase_add_test(tc, test_udp_address);
	tcase_add_test(tc, test_ticket_store);
	suite_add_tcase(s, tc);
	return s;
}
