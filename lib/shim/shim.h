/* shim.h: what the preload shim's small files share (real functions, state, fd table). */
#ifndef ROCK_SHIM_H
#define ROCK_SHIM_H

#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "rock_config.h"
#include "rock_engine.h"
#include "rock_keepalive.h"
#include "rock_log.h"

#define SHIM_EXPORT __attribute__((visibility("default")))

/* The next definitions of the calls we intercept, resolved once. */
struct shim_real {
	int (*socket)(int, int, int);
	int (*connect)(int, const struct sockaddr *, socklen_t);
	int (*bind)(int, const struct sockaddr *, socklen_t);
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
	ssize_t (*send)(int, const void *, size_t, int);
	ssize_t (*recv)(int, void *, size_t, int);
	ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *,
	    socklen_t *);
	ssize_t (*recvmsg)(int, struct msghdr *, int);
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*writev)(int, const struct iovec *, int);
	ssize_t (*sendfile)(int, int, off_t *, size_t);
	ssize_t (*splice)(int, loff_t *, int, loff_t *, size_t, unsigned int);
	int (*sendmmsg)(int, struct mmsghdr *, unsigned int, int);
	int (*recvmmsg)(int, struct mmsghdr *, unsigned int, int,
	    struct timespec *);
	int (*shutdown)(int, int);
	int (*getpeername)(int, struct sockaddr *, socklen_t *);
	int (*getsockname)(int, struct sockaddr *, socklen_t *);
	int (*fcntl)(int, int, ...);
	int (*poll)(struct pollfd *, nfds_t, int);
	int (*ppoll)(struct pollfd *, nfds_t, const struct timespec *,
	    const sigset_t *);
	int (*select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
	int (*pselect)(int, fd_set *, fd_set *, fd_set *,
	    const struct timespec *, const sigset_t *);
	int (*epoll_ctl)(int, int, int, struct epoll_event *);
	int (*epoll_wait)(int, struct epoll_event *, int, int);
	int (*epoll_pwait)(int, struct epoll_event *, int, int,
	    const sigset_t *);
	int (*getaddrinfo)(const char *, const char *, const struct addrinfo *,
	    struct addrinfo **);
	int (*daemon)(int, int);
	int (*execve)(const char *, char *const[], char *const[]);
	int (*execvp)(const char *, char *const[]);
	int (*execvpe)(const char *, char *const[], char *const[]);
	int (*fexecve)(int, char *const[], char *const[]);
	int (*execveat)(int, const char *, char *const[], char *const[], int);
	FILE *(*fdopen)(int, const char *);
	int (*fclose)(FILE *);
	int (*vdprintf)(int, const char *, va_list);
	int (*vdprintf_chk)(int, int, const char *, va_list);	/* or NULL */
};

extern struct shim_real shim_real;

/* Resolve every real function; idempotent, safe to race. */
void shim_resolve(void);

/* Set on the engine's thread, and around the library's own work in the
 * program's threads: the hooks then go straight to libc (decision 13). */
extern __thread int shim_busy __attribute__((tls_model("initial-exec")));

/* The shim's process-wide state: the engine itself keeps none. */
struct shim_state {
	struct rock_config cfg;
	struct rock_log log;
	int active;		/* mode is not off */
	/* The program's name as it started, for rock ls: a program that
	 * rewrites its title (sshd) overwrites what argv[0] says later. */
	char program[32];
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
 * What the shim knows of a descriptor, two bytes each: the state in bits
 * 5-7; the options the program set itself below and above it (ROCK_KA_*,
 * SHIM_FD_*BUF_SET: a rock puts them on its data connections).
 */
enum shim_fd_state {
	SHIM_FD_UNKNOWN = 0,	/* not made through our hooks: ask the kernel */
	SHIM_FD_TCP_PENDING,	/* TCP, options not applied yet */
	SHIM_FD_TCP_DONE,	/* TCP, options applied or inherited */
	SHIM_FD_OTHER,		/* not TCP: never touched */
	SHIM_FD_LISTEN_OURS,	/* TCP listener we configured: children inherit */
	SHIM_FD_LISTEN_TCP,	/* TCP listener we did not configure */
	SHIM_FD_ROCK,		/* a rock, or a connect that may become one */
	SHIM_FD_RELAYED		/* a copy of a rock a fork shared (fork.c) */
};

#define SHIM_FD_SNDBUF_SET (1u << 8)
#define SHIM_FD_RCVBUF_SET (1u << 9)
/* Made by our socket(): every option the program set on it came through
 * our setsockopt(); and one of them was none of the above. A socket
 * born here with nothing else set has only the kernel's defaults, which
 * a rock's new connection has too: nothing to copy (shim_rock_install). */
#define SHIM_FD_BORN (1u << 10)
#define SHIM_FD_OTHER_SET (1u << 11)
/* The program bound it through our bind(): only then can a socket born
 * here have a local address of its own to keep (connect.c's rockable). */
#define SHIM_FD_BOUND (1u << 12)
#define SHIM_FD_OPTS_MASK (0x1fu | SHIM_FD_SNDBUF_SET | SHIM_FD_RCVBUF_SET | \
	SHIM_FD_BORN | SHIM_FD_OTHER_SET | SHIM_FD_BOUND)
