/* traffic.c: the WAN matrix's traffic: a paced stream and its timed receiver, echoed bursts on demand, a one-way push. */
/*
 * traffic source PORT RATE SECONDS OUT  backend on 127.0.0.1:PORT: accepts one
 *                                       connection, sends the pattern at RATE
 *                                       bytes/s for SECONDS or until OUT.stop
 *                                       exists (a copy in OUT), then its end,
 *                                       and waits for the peer's
 * traffic sink ADDR PORT OUT            client: reads to the end into OUT
 *                                       (unbuffered); prints "gap FROM TO"
 *                                       (wall-clock ms) for every pause of
 *                                       100 ms or more, and at the end "bytes
 *                                       N seconds S" (first byte to the end)
 * traffic bursts ADDR PORT BYTES        client: for each line on stdin, BYTES
 *                                       of the pattern out and the same back
 *                                       (an echo server); "burst N ok MS"
 * traffic push ADDR PORT BYTES          client: BYTES of the pattern, its end,
 *                                       then waits for the server's end;
 *                                       prints "seconds S" (connected to
 *                                       end: a rock's handshake is not a
 *                                       transfer's time)
 * traffic write ADDR PORT BYTES DIR     client: BYTES of the pattern, then
 *                                       creates DIR/written, waits for
 *                                       DIR/go, closes and exits at once
 *                                       (what is in flight then is the
 *                                       library's to finish)
 * traffic connect ADDR PORT N           client: N connections one after the
 *                                       other, each closed at once; prints
 *                                       each connect()'s time, "connect US"
 * traffic rounds ADDR PORT N BYTES      client: N connections; for each line on
 *                                       stdin, BYTES of the pattern out and
 *                                       back on each still up: "round R conn
 *                                       I ok", or "... error ENAME" / "eof" /
 *                                       "MISMATCH" (that one is then left)
 * traffic many ADDR PORT N BYTES        client: N connections, BYTES echoed
 *                                       on each, then all shut down, read to
 *                                       their end and closed at once; prints
 *                                       "closed N at MS" (wall clock)
 * traffic forked ADDR PORT BYTES WHO    client: connects, then forks; WHO
 *                                       (parent or child) writes BYTES of the
 *                                       pattern for each line on stdin, then
 *                                       its end, the other reads the echo:
 *                                       "burst N ok", then "end N bytes";
 *                                       WHO detach: the parent exits at
 *                                       once, the child runs bursts; WHO
 *                                       daemon: so, by daemon(1, 1) (its
 *                                       parent leaves by _exit); WHO exec:
 *                                       no fork, the program executes itself
 *                                       as `traffic inherited FD BYTES`, which
 *                                       runs the bursts on the rock; WHO
 *                                       exec-bare: so, without LD_PRELOAD in
 *                                       the new image's environment; WHO
 *                                       exec-closed: BYTES out, then an exec
 *                                       of /bin/true, the rock FD_CLOEXEC
 * traffic inherited FD BYTES            bursts (as above) on descriptor FD
 * traffic pattern BYTES                 the pattern on stdout
 * traffic serve PORT RATE BYTES RESET [http]
 *                                       backend on 127.0.0.1:PORT for many
 *                                       clients, a child each: BYTES of the
 *                                       text pattern at RATE bytes/s (with
 *                                       http: after the client's GET and an
 *                                       HTTP/1.0 header with no length),
 *                                       then the end; a reset at once when
 *                                       the file RESET exists
 * traffic text BYTES                    the text pattern on stdout
 *
 * Exit 0 when every byte was exact; otherwise 1 with the reason on stderr.
 * Run under `rock`, the clients' connections are rocks.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <limits.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "testtool.h"

#define CHUNK 65536
#define TICK_MS 20
#define GAP_MS 100

/* The pattern: byte i of the stream is a function of i alone. */
static void
pattern(uint64_t off, uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		uint64_t x = (off + i) * 0x9e3779b97f4a7c15ULL;

		x ^= x >> 29;
		p[i] = (uint8_t)(x ^ (x >> 11));
	}
}

