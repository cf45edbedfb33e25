/* rock-bench.c: throughput, round-trip latency and connect time through rockd, as a rock client and as a plain TCP client (see rock-bench.sh). */
#include "config.h"

/*
 * Usage:
 *   rock-bench throughput rock|plain|plain-nodelay HOST PORT BLOCK TOTAL
 *   rock-bench download   rock|plain|plain-nodelay HOST PORT BLOCK TOTAL
 *   rock-bench latency    rock|plain|plain-nodelay HOST PORT BLOCK N
 *   rock-bench connect    rock|rock-free|plain HOST PORT N
 *   rock-bench sink PORT      backend: reads each connection to EOF, closes
 *   rock-bench echo PORT      backend: echoes each connection, closes on EOF
 *   rock-bench source PORT    backend: reads a request (BLOCK, TOTAL: 64 bits
 *                             each, big endian), writes TOTAL bytes in writes
 *                             of BLOCK bytes, closes
 *   rock-bench freeport       prints a loopback TCP port that was free
 *
 * HOST PORT is rockd's listener; rock runs open a reliable socket with
 * rock_client_open(), plain runs an ordinary TCP connection, which rockd
 * relays, so both measurements include rockd. "plain" leaves the socket
 * options alone (Nagle on), as an unmodified program would; the engine sets
 * TCP_NODELAY on its data connection, and "plain-nodelay" does the same.
 *
 * throughput: TOTAL bytes in writes of BLOCK bytes, then a half-close; the
 *   time runs from the first write to the end of stream that the sink's
 *   close sends back. Plain: write() on a blocking socket. Rock: BLOCK-sized
 *   rock_session_send() calls, 64 KiB of them (at least one) per turn of
 *   the event loop, as an event-driven program sends on each wake-up;
 *   sending stops once rock_session_pending() reaches 512 KiB and resumes
 *   on on_drain.
 *   Prints "throughput MODE BLOCK TOTAL MB_PER_S" (MB = 10^6 bytes).
 * download: the other direction, from the source backend: the request,
 *   then reads of BLOCK bytes (plain: read() on a blocking socket; rock:
 *   as the engine delivers) to the end of stream, which must come after
 *   exactly TOTAL bytes; the time runs from the request to the end.
 *   Prints "download MODE BLOCK TOTAL MB_PER_S".
 * latency: N round trips of BLOCK bytes through the echo backend after 5
 *   unmeasured ones, or as many as fit in 1 s; every echoed byte is checked.
 *   Prints "latency MODE BLOCK TRIPS_DONE MEDIAN_US".
 * connect: N connections; only the opening is timed: socket()+connect(), or
 *   rock_client_open() (probe, handshake, rockd's backend dial). Plain then
 *   close()s; rock shuts down and waits for the clean end before
 *   rock_session_free(), since a rock freed while connected looks to rockd
 *   like a client cut off, and it keeps that session suspended (for days by
 *   default); "rock-free" does just that, rock_session_free() at once.
 *   Prints "connect MODE N MEDIAN_US".
 * forge: N reconnect requests for sessions that do not exist (random ids,
 *   nonces and tags: what a stranger can send), CONC connections at a time;
 *   each reads until the server closes. Prints "forge N ANSWERED
 *   UNANSWERED SECONDS": answered, a refusal came back (signed, by rockd).
 * first: N connections, each timed from socket() to its first 64-byte echo
 *   read back whole (the echo backend), then closed; plain calls only (a
 *   rock under tools/rock). Prints "first N MEDIAN_US".
 * A backend given PORT 0 binds an ephemeral port and prints "port N" first.
 * Errors go to stderr with exit status 1; a run is cut off after 120 s.
 */

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "rock_config.h"
#include "rock_crypto.h"
#include "rock_engine.h"
#include "rock_err.h"
#include "rock_log.h"
#include "rock_wire.h"

#define HIGH_MARK (512 * 1024)	/* stop sending while this much is queued */
#define BURST (64 * 1024)	/* rock: bytes sent per turn of the event loop */
#define SERVE_BUF (256 * 1024)
#define MAX_CLIENTS 1024
#define OPEN_TIMEOUT_MS 10000
#define RUN_LIMIT_S 120
#define WARMUP_TRIPS 5
/* latency: measured round trips stop after this long, even before N */
#define LATENCY_BUDGET_NS (1000ull * 1000 * 1000)

