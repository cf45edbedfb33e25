/* rock_probe.c: the client's Enhancement Detection Protocol probe, and the cache of its answers (here, and in the file the user's processes share). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rock_engine_int.h"
#include "rock_err.h"
#include "rock_probe_file.h"
#include "rock_sys.h"

/* The probe's round trip: the SYN's as TCP measured it (timestamps make
 * it valid even when the SYN went twice), else the connect's time. *up:
 * when the connection came up, from when TCP had the SYN-ACK: a thread
 * slow to wake from the connect (a loaded host) would else start our
 * clock after rockd's, and take its relayed backend's answer for an
 * ordinary server's. */
static int
probe_rtt_ms(int fd, int64_t t0, int64_t *up)
{
	struct rock_tcp_sample t;
	int64_t now = rock_now_ms();

	*up = now;
	if (rock_tcp_sample(fd, &t) != 0)
		return (int)(now - t0);
	if (t.last_ack_recv_ms <= now - t0)
		*up = now - t.last_ack_recv_ms;
	return t.rtt_us > 0 ? (int)(t.rtt_us / 1000) : (int)(now - t0);
}

/* How long a probe waits for the announcement: two lost segments
 * survive (our FIN resent after our RTO, rockd's answer after its own, its
 * round trip maybe longer than ours by the path's jitter). At least
 * 500 ms: what a silent ordinary server costs on first contact. */
static int
announce_wait_ms(int rtt)
{
	int ms = 2 * rock_exchange_ms(rtt);

	return ms < 500 ? 500 : ms;
}

/* Whether a probe's end (FIN) is still unacknowledged: a probe sends no
 * byte, so past the SYN, the FIN is all there is to acknowledge. */
static int
fin_unacked(int fd)
{
	struct rock_tcp_sample t;

	return rock_tcp_sample(fd, &t) == 0 && t.bytes_acked < 2;
}

/* When a rockd's wait for a silent client's first bytes has ended, after
 * the connection was up here: a little early, for the clocks' skew. */
static int
late_ms(int rtt)
{
	return rtt + ROCK_FIRST_BYTES_MS - 50;
}

/* A rockd that has not had our FIN when its wait for a silent client's
 * first bytes ends (at least ROCK_FIRST_BYTES_MS after the handshake)
 * takes the probe for a plain client and relays it to its backend. Seen
 * on the cellular profile: a handshake round trip shortened by reordering
 * made that wait 800 ms, and the FIN was lost. An answer that is not an
 * announcement may then be rockd's, and the probe went unheard: our FIN
 * still unacknowledged when that wait ended (fin_late; the backend's
 * answer may well come after the FIN's resend got through); silence with
 * our FIN unacknowledged; or an answer as late as that wait that came
 * while our FIN was unacknowledged, or that was the end (rockd's backend
 * ending at our late FIN). An ordinary server that greets late has had
 * our FIN in time: it stands. */
static int
went_unheard(int fd, int r, int64_t waited_ms, int rtt, int fin_late,
    int first_unacked, int first_bytes)
{
	if (fin_late)
		return 1;
	if (r == ROCK_ERR_TIMEOUT)
		return fin_unacked(fd);
	return waited_ms >= late_ms(rtt) && (first_unacked || !first_bytes);
}

/* Waits for the answer's first byte; *fin_late: our FIN was still
 * unacknowledged when a rockd's wait for a silent client ended. */
static int
wait_answer(int fd, int64_t up, int rtt, int64_t deadline, int *fin_late)
{
	int64_t late = up + late_ms(rtt);
	int r;

	*fin_late = 0;
	if (late >= deadline)
		return rock_blocking_wait(fd, POLLIN, deadline);
	if ((r = rock_blocking_wait(fd, POLLIN, late)) != ROCK_ERR_TIMEOUT)
		return r;
	*fin_late = fin_unacked(fd);
	return rock_blocking_wait(fd, POLLIN, deadline);
}

