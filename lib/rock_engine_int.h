/* rock_engine_int.h: the engine's objects, shared by its files and its unit tests only. */
#ifndef ROCK_ENGINE_INT_H
#define ROCK_ENGINE_INT_H

#include <event2/buffer.h>

#include "rock_engine.h"
#include "rock_probe_file.h"

/* A broken invariant of our own is a bug: stop before it spreads. Bad
 * input from a peer never gets here; it ends that session instead. */
#define ROCK_ASSERT(cond) do { \
	if (!(cond)) \
		rock_assert_fail(#cond, __FILE__, __LINE__); \
} while (0)
void rock_assert_fail(const char *what, const char *file, int line)
    __attribute__((noreturn));

#define ROCK_READ_CHUNK 65536
/* Datagrams read, or sent to one address, per system call. */
#define ROCK_CONTROL_BATCH 8
#define ROCK_OUTQ_LOW (128 * 1024)

/* Client: one connection tried toward the server while reconnecting. */
struct rock_attempt {
	struct rock_session *s;
	int fd;				/* -1: slot free */
	uint32_t number;
	int requested;			/* the request is sent (or queued with the SYN) */
	int connected;			/* its TCP handshake completed */
	int rtt_ms;			/* that handshake's round trip */
	int64_t started_ms;		/* launched, or connected */
	struct sockaddr_storage addr;	/* where it goes (rock_lookup_next) */
	socklen_t addr_len;
	uint8_t nonce[ROCK_NONCE_LEN];
	uint8_t req[ROCK_RECONNECT_REQ_LEN];	/* sent: what a refusal signs */
	uint8_t buf[ROCK_ERROR_MAX_LEN];
	size_t have;
	struct event *ev;
};

#define ROCK_DIAL_ATTEMPTS 8

/* Client: a reconnect in progress: a new attempt every period while the
 * path stays down, the first authenticated answer wins (rock_dial.c). */
struct rock_dial {
	struct rock_attempt a[ROCK_DIAL_ATTEMPTS];
	struct event *ev_next;		/* launches the next attempt */
	int path_up;			/* an attempt's TCP connected: no more */
};

struct rock_session {
	struct rock_engine *e;
	enum rock_role role;
	enum rock_state state;
	const char *state_why;		/* why, during on_state and on_closed */
	uint8_t id[ROCK_ID_LEN];
	char name[9];
	struct rock_keys keys;
	uint8_t server_ident[ROCK_IDENT_LEN];	/* client: its refusals' signer */
	uint16_t features;

	int fd;				/* data connection; -1 when none */
	struct sockaddr_storage peer;	/* where the data connection goes (client) */
	socklen_t peer_len;
	struct sockaddr_storage udp_peer; /* where heartbeats go; len 0: unknown */
	socklen_t udp_peer_len;
	/* client: the server's control socket as its UDP_ADDRESS named it,
	 * port included; len 0: at its TCP address (peer) */
	struct sockaddr_storage udp_named;
	socklen_t udp_named_len;

	/* Written to the kernel, not yet acked; past replay_from, bytes
	 * rock_session_send_from read straight in, not yet written. */
	struct rock_ring ring;
	/* What rock_session_send_from's next read may grow the ring for:
	 * twice a read that filled its offer; 0 after a short one. */
	size_t read_offer;
	uint64_t tcp_bound;		/* older bytes are surely consumed (no ack needed) */
	uint64_t consumed;		/* delivered to the owner */
	uint64_t acked_consumed;	/* our count the peer last saw from us */
	uint64_t peer_consumed;		/* highest count the peer reported */
	uint64_t peer_end;		/* the peer's stream length, once WR_SHUT */
	int64_t eof_unconfirmed_ms;	/* an EOF read, the peer's word not yet */
	struct rock_status *status;	/* client: a status exchange in flight */
	struct rock_finish *finish;	/* server: the client's FINISHED awaited */
	int awaiting_finished;		/* server: keys not yet proved by it */
	int close_quietly;		/* its end was logged as a stranger's */
	int status_wanted;		/* one to send (again) from the loop */
	int fin_asked;			/* asked about a FIN the peer did not
					 * say (CLOSE_WAIT), on this connection */
	uint32_t flags;			/* ROCK_FLAG_*: ours */
	uint32_t peer_flags;
	int want_shut;			/* owner asked; done once outq drains */
	int shut_sent;			/* FIN sent on the current connection */
	int fin_read;			/* the peer's FIN read on it */
	uint64_t replay_from;		/* next ring offset to write; end when caught up */
	/* Past every offset ever written (the ring's end may hold bytes not
	 * written yet): a peer's count beyond it is a lie. A hand-over does
	 * not carry it: the successor takes the ring's end. */
	uint64_t written_max;

