/* check_ring.c: unit tests of the in-flight ring. */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "rock_err.h"
#include "rock_ring.h"
#include "suites.h"

/* The byte at stream offset `off` in the pattern tests append. */
static unsigned char
pat(uint64_t off)
{
	return (unsigned char)((off * 131u + (off >> 8) * 7u + 1u) & 0xff);
}

/* Append the pattern bytes [end, end + n) of the ring's stream. */
static int
append_pat(struct rock_ring *r, size_t n)
{
	unsigned char *p = malloc(n > 0 ? n : 1);
	uint64_t end = rock_ring_end(r);
	size_t i;
	int ret;

	ck_assert_ptr_nonnull(p);
	for (i = 0; i < n; i++)
		p[i] = pat(end + i);
	ret = rock_ring_append(r, p, n);
	free(p);
	return ret;
}

/* Check that peek(from) yields the pattern bytes [from, end) exactly. */
static void
check_pat_from(const struct rock_ring *r, uint64_t from)
{
	struct iovec iov[2];
	uint64_t off = from;
	size_t total = 0, i;
	int cnt = -1, k;

	ck_assert_int_eq(rock_ring_peek(r, from, iov, &cnt), 0);
	ck_assert_int_ge(cnt, 0);
	ck_assert_int_le(cnt, 2);
	for (k = 0; k < cnt; k++) {
		const unsigned char *p = iov[k].iov_base;

		ck_assert_uint_gt(iov[k].iov_len, 0);
		/* One assertion per segment: Check records each one passed. */
		for (i = 0; i < iov[k].iov_len && p[i] == pat(off + i); i++)
			;
		ck_assert_msg(i == iov[k].iov_len, "offset %llu: got %u, want %u",
		    (unsigned long long)(off + i), p[i], pat(off + i));
		off += iov[k].iov_len;
		total += iov[k].iov_len;
	}
	ck_assert_uint_eq(total, rock_ring_end(r) - from);
}

static void
check_pat(const struct rock_ring *r)
{
	check_pat_from(r, rock_ring_base(r));
}

/*
 * A ring with 4096 bytes of storage holding `len` bytes that start at
 * index `head`: stream offsets [head, head + len). cap >= 4096.
 */
static void
wrapped(struct rock_ring *r, size_t cap, size_t head, size_t len)
{
	ck_assert_int_eq(rock_ring_init(r, cap, 0), 0);
	ck_assert_int_eq(append_pat(r, head), 0);
	ck_assert_int_eq(append_pat(r, 1), 0);	/* keeps head there on the ack */
	ck_assert_int_eq(rock_ring_ack(r, head), 0);
	ck_assert_int_eq(append_pat(r, len - 1), 0);
	ck_assert_uint_eq(r->head, head);
	ck_assert_uint_eq(r->size, 4096);
	ck_assert_uint_eq(rock_ring_used(r), len);
}

/* The compaction after an interval that held bytes keeps the storage
 * they needed; the next one, after an idle interval, gives it back. */
static void
compact_interval(struct rock_ring *r)
{
	size_t mem = rock_ring_memory(r);

	rock_ring_compact(r);
	ck_assert_uint_eq(rock_ring_memory(r), mem);
	rock_ring_compact(r);
}

START_TEST(test_init)
{
	struct rock_ring r;

	ck_assert_int_eq(rock_ring_init(&r, 1000, 0), 0);
	ck_assert_uint_eq(rock_ring_memory(&r), 0);
	ck_assert_uint_eq(rock_ring_used(&r), 0);
	ck_assert_uint_eq(rock_ring_space(&r), 1000);
	ck_assert_uint_eq(rock_ring_base(&r), 0);
	ck_assert_uint_eq(rock_ring_end(&r), 0);
	/* Appending nothing must not allocate anything either. */
	ck_assert_int_eq(rock_ring_append(&r, NULL, 0), 0);
	ck_assert_int_eq(rock_ring_appendv(&r, NULL, 0, 0), 0);
	ck_assert_uint_eq(rock_ring_memory(&r), 0);
	rock_ring_free(&r);

	ck_assert_int_eq(rock_ring_init(&r, 0, 0), ROCK_ERR_INVALID);
	rock_ring_free(&r);		/* safe after a failed init */
	ck_assert_int_eq(rock_ring_init(&r, SIZE_MAX, 0), ROCK_ERR_INVALID);
	ck_assert_int_eq(rock_ring_init(&r, SIZE_MAX / 2 + 2, 0),
	    ROCK_ERR_INVALID);
	ck_assert_int_eq(rock_ring_init(&r, SIZE_MAX / 2 + 1, 0), 0);
	ck_assert_uint_eq(rock_ring_memory(&r), 0);
	rock_ring_free(&r);
}
END_TEST

START_TEST(test_roundtrip)
{
	static const char msg[] = "hello, world";
	struct rock_ring r;
	struct iovec iov[2];
	int cnt = -1;

	ck_assert_int_eq(rock_ring_init(&r, 1 << 20, 0), 0);
	ck_assert_int_eq(rock_ring_append(&r, msg, 12), 0);
	ck_assert_uint_eq(rock_ring_used(&r), 12);
	ck_assert_uint_eq(rock_ring_end(&r), 12);
	ck_assert_uint_eq(rock_ring_space(&r), (1 << 20) - 12);
	ck_assert_uint_eq(rock_ring_memory(&r), 4096);

	ck_assert_int_eq(rock_ring_peek(&r, 0, iov, &cnt), 0);
	ck_assert_int_eq(cnt, 1);
	ck_assert_uint_eq(iov[0].iov_len, 12);
	ck_assert_mem_eq(iov[0].iov_base, "hello, world", 12);

	ck_assert_int_eq(rock_ring_peek(&r, 7, iov, &cnt), 0);
	ck_assert_int_eq(cnt, 1);
	ck_assert_uint_eq(iov[0].iov_len, 5);
	ck_assert_mem_eq(iov[0].iov_base, "world", 5);
	rock_ring_free(&r);
}
END_TEST

