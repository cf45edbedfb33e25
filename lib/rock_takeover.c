/* rock_takeover.c: the server's side of a reconnect: an authenticated request takes its session over, or is refused. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rock_accept.h"
#include "rock_engine_int.h"
#include "rock_err.h"
#include "rock_sys.h"

/* A reconnect request being read: the session is looked up by id once the
 * request is whole, never held across the event loop (it may end). */
struct reconnect {
	struct rock_engine *e;
	int fd;
	uint8_t buf[ROCK_RECONNECT_REQ_LEN];
	size_t have;
	struct event *ev, *deadline;
};

static void
reconnect_free(struct reconnect *rc, int close_fd)
{
	rock_accept_disarm(&rc->ev, &rc->deadline);
	if (close_fd)
		rock_sys.close(rc->fd);
	rc->e->nhandshakes--;
	free(rc);
}

static void
reconnect_reject(struct reconnect *rc, uint8_t code, const char *why)
{
	struct linger reset = { 1, 0 };

	rc->e->stats.reconnect_rejected++;
	if (!rock_accept_may_sign(rc->e)) {
		rc->e->stats.reconnect_unanswered++;
		stranger(rc->e, ROCK_STRANGER_RECONNECT, "reconnect rejected: "
		    "%s; reset unanswered, over the refusals' signing budget",
		    why);
		(void)rock_sys.setsockopt(rc->fd, SOL_SOCKET, SO_LINGER, &reset,
		    sizeof(reset));
		reconnect_free(rc, 1);
		return;
	}
	stranger(rc->e, ROCK_STRANGER_RECONNECT, "reconnect rejected: %s",
	    why);
	rock_accept_send_error(rc->e, rc->fd, code, why, rc->buf, rc->have);
	reconnect_free(rc, 1);
}

/* The client tries several connections at once while the path is down;
 * the first request to arrive wins, and one sent while that attempt was
 * still open at the client (since <= it) does not replace it: the client
 * takes whichever answers first. A request older than the winner is a
 * straggler or a replay. Both are answered SUPERSEDED, which the client
 * acts on only by dropping that connection. */
static const char *
superseded(const struct rock_session *s, const struct rock_reconnect_req *rq)
{
	if (rq->attempt <= s->last_attempt)
		return "an older attempt than the one in use";
	if (rq->since <= s->last_attempt && s->state == ROCK_ST_CONNECTED)
		return "sent while the attempt in use was open";
	return NULL;
}

static void
ok_encode(const struct rock_session *s, const uint8_t nonce[ROCK_NONCE_LEN],
    uint8_t out[ROCK_RECONNECT_OK_LEN])
{
	struct rock_reconnect_ok ok;

	ok.consumed = s->consumed;
	ok.end = rock_session_end(s);
	ok.flags = s->flags;
	memset(ok.tag, 0, sizeof(ok.tag));
	rock_reconnect_ok_encode(&ok, out);
	rock_ok_tag(ok.tag, s->keys.tx, s->id, nonce, out);
	rock_reconnect_ok_encode(&ok, out);
}

/* A status exchange: the client's counts and end taken as from an
 * authentic record (they only grow, so a replayed request says nothing
 * new), ours in an OK for its nonce; the data connection stays as it is.
 * Where UDP does not pass, this is how an end of stream is confirmed
 * without a reconnect. */
