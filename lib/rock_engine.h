/* rock_engine.h: the reliable-socket engine: sessions, control channel, reconnect. */
#ifndef ROCK_ENGINE_H
#define ROCK_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <event2/event.h>

/* Linux 6.15's bound on TCP's retransmission timeout (uapi linux/tcp.h),
 * and the range the kernel takes for it: the engine's data connections
 * get one (rock_path.c), a program's is only recorded (shim opts.c). */
#ifndef TCP_RTO_MAX_MS
#define TCP_RTO_MAX_MS 44
#endif
#define ROCK_TCP_RTO_MAX_LOW_MS 1000
#define ROCK_TCP_RTO_MAX_HIGH_MS 120000

#include "rock_crypto.h"
#include "rock_known.h"
#include "rock_log.h"
#include "rock_ring.h"
#include "rock_wire.h"

enum rock_state {
	ROCK_ST_CONNECTED = 1,	/* data connection carries the stream */
	ROCK_ST_SUSPENDED,	/* no data connection; reconnecting or waiting */
	ROCK_ST_CLOSED		/* ended; the owner frees it */
};

enum rock_role { ROCK_ROLE_CLIENT, ROCK_ROLE_SERVER };

struct rock_engine_config {
	int hb_interval_ms;	/* heartbeat period (500) */
	int hb_timeout_ms;	/* silence before a path counts as dead (2500) */
	int stall_ms;		/* peer count frozen while we send (10000) */
	long suspend_timeout_s;	/* give a suspended rock up after (3 days); 0: never */
	int backoff_min_ms;	/* first reconnect retry (100) */
	int backoff_max_ms;	/* cap between attempts (500) */
	int dial_timeout_ms;	/* one reconnect attempt (2000) */
	int handshake_timeout_ms; /* server: a handshake must finish within (10000) */
	/* client: the program's first bytes follow a resumption at once
	 * where the server offers EARLY (1), or wait for its answer (0) */
	int early;
	size_t ring_cap;	/* in-flight cap per rock; 0: from socket buffers */
	int ack_every;		/* bytes consumed between unsolicited acks (256 KiB) */
	/* server: signed refusals of reconnects per second, and a second's
	 * worth at once (1000); over it, reset unanswered; 0: no bound */
	int refusal_signs_per_s;
	/* server: one of `workers` processes serving the same listeners
	 * (rockd's workers); this one is `worker`, and byte ROCK_ID_WORKER of
	 * every connection id it hands out says so (1, 0: all ids random) */
	int workers, worker;
	/* server: a node of a fleet (rockd's `node`, 1 to 255; 0: none):
	 * byte ROCK_ID_NODE of its connection ids and of its ticket keys'
	 * ids says so, and a reconnect for another node's id is answered
	 * ELSEWHERE (doc/PROTOCOL.md 4.1) */
	int node;
	/* server: the UDP port its answers tell clients to send records to
	 * (at the address they connected to): ROCK_UDP_OWN, its control
	 * socket's; 0, none (its rocks keep their control on TCP); else that
	 * port (a balancer that forwards it here, doc/fleet.md) */
	int udp_told;
	/* server: the address its answers name with that port to a client
	 * that asks (UDP_ADDRESS, doc/PROTOCOL.md 2.10): a fleet's node
	 * behind a balancer (rockd's udp-address HOST:PORT); its records go
	 * nowhere until the client's first authentic one says where it is.
	 * A client that does not ask is told no port. len 0: none */
	struct sockaddr_storage udp_address;
	socklen_t udp_address_len;
	/* server: the announcement's random part, shared by the workers so
	 * a probe answered by one names a hello any of them takes; NULL: our
	 * own (ROCK_ANNOUNCE_RANDOM bytes) */
	const uint8_t *announce_random;
	/* server: the ticket keys the workers seal and open with, shared
	 * (rock_ticket_store_new); NULL: the engine's own */
	struct rock_ticket_store *ticket_store;
	/* server: the replay register that lets a CLIENT_EARLY's bytes
	 * through before the handshake's round trip (rock_strike_new),
	 * shared by the workers; NULL: EARLY not offered */
	struct rock_strike *strike;
};