	uint64_t seq_out, seq_in;
	/* The control channel (rock_control.c): a rock's records ride in
	 * packets tagged with its anchor's key, and the anchor's packets are
	 * its signs of life; without has_anchor the rock is its own. */
	uint8_t anchor_id[ROCK_ID_LEN];
	int has_anchor;
	int announced;			/* the peer confirmed a record naming it */
	uint64_t conf_consumed;		/* our counts the peer confirmed */
	uint32_t conf_flags, sent_flags;
	uint64_t sent_pkt, sent_pkt2;	/* packets that carried our current counts */
	int64_t conf_ms;		/* when the peer last confirmed a record */
	int64_t own_heard_ms;		/* an authentic record of this rock's own */
	size_t peer_slot;		/* e->peers index + 1 last found (0: none) */
	/* As an anchor: packet numbers each way, what the peer acknowledged
	 * of ours, what we received of its (for our acknowledgement). */
	uint64_t pkt_out, pkt_in, rx_bits, ack_top, ack_bits;
	unsigned long hb_stamp;		/* the tick that listed this group */
	struct rock_session *hb_list;	/* as anchor: records to send this tick */
	size_t hb_rot;			/* as anchor: where a too long list starts */
	uint8_t hb_backlog;		/* as anchor: records left after a burst */
	uint8_t hb_self;		/* as anchor: its own record is due */
	uint8_t acks_owed;		/* packets with records since our last */
	uint8_t hb_bursts;		/* as anchor: bursts sent this interval */
	uint32_t rec_interval;		/* e->hb_stamp when its record last went */
	uint64_t burst_first;		/* as anchor: the last burst's first packet */
	int64_t both_closed_ms;		/* first seen with both ends closed */
	struct rock_session *hb_next;	/* in its anchor's hb_list */
	struct rock_session *hb_gnext;	/* anchors with a packet this tick */
	int64_t last_heard_ms;		/* last authentic record or packet */
	int udp_verified;		/* ever received one */
	/* Server: the client showed it keeps this rock (an authentic record,
	 * reconnect or status, or a data connection that lasted); until then
	 * it may be a stranger's, and goes first (rock_engine_make_room). */
	int proven;
	int peer_quiet;			/* its last record: it hears none of ours */
	int fast_keepalive;		/* kernel keepalive armed as the backstop */
	struct rock_owner_ka owner_ka;	/* the application's (direct mode) */
	uint64_t stall_mark;		/* peer_consumed at the previous tick */

	/* The path (rock_path.c): TCP's round trip estimate, the last sign
	 * of life on the data connection, TCP's progress. */
	int rtt_ms, rttvar_ms;
	int rto_bound_ms;		/* TCP_RTO_MAX_MS set on fd; 0: none */
	int rto_bound_rtt;		/* the bound is for a measured round trip */
	int tcp_watched;		/* tcp_heard_ms and segs_in are set */
	int64_t tcp_heard_ms;		/* a segment from the peer arrived */
	uint32_t segs_in;
	uint64_t stall_acked;		/* TCP's acked bytes when stall_since_ms set */
	int64_t stall_since_ms;		/* unacked data, no progress since; 0: none */
	int64_t suspended_at_ms;
	int64_t connected_at_ms;	/* last SUSPENDED -> CONNECTED */
	int64_t state_since_ms;		/* the last state change (rock ls) */
	uint32_t reconnects;		/* SUSPENDED -> CONNECTED so far (rock ls) */

	struct evbuffer *outq;		/* owner's bytes not yet written */
	/* outq went past ROCK_OUTQ_LOW: the owner hears (on_drain) once it
	 * is back under, however it got there (a write that then failed
	 * too, say: an edge seen only by that write was lost with it). */
	int drain_owed;
	/* send_from found the ring full: on_drain waits for room in it too. */
	int room_owed;
	struct event *ev_read, *ev_write;
	struct event *ev_tell;		/* rock_stream_eof's record, soon */
	int paused;

	struct event *ev_retry;		/* client: next reconnect attempt */
	int backoff_ms;
	struct rock_dial *dial;
	uint32_t attempts;		/* client: reconnect attempts made */
	uint32_t last_attempt;		/* server: the attempt now in use */
	int parked;			/* client: waits for its peer's scout */
	struct rock_named *named;	/* client: the server's name; NULL: none */
	int unscouted;			/* client: the path is up, dial without one */
	int replay_fd;			/* direct: replaying into it, then swap */
	size_t direct_pending;		/* direct: a write in the kernel, not yet in the ring */
	struct event *ev_replay;

	const struct rock_session_cbs *cbs;
	void *arg;
	int in_callback;		/* freeing is deferred while > 0 */
	int free_pending;
	struct rock_session *hnext;	/* engine's id table */
	struct rock_session *next;	/* engine's list of all sessions */
	struct rock_session *prev;
};

/* A server's rock that its client never proved (no authentic record,
 * reconnect or status, no data connection as long as this) is held this
 * long once suspended, and is the first to go when rockd is full: a
 * stranger's hello costs seconds, not the suspend timeout. */
#define ROCK_UNPROVEN_MS 10000

#define ROCK_SCOUTS 16
/* Finished rocks' farewells held at most (rock_farewell.c): a bound on
 * the memory strangers' closes can make us hold. A power of two. */
