/* rock_direct.c: direct mode: the application does the I/O, the engine keeps the books. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rock_engine_int.h"
#include "rock_err.h"
#include "rock_sys.h"

int
rock_direct_attach(struct rock_session *s, int fd)
{
	s->fd = fd;
	/* The keepalive backstop is armed at the engine's next tick
	 * (check_liveness), a quarter of a second at most: its first probe
	 * is a second of silence away, and a rock that ends sooner (a
	 * request and its answer) costs no four system calls for it. */
	s->fast_keepalive = -1;
	rock_path_new_connection(s);
	s->last_heard_ms = rock_now_ms();
	rock_session_set_state(s, ROCK_ST_CONNECTED, "data connection up");
	return 0;
}

int
rock_direct_fd(const struct rock_session *s)
{
	return s->fd;
}

int
rock_direct_peer_ended(const struct rock_session *s)
{
	return rock_session_peer_ended(s);
}

int
rock_direct_peer_ends_after(const struct rock_session *s, uint64_t ahead)
{
	return (s->peer_flags & ROCK_FLAG_WR_SHUT) &&
	    s->consumed + ahead == s->peer_end;
}

void
rock_direct_eof_unconfirmed(struct rock_session *s)
{
	rock_session_eof_read(s);
}

void
rock_direct_eof_confirmed(struct rock_session *s)
{
	s->in_callback++;
	s->cbs->direct->eof_confirmed(s, s->arg);
	s->in_callback--;
}

void
rock_direct_consumed(struct rock_session *s, size_t n)
{
	s->consumed += n;
	if (s->consumed - s->acked_consumed >= (uint64_t)s->e->cfg.ack_every)
		rock_control_ack_now(s);
}

/* With the ring full and no ack coming (UDP blocked, say), the TCP bound
 * says which bytes the peer has surely consumed: all but those still in
 * our send queue (SIOCOUTQ: autotuning grows it past the SO_SNDBUF seen
 * at the handshake) and what the peer's receive buffer can hold. */
size_t
rock_direct_space(struct rock_session *s)
{
	uint64_t end = rock_ring_end(&s->ring), keep;
	int outq = 0;

	if (rock_ring_space(&s->ring) > 0 || s->tcp_bound == 0 ||
	    s->state != ROCK_ST_CONNECTED || ioctl(s->fd, SIOCOUTQ, &outq) != 0)
		return rock_ring_space(&s->ring);
	keep = s->tcp_bound + (uint64_t)(outq > 0 ? outq : 0);
	if (end - rock_ring_base(&s->ring) > keep)
		(void)rock_ring_ack(&s->ring, end - keep);
	return rock_ring_space(&s->ring);
}

void
rock_direct_sending(struct rock_session *s, size_t n)
{
	s->direct_pending = n;
}

int
rock_direct_sent(struct rock_session *s, const struct iovec *iov, int iovcnt,
    size_t n)
{
	uint64_t end;
	int r;

	s->direct_pending = 0;
	if (n == 0)
		return 0;
	if ((r = rock_ring_appendv(&s->ring, iov, iovcnt, n)) != 0)
		return r;
	/* Released to the engine (the program's exit), the peer's counts
	 * are checked against written_max. */
	rock_session_wrote(s, n);
	end = rock_ring_end(&s->ring);
	return rock_ring_ack(&s->ring, s->peer_consumed < end ?
	    s->peer_consumed : end);
}

/* Bytes the application wrote before the session was in place (behind
 * a CLIENT_EARLY): its first, in the ring as written. */
int
rock_direct_written(struct rock_session *s, const void *p, size_t n)
{
	struct iovec iov = { (void *)(uintptr_t)p, n };

	if (n == 0)
		return 0;
	rock_direct_sending(s, n);
	return rock_direct_sent(s, &iov, 1, n);
}

void
rock_direct_eof(struct rock_session *s)
{
	if (s->flags & ROCK_FLAG_EOF_SEEN)
		return;
	s->flags |= ROCK_FLAG_EOF_SEEN;
	s->fin_read = 1;	/* the program read it, on this connection */
	rlog_debug(s->e->log, "rock %s: peer's end of stream after %llu bytes",
	    s->name, (unsigned long long)s->consumed);
	if (!rock_session_farewell_says_eof(s))
		rock_session_tell_peer(s);
	rock_session_maybe_finish(s);
}

/* The FIN goes out now if the owner's view is connected, else after the
 * replay. */
void
rock_direct_shutdown(struct rock_session *s, int connected)
{
	s->want_shut = 1;
	if (!connected || s->state != ROCK_ST_CONNECTED || s->shut_sent)
		return;
	s->flags |= ROCK_FLAG_WR_SHUT;
	rock_session_tell_peer(s);
	rock_sys.shutdown(s->fd, SHUT_WR);
	s->shut_sent = 1;
}

void
rock_direct_keepalive(struct rock_session *s, const struct rock_owner_ka *ka)
{
	int fast = s->fast_keepalive > 0;

	s->owner_ka = *ka;
	s->fast_keepalive = -1;
	rock_stream_keepalive(s, fast);
}

