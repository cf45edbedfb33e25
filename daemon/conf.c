/* conf.c: rockd's configuration file and command-line services. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>

#include "rock_parse.h"
#include "rockd.h"

#define MAX_TOKENS 16

void
rockd_config_free(struct rockd_config *cfg)
{
	struct rockd_service *s, *next;

	struct rockd_peer *p, *pnext;

	for (s = cfg->services; s != NULL; s = next) {
		next = s->next;
		free(s);
	}
	cfg->services = NULL;
	for (p = cfg->peers; p != NULL; p = pnext) {
		pnext = p->next;
		free(p);
	}
	cfg->peers = NULL;
}

static int
add_service(struct rockd_config *cfg, const char *listen, const char *backend,
    int sniff_ms, char *err, size_t errlen)
{
	struct rockd_service *s, **tail;

	if ((s = calloc(1, sizeof(*s))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	snprintf(s->listen_spec, sizeof(s->listen_spec), "%s", listen);
	snprintf(s->backend.spec, sizeof(s->backend.spec), "%s", backend);
	s->sniff_ms = sniff_ms;
	if (rockd_parse_addr(listen, 1, &s->listen_addr, &s->listen_len, err,
	    errlen) != 0 || rockd_parse_addr(backend, 0, &s->backend.addr,
	    &s->backend.len, err, errlen) != 0) {
		free(s);
		return -1;
	}
	for (tail = &cfg->services; *tail != NULL; tail = &(*tail)->next) {
		if (rockd_addr_overlap(&(*tail)->listen_addr, &s->listen_addr)) {
			snprintf(err, errlen, "\"%s\": the same port as \"%s\" on "
			    "an overlapping address (a wildcard takes every "
			    "address; [::] takes IPv4 too)", listen,
			    (*tail)->listen_spec);
			free(s);
			return -1;
		}
	}
	*tail = s;
	return 0;
}

int
rockd_config_add(struct rockd_config *cfg, const char *listen,
    const char *backend, char *err, size_t errlen)
{
	return add_service(cfg, listen, backend, ROCKD_DEFAULT_SNIFF_MS, err,
	    errlen);
}

/* The sshd that ran us: the server address and port of the ssh
 * connection ("CLIENT CPORT SERVER SPORT"), which that sshd accepted on
 * whatever port or address it listens; else the default. */
static void
sshd_backend(char *out, size_t n)
{
	const char *v = getenv(ROCKD_SSH_CONNECTION_ENV);
	char addr[64];
	unsigned port;

	snprintf(out, n, "%s", ROCKD_DEFAULT_BACKEND);
	if (v == NULL ||
	    sscanf(v, "%*s %*u %63s %u", addr, &port) != 2 ||
	    port == 0 || port > 65535)
		return;
	snprintf(out, n, strchr(addr, ':') != NULL ? "[%s]:%u" : "%s:%u",
	    addr, port);
}

/* An ephemeral port: no configuration line may ask for port 0, so the
 * one service is made with the default and its port cleared here. */
int
rockd_session_config(struct rockd_config *cfg, const char *backend,
    char *err, size_t errlen)
{
	struct rockd_service *s;
	char sshd[128];

	if (backend == NULL)
		sshd_backend(sshd, sizeof(sshd));
	if (rockd_config_add(cfg, ROCKD_DEFAULT_LISTEN, backend != NULL ?
	    backend : sshd, err, errlen) != 0)
		return -1;
	s = cfg->services;
	if (s->listen_addr.ss_family == AF_INET6)
		((struct sockaddr_in6 *)&s->listen_addr)->sin6_port = 0;
	else
		((struct sockaddr_in *)&s->listen_addr)->sin_port = 0;
	snprintf(s->listen_spec, sizeof(s->listen_spec), "an ephemeral port");
	return 0;
}

/* "auto" (0: one per CPU) or 1 to ROCKD_MAX_WORKERS. */
int
rockd_parse_workers(const char *s, long *out)
{
	long long v;

	if (strcmp(s, "auto") == 0) {
		*out = 0;
		return 0;
	}
	if (rock_parse_ll(s, 1, ROCKD_MAX_WORKERS, &v) != 0)
		return -1;
	*out = (long)v;
	return 0;
}

