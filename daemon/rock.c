/* rock.c: rockd's rock sessions: one reliable socket to the client, one plain TCP connection to the backend. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "rock_ctl.h"
#include "rock_err.h"
#include "rock_rec.h"
#include "rock_wire.h"
#include "rockd.h"

#define RECORD_MAGIC 0x524b5252u	/* "RKRR" */
#define RECORD_VERSION 1
#define RECORD_MAX_BUFFER (256u * 1024 * 1024)

/* Back-pressure marks for the bytes to the backend, as for plain relays
 * (the session's ring bounds those from it). */
#define ROCK_HIGH (512 * 1024)
#define ROCK_LOW (128 * 1024)
/* The backend is read directly into the session's ring, up to 256 KiB a
 * call (libevent 2.1's bufferevents read 4 KiB per call); the bufferevent
 * only writes. 256 KiB against 64 KiB: loopback download at 64 KiB blocks
 * 0.67x raw against 0.55x, same run. */
#define ROCK_READ (256 * 1024)

struct rockd_rock {
	struct rockd *d;
	unsigned long id;
	struct rockd_backend backend;
	struct rock_handshake *hs;	/* until answered: once the backend
					 * is connected, or at once for an
					 * admitted early flight */
	struct rock_session *s;
	struct bufferevent *be;
	struct event *be_rd;		/* reading the backend, once connected */
	int be_eof;			/* the backend will send no more */
	int rock_eof;			/* the client will send no more */
	int be_shut;
	int dialing;			/* inside bufferevent_socket_connect() */
	int dial_failed;
	int closing;			/* session over; flushing to the backend */
	int proven;			/* its client proved its keys (FINISHED) */
	int be_up;			/* its backend connected */
	struct rockd_rock *prev, *next;
};

static unsigned long next_id;

static void
rock_free(struct rockd_rock *rr)
{
	struct rockd *d = rr->d;

	if (rr->be_rd != NULL)
		event_free(rr->be_rd);
	if (rr->be != NULL)
		bufferevent_free(rr->be);
	if (rr->s != NULL)
		rock_session_free(rr->s);
	if (rr->prev != NULL)
		rr->prev->next = rr->next;
	else
		d->rocks = rr->next;
	if (rr->next != NULL)
		rr->next->prev = rr->prev;
	free(rr);
	rockd_maybe_done(d);
}

static void
rock_link(struct rockd *d, struct rockd_rock *rr)
{
	rr->next = d->rocks;
	if (d->rocks != NULL)
		d->rocks->prev = rr;
	d->rocks = rr;
}

/* Not while its dial runs: a shutdown then aborts the connect. */
static void
backend_shut_if_done(struct rockd_rock *rr)
{
	if (!rr->be_up || !rr->rock_eof || rr->be_shut ||
	    evbuffer_get_length(bufferevent_get_output(rr->be)) > 0)
		return;
	shutdown(bufferevent_getfd(rr->be), SHUT_WR);
	rr->be_shut = 1;
}

/* ---- the rock side */

static void
on_rock_data(struct rock_session *s, const uint8_t *p, size_t n, void *arg)
{
	struct rockd_rock *rr = arg;
	struct evbuffer *out = bufferevent_get_output(rr->be);
	ssize_t w = 0;

	rr->d->n.rock_bytes[ROCKD_TO_BACKEND] += n;
	/* Nothing queued before them: the bytes go to the backend's socket
	 * now, without a copy into the queue nor its write event turned on
	 * and off (one epoll_ctl each). What the socket does not take, or
	 * a failure, is the bufferevent's to write or report; while its
	 * dial runs (an early client's), all wait in the queue (a send
	 * would take the dial's error from libevent). */
	if (rr->be_up && evbuffer_get_length(out) == 0 &&
	    (w = send(bufferevent_getfd(rr->be), p, n,
	    MSG_DONTWAIT | MSG_NOSIGNAL)) < 0)
		w = 0;
	if ((size_t)w < n)
		bufferevent_write(rr->be, p + w, n - (size_t)w);
	if (evbuffer_get_length(out) >= ROCK_HIGH)
		rock_session_pause(s, 1);
}

static void
on_rock_eof(struct rock_session *s, void *arg)
{
	struct rockd_rock *rr = arg;

	(void)s;
	rr->rock_eof = 1;
	backend_shut_if_done(rr);
}

