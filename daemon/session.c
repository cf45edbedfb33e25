/* session.c: rockd --session: a per-user rockd started over ssh, announced on stdout, gone with its last session or --persist seconds after it. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <netinet/in.h>

#include "rock_config.h"
#include "rock_known.h"
#include "rockd.h"

static void
session_idle(evutil_socket_t fd, short what, void *arg)
{
	struct rockd *d = arg;

	(void)fd;
	(void)what;
	if (d->rocks != NULL || d->relays != NULL || d->nsniffs > 0)
		return;
	if (d->sessions_seen)
		rlog_info(&d->log, "session: no new session within %ld s of "
		    "the last; exiting", d->persist_s);
	else
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
	rlog_info(&d->log, "session: port %u, backend %s; exiting %ld s after "
	    "the last session, or in %ld s without one", port,
	    d->cfg.services->backend.spec, d->persist_s, d->idle_timeout_s);
	if ((d->idle = evtimer_new(d->base, session_idle, d)) == NULL ||
	    evtimer_add(d->idle, &tv) != 0) {
		rlog_error(&d->log, "session: cannot set the idle timer");
		return -1;
	}
	return 0;
}

/* The last session ended: exit now, or when --persist has passed with
 * no other (session_idle: a session that came meanwhile keeps it). The
 * next `rock ssh` to this host finds it again without logging in. */
void
rockd_session_ended(struct rockd *d)
{
	struct timeval tv = { d->persist_s, 0 };

	if (!d->session || d->stopping || d->relays != NULL || d->rocks != NULL)
		return;
	d->sessions_seen = 1;
	if (d->persist_s > 0 && d->idle != NULL && evtimer_add(d->idle, &tv) == 0) {
		rlog_info(&d->log, "session: the last session ended; exiting in "
		    "%ld s without another", d->persist_s);
		return;
	}
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
