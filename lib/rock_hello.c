/* rock_hello.c: the client's handshake on a new connection: hello, the server's answer or signed refusal, the key check, the session. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rock_engine_int.h"
#include "rock_err.h"
#include "rock_probe_file.h"
#include "rock_sys.h"

/* A refusal's signature, by the key the client trusts for the server,
 * over what the client sent: 0, or ROCK_ERR_AUTH (logged, within the
 * engine's budget). */
int
rock_refusal_verify(struct rock_engine *e, const uint8_t ident[ROCK_IDENT_LEN],
    const struct rock_error_msg *em, const uint8_t *msg, size_t nmsg,
    const uint8_t *sent, size_t nsent)
{
	if (rock_answer_verify(em->sig, ident, ROCK_ANSWER_ERROR, sent, nsent,
	    msg, nmsg - ROCK_SIG_LEN) == 0)
		return 0;
	rlog_limited(e->log, &e->stranger_log[ROCK_STRANGER_FORGED],
	    ROCK_LOG_WARN, "a refusal (code %u, \"%s\") not signed by the "
	    "server's key: ignored, taken as a failed attempt", em->code,
	    em->text);
	return ROCK_ERR_AUTH;
}

/* known: the server's key, if the client knows it; a refusal it cannot
 * prove is then only a failed attempt. got: the ngot bytes of it read
 * already (at least its type). */
static int
read_error_reply(struct rock_engine *e, int fd, const uint8_t *got,
    size_t ngot, int64_t deadline, const uint8_t *known, const uint8_t *hello,
    size_t nhello)
{
	uint8_t buf[ROCK_ERROR_MAX_LEN];
	struct rock_error_msg em;
	size_t used, total;
	int r;

	if (ngot > sizeof(buf))
		ngot = sizeof(buf);
	memcpy(buf, got, ngot);
	if (ngot < 3 && (r = rock_blocking_read(fd, buf + ngot, 3 - ngot,
	    deadline)) != 0)
		return ROCK_ERR_PROTOCOL;
	if (ngot < 3)
		ngot = 3;
	total = 3 + (buf[2] <= ROCK_ERROR_MAX_TEXT ? buf[2] : 0) + ROCK_SIG_LEN;
	if (ngot < total && (r = rock_blocking_read(fd, buf + ngot, total - ngot,
	    deadline)) != 0)
		return ROCK_ERR_PROTOCOL;
	if (rock_error_decode(&em, buf, sizeof(buf), &used) != 0)
		return ROCK_ERR_PROTOCOL;
	/* Unsigned, and it asks only for a full handshake, which the
	 * server's signature then decides. */
	if (em.code == ROCK_WERR_TICKET)
		return ROCK_ERR_AUTH;
	/* A server that proved this key speaks our version: its VERSION, as
	 * any refusal, must be signed, or it would buy a plain connection. */
	if (known != NULL &&
	    rock_refusal_verify(e, known, &em, buf, used, hello, nhello) != 0)
		return ROCK_ERR_UNVERIFIED;
	switch (em.code) {
	case ROCK_WERR_STALE:
		return ROCK_ERR_LOST;		/* caller probes again */
	case ROCK_WERR_VERSION:
		return ROCK_ERR_NOT_ENHANCED;
	case ROCK_WERR_BACKEND:
	case ROCK_WERR_BUSY:
		return ROCK_ERR_REFUSED;
	}
	return ROCK_ERR_PROTOCOL;
}

static void
build_hello(struct rock_engine *e, int fd,
    const uint8_t ann[ROCK_ANNOUNCE_LEN], const struct rock_keypair *kp,
    uint8_t out[ROCK_HELLO_TOTAL])
{
	struct rock_client_hello ch;

	ch.version = ROCK_VERSION;
	ch.features = ROCK_FEAT_REQUESTED;
	memcpy(ch.pk, kp->pk, ROCK_KEY_LEN);
	rock_socket_buffers_new(e, fd, &ch.rcvbuf, &ch.sndbuf);
	ch.udp_port = e->udp_port;
	rock_random(ch.nonce, ROCK_NONCE_LEN);
	memcpy(out, ann, ROCK_ANNOUNCE_LEN);
	rock_client_hello_encode(&ch, out + ROCK_ANNOUNCE_LEN);
}

