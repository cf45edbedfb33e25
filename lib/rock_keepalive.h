/* rock_keepalive.h: apply the configured TCP keepalive options to a socket. */
#ifndef ROCK_KEEPALIVE_H
#define ROCK_KEEPALIVE_H

#include "rock_config.h"
#include "rock_log.h"

/* One bit per option; the shim records those the application set itself. */
enum rock_ka_opt {
	ROCK_KA_KEEPALIVE = 1 << 0,	/* SOL_SOCKET SO_KEEPALIVE */
	ROCK_KA_IDLE = 1 << 1,		/* IPPROTO_TCP TCP_KEEPIDLE */
	ROCK_KA_INTVL = 1 << 2,		/* IPPROTO_TCP TCP_KEEPINTVL */
	ROCK_KA_CNT = 1 << 3,		/* IPPROTO_TCP TCP_KEEPCNT */
	ROCK_KA_USER_TIMEOUT = 1 << 4	/* IPPROTO_TCP TCP_USER_TIMEOUT */
};

/* The option bit for a setsockopt(level, optname), or 0 if not ours. */
unsigned rock_ka_opt_of(int level, int optname);

/* setsockopt() as the caller wants it called (the real one, in the shim). */
typedef int rock_setsockopt_fn(int fd, int level, int optname,
    const void *val, unsigned len);

/*
 * Set every option the configuration asks for on a TCP socket, except those
 * in `skip` (set by the application itself: its value wins).
 * Returns 0, or ROCK_ERR_SYSTEM after trying all options if any failed.
 */
int rock_ka_apply(int fd, const struct rock_config *cfg, unsigned skip,
    rock_setsockopt_fn *set, const struct rock_log *log);

#endif