static const char *prog = "rock-bench";

static void die(const char *fmt, ...)
    __attribute__((noreturn, format(printf, 1, 2)));

static void
die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void usage(void) __attribute__((noreturn));

static void
usage(void)
{
	fprintf(stderr,
	    "usage: %s throughput rock|plain|plain-nodelay HOST PORT BLOCK TOTAL\n"
	    "       %s latency rock|plain|plain-nodelay HOST PORT BLOCK N\n"
	    "       %s connect rock|rock-free|plain HOST PORT N\n"
	    "       %s first HOST PORT N\n"
	    "       %s forge HOST PORT N CONC\n"
	    "       %s download rock|plain|plain-nodelay HOST PORT BLOCK TOTAL\n"
	    "       %s sink|echo|source PORT\n"
	    "       %s freeport\n", prog, prog, prog, prog, prog, prog, prog,
	    prog);
	exit(2);
}

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static long long
parse_count(const char *s, const char *what, long long max)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < 1 || v > max)
		die("%s must be an integer from 1 to %lld, got '%s'", what, max, s);
	return v;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Median in microseconds of n durations in nanoseconds (sorts them). */
static double
median_us(uint64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	if (n % 2)
		return (double)v[n / 2] / 1e3;
	return ((double)v[n / 2 - 1] + (double)v[n / 2]) / 2e3;
}

static void
resolve(const char *host, const char *port, struct sockaddr_storage *ss,
    socklen_t *len)
{
	struct addrinfo hints, *res;
	int g;

	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	if ((g = getaddrinfo(host, port, &hints, &res)) != 0)
		die("%s %s: %s", host, port, gai_strerror(g));
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
}

static void
set_nodelay(int fd)
{
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
		die("TCP_NODELAY: %s", strerror(errno));
}

static void
write_all(int fd, const uint8_t *p, size_t n)
{
	ssize_t w;

	while (n > 0) {
		w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			die("write: %s", strerror(errno));
		p += w;
		n -= (size_t)w;
	}
}

static void
fill_pattern(uint8_t *buf, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		buf[i] = (uint8_t)(i * 7 + 1);
}

/* ---- backends: one thread, poll() over every connection */

static int
listen_loopback(const char *port_arg, int print)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		die("socket: %s", strerror(errno));
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons((uint16_t)(strcmp(port_arg, "0") == 0 ? 0 :
	    parse_count(port_arg, "PORT", 65535)));
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0)
		die("bind 127.0.0.1:%s: %s", port_arg, strerror(errno));
	if (listen(fd, 1024) != 0)
		die("listen: %s", strerror(errno));
	if (getsockname(fd, (struct sockaddr *)&sin, &len) != 0)
		die("getsockname: %s", strerror(errno));
	if (print) {
		printf("port %u\n", (unsigned)ntohs(sin.sin_port));
		fflush(stdout);
	}
	return fd;
}

enum serve_kind { SERVE_SINK, SERVE_ECHO, SERVE_SOURCE };

