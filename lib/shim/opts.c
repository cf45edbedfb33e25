/* opts.c: the socket options a program set that a rock's data connections do not simply inherit. */
#include "config.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <errno.h>
#include <string.h>

#include "shim.h"

#define KA_BITS (ROCK_KA_KEEPALIVE | ROCK_KA_IDLE | ROCK_KA_INTVL | ROCK_KA_CNT)

/* The option's bit in shim_opts.set, its place in the record. */
struct opt_slot {
	unsigned bit;
	void *p;
	socklen_t size;
};

static int
slot_of(struct shim_opts *o, int level, int opt, struct opt_slot *slot)
{
	unsigned bit = rock_ka_opt_of(level, opt);
	int *ints[] = { &o->ka.on, &o->ka.idle, &o->ka.intvl, &o->ka.cnt,
	    &o->user_timeout };
	int i;

	for (i = 0; i < 5; i++)
		if (bit == 1u << i) {
			*slot = (struct opt_slot){ bit, ints[i], sizeof(int) };
			return 1;
		}
	if (level == IPPROTO_TCP && opt == TCP_RTO_MAX_MS && o->rto_max >= 0) {
		*slot = (struct opt_slot){ SHIM_OPT_RTO_MAX, &o->rto_max,
		    sizeof(int) };
		return 1;
	}
	if (level != SOL_SOCKET)
		return 0;
	if (opt == SO_LINGER)
		*slot = (struct opt_slot){ SHIM_OPT_LINGER, &o->linger,
		    sizeof(o->linger) };
	else if (opt == SO_SNDBUF)
		*slot = (struct opt_slot){ SHIM_OPT_SNDBUF, &o->sndbuf, sizeof(int) };
	else if (opt == SO_RCVBUF)
		*slot = (struct opt_slot){ SHIM_OPT_RCVBUF, &o->rcvbuf, sizeof(int) };
	else
		return 0;
	return 1;
}

/* The engine merges the program's keepalive with its backstop
 * (rock_keepalive_merge); its own setsockopt must not come back here. */
static void
tell_engine(struct shim_rock *r)
{
	int busy = shim_busy;

	if (!(r->opts.set & KA_BITS) || r->s == NULL)
		return;
	shim_busy = 1;
	rock_direct_keepalive(r->s, &r->opts.ka);
	shim_busy = busy;
}

int
shim_getsockopt_int(int fd, int level, int opt)
{
	int v = 0;
	socklen_t len = sizeof(v);

	(void)shim_real.getsockopt(fd, level, opt, &v, &len);
	return v;
}

/* The kernel doubled the size the program asked for, and takes half
 * back the same. */
static void
capture_buffers(struct shim_opts *o, int fd, unsigned set)
{
	if (set & SHIM_FD_SNDBUF_SET) {
		o->sndbuf = shim_getsockopt_int(fd, SOL_SOCKET, SO_SNDBUF) / 2;
		o->set |= SHIM_OPT_SNDBUF;
	}
	if (set & SHIM_FD_RCVBUF_SET) {
		o->rcvbuf = shim_getsockopt_int(fd, SOL_SOCKET, SO_RCVBUF) / 2;
		o->set |= SHIM_OPT_RCVBUF;
	}
}

/* What a socket born under our socket() says of the recorded options
 * when the program set none of them (only our baseline keepalive and
 * the kernel's defaults): the same for each such socket of the process,
 * so read from the first only. Under shim_lock(). */
static struct {
	int known;
	struct shim_opts opts;
} born_defaults;

static int
only_defaults(unsigned set)
{
	return (set & SHIM_FD_BORN) &&
	    !(set & (KA_BITS | ROCK_KA_USER_TIMEOUT | SHIM_FD_OTHER_SET));
}

static void read_recorded(struct shim_opts *o, int fd);

/* A socket born here with nothing set but what the kernel defaults and
 * a rock's new connection share: nothing to copy to it. */
int
shim_opts_copy_needed(unsigned entry)
{
	return !(entry & SHIM_FD_BORN) || (entry & SHIM_FD_OTHER_SET);
}

/* Lock held. */
void
shim_opts_capture(struct shim_rock *r, int fd, unsigned set)
{
	struct shim_opts *o = &r->opts;

	if (only_defaults(set) && born_defaults.known) {
		*o = born_defaults.opts;
	} else {
		read_recorded(o, fd);
		if (only_defaults(set)) {
			born_defaults.opts = *o;
			born_defaults.known = 1;
		}
	}
	o->set = set & (KA_BITS | ROCK_KA_USER_TIMEOUT);
	if (o->linger.l_onoff)
		o->set |= SHIM_OPT_LINGER;
	capture_buffers(o, fd, set);
	tell_engine(r);
}

/* The program's view of the options the engine sets its own way on the
 * data connection: keepalive, user timeout, RTO bound, linger. */