static void
write_all(int fd, const uint8_t *p, size_t n)
{
	ssize_t w;

	while (n > 0) {
		if ((w = write(fd, p, n)) < 0) {
			if (errno == EINTR)
				continue;
			tt_die("write");
		}
		p += w;
		n -= (size_t)w;
	}
}

/* The pattern's first `total` bytes into fd. */
static void
write_pattern(int fd, uint64_t total)
{
	static uint8_t buf[CHUNK];
	uint64_t off;

	for (off = 0; off < total; off += CHUNK) {
		size_t n = total - off < CHUNK ? (size_t)(total - off) : CHUNK;

		pattern(off, buf, n);
		write_all(fd, buf, n);
	}
}

/* Reads to the end of the stream; 0, or dies on an error. */
static void
read_to_end(int fd)
{
	static uint8_t buf[CHUNK];
	ssize_t n;

	while ((n = recv(fd, buf, sizeof(buf), 0)) != 0)
		if (n < 0 && errno != EINTR)
			tt_die("recv");
}

static int
source(char **av)
{
	long long rate = tt_number(av[1], LLONG_MAX), secs = tt_number(av[2], LLONG_MAX);
	static uint8_t buf[CHUNK];
	uint64_t sent = 0, due;
	int lfd, fd;
	int64_t t0;
	FILE *out;
	char stop[4096];
	struct timespec tick = { 0, TICK_MS * 1000000L };

	if ((out = fopen(av[3], "w")) == NULL)
		tt_die(av[3]);
	lfd = tt_listen(av[0], 1);
	if ((fd = accept(lfd, NULL, NULL)) < 0)
		tt_die("accept");
	close(lfd);
	snprintf(stop, sizeof(stop), "%s.stop", av[3]);
	t0 = tt_mono_ms();
	/* What is due by now goes out now: a stalled send catches up. */
	for (;;) {
		int64_t el = tt_mono_ms() - t0;

		if (access(stop, F_OK) == 0 && el < secs * 1000)
			secs = el / 1000;

		due = (uint64_t)(rate * (el < secs * 1000 ? el : secs * 1000) / 1000);
		while (sent < due) {
			size_t n = due - sent < CHUNK ? (size_t)(due - sent) : CHUNK;

			pattern(sent, buf, n);
			write_all(fd, buf, n);
			if (fwrite(buf, 1, n, out) != n)
				tt_die("fwrite");
			sent += n;
		}
		if (el >= secs * 1000)
			break;
		nanosleep(&tick, NULL);
	}
	if (fclose(out) != 0)
		tt_die("fclose");
	shutdown(fd, SHUT_WR);
	read_to_end(fd);
	return 0;
}

/* The text pattern: lines of 63 letters, byte i a function of i alone,
 * with no NUL in it (a stdio reader counts what fgets read with strlen). */
static void
text_pattern(uint64_t off, uint8_t *p, size_t n)
{
	size_t i;

	pattern(off, p, n);
	for (i = 0; i < n; i++)
		p[i] = (off + i) % 64 == 63 ? '\n' : (uint8_t)('a' + p[i] % 26);
}

/* The client's HTTP request, read to its blank line. 1: it was a GET. */
static int
http_request(int fd)
{
	char req[8192];
	size_t have = 0;
	ssize_t n;

	while (have < sizeof(req) - 1) {
		if ((n = recv(fd, req + have, sizeof(req) - 1 - have, 0)) <= 0)
			break;
		have += (size_t)n;
		req[have] = '\0';
		if (strstr(req, "\r\n\r\n") != NULL)
			break;
	}
	return have >= 4 && memcmp(req, "GET ", 4) == 0;
}

/* One connection of serve(): the text pattern's first `total` bytes at
 * `rate` bytes/s (with `http`, after the client's GET and an HTTP/1.0
 * header without length), then the end; reset at once when the file
 * `reset` exists. */
