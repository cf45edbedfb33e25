/* rock_dial.c: the client side: EDP probe and handshake, and authenticated reconnects. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rock_engine_int.h"
#include "rock_err.h"

enum dial_stage { DIAL_CONNECTING, DIAL_CHALLENGE, DIAL_OK };

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
		r = poll(&p, 1, (int)left);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return ROCK_ERR_SYSTEM;
	return r == 0 ? ROCK_ERR_TIMEOUT : 0;
}

static int
dial_blocking(const struct sockaddr *addr, socklen_t len, int64_t deadline,
    int *out)
{
	int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int err = 0, r;
	socklen_t el = sizeof(err);

	if (fd < 0)
		return ROCK_ERR_SYSTEM;
	if (connect(fd, addr, len) != 0 && errno != EINPROGRESS)
		goto fail;
	if ((r = wait_fd(fd, POLLOUT, deadline)) != 0) {
		close(fd);
		return r;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0) {
		errno = err;
		goto fail;
	}
	*out = fd;
	return 0;
fail:
	err = errno;
	close(fd);
	errno = err;
	return ROCK_ERR_SYSTEM;
}

static int
write_all(int fd, const uint8_t *p, size_t n, int64_t deadline)
{
	ssize_t w;
	int r;

	while (n > 0) {
		w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
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
		got = recv(fd, p, n, MSG_DONTWAIT);
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

/* EDP probe: connect, shut our side, read to EOF. Exactly an announcement
 * means enhanced; anything else, an ordinary server. Silence past the wait
 * is reported as not enhanced too, with *silent set: a rockd may just be
 * slow, so that answer is not worth remembering. The wait scales with the
 * connect's round trip, at least 500 ms: what a silent ordinary server
 * costs on first contact. */
static int
probe(const struct sockaddr *addr, socklen_t len, int64_t deadline,
    uint8_t ann[ROCK_ANNOUNCE_LEN], int *silent)
{
	int64_t t0 = rock_now_ms(), wait;
	struct rock_announce a;
	uint8_t extra;
	int fd, r;

	*silent = 0;
	if ((r = dial_blocking(addr, len, deadline, &fd)) != 0)
		return r;
	wait = 4 * (rock_now_ms() - t0);
	wait = wait < 500 ? 500 : wait > 2000 ? 2000 : wait;
	if (rock_now_ms() + wait < deadline)
		deadline = rock_now_ms() + wait;
	shutdown(fd, SHUT_WR);
	/* The magic first: an ordinary server's first bytes end it early. */
	r = read_exact(fd, ann, ROCK_MAGIC_LEN, deadline);
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
	close(fd);
	if (r == 0 && rock_announce_decode(&a, ann) == 0 &&
	    rock_version_pick(ROCK_VERSION, ROCK_VERSION, a.version_min,
	    a.version_max) != 0)
		return 0;
	if (r == ROCK_ERR_SYSTEM && errno != ECONNRESET)
		return r;
	*silent = r == ROCK_ERR_TIMEOUT;
	return ROCK_ERR_NOT_ENHANCED;
}

