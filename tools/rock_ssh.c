/* rock_ssh.c: `rock ssh`: find or start a per-user rockd on the host ssh connects to, and pin ssh's rock to its key. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rock_config.h"
#include "rock_engine.h"
#include "rock_env.h"
#include "rock_err.h"
#include "rock_known.h"
#include "rock_log.h"
#include "rock_parse.h"
#include "rock_probe_file.h"
#include "rock_ssh.h"
#include "rock_ssh_cmd.h"
#include "rock_ssh_memo.h"

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
		/* ssh says nothing at LogLevel ERROR or QUIET. */
		first_line(err, why, sizeof(why));
		fprintf(stderr, "rock: cannot start rockd on %s over ssh: %s; "
		    "running ssh as usual\n", host, why[0] != '\0' ? why :
		    "ssh exited with status 255 and no message");
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

/* Probe the hop's PORT: 0 and the instance its announcement names, or
 * the probe's error (ROCK_ERR_SYSTEM: no address). What it found goes to
 * the cache the user's processes share, as a connect's probe does, so
 * ssh's connect does not probe again. *answered: a definite answer (a
 * rockd, a refusal, an ordinary server), not silence. */
static int
probe_port(struct ssh_plan *p, unsigned port,
    uint8_t instance[SSH_MEMO_INSTANCE_LEN], int *answered)
{
	uint8_t ann[ROCK_ANNOUNCE_LEN];
	int r, silent = 0;

	*answered = 0;
	if (p->addr_len == 0)
		return ROCK_ERR_SYSTEM;
	set_port(p, port);
	r = rock_probe(&p->log, (struct sockaddr *)&p->addr, p->addr_len,
	    rock_probe_budget_ms(p->cfg.probe_timeout_ms, 1), 1, ann, &silent);
	*answered = r != ROCK_ERR_TIMEOUT && !silent;
	if (r == 0 || (rock_probe_found_plain(r) && !silent))
		rock_probe_file_put(&p->probes, &p->log,
		    (struct sockaddr *)&p->addr, p->addr_len, r == 0 ? ann : NULL,
		    r == 0 ? ROCK_PROBE_TTL_MS : ROCK_PROBE_PLAIN_TTL_MS);
	if (r == 0)
		memcpy(instance, ann + SSH_MEMO_INSTANCE_OFF,
		    SSH_MEMO_INSTANCE_LEN);
	return r;
}

/* ssh's connection goes to PORT of the hop, pinned to KEY; the memo is
 * named for ssh's librock to forget if the key is not proved. */
static int
pin(struct ssh_plan *p, unsigned port, const char *key)
{
	char map[32];

	snprintf(map, sizeof(map), "%u=%u", p->hop.port, port);
	if (setenv(ROCK_ENV_PORT_MAP, map, 1) != 0 ||
	    setenv(ROCK_ENV_SERVER_KEY, key, 1) != 0 ||
	    (p->memo[0] != '\0' && setenv(ROCK_ENV_SSH_MEMO, p->memo, 1) != 0))
		return -1;
	return 0;
}

/* The session rockd an earlier rock ssh started: 1 when it answers as
 * the same process (its key is then proved by ssh's own handshake,
 * which fails rather than go elsewhere, and forgets the memo). 0 when it
 * does not; forgotten when something else answered there, kept when
 * nothing did (the host out of reach for now: a bootstrap replaces it). */
static int
remembered(struct ssh_plan *p)
{
	uint8_t inst[SSH_MEMO_INSTANCE_LEN];
	struct ssh_memo m;
	int answered;

	if (p->memo[0] == '\0' || ssh_memo_load(p->memo, &m) != 0)
		return 0;
	if (probe_port(p, m.port, inst, &answered) == 0 &&
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
		    "%s %s; starting another\n", m.port, p->hop.host,
		    answered ? "is gone" : "does not answer");
	if (answered)
		ssh_memo_forget(p->memo);
	return 0;
}

/* A rockd on the port the port map sends ssh to, as the user's probe
 * cache knows it (a system rockd, or a server that makes rocks itself),
 * whose key the known servers file holds: ssh's connection becomes a
 * rock to it, pinned to that key, with nothing to start. Without a key
 * known, a bootstrap: its key comes over ssh, never on first use from
 * whatever listens on an unprivileged port. */
static int
known_rockd(struct ssh_plan *p)
{
	unsigned port = rock_port_mapped(&p->cfg, (unsigned short)p->hop.port);
	char key[ROCK_KEY_TEXT_LEN];
	uint8_t pk[ROCK_IDENT_LEN];
	struct rock_probe_fact f = { 0 };
	int found;

	if (p->addr_len == 0)
		return 0;
	set_port(p, port);
	found = rock_probe_file_get(&p->probes, &p->log,
	    (struct sockaddr *)&p->addr, p->addr_len, &f) && f.enhanced;
	rock_wipe(&f.ticket, sizeof(f.ticket));	/* not ours to use */
	if (!found || !rock_trust_known(&p->cfg.trust, &p->log,
	    (struct sockaddr *)&p->addr, p->addr_len, pk))
		return 0;
	rock_key_text(pk, key);
	if (setenv(ROCK_ENV_SERVER_KEY, key, 1) != 0)
		return 0;
	if (p->verbose)
		fprintf(stderr, "rock: a rockd on port %u of %s (probe cache), "
		    "key %s (known servers): nothing to start\n", port,
		    p->hop.host, key);
	return 1;
}

