/* rock_handover.c: a server's sessions and farewells as records, for a successor process that takes over their sockets (rockd's USR2). */
#include "config.h"

#include <fcntl.h>
#include <string.h>

#include <event2/buffer.h>

#include "rock_engine_int.h"
#include "rock_err.h"
#include "rock_rec.h"

#define SESSION_MAGIC 0x524b5353u	/* "RKSS" */
#define ENGINE_MAGIC 0x524b454eu	/* "RKEN" */
#define HANDOVER_VERSION 3
/* Far above what a ring or queue holds (rock_ring_cap_for), far below
 * what a corrupt length could make us allocate. */
#define MAX_RING (256u * 1024 * 1024)
#define MAX_FAREWELLS 100000
#define KNOWN_FLAGS (ROCK_FLAG_WR_SHUT | ROCK_FLAG_EOF_SEEN | ROCK_FLAG_QUIET | \
	ROCK_FLAG_STATUS)

static void
put_addr(struct rock_rec_out *w, const struct sockaddr_storage *ss,
    socklen_t len)
{
	rock_rec_blob(w, ss, len);
}

static socklen_t
get_addr(struct rock_rec_in *r, struct sockaddr_storage *ss)
{
	size_t len;
	const uint8_t *p = rock_rec_get_blob(r, sizeof(*ss), &len);

	memset(ss, 0, sizeof(*ss));
	if (p != NULL)
		memcpy(ss, p, len);
	if (len > 0 && len < sizeof(sa_family_t) && r->err == 0)
		r->err = ROCK_ERR_PROTOCOL;
	return (socklen_t)len;
}

/* A session in the middle of something that lives in this process only
 * (a client's dial, a status exchange, an application's thread, the wait
 * for its client's FINISHED) cannot move: rockd's server sessions between two callbacks never are. */
static int
movable(const struct rock_session *s)
{
	return s->role == ROCK_ROLE_SERVER && !rock_is_direct(s) &&
	    s->in_callback == 0 && s->dial == NULL && s->status == NULL &&
	    s->replay_fd < 0 && s->direct_pending == 0 && s->finish == NULL &&
	    (s->state == ROCK_ST_CONNECTED) == (s->fd >= 0) &&
	    s->state != ROCK_ST_CLOSED;
}

static void
put_ring(struct rock_rec_out *w, const struct rock_ring *ring)
{
	struct iovec iov[2];
	int n = 0, i;
	size_t used = rock_ring_used(ring);

	rock_rec_uint(w, ring->cap, 8);
	rock_rec_uint(w, rock_ring_base(ring), 8);
	ROCK_ASSERT(rock_ring_peek(ring, rock_ring_base(ring), iov, &n) == 0);
	rock_rec_uint(w, used, 4);
	for (i = 0; i < n; i++)
		rock_rec_bytes(w, iov[i].iov_base, iov[i].iov_len);
}

