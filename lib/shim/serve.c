/* serve.c: a listener under ROCK_MODE=rock accepts rocks: in accept(), probes are answered, rocks told from plain clients, reconnects routed to their rock. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rock_err.h"
#include "rock_key.h"
#include "shim.h"

/* The server's key: rockd's file, made on first use; 1 loaded, -1 none
 * (the listeners stay plain). Lock held. */
static int key_state;

static int
load_key(struct rock_engine *e)
{
	const struct shim_state *st = shim_state();
	char path[PATH_MAX], err[PATH_MAX + 128];
	struct rock_identity id;
	int created;

	if (rock_key_default_path(path, sizeof(path)) != 0) {
		rlog_warn(&st->log, "no home directory for the server key "
		    "(HOME, XDG_STATE_HOME): accepted connections stay plain TCP");
		return -1;
	}
	if (rock_key_load(path, 1, &id, &created, err, sizeof(err)) != 0) {
		rlog_warn(&st->log, "server key file %s: accepted connections "
		    "stay plain TCP", err);
		return -1;
	}
	if (created)
		rlog_info(&st->log, "created the server key %s", path);
	rock_engine_set_identity(e, &id);
	return 1;
}

/* The engine with the server's identity, or NULL: serve nothing. */
struct rock_engine *
shim_server_engine(void)
{
	struct rock_engine *e = shim_engine();
	int ok;

	if (e == NULL)
		return NULL;
	shim_lock();
	if (key_state == 0)
		key_state = load_key(e);
	ok = key_state == 1;
	shim_unlock();
	return ok ? e : NULL;
}

/* The first bytes, left in the socket, as rockd reads them: a client
 * that says nothing for the first-bytes time is a plain client of a
 * server-speaks-first protocol. */
static enum rock_sniff
sniff(int fd, uint8_t buf[ROCK_MAGIC_LEN], size_t *have, int *rtt_ms)
{
	int64_t until = shim_now_ms() + rock_first_bytes_ms(fd,
	    ROCK_FIRST_BYTES_MS, rtt_ms), left;
	struct pollfd p = { fd, POLLIN, 0 };
	enum rock_sniff kind;

	while ((kind = rock_sniff_read(fd, buf, have, 1)) == ROCK_SNIFF_MORE) {
		if ((left = until - shim_now_ms()) <= 0)
			return ROCK_SNIFF_PLAIN;
		/* A peeked prefix keeps the socket readable: wait a little. */
		if (*have > 0)
			(void)shim_real.poll(NULL, 0, left < 5 ? (int)left : 5);
		else
			(void)shim_real.poll(&p, 1, (int)left);
	}
	return kind;
}

/* A rock's hello on its way to the engine's thread, and what came of it. */
struct serve {
	struct shim_call call;
	int fd;
	uint8_t early[ROCK_MAGIC_LEN];
	size_t nearly;
	int rtt_ms;		/* TCP's round trip, or -1 */
	struct shim_rock *r;
	int done;		/* 1: r->s is the session; -1: none */
};

/* The engine's thread, lock held. */
static void
on_hello(struct rock_handshake *hs, void *arg)
{
	struct serve *sv = arg;

	sv->done = hs != NULL && rock_handshake_accept(hs, shim_rock_cbs(),
	    sv->r, &sv->r->s) == 0 ? 1 : -1;
	shim_wake();
}

static void
start_handshake(struct rock_engine *e, void *arg)
{
	struct serve *sv = arg;

	shim_rdv_start(e);
	rock_server_handshake(e, sv->fd, sv->early, sv->nearly, sv->rtt_ms,
	    on_hello, sv);
}

static void
start_reconnect(struct rock_engine *e, void *arg)
{
	struct serve *sv = arg;

	rock_server_reconnect(e, sv->fd, sv->early, sv->nearly);
	free(sv);
}

void
shim_rock_adopt(struct shim_rock *r, int pfd, int lfd)
{
	int fd = rock_direct_fd(r->s);

	r->fds[0] = pfd;
	r->nfds = 1;
	r->accepted = 1;
	if (r->peer_len == 0) {
		r->peer_len = sizeof(r->peer);
		if (shim_real.getpeername(fd, (struct sockaddr *)&r->peer,
		    &r->peer_len) != 0)
			r->peer_len = 0;
	}
	shim_opts_capture(r, pfd, shim_fd_get(pfd));
	/* What the program's own accepted socket would say: the listener's
	 * (accept inherits it), not the bound the engine put on its own. */
	if (r->opts.rto_max >= 0 && lfd >= 0)
		r->opts.rto_max = shim_getsockopt_int(lfd,
		    IPPROTO_TCP, TCP_RTO_MAX_MS);
	shim_rock_bind(pfd, r);
	shim_rdv_register(r, lfd);
	/* A reconnect may be under way: it installs its connection here. */
	shim_rock_set_ready(r, rock_session_state(r->s) == ROCK_ST_CONNECTED);
	rlog_debug(&shim_state()->log, "fd %d: an accepted rock", pfd);
}

