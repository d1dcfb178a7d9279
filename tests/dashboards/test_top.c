/* test_top - `bellows top` reads its command line from the option
 * table: every option is taken, defaults come from the environment, and a bad
 * option is refused by name, an unknown one with the nearest option's name.
 * Nothing here opens a source: only dash_top_parse runs, which also
 * settles live or offline.
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

#include "dashboards/model.h"
#include "dashboards/top.h"

/* Parses `top ARGS...` into *o with stderr (and stdout) captured
 * into err (size 4096). Returns what dash_top_parse returned. */
ARGV_CAPTURE_PARSER(parse, dash_top_opts, "top", dash_top_parse)

static int
setup(void **state)
{
	(void)state;
	unsetenv("BELLOWS_CONTROL");
	unsetenv("BELLOWS_PUBLISH");
	unsetenv("BELLOWS_JOB");
	return 0;
}

static void
test_top_is_live_on_the_default_endpoints_without_options(void **state)
{
	dash_top_opts o;
	char err[4096];

	(void)state;
	assert_int_equal(parse(&o, err, NULL), -1);
	assert_string_equal(err, "");
	assert_string_equal(o.control, "tcp://127.0.0.1:5555");
	assert_string_equal(o.publish, "tcp://127.0.0.1:5556");
	assert_null(o.sh.db);
	assert_null(o.sh.job);
	assert_true(o.run == DASH_NONE);
	assert_false(o.once);
	assert_int_equal(o.view, DASH_VIEW_LAYERS);
	assert_int_equal(o.rows, 24);
	assert_int_equal(o.cols, 80);
	setenv("BELLOWS_CONTROL", "tcp://h:1", 1);
	setenv("BELLOWS_PUBLISH", "tcp://h:2", 1);
	setenv("BELLOWS_JOB", "envjob", 1);
	assert_int_equal(parse(&o, err, NULL), -1);
	assert_string_equal(o.control, "tcp://h:1");
	assert_string_equal(o.publish, "tcp://h:2");
	assert_string_equal(o.sh.job, "envjob");
	setup(NULL);
}

static void
test_top_takes_each_of_its_options_by_name(void **state)
{
	dash_top_opts o;
	char err[4096];

	(void)state;
	assert_int_equal(parse(&o, err, "--control", "tcp://x:9", "--publish",
			     "tcp://x:10", "--db", "h.db", "--run", "3",
			     "--job", "j1", "--all-decisions", "--once",
			     "--view", "decisions", "--size", "30x100",
			     "--server-key", "s.pub", "--client-key", "c.key",
			     "--no-color", NULL),
	    -1);
	assert_string_equal(err, "");
	/* --control keeps it live despite --db and --run. */
	assert_string_equal(o.control, "tcp://x:9");
	assert_string_equal(o.publish, "tcp://x:10");
	assert_string_equal(o.sh.db, "h.db");
	assert_int_equal(o.run, 3);
	assert_string_equal(o.sh.job, "j1");
	assert_true(o.all_decisions);
	assert_true(o.once);
	assert_int_equal(o.view, DASH_VIEW_DECISIONS);
	assert_int_equal(o.rows, 30);
	assert_int_equal(o.cols, 100);
	assert_string_equal(o.server_key, "s.pub");
	assert_string_equal(o.client_key, "c.key");
	assert_true(o.no_color);
}

static void
test_top_goes_offline_with_offline_db_or_run_and_no_control(void **state)
{
	dash_top_opts o;
	char err[4096];

	(void)state;
	assert_int_equal(parse(&o, err, "--offline", NULL), -1);
	assert_true(o.offline);
	assert_null(o.control);
	assert_int_equal(parse(&o, err, "--db", "h.db", NULL), -1);
	assert_null(o.control);
	assert_int_equal(parse(&o, err, "--run", "2", NULL), -1);
	assert_null(o.control);
	assert_int_equal(parse(&o, err, "--offline", "--control", "x", NULL),
	    2);
	assert_string_equal(err,
	    "bellows top: --offline and --control exclude each other\n");
}

static void
test_top_refuses_an_unknown_option_with_a_suggestion(void **state)
{
	dash_top_opts o;
	char err[4096];

	(void)state;
	assert_int_equal(parse(&o, err, "--contrl", "x", NULL), 2);
	assert_non_null(strstr(err,
	    "bellows top: unknown option '--contrl'; did you mean "
	    "'--control'?\n"
	    "usage: bellows top "));
	assert_int_equal(parse(&o, err, "--no-colour", NULL), 2);
	assert_non_null(strstr(err,
	    "bellows top: unknown option '--no-colour'; did you mean "
	    "'--no-color'?\n"));
	assert_int_equal(parse(&o, err, "extra", NULL), 2);
	assert_string_equal(err, "bellows top: unexpected argument 'extra'\n");
}

static void
test_top_refuses_bad_values_by_name(void **state)
{
	dash_top_opts o;
	char err[4096];

	(void)state;
	assert_int_equal(parse(&o, err, "--view", "graphs", NULL), 2);
	assert_string_equal(err,
	    "bellows top: --view must be jobs, ranks, layers, decisions or "
	    "events, not 'graphs'\n");
	assert_int_equal(parse(&o, err, "--size", "3x4", NULL), 2);
	assert_string_equal(err,
	    "bellows top: --size must be ROWSxCOLS, 8..1000 x 40..1000, not "
	    "'3x4'\n");
	assert_int_equal(parse(&o, err, "--run", "x", NULL), 2);
	assert_string_equal(err,
	    "bellows top: --run must be an integer in [1, "
	    "9223372036854775807], not 'x'\n");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_top_is_live_on_the_default_endpoints_without_options),
		cmocka_unit_test(test_top_takes_each_of_its_options_by_name),
		cmocka_unit_test(
		    test_top_goes_offline_with_offline_db_or_run_and_no_control),
		cmocka_unit_test(
		    test_top_refuses_an_unknown_option_with_a_suggestion),
		cmocka_unit_test(test_top_refuses_bad_values_by_name),
	};

	return cmocka_run_group_tests(tests, setup, NULL);
}
