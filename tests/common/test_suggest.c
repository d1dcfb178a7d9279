/* test_suggest - "did you mean": the nearest known name for slips (a
 * swap, a missing, extra or wrong letter, a prefix, another case), and
 * nothing for names that are not close to any. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "common/suggest.h"

static const char *const commands[] = { "status", "policy", "sim", "replay",
	"history", "export", "codec", "keygen", "top", "help" };
#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static const char *
near(const char *given)
{
	return com_suggest(given, commands, N_COMMANDS);
}

static void
test_suggest_names_the_command_one_slip_away(void **state)
{
	(void)state;
	assert_string_equal(near("hsitory"), "history");  /* swap */
	assert_string_equal(near("histry"), "history");   /* missing */
	assert_string_equal(near("historyy"), "history"); /* extra */
	assert_string_equal(near("stats"), "status");     /* wrong */
	assert_string_equal(near("tpo"), "top");
	assert_string_equal(near("REPLAY"), "replay"); /* case */
	assert_string_equal(near("hist"), "history");  /* prefix */
	assert_string_equal(near("keygn"), "keygen");
}

static void
test_suggest_names_nothing_for_a_distant_name(void **state)
{
	(void)state;
	assert_null(near("frobnicate"));
	assert_null(near("x"));
	assert_null(near("ab"));
	assert_null(near(""));
	assert_null(near(NULL));
	/* Two slips in a four-letter name is another word. */
	assert_null(near("tapp"));
}

static void
test_suggest_prefers_the_nearest_and_skips_null_entries(void **state)
{
	static const char *const views[] = { "runs", NULL, "layers", "windows",
		"decisions", "events", "timings", "stats", "metrics", "comm",
		"residuals" };
	char longname[200];

	(void)state;
	assert_string_equal(com_suggest("runz", views, 11), "runs");
	assert_string_equal(com_suggest("metric", views, 11), "metrics");
	assert_string_equal(com_suggest("decison", views, 11), "decisions");
	assert_string_equal(com_suggest("stat", views, 11), "stats");
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_null(com_suggest(longname, views, 11));
}

static void
test_suggest_option_names_the_long_option_meant(void **state)
{
	static const struct option opts[] = {
		{ "policy", required_argument, NULL, 'p' },
		{ "control", required_argument, NULL, 'c' },
		{ "db", required_argument, NULL, 'd' },
		{ "no-db", no_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};

	(void)state;
	assert_string_equal(com_suggest_option("--polcy", opts), "policy");
	assert_string_equal(com_suggest_option("--contrl=tcp://x:1", opts),
	    "control");
	assert_string_equal(com_suggest_option("--nodb", opts), "no-db");
	/* Known (refused for its value), short, distant or not long. */
	assert_null(com_suggest_option("--policy", opts));
	assert_null(com_suggest_option("--policy=", opts));
	assert_null(com_suggest_option("--frobnicate", opts));
	assert_null(com_suggest_option("-p", opts));
	assert_null(com_suggest_option("--", opts));
	assert_null(com_suggest_option("--=x", opts));
	assert_null(com_suggest_option(NULL, opts));
	assert_null(com_suggest_option("--polcy", NULL));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_suggest_names_the_command_one_slip_away),
		cmocka_unit_test(test_suggest_names_nothing_for_a_distant_name),
		cmocka_unit_test(
		    test_suggest_prefers_the_nearest_and_skips_null_entries),
		cmocka_unit_test(
		    test_suggest_option_names_the_long_option_meant),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
