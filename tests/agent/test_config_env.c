/* test_config_env - bellows_agent_config_init takes the endpoints and
 * the job from BELLOWS_CONTROL, BELLOWS_PUBLISH and BELLOWS_JOB when they
 * are set and not empty, the built-in defaults otherwise, and a field set
 * after it wins over the environment.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <bellows/agent.h>

static int
unset_all(void **state)
{
	(void)state;
	unsetenv("BELLOWS_CONTROL");
	unsetenv("BELLOWS_PUBLISH");
	unsetenv("BELLOWS_JOB");
	return 0;
}

static void
without_the_environment_the_defaults_are_loopback_and_no_job(void **state)
{
	bellows_agent_config cfg;

	(void)state;
	bellows_agent_config_init(&cfg);
	assert_string_equal(cfg.control, "tcp://127.0.0.1:5555");
	assert_string_equal(cfg.publish, "tcp://127.0.0.1:5556");
	assert_null(cfg.job);
}

static void
the_environment_gives_the_endpoints_and_the_job(void **state)
{
	bellows_agent_config cfg;

	(void)state;
	setenv("BELLOWS_CONTROL", "ipc:///run/bellows/control", 1);
	setenv("BELLOWS_PUBLISH", "ipc:///run/bellows/publish", 1);
	setenv("BELLOWS_JOB", "resnet-env", 1);
	bellows_agent_config_init(&cfg);
	assert_string_equal(cfg.control, "ipc:///run/bellows/control");
	assert_string_equal(cfg.publish, "ipc:///run/bellows/publish");
	assert_string_equal(cfg.job, "resnet-env");
}

static void
empty_variables_count_as_unset(void **state)
{
	bellows_agent_config cfg;

	(void)state;
	setenv("BELLOWS_CONTROL", "", 1);
	setenv("BELLOWS_PUBLISH", "", 1);
	setenv("BELLOWS_JOB", "", 1);
	bellows_agent_config_init(&cfg);
	assert_string_equal(cfg.control, "tcp://127.0.0.1:5555");
	assert_string_equal(cfg.publish, "tcp://127.0.0.1:5556");
	assert_null(cfg.job);
}

static void
a_field_set_after_init_wins_over_the_environment(void **state)
{
	bellows_agent_config cfg;

	(void)state;
	setenv("BELLOWS_CONTROL", "ipc:///env/control", 1);
	setenv("BELLOWS_JOB", "from-env", 1);
	bellows_agent_config_init(&cfg);
	cfg.control = "tcp://10.0.0.1:5555";
	cfg.job = "explicit";
	assert_string_equal(cfg.control, "tcp://10.0.0.1:5555");
	assert_string_equal(cfg.job, "explicit");
	/* The one not set explicitly still comes from the environment. */
	assert_string_equal(cfg.publish, "tcp://127.0.0.1:5556");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(
		    without_the_environment_the_defaults_are_loopback_and_no_job,
		    unset_all),
		cmocka_unit_test_setup(
		    the_environment_gives_the_endpoints_and_the_job, unset_all),
		cmocka_unit_test_setup(empty_variables_count_as_unset,
		    unset_all),
		cmocka_unit_test_setup(
		    a_field_set_after_init_wins_over_the_environment,
		    unset_all),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
