/* park.c: the engine's thread accepts on a server's TCP listener, tells each connection's kind by its first bytes, and hands the ready ones to the program's unix listener. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "listener.h"
#include "rock_fdpass.h"

/* Rocks on their way to the program, found by token when it accepts. */
static struct shim_park_list handed;
static uint64_t next_token;

/* The program's queue was full, or descriptors ran out: again after. */
#define PARK_RETRY_MS 5
#define PARK_NOFILE_MS 100
/* The engine's handshakes in progress (reconnects and hellos, every
 * listener's) past which a reconnect is refused, per ROCK_SERVE_HANDSHAKES. */
#define PARK_RECONNECTS_PER_CAP 4

static void
list_add(struct shim_park_list *ls, struct shim_parked *p)
{
	p->in = ls;
	p->next = NULL;
	p->prev = ls->tail;
	if (ls->tail != NULL)
		ls->tail->next = p;
	else
		ls->head = p;
	ls->tail = p;
	ls->n++;
}

/* Back at the front, its turn kept. */
static void
list_push_head(struct shim_park_list *ls, struct shim_parked *p)
{
	p->in = ls;
	p->prev = NULL;
	p->next = ls->head;
	if (ls->head != NULL)
		ls->head->prev = p;
	else
		ls->tail = p;
	ls->head = p;
	ls->n++;
}

static void
list_del(struct shim_park_list *ls, struct shim_parked *p)
{
	if (p->prev != NULL)
		p->prev->next = p->next;
	else
		ls->head = p->next;
	if (p->next != NULL)
		p->next->prev = p->prev;
	else
		ls->tail = p->prev;
	p->prev = p->next = NULL;
	p->in = NULL;
	ls->n--;
}

static void
events_free(struct shim_parked *p)
{
	if (p->ev != NULL)
		event_free(p->ev);
	if (p->deadline != NULL)
		event_free(p->deadline);
	p->ev = p->deadline = NULL;
}

/* A rock that never reached the program ends with a reset at its client
 * (the reliable close would say a clean end after 0 bytes). */
static void
kill_rock(struct shim_rock *r)
{
	r->handing = NULL;
	if (r->s == NULL) {
		shim_rock_free(r);
		return;
	}
	r->nfds = 0;
	r->kill_at_release = 1;
	shim_post(r, SHIM_CMD_RELEASE);
	r->released = 1;
}

/* The connection goes to the program's listener: 0, EAGAIN (its queue is
 * full), or another errno (the listener is gone). uconn: keep our end,
 * whose end of file says the program is done with it. */
static int
hand(const struct shim_listener *l, uint32_t kind, uint64_t token, int fd,
    int *uconn)
{
	struct shim_hand_msg msg = { SHIM_HAND_MAGIC, kind, token };
	struct ucred cred;
	socklen_t clen = sizeof(cred);
	int u, err;

	u = shim_real.socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0);
	if (u < 0)
		return errno;
	if (shim_real.connect(u, (const struct sockaddr *)&l->name,
	    l->name_len) != 0) {
		err = errno;
		shim_real.close(u);
		return err;
	}
	/* The name is an abstract one, which anyone may bind once the
	 * program's listener is gone: the connection must be ours. */
	if (shim_real.getsockopt(u, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0 ||
	    cred.pid != getpid()) {
		shim_real.close(u);
		return ECONNREFUSED;
	}
	if (rock_fd_send(u, &msg, sizeof(msg), fd) != (ssize_t)sizeof(msg)) {
		err = errno;
		shim_real.close(u);
		/* Too many descriptors in flight: as a full queue. */
		return err == ETOOMANYREFS ? EAGAIN :
		    err == 0 || err == EAGAIN ? EPIPE : err;
	}
	if (uconn != NULL)
		*uconn = u;
	else
		shim_real.close(u);
	return 0;
}

static void
parked_free(struct shim_parked *p)
{
	events_free(p);
	if (p->uconn >= 0)
		shim_real.close(p->uconn);
	free(p);
}

/* The hand-over's end: the program closed its end, with the rock taken
 * (p->r NULL) or not (another process accepted it, or the listener went
 * with it queued). */
