/* fuzz_settings.c: libFuzzer harness for the library's settings: rock_config_from_env over fuzz-chosen variables, and rock_parse_ll against strtoll. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rock_config.h"
#include "rock_err.h"
#include "rock_parse.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_LINES 64

/* The environment: "NAME=VALUE" lines of the input; the first wins. */
struct env {
	char *line[MAX_LINES];
	int n;
	int warned;
};

static const char *
env_get(void *arg, const char *name)
{
	struct env *env = arg;
	size_t len = strlen(name);
	int i;

	for (i = 0; i < env->n; i++)
		if (strncmp(env->line[i], name, len) == 0 &&
		    env->line[i][len] == '=')
			return env->line[i] + len + 1;
	return NULL;
}

static void
env_warn(void *arg, const char *var, const char *value, const char *problem,
    const char *accepted)
{
	struct env *env = arg;

	FUZZ_CHECK(var != NULL && value != NULL && problem != NULL &&
	    accepted != NULL);
	env->warned++;
}

/* Whatever the environment says, the settings stay in their ranges. */
static void
check_config(const struct rock_config *c)
{
	int i;

	FUZZ_CHECK(c->mode == ROCK_MODE_ROCK || c->mode == ROCK_MODE_KEEPALIVE ||
	    c->mode == ROCK_MODE_OFF);
	FUZZ_CHECK(c->keepalive_time >= 0 && c->keepalive_time <= ROCK_KEEPIDLE_MAX);
	FUZZ_CHECK(c->keepalive_intvl >= 0 && c->keepalive_intvl <= ROCK_KEEPINTVL_MAX);
	FUZZ_CHECK(c->keepalive_probes >= 0 && c->keepalive_probes <= ROCK_KEEPCNT_MAX);
	FUZZ_CHECK(c->user_timeout_ms >= -1);
	FUZZ_CHECK(c->debug == 0 || c->debug == 1);
	FUZZ_CHECK(c->use_keepalive == 0 || c->use_keepalive == 1);
	FUZZ_CHECK(c->eval_env_once == 0 || c->eval_env_once == 1);
	if (c->log_sink == ROCK_LOG_FILE)
		FUZZ_CHECK(c->log_path[0] == '/' &&
		    memchr(c->log_path, '\0', sizeof(c->log_path)) != NULL);
	FUZZ_CHECK(c->nport_map >= 0 && c->nport_map <= ROCK_PORT_MAP_MAX);
	for (i = 0; i < c->nport_map; i++)
		FUZZ_CHECK(c->port_map[i].from >= 1 && c->port_map[i].to >= 1);
	FUZZ_CHECK(c->probe_timeout_ms >= 10 && c->probe_timeout_ms <= 60000);
	FUZZ_CHECK(c->linger_ms >= 0 && c->linger_ms <= 3600000);
	FUZZ_CHECK(c->suspend_timeout_s >= 0);
}

/* rock_parse_ll agrees with strtoll on what it accepts: an optional sign
 * and digits only, nothing else. */
static void
check_parse(const char *s)
{
	const char *p = s + (*s == '-' || *s == '+');
	long long v = 42, ref;
	char *end;
	int r = rock_parse_ll(s, LLONG_MIN, LLONG_MAX, &v), digits = *p != '\0';

	for (; *p != '\0'; p++)
		digits &= *p >= '0' && *p <= '9';
	if (!digits) {
		FUZZ_CHECK(r == (*s == '\0' ? ROCK_ERR_EMPTY : ROCK_ERR_NOT_NUMBER));
		FUZZ_CHECK(v == 42);
		return;
	}
	errno = 0;
	ref = strtoll(s, &end, 10);
	if (errno == ERANGE)
		FUZZ_CHECK(r == (ref < 0 ? ROCK_ERR_TOO_SMALL : ROCK_ERR_TOO_LARGE));
	else
		FUZZ_CHECK(r == 0 && v == ref && *end == '\0');
	/* A range only narrows what passes. */
	r = rock_parse_ll(s, -1000, 1000, &v);
	if (errno != ERANGE && ref >= -1000 && ref <= 1000)
		FUZZ_CHECK(r == 0 && v == ref);
	else
		FUZZ_CHECK(r == ROCK_ERR_TOO_SMALL || r == ROCK_ERR_TOO_LARGE);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct env env = { { NULL }, 0, 0 };
	struct rock_env_parser p = { env_get, &env, env_warn, &env, { 0 } };
	struct rock_config cfg;
	char *text = malloc(size + 1), *line, *save = NULL;
	int i, first;

	if (text == NULL)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	for (line = strtok_r(text, "\n", &save); line != NULL && env.n < MAX_LINES;
	    line = strtok_r(NULL, "\n", &save))
		env.line[env.n++] = line;
	rock_config_from_env(&cfg, &p);
	check_config(&cfg);
	/* Read again (DD_EVAL_ENVIRONMENT_ONCE=0): the same settings, and
	 * no bad value reported twice. */
	first = env.warned;
	rock_config_from_env(&cfg, &p);
	check_config(&cfg);
	FUZZ_CHECK(env.warned == first);
	for (i = 0; i < env.n; i++) {
		char *eq = strchr(env.line[i], '=');

		check_parse(eq != NULL ? eq + 1 : env.line[i]);
	}
	free(text);
	return 0;
}
