/* rockcat.c: netcat on a reliable socket: stdin to the rock, the rock to stdout. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "rock_engine.h"
#include "rock_err.h"
#include "rock_log.h"

#define HIGH (1024 * 1024)
#define CHUNK 65536

struct cat {
	struct event_base *base;
	struct rock_engine *engine;
	struct rock_session *s;
	struct event *ev_in, *ev_out;
	struct evbuffer *out;		/* for stdout */
	int in_eof, peer_eof, states, exit_code;
	struct rock_log log;
	struct rock_config logcfg;
};

static void
usage(FILE *f)
{
	fprintf(f, "usage: rockcat [-v] [-s] [-r] [-t SECONDS] HOST PORT\n"
	    "Copy stdin to a reliable socket to HOST PORT and the socket to stdout;\n"
	    "end of stdin half-closes. Falls back to plain TCP when the peer is not\n"
	    "enhanced (rockd), unless -r.\n"
	    "  -r  rock only: fail if the peer is not enhanced\n"
	    "  -s  print state changes on stderr with wall-clock milliseconds\n"
	    "  -t  connect timeout in seconds (default 10)\n"
	    "  -v  debug log on stderr\n");
}

static long long
wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
update_stdin(struct cat *c)
{
	if (c->in_eof || c->s == NULL)
		return;
	if (rock_session_pending(c->s) < HIGH)
		event_add(c->ev_in, NULL);
	else
		event_del(c->ev_in);
}

static void
flush_out(struct cat *c)
{
	while (evbuffer_get_length(c->out) > 0) {
		int n = evbuffer_write(c->out, STDOUT_FILENO);

		if (n < 0 && errno == EAGAIN) {
			event_add(c->ev_out, NULL);
			return;
		}
		if (n <= 0) {
			fprintf(stderr, "rockcat: stdout: %s\n", strerror(errno));
			c->exit_code = 1;
			event_base_loopbreak(c->base);
			return;
		}
	}
	event_del(c->ev_out);
	if (c->s != NULL)
		rock_session_pause(c->s, 0);
	if (c->s == NULL)
		event_base_loopbreak(c->base);
}

static void
on_stdout(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	flush_out(arg);
}

static void
on_stdin(evutil_socket_t fd, short what, void *arg)
{
	struct cat *c = arg;
	char buf[CHUNK];
	ssize_t n = read(fd, buf, sizeof(buf));

	(void)what;
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		c->in_eof = 1;
		event_del(c->ev_in);
		rock_session_shutdown(c->s);
		return;
	}
	rock_session_send(c->s, buf, (size_t)n);
	update_stdin(c);
}

static void
on_data(struct rock_session *s, const uint8_t *p, size_t n, void *arg)
{
	struct cat *c = arg;

	evbuffer_add(c->out, p, n);
	flush_out(c);
	if (evbuffer_get_length(c->out) >= HIGH)
		rock_session_pause(s, 1);
}

static void
on_eof(struct rock_session *s, void *arg)
{
	struct cat *c = arg;

	(void)s;
	c->peer_eof = 1;
}

static void
on_drain(struct rock_session *s, void *arg)
{
	(void)s;
	update_stdin(arg);
}

static void
on_state(struct rock_session *s, enum rock_state from, enum rock_state to,
    void *arg)
{
	struct cat *c = arg;

	if (c->states)
		fprintf(stderr, "rockcat: %lld %s %s -> %s\n", wall_ms(),
		    rock_session_name(s), rock_state_name(from), rock_state_name(to));
}

static void
on_closed(struct rock_session *s, int err, void *arg)
{
	struct cat *c = arg;

	if (err != 0) {
		fprintf(stderr, "rockcat: connection lost: %s\n", rock_err(err));
		c->exit_code = 1;
	}
	rock_session_free(s);
	c->s = NULL;
	event_del(c->ev_in);
	flush_out(c);
}

static const struct rock_session_cbs cat_cbs = {
	on_data, on_eof, on_drain, on_state, on_closed, NULL
};

/* Plain TCP, when the peer is not enhanced: a simple copy loop. */
static int
plain_copy(int fd)
{
	struct pollfd p[2] = { { STDIN_FILENO, POLLIN, 0 }, { fd, POLLIN, 0 } };
	char buf[CHUNK];
	ssize_t n;

	while (p[1].fd >= 0) {
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			return 1;
		if (p[0].revents) {
			n = read(STDIN_FILENO, buf, sizeof(buf));
			if (n <= 0) {
				shutdown(fd, SHUT_WR);
				p[0].fd = -1;
			} else if (write(fd, buf, (size_t)n) != n)
				return 1;
		}
		if (p[1].revents) {
			n = read(fd, buf, sizeof(buf));
			if (n < 0)
				return 1;
			if (n == 0)
				p[1].fd = -1;
			else if (write(STDOUT_FILENO, buf, (size_t)n) != n)
				return 1;
		}
	}
	return 0;
}

