/* rock_handshake.c: the server's side of a new rock: the client's hello or resumption, and the answer with its ticket. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rock_accept.h"
#include "rock_engine_int.h"
#include "rock_err.h"
#include "rock_sys.h"

struct rock_handshake {
	struct rock_engine *e;
	int fd;
	uint8_t buf[ROCK_FIRST_FLIGHT_MAX];
	size_t have;
	struct event *ev, *deadline;
	struct rock_client_hello hello;	/* a resumption's fields too */
	int resume;			/* by a ticket: rms, origin below */
	uint8_t rms[ROCK_KEY_LEN];
	int64_t origin;			/* the chain's full handshake */
	size_t flight_len;		/* the announcement and the hello */
	int early;			/* a CLIENT_EARLY: bytes follow it */
	enum rock_early_verdict verdict;	/* and what became of them */
	struct sockaddr_storage peer;
	socklen_t peer_len;
	/* TCP's, over the connection's handshake; -1: none yet (accepted at
	 * a Fast Open SYN, the hello in it), read at the accept. */
	int rtt_ms;
	rock_hello_fn *on_hello;
	void *arg;
	int delivered;			/* on_hello called with the handshake */
	/* The answer's random fields, drawn in one call. */
	struct {
		uint8_t id[ROCK_ID_LEN];
		uint8_t nonce[ROCK_NONCE_LEN];	/* a resumption's */
		uint8_t ticket_nonce[ROCK_TICKET_NONCE_LEN];
	} fresh;
};

static void
handshake_free(struct rock_handshake *hs, int close_fd)
{
	/* The owner's argument is released either way. */
	if (!hs->delivered)
		hs->on_hello(NULL, hs->arg);
	rock_accept_disarm(&hs->ev, &hs->deadline);
	if (close_fd && hs->fd >= 0)
		rock_sys.close(hs->fd);
	hs->e->nhandshakes--;
	rock_wipe(hs->rms, sizeof(hs->rms));
	free(hs);
}

/* A full hello's length, or a resumption's once its type is read: the
 * shorter is read first, so no byte past the hello is ever taken (after
 * a CLIENT_EARLY come the client's own). */
static size_t
hello_want(const struct rock_handshake *hs)
{
	if (hs->have <= ROCK_ANNOUNCE_LEN)
		return ROCK_HELLO_TOTAL;
	switch (hs->buf[ROCK_ANNOUNCE_LEN]) {
	case ROCK_MSG_CLIENT_RESUME: return ROCK_RESUME_TOTAL;
	case ROCK_MSG_CLIENT_EARLY: return ROCK_EARLY_TOTAL;
	default: return ROCK_HELLO_TOTAL;
	}
}

static enum rock_hs_fail
reject_reason(uint8_t code)
{
	switch (code) {
	case ROCK_WERR_STALE: return ROCK_HS_STALE;
	case ROCK_WERR_VERSION: return ROCK_HS_VERSION;
	case ROCK_WERR_BUSY: return ROCK_HS_BUSY;
	case ROCK_WERR_BACKEND: return ROCK_HS_BACKEND;
	case ROCK_WERR_PROTOCOL: return ROCK_HS_MALFORMED;
	case ROCK_WERR_TICKET: return ROCK_HS_TICKET;
	default: return ROCK_HS_ERROR;
	}
}

/* The end after an ERROR. A CLIENT_EARLY's own bytes follow it, unread,
 * and close() over unread bytes sends a reset, which can reach the
 * client before the ERROR does (a lost segment waits for its resend, the
 * reset does not): the client would fail where the ERROR tells it to
 * fall back. So its connection is held and read until the client's FIN
 * (it closes on the ERROR) or the drain's bound, as a finished rock's,
 * as long as few are (anyone can send a CLIENT_EARLY to be refused). */
static void
refused_free(struct rock_handshake *hs)
{
	struct rock_engine *e = hs->e;
	int fd = hs->fd;

	if (hs->have <= ROCK_ANNOUNCE_LEN ||
	    hs->buf[ROCK_ANNOUNCE_LEN] != ROCK_MSG_CLIENT_EARLY) {
		handshake_free(hs, 1);
		return;
	}
	handshake_free(hs, 0);
	rock_drain_refused(e, fd);
}

