/* state.c: the shim's settings, read from the environment at load time. */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/auxv.h>

#include "shim.h"

static struct shim_state state;
static int state_ready;
static pthread_once_t state_once = PTHREAD_ONCE_INIT;
/* Serialises re-reads of the environment (DD_EVAL_ENVIRONMENT_ONCE=0). */
static pthread_mutex_t reread_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rock_env_parser parser;

/* A setuid or setgid program must not be steered by its caller's environment. */
static const char *
env_get(void *arg, const char *name)
{
	(void)arg;
	if (getauxval(AT_SECURE) != 0)
		return NULL;
	return getenv(name);
}

static void
env_warn(void *arg, const char *var, const char *value, const char *problem,
    const char *accepted)
{
	const struct rock_log *log = arg;

	rlog_warn(log, "%s=\"%s\" ignored (%s); accepted: %s", var, value,
	    problem, accepted);
}

/* Two passes: the log's own settings come from the same environment as the
 * values whose faults it must report. */
static void
read_settings(struct rock_config *cfg, struct rock_log *log)
{
	parser.get = env_get;
	parser.warn = NULL;
	rock_config_from_env(cfg, &parser);
	rock_log_configure(log, cfg, "librock");
	parser.warn = env_warn;
	parser.warn_arg = log;
	rock_config_from_env(cfg, &parser);
}

static void
log_settings(const struct rock_config *cfg, const struct rock_log *log)
{
	rlog_debug(log, "mode %s; SO_KEEPALIVE %s; TCP_KEEPIDLE %d; "
	    "TCP_KEEPINTVL %d; TCP_KEEPCNT %d; TCP_USER_TIMEOUT %d "
	    "(0/-1: system default); environment read %s",
	    rock_mode_name(cfg->mode), cfg->use_keepalive ? "on" : "left alone",
	    cfg->keepalive_time, cfg->keepalive_intvl, cfg->keepalive_probes,
	    cfg->user_timeout_ms,
	    cfg->eval_env_once ? "once" : "for every socket");
}

static void
shim_init(void)
{
	shim_resolve();
	read_settings(&state.cfg, &state.log);
	state.active = state.cfg.mode != ROCK_MODE_OFF;
	snprintf(state.program, sizeof(state.program), "%s",
	    program_invocation_short_name);
	log_settings(&state.cfg, &state.log);
	__atomic_store_n(&state_ready, 1, __ATOMIC_RELEASE);
}

const struct shim_state *
shim_state(void)
{
	if (__builtin_expect(!__atomic_load_n(&state_ready, __ATOMIC_ACQUIRE), 0))
		pthread_once(&state_once, shim_init);
	return &state;
}

void
shim_settings(struct shim_settings *s)
{
	const struct shim_state *st = shim_state();

	if (st->cfg.eval_env_once) {
		s->cfg = &st->cfg;
		s->log = &st->log;
		return;
	}
	pthread_mutex_lock(&reread_lock);
	read_settings(&s->fresh_cfg, &s->fresh_log);
	pthread_mutex_unlock(&reread_lock);
	log_settings(&s->fresh_cfg, &s->fresh_log);
	s->cfg = &s->fresh_cfg;
	s->log = &s->fresh_log;
}

/* Report bad settings when the program starts, not at its first socket. */
__attribute__((constructor)) static void
shim_ctor(void)
{
	(void)shim_state();
}
