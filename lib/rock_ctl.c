/* rock_ctl.c: an engine's control socket: lists its rocks and kills one, for its owner's user only. */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "rock_ctl.h"
#include "rock_engine_int.h"
#include "rock_known.h"
#include "rock_sys.h"

/* Clients served at once: more are turned away, not queued in memory. */
#define CTL_CONNS 8
#define CTL_PROGRAM_MAX 64

struct ctl_conn {
	struct rock_ctl *c;
	int fd;
	char req[ROCK_CTL_REQ_MAX + 1];
	size_t have;
	struct evbuffer *out;		/* NULL: still reading the request */
	struct event *ev;
	/* Workers: once out is written, the connection goes on to this
	 * worker with the request and the rows so far (-1: it closes). */
	int pass_to;
	int out_done;			/* out was written whole */
	unsigned long rows;
	struct ctl_conn *next, **pprev;
};

struct rock_ctl {
	struct rock_engine *e;
	int fd;
	int bound;			/* the name is ours */
	struct event *ev;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char program[CTL_PROGRAM_MAX];
	rock_ctl_backend_fn *backend;
	void *arg;
	struct ctl_conn *conns;
	size_t nconns;
	int worker, workers;		/* workers: ours and how many (1: none) */
	rock_ctl_pass_fn *pass;
	void *pass_arg;
};

int
rock_ctl_path(const char *dir, long pid, char *out, size_t len)
{
	int w = snprintf(out, len, "%s/%s%ld", dir, ROCK_CTL_PREFIX, pid);

	return w < 0 || (size_t)w >= len ? -1 : 0;
}

/* The directory of path into dir; -1 (ENAMETOOLONG) if it has none. */
static int
parent_dir(const char *path, char dir[PATH_MAX])
{
	char *slash;

	if (snprintf(dir, PATH_MAX, "%s", path) >= PATH_MAX ||
	    (slash = strrchr(dir, '/')) == NULL) {
		errno = ENAMETOOLONG;
		return -1;
	}
	slash[slash == dir ? 1 : 0] = '\0';
	return 0;
}

int
rock_ctl_check(const char *path, unsigned flags)
{
	char dir[PATH_MAX];
	struct stat st;

	if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if (parent_dir(path, dir) != 0 ||
	    ((flags & ROCK_CTL_MKDIR) && rock_mkdir_parents(path) != 0) ||
	    lstat(dir, &st) != 0)
		return -1;
	if (!S_ISDIR(st.st_mode)) {
		errno = ENOTDIR;
		return -1;
	}
	/* Under /tmp anyone could have made it first. */
	if ((st.st_uid != geteuid() && st.st_uid != 0) || (st.st_mode & 022) != 0) {
		errno = EPERM;
		return -1;
	}
	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISSOCK(st.st_mode)) {
		errno = ENOTSOCK;
		return -1;
	}
	return 0;
}

const char *
rock_ctl_strerror(int err)
{
	switch (err) {
	case ENOENT:
		return "its directory does not exist";
	case ENOTDIR:
		return "its directory is not a directory";
	case EPERM:
		return "its directory must belong to this user (or root) and "
		    "not be group- or other-writable";
	case ENOTSOCK:
		return "exists and is not a socket (left alone)";
	case EADDRINUSE:
		return "in use by another process";
	case ENAMETOOLONG:
		return "path too long for a unix socket";
	default:
		return strerror(err);
	}
}

/* The name free for bind: a socket nobody answers on (a dead process's)
 * is removed; a live one is refused, unless taking over from it. */
static int
claim_name(const char *path, unsigned flags)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, r, err;

	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : -1;
	if (!(flags & ROCK_CTL_TAKEOVER)) {
		memcpy(sun.sun_path, path, strlen(path));
		if ((fd = rock_sys.socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK |
		    SOCK_CLOEXEC, 0)) < 0)
			return -1;
		r = rock_sys.connect(fd, (struct sockaddr *)&sun, sizeof(sun));
		err = errno;
		rock_sys.close(fd);
		/* EAGAIN: its backlog is full, so it is alive. */
		if (r == 0 || err == EAGAIN) {
			errno = EADDRINUSE;
			return -1;
		}
		if (err != ECONNREFUSED) {
			errno = err;
			return -1;
		}
	}
	return unlink(path) == 0 || errno == ENOENT ? 0 : -1;
}