void
rock_handshake_reject(struct rock_handshake *hs, uint8_t code, const char *text)
{
	hs->e->stats.handshake_failed[reject_reason(code)]++;
	rock_accept_send_error(hs->e, hs->fd, code, text, hs->buf, hs->have);
	refused_free(hs);
}

/* A ticket that does not open (another instance's, a key retired and
 * wiped, bytes changed), has expired, or a CLIENT_EARLY's tag by its
 * secret that does not verify: TICKET, unsigned. Whoever gets it
 * can only make a full handshake, which proves us anyway: a signature
 * would buy nothing, and a stranger's forged tickets cost an AEAD open. */
static void
ticket_refused(struct rock_handshake *hs, int r)
{
	uint8_t out[ROCK_ERROR_MAX_LEN];
	const char *text = r == ROCK_ERR_TIMEOUT ? "ticket expired" :
	    r == ROCK_ERR_PROTOCOL ? "early flight altered" : "unknown ticket";
	size_t n = rock_error_encode(ROCK_WERR_TICKET, text, out);

	stranger(hs->e, ROCK_STRANGER_HANDSHAKE, "handshake: %s; client told "
	    "to make a full handshake", r == ROCK_ERR_TIMEOUT ?
	    "a resumption ticket expired" : r == ROCK_ERR_PROTOCOL ?
	    "a CLIENT_EARLY whose tag does not verify" :
	    "a resumption ticket not ours");
	hs->e->stats.handshake_failed[ROCK_HS_TICKET]++;
	(void)rock_sys.send(hs->fd, out, n, MSG_NOSIGNAL | MSG_DONTWAIT);
	refused_free(hs);
}

/* A CLIENT_EARLY's tag, by the secret its ticket sealed, then whether
 * its bytes may pass at once: only a flight the replay register has
 * never admitted, sent (by its ticket's age) within a window of now. */
static int
early_check(struct rock_handshake *hs, uint32_t age_ms, int64_t issued_ms,
    const uint8_t nonce[ROCK_NONCE_LEN])
{
	uint8_t tag[ROCK_TAG_LEN];
	int ok;

	rock_early_tag(tag, hs->rms, hs->buf);
	ok = rock_equal(tag, hs->buf + ROCK_EARLY_TOTAL - ROCK_TAG_LEN,
	    ROCK_TAG_LEN);
	rock_wipe(tag, sizeof(tag));
	if (!ok)
		return ROCK_ERR_PROTOCOL;
	hs->early = 1;
	hs->verdict = rock_strike_admit(hs->e->cfg.strike, nonce, issued_ms,
	    age_ms, rock_ticket_now_ms());
	hs->e->stats.early[hs->verdict]++;
	if (hs->verdict != ROCK_EARLY_ADMITTED)
		rlog_debug(hs->e->log, "handshake: early bytes held back (%s): "
		    "the client proves its keys first",
		    hs->verdict == ROCK_EARLY_REPLAY ? "a replayed flight" :
		    hs->verdict == ROCK_EARLY_CLOCK ? "sent outside the window" :
		    hs->verdict == ROCK_EARLY_ERA ? "a ticket older than the "
		    "register" : "the register is full");
	return 0;
}

/* CLIENT_RESUME or CLIENT_EARLY, into cr (and age_ms): 0 or -1. */
static int
resume_decode(const struct rock_handshake *hs, struct rock_client_resume *cr,
    uint32_t *age_ms)
{
	const uint8_t *m = hs->buf + ROCK_ANNOUNCE_LEN;

	*age_ms = 0;
	return m[0] == ROCK_MSG_CLIENT_EARLY ?
	    rock_client_early_decode(cr, age_ms, m) :
	    rock_client_resume_decode(cr, m);
}

/* A resumption's hello: its fields as a full hello's, and the secret its
 * ticket seals. 0, or the handshake has ended. */
