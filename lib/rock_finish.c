/* rock_finish.c: server: a new rock waits for the client's CLIENT_FINISHED before its connection carries a byte, or a CLIENT_EARLY's bytes pass at once or are held back. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "rock_accept.h"
#include "rock_engine_int.h"
#include "rock_err.h"
#include "rock_sys.h"

/* Until the client proves it holds the session's keys, the session has no
 * data connection (SUSPENDED) and no UDP peer: a recorded first flight
 * replayed to us makes a session that never carries a byte either way and
 * ends at the deadline, and its keys (new: our nonce or key pair is)
 * cannot be proved by whoever replayed it. It counts as a handshake in
 * progress (the owner's limit on them, a hand-over's wait) until then. */
struct rock_finish {
	struct rock_session *s;
	int fd;				/* -1: a held flight's, drained */
	enum rock_finish_mode mode;
	size_t drained;			/* ROCK_FINISH_HELD: bytes dropped */
	int counted;			/* in the engine's handshakes in progress */
	int resumed;
	uint16_t udp_port;		/* the client's, taken once proven */
	uint8_t want[ROCK_FINISHED_LEN];
	uint8_t got[ROCK_FINISHED_LEN];
	size_t have;
	struct event *ev, *deadline;
};

/* The wait is over; its connection goes unless the session took it. */
static void
finish_end(struct rock_session *s, int reset)
{
	struct rock_finish *f = s->finish;

	s->finish = NULL;
	if (f->counted)
		s->e->nhandshakes--;
	rock_accept_disarm(&f->ev, &f->deadline);
	if (reset && f->fd >= 0)
		rock_close_reset(f->fd);
	rock_wipe(f->want, sizeof(f->want));
	free(f);
}

/* The client proved its keys (this FINISHED, an authentic record, an
 * authenticated reconnect): a handshake made. Its first guess of a UDP
 * peer, unless an authentic record already told where the client is. */
static void
keys_proven(struct rock_session *s, const struct rock_finish *f)
{
	s->awaiting_finished = 0;
	if (s->udp_peer_len == 0)
		rock_udp_peer_from_tcp(s, f->udp_port);
	s->e->stats.handshakes++;
	s->e->stats.resumed += (unsigned long)f->resumed;
}

/* No FINISHED on this connection. A client that proved its keys by an
 * authentic record keeps its rock (it reconnects, as after any failure);
 * otherwise the session ends unheard of: its owner saw no byte. */
static void
unproven(struct rock_session *s, const char *why)
{
	if (s->proven) {
		keys_proven(s, s->finish);
		finish_end(s, 1);
		rlog_info(s->e->log, "rock %s: %s, but its client proved its "
		    "keys by UDP: waiting for its reconnect", s->name, why);
		return;
	}
	s->e->stats.handshake_failed[ROCK_HS_FINISHED]++;
	stranger(s->e, ROCK_STRANGER_HANDSHAKE, "handshake: %s; the rock %s "
	    "is dropped before any byte reached its owner", why, s->name);
	/* Its end logs nothing more: the line above was within the
	 * strangers' budget. */
	s->close_quietly = 1;
	rock_session_close(s, ROCK_ERR_AUTH, why);
}

/* The session's events on fd are made before the wait's go: libevent
 * then keeps fd's interest as it is (an epoll_ctl DEL and ADD fewer per
 * rock, on the way of its first bytes). */
static void
proven(struct rock_session *s)
{
	int fd = s->finish->fd, r;

	keys_proven(s, s->finish);
	s->finish->fd = -1;	/* the session's now, whatever happens below */
	rock_session_hold(s);
	r = rock_is_direct(s) ? rock_direct_attach(s, fd) :
	    rock_stream_attach(s, fd);
	if (s->finish != NULL)
		finish_end(s, 0);
	if (r != 0) {
		rock_sys.close(fd);
		rock_session_close(s, r, "its data connection could not be set up");
	}
	rock_session_release(s);
}

/* A CLIENT_EARLY whose bytes were held back: they are read and dropped
 * (the client sends them again once its reconnect proves its keys) until
 * it closes this connection, as it does on reading our answer. 1 while
 * it stays open. */
