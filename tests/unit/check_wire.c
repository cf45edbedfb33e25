/* check_wire.c: the codec and tags against doc/PROTOCOL.md's vectors, and hostile bytes. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rock_crypto.h"
#include "rock_err.h"
#include "rock_wire.h"
#include "suites.h"
#include "wire_fixtures.h"

#define MAX_VECTORS 32
#define MAX_VECTOR_LEN 2048

struct doc_vector {
	char name[64];
	size_t n;
	uint8_t bytes[MAX_VECTOR_LEN];
};

static struct doc_vector doc[MAX_VECTORS];
static int ndoc;

/* Hex lines after "vector NAME LEN", up to a blank line. */
static void
read_hex(FILE *f, struct doc_vector *v)
{
	char line[256], *p, *end;

	while (fgets(line, sizeof(line), f) != NULL && line[0] != '\n') {
		for (p = line; *p != '\0' && *p != '\n'; p = end) {
			unsigned long b = strtoul(p, &end, 16);

			ck_assert_msg(end != p, "bad hex in vector %s", v->name);
			ck_assert_uint_lt(v->n, MAX_VECTOR_LEN);
			v->bytes[v->n++] = (uint8_t)b;
			while (*end == ' ')
				end++;
		}
	}
}

static void
load_doc(void)
{
	const char *top = getenv("top_srcdir");
	char path[4096], line[256];
	size_t declared;
	FILE *f;

	snprintf(path, sizeof(path), "%s/doc/PROTOCOL.md",
	    top != NULL ? top : ROCK_SRCDIR);
	f = fopen(path, "r");
	ck_assert_msg(f != NULL, "cannot open %s", path);
	ndoc = 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		struct doc_vector *v = &doc[ndoc];

		if (strncmp(line, "vector ", 7) != 0)
			continue;
		ck_assert_int_lt(ndoc, MAX_VECTORS);
		ck_assert_int_eq(sscanf(line, "vector %63s %zu", v->name,
		    &declared), 2);
		v->n = 0;
		read_hex(f, v);
		ck_assert_msg(v->n == declared, "vector %s: %zu bytes, says %zu",
		    v->name, v->n, declared);
		ndoc++;
	}
	fclose(f);
}

static int nchecked;

static void
compare_vector(void *arg, const char *name, const uint8_t *p, size_t n)
{
	int i;

	(void)arg;
	for (i = 0; i < ndoc; i++) {
		if (strcmp(doc[i].name, name) != 0)
			continue;
		ck_assert_msg(doc[i].n == n, "%s: doc %zu bytes, code %zu",
		    name, doc[i].n, n);
		ck_assert_msg(memcmp(doc[i].bytes, p, n) == 0,
		    "%s: doc and code differ", name);
		nchecked++;
		return;
	}
	ck_abort_msg("vector %s missing from doc/PROTOCOL.md", name);
}

/* Every vector the code produces is in the document, byte for byte, and
 * the document has no other. */
START_TEST(test_doc_vectors)
{
	ck_assert_int_eq(rock_crypto_init(), 0);
	load_doc();
	nchecked = 0;
	wire_vectors(compare_vector, NULL);
	ck_assert_int_eq(nchecked, ndoc);
	ck_assert_int_ge(ndoc, 9);
}
END_TEST

static const struct doc_vector *
vec(const char *name)
{
	int i;

	for (i = 0; i < ndoc; i++)
		if (strcmp(doc[i].name, name) == 0)
			return &doc[i];
	ck_abort_msg("no vector %s", name);
	return NULL;
}

static void
setup_doc(void)
{
	ck_assert_int_eq(rock_crypto_init(), 0);
	load_doc();
}

