/* fleet.c: a fleet's node watches its siblings (config: peer N HOST:PORT), so that the rocks of a node that died are told so. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rockd.h"

/* A sibling is checked at most this often, and only while reconnects for
 * its sessions reach us: a TCP connect to its listener, reset at once.
 * The timeout outlasts a lost SYN (resent after 1 s). Failed checks
 * further apart than CHECK_RUN_MS start a new run of failures: a verdict
 * from before a quiet spell is no verdict. */
#define CHECK_EVERY_MS 1000
#define CHECK_TIMEOUT_MS 3000
#define CHECK_RUN_MS 10000
/* Until a sibling has answered once, it is checked this often: a node
 * never seen (a wrong peer line, a firewall between the nodes) is never
 * taken for gone. */
#define FIRST_CHECK_EVERY_MS 10000

struct rockd_sibling {
	struct rockd *d;
	int node;
	struct sockaddr_storage addr;
	socklen_t len;
	int fd;				/* a check in progress; -1: none */
	struct event *ev;
	int answered;			/* it accepted a connection once */
	int warned;			/* said it never answered */
	int64_t checked_ms;		/* when the last check ended; 0: never */
	int64_t down_since_ms;		/* first failed check since the last
					 * good one; 0: the last was good */
};

/* The check's socket and event go, with no verdict. */
static void
check_abandon(struct rockd_sibling *sb)
{
	if (sb->ev != NULL)
		event_free(sb->ev);
	sb->ev = NULL;
	close(sb->fd);
	sb->fd = -1;
}

static void
check_end(struct rockd_sibling *sb, int ok)
{
	struct linger reset = { 1, 0 };
	int64_t now = rockd_now_ms(), last = sb->checked_ms;

	(void)setsockopt(sb->fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
	check_abandon(sb);
	sb->checked_ms = now;
	if (ok) {
		if (sb->down_since_ms != 0)
			rlog_info(&sb->d->log, "node %d is back", sb->node);
		else if (!sb->answered)
			rlog_info(&sb->d->log, "node %d answers", sb->node);
		sb->down_since_ms = 0;
		sb->answered = 1;
	} else if (sb->down_since_ms == 0 || now - last > CHECK_RUN_MS) {
		sb->down_since_ms = now;
		if (sb->answered)
			rlog_info(&sb->d->log, "node %d does not answer; its rocks "
			    "are told it is gone if it stays so %d s", sb->node,
			    ROCKD_NODE_GONE_MS / 1000);
		else if (!sb->warned++)
			rlog_warn(&sb->d->log, "node %d does not answer and never "
			    "has: its rocks are not told it is gone until it "
			    "has (is its peer line right?)", sb->node);
	}
}

/* Only the peer's silence is a verdict: an error of our own (no port,
 * no memory) says nothing about it. */
static int
peer_failed(int err)
{
	return err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH ||
	    err == ENETUNREACH || err == ECONNRESET;
}

static void
on_check(evutil_socket_t fd, short what, void *arg)
{
	struct rockd_sibling *sb = arg;
	int err = ETIMEDOUT;
	socklen_t n = sizeof(err);

	if ((what & EV_WRITE) &&
	    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &n) != 0)
		err = errno;
	if (err == 0 || peer_failed(err))
		check_end(sb, err == 0);
	else
		check_abandon(sb);
}

static void
check_start(struct rockd_sibling *sb)
{
	struct timeval tv = { CHECK_TIMEOUT_MS / 1000,
	    (CHECK_TIMEOUT_MS % 1000) * 1000 };

	sb->fd = socket(sb->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK |
	    SOCK_CLOEXEC, 0);
	if (sb->fd < 0)
		return;		/* no verdict either way: we could not ask */
	if (connect(sb->fd, (struct sockaddr *)&sb->addr, sb->len) == 0) {
		check_end(sb, 1);
		return;
	}
	if (errno != EINPROGRESS) {
		if (peer_failed(errno))
			check_end(sb, 0);
		else
			check_abandon(sb);
		return;
	}
	if ((sb->ev = event_new(sb->d->base, sb->fd, EV_WRITE, on_check,
	    sb)) == NULL || event_add(sb->ev, &tv) != 0)
		check_abandon(sb);	/* no verdict: we could not wait */
}

/* The engine asks while a reconnect for node's session waits: gone only
 * after checks have failed for ROCKD_NODE_GONE_MS, the last one just now
 * (a verdict from before a quiet spell is no verdict: the node may have
 * come back since). A check is started if none is recent. */
static int
node_gone(void *arg, int node)
{
	struct rockd *d = arg;
	struct rockd_sibling *sb = d->siblings[node];
	int64_t now = rockd_now_ms();

	if (sb == NULL)
		return 0;
	if (sb->fd < 0 && now - sb->checked_ms >= CHECK_EVERY_MS)
		check_start(sb);
	return sb->answered && sb->down_since_ms != 0 && sb->fd < 0 &&
	    now - sb->checked_ms <= 2 * CHECK_EVERY_MS &&
	    sb->checked_ms - sb->down_since_ms >= ROCKD_NODE_GONE_MS;
}

/* Siblings not yet seen answering are checked now and then, so that one
 * started after us is known before it is asked about. */
static void
on_first_checks(evutil_socket_t fd, short what, void *arg)
{
	struct rockd *d = arg;
	struct timeval tv = { FIRST_CHECK_EVERY_MS / 1000, 0 };
	int k, waiting = 0;

	(void)fd;
	(void)what;
	for (k = 1; k <= ROCKD_MAX_NODE; k++) {
		struct rockd_sibling *sb = d->siblings[k];

		if (sb == NULL || sb->answered)
			continue;
		waiting = 1;
		if (sb->fd < 0)
			check_start(sb);
	}
	if (waiting)
		(void)event_add(d->sibling_timer, &tv);
}

int
rockd_fleet_start(struct rockd *d)
{
	const struct rockd_peer *p;
	struct rockd_sibling *sb;

	if (d->node <= 0 || d->peers == NULL)
		return 0;
	if ((d->siblings = calloc(ROCKD_MAX_NODE + 1, sizeof(*d->siblings))) == NULL)
		return -1;
	for (p = d->peers; p != NULL; p = p->next) {
		if (p->node == d->node)
			continue;
		if ((sb = calloc(1, sizeof(*sb))) == NULL)
			return -1;
		sb->d = d;
		sb->node = p->node;
		sb->addr = p->addr;
		sb->len = p->len;
		sb->fd = -1;
		d->siblings[p->node] = sb;
	}
	if ((d->sibling_timer = evtimer_new(d->base, on_first_checks, d)) == NULL)
		return -1;
	on_first_checks(-1, 0, d);
	rock_engine_set_node_watch(d->engine, node_gone, d);
	return 0;
}

void
rockd_fleet_stop(struct rockd *d)
{
	int k;

	if (d->siblings == NULL)
		return;
	if (d->sibling_timer != NULL)
		event_free(d->sibling_timer);
	d->sibling_timer = NULL;
	for (k = 0; k <= ROCKD_MAX_NODE; k++) {
		struct rockd_sibling *sb = d->siblings[k];

		if (sb == NULL)
			continue;
		if (sb->ev != NULL)
			event_free(sb->ev);
		if (sb->fd >= 0)
			close(sb->fd);
		free(sb);
	}
	free(d->siblings);
	d->siblings = NULL;
}
