/* options.h: rockd's command line: what it sets, and the checks made before anything starts. */
#ifndef ROCKD_OPTIONS_H
#define ROCKD_OPTIONS_H

#include "rockd.h"

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
	long node;		/* --node, if node_set */
	int node_set;
	int takeover_node;	/* the running rockd's node, if ntakeover;
				 * -1: it did not say (an older build) */
};

/* 0: parsed; -1: --help or --version printed (exit 0); 2: a usage error,
 * printed (exit 2). */
int rockd_parse_options(int argc, char **argv, struct options *o,
    struct rockd_config *cfg);
/* --metrics, or the file's endpoint: -1 with err if bad. */
int rockd_metrics_option(struct rockd_config *cfg, const char *spec,
    char *err, size_t errlen);
/* Workers: the option's, else the file's, else one per CPU; -1 (printed)
 * if the count cannot work. */
int rockd_workers_check(const struct options *o, struct rockd *d);
/* The fleet's node: the option's, else the file's; -1 (printed) for a
 * --session rockd, which is no fleet's. */
int rockd_node_check(const struct options *o, struct rockd *d);
/* The control socket's place; -1 (printed) if unusable. */
int rockd_control_check(const struct options *o, const struct rockd_config *cfg);

#endif
