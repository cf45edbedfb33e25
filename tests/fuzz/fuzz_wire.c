/* fuzz_wire.c: libFuzzer harness for every decoder of rock_wire.c: peer bytes never crash, and what decodes encodes back to the same bytes. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "rock_err.h"
#include "rock_wire.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Decoders read a fixed length: the input is copied into exactly that
 * much heap, so a read past it is ASan's to see. */
static uint8_t *
exact(const uint8_t *p, size_t n, size_t want)
{
	uint8_t *b;

	if (n != want || (b = malloc(want)) == NULL)
		return NULL;
	memcpy(b, p, want);
	return b;
}

static void
announce(const uint8_t *p, size_t n)
{
	struct rock_announce a;
	uint8_t out[ROCK_ANNOUNCE_LEN], *in = exact(p, n, ROCK_ANNOUNCE_LEN);

	if (in != NULL && rock_announce_decode(&a, in) == 0) {
		FUZZ_CHECK(a.version_min >= 1 && a.version_min <= a.version_max);
		rock_announce_encode(&a, out);
		FUZZ_CHECK(memcmp(out, in, ROCK_ANNOUNCE_LEN) == 0);
	}
	free(in);
}

static void
client_hello(const uint8_t *p, size_t n)
{
	struct rock_client_hello h;
	uint8_t out[ROCK_CLIENT_HELLO_LEN], *in = exact(p, n, sizeof(out));

	if (in != NULL && rock_client_hello_decode(&h, in) == 0) {
		rock_client_hello_encode(&h, out);
		FUZZ_CHECK(memcmp(out, in, sizeof(out)) == 0);
	}
	free(in);
}

static void
server_hello(const uint8_t *p, size_t n)
{
	struct rock_server_hello h;
	uint8_t out[ROCK_SERVER_HELLO_LEN], *in = exact(p, n, sizeof(out));

	if (in != NULL && rock_server_hello_decode(&h, in) == 0) {
		rock_server_hello_encode(&h, out);
		FUZZ_CHECK(memcmp(out, in, sizeof(out)) == 0);
	}
	free(in);
}

static void
client_resume(const uint8_t *p, size_t n)
{
	struct rock_client_resume h;
	uint8_t out[ROCK_CLIENT_RESUME_LEN], *in = exact(p, n, sizeof(out));

	if (in != NULL && rock_client_resume_decode(&h, in) == 0) {
		rock_client_resume_encode(&h, out);
		FUZZ_CHECK(memcmp(out, in, sizeof(out)) == 0);
	}
	free(in);
}

static void
server_resume(const uint8_t *p, size_t n)
{
	struct rock_server_resume h;
	uint8_t out[ROCK_SERVER_RESUME_LEN], *in = exact(p, n, sizeof(out));

	if (in != NULL && rock_server_resume_decode(&h, in) == 0) {
		rock_server_resume_encode(&h, out);
		FUZZ_CHECK(memcmp(out, in, sizeof(out)) == 0);
	}
	free(in);
}

static void
ticket_msg(const uint8_t *p, size_t n)
{
	struct rock_ticket_msg t;
	uint8_t out[ROCK_TICKET_MSG_LEN], *in = exact(p, n, sizeof(out));

	if (in != NULL && rock_ticket_msg_decode(&t, in) == 0) {
		rock_ticket_msg_encode(&t, out);
		FUZZ_CHECK(memcmp(out, in, sizeof(out)) == 0);
	}
	free(in);
}

static void
udp_address(const uint8_t *p, size_t n)
{
	struct rock_udp_address a;
	uint8_t out[ROCK_UDP_ADDRESS_LEN], *in = exact(p, n, sizeof(out));

	if (in != NULL && rock_udp_address_decode(&a, in) == 0) {
		FUZZ_CHECK(a.family == 4 || a.family == 6);
		rock_udp_address_encode(&a, out);
		FUZZ_CHECK(memcmp(out, in, sizeof(out)) == 0);
	}
	free(in);
}

static void
reconnect_req(const uint8_t *p, size_t n)
{
	struct rock_reconnect_req r;
	uint8_t out[ROCK_RECONNECT_REQ_LEN], *in = exact(p, n, sizeof(out));

	if (in != NULL && rock_reconnect_req_decode(&r, in) == 0) {
		FUZZ_CHECK(r.attempt >= 1 && r.since >= 1 && r.since <= r.attempt);
		rock_reconnect_req_encode(&r, out);
		FUZZ_CHECK(memcmp(out, in, sizeof(out)) == 0);
	}
	free(in);
}

