/* epoll.c: epoll interest in rocks, kept across suspension and the socket swap. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "shim.h"

/* The kernel keys an epoll registration on (descriptor, open file): a
 * swapped-in socket is a new file, so each registration on a rock is
 * recorded here, taken out of the kernel while suspended and put back
 * after the swap.
 *
 * Every lookup is O(1) in the number of registrations (issue 10: a scan per
 * event was 40 % of a client's CPU at 2,000 rocks, and N registrations cost
 * O(N^2)): a registration is on its rock's list (ctl, suspension, swap,
 * close of the descriptor), on its epoll set's list, whose head is kept by
 * descriptor (close of the epoll descriptor), and in a hash table on
 * (epoll descriptor, the program's data), which is all an event carries.
 * Everything here is under shim_lock(). */
struct shim_reg {
	int epfd, fd;
	struct epoll_event ev;
	int in_kernel;
	int armed;		/* EPOLLONESHOT: not fired since armed */
	struct shim_rock *r;
	struct shim_reg *r_next, *r_prev;	/* the rock's */
	struct shim_reg *ep_next, *ep_prev;	/* the epoll set's */
	struct shim_reg *h_next;		/* hash chain */
};

static struct shim_fdmap sets;	/* epoll descriptor -> its registrations */
static struct shim_reg **tab;	/* by (epfd, data) */
static size_t tab_size;		/* a power of two, or 0 */
static int nregs;

#define TAB_MIN 64

int
shim_nregs_hint(void)
{
	return __atomic_load_n(&nregs, __ATOMIC_RELAXED) > 0;
}

static size_t
slot(int epfd, uint64_t data, size_t size)
{
	uint64_t x = data ^ ((uint64_t)(unsigned)epfd * 0x9e3779b97f4a7c15ull);

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return (size_t)x & (size - 1);
}

static void
hash_in(struct shim_reg *g)
{
	size_t i = slot(g->epfd, g->ev.data.u64, tab_size);

	g->h_next = tab[i];
	tab[i] = g;
}

static void
hash_out(struct shim_reg *g)
{
	struct shim_reg **p = &tab[slot(g->epfd, g->ev.data.u64, tab_size)];

	while (*p != g)
		p = &(*p)->h_next;
	*p = g->h_next;
}

/* Room for one more at a load of at most 1; ENOMEM only when there is no
 * table at all (a failed doubling keeps the old one, chains get longer). */
static int
hash_grow(void)
{
	size_t size = tab_size == 0 ? TAB_MIN : tab_size * 2, i;
	struct shim_reg **old = tab, **nt, *g, *next;

	if ((size_t)nregs < tab_size)
		return 0;
	if ((nt = calloc(size, sizeof(*nt))) == NULL)
		return tab_size == 0 ? ENOMEM : 0;
	for (i = 0; i < tab_size; i++)
		for (g = old[i]; g != NULL; g = next) {
			next = g->h_next;
			g->h_next = nt[slot(g->epfd, g->ev.data.u64, size)];
			nt[slot(g->epfd, g->ev.data.u64, size)] = g;
		}
	tab = nt;
	tab_size = size;
	free(old);
	return 0;
}

static struct shim_reg *
find(const struct shim_rock *r, int epfd, int fd)
{
	struct shim_reg *g;

	for (g = r->regs; g != NULL; g = g->r_next)
		if (g->epfd == epfd && g->fd == fd)
			return g;
	return NULL;
}

static int
link_reg(struct shim_reg *g)
{
	struct shim_reg *head = shim_fdmap_get(&sets, g->epfd);

	if (shim_fdmap_set(&sets, g->epfd, g) != 0)
		return ENOMEM;
	g->ep_next = head;
	if (head != NULL)
		head->ep_prev = g;
	g->r_next = g->r->regs;
	if (g->r->regs != NULL)
		g->r->regs->r_prev = g;
	g->r->regs = g;
	hash_in(g);
	__atomic_store_n(&nregs, nregs + 1, __ATOMIC_RELAXED);
	return 0;
}

