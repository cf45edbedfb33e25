/* rock_session.c: a rock's life: creation, id table, state transitions, counts, end. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rock_engine_int.h"
#include "rock_err.h"
#include "rock_sys.h"

void
rock_assert_fail(const char *what, const char *file, int line)
{
	char msg[512];
	int n = snprintf(msg, sizeof(msg), "rocks: invariant broken: %s (%s:%d)\n",
	    what, file, line);

	(void)!rock_sys.write(STDERR_FILENO, msg, n > 0 ? (size_t)n : 0);
	abort();
}

int64_t
rock_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *
rock_state_name(enum rock_state st)
{
	switch (st) {
	case ROCK_ST_CONNECTED:
		return "CONNECTED";
	case ROCK_ST_SUSPENDED:
		return "SUSPENDED";
	case ROCK_ST_CLOSED:
		return "CLOSED";
	}
	return "?";
}

static size_t
bucket_of(const struct rock_engine *e, const uint8_t id[ROCK_ID_LEN])
{
	return (size_t)(rock_id_hash(e->id_hash_key, id, ROCK_ID_LEN) %
	    e->table_size);
}

static int
table_grow(struct rock_engine *e)
{
	size_t n = e->table_size ? e->table_size * 2 : 256, i;
	struct rock_session **t = calloc(n, sizeof(*t)), *s, *next;
	size_t old = e->table_size;
	struct rock_session **ot = e->table;

	if (t == NULL)
		return ROCK_ERR_NOMEM;
	e->table = t;
	e->table_size = n;
	for (i = 0; i < old; i++) {
		for (s = ot[i]; s != NULL; s = next) {
			size_t b = bucket_of(e, s->id);

			next = s->hnext;
			s->hnext = t[b];
			t[b] = s;
		}
	}
	free(ot);
	return 0;
}

struct rock_session *
rock_engine_find(struct rock_engine *e, const uint8_t id[ROCK_ID_LEN])
{
	struct rock_session *s;

	if (e->table_size == 0)
		return NULL;
	/* Ids are public (every packet carries them): compared plainly. */
	for (s = e->table[bucket_of(e, id)]; s != NULL; s = s->hnext)
		if (memcmp(s->id, id, ROCK_ID_LEN) == 0)
			return s;
	return NULL;
}

static int
table_insert(struct rock_engine *e, struct rock_session *s)
{
	size_t b;
	int r;

	if (e->nsessions + 1 > e->table_size && (r = table_grow(e)) != 0)
		return r;
	b = bucket_of(e, s->id);
	s->hnext = e->table[b];
	e->table[b] = s;
	s->next = e->all;
	if (e->all != NULL)
		e->all->prev = s;
	e->all = s;
	e->nsessions++;
	return 0;
}

static void
table_remove(struct rock_engine *e, struct rock_session *s)
{
	struct rock_session **p = &e->table[bucket_of(e, s->id)];

	while (*p != s) {
		ROCK_ASSERT(*p != NULL);
		p = &(*p)->hnext;
	}
	*p = s->hnext;
	if (s->prev != NULL)
		s->prev->next = s->next;
	else
		e->all = s->next;
	if (s->next != NULL)
		s->next->prev = s->prev;
	e->nsessions--;
}

int
rock_session_new(struct rock_engine *e, enum rock_role role,
    const uint8_t id[ROCK_ID_LEN], const struct rock_keys *keys,
    size_t ring_cap, const struct rock_session_cbs *cbs, void *arg,
    struct rock_session **out)
{
	struct rock_session *s = calloc(1, sizeof(*s));
	int r = ROCK_ERR_NOMEM;

	if (s == NULL)
		return ROCK_ERR_NOMEM;
	s->e = e;
	s->role = role;
	s->state = ROCK_ST_SUSPENDED;	/* until a data connection attaches */
	s->state_since_ms = rock_now_ms();
	s->fd = -1;
	s->replay_fd = -1;
	memcpy(s->id, id, ROCK_ID_LEN);
	snprintf(s->name, sizeof(s->name), "%02x%02x%02x%02x", id[0], id[1],
	    id[2], id[3]);
	s->keys = *keys;
	s->cbs = cbs;
	s->arg = arg;
	s->last_heard_ms = rock_now_ms();
	rock_path_init(s, 0);
	if ((s->outq = evbuffer_new()) == NULL ||
	    (r = rock_ring_init(&s->ring, ring_cap, 0)) != 0 ||
	    (r = table_insert(e, s)) != 0) {
		if (s->outq != NULL)
			evbuffer_free(s->outq);
		rock_ring_free(&s->ring);
		rock_keys_wipe(&s->keys);
		free(s);
		return r;
	}
	*out = s;
	return 0;
}

