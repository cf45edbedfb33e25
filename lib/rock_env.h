/* rock_env.h: every environment variable rocks reads, named in one place. */
#ifndef ROCK_ENV_H
#define ROCK_ENV_H

/* The fixed interface of DESIGN.md; a ROCK_* variable wins over its DD_* twin. */
#define ROCK_ENV_MODE			"ROCK_MODE"
#define ROCK_ENV_KEEPALIVE_TIME		"ROCK_KEEPALIVE_TIME"
#define ROCK_ENV_KEEPALIVE_INTVL	"ROCK_KEEPALIVE_INTVL"
#define ROCK_ENV_KEEPALIVE_PROBES	"ROCK_KEEPALIVE_PROBES"
#define ROCK_ENV_USER_TIMEOUT_MS	"ROCK_USER_TIMEOUT_MS"
#define ROCK_ENV_DEBUG			"ROCK_DEBUG"
#define ROCK_ENV_LOG			"ROCK_LOG"

/* Transparent rocks (ROCK_MODE=rock). */
#define ROCK_ENV_PORT_MAP		"ROCK_PORT_MAP"
#define ROCK_ENV_PROBE_TIMEOUT_MS	"ROCK_PROBE_TIMEOUT_MS"
#define ROCK_ENV_LINGER_MS		"ROCK_LINGER_MS"
#define ROCK_ENV_SUSPEND_TIMEOUT	"ROCK_SUSPEND_TIMEOUT"
/* 1 (default): a TCP listener under rock accepts rocks itself
 * (lib/shim/listener.c); 0: its connections are all plain TCP. */
#define ROCK_ENV_SERVE			"ROCK_SERVE"
/* Connections a served listener holds in progress (first bytes, rock
 * handshakes) before the oldest is dropped (lib/shim/park.c). */
#define ROCK_ENV_SERVE_HANDSHAKES	"ROCK_SERVE_HANDSHAKES"
#define ROCK_SERVE_HANDSHAKES_DEFAULT	64
/* 0: a resumption waits for the server's answer before the program's
 * first bytes go (no CLIENT_EARLY, doc/PROTOCOL.md 2.9); 1 (default):
 * they go at once where the server offers it. */
#define ROCK_ENV_EARLY			"ROCK_EARLY"
/* The probe cache shared by the user's processes ("": none); by default
 * in the runtime directory, else in /tmp/rock-UID. */
#define ROCK_ENV_PROBE_CACHE		"ROCK_PROBE_CACHE"
#define XDG_ENV_RUNTIME_DIR		"XDG_RUNTIME_DIR"

/* rock ssh: seconds a session rockd it starts stays after its last
 * session, for the next rock ssh to the host (rockd --persist). */
#define ROCK_ENV_SSH_PERSIST		"ROCK_SSH_PERSIST"
/* Set by rock ssh for ssh: the memo of the session rockd that ssh is
 * pinned to, forgotten if what answers there fails to prove the key. */
#define ROCK_ENV_SSH_MEMO		"ROCK_SSH_MEMO"

/* Server keys (doc/PROTOCOL.md 2.4): the known-servers file, a pinned
 * key, and taking a changed key once. */
#define ROCK_ENV_KNOWN_SERVERS		"ROCK_KNOWN_SERVERS"
#define ROCK_ENV_SERVER_KEY		"ROCK_SERVER_KEY"
#define ROCK_ENV_ACCEPT_NEW_KEY		"ROCK_ACCEPT_NEW_KEY"
/* Where the known-servers file is by default: the XDG config directory. */
#define XDG_ENV_CONFIG_HOME		"XDG_CONFIG_HOME"
#define HOME_ENV			"HOME"

/* libdontdie's variables, with libdontdie's meanings. */
#define DD_ENV_DEBUG			"DD_DEBUG"
#define DD_ENV_KEEPALIVE_TIME		"DD_TCP_KEEPALIVE_TIME"
#define DD_ENV_KEEPALIVE_INTVL		"DD_TCP_KEEPALIVE_INTVL"
#define DD_ENV_KEEPALIVE_PROBES		"DD_TCP_KEEPALIVE_PROBES"
#define DD_ENV_USE_KEEPALIVE		"DD_USE_KEEPALIVE"
#define DD_ENV_EVAL_ENVIRONMENT_ONCE	"DD_EVAL_ENVIRONMENT_ONCE"

/* Set by the rock wrapper only, never by users: where librock.so lives. */
#define LD_ENV_PRELOAD			"LD_PRELOAD"

#endif
