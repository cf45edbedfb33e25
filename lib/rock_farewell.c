/* rock_farewell.c: a finished rock's last word, repeated for a moment after its session is gone (TCP's TIME_WAIT for the control channel). */
#include "config.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "rock_engine_int.h"
#include "rock_err.h"
#include "rock_rec.h"

#define FAREWELL_COPIES 6
#define FAREWELL_COPIES_CLEAN 2
static_assert(FAREWELL_COPIES <= ROCK_CONTROL_BATCH, "one sendmmsg");
/* Every record and packet for an id no session has is looked up here: a
 * list scanned per datagram cost a mass close seconds of CPU at 4,096
 * farewells (and 7 % of a busy connect loop's). A power of two. */
#define FAREWELL_BUCKETS (ROCK_FAREWELL_MAX / 4)

struct rock_farewell {
	uint8_t id[ROCK_ID_LEN];
	struct rock_keys keys;
	uint64_t seq_out, seq_in;
	uint64_t pkt_out, pkt_in;	/* its own packets, it being their anchor */
	uint64_t rx_bits;		/* the 64 peer packets before pkt_in */
	/* Its first packet's number: a peer packet acknowledging one from
	 * there on has had the last word. */
	uint64_t first_pkt;
	int heard;			/* so acknowledged: repeated no more */
	/* Nothing to say: the peer had its last word before it ended, and
	 * ended; its packets are only acknowledged (quiet_ack()). */
	int quiet;
	int ack_owed;			/* in e->acks_owed */
	unsigned acks_left;		/* this tick's */
	int final_said;			/* its one answer to that, sent */
	int verified;			/* the session heard the peer on UDP */
	uint64_t consumed, end;
	uint32_t flags;
	struct sockaddr_storage to;
	socklen_t tolen;
	int64_t expires_ms;
	/* Answered since the last tick: two farewells (both ends finished at
	 * once) would otherwise answer each other at round-trip speed. */
	int answered;
	/* Made while the peer's packets of this batch were read: the rest of
	 * them (the peer's farewell is up to six copies at once, the first of
	 * which its copies acknowledge) get no answer of their own. */
	unsigned long born_batch;
	struct rock_farewell *next, *prev;	/* e->farewells, newest first */
	struct rock_farewell *hnext;		/* its bucket of e->farewell_table */
};

static struct rock_farewell **
bucket(struct rock_engine *e, const uint8_t id[ROCK_ID_LEN])
{
	return &e->farewell_table[rock_id_hash(e->id_hash_key, id,
	    ROCK_ID_LEN) & (FAREWELL_BUCKETS - 1)];
}

/* f goes in front of the list (the newest) or behind it (the oldest, as a
 * hand-over's farewells arrive), and into its bucket. */
static int
link_farewell(struct rock_engine *e, struct rock_farewell *f, int oldest)
{
	struct rock_farewell **b;

	if (e->farewell_table == NULL && (e->farewell_table =
	    calloc(FAREWELL_BUCKETS, sizeof(*e->farewell_table))) == NULL)
		return ROCK_ERR_NOMEM;
	if (oldest) {
		f->next = NULL;
		f->prev = e->farewell_oldest;
		*(f->prev != NULL ? &f->prev->next : &e->farewells) = f;
		e->farewell_oldest = f;
	} else {
		f->prev = NULL;
		f->next = e->farewells;
		*(f->next != NULL ? &f->next->prev : &e->farewell_oldest) = f;
		e->farewells = f;
	}
	b = bucket(e, f->id);
	f->hnext = *b;
	*b = f;
	e->nfarewells++;
	return 0;
}

static void
forget_owed(struct rock_engine *e, const struct rock_farewell *f)
{
	unsigned i;

	for (i = 0; i < e->nacks_owed; i++)
		if (e->acks_owed[i] == f)
			e->acks_owed[i] = e->acks_owed[--e->nacks_owed];
}

