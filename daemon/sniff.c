/* sniff.c: rockd tells a probe, a rock, a reconnect and a plain client apart by their first bytes. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rock_wire.h"
#include "rockd.h"


struct sniff {
	struct rockd *d;
	struct rockd_backend backend;
	evutil_socket_t fd;
	uint8_t buf[ROCK_MAGIC_LEN];
	size_t have;
	int wait_ms;		/* for the first bytes */
	int rtt_ms;		/* TCP's round trip, or -1 */
	struct event *ev;
};

static void
sniff_free(struct sniff *sn)
{
	sn->d->nsniffs--;
	event_free(sn->ev);
	free(sn);
}

/* EDP step 1c: end of file before any byte is a probe: announce, close. */
static void
answer_probe(struct sniff *sn)
{
	const uint8_t *ann = rock_engine_announcement(sn->d->engine);

	rlog_debug(&sn->d->log, "probe from a rock client: announcing");
	(void)send(sn->fd, ann, ROCK_ANNOUNCE_LEN, MSG_NOSIGNAL | MSG_DONTWAIT);
	close(sn->fd);
	rockd_session_probed(sn->d);
}

/* Refusals come as fast as strangers connect: their lines have a budget. */
#define refusal(d, ...) \
	rlog_limited(&(d)->log, rock_engine_stranger_log((d)->engine, \
	    ROCK_STRANGER_REFUSAL), ROCK_LOG_WARN, __VA_ARGS__)

static void
to_plain(struct sniff *sn)
{
	rockd_relay_start(sn->d, &sn->backend, sn->fd, sn->buf, sn->have);
}

/* The whole hello is read by now, so a refusal is a clean ERROR, not a
 * reset over unread bytes. */
static void
rock_hello(struct rock_handshake *hs, void *arg)
{
	struct rockd_backend *b = arg;
	struct rockd *d = b->daemon;

	if (hs == NULL) {
		free(b);		/* the handshake died before its hello */
		return;
	}
	if (rock_engine_make_room(d->engine, d->max_rocks,
	    rock_handshake_peer(hs)) != 0) {
		refusal(d, "%zu rocks, none that a newcomer may push out: "
		    "refusing another", d->max_rocks);
		rock_handshake_reject(hs, ROCK_WERR_BUSY, "too many rocks");
	} else {
		rockd_rock_start(d, b, hs);
	}
	free(b);
}

/* ERROR BUSY, so the client's connect fails as refused, not garbled.
 * What its first flight brought so far is read first: a close over
 * unread bytes is a reset, which can overtake the ERROR, and a client
 * reset before its session makes the handshake again. */
static void
refuse_busy(struct rockd *d, evutil_socket_t fd)
{
	uint8_t out[ROCK_ERROR_MAX_LEN];
	size_t n = rock_error_encode(ROCK_WERR_BUSY, "busy", out);

	d->n.refused_busy++;
	(void)rock_discard_unread(fd);

	(void)send(fd, out, n, MSG_NOSIGNAL | MSG_DONTWAIT);
	close(fd);
}

static void
to_rock(struct sniff *sn, enum rock_sniff kind)
{
	struct rockd *d = sn->d;
	struct rockd_backend *b;

	if (rock_engine_nhandshakes(d->engine) >= ROCKD_MAX_HANDSHAKES) {
		refusal(d, "%d handshakes in progress: refusing another",
		    ROCKD_MAX_HANDSHAKES);
		refuse_busy(d, sn->fd);
		return;
	}
	if (kind == ROCK_SNIFF_RECONNECT) {
		rock_server_reconnect(d->engine, sn->fd, sn->buf, sn->have);
		return;
	}
	if ((b = malloc(sizeof(*b))) == NULL) {
		refuse_busy(d, sn->fd);
		return;
	}
	*b = sn->backend;
	b->daemon = d;
	rock_server_handshake(d->engine, sn->fd, sn->buf, sn->have, sn->rtt_ms,
	    rock_hello, b);
}

static void
on_sniff(evutil_socket_t fd, short what, void *arg)
{
	struct sniff *sn = arg;
	enum rock_sniff kind;

	/* What came by the deadline counts, even if its event is still to
	 * run; still nothing: a client of a server-speaks-first protocol. */
	kind = rock_sniff_read(fd, sn->buf, &sn->have, 0);
	if (kind == ROCK_SNIFF_MORE && !(what & EV_TIMEOUT))
		return;
	if (kind == ROCK_SNIFF_MORE) {
		if (sn->have == 0)
			rlog_debug(&sn->d->log, "no byte in %d ms: a plain "
			    "client", sn->wait_ms);
		else
			rlog_debug(&sn->d->log, "%zu bytes of a rock's first "
			    "%d in %d ms: a plain client", sn->have,
			    ROCK_MAGIC_LEN, sn->wait_ms);
		kind = ROCK_SNIFF_PLAIN;
	}
	if (kind == ROCK_SNIFF_PROBE)
		answer_probe(sn);
	else if (kind == ROCK_SNIFF_PLAIN)
		to_plain(sn);
	else
		to_rock(sn, kind);
	sniff_free(sn);
}

void
rockd_sniff_start(struct rockd *d, const struct rockd_service *svc,
    evutil_socket_t client)
{
	struct sniff *sn = calloc(1, sizeof(*sn));
	int rtt_ms, ms = rock_first_bytes_ms(client, svc->sniff_ms, &rtt_ms);
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	if (sn == NULL) {
		close(client);
		return;
	}
	sn->rtt_ms = rtt_ms;
	sn->d = d;
	sn->backend = svc->backend;
	sn->fd = client;
	sn->wait_ms = ms;
	sn->ev = event_new(d->base, client, EV_READ | EV_PERSIST, on_sniff, sn);
	if (sn->ev == NULL || event_add(sn->ev, &tv) != 0) {
		if (sn->ev != NULL)
			event_free(sn->ev);
		free(sn);
		close(client);
		return;
	}
	d->nsniffs++;
}