START_TEST(test_wrap)
{
	struct rock_ring r;
	struct iovec iov[2];
	int cnt = -1;

	/* 96 bytes before the end of storage, 104 after its start. */
	wrapped(&r, 4096, 4000, 200);
	ck_assert_uint_eq(rock_ring_base(&r), 4000);
	ck_assert_uint_eq(rock_ring_end(&r), 4200);
	ck_assert_int_eq(rock_ring_peek(&r, 4000, iov, &cnt), 0);
	ck_assert_int_eq(cnt, 2);
	ck_assert_ptr_eq(iov[0].iov_base, r.buf + 4000);
	ck_assert_uint_eq(iov[0].iov_len, 96);
	ck_assert_ptr_eq(iov[1].iov_base, r.buf);
	ck_assert_uint_eq(iov[1].iov_len, 104);
	check_pat(&r);
	rock_ring_free(&r);

	/* Full to the last byte, tail meeting head. */
	wrapped(&r, 4096, 4095, 4096);
	ck_assert_uint_eq(rock_ring_space(&r), 0);
	ck_assert_int_eq(rock_ring_peek(&r, 4095, iov, &cnt), 0);
	ck_assert_int_eq(cnt, 2);
	ck_assert_uint_eq(iov[0].iov_len, 1);
	ck_assert_uint_eq(iov[1].iov_len, 4095);
	check_pat(&r);
	rock_ring_free(&r);
}
END_TEST

START_TEST(test_grow_wrapped)
{
	struct rock_ring r;
	size_t want;

	wrapped(&r, 1 << 20, 3000, 3096);
	ck_assert_uint_eq(rock_ring_memory(&r), 4096);
	ck_assert_int_eq(append_pat(&r, 5000), 0);	/* 8096: 8 KiB */
	ck_assert_uint_eq(rock_ring_memory(&r), 8192);
	ck_assert_uint_eq(r.head, 0);
	check_pat(&r);

	/* Wrap the larger storage too, then grow it in one step by 8x. */
	ck_assert_int_eq(rock_ring_ack(&r, 3000 + 6000), 0);
	rock_ring_compact(&r);
	ck_assert_uint_eq(rock_ring_memory(&r), 8192);	/* 2096 >= 8192 / 4 */
	ck_assert_int_eq(append_pat(&r, 4000), 0);
	ck_assert_uint_eq(r.head, 6000);
	ck_assert_uint_eq(rock_ring_used(&r), 6096);
	check_pat(&r);
	ck_assert_int_eq(append_pat(&r, 50000), 0);
	ck_assert_uint_eq(rock_ring_memory(&r), 65536);
	check_pat(&r);

	/* Up to the cap, and storage stops at the cap rounded up. */
	want = rock_ring_space(&r);
	ck_assert_int_eq(append_pat(&r, want), 0);
	ck_assert_uint_eq(rock_ring_space(&r), 0);
	ck_assert_uint_eq(rock_ring_memory(&r), 1 << 20);
	check_pat(&r);
	rock_ring_free(&r);

	/* A cap below the usual first size: storage never exceeds it. */
	ck_assert_int_eq(rock_ring_init(&r, 10, 0), 0);
	ck_assert_int_eq(append_pat(&r, 3), 0);
	ck_assert_uint_eq(rock_ring_memory(&r), 16);
	ck_assert_int_eq(append_pat(&r, 7), 0);
	ck_assert_uint_eq(rock_ring_memory(&r), 16);
	check_pat(&r);
	rock_ring_free(&r);
}
END_TEST

START_TEST(test_shrink)
{
	struct rock_ring r;
	int i;

	ck_assert_int_eq(rock_ring_init(&r, 1 << 20, 0), 0);
	for (i = 0; i < 64; i++)
		ck_assert_int_eq(append_pat(&r, 4096), 0);
	ck_assert_uint_eq(rock_ring_memory(&r), 262144);

	/* The interval since the last compaction decides, not this instant:
	 * it held 256 KiB, so nothing shrinks yet, however much is acked. */
	ck_assert_int_eq(rock_ring_ack(&r, 262144 - 3000), 0);
	rock_ring_compact(&r);
	ck_assert_uint_eq(rock_ring_memory(&r), 262144);
	check_pat(&r);
	rock_ring_free(&r);

	ck_assert_int_eq(rock_ring_init(&r, 1 << 20, 0), 0);
	for (i = 0; i < 64; i++)
		ck_assert_int_eq(append_pat(&r, 4096), 0);
	rock_ring_compact(&r);		/* ends the busy interval */
	ck_assert_uint_eq(rock_ring_memory(&r), 262144);

	/* 65536 left is a quarter: no shrink yet; one byte less is under.
	 * An ack alone never resizes: only compact gives storage back. */
	ck_assert_int_eq(rock_ring_ack(&r, 262144 - 65536), 0);
	rock_ring_compact(&r);
	ck_assert_uint_eq(rock_ring_memory(&r), 262144);
	ck_assert_int_eq(rock_ring_ack(&r, 262144 - 65535), 0);
	ck_assert_uint_eq(rock_ring_memory(&r), 262144);
	rock_ring_compact(&r);		/* the interval held 65536 */
	ck_assert_uint_eq(rock_ring_memory(&r), 262144);
	rock_ring_compact(&r);
	ck_assert_uint_eq(rock_ring_memory(&r), 131072);
	check_pat(&r);

	/* Far under a quarter: halves until it is not, but not below 4 KiB
	 * (one compaction later: the interval held 65535). */
	ck_assert_int_eq(rock_ring_ack(&r, 262144 - 3000), 0);
	rock_ring_compact(&r);
	ck_assert_uint_eq(rock_ring_memory(&r), 131072);
	rock_ring_compact(&r);
	ck_assert_uint_eq(rock_ring_memory(&r), 8192);
	ck_assert_int_eq(rock_ring_ack(&r, 262144 - 10), 0);
	ck_assert_uint_eq(rock_ring_memory(&r), 8192);
	rock_ring_compact(&r);
	ck_assert_uint_eq(rock_ring_memory(&r), 8192);
	rock_ring_compact(&r);
	ck_assert_uint_eq(rock_ring_memory(&r), 4096);
	ck_assert_uint_eq(rock_ring_used(&r), 10);
	check_pat(&r);
	rock_ring_compact(&r);		/* at the floor: nothing more to give */
	ck_assert_uint_eq(rock_ring_memory(&r), 4096);
	check_pat(&r);

	/* Empty after an ack, then compacted: no storage at all, and it
	 * comes back on use. */
	ck_assert_int_eq(rock_ring_ack(&r, 262144), 0);
	ck_assert_uint_eq(rock_ring_memory(&r), 4096);
	rock_ring_compact(&r);		/* the interval held 10 bytes */
	ck_assert_uint_eq(rock_ring_memory(&r), 4096);
	rock_ring_compact(&r);
	ck_assert_uint_eq(rock_ring_memory(&r), 0);
	ck_assert_ptr_null(r.buf);
	ck_assert_uint_eq(rock_ring_used(&r), 0);
	ck_assert_uint_eq(rock_ring_base(&r), 262144);
	ck_assert_int_eq(append_pat(&r, 100), 0);
	ck_assert_uint_eq(rock_ring_memory(&r), 4096);
	check_pat(&r);
	rock_ring_free(&r);
	ck_assert_uint_eq(rock_ring_memory(&r), 0);
}
END_TEST