void
rock_session_set_state(struct rock_session *s, enum rock_state to,
    const char *why)
{
	enum rock_state from = s->state;

	if (from == to)
		return;
	s->state = to;
	s->state_since_ms = rock_now_ms();
	/* The first connection is no reconnect. */
	if (to == ROCK_ST_CONNECTED && s->connected_at_ms != 0)
		s->reconnects++;
	rlog_debug(s->e->log, "rock %s: %s -> %s (%s)", s->name,
	    rock_state_name(from), rock_state_name(to), why);
	if (to == ROCK_ST_SUSPENDED)
		s->suspended_at_ms = rock_now_ms();
	if (to == ROCK_ST_CONNECTED)
		s->connected_at_ms = rock_now_ms();
	if (s->cbs != NULL && s->cbs->on_state != NULL) {
		const char *outer = s->state_why;

		s->in_callback++;
		s->state_why = why;
		s->cbs->on_state(s, from, to, s->arg);
		s->state_why = outer;
		s->in_callback--;
	}
}

void
rock_close_reset(int fd)
{
	struct linger lg = { 1, 0 };

	if (fd < 0)
		return;
	rock_sys.setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	rock_sys.close(fd);
}

void
rock_session_fail(struct rock_session *s, const char *why)
{
	if (s->state != ROCK_ST_CONNECTED)
		return;
	if (rock_is_direct(s))
		rock_direct_suspend(s);
	rock_stream_detach(s);
	/* The server cannot redial: its side of a dead connection only holds
	 * a descriptor. A reset, never a FIN, so the client (if the failure
	 * was only ours) sees a failure and not an end of stream. */
	if (s->role == ROCK_ROLE_SERVER) {
		rock_close_reset(s->fd);
		s->fd = -1;
	}
	rock_session_set_state(s, ROCK_ST_SUSPENDED, why);
	/* A connection that fails as soon as it is up is not helped by
	 * redialling at once, again and again: then the back-off applies. */
	if (s->role == ROCK_ROLE_CLIENT && (s->features & ROCK_FEAT_RECONNECT))
		rock_dial_schedule(s, s->suspended_at_ms - s->connected_at_ms >= 1000);
	else if (!(s->features & ROCK_FEAT_RECONNECT))
		rock_session_close(s, ROCK_ERR_SYSTEM, "reconnect not granted");
}

/* A finished rock's connection may still bring the peer's FIN, or bytes
 * behind it (the FIN of a connection that replaced the one whose FIN we
 * read, say): closed with them unread, or before they come, it would
 * answer them with a reset, and a peer still reading sees ECONNRESET for
 * a stream that ended. It is held and read until the FIN (rock_drain.c).
 * In direct mode the program holds the socket: ours is only a copy of
 * the descriptor, and its reads are the program's. */
static void
close_data(struct rock_session *s, int err)
{
	if (s->fd < 0)
		return;
	/* The program's socket (direct mode) ended in error: its waiters,
	 * in the kernel or in a poll with nothing hidden, wake to take the
	 * error; what is queued stays readable, and nothing is sent. */
	if (err != 0 && rock_is_direct(s))
		rock_sys.shutdown(s->fd, SHUT_RD);
	if (err != 0 || rock_is_direct(s))
		rock_sys.close(s->fd);
	else if (rock_drain_close(s->e, s->fd, s->fin_read))
		rlog_debug(s->e->log, "rock %s: data connection held for the "
		    "peer's FIN, %d ms at most", s->name, ROCK_FAREWELL_MS);
	s->fd = -1;
}