void rock_engine_config_defaults(struct rock_engine_config *cfg);

/* Workers: resumption tickets any of them opens. The store is memory
 * shared by the processes forked after it is made; 0 or ROCK_ERR_SYSTEM. */
struct rock_ticket_store;
int rock_ticket_store_new(struct rock_ticket_store **out);
void rock_ticket_store_free(struct rock_ticket_store *st);

/* Servers: the register of early flights admitted (doc/PROTOCOL.md 2.9),
 * memory shared by the processes forked after it is made; a new one (a
 * hand-over's successor) admits no flight under an older ticket. 0 or
 * ROCK_ERR_SYSTEM. */
struct rock_strike;
int rock_strike_new(struct rock_strike **out);
void rock_strike_free(struct rock_strike *st);
/* A successor's master: no ticket counts (wait) until its predecessor's
 * workers have stopped issuing them; then only those issued after
 * (start). */
void rock_strike_wait(struct rock_strike *st);
void rock_strike_start(struct rock_strike *st);

/* Where a server with workers writes the worker's number in a connection
 * id (doc/PROTOCOL.md 4.1). */
#define ROCK_ID_WORKER 1
#define ROCK_UDP_OWN (-1)
/* ... and a fleet's node its node number (doc/fleet.md). */
#define ROCK_ID_NODE 0

/* A server with workers: a reconnect request (whole, `len` bytes in req)
 * for a session another worker holds goes to route, which owns fd from
 * then on and hands both to worker `worker` (its rock_server_reconnect). */
typedef void (*rock_route_fn)(void *arg, int fd, const uint8_t *req,
    size_t len, int worker);

struct rock_engine;
struct rock_session;

/*
 * Direct mode (the preload shim, DESIGN decision 1): the application reads
 * and writes the data connection itself and reports what it did through
 * rock_direct_*(); the engine keeps counts, ring, heartbeats and
 * reconnects. The engine calls these with its lock held, on its loop.
 */
struct rock_direct_ops {
	/* The data connection failed: from now on no application call may
	 * enter the kernel on it; returns once none is inside. The engine
	 * keeps old_fd open until the swap. */
	void (*suspend)(struct rock_session *s, int old_fd, void *arg);
	/* new_fd is authenticated and replayed: put it under the
	 * application's descriptors in place of old_fd. */
	void (*swap)(struct rock_session *s, int old_fd, int new_fd, void *arg);
	/* The peer confirmed the end of file the application read (and was
	 * held from, rock_direct_eof_unconfirmed): it may read it now. */
	void (*eof_confirmed)(struct rock_session *s, void *arg);
};

/* What the owner of a session (rockd's relay, rockcat) is told. */
struct rock_session_cbs {
	/* Bytes from the peer; they count as consumed once delivered. */
	void (*on_data)(struct rock_session *s, const uint8_t *p, size_t n, void *arg);
	/* The peer's end of stream. */
	void (*on_eof)(struct rock_session *s, void *arg);
	/* Queued output fell below the low mark: the owner may send more. */
	void (*on_drain)(struct rock_session *s, void *arg);
	void (*on_state)(struct rock_session *s, enum rock_state from,
	    enum rock_state to, void *arg);
	/* The session ended (err 0: both ends closed cleanly; else a
	 * ROCK_ERR_*). The owner must call rock_session_free(). */
	void (*on_closed)(struct rock_session *s, int err, void *arg);
	/* Set: the session is in direct mode (on_data and on_eof unused;
	 * on_drain: the peer consumed, the ring has room again). */
	const struct rock_direct_ops *direct;
};

/* An engine on an event base; udp_bind NULL: any address, any port. */
int rock_engine_new(struct rock_engine **out, struct event_base *base,
    const struct rock_log *log, const struct rock_engine_config *cfg,
    const struct sockaddr *udp_bind, socklen_t udp_bind_len);
