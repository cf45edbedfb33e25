/* check_netem.c: unit tests of the tests' netem: tc's option syntax and netem's per-packet decisions. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../netem/netem.h"
#include "suites.h"

static struct netem_params
parsed(const char *line)
{
	struct netem_parse_error err;
	struct netem_params p;

	ck_assert_msg(netem_params_parse_line(&p, line, &err) == 0,
	    "'%s' refused: %s", line, err.text);
	return p;
}

static double
pct(uint32_t frac)
{
	return frac / (double)UINT32_MAX * 100.0;
}

START_TEST(parse_units_as_tc)
{
	struct netem_params p = parsed("delay 100ms 10ms 25% distribution normal");

	ck_assert_int_eq(p.delay_ns, 100000000);
	ck_assert_int_eq(p.jitter_ns, 10000000);
	ck_assert(fabs(pct(p.delay_cor.rho) - 25) < 1e-6);
	ck_assert_int_eq(p.dist, NETEM_DIST_NORMAL);
	ck_assert_int_eq(p.limit, 1000);
	/* A bare time is microseconds; s and us as tc spells them. */
	ck_assert_int_eq(parsed("delay 250").delay_ns, 250000);
	ck_assert_int_eq(parsed("delay 1.5s").delay_ns, 1500000000);
	ck_assert_int_eq(parsed("delay 20usec").delay_ns, 20000);
	/* Percent sign optional; "loss random" is "loss". */
	ck_assert(fabs(pct(parsed("loss 10").loss) - 10) < 1e-6);
	ck_assert(fabs(pct(parsed("loss random 0.1%").loss) - 0.1) < 1e-6);
	ck_assert(fabs(pct(parsed("duplicate 1% 30%").dup_cor.rho) - 30) < 1e-6);
	/* Rates: a bare number is bits per second; kept in bytes. */
	ck_assert_uint_eq(parsed("rate 10mbit").rate_bps, 1250000);
	ck_assert_uint_eq(parsed("rate 8000").rate_bps, 1000);
	ck_assert_uint_eq(parsed("rate 1mbps").rate_bps, 1000000);
	ck_assert_uint_eq(parsed("rate 1kibit").rate_bps, 128);
	ck_assert_uint_eq(parsed("limit 20").limit, 20);
	/* tc sets a gap of 1 for reordering. */
	ck_assert_uint_eq(parsed("delay 10ms reorder 25%").gap, 1);
	ck_assert_uint_eq(parsed("delay 10ms reorder 25% gap 5").gap, 5);
}
END_TEST

START_TEST(parse_refusals_name_the_problem)
{
	static const struct { const char *line, *says; } bad[] = {
		{ "delay", "delay wants TIME" },
		{ "delay 10 parsecs", "unknown or unsupported option 'parsecs'" },
		{ "delay 10xs", "delay wants TIME" },
		{ "loss 101%", "loss wants PERCENT" },
		{ "loss -1", "loss wants PERCENT" },
		{ "loss state 1", "loss state is not supported" },
		{ "reorder 10%", "reordering not possible without specifying some delay" },
		{ "rate fast", "rate wants RATE" },
		{ "rate 0", "rate wants RATE" },
		{ "limit 0", "limit wants PACKETS" },
		{ "delay 1ms 1ms distribution pareto", "distribution 'pareto' is not supported" },
		{ "corrupt 1%", "unknown or unsupported option 'corrupt'" },
	};
	struct netem_parse_error err;
	struct netem_params p;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(netem_params_parse_line(&p, bad[i].line, &err) == -1,
		    "'%s' accepted", bad[i].line);
		ck_assert_msg(strstr(err.text, bad[i].says) != NULL,
		    "'%s': said '%s'", bad[i].line, err.text);
	}
}
END_TEST

static struct netem_queue
queue_of(const char *line, uint64_t seed)
{
	struct netem_params p = parsed(line);
	struct netem_queue q;

	netem_queue_init(&q, &p, seed);
	return q;
}

