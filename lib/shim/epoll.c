/* epoll.c: epoll interest in rocks, kept across suspension and the socket swap. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "shim.h"

/* The kernel keys an epoll registration on (descriptor, open file): a
 * swapped-in socket is a new file, so each registration on a rock is
 * recorded here, taken out of the kernel while suspended and put back
 * after the swap. */
struct reg {
	int epfd, fd;
	struct epoll_event ev;
	int in_kernel;
	int armed;		/* EPOLLONESHOT: not fired since armed */
	struct shim_rock *r;
	struct reg *next;
};

static struct reg *regs;
static int nregs;

int
shim_nregs_hint(void)
{
	return __atomic_load_n(&nregs, __ATOMIC_RELAXED) > 0;
}

static struct reg *
find(int epfd, int fd)
{
	struct reg *g;

	for (g = regs; g != NULL; g = g->next)
		if (g->epfd == epfd && g->fd == fd)
			return g;
	return NULL;
}

static void
unlink_reg(struct reg *g)
{
	struct reg **p = &regs;

	while (*p != g)
		p = &(*p)->next;
	*p = g->next;
	nregs--;
	free(g);
}

/* The kernel may hold a registration for the rock now. */
static int
live(const struct shim_rock *r)
{
	return r->ready || (r->s == NULL && !r->connecting);
}

static int
kernel_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	int busy = shim_busy, r;

	shim_busy = 1;
	r = shim_real.epoll_ctl(epfd, op, fd, ev);
	shim_busy = busy;
	return r;
}

static int
ctl_rock(struct shim_rock *r, int epfd, int op, int fd, struct epoll_event *ev)
{
	struct reg *g = find(epfd, fd);

	switch (op) {
	case EPOLL_CTL_ADD:
		if (g != NULL)
			return EEXIST;
		if ((g = calloc(1, sizeof(*g))) == NULL)
			return ENOMEM;
		*g = (struct reg){ epfd, fd, *ev, 0, 1, r, regs };
		if (live(r) && kernel_ctl(epfd, EPOLL_CTL_ADD, fd, ev) != 0) {
			int err = errno;

			free(g);
			return err;
		}
		g->in_kernel = live(r);
		regs = g;
		nregs++;
		return 0;
	case EPOLL_CTL_MOD:
		if (g == NULL)
			return ENOENT;
		g->ev = *ev;
		g->armed = 1;
		if (g->in_kernel)
			return kernel_ctl(epfd, EPOLL_CTL_MOD, fd, ev) == 0 ? 0 : errno;
		return 0;
	case EPOLL_CTL_DEL:
		if (g == NULL)
			return ENOENT;
		if (g->in_kernel)
			(void)kernel_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
		unlink_reg(g);
		return 0;
	}
	return EINVAL;
}

SHIM_EXPORT int
epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	struct shim_rock *r;
	int err;

	if (!shim_is_rock(fd) || (op != EPOLL_CTL_DEL && ev == NULL))
		return shim_real.epoll_ctl(epfd, op, fd, ev);
	shim_lock();
	if ((r = shim_rock_of(fd)) == NULL) {
		shim_unlock();
		return shim_real.epoll_ctl(epfd, op, fd, ev);
	}
	err = ctl_rock(r, epfd, op, fd, ev);
	shim_unlock();
	if (err != 0) {
		errno = err;
		return -1;
	}
	return 0;
}

void
shim_epoll_suspend(struct shim_rock *r)
{
	struct reg *g;

	for (g = regs; g != NULL; g = g->next)
		if (g->r == r && g->in_kernel) {
			(void)kernel_ctl(g->epfd, EPOLL_CTL_DEL, g->fd, NULL);
			g->in_kernel = 0;
		}
}

/* Back into the kernel: level- and edge-triggered interest see the new
 * socket's state at once; a fired EPOLLONESHOT stays disarmed. */
void
shim_epoll_resume(struct shim_rock *r)
{
	struct reg *g;

	for (g = regs; g != NULL; g = g->next) {
		struct epoll_event ev = g->ev;

		if (g->r != r || g->in_kernel)
			continue;
		if ((ev.events & EPOLLONESHOT) && !g->armed)
			ev.events = EPOLLONESHOT;
		g->in_kernel = kernel_ctl(g->epfd, EPOLL_CTL_ADD, g->fd, &ev) == 0;
	}
}