/* Printable and tab-free, so a row always has its fields. */
static void
clean(char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
}

static void
peer_text(const struct rock_session *s, char out[ROCK_DEST_TEXT_LEN])
{
	struct sockaddr_in6 v6;
	struct sockaddr_in v4;

	if (s->peer_len == 0) {
		snprintf(out, ROCK_DEST_TEXT_LEN, "-");
		return;
	}
	memcpy(&v6, &s->peer, sizeof(v6));
	if (s->peer.ss_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&v6.sin6_addr)) {
		memset(&v4, 0, sizeof(v4));
		v4.sin_family = AF_INET;
		v4.sin_port = v6.sin6_port;
		memcpy(&v4.sin_addr, &v6.sin6_addr.s6_addr[12], 4);
		rock_dest_text((struct sockaddr *)&v4, sizeof(v4), out);
		return;
	}
	rock_dest_text((const struct sockaddr *)&s->peer, s->peer_len, out);
}

/* When (wall clock, ms since the epoch) a monotonic instant was. */
static int64_t
wall_ms(int64_t mono_ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 -
	    (rock_now_ms() - mono_ms);
}

static void
row(struct rock_ctl *c, struct rock_session *s, struct evbuffer *out)
{
	char peer[ROCK_DEST_TEXT_LEN], backend[128] = "-";

	peer_text(s, peer);
	if (c->backend != NULL)
		c->backend(s, backend, sizeof(backend), c->arg);
	clean(backend);
	evbuffer_add_printf(out, "%s\t%s\t%ld\t%s\t%s\t%s\t%s\t%lld\t%lu\t"
	    "%llu\t%zu\t%d\n", s->name, c->program, (long)getpid(),
	    s->role == ROCK_ROLE_CLIENT ? "client" : "server", peer, backend,
	    rock_state_name(s->state), (long long)wall_ms(s->state_since_ms),
	    (unsigned long)s->reconnects,
	    (unsigned long long)rock_session_unacked(s), s->ring.cap,
	    s->rtt_ms);
}

/* Our rows; the last worker (or a lone engine) ends the list with the
 * count of every worker's. */
static void
list(struct rock_ctl *c, struct ctl_conn *k, struct evbuffer *out)
{
	struct rock_session *s;

	for (s = c->e->all; s != NULL; s = s->next) {
		if (s->state == ROCK_ST_CLOSED)
			continue;
		row(c, s, out);
		k->rows++;
	}
	if (c->worker + 1 < c->workers)
		k->pass_to = c->worker + 1;
	else
		evbuffer_add_printf(out, "end %lu\n", k->rows);
}

/* Workers: the worker an id names (byte ROCK_ID_WORKER, hex digits 2 and
 * 3 of the name), or -1 for ours or none. */
static int
id_worker(const struct rock_ctl *c, const char *id)
{
	unsigned w;

	if (c->workers <= 1 || strlen(id) < 4 ||
	    sscanf(id + 2 * ROCK_ID_WORKER, "%2x", &w) != 1 ||
	    (int)w == c->worker || (int)w >= c->workers)
		return -1;
	return (int)w;
}

static void
kill_one(struct rock_ctl *c, const char *id, struct evbuffer *out)
{
	struct rock_session *s, *found = NULL;
	int n = 0;

	for (s = c->e->all; s != NULL; s = s->next)
		if (s->state != ROCK_ST_CLOSED && strcmp(s->name, id) == 0) {
			found = s;
			n++;
		}
	if (n == 0) {
		evbuffer_add_printf(out, "error no rock %s here\n", id);
		return;
	}
	/* A name is an id's first 4 bytes; a fleet's node and a worker's
	 * number take two of them, so two rocks may share one. */
	if (n > 1) {
		evbuffer_add_printf(out, "error %d rocks here are named %s; "
		    "none killed\n", n, id);
		return;
	}
	s = found;
	rlog_info(c->e->log, "rock %s: killed (rock kill)", s->name);
	rock_session_kill(s, "killed (rock kill)");
	evbuffer_add_printf(out, "ok\n");
}