/* The same on a control socket handed over by a predecessor (rockd's
 * USR2); the engine owns udp_fd once this returns 0. */
int rock_engine_new_adopt(struct rock_engine **out, struct event_base *base,
    const struct rock_log *log, const struct rock_engine_config *cfg,
    int udp_fd);
void rock_engine_free(struct rock_engine *e);
/* In a forked child that will not run e: its tickets, ticket keys and
 * spare key pair wiped (the parent's to use, not a copy's to keep). */
void rock_engine_forget_secrets(struct rock_engine *e);
/* An owner whose own threads touch sessions while the loop runs (the
 * preload shim) gives the engine its lock: every event callback holds it. */
void rock_engine_set_lock(struct rock_engine *e, void (*lock)(void *),
    void (*unlock)(void *), void *arg);
/* Applies to rocks suspended now and later; 0: never give up. */
void rock_engine_set_suspend_timeout(struct rock_engine *e, long seconds);
const uint8_t *rock_engine_announcement(const struct rock_engine *e);
/* Server: the long-term key SERVER_HELLO proves and refusals are signed
 * with (rockd's key file); until set, one the engine made at start. */
void rock_engine_set_identity(struct rock_engine *e,
    const struct rock_identity *id);
const uint8_t *rock_engine_identity(const struct rock_engine *e);
/* Client: the server keys it trusts (zeroed, the default: any). */
void rock_engine_set_trust(struct rock_engine *e, const struct rock_trust *t);
size_t rock_engine_nsessions(const struct rock_engine *e);
size_t rock_engine_nhandshakes(const struct rock_engine *e);
/* Finished rocks whose last record is still being repeated to the peer. */
size_t rock_engine_nfarewells(const struct rock_engine *e);
/* Of those, the ones the peer has not acknowledged yet (the ticks repeat
 * them), where it may: not a reset's, not on a path never heard on UDP. */
size_t rock_engine_farewells_unheard(const struct rock_engine *e);
/* fd is one of the engine's: its control socket, a data connection, a
 * reconnect attempt, a status exchange (what a keeper must keep open). */
int rock_engine_owns_fd(const struct rock_engine *e, int fd);
/* In a forked child that will not run e: close every socket of its (the
 * parent's engine runs them); e is not touched otherwise. */
void rock_engine_close_fds(const struct rock_engine *e, int (*close_fn)(int));

/* Why a server handshake ended without a session (rockd's metrics). */
enum rock_hs_fail {
	ROCK_HS_TIMEOUT,	/* the hello did not come in time */
	ROCK_HS_CLOSED,		/* the client left before its hello was whole */
	ROCK_HS_STALE,		/* another instance's announcement, an older client */
	ROCK_HS_MALFORMED,
	ROCK_HS_VERSION,
	ROCK_HS_BUSY,		/* the owner's limits, or it is stopping */
	ROCK_HS_BACKEND,	/* the owner could not reach the backend */
	ROCK_HS_ERROR,		/* a local failure: memory, a send */
	ROCK_HS_TICKET,		/* a resumption ticket not ours, or expired */
	ROCK_HS_FINISHED,	/* answered, but the client never proved its keys */
	ROCK_HS_LATE,		/* after the owner's wait for a plain client's bytes */
	ROCK_HS_FAIL_KINDS
};

/* Counters of the engine's traffic, for logs, tests and rockd's metrics;
 * they only grow. */
/* Server: what became of a CLIENT_EARLY's bytes (doc/PROTOCOL.md 2.9):
 * passed on at once (ADMITTED), or held back, the client then proving
 * its keys by a reconnect and sending them again. */
enum rock_early_verdict {
	ROCK_EARLY_ADMITTED,
	ROCK_EARLY_REPLAY,	/* its nonce admitted before */
	ROCK_EARLY_CLOCK,	/* its time and ours a window apart */
	ROCK_EARLY_ERA,		/* a ticket older than the register */
	ROCK_EARLY_FULL,	/* no room, or the register unusable */
	ROCK_EARLY_OFF,		/* not offered (no register): refused */
	ROCK_EARLY_VERDICTS
};