/* rockd said it knows no --persist (getopt's "unrecognized option"). */
static int
older_rockd(FILE *err)
{
	char why[256];

	first_line(err, why, sizeof(why));
	return strstr(why, "--persist") != NULL;
}

/* rockd --session over ssh, and again without --persist for a rockd
 * from before it: 0 with its port and key, or what bootstrap says. */
static int
session_answer(struct ssh_plan *p, char *line, size_t size, unsigned *port,
    char *key, FILE *err)
{
	int r;

	r = bootstrap(p->ssh, p->hop_argv, p->hop_cmd, p->cfg.ssh_persist_s,
	    line, size, err);
	if (r == 2 && p->cfg.ssh_persist_s > 0 && older_rockd(err)) {
		/* One that leaves with its last session: nothing to
		 * remember. */
		if (p->verbose)
			fprintf(stderr, "rock: the rockd on %s has no --persist; "
			    "starting it without\n", p->hop.host);
		p->cfg.ssh_persist_s = 0;
		rewind(err);
		r = ftruncate(fileno(err), 0) != 0 ? -1 :
		    bootstrap(p->ssh, p->hop_argv, p->hop_cmd, 0, line, size,
		    err);
	}
	if (r == 0 && parse_answer(line, port, key) != 0)
		r = -3;
	return r;
}

/* Start a session rockd over ssh, pin ssh to it, and remember it. */
static int
start(struct ssh_plan *p)
{
	char line[512] = "", key[ROCK_KEY_TEXT_LEN];
	struct ssh_memo m;
	unsigned port;
	FILE *err;
	int r, answered;

	if (p->verbose)
		fprintf(stderr, "rock: starting a session rockd on %s over ssh\n",
		    p->hop.host);
	if ((err = tmpfile()) == NULL)
		return fall_back(-1, p->hop.host, NULL, "");
	if ((r = session_answer(p, line, sizeof(line), &port, key, err)) != 0) {
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
	if (p->memo[0] != '\0' && p->cfg.ssh_persist_s > 0 &&
	    probe_port(p, port, m.instance, &answered) == 0 &&
	    ssh_memo_save(p->memo, &m) == 0 && p->verbose)
		fprintf(stderr, "rock: remembered in %s for %d s after its last "
		    "session\n", p->memo, p->cfg.ssh_persist_s);
	return 0;
}

/* ProxyJump's first hop, [ssh://][user@]host[:port] with host in
 * brackets if IPv6 (as ssh -G writes it), as ssh's own ProxyJump runs
 * it: argv0 [-F file] [-l user] [-p port] host, in v (8 words and
 * NULL at most; into buf); the count, or -1 for a hop it cannot read. */
static int
jump_argv(const char *argv0, const char *config, const char *spec,
    char *buf, size_t size, char **v)
{
	char *user = NULL, *host, *port = NULL, *end;
	int n = 0;

	if (strncmp(spec, "ssh://", 6) == 0)
		spec += 6;
	if (snprintf(buf, size, "%s", spec) >= (int)size)
		return -1;
	host = buf;
	if ((end = strrchr(host, '@')) != NULL) {
		*end = '\0';
		user = host;
		host = end + 1;
	}
	if (host[0] == '[') {
		if ((end = strchr(host, ']')) == NULL)
			return -1;
		*end = '\0';
		host++;
		if (end[1] == ':')
			port = end + 2;
		else if (end[1] != '\0')
			return -1;
	} else if ((end = strchr(host, ':')) != NULL &&
	    strchr(end + 1, ':') == NULL) {
		*end = '\0';
		port = end + 1;
	}
	if (host[0] == '\0' || (user != NULL && user[0] == '\0') ||
	    (port != NULL && port[0] == '\0'))
		return -1;
	v[n++] = (char *)(uintptr_t)argv0;
	if (config != NULL) {
		v[n++] = (char *)(uintptr_t)"-F";
		v[n++] = (char *)(uintptr_t)config;
	}
	if (user != NULL) {
		v[n++] = (char *)(uintptr_t)"-l";
		v[n++] = user;
	}
	if (port != NULL) {
		v[n++] = (char *)(uintptr_t)"-p";
		v[n++] = port;
	}
	v[n++] = host;
	v[n] = NULL;
	return n;
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
	char jump[sizeof(p.hop.jump)], buf[sizeof(p.hop.jump)];
	char *jv[9];
	struct ssh_args a;
	int n, r, lock;

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
		snprintf(jump, sizeof(jump), "%s", p.hop.jump);
		if ((n = jump_argv(argv[0], a.config, jump, buf, sizeof(buf),
		    jv)) < 0) {
			fprintf(stderr, "rock: cannot read the jump host \"%s\"; "
			    "running ssh as usual\n", jump);
			return 0;
		}
		p.hop_argv = jv;
		p.hop_cmd = n;
		if (verbose)
			fprintf(stderr, "rock: ssh reaches %s through %s: the rock "
			    "is to %s\n", argv[a.host], jump, jump);
		if (ssh_resolve(ssh, jv, n, &p.hop) != 0) {
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
	/* A password typed for one bootstrap holds the others that long. */
	lock = p.memo[0] != '\0' ? ssh_memo_lock(p.memo, ANSWER_TIMEOUT_MS +
	    5000) : -1;
	if (remembered(&p) || known_rockd(&p))
		r = 0;
	else
		r = start(&p);
	if (lock >= 0)
		close(lock);
	return r;
}
