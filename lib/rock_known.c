/* rock_known.c: the client's known servers: one key per destination, trusted on first use. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "rock_crypto.h"
#include "rock_err.h"
#include "rock_known.h"
#include "rock_sys.h"

#define LINE_MAX_LEN 512
#define ROCK_KNOWN_RACY_S 2

void
rock_key_text(const uint8_t pk[ROCK_IDENT_LEN], char out[ROCK_KEY_TEXT_LEN])
{
	sodium_bin2base64(out, ROCK_KEY_TEXT_LEN, pk, ROCK_IDENT_LEN,
	    sodium_base64_VARIANT_ORIGINAL);
}

int
rock_key_parse(const char *s, uint8_t pk[ROCK_IDENT_LEN])
{
	size_t n;
	const char *end;

	if (strlen(s) != ROCK_KEY_TEXT_LEN - 1 ||
	    sodium_base642bin(pk, ROCK_IDENT_LEN, s, strlen(s), NULL, &n, &end,
	    sodium_base64_VARIANT_ORIGINAL) != 0 || n != ROCK_IDENT_LEN ||
	    *end != '\0')
		return ROCK_ERR_BAD_WORD;
	return 0;
}

void
rock_dest_text(const struct sockaddr *a, socklen_t len,
    char out[ROCK_DEST_TEXT_LEN])
{
	char host[INET6_ADDRSTRLEN] = "?";
	const struct sockaddr_in *v4 = (const struct sockaddr_in *)a;
	const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)a;

	if (a->sa_family == AF_INET6 && len >= sizeof(*v6)) {
		inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof(host));
		snprintf(out, ROCK_DEST_TEXT_LEN, "[%s]:%u", host,
		    ntohs(v6->sin6_port));
	} else {
		if (a->sa_family == AF_INET && len >= sizeof(*v4))
			inet_ntop(AF_INET, &v4->sin_addr, host, sizeof(host));
		snprintf(out, ROCK_DEST_TEXT_LEN, "%s:%u", host,
		    a->sa_family == AF_INET ? ntohs(v4->sin_port) : 0);
	}
}

int
rock_mkdir_parents(const char *path)
{
	char dir[PATH_MAX];
	char *p, c;

	if (snprintf(dir, sizeof(dir), "%s", path) >= (int)sizeof(dir)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if ((p = strrchr(dir, '/')) == NULL || p == dir)
		return 0;
	*p = '\0';
	for (p = dir + 1; ; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		c = *p;
		*p = '\0';
		if (mkdir(dir, 0700) != 0 && errno != EEXIST)
			return -1;
		*p = c;
		if (c == '\0')
			return 0;
	}
}

/* "DEST KEY": 1 and its fields, 0 for a blank or comment line, -1 when
 * malformed. */
static int
split_line(char *line, char **dest, char **key)
{
	char *save = NULL, *extra;

	line[strcspn(line, "\r\n")] = '\0';
	if ((*dest = strtok_r(line, " \t", &save)) == NULL || **dest == '#')
		return 0;
	*key = strtok_r(NULL, " \t", &save);
	extra = strtok_r(NULL, " \t", &save);
	return *key == NULL || extra != NULL ? -1 : 1;
}

/* A line read whole (getline) that can be an entry: short enough, and
 * text: a NUL must not cut it in two and shift what follows. */
static int
usable_line(const char *line, ssize_t len)
{
	return len < LINE_MAX_LEN && (ssize_t)strlen(line) == len;
}

int
rock_known_lookup(const char *path, const char *dest,
    uint8_t pk[ROCK_IDENT_LEN], int *line, const struct rock_log *log)
{
	char *buf = NULL, *d, *k;
	size_t cap = 0;
	ssize_t len;
	FILE *f = fopen(path, "re");
	int n = 0, r, found = 0;

	if (f == NULL)
		return 0;
	while (!found && (len = getline(&buf, &cap, f)) >= 0) {
		n++;
		if (!usable_line(buf, len)) {
			rlog_warn(log, "%s:%d: too long, or not text; ignored",
			    path, n);
			continue;
		}
		if ((r = split_line(buf, &d, &k)) == 0)
			continue;
		if (r < 0 || rock_key_parse(k, pk) != 0) {
			rlog_warn(log, "%s:%d: not \"ADDRESS:PORT KEY\" with a "
			    "base64 key of 32 bytes; ignored", path, n);
			continue;
		}
		if (strcmp(d, dest) == 0) {
			*line = n;
			found = 1;
		}
	}
	free(buf);
	rock_sys.fclose(f);
	return found;
}

static int
line_for(char *out, size_t n, const char *dest,
    const uint8_t pk[ROCK_IDENT_LEN])
{
	char key[ROCK_KEY_TEXT_LEN];

	rock_key_text(pk, key);
	return snprintf(out, n, "%s %s\n", dest, key);
}

