/* check_engine.c: runs every unit-test suite of the engine. */
#include "config.h"

#include <stdlib.h>

#include "suites.h"

int
main(void)
{
	SRunner *sr = srunner_create(parse_suite());
	int failed;

	srunner_add_suite(sr, config_suite());
	srunner_add_suite(sr, keepalive_suite());
	srunner_add_suite(sr, ring_suite());
	srunner_add_suite(sr, wire_suite());
	srunner_add_suite(sr, session_suite());
	srunner_add_suite(sr, resume_suite());
	srunner_add_suite(sr, replay_suite());
	srunner_add_suite(sr, nodes_suite());
	srunner_add_suite(sr, netem_suite());
	srunner_add_suite(sr, steer_suite());
	srunner_add_suite(sr, strike_suite());
	srunner_add_suite(sr, evict_suite());
	srunner_add_suite(sr, handover_suite());
	srunner_add_suite(sr, identity_suite());
	srunner_add_suite(sr, stream_suite());
	srunner_add_suite(sr, names_suite());
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
