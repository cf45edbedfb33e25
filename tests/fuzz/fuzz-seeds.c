/* fuzz-seeds.c: writes the fuzz harnesses' seed corpora (tests/fuzz/corpus) from the real encoders and the protocol's vectors. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rock_crypto.h"
#include "rock_wire.h"
#include "fuzz_engine.h"
#include "wire_fixtures.h"

static const char *top;

static void
put(const char *harness, const char *name, const void *p, size_t n)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", top, harness);
	if (mkdir(path, 0755) != 0 && errno != EEXIST) {
		perror(path);
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/%s/%s", top, harness, name);
	if ((f = fopen(path, "wb")) == NULL || fwrite(p, 1, n, f) != n ||
	    fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

/* A harness's control bytes, then a message. */
static void
put_with(const char *harness, const char *name, const uint8_t *head,
    size_t nhead, const uint8_t *p, size_t n)
{
	uint8_t buf[8192];

	memcpy(buf, head, nhead);
	memcpy(buf + nhead, p, n);
	put(harness, name, buf, nhead + n);
}

/* The vectors' announcement and SERVER_HELLO (its key is a real one),
 * kept for the client's seeds. */
static uint8_t vec_ann[ROCK_ANNOUNCE_LEN];
static uint8_t vec_sh[ROCK_SERVER_HELLO_LEN + ROCK_TICKET_MSG_LEN];

/* fuzz_wire: the first byte picks the decoder, in its table's order. */
static void
wire_seed(void *arg, const char *name, const uint8_t *p, size_t n)
{
	static const char *const order[] = { "announcement", "client_hello",
	    "server_hello", "reconnect_request", "reconnect_ok",
	    "error_backend", "heartbeat_packet", "", "client_resume",
	    "server_resume", "ticket", "udp_address" };
	uint8_t sel;

	(void)arg;
	if (strcmp(name, "announcement") == 0)
		memcpy(vec_ann, p, sizeof(vec_ann));
	/* The server's answer: SERVER_HELLO, then its TICKET. */
	if (strcmp(name, "server_hello") == 0)
		memcpy(vec_sh, p, ROCK_SERVER_HELLO_LEN);
	if (strcmp(name, "ticket") == 0)
		memcpy(vec_sh + ROCK_SERVER_HELLO_LEN, p, ROCK_TICKET_MSG_LEN);
	for (sel = 0; sel < sizeof(order) / sizeof(order[0]); sel++)
		if (strcmp(name, order[sel]) == 0) {
			put_with("wire", name, &sel, 1, p, n);
			if (sel == 0 || sel == 3) {	/* rockd's sniff */
				uint8_t s = 7;

				put_with("wire", sel == 0 ? "sniff_announce" :
				    "sniff_reconnect", &s, 1, p, 12);
			}
		}
}

static void
record(uint8_t *out, int rock, uint64_t seq, uint64_t consumed, uint64_t end,
    uint32_t flags)
{
	struct rock_hb_record r;

	memset(&r, 0, sizeof(r));
	fuzz_rock_id(rock, r.id);
	fuzz_rock_id(0, r.anchor);
	r.seq = seq;
	r.consumed = consumed;
	r.end = end;
	r.flags = flags;
	rock_hb_record_encode(&r, out);
}

#define R(i) (ROCK_HB_HEADER_LEN + (i) * ROCK_HB_RECORD_LEN)

/* A packet under rock 0, acknowledging its first packet (tagged by the
 * harness). */
static void
header(uint8_t *out, uint8_t nrecords, uint64_t seq)
{
	struct rock_hb_header h;

	memset(&h, 0, sizeof(h));
	h.nrecords = nrecords;
	fuzz_rock_id(0, h.anchor);
	h.seq = seq;
	h.ack = 1;
	rock_hb_header_encode(&h, out);
}

