/* relay.c: rockd's plain relay: client <-> backend, byte-exact, with half-close; copied while small, spliced through pipes once bulk. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "rock_err.h"
#include "rock_rec.h"
#include "rockd.h"

#define RECORD_MAGIC 0x524b524cu	/* "RKRL" */
#define RECORD_VERSION 1
#define RECORD_MAX_BUFFER (256u * 1024 * 1024)

/* A direction's bytes are copied through rockd (recv, then send) until one
 * read fills RELAY_COPY: from then on they go socket -> pipe -> socket
 * with splice(2), never through rockd's memory. A short connection so
 * costs no pipes: two of them, sized, cost 14 us of rockd's CPU per
 * connection here, where HAProxy's whole connect and close costs ~80
 * (HAProxy splices only on request, and then also only once bulk). The
 * pipe bounds what a relay holds per direction, and a splice moves at
 * most a pipeful: with 64 KiB blocks on loopback 1 MiB pipes (the
 * unprivileged maximum) relayed at 0.66x and 0.75x of raw TCP (download,
 * upload), 64 KiB pipes at 0.58x and 0.57x. */
#define RELAY_PIPE (1024 * 1024)
/* One splice from a socket moves at most this much. */
#define RELAY_SPLICE (1024 * 1024)
/* One copied read. A copying direction stops reading once this much is
 * held unsent (a backend still connecting, a slow reader), so it holds
 * under twice this. */
#define RELAY_COPY (16 * 1024)

enum { CLIENT = 0, BACKEND = 1 };

/* The bytes on their way from one side to the other. */
struct relay_dir {
	int pr, pw;		/* the pipe's read and write ends, -1 while
				 * this direction copies */
	size_t inpipe;		/* bytes in it */
	/* Bytes to send before the pipe's: those the sniffer read, those
	 * a predecessor handed over, those copied and not yet sent. */
	uint8_t *head;
	size_t headlen, headoff;
};

struct rockd_relay {
	struct rockd *d;
	unsigned long id;
	int fd[2];
	struct relay_dir dir[2];	/* dir[i]: from side i to side 1 - i */
	struct event *rd[2];	/* side i readable: kept while its direction
				 * has room (pipe, or under RELAY_COPY held) */
	struct event *wr[2];	/* side i writable: only while a write to it
				 * would block (or the backend connects) */
	int reading[2], writing[2];	/* rd[i], wr[i] added */
	int eof[2];		/* no more bytes will come from side i */
	int shut[2];		/* we half-closed toward side i */
	int connected;		/* backend connection established */
	int no_pipe;		/* pipe2 failed: it copies to the end */
	/* Made for a client silent through the sniff's wait: its first
	 * bytes are looked at once, for a rock's hello that came late. */
	int late_check;
	struct rockd_relay *prev, *next;
};

static unsigned long next_id;
static int pipe_warned;		/* pipe2 failed once: said once */

static void
relay_link(struct rockd *d, struct rockd_relay *r)
{
	r->next = d->relays;
	if (d->relays != NULL)
		d->relays->prev = r;
	d->relays = r;
}

static void
relay_free(struct rockd_relay *r, int reset)
{
	struct linger lg = { 1, 0 };
	int i;

	for (i = 0; i < 2; i++) {
		if (r->rd[i] != NULL)
			event_free(r->rd[i]);
		if (r->wr[i] != NULL)
			event_free(r->wr[i]);
		if (r->fd[i] >= 0) {
			/* An abort answers an abort: the peer sees a reset,
			 * as it would on a direct TCP connection. */
			if (reset)
				setsockopt(r->fd[i], SOL_SOCKET, SO_LINGER, &lg,
				    sizeof(lg));
			close(r->fd[i]);
		}
		if (r->dir[i].pr >= 0)
			close(r->dir[i].pr);
		if (r->dir[i].pw >= 0)
			close(r->dir[i].pw);
		free(r->dir[i].head);
	}
	if (r->prev != NULL)
		r->prev->next = r->next;
	else
		r->d->relays = r->next;
	if (r->next != NULL)
		r->next->prev = r->prev;
	rlog_debug(&r->d->log, "relay %lu: closed%s", r->id,
	    reset ? " with reset" : "");
	rockd_maybe_done(r->d);
	free(r);
}

