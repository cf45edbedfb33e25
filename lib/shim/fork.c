/* fork.c: a rock that fork() shares: its descriptors become one end of a loopback connection whose other end this process relays to the rock. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rock_sys.h"
#include "shim.h"

/*
 * Every process holding a copy of a TCP socket reads from and writes to
 * one stream; the kernel orders them. A rock's counts and ring live in the
 * process whose engine runs it, so at fork every copy the program holds is
 * replaced by one end of a loopback TCP connection, and the engine's
 * process copies between its other end and the rock (issue 11, item 1).
 * The kernel then orders the holders' reads and writes as for any shared
 * socket, each byte is counted once, by the relay, and poll, epoll, exec
 * and a static image all see an ordinary socket. When the program exits,
 * its keeper (keeper.c) goes on relaying for the holders left.
 *
 * The holders see what TCP would show them: the peer's authenticated end
 * is a FIN, a rock that failed is a reset (ECONNRESET, never end of file),
 * and when every holder has closed, the rock is closed as the program
 * would have closed it.
 */

#define RELAY_BUF 65536
/* Whether holders that shut their writing closed: first look, and the
 * longest gap between two (doubling from the first). */
#define HOLDERS_LOOK_MS		1000
#define HOLDERS_LOOK_MAX_MS	8000

/* One direction: what was read and is not yet written on. */
struct flow {
	size_t off, len;
	int eof;		/* its source ended */
	int shut;		/* and that end was passed on */
	/* Its source's last read took all there was (a short read) before
	 * any reset: the sender's bytes were all in (on loopback they move
	 * as soon as there is room). Kept for the holders' side (track). */
	int track, drained;
	char buf[RELAY_BUF];
};

struct relay {
	int prog;		/* ours of the holders' loopback connection */
	int rock;		/* the rock, under a descriptor of the relay's */
	in_port_t port;		/* prog's port: how a holder's copy is known */
	struct sockaddr_storage peer;	/* what getpeername says to holders */
	socklen_t peer_len;
	int done;
	int holders_reset;	/* the holders' reset may have cut their bytes */
	int clean;		/* both ends passed: prog closes with no reset */
	int down_dead;		/* no holder reads any more: the peer's bytes go */
	int64_t check_ms;	/* half closed by the holders: when to look
				 * whether they all closed, */
	int check_gap_ms;	/* and how long after the last look */
	struct relay *next;
	struct flow up, down;	/* holders -> rock, rock -> holders */
};

/* Lists change under shim_lock(), so a fork's child sees them whole. */
static struct {
	struct relay *pending;	/* set up at a fork, not yet taken */
	struct relay *running;	/* the thread's */
	int wake_fd;		/* eventfd: a new relay, or stop */
	/* The socket table holders_gone() reads, opened by the program's
	 * call that starts the thread and kept, out of the low numbers: an
	 * open in the thread would take the lowest free number for the
	 * length of a scan, the very number a program that just closed it
	 * may be about to dup2 onto (stdio's close is one we never see). */
	FILE *tcp;
	int tcp_fd;		/* its number (atomic: shim_fork_relay_owns_fd) */
	dev_t tcp_dev;		/* and what it names: a program that closed */
	ino_t tcp_ino;		/* it behind our back may have reused it */
	int started, stopping;
	pthread_t thread;
} rl = { .wake_fd = -1, .tcp_fd = -1 };

static void
wake(void)
{
	uint64_t one = 1;

	if (rl.wake_fd >= 0)
		(void)!shim_real.write(rl.wake_fd, &one, sizeof(one));
}

/* Two ends of a new loopback connection; prog is non-blocking. The
 * accepted end must be our own connect's: anyone may connect meanwhile. */