int
rock_session_export(struct rock_session *s, struct evbuffer *out)
{
	struct rock_rec_out w;
	int r;

	if (!movable(s))
		return ROCK_ERR_INVALID;
	if ((r = rock_rec_begin(&w)) != 0)
		return r;
	rock_rec_uint(&w, s->state, 1);
	rock_rec_bytes(&w, s->id, ROCK_ID_LEN);
	rock_rec_bytes(&w, s->keys.tx, ROCK_KEY_LEN);
	rock_rec_bytes(&w, s->keys.rx, ROCK_KEY_LEN);
	rock_rec_uint(&w, s->features, 2);
	put_addr(&w, &s->peer, s->peer_len);
	put_addr(&w, &s->udp_peer, s->udp_peer_len);
	rock_rec_uint(&w, s->tcp_bound, 8);
	rock_rec_uint(&w, s->consumed, 8);
	rock_rec_uint(&w, s->acked_consumed, 8);
	rock_rec_uint(&w, s->peer_consumed, 8);
	rock_rec_uint(&w, s->peer_end, 8);
	rock_rec_uint(&w, (uint64_t)s->eof_unconfirmed_ms, 8);
	rock_rec_uint(&w, s->flags, 4);
	rock_rec_uint(&w, s->peer_flags, 4);
	rock_rec_uint(&w, (uint64_t)s->want_shut << 1 | (uint64_t)s->shut_sent, 1);
	rock_rec_uint(&w, s->replay_from, 8);
	rock_rec_uint(&w, s->seq_out, 8);
	rock_rec_uint(&w, s->seq_in, 8);
	/* The group its client chose, and the packet numbers under it: the
	 * successor's records go on unconfirmed, so they are sent again. */
	rock_rec_uint(&w, s->has_anchor != 0, 1);
	rock_rec_bytes(&w, s->anchor_id, ROCK_ID_LEN);
	rock_rec_uint(&w, s->pkt_out, 8);
	rock_rec_uint(&w, s->pkt_in, 8);
	rock_rec_uint(&w, s->rx_bits, 8);
	rock_rec_uint(&w, (uint64_t)s->last_heard_ms, 8);
	rock_rec_uint(&w, (uint64_t)(s->udp_verified != 0) | (uint64_t)(s->proven != 0) << 1 |
	    (uint64_t)(s->peer_quiet != 0) << 2 | (uint64_t)(s->paused != 0) << 3 |
	    (uint64_t)(s->fast_keepalive > 0) << 4, 1);
	rock_rec_uint(&w, s->stall_mark, 8);
	rock_rec_uint(&w, (uint32_t)s->rtt_ms, 4);
	rock_rec_uint(&w, (uint32_t)s->rttvar_ms, 4);
	rock_rec_uint(&w, (uint64_t)s->suspended_at_ms, 8);
	rock_rec_uint(&w, (uint64_t)s->connected_at_ms, 8);
	rock_rec_uint(&w, s->last_attempt, 4);
	put_ring(&w, &s->ring);
	rock_rec_evbuffer(&w, s->outq);
	return rock_rec_seal(&w, SESSION_MAGIC, HANDOVER_VERSION, out);
}

int
rock_session_fd(const struct rock_session *s)
{
	return s->fd;
}

/* What no session of ours can hold: the record is not one we wrote. */
static int
coherent(const struct rock_session *s, uint64_t ring_len)
{
	uint64_t end = rock_ring_end(&s->ring);

	return (s->state == ROCK_ST_CONNECTED || s->state == ROCK_ST_SUSPENDED) &&
	    s->ring.cap > 0 && s->ring.cap <= MAX_RING &&
	    ring_len <= s->ring.cap && s->replay_from >= rock_ring_base(&s->ring) &&
	    s->replay_from <= end && s->peer_consumed <= end &&
	    s->acked_consumed <= s->consumed &&
	    (s->flags & ~KNOWN_FLAGS) == 0 && (s->peer_flags & ~KNOWN_FLAGS) == 0 &&
	    ((s->peer_flags & ROCK_FLAG_WR_SHUT) || s->peer_end == 0) &&
	    s->rtt_ms >= 0 && s->rttvar_ms >= 0;
}

static void
get_session(struct rock_rec_in *r, struct rock_session *s, uint64_t *ring_cap,
    uint64_t *ring_base)
{
	uint64_t bits;

	s->state = (enum rock_state)rock_rec_get(r, 1);
	rock_rec_get_bytes(r, s->id, ROCK_ID_LEN);
	rock_rec_get_bytes(r, s->keys.tx, ROCK_KEY_LEN);
	rock_rec_get_bytes(r, s->keys.rx, ROCK_KEY_LEN);
	s->features = (uint16_t)rock_rec_get(r, 2);
	s->peer_len = get_addr(r, &s->peer);
	s->udp_peer_len = get_addr(r, &s->udp_peer);
	s->tcp_bound = rock_rec_get(r, 8);
	s->consumed = rock_rec_get(r, 8);
	s->acked_consumed = rock_rec_get(r, 8);
	s->peer_consumed = rock_rec_get(r, 8);
	s->peer_end = rock_rec_get(r, 8);
	s->eof_unconfirmed_ms = (int64_t)rock_rec_get(r, 8);
	s->flags = (uint32_t)rock_rec_get(r, 4);
	s->peer_flags = (uint32_t)rock_rec_get(r, 4);
	bits = rock_rec_get_max(r, 1, 3);
	s->want_shut = (int)(bits >> 1);
	s->shut_sent = (int)(bits & 1);
	s->replay_from = rock_rec_get(r, 8);
	s->seq_out = rock_rec_get(r, 8);
	s->seq_in = rock_rec_get(r, 8);
	s->has_anchor = (int)rock_rec_get_max(r, 1, 1);
	rock_rec_get_bytes(r, s->anchor_id, ROCK_ID_LEN);
	s->pkt_out = rock_rec_get(r, 8);
	s->pkt_in = rock_rec_get(r, 8);
	s->rx_bits = rock_rec_get(r, 8);
	s->last_heard_ms = (int64_t)rock_rec_get(r, 8);
	bits = rock_rec_get_max(r, 1, 0x1f);
	s->udp_verified = (bits & 1) != 0;
	s->proven = (bits & 2) != 0;
	s->peer_quiet = (bits & 4) != 0;
	s->paused = (bits & 8) != 0;
	s->fast_keepalive = (bits & 16) != 0;
	s->stall_mark = rock_rec_get(r, 8);
	s->rtt_ms = (int)rock_rec_get_max(r, 4, INT32_MAX);
	s->rttvar_ms = (int)rock_rec_get_max(r, 4, INT32_MAX);
	s->suspended_at_ms = (int64_t)rock_rec_get(r, 8);
	s->connected_at_ms = (int64_t)rock_rec_get(r, 8);
	s->last_attempt = (uint32_t)rock_rec_get(r, 4);
	*ring_cap = rock_rec_get_max(r, 8, MAX_RING);
	*ring_base = rock_rec_get(r, 8);
}

