/* rock-hostile.c: hostile rock clients: each subcommand attacks rockd, checks its answer and prints one result line. */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "rock_crypto.h"
#include "rock_wire.h"

#define HELLO_TOTAL (ROCK_ANNOUNCE_LEN + ROCK_CLIENT_HELLO_LEN)
#define HALF_HELLO (ROCK_ANNOUNCE_LEN + ROCK_CLIENT_HELLO_LEN / 2)
#define IO_TIMEOUT_S 5
#define ECHO_LEN 4096
#define HB_PACKET (ROCK_HB_HEADER_LEN + ROCK_HB_RECORD_LEN)
#define HB_TAG_AT (ROCK_HB_HEADER_LEN + ROCK_HB_RECORD_LEN - ROCK_TAG_LEN)

struct target {
	struct sockaddr_storage addr;
	socklen_t len;
};

/* A rock session this tool opened itself, with what it knows of it. */
struct session {
	const struct target *t;
	uint8_t ann[ROCK_ANNOUNCE_LEN];
	uint8_t id[ROCK_ID_LEN];
	uint8_t ident[ROCK_IDENT_LEN];	/* the server's key, from its hello */
	char name[9];
	struct rock_keys keys;
	uint16_t udp_port;
	uint32_t claim_rcvbuf;		/* SO_RCVBUF told in the hello; 0: the real one */
	int fd;				/* the current data connection */
	int udp;
	uint64_t sent, received;	/* application bytes, each way */
	uint32_t attempts;		/* reconnect attempts numbered so far */
};

/* One reconnect attempt: what was sent and what came back. */
struct attempt {
	int fd;
	uint8_t nonce[ROCK_NONCE_LEN];
	uint8_t req[ROCK_RECONNECT_REQ_LEN];
	struct rock_reconnect_ok ok;
};

static const char *step = "";		/* the part of an attack running now */
static int reported;			/* the result line is out */
static char why[512];			/* the first failure */
static char last_error[ROCK_ERROR_MAX_TEXT + 1];	/* text of the last ERROR */