struct rock_engine_stats {
	unsigned long hb_ok, hb_bad_tag, hb_replayed, hb_unknown, hb_malformed;
	unsigned long reconnects, reconnect_rejected;
	/* of which reset unanswered: over the refusals' signing budget */
	unsigned long reconnect_unanswered;
	unsigned long status_exchanges;	/* client: ends confirmed over TCP */
	unsigned long probes, probe_cache_hits;
	unsigned long handshakes;	/* server: sessions made */
	unsigned long resumed;		/* sessions made by a ticket: the
					 * server's handshakes, the client's
					 * connects */
	unsigned long handshake_failed[ROCK_HS_FAIL_KINDS];
	unsigned long evictions;	/* rock_engine_make_room's victims */
	unsigned long reconnects_routed; /* handed to the worker of their id */
	unsigned long reconnects_elsewhere; /* another node's id: ELSEWHERE */
	unsigned long reconnects_node_gone; /* ... of a node gone: UNKNOWN */
	unsigned long early[ROCK_EARLY_VERDICTS];	/* server: CLIENT_EARLYs */
};
const struct rock_engine_stats *rock_engine_stats(const struct rock_engine *e);

/* Client: EDP probe, then the handshake; timeout_ms bounds the probe, the
 * handshake with a server found enhanced gets cfg.handshake_timeout_ms.
 * Returns 0 and a CONNECTED session, ROCK_ERR_NOT_ENHANCED when the peer
 * is an ordinary server, or another error (errno kept for ROCK_ERR_SYSTEM). */
int rock_client_open(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, int timeout_ms, const struct rock_session_cbs *cbs,
    void *arg, struct rock_session **out);

/* Client, a connect that returns once TCP is up (rock_early.c): with the
 * destination's announcement cached and a ticket for it, connect and send
 * the resumption, then leave the answer to the engine's loop. Without the
 * owner's lock. 0: started, *out set under the lock, and done(e, s, r,
 * done_arg) comes once on the loop (once woken: rock_early_arm), the lock held: s a CONNECTED session
 * (r 0), or NULL and why not (the caller then tries rock_client_open:
 * nothing reached the server's backend). ROCK_ERR_NOT_ENHANCED: no
 * cached announcement or no ticket (take rock_client_open); another
 * error: the connect failed (errno kept for ROCK_ERR_SYSTEM). */
struct rock_early;
/* early, nearly: with no session and the server's refusal (r
 * ROCK_ERR_REFUSED), the program's bytes that went behind a CLIENT_EARLY
 * (rock_early_send), for the owner to send first on whatever connection
 * it makes instead; NULL, 0 otherwise. r ROCK_ERR_LOST: early bytes went
 * and whether the server passed them on is not known: the connection
 * fails (never a second copy). */
typedef void (*rock_early_done_fn)(struct rock_engine *e,
    struct rock_session *s, int r, const uint8_t *early, size_t nearly,
    void *arg);
int rock_early_start(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, const struct rock_session_cbs *cbs, void *arg,
    rock_early_done_fn done, void *done_arg, struct rock_early **out);
/* The owner's lock held: given up (its program went), done never called. */
void rock_early_cancel(struct rock_early *x);
/* The owner's lock held, before done: the program's bytes, sent now
 * behind the server's CLIENT_EARLY and kept (doc/PROTOCOL.md 2.9); how
 * many, 0 when none may (wait for done as after a CLIENT_RESUME). At most
 * ROCK_EARLY_MAX in all. */
#define ROCK_EARLY_MAX	16384
size_t rock_early_send(struct rock_early *x, const struct iovec *iov,
    int iovcnt);
/* The loop's thread, the owner's lock held, after a start: the owner
 * wakes its loop to call this (libevent is the loop's alone). */
void rock_early_arm(struct rock_engine *e);

