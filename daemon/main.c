/* main.c: rockd's command line, signals, pid file and event loop. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <syslog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rock_err.h"
#include "rock_ctl.h"
#include "rock_parse.h"
#include "options.h"
#include "rockd.h"

/* While draining, suspended rocks are cut (no reconnect can reach us)
 * and the bound is checked this often. */
#define DRAIN_TICK_MS 100


static long
drain_timeout(const struct rockd *d)
{
	if (d->drain_opt_s >= 0)
		return d->drain_opt_s;
	return d->cfg.drain_timeout_s >= 0 ? d->cfg.drain_timeout_s :
	    ROCKD_DEFAULT_DRAIN_S;
}

static void
drain_tick(evutil_socket_t fd, short what, void *arg)
{
	struct rockd *d = arg;

	(void)fd;
	(void)what;
	if (rockd_now_ms() < d->drain_deadline_ms) {
		rockd_rocks_cut(d, 0);
		return;
	}
	rlog_warn(&d->log, "drain time over: cutting what is left with resets");
	rockd_relays_cut(d);
	rockd_rocks_cut(d, 1);
	event_base_loopbreak(d->base);
}

/* Stop accepting; relays and rocks finish on their own within the drain
 * timeout, and what is left then is cut with resets both ways: a client
 * or backend never takes a cut stream for a complete one. A second
 * signal cuts at once. */
static void
on_term(evutil_socket_t sig, short what, void *arg)
{
	struct rockd *d = arg;
	struct timeval tick = { 0, DRAIN_TICK_MS * 1000 };

	(void)what;
	if (d->stopping) {
		rlog_info(&d->log, "signal %d again: cutting now", (int)sig);
		d->drain_deadline_ms = 0;
		drain_tick(-1, 0, d);
		return;
	}
	d->stopping = 1;
	d->drain_deadline_ms = rockd_now_ms() + drain_timeout(d) * 1000;
	rockd_handover_abort(d, "stopping");
	rlog_info(&d->log, "signal %d: no new connections; sessions may finish "
	    "within %ld s", (int)sig, drain_timeout(d));
	rockd_services_stop(&d->cfg);
	event_del(d->sig_hup);
	event_del(d->sig_usr2);
	rockd_rocks_cut(d, 0);
	if (d->relays == NULL && d->rocks == NULL) {
		event_base_loopbreak(d->base);
		return;
	}
	/* The last relay or rock to end ends the loop. */
	d->drain = event_new(d->base, -1, EV_PERSIST, drain_tick, d);
	if (d->drain == NULL || event_add(d->drain, &tick) != 0)
		drain_tick(-1, 0, d);
}

static void
on_usr2(evutil_socket_t sig, short what, void *arg)
{
	struct rockd *d = arg;

	(void)sig;
	(void)what;
	/* A worker's hand-over would be one process's: the master's call. */
	if (d->nworkers > 1) {
		rlog_warn(&d->log, "SIGUSR2 to worker %d: ignored (a hand-over "
		    "is the master's to start)", d->worker);
		return;
	}
	rockd_handover_start(d);
}

/* Every session is descriptors: take all the hard limit allows (a soft
 * limit of 1,024 held 298 rocks). */
static void
raise_nofile(struct rockd *d)
{
	struct rlimit rl;
	rlim_t soft;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max)
		return;
	soft = rl.rlim_cur;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		rlog_warn(&d->log, "cannot raise the descriptor limit from %llu to "
		    "%llu: %s", (unsigned long long)soft,
		    (unsigned long long)rl.rlim_max, strerror(errno));
}

/* A rock holds two descriptors (client, backend): leave room for the
 * listeners, plain relays and handshakes within the process's limit. */
static size_t
max_rocks(const struct rockd_config *cfg)
{
	struct rlimit rl;

	if (cfg->max_rocks > 0)
		return (size_t)cfg->max_rocks;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return 100000;
	return rl.rlim_cur > 256 ? (size_t)(rl.rlim_cur - 128) / 3 : 32;
}