/* Everything observable about a ring, to show a refused call changed none. */
struct snap {
	uint64_t base, end;
	size_t used, space, memory;
	unsigned char *bytes;
};

static void
snap_take(const struct rock_ring *r, struct snap *s)
{
	struct iovec iov[2];
	int cnt = 0, k;
	size_t at = 0;

	s->base = rock_ring_base(r);
	s->end = rock_ring_end(r);
	s->used = rock_ring_used(r);
	s->space = rock_ring_space(r);
	s->memory = rock_ring_memory(r);
	s->bytes = malloc(s->used + 1);
	ck_assert_ptr_nonnull(s->bytes);
	ck_assert_int_eq(rock_ring_peek(r, s->base, iov, &cnt), 0);
	for (k = 0; k < cnt; k++) {
		memcpy(s->bytes + at, iov[k].iov_base, iov[k].iov_len);
		at += iov[k].iov_len;
	}
	ck_assert_uint_eq(at, s->used);
}

static void
snap_same(const struct rock_ring *r, struct snap *s)
{
	struct snap now;

	snap_take(r, &now);
	ck_assert_uint_eq(now.base, s->base);
	ck_assert_uint_eq(now.end, s->end);
	ck_assert_uint_eq(now.used, s->used);
	ck_assert_uint_eq(now.space, s->space);
	ck_assert_uint_eq(now.memory, s->memory);
	ck_assert_mem_eq(now.bytes, s->bytes, s->used);
	free(now.bytes);
	free(s->bytes);
}

START_TEST(test_cap)
{
	struct rock_ring r;
	struct snap s;
	unsigned char one = 'x';
	int round;

	ck_assert_int_eq(rock_ring_init(&r, 10000, 0), 0);
	ck_assert_int_eq(append_pat(&r, 9999), 0);
	ck_assert_uint_eq(rock_ring_space(&r), 1);

	snap_take(&r, &s);
	ck_assert_int_eq(append_pat(&r, 2), ROCK_ERR_FULL);
	snap_same(&r, &s);

	ck_assert_int_eq(append_pat(&r, 1), 0);	/* exactly the space */
	ck_assert_uint_eq(rock_ring_space(&r), 0);
	ck_assert_uint_eq(rock_ring_used(&r), 10000);
	snap_take(&r, &s);
	ck_assert_int_eq(rock_ring_append(&r, &one, 1), ROCK_ERR_FULL);
	snap_same(&r, &s);
	ck_assert_int_eq(rock_ring_append(&r, &one, 0), 0);
	check_pat(&r);

	/* Back-pressure cycle: the peer consumes, the writer fills again. */
	for (round = 0; round < 20; round++) {
		uint64_t end = rock_ring_end(&r);

		ck_assert_int_eq(rock_ring_ack(&r, end - 10000 + 3333), 0);
		ck_assert_uint_eq(rock_ring_space(&r), 3333);
		snap_take(&r, &s);
		ck_assert_int_eq(append_pat(&r, 3334), ROCK_ERR_FULL);
		snap_same(&r, &s);
		ck_assert_int_eq(append_pat(&r, 3333), 0);
		ck_assert_uint_eq(rock_ring_space(&r), 0);
		ck_assert_uint_le(rock_ring_memory(&r), 16384);
		check_pat(&r);
	}
	ck_assert_uint_eq(rock_ring_end(&r), 10000 + 20 * 3333);
	rock_ring_free(&r);
}
END_TEST

START_TEST(test_ack)
{
	struct rock_ring r;
	struct snap s;

	ck_assert_int_eq(rock_ring_init(&r, 1 << 16, 0), 0);
	ck_assert_int_eq(append_pat(&r, 1000), 0);

	ck_assert_int_eq(rock_ring_ack(&r, 0), 0);	/* acks nothing new */
	ck_assert_uint_eq(rock_ring_used(&r), 1000);
	ck_assert_int_eq(rock_ring_ack(&r, 100), 0);
	ck_assert_uint_eq(rock_ring_base(&r), 100);
	ck_assert_uint_eq(rock_ring_used(&r), 900);
	ck_assert_int_eq(rock_ring_ack(&r, 350), 0);
	ck_assert_uint_eq(rock_ring_base(&r), 350);
	ck_assert_uint_eq(rock_ring_used(&r), 650);
	check_pat(&r);

	snap_take(&r, &s);
	ck_assert_int_eq(rock_ring_ack(&r, 349), 0);	/* stale */
	ck_assert_int_eq(rock_ring_ack(&r, 0), 0);
	snap_same(&r, &s);

	snap_take(&r, &s);
	ck_assert_int_eq(rock_ring_ack(&r, 1001), ROCK_ERR_PROTOCOL);
	ck_assert_int_eq(rock_ring_ack(&r, UINT64_MAX), ROCK_ERR_PROTOCOL);
	snap_same(&r, &s);

	ck_assert_int_eq(rock_ring_ack(&r, 1000), 0);	/* exactly the end */
	ck_assert_uint_eq(rock_ring_used(&r), 0);
	ck_assert_uint_eq(rock_ring_base(&r), 1000);
	ck_assert_uint_eq(rock_ring_end(&r), 1000);
	ck_assert_uint_eq(rock_ring_memory(&r), 4096);	/* kept for reuse */
	rock_ring_compact(&r);		/* the interval held 1000 bytes */
	ck_assert_uint_eq(rock_ring_memory(&r), 4096);
	rock_ring_compact(&r);
	ck_assert_uint_eq(rock_ring_memory(&r), 0);
	ck_assert_int_eq(rock_ring_ack(&r, 1000), 0);
	ck_assert_int_eq(rock_ring_ack(&r, 1001), ROCK_ERR_PROTOCOL);
	ck_assert_uint_eq(rock_ring_memory(&r), 0);
	rock_ring_free(&r);
}
END_TEST

