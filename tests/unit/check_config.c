/* check_config.c: unit tests of settings parsing, every bad input included. */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <syslog.h>

#include "rock_config.h"
#include "rock_engine.h"
#include "rock_env.h"
#include "rock_log.h"
#include "suites.h"

/* A fake environment: "NAME=VALUE" strings, NULL-terminated. */
struct fake_env {
	const char *vars[16];
};

struct warning {
	char var[64], value[128], problem[64], accepted[128];
};

struct warnings {
	int n;
	struct warning w[16];
};

static const char *
fake_get(void *arg, const char *name)
{
	const struct fake_env *env = arg;
	size_t len = strlen(name);
	int i;

	for (i = 0; env->vars[i] != NULL; i++)
		if (strncmp(env->vars[i], name, len) == 0 &&
		    env->vars[i][len] == '=')
			return env->vars[i] + len + 1;
	return NULL;
}

static void
record_warning(void *arg, const char *var, const char *value,
    const char *problem, const char *accepted)
{
	struct warnings *ws = arg;
	struct warning *w;

	ck_assert_int_lt(ws->n, 16);
	w = &ws->w[ws->n++];
	snprintf(w->var, sizeof(w->var), "%s", var);
	snprintf(w->value, sizeof(w->value), "%s", value);
	snprintf(w->problem, sizeof(w->problem), "%s", problem);
	snprintf(w->accepted, sizeof(w->accepted), "%s", accepted);
}

static struct warnings warned;

static void
parse(struct rock_config *cfg, struct rock_env_parser *p, struct fake_env *env)
{
	p->get = fake_get;
	p->get_arg = env;
	p->warn = record_warning;
	p->warn_arg = &warned;
	rock_config_from_env(cfg, p);
}

/* Parse one environment with a fresh parser. */
static void
parse_env(struct rock_config *cfg, struct fake_env *env)
{
	struct rock_env_parser p;

	memset(&p, 0, sizeof(p));
	memset(&warned, 0, sizeof(warned));
	parse(cfg, &p, env);
}

START_TEST(test_defaults)
{
	struct fake_env env = { { NULL } };
	struct rock_config cfg;

	parse_env(&cfg, &env);
	ck_assert_int_eq(warned.n, 0);
	ck_assert_int_eq(cfg.mode, ROCK_MODE_ROCK);
	ck_assert_int_eq(cfg.use_keepalive, 1);
	ck_assert_int_eq(cfg.keepalive_time, 0);
	ck_assert_int_eq(cfg.keepalive_intvl, 0);
	ck_assert_int_eq(cfg.keepalive_probes, 0);
	ck_assert_int_eq(cfg.user_timeout_ms, -1);
	ck_assert_int_eq(cfg.debug, 0);
	ck_assert_int_eq(cfg.eval_env_once, 1);
	ck_assert_int_eq(cfg.log_sink, ROCK_LOG_SYSLOG);
	ck_assert_int_eq(cfg.serve, 1);
	ck_assert_int_eq(cfg.serve_handshakes, 64);
	ck_assert_int_eq(cfg.early, 1);
}
END_TEST

START_TEST(test_good_values)
{
	struct fake_env env = { { "ROCK_MODE=keepalive", "ROCK_KEEPALIVE_TIME=4",
	    "ROCK_KEEPALIVE_INTVL=5", "ROCK_KEEPALIVE_PROBES=127",
	    "ROCK_USER_TIMEOUT_MS=0", "ROCK_DEBUG=1", "ROCK_LOG=/tmp/x.log",
	    "DD_USE_KEEPALIVE=0", "DD_EVAL_ENVIRONMENT_ONCE=0", "ROCK_SERVE=0",
	    "ROCK_SERVE_HANDSHAKES=4096", "ROCK_EARLY=0", NULL } };
	struct rock_config cfg;

	parse_env(&cfg, &env);
	ck_assert_int_eq(warned.n, 0);
	ck_assert_int_eq(cfg.mode, ROCK_MODE_KEEPALIVE);
	ck_assert_int_eq(cfg.keepalive_time, 4);
	ck_assert_int_eq(cfg.keepalive_intvl, 5);
	ck_assert_int_eq(cfg.keepalive_probes, 127);
	ck_assert_int_eq(cfg.user_timeout_ms, 0);
	ck_assert_int_eq(cfg.debug, 1);
	ck_assert_int_eq(cfg.log_sink, ROCK_LOG_FILE);
	ck_assert_str_eq(cfg.log_path, "/tmp/x.log");
	ck_assert_int_eq(cfg.use_keepalive, 0);
	ck_assert_int_eq(cfg.eval_env_once, 0);
	ck_assert_int_eq(cfg.serve, 0);
	ck_assert_int_eq(cfg.serve_handshakes, 4096);
	ck_assert_int_eq(cfg.early, 0);
}
END_TEST

