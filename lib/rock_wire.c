/* rock_wire.c: byte-exact encoders and strict decoders of doc/PROTOCOL.md. */
#include "config.h"

#include <string.h>

#include "rock_err.h"
#include "rock_wire.h"

const uint8_t rock_magic_announce[ROCK_MAGIC_LEN] = {
	0x89, 'R', 'O', 'C', 'K', 'S', '\r', '\n'
};
const uint8_t rock_magic_reconnect[ROCK_MAGIC_LEN] = {
	0x89, 'R', 'O', 'C', 'K', 'R', '\r', '\n'
};
static const uint8_t hb_magic[4] = { 'R', 'K', 'C', ROCK_VERSION };
#define HB_TYPE_HEARTBEAT 0x01

static void
put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void
put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}

static void
put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}

static uint16_t
get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t
get32(const uint8_t *p)
{
	return (uint32_t)get16(p) << 16 | get16(p + 2);
}

static uint64_t
get64(const uint8_t *p)
{
	return (uint64_t)get32(p) << 32 | get32(p + 4);
}

void
rock_announce_encode(const struct rock_announce *a, uint8_t out[ROCK_ANNOUNCE_LEN])
{
	memcpy(out, rock_magic_announce, ROCK_MAGIC_LEN);
	out[8] = a->version_max;
	out[9] = a->version_min;
	put16(out + 10, a->features);
	memcpy(out + 12, a->random, ROCK_ANNOUNCE_RANDOM);
}

int
rock_announce_decode(struct rock_announce *a, const uint8_t in[ROCK_ANNOUNCE_LEN])
{
	if (memcmp(in, rock_magic_announce, ROCK_MAGIC_LEN) != 0 ||
	    in[9] == 0 || in[9] > in[8])
		return ROCK_ERR_PROTOCOL;
	a->version_max = in[8];
	a->version_min = in[9];
	a->features = get16(in + 10);
	memcpy(a->random, in + 12, ROCK_ANNOUNCE_RANDOM);
	return 0;
}

void
rock_client_hello_encode(const struct rock_client_hello *h,
    uint8_t out[ROCK_CLIENT_HELLO_LEN])
{
	out[0] = ROCK_MSG_CLIENT_HELLO;
	out[1] = h->version;
	put16(out + 2, h->features);
	memcpy(out + 4, h->pk, ROCK_KEY_LEN);
	put32(out + 36, h->rcvbuf);
	put32(out + 40, h->sndbuf);
	put16(out + 44, h->udp_port);
	memcpy(out + 46, h->nonce, ROCK_NONCE_LEN);
}

int
rock_client_hello_decode(struct rock_client_hello *h,
    const uint8_t in[ROCK_CLIENT_HELLO_LEN])
{
	if (in[0] != ROCK_MSG_CLIENT_HELLO || in[1] == 0)
		return ROCK_ERR_PROTOCOL;
	h->version = in[1];
	h->features = get16(in + 2);
	memcpy(h->pk, in + 4, ROCK_KEY_LEN);
	h->rcvbuf = get32(in + 36);
	h->sndbuf = get32(in + 40);
	h->udp_port = get16(in + 44);
	memcpy(h->nonce, in + 46, ROCK_NONCE_LEN);
	return 0;
}

void
rock_server_hello_encode(const struct rock_server_hello *h,
    uint8_t out[ROCK_SERVER_HELLO_LEN])
{
	out[0] = ROCK_MSG_SERVER_HELLO;
	out[1] = h->version;
	put16(out + 2, h->features);
	memcpy(out + 4, h->id, ROCK_ID_LEN);
	memcpy(out + 20, h->pk, ROCK_KEY_LEN);
	put32(out + 52, h->rcvbuf);
	put32(out + 56, h->sndbuf);
	put16(out + 60, h->udp_port);
	put16(out + 62, 0);
	memcpy(out + 64, h->ident, ROCK_IDENT_LEN);
	memcpy(out + 96, h->sig, ROCK_SIG_LEN);
}

