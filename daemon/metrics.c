/* metrics.c: rockd's counters over HTTP, GET /metrics in the Prometheus text format 0.0.4. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "rockd.h"

/* A collector asks once every few seconds: a few connections at a time,
 * each one small request answered within a bound, and nothing a stranger
 * can make rockd hold for long or in quantity. */
#define METRICS_MAX_CONNS 8
#define METRICS_MAX_REQUEST 4096
#define METRICS_TIMEOUT_S 5

struct metrics_conn {
	struct rockd_metrics *m;
	struct bufferevent *bev;
	struct metrics_conn *prev, *next;
};

struct rockd_metrics {
	struct rockd *d;
	struct evconnlistener *listener;
	struct sockaddr_storage addr;	/* what it listens on, for a reload */
	socklen_t len;
	struct metrics_conn *conns;
	unsigned nconns;
};

/* Label values of enum rock_hs_fail, in its order. */
static const char *const hs_fail_names[ROCK_HS_FAIL_KINDS] = {
	"timeout", "closed", "stale", "malformed", "version", "busy",
	"backend", "error", "ticket", "finished", "late"
};

static const char *const early_names[ROCK_EARLY_VERDICTS] = {
	"admitted", "replay", "clock", "era", "full", "refused"
};

static void
conn_free(struct metrics_conn *c)
{
	struct rockd_metrics *m = c->m;

	bufferevent_free(c->bev);
	if (c->prev != NULL)
		c->prev->next = c->next;
	else
		m->conns = c->next;
	if (c->next != NULL)
		c->next->prev = c->prev;
	m->nconns--;
	free(c);
}

static void
family(struct evbuffer *b, const char *name, const char *type, const char *help)
{
	evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
	    type);
}

static void
sample(struct evbuffer *b, const char *name, int worker, const char *label,
    const char *value, unsigned long long v)
{
	if (label != NULL)
		evbuffer_add_printf(b, "%s{worker=\"%d\",%s=\"%s\"} %llu\n",
		    name, worker, label, value, v);
	else
		evbuffer_add_printf(b, "%s{worker=\"%d\"} %llu\n", name, worker, v);
}

/* A family's samples, one per worker (all of a family together, as the
 * text format wants): the value at offset off of each snapshot. */
#define EACH(b, snaps, n, name, label, value, field) do {		\
	int w_;								\
	for (w_ = 0; w_ < (n); w_++)					\
		sample((b), (name), w_, (label), (value),		\
		    (unsigned long long)(snaps)[w_].field);		\
} while (0)

/* What one worker counts now: gauges counted, counters the engine's and
 * rockd's. */
void
rockd_metrics_snap(const struct rockd *d, struct rockd_snap *sn)
{
	size_t connected, suspended;
	uint64_t ring;

	memset(sn, 0, sizeof(*sn));
	rockd_rocks_count(d, &connected, &suspended, &ring);
	sn->connected = connected;
	sn->suspended = suspended;
	sn->ring = ring;
	sn->handshaking = rock_engine_nhandshakes(d->engine);
	sn->relays = rockd_relays_count(d);
	sn->st = *rock_engine_stats(d->engine);
	sn->n = d->n;
	sn->st.handshake_failed[ROCK_HS_BUSY] += d->n.refused_busy;
	sn->st.handshake_failed[ROCK_HS_LATE] += d->n.late_rocks;
}

