/* rock.c: the shim's rocks: one lock, one condition, and the descriptor-to-rock map. */
#include "config.h"

#include <fcntl.h>

#include <errno.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <stdlib.h>
#include <time.h>

#include "shim.h"

/* One lock for every rock and the engine: the data path holds it for a
 * few instructions per call, never across a system call that can block.
 * It is also the engine's lock (engine.c: rock_engine_set_lock), so every
 * callback and timer of the engine's thread runs under it.
 *
 * Lock order, outer first: engine.c's start_lock (around the engine's
 * start only, and never taken under this one), then this lock, then
 * state.c's reread_lock, a leaf (nothing is taken under it). The fork
 * handlers (engine.c) take this lock alone.
 * Waiting is only on `changed`, which releases it. What is not under it:
 * the fd byte table (fdtab.c, atomics) and the registration count epoll
 * reads unlocked as a hint (epoll.c).
 *
 * Why one lock and not one per rock: the ring a write appends to is the
 * engine's (acks trim it, replays read it, heartbeats count it), and the
 * engine's thread takes only its own lock. Measured (issue 10), the lock is
 * a small part of a small write: 64-byte writes cost 164 ms of CPU per
 * 100,000 under rock against 150 ms plain, of which the two lock round
 * trips are about 3 %; the rest was the kernel's sendmsg path (io.c). */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int lock_held __attribute__((tls_model("initial-exec")));
static pthread_cond_t changed;
static pthread_once_t cond_once = PTHREAD_ONCE_INIT;
/* Threads in shim_wait(): every write ends with a wake, which is skipped
 * when nobody sleeps (under the lock, as the sleepers count themselves). */
static int sleepers;

static struct shim_rock *all;

static struct shim_fdmap map;	/* descriptor -> rock */

static void
cond_init(void)
{
	pthread_condattr_t a;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&changed, &a);
	pthread_condattr_destroy(&a);
}

/* A CLOCK_MONOTONIC time of shim_now_ms() as the pthread calls take it. */
static struct timespec
monotonic_ts(int64_t ms)
{
	return (struct timespec){ .tv_sec = ms / 1000,
	    .tv_nsec = (long)(ms % 1000) * 1000000 };
}

int64_t
shim_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
shim_lock(void)
{
	lock_held++;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	pthread_mutex_lock(&lock);
}

/* The engine's loop is owed a wake (shim_engine_wake_at_unlock): given
 * once the lock is let go, so that the engine's thread, woken, does not
 * find it still held and sleep again on it. Under the lock. */
static int wake_owed;

void
shim_engine_wake_at_unlock(void)
{
	wake_owed = 1;
}

void
shim_unlock(void)
{
	int wake = wake_owed;

	wake_owed = 0;
	pthread_mutex_unlock(&lock);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	lock_held--;
	if (wake)
		shim_engine_wake();
}

/* From a signal handler that may have interrupted this thread taking,
 * holding, releasing or waiting on the lock (lock_held counts all of
 * those, from before the lock is taken to after it is released): a try
 * bounded by ms; *nested says whether it was so. 0 once held. */
int
shim_lock_within(int ms, int *nested)
{
	struct timespec until;
	int err;

	if ((*nested = lock_held > 0) == 0) {
		shim_lock();
		return 0;
	}
	until = monotonic_ts(shim_now_ms() + ms);
	lock_held++;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if ((err = pthread_mutex_clocklock(&lock, CLOCK_MONOTONIC, &until)) != 0)
		lock_held--;
	return err;
}

/* The parent's waiters are not the child's. */
void
shim_reinit_after_fork(void)
{
	sleepers = 0;	/* those were the parent's threads */
	wake_owed = 0;	/* and so was the engine owed it */
	cond_init();
}

/* poll/select callers waiting on hidden rocks, each with an eventfd. */
static struct shim_waiter *waiters;

void
shim_waiter_add(struct shim_waiter *w)
{
	w->next = waiters;
	waiters = w;
}

void
shim_waiter_remove(struct shim_waiter *w)
{
	struct shim_waiter **p;

	for (p = &waiters; *p != NULL; p = &(*p)->next)
		if (*p == w) {
			*p = w->next;
			break;
		}
}

