/* engine.c: the engine's thread in the program, started at its first rock, and its callbacks. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/kcmp.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include "rock_ctl.h"
#include "rock_err.h"
#include "rock_probe_file.h"
#include "listener.h"
#include "shim.h"

static struct {
	struct event_base *base;
	struct rock_engine *e;
	int cmd_fd;			/* eventfd: commands are queued */
	struct event *ev_cmd;
	struct shim_rock *cmds;		/* rocks with commands pending */
	struct shim_call *calls;	/* work for the loop's thread (serve.c) */
	int state;			/* 0 not started, 1 running, -1 failed */
	int stopping;			/* the thread's loop is asked to end */
	int forking_keeper;		/* the fork under way is the keeper's */
	int kept;			/* a keeper took what was left */
	pid_t owner;			/* the process the engine runs in */
	int leaving;			/* a hand-over is under way (lock) */
	pthread_t leaver;		/* by this thread */
	int nested;			/* from a handler on a shim_lock(): no
					 * condition wait inside an interrupted one */
	struct rock_ctl *ctl;		/* rock ls and rock kill; NULL: none */
	char ctl_path[PATH_MAX];
	pthread_t thread;
} eng = { .cmd_fd = -1 };

/* Used before the engine runs (connect.c's first probe) and by it. */
static struct rock_probe_file probe_file;

struct rock_probe_file *
shim_probe_file(void)
{
	/* The path is the process's setting: set once, read from then on. */
	probe_file.path = shim_state()->cfg.probe_cache;
	return &probe_file;
}

static void
engine_lock(void *arg)
{
	(void)arg;
	shim_lock();
}

static void
engine_unlock(void *arg)
{
	(void)arg;
	shim_unlock();
}

/* ---- callbacks: the engine's thread, lock held */

static void
on_suspend(struct rock_session *s, int old_fd, void *arg)
{
	struct shim_rock *r = arg;

	(void)s;
	shim_rock_set_ready(r, 0);
	shim_epoll_suspend(r);
	/* Wakes readers and pollers on the dead socket and sends nothing:
	 * a FIN now could reach the peer and read as an end of stream. */
	shim_real.shutdown(old_fd, SHUT_RD);
	while (r->inflight > 0)
		shim_wait(-1);
}

/* Options the program set on the old socket go to the new one. */
void
shim_copy_options(int from, int to)
{
	static const int opts[][2] = {
		{ IPPROTO_TCP, TCP_NODELAY }, { SOL_SOCKET, SO_PRIORITY },
		{ IPPROTO_IP, IP_TOS }, { IPPROTO_IPV6, IPV6_TCLASS },
		{ SOL_SOCKET, SO_RCVTIMEO }, { SOL_SOCKET, SO_SNDTIMEO },
	};
	uint8_t v[32];
	socklen_t len;
	size_t i;

	for (i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		len = sizeof(v);
		if (shim_real.getsockopt(from, opts[i][0], opts[i][1], v, &len) == 0)
			(void)shim_real.setsockopt(to, opts[i][0], opts[i][1], v, len);
	}
}

/* Put new_fd under every descriptor of the program that names the rock;
 * their numbers, O_NONBLOCK and FD_CLOEXEC stay as they were. Their flags
 * are read now, not at the connect: another thread may have set them
 * while the handshake ran. */
void
shim_rock_install(struct shim_rock *r, int old_fd, int new_fd, int copy)
{
	int fl = shim_real.fcntl(r->nfds > 0 ? r->fds[0] : old_fd, F_GETFL);
	int i;

	if (copy)
		shim_copy_options(old_fd, new_fd);
	shim_opts_apply(r, new_fd);
	if (fl >= 0)
		shim_real.fcntl(new_fd, F_SETFL, fl);
	for (i = 0; i < r->nfds; i++) {
		int fdfl = shim_real.fcntl(r->fds[i], F_GETFD);

		/* A number closed behind our back (fclose of an fdopen'ed
		 * rock) and reused for something else is left alone. At the
		 * connect, old_fd is the program's own number: no question. */
		if (r->fds[i] != old_fd && syscall(SYS_kcmp, getpid(), getpid(),
		    KCMP_FILE, r->fds[i], old_fd) > 0)
			continue;
		shim_real.dup3(new_fd, r->fds[i], fdfl >= 0 && (fdfl & FD_CLOEXEC) ?
		    O_CLOEXEC : 0);
		if (r->rd_shut)
			shim_real.shutdown(r->fds[i], SHUT_RD);
	}
}

