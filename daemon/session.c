/* session.c: rockd --session: a per-user rockd started over ssh, announced on stdout, gone with its last session or --persist seconds after it. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <netinet/in.h>

#include "rock_config.h"
#include "rock_known.h"
#include "rockd.h"

/* A connection being told apart or shaking hands may be the next
 * session: look again this soon rather than cut it. */
#define SESSION_BUSY_RETRY_S 1
/* A probe answered means a client is about to connect: the window left
 * is made at least this long. */
#define SESSION_PROBE_GRACE_S 30

static void
session_idle(evutil_socket_t fd, short what, void *arg)
{
	struct rockd *d = arg;
	struct timeval retry = { SESSION_BUSY_RETRY_S, 0 };

	(void)fd;
	(void)what;
	/* Their ends call rockd_session_ended, which arms the timer again. */
	if (d->rocks != NULL || d->relays != NULL)
		return;
	if (d->nsniffs > 0 || rock_engine_nhandshakes(d->engine) > 0) {
		evtimer_add(d->idle, &retry);
		return;
	}
	if (d->sessions_seen)
		rlog_info(&d->log, "session: no new session within %ld s of "
		    "the last; exiting", d->persist_s);
	else
		rlog_info(&d->log, "session: no session within %ld s; exiting",
		    d->idle_timeout_s);
	event_base_loopbreak(d->base);
}

void
rockd_session_probed(struct rockd *d)
{
	struct timeval grace = { SESSION_PROBE_GRACE_S, 0 }, at, now;

	if (!d->session || d->idle == NULL || d->rocks != NULL ||
	    d->relays != NULL || d->stopping)
		return;
	if (evtimer_pending(d->idle, &at) &&
	    event_base_gettimeofday_cached(d->base, &now) == 0 &&
	    at.tv_sec - now.tv_sec >= SESSION_PROBE_GRACE_S)
		return;
	evtimer_add(d->idle, &grace);
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
