/* rock_early.c: a client's resumption answered on the engine's loop, after connect() returned at TCP up. */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "rock_engine_int.h"
#include "rock_err.h"
#include "rock_known.h"
#include "rock_sys.h"

/* SERVER_RESUME and its TICKET; UDP_ADDRESS may follow (features). */
#define ANSWER_BASE (ROCK_SERVER_RESUME_LEN + ROCK_TICKET_MSG_LEN)
#define MORE 1		/* part of the answer came: wait for the rest */

struct rock_early {
	struct rock_engine *e;
	struct rock_early *next, **prevp;	/* e->early */
	struct event *ev;
	int fd, rtt_ms;
	int64_t deadline_ms;		/* the answer's */
	struct sockaddr_storage addr;
	socklen_t len;
	struct rock_ticket_entry tk;
	uint8_t nonce[ROCK_NONCE_LEN];
	uint8_t flight[ROCK_EARLY_TOTAL];
	size_t nflight;			/* CLIENT_RESUME's or CLIENT_EARLY's */
	uint8_t in[ANSWER_BASE + ROCK_UDP_ADDRESS_LEN];
	size_t got;
	/* After CLIENT_EARLY (doc/PROTOCOL.md 2.9): the program's bytes
	 * sent behind it, kept until the answer says what became of them
	 * (granted: EARLY in the answer). */
	int early, pushed, granted;
	int sending;			/* counted in e->early_sending */
	uint8_t *bytes;
	size_t nbytes;
	const struct rock_session_cbs *cbs;
	void *arg;
	rock_early_done_fn done;
	void *done_arg;
	struct rock_early **owner;	/* the caller's pointer to it */
};

static void
early_free(struct rock_early *x)
{
	if (x->prevp != NULL) {
		*x->prevp = x->next;
		if (x->next != NULL)
			x->next->prevp = x->prevp;
	}
	if (x->owner != NULL)
		*x->owner = NULL;
	if (x->ev != NULL)
		event_free(x->ev);
	if (x->fd >= 0)
		rock_sys.close(x->fd);
	if (x->bytes != NULL) {
		rock_wipe(x->bytes, x->nbytes);
		free(x->bytes);
	}
	if (x->sending)
		x->e->early_sending--;
	rock_wipe(x, sizeof(*x));
	free(x);
}

/* Lock held. */
void
rock_early_cancel(struct rock_early *x)
{
	if (x != NULL)
		early_free(x);
}

void
rock_early_free_all(struct rock_engine *e)
{
	while (e->early != NULL)
		early_free(e->early);
}

int
rock_early_owns_fd(const struct rock_engine *e, int fd)
{
	const struct rock_early *x;

	for (x = e->early; x != NULL; x = x->next)
		if (x->fd == fd)
			return 1;
	return 0;
}

void
rock_early_close_fds(const struct rock_engine *e, int (*close_fn)(int))
{
	const struct rock_early *x;

	for (x = e->early; x != NULL; x = x->next)
		if (x->fd >= 0)
			close_fn(x->fd);
}

static void on_answer(evutil_socket_t fd, short what, void *arg);

/* The loop's thread, lock held: the answer's wait, for the time left
 * (libevent is the loop's alone). */
static int
early_wait(struct rock_early *x)
{
	int64_t ms = x->deadline_ms - rock_now_ms();
	struct timeval tv;

	if (ms < 1)
		ms = 1;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	if (x->ev == NULL &&
	    (x->ev = event_new(x->e->base, x->fd, EV_READ, on_answer, x)) == NULL)
		return ROCK_ERR_NOMEM;
	return event_add(x->ev, &tv) == 0 ? 0 : ROCK_ERR_NOMEM;
}

/* The answer's length as far as its bytes in tell: never past it, as
 * the session's bytes (admitted early) follow it at once. */
static size_t
answer_len(const struct rock_early *x)
{
	return x->got < 4 ? ANSWER_BASE : ROCK_SERVER_RESUME_LEN +
	    rock_answer_tail_len(rock_answer_features(x->in));
}

/* 0 once the whole answer is in, MORE, or why not. A refusal is left to
 * the full path the caller takes next, which reads and proves it. */
