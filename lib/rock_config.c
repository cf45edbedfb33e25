/* rock_config.c: parse the library's settings from the environment, in one place. */
#include "config.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "rock_config.h"
#include "rock_env.h"
#include "rock_err.h"
#include "rock_known.h"
#include "rock_parse.h"

enum env_kind { ENV_INT, ENV_MODE, ENV_LOG, ENV_PORT_MAP, ENV_PATH, ENV_KEY };

struct env_var {
	const char *name;
	enum env_kind kind;
	long long min, max;
	size_t field;		/* offset of the int in struct rock_config */
	const char *accepted;	/* for the report */
};

#define FIELD(f) offsetof(struct rock_config, f)

/* A DD_* twin comes before its ROCK_* variable so that the latter wins. */
static const struct env_var env_vars[ROCK_ENV_NVARS] = {
	{ ROCK_ENV_MODE, ENV_MODE, 0, 0, FIELD(mode),
	    "rock, keepalive or off" },
	{ DD_ENV_KEEPALIVE_TIME, ENV_INT, 1, ROCK_KEEPIDLE_MAX,
	    FIELD(keepalive_time), "seconds, 1 to 32767" },
	{ ROCK_ENV_KEEPALIVE_TIME, ENV_INT, 1, ROCK_KEEPIDLE_MAX,
	    FIELD(keepalive_time), "seconds, 1 to 32767" },
	{ DD_ENV_KEEPALIVE_INTVL, ENV_INT, 1, ROCK_KEEPINTVL_MAX,
	    FIELD(keepalive_intvl), "seconds, 1 to 32767" },
	{ ROCK_ENV_KEEPALIVE_INTVL, ENV_INT, 1, ROCK_KEEPINTVL_MAX,
	    FIELD(keepalive_intvl), "seconds, 1 to 32767" },
	{ DD_ENV_KEEPALIVE_PROBES, ENV_INT, 1, ROCK_KEEPCNT_MAX,
	    FIELD(keepalive_probes), "a count, 1 to 127" },
	{ ROCK_ENV_KEEPALIVE_PROBES, ENV_INT, 1, ROCK_KEEPCNT_MAX,
	    FIELD(keepalive_probes), "a count, 1 to 127" },
	{ ROCK_ENV_USER_TIMEOUT_MS, ENV_INT, 0, 2147483647LL,
	    FIELD(user_timeout_ms),
	    "milliseconds, 0 (kernel default) to 2147483647" },
	{ DD_ENV_DEBUG, ENV_INT, 0, 1, FIELD(debug), "0 or 1" },
	{ ROCK_ENV_DEBUG, ENV_INT, 0, 1, FIELD(debug), "0 or 1" },
	{ ROCK_ENV_LOG, ENV_LOG, 0, 0, FIELD(log_sink),
	    "syslog, stderr or an absolute file path" },
	{ DD_ENV_USE_KEEPALIVE, ENV_INT, 0, 1, FIELD(use_keepalive),
	    "0 or 1" },
	{ DD_ENV_EVAL_ENVIRONMENT_ONCE, ENV_INT, 0, 1, FIELD(eval_env_once),
	    "0 or 1" },
	{ ROCK_ENV_PORT_MAP, ENV_PORT_MAP, 0, 0, FIELD(nport_map),
	    "empty, or up to 8 PORT=PORT pairs separated by commas, ports 1 to 65535" },
	{ ROCK_ENV_PROBE_TIMEOUT_MS, ENV_INT, 10, 60000, FIELD(probe_timeout_ms),
	    "milliseconds, 10 to 60000" },
	{ ROCK_ENV_LINGER_MS, ENV_INT, 0, 3600000, FIELD(linger_ms),
	    "milliseconds, 0 to 3600000" },
	{ ROCK_ENV_SUSPEND_TIMEOUT, ENV_INT, 0, 2147483647LL,
	    FIELD(suspend_timeout_s), "seconds, 0 (never) to 2147483647" },
	{ ROCK_ENV_SERVE, ENV_INT, 0, 1, FIELD(serve), "0 or 1" },
	{ ROCK_ENV_SERVE_HANDSHAKES, ENV_INT, 1, 4096, FIELD(serve_handshakes),
	    "a count, 1 to 4096" },
	{ ROCK_ENV_EARLY, ENV_INT, 0, 1, FIELD(early), "0 or 1" },
	{ ROCK_ENV_KNOWN_SERVERS, ENV_PATH, 0, 0, FIELD(trust.path),
	    "an absolute file path, or empty (keep no server keys)" },
	{ ROCK_ENV_SERVER_KEY, ENV_KEY, 0, 0, FIELD(trust.pin),
	    "a server key as rockd logs it: 44 characters of base64" },
	{ ROCK_ENV_ACCEPT_NEW_KEY, ENV_INT, 0, 1, FIELD(trust.accept_new),
	    "0 or 1" },
	{ ROCK_ENV_PROBE_CACHE, ENV_PATH, 0, 0, FIELD(probe_cache),
	    "an absolute file path, or empty (share no probe results)" },
	{ ROCK_ENV_SSH_PERSIST, ENV_INT, 0, 86400, FIELD(ssh_persist_s),
	    "seconds, 0 to 86400" },
	{ ROCK_ENV_SSH_MEMO, ENV_PATH, 0, 0, FIELD(ssh_memo),
	    "an absolute file path (set by rock ssh)" },
};

