/* rockd.h: what rockd's files share: services, the daemon object, relays. */
#ifndef ROCKD_H
#define ROCKD_H

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "rock_engine.h"
#include "rock_log.h"
#include "rock_wire.h"

#define ROCKD_DEFAULT_SNIFF_MS ROCK_FIRST_BYTES_MS
/* With no service given: front the local sshd (librock maps port 22 here). */
#define ROCKD_DEFAULT_LISTEN "4022"
#define ROCKD_DEFAULT_BACKEND "127.0.0.1:22"
/* SIGTERM: how long relays and rocks may take to finish (seconds). */
#define ROCKD_DEFAULT_DRAIN_S 30
#define ROCKD_MAX_DRAIN_S 86400
/* USR2: the successor finds its end of the hand-over channel here. */
#define ROCKD_HANDOVER_ENV "ROCKD_HANDOVER_FD"
/* ... and its node in a fleet (0: none), which the successor must keep:
 * the sessions' ids name it. */
#define ROCKD_HANDOVER_NODE_ENV "ROCKD_HANDOVER_NODE"
/* systemd's: "DEV:INODE" of the journal stream it gave as stdout/stderr. */
#define ROCKD_JOURNAL_STREAM_ENV "JOURNAL_STREAM"

/* Where a service relays to; copied into each connection, so a reload
 * can free the service while its connections live on. */
struct rockd_backend {
	char spec[300];
	struct sockaddr_storage addr;
	socklen_t len;
	struct rockd *daemon;	/* set where a copy travels alone */
};

/* One "listen ... backend ..." line of the configuration. */
struct rockd_service {
	char listen_spec[128];		/* as written, for logs and reload matching */
	struct rockd_backend backend;
	struct sockaddr_storage listen_addr;
	socklen_t listen_len;
	int sniff_ms;
	struct evconnlistener *listener;	/* NULL until started */
	struct event *accept_retry;	/* re-enables a listener paused by EMFILE */
	struct rockd *daemon;
	struct rockd_service *next;
};

/* A fleet's other node, as the configuration names it (peer N HOST:PORT). */
struct rockd_peer {
	int node;
	struct sockaddr_storage addr;	/* where it listens for clients */
	socklen_t len;
	struct rockd_peer *next;
};

struct rockd_config {
	struct rockd_service *services;
	struct rockd_peer *peers;	/* a fleet's siblings; read at start */
	char pidfile[256];
	char key[PATH_MAX];		/* the server key file; "": the default */
	long suspend_timeout_s;		/* -1: the engine's default */
	long max_rocks;			/* -1: from the descriptor limit */
	long drain_timeout_s;		/* -1: ROCKD_DEFAULT_DRAIN_S */
	/* The metrics endpoint; "": none. */
	char metrics_spec[128];
	struct sockaddr_storage metrics_addr;
	socklen_t metrics_len;
	int metrics_line;		/* where the file set it; 0: not the file */
	/* rock ls and rock kill's socket; "": none. Read at start. */
	char control[108];
	int control_line;		/* where the file set it */
	long workers;			/* event loops (processes); 0: one per
					 * CPU (auto); -1: not set (auto) */
	int workers_line;		/* where the file set it */
	int spread;			/* enum rockd_spread; read at start */
	long node;			/* a fleet's node, 1 to 255; 0: none */
	/* udp-address: the UDP port clients are told (worker k: + k); 0:
	 * none; -1 (ROCK_UDP_OWN): the control socket's */
	long udp_told;
	/* udp-address HOST:PORT: the address clients are told (the port is
	 * udp_told); len 0: none */
	struct sockaddr_storage udp_address;
	socklen_t udp_address_len;
};

/* How the workers' listeners share new connections: a client address's
 * to one worker (the default), or each by the kernel's hash. */
enum rockd_spread { ROCKD_SPREAD_ADDRESS, ROCKD_SPREAD_CONNECTION };

/* Half-open handshakes cost memory: beyond this many, new ones are
 * refused (and routed reconnects reset). */
#define ROCKD_MAX_HANDSHAKES 4096

/* Workers: how long they may take to listen (or to take a predecessor's
 * share over) before the start fails. */
#define ROCKD_WORKERS_START_MS 30000

/* node N: a fleet's nodes are numbered 1 to this (a connection id's
 * byte names one). */
#define ROCKD_MAX_NODE 255

