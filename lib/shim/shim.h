/* shim.h: what the preload shim's small files share (real functions, state, fd table). */
#ifndef ROCK_SHIM_H
#define ROCK_SHIM_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "rock_config.h"
#include "rock_keepalive.h"
#include "rock_log.h"

#define SHIM_EXPORT __attribute__((visibility("default")))

/* The next definitions of the calls we intercept, resolved once. */
struct shim_real {
	int (*socket)(int, int, int);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	int (*listen)(int, int);
	int (*accept)(int, struct sockaddr *, socklen_t *);
	int (*accept4)(int, struct sockaddr *, socklen_t *, int);
	int (*setsockopt)(int, int, int, const void *, socklen_t);
	int (*getsockopt)(int, int, int, void *, socklen_t *);
	int (*close)(int);
	int (*dup)(int);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	ssize_t (*sendto)(int, const void *, size_t, int,
	    const struct sockaddr *, socklen_t);
	ssize_t (*sendmsg)(int, const struct msghdr *, int);
};

extern struct shim_real shim_real;

/* Resolve every real function; idempotent, safe to race. */
void shim_resolve(void);

/* The shim's process-wide state: the engine itself keeps none. */
struct shim_state {
	struct rock_config cfg;
	struct rock_log log;
	int active;		/* mode is not off */
};

/* The state, initialised on first use (before or after our constructor). */
const struct shim_state *shim_state(void);

/* The settings for one socket: the process's, or freshly read from the
 * environment into fresh_* when DD_EVAL_ENVIRONMENT_ONCE=0 asks for it. */
struct shim_settings {
	const struct rock_config *cfg;
	const struct rock_log *log;
	struct rock_config fresh_cfg;
	struct rock_log fresh_log;
};

void shim_settings(struct shim_settings *s);

/*
 * What the shim knows of a descriptor. One byte each: the state in the high
 * bits, the keepalive options the program set itself (ROCK_KA_*) in the low.
 */
enum shim_fd_state {
	SHIM_FD_UNKNOWN = 0,	/* not made through our hooks: ask the kernel */
	SHIM_FD_TCP_PENDING,	/* TCP, options not applied yet */
	SHIM_FD_TCP_DONE,	/* TCP, options applied or inherited */
	SHIM_FD_OTHER,		/* not TCP: never touched */
	SHIM_FD_LISTEN_OURS,	/* TCP listener we configured: children inherit */
	SHIM_FD_LISTEN_TCP	/* TCP listener we did not configure */
};

#define SHIM_FD_OPTS_MASK 0x1fu
#define SHIM_FD_STATE_SHIFT 5

unsigned shim_fd_get(int fd);
void shim_fd_set(int fd, enum shim_fd_state state, unsigned opts);
void shim_fd_add_opts(int fd, unsigned opts);
void shim_fd_copy(int from, int to);

static inline enum shim_fd_state
shim_fd_state_of(unsigned entry)
{
	return (enum shim_fd_state)(entry >> SHIM_FD_STATE_SHIFT);
}

/* Give a TCP socket its keepalive options before it carries data
 * (connect, TCP Fast Open send); family is the destination's. */
void shim_ka_before_use(int fd, int family, const char *why);

/* Apply the options now, except `skip`; 0 if the settings say mode off. */
int shim_ka_apply(int fd, unsigned skip, const char *why);

/* Classify a socket we did not see being made. */
int shim_fd_is_tcp(int fd);

#endif