static void
render(const struct rockd_snap *sn, int n, struct evbuffer *b)
{
	int i;

	family(b, "rockd_sessions", "gauge", "Rock sessions now, by state.");
	EACH(b, sn, n, "rockd_sessions", "state", "connected", connected);
	EACH(b, sn, n, "rockd_sessions", "state", "suspended", suspended);
	family(b, "rockd_handshakes_in_progress", "gauge", "Rock handshakes and "
	    "reconnects being read or waiting for their backend.");
	EACH(b, sn, n, "rockd_handshakes_in_progress", NULL, NULL, handshaking);
	family(b, "rockd_relays", "gauge", "Plain relays open.");
	EACH(b, sn, n, "rockd_relays", NULL, NULL, relays);
	family(b, "rockd_ring_bytes", "gauge", "Bytes the rocks hold for "
	    "replay: sent to clients, not yet known consumed.");
	EACH(b, sn, n, "rockd_ring_bytes", NULL, NULL, ring);
	family(b, "rockd_handshakes_total", "counter",
	    "Rock handshakes completed.");
	EACH(b, sn, n, "rockd_handshakes_total", NULL, NULL, st.handshakes);
	family(b, "rockd_handshakes_resumed_total", "counter", "Of rock "
	    "handshakes completed, those resumed by a ticket (no key exchange).");
	EACH(b, sn, n, "rockd_handshakes_resumed_total", NULL, NULL, st.resumed);
	family(b, "rockd_early_flights_total", "counter", "Resumptions that "
	    "let the client's first bytes follow (CLIENT_EARLY), by the "
	    "replay register's verdict.");
	for (i = 0; i < ROCK_EARLY_VERDICTS; i++)
		EACH(b, sn, n, "rockd_early_flights_total", "verdict",
		    early_names[i], st.early[i]);
	family(b, "rockd_handshake_failures_total", "counter",
	    "Rock handshakes that ended without a session, by reason.");
	for (i = 0; i < ROCK_HS_FAIL_KINDS; i++)
		EACH(b, sn, n, "rockd_handshake_failures_total", "reason",
		    hs_fail_names[i], st.handshake_failed[i]);
	family(b, "rockd_reconnects_total", "counter", "Authenticated "
	    "reconnects that took a session over.");
	EACH(b, sn, n, "rockd_reconnects_total", NULL, NULL, st.reconnects);
	family(b, "rockd_reconnects_rejected_total", "counter", "Reconnect "
	    "requests refused (unknown session, wrong key, stale, malformed).");
	EACH(b, sn, n, "rockd_reconnects_rejected_total", NULL, NULL,
	    st.reconnect_rejected);
	family(b, "rockd_reconnects_unanswered_total", "counter", "Refused "
	    "reconnect requests reset without a signed answer: over the signing "
	    "budget.");
	EACH(b, sn, n, "rockd_reconnects_unanswered_total", NULL, NULL,
	    st.reconnect_unanswered);
	family(b, "rockd_reconnects_routed_total", "counter", "Reconnect "
	    "requests this worker accepted for another worker's session and "
	    "passed to it.");
	EACH(b, sn, n, "rockd_reconnects_routed_total", NULL, NULL,
	    st.reconnects_routed);
	family(b, "rockd_reconnects_elsewhere_total", "counter", "Reconnect "
	    "requests for another node's session (a fleet's balancer sent "
	    "them here), answered ELSEWHERE.");
	EACH(b, sn, n, "rockd_reconnects_elsewhere_total", NULL, NULL,
	    st.reconnects_elsewhere);
	family(b, "rockd_reconnects_node_gone_total", "counter", "Reconnect "
	    "requests for the session of a node gone (its checks failing for "
	    "10 s), refused UNKNOWN: the rock ends at its client.");
	EACH(b, sn, n, "rockd_reconnects_node_gone_total", NULL, NULL,
	    st.reconnects_node_gone);
	family(b, "rockd_rock_bytes_total", "counter", "Bytes relayed by rocks, "
	    "by direction.");
	EACH(b, sn, n, "rockd_rock_bytes_total", "direction", "to_backend",
	    n.rock_bytes[ROCKD_TO_BACKEND]);
	EACH(b, sn, n, "rockd_rock_bytes_total", "direction", "to_client",
	    n.rock_bytes[ROCKD_TO_CLIENT]);
	family(b, "rockd_plain_bytes_total", "counter", "Bytes relayed by "
	    "plain relays, by direction.");
	EACH(b, sn, n, "rockd_plain_bytes_total", "direction", "to_backend",
	    n.plain_bytes[ROCKD_TO_BACKEND]);
	EACH(b, sn, n, "rockd_plain_bytes_total", "direction", "to_client",
	    n.plain_bytes[ROCKD_TO_CLIENT]);
	family(b, "rockd_evictions_total", "counter", "Rocks closed to make "
	    "room for a newcomer at max-rocks.");
	EACH(b, sn, n, "rockd_evictions_total", NULL, NULL, st.evictions);
	family(b, "rockd_control_drops_total", "counter", "Control-channel "
	    "datagrams dropped, by kind.");
	EACH(b, sn, n, "rockd_control_drops_total", "kind", "bad_tag",
	    st.hb_bad_tag);
	EACH(b, sn, n, "rockd_control_drops_total", "kind", "replayed",
	    st.hb_replayed);
	EACH(b, sn, n, "rockd_control_drops_total", "kind", "unknown",
	    st.hb_unknown);
	EACH(b, sn, n, "rockd_control_drops_total", "kind", "malformed",
	    st.hb_malformed);
}

