/* rock_ticket.c: resumption tickets: the server's rotating ticket keys, and the client's tickets per server. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "rock_engine_int.h"
#include "rock_err.h"
#include "rock_probe_file.h"

/* A retired key is wiped when the last ticket it sealed expires: safe
 * only if it sealed no longer than a ticket lives. */
_Static_assert(ROCK_TICKET_ROTATE_S >= ROCK_TICKET_LIFETIME_S,
    "a ticket key must outlive no ticket it sealed by more than a lifetime");

/* Ticket times run on the boot clock: it goes on through a suspend (a
 * laptop's lid shut an hour must not leave tickets an hour younger). */
int64_t
rock_ticket_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Forward secrecy, as far as tickets allow (doc/PROTOCOL.md 2.7): a key
 * seals for an hour, then opens what it sealed for a ticket's life, then
 * is wiped; whoever reads our memory later opens no older ticket. */
static void
rotate(struct rock_engine *e, int64_t now)
{
	struct rock_ticket_key *cur = &e->ticket_keys[0], *old = &e->ticket_keys[1];

	if (cur->set && now - cur->born_ms >= ROCK_TICKET_ROTATE_S * 1000LL) {
		rock_wipe(old, sizeof(*old));
		*old = *cur;
		old->retired_ms = now;
		rock_wipe(cur, sizeof(*cur));
	}
	if (old->set && now - old->retired_ms >= ROCK_TICKET_LIFETIME_S * 1000LL)
		rock_wipe(old, sizeof(*old));
}

/* Workers' keys: one pair in shared memory, under a lock that survives
 * a worker killed while holding it. */
struct rock_ticket_store {
	pthread_mutex_t lock;
	struct rock_ticket_key keys[2];
};

/* size bytes of zeroed memory shared with the processes forked after,
 * beginning with a lock that survives a process killed while holding it
 * (EOWNERDEAD to the next taker). 0 or ROCK_ERR_SYSTEM. */
int
rock_shared_map(size_t size, void **out)
{
	pthread_mutexattr_t a;
	void *p;
	int r;

	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
	    -1, 0);
	if (p == MAP_FAILED)
		return ROCK_ERR_SYSTEM;
	if ((r = pthread_mutexattr_init(&a)) == 0) {
		if ((r = pthread_mutexattr_setpshared(&a,
		    PTHREAD_PROCESS_SHARED)) == 0 &&
		    (r = pthread_mutexattr_setrobust(&a,
		    PTHREAD_MUTEX_ROBUST)) == 0)
			r = pthread_mutex_init((pthread_mutex_t *)p, &a);
		pthread_mutexattr_destroy(&a);
	}
	if (r != 0) {
		munmap(p, size);
		errno = r;
		return ROCK_ERR_SYSTEM;
	}
	*out = p;
	return 0;
}

int
rock_ticket_store_new(struct rock_ticket_store **out)
{
	void *p;
	int r;

	if ((r = rock_shared_map(sizeof(**out), &p)) == 0)
		*out = p;
	return r;
}

void
rock_ticket_store_free(struct rock_ticket_store *st)
{
	if (st == NULL)
		return;
	rock_wipe(st->keys, sizeof(st->keys));
	munmap(st, sizeof(*st));
}

/* Around every use of the keys: the store's into the engine's, locked,
 * and back after, our copy wiped (a key one worker retires is then gone
 * from every process). A worker killed while it held the lock may have
 * left them half written: they are dropped (their tickets take a full
 * handshake), never used torn. A lock that cannot be taken at all (it
 * cannot happen short of a corrupted store) leaves the engine its own
 * keys: 1, and keys_out does nothing. */
static int
store_lock(struct rock_ticket_store *st)
{
	int r = pthread_mutex_lock(&st->lock);

	if (r == EOWNERDEAD) {
		rock_wipe(st->keys, sizeof(st->keys));
		pthread_mutex_consistent(&st->lock);
		r = 0;
	}
	return r;
}

static int
keys_in(struct rock_engine *e)
{
	struct rock_ticket_store *st = e->cfg.ticket_store;

	if (st == NULL || store_lock(st) != 0)
		return 1;
	memcpy(e->ticket_keys, st->keys, sizeof(st->keys));
	return 0;
}

static void
keys_out(struct rock_engine *e, int own)
{
	struct rock_ticket_store *st = e->cfg.ticket_store;

	if (own)
		return;
	memcpy(st->keys, e->ticket_keys, sizeof(st->keys));
	rock_wipe(e->ticket_keys, sizeof(e->ticket_keys));
	pthread_mutex_unlock(&st->lock);
}

/* A hand-over's export: the keys as they are (in the store, for workers). */
void
rock_ticket_keys_get(const struct rock_engine *e, struct rock_ticket_key out[2])
{
	struct rock_ticket_store *st = e->cfg.ticket_store;

	if (st == NULL || store_lock(st) != 0) {
		memcpy(out, e->ticket_keys, 2 * sizeof(*out));
		return;
	}
	memcpy(out, st->keys, 2 * sizeof(*out));
	pthread_mutex_unlock(&st->lock);
}

