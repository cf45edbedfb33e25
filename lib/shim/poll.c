/* poll.c: poll, ppoll, select, pselect never report a suspended rock (decision 7). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>

#include "shim.h"

/* Without an eventfd to wake it (none to be had), or when a full ring is
 * what it hides, a poll looks again after this long. */
#define SLICE_MS 10

enum { SHOW, HIDE, HIDE_POLLOUT, SHOW_LIVE };

static struct shim_rock *
rock_on(int fd)
{
	struct shim_rock *r;

	if (shim_fd_state_of(shim_fd_get(fd)) != SHIM_FD_ROCK ||
	    (r = shim_rock_of(fd)) == NULL || r->dead)
		return NULL;
	return r;
}

/* Lock held. How a descriptor may be shown to the kernel's poll now;
 * SHOW_LIVE: a rock whose hang-up (a FIN) is the engine's to judge. */
static int
rock_view(int fd)
{
	struct shim_rock *r;

	if ((r = rock_on(fd)) == NULL)
		return SHOW;
	if (r->s == NULL && !r->connecting)
		return SHOW;
	if (!r->ready)
		return HIDE;
	if (r->s == NULL)
		return SHOW;
	return rock_direct_space(r->s) == 0 ? HIDE_POLLOUT : SHOW_LIVE;
}

static int
any_rock(struct pollfd *fds, nfds_t n)
{
	nfds_t i;

	for (i = 0; i < n; i++)
		if (fds[i].fd >= 0 && shim_is_rock(fds[i].fd))
			return 1;
	return 0;
}

/* Copy fds into cp with hidden rocks taken out; 1 if any was. The
 * waiter, once it has its eventfd, is registered first, under the same
 * lock: no change between the look and the wait goes unnoticed. */
static int
mask_rocks(const struct pollfd *fds, struct pollfd *cp, nfds_t n,
    struct shim_waiter *w, int *full)
{
	int hidden = 0;
	nfds_t i;

	shim_lock();
	if (w->fd >= 0 && !w->added) {
		shim_waiter_add(w);
		w->added = 1;
	}
	for (i = 0; i < n; i++) {
		cp[i] = fds[i];
		switch (fds[i].fd < 0 ? SHOW : rock_view(fds[i].fd)) {
		case HIDE:
			cp[i].fd = -1;
			hidden = 1;
			break;
		case HIDE_POLLOUT:
			cp[i].events &= ~POLLOUT;
			hidden = 1;
			*full = 1;
			/* FALLTHROUGH */
		case SHOW_LIVE:
			/* Only with POLLIN: a FIN the peer confirmed would
			 * else wake a writer's poll for nothing, again and
			 * again. */
			if ((cp[i].events & POLLIN) &&
			    shim_rock_fin_unjudged(shim_rock_of(fds[i].fd)))
				cp[i].events |= POLLRDHUP;
			break;
		}
	}
	shim_unlock();
	return hidden;
}

/* Lock held. An error or hang-up on a rock's socket is a broken
 * connection, the engine's business: the rock is suspended, not shown. */
int
shim_rock_error_event(int fd, int err, int hup)
{
	struct shim_rock *r;

	if (!(err || hup) || shim_fd_state_of(shim_fd_get(fd)) != SHIM_FD_ROCK ||
	    (r = shim_rock_of(fd)) == NULL || r->s == NULL || !r->ready ||
	    (hup && !err && r->wr_shut))
		return 0;
	shim_rock_failed(r);
	return 1;
}

/* Lock held. A live rock's hang-up is the engine's to judge; an ended
 * one's error is reported as the kernel reports a reset's. */
static short
rock_revents(int fd, short asked, short got)
{
	struct shim_rock *r = rock_on(fd);

	if (r == NULL)
		return got;
	if (shim_rock_error_pending(r))
		got |= POLLERR;
	if ((got & POLLRDHUP) && !(got & POLLERR) &&
	    (r->s != NULL && r->ready)) {
		switch (shim_rock_fin_check(r, fd)) {
		case 1:
			got &= ~(POLLRDHUP | POLLHUP);	/* bytes first */
			break;
		case -1:
		case -2:
			return 0;
		}
	}
	return (short)(got & (asked | POLLERR | POLLHUP | POLLNVAL));
}

