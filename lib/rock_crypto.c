/* rock_crypto.c: X25519 key exchange and keyed BLAKE2b tags through libsodium. */
#include "config.h"

#include <string.h>

#include <sodium.h>

#include "rock_crypto.h"
#include "rock_err.h"

#define LABEL_HB "rocks hb v3"
#define LABEL_RQ "rocks rq v3"
#define LABEL_OK "rocks ok v3"

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

int
rock_equal(const void *a, const void *b, size_t n)
{
	return sodium_memcmp(a, b, n) == 0;
}
