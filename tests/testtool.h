/* testtool.h: what the test programs share: dying with a reason, numbers from the command line, dialing and listening, clocks. */
#ifndef TESTTOOL_H
#define TESTTOOL_H

#include <stdint.h>

/* "PROGRAM: WHAT: strerror(errno)" on stderr, exit 1. */
void tt_die(const char *what) __attribute__((noreturn));
/* A decimal in 0..max, or "PROGRAM: bad number" and exit 2. */
long long tt_number(const char *s, long long max);
/* A connected socket of type (SOCK_STREAM, SOCK_DGRAM) to host:port, or exit 1. */
int tt_dial(const char *host, const char *port, int type);
/* A TCP socket listening on 127.0.0.1:port (SO_REUSEADDR), or exit 1. */
int tt_listen(const char *port, int backlog);
int64_t tt_mono_us(void);
int64_t tt_mono_ms(void);
int64_t tt_wall_ms(void);

#endif