START_TEST(test_ack_every_position)
{
	struct rock_ring r;
	uint64_t k;

	/* 3500 bytes from index 2000: 2096 before the wrap, 1404 after. */
	for (k = 2000; k <= 5500; k++) {
		wrapped(&r, 4096, 2000, 3500);
		ck_assert_int_eq(rock_ring_ack(&r, k), 0);
		ck_assert_uint_eq(rock_ring_base(&r), k);
		ck_assert_uint_eq(rock_ring_used(&r), 5500 - k);
		ck_assert_uint_eq(rock_ring_end(&r), 5500);
		ck_assert_uint_eq(rock_ring_memory(&r), 4096);
		ck_assert_uint_eq(r.head, k < 5500 ? k % 4096 : 0);
		check_pat(&r);
		ck_assert_int_eq(rock_ring_ack(&r, 5501), ROCK_ERR_PROTOCOL);
		/* 4096 is the floor for this cap: compact only frees, and
		 * only after an interval with nothing held. */
		rock_ring_compact(&r);
		ck_assert_uint_eq(rock_ring_memory(&r), 4096);
		rock_ring_compact(&r);
		ck_assert_uint_eq(rock_ring_memory(&r), k == 5500 ? 0 : 4096);
		if (k < 5500)
			ck_assert_uint_eq(r.head, k % 4096);
		ck_assert_uint_eq(rock_ring_base(&r), k);
		ck_assert_uint_eq(rock_ring_end(&r), 5500);
		check_pat(&r);
		rock_ring_free(&r);
	}
}
END_TEST

START_TEST(test_peek)
{
	struct rock_ring r;
	struct iovec iov[2];
	int cnt;

	wrapped(&r, 4096, 4000, 200);
	cnt = 7;
	ck_assert_int_eq(rock_ring_peek(&r, 3999, iov, &cnt), ROCK_ERR_LOST);
	ck_assert_int_eq(rock_ring_peek(&r, 0, iov, &cnt), ROCK_ERR_LOST);
	ck_assert_int_eq(rock_ring_peek(&r, 4201, iov, &cnt), ROCK_ERR_PROTOCOL);
	ck_assert_int_eq(rock_ring_peek(&r, UINT64_MAX, iov, &cnt),
	    ROCK_ERR_PROTOCOL);
	ck_assert_int_eq(cnt, 7);	/* untouched on error */

	ck_assert_int_eq(rock_ring_peek(&r, 4200, iov, &cnt), 0);
	ck_assert_int_eq(cnt, 0);

	/* From inside the part before the wrap: two segments. */
	ck_assert_int_eq(rock_ring_peek(&r, 4050, iov, &cnt), 0);
	ck_assert_int_eq(cnt, 2);
	ck_assert_ptr_eq(iov[0].iov_base, r.buf + 4050);
	ck_assert_uint_eq(iov[0].iov_len, 46);
	ck_assert_ptr_eq(iov[1].iov_base, r.buf);
	ck_assert_uint_eq(iov[1].iov_len, 104);
	check_pat_from(&r, 4050);

	/* From the last byte before the wrap, and the first after it. */
	ck_assert_int_eq(rock_ring_peek(&r, 4095, iov, &cnt), 0);
	ck_assert_int_eq(cnt, 2);
	ck_assert_uint_eq(iov[0].iov_len, 1);
	ck_assert_uint_eq(iov[1].iov_len, 104);
	ck_assert_int_eq(rock_ring_peek(&r, 4096, iov, &cnt), 0);
	ck_assert_int_eq(cnt, 1);
	ck_assert_ptr_eq(iov[0].iov_base, r.buf);
	ck_assert_uint_eq(iov[0].iov_len, 104);
	check_pat_from(&r, 4096);

	/* From inside the part after the wrap: one segment. */
	ck_assert_int_eq(rock_ring_peek(&r, 4150, iov, &cnt), 0);
	ck_assert_int_eq(cnt, 1);
	ck_assert_ptr_eq(iov[0].iov_base, r.buf + 54);
	ck_assert_uint_eq(iov[0].iov_len, 50);
	check_pat_from(&r, 4150);
	check_pat_from(&r, 4199);
	rock_ring_free(&r);

	/* An empty, released ring: only its end is a valid replay point. */
	ck_assert_int_eq(rock_ring_init(&r, 100, 50), 0);
	ck_assert_int_eq(rock_ring_peek(&r, 50, iov, &cnt), 0);
	ck_assert_int_eq(cnt, 0);
	ck_assert_int_eq(rock_ring_peek(&r, 49, iov, &cnt), ROCK_ERR_LOST);
	ck_assert_int_eq(rock_ring_peek(&r, 51, iov, &cnt), ROCK_ERR_PROTOCOL);
	rock_ring_free(&r);
}
END_TEST

START_TEST(test_appendv)
{
	static char a[] = "abc", b[] = "defgh", c[] = "ij";
	struct iovec v[4] = {
		{ a, 3 }, { NULL, 0 }, { b, 5 }, { c, 2 },
	};
	struct rock_ring r;
	struct iovec iov[2];
	struct snap s;
	int cnt;

	ck_assert_int_eq(rock_ring_init(&r, 12, 0), 0);
	ck_assert_int_eq(rock_ring_appendv(&r, v, 4, 6), 0);	/* "abc" "def" */
	ck_assert_uint_eq(rock_ring_end(&r), 6);
	ck_assert_int_eq(rock_ring_appendv(&r, v, 4, 1), 0);	/* "a" */
	ck_assert_int_eq(rock_ring_appendv(&r, v, 4, 0), 0);
	ck_assert_int_eq(rock_ring_peek(&r, 0, iov, &cnt), 0);
	ck_assert_int_eq(cnt, 1);
	ck_assert_uint_eq(iov[0].iov_len, 7);
	ck_assert_mem_eq(iov[0].iov_base, "abcdefa", 7);

	snap_take(&r, &s);
	ck_assert_int_eq(rock_ring_appendv(&r, v, 4, 11), ROCK_ERR_INVALID);
	ck_assert_int_eq(rock_ring_appendv(&r, v, 2, 4), ROCK_ERR_INVALID);
	ck_assert_int_eq(rock_ring_appendv(&r, v, -1, 0), ROCK_ERR_INVALID);
	ck_assert_int_eq(rock_ring_appendv(&r, v, 4, 10), ROCK_ERR_FULL);
	snap_same(&r, &s);

	/* Across the wrap of a 16-byte storage, ending inside the last iovec. */
	ck_assert_int_eq(rock_ring_ack(&r, 6), 0);	/* head 6, "a" held */
	ck_assert_int_eq(rock_ring_appendv(&r, v, 4, 10), 0);
	ck_assert_uint_eq(rock_ring_space(&r), 1);
	ck_assert_int_eq(rock_ring_appendv(&r, &v[3], 1, 1), 0);
	ck_assert_uint_eq(rock_ring_memory(&r), 16);
	ck_assert_int_eq(rock_ring_peek(&r, 6, iov, &cnt), 0);
	ck_assert_int_eq(cnt, 2);
	ck_assert_uint_eq(iov[0].iov_len, 10);
	ck_assert_mem_eq(iov[0].iov_base, "aabcdefghi", 10);
	ck_assert_uint_eq(iov[1].iov_len, 2);
	ck_assert_mem_eq(iov[1].iov_base, "ji", 2);
	rock_ring_free(&r);
}
END_TEST

