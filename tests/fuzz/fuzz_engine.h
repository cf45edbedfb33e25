/* fuzz_engine.h: the fixture of the engine's harnesses: one engine on loopback, rocks with known ids and keys. */
#ifndef ROCK_FUZZ_ENGINE_H
#define ROCK_FUZZ_ENGINE_H

#include <sys/un.h>

#include "rock_engine_int.h"

#define FUZZ_ROCKS 3

/* A rock of the fixture and the far end of its data connection. */
struct fuzz_rock {
	struct rock_session *s;		/* NULL once closed and freed */
	int peer_fd;			/* -1: suspended, no connection */
};

struct fuzz_world {
	struct event_base *base;
	struct rock_engine *e;
	struct rock_log log;
	struct rock_config logcfg;
	struct fuzz_rock r[FUZZ_ROCKS];
};

/* A rock's owner: drops what arrives, frees the rock when it ends; its
 * argument is the rock's struct fuzz_rock. */
extern const struct rock_session_cbs fuzz_rock_cbs;

/* The engine, made once per process; an empty world per input. */
struct fuzz_world *fuzz_world(void);
/* Rock i as set by one fuzz byte: its role, whether connected, bytes
 * sent (in its ring, unacknowledged) and its own flags. NULL on failure. */
struct rock_session *fuzz_rock_add(struct fuzz_world *w, int i, unsigned setup);
/* Rock i's id, and the key its peer seals with (the rock's rx). */
void fuzz_rock_id(int i, uint8_t id[ROCK_ID_LEN]);
const uint8_t *fuzz_rock_peer_key(int i);
/* The rock whose id this is, or -1. */
int fuzz_rock_index(const uint8_t id[ROCK_ID_LEN]);
/* Run the loop until nothing is ready (at most n rounds). */
void fuzz_world_run(struct fuzz_world *w, int n);
/* Run the loop until fd is readable (1) or ms have passed (0). */
int fuzz_world_run_until_readable(struct fuzz_world *w, int fd, int ms);
/* A stream address of this process in the abstract namespace: no file,
 * no TCP port, no TIME_WAIT per input. Returns its length. */
socklen_t fuzz_local_addr(struct sockaddr_un *un, const char *name);
/* A scripted server for the client's harnesses: a stream listener of
 * this process at fuzz_local_addr(name), made on first use (fd -1 before). */
struct fuzz_server {
	struct sockaddr_un addr;
	socklen_t len;
	int fd;
};
void fuzz_server_listen(struct fuzz_server *sv, const char *name);
/* The RECONNECT_REQUEST a client sent on fd (a reconnect or a status):
 * its nonce and flags; -1 if none came whole. */
int fuzz_server_request(int fd, uint8_t nonce[ROCK_NONCE_LEN], uint32_t *flags);
/* Once rock 0's request comes on fd (the loop runs meanwhile): the
 * answer's n bytes, a RECONNECT_OK's tag made right first if tag, then
 * the FIN. The request's flags; -1 if none came. */
int64_t fuzz_server_answer(struct fuzz_world *w, int fd, int tag,
    uint8_t *ans, size_t n);
/* Drop connections an earlier input left in the backlog, so that this
 * input's answer goes to this input's client. */
void fuzz_server_drain(struct fuzz_server *sv);

/* Free every rock and what the engine kept of them: the next input
 * starts from nothing. */
void fuzz_world_clear(struct fuzz_world *w);

#endif