static void
answer_status(struct rock_session *s, struct reconnect *rc,
    const struct rock_reconnect_req *rq)
{
	uint8_t out[ROCK_RECONNECT_OK_LEN];
	int fd = rc->fd;

	reconnect_free(rc, 0);
	rock_session_hold(s);
	s->last_heard_ms = rock_now_ms();
	if (rock_session_peer_count(s, rq->consumed, rq->end,
	    rq->flags & (ROCK_FLAG_WR_SHUT | ROCK_FLAG_EOF_SEEN)) == 0) {
		ok_encode(s, rq->nonce, out);
		(void)rock_sys.send(fd, out, sizeof(out), MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	rock_sys.close(fd);
	rock_session_release(s);
}

/* OK, then the replay at once: the request carried the client's count,
 * so the server's bytes follow their acceptance on the same flight. */
static void
take_over(struct rock_session *s, struct reconnect *rc,
    const struct rock_reconnect_req *rq)
{
	uint8_t out[ROCK_RECONNECT_OK_LEN];
	int fd = rc->fd, r;

	reconnect_free(rc, 0);
	ok_encode(s, rq->nonce, out);
	if (rock_sys.send(fd, out, sizeof(out), MSG_NOSIGNAL | MSG_DONTWAIT) !=
	    (ssize_t)sizeof(out)) {
		rock_sys.close(fd);
		return;
	}
	s->last_attempt = rq->attempt;
	s->e->stats.reconnects++;
	/* Where the client is now: its own newcomers may replace this rock. */
	s->peer_len = sizeof(s->peer);
	if (rock_sys.getpeername(fd, (struct sockaddr *)&s->peer, &s->peer_len) != 0)
		s->peer_len = 0;
	rock_session_hold(s);
	/* Made with the session's keys: as good a proof as a FINISHED the
	 * old connection may still owe. */
	rock_finish_cancel(s, 1);
	/* The client gave up on the old connection: so do we. */
	rock_session_fail(s, "replaced by an authenticated reconnect");
	/* The new connection's path, maybe not the old one's (0, a Fast Open
	 * reconnect not yet acknowledged: TCP's first sample tells). */
	rock_path_init(s, rock_tcp_rtt_ms(fd));
	/* The client takes the OK as the switch: a connection dropped after
	 * it is reset, never ended with a FIN it could read as our end. */
	if (rock_session_resume_counts(s, rq->consumed, rq->end,
	    rq->flags) != 0) {
		rock_close_reset(fd);
	} else if ((r = rock_stream_replay(s)) != 0) {
		rock_close_reset(fd);
		rock_session_close(s, r, "peer's count outside what we hold");
	} else if (rock_is_direct(s)) {
		/* The application's descriptors get fd after the replay. */
		rlog_info(s->e->log, "rock %s: client reconnected; resending "
		    "from byte %llu", s->name, (unsigned long long)s->peer_consumed);
		rock_direct_resume(s, fd);
	} else if (rock_stream_attach(s, fd) != 0) {
		rock_close_reset(fd);
	} else {
		rlog_info(s->e->log, "rock %s: client reconnected; resending "
		    "from byte %llu", s->name, (unsigned long long)s->peer_consumed);
		rock_session_maybe_finish(s);
	}
	rock_session_release(s);
}

/* A fleet: another node's session, sent here by a balancer that does not
 * route by id or has not seen that node come back. Not ours to judge
 * while that node may be alive: the client takes the answer for a failed
 * attempt and dials again, and the session lives on at its node.
 * Unsigned, so that it costs what a plain connection does; anyone could
 * send it, and all it can do is what a reset does. A node gone took its
 * sessions with it: the refusal that says so is signed (the fleet's key
 * is ours), and ends the rock at its client. */
static int
node_elsewhere(struct reconnect *rc, const struct rock_reconnect_req *rq)
{
	struct rock_engine *e = rc->e;
	int node = rq->id[ROCK_ID_NODE];
	uint8_t out[ROCK_ERROR_MAX_LEN];
	char why[48];
	size_t n;

	if (e->cfg.node <= 0 || node == e->cfg.node)
		return 0;
	if (node > 0 && e->node_gone != NULL &&
	    e->node_gone(e->node_gone_arg, node)) {
		e->stats.reconnects_node_gone++;
		snprintf(why, sizeof(why), "node %d is gone", node);
		reconnect_reject(rc, ROCK_WERR_UNKNOWN, why);
		return 1;
	}
	e->stats.reconnects_elsewhere++;
	stranger(e, ROCK_STRANGER_RECONNECT, "reconnect for node %d's session "
	    "(we are node %d): answered ELSEWHERE; is the balancer routing by "
	    "connection id?", rq->id[ROCK_ID_NODE], e->cfg.node);
	n = rock_error_encode(ROCK_WERR_ELSEWHERE, "another node's session", out);
	(void)rock_sys.send(rc->fd, out, n, MSG_NOSIGNAL | MSG_DONTWAIT);
	reconnect_free(rc, 1);
	return 1;
}

/* Workers: a session lives in the worker its id names, whichever worker
 * the kernel gave the connection to. Routed before any check, so the
 * request is judged (and a refusal signed) once, by its worker. */
static int
route_elsewhere(struct reconnect *rc, const struct rock_reconnect_req *rq)
{
	struct rock_engine *e = rc->e;
	int w = rq->id[ROCK_ID_WORKER], fd = rc->fd;
	uint8_t req[ROCK_RECONNECT_REQ_LEN];

	if (e->route == NULL || e->cfg.workers <= 1 || w == e->cfg.worker ||
	    w >= e->cfg.workers)
		return 0;
	e->stats.reconnects_routed++;
	memcpy(req, rc->buf, sizeof(req));
	reconnect_free(rc, 0);
	e->route(e->route_arg, fd, req, sizeof(req), w);
	return 1;
}

/* No session here by that id: the process that holds it may be another
 * (a server restarted while its rocks live on in a keeper). */
static int
stray_elsewhere(struct reconnect *rc, const struct rock_reconnect_req *rq)
{
	struct rock_engine *e = rc->e;
	uint8_t req[ROCK_RECONNECT_REQ_LEN];

	if (e->stray == NULL)
		return 0;
	memcpy(req, rc->buf, sizeof(req));
	/* Its events go before the descriptor may (the holder's from now). */
	rock_accept_disarm(&rc->ev, &rc->deadline);
	if (!e->stray(e->stray_arg, rc->fd, req, sizeof(req), rq->id))
		return 0;
	e->stats.reconnects_routed++;
	reconnect_free(rc, 0);
	return 1;
}

static void
check_request(struct reconnect *rc)
{
	struct rock_reconnect_req rq;
	struct rock_session *s;
	uint8_t tag[ROCK_TAG_LEN];
	const char *why;

	if (rock_reconnect_req_decode(&rq, rc->buf) != 0) {
		reconnect_reject(rc, ROCK_WERR_PROTOCOL, "malformed request");
		return;
	}
	if (node_elsewhere(rc, &rq) || route_elsewhere(rc, &rq))
		return;
	if ((s = rock_engine_find(rc->e, rq.id)) == NULL ||
	    s->state == ROCK_ST_CLOSED) {
		if (s == NULL && stray_elsewhere(rc, &rq))
			return;
		reconnect_reject(rc, ROCK_WERR_UNKNOWN, "no such session");
		return;
	}
	rock_request_tag(tag, s->keys.rx, rc->buf);
	if (!rock_equal(tag, rq.tag, ROCK_TAG_LEN)) {
		reconnect_reject(rc, ROCK_WERR_AUTH, "wrong key");
		return;
	}
	s->proven = 1;
	if (rq.flags & ROCK_FLAG_STATUS) {
		answer_status(s, rc, &rq);
		return;
	}
	if ((why = superseded(s, &rq)) != NULL) {
		reconnect_reject(rc, ROCK_WERR_SUPERSEDED, why);
		return;
	}
	take_over(s, rc, &rq);
}

static void
on_reconnect_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct reconnect *rc = arg;
	struct rock_engine *e = rc->e;

	(void)fd;
	(void)what;
	rock_engine_enter(e);
	stranger(e, ROCK_STRANGER_RECONNECT,
	    "reconnect: timed out mid-request; dropped");
	reconnect_free(rc, 1);
	rock_engine_leave(e);
}

static void
on_reconnect_read(evutil_socket_t fd, short what, void *arg)
{
	struct reconnect *rc = arg;
	struct rock_engine *e = rc->e;
	int r = rock_accept_fill(fd, rc->buf, &rc->have, ROCK_RECONNECT_REQ_LEN);

	(void)what;
	rock_engine_enter(e);
	if (r < 0) {
		stranger(e, ROCK_STRANGER_RECONNECT,
		    "reconnect: connection closed mid-request; dropped");
		reconnect_free(rc, 1);
	} else if (r > 0) {
		check_request(rc);
	}
	rock_engine_leave(e);
}

void
rock_server_reconnect(struct rock_engine *e, int fd, const uint8_t *early,
    size_t nearly)
{
	struct reconnect *rc = calloc(1, sizeof(*rc));

	if (rc == NULL || nearly > ROCK_RECONNECT_REQ_LEN) {
		free(rc);
		rock_sys.close(fd);
		return;
	}
	e->nhandshakes++;
	rc->e = e;
	rc->fd = fd;
	memcpy(rc->buf, early, nearly);
	rc->have = nearly;
	if (rock_accept_arm(e, &rc->ev, &rc->deadline, fd, -1, on_reconnect_read,
	    on_reconnect_deadline, rc) != 0) {
		reconnect_free(rc, 1);
		return;
	}
	if (rc->have == ROCK_RECONNECT_REQ_LEN)
		check_request(rc);
}