/* The rest of the first flight (what the SYN did not carry), then the
 * server's answer, nin bytes into in: 0, or a refusal read whole
 * (read_error_reply's answer; known: the key it must be signed by).
 * *heard: a byte of an answer came. Nothing can come before our flight
 * went: the wait first, then as much as came in one read (the answer is
 * one segment). */
static int
read_answer(struct rock_engine *e, int fd, const uint8_t *flight,
    size_t nflight, size_t sent, int64_t deadline, const uint8_t *known,
    uint8_t *in, size_t nin, int *heard)
{
	ssize_t got;
	int r;

	if ((r = rock_blocking_write(fd, flight + sent, nflight - sent,
	    deadline)) != 0)
		return r;
	do {
		if ((r = rock_blocking_wait(fd, POLLIN, deadline)) != 0)
			return r;
		got = rock_sys.recv(fd, in, nin, MSG_DONTWAIT);
	} while (got < 0 && (errno == EAGAIN || errno == EINTR));
	if (got < 0)
		return ROCK_ERR_SYSTEM;
	if (got == 0)
		return ROCK_ERR_PROTOCOL;
	*heard = 1;
	if (in[0] == ROCK_MSG_ERROR)
		return read_error_reply(e, fd, in, (size_t)got, deadline, known,
		    flight, nflight);
	if ((size_t)got < nin &&
	    (r = rock_blocking_read(fd, in + got, nin - (size_t)got, deadline)) != 0)
		return r == ROCK_ERR_SHORT ? ROCK_ERR_PROTOCOL : r;
	return 0;
}

/* The rest of an answer whose first n bytes (the answer and its TICKET)
 * are in: its UDP_ADDRESS, where granted. *nin: the whole length. */
static int
read_answer_tail(int fd, uint8_t *in, size_t n, int64_t deadline, size_t *nin)
{
	int r;

	*nin = n;
	if (!(rock_answer_features(in) & ROCK_FEAT_UDP_ADDRESS))
		return 0;
	if ((r = rock_blocking_read(fd, in + n, ROCK_UDP_ADDRESS_LEN,
	    deadline)) != 0)
		return r == ROCK_ERR_SHORT ? ROCK_ERR_PROTOCOL : r;
	*nin = n + ROCK_UDP_ADDRESS_LEN;
	return 0;
}

/* The address an answer's UDP_ADDRESS names, at tail (its TICKET's
 * start), into *a (family 0: none named). Granted with UDP and a port
 * only. */
static int
answer_udp_address(uint16_t features, uint16_t port, const uint8_t *tail,
    struct rock_udp_address *a)
{
	memset(a, 0, sizeof(*a));
	if (!(features & ROCK_FEAT_UDP_ADDRESS))
		return 0;
	if (!(features & ROCK_FEAT_UDP) || port == 0)
		return ROCK_ERR_PROTOCOL;
	return rock_udp_address_decode(a, tail + ROCK_TICKET_MSG_LEN);
}

/* The rest of the hello (what the SYN did not carry), then the answer:
 * a SERVER_HELLO, its TICKET (and UDP_ADDRESS), signed by the key it
 * names over the whole exchange, or a refusal. *nin: its length. */
