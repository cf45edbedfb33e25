/* rock_rec.c: length-checked records for handing state to another process. */
#include "config.h"

#include <string.h>

#include <event2/buffer.h>

#include "rock_err.h"
#include "rock_rec.h"

static void
put_be(uint8_t *p, uint64_t v, size_t width)
{
	while (width-- > 0) {
		p[width] = (uint8_t)v;
		v >>= 8;
	}
}

static uint64_t
get_be(const uint8_t *p, size_t width)
{
	uint64_t v = 0;
	size_t i;

	for (i = 0; i < width; i++)
		v = v << 8 | p[i];
	return v;
}

int
rock_rec_begin(struct rock_rec_out *w)
{
	w->err = 0;
	if ((w->body = evbuffer_new()) == NULL)
		return ROCK_ERR_NOMEM;
	return 0;
}

void
rock_rec_bytes(struct rock_rec_out *w, const void *p, size_t n)
{
	if (w->err == 0 && n > 0 && evbuffer_add(w->body, p, n) != 0)
		w->err = ROCK_ERR_NOMEM;
}

void
rock_rec_uint(struct rock_rec_out *w, uint64_t v, size_t width)
{
	uint8_t b[8];

	put_be(b, v, width);
	rock_rec_bytes(w, b, width);
}

void
rock_rec_blob(struct rock_rec_out *w, const void *p, size_t n)
{
	if (n > UINT32_MAX) {
		w->err = ROCK_ERR_TOO_LARGE;
		return;
	}
	rock_rec_uint(w, n, 4);
	rock_rec_bytes(w, p, n);
}

void
rock_rec_evbuffer(struct rock_rec_out *w, struct evbuffer *b)
{
	size_t n = evbuffer_get_length(b);

	rock_rec_blob(w, n > 0 ? evbuffer_pullup(b, -1) : NULL, n);
}

void
rock_rec_abandon(struct rock_rec_out *w)
{
	if (w->body != NULL)
		evbuffer_free(w->body);
	w->body = NULL;
}

int
rock_rec_seal(struct rock_rec_out *w, uint32_t magic, uint32_t version,
    struct evbuffer *out)
{
	uint8_t h[ROCK_REC_HEADER_LEN];
	size_t len = evbuffer_get_length(w->body);
	int r = w->err;

	if (r == 0 && len > UINT32_MAX)
		r = ROCK_ERR_TOO_LARGE;
	if (r == 0) {
		put_be(h, magic, 4);
		put_be(h + 4, version, 4);
		put_be(h + 8, len, 4);
		if (evbuffer_add(out, h, sizeof(h)) != 0 ||
		    evbuffer_add_buffer(out, w->body) != 0)
			r = ROCK_ERR_NOMEM;
	}
	rock_rec_abandon(w);
	return r;
}

int
rock_rec_open(struct rock_rec_in *r, const uint8_t *p, size_t n,
    uint32_t magic, uint32_t version)
{
	r->p = p;
	r->n = n;
	r->off = ROCK_REC_HEADER_LEN;
	r->err = 0;
	if (n < ROCK_REC_HEADER_LEN)
		return r->err = ROCK_ERR_SHORT;
	if (get_be(p, 4) != magic || get_be(p + 4, 4) != version)
		return r->err = ROCK_ERR_PROTOCOL;
	if (get_be(p + 8, 4) != n - ROCK_REC_HEADER_LEN)
		return r->err = get_be(p + 8, 4) > n - ROCK_REC_HEADER_LEN ?
		    ROCK_ERR_SHORT : ROCK_ERR_TOO_LARGE;
	return 0;
}

/* The next n bytes, or NULL once anything is wrong. */
static const uint8_t *
take(struct rock_rec_in *r, size_t n)
{
	const uint8_t *at;

	if (r->err != 0)
		return NULL;
	if (n > r->n - r->off) {
		r->err = ROCK_ERR_SHORT;
		return NULL;
	}
	at = r->p + r->off;
	r->off += n;
	return at;
}

uint64_t
rock_rec_get(struct rock_rec_in *r, size_t width)
{
	const uint8_t *p = take(r, width);

	return p == NULL ? 0 : get_be(p, width);
}

uint64_t
rock_rec_get_max(struct rock_rec_in *r, size_t width, uint64_t max)
{
	uint64_t v = rock_rec_get(r, width);

	if (v > max && r->err == 0)
		r->err = ROCK_ERR_TOO_LARGE;
	return r->err == 0 ? v : 0;
}

void
rock_rec_get_bytes(struct rock_rec_in *r, void *out, size_t n)
{
	const uint8_t *p = take(r, n);

	if (p != NULL)
		memcpy(out, p, n);
	else
		memset(out, 0, n);
}

const uint8_t *
rock_rec_get_blob(struct rock_rec_in *r, size_t max, size_t *len)
{
	size_t n = (size_t)rock_rec_get_max(r, 4, max);
	const uint8_t *p = take(r, n);

	*len = p != NULL ? n : 0;
	return p;
}

int
rock_rec_close(struct rock_rec_in *r)
{
	if (r->err == 0 && r->off != r->n)
		r->err = ROCK_ERR_TOO_LARGE;
	return r->err;
}
