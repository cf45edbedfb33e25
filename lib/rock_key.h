/* rock_key.h: a server's long-term key file: created once, mode 0600, loaded at start. */
#ifndef ROCK_KEY_H
#define ROCK_KEY_H

#include <stddef.h>

#include "rock_crypto.h"

/* The file holds the 32-byte Ed25519 seed and nothing else. */
#define ROCK_KEY_FILE_LEN ROCK_KEY_LEN

/*
 * Load the identity in path. Missing and create set: a new key is made
 * (its directory too, mode 0700), written to a temporary file of mode
 * 0600, synced and linked into place, so a reader never sees half a key
 * and two starting servers agree on one; *created says so. Missing and
 * create clear, a file others may read, of another size, or unreadable:
 * -1 with err saying what, naming the file. Else 0.
 */
int rock_key_load(const char *path, int create, struct rock_identity *id,
    int *created, char *err, size_t errlen);

/* Where rockd keeps its key, and a rock server under `rock` too:
 * $XDG_STATE_HOME/rockd/key when set; as root /var/lib/rockd/key; else
 * ~/.local/state/rockd/key. 0, or -1 when there is no home to put it in. */
int rock_key_default_path(char *out, size_t n);

#endif