/* Results back; a rock suspended during the wait shows nothing. */
static int
unmask(struct pollfd *fds, const struct pollfd *cp, nfds_t n)
{
	int count = 0;
	nfds_t i;

	shim_lock();
	for (i = 0; i < n; i++) {
		fds[i].revents = cp[i].fd < 0 ? 0 : cp[i].revents;
		if (fds[i].revents != 0 && fds[i].fd >= 0)
			(void)shim_rock_error_event(fds[i].fd,
			    fds[i].revents & POLLERR, fds[i].revents & POLLHUP);
		if (fds[i].fd >= 0)
			fds[i].revents = rock_revents(fds[i].fd, fds[i].events,
			    fds[i].revents);
		if (fds[i].revents != 0 && rock_view(fds[i].fd) == HIDE)
			fds[i].revents = 0;
		if (fds[i].revents != 0)
			count++;
	}
	shim_unlock();
	return count;
}

/* deadline_ms -1: none. sigmask non-NULL: ppoll's. A hidden rock's
 * change (swap, end, room in the ring) wakes the wait through an eventfd
 * polled along with the program's descriptors. */
static int
poll_rocks(struct pollfd *fds, nfds_t n, int64_t deadline_ms,
    const sigset_t *sigmask)
{
	struct pollfd local[65], *cp = n < 65 ? local : calloc(n + 1, sizeof(*cp));
	struct shim_waiter w = { -1, 0, NULL };
	int r, count, hidden, cancel, full;
	nfds_t extra;
	int64_t left;
	uint64_t v;

	if (cp == NULL) {
		errno = ENOMEM;
		return -1;
	}
	/* The waiter lives on this stack: no unwinding past it. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	for (;;) {
		full = 0;
		hidden = mask_rocks(fds, cp, n, &w, &full);
		if (hidden && w.fd < 0 &&
		    (w.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) >= 0)
			continue;	/* look again, registered */
		extra = hidden && w.fd >= 0;
		if (extra)
			cp[n] = (struct pollfd){ w.fd, POLLIN, 0 };
		left = deadline_ms < 0 ? -1 : deadline_ms - shim_now_ms();
		if (left < -1 || (deadline_ms >= 0 && left < 0))
			left = 0;
		/* A full ring can gain room from the TCP bound (no ack coming),
		 * which nothing announces: look again after a slice. */
		if (hidden && (!extra || full) && (left < 0 || left > SLICE_MS))
			left = SLICE_MS;
		if (sigmask != NULL) {
			struct timespec ts = { left / 1000, (left % 1000) * 1000000 };

			r = shim_real.ppoll(cp, n + extra, left < 0 ? NULL : &ts, sigmask);
		} else {
			r = shim_real.poll(cp, n + extra, (int)left);
		}
		if (extra && (cp[n].revents & POLLIN))
			(void)!shim_real.read(w.fd, &v, sizeof(v));
		if (r < 0)
			break;
		count = unmask(fds, cp, n);
		if (count > 0 || (deadline_ms >= 0 && shim_now_ms() >= deadline_ms)) {
			r = count;
			break;
		}
	}
	if (w.fd >= 0) {
		int err = errno;

		shim_lock();
		if (w.added)
			shim_waiter_remove(&w);
		shim_unlock();
		shim_real.close(w.fd);
		errno = err;
	}
	if (cp != local)
		free(cp);
	pthread_setcancelstate(cancel, NULL);
	return r;
}

static int64_t
deadline_after(int64_t ms)
{
	return ms < 0 ? -1 : shim_now_ms() + ms;
}

SHIM_EXPORT int
poll(struct pollfd *fds, nfds_t n, int timeout)
{
	if (shim_busy || fds == NULL || !any_rock(fds, n))
		return shim_real.poll(fds, n, timeout);
	return poll_rocks(fds, n, deadline_after(timeout), NULL);
}

static int64_t
ts_deadline(const struct timespec *ts)
{
	if (ts == NULL)
		return -1;
	return shim_now_ms() + (int64_t)ts->tv_sec * 1000 + ts->tv_nsec / 1000000;
}

