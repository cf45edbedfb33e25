/* workers.c: rockd on every core: a master starts `workers` event loops as processes, each with its own listeners (SO_REUSEPORT) and control channel, and a reconnect reaches the worker its connection id names. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rock_crypto.h"
#include "rock_ctl.h"
#include "rock_fdpass.h"
#include "rockd.h"

/* A worker that dies is replaced after RESPAWN_FIRST_MS; one that died
 * within RESPAWN_QUICK_MS of its start waits twice as long as the one
 * before, up to RESPAWN_MAX_MS (its port may still be another's, or its
 * fault lasting): never in a loop, and the others serve on. */
#define RESPAWN_FIRST_MS 100
#define RESPAWN_QUICK_MS 60000
#define RESPAWN_MAX_MS 30000
/* A hand-over committed (one of ours exited after it): those of ours
 * still running this much later are cut, so that the successor's own
 * can take their ports. */
#define CUT_LEFTOVERS_MS 2000

static void to_devnull(void);

struct master {
	struct rockd *d;
	sigset_t sigs, old;		/* the master's, blocked; what it had */
	pid_t *pid;			/* per worker; 0: gone */
	int *rx;			/* per worker: its inbox's receive end */
	int alive, stopping, status;
	int report, ready_rx;		/* the master's own: not a worker's */
	int commit_tx;			/* a successor's: the workers' verdict */
	pid_t heir;			/* USR2: the successor master; 0: none */
	rockd_worker_fn run;
	void *arg;
	int64_t born_ms[ROCKD_MAX_WORKERS];	/* when each was started */
	int64_t respawn_at[ROCKD_MAX_WORKERS];	/* when to start one; 0: not */
	int quick[ROCKD_MAX_WORKERS];	/* deaths in a row soon after start */
	int committed;			/* one of ours exited after a hand-over */
	int64_t cut_at;			/* then: when to cut the rest; 0: done */
};

/* Each worker publishes its figures for the metrics this often; worker 0
 * serves them, the others' as far behind as this. */
#define PUBLISH_MS 500

/* The workers' figures, in memory the processes share: a slot each,
 * written by its worker only, under a sequence count that is odd while it
 * writes (a reader copies again until it reads one even count twice). */
struct rockd_board {
	uint8_t announce_random[ROCK_ANNOUNCE_RANDOM];
	struct {
		uint32_t seq;
		struct rockd_snap snap;
	} slot[ROCKD_MAX_WORKERS];
};