/* A read straight into the ring: rock_ring_tail hands out the free
 * storage behind the end (across the wrap: two segments), and only the
 * committed part becomes the ring's. */
START_TEST(test_tail_commit)
{
	struct rock_ring r;
	struct iovec iov[2];
	struct snap s;
	int cnt;

	ck_assert_int_eq(rock_ring_init(&r, 12, 0), 0);
	ck_assert_int_eq(rock_ring_tail(&r, 0, iov, &cnt), ROCK_ERR_INVALID);
	ck_assert_int_eq(rock_ring_tail(&r, 13, iov, &cnt), ROCK_ERR_FULL);
	ck_assert_int_eq(rock_ring_tail(&r, 10, iov, &cnt), 0);
	ck_assert_int_eq(cnt, 1);
	ck_assert_uint_eq(iov[0].iov_len, 10);
	memcpy(iov[0].iov_base, "abcdefghij", 10);
	ck_assert_int_eq(rock_ring_commit(&r, 7), 0);	/* a short read */
	ck_assert_uint_eq(rock_ring_end(&r), 7);
	ck_assert_int_eq(rock_ring_ack(&r, 5), 0);	/* "fg" held, head 5 */
	snap_take(&r, &s);
	ck_assert_int_eq(rock_ring_commit(&r, 11), ROCK_ERR_FULL);
	snap_same(&r, &s);
	/* 16 bytes of storage: 9 free up to its end, then 1 from its start. */
	ck_assert_int_eq(rock_ring_tail(&r, 10, iov, &cnt), 0);
	ck_assert_int_eq(cnt, 2);
	ck_assert_uint_eq(iov[0].iov_len, 9);
	ck_assert_uint_eq(iov[1].iov_len, 1);
	memcpy(iov[0].iov_base, "klmnopqrs", 9);
	memcpy(iov[1].iov_base, "t", 1);
	ck_assert_int_eq(rock_ring_commit(&r, 10), 0);
	ck_assert_uint_eq(rock_ring_space(&r), 0);
	ck_assert_int_eq(rock_ring_peek(&r, 5, iov, &cnt), 0);
	ck_assert_int_eq(cnt, 2);
	ck_assert_mem_eq(iov[0].iov_base, "fgklmnopqrs", 11);
	ck_assert_mem_eq(iov[1].iov_base, "t", 1);
	rock_ring_free(&r);
}
END_TEST

START_TEST(test_large_start)
{
	const uint64_t start = 1ULL << 40;
	struct rock_ring r;
	struct iovec iov[2];
	int cnt;

	ck_assert_int_eq(rock_ring_init(&r, 1 << 16, start), 0);
	ck_assert_uint_eq(rock_ring_base(&r), start);
	ck_assert_uint_eq(rock_ring_end(&r), start);
	ck_assert_int_eq(append_pat(&r, 5000), 0);
	ck_assert_uint_eq(rock_ring_end(&r), start + 5000);
	check_pat(&r);
	ck_assert_int_eq(rock_ring_ack(&r, start + 1234), 0);
	ck_assert_uint_eq(rock_ring_base(&r), start + 1234);
	ck_assert_uint_eq(rock_ring_used(&r), 5000 - 1234);
	check_pat_from(&r, start + 4000);
	/* Offsets that would be right if truncated to 32 bits are not. */
	ck_assert_int_eq(rock_ring_peek(&r, 1234, iov, &cnt), ROCK_ERR_LOST);
	ck_assert_int_eq(rock_ring_ack(&r, 5000), 0);
	ck_assert_uint_eq(rock_ring_used(&r), 5000 - 1234);
	ck_assert_int_eq(rock_ring_ack(&r, start + 5001), ROCK_ERR_PROTOCOL);
	ck_assert_int_eq(rock_ring_ack(&r, start + 5000), 0);
	ck_assert_uint_eq(rock_ring_memory(&r), 8192);
	compact_interval(&r);
	ck_assert_uint_eq(rock_ring_memory(&r), 0);
	ck_assert_uint_eq(rock_ring_base(&r), start + 5000);
	rock_ring_free(&r);

	/* The very end of the offset space: no append may wrap past it. */
	ck_assert_int_eq(rock_ring_init(&r, 100, UINT64_MAX - 5), 0);
	ck_assert_int_eq(append_pat(&r, 6), ROCK_ERR_TOO_LARGE);
	ck_assert_uint_eq(rock_ring_memory(&r), 0);
	ck_assert_int_eq(append_pat(&r, 5), 0);
	ck_assert_uint_eq(rock_ring_end(&r), UINT64_MAX);
	ck_assert_int_eq(append_pat(&r, 1), ROCK_ERR_TOO_LARGE);
	check_pat(&r);
	ck_assert_int_eq(rock_ring_ack(&r, UINT64_MAX), 0);
	ck_assert_uint_eq(rock_ring_used(&r), 0);
	ck_assert_int_eq(rock_ring_peek(&r, UINT64_MAX, iov, &cnt), 0);
	ck_assert_int_eq(cnt, 0);
	compact_interval(&r);
	ck_assert_uint_eq(rock_ring_memory(&r), 0);
	ck_assert_uint_eq(rock_ring_end(&r), UINT64_MAX);
	ck_assert_int_eq(rock_ring_peek(&r, UINT64_MAX, iov, &cnt), 0);
	ck_assert_int_eq(cnt, 0);
	rock_ring_free(&r);
}
END_TEST

/*
 * Steady throughput: the ring empties and refills every round. Storage
 * grows once, on the first round, and is never freed, halved or moved
 * again: no ack resizes it.
 */