void
rock_config_defaults(struct rock_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->mode = ROCK_MODE_ROCK;
	cfg->use_keepalive = 1;
	cfg->user_timeout_ms = -1;
	cfg->eval_env_once = 1;
	cfg->log_sink = ROCK_LOG_SYSLOG;
	cfg->nport_map = 1;
	cfg->port_map[0].from = 22;
	cfg->port_map[0].to = 4022;
	cfg->probe_timeout_ms = 1000;
	cfg->linger_ms = 500;
	cfg->early = 1;
	cfg->serve = 1;
	cfg->serve_handshakes = ROCK_SERVE_HANDSHAKES_DEFAULT;
	cfg->suspend_timeout_s = 3 * 24 * 3600;
	cfg->ssh_persist_s = ROCK_SSH_PERSIST_DEFAULT_S;
	/* Without a runtime directory: one of our own in /tmp (checked to be
	 * ours and private before use, rock_probe_file.c). */
	snprintf(cfg->probe_cache, sizeof(cfg->probe_cache),
	    "/tmp/rock-%lu/probes", (unsigned long)geteuid());
	snprintf(cfg->run_dir, sizeof(cfg->run_dir), "/tmp/rock-%lu",
	    (unsigned long)geteuid());
}

unsigned short
rock_port_mapped(const struct rock_config *cfg, unsigned short port)
{
	int i;

	for (i = 0; i < cfg->nport_map; i++)
		if (cfg->port_map[i].from == port)
			return cfg->port_map[i].to;
	return port;
}

const char *
rock_mode_name(enum rock_mode mode)
{
	switch (mode) {
	case ROCK_MODE_ROCK:
		return "rock";
	case ROCK_MODE_KEEPALIVE:
		return "keepalive";
	case ROCK_MODE_OFF:
		return "off";
	}
	return "?";
}

static int
parse_mode(const char *s, enum rock_mode *out)
{
	if (*s == '\0')
		return ROCK_ERR_EMPTY;
	if (strcmp(s, "rock") == 0)
		*out = ROCK_MODE_ROCK;
	else if (strcmp(s, "keepalive") == 0)
		*out = ROCK_MODE_KEEPALIVE;
	else if (strcmp(s, "off") == 0)
		*out = ROCK_MODE_OFF;
	else
		return ROCK_ERR_BAD_WORD;
	return 0;
}

static int
parse_log(const char *s, struct rock_config *cfg)
{
	size_t len = strlen(s);

	if (len == 0)
		return ROCK_ERR_EMPTY;
	if (strcmp(s, "syslog") == 0) {
		cfg->log_sink = ROCK_LOG_SYSLOG;
		return 0;
	}
	if (strcmp(s, "stderr") == 0) {
		cfg->log_sink = ROCK_LOG_STDERR;
		return 0;
	}
	/* A relative path is more likely a typo than a wish to log into
	 * whatever directory the program happens to be in. */
	if (s[0] != '/')
		return ROCK_ERR_BAD_WORD;
	if (len >= sizeof(cfg->log_path))
		return ROCK_ERR_TOO_LARGE;
	memcpy(cfg->log_path, s, len + 1);
	cfg->log_sink = ROCK_LOG_FILE;
	return 0;
}

static int
parse_port(const char *s, size_t len, unsigned short *out)
{
	char buf[8];
	long long n;
	int r;

	if (len == 0)
		return ROCK_ERR_EMPTY;
	if (len >= sizeof(buf))
		return ROCK_ERR_NOT_NUMBER;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if ((r = rock_parse_ll(buf, 1, 65535, &n)) != 0)
		return r;
	*out = (unsigned short)n;
	return 0;
}

/* "22=4022,80=4080"; empty turns the map off. All or nothing. */
static int
parse_port_map(const char *s, struct rock_config *cfg)
{
	struct rock_port_map map[ROCK_PORT_MAP_MAX];
	int n = 0, r;

	while (*s != '\0') {
		const char *eq = strchr(s, '='), *end = strchr(s, ',');

		if (end == NULL)
			end = s + strlen(s);
		if (n == ROCK_PORT_MAP_MAX)
			return ROCK_ERR_TOO_LARGE;
		if (eq == NULL || eq > end)
			return ROCK_ERR_BAD_WORD;
		if ((r = parse_port(s, (size_t)(eq - s), &map[n].from)) != 0 ||
		    (r = parse_port(eq + 1, (size_t)(end - eq - 1), &map[n].to)) != 0)
			return r;
		n++;
		s = *end == ',' ? end + 1 : end;
		if (*end == ',' && *s == '\0')
			return ROCK_ERR_EMPTY;
	}
	memcpy(cfg->port_map, map, sizeof(map[0]) * (size_t)n);
	cfg->nport_map = n;
	return 0;
}