static void
serve_one(int fd, long long rate, uint64_t total, const char *reset, int http)
{
	static const char head[] = "HTTP/1.0 200 OK\r\n"
	    "Content-Type: application/octet-stream\r\n\r\n";
	static uint8_t buf[CHUNK];
	struct timespec tick = { 0, TICK_MS * 1000000L };
	struct linger lg = { 1, 0 };
	uint64_t sent = 0, due;
	int64_t t0;

	if (http && !http_request(fd))
		_exit(1);
	if (http)
		write_all(fd, (const uint8_t *)head, sizeof(head) - 1);
	t0 = tt_mono_ms();
	while (sent < total) {
		if (access(reset, F_OK) == 0) {
			setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
			close(fd);
			_exit(0);
		}
		due = (uint64_t)(rate * (tt_mono_ms() - t0) / 1000);
		if (due > total)
			due = total;
		while (sent < due) {
			size_t n = due - sent < CHUNK ? (size_t)(due - sent) : CHUNK;

			text_pattern(sent, buf, n);
			write_all(fd, buf, n);
			sent += n;
		}
		nanosleep(&tick, NULL);
	}
	shutdown(fd, SHUT_WR);
	read_to_end(fd);
	_exit(0);
}

/* A backend for many readers at once: a child per connection. */
static int
serve(char **av, int http)
{
	long long rate = tt_number(av[1], LLONG_MAX);
	uint64_t total = (uint64_t)tt_number(av[2], LLONG_MAX);
	int lfd = tt_listen(av[0], 128), fd;

	signal(SIGCHLD, SIG_IGN);	/* children reap themselves */
	for (;;) {
		if ((fd = accept(lfd, NULL, NULL)) < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			tt_die("accept");
		}
		switch (fork()) {
		case -1:
			tt_die("fork");
		case 0:
			close(lfd);
			serve_one(fd, rate, total, av[3], http);
		}
		close(fd);
	}
}

static int
print_text(char **av)
{
	static uint8_t buf[CHUNK];
	uint64_t total = (uint64_t)tt_number(av[0], LLONG_MAX), off;

	for (off = 0; off < total; off += CHUNK) {
		size_t n = total - off < CHUNK ? (size_t)(total - off) : CHUNK;

		text_pattern(off, buf, n);
		write_all(STDOUT_FILENO, buf, n);
	}
	return 0;
}

