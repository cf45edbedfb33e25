/* rock_fdpass.h: one message with one descriptor attached, over a unix socket. */
#ifndef ROCK_FDPASS_H
#define ROCK_FDPASS_H

#include <sys/types.h>

/* Sends len bytes of buf with fd attached, never blocking and never
 * raising SIGPIPE: the bytes sent, or -1 and errno. */
ssize_t rock_fd_send(int u, const void *buf, size_t len, int fd);

/* One message into buf (close-on-exec on its descriptor, never blocking):
 * the bytes received, or -1 and errno. *fd is the descriptor that came
 * with it, or -1: none came, or it was cut (out of descriptors), or the
 * message was (a datagram longer than len; a stream leaves the rest
 * queued), in which case any descriptor that arrived is closed here.
 * *flags (if not NULL) gets the message's flags, MSG_CTRUNC and
 * MSG_TRUNC saying why. */
ssize_t rock_fd_recv(int u, void *buf, size_t len, int *fd, int *flags);

#endif
