/* wire_fixtures.h: the fixed messages whose encodings doc/PROTOCOL.md lists as vectors. */
#ifndef ROCK_WIRE_FIXTURES_H
#define ROCK_WIRE_FIXTURES_H

#include <stddef.h>
#include <stdint.h>

typedef void wire_vector_fn(void *arg, const char *name, const uint8_t *p,
    size_t n);

/* Calls emit once per vector, in the order of the document. */
void wire_vectors(wire_vector_fn *emit, void *arg);

#endif