static void
publish(evutil_socket_t fd, short what, void *arg)
{
	struct rockd *d = arg;
	struct rockd_snap sn;
	uint32_t *seq = &d->board->slot[d->worker].seq;

	(void)fd;
	(void)what;
	rock_log_limit_flush(&d->log, &d->inbox_log);
	rockd_metrics_snap(d, &sn);
	/* Odd: the worker before us was killed mid-write; even it first. */
	if (*seq & 1)
		__atomic_store_n(seq, *seq + 1, __ATOMIC_RELAXED);
	__atomic_store_n(seq, *seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	memcpy(&d->board->slot[d->worker].snap, &sn, sizeof(sn));
	__atomic_store_n(seq, *seq + 1, __ATOMIC_RELEASE);
}

uint8_t *
rockd_workers_announcement(struct rockd *d)
{
	return d->board->announce_random;
}

void
rockd_worker_snap_read(const struct rockd *d, int k, struct rockd_snap *sn)
{
	/* The last whole copy read of each: what a read that keeps meeting
	 * a write (or a worker killed in one) returns, not zeros that a
	 * collector would take for a counter reset. */
	static struct rockd_snap last[ROCKD_MAX_WORKERS];
	const uint32_t *seq = &d->board->slot[k].seq;
	uint32_t before, after;
	int tries;

	for (tries = 0; tries < 1000; tries++) {
		before = __atomic_load_n(seq, __ATOMIC_ACQUIRE);
		memcpy(sn, &d->board->slot[k].snap, sizeof(*sn));
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		after = __atomic_load_n(seq, __ATOMIC_RELAXED);
		if (before == after && !(before & 1)) {
			last[k] = *sn;
			return;
		}
	}
	*sn = last[k];
}

/* What travels in an inbox, with one connection (SCM_RIGHTS): a
 * reconnect for this worker's session and the request read from it, or a
 * control connection (rock ls, rock kill) to answer, its request line and
 * the rows listed before. */
enum { INBOX_RECONNECT = 1, INBOX_CONTROL, INBOX_HANDOVER };
struct routed {
	uint32_t type;
	uint32_t len;			/* of body */
	uint64_t rows;
	uint8_t body[ROCK_CTL_REQ_MAX + 1];
};
_Static_assert(ROCK_RECONNECT_REQ_LEN <= ROCK_CTL_REQ_MAX + 1,
    "a reconnect request fits an inbox message");

static void
reset_close(int fd)
{
	struct linger reset = { 1, 0 };

	(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
	close(fd);
}

/* 0, the connection passed on (closed here); else -1, still ours. */
static int
pass(struct rockd *d, int fd, uint32_t type, const void *body, size_t len,
    uint64_t rows, int worker)
{
	struct routed m;

	memset(&m, 0, sizeof(m));
	m.type = type;
	m.len = (uint32_t)(len < sizeof(m.body) ? len : sizeof(m.body));
	m.rows = rows;
	memcpy(m.body, body, m.len);
	if (rock_fd_send(d->inbox_tx[worker], &m, sizeof(m), fd) !=
	    (ssize_t)sizeof(m)) {
		rlog_limited(&d->log, &d->inbox_log, ROCK_LOG_WARN,
		    "%s for worker %d: cannot pass it: %s",
		    type == INBOX_RECONNECT ? "reconnect" : type ==
		    INBOX_CONTROL ? "control request" : "hand-over channel",
		    worker, strerror(errno));
		return -1;
	}
	close(fd);
	return 0;
}

static void
route(void *arg, int fd, const uint8_t *req, size_t len, int worker)
{
	struct rockd *d = arg;

	/* A full inbox (its worker stuck) or a gone one: the client counts
	 * a reset as a failed attempt and dials again. */
	if (pass(d, fd, INBOX_RECONNECT, req, len, 0, worker) != 0)
		reset_close(fd);
	else
		rlog_debug(&d->log, "reconnect for worker %d: passed to it",
		    worker);
}

/* rock ls and rock kill: the next worker, or the one a rock's id names;
 * one that cannot take it leaves the list cut short (no "end"). */
static void
pass_control(void *arg, int fd, const char *req, unsigned long rows, int to)
{
	struct rockd *d = arg;

	if (pass(d, fd, INBOX_CONTROL, req, strlen(req) + 1, rows, to) != 0)
		close(fd);
}

static void
on_inbox(evutil_socket_t fd, short what, void *arg)
{
	struct rockd *d = arg;
	struct routed m;
	ssize_t n;
	int conn, flags, i;

	(void)what;
	/* A bounded batch: routed reconnects must not starve the loop. */
	for (i = 0; i < 64; i++) {
		if ((n = rock_fd_recv(fd, &m, sizeof(m), &conn, &flags)) < 0)
			return;
		/* Out of descriptors, the kernel drops the connection
		 * (MSG_CTRUNC): its client dials again. */
		if (conn < 0 || n != (ssize_t)sizeof(m) ||
		    m.len > sizeof(m.body)) {
			rlog_limited(&d->log, &d->inbox_log, ROCK_LOG_WARN,
			    "worker %d: a connection passed to it was lost "
			    "(%s)", d->worker, conn < 0 && !(flags & MSG_TRUNC) ?
			    "no descriptor left" : "truncated");
			if (conn >= 0)
				close(conn);
			continue;
		}
		if (m.type == INBOX_HANDOVER) {
			rlog_info(&d->log, "worker %d: handing over to its "
			    "successor", d->worker);
			rockd_handover_begin(d, conn, 0);
			continue;
		}
		if (m.type == INBOX_CONTROL) {
			m.body[sizeof(m.body) - 1] = '\0';
			if (d->ctl != NULL)
				rock_ctl_continue(d->ctl, conn, (char *)m.body,
				    (unsigned long)m.rows);
			else
				close(conn);
			continue;
		}
		/* The same bound as on the connections it accepts itself. */
		if (m.type != INBOX_RECONNECT || m.len != ROCK_RECONNECT_REQ_LEN ||
		    rock_engine_nhandshakes(d->engine) >= ROCKD_MAX_HANDSHAKES) {
			reset_close(conn);
			continue;
		}
		rock_server_reconnect(d->engine, conn, m.body, m.len);
	}
}

int
rockd_worker_inbox_start(struct rockd *d)
{
	const struct timeval every = { 0, PUBLISH_MS * 1000 };

	d->inbox_log.what = "lost or unpassed connection";
	d->publish = event_new(d->base, -1, EV_PERSIST, publish, d);
	if (d->publish == NULL || event_add(d->publish, &every) != 0) {
		rlog_error(&d->log, "worker %d: cannot publish its figures",
		    d->worker);
		return -1;
	}
	publish(-1, 0, d);
	rock_engine_set_router(d->engine, route, d);
	if (d->ctl != NULL)
		rock_ctl_set_workers(d->ctl, d->worker, d->nworkers,
		    pass_control, d);
	d->inbox_ev = event_new(d->base, d->inbox_rx, EV_READ | EV_PERSIST,
	    on_inbox, d);
	if (d->inbox_ev == NULL || event_add(d->inbox_ev, NULL) != 0) {
		rlog_error(&d->log, "worker %d: cannot watch its inbox", d->worker);
		return -1;
	}
	return 0;
}

void
rockd_worker_inbox_stop(struct rockd *d)
{
	if (d->publish != NULL)
		event_free(d->publish);
	d->publish = NULL;
	if (d->inbox_ev != NULL)
		event_free(d->inbox_ev);
	d->inbox_ev = NULL;
}

void
rockd_worker_signals(struct rockd *d)
{
	(void)sigprocmask(SIG_SETMASK, &d->sigmask, NULL);
}

int
rockd_worker_commit(struct rockd *d)
{
	struct pollfd p = { d->commit_fd, POLLIN, 0 };
	char verdict = 0;
	rockd_worker_ready(d);
	if (d->commit_fd < 0)
		return -1;
	/* The master writes a byte each once all hold their share, or
	 * closes (EOF: give up); it waits no longer than this itself. */
	int64_t end = rockd_now_ms() + ROCKD_WORKERS_START_MS + 5000;
	int r;

	do
		r = poll(&p, 1, (int)(end - rockd_now_ms()));
	while (r < 0 && errno == EINTR && rockd_now_ms() < end);
	if (r != 1 || read(d->commit_fd, &verdict, 1) != 1)
		verdict = 0;
	close(d->commit_fd);
	d->commit_fd = -1;
	return verdict == 1 ? 0 : -1;
}

void
rockd_worker_ready(struct rockd *d)
{
	char ok = 1;

	if (d->nworkers <= 1 || d->ready_fd < 0)
		return;
	(void)write(d->ready_fd, &ok, 1);
	close(d->ready_fd);
	d->ready_fd = -1;
	if (d->detached)
		to_devnull();
	d->log.warn_to_stderr = 0;
}

/* In the child. The signals the master waits for stay blocked until the
 * worker's loop has its handlers (rockd_worker_signals). Its own process
 * group: a terminal's ^C reaches the master, which passes it on once. */
static void
become_worker(struct master *m, int k, int ready, pid_t master)
{
	struct rockd *d = m->d;
	int i;

	d->sigmask = m->old;
	(void)setpgid(0, 0);
	/* A master killed outright (SIGKILL, a crash) is rockd killed
	 * outright, as a lone rockd would be: no orphan drains on for
	 * 30 s holding the ports a restart needs. One gone already before
	 * the request counts too. */
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != master)
		_exit(1);
	if (m->report >= 0)
		close(m->report);
	if (m->ready_rx >= 0)
		close(m->ready_rx);
	if (m->commit_tx >= 0)
		close(m->commit_tx);
	d->worker = k;
	d->ready_fd = ready;
	for (i = 0; i < d->nworkers; i++)
		if (i != k)
			close(m->rx[i]);
	d->inbox_rx = m->rx[k];
	_exit(m->run(d, m->arg));
}

static pid_t
spawn(struct master *m, int k, int ready)
{
	pid_t master = getpid(), pid = fork();

	if (pid == 0)
		become_worker(m, k, ready, master);
	if (pid < 0)
		rlog_error(&m->d->log, "worker %d: fork: %s", k, strerror(errno));
	return pid;
}

/* Without -F: into the background as daemon(3) would, except that the
 * parent stays until the workers listen and exits with their verdict, so
 * a bad port still fails the command. Returns where the verdict goes. */
static int
detach(void)
{
	int p[2];
	char verdict;

	if (pipe2(p, O_CLOEXEC) != 0)
		return -1;
	switch (fork()) {
	case -1:
		return -1;
	case 0:
		close(p[0]);
		(void)setsid();
		return p[1];
	default:
		close(p[1]);
		if (read(p[0], &verdict, 1) != 1)
			verdict = 1;
		_exit(verdict);
	}
}

static void
verdict(int *fd, char status)
{
	if (*fd < 0)
		return;
	(void)write(*fd, &status, 1);
	close(*fd);
	*fd = -1;
}

/* A daemon's standard descriptors lead nowhere once it has started. */
static void
to_devnull(void)
{
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return;
	(void)dup2(fd, 0);
	(void)dup2(fd, 1);
	(void)dup2(fd, 2);
	close(fd);
	(void)chdir("/");
}

static int
find_worker(const struct master *m, pid_t pid)
{
	int k;

	for (k = 0; k < m->d->nworkers; k++)
		if (m->pid[k] == pid)
			return k;
	return -1;
}

static void
signal_all(struct master *m, int sig)
{
	int k;

	for (k = 0; m->pid != NULL && k < m->d->nworkers; k++)
		if (m->pid[k] > 0)
			(void)kill(m->pid[k], sig);
}

/* Until each worker wrote its byte: -1 if one exits first or they take
 * longer than ROCKD_WORKERS_START_MS. */
static int
wait_ready(struct master *m, int fd)
{
	struct pollfd p = { fd, POLLIN, 0 };
	int64_t deadline = rockd_now_ms() + ROCKD_WORKERS_START_MS;
	int ready = 0, st;
	char buf[ROCKD_MAX_WORKERS];
	ssize_t n;
	pid_t pid;

	while (ready < m->d->nworkers) {
		if ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
			int k = find_worker(m, pid);

			if (k >= 0) {
				m->pid[k] = 0;
				m->alive--;
			}
			rlog_error(&m->d->log, "worker %d exited while starting", k);
			return -1;
		}
		if (rockd_now_ms() > deadline) {
			rlog_error(&m->d->log, "%d of %d workers started within "
			    "%d s", ready, m->d->nworkers, ROCKD_WORKERS_START_MS / 1000);
			return -1;
		}
		if (poll(&p, 1, 100) > 0 &&
		    (n = read(fd, buf, sizeof(buf))) > 0)
			ready += (int)n;
	}
	/* Not past it: a predecessor's workers wait for the commit no
	 * longer than that (and a little). */
	if (rockd_now_ms() > deadline) {
		rlog_error(&m->d->log, "the workers started too late");
		return -1;
	}
	return 0;
}

