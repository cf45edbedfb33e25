/* listener.h: a server's TCP listener moved to the engine (listener.c, the program's side; park.c, the engine's). */
#ifndef ROCK_SHIM_LISTENER_H
#define ROCK_SHIM_LISTENER_H

#include <stdint.h>
#include <sys/un.h>

#include <event2/event.h>

#include "shim.h"

/* What goes with each connection handed to the program, over a unix
 * connection to its listener, the connection's descriptor attached. */
#define SHIM_HAND_MAGIC 0x68636f72u
enum { SHIM_HAND_PLAIN = 1, SHIM_HAND_ROCK = 2 };
struct shim_hand_msg {
	uint32_t magic;
	uint32_t kind;
	uint64_t token;		/* a rock's: the program finds it by this */
};

enum shim_park_phase {
	SHIM_PARK_SNIFF,	/* its first bytes are awaited */
	SHIM_PARK_HELLO,	/* a rock's hello, with the engine */
	SHIM_PARK_PROVING,	/* accepted, its CLIENT_FINISHED awaited */
	SHIM_PARK_WAITING,	/* ready; the program's queue was full */
	SHIM_PARK_HANDED	/* a rock on its way: until the program has it */
};

struct shim_listener;
#define SHIM_LISTENER_REGS 4
#define SHIM_LISTENER_BACKLOG 128	/* the TCP listener's, at least */

/* A connection the engine holds for a listener. */
struct shim_parked {
	struct shim_listener *l;	/* NULL once the listener is gone */
	enum shim_park_phase phase;
	struct shim_park_list *in;	/* l->parked or l->shaking, or NULL */
	int fd;				/* the TCP connection */
	int uconn;			/* HANDED: our end of the hand-over */
	struct shim_rock *r;		/* a rock's, until the program has it */
	uint64_t token;
	int wait_ms, rtt_ms;		/* for its first bytes; TCP's */
	int64_t since_ms;		/* accepted */
	uint8_t buf[ROCK_MAGIC_LEN];
	size_t have;
	struct sockaddr_storage peer;
	socklen_t peer_len;
	struct event *ev, *deadline;
	struct shim_parked *prev, *next;
};

/* A FIFO of parked connections. */
struct shim_park_list {
	struct shim_parked *head, *tail;
	unsigned n;
};

struct shim_listener {
	int fd;			/* the program's number: a unix listener */
	int tcp;		/* the TCP listener (FD_CLOEXEC) */
	pid_t owner;		/* the process whose engine feeds it */
	struct sockaddr_un name;	/* the unix listener's (abstract) */
	socklen_t name_len;
	int accepted;		/* the program called accept() on it */
	int paused;		/* the engine does not accept: no room */
	int running;		/* the engine's events are set */
	struct event *ev, *retry;
	struct shim_park_list parked;	/* sniffs, oldest first */
	struct shim_park_list shaking;	/* rock handshakes, oldest first */
	struct shim_park_list waiting;	/* ready, for the program's queue */
	struct shim_call call;
	int call_done;
	struct rock_log_limit drop_log;
	/* The program's epoll interest in fd, the TCP listener's if given
	 * back (the unix listener's goes with it). */
	struct {
		int epfd;
		struct epoll_event ev;
	} regs[SHIM_LISTENER_REGS];
	int nregs;
	struct sockaddr_storage local;	/* the TCP listener's address */
	socklen_t local_len;
	struct shim_listener *next;
};

/* park.c, the engine's thread, lock held. */
void shim_park_start(struct rock_engine *e, void *arg);	/* arg: listener */
void shim_park_stop(struct rock_engine *e, void *arg);	/* arg: listener */
struct shim_parked *shim_park_handed(uint64_t token);
void shim_park_rock_up(struct shim_rock *r);	/* its keys proven */
void shim_park_rock_gone(struct shim_rock *r);	/* its session ended */
/* The program has the rock; the engine frees p when the hand-over ends. */
void shim_park_taken(struct shim_parked *p);
/* After fork, in the child: forget what is the parent's engine's. */
void shim_park_forget_child(struct shim_listener *l);
void shim_park_forget_handed_child(void);
/* The engine's thread: the rocks on their way to the program end (the
 * program leaves); arg: an int set to 1 when done. */
void shim_park_drop_handed(struct rock_engine *e, void *arg);

#endif