int
rock_server_hello_decode(struct rock_server_hello *h,
    const uint8_t in[ROCK_SERVER_HELLO_LEN])
{
	if (in[0] != ROCK_MSG_SERVER_HELLO || in[1] == 0 || get16(in + 62) != 0)
		return ROCK_ERR_PROTOCOL;
	h->version = in[1];
	h->features = get16(in + 2);
	memcpy(h->id, in + 4, ROCK_ID_LEN);
	memcpy(h->pk, in + 20, ROCK_KEY_LEN);
	h->rcvbuf = get32(in + 52);
	h->sndbuf = get32(in + 56);
	h->udp_port = get16(in + 60);
	memcpy(h->ident, in + 64, ROCK_IDENT_LEN);
	memcpy(h->sig, in + 96, ROCK_SIG_LEN);
	return 0;
}

size_t
rock_answer_covered(uint8_t *out, const uint8_t *answer, size_t n,
    const uint8_t *tail, size_t ntail)
{
	memcpy(out, answer, n);
	memcpy(out + n, tail, ntail);
	return n + ntail;
}

size_t
rock_answer_tail_len(uint16_t features)
{
	return ROCK_TICKET_MSG_LEN +
	    ((features & ROCK_FEAT_UDP_ADDRESS) ? ROCK_UDP_ADDRESS_LEN : 0);
}

uint16_t
rock_answer_features(const uint8_t answer[4])
{
	return get16(answer + 2);
}

void
rock_client_resume_encode(const struct rock_client_resume *h,
    uint8_t out[ROCK_CLIENT_RESUME_LEN])
{
	out[0] = ROCK_MSG_CLIENT_RESUME;
	out[1] = h->version;
	put16(out + 2, h->features);
	put32(out + 4, h->rcvbuf);
	put32(out + 8, h->sndbuf);
	put16(out + 12, h->udp_port);
	memcpy(out + 14, h->nonce, ROCK_NONCE_LEN);
	memcpy(out + 30, h->ticket, ROCK_TICKET_LEN);
}

/* CLIENT_RESUME's fields, which CLIENT_EARLY begins with too. */
static int
resume_fields_decode(struct rock_client_resume *h, uint8_t type,
    const uint8_t in[ROCK_CLIENT_RESUME_LEN])
{
	if (in[0] != type || in[1] == 0)
		return ROCK_ERR_PROTOCOL;
	h->version = in[1];
	h->features = get16(in + 2);
	h->rcvbuf = get32(in + 4);
	h->sndbuf = get32(in + 8);
	h->udp_port = get16(in + 12);
	memcpy(h->nonce, in + 14, ROCK_NONCE_LEN);
	memcpy(h->ticket, in + 30, ROCK_TICKET_LEN);
	return 0;
}

int
rock_client_resume_decode(struct rock_client_resume *h,
    const uint8_t in[ROCK_CLIENT_RESUME_LEN])
{
	return resume_fields_decode(h, ROCK_MSG_CLIENT_RESUME, in);
}

void
rock_client_early_encode(const struct rock_client_resume *h, uint32_t age_ms,
    uint8_t out[ROCK_CLIENT_EARLY_LEN])
{
	rock_client_resume_encode(h, out);
	out[0] = ROCK_MSG_CLIENT_EARLY;
	put32(out + ROCK_CLIENT_RESUME_LEN, age_ms);
	memset(out + ROCK_CLIENT_EARLY_TAGGED, 0, ROCK_TAG_LEN);
}

int
rock_client_early_decode(struct rock_client_resume *h, uint32_t *age_ms,
    const uint8_t in[ROCK_CLIENT_EARLY_LEN])
{
	int r = resume_fields_decode(h, ROCK_MSG_CLIENT_EARLY, in);

	if (r == 0)
		*age_ms = get32(in + ROCK_CLIENT_RESUME_LEN);
	return r;
}

