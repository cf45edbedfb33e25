/* session_fixture.h: the engine tests' shared fixture (session_fixture.c): servers, the client engine, waits. */
#ifndef ROCK_TEST_SESSION_FIXTURE_H
#define ROCK_TEST_SESSION_FIXTURE_H

#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <check.h>

#include "rock_engine_int.h"

/* The server engine's configuration: NULL, the defaults; and where it
 * routes other workers' reconnects and asks about a fleet's nodes (set
 * before its thread starts). */
extern const struct rock_engine_config *server_cfg;
extern rock_route_fn server_route;
extern void *server_route_arg;
extern rock_node_gone_fn server_node_gone;

enum server_mode { ECHO, REFUSE };

struct server {
	pthread_t thread;
	struct event_base *base;
	struct rock_engine *e;
	struct rock_log log;
	struct rock_config logcfg;
	int lfd;
	struct sockaddr_in addr;
	struct event *ev_accept, *ev_stop;
	enum server_mode mode;
	struct rock_session *last;	/* the newest session */
	int stop;
};

/* Every byte any server session's owner was given. */
extern unsigned long server_got;

void server_start_at(struct server *sv, enum server_mode mode,
    const struct sockaddr_in *at);
/* On 127.0.0.1, any port. */
void server_start(struct server *sv, enum server_mode mode);
void server_stop(struct server *sv);
/* After server_stop: its listener made again at its address, its
 * engine (and sessions) as they were, its thread started again. */
void server_restart(struct server *sv);
/* After server_stop: the engine frees the sessions it still has. */
void server_free(struct server *sv);
/* The server's count, read from our thread (set on the server's just
 * after its answer left): waited for, 3 s at most. */
unsigned long server_count(const unsigned long *counter, unsigned long want);

struct client {
	struct event_base *base;
	struct rock_engine *e;
	struct rock_log log;
	struct rock_config logcfg;
	struct rock_session *s;
	uint8_t got[4 << 20];
	size_t ngot;
	int eof, closed, closed_err;
	int states[8];			/* count of transitions into each state */
};

extern struct client cl;
extern const struct rock_session_cbs client_cbs;

void client_engine(const struct rock_engine_config *cfg);
/* A session still there goes with the engine. */
void client_free(void);
int client_connect(const struct server *sv);
/* The usual start: an echo server and a connected client rock to it. */
void pair_up(struct server *sv, const struct rock_engine_config *cfg);
/* A server that offers EARLY (a replay register of its own, in *st) and
 * the client engine; handshake_ms: the server's bound (0: its default). */
void pair_up_early(struct server *sv, struct rock_strike **st, int handshake_ms);
/* Both engines go, with whatever sessions they still have. */
void pair_down(struct server *sv);

/* Run the client's loop until cond() holds or ms pass; returns cond(). */
int run_until(int (*cond)(void), int ms);
extern size_t want_bytes;
int got_all(void);		/* cl.ngot >= want_bytes */
int is_closed(void);
int is_suspended_once(void);
int is_connected(void);
void fill_pattern(uint8_t *p, size_t n, unsigned seed);
/* What bytes sent on a new connection to sv get back within wait_ms of
 * quiet (or until the server ends the connection), into in. */
size_t early_exchange(const struct server *sv, const uint8_t *out,
    size_t nout, uint8_t *in, size_t nin, int wait_ms);

#endif
