/* key.c: rockd's long-term server key: where it lives, and loading it at start. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rock_key.h"
#include "rockd.h"

int
rockd_key_load(struct rockd *d, const char *path, int test)
{
	char def[PATH_MAX], err[PATH_MAX + 128];
	int created;

	if (path == NULL && d->cfg.key[0] != '\0')
		path = d->cfg.key;
	if (path == NULL) {
		if (rock_key_default_path(def, sizeof(def)) != 0) {
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
