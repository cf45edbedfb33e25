/* relay.c: rockd's plain relay: client <-> backend, byte-exact, with half-close. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "rock_err.h"
#include "rock_rec.h"
#include "rockd.h"

#define RECORD_MAGIC 0x524b524cu	/* "RKRL" */
#define RECORD_VERSION 1
#define RECORD_MAX_BUFFER (256u * 1024 * 1024)

/* Read from one side stops while the other side has this much unsent,
 * and resumes below the low mark: memory per relay stays bounded. */
#define RELAY_HIGH (512 * 1024)
#define RELAY_LOW (128 * 1024)
/* libevent 2.1's bufferevents read 4 KiB per call; the relay reads the
 * sockets itself, 64 KiB at a time, and leaves writing to them. */
#define RELAY_READ (64 * 1024)

enum { CLIENT = 0, BACKEND = 1 };

struct rockd_relay {
	struct rockd *d;
	unsigned long id;
	struct bufferevent *side[2];
	struct event *rd[2];	/* reading side i (the backend's once connected) */
	int eof[2];		/* no more bytes will come from side i */
	int shut[2];		/* we half-closed toward side i */
	int connected;		/* backend connection established */
	int dialing;		/* inside bufferevent_socket_connect() */
	int dial_failed;	/* it reported the failure through event_cb */
	struct rockd_relay *prev, *next;
};

static unsigned long next_id;

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
		evutil_socket_t fd;

		if (r->side[i] == NULL)
			continue;	/* an import that failed half-way */
		fd = bufferevent_getfd(r->side[i]);
		if (r->rd[i] != NULL)
			event_free(r->rd[i]);
		/* An abort answers an abort: the peer sees a reset, as it
		 * would on a direct TCP connection. */
		if (reset && fd >= 0)
			setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		bufferevent_free(r->side[i]);
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

/* Half-close toward side i once everything for it is written. */
static void
flush_eof(struct rockd_relay *r, int i)
{
	if (!r->eof[1 - i] || r->shut[i] ||
	    evbuffer_get_length(bufferevent_get_output(r->side[i])) > 0)
		return;
	if (i == BACKEND && !r->connected)
		return;		/* done on connect */
	shutdown(bufferevent_getfd(r->side[i]), SHUT_WR);
	r->shut[i] = 1;
	if (r->shut[0] && r->shut[1])
		relay_free(r, 0);
}

static int
side_of(const struct rockd_relay *r, const struct bufferevent *bev)
{
	return bev == r->side[CLIENT] ? CLIENT : BACKEND;
}

static void
relay_failed(struct rockd_relay *r, int i, int err)
{
	rlog_info(&r->d->log, "relay %lu: %s: %s", r->id,
	    i == BACKEND ? "backend" : "client", strerror(err));
	relay_free(r, 1);
}

static void
on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct rockd_relay *r = arg;
	int i = fd == bufferevent_getfd(r->side[CLIENT]) ? CLIENT : BACKEND;
	struct evbuffer *out = bufferevent_get_output(r->side[1 - i]);
	char buf[RELAY_READ];
	ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

	(void)what;
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n < 0) {
		relay_failed(r, i, errno);
		return;
	}
	if (n == 0) {
		r->eof[i] = 1;
		event_del(r->rd[i]);
		flush_eof(r, 1 - i);
		return;
	}
	bufferevent_write(r->side[1 - i], buf, (size_t)n);
	if (evbuffer_get_length(out) >= RELAY_HIGH)
		event_del(r->rd[i]);
}

static int
start_reading(struct rockd_relay *r, int i)
{
	r->rd[i] = event_new(r->d->base, bufferevent_getfd(r->side[i]),
	    EV_READ | EV_PERSIST, on_readable, r);
	return r->rd[i] == NULL ? -1 : event_add(r->rd[i], NULL);
}

static void
write_cb(struct bufferevent *bev, void *arg)
{
	struct rockd_relay *r = arg;
	int i = side_of(r, bev);

	if (!r->eof[1 - i] && r->rd[1 - i] != NULL)
		event_add(r->rd[1 - i], NULL);
	flush_eof(r, i);
}

static void
event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct rockd_relay *r = arg;
	int i = side_of(r, bev);

	if (what & BEV_EVENT_CONNECTED) {
		r->connected = 1;
		rockd_no_delay(bufferevent_getfd(bev));
		rlog_debug(&r->d->log, "relay %lu: backend connected", r->id);
		if (start_reading(r, BACKEND) != 0) {
			relay_free(r, 1);
			return;
		}
		flush_eof(r, BACKEND);
		return;
	}
	if (what & BEV_EVENT_ERROR) {
		/* Some libevent versions report an immediate connect failure
		 * from inside the connect call: the caller frees then. */
		if (r->dialing) {
			r->dial_failed = 1;
			return;
		}
		if (i == BACKEND && !r->connected) {
			rlog_warn(&r->d->log, "relay %lu: backend: %s; resetting "
			    "the client", r->id, strerror(EVUTIL_SOCKET_ERROR()));
			relay_free(r, 1);
		} else {
			relay_failed(r, i, EVUTIL_SOCKET_ERROR());
		}
	}
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