static int
resume_check(struct rock_handshake *hs)
{
	struct rock_client_resume cr;
	int64_t issued;
	uint32_t age_ms;
	int r;

	if (resume_decode(hs, &cr, &age_ms) != 0) {
		stranger(hs->e, ROCK_STRANGER_HANDSHAKE,
		    "handshake: malformed resumption; dropped");
		rock_handshake_reject(hs, ROCK_WERR_PROTOCOL, "malformed hello");
		return -1;
	}
	hs->hello.version = cr.version;
	hs->hello.features = cr.features;
	hs->hello.rcvbuf = cr.rcvbuf;
	hs->hello.sndbuf = cr.sndbuf;
	hs->hello.udp_port = cr.udp_port;
	memcpy(hs->hello.nonce, cr.nonce, ROCK_NONCE_LEN);
	if (cr.version != ROCK_VERSION)
		return 0;		/* refused as any hello of that version */
	/* Only a client told EARLY sends CLIENT_EARLY: a server that never
	 * offered it (no register) would hold its session unproven for the
	 * handshake's time, where a refusal sends it the full way now. */
	if (hs->buf[ROCK_ANNOUNCE_LEN] == ROCK_MSG_CLIENT_EARLY &&
	    hs->e->cfg.strike == NULL) {
		hs->e->stats.early[ROCK_EARLY_OFF]++;
		stranger(hs->e, ROCK_STRANGER_HANDSHAKE, "handshake: "
		    "CLIENT_EARLY, never offered; refused");
		rock_handshake_reject(hs, ROCK_WERR_PROTOCOL,
		    "early bytes not offered");
		return -1;
	}
	if ((r = rock_ticket_accept(hs->e, cr.ticket, hs->rms, &hs->origin,
	    &issued)) == 0 && hs->buf[ROCK_ANNOUNCE_LEN] == ROCK_MSG_CLIENT_EARLY)
		r = early_check(hs, age_ms, issued, cr.nonce);
	if (r != 0) {
		ticket_refused(hs, r);
		return -1;
	}
	hs->resume = 1;
	return 0;
}

static void
hello_complete(struct rock_handshake *hs)
{
	struct rock_engine *e = hs->e;

	/* The announcement is what any probe is told: public, compared as
	 * such (a constant-time compare of its 1024 bytes was 1 % of rockd's
	 * time per resumed rock). */
	if (memcmp(hs->buf, e->announcement, ROCK_ANNOUNCE_LEN) != 0) {
		stranger(e, ROCK_STRANGER_HANDSHAKE, "handshake: "
		    "announcement from another server instance; client told "
		    "to probe again");
		rock_handshake_reject(hs, ROCK_WERR_STALE, "stale announcement");
		return;
	}
	hs->flight_len = hello_want(hs);
	if (hs->buf[ROCK_ANNOUNCE_LEN] == ROCK_MSG_CLIENT_RESUME ||
	    hs->buf[ROCK_ANNOUNCE_LEN] == ROCK_MSG_CLIENT_EARLY) {
		if (resume_check(hs) != 0)
			return;
	} else if (rock_client_hello_decode(&hs->hello, hs->buf + ROCK_ANNOUNCE_LEN) != 0) {
		stranger(e, ROCK_STRANGER_HANDSHAKE,
		    "handshake: malformed hello; dropped");
		rock_handshake_reject(hs, ROCK_WERR_PROTOCOL, "malformed hello");
		return;
	}
	if (hs->hello.version != ROCK_VERSION) {
		stranger(e, ROCK_STRANGER_HANDSHAKE,
		    "handshake: client asked for version %u; refused",
		    hs->hello.version);
		rock_handshake_reject(hs, ROCK_WERR_VERSION, "version 7 only");
		return;
	}
	/* The owner answers now (rockd dials its backend, with its own
	 * timeout); it holds the handshake until it does. */
	rock_accept_disarm(&hs->ev, &hs->deadline);
	hs->delivered = 1;
	hs->on_hello(hs, hs->arg);
}

