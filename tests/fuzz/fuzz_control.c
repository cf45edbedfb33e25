/* fuzz_control.c: libFuzzer harness for the control channel: a datagram handled as rock_control.c handles one received, with rocks whose keys the harness knows, so records reach past the MAC. */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "rock_crypto.h"
#include "fuzz.h"
#include "fuzz_engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A forger cannot compute tags; a fuzzer cannot either. Records whose bit
 * (0-6) is set in the mask get the right tag for the rock they name, so
 * their counts and flags are what the engine acts on; with bit 7, the
 * packet gets the right tag for the anchor it names, so its number and
 * acknowledgement are taken too. */
static void
seal(uint8_t *pkt, size_t n, unsigned mask)
{
	unsigned i;
	uint8_t *rec;
	int r;

	for (i = 0; i < 7; i++) {
		if (!(mask & 1u << i) ||
		    ROCK_HB_HEADER_LEN + (i + 1) * ROCK_HB_RECORD_LEN > n)
			continue;
		rec = pkt + ROCK_HB_HEADER_LEN + i * ROCK_HB_RECORD_LEN;
		if ((r = fuzz_rock_index(rec)) >= 0)
			rock_hb_tag(rec + ROCK_HB_RECORD_LEN - ROCK_TAG_LEN,
			    fuzz_rock_peer_key(r), rec);
	}
	if ((mask & 0x80) && n >= ROCK_HB_HEADER_LEN &&
	    (n - ROCK_HB_HEADER_LEN) % ROCK_HB_RECORD_LEN == 0 &&
	    (r = fuzz_rock_index(pkt + 8)) >= 0)
		rock_hb_packet_tag(pkt + ROCK_HB_TAGGED_HEADER,
		    fuzz_rock_peer_key(r), pkt, n);
}

/* Byte 0: the records to seal; bytes 1-3: the rocks (fuzz_rock_add);
 * the rest: the datagram, from 127.0.0.1:9. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_world *w = fuzz_world();
	struct sockaddr_storage from;
	struct sockaddr_in *sin = (struct sockaddr_in *)&from;
	uint8_t pkt[ROCK_HB_MAX_LEN + 1];
	size_t n;
	int i;

	if (size < 1 + FUZZ_ROCKS || size - 1 - FUZZ_ROCKS > sizeof(pkt))
		return 0;
	n = size - 1 - FUZZ_ROCKS;
	memcpy(pkt, data + 1 + FUZZ_ROCKS, n);
	seal(pkt, n, data[0]);
	memset(&from, 0, sizeof(from));
	sin->sin_family = AF_INET;
	sin->sin_port = htons(9);
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (i = 0; i < FUZZ_ROCKS; i++)
		(void)fuzz_rock_add(w, i, data[1 + i]);
	rock_control_datagram(w->e, pkt, n, &from, sizeof(*sin));
	/* Whatever the records did (acks, ends, closes), the loop runs on. */
	fuzz_world_run(w, 4);
	for (i = 0; i < FUZZ_ROCKS; i++)
		if (w->r[i].s != NULL)
			FUZZ_CHECK(rock_ring_base(&w->r[i].s->ring) <=
			    rock_ring_end(&w->r[i].s->ring));
	fuzz_world_clear(w);
	return 0;
}