START_TEST(test_steady_no_regrow)
{
	const size_t chunk = 300 * 1024;
	unsigned char *p = malloc(chunk), *seen = malloc(chunk);
	struct rock_ring r;
	struct iovec iov[2];
	unsigned char *buf = NULL;
	size_t mem = 0, at;
	int round, cnt, k;

	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_nonnull(seen);
	ck_assert_int_eq(rock_ring_init(&r, 4 << 20, 0), 0);
	for (round = 0; round < 1000; round++) {
		memset(p, round & 0xff, chunk);
		p[0] = (unsigned char)(round >> 8);
		ck_assert_int_eq(rock_ring_append(&r, p, chunk), 0);
		if (round == 0) {
			mem = rock_ring_memory(&r);
			buf = r.buf;
			ck_assert_uint_eq(mem, 512 * 1024);
		}
		/* Same size and the same storage: nothing was relocated. */
		ck_assert_uint_eq(rock_ring_memory(&r), mem);
		ck_assert_ptr_eq(r.buf, buf);
		ck_assert_int_eq(rock_ring_peek(&r, (uint64_t)round * chunk,
		    iov, &cnt), 0);
		for (k = 0, at = 0; k < cnt; k++) {
			ck_assert_uint_le(at + iov[k].iov_len, chunk);
			memcpy(seen + at, iov[k].iov_base, iov[k].iov_len);
			at += iov[k].iov_len;
		}
		ck_assert_uint_eq(at, chunk);
		ck_assert_int_eq(memcmp(seen, p, chunk), 0);
		ck_assert_int_eq(rock_ring_ack(&r, rock_ring_end(&r)), 0);
		ck_assert_uint_eq(rock_ring_used(&r), 0);
		ck_assert_uint_eq(rock_ring_memory(&r), mem);
		ck_assert_ptr_eq(r.buf, buf);
	}
	ck_assert_uint_eq(rock_ring_end(&r), (uint64_t)1000 * chunk);
	/* The timer's compact is what finally gives it back: not at the
	 * end of an interval that used it, at the end of one that did not. */
	rock_ring_compact(&r);
	ck_assert_uint_eq(rock_ring_memory(&r), mem);
	ck_assert_ptr_eq(r.buf, buf);
	rock_ring_compact(&r);
	ck_assert_uint_eq(rock_ring_memory(&r), 0);
	rock_ring_free(&r);
	free(p);
	free(seen);
}
END_TEST

/* An idle ring holds nothing once compacted, and works on afterwards. */
START_TEST(test_compact_idle)
{
	struct rock_ring r;
	struct iovec iov[2];
	int cnt = -1;

	/* Never used: nothing to give, and compact allocates nothing. */
	ck_assert_int_eq(rock_ring_init(&r, 1 << 20, 77), 0);
	rock_ring_compact(&r);
	ck_assert_uint_eq(rock_ring_memory(&r), 0);
	ck_assert_ptr_null(r.buf);
	ck_assert_uint_eq(rock_ring_base(&r), 77);
	ck_assert_uint_eq(rock_ring_end(&r), 77);

	/* Used, then drained: the ack keeps the storage, compact frees it. */
	ck_assert_int_eq(append_pat(&r, 100000), 0);
	ck_assert_uint_eq(rock_ring_memory(&r), 131072);
	ck_assert_int_eq(rock_ring_ack(&r, 77 + 100000), 0);
	ck_assert_uint_eq(rock_ring_memory(&r), 131072);
	compact_interval(&r);
	ck_assert_uint_eq(rock_ring_memory(&r), 0);
	ck_assert_ptr_null(r.buf);
	ck_assert_uint_eq(r.head, 0);
	ck_assert_uint_eq(rock_ring_used(&r), 0);
	ck_assert_uint_eq(rock_ring_space(&r), 1 << 20);
	ck_assert_uint_eq(rock_ring_base(&r), 77 + 100000);
	ck_assert_uint_eq(rock_ring_end(&r), 77 + 100000);
	rock_ring_compact(&r);		/* twice is the same as once */
	ck_assert_uint_eq(rock_ring_memory(&r), 0);

	/* Offsets carry on where they were; storage comes back at 4 KiB. */
	ck_assert_int_eq(rock_ring_peek(&r, 77 + 100000, iov, &cnt), 0);
	ck_assert_int_eq(cnt, 0);
	ck_assert_int_eq(rock_ring_peek(&r, 77 + 99999, iov, &cnt),
	    ROCK_ERR_LOST);
	ck_assert_int_eq(rock_ring_ack(&r, 77 + 100001), ROCK_ERR_PROTOCOL);
	ck_assert_int_eq(append_pat(&r, 10), 0);
	ck_assert_uint_eq(rock_ring_memory(&r), 4096);
	check_pat(&r);
	rock_ring_free(&r);

	/* A cap below the usual first size: a held byte keeps the storage
	 * at the cap rounded up, never below. */
	ck_assert_int_eq(rock_ring_init(&r, 10, 0), 0);
	ck_assert_int_eq(append_pat(&r, 10), 0);
	ck_assert_int_eq(rock_ring_ack(&r, 9), 0);
	rock_ring_compact(&r);
	ck_assert_uint_eq(rock_ring_memory(&r), 16);
	check_pat(&r);
	ck_assert_int_eq(rock_ring_ack(&r, 10), 0);
	compact_interval(&r);
	ck_assert_uint_eq(rock_ring_memory(&r), 0);
	rock_ring_free(&r);
}
END_TEST