static int
hello_exchange(struct rock_engine *e, int fd, const uint8_t *hello,
    size_t sent, int64_t deadline, const uint8_t *known,
    struct rock_server_hello *sh, struct rock_ticket_msg *tm,
    uint8_t in[ROCK_ANSWER_MAX], size_t *nin)
{
	uint8_t signed_part[ROCK_ANSWER_MAX];
	int r, heard = 0;

	if ((r = read_answer(e, fd, hello, ROCK_HELLO_TOTAL, sent, deadline,
	    known, in, ROCK_SERVER_HELLO_LEN + ROCK_TICKET_MSG_LEN,
	    &heard)) != 0 ||
	    (r = read_answer_tail(fd, in, ROCK_SERVER_HELLO_LEN +
	    ROCK_TICKET_MSG_LEN, deadline, nin)) != 0)
		return r;
	if (rock_server_hello_decode(sh, in) != 0 || sh->version != ROCK_VERSION ||
	    (sh->features & ~ROCK_FEAT_REQUESTED) != 0 ||
	    rock_ticket_msg_decode(tm, in + ROCK_SERVER_HELLO_LEN) != 0 ||
	    answer_udp_address(sh->features, sh->udp_port,
	    in + ROCK_SERVER_HELLO_LEN, &sh->udp_addr) != 0)
		return ROCK_ERR_PROTOCOL;
	if (rock_answer_verify(sh->sig, sh->ident, ROCK_ANSWER_HELLO, hello,
	    ROCK_HELLO_TOTAL, signed_part, rock_answer_covered(signed_part, in,
	    ROCK_SERVER_HELLO_SIGNED, in + ROCK_SERVER_HELLO_LEN,
	    *nin - ROCK_SERVER_HELLO_LEN)) != 0) {
		rlog_warn(e->log, "handshake: the server's hello is not signed "
		    "by the key it names; dropped");
		return known != NULL ? ROCK_ERR_UNVERIFIED : ROCK_ERR_PROTOCOL;
	}
	return 0;
}

/* CLIENT_FINISHED, before any byte of ours: the server passes none on
 * until it proves we made the keys of this exchange, not a recording. */
static int
send_finished(int fd, const struct rock_keys *keys, const uint8_t *flight,
    size_t nflight, const uint8_t *answer, size_t nanswer, int64_t deadline)
{
	uint8_t fin[ROCK_FINISHED_LEN];

	rock_finished_encode(fin, keys->tx, flight, nflight, answer, nanswer);
	return rock_blocking_write(fd, fin, sizeof(fin), deadline);
}

/* Where the server's UDP_ADDRESS says its control socket is: the
 * session's udp_named. */
static void
name_udp_peer(struct rock_session *s, const struct rock_server_hello *sh)
{
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&s->udp_named;
	struct sockaddr_in *s4 = (struct sockaddr_in *)&s->udp_named;

	memset(&s->udp_named, 0, sizeof(s->udp_named));
	s->udp_named_len = 0;
	if (sh->udp_addr.family == 6) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(sh->udp_port);
		memcpy(&s6->sin6_addr, sh->udp_addr.addr, 16);
		s->udp_named_len = sizeof(*s6);
	} else if (sh->udp_addr.family == 4) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons(sh->udp_port);
		memcpy(&s4->sin_addr, sh->udp_addr.addr, 4);
		s->udp_named_len = sizeof(*s4);
	}
}

int
rock_hello_session(struct rock_engine *e, int fd, int rtt_ms,
    const struct sockaddr *addr, socklen_t len,
    const struct rock_server_hello *sh, const struct rock_keys *keys,
    const struct rock_session_cbs *cbs, void *arg, struct rock_session **out)
{
	uint32_t snd;
	struct rock_session *s;
	int r;

	uint32_t peer_rcv = sh->rcvbuf < e->rmem_max ? sh->rcvbuf : e->rmem_max;

	/* A rock is found by its id alone (records, anchors): a second
	 * server handing out an id we hold would take over the first's
	 * rocks' control packets. */
	if (rock_engine_find(e, sh->id) != NULL) {
		rlog_warn(e->log, "the server gave a rock id already in use "
		    "here: refused");
		return ROCK_ERR_PROTOCOL;
	}
	/* The peer's claim sizes our memory: no more than this host allows. */
	snd = rock_socket_sndbuf(fd);
	if ((r = rock_session_new(e, ROCK_ROLE_CLIENT, sh->id, keys,
	    rock_ring_cap_for(e, snd, peer_rcv), cbs, arg, &s)) != 0)
		return r;
	s->features = sh->features;
	memcpy(s->server_ident, sh->ident, ROCK_IDENT_LEN);
	s->tcp_bound = rock_tcp_bound(snd, peer_rcv);
	memcpy(&s->peer, addr, len);
	s->peer_len = len;
	name_udp_peer(s, sh);
	rock_udp_peer_from_tcp(s, sh->udp_port);
	rock_path_init(s, rtt_ms);	/* no connection yet: the attach bounds it */
	if ((r = rock_is_direct(s) ? rock_direct_attach(s, fd) :
	    rock_stream_attach(s, fd)) != 0) {
		s->fd = -1;
		rock_session_free(s);
		return r;
	}
	rlog_debug(e->log, "rock %s: connected as client, features %#x, UDP port %u%s",
	    s->name, sh->features, sh->udp_port, s->udp_named_len > 0 ?
	    " at the address the server named" : "");
	*out = s;
	return 0;
}

