/* rock_strike.c: the replay register: a CLIENT_EARLY's nonce admitted once, in memory rockd's workers share, so no recorded first flight's bytes reach a backend twice. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
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
		st->born_ms = now_ms;
		pthread_mutex_consistent(&st->lock);
		r = 0;
	}
	return r;
}

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
	int64_t sent_ms = issued_ms + (int64_t)age_ms;
	enum rock_early_verdict v;

	/* The client's clock and ours agree on the flight's time within a
	 * window (a round trip, a clock's drift over a ticket's hour); a
	 * flight replayed later than that fails here, and its nonce need
	 * be kept no longer. */
	if (now_ms - sent_ms > ROCK_EARLY_WINDOW_MS ||
	    sent_ms - now_ms > ROCK_EARLY_WINDOW_MS)
		return ROCK_EARLY_CLOCK;
	if (strike_lock(st, now_ms) != 0)
		return ROCK_EARLY_FULL;
	if (issued_ms < st->born_ms)
		v = ROCK_EARLY_ERA;
	else
		v = strike_insert(st, nonce, sent_ms + ROCK_EARLY_WINDOW_MS,
		    now_ms);
	pthread_mutex_unlock(&st->lock);
	return v;
}
