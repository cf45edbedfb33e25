/* connect.c: connect(): keepalive options before the SYN; under ROCK_MODE=rock, the EDP. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rock_err.h"
#include "rock_probe_file.h"
#include "shim.h"

/* Only an unbound TCP socket to an IP address can become a rock: one the
 * program bound itself keeps its exact local address. */
static int
rockable(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct sockaddr_storage local;
	socklen_t llen = sizeof(local);
	unsigned entry = shim_fd_get(fd);

	if (!((addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) ||
	    (addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6))))
		return 0;

	/* Born under our socket() as TCP: no need to ask the kernel whether
	 * it is TCP, nor, unless it went through our bind(), whether it is
	 * bound. */
	if ((entry & SHIM_FD_BORN) && !(entry & SHIM_FD_BOUND))
		return !shim_listener_is_self(addr, len);
	if (!(entry & SHIM_FD_BORN) && !shim_fd_is_tcp(fd))
		return 0;
	if (shim_real.getsockname(fd, (struct sockaddr *)&local, &llen) != 0)
		return 0;
	/* This process's own served listener: one engine cannot be both
	 * ends of a rock. */
	return ((struct sockaddr_in *)&local)->sin_port == 0 &&
	    !shim_listener_is_self(addr, len);
}

/* Where to look for the enhanced twin of a destination (ROCK_PORT_MAP). */
static void
mapped(const struct rock_config *cfg, const struct sockaddr *addr,
    socklen_t len, struct sockaddr_storage *out)
{
	in_port_t *port = addr->sa_family == AF_INET6 ?
	    &((struct sockaddr_in6 *)out)->sin6_port :
	    &((struct sockaddr_in *)out)->sin_port;

	memcpy(out, addr, len);
	*port = htons(rock_port_mapped(cfg, ntohs(*port)));
}

struct attempt {
	struct shim_rock *r;
	int fd;
	struct sockaddr_storage addr, target;
	socklen_t len;
	int engine_touched;	/* rock_client_open ran: the loop is owed a wake */
	unsigned entry;		/* fd's table entry before it named a rock */
	/* An early connect's own copy of the program's socket: the number
	 * may be closed and reused while the handshake runs; -1: none. */
	int own;
	/* The program's bytes that went behind a CLIENT_EARLY whose
	 * resumption failed: the first on whatever connection comes next. */
	uint8_t *early;
	size_t nearly;
};

/* The program's socket, as the attempt holds it. */
static int
attempt_sock(const struct attempt *a)
{
	return a->own >= 0 ? a->own : a->fd;
}

static void
attempt_free(struct attempt *a)
{
	if (a->own >= 0)
		shim_real.close(a->own);
	if (a->early != NULL) {
		rock_wipe(a->early, a->nearly);
		free(a->early);
	}
	free(a);
}

static int
is_mapped(const struct attempt *a)
{
	return memcmp(&a->addr, &a->target, a->len) != 0;
}

static int
probe_budget_ms(const struct attempt *a)
{
	return rock_probe_budget_ms(shim_state()->cfg.probe_timeout_ms,
	    is_mapped(a));
}

/* Destinations found plain before the engine ever started; after that
 * the engine's probe cache remembers. Lock held. */
#define PLAIN_CACHE 16
#define PLAIN_CACHE_MS ROCK_PROBE_PLAIN_TTL_MS
static struct {
	struct sockaddr_storage addr;
	socklen_t len;
	int64_t expires_ms;
} plain_cache[PLAIN_CACHE];
static unsigned plain_next;

static int
known_plain(const struct sockaddr_storage *addr, socklen_t len)
{
	int64_t now = shim_now_ms();
	unsigned i;

	for (i = 0; i < PLAIN_CACHE; i++)
		if (plain_cache[i].len == len && plain_cache[i].expires_ms > now &&
		    memcmp(&plain_cache[i].addr, addr, len) == 0)
			return 1;
	return 0;
}

static void
remember_plain(const struct sockaddr_storage *addr, socklen_t len)
{
	unsigned i = plain_next++ % PLAIN_CACHE;

	memcpy(&plain_cache[i].addr, addr, len);
	plain_cache[i].len = len;
	plain_cache[i].expires_ms = shim_now_ms() + PLAIN_CACHE_MS;
}

/* The ticket the shared file holds for a destination just probed, if the
 * file's announcement is the probe's (a ticket outlives the file's
 * announcement: a probe that finds the same instance keeps it there). */
