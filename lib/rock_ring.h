/* rock_ring.h: the in-flight ring: sent bytes kept until the peer consumed. */
#ifndef ROCK_RING_H
#define ROCK_RING_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/*
 * Every byte the kernel took from the application is kept here, addressed
 * by its absolute stream offset (0 = the first byte ever sent), until the
 * peer acknowledges that its application consumed it; after a reconnect
 * the bytes from the peer's consumed offset on are replayed.
 *
 * `cap` bounds the bytes held, so a full ring acts like a full socket
 * buffer: callers write at most rock_ring_space() bytes to the kernel.
 * Storage grows on demand in powers of two. Acks never resize it, so a
 * ring that empties and refills at full speed keeps its buffer instead of
 * freeing and regrowing it every round; rock_ring_compact(), run from a
 * timer, halves it when under a quarter used and releases it when empty,
 * so an idle connection holds no buffer at all once compacted.
 *
 * Errors: an ack or replay offset comes from the peer, so a bad one is an
 * error return (PROTOCOL, LOST) that leaves the ring unchanged, never an
 * abort. A failed append changes nothing either. rock_ring_init refuses
 * cap > SIZE_MAX / 2 + 1 (its storage size would overflow); appends that
 * would carry offsets past 2^64 - 1 fail with ROCK_ERR_TOO_LARGE; appendv
 * with n above the iovec's total or iovcnt < 0 is ROCK_ERR_INVALID.
 *
 * The fields are private; they are here only so the ring can be embedded.
 */
struct rock_ring {
	unsigned char *buf;	/* storage, NULL when released */
	size_t size;		/* bytes of storage: 0 or a power of two */
	size_t head;		/* index of the byte at offset `base` */
	size_t len;		/* bytes held */
	size_t cap;		/* hard cap on len */
	size_t peak;		/* most held since the last compaction */
	uint64_t base;		/* stream offset of the oldest byte held */
};

/* Empty ring, next byte at `start`; ROCK_ERR_INVALID unless cap >= 1. */
int rock_ring_init(struct rock_ring *r, size_t cap, uint64_t start);

/* Release the storage; initialise the ring again before reusing it. */
void rock_ring_free(struct rock_ring *r);

/* Bytes that can be appended now: cap - used. */
size_t rock_ring_space(const struct rock_ring *r);

/* Stream offset of the oldest byte held (the peer's consumed offset). */
uint64_t rock_ring_base(const struct rock_ring *r);

/* Stream offset of the next byte to be appended: base + used. */
uint64_t rock_ring_end(const struct rock_ring *r);

/* Bytes held: sent, not yet acknowledged as consumed. */
size_t rock_ring_used(const struct rock_ring *r);

/* Bytes of storage allocated now; 0 for an idle ring once compacted. */
size_t rock_ring_memory(const struct rock_ring *r);

/* Append all n bytes or none; ROCK_ERR_FULL if n > space, or NOMEM. */
int rock_ring_append(struct rock_ring *r, const void *p, size_t n);

/* Append the first n bytes of the iovec, those writev() took; as above. */
int rock_ring_appendv(struct rock_ring *r, const struct iovec *iov, int iovcnt,
    size_t n);

/* Storage for up to n more bytes behind the end (n <= space), as 1-2
 * segments, so a read can fill the ring without a copy through a buffer of
 * its own; FULL if n > space, NOMEM. Nothing is appended until
 * rock_ring_commit; a later append, ack or compact voids the segments. */
int rock_ring_tail(struct rock_ring *r, size_t n, struct iovec iov[2],
    int *iovcnt);

/* Append the first n bytes written into rock_ring_tail's segments; FULL if
 * n > space, INVALID if the storage has no room for n (no tail taken). */
int rock_ring_commit(struct rock_ring *r, size_t n);

/* Drop bytes below `consumed`; stale: ignored, past end: ROCK_ERR_PROTOCOL. */
int rock_ring_ack(struct rock_ring *r, uint64_t consumed);

/* Give back storage the data no longer needs: all of it when empty, halves while under a quarter used; called from a periodic timer, never on the data path */
void rock_ring_compact(struct rock_ring *r);

/* [from, end) in 0-2 segments; from < base: ROCK_ERR_LOST, > end: PROTOCOL. */
int rock_ring_peek(const struct rock_ring *r, uint64_t from,
    struct iovec iov[2], int *iovcnt);

#endif
