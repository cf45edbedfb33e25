/* rock_drain.c: a finished rock's data connection (or a refused early flight's), held and read until the peer's FIN or the farewell's end, then closed without a reset. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rock_engine_int.h"
#include "rock_sys.h"

/* Reads per wake-up: a peer that keeps sending cannot hold the loop. */
#define DRAIN_READS 16

struct rock_drain {
	struct rock_engine *e;
	int fd;
	int64_t until_ms;
	int refused;		/* a refused early flight's connection */
	struct event *ev;
	struct rock_drain *next, *prev;	/* e->drains, newest first */
};

/* What has arrived, discarded (MSG_TRUNC: TCP drops it in the kernel, no
 * copy). 1: the peer's FIN, or the connection is gone; 0: nothing more
 * yet. */
int
rock_discard_unread(int fd)
{
	ssize_t n;
	int i;

	for (i = 0; i < DRAIN_READS; i++) {
		n = rock_sys.recv(fd, NULL, ROCK_READ_CHUNK, MSG_TRUNC | MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return 1;
		if (n < 0 && errno == EAGAIN)
			return 0;
	}
	return 0;
}

/* With nothing unread, close() sends nothing, or the FIN we owe: never a
 * reset. Bytes that come after it are the kernel's to refuse. */
static void
end(struct rock_engine *e, struct rock_drain *d)
{
	*(d->prev != NULL ? &d->prev->next : &e->drains) = d->next;
	*(d->next != NULL ? &d->next->prev : &e->drain_oldest) = d->prev;
	e->ndrains--;
	e->ndrains_refused -= d->refused != 0;
	(void)rock_discard_unread(d->fd);
	event_free(d->ev);
	rock_sys.close(d->fd);
	free(d);
}

/* Wait for more, no later than the drain's end. */
static void
arm(struct rock_engine *e, struct rock_drain *d)
{
	int64_t left = d->until_ms - rock_now_ms();
	struct timeval tv;

	if (left <= 0) {
		end(e, d);
		return;
	}
	tv.tv_sec = (time_t)(left / 1000);
	tv.tv_usec = (suseconds_t)(left % 1000) * 1000;
	if (event_add(d->ev, &tv) != 0)
		end(e, d);
}

static void
on_drain(evutil_socket_t fd, short what, void *arg)
{
	struct rock_drain *d = arg;
	struct rock_engine *e = d->e;

	(void)fd;
	rock_engine_enter(e);
	if ((what & EV_TIMEOUT) || rock_discard_unread(d->fd))
		end(e, d);
	else
		arm(e, d);
	rock_engine_leave(e);
}

/* The bound: the oldest drain ends first. */
static void
make_room(struct rock_engine *e)
{
	if (e->ndrains >= ROCK_DRAIN_MAX)
		end(e, e->drain_oldest);
}

static int
drain_start(struct rock_engine *e, int fd, int fin_read, int refused)
{
	struct rock_drain *d;

	/* The usual end: the peer's FIN was read, nothing can follow it. */
	if (fin_read || rock_discard_unread(fd)) {
		rock_sys.close(fd);
		return 0;
	}
	make_room(e);
	if ((d = calloc(1, sizeof(*d))) == NULL ||
	    (d->ev = event_new(e->base, fd, EV_READ, on_drain, d)) == NULL) {
		free(d);
		rock_sys.close(fd);
		return 0;
	}
	d->e = e;
	d->fd = fd;
	d->refused = refused;
	d->until_ms = rock_now_ms() + ROCK_FAREWELL_MS;
	d->next = e->drains;
	*(d->next != NULL ? &d->next->prev : &e->drain_oldest) = d;
	e->drains = d;
	e->ndrains++;
	e->ndrains_refused += refused != 0;
	arm(e, d);
	return 1;
}

int
rock_drain_close(struct rock_engine *e, int fd, int fin_read)
{
	return drain_start(e, fd, fin_read, 0);
}

void
rock_drain_refused(struct rock_engine *e, int fd)
{
	if (e->ndrains_refused >= ROCK_DRAIN_REFUSED_MAX ||
	    e->ndrains >= ROCK_DRAIN_MAX) {
		(void)rock_discard_unread(fd);
		rock_sys.close(fd);
		return;
	}
	(void)drain_start(e, fd, 0, 1);
}

/* A drain's descriptor is the engine's like a session's: a keeper keeps
 * it (its events go on there), a forked child closes it. */
int
rock_drain_owns_fd(const struct rock_engine *e, int fd)
{
	const struct rock_drain *d;

	for (d = e->drains; d != NULL; d = d->next)
		if (d->fd == fd)
			return 1;
	return 0;
}

void
rock_drain_close_fds(const struct rock_engine *e, int (*close_fn)(int))
{
	const struct rock_drain *d;

	for (d = e->drains; d != NULL; d = d->next)
		close_fn(d->fd);
}

void
rock_drain_free_all(struct rock_engine *e)
{
	while (e->drains != NULL)
		end(e, e->drains);
}
