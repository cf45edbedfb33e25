/* wire_fixtures.c: builds the protocol's test vectors from fixed keys, ids and nonces. */
#include "config.h"

#include <string.h>

#include "rock_crypto.h"
#include "rock_wire.h"
#include "wire_fixtures.h"

static void
fill(uint8_t *p, size_t n, uint8_t first)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(first + i);
}

struct fixture {
	struct rock_keypair ckp, skp;
	struct rock_keys ck, sk;
	struct rock_identity ident;
	uint8_t id[ROCK_ID_LEN], cnonce[ROCK_NONCE_LEN];
	/* What the client sent on the new connection, the request: what
	 * the server's answers are signed over. */
	uint8_t hello[ROCK_HELLO_TOTAL], request[ROCK_RECONNECT_REQ_LEN];
	/* The full handshake's resumption secret and the TICKET sealing it. */
	uint8_t rms[ROCK_KEY_LEN], ticket[ROCK_TICKET_MSG_LEN];
};

/* A TICKET under the fixed ticket key (60 61 ... 7f, id 01 02 03 04), its
 * nonce counting up from nonce0, its chain begun at 1000000. */
static void
seal_ticket(const struct fixture *f, const uint8_t rms[ROCK_KEY_LEN],
    uint64_t issued, uint8_t nonce0, uint8_t out[ROCK_TICKET_MSG_LEN])
{
	static const uint8_t key_id[ROCK_TICKET_KEY_ID_LEN] = { 1, 2, 3, 4 };
	struct rock_ticket_msg tm = { 3600, { 0 } };
	uint8_t key[ROCK_KEY_LEN], nonce[ROCK_TICKET_NONCE_LEN];

	(void)f;
	fill(key, sizeof(key), 0x60);
	fill(nonce, sizeof(nonce), nonce0);
	rock_ticket_seal(tm.ticket, key_id, key, nonce, issued, 1000000, rms);
	rock_ticket_msg_encode(&tm, out);
}

static void
fixture_init(struct fixture *f)
{
	uint8_t seed[ROCK_KEY_LEN];

	fill(seed, sizeof(seed), 0x00);
	rock_keypair_from_seed(&f->ckp, seed);
	fill(seed, sizeof(seed), 0x20);
	rock_keypair_from_seed(&f->skp, seed);
	fill(seed, sizeof(seed), 0x40);
	rock_identity_from_seed(&f->ident, seed);
	(void)rock_keys_client(&f->ck, &f->ckp, f->skp.pk);
	(void)rock_keys_server(&f->sk, &f->skp, f->ckp.pk);
	fill(f->id, sizeof(f->id), 0xa0);
	fill(f->cnonce, sizeof(f->cnonce), 0xc0);
}