/* The key this connect read as known for the server (pinned or in the
 * file) is the one it proved: trusted, without reading the file again.
 * Else the file decides (first contact, a changed key). */
int
rock_hello_trusted(struct rock_engine *e, const struct sockaddr *addr, socklen_t len,
    const uint8_t *known, const uint8_t ident[ROCK_IDENT_LEN])
{
	if (known != NULL && rock_equal(known, ident, ROCK_IDENT_LEN))
		return 0;
	return rock_trust_check(&e->trust, e->log, addr, len, ident);
}

/* r, and fd closed when r is a failure, errno kept for the caller. */
static int
close_failed(int r, int fd)
{
	int err = errno;

	if (r != 0 && fd >= 0)
		rock_sys.close(fd);
	errno = err;
	return r;
}

/* The data connection's socket. */
int
rock_hello_socket(const struct sockaddr *addr, int *fd)
{
	*fd = rock_sys.socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0);
	return *fd < 0 ? ROCK_ERR_SYSTEM : 0;
}

/* The connect, the first flight (announcement and hello) in the SYN with
 * Fast Open: *sent of it, and the round trip. */
int
rock_hello_dial(struct rock_engine *e, int fd, const struct sockaddr *addr,
    socklen_t len, int64_t *deadline, const uint8_t *flight, size_t nflight,
    int fastopen, size_t *sent, int *rtt)
{
	int64_t t0 = rock_now_ms(), bound;
	int r, in_syn;

	if ((r = rock_blocking_connect(fd, addr, len, *deadline, flight, nflight,
	    fastopen != ROCK_FO_NO, sent, &in_syn)) != 0)
		return r;
	rock_probe_fastopen_note(e, addr, len, fastopen, in_syn);
	*rtt = (int)(rock_now_ms() - t0);
	/* The path measured by the connect may be slower than the bound. */
	bound = t0 + *rtt + rock_handshake_ms(e, *rtt);
	if (*deadline < bound)
		*deadline = bound;
	return 0;
}

/* The ticket this session leaves for the next connection, with the
 * identity its handshake proved and when its chain began (a full
 * handshake's: now). Lock held. */
void
rock_hello_keep_ticket(struct rock_engine *e, const struct sockaddr *addr, socklen_t len,
    const struct rock_ticket_msg *tm, const struct rock_keys *keys,
    const uint8_t id[ROCK_ID_LEN], const uint8_t ident[ROCK_IDENT_LEN],
    int64_t origin)
{
	uint8_t rms[ROCK_KEY_LEN];

	rock_resumption_secret(rms, keys->tx, keys->rx, id);
	rock_ticket_store(e, addr, len, tm, rms, ident, origin);
	rock_wipe(rms, sizeof(rms));
}