/* The file again, with the options that win over it: 0, or -1 and why
 * in err (the running configuration stays). */
static int
load_next(struct rockd *d, struct rockd_config *next, char *err,
    size_t errlen)
{
	memset(next, 0, sizeof(*next));
	if (rockd_config_load(next, d->config_path, err, errlen) != 0 ||
	    rockd_metrics_option(next, d->metrics_opt, err, errlen) != 0) {
		rockd_config_free(next);
		return -1;
	}
	return 0;
}

/* Workers' master: what a worker started from now on runs. */
void
rockd_config_reread(struct rockd *d)
{
	struct rockd_config next;
	char err[512];

	if (d->config_path == NULL)
		return;
	if (load_next(d, &next, err, sizeof(err)) != 0) {
		rlog_error(&d->log, "reload failed; workers started from now on "
		    "run the configuration before it: %s", err);
		return;
	}
	rockd_config_free(&d->cfg);
	d->cfg = next;
}

static void
on_hup(evutil_socket_t sig, short what, void *arg)
{
	struct rockd *d = arg;
	struct rockd_config next;
	char err[512];

	(void)sig;
	(void)what;
	if (d->config_path == NULL) {
		rlog_info(&d->log, "SIGHUP: services come from the command line; "
		    "nothing to reload");
		return;
	}
	if (load_next(d, &next, err, sizeof(err)) != 0) {
		rlog_error(&d->log, "reload failed, keeping the running "
		    "configuration: %s", err);
		return;
	}
	if (rockd_metrics_reload(d, &next) != 0)
		rlog_error(&d->log, "reload: the metrics endpoint could not start");
	if (next.suspend_timeout_s >= 0)
		rock_engine_set_suspend_timeout(d->engine, next.suspend_timeout_s);
	d->max_rocks = max_rocks(&next);
	if (rockd_services_reload(d, &next) != 0)
		rlog_error(&d->log, "reload: some services could not start");
	else
		rlog_info(&d->log, "configuration reloaded from %s", d->config_path);
}

int
rockd_pidfile_write(struct rockd *d)
{
	char buf[32];
	int fd, n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());

	if (d->pidfile == NULL)
		return 0;
	if ((fd = open(d->pidfile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
	    0644)) < 0)
		goto fail;
	if (write(fd, buf, (size_t)n) != n) {
		close(fd);
		goto fail;
	}
	if (close(fd) == 0)
		return 0;
fail:
	rlog_error(&d->log, "pid file %s: %s", d->pidfile, strerror(errno));
	return -1;
}

/* daemon() moves to "/": a relative -f or -p path must keep its meaning
 * for SIGHUP and for removing the pid file. */
static int
make_absolute(const char **path, char *buf, size_t len)
{
	char cwd[PATH_MAX];
	int n;

	if (*path == NULL || (*path)[0] == '/')
		return 0;
	if (getcwd(cwd, sizeof(cwd)) == NULL)
		return -1;
	n = snprintf(buf, len, "%s/%s", cwd, *path);
	if (n < 0 || (size_t)n >= len) {
		errno = ENAMETOOLONG;
		return -1;
	}
	*path = buf;
	return 0;
}

static int
setup_signals(struct rockd *d)
{
	signal(SIGPIPE, SIG_IGN);
	d->sig_term = evsignal_new(d->base, SIGTERM, on_term, d);
	d->sig_int = evsignal_new(d->base, SIGINT, on_term, d);
	d->sig_hup = evsignal_new(d->base, SIGHUP, on_hup, d);
	d->sig_usr2 = evsignal_new(d->base, SIGUSR2, on_usr2, d);
	if (d->sig_term == NULL || d->sig_int == NULL || d->sig_hup == NULL ||
	    d->sig_usr2 == NULL)
		return -1;
	return event_add(d->sig_term, NULL) | event_add(d->sig_int, NULL) |
	    event_add(d->sig_hup, NULL) | event_add(d->sig_usr2, NULL);
}

