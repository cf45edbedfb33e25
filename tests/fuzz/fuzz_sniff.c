/* fuzz_sniff.c: libFuzzer harness for rockd's first bytes (daemon/sniff.c): a client's bytes, in two pieces, then its FIN, told apart as probe, rock, reconnect or plain and handed on. */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rockd.h"
#include "fuzz.h"
#include "fuzz_engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The backend: an address in the abstract namespace where nothing
 * listens, so relays and rocks end at once with the backend refused. */
static void
backend_nowhere(struct rockd_backend *b)
{
	memset(b, 0, sizeof(*b));
	snprintf(b->spec, sizeof(b->spec), "nowhere");
	b->len = fuzz_local_addr((struct sockaddr_un *)&b->addr, "nowhere");
}

static int
all_gone(const struct rockd *d)
{
	return d->relays == NULL && d->rocks == NULL &&
	    rock_engine_nhandshakes(d->engine) == 0;
}

/* Byte 0: bit 0 the engine's own announcement first (a valid hello can
 * then follow); byte 1: where the first piece ends; the rest: the
 * client's bytes. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_world *w = fuzz_world();
	static struct rockd d;
	struct rockd_service svc;
	uint8_t buf[ROCK_ANNOUNCE_LEN + 4096];
	size_t n = 0, first;
	int sv[2], round;

	if (size < 2 || size - 2 > 4096)
		return 0;
	signal(SIGPIPE, SIG_IGN);	/* as rockd's main() does */
	memset(&d, 0, sizeof(d));
	d.base = w->base;
	d.log = w->log;
	d.engine = w->e;
	d.max_rocks = FUZZ_ROCKS;
	memset(&svc, 0, sizeof(svc));
	backend_nowhere(&svc.backend);
	svc.sniff_ms = ROCKD_DEFAULT_SNIFF_MS;
	if (data[0] & 1) {
		memcpy(buf, rock_engine_announcement(w->e), ROCK_ANNOUNCE_LEN);
		n = ROCK_ANNOUNCE_LEN;
	}
	memcpy(buf + n, data + 2, size - 2);
	n += size - 2;
	first = data[1] < n ? data[1] : n;
	FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	rockd_sniff_start(&d, &svc, sv[0]);
	FUZZ_CHECK(send(sv[1], buf, first, MSG_DONTWAIT) == (ssize_t)first);
	fuzz_world_run(w, 2);
	/* rockd may have closed already (a plain client whose relay failed). */
	(void)send(sv[1], buf + first, n - first, MSG_DONTWAIT | MSG_NOSIGNAL);
	shutdown(sv[1], SHUT_WR);
	/* The FIN decides whatever the bytes left open; what was handed on
	 * ends at the backend that is not there. */
	for (round = 0; round < 64 && !all_gone(&d); round++)
		fuzz_world_run(w, 1);
	fuzz_world_run(w, 2);
	FUZZ_CHECK(all_gone(&d));
	close(sv[1]);
	fuzz_world_clear(w);
	return 0;
}
