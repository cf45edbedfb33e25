/* handover.c: rockd's USR2: start the installed binary and hand it the listeners, the UDP socket and every session with its descriptors; and the successor's side, which takes them. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "rock_err.h"
#include "rockd.h"

/* Both ends must speak the same channel; a successor of another version
 * says so in its hello and the predecessor keeps serving. */
#define HANDOVER_VERSION 2
/* The successor loads its configuration in this time, or is killed. */
#define HELLO_TIMEOUT_S 30
/* The successor's end of the channel, and its only descriptor past 2. */
#define HANDOVER_CHAN_FD 3
/* Connections in their first exchange (sniff, handshake, backend dial)
 * are waited for this long; what is still there is left behind. */
#define QUIET_BOUND_MS 5000
#define QUIET_POLL_MS 20
#define MSG_TIMEOUT_MS 10000
/* The successor adopts everything in this time, or is killed. */
#define ACK_TIMEOUT_MS 30000

struct rockd_handover {
	pid_t pid;
	int chan;
	struct event *ev;	/* the successor's hello, within its bound */
	struct event *quiet;	/* waits for a point with no first exchange */
	int64_t deadline_ms;
};

static struct evbuffer *
u32_body(uint32_t v)
{
	struct evbuffer *b = evbuffer_new();
	uint32_t n = htonl(v);

	if (b != NULL && evbuffer_add(b, &n, sizeof(n)) != 0) {
		evbuffer_free(b);
		b = NULL;
	}
	return b;
}

static int
u32_of(const struct rockd_msg *m, uint32_t *v)
{
	if (m->len != sizeof(*v) || m->nfds != 0)
		return -1;
	memcpy(v, m->body, sizeof(*v));
	*v = ntohl(*v);
	return 0;
}

static int
send_u32(int chan, uint32_t type, uint32_t v)
{
	struct evbuffer *b = u32_body(v);
	int r = b != NULL ? rockd_chan_send(chan, type, NULL, 0, b,
	    MSG_TIMEOUT_MS) : -1;

	if (b != NULL)
		evbuffer_free(b);
	return r;
}

/* ---- the predecessor */

/* How the successor ended, for the log: its exit status, or killed. */
static void
reap(struct rockd *d, pid_t pid)
{
	char how[96];
	int st, i;

	if (pid <= 0)		/* a worker's: the master started it */
		return;
	for (i = 0; i < 100; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			break;
		usleep(10000);
	}
	if (i == 100) {
		kill(pid, SIGKILL);
		(void)waitpid(pid, &st, 0);
		rlog_error(&d->log, "hand-over: successor %ld killed", (long)pid);
	} else {
		rlog_error(&d->log, "hand-over: successor %ld %s", (long)pid,
		    rockd_handover_ended(st, how, sizeof(how)));
	}
}

/* How a successor ended, from its wait status, for the log. */
const char *
rockd_handover_ended(int st, char *buf, size_t len)
{
	if (WIFEXITED(st))
		snprintf(buf, len, "exited with status %d%s", WEXITSTATUS(st),
		    WEXITSTATUS(st) == 2 ?
		    " (its configuration is bad: see its message)" : "");
	else
		snprintf(buf, len, "ended by signal %d", WTERMSIG(st));
	return buf;
}

static void
ho_free(struct rockd *d)
{
	struct rockd_handover *ho = d->ho;

	if (ho->ev != NULL)
		event_free(ho->ev);
	if (ho->quiet != NULL)
		event_free(ho->quiet);
	close(ho->chan);
	free(ho);
	d->ho = NULL;
}

void
rockd_handover_abort(struct rockd *d, const char *why)
{
	if (d->ho == NULL)
		return;
	reap(d, d->ho->pid);
	rlog_error(&d->log, "hand-over failed: %s; this rockd keeps serving", why);
	/* The successor may have written its own before it failed (a
	 * worker's master sees to the file). */
	if (d->nworkers <= 1)
		(void)rockd_pidfile_write(d);
	ho_free(d);
	rockd_services_pause(&d->cfg, 0);
	rockd_services_steer(d);
}

