/* netem.h: Linux netem's parameters and per-packet decisions, for a user-space netem on NFQUEUE. */
#ifndef NETEM_H
#define NETEM_H

#include <stddef.h>
#include <stdint.h>

/*
 * The meaning of every field is tc-netem(8)'s, and so is the arithmetic in
 * netem_sched.c (net/sched/sch_netem.c): probabilities are fractions of
 * 2^32, correlations mix the previous random value into the next one, a
 * jitter is uniform over [-jitter, +jitter) unless the distribution is
 * normal (then it is the standard deviation), and a rate serializes
 * packets one after another.
 */
enum netem_dist { NETEM_DIST_UNIFORM = 0, NETEM_DIST_NORMAL };

struct netem_corr {
	uint32_t rho;		/* correlation, fraction of 2^32 */
	uint32_t last;		/* previous correlated value */
};

struct netem_params {
	uint32_t limit;		/* packets held at most (1000) */
	int64_t delay_ns;
	int64_t jitter_ns;
	enum netem_dist dist;
	uint32_t loss;		/* probabilities: fraction of 2^32 - 1 */
	uint32_t duplicate;
	uint32_t reorder;
	uint32_t gap;		/* reorder one packet out of gap (1 with reorder) */
	uint64_t rate_bps;	/* bytes per second; 0: unlimited */
	struct netem_corr delay_cor, loss_cor, dup_cor, reorder_cor;
};

/* netem_params_parse's failure: the word and what was expected. */
struct netem_parse_error {
	char text[160];
};

void netem_params_default(struct netem_params *p);
/* argv: tc-netem's options, e.g. { "delay", "100ms", "10ms", "loss", "1%" }.
 * 0, or -1 with err filled. */
int netem_params_parse(struct netem_params *p, int argc, char **argv,
    struct netem_parse_error *err);
/* The same options as one line, split on blanks. */
int netem_params_parse_line(struct netem_params *p, const char *line,
    struct netem_parse_error *err);
/* Human-readable summary, as `tc qdisc show` would say it. */
void netem_params_format(const struct netem_params *p, char *buf, size_t len);

/* xorshift128+: fast, and reproducible from a seed for the tests. */
struct netem_rng {
	uint64_t s[2];
};
void netem_rng_seed(struct netem_rng *r, uint64_t seed);
uint32_t netem_rng_u32(struct netem_rng *r);

/*
 * The random draws of one class of packets: its generator, the last value
 * of each correlation and the reorder counter. A queue keeps one per class
 * (TCP, everything else) so that one class's packets do not shift the
 * other's draws: two runs from one seed give the n-th TCP packet the same
 * fate whatever UDP went by (paired comparisons in the benchmarks). The
 * kernel's netem has one stream; with one class in use the two agree.
 */
enum { NETEM_CLASS_TCP = 0, NETEM_CLASS_OTHER, NETEM_CLASSES };
struct netem_draws {
	struct netem_rng rng;
	uint32_t last[4];		/* delay, loss, duplicate, reorder */
	uint32_t counter;
};

/* One queue's running state (a qdisc's). */
struct netem_queue {
	struct netem_params p;
	struct netem_rng rng;
	uint32_t counter;		/* packets since the last reorder */
	int cls;			/* the class whose draws are loaded */
	struct netem_draws saved[NETEM_CLASSES];
	int64_t last_send_ns;		/* latest time_to_send (rate's reference) */
	uint32_t held;			/* packets scheduled, not yet sent */
	uint64_t n_in, n_lost, n_dup, n_reordered, n_overlimit;
};

void netem_queue_init(struct netem_queue *q, const struct netem_params *p,
    uint64_t seed);

/* Every class's draws start again from seed (as netem_queue_init). */
void netem_queue_reseed(struct netem_queue *q, uint64_t seed);
/* The next packets are of class cls (NETEM_CLASS_*). */
void netem_queue_class(struct netem_queue *q, int cls);

enum netem_fate { NETEM_DROP, NETEM_SEND };

/* What becomes of one packet of len bytes (on the wire, L2 header
 * included) arriving at now_ns: dropped, or sent at *when_ns; *dup set if
 * a copy is to be scheduled too (call netem_enqueue again for it with
 * is_copy 1: a copy is never duplicated again, as in netem). */
enum netem_fate netem_enqueue(struct netem_queue *q, int64_t now_ns,
    size_t len, int is_copy, int64_t *when_ns, int *dup);
/* A scheduled packet left. */
void netem_sent(struct netem_queue *q);

#endif
