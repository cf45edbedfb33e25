/* check_identity.c: server key files, the known-servers file and the trust decisions on them, and their settings. */
#include "config.h"

#include <check.h>
#include <limits.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <time.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <linux/magic.h>
#include <unistd.h>

#include "rock_config.h"
#include "rock_crypto.h"
#include "rock_err.h"
#include "rock_key.h"
#include "rock_known.h"
#include "rock_log.h"
#include "rock_probe_file.h"
#include "rock_wire.h"
#include "suites.h"

static char dir[64], logpath[128];
static struct rock_config logcfg;
static struct rock_log lg;

static void
setup(void)
{
	ck_assert_int_eq(rock_crypto_init(), 0);
	snprintf(dir, sizeof(dir), "/tmp/check_identity.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(logpath, sizeof(logpath), "%s/log", dir);
	rock_config_defaults(&logcfg);
	logcfg.log_sink = ROCK_LOG_FILE;
	snprintf(logcfg.log_path, sizeof(logcfg.log_path), "%s", logpath);
	rock_log_configure(&lg, &logcfg, "test");
}

static void
teardown(void)
{
	char cmd[96];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static void
path_in(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s", dir, name);
}

/* The whole of a small file, NUL-terminated. */
static const char *
slurp(const char *path)
{
	static char buf[4096];
	FILE *f = fopen(path, "r");
	size_t n = 0;

	if (f != NULL) {
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
	return buf;
}

START_TEST(test_key_file)
{
	struct rock_identity a, b;
	char path[128], err[256];
	struct stat st;
	int created;
	FILE *f;

	path_in(path, sizeof(path), "state/rockd/key");
	/* Missing, not to be created (rockd -t): an error naming the file. */
	ck_assert_int_eq(rock_key_load(path, 0, &a, &created, err, sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, path));
	ck_assert_int_eq(rock_key_load(path, 1, &a, &created, err, sizeof(err)), 0);
	ck_assert_int_eq(created, 1);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	ck_assert_int_eq(st.st_size, ROCK_KEY_FILE_LEN);
	path_in(err, sizeof(err), "state/rockd");
	ck_assert_int_eq(stat(err, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0700);
	/* Loaded again: the same key, nothing made. */
	ck_assert_int_eq(rock_key_load(path, 1, &b, &created, err, sizeof(err)), 0);
	ck_assert_int_eq(created, 0);
	ck_assert_mem_eq(a.pk, b.pk, ROCK_IDENT_LEN);
	ck_assert_int_eq(chmod(path, 0640), 0);
	ck_assert_int_eq(rock_key_load(path, 1, &b, &created, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "mode 0640") != NULL && strstr(err, path) != NULL,
	    "%s", err);
	ck_assert_int_eq(chmod(path, 0600), 0);
	ck_assert_ptr_nonnull(f = fopen(path, "a"));
	fputc('x', f);
	fclose(f);
	ck_assert_int_eq(rock_key_load(path, 1, &b, &created, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "33 bytes: a key file holds 32") != NULL, "%s", err);
	path_in(path, sizeof(path), "state");	/* a directory */
	ck_assert_int_eq(rock_key_load(path, 1, &b, &created, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "not a regular file") != NULL, "%s", err);
	rock_identity_wipe(&a);
	rock_identity_wipe(&b);
}
END_TEST

static void
addr_v4(struct sockaddr_in *a, const char *ip, unsigned short port)
{
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_port = htons(port);
	ck_assert_int_eq(inet_pton(AF_INET, ip, &a->sin_addr), 1);
}

START_TEST(test_key_text)
{
	uint8_t pk[ROCK_IDENT_LEN], back[ROCK_IDENT_LEN];
	char text[ROCK_KEY_TEXT_LEN], dest[ROCK_DEST_TEXT_LEN];
	struct sockaddr_in6 a6;
	struct sockaddr_in a;
	size_t i;

	for (i = 0; i < sizeof(pk); i++)
		pk[i] = (uint8_t)i;
	rock_key_text(pk, text);
	ck_assert_str_eq(text, "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=");
	ck_assert_int_eq(rock_key_parse(text, back), 0);
	ck_assert_mem_eq(back, pk, sizeof(pk));
	text[43] = '\0';	/* one character short */
	ck_assert_int_eq(rock_key_parse(text, back), ROCK_ERR_BAD_WORD);
	ck_assert_int_eq(rock_key_parse("not base64 at all, 44 characters long!!!!!!", back),
	    ROCK_ERR_BAD_WORD);
	addr_v4(&a, "192.0.2.7", 4022);
	rock_dest_text((struct sockaddr *)&a, sizeof(a), dest);
	ck_assert_str_eq(dest, "192.0.2.7:4022");
	memset(&a6, 0, sizeof(a6));
	a6.sin6_family = AF_INET6;
	a6.sin6_port = htons(7000);
	ck_assert_int_eq(inet_pton(AF_INET6, "2001:db8::2", &a6.sin6_addr), 1);
	rock_dest_text((struct sockaddr *)&a6, sizeof(a6), dest);
	ck_assert_str_eq(dest, "[2001:db8::2]:7000");
}
END_TEST

/* First contact records, the same key matches, another is refused and
 * leaves the file alone, accept_new replaces the line. */
START_TEST(test_trust_on_first_use)
{
	struct rock_trust t;
	struct sockaddr_in a, other;
	uint8_t k1[ROCK_IDENT_LEN], k2[ROCK_IDENT_LEN], got[ROCK_IDENT_LEN];
	char t1[ROCK_KEY_TEXT_LEN], t2[ROCK_KEY_TEXT_LEN], want[PATH_MAX + 256];
	struct stat st;

	memset(&t, 0, sizeof(t));
	path_in(t.path, sizeof(t.path), "config/rock/known_servers");
	memset(k1, 1, sizeof(k1));
	memset(k2, 2, sizeof(k2));
	rock_key_text(k1, t1);
	rock_key_text(k2, t2);
	addr_v4(&a, "203.0.113.2", 7000);
	addr_v4(&other, "203.0.113.2", 7001);
	ck_assert_int_eq(rock_trust_known(&t, &lg, (struct sockaddr *)&a,
	    sizeof(a), got), 0);
	ck_assert_int_eq(rock_trust_check(&t, &lg, (struct sockaddr *)&a,
	    sizeof(a), k1), 0);
	snprintf(want, sizeof(want), "203.0.113.2:7000 %s\n", t1);
	ck_assert_str_eq(slurp(t.path), want);
	ck_assert_int_eq(stat(t.path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	ck_assert_int_eq(rock_trust_known(&t, &lg, (struct sockaddr *)&a,
	    sizeof(a), got), 1);
	ck_assert_mem_eq(got, k1, sizeof(k1));
	ck_assert_int_eq(rock_trust_check(&t, &lg, (struct sockaddr *)&a,
	    sizeof(a), k1), 0);
	ck_assert_int_eq(rock_trust_check(&t, &lg, (struct sockaddr *)&a,
	    sizeof(a), k2), ROCK_ERR_KEY);
	ck_assert_str_eq(slurp(t.path), want);
	snprintf(want, sizeof(want), "the key of server 203.0.113.2:7000 has "
	    "changed: %s:1 says %s, the server now proves %s", t.path, t1, t2);
	ck_assert_msg(strstr(slurp(logpath), want) != NULL, "%s", slurp(logpath));
	/* Another port is another destination: its own first contact. */
	ck_assert_int_eq(rock_trust_check(&t, &lg, (struct sockaddr *)&other,
	    sizeof(other), k2), 0);
	t.accept_new = 1;
	ck_assert_int_eq(rock_trust_check(&t, &lg, (struct sockaddr *)&a,
	    sizeof(a), k2), 0);
	snprintf(want, sizeof(want), "203.0.113.2:7000 %s\n203.0.113.2:7001 %s\n",
	    t2, t2);
	ck_assert_str_eq(slurp(t.path), want);
}
END_TEST

/* Malformed lines are reported with file:line and skipped; the good ones
 * around them count. */
START_TEST(test_known_malformed)
{
	uint8_t k[ROCK_IDENT_LEN], got[ROCK_IDENT_LEN];
	char path[128], text[ROCK_KEY_TEXT_LEN], want[160];
	FILE *f;
	int line = 0;

	memset(k, 7, sizeof(k));
	rock_key_text(k, text);
	path_in(path, sizeof(path), "known");
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	fprintf(f, "# comment\n\n192.0.2.1:1 notakey\n192.0.2.1:2 %s extra\n"
	    "192.0.2.1:3 %s\n", text, text);
	fclose(f);
	ck_assert_int_eq(rock_known_lookup(path, "192.0.2.1:3", got, &line, &lg), 1);
	ck_assert_int_eq(line, 5);
	ck_assert_mem_eq(got, k, sizeof(k));
	ck_assert_int_eq(rock_known_lookup(path, "192.0.2.1:1", got, &line, &lg), 0);
	snprintf(want, sizeof(want), "%s:3: not \"ADDRESS:PORT KEY\"", path);
	ck_assert_msg(strstr(slurp(logpath), want) != NULL, "%s", slurp(logpath));
	snprintf(want, sizeof(want), "%s:4: not \"ADDRESS:PORT KEY\"", path);
	ck_assert_msg(strstr(slurp(logpath), want) != NULL, "%s", slurp(logpath));
	/* A replace keeps the comment and the lines it does not concern. */
	ck_assert_int_eq(rock_known_replace(path, "192.0.2.1:3", got), 0);
	ck_assert_ptr_nonnull(strstr(slurp(path), "# comment\n\n192.0.2.1:1 notakey\n"));
}
END_TEST

/* A NUL inside a line or a line past the limit is one bad line: the next
 * entry is still found, at its own line number, and survives a replace
 * whole (a reviewer's NUL hid the following line, which then read as a
 * first contact). */
START_TEST(test_known_nul_and_long)
{
	uint8_t k[ROCK_IDENT_LEN], got[ROCK_IDENT_LEN];
	char path[128], text[ROCK_KEY_TEXT_LEN], want[160], longdest[700];
	FILE *f;
	int line = 0;

	memset(k, 9, sizeof(k));
	rock_key_text(k, text);
	memset(longdest, 'x', sizeof(longdest) - 1);
	longdest[sizeof(longdest) - 1] = '\0';
	path_in(path, sizeof(path), "known-nul");
	ck_assert_ptr_nonnull(f = fopen(path, "w"));
	fprintf(f, "192.0.2.1:1 %s", text);
	fputc('\0', f);
	fprintf(f, "junk\n192.0.2.1:2 %s\n%s %s\n192.0.2.1:3 %s\n", text,
	    longdest, text, text);
	fclose(f);
	ck_assert_int_eq(rock_known_lookup(path, "192.0.2.1:2", got, &line, &lg), 1);
	ck_assert_int_eq(line, 2);
	ck_assert_mem_eq(got, k, sizeof(k));
	ck_assert_int_eq(rock_known_lookup(path, "192.0.2.1:3", got, &line, &lg), 1);
	ck_assert_int_eq(line, 4);
	snprintf(want, sizeof(want), "%s:1: too long, or not text", path);
	ck_assert_msg(strstr(slurp(logpath), want) != NULL, "%s", slurp(logpath));
	snprintf(want, sizeof(want), "%s:3: too long, or not text", path);
	ck_assert_msg(strstr(slurp(logpath), want) != NULL, "%s", slurp(logpath));
	/* The long line is kept whole, not cut into entries. */
	ck_assert_int_eq(rock_known_replace(path, "192.0.2.1:2", got), 0);
	ck_assert_int_eq(rock_known_lookup(path, "192.0.2.1:3", got, &line, &lg), 1);
	ck_assert_int_eq(line, 4);
}
END_TEST

/* FILE: its modification time an hour back (what a file not written in
 * the last seconds looks like), *mtim set to it. */
static void
age(const char *path, struct timespec *mtim)
{
	struct timespec ts[2];

	clock_gettime(CLOCK_REALTIME, &ts[0]);
	ts[0].tv_sec -= 3600;
	ts[1] = ts[0];
	ck_assert_int_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
	*mtim = ts[1];
}

static void
put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fputs(text, f) >= 0, 1);
	ck_assert_int_eq(fclose(f), 0);
}

/* The memo answers for a file unchanged since it read it, without
 * reading it, and sees every change: in place at the same size (even
 * with the old modification time put back), appended, replaced by
 * rename, removed. Its window for files changed just now is shrunk to
 * none (a test cannot wait seconds), and the changes are a few jiffies
 * apart (inode times move once a jiffy before Linux 6.13). */
START_TEST(test_known_memo)
{
	struct rock_trust t;
	struct rock_known_memo m;
	struct sockaddr_in a, b;
	uint8_t k1[ROCK_IDENT_LEN], k2[ROCK_IDENT_LEN], got[ROCK_IDENT_LEN];
	char t1[ROCK_KEY_TEXT_LEN], t2[ROCK_KEY_TEXT_LEN], line[256], other[PATH_MAX];
	struct timespec mt, ts[2];
	int fd;

	memset(&t, 0, sizeof(t));
	path_in(t.path, sizeof(t.path), "known_memo");
	path_in(other, sizeof(other), "known_memo.new");
	rock_known_memo_init(&m);
	m.racy_s = 0;
	memset(k1, 1, sizeof(k1));
	memset(k2, 2, sizeof(k2));
	rock_key_text(k1, t1);
	rock_key_text(k2, t2);
	addr_v4(&a, "198.51.100.7", 4000);
	addr_v4(&b, "198.51.100.8", 4000);
#define KNOWN(sa) rock_trust_known_memo(&t, &m, &lg, (struct sockaddr *)&(sa), \
	sizeof(sa), got)
	ck_assert_int_eq(KNOWN(a), 0);
	snprintf(line, sizeof(line), "198.51.100.7:4000 %s\n", t1);
	put(t.path, line);
	age(t.path, &mt);
	ck_assert_int_eq(KNOWN(a), 1);
	ck_assert_mem_eq(got, k1, sizeof(k1));
	ck_assert_int_eq(KNOWN(b), 0);
	/* Remembered: what it answers next is what it kept, not the file's
	 * (the kept key is swapped here to tell the two apart). */
	ck_assert_str_eq(m.answers[0].dest, "198.51.100.7:4000");
	memcpy(m.answers[0].pk, k2, sizeof(k2));
	ck_assert_int_eq(KNOWN(a), 1);
	ck_assert_mem_eq(got, k2, sizeof(k2));
	memcpy(m.answers[0].pk, k1, sizeof(k1));
	/* Rewritten in place, same size, the old time put back. */
	usleep(30000);
	snprintf(line, sizeof(line), "198.51.100.7:4000 %s\n", t2);
	ck_assert_int_ge(fd = open(t.path, O_WRONLY), 0);
	ck_assert_int_eq(pwrite(fd, line, strlen(line), 0), (ssize_t)strlen(line));
	ck_assert_int_eq(close(fd), 0);
	ts[0] = ts[1] = mt;
	ck_assert_int_eq(utimensat(AT_FDCWD, t.path, ts, 0), 0);
	ck_assert_int_eq(KNOWN(a), 1);
	ck_assert_mem_eq(got, k2, sizeof(k2));
	/* Appended. */
	usleep(30000);
	snprintf(line, sizeof(line), "198.51.100.7:4000 %s\n198.51.100.8:4000 %s\n",
	    t2, t1);
	put(t.path, line);
	age(t.path, &mt);
	ck_assert_int_eq(KNOWN(b), 1);
	ck_assert_mem_eq(got, k1, sizeof(k1));
	/* Replaced by rename: another inode, the same size, the same
	 * modification time. */
	snprintf(line, sizeof(line), "198.51.100.7:4000 %s\n198.51.100.8:4000 %s\n",
	    t1, t2);
	put(other, line);
	ts[0] = ts[1] = mt;
	ck_assert_int_eq(utimensat(AT_FDCWD, other, ts, 0), 0);
	ck_assert_int_eq(rename(other, t.path), 0);
	ck_assert_int_eq(KNOWN(b), 1);
	ck_assert_mem_eq(got, k2, sizeof(k2));
	/* A file changed within the window is read every time: not kept. */
	m.racy_s = 3600;
	ck_assert_int_eq(KNOWN(a), 1);
	ck_assert_mem_eq(got, k1, sizeof(k1));
	ck_assert_int_eq(m.have_file, 0);
	ck_assert_int_eq(unlink(t.path), 0);
	ck_assert_int_eq(KNOWN(a), 0);
#undef KNOWN
	rock_known_memo_destroy(&m);
}
END_TEST

/* A pin wins over the file; no file: any key, nothing written. */
START_TEST(test_pin_and_none)
{
	struct rock_trust t;
	struct sockaddr_in a;
	uint8_t k1[ROCK_IDENT_LEN], k2[ROCK_IDENT_LEN], got[ROCK_IDENT_LEN];

	memset(&t, 0, sizeof(t));
	memset(k1, 1, sizeof(k1));
	memset(k2, 2, sizeof(k2));
	addr_v4(&a, "192.0.2.9", 22);
	ck_assert_int_eq(rock_trust_check(&t, &lg, (struct sockaddr *)&a,
	    sizeof(a), k1), 0);
	ck_assert_int_eq(rock_trust_known(&t, &lg, (struct sockaddr *)&a,
	    sizeof(a), got), 0);
	t.pinned = 1;
	memcpy(t.pin, k2, sizeof(k2));
	ck_assert_int_eq(rock_trust_known(&t, &lg, (struct sockaddr *)&a,
	    sizeof(a), got), 1);
	ck_assert_mem_eq(got, k2, sizeof(k2));
	ck_assert_int_eq(rock_trust_check(&t, &lg, (struct sockaddr *)&a,
	    sizeof(a), k1), ROCK_ERR_KEY);
	ck_assert_int_eq(rock_trust_check(&t, &lg, (struct sockaddr *)&a,
	    sizeof(a), k2), 0);
	ck_assert_ptr_nonnull(strstr(slurp(logpath), "as ROCK_SERVER_KEY requires: connection refused"));
}
END_TEST

struct env {
	const char *names[4], *values[4];
	char reports[1024];
};

static const char *
env_get(void *arg, const char *name)
{
	struct env *e = arg;
	int i;

	for (i = 0; i < 4 && e->names[i] != NULL; i++)
		if (strcmp(e->names[i], name) == 0)
			return e->values[i];
	return NULL;
}

static void
env_warn(void *arg, const char *var, const char *value, const char *problem,
    const char *accepted)
{
	struct env *e = arg;
	size_t n = strlen(e->reports);

	snprintf(e->reports + n, sizeof(e->reports) - n, "%s=%s: %s (%s)\n", var,
	    value, problem, accepted);
}

static void
parse_env(struct env *e, struct rock_config *cfg)
{
	struct rock_env_parser p;

	memset(&p, 0, sizeof(p));
	p.get = env_get;
	p.get_arg = e;
	p.warn = env_warn;
	p.warn_arg = e;
	rock_config_from_env(cfg, &p);
}

START_TEST(test_settings)
{
	struct env e = { { "HOME", NULL }, { "/home/u", NULL }, "" };
	struct rock_config cfg;
	char want[64];

	parse_env(&e, &cfg);
	ck_assert_str_eq(cfg.trust.path, "/home/u/.config/rock/known_servers");
	ck_assert_int_eq(cfg.trust.pinned, 0);
	snprintf(want, sizeof(want), "/tmp/rock-%lu/probes",
	    (unsigned long)geteuid());
	ck_assert_str_eq(cfg.probe_cache, want);
	e.names[1] = "XDG_CONFIG_HOME";
	e.values[1] = "/x";
	parse_env(&e, &cfg);
	ck_assert_str_eq(cfg.trust.path, "/x/rock/known_servers");
	e.names[1] = "XDG_RUNTIME_DIR";
	e.values[1] = "/run/user/7";
	parse_env(&e, &cfg);
	ck_assert_str_eq(cfg.probe_cache, "/run/user/7/rock/probes");
	e.names[2] = "ROCK_PROBE_CACHE";
	e.values[2] = "";
	parse_env(&e, &cfg);
	ck_assert_str_eq(cfg.probe_cache, "");
	e.values[2] = "/p/c";
	parse_env(&e, &cfg);
	ck_assert_str_eq(cfg.probe_cache, "/p/c");
	e.names[2] = NULL;
	e.values[2] = NULL;
	e.names[1] = "XDG_CONFIG_HOME";
	e.values[1] = "/x";
	parse_env(&e, &cfg);
	ck_assert_str_eq(cfg.trust.path, "/x/rock/known_servers");
	e.names[2] = "ROCK_KNOWN_SERVERS";
	e.values[2] = "";
	e.names[3] = "ROCK_SERVER_KEY";
	e.values[3] = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
	parse_env(&e, &cfg);
	ck_assert_str_eq(cfg.trust.path, "");
	ck_assert_int_eq(cfg.trust.pinned, 1);
	ck_assert_uint_eq(cfg.trust.pin[31], 31);
	ck_assert_str_eq(e.reports, "");
	e.values[2] = "relative/known";
	e.values[3] = "AAEC";
	parse_env(&e, &cfg);
	ck_assert_str_eq(cfg.trust.path, "/x/rock/known_servers");
	ck_assert_int_eq(cfg.trust.pinned, 0);
	ck_assert_str_eq(e.reports,
	    "ROCK_KNOWN_SERVERS=relative/known: not an accepted word (an absolute "
	    "file path, or empty (keep no server keys))\n"
	    "ROCK_SERVER_KEY=AAEC: not an accepted word (a server key as rockd "
	    "logs it: 44 characters of base64)\n");
}
END_TEST


/* A resumption ticket in the shared file: found with its announcement and
 * the time left; a probe's new answer for the destination drops it; one
 * past its end, or its chain's, is not found (the announcement is). */
static int
in_memory_fs(const char *path)
{
	struct statfs sf;

	return statfs(path, &sf) == 0 && (sf.f_type == TMPFS_MAGIC ||
	    sf.f_type == RAMFS_MAGIC);
}

START_TEST(test_probe_file_ticket)
{
	struct rock_probe_file pf = { NULL, 0 };
	struct sockaddr_in a = { .sin_family = AF_INET };
	struct rock_probe_ticket t, none;
	struct rock_announce an;
	struct rock_probe_fact f;
	uint8_t ann[ROCK_ANNOUNCE_LEN];
	char shm[64] = "/dev/shm/check_identity.XXXXXX", path[128], cmd[96];

	/* The secret goes only to a file system in memory. */
	if (!in_memory_fs("/dev/shm") || mkdtemp(shm) == NULL)
		return;		/* nowhere to share a ticket on this host */
	snprintf(path, sizeof(path), "%s/probes", shm);
	pf.path = path;
	a.sin_port = htons(4022);
	a.sin_addr.s_addr = htonl(0xc0000201);
	an.version_max = an.version_min = ROCK_VERSION;
	an.features = ROCK_FEAT_ALL;
	memset(an.random, 0x5a, sizeof(an.random));
	rock_announce_encode(&an, ann);
	memset(&t, 0, sizeof(t));
	memset(t.ticket, 0x11, sizeof(t.ticket));
	memset(t.rms, 0x22, sizeof(t.rms));
	memset(t.ident, 0x33, sizeof(t.ident));
	t.ttl_ms = 3000000;
	t.chain_ms = 6000000;
	rock_probe_file_put_ticket(&pf, &lg, (struct sockaddr *)&a, sizeof(a),
	    ann, ROCK_PROBE_TTL_MS, &t);
	ck_assert_int_eq(rock_probe_file_get(&pf, &lg,
	    (struct sockaddr *)&a, sizeof(a), &f), 1);
	ck_assert_int_eq(f.enhanced, 1);
	ck_assert_int_eq(f.has_ticket, 1);
	ck_assert_mem_eq(f.ticket.ticket, t.ticket, sizeof(t.ticket));
	ck_assert_mem_eq(f.ticket.rms, t.rms, sizeof(t.rms));
	ck_assert_mem_eq(f.ticket.ident, t.ident, sizeof(t.ident));
	ck_assert(f.ticket.ttl_ms > 3000000 - 5000 && f.ticket.ttl_ms <= 3000000);
	ck_assert(f.ticket.chain_ms > 6000000 - 5000 && f.ticket.chain_ms <= 6000000);
	/* A probe's answer from the same instance keeps the ticket; a new
	 * announcement (a new server, maybe) drops it. */
	rock_probe_file_put(&pf, &lg, (struct sockaddr *)&a, sizeof(a), ann,
	    ROCK_PROBE_TTL_MS);
	ck_assert_int_eq(rock_probe_file_get(&pf, &lg,
	    (struct sockaddr *)&a, sizeof(a), &f), 1);
	ck_assert_int_eq(f.has_ticket, 1);
	ck_assert_mem_eq(f.ticket.rms, t.rms, sizeof(t.rms));
	ann[100] ^= 1;
	rock_probe_file_put(&pf, &lg, (struct sockaddr *)&a, sizeof(a), ann,
	    ROCK_PROBE_TTL_MS);
	ck_assert_int_eq(rock_probe_file_get(&pf, &lg,
	    (struct sockaddr *)&a, sizeof(a), &f), 1);
	ck_assert_int_eq(f.has_ticket, 0);
	/* Past its chain's end: the announcement without it. */
	none = t;
	none.chain_ms = 1;
	rock_probe_file_put_ticket(&pf, &lg, (struct sockaddr *)&a, sizeof(a),
	    ann, ROCK_PROBE_TTL_MS, &none);
	usleep(5000);
	ck_assert_int_eq(rock_probe_file_get(&pf, &lg,
	    (struct sockaddr *)&a, sizeof(a), &f), 1);
	ck_assert_int_eq(f.has_ticket, 0);
	ck_assert_int_eq(pf.warned, 0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", shm);
	ck_assert_int_eq(system(cmd), 0);
	/* On a disk: the announcement is shared, the ticket is not. */
	path_in(path, sizeof(path), "run/rock/probes");
	if (!in_memory_fs(dir)) {
		rock_probe_file_put_ticket(&pf, &lg, (struct sockaddr *)&a,
		    sizeof(a), ann, ROCK_PROBE_TTL_MS, &t);
		ck_assert_int_eq(rock_probe_file_get(&pf, &lg,
		    (struct sockaddr *)&a, sizeof(a), &f), 0);
		rock_probe_file_put(&pf, &lg, (struct sockaddr *)&a, sizeof(a),
		    ann, ROCK_PROBE_TTL_MS);
		ck_assert_int_eq(rock_probe_file_get(&pf, &lg,
		    (struct sockaddr *)&a, sizeof(a), &f), 1);
		ck_assert_int_eq(f.has_ticket, 0);
	}
}
END_TEST

/* The shared probe cache: what one put says another get finds, newest
 * first; a forget (ttl 0) and an expiry remove; an ordinary server is
 * recorded without an announcement. */
START_TEST(test_probe_file)
{
	struct rock_probe_file pf = { NULL, 0 };
	struct sockaddr_in a = { .sin_family = AF_INET }, b = a;
	struct rock_announce an;
	struct rock_probe_fact f;
	uint8_t ann[ROCK_ANNOUNCE_LEN];
	char path[128];
	struct stat st;
	int i;

	path_in(path, sizeof(path), "run/rock/probes");
	pf.path = path;
	a.sin_port = htons(4022);
	a.sin_addr.s_addr = htonl(0xc0000201);
	b.sin_port = htons(80);
	an.version_max = an.version_min = ROCK_VERSION;
	an.features = ROCK_FEAT_ALL;
	memset(an.random, 0x5a, sizeof(an.random));
	rock_announce_encode(&an, ann);
	ck_assert_int_eq(rock_probe_file_get(&pf, &lg,
	    (struct sockaddr *)&a, sizeof(a), &f), 0);	/* no file yet */
	rock_probe_file_put(&pf, &lg, (struct sockaddr *)&a, sizeof(a), ann,
	    ROCK_PROBE_TTL_MS);
	rock_probe_file_put(&pf, &lg, (struct sockaddr *)&b, sizeof(b), NULL,
	    ROCK_PROBE_PLAIN_TTL_MS);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0600);
	ck_assert_int_eq(rock_probe_file_get(&pf, &lg,
	    (struct sockaddr *)&a, sizeof(a), &f), 1);
	ck_assert_int_eq(f.enhanced, 1);
	ck_assert_mem_eq(f.announcement, ann, sizeof(ann));
	ck_assert(f.ttl_ms > ROCK_PROBE_TTL_MS - 5000 && f.ttl_ms <= ROCK_PROBE_TTL_MS);
	ck_assert_int_eq(rock_probe_file_get(&pf, &lg,
	    (struct sockaddr *)&b, sizeof(b), &f), 1);
	ck_assert_int_eq(f.enhanced, 0);
	/* Forgotten: gone; the other stays. */
	rock_probe_file_put(&pf, &lg, (struct sockaddr *)&a, sizeof(a), NULL, 0);
	ck_assert_int_eq(rock_probe_file_get(&pf, &lg,
	    (struct sockaddr *)&a, sizeof(a), &f), 0);
	ck_assert_int_eq(rock_probe_file_get(&pf, &lg,
	    (struct sockaddr *)&b, sizeof(b), &f), 1);
	/* Expired: not found. */
	rock_probe_file_put(&pf, &lg, (struct sockaddr *)&a, sizeof(a), ann, 1);
	usleep(5000);
	ck_assert_int_eq(rock_probe_file_get(&pf, &lg,
	    (struct sockaddr *)&a, sizeof(a), &f), 0);
	/* Bounded: more destinations than it holds keep the newest. */
	for (i = 0; i < ROCK_PROBE_FILE_MAX + 4; i++) {
		b.sin_port = htons((uint16_t)(1000 + i));
		rock_probe_file_put(&pf, &lg, (struct sockaddr *)&b, sizeof(b),
		    ann, ROCK_PROBE_TTL_MS);
	}
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_size, 16 + ROCK_PROBE_FILE_MAX *
	    (4 + 28 + 4 + 8 + ROCK_ANNOUNCE_LEN + 4 + 8 + 8 + ROCK_TICKET_LEN +
	    ROCK_KEY_LEN + ROCK_IDENT_LEN));
	ck_assert_int_eq(rock_probe_file_get(&pf, &lg,
	    (struct sockaddr *)&b, sizeof(b), &f), 1);
	b.sin_port = htons(1000);
	ck_assert_int_eq(rock_probe_file_get(&pf, &lg,
	    (struct sockaddr *)&b, sizeof(b), &f), 0);
	/* Nothing was wrong: no complaint. */
	ck_assert_int_eq(pf.warned, 0);
	ck_assert_ptr_null(strstr(slurp(logpath), "probe cache"));
}
END_TEST

Suite *
identity_suite(void)
{
	Suite *s = suite_create("identity");
	TCase *tc = tcase_create("files");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_key_file);
	tcase_add_test(tc, test_key_text);
	tcase_add_test(tc, test_trust_on_first_use);
	tcase_add_test(tc, test_known_malformed);
	tcase_add_test(tc, test_known_nul_and_long);
	tcase_add_test(tc, test_pin_and_none);
	tcase_add_test(tc, test_known_memo);
	tcase_add_test(tc, test_settings);
	tcase_add_test(tc, test_probe_file);
	tcase_add_test(tc, test_probe_file_ticket);
	suite_add_tcase(s, tc);
	return s;
}