/* The metrics endpoint's listener goes as one more listener: the
 * successor finds it by its address, as a service finds its own. */
static int
send_metrics(struct rockd *d, int chan, unsigned *n)
{
	struct evbuffer *b;
	int fd = rockd_metrics_fd(d), r = -1;

	if (fd < 0)
		return 0;
	if ((b = evbuffer_new()) != NULL &&
	    evbuffer_add(b, &d->cfg.metrics_addr, d->cfg.metrics_len) == 0)
		r = rockd_chan_send(chan, ROCKD_MSG_LISTENER, &fd, 1, b,
		    MSG_TIMEOUT_MS);
	if (b != NULL)
		evbuffer_free(b);
	if (r == 0)
		(*n)++;
	return r == 0 ? 0 : -1;
}

static int
send_listeners(struct rockd *d, int chan, unsigned *n)
{
	struct rockd_service *s;
	struct evbuffer *b;
	int fd, r;

	for (s = d->cfg.services; s != NULL; s = s->next) {
		if (s->listener == NULL)
			continue;
		fd = evconnlistener_get_fd(s->listener);
		if ((b = evbuffer_new()) == NULL ||
		    evbuffer_add(b, &s->listen_addr, s->listen_len) != 0)
			r = -1;
		else
			r = rockd_chan_send(chan, ROCKD_MSG_LISTENER, &fd, 1, b,
			    MSG_TIMEOUT_MS);
		if (b != NULL)
			evbuffer_free(b);
		if (r != 0)
			return -1;
		(*n)++;
	}
	return send_metrics(d, chan, n);
}

static int
send_engine(struct rockd *d, int chan, unsigned *n)
{
	struct evbuffer *b = evbuffer_new();
	int fd = rock_engine_udp_fd(d->engine), r = -1;

	if (b != NULL && rock_engine_export(d->engine, b) == 0)
		r = rockd_chan_send(chan, ROCKD_MSG_ENGINE, &fd, 1, b,
		    MSG_TIMEOUT_MS);
	if (b != NULL)
		evbuffer_free(b);
	*n += r == 0;
	return r;
}

/* The successor's answer: 0 on ACK; its reason otherwise. */
static int
await_ack(int chan, int timeout_ms, char *why, size_t len)
{
	struct rockd_msg m;

	if (rockd_chan_recv(chan, &m, timeout_ms) != 0) {
		snprintf(why, len, "no answer from the successor: %s",
		    strerror(errno));
		return -1;
	}
	if (m.type == ROCKD_MSG_ACK && m.len == 0 && m.nfds == 0) {
		rockd_msg_free(&m);
		return 0;
	}
	if (m.type == ROCKD_MSG_FAIL)
		snprintf(why, len, "the successor gave up: %.*s",
		    (int)(m.len < 400 ? m.len : 400), (const char *)m.body);
	else
		snprintf(why, len, "the successor answered message %u",
		    (unsigned)m.type);
	rockd_msg_free(&m);
	return -1;
}

/* Between callbacks, with no session inside one: the state sent is the
 * state, and nothing here touches a socket it sends. */
static void
hand_over(struct rockd *d, size_t pending)
{
	struct rockd_handover *ho = d->ho;
	unsigned n = 0, rocks = 0, relays = 0, left = 0;
	char why[512], to[48];

	if (send_listeners(d, ho->chan, &n) != 0 ||
	    send_engine(d, ho->chan, &n) != 0 ||
	    rockd_rocks_send(d, ho->chan, &rocks, &left) != 0 ||
	    rockd_relays_send(d, ho->chan, &relays, &left) != 0 ||
	    send_u32(ho->chan, ROCKD_MSG_END, n + rocks + relays) != 0) {
		snprintf(why, sizeof(why), "sending the state: %s", strerror(errno));
		rockd_handover_abort(d, why);
		return;
	}
	/* A worker's successor acknowledges once all its siblings hold
	 * their share, which their master waits for up to its start bound. */
	if (await_ack(ho->chan, ho->pid > 0 ? ACK_TIMEOUT_MS :
	    ROCKD_WORKERS_START_MS + 15000, why, sizeof(why)) != 0) {
		rockd_handover_abort(d, why);
		return;
	}
	if (ho->pid > 0)
		snprintf(to, sizeof(to), "pid %ld", (long)ho->pid);
	else
		snprintf(to, sizeof(to), "worker %d's successor", d->worker);
	rlog_info(&d->log, "handed over to %s: %u rocks, %u relays%s; exiting",
	    to, rocks, relays, pending > 0 ?
	    " (connections still in their first exchange are dropped)" : "");
	ho_free(d);
	rockd_rocks_release(d);
	rockd_relays_release(d);
	d->handed_over = 1;
	event_base_loopbreak(d->base);
}

