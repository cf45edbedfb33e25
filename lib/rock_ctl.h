/* rock_ctl.h: an engine's control socket: "ls" and "kill ID" for its owner's user (rock ls, rock kill). */
#ifndef ROCK_CTL_H
#define ROCK_CTL_H

#include <stddef.h>

struct evbuffer;
struct rock_engine;
struct rock_session;

/*
 * The line protocol (doc/rock.1 describes what rock ls makes of it). A
 * request is one line of at most ROCK_CTL_REQ_MAX bytes, whole within
 * ROCK_CTL_TIMEOUT_S; the answer follows and the socket closes:
 *   "ls"      one line per rock, ROCK_CTL_NFIELDS fields separated by tabs
 *             (id, program, pid, role, peer, backend, state, since_ms,
 *             reconnects, inflight, ring, rtt_ms), then "end N" (N rows)
 *   "kill ID" "ok", or "error TEXT"
 * Anything else: "error TEXT". Only the owner's user is answered.
 */
#define ROCK_CTL_REQ_MAX 128
#define ROCK_CTL_TIMEOUT_S 2
#define ROCK_CTL_NFIELDS 12
#define ROCK_CTL_PREFIX "ctl."		/* then the pid */

struct rock_ctl;

/* What a session relays to, for its row ("-": nothing); the owner's. */
typedef void rock_ctl_backend_fn(struct rock_session *s, char *out,
    size_t len, void *arg);

/* rock_ctl_open's flags. */
#define ROCK_CTL_MKDIR 1	/* make the missing directories (0700) */
#define ROCK_CTL_TAKEOVER 2	/* replace a live socket: its owner hands over */

/* Listen at path (NULL: no socket; rock_ctl_continue brings the
 * requests), the socket 0600, answered on the engine's loop. Refused
 * (rock_ctl_check) unless its directory is the user's or root's and
 * writable by no one else; an existing name must be a socket, replaced
 * only if nobody answers on it (EADDRINUSE). backend may be NULL. 0, or
 * -1 with errno. */
int rock_ctl_open(struct rock_engine *e, const char *path,
    const char *program, rock_ctl_backend_fn *backend, void *arg,
    unsigned flags, struct rock_ctl **out);
/* Whether path could be a control socket (all but the live check): 0, or
 * -1 with errno for rock_ctl_strerror. */
int rock_ctl_check(const char *path, unsigned flags);
/* What went wrong with a control socket's path, for its error message. */
const char *rock_ctl_strerror(int err);
/* A server's workers (one engine each) answer as one socket: the first
 * worker's. "ls" lists each worker's rows in turn, the connection passed
 * on from worker to worker with the rows counted so far, and the last
 * writes "end N"; "kill ID" goes to the worker the id names. pass owns fd
 * from then on and hands it to worker `to`'s rock_ctl_continue. */
typedef void rock_ctl_pass_fn(void *arg, int fd, const char *req,
    unsigned long rows, int to);
void rock_ctl_set_workers(struct rock_ctl *c, int worker, int workers,
    rock_ctl_pass_fn *pass, void *arg);
/* A connection passed on by another worker: its request, answered here
 * (and passed on again while workers follow). */
void rock_ctl_continue(struct rock_ctl *c, int fd, const char *req,
    unsigned long rows);
/* Stop answering; unlink_path: remove the socket's name too. */
void rock_ctl_free(struct rock_ctl *c, int unlink_path);
/* A forked child that does not run the loop: its copy of the listening
 * socket closes; the parent's events and name stay untouched. */
void rock_ctl_forget(struct rock_ctl *c);
/* The answer to one request line (without its newline), into out. */
void rock_ctl_answer(struct rock_ctl *c, const char *req, struct evbuffer *out);
/* "DIR/ctl.PID" into out; -1 if it does not fit. */
int rock_ctl_path(const char *dir, long pid, char *out, size_t len);

#endif