static void
answer(struct rock_ctl *c, struct ctl_conn *k, const char *req,
    struct evbuffer *out)
{
	if (strcmp(req, "ls") == 0) {
		list(c, k, out);
	} else if (strncmp(req, "kill ", 5) == 0 && strlen(req + 5) > 0 &&
	    strlen(req + 5) < sizeof(((struct rock_session *)0)->name) &&
	    strspn(req + 5, "0123456789abcdef") == strlen(req + 5)) {
		/* Another worker's rock: that worker answers. */
		if ((k->pass_to = id_worker(c, req + 5)) < 0)
			kill_one(c, req + 5, out);
	} else {
		evbuffer_add_printf(out, "error unknown request (want \"ls\" or "
		    "\"kill ID\")\n");
	}
}

void
rock_ctl_answer(struct rock_ctl *c, const char *req, struct evbuffer *out)
{
	struct ctl_conn k;

	memset(&k, 0, sizeof(k));
	k.pass_to = -1;
	answer(c, &k, req, out);
}

static void
conn_free(struct ctl_conn *k)
{
	if (k->ev != NULL)
		event_free(k->ev);
	if (k->out != NULL)
		evbuffer_free(k->out);
	/* Written whole: the next worker takes the connection on. */
	if (k->pass_to >= 0 && k->out_done)
		k->c->pass(k->c->pass_arg, k->fd, k->req, k->rows, k->pass_to);
	else
		rock_sys.close(k->fd);
	if (k->next != NULL)
		k->next->pprev = k->pprev;
	*k->pprev = k->next;
	k->c->nconns--;
	free(k);
}

static void on_conn(evutil_socket_t fd, short what, void *arg);

static int
conn_arm(struct ctl_conn *k, short what)
{
	const struct timeval tv = { ROCK_CTL_TIMEOUT_S, 0 };

	if (k->ev != NULL)
		event_free(k->ev);
	k->ev = event_new(k->c->e->base, k->fd, what | EV_PERSIST, on_conn, k);
	return k->ev == NULL || event_add(k->ev, &tv) != 0 ? -1 : 0;
}

/* A whole line, or too long: the answer, under the owner's lock. */
static int
conn_request(struct ctl_conn *k)
{
	char *nl = memchr(k->req, '\n', k->have);

	if (nl == NULL && k->have < ROCK_CTL_REQ_MAX)
		return 0;
	if ((k->out = evbuffer_new()) == NULL)
		return -1;
	if (nl == NULL) {
		evbuffer_add_printf(k->out, "error request longer than %d "
		    "bytes\n", ROCK_CTL_REQ_MAX);
	} else {
		*nl = '\0';
		rock_engine_enter(k->c->e);
		answer(k->c, k, k->req, k->out);
		rock_engine_leave(k->c->e);
	}
	return conn_arm(k, EV_WRITE);
}

static void
on_conn(evutil_socket_t fd, short what, void *arg)
{
	struct ctl_conn *k = arg;
	ssize_t n;

	if (what & EV_TIMEOUT)
		goto out;
	if (k->out == NULL) {
		n = rock_sys.recv(fd, k->req + k->have, ROCK_CTL_REQ_MAX - k->have, 0);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0)
			goto out;
		k->have += (size_t)n;
		if (conn_request(k) != 0)
			goto out;
		return;
	}
	if (evbuffer_get_length(k->out) > 0 && evbuffer_write(k->out, fd) < 0 &&
	    errno != EAGAIN && errno != EINTR)
		goto out;
	if (evbuffer_get_length(k->out) > 0)
		return;
	k->out_done = 1;
out:
	conn_free(k);
}

static int
peer_is_owner(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	return rock_sys.getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 &&
	    cr.uid == geteuid();
}

/* A connection being answered; NULL (fd closed) past the bound. */
static struct ctl_conn *
conn_new(struct rock_ctl *c, int fd)
{
	struct ctl_conn *k;

	if (c->nconns >= CTL_CONNS || (k = calloc(1, sizeof(*k))) == NULL) {
		rock_sys.close(fd);
		return NULL;
	}
	k->c = c;
	k->fd = fd;
	k->pass_to = -1;
	k->next = c->conns;
	if (k->next != NULL)
		k->next->pprev = &k->next;
	k->pprev = &c->conns;
	c->conns = k;
	c->nconns++;
	return k;
}