void
rock_session_close(struct rock_session *s, int err, const char *why)
{
	if (s->state == ROCK_ST_CLOSED)
		return;
	rock_dial_cancel(s);
	rock_finish_cancel(s, 0);
	rock_status_free(s);
	rock_direct_stop(s);
	rock_stream_detach(s);
	close_data(s, err);
	if (err != 0 && !s->close_quietly)
		rlog_info(s->e->log, "rock %s: closed: %s", s->name, why);
	rock_session_set_state(s, ROCK_ST_CLOSED, why);
	if (s->cbs != NULL && s->cbs->on_closed != NULL) {
		const char *outer = s->state_why;

		s->in_callback++;
		s->state_why = why;
		s->cbs->on_closed(s, err, s->arg);
		s->state_why = outer;
		s->in_callback--;
	}
	if (s->free_pending && s->in_callback == 0)
		rock_session_free(s);
}

static int
bad_end(struct rock_session *s, const char *why)
{
	rock_session_close(s, ROCK_ERR_PROTOCOL, why);
	return ROCK_ERR_PROTOCOL;
}

uint64_t
rock_session_end(const struct rock_session *s)
{
	return (s->flags & ROCK_FLAG_WR_SHUT) ? rock_ring_end(&s->ring) : 0;
}

int
rock_session_peer_ended(const struct rock_session *s)
{
	return (s->peer_flags & ROCK_FLAG_WR_SHUT) && s->consumed == s->peer_end;
}

/* The peer's flags, and its stream's length once it shut down writing:
 * final, and never short of what we have read. Anything else is a peer
 * that lies: the session ends. */
static int
take_peer_end(struct rock_session *s, uint64_t end, uint32_t flags)
{
	if (!(flags & ROCK_FLAG_WR_SHUT) && end != 0)
		return bad_end(s, "an end of stream without its flag");
	if ((flags & ROCK_FLAG_WR_SHUT) && (s->peer_flags & ROCK_FLAG_WR_SHUT) &&
	    end != s->peer_end)
		return bad_end(s, "a second, different end of stream");
	if ((flags & ROCK_FLAG_WR_SHUT) && end < s->consumed)
		return bad_end(s, "an end of stream before bytes we read");
	if (flags & ROCK_FLAG_WR_SHUT)
		s->peer_end = end;
	s->peer_flags |= flags & (ROCK_FLAG_WR_SHUT | ROCK_FLAG_EOF_SEEN);
	return 0;
}

static void
eof_confirmed(struct rock_session *s)
{
	if (rock_is_direct(s))
		rock_direct_eof_confirmed(s);
	else
		rock_stream_eof(s);
}

/* An end of file is the peer's end of stream only when the peer said so,
 * authenticated, at the count we have read to. Its word may come after
 * the FIN (UDP is slower, or lost): we wait for it, no longer than the
 * path's dead time, then take the end of file for a failure, as we do a
 * FIN before the peer's last byte: a FIN the peer's program never asked
 * for (forged on the path, or its kernel's when the peer died) must not
 * end the stream. The reconnect brings the peer's word, or an error. */
void
rock_session_eof_read(struct rock_session *s)
{
	if (s->state != ROCK_ST_CONNECTED)
		return;
	if (rock_session_peer_ended(s)) {
		eof_confirmed(s);
		return;
	}
	if (s->peer_flags & ROCK_FLAG_WR_SHUT) {
		rock_session_fail(s, "end of file before the peer's last byte");
		return;
	}
	if (s->eof_unconfirmed_ms == 0)
		s->eof_unconfirmed_ms = rock_now_ms();
}

/* Reading the peer's end ends s, and its farewell will say so over a
 * control channel known to carry it: a record before it would say
 * nothing more. */
int
rock_session_farewell_says_eof(const struct rock_session *s)
{
	return rock_session_done(s) && s->udp_verified && !s->peer_quiet;
}

void
rock_session_tell_peer(struct rock_session *s)
{
	rock_control_ack_now(s);
	/* No record ever came back, or the peer says it hears none of ours:
	 * ours are not getting through. */
	if (s->role == ROCK_ROLE_CLIENT && (!s->udp_verified || s->peer_quiet))
		s->status_wanted = 1;	/* sent by the next tick, on the loop */
}

