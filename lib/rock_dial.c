/* rock_dial.c: the client side: EDP probe and handshake, and authenticated reconnects. */
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

#ifndef TCP_FASTOPEN_CONNECT
#define TCP_FASTOPEN_CONNECT 30	/* Linux 4.11 */
#endif

/* ---- blocking helpers for the initial connection, bounded by a deadline */

static int
wait_fd(int fd, short events, int64_t deadline)
{
	struct pollfd p = { .fd = fd, .events = events };
	int64_t left = deadline - rock_now_ms();
	int r;

	if (left <= 0)
		return ROCK_ERR_TIMEOUT;
	do
		r = rock_sys.poll(&p, 1, (int)left);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return ROCK_ERR_SYSTEM;
	return r == 0 ? ROCK_ERR_TIMEOUT : 0;
}

/* Connect fd within the deadline. With data and Fast Open: where the
 * kernel holds a cookie for the server, connect() only arms it and `data`
 * goes with the SYN (*sent says how much); where it holds none, the SYN
 * asks for one. Without data (the probe), no Fast Open: a SYN carrying a
 * cookie and nothing else would make the server accept before the
 * handshake, and time our first bytes from there. */
static int
dial_connect(int fd, const struct sockaddr *addr, socklen_t len,
    int64_t deadline, const uint8_t *data, size_t n, size_t *sent)
{
	int err = 0, one = 1, r;
	socklen_t el = sizeof(err);
	ssize_t w;

	*sent = 0;
	if (n > 0)
		(void)rock_sys.setsockopt(fd, IPPROTO_TCP, TCP_FASTOPEN_CONNECT, &one,
		    sizeof(one));
	if (rock_sys.connect(fd, addr, len) == 0) {
		w = rock_sys.send(fd, data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w > 0)
			*sent = (size_t)w;
		else if (w < 0 && errno != EINPROGRESS && errno != EAGAIN)
			return ROCK_ERR_SYSTEM;
	} else if (errno != EINPROGRESS) {
		return ROCK_ERR_SYSTEM;
	}
	if ((r = wait_fd(fd, POLLOUT, deadline)) != 0)
		return r;
	if (rock_sys.getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0) {
		errno = err;
		return ROCK_ERR_SYSTEM;
	}
	return 0;
}

static int
dial_blocking(const struct sockaddr *addr, socklen_t len, int64_t deadline,
    int *out)
{
	int fd = rock_sys.socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int err, r;
	size_t sent;

	if (fd < 0)
		return ROCK_ERR_SYSTEM;
	if ((r = dial_connect(fd, addr, len, deadline, NULL, 0, &sent)) != 0) {
		err = errno;
		rock_sys.close(fd);
		errno = err;
		return r;
	}
	*out = fd;
	return 0;
}