/* Client: the name the program looked the server up by (at most
 * ROCK_NAME_MAX bytes, rock_names.h). When redialing the server's address
 * goes unanswered, the engine looks the name up again, off its loop, and
 * dials the addresses it gets, families interleaved (doc/engine.md); the
 * reconnect's proof keeps it the same server. The owner's lock held.
 * 0, or ROCK_ERR_INVALID (a server's session, an empty or long name). */
int rock_session_set_name(struct rock_session *s, const char *name);
/* That name; NULL: none. */
const char *rock_session_host(const struct rock_session *s);

/* The budgets for log lines strangers can cause, one per kind, which the
 * owner shares for its own (rockd's refusals); the engine's tick flushes
 * their counts. */
enum rock_stranger {
	ROCK_STRANGER_HANDSHAKE,	/* a hello that failed */
	ROCK_STRANGER_RECONNECT,	/* a reconnect refused or cut short */
	ROCK_STRANGER_REFUSAL,		/* BUSY: the owner's limits */
	ROCK_STRANGER_FORGED,		/* client: a refusal not signed by the server */
	ROCK_STRANGER_KINDS
};
struct rock_log_limit *rock_engine_stranger_log(struct rock_engine *e,
    enum rock_stranger kind);

/* Below max sessions, or made so for a newcomer from peer (its address;
 * the port is ignored) by closing, in this order: a rock its client never
 * proved (suspended before connected, the oldest first), or the rock
 * suspended longest among the newcomer's own. 0; -1 when none may go
 * (answer BUSY): a stranger cannot push out anyone else's rock. */
int rock_engine_make_room(struct rock_engine *e, size_t max,
    const struct sockaddr *peer);

/* The EDP probe alone, without an engine (so a program that never makes
 * a rock never starts one): 0 and the announcement, ROCK_ERR_NOT_ENHANCED
 * (*silent: the server only said nothing in time, maybe a slow rockd),
 * ROCK_ERR_TIMEOUT (no connection) or ROCK_ERR_SYSTEM. log: for a second
 * probe's reason, or NULL. persist: the destination is declared a rockd's
 * (a mapped port): silence there is probed again within the bound. */
int rock_probe(const struct rock_log *log, const struct sockaddr *addr,
    socklen_t len, int timeout_ms, int persist, uint8_t ann[ROCK_ANNOUNCE_LEN],
    int *silent);
/* The probe's connect bound for a probe timeout (ROCK_PROBE_TIMEOUT_MS):
 * that, and lost SYNs resent on TCP's schedule. To the program's own port,
 * three: its own connect would wait for the same answer, so waiting costs
 * nothing, and giving up would make a plain connection of a rock. To a
 * mapped port (ROCK_PORT_MAP) two: silence there may be a firewall, which
 * the first connect to the host pays for (then remembered as plain), but
 * a lost SYN or SYN-ACK is 6 % likely on a phone's path (3 % loss each
 * way) and two 0.4 %: a connection made plain for that has no rock for
 * its whole life. */
int rock_probe_budget_ms(int timeout_ms, int mapped);
/* A probe result (errno as it left it) worth remembering as "no rockd
 * there": an ordinary server answered (but see rock_probe's *silent), or
 * nothing answered the SYN, which every connect would pay for again. Not
 * a refused or unreachable destination: nothing listens there now, and a
 * rockd restarting there would be taken for plain by every process of the
 * user for the plain entry's minute (connects made during a rockd's
 * restart stayed plain after it). */
int rock_probe_found_plain(int r);
/* What such a probe found, for the engine's cache (ann NULL: plain). */
void rock_probe_remember(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, const uint8_t ann[ROCK_ANNOUNCE_LEN]);
/* A resumption ticket from the file the user's processes share, for the
 * engine's own (rock_probe_file.h); the one the engine holds, for the
 * file (1), or none (0). */
struct rock_probe_ticket;
void rock_ticket_remember(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, const struct rock_probe_ticket *t);
int rock_ticket_share(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, struct rock_probe_ticket *out);
/* Client: a handshake took the X25519 pair the engine makes ahead; make
 * the next one now. On the engine's thread, without the owner's lock (the
 * shim calls it when its connecting thread wakes the loop). */