/* A sibling whose checks have failed this long is gone: the rocks whose
 * reconnects reach us for its sessions are told so (fleet.c). */
#define ROCKD_NODE_GONE_MS 10000

struct rockd_sibling;
/* The siblings watched, once the engine is up; 0 or -1 (errno). */
int rockd_fleet_start(struct rockd *d);
void rockd_fleet_stop(struct rockd *d);

/* workers N: at most this many (the connection id's byte names one). */
#define ROCKD_MAX_WORKERS 64

/* What rockd counts itself, for the metrics endpoint (the engine counts
 * the rest, rock_engine_stats); they only grow. Index: the direction. */
enum { ROCKD_TO_BACKEND, ROCKD_TO_CLIENT };
struct rockd_counters {
	uint64_t rock_bytes[2];		/* taken from one side of a rock for the other */
	uint64_t plain_bytes[2];	/* the same for plain relays */
	unsigned long refused_busy;	/* rock clients refused before their handshake */
	unsigned long late_rocks;	/* hellos after the sniff took a plain client */
};

/* One worker's figures for the metrics (metrics.c). */
struct rockd_snap {
	struct rock_engine_stats st;	/* BUSY refusals included */
	struct rockd_counters n;
	uint64_t connected, suspended, handshaking, relays, ring;
};

struct rockd_relay;
struct rockd_rock;
struct rockd_handover;
struct rockd_metrics;

struct rockd {
	struct event_base *base;
	struct rock_log log;
	struct rock_config log_cfg;	/* holds the log's settings */
	struct rockd_config cfg;
	const char *config_path;	/* NULL: services from the command line */
	struct rockd_relay *relays;	/* live plain relays, for graceful stop */
	struct rockd_rock *rocks;	/* live rock sessions */
	struct rock_engine *engine;
	size_t max_rocks;		/* sessions before eviction or BUSY */
	struct rock_engine_config engine_cfg;
	int stopping;
	int fast_open_told;		/* the host's Fast Open setting, logged */
	int steer_told;			/* the steering program refused, logged */
	int spread;			/* enum rockd_spread, from the start */
	struct rock_identity ident;	/* from the key file, until the engine has it */
	struct event *sig_term, *sig_int, *sig_hup, *sig_usr2;
	struct event *drain;		/* SIGTERM: cuts what is left, in time */
	struct event *heap_trim;	/* heap.c: freed pages back, now and then */
	long drain_opt_s;		/* --drain-timeout; -1: the file's */
	int64_t drain_deadline_ms;
	size_t nsniffs;			/* connections whose first bytes are awaited */
	/* USR2 (handover.c): the binary and arguments the successor is
	 * started with, and where; resolved at start. */
	char exe[PATH_MAX];
	char start_cwd[PATH_MAX];
	char **argv;
	struct rockd_handover *ho;	/* a hand-over in progress */
	int handed_over;		/* the successor has everything: exit */
	const char *pidfile;		/* -p or the file's; NULL: none */
	struct rockd_counters n;
	struct rockd_metrics *metrics;	/* the endpoint; NULL: none */
	const char *metrics_opt;	/* --metrics, over the file's */
	int session;			/* --session: started over ssh for a user */
	long idle_timeout_s;		/* --session: exit without a session */
	struct event *idle;		/* --session: the idle bound */
	long persist_s;			/* --session: stay after the last session */
	int sessions_seen;		/* --session: a session came and went */
	struct rock_ctl *ctl;		/* the control socket; NULL: none */
	/* Workers (workers.c): this process is worker `worker` of
	 * `nworkers` (1: rockd is one process, no master). Each worker's
	 * inbox takes reconnects its siblings accepted for its sessions:
	 * inbox_tx[k] sends to worker k, inbox_rx is ours. */
	int nworkers, worker;
	/* A fleet's node (1 to 255; 0: none) and the announcement every
	 * node with our key makes (rock_fleet_announcement). */
	int node;
	uint8_t fleet_random[ROCK_ANNOUNCE_RANDOM];
	struct rockd_sibling **siblings; /* by node number; NULL: no peers */
	struct event *sibling_timer;	/* checks of those not yet seen */
	/* The peer lines read at start (a reload's are not taken): ours. */
	struct rockd_peer *peers;
	int *inbox_tx, inbox_rx;
	struct event *inbox_ev;
	int ready_fd;			/* told "started" (a byte), then closed */
	int commit_fd;			/* a successor's worker: its master's verdict */
	/* A successor's: the predecessor's channels, one per worker (-1 once
	 * the master has passed them on to its workers). */
	int *takeover_fds, ntakeover;
	int detached;			/* workers without -F: in the background */
	sigset_t sigmask;		/* a worker's, once its handlers are set */
	struct rock_log_limit inbox_log;	/* lost or unpassed reconnects */
	struct rock_ticket_store *tickets;	/* the workers' ticket keys */
	/* The early flights admitted, the workers' (made before they fork)
	 * or our own: rock_strike_new. */
	struct rock_strike *strike;
	struct rockd_board *board;	/* the workers' published figures */
	struct event *publish;		/* a worker's, now and then */
};

