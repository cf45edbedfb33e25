/* fuzz_dial.c: libFuzzer harness for a client's reconnect: the server's answer to a reconnect attempt, read by rock_dial.c. */
#include "config.h"

#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rock_crypto.h"
#include "fuzz.h"
#include "fuzz_engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The "server", at a local address (fuzz_local_addr). */
static struct fuzz_server srv = { .fd = -1 };

/* The rock suspended, its first attempt dialled at once. */
static int
suspend_and_dial(struct fuzz_world *w, struct rock_session *s)
{
	struct pollfd p = { srv.fd, POLLIN, 0 };
	int round;

	memcpy(&s->peer, &srv.addr, srv.len);
	s->peer_len = srv.len;
	rock_session_fail(s, "fuzz: the path went down");
	if (w->r[0].s == NULL || s->state != ROCK_ST_SUSPENDED)
		return -1;
	rock_dial_schedule(s, 1);
	for (round = 0; round < 16 && poll(&p, 1, 0) == 0; round++)
		fuzz_world_run(w, 1);
	FUZZ_CHECK(poll(&p, 1, 5000) == 1);
	return accept4(srv.fd, NULL, NULL, SOCK_CLOEXEC);
}

/* Byte 0: bit 0 the answer gets the right tag; byte 1: rock 0, a
 * connected client (fuzz_rock_add), then suspended; the rest: the
 * server's answer to its first attempt, then its FIN. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_world *w = fuzz_world();
	struct rock_session *s;
	uint8_t ans[512];
	size_t n;
	int fd, round;

	if (size < 2 || size - 2 > sizeof(ans))
		return 0;
	fuzz_server_listen(&srv, "dial");
	fuzz_server_drain(&srv);
	n = size - 2;
	memcpy(ans, data + 2, n);
	if ((s = fuzz_rock_add(w, 0, (data[1] | 2) & ~1u)) == NULL ||
	    s->state != ROCK_ST_CONNECTED || (fd = suspend_and_dial(w, s)) < 0) {
		fuzz_world_clear(w);
		return 0;
	}
	/* A rock that shut or saw an end may ask for a status first. */
	(void)fuzz_server_answer(w, fd, data[0] & 1, ans, n);
	/* The answer or the FIN ends that attempt: the rock is connected
	 * again, or still suspended with the attempt closed. */
	for (round = 0; round < 64 && w->r[0].s != NULL &&
	    w->r[0].s->state == ROCK_ST_SUSPENDED && w->r[0].s->dial != NULL &&
	    w->r[0].s->dial->a[0].fd >= 0; round++)
		fuzz_world_run(w, 1);
	FUZZ_CHECK(w->r[0].s == NULL || w->r[0].s->state != ROCK_ST_SUSPENDED ||
	    w->r[0].s->dial == NULL || w->r[0].s->dial->a[0].fd < 0);
	fuzz_world_clear(w);
	return 0;
}