START_TEST(test_decode_roundtrip)
{
	struct rock_announce a;
	struct rock_client_hello ch;
	struct rock_server_hello sh;
	struct rock_reconnect_req rq;
	struct rock_reconnect_ok ok;
	uint8_t out[ROCK_ANNOUNCE_LEN];

	ck_assert_int_eq(rock_announce_decode(&a, vec("announcement")->bytes), 0);
	ck_assert_uint_eq(a.version_max, 7);
	ck_assert_uint_eq(a.version_min, 7);
	ck_assert_uint_eq(a.features, ROCK_FEAT_ALL);
	rock_announce_encode(&a, out);
	ck_assert_mem_eq(out, vec("announcement")->bytes, ROCK_ANNOUNCE_LEN);
	ck_assert_int_eq(rock_client_hello_decode(&ch, vec("client_hello")->bytes), 0);
	ck_assert_uint_eq(ch.rcvbuf, 131072);
	ck_assert_uint_eq(ch.sndbuf, 16384);
	ck_assert_uint_eq(ch.udp_port, 4434);
	ck_assert_uint_eq(ch.nonce[0], 0xb0);
	ck_assert_uint_eq(ch.nonce[15], 0xbf);
	ck_assert_int_eq(rock_server_hello_decode(&sh, vec("server_hello")->bytes), 0);
	ck_assert_uint_eq(sh.udp_port, 4433);
	ck_assert_uint_eq(sh.id[0], 0xa0);
	ck_assert_mem_eq(sh.ident, vec("server_identity")->bytes, ROCK_IDENT_LEN);
	rock_server_hello_encode(&sh, out);
	ck_assert_mem_eq(out, vec("server_hello")->bytes, ROCK_SERVER_HELLO_LEN);
	ck_assert_int_eq(rock_reconnect_req_decode(&rq, vec("reconnect_request")->bytes), 0);
	ck_assert_uint_eq(rq.nonce[15], 0xcf);
	ck_assert_uint_eq(rq.attempt, 3);
	ck_assert_uint_eq(rq.since, 2);
	ck_assert_uint_eq(rq.consumed, 2000);
	ck_assert_uint_eq(rq.end, 5000);
	ck_assert_uint_eq(rq.flags, ROCK_FLAG_WR_SHUT | ROCK_FLAG_EOF_SEEN);
	rock_reconnect_req_encode(&rq, out);
	ck_assert_mem_eq(out, vec("reconnect_request")->bytes, ROCK_RECONNECT_REQ_LEN);
	ck_assert_int_eq(rock_reconnect_ok_decode(&ok, vec("reconnect_ok")->bytes), 0);
	ck_assert_uint_eq(ok.consumed, 1000);
	ck_assert_uint_eq(ok.end, 0);
	ck_assert_uint_eq(ok.flags, 0);
}
END_TEST

/* The reconnect's tags: the request with K_cs over its bytes, the answer
 * with K_sc over the id and the client's nonce as well (a recorded answer
 * cannot answer a new request). */
START_TEST(test_reconnect_tags)
{
	const uint8_t *rq = vec("reconnect_request")->bytes;
	const uint8_t *ok = vec("reconnect_ok")->bytes;
	uint8_t b[ROCK_RECONNECT_REQ_LEN], tag[ROCK_TAG_LEN], id[ROCK_ID_LEN],
	    nonce[ROCK_NONCE_LEN];

	memcpy(id, rq + 9, ROCK_ID_LEN);
	memcpy(nonce, rq + 25, ROCK_NONCE_LEN);
	rock_request_tag(tag, vec("key_cs")->bytes, rq);
	ck_assert(rock_equal(tag, rq + 69, ROCK_TAG_LEN));
	memcpy(b, rq, sizeof(b));
	b[56] ^= 0x01;		/* the consumed count changed on the way */
	b[64] ^= 0x01;		/* and the client's end */
	rock_request_tag(tag, vec("key_cs")->bytes, b);
	ck_assert(!rock_equal(tag, rq + 69, ROCK_TAG_LEN));
	rock_ok_tag(tag, vec("key_sc")->bytes, id, nonce, ok);
	ck_assert(rock_equal(tag, ok + 21, ROCK_TAG_LEN));
	nonce[0] ^= 0x01;	/* another request's nonce */
	rock_ok_tag(tag, vec("key_sc")->bytes, id, nonce, ok);
	ck_assert(!rock_equal(tag, ok + 21, ROCK_TAG_LEN));
}
END_TEST

/* A rock's last record after rock kill: WR_SHUT and RESET, authentic
 * under the sender's key, and the RESET bit cannot be added or taken
 * away on the path. */
START_TEST(test_reset_record)
{
	const struct doc_vector *v = vec("heartbeat_reset");
	struct rock_hb_record r;
	uint8_t rec[ROCK_HB_RECORD_LEN], tag[ROCK_TAG_LEN];
	unsigned n;

	ck_assert_int_eq(rock_hb_packet_check(v->bytes, v->n, &n), 0);
	ck_assert_uint_eq(n, 1);
	memcpy(rec, v->bytes + ROCK_HB_HEADER_LEN, sizeof(rec));
	rock_hb_record_decode(&r, rec);
	ck_assert_uint_eq(r.seq, 8);
	ck_assert_uint_eq(r.flags, ROCK_FLAG_WR_SHUT | ROCK_FLAG_RESET);
	rock_hb_tag(tag, vec("key_cs")->bytes, rec);
	ck_assert(rock_equal(tag, r.tag, ROCK_TAG_LEN));
	rec[43] ^= ROCK_FLAG_RESET;	/* flags are big-endian at 40..43 */
	rock_hb_tag(tag, vec("key_cs")->bytes, rec);
	ck_assert(!rock_equal(tag, r.tag, ROCK_TAG_LEN));
}
END_TEST

/* Client and server derive mirrored keys; the vectors' tags verify with
 * the receiver's rx key and fail with any bit changed. */