static void
drop(struct rock_engine *e, struct rock_farewell *f)
{
	struct rock_farewell **p;

	*(f->prev != NULL ? &f->prev->next : &e->farewells) = f->next;
	*(f->next != NULL ? &f->next->prev : &e->farewell_oldest) = f->prev;
	for (p = bucket(e, f->id); *p != f; p = &(*p)->hnext)
		ROCK_ASSERT(*p != NULL);
	*p = f->hnext;
	if (f->ack_owed)
		forget_owed(e, f);
	rock_keys_wipe(&f->keys);
	free(f);
	e->nfarewells--;
}

/* A farewell's packet: a header and its one record. */
#define FAREWELL_PKT_LEN (ROCK_HB_HEADER_LEN + ROCK_HB_RECORD_LEN)

/* The header of the farewell's next packet, in a packet of its own: the
 * rock that anchored it may be gone. What it has of the peer's packets:
 * a peer that has ended too learns that its own last word arrived, and
 * repeats it no more. */
static void
next_header(struct rock_farewell *f, struct rock_hb_header *h,
    unsigned nrecords)
{
	memset(h, 0, sizeof(*h));
	memcpy(h->anchor, f->id, ROCK_ID_LEN);
	h->seq = ++f->pkt_out;
	h->ack = f->pkt_in;
	h->ack_bits = f->rx_bits;
	h->nrecords = (uint8_t)nrecords;
}

/* The farewell's next packet, sealed. */
static void
seal(struct rock_farewell *f, uint8_t pkt[FAREWELL_PKT_LEN])
{
	struct rock_hb_header h;
	struct rock_hb_record r;

	next_header(f, &h, 1);
	memcpy(r.id, f->id, ROCK_ID_LEN);
	r.seq = ++f->seq_out;
	r.consumed = f->consumed;
	r.end = f->end;
	r.flags = f->flags;
	memcpy(r.anchor, f->id, ROCK_ID_LEN);
	rock_control_seal(&r, f->keys.tx, pkt + ROCK_HB_HEADER_LEN);
	rock_hb_packet_seal(&h, f->keys.tx, pkt);
}

/* A packet without records under the finished rock: it acknowledges the
 * peer's packets and asks for no answer (PROTOCOL 3.3). */
static void
seal_ack(struct rock_farewell *f, uint8_t pkt[ROCK_HB_HEADER_LEN])
{
	struct rock_hb_header h;

	next_header(f, &h, 0);
	rock_hb_packet_seal(&h, f->keys.tx, pkt);
}

static void
acknowledge(struct rock_engine *e, struct rock_farewell *f)
{
	uint8_t pkt[ROCK_HB_HEADER_LEN], *p = pkt;

	seal_ack(f, pkt);
	rock_control_send_packets(e, &f->to, f->tolen, &p, 1);
}

/* Acknowledgements a quiet farewell gives per tick: the peer's farewell
 * is up to six copies and one repeat a tick; a key holder's flood gets no more. */
#define QUIET_ACKS 8

/* A quiet farewell acknowledges what the peer sent: at the end of the
 * batch being read (one acknowledgement for all its copies there, the
 * newest named), else now. */
static void
quiet_ack(struct rock_engine *e, struct rock_farewell *f)
{
	if (f->ack_owed || f->acks_left == 0)
		return;
	f->acks_left--;
	if (e->udp_batch != 0 && e->nacks_owed < ROCK_CONTROL_BATCH) {
		f->ack_owed = 1;
		e->acks_owed[e->nacks_owed++] = f;
	} else {
		acknowledge(e, f);
	}
}

void
rock_farewell_batch_end(struct rock_engine *e)
{
	struct rock_farewell *f;

	while (e->nacks_owed > 0) {
		f = e->acks_owed[--e->nacks_owed];
		f->ack_owed = 0;
		acknowledge(e, f);
	}
}

