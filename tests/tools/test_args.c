/* test_args - the option table: one parser and one help for every
 * subcommand, the shared options declared once.
 *
 * A test subcommand ("t") takes the shared options and one option of
 * each kind; what com_args_parse stores, returns and says on stderr is
 * compared whole (stderr and stdout are redirected to temporary files).
 * The real subcommands (export, history, replay) are then run with the
 * same bad shared options and must refuse them with the same words.
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

#include <bellows/error.h>

#include "common/args.h"
#include "tools/export_cli.h"
#include "tools/history.h"
#include "tools/replay.h"

/* ---- capturing stdout and stderr --------------------------------------- */

typedef struct capture {
	int fd;          /* 1 or 2 */
	int saved;       /* the descriptor it had */
	FILE *tmp;       /* where it goes meanwhile */
	char text[8192]; /* what was written, NUL-terminated */
} capture;

static void
capture_begin(capture *c, int fd)
{
	c->fd = fd;
	fflush(fd == 1 ? stdout : stderr);
	c->tmp = tmpfile();
	assert_non_null(c->tmp);
	c->saved = dup(fd);
	assert_true(c->saved >= 0);
	assert_true(dup2(fileno(c->tmp), fd) >= 0);
}

static const char *
capture_end(capture *c)
{
	size_t n;

	fflush(c->fd == 1 ? stdout : stderr);
	assert_true(dup2(c->saved, c->fd) >= 0);
	close(c->saved);
	rewind(c->tmp);
	n = fread(c->text, 1, sizeof(c->text) - 1, c->tmp);
	c->text[n] = '\0';
	fclose(c->tmp);
	return c->text;
}

/* ---- a subcommand of every kind of option ------------------------------ */

typedef struct t_opts {
	uint32_t count;     /* --count */
	com_args_shared sh; /* --db, --run, --job */
	bool force;         /* --force */
	bool only;          /* --only */
	const char *out;    /* --out */
	const char *label;  /* --label */
	uint64_t big;       /* --big */
	int64_t id;         /* --id */
	int pairs;          /* --pair: how often given */
	char pair[16];      /* its last value */
} t_opts;

static int usage_calls; /* t_usage calls since the test began */

static void
t_usage(FILE *f)
{
	usage_calls++;
	fputs("usage: bellows t\n", f);
}

static int
t_pair(const char *cmd, const char *opt, const char *text, void *opts)
{
	t_opts *o = opts;

	if (strchr(text, ':') == NULL) {
		fprintf(stderr, "bellows %s: %s must be A:B, not '%s'\n", cmd,
		    opt, text);
		return BELLOWS_EINVAL;
	}
	o->pairs++;
	snprintf(o->pair, sizeof(o->pair), "%s", text);
	return 0;
}

static const com_opt t_rows[] = {
	{ .name = "count",
	    .arg = "N",
	    .help = "how many",
	    .kind = COM_OPT_U32,
	    .at = offsetof(t_opts, count),
	    .min = 1,
	    .max = 10,
	    .letter = 'c' },
	{ .name = "force",
	    .help = "overwrite",
	    .kind = COM_OPT_FLAG,
	    .at = offsetof(t_opts, force),
	    .letter = 'f' },
	{ .name = "out",
	    .arg = "DIR",
	    .help = "where the words of a long help go, wrapped at the "
		    "seventy-eighth column under the column of the help text",
	    .kind = COM_OPT_TEXT,
	    .at = offsetof(t_opts, out),
	    .min = 1 },
	{ .name = "only",
	    .help = "a flag",
	    .kind = COM_OPT_FLAG,
	    .at = offsetof(t_opts, only) },
	{ .name = "label",
	    .arg = "TEXT",
	    .help = "a name",
	    .kind = COM_OPT_NAME,
	    .at = offsetof(t_opts, label),
	    .min = 1,
	    .max = 4 },
	{ .name = "big",
	    .arg = "N",
	    .help = "a large count",
	    .kind = COM_OPT_U64,
	    .at = offsetof(t_opts, big),
	    .max = UINT64_MAX },
	{ .name = "id",
	    .arg = "ID",
	    .help = "a signed id",
	    .kind = COM_OPT_I64,
	    .at = offsetof(t_opts, id),
	    .min = 5,
	    .max = 9 },
	{ .name = "pair",
	    .arg = "A:B",
	    .help = "a pair",
	    .kind = COM_OPT_PARSE,
	    .parse = t_pair },
	{ .name = "a-very-long-option",
	    .arg = "VALUE",
	    .help = "its help goes below",
	    .kind = COM_OPT_TEXT,
	    .at = offsetof(t_opts, label) },
};

