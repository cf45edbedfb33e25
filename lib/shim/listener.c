/* listener.c: under ROCK_SERVE a TCP listener moves to the engine, and the program's descriptor becomes a unix listener that the engine hands ready connections to, so accept() never waits on a client. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "listener.h"
#include "rock_fdpass.h"

/* Lock held for the list; nlisteners is read without it, to keep the
 * other sockets' calls free of the lock. */
static struct shim_listener *listeners;
static int nlisteners;
/* The process whose memory the list describes: a vfork child shares it
 * and must change nothing in it. */
static pid_t listeners_pid;

static int
any_listener(void)
{
	return __atomic_load_n(&nlisteners, __ATOMIC_ACQUIRE) > 0;
}

/* Without the lock: fd may be a listener of ours (its table entry says
 * listener); every other socket's calls go on untouched. */
static int
maybe_listener(int fd)
{
	enum shim_fd_state st;

	if (!any_listener())
		return 0;
	st = shim_fd_state_of(shim_fd_get(fd));
	return st == SHIM_FD_LISTEN_OURS || st == SHIM_FD_LISTEN_TCP;
}

/* Lock held. fd's listener: by number, or a copy of it (dup, fromfd) by
 * the unix listener's name. */
static struct shim_listener *
listener_of(int fd)
{
	struct shim_listener *l;
	struct sockaddr_un sun;
	socklen_t len = sizeof(sun);

	if (!maybe_listener(fd) || listeners_pid != getpid())
		return NULL;
	for (l = listeners; l != NULL; l = l->next)
		if (l->fd == fd)
			return l;
	if (shim_real.getsockname(fd, (struct sockaddr *)&sun, &len) != 0 ||
	    sun.sun_family != AF_UNIX)
		return NULL;
	for (l = listeners; l != NULL; l = l->next)
		if (len == l->name_len && memcmp(&sun, &l->name, len) == 0)
			return l;
	return NULL;
}

/* The engine's thread runs l's events, in this process. */
static int
engine_runs(const struct shim_listener *l)
{
	return l->running && l->owner == getpid() && shim_engine_here();
}

/* Lock held: run fn on the engine's thread and wait for it. */
static void
engine_call_wait(struct shim_listener *l,
    void (*fn)(struct rock_engine *, void *))
{
	l->call_done = 0;
	l->call.fn = fn;
	l->call.arg = l;
	shim_engine_call(&l->call);
	while (!l->call_done)
		(void)shim_wait(-1);
}

/* Lock held. Out of the list first: no other thread finds it while the
 * engine lets go of it (the lock is let go meanwhile). */
static void
detach(struct shim_listener *l)
{
	struct shim_listener **pp;

	for (pp = &listeners; *pp != NULL; pp = &(*pp)->next)
		if (*pp == l) {
			*pp = l->next;
			__atomic_sub_fetch(&nlisteners, 1, __ATOMIC_RELEASE);
			break;
		}
	if (engine_runs(l))
		engine_call_wait(l, shim_park_stop);
}

/* Lock held: the listeners matching keep(l) (NULL: all), taken out of
 * the list, so that the caller may let go of the lock between them. */
static struct shim_listener *
take_out(int (*keep)(const struct shim_listener *))
{
	struct shim_listener *l, *next, *out = NULL, **pp = &listeners;

	for (l = listeners; l != NULL; l = next) {
		next = l->next;
		if (keep != NULL && keep(l)) {
			pp = &l->next;
			continue;
		}
		*pp = next;
		__atomic_sub_fetch(&nlisteners, 1, __ATOMIC_RELEASE);
		l->next = out;
		out = l;
	}
	return out;
}

/* The unix listener the program gets in the TCP one's place: fl its
 * O_NONBLOCK, backlog the program's (its queue of ready connections). */
static int
unix_listener(struct shim_listener *l, int fl, int backlog)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int u = shim_real.socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC |
	    ((fl & O_NONBLOCK) ? SOCK_NONBLOCK : 0), 0);

	if (u < 0)
		return -1;
	/* Autobind: a fresh abstract name, the kernel's choice. */
	l->name_len = sizeof(l->name);
	if (shim_real.bind(u, (struct sockaddr *)&sun, sizeof(sa_family_t)) != 0 ||
	    shim_real.getsockname(u, (struct sockaddr *)&l->name,
	    &l->name_len) != 0 || shim_real.listen(u, backlog) != 0) {
		shim_real.close(u);
		return -1;
	}
	return u;
}