static void
on_rock_drain(struct rock_session *s, void *arg)
{
	struct rockd_rock *rr = arg;

	(void)s;
	if (rr->be_rd != NULL && !rr->be_eof)
		event_add(rr->be_rd, NULL);
}

static void
on_rock_state(struct rock_session *s, enum rock_state from, enum rock_state to,
    void *arg)
{
	struct rockd_rock *rr = arg;

	/* One whose client never proved its keys is a stranger's: debug. */
	if (rock_session_unproven(s) && !rr->d->log.debug)
		return;
	/* Its first connection: one line (a write on its first bytes' way,
	 * where two went), with the state change as every later one. */
	if (to == ROCK_ST_CONNECTED && !rr->proven) {
		rr->proven = 1;
		rlog_info(&rr->d->log, "rock %s: client connected, backend %s "
		    "(%s -> %s)", rock_session_name(s), rr->backend.spec,
		    rock_state_name(from), rock_state_name(to));
		return;
	}
	rlog_info(&rr->d->log, "rock %s: %s -> %s (%s)", rock_session_name(s),
	    rock_state_name(from), rock_state_name(to), rock_session_state_why(s));
}

static void
reset_on_close(int fd)
{
	struct linger lg = { 1, 0 };

	if (fd >= 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
}

static void
on_rock_closed(struct rock_session *s, int err, void *arg)
{
	struct rockd_rock *rr = arg;
	const char *why = rock_session_state_why(s);

	if (err != 0) {
		/* A reset is the peer's or a local kill: the session says
		 * which. Other ends keep their error's text. One whose client
		 * never proved its keys was logged by the engine, within its
		 * budget for strangers. */
		rock_log_emit(&rr->d->log, rock_session_unproven(s) ?
		    ROCK_LOG_DEBUG : ROCK_LOG_INFO, __func__,
		    "rock %s: ended (%s); %s its backend "
		    "connection", rock_session_name(s),
		    err == ROCK_ERR_RESET && why[0] != '\0' ? why : rock_err(err),
		    err == ROCK_ERR_RESET ? "resetting" : "closing");
		/* Killed (rock kill, here or at the client): the backend sees
		 * what a program sees of a reset connection. */
		if (err == ROCK_ERR_RESET && rr->be != NULL)
			reset_on_close(bufferevent_getfd(rr->be));
		rock_free(rr);
		return;
	}
	rlog_debug(&rr->d->log, "rock %s: both ends closed", rock_session_name(s));
	/* What the client sent last may still be on its way to the backend. */
	rock_session_free(s);
	rr->s = NULL;
	rr->closing = 1;
	if (evbuffer_get_length(bufferevent_get_output(rr->be)) == 0)
		rock_free(rr);
}

static const struct rock_session_cbs rock_cbs = {
	on_rock_data, on_rock_eof, on_rock_drain, on_rock_state, on_rock_closed, NULL
};

/* ---- the backend side */

/* The backend's bytes go straight into the session's ring: no copy in
 * rockd's memory but the one the replay needs. */
static void
be_readable(evutil_socket_t fd, short what, void *arg)
{
	struct rockd_rock *rr = arg;
	ssize_t n = rock_session_send_from(rr->s, fd, ROCK_READ);

	(void)what;
	if (n == ROCK_ERR_FULL) {
		event_del(rr->be_rd);	/* on_rock_drain reads on */
		return;
	}
	if (n == ROCK_ERR_SYSTEM && (errno == EAGAIN || errno == EINTR))
		return;
	if (n < 0) {
		rlog_info(&rr->d->log, "rock %s: backend %s failed: %s; resetting "
		    "the client", rock_session_name(rr->s), rr->backend.spec,
		    n == ROCK_ERR_SYSTEM ? strerror(errno) : rock_err((int)n));
		rock_session_kill(rr->s, "its backend failed");	/* frees rr */
		return;
	}
	if (n > 0)
		rr->d->n.rock_bytes[ROCKD_TO_CLIENT] += (uint64_t)n;
	if (n == 0) {
		rr->be_eof = 1;
		event_del(rr->be_rd);
		rock_session_shutdown(rr->s);
	}
}

static void
be_write(struct bufferevent *bev, void *arg)
{
	struct rockd_rock *rr = arg;

	if (rr->closing) {
		if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
			rock_free(rr);
		return;
	}
	if (rr->s != NULL)
		rock_session_pause(rr->s, 0);
	backend_shut_if_done(rr);
}

/* The client's answer: the session made. 0, or rr is freed. */
static int
answer(struct rockd_rock *rr)
{
	struct rock_handshake *hs = rr->hs;

	rr->hs = NULL;
	if (rock_handshake_accept(hs, &rock_cbs, rr, &rr->s) != 0) {
		rlog_warn(&rr->d->log, "rock: handshake could not complete");
		rock_free(rr);
		return -1;
	}
	/* Logged at info once its client proves its keys (on_rock_state):
	 * a replayed first flight gets this far and no further. */
	rlog_debug(&rr->d->log, "rock %s: answered, backend %s%s",
	    rock_session_name(rr->s), rr->backend.spec, rr->be_up ? "" :
	    " (dialling)");
	return 0;
}

static void
be_connected(struct rockd_rock *rr)
{
	rockd_no_delay(bufferevent_getfd(rr->be));
	bufferevent_set_timeouts(rr->be, NULL, NULL);
	rr->be_up = 1;
	if (rr->hs != NULL && answer(rr) != 0)
		return;
	backend_shut_if_done(rr);	/* a client's end that came first */
	rr->be_rd = event_new(rr->d->base, bufferevent_getfd(rr->be),
	    EV_READ | EV_PERSIST, be_readable, rr);
	if (rr->be_rd == NULL || event_add(rr->be_rd, NULL) != 0) {
		rock_session_abort(rr->s);
		return;
	}
	bufferevent_enable(rr->be, EV_WRITE);
}

static void
be_event(struct bufferevent *bev, short what, void *arg)
{
	struct rockd_rock *rr = arg;

	(void)bev;
	if (rr->dialing && (what & BEV_EVENT_ERROR)) {
		rr->dial_failed = 1;	/* reported from inside the connect call */
	} else if (what & BEV_EVENT_CONNECTED) {
		be_connected(rr);
	} else if (rr->closing) {
		rock_free(rr);
	} else if ((what & (BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT)) && rr->hs != NULL) {
		rlog_warn(&rr->d->log, "rock: backend %s: %s; refusing the client",
		    rr->backend.spec, (what & BEV_EVENT_TIMEOUT) ?
		    "connect timed out" : strerror(EVUTIL_SOCKET_ERROR()));
		rock_handshake_reject(rr->hs, ROCK_WERR_BACKEND, "backend refused");
		rr->hs = NULL;
		rock_free(rr);
	} else if ((what & BEV_EVENT_TIMEOUT) && !rr->be_up) {
		rlog_info(&rr->d->log, "rock %s: backend %s: connect timed out; "
		    "resetting the client", rock_session_name(rr->s),
		    rr->backend.spec);
		rock_session_kill(rr->s, "its backend did not answer");
	} else if (what & BEV_EVENT_ERROR) {
		rlog_info(&rr->d->log, "rock %s: backend %s failed: %s; resetting "
		    "the client", rock_session_name(rr->s), rr->backend.spec,
		    strerror(EVUTIL_SOCKET_ERROR()));
		rock_session_kill(rr->s, "its backend failed");	/* frees rr */
	}
}

void
rockd_rock_start(struct rockd *d, const struct rockd_backend *b,
    struct rock_handshake *hs)
{
	static const struct timeval dial_timeout = { 10, 0 };
	struct rockd_rock *rr = calloc(1, sizeof(*rr));
	int early;

	if (rr == NULL ||
	    (rr->be = rockd_bufferevent(d->base, -1)) == NULL) {
		free(rr);
		rock_handshake_reject(hs, ROCK_WERR_BUSY, "out of memory");
		return;
	}
	rr->d = d;
	rr->id = ++next_id;
	rr->backend = *b;
	rr->hs = hs;
	early = rock_handshake_early_admitted(hs);
	rock_link(d, rr);
	bufferevent_setcb(rr->be, NULL, be_write, be_event, rr);
	bufferevent_setwatermark(rr->be, EV_WRITE, ROCK_LOW, 0);
	/* The backend is dialled before the client hears back, so a refusal
	 * reaches the client's connect() as ECONNREFUSED (but for an
	 * admitted early flight, below). */
	/* The client waits for this answer: bound it. */
	bufferevent_set_timeouts(rr->be, NULL, &dial_timeout);
	rr->dialing = 1;
	if (bufferevent_socket_connect(rr->be, (const struct sockaddr *)&b->addr,
	    (int)b->len) != 0)
		rr->dial_failed = 1;
	rr->dialing = 0;
	if (rr->dial_failed) {
		rlog_warn(&d->log, "rock: backend %s: %s; refusing the client",
		    b->spec, strerror(errno));
		rock_handshake_reject(rr->hs, ROCK_WERR_BACKEND, "backend unreachable");
		rr->hs = NULL;
		rock_free(rr);
		return;
	}
	/* A client whose first bytes came with its resumption and were
	 * admitted (protocol 2.9) had its connect() return already: it is
	 * answered now, the dial running meanwhile, so the answer's way
	 * through the client overlaps the dial and its bytes wait in the
	 * backend's queue. A backend that then fails resets the rock, as
	 * after any backend failure. */
	if (early)
		(void)answer(rr);
}

/* A rock whose backend is still being dialled is mid-handshake with its
 * client: it does not move (the hand-over waits for it, within a bound).
 * Otherwise it is cut with a reset both ways: its backend must not take
 * the cut for the end of the stream, nor its client (protocol 3: a FIN
 * without the authenticated end is a failure). */
static void
rock_cut(struct rockd_rock *rr)
{
	struct linger lg = { 1, 0 };
	evutil_socket_t fd = bufferevent_getfd(rr->be);

	if (fd >= 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	if (rr->hs != NULL) {
		rock_handshake_reject(rr->hs, ROCK_WERR_BUSY, "rockd stopping");
		rr->hs = NULL;
	}
	/* Killed, not aborted: the client hears in an authenticated record
	 * that the session is over, and does not wait for a rockd that may
	 * never come back. */
	if (rr->s != NULL)
		rock_session_kill(rr->s, "cut by rockd stopping");
	else
		rock_free(rr);
}

void
rockd_rocks_cut(struct rockd *d, int all)
{
	struct rockd_rock *rr, *next;

	for (rr = d->rocks; rr != NULL; rr = next) {
		next = rr->next;
		if (all || (rr->s != NULL &&
		    rock_session_state(rr->s) == ROCK_ST_SUSPENDED)) {
			rlog_info(&d->log, "rock %s: cut with a reset both ways "
			    "(%s)", rr->s != NULL ? rock_session_name(rr->s) :
			    "closing", all ? "drain timeout" :
			    "suspended while stopping");
			rock_cut(rr);
		}
	}
}

/* Rocks answered while their backend is being dialled (an admitted
 * CLIENT_EARLY's): a hand-over waits for them as for handshakes. */
size_t
rockd_rocks_dialing(const struct rockd *d)
{
	const struct rockd_rock *rr;
	size_t n = 0;

	for (rr = d->rocks; rr != NULL; rr = rr->next)
		n += rr->hs == NULL && !rr->be_up && !rr->closing;
	return n;
}

void
rockd_rocks_count(const struct rockd *d, size_t *connected, size_t *suspended,
    uint64_t *ring)
{
	const struct rockd_rock *rr;

	*connected = *suspended = 0;
	*ring = 0;
	for (rr = d->rocks; rr != NULL; rr = rr->next) {
		if (rr->s == NULL)
			continue;
		switch (rock_session_state(rr->s)) {
		case ROCK_ST_CONNECTED: (*connected)++; break;
		case ROCK_ST_SUSPENDED: (*suspended)++; break;
		default: break;
		}
		*ring += rock_session_unacked(rr->s);
	}
}

/* ---- hand-over (USR2): the rock's own state around its engine session */

/* The successor holds every socket: ours only close, nothing is sent. */
void
rockd_rocks_release(struct rockd *d)
{
	static const struct linger reset = { 1, 0 };
	struct rockd_rock *rr;
	int fd;

	/* One still in its handshake was not handed over: its client is
	 * refused (its connect fails as on a busy server) and its backend
	 * dial reset. The others are the successor's now. */
	while ((rr = d->rocks) != NULL) {
		if (rr->hs == NULL && !rr->be_up && rr->s != NULL &&
		    !rr->closing) {
			/* Answered (an early flight) but its backend still
			 * dialling past the hand-over's wait: not moved; its
			 * client is told the rock is over. */
			rlog_info(&d->log, "rock %s: its backend still dialling at "
			    "the hand-over; reset", rock_session_name(rr->s));
			rock_cut(rr);
			continue;
		}
		if (rr->hs != NULL) {
			rlog_info(&d->log, "rock %lu: still in its handshake at the "
			    "hand-over; refused", rr->id);
			rock_handshake_reject(rr->hs, ROCK_WERR_BUSY,
			    "rockd handed over");
			rr->hs = NULL;
			if ((fd = bufferevent_getfd(rr->be)) >= 0)
				(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset,
				    sizeof(reset));
		}
		rock_free(rr);
	}
}

static int
rock_export(struct rockd_rock *rr, struct evbuffer *out, int fds[2], int *nfds)
{
	struct rock_rec_out w;
	struct evbuffer *sess;
	int r;

	if (rr->hs != NULL || !rr->be_up)
		return ROCK_ERR_INVALID;	/* mid-handshake, or its dial */
	if ((sess = evbuffer_new()) == NULL)
		return ROCK_ERR_NOMEM;
	if (rr->s != NULL && (r = rock_session_export(rr->s, sess)) != 0) {
		evbuffer_free(sess);
		return r;
	}
	if ((r = rock_rec_begin(&w)) != 0) {
		evbuffer_free(sess);
		return r;
	}
	rock_rec_uint(&w, (uint64_t)rr->be_eof | (uint64_t)rr->rock_eof << 1 |
	    (uint64_t)rr->be_shut << 2 | (uint64_t)rr->closing << 3, 1);
	rock_rec_uint(&w, rr->id, 8);
	rock_rec_blob(&w, rr->backend.spec, strlen(rr->backend.spec));
	rock_rec_evbuffer(&w, bufferevent_get_output(rr->be));
	rock_rec_evbuffer(&w, sess);
	evbuffer_free(sess);
	fds[0] = bufferevent_getfd(rr->be);
	*nfds = 1;
	if (rr->s != NULL && rock_session_fd(rr->s) >= 0)
		fds[(*nfds)++] = rock_session_fd(rr->s);
	return rock_rec_seal(&w, RECORD_MAGIC, RECORD_VERSION, out);
}

int
rockd_rocks_send(struct rockd *d, int chan, unsigned *sent, unsigned *left)
{
	struct rockd_rock *rr;
	struct evbuffer *body;
	char what[32];
	int fds[2], nfds = 0, r;

	for (rr = d->rocks; rr != NULL; rr = rr->next) {
		if ((body = evbuffer_new()) == NULL)
			return -1;
		r = rock_export(rr, body, fds, &nfds);
		snprintf(what, sizeof(what), "rock %s",
		    rr->s != NULL ? rock_session_name(rr->s) : "closing");
		if (rockd_chan_send_export(d, chan, ROCKD_MSG_ROCK, r, body, fds,
		    nfds, what, sent, left) != 0)
			return -1;
	}
	return 0;
}

struct rock_fields {
	uint64_t bits, id;
	const uint8_t *spec, *be_out, *sess;
	size_t spec_len, be_out_len, sess_len;
};

static int
rock_decode(const struct rockd_msg *m, struct rock_fields *f)
{
	struct rock_rec_in r;

	if (rock_rec_open(&r, m->body, m->len, RECORD_MAGIC, RECORD_VERSION) != 0)
		return -1;
	f->bits = rock_rec_get_max(&r, 1, 0xf);
	f->id = rock_rec_get(&r, 8);
	f->spec = rock_rec_get_blob(&r, sizeof(((struct rockd_backend *)0)->spec) - 1,
	    &f->spec_len);
	f->be_out = rock_rec_get_blob(&r, RECORD_MAX_BUFFER, &f->be_out_len);
	f->sess = rock_rec_get_blob(&r, RECORD_MAX_BUFFER, &f->sess_len);
	if (rock_rec_close(&r) != 0)
		return -1;
	/* A rock without a session is one flushing its last bytes to the
	 * backend; one with a session has its client's socket if connected. */
	if (f->sess_len == 0 ? !(f->bits & 8) || m->nfds != 1 :
	    m->nfds < 1 || m->nfds > 2)
		return -1;
	return 0;
}

int
rockd_rock_import(struct rockd *d, struct rockd_msg *m)
{
	struct rock_fields f;
	struct rockd_rock *rr;
	int r;

	if (m->len == 0 || rock_decode(m, &f) != 0)
		return ROCK_ERR_PROTOCOL;
	if ((rr = calloc(1, sizeof(*rr))) == NULL)
		return ROCK_ERR_NOMEM;
	rr->d = d;
	rr->id = f.id;
	if (f.id > next_id)
		next_id = f.id;
	memcpy(rr->backend.spec, f.spec, f.spec_len);
	rr->be_eof = (f.bits & 1) != 0;
	rr->rock_eof = (f.bits & 2) != 0;
	rr->be_shut = (f.bits & 4) != 0;
	rr->closing = (f.bits & 8) != 0;
	rr->proven = 1;		/* a session still unproven is not handed over */
	rr->be_up = 1;		/* nor one whose backend is being dialled */
	rock_link(d, rr);
	if ((rr->be = rockd_bufferevent(d->base, m->fds[0])) == NULL) {
		rock_free(rr);
		return ROCK_ERR_NOMEM;
	}
	m->fds[0] = -1;
	if (f.sess_len > 0 && (r = rock_session_import(d->engine, f.sess,
	    f.sess_len, m->nfds == 2 ? m->fds[1] : -1, &rock_cbs, rr,
	    &rr->s)) != 0) {
		rock_free(rr);
		return r;
	}
	if (m->nfds == 2)
		m->fds[1] = -1;
	bufferevent_setcb(rr->be, NULL, be_write, be_event, rr);
	bufferevent_setwatermark(rr->be, EV_WRITE, ROCK_LOW, 0);
	if (evbuffer_add(bufferevent_get_output(rr->be), f.be_out,
	    f.be_out_len) != 0) {
		rock_free(rr);
		return ROCK_ERR_NOMEM;
	}
	bufferevent_enable(rr->be, EV_WRITE);
	if (rr->s == NULL) {
		/* be_write frees it once flushed */
		if (f.be_out_len == 0)
			rock_free(rr);
		return 0;
	}
	rr->be_rd = event_new(d->base, bufferevent_getfd(rr->be),
	    EV_READ | EV_PERSIST, be_readable, rr);
	if (rr->be_rd == NULL) {
		rock_free(rr);
		return ROCK_ERR_NOMEM;
	}
	if (!rr->be_eof)
		event_add(rr->be_rd, NULL);
	return 0;
}

/* ---- the control socket: rock ls and rock kill */

static void
ctl_backend(struct rock_session *s, char *out, size_t len, void *arg)
{
	struct rockd *d = arg;
	struct rockd_rock *rr;

	for (rr = d->rocks; rr != NULL; rr = rr->next)
		if (rr->s == s) {
			snprintf(out, len, "%s", rr->backend.spec);
			return;
		}
}

int
rockd_control_start(struct rockd *d, const char *path, int successor)
{
	char program[24] = "rockd";

	if (path == NULL)
		return 0;
	/* rock ls says which of a fleet's nodes holds a row. */
	if (d->node > 0)
		snprintf(program, sizeof(program), "rockd:node%d", d->node);
	/* Workers: the first answers on the socket, and the others take
	 * their part of each request from it (rock_ctl_set_workers). */
	if (d->nworkers > 1 && d->worker != 0) {
		if (rock_ctl_open(d->engine, NULL, program, ctl_backend, d, 0,
		    &d->ctl) != 0) {
			rlog_error(&d->log, "control: %s", strerror(errno));
			return -1;
		}
		return 0;
	}
	/* A successor's predecessor still answers there until it exits. */
	if (rock_ctl_open(d->engine, path, program, ctl_backend, d,
	    successor ? ROCK_CTL_TAKEOVER : 0, &d->ctl) != 0) {
		rlog_error(&d->log, "control %s: %s", path,
		    rock_ctl_strerror(errno));
		return -1;
	}
	rlog_info(&d->log, "control socket %s", path);
	return 0;
}

void
rockd_control_stop(struct rockd *d)
{
	/* After a hand-over the name is the successor's. */
	rock_ctl_free(d->ctl, !d->handed_over);
	d->ctl = NULL;
}
