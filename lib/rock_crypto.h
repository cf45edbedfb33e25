/* rock_crypto.h: key exchange, session keys and message tags (libsodium only). */
#ifndef ROCK_CRYPTO_H
#define ROCK_CRYPTO_H

#include <stddef.h>
#include <stdint.h>

#include "rock_wire.h"

struct rock_keypair {
	uint8_t pk[ROCK_KEY_LEN];
	uint8_t sk[ROCK_KEY_LEN];
};

/* tx: what we authenticate with; rx: what the peer authenticates with. */
struct rock_keys {
	uint8_t tx[ROCK_KEY_LEN];
	uint8_t rx[ROCK_KEY_LEN];
};

/* sodium_init(); 0 or ROCK_ERR_CRYPTO. Safe to call again. */
int rock_crypto_init(void);

void rock_keypair_new(struct rock_keypair *kp);
void rock_keypair_from_seed(struct rock_keypair *kp, const uint8_t seed[ROCK_KEY_LEN]);
/* Wipe the secret key; a keypair is used for one handshake only. */
void rock_keypair_wipe(struct rock_keypair *kp);

/* Session keys from our keypair and the peer's public key; ROCK_ERR_AUTH
 * for a public key libsodium rejects (low order points). */
int rock_keys_client(struct rock_keys *k, const struct rock_keypair *own,
    const uint8_t server_pk[ROCK_KEY_LEN]);
int rock_keys_server(struct rock_keys *k, const struct rock_keypair *own,
    const uint8_t client_pk[ROCK_KEY_LEN]);
void rock_keys_wipe(struct rock_keys *k);

void rock_random(void *buf, size_t n);

/* Tags of doc/PROTOCOL.md: BLAKE2b-128 keyed, over a label and the bytes. */
void rock_hb_tag(uint8_t out[ROCK_TAG_LEN], const uint8_t key[ROCK_KEY_LEN],
    const uint8_t record[ROCK_HB_RECORD_LEN - ROCK_TAG_LEN]);
/* RECONNECT_REQUEST's tag, with K_cs, over its first bytes. */
void rock_request_tag(uint8_t out[ROCK_TAG_LEN], const uint8_t key[ROCK_KEY_LEN],
    const uint8_t msg[ROCK_RECONNECT_REQ_LEN - ROCK_TAG_LEN]);
/* RECONNECT_OK's tag, with K_sc: fresh, for it covers the client's nonce. */
void rock_ok_tag(uint8_t out[ROCK_TAG_LEN], const uint8_t key[ROCK_KEY_LEN],
    const uint8_t id[ROCK_ID_LEN], const uint8_t client_nonce[ROCK_NONCE_LEN],
    const uint8_t msg[ROCK_RECONNECT_OK_LEN - ROCK_TAG_LEN]);

/* Constant-time comparison: 1 when equal. */
int rock_equal(const void *a, const void *b, size_t n);

#endif
