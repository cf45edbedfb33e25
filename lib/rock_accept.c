/* rock_accept.c: the server side: client handshakes and authenticated reconnects. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rock_engine_int.h"
#include "rock_err.h"
#include "rock_sys.h"

/* A line a stranger's bytes cause: within the engine's budget for its kind. */
#define stranger(e, kind, ...) \
	rlog_limited((e)->log, &(e)->stranger_log[kind], ROCK_LOG_INFO, \
	    __VA_ARGS__)

struct rock_handshake {
	struct rock_engine *e;
	int fd;
	uint8_t buf[ROCK_HELLO_TOTAL];
	size_t have;
	struct event *ev, *deadline;
	struct rock_client_hello hello;
	struct sockaddr_storage peer;
	socklen_t peer_len;
	rock_hello_fn *on_hello;
	void *arg;
	int delivered;			/* on_hello called with the handshake */
};

/* A reconnect request being read: the session is looked up by id once the
 * request is whole, never held across the event loop (it may end). */
struct reconnect {
	struct rock_engine *e;
	int fd;
	uint8_t buf[ROCK_RECONNECT_REQ_LEN];
	size_t have;
	struct event *ev, *deadline;
};

/* Signed over what the client sent on this connection, which its nonce
 * makes fresh: a client acts only on a refusal of its own request. */