/* stderr is systemd's journal stream, which syslog reaches already. */
static int
stderr_is_journal(void)
{
	const char *v = getenv(ROCKD_JOURNAL_STREAM_ENV);
	unsigned long long dev, ino;
	struct stat st;

	if (v == NULL || sscanf(v, "%llu:%llu", &dev, &ino) != 2 ||
	    fstat(STDERR_FILENO, &st) != 0)
		return 0;
	return (unsigned long long)st.st_dev == dev &&
	    (unsigned long long)st.st_ino == ino;
}

static void
setup_log(struct rockd *d, const struct options *o)
{
	rock_config_defaults(&d->log_cfg);
	d->log_cfg.log_sink = o->foreground ? ROCK_LOG_STDERR : ROCK_LOG_SYSLOG;
	d->log_cfg.debug = o->verbose;
	rock_log_configure(&d->log, &d->log_cfg, "rockd");
	/* Until a daemon has detached, its warnings and errors also go to
	 * the terminal that started it: a start that fails says why there,
	 * not only in syslog (under systemd, once in the journal). */
	d->log.warn_to_stderr = !o->foreground && !stderr_is_journal();
	d->log.facility = LOG_DAEMON;
	if (!o->foreground)
		openlog("rockd", LOG_PID, LOG_DAEMON);
}

/* One engine, its control channel on the first service's address and port
 * (UDP and TCP port numbers are separate: the same number is the obvious
 * thing to open in a firewall); worker k's on that port + k. */
int
rockd_engine_start(struct rockd *d, int udp_fd)
{
	const struct rockd_service *first = d->cfg.services;
	struct sockaddr_storage bind_to;
	struct rlimit rl;
	int r;

	raise_nofile(d);
	d->max_rocks = max_rocks(&d->cfg);
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		rl.rlim_cur = 0;
	if (d->node > 0)
		rlog_info(&d->log, "node %d of a fleet: the announcement is "
		    "the key's, connection ids and tickets name the node",
		    d->node);
	rlog_info(&d->log, "capacity: %zu rocks (%s; descriptor limit %llu)",
	    d->max_rocks, d->cfg.max_rocks > 0 ? "max-rocks" :
	    "a third of the descriptors", (unsigned long long)rl.rlim_cur);
	rock_engine_config_defaults(&d->engine_cfg);
	if (d->cfg.suspend_timeout_s >= 0)
		d->engine_cfg.suspend_timeout_s = d->cfg.suspend_timeout_s;
	bind_to = first->listen_addr;
	/* Workers share the master's; without one, no client's first bytes
	 * come with its hello (they wait a round trip). */
	if (d->strike == NULL && rock_strike_new(&d->strike) != 0)
		rlog_warn(&d->log, "replay register: %s; early bytes refused",
		    strerror(errno));
	d->engine_cfg.strike = d->strike;
	d->engine_cfg.node = d->node;
	if (d->cfg.udp_told > 0)
		d->engine_cfg.udp_told = (int)d->cfg.udp_told + d->worker;
	else if (d->cfg.udp_told == 0)
		d->engine_cfg.udp_told = 0;
	d->engine_cfg.udp_address = d->cfg.udp_address;
	d->engine_cfg.udp_address_len = d->cfg.udp_address_len;
	if (d->node > 0)
		d->engine_cfg.announce_random = d->fleet_random;
	if (d->nworkers > 1) {
		d->engine_cfg.workers = d->nworkers;
		d->engine_cfg.worker = d->worker;
		d->engine_cfg.announce_random = rockd_workers_announcement(d);
		d->engine_cfg.ticket_store = d->tickets;
		rockd_addr_set_port(&bind_to, rockd_addr_port(&bind_to) + d->worker);
	}
	/* A successor keeps the control socket its rocks know. */
	if (udp_fd >= 0)
		r = rock_engine_new_adopt(&d->engine, d->base, &d->log,
		    &d->engine_cfg, udp_fd);
	else
		r = rock_engine_new(&d->engine, d->base, &d->log, &d->engine_cfg,
		    (const struct sockaddr *)&bind_to, first->listen_len);
	if (r != 0) {
		rlog_error(&d->log, "%s: control channel (UDP port %d): %s",
		    first->listen_spec, rockd_addr_port(&bind_to),
		    r == ROCK_ERR_SYSTEM ? strerror(errno) : rock_err(r));
		return r;
	}
	rock_engine_set_identity(d->engine, &d->ident);
	rock_identity_wipe(&d->ident);
	if (rockd_fleet_start(d) != 0) {
		rlog_error(&d->log, "fleet: %s", strerror(errno));
		return ROCK_ERR_SYSTEM;
	}
	return 0;
}