#define SHIM_FD_STATE_SHIFT 5
#define SHIM_FD_STATE_MASK 7u

unsigned shim_fd_get(int fd);
void shim_fd_set(int fd, enum shim_fd_state state, unsigned opts);
void shim_fd_forget(int fd);	/* lock not held: before fd is closed */
/* Lock not held: a rock stdio will use goes behind a relay (stdio.c). */
void shim_stdio_relay(int fd, const char *call);
void shim_fd_add_opts(int fd, unsigned opts);
void shim_fd_copy(int from, int to);
void shim_fd_forget_births(void);	/* before fork: SHIM_FD_BORN off */

/* A pointer per descriptor, in lazily mapped pages (the rock a descriptor
 * names, an epoll set's registrations); callers hold shim_lock(). */
#define SHIM_FDMAP_BITS 10
#define SHIM_FDMAP_PAGES 1024u	/* 2^20 descriptors, as the byte table */
struct shim_fdmap {
	void **pages[SHIM_FDMAP_PAGES];
};

void *shim_fdmap_get(const struct shim_fdmap *m, int fd);
/* -1 when fd is out of range or no page could be mapped. */
int shim_fdmap_set(struct shim_fdmap *m, int fd, void *p);

static inline enum shim_fd_state
shim_fd_state_of(unsigned entry)
{
	return (enum shim_fd_state)(entry >> SHIM_FD_STATE_SHIFT &
	    SHIM_FD_STATE_MASK);
}

/* Give a TCP socket its keepalive options before it carries data
 * (connect, TCP Fast Open send); family is the destination's. */
void shim_ka_before_use(int fd, int family, const char *why);

/* Apply the options now, except `skip`; 0 if the settings say mode off. */
int shim_ka_apply(int fd, unsigned skip, const char *why);

/* Classify a socket we did not see being made. */
int shim_fd_is_tcp(int fd);


/* ---- rocks (ROCK_MODE=rock): rock.c, engine.c */

struct shim_reg;

#define SHIM_ROCK_FDS 8		/* descriptors sharing one rock (dup) */

/* Options the program set that a data connection does not simply carry
 * over (opts.c): what its getsockopt reports, what each new one gets. */
enum {
	SHIM_OPT_LINGER = 1 << 5,
	SHIM_OPT_SNDBUF = 1 << 6,
	SHIM_OPT_RCVBUF = 1 << 7,
	SHIM_OPT_RTO_MAX = 1 << 8
};
struct shim_opts {
	unsigned set;			/* ROCK_KA_* and SHIM_OPT_*: the program's */
	struct rock_owner_ka ka;	/* the engine merges it with its backstop */
	int user_timeout;		/* reported, never applied (PROTOCOL 3.4) */
	struct linger linger;		/* reported; the engine closes its own */
	int sndbuf, rcvbuf;		/* as asked for, before the doubling */
	int rto_max;			/* TCP_RTO_MAX_MS, reported, never applied;
					 * -1: the kernel has none */
};

