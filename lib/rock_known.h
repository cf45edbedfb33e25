/* rock_known.h: the client's known servers: one key per destination, trusted on first use. */
#ifndef ROCK_KNOWN_H
#define ROCK_KNOWN_H

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "rock_config.h"
#include "rock_log.h"
#include "rock_wire.h"

/* A key as the file and the logs show it: base64, 44 characters. */
#define ROCK_KEY_TEXT_LEN 45
void rock_key_text(const uint8_t pk[ROCK_IDENT_LEN], char out[ROCK_KEY_TEXT_LEN]);
/* 0, or ROCK_ERR_BAD_WORD: not the base64 of 32 bytes. */
int rock_key_parse(const char *s, uint8_t pk[ROCK_IDENT_LEN]);
/* "192.0.2.1:4022", "[2001:db8::1]:4022": a destination's name in the file. */
#define ROCK_DEST_TEXT_LEN 64
void rock_dest_text(const struct sockaddr *a, socklen_t len,
    char out[ROCK_DEST_TEXT_LEN]);
/* mkdir -p of path's directory, each new one mode 0700. */
int rock_mkdir_parents(const char *path);

/* 1: dest has a line (its key in pk, its number in *line); 0: none (or
 * no file). A malformed line is logged with file:line and skipped. */
int rock_known_lookup(const char *path, const char *dest,
    uint8_t pk[ROCK_IDENT_LEN], int *line, const struct rock_log *log);
/* Append dest's line (first contact); the file is created mode 0600. */
int rock_known_add(const char *path, const char *dest,
    const uint8_t pk[ROCK_IDENT_LEN]);
/* Rewrite the file with dest's key replaced (or added). */
int rock_known_replace(const char *path, const char *dest,
    const uint8_t pk[ROCK_IDENT_LEN]);

/* The key the destination must have: 1 and pk (pinned or known), else 0. */
int rock_trust_known(const struct rock_trust *t, const struct rock_log *log,
    const struct sockaddr *addr, socklen_t len, uint8_t pk[ROCK_IDENT_LEN]);

/* The file's answers for a few destinations, kept while the file is the
 * same (device, inode, size, change and modification times): a connect
 * costs one stat, not an open and a read. Thread-safe; a memo another
 * thread holds (or a fork inherited held) is passed by, never waited on. */
#define ROCK_KNOWN_MEMO 4
struct rock_known_memo {
	pthread_mutex_t mu;
	int have_file;			/* the identity below is valid */
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtim, ctim;
	struct {
		char dest[ROCK_DEST_TEXT_LEN];	/* "": unused */
		int found;
		uint8_t pk[ROCK_IDENT_LEN];
	} answers[ROCK_KNOWN_MEMO];
	unsigned next;
	int racy_s;	/* a file changed this recently is read every time */
};
void rock_known_memo_init(struct rock_known_memo *m);
void rock_known_memo_destroy(struct rock_known_memo *m);
/* rock_trust_known, through the memo. */
int rock_trust_known_memo(const struct rock_trust *t,
    struct rock_known_memo *m, const struct rock_log *log,
    const struct sockaddr *addr, socklen_t len, uint8_t pk[ROCK_IDENT_LEN]);
/* A server proved key pk in its handshake: 0 (trusted; recorded on first
 * contact), or ROCK_ERR_KEY (another is known for it; logged, with how to
 * accept the new one). */
int rock_trust_check(const struct rock_trust *t, const struct rock_log *log,
    const struct sockaddr *addr, socklen_t len,
    const uint8_t pk[ROCK_IDENT_LEN]);

#endif