/* EDP probe: connect, shut our side, read to EOF. Exactly an announcement
 * means enhanced; anything else, an ordinary server. Silence past the wait
 * is reported as not enhanced too, with *silent set: a rockd may just be
 * slow, so that answer is not worth remembering. *unheard: see
 * went_unheard(). The deadline bounds the connect
 * (rock_probe_budget_ms) and the wait. */
static int
probe_once(const struct sockaddr *addr, socklen_t len, int64_t deadline,
    uint8_t ann[ROCK_ANNOUNCE_LEN], int *silent, int *unheard)
{
	int64_t t0 = rock_now_ms(), up, first, wait_end;
	struct rock_announce a;
	uint8_t extra;
	int fd, r, rtt, fin_late, first_unacked = 0, first_bytes = 0;

	*silent = *unheard = 0;
	if ((r = rock_blocking_dial(addr, len, deadline, &fd)) != 0)
		return r;
	/* rockd's wait for a silent client starts about when the connection
	 * came up, not when our FIN leaves: a client slow to send it (a
	 * loaded host) would else take rockd's relayed backend for an
	 * ordinary server's answer. */
	rtt = probe_rtt_ms(fd, t0, &up);
	if ((wait_end = rock_now_ms() + announce_wait_ms(rtt)) < deadline)
		deadline = wait_end;
	rock_sys.shutdown(fd, SHUT_WR);
	/* The magic first: an ordinary server's first bytes end it early. */
	r = wait_answer(fd, up, rtt, deadline, &fin_late);
	first = rock_now_ms();
	if (r == 0) {
		first_unacked = fin_unacked(fd);
		first_bytes = rock_sys.recv(fd, &extra, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
		r = rock_blocking_read(fd, ann, ROCK_MAGIC_LEN, deadline);
	}
	if (r == 0 && memcmp(ann, rock_magic_announce, ROCK_MAGIC_LEN) != 0)
		r = ROCK_ERR_NOT_ENHANCED;
	if (r == 0)
		r = rock_blocking_read(fd, ann + ROCK_MAGIC_LEN,
		    ROCK_ANNOUNCE_LEN - ROCK_MAGIC_LEN, deadline);
	if (r == 0) {
		/* Then the end: anything more is not an announcement. */
		r = rock_blocking_read(fd, &extra, 1, deadline);
		r = r == ROCK_ERR_SHORT ? 0 : r == ROCK_ERR_TIMEOUT ? r :
		    ROCK_ERR_NOT_ENHANCED;
	}
	if (r != 0)
		*unheard = went_unheard(fd, r, first - up, rtt, fin_late,
		    first_unacked, first_bytes);
	rock_sys.close(fd);
	if (r == 0 && rock_announce_decode(&a, ann) == 0 &&
	    rock_version_pick(ROCK_VERSION, ROCK_VERSION, a.version_min,
	    a.version_max) != 0)
		return 0;
	if (r == ROCK_ERR_SYSTEM && errno != ECONNRESET)
		return r;
	*silent = r == ROCK_ERR_TIMEOUT;
	return ROCK_ERR_NOT_ENHANCED;
}

/* A probe, and another when the first went unheard, if the deadline
 * leaves time for it: the last answer stands. persist: the destination is
 * declared a rockd's (a mapped port), so silence there is a rockd slow to
 * answer (a loaded host, a lossy path), not a server that ignores our
 * end: it is probed again too, up to three times in all. */
static int
probe(const struct rock_log *log, const struct sockaddr *addr,
    socklen_t len, int64_t deadline, int persist,
    uint8_t ann[ROCK_ANNOUNCE_LEN], int *silent)
{
	int r, unheard, tries = 1;

	for (;;) {
		r = probe_once(addr, len, deadline, ann, silent, &unheard);
		if (r != ROCK_ERR_NOT_ENHANCED || rock_now_ms() >= deadline ||
		    !(unheard || (persist && *silent)) ||
		    tries >= (persist ? 3 : 2))
			return r;
		tries++;
		if (log != NULL)
			rlog_debug(log, "probe: %s: probing again", unheard ?
			    "no announcement, and our end may not have reached "
			    "a rockd in time" : "a mapped port silent");
	}
}

static struct probe_entry *
cache_find(struct rock_engine *e, const struct sockaddr *addr, socklen_t len)
{
	int64_t now = rock_now_ms();
	unsigned i;

	for (i = 0; i < PROBE_CACHE; i++) {
		struct probe_entry *p = &e->probes[i];

		if (p->len == len && memcmp(&p->addr, addr, len) == 0) {
			if (p->expires_ms > now)
				return p;
			p->len = 0;
		}
	}
	return NULL;
}

/* How long a probe's answer holds: ann NULL (an ordinary server, or none
 * at all) for a minute, so plain connections pay no probe; a rockd's
 * announcement for ten. */
static int64_t
cache_ttl_ms(const uint8_t *ann)
{
	return ann != NULL ? PROBE_CACHE_MS : PROBE_CACHE_PLAIN_MS;
}

/* ttl_ms: what is left of the answer's life (the shared file's entries
 * are part spent). */
static void
cache_put(struct rock_engine *e, const struct sockaddr *addr, socklen_t len,
    const uint8_t ann[ROCK_ANNOUNCE_LEN], int64_t ttl_ms)
{
	struct probe_entry *p = cache_find(e, addr, len);

	if (p == NULL) {
		p = &e->probes[e->probe_next];
		e->probe_next = (e->probe_next + 1) % PROBE_CACHE;
	}
	if (p->len != len || memcmp(&p->addr, addr, len) != 0)
		p->fo_misses = 0;
	memcpy(&p->addr, addr, len);
	p->len = len;
	p->enhanced = ann != NULL;
	if (ttl_ms > cache_ttl_ms(ann))
		ttl_ms = cache_ttl_ms(ann);
	p->expires_ms = rock_now_ms() + ttl_ms;
	if (ann != NULL)
		memcpy(p->announcement, ann, ROCK_ANNOUNCE_LEN);
}

int
rock_probe_budget_ms(int timeout_ms, int mapped)
{
	/* TCP resends a lost SYN after 1 s, then 2 s and 4 s more. */
	return timeout_ms + (mapped ? 1000 + 2000 : 1000 + 2000 + 4000);
}

int
rock_probe(const struct rock_log *log, const struct sockaddr *addr,
    socklen_t len, int timeout_ms, int persist, uint8_t ann[ROCK_ANNOUNCE_LEN],
    int *silent)
{
	return probe(log, addr, len, rock_now_ms() + timeout_ms, persist, ann,
	    silent);
}

void
rock_probe_remember(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, const uint8_t ann[ROCK_ANNOUNCE_LEN])
{
	rock_engine_enter(e);
	cache_put(e, addr, len, ann, cache_ttl_ms(ann));
	rock_engine_leave(e);
}

/* A server without Fast Open (the default for servers: the sysctl's 1
 * is clients only) gives no cookie: its connects asked for one in vain,
 * a setsockopt each. Two in a row that sent nothing in the SYN (the
 * first asks for the cookie) and the destination's connects stop trying
 * until its cache entry expires; one that did starts them again. */
void
rock_probe_fastopen_note(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, int tried, int sent)
{
	struct probe_entry *p;

	if (tried == ROCK_FO_NO || (sent && tried == ROCK_FO_TRY))
		return;
	rock_engine_enter(e);
	if ((p = cache_find(e, addr, len)) != NULL)
		p->fo_misses = sent ? 0 : p->fo_misses + 1;
	rock_engine_leave(e);
}

void
rock_engine_set_probe_file(struct rock_engine *e, struct rock_probe_file *pf)
{
	e->probe_file = pf;
}

/* Forgotten here and in the shared file: the next connect, ours or
 * another process's, probes. Without the owner's lock (file I/O). */
void
rock_probe_forget_everywhere(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len)
{
	rock_engine_enter(e);
	rock_probe_forget(e, addr, len);
	rock_engine_leave(e);
	rock_probe_file_put(e->probe_file, e->log, addr, len, NULL, 0);
}

void
rock_probe_forget(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len)
{
	struct probe_entry *p = cache_find(e, addr, len);

	if (p != NULL)
		p->len = 0;
}

int
rock_probe_found_plain(int r)
{
	/* A timeout here is the connect's: nothing answered the SYN. */
	return r == ROCK_ERR_NOT_ENHANCED || r == ROCK_ERR_TIMEOUT;
}

/* Lock held. The announcement this engine holds for a destination
 * found enhanced, and how to try Fast Open there: 1, or 0 when it holds
 * none (not probed, or found plain). */
int
rock_probe_cached(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, uint8_t ann[ROCK_ANNOUNCE_LEN], int *fastopen)
{
	struct probe_entry *p = cache_find(e, addr, len);

	if (p == NULL || !p->enhanced)
		return 0;
	e->stats.probe_cache_hits++;
	*fastopen = p->fo_misses >= 2 ? ROCK_FO_NO :
	    p->fo_misses == 1 ? ROCK_FO_MISSED : ROCK_FO_TRY;
	memcpy(ann, p->announcement, ROCK_ANNOUNCE_LEN);
	return 1;
}

/* The announcement for a destination: cached here, else in the file the
 * user's processes share, else from a probe (whose answer goes to both).
 * The file and the probe are read without the owner's lock: the probe
 * takes a round trip or more. *cached: the answer was not a probe's
 * just now, and may no longer hold. */
int
rock_probe_announcement(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, int64_t deadline, uint8_t ann[ROCK_ANNOUNCE_LEN],
    int *cached, int *fastopen)
{
	struct rock_probe_fact f;
	struct probe_entry *p;
	int r, err, silent;

	*cached = 1;
	*fastopen = ROCK_FO_TRY;
	rock_engine_enter(e);
	if (rock_probe_cached(e, addr, len, ann, fastopen)) {
		rock_engine_leave(e);
		return 0;
	}
	if ((p = cache_find(e, addr, len)) != NULL) {
		e->stats.probe_cache_hits++;	/* found plain */
		rock_engine_leave(e);
		return ROCK_ERR_NOT_ENHANCED;
	}
	rock_engine_leave(e);
	if (rock_probe_file_get(e->probe_file, e->log, addr, len, &f)) {
		rock_engine_enter(e);
		e->stats.probe_cache_hits++;
		cache_put(e, addr, len, f.enhanced ? f.announcement : NULL,
		    f.ttl_ms);
		rock_engine_leave(e);
		if (!f.enhanced)
			return ROCK_ERR_NOT_ENHANCED;
		memcpy(ann, f.announcement, ROCK_ANNOUNCE_LEN);
		if (f.has_ticket)
			rock_ticket_remember(e, addr, len, &f.ticket);
		rock_wipe(&f.ticket, sizeof(f.ticket));
		return 0;
	}
	*cached = 0;
	rock_engine_enter(e);
	e->stats.probes++;
	rock_engine_leave(e);
	r = probe(e->log, addr, len, deadline, 0, ann, &silent);
	err = errno;
	if (r == 0 || (rock_probe_found_plain(r) && !silent)) {
		rock_engine_enter(e);
		cache_put(e, addr, len, r == 0 ? ann : NULL,
		    cache_ttl_ms(r == 0 ? ann : NULL));
		rock_engine_leave(e);
		rock_probe_file_put(e->probe_file, e->log, addr, len,
		    r == 0 ? ann : NULL, cache_ttl_ms(r == 0 ? ann : NULL));
	}
	errno = err;
	return r;
}