/* Workers (workers.c): with nworkers > 1, the master process: starts the
 * workers, each running run_worker(d, k), and stays until they end;
 * returns the exit status. */
typedef int (*rockd_worker_fn)(struct rockd *d, void *arg);
int rockd_workers_run(struct rockd *d, int foreground, int successor,
    rockd_worker_fn run, void *arg);
/* In a worker: take routed reconnects from the inbox (0, or -1 logged),
 * and tell the master the worker is up. */
int rockd_worker_inbox_start(struct rockd *d);
void rockd_worker_ready(struct rockd *d);
/* In a worker, once its loop's handlers are there: the signals the
 * master blocked before it forked, unblocked. */
void rockd_worker_signals(struct rockd *d);
/* A successor's worker that holds everything: told its master, then
 * whether all workers do (0: acknowledge; -1: give up). */
int rockd_worker_commit(struct rockd *d);
/* The master, on SIGHUP: the file again, for the workers it starts later
 * (main.c). */
void rockd_config_reread(struct rockd *d);
void rockd_worker_inbox_stop(struct rockd *d);
/* What worker k last published for the metrics (zeros before it did). */
void rockd_worker_snap_read(const struct rockd *d, int k, struct rockd_snap *sn);
/* The announcement's random part all the workers share (in the board):
 * what a worker started later takes, what a successor's worker adopted. */
uint8_t *rockd_workers_announcement(struct rockd *d);

/* The control socket (rock.c): "ls" and "kill ID" for the sessions, at
 * path (NULL: none); stop removes its name unless a successor took it. */
int rockd_control_start(struct rockd *d, const char *path, int successor);
void rockd_control_stop(struct rockd *d);

/* Configuration: parse a file; on error print "FILE:LINE: problem" into
 * err and return -1. */
int rockd_config_load(struct rockd_config *cfg, const char *path,
    char *err, size_t errlen);
/* The same from an open file, named path in the messages. */
int rockd_config_read(struct rockd_config *cfg, FILE *f, const char *path,
    char *err, size_t errlen);
/* One service from --listen/--backend. */
int rockd_config_add(struct rockd_config *cfg, const char *listen,
    const char *backend, char *err, size_t errlen);
void rockd_config_free(struct rockd_config *cfg);
/* The metrics endpoint's "ADDR:PORT" (an address is required); -1 + err. */
int rockd_config_metrics(struct rockd_config *cfg, const char *spec,
    char *err, size_t errlen);
/* -1 + err when the endpoint takes a service's port. */
int rockd_config_metrics_check(const struct rockd_config *cfg, char *err,
    size_t errlen);

/* The server key (key.c): path, the option's or the config's, else the
 * default; loaded (test: only checked, never created) into d->ident.
 * 0, or -1 with "FILE: problem" on stderr. */
int rockd_key_load(struct rockd *d, const char *path, int test);

/* Listeners: start every service, or move live ones over to a new config. */
int rockd_services_start(struct rockd *d, struct rockd_config *cfg);
/* Workers' master, at a start: 0, or -1 (logged) where a service's
 * address or a worker's UDP port cannot be bound alone. */
int rockd_services_unclaimed(struct rockd *d, const struct rockd_config *cfg);
/* On a listener of a group of nworkers (SO_REUSEPORT): each client
 * address's connections to one of them (steer.c); 0 or -errno. */
int rockd_steer_attach(int fd, int nworkers);
/* The group's program removed, if it has one; 0 or -errno. */
int rockd_steer_detach(int fd);
/* Our steering (spread) set again on every listener (service.c). */
void rockd_services_steer(struct rockd *d);
void rockd_services_stop(struct rockd_config *cfg);
int rockd_services_reload(struct rockd *d, struct rockd_config *next);