static void
handshake_vectors(struct fixture *f, wire_vector_fn *emit, void *arg)
{
	struct rock_announce a = { ROCK_VERSION, ROCK_VERSION, ROCK_FEAT_ALL,
	    { 0 } };
	struct rock_client_hello ch = { ROCK_VERSION, ROCK_FEAT_ALL, { 0 },
	    131072, 16384, 4434, { 0 } };
	struct rock_server_hello sh = { ROCK_VERSION, ROCK_FEAT_ALL, { 0 }, { 0 },
	    131072, 87040, 4433, { 0 }, { 0 }, { 0, { 0 } } };
	uint8_t buf[ROCK_ANNOUNCE_LEN], fin[ROCK_FINISHED_LEN];
	uint8_t answer[ROCK_SERVER_HELLO_LEN + ROCK_TICKET_MSG_LEN];
	size_t i;

	for (i = 0; i < ROCK_ANNOUNCE_RANDOM; i++)
		a.random[i] = (uint8_t)(i * 7);
	rock_announce_encode(&a, f->hello);
	emit(arg, "announcement", f->hello, ROCK_ANNOUNCE_LEN);
	memcpy(ch.pk, f->ckp.pk, ROCK_KEY_LEN);
	fill(ch.nonce, sizeof(ch.nonce), 0xb0);
	rock_client_hello_encode(&ch, f->hello + ROCK_ANNOUNCE_LEN);
	emit(arg, "client_hello", f->hello + ROCK_ANNOUNCE_LEN,
	    ROCK_CLIENT_HELLO_LEN);
	memcpy(sh.id, f->id, ROCK_ID_LEN);
	memcpy(sh.pk, f->skp.pk, ROCK_KEY_LEN);
	memcpy(sh.ident, f->ident.pk, ROCK_IDENT_LEN);
	rock_server_hello_encode(&sh, buf);
	/* Signed over the TICKET that follows it too. */
	rock_resumption_secret(f->rms, f->ck.tx, f->ck.rx, f->id);
	seal_ticket(f, f->rms, 1000000, 0xd0, f->ticket);
	memcpy(buf + ROCK_SERVER_HELLO_SIGNED, f->ticket, ROCK_TICKET_MSG_LEN);
	rock_answer_sign(sh.sig, &f->ident, ROCK_ANSWER_HELLO, f->hello,
	    sizeof(f->hello), buf, ROCK_SERVER_HELLO_SIGNED + ROCK_TICKET_MSG_LEN);
	rock_server_hello_encode(&sh, buf);
	emit(arg, "server_hello", buf, ROCK_SERVER_HELLO_LEN);
	emit(arg, "key_cs", f->ck.tx, ROCK_KEY_LEN);
	emit(arg, "key_sc", f->ck.rx, ROCK_KEY_LEN);
	/* The client's proof, over the flight and the answer with its TICKET. */
	memcpy(answer, buf, ROCK_SERVER_HELLO_LEN);
	memcpy(answer + ROCK_SERVER_HELLO_LEN, f->ticket, ROCK_TICKET_MSG_LEN);
	rock_finished_encode(fin, f->ck.tx, f->hello, sizeof(f->hello), answer,
	    sizeof(answer));
	emit(arg, "client_finished", fin, sizeof(fin));
}

/* SERVER_RESUME granting features (connection id a0.., SO_RCVBUF 131072,
 * SO_SNDBUF 87040, UDP port 4433, nonce f0..) answering flight, its
 * TICKET (issued 2000000 in the same chain) after it, into buf; the
 * resumed keys, the client's, into k. */
static void
resume_answer(const struct fixture *f, const uint8_t cnonce[ROCK_NONCE_LEN],
    uint16_t features, const uint8_t *flight, size_t nflight,
    uint8_t buf[ROCK_SERVER_RESUME_LEN + ROCK_TICKET_MSG_LEN],
    struct rock_keys *k)
{
	struct rock_server_resume sr = { ROCK_VERSION, features, { 0 },
	    131072, 87040, 4433, { 0 }, { 0 } };
	uint8_t tagged[ROCK_SERVER_RESUME_TAGGED + ROCK_TICKET_MSG_LEN];
	uint8_t rms2[ROCK_KEY_LEN];

	memcpy(sr.id, f->id, ROCK_ID_LEN);
	fill(sr.nonce, sizeof(sr.nonce), 0xf0);
	rock_resume_keys(k, 1, f->rms, cnonce, sr.nonce, f->id);
	rock_resumption_secret(rms2, k->tx, k->rx, f->id);
	/* The tag covers the answer's first bytes and the TICKET after it. */
	rock_server_resume_encode(&sr, tagged);
	seal_ticket(f, rms2, 2000000, 0x30, tagged + ROCK_SERVER_RESUME_TAGGED);
	rock_resume_tag(sr.tag, f->rms, flight, nflight, tagged,
	    sizeof(tagged));
	rock_server_resume_encode(&sr, buf);
	memcpy(buf + ROCK_SERVER_RESUME_LEN, tagged + ROCK_SERVER_RESUME_TAGGED,
	    ROCK_TICKET_MSG_LEN);
	rock_wipe(rms2, sizeof(rms2));
}

/* Resumption: the full handshake's secret and its TICKET, the
 * resumption's hello and answer (with the resumed session's TICKET, issued
 * at 2000000 in the same chain), its keys. */
