/* check_stream.c: a stream-mode rock's ring and queue: bytes straight into the ring (send, send_from) replay exact, and an owner who stops feeding a full one hears once there is room again, however it got there. */
#include "config.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
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

/* A server rock with this ring cap, not connected yet. */
static struct rock_session *
suspended(size_t ring_cap)
{
	struct rock_session *s;
	struct rock_keys k;
	uint8_t id[ROCK_ID_LEN];

	rock_random(id, sizeof(id));
	rock_random(&k, sizeof(k));
	ck_assert_int_eq(rock_session_new(eng, ROCK_ROLE_SERVER, id, &k,
	    ring_cap, &cbs, NULL, &s), 0);
	s->features = ROCK_FEAT_ALL;
	return s;
}

/* A new data connection for s; the test keeps the peer's end. */
static int
attach(struct rock_session *s)
{
	int sv[2];

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	ck_assert_int_eq(rock_stream_attach(s, sv[0]), 0);
	return sv[1];
}

/* The connection to peer fails; a new one comes with the peer's count
 * `consumed` and replays from it. Returns the new peer's end. */
static int
reconnect(struct rock_session *s, int peer, uint64_t consumed)
{
	rock_session_fail(s, "test: reset");
	close(peer);
	ck_assert_int_eq(rock_session_resume_counts(s, consumed, 0, 0), 0);
	ck_assert_int_eq(rock_stream_replay(s), 0);
	return attach(s);
}

/* Reads what the peer's end has now, checking each byte is pattern(off). */
static size_t
drain_peer(int peer, uint64_t *off)
{
	uint8_t b[64 * 1024];
	ssize_t n, i;
	size_t got = 0;

	while ((n = recv(peer, b, sizeof(b), MSG_DONTWAIT)) > 0) {
		for (i = 0; i < n; i++)
			ck_assert_uint_eq(b[i], (uint8_t)((*off + (uint64_t)i) % 251));
		*off += (uint64_t)n;
		got += (size_t)n;
	}
	return got;
}

/* A backend: a pipe whose read end holds n bytes of pattern(from), then
 * its end of file. */