void rock_engine_keypair_refill(struct rock_engine *e);
/* Client: whether the engine's loop must run after a connect made on
 * another thread (s: its rock, or NULL): a rock with events of its own
 * (not direct), none, or the X25519 pair made ahead taken. A direct
 * rock's engine needs nothing before its next tick. The owner's lock
 * held. */
int rock_engine_loop_owed(const struct rock_engine *e,
    const struct rock_session *s);
/* The probe cache shared with the user's other processes (the owner's,
 * rock_probe_file.h; NULL, the default: none). Read on a miss of the
 * engine's own, written after every probe and forget. */
struct rock_probe_file;
void rock_engine_set_probe_file(struct rock_engine *e,
    struct rock_probe_file *pf);
/* Forget what a probe of this destination said (it changed, say). */
void rock_probe_forget(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len);

/* Server: how long to wait for a new connection's first bytes (a rock's
 * hello comes at once; a client of a server-speaks-first protocol sends
 * nothing): floor_ms, or longer on a slow path, so a hello lost once still
 * arrives in time. rtt_ms (if not NULL): TCP's round trip, which the
 * handshake takes (a server sends nothing before its answer, so it stays
 * the same), or -1 if none was measured. */
int rock_first_bytes_ms(int fd, int floor_ms, int *rtt_ms);
/* The floor rockd's services and rock servers use (rockd.conf: sniff). */
#define ROCK_FIRST_BYTES_MS 300
/* One look at a new connection's first bytes, as far as they have come
 * (have: how many are in buf). peek: leave them in the socket, for a
 * plain client's program to read (buf is refilled from the start).
 * ROCK_SNIFF_MORE: wait for more, or until the first-bytes time (then
 * it is a plain client of a server-speaks-first protocol); PROBE: EDP
 * step 1c, answer with the announcement; PLAIN also on an error or an
 * end of file after bytes (the program sees it). */
/* What has arrived on fd, dropped in the kernel (a bounded number of
 * reads): a close then sends no reset over unread bytes. 1: the peer's
 * FIN came, or the connection is gone; 0: nothing more yet. */
int rock_discard_unread(int fd);
enum rock_sniff rock_sniff_read(int fd, uint8_t buf[ROCK_MAGIC_LEN],
    size_t *have, int peek);

/* Server: a connection whose first bytes (in early) are an announcement
 * or a reconnect request; the engine reads the rest. */
struct rock_handshake;
typedef void rock_hello_fn(struct rock_handshake *hs, void *arg);
/* on_hello is called once the client's hello is valid; the owner then
 * calls rock_handshake_accept() or rock_handshake_reject(). If the
 * handshake dies first, on_hello is called with hs NULL, so the owner can
 * release arg. rtt_ms: the connection's round trip as
 * rock_first_bytes_ms() read it, or -1 to read it here. */
void rock_server_handshake(struct rock_engine *e, int fd,
    const uint8_t *early, size_t nearly, int rtt_ms, rock_hello_fn *on_hello,
    void *arg);
/* The client's address of a handshake in progress. */
const struct sockaddr *rock_handshake_peer(const struct rock_handshake *hs);
int rock_handshake_accept(struct rock_handshake *hs,
    const struct rock_session_cbs *cbs, void *arg, struct rock_session **out);
/* 1: a CLIENT_EARLY whose bytes the replay register admitted (protocol
 * 2.9): its client's connect() has returned, its bytes follow. */
int rock_handshake_early_admitted(const struct rock_handshake *hs);
void rock_handshake_reject(struct rock_handshake *hs, uint8_t code,
    const char *text);
void rock_server_reconnect(struct rock_engine *e, int fd, const uint8_t *early,
    size_t nearly);
/* Workers (cfg.workers > 1): where reconnects for another's ids go. */
void rock_engine_set_router(struct rock_engine *e, rock_route_fn route,
    void *arg);