void
shim_wake(void)
{
	if (sleepers > 0)
		pthread_cond_broadcast(&changed);
}

void
shim_wake_pollers(void)
{
	struct shim_waiter *w;
	uint64_t one = 1;

	shim_wake();
	for (w = waiters; w != NULL; w = w->next)
		(void)!shim_real.write(w->fd, &one, sizeof(one));
}

int
shim_wait(int64_t deadline_ms)
{
	struct timespec ts;
	int r;

	pthread_once(&cond_once, cond_init);
	/* The lock goes while we wait: what we wait for may be the work
	 * the engine was owed a wake for. */
	if (wake_owed) {
		wake_owed = 0;
		shim_engine_wake();
	}
	sleepers++;
	if (deadline_ms < 0) {
		r = pthread_cond_wait(&changed, &lock);
	} else {
		ts = monotonic_ts(deadline_ms);
		r = pthread_cond_timedwait(&changed, &lock, &ts);
	}
	sleepers--;
	return r;
}

struct shim_rock *
shim_rock_of(int fd)
{
	return shim_fdmap_get(&map, fd);
}

void
shim_rock_bind(int fd, struct shim_rock *r)
{
	if (shim_fdmap_set(&map, fd, r) == 0)
		shim_fd_set(fd, SHIM_FD_ROCK, 0);
}

void
shim_rock_unbind(int fd)
{
	if (shim_fdmap_set(&map, fd, NULL) == 0)
		shim_fd_set(fd, SHIM_FD_TCP_DONE, 0);
}

struct shim_rock *
shim_rock_first(void)
{
	return all;
}

struct shim_rock *
shim_rock_new(void)
{
	struct shim_rock *r = calloc(1, sizeof(*r));

	if (r == NULL)
		return NULL;
	r->next = all;
	if (all != NULL)
		all->prev = r;
	all = r;
	return r;
}

void
shim_rock_hold(struct shim_rock *r)
{
	r->holds++;
}

int
shim_rock_release(struct shim_rock *r)
{
	if (--r->holds > 0 || !r->dead)
		return !r->dead;
	free(r);
	return 0;
}

void
shim_rock_free(struct shim_rock *r)
{
	if (r->dead)
		return;
	shim_cmd_forget(r);
	if (r->prev != NULL)
		r->prev->next = r->next;
	else
		all = r->next;
	if (r->next != NULL)
		r->next->prev = r->prev;
	r->dead = 1;
	r->s = NULL;
	if (r->holds == 0)
		free(r);
	shim_wake_pollers();
}

/* The counts the readiness hooks use as a fast-path hint. */
void
shim_rock_set_ready(struct shim_rock *r, int ready)
{
	if (r->ready == ready || r->released)
		return;
	r->ready = ready;
	shim_wake_pollers();
}

void
shim_rock_failed(struct shim_rock *r)
{
	if (r->s == NULL || !r->ready)
		return;
	shim_rock_set_ready(r, 0);
	shim_post(r, SHIM_CMD_FAIL);
}

/* A FIN on the data connection proves nothing (decision 20): until the
 * engine has the peer's authenticated word, the program neither reads it
 * as an end nor sees it as readiness. Out of epoll's sets too, or a
 * level-triggered reader would be woken by it again and again. */
void
shim_rock_eof_wait(struct shim_rock *r)
{
	if (r->s == NULL || !r->ready)
		return;
	shim_rock_set_ready(r, 0);
	shim_epoll_suspend(r);
	shim_post(r, SHIM_CMD_EOF_WAIT);
}

int
shim_rock_fin_unjudged(const struct shim_rock *r)
{
	return r->s != NULL && r->ready && !r->rd_shut &&
	    !rock_direct_peer_ended(r->s);
}

/* The socket looked at now, not the poll's word (which may be of a socket
 * swapped out since): a one-byte peek says whether bytes come first (also
 * the urgent mark, which SIOCINQ counts as none), the FIN, nothing (the
 * word was of another socket), or an error. */
