/* rock_config.h: the library's settings and their parsing from the environment. */
#ifndef ROCK_CONFIG_H
#define ROCK_CONFIG_H

#include <limits.h>

#include <stdint.h>

#include "rock_wire.h"

enum rock_mode {
	ROCK_MODE_ROCK = 0,	/* default: reliable sockets, keepalive baseline */
	ROCK_MODE_KEEPALIVE,	/* libdontdie-style: keepalive only */
	ROCK_MODE_OFF		/* touch nothing */
};

enum rock_log_sink {
	ROCK_LOG_SYSLOG = 0,
	ROCK_LOG_STDERR,
	ROCK_LOG_FILE
};

/* Kernel limits (MAX_TCP_KEEPIDLE, MAX_TCP_KEEPINTVL, MAX_TCP_KEEPCNT). */
#define ROCK_KEEPIDLE_MAX	32767
#define ROCK_KEEPINTVL_MAX	32767
#define ROCK_KEEPCNT_MAX	127

/* A destination port whose enhanced twin (a rockd) listens elsewhere:
 * 22 -> 4022 by default, so `rock ssh host` finds rockd beside sshd. */
#define ROCK_PORT_MAP_MAX	8
#define ROCK_PORT_MAP_DEFAULT	"22=4022"
/* rock ssh: how long a session rockd waits for the next session after
 * its last, as ssh's ControlPersist does for a master. */
#define ROCK_SSH_PERSIST_DEFAULT_S	300
/* rockd --session's one line on stdout, read by `rock ssh` over ssh:
 * "ROCKD-SESSION 1 PORT KEY" (KEY as rockd logs it). */
#define ROCK_SESSION_TAG	"ROCKD-SESSION 1"

struct rock_port_map {
	unsigned short from, to;
};

/* What a client trusts (the library's ROCK_KNOWN_SERVERS, ROCK_SERVER_KEY,
 * ROCK_ACCEPT_NEW_KEY). Zeroed: any key, nothing recorded. */
struct rock_trust {
	char path[PATH_MAX];		/* the known-servers file; "": none */
	int pinned;			/* every server must have pin */
	uint8_t pin[ROCK_IDENT_LEN];
	int accept_new;			/* a changed key replaces the known one */
};

struct rock_config {
	enum rock_mode mode;
	int use_keepalive;		/* 1: turn SO_KEEPALIVE on */
	int keepalive_time;		/* seconds; 0: leave the system's */
	int keepalive_intvl;		/* seconds; 0: leave the system's */
	int keepalive_probes;		/* count; 0: leave the system's */
	int user_timeout_ms;		/* -1: leave the system's */
	int debug;			/* 1: log every decision */
	int eval_env_once;		/* 0: re-read the environment per socket */
	enum rock_log_sink log_sink;
	char log_path[PATH_MAX];	/* absolute, for ROCK_LOG_FILE */
	int nport_map;
	struct rock_port_map port_map[ROCK_PORT_MAP_MAX];
	int probe_timeout_ms;		/* EDP probe of a new destination */
	int linger_ms;			/* at exit: wait for peers to consume */
	int suspend_timeout_s;		/* give a suspended rock up; 0: never */
	int serve;			/* 1 (default): listeners accept rocks (rock mode) */
	int serve_handshakes;		/* in progress per listener, at most */
	int early;			/* 1: first bytes go with a resumption */
	struct rock_trust trust;	/* server keys: known file, pin, accept new */
	char probe_cache[PATH_MAX];	/* shared probe cache file; "": none */
	char run_dir[PATH_MAX];		/* the user's runtime directory for rocks
					 * (control sockets); "": none */
	int ssh_persist_s;		/* rock ssh: a session rockd's stay */
	char ssh_memo[PATH_MAX];	/* rock ssh's memo of the rockd pinned
					 * to; "": none */
};

/* The enhanced port for a destination port: itself unless mapped. */
unsigned short rock_port_mapped(const struct rock_config *cfg,
    unsigned short port);

/* How a bad value is reported: variable, value, what is wrong, what is accepted. */
typedef void rock_env_warn_fn(void *arg, const char *var, const char *value,
    const char *problem, const char *accepted);

/* Looks a variable up; returns NULL when unset (getenv has this shape). */
typedef const char *rock_env_get_fn(void *arg, const char *name);

#define ROCK_ENV_NVARS 26

/*
 * The parser remembers the bad values it has reported, so that re-reading
 * the environment for every socket reports each bad value once only.
 */
struct rock_env_parser {
	rock_env_get_fn *get;
	void *get_arg;
	rock_env_warn_fn *warn;
	void *warn_arg;
	unsigned long long reported[ROCK_ENV_NVARS];	/* hash of last bad value, 0: none */
};

/* The defaults, as if the environment were empty. */
void rock_config_defaults(struct rock_config *cfg);

/* Fill *cfg from the environment; bad values are reported and ignored. */
void rock_config_from_env(struct rock_config *cfg, struct rock_env_parser *p);

/* Name of a mode, for logs. */
const char *rock_mode_name(enum rock_mode mode);

#endif