void
rock_session_eof_check(struct rock_session *s, int64_t now)
{
	if (s->eof_unconfirmed_ms == 0 || s->state != ROCK_ST_CONNECTED)
		return;
	if (rock_session_peer_ended(s)) {
		s->eof_unconfirmed_ms = 0;
		eof_confirmed(s);
		return;
	}
	/* The record with the peer's end is sent with its FIN and repeated
	 * every interval: one interval without it, and the client asks. */
	if (now - s->eof_unconfirmed_ms >= s->e->cfg.hb_interval_ms &&
	    s->status == NULL)
		s->status_wanted = 1;
	if ((s->peer_flags & ROCK_FLAG_WR_SHUT) ||
	    now - s->eof_unconfirmed_ms >= rock_path_dead_ms(s)) {
		rock_session_fail(s, "end of file the peer did not confirm");
	}
}

/* A count the peer proved with its key. More than we ever sent is a lie
 * (or a bug) of that peer: it costs that session, nothing else. */
int
rock_session_peer_count(struct rock_session *s, uint64_t consumed,
    uint64_t peer_end, uint32_t flags)
{
	uint64_t end = rock_ring_end(&s->ring);
	int r;

	/* In direct mode the peer can consume a write before its bytes are
	 * in our ring: the application's thread copies them just after.
	 * Otherwise the ring's end may hold bytes not written yet. */
	if (consumed > (rock_is_direct(s) ? end + s->direct_pending :
	    s->written_max)) {
		rock_session_close(s, ROCK_ERR_PROTOCOL,
		    "peer acknowledged bytes never sent");
		return ROCK_ERR_PROTOCOL;
	}
	if (flags & ROCK_FLAG_RESET) {
		rock_session_close(s, ROCK_ERR_RESET, "the peer reset it");
		return ROCK_ERR_RESET;
	}
	if (consumed > s->peer_consumed)
		s->peer_consumed = consumed;
	if ((r = rock_ring_ack(&s->ring, s->peer_consumed < end ?
	    s->peer_consumed : end)) != 0)
		return r;
	if ((r = take_peer_end(s, peer_end, flags)) != 0)
		return r;
	rock_session_eof_check(s, rock_now_ms());
	if (s->state == ROCK_ST_CLOSED)
		return 0;
	if (s->state == ROCK_ST_CONNECTED)
		rock_stream_kick(s);	/* room in the ring: write more */
	if (rock_is_direct(s) && s->cbs->on_drain != NULL) {
		s->in_callback++;
		s->cbs->on_drain(s, s->arg);
		s->in_callback--;
	}
	rock_session_maybe_finish(s);
	return 0;
}

/* Both ends closed and everything we sent consumed: nothing left to keep. */
int
rock_session_done(const struct rock_session *s)
{
	return s->state != ROCK_ST_CLOSED &&
	    (s->flags & ROCK_FLAG_WR_SHUT) && (s->flags & ROCK_FLAG_EOF_SEEN) &&
	    (s->peer_flags & ROCK_FLAG_EOF_SEEN) &&
	    s->peer_consumed == rock_ring_end(&s->ring);
}

void
rock_session_maybe_finish(struct rock_session *s)
{
	if (rock_session_done(s)) {
		/* Tell the peer we are done too, again and again for a moment:
		 * it cannot finish before it hears so. */
		rock_farewell_add(s);
		rock_session_close(s, 0, "both ends closed");
	}
}

int
rock_session_resume_counts(struct rock_session *s, uint64_t peer_consumed,
    uint64_t peer_end, uint32_t peer_flags)
{
	if (peer_consumed > s->peer_consumed)
		s->peer_consumed = peer_consumed;
	return take_peer_end(s, peer_end, peer_flags);
}

void
rock_session_callback(struct rock_session *s, void (*fn)(struct rock_session *))
{
	struct rock_engine *e = s->e;

	rock_engine_enter(e);
	rock_session_hold(s);
	fn(s);
	rock_session_release(s);
	rock_engine_leave(e);
}

void
rock_session_hold(struct rock_session *s)
{
	s->in_callback++;
}

int
rock_session_release(struct rock_session *s)
{
	ROCK_ASSERT(s->in_callback > 0);
	if (--s->in_callback == 0 && s->free_pending) {
		rock_session_free(s);
		return 0;
	}
	return 1;
}

void
rock_session_free(struct rock_session *s)
{
	if (s == NULL)
		return;
	if (s->in_callback > 0) {
		s->free_pending = 1;
		return;
	}
	rock_dial_cancel(s);
	rock_finish_cancel(s, 0);
	rock_lookup_free(s);
	rock_status_free(s);
	rock_direct_stop(s);
	rock_stream_detach(s);
	if (s->fd >= 0)
		rock_sys.close(s->fd);
	table_remove(s->e, s);
	evbuffer_free(s->outq);
	rock_ring_free(&s->ring);
	rock_keys_wipe(&s->keys);
	free(s);
}

