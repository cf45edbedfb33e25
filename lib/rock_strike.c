/* rock_strike.c: the replay register: a CLIENT_EARLY's nonce admitted once, in memory rockd's workers share, so no recorded first flight's bytes reach a backend twice. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include <sodium.h>

#include "rock_engine_int.h"
#include "rock_err.h"

/* 2^17 nonces of 24 bytes (3 MiB, touched as they come), each kept for
 * at most two windows: a first nonce finds its 32 slots taken at about
 * 60,000 kept (check_strike.c), some 3,000 early connects a second; past
 * that, clients' first bytes take the round trip (doc/PROTOCOL.md 2.9). */
#define STRIKE_SLOTS	(1u << 17)
#define STRIKE_PROBE	32	/* slots looked at from a nonce's hash */

struct strike_slot {
	uint8_t nonce[ROCK_NONCE_LEN];
	int64_t until_ms;	/* a flight with this nonce passes the clock check until then */
};

struct rock_strike {
	pthread_mutex_t lock;
	/* Tickets issued before this register was made may have had their
	 * flights admitted by a register we never saw (a predecessor's). */
	int64_t born_ms;
	/* No flight sent at or before this time is admitted: a flight held
	 * back for want of room left no nonce to find it by. */
	int64_t floor_ms;
	/* The newest time any taker brought: the register's own, so that
	 * every check and expiry under the lock follows the lock's order. */
	int64_t now_ms;
	uint8_t hash_key[crypto_shorthash_KEYBYTES];
	struct strike_slot slots[STRIKE_SLOTS];
};

int
rock_strike_new(struct rock_strike **out)
{
	struct rock_strike *st;
	void *p;
	int r;

	if ((r = rock_shared_map(sizeof(*st), &p)) != 0)
		return r;
	st = p;
	st->born_ms = rock_ticket_now_ms();
	crypto_shorthash_keygen(st->hash_key);
	*out = st;
	return 0;
}

void
rock_strike_free(struct rock_strike *st)
{
	if (st != NULL)
		munmap(st, sizeof(*st));
}

/* A worker killed while it held the lock may have left a slot half
 * written, and with it a nonce we would not find: every ticket issued
 * so far loses its early bytes (they take the round trip), none is
 * admitted twice. */
static int
strike_lock(struct rock_strike *st, int64_t now_ms)
{
	int r = pthread_mutex_lock(&st->lock);

	if (r == EOWNERDEAD) {
		st->born_ms = now_ms > st->born_ms ? now_ms : st->born_ms;
		pthread_mutex_consistent(&st->lock);
		r = 0;
	}
	return r;
}

void
rock_strike_born(struct rock_strike *st, int64_t ms)
{
	if (strike_lock(st, rock_ticket_now_ms()) != 0)
		return;
	st->born_ms = ms;
	pthread_mutex_unlock(&st->lock);
}

/* A successor's register admits nothing (born in the future) until its
 * predecessor's workers have stopped issuing tickets and admitting
 * flights, then flights under tickets issued after their last. */
void
rock_strike_wait(struct rock_strike *st)
{
	rock_strike_born(st, INT64_MAX);
}

void
rock_strike_start(struct rock_strike *st)
{
	rock_strike_born(st, rock_ticket_now_ms());
}

/* The nonce kept until until_ms: ADMITTED, REPLAY or FULL. */
static enum rock_early_verdict
strike_insert(struct rock_strike *st, const uint8_t nonce[ROCK_NONCE_LEN],
    int64_t until_ms, int64_t now_ms)
{
	uint8_t h[crypto_shorthash_BYTES];
	struct strike_slot *free_slot = NULL;
	uint64_t at;
	unsigned i;

	crypto_shorthash(h, nonce, ROCK_NONCE_LEN, st->hash_key);
	memcpy(&at, h, sizeof(at));
	for (i = 0; i < STRIKE_PROBE; i++) {
		struct strike_slot *sl = &st->slots[(at + i) & (STRIKE_SLOTS - 1)];

		if (sl->until_ms < now_ms) {	/* a replay passes until then */
			if (free_slot == NULL)
				free_slot = sl;
		} else if (memcmp(sl->nonce, nonce, ROCK_NONCE_LEN) == 0) {
			return ROCK_EARLY_REPLAY;
		}
	}
	if (free_slot == NULL)
		return ROCK_EARLY_FULL;
	memcpy(free_slot->nonce, nonce, ROCK_NONCE_LEN);
	free_slot->until_ms = until_ms;
	return ROCK_EARLY_ADMITTED;
}

enum rock_early_verdict
rock_strike_admit(struct rock_strike *st, const uint8_t nonce[ROCK_NONCE_LEN],
    int64_t issued_ms, uint32_t age_ms, int64_t now_ms)
{
	int64_t sent_ms = issued_ms + (int64_t)age_ms, now;
	enum rock_early_verdict v;

	if (strike_lock(st, now_ms) != 0)
		return ROCK_EARLY_FULL;
	if (now_ms > st->now_ms)
		st->now_ms = now_ms;
	now = st->now_ms;
	/* The client's clock and ours agree on the flight's time within a
	 * window (a round trip, a clock's drift over a ticket's hour); a
	 * flight replayed later than that fails here, and its nonce need
	 * be kept no longer. */
	if (issued_ms <= st->born_ms)
		v = ROCK_EARLY_ERA;
	else if (now - sent_ms > ROCK_EARLY_WINDOW_MS)
		v = ROCK_EARLY_CLOCK;
	else if (sent_ms - ROCK_EARLY_WINDOW_MS >
	    issued_ms + ROCK_TICKET_LIFETIME_S * 1000LL)
		v = ROCK_EARLY_CLOCK;	/* its ticket ends before it could pass */
	else if (sent_ms <= st->floor_ms)
		v = ROCK_EARLY_FULL;
	else if ((v = strike_insert(st, nonce, sent_ms + ROCK_EARLY_WINDOW_MS,
	    now)) == ROCK_EARLY_ADMITTED && sent_ms - now > ROCK_EARLY_WINDOW_MS)
		/* From a clock ahead of ours: held back, and its nonce kept
		 * until the window it is early for has passed. */
		v = ROCK_EARLY_CLOCK;
	/* Held back with no nonce kept (no room): no flight sent before it
	 * is admitted from now on, this one's replays included. */
	if (v == ROCK_EARLY_FULL && sent_ms > st->floor_ms)
		st->floor_ms = sent_ms;
	pthread_mutex_unlock(&st->lock);
	return v;
}