START_TEST(fixed_delay_keeps_order)
{
	struct netem_queue q = queue_of("delay 50ms", 1);
	int64_t when, prev = 0;
	int dup, i;

	for (i = 0; i < 100; i++) {
		ck_assert_int_eq(netem_enqueue(&q, i * 1000, 100, 0, &when, &dup),
		    NETEM_SEND);
		ck_assert_int_eq(when, i * 1000 + 50000000);
		ck_assert(when > prev);
		ck_assert_int_eq(dup, 0);
		prev = when;
	}
}
END_TEST

START_TEST(loss_and_duplicate_rates)
{
	struct netem_queue q = queue_of("loss 10% duplicate 5%", 7);
	int64_t when;
	int dup, i, lost = 0, dups = 0;

	for (i = 0; i < 100000; i++) {
		if (netem_enqueue(&q, 0, 100, 0, &when, &dup) == NETEM_DROP)
			lost++;
		else
			netem_sent(&q);
		dups += dup;
	}
	/* netem: a packet both lost and duplicated goes out once, so 10 %
	 * of the 95 % not duplicated are lost, and 5 % of the 90 % kept
	 * are duplicated. */
	ck_assert_msg(lost > 9200 && lost < 9800, "lost %d of 100000", lost);
	ck_assert_msg(dups > 4200 && dups < 4800, "duplicated %d", dups);
	ck_assert_uint_eq(q.n_lost, (uint64_t)lost);
}
END_TEST

START_TEST(rate_serializes_packets)
{
	/* 1 Mbit/s: a 1250-byte packet takes 10 ms on the wire. */
	struct netem_queue q = queue_of("delay 20ms rate 1mbit", 3);
	int64_t when;
	int dup, i;

	for (i = 0; i < 5; i++) {
		netem_enqueue(&q, 0, 1250, 0, &when, &dup);
		ck_assert_int_eq(when, 20000000 + (int64_t)(i + 1) * 10000000);
	}
	/* Once the queue is empty, a packet pays the delay again. */
	for (i = 0; i < 5; i++)
		netem_sent(&q);
	netem_enqueue(&q, 200000000, 1250, 0, &when, &dup);
	ck_assert_int_eq(when, 200000000 + 20000000 + 10000000);
}
END_TEST

START_TEST(limit_drops_beyond_it)
{
	struct netem_queue q = queue_of("delay 1s limit 3", 3);
	int64_t when;
	int dup, i;

	for (i = 0; i < 3; i++)
		ck_assert_int_eq(netem_enqueue(&q, 0, 100, 0, &when, &dup), NETEM_SEND);
	ck_assert_int_eq(netem_enqueue(&q, 0, 100, 0, &when, &dup), NETEM_DROP);
	ck_assert_uint_eq(q.n_overlimit, 1);
	netem_sent(&q);
	ck_assert_int_eq(netem_enqueue(&q, 0, 100, 0, &when, &dup), NETEM_SEND);
}
END_TEST

START_TEST(reorder_sends_some_now)
{
	struct netem_queue q = queue_of("delay 10ms reorder 25%", 11);
	int64_t when;
	int dup, i, now = 0, later = 0;

	for (i = 0; i < 10000; i++) {
		netem_enqueue(&q, 5, 100, 0, &when, &dup);
		netem_sent(&q);
		if (when == 5)
			now++;
		else if (when == 5 + 10000000)
			later++;
	}
	ck_assert_int_eq(now + later, 10000);
	ck_assert_msg(now > 2300 && now < 2700, "%d sent at once", now);
	ck_assert_uint_eq(q.n_reordered, (uint64_t)now);
}
END_TEST

