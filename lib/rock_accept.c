/* rock_accept.c: what the server's handshakes and reconnects share: reads under one deadline, signed refusals and their budget, the sniff. */
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

/*
 * A refusal of a reconnect request costs an Ed25519 signature, the
 * dearest thing a stranger can make us do: for a request nobody proved
 * (an unknown id, a wrong key, a malformed request), and for a proven one
 * replayed from anywhere (SUPERSEDED; its tag is not bound to the
 * connection). So refusals are signed from a bucket of a second's worth,
 * refilled at refusal_signs_per_s: the clients of a rockd restarted
 * without a hand-over all learn at once that their sessions are gone, and
 * a flood of forged or replayed requests costs what as many plain
 * connections do. Over the budget the connection is reset unanswered,
 * which a client takes for a failed attempt: it tries again later.
 */
int
rock_accept_may_sign(struct rock_engine *e)
{
	int64_t now = rock_now_ms(), add, rate = e->cfg.refusal_signs_per_s;

	if (rate <= 0)
		return 1;
	if (e->refusal_signs_ms == 0)
		e->refusal_signs_ms = now - 1000;
	add = (now - e->refusal_signs_ms) * rate / 1000;
	if (add > 0) {
		e->refusal_signs = add >= rate - e->refusal_signs ? (int)rate :
		    e->refusal_signs + (int)add;
		e->refusal_signs_ms += add * 1000 / rate;
		if (e->refusal_signs == rate)
			e->refusal_signs_ms = now;
	}
	if (e->refusal_signs == 0)
		return 0;
	e->refusal_signs--;
	return 1;
}

/* Signed over what the client sent on this connection, which its nonce
 * makes fresh: a client acts only on a refusal of its own request. */
void
rock_accept_send_error(const struct rock_engine *e, int fd, uint8_t code,
    const char *text, const uint8_t *got, size_t ngot)
{
	uint8_t out[ROCK_ERROR_MAX_LEN];
	size_t n = rock_error_encode(code, text, out);

	rock_answer_sign(out + n - ROCK_SIG_LEN, &e->ident, ROCK_ANSWER_ERROR,
	    got, ngot, out, n - ROCK_SIG_LEN);
	(void)rock_sys.send(fd, out, n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Reads, and one deadline for the whole handshake that reads do not push
 * back: a client trickling a byte at a time still runs out of time. The
 * deadline follows the round trip of the connection's own handshake. */
int
rock_accept_arm(struct rock_engine *e, struct event **ev, struct event **deadline, int fd,
    int rtt_ms, event_callback_fn on_read, event_callback_fn on_deadline, void *arg)
{
	int ms = rock_handshake_ms(e, rtt_ms >= 0 ? rtt_ms : rock_tcp_rtt_ms(fd));
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	*ev = event_new(e->base, fd, EV_READ | EV_PERSIST, on_read, arg);
	*deadline = evtimer_new(e->base, on_deadline, arg);
	if (*ev == NULL || *deadline == NULL)
		return -1;
	return event_add(*ev, NULL) | evtimer_add(*deadline, &tv);
}

void
rock_accept_disarm(struct event **ev, struct event **deadline)
{
	if (*ev != NULL)
		event_free(*ev);
	if (*deadline != NULL)
		event_free(*deadline);
	*ev = *deadline = NULL;
}

/* 1: have `want` bytes; 0: not yet; -1: closed or failed. */
int
rock_accept_fill(int fd, uint8_t *buf, size_t *have, size_t want)
{
	ssize_t got;

	got = rock_sys.recv(fd, buf + *have, want - *have, MSG_DONTWAIT);
	if (got < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -1;
	if (got == 0)
		return -1;
	*have += (size_t)got;
	return *have == want ? 1 : 0;
}

enum rock_sniff
rock_sniff_read(int fd, uint8_t buf[ROCK_MAGIC_LEN], size_t *have, int peek)
{
	size_t from = peek ? 0 : *have;
	ssize_t n;

	n = rock_sys.recv(fd, buf + from, ROCK_MAGIC_LEN - from,
	    MSG_DONTWAIT | (peek ? MSG_PEEK : 0));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return ROCK_SNIFF_MORE;
	if (n == 0 && *have == 0)
		return ROCK_SNIFF_PROBE;
	if (n <= 0)
		return ROCK_SNIFF_PLAIN;
	*have = from + (size_t)n;
	return rock_sniff(buf, *have);
}