/* A hand-over's import into a worker: the keys it brought, into a store
 * still empty (the first of the successor's workers; the others brought
 * the same keys). */
void
rock_ticket_keys_adopted(struct rock_engine *e)
{
	struct rock_ticket_key mine[2];
	struct rock_ticket_store *st = e->cfg.ticket_store;
	int own;

	if (st == NULL)
		return;
	memcpy(mine, e->ticket_keys, sizeof(mine));
	own = keys_in(e);
	if (!own && !e->ticket_keys[0].set && !e->ticket_keys[1].set)
		memcpy(e->ticket_keys, mine, sizeof(mine));
	keys_out(e, own);
	rock_wipe(mine, sizeof(mine));
}

void
rock_ticket_issue(struct rock_engine *e, const uint8_t rms[ROCK_KEY_LEN],
    int64_t origin, const uint8_t nonce[ROCK_TICKET_NONCE_LEN],
    uint8_t out[ROCK_TICKET_MSG_LEN])
{
	struct rock_ticket_key *cur = &e->ticket_keys[0];
	struct rock_ticket_msg m;
	int64_t now = rock_ticket_now_ms();
	int own = keys_in(e);

	rotate(e, now);
	if (!cur->set) {
		rock_random(cur->id, sizeof(cur->id));
		/* A fleet's balancer sends a resumption to the node whose
		 * key sealed its ticket (doc/fleet.md). */
		if (e->cfg.node > 0)
			cur->id[ROCK_ID_NODE] = (uint8_t)e->cfg.node;
		/* Told apart from the retired key by its id. */
		if (e->ticket_keys[1].set &&
		    memcmp(cur->id, e->ticket_keys[1].id, sizeof(cur->id)) == 0)
			cur->id[3] ^= 0x80;
		rock_random(cur->key, sizeof(cur->key));
		cur->born_ms = now;
		cur->set = 1;
	}
	m.lifetime_s = ROCK_TICKET_LIFETIME_S;
	rock_ticket_seal(m.ticket, cur->id, cur->key, nonce, (uint64_t)now,
	    (uint64_t)origin, rms);
	keys_out(e, own);
	rock_ticket_msg_encode(&m, out);
}

static int
ticket_open(struct rock_engine *e, const uint8_t ticket[ROCK_TICKET_LEN],
    uint8_t rms[ROCK_KEY_LEN], int64_t *origin, int64_t *issued_out,
    int64_t now)
{
	uint64_t issued, from;
	int i;

	rotate(e, now);
	for (i = 0; i < 2; i++) {
		const struct rock_ticket_key *k = &e->ticket_keys[i];

		if (!k->set || memcmp(k->id, ticket, ROCK_TICKET_KEY_ID_LEN) != 0)
			continue;
		if (rock_ticket_open(&issued, &from, rms, ticket, k->key) != 0)
			return ROCK_ERR_AUTH;
		/* The ticket's own life, and its chain's since the last key
		 * exchange: resumed keys come from the secret alone. */
		if (issued > (uint64_t)now || from > issued ||
		    (uint64_t)now - issued > ROCK_TICKET_LIFETIME_S * 1000ULL ||
		    (uint64_t)now - from > ROCK_TICKET_CHAIN_S * 1000ULL) {
			rock_wipe(rms, ROCK_KEY_LEN);
			return ROCK_ERR_TIMEOUT;
		}
		*origin = (int64_t)from;
		if (issued_out != NULL)
			*issued_out = (int64_t)issued;
		return 0;
	}
	return ROCK_ERR_AUTH;
}

int
rock_ticket_accept(struct rock_engine *e,
    const uint8_t ticket[ROCK_TICKET_LEN], uint8_t rms[ROCK_KEY_LEN],
    int64_t *origin, int64_t *issued)
{
	int own = keys_in(e), r;

	r = ticket_open(e, ticket, rms, origin, issued, rock_ticket_now_ms());
	keys_out(e, own);
	return r;
}

/* Expired entries are wiped wherever they are: a secret kept past its
 * use would still open the rest of its chain. */
static struct rock_ticket_entry *
find(struct rock_engine *e, const struct sockaddr *addr, socklen_t len)
{
	int64_t now = rock_ticket_now_ms();
	struct rock_ticket_entry *found = NULL;
	unsigned i;

	for (i = 0; i < ROCK_TICKET_CACHE; i++) {
		struct rock_ticket_entry *t = &e->tickets[i];

		if (t->len == 0)
			continue;
		if (t->expires_ms <= now)
			rock_wipe(t, sizeof(*t));
		else if (addr != NULL && t->len == len &&
		    memcmp(&t->addr, addr, len) == 0)
			found = t;
	}
	return found;
}

void
rock_ticket_tick(struct rock_engine *e)
{
	int own = keys_in(e);

	rotate(e, rock_ticket_now_ms());
	keys_out(e, own);
	(void)find(e, NULL, 0);
}

int
rock_ticket_find(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, struct rock_ticket_entry *out)
{
	struct rock_ticket_entry *t = find(e, addr, len);

	if (t == NULL)
		return 0;
	*out = *t;
	return 1;
}