START_TEST(test_keys_and_tags)
{
	const struct doc_vector *hb = vec("heartbeat_packet");
	uint8_t rec[ROCK_HB_RECORD_LEN], tag[ROCK_TAG_LEN];
	unsigned n;

	const struct doc_vector *idle = vec("heartbeat_idle");
	uint8_t pkt[ROCK_HB_HEADER_LEN + ROCK_HB_RECORD_LEN];
	struct rock_hb_header h;
	size_t i;

	ck_assert_int_eq(rock_hb_packet_check(hb->bytes, hb->n, &n), 0);
	ck_assert_uint_eq(n, 1);
	memcpy(rec, hb->bytes + ROCK_HB_HEADER_LEN, sizeof(rec));
	rock_hb_tag(tag, vec("key_cs")->bytes, rec);
	ck_assert(rock_equal(tag, rec + 60, ROCK_TAG_LEN));
	rec[24] ^= 0x01;	/* consumed count changed by an attacker */
	rock_hb_tag(tag, vec("key_cs")->bytes, rec);
	ck_assert(!rock_equal(tag, rec + 60, ROCK_TAG_LEN));
	rec[24] ^= 0x01;
	rec[39] ^= 0x01;	/* the stream's end changed by an attacker */
	rock_hb_tag(tag, vec("key_cs")->bytes, rec);
	ck_assert(!rock_equal(tag, rec + 60, ROCK_TAG_LEN));
	rec[39] ^= 0x01;
	rec[50] ^= 0x01;	/* another anchor named by an attacker */
	rock_hb_tag(tag, vec("key_cs")->bytes, rec);
	ck_assert(!rock_equal(tag, rec + 60, ROCK_TAG_LEN));
	rec[50] ^= 0x01;
	rock_hb_tag(tag, vec("key_sc")->bytes, rec);	/* wrong direction's key */
	ck_assert(!rock_equal(tag, rec + 60, ROCK_TAG_LEN));

	/* The packet's tag covers its header and every record: any bit
	 * changed outside the tag itself fails it. */
	rock_hb_header_decode(&h, hb->bytes);
	ck_assert_uint_eq(h.seq, 9);
	ck_assert_uint_eq(h.ack, 5);
	ck_assert_uint_eq(h.ack_bits, 3);
	rock_hb_packet_tag(tag, vec("key_cs")->bytes, hb->bytes, hb->n);
	ck_assert(rock_equal(tag, h.tag, ROCK_TAG_LEN));
	rock_hb_packet_tag(tag, vec("key_sc")->bytes, hb->bytes, hb->n);
	ck_assert(!rock_equal(tag, h.tag, ROCK_TAG_LEN));
	for (i = 0; i < hb->n; i++) {
		if (i >= ROCK_HB_TAGGED_HEADER && i < ROCK_HB_HEADER_LEN)
			continue;
		memcpy(pkt, hb->bytes, hb->n);
		pkt[i] ^= 0x80;
		rock_hb_packet_tag(tag, vec("key_cs")->bytes, pkt, hb->n);
		ck_assert(!rock_equal(tag, h.tag, ROCK_TAG_LEN));
	}
	ck_assert_int_eq(rock_hb_packet_check(idle->bytes, idle->n, &n), 0);
	ck_assert_uint_eq(n, 0);
	rock_hb_header_decode(&h, idle->bytes);
	ck_assert_uint_eq(h.flags, ROCK_HB_QUIET);
	rock_hb_packet_tag(tag, vec("key_cs")->bytes, idle->bytes, idle->n);
	ck_assert(rock_equal(tag, h.tag, ROCK_TAG_LEN));
}
END_TEST

START_TEST(test_keys_mirror)
{
	struct rock_keypair c, s;
	struct rock_keys ck, sk;
	uint8_t zero[ROCK_KEY_LEN] = { 0 };

	ck_assert_int_eq(rock_crypto_init(), 0);
	rock_keypair_new(&c);
	rock_keypair_new(&s);
	ck_assert_int_eq(rock_keys_client(&ck, &c, s.pk), 0);
	ck_assert_int_eq(rock_keys_server(&sk, &s, c.pk), 0);
	ck_assert_mem_eq(ck.tx, sk.rx, ROCK_KEY_LEN);
	ck_assert_mem_eq(ck.rx, sk.tx, ROCK_KEY_LEN);
	rock_keypair_wipe(&c);
	ck_assert_mem_eq(c.sk, zero, ROCK_KEY_LEN);
	/* A low-order public key is refused, not turned into a weak key. */
	ck_assert_int_eq(rock_keys_client(&ck, &s, zero), ROCK_ERR_AUTH);
}
END_TEST