#define ROCK_FAREWELL_MAX 4096
/* How long a finished rock's farewell is repeated, and its data
 * connection held for the peer's FIN (rock_drain.c): long enough for the
 * copies and a few of the peer's heartbeats at heavy loss, short of the
 * 2 s within which a closed rock leaves nothing. */
#define ROCK_FAREWELL_MS 1500
/* How long a server's record saying it read the client's end waits for
 * its owner's own end, to say both in one (rock_stream.c). */
#define ROCK_TELL_SOON_MS 5
/* A packet number received, in the window an acknowledgement reports:
 * top, the newest, and a bit for each of the 64 before it. */
void rock_rx_window_note(uint64_t *top, uint64_t *bits, uint64_t seq);
/* Finished rocks' data connections held at most: the oldest goes first. */
#define ROCK_DRAIN_MAX 4096
/* Of those, refused early flights' connections (anyone can make one, a
 * finished rock takes a proven session): past this a refusal closes at
 * once, and never pushes a finished rock's drain out. */
#define ROCK_DRAIN_REFUSED_MAX 256
#define PROBE_CACHE 16
#define PROBE_CACHE_MS ROCK_PROBE_TTL_MS
#define PROBE_CACHE_PLAIN_MS ROCK_PROBE_PLAIN_TTL_MS

/* Resumption (doc/PROTOCOL.md 2.7): a ticket key seals for an hour; a
 * ticket lives an hour, a chain of resumptions two hours from its full
 * handshake; a client stops using one a minute before. */
#define ROCK_TICKET_ROTATE_S 3600
#define ROCK_TICKET_LIFETIME_S 3600
#define ROCK_TICKET_CHAIN_S 7200
#define ROCK_TICKET_MARGIN_S 60
#define ROCK_TICKET_CACHE 16

/* Server: a ticket key (set 0: none). */
struct rock_ticket_key {
	uint8_t id[ROCK_TICKET_KEY_ID_LEN];
	uint8_t key[ROCK_KEY_LEN];
	int64_t born_ms, retired_ms;
	int set;
};

/* Client: a server's ticket, the secret it seals, the identity the full
 * handshake proved and when it was (len 0: free). */
struct rock_ticket_entry {
	struct sockaddr_storage addr;
	socklen_t len;
	int64_t expires_ms, origin_ms;	/* rock_ticket_now_ms() */
	/* When it came (a CLIENT_EARLY tells its age): another process's,
	 * read from the probe cache file, counted back from its end. */
	int64_t received_ms;
	uint8_t ticket[ROCK_TICKET_LEN];
	uint8_t rms[ROCK_KEY_LEN];
	uint8_t ident[ROCK_IDENT_LEN];
};

/* A server known to be enhanced, and its announcement (decision 10). */
struct probe_entry {
	struct sockaddr_storage addr;
	socklen_t len;			/* 0: free */
	int enhanced;			/* 0: an ordinary server, for a while */
	int fo_misses;			/* connects whose SYN took no data */
	int64_t expires_ms;
	uint8_t announcement[ROCK_ANNOUNCE_LEN];
};

/* Client: the rock whose packets speak for all rocks to one server's
 * control address (rock_control.c). */
struct rock_peer {
	struct sockaddr_storage addr;
	socklen_t len;
	int has;
	uint8_t anchor[ROCK_ID_LEN];
};

