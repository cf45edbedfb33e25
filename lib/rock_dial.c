/* rock_dial.c: the client's authenticated reconnects, asynchronous on the engine's loop: attempts while the path is down, the first proven answer wins. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rock_engine_int.h"
#include "rock_err.h"
#include "rock_probe_file.h"
#include "rock_sys.h"

#ifndef TCP_FASTOPEN_CONNECT
#define TCP_FASTOPEN_CONNECT 30	/* Linux 4.11 */
#endif

/* ---- reconnect: asynchronous, on the engine's event loop
 *
 * While the path is down, a fresh attempt every period: a new SYN finds the
 * path's return within a period, where the kernel's own SYN retransmits
 * wait 1 s, 3 s, 7 s... Each attempt's request goes with its SYN when the
 * kernel holds a Fast Open cookie for the server, so the server's answer
 * and its replay come back one round trip after the path does. Overlapping
 * attempts are safe: the server takes the first request and refuses the
 * others as SUPERSEDED (rock_accept.c), and the first authentic answer
 * wins here. Only one suspended rock per server address dials (its scout);
 * the others wait until it finds the path up, so the cost of an outage
 * follows peers, not rocks. */

static void on_attempt(evutil_socket_t fd, short what, void *arg);
static void on_next(evutil_socket_t fd, short what, void *arg);
static void attempt_failed(struct rock_attempt *a, const char *why);
static void scout_release(struct rock_session *s, int path_up);

/* Short for the first half minute of an outage, then doubling to 2 s. */
static int
attempt_period_ms(const struct rock_session *s)
{
	int64_t down = rock_now_ms() - s->suspended_at_ms - 30000;
	int ms = 250;

	for (; down > 0 && ms < 2000; down -= 30000)
		ms *= 2;
	return ms;
}

/* One attempt: its SYN and its request answered, a loss in each allowed,
 * over the path as last measured; once its TCP handshake is done, over
 * the round trip that handshake measured (the new path may be slower). */
static int
attempt_life_ms(const struct rock_attempt *a)
{
	int rtt = a->rtt_ms > a->s->rtt_ms ? a->rtt_ms : a->s->rtt_ms;
	int ms = 2 * rock_exchange_ms(rtt);

	return ms > a->s->e->cfg.dial_timeout_ms ? ms : a->s->e->cfg.dial_timeout_ms;
}

static int
same_peer(const struct rock_session *a, const struct rock_session *b)
{
	return a->peer_len == b->peer_len &&
	    memcmp(&a->peer, &b->peer, a->peer_len) == 0;
}

/* 1: s dials (it is its peer's scout, or no slot is left to coordinate);
 * 0: another rock to the same server dials, s waits for it. */
static int
scout_claim(struct rock_session *s)
{
	struct rock_session **free_slot = NULL, *t;
	unsigned i;

	for (i = 0; i < ROCK_SCOUTS; i++) {
		t = s->e->scouts[i];
		if (t == s)
			return 1;
		if (t == NULL && free_slot == NULL)
			free_slot = &s->e->scouts[i];
		else if (t != NULL && same_peer(t, s)) {
			s->parked = 1;
			return 0;
		}
	}
	if (free_slot != NULL)
		*free_slot = s;
	return 1;
}

/* s stops scouting: the rocks waiting on it dial now. path_up: s found
 * the path up, and they all go at once without a scout; else (s ends) the
 * first of them becomes the scout. */
static void
scout_release(struct rock_session *s, int path_up)
{
	struct rock_session *t;
	unsigned i;
	int was = 0;

	for (i = 0; i < ROCK_SCOUTS; i++) {
		if (s->e->scouts[i] == s) {
			s->e->scouts[i] = NULL;
			was = 1;
		}
	}
	if (!was)
		return;
	for (t = s->e->all; t != NULL; t = t->next) {
		if (t->parked && same_peer(t, s)) {
			t->parked = 0;
			t->unscouted = path_up;
			rock_dial_schedule(t, 1);
		}
	}
}

/* With a reset: the server may have taken this attempt already, and a FIN
 * there would read as the end of our stream. */
static void
attempt_close(struct rock_attempt *a)
{
	if (a->ev != NULL)
		event_free(a->ev);
	if (a->fd >= 0)
		rock_close_reset(a->fd);
	a->ev = NULL;
	a->fd = -1;
}

static int
attempts_open(const struct rock_dial *d)
{
	int i, n = 0;

	for (i = 0; i < ROCK_DIAL_ATTEMPTS; i++)
		n += d->a[i].fd >= 0;
	return n;
}