START_TEST(test_hostile_decode)
{
	uint8_t b[ROCK_ANNOUNCE_LEN];
	struct rock_announce a;
	struct rock_client_hello ch;
	struct rock_server_hello sh;
	struct rock_reconnect_req rq;
	struct rock_reconnect_ok ok;

	memcpy(b, vec("announcement")->bytes, sizeof(b));
	b[0] = 'G';
	ck_assert_int_eq(rock_announce_decode(&a, b), ROCK_ERR_PROTOCOL);
	b[0] = 0x89;
	b[9] = ROCK_VERSION + 1;	/* min above max */
	ck_assert_int_eq(rock_announce_decode(&a, b), ROCK_ERR_PROTOCOL);
	memcpy(b, vec("client_hello")->bytes, ROCK_CLIENT_HELLO_LEN);
	b[0] = ROCK_MSG_SERVER_HELLO;	/* wrong type */
	ck_assert_int_eq(rock_client_hello_decode(&ch, b), ROCK_ERR_PROTOCOL);
	b[0] = ROCK_MSG_CLIENT_HELLO;
	b[1] = 0;	/* version 0 */
	ck_assert_int_eq(rock_client_hello_decode(&ch, b), ROCK_ERR_PROTOCOL);
	memcpy(b, vec("server_hello")->bytes, ROCK_SERVER_HELLO_LEN);
	b[0] = ROCK_MSG_CLIENT_HELLO;
	ck_assert_int_eq(rock_server_hello_decode(&sh, b), ROCK_ERR_PROTOCOL);
	memcpy(b, vec("reconnect_request")->bytes, ROCK_RECONNECT_REQ_LEN);
	b[5] = 'S';
	ck_assert_int_eq(rock_reconnect_req_decode(&rq, b), ROCK_ERR_PROTOCOL);
	b[5] = 'R';
	b[44] = 0;	/* attempt 0 */
	ck_assert_int_eq(rock_reconnect_req_decode(&rq, b), ROCK_ERR_PROTOCOL);
	b[44] = 1;	/* attempt 1, but attempt 2 still open: nonsense */
	ck_assert_int_eq(rock_reconnect_req_decode(&rq, b), ROCK_ERR_PROTOCOL);
	memcpy(b, vec("reconnect_ok")->bytes, ROCK_RECONNECT_OK_LEN);
	b[0] = ROCK_MSG_SERVER_HELLO;
	ck_assert_int_eq(rock_reconnect_ok_decode(&ok, b), ROCK_ERR_PROTOCOL);
}
END_TEST

START_TEST(test_error_message)
{
	const struct doc_vector *v = vec("error_backend");
	struct rock_error_msg e;
	uint8_t b[ROCK_ERROR_MAX_LEN + 8];
	char big[300];
	size_t used = 0;

	ck_assert_int_eq(rock_error_decode(&e, v->bytes, 2, &used), ROCK_ERR_SHORT);
	ck_assert_int_eq(rock_error_decode(&e, v->bytes, v->n - 1, &used),
	    ROCK_ERR_SHORT);
	ck_assert_int_eq(rock_error_decode(&e, v->bytes, v->n, &used), 0);
	ck_assert_uint_eq(used, v->n);
	ck_assert_uint_eq(e.code, ROCK_WERR_BACKEND);
	ck_assert_str_eq(e.text, "backend refused");
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ck_assert_uint_eq(rock_error_encode(1, big, b), 3 + ROCK_ERROR_MAX_TEXT +
	    ROCK_SIG_LEN);
	b[2] = 201;	/* longer than allowed */
	ck_assert_int_eq(rock_error_decode(&e, b, sizeof(b), &used), ROCK_ERR_PROTOCOL);
	b[2] = 3;
	b[3] = '\n';
	b[4] = 0x1b;	/* control bytes never reach a log as such */
	ck_assert_int_eq(rock_error_decode(&e, b, sizeof(b), &used), 0);
	ck_assert_str_eq(e.text, "??x");
}
END_TEST

/* What the client sent on the vectors' connection: announcement, hello. */
static void
vector_hello(uint8_t out[ROCK_HELLO_TOTAL])
{
	memcpy(out, vec("announcement")->bytes, ROCK_ANNOUNCE_LEN);
	memcpy(out + ROCK_ANNOUNCE_LEN, vec("client_hello")->bytes,
	    ROCK_CLIENT_HELLO_LEN);
}

/* SERVER_HELLO's signed part: its bytes before the signature, then the
 * TICKET that follows it. */
static void
hello_signed_part(uint8_t out[ROCK_SERVER_HELLO_SIGNED + ROCK_TICKET_MSG_LEN],
    const uint8_t *sh)
{
	memcpy(out, sh, ROCK_SERVER_HELLO_SIGNED);
	memcpy(out + ROCK_SERVER_HELLO_SIGNED, vec("ticket")->bytes,
	    ROCK_TICKET_MSG_LEN);
}

/* SERVER_HELLO is signed by the identity it names over the whole
 * handshake: another client hello (nonce, X25519 key), another server
 * X25519 key, another ticket, or another signer fails. */