static int
sink(char **av)
{
	static uint8_t buf[CHUNK];
	int fd = tt_dial(av[0], av[1], SOCK_STREAM);
	int out = open(av[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	unsigned long long total = 0;
	int64_t last = tt_wall_ms(), now, first = 0;
	ssize_t n;

	if (out < 0)
		tt_die(av[2]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((n = recv(fd, buf, sizeof(buf), 0)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			tt_die("recv");
		}
		now = tt_wall_ms();
		if (first == 0)
			first = now;
		if (now - last >= GAP_MS)
			printf("gap %lld %lld\n", (long long)last, (long long)now);
		last = now;
		total += (unsigned long long)n;
		/* Unbuffered: the test watches the file grow. */
		write_all(out, buf, (size_t)n);
	}
	if (close(out) != 0)
		tt_die("close");
	printf("bytes %llu seconds %.3f\n", total,
	    first ? (tt_wall_ms() - first) / 1000.0 : 0.0);
	close(fd);
	return 0;
}

/* For each line on stdin, len bytes out on fd and the same back. */
static int
bursts_on(int fd, size_t len)
{
	uint8_t *out = malloc(len), *in = malloc(len);
	char line[256];
	uint64_t off = 0;
	unsigned k = 0;
	ssize_t n;
	size_t got;
	int64_t t0;
	int r = 1;

	if (out == NULL || in == NULL)
		tt_die("malloc");
	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin) != NULL) {
		t0 = tt_wall_ms();
		pattern(off, out, len);
		write_all(fd, out, len);
		for (got = 0; got < len; got += (size_t)n) {
			if ((n = recv(fd, in + got, len - got, 0)) == 0) {
				fprintf(stderr, "traffic: burst %u: end of stream after "
				    "%zu of %zu bytes\n", k, got, len);
				goto out;
			}
			if (n < 0 && errno == EINTR)
				n = 0;
			else if (n < 0)
				tt_die("recv");
		}
		if (memcmp(in, out, len) != 0) {
			printf("burst %u MISMATCH\n", k);
			goto out;
		}
		printf("burst %u ok %lld\n", k++, (long long)(tt_wall_ms() - t0));
		off += len;
	}
	shutdown(fd, SHUT_WR);
	read_to_end(fd);
	r = 0;
out:
	/* Freed: a sanitized build's leak check would fail the exit. */
	free(out);
	free(in);
	return r;
}

static int
bursts(char **av)
{
	return bursts_on(tt_dial(av[0], av[1], SOCK_STREAM),
	    (size_t)tt_number(av[2], LLONG_MAX));
}

/* forked: the writer's side. */
static int
forked_write(int fd, size_t len)
{
	uint8_t *out = malloc(len);
	char line[256];
	uint64_t off = 0;

	if (out == NULL)
		tt_die("malloc");
	while (fgets(line, sizeof(line), stdin) != NULL) {
		pattern(off, out, len);
		write_all(fd, out, len);
		off += len;
	}
	if (shutdown(fd, SHUT_WR) != 0)
		tt_die("shutdown");
	close(fd);
	free(out);
	return 0;
}

/* forked: the reader's side; every byte checked against the pattern. */
static int
forked_read(int fd, size_t len)
{
	uint8_t in[65536], want[65536];
	uint64_t off = 0;
	unsigned k = 0;
	ssize_t n;

	for (;;) {
		if ((n = recv(fd, in, sizeof(in), 0)) < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			printf("error %s after %llu bytes\n", strerror(errno),
			    (unsigned long long)off);
			return 1;
		}
		if (n == 0)
			break;
		pattern(off, want, (size_t)n);
		if (memcmp(in, want, (size_t)n) != 0) {
			printf("MISMATCH at %llu\n", (unsigned long long)off);
			return 1;
		}
		off += (uint64_t)n;
		while (off >= (uint64_t)(k + 1) * len)
			printf("burst %u ok\n", k++);
	}
	printf("end %llu bytes\n", (unsigned long long)off);
	close(fd);
	return 0;
}

/* forked exec and exec-bare: this program again, on the rock it inherits
 * (bare: an environment without LD_PRELOAD, so no librock there). */
static int
exec_self(int fd, const char *len, int bare)
{
	extern char **environ;
	char self[] = "traffic", cmd[] = "inherited", fdstr[16], lenstr[32];
	char *argv[] = { self, cmd, fdstr, lenstr, NULL };
	char **env = environ, **bare_env;
	size_t n = 0, i, j;

	snprintf(fdstr, sizeof(fdstr), "%d", fd);
	snprintf(lenstr, sizeof(lenstr), "%s", len);
	if (bare) {
		while (environ[n] != NULL)
			n++;
		if ((bare_env = calloc(n + 1, sizeof(*bare_env))) == NULL)
			tt_die("calloc");
		for (i = j = 0; i < n; i++)
			if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0)
				bare_env[j++] = environ[i];
		env = bare_env;
	}
	execve("/proc/self/exe", argv, env);
	tt_die("execve");
	return 1;
}

/* forked exec-closed: len bytes of the pattern on a rock that closes on
 * exec, then an exec of /bin/true: the rock is to end as at exit. */
static int
exec_closing(int fd, size_t len)
{
	uint8_t *out = malloc(len);

	if (out == NULL)
		tt_die("malloc");
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0)
		tt_die("fcntl");
	pattern(0, out, len);
	write_all(fd, out, len);
	execl("/bin/true", "true", (char *)NULL);
	tt_die("execl");
	return 1;
}