struct rock_engine {
	struct event_base *base;
	const struct rock_log *log;
	struct rock_engine_config cfg;
	int udp_fd;
	int udp_family;
	int tcp_rto_max_ms;		/* the system's (sysctl); 0: not read yet */
	uint16_t udp_port;
	struct event *ev_udp, *ev_tick;
	int nl_fd;			/* rtnetlink: address and route changes */
	struct event *ev_nl;
	uint8_t announcement[ROCK_ANNOUNCE_LEN];
	struct rock_identity ident;	/* server: proven in every handshake */
	struct rock_trust trust;	/* client: the server keys it takes */
	struct rock_known_memo known;	/* client: its file's answers */
	struct rock_session **table;
	size_t table_size, nsessions;
	uint8_t id_hash_key[ROCK_ID_HASH_KEY_LEN];	/* table and farewells */
	struct rock_session *all;
	struct rock_engine_stats stats;
	uint32_t rmem_max;		/* tcp_rmem's maximum, read once */
	uint64_t new_buffers;		/* rock_socket_buffers_new's; 0: unread */
	struct probe_entry probes[PROBE_CACHE];
	unsigned probe_next;		/* round-robin slot to replace */
	struct rock_probe_file *probe_file; /* the owner's; NULL: none */
	struct rock_ticket_key ticket_keys[2];	/* sealing, retired */
	struct rock_ticket_entry tickets[ROCK_TICKET_CACHE];
	unsigned ticket_next;
	/* An X25519 pair made ahead, off any handshake's critical path: the
	 * next handshake takes it (rock_engine_keypair_take). */
	struct rock_keypair spare;
	int spare_ready;
	struct rock_early *early;	/* clients' resumptions being answered */
	size_t nhandshakes;		/* server handshakes and reconnects in progress */
	unsigned early_sending;		/* client: early attempts holding bytes */
	rock_route_fn route;		/* workers: another's reconnects; NULL: none */
	void *route_arg;
	rock_stray_fn stray;		/* reconnects for no session here; NULL: none */
	void *stray_arg;
	rock_node_gone_fn node_gone;	/* a fleet: whether a node is gone; NULL: never */
	void *node_gone_arg;
	/* Signatures left for refusals of unproven requests (rock_accept.c),
	 * and when the bucket was last filled. */
	int refusal_signs;
	int64_t refusal_signs_ms;
	/* read_udp's datagrams, one byte over the largest packet each: here,
	 * not on a stack (the keeper's loop may run on a signal stack). */
	uint8_t udp_in[ROCK_CONTROL_BATCH][ROCK_HB_MAX_LEN + 1];
	/* The batch of them being read, numbered from 1; 0 between batches. */
	unsigned long udp_batch, udp_batches;
	/* Quiet farewells owing the peer an acknowledgement at the batch's
	 * end, so one covers every copy it read (rock_farewell.c). */
	struct rock_farewell *acks_owed[ROCK_CONTROL_BATCH];
	unsigned nacks_owed;
	unsigned long drops_logged;	/* drop count already reported */
	unsigned long hostile_logged;	/* of which forged, replayed, malformed */
	struct rock_log_limit stranger_log[ROCK_STRANGER_KINDS];
	struct rock_peer *peers;	/* client: one per server control address */
	size_t npeers;
	unsigned long hb_stamp;		/* heartbeat rounds sent */
	unsigned long ticks;		/* heartbeats go on every other one */
	/* The one suspended rock per server address that dials; the others
	 * to that address wait until it finds the path up (rock_dial.c). */
	struct rock_session *scouts[ROCK_SCOUTS];
	/* Finished rocks whose last word is still repeated (rock_farewell.c). */
	struct rock_farewell *farewells, *farewell_oldest;
	struct rock_farewell **farewell_table;	/* by id; NULL until one */
	size_t nfarewells;
	/* Finished rocks' data connections awaiting the peer's FIN. */
	struct rock_drain *drains, *drain_oldest;
	size_t ndrains, ndrains_refused;
	void (*lock)(void *);		/* the owner's, when other threads */
	void (*unlock)(void *);		/* touch sessions (the preload shim) */
	void *lock_arg;
};

/* Every event callback runs between these: the owner's threads see the
 * engine only between two callbacks. */
static inline void
rock_engine_enter(const struct rock_engine *e)
{
	if (e->lock != NULL)
		e->lock(e->lock_arg);
}

static inline void
rock_engine_leave(const struct rock_engine *e)
{
	if (e->unlock != NULL)
		e->unlock(e->lock_arg);
}

int64_t rock_now_ms(void);
/* The UDP port a server's answers name (cfg.udp_told); 0: none. */
uint16_t rock_udp_told(const struct rock_engine *e);

/* A fresh X25519 pair for one handshake: the spare made ahead, else one
 * made now. The owner's lock held. */
void rock_engine_keypair_take(struct rock_engine *e, struct rock_keypair *kp);
/* Make the spare if it was taken. On the engine's thread; locked: the
 * owner's lock is held (else it is taken around the store only). */
void rock_engine_keypair_fill(struct rock_engine *e, int locked);

/* Tickets (rock_ticket.c); the owner's lock held. Times are
 * rock_ticket_now_ms()'s (the boot clock). Server: a TICKET message for a
 * session's resumption secret, its chain begun at origin (a full
 * handshake's: now), sealed under a random nonce; a ticket opened (0, *origin), else ROCK_ERR_AUTH (not
 * ours, or no longer) or ROCK_ERR_TIMEOUT (it, or its chain, expired). */
int64_t rock_ticket_now_ms(void);
void rock_ticket_issue(struct rock_engine *e, const uint8_t rms[ROCK_KEY_LEN],
    int64_t origin, const uint8_t nonce[ROCK_TICKET_NONCE_LEN],
    uint8_t out[ROCK_TICKET_MSG_LEN]);
void rock_ticket_keys_get(const struct rock_engine *e,
    struct rock_ticket_key out[2]);
void rock_ticket_keys_adopted(struct rock_engine *e);
/* Memory shared with processes forked after, a robust process-shared
 * lock at its start (the struct's first member): rockd's workers'. */
int rock_shared_map(size_t size, void **out);
/* Server: a ticket opened, its secret, its chain's start and (issued,
 * unless NULL) when we sealed it, on rock_ticket_now_ms's clock. */
int rock_ticket_accept(struct rock_engine *e,
    const uint8_t ticket[ROCK_TICKET_LEN], uint8_t rms[ROCK_KEY_LEN],
    int64_t *origin, int64_t *issued);
/* Server: what the replay register says of a CLIENT_EARLY
 * (doc/PROTOCOL.md 2.9); only ADMITTED lets its bytes through. */
#define ROCK_EARLY_WINDOW_MS	10000
/* Client: early connects at once whose program's bytes went ahead of the
 * answer; the next waits for its answer (rock_early_send). */