START_TEST(test_hello_signature)
{
	const uint8_t *ident = vec("server_identity")->bytes;
	const uint8_t *sh = vec("server_hello")->bytes;
	uint8_t hello[ROCK_HELLO_TOTAL], b[ROCK_SERVER_HELLO_SIGNED +
	    ROCK_TICKET_MSG_LEN], other[ROCK_IDENT_LEN];

	vector_hello(hello);
	hello_signed_part(b, sh);
	ck_assert_mem_eq(sh + 64, ident, ROCK_IDENT_LEN);
	ck_assert_int_eq(rock_answer_verify(sh + 96, ident, ROCK_ANSWER_HELLO,
	    hello, sizeof(hello), b, sizeof(b)), 0);
	/* A signature of the hello is not one of an ERROR. */
	ck_assert_int_eq(rock_answer_verify(sh + 96, ident, ROCK_ANSWER_ERROR,
	    hello, sizeof(hello), b, sizeof(b)), ROCK_ERR_AUTH);
	hello[ROCK_ANNOUNCE_LEN + 46] ^= 0x01;	/* another client nonce */
	ck_assert_int_eq(rock_answer_verify(sh + 96, ident, ROCK_ANSWER_HELLO,
	    hello, sizeof(hello), b, sizeof(b)), ROCK_ERR_AUTH);
	vector_hello(hello);
	b[20] ^= 0x01;		/* a server X25519 key put in by the middle */
	ck_assert_int_eq(rock_answer_verify(sh + 96, ident, ROCK_ANSWER_HELLO,
	    hello, sizeof(hello), b, sizeof(b)), ROCK_ERR_AUTH);
	hello_signed_part(b, sh);
	b[sizeof(b) - 1] ^= 0x01;	/* a ticket swapped on the way */
	ck_assert_int_eq(rock_answer_verify(sh + 96, ident, ROCK_ANSWER_HELLO,
	    hello, sizeof(hello), b, sizeof(b)), ROCK_ERR_AUTH);
	hello_signed_part(b, sh);
	memcpy(other, ident, sizeof(other));
	other[0] ^= 0x01;
	ck_assert_int_eq(rock_answer_verify(sh + 96, other, ROCK_ANSWER_HELLO,
	    hello, sizeof(hello), b, sizeof(b)), ROCK_ERR_AUTH);
}
END_TEST

/* ERRORs are signed over what the client sent: the vectors verify; the
 * same refusal for another request (nonce, id) or unsigned does not. */
START_TEST(test_error_signature)
{
	const uint8_t *ident = vec("server_identity")->bytes;
	const struct doc_vector *bk = vec("error_backend");
	const struct doc_vector *un = vec("error_unknown");
	uint8_t hello[ROCK_HELLO_TOTAL], rq[ROCK_RECONNECT_REQ_LEN];
	struct rock_error_msg e;
	size_t used;

	vector_hello(hello);
	memcpy(rq, vec("reconnect_request")->bytes, sizeof(rq));
	ck_assert_int_eq(rock_error_decode(&e, bk->bytes, bk->n, &used), 0);
	ck_assert_uint_eq(used, bk->n);
	ck_assert_int_eq(rock_answer_verify(e.sig, ident, ROCK_ANSWER_ERROR,
	    hello, sizeof(hello), bk->bytes, used - ROCK_SIG_LEN), 0);
	ck_assert_int_eq(rock_error_decode(&e, un->bytes, un->n, &used), 0);
	ck_assert_uint_eq(e.code, ROCK_WERR_UNKNOWN);
	ck_assert_uint_eq(used, 3 + ROCK_SIG_LEN);
	ck_assert_int_eq(rock_answer_verify(e.sig, ident, ROCK_ANSWER_ERROR,
	    rq, sizeof(rq), un->bytes, 3), 0);
	rq[25] ^= 0x01;		/* another attempt's nonce: a replay */
	ck_assert_int_eq(rock_answer_verify(e.sig, ident, ROCK_ANSWER_ERROR,
	    rq, sizeof(rq), un->bytes, 3), ROCK_ERR_AUTH);
	rq[25] ^= 0x01;
	rq[70] ^= 0x01;		/* the tag broken on the way: AUTH for that */
	ck_assert_int_eq(rock_answer_verify(e.sig, ident, ROCK_ANSWER_ERROR,
	    rq, sizeof(rq), un->bytes, 3), ROCK_ERR_AUTH);
	rq[70] ^= 0x01;
	memset(e.sig, 0, sizeof(e.sig));	/* unsigned, as forged */
	ck_assert_int_eq(rock_answer_verify(e.sig, ident, ROCK_ANSWER_ERROR,
	    rq, sizeof(rq), un->bytes, 3), ROCK_ERR_AUTH);
}
END_TEST

