/* rock_cover.c: why the preloaded library will not reach a program's sockets, if it will not. */
#include "config.h"

#include <elf.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "rock_cover.h"

/* What the ELF file says about preloading: the dynamic loader only runs
 * for a program with a PT_INTERP, and a Go program (its linker writes
 * .go.buildinfo, static or not) calls the kernel without libc. */
struct elf_facts {
	int	has_interp;
	int	is_go;
};

static int
read_at(int fd, void *buf, size_t len, uint64_t off)
{
	return pread(fd, buf, len, (off_t)off) == (ssize_t)len ? 0 : -1;
}

static int
elf_has_interp(int fd, const Elf64_Ehdr *eh)
{
	Elf64_Phdr ph;
	int i;

	for (i = 0; i < eh->e_phnum; i++) {
		if (read_at(fd, &ph, sizeof(ph), eh->e_phoff + i * sizeof(ph)) != 0)
			return -1;
		if (ph.p_type == PT_INTERP)
			return 1;
	}
	return 0;
}

/* 1 if a section is named NAME; sections are optional, so none is 0. */
static int
elf_has_section(int fd, const Elf64_Ehdr *eh, const char *name)
{
	Elf64_Shdr sh, names;
	size_t len = strlen(name) + 1;
	char got[32];
	int i;

	if (eh->e_shoff == 0 || eh->e_shstrndx == SHN_UNDEF ||
	    eh->e_shstrndx >= eh->e_shnum || len > sizeof(got))
		return 0;
	if (read_at(fd, &names, sizeof(names),
	    eh->e_shoff + eh->e_shstrndx * sizeof(names)) != 0)
		return -1;
	for (i = 0; i < eh->e_shnum; i++) {
		if (read_at(fd, &sh, sizeof(sh), eh->e_shoff + i * sizeof(sh)) != 0)
			return -1;
		if (sh.sh_name + len > names.sh_size)
			continue;
		if (read_at(fd, got, len, names.sh_offset + sh.sh_name) != 0)
			return -1;
		if (memcmp(got, name, len) == 0)
			return 1;
	}
	return 0;
}

/* 0 with the facts, or -1: not a 64-bit ELF we can read (a script, a
 * 32-bit program the loader itself complains about, a short file). */
static int
elf_inspect(const char *path, struct elf_facts *f)
{
	Elf64_Ehdr eh;
	int fd = open(path, O_RDONLY | O_CLOEXEC), r = -1;

	if (fd < 0)
		return -1;
	if (read_at(fd, &eh, sizeof(eh), 0) != 0 ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(Elf64_Phdr) ||
	    (eh.e_shnum != 0 && eh.e_shentsize != sizeof(Elf64_Shdr)))
		goto out;
	if ((f->has_interp = elf_has_interp(fd, &eh)) < 0 ||
	    (f->is_go = elf_has_section(fd, &eh, ".go.buildinfo")) < 0)
		goto out;
	r = 0;
out:
	close(fd);
	return r;
}

/* Why the kernel would run the program in secure mode (AT_SECURE, in
 * which the loader drops LD_PRELOAD): exec changes the effective user
 * or group away from the real one, or raises capabilities for a real
 * user other than root; nosuid mounts and no_new_privs stop all that. */
static const char *
secure_exec_reason(const char *path, const struct stat *st)
{
	struct statvfs vfs;

	if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1 ||
	    (statvfs(path, &vfs) == 0 && (vfs.f_flag & ST_NOSUID)))
		return NULL;
	if ((st->st_mode & S_ISUID) && st->st_uid != getuid())
		return "is set-user-ID: the dynamic loader ignores LD_PRELOAD "
		    "for it";
	if ((st->st_mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP) &&
	    st->st_gid != getgid())
		return "is set-group-ID: the dynamic loader ignores LD_PRELOAD "
		    "for it";
	if (getuid() != 0 && getxattr(path, "security.capability", NULL, 0) > 0)
		return "has file capabilities: the dynamic loader ignores "
		    "LD_PRELOAD for it";
	return NULL;
}

const char *
rock_uncovered_reason(const char *path)
{
	struct elf_facts f;
	struct stat st;
	const char *why;

	if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return NULL;
	if ((why = secure_exec_reason(path, &st)) != NULL)
		return why;
	if (elf_inspect(path, &f) != 0)
		return NULL;
	if (f.is_go)
		return "is a Go program: Go makes its own system calls";
	if (!f.has_interp)
		return "is statically linked: LD_PRELOAD cannot reach it";
	return NULL;
}
