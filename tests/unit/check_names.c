/* check_names.c: unit tests of the name table a rock finds its server again by. */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "rock_names.h"
#include "suites.h"

static struct rock_names names;

/* One getaddrinfo answer of a single address (host, port). */
static void
answer(const char *name, const char *host, int port)
{
	struct sockaddr_in6 v6;
	struct sockaddr_in v4;
	struct addrinfo ai;

	memset(&ai, 0, sizeof(ai));
	memset(&v4, 0, sizeof(v4));
	memset(&v6, 0, sizeof(v6));
	if (inet_pton(AF_INET, host, &v4.sin_addr) == 1) {
		v4.sin_family = AF_INET;
		v4.sin_port = htons(port);
		ai.ai_addr = (struct sockaddr *)&v4;
		ai.ai_addrlen = sizeof(v4);
	} else {
		ck_assert_int_eq(inet_pton(AF_INET6, host, &v6.sin6_addr), 1);
		v6.sin6_family = AF_INET6;
		v6.sin6_port = htons(port);
		ai.ai_addr = (struct sockaddr *)&v6;
		ai.ai_addrlen = sizeof(v6);
	}
	ai.ai_family = ai.ai_addr->sa_family;
	rock_names_note(&names, name, &ai);
}

static const char *
find(const char *host, int port)
{
	struct sockaddr_storage ss;
	socklen_t len;

	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, host, &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
		ss.ss_family = AF_INET;
		((struct sockaddr_in *)&ss)->sin_port = htons(port);
		len = sizeof(struct sockaddr_in);
	} else {
		inet_pton(AF_INET6, host, &((struct sockaddr_in6 *)&ss)->sin6_addr);
		ss.ss_family = AF_INET6;
		((struct sockaddr_in6 *)&ss)->sin6_port = htons(port);
		len = sizeof(struct sockaddr_in6);
	}
	return rock_names_find(&names, (struct sockaddr *)&ss, len);
}

START_TEST(test_names_port_ignored)
{
	memset(&names, 0, sizeof(names));
	answer("db.example", "192.0.2.7", 0);
	answer("db.example", "2001:db8::7", 0);
	ck_assert_str_eq(find("192.0.2.7", 5432), "db.example");
	ck_assert_str_eq(find("2001:db8::7", 22), "db.example");
	ck_assert_ptr_null(find("192.0.2.8", 5432));
	/* The latest answer names the address. */
	answer("www.example", "192.0.2.7", 80);
	ck_assert_str_eq(find("192.0.2.7", 5432), "www.example");
}
END_TEST

START_TEST(test_names_not_kept)
{
	char longname[ROCK_NAME_MAX + 2];

	memset(&names, 0, sizeof(names));
	answer("192.0.2.9", "192.0.2.9", 0);
	answer("2001:db8::9", "2001:db8::9", 0);
	ck_assert_ptr_null(find("192.0.2.9", 1));
	ck_assert_ptr_null(find("2001:db8::9", 1));
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	answer(longname, "192.0.2.10", 0);
	ck_assert_ptr_null(find("192.0.2.10", 1));
	longname[ROCK_NAME_MAX] = '\0';
	answer(longname, "192.0.2.10", 0);
	ck_assert_str_eq(find("192.0.2.10", 1), longname);
}
END_TEST

START_TEST(test_names_bounded)
{
	char host[32];
	int i;

	memset(&names, 0, sizeof(names));
	for (i = 0; i <= ROCK_NAMES_MAX; i++) {
		snprintf(host, sizeof(host), "198.51.100.%d", i + 1);
		answer(i == 0 ? "first.example" : "later.example", host, 0);
	}
	/* The 65th address took the oldest slot. */
	ck_assert_ptr_null(find("198.51.100.1", 1));
	ck_assert_str_eq(find("198.51.100.2", 1), "later.example");
	ck_assert_str_eq(find("198.51.100.65", 1), "later.example");
}
END_TEST

Suite *
names_suite(void)
{
	Suite *s = suite_create("names");
	TCase *tc = tcase_create("table");

	tcase_add_test(tc, test_names_port_ignored);
	tcase_add_test(tc, test_names_not_kept);
	tcase_add_test(tc, test_names_bounded);
	suite_add_tcase(s, tc);
	return s;
}
