/* check_strike.c: the replay register: each early flight's nonce admitted once, within its window, under tickets younger than the register; full, it admits nothing. */
#include "config.h"

#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rock_engine_int.h"
#include "suites.h"

#define W ROCK_EARLY_WINDOW_MS

static void
nonce_of(uint32_t i, uint8_t out[ROCK_NONCE_LEN])
{
	memset(out, 0x5a, ROCK_NONCE_LEN);
	memcpy(out, &i, sizeof(i));
}

/* Once, and once only, while a replay would pass the clock check; past
 * that the clock refuses it. A flight from a clock ahead of ours is held
 * back and its nonce kept, so it is never admitted later. Times only go
 * forward here, as the register's own clock does. */
START_TEST(test_strike_once)
{
	struct rock_strike *st;
	uint8_t a[ROCK_NONCE_LEN], b[ROCK_NONCE_LEN], c[ROCK_NONCE_LEN];
	int64_t issued, t0;

	ck_assert_int_eq(rock_strike_new(&st), 0);
	issued = rock_ticket_now_ms() + 1;	/* after the register's birth */
	t0 = issued + 5000;
	nonce_of(1, a);
	nonce_of(2, b);
	nonce_of(3, c);
	/* A ticket 5 s old, sent now: in. Again: a replay. */
	ck_assert_int_eq(rock_strike_admit(st, a, issued, 5000, t0),
	    ROCK_EARLY_ADMITTED);
	ck_assert_int_eq(rock_strike_admit(st, a, issued, 5000, t0 + 1),
	    ROCK_EARLY_REPLAY);
	/* Another nonce under the same ticket is another flight. */
	ck_assert_int_eq(rock_strike_admit(st, b, issued, 5000, t0 + 1),
	    ROCK_EARLY_ADMITTED);
	/* Sent (by its clock) W + 1 ahead of ours: held, and kept. */
	ck_assert_int_eq(rock_strike_admit(st, c, issued, 5000 + W + 2, t0 + 1),
	    ROCK_EARLY_CLOCK);
	/* The window's far edge: a replay still refused at its last
	 * millisecond, by the clock after it. */
	ck_assert_int_eq(rock_strike_admit(st, a, issued, 5000, t0 + W),
	    ROCK_EARLY_REPLAY);
	ck_assert_int_eq(rock_strike_admit(st, a, issued, 5000, t0 + W + 1),
	    ROCK_EARLY_CLOCK);
	/* The early one, once its window came: a replay. */
	ck_assert_int_eq(rock_strike_admit(st, c, issued, 5000 + W + 2,
	    t0 + W + 1), ROCK_EARLY_REPLAY);
	/* The near edge: sent exactly W ahead of us is in. */
	nonce_of(4, a);
	ck_assert_int_eq(rock_strike_admit(st, a, issued, 5000 + 2 * W + 1,
	    t0 + W + 1), ROCK_EARLY_ADMITTED);
	/* A ticket a predecessor sealed (issued before the register was
	 * made): its flights may have been admitted where we cannot see. */
	nonce_of(5, a);
	ck_assert_int_eq(rock_strike_admit(st, a, issued - 1000, 0,
	    t0 + W + 1), ROCK_EARLY_ERA);
	/* A successor's register, until its predecessor stopped. */
	rock_strike_born(st, INT64_MAX);
	ck_assert_int_eq(rock_strike_admit(st, a, issued, 5000 + W, t0 + W + 1),
	    ROCK_EARLY_ERA);
	rock_strike_born(st, issued - 1);
	ck_assert_int_eq(rock_strike_admit(st, a, issued, 5000 + W, t0 + W + 1),
	    ROCK_EARLY_ADMITTED);
	rock_strike_free(st);
}
END_TEST

/* A register with no room admits nothing (the flight takes the round
 * trip), and the flight it could not keep is never admitted after, even
 * once room comes back; later flights are. */
START_TEST(test_strike_full)
{
	struct rock_strike *st;
	uint8_t n[ROCK_NONCE_LEN];
	int64_t issued;
	uint32_t i, admitted = 0;
	enum rock_early_verdict v = ROCK_EARLY_ADMITTED;

	ck_assert_int_eq(rock_strike_new(&st), 0);
	issued = rock_ticket_now_ms() + 1;
	for (i = 0; i < (1u << 18) && v == ROCK_EARLY_ADMITTED; i++) {
		nonce_of(i, n);
		if ((v = rock_strike_admit(st, n, issued, 0, issued)) ==
		    ROCK_EARLY_ADMITTED)
			admitted++;
	}
	ck_assert_int_eq(v, ROCK_EARLY_FULL);
	/* Linear probing over 32 slots: a first window full at about
	 * half the table (62,809 in one run). */
	ck_assert_uint_gt(admitted, (1u << 17) / 4);
	/* Flights sent at issued + W, until one finds no room: held, and
	 * no flight sent at or before it is admitted after (a window later,
	 * with the first fill's slots free again); one sent after it is. */
	v = ROCK_EARLY_ADMITTED;
	for (i = 1u << 20; v == ROCK_EARLY_ADMITTED; i++) {
		nonce_of(i, n);
		v = rock_strike_admit(st, n, issued, W, issued + W);
	}
	ck_assert_int_eq(v, ROCK_EARLY_FULL);
	ck_assert_int_eq(rock_strike_admit(st, n, issued, W, issued + 2 * W),
	    ROCK_EARLY_FULL);
	nonce_of(1u << 24, n);
	ck_assert_int_eq(rock_strike_admit(st, n, issued, W, issued + 2 * W),
	    ROCK_EARLY_FULL);
	ck_assert_int_eq(rock_strike_admit(st, n, issued, W + 1, issued + 2 * W),
	    ROCK_EARLY_ADMITTED);
	rock_strike_free(st);
}
END_TEST

/* The workers' register is one: a flight admitted in a child process
 * (a worker forked after the register was made) is a replay here. */
START_TEST(test_strike_shared)
{
	struct rock_strike *st;
	uint8_t n[ROCK_NONCE_LEN];
	int64_t issued;
	int status;
	pid_t pid;

	ck_assert_int_eq(rock_strike_new(&st), 0);
	issued = rock_ticket_now_ms() + 1;
	nonce_of(77, n);
	if ((pid = fork()) == 0)
		_exit(rock_strike_admit(st, n, issued, 0, issued) ==
		    ROCK_EARLY_ADMITTED ? 0 : 1);
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_int_eq(rock_strike_admit(st, n, issued, 0, issued + 1),
	    ROCK_EARLY_REPLAY);
	rock_strike_free(st);
}
END_TEST

Suite *
strike_suite(void)
{
	Suite *s = suite_create("strike");
	TCase *tc = tcase_create("register");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_strike_once);
	tcase_add_test(tc, test_strike_full);
	tcase_add_test(tc, test_strike_shared);
	suite_add_tcase(s, tc);
	return s;
}
