/* rockd.h: what rockd's files share: services, the daemon object, relays. */
#ifndef ROCKD_H
#define ROCKD_H

#include <stdio.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "rock_engine.h"
#include "rock_log.h"

#define ROCKD_DEFAULT_SNIFF_MS 300
/* With no service given: front the local sshd (librock maps port 22 here). */
#define ROCKD_DEFAULT_LISTEN "4022"
#define ROCKD_DEFAULT_BACKEND "127.0.0.1:22"

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

struct rockd_config {
	struct rockd_service *services;
	char pidfile[256];
	long suspend_timeout_s;		/* -1: the engine's default */
	long max_rocks;			/* -1: from the descriptor limit */
};

struct rockd_relay;
struct rockd_rock;

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
	struct event *sig_term, *sig_int, *sig_hup, *grace;
};

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

/* Listeners: start every service, or move live ones over to a new config. */
int rockd_services_start(struct rockd *d, struct rockd_config *cfg);
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
void rockd_rocks_stop(struct rockd *d);
/* The last relay or rock is gone while stopping: end the loop. */
void rockd_maybe_done(struct rockd *d);
/* Ask every relay to finish: flush and half-close both ways. */
void rockd_relays_stop(struct rockd *d);

/* A relay forwards what arrives at once: Nagle's wait belongs to the
 * endpoints, whose own settings rockd cannot see. */
void rockd_no_delay(evutil_socket_t fd);

/* Address text "[ADDR:]PORT" or "HOST:PORT" into a sockaddr; -1 + err. */
int rockd_parse_addr(const char *spec, int passive, struct sockaddr_storage *ss,
    socklen_t *len, char *err, size_t errlen);
/* Two listen addresses that bind(2) would not both take. */
int rockd_addr_overlap(const struct sockaddr_storage *a,
    const struct sockaddr_storage *b);

#endif
