/* rock_probe_file.c: the EDP probe cache shared by one user's processes: a small file in the runtime directory. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/magic.h>
#include <time.h>
#include <unistd.h>

#include "rock_crypto.h"
#include "rock_known.h"
#include "rock_probe_file.h"
#include "rock_sys.h"

/*
 * The file: a header (8 bytes of magic, the entry count as 4 bytes, 4 zero
 * bytes), then the entries, newest first, each ENTRY_LEN bytes: the
 * address's length (4), the sockaddr (28, zero past its length), enhanced
 * (4: 0 or 1), the expiry in wall-clock ms (8), the announcement (1024;
 * zero for an ordinary server), then a resumption ticket: held (4: 0 or
 * 1), the ticket's and its chain's ends in wall-clock ms (8 each), the
 * ticket (92), its secret (32), the server identity (32), all zero when
 * none. Host byte order: the file never leaves the machine (the runtime
 * directory is per boot and per user). A file of the first format
 * (RKPROBE1) is taken as empty and replaced.
 */
#define MAGIC "RKPROBE2"
#define MAGIC_OLD "RKPROBE1"
#define HEADER_LEN 16
#define ADDR_MAX 28
#define ANN_END (4 + ADDR_MAX + 4 + 8 + ROCK_ANNOUNCE_LEN)
#define TICKET_PART (4 + 8 + 8 + ROCK_TICKET_LEN + ROCK_KEY_LEN + ROCK_IDENT_LEN)
#define ENTRY_LEN (ANN_END + TICKET_PART)
#define FILE_MAX (HEADER_LEN + ROCK_PROBE_FILE_MAX * ENTRY_LEN)
/* No entry lives longer than an engine keeps one, whatever expiry a file
 * claims. */
#define TTL_MAX_MS ROCK_PROBE_TTL_MS

struct entry {
	uint32_t len;
	uint8_t addr[ADDR_MAX];
	uint32_t enhanced;
	int64_t expires_ms;
	uint8_t ann[ROCK_ANNOUNCE_LEN];
	uint32_t has_ticket;
	int64_t ticket_ends_ms, chain_ends_ms;
	uint8_t ticket[ROCK_TICKET_LEN];
	uint8_t rms[ROCK_KEY_LEN];
	uint8_t ident[ROCK_IDENT_LEN];
};

static int64_t
wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A ticket's secret is written only to a file system in memory (the
 * runtime directory's tmpfs, usually): on a disk, a renamed-over file
 * would keep it past its life. */
static int
in_memory(const char *path)
{
	char dir[PATH_MAX];
	struct statfs sf;
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	if ((slash = strrchr(dir, '/')) != NULL && slash != dir)
		*slash = '\0';
	return statfs(dir, &sf) == 0 && (sf.f_type == TMPFS_MAGIC ||
	    sf.f_type == RAMFS_MAGIC);
}

static int
usable(const struct rock_probe_file *pf)
{
	return pf != NULL && pf->path != NULL && pf->path[0] == '/';
}

/* Once per process: a file someone else wrote, or garbage, is not worth
 * a line per connect. */
static void
complain(struct rock_probe_file *pf, const struct rock_log *log,
    const char *what, const char *why)
{
	if (__atomic_exchange_n(&pf->warned, 1, __ATOMIC_RELAXED) == 0)
		rlog_warn(log, "probe cache %s: %s; ignored", what, why);
}

const char *
rock_private_to_us(const struct stat *st, mode_t type)
{
	if ((st->st_mode & S_IFMT) != type)
		return type == S_IFDIR ? "not a directory" : "not a regular file";
	if (st->st_uid != geteuid())
		return "owned by another user";
	if ((st->st_mode & 077) != 0)
		return "accessible by group or others";
	return NULL;
}

static int
dir_ok(struct rock_probe_file *pf, const struct rock_log *log)
{
	char dir[PATH_MAX];
	const char *why;
	struct stat st;
	char *slash;

	snprintf(dir, sizeof(dir), "%s", pf->path);
	if ((slash = strrchr(dir, '/')) == NULL || slash == dir)
		return 1;		/* "/probes": the root is no one's to check */
	*slash = '\0';
	if (lstat(dir, &st) != 0)
		return 0;
	if ((why = rock_private_to_us(&st, S_IFDIR)) != NULL) {
		complain(pf, log, dir, why);
		return 0;
	}
	return 1;
}

