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
#include "rockd.h"

/* While draining, suspended rocks are cut (no reconnect can reach us)
 * and the bound is checked this often. */
#define DRAIN_TICK_MS 100

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: rockd [-F] [-v] [-p PIDFILE] [-k KEY] [--drain-timeout S] [--metrics ADDR:PORT]\n"
	    "             [--control PATH] [--workers N|auto] [--spread HOW]\n"
	    "             [--listen [ADDR:]PORT --backend HOST:PORT]...\n"
	    "       rockd [-F] [-v] [-p PIDFILE] [-k KEY] [--drain-timeout S] [--metrics ADDR:PORT]\n"
	    "             [--control PATH] [--workers N|auto] [--spread HOW] -f CONFIG\n"
	    "       rockd -t [-k KEY] [--metrics ADDR:PORT] [--control PATH]\n"
	    "             [-f CONFIG | --listen ... --backend ...]\n"
	    "       rockd --session [-F] [-v] [-p PIDFILE] [-k KEY] [--control PATH]\n"
	    "             [--backend HOST:PORT] [--idle-timeout S] [--persist S]\n"
	    "Front an unmodified TCP server for rock clients; plain clients pass through.\n"
	    "With no service given: --listen 4022 --backend 127.0.0.1:22 (sshd).\n"
	    "  -l, --listen [ADDR:]PORT   where clients connect (repeatable, each with -b)\n"
	    "  -b, --backend HOST:PORT    the server the preceding --listen fronts\n"
	    "  -f, --config FILE          services from a file (see rockd(8))\n"
	    "  -t, --test                 check the configuration and exit (0 good, 2 bad)\n"
	    "  -F, --foreground           stay in front, log to stderr\n"
	    "  -p, --pidfile FILE         write the process id to FILE\n"
	    "  -k, --key FILE             the server's key, made on first start (see rockd(8))\n"
	    "      --drain-timeout S      SIGTERM: let sessions finish for S seconds (30)\n"
	    "      --metrics ADDR:PORT    serve counters at http://ADDR:PORT/metrics (Prometheus)\n"
	    "      --session              for `rock ssh`: an ephemeral port, announced on\n"
	    "                             stdout; exit with the last session\n"
	    "      --idle-timeout S       --session: exit if no session comes in S s (60)\n"
	    "      --persist S            --session: stay S s after the last session for\n"
	    "                             the next to come (0, the default: exit with it)\n"
	    "      --control PATH         answer rock ls and rock kill on this unix socket\n"
	    "      --workers N|auto       N event loops, one process each (1 to 64);\n"
	    "                             auto, the default: one per CPU\n"
	    "      --spread address|connection  workers: a client address's\n"
	    "                             connections to one (default), or each anywhere\n"
	    "  -v, --verbose              debug log\n"
	    "  -h, --help, -V, --version\n");
}

struct options {
	const char *config;
	const char *pidfile;
	const char *key;
	const char *pending_listen;
	const char *metrics;	/* --metrics; NULL: the file's, if any */
	const char *control;	/* --control; NULL: the file's, if any */
	int test, foreground, verbose;
	long drain_timeout_s;	/* -1: the file's or the default */
	int takeover;		/* USR2's successor: the channel; else -1 */
	/* ... one per worker of the predecessor's, in order */
	int takeover_fds[ROCKD_MAX_WORKERS];
	int ntakeover;
	int session;		/* --session */
	const char *session_backend;	/* --backend without --listen */
	long idle_timeout_s;	/* --idle-timeout */
	long persist_s;		/* --persist; -1: not given */
	long workers;		/* --workers (0: auto), if workers_set */
	int workers_set;
	int spread, spread_set;	/* --spread, enum rockd_spread */
};

static int session_options(struct options *o, struct rockd_config *cfg);