/* Shrinking a wrapped, partly used ring keeps every byte at its offset. */
START_TEST(test_compact_wrapped)
{
	struct rock_ring r;
	struct iovec iov[2];
	struct snap s;
	unsigned char *buf;
	uint64_t off;
	int cnt = -1;

	/* 64 KiB of storage; 39000 bytes acked, then 27000 more wrap. */
	ck_assert_int_eq(rock_ring_init(&r, 1 << 20, 5), 0);
	ck_assert_int_eq(append_pat(&r, 40000), 0);
	ck_assert_uint_eq(rock_ring_memory(&r), 65536);
	ck_assert_int_eq(rock_ring_ack(&r, 5 + 39000), 0);
	ck_assert_int_eq(append_pat(&r, 27000), 0);
	ck_assert_uint_eq(rock_ring_memory(&r), 65536);
	ck_assert_uint_eq(rock_ring_end(&r), 5 + 67000);

	/* Over a quarter used: compact leaves it alone, storage and all. */
	buf = r.buf;
	snap_take(&r, &s);
	rock_ring_compact(&r);
	snap_same(&r, &s);
	ck_assert_ptr_eq(r.buf, buf);

	/* 3000 bytes held across the end of storage: index 64000 on. */
	ck_assert_int_eq(rock_ring_ack(&r, 5 + 64000), 0);
	ck_assert_uint_eq(r.head, 64000);
	ck_assert_int_eq(rock_ring_peek(&r, 5 + 64000, iov, &cnt), 0);
	ck_assert_int_eq(cnt, 2);
	ck_assert_uint_eq(iov[0].iov_len, 1536);
	ck_assert_uint_eq(iov[1].iov_len, 1464);
	check_pat(&r);

	/* The interval held 28000: kept once more. */
	rock_ring_compact(&r);
	ck_assert_uint_eq(rock_ring_memory(&r), 65536);

	/* 3000 < 65536 / 4 ... < 16384 / 4, not < 8192 / 4: to 8 KiB. */
	snap_take(&r, &s);
	rock_ring_compact(&r);
	ck_assert_uint_eq(rock_ring_memory(&r), 8192);
	ck_assert_uint_eq(r.head, 0);
	s.memory = 8192;
	snap_same(&r, &s);	/* base, end, used, space and the bytes */
	ck_assert_int_eq(rock_ring_peek(&r, 5 + 64000, iov, &cnt), 0);
	ck_assert_int_eq(cnt, 1);
	ck_assert_uint_eq(iov[0].iov_len, 3000);
	for (off = 5 + 64000; off <= 5 + 67000; off += 250)
		check_pat_from(&r, off);
	check_pat_from(&r, 5 + 67000 - 1);
	ck_assert_int_eq(rock_ring_peek(&r, 5 + 63999, iov, &cnt),
	    ROCK_ERR_LOST);
	ck_assert_int_eq(rock_ring_peek(&r, 5 + 67001, iov, &cnt),
	    ROCK_ERR_PROTOCOL);
	ck_assert_int_eq(rock_ring_ack(&r, 5 + 67001), ROCK_ERR_PROTOCOL);

	/* Settled: another compact changes nothing, not even the storage. */
	buf = r.buf;
	snap_take(&r, &s);
	rock_ring_compact(&r);
	snap_same(&r, &s);
	ck_assert_ptr_eq(r.buf, buf);

	/* And the ring goes on: wrap the smaller storage, grow it again. */
	ck_assert_int_eq(rock_ring_ack(&r, 5 + 66000), 0);
	ck_assert_int_eq(append_pat(&r, 7000), 0);
	ck_assert_uint_eq(rock_ring_memory(&r), 8192);
	ck_assert_int_eq(rock_ring_peek(&r, 5 + 66000, iov, &cnt), 0);
	ck_assert_int_eq(cnt, 2);
	check_pat(&r);
	ck_assert_int_eq(append_pat(&r, 20000), 0);
	ck_assert_uint_eq(rock_ring_memory(&r), 32768);
	check_pat(&r);
	rock_ring_free(&r);
}
END_TEST

/* Refusing storage it cannot get must leave the ring as it was. */
START_TEST(test_nomem)
{
#if SIZE_MAX > 0xffffffffu && !defined(__SANITIZE_ADDRESS__)
	const size_t huge = (size_t)1 << 62;
	unsigned char byte = 0;
	struct rock_ring r;
	struct snap s;

	ck_assert_int_eq(rock_ring_init(&r, huge, 0), 0);
	ck_assert_int_eq(append_pat(&r, 3000), 0);
	snap_take(&r, &s);
	/* Fails before reading a byte: the 2^62-byte growth cannot succeed. */
	ck_assert_int_eq(rock_ring_append(&r, &byte, huge - 4096),
	    ROCK_ERR_NOMEM);
	snap_same(&r, &s);
	check_pat(&r);
	rock_ring_free(&r);
#endif
}
END_TEST

/* Deterministic generator, so a failing run can be repeated exactly. */
static uint64_t
rng_next(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *state = x;
}

static size_t
rng_below(uint64_t *state, size_t n)
{
	return n == 0 ? 0 : (size_t)(rng_next(state) % n);
}

/* The reference: the whole stream ever sent, and what is still held. */
struct model {
	unsigned char *stream;
	size_t alloc;
	uint64_t base, end;
	size_t cap;
	size_t peak;		/* most held since the last compaction */
};

static void
model_append(struct model *m, const unsigned char *p, size_t n)
{
	if (m->end + n > m->alloc) {
		m->alloc = (size_t)(m->end + n) * 2;
		m->stream = realloc(m->stream, m->alloc);
		ck_assert_ptr_nonnull(m->stream);
	}
	memcpy(m->stream + m->end, p, n);
	m->end += n;
	if (m->end - m->base > m->peak)
		m->peak = (size_t)(m->end - m->base);
}

/* A random offset in [base - 10, end + 10], clamped at 0. */
static uint64_t
model_offset(const struct model *m, uint64_t *rng)
{
	uint64_t lo = m->base >= 10 ? m->base - 10 : 0;

	return lo + rng_below(rng, (size_t)(m->end + 10 - lo + 1));
}

static void
model_check_shape(const struct rock_ring *r, const struct model *m)
{
	size_t mem = rock_ring_memory(r);

	ck_assert_uint_eq(rock_ring_base(r), m->base);
	ck_assert_uint_eq(rock_ring_end(r), m->end);
	ck_assert_uint_eq(rock_ring_used(r), m->end - m->base);
	ck_assert_uint_eq(rock_ring_space(r), m->cap - (m->end - m->base));
	/* Storage when anything is held (an emptied ring may keep its own
	 * until compacted); always a bounded power of 2. */
	if (m->end != m->base)
		ck_assert_uint_gt(mem, 0);
	ck_assert_uint_eq(mem & (mem - 1), 0);
	ck_assert_uint_ge(mem, m->end - m->base);
	ck_assert_uint_le(mem, 65536);
}