/* fuzz_control: seal mask, three rocks' setups, a datagram. */
static void
control_seeds(void)
{
	uint8_t pkt[ROCK_HB_MAX_LEN];
	const uint8_t all[4] = { 0xff, 0x32, 0x8f, 0x00 };
	const uint8_t shut[4] = { 0xff, 0x4e, 0x4f, 0x03 };
	const uint8_t forged[4] = { 0x00, 0x32, 0x33, 0x02 };

	header(pkt, 3, 1);
	record(pkt + R(0), 0, 1, 1536, 0, 0);
	record(pkt + R(1), 1, 5, 4096, 0, 0);
	record(pkt + R(2), 2, 2, 0, 0, 0);
	put_with("control", "three_acks", all, 4, pkt, R(3));
	put_with("control", "forged", forged, 4, pkt, R(3));
	header(pkt, 2, 2);
	record(pkt + R(0), 0, 9, 2048, 777, ROCK_FLAG_WR_SHUT | ROCK_FLAG_EOF_SEEN);
	record(pkt + R(1), 1, 9, 2048, 2048, ROCK_FLAG_WR_SHUT | ROCK_FLAG_EOF_SEEN);
	put_with("control", "both_ends", shut, 4, pkt, R(2));
	header(pkt, 1, 3);
	record(pkt + R(0), 0, 3, 99999, 0, 0);
	put_with("control", "ack_past_end", all, 4, pkt, R(1));
	record(pkt + R(0), 0, 0, 0, 0, 0);
	put_with("control", "seq_zero", all, 4, pkt, R(1));
	header(pkt, 0, 4);
	put_with("control", "idle_beat", all, 4, pkt, R(0));
}

static void
request(uint8_t *out, int rock, uint32_t attempt, uint32_t since,
    uint64_t consumed, uint64_t end, uint32_t flags)
{
	struct rock_reconnect_req rq;

	memset(&rq, 0, sizeof(rq));
	rq.version = ROCK_VERSION;
	fuzz_rock_id(rock, rq.id);
	memset(rq.nonce, 0xc0, sizeof(rq.nonce));
	rq.attempt = attempt;
	rq.since = since;
	rq.consumed = consumed;
	rq.end = end;
	rq.flags = flags;
	rock_reconnect_req_encode(&rq, out);
}

/* fuzz_accept: mode, rock 0's setup, bytes read early, the client's bytes. */
static void
accept_seeds(void)
{
	struct rock_client_hello ch = { ROCK_VERSION, ROCK_FEAT_ALL, { 0 },
	    131072, 16384, 4434, { 0 } };
	uint8_t buf[ROCK_ANNOUNCE_LEN + ROCK_CLIENT_HELLO_LEN];
	const uint8_t hello[3] = { 0x06, 0x00, 8 }, refuse[3] = { 0x02, 0x00, 3 };
	const uint8_t stale[3] = { 0x04, 0x00, 8 }, rec[3] = { 0x03, 0x33, 8 };
	const uint8_t shut[3] = { 0x03, 0x4f, 0 };
	struct rock_announce a = { ROCK_VERSION, ROCK_VERSION, ROCK_FEAT_ALL,
	    { 0 } };

	memset(ch.pk, 9, sizeof(ch.pk));
	rock_client_hello_encode(&ch, buf);
	put_with("accept", "hello", hello, 3, buf, ROCK_CLIENT_HELLO_LEN);
	put_with("accept", "hello_refused", refuse, 3, buf, ROCK_CLIENT_HELLO_LEN);
	rock_announce_encode(&a, buf);
	rock_client_hello_encode(&ch, buf + ROCK_ANNOUNCE_LEN);
	put_with("accept", "stale_announcement", stale, 3, buf, sizeof(buf));
	request(buf, 0, 1, 1, 0, 0, 0);
	put_with("accept", "reconnect", rec, 3, buf, ROCK_RECONNECT_REQ_LEN);
	request(buf, 0, 2, 1, 100, 0, ROCK_FLAG_STATUS);
	put_with("accept", "status", rec, 3, buf, ROCK_RECONNECT_REQ_LEN);
	request(buf, 0, 3, 3, 2048, 2048, ROCK_FLAG_WR_SHUT | ROCK_FLAG_EOF_SEEN);
	put_with("accept", "reconnect_ended", shut, 3, buf, ROCK_RECONNECT_REQ_LEN);
	request(buf, 1, 1, 1, 0, 0, 0);
	put_with("accept", "unknown_rock", rec, 3, buf, ROCK_RECONNECT_REQ_LEN);
}

/* fuzz_status: seal, rock 0's setup, the server's answer. */
static void
status_seeds(void)
{
	struct rock_reconnect_ok ok = { 1000, 0, 0, { 0 } };
	uint8_t buf[ROCK_ERROR_MAX_LEN];
	const uint8_t sealed[2] = { 1, 0x32 }, ended[2] = { 1, 0x4e };
	size_t n;

	rock_reconnect_ok_encode(&ok, buf);
	put_with("status", "ok_ack", sealed, 2, buf, ROCK_RECONNECT_OK_LEN);
	ok.consumed = 0;
	ok.end = 5;
	ok.flags = ROCK_FLAG_WR_SHUT | ROCK_FLAG_EOF_SEEN;
	rock_reconnect_ok_encode(&ok, buf);
	put_with("status", "ok_ended", ended, 2, buf, ROCK_RECONNECT_OK_LEN);
	n = rock_error_encode(ROCK_WERR_UNKNOWN, "no such session", buf);
	put_with("status", "error", sealed, 2, buf, n);
}