static void
resume_vectors(const struct fixture *f, wire_vector_fn *emit, void *arg)
{
	struct rock_client_resume cr = { ROCK_VERSION, ROCK_FEAT_ALL, 131072,
	    16384, 4434, { 0 }, { 0 } };
	uint8_t flight[ROCK_RESUME_TOTAL];
	uint8_t buf[ROCK_SERVER_RESUME_LEN + ROCK_TICKET_MSG_LEN];
	uint8_t fin[ROCK_FINISHED_LEN];
	struct rock_keys k;

	emit(arg, "resumption_secret", f->rms, ROCK_KEY_LEN);
	emit(arg, "ticket", f->ticket, ROCK_TICKET_MSG_LEN);
	memcpy(flight, f->hello, ROCK_ANNOUNCE_LEN);
	fill(cr.nonce, sizeof(cr.nonce), 0xe0);
	memcpy(cr.ticket, f->ticket + 5, ROCK_TICKET_LEN);
	rock_client_resume_encode(&cr, flight + ROCK_ANNOUNCE_LEN);
	emit(arg, "client_resume", flight + ROCK_ANNOUNCE_LEN,
	    ROCK_CLIENT_RESUME_LEN);
	resume_answer(f, cr.nonce, ROCK_FEAT_ALL, flight, sizeof(flight), buf,
	    &k);
	emit(arg, "server_resume", buf, ROCK_SERVER_RESUME_LEN);
	emit(arg, "ticket_resumed", buf + ROCK_SERVER_RESUME_LEN,
	    ROCK_TICKET_MSG_LEN);
	emit(arg, "resume_key_cs", k.tx, ROCK_KEY_LEN);
	emit(arg, "resume_key_sc", k.rx, ROCK_KEY_LEN);
	rock_finished_encode(fin, k.tx, flight, sizeof(flight), buf,
	    sizeof(buf));
	emit(arg, "resume_finished", fin, sizeof(fin));
	rock_keys_wipe(&k);
}

/* 0-RTT resumption: CLIENT_EARLY under the full handshake's ticket (the
 * ticket 1.5 s old), and SERVER_RESUME granting EARLY, its tag over the
 * whole CLIENT_EARLY (with the resumed session's TICKET as above). */
static void
early_vectors(const struct fixture *f, wire_vector_fn *emit, void *arg)
{
	struct rock_client_resume cr = { ROCK_VERSION,
	    ROCK_FEAT_ALL | ROCK_FEAT_EARLY, 131072, 16384, 4434, { 0 }, { 0 } };
	uint8_t flight[ROCK_EARLY_TOTAL];
	uint8_t buf[ROCK_SERVER_RESUME_LEN + ROCK_TICKET_MSG_LEN];
	struct rock_keys k;

	memcpy(flight, f->hello, ROCK_ANNOUNCE_LEN);
	fill(cr.nonce, sizeof(cr.nonce), 0xe0);
	memcpy(cr.ticket, f->ticket + 5, ROCK_TICKET_LEN);
	rock_client_early_encode(&cr, 1500, flight + ROCK_ANNOUNCE_LEN);
	rock_early_tag(flight + ROCK_EARLY_TOTAL - ROCK_TAG_LEN, f->rms, flight);
	emit(arg, "client_early", flight + ROCK_ANNOUNCE_LEN,
	    ROCK_CLIENT_EARLY_LEN);
	resume_answer(f, cr.nonce, ROCK_FEAT_ALL | ROCK_FEAT_EARLY, flight,
	    sizeof(flight), buf, &k);
	emit(arg, "server_resume_early", buf, ROCK_SERVER_RESUME_LEN);
	rock_keys_wipe(&k);
}