START_TEST(test_hb_packet_check)
{
	const struct doc_vector *v = vec("heartbeat_packet");
	uint8_t b[ROCK_HB_MAX_LEN + 64];
	unsigned n;

	memcpy(b, v->bytes, v->n);
	ck_assert_int_eq(rock_hb_packet_check(b, v->n - 1, &n), ROCK_ERR_PROTOCOL);
	ck_assert_int_eq(rock_hb_packet_check(b, v->n + 1, &n), ROCK_ERR_PROTOCOL);
	ck_assert_int_eq(rock_hb_packet_check(b, 3, &n), ROCK_ERR_PROTOCOL);
	b[6] = 0;	/* no record: the idle beat's length only */
	ck_assert_int_eq(rock_hb_packet_check(b, v->n, &n), ROCK_ERR_PROTOCOL);
	ck_assert_int_eq(rock_hb_packet_check(b, ROCK_HB_HEADER_LEN, &n), 0);
	ck_assert_uint_eq(n, 0);
	b[6] = ROCK_HB_MAX_RECORDS;
	ck_assert_int_eq(rock_hb_packet_check(b, ROCK_HB_MAX_LEN, &n), 0);
	ck_assert_uint_eq(n, ROCK_HB_MAX_RECORDS);
	b[6] = ROCK_HB_MAX_RECORDS + 1;
	ck_assert_int_eq(rock_hb_packet_check(b, ROCK_HB_HEADER_LEN +
	    (ROCK_HB_MAX_RECORDS + 1) * ROCK_HB_RECORD_LEN, &n), ROCK_ERR_PROTOCOL);
	b[6] = 1;
	b[5] = 0x02;	/* an unknown flag */
	ck_assert_int_eq(rock_hb_packet_check(b, v->n, &n), ROCK_ERR_PROTOCOL);
	b[5] = 0;
	b[7] = 1;	/* reserved */
	ck_assert_int_eq(rock_hb_packet_check(b, v->n, &n), ROCK_ERR_PROTOCOL);
	b[7] = 0;
	b[3] = 6;	/* version 6 of the channel */
	ck_assert_int_eq(rock_hb_packet_check(b, v->n, &n), ROCK_ERR_PROTOCOL);
	b[3] = 7;
	ck_assert_int_eq(rock_hb_packet_check(b, v->n, &n), 0);
}
END_TEST

/* CLIENT_FINISHED: made from the document's K_cs over the document's
 * flight and answer, for both handshakes; a byte of either changed, or
 * the other direction's key, makes another. */
static void
finished_check(const char *kcs, const char *name, const uint8_t *flight,
    size_t nflight, uint8_t *answer, size_t nanswer)
{
	uint8_t fin[ROCK_FINISHED_LEN], key[ROCK_KEY_LEN];

	memcpy(key, vec(kcs)->bytes, ROCK_KEY_LEN);
	ck_assert_uint_eq(vec(name)->n, ROCK_FINISHED_LEN);
	rock_finished_encode(fin, key, flight, nflight, answer, nanswer);
	ck_assert_uint_eq(fin[0], ROCK_MSG_CLIENT_FINISHED);
	ck_assert_mem_eq(fin, vec(name)->bytes, ROCK_FINISHED_LEN);
	answer[nanswer - 1] ^= 1;
	rock_finished_encode(fin, key, flight, nflight, answer, nanswer);
	ck_assert_mem_ne(fin, vec(name)->bytes, ROCK_FINISHED_LEN);
	answer[nanswer - 1] ^= 1;
	key[0] ^= 1;
	rock_finished_encode(fin, key, flight, nflight, answer, nanswer);
	ck_assert_mem_ne(fin, vec(name)->bytes, ROCK_FINISHED_LEN);
}

START_TEST(test_finished)
{
	uint8_t flight[ROCK_RESUME_TOTAL];
	uint8_t answer[ROCK_ANSWER_MAX];

	memcpy(flight, vec("announcement")->bytes, ROCK_ANNOUNCE_LEN);
	memcpy(flight + ROCK_ANNOUNCE_LEN, vec("client_hello")->bytes,
	    ROCK_CLIENT_HELLO_LEN);
	memcpy(answer, vec("server_hello")->bytes, ROCK_SERVER_HELLO_LEN);
	memcpy(answer + ROCK_SERVER_HELLO_LEN, vec("ticket")->bytes,
	    ROCK_TICKET_MSG_LEN);
	finished_check("key_cs", "client_finished", flight, ROCK_HELLO_TOTAL,
	    answer, ROCK_SERVER_HELLO_LEN + ROCK_TICKET_MSG_LEN);
	memcpy(flight + ROCK_ANNOUNCE_LEN, vec("client_resume")->bytes,
	    ROCK_CLIENT_RESUME_LEN);
	memcpy(answer, vec("server_resume")->bytes, ROCK_SERVER_RESUME_LEN);
	memcpy(answer + ROCK_SERVER_RESUME_LEN, vec("ticket_resumed")->bytes,
	    ROCK_TICKET_MSG_LEN);
	finished_check("resume_key_cs", "resume_finished", flight,
	    ROCK_RESUME_TOTAL, answer, ROCK_SERVER_RESUME_LEN +
	    ROCK_TICKET_MSG_LEN);
}
END_TEST

/* UDP_ADDRESS decodes to the vector's address and back, and refuses
 * any other type, family or padding; SERVER_HELLO granting it verifies
 * over the announcement, the hello asking for it, its TICKET and the
 * UDP_ADDRESS, and not once the address changed. */