/* n copies (each its own sequence number) in one call. */
static void
say(struct rock_engine *e, struct rock_farewell *f, unsigned n)
{
	uint8_t pkts[FAREWELL_COPIES][FAREWELL_PKT_LEN];
	uint8_t *p[FAREWELL_COPIES];
	unsigned i;

	ROCK_ASSERT(n <= FAREWELL_COPIES);
	for (i = 0; i < n; i++)
		seal(f, p[i] = pkts[i]);
	rock_control_send_packets(e, &f->to, f->tolen, p, n);
}

void
rock_farewell_add(struct rock_session *s)
{
	struct rock_engine *e = s->e;
	struct rock_farewell *f;

	if (s->udp_peer_len == 0 || !(s->features & ROCK_FEAT_UDP))
		return;
	if (e->nfarewells >= ROCK_FAREWELL_MAX)
		drop(e, e->farewell_oldest);
	if ((f = calloc(1, sizeof(*f))) == NULL) {
		/* One record at least (rock_direct_eof and rock_stream_eof
		 * leave it to the farewell); then the peer's fallback:
		 * silence after both ends shut. */
		rock_control_ack_now(s);
		return;
	}
	memcpy(f->id, s->id, ROCK_ID_LEN);
	f->keys = s->keys;
	f->seq_out = s->seq_out;
	f->seq_in = s->seq_in;
	f->pkt_out = s->pkt_out;
	f->pkt_in = s->pkt_in;
	f->rx_bits = s->rx_bits;
	f->first_pkt = s->pkt_out + 1;
	f->consumed = s->consumed;
	f->end = rock_session_end(s);
	f->flags = s->flags;
	f->verified = s->udp_verified;
	f->to = s->udp_peer;
	f->tolen = s->udp_peer_len;
	f->expires_ms = rock_now_ms() + ROCK_FAREWELL_MS;
	f->born_batch = e->udp_batch;
	/* The peer confirmed our final counts and flags, and we end on its
	 * word: it has ended (its own farewell, or a record that ended us
	 * and that it will repeat as one). Saying ours again would only make
	 * it answer: its packets are acknowledged, nothing more. */
	f->quiet = f->heard = rock_control_word_heard(s) &&
	    !(s->flags & ROCK_FLAG_RESET);
	if (link_farewell(e, f, 0) != 0) {
		rock_keys_wipe(&f->keys);
		free(f);
		rock_control_ack_now(s);
		return;
	}
	if (f->quiet) {
		f->acks_left = QUIET_ACKS;
		quiet_ack(e, f);
		return;
	}
	/* Copies now: the process may exit before the next tick, and a peer
	 * that hears none waits for its dead time. Six make one rock in a
	 * thousand of those closed at 20 % loss wait so (0.2^6 each). A path
	 * that lost none of the last packets each way gets two: a short
	 * connection's evidence is a packet or two, too little to bet the
	 * peer's dead time on one copy, and four fewer datagrams each side
	 * is most of what is to be saved. */
	say(e, f, rock_control_lossless(s) ? FAREWELL_COPIES_CLEAN :
	    FAREWELL_COPIES);
}

static struct rock_farewell *
find(struct rock_engine *e, const uint8_t id[ROCK_ID_LEN])
{
	struct rock_farewell *f;

	if (e->farewell_table == NULL)
		return NULL;
	/* Ids are public (every packet carries them): no need to compare
	 * them in constant time, unlike the tags. */
	for (f = *bucket(e, id); f != NULL; f = f->hnext)
		if (memcmp(f->id, id, ROCK_ID_LEN) == 0)
			break;
	return f;
}

static void
answer(struct rock_engine *e, struct rock_farewell *f,
    const struct sockaddr_storage *from, socklen_t fromlen)
{
	f->to = *from;
	f->tolen = fromlen;
	if (f->answered || (f->born_batch != 0 && f->born_batch == e->udp_batch))
		return;
	say(e, f, 1);
	f->answered = 1;
}