/* A reconnect request (whole, `len` bytes in req) for a session this
 * engine does not hold: 1 when stray took it (and fd), to the process that
 * holds the session (a served port's rendezvous, lib/shim/rendezvous.c);
 * 0: refused here, UNKNOWN. Called with the engine's lock held. */
typedef int (*rock_stray_fn)(void *arg, int fd, const uint8_t *req,
    size_t len, const uint8_t id[ROCK_ID_LEN]);
void rock_engine_set_stray(struct rock_engine *e, rock_stray_fn stray,
    void *arg);
/* The session's id (ROCK_ID_LEN bytes). */
const uint8_t *rock_session_id(const struct rock_session *s);
/* A fleet's node (cfg.node): whether node `node` is gone, and its
 * sessions with it (1), or may be alive (0). A reconnect for a node gone
 * is refused UNKNOWN, signed, which ends the rock at its client; else it
 * is answered ELSEWHERE. */
typedef int (*rock_node_gone_fn)(void *arg, int node);
void rock_engine_set_node_watch(struct rock_engine *e, rock_node_gone_fn gone,
    void *arg);

/* Direct mode, called by the owner with the engine's lock held. Bytes the
 * application read (not peeked); a write of up to n bytes about to enter
 * the kernel (sending), and what the kernel took of it (sent), which must
 * fit rock_direct_space(). */
void rock_direct_consumed(struct rock_session *s, size_t n);
void rock_direct_sending(struct rock_session *s, size_t n);
int rock_direct_sent(struct rock_session *s, const struct iovec *iov,
    int iovcnt, size_t n);
size_t rock_direct_space(struct rock_session *s);
/* n bytes the application wrote before the session was in place (behind
 * a CLIENT_EARLY), as sending and sent: 0, or no room in the ring. */
int rock_direct_written(struct rock_session *s, const void *p, size_t n);
/* The descriptor the engine holds on the current data connection. */
int rock_direct_fd(const struct rock_session *s);
/* The peer said (authenticated) that its stream ends where the
 * application has read to: an end of file read now is that end. */
int rock_direct_peer_ended(const struct rock_session *s);
/* The peer said (authenticated) that its stream ends `ahead` bytes past
 * what the application has read: a FIN behind that many is that end. */
int rock_direct_peer_ends_after(const struct rock_session *s, uint64_t ahead);
/* These run on the engine's loop only: the application's read saw the
 * peer's end of stream; see whether both ends are done; its I/O failed. */
void rock_direct_eof(struct rock_session *s);
/* The application read an end of file the peer has not confirmed: the
 * owner holds it back until ops->eof_confirmed, or the data connection
 * fails (ops->suspend) and a reconnect brings the rest or an error. */
void rock_direct_eof_unconfirmed(struct rock_session *s);
void rock_direct_finish(struct rock_session *s);
void rock_direct_fail(struct rock_session *s, const char *why);
/* Any thread, lock held: the application shut its write side; the FIN
 * goes now if `connected` (the owner's view), else after the replay. */
void rock_direct_shutdown(struct rock_session *s, int connected);
/* Keepalive the application set on its socket: a data connection keeps
 * it, or the engine's backstop while that is armed and gives up sooner
 * (rock_keepalive_merge). Any thread, lock held; applied at once and on
 * every data connection after. */
struct rock_owner_ka {
	int on;				/* SO_KEEPALIVE */
	int idle, intvl, cnt;		/* TCP_KEEPIDLE, _KEEPINTVL, _KEEPCNT */
};
void rock_direct_keepalive(struct rock_session *s, const struct rock_owner_ka *ka);
/* What the data connection gets: the owner's keepalive, or while `fast`
 * the backstop (1 s, 1 s, 20), whichever gives up on a silent peer first
 * (idle + intvl * cnt); out->on 0: none. */
void rock_keepalive_merge(const struct rock_owner_ka *owner, int fast,
    struct rock_owner_ka *out);
/* The application let go of the rock: the engine drains what comes,
 * finishes sending, closes and calls cbs->on_closed. */