static void
unlink_reg(struct shim_reg *g)
{
	hash_out(g);
	if (g->ep_prev != NULL)
		g->ep_prev->ep_next = g->ep_next;
	else
		(void)shim_fdmap_set(&sets, g->epfd, g->ep_next);
	if (g->ep_next != NULL)
		g->ep_next->ep_prev = g->ep_prev;
	if (g->r_prev != NULL)
		g->r_prev->r_next = g->r_next;
	else
		g->r->regs = g->r_next;
	if (g->r_next != NULL)
		g->r_next->r_prev = g->r_prev;
	__atomic_store_n(&nregs, nregs - 1, __ATOMIC_RELAXED);
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

/* A registration of the program's, as the kernel holds it: a reader's
 * with EPOLLRDHUP, so that a FIN comes to keep_event's judgement
 * (decision 20) even when the program did not ask for it. Not a writer's
 * (a FIN, once judged, would wake it for nothing again and again), nor an
 * EPOLLEXCLUSIVE one (the kernel refuses the pair). */
static int
kernel_ctl_reg(int epfd, int op, int fd, const struct epoll_event *ev)
{
	struct epoll_event k = *ev;

	if ((k.events & EPOLLIN) && !(k.events & EPOLLEXCLUSIVE))
		k.events |= EPOLLRDHUP;
	return kernel_ctl(epfd, op, fd, &k);
}

static int
ctl_add(struct shim_rock *r, int epfd, int fd, struct epoll_event *ev)
{
	struct shim_reg *g;
	int err;

	if (find(r, epfd, fd) != NULL)
		return EEXIST;
	if ((err = hash_grow()) != 0 || (g = calloc(1, sizeof(*g))) == NULL)
		return err != 0 ? err : ENOMEM;
	*g = (struct shim_reg){ .epfd = epfd, .fd = fd, .ev = *ev, .armed = 1,
	    .r = r };
	if (live(r) && kernel_ctl_reg(epfd, EPOLL_CTL_ADD, fd, ev) != 0) {
		err = errno;
		free(g);
		return err;
	}
	g->in_kernel = live(r);
	if ((err = link_reg(g)) != 0) {
		if (g->in_kernel)
			(void)kernel_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
		free(g);
	}
	return err;
}

static int
ctl_rock(struct shim_rock *r, int epfd, int op, int fd, struct epoll_event *ev)
{
	struct shim_reg *g;

	if (op == EPOLL_CTL_ADD)
		return ctl_add(r, epfd, fd, ev);
	if (op != EPOLL_CTL_MOD && op != EPOLL_CTL_DEL)
		return EINVAL;
	if ((g = find(r, epfd, fd)) == NULL)
		return ENOENT;
	if (op == EPOLL_CTL_DEL) {
		if (g->in_kernel)
			(void)kernel_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
		unlink_reg(g);
		return 0;
	}
	hash_out(g);	/* the data, and so the slot, may change */
	g->ev = *ev;
	hash_in(g);
	g->armed = 1;
	if (g->in_kernel)
		return kernel_ctl_reg(epfd, EPOLL_CTL_MOD, fd, ev) == 0 ? 0 : errno;
	return 0;
}

SHIM_EXPORT int
epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	struct shim_rock *r;
	int err;

	if (!shim_is_rock(fd) || (op != EPOLL_CTL_DEL && ev == NULL)) {
		if ((err = shim_real.epoll_ctl(epfd, op, fd, ev)) == 0 &&
		    !shim_busy)
			shim_listener_epoll(epfd, op, fd, ev);
		return err;
	}
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
	struct shim_reg *g;

	for (g = r->regs; g != NULL; g = g->r_next)
		if (g->in_kernel) {
			(void)kernel_ctl(g->epfd, EPOLL_CTL_DEL, g->fd, NULL);
			g->in_kernel = 0;
		}
}