/* What the shim knows of one rock; every field under shim_lock(). */
struct shim_rock {
	struct rock_session *s;	/* NULL once the engine let go */
	int ready;		/* calls may enter the kernel on it */
	int connecting;		/* a non-blocking connect runs the EDP */
	/* connect() returned 0 before the handshake was over (connect.c's
	 * early resumption): a connection to the program, not ready yet. */
	int returned;
	struct rock_early *early;	/* that handshake, while it runs */
	int inflight;		/* program calls inside the kernel on it */
	int writer;		/* a write is between send and ring copy */
	int ring_blocked;	/* a write found the ring full */
	int err;		/* errno for the next call once the engine gave up */
	int so_error;		/* SO_ERROR of a non-blocking connect */
	int rd_shut, wr_shut;	/* the program's shutdown() */
	int released;		/* the program closed its last descriptor */
	int holds;		/* program calls using this record */
	int dead;		/* freed once holds drops to 0 */
	int cmds;		/* SHIM_CMD_* for the engine's thread */
	int accepted;		/* a server's (serve.c) */
	/* A server's rock the engine is handing to the program (park.c). */
	struct shim_parked *handing;
	int rdv_port;		/* named at the rendezvous for this port */
	int kill_at_release;	/* its end is a reset, never the reliable close */
	int relayed;		/* fork.c's: held by its relay, not the program */
	int stdio_warned;	/* stdio.c said its bytes go uncounted */
	/* A client's: the handshake's last segment (CLIENT_FINISHED) may be
	 * unacknowledged when the program first writes; Nagle would hold a
	 * small first write for that ack (a delayed ack: 40 ms). */
	int finished_sent;
	int nfds;
	int fds[SHIM_ROCK_FDS];
	struct shim_opts opts;
	struct sockaddr_storage peer;	/* what the program connected to */
	socklen_t peer_len;
	int64_t delivered_ms;	/* keeper: the peer had all of ours since */
	struct shim_reg *regs;	/* its epoll registrations (epoll.c) */
	struct shim_rock *next_cmd;
	struct shim_rock *next, *prev;	/* all rocks */
};

enum {
	SHIM_CMD_FAIL = 1,	/* the program's I/O failed */
	SHIM_CMD_EOF = 2,	/* the program read the peer's end of stream */
	SHIM_CMD_FINISH = 4,	/* see whether both ends are done */
	SHIM_CMD_RELEASE = 8,	/* the program let go */
	SHIM_CMD_EOF_WAIT = 16	/* an end of file the peer has not confirmed */
};

void shim_lock(void);
void shim_unlock(void);
int shim_lock_within(int ms, int *nested);	/* 0 once held; from a handler */
/* Wait for any change of any rock; deadline_ms < 0: no limit. 0 on a
 * change (or a spurious wake), ETIMEDOUT. */
int shim_wait(int64_t deadline_ms);
void shim_wake(void);
void shim_wake_pollers(void);	/* also pollers hiding rocks: visibility changed */
/* A poll or select waiting on rocks it hides: shim_wake() writes to fd. */
struct shim_waiter {
	int fd;
	int added;
	struct shim_waiter *next;
};
void shim_waiter_add(struct shim_waiter *w);		/* lock held */
void shim_waiter_remove(struct shim_waiter *w);		/* lock held */
void shim_reinit_after_fork(void);
/* Lock held: the rock on fd remembers the name the program looked addr
 * up by, if it did (getaddrinfo.c). */
void shim_name_rock(int fd, struct rock_session *s,
    const struct sockaddr *addr, socklen_t len);

struct shim_rock *shim_rock_of(int fd);		/* lock held */
void shim_rock_bind(int fd, struct shim_rock *r);	/* lock held */
void shim_rock_unbind(int fd);			/* lock held */

/* The engine on its own thread, started at the first rock. */
struct rock_engine *shim_engine(void);
struct rock_engine *shim_engine_running(void);	/* NULL: not started */
int shim_engine_here(void);	/* running, in this process (not vfork's) */
/* Wake the engine's thread with no command: it makes what a connect used
 * up ahead of the next (its X25519 pair). */
void shim_engine_wake(void);
void shim_engine_wake_at_unlock(void);	/* lock held: once it is let go */
/* The probe cache shared with the user's other processes (ROCK_PROBE_CACHE). */
struct rock_probe_file *shim_probe_file(void);
const struct rock_session_cbs *shim_rock_cbs(void);
void shim_post(struct shim_rock *r, int cmd);		/* lock held */
/* Run fn(engine, arg) on the engine's thread, under the lock (what
 * touches its event loop: a server's handshakes). Lock held. */
struct shim_call {
	void (*fn)(struct rock_engine *e, void *arg);
	void *arg;
	struct shim_call *next;
};
void shim_engine_call(struct shim_call *c);
/* accept(): what the program gets for the connection fd accepted from
 * the TCP listener lfd under ROCK_MODE=rock (serve.c): fd (a plain client), a rock's
 * descriptor, or -1 when the connection was the engine's (a probe, a
 * reconnect) or its handshake failed: the caller accepts the next. */
int shim_serve(int lfd, int fd, int flags);
/* The engine, with the server's key loaded; NULL: listeners stay plain. */
struct rock_engine *shim_server_engine(void);
/* Lock held: the accepted rock r becomes the program's on pfd; lfd: the
 * TCP listener it came from (-1: not here). */
