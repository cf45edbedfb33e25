/* fuzz_engine.c: the fixture of the engine's harnesses: one engine on loopback, rocks with known ids and keys. */
#include "config.h"

#include <arpa/inet.h>
#include <poll.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rock_err.h"
#include "fuzz.h"
#include "fuzz_engine.h"

static struct fuzz_world world;
static uint8_t keys[FUZZ_ROCKS][2][ROCK_KEY_LEN];

static void
on_closed(struct rock_session *s, int err, void *arg)
{
	struct fuzz_rock *fr = arg;

	(void)err;
	fr->s = NULL;
	rock_session_free(s);
}

/* The owner's side: what arrives is dropped, as a sink would. */
static void
on_data(struct rock_session *s, const uint8_t *p, size_t n, void *arg)
{
	(void)s;
	(void)p;
	(void)n;
	(void)arg;
}

const struct rock_session_cbs fuzz_rock_cbs = {
	on_data, NULL, NULL, NULL, on_closed, NULL
};

struct fuzz_world *
fuzz_world(void)
{
	struct sockaddr_in lo = { .sin_family = AF_INET,
	    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int i, k;

	if (world.e != NULL)
		return &world;
	FUZZ_CHECK(rock_crypto_init() == 0);
	/* Lines go to /dev/null: formatted, as in rockd, but not shown. */
	rock_config_defaults(&world.logcfg);
	world.logcfg.log_sink = ROCK_LOG_FILE;
	strcpy(world.logcfg.log_path, "/dev/null");
	rock_log_configure(&world.log, &world.logcfg, "fuzz");
	FUZZ_CHECK((world.base = event_base_new()) != NULL);
	FUZZ_CHECK(rock_engine_new(&world.e, world.base, &world.log, NULL,
	    (struct sockaddr *)&lo, sizeof(lo)) == 0);
	for (i = 0; i < FUZZ_ROCKS; i++)
		for (k = 0; k < 2; k++)
			memset(keys[i][k], 0x40 + 16 * i + k, ROCK_KEY_LEN);
	for (i = 0; i < FUZZ_ROCKS; i++)
		world.r[i].peer_fd = -1;
	return &world;
}

void
fuzz_rock_id(int i, uint8_t id[ROCK_ID_LEN])
{
	memset(id, 0xa0 + i, ROCK_ID_LEN);
}

const uint8_t *
fuzz_rock_peer_key(int i)
{
	return keys[i][1];
}

int
fuzz_rock_index(const uint8_t id[ROCK_ID_LEN])
{
	uint8_t want[ROCK_ID_LEN];
	int i;

	for (i = 0; i < FUZZ_ROCKS; i++) {
		fuzz_rock_id(i, want);
		if (memcmp(id, want, ROCK_ID_LEN) == 0)
			return i;
	}
	return -1;
}

/* Bytes the owner sends: they go to the kernel and stay in the ring. */
static void
send_some(struct rock_session *s, size_t n)
{
	uint8_t buf[4096];
	size_t i;

	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)i;
	while (n > 0) {
		size_t k = n < sizeof(buf) ? n : sizeof(buf);

		FUZZ_CHECK(rock_session_send(s, buf, k) == 0);
		n -= k;
	}
}

/* setup: bit 0 server, bit 1 connected, bit 2 we shut down writing,
 * bit 3 we read the peer's end, bits 4-7 sixteenths of 8 KiB sent. */
struct rock_session *
fuzz_rock_add(struct fuzz_world *w, int i, unsigned setup)
{
	struct fuzz_rock *fr = &w->r[i];
	struct rock_keys k;
	uint8_t id[ROCK_ID_LEN];
	int sv[2];

	fuzz_rock_id(i, id);
	memcpy(k.tx, keys[i][0], ROCK_KEY_LEN);
	memcpy(k.rx, keys[i][1], ROCK_KEY_LEN);
	if (rock_session_new(w->e, setup & 1 ? ROCK_ROLE_SERVER : ROCK_ROLE_CLIENT,
	    id, &k, 65536, &fuzz_rock_cbs, fr, &fr->s) != 0)
		return fr->s = NULL;
	fr->s->features = ROCK_FEAT_ALL;
	if (setup & 2) {
		FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
		fr->peer_fd = sv[1];
		FUZZ_CHECK(rock_stream_attach(fr->s, sv[0]) == 0);
		send_some(fr->s, (setup >> 4) * 512);
		if (setup & 4)
			rock_session_shutdown(fr->s);
		fuzz_world_run(w, 4);
	}
	if (fr->s != NULL && (setup & 8))
		fr->s->flags |= ROCK_FLAG_EOF_SEEN;
	return fr->s;
}