static void
log_key(struct rockd *d)
{
	char text[ROCK_KEY_TEXT_LEN];

	rock_key_text(rock_engine_identity(d->engine), text);
	rlog_info(&d->log, "server key %s", text);
}

static void
teardown(struct rockd *d)
{
	rockd_worker_inbox_stop(d);
	rockd_metrics_stop(d);
	rockd_heap_stop(d);
	rockd_session_free(d);
	rockd_control_stop(d);
	rockd_fleet_stop(d);
	rock_engine_free(d->engine);
	if (d->drain != NULL)
		event_free(d->drain);
	if (d->sig_usr2 != NULL)
		event_free(d->sig_usr2);
	if (d->sig_term != NULL)
		event_free(d->sig_term);
	if (d->sig_int != NULL)
		event_free(d->sig_int);
	if (d->sig_hup != NULL)
		event_free(d->sig_hup);
	/* After a hand-over the successor holds every socket: closing ours
	 * here sends nothing. */
	event_base_free(d->base);
}

static int
run(struct rockd *d, const struct options *o)
{
	int r = 1, worker = d->nworkers > 1;

	if ((d->base = event_base_new()) == NULL || setup_signals(d) != 0) {
		fprintf(stderr, "rockd: cannot set up the event loop\n");
		return 1;
	}
	/* A worker's signals waited, blocked, for these handlers. */
	if (worker)
		rockd_worker_signals(d);
	if (o->takeover >= 0) {
		if (rockd_takeover(d, o->takeover) != 0)
			goto out;
	} else if (rockd_engine_start(d, -1) != 0 ||
	    rockd_services_start(d, &d->cfg) != 0 ||
	    rockd_metrics_start(d, NULL, 0) != 0) {
		goto out;
	}
	if (rockd_heap_start(d) != 0)
		goto out;
	if (rockd_control_start(d, o->control != NULL ? o->control :
	    d->cfg.control[0] != '\0' ? d->cfg.control : NULL,
	    o->takeover >= 0) != 0)
		goto out;
	if (worker && rockd_worker_inbox_start(d) != 0)
		goto out;
	if (d->session && rockd_session_announce(d) != 0)
		goto out;
	/* A successor is its predecessor's child: detached already. */
	if (!o->foreground && o->takeover < 0 && !worker && daemon(0, 0) != 0) {
		rlog_error(&d->log, "daemon: %s", strerror(errno));
		goto out;
	}
	if (!worker)
		d->log.warn_to_stderr = 0;	/* detached, or a successor */
	d->log.pid = getpid();
	/* A successor wrote it before its predecessor could exit. */
	if (o->takeover < 0 && !worker && rockd_pidfile_write(d) != 0)
		goto out;
	if (worker)
		rlog_info(&d->log, "%s %s worker %d started", PACKAGE_NAME,
		    PACKAGE_VERSION, d->worker);
	else
		rlog_info(&d->log, "%s %s started", PACKAGE_NAME, PACKAGE_VERSION);
	rockd_worker_ready(d);
	log_key(d);
	event_base_dispatch(d->base);
	rlog_info(&d->log, d->handed_over ? "handed over; exiting" : "stopped");
	r = 0;
	/* The successor's pid is in it now. */
	if (d->pidfile != NULL && !d->handed_over && !worker)
		unlink(d->pidfile);
out:
	rockd_services_stop(&d->cfg);
	teardown(d);
	return r;
}