/* Decode into a scratch session first: nothing is allocated or touched
 * in the engine before the record proved whole and sane. */
static int
decode(const uint8_t *p, size_t n, struct rock_session *t,
    const uint8_t **ring, size_t *ring_len, const uint8_t **outq,
    size_t *outq_len)
{
	struct rock_rec_in r;
	uint64_t cap, base;
	int err;

	memset(t, 0, sizeof(*t));
	if ((err = rock_rec_open(&r, p, n, SESSION_MAGIC, HANDOVER_VERSION)) != 0)
		return err;
	get_session(&r, t, &cap, &base);
	*ring = rock_rec_get_blob(&r, MAX_RING, ring_len);
	*outq = rock_rec_get_blob(&r, MAX_RING, outq_len);
	if ((err = rock_rec_close(&r)) != 0)
		return err;
	/* The ring's fields, for coherent(): offsets only, no storage. */
	t->ring.cap = (size_t)cap;
	t->ring.base = base;
	t->ring.len = *ring_len;
	if (base > UINT64_MAX - *ring_len || !coherent(t, *ring_len))
		return ROCK_ERR_PROTOCOL;
	return 0;
}

static void
adopt_fields(struct rock_session *s, const struct rock_session *t)
{
	s->features = t->features;
	s->peer = t->peer;
	s->peer_len = t->peer_len;
	s->udp_peer = t->udp_peer;
	s->udp_peer_len = t->udp_peer_len;
	s->tcp_bound = t->tcp_bound;
	s->consumed = t->consumed;
	s->acked_consumed = t->acked_consumed;
	s->peer_consumed = t->peer_consumed;
	s->peer_end = t->peer_end;
	s->flags = t->flags;
	s->peer_flags = t->peer_flags;
	s->want_shut = t->want_shut;
	s->shut_sent = t->shut_sent;
	s->replay_from = t->replay_from;
	s->written_max = t->ring.base + t->ring.len;
	s->seq_out = t->seq_out;
	s->seq_in = t->seq_in;
	s->has_anchor = t->has_anchor;
	memcpy(s->anchor_id, t->anchor_id, ROCK_ID_LEN);
	s->pkt_out = t->pkt_out;
	s->pkt_in = t->pkt_in;
	s->rx_bits = t->rx_bits;
	s->last_heard_ms = t->last_heard_ms;
	s->udp_verified = t->udp_verified;
	s->proven = t->proven;
	s->peer_quiet = t->peer_quiet;
	s->paused = t->paused;
	s->stall_mark = t->stall_mark;
	s->rtt_ms = t->rtt_ms;
	s->rttvar_ms = t->rttvar_ms;
	s->suspended_at_ms = t->suspended_at_ms;
	s->connected_at_ms = t->connected_at_ms;
	s->last_attempt = t->last_attempt;
	s->state = t->state;
}

