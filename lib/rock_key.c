/* rock_key.c: a server's long-term key file: created once, mode 0600, loaded at start. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "rock_key.h"
#include "rock_known.h"
#include "rock_sys.h"

static int
fail(char *err, size_t errlen, const char *path, const char *what)
{
	snprintf(err, errlen, "%s: %s", path, what);
	return -1;
}

static int
read_seed(int fd, const char *path, uint8_t seed[ROCK_KEY_LEN], char *err,
    size_t errlen)
{
	char why[128];
	struct stat st;
	ssize_t got;

	if (fstat(fd, &st) != 0)
		return fail(err, errlen, path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return fail(err, errlen, path, "not a regular file");
	/* A secret others can read is a secret no more: refuse, as ssh does. */
	if ((st.st_mode & 077) != 0) {
		snprintf(why, sizeof(why), "mode %04o: a key file must not be "
		    "accessible by group or others (chmod 600)",
		    (unsigned)(st.st_mode & 07777));
		return fail(err, errlen, path, why);
	}
	if (st.st_size != ROCK_KEY_FILE_LEN) {
		snprintf(why, sizeof(why), "%lld bytes: a key file holds %d",
		    (long long)st.st_size, ROCK_KEY_FILE_LEN);
		return fail(err, errlen, path, why);
	}
	got = rock_sys.read(fd, seed, ROCK_KEY_LEN);
	if (got != ROCK_KEY_LEN)
		return fail(err, errlen, path, got < 0 ? strerror(errno) :
		    "short read");
	return 0;
}

static int
write_new(const char *path, char *err, size_t errlen)
{
	uint8_t seed[ROCK_KEY_LEN];
	char tmp[PATH_MAX];
	int fd, r = 0;

	if (rock_mkdir_parents(path) != 0)
		return fail(err, errlen, path, strerror(errno));
	if (snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path) >= (int)sizeof(tmp))
		return fail(err, errlen, path, "path too long");
	/* mkstemp: O_CREAT | O_EXCL, mode 0600. */
	if ((fd = mkstemp(tmp)) < 0)
		return fail(err, errlen, path, strerror(errno));
	randombytes_buf(seed, sizeof(seed));
	if (rock_sys.write(fd, seed, sizeof(seed)) != (ssize_t)sizeof(seed) ||
	    fsync(fd) != 0)
		r = fail(err, errlen, tmp, strerror(errno));
	sodium_memzero(seed, sizeof(seed));
	rock_sys.close(fd);
	/* link, not rename: a key another server made meanwhile stays. */
	if (r == 0 && link(tmp, path) != 0 && errno != EEXIST)
		r = fail(err, errlen, path, strerror(errno));
	unlink(tmp);
	return r;
}

int
rock_key_load(const char *path, int create, struct rock_identity *id,
    int *created, char *err, size_t errlen)
{
	uint8_t seed[ROCK_KEY_LEN];
	int fd, r;

	*created = 0;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && create) {
		if (write_new(path, err, errlen) != 0)
			return -1;
		*created = 1;
		fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0)
		return fail(err, errlen, path, strerror(errno));
	r = read_seed(fd, path, seed, err, errlen);
	rock_sys.close(fd);
	if (r == 0)
		rock_identity_from_seed(id, seed);
	sodium_memzero(seed, sizeof(seed));
	return r;
}

int
rock_key_default_path(char *out, size_t n)
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
