/* rock_stream.c: a rock's data connection: counted reads, ring-copied writes, replay. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "rock_engine_int.h"
#include "rock_err.h"
#include "rock_sys.h"

static void on_read(evutil_socket_t fd, short what, void *arg);
static void on_write(evutil_socket_t fd, short what, void *arg);

static int
set_int(int fd, int level, int opt, int v)
{
	return rock_sys.setsockopt(fd, level, opt, &v, sizeof(v));
}

/* Keepalive probes every second make both kernels speak on an idle data
 * connection while heartbeats are missing (rock_control.c counts every
 * segment as a sign of life). The count is high: the engine decides, the
 * kernel only gives up on a connection long dead. No TCP_USER_TIMEOUT: it
 * also ends a healthy connection whose peer does not read (zero window). */
static const struct rock_owner_ka backstop = { 1, 1, 1, 20 };

static int64_t
gives_up_s(const struct rock_owner_ka *ka)
{
	return (int64_t)ka->idle + (int64_t)ka->intvl * ka->cnt;
}

void
rock_keepalive_merge(const struct rock_owner_ka *owner, int fast,
    struct rock_owner_ka *out)
{
	static const struct rock_owner_ka none = { 0, 0, 0, 0 };

	if (owner->on && (!fast || gives_up_s(owner) < gives_up_s(&backstop)))
		*out = *owner;
	else
		*out = fast ? backstop : none;
}

void
rock_stream_keepalive(struct rock_session *s, int fast)
{
	struct rock_owner_ka ka;

	if (s->fd < 0 || s->fast_keepalive == fast)
		return;
	s->fast_keepalive = fast;
	rock_keepalive_merge(&s->owner_ka, fast, &ka);
	set_int(s->fd, SOL_SOCKET, SO_KEEPALIVE, ka.on);
	if (ka.on) {
		set_int(s->fd, IPPROTO_TCP, TCP_KEEPIDLE, ka.idle);
		set_int(s->fd, IPPROTO_TCP, TCP_KEEPINTVL, ka.intvl);
		set_int(s->fd, IPPROTO_TCP, TCP_KEEPCNT, ka.cnt);
	}
	rlog_debug(s->e->log, "rock %s: kernel keepalive backstop %s%s", s->name,
	    fast ? "armed" : "off", !s->owner_ka.on ? "" :
	    memcmp(&ka, &s->owner_ka, sizeof(ka)) == 0 ?
	    "; the program's keepalive applies" : "; over the program's keepalive");
}

/* Reading stops while the owner is full or the end of file is read. */
static void
arm_read(struct rock_session *s)
{
	if (s->paused || (s->flags & ROCK_FLAG_EOF_SEEN) ||
	    s->eof_unconfirmed_ms != 0)
		event_del(s->ev_read);
	else
		event_add(s->ev_read, NULL);
}

/* The events of the data connection fd, none added yet. */
static int
events_new(struct rock_session *s, int fd)
{
	s->ev_read = event_new(s->e->base, fd, EV_READ | EV_PERSIST, on_read, s);
	s->ev_write = event_new(s->e->base, fd, EV_WRITE | EV_PERSIST, on_write, s);
	if (s->ev_read == NULL || s->ev_write == NULL) {
		rock_stream_detach(s);
		return ROCK_ERR_NOMEM;
	}
	return 0;
}

/* A connection of ours: non-blocking (its other flags kept: a fork's
 * plain copy may share the open file), and without Nagle's delay for
 * what the stream writes; not the direct rock's own connection, which
 * the program let go (rock_direct_release): nothing is left to write on
 * it but the FIN, which TCP sends without that delay. */
static int
prepare(int fd, int same)
{
	int flags;

	if ((flags = rock_sys.fcntl(fd, F_GETFL, 0)) < 0 ||
	    (!(flags & O_NONBLOCK) &&
	    rock_sys.fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0))
		return -1;
	if (!same)
		set_int(fd, IPPROTO_TCP, TCP_NODELAY, 1);
	return 0;
}