/* Worker k again, after a pause that grows while it keeps dying soon. */
static void
schedule_respawn(struct master *m, int k)
{
	int64_t now = rockd_now_ms();
	int64_t delay;

	m->quick[k] = now - m->born_ms[k] < RESPAWN_QUICK_MS ? m->quick[k] + 1 : 0;
	delay = m->quick[k] <= 1 ? RESPAWN_FIRST_MS :
	    (int64_t)1000 << (m->quick[k] < 7 ? m->quick[k] - 2 : 5);
	if (delay > RESPAWN_MAX_MS)
		delay = RESPAWN_MAX_MS;
	m->respawn_at[k] = now + delay;
	rlog_info(&m->d->log, "worker %d: starting another in %lld ms", k,
	    (long long)delay);
}

static void
worker_gone(struct master *m, int k, pid_t pid, int st)
{
	m->pid[k] = 0;
	m->alive--;
	/* Its share is the successor's now: the hand-over is committed (the
	 * successor's workers acknowledge all or none). */
	if (m->heir > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		if (!m->committed)
			m->cut_at = rockd_now_ms() + CUT_LEFTOVERS_MS;
		m->committed = 1;
		return;
	}
	if (m->stopping || m->committed) {
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			m->status = 1;
		return;
	}
	if (WIFSIGNALED(st))
		rlog_error(&m->d->log, "worker %d (pid %ld) killed by signal %d; "
		    "its sessions are gone", k, (long)pid, WTERMSIG(st));
	else
		rlog_error(&m->d->log, "worker %d (pid %ld) exited with %d; its "
		    "sessions are gone", k, (long)pid, WEXITSTATUS(st));
	schedule_respawn(m, k);
}

