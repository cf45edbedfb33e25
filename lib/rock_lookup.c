/* rock_lookup.c: a reconnecting rock looks its server's name up again, off the loop, and dials what it gets, families interleaved. */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "rock_engine_int.h"
#include "rock_err.h"
#include "rock_names.h"
#include "rock_sys.h"

#define ROCK_CANDIDATES 8	/* addresses dialled in turn, the old one last */
#define LOOKUP_AFTER_MS 1000	/* redialing unanswered this long: look up */

/* One getaddrinfo on a thread of its own: resolvers (DNS over a dead
 * path) can block for many seconds, and the loop must not. The thread
 * and the session each hold a reference; the last to let go frees it. */
struct rock_lookup {
	int refs;
	int done;			/* release: the results below are written */
	int efd;			/* the thread's "done" for the loop */
	struct event *ev;
	struct rock_session *s;
	char name[ROCK_NAME_MAX + 1];
	int r;				/* getaddrinfo's */
	size_t n;
	struct sockaddr_storage addr[ROCK_CANDIDATES];
	socklen_t len[ROCK_CANDIDATES];
};

struct rock_named {
	char name[ROCK_NAME_MAX + 1];
	struct rock_lookup *lookup;	/* in flight; NULL: none */
	int64_t looked_ms;		/* the last one started */
	struct sockaddr_storage cand[ROCK_CANDIDATES];
	socklen_t cand_len[ROCK_CANDIDATES];
	unsigned ncand, next;
};

