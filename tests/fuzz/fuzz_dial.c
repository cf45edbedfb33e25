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

/* The rock suspended, its first attempt dialled at once; the server's
 * end of it, and in *number the attempt's number. */
static int
suspend_and_dial(struct fuzz_world *w, struct rock_session *s, unsigned *number)
{
	memcpy(&s->peer, &srv.addr, srv.len);
	s->peer_len = srv.len;
	rock_session_fail(s, "fuzz: the path went down");
	if (w->r[0].s == NULL || s->state != ROCK_ST_SUSPENDED)
		return -1;
	/* The backlog was empty: the first connection in it is this
	 * attempt, whatever the loop launched since. */
	*number = s->attempts + 1;
	rock_dial_schedule(s, 1);
	FUZZ_CHECK(fuzz_world_run_until_readable(w, srv.fd, 5000));
	return accept4(srv.fd, NULL, NULL, SOCK_CLOEXEC);
}

/* Attempt `number` of rock 0 still waits on its connection. */
static int
attempt_open(struct fuzz_world *w, unsigned number)
{
	struct rock_session *s = w->r[0].s;
	int i;

	if (s == NULL || s->state != ROCK_ST_SUSPENDED || s->dial == NULL)
		return 0;
	for (i = 0; i < ROCK_DIAL_ATTEMPTS; i++)
		if (s->dial->a[i].fd >= 0 && s->dial->a[i].number == number)
			return 1;
	return 0;
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
	unsigned number;
	int64_t end;
	int fd;

	if (size < 2 || size - 2 > sizeof(ans))
		return 0;
	fuzz_server_listen(&srv, "dial");
	fuzz_server_drain(&srv);
	n = size - 2;
	memcpy(ans, data + 2, n);
	if ((s = fuzz_rock_add(w, 0, (data[1] | 2) & ~1u)) == NULL ||
	    s->state != ROCK_ST_CONNECTED || (fd = suspend_and_dial(w, s, &number)) < 0) {
		fuzz_world_clear(w);
		return 0;
	}
	/* A rock that shut or saw an end may ask for a status first. */
	(void)fuzz_server_answer(w, fd, data[0] & 1, ans, n);
	/* The answer or the FIN ends that attempt: the rock is connected
	 * again, or still suspended with the attempt closed. Later attempts
	 * (a loaded machine's timers) may reuse its slot: it is known by its
	 * number. */
	end = rock_now_ms() + 5000;
	while (attempt_open(w, number) && rock_now_ms() < end)
		fuzz_world_run(w, 1);
	FUZZ_CHECK(!attempt_open(w, number));
	fuzz_world_clear(w);
	return 0;
}
