/* service.c: rockd's listeners: start, stop, and carry over on reload. */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "rockd.h"

static void
accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
    int len, void *arg)
{
	struct rockd_service *svc = arg;

	(void)l;
	(void)sa;
	(void)len;
	rockd_relay_start(svc->daemon, svc, fd, NULL);
}

/* Too many open files and the like: log, keep serving the others. */
static void
accept_error_cb(struct evconnlistener *l, void *arg)
{
	struct rockd_service *svc = arg;

	(void)l;
	rlog_error(&svc->daemon->log, "%s: accept: %s", svc->listen_spec,
	    strerror(errno));
}

static int
start_one(struct rockd *d, struct rockd_service *s)
{
	s->daemon = d;
	s->listener = evconnlistener_new_bind(d->base, accept_cb, s,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC,
	    1024, (struct sockaddr *)&s->listen_addr, (int)s->listen_len);
	if (s->listener == NULL) {
		rlog_error(&d->log, "%s: cannot listen: %s", s->listen_spec,
		    strerror(errno));
		return -1;
	}
	evconnlistener_set_error_cb(s->listener, accept_error_cb);
	rlog_info(&d->log, "listening on %s, backend %s", s->listen_spec,
	    s->backend_spec);
	return 0;
}

int
rockd_services_start(struct rockd *d, struct rockd_config *cfg)
{
	struct rockd_service *s;

	for (s = cfg->services; s != NULL; s = s->next)
		if (start_one(d, s) != 0)
			return -1;
	return 0;
}

void
rockd_services_stop(struct rockd_config *cfg)
{
	struct rockd_service *s;

	for (s = cfg->services; s != NULL; s = s->next) {
		if (s->listener != NULL)
			evconnlistener_free(s->listener);
		s->listener = NULL;
	}
}

static struct rockd_service *
find_same_listen(struct rockd_config *cfg, const struct rockd_service *want)
{
	struct rockd_service *s;

	for (s = cfg->services; s != NULL; s = s->next)
		if (s->listener != NULL && s->listen_len == want->listen_len &&
		    memcmp(&s->listen_addr, &want->listen_addr,
		    want->listen_len) == 0)
			return s;
	return NULL;
}

/* A listener whose address stays keeps its socket, so no connection
 * attempt is refused during a reload; live relays never depend on it. */
int
rockd_services_reload(struct rockd *d, struct rockd_config *next)
{
	struct rockd_service *s, *old;
	int failed = 0;

	for (s = next->services; s != NULL; s = s->next) {
		s->daemon = d;
		if ((old = find_same_listen(&d->cfg, s)) != NULL) {
			s->listener = old->listener;
			old->listener = NULL;
			evconnlistener_set_cb(s->listener, accept_cb, s);
			evconnlistener_set_error_cb(s->listener, accept_error_cb);
			rlog_info(&d->log, "%s: kept, backend %s", s->listen_spec,
			    s->backend_spec);
		} else if (start_one(d, s) != 0) {
			failed = 1;
		}
	}
	rockd_services_stop(&d->cfg);
	rockd_config_free(&d->cfg);
	d->cfg = *next;
	return failed ? -1 : 0;
}