int
rock_stream_attach(struct rock_session *s, int fd)
{
	int same = s->fd == fd;

	if (prepare(fd, same) != 0)
		return ROCK_ERR_SYSTEM;
	rock_stream_detach(s);
	/* The old connection goes only now that the new one is proven. */
	if (s->fd >= 0 && !same)
		rock_close_reset(s->fd);
	s->fd = fd;
	/* A direct rock handed to the stream keeps its connection, and
	 * with it the bound and keepalive already set on it. */
	if (same) {
		rock_path_same_connection(s);
	} else {
		s->fast_keepalive = -1;	/* armed at the next tick: see
					 * rock_direct_attach */
		rock_path_new_connection(s);
	}
	if (events_new(s, fd) != 0) {
		s->fd = -1;	/* the caller still owns fd */
		return ROCK_ERR_NOMEM;
	}
	s->last_heard_ms = rock_now_ms();
	rock_session_set_state(s, ROCK_ST_CONNECTED, "data connection up");
	rock_stream_kick(s);
	return 0;
}

/* The socket's options (non-blocking, no delay, keepalive) came with it;
 * TCP's counters are read afresh (rock_path.c), the stream's are the
 * record's. */
int
rock_stream_adopt(struct rock_session *s, int fd, int fast_keepalive)
{
	int r;

	int64_t eof = s->eof_unconfirmed_ms;

	if ((r = events_new(s, fd)) != 0)
		return r;
	s->fd = fd;
	s->fast_keepalive = fast_keepalive;
	rock_path_adopted_connection(s);
	s->eof_unconfirmed_ms = eof;
	/* Armed only: the loop writes and reads once it runs, which is
	 * after the predecessor let go of the socket. */
	arm_read(s);
	event_active(s->ev_write, EV_WRITE, 1);
	return 0;
}

void
rock_stream_detach(struct rock_session *s)
{
	if (s->ev_read != NULL)
		event_free(s->ev_read);
	if (s->ev_write != NULL)
		event_free(s->ev_write);
	if (s->ev_tell != NULL)
		event_free(s->ev_tell);
	s->ev_read = s->ev_write = s->ev_tell = NULL;
}

/* Restart sending at the peer's count: everything after it is resent. */
int
rock_stream_replay(struct rock_session *s)
{
	int r;

	if (s->peer_consumed < rock_ring_base(&s->ring))
		return ROCK_ERR_LOST;
	if ((r = rock_ring_ack(&s->ring, s->peer_consumed)) != 0)
		return r;
	s->replay_from = s->peer_consumed;
	/* A WR_SHUT of ours is re-sent after the replay. */
	s->shut_sent = 0;
	return 0;
}