SHIM_EXPORT int
ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts,
    const sigset_t *sigmask)
{
	sigset_t cur;

	if (shim_busy || fds == NULL || !any_rock(fds, n))
		return shim_real.ppoll(fds, n, ts, sigmask);
	if (sigmask == NULL) {
		/* Slices go through ppoll too: keep the current mask. */
		pthread_sigmask(SIG_SETMASK, NULL, &cur);
		sigmask = &cur;
	}
	return poll_rocks(fds, n, ts_deadline(ts), sigmask);
}

/* ---- select and pselect, on top of the above */

static int
sets_have_rock(int nfds, fd_set *r, fd_set *w, fd_set *x)
{
	int fd;

	for (fd = 0; fd < nfds && fd < FD_SETSIZE; fd++)
		if (((r != NULL && FD_ISSET(fd, r)) || (w != NULL && FD_ISSET(fd, w)) ||
		    (x != NULL && FD_ISSET(fd, x))) && shim_is_rock(fd))
			return 1;
	return 0;
}

static int
select_rocks(int nfds, fd_set *rs, fd_set *ws, fd_set *xs, int64_t deadline_ms,
    const sigset_t *sigmask)
{
	struct pollfd *p = calloc((size_t)nfds, sizeof(*p));
	int fd, n = 0, i, r, count = 0;

	if (p == NULL) {
		errno = ENOMEM;
		return -1;
	}
	for (fd = 0; fd < nfds; fd++) {
		short ev = (short)((rs != NULL && FD_ISSET(fd, rs) ? POLLIN : 0) |
		    (ws != NULL && FD_ISSET(fd, ws) ? POLLOUT : 0) |
		    (xs != NULL && FD_ISSET(fd, xs) ? POLLPRI : 0));

		if (ev != 0)
			p[n++] = (struct pollfd){ fd, ev, 0 };
	}
	r = poll_rocks(p, (nfds_t)n, deadline_ms, sigmask);
	for (i = 0; i < n && r >= 0; i++)
		if (p[i].revents & POLLNVAL) {
			errno = EBADF;
			r = -1;
		}
	if (r >= 0) {
		for (i = 0; i < n; i++) {
			short got = p[i].revents;

			fd = p[i].fd;
			if (rs != NULL && FD_ISSET(fd, rs) && !(got & (POLLIN | POLLHUP | POLLERR)))
				FD_CLR(fd, rs);
			else if (rs != NULL && FD_ISSET(fd, rs))
				count++;
			if (ws != NULL && FD_ISSET(fd, ws) && !(got & (POLLOUT | POLLERR)))
				FD_CLR(fd, ws);
			else if (ws != NULL && FD_ISSET(fd, ws))
				count++;
			if (xs != NULL && FD_ISSET(fd, xs) && !(got & POLLPRI))
				FD_CLR(fd, xs);
			else if (xs != NULL && FD_ISSET(fd, xs))
				count++;
		}
		r = count;
	}
	free(p);
	return r;
}

SHIM_EXPORT int
select(int nfds, fd_set *rs, fd_set *ws, fd_set *xs, struct timeval *tv)
{
	int64_t d;
	int r;

	if (shim_busy || nfds <= 0 || nfds > FD_SETSIZE ||
	    !sets_have_rock(nfds, rs, ws, xs))
		return shim_real.select(nfds, rs, ws, xs, tv);
	d = tv == NULL ? -1 : shim_now_ms() + (int64_t)tv->tv_sec * 1000 +
	    tv->tv_usec / 1000;
	r = select_rocks(nfds, rs, ws, xs, d, NULL);
	if (tv != NULL) {
		/* Linux tells the caller the time left. */
		int64_t left = d - shim_now_ms();

		if (left < 0)
			left = 0;
		tv->tv_sec = left / 1000;
		tv->tv_usec = (left % 1000) * 1000;
	}
	return r;
}

SHIM_EXPORT int
pselect(int nfds, fd_set *rs, fd_set *ws, fd_set *xs,
    const struct timespec *ts, const sigset_t *sigmask)
{
	sigset_t cur;

	if (shim_busy || nfds <= 0 || nfds > FD_SETSIZE ||
	    !sets_have_rock(nfds, rs, ws, xs))
		return shim_real.pselect(nfds, rs, ws, xs, ts, sigmask);
	if (sigmask == NULL) {
		pthread_sigmask(SIG_SETMASK, NULL, &cur);
		sigmask = &cur;
	}
	return select_rocks(nfds, rs, ws, xs, ts_deadline(ts), sigmask);
}
