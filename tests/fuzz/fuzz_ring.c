/* fuzz_ring.c: libFuzzer harness for the in-flight ring: a fuzz-chosen sequence of operations checked byte for byte against a plain buffer. */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rock_err.h"
#include "rock_ring.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The model: the bytes held, oldest first, and the offset of the first. */
struct model {
	uint8_t *held;
	size_t len, cap;
	uint64_t base;
};

struct input {
	const uint8_t *p;
	size_t n;
};

static unsigned
take8(struct input *in)
{
	unsigned v = 0;

	if (in->n > 0) {
		v = in->p[0];
		in->p++;
		in->n--;
	}
	return v;
}

static unsigned
take16(struct input *in)
{
	return take8(in) << 8 | take8(in);
}

/* Bytes to append: from the input while it lasts, then a pattern. */
static void
fill(struct input *in, uint8_t *p, size_t n, uint64_t at)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = in->n > 0 ? (uint8_t)take8(in) : (uint8_t)(at + i) * 31u;
}

/* A replay from any offset: the bytes from there on, or an error. */
static void
check_peek(const struct rock_ring *r, const struct model *m, uint64_t from)
{
	struct iovec iov[2];
	int cnt = -1, rc = rock_ring_peek(r, from, iov, &cnt), i;
	size_t at;

	if (from < m->base) {
		FUZZ_CHECK(rc == ROCK_ERR_LOST);
		return;
	}
	if (from > m->base + m->len) {
		FUZZ_CHECK(rc == ROCK_ERR_PROTOCOL);
		return;
	}
	FUZZ_CHECK(rc == 0 && cnt >= 0 && cnt <= 2);
	at = (size_t)(from - m->base);
	for (i = 0; i < cnt; i++) {
		FUZZ_CHECK(at + iov[i].iov_len <= m->len);
		FUZZ_CHECK(memcmp(iov[i].iov_base, m->held + at,
		    iov[i].iov_len) == 0);
		at += iov[i].iov_len;
	}
	FUZZ_CHECK(at == m->len);
}

/* What the ring says must be what the model holds, byte for byte. */
static void
check_same(const struct rock_ring *r, const struct model *m)
{
	FUZZ_CHECK(rock_ring_used(r) == m->len);
	FUZZ_CHECK(rock_ring_base(r) == m->base);
	FUZZ_CHECK(rock_ring_end(r) == m->base + m->len);
	FUZZ_CHECK(rock_ring_space(r) == m->cap - m->len);
	check_peek(r, m, m->base);
}

/* An append of n bytes: all of them or, past the cap or 2^64, none. */
static void
appended(struct model *m, int rc, const uint8_t *p, size_t n)
{
	if (n > m->cap - m->len || n > UINT64_MAX - (m->base + m->len)) {
		FUZZ_CHECK(rc == ROCK_ERR_FULL || rc == ROCK_ERR_TOO_LARGE);
	} else if (rc != ROCK_ERR_NOMEM) {
		FUZZ_CHECK(rc == 0);
		memcpy(m->held + m->len, p, n);
		m->len += n;
	}
}

/* An offset around what is held: stale, inside, or past the end. */
static uint64_t
near(const struct model *m, struct input *in)
{
	return m->base + m->len - 64 + take16(in) % (m->len + 160);
}

static void
op_append(struct rock_ring *r, struct model *m, struct input *in)
{
	size_t n = take16(in) % (m->cap + 64);
	uint8_t *p = malloc(n + 1);

	if (p == NULL)
		return;
	fill(in, p, n, m->base + m->len);
	appended(m, rock_ring_append(r, p, n), p, n);
	free(p);
}

/* Up to three pieces; the kernel took the first n bytes of them. */
static void
op_appendv(struct rock_ring *r, struct model *m, struct input *in)
{
	struct iovec iov[3];
	uint8_t *p;
	size_t total = 0, n;
	int cnt = 1 + (int)(take8(in) % 3), i, rc;

	for (i = 0; i < cnt; i++) {
		iov[i].iov_len = take16(in) % (m->cap / 2 + 16);
		total += iov[i].iov_len;
	}
	if ((p = malloc(total + 1)) == NULL)
		return;
	fill(in, p, total, m->base + m->len);
	for (i = 0, n = 0; i < cnt; n += iov[i].iov_len, i++)
		iov[i].iov_base = p + n;
	n = total == 0 ? 0 : take16(in) % (total + 2);
	rc = rock_ring_appendv(r, iov, cnt, n);
	if (n > total)
		FUZZ_CHECK(rc == ROCK_ERR_INVALID);
	else
		appended(m, rc, p, n);
	free(p);
}

/* A peer's count: anywhere around what is held, stale or past the end. */
static void
op_ack(struct rock_ring *r, struct model *m, struct input *in)
{
	uint64_t to = near(m, in);
	size_t drop;
	int rc = rock_ring_ack(r, to);

	if (to > m->base + m->len) {
		FUZZ_CHECK(rc == ROCK_ERR_PROTOCOL);
		return;
	}
	FUZZ_CHECK(rc == 0);
	if (to <= m->base)
		return;
	drop = (size_t)(to - m->base);
	memmove(m->held, m->held + drop, m->len - drop);
	m->len -= drop;
	m->base = to;
}

/* First: the cap and the starting offset (near 2^64 to reach its edge);
 * then one operation per byte, with its arguments after it. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };
	struct rock_ring r;
	struct model m = { NULL, 0, 0, 0 };
	unsigned far = take8(&in);

	m.cap = 1 + take16(&in) % 70000;
	m.base = far & 0x80 ? UINT64_MAX - (far & 0x7f) * 1000ull : far * 7919ull;
	FUZZ_CHECK(rock_ring_init(&r, 0, 0) == ROCK_ERR_INVALID);
	FUZZ_CHECK(rock_ring_init(&r, m.cap, m.base) == 0);
	if ((m.held = malloc(m.cap)) == NULL)
		return 0;
	while (in.n > 0) {
		switch (take8(&in) % 5) {
		case 0:
			op_append(&r, &m, &in);
			break;
		case 1:
			op_appendv(&r, &m, &in);
			break;
		case 2:
			op_ack(&r, &m, &in);
			break;
		case 3:
			check_peek(&r, &m, near(&m, &in));
			break;
		case 4:
			/* A ring empty for a whole interval holds nothing. */
			rock_ring_compact(&r);
			if (m.len == 0) {
				rock_ring_compact(&r);
				FUZZ_CHECK(rock_ring_memory(&r) == 0);
			}
			break;
		}
		check_same(&r, &m);
		FUZZ_CHECK(rock_ring_memory(&r) >= m.len);
	}
	rock_ring_free(&r);
	free(m.held);
	return 0;
}
