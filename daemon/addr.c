/* addr.c: addresses and socket options of rockd: "[ADDR:]PORT"/"HOST:PORT" text, TCP_NODELAY. */
#include "config.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>

#include "rock_parse.h"
#include "rockd.h"

/* Split "host:port", "[v6]:port" or (passive only) "port". */
static int
split(const char *spec, int passive, char *host, size_t hostlen,
    const char **port, char *err, size_t errlen)
{
	const char *colon;
	size_t n;

	if (spec[0] == '[') {
		const char *close = strchr(spec, ']');

		if (close == NULL || close[1] != ':') {
			snprintf(err, errlen, "\"%s\": expected [IPV6]:PORT", spec);
			return -1;
		}
		n = (size_t)(close - spec - 1);
		colon = close + 1;
		spec++;
	} else if ((colon = strrchr(spec, ':')) == NULL) {
		if (!passive) {
			snprintf(err, errlen, "\"%s\": expected HOST:PORT", spec);
			return -1;
		}
		snprintf(host, hostlen, "::");
		*port = spec;
		return 0;
	} else {
		n = (size_t)(colon - spec);
	}
	if (n == 0 || n >= hostlen) {
		snprintf(err, errlen, "\"%s\": bad host part", spec);
		return -1;
	}
	memcpy(host, spec, n);
	host[n] = '\0';
	*port = colon + 1;
	return 0;
}

int
rockd_parse_addr(const char *spec, int passive, struct sockaddr_storage *ss,
    socklen_t *len, char *err, size_t errlen)
{
	struct addrinfo hints, *res;
	char host[256], portbuf[8];
	const char *port;
	long long portnum;
	int r;

	if (split(spec, passive, host, sizeof(host), &port, err, errlen) != 0)
		return -1;
	if ((r = rock_parse_ll(port, 1, 65535, &portnum)) != 0) {
		snprintf(err, errlen, "\"%s\": port must be 1 to 65535", spec);
		return -1;
	}
	snprintf(portbuf, sizeof(portbuf), "%lld", portnum);
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
	if ((r = getaddrinfo(host, portbuf, &hints, &res)) != 0) {
		snprintf(err, errlen, "\"%s\": %s", spec, gai_strerror(r));
		return -1;
	}
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

int
rockd_addr_port(const struct sockaddr_storage *a)
{
	return a->ss_family == AF_INET6 ?
	    ntohs(((const struct sockaddr_in6 *)a)->sin6_port) :
	    ntohs(((const struct sockaddr_in *)a)->sin_port);
}

void
rockd_addr_set_port(struct sockaddr_storage *a, int port)
{
	if (a->ss_family == AF_INET6)
		((struct sockaddr_in6 *)a)->sin6_port = htons((uint16_t)port);
	else
		((struct sockaddr_in *)a)->sin_port = htons((uint16_t)port);
}

/* The IPv4 address a listener takes: its own, or one mapped into IPv6
 * (::ffff:a.b.c.d); 0 when it is neither. */
static int
v4_of(const struct sockaddr_storage *a, struct in_addr *out)
{
	const struct in6_addr *v6;

	if (a->ss_family == AF_INET) {
		*out = ((const struct sockaddr_in *)a)->sin_addr;
		return 1;
	}
	v6 = &((const struct sockaddr_in6 *)a)->sin6_addr;
	if (!IN6_IS_ADDR_V4MAPPED(v6))
		return 0;
	memcpy(out, &v6->s6_addr[12], 4);
	return 1;
}

static int
v6_wildcard(const struct sockaddr_storage *a)
{
	return a->ss_family == AF_INET6 &&
	    IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)a)->sin6_addr);
}

int
rockd_addr_unspecified(const struct sockaddr_storage *a)
{
	struct in_addr a4;

	return v6_wildcard(a) ||
	    (v4_of(a, &a4) && a4.s_addr == htonl(INADDR_ANY));
}

/* Whether two listeners would want the same connections, as bind(2) sees
 * it on Linux with SO_REUSEADDR: the same port, and the same address or a
 * wildcard that takes the other's ([::] is dual-stack: it takes IPv4
 * too, unless the host sets net.ipv6.bindv6only). */
int
rockd_addr_overlap(const struct sockaddr_storage *a,
    const struct sockaddr_storage *b)
{
	struct in_addr a4, b4;
	int av4, bv4;

	if (rockd_addr_port(a) != rockd_addr_port(b))
		return 0;
	if (v6_wildcard(a) || v6_wildcard(b))
		return 1;
	av4 = v4_of(a, &a4);
	bv4 = v4_of(b, &b4);
	if (av4 != bv4)
		return 0;
	if (av4)
		return a4.s_addr == b4.s_addr || a4.s_addr == htonl(INADDR_ANY) ||
		    b4.s_addr == htonl(INADDR_ANY);
	return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
	    &((const struct sockaddr_in6 *)b)->sin6_addr,
	    sizeof(struct in6_addr)) == 0;
}

void
rockd_no_delay(evutil_socket_t fd)
{
	int one = 1;

	if (fd >= 0)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}
