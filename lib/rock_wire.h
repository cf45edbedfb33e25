/* rock_wire.h: encoding and decoding of every rocks message (doc/PROTOCOL.md). */
#ifndef ROCK_WIRE_H
#define ROCK_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define ROCK_VERSION		7
#define ROCK_MAGIC_LEN		8
#define ROCK_ANNOUNCE_LEN	1024
#define ROCK_ANNOUNCE_RANDOM	1012
#define ROCK_KEY_LEN		32
#define ROCK_ID_LEN		16
#define ROCK_NONCE_LEN		16
#define ROCK_TAG_LEN		16
/* The server's long-term identity: Ed25519. */
#define ROCK_IDENT_LEN		32
#define ROCK_SIG_LEN		64

#define ROCK_FEAT_UDP		0x0001u
#define ROCK_FEAT_RECONNECT	0x0002u
#define ROCK_FEAT_ALL		(ROCK_FEAT_UDP | ROCK_FEAT_RECONNECT)
/* The server names its control socket's address in UDP_ADDRESS (a fleet's
 * node behind a balancer). Never offered in an announcement (a fleet's
 * nodes announce alike whatever their udp-address): requested by every
 * client, granted with UDP by a server that has an address to name. */
#define ROCK_FEAT_UDP_ADDRESS	0x0008u
/* What clients request and servers may grant, but for EARLY. */
#define ROCK_FEAT_REQUESTED	(ROCK_FEAT_ALL | ROCK_FEAT_UDP_ADDRESS)
/* Offered by a server that keeps a replay register (doc/PROTOCOL.md 2.9);
 * granted only in answer to CLIENT_EARLY whose bytes it passed on. */
#define ROCK_FEAT_EARLY		0x0004u

/* Message types on the data connection. */
enum rock_msg_type {
	ROCK_MSG_CLIENT_HELLO = 0x01,
	ROCK_MSG_SERVER_HELLO = 0x02,
	ROCK_MSG_RECONNECT_OK = 0x05,
	ROCK_MSG_CLIENT_RESUME = 0x06,
	ROCK_MSG_SERVER_RESUME = 0x07,
	ROCK_MSG_TICKET = 0x08,
	ROCK_MSG_CLIENT_FINISHED = 0x09,
	ROCK_MSG_CLIENT_EARLY = 0x0a,
	ROCK_MSG_UDP_ADDRESS = 0x0b,
	ROCK_MSG_ERROR = 0x7f
};

enum rock_wire_error {
	ROCK_WERR_STALE = 1,
	ROCK_WERR_VERSION = 2,
	ROCK_WERR_BUSY = 3,
	ROCK_WERR_UNKNOWN = 4,
	ROCK_WERR_AUTH = 5,
	ROCK_WERR_BACKEND = 6,
	ROCK_WERR_PROTOCOL = 7,
	ROCK_WERR_SUPERSEDED = 8,
	ROCK_WERR_TICKET = 9,
	ROCK_WERR_ELSEWHERE = 10
};

/* Flags of heartbeat records and reconnect messages. */
#define ROCK_FLAG_WR_SHUT	0x1u
#define ROCK_FLAG_EOF_SEEN	0x2u
/* Records only, and only for now: the sender hears no records from us. */
#define ROCK_FLAG_QUIET		0x4u
/* Reconnect requests only: a status exchange; the data connection stays. */
#define ROCK_FLAG_STATUS	0x8u
/* Records only: the sender ended the rock with an error (rock kill). */
#define ROCK_FLAG_RESET		0x10u

#define ROCK_CLIENT_HELLO_LEN	62
#define ROCK_SERVER_HELLO_LEN	160
/* What a client sends on a new data connection: announcement, hello. */
#define ROCK_HELLO_TOTAL	(ROCK_ANNOUNCE_LEN + ROCK_CLIENT_HELLO_LEN)
/* Resumption (doc/PROTOCOL.md 2.7): a ticket is the server's sealed box
 * (key id, nonce, XChaCha20-Poly1305 of issue time, the time of its
 * chain's full handshake and the secret). */
#define ROCK_TICKET_KEY_ID_LEN	4
#define ROCK_TICKET_NONCE_LEN	24
#define ROCK_TICKET_PLAIN_LEN	48
#define ROCK_TICKET_LEN		(ROCK_TICKET_KEY_ID_LEN + ROCK_TICKET_NONCE_LEN + \
				 ROCK_TICKET_PLAIN_LEN + 16)
