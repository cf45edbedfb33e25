/* check_parse.c: unit tests of strict number parsing and error texts. */
#include "config.h"

#include <limits.h>

#include "rock_err.h"
#include "rock_parse.h"
#include "suites.h"

struct parse_case {
	const char *in;
	long long min, max;
	int err;
	long long want;
};

static const struct parse_case parse_cases[] = {
	{ "0", 0, 10, 0, 0 },
	{ "10", 0, 10, 0, 10 },
	{ "-5", -10, 10, 0, -5 },
	{ "+7", 0, 10, 0, 7 },
	{ "-0", 0, 10, 0, 0 },
	{ "007", 0, 10, 0, 7 },
	{ "11", 0, 10, ROCK_ERR_TOO_LARGE, 0 },
	{ "0", 1, 10, ROCK_ERR_TOO_SMALL, 0 },
	{ "-1", 0, 10, ROCK_ERR_TOO_SMALL, 0 },
	{ "", 0, 10, ROCK_ERR_EMPTY, 0 },
	{ "-", 0, 10, ROCK_ERR_NOT_NUMBER, 0 },
	{ "+", 0, 10, ROCK_ERR_NOT_NUMBER, 0 },
	{ "abc", 0, 10, ROCK_ERR_NOT_NUMBER, 0 },
	{ "5abc", 0, 10, ROCK_ERR_NOT_NUMBER, 0 },
	{ " 5", 0, 10, ROCK_ERR_NOT_NUMBER, 0 },
	{ "5 ", 0, 10, ROCK_ERR_NOT_NUMBER, 0 },
	{ "0x10", 0, 100, ROCK_ERR_NOT_NUMBER, 0 },
	{ "1e3", 0, 10000, ROCK_ERR_NOT_NUMBER, 0 },
	{ "1.5", 0, 10, ROCK_ERR_NOT_NUMBER, 0 },
	/* Not a number, however large its digits before the garbage. */
	{ "99999999999999999999x", 0, 10, ROCK_ERR_NOT_NUMBER, 0 },
	{ "-99999999999999999999x", -10, 10, ROCK_ERR_NOT_NUMBER, 0 },
	{ "9223372036854775807", 0, LLONG_MAX, 0, LLONG_MAX },
	{ "9223372036854775808", 0, LLONG_MAX, ROCK_ERR_TOO_LARGE, 0 },
	{ "99999999999999999999999", 0, LLONG_MAX, ROCK_ERR_TOO_LARGE, 0 },
	{ "-9223372036854775808", LLONG_MIN, 0, 0, LLONG_MIN },
	{ "-9223372036854775809", LLONG_MIN, 0, ROCK_ERR_TOO_SMALL, 0 },
	{ "4294967296", 0, 2147483647, ROCK_ERR_TOO_LARGE, 0 },
};

START_TEST(test_parse_table)
{
	const struct parse_case *c = &parse_cases[_i];
	long long out = 12345;
	int r = rock_parse_ll(c->in, c->min, c->max, &out);

	ck_assert_msg(r == c->err, "\"%s\": got %d, want %d", c->in, r, c->err);
	if (c->err == 0)
		ck_assert_int_eq(out, c->want);
	else
		ck_assert_int_eq(out, 12345);	/* untouched on failure */
}
END_TEST

START_TEST(test_parse_null)
{
	long long out = 1;

	ck_assert_int_eq(rock_parse_ll(NULL, 0, 1, &out), ROCK_ERR_EMPTY);
	ck_assert_int_eq(out, 1);
}
END_TEST

START_TEST(test_err_text)
{
	ck_assert_str_eq(rock_err(0), "success");
	ck_assert_str_eq(rock_err(ROCK_ERR_NOT_NUMBER), "not a decimal integer");
	ck_assert_str_eq(rock_err(ROCK_ERR_TOO_LARGE), "too large");
	ck_assert_str_eq(rock_err(ROCK_ERR_INVALID), "invalid argument");
	ck_assert_str_eq(rock_err(ROCK_ERR_FULL), "in-flight buffer full");
	ck_assert_str_eq(rock_err(ROCK_ERR_PROTOCOL),
	    "protocol violation by the peer");
	ck_assert_str_eq(rock_err(ROCK_ERR_LOST), "replay data no longer held");
	ck_assert_str_eq(rock_err(ROCK_ERR_LAST), "unknown error");
	ck_assert_str_eq(rock_err(1), "unknown error");
	ck_assert_str_eq(rock_err(-1000), "unknown error");
}
END_TEST

Suite *
parse_suite(void)
{
	Suite *s = suite_create("parse");
	TCase *tc = tcase_create("core");

	tcase_add_loop_test(tc, test_parse_table, 0,
	    (int)(sizeof(parse_cases) / sizeof(parse_cases[0])));
	tcase_add_test(tc, test_parse_null);
	tcase_add_test(tc, test_err_text);
	suite_add_tcase(s, tc);
	return s;
}