static int
answer_read(struct rock_early *x)
{
	ssize_t n = rock_sys.recv(x->fd, x->in + x->got, answer_len(x) - x->got,
	    MSG_DONTWAIT);

	if (n < 0)
		return errno == EAGAIN || errno == EINTR ? MORE : ROCK_ERR_SYSTEM;
	if (n == 0)
		return ROCK_ERR_PROTOCOL;
	if (x->got == 0 && x->in[0] == ROCK_MSG_ERROR)
		return ROCK_ERR_REFUSED;
	x->got += (size_t)n;
	return x->got < answer_len(x) ? MORE : 0;
}

/* After CLIENT_RESUME: CLIENT_FINISHED proves our keys. (After
 * CLIENT_EARLY none goes: our bytes follow it already.) A new
 * connection's first segment of ours after the flight: it has room. */
static int
send_finished(struct rock_early *x, const struct rock_keys *keys)
{
	uint8_t fin[ROCK_FINISHED_LEN];

	rock_finished_encode(fin, keys->tx, x->flight, x->nflight, x->in,
	    x->got);
	return rock_sys.send(x->fd, fin, sizeof(fin),
	    MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)sizeof(fin) ? 0 :
	    ROCK_ERR_SYSTEM;
}

/* The answer checked, CLIENT_FINISHED sent (after CLIENT_RESUME), the
 * session made, the program's early bytes in its ring. */
static int
finish(struct rock_early *x, struct rock_session **s)
{
	struct rock_engine *e = x->e;
	struct rock_server_hello sh;
	struct rock_ticket_msg tm;
	struct rock_keys keys;
	int r;

	memset(&keys, 0, sizeof(keys));
	if ((r = rock_resume_answer_check(e, x->flight, x->nflight, &x->tk,
	    x->nonce, x->in, x->got, &sh, &keys, &tm)) != 0) {
		rock_ticket_drop(e, (struct sockaddr *)&x->addr, x->len,
		    x->tk.ticket);
		goto out;
	}
	x->granted = x->early && (sh.features & ROCK_FEAT_EARLY);
	sh.features &= ROCK_FEAT_REQUESTED;
	if (!x->early && (r = send_finished(x, &keys)) != 0)
		goto out;
	if (x->pushed)
		(void)rock_sys.setsockopt(x->fd, IPPROTO_TCP, TCP_NODELAY,
		    &(int){ 0 }, sizeof(int));
	event_free(x->ev);
	x->ev = NULL;
	if ((r = rock_hello_session(e, x->fd, x->rtt_ms,
	    (struct sockaddr *)&x->addr, x->len, &sh, &keys, x->cbs, x->arg,
	    s)) != 0)
		goto out;
	x->fd = -1;	/* the session's */
	rock_hello_keep_ticket(e, (struct sockaddr *)&x->addr, x->len, &tm,
	    &keys, sh.id, sh.ident, x->tk.origin_ms);
	e->stats.resumed++;
	if ((r = rock_direct_written(*s, x->bytes, x->nbytes)) != 0) {
		/* They went: whatever the server did with them, they must
		 * not go again. The connection fails, as TCP's reset would. */
		rock_session_close(*s, r, "no room for its early bytes");
		*s = NULL;
		r = ROCK_ERR_LOST;
	}
out:
	rock_keys_wipe(&keys);
	return r;
}

static void early_end(struct rock_early *x, struct rock_session *s, int r);

static void
on_answer(evutil_socket_t fd, short what, void *arg)
{
	struct rock_early *x = arg;
	struct rock_engine *e = x->e;
	struct rock_session *s = NULL;
	int r;

	(void)fd;
	rock_engine_enter(e);
	/* An answer that came with the deadline counts. */
	r = (what & EV_READ) ? answer_read(x) : MORE;
	if (r == MORE && (what & EV_TIMEOUT))
		r = ROCK_ERR_TIMEOUT;
	else if (r == MORE && (r = early_wait(x)) == 0) {
		rock_engine_leave(e);
		return;
	}
	if (r == 0)
		r = finish(x, &s);
	early_end(x, s, r);
	rock_engine_leave(e);
}

/* Lock held: over, one way or the other; its owner told. A session
 * whose early bytes the server held back reconnects at once: its
 * reconnect proves its keys, and they go again (2.9). With no session,
 * the program's early bytes go to the owner only when the server is
 * known to have passed none on (it refused: an ERROR came first), to be
 * sent first on whatever connection comes next; when that is not known
 * (a reset, silence, an answer that does not verify), they may have
 * reached the backend, must not go twice, and the connection fails
 * (ROCK_ERR_LOST), as TCP's would. */