/* "address" or "connection" (enum rockd_spread). */
int
rockd_parse_spread(const char *s, int *out)
{
	if (strcmp(s, "address") == 0)
		*out = ROCKD_SPREAD_ADDRESS;
	else if (strcmp(s, "connection") == 0)
		*out = ROCKD_SPREAD_CONNECTION;
	else
		return -1;
	return 0;
}

/* "listen SPEC backend SPEC [sniff-ms N]" */
static int
parse_service(struct rockd_config *cfg, char **tok, int n, char *err,
    size_t errlen)
{
	long long sniff = ROCKD_DEFAULT_SNIFF_MS;
	int i;

	if (n < 4 || strcmp(tok[2], "backend") != 0) {
		snprintf(err, errlen, "expected: listen [ADDR:]PORT backend "
		    "HOST:PORT [sniff-ms N]");
		return -1;
	}
	for (i = 4; i < n; i += 2) {
		if (strcmp(tok[i], "sniff-ms") != 0) {
			snprintf(err, errlen, "unknown service option \"%s\"",
			    tok[i]);
			return -1;
		}
		if (i + 1 >= n || rock_parse_ll(tok[i + 1], 0, 60000, &sniff) != 0) {
			snprintf(err, errlen, "sniff-ms needs milliseconds, 0 to 60000");
			return -1;
		}
	}
	return add_service(cfg, tok[1], tok[3], (int)sniff, err, errlen);
}

/* An address is required: counters are for the operator's collector,
 * and a port alone would listen on every address. */
int
rockd_config_metrics(struct rockd_config *cfg, const char *spec, char *err,
    size_t errlen)
{
	char why[300];

	if (strchr(spec, ':') == NULL || strlen(spec) >= sizeof(cfg->metrics_spec)) {
		snprintf(err, errlen, "metrics \"%.200s\": expected ADDR:PORT "
		    "(127.0.0.1:9187, say)", spec);
		return -1;
	}
	if (rockd_parse_addr(spec, 1, &cfg->metrics_addr, &cfg->metrics_len, why,
	    sizeof(why)) != 0) {
		snprintf(err, errlen, "metrics %s", why);
		return -1;
	}
	snprintf(cfg->metrics_spec, sizeof(cfg->metrics_spec), "%s", spec);
	return 0;
}

int
rockd_config_metrics_check(const struct rockd_config *cfg, char *err,
    size_t errlen)
{
	const struct rockd_service *s;

	if (cfg->metrics_spec[0] == '\0')
		return 0;
	for (s = cfg->services; s != NULL; s = s->next) {
		if (rockd_addr_overlap(&s->listen_addr, &cfg->metrics_addr)) {
			snprintf(err, errlen, "metrics \"%s\": the same port as the "
			    "service on \"%s\"", cfg->metrics_spec, s->listen_spec);
			return -1;
		}
	}
	return 0;
}

/* "WORD /absolute/path": relative to what, once rockd is a daemon in "/"? */
static int
parse_path(char **tok, int n, char *out, size_t outlen, char *err,
    size_t errlen)
{
	if (n != 2 || tok[1][0] != '/') {
		snprintf(err, errlen, "expected: %s ABSOLUTE-PATH", tok[0]);
		return -1;
	}
	if (strlen(tok[1]) >= outlen) {
		snprintf(err, errlen, "%s: a path of at most %zu bytes", tok[0],
		    outlen - 1);
		return -1;
	}
	snprintf(out, outlen, "%s", tok[1]);
	return 0;
}

/* udp-address none | :PORT | HOST:PORT (doc/fleet.md). */
static int
parse_udp_address(struct rockd_config *cfg, char **tok, int n, char *err,
    size_t errlen)
{
	static const char expected[] = "expected: udp-address none, "
	    "udp-address :PORT or udp-address HOST:PORT (PORT 1 to 65535; "
	    "HOST an address the clients reach, not a wildcard)";
	long long v;
	char why[200] = "";

	cfg->udp_address_len = 0;
	if (n == 2 && strcmp(tok[1], "none") == 0) {
		cfg->udp_told = 0;
		return 0;
	}
	if (n == 2 && tok[1][0] == ':' &&
	    rock_parse_ll(tok[1] + 1, 1, 65535, &v) == 0) {
		cfg->udp_told = (long)v;
		return 0;
	}
	if (n != 2 || tok[1][0] == ':') {
		snprintf(err, errlen, "%s", expected);
		return -1;
	}
	if (rockd_parse_addr(tok[1], 0, &cfg->udp_address,
	    &cfg->udp_address_len, why, sizeof(why)) != 0 ||
	    rockd_addr_unspecified(&cfg->udp_address)) {
		cfg->udp_address_len = 0;
		snprintf(err, errlen, "%s%s%s", expected,
		    why[0] != '\0' ? ": " : "", why);
		return -1;
	}
	cfg->udp_told = rockd_addr_port(&cfg->udp_address);
	return 0;
}

