/* rendezvous.c: a served rock's reconnect reaches the process that holds it, whoever listens on its port now (a server restarted while its rocks live on in its children's relay, in a keeper). */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/event.h>

#include <sodium.h>

#include "rock_ctl.h"
#include "rock_fdpass.h"
#include "shim.h"

/* Each process that serves rocks listens at run_dir/rdv.PID; each rock it
 * accepted on port P is named by a link run_dir/rdv.P.ID to that socket
 * (the runtime directory is the user's own, mode 700). A process that
 * holds no session for a reconnect follows the link, and hands the
 * connection and its request there. The socket is the engine's: a keeper
 * inherits it, with the rocks. */
static struct {
	int fd;
	struct event *ev;
	/* The loop's: a keeper runs them with no engine of its own started. */
	struct rock_engine *e;
	struct event_base *base;
	char path[PATH_MAX];
	int forwarded;		/* a forwarded request is being judged */
	int failed;		/* no rendezvous here: said once */
} rdv = { .fd = -1 };

/* A request forwarded to us, being read. */
struct rdv_conn {
	int u;
	struct event *ev;
	struct rdv_conn *next;
};
static struct rdv_conn *conns;

static int
entry_path(char *out, size_t len, int port, const uint8_t id[ROCK_ID_LEN])
{
	const char *dir = shim_state()->cfg.run_dir;
	char hex[2 * ROCK_ID_LEN + 1];
	int i, n;

	for (i = 0; i < ROCK_ID_LEN; i++)
		snprintf(hex + 2 * i, 3, "%02x", id[i]);
	n = snprintf(out, len, "%s/rdv.%d.%s", dir, port, hex);
	return n > 0 && (size_t)n < len ? 0 : -1;
}

static int
local_port(int fd)
{
	struct sockaddr_storage a;
	socklen_t len = sizeof(a);

	if (shim_real.getsockname(fd, (struct sockaddr *)&a, &len) != 0)
		return -1;
	return ntohs(a.ss_family == AF_INET ?
	    ((struct sockaddr_in *)&a)->sin_port :
	    ((struct sockaddr_in6 *)&a)->sin6_port);
}