static int
handshake_full(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, int64_t deadline, const uint8_t *known,
    const uint8_t ann[ROCK_ANNOUNCE_LEN], int fastopen,
    const struct rock_session_cbs *cbs, void *arg, struct rock_session **out)
{
	uint8_t hello[ROCK_HELLO_TOTAL], in[ROCK_ANSWER_MAX];
	struct rock_server_hello sh;
	struct rock_ticket_msg tm;
	struct rock_keypair kp;
	struct rock_keys keys;
	int fd = -1, r, rtt;
	size_t sent, nin = 0;

	memset(&keys, 0, sizeof(keys));
	rock_engine_enter(e);
	rock_engine_keypair_take(e, &kp);
	rock_engine_leave(e);
	if ((r = rock_hello_socket(addr, &fd)) == 0) {
		build_hello(e, fd, ann, &kp, hello);
		if ((r = rock_hello_dial(e, fd, addr, len, &deadline, hello, sizeof(hello),
		    fastopen, &sent, &rtt)) == 0)
			r = hello_exchange(e, fd, hello, sent, deadline, known,
			    &sh, &tm, in, &nin);
	}
	if (r == 0 && (r = rock_hello_trusted(e, addr, len, known, sh.ident)) == 0 &&
	    (r = rock_keys_client(&keys, &kp, sh.pk)) == 0 &&
	    (r = send_finished(fd, &keys, hello, sizeof(hello), in, nin,
	    deadline)) == 0) {
		rock_engine_enter(e);
		if ((r = rock_hello_session(e, fd, rtt, addr, len, &sh, &keys, cbs, arg,
		    out)) == 0)
			rock_hello_keep_ticket(e, addr, len, &tm, &keys, sh.id, sh.ident,
			    rock_ticket_now_ms());
		rock_engine_leave(e);
	}
	rock_keypair_wipe(&kp);
	rock_keys_wipe(&keys);
	return close_failed(r, fd);
}

/* SERVER_RESUME, its TICKET (and UDP_ADDRESS) in in, nin bytes, checked
 * by the ticket's secret. *sh gets what rock_hello_session needs, the
 * identity the ticket's handshake proved; *keys the session's. */
int
rock_resume_answer_check(struct rock_engine *e, const uint8_t *flight,
    size_t nflight, const struct rock_ticket_entry *tk,
    const uint8_t nonce[ROCK_NONCE_LEN], const uint8_t *in, size_t nin,
    struct rock_server_hello *sh, struct rock_keys *keys,
    struct rock_ticket_msg *tm)
{
	uint8_t tagged[ROCK_ANSWER_MAX];
	uint8_t tag[ROCK_TAG_LEN];
	struct rock_server_resume sr;
	struct rock_udp_address ua;
	uint16_t may = ROCK_FEAT_REQUESTED |
	    (nflight == ROCK_EARLY_TOTAL ? ROCK_FEAT_EARLY : 0);

	if (rock_server_resume_decode(&sr, in) != 0 || sr.version != ROCK_VERSION ||
	    (sr.features & ~may) != 0 ||
	    nin != ROCK_SERVER_RESUME_LEN + rock_answer_tail_len(sr.features) ||
	    rock_ticket_msg_decode(tm, in + ROCK_SERVER_RESUME_LEN) != 0 ||
	    answer_udp_address(sr.features, sr.udp_port,
	    in + ROCK_SERVER_RESUME_LEN, &ua) != 0)
		return ROCK_ERR_PROTOCOL;
	rock_resume_tag(tag, tk->rms, flight, nflight, tagged,
	    rock_answer_covered(tagged, in, ROCK_SERVER_RESUME_TAGGED,
	    in + ROCK_SERVER_RESUME_LEN, nin - ROCK_SERVER_RESUME_LEN));
	if (!rock_equal(tag, sr.tag, ROCK_TAG_LEN)) {
		rlog_warn(e->log, "handshake: a resumption answered without "
		    "the ticket's secret; a full handshake instead");
		return ROCK_ERR_UNVERIFIED;
	}
	memset(sh, 0, sizeof(*sh));
	sh->version = sr.version;
	sh->features = sr.features;
	memcpy(sh->id, sr.id, ROCK_ID_LEN);
	sh->rcvbuf = sr.rcvbuf;
	sh->sndbuf = sr.sndbuf;
	sh->udp_port = sr.udp_port;
	sh->udp_addr = ua;
	memcpy(sh->ident, tk->ident, ROCK_IDENT_LEN);
	rock_resume_keys(keys, 1, tk->rms, nonce, sr.nonce, sr.id);
	return 0;
}