START_TEST(test_udp_address)
{
	static const uint8_t want[4] = { 203, 0, 113, 6 };
	uint8_t flight[ROCK_HELLO_TOTAL], covered[ROCK_ANSWER_MAX];
	uint8_t m[ROCK_UDP_ADDRESS_LEN], tail[ROCK_TICKET_MSG_LEN + ROCK_UDP_ADDRESS_LEN];
	struct rock_server_hello sh;
	struct rock_udp_address a;
	size_t n;

	memcpy(m, vec("udp_address")->bytes, sizeof(m));
	ck_assert_int_eq(rock_udp_address_decode(&a, m), 0);
	ck_assert_uint_eq(a.family, 4);
	ck_assert_mem_eq(a.addr, want, 4);
	rock_udp_address_encode(&a, m);
	ck_assert_mem_eq(m, vec("udp_address")->bytes, sizeof(m));
	m[0] = ROCK_MSG_TICKET;
	ck_assert_int_eq(rock_udp_address_decode(&a, m), ROCK_ERR_PROTOCOL);
	m[0] = ROCK_MSG_UDP_ADDRESS;
	m[1] = 5;
	ck_assert_int_eq(rock_udp_address_decode(&a, m), ROCK_ERR_PROTOCOL);
	m[1] = 4;
	m[ROCK_UDP_ADDRESS_LEN - 1] = 1;
	ck_assert_int_eq(rock_udp_address_decode(&a, m), ROCK_ERR_PROTOCOL);
	m[1] = 6;
	ck_assert_int_eq(rock_udp_address_decode(&a, m), 0);

	memcpy(flight, vec("announcement")->bytes, ROCK_ANNOUNCE_LEN);
	memcpy(flight + ROCK_ANNOUNCE_LEN,
	    vec("client_hello_udp_address")->bytes, ROCK_CLIENT_HELLO_LEN);
	ck_assert_int_eq(rock_server_hello_decode(&sh,
	    vec("server_hello_udp_address")->bytes), 0);
	ck_assert_uint_eq(sh.features, ROCK_FEAT_UDP | ROCK_FEAT_RECONNECT |
	    ROCK_FEAT_UDP_ADDRESS);
	ck_assert_uint_eq(rock_answer_tail_len(sh.features),
	    ROCK_TICKET_MSG_LEN + ROCK_UDP_ADDRESS_LEN);
	memcpy(m, vec("udp_address")->bytes, sizeof(m));
	memcpy(tail, vec("ticket")->bytes, ROCK_TICKET_MSG_LEN);
	memcpy(tail + ROCK_TICKET_MSG_LEN, m, sizeof(m));
	n = rock_answer_covered(covered, vec("server_hello_udp_address")->bytes,
	    ROCK_SERVER_HELLO_SIGNED, tail, sizeof(tail));
	ck_assert_uint_eq(n, ROCK_SERVER_HELLO_SIGNED + ROCK_TICKET_MSG_LEN +
	    ROCK_UDP_ADDRESS_LEN);
	ck_assert_int_eq(rock_answer_verify(sh.sig, sh.ident, ROCK_ANSWER_HELLO,
	    flight, sizeof(flight), covered, n), 0);
	covered[n - 16] ^= 1;	/* 203.0.113.6 -> 202.0.113.6 */
	ck_assert_int_ne(rock_answer_verify(sh.sig, sh.ident, ROCK_ANSWER_HELLO,
	    flight, sizeof(flight), covered, n), 0);
}
END_TEST

/* The resumption's messages decode to the fixture's fields and back to
 * the same bytes; its ticket opens under the fixture's key only, and not
 * once a byte of it changed. */
