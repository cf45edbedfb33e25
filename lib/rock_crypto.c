/* rock_crypto.c: X25519 key exchange and keyed BLAKE2b tags through libsodium. */
#include "config.h"

#include <string.h>

#include <sodium.h>

#include "rock_crypto.h"
#include "rock_err.h"

/* Labels name their message's format: the control channel's changed in
 * version 5, the others did not. */
#define LABEL_HB "rocks hb v5"
#define LABEL_HBP "rocks hbp v5"
#define LABEL_RQ "rocks rq v4"
#define LABEL_OK "rocks ok v4"
#define LABEL_HELLO "rocks server hello v6"
#define LABEL_ERROR "rocks error v4"
#define LABEL_RMS "rocks resumption v6"
#define LABEL_RESUME_KEYS "rocks resume keys v6"
#define LABEL_RESUME "rocks server resume v6"
#define LABEL_TICKET "rocks ticket v6"
#define LABEL_FINISHED "rocks client finished v7"
#define LABEL_EARLY "rocks client early v7"
#define LABEL_FLEET "rocks fleet announcement v7"
#define DIGEST_LEN 32

int
rock_crypto_init(void)
{
	return sodium_init() < 0 ? ROCK_ERR_CRYPTO : 0;
}

void
rock_keypair_new(struct rock_keypair *kp)
{
	crypto_kx_keypair(kp->pk, kp->sk);
}

void
rock_keypair_from_seed(struct rock_keypair *kp, const uint8_t seed[ROCK_KEY_LEN])
{
	crypto_kx_seed_keypair(kp->pk, kp->sk, seed);
}

void
rock_keypair_wipe(struct rock_keypair *kp)
{
	sodium_memzero(kp->sk, sizeof(kp->sk));
}

int
rock_keys_client(struct rock_keys *k, const struct rock_keypair *own,
    const uint8_t server_pk[ROCK_KEY_LEN])
{
	if (crypto_kx_client_session_keys(k->rx, k->tx, own->pk, own->sk,
	    server_pk) != 0)
		return ROCK_ERR_AUTH;
	return 0;
}

int
rock_keys_server(struct rock_keys *k, const struct rock_keypair *own,
    const uint8_t client_pk[ROCK_KEY_LEN])
{
	if (crypto_kx_server_session_keys(k->rx, k->tx, own->pk, own->sk,
	    client_pk) != 0)
		return ROCK_ERR_AUTH;
	return 0;
}

void
rock_keys_wipe(struct rock_keys *k)
{
	sodium_memzero(k, sizeof(*k));
}

void
rock_wipe(void *p, size_t n)
{
	sodium_memzero(p, n);
}

void
rock_random(void *buf, size_t n)
{
	randombytes_buf(buf, n);
}

struct span {
	const void *p;
	size_t n;
};

static void
tag_spans(uint8_t out[ROCK_TAG_LEN], const uint8_t key[ROCK_KEY_LEN],
    const char *label, const struct span *s, size_t nspans)
{
	crypto_generichash_state st;
	size_t i;

	crypto_generichash_init(&st, key, ROCK_KEY_LEN, ROCK_TAG_LEN);
	crypto_generichash_update(&st, (const uint8_t *)label, strlen(label));
	for (i = 0; i < nspans; i++)
		crypto_generichash_update(&st, s[i].p, s[i].n);
	crypto_generichash_final(&st, out, ROCK_TAG_LEN);
	sodium_memzero(&st, sizeof(st));
}

void
rock_hb_tag(uint8_t out[ROCK_TAG_LEN], const uint8_t key[ROCK_KEY_LEN],
    const uint8_t record[ROCK_HB_RECORD_LEN - ROCK_TAG_LEN])
{
	const struct span s[] = { { record, ROCK_HB_RECORD_LEN - ROCK_TAG_LEN } };

	tag_spans(out, key, LABEL_HB, s, 1);
}

