/* rock_parse.h: strict number parsing for environment and config values. */
#ifndef ROCK_PARSE_H
#define ROCK_PARSE_H

/*
 * Parse a whole decimal integer within [min, max] into *out, like OpenBSD's
 * strtonum: no sign games, no trailing garbage, no silent overflow.
 * Leading and trailing blanks are not accepted either: an environment value
 * of " 5" is more likely a quoting mistake than an intent.
 * Returns 0 or ROCK_ERR_EMPTY / NOT_NUMBER / TOO_SMALL / TOO_LARGE;
 * *out is untouched on failure.
 */
int rock_parse_ll(const char *s, long long min, long long max, long long *out);

#endif
