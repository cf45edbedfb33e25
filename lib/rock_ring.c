/* rock_ring.c: the in-flight ring of a reliable socket. */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rock_err.h"
#include "rock_ring.h"

/* Small enough that a quiet connection costs little once it sends at all. */
#define RING_MIN_SIZE	((size_t)4096)

/*
 * Our own invariants. Breaking one is a bug here, and carrying on would
 * replay wrong bytes into someone's stream, so stop; unlike assert() this
 * check survives NDEBUG. Peer input never reaches it: it is validated first.
 */
static void
ring_check(const struct rock_ring *r)
{
	if (r->len > r->cap || r->len > r->size ||
	    (r->size == 0) != (r->buf == NULL) ||
	    (r->size == 0 && r->head != 0) ||
	    (r->size > 0 && r->head >= r->size) ||
	    (r->size & (r->size - 1)) != 0 ||
	    r->len > UINT64_MAX - r->base)
		abort();
}

/* The largest storage the ring may use: cap rounded up to a power of two. */
static size_t
ring_limit(size_t cap)
{
	size_t s = 1;

	while (s < cap)
		s <<= 1;
	return s;
}

static size_t
ring_min_size(const struct rock_ring *r)
{
	size_t limit = ring_limit(r->cap);

	return limit < RING_MIN_SIZE ? limit : RING_MIN_SIZE;
}

/* Move the bytes held into fresh storage of `size`, starting at index 0. */
static int
ring_relocate(struct rock_ring *r, size_t size)
{
	unsigned char *buf;
	size_t first;

	if ((buf = malloc(size)) == NULL)
		return ROCK_ERR_NOMEM;
	if (r->len > 0) {
		first = r->size - r->head;
		if (first > r->len)
			first = r->len;
		memcpy(buf, r->buf + r->head, first);
		memcpy(buf + first, r->buf, r->len - first);
	}
	free(r->buf);
	r->buf = buf;
	r->size = size;
	r->head = 0;
	return 0;
}

/* Make room for n more bytes; the caller checked n against the cap. */
static int
ring_reserve(struct rock_ring *r, size_t n)
{
	size_t need = r->len + n, size;

	if (need <= r->size)
		return 0;
	size = r->size > 0 ? r->size : ring_min_size(r);
	/* need <= cap <= ring_limit(cap), so this stops without overflow. */
	while (size < need)
		size <<= 1;
	return ring_relocate(r, size);
}

/* n more bytes held behind the tail. */
static void
ring_held(struct rock_ring *r, size_t n)
{
	r->len += n;
	if (r->len > r->peak)
		r->peak = r->len;
}

/* Copy n bytes behind the tail; ring_reserve made room for them. */
static void
ring_put(struct rock_ring *r, const void *p, size_t n)
{
	size_t tail, first;

	if (n == 0)
		return;
	tail = (r->head + r->len) & (r->size - 1);
	first = r->size - tail;
	if (first > n)
		first = n;
	memcpy(r->buf + tail, p, first);
	memcpy(r->buf, (const unsigned char *)p + first, n - first);
	ring_held(r, n);
}

/* n > 0 bytes of storage from index start on, across its end if need
 * be, as 1-2 segments; returns how many. */
static int
ring_segments(const struct rock_ring *r, size_t start, size_t n,
    struct iovec iov[2])
{
	size_t first = r->size - start;

	if (first > n)
		first = n;
	iov[0].iov_base = r->buf + start;
	iov[0].iov_len = first;
	if (n == first)
		return 1;
	iov[1].iov_base = r->buf;
	iov[1].iov_len = n - first;
	return 2;
}

/* The checks an append of n bytes must pass before anything is touched. */
static int
ring_admit(const struct rock_ring *r, size_t n)
{
	if (n > r->cap - r->len)
		return ROCK_ERR_FULL;
	if (n > UINT64_MAX - (r->base + r->len))
		return ROCK_ERR_TOO_LARGE;
	return 0;
}

int
rock_ring_init(struct rock_ring *r, size_t cap, uint64_t start)
{
	memset(r, 0, sizeof(*r));
	if (cap < 1 || cap > SIZE_MAX / 2 + 1)
		return ROCK_ERR_INVALID;
	r->cap = cap;
	r->base = start;
	return 0;
}

void
rock_ring_free(struct rock_ring *r)
{
	free(r->buf);
	memset(r, 0, sizeof(*r));
}

size_t
rock_ring_space(const struct rock_ring *r)
{
	return r->cap - r->len;
}

uint64_t
rock_ring_base(const struct rock_ring *r)
{
	return r->base;
}