#define ROCK_EARLY_PENDING_MAX	64
/* The announcement's features: what this engine offers (a hand-over's
 * import keeps the random part and writes these). */
void rock_announce_features(struct rock_engine *e);
/* No ticket issued at or before ms counts. */
void rock_strike_born(struct rock_strike *st, int64_t ms);
enum rock_early_verdict rock_strike_admit(struct rock_strike *st,
    const uint8_t nonce[ROCK_NONCE_LEN], int64_t issued_ms, uint32_t age_ms,
    int64_t now_ms);
/* Client: the ticket held for a destination (1, copied), a new one, or
 * the one a connect used found wanting (kept if another replaced it). */
int rock_ticket_find(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, struct rock_ticket_entry *out);
void rock_ticket_store(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, const struct rock_ticket_msg *m,
    const uint8_t rms[ROCK_KEY_LEN], const uint8_t ident[ROCK_IDENT_LEN],
    int64_t origin);
void rock_ticket_drop(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, const uint8_t ticket[ROCK_TICKET_LEN]);
/* Every tick: keys rotated and retired on time, expired tickets wiped,
 * whether or not anyone connects. */
void rock_ticket_tick(struct rock_engine *e);
void rock_ticket_wipe_all(struct rock_engine *e);

/* Session life (rock_session.c). */
int rock_session_new(struct rock_engine *e, enum rock_role role,
    const uint8_t id[ROCK_ID_LEN], const struct rock_keys *keys,
    size_t ring_cap, const struct rock_session_cbs *cbs, void *arg,
    struct rock_session **out);
struct rock_session *rock_engine_find(struct rock_engine *e,
    const uint8_t id[ROCK_ID_LEN]);
void rock_session_set_state(struct rock_session *s, enum rock_state to,
    const char *why);
void rock_session_close(struct rock_session *s, int err, const char *why);
/* A failure of the data connection: suspend and, as client, reconnect. */
void rock_session_fail(struct rock_session *s, const char *why);
/* An authentic count from the peer; ROCK_ERR_PROTOCOL ends the session. */
int rock_session_peer_count(struct rock_session *s, uint64_t consumed,
    uint64_t end, uint32_t flags);
/* Our stream's length for the peer: all we wrote, once we shut down
 * writing; 0 before. */
uint64_t rock_session_end(const struct rock_session *s);
/* An end of file read on the data connection: the end of the stream only
 * once the peer's authenticated word matches it. */
void rock_session_eof_read(struct rock_session *s);
/* Stream mode: the peer's end of stream, confirmed: tell the owner. */
void rock_stream_eof(struct rock_session *s);
/* Direct mode: the same, for the owner, which held the end of file back. */
void rock_direct_eof_confirmed(struct rock_session *s);
/* The peer's word came (or time ran out) for an end of file read before. */
void rock_session_eof_check(struct rock_session *s, int64_t now);
/* 1: the peer said, authenticated, that its stream ends where we have
 * read to: an end of file on the data connection is that end. */
int rock_session_peer_ended(const struct rock_session *s);
/* Both ends closed and confirmed: rock_session_maybe_finish ends it,
 * its farewell (which says all a record would) going at once. */
int rock_session_done(const struct rock_session *s);
void rock_session_maybe_finish(struct rock_session *s);
/* Keep s alive across calls that may end it; release returns 0 if it was
 * freed meanwhile (the caller must not touch it then). */
void rock_session_hold(struct rock_session *s);
/* An event callback's body: fn(s) under the owner's lock, s held. */
void rock_session_callback(struct rock_session *s,
    void (*fn)(struct rock_session *));
int rock_session_release(struct rock_session *s);

/* Server, a new rock: its connection is attached once the client's
 * CLIENT_FINISHED (want) proves it holds the keys (READ); after a
 * CLIENT_EARLY the replay register admitted, on the loop's next turn
 * (EARLY); after one it did not, never: its bytes are drained and the
 * client's reconnect proves the keys (HELD) (rock_finish.c). */
enum rock_finish_mode { ROCK_FINISH_READ, ROCK_FINISH_EARLY, ROCK_FINISH_HELD };
/* The most a held flight's connection is drained of before it is reset. */
#define ROCK_EARLY_HELD_MAX	(1024 * 1024)
int rock_finish_wait(struct rock_session *s, int fd, int rtt_ms, int resumed,
    uint16_t udp_port, enum rock_finish_mode mode,
    const uint8_t want[ROCK_FINISHED_LEN]);
int rock_finish_pending(const struct rock_session *s);
void rock_finish_cancel(struct rock_session *s, int proven_by_reconnect);

/* The data connection (rock_stream.c). */
int rock_stream_attach(struct rock_session *s, int fd);
void rock_stream_detach(struct rock_session *s);
int rock_stream_replay(struct rock_session *s);
void rock_stream_kick(struct rock_session *s);
void rock_stream_keepalive(struct rock_session *s, int fast);
/* A data connection handed over by another process, as it was there:
 * no state change and no I/O: its events are armed for the loop. */
int rock_stream_adopt(struct rock_session *s, int fd, int fast_keepalive);

