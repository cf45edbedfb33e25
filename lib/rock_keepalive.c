/* rock_keepalive.c: set SO_KEEPALIVE, TCP_KEEPIDLE/INTVL/CNT and TCP_USER_TIMEOUT. */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>

#include "rock_err.h"
#include "rock_keepalive.h"

struct ka_option {
	unsigned bit;
	int level, optname;
	const char *name;
};

static const struct ka_option ka_options[] = {
	{ ROCK_KA_KEEPALIVE, SOL_SOCKET, SO_KEEPALIVE, "SO_KEEPALIVE" },
	{ ROCK_KA_IDLE, IPPROTO_TCP, TCP_KEEPIDLE, "TCP_KEEPIDLE" },
	{ ROCK_KA_INTVL, IPPROTO_TCP, TCP_KEEPINTVL, "TCP_KEEPINTVL" },
	{ ROCK_KA_CNT, IPPROTO_TCP, TCP_KEEPCNT, "TCP_KEEPCNT" },
	{ ROCK_KA_USER_TIMEOUT, IPPROTO_TCP, TCP_USER_TIMEOUT,
	    "TCP_USER_TIMEOUT" },
};

#define N_KA_OPTIONS (sizeof(ka_options) / sizeof(ka_options[0]))

unsigned
rock_ka_opt_of(int level, int optname)
{
	size_t i;

	for (i = 0; i < N_KA_OPTIONS; i++)
		if (ka_options[i].level == level &&
		    ka_options[i].optname == optname)
			return ka_options[i].bit;
	return 0;
}

/* The value the configuration wants for an option, or -1 for "leave it". */
static int
wanted_value(const struct rock_config *cfg, unsigned bit)
{
	switch (bit) {
	case ROCK_KA_KEEPALIVE:
		return cfg->use_keepalive ? 1 : -1;
	case ROCK_KA_IDLE:
		return cfg->keepalive_time > 0 ? cfg->keepalive_time : -1;
	case ROCK_KA_INTVL:
		return cfg->keepalive_intvl > 0 ? cfg->keepalive_intvl : -1;
	case ROCK_KA_CNT:
		return cfg->keepalive_probes > 0 ? cfg->keepalive_probes : -1;
	case ROCK_KA_USER_TIMEOUT:
		return cfg->user_timeout_ms;
	}
	return -1;
}

int
rock_ka_apply(int fd, const struct rock_config *cfg, unsigned skip,
    rock_setsockopt_fn *set, const struct rock_log *log)
{
	int ret = 0;
	size_t i;

	for (i = 0; i < N_KA_OPTIONS; i++) {
		const struct ka_option *o = &ka_options[i];
		int v = wanted_value(cfg, o->bit);

		if (v < 0)
			continue;
		if (skip & o->bit) {
			rlog_debug(log, "fd %d: %s left as the program set it",
			    fd, o->name);
			continue;
		}
		if (set(fd, o->level, o->optname, &v, sizeof(v)) != 0) {
			rlog_debug(log, "fd %d: setting %s to %d failed: %s",
			    fd, o->name, v, strerror(errno));
			ret = ROCK_ERR_SYSTEM;
			continue;
		}
		rlog_debug(log, "fd %d: set %s to %d", fd, o->name, v);
	}
	return ret;
}
