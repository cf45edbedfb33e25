/* netem_parse.c: tc-netem(8)'s option syntax, read into struct netem_params with tc's units and defaults. */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "netem.h"

#define NETEM_MAX_WORDS 32

void
netem_params_default(struct netem_params *p)
{
	memset(p, 0, sizeof(*p));
	p->limit = 1000;
}

static int
fail(struct netem_parse_error *err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err->text, sizeof(err->text), fmt, ap);
	va_end(ap);
	return -1;
}

/* tc's get_time: a bare number is microseconds. */
static int
parse_time(const char *s, int64_t *ns)
{
	static const struct { const char *unit; double mult; } units[] = {
		{ "s", 1e9 }, { "sec", 1e9 }, { "secs", 1e9 },
		{ "ms", 1e6 }, { "msec", 1e6 }, { "msecs", 1e6 },
		{ "us", 1e3 }, { "usec", 1e3 }, { "usecs", 1e3 }, { "", 1e3 },
		{ "ns", 1 }, { "nsec", 1 }, { "nsecs", 1 },
	};
	char *end;
	double v = strtod(s, &end);
	size_t i;

	if (end == s || !isfinite(v) || v < 0)
		return -1;
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcasecmp(end, units[i].unit) == 0) {
			if (v * units[i].mult > 3600e9)
				return -1;
			*ns = (int64_t)llround(v * units[i].mult);
			return 0;
		}
	}
	return -1;
}

/* tc's get_percent: "10" and "10%" are both ten percent. */
static int
parse_percent(const char *s, uint32_t *frac)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || (*end != '\0' && strcmp(end, "%") != 0) ||
	    !isfinite(v) || v < 0 || v > 100)
		return -1;
	*frac = (uint32_t)llround(v / 100.0 * UINT32_MAX);
	return 0;
}

/* tc's get_rate64: a bare number is bits per second; the result is in
 * bytes per second, as netem keeps it. */
static int
parse_rate(const char *s, uint64_t *bytes_per_s)
{
	static const struct { const char *unit; double bits; } units[] = {
		{ "", 1 }, { "bit", 1 }, { "kbit", 1e3 }, { "mbit", 1e6 },
		{ "gbit", 1e9 }, { "tbit", 1e12 }, { "kibit", 1024.0 },
		{ "mibit", 1048576.0 }, { "gibit", 1073741824.0 },
		{ "bps", 8 }, { "kbps", 8e3 }, { "mbps", 8e6 }, { "gbps", 8e9 },
		{ "tbps", 8e12 }, { "kibps", 8 * 1024.0 }, { "mibps", 8 * 1048576.0 },
		{ "gibps", 8 * 1073741824.0 },
	};
	char *end;
	double v = strtod(s, &end);
	size_t i;

	if (end == s || !isfinite(v) || v <= 0)
		return -1;
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcasecmp(end, units[i].unit) == 0) {
			double b = v * units[i].bits / 8;

			if (b < 1 || b > 1e13)
				return -1;
			*bytes_per_s = (uint64_t)llround(b);
			return 0;
		}
	}
	return -1;
}

static int
is_number(int i, int argc, char **argv)
{
	return i < argc && isdigit((unsigned char)argv[i][0]);
}

/* PERCENT [CORRELATION] at argv[*i]; *i left on the last word used. */
static int
percent_and_corr(int *i, int argc, char **argv, uint32_t *val,
    struct netem_corr *cor, const char *what, struct netem_parse_error *err)
{
	if (*i + 1 >= argc || parse_percent(argv[*i + 1], val) != 0)
		return fail(err, "%s wants PERCENT (0..100, '%%' optional), got '%s'",
		    what, *i + 1 < argc ? argv[*i + 1] : "");
	(*i)++;
	if (is_number(*i + 1, argc, argv)) {
		if (parse_percent(argv[*i + 1], &cor->rho) != 0)
			return fail(err, "%s: bad correlation '%s'", what, argv[*i + 1]);
		(*i)++;
	}
	return 0;
}

static int
parse_delay(int *i, int argc, char **argv, struct netem_params *p,
    struct netem_parse_error *err)
{
	if (*i + 1 >= argc || parse_time(argv[*i + 1], &p->delay_ns) != 0)
		return fail(err, "delay wants TIME (e.g. 100ms), got '%s'",
		    *i + 1 < argc ? argv[*i + 1] : "");
	(*i)++;
	if (!is_number(*i + 1, argc, argv))
		return 0;
	if (parse_time(argv[*i + 1], &p->jitter_ns) != 0)
		return fail(err, "delay: bad jitter '%s'", argv[*i + 1]);
	(*i)++;
	if (is_number(*i + 1, argc, argv)) {
		if (parse_percent(argv[*i + 1], &p->delay_cor.rho) != 0)
			return fail(err, "delay: bad correlation '%s'", argv[*i + 1]);
		(*i)++;
	}
	return 0;
}

static int
parse_word(int *i, int argc, char **argv, struct netem_params *p,
    struct netem_parse_error *err)
{
	const char *w = argv[*i];
	const char *next = *i + 1 < argc ? argv[*i + 1] : "";
	char *end;
	unsigned long v;

