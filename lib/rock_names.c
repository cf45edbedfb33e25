/* rock_names.c: the bounded table of names and the addresses getaddrinfo gave for them. */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "rock_names.h"

int
rock_names_key(const struct sockaddr *addr, socklen_t len,
    struct sockaddr_storage *out, socklen_t *outlen)
{
	if (addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in))
		*outlen = sizeof(struct sockaddr_in);
	else if (addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6))
		*outlen = sizeof(struct sockaddr_in6);
	else
		return -1;
	memset(out, 0, sizeof(*out));
	memcpy(out, addr, *outlen);
	if (addr->sa_family == AF_INET)
		((struct sockaddr_in *)out)->sin_port = 0;
	else {
		((struct sockaddr_in6 *)out)->sin6_port = 0;
		((struct sockaddr_in6 *)out)->sin6_flowinfo = 0;
	}
	return 0;
}

/* The entry for key; ROCK_NAMES_MAX: none. */
static unsigned
slot_of(const struct rock_names *t, const struct sockaddr_storage *key,
    socklen_t len)
{
	unsigned i;

	for (i = 0; i < ROCK_NAMES_MAX; i++)
		if (t->e[i].len == len && memcmp(&t->e[i].addr, key, len) == 0)
			break;
	return i;
}

/* A name that parses as an address names nothing to look up. */
static int
is_address(const char *name)
{
	struct in6_addr a;

	return inet_pton(AF_INET, name, &a) == 1 ||
	    inet_pton(AF_INET6, name, &a) == 1;
}

void
rock_names_note(struct rock_names *t, const char *name,
    const struct addrinfo *res)
{
	struct sockaddr_storage key;
	struct rock_names_entry *p;
	size_t n = strlen(name);
	socklen_t len;
	unsigned i;

	if (n == 0 || n > ROCK_NAME_MAX || is_address(name))
		return;
	for (; res != NULL; res = res->ai_next) {
		if (res->ai_addr == NULL ||
		    rock_names_key(res->ai_addr, res->ai_addrlen, &key, &len) != 0)
			continue;
		if ((i = slot_of(t, &key, len)) == ROCK_NAMES_MAX) {
			i = t->next;
			t->next = (t->next + 1) % ROCK_NAMES_MAX;
		}
		p = &t->e[i];
		memcpy(&p->addr, &key, sizeof(key));
		p->len = len;
		memcpy(p->name, name, n + 1);
	}
}

const char *
rock_names_find(const struct rock_names *t, const struct sockaddr *addr,
    socklen_t len)
{
	struct sockaddr_storage key;
	socklen_t klen;
	unsigned i;

	if (rock_names_key(addr, len, &key, &klen) != 0 ||
	    (i = slot_of(t, &key, klen)) == ROCK_NAMES_MAX)
		return NULL;
	return t->e[i].name;
}
