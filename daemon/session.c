/* session.c: rockd --session: a per-user rockd started over ssh, announced on stdout, gone with its last session. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>

#include "rock_config.h"
#include "rock_known.h"
#include "rockd.h"

/* The sshd that ran us: the server address and port of the ssh
 * connection ("CLIENT CPORT SERVER SPORT"), which that sshd accepted on
 * whatever port or address it listens; else the default. */
static void
sshd_backend(char *out, size_t n)
{
	const char *v = getenv(ROCKD_SSH_CONNECTION_ENV);
	char addr[64];
	unsigned port;

	snprintf(out, n, "%s", ROCKD_DEFAULT_BACKEND);
	if (v == NULL ||
	    sscanf(v, "%*s %*u %63s %u", addr, &port) != 2 ||
	    port == 0 || port > 65535)
		return;
	snprintf(out, n, strchr(addr, ':') != NULL ? "[%s]:%u" : "%s:%u",
	    addr, port);
}

/* An ephemeral port: no configuration line may ask for port 0, so the
 * one service is made with the default and its port cleared here. */
int
rockd_session_config(struct rockd_config *cfg, const char *backend,
    char *err, size_t errlen)
{
	struct rockd_service *s;
	char sshd[128];

	if (backend == NULL)
		sshd_backend(sshd, sizeof(sshd));
	if (rockd_config_add(cfg, ROCKD_DEFAULT_LISTEN, backend != NULL ?
	    backend : sshd, err, errlen) != 0)
		return -1;
	s = cfg->services;
	if (s->listen_addr.ss_family == AF_INET6)
		((struct sockaddr_in6 *)&s->listen_addr)->sin6_port = 0;
	else
		((struct sockaddr_in *)&s->listen_addr)->sin_port = 0;
	snprintf(s->listen_spec, sizeof(s->listen_spec), "an ephemeral port");
	return 0;
}

static void
session_idle(evutil_socket_t fd, short what, void *arg)
{
	struct rockd *d = arg;

	(void)fd;
	(void)what;
	if (d->rocks != NULL || d->relays != NULL || d->nsniffs > 0)
		return;
	rlog_info(&d->log, "session: no session within %ld s; exiting",
	    d->idle_timeout_s);
	event_base_loopbreak(d->base);
}

/* "ROCKD-SESSION 1 PORT KEY" for the client at the other end of ssh,
 * then the idle bound starts. */
int
rockd_session_announce(struct rockd *d)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct timeval tv = { d->idle_timeout_s, 0 };
	char key[ROCK_KEY_TEXT_LEN];
	unsigned port;

	if (getsockname(evconnlistener_get_fd(d->cfg.services->listener),
	    (struct sockaddr *)&ss, &len) != 0) {
		rlog_error(&d->log, "session: getsockname: %s", strerror(errno));
		return -1;
	}
	port = ntohs(ss.ss_family == AF_INET6 ?
	    ((struct sockaddr_in6 *)&ss)->sin6_port :
	    ((struct sockaddr_in *)&ss)->sin_port);
	rock_key_text(rock_engine_identity(d->engine), key);
	if (printf("%s %u %s\n", ROCK_SESSION_TAG, port, key) < 0 ||
	    fflush(stdout) != 0) {
		rlog_error(&d->log, "session: announcing on stdout: %s",
		    strerror(errno));
		return -1;
	}
	rlog_info(&d->log, "session: port %u, backend %s; exiting with the "
	    "last session, or in %ld s without one", port,
	    d->cfg.services->backend.spec, d->idle_timeout_s);
	if ((d->idle = evtimer_new(d->base, session_idle, d)) == NULL ||
	    evtimer_add(d->idle, &tv) != 0) {
		rlog_error(&d->log, "session: cannot set the idle timer");
		return -1;
	}
	return 0;
}

void
rockd_session_ended(struct rockd *d)
{
	if (!d->session || d->stopping || d->relays != NULL || d->rocks != NULL)
		return;
	rlog_info(&d->log, "session: the last session ended; exiting");
	event_base_loopbreak(d->base);
}

void
rockd_session_free(struct rockd *d)
{
	if (d->idle != NULL)
		event_free(d->idle);
	d->idle = NULL;
}
