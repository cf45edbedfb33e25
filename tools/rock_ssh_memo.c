/* rock_ssh_memo.c: the session rockds `rock ssh` started, one small owner-only file per user and destination in the runtime directory. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rock_known.h"
#include "rock_parse.h"
#include "rock_probe_file.h"
#include "rock_ssh_memo.h"

#define MEMO_TAG "rock-ssh-session 1"

/* Bytes of a destination that stand for themselves in a file name; any
 * other is %XX, so no two destinations share a file and none climbs out
 * of the directory. */
static int
plain_byte(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	    (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_' ||
	    c == '@' || c == ':';
}

int
ssh_memo_path(const char *run_dir, const char *user, const char *host,
    unsigned port, char *out, size_t size)
{
	char dest[600], *p;
	size_t len;
	int n;

	if (run_dir[0] != '/')
		return -1;
	n = snprintf(dest, sizeof(dest), "%s@%s:%u", user, host, port);
	if (n < 0 || (size_t)n >= sizeof(dest))
		return -1;
	n = snprintf(out, size, "%s/ssh/", run_dir);
	if (n < 0 || (size_t)n >= size)
		return -1;
	len = (size_t)n;
	for (p = dest; *p != '\0'; p++) {
		if (len + 4 > size)
			return -1;
		if (plain_byte((unsigned char)*p))
			out[len++] = *p;
		else
			len += (size_t)snprintf(out + len, 4, "%%%02X",
			    (unsigned char)*p);
	}
	out[len] = '\0';
	return 0;
}

/* The directory and its parent (the runtime directory's rock/, or
 * /tmp/rock-UID) are ours alone: what a file in them says decides which
 * port and key a session goes to. */
static int
dir_private(const char *path)
{
	char dir[PATH_MAX];
	struct stat st;
	char *slash;
	int level;

	snprintf(dir, sizeof(dir), "%s", path);
	for (level = 0; level < 2; level++) {
		if ((slash = strrchr(dir, '/')) == NULL || slash == dir)
			return 0;
		*slash = '\0';
		if (lstat(dir, &st) != 0 ||
		    rock_private_to_us(&st, S_IFDIR) != NULL)
			return 0;
	}
	return 1;
}

static void
hex(const uint8_t *p, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < n; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 15];
	}
	out[2 * n] = '\0';
}

static int
unhex(const char *s, uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < 2 * n; i++) {
		const char *d = strchr("0123456789abcdef", s[i]);

		if (s[i] == '\0' || d == NULL)
			return -1;
		if (i % 2 == 0)
			p[i / 2] = (uint8_t)((d - "0123456789abcdef") << 4);
		else
			p[i / 2] |= (uint8_t)(d - "0123456789abcdef");
	}
	return s[2 * n] == '\0' ? 0 : -1;
}

int
ssh_memo_load(const char *path, struct ssh_memo *m)
{
	char line[256], port[8], key[ROCK_KEY_TEXT_LEN], inst[2 * SSH_MEMO_INSTANCE_LEN + 2];
	uint8_t pk[ROCK_IDENT_LEN];
	struct stat st;
	long long n;
	FILE *f;
	int fd, ok;

	if (!dir_private(path) ||
	    (fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return -1;
	if (fstat(fd, &st) != 0 || rock_private_to_us(&st, S_IFREG) != NULL ||
	    (f = fdopen(fd, "r")) == NULL) {
		close(fd);
		return -1;
	}
	ok = fgets(line, sizeof(line), f) != NULL &&
	    strncmp(line, MEMO_TAG " ", sizeof(MEMO_TAG)) == 0 &&
	    sscanf(line + sizeof(MEMO_TAG), "%7s %44s %65s", port, key, inst) == 3 &&
	    rock_parse_ll(port, 1, 65535, &n) == 0 &&
	    rock_key_parse(key, pk) == 0 &&
	    unhex(inst, m->instance, SSH_MEMO_INSTANCE_LEN) == 0;
	fclose(f);
	if (!ok)
		return -1;
	m->port = (unsigned)n;
	memcpy(m->key, key, sizeof(key));
	return 0;
}

int
ssh_memo_save(const char *path, const struct ssh_memo *m)
{
	char tmp[PATH_MAX], inst[2 * SSH_MEMO_INSTANCE_LEN + 1];
	int fd, n, r = -1;

	if (rock_mkdir_parents(path) != 0 || !dir_private(path) ||
	    snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path) >= (int)sizeof(tmp))
		return -1;
	hex(m->instance, SSH_MEMO_INSTANCE_LEN, inst);
	/* mkstemp makes it 0600; renamed over the old, never read half. */
	if ((fd = mkstemp(tmp)) < 0)
		return -1;
	n = dprintf(fd, "%s %u %s %s\n", MEMO_TAG, m->port, m->key, inst);
	if (close(fd) == 0 && n > 0 && rename(tmp, path) == 0)
		r = 0;
	else
		unlink(tmp);
	return r;
}

int
ssh_memo_lock(const char *path, int wait_ms)
{
	struct timespec tick = { 0, 50 * 1000000 };
	char lock[PATH_MAX];
	int fd, waited;

	if (snprintf(lock, sizeof(lock), "%s.lock", path) >= (int)sizeof(lock) ||
	    rock_mkdir_parents(lock) != 0 || !dir_private(lock) ||
	    (fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
	    0600)) < 0)
		return -1;
	for (waited = 0; flock(fd, LOCK_EX | LOCK_NB) != 0; waited += 50) {
		if (errno != EWOULDBLOCK || waited >= wait_ms) {
			close(fd);
			return -1;
		}
		nanosleep(&tick, NULL);
	}
	return fd;
}

void
ssh_memo_forget(const char *path)
{
	if (dir_private(path))
		unlink(path);
}
