/* rock_ssh.c: `rock ssh`: start a per-user rockd on the server over ssh first, and pin the rock to the key it announces. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "rock_config.h"
#include "rock_engine.h"
#include "rock_env.h"
#include "rock_known.h"
#include "rock_log.h"
#include "rock_parse.h"
#include "rock_probe_file.h"
#include "rock_ssh.h"
#include "rock_ssh_memo.h"

/* Long enough to type a password or touch a key. */
#define ANSWER_TIMEOUT_MS (60 * 1000)
/* rockd detaches right after its line: its ssh then ends at once. */
#define EXIT_WAIT_MS 5000
/* rockd is installed in sbin, which a user's ssh session seldom has in
 * PATH; env runs it from any login shell and exits 127 without it. */
#define REMOTE_COMMAND \
	"env PATH=\"$PATH:/usr/local/sbin:/usr/sbin\" rockd --session"
#define SSH_EXIT_FAILED 255	/* ssh's own failure: no connection */
#define SSH_PORT 22

/* ssh's options that take an argument (OpenSSH's getopt string), and
 * those that ask for no remote command (nothing to start rockd with). */
static const char ssh_argopts[] = "BbcDEeFIiJLlmOoPpQRSWw";
static const char ssh_nosession[] = "GNOQVW";

struct ssh_args {
	int host;	/* index of the destination; -1: none */
	int cmd;	/* index of the remote command; argc: none */
	int session;	/* 0: ssh is asked for no remote command */
};

/* Options come before the destination and may follow it: ssh parses
 * them again there, up to the command or "--". */
static void
ssh_split(int argc, char **argv, struct ssh_args *a)
{
	int i, ended = 0;

	a->host = -1;
	a->session = 1;
	for (i = 1; i < argc; i++) {
		const char *p = argv[i];

		if (!ended && strcmp(p, "--") == 0) {
			ended = 1;
			continue;
		}
		if (ended || p[0] != '-' || p[1] == '\0') {
			if (a->host >= 0)
				break;
			a->host = i;
			ended = 0;
			continue;
		}
		for (p++; *p != '\0'; p++) {
			if (strchr(ssh_nosession, *p) != NULL)
				a->session = 0;
			if (strchr(ssh_argopts, *p) != NULL) {
				i += p[1] == '\0';
				break;
			}
		}
	}
	a->cmd = i < argc ? i : argc;
}

/* argv with stdin from /dev/null and stdout, stderr where asked. */
static pid_t
spawn(const char *path, char **argv, int out, int err)
{
	pid_t pid = fork();
	int null;

	if (pid != 0)
		return pid;
	if ((null = open("/dev/null", O_RDONLY)) < 0 || dup2(null, 0) < 0 ||
	    dup2(out, 1) < 0 || dup2(err, 2) < 0)
		_exit(126);
	execv(path, argv);
	_exit(127);
}

/* ssh's argv up to the command, after extra (NULL-ended), then last. */
static char **
ssh_argv(char **argv, int cmd, const char *const *extra, const char *last)
{
	char **v;
	int n = 0, i;

	while (extra[n] != NULL)
		n++;
	if ((v = calloc((size_t)(n + cmd + 2), sizeof(*v))) == NULL)
		return NULL;
	v[0] = argv[0];
	for (i = 0; i < n; i++)
		v[1 + i] = (char *)(uintptr_t)extra[i];
	for (i = 1; i < cmd; i++)
		v[n + i] = argv[i];
	v[n + cmd] = (char *)(uintptr_t)last;
	return v;
}

static long long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One line from fd, by the deadline: its length (newline and a tty's
 * carriage return cut), -1 at EOF first, -2 on time out. */