static void
lookup_unref(struct rock_lookup *lk)
{
	if (__atomic_sub_fetch(&lk->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	rock_sys.close(lk->efd);
	free(lk);
}

/* Distinct IPv4 and IPv6 addresses, in getaddrinfo's order (RFC 6724's). */
static void
lookup_collect(struct rock_lookup *lk, const struct addrinfo *res)
{
	struct sockaddr_storage key;
	socklen_t len;
	size_t i;

	for (; res != NULL && lk->n < ROCK_CANDIDATES; res = res->ai_next) {
		if (rock_names_key(res->ai_addr, res->ai_addrlen, &key, &len) != 0)
			continue;
		for (i = 0; i < lk->n; i++)
			if (lk->len[i] == len && memcmp(&lk->addr[i], &key, len) == 0)
				break;
		if (i < lk->n)
			continue;
		lk->addr[lk->n] = key;
		lk->len[lk->n++] = len;
	}
}

static void *
lookup_main(void *arg)
{
	struct rock_lookup *lk = arg;
	struct addrinfo hints, *res = NULL;
	uint64_t one = 1;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_ADDRCONFIG;
	lk->r = rock_sys.getaddrinfo(lk->name, NULL, &hints, &res);
	if (lk->r == 0)
		lookup_collect(lk, res);
	if (res != NULL)
		freeaddrinfo(res);
	__atomic_store_n(&lk->done, 1, __ATOMIC_RELEASE);
	(void)!rock_sys.write(lk->efd, &one, sizeof(one));
	lookup_unref(lk);
	return NULL;
}

static uint16_t
port_of(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET6 ?
	    ((const struct sockaddr_in6 *)ss)->sin6_port :
	    ((const struct sockaddr_in *)ss)->sin_port;
}

static void
set_port(struct sockaddr_storage *ss, uint16_t port)
{
	if (ss->ss_family == AF_INET6)
		((struct sockaddr_in6 *)ss)->sin6_port = port;
	else
		((struct sockaddr_in *)ss)->sin_port = port;
}

static int
has_cand(const struct rock_named *nm, const struct sockaddr_storage *a,
    socklen_t len)
{
	unsigned i;

	for (i = 0; i < nm->ncand; i++)
		if (nm->cand_len[i] == len && memcmp(&nm->cand[i], a, len) == 0)
			return 1;
	return 0;
}

static void
add_cand(struct rock_named *nm, const struct sockaddr_storage *a,
    socklen_t len, uint16_t port)
{
	if (nm->ncand >= ROCK_CANDIDATES)
		return;
	nm->cand[nm->ncand] = *a;
	set_port(&nm->cand[nm->ncand], port);
	if (has_cand(nm, &nm->cand[nm->ncand], len))
		return;
	nm->cand_len[nm->ncand++] = len;
}

/* RFC 8305 section 4: the first address's family first, then the other,
 * alternating; the address the rock had goes last (a path that only
 * failed comes back there). 1: the answer names an address that is new. */
static int
take_answer(struct rock_session *s, const struct rock_lookup *lk)
{
	struct rock_named *nm = s->named;
	uint16_t port = port_of(&s->peer);
	size_t i[2] = { 0, 0 };
	int fam[2], turn = 0;

	nm->ncand = nm->next = 0;
	fam[0] = lk->addr[0].ss_family;
	fam[1] = fam[0] == AF_INET ? AF_INET6 : AF_INET;
	while (i[0] < lk->n || i[1] < lk->n) {
		size_t *k = &i[turn];

		while (*k < lk->n && lk->addr[*k].ss_family != fam[turn])
			(*k)++;
		if (*k < lk->n) {
			add_cand(nm, &lk->addr[*k], lk->len[*k], port);
			(*k)++;
		}
		turn = !turn;
	}
	if (!has_cand(nm, &s->peer, s->peer_len))
		add_cand(nm, &s->peer, s->peer_len, port);
	return nm->ncand > 1 || !has_cand(nm, &s->peer, s->peer_len);
}

static void
lookup_finish(struct rock_session *s)
{
	struct rock_lookup *lk = s->named->lookup;

	s->named->lookup = NULL;
	if (lk->ev != NULL)
		event_free(lk->ev);
	lk->ev = NULL;
	lookup_unref(lk);
}

static void
on_lookup(evutil_socket_t fd, short what, void *arg)
{
	struct rock_lookup *lk = arg;
	struct rock_session *s = lk->s;
	struct rock_engine *e = s->e;
	int fresh;

	(void)fd;
	(void)what;
	rock_engine_enter(e);
	if (!__atomic_load_n(&lk->done, __ATOMIC_ACQUIRE)) {
		rock_engine_leave(e);
		return;
	}
	rock_session_hold(s);
	if (lk->r != 0 || lk->n == 0) {
		rlog_info(e->log, "rock %s: looking %s up again: %s", s->name,
		    lk->name, lk->r != 0 ? gai_strerror(lk->r) : "no address");
	} else if ((fresh = take_answer(s, lk)) != 0) {
		rlog_info(e->log, "rock %s: %s now resolves to %zu address%s; "
		    "dialing them", s->name, lk->name, lk->n, lk->n == 1 ? "" : "es");
		rock_dial_addresses_changed(s);
	}
	lookup_finish(s);
	rock_session_release(s);
	rock_engine_leave(e);
}

/* A lookup thread with every signal blocked: the program's handlers run
 * on its own threads only. */
static int
lookup_spawn(struct rock_lookup *lk)
{
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &attr, lookup_main, lk);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

static void
lookup_start(struct rock_session *s)
{
	struct rock_named *nm = s->named;
	struct rock_lookup *lk = calloc(1, sizeof(*lk));

	if (lk == NULL)
		return;
	lk->refs = 2;
	lk->s = s;
	memcpy(lk->name, nm->name, sizeof(lk->name));
	if ((lk->efd = rock_sys_aside(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC))) < 0) {
		free(lk);
		return;
	}
	if ((lk->ev = event_new(s->e->base, lk->efd, EV_READ | EV_PERSIST,
	    on_lookup, lk)) == NULL || event_add(lk->ev, NULL) != 0) {
		if (lk->ev != NULL)
			event_free(lk->ev);
		rock_sys.close(lk->efd);
		free(lk);
		return;
	}
	nm->lookup = lk;
	nm->looked_ms = rock_now_ms();
	rlog_debug(s->e->log, "rock %s: looking %s up again", s->name, nm->name);
	if (lookup_spawn(lk) != 0) {
		lk->refs = 1;
		lookup_finish(s);
	}
}

/* Once a second for the first half minute of an outage, then doubling
 * to about a minute: a long outage costs the resolver little. */
static int
lookup_period_ms(const struct rock_session *s)
{
	int64_t down = rock_now_ms() - s->suspended_at_ms - 30000;
	int ms = 1000;

	for (; down > 0 && ms < 60000; down -= 30000)
		ms *= 2;
	return ms;
}

void
rock_lookup_maybe(struct rock_session *s, int failed)
{
	struct rock_named *nm = s->named;
	int64_t now = rock_now_ms();

	if (nm == NULL || nm->lookup != NULL || s->state != ROCK_ST_SUSPENDED)
		return;
	if (!failed && now - s->suspended_at_ms < LOOKUP_AFTER_MS)
		return;
	if (nm->looked_ms != 0 && now - nm->looked_ms < lookup_period_ms(s))
		return;
	lookup_start(s);
}

void
rock_lookup_next(struct rock_session *s, struct sockaddr_storage *addr,
    socklen_t *len)
{
	struct rock_named *nm = s->named;
	unsigned i;

	if (nm == NULL || nm->ncand == 0) {
		*addr = s->peer;
		*len = s->peer_len;
		return;
	}
	i = nm->next++ % nm->ncand;
	*addr = nm->cand[i];
	*len = nm->cand_len[i];
}

void
rock_lookup_cancel(struct rock_session *s)
{
	if (s->named != NULL && s->named->lookup != NULL)
		lookup_finish(s);
}

void
rock_lookup_free(struct rock_session *s)
{
	rock_lookup_cancel(s);
	free(s->named);
	s->named = NULL;
}

int
rock_session_set_name(struct rock_session *s, const char *name)
{
	size_t n = strlen(name);

	if (s->role != ROCK_ROLE_CLIENT || n == 0 || n > ROCK_NAME_MAX)
		return ROCK_ERR_INVALID;
	if (s->named == NULL && (s->named = calloc(1, sizeof(*s->named))) == NULL)
		return ROCK_ERR_NOMEM;
	memcpy(s->named->name, name, n + 1);
	return 0;
}

const char *
rock_session_host(const struct rock_session *s)
{
	return s->named != NULL ? s->named->name : NULL;
}

void
rock_lookup_settle(struct rock_session *s)
{
	if (s->named == NULL)
		return;
	s->named->ncand = s->named->next = 0;
	s->named->looked_ms = 0;
}