static void
file_ticket(struct rock_probe_file *pf, const struct rock_log *log,
    const struct sockaddr *to, socklen_t len, struct rock_probe_fact *f)
{
	struct rock_probe_fact g = { 0 };

	if (rock_probe_file_get(pf, log, to, len, &g) && g.has_ticket &&
	    memcmp(g.announcement, f->announcement, ROCK_ANNOUNCE_LEN) == 0) {
		f->has_ticket = 1;
		f->ticket = g.ticket;
	}
	rock_wipe(&g.ticket, sizeof(g.ticket));
}

/* The EDP without an engine: a program that only ever meets ordinary
 * servers gets no thread and no extra descriptor. What another process
 * of the user's found (the shared probe cache) is taken as this one's
 * own probe: the engine's cache then has it. 0: enhanced, and the
 * engine is running and knows it. */
static int
first_probe(struct attempt *a, struct rock_engine **e)
{
	const struct sockaddr *to = (struct sockaddr *)&a->target;
	struct rock_probe_file *pf = shim_probe_file();
	const struct shim_state *st = shim_state();
	struct rock_probe_fact f = { 0 };
	int rc, plain, silent;

	shim_lock();
	plain = known_plain(&a->target, a->len);
	shim_unlock();
	if (plain)
		return ROCK_ERR_NOT_ENHANCED;
	if (rock_probe_file_get(pf, &st->log, to, a->len, &f)) {
		if (!f.enhanced) {
			shim_lock();
			remember_plain(&a->target, a->len);
			shim_unlock();
			return ROCK_ERR_NOT_ENHANCED;
		}
		rlog_debug(&st->log, "fd %d: a rockd, by the shared probe cache",
		    a->fd);
		rc = 0;
	} else {
		rc = rock_probe(&st->log, to, a->len, probe_budget_ms(a),
		    is_mapped(a), f.announcement, &silent);
		if (rc == 0 || (rock_probe_found_plain(rc) && !silent)) {
			int err = errno;

			if (rc != 0) {
				shim_lock();
				remember_plain(&a->target, a->len);
				shim_unlock();
			}
			rock_probe_file_put(pf, &st->log, to, a->len,
			    rc == 0 ? f.announcement : NULL,
			    rc == 0 ? ROCK_PROBE_TTL_MS : PLAIN_CACHE_MS);
			/* The same instance as the file's: its ticket stayed. */
			if (rc == 0)
				file_ticket(pf, &st->log, to, a->len, &f);
			errno = err;
		}
	}
	if (rc == 0 && (*e = shim_engine()) == NULL)
		rc = ROCK_ERR_NOT_ENHANCED;
	if (rc == 0) {
		rock_probe_remember(*e, to, a->len, f.announcement);
		if (f.has_ticket)
			rock_ticket_remember(*e, to, a->len, &f.ticket);
	}
	rock_wipe(&f.ticket, sizeof(f.ticket));
	return rc;
}

/* The server's key is known, and what answered did not prove it: the
 * connect is refused, never made plain. */
static int
refused_for_trust(int rc)
{
	return rc == ROCK_ERR_KEY || rc == ROCK_ERR_UNVERIFIED;
}

/* rock ssh pinned us to a session rockd it remembered, and what answers
 * there did not prove its key: a replayed announcement, a port taken
 * over. The memo goes, so the next rock ssh starts a rockd of its own
 * rather than fail the same way for as long as the memo stays. */
static void
forget_ssh_memo(const struct shim_state *st)
{
	if (st->cfg.ssh_memo[0] == '\0' || unlink(st->cfg.ssh_memo) != 0)
		return;
	rlog_warn(&st->log, "the session rockd that rock ssh remembered did "
	    "not prove its key; %s removed: the next rock ssh starts another",
	    st->cfg.ssh_memo);
}

