/* keeper.c: the detached process that finishes an exited program's rocks, as the kernel finishes an orphaned socket, and runs the relays of rocks its forks still share. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/prctl.h>
#include <syslog.h>
#include <unistd.h>

#include <event2/event.h>

#include "rock_ctl.h"
#include "shim.h"

#define KEEPER_CHECK_MS 100
/* Once the peer has all of ours and our end, its own end is awaited this
 * long (Linux's tcp_fin_timeout for an orphan), then the rock is reset. */
#define KEEPER_PEER_END_MS 60000

struct keeper {
	struct event_base *base;
	struct rock_engine *e;
	struct event *ev_check;
	int64_t give_up_ms;		/* the suspend timeout from the start, if any */
};

/* Everything of the program's is closed: its pipes, files and other
 * sockets must not outlive it here. Only the engine's descriptors and
 * keep_fd stay; the standard ones read and write /dev/null. */
static void
close_unless_engine(const struct rock_engine *e, int keep_fd, int fd)
{
	if (fd >= 3 && fd != keep_fd && !rock_engine_owns_fd(e, fd) &&
	    !shim_fork_relay_owns_fd(fd) && !shim_rdv_owns_fd(fd))
		shim_real.close(fd);
}

static void
close_all_but_engine(const struct rock_engine *e, int keep_fd)
{
	DIR *d;
	struct dirent *de;
	long max;
	int null, fd;

	if ((null = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0) {
		for (fd = 0; fd < 3; fd++)
			if (fd != null && !rock_engine_owns_fd(e, fd))
				shim_real.dup2(null, fd);
		if (null > 2)
			shim_real.close(null);
	}
	if ((d = opendir("/proc/self/fd")) == NULL) {
		/* No /proc (a chroot): every number the limit allows. */
		max = sysconf(_SC_OPEN_MAX);
		for (fd = 3; fd < (max > 0 && max < 65536 ? max : 65536); fd++)
			close_unless_engine(e, keep_fd, fd);
		return;
	}
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.' && atoi(de->d_name) != dirfd(d))
			close_unless_engine(e, keep_fd, atoi(de->d_name));
	closedir(d);
}

/* The program's handlers and mask are not the keeper's: it ends on the
 * default signals, and a write to a reset socket is an error, not death. */
static void
default_signals(void)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL }, ign = { .sa_handler = SIG_IGN };
	sigset_t none;
	int sig;

	for (sig = 1; sig < NSIG; sig++)
		(void)sigaction(sig, sig == SIGPIPE ? &ign : &dfl, NULL);
	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
}

/* Lock held. Rocks whose peer has had our end for too long are reset;
 * past the suspend timeout every one is. */
static void
abort_overdue(struct keeper *k, int64_t now)
{
	struct shim_rock *r;

	while ((r = shim_rock_overdue(now, now >= k->give_up_ms ? 0 :
	    KEEPER_PEER_END_MS)) != NULL) {
		rlog_info(&shim_state()->log, "keeper %d: rock %s: reset: %s",
		    (int)getpid(), rock_session_name(r->s), now >= k->give_up_ms ?
		    "not finished within the suspend timeout" :
		    "the peer has had our end for a minute and keeps its own");
		/* The peer is told: a reset alone would read as a path
		 * failure, and it would keep the rock for its own timeout. */
		rock_session_kill(r->s, now >= k->give_up_ms ? "its keeper's "
		    "suspend timeout" : "its keeper waited a minute for the "
		    "peer's end");
	}
}

static void
on_check(evutil_socket_t fd, short what, void *arg)
{
	struct keeper *k = arg;
	int64_t now = shim_now_ms();
	int done;

	(void)fd;
	(void)what;
	shim_lock();
	abort_overdue(k, now);
	/* Rocks relayed for a fork's holders live as long as they are used. */
	done = shim_fork_relay_count() == 0 &&
	    ((shim_rock_live_count() == 0 && rock_engine_nfarewells(k->e) == 0) ||
	    now >= k->give_up_ms);
	shim_unlock();
	if (done)
		event_base_loopbreak(k->base);
}

/* rock ls and rock kill reach the rocks a keeper holds as they reached
 * the program's: at its own socket, under "keeper:PROGRAM". NULL: they
 * finish unseen. */
static struct rock_ctl *
keeper_ctl(const struct shim_state *st, struct rock_engine *e)
{
	char path[PATH_MAX], name[64];

	snprintf(name, sizeof(name), "keeper:%s", st->program);
	return shim_ctl_open(st, e, name, path, sizeof(path));
}

/* In the forked child, the only thread; the engine's thread is gone and
 * its loop stopped. Runs the loop until every rock is finished. */
void
shim_keeper_run(struct event_base *base, struct rock_engine *e, int keep_fd,
    int nrocks, pid_t program)
{
	const struct shim_state *st = shim_state();
	struct timeval check = { 0, KEEPER_CHECK_MS * 1000 };
	struct keeper k = { base, e, NULL, 0 };
	struct rock_ctl *ctl;

	shim_busy = 1;
	/* libc's syslog descriptor is about to be closed behind its back; a
	 * number it still believed its own could be the loop's next. */
	closelog();
	default_signals();
	(void)setsid();
	(void)prctl(PR_SET_NAME, "rock-keeper", 0, 0, 0);
	close_all_but_engine(e, keep_fd);
	shim_lock();
	shim_rock_abandon_connects();
	nrocks = shim_rock_live_count();
	shim_unlock();
	k.give_up_ms = st->cfg.suspend_timeout_s == 0 ? INT64_MAX :
	    shim_now_ms() + st->cfg.suspend_timeout_s * 1000LL;
	if (event_reinit(base) != 0 ||
	    (k.ev_check = event_new(base, -1, EV_PERSIST, on_check, &k)) == NULL ||
	    event_add(k.ev_check, &check) != 0) {
		rlog_warn(&st->log, "keeper %d: cannot run its loop; %d rocks of "
		    "pid %d are cut", (int)getpid(), nrocks, (int)program);
		_exit(1);
	}
	/* Before the line that names it: whoever reads the line finds it. */
	ctl = keeper_ctl(st, e);
	rlog_info(&st->log, "keeper %d: finishing %d rocks of pid %d",
	    (int)getpid(), nrocks, (int)program);
	shim_fork_relay_start();
	event_base_dispatch(base);
	shim_rdv_unlink();
	rock_ctl_free(ctl, 1);
	rlog_info(&st->log, "keeper %d: done", (int)getpid());
	_exit(0);
}
