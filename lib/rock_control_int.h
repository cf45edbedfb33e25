/* rock_control_int.h: what the control channel's files (socket and tick, sending, receiving) share. */
#ifndef ROCK_CONTROL_INT_H
#define ROCK_CONTROL_INT_H

#include <stdint.h>

#include <event2/event.h>

struct rock_engine;
struct rock_session;

/* Two intervals without an authentic record or packet from the peer. */
int rock_hears_nothing(const struct rock_session *s, int64_t now);

/* rock_control_send.c */
void rock_group_set_anchor(struct rock_session *s, const struct rock_session *a);
void rock_group_follow(struct rock_session *s, int64_t now);
void rock_control_send_heartbeats(struct rock_engine *e, int64_t now);
void rock_control_send_backlog(struct rock_session *g, int64_t now);
void rock_control_owe_ack(struct rock_session *a, int64_t now);

/* rock_control_recv.c: up to max datagrams read; how many. */
int rock_control_read(struct rock_engine *e, int fd, unsigned max);
void rock_control_on_udp(evutil_socket_t fd, short what, void *arg);

#endif