static void
relay_failed(struct rockd_relay *r, int i, int err)
{
	rlog_info(&r->d->log, "relay %lu: %s: %s", r->id,
	    i == BACKEND ? "backend" : "client", strerror(err));
	relay_free(r, 1);
}

/* Interest changes only when it must: read interest stays while the
 * direction has room, write interest exists only while a write would
 * block, so a relayed round trip costs no epoll_ctl. 0 or -ENOMEM. */
static int
want(struct event *ev, int *on, int v)
{
	if (*on == v)
		return 0;
	*on = v;
	return (v ? event_add(ev, NULL) : event_del(ev)) != 0 ? -ENOMEM : 0;
}

/* Everything for side `to`: the head, then the pipe. 0 (done, or to be
 * resumed when `to` is writable), or a negative errno. */
static int
send_out(struct rockd_relay *r, int to)
{
	struct relay_dir *p = &r->dir[1 - to];
	ssize_t n;

	if (to == BACKEND && !r->connected)
		return 0;	/* done on connect */
	while (p->headoff < p->headlen) {
		n = send(r->fd[to], p->head + p->headoff, p->headlen - p->headoff,
		    MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return want(r->wr[to], &r->writing[to], 1);
		if (n < 0)
			return -errno;
		p->headoff += (size_t)n;
	}
	if (p->head != NULL) {
		free(p->head);
		p->head = NULL;
		p->headlen = p->headoff = 0;
	}
	while (p->inpipe > 0) {
		n = splice(p->pr, NULL, r->fd[to], NULL, p->inpipe,
		    SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN)
			return -errno;
		if (n == 0)
			return -EIO;	/* the pipe is ours: it cannot end */
		if (n > 0)
			p->inpipe -= (size_t)n;
		/* A short write is a full socket buffer: wait for room
		 * rather than spend a call to hear EAGAIN. */
		if (p->inpipe > 0)
			return want(r->wr[to], &r->writing[to], 1);
	}
	if (want(r->wr[to], &r->writing[to], 0) != 0)
		return -ENOMEM;
	if (!r->eof[1 - to]) {
		/* A backend still connecting is read from once connected. */
		if (to == CLIENT && !r->connected)
			return 0;
		return want(r->rd[1 - to], &r->reading[1 - to], 1);
	}
	if (!r->shut[to]) {
		/* Everything from 1 - to is through: pass its end on. */
		shutdown(r->fd[to], SHUT_WR);
		r->shut[to] = 1;
	}
	return 0;
}

/* The end of a callback: an error on side resets the relay, both ways
 * closed ends it; r may be gone after. */
static void
settle(struct rockd_relay *r, int side, int e)
{
	if (e < 0)
		relay_failed(r, side, -e);
	else if (r->shut[CLIENT] && r->shut[BACKEND])
		relay_free(r, 0);
}

/* A client taken for a silent plain one whose first bytes are a rock's
 * hello or reconnect (lost and resent after the sniff's wait, or sent by
 * a starved host): the backend must not get them as its client's bytes,
 * and the client, reset, tries again as a rock. 1 if so, or if the peek
 * failed (the relay failed as a read's error would fail it: a peek
 * takes the socket's error, and the read after would see a clean end);
 * r is freed then. A hello's first segment carries all 8 bytes of its
 * magic: fewer that begin like one (rock_sniff's MORE) are a plain
 * client's. */
static int
late_rock(struct rockd_relay *r, int fd)
{
	uint8_t buf[ROCK_MAGIC_LEN];
	size_t have = 0;
	enum rock_sniff kind;

	kind = rock_sniff_read(fd, buf, &have, 1);
	if (kind == ROCK_SNIFF_MORE && have == 0)
		return 0;	/* nothing yet: looked at again next time */
	r->late_check = 0;
	if (kind == ROCK_SNIFF_PLAIN && have == 0) {
		relay_failed(r, CLIENT, errno);
		return 1;
	}
	if (kind != ROCK_SNIFF_ANNOUNCE && kind != ROCK_SNIFF_RECONNECT)
		return 0;
	rlog_limited(&r->d->log, rock_engine_stranger_log(r->d->engine,
	    ROCK_STRANGER_REFUSAL), ROCK_LOG_INFO, "relay %lu: a rock's %s came "
	    "after the wait for a plain client's first bytes: reset, the "
	    "backend given none of it", r->id,
	    kind == ROCK_SNIFF_ANNOUNCE ? "hello" : "reconnect");
	r->d->n.late_rocks++;
	relay_free(r, 1);
	return 1;
}

/* Bytes not yet sent toward side 1 - i: appended to dir i's head. */
static int
head_add(struct relay_dir *p, const uint8_t *b, size_t n)
{
	size_t left = p->headlen - p->headoff;
	uint8_t *h;

	if (n == 0)
		return 0;
	/* Grown first: a failure leaves the head as it was. */
	if ((h = realloc(p->head, p->headlen + n)) == NULL)
		return -ENOMEM;
	if (p->headoff > 0)
		memmove(h, h + p->headoff, left);
	memcpy(h + left, b, n);
	p->head = h;
	p->headlen = left + n;
	p->headoff = 0;
	return 0;
}

/* Bulk: the direction splices from now on. Without a pipe (descriptors
 * short) the relay copies on, which only costs rockd more CPU. */
static void
dir_pipe(struct rockd_relay *r, struct relay_dir *p)
{
	int fds[2];

	if (r->no_pipe)
		return;
	if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) {
		r->no_pipe = 1;
		if (!pipe_warned++)
			rlog_warn(&r->d->log, "relay %lu: pipe: %s; relays that "
			    "cannot have one copy instead of splicing (said "
			    "once)", r->id, strerror(errno));
		return;
	}
	p->pr = fds[0];
	p->pw = fds[1];
	/* Smaller if the limit says so: a fuller pipe only means more
	 * turns of the loop. */
	(void)fcntl(p->pw, F_SETPIPE_SZ, RELAY_PIPE);
}