static void
heartbeat_vectors(const struct fixture *f, wire_vector_fn *emit, void *arg)
{
	struct rock_hb_record r = { { 0 }, 7, 123456789, 200000000,
	    ROCK_FLAG_WR_SHUT, { 0 }, { 0 } };
	struct rock_hb_header h = { 0, 1, { 0 }, 9, 5, 0x3, { 0 } };
	uint8_t pkt[ROCK_HB_HEADER_LEN + ROCK_HB_RECORD_LEN];

	/* One record, the rock its own anchor; then an idle beat. */
	memcpy(r.id, f->id, ROCK_ID_LEN);
	memcpy(r.anchor, f->id, ROCK_ID_LEN);
	memcpy(h.anchor, f->id, ROCK_ID_LEN);
	rock_hb_record_encode(&r, pkt + ROCK_HB_HEADER_LEN);
	rock_hb_tag(r.tag, f->ck.tx, pkt + ROCK_HB_HEADER_LEN);
	rock_hb_record_encode(&r, pkt + ROCK_HB_HEADER_LEN);
	rock_hb_header_encode(&h, pkt);
	rock_hb_packet_tag(h.tag, f->ck.tx, pkt, sizeof(pkt));
	rock_hb_header_encode(&h, pkt);
	emit(arg, "heartbeat_packet", pkt, sizeof(pkt));
	h.flags = ROCK_HB_QUIET;
	h.nrecords = 0;
	h.seq = 10;
	h.ack = 6;
	h.ack_bits = 0x1;
	memset(h.tag, 0, sizeof(h.tag));
	rock_hb_header_encode(&h, pkt);
	rock_hb_packet_tag(h.tag, f->ck.tx, pkt, ROCK_HB_HEADER_LEN);
	rock_hb_header_encode(&h, pkt);
	emit(arg, "heartbeat_idle", pkt, ROCK_HB_HEADER_LEN);
	/* The rock ended on purpose (rock kill): its last record says so. */
	r.seq = 8;
	r.flags = ROCK_FLAG_WR_SHUT | ROCK_FLAG_RESET;
	memset(r.tag, 0, sizeof(r.tag));
	rock_hb_record_encode(&r, pkt + ROCK_HB_HEADER_LEN);
	rock_hb_tag(r.tag, f->ck.tx, pkt + ROCK_HB_HEADER_LEN);
	rock_hb_record_encode(&r, pkt + ROCK_HB_HEADER_LEN);
	h.flags = 0;
	h.nrecords = 1;
	h.seq = 11;
	memset(h.tag, 0, sizeof(h.tag));
	rock_hb_header_encode(&h, pkt);
	rock_hb_packet_tag(h.tag, f->ck.tx, pkt, sizeof(pkt));
	rock_hb_header_encode(&h, pkt);
	emit(arg, "heartbeat_reset", pkt, sizeof(pkt));
}

/* An ERROR signed over what the client sent. */
static void
error_vector(const struct fixture *f, wire_vector_fn *emit, void *arg,
    const char *name, uint8_t code, const char *text, const uint8_t *sent,
    size_t nsent)
{
	uint8_t buf[ROCK_ERROR_MAX_LEN];
	size_t n = rock_error_encode(code, text, buf);

	rock_answer_sign(buf + n - ROCK_SIG_LEN, &f->ident, ROCK_ANSWER_ERROR,
	    sent, nsent, buf, n - ROCK_SIG_LEN);
	emit(arg, name, buf, n);
}

static void
reconnect_vectors(struct fixture *f, wire_vector_fn *emit, void *arg)
{
	struct rock_reconnect_req rq = { ROCK_VERSION, { 0 }, { 0 }, 3, 2, 2000,
	    5000, ROCK_FLAG_WR_SHUT | ROCK_FLAG_EOF_SEEN, { 0 } };
	struct rock_reconnect_ok ok = { 1000, 0, 0, { 0 } };
	uint8_t buf[ROCK_ERROR_MAX_LEN];

	memcpy(rq.id, f->id, ROCK_ID_LEN);
	memcpy(rq.nonce, f->cnonce, ROCK_NONCE_LEN);
	rock_reconnect_req_encode(&rq, buf);
	rock_request_tag(rq.tag, f->ck.tx, buf);
	rock_reconnect_req_encode(&rq, buf);
	emit(arg, "reconnect_request", buf, ROCK_RECONNECT_REQ_LEN);
	memcpy(f->request, buf, ROCK_RECONNECT_REQ_LEN);
	rock_reconnect_ok_encode(&ok, buf);
	rock_ok_tag(ok.tag, f->sk.tx, f->id, f->cnonce, buf);
	rock_reconnect_ok_encode(&ok, buf);
	emit(arg, "reconnect_ok", buf, ROCK_RECONNECT_OK_LEN);
	error_vector(f, emit, arg, "error_backend", ROCK_WERR_BACKEND,
	    "backend refused", f->hello, sizeof(f->hello));
	error_vector(f, emit, arg, "error_unknown", ROCK_WERR_UNKNOWN, "",
	    f->request, sizeof(f->request));
}