void
rock_server_resume_encode(const struct rock_server_resume *h,
    uint8_t out[ROCK_SERVER_RESUME_LEN])
{
	out[0] = ROCK_MSG_SERVER_RESUME;
	out[1] = h->version;
	put16(out + 2, h->features);
	memcpy(out + 4, h->id, ROCK_ID_LEN);
	put32(out + 20, h->rcvbuf);
	put32(out + 24, h->sndbuf);
	put16(out + 28, h->udp_port);
	put16(out + 30, 0);
	memcpy(out + 32, h->nonce, ROCK_NONCE_LEN);
	memcpy(out + 48, h->tag, ROCK_TAG_LEN);
}

int
rock_server_resume_decode(struct rock_server_resume *h,
    const uint8_t in[ROCK_SERVER_RESUME_LEN])
{
	if (in[0] != ROCK_MSG_SERVER_RESUME || in[1] == 0 || get16(in + 30) != 0)
		return ROCK_ERR_PROTOCOL;
	h->version = in[1];
	h->features = get16(in + 2);
	memcpy(h->id, in + 4, ROCK_ID_LEN);
	h->rcvbuf = get32(in + 20);
	h->sndbuf = get32(in + 24);
	h->udp_port = get16(in + 28);
	memcpy(h->nonce, in + 32, ROCK_NONCE_LEN);
	memcpy(h->tag, in + 48, ROCK_TAG_LEN);
	return 0;
}

void
rock_ticket_msg_encode(const struct rock_ticket_msg *t,
    uint8_t out[ROCK_TICKET_MSG_LEN])
{
	out[0] = ROCK_MSG_TICKET;
	put32(out + 1, t->lifetime_s);
	memcpy(out + 5, t->ticket, ROCK_TICKET_LEN);
}

int
rock_ticket_msg_decode(struct rock_ticket_msg *t,
    const uint8_t in[ROCK_TICKET_MSG_LEN])
{
	if (in[0] != ROCK_MSG_TICKET)
		return ROCK_ERR_PROTOCOL;
	t->lifetime_s = get32(in + 1);
	memcpy(t->ticket, in + 5, ROCK_TICKET_LEN);
	return 0;
}

void
rock_udp_address_encode(const struct rock_udp_address *a,
    uint8_t out[ROCK_UDP_ADDRESS_LEN])
{
	out[0] = ROCK_MSG_UDP_ADDRESS;
	out[1] = a->family;
	memset(out + 2, 0, 16);
	memcpy(out + 2, a->addr, a->family == 4 ? 4 : 16);
}

int
rock_udp_address_decode(struct rock_udp_address *a,
    const uint8_t in[ROCK_UDP_ADDRESS_LEN])
{
	static const uint8_t zero[12];

	if (in[0] != ROCK_MSG_UDP_ADDRESS || (in[1] != 4 && in[1] != 6) ||
	    (in[1] == 4 && memcmp(in + 6, zero, sizeof(zero)) != 0))
		return ROCK_ERR_PROTOCOL;
	a->family = in[1];
	memcpy(a->addr, in + 2, 16);
	return 0;
}

void
rock_reconnect_req_encode(const struct rock_reconnect_req *r,
    uint8_t out[ROCK_RECONNECT_REQ_LEN])
{
	memcpy(out, rock_magic_reconnect, ROCK_MAGIC_LEN);
	out[8] = r->version;
	memcpy(out + 9, r->id, ROCK_ID_LEN);
	memcpy(out + 25, r->nonce, ROCK_NONCE_LEN);
	put32(out + 41, r->attempt);
	put32(out + 45, r->since);
	put64(out + 49, r->consumed);
	put64(out + 57, r->end);
	put32(out + 65, r->flags);
	memcpy(out + 69, r->tag, ROCK_TAG_LEN);
}