START_TEST(test_dd_names)
{
	struct fake_env env = { { "DD_TCP_KEEPALIVE_TIME=4",
	    "DD_TCP_KEEPALIVE_INTVL=5", "DD_TCP_KEEPALIVE_PROBES=6",
	    "DD_DEBUG=1", NULL } };
	struct rock_config cfg;

	parse_env(&cfg, &env);
	ck_assert_int_eq(warned.n, 0);
	ck_assert_int_eq(cfg.keepalive_time, 4);
	ck_assert_int_eq(cfg.keepalive_intvl, 5);
	ck_assert_int_eq(cfg.keepalive_probes, 6);
	ck_assert_int_eq(cfg.debug, 1);
}
END_TEST

START_TEST(test_rock_wins_over_dd)
{
	struct fake_env env = { { "DD_TCP_KEEPALIVE_TIME=4",
	    "ROCK_KEEPALIVE_TIME=40", "ROCK_KEEPALIVE_INTVL=9",
	    "DD_TCP_KEEPALIVE_INTVL=5", "DD_DEBUG=1", "ROCK_DEBUG=0", NULL } };
	struct rock_config cfg;

	parse_env(&cfg, &env);
	ck_assert_int_eq(warned.n, 0);
	ck_assert_int_eq(cfg.keepalive_time, 40);
	ck_assert_int_eq(cfg.keepalive_intvl, 9);
	ck_assert_int_eq(cfg.debug, 0);
}
END_TEST

/* A bad ROCK_* value is ignored: its valid DD_* twin then applies. */
START_TEST(test_bad_rock_falls_back_to_dd)
{
	struct fake_env env = { { "DD_TCP_KEEPALIVE_PROBES=6",
	    "ROCK_KEEPALIVE_PROBES=128", NULL } };
	struct rock_config cfg;

	parse_env(&cfg, &env);
	ck_assert_int_eq(cfg.keepalive_probes, 6);
	ck_assert_int_eq(warned.n, 1);
	ck_assert_str_eq(warned.w[0].var, "ROCK_KEEPALIVE_PROBES");
	ck_assert_str_eq(warned.w[0].value, "128");
	ck_assert_str_eq(warned.w[0].problem, "too large");
	ck_assert_str_eq(warned.w[0].accepted, "a count, 1 to 127");
}
END_TEST

#define PORT_MAP_ACCEPTED "empty, or up to 8 PORT=PORT pairs separated by commas, ports 1 to 65535"

struct bad_case {
	const char *assignment;
	const char *problem;
	const char *accepted;
};

