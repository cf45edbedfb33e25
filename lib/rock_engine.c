/* rock_engine.c: the engine object: settings, announcement, buffers, lifetime. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include "rock_engine_int.h"
#include "rock_err.h"
#include "rock_sys.h"

void
rock_engine_config_defaults(struct rock_engine_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->hb_interval_ms = 500;
	cfg->hb_timeout_ms = 2500;
	cfg->stall_ms = 10000;
	cfg->suspend_timeout_s = 3L * 24 * 3600;
	cfg->backoff_min_ms = 100;
	cfg->backoff_max_ms = 500;
	cfg->dial_timeout_ms = 2000;
	cfg->handshake_timeout_ms = 10000;
	cfg->early = 1;
	cfg->ring_cap = 0;
	cfg->ack_every = 256 * 1024;
	cfg->refusal_signs_per_s = 1000;
	cfg->workers = 1;
	cfg->udp_told = ROCK_UDP_OWN;
}

uint16_t
rock_udp_told(const struct rock_engine *e)
{
	return e->cfg.udp_told == ROCK_UDP_OWN ? e->udp_port :
	    (uint16_t)e->cfg.udp_told;
}

static uint16_t
features_offered(const struct rock_engine *e)
{
	return ROCK_FEAT_ALL | (e->cfg.strike != NULL ? ROCK_FEAT_EARLY : 0);
}

void
rock_announce_features(struct rock_engine *e)
{
	uint16_t f = features_offered(e);

	e->announcement[10] = (uint8_t)(f >> 8);
	e->announcement[11] = (uint8_t)f;
}

static void
make_announcement(struct rock_engine *e)
{
	struct rock_announce a;

	a.version_max = ROCK_VERSION;
	a.version_min = ROCK_VERSION;
	a.features = features_offered(e);
	if (e->cfg.announce_random != NULL)
		memcpy(a.random, e->cfg.announce_random, sizeof(a.random));
	else
		rock_random(a.random, sizeof(a.random));
	rock_announce_encode(&a, e->announcement);
}

/* The most the receiver may hold: autotuning grows SO_RCVBUF up to
 * tcp_rmem's maximum, so that is what a receiver reports. */
static uint32_t
rmem_max(void)
{
	unsigned long lo, def, hi = 0;
	FILE *f = fopen("/proc/sys/net/ipv4/tcp_rmem", "re");

	if (f != NULL) {
		if (fscanf(f, "%lu %lu %lu", &lo, &def, &hi) != 3)
			hi = 0;
		rock_sys.fclose(f);
	}
	if (hi == 0)
		hi = 6 * 1024 * 1024;	/* Linux's default when /proc says nothing */
	return hi > UINT32_MAX ? UINT32_MAX : (uint32_t)hi;
}

static int engine_new(struct rock_engine **out, struct event_base *base,
    const struct rock_log *log, const struct rock_engine_config *cfg,
    const struct sockaddr *udp_bind, socklen_t udp_bind_len, int udp_fd);

int
rock_engine_new(struct rock_engine **out, struct event_base *base,
    const struct rock_log *log, const struct rock_engine_config *cfg,
    const struct sockaddr *udp_bind, socklen_t udp_bind_len)
{
	return engine_new(out, base, log, cfg, udp_bind, udp_bind_len, -1);
}

int
rock_engine_new_adopt(struct rock_engine **out, struct event_base *base,
    const struct rock_log *log, const struct rock_engine_config *cfg,
    int udp_fd)
{
	return engine_new(out, base, log, cfg, NULL, 0, udp_fd);
}

