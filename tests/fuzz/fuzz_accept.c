/* fuzz_accept.c: libFuzzer harness for the server side of a data connection: a client's hello, or its reconnect or status request, read by rock_accept.c from a socket. */
#include "config.h"

#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rock_crypto.h"
#include "fuzz.h"
#include "fuzz_engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HELLO_TOTAL (ROCK_ANNOUNCE_LEN + ROCK_CLIENT_HELLO_LEN)
#define ACCEPTED (FUZZ_ROCKS - 1)	/* the slot of a rock a hello made */

static int accept_hello;

/* The owner's answer to a complete hello: accept it or refuse it. */
static void
on_hello(struct rock_handshake *hs, void *arg)
{
	struct fuzz_world *w = arg;

	if (hs == NULL)
		return;
	if (!accept_hello) {
		rock_handshake_reject(hs, ROCK_WERR_BACKEND, "fuzz refuses");
		return;
	}
	FUZZ_CHECK(w->r[ACCEPTED].s == NULL);
	(void)rock_handshake_accept(hs, &fuzz_rock_cbs, &w->r[ACCEPTED],
	    &w->r[ACCEPTED].s);
}

/* A request for a rock of the fixture gets its right tag: a fuzzer cannot
 * forge one, and what lies past the tag is what matters. */
static void
seal_request(uint8_t *req, size_t n)
{
	int i;

	if (n < ROCK_RECONNECT_REQ_LEN || (i = fuzz_rock_index(req + 9)) < 0)
		return;
	rock_request_tag(req + ROCK_RECONNECT_REQ_LEN - ROCK_TAG_LEN,
	    fuzz_rock_peer_key(i), req);
}

/* Byte 0: bit 0 a reconnect (else a hello), bit 1 the engine's own
 * announcement first (a hello) or the right tag (a request), bit 2 the
 * owner accepts the hello; byte 1: rock 0, a server (fuzz_rock_add);
 * byte 2: how many bytes rockd read before handing over (mod 9); the
 * rest: what the client sends, then its FIN. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_world *w = fuzz_world();
	uint8_t buf[HELLO_TOTAL + 4096];
	size_t n = 0, early;
	int sv[2], round;

	if (size < 3 || size - 3 > 4096)
		return 0;
	if (!(data[0] & 1) && (data[0] & 2)) {
		memcpy(buf, rock_engine_announcement(w->e), ROCK_ANNOUNCE_LEN);
		n = ROCK_ANNOUNCE_LEN;
	}
	memcpy(buf + n, data + 3, size - 3);
	n += size - 3;
	if ((data[0] & 3) == 3)
		seal_request(buf, n);
	accept_hello = (data[0] & 4) != 0;
	(void)fuzz_rock_add(w, 0, data[1] | 1);
	early = data[2] % 9 < n ? data[2] % 9 : n;
	FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	FUZZ_CHECK(send(sv[1], buf + early, n - early, MSG_DONTWAIT) ==
	    (ssize_t)(n - early));
	shutdown(sv[1], SHUT_WR);
	if (data[0] & 1)
		rock_server_reconnect(w->e, sv[0], buf, early);
	else
		rock_server_handshake(w->e, sv[0], buf, early, -1, on_hello, w);
	/* The client's FIN ends every handshake: none may be left behind. */
	for (round = 0; round < 64 && rock_engine_nhandshakes(w->e) > 0; round++)
		fuzz_world_run(w, 1);
	FUZZ_CHECK(rock_engine_nhandshakes(w->e) == 0);
	fuzz_world_run(w, 4);
	close(sv[1]);
	fuzz_world_clear(w);
	return 0;
}