/* The ring has room again: an edge for writers waiting on EPOLLOUT. */
void
shim_epoll_kick(struct shim_rock *r)
{
	struct reg *g;

	for (g = regs; g != NULL; g = g->next)
		if (g->r == r && g->in_kernel && g->armed)
			(void)kernel_ctl(g->epfd, EPOLL_CTL_MOD, g->fd, &g->ev);
}

/* The descriptor goes away while the rock's socket lives on in the
 * engine: the kernel would keep reporting it, so it is taken out now. */
void
shim_epoll_forget_fd(int fd)
{
	struct reg *g, *next;

	for (g = regs; g != NULL; g = next) {
		next = g->next;
		if (g->fd != fd)
			continue;
		if (g->in_kernel)
			(void)kernel_ctl(g->epfd, EPOLL_CTL_DEL, g->fd, NULL);
		unlink_reg(g);
	}
}

void
shim_epoll_forget_epfd(int epfd)
{
	struct reg *g, *next;

	if (nregs == 0)
		return;
	for (g = regs; g != NULL; g = next) {
		next = g->next;
		if (g->epfd == epfd)
			unlink_reg(g);
	}
}

/* Lock held. Keep an event, correct it, or drop it (0). */
static int
keep_event(int epfd, struct epoll_event *ev)
{
	struct reg *g;

	for (g = regs; g != NULL; g = g->next)
		if (g->epfd == epfd && g->ev.data.u64 == ev->data.u64)
			break;
	if (g == NULL)
		return 1;
	if (shim_rock_error_event(g->fd, ev->events & EPOLLERR, ev->events & EPOLLHUP))
		return 0;
	if (!live(g->r))
		return 0;
	if (g->r->s != NULL && rock_direct_space(g->r->s) == 0 &&
	    (ev->events & EPOLLOUT)) {
		ev->events &= ~(uint32_t)EPOLLOUT;
		g->r->ring_blocked = 1;		/* room again: a new edge */
	}
	if (ev->events == 0)
		return 0;
	if (g->ev.events & EPOLLONESHOT)
		g->armed = 0;
	return 1;
}

static int
wait_rocks(int epfd, struct epoll_event *evs, int max, int timeout,
    const sigset_t *sigmask)
{
	int64_t deadline = timeout < 0 ? -1 : shim_now_ms() + timeout;
	int n, i, kept;

	for (;;) {
		int left = deadline < 0 ? -1 : (int)(deadline - shim_now_ms());

		if (deadline >= 0 && left < 0)
			left = 0;
		n = sigmask != NULL ?
		    shim_real.epoll_pwait(epfd, evs, max, left, sigmask) :
		    shim_real.epoll_wait(epfd, evs, max, left);
		if (n <= 0)
			return n;
		shim_lock();
		for (i = kept = 0; i < n; i++)
			if (keep_event(epfd, &evs[i]))
				evs[kept++] = evs[i];
		if (kept == 0 && (deadline < 0 || shim_now_ms() < deadline))
			/* Only full rings spoke: wait for room, not in a spin. */
			(void)shim_wait(shim_now_ms() + 10);
		shim_unlock();
		if (kept > 0 || (deadline >= 0 && shim_now_ms() >= deadline))
			return kept;
	}
}

SHIM_EXPORT int
epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout)
{
	if (shim_busy || __atomic_load_n(&nregs, __ATOMIC_RELAXED) == 0)
		return shim_real.epoll_wait(epfd, evs, max, timeout);
	return wait_rocks(epfd, evs, max, timeout, NULL);
}

SHIM_EXPORT int
epoll_pwait(int epfd, struct epoll_event *evs, int max, int timeout,
    const sigset_t *sigmask)
{
	if (shim_busy || __atomic_load_n(&nregs, __ATOMIC_RELAXED) == 0)
		return shim_real.epoll_pwait(epfd, evs, max, timeout, sigmask);
	return wait_rocks(epfd, evs, max, timeout, sigmask);
}
