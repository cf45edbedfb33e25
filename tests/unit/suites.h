/* suites.h: the Check suites of the engine's unit tests. */
#ifndef ROCK_TEST_SUITES_H
#define ROCK_TEST_SUITES_H

#include <check.h>

Suite *parse_suite(void);
Suite *config_suite(void);
Suite *keepalive_suite(void);
Suite *ring_suite(void);
Suite *wire_suite(void);
Suite *session_suite(void);
Suite *resume_suite(void);
Suite *replay_suite(void);
Suite *nodes_suite(void);
Suite *netem_suite(void);
Suite *evict_suite(void);
Suite *handover_suite(void);
Suite *identity_suite(void);
Suite *stream_suite(void);
Suite *names_suite(void);
Suite *steer_suite(void);
Suite *strike_suite(void);

#endif