static int
plain_fallback(const struct addrinfo *ai)
{
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
		fprintf(stderr, "rockcat: connect: %s\n", strerror(errno));
		return 1;
	}
	return plain_copy(fd);
}

static void
teardown(struct cat *c)
{
	if (c->ev_in != NULL)
		event_free(c->ev_in);
	if (c->ev_out != NULL)
		event_free(c->ev_out);
	rock_engine_free(c->engine);
	if (c->out != NULL)
		evbuffer_free(c->out);
	if (c->base != NULL)
		event_base_free(c->base);
}

static int
open_rock(struct cat *c, const char *host, const char *port, int timeout,
    int rock_only)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
	int r = ROCK_ERR_INVALID, g;

	if ((g = getaddrinfo(host, port, &hints, &res)) != 0) {
		fprintf(stderr, "rockcat: %s: %s\n", host, gai_strerror(g));
		return 1;
	}
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		r = rock_client_open(c->engine, ai->ai_addr, ai->ai_addrlen,
		    timeout * 1000, &cat_cbs, c, &c->s);
		if (r == ROCK_ERR_NOT_ENHANCED && !rock_only) {
			fprintf(stderr, "rockcat: %s %s is not enhanced: plain TCP\n",
			    host, port);
			r = plain_fallback(ai);
			freeaddrinfo(res);
			teardown(c);
			exit(r);
		}
		if (r == 0)
			break;
	}
	freeaddrinfo(res);
	if (r != 0) {
		fprintf(stderr, "rockcat: %s %s: %s\n", host, port,
		    r == ROCK_ERR_SYSTEM ? strerror(errno) : rock_err(r));
		return 1;
	}
	return 0;
}

static int
setup(struct cat *c, int verbose)
{
	struct event_config *ec = event_config_new();

	/* poll, not epoll: stdin and stdout may be regular files. */
	event_config_avoid_method(ec, "epoll");
	c->base = event_base_new_with_config(ec);
	event_config_free(ec);
	rock_config_defaults(&c->logcfg);
	c->logcfg.log_sink = ROCK_LOG_STDERR;
	c->logcfg.debug = verbose;
	rock_log_configure(&c->log, &c->logcfg, "rockcat");
	c->out = evbuffer_new();
	if (c->base == NULL || c->out == NULL ||
	    rock_engine_new(&c->engine, c->base, &c->log, NULL, NULL, 0) != 0) {
		fprintf(stderr, "rockcat: cannot start the engine\n");
		return -1;
	}
	fcntl(STDIN_FILENO, F_SETFL, fcntl(STDIN_FILENO, F_GETFL) | O_NONBLOCK);
	fcntl(STDOUT_FILENO, F_SETFL, fcntl(STDOUT_FILENO, F_GETFL) | O_NONBLOCK);
	c->ev_in = event_new(c->base, STDIN_FILENO, EV_READ | EV_PERSIST, on_stdin, c);
	c->ev_out = event_new(c->base, STDOUT_FILENO, EV_WRITE | EV_PERSIST, on_stdout, c);
	return c->ev_in != NULL && c->ev_out != NULL ? 0 : -1;
}

int
main(int argc, char **argv)
{
	struct cat c;
	int opt, verbose = 0, rock_only = 0, timeout = 10;

	memset(&c, 0, sizeof(c));
	while ((opt = getopt(argc, argv, "hrst:v")) != -1) {
		switch (opt) {
		case 'r': rock_only = 1; break;
		case 's': c.states = 1; break;
		case 't': timeout = atoi(optarg); break;
		case 'v': verbose = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (argc - optind != 2 || timeout <= 0) {
		usage(stderr);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if (setup(&c, verbose) != 0 ||
	    open_rock(&c, argv[optind], argv[optind + 1], timeout, rock_only) != 0) {
		teardown(&c);
		return 1;
	}
	if (c.states)
		fprintf(stderr, "rockcat: %lld %s connected\n", wall_ms(),
		    rock_session_name(c.s));
	update_stdin(&c);
	event_base_dispatch(c.base);
	if (c.s != NULL)
		rock_session_free(c.s);
	teardown(&c);
	return c.exit_code;
}