static int failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void report(const char *cmd, int r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Remembers the first failure (with the step it happened in); returns -1. */
static int
failf(const char *fmt, ...)
{
	va_list ap;
	int n;

	if (why[0] != '\0')
		return -1;
	n = snprintf(why, sizeof(why), "%s%s", step, step[0] ? ": " : "");
	if (n < 0 || (size_t)n >= sizeof(why))
		n = 0;
	va_start(ap, fmt);
	vsnprintf(why + n, sizeof(why) - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

/* The one result line: what was observed, or the first failure. */
static void
report(const char *cmd, int r, const char *fmt, ...)
{
	va_list ap;

	reported = 1;
	printf("%s: ", cmd);
	if (r != 0) {
		printf("FAILED: %s\n", why[0] ? why : "unknown failure");
	} else {
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
		printf("\n");
	}
	fflush(stdout);
}

static const char *
code_name(unsigned code)
{
	static const char *const names[] = { "?", "STALE", "VERSION", "BUSY",
	    "UNKNOWN", "AUTH", "BACKEND", "PROTOCOL", "SUPERSEDED" };

	return code < sizeof(names) / sizeof(names[0]) ? names[code] : "?";
}

static long long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int
resolve(const char *host, const char *port, struct target *t)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res;
	int r = getaddrinfo(host, port, &hints, &res);

	if (r != 0) {
		fprintf(stderr, "rock-hostile: %s %s: %s\n", host, port,
		    gai_strerror(r));
		return -1;
	}
	memcpy(&t->addr, res->ai_addr, res->ai_addrlen);
	t->len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

static void
set_timeout(int fd, int seconds)
{
	struct timeval tv = { seconds, 0 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* A blocking TCP connection with I/O timeouts; -1 and errno on failure. */
static int
dial(const struct target *t)
{
	int fd = socket(t->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0), err;

	if (fd < 0)
		return -1;
	set_timeout(fd, IO_TIMEOUT_S);
	if (connect(fd, (const struct sockaddr *)&t->addr, t->len) != 0) {
		err = errno;
		close(fd);
		errno = err;
		return -1;
	}
	return fd;
}

static int
send_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;
	ssize_t w;

	while (n > 0) {
		w = send(fd, b, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return failf("send: %s", strerror(errno));
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Reads until n bytes or end of file: the count, or -1 (errno; EAGAIN is
 * the I/O timeout). */
static ssize_t
recv_full(int fd, void *p, size_t n)
{
	uint8_t *b = p;
	size_t have = 0;
	ssize_t got;

	while (have < n) {
		got = recv(fd, b + have, n - have, 0);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return -1;
		if (got == 0)
			break;
		have += (size_t)got;
	}
	return (ssize_t)have;
}

static const char *
recv_error(void)
{
	return errno == EAGAIN ? "no answer within the timeout" : strerror(errno);
}

/* The server must close: end of file, nothing more. */
static int
expect_eof(int fd, const char *after)
{
	uint8_t b;
	ssize_t n;

	do
		n = recv(fd, &b, 1, 0);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		return 0;
	if (n > 0)
		return failf("byte %#x after %s, not end of file", b, after);
	return failf("%s after %s, not end of file", recv_error(), after);
}

/* A replaced data connection is reset, never ended: an end of file there
 * would read as the peer closing its stream. */
static int
expect_reset(int fd, const char *after)
{
	uint8_t b;
	ssize_t n;

	do
		n = recv(fd, &b, 1, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == ECONNRESET)
		return 0;
	if (n == 0)
		return failf("end of file after %s, not a reset", after);
	if (n > 0)
		return failf("byte %#x after %s, not a reset", b, after);
	return failf("%s after %s, not a reset", recv_error(), after);
}

/* The answer must be ERROR `code`, then end of file; its text kept. With
 * ident, it must be signed by that key over what we sent (sent). */
static int
expect_error(int fd, uint8_t code, const uint8_t *ident, const uint8_t *sent,
    size_t nsent)
{
	uint8_t buf[ROCK_ERROR_MAX_LEN];
	struct rock_error_msg em;
	size_t used;
	ssize_t n = recv_full(fd, buf, 3);

	if (n < 0)
		return failf("expected ERROR %s: %s", code_name(code), recv_error());
	if (n < 3)
		return failf("expected ERROR %s, got end of file after %zd bytes",
		    code_name(code), n);
	if (buf[0] != ROCK_MSG_ERROR || buf[2] > ROCK_ERROR_MAX_TEXT)
		return failf("expected ERROR %s, got message type %#x",
		    code_name(code), buf[0]);
	if (recv_full(fd, buf + 3, buf[2] + ROCK_SIG_LEN) !=
	    buf[2] + ROCK_SIG_LEN ||
	    rock_error_decode(&em, buf, 3 + (size_t)buf[2] + ROCK_SIG_LEN,
	    &used) != 0)
		return failf("truncated ERROR message");
	if (ident != NULL && rock_answer_verify(em.sig, ident, ROCK_ANSWER_ERROR,
	    sent, nsent, buf, used - ROCK_SIG_LEN) != 0)
		return failf("ERROR %s not signed by the server's key",
		    code_name(em.code));
	if (em.code != code)
		return failf("expected ERROR %s, got ERROR %s (%u) \"%s\"",
		    code_name(code), code_name(em.code), em.code, em.text);
	snprintf(last_error, sizeof(last_error), "%s", em.text);
	return expect_eof(fd, "the ERROR");
}

/* EDP probe: the announcement, then end of file. */
static int
probe(const struct target *t, uint8_t ann[ROCK_ANNOUNCE_LEN])
{
	struct rock_announce a;
	int fd = dial(t), r;
	ssize_t n;

	if (fd < 0)
		return failf("probe: connect: %s", strerror(errno));
	shutdown(fd, SHUT_WR);
	n = recv_full(fd, ann, ROCK_ANNOUNCE_LEN);
	if (n == ROCK_ANNOUNCE_LEN)
		r = expect_eof(fd, "the announcement");
	else if (n < 0)
		r = failf("probe: %s", recv_error());
	else
		r = failf("probe: %zd bytes, not a 1024-byte announcement", n);
	close(fd);
	if (r == 0 && rock_announce_decode(&a, ann) != 0)
		r = failf("probe: the 1024 bytes are not an announcement");
	return r;
}

/* After an attack: rockd answers a probe with the same announcement, so
 * it is alive and is the same process. */
static int
still_serving(const struct target *t, const uint8_t ann[ROCK_ANNOUNCE_LEN])
{
	uint8_t again[ROCK_ANNOUNCE_LEN];

	step = "afterwards";
	if (probe(t, again) != 0)
		return -1;
	if (memcmp(again, ann, sizeof(again)) != 0)
		return failf("the announcement changed: rockd restarted?");
	return 0;
}

/* The announcement and a valid CLIENT_HELLO with our socket's buffers
 * (or a claimed receive buffer, when not 0). */
static void
hello_claim(uint8_t out[HELLO_TOTAL], const uint8_t ann[ROCK_ANNOUNCE_LEN],
    const struct rock_keypair *kp, int fd, uint32_t claim_rcvbuf)
{
	struct rock_client_hello ch;
	int rcv = 0, snd = 0;
	socklen_t len = sizeof(rcv);

	getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, &len);
	len = sizeof(snd);
	getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &snd, &len);
	memset(&ch, 0, sizeof(ch));
	ch.version = ROCK_VERSION;
	ch.features = ROCK_FEAT_ALL;
	memcpy(ch.pk, kp->pk, ROCK_KEY_LEN);
	rock_random(ch.nonce, ROCK_NONCE_LEN);
	ch.rcvbuf = claim_rcvbuf != 0 ? claim_rcvbuf : (uint32_t)rcv;
	ch.sndbuf = (uint32_t)snd;
	memcpy(out, ann, ROCK_ANNOUNCE_LEN);
	rock_client_hello_encode(&ch, out + ROCK_ANNOUNCE_LEN);
}

static void
hello_bytes(uint8_t out[HELLO_TOTAL], const uint8_t ann[ROCK_ANNOUNCE_LEN],
    const struct rock_keypair *kp, int fd)
{
	hello_claim(out, ann, kp, fd, 0);
}

/* A new data connection carrying `out`; the server's answer must be
 * ERROR `code`. */
static int
send_expect_error(const struct target *t, const uint8_t *out, size_t n,
    uint8_t code)
{
	int fd = dial(t), r;

	if (fd < 0)
		return failf("connect: %s", strerror(errno));
	r = send_all(fd, out, n);
	if (r == 0)
		r = expect_error(fd, code, NULL, NULL, 0);
	close(fd);
	return r;
}

/* ---- garbage, stale, truncated */

static int
cmd_garbage(const struct target *t)
{
	uint8_t out[HELLO_TOTAL];
	int r;

	step = "garbage";
	if (probe(t, out) != 0)
		return -1;
	rock_random(out + ROCK_ANNOUNCE_LEN, ROCK_CLIENT_HELLO_LEN);
	out[ROCK_ANNOUNCE_LEN] = 0xee;		/* no such message type */
	r = send_expect_error(t, out, sizeof(out), ROCK_WERR_PROTOCOL);
	if (r == 0)
		r = still_serving(t, out);
	report("garbage", r, "announcement + 62 bytes of garbage: ERROR PROTOCOL "
	    "\"%s\", then end of file; rockd still announces", last_error);
	return r;
}

static int
cmd_stale(const struct target *t)
{
	uint8_t ann[ROCK_ANNOUNCE_LEN], out[HELLO_TOTAL];
	struct rock_keypair kp;
	int fd, r;

	step = "stale";
	if (probe(t, ann) != 0)
		return -1;
	if ((fd = dial(t)) < 0)
		return failf("connect: %s", strerror(errno));
	rock_keypair_new(&kp);
	hello_bytes(out, ann, &kp, fd);
	rock_keypair_wipe(&kp);
	out[ROCK_MAGIC_LEN + 4 + 500] ^= 0x5a;	/* the random part */
	r = send_all(fd, out, sizeof(out));
	if (r == 0)
		r = expect_error(fd, ROCK_WERR_STALE, NULL, NULL, 0);
	close(fd);
	if (r == 0)
		r = still_serving(t, ann);
	report("stale", r, "altered announcement + valid hello: ERROR STALE "
	    "\"%s\", then end of file; rockd still announces", last_error);
	return r;
}

/* The announcement and half a hello on a new connection. */
static int
half_hello(const struct target *t, const uint8_t ann[ROCK_ANNOUNCE_LEN])
{
	uint8_t out[HELLO_TOTAL];
	struct rock_keypair kp;
	int fd;

	if ((fd = dial(t)) < 0)
		return failf("connect: %s", strerror(errno));
	rock_keypair_new(&kp);
	hello_bytes(out, ann, &kp, fd);
	rock_keypair_wipe(&kp);
	if (send_all(fd, out, HALF_HELLO) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int
cmd_truncated(const struct target *t)
{
	uint8_t ann[ROCK_ANNOUNCE_LEN];
	int fd, r;

	step = "truncated";
	if (probe(t, ann) != 0 || (fd = half_hello(t, ann)) < 0)
		return -1;
	shutdown(fd, SHUT_WR);
	r = expect_eof(fd, "half a hello and our end of stream");
	close(fd);
	if (r == 0)
		r = still_serving(t, ann);
	report("truncated", r, "announcement + %d of %d hello bytes, then end of "
	    "stream: closed without a reply; rockd still announces",
	    HALF_HELLO - ROCK_ANNOUNCE_LEN, ROCK_CLIENT_HELLO_LEN);
	return r;
}

/* Half a hello, then silence: rockd must close it after its handshake
 * timeout (10 s by default; within min..max ms). */
static int
cmd_truncated_wait(const struct target *t, long min_ms, long max_ms)
{
	uint8_t ann[ROCK_ANNOUNCE_LEN];
	struct pollfd p;
	long long t0, took = 0;
	int fd, r;

	step = "truncated-wait";
	if (probe(t, ann) != 0 || (fd = half_hello(t, ann)) < 0)
		return -1;
	t0 = now_ms();
	p.fd = fd;
	p.events = POLLIN;
	r = poll(&p, 1, (int)max_ms + 5000);
	took = now_ms() - t0;
	if (r <= 0)
		r = failf("still open after %lld ms", took);
	else if ((r = expect_eof(fd, "half a hello")) == 0 &&
	    (took < min_ms || took > max_ms))
		r = failf("closed after %lld ms, not within %ld..%ld ms", took,
		    min_ms, max_ms);
	close(fd);
	if (r == 0)
		r = still_serving(t, ann);
	report("truncated-wait", r, "announcement + half a hello, then silence: "
	    "closed without a reply after %lld ms; rockd still announces", took);
	return r;
}

/* ---- session: a real rock of our own, then attacks on it */

/* Signed by the key it names over our hello and the TICKET after it
 * (taken, not used): that key is the session's signer of refusals from
 * now on. */
static int
read_server_hello(struct session *ss, const uint8_t *hello,
    struct rock_server_hello *sh,
    uint8_t in[ROCK_SERVER_HELLO_LEN + ROCK_TICKET_MSG_LEN])
{
	uint8_t signed_part[ROCK_SERVER_HELLO_SIGNED + ROCK_TICKET_MSG_LEN];
	struct rock_ticket_msg tm;
	ssize_t n = recv_full(ss->fd, in, ROCK_SERVER_HELLO_LEN +
	    ROCK_TICKET_MSG_LEN);

	if (n > 0 && in[0] == ROCK_MSG_ERROR)
		return failf("rockd answered ERROR %s", code_name(in[1]));
	if (n != ROCK_SERVER_HELLO_LEN + ROCK_TICKET_MSG_LEN)
		return failf("SERVER_HELLO and TICKET: %s", n < 0 ? recv_error() :
		    "end of file");
	if (rock_server_hello_decode(sh, in) != 0 ||
	    sh->version != ROCK_VERSION)
		return failf("malformed SERVER_HELLO");
	if (rock_ticket_msg_decode(&tm, in + ROCK_SERVER_HELLO_LEN) != 0 ||
	    tm.lifetime_s == 0)
		return failf("malformed TICKET");
	if (sh->features != ROCK_FEAT_ALL || sh->udp_port == 0)
		return failf("features %#x, UDP port %u: want both features and "
		    "a control port", sh->features, sh->udp_port);
	memcpy(signed_part, in, ROCK_SERVER_HELLO_SIGNED);
	memcpy(signed_part + ROCK_SERVER_HELLO_SIGNED, in + ROCK_SERVER_HELLO_LEN,
	    ROCK_TICKET_MSG_LEN);
	if (rock_answer_verify(sh->sig, sh->ident, ROCK_ANSWER_HELLO, hello,
	    HELLO_TOTAL, signed_part, sizeof(signed_part)) != 0)
		return failf("SERVER_HELLO not signed by the key it names");
	memcpy(ss->ident, sh->ident, ROCK_IDENT_LEN);
	return 0;
}

/* Probe, announcement + CLIENT_HELLO, SERVER_HELLO, session keys, our
 * CLIENT_FINISHED. */
static int
handshake(struct session *ss)
{
	uint8_t out[HELLO_TOTAL], in[ROCK_SERVER_HELLO_LEN + ROCK_TICKET_MSG_LEN];
	uint8_t fin[ROCK_FINISHED_LEN];
	struct rock_server_hello sh;
	struct rock_keypair kp;
	int r;

	step = "handshake";
	if (probe(ss->t, ss->ann) != 0)
		return -1;
	if ((ss->fd = dial(ss->t)) < 0)
		return failf("connect: %s", strerror(errno));
	rock_keypair_new(&kp);
	hello_claim(out, ss->ann, &kp, ss->fd, ss->claim_rcvbuf);
	if ((r = send_all(ss->fd, out, sizeof(out))) == 0 &&
	    (r = read_server_hello(ss, out, &sh, in)) == 0 &&
	    rock_keys_client(&ss->keys, &kp, sh.pk) != 0)
		r = failf("the server's public key is rejected");
	rock_keypair_wipe(&kp);
	if (r != 0)
		return r;
	rock_finished_encode(fin, ss->keys.tx, out, sizeof(out), in, sizeof(in));
	if ((r = send_all(ss->fd, fin, sizeof(fin))) != 0)
		return r;
	memcpy(ss->id, sh.id, ROCK_ID_LEN);
	snprintf(ss->name, sizeof(ss->name), "%02x%02x%02x%02x", sh.id[0],
	    sh.id[1], sh.id[2], sh.id[3]);
	ss->udp_port = sh.udp_port;
	return 0;
}

/* Random bytes out on the data connection, the same bytes back from the
 * echo backend. */
static int
echo_check(struct session *ss)
{
	uint8_t out[ECHO_LEN], in[ECHO_LEN];
	ssize_t n;

	rock_random(out, sizeof(out));
	if (send_all(ss->fd, out, sizeof(out)) != 0)
		return -1;
	ss->sent += sizeof(out);
	n = recv_full(ss->fd, in, sizeof(in));
	if (n < 0)
		return failf("echo: %s", recv_error());
	ss->received += (uint64_t)n;
	if (n != (ssize_t)sizeof(in) || memcmp(in, out, sizeof(in)) != 0)
		return failf("echo: %zd bytes back, not the %zu sent", n, sizeof(out));
	return 0;
}

/* A RECONNECT_REQUEST for attempt `number` (since: the lowest attempt
 * said to be open), tagged with key. */
static void
request_new(struct attempt *a, const struct session *ss,
    const uint8_t id[ROCK_ID_LEN], uint32_t number, uint32_t since,
    const uint8_t key[ROCK_KEY_LEN])
{
	struct rock_reconnect_req rq;

	memset(a, 0, sizeof(*a));
	memset(&rq, 0, sizeof(rq));
	a->fd = -1;
	rq.version = ROCK_VERSION;
	memcpy(rq.id, id, ROCK_ID_LEN);
	rock_random(a->nonce, sizeof(a->nonce));
	memcpy(rq.nonce, a->nonce, ROCK_NONCE_LEN);
	rq.attempt = number;
	rq.since = since;
	rq.consumed = ss->received;
	rock_reconnect_req_encode(&rq, a->req);
	rock_request_tag(rq.tag, key, a->req);
	rock_reconnect_req_encode(&rq, a->req);
}

/* A new connection carrying the attempt's RECONNECT_REQUEST. */
static int
request_send(const struct session *ss, struct attempt *a)
{
	if ((a->fd = dial(ss->t)) < 0)
		return failf("connect: %s", strerror(errno));
	return send_all(a->fd, a->req, sizeof(a->req));
}

/* RECONNECT_OK: its tag must verify with the session's key over our nonce
 * (the server holds the key), its count must be what we sent. */
static int
ok_read(const struct session *ss, struct attempt *a)
{
	uint8_t in[ROCK_RECONNECT_OK_LEN], tag[ROCK_TAG_LEN];
	ssize_t n = recv_full(a->fd, in, sizeof(in));

	if (n > 0 && in[0] == ROCK_MSG_ERROR)
		return failf("ERROR %s instead of RECONNECT_OK", code_name(in[1]));
	if (n != (ssize_t)sizeof(in))
		return failf("RECONNECT_OK: %s", n < 0 ? recv_error() : "end of file");
	if (rock_reconnect_ok_decode(&a->ok, in) != 0)
		return failf("malformed RECONNECT_OK");
	rock_ok_tag(tag, ss->keys.rx, ss->id, a->nonce, in);
	if (!rock_equal(tag, a->ok.tag, ROCK_TAG_LEN))
		return failf("RECONNECT_OK's tag does not verify with the session key");
	if (a->ok.consumed != ss->sent)
		return failf("RECONNECT_OK: server consumed %llu, we sent %llu",
		    (unsigned long long)a->ok.consumed,
		    (unsigned long long)ss->sent);
	return 0;
}

/* A prepared request sent on a new connection: the answer must be ERROR
 * `code`. */
static int
request_refused(struct session *ss, struct attempt *a, uint8_t code)
{
	int r;

	if ((r = request_send(ss, a)) == 0)
		r = expect_error(a->fd, code, ss->ident, a->req, sizeof(a->req));
	if (a->fd >= 0)
		close(a->fd);
	a->fd = -1;
	return r;
}

/* (a) A request tagged with a key that is not the session's. */
static int
attack_wrong_key(struct session *ss)
{
	uint8_t key[ROCK_KEY_LEN];
	struct attempt a;

	step = "wrong key";
	rock_random(key, sizeof(key));
	request_new(&a, ss, ss->id, ss->attempts + 1, ss->attempts + 1, key);
	return request_refused(ss, &a, ROCK_WERR_AUTH);
}

/* A legitimate reconnect: RECONNECT_OK, the server resets the old data
 * connection, the new one carries the session. */
static int
reconnect_ok(struct session *ss, struct attempt *a)
{
	ss->attempts++;
	request_new(a, ss, ss->id, ss->attempts, ss->attempts, ss->keys.tx);
	if (request_send(ss, a) != 0 || ok_read(ss, a) != 0)
		return -1;
	step = "old data connection";
	if (expect_reset(ss->fd, "the reconnect") != 0)
		return -1;
	close(ss->fd);
	ss->fd = a->fd;
	a->fd = -1;
	return 0;
}

/* (b) The request of a successful reconnect, replayed: its attempt is not
 * above the one in use. Then a request made while that attempt was said
 * to be open (since = it): the one in use stays. */
static int
attack_replayed_request(struct session *ss)
{
	struct attempt first, again;

	step = "legitimate reconnect";
	if (reconnect_ok(ss, &first) != 0)
		return -1;
	step = "replayed request";
	again = first;
	if (request_refused(ss, &again, ROCK_WERR_SUPERSEDED) != 0)
		return -1;
	step = "overlapping attempt";
	request_new(&again, ss, ss->id, ss->attempts + 1, ss->attempts, ss->keys.tx);
	return request_refused(ss, &again, ROCK_WERR_SUPERSEDED);
}

/* (c) A reconnect naming a session that does not exist. */
static int
attack_unknown_id(struct session *ss)
{
	uint8_t id[ROCK_ID_LEN];
	struct attempt a;

	step = "unknown id";
	rock_random(id, sizeof(id));
	request_new(&a, ss, id, 1, 1, ss->keys.tx);
	return request_refused(ss, &a, ROCK_WERR_UNKNOWN);
}

/* (e) A request whose fields are nonsense (attempt 0). */
static int
attack_malformed_request(struct session *ss)
{
	struct attempt a;

	step = "malformed request";
	request_new(&a, ss, ss->id, 1, 1, ss->keys.tx);
	memset(a.req + 41, 0, 8);
	return request_refused(ss, &a, ROCK_WERR_PROTOCOL);
}

/* ---- the control channel */

static int
udp_open(struct session *ss)
{
	struct sockaddr_storage a = ss->t->addr;

	if (a.ss_family == AF_INET6)
		((struct sockaddr_in6 *)&a)->sin6_port = htons(ss->udp_port);
	else
		((struct sockaddr_in *)&a)->sin_port = htons(ss->udp_port);
	if ((ss->udp = socket(a.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
		return failf("UDP socket: %s", strerror(errno));
	set_timeout(ss->udp, 2);
	if (connect(ss->udp, (struct sockaddr *)&a, ss->t->len) != 0)
		return failf("UDP connect: %s", strerror(errno));
	return 0;
}

/* A one-record heartbeat packet from the client, under the record's own
 * rock (packet number = record number), both tagged with its tx key. */
static void
record_make(const struct session *ss, uint8_t out[HB_PACKET],
    const uint8_t id[ROCK_ID_LEN], uint64_t seq, uint32_t flags)
{
	struct rock_hb_header h;
	struct rock_hb_record r;

	memset(&h, 0, sizeof(h));
	memset(&r, 0, sizeof(r));
	memcpy(r.id, id, ROCK_ID_LEN);
	memcpy(r.anchor, id, ROCK_ID_LEN);
	memcpy(h.anchor, id, ROCK_ID_LEN);
	h.seq = seq;
	h.nrecords = 1;
	r.seq = seq;
	r.consumed = ss->received;
	r.end = (flags & ROCK_FLAG_WR_SHUT) ? ss->sent : 0;
	r.flags = flags;
	rock_hb_record_encode(&r, out + ROCK_HB_HEADER_LEN);
	rock_hb_tag(out + HB_TAG_AT, ss->keys.tx, out + ROCK_HB_HEADER_LEN);
	rock_hb_packet_seal(&h, ss->keys.tx, out);
}

static int
udp_send(const struct session *ss, const uint8_t *p, size_t n)
{
	if (send(ss->udp, p, n, 0) != (ssize_t)n)
		return failf("UDP send: %s", strerror(errno));
	return 0;
}

/* A heartbeat from rockd for our session, authentic with our rx key. It
 * comes only once an authentic record of ours told rockd where we are. */
static int
server_heartbeat(const struct session *ss)
{
	uint8_t buf[ROCK_HB_MAX_LEN], tag[ROCK_TAG_LEN];
	struct rock_hb_record r;
	unsigned n, i;
	ssize_t got = recv(ss->udp, buf, sizeof(buf), 0);

	if (got < 0)
		return failf("no heartbeat from rockd (%s): the authentic "
		    "record was not accepted", recv_error());
	if (rock_hb_packet_check(buf, (size_t)got, &n) != 0)
		return failf("malformed heartbeat packet from rockd");
	for (i = 0; i < n; i++) {
		const uint8_t *rec = buf + ROCK_HB_HEADER_LEN + i * ROCK_HB_RECORD_LEN;

		rock_hb_record_decode(&r, rec);
		if (memcmp(r.id, ss->id, ROCK_ID_LEN) != 0)
			continue;
		rock_hb_tag(tag, ss->keys.rx, rec);
		if (!rock_equal(tag, r.tag, ROCK_TAG_LEN))
			return failf("rockd's heartbeat does not verify");
		if (r.consumed != ss->sent)
			return failf("rockd's heartbeat: consumed %llu, we sent %llu",
			    (unsigned long long)r.consumed,
			    (unsigned long long)ss->sent);
		return 0;
	}
	return failf("rockd's heartbeat packet lacks our session");
}

/* (d) Forged, authentic, replayed, old, malformed and stray records:
 * rockd counts 1 forged, 2 replayed, 1 malformed, 1 unknown (its log). */
static int
attack_udp(struct session *ss)
{
	uint8_t p[HB_PACKET], stray[ROCK_ID_LEN];

	step = "control channel";
	if (udp_open(ss) != 0)
		return -1;
	record_make(ss, p, ss->id, 1000, 0);	/* forged: would block seq 5 */
	p[HB_TAG_AT] ^= 0x01;
	if (udp_send(ss, p, sizeof(p)) != 0)
		return -1;
	record_make(ss, p, ss->id, 5, 0);	/* authentic */
	if (udp_send(ss, p, sizeof(p)) != 0 || udp_send(ss, p, sizeof(p)) != 0)
		return -1;			/* ...and its replay */
	record_make(ss, p, ss->id, 3, 0);	/* authentic but old */
	if (udp_send(ss, p, sizeof(p)) != 0)
		return -1;
	record_make(ss, p, ss->id, 6, 0);	/* one byte short */
	if (udp_send(ss, p, sizeof(p) - 1) != 0)
		return -1;
	rock_random(stray, sizeof(stray));
	record_make(ss, p, stray, 1, 0);	/* no such session */
	if (udp_send(ss, p, sizeof(p)) != 0)
		return -1;
	return server_heartbeat(ss);
}

/* Our end of stream (its length in a record, then the FIN: rockd takes a
 * FIN for the end only at the length we state), rockd's, then a record
 * saying we have read everything: rockd ends the session cleanly and
 * forgets its id. */
static int
close_cleanly(struct session *ss)
{
	uint8_t p[HB_PACKET];
	struct attempt a;
	int i, r = -1;

	step = "clean close";
	record_make(ss, p, ss->id, 7, ROCK_FLAG_WR_SHUT);
	if (udp_send(ss, p, sizeof(p)) != 0)
		return -1;
	shutdown(ss->fd, SHUT_WR);
	if (expect_eof(ss->fd, "our end of stream") != 0)
		return -1;
	record_make(ss, p, ss->id, 8, ROCK_FLAG_WR_SHUT | ROCK_FLAG_EOF_SEEN);
	if (udp_send(ss, p, sizeof(p)) != 0)
		return -1;
	for (i = 0; i < 20 && r != 0; i++) {
		usleep(100000);
		why[0] = '\0';
		request_new(&a, ss, ss->id, ss->attempts + 1, ss->attempts + 1,
		    ss->keys.tx);
		r = request_refused(ss, &a, ROCK_WERR_UNKNOWN);
	}
	if (r != 0)
		why[0] = '\0';
	return r != 0 ? failf("rockd still knows the session 2 s after it ended") : 0;
}

static int
session_attacks(struct session *ss)
{
	if (handshake(ss) != 0)
		return -1;
	step = "echo before";
	if (echo_check(ss) != 0 || attack_wrong_key(ss) != 0 ||
	    attack_replayed_request(ss) != 0 || attack_unknown_id(ss) != 0 ||
	    attack_malformed_request(ss) != 0 || attack_udp(ss) != 0)
		return -1;
	step = "echo after";
	if (echo_check(ss) != 0 || close_cleanly(ss) != 0)
		return -1;
	return still_serving(ss->t, ss->ann);
}

static int
cmd_session(const struct target *t)
{
	struct session ss;
	char cmd[32];
	int r;

	memset(&ss, 0, sizeof(ss));
	ss.t = t;
	ss.fd = ss.udp = -1;
	r = session_attacks(&ss);
	snprintf(cmd, sizeof(cmd), "session: rock %s", ss.name[0] ? ss.name : "?");
	report(cmd, r, "wrong key -> ERROR AUTH; reconnect OK, replayed "
	    "request and overlapping attempt -> ERROR SUPERSEDED; unknown id -> "
	    "ERROR UNKNOWN; malformed request -> ERROR PROTOCOL; forged, "
	    "replayed, old, short and stray "
	    "heartbeats sent, the authentic one accepted; %d+%d bytes echoed "
	    "exactly; closed cleanly", ECHO_LEN, ECHO_LEN);
	if (ss.fd >= 0)
		close(ss.fd);
	if (ss.udp >= 0)
		close(ss.udp);
	rock_keys_wipe(&ss.keys);
	return r;
}

/* ---- halfopen: many handshakes that never finish */

static void
raise_nofile(size_t want)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want)
		return;
	rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
	setrlimit(RLIMIT_NOFILE, &rl);
}

/* n connections, each sending the announcement magic only. */
static int
open_halfopen(const struct target *t, int *fds, long n)
{
	long i;

	for (i = 0; i < n; i++) {
		if ((fds[i] = dial(t)) < 0)
			return failf("connection %ld: %s", i + 1, strerror(errno));
		if (send_all(fds[i], rock_magic_announce, ROCK_MAGIC_LEN) != 0)
			return -1;
	}
	return 0;
}

/* How many rockd still holds open; how many it closed with ERROR BUSY. */
static long
count_open(const int *fds, long n, long *busy)
{
	struct pollfd p;
	uint8_t b[2];
	long i, open = 0;

	*busy = 0;
	for (i = 0; i < n; i++) {
		p.fd = fds[i];
		p.events = POLLIN | POLLRDHUP;
		p.revents = 0;
		if (poll(&p, 1, 0) == 0) {
			open++;
		} else if (recv(fds[i], b, 2, MSG_DONTWAIT) == 2 &&
		    b[0] == ROCK_MSG_ERROR && b[1] == ROCK_WERR_BUSY) {
			(*busy)++;
		}
	}
	return open;
}

/* Until stdin ends (the caller's signal), at most max_s seconds. */
static void
hold(int max_s)
{
	struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };
	long long end = now_ms() + max_s * 1000LL;
	char buf[64];

	while (now_ms() < end) {
		if (poll(&p, 1, (int)(end - now_ms())) <= 0)
			break;
		if (read(STDIN_FILENO, buf, sizeof(buf)) <= 0)
			return;
	}
	fprintf(stderr, "rock-hostile: halfopen: stopped holding after %d s\n",
	    max_s);
}

static int
cmd_halfopen(const struct target *t, long n, long expect)
{
	int *fds = calloc((size_t)n, sizeof(int));
	long i, open = 0, busy = 0;
	int r;

	step = "halfopen";
	if (fds == NULL)
		return failf("out of memory");
	for (i = 0; i < n; i++)
		fds[i] = -1;
	raise_nofile((size_t)n + 64);
	if ((r = open_halfopen(t, fds, n)) == 0) {
		sleep(2);
		open = count_open(fds, n, &busy);
		if (open != expect)
			r = failf("%ld of %ld connections still open after 2 s, "
			    "expected %ld (%ld closed with ERROR BUSY)", open, n,
			    expect, busy);
	}
	report("halfopen", r, "%ld of %ld connections that sent only the "
	    "announcement magic still open after 2 s; %ld closed by rockd, %ld "
	    "of them with ERROR BUSY", open, n, n - open, busy);
	if (r == 0)
		hold(7);
	for (i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(fds);
	return r;
}

/* ---- known weaknesses: each expects what doc/PROTOCOL.md promises */

/* Readable within ms: 1 (closed or answered), 0 (still quiet), -1. */
static int
readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN | POLLRDHUP };
	int r;

	do
		r = poll(&p, 1, ms);
	while (r < 0 && errno == EINTR);
	return r < 0 ? -1 : r > 0;
}

/* "A handshake must complete within 10 s": the announcement at once, then
 * one hello byte every 2 s (never the last); rockd must close the
 * connection within limit_ms of its start. */
static int
cmd_slowloris(const struct target *t, long limit_ms)
{
	uint8_t ann[ROCK_ANNOUNCE_LEN], out[HELLO_TOTAL];
	struct rock_keypair kp;
	size_t i = ROCK_ANNOUNCE_LEN;
	long long t0;
	int fd, r;

	step = "slowloris";
	if (probe(t, ann) != 0 || (fd = dial(t)) < 0)
		return why[0] ? -1 : failf("connect: %s", strerror(errno));
	rock_keypair_new(&kp);
	hello_bytes(out, ann, &kp, fd);
	rock_keypair_wipe(&kp);
	t0 = now_ms();
	r = send_all(fd, out, ROCK_ANNOUNCE_LEN);
	while (r == 0 && (r = readable(fd, 2000)) == 0 && now_ms() - t0 <= limit_ms &&
	    i < HELLO_TOTAL - 1 && send(fd, out + i, 1, MSG_NOSIGNAL) == 1)
		i++;
	if (r > 0)
		r = expect_eof(fd, "a trickled hello");
	else if (r == 0)
		r = failf("rockd still holds a handshake trickled at one byte "
		    "per 2 s after %lld ms (%zu of %d bytes sent)", now_ms() - t0,
		    i, HELLO_TOTAL);
	close(fd);
	report("slowloris", r, "a hello trickled at one byte per 2 s: closed "
	    "after %lld ms, %zu of %d bytes sent", now_ms() - t0, i, HELLO_TOTAL);
	return r;
}

static long
rss_kib(long pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	if ((f = fopen(path, "re")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "VmRSS: %ld", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* mib MiB through the echo backend, 256 KiB at a time. */
static int
pump(struct session *ss, long mib)
{
	static uint8_t buf[256 * 1024];
	long i;
	ssize_t n;

	rock_random(buf, sizeof(buf));
	for (i = 0; i < mib * 4; i++) {
		if (send_all(ss->fd, buf, sizeof(buf)) != 0)
			return -1;
		if ((n = recv_full(ss->fd, buf, sizeof(buf))) != (ssize_t)sizeof(buf))
			return failf("echo: %s", n < 0 ? recv_error() : "end of file");
	}
	return 0;
}

/* The most one rock may hold: rockd clamps a claimed receive buffer to
 * this host's tcp_rmem maximum; its ring stores the cap (that plus the
 * send buffer and a few MiB) rounded up to a power of two. */
static long
greedy_limit_kib(void)
{
	long lo, def, max = 6L << 20;
	FILE *f = fopen("/proc/sys/net/ipv4/tcp_rmem", "r");

	if (f != NULL) {
		if (fscanf(f, "%ld %ld %ld", &lo, &def, &max) != 3)
			max = 6L << 20;
		fclose(f);
	}
	return 2 * (max + (8L << 20)) / 1024;
}

/* A client that claims a 4 GiB receive buffer, reads everything and never
 * acknowledges: rockd's RSS (process pid) stays within one rock's bound. */
static int
cmd_greedy(const struct target *t, long mib, long pid)
{
	struct session ss;
	long before = rss_kib(pid), after = -1, limit = greedy_limit_kib();
	int r;

	memset(&ss, 0, sizeof(ss));
	ss.t = t;
	ss.claim_rcvbuf = 0xffffffffu;
	step = "greedy";
	if (before < 0)
		r = failf("no process %ld", pid);
	else if ((r = handshake(&ss)) == 0 && (step = "greedy") != NULL &&
	    (r = pump(&ss, mib)) == 0 &&
	    (after = rss_kib(pid)) - before >= limit)
		r = failf("rockd's RSS grew from %ld to %ld MiB (limit %ld) while "
		    "%ld MiB passed unacknowledged", before / 1024, after / 1024,
		    limit / 1024, mib);
	report("greedy", r, "claimed SO_RCVBUF 4 GiB, %ld MiB echoed without "
	    "acks: rockd's RSS %ld -> %ld MiB", mib, before / 1024, after / 1024);
	if (ss.fd >= 0)
		close(ss.fd);
	rock_keys_wipe(&ss.keys);
	return r;
}

/* n sessions, each closed right after SERVER_HELLO, without a word. */
static int
cmd_abandon(const struct target *t, long n)
{
	static char last_failure[sizeof(why)];
	struct session ss;
	long i;
	int r = 0;

	step = "abandon";
	for (i = 0; i < n && r == 0; i++) {
		int tries = 0;

		/* At its limit rockd answers BUSY until the vanished clients'
		 * rocks are suspended (about 3 s); then it evicts the oldest. */
		do {
			memset(&ss, 0, sizeof(ss));
			ss.t = t;
			why[0] = '\0';
			if ((r = handshake(&ss)) == 0)
				close(ss.fd);
			rock_keys_wipe(&ss.keys);
		} while (r != 0 && strstr(why, "ERROR BUSY") != NULL &&
		    ++tries < 100 && usleep(100000) == 0);
	}
	snprintf(last_failure, sizeof(last_failure), "%s", why);
	if (r != 0) {
		why[0] = '\0';
		step = "abandon";
		failf("%ld sessions opened and dropped, then the next handshake "
		    "failed: %s", i - 1, last_failure);
	}
	report("abandon", r, "%ld sessions opened, then dropped without a "
	    "word", i);
	return r;
}

/* ---- main */

static void
usage(void)
{
	fprintf(stderr,
	    "usage: rock-hostile garbage|stale|truncated|session HOST PORT\n"
	    "       rock-hostile truncated-wait HOST PORT [MIN_MS MAX_MS]\n"
	    "       rock-hostile halfopen HOST PORT N [EXPECT_OPEN]\n"
	    "       rock-hostile slowloris HOST PORT [LIMIT_MS]\n"
	    "       rock-hostile greedy HOST PORT MIB ROCKD_PID\n"
	    "       rock-hostile abandon HOST PORT N\n"
	    "Attack rockd at HOST PORT; print one result line; exit 0 when rockd\n"
	    "answered as the protocol requires, 1 otherwise, 2 on bad usage.\n"
	    "halfopen holds its connections until stdin ends (7 s at most).\n");
}

static int
run_known(const char *cmd, const struct target *t, int argc, char **argv)
{
	if (strcmp(cmd, "slowloris") == 0 && argc <= 1)
		return cmd_slowloris(t, argc ? atol(argv[0]) : 11500);
	if (strcmp(cmd, "greedy") == 0 && argc == 2 && atol(argv[0]) > 0)
		return cmd_greedy(t, atol(argv[0]), atol(argv[1]));
	if (strcmp(cmd, "abandon") == 0 && argc == 1 && atol(argv[0]) > 0)
		return cmd_abandon(t, atol(argv[0]));
	usage();
	return 2;
}

static int
run(const char *cmd, const struct target *t, int argc, char **argv)
{
	if (strcmp(cmd, "garbage") == 0 && argc == 0)
		return cmd_garbage(t);
	if (strcmp(cmd, "stale") == 0 && argc == 0)
		return cmd_stale(t);
	if (strcmp(cmd, "truncated") == 0 && argc == 0)
		return cmd_truncated(t);
	if (strcmp(cmd, "truncated-wait") == 0 && (argc == 0 || argc == 2))
		return cmd_truncated_wait(t, argc ? atol(argv[0]) : 9500,
		    argc ? atol(argv[1]) : 11500);
	if (strcmp(cmd, "session") == 0 && argc == 0)
		return cmd_session(t);
	if (strcmp(cmd, "halfopen") == 0 && (argc == 1 || argc == 2) &&
	    atol(argv[0]) > 0)
		return cmd_halfopen(t, atol(argv[0]),
		    atol(argv[argc == 2 ? 1 : 0]));
	return run_known(cmd, t, argc, argv);
}

int
main(int argc, char **argv)
{
	struct target t;
	int r;

	if (argc < 4) {
		usage();
		return 2;
	}
	if (rock_crypto_init() != 0) {
		fprintf(stderr, "rock-hostile: libsodium failed to start\n");
		return 1;
	}
	if (resolve(argv[2], argv[3], &t) != 0)
		return 1;
	r = run(argv[1], &t, argc - 4, argv + 4);
	if (r == 2)
		return 2;
	if (r != 0 && !reported)
		report(argv[1], r, "%s", "");
	return r != 0;
}