static void
respawn(struct master *m, int k)
{
	m->respawn_at[k] = 0;
	m->born_ms[k] = rockd_now_ms();
	if ((m->pid[k] = spawn(m, k, -1)) > 0) {
		m->alive++;
		rlog_info(&m->d->log, "worker %d restarted (pid %ld)", k,
		    (long)m->pid[k]);
	} else {
		m->pid[k] = 0;
		schedule_respawn(m, k);
	}
}

/* USR2: the installed binary as the successor master, with a channel for
 * each worker; each of ours hands its share over on its own (the one-
 * process hand-over), the successor's workers commit all or none. */
static void
hand_over(struct master *m)
{
	struct rockd *d = m->d;
	int ours[ROCKD_MAX_WORKERS], theirs[ROCKD_MAX_WORKERS], sv[2], k, n = 0;
	pid_t pid;

	if (m->stopping || m->heir > 0 || d->exe[0] == '\0') {
		rlog_warn(&d->log, "SIGUSR2: %s; ignored", m->stopping ?
		    "stopping" : m->heir > 0 ? "a hand-over is in progress" :
		    "rockd's own path was not found at start");
		return;
	}
	for (n = 0; n < d->nworkers; n++) {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
			break;
		ours[n] = sv[0];
		theirs[n] = sv[1];
	}
	pid = n == d->nworkers ? fork() : -1;
	if (pid == 0) {
		(void)sigprocmask(SIG_SETMASK, &m->old, NULL);
		rockd_exec_successor(d, theirs, n);
	}
	for (k = 0; k < n; k++)
		close(theirs[k]);
	if (pid < 0) {
		rlog_error(&d->log, "SIGUSR2: %s", strerror(errno));
		for (k = 0; k < n; k++)
			close(ours[k]);
		return;
	}
	m->heir = pid;
	rlog_info(&d->log, "SIGUSR2: started %s as pid %ld; each worker hands "
	    "over once it has loaded its configuration", d->exe, (long)pid);
	for (k = 0; k < n; k++)
		if (m->pid[k] <= 0 ||
		    pass(d, ours[k], INBOX_HANDOVER, "", 0, 0, k) != 0)
			close(ours[k]);	/* its successor gives up: all do */
}

