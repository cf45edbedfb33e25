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
 * prove is then only a failed attempt. */
static int
read_error_reply(struct rock_engine *e, int fd, uint8_t first,
    int64_t deadline, const uint8_t *known, const uint8_t *hello)
{
	uint8_t buf[ROCK_ERROR_MAX_LEN];
	struct rock_error_msg em;
	size_t used;
	int r;

	buf[0] = first;
	if ((r = rock_blocking_read(fd, buf + 1, 2, deadline)) != 0 ||
	    (r = rock_blocking_read(fd, buf + 3, (buf[2] <= ROCK_ERROR_MAX_TEXT ?
	    buf[2] : 0) + ROCK_SIG_LEN, deadline)) != 0)
		return ROCK_ERR_PROTOCOL;
	if (rock_error_decode(&em, buf, sizeof(buf), &used) != 0)
		return ROCK_ERR_PROTOCOL;
	/* A server that proved this key speaks our version: its VERSION, as
	 * any refusal, must be signed, or it would buy a plain connection. */
	if (known != NULL &&
	    rock_refusal_verify(e, known, &em, buf, used, hello, ROCK_HELLO_TOTAL) != 0)
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
build_hello(const struct rock_engine *e, int fd,
    const uint8_t ann[ROCK_ANNOUNCE_LEN], const struct rock_keypair *kp,
    uint8_t out[ROCK_HELLO_TOTAL])
{
	struct rock_client_hello ch;

	ch.version = ROCK_VERSION;
	ch.features = ROCK_FEAT_ALL;
	memcpy(ch.pk, kp->pk, ROCK_KEY_LEN);
	rock_socket_buffers(e, fd, &ch.rcvbuf, &ch.sndbuf);
	ch.udp_port = e->udp_port;
	rock_random(ch.nonce, ROCK_NONCE_LEN);
	memcpy(out, ann, ROCK_ANNOUNCE_LEN);
	rock_client_hello_encode(&ch, out + ROCK_ANNOUNCE_LEN);
}

/* The rest of the hello (what the SYN did not carry), then the answer:
 * a SERVER_HELLO signed by the key it names over the whole exchange, or a
 * refusal. */
static int
hello_exchange(struct rock_engine *e, int fd, const uint8_t *hello,
    size_t sent, int64_t deadline, const uint8_t *known,
    struct rock_server_hello *sh)
{
	uint8_t in[ROCK_SERVER_HELLO_LEN];
	int r;

	if ((r = rock_blocking_write(fd, hello + sent, ROCK_HELLO_TOTAL - sent, deadline)) != 0 ||
	    (r = rock_blocking_read(fd, in, 1, deadline)) != 0)
		return r == ROCK_ERR_SHORT ? ROCK_ERR_PROTOCOL : r;
	if (in[0] == ROCK_MSG_ERROR)
		return read_error_reply(e, fd, in[0], deadline, known, hello);
	if ((r = rock_blocking_read(fd, in + 1, sizeof(in) - 1, deadline)) != 0)
		return r == ROCK_ERR_SHORT ? ROCK_ERR_PROTOCOL : r;
	if (rock_server_hello_decode(sh, in) != 0 || sh->version != ROCK_VERSION ||
	    (sh->features & ~ROCK_FEAT_ALL) != 0)
		return ROCK_ERR_PROTOCOL;
	if (rock_answer_verify(sh->sig, sh->ident, ROCK_ANSWER_HELLO, hello,
	    ROCK_HELLO_TOTAL, in, ROCK_SERVER_HELLO_SIGNED) != 0) {
		rlog_warn(e->log, "handshake: the server's hello is not signed "
		    "by the key it names; dropped");
		return known != NULL ? ROCK_ERR_UNVERIFIED : ROCK_ERR_PROTOCOL;
	}
	return 0;
}

static int
make_session(struct rock_engine *e, int fd, int rtt_ms,
    const struct sockaddr *addr, socklen_t len,
    const struct rock_server_hello *sh, const struct rock_keys *keys,
    const struct rock_session_cbs *cbs, void *arg, struct rock_session **out)
{
	uint32_t rcv, snd;
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
	rock_socket_buffers(e, fd, &rcv, &snd);
	if ((r = rock_session_new(e, ROCK_ROLE_CLIENT, sh->id, keys,
	    rock_ring_cap_for(e, snd, peer_rcv), cbs, arg, &s)) != 0)
		return r;
	s->features = sh->features;
	memcpy(s->server_ident, sh->ident, ROCK_IDENT_LEN);
	s->tcp_bound = rock_tcp_bound(snd, peer_rcv);
	memcpy(&s->peer, addr, len);
	s->peer_len = len;
	rock_udp_peer_from_tcp(s, sh->udp_port);
	rock_path_init(s, rtt_ms);	/* no connection yet: the attach bounds it */
	if ((r = rock_is_direct(s) ? rock_direct_attach(s, fd) :
	    rock_stream_attach(s, fd)) != 0) {
		s->fd = -1;
		rock_session_free(s);
		return r;
	}
	rlog_debug(e->log, "rock %s: connected as client, features %#x, UDP port %u",
	    s->name, sh->features, sh->udp_port);
	*out = s;
	return 0;
}

/* The key this connect read as known for the server (pinned or in the
 * file) is the one it proved: trusted, without reading the file again.
 * Else the file decides (first contact, a changed key). */
static int
trusted(struct rock_engine *e, const struct sockaddr *addr, socklen_t len,
    const uint8_t *known, const uint8_t ident[ROCK_IDENT_LEN])
{
	if (known != NULL && rock_equal(known, ident, ROCK_IDENT_LEN))
		return 0;
	return rock_trust_check(&e->trust, e->log, addr, len, ident);
}

/* *cached: as announcement_for's. */
static int
handshake_once(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, int64_t deadline, const uint8_t *known,
    const struct rock_session_cbs *cbs, void *arg, struct rock_session **out,
    int *cached)
{
	uint8_t ann[ROCK_ANNOUNCE_LEN];
	struct rock_server_hello sh;
	uint8_t hello[ROCK_HELLO_TOTAL];
	struct rock_keypair kp;
	struct rock_keys keys;
	int fd = -1, r, rtt, err;
	size_t sent;
	int64_t t0, bound;

	if ((r = rock_probe_announcement(e, addr, len, deadline, ann, cached)) != 0)
		return r;
	t0 = rock_now_ms();
	/* The timeout bounds the search for a rockd. One found gets as long
	 * for the handshake as a server gives any (its backend dial is in it):
	 * giving up early would make a rock of nothing but a plain fallback. */
	if (deadline < t0 + e->cfg.handshake_timeout_ms)
		deadline = t0 + e->cfg.handshake_timeout_ms;
	if ((fd = rock_sys.socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0)) < 0)
		return ROCK_ERR_SYSTEM;
	rock_engine_enter(e);
	rock_engine_keypair_take(e, &kp);
	rock_engine_leave(e);
	build_hello(e, fd, ann, &kp, hello);
	if ((r = rock_blocking_connect(fd, addr, len, deadline, hello, sizeof(hello),
	    &sent)) != 0) {
		err = errno;
		rock_keypair_wipe(&kp);
		rock_sys.close(fd);
		errno = err;
		return r;
	}
	rtt = (int)(rock_now_ms() - t0);
	/* The path measured by the connect may be slower than the bound. */
	bound = t0 + rtt + rock_handshake_ms(e, rtt);
	if (deadline < bound)
		deadline = bound;
	if ((r = hello_exchange(e, fd, hello, sent, deadline, known, &sh)) == 0 &&
	    (r = trusted(e, addr, len, known, sh.ident)) == 0 &&
	    (r = rock_keys_client(&keys, &kp, sh.pk)) == 0) {
		rock_engine_enter(e);
		r = make_session(e, fd, rtt, addr, len, &sh, &keys, cbs, arg,
		    out);
		rock_engine_leave(e);
	}
	rock_keypair_wipe(&kp);
	rock_keys_wipe(&keys);
	if (r != 0 && fd >= 0)
		rock_sys.close(fd);
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

	/* The key file is read once per connect. A server whose key we know
	 * is a rockd too, cached or not. */
	known = rock_trust_known(&e->trust, e->log, addr, len, key) ? key : NULL;
	r = handshake_once(e, addr, len, deadline, known, cbs, arg, out, &cached);
	hit = cached || known != NULL;
	/* A known rockd that misread us (its sniff gave up on a hello that
	 * came late, on a loaded host): twice more as it is. */
	for (tries = 0; hit && r == ROCK_ERR_PROTOCOL && tries < 2; tries++)
		r = handshake_once(e, addr, len, deadline, known, cbs, arg, out,
		    &cached);
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