/* The EDP and handshake; 0 with r->s set, or why not. */
static int
open_rock(struct attempt *a)
{
	const struct shim_state *st = shim_state();
	struct rock_engine *e = shim_engine_running();
	int busy = shim_busy, rc = 0, err;

	shim_busy = 1;
	if (e == NULL)
		rc = first_probe(a, &e);
	if (rc == 0) {
		rc = rock_client_open(e, (struct sockaddr *)&a->target, a->len,
		    probe_budget_ms(a), shim_rock_cbs(), a->r, &a->r->s);
		a->engine_touched = 1;	/* its loop re-arms: woken at unlock */
	}
	err = errno;
	shim_busy = busy;
	if (rc != 0)
		rlog_debug(&st->log, "fd %d: no rock (%s%s%s); %s", a->fd,
		    rc == ROCK_ERR_TIMEOUT ? "timed out" : rock_err(rc),
		    rc == ROCK_ERR_SYSTEM ? ": " : "",
		    rc == ROCK_ERR_SYSTEM ? strerror(err) : "",
		    refused_for_trust(rc) ? "refused" : "plain TCP");
	if (refused_for_trust(rc))
		forget_ssh_memo(st);
	errno = err;
	return rc;
}

static struct attempt *
attempt_new(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct attempt *a = calloc(1, sizeof(*a));

	if (a == NULL)
		return NULL;
	shim_lock();
	a->r = shim_rock_new();
	shim_unlock();
	if (a->r == NULL) {
		free(a);
		return NULL;
	}
	a->fd = fd;
	a->own = -1;
	a->entry = shim_fd_get(fd);
	a->len = len;
	memcpy(&a->addr, addr, len);
	mapped(&shim_state()->cfg, addr, len, &a->target);
	memcpy(&a->r->peer, addr, len);
	a->r->peer_len = len;
	return a;
}

/* Lock held: the engine's loop must run for what the attempt did. */
static int
engine_owed(const struct attempt *a)
{
	struct rock_engine *e = shim_engine_running();

	return a->engine_touched &&
	    (e == NULL || rock_engine_loop_owed(e, a->r->s));
}

/* Lock held. No rock: the program's own connect runs after all, so its
 * outcome (refused, unreachable, timed out) is exactly TCP's. */
static void
go_plain(struct attempt *a)
{
	struct shim_rock *r = a->r;
	int busy = shim_busy;

	shim_rock_set_ready(r, 1);
	shim_busy = 1;
	if (shim_real.connect(a->fd, (struct sockaddr *)&a->addr, a->len) != 0 &&
	    errno != EINPROGRESS)
		r->so_error = errno;
	shim_busy = busy;
	shim_epoll_resume(r);
}

/* Lock not held. The program's early bytes, first on the plain
 * connection made instead (the server is no rock after all). 0 or errno. */
static int
early_resent_plain(struct attempt *a)
{
	struct pollfd p = { a->own, POLLOUT, 0 };
	size_t done = 0;
	ssize_t w;

	while (done < a->nearly) {
		w = shim_real.send(a->own, a->early + done, a->nearly - done,
		    MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w > 0)
			done += (size_t)w;
		else if (w < 0 && errno != EAGAIN && errno != EINTR)
			return errno;
		else if (shim_real.poll(&p, 1, -1) < 0 && errno != EINTR)
			return errno;
	}
	return 0;
}

/* Lock not held. After an early connect() returned 0 and its handshake
 * failed: the plain connection now, on the attempt's copy of the
 * program's socket, to its end (the program may have made it
 * non-blocking since). 0, or TCP's errno. */
static int
plain_behind(struct attempt *a)
{
	struct pollfd p = { a->own, POLLOUT, 0 };
	int busy = shim_busy, err = 0;
	socklen_t el = sizeof(err);

	shim_busy = 1;
	if (shim_real.connect(a->own, (struct sockaddr *)&a->addr, a->len) != 0)
		err = errno;
	while (err == EINPROGRESS || err == EINTR) {
		if (shim_real.poll(&p, 1, -1) < 0 && errno != EINTR)
			err = errno;
		else if (p.revents != 0 && shim_real.getsockopt(a->own, SOL_SOCKET,
		    SO_ERROR, &err, &el) != 0)
			err = errno;
	}
	if (err == 0)
		err = early_resent_plain(a);
	shim_busy = busy;
	return err;
}

/* Lock held. An early connect gone plain: what the program asked of
 * the connection meanwhile (a shutdown) is done to it now; a failure is
 * its next call's error, as on a connection that failed. */
static void
went_plain_behind(struct attempt *a, int err)
{
	struct shim_rock *r = a->r;

	if (err != 0 && err != EINPROGRESS)
		r->err = err;
	else if (r->rd_shut || r->wr_shut)
		shim_real.shutdown(a->own, r->rd_shut && r->wr_shut ? SHUT_RDWR :
		    r->rd_shut ? SHUT_RD : SHUT_WR);
	shim_rock_set_ready(r, 1);
	shim_epoll_resume(r);
	if (r->err != 0)
		shim_epoll_kick(r);
}