/* peer N HOST:PORT: another node of the fleet (fleet.c watches it). */
static int
parse_peer(struct rockd_config *cfg, char **tok, int n, char *err,
    size_t errlen)
{
	struct rockd_peer *p;
	long long node;

	if (n != 3 || rock_parse_ll(tok[1], 1, ROCKD_MAX_NODE, &node) != 0) {
		snprintf(err, errlen, "expected: peer N HOST:PORT (N 1 to %d: "
		    "another node of the fleet, where it listens)", ROCKD_MAX_NODE);
		return -1;
	}
	for (p = cfg->peers; p != NULL; p = p->next)
		if (p->node == node) {
			snprintf(err, errlen, "peer %lld given twice", node);
			return -1;
		}
	if ((p = calloc(1, sizeof(*p))) == NULL) {
		snprintf(err, errlen, "%s", strerror(errno));
		return -1;
	}
	if (rockd_parse_addr(tok[2], 0, &p->addr, &p->len, err, errlen) != 0) {
		free(p);
		return -1;
	}
	p->node = (int)node;
	p->next = cfg->peers;
	cfg->peers = p;
	return 0;
}

static int
parse_line(struct rockd_config *cfg, char *line, char *err, size_t errlen)
{
	char *tok[MAX_TOKENS], *save = NULL, *t, *hash;
	int n = 0;

	if ((hash = strchr(line, '#')) != NULL)
		*hash = '\0';
	for (t = strtok_r(line, " \t\r\n", &save); t != NULL;
	    t = strtok_r(NULL, " \t\r\n", &save)) {
		if (n == MAX_TOKENS) {
			snprintf(err, errlen, "too many words");
			return -1;
		}
		tok[n++] = t;
	}
	if (n == 0)
		return 0;
	if (strcmp(tok[0], "listen") == 0)
		return parse_service(cfg, tok, n, err, errlen);
	if (strcmp(tok[0], "suspend-timeout") == 0) {
		long long v;

		if (n != 2 || rock_parse_ll(tok[1], 0, 3650LL * 24 * 3600, &v) != 0) {
			snprintf(err, errlen, "expected: suspend-timeout SECONDS "
			    "(0 to 315360000; 0: never)");
			return -1;
		}
		cfg->suspend_timeout_s = (long)v;
		return 0;
	}
	if (strcmp(tok[0], "max-rocks") == 0) {
		long long v;

		if (n != 2 || rock_parse_ll(tok[1], 1, 10000000, &v) != 0) {
			snprintf(err, errlen, "expected: max-rocks N (1 to 10000000)");
			return -1;
		}
		cfg->max_rocks = (long)v;
		return 0;
	}
	if (strcmp(tok[0], "workers") == 0) {
		if (n != 2 || rockd_parse_workers(tok[1], &cfg->workers) != 0) {
			snprintf(err, errlen, "expected: workers N (1 to %d) "
			    "or workers auto", ROCKD_MAX_WORKERS);
			return -1;
		}
		return 0;
	}
	if (strcmp(tok[0], "node") == 0) {
		long long v;

		if (n != 2 || rock_parse_ll(tok[1], 1, ROCKD_MAX_NODE, &v) != 0) {
			snprintf(err, errlen, "expected: node N (1 to %d), "
			    "this rockd's number in its fleet", ROCKD_MAX_NODE);
			return -1;
		}
		cfg->node = (long)v;
		return 0;
	}
	if (strcmp(tok[0], "udp-address") == 0)
		return parse_udp_address(cfg, tok, n, err, errlen);
	if (strcmp(tok[0], "peer") == 0)
		return parse_peer(cfg, tok, n, err, errlen);
	if (strcmp(tok[0], "spread") == 0) {
		if (n != 2 || rockd_parse_spread(tok[1], &cfg->spread) != 0) {
			snprintf(err, errlen, "expected: spread address or "
			    "spread connection");
			return -1;
		}
		return 0;
	}
	if (strcmp(tok[0], "drain-timeout") == 0) {
		long long v;

		if (n != 2 || rock_parse_ll(tok[1], 0, ROCKD_MAX_DRAIN_S, &v) != 0) {
			snprintf(err, errlen, "expected: drain-timeout SECONDS "
			    "(0 to %d)", ROCKD_MAX_DRAIN_S);
			return -1;
		}
		cfg->drain_timeout_s = (long)v;
		return 0;
	}
	if (strcmp(tok[0], "metrics") == 0) {
		if (n != 2) {
			snprintf(err, errlen, "expected: metrics ADDR:PORT");
			return -1;
		}
		if (cfg->metrics_spec[0] != '\0') {
			snprintf(err, errlen, "metrics given twice (first on "
			    "line %d)", cfg->metrics_line);
			return -1;
		}
		return rockd_config_metrics(cfg, tok[1], err, errlen);
	}
	if (strcmp(tok[0], "key") == 0)
		return parse_path(tok, n, cfg->key, sizeof(cfg->key), err, errlen);
	if (strcmp(tok[0], "control") == 0)
		return parse_path(tok, n, cfg->control, sizeof(cfg->control),
		    err, errlen);
	if (strcmp(tok[0], "pidfile") == 0)
		return parse_path(tok, n, cfg->pidfile, sizeof(cfg->pidfile), err,
		    errlen);
	snprintf(err, errlen, "unknown keyword \"%s\"", tok[0]);
	return -1;
}