	if (strcmp(w, "limit") == 0) {
		v = strtoul(next, &end, 10);
		if (!isdigit((unsigned char)next[0]) || *end != '\0' || v == 0 ||
		    v > 1000000)
			return fail(err, "limit wants PACKETS (1..1000000), got '%s'", next);
		p->limit = (uint32_t)v;
		(*i)++;
		return 0;
	}
	if (strcmp(w, "delay") == 0 || strcmp(w, "latency") == 0)
		return parse_delay(i, argc, argv, p, err);
	if (strcmp(w, "distribution") == 0 || strcmp(w, "dist") == 0) {
		if (strcmp(next, "normal") == 0)
			p->dist = NETEM_DIST_NORMAL;
		else if (strcmp(next, "uniform") == 0)
			p->dist = NETEM_DIST_UNIFORM;
		else
			return fail(err, "distribution '%s' is not supported "
			    "(normal or uniform)", next);
		(*i)++;
		return 0;
	}
	if (strcmp(w, "loss") == 0 || strcmp(w, "drop") == 0) {
		if (strcmp(next, "random") == 0)
			(*i)++;
		else if (strcmp(next, "state") == 0 || strcmp(next, "gemodel") == 0)
			return fail(err, "loss %s is not supported (loss PERCENT)", next);
		return percent_and_corr(i, argc, argv, &p->loss, &p->loss_cor,
		    "loss", err);
	}
	if (strcmp(w, "duplicate") == 0)
		return percent_and_corr(i, argc, argv, &p->duplicate, &p->dup_cor,
		    "duplicate", err);
	if (strcmp(w, "reorder") == 0)
		return percent_and_corr(i, argc, argv, &p->reorder,
		    &p->reorder_cor, "reorder", err);
	if (strcmp(w, "gap") == 0) {
		v = strtoul(next, &end, 10);
		if (!isdigit((unsigned char)next[0]) || *end != '\0' || v > UINT32_MAX)
			return fail(err, "gap wants DISTANCE, got '%s'", next);
		p->gap = (uint32_t)v;
		(*i)++;
		return 0;
	}
	if (strcmp(w, "rate") == 0) {
		if (parse_rate(next, &p->rate_bps) != 0)
			return fail(err, "rate wants RATE (e.g. 10mbit), got '%s'", next);
		(*i)++;
		if (is_number(*i + 1, argc, argv))
			return fail(err, "rate: packet overhead is not supported");
		return 0;
	}
	return fail(err, "unknown or unsupported option '%s'", w);
}

int
netem_params_parse(struct netem_params *p, int argc, char **argv,
    struct netem_parse_error *err)
{
	int i;

	netem_params_default(p);
	err->text[0] = '\0';
	for (i = 0; i < argc; i++)
		if (parse_word(&i, argc, argv, p, err) != 0)
			return -1;
	/* tc refuses reordering without a delay, and makes the gap 1. */
	if (p->reorder != 0) {
		if (p->delay_ns == 0)
			return fail(err, "reordering not possible without "
			    "specifying some delay");
		if (p->gap == 0)
			p->gap = 1;
	}
	if (p->jitter_ns > 0 && p->dist == NETEM_DIST_UNIFORM &&
	    p->jitter_ns > INT32_MAX)
		return fail(err, "jitter too large");
	return 0;
}

int
netem_params_parse_line(struct netem_params *p, const char *line,
    struct netem_parse_error *err)
{
	char copy[1024], *argv[NETEM_MAX_WORDS], *save = NULL, *w;
	int argc = 0;

	if (strlen(line) >= sizeof(copy))
		return fail(err, "line too long");
	strcpy(copy, line);
	for (w = strtok_r(copy, " \t\r\n", &save); w != NULL;
	    w = strtok_r(NULL, " \t\r\n", &save)) {
		if (argc == NETEM_MAX_WORDS)
			return fail(err, "too many words");
		argv[argc++] = w;
	}
	return netem_params_parse(p, argc, argv, err);
}

static double
pct(uint32_t frac)
{
	return frac / (double)UINT32_MAX * 100.0;
}

void
netem_params_format(const struct netem_params *p, char *buf, size_t len)
{
	int n = snprintf(buf, len, "limit %u", p->limit);

#define MORE(...) do { \
	if (n >= 0 && (size_t)n < len) \
		n += snprintf(buf + n, len - (size_t)n, __VA_ARGS__); \
} while (0)
	if (p->delay_ns > 0 || p->jitter_ns > 0) {
		MORE(" delay %.3fms", p->delay_ns / 1e6);
		if (p->jitter_ns > 0)
			MORE(" %.3fms", p->jitter_ns / 1e6);
		if (p->delay_cor.rho > 0)
			MORE(" %.2f%%", pct(p->delay_cor.rho));
		if (p->dist == NETEM_DIST_NORMAL)
			MORE(" distribution normal");
	}
	if (p->loss > 0)
		MORE(" loss %.3f%%", pct(p->loss));
	if (p->duplicate > 0)
		MORE(" duplicate %.3f%%", pct(p->duplicate));
	if (p->reorder > 0)
		MORE(" reorder %.3f%% gap %u", pct(p->reorder), p->gap);
	if (p->rate_bps > 0)
		MORE(" rate %.0fbit", p->rate_bps * 8.0);
#undef MORE
}