/* Lock held, the rock installed: the program's early bytes, refused by
 * the server, are the session's first, in its ring as written, and go by
 * a reconnect's replay (the server has counted none); with no room for
 * them, its next call fails. 0 or -1. */
static int
early_resent_rock(struct attempt *a)
{
	struct shim_rock *r = a->r;

	if (rock_direct_written(r->s, a->early, a->nearly) != 0) {
		r->err = ECONNRESET;
		shim_epoll_kick(r);
		return -1;
	}
	shim_rock_failed(r);
	return 0;
}

/* Lock held. The rock is the program's: under its descriptor, ready. A
 * shutdown asked while an early connect's handshake ran is done now. */
static void
settle_rock(struct attempt *a)
{
	struct shim_rock *r = a->r;

	/* The program's options are as at the connect: setsockopt on a
	 * returned connect waits for this (sockopt.c). */
	shim_opts_capture(r, attempt_sock(a), a->entry);
	shim_rock_install(r, attempt_sock(a), rock_direct_fd(r->s),
	    shim_opts_copy_needed(a->entry));
	r->finished_sent = 1;
	shim_rock_set_ready(r, 1);
	if (a->nearly > 0 && early_resent_rock(a) != 0)
		return;
	if (r->wr_shut) {
		/* With early bytes to replay, after the replay. */
		rock_direct_shutdown(r->s, a->nearly == 0);
		shim_post(r, SHIM_CMD_FINISH);
	}
	shim_epoll_resume(r);
	rlog_debug(&shim_state()->log, "fd %d: a rock", a->fd);
	shim_name_rock(a->fd, r->s, (struct sockaddr *)&a->addr, a->len);
}

/* Lock held. The rock's socket goes under the program's descriptor. */
static void
adopt(struct attempt *a)
{
	a->r->fds[0] = a->fd;
	a->r->nfds = 1;
	shim_rock_bind(a->fd, a->r);
	settle_rock(a);
}

/* Lock held. A connect() that returned 0 before its handshake was over:
 * the rock, or the plain connection plain_behind made (plain: its
 * outcome, -1 if it did not run), or the failure as the next call's
 * error. A refusal never becomes a plain connection. */
static void
settle_returned(struct attempt *a, int rc, int plain)
{
	struct shim_rock *r = a->r;

	if (rc == 0) {
		settle_rock(a);
	} else if (refused_for_trust(rc) || plain < 0) {
		r->err = refused_for_trust(rc) ? ECONNREFUSED : ECONNRESET;
		shim_rock_set_ready(r, 1);
		shim_epoll_resume(r);
		shim_epoll_kick(r);
	} else {
		went_plain_behind(a, plain);
	}
}

/* Lock held. A non-blocking connect() that said EINPROGRESS: the rock,
 * a refusal through SO_ERROR, or the program's own connect now. */
static void
settle_in_progress(struct attempt *a, int rc)
{
	struct shim_rock *r = a->r;

	if (rc == 0) {
		settle_rock(a);
	} else if (refused_for_trust(rc)) {
		r->so_error = ECONNREFUSED;
		shim_rock_set_ready(r, 1);
		shim_epoll_resume(r);
	} else {
		go_plain(a);
	}
}

/* Lock held. What the EDP gave (rc, r->s), made the program's; plain:
 * the plain connect's outcome if plain_behind ran it (-1: not run).
 * Frees a. */
static void
settle(struct attempt *a, int rc, int plain)
{
	struct shim_rock *r = a->r;

	if (engine_owed(a))
		shim_engine_wake_at_unlock();
	r->connecting = 0;
	/* The session may have ended between the handshake and now. */
	if (rc == 0 && r->s == NULL)
		rc = ROCK_ERR_RESET;
	if (r->released) {
		/* The program closed the descriptor meanwhile; its early
		 * bytes, refused, go on the rock made since (the plain
		 * connection made since has had them). */
		if (r->s != NULL) {
			r->nfds = 0;
			if (a->nearly > 0 &&
			    rock_direct_written(r->s, a->early, a->nearly) == 0)
				shim_post(r, SHIM_CMD_FAIL);
			shim_post(r, SHIM_CMD_RELEASE);
		} else {
			shim_rock_free(r);
		}
	} else if (r->returned) {
		settle_returned(a, rc, plain);
	} else {
		settle_in_progress(a, rc);
	}
	shim_wake_pollers();
	attempt_free(a);
}