static void
model_op_append(struct rock_ring *r, struct model *m, uint64_t *rng)
{
	size_t space = m->cap - (m->end - m->base), n, i, mem, need;
	unsigned char *p;
	int want, got;

	/* Mostly fits; sometimes small; sometimes over the space. */
	switch (rng_below(rng, 4)) {
	case 0:
		n = rng_below(rng, 17);
		break;
	case 1:
		n = space + 1 + rng_below(rng, 100);
		break;
	default:
		n = rng_below(rng, space + 1);
		break;
	}
	p = malloc(n + 1);
	ck_assert_ptr_nonnull(p);
	for (i = 0; i < n; i++)
		p[i] = (unsigned char)rng_next(rng);
	want = n > space ? ROCK_ERR_FULL : 0;
	mem = rock_ring_memory(r);
	need = (size_t)(m->end - m->base) + n;
	if (rng_below(rng, 2) == 0) {
		got = rock_ring_append(r, p, n);
	} else {
		/* Cut the bytes into up to 4 iovecs plus a tail not taken. */
		struct iovec v[5];
		size_t at = 0;
		int k;

		for (k = 0; k < 4; k++) {
			size_t len = rng_below(rng, n - at + 1);

			v[k].iov_base = p + at;
			v[k].iov_len = k == 3 ? n - at : len;
			at += v[k].iov_len;
		}
		v[4].iov_base = p;
		v[4].iov_len = rng_below(rng, n + 1);
		got = rock_ring_appendv(r, v, 5, n);
	}
	ck_assert_int_eq(got, want);
	/* Storage grows only when it must, to the first power of 2 that
	 * fits (from 4 KiB, for this cap), and never shrinks here. */
	if (want != 0 || n == 0 || need <= mem)
		ck_assert_uint_eq(rock_ring_memory(r), mem);
	else {
		ck_assert_uint_ge(rock_ring_memory(r), need);
		ck_assert(rock_ring_memory(r) / 2 < need ||
		    rock_ring_memory(r) == 4096);
	}
	if (want == 0)
		model_append(m, p, n);
	free(p);
}

static void
model_op_ack(struct rock_ring *r, struct model *m, uint64_t *rng)
{
	/* Now and then the peer catches up: empty rings, storage kept. */
	uint64_t off = rng_below(rng, 8) == 0 ? m->end : model_offset(m, rng);
	int want = off > m->end ? ROCK_ERR_PROTOCOL : 0;
	size_t mem = rock_ring_memory(r);

	ck_assert_int_eq(rock_ring_ack(r, off), want);
	ck_assert_uint_eq(rock_ring_memory(r), mem);	/* acks never resize */
	if (want == 0 && off > m->base)
		m->base = off;
}

/* Compact: nothing held since the last one, nothing kept; else halved
 * while under a quarter of the most held since, down to 4 KiB; the bytes
 * held are checked by the caller's peeks. */
static void
model_op_compact(struct rock_ring *r, struct model *m)
{
	size_t before = rock_ring_memory(r), used = m->end - m->base, mem;

	if (m->peak > used)
		used = m->peak;
	m->peak = (size_t)(m->end - m->base);
	rock_ring_compact(r);
	mem = rock_ring_memory(r);
	ck_assert_uint_le(mem, before);
	if (used == 0) {
		ck_assert_uint_eq(mem, 0);
		return;
	}
	ck_assert(mem == 4096 || used >= mem / 4);
	ck_assert(mem == before || used < mem / 2);
}

static void
model_op_peek(const struct rock_ring *r, const struct model *m, uint64_t *rng)
{
	uint64_t off = model_offset(m, rng);
	struct iovec iov[2];
	size_t at = (size_t)off;
	int cnt = -1, want, k;

	want = off < m->base ? ROCK_ERR_LOST :
	    off > m->end ? ROCK_ERR_PROTOCOL : 0;
	ck_assert_int_eq(rock_ring_peek(r, off, iov, &cnt), want);
	if (want != 0)
		return;
	if (off == m->end)
		ck_assert_int_eq(cnt, 0);
	else
		ck_assert_int_ge(cnt, 1);
	ck_assert_int_le(cnt, 2);
	for (k = 0; k < cnt; k++) {
		ck_assert_uint_gt(iov[k].iov_len, 0);
		ck_assert_uint_le(iov[k].iov_len, m->end - at);
		ck_assert_msg(memcmp(iov[k].iov_base, m->stream + at,
		    iov[k].iov_len) == 0, "bytes differ in [%zu, %zu)",
		    at, at + iov[k].iov_len);
		at += iov[k].iov_len;
	}
	ck_assert_uint_eq(at, m->end);
}

START_TEST(test_model)
{
	struct model m = { NULL, 0, 0, 0, 50000, 0 };
	struct rock_ring r;
	uint64_t rng = 0x9e3779b97f4a7c15ULL;
	int op;

	ck_assert_int_eq(rock_ring_init(&r, m.cap, 0), 0);
	for (op = 0; op < 10000; op++) {
		switch (rng_below(&rng, 10)) {
		case 0: case 1: case 2:
			model_op_append(&r, &m, &rng);
			break;
		case 3: case 4: case 5:
			model_op_ack(&r, &m, &rng);
			break;
		case 6:
			/* The timer fires at any point, even mid-stream; the
			 * peek right after proves the bytes survived. */
			model_op_compact(&r, &m);
			model_op_peek(&r, &m, &rng);
			break;
		default:
			model_op_peek(&r, &m, &rng);
			break;
		}
		model_check_shape(&r, &m);
	}
	rock_ring_free(&r);
	free(m.stream);
}
END_TEST

Suite *
ring_suite(void)
{
	Suite *s = suite_create("ring");
	TCase *tc = tcase_create("core");
	TCase *model = tcase_create("model");

	tcase_add_test(tc, test_init);
	tcase_add_test(tc, test_roundtrip);
	tcase_add_test(tc, test_wrap);
	tcase_add_test(tc, test_grow_wrapped);
	tcase_add_test(tc, test_shrink);
	tcase_add_test(tc, test_cap);
	tcase_add_test(tc, test_ack);
	tcase_add_test(tc, test_ack_every_position);
	tcase_add_test(tc, test_peek);
	tcase_add_test(tc, test_appendv);
	tcase_add_test(tc, test_tail_commit);
	tcase_add_test(tc, test_large_start);
	tcase_add_test(tc, test_steady_no_regrow);
	tcase_add_test(tc, test_compact_idle);
	tcase_add_test(tc, test_compact_wrapped);
	tcase_add_test(tc, test_nomem);
	/* Byte-by-byte checks over thousands of states: slow under valgrind
	 * or sanitizers, never endless. */
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	tcase_add_test(model, test_model);
	tcase_set_timeout(model, 120);
	suite_add_tcase(s, model);
	return s;
}