/* SERVER_RESUME, its TICKET (and UDP_ADDRESS), *nin bytes, or a
 * refusal. *heard: the server answered. */
static int
resume_exchange(struct rock_engine *e, int fd, const uint8_t *flight,
    size_t sent, int64_t deadline, const struct rock_ticket_entry *tk,
    const uint8_t nonce[ROCK_NONCE_LEN], struct rock_server_hello *sh,
    struct rock_keys *keys, struct rock_ticket_msg *tm,
    uint8_t in[ROCK_ANSWER_MAX], size_t *nin, int *heard)
{
	int r;

	if ((r = read_answer(e, fd, flight, ROCK_RESUME_TOTAL, sent, deadline,
	    tk->ident, in, ROCK_SERVER_RESUME_LEN + ROCK_TICKET_MSG_LEN,
	    heard)) != 0 ||
	    (r = read_answer_tail(fd, in, ROCK_SERVER_RESUME_LEN +
	    ROCK_TICKET_MSG_LEN, deadline, nin)) != 0)
		return r;
	return rock_resume_answer_check(e, flight, ROCK_RESUME_TOTAL, tk, nonce,
	    in, *nin, sh, keys, tm);
}

/* The announcement and CLIENT_RESUME, with the nonce made for it; or,
 * early, CLIENT_EARLY (doc/PROTOCOL.md 2.9): the ticket's age and a tag
 * by its secret after the same fields. Its length. */
size_t
rock_resume_flight(struct rock_engine *e, int fd,
    const uint8_t ann[ROCK_ANNOUNCE_LEN], const struct rock_ticket_entry *tk,
    int early, uint8_t nonce[ROCK_NONCE_LEN], uint8_t *flight)
{
	struct rock_client_resume cr;
	int64_t age = rock_ticket_now_ms() - tk->received_ms;

	cr.version = ROCK_VERSION;
	cr.features = ROCK_FEAT_REQUESTED | (early ? ROCK_FEAT_EARLY : 0);
	cr.udp_port = e->udp_port;
	rock_random(cr.nonce, ROCK_NONCE_LEN);
	memcpy(nonce, cr.nonce, ROCK_NONCE_LEN);
	memcpy(cr.ticket, tk->ticket, ROCK_TICKET_LEN);
	rock_socket_buffers_new(e, fd, &cr.rcvbuf, &cr.sndbuf);
	memcpy(flight, ann, ROCK_ANNOUNCE_LEN);
	if (!early) {
		rock_client_resume_encode(&cr, flight + ROCK_ANNOUNCE_LEN);
		return ROCK_RESUME_TOTAL;
	}
	rock_client_early_encode(&cr, age < 0 ? 0 : age > UINT32_MAX ?
	    UINT32_MAX : (uint32_t)age, flight + ROCK_ANNOUNCE_LEN);
	rock_early_tag(flight + ROCK_EARLY_TOTAL - ROCK_TAG_LEN, tk->rms, flight);
	return ROCK_EARLY_TOTAL;
}

/* A resumption by the ticket held for the destination: no key exchange,
 * no signature, on either side. *heard: as resume_exchange's. */
