/* test_cmdline - bellowsd reads its command line from the option
 * table: every option is taken (by its long name and, where it had one
 * before the table, its letter), --help and --version stop it, and a
 * bad option is refused by name as "bellowsd: ...", an unknown one with
 * the nearest option's name. Nothing is opened: only ctl_cmdline_parse
 * runs.
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

#include "controller/cmdline.h"

/* Parses `bellowsd ARGS...` into *o with stderr captured into err
 * (size 4096). Returns what ctl_cmdline_parse returned. */
ARGV_CAPTURE_PARSER(parse, ctl_cmdline, "bellowsd", ctl_cmdline_parse)

static void
test_cmdline_takes_the_defaults_with_only_a_policy(void **state)
{
	ctl_cmdline o;
	char err[4096];

	(void)state;
	assert_int_equal(parse(&o, err, "--policy", "p.yaml", NULL), -1);
	assert_string_equal(err, "");
	assert_string_equal(o.policy, "p.yaml");
	assert_null(o.control);
	assert_null(o.publish);
	assert_string_equal(o.db, "bellows.db");
	assert_false(o.no_db);
	assert_null(o.metrics);
	assert_false(o.level_given);
	assert_false(o.version);
}

static void
test_cmdline_takes_each_of_its_options_by_name(void **state)
{
	ctl_cmdline o;
	char err[4096];

	(void)state;
	assert_int_equal(parse(&o, err, "--policy", "p.yaml", "--control",
			     "tcp://*:1", "--publish", "tcp://*:2", "--db",
			     "h.db", "--metrics-listen", "9100", "--log-level",
			     "debug", NULL),
	    -1);
	assert_string_equal(err, "");
	assert_string_equal(o.policy, "p.yaml");
	assert_string_equal(o.control, "tcp://*:1");
	assert_string_equal(o.publish, "tcp://*:2");
	assert_string_equal(o.db, "h.db");
	assert_string_equal(o.metrics, "9100");
	assert_true(o.level_given);
	assert_int_equal(o.level, CTL_LOG_DEBUG);
	assert_int_equal(parse(&o, err, "--policy=p.yaml", "--db", "h.db",
			     "--no-db", NULL),
	    -1);
	assert_true(o.no_db);
	assert_null(o.db);
}

static void
test_cmdline_takes_the_letters_it_had(void **state)
{
	ctl_cmdline o;
	char err[4096];

	(void)state;
	assert_int_equal(parse(&o, err, "-p", "p.yaml", "-c", "tcp://*:1", "-u",
			     "tcp://*:2", "-d", "h.db", "-l", "warn", NULL),
	    -1);
	assert_string_equal(err, "");
	assert_string_equal(o.policy, "p.yaml");
	assert_string_equal(o.control, "tcp://*:1");
	assert_string_equal(o.publish, "tcp://*:2");
	assert_string_equal(o.db, "h.db");
	assert_int_equal(o.level, CTL_LOG_WARN);
	assert_int_equal(parse(&o, err, "-p", "p.yaml", "-n", NULL), -1);
	assert_null(o.db);
}

static void
test_cmdline_stops_after_help_and_version(void **state)
{
	FILE *tmp = tmpfile();
	char err[4096], out[8192];
	ctl_cmdline o;
	size_t n;
	int saved;

	(void)state;
	assert_non_null(tmp);
	fflush(stdout);
	saved = dup(1);
	assert_true(saved >= 0);
	assert_true(dup2(fileno(tmp), 1) >= 0);
	/* Neither needs --policy. */
	assert_int_equal(parse(&o, err, "--version", NULL), 0);
	assert_int_equal(parse(&o, err, "-V", NULL), 0);
	assert_int_equal(parse(&o, err, "--help", NULL), 0);
	assert_int_equal(parse(&o, err, "-h", NULL), 0);
	fflush(stdout);
	assert_true(dup2(saved, 1) >= 0);
	close(saved);
	rewind(tmp);
	n = fread(out, 1, sizeof(out) - 1, tmp);
	out[n] = '\0';
	fclose(tmp);
	assert_string_equal(err, "");
	assert_true(strncmp(out, "bellowsd ", 9) == 0);
	assert_non_null(strstr(out, "usage: bellowsd --policy FILE"));
	assert_non_null(strstr(out, "\n  --metrics-listen ADDR:PORT\n"));
}

static void
test_cmdline_refuses_an_unknown_option_with_a_suggestion(void **state)
{
	ctl_cmdline o;
	char err[4096];

	(void)state;
	assert_int_equal(parse(&o, err, "--polcy", "p.yaml", NULL), 2);
	assert_non_null(strstr(err,
	    "bellowsd: unknown option '--polcy'; did you mean '--policy'?\n"
	    "usage: bellowsd --policy FILE "));
	assert_int_equal(parse(&o, err, "--policy", "p", "--metrics-lisen=1",
			     NULL),
	    2);
	assert_non_null(strstr(err,
	    "bellowsd: unknown option '--metrics-lisen'; did you mean "
	    "'--metrics-listen'?\n"));
	assert_int_equal(parse(&o, err, "--policy", "p", "extra", NULL), 2);
	assert_string_equal(err, "bellowsd: unexpected argument 'extra'\n");
}

static void
test_cmdline_refuses_a_bad_value_or_no_policy_by_name(void **state)
{
	ctl_cmdline o;
	char err[4096];

	(void)state;
	assert_int_equal(parse(&o, err, "--policy", "p", "--log-level", "loud",
			     NULL),
	    2);
	assert_string_equal(err,
	    "bellowsd: --log-level must be error, warn, info or debug, not "
	    "'loud'\n");
	assert_int_equal(parse(&o, err, "--policy", "", NULL), 2);
	assert_string_equal(err, "bellowsd: --policy must not be empty\n");
	assert_int_equal(parse(&o, err, "--policy", NULL), 2);
	assert_non_null(
	    strstr(err, "bellowsd: --policy needs a value (FILE)\n"));
	assert_int_equal(parse(&o, err, "--no-db", NULL), 2);
	assert_non_null(
	    strstr(err, "bellowsd: --policy FILE is required\nusage: "));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_cmdline_takes_the_defaults_with_only_a_policy),
		cmocka_unit_test(
		    test_cmdline_takes_each_of_its_options_by_name),
		cmocka_unit_test(test_cmdline_takes_the_letters_it_had),
		cmocka_unit_test(test_cmdline_stops_after_help_and_version),
		cmocka_unit_test(
		    test_cmdline_refuses_an_unknown_option_with_a_suggestion),
		cmocka_unit_test(
		    test_cmdline_refuses_a_bad_value_or_no_policy_by_name),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
