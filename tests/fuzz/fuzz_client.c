/* fuzz_client.c: libFuzzer harness for the client's side of the first connection (rock_client_open): the announcement a probe reads, then the server's answer to the hello. */
#include "config.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "fuzz_engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define ANSWERS 4	/* probe, hello; after a STALE, probe and hello again */
#define HELLO_TOTAL (ROCK_ANNOUNCE_LEN + ROCK_CLIENT_HELLO_LEN)

/* The "server", on its own thread: each connection gets the next answer
 * once the client has said its part (a probe's FIN, or the whole hello),
 * then a FIN. At a local address (fuzz_local_addr). */
struct server {
	int lfd;
	struct sockaddr_un addr;
	socklen_t len;
	const uint8_t *answer[ANSWERS];
	size_t nanswer[ANSWERS];
	int wake[2];		/* a byte here: the client is done, stop */
};

static void
serve_one(int fd, const uint8_t *answer, size_t n)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	uint8_t buf[HELLO_TOTAL];
	size_t have = 0;
	ssize_t got = 1;

	while (have < sizeof(buf) && got > 0 && poll(&p, 1, 2000) == 1)
		if ((got = recv(fd, buf + have, sizeof(buf) - have, 0)) > 0)
			have += (size_t)got;
	(void)send(fd, answer, n, MSG_NOSIGNAL);
	close(fd);
}

static void *
server_main(void *arg)
{
	struct server *sv = arg;
	struct pollfd p[2] = { { .fd = sv->lfd, .events = POLLIN },
	    { .fd = sv->wake[0], .events = POLLIN } };
	uint8_t b;
	int k = 0, fd;

	while (poll(p, 2, -1) > 0 && !(p[1].revents & POLLIN))
		if ((fd = accept4(sv->lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
			if (k < ANSWERS)
				serve_one(fd, sv->answer[k], sv->nanswer[k]);
			else
				close(fd);
			k++;
		}
	FUZZ_CHECK(read(sv->wake[0], &b, 1) == 1);
	return NULL;
}

static void
listen_once(struct server *sv)
{
	if (sv->lfd > 0)
		return;
	sv->len = fuzz_local_addr(&sv->addr, "client");
	FUZZ_CHECK((sv->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0);
	FUZZ_CHECK(bind(sv->lfd, (struct sockaddr *)&sv->addr, sv->len) == 0);
	FUZZ_CHECK(listen(sv->lfd, 16) == 0);
	FUZZ_CHECK(pipe2(sv->wake, O_CLOEXEC) == 0);
}

/* The input: up to four answers, each a 16-bit big-endian length and
 * that many bytes (the last one takes what is left). */
static void
split(struct server *sv, const uint8_t *p, size_t n)
{
	int k;

	for (k = 0; k < ANSWERS; k++) {
		size_t len = n;

		if (n >= 2 && k < ANSWERS - 1) {
			len = (size_t)(p[0] << 8 | p[1]);
			p += 2;
			n -= 2;
			if (len > n)
				len = n;
		}
		sv->answer[k] = p;
		sv->nanswer[k] = len;
		p += len;
		n -= len;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct server sv;
	struct fuzz_world *w = fuzz_world();
	pthread_t t;
	int r;

	listen_once(&sv);
	split(&sv, data, size);
	/* Every input probes: nothing is known of the server yet. */
	rock_probe_forget(w->e, (struct sockaddr *)&sv.addr, sv.len);
	FUZZ_CHECK(pthread_create(&t, NULL, server_main, &sv) == 0);
	r = rock_client_open(w->e, (struct sockaddr *)&sv.addr, sv.len, 2000,
	    &fuzz_rock_cbs, &w->r[0], &w->r[0].s);
	FUZZ_CHECK(write(sv.wake[1], "", 1) == 1);
	FUZZ_CHECK(pthread_join(t, NULL) == 0);
	if (r == 0)
		FUZZ_CHECK(w->r[0].s != NULL &&
		    rock_session_state(w->r[0].s) == ROCK_ST_CONNECTED);
	else
		w->r[0].s = NULL;
	fuzz_world_run(w, 2);
	fuzz_world_clear(w);
	return 0;
}