/* The successor ended: having taken over, or not (then we serve on). */
static void
heir_gone(struct master *m, int st)
{
	char how[96];
	int k;


	rlog_error(&m->d->log, "hand-over: successor %ld %s%s", (long)m->heir,
	    rockd_handover_ended(st, how, sizeof(how)), m->committed ?
	    " after it took over: its sessions are gone; starting workers "
	    "afresh" : "; still serving");
	m->heir = 0;
	if (m->committed) {
		m->committed = 0;
		m->cut_at = 0;
		for (k = 0; k < m->d->nworkers; k++)
			if (m->pid[k] <= 0)
				m->respawn_at[k] = rockd_now_ms();
	}
	/* It may have written its pid before it gave up. */
	(void)rockd_pidfile_write(m->d);
}

static void
on_signal(struct master *m, int sig)
{
	pid_t pid;
	int st, k;

	switch (sig) {
	case SIGCHLD:
		while ((pid = waitpid(-1, &st, WNOHANG)) > 0)
			if ((k = find_worker(m, pid)) >= 0)
				worker_gone(m, k, pid, st);
			else if (pid == m->heir)
				heir_gone(m, st);
		break;
	case SIGTERM:
	case SIGINT:
		/* Each worker drains as a lone rockd does; a second signal
		 * cuts, in each. */
		m->stopping = 1;
		signal_all(m, sig);
		break;
	case SIGHUP:
		rockd_config_reread(m->d);
		signal_all(m, SIGHUP);
		break;
	case SIGUSR2:
		hand_over(m);
		break;
	}
}

/* The next timer (a respawn, the cut after a commit): ms from now, or
 * -1 for none. */
static int64_t
next_timer(const struct master *m)
{
	int64_t next = m->cut_at, now = rockd_now_ms();
	int k;

	for (k = 0; k < m->d->nworkers; k++)
		if (m->respawn_at[k] > 0 && (next == 0 || m->respawn_at[k] < next))
			next = m->respawn_at[k];
	return next == 0 ? -1 : next > now ? next - now : 0;
}