/* A fleet: the announcement every node with the identity makes, and a
 * node's answer to a reconnect for another's session (unsigned). */
static void
fleet_vectors(const struct fixture *f, wire_vector_fn *emit, void *arg)
{
	struct rock_announce a = { ROCK_VERSION, ROCK_VERSION, ROCK_FEAT_ALL,
	    { 0 } };
	uint8_t buf[ROCK_ANNOUNCE_LEN];
	size_t n;

	rock_fleet_announcement(a.random, sizeof(a.random), f->ident.pk);
	rock_announce_encode(&a, buf);
	emit(arg, "fleet_announcement", buf, ROCK_ANNOUNCE_LEN);
	n = rock_error_encode(ROCK_WERR_ELSEWHERE, "another node's session", buf);
	emit(arg, "error_elsewhere", buf, n);
}

/* A node behind a balancer names its control socket: CLIENT_HELLO as
 * above but requesting UDP_ADDRESS too (what clients send), SERVER_HELLO
 * granting it, signed over that hello, the TICKET above and UDP_ADDRESS
 * naming 203.0.113.6 (the port is the answer's, 4433). */
static void
udp_address_vectors(const struct fixture *f, wire_vector_fn *emit, void *arg)
{
	struct rock_client_hello ch = { ROCK_VERSION, ROCK_FEAT_REQUESTED,
	    { 0 }, 131072, 16384, 4434, { 0 } };
	struct rock_server_hello sh = { ROCK_VERSION, ROCK_FEAT_REQUESTED,
	    { 0 }, { 0 }, 131072, 87040, 4433, { 0 }, { 0 }, { 0, { 0 } } };
	struct rock_udp_address ua = { 4, { 203, 0, 113, 6 } };
	uint8_t hello[ROCK_HELLO_TOTAL], buf[ROCK_ANSWER_MAX];
	const size_t tail = ROCK_TICKET_MSG_LEN + ROCK_UDP_ADDRESS_LEN;

	memcpy(hello, f->hello, ROCK_ANNOUNCE_LEN);
	memcpy(ch.pk, f->ckp.pk, ROCK_KEY_LEN);
	fill(ch.nonce, sizeof(ch.nonce), 0xb0);
	rock_client_hello_encode(&ch, hello + ROCK_ANNOUNCE_LEN);
	emit(arg, "client_hello_udp_address", hello + ROCK_ANNOUNCE_LEN,
	    ROCK_CLIENT_HELLO_LEN);
	memcpy(sh.id, f->id, ROCK_ID_LEN);
	memcpy(sh.pk, f->skp.pk, ROCK_KEY_LEN);
	memcpy(sh.ident, f->ident.pk, ROCK_IDENT_LEN);
	rock_server_hello_encode(&sh, buf);
	memcpy(buf + ROCK_SERVER_HELLO_SIGNED, f->ticket, ROCK_TICKET_MSG_LEN);
	rock_udp_address_encode(&ua, buf + ROCK_SERVER_HELLO_SIGNED +
	    ROCK_TICKET_MSG_LEN);
	emit(arg, "udp_address", buf + ROCK_SERVER_HELLO_SIGNED +
	    ROCK_TICKET_MSG_LEN, ROCK_UDP_ADDRESS_LEN);
	rock_answer_sign(sh.sig, &f->ident, ROCK_ANSWER_HELLO, hello,
	    sizeof(hello), buf, ROCK_SERVER_HELLO_SIGNED + tail);
	rock_server_hello_encode(&sh, buf);
	emit(arg, "server_hello_udp_address", buf, ROCK_SERVER_HELLO_LEN);
}

void
wire_vectors(wire_vector_fn *emit, void *arg)
{
	struct fixture f;

	fixture_init(&f);
	emit(arg, "server_identity", f.ident.pk, ROCK_IDENT_LEN);
	handshake_vectors(&f, emit, arg);
	resume_vectors(&f, emit, arg);
	early_vectors(&f, emit, arg);
	heartbeat_vectors(&f, emit, arg);
	reconnect_vectors(&f, emit, arg);
	fleet_vectors(&f, emit, arg);
	udp_address_vectors(&f, emit, arg);
	rock_identity_wipe(&f.ident);
}
