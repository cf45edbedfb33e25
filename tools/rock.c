/* rock.c: the rock wrapper: run a program with librock.so preloaded. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rock_cover.h"
#include "rock_env.h"
#include "rock_ssh.h"
#include "rock_ls.h"

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: rock [--keepalive-only] [-v] [--] CMD [ARGS...]\n"
	    "       rock ls [--json] [--rockd PATH]\n"
	    "       rock kill [--rockd PATH] ID\n"
	    "Run CMD with librock.so preloaded: its TCP connections get keepalive\n"
	    "and, to enhanced peers, become reliable sockets.\n"
	    "  --keepalive-only  only turn TCP keepalive on (libdontdie mode,\n"
	    "                    same as ROCK_MODE=keepalive)\n"
	    "  -v, --verbose     say what is preloaded; library debug log to stderr\n"
	    "  -h, --help        this text\n"
	    "  --version         print the version\n"
	    "`rock ssh HOST` first starts a rockd for the user on HOST over ssh\n"
	    "(rockd --session), pins the rock to its key and finds it again next\n"
	    "time; rock-ssh is rock ssh (for scp -S, GIT_SSH); see rock(1).\n"
	    "Settings come from the environment: ROCK_MODE, ROCK_KEEPALIVE_TIME,\n"
	    "ROCK_KEEPALIVE_INTVL, ROCK_KEEPALIVE_PROBES, ROCK_USER_TIMEOUT_MS,\n"
	    "ROCK_DEBUG, ROCK_LOG and libdontdie's DD_* variables; see rock(1).\n"
	    "rock ls lists your processes' rocks (and rockd's sessions where\n"
	    "permitted); rock kill ends one with a reset. A program named ls or\n"
	    "kill runs as: rock -- ls.\n");
}

/* The build tree's library when this is the build tree's rock, else the
 * installed one: a copy of either still finds its own. */
static const char *
library_path(void)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n > 0) {
		self[n] = '\0';
		if (strcmp(self, ROCK_BUILD_EXE) == 0)
			return ROCK_BUILD_LIB;
	}
	return ROCK_INSTALLED_LIB;
}

/* Find CMD like a shell does; returns 0, or 127 (not found) / 126. */
static int
find_command(const char *cmd, char *out, size_t size)
{
	const char *path = getenv("PATH");
	const char *p, *end;
	int saw_noexec = 0;

	if (strchr(cmd, '/') != NULL) {
		if (snprintf(out, size, "%s", cmd) >= (int)size)
			return 127;
		if (access(out, F_OK) != 0)
			return 127;
		return access(out, X_OK) == 0 ? 0 : 126;
	}
	if (path == NULL)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (p = path; ; p = end + 1) {
		struct stat st;
		size_t len;

		end = strchr(p, ':');
		len = end != NULL ? (size_t)(end - p) : strlen(p);
		if (snprintf(out, size, "%.*s%s%s", (int)len, p, len ? "/" : "",
		    cmd) < (int)size && stat(out, &st) == 0 &&
		    S_ISREG(st.st_mode)) {
			if (access(out, X_OK) == 0)
				return 0;
			saw_noexec = 1;
		}
		if (end == NULL)
			break;
	}
	return saw_noexec ? 126 : 127;
}

/* Said once, before exec, so nobody takes a plain connection for a rock;
 * the program runs all the same. */
static void
warn_if_uncovered(const char *path)
{
	const char *why = rock_uncovered_reason(path);

	if (why != NULL)
		fprintf(stderr, "rock: warning: %s %s, so its connections are "
		    "plain TCP, untouched by rock\n", path, why);
}

/* 1 if the colon- or blank-separated list already holds this entry. */
static int
preload_has(const char *list, const char *entry)
{
	size_t len = strlen(entry);
	const char *p = list;

	while ((p = strstr(p, entry)) != NULL) {
		if ((p == list || p[-1] == ':' || p[-1] == ' ') &&
		    (p[len] == '\0' || p[len] == ':' || p[len] == ' '))
			return 1;
		p += len;
	}
	return 0;
}

/* Append "entry:" to buf unless the old list has it already. */
static int
add_missing(char *buf, size_t size, const char *entry, size_t len,
    const char *old)
{
	char one[PATH_MAX];
	size_t used = strlen(buf);

	if (len == 0 || len >= sizeof(one))
		return 0;
	memcpy(one, entry, len);
	one[len] = '\0';
	if (preload_has(old, one))
		return 0;
	if (used + len + 2 > size)
		return -1;
	memcpy(buf + used, one, len);
	buf[used + len] = ':';
	buf[used + len + 1] = '\0';
	return 0;
}