static void
run_timers(struct master *m)
{
	int64_t now = rockd_now_ms();
	int k;

	for (k = 0; k < m->d->nworkers; k++) {
		if (m->respawn_at[k] == 0 || m->respawn_at[k] > now)
			continue;
		if (m->stopping || m->committed)
			m->respawn_at[k] = 0;
		else
			respawn(m, k);
	}
	if (m->cut_at > 0 && m->cut_at <= now) {
		m->cut_at = 0;
		rlog_error(&m->d->log, "hand-over: %d of our workers still run "
		    "after the others handed over: cutting their sessions",
		    m->alive);
		signal_all(m, SIGTERM);	/* a second one cuts at once */
		signal_all(m, SIGTERM);
	}
}

/* The master has no event loop: it waits for its signals (blocked since
 * before the first fork, so none is lost) and its timers until no worker
 * is left or due. */
static void
master_loop(struct master *m)
{
	struct timespec ts;
	int64_t wait;
	int sig;

	on_signal(m, SIGCHLD);	/* a worker that died before we waited */
	while (m->alive > 0 ||
	    (!m->stopping && !m->committed && next_timer(m) >= 0)) {
		if ((wait = next_timer(m)) < 0) {
			sig = sigwaitinfo(&m->sigs, NULL);
		} else {
			ts.tv_sec = wait / 1000;
			ts.tv_nsec = (wait % 1000) * 1000000;
			sig = sigtimedwait(&m->sigs, NULL, &ts);
		}
		if (sig > 0)
			on_signal(m, sig);
		else if (errno != EAGAIN && errno != EINTR)
			break;
		run_timers(m);
		if (m->stopping && m->alive == 0)
			break;
	}
}

static void
master_free(struct master *m)
{
	struct rockd *d = m->d;
	int k, st;

	signal_all(m, SIGTERM);
	for (k = 0; k < d->nworkers; k++)
		if (m->pid != NULL && m->pid[k] > 0 &&
		    waitpid(m->pid[k], &st, 0) == m->pid[k])
			m->pid[k] = 0;
	(void)sigprocmask(SIG_SETMASK, &m->old, NULL);
	for (k = 0; k < d->nworkers; k++) {
		if (m->rx != NULL && m->rx[k] >= 0)
			close(m->rx[k]);
		if (d->inbox_tx != NULL && d->inbox_tx[k] >= 0)
			close(d->inbox_tx[k]);
	}
	free(m->rx);
	free(m->pid);
	free(d->inbox_tx);
	d->inbox_tx = NULL;
	rock_ticket_store_free(d->tickets);
	d->tickets = NULL;
	rock_strike_free(d->strike);
	d->strike = NULL;
	if (d->board != NULL)
		munmap(d->board, sizeof(*d->board));
	d->board = NULL;
}

static int
make_inboxes(struct master *m)
{
	struct rockd *d = m->d;
	int k, sv[2];

	m->pid = calloc((size_t)d->nworkers, sizeof(*m->pid));
	m->rx = malloc((size_t)d->nworkers * sizeof(*m->rx));
	d->inbox_tx = malloc((size_t)d->nworkers * sizeof(*d->inbox_tx));
	if (m->pid == NULL || m->rx == NULL || d->inbox_tx == NULL)
		return -1;
	for (k = 0; k < d->nworkers; k++)
		m->rx[k] = d->inbox_tx[k] = -1;
	for (k = 0; k < d->nworkers; k++) {
		if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) != 0)
			return -1;
		m->rx[k] = sv[0];
		d->inbox_tx[k] = sv[1];
	}
	return 0;
}