static void
dial_free(struct rock_session *s)
{
	struct rock_dial *d = s->dial;
	int i;

	scout_release(s, 0);
	if (d == NULL)
		return;
	for (i = 0; i < ROCK_DIAL_ATTEMPTS; i++)
		attempt_close(&d->a[i]);
	if (d->ev_next != NULL)
		event_free(d->ev_next);
	free(d);
	s->dial = NULL;
}

static int
attempt_arm(struct rock_attempt *a, short what)
{
	struct rock_session *s = a->s;
	int ms = attempt_life_ms(a) - (int)(rock_now_ms() - a->started_ms);
	struct timeval tv;

	if (ms < 1)
		ms = 1;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	if (a->ev != NULL)
		event_free(a->ev);
	a->ev = event_new(s->e->base, a->fd, what, on_attempt, a);
	return a->ev == NULL ? -1 : event_add(a->ev, &tv);
}

/* The lowest attempt still open: the server does not let a request sent
 * while the attempt it took was open replace that one. */
static uint32_t
lowest_open(const struct rock_dial *d, uint32_t n)
{
	int i;

	for (i = 0; i < ROCK_DIAL_ATTEMPTS; i++)
		if (d->a[i].fd >= 0 && d->a[i].number < n)
			n = d->a[i].number;
	return n;
}

void
rock_dial_request_encode(const struct rock_session *s,
    const uint8_t nonce[ROCK_NONCE_LEN], uint32_t attempt, uint32_t since,
    uint32_t flags, uint8_t out[ROCK_RECONNECT_REQ_LEN])
{
	struct rock_reconnect_req rq;

	memset(&rq, 0, sizeof(rq));
	rq.version = ROCK_VERSION;
	memcpy(rq.id, s->id, ROCK_ID_LEN);
	memcpy(rq.nonce, nonce, ROCK_NONCE_LEN);
	rq.attempt = attempt;
	rq.since = since;
	rq.consumed = s->consumed;
	rq.end = rock_session_end(s);
	rq.flags = flags;
	rock_reconnect_req_encode(&rq, out);
	rock_request_tag(rq.tag, s->keys.tx, out);
	rock_reconnect_req_encode(&rq, out);
}

int
rock_dial_ok_decode(const struct rock_session *s,
    const uint8_t nonce[ROCK_NONCE_LEN], const uint8_t *buf,
    struct rock_reconnect_ok *ok)
{
	uint8_t tag[ROCK_TAG_LEN];

	if (rock_reconnect_ok_decode(ok, buf) != 0)
		return ROCK_ERR_PROTOCOL;
	rock_ok_tag(tag, s->keys.rx, s->id, nonce, buf);
	return rock_equal(tag, ok->tag, ROCK_TAG_LEN) ? 0 : ROCK_ERR_AUTH;
}

static int
send_request(struct rock_attempt *a, short wait)
{
	struct rock_session *s = a->s;
	uint8_t out[ROCK_RECONNECT_REQ_LEN];

	rock_random(a->nonce, ROCK_NONCE_LEN);
	rock_dial_request_encode(s, a->nonce, a->number,
	    lowest_open(s->dial, a->number), s->flags, out);
	memcpy(a->req, out, sizeof(a->req));
	/* 85 bytes on a fresh connection always fit its send buffer. */
	if (rock_sys.send(a->fd, out, sizeof(out), MSG_NOSIGNAL | MSG_DONTWAIT) !=
	    (ssize_t)sizeof(out))
		return -1;
	a->requested = 1;
	a->have = 0;
	return attempt_arm(a, wait);
}

static struct rock_attempt *
attempt_slot(struct rock_dial *d)
{
	struct rock_attempt *oldest = &d->a[0];
	int i;

	for (i = 0; i < ROCK_DIAL_ATTEMPTS; i++) {
		if (d->a[i].fd < 0)
			return &d->a[i];
		if (d->a[i].number < oldest->number)
			oldest = &d->a[i];
	}
	attempt_close(oldest);
	return oldest;
}