static int
write_all(int fd, const uint8_t *p, size_t n, int64_t deadline)
{
	ssize_t w;
	int r;

	while (n > 0) {
		w = rock_sys.send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EAGAIN) {
			if ((r = wait_fd(fd, POLLOUT, deadline)) != 0)
				return r;
			continue;
		}
		if (w < 0)
			return errno == EINTR ? 0 : ROCK_ERR_SYSTEM;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Exactly n bytes; ROCK_ERR_SHORT on end of file before that. */
static int
read_exact(int fd, uint8_t *p, size_t n, int64_t deadline)
{
	ssize_t got;
	int r;

	while (n > 0) {
		got = rock_sys.recv(fd, p, n, MSG_DONTWAIT);
		if (got < 0 && errno == EAGAIN) {
			if ((r = wait_fd(fd, POLLIN, deadline)) != 0)
				return r;
			continue;
		}
		if (got < 0)
			return errno == EINTR ? 0 : ROCK_ERR_SYSTEM;
		if (got == 0)
			return ROCK_ERR_SHORT;
		p += got;
		n -= (size_t)got;
	}
	return 0;
}

/* The probe's round trip: the SYN's as TCP measured it (timestamps make
 * it valid even when the SYN went twice), else the connect's time. */
static int
probe_rtt_ms(int fd, int connect_ms)
{
	struct rock_tcp_sample t;

	if (rock_tcp_sample(fd, &t) == 0 && t.rtt_us > 0)
		return (int)(t.rtt_us / 1000);
	return connect_ms;
}

/* How long a probe waits for the announcement: two lost segments
 * survive (our FIN resent after our RTO, rockd's answer after its own, its
 * round trip maybe longer than ours by the path's jitter). At least
 * 500 ms: what a silent ordinary server costs on first contact. */
static int
announce_wait_ms(int rtt)
{
	int ms = 2 * rock_exchange_ms(rtt);

	return ms < 500 ? 500 : ms;
}

/* Whether a probe's end (FIN) is still unacknowledged: a probe sends no
 * byte, so past the SYN, the FIN is all there is to acknowledge. */
static int
fin_unacked(int fd)
{
	struct rock_tcp_sample t;

	return rock_tcp_sample(fd, &t) == 0 && t.bytes_acked < 2;
}

/* A rockd that has not had our FIN when its wait for a silent client's
 * first bytes ends (at least ROCK_FIRST_BYTES_MS after the handshake)
 * takes the probe for a plain client and relays it to its backend. Seen
 * on the cellular profile: a handshake round trip shortened by reordering
 * made that wait 800 ms, and the FIN was lost. An answer that is not an
 * announcement may then be rockd's, and the probe went unheard: silence
 * with our FIN unacknowledged; or an answer as late as that wait after the
 * connection was up (an ordinary server answers within a round trip) that
 * came while our FIN was unacknowledged, or that was the end (rockd's
 * backend ending at our late FIN). A server that greets late has had our
 * FIN: it stands. */
static int
went_unheard(int fd, int r, int64_t waited_ms, int rtt, int first_unacked,
    int first_bytes)
{
	int late_ms = rtt + ROCK_FIRST_BYTES_MS - 50;

	if (r == ROCK_ERR_TIMEOUT)
		return fin_unacked(fd);
	return waited_ms >= late_ms && (first_unacked || !first_bytes);
}

/* EDP probe: connect, shut our side, read to EOF. Exactly an announcement
 * means enhanced; anything else, an ordinary server. Silence past the wait
 * is reported as not enhanced too, with *silent set: a rockd may just be
 * slow, so that answer is not worth remembering. *unheard: see
 * went_unheard(). The deadline bounds the connect
 * (rock_probe_budget_ms) and the wait. */
static int
probe_once(const struct sockaddr *addr, socklen_t len, int64_t deadline,
    uint8_t ann[ROCK_ANNOUNCE_LEN], int *silent, int *unheard)
{
	int64_t t0 = rock_now_ms(), up, first, wait_end;
	struct rock_announce a;
	uint8_t extra;
	int fd, r, rtt, first_unacked = 0, first_bytes = 0;

	*silent = *unheard = 0;
	if ((r = dial_blocking(addr, len, deadline, &fd)) != 0)
		return r;
	/* rockd's wait for a silent client starts about now, not when our
	 * FIN leaves: a client slow to send it (a loaded host) would else
	 * take rockd's relayed backend for an ordinary server's answer. */
	up = rock_now_ms();
	rtt = probe_rtt_ms(fd, (int)(up - t0));
	if ((wait_end = rock_now_ms() + announce_wait_ms(rtt)) < deadline)
		deadline = wait_end;
	rock_sys.shutdown(fd, SHUT_WR);
	/* The magic first: an ordinary server's first bytes end it early. */
	r = wait_fd(fd, POLLIN, deadline);
	first = rock_now_ms();
	if (r == 0) {
		first_unacked = fin_unacked(fd);
		first_bytes = rock_sys.recv(fd, &extra, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
		r = read_exact(fd, ann, ROCK_MAGIC_LEN, deadline);
	}
	if (r == 0 && memcmp(ann, rock_magic_announce, ROCK_MAGIC_LEN) != 0)
		r = ROCK_ERR_NOT_ENHANCED;
	if (r == 0)
		r = read_exact(fd, ann + ROCK_MAGIC_LEN,
		    ROCK_ANNOUNCE_LEN - ROCK_MAGIC_LEN, deadline);
	if (r == 0) {
		/* Then the end: anything more is not an announcement. */
		r = read_exact(fd, &extra, 1, deadline);
		r = r == ROCK_ERR_SHORT ? 0 : r == ROCK_ERR_TIMEOUT ? r :
		    ROCK_ERR_NOT_ENHANCED;
	}
	if (r != 0)
		*unheard = went_unheard(fd, r, first - up, rtt, first_unacked,
		    first_bytes);
	rock_sys.close(fd);
	if (r == 0 && rock_announce_decode(&a, ann) == 0 &&
	    rock_version_pick(ROCK_VERSION, ROCK_VERSION, a.version_min,
	    a.version_max) != 0)
		return 0;
	if (r == ROCK_ERR_SYSTEM && errno != ECONNRESET)
		return r;
	*silent = r == ROCK_ERR_TIMEOUT;
	return ROCK_ERR_NOT_ENHANCED;
}

/* A probe, and a second one when the first went unheard, if the deadline
 * leaves time for it: the second's answer stands. */
static int
probe(const struct rock_log *log, const struct sockaddr *addr,
    socklen_t len, int64_t deadline, uint8_t ann[ROCK_ANNOUNCE_LEN],
    int *silent)
{
	int r, unheard;

	r = probe_once(addr, len, deadline, ann, silent, &unheard);
	if (r != ROCK_ERR_NOT_ENHANCED || !unheard || rock_now_ms() >= deadline)
		return r;
	if (log != NULL)
		rlog_debug(log, "probe: no announcement, and our end may not "
		    "have reached a rockd in time: probing again");
	return probe_once(addr, len, deadline, ann, silent, &unheard);
}

/* A refusal's signature, by the key the client trusts for the server,
 * over what the client sent: 0, or ROCK_ERR_AUTH (logged, within the
 * engine's budget). */
static int
refusal_verify(struct rock_engine *e, const uint8_t ident[ROCK_IDENT_LEN],
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
	if ((r = read_exact(fd, buf + 1, 2, deadline)) != 0 ||
	    (r = read_exact(fd, buf + 3, (buf[2] <= ROCK_ERROR_MAX_TEXT ?
	    buf[2] : 0) + ROCK_SIG_LEN, deadline)) != 0)
		return ROCK_ERR_PROTOCOL;
	if (rock_error_decode(&em, buf, sizeof(buf), &used) != 0)
		return ROCK_ERR_PROTOCOL;
	/* A server that proved this key speaks our version: its VERSION, as
	 * any refusal, must be signed, or it would buy a plain connection. */
	if (known != NULL &&
	    refusal_verify(e, known, &em, buf, used, hello, ROCK_HELLO_TOTAL) != 0)
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

	if ((r = write_all(fd, hello + sent, ROCK_HELLO_TOTAL - sent, deadline)) != 0 ||
	    (r = read_exact(fd, in, 1, deadline)) != 0)
		return r == ROCK_ERR_SHORT ? ROCK_ERR_PROTOCOL : r;
	if (in[0] == ROCK_MSG_ERROR)
		return read_error_reply(e, fd, in[0], deadline, known, hello);
	if ((r = read_exact(fd, in + 1, sizeof(in) - 1, deadline)) != 0)
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

static struct probe_entry *
cache_find(struct rock_engine *e, const struct sockaddr *addr, socklen_t len)
{
	int64_t now = rock_now_ms();
	unsigned i;

	for (i = 0; i < PROBE_CACHE; i++) {
		struct probe_entry *p = &e->probes[i];

		if (p->len == len && memcmp(&p->addr, addr, len) == 0) {
			if (p->expires_ms > now)
				return p;
			p->len = 0;
		}
	}
	return NULL;
}

/* How long a probe's answer holds: ann NULL (an ordinary server, or none
 * at all) for a minute, so plain connections pay no probe; a rockd's
 * announcement for ten. */
static int64_t
cache_ttl_ms(const uint8_t *ann)
{
	return ann != NULL ? PROBE_CACHE_MS : PROBE_CACHE_PLAIN_MS;
}

/* ttl_ms: what is left of the answer's life (the shared file's entries
 * are part spent). */
static void
cache_put(struct rock_engine *e, const struct sockaddr *addr, socklen_t len,
    const uint8_t ann[ROCK_ANNOUNCE_LEN], int64_t ttl_ms)
{
	struct probe_entry *p = cache_find(e, addr, len);

	if (p == NULL) {
		p = &e->probes[e->probe_next];
		e->probe_next = (e->probe_next + 1) % PROBE_CACHE;
	}
	memcpy(&p->addr, addr, len);
	p->len = len;
	p->enhanced = ann != NULL;
	if (ttl_ms > cache_ttl_ms(ann))
		ttl_ms = cache_ttl_ms(ann);
	p->expires_ms = rock_now_ms() + ttl_ms;
	if (ann != NULL)
		memcpy(p->announcement, ann, ROCK_ANNOUNCE_LEN);
}

int
rock_probe_budget_ms(int timeout_ms, int mapped)
{
	/* TCP resends a lost SYN after 1 s, then 2 s and 4 s more. */
	return timeout_ms + (mapped ? 1000 + 2000 : 1000 + 2000 + 4000);
}

int
rock_probe(const struct rock_log *log, const struct sockaddr *addr,
    socklen_t len, int timeout_ms, uint8_t ann[ROCK_ANNOUNCE_LEN], int *silent)
{
	return probe(log, addr, len, rock_now_ms() + timeout_ms, ann, silent);
}

void
rock_probe_remember(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, const uint8_t ann[ROCK_ANNOUNCE_LEN])
{
	rock_engine_enter(e);
	cache_put(e, addr, len, ann, cache_ttl_ms(ann));
	rock_engine_leave(e);
}

void
rock_engine_set_probe_file(struct rock_engine *e, struct rock_probe_file *pf)
{
	e->probe_file = pf;
}

/* Forgotten here and in the shared file: the next connect, ours or
 * another process's, probes. Without the owner's lock (file I/O). */
static void
forget_everywhere(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len)
{
	rock_engine_enter(e);
	rock_probe_forget(e, addr, len);
	rock_engine_leave(e);
	rock_probe_file_put(e->probe_file, e->log, addr, len, NULL, 0);
}

void
rock_probe_forget(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len)
{
	struct probe_entry *p = cache_find(e, addr, len);

	if (p != NULL)
		p->len = 0;
}

int
rock_probe_found_plain(int r)
{
	/* A timeout here is the connect's: nothing answered the SYN. */
	return r == ROCK_ERR_NOT_ENHANCED || r == ROCK_ERR_TIMEOUT;
}

/* The announcement for a destination: cached here, else in the file the
 * user's processes share, else from a probe (whose answer goes to both).
 * The file and the probe are read without the owner's lock: the probe
 * takes a round trip or more. *cached: the answer was not a probe's
 * just now, and may no longer hold. */
static int
announcement_for(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, int64_t deadline, uint8_t ann[ROCK_ANNOUNCE_LEN],
    int *cached)
{
	struct rock_probe_fact f;
	struct probe_entry *p;
	int r, err, silent;

	*cached = 1;
	rock_engine_enter(e);
	if ((p = cache_find(e, addr, len)) != NULL) {
		e->stats.probe_cache_hits++;
		r = p->enhanced ? 0 : ROCK_ERR_NOT_ENHANCED;
		if (p->enhanced)
			memcpy(ann, p->announcement, ROCK_ANNOUNCE_LEN);
		rock_engine_leave(e);
		return r;
	}
	rock_engine_leave(e);
	if (rock_probe_file_get(e->probe_file, e->log, addr, len, &f)) {
		rock_engine_enter(e);
		e->stats.probe_cache_hits++;
		cache_put(e, addr, len, f.enhanced ? f.announcement : NULL,
		    f.ttl_ms);
		rock_engine_leave(e);
		if (!f.enhanced)
			return ROCK_ERR_NOT_ENHANCED;
		memcpy(ann, f.announcement, ROCK_ANNOUNCE_LEN);
		return 0;
	}
	*cached = 0;
	rock_engine_enter(e);
	e->stats.probes++;
	rock_engine_leave(e);
	r = probe(e->log, addr, len, deadline, ann, &silent);
	err = errno;
	if (r == 0 || (rock_probe_found_plain(r) && !silent)) {
		rock_engine_enter(e);
		cache_put(e, addr, len, r == 0 ? ann : NULL,
		    cache_ttl_ms(r == 0 ? ann : NULL));
		rock_engine_leave(e);
		rock_probe_file_put(e->probe_file, e->log, addr, len,
		    r == 0 ? ann : NULL, cache_ttl_ms(r == 0 ? ann : NULL));
	}
	errno = err;
	return r;
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

	if ((r = announcement_for(e, addr, len, deadline, ann, cached)) != 0)
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
	if ((r = dial_connect(fd, addr, len, deadline, hello, sizeof(hello),
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
		forget_everywhere(e, addr, len);
		/* A probe of its own time: the handshakes may have used it all,
		 * and a probe cut short would pass for a plain server. */
		r = handshake_once(e, addr, len, rock_now_ms() + timeout_ms, known,
		    cbs, arg, out, &cached);
	}
	err = errno;
	if (r == ROCK_ERR_PROTOCOL || r == ROCK_ERR_LOST)
		forget_everywhere(e, addr, len);
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

/* ---- reconnect: asynchronous, on the engine's event loop
 *
 * While the path is down, a fresh attempt every period: a new SYN finds the
 * path's return within a period, where the kernel's own SYN retransmits
 * wait 1 s, 3 s, 7 s... Each attempt's request goes with its SYN when the
 * kernel holds a Fast Open cookie for the server, so the server's answer
 * and its replay come back one round trip after the path does. Overlapping
 * attempts are safe: the server takes the first request and refuses the
 * others as SUPERSEDED (rock_accept.c), and the first authentic answer
 * wins here. Only one suspended rock per server address dials (its scout);
 * the others wait until it finds the path up, so the cost of an outage
 * follows peers, not rocks. */

static void on_attempt(evutil_socket_t fd, short what, void *arg);
static void on_next(evutil_socket_t fd, short what, void *arg);
static void attempt_failed(struct rock_attempt *a, const char *why);
static void scout_release(struct rock_session *s, int path_up);

/* Short for the first half minute of an outage, then doubling to 2 s. */
static int
attempt_period_ms(const struct rock_session *s)
{
	int64_t down = rock_now_ms() - s->suspended_at_ms - 30000;
	int ms = 250;

	for (; down > 0 && ms < 2000; down -= 30000)
		ms *= 2;
	return ms;
}

/* One attempt: its SYN and its request answered, a loss in each allowed,
 * over the path as last measured; once its TCP handshake is done, over
 * the round trip that handshake measured (the new path may be slower). */
static int
attempt_life_ms(const struct rock_attempt *a)
{
	int rtt = a->rtt_ms > a->s->rtt_ms ? a->rtt_ms : a->s->rtt_ms;
	int ms = 2 * rock_exchange_ms(rtt);

	return ms > a->s->e->cfg.dial_timeout_ms ? ms : a->s->e->cfg.dial_timeout_ms;
}

static int
same_peer(const struct rock_session *a, const struct rock_session *b)
{
	return a->peer_len == b->peer_len &&
	    memcmp(&a->peer, &b->peer, a->peer_len) == 0;
}

/* 1: s dials (it is its peer's scout, or no slot is left to coordinate);
 * 0: another rock to the same server dials, s waits for it. */
static int
scout_claim(struct rock_session *s)
{
	struct rock_session **free_slot = NULL, *t;
	unsigned i;

	for (i = 0; i < ROCK_SCOUTS; i++) {
		t = s->e->scouts[i];
		if (t == s)
			return 1;
		if (t == NULL && free_slot == NULL)
			free_slot = &s->e->scouts[i];
		else if (t != NULL && same_peer(t, s)) {
			s->parked = 1;
			return 0;
		}
	}
	if (free_slot != NULL)
		*free_slot = s;
	return 1;
}

/* s stops scouting: the rocks waiting on it dial now. path_up: s found
 * the path up, and they all go at once without a scout; else (s ends) the
 * first of them becomes the scout. */
static void
scout_release(struct rock_session *s, int path_up)
{
	struct rock_session *t;
	unsigned i;
	int was = 0;

	for (i = 0; i < ROCK_SCOUTS; i++) {
		if (s->e->scouts[i] == s) {
			s->e->scouts[i] = NULL;
			was = 1;
		}
	}
	if (!was)
		return;
	for (t = s->e->all; t != NULL; t = t->next) {
		if (t->parked && same_peer(t, s)) {
			t->parked = 0;
			t->unscouted = path_up;
			rock_dial_schedule(t, 1);
		}
	}
}

/* With a reset: the server may have taken this attempt already, and a FIN
 * there would read as the end of our stream. */
static void
attempt_close(struct rock_attempt *a)
{
	if (a->ev != NULL)
		event_free(a->ev);
	if (a->fd >= 0)
		rock_close_reset(a->fd);
	a->ev = NULL;
	a->fd = -1;
}

static int
attempts_open(const struct rock_dial *d)
{
	int i, n = 0;

	for (i = 0; i < ROCK_DIAL_ATTEMPTS; i++)
		n += d->a[i].fd >= 0;
	return n;
}

static void
dial_free(struct rock_session *s)
{
	struct rock_dial *d = s->dial;
	int i;

	scout_release(s, 0);
	if (d == NULL)
		return;
	for (i = 0; i < ROCK_DIAL_ATTEMPTS; i++)
		attempt_close(&d->a[i]);
	if (d->ev_next != NULL)
		event_free(d->ev_next);
	free(d);
	s->dial = NULL;
}

static int
attempt_arm(struct rock_attempt *a, short what)
{
	struct rock_session *s = a->s;
	int ms = attempt_life_ms(a) - (int)(rock_now_ms() - a->started_ms);
	struct timeval tv;

	if (ms < 1)
		ms = 1;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	if (a->ev != NULL)
		event_free(a->ev);
	a->ev = event_new(s->e->base, a->fd, what, on_attempt, a);
	return a->ev == NULL ? -1 : event_add(a->ev, &tv);
}

/* The lowest attempt still open: the server does not let a request sent
 * while the attempt it took was open replace that one. */
static uint32_t
lowest_open(const struct rock_dial *d, uint32_t n)
{
	int i;

	for (i = 0; i < ROCK_DIAL_ATTEMPTS; i++)
		if (d->a[i].fd >= 0 && d->a[i].number < n)
			n = d->a[i].number;
	return n;
}

void
rock_dial_request_encode(const struct rock_session *s,
    const uint8_t nonce[ROCK_NONCE_LEN], uint32_t attempt, uint32_t since,
    uint32_t flags, uint8_t out[ROCK_RECONNECT_REQ_LEN])
{
	struct rock_reconnect_req rq;

	memset(&rq, 0, sizeof(rq));
	rq.version = ROCK_VERSION;
	memcpy(rq.id, s->id, ROCK_ID_LEN);
	memcpy(rq.nonce, nonce, ROCK_NONCE_LEN);
	rq.attempt = attempt;
	rq.since = since;
	rq.consumed = s->consumed;
	rq.end = rock_session_end(s);
	rq.flags = flags;
	rock_reconnect_req_encode(&rq, out);
	rock_request_tag(rq.tag, s->keys.tx, out);
	rock_reconnect_req_encode(&rq, out);
}

int
rock_dial_ok_decode(const struct rock_session *s,
    const uint8_t nonce[ROCK_NONCE_LEN], const uint8_t *buf,
    struct rock_reconnect_ok *ok)
{
	uint8_t tag[ROCK_TAG_LEN];

	if (rock_reconnect_ok_decode(ok, buf) != 0)
		return ROCK_ERR_PROTOCOL;
	rock_ok_tag(tag, s->keys.rx, s->id, nonce, buf);
	return rock_equal(tag, ok->tag, ROCK_TAG_LEN) ? 0 : ROCK_ERR_AUTH;
}

static int
send_request(struct rock_attempt *a, short wait)
{
	struct rock_session *s = a->s;
	uint8_t out[ROCK_RECONNECT_REQ_LEN];

	rock_random(a->nonce, ROCK_NONCE_LEN);
	rock_dial_request_encode(s, a->nonce, a->number,
	    lowest_open(s->dial, a->number), s->flags, out);
	memcpy(a->req, out, sizeof(a->req));
	/* 85 bytes on a fresh connection always fit its send buffer. */
	if (rock_sys.send(a->fd, out, sizeof(out), MSG_NOSIGNAL | MSG_DONTWAIT) !=
	    (ssize_t)sizeof(out))
		return -1;
	a->requested = 1;
	a->have = 0;
	return attempt_arm(a, wait);
}

static struct rock_attempt *
attempt_slot(struct rock_dial *d)
{
	struct rock_attempt *oldest = &d->a[0];
	int i;

	for (i = 0; i < ROCK_DIAL_ATTEMPTS; i++) {
		if (d->a[i].fd < 0)
			return &d->a[i];
		if (d->a[i].number < oldest->number)
			oldest = &d->a[i];
	}
	attempt_close(oldest);
	return oldest;
}

static void
launch_attempt(struct rock_session *s)
{
	struct rock_attempt *a = attempt_slot(s->dial);
	int one = 1;

	a->s = s;
	a->number = ++s->attempts;
	a->started_ms = rock_now_ms();
	a->requested = 0;
	a->connected = 0;
	a->rtt_ms = 0;
	a->have = 0;
	rock_lookup_next(s, &a->addr, &a->addr_len);
	a->fd = rock_sys_aside(rock_sys.socket(a->addr.ss_family,
	    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
	if (a->fd < 0) {
		attempt_failed(a, strerror(errno));
		return;
	}
	(void)rock_sys.setsockopt(a->fd, IPPROTO_TCP, TCP_FASTOPEN_CONNECT, &one, sizeof(one));
	if (rock_sys.connect(a->fd, (struct sockaddr *)&a->addr, a->addr_len) == 0) {
		/* A Fast Open cookie is cached: the request rides in the SYN;
		 * the socket turns writable when the handshake completes. */
		if (send_request(a, EV_READ | EV_WRITE) != 0)
			attempt_failed(a, strerror(errno));
		return;
	}
	if (errno != EINPROGRESS)
		attempt_failed(a, strerror(errno));
	else if (attempt_arm(a, EV_WRITE) != 0)
		attempt_failed(a, "no memory for an event");
}

static void
arm_next(struct rock_session *s)
{
	int ms = attempt_period_ms(s);
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	evtimer_add(s->dial->ev_next, &tv);
}

static void
start_round(struct rock_session *s)
{
	struct rock_dial *d;
	int i;

	if (!s->unscouted && !scout_claim(s))
		return;
	s->unscouted = 0;
	if ((d = calloc(1, sizeof(*d))) == NULL) {
		scout_release(s, 0);
		rock_dial_schedule(s, 0);
		return;
	}
	for (i = 0; i < ROCK_DIAL_ATTEMPTS; i++)
		d->a[i].fd = -1;
	s->dial = d;
	if ((d->ev_next = evtimer_new(s->e->base, on_next, s)) == NULL) {
		dial_free(s);
		rock_dial_schedule(s, 0);
		return;
	}
	launch_attempt(s);
	if (s->dial != NULL)
		arm_next(s);
}

static void
on_next(evutil_socket_t fd, short what, void *arg)
{
	struct rock_session *s = arg;

	(void)fd;
	(void)what;
	rock_engine_enter(s->e);
	if (s->dial != NULL && !s->dial->path_up) {
		rock_session_hold(s);
		rock_lookup_maybe(s, 0);
		launch_attempt(s);
		if (s->dial != NULL)
			arm_next(s);
		rock_session_release(s);
	}
	rock_engine_leave(s->e);
}

/* An attempt is over without success. While the path is down the round
 * goes on; once the path was up and every attempt failed, the server
 * itself is in trouble: back off before the next round. */
static void
attempt_failed(struct rock_attempt *a, const char *why)
{
	struct rock_session *s = a->s;

	rlog_debug(s->e->log, "rock %s: reconnect attempt %u failed: %s",
	    s->name, a->number, why);
	attempt_close(a);
	rock_lookup_maybe(s, 1);
	if (s->dial->path_up && attempts_open(s->dial) == 0) {
		dial_free(s);
		rock_dial_schedule(s, 0);
	}
}

static void
on_retry(evutil_socket_t fd, short what, void *arg)
{
	struct rock_session *s = arg;

	(void)fd;
	(void)what;
	rock_engine_enter(s->e);
	if (s->state == ROCK_ST_SUSPENDED && s->dial == NULL && s->replay_fd < 0)
		start_round(s);
	rock_engine_leave(s->e);
}

void
rock_dial_schedule(struct rock_session *s, int now)
{
	struct timeval tv = { 0, 0 };
	int ms;

	if (s->role != ROCK_ROLE_CLIENT || s->state != ROCK_ST_SUSPENDED ||
	    s->dial != NULL || s->parked || s->replay_fd >= 0)
		return;
	if (s->ev_retry == NULL &&
	    (s->ev_retry = evtimer_new(s->e->base, on_retry, s)) == NULL)
		return;
	if (now) {
		s->backoff_ms = 0;
	} else {
		ms = s->backoff_ms == 0 ? s->e->cfg.backoff_min_ms : 2 * s->backoff_ms;
		s->backoff_ms = ms > s->e->cfg.backoff_max_ms ?
		    s->e->cfg.backoff_max_ms : ms;
		tv.tv_sec = s->backoff_ms / 1000;
		tv.tv_usec = (s->backoff_ms % 1000) * 1000;
	}
	evtimer_add(s->ev_retry, &tv);
}

/* Happy eyeballs (RFC 8305) on the attempts' own schedule: the first new
 * address now, the next a period later if the path is still down. */
void
rock_dial_addresses_changed(struct rock_session *s)
{
	if (s->dial != NULL && !s->dial->path_up)
		launch_attempt(s);
}

void
rock_dial_cancel(struct rock_session *s)
{
	rock_lookup_cancel(s);
	dial_free(s);
	s->parked = 0;
	s->unscouted = 0;
	if (s->ev_retry != NULL)
		event_free(s->ev_retry);
	s->ev_retry = NULL;
}

void
rock_dial_all_now(struct rock_engine *e)
{
	struct rock_session *s;

	for (s = e->all; s != NULL; s = s->next) {
		if (s->role != ROCK_ROLE_CLIENT || s->state != ROCK_ST_SUSPENDED ||
		    s->replay_fd >= 0)
			continue;
		dial_free(s);
		s->parked = 0;
		rock_dial_schedule(s, 1);
	}
}

/* Read toward `want` bytes; an ERROR message is read whole instead.
 * 1: complete, 0: more to come, -1: connection failed or closed. */
static int
read_reply(struct rock_attempt *a, size_t want)
{
	size_t need = want;
	ssize_t got;

	if (a->have > 0 && a->buf[0] == ROCK_MSG_ERROR) {
		/* A text longer than any ERROR's is not one: the buffer holds
		 * the longest only. */
		if (a->have >= 3 && a->buf[2] > ROCK_ERROR_MAX_TEXT)
			return -1;
		need = a->have < 3 ? 3 : 3 + (size_t)a->buf[2] + ROCK_SIG_LEN;
	}
	got = rock_sys.recv(a->fd, a->buf + a->have, need - a->have, MSG_DONTWAIT);
	if (got < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	if (got == 0)
		return -1;
	a->have += (size_t)got;
	if (a->buf[0] == ROCK_MSG_ERROR)
		return a->have >= 3 &&
		    a->have == 3 + (size_t)a->buf[2] + ROCK_SIG_LEN ? 1 : 0;
	return a->have == want ? 1 : 0;
}

/* The server says the session is gone or our key is wrong: give up, if
 * the server's key signed that for this attempt's request; else anyone
 * on the path could end the rock, and it is only a failed attempt. A
 * SUPERSEDED answer concerns that connection only. */
static void
attempt_refused(struct rock_attempt *a)
{
	struct rock_session *s = a->s;
	struct rock_error_msg em;
	size_t used;

	if (rock_error_decode(&em, a->buf, a->have, &used) != 0 ||
	    (em.code != ROCK_WERR_UNKNOWN && em.code != ROCK_WERR_AUTH)) {
		attempt_failed(a, "server answered with an error");
		return;
	}
	if (refusal_verify(s->e, s->server_ident, &em, a->buf, used, a->req,
	    sizeof(a->req)) != 0) {
		attempt_failed(a, "unsigned refusal");
		return;
	}
	/* Both streams ended and all we sent was consumed before the server
	 * let go: that is a clean end, only its last ack was lost. */
	if (em.code == ROCK_WERR_UNKNOWN && (s->flags & ROCK_FLAG_WR_SHUT) &&
	    (s->flags & ROCK_FLAG_EOF_SEEN))
		rock_session_close(s, 0, "peer finished the session");
	else
		rock_session_close(s, ROCK_ERR_RESET, em.text);
}

/* The new connection (its handshake's round trip rtt_ms, 0: unknown),
 * authenticated: replay, and put it in place. A connection dropped here
 * is reset: the server already took it. */
static void
reconnected(struct rock_session *s, int fd, int rtt_ms)
{
	int r;

	s->backoff_ms = 0;
	s->e->stats.reconnects++;
	if (rtt_ms > 0)
		rock_path_init(s, rtt_ms);
	if ((r = rock_stream_replay(s)) != 0) {
		rock_close_reset(fd);
		rock_session_close(s, r, "peer's count outside what we hold");
		return;
	}
	if (rock_is_direct(s)) {
		rlog_info(s->e->log, "rock %s: reconnected; resending from byte %llu",
		    s->name, (unsigned long long)s->peer_consumed);
		rock_direct_resume(s, fd);
		return;
	}
	if (rock_stream_attach(s, fd) != 0) {
		rock_close_reset(fd);
		rock_dial_schedule(s, 0);
		return;
	}
	rlog_info(s->e->log, "rock %s: reconnected; resending from byte %llu",
	    s->name, (unsigned long long)s->peer_consumed);
	/* The counts just exchanged may say we are both done: without UDP
	 * this is the only way the end becomes known. */
	rock_session_maybe_finish(s);
}

/* The answer came from an address the name now has: the rock lives
 * there from now on. The proof over the session's keys says it is the
 * same server; anyone else there could not have answered. */
static void
moved(struct rock_session *s, const struct rock_attempt *a)
{
	char was[ROCK_DEST_TEXT_LEN], now[ROCK_DEST_TEXT_LEN];

	rock_lookup_settle(s);
	if (a->addr_len == s->peer_len &&
	    memcmp(&a->addr, &s->peer, s->peer_len) == 0)
		return;
	rock_dest_text((const struct sockaddr *)&s->peer, s->peer_len, was);
	rock_dest_text((const struct sockaddr *)&a->addr, a->addr_len, now);
	memcpy(&s->peer, &a->addr, a->addr_len);
	s->peer_len = a->addr_len;
	rock_control_peer_moved(s);
	rlog_info(s->e->log, "rock %s: the server moved from %s to %s", s->name,
	    was, now);
}

/* The server's answer, proven with its key over our nonce: this attempt
 * wins; the others are dropped. */
static void
attempt_answered(struct rock_attempt *a)
{
	struct rock_session *s = a->s;
	struct rock_reconnect_ok ok;
	int fd, rtt, r;

	if ((r = rock_dial_ok_decode(s, a->nonce, a->buf, &ok)) ==
	    ROCK_ERR_PROTOCOL) {
		attempt_failed(a, "unexpected reply");
		return;
	}
	if (r != 0) {
		rlog_warn(s->e->log, "rock %s: reconnect: the server failed "
		    "authentication", s->name);
		attempt_failed(a, "bad answer");
		return;
	}
	fd = a->fd;
	rtt = a->rtt_ms;
	a->fd = -1;
	moved(s, a);
	dial_free(s);
	if (rock_session_resume_counts(s, ok.consumed, ok.end, ok.flags) != 0) {
		rock_close_reset(fd);
		return;
	}
	reconnected(s, fd, rtt);
}

/* The attempt's TCP handshake completed: the path is back. No more
 * attempts; the rocks waiting on this one dial now; its answer is waited
 * for over the round trip this handshake measured. */
static void
attempt_connected(struct rock_attempt *a)
{
	struct rock_tcp_sample t;

	a->connected = 1;
	a->s->dial->path_up = 1;
	scout_release(a->s, 1);
	if (rock_tcp_sample(a->fd, &t) == 0)
		a->rtt_ms = (int)(t.rtt_us / 1000);
	a->started_ms = rock_now_ms();
}

static void
attempt_step(struct rock_attempt *a, short what)
{
	int err = 0, r;
	socklen_t el = sizeof(err);

	if (what & EV_TIMEOUT) {
		attempt_failed(a, a->connected ? "no answer" : "no answer to the SYN");
		return;
	}
	if ((what & EV_WRITE) && !a->connected) {
		if (rock_sys.getsockopt(a->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0) {
			attempt_failed(a, strerror(err));
			return;
		}
		attempt_connected(a);
		r = a->requested ? attempt_arm(a, EV_READ) : send_request(a, EV_READ);
		if (r != 0)
			attempt_failed(a, strerror(errno));
		return;
	}
	r = read_reply(a, ROCK_RECONNECT_OK_LEN);
	/* Part of the answer: its event fired once, wait for the rest. */
	if (r == 0 && attempt_arm(a, EV_READ) != 0)
		attempt_failed(a, "no memory for an event");
	else if (r < 0)
		attempt_failed(a, "connection closed before the answer");
	else if (r > 0 && a->buf[0] == ROCK_MSG_ERROR)
		attempt_refused(a);
	else if (r > 0)
		attempt_answered(a);
}

static void
on_attempt(evutil_socket_t fd, short what, void *arg)
{
	struct rock_attempt *a = arg;
	struct rock_session *s = a->s;
	struct rock_engine *e = s->e;

	(void)fd;
	rock_engine_enter(e);
	rock_session_hold(s);
	attempt_step(a, what);
	rock_session_release(s);
	rock_engine_leave(e);
}