void shim_rock_adopt(struct shim_rock *r, int pfd, int lfd);
/* accept.c: fd, accepted on lfd, carries the listener's options. */
void shim_accepted(int lfd, int fd);
/* listener.c: a listener under ROCK_SERVE is the engine's (listen), and
 * the program's descriptor a unix listener fed ready connections. */
void shim_listener_take(int fd, int backlog);
int shim_listener_accept(int fd, struct sockaddr *addr, socklen_t *len,
    int flags, int *ours);
int shim_listener_listen(int fd, int backlog, int *ours);
int shim_listener_tcp(int fd);		/* -1: fd is no listener of ours */
int shim_listener_is_self(const struct sockaddr *addr, socklen_t len);
void shim_listener_forget(int fd);	/* the program's number closes */
void shim_listener_after_fork(int child);
void shim_listener_exec(void);
void shim_listener_keeper(void);
void shim_listener_leave(void);
void shim_listener_epoll(int epfd, int op, int fd,
    const struct epoll_event *ev);
struct event_base;
struct event_base *shim_engine_base(void);	/* NULL: no engine */
/* rendezvous.c: a served rock's reconnect that reaches another process
 * listening on its port is handed to the process that holds it. */
void shim_rdv_start(struct rock_engine *e);	/* the engine's thread */
void shim_rdv_register(struct shim_rock *r, int lfd);	/* lock held */
void shim_rdv_forget(struct shim_rock *r, struct rock_session *s);
int shim_rdv_owns_fd(int fd);
void shim_rdv_child(void);
void shim_rdv_unlink(void);
void shim_cmd_forget(struct shim_rock *r);		/* lock held */
struct shim_rock *shim_rock_new(void);			/* lock held */
void shim_rock_free(struct shim_rock *r);		/* lock held */
/* A program call keeps r while it waits or is in the kernel; release
 * returns 0 when r is gone (the program closed it meanwhile). */
void shim_rock_hold(struct shim_rock *r);		/* lock held */
int shim_rock_release(struct shim_rock *r);		/* lock held */
void shim_rock_set_ready(struct shim_rock *r, int ready);	/* lock held */
void shim_rock_settle_wait(struct shim_rock *only, int64_t deadline_ms);
#define SHIM_SETTLE_FORK_MS 10000	/* fork and exec wait no longer */
void shim_rock_settle_locked(int fd);
/* The program's calls on a rock found its data connection broken. */
void shim_rock_failed(struct shim_rock *r);		/* lock held */
/* The program's read found a FIN the peer has not confirmed: the rock is
 * hidden until the engine decides (its end, a reconnect, an error). */
void shim_rock_eof_wait(struct shim_rock *r);		/* lock held */
/* A FIN on r would be the engine's to judge: readiness calls ask the
 * kernel for POLLRDHUP on the program's behalf. */
int shim_rock_fin_unjudged(const struct shim_rock *r);	/* lock held */
/* A readiness call saw a FIN on fd (POLLRDHUP): 0 it is the peer's end,
 * or the program's own SHUT_RD; 1 bytes come before it: show them, not
 * the hang-up; -1 an end not confirmed (or the socket failed): r waits,
 * hidden, for the engine; -2 the word was stale: show nothing. */
int shim_rock_fin_check(struct shim_rock *r, int fd);	/* lock held */
/* Lock held, r ended with r->err: that error, taken, and the program's
 * socket fd disconnected. */
int shim_rock_take_error(struct shim_rock *r, int fd);
/* Lock not held: an ended rock's error a call took but could not report
 * (it had moved bytes) is the next call's, as the kernel keeps it. */
void shim_rock_error_again(int fd, int err);
/* fd no longer names r (closed, or replaced by dup2). */
void shim_rock_drop_fd(struct shim_rock *r, int fd);	/* lock held */
void shim_rock_release_all(void);			/* lock held */
int shim_rock_count(void);				/* lock held */
void shim_rock_orphan_all(void);			/* lock held */
uint64_t shim_rock_unacked_all(void);			/* lock held */
int shim_rock_any_suspended(void);			/* lock held */
int shim_rock_live_count(void);			/* lock held; with a session */
/* Lock held. A fork copies the rocks not relayed as plain sockets: the
 * accepted ones are to end with a reset (kill_at_release); how many. */