/* A successor's worker k takes over on channel k alone. */
static int
run_worker(struct rockd *d, void *arg)
{
	struct options *o = arg;
	int k;

	/* The master's copies, -1 once it has closed them. */
	for (k = 0; k < d->ntakeover; k++)
		if ((k != d->worker || d->ready_fd < 0) && d->takeover_fds[k] >= 0)
			close(d->takeover_fds[k]);
	/* One started later (ready_fd -1: the master replaces a dead one)
	 * starts afresh: its channel is long gone. */
	if (d->ntakeover > 0)
		o->takeover = d->ready_fd >= 0 ? d->takeover_fds[d->worker] : -1;
	return run(d, o);
}

/* USR2 starts the binary rockd was started as, resolved now: argv[0]
 * through PATH as execvp would, made absolute (an upgrade that replaces
 * the file is what the successor runs). Empty if not found. */
static void
find_self(struct rockd *d, const char *argv0)
{
	char buf[PATH_MAX], *path, *dir, *save = NULL;
	const char *env = getenv("PATH");

	d->exe[0] = '\0';
	if (strchr(argv0, '/') != NULL) {
		if (realpath(argv0, d->exe) == NULL)
			d->exe[0] = '\0';
		return;
	}
	if (env == NULL || (path = strdup(env)) == NULL)
		return;
	for (dir = strtok_r(path, ":", &save); dir != NULL;
	    dir = strtok_r(NULL, ":", &save)) {
		if (snprintf(buf, sizeof(buf), "%s/%s", dir, argv0) <
		    (int)sizeof(buf) && access(buf, X_OK) == 0 &&
		    realpath(buf, d->exe) != NULL)
			break;
		d->exe[0] = '\0';
	}
	free(path);
}

/* fd is a unix stream socket whose other end is our parent's. */
static int
channel_from_parent(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int type;
	socklen_t tlen = sizeof(type);

	return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) == 0 &&
	    type == SOCK_STREAM &&
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 &&
	    cred.pid == getppid();
}

/* USR2's successor: the channel its predecessor named. */
static int
takeover_from_env(struct options *o)
{
	const char *v = getenv(ROCKD_HANDOVER_ENV);
	char list[ROCKD_MAX_WORKERS * 12], *t, *save = NULL;
	long long fd;

	o->takeover = -1;
	o->ntakeover = 0;
	o->takeover_node = -1;
	if (v == NULL)
		return 0;
	snprintf(list, sizeof(list), "%s", v);
	for (t = strtok_r(list, ",", &save); t != NULL;
	    t = strtok_r(NULL, ",", &save)) {
		if (o->ntakeover == ROCKD_MAX_WORKERS ||
		    rock_parse_ll(t, 0, INT_MAX, &fd) != 0 ||
		    fcntl((int)fd, F_SETFD, FD_CLOEXEC) != 0) {
			fprintf(stderr, "rockd: %s=%s: not open descriptors\n",
			    ROCKD_HANDOVER_ENV, v);
			return -1;
		}
		/* Only channels a predecessor made for its own child: a
		 * variable left in some environment must not send a hello
		 * down fd 0 to 2. */
		if (!channel_from_parent((int)fd)) {
			fprintf(stderr, "rockd: %s=%s: not a channel from the "
			    "parent rockd\n", ROCKD_HANDOVER_ENV, v);
			return -1;
		}
		o->takeover_fds[o->ntakeover++] = (int)fd;
	}
	if (o->ntakeover == 0) {
		fprintf(stderr, "rockd: %s=%s: not open descriptors\n",
		    ROCKD_HANDOVER_ENV, v);
		return -1;
	}
	o->takeover = o->takeover_fds[0];
	unsetenv(ROCKD_HANDOVER_ENV);
	/* A predecessor of an older build says nothing (-1: unknown). */
	v = getenv(ROCKD_HANDOVER_NODE_ENV);
	if (v != NULL && rock_parse_ll(v, 0, ROCKD_MAX_NODE, &fd) == 0)
		o->takeover_node = (int)fd;
	unsetenv(ROCKD_HANDOVER_NODE_ENV);
	return 0;
}