void
rock_hb_packet_tag(uint8_t out[ROCK_TAG_LEN], const uint8_t key[ROCK_KEY_LEN],
    const uint8_t *pkt, size_t len)
{
	const struct span s[] = { { pkt, ROCK_HB_TAGGED_HEADER },
	    { pkt + ROCK_HB_HEADER_LEN, len - ROCK_HB_HEADER_LEN } };

	tag_spans(out, key, LABEL_HBP, s, 2);
}

void
rock_hb_packet_seal(struct rock_hb_header *h, const uint8_t tx[ROCK_KEY_LEN],
    uint8_t *pkt)
{
	size_t len = ROCK_HB_HEADER_LEN + (size_t)h->nrecords * ROCK_HB_RECORD_LEN;

	memset(h->tag, 0, sizeof(h->tag));
	rock_hb_header_encode(h, pkt);
	rock_hb_packet_tag(h->tag, tx, pkt, len);
	memcpy(pkt + ROCK_HB_TAGGED_HEADER, h->tag, ROCK_TAG_LEN);
}

void
rock_request_tag(uint8_t out[ROCK_TAG_LEN], const uint8_t key[ROCK_KEY_LEN],
    const uint8_t msg[ROCK_RECONNECT_REQ_LEN - ROCK_TAG_LEN])
{
	const struct span s[] = { { msg, ROCK_RECONNECT_REQ_LEN - ROCK_TAG_LEN } };

	tag_spans(out, key, LABEL_RQ, s, 1);
}

void
rock_ok_tag(uint8_t out[ROCK_TAG_LEN], const uint8_t key[ROCK_KEY_LEN],
    const uint8_t id[ROCK_ID_LEN], const uint8_t client_nonce[ROCK_NONCE_LEN],
    const uint8_t msg[ROCK_RECONNECT_OK_LEN - ROCK_TAG_LEN])
{
	const struct span s[] = {
		{ id, ROCK_ID_LEN }, { client_nonce, ROCK_NONCE_LEN },
		{ msg, ROCK_RECONNECT_OK_LEN - ROCK_TAG_LEN }
	};

	tag_spans(out, key, LABEL_OK, s, 3);
}

void
rock_resumption_secret(uint8_t rms[ROCK_KEY_LEN],
    const uint8_t k_cs[ROCK_KEY_LEN], const uint8_t k_sc[ROCK_KEY_LEN],
    const uint8_t id[ROCK_ID_LEN])
{
	crypto_generichash_state st;

	crypto_generichash_init(&st, k_cs, ROCK_KEY_LEN, ROCK_KEY_LEN);
	crypto_generichash_update(&st, (const uint8_t *)LABEL_RMS,
	    strlen(LABEL_RMS));
	crypto_generichash_update(&st, k_sc, ROCK_KEY_LEN);
	crypto_generichash_update(&st, id, ROCK_ID_LEN);
	crypto_generichash_final(&st, rms, ROCK_KEY_LEN);
	sodium_memzero(&st, sizeof(st));
}

void
rock_resume_keys(struct rock_keys *k, int client,
    const uint8_t rms[ROCK_KEY_LEN], const uint8_t nonce_c[ROCK_NONCE_LEN],
    const uint8_t nonce_s[ROCK_NONCE_LEN], const uint8_t id[ROCK_ID_LEN])
{
	crypto_generichash_state st;
	uint8_t both[2 * ROCK_KEY_LEN];

	crypto_generichash_init(&st, rms, ROCK_KEY_LEN, sizeof(both));
	crypto_generichash_update(&st, (const uint8_t *)LABEL_RESUME_KEYS,
	    strlen(LABEL_RESUME_KEYS));
	crypto_generichash_update(&st, nonce_c, ROCK_NONCE_LEN);
	crypto_generichash_update(&st, nonce_s, ROCK_NONCE_LEN);
	crypto_generichash_update(&st, id, ROCK_ID_LEN);
	crypto_generichash_final(&st, both, sizeof(both));
	/* K_cs first, K_sc second. */
	memcpy(client ? k->tx : k->rx, both, ROCK_KEY_LEN);
	memcpy(client ? k->rx : k->tx, both + ROCK_KEY_LEN, ROCK_KEY_LEN);
	sodium_memzero(both, sizeof(both));
	sodium_memzero(&st, sizeof(st));
}