static void
on_swap(struct rock_session *s, int old_fd, int new_fd, void *arg)
{
	struct shim_rock *r = arg;

	(void)s;
	shim_rock_install(r, old_fd, new_fd, 1);
	shim_rock_set_ready(r, 1);
	shim_epoll_resume(r);
}

static void
on_drain(struct rock_session *s, void *arg)
{
	struct shim_rock *r = arg;

	(void)s;
	if (r->ring_blocked) {
		r->ring_blocked = 0;
		shim_epoll_kick(r);
	}
	shim_wake_pollers();
}

static void
on_state(struct rock_session *s, enum rock_state from, enum rock_state to,
    void *arg)
{
	struct shim_rock *r = arg;

	(void)s;
	(void)from;
	if (r != NULL && r->handing != NULL && to == ROCK_ST_CONNECTED)
		shim_park_rock_up(r);
	shim_wake();
}

/* The program's next call fails as on an aborted TCP connection. */
static void
on_closed(struct rock_session *s, int err, void *arg)
{
	struct shim_rock *r = arg;
	/* One the engine was handing to the program: nobody else has it. */
	int unclaimed = r->handing != NULL;

	if (unclaimed)
		shim_park_rock_gone(r);
	if (r->rdv_port > 0)
		shim_rdv_forget(r, s);
	r->s = NULL;
	r->err = err == 0 ? 0 : err == ROCK_ERR_TIMEOUT ? ETIMEDOUT : ECONNRESET;
	if (!r->connecting)	/* else the connecting thread decides */
		shim_rock_set_ready(r, 1);
	r->ring_blocked = 0;
	/* A program waiting in epoll must hear of the end too: also an
	 * edge-triggered one whose last edge (the reset that made us judge
	 * the connection failed) was taken from it while the rock was
	 * live, and which nothing else would wake now. */
	shim_epoll_resume(r);
	if (r->err != 0)
		shim_epoll_kick(r);
	rock_session_free(s);
	if ((r->released || unclaimed) && !r->connecting)
		shim_rock_free(r);	/* else the connecting thread does */
	shim_wake_pollers();
}

/* The end of file the program was held from is the peer's: let it in. */
static void
on_eof_confirmed(struct rock_session *s, void *arg)
{
	struct shim_rock *r = arg;

	(void)s;
	shim_rock_set_ready(r, 1);
	shim_epoll_resume(r);
}

static const struct rock_direct_ops direct_ops = {
	on_suspend, on_swap, on_eof_confirmed
};
static const struct rock_session_cbs rock_cbs = {
	NULL, NULL, on_drain, on_state, on_closed, &direct_ops
};

/* Released: what still arrives is drained, unread, as close() drops it. */
static void
discard(struct rock_session *s, const uint8_t *p, size_t n, void *arg)
{
	(void)s;
	(void)p;
	(void)n;
	(void)arg;
}

static const struct rock_session_cbs released_cbs = {
	discard, NULL, NULL, on_state, on_closed, NULL
};

const struct rock_session_cbs *
shim_rock_cbs(void)
{
	return &rock_cbs;
}

/* ---- commands from the program's threads */

void
shim_post(struct shim_rock *r, int cmd)
{
	if (r->cmds == 0) {
		r->next_cmd = eng.cmds;
		eng.cmds = r;
	}
	r->cmds |= cmd;
	shim_engine_wake_at_unlock();
}

/* An accepted rock a fork copied (the child's copy is a plain socket on
 * the same connection, whose bytes the rock never counts), or one that
 * never reached the program. Its end must not be the reliable close,
 * which would give the client a clean end of stream short of what was
 * sent: the rock is killed (the connection reset under any copy, the
 * client told in an authenticated record), so the client hears
 * ECONNRESET. */
static void
kill_at_release(struct shim_rock *r)
{
	rock_session_kill(r->s, "its plain copies outlived it (an accepted "
	    "rock a fork copied, one an exec left to the new image, or one "
	    "that never reached the program), or its relay's holders reset "
	    "their end: ended with a reset");
}