/* Side i's bytes into the pipe: how many (0: its end), or -errno
 * (-EAGAIN: none, or the pipe is full). */
static ssize_t
splice_in(struct rockd_relay *r, int i)
{
	struct relay_dir *p = &r->dir[i];
	ssize_t n;

	do {
		n = splice(r->fd[i], NULL, p->pw, NULL, RELAY_SPLICE,
		    SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	p->inpipe += (size_t)n;
	return n;
}

/* Side i's bytes read into rockd and sent on at once where nothing is
 * waiting before them; what side 1 - i does not take yet is held for
 * send_out. How many were read (0: its end), or -errno (-EAGAIN: none,
 * or enough held already); *send_err: the send's error, 0 if none. A
 * read that fills the buffer makes the direction splice. */
static ssize_t
copy_in(struct rockd_relay *r, int i, int *send_err)
{
	struct relay_dir *p = &r->dir[i];
	int to = 1 - i;
	uint8_t buf[RELAY_COPY];
	ssize_t n, w = 0;

	if (p->headlen - p->headoff >= RELAY_COPY)
		return -EAGAIN;
	do {
		n = recv(r->fd[i], buf, sizeof(buf), MSG_DONTWAIT);
	} while (n < 0 && errno == EINTR);
	if (n <= 0)
		return n < 0 ? -errno : 0;
	if (p->headlen == p->headoff && !r->writing[to] &&
	    (to == CLIENT || r->connected)) {
		do {
			w = send(r->fd[to], buf, (size_t)n,
			    MSG_DONTWAIT | MSG_NOSIGNAL);
		} while (w < 0 && errno == EINTR);
		if (w < 0 && errno != EAGAIN)
			*send_err = errno;
		if (w < 0)
			w = 0;
		/* Not all taken: the rest goes when `to` has room. */
		if (w < n && *send_err == 0 &&
		    want(r->wr[to], &r->writing[to], 1) != 0)
			return -ENOMEM;
	}
	if (head_add(p, buf + w, (size_t)(n - w)) != 0)
		return -ENOMEM;
	if (n == RELAY_COPY)
		dir_pipe(r, p);
	return n;
}

static void
on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct rockd_relay *r = arg;
	int i = fd == r->fd[CLIENT] ? CLIENT : BACKEND;
	struct relay_dir *p = &r->dir[i];
	ssize_t n;
	int e = 0, send_err = 0;

	(void)what;
	if (i == CLIENT && r->late_check && late_rock(r, fd))
		return;
	n = p->pw >= 0 ? splice_in(r, i) : copy_in(r, i, &send_err);
	if (send_err != 0) {
		relay_failed(r, 1 - i, send_err);
		return;
	}
	if (n == -EAGAIN) {
		/* Readable yet nothing moved: the pipe is full, or enough
		 * is held. Reading resumes once send_out has emptied it. */
		if (p->inpipe > 0 || p->headlen - p->headoff >= RELAY_COPY)
			e = want(r->rd[i], &r->reading[i], 0);
		settle(r, 1 - i, e);
		return;
	}
	if (n < 0) {
		relay_failed(r, i, (int)-n);
		return;
	}
	if (n == 0) {
		r->eof[i] = 1;
		e = want(r->rd[i], &r->reading[i], 0);
	} else {
		r->d->n.plain_bytes[i == CLIENT ? ROCKD_TO_BACKEND :
		    ROCKD_TO_CLIENT] += (uint64_t)n;
	}
	/* Awaiting 1 - i's room already: on_writable sends (and passes
	 * the end on); a send now would only hear EAGAIN. */
	if (e == 0 && !r->writing[1 - i] &&
	    (p->headlen > p->headoff || p->inpipe > 0 || r->eof[i]))
		e = send_out(r, 1 - i);
	settle(r, 1 - i, e);
}

static void
on_writable(evutil_socket_t fd, short what, void *arg)
{
	struct rockd_relay *r = arg;
	int i = fd == r->fd[CLIENT] ? CLIENT : BACKEND;
	int err = 0, e;
	socklen_t len = sizeof(err);

	(void)what;
	if (i == BACKEND && !r->connected) {
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
			err = errno;
		if (err == EINPROGRESS || err == EALREADY)
			return;
		if (err != 0) {
			rlog_warn(&r->d->log, "relay %lu: backend: %s; resetting "
			    "the client", r->id, strerror(err));
			relay_free(r, 1);
			return;
		}
		r->connected = 1;
		rockd_no_delay(fd);
		rlog_debug(&r->d->log, "relay %lu: backend connected", r->id);
		if (!r->eof[BACKEND] &&
		    want(r->rd[BACKEND], &r->reading[BACKEND], 1) != 0) {
			relay_free(r, 1);
			return;
		}
	}
	e = send_out(r, i);
	settle(r, i, e);
}

/* A socket's bufferevent for rockd. libevent writes at most 16 KiB per
 * turn of the loop by default, which capped a download through rockd. */
struct bufferevent *
rockd_bufferevent(struct event_base *base, evutil_socket_t fd)
{
	struct bufferevent *bev = bufferevent_socket_new(base, fd,
	    BEV_OPT_CLOSE_ON_FREE);

	if (bev != NULL)
		(void)bufferevent_set_max_single_write(bev, ROCKD_WRITE_MAX);
	return bev;
}

/* A relay with no sockets yet, linked; its pipes are made once bulk. */
static struct rockd_relay *
relay_new(struct rockd *d)
{
	struct rockd_relay *r = calloc(1, sizeof(*r));
	int i;

	if (r == NULL)
		return NULL;
	r->d = d;
	r->fd[CLIENT] = r->fd[BACKEND] = -1;
	for (i = 0; i < 2; i++)
		r->dir[i].pr = r->dir[i].pw = -1;
	relay_link(d, r);
	return r;
}

/* Side i's socket and its two events (not added). */
static int
relay_side(struct rockd_relay *r, int i, int fd)
{
	r->fd[i] = fd;
	if (evutil_make_socket_nonblocking(fd) != 0)
		return -1;
	r->rd[i] = event_new(r->d->base, fd, EV_READ | EV_PERSIST, on_readable, r);
	r->wr[i] = event_new(r->d->base, fd, EV_WRITE | EV_PERSIST, on_writable, r);
	return r->rd[i] == NULL || r->wr[i] == NULL ? -1 : 0;
}

void
rockd_relay_start(struct rockd *d, const struct rockd_backend *b,
    evutil_socket_t client, const uint8_t *early, size_t nearly)
{
	struct rockd_relay *r = relay_new(d);
	int fd;

	if (r == NULL) {
		evutil_closesocket(client);
		return;
	}
	r->id = ++next_id;
	r->late_check = nearly == 0;
	rockd_no_delay(client);
	if (relay_side(r, CLIENT, client) != 0 ||
	    head_add(&r->dir[CLIENT], early, nearly) != 0 ||
	    want(r->rd[CLIENT], &r->reading[CLIENT], 1) != 0 ||
	    (fd = socket(b->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0)) < 0 || relay_side(r, BACKEND, fd) != 0) {
		rlog_error(&d->log, "relay %lu: cannot start: %s", r->id,
		    strerror(errno));
		relay_free(r, 1);
		return;
	}
	d->n.plain_bytes[ROCKD_TO_BACKEND] += nearly;
	rlog_debug(&d->log, "relay %lu: plain client, to backend %s", r->id,
	    b->spec);
	/* Connected, or in progress: the first writability says which. */
	if (connect(fd, (const struct sockaddr *)&b->addr, b->len) != 0 &&
	    errno != EINPROGRESS) {
		rlog_warn(&d->log, "relay %lu: backend %s: %s", r->id,
		    b->spec, strerror(errno));
		relay_free(r, 1);
		return;
	}
	if (want(r->wr[BACKEND], &r->writing[BACKEND], 1) != 0)
		relay_free(r, 1);
}

void
rockd_maybe_done(struct rockd *d)
{
	if (d->stopping && d->relays == NULL && d->rocks == NULL)
		event_base_loopbreak(d->base);
	rockd_session_ended(d);
}

/* SIGTERM's bound: whatever a relay still carries is cut, and both ends
 * see the reset a direct connection cut midway would give them. */
void
rockd_relays_cut(struct rockd *d)
{
	while (d->relays != NULL) {
		rlog_info(&d->log, "relay %lu: cut with a reset both ways (drain "
		    "timeout)", d->relays->id);
		relay_free(d->relays, 1);
	}
}

size_t
rockd_relays_dialing(const struct rockd *d)
{
	const struct rockd_relay *r;
	size_t n = 0;

	for (r = d->relays; r != NULL; r = r->next)
		n += !r->connected;
	return n;
}

size_t
rockd_relays_count(const struct rockd *d)
{
	const struct rockd_relay *r;
	size_t n = 0;

	for (r = d->relays; r != NULL; r = r->next)
		n++;
	return n;
}

/* ---- hand-over (USR2): a connected relay, its two sockets and what it
 * holds for each. The record is the one rockd wrote when it relayed
 * through buffers: the bytes for each side, whole. */

void
rockd_relays_release(struct rockd *d)
{
	struct rockd_relay *r;

	/* One still dialling was not handed over: its client is cut with a
	 * reset, never a clean end. The others are the successor's now:
	 * closing our copies sends nothing, and must set nothing on them. */
	while ((r = d->relays) != NULL) {
		if (!r->connected)
			rlog_info(&d->log, "relay %lu: still dialling its backend "
			    "at the hand-over; reset", r->id);
		relay_free(r, !r->connected);
	}
}

/* The bytes on their way in p, copied and left in place: the hand-over
 * may fail, and this rockd then relays on. The pipe's contents are
 * duplicated with tee(2) into a pipe of the same size and read from it. */
static int
dir_pending(const struct relay_dir *p, uint8_t **out, size_t *len)
{
	size_t head = p->headlen - p->headoff, got = 0;
	int t[2] = { -1, -1 }, sz, e = ROCK_ERR_SYSTEM;
	ssize_t n;

	*len = head + p->inpipe;
	if ((*out = malloc(*len + 1)) == NULL)
		return ROCK_ERR_NOMEM;
	if (head > 0)
		memcpy(*out, p->head + p->headoff, head);
	if (p->inpipe == 0)
		return 0;
	if ((sz = fcntl(p->pr, F_GETPIPE_SZ)) < 0 ||
	    pipe2(t, O_NONBLOCK | O_CLOEXEC) != 0 ||
	    fcntl(t[1], F_SETPIPE_SZ, sz) < sz)
		goto out;
	/* One call: a second tee would start again at the pipe's front. */
	if ((n = tee(p->pr, t[1], p->inpipe, SPLICE_F_NONBLOCK)) < 0 ||
	    (size_t)n != p->inpipe)
		goto out;
	while (got < p->inpipe) {
		if ((n = read(t[0], *out + head + got, p->inpipe - got)) <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			goto out;
		}
		got += (size_t)n;
	}
	e = 0;
 out:
	if (t[0] >= 0)
		close(t[0]);
	if (t[1] >= 0)
		close(t[1]);
	if (e != 0) {
		free(*out);
		*out = NULL;
	}
	return e;
}

static int
relay_export(struct rockd_relay *r, struct evbuffer *out, int fds[2])
{
	struct rock_rec_out w;
	uint8_t *b[2] = { NULL, NULL };
	size_t len[2];
	int e, i;

	if (!r->connected)
		return ROCK_ERR_INVALID;
	/* b[i]: the bytes for side i, from side 1 - i. */
	for (i = 0; i < 2; i++)
		if ((e = dir_pending(&r->dir[1 - i], &b[i], &len[i])) != 0)
			goto out;
	if ((e = rock_rec_begin(&w)) != 0)
		goto out;
	rock_rec_uint(&w, (uint64_t)r->eof[CLIENT] | (uint64_t)r->eof[BACKEND] << 1 |
	    (uint64_t)r->shut[CLIENT] << 2 | (uint64_t)r->shut[BACKEND] << 3, 1);
	rock_rec_uint(&w, r->id, 8);
	rock_rec_blob(&w, b[CLIENT], len[CLIENT]);
	rock_rec_blob(&w, b[BACKEND], len[BACKEND]);
	fds[CLIENT] = r->fd[CLIENT];
	fds[BACKEND] = r->fd[BACKEND];
	e = rock_rec_seal(&w, RECORD_MAGIC, RECORD_VERSION, out);
	rlog_debug(&r->d->log, "relay %lu: handing over %zu bytes for the client, "
	    "%zu for the backend", r->id, len[CLIENT], len[BACKEND]);
 out:
	free(b[CLIENT]);
	free(b[BACKEND]);
	return e;
}

int
rockd_relays_send(struct rockd *d, int chan, unsigned *sent, unsigned *left)
{
	struct rockd_relay *r;
	struct evbuffer *body;
	char what[32];
	int fds[2], e;

	for (r = d->relays; r != NULL; r = r->next) {
		if ((body = evbuffer_new()) == NULL)
			return -1;
		e = relay_export(r, body, fds);
		snprintf(what, sizeof(what), "relay %lu", r->id);
		if (rockd_chan_send_export(d, chan, ROCKD_MSG_RELAY, e, body, fds,
		    2, what, sent, left) != 0)
			return -1;
	}
	return 0;
}

int
rockd_relay_import(struct rockd *d, struct rockd_msg *m)
{
	struct rock_rec_in rec;
	const uint8_t *out[2];
	size_t len[2];
	uint64_t bits, id;
	struct rockd_relay *r;
	int i;

	if (m->nfds != 2 || rock_rec_open(&rec, m->body, m->len, RECORD_MAGIC,
	    RECORD_VERSION) != 0)
		return ROCK_ERR_PROTOCOL;
	bits = rock_rec_get_max(&rec, 1, 0xf);
	id = rock_rec_get(&rec, 8);
	out[CLIENT] = rock_rec_get_blob(&rec, RECORD_MAX_BUFFER, &len[CLIENT]);
	out[BACKEND] = rock_rec_get_blob(&rec, RECORD_MAX_BUFFER, &len[BACKEND]);
	if (rock_rec_close(&rec) != 0)
		return ROCK_ERR_PROTOCOL;
	if ((r = relay_new(d)) == NULL)
		return ROCK_ERR_NOMEM;
	r->id = id;
	if (id > next_id)
		next_id = id;
	r->connected = 1;
	for (i = 0; i < 2; i++) {
		r->eof[i] = (bits >> i & 1) != 0;
		r->shut[i] = (bits >> (2 + i) & 1) != 0;
		if (relay_side(r, i, m->fds[i]) != 0) {
			m->fds[i] = -1;
			relay_free(r, 0);
			return ROCK_ERR_NOMEM;
		}
		m->fds[i] = -1;
	}
	/* The bytes for side i are sent first, before anything read now;
	 * reading starts where no end stopped it, and each side's first
	 * writability sends what is held for it (and any end owed). */
	for (i = 0; i < 2; i++)
		if (head_add(&r->dir[1 - i], out[i], len[i]) != 0 ||
		    (!r->eof[i] && want(r->rd[i], &r->reading[i], 1) != 0) ||
		    want(r->wr[i], &r->writing[i], 1) != 0) {
			relay_free(r, 0);
			return ROCK_ERR_NOMEM;
		}
	return 0;
}
