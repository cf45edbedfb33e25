/* rock_names.h: which addresses a name resolved to, so a rock can look its server up again. */
#ifndef ROCK_NAMES_H
#define ROCK_NAMES_H

#include <netdb.h>
#include <sys/socket.h>

#define ROCK_NAME_MAX 253	/* the longest DNS name, in text */
#define ROCK_NAMES_MAX 64	/* addresses remembered per process */

struct rock_names_entry {
	struct sockaddr_storage addr;	/* port 0; len 0: free */
	socklen_t len;
	char name[ROCK_NAME_MAX + 1];
};

/* The owner's (the preload shim's), under its lock: the engine has none. */
struct rock_names {
	struct rock_names_entry e[ROCK_NAMES_MAX];
	unsigned next;			/* round-robin slot to replace */
};

/* getaddrinfo's answer for name: each IPv4 and IPv6 address in it now
 * names it (the latest answer wins). A name that is itself an address, or
 * longer than ROCK_NAME_MAX, is not kept: looking it up again says nothing. */
void rock_names_note(struct rock_names *t, const char *name,
    const struct addrinfo *res);
/* The name addr (its port ignored) came from; NULL: none known. */
const char *rock_names_find(const struct rock_names *t,
    const struct sockaddr *addr, socklen_t len);
/* addr without its port, in out; 0, or -1 when not IPv4 or IPv6. */
int rock_names_key(const struct sockaddr *addr, socklen_t len,
    struct sockaddr_storage *out, socklen_t *outlen);

#endif