static int
handshake_resumed(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, int64_t deadline, const uint8_t *known,
    const uint8_t ann[ROCK_ANNOUNCE_LEN], int fastopen,
    const struct rock_ticket_entry *tk, const struct rock_session_cbs *cbs,
    void *arg, struct rock_session **out, int *heard)
{
	uint8_t flight[ROCK_RESUME_TOTAL], in[ROCK_ANSWER_MAX],
	    nonce[ROCK_NONCE_LEN];
	struct rock_server_hello sh;
	struct rock_ticket_msg tm;
	struct rock_keys keys;
	int fd = -1, r, rtt;
	size_t sent = 0, nin = 0;

	memset(&keys, 0, sizeof(keys));
	if ((r = rock_hello_socket(addr, &fd)) == 0) {
		(void)rock_resume_flight(e, fd, ann, tk, 0, nonce, flight);
		if ((r = rock_hello_dial(e, fd, addr, len, &deadline, flight, sizeof(flight),
		    fastopen, &sent, &rtt)) == 0)
			r = resume_exchange(e, fd, flight, sent, deadline, tk,
			    nonce, &sh, &keys, &tm, in, &nin, heard);
	}
	/* No key known for the destination (none pinned, no file): what
	 * the ticket's handshake proved is recorded as a first contact's. */
	if (r == 0 && known == NULL)
		r = rock_hello_trusted(e, addr, len, NULL, sh.ident);
	if (r == 0)
		r = send_finished(fd, &keys, flight, sizeof(flight), in,
		    nin, deadline);
	if (r == 0) {
		rock_engine_enter(e);
		if ((r = rock_hello_session(e, fd, rtt, addr, len, &sh, &keys, cbs, arg,
		    out)) == 0) {
			rock_hello_keep_ticket(e, addr, len, &tm, &keys, sh.id, sh.ident,
			    tk->origin_ms);
			e->stats.resumed++;
		}
		rock_engine_leave(e);
	}
	rock_keys_wipe(&keys);
	return close_failed(r, fd);
}

/* After a full handshake (a first contact, or the ticket the user's
 * processes share was found wanting), its ticket goes to the file they
 * share: their next connects resume. Without the owner's lock (file
 * I/O). */
static void
share_ticket(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, const uint8_t ann[ROCK_ANNOUNCE_LEN])
{
	struct rock_probe_ticket t;

	if (rock_ticket_share(e, addr, len, &t))
		rock_probe_file_put_ticket(e->probe_file, e->log, addr, len, ann,
		    ROCK_PROBE_TTL_MS, &t);
	rock_wipe(&t, sizeof(t));
}

/* A resumption found wanting costs its ticket and goes on as a full
 * handshake: refused (TICKET), answered without the secret, malformed,
 * or reset once connected (the server gone since, or a middlebox). Not
 * when nothing answered (the full handshake would wait the same) or
 * the answer decides the connect (BUSY, BACKEND, VERSION, STALE, a key
 * refused). */
static int
resume_fell_through(int r, int heard)
{
	switch (r) {
	case ROCK_ERR_AUTH:
	case ROCK_ERR_UNVERIFIED:
	case ROCK_ERR_PROTOCOL:
		return 1;
	case ROCK_ERR_SYSTEM:
		return heard || errno == ECONNRESET || errno == EPIPE;
	default:
		return 0;
	}
}

/* A rockd that misread us (its sniff gave up on a hello that came late:
 * lost twice, or from a loaded host) resets such a connection before its
 * backend gets a byte; a known one may also have let its backend answer,
 * which fails our check. Any reset before the session is taken so (a
 * refusal whose ERROR the reset overtook, a plain server resetting the
 * probe): none has had a byte of the program's. */
static int
misread(int r, int hit)
{
	return (hit && r == ROCK_ERR_PROTOCOL) ||
	    (r == ROCK_ERR_SYSTEM && (errno == ECONNRESET || errno == EPIPE));
}

/* *cached: as announcement_for's. A ticket held for the destination is
 * tried first, when the key it was proved with is the one known now. */