static void *
connect_thread(void *arg)
{
	struct attempt *a = arg;
	int rc = open_rock(a), plain = -1, released;

	shim_lock();
	released = a->r->released;
	shim_unlock();
	/* No plain connection for a descriptor the program closed, unless
	 * it wrote early bytes the server refused: they were written. */
	if (rc != 0 && a->r->returned && !refused_for_trust(rc) &&
	    (!released || a->nearly > 0))
		plain = plain_behind(a);
	shim_lock();
	settle(a, rc, plain);
	shim_unlock();
	return NULL;
}

static int
start_thread(struct attempt *a)
{
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &attr, connect_thread, a);
	pthread_attr_destroy(&attr);
	return rc;
}

/* The engine's thread, lock held: an early connect's handshake is over.
 * Failed, the whole EDP runs again on a thread of its own (a refusal
 * read and proved, a probe, a full handshake, plain TCP), with the
 * program's early bytes the server refused to send first. */
static void
early_done(struct rock_engine *e, struct rock_session *s, int rc,
    const uint8_t *early, size_t nearly, void *arg)
{
	struct attempt *a = arg;

	(void)e;
	a->r->s = s;
	/* Bytes the program wrote behind it that the server refused, kept
	 * for what comes next, even if the program closed the descriptor
	 * meanwhile (they were written); with no memory to keep them, the
	 * connection fails (never a silent loss). Bytes whose fate is not
	 * known (ROCK_ERR_LOST) fail it too: no fallback, no second copy. */
	if (nearly > 0 && (a->early = malloc(nearly)) != NULL) {
		memcpy(a->early, early, nearly);
		a->nearly = nearly;
	} else if (nearly > 0) {
		rc = ROCK_ERR_LOST;
	}
	a->engine_touched = 1;
	/* A non-blocking write waiting for the early answer is told EAGAIN
	 * now (io.c), not kept through the whole fallback. */
	shim_wake();
	if (rc != 0 && rc != ROCK_ERR_LOST &&
	    (!a->r->released || a->nearly > 0) && start_thread(a) == 0)
		return;
	settle(a, rc, -1);
}

/* Lock held. A connect's rock that did not start: every number the
 * program gave it (a dup meanwhile) back to plain, r freed; 1 if the
 * program closed it meanwhile. */
static int
unwind(struct shim_rock *r)
{
	int i, released = r->released;

	for (i = 0; i < r->nfds; i++)
		if (shim_rock_of(r->fds[i]) == r)
			shim_rock_unbind(r->fds[i]);
	r->connecting = 0;
	r->nfds = 0;
	shim_rock_free(r);
	return released;
}

/* A rockd this engine met before, with a ticket from it: connect()
 * returns once TCP is up, and the engine's loop takes the answer. Until
 * then the rock is not ready: reads and writes wait (EAGAIN when
 * non-blocking), readiness is hidden. 1: not this way. */
