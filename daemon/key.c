/* key.c: rockd's long-term server key: where it lives, and loading it at start. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rock_key.h"
#include "rockd.h"

/* $XDG_STATE_HOME/rockd/key when set; as root /var/lib/rockd/key; else
 * ~/.local/state/rockd/key. 0, or -1 when there is no home to put it in. */
static int
default_path(char *out, size_t n)
{
	const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
	int w;

	if (state != NULL && state[0] == '/')
		w = snprintf(out, n, "%s/rockd/key", state);
	else if (geteuid() == 0)
		w = snprintf(out, n, "/var/lib/rockd/key");
	else if (home != NULL && home[0] == '/')
		w = snprintf(out, n, "%s/.local/state/rockd/key", home);
	else
		return -1;
	return w < 0 || (size_t)w >= n ? -1 : 0;
}

int
rockd_key_load(struct rockd *d, const char *path, int test)
{
	char def[PATH_MAX], err[PATH_MAX + 128];
	int created;

	if (path == NULL && d->cfg.key[0] != '\0')
		path = d->cfg.key;
	if (path == NULL) {
		if (default_path(def, sizeof(def)) != 0) {
			fprintf(stderr, "rockd: no key file given (--key) and no "
			    "home directory for the default\n");
			return -1;
		}
		path = def;
	}
	/* -t creates nothing: a missing key is one a start would make. */
	if (test && access(path, F_OK) != 0 && errno == ENOENT)
		return 0;
	if (rock_key_load(path, !test, &d->ident, &created, err,
	    sizeof(err)) != 0) {
		fprintf(stderr, "rockd: key file %s\n", err);
		return -1;
	}
	if (created)
		fprintf(stderr, "rockd: created the server key %s\n", path);
	return 0;
}