static const struct bad_case bad_cases[] = {
	{ "ROCK_KEEPALIVE_TIME=abc", "not a decimal integer", "seconds, 1 to 32767" },
	{ "ROCK_KEEPALIVE_TIME=-1", "too small", "seconds, 1 to 32767" },
	{ "ROCK_KEEPALIVE_TIME=0", "too small", "seconds, 1 to 32767" },
	{ "ROCK_KEEPALIVE_TIME=32768", "too large", "seconds, 1 to 32767" },
	{ "ROCK_KEEPALIVE_TIME=99999999999999999999", "too large", "seconds, 1 to 32767" },
	{ "ROCK_KEEPALIVE_TIME=", "empty", "seconds, 1 to 32767" },
	{ "ROCK_KEEPALIVE_TIME= 5", "not a decimal integer", "seconds, 1 to 32767" },
	{ "ROCK_KEEPALIVE_TIME=5s", "not a decimal integer", "seconds, 1 to 32767" },
	{ "ROCK_KEEPALIVE_INTVL=0", "too small", "seconds, 1 to 32767" },
	{ "ROCK_KEEPALIVE_INTVL=1.5", "not a decimal integer", "seconds, 1 to 32767" },
	{ "ROCK_KEEPALIVE_PROBES=0", "too small", "a count, 1 to 127" },
	{ "ROCK_KEEPALIVE_PROBES=128", "too large", "a count, 1 to 127" },
	{ "ROCK_KEEPALIVE_PROBES=-3", "too small", "a count, 1 to 127" },
	{ "ROCK_USER_TIMEOUT_MS=-1", "too small",
	    "milliseconds, 0 (kernel default) to 2147483647" },
	{ "ROCK_USER_TIMEOUT_MS=2147483648", "too large",
	    "milliseconds, 0 (kernel default) to 2147483647" },
	{ "DD_TCP_KEEPALIVE_TIME=x", "not a decimal integer", "seconds, 1 to 32767" },
	{ "DD_TCP_KEEPALIVE_INTVL=-2", "too small", "seconds, 1 to 32767" },
	{ "DD_TCP_KEEPALIVE_PROBES=200", "too large", "a count, 1 to 127" },
	{ "DD_USE_KEEPALIVE=2", "too large", "0 or 1" },
	{ "DD_USE_KEEPALIVE=yes", "not a decimal integer", "0 or 1" },
	{ "DD_EVAL_ENVIRONMENT_ONCE=-1", "too small", "0 or 1" },
	{ "DD_DEBUG=on", "not a decimal integer", "0 or 1" },
	{ "ROCK_DEBUG=2", "too large", "0 or 1" },
	{ "ROCK_MODE=fast", "not an accepted word", "rock, keepalive or off" },
	{ "ROCK_MODE=", "empty", "rock, keepalive or off" },
	{ "ROCK_MODE=Keepalive", "not an accepted word", "rock, keepalive or off" },
	{ "ROCK_LOG=", "empty", "syslog, stderr or an absolute file path" },
	{ "ROCK_LOG=rock.log", "not an accepted word",
	    "syslog, stderr or an absolute file path" },
	{ "ROCK_PORT_MAP=22", "not an accepted word", PORT_MAP_ACCEPTED },
	{ "ROCK_PORT_MAP=22=0", "too small", PORT_MAP_ACCEPTED },
	{ "ROCK_PORT_MAP=22=65536", "too large", PORT_MAP_ACCEPTED },
	{ "ROCK_PORT_MAP=ssh=4022", "not a decimal integer", PORT_MAP_ACCEPTED },
	{ "ROCK_PORT_MAP=22=4022,", "empty", PORT_MAP_ACCEPTED },
	{ "ROCK_PORT_MAP==4022", "empty", PORT_MAP_ACCEPTED },
	{ "ROCK_PORT_MAP=22=4022,,80=4080", "not an accepted word", PORT_MAP_ACCEPTED },
	{ "ROCK_PORT_MAP=1=2,3=4,5=6,7=8,9=10,11=12,13=14,15=16,17=18",
	    "too large", PORT_MAP_ACCEPTED },
	{ "ROCK_PROBE_TIMEOUT_MS=9", "too small", "milliseconds, 10 to 60000" },
	{ "ROCK_LINGER_MS=-1", "too small", "milliseconds, 0 to 3600000" },
	{ "ROCK_SUSPEND_TIMEOUT=3d", "not a decimal integer",
	    "seconds, 0 (never) to 2147483647" },
	{ "ROCK_SERVE=yes", "not a decimal integer", "0 or 1" },
	{ "ROCK_SERVE=2", "too large", "0 or 1" },
	{ "ROCK_SERVE_HANDSHAKES=0", "too small", "a count, 1 to 4096" },
	{ "ROCK_SERVE_HANDSHAKES=4097", "too large", "a count, 1 to 4096" },
	{ "ROCK_EARLY=-1", "too small", "0 or 1" },
};

/* Every bad value: one report naming variable, value, problem and range;
 * the setting keeps its default. */
START_TEST(test_bad_values)
{
	const struct bad_case *c = &bad_cases[_i];
	struct fake_env env = { { c->assignment, NULL } };
	struct rock_config cfg, def;
	const char *eq = strchr(c->assignment, '=');

	parse_env(&cfg, &env);
	rock_config_defaults(&def);
	ck_assert_int_eq(warned.n, 1);
	ck_assert_int_eq(strncmp(warned.w[0].var, c->assignment,
	    (size_t)(eq - c->assignment)), 0);
	ck_assert_str_eq(warned.w[0].value, eq + 1);
	ck_assert_str_eq(warned.w[0].problem, c->problem);
	ck_assert_str_eq(warned.w[0].accepted, c->accepted);
	ck_assert_int_eq(memcmp(&cfg, &def, sizeof(cfg)), 0);
}
END_TEST