static void
run_cmds(struct shim_rock *r, int cmds)
{
	/* Each step may end the session (r->s NULL) or free r: r is held. */
	shim_rock_hold(r);
	if ((cmds & SHIM_CMD_FAIL) && r->s != NULL)
		rock_direct_fail(r->s, "the program's I/O failed");
	if ((cmds & SHIM_CMD_EOF) && r->s != NULL)
		rock_direct_eof(r->s);
	if ((cmds & SHIM_CMD_EOF_WAIT) && r->s != NULL)
		rock_direct_eof_unconfirmed(r->s);
	if ((cmds & SHIM_CMD_RELEASE) && r->s != NULL && r->kill_at_release)
		kill_at_release(r);
	else if ((cmds & SHIM_CMD_RELEASE) && r->s != NULL)
		rock_direct_release(r->s, &released_cbs, r);
	else if ((cmds & SHIM_CMD_FINISH) && r->s != NULL)
		rock_direct_finish(r->s);
	shim_rock_release(r);
}

/* r is being freed: out of the queue. */
void
shim_cmd_forget(struct shim_rock *r)
{
	struct shim_rock **p;

	if (r->cmds == 0)
		return;
	for (p = &eng.cmds; *p != NULL; p = &(*p)->next_cmd)
		if (*p == r) {
			*p = r->next_cmd;
			break;
		}
	r->cmds = 0;
}

void
shim_engine_call(struct shim_call *c)
{
	c->next = eng.calls;
	eng.calls = c;
	shim_engine_wake_at_unlock();
}

static void
on_cmd(evutil_socket_t fd, short what, void *arg)
{
	struct shim_rock *r;
	struct shim_call *c;
	uint64_t n;
	int cmds;

	(void)what;
	(void)arg;
	(void)!shim_real.read(fd, &n, sizeof(n));
	shim_lock();
	while ((r = eng.cmds) != NULL) {
		eng.cmds = r->next_cmd;
		cmds = r->cmds;
		r->cmds = 0;
		run_cmds(r, cmds);
	}
	while ((c = eng.calls) != NULL) {
		eng.calls = c->next;
		c->fn(eng.e, c->arg);	/* may free c */
	}
	rock_early_arm(eng.e);
	shim_unlock();
	/* A connect may have taken the X25519 pair made ahead: the next one
	 * is made here, on this thread, not in the program's next connect. */
	rock_engine_keypair_refill(eng.e);
	if (__atomic_load_n(&eng.stopping, __ATOMIC_ACQUIRE))
		event_base_loopbreak(eng.base);
}

void
shim_engine_wake(void)
{
	uint64_t one = 1;

	if (eng.cmd_fd >= 0)
		(void)!shim_real.write(eng.cmd_fd, &one, sizeof(one));
}