#define ROCK_CLIENT_RESUME_LEN	(30 + ROCK_TICKET_LEN)
#define ROCK_RESUME_TOTAL	(ROCK_ANNOUNCE_LEN + ROCK_CLIENT_RESUME_LEN)
/* CLIENT_EARLY: CLIENT_RESUME's fields, the ticket's age and a tag by
 * the ticket's secret; the client's first bytes follow at once. */
#define ROCK_CLIENT_EARLY_LEN	(ROCK_CLIENT_RESUME_LEN + 4 + ROCK_TAG_LEN)
#define ROCK_CLIENT_EARLY_TAGGED (ROCK_CLIENT_EARLY_LEN - ROCK_TAG_LEN)
#define ROCK_EARLY_TOTAL	(ROCK_ANNOUNCE_LEN + ROCK_CLIENT_EARLY_LEN)
#define ROCK_SERVER_RESUME_LEN	64
#define ROCK_SERVER_RESUME_TAGGED (ROCK_SERVER_RESUME_LEN - ROCK_TAG_LEN)
#define ROCK_TICKET_MSG_LEN	(5 + ROCK_TICKET_LEN)
/* After the TICKET when ROCK_FEAT_UDP_ADDRESS is granted: family, address. */
#define ROCK_UDP_ADDRESS_LEN	18
/* The client's proof that it holds the session's keys, after the answer
 * and before any application byte (doc/PROTOCOL.md 2.8). */
#define ROCK_FINISHED_LEN	(1 + ROCK_TAG_LEN)
/* The longest answer to a first flight, with its TICKET and UDP_ADDRESS. */
#define ROCK_ANSWER_MAX		(ROCK_SERVER_HELLO_LEN + ROCK_TICKET_MSG_LEN + \
				 ROCK_UDP_ADDRESS_LEN)
/* The longest first flight a client sends on a new connection. */
#define ROCK_FIRST_FLIGHT_MAX	ROCK_EARLY_TOTAL
/* SERVER_HELLO's bytes that its signature covers. */
#define ROCK_SERVER_HELLO_SIGNED (ROCK_SERVER_HELLO_LEN - ROCK_SIG_LEN)
#define ROCK_RECONNECT_REQ_LEN	85
#define ROCK_RECONNECT_OK_LEN	37
#define ROCK_ERROR_MAX_TEXT	200
#define ROCK_ERROR_MAX_LEN	(3 + ROCK_ERROR_MAX_TEXT + ROCK_SIG_LEN)

/* A control packet: its header (tagged with its anchor's key over the
 * whole packet), then records, each tagged with its own rock's key. */
#define ROCK_HB_HEADER_LEN	64
#define ROCK_HB_TAGGED_HEADER	48	/* header bytes before the packet's tag */
#define ROCK_HB_RECORD_LEN	76
#define ROCK_HB_MAX_RECORDS	15
#define ROCK_HB_QUIET		0x01u	/* header flag: no packet heard from you */
#define ROCK_HB_MAX_LEN	(ROCK_HB_HEADER_LEN + ROCK_HB_MAX_RECORDS * ROCK_HB_RECORD_LEN)

extern const uint8_t rock_magic_announce[ROCK_MAGIC_LEN];
extern const uint8_t rock_magic_reconnect[ROCK_MAGIC_LEN];

struct rock_announce {
	uint8_t version_max, version_min;
	uint16_t features;
	uint8_t random[ROCK_ANNOUNCE_RANDOM];
};

struct rock_client_hello {
	uint8_t version;
	uint16_t features;
	uint8_t pk[ROCK_KEY_LEN];
	uint32_t rcvbuf, sndbuf;
	uint16_t udp_port;
	uint8_t nonce[ROCK_NONCE_LEN];	/* fresh: a refusal signs it */
};

/* UDP_ADDRESS: where the server's control socket is reached, the port
 * being the answer's. family 4: the first 4 bytes of addr, the rest zero. */
struct rock_udp_address {
	uint8_t family;		/* 4 or 6; 0 in a struct: none named */
	uint8_t addr[16];
};

struct rock_server_hello {
	uint8_t version;
	uint16_t features;
	uint8_t id[ROCK_ID_LEN];
	uint8_t pk[ROCK_KEY_LEN];
	uint32_t rcvbuf, sndbuf;
	uint16_t udp_port;
	uint8_t ident[ROCK_IDENT_LEN];	/* the server's long-term key */
	uint8_t sig[ROCK_SIG_LEN];	/* by it, over the handshake */
	/* not SERVER_HELLO's bytes: the UDP_ADDRESS after its TICKET */
	struct rock_udp_address udp_addr;
};