void
rock_resume_tag(uint8_t out[ROCK_TAG_LEN], const uint8_t rms[ROCK_KEY_LEN],
    const uint8_t *sent, size_t nsent, const uint8_t *msg, size_t nmsg)
{
	const struct span s[] = { { sent, nsent }, { msg, nmsg } };

	tag_spans(out, rms, LABEL_RESUME, s, 2);
}

void
rock_early_tag(uint8_t out[ROCK_TAG_LEN], const uint8_t rms[ROCK_KEY_LEN],
    const uint8_t flight[ROCK_EARLY_TOTAL])
{
	const struct span s[] = { { flight, ROCK_EARLY_TOTAL - ROCK_TAG_LEN } };

	tag_spans(out, rms, LABEL_EARLY, s, 1);
}

void
rock_finished_encode(uint8_t out[ROCK_FINISHED_LEN],
    const uint8_t k_cs[ROCK_KEY_LEN], const uint8_t *flight, size_t nflight,
    const uint8_t *answer, size_t nanswer)
{
	const struct span s[] = { { flight, nflight }, { answer, nanswer } };

	out[0] = ROCK_MSG_CLIENT_FINISHED;
	tag_spans(out + 1, k_cs, LABEL_FINISHED, s, 2);
}

/* The sealed part's associated data: the label and the key id. */
static void
ticket_ad(uint8_t ad[sizeof(LABEL_TICKET) - 1 + ROCK_TICKET_KEY_ID_LEN],
    const uint8_t *key_id)
{
	memcpy(ad, LABEL_TICKET, sizeof(LABEL_TICKET) - 1);
	memcpy(ad + sizeof(LABEL_TICKET) - 1, key_id, ROCK_TICKET_KEY_ID_LEN);
}

void
rock_ticket_seal(uint8_t ticket[ROCK_TICKET_LEN],
    const uint8_t key_id[ROCK_TICKET_KEY_ID_LEN],
    const uint8_t key[ROCK_KEY_LEN],
    const uint8_t nonce[ROCK_TICKET_NONCE_LEN], uint64_t issued,
    uint64_t origin, const uint8_t rms[ROCK_KEY_LEN])
{
	uint8_t plain[ROCK_TICKET_PLAIN_LEN];
	uint8_t ad[sizeof(LABEL_TICKET) - 1 + ROCK_TICKET_KEY_ID_LEN];
	uint8_t *box = ticket + ROCK_TICKET_KEY_ID_LEN + ROCK_TICKET_NONCE_LEN;
	int i;

	for (i = 0; i < 8; i++) {
		plain[i] = (uint8_t)(issued >> (56 - 8 * i));
		plain[8 + i] = (uint8_t)(origin >> (56 - 8 * i));
	}
	memcpy(plain + 16, rms, ROCK_KEY_LEN);
	memcpy(ticket, key_id, ROCK_TICKET_KEY_ID_LEN);
	memcpy(ticket + ROCK_TICKET_KEY_ID_LEN, nonce, ROCK_TICKET_NONCE_LEN);
	ticket_ad(ad, key_id);
	crypto_aead_xchacha20poly1305_ietf_encrypt(box, NULL, plain,
	    sizeof(plain), ad, sizeof(ad), NULL, nonce, key);
	sodium_memzero(plain, sizeof(plain));
}

int
rock_ticket_open(uint64_t *issued, uint64_t *origin, uint8_t rms[ROCK_KEY_LEN],
    const uint8_t ticket[ROCK_TICKET_LEN], const uint8_t key[ROCK_KEY_LEN])
{
	uint8_t plain[ROCK_TICKET_PLAIN_LEN];
	uint8_t ad[sizeof(LABEL_TICKET) - 1 + ROCK_TICKET_KEY_ID_LEN];
	const uint8_t *nonce = ticket + ROCK_TICKET_KEY_ID_LEN;
	const uint8_t *box = nonce + ROCK_TICKET_NONCE_LEN;
	int i;

	ticket_ad(ad, ticket);
	if (crypto_aead_xchacha20poly1305_ietf_decrypt(plain, NULL, NULL, box,
	    ROCK_TICKET_PLAIN_LEN + 16, ad, sizeof(ad), nonce, key) != 0)
		return ROCK_ERR_AUTH;
	*issued = *origin = 0;
	for (i = 0; i < 8; i++) {
		*issued = *issued << 8 | plain[i];
		*origin = *origin << 8 | plain[8 + i];
	}
	memcpy(rms, plain + 16, ROCK_KEY_LEN);
	sodium_memzero(plain, sizeof(plain));
	return 0;
}