static int
parse_options(int argc, char **argv, struct options *o, struct rockd_config *cfg)
{
	static const struct option longopts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "backend", required_argument, NULL, 'b' },
		{ "config", required_argument, NULL, 'f' },
		{ "test", no_argument, NULL, 't' },
		{ "foreground", no_argument, NULL, 'F' },
		{ "pidfile", required_argument, NULL, 'p' },
		{ "key", required_argument, NULL, 'k' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "drain-timeout", required_argument, NULL, 'D' },
		{ "metrics", required_argument, NULL, 'M' },
		{ "session", no_argument, NULL, 'S' },
		{ "idle-timeout", required_argument, NULL, 'I' },
		{ "persist", required_argument, NULL, 'P' },
		{ "control", required_argument, NULL, 'C' },
		{ "workers", required_argument, NULL, 'W' },
		{ "spread", required_argument, NULL, 'A' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	struct rockd_config scratch;
	char err[512];
	long long v;
	int c;

	while ((c = getopt_long(argc, argv, "l:b:f:tFp:k:vhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'l':
			/* --session refuses every --listen, after the loop. */
			if (o->pending_listen != NULL && !o->session)
				goto unpaired;
			o->pending_listen = optarg;
			break;
		case 'b':
			if (o->pending_listen == NULL && o->session_backend == NULL) {
				o->session_backend = optarg;
				break;
			}
			if (o->pending_listen == NULL)
				goto unpaired;
			if (rockd_config_add(cfg, o->pending_listen, optarg, err,
			    sizeof(err)) != 0) {
				fprintf(stderr, "rockd: %s\n", err);
				return 2;
			}
			o->pending_listen = NULL;
			break;
		case 'f': o->config = optarg; break;
		case 't': o->test = 1; break;
		case 'F': o->foreground = 1; break;
		case 'p': o->pidfile = optarg; break;
		case 'k': o->key = optarg; break;
		case 'v': o->verbose = 1; break;
		case 'D':
			if (rock_parse_ll(optarg, 0, ROCKD_MAX_DRAIN_S, &v) != 0) {
				fprintf(stderr, "rockd: --drain-timeout needs seconds, "
				    "0 to %d\n", ROCKD_MAX_DRAIN_S);
				return 2;
			}
			o->drain_timeout_s = (long)v;
			break;
		case 'M':
			memset(&scratch, 0, sizeof(scratch));
			if (rockd_config_metrics(&scratch, optarg, err,
			    sizeof(err)) != 0) {
				fprintf(stderr, "rockd: --%s\n", err);
				return 2;
			}
			o->metrics = optarg;
			break;
		case 'S': o->session = 1; break;
		case 'I':
			if (rock_parse_ll(optarg, 1, 86400, &v) != 0) {
				fprintf(stderr, "rockd: --idle-timeout needs seconds, "
				    "1 to 86400\n");
				return 2;
			}
			o->idle_timeout_s = (long)v;
			break;
		case 'P':
			if (rock_parse_ll(optarg, 0, ROCKD_SESSION_PERSIST_MAX_S,
			    &v) != 0) {
				fprintf(stderr, "rockd: --persist needs seconds, "
				    "0 to %d\n", ROCKD_SESSION_PERSIST_MAX_S);
				return 2;
			}
			o->persist_s = (long)v;
			break;
		case 'C':
			if (optarg[0] == '\0' ||
			    strlen(optarg) >= sizeof(cfg->control)) {
				fprintf(stderr, "rockd: --control needs a path "
				    "of 1 to %zu bytes\n", sizeof(cfg->control) - 1);
				return 2;
			}
			o->control = optarg;
			break;
		case 'W':
			if (rockd_parse_workers(optarg, &o->workers) != 0) {
				fprintf(stderr, "rockd: --workers needs a number, "
				    "1 to %d, or auto\n", ROCKD_MAX_WORKERS);
				return 2;
			}
			o->workers_set = 1;
			break;
		case 'A':
			if (rockd_parse_spread(optarg, &o->spread) != 0) {
				fprintf(stderr, "rockd: --spread needs address "
				    "or connection\n");
				return 2;
			}
			o->spread_set = 1;
			break;
		case 'h': usage(stdout); return -1;
		case 'V': printf("rockd (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION); return -1;
		default: usage(stderr); return 2;
		}
	}
	if (o->session && optind == argc)
		return session_options(o, cfg);
	if (o->pending_listen != NULL || optind != argc)
		goto unpaired;
	if (o->session_backend != NULL || o->idle_timeout_s > 0 ||
	    o->persist_s >= 0)
		return session_options(o, cfg);
	if (o->config != NULL && cfg->services != NULL) {
		fprintf(stderr, "rockd: give either -f CONFIG or --listen/--backend\n");
		usage(stderr);
		return 2;
	}
	/* Neither: the default service fronts the local sshd on the port
	 * librock's default ROCK_PORT_MAP sends `rock ssh` to. */
	if (o->config == NULL && cfg->services == NULL &&
	    rockd_config_add(cfg, ROCKD_DEFAULT_LISTEN, ROCKD_DEFAULT_BACKEND,
	    err, sizeof(err)) != 0) {
		fprintf(stderr, "rockd: %s\n", err);
		return 2;
	}
	return 0;
unpaired:
	fprintf(stderr, "rockd: each --listen needs one --backend after it\n");
	usage(stderr);
	return 2;
}

/* --session stands alone: one service, no file, nothing to reload. */
static int
session_options(struct options *o, struct rockd_config *cfg)
{
	char err[512];

	if (!o->session) {
		fprintf(stderr, "rockd: %s needs --session\n",
		    o->session_backend != NULL ? "--backend without --listen" :
		    o->idle_timeout_s > 0 ? "--idle-timeout" : "--persist");
		goto bad;
	}
	if (o->config != NULL || cfg->services != NULL ||
	    o->pending_listen != NULL || o->test || o->metrics != NULL) {
		fprintf(stderr, "rockd: --session takes no -f, --listen, -t or "
		    "--metrics (it takes -F, -v, -p, -k, --control, --backend, "
		    "--idle-timeout and --persist)\n");
		goto bad;
	}
	if (o->idle_timeout_s <= 0)
		o->idle_timeout_s = ROCKD_SESSION_IDLE_S;
	if (o->persist_s < 0)
		o->persist_s = 0;
	if (rockd_session_config(cfg, o->session_backend, err, sizeof(err)) != 0) {
		fprintf(stderr, "rockd: --backend %s\n", err);
		goto bad;
	}
	return 0;
bad:
	usage(stderr);
	return 2;
}

/* --metrics replaces the file's endpoint, at start and on every reload. */
static int
metrics_option(struct rockd_config *cfg, const char *spec, char *err,
    size_t errlen)
{
	if (spec != NULL) {
		cfg->metrics_spec[0] = '\0';
		if (rockd_config_metrics(cfg, spec, err, errlen) != 0)
			return -1;
		cfg->metrics_line = 0;
	}
	return rockd_config_metrics_check(cfg, err, errlen);
}

/* The CPUs this process may run on (its affinity: a cpuset or taskset
 * is honoured), at most ROCKD_MAX_WORKERS. */
static int
cpus(void)
{
	cpu_set_t set;
	long n = 0;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		n = CPU_COUNT(&set);
	if (n <= 0)
		n = sysconf(_SC_NPROCESSORS_ONLN);
	return n < 1 ? 1 : n > ROCKD_MAX_WORKERS ? ROCKD_MAX_WORKERS : (int)n;
}

/* workers auto: a hand-over keeps the running count (the sessions' ids
 * name their workers); a session rockd is one process; else one per
 * CPU, as many as have a control port below 65536. */
static int
workers_auto(const struct options *o, const struct rockd_config *cfg)
{
	int n, room;

	if (o->ntakeover > 0)
		return o->ntakeover;
	if (o->session)
		return 1;
	n = cpus();
	if (cfg->services != NULL &&
	    (room = 65536 - rockd_addr_port(&cfg->services->listen_addr)) < n)
		n = room < 1 ? 1 : room;
	return n;
}

/* Workers: the option's, else the file's, else one per CPU. What an
 * explicit count cannot do (a session's single port, a control channel
 * past port 65535, a hand-over to another count) is a configuration
 * error, not a surprise at run time. */
static int
workers_check(const struct options *o, struct rockd *d)
{
	const struct rockd_config *cfg = &d->cfg;
	const char *what = NULL;
	char where[PATH_MAX + 16] = "rockd";
	long want = o->workers_set ? o->workers : cfg->workers;

	d->nworkers = want > 0 ? (int)want : workers_auto(o, cfg);
	d->spread = o->spread_set ? o->spread : cfg->spread;
	/* The sessions' ids name their workers: a hand-over keeps them. */
	if (o->ntakeover > 0 && o->ntakeover != d->nworkers) {
		fprintf(stderr, "rockd: workers %d, but the running rockd has %d: "
		    "a change of workers takes a restart\n", d->nworkers,
		    o->ntakeover);
		return -1;
	}
	if (d->nworkers == 1)
		return 0;
	if (o->session)
		what = "--session is one process";
	else if (cfg->services != NULL &&
	    rockd_addr_port(&cfg->services->listen_addr) + d->nworkers - 1 > 65535)
		what = "the last worker's control channel (UDP port + N - 1) "
		    "is past 65535";
	if (what == NULL)
		return 0;
	if (!o->workers_set && d->config_path != NULL && cfg->workers_line > 0)
		snprintf(where, sizeof(where), "rockd: %s:%d", d->config_path,
		    cfg->workers_line);
	fprintf(stderr, "%s: workers %d: %s; use workers 1\n", where,
	    d->nworkers, what);
	return -1;
}

/* The control socket's place, before anything starts: a file there,
 * a missing or unsafe directory is a configuration error. Whether
 * another process answers there is known only at start. */
static int
control_check(const struct options *o, const struct rockd_config *cfg)
{
	const char *path = o->control != NULL ? o->control : cfg->control;

	if (path[0] == '\0' || rock_ctl_check(path, 0) == 0)
		return 0;
	if (o->control != NULL)
		fprintf(stderr, "rockd: --control %s: %s\n", path,
		    rock_ctl_strerror(errno));
	else
		fprintf(stderr, "rockd: %s:%d: control %s: %s\n", o->config,
		    cfg->control_line, path, rock_ctl_strerror(errno));
	return -1;
}

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
	    metrics_option(next, d->metrics_opt, err, errlen) != 0) {
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
	d.ready_fd = d.inbox_rx = d.commit_fd = -1;
	o.drain_timeout_s = -1;
	o.persist_s = -1;
	if (takeover_from_env(&o) != 0) {
		r = 1;
		goto out;
	}
	/* -1: help or version printed, a successful exit */
	if ((r = parse_options(argc, argv, &o, &d.cfg)) != 0) {
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
	if (metrics_option(&d.cfg, o.metrics, err, sizeof(err)) != 0) {
		fprintf(stderr, "rockd: %s%s\n", o.metrics != NULL ? "--" : "",
		    err);
		r = 2;
		goto out;
	}
	if (control_check(&o, &d.cfg) != 0 || workers_check(&o, &d) != 0) {
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
	rockd_config_free(&d.cfg);
	rock_identity_wipe(&d.ident);
	return r;
}