static void
read_recorded(struct shim_opts *o, int fd)
{
	socklen_t len;

	memset(o, 0, sizeof(*o));
	o->ka.on = shim_getsockopt_int(fd, SOL_SOCKET, SO_KEEPALIVE) != 0;
	o->ka.idle = shim_getsockopt_int(fd, IPPROTO_TCP, TCP_KEEPIDLE);
	o->ka.intvl = shim_getsockopt_int(fd, IPPROTO_TCP, TCP_KEEPINTVL);
	o->ka.cnt = shim_getsockopt_int(fd, IPPROTO_TCP, TCP_KEEPCNT);
	o->user_timeout = shim_getsockopt_int(fd, IPPROTO_TCP,
	    TCP_USER_TIMEOUT);
	len = sizeof(o->rto_max);
	if (shim_real.getsockopt(fd, IPPROTO_TCP, TCP_RTO_MAX_MS, &o->rto_max,
	    &len) != 0)
		o->rto_max = -1;
	len = sizeof(o->linger);
	if (shim_real.getsockopt(fd, SOL_SOCKET, SO_LINGER, &o->linger, &len) != 0)
		memset(&o->linger, 0, sizeof(o->linger));
}

void
shim_opts_apply(const struct shim_rock *r, int fd)
{
	if (r->opts.set & SHIM_OPT_SNDBUF)
		(void)shim_real.setsockopt(fd, SOL_SOCKET, SO_SNDBUF,
		    &r->opts.sndbuf, sizeof(int));
	if (r->opts.set & SHIM_OPT_RCVBUF)
		(void)shim_real.setsockopt(fd, SOL_SOCKET, SO_RCVBUF,
		    &r->opts.rcvbuf, sizeof(int));
}

/* What the kernel says of a value for a recorded-only option. */
static int
recorded_valid(const struct opt_slot *slot, const void *val, socklen_t len)
{
	int v;

	if (len < slot->size)
		return 0;
	if (slot->bit == SHIM_OPT_LINGER)
		return 1;
	memcpy(&v, val, sizeof(v));
	if (slot->bit == SHIM_OPT_RTO_MAX)
		return v >= ROCK_TCP_RTO_MAX_LOW_MS && v <= ROCK_TCP_RTO_MAX_HIGH_MS;
	return v >= 0;	/* TCP_USER_TIMEOUT */
}

/* The kernel checks keepalive and buffer values on the data connection
 * (the engine then puts its merge back); a user timeout, a linger and a
 * retransmission bound are only recorded, checked as the kernel would:
 * the data connection's are the engine's (its RTO bound, doc/paths.md). */
static int
set_slot(struct shim_rock *r, int fd, int level, int opt,
    const void *val, socklen_t len, const struct opt_slot *slot)
{
	if (slot->bit == ROCK_KA_USER_TIMEOUT || slot->bit == SHIM_OPT_LINGER ||
	    slot->bit == SHIM_OPT_RTO_MAX) {
		if (!recorded_valid(slot, val, len)) {
			errno = EINVAL;
			return -1;
		}
	} else if (shim_real.setsockopt(fd, level, opt, val, len) != 0) {
		return -1;
	}
	memcpy(slot->p, val, slot->size);
	if (slot->bit == ROCK_KA_KEEPALIVE)
		r->opts.ka.on = r->opts.ka.on != 0;
	r->opts.set |= slot->bit;
	if (slot->bit & KA_BITS)
		tell_engine(r);
	return 0;
}

/* A rock with its data connection in place: the engine's, not the
 * program's socket any more. Lock held. A connect() that returned before
 * its handshake was over (connect.c) is waited for first, so an option
 * is the rock's and a call that goes on to the kernel finds the data
 * connection under fd. */
static struct shim_rock *
installed(int fd)
{
	struct shim_rock *r;

	shim_rock_settle_locked(fd);
	r = shim_rock_of(fd);

	return r != NULL && r->s != NULL && !r->connecting ? r : NULL;
}

int
shim_opts_set(int fd, int level, int opt, const void *val, socklen_t len,
    int *ret)
{
	struct opt_slot slot;
	struct shim_rock *r;
	int done = 0;

	if (val == NULL)
		return 0;
	shim_lock();
	if ((r = installed(fd)) != NULL && slot_of(&r->opts, level, opt, &slot)) {
		*ret = set_slot(r, fd, level, opt, val, len, &slot);
		done = 1;
	}
	shim_unlock();
	return done;
}

/* Keepalive, user timeout and linger: what the program's own socket said
 * at connect and what it set since, never the engine's values; buffer
 * sizes: the data connection's, which has the program's. */
int
shim_opts_get(int fd, int level, int opt, void *val, socklen_t *len)
{
	struct opt_slot slot;
	struct shim_rock *r;
	int done = 0;

	if (val == NULL || len == NULL)
		return 0;
	shim_lock();
	if ((r = installed(fd)) != NULL && slot_of(&r->opts, level, opt, &slot) &&
	    slot.bit != SHIM_OPT_SNDBUF && slot.bit != SHIM_OPT_RCVBUF) {
		if (*len > slot.size)
			*len = slot.size;
		memcpy(val, slot.p, *len);
		done = 1;
	}
	shim_unlock();
	return done;
}