/* 1: wrote everything it could without blocking; 0: blocked; -1: failed. */
static int
write_replay(struct rock_session *s)
{
	struct iovec iov[2];
	struct msghdr m = { .msg_iov = iov };
	int n = 0, r;
	ssize_t w;

	while (s->replay_from < rock_ring_end(&s->ring)) {
		if ((r = rock_ring_peek(&s->ring, s->replay_from, iov, &n)) != 0)
			return -1;
		m.msg_iovlen = (size_t)n;
		/* A reset connection is an error here, not SIGPIPE for the
		 * whole process (a keeper, a program that embeds the engine). */
		w = rock_sys.sendmsg(s->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		rock_session_wrote(s, (uint64_t)w);
	}
	return 1;
}

/* The ring room after which a send_from that found it full is told to
 * read again: a read's worth, so it does not read a few bytes a time. */
static size_t
room_low(const struct rock_session *s)
{
	return s->ring.cap < ROCK_READ_CHUNK ? s->ring.cap : ROCK_READ_CHUNK;
}

/* With the ring (nearly) full and no ack coming (UDP blocked, say), the
 * TCP bound still says which bytes the peer has surely consumed: all but
 * the last tcp_bound written to this connection, which are those below
 * replay_from (the ring's end may hold bytes not written yet). Nearly:
 * an owner waits for a read's worth of room (room_low). */
static void
trim_by_bound(struct rock_session *s)
{
	if (rock_ring_space(&s->ring) < room_low(s) && s->tcp_bound > 0 &&
	    s->replay_from - rock_ring_base(&s->ring) > s->tcp_bound)
		(void)rock_ring_ack(&s->ring, s->replay_from - s->tcp_bound);
}

static int
write_outq(struct rock_session *s)
{
	struct evbuffer_iovec v;
	size_t space, len;
	ssize_t w;

	while (evbuffer_get_length(s->outq) > 0) {
		if (rock_ring_space(&s->ring) == 0)
			trim_by_bound(s);
		if ((space = rock_ring_space(&s->ring)) == 0)
			break;
		if (evbuffer_peek(s->outq, -1, NULL, &v, 1) < 1)
			break;
		len = v.iov_len < space ? v.iov_len : space;
		w = rock_sys.send(s->fd, v.iov_base, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		/* space was checked: the copy cannot fail but for memory */
		if (rock_ring_append(&s->ring, v.iov_base, (size_t)w) != 0)
			return -1;
		evbuffer_drain(s->outq, (size_t)w);
		rock_session_wrote(s, (uint64_t)w);
	}
	return evbuffer_get_length(s->outq) == 0 ? 1 : 0;
}

static void
maybe_shut(struct rock_session *s)
{
	if (!s->want_shut || s->shut_sent ||
	    evbuffer_get_length(s->outq) > 0 ||
	    s->replay_from < rock_ring_end(&s->ring))
		return;
	/* The word on the control channel first, then the FIN: a direct-mode
	 * peer reading end of file on a closed socket looks for that word. */
	s->flags |= ROCK_FLAG_WR_SHUT;
	rock_session_tell_peer(s);
	rock_sys.shutdown(s->fd, SHUT_WR);
	s->shut_sent = 1;
}

/* Write what can be written; arm the write event only when blocked. */
static void
flush(struct rock_session *s)
{
	int r = write_replay(s);
	int blocked;

	if (r > 0)
		r = write_outq(s);
	if (r < 0) {
		rock_session_fail(s, strerror(errno));
		return;
	}
	blocked = r == 0 && (s->replay_from < rock_ring_end(&s->ring) ||
	    rock_ring_space(&s->ring) > 0);
	if (blocked)
		event_add(s->ev_write, NULL);
	else
		event_del(s->ev_write);
	maybe_shut(s);
	trim_by_bound(s);
	if (s->drain_owed && evbuffer_get_length(s->outq) <= ROCK_OUTQ_LOW &&
	    (!s->room_owed || rock_ring_space(&s->ring) >= room_low(s)) &&
	    s->cbs != NULL && s->cbs->on_drain != NULL) {
		s->drain_owed = s->room_owed = 0;
		s->cbs->on_drain(s, s->arg);
	}
}

/* The least a read is offered: the ring's smallest storage, never a
 * few bytes at a time (as room_low's bound, below). */
#define READ_OFFER_MIN 4096

/* What a read into the ring may take: all its storage has free, and
 * more (growing it) only as far as the source has shown it has: a
 * request/response stream keeps a small ring, where offering every read
 * the whole room grew it to 256 KiB and compaction shrank it back at
 * every tick (in rockd, 0.13 brk and 0.18 page faults per round trip at
 * 2,000 rocks); a bulk stream's offers double up to the room. */
static size_t
read_offer(const struct rock_session *s, size_t want)
{
	size_t storage = rock_ring_memory(&s->ring) - rock_ring_used(&s->ring);
	size_t offer = s->read_offer > storage ? s->read_offer : storage;

	/* Storage nearly full (or none): grow it rather than read a few
	 * bytes; half the floor free is still a read's worth. */
	if (offer < READ_OFFER_MIN / 2)
		offer = READ_OFFER_MIN;
	return offer < want ? offer : want;
}

/* The owner's bytes go behind those already queued: into the queue while
 * it holds any (after a hand-over, say), else straight into the ring,
 * whose cap then bounds them as it bounds the bytes in flight. */
ssize_t
rock_session_send_from(struct rock_session *s, int fd, size_t max)
{
	struct iovec iov[2];
	size_t room, offer;
	ssize_t n;
	int cnt, r;

	if (s->state == ROCK_ST_CLOSED || s->want_shut || max == 0)
		return ROCK_ERR_INVALID;
	if (evbuffer_get_length(s->outq) > 0 || rock_is_direct(s)) {
		if (evbuffer_get_length(s->outq) > ROCK_OUTQ_LOW) {
			s->drain_owed = 1;
			return ROCK_ERR_FULL;
		}
		if (max > ROCK_READ_CHUNK)
			max = ROCK_READ_CHUNK;	/* evbuffer_read's int */
		if ((n = evbuffer_read(s->outq, fd, (int)max)) < 0)
			return ROCK_ERR_SYSTEM;
	} else {
		trim_by_bound(s);
		if ((room = rock_ring_space(&s->ring)) == 0) {
			s->drain_owed = s->room_owed = 1;
			return ROCK_ERR_FULL;
		}
		offer = read_offer(s, max < room ? max : room);
		if ((r = rock_ring_tail(&s->ring, offer, iov, &cnt)) != 0)
			return r;
		if ((n = rock_sys.readv(fd, iov, cnt)) < 0)
			return ROCK_ERR_SYSTEM;
		s->read_offer = (size_t)n == offer ? 2 * offer : 0;
		/* readv filled no more than the segments: this cannot fail */
		if ((r = rock_ring_commit(&s->ring, (size_t)n)) != 0)
			return r;
	}
	/* Written on the next turn of the loop, as rock_session_send's. */
	if (n > 0 && s->state == ROCK_ST_CONNECTED && s->ev_write != NULL)
		event_active(s->ev_write, EV_WRITE, 1);
	return n;
}

void
rock_stream_kick(struct rock_session *s)
{
	if (s->state != ROCK_ST_CONNECTED || s->ev_read == NULL)
		return;
	arm_read(s);
	rock_session_hold(s);
	flush(s);
	rock_session_release(s);
}

static void
on_write(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	rock_session_callback(arg, flush);
}

/* The record that says we read the peer's end, unless one went since. */
static void
tell_due(struct rock_session *s)
{
	if (s->state == ROCK_ST_CONNECTED && !rock_control_word_sent(s))
		rock_session_tell_peer(s);
}

static void
on_tell(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	rock_session_callback(arg, tell_due);
}

/* A server's owner that reads its client's end mostly ends its own side
 * at once (a backend closing on the end of its request): one record then
 * says both, where two went (one datagram per close less for the server,
 * and one wake-up less for the client). The peer's application waits for
 * neither: its end of stream is in the other record. The tick would send
 * it too, an interval later. */
static void
tell_soon(struct rock_session *s)
{
	static const struct timeval soon = { 0, ROCK_TELL_SOON_MS * 1000 };

	if (s->ev_tell == NULL &&
	    (s->ev_tell = evtimer_new(s->e->base, on_tell, s)) == NULL) {
		rock_session_tell_peer(s);
		return;
	}
	evtimer_add(s->ev_tell, &soon);
}

void
rock_stream_eof(struct rock_session *s)
{
	s->flags |= ROCK_FLAG_EOF_SEEN;
	event_del(s->ev_read);
	rlog_debug(s->e->log, "rock %s: peer's end of stream after %llu bytes",
	    s->name, (unsigned long long)s->consumed);
	/* A rock this ends has its farewell say so. Without a control
	 * channel known to carry it the record goes at once (and asks for
	 * the status exchange). */
	if (s->role == ROCK_ROLE_SERVER && !(s->flags & ROCK_FLAG_WR_SHUT) &&
	    s->udp_verified && !s->peer_quiet && !rock_session_done(s))
		tell_soon(s);
	else if (!rock_session_farewell_says_eof(s))
		rock_session_tell_peer(s);
	if (s->cbs != NULL && s->cbs->on_eof != NULL)
		s->cbs->on_eof(s, s->arg);
	if (s->state != ROCK_ST_CLOSED)
		rock_session_maybe_finish(s);
}

static void
read_data(struct rock_session *s, int fd)
{
	uint8_t buf[ROCK_READ_CHUNK];
	ssize_t n;

	n = rock_sys.read(fd, buf, sizeof(buf));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	rock_session_hold(s);
	if (n < 0) {
		rock_session_fail(s, strerror(errno));
	} else if (n == 0) {
		event_del(s->ev_read);
		s->fin_read = 1;
		rock_session_eof_read(s);
	} else {
		s->consumed += (uint64_t)n;
		if (s->cbs != NULL && s->cbs->on_data != NULL)
			s->cbs->on_data(s, buf, (size_t)n, s->arg);
		if (s->state != ROCK_ST_CLOSED &&
		    s->consumed - s->acked_consumed >= (uint64_t)s->e->cfg.ack_every)
			rock_control_ack_now(s);
	}
	rock_session_release(s);
}

static void
on_read(evutil_socket_t fd, short what, void *arg)
{
	struct rock_session *s = arg;
	struct rock_engine *e = s->e;

	(void)what;
	rock_engine_enter(e);
	read_data(s, fd);
	rock_engine_leave(e);
}