static size_t
first_exchanges(const struct rockd *d)
{
	return d->nsniffs + rock_engine_nhandshakes(d->engine) +
	    rockd_relays_dialing(d) + rockd_rocks_dialing(d);
}

static void
on_quiet(evutil_socket_t fd, short what, void *arg)
{
	struct rockd *d = arg;
	size_t pending = first_exchanges(d);

	(void)fd;
	(void)what;
	if (pending > 0 && rockd_now_ms() < d->ho->deadline_ms)
		return;
	event_del(d->ho->quiet);
	hand_over(d, pending);
}

static void
on_hello(evutil_socket_t fd, short what, void *arg)
{
	struct rockd *d = arg;
	struct rockd_handover *ho = d->ho;
	struct timeval poll = { 0, QUIET_POLL_MS * 1000 };
	struct rockd_msg m;
	uint32_t version;
	char why[256];

	(void)fd;
	if (what & EV_TIMEOUT) {
		rockd_handover_abort(d, "no word from the successor in time");
		return;
	}
	if (rockd_chan_recv(ho->chan, &m, MSG_TIMEOUT_MS) != 0) {
		snprintf(why, sizeof(why), "the successor did not start (%s)",
		    strerror(errno));
		rockd_handover_abort(d, why);
		return;
	}
	if (m.type != ROCKD_MSG_HELLO || u32_of(&m, &version) != 0 ||
	    version != HANDOVER_VERSION) {
		rockd_msg_free(&m);
		rockd_handover_abort(d, "the successor speaks another hand-over "
		    "version");
		return;
	}
	rockd_msg_free(&m);
	/* New connections wait in the listeners' queues, which move. */
	rockd_services_pause(&d->cfg, 1);
	ho->deadline_ms = rockd_now_ms() + QUIET_BOUND_MS;
	if ((ho->quiet = event_new(d->base, -1, EV_PERSIST, on_quiet, d)) == NULL ||
	    event_add(ho->quiet, &poll) != 0)
		rockd_handover_abort(d, "out of memory");
}

/* In the child: the installed binary, same arguments, same directory,
 * the channels (one per worker) named in the environment, from fd 3 on. */
void
rockd_exec_successor(const struct rockd *d, const int *chans, int n)
{
	char list[ROCKD_MAX_WORKERS * 4 + 1] = "", node[8];
	int high[ROCKD_MAX_WORKERS], k;
	size_t at = 0;

	/* Out of the way first: a channel may sit where another goes. */
	for (k = 0; k < n; k++)
		if ((high[k] = fcntl(chans[k], F_DUPFD, HANDOVER_CHAN_FD + n +
		    ROCKD_MAX_WORKERS)) < 0)
			_exit(127);
	/* Only the channels go across: a copy of a client's or backend's
	 * socket left open in the successor, besides the one it is sent,
	 * would keep every later close or reset from reaching that peer. */
	for (k = 0; k < n; k++) {
		if (dup2(high[k], HANDOVER_CHAN_FD + k) < 0)
			_exit(127);
		at += (size_t)snprintf(list + at, sizeof(list) - at, "%s%d",
		    k > 0 ? "," : "", HANDOVER_CHAN_FD + k);
	}
	(void)close_range(HANDOVER_CHAN_FD + n, ~0U, 0);
	snprintf(node, sizeof(node), "%d", d->node);
	if (setenv(ROCKD_HANDOVER_ENV, list, 1) == 0 &&
	    setenv(ROCKD_HANDOVER_NODE_ENV, node, 1) == 0 &&
	    chdir(d->start_cwd) == 0)
		execv(d->exe, d->argv);
	_exit(127);
}