int
rockd_config_read(struct rockd_config *cfg, FILE *f, const char *path,
    char *err, size_t errlen)
{
	char line[1024], why[512];
	int lineno = 0, r = 0;

	cfg->suspend_timeout_s = -1;
	cfg->max_rocks = -1;
	cfg->drain_timeout_s = -1;
	cfg->workers = -1;
	cfg->udp_told = ROCK_UDP_OWN;
	while (r == 0 && fgets(line, sizeof(line), f) != NULL) {
		lineno++;
		if (strchr(line, '\n') == NULL && !feof(f)) {
			snprintf(why, sizeof(why), "line too long");
			r = -1;
		} else {
			r = parse_line(cfg, line, why, sizeof(why));
		}
		if (r == 0 && cfg->metrics_spec[0] != '\0' && cfg->metrics_line == 0)
			cfg->metrics_line = lineno;
		if (r == 0 && cfg->control[0] != '\0' && cfg->control_line == 0)
			cfg->control_line = lineno;
		if (r == 0 && cfg->workers != -1 && cfg->workers_line == 0)
			cfg->workers_line = lineno;
	}
	/* A read error (a directory, an I/O error mid-file) must not pass
	 * for the end of the file: half a config would load. */
	if (r == 0 && ferror(f)) {
		if (lineno == 0)
			snprintf(err, errlen, "%s: cannot read: %s", path,
			    strerror(errno));
		else
			snprintf(err, errlen, "%s: cannot read past line %d: %s",
			    path, lineno, strerror(errno));
		return -1;
	}
	if (r == 0 && cfg->services == NULL) {
		snprintf(err, errlen, "%s: no service (a \"listen ... backend ...\" "
		    "line) configured", path);
		return -1;
	}
	if (r == 0 && rockd_config_metrics_check(cfg, why, sizeof(why)) != 0) {
		lineno = cfg->metrics_line;
		r = -1;
	}
	if (r != 0)
		snprintf(err, errlen, "%s:%d: %s", path, lineno, why);
	return r;
}

int
rockd_config_load(struct rockd_config *cfg, const char *path, char *err,
    size_t errlen)
{
	FILE *f = fopen(path, "re");
	int r;

	if (f == NULL) {
		cfg->suspend_timeout_s = -1;
		cfg->max_rocks = -1;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	r = rockd_config_read(cfg, f, path, err, errlen);
	fclose(f);
	return r;
}