static void
on_accept(evutil_socket_t lfd, short what, void *arg)
{
	static const char refused[] = "error not your rocks\n";
	struct rock_ctl *c = arg;
	struct ctl_conn *k;
	int fd;

	(void)what;
	if ((fd = rock_sys_aside(rock_sys.accept4(lfd, NULL, NULL,
	    SOCK_NONBLOCK | SOCK_CLOEXEC))) < 0)
		return;
	if (!peer_is_owner(fd)) {
		(void)!rock_sys.send(fd, refused, sizeof(refused) - 1, MSG_NOSIGNAL);
		rock_sys.close(fd);
		return;
	}
	if ((k = conn_new(c, fd)) != NULL && conn_arm(k, EV_READ) != 0)
		conn_free(k);
}

void
rock_ctl_continue(struct rock_ctl *c, int fd, const char *req,
    unsigned long rows)
{
	struct ctl_conn *k = conn_new(c, fd);

	if (k == NULL)
		return;
	snprintf(k->req, sizeof(k->req), "%s", req);
	k->have = strlen(k->req);
	k->rows = rows;
	if ((k->out = evbuffer_new()) == NULL) {
		conn_free(k);
		return;
	}
	rock_engine_enter(c->e);
	answer(c, k, k->req, k->out);
	rock_engine_leave(c->e);
	if (conn_arm(k, EV_WRITE) != 0)
		conn_free(k);
}

static int
ctl_listen(struct rock_ctl *c, unsigned flags)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };

	memcpy(sun.sun_path, c->path, sizeof(sun.sun_path));
	if ((c->fd = rock_sys_aside(rock_sys.socket(AF_UNIX,
	    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0))) < 0)
		return -1;
	if (claim_name(c->path, flags) != 0)
		return -1;
	/* The directory is private: the moment before chmod exposes nothing. */
	if (rock_sys.bind(c->fd, (struct sockaddr *)&sun, sizeof(sun)) != 0)
		return -1;
	c->bound = 1;
	if (chmod(c->path, 0600) != 0 || rock_sys.listen(c->fd, CTL_CONNS) != 0)
		return -1;
	c->ev = event_new(c->e->base, c->fd, EV_READ | EV_PERSIST, on_accept, c);
	return c->ev == NULL || event_add(c->ev, NULL) != 0 ? -1 : 0;
}

int
rock_ctl_open(struct rock_engine *e, const char *path, const char *program,
    rock_ctl_backend_fn *backend, void *arg, unsigned flags,
    struct rock_ctl **out)
{
	struct rock_ctl *c;
	int err;

	*out = NULL;
	if ((path != NULL && rock_ctl_check(path, flags) != 0) ||
	    (c = calloc(1, sizeof(*c))) == NULL)
		return -1;
	c->e = e;
	c->fd = -1;
	c->workers = 1;
	snprintf(c->path, sizeof(c->path), "%s", path != NULL ? path : "");
	snprintf(c->program, sizeof(c->program), "%s", program);
	clean(c->program);
	c->backend = backend;
	c->arg = arg;
	if (path != NULL && ctl_listen(c, flags) != 0) {
		err = errno;
		/* Not bound: the name, if any, is someone else's. */
		rock_ctl_free(c, c->bound);
		errno = err;
		return -1;
	}
	*out = c;
	return 0;
}

void
rock_ctl_free(struct rock_ctl *c, int unlink_path)
{
	if (c == NULL)
		return;
	while (c->conns != NULL)
		conn_free(c->conns);
	if (c->ev != NULL)
		event_free(c->ev);
	if (c->fd >= 0)
		rock_sys.close(c->fd);
	if (unlink_path && c->path[0] != '\0')
		(void)unlink(c->path);
	free(c);
}

void
rock_ctl_set_workers(struct rock_ctl *c, int worker, int workers,
    rock_ctl_pass_fn *pass, void *arg)
{
	c->worker = worker;
	c->workers = workers;
	c->pass = pass;
	c->pass_arg = arg;
}

void
rock_ctl_forget(struct rock_ctl *c)
{
	struct ctl_conn *k;

	if (c == NULL)
		return;
	for (k = c->conns; k != NULL; k = k->next)
		rock_sys.close(k->fd);
	rock_sys.close(c->fd);
}