void
rock_identity_new(struct rock_identity *id)
{
	crypto_sign_keypair(id->pk, id->sk);
}

void
rock_identity_from_seed(struct rock_identity *id,
    const uint8_t seed[ROCK_KEY_LEN])
{
	crypto_sign_seed_keypair(id->pk, id->sk, seed);
}

void
rock_identity_wipe(struct rock_identity *id)
{
	sodium_memzero(id->sk, sizeof(id->sk));
}

void
rock_fleet_announcement(uint8_t *out, size_t n, const uint8_t pk[ROCK_IDENT_LEN])
{
	static const uint8_t nonce[crypto_stream_xchacha20_NONCEBYTES];
	crypto_generichash_state st;
	uint8_t key[ROCK_KEY_LEN];

	crypto_generichash_init(&st, NULL, 0, sizeof(key));
	crypto_generichash_update(&st, (const uint8_t *)LABEL_FLEET,
	    sizeof(LABEL_FLEET) - 1);
	crypto_generichash_update(&st, pk, ROCK_IDENT_LEN);
	crypto_generichash_final(&st, key, sizeof(key));
	crypto_stream_xchacha20(out, n, nonce, key);
}

/* What is signed: BLAKE2b-256 of the label and the spans, so the
 * signature's input has one size whatever the message. */
static void
answer_digest(uint8_t out[DIGEST_LEN], enum rock_answer kind,
    const uint8_t *sent, size_t nsent, const uint8_t *msg, size_t nmsg)
{
	const char *label = kind == ROCK_ANSWER_HELLO ? LABEL_HELLO : LABEL_ERROR;
	crypto_generichash_state st;

	crypto_generichash_init(&st, NULL, 0, DIGEST_LEN);
	crypto_generichash_update(&st, (const uint8_t *)label, strlen(label));
	crypto_generichash_update(&st, sent, nsent);
	crypto_generichash_update(&st, msg, nmsg);
	crypto_generichash_final(&st, out, DIGEST_LEN);
}

void
rock_answer_sign(uint8_t sig[ROCK_SIG_LEN], const struct rock_identity *id,
    enum rock_answer kind, const uint8_t *sent, size_t nsent,
    const uint8_t *msg, size_t nmsg)
{
	uint8_t d[DIGEST_LEN];

	answer_digest(d, kind, sent, nsent, msg, nmsg);
	crypto_sign_detached(sig, NULL, d, sizeof(d), id->sk);
}

int
rock_answer_verify(const uint8_t sig[ROCK_SIG_LEN],
    const uint8_t ident[ROCK_IDENT_LEN], enum rock_answer kind,
    const uint8_t *sent, size_t nsent, const uint8_t *msg, size_t nmsg)
{
	uint8_t d[DIGEST_LEN];

	answer_digest(d, kind, sent, nsent, msg, nmsg);
	return crypto_sign_verify_detached(sig, d, sizeof(d), ident) == 0 ?
	    0 : ROCK_ERR_AUTH;
}

int
rock_equal(const void *a, const void *b, size_t n)
{
	return sodium_memcmp(a, b, n) == 0;
}

uint64_t
rock_id_hash(const uint8_t key[ROCK_ID_HASH_KEY_LEN], const uint8_t *id,
    size_t len)
{
	uint8_t out[crypto_shorthash_BYTES];
	uint64_t h;

	crypto_shorthash(out, id, len, key);
	memcpy(&h, out, sizeof(h));
	return h;
}