int
rock_reconnect_req_decode(struct rock_reconnect_req *r,
    const uint8_t in[ROCK_RECONNECT_REQ_LEN])
{
	if (memcmp(in, rock_magic_reconnect, ROCK_MAGIC_LEN) != 0 || in[8] == 0)
		return ROCK_ERR_PROTOCOL;
	r->version = in[8];
	memcpy(r->id, in + 9, ROCK_ID_LEN);
	memcpy(r->nonce, in + 25, ROCK_NONCE_LEN);
	r->attempt = get32(in + 41);
	r->since = get32(in + 45);
	r->consumed = get64(in + 49);
	r->end = get64(in + 57);
	r->flags = get32(in + 65);
	memcpy(r->tag, in + 69, ROCK_TAG_LEN);
	/* Attempts count from 1; none open after this one is nonsense. */
	if (r->attempt == 0 || r->since == 0 || r->since > r->attempt)
		return ROCK_ERR_PROTOCOL;
	return 0;
}

void
rock_reconnect_ok_encode(const struct rock_reconnect_ok *o,
    uint8_t out[ROCK_RECONNECT_OK_LEN])
{
	out[0] = ROCK_MSG_RECONNECT_OK;
	put64(out + 1, o->consumed);
	put64(out + 9, o->end);
	put32(out + 17, o->flags);
	memcpy(out + 21, o->tag, ROCK_TAG_LEN);
}

int
rock_reconnect_ok_decode(struct rock_reconnect_ok *o,
    const uint8_t in[ROCK_RECONNECT_OK_LEN])
{
	if (in[0] != ROCK_MSG_RECONNECT_OK)
		return ROCK_ERR_PROTOCOL;
	o->consumed = get64(in + 1);
	o->end = get64(in + 9);
	o->flags = get32(in + 17);
	memcpy(o->tag, in + 21, ROCK_TAG_LEN);
	return 0;
}

size_t
rock_error_encode(uint8_t code, const char *text, uint8_t out[ROCK_ERROR_MAX_LEN])
{
	size_t n = strlen(text);

	if (n > ROCK_ERROR_MAX_TEXT)
		n = ROCK_ERROR_MAX_TEXT;
	out[0] = ROCK_MSG_ERROR;
	out[1] = code;
	out[2] = (uint8_t)n;
	memcpy(out + 3, text, n);
	memset(out + 3 + n, 0, ROCK_SIG_LEN);
	return 3 + n + ROCK_SIG_LEN;
}

int
rock_error_decode(struct rock_error_msg *e, const uint8_t *in, size_t n,
    size_t *used)
{
	size_t i;

	if (n < 3)
		return ROCK_ERR_SHORT;
	if (in[0] != ROCK_MSG_ERROR || in[2] > ROCK_ERROR_MAX_TEXT)
		return ROCK_ERR_PROTOCOL;
	if (n < 3 + (size_t)in[2] + ROCK_SIG_LEN)
		return ROCK_ERR_SHORT;
	e->code = in[1];
	e->len = in[2];
	/* Peer text goes into logs: keep it printable. */
	for (i = 0; i < e->len; i++)
		e->text[i] = in[3 + i] >= 0x20 && in[3 + i] < 0x7f ?
		    (char)in[3 + i] : '?';
	e->text[e->len] = '\0';
	memcpy(e->sig, in + 3 + e->len, ROCK_SIG_LEN);
	*used = 3 + (size_t)e->len + ROCK_SIG_LEN;
	return 0;
}

void
rock_hb_header_encode(const struct rock_hb_header *h, uint8_t out[ROCK_HB_HEADER_LEN])
{
	memcpy(out, hb_magic, sizeof(hb_magic));
	out[4] = HB_TYPE_HEARTBEAT;
	out[5] = h->flags;
	out[6] = h->nrecords;
	out[7] = 0;
	memcpy(out + 8, h->anchor, ROCK_ID_LEN);
	put64(out + 24, h->seq);
	put64(out + 32, h->ack);
	put64(out + 40, h->ack_bits);
	memcpy(out + ROCK_HB_TAGGED_HEADER, h->tag, ROCK_TAG_LEN);
}