static struct bufferevent *
new_side(struct rockd_relay *r, evutil_socket_t fd)
{
	struct bufferevent *bev = rockd_bufferevent(r->d->base, fd);

	if (bev == NULL)
		return NULL;
	bufferevent_setcb(bev, NULL, write_cb, event_cb, r);
	bufferevent_setwatermark(bev, EV_WRITE, RELAY_LOW, 0);
	bufferevent_enable(bev, EV_WRITE);
	return bev;
}

void
rockd_relay_start(struct rockd *d, const struct rockd_backend *b,
    evutil_socket_t client, const uint8_t *early, size_t nearly)
{
	struct rockd_relay *r = calloc(1, sizeof(*r));

	if (r == NULL || (r->d = d, r->side[CLIENT] = new_side(r, client)) == NULL) {
		rlog_error(&d->log, "relay: out of memory");
		evutil_closesocket(client);
		free(r);
		return;
	}
	r->id = ++next_id;
	rockd_no_delay(client);
	if ((r->side[BACKEND] = new_side(r, -1)) == NULL) {
		bufferevent_free(r->side[CLIENT]);
		free(r);
		return;
	}
	relay_link(d, r);
	if (start_reading(r, CLIENT) != 0) {
		relay_free(r, 1);
		return;
	}
	if (nearly > 0)
		evbuffer_add(bufferevent_get_output(r->side[BACKEND]), early, nearly);
	rlog_debug(&d->log, "relay %lu: plain client, to backend %s", r->id,
	    b->spec);
	r->dialing = 1;
	if (bufferevent_socket_connect(r->side[BACKEND],
	    (const struct sockaddr *)&b->addr, (int)b->len) != 0)
		r->dial_failed = 1;
	r->dialing = 0;
	if (r->dial_failed) {
		rlog_warn(&d->log, "relay %lu: backend %s: %s", r->id,
		    b->spec, strerror(errno));
		relay_free(r, 1);
	}
}

void
rockd_maybe_done(struct rockd *d)
{
	if (d->stopping && d->relays == NULL && d->rocks == NULL)
		event_base_loopbreak(d->base);
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

/* ---- hand-over (USR2): a connected relay, its two sockets and what it
 * holds for each */

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

static int
relay_export(struct rockd_relay *r, struct evbuffer *out, int fds[2])
{
	struct rock_rec_out w;
	int e;

	if (!r->connected)
		return ROCK_ERR_INVALID;
	if ((e = rock_rec_begin(&w)) != 0)
		return e;
	rock_rec_uint(&w, (uint64_t)r->eof[CLIENT] | (uint64_t)r->eof[BACKEND] << 1 |
	    (uint64_t)r->shut[CLIENT] << 2 | (uint64_t)r->shut[BACKEND] << 3, 1);
	rock_rec_uint(&w, r->id, 8);
	rock_rec_evbuffer(&w, bufferevent_get_output(r->side[CLIENT]));
	rock_rec_evbuffer(&w, bufferevent_get_output(r->side[BACKEND]));
	fds[CLIENT] = bufferevent_getfd(r->side[CLIENT]);
	fds[BACKEND] = bufferevent_getfd(r->side[BACKEND]);
	return rock_rec_seal(&w, RECORD_MAGIC, RECORD_VERSION, out);
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
	if ((r = calloc(1, sizeof(*r))) == NULL)
		return ROCK_ERR_NOMEM;
	r->d = d;
	r->id = id;
	if (id > next_id)
		next_id = id;
	r->connected = 1;
	relay_link(d, r);
	for (i = 0; i < 2; i++) {
		r->eof[i] = (bits >> i & 1) != 0;
		r->shut[i] = (bits >> (2 + i) & 1) != 0;
		if ((r->side[i] = new_side(r, m->fds[i])) == NULL) {
			relay_free(r, 0);
			return ROCK_ERR_NOMEM;
		}
		m->fds[i] = -1;
		if (evbuffer_add(bufferevent_get_output(r->side[i]), out[i],
		    len[i]) != 0) {
			relay_free(r, 0);
			return ROCK_ERR_NOMEM;
		}
	}
	/* Reading resumes where back-pressure or an end did not stop it. */
	for (i = 0; i < 2; i++)
		if (!r->eof[i] && (start_reading(r, i) != 0 ||
		    (len[1 - i] >= RELAY_HIGH && event_del(r->rd[i]) != 0))) {
			relay_free(r, 0);
			return ROCK_ERR_NOMEM;
		}
	return 0;
}
