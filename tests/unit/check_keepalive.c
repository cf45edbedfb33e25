/* check_keepalive.c: unit tests of applying keepalive options to a socket. */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rock_engine.h"
#include "rock_err.h"
#include "rock_keepalive.h"
#include "suites.h"

struct call {
	int level, optname, value;
};

static struct call calls[8];
static int ncalls;
static int fail_optname = -1;

static int
fake_set(int fd, int level, int optname, const void *val, unsigned len)
{
	(void)fd;
	ck_assert_uint_eq(len, sizeof(int));
	ck_assert_int_lt(ncalls, 8);
	calls[ncalls].level = level;
	calls[ncalls].optname = optname;
	memcpy(&calls[ncalls].value, val, sizeof(int));
	ncalls++;
	if (optname == fail_optname) {
		errno = ENOPROTOOPT;
		return -1;
	}
	return 0;
}

static struct rock_log quiet_log;

static void
setup(void)
{
	ncalls = 0;
	fail_optname = -1;
	memset(&quiet_log, 0, sizeof(quiet_log));
	quiet_log.ident = "test";
	quiet_log.sink = ROCK_LOG_STDERR;
}

static void
full_config(struct rock_config *cfg)
{
	rock_config_defaults(cfg);
	cfg->keepalive_time = 4;
	cfg->keepalive_intvl = 5;
	cfg->keepalive_probes = 6;
	cfg->user_timeout_ms = 7000;
}

START_TEST(test_all_options)
{
	struct rock_config cfg;

	full_config(&cfg);
	ck_assert_int_eq(rock_ka_apply(3, &cfg, 0, fake_set, &quiet_log), 0);
	ck_assert_int_eq(ncalls, 5);
	ck_assert_int_eq(calls[0].level, SOL_SOCKET);
	ck_assert_int_eq(calls[0].optname, SO_KEEPALIVE);
	ck_assert_int_eq(calls[0].value, 1);
	ck_assert_int_eq(calls[1].optname, TCP_KEEPIDLE);
	ck_assert_int_eq(calls[1].value, 4);
	ck_assert_int_eq(calls[2].optname, TCP_KEEPINTVL);
	ck_assert_int_eq(calls[2].value, 5);
	ck_assert_int_eq(calls[3].optname, TCP_KEEPCNT);
	ck_assert_int_eq(calls[3].value, 6);
	ck_assert_int_eq(calls[4].level, IPPROTO_TCP);
	ck_assert_int_eq(calls[4].optname, TCP_USER_TIMEOUT);
	ck_assert_int_eq(calls[4].value, 7000);
}
END_TEST

/* Nothing configured: only SO_KEEPALIVE, the system keeps its timings. */
START_TEST(test_defaults_only_keepalive)
{
	struct rock_config cfg;

	rock_config_defaults(&cfg);
	ck_assert_int_eq(rock_ka_apply(3, &cfg, 0, fake_set, &quiet_log), 0);
	ck_assert_int_eq(ncalls, 1);
	ck_assert_int_eq(calls[0].optname, SO_KEEPALIVE);
}
END_TEST

START_TEST(test_use_keepalive_off)
{
	struct rock_config cfg;

	rock_config_defaults(&cfg);
	cfg.use_keepalive = 0;
	ck_assert_int_eq(rock_ka_apply(3, &cfg, 0, fake_set, &quiet_log), 0);
	ck_assert_int_eq(ncalls, 0);
}
END_TEST

START_TEST(test_skip_program_set)
{
	struct rock_config cfg;

	full_config(&cfg);
	ck_assert_int_eq(rock_ka_apply(3, &cfg, ROCK_KA_IDLE | ROCK_KA_KEEPALIVE,
	    fake_set, &quiet_log), 0);
	ck_assert_int_eq(ncalls, 3);
	ck_assert_int_eq(calls[0].optname, TCP_KEEPINTVL);
	ck_assert_int_eq(calls[1].optname, TCP_KEEPCNT);
	ck_assert_int_eq(calls[2].optname, TCP_USER_TIMEOUT);
}
END_TEST

/* A failing option is reported but the others are still set. */
START_TEST(test_failure_continues)
{
	struct rock_config cfg;

	full_config(&cfg);
	fail_optname = TCP_KEEPIDLE;
	ck_assert_int_eq(rock_ka_apply(3, &cfg, 0, fake_set, &quiet_log),
	    ROCK_ERR_SYSTEM);
	ck_assert_int_eq(ncalls, 5);
}
END_TEST