void
rock_hb_header_decode(struct rock_hb_header *h, const uint8_t in[ROCK_HB_HEADER_LEN])
{
	h->flags = in[5];
	h->nrecords = in[6];
	memcpy(h->anchor, in + 8, ROCK_ID_LEN);
	h->seq = get64(in + 24);
	h->ack = get64(in + 32);
	h->ack_bits = get64(in + 40);
	memcpy(h->tag, in + ROCK_HB_TAGGED_HEADER, ROCK_TAG_LEN);
}

void
rock_hb_record_encode(const struct rock_hb_record *r, uint8_t out[ROCK_HB_RECORD_LEN])
{
	memcpy(out, r->id, ROCK_ID_LEN);
	put64(out + 16, r->seq);
	put64(out + 24, r->consumed);
	put64(out + 32, r->end);
	put32(out + 40, r->flags);
	memcpy(out + 44, r->anchor, ROCK_ID_LEN);
	memcpy(out + 60, r->tag, ROCK_TAG_LEN);
}

void
rock_hb_record_decode(struct rock_hb_record *r, const uint8_t in[ROCK_HB_RECORD_LEN])
{
	memcpy(r->id, in, ROCK_ID_LEN);
	r->seq = get64(in + 16);
	r->consumed = get64(in + 24);
	r->end = get64(in + 32);
	r->flags = get32(in + 40);
	memcpy(r->anchor, in + 44, ROCK_ID_LEN);
	memcpy(r->tag, in + 60, ROCK_TAG_LEN);
}

/* A packet with no record is the idle beat: it proves the path and
 * carries the acknowledgement. */
int
rock_hb_packet_check(const uint8_t *in, size_t n, unsigned *nrecords)
{
	if (n < ROCK_HB_HEADER_LEN || memcmp(in, hb_magic, sizeof(hb_magic)) != 0 ||
	    in[4] != HB_TYPE_HEARTBEAT || (in[5] & ~ROCK_HB_QUIET) != 0 ||
	    in[6] > ROCK_HB_MAX_RECORDS || in[7] != 0 ||
	    n != ROCK_HB_HEADER_LEN + (size_t)in[6] * ROCK_HB_RECORD_LEN)
		return ROCK_ERR_PROTOCOL;
	*nrecords = in[6];
	return 0;
}

static enum rock_sniff
sniff_one(const uint8_t *in, size_t n, const uint8_t magic[ROCK_MAGIC_LEN],
    enum rock_sniff full)
{
	size_t k = n < ROCK_MAGIC_LEN ? n : ROCK_MAGIC_LEN;

	if (memcmp(in, magic, k) != 0)
		return ROCK_SNIFF_PLAIN;
	return k == ROCK_MAGIC_LEN ? full : ROCK_SNIFF_MORE;
}

enum rock_sniff
rock_sniff(const uint8_t *in, size_t n)
{
	enum rock_sniff s;

	if (n == 0)
		return ROCK_SNIFF_MORE;
	s = sniff_one(in, n, rock_magic_announce, ROCK_SNIFF_ANNOUNCE);
	if (s != ROCK_SNIFF_PLAIN)
		return s;
	return sniff_one(in, n, rock_magic_reconnect, ROCK_SNIFF_RECONNECT);
}

uint8_t
rock_version_pick(uint8_t our_min, uint8_t our_max, uint8_t peer_min,
    uint8_t peer_max)
{
	uint8_t hi = our_max < peer_max ? our_max : peer_max;
	uint8_t lo = our_min > peer_min ? our_min : peer_min;

	return hi >= lo && hi > 0 ? hi : 0;
}