static int
valid_addr(const struct entry *en)
{
	sa_family_t fam;
	size_t i;

	memcpy(&fam, en->addr, sizeof(fam));
	if (!((fam == AF_INET && en->len == sizeof(struct sockaddr_in)) ||
	    (fam == AF_INET6 && en->len == sizeof(struct sockaddr_in6))))
		return 0;
	for (i = en->len; i < ADDR_MAX; i++)
		if (en->addr[i] != 0)
			return 0;
	return 1;
}

static int
valid_entry(const struct entry *en)
{
	struct rock_announce a;
	size_t i;

	if (!valid_addr(en) || en->enhanced > 1 || en->has_ticket > 1 ||
	    (en->has_ticket && !en->enhanced))
		return 0;
	if (!en->enhanced) {
		for (i = 0; i < ROCK_ANNOUNCE_LEN; i++)
			if (en->ann[i] != 0)
				return 0;
		return 1;
	}
	return memcmp(en->ann, rock_magic_announce, ROCK_MAGIC_LEN) == 0 &&
	    rock_announce_decode(&a, en->ann) == 0 &&
	    rock_version_pick(ROCK_VERSION, ROCK_VERSION, a.version_min,
	    a.version_max) != 0;
}

static void
entry_decode(struct entry *en, const uint8_t *p)
{
	memcpy(&en->len, p, 4);
	memcpy(en->addr, p + 4, ADDR_MAX);
	memcpy(&en->enhanced, p + 4 + ADDR_MAX, 4);
	memcpy(&en->expires_ms, p + 8 + ADDR_MAX, 8);
	memcpy(en->ann, p + 16 + ADDR_MAX, ROCK_ANNOUNCE_LEN);
	p += ANN_END;
	memcpy(&en->has_ticket, p, 4);
	memcpy(&en->ticket_ends_ms, p + 4, 8);
	memcpy(&en->chain_ends_ms, p + 12, 8);
	memcpy(en->ticket, p + 20, ROCK_TICKET_LEN);
	memcpy(en->rms, p + 20 + ROCK_TICKET_LEN, ROCK_KEY_LEN);
	memcpy(en->ident, p + 20 + ROCK_TICKET_LEN + ROCK_KEY_LEN, ROCK_IDENT_LEN);
}

static void
entry_encode(const struct entry *en, uint8_t *p)
{
	memcpy(p, &en->len, 4);
	memcpy(p + 4, en->addr, ADDR_MAX);
	memcpy(p + 4 + ADDR_MAX, &en->enhanced, 4);
	memcpy(p + 8 + ADDR_MAX, &en->expires_ms, 8);
	memcpy(p + 16 + ADDR_MAX, en->ann, ROCK_ANNOUNCE_LEN);
	p += ANN_END;
	memcpy(p, &en->has_ticket, 4);
	memcpy(p + 4, &en->ticket_ends_ms, 8);
	memcpy(p + 12, &en->chain_ends_ms, 8);
	memcpy(p + 20, en->ticket, ROCK_TICKET_LEN);
	memcpy(p + 20 + ROCK_TICKET_LEN, en->rms, ROCK_KEY_LEN);
	memcpy(p + 20 + ROCK_TICKET_LEN + ROCK_KEY_LEN, en->ident, ROCK_IDENT_LEN);
}

/* A ticket past its end, or its chain's, is wiped: it is never used
 * again, and the next write leaves it out. */
static void
ticket_expire(struct entry *en, int64_t now)
{
	if (en->has_ticket && (en->ticket_ends_ms <= now ||
	    en->chain_ends_ms <= now)) {
		en->has_ticket = 0;
		en->ticket_ends_ms = en->chain_ends_ms = 0;
		rock_wipe(en->ticket, sizeof(en->ticket));
		rock_wipe(en->rms, sizeof(en->rms));
		rock_wipe(en->ident, sizeof(en->ident));
	}
}

/* The file's bytes, checked whole: NULL, or what is wrong with them. */
static const char *
parse(const uint8_t *buf, size_t n, struct entry *out, size_t *count)
{
	uint32_t c, zero;
	size_t i;

	if (n >= HEADER_LEN && memcmp(buf, MAGIC_OLD, 8) == 0) {
		*count = 0;		/* an older rock's: replaced */
		return NULL;
	}
	if (n < HEADER_LEN || memcmp(buf, MAGIC, 8) != 0)
		return "not a probe cache";
	memcpy(&c, buf + 8, 4);
	memcpy(&zero, buf + 12, 4);
	if (zero != 0 || c > ROCK_PROBE_FILE_MAX ||
	    n != HEADER_LEN + (size_t)c * ENTRY_LEN)
		return "corrupt (its size is not its count's)";
	for (i = 0; i < c; i++) {
		entry_decode(&out[i], buf + HEADER_LEN + i * ENTRY_LEN);
		if (!valid_entry(&out[i]))
			return "corrupt (an entry is not an address and an "
			    "announcement)";
	}
	*count = c;
	return NULL;
}