static int
inherited(char **av)
{
	return bursts_on((int)tt_number(av[0], INT_MAX),
	    (size_t)tt_number(av[1], 1 << 20));
}

static int
forked(char **av)
{
	static const char *const whos[] = { "child", "parent", "detach",
	    "daemon", "exec", "exec-bare", "exec-closed" };
	size_t len = (size_t)tt_number(av[2], 1 << 20), i;
	int fd, child_writes, st, rc;
	pid_t pid;

	for (i = 0; i < sizeof(whos) / sizeof(whos[0]); i++)
		if (strcmp(av[3], whos[i]) == 0)
			break;
	if (i == sizeof(whos) / sizeof(whos[0])) {
		fprintf(stderr, "traffic: forked: WHO is parent, child, detach, "
		    "daemon, exec, exec-bare or exec-closed\n");
		return 2;
	}
	fd = tt_dial(av[0], av[1], SOCK_STREAM);
	if (strcmp(av[3], "exec-closed") == 0)
		return exec_closing(fd, len);
	if (strncmp(av[3], "exec", 4) == 0)
		return exec_self(fd, av[2], strcmp(av[3], "exec-bare") == 0);
	child_writes = strcmp(av[3], "child") == 0;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (strcmp(av[3], "daemon") == 0) {
		if (daemon(1, 1) != 0)
			tt_die("daemon");
		return bursts_on(fd, len);
	}
	if ((pid = fork()) < 0)
		tt_die("fork");
	if (strcmp(av[3], "detach") == 0)
		return pid == 0 ? bursts_on(fd, len) : 0;
	if (pid == 0)
		_exit(child_writes ? forked_write(fd, len) : forked_read(fd, len));
	rc = child_writes ? forked_read(fd, len) : forked_write(fd, len);
	if (waitpid(pid, &st, 0) != pid)
		tt_die("waitpid");
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "traffic: forked: the child failed (status %d)\n", st);
		return 1;
	}
	return rc;
}

/* One echoed exchange on fd at off: "ok", or what went wrong. */
static const char *
exchange(int fd, uint64_t off, uint8_t *out, uint8_t *in, size_t len)
{
	static char err[64];
	size_t got, put;
	ssize_t n;

	pattern(off, out, len);
	for (put = 0, n = 0; put < len; put += (size_t)n)
		if ((n = write(fd, out + put, len - put)) < 0 && errno != EINTR)
			goto fail;
		else if (n < 0)
			n = 0;
	for (got = 0; got < len; got += (size_t)n)
		if ((n = recv(fd, in + got, len - got, 0)) == 0)
			return "eof";
		else if (n < 0 && errno != EINTR)
			goto fail;
		else if (n < 0)
			n = 0;
	return memcmp(in, out, len) == 0 ? "ok" : "MISMATCH";
fail:
	if (errno == ECONNRESET || errno == EPIPE || errno == ETIMEDOUT)
		snprintf(err, sizeof(err), "error %s", errno == ECONNRESET ?
		    "ECONNRESET" : errno == EPIPE ? "EPIPE" : "ETIMEDOUT");
	else
		snprintf(err, sizeof(err), "error errno %d", errno);
	return err;
}

static int
rounds(char **av)
{
	long nconn = (long)tt_number(av[2], 64), i;
	size_t len = (size_t)tt_number(av[3], 1 << 24);
	uint8_t *out = malloc(len), *in = malloc(len);
	int *fd = calloc((size_t)nconn, sizeof(*fd));
	uint64_t off = 0;
	char line[256];
	const char *r;
	unsigned k;

	if (out == NULL || in == NULL || fd == NULL)
		tt_die("malloc");
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 0; i < nconn; i++)
		fd[i] = tt_dial(av[0], av[1], SOCK_STREAM);
	for (k = 0; fgets(line, sizeof(line), stdin) != NULL; k++, off += len)
		for (i = 0; i < nconn; i++) {
			if (fd[i] < 0)
				continue;
			r = exchange(fd[i], off, out, in, len);
			printf("round %u conn %ld %s\n", k, i, r);
			if (strcmp(r, "ok") != 0) {
				close(fd[i]);
				fd[i] = -1;
			}
		}
	return 0;
}