static const com_args_cmd t_cmd = {
	.name = "t",
	.shared = COM_ARGS_TAKES(COM_ARGS_DB) | COM_ARGS_TAKES(COM_ARGS_RUN) |
	    COM_ARGS_TAKES(COM_ARGS_JOB),
	.shared_at = offsetof(t_opts, sh),
	.notes = { [COM_ARGS_JOB] = "only this one" },
	.operands = 2,
	.opts = t_rows,
	.n_opts = sizeof(t_rows) / sizeof(t_rows[0]),
	.usage = t_usage,
};

/* Parses `t ARGS...` into *o (zeroed first, db defaulting to
 * "default.db") with stderr captured into *err. Returns what
 * com_args_parse returned; *ret_next is -1 unless it went on. */
static int
t_parse(t_opts *o, capture *err, int *ret_next, const char *first, ...)
{
	static char *argv[32];
	int argc = 0, rc;
	va_list ap;

	argv[argc++] = (char *)"t";
	va_start(ap, first);
	for (const char *a = first; a != NULL; a = va_arg(ap, const char *))
		argv[argc++] = (char *)a;
	va_end(ap);
	argv[argc] = NULL;
	*o = (t_opts){ .sh = { .db = "default.db" } };
	*ret_next = -1;
	usage_calls = 0;
	capture_begin(err, 2);
	rc = com_args_parse(&t_cmd, argc, argv, o, ret_next);
	capture_end(err);
	if (rc < 0)
		assert_string_equal(err->text, "");
	return rc;
}

/* ---- parsing ----------------------------------------------------------- */

static void
test_args_store_every_kind_where_its_row_says(void **state)
{
	capture err;
	t_opts o;
	int next;

	(void)state;
	assert_int_equal(t_parse(&o, &err, &next, "--db", "h.db", "--run", "7",
			     "--job", "j", "--count", "10", "--force", "--out",
			     "d", "--label", "abcd", "--big",
			     "18446744073709551615", "--id=9", "--pair", "1:2",
			     "--pair", "3:4", NULL),
	    -1);
	assert_string_equal(o.sh.db, "h.db");
	assert_int_equal(o.sh.run, 7);
	assert_string_equal(o.sh.job, "j");
	assert_int_equal(o.count, 10);
	assert_true(o.force);
	assert_string_equal(o.out, "d");
	assert_string_equal(o.label, "abcd");
	assert_true(o.big == UINT64_MAX);
	assert_int_equal(o.id, 9);
	assert_int_equal(o.pairs, 2);
	assert_string_equal(o.pair, "3:4");
	assert_int_equal(next, 21);
	assert_int_equal(usage_calls, 0);
}

static void
test_args_leave_defaults_of_options_not_given(void **state)
{
	capture err;
	t_opts o;
	int next;

	(void)state;
	assert_int_equal(t_parse(&o, &err, &next, NULL), -1);
	assert_string_equal(o.sh.db, "default.db");
	assert_int_equal(o.sh.run, 0);
	assert_null(o.sh.job);
	assert_false(o.force);
	assert_int_equal(next, 1);
}

static void
test_args_put_operands_after_the_options(void **state)
{
	char *argv[] = { "t", "first", "--count", "3", "second", "--force",
		NULL };
	t_opts o = { 0 };
	int next = -1;

	(void)state;
	assert_int_equal(com_args_parse(&t_cmd, 6, argv, &o, &next), -1);
	assert_int_equal(next, 4);
	assert_string_equal(argv[4], "first");
	assert_string_equal(argv[5], "second");
	assert_int_equal(o.count, 3);
	assert_true(o.force);
}