static void
hello_failed(struct rock_handshake *hs, enum rock_hs_fail reason,
    const char *why)
{
	hs->e->stats.handshake_failed[reason]++;
	stranger(hs->e, ROCK_STRANGER_HANDSHAKE, "handshake: %s "
	    "before the hello was complete (%zu of %d bytes); dropped", why,
	    hs->have, (int)hello_want(hs));
	handshake_free(hs, 1);
}

static void
on_hello_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct rock_handshake *hs = arg;
	struct rock_engine *e = hs->e;

	(void)fd;
	(void)what;
	rock_engine_enter(e);
	hello_failed(hs, ROCK_HS_TIMEOUT, "timed out");
	rock_engine_leave(e);
}

/* 1: the announcement came from a server of an older version (its range
 * ends below ours): the client's hello is shorter than ours and would
 * never complete, so it is told STALE at once; its new probe then finds
 * no common version and it makes a plain connection. */
static int
older_client(const struct rock_handshake *hs)
{
	return hs->have >= ROCK_ANNOUNCE_LEN && hs->buf[8] < ROCK_VERSION &&
	    memcmp(hs->buf, hs->e->announcement, ROCK_ANNOUNCE_LEN) != 0;
}

/* The hello's next bytes, read; the engine entered. */
static void
hello_read(struct rock_handshake *hs, int r)
{
	if (r < 0) {
		hello_failed(hs, ROCK_HS_CLOSED, "connection closed");
	} else if (r > 0) {
		hello_complete(hs);
	} else if (older_client(hs)) {
		stranger(hs->e, ROCK_STRANGER_HANDSHAKE, "handshake: client "
		    "of version %u; told to probe again", hs->buf[8]);
		rock_handshake_reject(hs, ROCK_WERR_STALE, "stale announcement");
	}
}

/* A full hello's length, then a resumption's rest once its type is in. */
static int
hello_fill(struct rock_handshake *hs)
{
	int r = rock_accept_fill(hs->fd, hs->buf, &hs->have, hello_want(hs));

	if (r > 0 && hs->have < hello_want(hs))
		r = rock_accept_fill(hs->fd, hs->buf, &hs->have, hello_want(hs));
	return r;
}

static void
on_hello_read(evutil_socket_t fd, short what, void *arg)
{
	struct rock_handshake *hs = arg;
	struct rock_engine *e = hs->e;
	int r = hello_fill(hs);

	(void)fd;
	(void)what;
	/* The owner's threads may be making sessions meanwhile (a rock
	 * server under the preload shim). */
	rock_engine_enter(e);
	hello_read(hs, r);
	rock_engine_leave(e);
}

void
rock_server_handshake(struct rock_engine *e, int fd, const uint8_t *early,
    size_t nearly, int rtt_ms, rock_hello_fn *on_hello, void *arg)
{
	struct rock_handshake *hs = calloc(1, sizeof(*hs));

	if (hs == NULL || nearly > ROCK_FIRST_FLIGHT_MAX) {
		e->stats.handshake_failed[ROCK_HS_ERROR]++;
		free(hs);
		rock_sys.close(fd);
		on_hello(NULL, arg);	/* the owner's arg is released */
		return;
	}
	e->nhandshakes++;
	hs->e = e;
	hs->fd = fd;
	hs->on_hello = on_hello;
	hs->arg = arg;
	memcpy(hs->buf, early, nearly);
	hs->have = nearly;
	hs->verdict = ROCK_EARLY_OFF;	/* until a CLIENT_EARLY is judged */
	hs->rtt_ms = rtt_ms;
	hs->peer_len = sizeof(hs->peer);
	if (rock_sys.getpeername(fd, (struct sockaddr *)&hs->peer, &hs->peer_len) != 0)
		hs->peer_len = 0;
	if (rock_accept_arm(e, &hs->ev, &hs->deadline, fd, hs->rtt_ms, on_hello_read, on_hello_deadline,
	    hs) != 0) {
		e->stats.handshake_failed[ROCK_HS_ERROR]++;
		handshake_free(hs, 1);
		return;
	}
	if (hs->have > hello_want(hs)) {
		rock_handshake_reject(hs, ROCK_WERR_PROTOCOL, "malformed hello");
		return;
	}
	if (hs->have == hello_want(hs))
		hello_complete(hs);
	else if (older_client(hs))
		rock_handshake_reject(hs, ROCK_WERR_STALE, "stale announcement");
	else
		/* Sent in one write with the bytes that named it a rock: here
		 * already, as a rule (a wake saved), or soon. */
		hello_read(hs, hello_fill(hs));
}

