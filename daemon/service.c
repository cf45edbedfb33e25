/* service.c: rockd's listeners: start, stop, and carry over on reload. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include "rockd.h"

static void
accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
    int len, void *arg)
{
	struct rockd_service *svc = arg;

	(void)l;
	(void)sa;
	(void)len;
	rockd_sniff_start(svc->daemon, svc, fd);
}

static void
accept_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct rockd_service *svc = arg;

	(void)fd;
	(void)what;
	if (svc->listener != NULL)
		evconnlistener_enable(svc->listener);
}

/* Out of descriptors or memory the pending connection stays queued and
 * accept fails again at once: pause this listener for a second instead of
 * spinning, and keep serving everything else. */
static void
accept_error_cb(struct evconnlistener *l, void *arg)
{
	struct rockd_service *svc = arg;
	struct timeval pause = { 1, 0 };
	int err = errno;

	rlog_error(&svc->daemon->log, "%s: accept: %s%s", svc->listen_spec,
	    strerror(err), err == EMFILE || err == ENFILE || err == ENOBUFS ||
	    err == ENOMEM ? "; pausing this listener for 1 s" : "");
	if (err != EMFILE && err != ENFILE && err != ENOBUFS && err != ENOMEM)
		return;
	if (svc->accept_retry == NULL)
		svc->accept_retry = evtimer_new(svc->daemon->base,
		    accept_retry_cb, svc);
	if (svc->accept_retry == NULL)
		return;
	evconnlistener_disable(l);
	evtimer_add(svc->accept_retry, &pause);
}

/* TCP Fast Open lets a reconnect's request (and a new rock's hello) ride
 * in the SYN: one round trip fewer. The kernel takes it only where the
 * host allows servers to (net.ipv4.tcp_fastopen has bit 2): said once. */
static void
fast_open(struct rockd *d, evutil_socket_t fd)
{
	int qlen = 1024, mode = 0;
	FILE *f;

	(void)setsockopt(fd, IPPROTO_TCP, TCP_FASTOPEN, &qlen, sizeof(qlen));
	if (d->fast_open_told++)
		return;
	if ((f = fopen("/proc/sys/net/ipv4/tcp_fastopen", "re")) != NULL) {
		if (fscanf(f, "%d", &mode) != 1)
			mode = 0;
		fclose(f);
	}
	if (!(mode & 2))
		rlog_info(&d->log, "TCP Fast Open is off for servers on this host "
		    "(net.ipv4.tcp_fastopen=%d): reconnects take one round trip "
		    "more; sysctl net.ipv4.tcp_fastopen=3 turns it on", mode);
}

/* Workers, spread address: a client's connections to one worker, not
 * spread by the kernel's hash of the ports: its rocks then share a
 * control group (one heartbeat), and its reconnects need no passing on.
 * Without the program, every worker still serves: said once a worker.
 * The program belongs to the listener's whole group and outlives the
 * socket that set it, so a listener taken over, or kept after a failed
 * hand-over, gets ours set or removed (`adopted`); a new one needs only
 * the attach (removal is not on kernels before 5.3). */
static void
steer(struct rockd *d, struct rockd_service *s, int adopted)
{
	int fd = evconnlistener_get_fd(s->listener), r = 0;
	const char *what = "steer clients to workers by address";

	if (d->nworkers <= 1)
		return;
	if (d->spread == ROCKD_SPREAD_ADDRESS) {
		r = rockd_steer_attach(fd, d->nworkers);
	} else if (adopted) {
		r = rockd_steer_detach(fd);
		what = "remove the steering program";
	}
	if (r != 0 && !d->steer_told++)
		rlog_warn(&d->log, "%s: cannot %s (%s): %s", s->listen_spec,
		    what, strerror(-r), d->spread == ROCKD_SPREAD_ADDRESS ?
		    "the kernel's hash spreads them, and a client's idle rocks "
		    "cost a heartbeat per worker" : "a predecessor's steering "
		    "by address stays");
}

/* After a hand-over that failed: the successor may have set its own. */
void
rockd_services_steer(struct rockd *d)
{
	struct rockd_service *s;

	for (s = d->cfg.services; s != NULL; s = s->next)
		if (s->listener != NULL)
			steer(d, s, 1);
}

static int
start_one(struct rockd *d, struct rockd_service *s)
{
	s->daemon = d;
	/* Workers: each its own listener on the address (steer()). */
	s->listener = evconnlistener_new_bind(d->base, accept_cb, s,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC |
	    (d->nworkers > 1 ? LEV_OPT_REUSEABLE_PORT : 0),
	    1024, (struct sockaddr *)&s->listen_addr, (int)s->listen_len);
	if (s->listener == NULL) {
		rlog_error(&d->log, "%s: cannot listen: %s", s->listen_spec,
		    strerror(errno));
		return -1;
	}
	evconnlistener_set_error_cb(s->listener, accept_error_cb);
	fast_open(d, evconnlistener_get_fd(s->listener));
	steer(d, s, 0);
	rlog_info(&d->log, "listening on %s, backend %s", s->listen_spec,
	    s->backend.spec);
	return 0;
}