static void
test_args_refuse_an_operand_too_many(void **state)
{
	capture err;
	t_opts o;
	int next;

	(void)state;
	assert_int_equal(t_parse(&o, &err, &next, "a", "--force", "b", "c",
			     NULL),
	    2);
	assert_string_equal(err.text, "bellows t: unexpected argument 'c'\n");
	assert_int_equal(next, -1);
	assert_int_equal(usage_calls, 0);
}

static void
test_args_take_an_unambiguous_abbreviation(void **state)
{
	capture err;
	t_opts o;
	int next;

	(void)state;
	assert_int_equal(t_parse(&o, &err, &next, "--fo", "--co", "2", NULL),
	    -1);
	assert_true(o.force);
	assert_int_equal(o.count, 2);
}

static void
test_args_refuse_bad_numbers_naming_the_option(void **state)
{
	static const struct {
		const char *opt, *value, *says;
	} bad[] = {
		{ "--count", "0",
		    "bellows t: --count must be an integer in [1, 10], not "
		    "'0'\n" },
		{ "--count", "4x",
		    "bellows t: --count must be an integer in [1, 10], not "
		    "'4x'\n" },
		{ "--count", "-1",
		    "bellows t: --count must be an integer in [1, 10], not "
		    "'-1'\n" },
		{ "--count", " 3",
		    "bellows t: --count must be an integer in [1, 10], not "
		    "' 3'\n" },
		{ "--big", "18446744073709551616",
		    "bellows t: --big must be an integer in [0, "
		    "18446744073709551615], not '18446744073709551616'\n" },
		{ "--id", "4",
		    "bellows t: --id must be an integer in [5, 9], not '4'\n" },
		{ "--run", "0",
		    "bellows t: --run must be an integer in [1, "
		    "9223372036854775807], not '0'\n" },
		{ "--run", "9223372036854775808",
		    "bellows t: --run must be an integer in [1, "
		    "9223372036854775807], not '9223372036854775808'\n" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		capture err;
		t_opts o;
		int next;

		assert_int_equal(t_parse(&o, &err, &next, bad[i].opt,
				     bad[i].value, NULL),
		    2);
		assert_string_equal(err.text, bad[i].says);
		assert_int_equal(next, -1);
		/* A bad value is not a bad command line: no usage dump. */
		assert_int_equal(usage_calls, 0);
	}
}

static void
test_args_refuse_bad_text_naming_the_option(void **state)
{
	capture err;
	t_opts o;
	int next;

	(void)state;
	assert_int_equal(t_parse(&o, &err, &next, "--db", "", NULL), 2);
	assert_string_equal(err.text, "bellows t: --db must not be empty\n");
	assert_int_equal(t_parse(&o, &err, &next, "--job", "", NULL), 2);
	assert_string_equal(err.text, "bellows t: --job must not be empty\n");
	assert_int_equal(t_parse(&o, &err, &next, "--label", "abcde", NULL), 2);
	assert_string_equal(err.text,
	    "bellows t: --label must have 1..4 bytes, not 5\n");
	assert_int_equal(t_parse(&o, &err, &next, "--label", "a\tb", NULL), 2);
	assert_string_equal(err.text,
	    "bellows t: --label must not contain control characters\n");
	assert_int_equal(t_parse(&o, &err, &next, "--pair", "12", NULL), 2);
	assert_string_equal(err.text,
	    "bellows t: --pair must be A:B, not "
	    "'12'\n");
	/* TEXT takes control characters; NAME does not. */
	assert_int_equal(t_parse(&o, &err, &next, "--out", "a\tb", NULL), -1);
}

static void
test_args_refuse_unknown_options_with_the_usage(void **state)
{
	capture err;
	t_opts o;
	int next;

	(void)state;
	assert_int_equal(t_parse(&o, &err, &next, "--bogus", NULL), 2);
	assert_string_equal(err.text,
	    "bellows t: unknown option '--bogus'\n"
	    "usage: bellows t\n");
	assert_int_equal(usage_calls, 1);
	assert_int_equal(t_parse(&o, &err, &next, "--bogus=3", NULL), 2);
	assert_string_equal(err.text,
	    "bellows t: unknown option '--bogus'\n"
	    "usage: bellows t\n");
	assert_int_equal(t_parse(&o, &err, &next, "-x", NULL), 2);
	assert_string_equal(err.text,
	    "bellows t: unknown option '-x'\n"
	    "usage: bellows t\n");
}

static void
test_args_name_the_candidates_of_an_ambiguous_option(void **state)
{
	capture err;
	t_opts o;
	int next;

	(void)state;
	assert_int_equal(t_parse(&o, &err, &next, "--o", "x", NULL), 2);
	assert_string_equal(err.text,
	    "bellows t: ambiguous option '--o' (--out, --only)\n"
	    "usage: bellows t\n");
	assert_int_equal(usage_calls, 1);
	/* An exact name is never ambiguous, a longer prefix may not be. */
	assert_int_equal(t_parse(&o, &err, &next, "--out", "x", NULL), -1);
	assert_int_equal(t_parse(&o, &err, &next, "--on", NULL), -1);
	assert_true(o.only);
}

static void
test_args_say_which_value_is_missing(void **state)
{
	capture err;
	t_opts o;
	int next;

	(void)state;
	assert_int_equal(t_parse(&o, &err, &next, "--db", NULL), 2);
	assert_string_equal(err.text,
	    "bellows t: --db needs a value (FILE)\n"
	    "usage: bellows t\n");
	assert_int_equal(usage_calls, 1);
	assert_int_equal(t_parse(&o, &err, &next, "--force", "--count", NULL),
	    2);
	assert_string_equal(err.text,
	    "bellows t: --count needs a value (N)\n"
	    "usage: bellows t\n");
	assert_int_equal(t_parse(&o, &err, &next, "--force=yes", NULL), 2);
	assert_string_equal(err.text,
	    "bellows t: --force takes no value\n"
	    "usage: bellows t\n");
}

static void
test_args_print_the_usage_on_help_and_stop(void **state)
{
	char *argv[] = { "t", "--count", "0", "--help", NULL };
	char *argv_h[] = { "t", "-h", NULL };
	capture out;
	t_opts o = { 0 };
	int next = -1;

	(void)state;
	usage_calls = 0;
	capture_begin(&out, 1);
	/* --help is read after the bad --count: the first error wins. */
	assert_int_equal(com_args_parse(&t_cmd, 4, argv, &o, &next), 2);
	assert_int_equal(com_args_parse(&t_cmd, 2, argv_h, &o, &next), 0);
	capture_end(&out);
	assert_string_equal(out.text, "usage: bellows t\n");
	assert_int_equal(usage_calls, 1);
	assert_int_equal(next, -1);
}

static void
test_args_take_a_row_by_its_letter_and_refuse_other_letters(void **state)
{
	capture err;
	t_opts o;
	int next;

	(void)state;
	assert_int_equal(t_parse(&o, &err, &next, "-c", "3", "-f", NULL), -1);
	assert_int_equal(o.count, 3);
	assert_true(o.force);
	assert_int_equal(t_parse(&o, &err, &next, "-c4", NULL), -1);
	assert_int_equal(o.count, 4);
	assert_int_equal(t_parse(&o, &err, &next, "-c", "0", NULL), 2);
	assert_string_equal(err.text,
	    "bellows t: --count must be an integer in [1, 10], not '0'\n");
	assert_int_equal(t_parse(&o, &err, &next, "-c", NULL), 2);
	assert_string_equal(err.text,
	    "bellows t: --count needs a value (N)\n"
	    "usage: bellows t\n");
	assert_int_equal(t_parse(&o, &err, &next, "-x", NULL), 2);
	assert_string_equal(err.text,
	    "bellows t: unknown option '-x'\n"
	    "usage: bellows t\n");
}

static const com_args_cmd t_program = {
	.name = "tprog",
	.program = true,
	.shared = COM_ARGS_TAKES(COM_ARGS_DB),
	.shared_at = offsetof(t_opts, sh),
	.opts = t_rows,
	.n_opts = sizeof(t_rows) / sizeof(t_rows[0]),
	.usage = t_usage,
};

static void
test_args_name_a_program_of_its_own_without_bellows(void **state)
{
	char *unknown[] = { "tprog", "--fprce", NULL };
	char *bad[] = { "tprog", "--count", "x", NULL };
	char *extra[] = { "tprog", "x", NULL };
	capture err;
	t_opts o = { 0 };
	int next = -1;

	(void)state;
	capture_begin(&err, 2);
	assert_int_equal(com_args_parse(&t_program, 2, unknown, &o, &next), 2);
	capture_end(&err);
	assert_string_equal(err.text,
	    "tprog: unknown option '--fprce'; did you mean '--force'?\n"
	    "usage: bellows t\n");
	capture_begin(&err, 2);
	assert_int_equal(com_args_parse(&t_program, 3, bad, &o, &next), 2);
	capture_end(&err);
	assert_string_equal(err.text,
	    "tprog: --count must be an integer in [1, 10], not 'x'\n");
	capture_begin(&err, 2);
	assert_int_equal(com_args_parse(&t_program, 2, extra, &o, &next), 2);
	capture_end(&err);
	assert_string_equal(err.text, "tprog: unexpected argument 'x'\n");
	assert_int_equal(next, -1);
}

/* ---- help -------------------------------------------------------------- */

static void
test_args_help_lists_shared_options_first_then_own_then_help(void **state)
{
	static const t_opts defaults = { .sh = { .db = "bellows.db" } };
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	(void)state;
	assert_non_null(f);
	com_args_help(f, &t_cmd, &defaults);
	fclose(f);
	assert_string_equal(text,
	    "  --db FILE     bellowsd's history database, read-only, also "
	    "while bellowsd\n"
	    "                writes it (default bellows.db)\n"
	    "  --run ID      the run of the history (default: the latest)\n"
	    "  --job NAME    a job name; only this one\n"
	    "  --count N     how many\n"
	    "  --force       overwrite\n"
	    "  --out DIR     where the words of a long help go, wrapped at the\n"
	    "                seventy-eighth column under the column of the "
	    "help text\n"
	    "  --only        a flag\n"
	    "  --label TEXT  a name\n"
	    "  --big N       a large count\n"
	    "  --id ID       a signed id\n"
	    "  --pair A:B    a pair\n"
	    "  --a-very-long-option VALUE\n"
	    "                its help goes below\n"
	    "  --help        print this help and exit\n");
	free(text);
}

static void
test_args_help_without_defaults_says_none(void **state)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	(void)state;
	assert_non_null(f);
	com_args_help(f, &t_cmd, NULL);
	fclose(f);
	assert_null(strstr(text, "(default bellows.db)"));
	assert_non_null(strstr(text, "  --db FILE     bellowsd's history"));
	free(text);
}