/* Every entry of the file: 0 (none without a file), or -1 for a file
 * that is not ours or not one (logged once). */
static int
load(struct rock_probe_file *pf, const struct rock_log *log,
    struct entry *out, size_t *count)
{
	static const size_t cap = FILE_MAX + 1;
	const char *why = NULL;
	uint8_t *buf = NULL;
	struct stat st;
	ssize_t got = 0;
	int fd;

	*count = 0;
	if (!dir_ok(pf, log))
		return -1;
	if ((fd = open(pf->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return errno == ENOENT ? 0 : (complain(pf, log, pf->path,
		    strerror(errno)), -1);
	if (fstat(fd, &st) != 0)
		why = strerror(errno);
	else if ((why = rock_private_to_us(&st, S_IFREG)) == NULL &&
	    st.st_size > (off_t)FILE_MAX)
		why = "larger than a probe cache can be";
	else if (why == NULL && (buf = malloc(cap)) == NULL)
		why = "out of memory";
	/* One read: the file is small and replaced whole, never written in
	 * place. */
	if (why == NULL && (got = rock_sys.read(fd, buf, cap)) < 0)
		why = strerror(errno);
	rock_sys.close(fd);
	if (why == NULL)
		why = parse(buf, (size_t)got, out, count);
	if (buf != NULL)
		rock_wipe(buf, cap);	/* tickets' secrets */
	free(buf);
	if (why != NULL) {
		*count = 0;
		complain(pf, log, pf->path, why);
		return -1;
	}
	return 0;
}

static int
same(const struct entry *en, const struct sockaddr *addr, socklen_t len)
{
	return en->len == len && memcmp(en->addr, addr, len) == 0;
}

int
rock_probe_file_get(struct rock_probe_file *pf, const struct rock_log *log,
    const struct sockaddr *addr, socklen_t len, struct rock_probe_fact *f)
{
	struct entry *all;
	int64_t now = wall_ms();
	size_t n, i;
	int found = 0;

	f->has_ticket = 0;
	if (!usable(pf) || len > ADDR_MAX ||
	    (all = calloc(ROCK_PROBE_FILE_MAX, sizeof(*all))) == NULL)
		return 0;
	if (load(pf, log, all, &n) == 0) {
		for (i = 0; i < n && !found; i++) {
			if (!same(&all[i], addr, len) || all[i].expires_ms <= now)
				continue;
			found = 1;
			f->enhanced = (int)all[i].enhanced;
			f->ttl_ms = all[i].expires_ms - now;
			if (f->ttl_ms > TTL_MAX_MS)
				f->ttl_ms = TTL_MAX_MS;
			memcpy(f->announcement, all[i].ann, ROCK_ANNOUNCE_LEN);
			ticket_expire(&all[i], now);
			if ((f->has_ticket = (int)all[i].has_ticket &&
			    in_memory(pf->path)) != 0) {
				struct rock_probe_ticket *t = &f->ticket;

				t->ttl_ms = all[i].ticket_ends_ms - now;
				t->chain_ms = all[i].chain_ends_ms - now;
				memcpy(t->ticket, all[i].ticket, ROCK_TICKET_LEN);
				memcpy(t->rms, all[i].rms, ROCK_KEY_LEN);
				memcpy(t->ident, all[i].ident, ROCK_IDENT_LEN);
			}
		}
	}
	rock_wipe(all, ROCK_PROBE_FILE_MAX * sizeof(*all));
	free(all);
	return found;
}

static int
store(const char *path, const struct entry *all, size_t n)
{
	char tmp[PATH_MAX];
	uint8_t *buf;
	uint32_t c = (uint32_t)n, zero = 0;
	size_t size = HEADER_LEN + n * ENTRY_LEN, i;
	int fd, r = -1;

	if (snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path) >= (int)sizeof(tmp) ||
	    (buf = malloc(size)) == NULL)
		return -1;
	memcpy(buf, MAGIC, 8);
	memcpy(buf + 8, &c, 4);
	memcpy(buf + 12, &zero, 4);
	for (i = 0; i < n; i++)
		entry_encode(&all[i], buf + HEADER_LEN + i * ENTRY_LEN);
	/* mkstemp: O_CREAT | O_EXCL, mode 0600. No fsync: a cache lost in a
	 * crash costs a probe. */
	if ((fd = mkstemp(tmp)) >= 0) {
		r = rock_sys.write(fd, buf, size) == (ssize_t)size ? 0 : -1;
		if (rock_sys.close(fd) != 0 || r != 0 || rename(tmp, path) != 0) {
			unlink(tmp);
			r = -1;
		}
	}
	rock_wipe(buf, size);
	free(buf);
	return r;
}

static void
put(struct rock_probe_file *pf, const struct rock_log *log,
    const struct sockaddr *addr, socklen_t len,
    const uint8_t ann[ROCK_ANNOUNCE_LEN], int64_t ttl_ms,
    const struct rock_probe_ticket *t)
{
	struct entry *all;
	int64_t now = wall_ms();
	size_t n = 0, i, kept = 1;

	if (!usable(pf) || len > ADDR_MAX || rock_mkdir_parents(pf->path) != 0 ||
	    (all = calloc(ROCK_PROBE_FILE_MAX + 1, sizeof(*all))) == NULL)
		return;
	/* A bad file is replaced (it was reported); a bad directory is
	 * not written to at all. */
	if (load(pf, log, all + 1, &n) != 0 && !dir_ok(pf, log)) {
		free(all);
		return;
	}
	/* Another process's put between our read and our rename is lost:
	 * it costs that destination one more probe, no wrong answer. */
	all[0].len = len;
	memcpy(all[0].addr, addr, len);
	all[0].enhanced = ann != NULL;
	all[0].expires_ms = now + ttl_ms;
	if (ann != NULL)
		memcpy(all[0].ann, ann, ROCK_ANNOUNCE_LEN);
	if (ann != NULL && t != NULL) {
		all[0].has_ticket = 1;
		all[0].ticket_ends_ms = now + t->ttl_ms;
		all[0].chain_ends_ms = now + t->chain_ms;
		memcpy(all[0].ticket, t->ticket, ROCK_TICKET_LEN);
		memcpy(all[0].rms, t->rms, ROCK_KEY_LEN);
		memcpy(all[0].ident, t->ident, ROCK_IDENT_LEN);
		ticket_expire(&all[0], now);
	}
	/* A probe that found the same server instance keeps its ticket. */
	for (i = 1; i <= n && t == NULL && ann != NULL; i++)
		if (same(&all[i], addr, len) && all[i].has_ticket &&
		    memcmp(all[i].ann, ann, ROCK_ANNOUNCE_LEN) == 0) {
			all[0].has_ticket = 1;
			all[0].ticket_ends_ms = all[i].ticket_ends_ms;
			all[0].chain_ends_ms = all[i].chain_ends_ms;
			memcpy(all[0].ticket, all[i].ticket, ROCK_TICKET_LEN);
			memcpy(all[0].rms, all[i].rms, ROCK_KEY_LEN);
			memcpy(all[0].ident, all[i].ident, ROCK_IDENT_LEN);
			ticket_expire(&all[0], now);
		}
	if (ttl_ms <= 0)
		kept = 0;
	for (i = 1; i <= n && kept < ROCK_PROBE_FILE_MAX; i++)
		if (!same(&all[i], addr, len) && all[i].expires_ms > now) {
			ticket_expire(&all[i], now);
			all[kept++] = all[i];
		}
	if (store(pf->path, all, kept) != 0)
		rlog_debug(log, "probe cache %s: not written: %s", pf->path,
		    strerror(errno));
	rock_wipe(all, (ROCK_PROBE_FILE_MAX + 1) * sizeof(*all));
	free(all);
}

void
rock_probe_file_put(struct rock_probe_file *pf, const struct rock_log *log,
    const struct sockaddr *addr, socklen_t len,
    const uint8_t ann[ROCK_ANNOUNCE_LEN], int64_t ttl_ms)
{
	put(pf, log, addr, len, ann, ttl_ms, NULL);
}

void
rock_probe_file_put_ticket(struct rock_probe_file *pf,
    const struct rock_log *log, const struct sockaddr *addr, socklen_t len,
    const uint8_t ann[ROCK_ANNOUNCE_LEN], int64_t ttl_ms,
    const struct rock_probe_ticket *t)
{
	if (usable(pf) && in_memory(pf->path))
		put(pf, log, addr, len, ann, ttl_ms, t);
}
