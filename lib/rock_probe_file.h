/* rock_probe_file.h: the EDP probe cache shared by one user's processes: a small file in the runtime directory. */
#ifndef ROCK_PROBE_FILE_H
#define ROCK_PROBE_FILE_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "rock_log.h"
#include "rock_wire.h"

/* How long a probe's answer holds, here as in each engine's own cache: a
 * rockd's announcement, an ordinary server (or none at all). */
#define ROCK_PROBE_TTL_MS (10 * 60 * 1000)
#define ROCK_PROBE_PLAIN_TTL_MS (60 * 1000)

/* Entries the file holds at most; the oldest go first. */
#define ROCK_PROBE_FILE_MAX 32

/* One per process (its owner's): the file, and whether a bad file or
 * directory was reported already (once per process). */
struct rock_probe_file {
	const char *path;		/* NULL or "": no shared cache */
	int warned;
};

/* A resumption ticket the user's processes share (doc/PROTOCOL.md 2.7):
 * the server's sealed ticket, the secret, the identity its chain's full
 * handshake proved, and the time left of the ticket and of its chain. */
struct rock_probe_ticket {
	uint8_t ticket[ROCK_TICKET_LEN];
	uint8_t rms[ROCK_KEY_LEN];
	uint8_t ident[ROCK_IDENT_LEN];
	int64_t ttl_ms, chain_ms;
};

/* What the file says of a destination. */
struct rock_probe_fact {
	int enhanced;			/* 0: an ordinary server, for a while */
	int64_t ttl_ms;			/* left, at most what the put gave */
	uint8_t announcement[ROCK_ANNOUNCE_LEN];
	int has_ticket;			/* a rockd's, with a ticket below */
	struct rock_probe_ticket ticket;
};

/* Ours alone: of type (S_IFDIR, S_IFREG), owned by us, nobody else may
 * read or write (what a file there says decides where a program's bytes
 * go). NULL, or what is wrong. */
const char *rock_private_to_us(const struct stat *st, mode_t type);

/* 1 and *f: the file knows the destination; 0: it does not, or there is
 * no usable file (a bad one is logged once and ignored). */
int rock_probe_file_get(struct rock_probe_file *pf, const struct rock_log *log,
    const struct sockaddr *addr, socklen_t len, struct rock_probe_fact *f);
/* Record what a probe found (ann NULL: an ordinary server) for ttl_ms;
 * ttl_ms 0 forgets the destination. Written to a temporary file renamed
 * over the old one: readers see the old file or the new, never a part. A
 * ticket held for the destination stays only if the announcement is the
 * one it came with (the same server instance). */
void rock_probe_file_put(struct rock_probe_file *pf, const struct rock_log *log,
    const struct sockaddr *addr, socklen_t len,
    const uint8_t ann[ROCK_ANNOUNCE_LEN], int64_t ttl_ms);
/* Record a rockd's announcement with the ticket its last handshake left,
 * for the user's other processes to resume with. */
void rock_probe_file_put_ticket(struct rock_probe_file *pf,
    const struct rock_log *log, const struct sockaddr *addr, socklen_t len,
    const uint8_t ann[ROCK_ANNOUNCE_LEN], int64_t ttl_ms,
    const struct rock_probe_ticket *t);

#endif