static int
handshake_once(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, int64_t deadline, const uint8_t *known,
    const struct rock_session_cbs *cbs, void *arg, struct rock_session **out,
    int *cached)
{
	uint8_t ann[ROCK_ANNOUNCE_LEN];
	struct rock_ticket_entry tk;
	int r, have, heard = 0, fastopen;

	if ((r = rock_probe_announcement(e, addr, len, deadline, ann, cached,
	    &fastopen)) != 0)
		return r;
	/* The timeout bounds the search for a rockd. One found gets as long
	 * for the handshake as a server gives any (its backend dial is in it):
	 * giving up early would make a rock of nothing but a plain fallback. */
	if (deadline < rock_now_ms() + e->cfg.handshake_timeout_ms)
		deadline = rock_now_ms() + e->cfg.handshake_timeout_ms;
	rock_engine_enter(e);
	have = rock_ticket_find(e, addr, len, &tk) &&
	    (known == NULL || rock_equal(known, tk.ident, ROCK_IDENT_LEN));
	rock_engine_leave(e);
	if (have) {
		r = handshake_resumed(e, addr, len, deadline, known, ann,
		    fastopen, &tk, cbs, arg, out, &heard);
		if (r != 0 && (r == ROCK_ERR_LOST || resume_fell_through(r, heard))) {
			rock_engine_enter(e);
			rock_ticket_drop(e, addr, len, tk.ticket);
			rock_engine_leave(e);
		}
		if (r == 0 || !resume_fell_through(r, heard)) {
			rock_wipe(&tk, sizeof(tk));
			return r;
		}
		rlog_debug(e->log, "handshake: resumption failed (%s); a full "
		    "handshake", rock_err(r));
	}
	rock_wipe(&tk, sizeof(tk));
	if ((r = handshake_full(e, addr, len, deadline, known, ann, fastopen,
	    cbs, arg, out)) == 0)
		share_ticket(e, addr, len, ann);
	return r;
}

int
rock_client_open(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, int timeout_ms, const struct rock_session_cbs *cbs,
    void *arg, struct rock_session **out)
{
	int64_t deadline = rock_now_ms() + timeout_ms;
	uint8_t key[ROCK_IDENT_LEN];
	const uint8_t *known;
	int hit, cached = 0, r, err, tries;

	/* The key file is looked at once per connect (a stat while it is
	 * unchanged). A server whose key we know is a rockd too, cached or
	 * not. */
	known = rock_trust_known_memo(&e->trust, &e->known, e->log, addr, len,
	    key) ? key : NULL;
	r = handshake_once(e, addr, len, deadline, known, cbs, arg, out, &cached);
	hit = cached || known != NULL;
	/* A rockd that misread us: twice more as it is. */
	for (tries = 0; tries < 2 && misread(r, hit); tries++) {
		rlog_debug(e->log, "handshake: %s; again",
		    r == ROCK_ERR_PROTOCOL ? "no rock's answer" : "reset");
		r = handshake_once(e, addr, len, deadline, known, cbs, arg, out,
		    &cached);
	}
	/* The server restarted since the probe (STALE), or a cached answer no
	 * longer holds: forget it, probe again, once. A cached announcement
	 * that drew a refusal the known key did not sign may be a rockd
	 * restarted with a new key (its STALE is signed by that one): the
	 * fresh announcement's hello then meets the key check proper (a
	 * changed key is refused with its warning, or accepted). */
	if (r == ROCK_ERR_LOST || (hit && r == ROCK_ERR_PROTOCOL) ||
	    (cached && r == ROCK_ERR_UNVERIFIED)) {
		rock_probe_forget_everywhere(e, addr, len);
		/* A probe of its own time: the handshakes may have used it all,
		 * and a probe cut short would pass for a plain server. */
		r = handshake_once(e, addr, len, rock_now_ms() + timeout_ms, known,
		    cbs, arg, out, &cached);
	}
	err = errno;
	if (r == ROCK_ERR_PROTOCOL || r == ROCK_ERR_LOST)
		rock_probe_forget_everywhere(e, addr, len);
	if (r == ROCK_ERR_LOST)
		r = ROCK_ERR_PROTOCOL;
	/* A rockd whose key we know answered, but never with its signature:
	 * a plain connection instead would go to whoever answered. */
	if (r == ROCK_ERR_PROTOCOL && known != NULL)
		r = ROCK_ERR_UNVERIFIED;
	if (r == ROCK_ERR_UNVERIFIED)
		rlog_warn(e->log, "handshake: a rockd whose key is known gave no "
		    "answer signed by it; the connect is refused, not made plain");
	errno = err;
	return r;
}
