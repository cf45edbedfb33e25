/* rock_ls.c: rock ls and rock kill: ask the user's processes (and rockd) for their rocks over their control sockets. */
#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "rock_config.h"
#include "rock_ctl.h"
#include "rock_ls.h"

/* rockd's control socket where rock ls looks without --rockd. */
#define ROCKD_CONTROL_DEFAULT "/run/rockd/control"
#define ANSWER_MAX (16u << 20)

enum { F_ID, F_PROGRAM, F_PID, F_ROLE, F_PEER, F_BACKEND, F_STATE, F_SINCE,
	F_RECONNECTS, F_INFLIGHT, F_RING, F_RTT };
static const char *const json_names[ROCK_CTL_NFIELDS] = {
	"id", "program", "pid", "role", "peer", "backend", "state", "since_ms",
	"reconnects", "inflight", "ring", "rtt_ms"
};
/* Numbers in JSON; the rest strings ("-": null). */
static const int numeric[ROCK_CTL_NFIELDS] = {
	[F_PID] = 1, [F_SINCE] = 1, [F_RECONNECTS] = 1, [F_INFLIGHT] = 1,
	[F_RING] = 1, [F_RTT] = 1
};

struct out {
	int json;
	unsigned long rows;
};

static const char *
env_get(void *arg, const char *name)
{
	(void)arg;
	return getenv(name);
}

/* The runtime directory the user's processes put their sockets in. */
static void
run_dir(char *out, size_t len)
{
	struct rock_env_parser p = { .get = env_get };
	static struct rock_config cfg;

	rock_config_from_env(&cfg, &p);
	snprintf(out, len, "%s", cfg.run_dir);
}

/* One request to one socket; the answer in *ans (NUL-terminated). 0, or
 * -1 with errno (ECONNREFUSED: nobody listens there). */
static int
ask(const char *path, const char *req, char **ans)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct timeval tv = { ROCK_CTL_TIMEOUT_S + 1, 0 };
	size_t have = 0, cap = 4096;
	char *buf = NULL;
	ssize_t n;
	int fd, err;

	if (strlen(path) >= sizeof(sun.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(sun.sun_path, path, strlen(path));
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -1;
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0 ||
	    send(fd, req, strlen(req), MSG_NOSIGNAL) != (ssize_t)strlen(req) ||
	    (buf = malloc(cap)) == NULL)
		goto fail;
	while ((n = recv(fd, buf + have, cap - have - 1, 0)) > 0) {
		have += (size_t)n;
		if (have + 1 == cap) {
			char *b = cap < ANSWER_MAX ? realloc(buf, cap * 2) : NULL;

			if (b == NULL) {
				errno = EMSGSIZE;
				goto fail;
			}
			buf = b;
			cap *= 2;
		}
	}
	if (n < 0)
		goto fail;
	close(fd);
	buf[have] = '\0';
	*ans = buf;
	return 0;
fail:
	err = errno;
	free(buf);
	close(fd);
	errno = err;
	return -1;
}