int
rock_session_send(struct rock_session *s, const void *p, size_t n)
{
	size_t take = 0;
	int r;

	if (s->state == ROCK_ST_CLOSED || s->want_shut)
		return ROCK_ERR_INVALID;
	/* Behind nothing queued, what the ring has room for goes straight
	 * in (it is written from there): one copy, not one into the queue
	 * and one more from it into the ring. */
	if (evbuffer_get_length(s->outq) == 0 && !rock_is_direct(s)) {
		take = rock_ring_space(&s->ring);
		if (take > n)
			take = n;
	}
	/* All or nothing: the queue's room is made before the ring takes
	 * its part, so the add after it allocates nothing and cannot fail. */
	if (take < n && evbuffer_expand(s->outq, n - take) != 0)
		return ROCK_ERR_NOMEM;
	if ((r = rock_ring_append(&s->ring, p, take)) != 0)
		return r;
	if (take < n &&
	    evbuffer_add(s->outq, (const uint8_t *)p + take, n - take) != 0)
		return ROCK_ERR_NOMEM;
	if (evbuffer_get_length(s->outq) > ROCK_OUTQ_LOW)
		s->drain_owed = 1;
	/* Written on the next turn of the loop: sends made in one turn go
	 * out together instead of as one TCP segment each. */
	if (s->state == ROCK_ST_CONNECTED && s->ev_write != NULL)
		event_active(s->ev_write, EV_WRITE, 1);
	return 0;
}

size_t
rock_session_pending(const struct rock_session *s)
{
	return evbuffer_get_length(s->outq);
}

void
rock_session_shutdown(struct rock_session *s)
{
	s->want_shut = 1;
	if (s->state == ROCK_ST_CONNECTED)
		rock_stream_kick(s);
}

void
rock_session_pause(struct rock_session *s, int paused)
{
	s->paused = paused;
	if (s->state == ROCK_ST_CONNECTED)
		rock_stream_kick(s);
}

void
rock_session_abort(struct rock_session *s)
{
	rock_close_reset(s->fd);
	s->fd = -1;
	rock_session_close(s, ROCK_ERR_SYSTEM, "aborted by its owner");
}

/* Ended by its user (rock kill): the peer hears so in our last record,
 * repeated, and sees the data connection reset; both owners see
 * ROCK_ERR_RESET. connect(AF_UNSPEC) resets the connection even while
 * the application's descriptors still share it (direct mode). */
void
rock_session_kill(struct rock_session *s, const char *why)
{
	struct sockaddr sa = { .sa_family = AF_UNSPEC };

	if (s->state == ROCK_ST_CLOSED)
		return;
	s->flags |= ROCK_FLAG_RESET;
	rock_farewell_add(s);
	if (s->fd >= 0)
		(void)rock_sys.connect(s->fd, &sa, sizeof(sa));
	rock_close_reset(s->fd);
	s->fd = -1;
	rock_session_close(s, ROCK_ERR_RESET, why);
}

enum rock_state
rock_session_state(const struct rock_session *s)
{
	return s->state;
}

const char *
rock_session_state_why(const struct rock_session *s)
{
	return s->state_why != NULL ? s->state_why : "";
}

const char *
rock_session_name(const struct rock_session *s)
{
	return s->name;
}

const uint8_t *
rock_session_id(const struct rock_session *s)
{
	return s->id;
}

uint64_t
rock_session_consumed(const struct rock_session *s)
{
	return s->consumed;
}

uint64_t
rock_session_sent(const struct rock_session *s)
{
	return rock_ring_end(&s->ring);
}

uint64_t
rock_session_unacked(const struct rock_session *s)
{
	uint64_t end = rock_ring_end(&s->ring);

	return s->peer_consumed < end ? end - s->peer_consumed : 0;
}

int
rock_session_delivered(const struct rock_session *s)
{
	return (s->flags & ROCK_FLAG_WR_SHUT) && (s->peer_flags & ROCK_FLAG_EOF_SEEN) &&
	    s->peer_consumed == rock_ring_end(&s->ring);
}