int
shim_rock_fin_check(struct shim_rock *r, int fd)
{
	int queued = 0;
	ssize_t n;
	char c;

	if (!shim_rock_fin_unjudged(r))
		return 0;
	if (r->inflight > 0)
		return 1;	/* a read inside the kernel judges it */
	n = shim_real.recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n > 0)
		return ioctl(fd, SIOCINQ, &queued) == 0 && queued > 0 &&
		    rock_direct_peer_ends_after(r->s, (uint64_t)queued) ? 0 : 1;
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return -2;
	if (n < 0)
		shim_rock_failed(r);
	else
		shim_rock_eof_wait(r);
	return -1;
}

/* The connection's end was an error: the program's socket still holds
 * the dead connection, whose FIN (or our own SHUT_RD at the suspension)
 * would read as a clean end once the error was taken. Disconnected, it
 * reads ENOTCONN from then on, and poll reports it hung up, as a reset
 * TCP connection; the kernel's own error is taken here so that the
 * program hears one, the rock's. fd is the program's call's, so the rock's
 * (a number in r->fds may have been closed and reused behind our back). */
int
shim_rock_take_error(struct shim_rock *r, int fd)
{
	struct sockaddr sa = { .sa_family = AF_UNSPEC };
	socklen_t len = sizeof(int);
	int err = r->err, e;

	r->err = 0;
	(void)shim_real.connect(fd, &sa, sizeof(sa));
	(void)shim_real.getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len);
	return err;
}

void
shim_rock_error_again(int fd, int err)
{
	struct shim_rock *r;

	shim_lock();
	if ((r = shim_rock_of(fd)) != NULL && r->s == NULL && !r->connecting &&
	    r->err == 0 && (err == ECONNRESET || err == ETIMEDOUT))
		r->err = err;
	shim_unlock();
}

void
shim_rock_drop_fd(struct shim_rock *r, int fd)
{
	int i;

	shim_epoll_forget_fd(r, fd);
	shim_rock_unbind(fd);
	for (i = 0; i < r->nfds; i++)
		if (r->fds[i] == fd) {
			r->fds[i] = r->fds[--r->nfds];
			break;
		}
	if (r->nfds > 0)
		return;
	r->relayed = 0;		/* its relay let go: an ordinary close from here */
	if (r->s == NULL && !r->connecting) {
		shim_rock_free(r);
		return;
	}
	r->released = 1;
	/* A connecting thread finds it released and lets go itself. */
	if (!r->connecting)
		shim_post(r, SHIM_CMD_RELEASE);
}

/* Every rock the program still holds, released; used at exit. */
void
shim_rock_release_all(void)
{
	struct shim_rock *r, *next;

	for (r = all; r != NULL; r = next) {
		next = r->next;
		/* Dropping the last descriptor may free r: stop touching it.
		 * A relayed rock is its relay's, which the holders close. */
		while (!r->released && !r->relayed && r->nfds > 0) {
			int last = r->nfds == 1;

			shim_rock_drop_fd(r, r->fds[r->nfds - 1]);
			if (last)
				break;
		}
	}
}

int
shim_rock_count(void)
{
	struct shim_rock *r;
	int n = 0;

	for (r = all; r != NULL; r = r->next)
		n += !r->relayed;
	return n;
}

/* After fork, in the child: the parent's pollers' eventfds are not its
 * business. */
void
shim_waiters_forget(void)
{
	struct shim_waiter *w;

	for (w = waiters; w != NULL; w = w->next)
		shim_real.close(w->fd);
	waiters = NULL;
}

static int
unsettled(const struct shim_rock *r)
{
	return r->connecting && r->returned && !r->released && !r->dead;
}

/* Lock held. Until a connect() that returned before its handshake was
 * over (connect.c) has its rock or its plain connection: only, or every
 * one (only NULL) until deadline_ms (-1: none). A fork or an exec copies
 * descriptors, stdio writes around us, getsockname asks the connection:
 * all need it in place. Its early handshake takes a round trip. */
void
shim_rock_settle_wait(struct shim_rock *only, int64_t deadline_ms)
{
	struct shim_rock *r;

	for (;;) {
		if (only != NULL)
			r = unsettled(only) ? only : NULL;
		else
			for (r = all; r != NULL && !unsettled(r); r = r->next)
				;
		if (r == NULL || shim_wait(deadline_ms) == ETIMEDOUT)
			return;
	}
}