/* After listen(fd) succeeded: the swap. The engine is set to feed the
 * unix listener before it takes fd's number; on any failure fd stays the
 * TCP listener, served in accept() (serve.c). */
void
shim_listener_take(int fd, int backlog)
{
	const struct shim_state *st = shim_state();
	struct shim_listener *l;
	struct event_base *base;
	int fl, fdfl, u = -1;

	if (shim_server_engine() == NULL || (base = shim_engine_base()) == NULL ||
	    !(event_base_get_features(base) & EV_FEATURE_ET))
		return;
	if ((fl = shim_real.fcntl(fd, F_GETFL)) < 0 ||
	    (fdfl = shim_real.fcntl(fd, F_GETFD)) < 0 ||
	    (l = calloc(1, sizeof(*l))) == NULL)
		return;
	l->tcp = shim_real.fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (l->tcp < 0 || (u = unix_listener(l, fl, backlog)) < 0)
		goto fail;
	(void)shim_real.fcntl(l->tcp, F_SETFL, fl | O_NONBLOCK);
	/* The kernel's queue only waits for the engine's thread: a burst
	 * of clients is not refused there (python's socketserver asks 5). */
	if (backlog < SHIM_LISTENER_BACKLOG)
		(void)shim_real.listen(l->tcp, SHIM_LISTENER_BACKLOG);
	l->fd = fd;
	l->owner = getpid();
	l->local_len = sizeof(l->local);
	if (shim_real.getsockname(l->tcp, (struct sockaddr *)&l->local,
	    &l->local_len) != 0)
		l->local_len = 0;
	shim_lock();
	engine_call_wait(l, shim_park_start);
	if (!l->running || shim_real.dup3(u, fd, (fdfl & FD_CLOEXEC) ?
	    O_CLOEXEC : 0) < 0) {
		if (l->running)
			engine_call_wait(l, shim_park_stop);
		shim_unlock();
		(void)shim_real.fcntl(l->tcp, F_SETFL, fl);
		goto fail;
	}
	l->next = listeners;
	listeners = l;
	listeners_pid = getpid();
	__atomic_add_fetch(&nlisteners, 1, __ATOMIC_RELEASE);
	shim_unlock();
	shim_real.close(u);
	rlog_debug(&st->log, "fd %d: a listener the engine accepts on (fd %d); "
	    "the program accepts what is ready", fd, l->tcp);
	return;
fail:
	if (u >= 0)
		shim_real.close(u);
	if (l->tcp >= 0)
		shim_real.close(l->tcp);
	free(l);
}

/* Lock held; l taken out of the list. The TCP listener back under the
 * program's number (its FD_CLOEXEC and O_NONBLOCK kept, and its epoll
 * registrations, which were the unix listener's), for an exec or a fork
 * that shares it with children, which have no engine. */