static void
early_end(struct rock_early *x, struct rock_session *s, int r)
{
	struct rock_engine *e = x->e;
	rock_early_done_fn done = x->done;
	void *done_arg = x->done_arg;
	int held = s != NULL && x->early && !x->granted;
	uint8_t *bytes = x->bytes;
	size_t n = x->nbytes;

	if (s == NULL && n > 0 && r != ROCK_ERR_REFUSED)
		r = ROCK_ERR_LOST;
	if (r != 0)
		rlog_debug(e->log, "handshake: the early resumption failed (%s); "
		    "the full path", rock_err(r));
	x->bytes = NULL;
	x->nbytes = 0;
	early_free(x);
	if (s != NULL)
		rock_session_hold(s);
	done(e, s, r, s == NULL && r != ROCK_ERR_LOST ? bytes : NULL,
	    s == NULL && r != ROCK_ERR_LOST ? n : 0, done_arg);
	if (s != NULL && rock_session_release(s) && held)
		rock_session_fail(s, "the server held its early bytes back; "
		    "they go again behind a reconnect");
	if (bytes != NULL) {
		rock_wipe(bytes, n);
		free(bytes);
	}
}

/* The owner's lock held: the program's bytes behind a CLIENT_EARLY,
 * sent now on the attempt's connection and kept until the answer. How
 * many went; 0: none may (no CLIENT_EARLY, the early bytes' bound
 * reached, the kernel's buffer full or the connection failed), and the
 * program waits for the answer as after CLIENT_RESUME. */
