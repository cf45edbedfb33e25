/* rock_accept.h: what the server's handshakes (rock_handshake.c) and reconnects (rock_takeover.c) share. */
#ifndef ROCK_ACCEPT_H
#define ROCK_ACCEPT_H

#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>

struct rock_engine;

/* A line a stranger's bytes cause: within the engine's budget for its kind. */
#define stranger(e, kind, ...) \
	rlog_limited((e)->log, &(e)->stranger_log[kind], ROCK_LOG_INFO, \
	    __VA_ARGS__)

/* 1: a refusal of an unproven request may be signed now (the budget). */
int rock_accept_may_sign(struct rock_engine *e);
/* ERROR code, signed over what the client sent on this connection. */
void rock_accept_send_error(const struct rock_engine *e, int fd, uint8_t code,
    const char *text, const uint8_t *got, size_t ngot);
/* Reads, and one deadline for the whole exchange that reads do not push
 * back, from the round trip (rtt_ms; -1: read it); 0 or -1. */
int rock_accept_arm(struct rock_engine *e, struct event **ev,
    struct event **deadline, int fd, int rtt_ms, event_callback_fn on_read,
    event_callback_fn on_deadline, void *arg);
void rock_accept_disarm(struct event **ev, struct event **deadline);
/* 1: have `want` bytes; 0: not yet; -1: closed or failed. */
int rock_accept_fill(int fd, uint8_t *buf, size_t *have, size_t want);

#endif