static int
engine_new(struct rock_engine **out, struct event_base *base,
    const struct rock_log *log, const struct rock_engine_config *cfg,
    const struct sockaddr *udp_bind, socklen_t udp_bind_len, int udp_fd)
{
	struct rock_engine *e;
	int r;

	if ((r = rock_crypto_init()) != 0)
		return r;
	if ((e = calloc(1, sizeof(*e))) == NULL)
		return ROCK_ERR_NOMEM;
	e->base = base;
	e->log = log;
	e->stranger_log[ROCK_STRANGER_HANDSHAKE].what = "failed handshake";
	e->stranger_log[ROCK_STRANGER_RECONNECT].what = "refused reconnect";
	e->stranger_log[ROCK_STRANGER_REFUSAL].what = "refusal";
	e->stranger_log[ROCK_STRANGER_FORGED].what = "unsigned refusal";
	rock_identity_new(&e->ident);
	rock_known_memo_init(&e->known);
	rock_random(e->id_hash_key, sizeof(e->id_hash_key));
	e->udp_fd = e->nl_fd = -1;
	if (cfg != NULL)
		e->cfg = *cfg;
	else
		rock_engine_config_defaults(&e->cfg);
	make_announcement(e);
	e->rmem_max = rmem_max();
	r = udp_fd >= 0 ? rock_control_adopt(e, udp_fd) :
	    rock_control_open(e, udp_bind, udp_bind_len);
	if (r != 0) {
		if (udp_fd >= 0 && e->udp_fd == udp_fd)
			e->udp_fd = -1;		/* the caller's still */
		rock_engine_free(e);
		return r;
	}
	/* Without rtnetlink only the back-off timer drives reconnects. */
	if (rock_netlink_open(e) != 0)
		rlog_info(log, "no rtnetlink watch: reconnects wait for the back-off");
	*out = e;
	return 0;
}

void
rock_engine_keypair_take(struct rock_engine *e, struct rock_keypair *kp)
{
	if (!e->spare_ready) {
		rock_keypair_new(kp);
		return;
	}
	*kp = e->spare;
	rock_keypair_wipe(&e->spare);
	e->spare_ready = 0;
}

void
rock_engine_keypair_fill(struct rock_engine *e, int locked)
{
	struct rock_keypair kp;

	if (locked) {
		if (!e->spare_ready)
			rock_keypair_new(&e->spare);
		e->spare_ready = 1;
		return;
	}
	rock_engine_enter(e);
	if (e->spare_ready) {
		rock_engine_leave(e);
		return;
	}
	rock_engine_leave(e);
	/* The scalar multiplication outside the lock: the program's threads
	 * go on meanwhile. */
	rock_keypair_new(&kp);
	rock_engine_enter(e);
	if (!e->spare_ready) {
		e->spare = kp;
		e->spare_ready = 1;
	}
	rock_engine_leave(e);
	rock_keypair_wipe(&kp);
}

void
rock_engine_keypair_refill(struct rock_engine *e)
{
	rock_engine_keypair_fill(e, 0);
}

int
rock_engine_loop_owed(const struct rock_engine *e, const struct rock_session *s)
{
	return s == NULL || !rock_is_direct(s) || !e->spare_ready;
}

void
rock_engine_free(struct rock_engine *e)
{
	if (e == NULL)
		return;
	rock_keypair_wipe(&e->spare);
	while (e->all != NULL) {
		e->all->in_callback = 0;
		rock_session_free(e->all);
	}
	rock_early_free_all(e);
	rock_farewell_free_all(e);
	rock_drain_free_all(e);
	rock_netlink_close(e);
	rock_control_close(e);
	free(e->table);
	rock_identity_wipe(&e->ident);
	rock_known_memo_destroy(&e->known);
	rock_ticket_wipe_all(e);
	free(e);
}

void
rock_engine_forget_secrets(struct rock_engine *e)
{
	rock_keypair_wipe(&e->spare);
	e->spare_ready = 0;
	rock_ticket_wipe_all(e);
}

void
rock_engine_set_lock(struct rock_engine *e, void (*lock)(void *),
    void (*unlock)(void *), void *arg)
{
	e->lock = lock;
	e->unlock = unlock;
	e->lock_arg = arg;
}

void
rock_engine_set_identity(struct rock_engine *e, const struct rock_identity *id)
{
	e->ident = *id;
}

const uint8_t *
rock_engine_identity(const struct rock_engine *e)
{
	return e->ident.pk;
}

void
rock_engine_set_trust(struct rock_engine *e, const struct rock_trust *t)
{
	e->trust = *t;
}