/* Back into the kernel: level- and edge-triggered interest see the new
 * socket's state at once; a fired EPOLLONESHOT stays disarmed. */
void
shim_epoll_resume(struct shim_rock *r)
{
	struct shim_reg *g;

	for (g = r->regs; g != NULL; g = g->r_next) {
		struct epoll_event ev = g->ev;

		if (g->in_kernel)
			continue;
		if ((ev.events & EPOLLONESHOT) && !g->armed)
			ev.events = EPOLLONESHOT;
		g->in_kernel = kernel_ctl_reg(g->epfd, EPOLL_CTL_ADD, g->fd,
		    &ev) == 0;
	}
}

/* Called once r's descriptors name another file (fork.c): its
 * registrations go back into the kernel on that file, as the program's
 * own, and the record forgets them. */
void
shim_epoll_give_up(struct shim_rock *r)
{
	struct shim_reg *g;

	while ((g = r->regs) != NULL) {
		struct epoll_event ev = g->ev;

		if (g->in_kernel)
			(void)kernel_ctl(g->epfd, EPOLL_CTL_DEL, g->fd, NULL);
		if ((ev.events & EPOLLONESHOT) && !g->armed)
			ev.events = EPOLLONESHOT;
		(void)kernel_ctl(g->epfd, EPOLL_CTL_ADD, g->fd, &ev);
		unlink_reg(g);
	}
}

/* The ring has room again: an edge for writers waiting on EPOLLOUT. */
void
shim_epoll_kick(struct shim_rock *r)
{
	struct shim_reg *g;

	for (g = r->regs; g != NULL; g = g->r_next)
		if (g->in_kernel && g->armed)
			(void)kernel_ctl_reg(g->epfd, EPOLL_CTL_MOD, g->fd, &g->ev);
}

/* The descriptor goes away while the rock's socket lives on in the
 * engine: the kernel would keep reporting it, so it is taken out now. */
void
shim_epoll_forget_fd(struct shim_rock *r, int fd)
{
	struct shim_reg *g, *next;

	for (g = r->regs; g != NULL; g = next) {
		next = g->r_next;
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
	struct shim_reg *g;

	if (nregs == 0)
		return;
	while ((g = shim_fdmap_get(&sets, epfd)) != NULL)
		unlink_reg(g);
}

/* Lock held. Keep an event, correct it, or drop it (0). */
static int
keep_event(int epfd, struct epoll_event *ev)
{
	struct shim_reg *g;

	if (tab_size == 0)
		return 1;
	for (g = tab[slot(epfd, ev->data.u64, tab_size)]; g != NULL; g = g->h_next)
		if (g->epfd == epfd && g->ev.data.u64 == ev->data.u64)
			break;
	if (g == NULL)
		return 1;
	if (shim_rock_error_event(g->fd, ev->events & EPOLLERR, ev->events & EPOLLHUP))
		return 0;
	if (!live(g->r))
		return 0;
	if (shim_rock_error_pending(g->r))
		ev->events |= EPOLLERR;		/* ended: as a reset shows */
	if ((ev->events & EPOLLRDHUP) && !(ev->events & EPOLLERR)) {
		switch (shim_rock_fin_check(g->r, g->fd)) {
		case 1:
			ev->events &= ~(uint32_t)(EPOLLRDHUP | EPOLLHUP);
			break;
		case -1:
			return 0;	/* and out of the set until decided */
		case -2:
			/* Of a socket swapped out since: nothing to show,
			 * and a one-shot interest the kernel spent on it is
			 * the program's still. */
			if (g->ev.events & EPOLLONESHOT)
				(void)kernel_ctl_reg(epfd, EPOLL_CTL_MOD, g->fd,
				    &g->ev);
			return 0;
		}
	}
	ev->events &= g->ev.events | EPOLLERR | EPOLLHUP;
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
