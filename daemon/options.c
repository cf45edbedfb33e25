/* options.c: rockd's command line, and the checks of what it sets made before anything starts. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rock_ctl.h"
#include "rock_parse.h"
#include "options.h"

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: rockd [-F] [-v] [-p PIDFILE] [-k KEY] [--drain-timeout S] [--metrics ADDR:PORT]\n"
	    "             [--control PATH] [--workers N|auto] [--spread HOW] [--node N]\n"
	    "             [--listen [ADDR:]PORT --backend HOST:PORT]...\n"
	    "       rockd [-F] [-v] [-p PIDFILE] [-k KEY] [--drain-timeout S] [--metrics ADDR:PORT]\n"
	    "             [--control PATH] [--workers N|auto] [--spread HOW]\n"
	    "             [--node N] -f CONFIG\n"
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
	    "      --node N               this rockd is node N (1 to 255) of a fleet\n"
	    "                             behind a balancer (see doc/fleet.md)\n"
	    "  -v, --verbose              debug log\n"
	    "  -h, --help, -V, --version\n");
}

static int session_options(struct options *o, struct rockd_config *cfg);

int
rockd_parse_options(int argc, char **argv, struct options *o, struct rockd_config *cfg)
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
		{ "node", required_argument, NULL, 'N' },
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
		case 'N':
			if (rock_parse_ll(optarg, 1, ROCKD_MAX_NODE, &v) != 0) {
				fprintf(stderr, "rockd: --node needs a number, "
				    "1 to %d\n", ROCKD_MAX_NODE);
				return 2;
			}
			o->node = (long)v;
			o->node_set = 1;
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
int
rockd_metrics_option(struct rockd_config *cfg, const char *spec, char *err,
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

/* Worker k's control channel is at the first listener's port + k, and
 * its clients are told udp-address's port + k: the higher of the two
 * (0: no listener). */
static int
first_control_port(const struct rockd_config *cfg)
{
	int port = cfg->services != NULL ?
	    rockd_addr_port(&cfg->services->listen_addr) : 0;

	return cfg->udp_told > port ? (int)cfg->udp_told : port;
}

/* workers auto: a hand-over keeps the running count (the sessions' ids
 * name their workers); a session rockd is one process; else one per
 * CPU, as many as have a control port below 65536. */
static int
workers_auto(const struct options *o, const struct rockd_config *cfg)
{
	int n, room, port = first_control_port(cfg);

	if (o->ntakeover > 0)
		return o->ntakeover;
	if (o->session)
		return 1;
	n = cpus();
	if (port > 0 && (room = 65536 - port) < n)
		n = room < 1 ? 1 : room;
	return n;
}

/* Workers: the option's, else the file's, else one per CPU. What an
 * explicit count cannot do (a session's single port, a control channel
 * past port 65535, a hand-over to another count) is a configuration
 * error, not a surprise at run time. */
int
rockd_workers_check(const struct options *o, struct rockd *d)
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
	else if (first_control_port(cfg) + d->nworkers - 1 > 65535)
		what = "the last worker's control channel (UDP port + N - 1, "
		    "the listener's or udp-address's) is past 65535";
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
int
rockd_control_check(const struct options *o, const struct rockd_config *cfg)
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

int
rockd_node_check(const struct options *o, struct rockd *d)
{
	d->node = (int)(o->node_set ? o->node : d->cfg.node);
	/* The sessions' ids name their node: a hand-over keeps it. */
	if (o->ntakeover > 0 && o->takeover_node >= 0 &&
	    d->node != o->takeover_node) {
		fprintf(stderr, "rockd: node %d, but the running rockd is %s%d: "
		    "a change of node takes a restart\n", d->node,
		    o->takeover_node > 0 ? "node " : "no fleet's node, ",
		    o->takeover_node);
		return -1;
	}
	if (d->node > 0 && o->session) {
		fprintf(stderr, "rockd: --session is no fleet's node; drop %s\n",
		    o->node_set ? "--node" : "the file's node");
		return -1;
	}
	return 0;
}