START_TEST(jitter_has_its_distribution)
{
	struct netem_queue u = queue_of("delay 100ms 20ms", 5);
	struct netem_queue n = queue_of("delay 100ms 20ms distribution normal", 5);
	double sum = 0, sq = 0, d;
	int64_t when, lo = INT64_MAX, hi = 0;
	int dup, i;

	for (i = 0; i < 20000; i++) {
		netem_enqueue(&u, 0, 100, 0, &when, &dup);
		netem_sent(&u);
		lo = when < lo ? when : lo;
		hi = when > hi ? when : hi;
		netem_enqueue(&n, 0, 100, 0, &when, &dup);
		netem_sent(&n);
		d = when / 1e6 - 100;
		sum += d;
		sq += d * d;
	}
	/* Uniform: [80, 120) ms. */
	ck_assert(lo >= 80000000 && hi < 120000000);
	ck_assert(lo < 80500000 && hi > 119500000);
	/* Normal: mean 100 ms, standard deviation 20 ms. */
	ck_assert_msg(fabs(sum / 20000) < 0.6, "mean off by %f ms", sum / 20000);
	ck_assert_msg(fabs(sqrt(sq / 20000) - 20) < 0.6, "sd %f ms", sqrt(sq / 20000));
}
END_TEST

START_TEST(same_seed_same_fates)
{
	struct netem_queue a = queue_of("delay 10ms 5ms loss 30%", 42);
	struct netem_queue b = queue_of("delay 10ms 5ms loss 30%", 42);
	int64_t wa, wb;
	int da, db, i;

	for (i = 0; i < 1000; i++) {
		ck_assert_int_eq(netem_enqueue(&a, i, 100, 0, &wa, &da),
		    netem_enqueue(&b, i, 100, 0, &wb, &db));
		ck_assert_int_eq(wa, wb);
	}
}
END_TEST

/* Other packets between the TCP ones do not move the TCP draws; a reseed
 * starts them again (nfq-netem's SIGUSR2: paired benchmark runs). */
START_TEST(classes_draw_apart)
{
	const char *opts = "delay 150ms 29ms distribution normal loss 3% reorder 2%";
	struct netem_queue a = queue_of(opts, 7), b = queue_of(opts, 7);
	int64_t wa[500], wb, t;
	int fa[500], d, i, lost = 0, reordered = 0;

	for (i = 0; i < 500; i++) {
		t = (int64_t)i * 1000000;
		fa[i] = netem_enqueue(&a, t, 1500, 0, &wa[i], &d);
		netem_sent(&a);
		if (i % 3 == 0) {	/* a heartbeat now and then, in b only */
			netem_queue_class(&b, NETEM_CLASS_OTHER);
			(void)netem_enqueue(&b, t, 120, 0, &wb, &d);
			netem_sent(&b);
			netem_queue_class(&b, NETEM_CLASS_TCP);
		}
		ck_assert_int_eq(netem_enqueue(&b, t, 1500, 0, &wb, &d), fa[i]);
		netem_sent(&b);
		if (fa[i] == NETEM_DROP) {
			lost++;
			continue;
		}
		ck_assert_int_eq(wb, wa[i]);
		reordered += wa[i] == t;
	}
	/* The draws were not trivial: some lost, some sent at once. */
	ck_assert_int_gt(lost, 0);
	ck_assert_int_gt(reordered, 0);

	/* From the seed again: the same fates, in the same order. */
	netem_queue_reseed(&a, 7);
	for (i = 0; i < 500; i++) {
		t = (int64_t)i * 1000000;
		ck_assert_int_eq(netem_enqueue(&a, t, 1500, 0, &wb, &d), fa[i]);
		netem_sent(&a);
		if (fa[i] == NETEM_SEND)
			ck_assert_int_eq(wb, wa[i]);
	}
}
END_TEST

Suite *
netem_suite(void)
{
	Suite *s = suite_create("netem");
	TCase *tc = tcase_create("netem");

	tcase_add_test(tc, parse_units_as_tc);
	tcase_add_test(tc, parse_refusals_name_the_problem);
	tcase_add_test(tc, fixed_delay_keeps_order);
	tcase_add_test(tc, loss_and_duplicate_rates);
	tcase_add_test(tc, rate_serializes_packets);
	tcase_add_test(tc, limit_drops_beyond_it);
	tcase_add_test(tc, reorder_sends_some_now);
	tcase_add_test(tc, jitter_has_its_distribution);
	tcase_add_test(tc, same_seed_same_fates);
	tcase_add_test(tc, classes_draw_apart);
	suite_add_tcase(s, tc);
	return s;
}