START_TEST(test_resume_codec)
{
	static const uint8_t key_id[ROCK_TICKET_KEY_ID_LEN] = { 1, 2, 3, 4 };
	uint8_t key[ROCK_KEY_LEN], rms[ROCK_KEY_LEN], out[ROCK_CLIENT_RESUME_LEN];
	struct rock_client_resume cr;
	struct rock_server_resume sr;
	struct rock_ticket_msg tm;
	uint64_t issued = 0, origin = 0;
	size_t i;

	ck_assert_int_eq(rock_ticket_msg_decode(&tm, vec("ticket")->bytes), 0);
	ck_assert_uint_eq(tm.lifetime_s, 3600);
	ck_assert_mem_eq(tm.ticket, key_id, ROCK_TICKET_KEY_ID_LEN);
	rock_ticket_msg_encode(&tm, out);
	ck_assert_mem_eq(out, vec("ticket")->bytes, ROCK_TICKET_MSG_LEN);
	for (i = 0; i < sizeof(key); i++)
		key[i] = (uint8_t)(0x60 + i);
	ck_assert_int_eq(rock_ticket_open(&issued, &origin, rms, tm.ticket, key), 0);
	ck_assert_uint_eq(issued, 1000000);
	ck_assert_uint_eq(origin, 1000000);
	ck_assert_mem_eq(rms, vec("resumption_secret")->bytes, ROCK_KEY_LEN);
	tm.ticket[ROCK_TICKET_LEN - 1] ^= 1;
	ck_assert_int_eq(rock_ticket_open(&issued, &origin, rms, tm.ticket, key),
	    ROCK_ERR_AUTH);
	tm.ticket[ROCK_TICKET_LEN - 1] ^= 1;
	tm.ticket[0] ^= 1;	/* the key id is bound to the box */
	ck_assert_int_eq(rock_ticket_open(&issued, &origin, rms, tm.ticket, key),
	    ROCK_ERR_AUTH);
	tm.ticket[0] ^= 1;
	key[0] ^= 1;
	ck_assert_int_eq(rock_ticket_open(&issued, &origin, rms, tm.ticket, key),
	    ROCK_ERR_AUTH);
	ck_assert_int_eq(rock_client_resume_decode(&cr,
	    vec("client_resume")->bytes), 0);
	ck_assert_uint_eq(cr.version, ROCK_VERSION);
	ck_assert_uint_eq(cr.rcvbuf, 131072);
	ck_assert_uint_eq(cr.udp_port, 4434);
	ck_assert_mem_eq(cr.ticket, tm.ticket, ROCK_TICKET_LEN);
	rock_client_resume_encode(&cr, out);
	ck_assert_mem_eq(out, vec("client_resume")->bytes, ROCK_CLIENT_RESUME_LEN);
	ck_assert_int_eq(rock_server_resume_decode(&sr,
	    vec("server_resume")->bytes), 0);
	ck_assert_uint_eq(sr.sndbuf, 87040);
	ck_assert_uint_eq(sr.udp_port, 4433);
	rock_server_resume_encode(&sr, out);
	ck_assert_mem_eq(out, vec("server_resume")->bytes, ROCK_SERVER_RESUME_LEN);
	/* Hostile: another type, a reserved field set. */
	memcpy(out, vec("server_resume")->bytes, ROCK_SERVER_RESUME_LEN);
	out[31] = 1;
	ck_assert_int_eq(rock_server_resume_decode(&sr, out), ROCK_ERR_PROTOCOL);
	ck_assert_int_eq(rock_client_resume_decode(&cr,
	    vec("client_hello")->bytes), ROCK_ERR_PROTOCOL);
	ck_assert_int_eq(rock_ticket_msg_decode(&tm,
	    vec("server_resume")->bytes), ROCK_ERR_PROTOCOL);
}
END_TEST

START_TEST(test_sniff)
{
	const uint8_t *ann = vec("announcement")->bytes;
	const uint8_t *rc = vec("reconnect_request")->bytes;

	ck_assert_int_eq(rock_sniff(ann, 0), ROCK_SNIFF_MORE);
	ck_assert_int_eq(rock_sniff(ann, 5), ROCK_SNIFF_MORE);
	ck_assert_int_eq(rock_sniff(ann, 8), ROCK_SNIFF_ANNOUNCE);
	ck_assert_int_eq(rock_sniff(rc, 6), ROCK_SNIFF_MORE);
	ck_assert_int_eq(rock_sniff(rc, ROCK_RECONNECT_REQ_LEN), ROCK_SNIFF_RECONNECT);
	ck_assert_int_eq(rock_sniff((const uint8_t *)"GET / HTTP/1.1", 14), ROCK_SNIFF_PLAIN);
	ck_assert_int_eq(rock_sniff((const uint8_t *)"SSH-2.0", 7), ROCK_SNIFF_PLAIN);
	ck_assert_int_eq(rock_sniff((const uint8_t *)"\x89ROCKX", 6), ROCK_SNIFF_PLAIN);
}
END_TEST

START_TEST(test_version_pick)
{
	ck_assert_uint_eq(rock_version_pick(1, 1, 1, 1), 1);
	ck_assert_uint_eq(rock_version_pick(1, 3, 2, 5), 3);
	ck_assert_uint_eq(rock_version_pick(1, 1, 2, 3), 0);
	ck_assert_uint_eq(rock_version_pick(3, 4, 1, 2), 0);
}
END_TEST

Suite *
wire_suite(void)
{
	Suite *s = suite_create("wire");
	TCase *doc_tc = tcase_create("vectors");
	TCase *tc = tcase_create("codec");

	tcase_add_test(doc_tc, test_doc_vectors);
	tcase_add_test(doc_tc, test_keys_mirror);
	tcase_add_unchecked_fixture(tc, setup_doc, NULL);
	tcase_add_test(tc, test_decode_roundtrip);
	tcase_add_test(tc, test_resume_codec);
	tcase_add_test(tc, test_finished);
	tcase_add_test(tc, test_keys_and_tags);
	tcase_add_test(tc, test_reset_record);
	tcase_add_test(tc, test_reconnect_tags);
	tcase_add_test(tc, test_hostile_decode);
	tcase_add_test(tc, test_error_message);
	tcase_add_test(tc, test_hb_packet_check);
	tcase_add_test(tc, test_hello_signature);
	tcase_add_test(tc, test_error_signature);
	tcase_add_test(tc, test_udp_address);
	tcase_add_test(tc, test_sniff);
	tcase_add_test(tc, test_version_pick);
	suite_add_tcase(s, doc_tc);
	suite_add_tcase(s, tc);
	return s;
}