size_t
rock_early_send(struct rock_early *x, const struct iovec *iov, int iovcnt)
{
	struct iovec v[8];
	size_t room, want = 0, done = 0;
	ssize_t w;
	size_t most = x->e->cfg.ring_cap > 0 && x->e->cfg.ring_cap < ROCK_EARLY_MAX ?
	    x->e->cfg.ring_cap : ROCK_EARLY_MAX;	/* all fit the ring */
	uint8_t *grown;
	int k = 0, i, one = 1;

	/* A program that opens connections faster than their answers come
	 * (all its connects, then all its reads) would hold three
	 * descriptors for each (ours, its own, our copy of it) where it
	 * held two: past a bound, its writes wait for the answers as they
	 * did before CLIENT_EARLY. */
	if (!x->early || x->fd < 0 || x->nbytes >= most ||
	    (!x->sending && x->e->early_sending >= ROCK_EARLY_PENDING_MAX))
		return 0;
	room = most - x->nbytes;
	for (i = 0; i < iovcnt && k < 8 && room > 0; i++) {
		v[k] = iov[i];
		if (v[k].iov_len > room)
			v[k].iov_len = room;
		room -= v[k].iov_len;
		want += v[k++].iov_len;
	}
	/* Memory for what this call may send, no more (many connections
	 * may each keep a few bytes). */
	if (want == 0 ||	/* nothing to send (realloc to 0 would free) */
	    (grown = realloc(x->bytes, x->nbytes + want)) == NULL)
		return 0;
	x->bytes = grown;
	w = rock_sys.sendmsg(x->fd, &(struct msghdr){ .msg_iov = v,
	    .msg_iovlen = (size_t)k }, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (w <= 0)
		return 0;
	if (!x->sending) {
		x->sending = 1;
		x->e->early_sending++;
	}
	for (i = 0; i < k && done < (size_t)w; i++) {
		size_t c = v[i].iov_len < (size_t)w - done ? v[i].iov_len :
		    (size_t)w - done;

		memcpy(x->bytes + x->nbytes + done, v[i].iov_base, c);
		done += c;
	}
	x->nbytes += done;
	/* These go now, not behind the flight's ack as Nagle would have
	 * them: TCP_NODELAY while the answer is awaited (it pushes what
	 * waits), off again at the session, where the program's own
	 * setting is put on at the install. */
	if (!x->pushed) {
		x->pushed = 1;
		(void)rock_sys.setsockopt(x->fd, IPPROTO_TCP, TCP_NODELAY, &one,
		    sizeof(one));
	}
	return done;
}

/* The loop's thread, lock held: the waits of the connects begun since
 * its last turn. */
void
rock_early_arm(struct rock_engine *e)
{
	struct rock_early *x, *next;
	int r;

	for (x = e->early; x != NULL; x = next) {
		next = x->next;
		if (x->ev == NULL && (r = early_wait(x)) != 0)
			early_end(x, NULL, r);
	}
}

/* The cached announcement and a ticket proved with the key known for
 * the destination (none known: the ticket's key meets the trust check
 * now, as a resumption's answer would). Into ann and x->tk. */
static int
early_ticket(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, struct rock_early *x, uint8_t ann[ROCK_ANNOUNCE_LEN],
    int *fastopen)
{
	uint8_t key[ROCK_IDENT_LEN];
	const uint8_t *known;
	int have;

	known = rock_trust_known_memo(&e->trust, &e->known, e->log, addr, len,
	    key) ? key : NULL;
	rock_engine_enter(e);
	have = rock_probe_cached(e, addr, len, ann, fastopen) &&
	    rock_ticket_find(e, addr, len, &x->tk) &&
	    (known == NULL || rock_equal(known, x->tk.ident, ROCK_IDENT_LEN));
	rock_engine_leave(e);
	if (!have)
		return ROCK_ERR_NOT_ENHANCED;
	return known == NULL ?
	    rock_hello_trusted(e, addr, len, NULL, x->tk.ident) : 0;
}

/* The connect and the whole flight; the deadline is the answer's. */
static int
early_dial(struct rock_early *x, const uint8_t ann[ROCK_ANNOUNCE_LEN],
    int fastopen, int64_t *deadline)
{
	struct sockaddr *addr = (struct sockaddr *)&x->addr;
	size_t sent = 0;
	int r;

	*deadline = rock_now_ms() + x->e->cfg.handshake_timeout_ms;
	if ((r = rock_hello_socket(addr, &x->fd)) != 0)
		return r;
	/* The server offers EARLY (a replay register): our first bytes
	 * may follow the resumption without waiting for its answer, unless
	 * the user keeps them until the server has proved its key. */
	x->early = x->e->cfg.early &&
	    ((ann[10] << 8 | ann[11]) & ROCK_FEAT_EARLY) != 0;
	x->nflight = rock_resume_flight(x->e, x->fd, ann, &x->tk, x->early,
	    x->nonce, x->flight);
	if ((r = rock_hello_dial(x->e, x->fd, addr, x->len, deadline, x->flight,
	    x->nflight, fastopen, &sent, &x->rtt_ms)) != 0)
		return r;
	if (sent < x->nflight)
		r = rock_blocking_write(x->fd, x->flight + sent,
		    x->nflight - sent, *deadline);
	return r;
}

/* Lock held: on the list; the loop arms its wait (rock_early_arm). */
static void
early_list(struct rock_early *x, int64_t deadline, struct rock_early **out)
{
	struct rock_engine *e = x->e;

	x->deadline_ms = deadline;
	x->next = e->early;
	if (e->early != NULL)
		e->early->prevp = &x->next;
	e->early = x;
	x->prevp = &e->early;
	x->owner = out;
	*out = x;
}

int
rock_early_start(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, const struct rock_session_cbs *cbs, void *arg,
    rock_early_done_fn done, void *done_arg, struct rock_early **out)
{
	uint8_t ann[ROCK_ANNOUNCE_LEN];
	struct rock_early *x;
	int64_t deadline;
	int r, fastopen = ROCK_FO_TRY, err;

	if (len > sizeof(x->addr))
		return ROCK_ERR_INVALID;
	if ((x = calloc(1, sizeof(*x))) == NULL)
		return ROCK_ERR_NOMEM;
	x->e = e;
	x->fd = -1;
	memcpy(&x->addr, addr, len);
	x->len = len;
	x->cbs = cbs;
	x->arg = arg;
	x->done = done;
	x->done_arg = done_arg;
	if ((r = early_ticket(e, addr, len, x, ann, &fastopen)) == 0 &&
	    (r = early_dial(x, ann, fastopen, &deadline)) == 0) {
		rock_engine_enter(e);
		early_list(x, deadline, out);
		rock_engine_leave(e);
		return 0;
	}
	err = errno;
	early_free(x);
	rock_wipe(ann, sizeof(ann));
	errno = err;
	return r;
}