/* Ours first, so we see the program's calls before any other preload;
 * a sanitized librock needs the sanitizer runtimes ahead of it. */
static int
set_preload(const char *lib)
{
	const char *old = getenv(LD_ENV_PRELOAD);
	const char *p, *colon;
	char buf[8192] = "";

	if (old == NULL)
		old = "";
	for (p = ROCK_SANITIZER_PRELOAD; *p != '\0'; p = *colon ? colon + 1 : colon) {
		colon = strchrnul(p, ':');
		if (add_missing(buf, sizeof(buf), p, (size_t)(colon - p), old) != 0)
			goto toolong;
	}
	if (add_missing(buf, sizeof(buf), lib, strlen(lib), old) != 0 ||
	    strlen(buf) + strlen(old) + 1 > sizeof(buf))
		goto toolong;
	if (buf[0] == '\0')
		return 0;
	if (*old != '\0')
		strcat(buf, old);
	else
		buf[strlen(buf) - 1] = '\0';
	return setenv(LD_ENV_PRELOAD, buf, 1);
toolong:
	fprintf(stderr, "rock: LD_PRELOAD too long\n");
	return -1;
}

/* `rock ssh` starts a rockd on the host first, unless rocks are off. */
static int
wants_session(const char *cmd)
{
	const char *base = strrchr(cmd, '/'), *mode = getenv(ROCK_ENV_MODE);

	base = base != NULL ? base + 1 : cmd;
	return strcmp(base, "ssh") == 0 && (mode == NULL ||
	    strcmp(mode, "rock") == 0);
}

/* Called rock-ssh (a link to rock): a program that runs "rock ssh" where
 * a tool takes one program and no words (scp -S, GIT_SSH, ProxyJump's
 * ssh): argv becomes "rock ssh ARGS...". */
static char **
as_rock_ssh(int *argc, char **argv)
{
	const char *base = strrchr(argv[0], '/');
	char **v;

	base = base != NULL ? base + 1 : argv[0];
	if (strcmp(base, "rock-ssh") != 0 ||
	    (v = calloc((size_t)*argc + 2, sizeof(*v))) == NULL)
		return argv;
	v[0] = argv[0];
	v[1] = (char *)(uintptr_t)"ssh";
	memcpy(v + 2, argv + 1, (size_t)*argc * sizeof(*v));
	(*argc)++;
	return v;
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "keepalive-only", no_argument, NULL, 'k' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	char path[PATH_MAX];
	const char *lib;
	int c, keepalive_only = 0, verbose = 0, r;

	argv = as_rock_ssh(&argc, argv);
	/* Subcommands; a program of that name runs as "rock -- ls". */
	if (argc >= 2 && strcmp(argv[1], "ls") == 0)
		return rock_ls_main(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "kill") == 0)
		return rock_kill_main(argc - 1, argv + 1);
	while ((c = getopt_long(argc, argv, "+hv", longopts, NULL)) != -1) {
		switch (c) {
		case 'k':
			keepalive_only = 1;
			break;
		case 'v':
			verbose = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("rock (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "rock: no command given\n");
		usage(stderr);
		return 2;
	}
	lib = library_path();
	if (access(lib, R_OK) != 0) {
		fprintf(stderr, "rock: %s: %s (build or install rocks)\n", lib,
		    strerror(errno));
		return 1;
	}
	if ((r = find_command(argv[optind], path, sizeof(path))) != 0) {
		fprintf(stderr, "rock: %s: %s\n", argv[optind],
		    r == 127 ? "command not found" : "Permission denied");
		return r;
	}
	if (!keepalive_only && wants_session(argv[optind]) &&
	    (r = rock_ssh_session(path, argc - optind, argv + optind,
	    verbose)) != 0)
		return r;
	warn_if_uncovered(path);
	if (set_preload(lib) != 0)
		return 1;
	if (keepalive_only && setenv(ROCK_ENV_MODE, "keepalive", 1) != 0)
		return 1;
	if (verbose) {
		fprintf(stderr, "rock: running %s with %s preloaded, mode %s\n",
		    path, lib, getenv(ROCK_ENV_MODE) ? getenv(ROCK_ENV_MODE) : "rock");
		setenv(ROCK_ENV_DEBUG, "1", 1);
		setenv(ROCK_ENV_LOG, "stderr", 0);
	}
	execv(path, argv + optind);
	fprintf(stderr, "rock: %s: %s\n", argv[optind], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}