/* Ours counted now, the other workers' as they last published them. */
static void
render_all(const struct rockd *d, struct evbuffer *b)
{
	struct rockd_snap one, *all;
	int k;

	if (d->node > 0) {
		family(b, "rockd_node", "gauge", "This rockd's number in its "
		    "fleet (its node, doc/fleet.md).");
		for (k = 0; k < d->nworkers; k++)
			sample(b, "rockd_node", k, NULL, NULL,
			    (unsigned long long)d->node);
	}
	if (d->nworkers <= 1 ||
	    (all = calloc((size_t)d->nworkers, sizeof(*all))) == NULL) {
		rockd_metrics_snap(d, &one);
		render(&one, 1, b);
		return;
	}
	for (k = 0; k < d->nworkers; k++)
		if (k == d->worker)
			rockd_metrics_snap(d, &all[k]);
		else
			rockd_worker_snap_read(d, k, &all[k]);
	render(all, d->nworkers, b);
	free(all);
}

static void
respond(struct metrics_conn *c, const char *status, const char *type,
    struct evbuffer *body)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);

	evbuffer_add_printf(out, "HTTP/1.0 %s\r\nContent-Type: %s\r\n"
	    "Content-Length: %zu\r\nConnection: close\r\n\r\n", status, type,
	    evbuffer_get_length(body));
	evbuffer_add_buffer(out, body);
	bufferevent_disable(c->bev, EV_READ);
	bufferevent_enable(c->bev, EV_WRITE);
}

/* The request line of a whole request head: "GET /metrics HTTP/1.x". */
static void
answer(struct metrics_conn *c, const char *line)
{
	struct evbuffer *body = evbuffer_new();
	const char *target;
	size_t n;

	if (body == NULL) {
		conn_free(c);
		return;
	}
	if (strncmp(line, "GET ", 4) != 0) {
		evbuffer_add_printf(body, "only GET\n");
		respond(c, "405 Method Not Allowed", "text/plain", body);
	} else {
		target = line + 4;
		n = strcspn(target, " ?");
		if (n == 8 && memcmp(target, "/metrics", 8) == 0) {
			render_all(c->m->d, body);
			respond(c, "200 OK", "text/plain; version=0.0.4; "
			    "charset=utf-8", body);
		} else {
			evbuffer_add_printf(body, "not found: try /metrics\n");
			respond(c, "404 Not Found", "text/plain", body);
		}
	}
	evbuffer_free(body);
}

static void
on_read(struct bufferevent *bev, void *arg)
{
	struct metrics_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	struct evbuffer_ptr end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
	char *line;

	if (end.pos < 0)
		end = evbuffer_search(in, "\n\n", 2, NULL);
	if (end.pos < 0) {
		if (evbuffer_get_length(in) > METRICS_MAX_REQUEST)
			conn_free(c);	/* no request is that long */
		return;
	}
	line = evbuffer_readln(in, NULL, EVBUFFER_EOL_CRLF);
	if (line == NULL || strlen(line) > METRICS_MAX_REQUEST) {
		free(line);
		conn_free(c);
		return;
	}
	answer(c, line);
	free(line);
}

/* Everything written: done (one request per connection). */
static void
on_write(struct bufferevent *bev, void *arg)
{
	(void)bev;
	conn_free(arg);
}

/* Closed, failed or timed out before the answer left. */
static void
on_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	conn_free(arg);
}