/* The hand-over on chan, once its successor (pid; 0: a worker's, which
 * its master started) says hello. */
void
rockd_handover_begin(struct rockd *d, int chan, pid_t pid)
{
	struct timeval hello = { HELLO_TIMEOUT_S, 0 };
	struct rockd_handover *ho;

	if (d->stopping || d->ho != NULL || (ho = calloc(1, sizeof(*ho))) == NULL) {
		rlog_warn(&d->log, "hand-over: %s; ignored", d->stopping ?
		    "stopping" : d->ho != NULL ? "one is in progress" :
		    "out of memory");
		close(chan);
		reap(d, pid);	/* it reads the end of its channel and exits */
		return;
	}
	ho->pid = pid;
	ho->chan = chan;
	d->ho = ho;
	if ((ho->ev = event_new(d->base, ho->chan, EV_READ, on_hello, d)) == NULL ||
	    event_add(ho->ev, &hello) != 0)
		rockd_handover_abort(d, "out of memory");
}

void
rockd_handover_start(struct rockd *d)
{
	int sv[2];
	pid_t pid;

	if (d->stopping || d->ho != NULL) {
		rlog_warn(&d->log, "SIGUSR2: %s; ignored", d->stopping ?
		    "stopping" : "a hand-over is in progress");
		return;
	}
	if (d->exe[0] == '\0') {
		rlog_error(&d->log, "SIGUSR2: rockd's own path was not found at "
		    "start; no hand-over");
		return;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
		rlog_error(&d->log, "SIGUSR2: %s", strerror(errno));
		return;
	}
	if ((pid = fork()) == 0)
		rockd_exec_successor(d, &sv[1], 1);
	close(sv[1]);
	if (pid < 0) {
		rlog_error(&d->log, "SIGUSR2: fork: %s", strerror(errno));
		close(sv[0]);
		return;
	}
	rlog_info(&d->log, "SIGUSR2: started %s as pid %ld; handing over once "
	    "it has loaded its configuration", d->exe, (long)pid);
	rockd_handover_begin(d, sv[0], pid);
}

/* ---- the successor */

struct takeover {
	struct rockd_msg *listeners;
	size_t nlisteners;
	unsigned count;		/* messages before END */
	char why[256];
};

static int
take_listener(struct takeover *t, struct rockd_msg *m)
{
	struct rockd_msg *l = realloc(t->listeners,
	    (t->nlisteners + 1) * sizeof(*l));

	if (l == NULL)
		return ROCK_ERR_NOMEM;
	t->listeners = l;
	if (m->nfds != 1 || m->len == 0 || m->len > sizeof(struct sockaddr_storage))
		return ROCK_ERR_PROTOCOL;
	l[t->nlisteners++] = *m;
	memset(m, 0, sizeof(*m));	/* kept, with its descriptor */
	return 0;
}

static int
take_engine(struct rockd *d, struct rockd_msg *m)
{
	int r;

	if (d->engine != NULL || m->nfds != 1)
		return ROCK_ERR_PROTOCOL;
	if ((r = rockd_engine_start(d, m->fds[0])) != 0)
		return r;
	m->fds[0] = -1;		/* the engine's */
	if ((r = rock_engine_import(d->engine, m->body, m->len)) != 0)
		return r;
	/* Workers: one started later announces what this one took. */
	if (d->nworkers > 1)
		memcpy(rockd_workers_announcement(d),
		    rock_engine_announcement(d->engine) + ROCK_ANNOUNCE_LEN -
		    ROCK_ANNOUNCE_RANDOM, ROCK_ANNOUNCE_RANDOM);
	return 0;
}