static void *
engine_main(void *arg)
{
	sigset_t all;

	(void)arg;
	shim_busy = 1;
	/* Signals are the program's business, not this thread's. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	rock_engine_keypair_refill(eng.e);
	event_base_dispatch(eng.base);
	return NULL;
}

struct rock_ctl *
shim_ctl_open(const struct shim_state *st, struct rock_engine *e,
    const char *name, char *path, size_t len)
{
	struct rock_ctl *c;

	if (st->cfg.run_dir[0] == '\0' || rock_ctl_path(st->cfg.run_dir,
	    (long)getpid(), path, len) != 0) {
		path[0] = '\0';
		return NULL;
	}
	if (rock_ctl_open(e, path, name, NULL, NULL, ROCK_CTL_MKDIR, &c) != 0) {
		rlog_warn(&st->log, "%s: %s; rock ls will not list the rocks of "
		    "%s (pid %d)", path, rock_ctl_strerror(errno), name,
		    (int)getpid());
		path[0] = '\0';
		return NULL;
	}
	return c;
}

static int
engine_start(const struct shim_state *st)
{
	struct rock_engine_config cfg;

	eng.owner = getpid();
	rock_engine_config_defaults(&cfg);
	cfg.suspend_timeout_s = st->cfg.suspend_timeout_s;
	cfg.early = st->cfg.early;
	if ((eng.base = event_base_new()) == NULL)
		return -1;
	if (rock_engine_new(&eng.e, eng.base, &st->log, &cfg, NULL, 0) != 0)
		return -1;
	rock_engine_set_lock(eng.e, engine_lock, engine_unlock, NULL);
	rock_engine_set_trust(eng.e, &st->cfg.trust);
	rock_engine_set_probe_file(eng.e, shim_probe_file());
	eng.ctl = shim_ctl_open(st, eng.e, st->program, eng.ctl_path,
	    sizeof(eng.ctl_path));
	eng.cmd_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (eng.cmd_fd < 0)
		return -1;
	eng.ev_cmd = event_new(eng.base, eng.cmd_fd, EV_READ | EV_PERSIST,
	    on_cmd, NULL);
	if (eng.ev_cmd == NULL || event_add(eng.ev_cmd, NULL) != 0)
		return -1;
	return pthread_create(&eng.thread, NULL, engine_main, NULL) == 0 ? 0 : -1;
}

struct event_base *
shim_engine_base(void)
{
	return shim_engine_running() != NULL ? eng.base : NULL;
}

struct rock_engine *
shim_engine_running(void)
{
	return __atomic_load_n(&eng.state, __ATOMIC_ACQUIRE) == 1 ? eng.e : NULL;
}

/* The engine, started on first use; NULL if it cannot run (then the
 * program's connections stay plain TCP). */
struct rock_engine *
shim_engine(void)
{
	static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
	const struct shim_state *st = shim_state();
	int busy = shim_busy;

	if (__atomic_load_n(&eng.state, __ATOMIC_ACQUIRE) == 1)
		return eng.e;
	pthread_mutex_lock(&start_lock);
	if (eng.state == 0) {
		shim_busy = 1;
		if (engine_start(st) == 0) {
			__atomic_store_n(&eng.state, 1, __ATOMIC_RELEASE);
			rlog_debug(&st->log, "engine thread started");
		} else {
			eng.state = -1;
			rlog_warn(&st->log, "cannot start the rock engine (%s); "
			    "connections stay plain TCP", strerror(errno));
		}
		shim_busy = busy;
	}
	pthread_mutex_unlock(&start_lock);
	return eng.state == 1 ? eng.e : NULL;
}

/* Lock held. This process keeps no part of the engine that runs (or ran)
 * elsewhere: a copy of a data socket here would hold its connection open
 * after that engine let go of it. sockets: its descriptors are still
 * open here. */
static void
let_go_of_engine(int sockets)
{
	shim_fork_relay_child();
	if (sockets && eng.e != NULL)
		rock_engine_close_fds(eng.e, shim_real.close);
	if (eng.e != NULL)
		rock_engine_forget_secrets(eng.e);
	eng.state = -1;
	rock_ctl_forget(eng.ctl);	/* the other process's, still answering */
	eng.ctl = NULL;
	shim_rock_orphan_all();
}

/* A forked child has no engine thread: the rocks it shares with this
 * process become copies of a loopback connection that this process
 * relays to each rock (fork.c). */
static void
before_fork(void)
{
	static int warned;
	int n;

	shim_lock();
	shim_fd_forget_births();
	if (eng.forking_keeper || eng.state != 1)
		return;
	shim_rock_settle_wait(NULL, shim_now_ms() + SHIM_SETTLE_FORK_MS);
	if ((n = shim_fork_relay_all()) > 0)
		rlog_info(&shim_state()->log, "fork: %d rocks shared with the "
		    "child, relayed by pid %d", n, (int)getpid());
	/* A rock that could not be relayed (a call of the program's inside
	 * the kernel on it, no loopback): the child's copy is a plain
	 * socket. An accepted one then ends with a reset. */
	if ((n = shim_rock_mark_forked()) > 0 && !warned) {
		warned = 1;
		rlog_warn(&shim_state()->log, "fork with %d rocks this process "
		    "could not relay: a child's copies are plain sockets, and "
		    "accepted ones will end with a reset when closed", n);
	}
}

static void
after_fork_parent(void)
{
	int keeper = eng.forking_keeper;

	shim_unlock();
	if (!keeper) {
		shim_fork_relay_start();
		shim_listener_after_fork(0);
	}
}

static void
after_fork_child(void)
{
	if (eng.forking_keeper) {
		/* The keeper runs the loop itself, in this thread, and
		 * answers rock ls at a socket of its own (keeper.c); the
		 * program's is the program's to remove. */
		rock_ctl_free(eng.ctl, 0);
		eng.ctl = NULL;
		eng.stopping = 0;
		eng.owner = getpid();
		shim_waiters_forget();
		shim_listener_keeper();
		shim_unlock();
		shim_reinit_after_fork();
		return;
	}
	shim_listener_after_fork(1);
	shim_rdv_child();
	let_go_of_engine(eng.state == 1);
	shim_unlock();
	shim_reinit_after_fork();
}

/* The thread ends between two callbacks, so the loop is whole for whoever
 * runs it next. 0 once it has. */
static int
engine_stop(void)
{
	struct timespec until;
	uint64_t one = 1;

	__atomic_store_n(&eng.stopping, 1, __ATOMIC_RELEASE);
	(void)!shim_real.write(eng.cmd_fd, &one, sizeof(one));
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 1;
	return pthread_timedjoin_np(eng.thread, NULL, &until);
}

/* Lock held. shim_wait, or, in a hand-over from a signal handler (which
 * may have interrupted a condition wait of this thread's), a short nap. */
static void
leave_wait(int64_t until)
{
	struct timespec tick = { 0, 5 * 1000000L };

	if (!eng.nested) {
		(void)shim_wait(until);
		return;
	}
	shim_unlock();
	nanosleep(&tick, NULL);
	shim_lock();
}

/* What the peers are still owed is finished by a keeper process, which
 * inherits the engine whole (sockets, rings, keys); the program goes on
 * exiting at once. */
static void
hand_to_keeper(int nrocks)
{
	const struct shim_state *st = shim_state();
	pid_t program = getpid(), pid;
	int64_t until;
	int err;

	/* A write under way would reach the socket here and its ring there. */
	shim_lock();
	until = shim_now_ms() + 1000;
	while (shim_rock_writing() && shim_now_ms() < until)
		leave_wait(until);
	shim_unlock();
	if ((err = shim_fork_relay_stop()) != 0)
		rlog_warn(&st->log, "the relay of rocks shared by a fork did not "
		    "stop (%s): they are cut", strerror(err));
	if ((err = engine_stop()) != 0) {
		rlog_warn(&st->log, "the engine did not stop (%s): %d rocks not "
		    "finished are cut", strerror(err), nrocks);
		return;
	}
	__atomic_store_n(&eng.state, -1, __ATOMIC_RELEASE);
	eng.forking_keeper = 1;
	pid = fork();
	if (pid == 0) {
		/* The keeper is nobody's child: after an exec it would be the
		 * new image's (its wait() would wait for it, its SIGCHLD
		 * come), and the program waits here for this one to go. */
		if ((pid = fork()) < 0)
			rlog_warn(&st->log, "cannot start a keeper (%s): %d rocks "
			    "not finished are cut", strerror(errno), nrocks);
		if (pid != 0)
			_exit(0);
		shim_keeper_run(eng.base, eng.e, eng.cmd_fd, nrocks, program);
	}
	eng.forking_keeper = 0;
	eng.kept = pid > 0;
	if (pid < 0)
		rlog_warn(&st->log, "cannot start a keeper (%s): %d rocks not "
		    "finished are cut", strerror(errno), nrocks);
	else
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
}

/* Decision 8: at exit the peer gets every byte written and our end. The
 * program itself waits only while the paths are up, ROCK_LINGER_MS at
 * most (once all is consumed, a moment for the ends to close, then for
 * the farewells to be heard); what is left goes to a keeper, so a dead
 * path delays the exit by ROCK_LINGER_MS at most. */
static int
hand_over(void)
{
	const struct shim_state *st = shim_state();
	int64_t deadline, grace = -1, until;
	int left, relays;
	size_t unheard = 0;

	/* No fflush(NULL) here: it takes every stream's lock, and a thread
	 * blocked in fgets holds one (the exit hung). stdio reaches rocks
	 * only through relays (stdio.c), which outlive this: glibc's own
	 * flush, after the destructors, goes to them. */
	deadline = shim_now_ms() + st->cfg.linger_ms;
	shim_lock();
	shim_rock_release_all();
	while ((left = shim_rock_count()) > 0 && !shim_rock_any_suspended()) {
		if (grace < 0 && shim_rock_unacked_all() == 0)
			grace = shim_now_ms() + 200;
		until = grace >= 0 && grace < deadline ? grace : deadline;
		if (shim_now_ms() >= until)
			break;
		leave_wait(until);
	}
	/* All finished, their farewells said, and no keeper to come (it
	 * would repeat them itself): while the peers have not acknowledged
	 * some, the ticks repeat them (a mass close's copies can overflow a
	 * queue on the way, and a peer that hears none holds the rock for
	 * its dead time). Heard within a round trip on a working path;
	 * nothing tells this thread, so it looks every 5 ms. */
	relays = shim_fork_relay_count();
	while (left == 0 && relays == 0 &&
	    (unheard = rock_engine_farewells_unheard(eng.e)) > 0 &&
	    (until = shim_now_ms()) < deadline) {
		leave_wait(until + 5 < deadline ? until + 5 : deadline);
		left = shim_rock_count();	/* another thread's, meanwhile */
		relays = shim_fork_relay_count();
	}
	if (unheard > 0 && left == 0 && relays == 0)
		rlog_debug(&st->log, "exit: %zu farewells not acknowledged; "
		    "the program goes", unheard);
	shim_unlock();
	if (left > 0 || relays > 0)
		hand_to_keeper(left + relays);
	return __atomic_load_n(&eng.state, __ATOMIC_ACQUIRE) != 1;
}

/* The engine runs in this process (not in a vfork child's parent). */
int
shim_engine_here(void)
{
	return shim_engine_running() != NULL && eng.owner == getpid();
}

/* 1 when this thread may hand the engine over: it runs, here (a vfork
 * child shares its memory, not its process), and no other thread hands
 * it over (this one waits for that to end). A signal handler that exits
 * or executes where this thread holds the shim's lock hands nothing over. */
static int
may_leave(void)
{
	struct timespec tick = { 0, 10 * 1000000L };
	int ok, nested;

	if (shim_engine_running() == NULL || eng.owner != getpid() ||
	    shim_lock_within(1000, &nested) != 0)
		return 0;
	/* Another thread's hand-over is under way: when it ends (an exec
	 * that failed) the engine is gone or free again. */
	while (eng.leaving && !pthread_equal(eng.leaver, pthread_self())) {
		shim_unlock();
		nanosleep(&tick, NULL);
		shim_lock();
	}
	/* Not twice in one thread (a handler on top of its own hand-over). */
	if ((ok = eng.state == 1 && !eng.leaving)) {
		eng.leaving = 1;
		eng.leaver = pthread_self();
		eng.nested = nested;
	}
	shim_unlock();
	return ok;
}

void
shim_engine_leave(void)
{
	if (!may_leave())
		return;
	shim_listener_leave();
	(void)hand_over();
	if (eng.ctl_path[0] != '\0')
		(void)unlink(eng.ctl_path);
	if (!eng.kept)
		shim_rdv_unlink();
}

/* exec ends the engine's thread with the image: what the new image
 * inherits of a rock becomes a relay's holder end (fork.c), the rocks
 * that close on exec are finished as at exit, and a keeper runs both;
 * this image then holds nothing of the engine. */
void
shim_engine_exec(void)
{
	const struct shim_state *st = shim_state();
	int relayed, cut, busy;

	shim_listener_exec();
	if (!may_leave())
		return;
	shim_lock();
	shim_rock_settle_wait(NULL, shim_now_ms() + SHIM_SETTLE_FORK_MS);
	relayed = shim_fork_relay_all();
	cut = shim_rock_mark_exec();
	busy = shim_fork_relay_count() + shim_rock_live_count();
	shim_unlock();
	if (relayed > 0)
		rlog_info(&st->log, "exec: %d rocks passed to the new image, "
		    "relayed by a keeper", relayed);
	if (cut > 0)
		rlog_warn(&st->log, "exec with %d rocks in use by a call of the "
		    "program's: the new image's copies are plain sockets, and "
		    "the rocks end with a reset", cut);
	if (busy == 0 || !hand_over()) {
		/* Nothing to hand over, or all finished in time: the engine
		 * ends with the image (or goes on, if the exec fails). */
		shim_lock();
		eng.leaving = 0;
		shim_unlock();
		return;
	}
	if (eng.ctl_path[0] != '\0')
		(void)unlink(eng.ctl_path);
	shim_lock();
	let_go_of_engine(1);
	eng.leaving = 0;	/* a thread waiting may go on, if the exec fails */
	shim_unlock();
}

__attribute__((destructor)) static void
linger_at_exit(void)
{
	shim_engine_leave();
}

__attribute__((constructor)) static void
engine_atfork(void)
{
	pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}