/* Absolute, or empty to turn the file off: a relative path would follow
 * whatever directory the program is in. */
static int
parse_path(const char *s, char *out, size_t n)
{
	size_t len = strlen(s);

	if (len > 0 && s[0] != '/')
		return ROCK_ERR_BAD_WORD;
	if (len >= n)
		return ROCK_ERR_TOO_LARGE;
	memcpy(out, s, len + 1);
	return 0;
}

static int
parse_var(const struct env_var *v, const char *s, struct rock_config *cfg)
{
	long long n;
	int r;

	switch (v->kind) {
	case ENV_MODE:
		return parse_mode(s, &cfg->mode);
	case ENV_LOG:
		return parse_log(s, cfg);
	case ENV_PORT_MAP:
		return parse_port_map(s, cfg);
	case ENV_PATH:
		/* Every path field is a char[PATH_MAX]. */
		return parse_path(s, (char *)cfg + v->field, PATH_MAX);
	case ENV_KEY:
		if (*s == '\0')
			return ROCK_ERR_EMPTY;
		if ((r = rock_key_parse(s, cfg->trust.pin)) != 0)
			return r;
		cfg->trust.pinned = 1;
		return 0;
	case ENV_INT:
		if ((r = rock_parse_ll(s, v->min, v->max, &n)) != 0)
			return r;
		*(int *)(void *)((char *)cfg + v->field) = (int)n;
		return 0;
	}
	return ROCK_ERR_INVALID;
}

/* FNV-1a; 0 is kept for "nothing reported". */
static unsigned long long
value_hash(const char *s)
{
	unsigned long long h = 14695981039346656037ULL;

	for (; *s != '\0'; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h == 0 ? 1 : h;
}

static void
report_once(struct rock_env_parser *p, size_t i, const char *value, int err)
{
	unsigned long long h = value_hash(value);

	if (p->warn == NULL || p->reported[i] == h)
		return;
	p->reported[i] = h;
	if (p->warn != NULL)
		p->warn(p->warn_arg, env_vars[i].name, value, rock_err(err),
		    env_vars[i].accepted);
}

/* $XDG_CONFIG_HOME/rock/known_servers, else ~/.config/rock/known_servers;
 * none without a home. */
static void
default_known_servers(struct rock_config *cfg, struct rock_env_parser *p)
{
	const char *xdg = p->get(p->get_arg, XDG_ENV_CONFIG_HOME);
	const char *home = p->get(p->get_arg, HOME_ENV);
	size_t n = sizeof(cfg->trust.path);
	int w = -1;

	if (xdg != NULL && xdg[0] == '/')
		w = snprintf(cfg->trust.path, n, "%s/rock/known_servers", xdg);
	else if (home != NULL && home[0] == '/')
		w = snprintf(cfg->trust.path, n, "%s/.config/rock/known_servers",
		    home);
	if (w < 0 || (size_t)w >= n)
		cfg->trust.path[0] = '\0';
}

/* $XDG_RUNTIME_DIR/rock (per user and per boot) and its probes file,
 * else the defaults in /tmp/rock-UID. */
static void
default_probe_cache(struct rock_config *cfg, struct rock_env_parser *p)
{
	const char *run = p->get(p->get_arg, XDG_ENV_RUNTIME_DIR);
	size_t n = sizeof(cfg->probe_cache);
	int w;

	if (run == NULL || run[0] != '/')
		return;
	w = snprintf(cfg->probe_cache, n, "%s/rock/probes", run);
	if (w < 0 || (size_t)w >= n)
		cfg->probe_cache[0] = '\0';
	w = snprintf(cfg->run_dir, sizeof(cfg->run_dir), "%s/rock", run);
	if (w < 0 || (size_t)w >= sizeof(cfg->run_dir))
		cfg->run_dir[0] = '\0';
}

void
rock_config_from_env(struct rock_config *cfg, struct rock_env_parser *p)
{
	size_t i;
	int r;

	rock_config_defaults(cfg);
	default_known_servers(cfg, p);
	default_probe_cache(cfg, p);
	for (i = 0; i < ROCK_ENV_NVARS; i++) {
		const char *s = p->get(p->get_arg, env_vars[i].name);

		if (s == NULL)
			continue;
		if ((r = parse_var(&env_vars[i], s, cfg)) != 0)
			report_once(p, i, s, r);
	}
}