static int
read_line(int fd, char *buf, size_t size, long long deadline)
{
	struct pollfd pfd = { fd, POLLIN, 0 };
	size_t len = 0;
	ssize_t n;

	for (;;) {
		long long left = deadline - now_ms();
		char *nl;

		if (left <= 0 || (n = poll(&pfd, 1, (int)left)) == 0)
			return -2;
		if (n < 0 && errno == EINTR)
			continue;
		if ((n = read(fd, buf + len, size - 1 - len)) < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		len += (size_t)n;
		buf[len] = '\0';
		if ((nl = strchr(buf, '\n')) != NULL) {
			*nl = '\0';
			if (nl > buf && nl[-1] == '\r')
				*--nl = '\0';
			return (int)(nl - buf);
		}
		if (len == size - 1)
			return -1;
	}
}

/* Its exit status, 255 for a signal; killed once the wait is over. */
static int
reap(pid_t pid, int wait_ms)
{
	long long deadline = now_ms() + wait_ms;
	struct timespec tick = { 0, 20 * 1000000 };
	int st;
	pid_t r;

	while ((r = waitpid(pid, &st, WNOHANG)) == 0 && now_ms() < deadline)
		nanosleep(&tick, NULL);
	if (r == 0) {
		kill(pid, SIGTERM);
		r = waitpid(pid, &st, 0);
	}
	if (r < 0)
		return SSH_EXIT_FAILED;
	return WIFEXITED(st) ? WEXITSTATUS(st) : SSH_EXIT_FAILED;
}

/* Where ssh's own connection goes, as ssh -G resolves options and
 * config: the destination, or the first hop of its ProxyJump. */
struct ssh_hop {
	char host[256];		/* hostname, after the config's HostName */
	char user[64];
	unsigned port;
	int family;		/* AddressFamily: AF_UNSPEC, AF_INET, AF_INET6 */
	char jump[512];		/* ProxyJump's first hop; "": none */
	int proxy_command;	/* ProxyCommand: ssh makes no connection */
	int control_path;	/* ControlPath: a master may be running */
};

/* One "key value" line of ssh -G into the hop. */
static void
hop_line(struct ssh_hop *h, char *line)
{
	char *v = strchr(line, ' ');
	long long port;

	if (v == NULL)
		return;
	*v++ = '\0';
	v[strcspn(v, "\n")] = '\0';
	if (strcmp(line, "hostname") == 0)
		snprintf(h->host, sizeof(h->host), "%s", v);
	else if (strcmp(line, "user") == 0)
		snprintf(h->user, sizeof(h->user), "%s", v);
	else if (strcmp(line, "port") == 0 &&
	    rock_parse_ll(v, 1, 65535, &port) == 0)
		h->port = (unsigned)port;
	else if (strcmp(line, "addressfamily") == 0)
		h->family = strcmp(v, "inet") == 0 ? AF_INET :
		    strcmp(v, "inet6") == 0 ? AF_INET6 : AF_UNSPEC;
	else if (strcmp(line, "proxyjump") == 0 && strcmp(v, "none") != 0)
		snprintf(h->jump, sizeof(h->jump), "%.*s", (int)strcspn(v, ","), v);
	else if (strcmp(line, "proxycommand") == 0 && strcmp(v, "none") != 0)
		h->proxy_command = 1;
	else if (strcmp(line, "controlpath") == 0 && strcmp(v, "none") != 0)
		h->control_path = 1;
}

/* ssh -G for argv up to cmd: 0 and the hop, or -1 (ssh said no). */
static int
ssh_resolve(const char *ssh, char **argv, int cmd, struct ssh_hop *h)
{
	static const char *const extra[] = { "-G", NULL };
	char **v = ssh_argv(argv, cmd, extra, NULL);
	char line[1024];
	int fds[2], err = -1, r = -1;
	FILE *f = NULL;
	pid_t pid = -1;

	memset(h, 0, sizeof(*h));
	h->port = SSH_PORT;
	if (v == NULL || pipe2(fds, O_CLOEXEC) != 0)
		goto out;
	if ((err = open("/dev/null", O_WRONLY | O_CLOEXEC)) >= 0)
		pid = spawn(ssh, v, fds[1], err);
	close(fds[1]);
	if (pid > 0 && (f = fdopen(fds[0], "r")) != NULL) {
		while (fgets(line, sizeof(line), f) != NULL)
			hop_line(h, line);
		fclose(f);
	} else {
		close(fds[0]);
	}
	if (pid > 0 && reap(pid, EXIT_WAIT_MS) == 0 && h->host[0] != '\0')
		r = 0;
out:
	if (err >= 0)
		close(err);
	free(v);
	return r;
}

/* A live master for the destination (ssh -O check): the session goes
 * through it, which an earlier rock ssh made a rock (or the user made
 * plain): there is nothing to start. */
static int
master_alive(const char *ssh, char **argv, int cmd)
{
	static const char *const extra[] = { "-O", "check", NULL };
	char **v = ssh_argv(argv, cmd, extra, NULL);
	int null = -1, alive = 0;
	pid_t pid;

	if (v != NULL && (null = open("/dev/null", O_WRONLY | O_CLOEXEC)) >= 0 &&
	    (pid = spawn(ssh, v, null, null)) > 0)
		alive = reap(pid, EXIT_WAIT_MS) == 0;
	if (null >= 0)
		close(null);
	free(v);
	return alive;
}

/* "ROCKD-SESSION 1 PORT KEY": 0 with the port and the key's text (in
 * key, ROCK_KEY_TEXT_LEN bytes); the line is left as it came. */
static int
parse_answer(const char *line, unsigned *port, char *key)
{
	size_t tag = strlen(ROCK_SESSION_TAG);
	uint8_t pk[ROCK_IDENT_LEN];
	char num[8];
	const char *p = line + tag + 1, *sp;
	long long n;

	if (strncmp(line, ROCK_SESSION_TAG " ", tag + 1) != 0 ||
	    (sp = strchr(p, ' ')) == NULL || (size_t)(sp - p) >= sizeof(num) ||
	    strlen(sp + 1) >= ROCK_KEY_TEXT_LEN)
		return -1;
	memcpy(num, p, (size_t)(sp - p));
	num[sp - p] = '\0';
	if (rock_parse_ll(num, 1, 65535, &n) != 0 ||
	    rock_key_parse(sp + 1, pk) != 0)
		return -1;
	*port = (unsigned)n;
	memcpy(key, sp + 1, strlen(sp + 1) + 1);
	return 0;
}

/* ssh's first line of complaint, for the message. */
static void
first_line(FILE *f, char *buf, size_t size)
{
	buf[0] = '\0';
	rewind(f);
	if (fgets(buf, (int)size, f) != NULL)
		buf[strcspn(buf, "\r\n")] = '\0';
}

/* argv up to cmd without the user's -s and -t: scp and sftp ask for a
 * subsystem with -s, and -t for a terminal, both for the session, not
 * for ssh -G (which refuses -s without a command), -O check or the
 * bootstrap's command. Rewritten words are in *buf; *n the count. */
static char **
without_session_flags(char **argv, int cmd, char **buf, int *n)
{
	size_t total = 1;
	char **u, *q;
	int i, opts = 1;

	for (i = 0; i < cmd; i++)
		total += strlen(argv[i]) + 1;
	u = calloc((size_t)cmd + 1, sizeof(*u));
	if (u == NULL || (*buf = q = malloc(total)) == NULL) {
		free(u);
		return NULL;
	}
	u[0] = argv[0];
	for (i = 1, *n = 1; i < cmd; i++) {
		const char *w = argv[i], *p;
		char *d = q;
		int takes_next = 0;

		if (!opts || w[0] != '-' || w[1] == '\0' || strcmp(w, "--") == 0) {
			opts = opts && strcmp(w, "--") != 0;
			u[(*n)++] = argv[i];
			continue;
		}
		*q++ = '-';
		for (p = w + 1; *p != '\0'; p++) {
			if (strchr(ssh_argopts, *p) != NULL) {
				q = stpcpy(q, p);
				takes_next = p[1] == '\0';
				break;
			}
			if (*p != 's' && *p != 't')
				*q++ = *p;
		}
		*q++ = '\0';
		if (strcmp(d, "-") != 0)
			u[(*n)++] = d;
		if (takes_next && i + 1 < cmd)
			u[(*n)++] = argv[++i];
	}
	return u;
}

/* Run the remote command over ssh (argv up to cmd, never a master):
 * 0 and its line; ssh's exit status, or -1 (no ssh), -2 (no line in
 * time), -3 (no line). */
static int
bootstrap(const char *ssh, char **argv, int cmd, int persist_s,
    char *line, size_t size, FILE *err)
{
	/* No terminal, so the line comes as written; no forwardings: the
	 * ssh that follows sets them up. Never a master, nor through one:
	 * run before librock, a master it made (ControlMaster auto in the
	 * user's config) would be a plain connection that every later
	 * session multiplexes through. */
	static const char *const extra[] = { "-T", "-o",
	    "ClearAllForwardings=yes", "-o", "ControlMaster=no", "-o",
	    "ControlPath=none", "-o", "RemoteCommand=none", NULL };
	char remote[sizeof(REMOTE_COMMAND) + 32];
	char **v;
	int fds[2], n, st;
	pid_t pid;

	snprintf(remote, sizeof(remote), "%s --persist %d", REMOTE_COMMAND,
	    persist_s);
	if ((v = ssh_argv(argv, cmd, extra, remote)) == NULL ||
	    pipe2(fds, O_CLOEXEC) != 0) {
		free(v);
		return -1;
	}
	pid = spawn(ssh, v, fds[1], fileno(err));
	free(v);
	close(fds[1]);
	n = pid < 0 ? -1 : read_line(fds[0], line, size,
	    now_ms() + ANSWER_TIMEOUT_MS);
	close(fds[0]);
	if (pid < 0)
		return -1;
	st = reap(pid, n == -2 ? 0 : EXIT_WAIT_MS);
	/* A line is the answer, whatever became of ssh after it. */
	if (n >= 0 || n == -2)
		return n == -2 ? -2 : 0;
	return st != 0 ? st : -3;
}

/* Why the session is not protected, said once, with what happens
 * instead; then ssh runs as it would without rock ssh (0). An ssh that
 * could not log in is no proof the host is out of reach: sshd may
 * listen on loopback only, behind a rockd on 4022 that the default port
 * map still finds. */
static int
fall_back(int r, const char *host, FILE *err, const char *line)
{
	static const char plain[] = "the session is an ordinary ssh "
	    "connection (TCP keepalive on), not protected";
	char why[256];

	switch (r) {
	case SSH_EXIT_FAILED:
		first_line(err, why, sizeof(why));
		fprintf(stderr, "rock: cannot start rockd on %s over ssh%s%s; "
		    "running ssh as usual\n", host, why[0] != '\0' ? ": " : "",
		    why);
		break;
	case 127:
		fprintf(stderr, "rock: rockd is not installed on %s; %s\n",
		    host, plain);
		break;
	case -1:
		fprintf(stderr, "rock: cannot run ssh to start rockd on %s: %s; "
		    "%s\n", host, strerror(errno), plain);
		break;
	case -2:
		fprintf(stderr, "rock: no answer from rockd on %s within %d s; "
		    "%s\n", host, ANSWER_TIMEOUT_MS / 1000, plain);
		break;
	case -3:
		fprintf(stderr, "rock: rockd on %s answered \"%s\", not \"%s "
		    "PORT KEY\"; %s\n", host, line, ROCK_SESSION_TAG, plain);
		break;
	default:
		first_line(err, why, sizeof(why));
		fprintf(stderr, "rock: rockd on %s did not start a session (exit "
		    "status %d%s%s); %s\n", host, r,
		    why[0] != '\0' ? ": " : "", why, plain);
	}
	return 0;
}

/* What one rock ssh knows and decides. */
struct ssh_plan {
	const char *ssh;
	struct rock_config cfg;
	struct rock_log log;
	struct rock_probe_file probes;
	struct ssh_hop hop;		/* ssh's own connection goes there */
	char **hop_argv;		/* ssh's argv naming the hop */
	int hop_cmd;			/* ... up to here */
	struct sockaddr_storage addr;	/* the hop's first address */
	socklen_t addr_len;		/* 0: it did not resolve */
	char memo[PATH_MAX];		/* "": nothing to remember it in */
	int verbose;
};

static const char *
env_get(void *arg, const char *name)
{
	(void)arg;
	return getenv(name);
}

/* The hop's address as ssh will dial it first (AddressFamily). */
static void
hop_address(struct ssh_plan *p)
{
	struct addrinfo hints = { .ai_family = p->hop.family,
	    .ai_socktype = SOCK_STREAM }, *ai;

	p->addr_len = 0;
	if (getaddrinfo(p->hop.host, NULL, &hints, &ai) != 0)
		return;
	if (ai->ai_addrlen <= sizeof(p->addr)) {
		memcpy(&p->addr, ai->ai_addr, ai->ai_addrlen);
		p->addr_len = ai->ai_addrlen;
	}
	freeaddrinfo(ai);
}

static void
set_port(struct ssh_plan *p, unsigned port)
{
	if (p->addr.ss_family == AF_INET6)
		((struct sockaddr_in6 *)&p->addr)->sin6_port = htons(port);
	else
		((struct sockaddr_in *)&p->addr)->sin_port = htons(port);
}

/* Probe the hop's PORT: 0 and the instance its announcement names (the
 * answer shared with the user's processes, so ssh's connect skips its
 * own probe), or -1. */
static int
probe_port(struct ssh_plan *p, unsigned port,
    uint8_t instance[SSH_MEMO_INSTANCE_LEN])
{
	uint8_t ann[ROCK_ANNOUNCE_LEN];
	int silent;

	if (p->addr_len == 0)
		return -1;
	set_port(p, port);
	if (rock_probe(&p->log, (struct sockaddr *)&p->addr, p->addr_len,
	    rock_probe_budget_ms(p->cfg.probe_timeout_ms, 1), ann,
	    &silent) != 0)
		return -1;
	rock_probe_file_put(&p->probes, &p->log, (struct sockaddr *)&p->addr,
	    p->addr_len, ann, ROCK_PROBE_TTL_MS);
	memcpy(instance, ann + SSH_MEMO_INSTANCE_OFF, SSH_MEMO_INSTANCE_LEN);
	return 0;
}

/* ssh's connection goes to PORT of the hop, pinned to KEY. */
static int
pin(struct ssh_plan *p, unsigned port, const char *key)
{
	char map[32];

	snprintf(map, sizeof(map), "%u=%u", p->hop.port, port);
	return setenv(ROCK_ENV_PORT_MAP, map, 1) == 0 &&
	    setenv(ROCK_ENV_SERVER_KEY, key, 1) == 0 ? 0 : -1;
}

/* The session rockd an earlier rock ssh started: 1 when it answers as
 * the same process (its key is then proved by ssh's own handshake,
 * which fails rather than go elsewhere); 0, forgotten, when it does not. */
static int
remembered(struct ssh_plan *p)
{
	uint8_t inst[SSH_MEMO_INSTANCE_LEN];
	struct ssh_memo m;

	if (p->memo[0] == '\0' || ssh_memo_load(p->memo, &m) != 0)
		return 0;
	if (probe_port(p, m.port, inst) == 0 &&
	    memcmp(inst, m.instance, sizeof(inst)) == 0 &&
	    pin(p, m.port, m.key) == 0) {
		if (p->verbose)
			fprintf(stderr, "rock: session rockd on %s remembered and "
			    "answering: port %u for %u, key %s\n", p->hop.host,
			    m.port, p->hop.port, m.key);
		return 1;
	}
	if (p->verbose)
		fprintf(stderr, "rock: the session rockd remembered on port %u of "
		    "%s is gone; starting another\n", m.port, p->hop.host);
	ssh_memo_forget(p->memo);
	return 0;
}

/* A rockd on the port the port map sends ssh to, as the user's probe
 * cache knows it (a system rockd, or a server that makes rocks itself):
 * ssh's connection becomes a rock with nothing to start. */
static int
known_rockd(struct ssh_plan *p)
{
	unsigned port = rock_port_mapped(&p->cfg, (unsigned short)p->hop.port);
	struct rock_probe_fact f;

	if (p->addr_len == 0)
		return 0;
	set_port(p, port);
	if (!rock_probe_file_get(&p->probes, &p->log,
	    (struct sockaddr *)&p->addr, p->addr_len, &f) || !f.enhanced)
		return 0;
	if (p->verbose)
		fprintf(stderr, "rock: a rockd on port %u of %s (probe cache): "
		    "nothing to start\n", port, p->hop.host);
	return 1;
}

/* Start a session rockd over ssh, pin ssh to it, and remember it. */
static int
start(struct ssh_plan *p)
{
	char line[512] = "", key[ROCK_KEY_TEXT_LEN];
	struct ssh_memo m;
	unsigned port;
	FILE *err;
	int r;

	if (p->verbose)
		fprintf(stderr, "rock: starting a session rockd on %s over ssh\n",
		    p->hop.host);
	if ((err = tmpfile()) == NULL)
		return fall_back(-1, p->hop.host, NULL, "");
	r = bootstrap(p->ssh, p->hop_argv, p->hop_cmd, p->cfg.ssh_persist_s,
	    line, sizeof(line), err);
	if (r == 0 && parse_answer(line, &port, key) != 0)
		r = -3;
	if (r != 0) {
		r = fall_back(r, p->hop.host, err, line);
		fclose(err);
		return r;
	}
	fclose(err);
	if (pin(p, port, key) != 0)
		return 1;
	if (p->verbose)
		fprintf(stderr, "rock: rockd session on %s: port %u for %u, "
		    "key %s\n", p->hop.host, port, p->hop.port, key);
	m.port = port;
	memcpy(m.key, key, sizeof(m.key));
	if (p->memo[0] != '\0' && probe_port(p, port, m.instance) == 0 &&
	    ssh_memo_save(p->memo, &m) == 0 && p->verbose)
		fprintf(stderr, "rock: remembered in %s for %d s after its last "
		    "session\n", p->memo, p->cfg.ssh_persist_s);
	return 0;
}

/* The argument of -F among ssh's options, if given: the jump host's ssh
 * reads the same file. */
static const char *
config_file(char **argv, int cmd)
{
	int i;

	for (i = 1; i < cmd; i++)
		if (strncmp(argv[i], "-F", 2) == 0)
			return argv[i][2] != '\0' ? argv[i] + 2 :
			    i + 1 < cmd ? argv[i + 1] : NULL;
	return NULL;
}

static int plan(const char *ssh, int argc, char **argv, int verbose);

int
rock_ssh_session(const char *ssh, int argc, char **argv, int verbose)
{
	struct ssh_args a;
	char **u, *buf;
	int n, r;

	if (getenv(ROCK_ENV_PORT_MAP) != NULL)
		return 0;
	ssh_split(argc, argv, &a);
	if (a.host < 0 || !a.session)
		return 0;
	if ((u = without_session_flags(argv, a.cmd, &buf, &n)) == NULL)
		return 0;	/* out of memory: ssh as it is */
	r = plan(ssh, n, u, verbose);
	free(u);
	free(buf);
	return r;
}

/* argv: ssh's, up to the command, without -s and -t. */
static int
plan(const char *ssh, int argc, char **argv, int verbose)
{
	static struct ssh_plan p;
	/* A bad value is ssh's librock's to report: once. */
	struct rock_env_parser env = { .get = env_get };
	char jump[sizeof(p.hop.jump) + 8];
	char *jump_argv[5];
	const char *file;
	struct ssh_args a;
	int n = 1;

	ssh_split(argc, argv, &a);
	memset(&p, 0, sizeof(p));
	p.ssh = ssh;
	p.verbose = verbose;
	rock_config_from_env(&p.cfg, &env);
	rock_log_configure(&p.log, &p.cfg, "rock");
	p.probes.path = p.cfg.probe_cache;
	p.hop_argv = argv;
	p.hop_cmd = a.cmd;
	/* ssh -G failing: the bootstrap's ssh will say what is wrong. */
	if (ssh_resolve(ssh, argv, a.cmd, &p.hop) != 0) {
		snprintf(p.hop.host, sizeof(p.hop.host), "%s", argv[a.host]);
		return start(&p);
	}
	/* Without a ControlPath there is no master to look for (one ssh
	 * started less). */
	if (p.hop.control_path && master_alive(ssh, argv, a.cmd)) {
		if (verbose)
			fprintf(stderr, "rock: an ssh master for %s is running: "
			    "the session goes through it, nothing to start\n",
			    argv[a.host]);
		return 0;
	}
	/* -J: ssh's own connection goes to the first jump host, and the
	 * session to the destination rides in it: the rock is to that host. */
	if (p.hop.jump[0] != '\0' && !p.hop.proxy_command) {
		snprintf(jump, sizeof(jump), "ssh://%.*s",
		    (int)sizeof(p.hop.jump) - 1, p.hop.jump);
		jump_argv[0] = argv[0];
		if ((file = config_file(argv, a.cmd)) != NULL) {
			jump_argv[n++] = (char *)(uintptr_t)"-F";
			jump_argv[n++] = (char *)(uintptr_t)file;
		}
		jump_argv[n++] = jump;
		jump_argv[n] = NULL;
		p.hop_argv = jump_argv;
		p.hop_cmd = n;
		if (verbose)
			fprintf(stderr, "rock: ssh reaches %s through %s: the rock "
			    "is to %s\n", argv[a.host], p.hop.jump, p.hop.jump);
		if (ssh_resolve(ssh, jump_argv, n, &p.hop) != 0) {
			snprintf(p.hop.host, sizeof(p.hop.host), "%.*s",
			    (int)sizeof(p.hop.host) - 1, jump);
			return start(&p);
		}
	}
	if (p.hop.jump[0] != '\0' || p.hop.proxy_command) {
		if (verbose)
			fprintf(stderr, "rock: ssh connects through a proxy "
			    "command or a second jump: nothing to start\n");
		return 0;
	}
	hop_address(&p);
	if (ssh_memo_path(p.cfg.run_dir, p.hop.user, p.hop.host, p.hop.port,
	    p.memo, sizeof(p.memo)) != 0)
		p.memo[0] = '\0';
	if (remembered(&p) || known_rockd(&p))
		return 0;
	return start(&p);
}