void
rock_engine_set_suspend_timeout(struct rock_engine *e, long seconds)
{
	e->cfg.suspend_timeout_s = seconds;
}

/* An address's host part as 16 bytes (IPv4 as v4-mapped); -1 if neither. */
static int
host_of(const struct sockaddr *sa, uint8_t out[16])
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	if (sa->sa_family == AF_INET6) {
		memcpy(out, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
		return 0;
	}
	if (sa->sa_family != AF_INET)
		return -1;
	memcpy(out, mapped, sizeof(mapped));
	memcpy(out + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	return 0;
}

static int
same_host(const struct sockaddr *a, const struct sockaddr_storage *b)
{
	uint8_t x[16], y[16];

	return a != NULL && host_of(a, x) == 0 &&
	    host_of((const struct sockaddr *)b, y) == 0 && memcmp(x, y, 16) == 0;
}

/* Whether a goes before b (none yet: NULL): suspended before connected,
 * then the older one. */
static int
goes_before(const struct rock_session *a, const struct rock_session *b)
{
	int as, bs;

	if (b == NULL)
		return 1;
	as = a->state == ROCK_ST_SUSPENDED;
	bs = b->state == ROCK_ST_SUSPENDED;
	if (as != bs)
		return as;
	return as ? a->suspended_at_ms < b->suspended_at_ms :
	    a->connected_at_ms < b->connected_at_ms;
}

int
rock_engine_make_room(struct rock_engine *e, size_t max,
    const struct sockaddr *peer)
{
	struct rock_session *s, *stranger = NULL, *own = NULL, *victim;

	if (e->nsessions < max)
		return 0;
	for (s = e->all; s != NULL; s = s->next) {
		if (s->state == ROCK_ST_CLOSED)
			continue;
		if (!s->proven && goes_before(s, stranger))
			stranger = s;
		else if (s->proven && s->state == ROCK_ST_SUSPENDED &&
		    same_host(peer, &s->peer) &&
		    (own == NULL || s->suspended_at_ms < own->suspended_at_ms))
			own = s;
	}
	if ((victim = stranger != NULL ? stranger : own) == NULL)
		return -1;
	rlog_warn(e->log, "rock %s: %zu rocks, the limit: closing %s to make "
	    "room", victim->name, e->nsessions, victim == stranger ?
	    "one its client never proved" : "the newcomer's own suspended "
	    "longest");
	/* A connected victim's client hears a reset, not a FIN it could take
	 * for an end. */
	if (victim->fd >= 0)
		(void)rock_sys.setsockopt(victim->fd, SOL_SOCKET, SO_LINGER,
		    &(struct linger){ 1, 0 }, sizeof(struct linger));
	e->stats.evictions++;
	rock_session_close(victim, ROCK_ERR_TIMEOUT, "evicted to make room");
	return 0;
}

void
rock_engine_set_router(struct rock_engine *e, rock_route_fn route, void *arg)
{
	e->route = route;
	e->route_arg = arg;
}

void
rock_engine_set_stray(struct rock_engine *e, rock_stray_fn stray, void *arg)
{
	e->stray = stray;
	e->stray_arg = arg;
}

void
rock_engine_set_node_watch(struct rock_engine *e, rock_node_gone_fn gone,
    void *arg)
{
	e->node_gone = gone;
	e->node_gone_arg = arg;
}

const uint8_t *
rock_engine_announcement(const struct rock_engine *e)
{
	return e->announcement;
}

size_t
rock_engine_nsessions(const struct rock_engine *e)
{
	return e->nsessions;
}

size_t
rock_engine_nhandshakes(const struct rock_engine *e)
{
	return e->nhandshakes;
}

size_t
rock_engine_nfarewells(const struct rock_engine *e)
{
	return e->nfarewells;
}

#define SESSION_FDS_MAX (3 + ROCK_DIAL_ATTEMPTS)

/* The session's descriptors, into fds; how many. */
static int
session_fds(const struct rock_session *s, int fds[SESSION_FDS_MAX])
{
	int n = 0, i;

	if (s->fd >= 0)
		fds[n++] = s->fd;
	if (s->replay_fd >= 0)
		fds[n++] = s->replay_fd;
	if (rock_status_fd(s) >= 0)
		fds[n++] = rock_status_fd(s);
	for (i = 0; s->dial != NULL && i < ROCK_DIAL_ATTEMPTS; i++)
		if (s->dial->a[i].fd >= 0)
			fds[n++] = s->dial->a[i].fd;
	return n;
}

static int
session_owns_fd(const struct rock_session *s, int fd)
{
	int fds[SESSION_FDS_MAX], n = session_fds(s, fds), i;

	for (i = 0; i < n; i++)
		if (fds[i] == fd)
			return 1;
	return 0;
}

int
rock_engine_owns_fd(const struct rock_engine *e, int fd)
{
	const struct rock_session *s;

	if (fd < 0)
		return 0;
	if (fd == e->udp_fd || fd == e->nl_fd)
		return 1;
	for (s = e->all; s != NULL; s = s->next)
		if (session_owns_fd(s, fd))
			return 1;
	return rock_drain_owns_fd(e, fd) || rock_early_owns_fd(e, fd);
}

void
rock_engine_close_fds(const struct rock_engine *e, int (*close_fn)(int))
{
	const struct rock_session *s;
	int fds[SESSION_FDS_MAX], n, i;

	if (e->udp_fd >= 0)
		close_fn(e->udp_fd);
	if (e->nl_fd >= 0)
		close_fn(e->nl_fd);
	for (s = e->all; s != NULL; s = s->next)
		for (n = session_fds(s, fds), i = 0; i < n; i++)
			close_fn(fds[i]);
	rock_drain_close_fds(e, close_fn);
	rock_early_close_fds(e, close_fn);
}

const struct rock_engine_stats *
rock_engine_stats(const struct rock_engine *e)
{
	return &e->stats;
}

struct rock_log_limit *
rock_engine_stranger_log(struct rock_engine *e, enum rock_stranger kind)
{
	return &e->stranger_log[kind];
}

void
rock_socket_buffers(const struct rock_engine *e, int fd, uint32_t *rcvbuf,
    uint32_t *sndbuf)
{
	int r = 0;
	socklen_t len = sizeof(r);
	uint32_t max = e->rmem_max;

	rock_sys.getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &r, &len);
	*rcvbuf = (uint32_t)r > max ? (uint32_t)r : max;
	*sndbuf = rock_socket_sndbuf(fd);
}