static void
send_error(const struct rock_engine *e, int fd, uint8_t code,
    const char *text, const uint8_t *got, size_t ngot)
{
	uint8_t out[ROCK_ERROR_MAX_LEN];
	size_t n = rock_error_encode(code, text, out);

	rock_answer_sign(out + n - ROCK_SIG_LEN, &e->ident, ROCK_ANSWER_ERROR,
	    got, ngot, out, n - ROCK_SIG_LEN);
	(void)rock_sys.send(fd, out, n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Reads, and one deadline for the whole handshake that reads do not push
 * back: a client trickling a byte at a time still runs out of time. The
 * deadline follows the round trip of the connection's own handshake. */
static int
arm(struct rock_engine *e, struct event **ev, struct event **deadline, int fd,
    event_callback_fn on_read, event_callback_fn on_deadline, void *arg)
{
	struct rock_tcp_sample t;
	int ms = rock_handshake_ms(e, rock_tcp_sample(fd, &t) == 0 ?
	    (int)(t.rtt_us / 1000) : 0);
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	*ev = event_new(e->base, fd, EV_READ | EV_PERSIST, on_read, arg);
	*deadline = evtimer_new(e->base, on_deadline, arg);
	if (*ev == NULL || *deadline == NULL)
		return -1;
	return event_add(*ev, NULL) | evtimer_add(*deadline, &tv);
}

static void
disarm(struct event **ev, struct event **deadline)
{
	if (*ev != NULL)
		event_free(*ev);
	if (*deadline != NULL)
		event_free(*deadline);
	*ev = *deadline = NULL;
}

/* 1: have `want` bytes; 0: not yet; -1: closed or failed. */
static int
fill(int fd, uint8_t *buf, size_t *have, size_t want)
{
	ssize_t got;

	got = rock_sys.recv(fd, buf + *have, want - *have, MSG_DONTWAIT);
	if (got < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	if (got == 0)
		return -1;
	*have += (size_t)got;
	return *have == want ? 1 : 0;
}

static void
handshake_free(struct rock_handshake *hs, int close_fd)
{
	/* The owner's argument is released either way. */
	if (!hs->delivered)
		hs->on_hello(NULL, hs->arg);
	disarm(&hs->ev, &hs->deadline);
	if (close_fd && hs->fd >= 0)
		rock_sys.close(hs->fd);
	hs->e->nhandshakes--;
	free(hs);
}

static enum rock_hs_fail
reject_reason(uint8_t code)
{
	switch (code) {
	case ROCK_WERR_STALE: return ROCK_HS_STALE;
	case ROCK_WERR_VERSION: return ROCK_HS_VERSION;
	case ROCK_WERR_BUSY: return ROCK_HS_BUSY;
	case ROCK_WERR_BACKEND: return ROCK_HS_BACKEND;
	case ROCK_WERR_PROTOCOL: return ROCK_HS_MALFORMED;
	default: return ROCK_HS_ERROR;
	}
}

void
rock_handshake_reject(struct rock_handshake *hs, uint8_t code, const char *text)
{
	hs->e->stats.handshake_failed[reject_reason(code)]++;
	send_error(hs->e, hs->fd, code, text, hs->buf, hs->have);
	handshake_free(hs, 1);
}

static void
hello_complete(struct rock_handshake *hs)
{
	struct rock_engine *e = hs->e;

	if (!rock_equal(hs->buf, e->announcement, ROCK_ANNOUNCE_LEN)) {
		stranger(e, ROCK_STRANGER_HANDSHAKE, "handshake: "
		    "announcement from another server instance; client told "
		    "to probe again");
		rock_handshake_reject(hs, ROCK_WERR_STALE, "stale announcement");
		return;
	}
	if (rock_client_hello_decode(&hs->hello, hs->buf + ROCK_ANNOUNCE_LEN) != 0) {
		stranger(e, ROCK_STRANGER_HANDSHAKE,
		    "handshake: malformed hello; dropped");
		rock_handshake_reject(hs, ROCK_WERR_PROTOCOL, "malformed hello");
		return;
	}
	if (hs->hello.version != ROCK_VERSION) {
		stranger(e, ROCK_STRANGER_HANDSHAKE,
		    "handshake: client asked for version %u; refused",
		    hs->hello.version);
		rock_handshake_reject(hs, ROCK_WERR_VERSION, "version 4 only");
		return;
	}
	/* The owner answers now (rockd dials its backend, with its own
	 * timeout); it holds the handshake until it does. */
	disarm(&hs->ev, &hs->deadline);
	hs->delivered = 1;
	hs->on_hello(hs, hs->arg);
}

static void
hello_failed(struct rock_handshake *hs, enum rock_hs_fail reason,
    const char *why)
{
	hs->e->stats.handshake_failed[reason]++;
	stranger(hs->e, ROCK_STRANGER_HANDSHAKE, "handshake: %s "
	    "before the hello was complete (%zu of %d bytes); dropped", why,
	    hs->have, ROCK_HELLO_TOTAL);
	handshake_free(hs, 1);
}

static void
on_hello_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct rock_handshake *hs = arg;
	struct rock_engine *e = hs->e;

	(void)fd;
	(void)what;
	rock_engine_enter(e);
	hello_failed(hs, ROCK_HS_TIMEOUT, "timed out");
	rock_engine_leave(e);
}

/* 1: the announcement came from a server of an older version (its range
 * ends below ours): the client's hello is shorter than ours and would
 * never complete, so it is told STALE at once; its new probe then finds
 * no common version and it makes a plain connection. */
static int
older_client(const struct rock_handshake *hs)
{
	return hs->have >= ROCK_ANNOUNCE_LEN && hs->buf[8] < ROCK_VERSION &&
	    !rock_equal(hs->buf, hs->e->announcement, ROCK_ANNOUNCE_LEN);
}

static void
on_hello_read(evutil_socket_t fd, short what, void *arg)
{
	struct rock_handshake *hs = arg;
	struct rock_engine *e = hs->e;
	int r = fill(fd, hs->buf, &hs->have, ROCK_HELLO_TOTAL);

	(void)what;
	/* The owner's threads may be making sessions meanwhile (a rock
	 * server under the preload shim). */
	rock_engine_enter(e);
	if (r < 0) {
		hello_failed(hs, ROCK_HS_CLOSED, "connection closed");
	} else if (r > 0) {
		hello_complete(hs);
	} else if (older_client(hs)) {
		stranger(hs->e, ROCK_STRANGER_HANDSHAKE, "handshake: client "
		    "of version %u; told to probe again", hs->buf[8]);
		rock_handshake_reject(hs, ROCK_WERR_STALE, "stale announcement");
	}
	rock_engine_leave(e);
}

void
rock_server_handshake(struct rock_engine *e, int fd, const uint8_t *early,
    size_t nearly, rock_hello_fn *on_hello, void *arg)
{
	struct rock_handshake *hs = calloc(1, sizeof(*hs));

	if (hs == NULL || nearly > ROCK_HELLO_TOTAL) {
		e->stats.handshake_failed[ROCK_HS_ERROR]++;
		free(hs);
		rock_sys.close(fd);
		on_hello(NULL, arg);	/* the owner's arg is released */
		return;
	}
	e->nhandshakes++;
	hs->e = e;
	hs->fd = fd;
	hs->on_hello = on_hello;
	hs->arg = arg;
	memcpy(hs->buf, early, nearly);
	hs->have = nearly;
	hs->peer_len = sizeof(hs->peer);
	if (rock_sys.getpeername(fd, (struct sockaddr *)&hs->peer, &hs->peer_len) != 0)
		hs->peer_len = 0;
	if (arm(e, &hs->ev, &hs->deadline, fd, on_hello_read, on_hello_deadline,
	    hs) != 0) {
		e->stats.handshake_failed[ROCK_HS_ERROR]++;
		handshake_free(hs, 1);
		return;
	}
	if (hs->have == ROCK_HELLO_TOTAL)
		hello_complete(hs);
	else if (older_client(hs))
		rock_handshake_reject(hs, ROCK_WERR_STALE, "stale announcement");
}

static int
send_server_hello(struct rock_handshake *hs, const struct rock_keypair *kp,
    const uint8_t id[ROCK_ID_LEN], uint16_t features)
{
	struct rock_server_hello sh;
	uint8_t out[ROCK_SERVER_HELLO_LEN];

	sh.version = ROCK_VERSION;
	sh.features = features;
	memcpy(sh.id, id, ROCK_ID_LEN);
	memcpy(sh.pk, kp->pk, ROCK_KEY_LEN);
	rock_socket_buffers(hs->e, hs->fd, &sh.rcvbuf, &sh.sndbuf);
	sh.udp_port = hs->e->udp_port;
	memcpy(sh.ident, hs->e->ident.pk, ROCK_IDENT_LEN);
	memset(sh.sig, 0, sizeof(sh.sig));
	rock_server_hello_encode(&sh, out);
	/* The whole exchange, our X25519 key in it, under our identity. */
	rock_answer_sign(sh.sig, &hs->e->ident, ROCK_ANSWER_HELLO, hs->buf,
	    ROCK_HELLO_TOTAL, out, ROCK_SERVER_HELLO_SIGNED);
	rock_server_hello_encode(&sh, out);
	return rock_sys.send(hs->fd, out, sizeof(out), MSG_NOSIGNAL | MSG_DONTWAIT) ==
	    (ssize_t)sizeof(out) ? 0 : ROCK_ERR_SYSTEM;
}

/* The round trip TCP measured over its own handshake. */
static int
handshake_rtt_ms(int fd)
{
	struct rock_tcp_sample t;

	return rock_tcp_sample(fd, &t) == 0 ? (int)(t.rtt_us / 1000) : 0;
}

const struct sockaddr *
rock_handshake_peer(const struct rock_handshake *hs)
{
	return hs->peer_len > 0 ? (const struct sockaddr *)&hs->peer : NULL;
}

int
rock_handshake_accept(struct rock_handshake *hs,
    const struct rock_session_cbs *cbs, void *arg, struct rock_session **out)
{
	uint16_t features = hs->hello.features & ROCK_FEAT_ALL;
	uint8_t id[ROCK_ID_LEN];
	struct rock_keypair kp;
	struct rock_keys keys;
	struct rock_session *s = NULL;
	uint32_t rcv, snd;
	int r;

	rock_random(id, sizeof(id));
	rock_engine_keypair_take(hs->e, &kp);
	rock_socket_buffers(hs->e, hs->fd, &rcv, &snd);
	/* The claim sizes our memory for this rock: no more than a receive
	 * buffer can be on this host. */
	if (hs->hello.rcvbuf > hs->e->rmem_max)
		hs->hello.rcvbuf = hs->e->rmem_max;
	/* The hello first, our session keys after: the client checks our
	 * signature meanwhile, so the two key exchanges overlap instead of
	 * following each other. Its first bytes wait in the socket until the
	 * session below reads them. */
	if ((r = send_server_hello(hs, &kp, id, features)) == 0 &&
	    (r = rock_keys_server(&keys, &kp, hs->hello.pk)) == 0 &&
	    (r = rock_session_new(hs->e, ROCK_ROLE_SERVER, id, &keys,
	    rock_ring_cap_for(hs->e, snd, hs->hello.rcvbuf), cbs, arg, &s)) == 0) {
		s->features = features;
		s->tcp_bound = rock_tcp_bound(snd, hs->hello.rcvbuf);
		memcpy(&s->peer, &hs->peer, hs->peer_len);
		s->peer_len = hs->peer_len;
		rock_path_init(s, handshake_rtt_ms(hs->fd));
		/* A first guess, so acks flow at once; the source of the
		 * first authentic record (NAT) replaces it. */
		rock_udp_peer_from_tcp(s, hs->hello.udp_port);
		r = rock_is_direct(s) ? rock_direct_attach(s, hs->fd) :
		    rock_stream_attach(s, hs->fd);
	}
	rock_keypair_wipe(&kp);
	rock_keys_wipe(&keys);
	if (r != 0) {
		if (s != NULL) {
			s->fd = -1;
			rock_session_free(s);
		}
		hs->e->stats.handshake_failed[ROCK_HS_ERROR]++;
		handshake_free(hs, 1);
		return r;
	}
	rlog_debug(s->e->log, "rock %s: connected as server, features %#x",
	    s->name, features);
	s->e->stats.handshakes++;
	handshake_free(hs, 0);
	*out = s;
	/* The next handshake's pair, made now that this one's answer is out. */
	rock_engine_keypair_fill(s->e, 1);
	return 0;
}

enum rock_sniff
rock_sniff_read(int fd, uint8_t buf[ROCK_MAGIC_LEN], size_t *have, int peek)
{
	size_t from = peek ? 0 : *have;
	ssize_t n;

	n = rock_sys.recv(fd, buf + from, ROCK_MAGIC_LEN - from,
	    MSG_DONTWAIT | (peek ? MSG_PEEK : 0));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return ROCK_SNIFF_MORE;
	if (n == 0 && *have == 0)
		return ROCK_SNIFF_PROBE;
	if (n <= 0)
		return ROCK_SNIFF_PLAIN;
	*have = from + (size_t)n;
	return rock_sniff(buf, *have);
}

/* ---- reconnect */

static void
reconnect_free(struct reconnect *rc, int close_fd)
{
	disarm(&rc->ev, &rc->deadline);
	if (close_fd)
		rock_sys.close(rc->fd);
	rc->e->nhandshakes--;
	free(rc);
}

/*
 * A refusal of a reconnect request costs an Ed25519 signature, the
 * dearest thing a stranger can make us do: for a request nobody proved
 * (an unknown id, a wrong key, a malformed request), and for a proven one
 * replayed from anywhere (SUPERSEDED; its tag is not bound to the
 * connection). So refusals are signed from a bucket of a second's worth,
 * refilled at refusal_signs_per_s: the clients of a rockd restarted
 * without a hand-over all learn at once that their sessions are gone, and
 * a flood of forged or replayed requests costs what as many plain
 * connections do. Over the budget the connection is reset unanswered,
 * which a client takes for a failed attempt: it tries again later.
 */
static int
may_sign_refusal(struct rock_engine *e)
{
	int64_t now = rock_now_ms(), add, rate = e->cfg.refusal_signs_per_s;

	if (rate <= 0)
		return 1;
	if (e->refusal_signs_ms == 0)
		e->refusal_signs_ms = now - 1000;
	add = (now - e->refusal_signs_ms) * rate / 1000;
	if (add > 0) {
		e->refusal_signs = add >= rate - e->refusal_signs ? (int)rate :
		    e->refusal_signs + (int)add;
		e->refusal_signs_ms += add * 1000 / rate;
		if (e->refusal_signs == rate)
			e->refusal_signs_ms = now;
	}
	if (e->refusal_signs == 0)
		return 0;
	e->refusal_signs--;
	return 1;
}

static void
reconnect_reject(struct reconnect *rc, uint8_t code, const char *why)
{
	struct linger reset = { 1, 0 };

	rc->e->stats.reconnect_rejected++;
	if (!may_sign_refusal(rc->e)) {
		rc->e->stats.reconnect_unanswered++;
		stranger(rc->e, ROCK_STRANGER_RECONNECT, "reconnect rejected: "
		    "%s; reset unanswered, over the refusals' signing budget",
		    why);
		(void)rock_sys.setsockopt(rc->fd, SOL_SOCKET, SO_LINGER, &reset,
		    sizeof(reset));
		reconnect_free(rc, 1);
		return;
	}
	stranger(rc->e, ROCK_STRANGER_RECONNECT, "reconnect rejected: %s",
	    why);
	send_error(rc->e, rc->fd, code, why, rc->buf, rc->have);
	reconnect_free(rc, 1);
}

/* The client tries several connections at once while the path is down;
 * the first request to arrive wins, and one sent while that attempt was
 * still open at the client (since <= it) does not replace it: the client
 * takes whichever answers first. A request older than the winner is a
 * straggler or a replay. Both are answered SUPERSEDED, which the client
 * acts on only by dropping that connection. */
static const char *
superseded(const struct rock_session *s, const struct rock_reconnect_req *rq)
{
	if (rq->attempt <= s->last_attempt)
		return "an older attempt than the one in use";
	if (rq->since <= s->last_attempt && s->state == ROCK_ST_CONNECTED)
		return "sent while the attempt in use was open";
	return NULL;
}

static void
ok_encode(const struct rock_session *s, const uint8_t nonce[ROCK_NONCE_LEN],
    uint8_t out[ROCK_RECONNECT_OK_LEN])
{
	struct rock_reconnect_ok ok;

	ok.consumed = s->consumed;
	ok.end = rock_session_end(s);
	ok.flags = s->flags;
	memset(ok.tag, 0, sizeof(ok.tag));
	rock_reconnect_ok_encode(&ok, out);
	rock_ok_tag(ok.tag, s->keys.tx, s->id, nonce, out);
	rock_reconnect_ok_encode(&ok, out);
}

/* A status exchange: the client's counts and end taken as from an
 * authentic record (they only grow, so a replayed request says nothing
 * new), ours in an OK for its nonce; the data connection stays as it is.
 * Where UDP does not pass, this is how an end of stream is confirmed
 * without a reconnect. */
static void
answer_status(struct rock_session *s, struct reconnect *rc,
    const struct rock_reconnect_req *rq)
{
	uint8_t out[ROCK_RECONNECT_OK_LEN];
	int fd = rc->fd;

	reconnect_free(rc, 0);
	rock_session_hold(s);
	s->last_heard_ms = rock_now_ms();
	if (rock_session_peer_count(s, rq->consumed, rq->end,
	    rq->flags & (ROCK_FLAG_WR_SHUT | ROCK_FLAG_EOF_SEEN)) == 0) {
		ok_encode(s, rq->nonce, out);
		(void)rock_sys.send(fd, out, sizeof(out), MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	rock_sys.close(fd);
	rock_session_release(s);
}

/* OK, then the replay at once: the request carried the client's count,
 * so the server's bytes follow their acceptance on the same flight. */
static void
take_over(struct rock_session *s, struct reconnect *rc,
    const struct rock_reconnect_req *rq)
{
	uint8_t out[ROCK_RECONNECT_OK_LEN];
	int fd = rc->fd, r;

	reconnect_free(rc, 0);
	ok_encode(s, rq->nonce, out);
	if (rock_sys.send(fd, out, sizeof(out), MSG_NOSIGNAL | MSG_DONTWAIT) !=
	    (ssize_t)sizeof(out)) {
		rock_sys.close(fd);
		return;
	}
	s->last_attempt = rq->attempt;
	s->e->stats.reconnects++;
	/* Where the client is now: its own newcomers may replace this rock. */
	s->peer_len = sizeof(s->peer);
	if (rock_sys.getpeername(fd, (struct sockaddr *)&s->peer, &s->peer_len) != 0)
		s->peer_len = 0;
	rock_session_hold(s);
	/* The client gave up on the old connection: so do we. */
	rock_session_fail(s, "replaced by an authenticated reconnect");
	/* The new connection's path, maybe not the old one's (0, a Fast Open
	 * reconnect not yet acknowledged: TCP's first sample tells). */
	rock_path_init(s, handshake_rtt_ms(fd));
	/* The client takes the OK as the switch: a connection dropped after
	 * it is reset, never ended with a FIN it could read as our end. */
	if (rock_session_resume_counts(s, rq->consumed, rq->end,
	    rq->flags) != 0) {
		rock_close_reset(fd);
	} else if ((r = rock_stream_replay(s)) != 0) {
		rock_close_reset(fd);
		rock_session_close(s, r, "peer's count outside what we hold");
	} else if (rock_is_direct(s)) {
		/* The application's descriptors get fd after the replay. */
		rlog_info(s->e->log, "rock %s: client reconnected; resending "
		    "from byte %llu", s->name, (unsigned long long)s->peer_consumed);
		rock_direct_resume(s, fd);
	} else if (rock_stream_attach(s, fd) != 0) {
		rock_close_reset(fd);
	} else {
		rlog_info(s->e->log, "rock %s: client reconnected; resending "
		    "from byte %llu", s->name, (unsigned long long)s->peer_consumed);
		rock_session_maybe_finish(s);
	}
	rock_session_release(s);
}

static void
check_request(struct reconnect *rc)
{
	struct rock_reconnect_req rq;
	struct rock_session *s;
	uint8_t tag[ROCK_TAG_LEN];
	const char *why;

	if (rock_reconnect_req_decode(&rq, rc->buf) != 0) {
		reconnect_reject(rc, ROCK_WERR_PROTOCOL, "malformed request");
		return;
	}
	if ((s = rock_engine_find(rc->e, rq.id)) == NULL ||
	    s->state == ROCK_ST_CLOSED) {
		reconnect_reject(rc, ROCK_WERR_UNKNOWN, "no such session");
		return;
	}
	rock_request_tag(tag, s->keys.rx, rc->buf);
	if (!rock_equal(tag, rq.tag, ROCK_TAG_LEN)) {
		reconnect_reject(rc, ROCK_WERR_AUTH, "wrong key");
		return;
	}
	s->proven = 1;
	if (rq.flags & ROCK_FLAG_STATUS) {
		answer_status(s, rc, &rq);
		return;
	}
	if ((why = superseded(s, &rq)) != NULL) {
		reconnect_reject(rc, ROCK_WERR_SUPERSEDED, why);
		return;
	}
	take_over(s, rc, &rq);
}

static void
on_reconnect_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct reconnect *rc = arg;
	struct rock_engine *e = rc->e;

	(void)fd;
	(void)what;
	rock_engine_enter(e);
	stranger(e, ROCK_STRANGER_RECONNECT,
	    "reconnect: timed out mid-request; dropped");
	reconnect_free(rc, 1);
	rock_engine_leave(e);
}

static void
on_reconnect_read(evutil_socket_t fd, short what, void *arg)
{
	struct reconnect *rc = arg;
	struct rock_engine *e = rc->e;
	int r = fill(fd, rc->buf, &rc->have, ROCK_RECONNECT_REQ_LEN);

	(void)what;
	rock_engine_enter(e);
	if (r < 0) {
		stranger(e, ROCK_STRANGER_RECONNECT,
		    "reconnect: connection closed mid-request; dropped");
		reconnect_free(rc, 1);
	} else if (r > 0) {
		check_request(rc);
	}
	rock_engine_leave(e);
}

void
rock_server_reconnect(struct rock_engine *e, int fd, const uint8_t *early,
    size_t nearly)
{
	struct reconnect *rc = calloc(1, sizeof(*rc));

	if (rc == NULL || nearly > ROCK_RECONNECT_REQ_LEN) {
		free(rc);
		rock_sys.close(fd);
		return;
	}
	e->nhandshakes++;
	rc->e = e;
	rc->fd = fd;
	memcpy(rc->buf, early, nearly);
	rc->have = nearly;
	if (arm(e, &rc->ev, &rc->deadline, fd, on_reconnect_read,
	    on_reconnect_deadline, rc) != 0) {
		reconnect_free(rc, 1);
		return;
	}
	if (rc->have == ROCK_RECONNECT_REQ_LEN)
		check_request(rc);
}
