/* peer.c: getpeername, getsockopt (SO_ERROR, the options a rock keeps in its record) and shutdown show the program's view of a rock. */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "shim.h"

/* The address the program connected to, whichever port rockd listens on. */
SHIM_EXPORT int
getpeername(int fd, struct sockaddr *addr, socklen_t *len)
{
	struct shim_rock *r;
	int err = 0, ok;

	if (!shim_busy && addr != NULL && len != NULL &&
	    shim_fd_state_of(shim_fd_get(fd)) == SHIM_FD_RELAYED) {
		shim_lock();
		ok = shim_fork_relay_peer(fd, addr, len);
		shim_unlock();
		if (ok)
			return 0;
	}
	if (!shim_is_rock(fd) || addr == NULL || len == NULL)
		return shim_real.getpeername(fd, addr, len);
	shim_lock();
	if ((r = shim_rock_of(fd)) == NULL || (r->s == NULL && !r->connecting)) {
		shim_unlock();
		return shim_real.getpeername(fd, addr, len);
	}
	if (r->connecting && !r->returned)
		err = ENOTCONN;
	else {
		memcpy(addr, &r->peer, *len < r->peer_len ? *len : r->peer_len);
		*len = r->peer_len;
	}
	shim_unlock();
	if (err != 0) {
		errno = err;
		return -1;
	}
	return 0;
}

/* The local address is the data connection's: a connect() that returned
 * before its handshake was over (connect.c) waits for it to be in place. */
SHIM_EXPORT int
getsockname(int fd, struct sockaddr *addr, socklen_t *len)
{
	int tcp;

	if (!shim_busy && (tcp = shim_listener_tcp(fd)) >= 0)
		return shim_real.getsockname(tcp, addr, len);
	if (!shim_busy && shim_is_rock(fd)) {
		shim_lock();
		shim_rock_settle_locked(fd);
		shim_unlock();
	}
	return shim_real.getsockname(fd, addr, len);
}

/* A suspended rock has no error to report; a finished non-blocking
 * connect reports what TCP would. */
SHIM_EXPORT int
getsockopt(int fd, int level, int opt, void *val, socklen_t *len)
{
	struct shim_rock *r;
	int v = -1, tcp;

	/* A listener of ours is the TCP one, but for accept()'s timeout. */
	if (!shim_busy && (tcp = shim_listener_tcp(fd)) >= 0 &&
	    !(level == SOL_SOCKET && opt == SO_RCVTIMEO))
		return shim_real.getsockopt(tcp, level, opt, val, len);
	if (shim_is_rock(fd) && shim_opts_get(fd, level, opt, val, len))
		return 0;
	if (level != SOL_SOCKET || opt != SO_ERROR || !shim_is_rock(fd) ||
	    val == NULL || len == NULL || *len < sizeof(int))
		return shim_real.getsockopt(fd, level, opt, val, len);
	shim_lock();
	if ((r = shim_rock_of(fd)) != NULL) {
		if (r->s != NULL || r->connecting)
			v = 0;
		else if (r->so_error != 0) {
			v = r->so_error;
			r->so_error = 0;
		}
	}
	shim_unlock();
	if (v < 0)
		return shim_real.getsockopt(fd, level, opt, val, len);
	memcpy(val, &v, sizeof(v));
	*len = sizeof(v);
	return 0;
}

/* The read side is the program's alone: it reads end of file from now
 * on. The write side's FIN follows everything written, also after a
 * reconnect (decision 8). */
SHIM_EXPORT int
shutdown(int fd, int how)
{
	struct shim_rock *r;

	if (!shim_is_rock(fd) || (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR))
		return shim_real.shutdown(fd, how);
	shim_lock();
	if ((r = shim_rock_of(fd)) == NULL || (r->s == NULL && !r->connecting)) {
		shim_unlock();
		return shim_real.shutdown(fd, how);
	}
	if (r->connecting && !r->returned) {
		shim_unlock();
		errno = ENOTCONN;
		return -1;
	}
	/* connect() returned, its handshake still runs: done at its end
	 * (connect.c), as a shutdown of a connection whose send queue has
	 * not gone out yet. */
	if (r->connecting) {
		r->rd_shut |= how != SHUT_WR;
		r->wr_shut |= how != SHUT_RD;
		shim_wake();
		shim_unlock();
		return 0;
	}
	if (how != SHUT_WR && !r->rd_shut) {
		r->rd_shut = 1;
		/* Wakes readers and pollers; sends nothing. The swap repeats it. */
		shim_real.shutdown(fd, SHUT_RD);
	}
	if (how != SHUT_RD && !r->wr_shut) {
		r->wr_shut = 1;
		rock_direct_shutdown(r->s, r->ready);
		shim_post(r, SHIM_CMD_FINISH);
	}
	shim_wake();
	shim_unlock();
	return 0;
}