/* A plain relay between an accepted client and a new backend connection;
 * `early` holds bytes already read from the client. */
void rockd_relay_start(struct rockd *d, const struct rockd_backend *b,
    evutil_socket_t client, const uint8_t *early, size_t nearly);
/* Decide from the first bytes: probe, rock handshake, reconnect or plain. */
void rockd_sniff_start(struct rockd *d, const struct rockd_service *svc,
    evutil_socket_t client);
/* A rock client's handshake reached the hello: connect its backend. */
void rockd_rock_start(struct rockd *d, const struct rockd_backend *b,
    struct rock_handshake *hs);
/* The last relay or rock is gone while stopping: end the loop. */
void rockd_maybe_done(struct rockd *d);
/* SIGTERM's bound: the client and the backend of every relay, and of
 * every rock (all) or of those suspended (they cannot come back: the
 * listeners are closed), get a reset, never a clean end. */
void rockd_relays_cut(struct rockd *d);
void rockd_rocks_cut(struct rockd *d, int all);
size_t rockd_relays_dialing(const struct rockd *d);
size_t rockd_rocks_dialing(const struct rockd *d);
/* For the metrics: relays open; rocks by state and the bytes their rings
 * hold for replay. */
size_t rockd_relays_count(const struct rockd *d);
void rockd_rocks_count(const struct rockd *d, size_t *connected,
    size_t *suspended, uint64_t *ring);

/* The hand-over channel (chan.c): a message is a type, descriptors
 * (SCM_RIGHTS) and a body, each read or write bounded by timeout_ms. */
#define ROCKD_CHAN_MAXFDS 4
enum rockd_msg_type {
	ROCKD_MSG_HELLO = 1,	/* successor: its configuration loaded */
	ROCKD_MSG_LISTENER,	/* a listening socket; body: its address */
	ROCKD_MSG_ENGINE,	/* the UDP socket; body: the engine's record */
	ROCKD_MSG_ROCK,		/* backend [, client]; body: rock.c's record */
	ROCKD_MSG_RELAY,	/* client, backend; body: relay.c's record */
	ROCKD_MSG_END,		/* body: how many messages came before */
	ROCKD_MSG_ACK,		/* successor: it holds everything now */
	ROCKD_MSG_FAIL		/* successor: body says why it gives up */
};
struct rockd_msg {
	uint32_t type;
	int fds[ROCKD_CHAN_MAXFDS];
	int nfds;
	uint8_t *body;
	size_t len;
};
int64_t rockd_now_ms(void);	/* CLOCK_MONOTONIC */
#define CHAN_SEND_TIMEOUT_MS 10000
int rockd_chan_send_export(struct rockd *d, int chan, uint32_t type, int e,
    struct evbuffer *body, const int *fds, int nfds, const char *what,
    unsigned *sent, unsigned *left);
/* The most a bufferevent of rockd's writes in one turn of the loop. */
#define ROCKD_WRITE_MAX (256 * 1024)
struct bufferevent *rockd_bufferevent(struct event_base *base, evutil_socket_t fd);
int rockd_chan_send(int fd, uint32_t type, const int *fds, int nfds,
    struct evbuffer *body, int timeout_ms);
int rockd_chan_recv(int fd, struct rockd_msg *msg, int timeout_ms);
void rockd_msg_free(struct rockd_msg *msg);
void rockd_chan_close_fds(int *fds, int nfds);

/* USR2 (handover.c): start the successor; hand everything over once it
 * loaded its configuration, or keep serving. */
void rockd_handover_start(struct rockd *d);
void rockd_handover_abort(struct rockd *d, const char *why);
/* The hand-over on a channel made already: a worker's, its successor
 * started by the master (pid 0), or the lone rockd's (its child). */
void rockd_handover_begin(struct rockd *d, int chan, pid_t pid);
/* In a forked child: exec the successor with the channels (one per
 * worker, in order) from fd 3 on, named in ROCKD_HANDOVER_FD. */
void rockd_exec_successor(const struct rockd *d, const int *chans, int n)
    __attribute__((noreturn));
/* The successor's side: 0 with everything adopted, else -1 (logged, and
 * the predecessor told so it keeps serving). */
int rockd_takeover(struct rockd *d, int chan);
/* Each rock's and relay's record and descriptors onto the channel;
 * *left counts those mid-way through their first exchange (not sent). */