START_TEST(test_opt_of)
{
	ck_assert_uint_eq(rock_ka_opt_of(SOL_SOCKET, SO_KEEPALIVE), ROCK_KA_KEEPALIVE);
	ck_assert_uint_eq(rock_ka_opt_of(IPPROTO_TCP, TCP_KEEPIDLE), ROCK_KA_IDLE);
	ck_assert_uint_eq(rock_ka_opt_of(IPPROTO_TCP, TCP_KEEPINTVL), ROCK_KA_INTVL);
	ck_assert_uint_eq(rock_ka_opt_of(IPPROTO_TCP, TCP_KEEPCNT), ROCK_KA_CNT);
	ck_assert_uint_eq(rock_ka_opt_of(IPPROTO_TCP, TCP_USER_TIMEOUT),
	    ROCK_KA_USER_TIMEOUT);
	ck_assert_uint_eq(rock_ka_opt_of(IPPROTO_TCP, TCP_NODELAY), 0);
	ck_assert_uint_eq(rock_ka_opt_of(SOL_SOCKET, SO_RCVBUF), 0);
	/* same number, other level */
	ck_assert_uint_eq(rock_ka_opt_of(IPPROTO_IP, TCP_KEEPIDLE), 0);
}
END_TEST

static int
real_set(int fd, int level, int optname, const void *val, unsigned len)
{
	return setsockopt(fd, level, optname, val, len);
}

static int
get_int(int fd, int level, int optname)
{
	int v = -1;
	socklen_t len = sizeof(v);

	ck_assert_int_eq(getsockopt(fd, level, optname, &v, &len), 0);
	return v;
}

/* The kernel holds exactly the values asked for. */
START_TEST(test_real_socket)
{
	struct rock_config cfg;
	int fd = socket(AF_INET6, SOCK_STREAM, 0);

	ck_assert_int_ge(fd, 0);
	full_config(&cfg);
	ck_assert_int_eq(rock_ka_apply(fd, &cfg, 0, real_set, &quiet_log), 0);
	ck_assert_int_eq(get_int(fd, SOL_SOCKET, SO_KEEPALIVE), 1);
	ck_assert_int_eq(get_int(fd, IPPROTO_TCP, TCP_KEEPIDLE), 4);
	ck_assert_int_eq(get_int(fd, IPPROTO_TCP, TCP_KEEPINTVL), 5);
	ck_assert_int_eq(get_int(fd, IPPROTO_TCP, TCP_KEEPCNT), 6);
	ck_assert_int_eq(get_int(fd, IPPROTO_TCP, TCP_USER_TIMEOUT), 7000);
	close(fd);
}
END_TEST

/* A rock's data connection: the program's keepalive, or the backstop
 * (1, 1, 20: gives up after 21 s) while armed if that gives up sooner. */
START_TEST(test_merge_with_backstop)
{
	static const struct rock_owner_ka off = { 0, 7200, 75, 9 },
	    lax = { 1, 600, 30, 4 }, strict = { 1, 2, 3, 4 },
	    tie = { 1, 1, 1, 20 }, backstop = { 1, 1, 1, 20 };
	struct rock_owner_ka out;

	rock_keepalive_merge(&off, 0, &out);
	ck_assert_int_eq(out.on, 0);
	rock_keepalive_merge(&off, 1, &out);
	ck_assert_mem_eq(&out, &backstop, sizeof(out));
	rock_keepalive_merge(&lax, 0, &out);
	ck_assert_mem_eq(&out, &lax, sizeof(out));
	rock_keepalive_merge(&lax, 1, &out);	/* 720 s: the backstop's 21 */
	ck_assert_mem_eq(&out, &backstop, sizeof(out));
	rock_keepalive_merge(&strict, 1, &out);	/* 14 s: the program's */
	ck_assert_mem_eq(&out, &strict, sizeof(out));
	rock_keepalive_merge(&strict, 0, &out);
	ck_assert_mem_eq(&out, &strict, sizeof(out));
	rock_keepalive_merge(&tie, 1, &out);
	ck_assert_mem_eq(&out, &backstop, sizeof(out));
}
END_TEST

Suite *
keepalive_suite(void)
{
	Suite *s = suite_create("keepalive");
	TCase *tc = tcase_create("apply");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, test_all_options);
	tcase_add_test(tc, test_defaults_only_keepalive);
	tcase_add_test(tc, test_use_keepalive_off);
	tcase_add_test(tc, test_skip_program_set);
	tcase_add_test(tc, test_failure_continues);
	tcase_add_test(tc, test_opt_of);
	tcase_add_test(tc, test_real_socket);
	tcase_add_test(tc, test_merge_with_backstop);
	suite_add_tcase(s, tc);
	return s;
}