static int
read_error_reply(int fd, uint8_t first, int64_t deadline)
{
	uint8_t buf[ROCK_ERROR_MAX_LEN];
	struct rock_error_msg em;
	size_t used;
	int r;

	buf[0] = first;
	if ((r = read_exact(fd, buf + 1, 2, deadline)) != 0 ||
	    (r = read_exact(fd, buf + 3, buf[2] <= ROCK_ERROR_MAX_TEXT ?
	    buf[2] : 0, deadline)) != 0)
		return ROCK_ERR_PROTOCOL;
	if (rock_error_decode(&em, buf, 3 + (size_t)buf[2], &used) != 0)
		return ROCK_ERR_PROTOCOL;
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

static int
hello_exchange(const struct rock_engine *e, int fd,
    const uint8_t ann[ROCK_ANNOUNCE_LEN], const struct rock_keypair *kp,
    int64_t deadline, struct rock_server_hello *sh)
{
	uint8_t out[ROCK_ANNOUNCE_LEN + ROCK_CLIENT_HELLO_LEN];
	uint8_t in[ROCK_SERVER_HELLO_LEN];
	struct rock_client_hello ch;
	int r;

	ch.version = ROCK_VERSION;
	ch.features = ROCK_FEAT_ALL;
	memcpy(ch.pk, kp->pk, ROCK_KEY_LEN);
	rock_socket_buffers(e, fd, &ch.rcvbuf, &ch.sndbuf);
	ch.udp_port = e->udp_port;
	memcpy(out, ann, ROCK_ANNOUNCE_LEN);
	rock_client_hello_encode(&ch, out + ROCK_ANNOUNCE_LEN);
	if ((r = write_all(fd, out, sizeof(out), deadline)) != 0 ||
	    (r = read_exact(fd, in, 1, deadline)) != 0)
		return r == ROCK_ERR_SHORT ? ROCK_ERR_PROTOCOL : r;
	if (in[0] == ROCK_MSG_ERROR)
		return read_error_reply(fd, in[0], deadline);
	if ((r = read_exact(fd, in + 1, sizeof(in) - 1, deadline)) != 0)
		return r == ROCK_ERR_SHORT ? ROCK_ERR_PROTOCOL : r;
	if (rock_server_hello_decode(sh, in) != 0 || sh->version != ROCK_VERSION ||
	    (sh->features & ~ROCK_FEAT_ALL) != 0)
		return ROCK_ERR_PROTOCOL;
	return 0;
}

static int
make_session(struct rock_engine *e, int fd, const struct sockaddr *addr,
    socklen_t len, const struct rock_server_hello *sh,
    const struct rock_keys *keys, const struct rock_session_cbs *cbs,
    void *arg, struct rock_session **out)
{
	uint32_t rcv, snd;
	struct rock_session *s;
	int r;

	uint32_t peer_rcv = sh->rcvbuf < e->rmem_max ? sh->rcvbuf : e->rmem_max;

	/* The peer's claim sizes our memory: no more than this host allows. */
	rock_socket_buffers(e, fd, &rcv, &snd);
	if ((r = rock_session_new(e, ROCK_ROLE_CLIENT, sh->id, keys,
	    rock_ring_cap_for(e, snd, peer_rcv), cbs, arg, &s)) != 0)
		return r;
	s->features = sh->features;
	s->tcp_bound = rock_tcp_bound(snd, peer_rcv);
	memcpy(&s->peer, addr, len);
	s->peer_len = len;
	rock_udp_peer_from_tcp(s, sh->udp_port);
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

/* ann NULL: the destination is an ordinary server (or none at all); that
 * is remembered for a minute, so plain connections pay no probe. */
static void
cache_put(struct rock_engine *e, const struct sockaddr *addr, socklen_t len,
    const uint8_t ann[ROCK_ANNOUNCE_LEN])
{
	struct probe_entry *p = cache_find(e, addr, len);

	if (p == NULL) {
		p = &e->probes[e->probe_next];
		e->probe_next = (e->probe_next + 1) % PROBE_CACHE;
	}
	memcpy(&p->addr, addr, len);
	p->len = len;
	p->enhanced = ann != NULL;
	p->expires_ms = rock_now_ms() +
	    (ann != NULL ? PROBE_CACHE_MS : PROBE_CACHE_PLAIN_MS);
	if (ann != NULL)
		memcpy(p->announcement, ann, ROCK_ANNOUNCE_LEN);
}

int
rock_probe(const struct sockaddr *addr, socklen_t len, int timeout_ms,
    uint8_t ann[ROCK_ANNOUNCE_LEN], int *silent)
{
	return probe(addr, len, rock_now_ms() + timeout_ms, ann, silent);
}

void
rock_probe_remember(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, const uint8_t ann[ROCK_ANNOUNCE_LEN])
{
	rock_engine_enter(e);
	cache_put(e, addr, len, ann);
	rock_engine_leave(e);
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
	return r == ROCK_ERR_NOT_ENHANCED || r == ROCK_ERR_TIMEOUT ||
	    (r == ROCK_ERR_SYSTEM && (errno == ECONNREFUSED ||
	    errno == EHOSTUNREACH || errno == ENETUNREACH));
}

/* The announcement for a destination: cached, or from a probe. The probe
 * itself runs without the owner's lock: it takes a round trip or more. */
static int
announcement_for(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, int64_t deadline, uint8_t ann[ROCK_ANNOUNCE_LEN])
{
	struct probe_entry *p;
	int r, err, silent;

	rock_engine_enter(e);
	if ((p = cache_find(e, addr, len)) != NULL) {
		e->stats.probe_cache_hits++;
		r = p->enhanced ? 0 : ROCK_ERR_NOT_ENHANCED;
		if (p->enhanced)
			memcpy(ann, p->announcement, ROCK_ANNOUNCE_LEN);
		rock_engine_leave(e);
		return r;
	}
	e->stats.probes++;
	rock_engine_leave(e);
	r = probe(addr, len, deadline, ann, &silent);
	err = errno;
	rock_engine_enter(e);
	if (r == 0 || (rock_probe_found_plain(r) && !silent))
		cache_put(e, addr, len, r == 0 ? ann : NULL);
	rock_engine_leave(e);
	errno = err;
	return r;
}

static int
handshake_once(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, int64_t deadline, const struct rock_session_cbs *cbs,
    void *arg, struct rock_session **out)
{
	uint8_t ann[ROCK_ANNOUNCE_LEN];
	struct rock_server_hello sh;
	struct rock_keypair kp;
	struct rock_keys keys;
	int fd = -1, r, rtt;
	int64_t t0;

	if ((r = announcement_for(e, addr, len, deadline, ann)) != 0)
		return r;
	t0 = rock_now_ms();
	/* The timeout bounds the search for a rockd. One found gets as long
	 * for the handshake as a server gives any (its backend dial is in it):
	 * giving up early would make a rock of nothing but a plain fallback. */
	if (deadline < t0 + e->cfg.handshake_timeout_ms)
		deadline = t0 + e->cfg.handshake_timeout_ms;
	if ((r = dial_blocking(addr, len, deadline, &fd)) != 0)
		return r;
	rtt = (int)(rock_now_ms() - t0);
	rock_keypair_new(&kp);
	if ((r = hello_exchange(e, fd, ann, &kp, deadline, &sh)) == 0 &&
	    (r = rock_keys_client(&keys, &kp, sh.pk)) == 0) {
		rock_engine_enter(e);
		r = make_session(e, fd, addr, len, &sh, &keys, cbs, arg, out);
		if (r == 0)
			(*out)->connect_rtt_ms = rtt;
		rock_engine_leave(e);
	}
	rock_keypair_wipe(&kp);
	rock_keys_wipe(&keys);
	if (r != 0 && fd >= 0)
		close(fd);
	return r;
}

int
rock_client_open(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, int timeout_ms, const struct rock_session_cbs *cbs,
    void *arg, struct rock_session **out)
{
	int64_t deadline = rock_now_ms() + timeout_ms;
	int hit, r, err, tries;

	rock_engine_enter(e);
	hit = cache_find(e, addr, len) != NULL;
	rock_engine_leave(e);
	r = handshake_once(e, addr, len, deadline, cbs, arg, out);
	/* A known rockd that misread us (its sniff gave up on a hello that
	 * came late, on a loaded host): twice more as it is. */
	for (tries = 0; hit && r == ROCK_ERR_PROTOCOL && tries < 2; tries++)
		r = handshake_once(e, addr, len, deadline, cbs, arg, out);
	/* The server restarted since the probe (STALE), or a cached answer no
	 * longer holds: forget it, probe again, once. */
	if (r == ROCK_ERR_LOST || (hit && r == ROCK_ERR_PROTOCOL)) {
		rock_engine_enter(e);
		rock_probe_forget(e, addr, len);
		rock_engine_leave(e);
		/* A probe of its own time: the handshakes may have used it all,
		 * and a probe cut short would pass for a plain server. */
		r = handshake_once(e, addr, len, rock_now_ms() + timeout_ms, cbs,
		    arg, out);
	}
	err = errno;
	if (r == ROCK_ERR_PROTOCOL || r == ROCK_ERR_LOST) {
		rock_engine_enter(e);
		rock_probe_forget(e, addr, len);
		rock_engine_leave(e);
	}
	errno = err;
	return r == ROCK_ERR_LOST ? ROCK_ERR_PROTOCOL : r;
}

/* ---- reconnect: asynchronous, on the engine's event loop */

static void on_dial(evutil_socket_t fd, short what, void *arg);

static void
dial_free(struct rock_session *s)
{
	struct rock_dial *d = s->dial;

	if (d == NULL)
		return;
	if (d->ev != NULL)
		event_free(d->ev);
	if (d->fd >= 0)
		close(d->fd);
	free(d);
	s->dial = NULL;
}

/* A SYN gets an answer within a couple of round trips or the path is still
 * down: then a fresh SYN at once beats the kernel's 1 s, 3 s retransmits.
 * The round trip measured at the first connect scales it for slow links. */
static int
connect_timeout_ms(const struct rock_session *s)
{
	int ms = 2 * s->connect_rtt_ms + 100;

	if (ms < 500)
		ms = 500;
	return ms > s->e->cfg.dial_timeout_ms ? s->e->cfg.dial_timeout_ms : ms;
}

static int
dial_arm(struct rock_session *s, short what)
{
	struct rock_dial *d = s->dial;
	int ms = d->stage == DIAL_CONNECTING ? connect_timeout_ms(s) :
	    s->e->cfg.dial_timeout_ms;
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	if (d->ev != NULL)
		event_free(d->ev);
	d->ev = event_new(s->e->base, d->fd, what, on_dial, s);
	return d->ev == NULL ? -1 : event_add(d->ev, &tv);
}

static void
attempt_failed(struct rock_session *s, const char *why)
{
	rlog_debug(s->e->log, "rock %s: reconnect attempt failed: %s", s->name, why);
	dial_free(s);
	rock_dial_schedule(s, 0);
}

static void
start_attempt(struct rock_session *s)
{
	struct rock_dial *d = calloc(1, sizeof(*d));

	if (d == NULL) {
		rock_dial_schedule(s, 0);
		return;
	}
	s->dial = d;
	d->stage = DIAL_CONNECTING;
	d->fd = socket(s->peer.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (d->fd < 0 || (connect(d->fd, (struct sockaddr *)&s->peer,
	    s->peer_len) != 0 && errno != EINPROGRESS)) {
		attempt_failed(s, strerror(errno));
		return;
	}
	if (dial_arm(s, EV_WRITE) != 0)
		attempt_failed(s, "no memory for an event");
}

static void
on_retry(evutil_socket_t fd, short what, void *arg)
{
	struct rock_session *s = arg;

	(void)fd;
	(void)what;
	rock_engine_enter(s->e);
	if (s->state == ROCK_ST_SUSPENDED && s->dial == NULL)
		start_attempt(s);
	rock_engine_leave(s->e);
}

void
rock_dial_schedule(struct rock_session *s, int now)
{
	struct timeval tv = { 0, 0 };
	int ms;

	if (s->role != ROCK_ROLE_CLIENT || s->state != ROCK_ST_SUSPENDED ||
	    s->dial != NULL)
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

void
rock_dial_cancel(struct rock_session *s)
{
	dial_free(s);
	if (s->ev_retry != NULL)
		event_free(s->ev_retry);
	s->ev_retry = NULL;
}

void
rock_dial_all_now(struct rock_engine *e)
{
	struct rock_session *s;

	for (s = e->all; s != NULL; s = s->next) {
		if (s->role != ROCK_ROLE_CLIENT || s->state != ROCK_ST_SUSPENDED)
			continue;
		dial_free(s);
		rock_dial_schedule(s, 1);
	}
}

static int
send_request(struct rock_session *s)
{
	struct rock_dial *d = s->dial;
	struct rock_reconnect_req rq;
	uint8_t out[ROCK_RECONNECT_REQ_LEN];
	int err = 0;
	socklen_t el = sizeof(err);

	if (getsockopt(d->fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0) {
		errno = err;
		return -1;
	}
	rq.version = ROCK_VERSION;
	memcpy(rq.id, s->id, ROCK_ID_LEN);
	rock_random(d->nonce, ROCK_NONCE_LEN);
	memcpy(rq.nonce, d->nonce, ROCK_NONCE_LEN);
	rock_reconnect_req_encode(&rq, out);
	/* 41 bytes on a fresh connection always fit the send buffer. */
	if (send(d->fd, out, sizeof(out), MSG_NOSIGNAL) != (ssize_t)sizeof(out))
		return -1;
	d->stage = DIAL_CHALLENGE;
	d->have = 0;
	return dial_arm(s, EV_READ);
}

/* Read toward `want` bytes; an ERROR message is read whole instead.
 * 1: complete, 0: more to come, -1: connection failed or closed. */
static int
read_reply(struct rock_dial *d, size_t want)
{
	size_t need = want;
	ssize_t got;

	if (d->have > 0 && d->buf[0] == ROCK_MSG_ERROR)
		need = d->have < 3 ? 3 : 3 + (size_t)d->buf[2];
	got = recv(d->fd, d->buf + d->have, need - d->have, MSG_DONTWAIT);
	if (got < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	if (got == 0)
		return -1;
	d->have += (size_t)got;
	if (d->buf[0] == ROCK_MSG_ERROR)
		return d->have >= 3 && d->have == 3 + (size_t)d->buf[2] ? 1 : 0;
	return d->have == want ? 1 : 0;
}

/* The server says the session is gone or our key is wrong: give up. */
static void
server_refused(struct rock_session *s)
{
	struct rock_error_msg em;
	size_t used;

	if (rock_error_decode(&em, s->dial->buf, s->dial->have, &used) == 0 &&
	    (em.code == ROCK_WERR_UNKNOWN || em.code == ROCK_WERR_AUTH)) {
		/* Both streams ended and all we sent was consumed before the
		 * server let go: that is a clean end, only its last ack was lost. */
		if (em.code == ROCK_WERR_UNKNOWN && (s->flags & ROCK_FLAG_WR_SHUT) &&
		    (s->flags & ROCK_FLAG_EOF_SEEN))
			rock_session_close(s, 0, "peer finished the session");
		else
			rock_session_close(s, ROCK_ERR_RESET, em.text);
		return;
	}
	attempt_failed(s, "server answered with an error");
}

static int
answer_challenge(struct rock_session *s)
{
	struct rock_dial *d = s->dial;
	struct rock_resume c, p;
	uint8_t tag[ROCK_TAG_LEN], out[ROCK_PROOF_LEN];

	if (rock_challenge_decode(&c, d->buf) != 0)
		return -1;
	rock_challenge_tag(tag, s->keys.rx, s->id, d->nonce, d->buf);
	if (!rock_equal(tag, c.tag, ROCK_TAG_LEN)) {
		rlog_warn(s->e->log, "rock %s: reconnect: the server failed "
		    "authentication", s->name);
		return -1;
	}
	rock_session_resume_counts(s, c.consumed, c.flags);
	p.consumed = s->consumed;
	p.flags = s->flags;
	rock_proof_encode(&p, out);
	rock_proof_tag(p.tag, s->keys.tx, s->id, c.nonce, out);
	rock_proof_encode(&p, out);
	if (send(d->fd, out, sizeof(out), MSG_NOSIGNAL) != (ssize_t)sizeof(out))
		return -1;
	d->stage = DIAL_OK;
	d->have = 0;
	return dial_arm(s, EV_READ);
}

static void
reconnected(struct rock_session *s)
{
	int fd = s->dial->fd;
	int r;

	s->dial->fd = -1;
	dial_free(s);
	s->backoff_ms = 0;
	s->e->stats.reconnects++;
	if ((r = rock_stream_replay(s)) != 0) {
		close(fd);
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
		close(fd);
		rock_dial_schedule(s, 0);
		return;
	}
	rlog_info(s->e->log, "rock %s: reconnected; resending from byte %llu",
	    s->name, (unsigned long long)s->peer_consumed);
	/* The counts just exchanged may say we are both done: without UDP
	 * this is the only way the end becomes known. */
	rock_session_maybe_finish(s);
}

static void
dial_step(struct rock_session *s, short what)
{
	struct rock_dial *d = s->dial;
	int r;

	if ((what & EV_TIMEOUT) && d->stage == DIAL_CONNECTING) {
		/* No answer to the SYN: the path is still down. Try again at
		 * once, with a fresh SYN, not after a back-off. */
		dial_free(s);
		s->backoff_ms = 0;
		rock_dial_schedule(s, 1);
		return;
	}
	if (what & EV_TIMEOUT) {
		attempt_failed(s, "timed out");
		return;
	}
	if (d->stage == DIAL_CONNECTING) {
		if (send_request(s) != 0)
			attempt_failed(s, strerror(errno));
		return;
	}
	r = read_reply(d, d->stage == DIAL_CHALLENGE ? ROCK_CHALLENGE_LEN : 1);
	if (r < 0) {
		attempt_failed(s, "connection closed during the handshake");
		return;
	}
	if (r == 0)
		return;
	if (d->buf[0] == ROCK_MSG_ERROR)
		server_refused(s);
	else if (d->stage == DIAL_CHALLENGE) {
		if (answer_challenge(s) != 0)
			attempt_failed(s, "bad challenge");
	} else if (d->buf[0] == ROCK_MSG_RECONNECT_OK)
		reconnected(s);
	else
		attempt_failed(s, "unexpected reply");
}

static void
on_dial(evutil_socket_t fd, short what, void *arg)
{
	struct rock_session *s = arg;
	struct rock_engine *e = s->e;

	(void)fd;
	rock_engine_enter(e);
	rock_session_hold(s);
	dial_step(s, what);
	rock_session_release(s);
	rock_engine_leave(e);
}