static void
on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
    int len, void *arg)
{
	static const char busy[] = "HTTP/1.0 503 Service Unavailable\r\n"
	    "Connection: close\r\nContent-Length: 0\r\n\r\n";
	static const struct timeval tv = { METRICS_TIMEOUT_S, 0 };
	struct rockd_metrics *m = arg;
	struct metrics_conn *c;

	(void)l;
	(void)sa;
	(void)len;
	if (m->nconns >= METRICS_MAX_CONNS ||
	    (c = calloc(1, sizeof(*c))) == NULL) {
		(void)send(fd, busy, sizeof(busy) - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
		close(fd);
		return;
	}
	if ((c->bev = bufferevent_socket_new(m->d->base, fd,
	    BEV_OPT_CLOSE_ON_FREE)) == NULL) {
		close(fd);
		free(c);
		return;
	}
	c->m = m;
	c->next = m->conns;
	if (m->conns != NULL)
		m->conns->prev = c;
	m->conns = c;
	m->nconns++;
	bufferevent_setcb(c->bev, on_read, on_write, on_event, c);
	bufferevent_set_timeouts(c->bev, &tv, &tv);
	bufferevent_enable(c->bev, EV_READ);
}

static void
on_accept_error(struct evconnlistener *l, void *arg)
{
	struct rockd_metrics *m = arg;

	(void)l;
	rlog_warn(&m->d->log, "metrics: accept: %s", strerror(errno));
}

/* A handed-over listener on this address, taken from ls; else -1. */
static int
handed_over(const struct rockd_config *cfg, struct rockd_msg *ls, size_t n)
{
	size_t i;
	int fd;

	for (i = 0; i < n; i++) {
		if (ls[i].fds[0] >= 0 && ls[i].len == cfg->metrics_len &&
		    memcmp(ls[i].body, &cfg->metrics_addr, ls[i].len) == 0) {
			fd = ls[i].fds[0];
			ls[i].fds[0] = -1;
			return fd;
		}
	}
	return -1;
}

static int
listen_on(struct rockd *d, const struct rockd_config *cfg, int fd)
{
	struct rockd_metrics *m = calloc(1, sizeof(*m));
	const unsigned flags = LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC;

	if (m == NULL)
		goto fail;
	m->d = d;
	if (fd >= 0)
		m->listener = evconnlistener_new(d->base, on_accept, m, flags, 0, fd);
	else
		m->listener = evconnlistener_new_bind(d->base, on_accept, m,
		    flags | LEV_OPT_REUSEABLE, 16,
		    (const struct sockaddr *)&cfg->metrics_addr,
		    (int)cfg->metrics_len);
	if (m->listener == NULL)
		goto fail;
	evconnlistener_set_error_cb(m->listener, on_accept_error);
	m->addr = cfg->metrics_addr;
	m->len = cfg->metrics_len;
	d->metrics = m;
	rlog_info(&d->log, "metrics on http://%s/metrics%s", cfg->metrics_spec,
	    fd >= 0 ? " (taken over)" : "");
	return 0;
fail:
	rlog_error(&d->log, "metrics %s: cannot listen: %s", cfg->metrics_spec,
	    strerror(errno));
	if (fd >= 0)
		close(fd);
	free(m);
	return -1;
}

/* Workers: worker 0 serves everyone's figures. */
int
rockd_metrics_start(struct rockd *d, struct rockd_msg *ls, size_t n)
{
	if (d->cfg.metrics_spec[0] == '\0' || d->worker != 0)
		return 0;
	return listen_on(d, &d->cfg, handed_over(&d->cfg, ls, n));
}

int
rockd_metrics_fd(const struct rockd *d)
{
	return d->metrics != NULL ?
	    evconnlistener_get_fd(d->metrics->listener) : -1;
}

void
rockd_metrics_stop(struct rockd *d)
{
	struct rockd_metrics *m = d->metrics;

	if (m == NULL)
		return;
	while (m->conns != NULL)
		conn_free(m->conns);
	evconnlistener_free(m->listener);
	free(m);
	d->metrics = NULL;
}

int
rockd_metrics_reload(struct rockd *d, const struct rockd_config *next)
{
	struct rockd_metrics *m = d->metrics;

	if (d->worker != 0)
		return 0;
	if (m != NULL && next->metrics_len == m->len &&
	    memcmp(&next->metrics_addr, &m->addr, m->len) == 0)
		return 0;
	rockd_metrics_stop(d);
	if (next->metrics_spec[0] == '\0') {
		rlog_info(&d->log, "metrics: off");
		return 0;
	}
	return listen_on(d, next, -1);
}