/* end: when the client stops offering it (the ticket's life less the
 * margin, or sooner); not past its chain's, less the margin. */
static void
put(struct rock_engine *e, const struct sockaddr *addr, socklen_t len,
    const uint8_t ticket[ROCK_TICKET_LEN], const uint8_t rms[ROCK_KEY_LEN],
    const uint8_t ident[ROCK_IDENT_LEN], int64_t end, int64_t origin,
    int64_t received)
{
	struct rock_ticket_entry *t = find(e, addr, len);
	int64_t now = rock_ticket_now_ms();
	int64_t chain_end = origin + (ROCK_TICKET_CHAIN_S - ROCK_TICKET_MARGIN_S) * 1000LL;

	if (end > chain_end)
		end = chain_end;
	if (end <= now || len > sizeof(t->addr)) {
		if (t != NULL)
			rock_wipe(t, sizeof(*t));
		return;
	}
	if (t == NULL) {
		t = &e->tickets[e->ticket_next];
		e->ticket_next = (e->ticket_next + 1) % ROCK_TICKET_CACHE;
	}
	memcpy(&t->addr, addr, len);
	t->len = len;
	t->expires_ms = end;
	t->origin_ms = origin;
	t->received_ms = received;
	memcpy(t->ticket, ticket, ROCK_TICKET_LEN);
	memcpy(t->rms, rms, ROCK_KEY_LEN);
	memcpy(t->ident, ident, ROCK_IDENT_LEN);
}

void
rock_ticket_store(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, const struct rock_ticket_msg *m,
    const uint8_t rms[ROCK_KEY_LEN], const uint8_t ident[ROCK_IDENT_LEN],
    int64_t origin)
{
	uint32_t life = m->lifetime_s;

	if (life > ROCK_TICKET_LIFETIME_S)
		life = ROCK_TICKET_LIFETIME_S;
	/* Used well before the server's end of it: no race with its clock. */
	put(e, addr, len, m->ticket, rms, ident, rock_ticket_now_ms() +
	    ((int64_t)life - ROCK_TICKET_MARGIN_S) * 1000, origin,
	    rock_ticket_now_ms());
}

/* The file's times are another process's, through the wall clock: they
 * are bounded by what a ticket and a chain can have left, and a ticket
 * the engine holds already is kept when it lasts as long. */
void
rock_ticket_remember(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, const struct rock_probe_ticket *t)
{
	int64_t now = rock_ticket_now_ms(), ttl = t->ttl_ms, chain = t->chain_ms;
	struct rock_ticket_entry *have;

	if (ttl > (ROCK_TICKET_LIFETIME_S - ROCK_TICKET_MARGIN_S) * 1000LL)
		ttl = (ROCK_TICKET_LIFETIME_S - ROCK_TICKET_MARGIN_S) * 1000LL;
	if (chain > ROCK_TICKET_CHAIN_S * 1000LL)
		chain = ROCK_TICKET_CHAIN_S * 1000LL;
	if (ttl <= 0 || chain <= ROCK_TICKET_MARGIN_S * 1000LL)
		return;
	rock_engine_enter(e);
	have = find(e, addr, len);
	if (have == NULL || have->expires_ms < now + ttl)
		/* Its arrival, counted back from its end (a lifetime less
		 * the margin; one cut short by its chain reads older, and
		 * its early bytes are held back: a round trip, no more). */
		put(e, addr, len, t->ticket, t->rms, t->ident, now + ttl,
		    now + chain - ROCK_TICKET_CHAIN_S * 1000LL, now + ttl -
		    (ROCK_TICKET_LIFETIME_S - ROCK_TICKET_MARGIN_S) * 1000LL);
	rock_engine_leave(e);
}

int
rock_ticket_share(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, struct rock_probe_ticket *out)
{
	struct rock_ticket_entry t;
	int64_t now = rock_ticket_now_ms();

	rock_engine_enter(e);
	if (!rock_ticket_find(e, addr, len, &t)) {
		rock_engine_leave(e);
		return 0;
	}
	rock_engine_leave(e);
	memcpy(out->ticket, t.ticket, ROCK_TICKET_LEN);
	memcpy(out->rms, t.rms, ROCK_KEY_LEN);
	memcpy(out->ident, t.ident, ROCK_IDENT_LEN);
	out->ttl_ms = t.expires_ms - now;
	out->chain_ms = t.origin_ms + ROCK_TICKET_CHAIN_S * 1000LL - now;
	rock_wipe(&t, sizeof(t));
	return 1;
}

void
rock_ticket_drop(struct rock_engine *e, const struct sockaddr *addr,
    socklen_t len, const uint8_t ticket[ROCK_TICKET_LEN])
{
	struct rock_ticket_entry *t = find(e, addr, len);

	/* Another connect may have stored a newer one meanwhile. */
	if (t != NULL && memcmp(t->ticket, ticket, ROCK_TICKET_LEN) == 0)
		rock_wipe(t, sizeof(*t));
}

void
rock_ticket_wipe_all(struct rock_engine *e)
{
	rock_wipe(e->ticket_keys, sizeof(e->ticket_keys));
	rock_wipe(e->tickets, sizeof(e->tickets));
}