int rockd_rocks_send(struct rockd *d, int chan, unsigned *sent, unsigned *left);
int rockd_relays_send(struct rockd *d, int chan, unsigned *sent, unsigned *left);
/* After the successor's acknowledgement: free them, closing our copies of
 * the descriptors (no shutdown, no reset: the successor's sockets). */
void rockd_rocks_release(struct rockd *d);
void rockd_relays_release(struct rockd *d);
/* From a message: 0, the descriptors taken (set to -1); else an error. */
int rockd_rock_import(struct rockd *d, struct rockd_msg *msg);
int rockd_relay_import(struct rockd *d, struct rockd_msg *msg);
/* Stop taking connections for a moment (1) or again (0): they queue. */
void rockd_services_pause(struct rockd_config *cfg, int paused);
/* Our process id into d->pidfile, if any: 0, or -1 logged. */
int rockd_pidfile_write(struct rockd *d);
/* The engine on the first service's address, or on a handed-over UDP
 * socket (udp_fd >= 0, the engine's on success). */
int rockd_engine_start(struct rockd *d, int udp_fd);
/* Listeners: adopt handed-over sockets whose address a service names. */
int rockd_services_adopt(struct rockd *d, struct rockd_config *cfg,
    struct rockd_msg *listeners, size_t n);

/* The metrics endpoint (metrics.c): listen on cfg's address, or on the
 * handed-over listener of that address among ls (USR2's successor), and
 * serve GET /metrics. 0, or -1 logged. */
int rockd_metrics_start(struct rockd *d, struct rockd_msg *ls, size_t n);
/* This process's figures now. */
void rockd_metrics_snap(const struct rockd *d, struct rockd_snap *sn);
/* Its listener for the hand-over, or -1. */
int rockd_metrics_fd(const struct rockd *d);
/* SIGHUP: move to next's address, or keep the socket if it is the same. */
int rockd_metrics_reload(struct rockd *d, const struct rockd_config *next);
void rockd_metrics_stop(struct rockd *d);

/* heap.c */
int rockd_heap_start(struct rockd *d);
void rockd_heap_stop(struct rockd *d);

/* --session: one service on an ephemeral port in front of backend
 * (NULL: the sshd of SSH_CONNECTION, else the default) (conf.c); the
 * announcement on stdout and the idle bound, once listening; exit when
 * the last session ended (session.c). */
#define ROCKD_SESSION_IDLE_S 60
#define ROCKD_SESSION_PERSIST_MAX_S 86400
/* Set by sshd: the default backend of a session is the sshd it came by. */
#define ROCKD_SSH_CONNECTION_ENV "SSH_CONNECTION"
int rockd_session_config(struct rockd_config *cfg, const char *backend,
    char *err, size_t errlen);
int rockd_session_announce(struct rockd *d);
/* --session: a probe was answered; the exit waits a little longer. */
void rockd_session_probed(struct rockd *d);
void rockd_session_ended(struct rockd *d);
void rockd_session_free(struct rockd *d);

/* A relay forwards what arrives at once: Nagle's wait belongs to the
 * endpoints, whose own settings rockd cannot see. */
void rockd_no_delay(evutil_socket_t fd);

/* "auto" (*out 0) or a number of workers; 0 or -1. */
int rockd_parse_workers(const char *s, long *out);
/* How a hand-over's successor ended (its wait status), into buf. */
const char *rockd_handover_ended(int st, char *buf, size_t len);
/* "address" or "connection" into *out (enum rockd_spread); 0 or -1. */
int rockd_parse_spread(const char *s, int *out);
/* Address text "[ADDR:]PORT" or "HOST:PORT" into a sockaddr; -1 + err. */
int rockd_parse_addr(const char *spec, int passive, struct sockaddr_storage *ss,
    socklen_t *len, char *err, size_t errlen);
/* An address's port, host order; and a new one into it. */
int rockd_addr_port(const struct sockaddr_storage *a);
void rockd_addr_set_port(struct sockaddr_storage *a, int port);
/* 0.0.0.0, :: or ::ffff:0.0.0.0: no address a peer can send to. */
int rockd_addr_unspecified(const struct sockaddr_storage *a);
/* Two listen addresses that bind(2) would not both take. */
int rockd_addr_overlap(const struct sockaddr_storage *a,
    const struct sockaddr_storage *b);

#endif