int
rock_farewell_answer(struct rock_engine *e, const struct rock_hb_record *r,
    const uint8_t rec[ROCK_HB_RECORD_LEN], const struct sockaddr_storage *from,
    socklen_t fromlen)
{
	struct rock_farewell *f = find(e, r->id);
	uint8_t tag[ROCK_TAG_LEN];

	if (f == NULL)
		return -1;
	rock_hb_tag(tag, f->keys.rx, rec);
	if (!rock_equal(tag, r->tag, ROCK_TAG_LEN) || r->seq <= f->seq_in)
		return -1;
	f->seq_in = r->seq;
	/* A quiet farewell acknowledges packets, not records (those in a
	 * group's packet are no farewell's). */
	if (!f->heard)
		answer(e, f, from, fromlen);
	return 0;
}

/* The peer's packets under a finished anchor: its rocks learn from the
 * farewell that it is gone, and choose another. */
int
rock_farewell_answer_packet(struct rock_engine *e,
    const struct rock_hb_header *h, const uint8_t *pkt,
    const struct sockaddr_storage *from, socklen_t fromlen)
{
	struct rock_farewell *f = find(e, h->anchor);
	size_t len = ROCK_HB_HEADER_LEN + (size_t)h->nrecords * ROCK_HB_RECORD_LEN;
	uint8_t tag[ROCK_TAG_LEN];

	if (f == NULL)
		return -1;
	rock_hb_packet_tag(tag, f->keys.rx, pkt, len);
	if (!rock_equal(tag, h->tag, ROCK_TAG_LEN) || h->seq <= f->pkt_in)
		return -1;
	rock_rx_window_note(&f->pkt_in, &f->rx_bits, h->seq);
	if (f->quiet) {
		/* Its farewell (or its answer to ours, taken for a record's
		 * answer): acknowledged, which stops it. One without records
		 * asks for nothing. */
		f->to = *from;
		f->tolen = fromlen;
		if (h->nrecords > 0)
			quiet_ack(e, f);
		return 0;
	}
	/* The peer acknowledges a packet of the farewell: it has the last
	 * word. It is told once that its own packet arrived (its farewell,
	 * if it has ended too, stops then), and nothing more is said. */
	if (h->ack >= f->first_pkt && h->ack <= f->pkt_out) {
		f->heard = 1;
		/* A packet without records asks for no answer. */
		if (!f->final_said && h->nrecords > 0) {
			f->final_said = 1;
			f->to = *from;
			f->tolen = fromlen;
			say(e, f, 1);
		}
		return 0;
	}
	if (!f->heard)
		answer(e, f, from, fromlen);
	return 0;
}

/* Packets gathered for one address, sent in one call when full or when
 * the next farewell goes elsewhere (a mass close: one peer, many). */
struct batch {
	uint8_t pkts[ROCK_CONTROL_BATCH][FAREWELL_PKT_LEN];
	uint8_t *p[ROCK_CONTROL_BATCH];
	unsigned n;
	const struct rock_farewell *to;
};

static void
flush(struct rock_engine *e, struct batch *b)
{
	unsigned i;

	for (i = 0; i < b->n; i++)
		b->p[i] = b->pkts[i];
	if (b->n > 0)
		rock_control_send_packets(e, &b->to->to, b->to->tolen, b->p,
		    b->n);
	b->n = 0;
}

static int
same_address(const struct rock_farewell *a, const struct rock_farewell *b)
{
	return a->tolen == b->tolen && memcmp(&a->to, &b->to, a->tolen) == 0;
}

void
rock_farewell_tick(struct rock_engine *e, int64_t now)
{
	struct rock_farewell *f, *next;
	struct batch b;

	b.n = 0;
	for (f = e->farewells; f != NULL; f = next) {
		next = f->next;
		if (now >= f->expires_ms) {
			drop(e, f);
			continue;
		}
		f->answered = 0;
		f->acks_left = QUIET_ACKS;
		if (f->heard)
			continue;
		if (b.n == ROCK_CONTROL_BATCH || (b.n > 0 && !same_address(b.to, f)))
			flush(e, &b);
		seal(f, b.pkts[b.n++]);
		b.to = f;
	}
	flush(e, &b);
}