static void
give_back(struct shim_listener *l)
{
	int fl = shim_real.fcntl(l->fd, F_GETFL);
	int fdfl = shim_real.fcntl(l->fd, F_GETFD);
	int i;

	if (engine_runs(l))
		engine_call_wait(l, shim_park_stop);
	if (fl >= 0 && fdfl >= 0) {
		(void)shim_real.fcntl(l->tcp, F_SETFL, fl);
		(void)shim_real.dup3(l->tcp, l->fd,
		    (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0);
		for (i = 0; i < l->nregs; i++)
			(void)shim_real.epoll_ctl(l->regs[i].epfd,
			    EPOLL_CTL_ADD, l->fd, &l->regs[i].ev);
	}
	shim_real.close(l->tcp);
	free(l);
}

/* close(fd), or a dup2 onto it: the program's own number ends the
 * listener (a copy of it does not). */
void
shim_listener_forget(int fd)
{
	struct shim_listener *l;

	if (!maybe_listener(fd))
		return;
	shim_lock();
	for (l = listeners; l != NULL && l->fd != fd; l = l->next)
		;
	if (l != NULL && listeners_pid == getpid()) {
		detach(l);
		shim_real.close(l->tcp);
		free(l);
	}
	shim_unlock();
}

/* epoll_ctl on a listener of ours: what it asked for is kept, to be the
 * TCP listener's should it be given back. */
void
shim_listener_epoll(int epfd, int op, int fd, const struct epoll_event *ev)
{
	struct shim_listener *l;
	int i;

	if (!maybe_listener(fd))
		return;
	shim_lock();
	if ((l = listener_of(fd)) != NULL && l->fd == fd) {
		for (i = 0; i < l->nregs && l->regs[i].epfd != epfd; i++)
			;
		if (op == EPOLL_CTL_DEL && i < l->nregs)
			l->regs[i] = l->regs[--l->nregs];
		else if (op != EPOLL_CTL_DEL && ev != NULL &&
		    i < SHIM_LISTENER_REGS) {
			l->regs[i].epfd = epfd;
			l->regs[i].ev = *ev;
			if (i == l->nregs)
				l->nregs++;
		}
	}
	shim_unlock();
}

/* The TCP listener for the calls that ask about it (getsockname, the
 * options), or -1 when fd is no listener of ours. */
int
shim_listener_tcp(int fd)
{
	struct shim_listener *l;
	int tcp;

	if (!maybe_listener(fd))
		return -1;
	shim_lock();
	tcp = (l = listener_of(fd)) != NULL ? l->tcp : -1;
	shim_unlock();
	return tcp;
}

/* A plain connection: the program's flags, and what accept() says. */
static int
take_plain(int lfd, int tcp, int pfd, struct sockaddr *addr, socklen_t *len,
    int flags)
{
	struct sockaddr_storage peer;
	socklen_t plen = sizeof(peer), lglen = sizeof(struct linger);
	struct linger lg;
	int fl = shim_real.fcntl(pfd, F_GETFL);

	/* Reset before the program took it: the kernel's accept skips
	 * those too. */
	if (shim_real.getpeername(pfd, (struct sockaddr *)&peer, &plen) != 0) {
		shim_real.close(pfd);
		return -1;
	}
	(void)shim_real.fcntl(pfd, F_SETFL, (flags & SOCK_NONBLOCK) ?
	    fl | O_NONBLOCK : fl & ~O_NONBLOCK);
	/* The engine set a reset for a close before the program had it;
	 * what the program gets is what its listener would give. */
	if (tcp < 0 || shim_real.getsockopt(tcp, SOL_SOCKET, SO_LINGER, &lg,
	    &lglen) != 0)
		memset(&lg, 0, sizeof(lg));
	(void)shim_real.setsockopt(pfd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	shim_accepted(lfd, pfd);
	if (addr != NULL && len != NULL) {
		memcpy(addr, &peer, *len < plen ? *len : plen);
		*len = plen;
	}
	return pfd;
}

/* A rock the engine proved: it becomes the program's on pfd, a copy of
 * its connection (or of the one a reconnect put in since). */
static int
take_rock(uint64_t token, int tcp, int pfd, struct sockaddr *addr,
    socklen_t *len, int flags)
{
	struct shim_parked *p;
	struct shim_rock *r;
	int cur, fl;

	shim_lock();
	if ((p = shim_park_handed(token)) == NULL || p->r->s == NULL) {
		shim_unlock();
		shim_real.close(pfd);
		return -1;
	}
	r = p->r;
	shim_park_taken(p);
	cur = rock_direct_fd(r->s);
	if (cur >= 0 && syscall(SYS_kcmp, getpid(), getpid(), KCMP_FILE, cur,
	    pfd) != 0)
		(void)shim_real.dup3(cur, pfd, (flags & SOCK_CLOEXEC) ?
		    O_CLOEXEC : 0);
	if ((fl = shim_real.fcntl(pfd, F_GETFL)) >= 0)
		(void)shim_real.fcntl(pfd, F_SETFL, (flags & SOCK_NONBLOCK) ?
		    fl | O_NONBLOCK : fl & ~O_NONBLOCK);
	shim_rock_adopt(r, pfd, tcp);
	if (addr != NULL && len != NULL) {
		memcpy(addr, &r->peer, *len < r->peer_len ? *len : r->peer_len);
		*len = r->peer_len;
	}
	shim_unlock();
	return pfd;
}

/* One hand-over from the engine: the connection's descriptor, or -1 (a
 * stranger's connection to the unix listener, or one that went). */
static int
take(int lfd, int u, pid_t owner, int tcp, struct sockaddr *addr,
    socklen_t *len, int flags)
{
	struct shim_hand_msg msg;
	struct pollfd pf = { u, POLLIN, 0 };
	struct ucred cred;
	socklen_t clen = sizeof(cred);
	ssize_t n;
	int pfd;

	if (shim_real.getsockopt(u, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0 ||
	    cred.pid != owner)
		return -1;
	/* The engine sends right after its connect, which the program's
	 * accept may come between. */
	while (shim_real.poll(&pf, 1, 1000) < 0 && errno == EINTR)
		;
	if ((n = rock_fd_recv(u, &msg, sizeof(msg), &pfd, NULL)) < 0 || pfd < 0)
		return -1;
	if (n != (ssize_t)sizeof(msg) || msg.magic != SHIM_HAND_MAGIC) {
		shim_real.close(pfd);
		return -1;
	}
	if (!(flags & SOCK_CLOEXEC))
		(void)shim_real.fcntl(pfd, F_SETFD, 0);
	if (msg.kind == SHIM_HAND_PLAIN)
		return take_plain(lfd, tcp, pfd, addr, len, flags);
	if (msg.kind == SHIM_HAND_ROCK)
		return take_rock(msg.token, tcp, pfd, addr, len, flags);
	shim_real.close(pfd);
	return -1;
}

/* accept() on a listener of ours: *ours 1 and the result; else *ours 0.
 * Blocking, non-blocking, EINTR and SO_RCVTIMEO are the unix
 * listener's, so the kernel's. */
int
shim_listener_accept(int fd, struct sockaddr *addr, socklen_t *len,
    int flags, int *ours)
{
	struct shim_listener *l;
	pid_t owner;
	int u, pfd, tcp, err, cancel;

	*ours = 0;
	if (!maybe_listener(fd))
		return -1;
	shim_lock();
	if ((l = listener_of(fd)) != NULL) {
		l->accepted = 1;
		owner = l->owner;
		tcp = l->tcp;
	}
	shim_unlock();
	if (l == NULL)
		return -1;
	*ours = 1;
	for (;;) {
		if ((u = shim_real.accept4(fd, NULL, NULL, SOCK_CLOEXEC)) < 0)
			return -1;
		/* Not a cancellation point once a connection is taken: it
		 * would be lost, a rock's client left waiting. */
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
		pfd = take(fd, u, owner, tcp, addr, len, flags);
		err = errno;
		shim_real.close(u);
		pthread_setcancelstate(cancel, NULL);
		errno = err;
		if (pfd >= 0)
			return pfd;
	}
}

/* listen() again on a listener of ours: its backlog is the unix one's. */
int
shim_listener_listen(int fd, int backlog, int *ours)
{
	*ours = shim_listener_tcp(fd) >= 0;
	return *ours ? shim_real.listen(fd, backlog) : -1;
}

static void drain_engine(void);

static int
was_accepted(const struct shim_listener *l)
{
	return l->accepted;
}

/* A fork's child has no engine. A listener the program has accepted on
 * stays the engine's here (a server that forks per connection: its
 * children's copies are what they inherit); one it never accepted on
 * (a pre-forking server, a daemon's fork, a helper spawned before the
 * first client) is shared with the children, who have no engine: it is
 * the kernel's again, here and there. Lock held (child), not held
 * (parent). */
void
shim_listener_after_fork(int child)
{
	struct shim_listener *l, *back;

	if (!any_listener())
		return;
	if (!child)
		shim_lock();
	if (child) {
		shim_park_forget_handed_child();
		for (l = listeners; l != NULL; l = l->next)
			shim_park_forget_child(l);
	}
	back = take_out(was_accepted);
	listeners_pid = getpid();
	while ((l = back) != NULL) {
		back = l->next;
		if (child)
			l->running = 0;
		give_back(l);
	}
	if (!child)
		shim_unlock();
}

/* Before exec: every listener is the kernel's again, under its number;
 * those without FD_CLOEXEC pass to the new image so. A vfork child, or
 * a signal handler that interrupted the shim, changes only descriptors. */
void
shim_listener_exec(void)
{
	struct shim_listener *l, *back;
	int fdfl, nested;

	if (!any_listener())
		return;
	if (listeners_pid != getpid() || shim_lock_within(1000, &nested) != 0 ||
	    nested) {
		if (listeners_pid == getpid() && nested)
			shim_unlock();
		for (l = listeners; l != NULL; l = l->next)
			if ((fdfl = shim_real.fcntl(l->fd, F_GETFD)) >= 0 &&
			    !(fdfl & FD_CLOEXEC))
				(void)shim_real.dup3(l->tcp, l->fd, 0);
		return;
	}
	back = take_out(NULL);
	while ((l = back) != NULL) {
		back = l->next;
		give_back(l);
	}
	if (shim_engine_here())
		drain_engine();
	shim_unlock();
}

/* Lock held, the engine running here and its listeners stopped: what it
 * was handing to the program ends, and the handshakes and reconnects in
 * progress are let end (500 ms at most), so that a keeper inherits none
 * of their descriptors. */
static void
drain_engine(void)
{
	struct rock_engine *e = shim_engine_running();
	struct shim_call drop;
	int64_t until;
	int done = 0;

	drop.fn = shim_park_drop_handed;
	drop.arg = &done;
	shim_engine_call(&drop);
	while (!done)
		(void)shim_wait(-1);
	until = shim_now_ms() + 500;
	while (rock_engine_nhandshakes(e) > 0 && shim_now_ms() < until)
		(void)shim_wait(shim_now_ms() + 10);
}

/* The program leaves (exit): the engine accepts nothing more, and what
 * it had not handed over yet goes, before a keeper inherits the loop
 * (which keeps no descriptor of the program's). */
void
shim_listener_leave(void)
{
	struct shim_listener *l, *back;

	if (!any_listener() || listeners_pid != getpid())
		return;
	shim_lock();
	back = take_out(NULL);
	while ((l = back) != NULL) {
		back = l->next;
		if (engine_runs(l))
			engine_call_wait(l, shim_park_stop);
		shim_real.close(l->tcp);
		free(l);
	}
	if (shim_engine_here())
		drain_engine();
	shim_unlock();
}

/* In a keeper (a fork at the program's exit, after shim_listener_leave):
 * the records go, and the copies of the TCP listeners. */
void
shim_listener_keeper(void)
{
	struct shim_listener *l, *back = take_out(NULL);

	while ((l = back) != NULL) {
		back = l->next;
		shim_real.close(l->tcp);
		free(l);
	}
}

/* addr is one of this host's addresses: it can be bound. */
static int
local_address(const struct sockaddr *addr, socklen_t len)
{
	struct sockaddr_storage a;
	int u = shim_real.socket(addr->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int ok;

	if (u < 0 || len > sizeof(a))
		return u >= 0 ? shim_real.close(u), 0 : 0;
	memcpy(&a, addr, len);
	if (a.ss_family == AF_INET)
		((struct sockaddr_in *)&a)->sin_port = 0;
	else
		((struct sockaddr_in6 *)&a)->sin6_port = 0;
	ok = shim_real.bind(u, (struct sockaddr *)&a, len) == 0;
	shim_real.close(u);
	return ok;
}

/* The address and port of a, IPv4-mapped IPv6 as IPv4: 0, or -1. */
static int
endpoint(const struct sockaddr_storage *a, struct in6_addr *ip, int *port)
{
	const struct sockaddr_in *a4 = (const struct sockaddr_in *)a;
	const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)a;

	if (a->ss_family == AF_INET) {
		memset(ip, 0, sizeof(*ip));
		ip->s6_addr[10] = ip->s6_addr[11] = 0xff;
		memcpy(&ip->s6_addr[12], &a4->sin_addr, 4);
		*port = a4->sin_port;
		return 0;
	}
	if (a->ss_family != AF_INET6)
		return -1;
	*ip = a6->sin6_addr;
	*port = a6->sin6_port;
	return 0;
}

/* A connect to one of this process's served listeners stays plain TCP:
 * both ends of the rock would be one engine's. */
int
shim_listener_is_self(const struct sockaddr *addr, socklen_t len)
{
	static const struct in6_addr any6 = IN6ADDR_ANY_INIT;
	struct sockaddr_storage dst;
	struct in6_addr dip, lip, any4 = { 0 };
	struct shim_listener *l;
	int self = 0, any = 0, dport, lport;

	if (!any_listener() || len > sizeof(dst))
		return 0;
	memset(&dst, 0, sizeof(dst));
	memcpy(&dst, addr, len);
	if (endpoint(&dst, &dip, &dport) != 0)
		return 0;
	any4.s6_addr[10] = any4.s6_addr[11] = 0xff;
	shim_lock();
	for (l = listeners; l != NULL && !self; l = l->next) {
		if (l->owner != getpid() || l->local_len == 0 ||
		    endpoint(&l->local, &lip, &lport) != 0 || lport != dport)
			continue;
		if (memcmp(&lip, &any6, sizeof(lip)) == 0 ||
		    memcmp(&lip, &any4, sizeof(lip)) == 0)
			any = 1;
		else
			self = memcmp(&lip, &dip, sizeof(lip)) == 0;
	}
	shim_unlock();
	return self || (any && local_address(addr, len));
}