/* The default map sends ssh to rockd's default port; a map replaces it
 * whole, and an empty one turns it off. */
START_TEST(test_port_map)
{
	struct fake_env set = { { "ROCK_PORT_MAP=22=4022,8080=18080", NULL } };
	struct fake_env off = { { "ROCK_PORT_MAP=", NULL } };
	struct rock_config cfg;

	rock_config_defaults(&cfg);
	ck_assert_int_eq(rock_port_mapped(&cfg, 22), 4022);
	ck_assert_int_eq(rock_port_mapped(&cfg, 80), 80);
	parse_env(&cfg, &set);
	ck_assert_int_eq(warned.n, 0);
	ck_assert_int_eq(cfg.nport_map, 2);
	ck_assert_int_eq(rock_port_mapped(&cfg, 8080), 18080);
	ck_assert_int_eq(rock_port_mapped(&cfg, 22), 4022);
	ck_assert_int_eq(rock_port_mapped(&cfg, 4022), 4022);
	parse_env(&cfg, &off);
	ck_assert_int_eq(warned.n, 0);
	ck_assert_int_eq(cfg.nport_map, 0);
	ck_assert_int_eq(rock_port_mapped(&cfg, 22), 22);
}
END_TEST

START_TEST(test_log_path_too_long)
{
	static char assignment[PATH_MAX + 32];
	struct fake_env env = { { assignment, NULL } };
	struct rock_config cfg;
	size_t n = (size_t)snprintf(assignment, sizeof(assignment), "ROCK_LOG=/");

	memset(assignment + n, 'a', PATH_MAX);
	assignment[n + PATH_MAX] = '\0';
	parse_env(&cfg, &env);
	ck_assert_int_eq(warned.n, 1);
	ck_assert_str_eq(warned.w[0].problem, "too large");
	ck_assert_int_eq(cfg.log_sink, ROCK_LOG_SYSLOG);
}
END_TEST

START_TEST(test_log_words)
{
	struct fake_env env = { { "ROCK_LOG=stderr", NULL } };
	struct rock_config cfg;

	parse_env(&cfg, &env);
	ck_assert_int_eq(cfg.log_sink, ROCK_LOG_STDERR);
	env.vars[0] = "ROCK_LOG=syslog";
	parse_env(&cfg, &env);
	ck_assert_int_eq(cfg.log_sink, ROCK_LOG_SYSLOG);
	ck_assert_int_eq(warned.n, 0);
}
END_TEST

START_TEST(test_modes)
{
	struct fake_env env = { { "ROCK_MODE=off", NULL } };
	struct rock_config cfg;

	parse_env(&cfg, &env);
	ck_assert_int_eq(cfg.mode, ROCK_MODE_OFF);
	ck_assert_str_eq(rock_mode_name(cfg.mode), "off");
	env.vars[0] = "ROCK_MODE=rock";
	parse_env(&cfg, &env);
	ck_assert_int_eq(cfg.mode, ROCK_MODE_ROCK);
	ck_assert_str_eq(rock_mode_name(ROCK_MODE_KEEPALIVE), "keepalive");
	ck_assert_int_eq(warned.n, 0);
}
END_TEST

/* Re-reading the environment for every socket reports a bad value once;
 * a different bad value is news and is reported. */
START_TEST(test_report_once)
{
	struct fake_env env = { { "ROCK_KEEPALIVE_TIME=abc", NULL } };
	struct rock_env_parser p;
	struct rock_config cfg;

	memset(&p, 0, sizeof(p));
	memset(&warned, 0, sizeof(warned));
	parse(&cfg, &p, &env);
	parse(&cfg, &p, &env);
	parse(&cfg, &p, &env);
	ck_assert_int_eq(warned.n, 1);
	env.vars[0] = "ROCK_KEEPALIVE_TIME=0";
	parse(&cfg, &p, &env);
	parse(&cfg, &p, &env);
	ck_assert_int_eq(warned.n, 2);
	ck_assert_str_eq(warned.w[1].value, "0");
}
END_TEST