int
rock_session_import(struct rock_engine *e, const uint8_t *p, size_t n, int fd,
    const struct rock_session_cbs *cbs, void *arg, struct rock_session **out)
{
	struct rock_session t, *s = NULL;
	const uint8_t *ring, *outq;
	size_t ring_len, outq_len;
	int r;

	r = decode(p, n, &t, &ring, &ring_len, &outq, &outq_len);
	if (r == 0 && (t.state == ROCK_ST_CONNECTED) != (fd >= 0))
		r = ROCK_ERR_INVALID;
	if (r == 0 && rock_engine_find(e, t.id) != NULL)
		r = ROCK_ERR_PROTOCOL;
	if (r == 0)
		r = rock_session_new(e, ROCK_ROLE_SERVER, t.id, &t.keys,
		    t.ring.cap, cbs, arg, &s);
	rock_keys_wipe(&t.keys);
	if (r != 0)
		return r;
	rock_ring_free(&s->ring);
	adopt_fields(s, &t);
	s->eof_unconfirmed_ms = t.eof_unconfirmed_ms;
	if ((r = rock_ring_init(&s->ring, t.ring.cap, t.ring.base)) == 0 &&
	    (r = rock_ring_append(&s->ring, ring, ring_len)) == 0 &&
	    outq_len > 0 && evbuffer_add(s->outq, outq, outq_len) != 0)
		r = ROCK_ERR_NOMEM;
	/* The owner may have stopped feeding a full queue: it hears when the
	 * queue is low again, here as it would have there. */
	s->drain_owed = evbuffer_get_length(s->outq) > ROCK_OUTQ_LOW;
	if (r == 0 && fd >= 0)
		r = rock_stream_adopt(s, fd, t.fast_keepalive);
	if (r != 0) {
		s->fd = -1;		/* the caller still owns fd */
		rock_session_free(s);
		return r;
	}
	*out = s;
	return 0;
}

/* ---- the engine: its announcement (so cached probes stay good), its
 * ticket keys (so its clients' tickets still resume) and the farewells
 * still being said */

int
rock_engine_export(const struct rock_engine *e, struct evbuffer *out)
{
	struct rock_ticket_key keys[2];
	struct rock_rec_out w;
	int r, i;

	if ((r = rock_rec_begin(&w)) != 0)
		return r;
	/* Workers keep theirs in the shared store, not in the engine. */
	rock_ticket_keys_get(e, keys);
	rock_rec_bytes(&w, e->announcement, ROCK_ANNOUNCE_LEN);
	for (i = 0; i < 2; i++) {
		const struct rock_ticket_key *k = &keys[i];

		rock_rec_uint(&w, (uint64_t)k->set, 1);
		rock_rec_bytes(&w, k->id, sizeof(k->id));
		rock_rec_bytes(&w, k->key, sizeof(k->key));
		rock_rec_uint(&w, (uint64_t)k->born_ms, 8);
		rock_rec_uint(&w, (uint64_t)k->retired_ms, 8);
	}
	rock_wipe(keys, sizeof(keys));
	rock_rec_uint(&w, e->nfarewells, 4);
	rock_farewell_put_all(e, &w);
	return rock_rec_seal(&w, ENGINE_MAGIC, HANDOVER_VERSION, out);
}

int
rock_engine_import(struct rock_engine *e, const uint8_t *p, size_t n)
{
	struct rock_rec_in r;
	uint64_t count, i;
	int err, j;

	if ((err = rock_rec_open(&r, p, n, ENGINE_MAGIC, HANDOVER_VERSION)) != 0)
		return err;
	rock_rec_get_bytes(&r, e->announcement, ROCK_ANNOUNCE_LEN);
	/* What we offer is ours (a predecessor of another build may have
	 * offered less, or had a register where we have none): the same
	 * random part, our features, as a worker respawned later makes. */
	rock_announce_features(e);
	/* The boot clock is the host's: the keys' ages carry over as they are. */
	for (j = 0; j < 2; j++) {
		struct rock_ticket_key *k = &e->ticket_keys[j];

		k->set = (int)rock_rec_get_max(&r, 1, 1);
		rock_rec_get_bytes(&r, k->id, sizeof(k->id));
		rock_rec_get_bytes(&r, k->key, sizeof(k->key));
		k->born_ms = (int64_t)rock_rec_get(&r, 8);
		k->retired_ms = (int64_t)rock_rec_get(&r, 8);
	}
	count = rock_rec_get_max(&r, 4, MAX_FAREWELLS);
	for (i = 0; i < count && r.err == 0; i++)
		if ((err = rock_farewell_get(e, &r)) != 0)
			return err;
	if ((err = rock_rec_close(&r)) != 0)
		return err;
	/* Only a whole record's keys go into the workers' store. */
	rock_ticket_keys_adopted(e);
	return 0;
}

int
rock_engine_udp_fd(const struct rock_engine *e)
{
	return e->udp_fd;
}