/* bind(2) of ADDR alone, as a lone rockd's socket would (TCP with
 * SO_REUSEADDR, UDP bare): 0 or an errno; a socket that cannot be made
 * is left to the worker's own bind to report. */
static int
bind_alone(int type, const struct sockaddr_storage *addr, socklen_t len)
{
	int fd = socket(addr->ss_family, type | SOCK_CLOEXEC, 0), one = 1;
	int err = 0;

	if (fd < 0)
		return 0;
	if (type == SOCK_STREAM)
		(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)addr, len) != 0)
		err = errno;
	close(fd);
	return err;
}

/* Workers share each address (SO_REUSEPORT), and so would another
 * rockd of this user's on it: it would join the group, and a program it
 * set would stay with it. At a start, the master first binds each
 * address alone, and each worker's UDP port (the first service's port
 * + k, a range workers auto grows with the CPUs), and fails where it
 * cannot: one line, not one a worker. */
int
rockd_services_unclaimed(struct rockd *d, const struct rockd_config *cfg)
{
	const struct rockd_service *s, *first = cfg->services;
	struct sockaddr_storage udp;
	int err, k, port;

	for (s = cfg->services; s != NULL; s = s->next)
		if ((err = bind_alone(SOCK_STREAM, &s->listen_addr,
		    s->listen_len)) != 0) {
			rlog_error(&d->log, "%s: cannot listen: %s",
			    s->listen_spec, strerror(err));
			return -1;
		}
	for (k = 0; first != NULL && k < d->nworkers; k++) {
		udp = first->listen_addr;
		port = rockd_addr_port(&udp) + k;
		rockd_addr_set_port(&udp, port);
		if ((err = bind_alone(SOCK_DGRAM, &udp, first->listen_len)) != 0) {
			rlog_error(&d->log, "%s: UDP port %d, worker %d's control "
			    "channel (the port + %d): %s; free it, or set workers",
			    first->listen_spec, port, k, k, strerror(err));
			return -1;
		}
	}
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
		if (s->accept_retry != NULL)
			event_free(s->accept_retry);
		s->accept_retry = NULL;
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
			/* if paused, the old service's retry timer goes with it */
			evconnlistener_enable(s->listener);
			rlog_info(&d->log, "%s: kept, backend %s", s->listen_spec,
			    s->backend.spec);
		} else if (start_one(d, s) != 0) {
			failed = 1;
		}
	}
	rockd_services_stop(&d->cfg);
	rockd_config_free(&d->cfg);
	d->cfg = *next;
	return failed ? -1 : 0;
}

void
rockd_services_pause(struct rockd_config *cfg, int paused)
{
	struct rockd_service *s;

	for (s = cfg->services; s != NULL; s = s->next) {
		if (s->listener == NULL)
			continue;
		if (paused)
			evconnlistener_disable(s->listener);
		else
			evconnlistener_enable(s->listener);
	}
}

static int
adopt_one(struct rockd *d, struct rockd_service *s, struct rockd_msg *l)
{
	s->listener = evconnlistener_new(d->base, accept_cb, s,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, l->fds[0]);
	if (s->listener == NULL) {
		rlog_error(&d->log, "%s: cannot take the listener over: %s",
		    s->listen_spec, strerror(errno));
		return -1;
	}
	l->fds[0] = -1;
	evconnlistener_set_error_cb(s->listener, accept_error_cb);
	steer(d, s, 1);
	rlog_info(&d->log, "listening on %s (taken over), backend %s",
	    s->listen_spec, s->backend.spec);
	return 0;
}

/* USR2's successor: a service whose address the predecessor listened on
 * takes that socket, with the connections queued on it; others start. */
int
rockd_services_adopt(struct rockd *d, struct rockd_config *cfg,
    struct rockd_msg *ls, size_t n)
{
	struct rockd_service *s;
	size_t i;

	for (s = cfg->services; s != NULL; s = s->next) {
		s->daemon = d;
		for (i = 0; i < n; i++)
			if (ls[i].fds[0] >= 0 && ls[i].len == s->listen_len &&
			    memcmp(ls[i].body, &s->listen_addr, ls[i].len) == 0)
				break;
		if (i < n ? adopt_one(d, s, &ls[i]) != 0 : start_one(d, s) != 0)
			return -1;
	}
	return 0;
}