/* Without a warn callback nothing is remembered as reported. */
START_TEST(test_silent_pass_does_not_consume_report)
{
	struct fake_env env = { { "ROCK_MODE=bogus", NULL } };
	struct rock_env_parser p;
	struct rock_config cfg;

	memset(&p, 0, sizeof(p));
	memset(&warned, 0, sizeof(warned));
	p.get = fake_get;
	p.get_arg = &env;
	rock_config_from_env(&cfg, &p);
	parse(&cfg, &p, &env);
	ck_assert_int_eq(warned.n, 1);
}
END_TEST

/* What rock_log_emit handed syslog last. */
static struct {
	int n, priority;
	char line[256];
} sent;

static void
record_syslog(int priority, const char *line)
{
	sent.n++;
	sent.priority = priority;
	snprintf(sent.line, sizeof(sent.line), "%s", line);
}

/* A syslog log as IDENT, its lines recorded, none on stderr. */
static void
recorded_log(struct rock_log *log, const struct rock_config *cfg,
    const char *ident)
{
	rock_log_configure(log, cfg, ident);
	log->warn_to_stderr = 0;
	log->to_syslog = record_syslog;
}

/* The last line sent: PRIORITY, and IDENT[...]: LEVEL: ...: TEXT. */
static void
expect_sent(int n, int priority, const char *ident, const char *level,
    const char *text)
{
	char want[128];

	ck_assert_int_eq(sent.n, n);
	ck_assert_int_eq(sent.priority, priority);
	ck_assert_msg(strncmp(sent.line, ident, strlen(ident)) == 0 &&
	    sent.line[strlen(ident)] == '[', "%s", sent.line);
	snprintf(want, sizeof(want), "]: %s: ", level);
	ck_assert_ptr_nonnull(strstr(sent.line, want));
	snprintf(want, sizeof(want), ": %s\n", text);
	ck_assert_ptr_nonnull(strstr(sent.line, want));
}

/* syslog is told the facility the log object carries, never LOG_USER
 * for rockd, whose openlog(LOG_DAEMON) a facility in the priority
 * would override. */
START_TEST(test_log_facility)
{
	struct rock_config cfg;
	struct rock_log log;

	rock_config_defaults(&cfg);
	ck_assert_int_eq(cfg.log_sink, ROCK_LOG_SYSLOG);
	memset(&sent, 0, sizeof(sent));
	recorded_log(&log, &cfg, "librock");
	rlog_info(&log, "a program's line");
	expect_sent(1, LOG_USER | LOG_INFO, "librock", "info", "a program's line");

	recorded_log(&log, &cfg, "rockd");
	log.facility = LOG_DAEMON;
	rlog_warn(&log, "rockd's line %d", 2);
	rlog_debug(&log, "not emitted: debug is off");
	expect_sent(2, LOG_DAEMON | LOG_WARNING, "rockd", "warning",
	    "rockd's line 2");
}
END_TEST

/* ROCK_PROBE_TIMEOUT_MS plus lost SYNs on TCP's schedule (resent after 1,
 * 3 and 7 s): two lost to a mapped port (the SYN at 3 s answered within
 * the timeout), three to the program's own. */
START_TEST(test_probe_budget)
{
	ck_assert_int_eq(rock_probe_budget_ms(1000, 1), 1000 + 3000);
	ck_assert_int_eq(rock_probe_budget_ms(1000, 0), 1000 + 7000);
	ck_assert_int_eq(rock_probe_budget_ms(10, 1), 10 + 3000);
}
END_TEST

Suite *
config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("env");

	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_good_values);
	tcase_add_test(tc, test_dd_names);
	tcase_add_test(tc, test_rock_wins_over_dd);
	tcase_add_test(tc, test_bad_rock_falls_back_to_dd);
	tcase_add_loop_test(tc, test_bad_values, 0,
	    (int)(sizeof(bad_cases) / sizeof(bad_cases[0])));
	tcase_add_test(tc, test_log_path_too_long);
	tcase_add_test(tc, test_log_words);
	tcase_add_test(tc, test_port_map);
	tcase_add_test(tc, test_probe_budget);
	tcase_add_test(tc, test_modes);
	tcase_add_test(tc, test_report_once);
	tcase_add_test(tc, test_silent_pass_does_not_consume_report);
	suite_add_tcase(s, tc);
	tc = tcase_create("log");
	tcase_add_test(tc, test_log_facility);
	suite_add_tcase(s, tc);
	return s;
}
