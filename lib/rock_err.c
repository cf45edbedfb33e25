/* rock_err.c: text for the engine's error codes. */
#include "config.h"

#include "rock_err.h"

static const char *const rock_err_text[] = {
	"success",
	"system error",
	"not a decimal integer",
	"too small",
	"too large",
	"not an accepted word",
	"empty",
	"out of memory",
	"invalid argument",
};

const char *
rock_err(int code)
{
	if (code > 0 || code <= ROCK_ERR_LAST)
		return "unknown error";
	return rock_err_text[-code];
}
