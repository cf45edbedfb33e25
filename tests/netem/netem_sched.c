/* netem_sched.c: netem's per-packet decisions (loss, duplicate, reorder, delay, jitter, rate), as sch_netem.c makes them. */
#include <math.h>
#include <string.h>

#include "netem.h"

void
netem_rng_seed(struct netem_rng *r, uint64_t seed)
{
	int i;

	/* splitmix64 spreads any seed, 0 included, over both words. */
	for (i = 0; i < 2; i++) {
		uint64_t z = (seed += 0x9e3779b97f4a7c15ULL);

		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
		r->s[i] = z ^ (z >> 31);
	}
}

uint32_t
netem_rng_u32(struct netem_rng *r)
{
	uint64_t x = r->s[0], y = r->s[1];

	r->s[0] = y;
	x ^= x << 23;
	r->s[1] = x ^ y ^ (x >> 17) ^ (y >> 26);
	return (uint32_t)((r->s[1] + y) >> 32);
}

/* netem's get_crandom: the next value leans on the last by rho. */
static uint32_t
crandom(struct netem_corr *c, struct netem_rng *r)
{
	uint64_t value, rho;

	if (c->rho == 0)
		return netem_rng_u32(r);
	value = netem_rng_u32(r);
	rho = (uint64_t)c->rho + 1;
	c->last = (uint32_t)((value * ((1ULL << 32) - rho) + c->last * rho) >> 32);
	return c->last;
}

/* Inverse of the standard normal CDF (Acklam's rational approximation,
 * relative error 1.15e-9): what netem's "normal" table tabulates. */
static double
normal_quantile(double p)
{
	static const double a[] = { -3.969683028665376e+01, 2.209460984245205e+02,
	    -2.759285104469687e+02, 1.383577518672690e+02, -3.066479806614716e+01,
	    2.506628277459239e+00 };
	static const double b[] = { -5.447609879822406e+01, 1.615858368580409e+02,
	    -1.556989798598866e+02, 6.680131188771972e+01, -1.328068155288572e+01 };
	static const double c[] = { -7.784894002430293e-03, -3.223964580411365e-01,
	    -2.400758277161838e+00, -2.549732539343734e+00, 4.374664141464968e+00,
	    2.938163982698783e+00 };
	static const double d[] = { 7.784695709041462e-03, 3.224671290700398e-01,
	    2.445134137142996e+00, 3.754408661907416e+00 };
	double q, r;

	if (p < 0.02425) {
		q = sqrt(-2 * log(p));
		return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
		    ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
	}
	if (p > 1 - 0.02425)
		return -normal_quantile(1 - p);
	q = p - 0.5;
	r = q * q;
	return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
	    (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
}

/* netem's tabledist: mu plus a jitter drawn from the distribution; the
 * normal table spans four standard deviations either way. */
static int64_t
tabledist(struct netem_queue *q)
{
	const struct netem_params *p = &q->p;
	uint32_t rnd;
	double t;

	if (p->jitter_ns == 0)
		return p->delay_ns;
	rnd = crandom(&q->p.delay_cor, &q->rng);
	if (p->dist == NETEM_DIST_UNIFORM)
		return (int64_t)(rnd % (2 * (uint64_t)p->jitter_ns)) + p->delay_ns -
		    p->jitter_ns;
	t = normal_quantile((rnd + 0.5) / 4294967296.0);
	t = t < -4 ? -4 : t > 4 ? 4 : t;
	return p->delay_ns + (int64_t)llround(t * (double)p->jitter_ns);
}

static struct netem_corr *
corr(struct netem_queue *q, int i)
{
	struct netem_corr *c[] = { &q->p.delay_cor, &q->p.loss_cor,
	    &q->p.dup_cor, &q->p.reorder_cor };

	return c[i];
}

void
netem_queue_init(struct netem_queue *q, const struct netem_params *p,
    uint64_t seed)
{
	memset(q, 0, sizeof(*q));
	q->p = *p;
	netem_queue_reseed(q, seed);
}

void
netem_queue_reseed(struct netem_queue *q, uint64_t seed)
{
	int c;

	for (c = 0; c < NETEM_CLASSES; c++) {
		/* Class 0 draws what a one-stream netem would from seed. */
		netem_rng_seed(&q->saved[c].rng, seed + (uint64_t)c * 0x632be59bd9b4e019ULL);
		memset(q->saved[c].last, 0, sizeof(q->saved[c].last));
		q->saved[c].counter = 0;
	}
	q->cls = -1;
	netem_queue_class(q, NETEM_CLASS_TCP);
}

void
netem_queue_class(struct netem_queue *q, int cls)
{
	struct netem_draws *d;
	int i;

	if (cls == q->cls)
		return;
	if (q->cls >= 0) {
		d = &q->saved[q->cls];
		d->rng = q->rng;
		d->counter = q->counter;
		for (i = 0; i < 4; i++)
			d->last[i] = corr(q, i)->last;
	}
	d = &q->saved[cls];
	q->rng = d->rng;
	q->counter = d->counter;
	for (i = 0; i < 4; i++)
		corr(q, i)->last = d->last[i];
	q->cls = cls;
}

enum netem_fate
netem_enqueue(struct netem_queue *q, int64_t now_ns, size_t len, int is_copy,
    int64_t *when_ns, int *dup)
{
	struct netem_params *p = &q->p;
	int count = 1;
	int64_t delay;

	*dup = 0;
	q->n_in++;
	if (!is_copy && p->duplicate != 0 &&
	    p->duplicate >= crandom(&p->dup_cor, &q->rng))
		count++;
	if (p->loss != 0 && p->loss >= crandom(&p->loss_cor, &q->rng))
		count--;
	if (count == 0) {
		q->n_lost++;
		return NETEM_DROP;
	}
	if (q->held >= p->limit) {
		q->n_overlimit++;
		return NETEM_DROP;
	}
	if (count > 1) {
		q->n_dup++;
		*dup = 1;
	}
	q->held++;
	if (p->gap == 0 || q->counter < p->gap - 1 ||
	    p->reorder < crandom(&p->reorder_cor, &q->rng)) {
		delay = tabledist(q);
		if (p->rate_bps != 0) {
			/* The latest packet held is the reference: this one
			 * follows it on the wire. */
			if (q->held > 1 && q->last_send_ns > now_ns) {
				delay -= q->last_send_ns - now_ns;
				if (delay < 0)
					delay = 0;
				now_ns = q->last_send_ns;
			}
			delay += (int64_t)((uint64_t)len * 1000000000ULL / p->rate_bps);
		}
		*when_ns = now_ns + delay;
		q->counter++;
	} else {
		/* One out of gap goes to the head of the queue: now. */
		*when_ns = now_ns;
		q->counter = 0;
		q->n_reordered++;
	}
	if (q->held == 1 || *when_ns > q->last_send_ns)
		q->last_send_ns = *when_ns;
	return NETEM_SEND;
}

void
netem_sent(struct netem_queue *q)
{
	if (q->held > 0)
		q->held--;
}