/* fuzz_dial: tag bit, rock 0's setup, the answer to its first attempt:
 * an OK, a refusal nobody signed, an ERROR longer than any (which once
 * overran the attempt's buffer). */
static void
dial_seeds(void)
{
	struct rock_reconnect_ok ok = { 1000, 0, 0, { 0 } };
	uint8_t buf[3 + 255 + ROCK_SIG_LEN];
	const uint8_t sealed[2] = { 1, 0x32 }, plain[2] = { 0, 0x02 };
	size_t n;

	rock_reconnect_ok_encode(&ok, buf);
	put_with("dial", "ok", sealed, 2, buf, ROCK_RECONNECT_OK_LEN);
	n = rock_error_encode(ROCK_WERR_UNKNOWN, "no such session", buf);
	put_with("dial", "unknown_unsigned", plain, 2, buf, n);
	memset(buf, 'A', sizeof(buf));
	buf[0] = ROCK_MSG_ERROR;
	buf[1] = ROCK_WERR_UNKNOWN;
	buf[2] = 255;
	put_with("dial", "error_too_long", plain, 2, buf, sizeof(buf));
}

/* fuzz_sniff: the engine's announcement first (bit 0), where the first
 * piece ends, the client's bytes. */
static void
sniff_seeds(void)
{
	struct rock_client_hello ch = { ROCK_VERSION, ROCK_FEAT_ALL, { 0 },
	    131072, 16384, 4434, { 0 } };
	uint8_t buf[ROCK_RECONNECT_REQ_LEN];
	const uint8_t hello[2] = { 1, 5 }, probe[2] = { 0, 0 };
	const uint8_t rec[2] = { 0, 4 }, plain[2] = { 0, 3 };
	static const char get[] = "GET / HTTP/1.0\r\n\r\n";

	rock_client_hello_encode(&ch, buf);
	put_with("sniff", "hello", hello, 2, buf, ROCK_CLIENT_HELLO_LEN);
	put("sniff", "probe", probe, 2);
	request(buf, 0, 1, 1, 0, 0, 0);
	put_with("sniff", "reconnect", rec, 2, buf, ROCK_RECONNECT_REQ_LEN);
	put_with("sniff", "plain", plain, 2, (const uint8_t *)get, strlen(get));
	put_with("sniff", "magic_then_plain", plain, 2, rock_magic_announce, 5);
}

/* One answer of fuzz_client's server: its 16-bit length, its bytes. */
static size_t
answer(uint8_t *out, const uint8_t *p, size_t n)
{
	out[0] = (uint8_t)(n >> 8);
	out[1] = (uint8_t)n;
	memcpy(out + 2, p, n);
	return 2 + n;
}

/* fuzz_client: the probe's announcement, the hello's answer, and after
 * a STALE the same again. */
static void
client_seeds(void)
{
	uint8_t buf[4 * (2 + ROCK_ANNOUNCE_LEN)], err[ROCK_ERROR_MAX_LEN];
	size_t n, e;

	n = answer(buf, vec_ann, sizeof(vec_ann));
	n += answer(buf + n, vec_sh, sizeof(vec_sh));
	put("client", "connected", buf, n);
	e = rock_error_encode(ROCK_WERR_STALE, "stale announcement", err);
	n = answer(buf, vec_ann, sizeof(vec_ann));
	n += answer(buf + n, err, e);
	n += answer(buf + n, vec_ann, sizeof(vec_ann));
	n += answer(buf + n, vec_sh, sizeof(vec_sh));
	put("client", "stale_then_connected", buf, n);
	e = rock_error_encode(ROCK_WERR_BACKEND, "backend refused", err);
	n = answer(buf, vec_ann, sizeof(vec_ann));
	n += answer(buf + n, err, e);
	put("client", "refused", buf, n);
	put("client", "plain_server", "SSH-2.0-OpenSSH_9.2\r\n", 21);
}

int
main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: fuzz-seeds CORPUS-DIR\n");
		return 2;
	}
	top = argv[1];
	if (rock_crypto_init() != 0)
		return 1;
	wire_vectors(wire_seed, NULL);
	control_seeds();
	accept_seeds();
	status_seeds();
	dial_seeds();
	sniff_seeds();
	client_seeds();
	return 0;
}
