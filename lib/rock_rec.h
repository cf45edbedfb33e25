/* rock_rec.h: length-checked records for handing state to another process (rockd's USR2). */
#ifndef ROCK_REC_H
#define ROCK_REC_H

#include <stddef.h>
#include <stdint.h>

struct evbuffer;

/*
 * A record is a header (magic, version, body length: 32 bits each, big
 * endian) and a body of fields in a fixed order: integers big endian,
 * blobs as a 32-bit length and the bytes. The writer collects the body in
 * its own buffer and seals it behind the header; the reader checks the
 * header against the whole input and every length against what is left,
 * so a truncated, padded or garbled record is an error, never a read past
 * its end. Errors stick: check once, at the end.
 */
struct rock_rec_out {
	struct evbuffer *body;
	int err;		/* 0 or ROCK_ERR_NOMEM */
};

struct rock_rec_in {
	const uint8_t *p;
	size_t n, off;
	int err;		/* 0, ROCK_ERR_SHORT, ROCK_ERR_TOO_LARGE, ROCK_ERR_PROTOCOL */
};

#define ROCK_REC_HEADER_LEN 12

int rock_rec_begin(struct rock_rec_out *w);
void rock_rec_uint(struct rock_rec_out *w, uint64_t v, size_t width);
void rock_rec_bytes(struct rock_rec_out *w, const void *p, size_t n);
void rock_rec_blob(struct rock_rec_out *w, const void *p, size_t n);
/* An evbuffer's bytes as a blob (linearised, not drained). */
void rock_rec_evbuffer(struct rock_rec_out *w, struct evbuffer *b);
/* Header and body onto out; frees the body either way. 0 or an error. */
int rock_rec_seal(struct rock_rec_out *w, uint32_t magic, uint32_t version,
    struct evbuffer *out);
/* Drop a record begun but not sealed. */
void rock_rec_abandon(struct rock_rec_out *w);

/* The body of the record in p[0..n): its magic and version must match
 * and its length fill n exactly. */
int rock_rec_open(struct rock_rec_in *r, const uint8_t *p, size_t n,
    uint32_t magic, uint32_t version);
uint64_t rock_rec_get(struct rock_rec_in *r, size_t width);
/* An integer that must not exceed max: else the record is refused. */
uint64_t rock_rec_get_max(struct rock_rec_in *r, size_t width, uint64_t max);
void rock_rec_get_bytes(struct rock_rec_in *r, void *out, size_t n);
/* A blob of at most max bytes, in place; NULL (and *len 0) on error. */
const uint8_t *rock_rec_get_blob(struct rock_rec_in *r, size_t max, size_t *len);
/* 0 if every field was there and nothing follows the last. */
int rock_rec_close(struct rock_rec_in *r);

#endif