static void
json_string(const char *s)
{
	putchar('"');
	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void
print_json(struct out *o, char **f, const char *source)
{
	int i;

	printf("%s\n  {\"source\": ", o->rows == 0 ? "" : ",");
	json_string(source);
	for (i = 0; i < ROCK_CTL_NFIELDS; i++) {
		printf(", \"%s\": ", json_names[i]);
		if (numeric[i])
			fputs(f[i], stdout);
		else if (strcmp(f[i], "-") == 0)
			fputs("null", stdout);
		else
			json_string(f[i]);
	}
	putchar('}');
}

#define TABLE_FMT "%-8s %-16s %7s %-6s %-22s %-22s %-9s %7s %5s %9s %9s %6s\n"

static void
print_row(struct out *o, char **f)
{
	struct timespec ts;
	long long ago;
	char since[32];

	if (o->rows == 0)
		printf(TABLE_FMT, "ID", "PROGRAM", "PID", "ROLE", "PEER",
		    "BACKEND", "STATE", "SINCE", "RECON", "INFLIGHT", "RING",
		    "RTT");
	clock_gettime(CLOCK_REALTIME, &ts);
	ago = ((long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 -
	    strtoll(f[F_SINCE], NULL, 10)) / 1000;
	snprintf(since, sizeof(since), "%llds", ago < 0 ? 0 : ago);
	printf(TABLE_FMT, f[F_ID], f[F_PROGRAM], f[F_PID], f[F_ROLE], f[F_PEER],
	    f[F_BACKEND], f[F_STATE], since, f[F_RECONNECTS], f[F_INFLIGHT],
	    f[F_RING], f[F_RTT]);
}

/* A row's fields split in place; 0 unless it has them all. */
static int
split(char *line, char **f)
{
	int n = 0;
	char *save = NULL, *t;

	for (t = strtok_r(line, "\t", &save); t != NULL;
	    t = strtok_r(NULL, "\t", &save)) {
		if (n == ROCK_CTL_NFIELDS)
			return 0;
		f[n++] = t;
	}
	return n == ROCK_CTL_NFIELDS;
}

/* An answer to "ls": its rows printed; -1 if it is not whole. */
static int
print_answer(struct out *o, char *ans, const char *source)
{
	char *f[ROCK_CTL_NFIELDS], *line, *save = NULL;
	unsigned long rows = 0, end;

	for (line = strtok_r(ans, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save)) {
		if (sscanf(line, "end %lu", &end) == 1)
			return end == rows ? 0 : -1;
		if (!split(line, f))
			return -1;
		if (o->json)
			print_json(o, f, source);
		else
			print_row(o, f);
		o->rows++;
		rows++;
	}
	return -1;
}

/* fn on every "ctl.PID" socket of the runtime directory; sockets nobody
 * listens on any more (a process that died) are removed. */
static void
each_process(void (*fn)(const char *path, void *arg), void *arg)
{
	char dir[PATH_MAX], path[PATH_MAX];
	struct dirent *de;
	DIR *d;

	run_dir(dir, sizeof(dir));
	if (dir[0] == '\0' || (d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, ROCK_CTL_PREFIX,
		    strlen(ROCK_CTL_PREFIX)) != 0 ||
		    snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >=
		    (int)sizeof(path))
			continue;
		fn(path, arg);
	}
	closedir(d);
}

static void
ls_one(const char *path, void *arg)
{
	struct out *o = arg;
	char *ans;

	if (ask(path, "ls\n", &ans) != 0) {
		if (errno == ECONNREFUSED)
			(void)unlink(path);
		return;
	}
	if (print_answer(o, ans, "process") != 0)
		fprintf(stderr, "rock ls: %s: an incomplete answer\n", path);
	free(ans);
}

/* rockd's sessions: explicit: every failure said; the default: silent. */
static int
ls_rockd(struct out *o, const char *path, int explicit)
{
	char *ans;
	int r = 0;

	if (ask(path, "ls\n", &ans) != 0) {
		if (!explicit)
			return 0;
		fprintf(stderr, "rock ls: %s: %s\n", path, strerror(errno));
		return 1;
	}
	if (strncmp(ans, "error ", 6) == 0 || print_answer(o, ans, "rockd") != 0) {
		if (explicit) {
			fprintf(stderr, "rock ls: %s: %s", path,
			    strncmp(ans, "error ", 6) == 0 ? ans + 6 :
			    "an incomplete answer\n");
			r = 1;
		}
	}
	free(ans);
	return r;
}

static const struct option rockd_opts[] = {
	{ "rockd", required_argument, NULL, 'r' },
	{ "json", no_argument, NULL, 'j' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 }
};

int
rock_ls_main(int argc, char **argv)
{
	struct out o = { 0, 0 };
	const char *rockd = NULL;
	int c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", rockd_opts, NULL)) != -1) {
		switch (c) {
		case 'j': o.json = 1; break;
		case 'r': rockd = optarg; break;
		case 'h':
			printf("usage: rock ls [--json] [--rockd PATH]\n");
			return 0;
		default:
			fprintf(stderr, "usage: rock ls [--json] [--rockd PATH]\n");
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "rock ls: unexpected argument \"%s\"\n",
		    argv[optind]);
		return 2;
	}
	if (o.json)
		putchar('[');
	each_process(ls_one, &o);
	r = ls_rockd(&o, rockd != NULL ? rockd : ROCKD_CONTROL_DEFAULT,
	    rockd != NULL);
	if (o.json)
		printf("%s]\n", o.rows > 0 ? "\n" : "");
	return r;
}

struct kill_req {
	char req[ROCK_CTL_REQ_MAX];
	int done;
};

static void
kill_one(const char *path, void *arg)
{
	struct kill_req *k = arg;
	char *ans;

	if (k->done || ask(path, k->req, &ans) != 0)
		return;
	if (strcmp(ans, "ok\n") == 0)
		k->done = 1;
	free(ans);
}

int
rock_kill_main(int argc, char **argv)
{
	struct kill_req k = { "", 0 };
	const char *rockd = NULL;
	char id[9];
	size_t i;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", rockd_opts, NULL)) != -1) {
		switch (c) {
		case 'r': rockd = optarg; break;
		case 'h':
			printf("usage: rock kill [--rockd PATH] ID\n");
			return 0;
		default:
			fprintf(stderr, "usage: rock kill [--rockd PATH] ID\n");
			return 2;
		}
	}
	if (optind != argc - 1 || strlen(argv[optind]) == 0 ||
	    strlen(argv[optind]) > 8 ||
	    strspn(argv[optind], "0123456789abcdefABCDEF") !=
	    strlen(argv[optind])) {
		fprintf(stderr, "rock kill: want one ID (8 hex digits, as rock "
		    "ls shows)\n");
		return 2;
	}
	/* Engines name rocks in lower case; an ID copied from elsewhere
	 * may not be. */
	for (i = 0; argv[optind][i] != '\0'; i++)
		id[i] = (char)tolower((unsigned char)argv[optind][i]);
	id[i] = '\0';
	snprintf(k.req, sizeof(k.req), "kill %s\n", id);
	each_process(kill_one, &k);
	if (!k.done)
		kill_one(rockd != NULL ? rockd : ROCKD_CONTROL_DEFAULT, &k);
	if (!k.done) {
		fprintf(stderr, "rock kill: no rock %s%s\n", id,
		    rockd != NULL ? " here nor at rockd" : "");
		return 1;
	}
	return 0;
}