/* n more bytes of the ring written to the data connection: written_max
 * (what a peer's count may reach) follows, replays included. */
static inline void
rock_session_wrote(struct rock_session *s, uint64_t n)
{
	s->replay_from += n;
	if (s->replay_from > s->written_max)
		s->written_max = s->replay_from;
}

/* Direct mode (rock_direct.c). */
static inline int
rock_is_direct(const struct rock_session *s)
{
	return s->cbs != NULL && s->cbs->direct != NULL;
}
int rock_direct_attach(struct rock_session *s, int fd);
void rock_direct_suspend(struct rock_session *s);
void rock_direct_resume(struct rock_session *s, int fd);
void rock_direct_stop(struct rock_session *s);

/* The path (rock_path.c): TCP_INFO as the engine reads it, and the timers
 * that judge a path, derived from its round trip (DESIGN decision 18). */
struct rock_tcp_sample {
	uint8_t state;			/* TCP_ESTABLISHED, ... */
	uint32_t rtt_us, rttvar_us;
	uint32_t unacked;
	uint32_t last_ack_recv_ms, last_data_recv_ms;
	uint32_t segs_in;
	uint64_t bytes_acked;
	/* For the log: why TCP is not moving. */
	uint8_t ca_state, backoff;
	uint32_t rto_us, lost, retrans, snd_wnd, last_data_sent_ms;
};
int rock_tcp_sample(int fd, struct rock_tcp_sample *out);
/* The round trip TCP measured (over its handshake, on a new connection),
 * ms; 0 when unknown. */
int rock_tcp_rtt_ms(int fd);
/* One request and its answer over a fresh connection whose round trip is
 * rtt_ms, one lost segment included (the retransmission waits for TCP's
 * first RTO). */
int rock_exchange_ms(int rtt_ms);
/* A handshake's bound: the configured one (10 s), or four exchanges on a
 * path slower than that allows. */
int rock_handshake_ms(const struct rock_engine *e, int rtt_ms);

/* The client's handshake on a new connection, in parts (rock_hello.c)
 * that the early resumption (rock_early.c) shares. */
int rock_hello_socket(const struct sockaddr *addr, int *fd);
int rock_hello_dial(struct rock_engine *e, int fd, const struct sockaddr *addr,
    socklen_t len, int64_t *deadline, const uint8_t *flight, size_t nflight,
    int fastopen, size_t *sent, int *rtt);
int rock_hello_trusted(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, const uint8_t *known, const uint8_t ident[ROCK_IDENT_LEN]);
int rock_hello_session(struct rock_engine *e, int fd, int rtt_ms,
    const struct sockaddr *addr, socklen_t len,
    const struct rock_server_hello *sh, const struct rock_keys *keys,
    const struct rock_session_cbs *cbs, void *arg, struct rock_session **out);
void rock_hello_keep_ticket(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, const struct rock_ticket_msg *tm,
    const struct rock_keys *keys, const uint8_t id[ROCK_ID_LEN],
    const uint8_t ident[ROCK_IDENT_LEN], int64_t origin);
/* CLIENT_RESUME (ROCK_RESUME_TOTAL with the announcement) or, early,
 * CLIENT_EARLY (ROCK_EARLY_TOTAL) into flight; its length. */
size_t rock_resume_flight(struct rock_engine *e, int fd,
    const uint8_t ann[ROCK_ANNOUNCE_LEN], const struct rock_ticket_entry *tk,
    int early, uint8_t nonce[ROCK_NONCE_LEN], uint8_t *flight);
int rock_resume_answer_check(struct rock_engine *e, const uint8_t *flight,
    size_t nflight, const struct rock_ticket_entry *tk,
    const uint8_t nonce[ROCK_NONCE_LEN], const uint8_t *in, size_t nin,
    struct rock_server_hello *sh, struct rock_keys *keys,
    struct rock_ticket_msg *tm);
void rock_early_free_all(struct rock_engine *e);
int rock_early_owns_fd(const struct rock_engine *e, int fd);
void rock_early_close_fds(const struct rock_engine *e, int (*close_fn)(int));
void rock_path_init(struct rock_session *s, int rtt_ms);
/* A new data connection: its signs of life and progress start afresh. */
void rock_path_new_connection(struct rock_session *s);
/* The same connection under new management (direct to stream): its
 * bound stays, the watch starts over. */
void rock_path_same_connection(struct rock_session *s);
/* A connection handed over by a predecessor (rock_stream_adopt): the
 * bound it set on it stays. */
void rock_path_adopted_connection(struct rock_session *s);
/* TCP's retransmission timeout on fd bounded for s's path (rock_path.c). */
void rock_path_bound_rto(struct rock_session *s, int fd);
/* TCP's retransmission timeout for this path (srtt + 4 rttvar). */
int rock_path_rto_ms(const struct rock_session *s);
/* No sign of life (record or segment) for this long: the path is dead. */
int rock_path_dead_ms(const struct rock_session *s);
int rock_path_stall_ms(const struct rock_session *s);
/* When a segment from the peer last arrived on the data connection. */
int64_t rock_path_tcp_heard(struct rock_session *s, int64_t now);
/* 1: unacknowledged data has not moved for the stall time. */
int rock_path_stalled(struct rock_session *s, int64_t now);
void rock_path_progress(struct rock_session *s);
/* Only the peer's farewell is missing: its silence ends the rock cleanly. */
int rock_path_only_farewell_missing(struct rock_session *s);
/* Both ends closed, more than the farewell owed, on a data connection
 * not dead, within a few dead times of the close. */