/* N connections at once, each echoing len bytes exact; 0, or 1 after
 * saying which did not. */
static int
open_echoed(const char *host, const char *port, long n, size_t len, int *fd)
{
	uint8_t *out = malloc(len), *in = malloc(len);
	size_t got;
	ssize_t r;
	long i;

	if (out == NULL || in == NULL)
		tt_die("malloc");
	pattern(0, out, len);
	for (i = 0; i < n; i++) {
		fd[i] = tt_dial(host, port, SOCK_STREAM);
		write_all(fd[i], out, len);
	}
	for (i = 0; i < n; i++) {
		for (got = 0; got < len; got += (size_t)r)
			if ((r = recv(fd[i], in + got, len - got, 0)) <= 0)
				tt_die("many: echo");
		if (memcmp(in, out, len) != 0) {
			printf("many: rock %ld: MISMATCH\n", i);
			return 1;
		}
	}
	free(out);
	free(in);
	return 0;
}

static void
close_all(long n, const int *fd)
{
	long i;

	for (i = 0; i < n; i++)
		shutdown(fd[i], SHUT_WR);
	for (i = 0; i < n; i++) {
		read_to_end(fd[i]);
		close(fd[i]);
	}
}

/* N rocks at once, each echoing BYTES; then all shut down, read to their
 * end and closed together. */
static int
many(char **av)
{
	long n = (long)tt_number(av[2], 100000);
	int *fd = calloc((size_t)n, sizeof(*fd));

	if (fd == NULL)
		tt_die("malloc");
	if (open_echoed(av[0], av[1], n, (size_t)tt_number(av[3], 1 << 20), fd) != 0)
		return 1;
	close_all(n, fd);
	printf("closed %ld at %lld\n", n, (long long)tt_wall_ms());
	fflush(stdout);
	return 0;
}

/* N connections, each echoing one byte, then held idle: DIR/held says so
 * (its content: our pid), and they are closed once DIR/go exists (the idle
 * benchmark measures in between). */
static int
hold(char **av)
{
	long n = (long)tt_number(av[2], 100000);
	int *fd = calloc((size_t)n, sizeof(*fd));
	char held[PATH_MAX], tmp[PATH_MAX], go[PATH_MAX];
	FILE *f;

	if (fd == NULL)
		tt_die("malloc");
	if (open_echoed(av[0], av[1], n, 1, fd) != 0)
		return 1;
	snprintf(held, sizeof(held), "%s/held", av[3]);
	snprintf(tmp, sizeof(tmp), "%s/held.tmp", av[3]);
	snprintf(go, sizeof(go), "%s/go", av[3]);
	if ((f = fopen(tmp, "w")) == NULL)
		tt_die(tmp);
	fprintf(f, "%ld\n", (long)getpid());
	if (fclose(f) != 0 || rename(tmp, held) != 0)
		tt_die(held);
	while (access(go, F_OK) != 0)
		usleep(20000);
	close_all(n, fd);
	return 0;
}

static int
push(char **av)
{
	uint64_t total = (uint64_t)tt_number(av[2], LLONG_MAX);
	int fd = tt_dial(av[0], av[1], SOCK_STREAM);
	int64_t t0 = tt_mono_ms();

	write_pattern(fd, total);
	shutdown(fd, SHUT_WR);
	read_to_end(fd);
	printf("seconds %.3f\n", (tt_mono_ms() - t0) / 1000.0);
	return 0;
}