/* ---- the subcommands --------------------------------------------------- */

typedef int (*main_fn)(int argc, char **argv);

static const struct {
	const char *name;
	main_fn main;
	void (*usage)(FILE *f);
	unsigned takes;
} subs[] = {
	{ "export", tool_export_main, tool_export_usage,
	    COM_ARGS_TAKES(COM_ARGS_DB) | COM_ARGS_TAKES(COM_ARGS_RUN) },
	{ "history", tool_history_main, tool_history_usage,
	    COM_ARGS_TAKES(COM_ARGS_DB) | COM_ARGS_TAKES(COM_ARGS_RUN) |
		COM_ARGS_TAKES(COM_ARGS_JOB) },
	{ "replay", tool_replay_main, tool_replay_usage,
	    COM_ARGS_TAKES(COM_ARGS_DB) | COM_ARGS_TAKES(COM_ARGS_RUN) |
		COM_ARGS_TAKES(COM_ARGS_JOB) },
};

/* Runs subcommand `s` with `opt value` and returns its exit code, its
 * stderr in *err. */
static int
sub_run(size_t s, capture *err, const char *opt, const char *value)
{
	char *argv[4] = { (char *)subs[s].name, (char *)opt, (char *)value,
		NULL };
	int rc;

	capture_begin(err, 2);
	rc = subs[s].main(value != NULL ? 3 : 2, argv);
	capture_end(err);
	return rc;
}