/* CLIENT_RESUME: a full hello's fields but the key, and the ticket. */
struct rock_client_resume {
	uint8_t version;
	uint16_t features;
	uint32_t rcvbuf, sndbuf;
	uint16_t udp_port;
	uint8_t nonce[ROCK_NONCE_LEN];
	uint8_t ticket[ROCK_TICKET_LEN];
};

/* SERVER_RESUME: a SERVER_HELLO's fields but the keys, the server's
 * nonce, and a tag by the resumption secret over the exchange. */
struct rock_server_resume {
	uint8_t version;
	uint16_t features;
	uint8_t id[ROCK_ID_LEN];
	uint32_t rcvbuf, sndbuf;
	uint16_t udp_port;
	uint8_t nonce[ROCK_NONCE_LEN];
	uint8_t tag[ROCK_TAG_LEN];
};

/* TICKET: for the next connection, after either server answer. */
struct rock_ticket_msg {
	uint32_t lifetime_s;
	uint8_t ticket[ROCK_TICKET_LEN];
};

/* RECONNECT_REQUEST: who, which attempt, and the client's counts; the tag
 * is computed by rock_crypto over the encoded bytes. */
struct rock_reconnect_req {
	uint8_t version;
	uint8_t id[ROCK_ID_LEN];
	uint8_t nonce[ROCK_NONCE_LEN];
	uint32_t attempt;	/* strictly increasing per session, from 1 */
	uint32_t since;		/* lowest attempt still open at the client */
	uint64_t consumed;
	uint64_t end;		/* the client's stream length, with WR_SHUT */
	uint32_t flags;
	uint8_t tag[ROCK_TAG_LEN];
};

/* RECONNECT_OK: the server's counts. */
struct rock_reconnect_ok {
	uint64_t consumed;
	uint64_t end;		/* the server's stream length, with WR_SHUT */
	uint32_t flags;
	uint8_t tag[ROCK_TAG_LEN];
};

/* ERROR: a code, text for logs, and the server's signature over what the
 * client sent on that connection (rock_crypto). */
struct rock_error_msg {
	uint8_t code;
	uint8_t len;
	char text[ROCK_ERROR_MAX_TEXT + 1];
	uint8_t sig[ROCK_SIG_LEN];
};

struct rock_hb_header {
	uint8_t flags;			/* ROCK_HB_QUIET */
	uint8_t nrecords;
	uint8_t anchor[ROCK_ID_LEN];	/* the rock whose key tags the packet */
	uint64_t seq;			/* per anchor and direction, from 1 */
	uint64_t ack;			/* highest seq received under this anchor */
	uint64_t ack_bits;		/* bit i: seq ack - 1 - i received too */
	uint8_t tag[ROCK_TAG_LEN];
};

struct rock_hb_record {
	uint8_t id[ROCK_ID_LEN];
	uint64_t seq;
	uint64_t consumed;
	uint64_t end;		/* the sender's stream length, with WR_SHUT */
	uint32_t flags;
	uint8_t anchor[ROCK_ID_LEN];	/* the rock whose packets speak for this one */
	uint8_t tag[ROCK_TAG_LEN];
};

/* What an answer's signature or tag covers past the client's bytes: the
 * answer's first n bytes, then the ntail bytes that follow it (its TICKET
 * and, granted, UDP_ADDRESS: 2.4, 2.7). Returns the length written. */
size_t rock_answer_covered(uint8_t *out, const uint8_t *answer, size_t n,
    const uint8_t *tail, size_t ntail);
/* What follows SERVER_HELLO or SERVER_RESUME granting features: its
 * TICKET, and UDP_ADDRESS where ROCK_FEAT_UDP_ADDRESS is granted. */
size_t rock_answer_tail_len(uint16_t features);
/* An answer's features (bytes 2..3 of SERVER_HELLO and SERVER_RESUME). */
uint16_t rock_answer_features(const uint8_t answer[4]);