static uint64_t
get_be64(const uint8_t *p)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static void
put_be64(uint8_t *p, uint64_t v)
{
	int i;

	for (i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

/* The source's answer to one connection, written while the others wait:
 * the runs it serves come one at a time. A request cut short or out of
 * bounds gets no bytes. */
static void
source_one(int fd, uint8_t *buf)
{
	uint8_t req[16];
	uint64_t block, left;

	if (recv(fd, req, sizeof(req), MSG_WAITALL) != (ssize_t)sizeof(req))
		return;
	block = get_be64(req);
	left = get_be64(req + 8);
	if (block == 0 || block > SERVE_BUF)
		return;
	fill_pattern(buf, (size_t)block);
	while (left > 0) {
		size_t n = left < block ? (size_t)left : (size_t)block;

		write_all(fd, buf, n);
		left -= n;
	}
}

static void serve(const char *port_arg, enum serve_kind kind)
    __attribute__((noreturn));

static void
serve(const char *port_arg, enum serve_kind kind)
{
	int echo = kind == SERVE_ECHO;

	struct pollfd *p = calloc(MAX_CLIENTS + 1, sizeof(*p));
	uint8_t *buf = malloc(SERVE_BUF);
	nfds_t n = 1, i;

	if (p == NULL || buf == NULL)
		die("out of memory");
	p[0].fd = listen_loopback(port_arg, strcmp(port_arg, "0") == 0);
	p[0].events = POLLIN;
	for (;;) {
		if (poll(p, n, -1) < 0) {
			if (errno == EINTR)
				continue;
			die("poll: %s", strerror(errno));
		}
		for (i = 1; i < n; i++) {
			ssize_t r;

			if (p[i].revents == 0)
				continue;
			r = read(p[i].fd, buf, SERVE_BUF);
			if (r < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (r > 0) {
				if (echo)
					write_all(p[i].fd, buf, (size_t)r);
				continue;
			}
			/* end of stream or an error: done with this one */
			close(p[i].fd);
			p[i] = p[--n];
			i--;
		}
		if (p[0].revents & POLLIN) {
			int c = accept4(p[0].fd, NULL, NULL, SOCK_CLOEXEC);

			if (c < 0)
				continue;
			if (n > MAX_CLIENTS) {
				close(c);
				continue;
			}
			if (echo)
				set_nodelay(c);
			if (kind == SERVE_SOURCE) {
				source_one(c, buf);
				close(c);
				continue;
			}
			p[n].fd = c;
			p[n].events = POLLIN;
			p[n].revents = 0;
			n++;
		}
	}
}

static void
freeport(void)
{
	int fd = listen_loopback("0", 1);

	close(fd);
}

/* ---- the rock client */

struct rb {
	struct event_base *base;
	struct rock_engine *engine;
	struct rock_config logcfg;
	struct rock_log log;
	struct rock_session *s;
	const uint8_t *buf;
	size_t block;
	uint64_t total, sent, got;
	uint64_t t_eof;
	int blocked, shut, eof, closed, close_err;
	const uint8_t *expect;	/* latency: what the echo must bring back */
};

/* One burst of BLOCK-sized sends, as an event-driven program writes on
 * each wake-up; it stops early when the engine queues HIGH_MARK bytes, and
 * on_drain (queue down to the engine's low mark) lets it go on. */
static void
pump(struct rb *b)
{
	uint64_t burst = b->block > BURST ? b->block : BURST;
	uint64_t stop = b->sent + burst;

	while (b->sent < b->total && b->sent < stop && !b->blocked &&
	    !b->closed) {
		size_t n = b->total - b->sent < b->block ?
		    (size_t)(b->total - b->sent) : b->block;
		int r = rock_session_send(b->s, b->buf, n);

		if (r != 0)
			die("rock_session_send: %s", rock_err(r));
		b->sent += n;
		if (rock_session_pending(b->s) >= HIGH_MARK)
			b->blocked = 1;
	}
	if (b->sent == b->total && !b->shut && !b->closed) {
		b->shut = 1;
		rock_session_shutdown(b->s);
	}
}

static void
rb_data(struct rock_session *s, const uint8_t *p, size_t n, void *arg)
{
	struct rb *b = arg;

	(void)s;
	if (b->expect != NULL) {
		if (b->got + n > b->block ||
		    memcmp(p, b->expect + b->got, n) != 0)
			die("the echo brought back other bytes");
	}
	b->got += n;
}

static void
rb_eof(struct rock_session *s, void *arg)
{
	struct rb *b = arg;

	(void)s;
	b->t_eof = now_ns();
	b->eof = 1;
}

static void
rb_drain(struct rock_session *s, void *arg)
{
	struct rb *b = arg;

	(void)s;
	b->blocked = 0;
}

static void
rb_state(struct rock_session *s, enum rock_state from, enum rock_state to,
    void *arg)
{
	(void)arg;
	if (to == ROCK_ST_SUSPENDED)
		fprintf(stderr, "%s: warning: rock %s %s -> %s during the run\n",
		    prog, rock_session_name(s), rock_state_name(from),
		    rock_state_name(to));
}

static void
rb_closed(struct rock_session *s, int err, void *arg)
{
	struct rb *b = arg;

	(void)s;
	b->closed = 1;
	b->close_err = err;
}

static const struct rock_session_cbs rb_cbs = {
	rb_data, rb_eof, rb_drain, rb_state, rb_closed, NULL
};

static void
rb_setup(struct rb *b)
{
	int r;

	memset(b, 0, sizeof(*b));
	if ((b->base = event_base_new()) == NULL)
		die("event_base_new failed");
	rock_config_defaults(&b->logcfg);
	b->logcfg.log_sink = ROCK_LOG_STDERR;
	rock_log_configure(&b->log, &b->logcfg, "rock-bench");
	if ((r = rock_engine_new(&b->engine, b->base, &b->log, NULL, NULL, 0)) != 0)
		die("rock_engine_new: %s", rock_err(r));
}

static void
rb_open(struct rb *b, const struct sockaddr_storage *ss, socklen_t len)
{
	int r = rock_client_open(b->engine, (const struct sockaddr *)ss, len,
	    OPEN_TIMEOUT_MS, &rb_cbs, b, &b->s);

	if (r != 0)
		die("rock_client_open: %s", r == ROCK_ERR_SYSTEM ?
		    strerror(errno) : rock_err(r));
	b->closed = b->close_err = b->eof = b->shut = 0;
}

static void
on_deadline(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	*(int *)arg = 1;
}

/* Run the loop until the session has closed, or for at most ms. */
static void
rb_wait_closed(struct rb *b, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	int expired = 0;
	struct event *t = evtimer_new(b->base, on_deadline, &expired);

	if (t == NULL || evtimer_add(t, &tv) != 0)
		die("cannot arm a timer");
	while (!b->closed && !expired)
		event_base_loop(b->base, EVLOOP_ONCE);
	event_free(t);
}

static void
rb_finish(struct rb *b)
{
	if (b->s != NULL && !b->closed) {
		if (!b->shut)
			rock_session_shutdown(b->s);
		rb_wait_closed(b, 3000);
		if (!b->closed)
			fprintf(stderr, "%s: warning: the rock did not close "
			    "within 3 s\n", prog);
	}
	if (b->closed && b->close_err != 0)
		fprintf(stderr, "%s: warning: the rock ended with %s\n", prog,
		    rock_err(b->close_err));
	if (b->s != NULL)
		rock_session_free(b->s);
	b->s = NULL;
	rock_engine_free(b->engine);
	event_base_free(b->base);
}

/* ---- plain TCP */

static int
plain_connect(const struct sockaddr_storage *ss, socklen_t len)
{
	int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		die("socket: %s", strerror(errno));
	if (connect(fd, (const struct sockaddr *)ss, len) != 0)
		die("connect: %s", strerror(errno));
	return fd;
}

/* ---- the measurements */

enum kind { K_ROCK, K_PLAIN, K_PLAIN_NODELAY };

static enum kind
parse_kind(const char *s, int nodelay_ok)
{
	if (strcmp(s, "rock") == 0)
		return K_ROCK;
	if (strcmp(s, "plain") == 0)
		return K_PLAIN;
	if (nodelay_ok && strcmp(s, "plain-nodelay") == 0)
		return K_PLAIN_NODELAY;
	usage();
}

static void
throughput(enum kind k, const char *mode, const struct sockaddr_storage *ss,
    socklen_t len, size_t block, uint64_t total)
{
	uint8_t *buf = malloc(block);
	uint64_t t0, t1;

	if (buf == NULL)
		die("out of memory");
	fill_pattern(buf, block);
	if (k == K_ROCK) {
		struct rb b;

		rb_setup(&b);
		rb_open(&b, ss, len);
		b.buf = buf;
		b.block = block;
		b.total = total;
		t0 = now_ns();
		while (!b.eof && !b.closed) {
			if (b.sent < b.total && !b.blocked) {
				pump(&b);
				event_base_loop(b.base, EVLOOP_NONBLOCK);
			} else {
				event_base_loop(b.base, EVLOOP_ONCE);
			}
		}
		if (!b.eof)
			die("the rock closed (%s) before the sink's end of stream",
			    rock_err(b.close_err));
		t1 = b.t_eof;
		if (b.sent != total)
			die("sent %llu of %llu bytes", (unsigned long long)b.sent,
			    (unsigned long long)total);
		rb_finish(&b);
	} else {
		int fd = plain_connect(ss, len);
		uint64_t left = total;
		char c;
		ssize_t r;

		if (k == K_PLAIN_NODELAY)
			set_nodelay(fd);
		t0 = now_ns();
		while (left > 0) {
			size_t n = left < block ? (size_t)left : block;

			write_all(fd, buf, n);
			left -= n;
		}
		if (shutdown(fd, SHUT_WR) != 0)
			die("shutdown: %s", strerror(errno));
		while ((r = read(fd, &c, 1)) != 0)
			if (r < 0 && errno != EINTR)
				die("read: %s", strerror(errno));
		t1 = now_ns();
		close(fd);
	}
	printf("throughput %s %zu %llu %.2f\n", mode, block,
	    (unsigned long long)total, (double)total * 1e3 / (double)(t1 - t0));
	free(buf);
}

static void
download(enum kind k, const char *mode, const struct sockaddr_storage *ss,
    socklen_t len, size_t block, uint64_t total)
{
	uint8_t *buf = malloc(block), req[16];
	uint64_t t0, t1, got = 0;

	if (buf == NULL)
		die("out of memory");
	put_be64(req, block);
	put_be64(req + 8, total);
	if (k == K_ROCK) {
		struct rb b;
		int r;

		rb_setup(&b);
		rb_open(&b, ss, len);
		t0 = now_ns();
		if ((r = rock_session_send(b.s, req, sizeof(req))) != 0)
			die("rock_session_send: %s", rock_err(r));
		while (!b.eof && !b.closed)
			event_base_loop(b.base, EVLOOP_ONCE);
		if (!b.eof)
			die("the rock closed (%s) before the source's end of stream",
			    rock_err(b.close_err));
		t1 = b.t_eof;
		got = b.got;
		rb_finish(&b);
	} else {
		int fd = plain_connect(ss, len);
		ssize_t r;

		if (k == K_PLAIN_NODELAY)
			set_nodelay(fd);
		t0 = now_ns();
		write_all(fd, req, sizeof(req));
		while ((r = read(fd, buf, block)) != 0) {
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0)
				die("read: %s", strerror(errno));
			got += (uint64_t)r;
		}
		t1 = now_ns();
		close(fd);
	}
	if (got != total)
		die("the source sent %llu of %llu bytes", (unsigned long long)got,
		    (unsigned long long)total);
	printf("download %s %zu %llu %.2f\n", mode, block,
	    (unsigned long long)total, (double)total * 1e3 / (double)(t1 - t0));
	free(buf);
}

static void
latency(enum kind k, const char *mode, const struct sockaddr_storage *ss,
    socklen_t len, size_t block, size_t n)
{
	uint8_t *buf = malloc(block), *in = malloc(block);
	uint64_t *rtt = calloc(n, sizeof(*rtt)), t0, end = 0;
	size_t i, trips = n + WARMUP_TRIPS, done = 0;

	if (buf == NULL || in == NULL || rtt == NULL)
		die("out of memory");
	fill_pattern(buf, block);
	if (k == K_ROCK) {
		struct rb b;
		int r;

		rb_setup(&b);
		rb_open(&b, ss, len);
		b.block = block;
		b.expect = buf;
		for (i = 0; i < trips; i++) {
			b.got = 0;
			t0 = now_ns();
			if ((r = rock_session_send(b.s, buf, block)) != 0)
				die("rock_session_send: %s", rock_err(r));
			while (b.got < block && !b.closed && !b.eof)
				event_base_loop(b.base, EVLOOP_ONCE);
			if (b.got < block)
				die("the echo ended early");
			if (i == WARMUP_TRIPS - 1)
				end = now_ns() + LATENCY_BUDGET_NS;
			if (i >= WARMUP_TRIPS) {
				rtt[done++] = now_ns() - t0;
				if (now_ns() >= end)
					break;
			}
		}
		b.expect = NULL;
		rb_finish(&b);
	} else {
		int fd = plain_connect(ss, len);

		if (k == K_PLAIN_NODELAY)
			set_nodelay(fd);
		for (i = 0; i < trips; i++) {
			size_t got = 0;
			ssize_t r;

			t0 = now_ns();
			write_all(fd, buf, block);
			while (got < block) {
				r = read(fd, in + got, block - got);
				if (r < 0 && errno == EINTR)
					continue;
				if (r <= 0)
					die("read: %s", r == 0 ? "end of stream" :
					    strerror(errno));
				got += (size_t)r;
			}
			if (i == WARMUP_TRIPS - 1)
				end = now_ns() + LATENCY_BUDGET_NS;
			if (i >= WARMUP_TRIPS)
				rtt[done++] = now_ns() - t0;
			if (memcmp(in, buf, block) != 0)
				die("the echo brought back other bytes");
			if (done > 0 && now_ns() >= end)
				break;
		}
		close(fd);
	}
	printf("latency %s %zu %zu %.1f\n", mode, block, done,
	    median_us(rtt, done));
	free(rtt);
	free(in);
	free(buf);
}

static void
connect_times(enum kind k, const char *mode, const struct sockaddr_storage *ss,
    socklen_t len, size_t n, int abrupt)
{
	uint64_t *t = calloc(n, sizeof(*t)), t0;
	size_t i;

	if (t == NULL)
		die("out of memory");
	if (k == K_ROCK) {
		struct rb b;

		rb_setup(&b);
		for (i = 0; i < n; i++) {
			t0 = now_ns();
			rb_open(&b, ss, len);
			t[i] = now_ns() - t0;
			if (abrupt) {
				rock_session_free(b.s);
				b.s = NULL;
				event_base_loop(b.base, EVLOOP_NONBLOCK);
				continue;
			}
			/* A clean end, untimed: a rock freed while connected is,
			 * to rockd, a client cut off, kept suspended for days. */
			b.shut = 1;
			rock_session_shutdown(b.s);
			rb_wait_closed(&b, 3000);
			if (!b.closed)
				die("a rock did not close within 3 s");
			if (b.close_err != 0)
				die("a rock ended with %s", rock_err(b.close_err));
			rock_session_free(b.s);
			b.s = NULL;
		}
		rb_finish(&b);
	} else {
		for (i = 0; i < n; i++) {
			int fd;

			t0 = now_ns();
			fd = plain_connect(ss, len);
			t[i] = now_ns() - t0;
			close(fd);
		}
	}
	printf("connect %s %zu %.1f\n", mode, n, median_us(t, n));
	free(t);
}

static void
first_echo_times(const struct sockaddr_storage *ss, socklen_t len, size_t n)
{
	uint64_t *t = calloc(n, sizeof(*t)), t0;
	uint8_t out[64], in[64];
	size_t i, got;
	ssize_t r;

	if (t == NULL)
		die("out of memory");
	memset(out, 'f', sizeof(out));
	for (i = 0; i < n; i++) {
		int fd;

		t0 = now_ns();
		fd = plain_connect(ss, len);
		if (write(fd, out, sizeof(out)) != (ssize_t)sizeof(out))
			die("write: %s", strerror(errno));
		for (got = 0; got < sizeof(in); got += (size_t)r)
			if ((r = read(fd, in + got, sizeof(in) - got)) <= 0)
				die("read: %s", r == 0 ? "end of stream" :
				    strerror(errno));
		t[i] = now_ns() - t0;
		if (memcmp(in, out, sizeof(in)) != 0)
			die("the echo differs from what was sent");
		close(fd);
	}
	printf("first %zu %.1f\n", n, median_us(t, n));
	free(t);
}

/* A forged RECONNECT_REQUEST on a new non-blocking connection. */
static int
forge_one(const struct sockaddr_storage *ss, socklen_t len)
{
	struct rock_reconnect_req rq;
	uint8_t out[ROCK_RECONNECT_REQ_LEN];
	int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		die("socket: %s", strerror(errno));
	if (connect(fd, (const struct sockaddr *)ss, len) != 0)
		die("connect: %s", strerror(errno));
	memset(&rq, 0, sizeof(rq));
	rq.version = ROCK_VERSION;
	rock_random(rq.id, sizeof(rq.id));
	rock_random(rq.nonce, sizeof(rq.nonce));
	rock_random(rq.tag, sizeof(rq.tag));
	rq.attempt = rq.since = 1;
	rock_reconnect_req_encode(&rq, out);
	if (write(fd, out, sizeof(out)) != (ssize_t)sizeof(out))
		die("write: %s", strerror(errno));
	if (fcntl(fd, F_SETFL, O_NONBLOCK) != 0)
		die("fcntl: %s", strerror(errno));
	return fd;
}

static void
forge(const struct sockaddr_storage *ss, socklen_t len, size_t n, size_t conc)
{
	struct pollfd *p = calloc(conc, sizeof(*p));
	char *got = calloc(conc, 1), buf[512];
	size_t started = 0, done = 0, answered = 0, i;
	uint64_t t0 = now_ns();
	ssize_t r;

	if (p == NULL || got == NULL)
		die("out of memory");
	for (i = 0; i < conc; i++)
		p[i].fd = -1;
	while (done < n) {
		for (i = 0; i < conc && started < n; i++)
			if (p[i].fd < 0) {
				p[i] = (struct pollfd){ forge_one(ss, len), POLLIN, 0 };
				got[i] = 0;
				started++;
			}
		if (poll(p, conc, 10000) <= 0)
			die("poll: %s", errno != 0 ? strerror(errno) : "no answer in 10 s");
		for (i = 0; i < conc; i++) {
			if (p[i].fd < 0 || p[i].revents == 0)
				continue;
			while ((r = read(p[i].fd, buf, sizeof(buf))) > 0)
				got[i] = 1;
			if (r < 0 && errno == EAGAIN)
				continue;
			answered += got[i] != 0;
			close(p[i].fd);
			p[i].fd = -1;
			done++;
		}
	}
	printf("forge %zu %zu %zu %.2f\n", n, answered, n - answered,
	    (double)(now_ns() - t0) / 1e9);
	free(p);
	free(got);
}

int
main(int argc, char **argv)
{
	struct sockaddr_storage ss;
	socklen_t len;
	const char *cmd;
	enum kind k;

	if (argc < 2)
		usage();
	cmd = argv[1];
	signal(SIGPIPE, SIG_IGN);
	alarm(RUN_LIMIT_S);	/* a hung run ends, and the script sees it */
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (strcmp(cmd, "sink") == 0 || strcmp(cmd, "echo") == 0 ||
	    strcmp(cmd, "source") == 0) {
		if (argc != 3)
			usage();
		alarm(0);
		serve(argv[2], cmd[0] == 'e' ? SERVE_ECHO : cmd[1] == 'o' ?
		    SERVE_SOURCE : SERVE_SINK);
	}
	if (strcmp(cmd, "freeport") == 0) {
		if (argc != 2)
			usage();
		freeport();
		return 0;
	}
	if (strcmp(cmd, "throughput") == 0 || strcmp(cmd, "latency") == 0 ||
	    strcmp(cmd, "download") == 0) {
		long long block, count;

		if (argc != 7)
			usage();
		k = parse_kind(argv[2], 1);
		resolve(argv[3], argv[4], &ss, &len);
		block = parse_count(argv[5], "BLOCK", 64LL * 1024 * 1024);
		if (cmd[0] == 't' || cmd[0] == 'd') {
			count = parse_count(argv[6], "TOTAL", 1LL << 40);
			(cmd[0] == 't' ? throughput : download)(k, argv[2], &ss,
			    len, (size_t)block, (uint64_t)count);
		} else {
			count = parse_count(argv[6], "N", 10000000);
			latency(k, argv[2], &ss, len, (size_t)block,
			    (size_t)count);
		}
		return 0;
	}
	if (strcmp(cmd, "forge") == 0) {
		if (argc != 6)
			usage();
		resolve(argv[2], argv[3], &ss, &len);
		forge(&ss, len, (size_t)parse_count(argv[4], "N", 10000000),
		    (size_t)parse_count(argv[5], "CONC", 10000));
		return 0;
	}
	if (strcmp(cmd, "first") == 0) {
		if (argc != 5)
			usage();
		resolve(argv[2], argv[3], &ss, &len);
		first_echo_times(&ss, len, (size_t)parse_count(argv[4], "N",
		    1000000));
		return 0;
	}
	if (strcmp(cmd, "connect") == 0) {
		if (argc != 6)
			usage();
		k = strcmp(argv[2], "rock-free") == 0 ? K_ROCK :
		    parse_kind(argv[2], 0);
		resolve(argv[3], argv[4], &ss, &len);
		connect_times(k, argv[2], &ss, len,
		    (size_t)parse_count(argv[5], "N", 1000000),
		    strcmp(argv[2], "rock-free") == 0);
		return 0;
	}
	usage();
}