static int
write_then_exit(char **av)
{
	uint64_t total = (uint64_t)tt_number(av[2], LLONG_MAX);
	int fd = tt_dial(av[0], av[1], SOCK_STREAM);
	char written[PATH_MAX], go[PATH_MAX];
	int mark;

	snprintf(written, sizeof(written), "%s/written", av[3]);
	snprintf(go, sizeof(go), "%s/go", av[3]);
	write_pattern(fd, total);
	if ((mark = open(written, O_WRONLY | O_CREAT, 0644)) < 0)
		tt_die(written);
	close(mark);
	while (access(go, F_OK) != 0)
		usleep(10000);
	close(fd);
	return 0;
}

static int
connect_times(char **av)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	long long n = tt_number(av[2], LLONG_MAX), i;
	int fd, r;
	int64_t t0;

	if ((r = getaddrinfo(av[0], av[1], &hints, &ai)) != 0) {
		fprintf(stderr, "traffic: %s: %s\n", av[0], gai_strerror(r));
		return 1;
	}
	for (i = 0; i < n; i++) {
		if ((fd = socket(ai->ai_family, SOCK_STREAM, 0)) < 0)
			tt_die("socket");
		t0 = tt_mono_us();
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0)
			tt_die("connect");
		printf("connect %lld\n", (long long)(tt_mono_us() - t0));
		close(fd);
	}
	freeaddrinfo(ai);
	return 0;
}

static int
print_pattern(char **av)
{
	write_pattern(STDOUT_FILENO, (uint64_t)tt_number(av[0], LLONG_MAX));
	return 0;
}

int
main(int argc, char **argv)
{
	/* A write to a reset connection fails with EPIPE, reported. */
	signal(SIGPIPE, SIG_IGN);
	if (argc == 6 && strcmp(argv[1], "source") == 0)
		return source(argv + 2);
	if (argc == 5 && strcmp(argv[1], "sink") == 0)
		return sink(argv + 2);
	if (argc == 5 && strcmp(argv[1], "bursts") == 0)
		return bursts(argv + 2);
	if (argc == 5 && strcmp(argv[1], "push") == 0)
		return push(argv + 2);
	if (argc == 6 && strcmp(argv[1], "many") == 0)
		return many(argv + 2);
	if (argc == 6 && strcmp(argv[1], "forked") == 0)
		return forked(argv + 2);
	if (argc == 4 && strcmp(argv[1], "inherited") == 0)
		return inherited(argv + 2);
	if (argc == 3 && strcmp(argv[1], "pattern") == 0)
		return print_pattern(argv + 2);
	if (argc == 6 && strcmp(argv[1], "write") == 0)
		return write_then_exit(argv + 2);
	if (argc == 5 && strcmp(argv[1], "connect") == 0)
		return connect_times(argv + 2);
	if (argc == 6 && strcmp(argv[1], "rounds") == 0)
		return rounds(argv + 2);
	if (argc == 6 && strcmp(argv[1], "hold") == 0)
		return hold(argv + 2);
	if (argc == 6 && strcmp(argv[1], "serve") == 0)
		return serve(argv + 2, 0);
	if (argc == 7 && strcmp(argv[1], "serve") == 0 &&
	    strcmp(argv[6], "http") == 0)
		return serve(argv + 2, 1);
	if (argc == 3 && strcmp(argv[1], "text") == 0)
		return print_text(argv + 2);
	fprintf(stderr, "usage: traffic source PORT RATE SECONDS OUT | sink ADDR PORT OUT |\n"
	    "       bursts ADDR PORT BYTES | push ADDR PORT BYTES | pattern BYTES |\n"
	    "       connect ADDR PORT N | many ADDR PORT N BYTES |\n"
	    "       write ADDR PORT BYTES DIR | hold ADDR PORT N DIR |\n"
	    "       rounds ADDR PORT N BYTES | forked ADDR PORT BYTES WHO |\n"
	    "       inherited FD BYTES | serve PORT RATE BYTES RESET [http] |\n"
	    "       text BYTES\n");
	return 2;
}