/* The ticket for the next connection, sealed over the secret this
 * session's keys leave: into out, covered by the answer's signature or
 * tag (a party in the middle cannot swap it). */
static void
ticket_for(struct rock_handshake *hs, const uint8_t id[ROCK_ID_LEN],
    const struct rock_keys *keys, uint8_t out[ROCK_TICKET_MSG_LEN])
{
	uint8_t rms[ROCK_KEY_LEN];

	rock_resumption_secret(rms, keys->rx, keys->tx, id);
	rock_ticket_issue(hs->e, rms, hs->resume ? hs->origin :
	    rock_ticket_now_ms(), hs->fresh.ticket_nonce, out);
	rock_wipe(rms, sizeof(rms));
}

/* The UDP port an answer names: none to a client that did not ask for
 * our address when we have one (its own guess, the balancer's address,
 * would be wrong). */
static uint16_t
told_port(const struct rock_engine *e, uint16_t features)
{
	if (e->cfg.udp_address_len > 0 && !(features & ROCK_FEAT_UDP_ADDRESS))
		return 0;
	return rock_udp_told(e);
}

/* After the TICKET at tail, granted: UDP_ADDRESS naming ours. */
static void
udp_address_for(const struct rock_engine *e, uint16_t features, uint8_t *tail)
{
	const struct sockaddr_storage *ss = &e->cfg.udp_address;
	const struct in6_addr *v6 = &((const struct sockaddr_in6 *)ss)->sin6_addr;
	struct rock_udp_address a;

	if (!(features & ROCK_FEAT_UDP_ADDRESS))
		return;
	memset(&a, 0, sizeof(a));
	if (ss->ss_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(v6)) {
		a.family = 4;	/* an IPv4-only client can reach it */
		memcpy(a.addr, &v6->s6_addr[12], 4);
	} else if (ss->ss_family == AF_INET6) {
		a.family = 6;
		memcpy(a.addr, v6, 16);
	} else {
		a.family = 4;
		memcpy(a.addr, &((const struct sockaddr_in *)ss)->sin_addr, 4);
	}
	rock_udp_address_encode(&a, tail + ROCK_TICKET_MSG_LEN);
}

/* A full handshake: our session keys, then SERVER_HELLO and TICKET (and
 * UDP_ADDRESS), the hello signed over the whole exchange (our X25519 key
 * and what follows it) under our identity. */
static int
answer_full(struct rock_handshake *hs, const uint8_t id[ROCK_ID_LEN],
    uint16_t features, const uint32_t bufs[2], struct rock_keys *keys,
    uint8_t out[ROCK_ANSWER_MAX])
{
	uint8_t signed_part[ROCK_ANSWER_MAX];
	size_t tail = rock_answer_tail_len(features);
	struct rock_server_hello sh;
	struct rock_keypair kp;
	int r;

	rock_engine_keypair_take(hs->e, &kp);
	r = rock_keys_server(keys, &kp, hs->hello.pk);
	sh.version = ROCK_VERSION;
	sh.features = features;
	memcpy(sh.id, id, ROCK_ID_LEN);
	memcpy(sh.pk, kp.pk, ROCK_KEY_LEN);
	rock_keypair_wipe(&kp);
	if (r != 0)
		return r;
	sh.rcvbuf = bufs[0];
	sh.sndbuf = bufs[1];
	sh.udp_port = told_port(hs->e, features);
	memcpy(sh.ident, hs->e->ident.pk, ROCK_IDENT_LEN);
	memset(sh.sig, 0, sizeof(sh.sig));
	rock_server_hello_encode(&sh, out);
	ticket_for(hs, id, keys, out + ROCK_SERVER_HELLO_LEN);
	udp_address_for(hs->e, features, out + ROCK_SERVER_HELLO_LEN);
	rock_answer_sign(sh.sig, &hs->e->ident, ROCK_ANSWER_HELLO, hs->buf,
	    ROCK_HELLO_TOTAL, signed_part, rock_answer_covered(signed_part, out,
	    ROCK_SERVER_HELLO_SIGNED, out + ROCK_SERVER_HELLO_LEN, tail));
	memcpy(out + ROCK_SERVER_HELLO_SIGNED, sh.sig, ROCK_SIG_LEN);
	return 0;
}