static void
on_handed_end(evutil_socket_t fd, short what, void *arg)
{
	struct shim_parked *p = arg;
	char c;

	(void)what;
	if (shim_real.recv(fd, &c, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN)
		return;
	shim_lock();
	list_del(&handed, p);
	if (p->r != NULL) {
		rlog_info(&shim_state()->log, "a rock accepted by another "
		    "process than its engine's, or never accepted: reset");
		kill_rock(p->r);
	}
	parked_free(p);
	shim_unlock();
}

static void pause_accepting(struct shim_listener *l, int ms);
static void drop_oldest_rock(struct shim_listener *l);

/* A ready connection to the program: 0, or EAGAIN (its queue is full:
 * p is the caller's still). */
static int
try_deliver(struct shim_listener *l, struct shim_parked *p)
{
	static const struct linger reset = { 1, 0 };
	struct event_base *base = shim_engine_base();
	int err, rock = p->r != NULL;

	/* Suspended (a reconnect under way): its connection comes. */
	if (rock && rock_direct_fd(p->r->s) < 0)
		return EAGAIN;
	/* Lost in the program's queue (its listener closed first), it is
	 * reset, as the kernel's queue would: never a clean end. */
	if (!rock)
		(void)shim_real.setsockopt(p->fd, SOL_SOCKET, SO_LINGER, &reset,
		    sizeof(reset));
	err = hand(l, rock ? SHIM_HAND_ROCK : SHIM_HAND_PLAIN, p->token,
	    rock ? rock_direct_fd(p->r->s) : p->fd, rock ? &p->uconn : NULL);
	if (err == EAGAIN)
		return EAGAIN;
	if (err == 0 && rock) {
		p->phase = SHIM_PARK_HANDED;
		p->l = NULL;
		p->ev = event_new(base, p->uconn, EV_READ | EV_PERSIST,
		    on_handed_end, p);
		if (p->ev != NULL && event_add(p->ev, NULL) == 0) {
			list_add(&handed, p);
			return 0;
		}
		err = ENOMEM;
	}
	if (err != 0)
		rlog_debug(&shim_state()->log, "fd %d: a connection for the "
		    "program's listener %d lost: %s", p->fd, l->fd,
		    strerror(err));
	if (rock) {
		if (err != 0)
			kill_rock(p->r);
	} else {
		shim_real.close(p->fd);	/* a reset, if it went nowhere */
	}
	parked_free(p);
	return 0;
}

/* Kept in order while the program's queue is full. */
static void
deliver(struct shim_listener *l, struct shim_parked *p)
{
	if (l->waiting.n > 0 || try_deliver(l, p) == EAGAIN) {
		p->phase = SHIM_PARK_WAITING;
		list_add(&l->waiting, p);
		pause_accepting(l, PARK_RETRY_MS);
	}
}

static void
on_retry(evutil_socket_t fd, short what, void *arg)
{
	struct shim_listener *l = arg;
	struct shim_parked *p;
	int full = 0;

	(void)fd;
	(void)what;
	shim_lock();
	while (!full && (p = l->waiting.head) != NULL) {
		list_del(&l->waiting, p);
		if ((full = try_deliver(l, p) == EAGAIN))
			list_push_head(&l->waiting, p);
	}
	l->paused = l->paused && (full || event_add(l->ev, NULL) != 0);
	if (l->paused)
		pause_accepting(l, full ? PARK_RETRY_MS : PARK_NOFILE_MS);
	shim_unlock();
}

static void
pause_accepting(struct shim_listener *l, int ms)
{
	struct timeval tv = { 0, ms * 1000 };

	if (!l->paused)
		(void)event_del(l->ev);
	l->paused = 1;
	if (!evtimer_pending(l->retry, NULL))
		(void)evtimer_add(l->retry, &tv);
}

/* Out of the listener's connections in progress (p->l stays: a ready
 * one may wait for room in its queue). */
static void
unpark(struct shim_parked *p)
{
	if (p->l == NULL || (p->in != &p->l->parked && p->in != &p->l->shaking))
		return;
	list_del(p->in, p);
}

/* EDP step 1c: the announcement, then the connection ends. */
static void
answer_probe(struct rock_engine *e, struct shim_parked *p)
{
	(void)shim_real.send(p->fd, rock_engine_announcement(e),
	    ROCK_ANNOUNCE_LEN, MSG_NOSIGNAL | MSG_DONTWAIT);
	shim_real.close(p->fd);
}

/* ERROR BUSY after what came is read (a close over unread bytes is a
 * reset, which can overtake it). */
static void
refuse_busy(int fd)
{
	uint8_t out[ROCK_ERROR_MAX_LEN];
	size_t n = rock_error_encode(ROCK_WERR_BUSY, "busy", out);

	(void)rock_discard_unread(fd);
	(void)shim_real.send(fd, out, n, MSG_NOSIGNAL | MSG_DONTWAIT);
	shim_real.close(fd);
}

static void
on_hello(struct rock_handshake *hs, void *arg)
{
	struct shim_parked *p = arg;
	struct shim_rock *r = p->r;

	if (hs != NULL && p->l == NULL)
		rock_handshake_reject(hs, ROCK_WERR_BUSY, "the listener closed");
	else if (hs != NULL &&
	    rock_handshake_accept(hs, shim_rock_cbs(), r, &r->s) == 0) {
		p->phase = SHIM_PARK_PROVING;
		return;
	}
	/* The engine closed the connection; the rock never began. */
	r->handing = NULL;
	shim_rock_free(r);
	p->r = NULL;
	unpark(p);
	free(p);
}

static void
start_rock(struct rock_engine *e, struct shim_listener *l,
    struct shim_parked *p, enum rock_sniff kind)
{
	struct shim_rock *r;

	/* The peeked magic, taken now for the engine's reader. */
	if (shim_real.recv(p->fd, p->buf, p->have, MSG_DONTWAIT) !=
	    (ssize_t)p->have) {
		rock_close_reset(p->fd);
		goto out;
	}
	if (kind == ROCK_SNIFF_RECONNECT) {
		/* Reconnects come for the engine's rocks, whichever listener:
		 * a bound of its own, past which the newest are told BUSY. */
		if (rock_engine_nhandshakes(e) >= PARK_RECONNECTS_PER_CAP *
		    (size_t)shim_state()->cfg.serve_handshakes) {
			refuse_busy(p->fd);
			goto out;
		}
		rlog_debug(&shim_state()->log, "fd %d: a reconnect: to the "
		    "engine", p->fd);
		rock_server_reconnect(e, p->fd, p->buf, p->have);
		goto out;
	}
	if ((r = shim_rock_new()) == NULL) {
		rock_close_reset(p->fd);
		goto out;
	}
	memcpy(&r->peer, &p->peer, sizeof(r->peer));
	r->peer_len = p->peer_len;
	r->handing = p;
	p->r = r;
	p->phase = SHIM_PARK_HELLO;
	unpark(p);
	while (l->shaking.n >= (unsigned)shim_state()->cfg.serve_handshakes)
		drop_oldest_rock(l);
	list_add(&l->shaking, p);
	rock_server_handshake(e, p->fd, p->buf, p->have, p->rtt_ms, on_hello, p);
	return;
out:
	unpark(p);
	free(p);
}

static void
sniffed(struct shim_parked *p, enum rock_sniff kind)
{
	struct rock_engine *e = shim_engine_running();
	struct shim_listener *l = p->l;

	events_free(p);
	if (kind == ROCK_SNIFF_PROBE) {
		rlog_debug(&shim_state()->log, "fd %d: an EDP probe: announced",
		    p->fd);
		answer_probe(e, p);
		unpark(p);
		free(p);
	} else if (kind == ROCK_SNIFF_PLAIN) {
		unpark(p);
		deliver(l, p);
	} else {
		start_rock(e, l, p, kind);
	}
}

static void
on_sniff(evutil_socket_t fd, short what, void *arg)
{
	struct shim_parked *p = arg;
	enum rock_sniff kind;
	int64_t left;

	(void)fd;
	shim_lock();
	/* libevent's clock is coarse (a few ms): the first-bytes time is a
	 * floor, so its end is read again. */
	if ((what & EV_TIMEOUT) &&
	    (left = p->since_ms + p->wait_ms - shim_now_ms()) > 0) {
		struct timeval tv = { (left + 1) / 1000,
		    ((left + 1) % 1000) * 1000 };

		(void)evtimer_add(p->deadline, &tv);
		shim_unlock();
		return;
	}
	/* What came by the deadline counts, even if its event is still to
	 * run; still nothing: a client of a server-speaks-first protocol. */
	kind = rock_sniff_read(p->fd, p->buf, &p->have, 1);
	if (kind == ROCK_SNIFF_MORE && (what & EV_TIMEOUT)) {
		rlog_debug(&shim_state()->log, "fd %d: plain TCP: %s the "
		    "first-bytes time", p->fd, p->have == 0 ? "silent for" :
		    "part of a rock's first bytes in");
		kind = ROCK_SNIFF_PLAIN;
	} else if (kind == ROCK_SNIFF_PLAIN) {
		rlog_debug(&shim_state()->log, "fd %d: plain TCP: the "
		    "client's first bytes are not a rock's, or it ended", p->fd);
	}
	if (kind != ROCK_SNIFF_MORE)
		sniffed(p, kind);
	shim_unlock();
}

/* Past the cap, the oldest rock handshake is cut under the engine, which
 * ends it as a client that left. */
static void
drop_oldest_rock(struct shim_listener *l)
{
	struct shim_parked *p = l->shaking.head;

	rlog_limited(&shim_state()->log, &l->drop_log, ROCK_LOG_INFO,
	    "listener %d: %u rock handshakes in progress "
	    "(ROCK_SERVE_HANDSHAKES): the oldest dropped", l->fd,
	    l->shaking.n);
	unpark(p);
	p->l = NULL;
	(void)shim_real.shutdown(p->fd, SHUT_RDWR);
}

/* Past the cap, the oldest connection still to be sniffed is the
 * program's as it is (its bytes are still in the socket): a silent
 * client is not reset for others' sake. */
static void
deliver_oldest_sniff(struct shim_listener *l)
{
	struct shim_parked *p = l->parked.head;

	events_free(p);
	unpark(p);
	deliver(l, p);
}

static void
park(struct shim_listener *l, int fd, const struct sockaddr_storage *peer,
    socklen_t peer_len)
{
	struct event_base *base = shim_engine_base();
	struct shim_parked *p;
	struct timeval tv;

	while (l->parked.n >= (unsigned)shim_state()->cfg.serve_handshakes)
		deliver_oldest_sniff(l);
	if ((p = calloc(1, sizeof(*p))) == NULL) {
		rock_close_reset(fd);
		return;
	}
	p->l = l;
	p->fd = fd;
	p->uconn = -1;
	p->token = ++next_token;
	memcpy(&p->peer, peer, sizeof(p->peer));
	p->peer_len = peer_len;
	p->wait_ms = rock_first_bytes_ms(fd, ROCK_FIRST_BYTES_MS, &p->rtt_ms);
	p->since_ms = shim_now_ms();
	tv.tv_sec = p->wait_ms / 1000;
	tv.tv_usec = (p->wait_ms % 1000) * 1000;
	/* Edge-triggered: a peeked prefix stays in the socket, and only
	 * more bytes are news. */
	p->ev = event_new(base, fd, EV_READ | EV_ET | EV_PERSIST, on_sniff, p);
	p->deadline = evtimer_new(base, on_sniff, p);
	if (p->ev == NULL || p->deadline == NULL ||
	    event_add(p->ev, NULL) != 0 || evtimer_add(p->deadline, &tv) != 0) {
		events_free(p);
		free(p);
		rock_close_reset(fd);
		return;
	}
	list_add(&l->parked, p);
}

static void
on_accept(evutil_socket_t fd, short what, void *arg)
{
	struct shim_listener *l = arg;
	struct sockaddr_storage peer;
	socklen_t len;
	int c, i;

	(void)what;
	shim_lock();
	for (i = 0; i < 64 && !l->paused; i++) {
		len = sizeof(peer);
		c = shim_real.accept4(fd, (struct sockaddr *)&peer, &len,
		    SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (c < 0) {
			if (errno == EMFILE || errno == ENFILE ||
			    errno == ENOBUFS || errno == ENOMEM)
				pause_accepting(l, PARK_NOFILE_MS);
			break;
		}
		shim_fd_set(c, SHIM_FD_UNKNOWN, 0);
		park(l, c, &peer, len);
	}
	shim_unlock();
}

void
shim_park_start(struct rock_engine *e, void *arg)
{
	struct shim_listener *l = arg;
	struct event_base *base = shim_engine_base();

	shim_rdv_start(e);
	l->ev = event_new(base, l->tcp, EV_READ | EV_PERSIST, on_accept, l);
	l->retry = evtimer_new(base, on_retry, l);
	if (l->ev != NULL && l->retry != NULL && event_add(l->ev, NULL) == 0)
		l->running = 1;
	l->call_done = 1;
	shim_wake();
}

/* The listener goes: nothing more is accepted; what is in progress is
 * dropped (the program's queue goes with its listener too). */
void
shim_park_stop(struct rock_engine *e, void *arg)
{
	struct shim_listener *l = arg;
	struct shim_parked *p;

	(void)e;
	if (l->ev != NULL)
		event_free(l->ev);
	if (l->retry != NULL)
		event_free(l->retry);
	l->ev = l->retry = NULL;
	l->running = 0;
	while ((p = l->parked.head) != NULL) {
		events_free(p);
		unpark(p);
		rock_close_reset(p->fd);
		free(p);
	}
	while (l->shaking.head != NULL)
		drop_oldest_rock(l);
	while ((p = l->waiting.head) != NULL) {
		list_del(&l->waiting, p);
		if (p->r != NULL)
			kill_rock(p->r);
		else
			rock_close_reset(p->fd);
		parked_free(p);
	}
	l->call_done = 1;
	shim_wake();
}

struct shim_parked *
shim_park_handed(uint64_t token)
{
	struct shim_parked *p;

	for (p = handed.head; p != NULL; p = p->next)
		if (p->token == token && p->r != NULL)
			return p;
	return NULL;
}

void
shim_park_taken(struct shim_parked *p)
{
	p->r->handing = NULL;
	p->r = NULL;
}

/* The engine's callbacks (engine.c) on a rock it is handing over. */
void
shim_park_rock_up(struct shim_rock *r)
{
	struct shim_parked *p = r->handing;
	struct shim_listener *l = p->l;

	if (p->phase != SHIM_PARK_PROVING)
		return;
	unpark(p);
	if (l == NULL) {	/* dropped, or its listener closed */
		kill_rock(r);
		free(p);
		return;
	}
	deliver(l, p);
}

void
shim_park_rock_gone(struct shim_rock *r)
{
	struct shim_parked *p = r->handing;

	r->handing = NULL;
	p->r = NULL;
	if (p->phase == SHIM_PARK_HANDED) {
		/* The program, should it accept it now, finds no rock. */
		list_del(&handed, p);
		parked_free(p);
		return;
	}
	if (p->phase == SHIM_PARK_WAITING)
		list_del(p->in, p);
	else
		unpark(p);
	free(p);
}

/* In a fork's child: the parent's engine runs these; the child's copies
 * of their descriptors go, the events are the parent's (not touched). */
void
shim_park_forget_child(struct shim_listener *l)
{
	struct shim_parked *p, *next;
	struct shim_park_list *ls[3] = { &l->parked, &l->shaking, &l->waiting };
	int i;

	for (i = 0; i < 3; i++) {
		for (p = ls[i]->head; p != NULL; p = next) {
			next = p->next;
			if (p->fd >= 0 && (p->r == NULL || p->phase != SHIM_PARK_WAITING))
				shim_real.close(p->fd);
			free(p);
		}
		memset(ls[i], 0, sizeof(*ls[i]));
	}
	l->ev = l->retry = NULL;
	l->running = 0;
}

void
shim_park_forget_handed_child(void)
{
	struct shim_parked *p, *next;

	for (p = handed.head; p != NULL; p = next) {
		next = p->next;
		shim_real.close(p->uconn);
		free(p);
	}
	memset(&handed, 0, sizeof(handed));
}

void
shim_park_drop_handed(struct rock_engine *e, void *arg)
{
	struct shim_parked *p;

	(void)e;
	while ((p = handed.head) != NULL) {
		list_del(&handed, p);
		if (p->r != NULL)
			kill_rock(p->r);
		parked_free(p);
	}
	*(int *)arg = 1;
	shim_wake();
}