static void
test_args_every_subcommand_refuses_a_bad_shared_option_alike(void **state)
{
	static const struct {
		unsigned id;
		const char *opt, *value, *says;
	} bad[] = {
		{ COM_ARGS_RUN, "--run", "0",
		    ": --run must be an integer in [1, 9223372036854775807], "
		    "not '0'\n" },
		{ COM_ARGS_RUN, "--run", "1x",
		    ": --run must be an integer in [1, 9223372036854775807], "
		    "not '1x'\n" },
		{ COM_ARGS_DB, "--db", "", ": --db must not be empty\n" },
		{ COM_ARGS_JOB, "--job", "", ": --job must not be empty\n" },
	};

	(void)state;
	for (size_t s = 0; s < sizeof(subs) / sizeof(subs[0]); s++) {
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			char want[160];
			capture err;

			if (!(subs[s].takes & COM_ARGS_TAKES(bad[i].id)))
				continue;
			snprintf(want, sizeof(want), "bellows %s%s",
			    subs[s].name, bad[i].says);
			assert_int_equal(sub_run(s, &err, bad[i].opt,
					     bad[i].value),
			    2);
			assert_string_equal(err.text, want);
		}
	}
}

static void
test_args_every_subcommand_refuses_an_unknown_option_alike(void **state)
{
	(void)state;
	for (size_t s = 0; s < sizeof(subs) / sizeof(subs[0]); s++) {
		char want[160];
		capture err;

		snprintf(want, sizeof(want),
		    "bellows %s: unknown option '--bogus'\nusage: bellows %s",
		    subs[s].name, subs[s].name);
		assert_int_equal(sub_run(s, &err, "--bogus", NULL), 2);
		assert_memory_equal(err.text, want, strlen(want));
		snprintf(want, sizeof(want),
		    "bellows %s: --db needs a value (FILE)\n", subs[s].name);
		assert_int_equal(sub_run(s, &err, "--db", NULL), 2);
		assert_memory_equal(err.text, want, strlen(want));
	}
}

