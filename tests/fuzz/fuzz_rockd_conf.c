/* fuzz_rockd_conf.c: libFuzzer harness for rockd's configuration file parser (daemon/conf.c, daemon/addr.c). */
#include "config.h"

#include <netdb.h>
#include <stdio.h>
#include <string.h>

#include "rockd.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int fuzz_getaddrinfo(const char *node, const char *service,
    const struct addrinfo *hints, struct addrinfo **res);

/* addr.c is built with getaddrinfo renamed to this: a fuzzed host name
 * must not become a DNS query (slow, and not the parser's behaviour). */
int
fuzz_getaddrinfo(const char *node, const char *service,
    const struct addrinfo *hints, struct addrinfo **res)
{
	struct addrinfo h = *hints;

	h.ai_flags |= AI_NUMERICHOST;
	return getaddrinfo(node, service, &h, res);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rockd_config cfg;
	struct rockd_service *s;
	char err[1024];
	FILE *f;
	int r;

	if (size == 0 || (f = fmemopen((void *)(uintptr_t)data, size, "r")) == NULL)
		return 0;
	memset(&cfg, 0, sizeof(cfg));
	err[0] = '\0';
	r = rockd_config_read(&cfg, f, "fuzz.conf", err, sizeof(err));
	fclose(f);
	FUZZ_CHECK(r == 0 || r == -1);
	FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL);
	if (r == 0) {
		FUZZ_CHECK(cfg.services != NULL);
		FUZZ_CHECK(cfg.pidfile[0] == '\0' || cfg.pidfile[0] == '/');
		FUZZ_CHECK(cfg.max_rocks == -1 || cfg.max_rocks >= 1);
		FUZZ_CHECK(cfg.suspend_timeout_s >= -1);
		FUZZ_CHECK(cfg.metrics_spec[0] == '\0' ||
		    (cfg.metrics_len > 0 && cfg.metrics_line > 0));
	} else {
		FUZZ_CHECK(strncmp(err, "fuzz.conf:", 10) == 0);
	}
	for (s = cfg.services; s != NULL; s = s->next) {
		FUZZ_CHECK(s->sniff_ms >= 0 && s->sniff_ms <= 60000);
		FUZZ_CHECK(s->listen_len > 0 && s->backend.len > 0);
	}
	rockd_config_free(&cfg);
	return 0;
}
