/* rock_ssh_memo.h: the session rockds `rock ssh` remembers, per user and destination. */
#ifndef ROCK_SSH_MEMO_H
#define ROCK_SSH_MEMO_H

#include <stddef.h>
#include <stdint.h>

#include "rock_known.h"

/* Bytes of an announcement's random part that name the rockd process
 * (doc/PROTOCOL.md 2.2): a probe that answers with others is another. */
#define SSH_MEMO_INSTANCE_LEN 32
#define SSH_MEMO_INSTANCE_OFF 12

struct ssh_memo {
	unsigned port;				/* where it listens */
	char key[ROCK_KEY_TEXT_LEN];		/* the key it announced over ssh */
	uint8_t instance[SSH_MEMO_INSTANCE_LEN];
};

/* RUN_DIR/ssh/USER@HOST:PORT, every other byte as %XX; -1 if too long
 * or no runtime directory. */
int ssh_memo_path(const char *run_dir, const char *user, const char *host,
    unsigned port, char *out, size_t size);
/* 0 and *m, or -1: none, unreadable, not ours alone, or malformed. */
int ssh_memo_load(const char *path, struct ssh_memo *m);
/* Written owner-only (the directory made 0700 if missing); 0 or -1. */
int ssh_memo_save(const char *path, const struct ssh_memo *m);
void ssh_memo_forget(const char *path);
/* One rock ssh at a time finds or starts the destination's rockd (the
 * others then find it): the lock's descriptor (close-on-exec), or -1
 * after wait_ms or on error (go on without). */
int ssh_memo_lock(const char *path, int wait_ms);

#endif