uint32_t
rock_socket_sndbuf(int fd)
{
	int s = 0;
	socklen_t len = sizeof(s);

	rock_sys.getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &s, &len);
	return (uint32_t)s;
}

void
rock_socket_buffers_new(struct rock_engine *e, int fd, uint32_t *rcvbuf,
    uint32_t *sndbuf)
{
	uint64_t v = __atomic_load_n(&e->new_buffers, __ATOMIC_RELAXED);

	if (v == 0) {
		rock_socket_buffers(e, fd, rcvbuf, sndbuf);
		v = (uint64_t)*rcvbuf << 32 | *sndbuf;
		__atomic_store_n(&e->new_buffers, v, __ATOMIC_RELAXED);
		return;
	}
	*rcvbuf = (uint32_t)(v >> 32);
	*sndbuf = (uint32_t)v;
}

/* Bytes not consumed by the peer's application can be no more than our
 * send buffer plus its receive buffer (plus one write's overshoot): older
 * bytes are known consumed even when no ack can arrive. */
uint64_t
rock_tcp_bound(uint32_t own_sndbuf, uint32_t peer_rcvbuf)
{
	return (uint64_t)own_sndbuf + peer_rcvbuf + 256 * 1024;
}

size_t
rock_ring_cap_for(const struct rock_engine *e, uint32_t own_sndbuf,
    uint32_t peer_rcvbuf)
{
	if (e->cfg.ring_cap > 0)
		return e->cfg.ring_cap;
	return (size_t)rock_tcp_bound(own_sndbuf, peer_rcvbuf) +
	    4 * (size_t)e->cfg.ack_every;
}