static void
launch_attempt(struct rock_session *s)
{
	struct rock_attempt *a = attempt_slot(s->dial);
	int one = 1;

	a->s = s;
	a->number = ++s->attempts;
	a->started_ms = rock_now_ms();
	a->requested = 0;
	a->connected = 0;
	a->rtt_ms = 0;
	a->have = 0;
	rock_lookup_next(s, &a->addr, &a->addr_len);
	a->fd = rock_sys_aside(rock_sys.socket(a->addr.ss_family,
	    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
	if (a->fd < 0) {
		attempt_failed(a, strerror(errno));
		return;
	}
	(void)rock_sys.setsockopt(a->fd, IPPROTO_TCP, TCP_FASTOPEN_CONNECT, &one, sizeof(one));
	if (rock_sys.connect(a->fd, (struct sockaddr *)&a->addr, a->addr_len) == 0) {
		/* A Fast Open cookie is cached: the request rides in the SYN;
		 * the socket turns writable when the handshake completes. */
		if (send_request(a, EV_READ | EV_WRITE) != 0)
			attempt_failed(a, strerror(errno));
		return;
	}
	if (errno != EINPROGRESS)
		attempt_failed(a, strerror(errno));
	else if (attempt_arm(a, EV_WRITE) != 0)
		attempt_failed(a, "no memory for an event");
}

static void
arm_next(struct rock_session *s)
{
	int ms = attempt_period_ms(s);
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	evtimer_add(s->dial->ev_next, &tv);
}

static void
start_round(struct rock_session *s)
{
	struct rock_dial *d;
	int i;

	if (!s->unscouted && !scout_claim(s))
		return;
	s->unscouted = 0;
	if ((d = calloc(1, sizeof(*d))) == NULL) {
		scout_release(s, 0);
		rock_dial_schedule(s, 0);
		return;
	}
	for (i = 0; i < ROCK_DIAL_ATTEMPTS; i++)
		d->a[i].fd = -1;
	s->dial = d;
	if ((d->ev_next = evtimer_new(s->e->base, on_next, s)) == NULL) {
		dial_free(s);
		rock_dial_schedule(s, 0);
		return;
	}
	launch_attempt(s);
	if (s->dial != NULL)
		arm_next(s);
}

static void
on_next(evutil_socket_t fd, short what, void *arg)
{
	struct rock_session *s = arg;

	(void)fd;
	(void)what;
	rock_engine_enter(s->e);
	if (s->dial != NULL && !s->dial->path_up) {
		rock_session_hold(s);
		rock_lookup_maybe(s, 0);
		launch_attempt(s);
		if (s->dial != NULL)
			arm_next(s);
		rock_session_release(s);
	}
	rock_engine_leave(s->e);
}

/* An attempt is over without success. While the path is down the round
 * goes on; once the path was up and every attempt failed, the server
 * itself is in trouble: back off before the next round. */
static void
attempt_failed(struct rock_attempt *a, const char *why)
{
	struct rock_session *s = a->s;

	rlog_debug(s->e->log, "rock %s: reconnect attempt %u failed: %s",
	    s->name, a->number, why);
	attempt_close(a);
	rock_lookup_maybe(s, 1);
	if (s->dial->path_up && attempts_open(s->dial) == 0) {
		dial_free(s);
		rock_dial_schedule(s, 0);
	}
}

static void
on_retry(evutil_socket_t fd, short what, void *arg)
{
	struct rock_session *s = arg;

	(void)fd;
	(void)what;
	rock_engine_enter(s->e);
	if (s->state == ROCK_ST_SUSPENDED && s->dial == NULL && s->replay_fd < 0)
		start_round(s);
	rock_engine_leave(s->e);
}

void
rock_dial_schedule(struct rock_session *s, int now)
{
	struct timeval tv = { 0, 0 };
	uint32_t r;
	int ms;

	if (s->role != ROCK_ROLE_CLIENT || s->state != ROCK_ST_SUSPENDED ||
	    s->dial != NULL || s->parked || s->replay_fd >= 0)
		return;
	if (s->ev_retry == NULL &&
	    (s->ev_retry = evtimer_new(s->e->base, on_retry, s)) == NULL)
		return;
	if (now) {
		s->backoff_ms = 0;
	} else {
		ms = s->backoff_ms == 0 ? s->e->cfg.backoff_min_ms : 2 * s->backoff_ms;
		s->backoff_ms = ms > s->e->cfg.backoff_max_ms ?
		    s->e->cfg.backoff_max_ms : ms;
		/* Half to one and a half times: rocks whose attempts a
		 * round-robin balancer sends to the wrong nodes (ELSEWHERE)
		 * must not stay in step, each taking the other's node. */
		rock_random(&r, sizeof(r));
		ms = s->backoff_ms / 2 + (int)(r % (uint32_t)(s->backoff_ms + 1));
		tv.tv_sec = ms / 1000;
		tv.tv_usec = (ms % 1000) * 1000;
	}
	evtimer_add(s->ev_retry, &tv);
}

/* Happy eyeballs (RFC 8305) on the attempts' own schedule: the first new
 * address now, the next a period later if the path is still down. */
void
rock_dial_addresses_changed(struct rock_session *s)
{
	if (s->dial != NULL && !s->dial->path_up)
		launch_attempt(s);
}

void
rock_dial_cancel(struct rock_session *s)
{
	rock_lookup_cancel(s);
	dial_free(s);
	s->parked = 0;
	s->unscouted = 0;
	if (s->ev_retry != NULL)
		event_free(s->ev_retry);
	s->ev_retry = NULL;
}

void
rock_dial_all_now(struct rock_engine *e)
{
	struct rock_session *s;

	for (s = e->all; s != NULL; s = s->next) {
		if (s->role != ROCK_ROLE_CLIENT || s->state != ROCK_ST_SUSPENDED ||
		    s->replay_fd >= 0)
			continue;
		dial_free(s);
		s->parked = 0;
		rock_dial_schedule(s, 1);
	}
}

/* Read toward `want` bytes; an ERROR message is read whole instead.
 * 1: complete, 0: more to come, -1: connection failed or closed. */
static int
read_reply(struct rock_attempt *a, size_t want)
{
	size_t need = want;
	ssize_t got;

	if (a->have > 0 && a->buf[0] == ROCK_MSG_ERROR) {
		/* A text longer than any ERROR's is not one: the buffer holds
		 * the longest only. */
		if (a->have >= 3 && a->buf[2] > ROCK_ERROR_MAX_TEXT)
			return -1;
		need = a->have < 3 ? 3 : 3 + (size_t)a->buf[2] + ROCK_SIG_LEN;
	}
	got = rock_sys.recv(a->fd, a->buf + a->have, need - a->have, MSG_DONTWAIT);
	if (got < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	if (got == 0)
		return -1;
	a->have += (size_t)got;
	if (a->buf[0] == ROCK_MSG_ERROR)
		return a->have >= 3 &&
		    a->have == 3 + (size_t)a->buf[2] + ROCK_SIG_LEN ? 1 : 0;
	return a->have == want ? 1 : 0;
}

/* The server says the session is gone or our key is wrong: give up, if
 * the server's key signed that for this attempt's request; else anyone
 * on the path could end the rock, and it is only a failed attempt. A
 * SUPERSEDED answer concerns that connection only. */
static void
attempt_refused(struct rock_attempt *a)
{
	struct rock_session *s = a->s;
	struct rock_error_msg em;
	size_t used;

	if (rock_error_decode(&em, a->buf, a->have, &used) != 0 ||
	    (em.code != ROCK_WERR_UNKNOWN && em.code != ROCK_WERR_AUTH)) {
		attempt_failed(a, em.code == ROCK_WERR_ELSEWHERE ? "another node "
		    "of the fleet answered (the session is at its own)" :
		    "server answered with an error");
		return;
	}
	if (rock_refusal_verify(s->e, s->server_ident, &em, a->buf, used, a->req,
	    sizeof(a->req)) != 0) {
		attempt_failed(a, "unsigned refusal");
		return;
	}
	/* Both streams ended and all we sent was consumed before the server
	 * let go: that is a clean end, only its last ack was lost. */
	if (em.code == ROCK_WERR_UNKNOWN && (s->flags & ROCK_FLAG_WR_SHUT) &&
	    (s->flags & ROCK_FLAG_EOF_SEEN))
		rock_session_close(s, 0, "peer finished the session");
	else
		rock_session_close(s, ROCK_ERR_RESET, em.text);
}

/* The new connection (its handshake's round trip rtt_ms, 0: unknown),
 * authenticated: replay, and put it in place. A connection dropped here
 * is reset: the server already took it. */
static void
reconnected(struct rock_session *s, int fd, int rtt_ms)
{
	int r;

	s->backoff_ms = 0;
	s->e->stats.reconnects++;
	if (rtt_ms > 0)
		rock_path_init(s, rtt_ms);
	if ((r = rock_stream_replay(s)) != 0) {
		rock_close_reset(fd);
		rock_session_close(s, r, "peer's count outside what we hold");
		return;
	}
	if (rock_is_direct(s)) {
		rlog_info(s->e->log, "rock %s: reconnected; resending from byte %llu",
		    s->name, (unsigned long long)s->peer_consumed);
		rock_direct_resume(s, fd);
		return;
	}
	if (rock_stream_attach(s, fd) != 0) {
		rock_close_reset(fd);
		rock_dial_schedule(s, 0);
		return;
	}
	rlog_info(s->e->log, "rock %s: reconnected; resending from byte %llu",
	    s->name, (unsigned long long)s->peer_consumed);
	/* The counts just exchanged may say we are both done: without UDP
	 * this is the only way the end becomes known. */
	rock_session_maybe_finish(s);
}

/* The answer came from an address the name now has: the rock lives
 * there from now on. The proof over the session's keys says it is the
 * same server; anyone else there could not have answered. */
static void
moved(struct rock_session *s, const struct rock_attempt *a)
{
	char was[ROCK_DEST_TEXT_LEN], now[ROCK_DEST_TEXT_LEN];

	rock_lookup_settle(s);
	if (a->addr_len == s->peer_len &&
	    memcmp(&a->addr, &s->peer, s->peer_len) == 0)
		return;
	rock_dest_text((const struct sockaddr *)&s->peer, s->peer_len, was);
	rock_dest_text((const struct sockaddr *)&a->addr, a->addr_len, now);
	memcpy(&s->peer, &a->addr, a->addr_len);
	s->peer_len = a->addr_len;
	rock_control_peer_moved(s);
	rlog_info(s->e->log, "rock %s: the server moved from %s to %s", s->name,
	    was, now);
}

/* The server's answer, proven with its key over our nonce: this attempt
 * wins; the others are dropped. */
static void
attempt_answered(struct rock_attempt *a)
{
	struct rock_session *s = a->s;
	struct rock_reconnect_ok ok;
	int fd, rtt, r;

	if ((r = rock_dial_ok_decode(s, a->nonce, a->buf, &ok)) ==
	    ROCK_ERR_PROTOCOL) {
		attempt_failed(a, "unexpected reply");
		return;
	}
	if (r != 0) {
		rlog_warn(s->e->log, "rock %s: reconnect: the server failed "
		    "authentication", s->name);
		attempt_failed(a, "bad answer");
		return;
	}
	fd = a->fd;
	rtt = a->rtt_ms;
	a->fd = -1;
	moved(s, a);
	dial_free(s);
	if (rock_session_resume_counts(s, ok.consumed, ok.end, ok.flags) != 0) {
		rock_close_reset(fd);
		return;
	}
	reconnected(s, fd, rtt);
}

/* The attempt's TCP handshake completed: the path is back. No more
 * attempts; the rocks waiting on this one dial now; its answer is waited
 * for over the round trip this handshake measured. */
static void
attempt_connected(struct rock_attempt *a)
{
	struct rock_tcp_sample t;

	a->connected = 1;
	a->s->dial->path_up = 1;
	scout_release(a->s, 1);
	if (rock_tcp_sample(a->fd, &t) == 0)
		a->rtt_ms = (int)(t.rtt_us / 1000);
	a->started_ms = rock_now_ms();
}

static void
attempt_step(struct rock_attempt *a, short what)
{
	int err = 0, r;
	socklen_t el = sizeof(err);

	if (what & EV_TIMEOUT) {
		attempt_failed(a, a->connected ? "no answer" : "no answer to the SYN");
		return;
	}
	if ((what & EV_WRITE) && !a->connected) {
		if (rock_sys.getsockopt(a->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0) {
			attempt_failed(a, strerror(err));
			return;
		}
		attempt_connected(a);
		r = a->requested ? attempt_arm(a, EV_READ) : send_request(a, EV_READ);
		if (r != 0)
			attempt_failed(a, strerror(errno));
		return;
	}
	r = read_reply(a, ROCK_RECONNECT_OK_LEN);
	/* Part of the answer: its event fired once, wait for the rest. */
	if (r == 0 && attempt_arm(a, EV_READ) != 0)
		attempt_failed(a, "no memory for an event");
	else if (r < 0)
		attempt_failed(a, "connection closed before the answer");
	else if (r > 0 && a->buf[0] == ROCK_MSG_ERROR)
		attempt_refused(a);
	else if (r > 0)
		attempt_answered(a);
}

static void
on_attempt(evutil_socket_t fd, short what, void *arg)
{
	struct rock_attempt *a = arg;
	struct rock_session *s = a->s;
	struct rock_engine *e = s->e;

	(void)fd;
	rock_engine_enter(e);
	rock_session_hold(s);
	attempt_step(a, what);
	rock_session_release(s);
	rock_engine_leave(e);
}
