/* sendfile.c: sendfile() from a file to a rock: through the ring like any write. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shim.h"

#define CHUNK 65536

/* The file position (or *offset) moves by exactly what the rock took. */
static ssize_t
sendfile_rock(int out, int in, off_t *offset, size_t count)
{
	char *buf = malloc(CHUNK);
	size_t total = 0;
	ssize_t n = 0, w = 0;
	int err = 0;

	if (buf == NULL) {
		errno = ENOMEM;
		return -1;
	}
	while (total < count) {
		size_t want = count - total < CHUNK ? count - total : CHUNK;

		n = offset != NULL ? pread(in, buf, want, *offset) :
		    shim_real.read(in, buf, want);
		if (n <= 0) {
			err = errno;
			break;
		}
		w = send(out, buf, (size_t)n, 0);
		if (w < 0) {
			err = errno;
			if (offset == NULL)
				(void)lseek(in, -(off_t)n, SEEK_CUR);
			break;
		}
		if (w < n && offset == NULL)
			(void)lseek(in, -(off_t)(n - w), SEEK_CUR);
		if (offset != NULL)
			*offset += w;
		total += (size_t)w;
		if (w < n)
			break;
	}
	free(buf);
	if (total > 0 || (n == 0 && w >= 0))
		return (ssize_t)total;
	errno = err;
	return -1;
}

SHIM_EXPORT ssize_t
sendfile(int out, int in, off_t *offset, size_t count)
{
	struct stat st;

	if (!shim_is_rock(out) && !shim_is_rock(in))
		return shim_real.sendfile(out, in, offset, count);
	/* The kernel's sendfile reads only what can be mapped: a file. */
	if (fstat(in, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISBLK(st.st_mode))) {
		errno = EINVAL;
		return -1;
	}
	return sendfile_rock(out, in, offset, count);
}

SHIM_EXPORT ssize_t sendfile64(int out, int in, off_t *offset, size_t count)
    __attribute__((alias("sendfile")));