static void
reconnect_ok(const uint8_t *p, size_t n)
{
	struct rock_reconnect_ok o;
	uint8_t out[ROCK_RECONNECT_OK_LEN], *in = exact(p, n, sizeof(out));

	if (in != NULL && rock_reconnect_ok_decode(&o, in) == 0) {
		rock_reconnect_ok_encode(&o, out);
		FUZZ_CHECK(memcmp(out, in, sizeof(out)) == 0);
	}
	free(in);
}

/* An ERROR may arrive in pieces: any prefix is SHORT or decodes the same. */
static void
error_msg(const uint8_t *p, size_t n)
{
	struct rock_error_msg e;
	uint8_t out[ROCK_ERROR_MAX_LEN], *in = malloc(n + 1);
	size_t used = 0, i, len;
	int r;

	if (in == NULL)
		return;
	memcpy(in, p, n);
	r = rock_error_decode(&e, in, n, &used);
	FUZZ_CHECK(r == 0 || r == ROCK_ERR_SHORT || r == ROCK_ERR_PROTOCOL);
	if (r == 0) {
		FUZZ_CHECK(used == 3 + (size_t)e.len + ROCK_SIG_LEN && used <= n);
		FUZZ_CHECK(e.len <= ROCK_ERROR_MAX_TEXT && strlen(e.text) == e.len);
		for (i = 0; i < e.len; i++)
			FUZZ_CHECK(e.text[i] >= 0x20 && e.text[i] < 0x7f);
		len = rock_error_encode(e.code, e.text, out);
		FUZZ_CHECK(len == used && memcmp(out, in, 3) == 0);
		FUZZ_CHECK(rock_error_decode(&e, in, used - 1, &used) ==
		    ROCK_ERR_SHORT);
	}
	free(in);
}

/* A heartbeat packet: header, then records; each record round-trips. */
static void
heartbeat(const uint8_t *p, size_t n)
{
	struct rock_hb_header h;
	struct rock_hb_record r;
	uint8_t out[ROCK_HB_RECORD_LEN > ROCK_HB_HEADER_LEN ?
	    ROCK_HB_RECORD_LEN : ROCK_HB_HEADER_LEN], *in = malloc(n + 1);
	unsigned nrec = 0, i;

	if (in == NULL)
		return;
	memcpy(in, p, n);
	if (rock_hb_packet_check(in, n, &nrec) == 0) {
		FUZZ_CHECK(nrec <= ROCK_HB_MAX_RECORDS &&
		    n == ROCK_HB_HEADER_LEN + nrec * ROCK_HB_RECORD_LEN);
		rock_hb_header_decode(&h, in);
		FUZZ_CHECK(h.nrecords == nrec);
		rock_hb_header_encode(&h, out);
		FUZZ_CHECK(memcmp(out, in, ROCK_HB_HEADER_LEN) == 0);
		for (i = 0; i < nrec; i++) {
			const uint8_t *rec = in + ROCK_HB_HEADER_LEN +
			    i * ROCK_HB_RECORD_LEN;

			rock_hb_record_decode(&r, rec);
			rock_hb_record_encode(&r, out);
			FUZZ_CHECK(memcmp(out, rec, ROCK_HB_RECORD_LEN) == 0);
		}
	}
	free(in);
}

/* rockd's first bytes: MORE only while a magic still agrees. */
static void
sniff(const uint8_t *p, size_t n)
{
	uint8_t *in = malloc(n + 1);
	enum rock_sniff s;

	if (in == NULL)
		return;
	memcpy(in, p, n);
	s = rock_sniff(in, n);
	if (s == ROCK_SNIFF_ANNOUNCE)
		FUZZ_CHECK(n >= ROCK_MAGIC_LEN &&
		    memcmp(in, rock_magic_announce, ROCK_MAGIC_LEN) == 0);
	else if (s == ROCK_SNIFF_RECONNECT)
		FUZZ_CHECK(n >= ROCK_MAGIC_LEN &&
		    memcmp(in, rock_magic_reconnect, ROCK_MAGIC_LEN) == 0);
	else if (s == ROCK_SNIFF_MORE)
		FUZZ_CHECK(n < ROCK_MAGIC_LEN);
	if (n >= 4) {
		uint8_t v = rock_version_pick(in[0], in[1], in[2], in[3]);

		FUZZ_CHECK(v == 0 || (v >= in[0] && v <= in[1] && v >= in[2] &&
		    v <= in[3]));
	}
	free(in);
}

/* The first byte picks the decoder; the rest is what a peer sent. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static void (*const decoders[])(const uint8_t *, size_t) = {
		announce, client_hello, server_hello, reconnect_req,
		reconnect_ok, error_msg, heartbeat, sniff, client_resume,
		server_resume, ticket_msg, udp_address
	};

	if (size < 1)
		return 0;
	decoders[data[0] % (sizeof(decoders) / sizeof(decoders[0]))](data + 1,
	    size - 1);
	return 0;
}
