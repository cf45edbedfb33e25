/* fuzz_status.c: libFuzzer harness for the client's status exchange: the server's answer to a status request, read by rock_status.c. */
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

/* Byte 0: bit 0 the answer gets the right tag; byte 1: rock 0, a
 * connected client (fuzz_rock_add); the rest: the server's answer, then
 * its FIN. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_world *w = fuzz_world();
	struct rock_session *s;
	uint8_t ans[512];
	size_t n;
	int64_t flags;
	int fd, round;

	if (size < 2 || size - 2 > sizeof(ans))
		return 0;
	fuzz_server_listen(&srv, "status");
	n = size - 2;
	memcpy(ans, data + 2, n);
	if ((s = fuzz_rock_add(w, 0, (data[1] | 2) & ~1u)) == NULL ||
	    s->state != ROCK_ST_CONNECTED) {
		fuzz_world_clear(w);
		return 0;
	}
	memcpy(&s->peer, &srv.addr, srv.len);
	s->peer_len = srv.len;
	rock_status_send(s);
	FUZZ_CHECK(s->status != NULL);
	FUZZ_CHECK(fuzz_world_run_until_readable(w, srv.fd, 5000));
	FUZZ_CHECK((fd = accept4(srv.fd, NULL, NULL, SOCK_CLOEXEC)) >= 0);
	flags = fuzz_server_answer(w, fd, data[0] & 1, ans, n);
	FUZZ_CHECK(flags < 0 || (flags & ROCK_FLAG_STATUS));
	/* The answer or the FIN ends the exchange: none may be left open. */
	for (round = 0; round < 64 && w->r[0].s != NULL &&
	    w->r[0].s->status != NULL; round++)
		fuzz_world_run(w, 1);
	FUZZ_CHECK(w->r[0].s == NULL || w->r[0].s->status == NULL);
	fuzz_world_clear(w);
	return 0;
}
