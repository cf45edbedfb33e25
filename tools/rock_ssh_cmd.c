/* rock_ssh_cmd.c: the ssh commands rock ssh runs before ssh itself: ssh -G, ssh -O check and the bootstrap of a session rockd, and the words of ssh's command line. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rock_known.h"
#include "rock_parse.h"
#include "rock_ssh.h"
#include "rock_ssh_cmd.h"

/* rockd detaches right after its line: its ssh then ends at once. */
#define EXIT_WAIT_MS 5000
/* rockd is installed in sbin, which a user's ssh session seldom has in
 * PATH; env runs it from any login shell and exits 127 without it. */
#define REMOTE_COMMAND \
	"env PATH=\"$PATH:/usr/local/sbin:/usr/sbin\" rockd --session"
#define SSH_PORT 22
/* ssh's options that take an argument (OpenSSH's getopt string), and
 * those that ask for no remote command (nothing to start rockd with). */
static const char ssh_argopts[] = "BbcDEeFIiJLlmOoPpQRSWw";
static const char ssh_nosession[] = "GNOQVW";


/* Options come before the destination and may follow it: ssh parses
 * them again there, up to the command or "--". */
void
ssh_split(int argc, char **argv, struct ssh_args *a)
{
	int i, ended = 0;

	a->host = -1;
	a->session = 1;
	a->config = NULL;
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
				if (*p == 'F')
					a->config = p[1] != '\0' ? p + 1 :
					    i + 1 < argc ? argv[i + 1] : NULL;
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
int
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
int
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
int
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
void
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
char **
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
int
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

	/* 0 is rockd's default: said only otherwise, so that a rockd older
	 * than --persist runs as before. */
	if (persist_s > 0)
		snprintf(remote, sizeof(remote), "%s --persist %d",
		    REMOTE_COMMAND, persist_s);
	else
		snprintf(remote, sizeof(remote), "%s", REMOTE_COMMAND);
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