int rock_path_close_owed(struct rock_session *s, int64_t now);

/* The initial connection's blocking steps, bounded by a deadline
 * (rock_blocking.c): 0 or a ROCK_ERR_* code, errno kept for SYSTEM. */
int rock_blocking_wait(int fd, short events, int64_t deadline);
/* fastopen: data goes in the SYN where the kernel holds a cookie (*in_syn,
 * may be NULL); else at once if the connection is up by then; the caller
 * writes the rest (*sent says how much went). */
int rock_blocking_connect(int fd, const struct sockaddr *addr, socklen_t len,
    int64_t deadline, const uint8_t *data, size_t n, int fastopen,
    size_t *sent, int *in_syn);
int rock_blocking_dial(const struct sockaddr *addr, socklen_t len,
    int64_t deadline, int *out);
int rock_blocking_write(int fd, const uint8_t *p, size_t n, int64_t deadline);
int rock_blocking_read(int fd, uint8_t *p, size_t n, int64_t deadline);

/* The probe cache (rock_probe.c). The announcement for a destination:
 * cached, shared, or probed; *cached: not a probe's just now;
 * *fastopen: whether its connects are worth a Fast Open (ROCK_FO_*). */
#define ROCK_FO_NO	0	/* two brought nothing in the SYN: not tried */
#define ROCK_FO_TRY	1
#define ROCK_FO_MISSED	2	/* tried once for nothing (the cookie asked) */
int rock_probe_cached(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, uint8_t ann[ROCK_ANNOUNCE_LEN], int *fastopen);
int rock_probe_announcement(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, int64_t deadline, uint8_t ann[ROCK_ANNOUNCE_LEN],
    int *cached, int *fastopen);
/* What a connect tried with Fast Open (ROCK_FO_TRY or _MISSED) got: its
 * flight in the SYN (sent) or not. Only a change takes the lock. */
void rock_probe_fastopen_note(struct rock_engine *e,
    const struct sockaddr *addr, socklen_t len, int tried, int sent);
/* Forgotten here and in the shared file; without the owner's lock. */
void rock_probe_forget_everywhere(struct rock_engine *e,
    const struct sockaddr *addr, socklen_t len);

/* A refusal (rock_hello.c): 0 when ident signed it over what we sent. */
int rock_refusal_verify(struct rock_engine *e,
    const uint8_t ident[ROCK_IDENT_LEN], const struct rock_error_msg *em,
    const uint8_t *msg, size_t nmsg, const uint8_t *sent, size_t nsent);

/* The control channel (rock_control.c). */
int rock_control_open(struct rock_engine *e, const struct sockaddr *bind,
    socklen_t len);
/* An open control socket: non-blocking, bound, adopted (-1 leaves it to
 * the caller); then the events. */
int rock_control_adopt(struct rock_engine *e, int fd);
int rock_control_start(struct rock_engine *e);
void rock_control_close(struct rock_engine *e);
void rock_control_tick(struct rock_engine *e);
/* One datagram received on the control socket, from a peer: never trusted. */
void rock_control_datagram(struct rock_engine *e, const uint8_t *buf,
    size_t len, const struct sockaddr_storage *from, socklen_t fromlen);
void rock_control_ack_now(struct rock_session *s);
/* A RECONNECT_REQUEST of s for nonce, sealed with its key; a reconnect
 * or (flags with STATUS) a status request (rock_dial.c). */
void rock_dial_request_encode(const struct rock_session *s,
    const uint8_t nonce[ROCK_NONCE_LEN], uint32_t attempt, uint32_t since,
    uint32_t flags, uint8_t out[ROCK_RECONNECT_REQ_LEN]);
/* The server's RECONNECT_OK in buf, authentic for nonce: 0, else
 * ROCK_ERR_PROTOCOL (not an OK) or ROCK_ERR_AUTH (wrong key). */
int rock_dial_ok_decode(const struct rock_session *s,
    const uint8_t nonce[ROCK_NONCE_LEN], const uint8_t *buf,
    struct rock_reconnect_ok *ok);
/* Encode r and tag it with tx. */
void rock_control_seal(struct rock_hb_record *r, const uint8_t tx[ROCK_KEY_LEN],
    uint8_t out[ROCK_HB_RECORD_LEN]);
void rock_control_send_packets(struct rock_engine *e,
    const struct sockaddr_storage *to, socklen_t tolen,
    uint8_t *const pkts[], unsigned n);
void rock_control_send_packet(struct rock_engine *e,
    const struct sockaddr_storage *to, socklen_t tolen, const uint8_t *pkt);

