/* fuzz.h: what the fuzz harnesses share: a check that aborts, so libFuzzer keeps the input. */
#ifndef ROCK_FUZZ_H
#define ROCK_FUZZ_H

#include <stdio.h>
#include <stdlib.h>

/* Unlike assert(), survives NDEBUG: a harness that checks nothing finds
 * only crashes. */
#define FUZZ_CHECK(cond) do { \
	if (!(cond)) { \
		fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, \
		    __LINE__, #cond); \
		abort(); \
	} \
} while (0)

#endif
