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
	/* in-flight ring */
	"in-flight buffer full",
	"protocol violation by the peer",
	"replay data no longer held",
	"message incomplete",
	"authentication failed",
	"crypto library unavailable",
	"suspended past the suspend timeout",
	"peer is not enhanced",
	"peer refused the connection",
	"peer no longer knows the session",
	"server's key is not the one known for it",
	"no answer signed by the server's known key",
};

/* A code added without its text would shift every later text. */
_Static_assert(sizeof(rock_err_text) / sizeof(rock_err_text[0]) ==
    -ROCK_ERR_LAST, "rock_err_text out of step with enum rock_err");

const char *
rock_err(int code)
{
	if (code > 0 || code <= ROCK_ERR_LAST)
		return "unknown error";
	return rock_err_text[-code];
}