static void
conn_free(struct rdv_conn *c)
{
	struct rdv_conn **pp;

	for (pp = &conns; *pp != NULL; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	event_free(c->ev);
	shim_real.close(c->u);
	free(c);
}

/* The request and its connection, from the process that got them. */
static void
on_forwarded(evutil_socket_t u, short what, void *arg)
{
	struct rdv_conn *c = arg;
	uint8_t req[ROCK_RECONNECT_REQ_LEN];
	struct rock_engine *e;
	ssize_t n;
	int fd;

	(void)what;
	n = rock_fd_recv(u, req, sizeof(req), &fd, NULL);
	if (n < 0 && errno == EAGAIN)
		return;
	shim_lock();
	e = rdv.e;
	if (fd >= 0)
		shim_fd_set(fd, SHIM_FD_UNKNOWN, 0);
	if (fd >= 0 && n == (ssize_t)sizeof(req)) {
		rlog_info(&shim_state()->log, "a reconnect for a rock of ours, "
		    "from the process now listening on its port");
		/* Judged here; never forwarded again. */
		rdv.forwarded = 1;
		rock_server_reconnect(e, fd, req, sizeof(req));
		rdv.forwarded = 0;
	} else if (fd >= 0) {
		shim_real.close(fd);
	}
	conn_free(c);
	shim_unlock();
}

static void
on_rdv(evutil_socket_t fd, short what, void *arg)
{
	struct rdv_conn *c;
	struct ucred cred;
	socklen_t clen;
	int u;

	(void)what;
	(void)arg;
	shim_lock();
	while ((u = shim_real.accept4(fd, NULL, NULL,
	    SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		clen = sizeof(cred);
		/* The user's own processes hand us connections, no one else. */
		if (shim_real.getsockopt(u, SOL_SOCKET, SO_PEERCRED, &cred,
		    &clen) != 0 || (cred.uid != geteuid() && cred.uid != 0) ||
		    (c = calloc(1, sizeof(*c))) == NULL) {
			shim_real.close(u);
			continue;
		}
		c->u = u;
		c->ev = event_new(rdv.base, u, EV_READ | EV_PERSIST,
		    on_forwarded, c);
		if (c->ev == NULL || event_add(c->ev, NULL) != 0) {
			if (c->ev != NULL)
				event_free(c->ev);
			shim_real.close(u);
			free(c);
			continue;
		}
		c->next = conns;
		conns = c;
	}
	shim_unlock();
}

/* A connection for a live holder that could not be handed over now. */
static int
reset(int fd)
{
	rock_close_reset(fd);
	return 1;
}

/* The engine's thread, lock held: where the reconnect for id goes. */
static int
stray(void *arg, int fd, const uint8_t *req, size_t len,
    const uint8_t id[ROCK_ID_LEN])
{
	char entry[PATH_MAX], to[PATH_MAX];
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	ssize_t n;
	int u;

	(void)arg;
	if (rdv.forwarded || entry_path(entry, sizeof(entry), local_port(fd),
	    id) != 0 || (n = readlink(entry, to, sizeof(to) - 1)) <= 0 ||
	    (size_t)n >= sizeof(sun.sun_path))
		return 0;
	to[n] = '\0';
	if (strcmp(to, rdv.path) == 0)
		return 0;
	memcpy(sun.sun_path, to, (size_t)n + 1);
	u = shim_real.socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0);
	if (u < 0)
		return 0;
	if (shim_real.connect(u, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
		/* Nobody holds it any more: the link goes, and the session
		 * is unknown. Else the holder lives: a reset, which its
		 * client takes for one failed attempt. */
		int gone = errno == ECONNREFUSED || errno == ENOENT;

		shim_real.close(u);
		if (gone) {
			(void)unlink(entry);
			return 0;
		}
		return reset(fd);
	}
	n = rock_fd_send(u, req, len, fd);
	shim_real.close(u);
	if (n != (ssize_t)len)
		return reset(fd);
	rlog_info(&shim_state()->log, "a reconnect for a rock another process "
	    "holds: handed to %s", to);
	shim_real.close(fd);
	return 1;
}

/* The engine's thread: this process serves rocks; listen for the
 * reconnects of its rocks that reach another process. */
void
shim_rdv_start(struct rock_engine *e)
{
	const struct shim_state *st = shim_state();
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int n;

	uint32_t nonce;

	if (rdv.fd >= 0 || rdv.failed || st->cfg.run_dir[0] == '\0')
		return;
	/* Never another's name: an exec keeps the pid, and a keeper may
	 * still answer at the old image's. */
	randombytes_buf(&nonce, sizeof(nonce));
	n = snprintf(rdv.path, sizeof(rdv.path), "%s/rdv.%ld.%08x",
	    st->cfg.run_dir, (long)getpid(), (unsigned)nonce);
	if (n <= 0 || (size_t)n >= sizeof(sun.sun_path) ||
	    rock_ctl_check(rdv.path, ROCK_CTL_MKDIR) != 0) {
		/* A directory another user could write: no rendezvous. */
		rlog_warn(&st->log, "%s: %s; a served rock's reconnect that "
		    "reaches another process on its port will be refused",
		    rdv.path, n > 0 && (size_t)n < sizeof(sun.sun_path) ?
		    rock_ctl_strerror(errno) : "path too long");
		rdv.path[0] = '\0';
		rdv.failed = 1;
		return;
	}
	memcpy(sun.sun_path, rdv.path, (size_t)n + 1);
	rdv.e = e;
	rdv.base = shim_engine_base();
	rdv.fd = shim_real.socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0);
	if (rdv.fd < 0 || shim_real.bind(rdv.fd, (struct sockaddr *)&sun,
	    sizeof(sun)) != 0 || shim_real.listen(rdv.fd, 64) != 0 ||
	    (rdv.ev = event_new(rdv.base, rdv.fd,
	    EV_READ | EV_PERSIST, on_rdv, NULL)) == NULL ||
	    event_add(rdv.ev, NULL) != 0) {
		rlog_warn(&st->log, "%s: %s; a served rock's reconnect that "
		    "reaches another process on its port will be refused",
		    rdv.path, strerror(errno));
		if (rdv.ev != NULL)
			event_free(rdv.ev);
		rdv.ev = NULL;
		if (rdv.fd >= 0)
			shim_real.close(rdv.fd);
		rdv.fd = -1;
		rdv.path[0] = '\0';
		rdv.failed = 1;
		return;
	}
	rock_engine_set_stray(e, stray, NULL);
}

/* Lock held: an accepted rock, on its listener's port (lfd; -1: its
 * connection's), names us. */
void
shim_rdv_register(struct shim_rock *r, int lfd)
{
	char entry[PATH_MAX];
	int port;

	if (rdv.fd < 0 || r->s == NULL ||
	    (port = local_port(lfd >= 0 ? lfd : rock_direct_fd(r->s))) <= 0 ||
	    entry_path(entry, sizeof(entry), port,
	    rock_session_id(r->s)) != 0)
		return;
	(void)unlink(entry);
	if (symlink(rdv.path, entry) == 0)
		r->rdv_port = port;
}

/* Lock held: the rock ended. */
void
shim_rdv_forget(struct shim_rock *r, struct rock_session *s)
{
	char entry[PATH_MAX];

	if (r->rdv_port > 0 && entry_path(entry, sizeof(entry), r->rdv_port,
	    rock_session_id(s)) == 0)
		(void)unlink(entry);
	r->rdv_port = 0;
}

/* The keeper keeps the socket and what it is reading. */
int
shim_rdv_owns_fd(int fd)
{
	const struct rdv_conn *c;

	if (fd < 0)
		return 0;
	for (c = conns; c != NULL; c = c->next)
		if (c->u == fd)
			return 1;
	return fd == rdv.fd;
}

/* A fork's child: the socket is the parent's engine's (its events too,
 * not touched here). */
void
shim_rdv_child(void)
{
	struct rdv_conn *c, *next;

	for (c = conns; c != NULL; c = next) {
		next = c->next;
		shim_real.close(c->u);
		free(c);
	}
	conns = NULL;
	if (rdv.fd >= 0)
		shim_real.close(rdv.fd);
	rdv.fd = -1;
	rdv.ev = NULL;
	rdv.path[0] = '\0';
}

/* The socket's name goes with the last process that answers there (the
 * program without a keeper, or its keeper). */
void
shim_rdv_unlink(void)
{
	if (rdv.path[0] != '\0')
		(void)unlink(rdv.path);
}