size_t
rock_engine_farewells_unheard(const struct rock_engine *e)
{
	const struct rock_farewell *f;
	int64_t now = rock_now_ms();
	size_t n = 0;

	/* A reset's peer drops the session without a word back, and one
	 * never heard on UDP may not hear us either: none acknowledges. */
	for (f = e->farewells; f != NULL; f = f->next)
		if (!f->heard && now < f->expires_ms && f->verified &&
		    !(f->flags & ROCK_FLAG_RESET))
			n++;
	return n;
}

void
rock_farewell_free_all(struct rock_engine *e)
{
	while (e->farewells != NULL)
		drop(e, e->farewells);
	free(e->farewell_table);
	e->farewell_table = NULL;
}

/* ---- hand-over (rock_handover.c): a farewell moves with its time left */

static void
put(struct rock_rec_out *w, const struct rock_farewell *f)
{
	rock_rec_bytes(w, f->id, ROCK_ID_LEN);
	rock_rec_bytes(w, f->keys.tx, ROCK_KEY_LEN);
	rock_rec_bytes(w, f->keys.rx, ROCK_KEY_LEN);
	rock_rec_uint(w, f->seq_out, 8);
	rock_rec_uint(w, f->seq_in, 8);
	rock_rec_uint(w, f->pkt_out, 8);
	rock_rec_uint(w, f->pkt_in, 8);
	rock_rec_uint(w, f->consumed, 8);
	rock_rec_uint(w, f->end, 8);
	rock_rec_uint(w, f->flags, 4);
	rock_rec_blob(w, &f->to, f->tolen);
	rock_rec_uint(w, (uint64_t)f->expires_ms, 8);
}

void
rock_farewell_put_all(const struct rock_engine *e, struct rock_rec_out *w)
{
	const struct rock_farewell *f;

	for (f = e->farewells; f != NULL; f = f->next)
		put(w, f);
}

int
rock_farewell_get(struct rock_engine *e, struct rock_rec_in *r)
{
	struct rock_farewell *f = calloc(1, sizeof(*f));
	const uint8_t *to;
	size_t tolen;

	if (f == NULL)
		return ROCK_ERR_NOMEM;
	rock_rec_get_bytes(r, f->id, ROCK_ID_LEN);
	rock_rec_get_bytes(r, f->keys.tx, ROCK_KEY_LEN);
	rock_rec_get_bytes(r, f->keys.rx, ROCK_KEY_LEN);
	f->seq_out = rock_rec_get(r, 8);
	f->seq_in = rock_rec_get(r, 8);
	f->pkt_out = rock_rec_get(r, 8);
	f->pkt_in = rock_rec_get(r, 8);
	f->consumed = rock_rec_get(r, 8);
	f->end = rock_rec_get(r, 8);
	f->flags = (uint32_t)rock_rec_get(r, 4);
	to = rock_rec_get_blob(r, sizeof(f->to), &tolen);
	f->expires_ms = (int64_t)rock_rec_get(r, 8);
	/* Only its packets from here on are known to be the farewell's. */
	f->first_pkt = f->pkt_out + 1;
	if (r->err == 0 && (to == NULL || tolen < sizeof(sa_family_t)))
		r->err = ROCK_ERR_PROTOCOL;
	if (r->err != 0) {
		rock_keys_wipe(&f->keys);
		free(f);
		return r->err;
	}
	memcpy(&f->to, to, tolen);
	f->tolen = (socklen_t)tolen;
	/* They come newest first (rock_farewell_put_all); past the bound,
	 * the oldest are not taken. */
	if (e->nfarewells >= ROCK_FAREWELL_MAX || link_farewell(e, f, 1) != 0) {
		rock_keys_wipe(&f->keys);
		free(f);
	}
	return 0;
}
