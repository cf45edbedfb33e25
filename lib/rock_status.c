/* rock_status.c: the client's status exchange: counts and ends confirmed over a short TCP connection when UDP does not carry them. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rock_engine_int.h"
#include "rock_err.h"
#include "rock_sys.h"

#ifndef TCP_FASTOPEN_CONNECT
#define TCP_FASTOPEN_CONNECT 30	/* Linux 4.11 */
#endif

/* One exchange in flight per rock: a RECONNECT_REQUEST flagged STATUS,
 * answered by a RECONNECT_OK for its nonce; the data connection stays. */
struct rock_status {
	int fd;
	int sent;
	uint8_t nonce[ROCK_NONCE_LEN];
	uint8_t buf[ROCK_RECONNECT_OK_LEN];
	size_t have;
	struct event *ev, *deadline;
};

static void on_status(evutil_socket_t fd, short what, void *arg);

/* Wait for what comes next: room to send the request, then its answer. */
static int
status_wait(struct rock_session *s, struct rock_status *st)
{
	if (st->ev != NULL)
		event_free(st->ev);
	st->ev = event_new(s->e->base, st->fd, st->sent ?
	    EV_READ | EV_PERSIST : EV_WRITE, on_status, s);
	return st->ev == NULL || event_add(st->ev, NULL) != 0 ? -1 : 0;
}

int
rock_status_fd(const struct rock_session *s)
{
	return s->status != NULL ? s->status->fd : -1;
}

void
rock_status_free(struct rock_session *s)
{
	struct rock_status *st = s->status;

	if (st == NULL)
		return;
	if (st->ev != NULL)
		event_free(st->ev);
	if (st->deadline != NULL)
		event_free(st->deadline);
	if (st->fd >= 0)
		rock_sys.close(st->fd);
	free(st);
	s->status = NULL;
}

static int
send_request(struct rock_session *s, struct rock_status *st)
{
	uint8_t out[ROCK_RECONNECT_REQ_LEN];

	/* The server keeps no attempt count for these: attempt and since 1. */
	rock_dial_request_encode(s, st->nonce, 1, 1,
	    (s->flags & (ROCK_FLAG_WR_SHUT | ROCK_FLAG_EOF_SEEN)) |
	    ROCK_FLAG_STATUS, out);
	if (rock_sys.send(st->fd, out, sizeof(out), MSG_NOSIGNAL | MSG_DONTWAIT) !=
	    (ssize_t)sizeof(out))
		return errno == EINPROGRESS || errno == EAGAIN ? 1 : -1;
	st->sent = 1;
	return 0;
}

/* The answer, authentic for our nonce: taken as an authentic record. */
static void
take_answer(struct rock_session *s, struct rock_status *st)
{
	struct rock_reconnect_ok ok;

	if (rock_dial_ok_decode(s, st->nonce, st->buf, &ok) != 0)
		return;
	s->last_heard_ms = rock_now_ms();
	if (rock_session_peer_count(s, ok.consumed, ok.end,
	    ok.flags & (ROCK_FLAG_WR_SHUT | ROCK_FLAG_EOF_SEEN)) != 0)
		return;
	/* The server, asked, has not shut its side: the end of file we hold
	 * is not its (forged on the path, say). */
	if (s->eof_unconfirmed_ms != 0 && s->state == ROCK_ST_CONNECTED &&
	    !(s->peer_flags & ROCK_FLAG_WR_SHUT))
		rock_session_fail(s, "end of file the peer did not send");
}

static void
status_step(struct rock_session *s, short what)
{
	struct rock_status *st = s->status;
	ssize_t got;
	int r;

	if (what & EV_TIMEOUT) {
		rock_status_free(s);
		return;
	}
	if (!st->sent) {
		if ((r = send_request(s, st)) < 0 || status_wait(s, st) != 0)
			rock_status_free(s);
		return;
	}
	got = rock_sys.recv(st->fd, st->buf + st->have, sizeof(st->buf) - st->have,
	    MSG_DONTWAIT);
	if (got < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	/* An ERROR (the server lost the session, say) or a short answer:
	 * nothing learnt; the data connection's own checks go on. */
	if (got <= 0 || st->buf[0] != ROCK_MSG_RECONNECT_OK) {
		rock_status_free(s);
		return;
	}
	st->have += (size_t)got;
	if (st->have < sizeof(st->buf))
		return;
	take_answer(s, st);
	rock_status_free(s);
}

static void
on_status(evutil_socket_t fd, short what, void *arg)
{
	struct rock_session *s = arg;
	struct rock_engine *e = s->e;

	(void)fd;
	rock_engine_enter(e);
	rock_session_hold(s);
	if (s->status != NULL)
		status_step(s, what);
	rock_session_release(s);
	rock_engine_leave(e);
}

static int
status_open(struct rock_session *s, struct rock_status *st)
{
	int one = 1;

	st->fd = rock_sys_aside(rock_sys.socket(s->peer.ss_family,
	    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
	if (st->fd < 0)
		return -1;
	/* With a cookie the request rides in the SYN: one round trip. */
	(void)rock_sys.setsockopt(st->fd, IPPROTO_TCP, TCP_FASTOPEN_CONNECT, &one,
	    sizeof(one));
	if (rock_sys.connect(st->fd, (struct sockaddr *)&s->peer, s->peer_len) == 0)
		return send_request(s, st) < 0 ? -1 : 0;
	return errno == EINPROGRESS ? 0 : -1;
}

/* On the engine's loop only: the socket calls must not meet the shim's
 * hooks of an application's thread. */
void
rock_status_send(struct rock_session *s)
{
	struct rock_status *st;
	int ms = 2 * rock_exchange_ms(s->rtt_ms);
	struct timeval tv;

	if (s->role != ROCK_ROLE_CLIENT || s->status != NULL ||
	    s->state != ROCK_ST_CONNECTED || !(s->features & ROCK_FEAT_RECONNECT))
		return;
	if ((st = calloc(1, sizeof(*st))) == NULL)
		return;
	s->status_wanted = 0;
	s->status = st;
	rock_random(st->nonce, ROCK_NONCE_LEN);
	if (ms < 2000)
		ms = 2000;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	if (status_open(s, st) != 0 || status_wait(s, st) != 0 ||
	    (st->deadline = evtimer_new(s->e->base, on_status, s)) == NULL ||
	    event_add(st->deadline, &tv) != 0) {
		rock_status_free(s);
		return;
	}
	s->e->stats.status_exchanges++;
	rlog_debug(s->e->log, "rock %s: asking the server for its counts over "
	    "TCP", s->name);
}
