/* splice.c: splice() with a rock on either side is refused: it would move bytes the rock never counts. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>

#include "shim.h"

/* EINVAL is what the kernel says of a descriptor splice cannot serve
 * (copy_file_range already says it of every socket): programs that try
 * splice fall back to read and write, which a rock counts and replays. */
SHIM_EXPORT ssize_t
splice(int in, loff_t *off_in, int out, loff_t *off_out, size_t len,
    unsigned int flags)
{
	if (shim_is_rock(in) || shim_is_rock(out)) {
		errno = EINVAL;
		return -1;
	}
	return shim_real.splice(in, off_in, out, off_out, len, flags);
}