/* A finished rock's last record, said now, on every tick for a moment
 * and in answer to each of the peer's records, so that the peer learns
 * the end even when UDP loses some (rock_farewell.c). */
void rock_farewell_add(struct rock_session *s);
int rock_control_word_heard(struct rock_session *s);
int rock_control_word_sent(const struct rock_session *s);
int rock_control_lossless(struct rock_session *s);
void rock_farewell_batch_end(struct rock_engine *e);
/* A record for no session: 0 if it was a finished one's, answered. */
int rock_farewell_answer(struct rock_engine *e, const struct rock_hb_record *r,
    const uint8_t rec[ROCK_HB_RECORD_LEN], const struct sockaddr_storage *from,
    socklen_t fromlen);
/* A packet anchored by no session: 0 if by a finished one, answered. */
int rock_farewell_answer_packet(struct rock_engine *e,
    const struct rock_hb_header *h, const uint8_t *pkt,
    const struct sockaddr_storage *from, socklen_t fromlen);
void rock_farewell_tick(struct rock_engine *e, int64_t now);
void rock_farewell_free_all(struct rock_engine *e);
/* A finished rock's data connection, taken: closed once the peer's FIN is
 * read (at once if fin_read), or at the farewell's end, and read and
 * discarded until then, so that close() never sends a reset. 1: held. */
int rock_drain_close(struct rock_engine *e, int fd, int fin_read);
/* A connection refused with an ERROR while the client's bytes may still
 * come (a CLIENT_EARLY's): the same, within ROCK_DRAIN_REFUSED_MAX. */
void rock_drain_refused(struct rock_engine *e, int fd);
void rock_drain_free_all(struct rock_engine *e);
int rock_drain_owns_fd(const struct rock_engine *e, int fd);
void rock_drain_close_fds(const struct rock_engine *e, int (*close_fn)(int));
/* A farewell as part of the engine's hand-over record, and back. */
struct rock_rec_out;
struct rock_rec_in;
void rock_farewell_put_all(const struct rock_engine *e, struct rock_rec_out *w);
int rock_farewell_get(struct rock_engine *e, struct rock_rec_in *r);
void rock_udp_peer_from_tcp(struct rock_session *s, uint16_t udp_port);

/* Status exchange (rock_status.c, client): our counts, flags and end
 * for the server's, over a short TCP connection, when UDP does not carry
 * records; at most one in flight. */
void rock_status_send(struct rock_session *s);
/* Our flags changed (WR_SHUT, EOF_SEEN): a record now, and where records
 * do not reach the peer, a status exchange (from the engine's loop: this
 * may run on an application's thread, inside its calls). */
void rock_session_tell_peer(struct rock_session *s);
int rock_session_farewell_says_eof(const struct rock_session *s);
void rock_status_free(struct rock_session *s);
int rock_status_fd(const struct rock_session *s);	/* -1: none */

/* Reconnect (rock_dial.c, client; rock_accept.c, server). */
void rock_dial_schedule(struct rock_session *s, int now);
void rock_dial_cancel(struct rock_session *s);
void rock_dial_all_now(struct rock_engine *e);
/* A lookup found new addresses: dial them now if the path is down. */
void rock_dial_addresses_changed(struct rock_session *s);

/* Client: the server's name looked up again while reconnecting
 * (rock_lookup.c). maybe: if it is time (failed: an attempt just failed,
 * else only after a second of redialing); next: where the next attempt
 * goes (the peer, or the lookup's addresses in turn); settle: reconnected,
 * the next outage starts from the peer; cancel: drop a lookup in flight. */
void rock_lookup_maybe(struct rock_session *s, int failed);
void rock_lookup_next(struct rock_session *s, struct sockaddr_storage *addr,
    socklen_t *len);
void rock_lookup_settle(struct rock_session *s);
void rock_lookup_cancel(struct rock_session *s);
void rock_lookup_free(struct rock_session *s);
/* The server answered at another address: heartbeats follow it. */
void rock_control_peer_moved(struct rock_session *s);
int rock_session_resume_counts(struct rock_session *s, uint64_t peer_consumed,
    uint64_t peer_end, uint32_t peer_flags);

/* rtnetlink watch (rock_netlink.c). */
int rock_netlink_open(struct rock_engine *e);
void rock_netlink_close(struct rock_engine *e);

/* Socket buffer sizes a side reports in its hello. */
void rock_socket_buffers(const struct rock_engine *e, int fd,
    uint32_t *rcvbuf, uint32_t *sndbuf);
/* Its send buffer alone (SO_SNDBUF). */
uint32_t rock_socket_sndbuf(int fd);
/* A socket of our own not yet connected: its buffers are the system's
 * defaults, the same for every one, read from the first. */
void rock_socket_buffers_new(struct rock_engine *e, int fd, uint32_t *rcvbuf,
    uint32_t *sndbuf);
uint64_t rock_tcp_bound(uint32_t own_sndbuf, uint32_t peer_rcvbuf);
size_t rock_ring_cap_for(const struct rock_engine *e, uint32_t own_sndbuf,
    uint32_t peer_rcvbuf);

#endif
