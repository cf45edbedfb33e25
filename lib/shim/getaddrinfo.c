/* getaddrinfo.c: getaddrinfo(): under ROCK_MODE=rock, which name each address came from, so a rock can find its server again by name. */
#include "config.h"

#include "rock_names.h"
#include "shim.h"

/* The process's, under shim_lock(); bounded (ROCK_NAMES_MAX). */
static struct rock_names names;

SHIM_EXPORT int
getaddrinfo(const char *node, const char *service,
    const struct addrinfo *hints, struct addrinfo **res)
{
	const struct shim_state *st = shim_state();
	int r = shim_real.getaddrinfo(node, service, hints, res);

	if (r != 0 || node == NULL || shim_busy || !st->active ||
	    st->cfg.mode != ROCK_MODE_ROCK)
		return r;
	shim_lock();
	rock_names_note(&names, node, *res);
	shim_unlock();
	return r;
}

void
shim_name_rock(int fd, struct rock_session *s, const struct sockaddr *addr,
    socklen_t len)
{
	const char *name = rock_names_find(&names, addr, len);

	if (name != NULL && s != NULL && rock_session_set_name(s, name) == 0)
		rlog_debug(&shim_state()->log, "fd %d: the server is %s by name",
		    fd, name);
}