int
rock_known_add(const char *path, const char *dest,
    const uint8_t pk[ROCK_IDENT_LEN])
{
	char line[LINE_MAX_LEN];
	int fd, n = line_for(line, sizeof(line), dest, pk), r = 0;

	if (rock_mkdir_parents(path) != 0)
		return ROCK_ERR_SYSTEM;
	/* One write of O_APPEND: two processes adding at once both land. */
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return ROCK_ERR_SYSTEM;
	if (rock_sys.write(fd, line, (size_t)n) != n)
		r = ROCK_ERR_SYSTEM;
	if (rock_sys.close(fd) != 0)
		r = ROCK_ERR_SYSTEM;
	return r;
}

/* The old file's lines to out, dest's replaced by its new line. */
static int
copy_replacing(FILE *in, FILE *out, const char *dest, const char *newline)
{
	char *buf = NULL, copy[LINE_MAX_LEN], *d, *k;
	size_t cap = 0;
	ssize_t len;
	int done = 0;

	while ((len = getline(&buf, &cap, in)) >= 0) {
		if (usable_line(buf, len)) {
			memcpy(copy, buf, (size_t)len + 1);
			if (split_line(copy, &d, &k) == 1 && strcmp(d, dest) == 0) {
				if (!done)
					fputs(newline, out);
				done = 1;
				continue;
			}
		}
		fwrite(buf, 1, (size_t)len, out);
	}
	free(buf);
	if (!done)
		fputs(newline, out);
	return ferror(in) ? -1 : 0;
}

int
rock_known_replace(const char *path, const char *dest,
    const uint8_t pk[ROCK_IDENT_LEN])
{
	char tmp[PATH_MAX], line[LINE_MAX_LEN];
	FILE *in, *out;
	int fd, r;

	line_for(line, sizeof(line), dest, pk);
	if (snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path) >= (int)sizeof(tmp) ||
	    (fd = mkstemp(tmp)) < 0)
		return ROCK_ERR_SYSTEM;
	if ((out = rock_sys.fdopen(fd, "w")) == NULL) {
		rock_sys.close(fd);
		unlink(tmp);
		return ROCK_ERR_SYSTEM;
	}
	in = fopen(path, "re");
	r = in != NULL ? copy_replacing(in, out, dest, line) :
	    fputs(line, out) < 0 ? -1 : 0;
	if (in != NULL)
		rock_sys.fclose(in);
	if (fflush(out) != 0 || fsync(fd) != 0)
		r = -1;
	if (rock_sys.fclose(out) != 0 || r != 0 || rename(tmp, path) != 0) {
		unlink(tmp);
		return ROCK_ERR_SYSTEM;
	}
	return 0;
}

int
rock_trust_known(const struct rock_trust *t, const struct rock_log *log,
    const struct sockaddr *addr, socklen_t len, uint8_t pk[ROCK_IDENT_LEN])
{
	char dest[ROCK_DEST_TEXT_LEN];
	int line;

	if (t->pinned) {
		memcpy(pk, t->pin, ROCK_IDENT_LEN);
		return 1;
	}
	if (t->path[0] == '\0')
		return 0;
	rock_dest_text(addr, len, dest);
	return rock_known_lookup(t->path, dest, pk, &line, log);
}

void
rock_known_memo_init(struct rock_known_memo *m)
{
	memset(m, 0, sizeof(*m));
	m->racy_s = ROCK_KNOWN_RACY_S;
	pthread_mutex_init(&m->mu, NULL);
}

void
rock_known_memo_destroy(struct rock_known_memo *m)
{
	pthread_mutex_destroy(&m->mu);
	rock_wipe(m->answers, sizeof(m->answers));
}

static int
same_file(const struct rock_known_memo *m, const struct stat *st)
{
	return m->have_file && m->dev == st->st_dev && m->ino == st->st_ino &&
	    m->size == st->st_size &&
	    m->mtim.tv_sec == st->st_mtim.tv_sec &&
	    m->mtim.tv_nsec == st->st_mtim.tv_nsec &&
	    m->ctim.tv_sec == st->st_ctim.tv_sec &&
	    m->ctim.tv_nsec == st->st_ctim.tv_nsec;
}

/* A file changed within the last seconds (its modification or its
 * inode change time, which utimensat cannot put back) may change again
 * within the same tick of the file system's clock (a jiffy before Linux
 * 6.13), in place and at the same size, and pass for the same file
 * (git's "racy" entries): it is read every time. */
static int
racy(const struct rock_known_memo *m, const struct stat *st)
{
	struct timespec now;
	time_t last = st->st_mtim.tv_sec > st->st_ctim.tv_sec ?
	    st->st_mtim.tv_sec : st->st_ctim.tv_sec;

	clock_gettime(CLOCK_REALTIME, &now);
	return now.tv_sec - last < m->racy_s;
}

/* The memo's lock held: the answer for dest, read from the file that st
 * describes (st NULL: there is none) when the memo does not have it. */