/* Lock held. The program's descriptor for the accepted rock: its own
 * number on the engine's connection, which a reconnect replaces. */
static int
adopt(struct shim_rock *r, int lfd, int flags)
{
	int pfd = shim_real.fcntl(rock_direct_fd(r->s), (flags & SOCK_CLOEXEC) ?
	    F_DUPFD_CLOEXEC : F_DUPFD, 0);

	if (pfd < 0)
		return -1;
	shim_rock_adopt(r, pfd, lfd);
	return pfd;
}

/* The engine reads the rest of the hello, answers it and waits for the
 * client's FINISHED; the program's accept() waits for that (the engine
 * bounds each: handshake_timeout_ms). */
static int
handshake(struct serve *sv, int lfd, int flags)
{
	struct shim_rock *r;
	int pfd = -1;

	shim_lock();
	if ((r = sv->r = shim_rock_new()) == NULL) {
		shim_unlock();
		shim_real.close(sv->fd);
		return -1;
	}
	sv->call.fn = start_handshake;
	sv->call.arg = sv;
	shim_engine_call(&sv->call);
	/* Accepted, the rock waits for the client's FINISHED: the program
	 * gets the connection once it carries the client's bytes. */
	while (sv->done == 0 ||
	    (sv->done > 0 && r->s != NULL && rock_session_unproven(r->s)))
		(void)shim_wait(-1);
	if (sv->done > 0 && r->s != NULL && (pfd = adopt(r, lfd, flags)) < 0) {
		/* The client's rock never reached the program: a reset, not
		 * the reliable close's clean end after 0 bytes. */
		r->nfds = 0;
		r->kill_at_release = 1;
		shim_post(r, SHIM_CMD_RELEASE);
		r->released = 1;
	} else if (pfd < 0) {
		shim_rock_free(r);
	}
	shim_unlock();
	return pfd;
}

/* EDP step 1c: the announcement, then the connection ends. */
static void
answer_probe(struct rock_engine *e, int fd)
{
	(void)shim_real.send(fd, rock_engine_announcement(e), ROCK_ANNOUNCE_LEN,
	    MSG_NOSIGNAL | MSG_DONTWAIT);
	shim_real.close(fd);
}

static int
serve(struct rock_engine *e, int lfd, int fd, int flags)
{
	struct serve sv = { .fd = fd }, *rc;
	enum rock_sniff kind = sniff(fd, sv.early, &sv.nearly, &sv.rtt_ms);

	if (kind == ROCK_SNIFF_PLAIN)
		return fd;
	/* From here the connection is the engine's, not the program's: no
	 * program it execs inherits it (accept's flags were the program's). */
	shim_fd_set(fd, SHIM_FD_UNKNOWN, 0);
	(void)shim_real.fcntl(fd, F_SETFD, FD_CLOEXEC);
	if (kind == ROCK_SNIFF_PROBE) {
		rlog_debug(&shim_state()->log, "fd %d: an EDP probe: announced",
		    fd);
		answer_probe(e, fd);
		return -1;
	}
	/* The peeked magic, taken now for the engine's reader. */
	if (shim_real.recv(fd, sv.early, sv.nearly, MSG_DONTWAIT) !=
	    (ssize_t)sv.nearly) {
		shim_real.close(fd);
		return -1;
	}
	if (kind == ROCK_SNIFF_ANNOUNCE)
		return handshake(&sv, lfd, flags);
	if ((rc = malloc(sizeof(*rc))) == NULL) {
		shim_real.close(fd);
		return -1;
	}
	*rc = sv;
	rlog_debug(&shim_state()->log, "fd %d: a reconnect: to the engine", fd);
	rc->call.fn = start_reconnect;
	rc->call.arg = rc;
	shim_lock();
	shim_engine_call(&rc->call);
	shim_unlock();
	return -1;
}

int
shim_serve(int lfd, int fd, int flags)
{
	struct rock_engine *e;
	int busy = shim_busy, r, err = errno, cancel;

	/* A thread cancelled in the wait for a hello would leave the lock
	 * held and the engine writing to its stack: not a cancellation
	 * point here, as the shim's other waits are not. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	shim_busy = 1;
	e = shim_server_engine();
	r = e == NULL ? fd : serve(e, lfd, fd, flags);
	shim_busy = busy;
	pthread_setcancelstate(cancel, NULL);
	errno = err;
	return r;
}