/* Encoders write exactly the message's length into out. */
void rock_announce_encode(const struct rock_announce *a, uint8_t out[ROCK_ANNOUNCE_LEN]);
void rock_client_hello_encode(const struct rock_client_hello *h, uint8_t out[ROCK_CLIENT_HELLO_LEN]);
void rock_server_hello_encode(const struct rock_server_hello *h, uint8_t out[ROCK_SERVER_HELLO_LEN]);
void rock_client_resume_encode(const struct rock_client_resume *h, uint8_t out[ROCK_CLIENT_RESUME_LEN]);
void rock_server_resume_encode(const struct rock_server_resume *h, uint8_t out[ROCK_SERVER_RESUME_LEN]);
void rock_ticket_msg_encode(const struct rock_ticket_msg *t, uint8_t out[ROCK_TICKET_MSG_LEN]);
void rock_udp_address_encode(const struct rock_udp_address *a, uint8_t out[ROCK_UDP_ADDRESS_LEN]);
void rock_reconnect_req_encode(const struct rock_reconnect_req *r, uint8_t out[ROCK_RECONNECT_REQ_LEN]);
void rock_reconnect_ok_encode(const struct rock_reconnect_ok *o, uint8_t out[ROCK_RECONNECT_OK_LEN]);
/* Returns the length written (3 + text length + 64, text cut at 200
 * bytes); the signature, its last 64 bytes, is left zero for the signer. */
size_t rock_error_encode(uint8_t code, const char *text, uint8_t out[ROCK_ERROR_MAX_LEN]);
void rock_hb_record_encode(const struct rock_hb_record *r, uint8_t out[ROCK_HB_RECORD_LEN]);
void rock_hb_header_encode(const struct rock_hb_header *h, uint8_t out[ROCK_HB_HEADER_LEN]);

/*
 * Decoders take bytes from a peer: they never trust them. Each returns 0, or
 * ROCK_ERR_PROTOCOL for bytes that can never become valid (wrong magic, type,
 * version range, reserved bits, length field).
 */
int rock_announce_decode(struct rock_announce *a, const uint8_t in[ROCK_ANNOUNCE_LEN]);
int rock_client_hello_decode(struct rock_client_hello *h, const uint8_t in[ROCK_CLIENT_HELLO_LEN]);
int rock_server_hello_decode(struct rock_server_hello *h, const uint8_t in[ROCK_SERVER_HELLO_LEN]);
int rock_client_resume_decode(struct rock_client_resume *h, const uint8_t in[ROCK_CLIENT_RESUME_LEN]);
/* CLIENT_EARLY with its tag zero (the caller tags bytes 0..TAGGED-1). */
void rock_client_early_encode(const struct rock_client_resume *h, uint32_t age_ms, uint8_t out[ROCK_CLIENT_EARLY_LEN]);
int rock_client_early_decode(struct rock_client_resume *h, uint32_t *age_ms, const uint8_t in[ROCK_CLIENT_EARLY_LEN]);
int rock_server_resume_decode(struct rock_server_resume *h, const uint8_t in[ROCK_SERVER_RESUME_LEN]);
int rock_ticket_msg_decode(struct rock_ticket_msg *t, const uint8_t in[ROCK_TICKET_MSG_LEN]);
int rock_udp_address_decode(struct rock_udp_address *a, const uint8_t in[ROCK_UDP_ADDRESS_LEN]);
int rock_reconnect_req_decode(struct rock_reconnect_req *r, const uint8_t in[ROCK_RECONNECT_REQ_LEN]);
int rock_reconnect_ok_decode(struct rock_reconnect_ok *o, const uint8_t in[ROCK_RECONNECT_OK_LEN]);
/* n bytes available; ROCK_ERR_SHORT when more are needed, else *used set
 * (the whole message, signature included). */
int rock_error_decode(struct rock_error_msg *e, const uint8_t *in, size_t n, size_t *used);
void rock_hb_record_decode(struct rock_hb_record *r, const uint8_t in[ROCK_HB_RECORD_LEN]);
void rock_hb_header_decode(struct rock_hb_header *h, const uint8_t in[ROCK_HB_HEADER_LEN]);
/* Checks a packet's header and length; *nrecords set on success. */
int rock_hb_packet_check(const uint8_t *in, size_t n, unsigned *nrecords);

/* What the first bytes of a new server-side connection are: a full match
 * needs ROCK_MAGIC_LEN bytes; fewer that agree so far give ROCK_SNIFF_MORE. */
enum rock_sniff {
	ROCK_SNIFF_PLAIN = 0,
	ROCK_SNIFF_MORE,
	ROCK_SNIFF_ANNOUNCE,
	ROCK_SNIFF_RECONNECT,
	ROCK_SNIFF_PROBE	/* rock_sniff_read: end of file before any byte */
};
enum rock_sniff rock_sniff(const uint8_t *in, size_t n);

/* The highest version both ranges contain, or 0. */
uint8_t rock_version_pick(uint8_t our_min, uint8_t our_max, uint8_t peer_min,
    uint8_t peer_max);

#endif