static int
source(uint64_t from, size_t n)
{
	uint8_t b[4096];
	size_t i, j, k;
	int p[2];

	ck_assert_int_eq(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
	ck_assert_int_ge(fcntl(p[1], F_SETPIPE_SZ, (int)n), (int)n);
	for (i = 0; i < n; i += k) {
		k = n - i < sizeof(b) ? n - i : sizeof(b);
		for (j = 0; j < k; j++)
			b[j] = (uint8_t)((from + i + j) % 251);
		ck_assert_int_eq(write(p[1], b, k), (ssize_t)k);
	}
	close(p[1]);
	return p[0];
}

/* A server rock on a socketpair with a 64 KiB ring, so that most of a
 * large send waits in the queue; the test keeps the peer's end. */
static struct rock_session *
connected(int *peer)
{
	struct rock_session *s = suspended(64 * 1024);

	*peer = attach(s);
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

/* A send behind an empty queue goes straight into the ring, as far as
 * it has room; the rest waits in the queue, behind it. Both reach the
 * peer in order, and a reconnect replays from the peer's count exact. */
START_TEST(test_send_into_ring_replays)
{
	static uint8_t buf[100 * 1024];
	struct rock_session *s = suspended(64 * 1024);
	uint64_t off = 0;
	size_t i;
	int peer;

	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i % 251);
	/* Suspended: nothing is written, the ring keeps what it took. */
	ck_assert_int_eq(rock_session_send(s, buf, sizeof(buf)), 0);
	ck_assert_uint_eq(rock_ring_end(&s->ring), 64 * 1024);
	ck_assert_uint_eq(rock_session_pending(s), sizeof(buf) - 64 * 1024);
	ck_assert_uint_eq(s->replay_from, 0);
	peer = attach(s);
	ck_assert_uint_eq(drain_peer(peer, &off), 64 * 1024);
	/* The connection fails; the peer had consumed 10,000 bytes. */
	peer = reconnect(s, peer, 10000);
	off = 10000;
	/* From 10,000: the ring's bytes, then the queue's as far as the
	 * ring has room, which the peer's count made: 10,000. */
	ck_assert_uint_eq(drain_peer(peer, &off), 64 * 1024);
	ck_assert_uint_eq(rock_session_pending(s), sizeof(buf) - 64 * 1024 - 10000);
	/* The peer's count frees the ring: the rest of the queue follows. */
	ck_assert_int_eq(rock_session_peer_count(s, off, 0, 0), 0);
	ck_assert_uint_eq(drain_peer(peer, &off), sizeof(buf) - 64 * 1024 - 10000);
	ck_assert_uint_eq(off, sizeof(buf));
	ck_assert_uint_eq(rock_session_pending(s), 0);
	close(peer);
}
END_TEST

/* send_from reads a backend straight into the ring, up to its room:
 * FULL then, and on_drain once the peer's count made a read's worth of
 * room. What was read while suspended and never written is replayed
 * with the rest, exact; the TCP bound never drops a byte not written. */
START_TEST(test_send_from_ring)
{
	struct rock_session *s = suspended(96 * 1024);
	int fd = source(0, 200 * 1024), peer;
	uint64_t off = 0, total = 0;
	ssize_t n;

	s->tcp_bound = 16 * 1024;
	while ((n = rock_session_send_from(s, fd, 40 * 1024)) > 0)
		total += (uint64_t)n;
	ck_assert_int_eq(n, ROCK_ERR_FULL);
	ck_assert_uint_eq(total, 96 * 1024);
	/* Nothing written yet: the bound frees nothing. */
	ck_assert_uint_eq(rock_ring_base(&s->ring), 0);
	ck_assert_uint_eq(rock_ring_end(&s->ring), 96 * 1024);
	ck_assert_int_eq(drains, 0);
	peer = attach(s);
	ck_assert_uint_eq(drain_peer(peer, &off), 96 * 1024);
	/* All written: all but the bound's last 16 KiB surely consumed, a
	 * read's worth of room, and the owner hears. */
	ck_assert_uint_eq(rock_ring_base(&s->ring), 80 * 1024);
	ck_assert_int_eq(drains, 1);
	while ((n = rock_session_send_from(s, fd, 40 * 1024)) > 0)
		total += (uint64_t)n;
	ck_assert_int_eq(n, ROCK_ERR_FULL);
	ck_assert_uint_eq(total, 176 * 1024);
	/* Reset before any of the new bytes were written: the peer says it
	 * consumed 90,000; the replay sends from there, new bytes included. */
	peer = reconnect(s, peer, 90000);
	off = 90000;
	ck_assert_uint_eq(drain_peer(peer, &off), 176 * 1024 - 90000);
	/* Less than a read's worth of room left, no count from the peer
	 * (UDP blocked, say): the bound frees the rest, the owner hears. */
	ck_assert_uint_eq(rock_ring_base(&s->ring), 160 * 1024);
	ck_assert_int_eq(drains, 2);
	while ((n = rock_session_send_from(s, fd, 40 * 1024)) > 0)
		total += (uint64_t)n;
	ck_assert_int_eq(n, 0);		/* the backend's end of file */
	ck_assert_uint_eq(total, 200 * 1024);
	event_base_loop(base, EVLOOP_NONBLOCK);
	ck_assert_uint_eq(drain_peer(peer, &off), 24 * 1024);
	ck_assert_uint_eq(off, 200 * 1024);
	close(peer);
	close(fd);
}
END_TEST

/* A read into the ring is offered what its storage has free, and more
 * only after reads that filled their offer: small messages leave a 4 KiB
 * ring however much room is asked for (256 KiB), where the ring used to
 * grow to it for every read; a bulk source's reads then double, up to
 * the room asked. */
START_TEST(test_send_from_offer)
{
	struct rock_session *s = suspended(1024 * 1024);
	int p[2], fd, i;
	uint8_t msg[64] = { 0 };
	ssize_t n, want = 4096 - 640;

	ck_assert_int_eq(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
	for (i = 0; i < 10; i++) {
		ck_assert_int_eq(write(p[1], msg, sizeof(msg)), sizeof(msg));
		ck_assert_int_eq(rock_session_send_from(s, p[0], 256 * 1024),
		    sizeof(msg));
		ck_assert_uint_eq(rock_ring_memory(&s->ring), 4096);
	}
	close(p[1]);
	close(p[0]);
	/* 640 bytes held, 3,456 free: the first bulk read takes those, and
	 * each that fills its offer doubles the next, up to the 256 KiB. */
	fd = source(0, 512 * 1024);
	for (i = 0; i < 7; i++) {
		n = rock_session_send_from(s, fd, 256 * 1024);
		ck_assert_int_eq(n, want);
		want *= 2;
	}
	/* 3,456 x 127 read, the 256 KiB offered next: the source's rest. */
	ck_assert_int_eq(rock_session_send_from(s, fd, 256 * 1024),
	    512 * 1024 - 3456 * 127);
	ck_assert_int_eq(rock_session_send_from(s, fd, 256 * 1024), 0);
	close(fd);
}
END_TEST

/* The ordinary way: the queue drains through the connection; the owner
 * hears once, when it is under the low mark, and not again. */
START_TEST(test_drain_told_once)
{
	static uint8_t buf[300 * 1024], sink[64 * 1024];
	struct rock_session *s;
	uint64_t got = 0;
	ssize_t n;
	int peer, i;

	s = connected(&peer);
	ck_assert_int_eq(rock_session_send(s, buf, sizeof(buf)), 0);
	ck_assert_uint_eq(rock_session_pending(s), sizeof(buf) - 64 * 1024);
	for (i = 0; i < 200 && rock_session_pending(s) > 0; i++) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		while ((n = recv(peer, sink, sizeof(sink), MSG_DONTWAIT)) > 0)
			got += (uint64_t)n;
		/* the peer's count makes room in the ring */
		ck_assert_int_eq(rock_session_peer_count(s, got, 0, 0), 0);
		ck_assert_int_eq(drains, rock_session_pending(s) <= ROCK_OUTQ_LOW ? 1 : 0);
	}
	ck_assert_uint_eq(rock_session_pending(s), 0);
	ck_assert_int_eq(rock_session_send(s, buf, 1000), 0);
	event_base_loop(base, EVLOOP_NONBLOCK);
	ck_assert_int_eq(drains, 1);
	close(peer);
}
END_TEST

/* Bytes in the ring not written yet cannot have been consumed: a peer
 * that says so lies, and the session ends as for any count past what
 * was sent. */
START_TEST(test_count_past_written)
{
	static uint8_t buf[1000];
	struct rock_session *s = suspended(64 * 1024);
	int peer;

	ck_assert_int_eq(rock_session_send(s, buf, sizeof(buf)), 0);
	ck_assert_uint_eq(rock_ring_end(&s->ring), sizeof(buf));
	peer = attach(s);	/* writes all 1000 */
	ck_assert_int_eq(rock_session_peer_count(s, 600, 0, 0), 0);
	rock_session_fail(s, "test: reset");
	close(peer);
	ck_assert_int_eq(rock_session_send(s, buf, sizeof(buf)), 0);
	ck_assert_uint_eq(rock_ring_end(&s->ring), 2 * sizeof(buf));
	ck_assert_int_eq(rock_session_peer_count(s, sizeof(buf) + 1, 0, 0),
	    ROCK_ERR_PROTOCOL);	/* closed, and freed by on_closed */
}
END_TEST

static void
direct_suspend(struct rock_session *s, int old_fd, void *arg)
{
	(void)s;
	(void)old_fd;
	(void)arg;
}

static void
direct_swap(struct rock_session *s, int old_fd, int new_fd, void *arg)
{
	(void)s;
	(void)old_fd;
	(void)new_fd;
	(void)arg;
}

static void
direct_eof(struct rock_session *s, void *arg)
{
	(void)s;
	(void)arg;
}

static const struct rock_direct_ops direct_ops = {
	direct_suspend, direct_swap, direct_eof
};
static const struct rock_session_cbs direct_cbs = {
	NULL, NULL, on_drain, NULL, on_closed, &direct_ops
};

/* A direct-mode rock (the program writes to the socket itself) released
 * to the engine, as at the program's exit: the peer's count of what the
 * program wrote is no lie. Before, the engine checked it against the
 * bytes the engine itself had written (none, or the last replay's): an
 * ssh session ended with "peer acknowledged bytes never sent" every time. */
START_TEST(test_direct_release_counts)
{
	static uint8_t buf[1000];
	struct iovec iov = { buf, sizeof(buf) };
	struct rock_session *s;
	struct rock_keys k;
	uint8_t id[ROCK_ID_LEN];
	int sv[2];

	rock_random(id, sizeof(id));
	rock_random(&k, sizeof(k));
	ck_assert_int_eq(rock_session_new(eng, ROCK_ROLE_CLIENT, id, &k,
	    64 * 1024, &direct_cbs, NULL, &s), 0);
	s->features = ROCK_FEAT_ALL;
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	ck_assert_int_eq(rock_direct_attach(s, sv[0]), 0);
	rock_direct_sending(s, sizeof(buf));
	ck_assert_int_eq(write(sv[0], buf, sizeof(buf)), (ssize_t)sizeof(buf));
	ck_assert_int_eq(rock_direct_sent(s, &iov, 1, sizeof(buf)), 0);
	rock_direct_release(s, &cbs, NULL);
	ck_assert_int_eq(rock_session_peer_count(s, sizeof(buf), 0, 0), 0);
	ck_assert_int_eq(rock_session_state(s), ROCK_ST_CONNECTED);
	/* One byte more is still a lie. */
	ck_assert_int_eq(rock_session_peer_count(s, sizeof(buf) + 1, 0, 0),
	    ROCK_ERR_PROTOCOL);	/* closed, and freed by on_closed */
	close(sv[1]);
}
END_TEST

/* A loopback TCP connection: *peer gets the far end. */
static int
tcp_pair(int *peer)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
	    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int l, c;

	ck_assert_int_ge(l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), 0);
	ck_assert_int_eq(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(l, 1), 0);
	ck_assert_int_eq(getsockname(l, (struct sockaddr *)&a, &len), 0);
	ck_assert_int_ge(c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), 0);
	ck_assert_int_eq(connect(c, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_ge(*peer = accept4(l, NULL, NULL, SOCK_CLOEXEC), 0);
	close(l);
	return c;
}

static int
rto_max_ms(int fd)
{
	int ms = -1;
	socklen_t len = sizeof(ms);

	ck_assert_int_eq(getsockopt(fd, IPPROTO_TCP, 44 /* TCP_RTO_MAX_MS */,
	    &ms, &len), 0);
	return ms;
}

static int
min(int a, int b)
{
	return a < b ? a : b;
}

static int
system_rto_max(void)
{
	FILE *f = fopen("/proc/sys/net/ipv4/tcp_rto_max_ms", "r");
	int v = 120000;

	if (f != NULL) {
		ck_assert_int_eq(fscanf(f, "%d", &v), 1);
		fclose(f);
	}
	return v;
}

/* Every data connection has TCP's retransmission timeout bounded: twice
 * the path's first one (rtt + 2 rtt), 3 s at least, so that an RTT sample
 * as long as an idle gap cannot hold a lost segment for a minute. */
START_TEST(test_tcp_rto_bounded)
{
	struct rock_session *s = suspended(64 * 1024);
	int probe = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ms = 0, sys;
	socklen_t len = sizeof(ms);
	int fd, peer, peer2;

	if (getsockopt(probe, IPPROTO_TCP, 44, &ms, &len) != 0) {
		/* Kernels before 6.15: TCP keeps its own bound. */
		fprintf(stderr, "test_tcp_rto_bounded: no TCP_RTO_MAX_MS here\n");
		close(probe);
		return;
	}
	close(probe);
	/* The system's bound (net.ipv4.tcp_rto_max_ms), ours never above. */
	sys = system_rto_max();
	ck_assert_int_eq(ms, sys);
	fd = tcp_pair(&peer);
	ck_assert_int_eq(rock_stream_attach(s, fd), 0);
	ck_assert_int_eq(rto_max_ms(fd), min(3000, sys));
	/* The engine's timers take TCP's RTO as TCP retransmits: bounded. A
	 * gap taken for a round trip: srtt 1.6 s, rttvar 2.5 s. */
	s->rtt_ms = 1600;
	s->rttvar_ms = 2500;
	ck_assert_int_eq(rock_path_rto_ms(s), min(3000, sys));
	s->rtt_ms = 300;
	s->rttvar_ms = 50;
	ck_assert_int_eq(rock_path_rto_ms(s), 500);
	/* A satellite path with queues: 1.5 s round trips. */
	s->rtt_ms = 1500;
	fd = tcp_pair(&peer2);
	ck_assert_int_eq(rock_stream_attach(s, fd), 0);
	ck_assert_int_eq(rto_max_ms(fd), min(2 * (1500 + 3000), sys));
	/* Beyond the system's bound: the system's. */
	s->rtt_ms = 100000;
	rock_path_new_connection(s);
	ck_assert_int_eq(rto_max_ms(fd), sys);
	/* Unknown (a Fast Open accept): the floor, then TCP's first sample
	 * decides (take_rtt, through the liveness check's sample). */
	s->rtt_ms = 0;
	rock_path_new_connection(s);
	ck_assert_int_eq(rto_max_ms(fd), min(3000, sys));
	ck_assert_int_eq(s->rto_bound_rtt, 0);
	close(peer);
	close(peer2);
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
	tcase_add_test(tc, test_send_into_ring_replays);
	tcase_add_test(tc, test_send_from_ring);
	tcase_add_test(tc, test_send_from_offer);
	tcase_add_test(tc, test_count_past_written);
	tcase_add_test(tc, test_direct_release_counts);
	tcase_add_test(tc, test_tcp_rto_bounded);
	suite_add_tcase(su, tc);
	return su;
}
