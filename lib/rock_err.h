/* rock_err.h: the engine's negative error codes and their text. */
#ifndef ROCK_ERR_H
#define ROCK_ERR_H

/*
 * Engine functions return 0 (or a non-negative count) on success and one
 * of these on failure; callers test with `if ((r = f()) != 0) goto out;`.
 * A system call failure is reported as ROCK_ERR_SYSTEM with errno kept.
 */
enum rock_err {
	ROCK_OK = 0,
	ROCK_ERR_SYSTEM = -1,		/* see errno */
	ROCK_ERR_NOT_NUMBER = -2,	/* value is not a decimal integer */
	ROCK_ERR_TOO_SMALL = -3,	/* below the accepted range */
	ROCK_ERR_TOO_LARGE = -4,	/* above the accepted range or overflow */
	ROCK_ERR_BAD_WORD = -5,		/* not one of the accepted words */
	ROCK_ERR_EMPTY = -6,		/* empty value */
	ROCK_ERR_NOMEM = -7,
	ROCK_ERR_INVALID = -8,		/* invalid argument from our own caller */
	/* in-flight ring */
	ROCK_ERR_FULL = -9,		/* in-flight buffer full: back-pressure */
	ROCK_ERR_PROTOCOL = -10,	/* protocol violation by the peer */
	ROCK_ERR_LOST = -11,		/* replay data no longer held */
	/* wire and crypto */
	ROCK_ERR_SHORT = -12,		/* more bytes needed to decode */
	ROCK_ERR_AUTH = -13,		/* authentication failed */
	ROCK_ERR_CRYPTO = -14,		/* the crypto library failed to start */
	/* sessions */
	ROCK_ERR_TIMEOUT = -15,		/* suspended past the suspend timeout */
	ROCK_ERR_NOT_ENHANCED = -16,	/* the peer is an ordinary server */
	ROCK_ERR_REFUSED = -17,		/* the peer refused (rockd's backend, busy) */
	ROCK_ERR_RESET = -18,		/* the peer no longer knows the session */
	ROCK_ERR_KEY = -19,		/* the server's key is not the one known for it */
	ROCK_ERR_UNVERIFIED = -20,	/* no answer signed by the server's known key */
	ROCK_ERR_LAST = -21		/* keep last: bounds the text table */
};

/* Static text for an error code; never NULL. */
const char *rock_err(int code);

#endif