static int
loopback_pair(int *prog, int *holder)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
	    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) }, mine, got;
	socklen_t len = sizeof(sin);
	struct linger lg = { 1, 0 };
	int l, c = -1, s = -1, one = 1, tries;

	if ((l = shim_real.socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -1;
	if (bind(l, (struct sockaddr *)&sin, sizeof(sin)) != 0 ||
	    shim_real.listen(l, 8) != 0 ||
	    shim_real.getsockname(l, (struct sockaddr *)&sin, &len) != 0 ||
	    (c = shim_real.socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    shim_real.connect(c, (struct sockaddr *)&sin, sizeof(sin)) != 0 ||
	    shim_real.getsockname(c, (struct sockaddr *)&mine, &(socklen_t){ sizeof(mine) }) != 0)
		goto fail;
	for (tries = 0; tries < 8; tries++) {
		len = sizeof(got);
		s = shim_real.accept4(l, (struct sockaddr *)&got, &len,
		    SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (s < 0)
			goto fail;
		if (got.sin_port == mine.sin_port &&
		    got.sin_addr.s_addr == mine.sin_addr.s_addr)
			break;
		shim_real.close(s);
		s = -1;
	}
	if (s < 0)
		goto fail;
	shim_real.close(l);
	(void)shim_real.setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* However the relay ends short of both ends (its process killed, a
	 * failed rock), the holders hear a reset, never an end of file; once
	 * both FINs have passed, finish() closes it without one. */
	(void)shim_real.setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	*prog = s;
	*holder = c;
	return 0;
fail:
	if (c >= 0)
		shim_real.close(c);
	shim_real.close(l);
	return -1;
}

/* Lock held. Every number naming r comes to name holder (its flags
 * kept), in the given state. The kernel keys epoll interest on the open
 * file: out while the numbers still name the rock's socket, back on the
 * new one. */
static void
put_under(struct shim_rock *r, int holder, enum shim_fd_state state)
{
	int i;

	shim_epoll_suspend(r);
	for (i = 0; i < r->nfds; i++) {
		int fdfl = shim_real.fcntl(r->fds[i], F_GETFD);

		/* Replaced first: a call racing in finds the number a rock's
		 * until it names the holder end. */
		(void)shim_real.dup3(holder, r->fds[i],
		    fdfl >= 0 && (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0);
		shim_rock_unbind(r->fds[i]);
		shim_fd_set(r->fds[i], state, 0);
	}
	shim_epoll_give_up(r);
}

/* Lock held. r's descriptors become the holder end of a new loopback
 * connection, r itself the relay's; 0 when it was set up. */
static int
relay_rock(struct shim_rock *r)
{
	struct relay *x;
	struct sockaddr_in name;
	int old = r->fds[0], holder, own, fl;

	if ((x = calloc(1, sizeof(*x))) == NULL)
		return -1;
	if (loopback_pair(&x->prog, &holder) != 0) {
		free(x);
		return -1;
	}
	if ((own = shim_real.fcntl(old, F_DUPFD_CLOEXEC, 3)) < 0 ||
	    shim_real.getsockname(x->prog, (struct sockaddr *)&name,
	    &(socklen_t){ sizeof(name) }) != 0) {
		if (own >= 0)
			shim_real.close(own);
		shim_real.close(holder);
		shim_real.close(x->prog);
		free(x);
		return -1;
	}
	shim_copy_options(old, holder);
	shim_opts_apply(r, holder);
	if ((fl = shim_real.fcntl(old, F_GETFL)) >= 0)
		(void)shim_real.fcntl(holder, F_SETFL, fl);
	/* The program's shutdown of its writing holds for the copies too. */
	if (r->wr_shut) {
		(void)shim_real.shutdown(holder, SHUT_WR);
		x->up.eof = x->up.shut = 1;
	}
	put_under(r, holder, SHIM_FD_RELAYED);
	shim_real.close(holder);
	r->nfds = 1;
	r->fds[0] = own;
	shim_rock_bind(own, r);
	r->relayed = 1;
	x->rock = own;
	x->up.track = x->up.drained = 1;	/* no holder has written yet */
	x->port = name.sin_port;
	memcpy(&x->peer, &r->peer, sizeof(x->peer));
	x->peer_len = r->peer_len;
	x->next = rl.pending;
	rl.pending = x;
	return 0;
}

/* Lock held. A rock a call of the program is using, or one not connected
 * yet, stays as it is. */
static int
relayable(const struct shim_rock *r)
{
	return r->s != NULL && !r->relayed && !r->connecting && !r->released &&
	    r->nfds > 0 && r->inflight == 0 && !r->writer && r->holds == 0;
}

static int
wake_ready(void)
{
	if (rl.wake_fd < 0)
		rl.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return rl.wake_fd >= 0;
}

int
shim_fork_relay_all(void)
{
	struct shim_rock *r;
	int n = 0;

	if (!wake_ready())
		return 0;
	for (r = shim_rock_first(); r != NULL; r = r->next)
		if (relayable(r) && relay_rock(r) == 0)
			n++;
	return n;
}

/* Lock held. A rock that failed, its error not yet seen by the program
 * (stdio.c): its descriptors become the holders' end of a loopback
 * connection reset at once, so that stdio's own reads see ECONNRESET,
 * never the end of file its shut socket would give. r is freed. */
int
shim_fork_relay_failed(struct shim_rock *r)
{
	int prog, holder, fl;

	if (r->holds > 0 || r->inflight > 0 || loopback_pair(&prog, &holder) != 0)
		return -1;
	if ((fl = shim_real.fcntl(r->fds[0], F_GETFL)) >= 0)
		(void)shim_real.fcntl(holder, F_SETFL, fl);
	put_under(r, holder, SHIM_FD_UNKNOWN);
	r->nfds = 0;
	shim_real.close(holder);
	shim_real.close(prog);	/* linger {1, 0}: a reset */
	shim_rock_free(r);
	return 0;
}

/* Lock held. One rock behind a relay (stdio.c): 0, or -1 when it cannot
 * be; shim_fork_relay_start() then runs it. */
int
shim_fork_relay_one(struct shim_rock *r)
{
	if (r->relayed)
		return 0;
	if (!wake_ready() || !relayable(r))
		return -1;
	return relay_rock(r);
}

/* ---- the relay's thread: it uses the rock as the program would */

/* No holder reads any more (all closed): what the peer sends is dropped,
 * while what the holders wrote before closing still goes to the rock. */
static void
nobody_reads(struct relay *x)
{
	x->down_dead = 1;
	x->down.len = 0;
}

enum { FLOW_OK, FLOW_RECV_FAILED, FLOW_SEND_FAILED };

/* A reset came in (reads still give what was queued before it): what
 * its sender had not sent yet is gone. */
static int
was_reset(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	return getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
	    ti.tcpi_state == TCP_CLOSE;
}

/* Move what one direction can: a read when its buffer is empty, writes
 * while the far side takes them, the end once all is written. The hooked
 * calls (the rock's side) and the kernel's have the same shape. */
static int
pump(struct flow *f, int from, int to,
    ssize_t (*rcv)(int, void *, size_t, int),
    ssize_t (*snd)(int, const void *, size_t, int), int (*shut)(int, int))
{
	ssize_t n;

	if (!f->eof && f->len == 0) {
		n = rcv(from, f->buf, sizeof(f->buf), MSG_DONTWAIT);
		if (f->track && n > 0)
			f->drained = (size_t)n < sizeof(f->buf) && !was_reset(from);
		else if (f->track && n < 0 && errno == EAGAIN)
			f->drained = 1;
		if (n > 0) {
			f->off = 0;
			f->len = (size_t)n;
		} else if (n == 0) {
			f->eof = 1;
		} else if (errno != EAGAIN && errno != EINTR) {
			return FLOW_RECV_FAILED;
		}
	}
	while (f->len > 0) {
		if ((n = snd(to, f->buf + f->off, f->len,
		    MSG_DONTWAIT | MSG_NOSIGNAL)) < 0)
			return errno == EAGAIN || errno == EINTR ? FLOW_OK :
			    FLOW_SEND_FAILED;
		f->off += (size_t)n;
		f->len -= (size_t)n;
	}
	if (f->eof && !f->shut) {
		(void)shut(to, SHUT_WR);
		f->shut = 1;
	}
	return FLOW_OK;
}

/* The rock's side through the shim (send, recv, shutdown are its hooks),
 * the holders' straight to the kernel. A holder's reset, or a rock that
 * failed (the peer lost it, the suspend timeout), ends the relay: the
 * holders' end was set to reset (loopback_pair), never an end of file. */
static void
step(struct relay *x)
{
	switch (pump(&x->up, x->prog, x->rock, shim_real.recv, send, shutdown)) {
	case FLOW_OK:
		break;
	case FLOW_RECV_FAILED:
		/* A holder closed with unread bytes (a reset). Unless the
		 * holders' bytes were all in when it came, the reset may
		 * have dropped what a holder still had to send: the peer
		 * hears a reset, never the reliable close short of those
		 * bytes. Else nothing was lost, and a close on a rock is the
		 * reliable close (as at exit). */
		x->holders_reset = !x->up.drained;
		x->done = 1;
		return;
	default:
		x->done = 1;
		return;
	}

	if (!x->down_dead)
		switch (pump(&x->down, x->rock, x->prog, recv, shim_real.send,
		    shim_real.shutdown)) {
		case FLOW_RECV_FAILED:
			x->done = 1;
			return;
		case FLOW_SEND_FAILED:
			nobody_reads(x);
			break;
		}
	if (x->up.shut && (x->down.shut || x->down_dead)) {
		x->clean = x->down.shut;
		x->done = 1;
	}
}

/* The socket table, read-only, under a number out of the program's way
 * (rl.tcp); NULL when it cannot be opened (the relays then never judge
 * holders gone: they end with the rock or the process). */
static void
table_open(void)
{
	int fd = open("/proc/thread-self/net/tcp", O_RDONLY | O_CLOEXEC);
	struct stat st;

	if (fd < 0)
		return;
	fd = rock_sys_aside(fd);
	if (fstat(fd, &st) != 0 || (rl.tcp = shim_real.fdopen(fd, "r")) == NULL) {
		shim_real.close(fd);
		return;
	}
	rl.tcp_dev = st.st_dev;
	rl.tcp_ino = st.st_ino;
	__atomic_store_n(&rl.tcp_fd, fd, __ATOMIC_RELEASE);
}

/* The relay's thread: the table, opened again if it could not be, or if
 * its number no longer names it (closed behind our back: the number is
 * the program's now, and the FILE is let go without touching it). */
static FILE *
table_file(void)
{
	struct stat st;

	if (rl.tcp != NULL && (fstat(fileno(rl.tcp), &st) != 0 ||
	    st.st_dev != rl.tcp_dev || st.st_ino != rl.tcp_ino)) {
		__atomic_store_n(&rl.tcp_fd, -1, __ATOMIC_RELEASE);
		rl.tcp = NULL;
	}
	if (rl.tcp == NULL)
		table_open();
	return rl.tcp;
}

/* The holders' end of the loopback connection is an orphan: every copy
 * closed (the kernel lists such a socket with inode 0 in this thread's
 * network namespace's /proc/net/tcp until it times out). Their end of
 * stream alone does not say so: shutdown(SHUT_WR) sends the same FIN as
 * the last close. The table is read in pieces and may skip an entry, so
 * only a holders' entry seen orphaned in a scan that also saw ours (the
 * same socket, by inode) counts; anything else is "cannot tell", 0. */
static int
holders_gone(const struct relay *x)
{
	struct sockaddr_in me, them;
	unsigned int la, lp, ra, rp;
	unsigned long inode;
	struct stat st;
	char line[256];
	FILE *f = table_file();
	int ours = 0, orphan = 0;

	if (f == NULL || fstat(x->prog, &st) != 0 ||
	    shim_real.getsockname(x->prog, (struct sockaddr *)&me,
	    &(socklen_t){ sizeof(me) }) != 0 ||
	    shim_real.getpeername(x->prog, (struct sockaddr *)&them,
	    &(socklen_t){ sizeof(them) }) != 0)
		return 0;
	rewind(f);
	while (fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, " %*d: %x:%x %x:%x %*x %*x:%*x %*x:%*x %*x %*u "
		    "%*d %lu", &la, &lp, &ra, &rp, &inode) != 5)
			continue;
		if (la == me.sin_addr.s_addr && lp == ntohs(me.sin_port) &&
		    ra == them.sin_addr.s_addr && rp == ntohs(them.sin_port))
			ours |= inode == (unsigned long)st.st_ino;
		else if (la == them.sin_addr.s_addr && lp == ntohs(them.sin_port) &&
		    ra == me.sin_addr.s_addr && rp == ntohs(me.sin_port))
			orphan |= inode == 0;
	}
	return ours && orphan;
}

/* A relay whose holders shut their writing keeps reading for them until
 * they close it, which shows no event: it is looked at after a second,
 * then less often (a scan costs milliseconds: the kernel walks its whole
 * table). A finished one lets go of its rock as their close would, so an
 * exec that closed the rock's copies, or holders that closed after a
 * shutdown, end it as at exit (the keeper's minute, for a peer that keeps
 * its end). Returns the poll timeout: -1, or ms to the next look. */
static int
look_at_half_closed(int64_t now, int *finished)
{
	struct relay *x;
	int64_t next = -1;

	for (x = rl.running; x != NULL; x = x->next) {
		if (x->done || !x->up.shut)
			continue;
		if (now >= x->check_ms) {
			x->check_gap_ms = x->check_gap_ms == 0 ? HOLDERS_LOOK_MS :
			    x->check_gap_ms * 2 > HOLDERS_LOOK_MAX_MS ?
			    HOLDERS_LOOK_MAX_MS : x->check_gap_ms * 2;
			x->check_ms = now + x->check_gap_ms;
			if (holders_gone(x)) {
				x->done = *finished = 1;
				continue;
			}
		}
		if (next < 0 || x->check_ms - now < next)
			next = x->check_ms - now;
	}
	return (int)next;
}

static short
prog_events(const struct relay *x)
{
	return (short)((!x->up.eof && x->up.len == 0 ? POLLIN : 0) |
	    (x->down.len > 0 ? POLLOUT : 0));
}

static short
rock_events(const struct relay *x)
{
	return (short)((!x->down.eof && !x->down_dead && x->down.len == 0 ?
	    POLLIN : 0) | (x->up.len > 0 ? POLLOUT : 0));
}

/* Lock held. A finished relay lets go of its rock as the program's close
 * would (the reliable close, or the end of a failed one). Closed under
 * the lock, so that no fork sees its descriptors on no list. */
static void
finish(struct relay *x)
{
	struct shim_rock *r = shim_rock_of(x->rock);
	struct linger off = { 0, 0 };

	if (r != NULL) {
		r->kill_at_release |= x->holders_reset;
		shim_rock_drop_fd(r, x->rock);
	}
	/* Both ends passed: what the holders have not read yet is still
	 * theirs (a reset would drop it). */
	if (x->clean)
		(void)shim_real.setsockopt(x->prog, SOL_SOCKET, SO_LINGER, &off,
		    sizeof(off));
	shim_fd_set(x->rock, SHIM_FD_UNKNOWN, 0);
	shim_real.close(x->rock);
	shim_real.close(x->prog);
	free(x);
}

/* Lock held: the relays a fork set up join the thread's list (which
 * only the thread changes, so that it can walk it unlocked). */
static void
take_pending(void)
{
	struct relay *x;

	while ((x = rl.pending) != NULL) {
		rl.pending = x->next;
		x->next = rl.running;
		rl.running = x;
	}
}

/* Lock held: take new relays; finish those done. */
static void
update_lists(void)
{
	struct relay **p, *x;

	take_pending();
	for (p = &rl.running; (x = *p) != NULL;) {
		if (!x->done) {
			p = &x->next;
			continue;
		}
		*p = x->next;
		finish(x);
	}
}

static int
count(const struct relay *x)
{
	int n = 0;

	for (; x != NULL; x = x->next)
		n++;
	return n;
}

static void *
relay_main(void *arg)
{
	struct pollfd *pfd = NULL;
	struct relay *x;
	sigset_t all;
	uint64_t v;
	int n, i, cap = 0, timeout, finished;

	(void)arg;
	/* The program's signals are for its own threads. */
	sigfillset(&all);
	(void)pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (;;) {
		shim_lock();
		update_lists();
		n = count(rl.running);
		shim_unlock();
		if (__atomic_load_n(&rl.stopping, __ATOMIC_ACQUIRE))
			break;
		finished = 0;
		timeout = look_at_half_closed(shim_now_ms(), &finished);
		if (finished)
			continue;
		if (1 + 2 * n > cap) {
			struct pollfd *np = realloc(pfd, (size_t)(1 + 2 * n) * sizeof(*pfd));

			if (np == NULL) {
				(void)poll(NULL, 0, 100);	/* out of memory: later */
				continue;
			}
			pfd = np;
			cap = 1 + 2 * n;
		}
		pfd[0] = (struct pollfd){ rl.wake_fd, POLLIN, 0 };
		for (x = rl.running, i = 1; x != NULL; x = x->next, i += 2) {
			short pe = prog_events(x), re = rock_events(x);

			pfd[i] = (struct pollfd){ pe != 0 ? x->prog : -1, pe, 0 };
			pfd[i + 1] = (struct pollfd){ re != 0 ? x->rock : -1, re, 0 };
		}
		/* The shim's poll: a suspended rock is waited out, not seen. */
		if (poll(pfd, (nfds_t)(1 + 2 * n), timeout) < 0 && errno != EINTR)
			(void)poll(NULL, 0, 10);
		if (pfd[0].revents != 0)
			(void)!shim_real.read(rl.wake_fd, &v, sizeof(v));
		for (x = rl.running, i = 1; x != NULL; x = x->next, i += 2)
			if (pfd[i].revents != 0 || pfd[i + 1].revents != 0)
				step(x);
	}
	free(pfd);
	return NULL;
}


/* Lock not held. After a fork in the parent, and in a keeper. */
void
shim_fork_relay_start(void)
{
	sigset_t all, old;

	shim_lock();
	if (rl.started || (rl.pending == NULL && rl.running == NULL)) {
		shim_unlock();
		wake();
		return;
	}
	rl.started = 1;
	rl.stopping = 0;
	if (rl.tcp == NULL)
		table_open();
	shim_unlock();
	sigfillset(&all);
	(void)pthread_sigmask(SIG_BLOCK, &all, &old);
	if (pthread_create(&rl.thread, NULL, relay_main, NULL) != 0) {
		rlog_warn(&shim_state()->log, "cannot start the relay of the rocks "
		    "a fork shares (%s): their holders wait", strerror(errno));
		rl.started = 0;
	}
	(void)pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Lock not held. Before the program's exit hands its rocks to a keeper:
 * the keeper restarts the thread (a fork takes one thread along). */
int
shim_fork_relay_stop(void)
{
	struct timespec until;
	int err;

	if (!rl.started)
		return 0;
	__atomic_store_n(&rl.stopping, 1, __ATOMIC_RELEASE);
	wake();
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 1;
	if ((err = pthread_timedjoin_np(rl.thread, NULL, &until)) != 0)
		return err;
	rl.started = 0;
	return 0;
}

/* Lock held: relays running or about to. */
int
shim_fork_relay_count(void)
{
	return count(rl.running) + count(rl.pending);
}

/* After fork, in a child that is not a keeper: the relay's descriptors
 * are the parent's (a copy here would keep its sockets open). The records
 * stay, for getpeername on the holders' copies. */
void
shim_fork_relay_child(void)
{
	struct relay *x;

	take_pending();
	for (x = rl.running; x != NULL; x = x->next) {
		if (x->prog < 0)
			continue;
		shim_real.close(x->prog);
		shim_fd_set(x->rock, SHIM_FD_UNKNOWN, 0);
		shim_real.close(x->rock);
		x->prog = x->rock = -1;
		x->done = 1;
	}
	if (rl.wake_fd >= 0)
		shim_real.close(rl.wake_fd);
	rl.wake_fd = -1;
	if (rl.tcp != NULL)
		shim_real.fclose(rl.tcp);
	rl.tcp = NULL;
	rl.tcp_fd = -1;
	rl.started = 0;
}

int
shim_fork_relay_owns_fd(int fd)
{
	struct relay *lists[2] = { rl.pending, rl.running }, *x;
	int i;

	if (fd == rl.wake_fd || (fd >= 0 &&
	    fd == __atomic_load_n(&rl.tcp_fd, __ATOMIC_ACQUIRE)))
		return 1;
	for (i = 0; i < 2; i++)
		for (x = lists[i]; x != NULL; x = x->next)
			if (fd >= 0 && (fd == x->prog || fd == x->rock))
				return 1;
	return 0;
}

/* Lock held. The rock's peer for a holder's copy on fd (its peer is our
 * loopback port); 0 when fd is not one. */
int
shim_fork_relay_peer(int fd, struct sockaddr *addr, socklen_t *len)
{
	struct relay *lists[2] = { rl.pending, rl.running }, *x;
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	int i;

	if (shim_real.getpeername(fd, (struct sockaddr *)&sin, &sl) != 0 ||
	    sin.sin_family != AF_INET)
		return 0;
	for (i = 0; i < 2; i++)
		for (x = lists[i]; x != NULL; x = x->next)
			if (x->port == sin.sin_port) {
				memcpy(addr, &x->peer, *len < x->peer_len ?
				    *len : x->peer_len);
				*len = x->peer_len;
				return 1;
			}
	return 0;
}