/* Lock held. A call that needs fd's connection in place (its options,
 * its local address) waits for a connect() that returned before it was. */
void
shim_rock_settle_locked(int fd)
{
	struct shim_rock *r;

	if ((r = shim_rock_of(fd)) != NULL && unsettled(r)) {
		shim_rock_hold(r);
		shim_rock_settle_wait(r, -1);
		shim_rock_release(r);
	}
}

/* After fork, in the child: no engine here; the sockets are plain. */
void
shim_rock_orphan_all(void)
{
	struct shim_rock *r;

	shim_waiters_forget();
	for (r = all; r != NULL; r = r->next) {
		r->s = NULL;
		r->released = 1;
		r->ready = 1;
		r->connecting = r->inflight = r->writer = r->ring_blocked = 0;
	}
}

int
shim_rock_any_suspended(void)
{
	struct shim_rock *r;

	for (r = all; r != NULL; r = r->next)
		if (r->s != NULL && rock_session_state(r->s) == ROCK_ST_SUSPENDED)
			return 1;
	return 0;
}

int
shim_rock_live_count(void)
{
	struct shim_rock *r;
	int n = 0;

	for (r = all; r != NULL; r = r->next)
		n += r->s != NULL;
	return n;
}

int
shim_rock_mark_forked(void)
{
	struct shim_rock *r;
	int n = 0;

	for (r = all; r != NULL; r = r->next)
		if (r->s != NULL && !r->relayed && !r->released && r->nfds > 0) {
			r->kill_at_release |= r->accepted;
			n++;
		}
	return n;
}

/* Every descriptor of r closes on exec. Lock held. */
int
shim_rock_cloexec(const struct shim_rock *r)
{
	int i, fl;

	for (i = 0; i < r->nfds; i++)
		if ((fl = shim_real.fcntl(r->fds[i], F_GETFD)) < 0 ||
		    !(fl & FD_CLOEXEC))
			return 0;
	return 1;
}

/* Lock held. Before exec, after the relays: a rock left (a call of the
 * program's inside the shim or the kernel on it) whose descriptor the new
 * image inherits is that image's plain socket now, and ends with a reset,
 * never the clean end of a stream the image may still be using. */
int
shim_rock_mark_exec(void)
{
	struct shim_rock *r;
	int n = 0;

	for (r = all; r != NULL; r = r->next)
		if (r->s != NULL && !r->relayed && !r->released && r->nfds > 0 &&
		    !shim_rock_cloexec(r)) {
			r->kill_at_release = 1;
			n++;
		}
	return n;
}

int
shim_rock_writing(void)
{
	struct shim_rock *r;

	for (r = all; r != NULL; r = r->next)
		if (r->writer)
			return 1;
	return 0;
}

/* In a keeper: the threads running connects are gone. A session one had
 * made is released as that thread would have done; the rest is dropped. */
void
shim_rock_abandon_connects(void)
{
	struct shim_rock *r, *next;

	for (r = all; r != NULL; r = next) {
		next = r->next;
		if (!r->connecting)
			continue;
		r->connecting = 0;
		r->released = 1;
		r->nfds = 0;
		rock_early_cancel(r->early);
		if (r->s != NULL)
			shim_post(r, SHIM_CMD_RELEASE);
		else
			shim_rock_free(r);
	}
}

struct shim_rock *
shim_rock_overdue(int64_t now, int64_t after_ms)
{
	struct shim_rock *r;

	for (r = all; r != NULL; r = r->next) {
		/* A relayed rock's holders may be in the middle of using it. */
		if (r->s == NULL || r->relayed)
			continue;
		if (after_ms == 0)
			return r;
		if (!rock_session_delivered(r->s))
			r->delivered_ms = 0;
		else if (r->delivered_ms == 0)
			r->delivered_ms = now;
		else if (now - r->delivered_ms >= after_ms)
			return r;
	}
	return NULL;
}

uint64_t
shim_rock_unacked_all(void)
{
	struct shim_rock *r;
	uint64_t n = 0;

	for (r = all; r != NULL; r = r->next)
		if (r->s != NULL)
			n += rock_session_unacked(r->s);
	return n;
}