socklen_t
fuzz_local_addr(struct sockaddr_un *un, const char *name)
{
	memset(un, 0, sizeof(*un));
	un->sun_family = AF_UNIX;
	snprintf(un->sun_path + 1, sizeof(un->sun_path) - 1, "rock-fuzz-%s-%ld",
	    name, (long)getpid());
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
	    strlen(un->sun_path + 1));
}

void
fuzz_world_run(struct fuzz_world *w, int n)
{
	while (n-- > 0)
		if (event_base_loop(w->base, EVLOOP_NONBLOCK) != 0)
			break;
}

/* On a loaded machine a timer the engine waits on may come due only after
 * many idle rounds: the loop runs until fd is readable or ms have passed. */
int
fuzz_world_run_until_readable(struct fuzz_world *w, int fd, int ms)
{
	struct pollfd p = { fd, POLLIN, 0 };
	int64_t end = rock_now_ms() + ms;

	for (;;) {
		fuzz_world_run(w, 1);
		if (poll(&p, 1, 1) == 1)
			return 1;
		if (rock_now_ms() >= end)
			return 0;
	}
}

void
fuzz_world_clear(struct fuzz_world *w)
{
	int i;

	for (i = 0; i < FUZZ_ROCKS; i++) {
		if (w->r[i].s != NULL)
			rock_session_free(w->r[i].s);
		w->r[i].s = NULL;
		if (w->r[i].peer_fd >= 0)
			close(w->r[i].peer_fd);
		w->r[i].peer_fd = -1;
	}
	rock_farewell_free_all(w->e);
	FUZZ_CHECK(rock_engine_nsessions(w->e) == 0);
}

void
fuzz_server_listen(struct fuzz_server *sv, const char *name)
{
	if (sv->fd >= 0)
		return;
	sv->len = fuzz_local_addr(&sv->addr, name);
	FUZZ_CHECK((sv->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0);
	FUZZ_CHECK(bind(sv->fd, (struct sockaddr *)&sv->addr, sv->len) == 0);
	FUZZ_CHECK(listen(sv->fd, 16) == 0);
}

int
fuzz_server_request(int fd, uint8_t nonce[ROCK_NONCE_LEN], uint32_t *flags)
{
	uint8_t req[ROCK_RECONNECT_REQ_LEN];
	struct rock_reconnect_req rq;

	if (recv(fd, req, sizeof(req), MSG_WAITALL) != (ssize_t)sizeof(req))
		return -1;
	FUZZ_CHECK(rock_reconnect_req_decode(&rq, req) == 0);
	memcpy(nonce, rq.nonce, ROCK_NONCE_LEN);
	*flags = rq.flags;
	return 0;
}

void
fuzz_server_drain(struct fuzz_server *sv)
{
	struct pollfd p = { sv->fd, POLLIN, 0 };
	int fd;

	while (poll(&p, 1, 0) == 1 &&
	    (fd = accept4(sv->fd, NULL, NULL, SOCK_CLOEXEC)) >= 0)
		close(fd);
}

int64_t
fuzz_server_answer(struct fuzz_world *w, int fd, int tag, uint8_t *ans,
    size_t n)
{
	uint8_t nonce[ROCK_NONCE_LEN], id[ROCK_ID_LEN];
	uint32_t flags;
	int64_t r = -1;

	if (fuzz_world_run_until_readable(w, fd, 5000) &&
	    fuzz_server_request(fd, nonce, &flags) == 0) {
		if (tag && n >= ROCK_RECONNECT_OK_LEN) {
			fuzz_rock_id(0, id);
			rock_ok_tag(ans + ROCK_RECONNECT_OK_LEN - ROCK_TAG_LEN,
			    fuzz_rock_peer_key(0), id, nonce, ans);
		}
		(void)send(fd, ans, n, MSG_NOSIGNAL);
		r = flags;
	}
	close(fd);
	return r;
}
