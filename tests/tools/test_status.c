/* test_status - `bellows status` reads its command line from the option
 * table: every option is taken (by its long name and, where it has one,
 * its letter), defaults come from the environment, and a bad option is
 * refused by name, an unknown one with the nearest option's name.
 * Nothing here talks to a daemon: only tool_status_parse runs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/common/argv_capture.h"

#include "tools/status.h"

/* Parses `status ARGS...` into *o with stderr (and stdout) captured
 * into err (size 4096). Returns what tool_status_parse returned. */
ARGV_CAPTURE_PARSER(parse, tool_status_opts, "status", tool_status_parse)

static int
setup(void **state)
{
	(void)state;
	unsetenv("BELLOWS_CONTROL");
	unsetenv("BELLOWS_JOB");
	return 0;
}

static void
test_status_takes_the_defaults_without_options(void **state)
{
	tool_status_opts o;
	char err[4096];

	(void)state;
	assert_int_equal(parse(&o, err, NULL), -1);
	assert_string_equal(err, "");
	assert_string_equal(o.control, "tcp://127.0.0.1:5555");
	assert_null(o.sh.job);
	assert_false(o.json);
	assert_int_equal(o.timeout_ms, 2000);
	assert_null(o.server_key);
	assert_null(o.client_key);
	setenv("BELLOWS_CONTROL", "tcp://h:1", 1);
	setenv("BELLOWS_JOB", "envjob", 1);
	assert_int_equal(parse(&o, err, NULL), -1);
	assert_string_equal(o.control, "tcp://h:1");
	assert_string_equal(o.sh.job, "envjob");
	setup(NULL);
}

static void
test_status_takes_each_of_its_options_by_name(void **state)
{
	tool_status_opts o;
	char err[4096];

	(void)state;
	assert_int_equal(parse(&o, err, "--control", "tcp://x:9", "--job", "j1",
			     "--format", "json", "--timeout-ms", "15",
			     "--server-key", "s.pub", "--client-key", "c.key",
			     NULL),
	    -1);
	assert_string_equal(err, "");
	assert_string_equal(o.control, "tcp://x:9");
	assert_string_equal(o.sh.job, "j1");
	assert_true(o.json);
	assert_int_equal(o.timeout_ms, 15);
	assert_string_equal(o.server_key, "s.pub");
	assert_string_equal(o.client_key, "c.key");
	assert_int_equal(parse(&o, err, "--format=json", "--format=table",
			     NULL),
	    -1);
	assert_false(o.json);
}

static void
test_status_takes_its_one_letter_options(void **state)
{
	tool_status_opts o;
	char err[4096];

	(void)state;
	assert_int_equal(parse(&o, err, "-c", "tcp://y:1", "-j", "j2", "-f",
			     "json", "-t", "7", NULL),
	    -1);
	assert_string_equal(err, "");
	assert_string_equal(o.control, "tcp://y:1");
	assert_string_equal(o.sh.job, "j2");
	assert_true(o.json);
	assert_int_equal(o.timeout_ms, 7);
}

static void
test_status_refuses_an_unknown_option_with_a_suggestion(void **state)
{
	tool_status_opts o;
	char err[4096];

	(void)state;
	assert_int_equal(parse(&o, err, "--jbo", "x", NULL), 2);
	assert_non_null(strstr(err,
	    "bellows status: unknown option '--jbo'; did you mean '--job'?\n"
	    "usage: bellows status "));
	assert_int_equal(parse(&o, err, "--timeot-ms=5", NULL), 2);
	assert_non_null(strstr(err,
	    "bellows status: unknown option '--timeot-ms'; did you mean "
	    "'--timeout-ms'?\n"));
	assert_int_equal(parse(&o, err, "extra", NULL), 2);
	assert_string_equal(err,
	    "bellows status: unexpected argument 'extra'\n");
}

static void
test_status_refuses_bad_values_by_name(void **state)
{
	tool_status_opts o;
	char err[4096];

	(void)state;
	assert_int_equal(parse(&o, err, "--format", "xml", NULL), 2);
	assert_string_equal(err,
	    "bellows status: --format must be table or json, not 'xml'\n");
	assert_int_equal(parse(&o, err, "--timeout-ms", "0", NULL), 2);
	assert_string_equal(err,
	    "bellows status: --timeout-ms must be an integer in [1, "
	    "3600000], not '0'\n");
	assert_int_equal(parse(&o, err, "--job", "", NULL), 2);
	assert_string_equal(err, "bellows status: --job must not be empty\n");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_status_takes_the_defaults_without_options),
		cmocka_unit_test(test_status_takes_each_of_its_options_by_name),
		cmocka_unit_test(test_status_takes_its_one_letter_options),
		cmocka_unit_test(
		    test_status_refuses_an_unknown_option_with_a_suggestion),
		cmocka_unit_test(test_status_refuses_bad_values_by_name),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