/* One message; 1 at the end, 0 to go on, else an error (why is set). */
static int
take_one(struct rockd *d, struct takeover *t, struct rockd_msg *m)
{
	uint32_t count;
	int r;

	switch (m->type) {
	case ROCKD_MSG_LISTENER:
		r = take_listener(t, m);
		break;
	case ROCKD_MSG_ENGINE:
		r = take_engine(d, m);
		break;
	case ROCKD_MSG_ROCK:
	case ROCKD_MSG_RELAY:
		if (d->engine == NULL)
			r = ROCK_ERR_PROTOCOL;
		else
			r = m->type == ROCKD_MSG_ROCK ? rockd_rock_import(d, m) :
			    rockd_relay_import(d, m);
		break;
	case ROCKD_MSG_END:
		if (u32_of(m, &count) != 0 || count != t->count || d->engine == NULL)
			r = ROCK_ERR_PROTOCOL;
		else
			return 1;
		break;
	default:
		r = ROCK_ERR_PROTOCOL;
	}
	if (r != 0)
		snprintf(t->why, sizeof(t->why), "message %u (type %u): %s",
		    t->count + 1, (unsigned)m->type, rock_err(r));
	t->count++;
	return r;
}

static int
receive_all(struct rockd *d, int chan, struct takeover *t)
{
	struct rockd_msg m;
	int r;

	do {
		if (rockd_chan_recv(chan, &m, ACK_TIMEOUT_MS) != 0) {
			snprintf(t->why, sizeof(t->why), "reading message %u: %s",
			    t->count + 1, strerror(errno));
			return -1;
		}
		r = take_one(d, t, &m);
		rockd_msg_free(&m);
	} while (r == 0);
	return r == 1 ? 0 : -1;
}

int
rockd_takeover(struct rockd *d, int chan)
{
	struct takeover t;
	struct evbuffer *b;
	size_t i;
	int r = -1;

	memset(&t, 0, sizeof(t));
	if (send_u32(chan, ROCKD_MSG_HELLO, HANDOVER_VERSION) != 0)
		snprintf(t.why, sizeof(t.why), "hello: %s", strerror(errno));
	else if (receive_all(d, chan, &t) == 0 &&
	    (rockd_services_adopt(d, &d->cfg, t.listeners, t.nlisteners) != 0 ||
	    rockd_metrics_start(d, t.listeners, t.nlisteners) != 0))
		snprintf(t.why, sizeof(t.why), "a listener could not start");
	/* Before the acknowledgement, on which the predecessor exits: a
	 * supervisor that follows the pid file (systemd's PIDFile=) reads it
	 * when the old process ends, and must find us there. Workers: all
	 * or none take over, and their master writes the file first. */
	else if (t.why[0] == '\0' && d->nworkers > 1 &&
	    rockd_worker_commit(d) != 0)
		snprintf(t.why, sizeof(t.why), "not every worker could take "
		    "over");
	else if (t.why[0] == '\0' && d->nworkers <= 1 &&
	    rockd_pidfile_write(d) != 0)
		snprintf(t.why, sizeof(t.why), "cannot write the pid file");
	else if (t.why[0] == '\0' &&
	    rockd_chan_send(chan, ROCKD_MSG_ACK, NULL, 0, NULL, MSG_TIMEOUT_MS) != 0)
		snprintf(t.why, sizeof(t.why), "acknowledging: %s", strerror(errno));
	else if (t.why[0] == '\0')
		r = 0;
	if (r != 0) {
		rlog_error(&d->log, "taking over: %s; the running rockd keeps "
		    "serving", t.why);
		if ((b = evbuffer_new()) != NULL &&
		    evbuffer_add(b, t.why, strlen(t.why)) == 0)
			(void)rockd_chan_send(chan, ROCKD_MSG_FAIL, NULL, 0, b,
			    MSG_TIMEOUT_MS);
		if (b != NULL)
			evbuffer_free(b);
	} else {
		rlog_info(&d->log, "took over %zu rocks and %u other messages "
		    "from the previous rockd", rock_engine_nsessions(d->engine),
		    t.count);
	}
	for (i = 0; i < t.nlisteners; i++)
		rockd_msg_free(&t.listeners[i]);
	free(t.listeners);
	close(chan);
	return r;
}