static int
held_drain(struct rock_finish *f)
{
	uint8_t scratch[4096];
	ssize_t n;

	while ((n = rock_sys.recv(f->fd, scratch, sizeof(scratch),
	    MSG_DONTWAIT)) > 0)
		if ((f->drained += (size_t)n) > ROCK_EARLY_HELD_MAX)
			return 0;
	return n < 0 && (errno == EAGAIN || errno == EINTR);
}

/* The held flight's connection is over: the session waits for the
 * client's reconnect, until the deadline. */
static void
held_over(struct rock_session *s)
{
	struct rock_finish *f = s->finish;

	if (s->proven) {
		unproven(s, "its early bytes were held back");
		return;
	}
	event_free(f->ev);
	f->ev = NULL;
	rock_close_reset(f->fd);
	f->fd = -1;
	/* Nothing more comes on a connection here: a hand-over need not
	 * wait for it (its reconnect comes through the listeners, which a
	 * hand-over pauses), nor the owner's bound on handshakes count it. */
	f->counted = 0;
	s->e->nhandshakes--;
}

static void
on_finished_read(evutil_socket_t fd, short what, void *arg)
{
	struct rock_finish *f = arg;
	struct rock_session *s = f->s;
	struct rock_engine *e = s->e;
	int r = 0;

	(void)fd;
	(void)what;
	if (f->mode == ROCK_FINISH_READ)
		r = rock_accept_fill(f->fd, f->got, &f->have, sizeof(f->got));
	else if (f->mode == ROCK_FINISH_HELD)
		r = held_drain(f);
	rock_engine_enter(e);
	if (f->mode == ROCK_FINISH_EARLY)
		proven(s);
	else if (f->mode == ROCK_FINISH_HELD) {
		if (r == 0)
			held_over(s);
	} else if (r < 0)
		unproven(s, "the client left before its CLIENT_FINISHED");
	else if (r > 0 && !rock_equal(f->got, f->want, sizeof(f->want)))
		unproven(s, "a CLIENT_FINISHED not made with the session's keys "
		    "(a replayed first flight, or a broken client)");
	else if (r > 0)
		proven(s);
	rock_engine_leave(e);
}

static void
on_finished_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct rock_finish *f = arg;
	struct rock_session *s = f->s;
	struct rock_engine *e = s->e;

	(void)fd;
	(void)what;
	rock_engine_enter(e);
	unproven(s, f->mode == ROCK_FINISH_HELD ? "no reconnect in time after "
	    "its early bytes were held back" : "no CLIENT_FINISHED in time");
	rock_engine_leave(e);
}

int
rock_finish_wait(struct rock_session *s, int fd, int rtt_ms, int resumed,
    uint16_t udp_port, enum rock_finish_mode mode,
    const uint8_t want[ROCK_FINISHED_LEN])
{
	struct rock_finish *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return ROCK_ERR_NOMEM;
	f->s = s;
	f->fd = fd;
	f->mode = mode;
	f->resumed = resumed;
	f->udp_port = udp_port;
	memcpy(f->want, want, sizeof(f->want));
	if (rock_accept_arm(s->e, &f->ev, &f->deadline, fd, rtt_ms,
	    on_finished_read, on_finished_deadline, f) != 0) {
		rock_accept_disarm(&f->ev, &f->deadline);
		free(f);		/* the caller still owns fd */
		return ROCK_ERR_NOMEM;
	}
	s->finish = f;
	s->awaiting_finished = 1;
	s->suspended_at_ms = rock_now_ms();
	s->e->nhandshakes++;
	f->counted = 1;
	/* Admitted early bytes pass once the loop turns: the owner has its
	 * session by then (an attach here would call it back before). */
	if (mode == ROCK_FINISH_EARLY)
		event_active(f->ev, EV_READ, 0);
	return 0;
}

int
rock_finish_pending(const struct rock_session *s)
{
	return s->finish != NULL;
}

int
rock_session_unproven(const struct rock_session *s)
{
	return s->awaiting_finished;
}

/* The session ends, or an authenticated reconnect (made with the keys)
 * proved the client: the connection that waited for its FINISHED goes. */
void
rock_finish_cancel(struct rock_session *s, int proven_by_reconnect)
{
	if (s->finish == NULL)
		return;
	if (proven_by_reconnect)
		keys_proven(s, s->finish);
	finish_end(s, 1);
}