void rock_direct_release(struct rock_session *s,
    const struct rock_session_cbs *cbs, void *arg);

/*
 * Hand-over (rock_handover.c, doc/engine.md): a server's sessions and the
 * engine's announcement and farewells as versioned, length-checked
 * records, for a successor process that receives the same sockets
 * (SCM_RIGHTS). Export appends to out and changes nothing: the exporter
 * may carry on if the successor fails. ROCK_ERR_INVALID: the session is
 * mid-way through something that cannot move (a client's dial, a status
 * exchange, direct mode, inside a callback).
 */
struct evbuffer;
int rock_session_export(struct rock_session *s, struct evbuffer *out);
/* The data connection's descriptor (-1 while suspended): sent with the
 * record, and given back to import, which owns it on success. */
int rock_session_fd(const struct rock_session *s);
/* A session from its record, as it was, with no I/O and no callback:
 * its events are armed, so it carries on when the loop runs (once the
 * predecessor has let go of the sockets).
 * A record that is short, long, of another version or incoherent is
 * refused (ROCK_ERR_SHORT, _TOO_LARGE, _PROTOCOL) and nothing is kept. */
int rock_session_import(struct rock_engine *e, const uint8_t *p, size_t n,
    int fd, const struct rock_session_cbs *cbs, void *arg,
    struct rock_session **out);
/* The announcement (probe caches stay good) and the farewells. Import
 * into a fresh engine; on error the caller gives the engine up. */
int rock_engine_export(const struct rock_engine *e, struct evbuffer *out);
int rock_engine_import(struct rock_engine *e, const uint8_t *p, size_t n);
int rock_engine_udp_fd(const struct rock_engine *e);

/* The owner's side of the stream. */
int rock_session_send(struct rock_session *s, const void *p, size_t n);
/*
 * Read from fd, up to max bytes and the room the session has, straight
 * into what it sends (its ring, no copy through the caller's buffer).
 * Returns the bytes read, 0 at fd's end of file, ROCK_ERR_FULL when the
 * session holds all it may (on_drain tells when to read again), INVALID
 * once closed or shut down, SYSTEM with errno (EAGAIN: nothing to read).
 */
ssize_t rock_session_send_from(struct rock_session *s, int fd, size_t max);
size_t rock_session_pending(const struct rock_session *s);
void rock_session_shutdown(struct rock_session *s);
void rock_session_pause(struct rock_session *s, int paused);
/* Drop the session now: the peer sees a reset (backend failed, say). */
void rock_session_abort(struct rock_session *s);
/* End it as its user asked (rock kill): the peer is told, in an
 * authenticated record, to end it too, with a reset (ROCK_ERR_RESET). */
void rock_session_kill(struct rock_session *s, const char *why);
void rock_session_free(struct rock_session *s);

enum rock_state rock_session_state(const struct rock_session *s);
/* 1: a server's new rock whose client has not yet proved its keys
 * (CLIENT_FINISHED): SUSPENDED, no byte either way until it has. */
int rock_session_unproven(const struct rock_session *s);
/* In on_state: why the state changed (for logs); in on_closed: why it
 * closed; "" elsewhere. */
const char *rock_session_state_why(const struct rock_session *s);
/* Short printable id for logs ("3fa2c01b"). */
const char *rock_session_name(const struct rock_session *s);
uint64_t rock_session_consumed(const struct rock_session *s);
uint64_t rock_session_sent(const struct rock_session *s);
/* Sent but not yet known to be consumed by the peer's application. */
uint64_t rock_session_unacked(const struct rock_session *s);
/* Ours is done: every byte and our end of stream consumed by the peer. */
int rock_session_delivered(const struct rock_session *s);
const char *rock_state_name(enum rock_state st);

/* Close with a reset (SO_LINGER 0; nothing for fd < 0): a dead, replaced or
 * refused connection must never look like an answer or an end of stream
 * to the other side. */
void rock_close_reset(int fd);

#endif