/* A resumption: keys from the ticket's secret and both nonces, then
 * SERVER_RESUME and TICKET (and UDP_ADDRESS), tagged by that secret over
 * the exchange. */
static int
answer_resumed(struct rock_handshake *hs, const uint8_t id[ROCK_ID_LEN],
    uint16_t features, const uint32_t bufs[2], struct rock_keys *keys,
    uint8_t out[ROCK_ANSWER_MAX])
{
	uint8_t tagged[ROCK_ANSWER_MAX];
	struct rock_server_resume sr;

	sr.version = ROCK_VERSION;
	sr.features = features;
	memcpy(sr.id, id, ROCK_ID_LEN);
	sr.rcvbuf = bufs[0];
	sr.sndbuf = bufs[1];
	sr.udp_port = told_port(hs->e, features);
	memcpy(sr.nonce, hs->fresh.nonce, sizeof(sr.nonce));
	memset(sr.tag, 0, sizeof(sr.tag));
	rock_resume_keys(keys, 0, hs->rms, hs->hello.nonce, sr.nonce, id);
	rock_server_resume_encode(&sr, out);
	ticket_for(hs, id, keys, out + ROCK_SERVER_RESUME_LEN);
	udp_address_for(hs->e, features, out + ROCK_SERVER_RESUME_LEN);
	rock_resume_tag(sr.tag, hs->rms, hs->buf, hs->flight_len, tagged,
	    rock_answer_covered(tagged, out, ROCK_SERVER_RESUME_TAGGED,
	    out + ROCK_SERVER_RESUME_LEN, rock_answer_tail_len(features)));
	memcpy(out + ROCK_SERVER_RESUME_TAGGED, sr.tag, ROCK_TAG_LEN);
	return 0;
}

/* The answer and its ticket in one segment (a second, small one could
 * wait on Nagle for the client's ACK). bufs: our SO_RCVBUF and SO_SNDBUF.
 * finished: the CLIENT_FINISHED that proves the client made these keys,
 * over its first flight and this answer. */
static int
answer(struct rock_handshake *hs, const uint8_t id[ROCK_ID_LEN],
    uint16_t features, const uint32_t bufs[2], struct rock_keys *keys,
    uint8_t finished[ROCK_FINISHED_LEN])
{
	uint8_t out[ROCK_ANSWER_MAX];
	size_t n;
	int r;

	if (hs->resume) {
		r = answer_resumed(hs, id, features, bufs, keys, out);
		n = ROCK_SERVER_RESUME_LEN + rock_answer_tail_len(features);
	} else {
		r = answer_full(hs, id, features, bufs, keys, out);
		n = ROCK_SERVER_HELLO_LEN + rock_answer_tail_len(features);
	}
	if (r != 0)
		return r;
	rock_finished_encode(finished, keys->rx, hs->buf, hs->flight_len, out, n);
	return rock_sys.send(hs->fd, out, n, MSG_NOSIGNAL | MSG_DONTWAIT) ==
	    (ssize_t)n ? 0 : ROCK_ERR_SYSTEM;
}

int
rock_handshake_early_admitted(const struct rock_handshake *hs)
{
	return hs->early && hs->verdict == ROCK_EARLY_ADMITTED;
}

const struct sockaddr *
rock_handshake_peer(const struct rock_handshake *hs)
{
	return hs->peer_len > 0 ? (const struct sockaddr *)&hs->peer : NULL;
}