int
main(int argc, char **argv)
{
	struct rockd d;
	struct options o;
	char err[512], conf[PATH_MAX], pid[PATH_MAX], key[PATH_MAX];
	char ctl[PATH_MAX];
	int r;

	memset(&d, 0, sizeof(d));
	memset(&o, 0, sizeof(o));
	d.cfg.suspend_timeout_s = -1;
	d.cfg.max_rocks = -1;
	d.cfg.drain_timeout_s = -1;
	d.cfg.udp_told = ROCK_UDP_OWN;
	d.ready_fd = d.inbox_rx = d.commit_fd = -1;
	o.drain_timeout_s = -1;
	o.persist_s = -1;
	if (takeover_from_env(&o) != 0) {
		r = 1;
		goto out;
	}
	/* -1: help or version printed, a successful exit */
	if ((r = rockd_parse_options(argc, argv, &o, &d.cfg)) != 0) {
		r = r < 0 ? 0 : r;
		goto out;
	}
	d.config_path = o.config;
	if (o.config != NULL &&
	    rockd_config_load(&d.cfg, o.config, err, sizeof(err)) != 0) {
		fprintf(stderr, "rockd: %s\n", err);
		r = 2;
		goto out;
	}
	if (rockd_metrics_option(&d.cfg, o.metrics, err, sizeof(err)) != 0) {
		fprintf(stderr, "rockd: %s%s\n", o.metrics != NULL ? "--" : "",
		    err);
		r = 2;
		goto out;
	}
	if (rockd_control_check(&o, &d.cfg) != 0 ||
	    rockd_workers_check(&o, &d) != 0 || rockd_node_check(&o, &d) != 0) {
		r = 2;
		goto out;
	}
	d.metrics_opt = o.metrics;
	d.session = o.session;
	d.idle_timeout_s = o.idle_timeout_s;
	d.persist_s = o.persist_s;
	/* A session's key is pinned over ssh: without --key, one for this
	 * process only, and nothing written on the server. */
	if (o.session && o.key == NULL)
		rock_identity_new(&d.ident);
	else if (make_absolute(&o.key, key, sizeof(key)) != 0 ||
	    rockd_key_load(&d, o.key, o.test) != 0) {
		r = 2;
		goto out;
	}
	/* Peers are read at start: a reload's (and a worker restarted after
	 * it) keep these. */
	d.peers = d.cfg.peers;
	d.cfg.peers = NULL;
	/* Any node answers a probe and takes the hello that follows. */
	if (d.node > 0)
		rock_fleet_announcement(d.fleet_random, sizeof(d.fleet_random),
		    d.ident.pk);
	if (o.test) {
		printf("rockd: configuration OK\n");
		goto out;
	}
	d.drain_opt_s = o.drain_timeout_s;
	d.argv = argv;
	find_self(&d, argv[0]);
	if (getcwd(d.start_cwd, sizeof(d.start_cwd)) == NULL ||
	    make_absolute(&d.config_path, conf, sizeof(conf)) != 0 ||
	    make_absolute(&o.pidfile, pid, sizeof(pid)) != 0 ||
	    make_absolute(&o.control, ctl, sizeof(ctl)) != 0) {
		fprintf(stderr, "rockd: current directory: %s\n", strerror(errno));
		r = 1;
		goto out;
	}
	setup_log(&d, &o);
	d.pidfile = o.pidfile != NULL ? o.pidfile :
	    d.cfg.pidfile[0] != '\0' ? d.cfg.pidfile : NULL;
	d.takeover_fds = o.takeover_fds;
	d.ntakeover = o.ntakeover;
	if (d.nworkers > 1)
		r = rockd_workers_run(&d, o.foreground || o.ntakeover > 0,
		    o.ntakeover > 0, run_worker, &o);
	else
		r = run(&d, &o);
out:
	/* Also on the early exits: a sanitized build's leak check counts. */
	{
		struct rockd_config started = { .peers = d.peers };

		rockd_config_free(&started);
	}
	rockd_config_free(&d.cfg);
	rock_identity_wipe(&d.ident);
	return r;
}