static int
connect_early(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct rock_engine *e = shim_engine_running();
	struct attempt *a;
	int rc, busy = shim_busy, err, released;

	if (e == NULL || (a = attempt_new(fd, addr, len)) == NULL)
		return 1;
	shim_lock();
	if ((a->own = shim_real.fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) {
		shim_rock_free(a->r);
		shim_unlock();
		free(a);
		return 1;
	}
	a->r->connecting = a->r->returned = 1;
	a->r->fds[0] = fd;
	a->r->nfds = 1;
	shim_rock_bind(fd, a->r);
	shim_unlock();
	shim_busy = 1;
	rc = rock_early_start(e, (struct sockaddr *)&a->target, a->len,
	    shim_rock_cbs(), a->r, early_done, a, &a->r->early);
	err = errno;
	shim_busy = busy;
	if (rc == 0) {
		shim_engine_wake();	/* its loop takes the new wait */
		rlog_debug(&shim_state()->log, "fd %d: connected; the answer to "
		    "its resumption is read behind the connect", fd);
		return 0;
	}
	shim_lock();
	released = unwind(a->r);
	shim_unlock();
	attempt_free(a);
	if (released) {		/* another thread closed it meanwhile */
		errno = EBADF;
		return -1;
	}
	if (rc == ROCK_ERR_NOT_ENHANCED)
		return 1;
	rlog_debug(&shim_state()->log, "fd %d: no early rock (%s); %s", fd,
	    rock_err(rc), refused_for_trust(rc) ? "refused" : "plain TCP");
	if (refused_for_trust(rc)) {
		forget_ssh_memo(shim_state());
		errno = ECONNREFUSED;
		return -1;
	}
	errno = err;
	return shim_real.connect(fd, addr, len);
}

static int
connect_blocking(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct attempt *a;
	int rc;

	if ((rc = connect_early(fd, addr, len)) != 1)
		return rc;
	if ((a = attempt_new(fd, addr, len)) == NULL)
		return shim_real.connect(fd, addr, len);
	a->r->connecting = 1;
	rc = open_rock(a);
	shim_lock();
	if (engine_owed(a))
		shim_engine_wake_at_unlock();
	a->r->connecting = 0;
	if (rc == 0 && a->r->s == NULL)
		rc = ROCK_ERR_RESET;	/* ended between the handshake and now */
	if (rc == 0)
		adopt(a);
	else
		shim_rock_free(a->r);
	shim_unlock();
	free(a);
	/* A server that no longer proves the key known for it: refused,
	 * and no plain connection either, which anyone could be at. */
	if (refused_for_trust(rc)) {
		errno = ECONNREFUSED;
		return -1;
	}
	return rc == 0 ? 0 : shim_real.connect(fd, addr, len);
}

/* A destination without a route fails a non-blocking connect at once,
 * not later through SO_ERROR: a UDP socket's connect asks the routing
 * table the same question, without a packet. */
static int
unroutable(const struct sockaddr *addr, socklen_t len)
{
	int fd = shim_real.socket(addr->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int r;

	if (fd < 0)
		return 0;
	r = shim_real.connect(fd, addr, len) != 0 &&
	    (errno == ENETUNREACH || errno == EHOSTUNREACH || errno == EACCES ||
	    errno == EPERM);
	shim_real.close(fd);
	return r;
}

/* EINPROGRESS now; the descriptor turns writable when the EDP has given
 * a rock or the plain connect has finished (poll.c, epoll.c). */
static int
connect_async(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct attempt *a;
	int released;

	if (unroutable(addr, len) ||
	    (a = attempt_new(fd, addr, len)) == NULL)
		return shim_real.connect(fd, addr, len);
	shim_lock();
	a->r->connecting = 1;
	a->r->fds[0] = fd;
	a->r->nfds = 1;
	shim_rock_bind(fd, a->r);
	shim_unlock();
	if (start_thread(a) != 0) {
		shim_lock();
		released = unwind(a->r);
		shim_unlock();
		attempt_free(a);
		if (released) {	/* another thread closed it meanwhile */
			errno = EBADF;
			return -1;
		}
		return shim_real.connect(fd, addr, len);
	}
	errno = EINPROGRESS;
	return -1;
}

/* connect() again on a rock: what TCP says of a connection in that state. */
static int
connect_again(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct shim_rock *r;
	int err = 0;

	shim_lock();
	r = shim_rock_of(fd);
	if (r != NULL && r->connecting && !r->returned)
		err = EALREADY;
	else if (r != NULL && r->connecting)
		err = EISCONN;
	else if (r != NULL && r->s != NULL)
		err = EISCONN;
	else if (r != NULL && r->so_error != 0) {
		err = r->so_error;
		r->so_error = 0;
	}
	shim_unlock();
	if (err == 0)
		return shim_real.connect(fd, addr, len);
	errno = err;
	return -1;
}

SHIM_EXPORT int
connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	const struct shim_state *st = shim_state();
	int fl;

	if (shim_busy || !st->active || addr == NULL ||
	    len < sizeof(addr->sa_family))
		return shim_real.connect(fd, addr, len);
	if (shim_is_rock(fd))
		return connect_again(fd, addr, len);
	shim_ka_before_use(fd, addr->sa_family, "connect");
	if (st->cfg.mode != ROCK_MODE_ROCK || !rockable(fd, addr, len))
		return shim_real.connect(fd, addr, len);
	fl = shim_real.fcntl(fd, F_GETFL);
	if (fl >= 0 && (fl & O_NONBLOCK))
		return connect_async(fd, addr, len);
	return connect_blocking(fd, addr, len);
}