void
rock_direct_finish(struct rock_session *s)
{
	rock_session_maybe_finish(s);
}

void
rock_direct_fail(struct rock_session *s, const char *why)
{
	rock_session_fail(s, why);
}

/* Called from rock_session_fail() before the state changes. */
void
rock_direct_suspend(struct rock_session *s)
{
	s->in_callback++;
	s->cbs->direct->suspend(s, s->fd, s->arg);
	s->in_callback--;
}

void
rock_direct_stop(struct rock_session *s)
{
	if (s->ev_replay != NULL)
		event_free(s->ev_replay);
	s->ev_replay = NULL;
	/* The server took this connection: a reset, never a FIN. */
	if (s->replay_fd >= 0)
		rock_close_reset(s->replay_fd);
	s->replay_fd = -1;
}

static void
swap_in(struct rock_session *s)
{
	int fd = s->replay_fd, old = s->fd;

	s->replay_fd = -1;
	rock_direct_stop(s);
	if (rock_is_direct(s)) {
		s->in_callback++;
		s->cbs->direct->swap(s, old, fd, s->arg);
		s->in_callback--;
		/* The old connection goes only now that the new one is proven,
		 * with a reset: never a FIN the peer could take for an end. */
		rock_close_reset(old);
		s->fd = fd;
		s->fast_keepalive = -1;
		rock_path_new_connection(s);
		rock_stream_keepalive(s, !s->udp_verified);
		s->last_heard_ms = rock_now_ms();
		rock_session_set_state(s, ROCK_ST_CONNECTED, "reconnected");
		if (s->want_shut && !(s->flags & ROCK_FLAG_WR_SHUT)) {
			s->flags |= ROCK_FLAG_WR_SHUT;
			rock_session_tell_peer(s);
		}
		if (s->want_shut) {
			rock_sys.shutdown(fd, SHUT_WR);
			s->shut_sent = 1;
		}
	} else if (rock_stream_attach(s, fd) != 0) {
		/* Released meanwhile: the engine drives it from here on. */
		rock_sys.close(fd);
		rock_dial_schedule(s, 0);
		return;
	}
	rock_session_maybe_finish(s);
}

/* The ring from the peer's count onward, into the new connection, before
 * the application may write to it: order on the wire is order written. */
static void
replay_step(struct rock_session *s)
{
	struct iovec iov[2];
	int n = 0;
	ssize_t w;

	while (s->replay_from < rock_ring_end(&s->ring)) {
		if (rock_ring_peek(&s->ring, s->replay_from, iov, &n) != 0)
			goto failed;
		w = rock_sys.sendmsg(s->replay_fd, &(struct msghdr){ .msg_iov = iov,
		    .msg_iovlen = (size_t)n }, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
			/* A new path that dies mid-replay is given up like a
			 * connected one, not after the kernel's retries. */
			int ms = rock_path_dead_ms(s);
			struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

			event_add(s->ev_replay, &tv);
			return;
		}
		if (w < 0)
			goto failed;
		rock_session_wrote(s, (uint64_t)w);
	}
	swap_in(s);
	return;
failed:
	rlog_debug(s->e->log, "rock %s: replay failed: %s", s->name,
	    strerror(errno));
	rock_direct_stop(s);
	rock_dial_schedule(s, 0);
}

static void
replay_timed_out(struct rock_session *s)
{
	rlog_debug(s->e->log, "rock %s: replay stuck for %d ms: redialling",
	    s->name, rock_path_dead_ms(s));
	rock_direct_stop(s);
	rock_dial_schedule(s, 0);
}

static void
on_replay(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	rock_session_callback(arg, (what & EV_TIMEOUT) ? replay_timed_out :
	    replay_step);
}

/* An authenticated new connection; rock_stream_replay() has set the
 * resend point. The application keeps waiting until the swap. */
void
rock_direct_resume(struct rock_session *s, int fd)
{
	rock_direct_stop(s);
	s->replay_fd = fd;
	s->shut_sent = 0;
	rock_path_bound_rto(s, fd);
	s->ev_replay = event_new(s->e->base, fd, EV_WRITE, on_replay, s);
	if (s->ev_replay == NULL) {
		rock_direct_stop(s);
		rock_dial_schedule(s, 0);
		return;
	}
	replay_step(s);
}

/* cbs must not be direct; its on_data sees what still arrives. */
void
rock_direct_release(struct rock_session *s, const struct rock_session_cbs *cbs,
    void *arg)
{
	ROCK_ASSERT(cbs != NULL && cbs->direct == NULL);
	s->cbs = cbs;
	s->arg = arg;
	s->want_shut = 1;
	if (s->state != ROCK_ST_CONNECTED || s->replay_fd >= 0)
		return;
	if (rock_stream_attach(s, s->fd) != 0) {
		rock_session_fail(s, "no memory for events");
		return;
	}
	rock_session_maybe_finish(s);
}