static void
test_args_every_subcommand_explains_a_shared_option_alike(void **state)
{
	(void)state;
	for (size_t s = 0; s < sizeof(subs) / sizeof(subs[0]); s++) {
		char *text = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&text, &len);
		const char *run, *db;

		assert_non_null(f);
		subs[s].usage(f);
		fclose(f);
		db = strstr(text, "\n  --db FILE ");
		run = strstr(text, "\n  --run ID ");
		assert_non_null(db);
		assert_non_null(run);
		assert_non_null(strstr(db,
		    " bellowsd's history database, "
		    "read-only, also while bellowsd"));
		assert_non_null(strstr(run,
		    " the run of the history "
		    "(default: the latest)"));
		/* Shared first: --db before --run before the own ones. */
		assert_true(db < run);
		assert_non_null(strstr(text, "\n  --help "));
		free(text);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_args_store_every_kind_where_its_row_says),
		cmocka_unit_test(test_args_leave_defaults_of_options_not_given),
		cmocka_unit_test(test_args_put_operands_after_the_options),
		cmocka_unit_test(test_args_refuse_an_operand_too_many),
		cmocka_unit_test(test_args_take_an_unambiguous_abbreviation),
		cmocka_unit_test(
		    test_args_refuse_bad_numbers_naming_the_option),
		cmocka_unit_test(test_args_refuse_bad_text_naming_the_option),
		cmocka_unit_test(
		    test_args_refuse_unknown_options_with_the_usage),
		cmocka_unit_test(
		    test_args_name_the_candidates_of_an_ambiguous_option),
		cmocka_unit_test(test_args_say_which_value_is_missing),
		cmocka_unit_test(test_args_print_the_usage_on_help_and_stop),
		cmocka_unit_test(
		    test_args_take_a_row_by_its_letter_and_refuse_other_letters),
		cmocka_unit_test(
		    test_args_name_a_program_of_its_own_without_bellows),
		cmocka_unit_test(
		    test_args_help_lists_shared_options_first_then_own_then_help),
		cmocka_unit_test(test_args_help_without_defaults_says_none),
		cmocka_unit_test(
		    test_args_every_subcommand_refuses_a_bad_shared_option_alike),
		cmocka_unit_test(
		    test_args_every_subcommand_refuses_an_unknown_option_alike),
		cmocka_unit_test(
		    test_args_every_subcommand_explains_a_shared_option_alike),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
