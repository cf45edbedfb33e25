/* wire-vectors.c: prints the protocol's test vectors in the format of doc/PROTOCOL.md. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "rock_crypto.h"
#include "wire_fixtures.h"

static void
print_vector(void *arg, const char *name, const uint8_t *p, size_t n)
{
	size_t i;

	(void)arg;
	printf("vector %s %zu\n", name, n);
	for (i = 0; i < n; i++)
		printf("%02x%s", p[i], (i % 32 == 31 || i == n - 1) ? "\n" : " ");
	printf("\n");
}

int
main(void)
{
	if (rock_crypto_init() != 0)
		return EXIT_FAILURE;
	printf("```text\n");
	wire_vectors(print_vector, NULL);
	printf("```\n");
	return EXIT_SUCCESS;
}