static int
memo_lookup(struct rock_known_memo *m, const char *path, const struct stat *st,
    const char *dest, uint8_t pk[ROCK_IDENT_LEN], const struct rock_log *log)
{
	unsigned i;
	int line;

	if (st == NULL || !same_file(m, st)) {
		memset(m->answers, 0, sizeof(m->answers));
		m->have_file = st != NULL;
		if (st != NULL) {
			m->dev = st->st_dev;
			m->ino = st->st_ino;
			m->size = st->st_size;
			m->mtim = st->st_mtim;
			m->ctim = st->st_ctim;
		}
	}
	if (st == NULL)
		return 0;
	if (racy(m, st)) {
		m->have_file = 0;
		return rock_known_lookup(path, dest, pk, &line, log);
	}
	for (i = 0; i < ROCK_KNOWN_MEMO; i++)
		if (strcmp(m->answers[i].dest, dest) == 0) {
			memcpy(pk, m->answers[i].pk, ROCK_IDENT_LEN);
			return m->answers[i].found;
		}
	i = m->next;
	m->next = (m->next + 1) % ROCK_KNOWN_MEMO;
	m->answers[i].found = rock_known_lookup(path, dest, pk, &line, log);
	snprintf(m->answers[i].dest, sizeof(m->answers[i].dest), "%s", dest);
	memcpy(m->answers[i].pk, pk, ROCK_IDENT_LEN);
	return m->answers[i].found;
}

int
rock_trust_known_memo(const struct rock_trust *t, struct rock_known_memo *m,
    const struct rock_log *log, const struct sockaddr *addr, socklen_t len,
    uint8_t pk[ROCK_IDENT_LEN])
{
	char dest[ROCK_DEST_TEXT_LEN];
	struct stat st;
	int r;

	if (t->pinned || t->path[0] == '\0' || m == NULL ||
	    pthread_mutex_trylock(&m->mu) != 0)
		return rock_trust_known(t, log, addr, len, pk);
	rock_dest_text(addr, len, dest);
	r = memo_lookup(m, t->path, stat(t->path, &st) == 0 ? &st : NULL, dest,
	    pk, log);
	pthread_mutex_unlock(&m->mu);
	return r;
}

static int
refuse_pinned(const struct rock_log *log, const char *dest,
    const uint8_t pin[ROCK_IDENT_LEN], const uint8_t pk[ROCK_IDENT_LEN])
{
	char want[ROCK_KEY_TEXT_LEN], got[ROCK_KEY_TEXT_LEN];

	rock_key_text(pin, want);
	rock_key_text(pk, got);
	rlog_warn(log, "server %s has key %s, not %s as ROCK_SERVER_KEY "
	    "requires: connection refused", dest, got, want);
	return ROCK_ERR_KEY;
}

static int
refuse_changed(const struct rock_trust *t, const struct rock_log *log,
    const char *dest, int line, const uint8_t old[ROCK_IDENT_LEN],
    const uint8_t pk[ROCK_IDENT_LEN])
{
	char was[ROCK_KEY_TEXT_LEN], now[ROCK_KEY_TEXT_LEN];

	rock_key_text(old, was);
	rock_key_text(pk, now);
	rlog_warn(log, "WARNING: the key of server %s has changed: %s:%d "
	    "says %s, the server now proves %s. Someone may be in the middle, "
	    "or the server got a new key. Connection refused. If the change "
	    "is expected, connect once with ROCK_ACCEPT_NEW_KEY=1 (or delete "
	    "line %d of %s)", dest, t->path, line, was, now, line, t->path);
	return ROCK_ERR_KEY;
}

int
rock_trust_check(const struct rock_trust *t, const struct rock_log *log,
    const struct sockaddr *addr, socklen_t len,
    const uint8_t pk[ROCK_IDENT_LEN])
{
	char dest[ROCK_DEST_TEXT_LEN], key[ROCK_KEY_TEXT_LEN];
	uint8_t old[ROCK_IDENT_LEN];
	int line, r;

	rock_dest_text(addr, len, dest);
	if (t->pinned)
		return sodium_memcmp(t->pin, pk, ROCK_IDENT_LEN) == 0 ? 0 :
		    refuse_pinned(log, dest, t->pin, pk);
	if (t->path[0] == '\0')
		return 0;
	rock_key_text(pk, key);
	if (rock_known_lookup(t->path, dest, old, &line, log) == 1) {
		if (sodium_memcmp(old, pk, ROCK_IDENT_LEN) == 0)
			return 0;
		if (!t->accept_new)
			return refuse_changed(t, log, dest, line, old, pk);
		r = rock_known_replace(t->path, dest, pk);
		rlog_warn(log, "server %s: new key %s %s in %s "
		    "(ROCK_ACCEPT_NEW_KEY)", dest, key, r == 0 ? "accepted" :
		    "accepted, but could not be written", t->path);
		return 0;
	}
	r = rock_known_add(t->path, dest, pk);
	rlog_info(log, "server %s: key %s %s %s", dest, key, r == 0 ?
	    "recorded in" : "could not be recorded in", t->path);
	return 0;
}