int shim_rock_mark_forked(void);
int shim_rock_mark_exec(void);
int shim_rock_cloexec(const struct shim_rock *r);	/* lock held */
int shim_rock_writing(void);			/* lock held; a write under way */
void shim_rock_abandon_connects(void);			/* lock held */
/* A rock whose peer has had all of ours for after_ms (0: any rock). */
struct shim_rock *shim_rock_overdue(int64_t now, int64_t after_ms); /* lock held */
void shim_waiters_forget(void);				/* lock held */
void shim_keeper_run(struct event_base *base, struct rock_engine *e,
    int keep_fd, int nrocks, pid_t program) __attribute__((noreturn));
/* rock ls and rock kill reach engine e at its control socket, ctl.PID in
 * the runtime directory (its path into path, "" when none), rows under
 * name. NULL: its rocks work on, unseen, which is said once. */
struct rock_ctl;
struct rock_ctl *shim_ctl_open(const struct shim_state *st,
    struct rock_engine *e, const char *name, char *path, size_t len);
/* opts.c. Lock held: read the program's socket fd before a rock replaces
 * it; put the program's buffer sizes on a new data connection. */
/* An int option of fd, from the kernel (0 when it has none). */
int shim_getsockopt_int(int fd, int level, int opt);
/* entry: fd's table entry before it named a rock (shim_fd_get). */
void shim_opts_capture(struct shim_rock *r, int fd, unsigned entry);
void shim_opts_apply(const struct shim_rock *r, int fd);
/* Lock not held. 1: fd is a rock and the option is the record's (*ret
 * the call's result); 0: the kernel's business. */
int shim_opts_set(int fd, int level, int opt, const void *val, socklen_t len,
    int *ret);
int shim_opts_get(int fd, int level, int opt, void *val, socklen_t *len);
/* Put new_fd under the rock's descriptors (connect and reconnect). */
/* copy: the program may have set options on old_fd that new_fd lacks
 * (shim_opts_copy_needed at a connect; always at a reconnect). */
void shim_rock_install(struct shim_rock *r, int old_fd, int new_fd, int copy);
int shim_opts_copy_needed(unsigned entry);
/* Options the program set on the socket from go to the socket to. */
void shim_copy_options(int from, int to);
struct shim_rock *shim_rock_first(void);		/* lock held */

/* fork.c: rocks shared by fork() are relayed by this process. */
int shim_fork_relay_all(void);		/* lock held: how many now relayed */
int shim_fork_relay_one(struct shim_rock *r);	/* lock held: 0 or -1 */
int shim_fork_relay_failed(struct shim_rock *r);	/* lock held: 0 or -1 */
void shim_fork_relay_start(void);	/* lock not held */
int shim_fork_relay_stop(void);		/* lock not held; 0 or an errno */
int shim_fork_relay_count(void);	/* lock held */
void shim_fork_relay_child(void);	/* after fork, in a plain child */
int shim_fork_relay_owns_fd(int fd);
/* The program leaves (engine.c): what its rocks are owed, and the relays
 * of rocks its forks share, go to a keeper. */
void shim_engine_leave(void);
/* Before exec (exec.c): the rocks the new image inherits are relayed by
 * a keeper, the others finished as at exit. */
void shim_engine_exec(void);
/* Lock held: 1 and the rock's peer when fd is a copy of a relayed rock. */
int shim_fork_relay_peer(int fd, struct sockaddr *addr, socklen_t *len);

/* epoll bookkeeping (epoll.c), lock held. */
void shim_epoll_suspend(struct shim_rock *r);
void shim_epoll_resume(struct shim_rock *r);
void shim_epoll_forget_fd(struct shim_rock *r, int fd);
void shim_epoll_kick(struct shim_rock *r);
void shim_epoll_forget_epfd(int epfd);
/* The descriptors no longer name r: their interest goes to the kernel as is. */
void shim_epoll_give_up(struct shim_rock *r);
/* poll.c: 1 if an error event on fd suspended its rock (hide it). */
int shim_rock_error_event(int fd, int err, int hup);
int shim_nregs_hint(void);

/* I/O on a rock (io.c): recvmsg- and sendmsg-shaped. */
ssize_t shim_rock_recv(int fd, struct msghdr *m, int flags);
ssize_t shim_rock_send(int fd, const struct msghdr *m, int flags);

/* Lock held. The engine let go of r with an error the program has not
 * taken yet (ECONNRESET, ETIMEDOUT): one call reports it. */
static inline int
shim_rock_error_pending(const struct shim_rock *r)
{
	return r->s == NULL && !r->connecting && r->err != 0;
}

static inline int
shim_is_rock(int fd)
{
	(void)shim_state();	/* the real functions resolved */
	return !shim_busy && shim_fd_state_of(shim_fd_get(fd)) == SHIM_FD_ROCK;
}

int64_t shim_now_ms(void);

#endif