int
rockd_workers_run(struct rockd *d, int foreground, int successor,
    rockd_worker_fn run, void *arg)
{
	struct master m;
	int ready[2] = { -1, -1 }, commit[2] = { -1, -1 }, report = -1, k;
	char go[ROCKD_MAX_WORKERS];

	memset(&m, 0, sizeof(m));
	m.d = d;
	m.run = run;
	m.arg = arg;
	m.status = 1;
	m.report = m.ready_rx = m.commit_tx = -1;
	d->commit_fd = -1;
	d->ready_fd = -1;
	signal(SIGPIPE, SIG_IGN);
	d->detached = !foreground;
	sigemptyset(&m.sigs);
	sigaddset(&m.sigs, SIGCHLD);
	sigaddset(&m.sigs, SIGTERM);
	sigaddset(&m.sigs, SIGINT);
	sigaddset(&m.sigs, SIGHUP);
	sigaddset(&m.sigs, SIGUSR2);
	(void)sigprocmask(SIG_BLOCK, &m.sigs, &m.old);
	if (!foreground && (m.report = report = detach()) < 0) {
		rlog_error(&d->log, "cannot detach: %s", strerror(errno));
		return 1;
	}
	d->board = mmap(NULL, sizeof(*d->board), PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (d->board == MAP_FAILED)
		d->board = NULL;
	else if (d->node > 0)
		memcpy(d->board->announce_random, d->fleet_random,
		    ROCK_ANNOUNCE_RANDOM);
	else
		rock_random(d->board->announce_random, ROCK_ANNOUNCE_RANDOM);
	if (d->board == NULL ||
	    rock_ticket_store_new(&d->tickets) != 0 ||
	    rock_strike_new(&d->strike) != 0 || make_inboxes(&m) != 0 ||
	    pipe2(ready, O_CLOEXEC) != 0) {
		rlog_error(&d->log, "workers: %s", strerror(errno));
		goto out;
	}
	m.ready_rx = ready[0];
	if (!successor && rockd_services_unclaimed(d, &d->cfg) != 0)
		goto out;
	/* A successor's workers take over all or none (rockd_worker_commit). */
	if (successor) {
		/* The predecessor's workers issue tickets and admit early
		 * flights until we commit: none of those tickets counts. */
		rock_strike_wait(d->strike);
		if (pipe2(commit, O_CLOEXEC) != 0) {
			rlog_error(&d->log, "workers: %s", strerror(errno));
			goto out;
		}
		m.commit_tx = commit[1];
		d->commit_fd = commit[0];
	}
	for (k = 0; k < d->nworkers; k++) {
		m.born_ms[k] = rockd_now_ms();
		if ((m.pid[k] = spawn(&m, k, ready[1])) <= 0) {
			m.pid[k] = 0;
			goto out;
		}
		m.alive++;
	}
	close(ready[1]);
	ready[1] = -1;
	/* The successor's channels are the workers' now: an old worker must
	 * see its counterpart's end when that one dies. */
	for (k = 0; k < d->ntakeover; k++)
		if (d->takeover_fds[k] >= 0) {
			close(d->takeover_fds[k]);
			d->takeover_fds[k] = -1;
		}
	if (commit[0] >= 0)
		close(commit[0]);
	commit[0] = d->commit_fd = -1;
	if (wait_ready(&m, ready[0]) != 0)
		goto out;
	close(ready[0]);
	ready[0] = m.ready_rx = -1;
	d->log.pid = getpid();
	/* Before the workers acknowledge, on which their predecessors exit:
	 * a supervisor that follows the file must find us there. */
	if (rockd_pidfile_write(d) != 0)
		goto out;
	if (successor) {
		/* Every old worker waits for this word now: its last ticket
		 * is older than this. */
		rock_strike_start(d->strike);
		memset(go, 1, sizeof(go));
		if (write(commit[1], go, (size_t)d->nworkers) != d->nworkers)
			goto out;
		close(commit[1]);
		commit[1] = m.commit_tx = -1;
	}
	rlog_info(&d->log, "%d workers started", d->nworkers);
	verdict(&report, 0);
	m.report = -1;
	if (!foreground)
		to_devnull();
	d->log.warn_to_stderr = 0;
	m.status = 0;
	master_loop(&m);
	if (m.committed) {
		rlog_info(&d->log, "handed over; exiting");
	} else {
		rlog_info(&d->log, "workers stopped");
		if (d->pidfile != NULL)
			unlink(d->pidfile);
	}
out:
	/* Before the workers are waited for: EOF tells a successor's workers
	 * to give up (the running rockd serves on). */
	if (commit[1] >= 0)
		close(commit[1]);
	if (commit[0] >= 0)
		close(commit[0]);
	master_free(&m);
	if (ready[0] >= 0)
		close(ready[0]);
	if (ready[1] >= 0)
		close(ready[1]);
	verdict(&report, (char)m.status);
	return m.status;
}
