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

/* A server's long-term identity (Ed25519): a 32-byte seed is all a key
 * file holds; sk is libsodium's expanded secret key. */
struct rock_identity {
	uint8_t pk[ROCK_IDENT_LEN];
	uint8_t sk[64];
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
/* Zeroes a secret in a way the compiler keeps (sodium_memzero). */
void rock_wipe(void *p, size_t n);

/* Tags of doc/PROTOCOL.md: BLAKE2b-128 keyed, over a label and the bytes. */
void rock_hb_tag(uint8_t out[ROCK_TAG_LEN], const uint8_t key[ROCK_KEY_LEN],
    const uint8_t record[ROCK_HB_RECORD_LEN - ROCK_TAG_LEN]);
/* A whole control packet of len bytes (header and records), its own tag
 * field left out. */
void rock_hb_packet_tag(uint8_t out[ROCK_TAG_LEN], const uint8_t key[ROCK_KEY_LEN],
    const uint8_t *pkt, size_t len);
/* Encode h into pkt, whose records (h->nrecords) are in place, and tag
 * the whole packet with tx. */
void rock_hb_packet_seal(struct rock_hb_header *h, const uint8_t tx[ROCK_KEY_LEN],
    uint8_t *pkt);
/* RECONNECT_REQUEST's tag, with K_cs, over its first bytes. */
void rock_request_tag(uint8_t out[ROCK_TAG_LEN], const uint8_t key[ROCK_KEY_LEN],
    const uint8_t msg[ROCK_RECONNECT_REQ_LEN - ROCK_TAG_LEN]);
/* RECONNECT_OK's tag, with K_sc: fresh, for it covers the client's nonce. */
void rock_ok_tag(uint8_t out[ROCK_TAG_LEN], const uint8_t key[ROCK_KEY_LEN],
    const uint8_t id[ROCK_ID_LEN], const uint8_t client_nonce[ROCK_NONCE_LEN],
    const uint8_t msg[ROCK_RECONNECT_OK_LEN - ROCK_TAG_LEN]);

/* Resumption (doc/PROTOCOL.md 2.7). The secret a session leaves for the
 * next connection: from its keys and id. */
void rock_resumption_secret(uint8_t rms[ROCK_KEY_LEN],
    const uint8_t k_cs[ROCK_KEY_LEN], const uint8_t k_sc[ROCK_KEY_LEN],
    const uint8_t id[ROCK_ID_LEN]);
/* A resumed session's keys, for the client's side (client 1) or the
 * server's. */
void rock_resume_keys(struct rock_keys *k, int client,
    const uint8_t rms[ROCK_KEY_LEN], const uint8_t nonce_c[ROCK_NONCE_LEN],
    const uint8_t nonce_s[ROCK_NONCE_LEN], const uint8_t id[ROCK_ID_LEN]);
/* SERVER_RESUME's tag: over what the client sent and the answer's bytes
 * before the tag. */
void rock_resume_tag(uint8_t out[ROCK_TAG_LEN], const uint8_t rms[ROCK_KEY_LEN],
    const uint8_t *sent, size_t nsent, const uint8_t *msg, size_t nmsg);
/* CLIENT_EARLY's tag under the ticket's secret: the announcement and
 * every byte of CLIENT_EARLY before the tag. */
void rock_early_tag(uint8_t out[ROCK_TAG_LEN], const uint8_t rms[ROCK_KEY_LEN],
    const uint8_t flight[ROCK_EARLY_TOTAL]);
/* CLIENT_FINISHED: its type, then a tag under K_cs over the first flight
 * and the whole answer (with its TICKET) as they went on the wire. */
void rock_finished_encode(uint8_t out[ROCK_FINISHED_LEN],
    const uint8_t k_cs[ROCK_KEY_LEN], const uint8_t *flight, size_t nflight,
    const uint8_t *answer, size_t nanswer);
/* A ticket sealed under a server's ticket key: when it was issued, when
 * its chain's full handshake was (both the server's clock, ms), the
 * secret. Opened: 0, or ROCK_ERR_AUTH (another key, or bytes changed). */
void rock_ticket_seal(uint8_t ticket[ROCK_TICKET_LEN],
    const uint8_t key_id[ROCK_TICKET_KEY_ID_LEN],
    const uint8_t key[ROCK_KEY_LEN],
    const uint8_t nonce[ROCK_TICKET_NONCE_LEN], uint64_t issued,
    uint64_t origin, const uint8_t rms[ROCK_KEY_LEN]);
int rock_ticket_open(uint64_t *issued, uint64_t *origin,
    uint8_t rms[ROCK_KEY_LEN], const uint8_t ticket[ROCK_TICKET_LEN],
    const uint8_t key[ROCK_KEY_LEN]);

void rock_identity_new(struct rock_identity *id);
void rock_identity_from_seed(struct rock_identity *id,
    const uint8_t seed[ROCK_KEY_LEN]);
void rock_identity_wipe(struct rock_identity *id);
/* A fleet's announcement random part (n bytes), the same for every node
 * with the key pk: XChaCha20's key stream (nonce 0) under BLAKE2b-256 of
 * "rocks fleet announcement v7" and pk (doc/PROTOCOL.md 2.2). */
void rock_fleet_announcement(uint8_t *out, size_t n,
    const uint8_t pk[ROCK_IDENT_LEN]);

/* What a server's answer is signed for (doc/PROTOCOL.md 2.4, 5). */
enum rock_answer { ROCK_ANSWER_HELLO, ROCK_ANSWER_ERROR };
/* The signature of an answer: over its label, every byte the client sent
 * on that connection (sent: the announcement and CLIENT_HELLO, or the
 * RECONNECT_REQUEST; fresh by its nonce) and the answer's own bytes
 * before the signature (msg). */
void rock_answer_sign(uint8_t sig[ROCK_SIG_LEN], const struct rock_identity *id,
    enum rock_answer kind, const uint8_t *sent, size_t nsent,
    const uint8_t *msg, size_t nmsg);
/* 0, or ROCK_ERR_AUTH: not signed by ident for these bytes. */
int rock_answer_verify(const uint8_t sig[ROCK_SIG_LEN],
    const uint8_t ident[ROCK_IDENT_LEN], enum rock_answer kind,
    const uint8_t *sent, size_t nsent, const uint8_t *msg, size_t nmsg);

/* Constant-time comparison: 1 when equal. */
int rock_equal(const void *a, const void *b, size_t n);

/* A rock id's hash under key (SipHash): the engine's tables bucket ids
 * with it, so that a peer who chooses ids (a client's server does) cannot
 * pile them into one bucket. */
#define ROCK_ID_HASH_KEY_LEN 16
uint64_t rock_id_hash(const uint8_t key[ROCK_ID_HASH_KEY_LEN],
    const uint8_t *id, size_t len);

#endif