/* Of what the client asked: our address only with UDP, and only where
 * we have one to name. */
static uint16_t
granted(const struct rock_handshake *hs)
{
	const struct rock_engine *e = hs->e;
	uint16_t f = hs->hello.features & ROCK_FEAT_REQUESTED;

	if (!(f & ROCK_FEAT_UDP) || e->cfg.udp_address_len == 0 ||
	    rock_udp_told(e) == 0)
		f &= (uint16_t)~ROCK_FEAT_UDP_ADDRESS;
	if (hs->early && hs->verdict == ROCK_EARLY_ADMITTED)
		f |= ROCK_FEAT_EARLY;
	return f;
}

int
rock_handshake_accept(struct rock_handshake *hs,
    const struct rock_session_cbs *cbs, void *arg, struct rock_session **out)
{
	uint16_t features = granted(hs);
	const uint8_t *id = hs->fresh.id;
	uint8_t finished[ROCK_FINISHED_LEN];
	struct rock_keys keys;
	struct rock_session *s = NULL;
	uint32_t bufs[2];
	int r, resumed = hs->resume;

	rock_random(&hs->fresh, sizeof(hs->fresh));
	if (hs->e->cfg.workers > 1)
		hs->fresh.id[ROCK_ID_WORKER] = (uint8_t)hs->e->cfg.worker;
	if (hs->e->cfg.node > 0)
		hs->fresh.id[ROCK_ID_NODE] = (uint8_t)hs->e->cfg.node;
	rock_socket_buffers(hs->e, hs->fd, &bufs[0], &bufs[1]);
	/* The claim sizes our memory for this rock: no more than a receive
	 * buffer can be on this host. */
	if (hs->hello.rcvbuf > hs->e->rmem_max)
		hs->hello.rcvbuf = hs->e->rmem_max;
	/* The client's FINISHED and first bytes wait in the socket until
	 * the session below reads them (after a CLIENT_EARLY: its bytes,
	 * passed on or, held back, drained). */
	memset(&keys, 0, sizeof(keys));
	if ((r = answer(hs, id, features, bufs, &keys, finished)) == 0 &&
	    (r = rock_session_new(hs->e, ROCK_ROLE_SERVER, id, &keys,
	    rock_ring_cap_for(hs->e, bufs[1], hs->hello.rcvbuf), cbs, arg, &s)) == 0) {
		s->features = features;
		s->tcp_bound = rock_tcp_bound(bufs[1], hs->hello.rcvbuf);
		memcpy(&s->peer, &hs->peer, hs->peer_len);
		s->peer_len = hs->peer_len;
		rock_path_init(s, hs->rtt_ms >= 0 ? hs->rtt_ms :
		    rock_tcp_rtt_ms(hs->fd));
		/* Its UDP peer is the client's port, a first guess so acks
		 * flow at once (the source of the first authentic record
		 * replaces it), once the FINISHED has come. */
		r = rock_finish_wait(s, hs->fd, s->rtt_ms, resumed,
		    hs->hello.udp_port, !hs->early ? ROCK_FINISH_READ :
		    hs->verdict == ROCK_EARLY_ADMITTED ? ROCK_FINISH_EARLY :
		    ROCK_FINISH_HELD, finished);
	}
	rock_keys_wipe(&keys);
	rock_wipe(finished, sizeof(finished));
	if (r != 0) {
		if (s != NULL) {
			s->fd = -1;
			rock_session_free(s);
		}
		hs->e->stats.handshake_failed[ROCK_HS_ERROR]++;
		handshake_free(hs, 1);
		return r;
	}
	rlog_debug(s->e->log, "rock %s: connected as server%s, features %#x",
	    s->name, resumed ? " (resumed)" : "", features);
	/* Counted as made once the client's FINISHED proves it (rock_finish.c). */
	handshake_free(hs, 0);
	*out = s;
	/* The next handshake's pair, made now that this one's answer is out. */
	if (!resumed)
		rock_engine_keypair_fill(s->e, 1);
	return 0;
}

