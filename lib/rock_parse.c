/* rock_parse.c: strict decimal integer parsing. */
#include "config.h"

#include <limits.h>
#include <stddef.h>

#include "rock_err.h"
#include "rock_parse.h"

/* Checked before any value: "99999999999999999999x" is not a number,
 * rather than a number too large. */
static int
all_digits(const char *p)
{
	for (; *p != '\0'; p++)
		if (*p < '0' || *p > '9')
			return 0;
	return 1;
}

int
rock_parse_ll(const char *s, long long min, long long max, long long *out)
{
	unsigned long long mag = 0;
	int neg = 0;
	const char *p = s;

	if (s == NULL || *s == '\0')
		return ROCK_ERR_EMPTY;
	if (*p == '-' || *p == '+')
		neg = (*p++ == '-');
	if (*p == '\0' || !all_digits(p))
		return ROCK_ERR_NOT_NUMBER;
	/* Scan by hand: strtoll accepts blanks and reports overflow via errno,
	 * which a preloaded library must not disturb. */
	for (; *p != '\0'; p++) {
		unsigned d;

		d = (unsigned)(*p - '0');
		if (mag > ((unsigned long long)LLONG_MAX + 1 - d) / 10)
			return neg ? ROCK_ERR_TOO_SMALL : ROCK_ERR_TOO_LARGE;
		mag = mag * 10 + d;
	}
	if (!neg && mag > (unsigned long long)LLONG_MAX)
		return ROCK_ERR_TOO_LARGE;
	if (neg) {
		long long v = mag == (unsigned long long)LLONG_MAX + 1 ?
		    LLONG_MIN : -(long long)mag;
		if (v < min)
			return ROCK_ERR_TOO_SMALL;
		if (v > max)
			return ROCK_ERR_TOO_LARGE;
		*out = v;
		return 0;
	}
	if ((long long)mag < min)
		return ROCK_ERR_TOO_SMALL;
	if ((long long)mag > max)
		return ROCK_ERR_TOO_LARGE;
	*out = (long long)mag;
	return 0;
}