uint64_t
rock_ring_end(const struct rock_ring *r)
{
	return r->base + r->len;
}

size_t
rock_ring_used(const struct rock_ring *r)
{
	return r->len;
}

size_t
rock_ring_memory(const struct rock_ring *r)
{
	return r->size;
}

int
rock_ring_append(struct rock_ring *r, const void *p, size_t n)
{
	/* iovec's base is not const; appendv only reads through it. */
	struct iovec one = { (void *)(uintptr_t)p, n };

	return rock_ring_appendv(r, &one, 1, n);
}

int
rock_ring_appendv(struct rock_ring *r, const struct iovec *iov, int iovcnt,
    size_t n)
{
	size_t have = 0, left, take;
	int i, ret;

	ring_check(r);
	if (iovcnt < 0)
		return ROCK_ERR_INVALID;
	for (i = 0; i < iovcnt && have < n; i++)
		have += iov[i].iov_len < n - have ? iov[i].iov_len : n - have;
	if (have < n)
		return ROCK_ERR_INVALID;
	if (n == 0)
		return 0;
	if ((ret = ring_admit(r, n)) != 0)
		return ret;
	if ((ret = ring_reserve(r, n)) != 0)
		return ret;
	for (i = 0, left = n; left > 0; i++) {
		take = iov[i].iov_len < left ? iov[i].iov_len : left;
		ring_put(r, iov[i].iov_base, take);
		left -= take;
	}
	ring_check(r);
	return 0;
}

int
rock_ring_tail(struct rock_ring *r, size_t n, struct iovec iov[2], int *iovcnt)
{
	int ret;

	ring_check(r);
	*iovcnt = 0;
	if (n == 0)
		return ROCK_ERR_INVALID;
	if ((ret = ring_admit(r, n)) != 0)
		return ret;
	if ((ret = ring_reserve(r, n)) != 0)
		return ret;
	*iovcnt = ring_segments(r, (r->head + r->len) & (r->size - 1), n, iov);
	return 0;
}

int
rock_ring_commit(struct rock_ring *r, size_t n)
{
	int ret;

	ring_check(r);
	if ((ret = ring_admit(r, n)) != 0)
		return ret;
	if (n > r->size - r->len)
		return ROCK_ERR_INVALID;
	ring_held(r, n);
	ring_check(r);
	return 0;
}

int
rock_ring_ack(struct rock_ring *r, uint64_t consumed)
{
	size_t drop;

	ring_check(r);
	/* Acks may overtake each other across a reconnect: an old one is news
	 * to nobody. */
	if (consumed < r->base)
		return 0;
	if (consumed - r->base > r->len)
		return ROCK_ERR_PROTOCOL;
	drop = (size_t)(consumed - r->base);
	if (drop == 0)
		return 0;
	r->len -= drop;
	/* Emptied: the next append starts at index 0, unwrapped, as it did
	 * when an empty ring had no storage. */
	r->head = r->len == 0 ? 0 : (r->head + drop) & (r->size - 1);
	r->base = consumed;
	ring_check(r);
	return 0;
}

/*
 * Off the data path: an ack never resizes, or a ring that empties and
 * refills at full speed would free and regrow its storage every round.
 */
void
rock_ring_compact(struct rock_ring *r)
{
	size_t min, size, used;

	ring_check(r);
	/* Sized by what the last interval needed, not by this instant: a
	 * stream's ring empties at every ack, and storage freed then is
	 * malloc'ed and first-touched again at the next write (8,300 page
	 * faults, 13 % of a client's time, in 160 MB of 4 KiB writes). */
	used = r->peak > r->len ? r->peak : r->len;
	r->peak = r->len;
	if (used == 0) {
		free(r->buf);
		r->buf = NULL;
		r->size = 0;
		r->head = 0;
		return;
	}
	min = ring_min_size(r);
	size = r->size;
	while (size / 2 >= min && used < size / 4)
		size /= 2;
	/* Shrinking only saves memory: if it fails, keep the larger buffer. */
	if (size != r->size)
		(void)ring_relocate(r, size);
	ring_check(r);
}

int
rock_ring_peek(const struct rock_ring *r, uint64_t from, struct iovec iov[2],
    int *iovcnt)
{
	size_t off, n;

	ring_check(r);
	if (from < r->base)
		return ROCK_ERR_LOST;
	if (from - r->base > r->len)
		return ROCK_ERR_PROTOCOL;
	off = (size_t)(from - r->base);
	n = r->len - off;
	*iovcnt = 0;
	if (n == 0)
		return 0;
	*iovcnt = ring_segments(r, (r->head + off) & (r->size - 1), n, iov);
	return 0;
}
