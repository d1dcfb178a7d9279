/* test_history - `bellows history`: the three output forms (aligned
 * tables, RFC 4180 CSV, JSON), the --since/--until values, and which
 * option combinations each subcommand refuses before it opens anything.
 *
 * Rows are built by hand as historydb hands them over; output goes to
 * memory streams and is compared whole.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <bellows/error.h>

#include "hdb_fixture.h"
#include "client/cellfmt.h"
#include "tools/history.h"

#include <math.h>

/* ---- helpers ----------------------------------------------------------- */

static const tool_hdb_cell null_cell = { .type = TOOL_HDB_NULL };

static tool_hdb_cell
int_cell(int64_t v)
{
	return (tool_hdb_cell){ .type = TOOL_HDB_INT, .i = v };
}

static tool_hdb_cell
real_cell(double v)
{
	return (tool_hdb_cell){ .type = TOOL_HDB_REAL, .d = v };
}

static tool_hdb_cell
text_cell(const char *s)
{
	return (
	    tool_hdb_cell){ .type = TOOL_HDB_TEXT, .s = s, .len = strlen(s) };
}

/* Builds rows of `nc` columns from `cells` (n x nc) through the
 * collecting sink, as a query would. */
static void
make_rows(tool_hdb_rows *rows, uint32_t nc, const char *const *names,
    const tool_hdb_cell *cells, uint64_t n)
{
	tool_hdb_sink sink;

	tool_hdb_rows_sink(rows, &sink);
	assert_int_equal(sink.columns(sink.arg, nc, names), 0);
	for (uint64_t i = 0; i < n; i++)
		assert_int_equal(sink.row(sink.arg, cells + i * nc), 0);
}

static char *
printed(const tool_hdb_rows *rows, tool_history_format fmt, bool wide)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	assert_non_null(out);
	assert_int_equal(tool_history_print(out, rows, fmt, wide), 0);
	fclose(out);
	return buf;
}

static char *
cell_text(tool_history_format fmt, const tool_hdb_cell *c)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	assert_non_null(out);
	assert_int_equal(tool_cellfmt_put(out, fmt == TOOL_HISTORY_JSON, c), 0);
	fclose(out);
	return buf;
}

static void
assert_cell(tool_history_format fmt, tool_hdb_cell c, const char *want)
{
	char *got = cell_text(fmt, &c);

	assert_string_equal(got, want);
	free(got);
}

/* ---- CSV --------------------------------------------------------------- */

static void
test_history_csv_quotes_fields_as_rfc_4180(void **state)
{
	(void)state;
	assert_cell(TOOL_HISTORY_CSV, text_cell("plain"), "plain");
	assert_cell(TOOL_HISTORY_CSV, text_cell("a,b"), "\"a,b\"");
	assert_cell(TOOL_HISTORY_CSV, text_cell("say \"hi\""),
	    "\"say \"\"hi\"\"\"");
	assert_cell(TOOL_HISTORY_CSV, text_cell("two\nlines"),
	    "\"two\nlines\"");
	assert_cell(TOOL_HISTORY_CSV, text_cell("cr\r"), "\"cr\r\"");
	assert_cell(TOOL_HISTORY_CSV, text_cell(" padded"), "\" padded\"");
	assert_cell(TOOL_HISTORY_CSV, text_cell(""), "");
	assert_cell(TOOL_HISTORY_CSV, null_cell, "");
	assert_cell(TOOL_HISTORY_CSV, int_cell(-42), "-42");
	assert_cell(TOOL_HISTORY_CSV, int_cell(INT64_MAX),
	    "9223372036854775807");
	assert_cell(TOOL_HISTORY_CSV, real_cell(0.1), "0.1");
	assert_cell(TOOL_HISTORY_CSV, real_cell(2), "2");
	assert_cell(TOOL_HISTORY_CSV, real_cell(INFINITY), "");
	assert_cell(TOOL_HISTORY_CSV,
	    (tool_hdb_cell){ .type = TOOL_HDB_BLOB, .s = "\x00\xff", .len = 2 },
	    "00ff");
}

static void
test_history_csv_has_a_header_and_a_line_per_row(void **state)
{
	static const char *const names[] = { "seq", "reason", "level" };
	tool_hdb_cell cells[] = {
		int_cell(1),
		text_cell("why, then"),
		real_cell(1.5),
		int_cell(2),
		null_cell,
		real_cell(0.25),
	};
	tool_hdb_rows rows = { 0 };
	char *out;

	(void)state;
	make_rows(&rows, 3, names, cells, 2);
	out = printed(&rows, TOOL_HISTORY_CSV, false);
	assert_string_equal(out,
	    "seq,reason,level\n"
	    "1,\"why, then\",1.5\n"
	    "2,,0.25\n");
	free(out);
	tool_hdb_rows_fini(&rows);
}

/* ---- JSON -------------------------------------------------------------- */

static void
test_history_json_escapes_strings_and_keeps_them_utf8(void **state)
{
	(void)state;
	assert_cell(TOOL_HISTORY_JSON, text_cell("plain"), "\"plain\"");
	assert_cell(TOOL_HISTORY_JSON, text_cell("q\"b\\"), "\"q\\\"b\\\\\"");
	assert_cell(TOOL_HISTORY_JSON, text_cell("a\nb\tc\rd"),
	    "\"a\\nb\\tc\\rd\"");
	assert_cell(TOOL_HISTORY_JSON, text_cell("\x01\x1f\x7f"),
	    "\"\\u0001\\u001f\\u007f\"");
	/* Valid UTF-8 passes as it is; a stray byte, a truncated sequence,
	 * an overlong form and a surrogate become U+FFFD. */
	assert_cell(TOOL_HISTORY_JSON, text_cell("caf\xc3\xa9 \xe2\x82\xac"),
	    "\"caf\xc3\xa9 \xe2\x82\xac\"");
	assert_cell(TOOL_HISTORY_JSON,
	    text_cell("a\xff"
		      "b"),
	    "\"a\\ufffdb\"");
	assert_cell(TOOL_HISTORY_JSON, text_cell("a\xe2\x82"),
	    "\"a\\ufffd\\ufffd\"");
	assert_cell(TOOL_HISTORY_JSON, text_cell("\xc0\xaf"),
	    "\"\\ufffd\\ufffd\"");
	assert_cell(TOOL_HISTORY_JSON, text_cell("\xed\xa0\x80"),
	    "\"\\ufffd\\ufffd\\ufffd\"");
}

static void
test_history_json_writes_numbers_as_numbers_null_as_null(void **state)
{
	(void)state;
	assert_cell(TOOL_HISTORY_JSON, int_cell(7), "7");
	assert_cell(TOOL_HISTORY_JSON, real_cell(0.001), "0.001");
	assert_cell(TOOL_HISTORY_JSON, real_cell(1e21), "1e+21");
	assert_cell(TOOL_HISTORY_JSON, real_cell(NAN), "null");
	assert_cell(TOOL_HISTORY_JSON, real_cell(-INFINITY), "null");
	assert_cell(TOOL_HISTORY_JSON, null_cell, "null");
	assert_cell(TOOL_HISTORY_JSON,
	    (tool_hdb_cell){ .type = TOOL_HDB_BLOB, .s = "\x0a", .len = 1 },
	    "\"0a\"");
}

static void
test_history_json_is_an_array_of_objects(void **state)
{
	static const char *const names[] = { "id", "job", "ended" };
	tool_hdb_cell cells[] = {
		int_cell(1),
		text_cell("a\"b"),
		text_cell("2026-11-22T00:00:05.000Z"),
		int_cell(2),
		text_cell("c"),
		null_cell,
	};
	tool_hdb_rows rows = { 0 };
	char *out;

	(void)state;
	make_rows(&rows, 3, names, cells, 2);
	out = printed(&rows, TOOL_HISTORY_JSON, false);
	assert_string_equal(out,
	    "[\n"
	    "  {\"id\": 1, \"job\": \"a\\\"b\", "
	    "\"ended\": \"2026-11-22T00:00:05.000Z\"},\n"
	    "  {\"id\": 2, \"job\": \"c\", \"ended\": null}\n"
	    "]\n");
	free(out);
	tool_hdb_rows_fini(&rows);

	make_rows(&rows, 3, names, cells, 0);
	out = printed(&rows, TOOL_HISTORY_JSON, false);
	assert_string_equal(out, "[]\n");
	free(out);
	tool_hdb_rows_fini(&rows);
}

/* ---- tables ------------------------------------------------------------ */

static void
test_history_table_aligns_numbers_right_and_text_left(void **state)
{
	static const char *const names[] = { "window", "layer", "level",
		"reason" };
	tool_hdb_cell cells[] = {
		int_cell(0),
		text_cell("conv1.weight"),
		real_cell(2),
		text_cell("critical"),
		int_cell(10),
		text_cell("fc"),
		null_cell,
		text_cell("tab\there"),
		int_cell(112),
		text_cell("caf\xc3\xa9"),
		real_cell(0.125),
		null_cell,
	};
	tool_hdb_rows rows = { 0 };
	char *out;

	(void)state;
	make_rows(&rows, 4, names, cells, 3);
	out = printed(&rows, TOOL_HISTORY_TABLE, false);
	/* é is one character wide; a NULL is "-"; the tab is a space; the
	 * last column is not padded. */
	assert_string_equal(out,
	    "window  layer         level  reason\n"
	    "     0  conv1.weight      2  critical\n"
	    "    10  fc                -  tab here\n"
	    "   112  caf\xc3\xa9          0.125  -\n");
	free(out);
	tool_hdb_rows_fini(&rows);
}

static void
test_history_table_shows_sizes_floats_and_times_with_units(void **state)
{
	static const char *const names[] = { "bytes_saved", "floats_sent",
		"step_ms_median", "threshold", "level" };
	tool_hdb_cell cells[] = {
		int_cell(1168716064),
		int_cell(300920000),
		real_cell(12.34),
		real_cell(18446744073709551615.0),
		real_cell(2),
		int_cell(512),
		int_cell(512),
		real_cell(1520),
		int_cell(12288),
		real_cell(1),
	};
	tool_hdb_rows rows = { 0 };
	char *out;

	(void)state;
	make_rows(&rows, 5, names, cells, 2);
	out = printed(&rows, TOOL_HISTORY_TABLE, false);
	/* A threshold above every tensor is "all raw"; plain columns keep
	 * their numbers. */
	assert_string_equal(out,
	    "bytes_saved  floats_sent  step_ms_median  threshold  level\n"
	    "    1.17 GB         301M         12.3 ms    all raw      2\n"
	    "      512 B          512          1.52 s    12.3 kB      1\n");
	free(out);
	/* CSV keeps the exact numbers. */
	out = printed(&rows, TOOL_HISTORY_CSV, false);
	assert_non_null(strstr(out, "1168716064,300920000,12.34,"));
	free(out);
	tool_hdb_rows_fini(&rows);
}

static void
test_history_table_cuts_long_text_unless_wide(void **state)
{
	static const char *const names[] = { "seq", "reason" };
	char longer[200], want[400];
	tool_hdb_cell cells[2];
	tool_hdb_rows rows = { 0 };
	char *out;

	(void)state;
	for (int i = 0; i < 100; i++)
		longer[i] = (char)('a' + i % 26);
	longer[100] = '\0';
	cells[0] = int_cell(1);
	cells[1] = text_cell(longer);
	make_rows(&rows, 2, names, cells, 1);
	out = printed(&rows, TOOL_HISTORY_TABLE, false);
	snprintf(want, sizeof(want), "seq  reason\n  1  %.*s...\n",
	    TOOL_HISTORY_CELL_MAX - 3, longer);
	assert_string_equal(out, want);
	free(out);
	out = printed(&rows, TOOL_HISTORY_TABLE, true);
	snprintf(want, sizeof(want), "seq  reason\n  1  %s\n", longer);
	assert_string_equal(out, want);
	free(out);
	tool_hdb_rows_fini(&rows);

	/* Exactly CELL_MAX characters stay whole. */
	longer[TOOL_HISTORY_CELL_MAX] = '\0';
	cells[1] = text_cell(longer);
	make_rows(&rows, 2, names, cells, 1);
	out = printed(&rows, TOOL_HISTORY_TABLE, false);
	snprintf(want, sizeof(want), "seq  reason\n  1  %s\n", longer);
	assert_string_equal(out, want);
	free(out);
	tool_hdb_rows_fini(&rows);
}

static void
test_history_table_of_no_rows_is_its_header(void **state)
{
	static const char *const names[] = { "id", "job" };
	tool_hdb_rows rows = { 0 };
	char *out;

	(void)state;
	make_rows(&rows, 2, names, NULL, 0);
	out = printed(&rows, TOOL_HISTORY_TABLE, false);
	assert_string_equal(out, "id  job\n");
	free(out);
	tool_hdb_rows_fini(&rows);
}

/* ---- option values ----------------------------------------------------- */

static void
test_history_bound_takes_a_window_number(void **state)
{
	tool_history_bound b = { 0 };

	(void)state;
	assert_int_equal(tool_history_parse_bound("history", "--since", "12",
			     false, &b),
	    0);
	assert_true(b.set);
	assert_false(b.is_time);
	assert_int_equal(b.value, 12);
	assert_int_equal(tool_history_parse_bound("history", "--since",
			     "9223372036854775807", false, &b),
	    0);
	assert_int_equal(b.value, INT64_MAX);
	b = (tool_history_bound){ 0 };
	assert_int_equal(tool_history_parse_bound("history", "--since",
			     "9223372036854775808", false, &b),
	    BELLOWS_EINVAL);
	assert_false(b.set);
}

static void
test_history_bound_takes_a_utc_time_to_its_precision(void **state)
{
	tool_history_bound b;

	(void)state;
	assert_int_equal(tool_history_parse_bound("history", "--since",
			     "2026-11-22T00:00", false, &b),
	    0);
	assert_true(b.is_time);
	assert_int_equal(b.value, FIXTURE_START);
	/* --until covers the whole minute, second, day or millisecond. */
	assert_int_equal(tool_history_parse_bound("history", "--until",
			     "2026-11-22T00:00", true, &b),
	    0);
	assert_int_equal(b.value, FIXTURE_START + 59999);
	assert_int_equal(tool_history_parse_bound("history", "--until",
			     "2026-11-22", true, &b),
	    0);
	assert_int_equal(b.value, FIXTURE_START + 86399999);
	assert_int_equal(tool_history_parse_bound("history", "--until",
			     "2026-11-22 00:00:05Z", true, &b),
	    0);
	assert_int_equal(b.value, FIXTURE_START + 5999);
	assert_int_equal(tool_history_parse_bound("history", "--since",
			     "2026-11-22T00:00:05.25", false, &b),
	    0);
	assert_int_equal(b.value, FIXTURE_START + 5250);
	assert_int_equal(tool_history_parse_bound("history", "--until",
			     "2026-11-22T00:00:05.25", true, &b),
	    0);
	assert_int_equal(b.value, FIXTURE_START + 5259);
	assert_int_equal(tool_history_parse_bound("history", "--since",
			     "2028-02-29T23:59:59.999Z", false, &b),
	    0);
	assert_int_equal(b.value, 1835481599999LL);
}

static void
test_history_bound_refuses_what_is_neither(void **state)
{
	static const char *const bad[] = {
		"",
		"-1",
		"12x",
		"1e3",
		"10:00",
		"2026-11-22T",
		"2026-11-22T10",
		"2026-11-22T24:00",
		"2026-11-22T10:60",
		"2026-11-22T10:00:60",
		"2026-13-01",
		"2026-02-29",
		"2026-11-22T10:00:00.",
		"2026-11-22T10:00:00.1234",
		"2026-11-22T10:00+01:00",
		"2026-11-22ZZ",
		"26-11-22",
	};
	tool_history_bound b = { 0 };

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (tool_history_parse_bound("history", "--since", bad[i],
			false, &b) != BELLOWS_EINVAL)
			fail_msg("'%s' was taken", bad[i]);
		assert_false(b.set);
	}
}

static void
test_history_format_is_table_csv_or_json(void **state)
{
	tool_history_format fmt = TOOL_HISTORY_TABLE;

	(void)state;
	assert_int_equal(tool_history_parse_format("history", "json", &fmt), 0);
	assert_int_equal(fmt, TOOL_HISTORY_JSON);
	assert_int_equal(tool_history_parse_format("history", "csv", &fmt), 0);
	assert_int_equal(fmt, TOOL_HISTORY_CSV);
	assert_int_equal(tool_history_parse_format("history", "JSON", &fmt),
	    BELLOWS_EINVAL);
	assert_int_equal(fmt, TOOL_HISTORY_CSV);
}

/* ---- the command line -------------------------------------------------- */

/* Runs `bellows history ARGS...` and returns its exit code. */
static int
history(const char *first, ...)
{
	char *argv[32];
	int argc = 0;
	va_list ap;

	argv[argc++] = (char *)"history";
	va_start(ap, first);
	for (const char *a = first; a != NULL; a = va_arg(ap, const char *))
		argv[argc++] = (char *)a;
	va_end(ap);
	argv[argc] = NULL;
	return tool_history_main(argc, argv);
}

static void
test_history_refuses_options_its_subcommand_does_not_take(void **state)
{
	(void)state;
	/* All refused before the (missing) database is opened: 2. */
	assert_int_equal(history(NULL), 2);
	assert_int_equal(history("everything", NULL), 2);
	assert_int_equal(history("runs", "windows", NULL), 2);
	assert_int_equal(history("runs", "--layer", "fc", NULL), 2);
	assert_int_equal(history("layers", "--layer", "fc", NULL), 2);
	assert_int_equal(history("events", "--layer", "fc", NULL), 2);
	assert_int_equal(history("windows", "--changed", NULL), 2);
	assert_int_equal(history("layers", "--per-window", NULL), 2);
	assert_int_equal(history("events", "--since", "3", NULL), 2);
	assert_int_equal(history("runs", "--until", "3", NULL), 2);
	assert_int_equal(history("windows", "--since", "yesterday", NULL), 2);
	assert_int_equal(history("windows", "--format", "xml", NULL), 2);
	assert_int_equal(history("windows", "--run", "0", NULL), 2);
	assert_int_equal(history("windows", "--run", "1x", NULL), 2);
	assert_int_equal(history("windows", "--db", "", NULL), 2);
	assert_int_equal(history("windows", "--bogus", NULL), 2);
	/* Well formed: it gets as far as the database. */
	assert_int_equal(history("windows", "--db", "/nonexistent/bellows.db",
			     "--since", "2026-11-22T10:00", "--until", "40",
			     NULL),
	    1);
	assert_int_equal(history("events", "--db", "/nonexistent/bellows.db",
			     "--since", "2026-11-22", NULL),
	    1);
	assert_int_equal(history("--help", NULL), 0);
}

static void
test_history_answers_and_names_missing_runs_and_layers(void **state)
{
	char dir[] = "/tmp/bellows-hist.XXXXXX", path[64];
	FILE *saved;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/h.db", dir);
	assert_int_equal(fixture_db_create(path, 2, 1), SQLITE_OK);
	/* Keep the answers off the test's output. */
	saved = stdout;
	stdout = fopen("/dev/null", "w");
	assert_non_null(stdout);
	assert_int_equal(history("runs", "--db", path, NULL), 0);
	assert_int_equal(history("timings", "--db", path, "--run", "1",
			     "--format", "json", NULL),
	    0);
	assert_int_equal(history("windows", "--db", path, "--run", "1",
			     "--layer", "fc.bias", "--since",
			     "2026-11-22T00:00:02", NULL),
	    0);
	assert_int_equal(history("decisions", "--db", path, "--job", "resnet",
			     "--changed", "--format", "csv", NULL),
	    0);
	assert_int_equal(history("windows", "--db", path, "--run", "7", NULL),
	    1);
	assert_int_equal(history("windows", "--db", path, "--run", "1",
			     "--layer", "nope", NULL),
	    1);
	assert_int_equal(history("layers", "--db", path, "--job", "gpt", NULL),
	    1);
	fclose(stdout);
	stdout = saved;
	fixture_db_remove(path);
	assert_int_equal(rmdir(dir), 0);
}

/* Runs `bellows history ARGS...` with its standard output in `out`
 * (`len` bytes); returns the exit code. */
static int
history_to(char *out, size_t len, const char *first, ...)
{
	char *argv[32];
	int argc = 0, rc;
	FILE *saved = stdout, *tmp = tmpfile();
	size_t n;
	va_list ap;

	assert_non_null(tmp);
	argv[argc++] = (char *)"history";
	va_start(ap, first);
	for (const char *a = first; a != NULL; a = va_arg(ap, const char *))
		argv[argc++] = (char *)a;
	va_end(ap);
	argv[argc] = NULL;
	stdout = tmp;
	rc = tool_history_main(argc, argv);
	stdout = saved;
	rewind(tmp);
	n = fread(out, 1, len - 1, tmp);
	out[n] = '\0';
	fclose(tmp);
	return rc;
}

static void
test_history_prints_policy_metrics_and_collectives(void **state)
{
	char dir[] = "/tmp/bellows-hist.XXXXXX", path[64], out[1024];

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/h.db", dir);
	assert_int_equal(fixture_db_create(path, 3, 1), SQLITE_OK);
	assert_int_equal(history_to(out, sizeof(out), "metrics", "--db", path,
			     "--run", "1", "--format", "csv", NULL),
	    0);
	assert_string_equal(out,
	    "window,policy,name,layer,value\n"
	    "1,slim,threshold_bytes,,2200000\n"
	    "1,slim,ratio,conv.weight,1.5\n"
	    "3,perf,alpha_ms,,0.25\n");
	assert_int_equal(history_to(out, sizeof(out), "metrics", "--db", path,
			     "--run", "1", "--layer", "conv.weight", "--format",
			     "csv", NULL),
	    0);
	assert_string_equal(out,
	    "window,policy,name,layer,value\n"
	    "1,slim,ratio,conv.weight,1.5\n");
	assert_int_equal(history_to(out, sizeof(out), "comm", "--db", path,
			     "--run", "1", "--since", "3", "--format", "csv",
			     NULL),
	    0);
	assert_string_equal(out,
	    "window,rank,bytes,compressed,count,ms,gbps\n"
	    "3,0,4096,0,10,0.5,0.008\n"
	    "3,2,1024,1,2,0.25,0.004\n");
	/* comm takes no --layer. */
	assert_int_equal(history_to(out, sizeof(out), "comm", "--db", path,
			     "--layer", "conv.weight", NULL),
	    2);
	fixture_db_remove(path);
	assert_int_equal(rmdir(dir), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_history_csv_quotes_fields_as_rfc_4180),
		cmocka_unit_test(
		    test_history_csv_has_a_header_and_a_line_per_row),
		cmocka_unit_test(
		    test_history_json_escapes_strings_and_keeps_them_utf8),
		cmocka_unit_test(
		    test_history_json_writes_numbers_as_numbers_null_as_null),
		cmocka_unit_test(test_history_json_is_an_array_of_objects),
		cmocka_unit_test(
		    test_history_table_aligns_numbers_right_and_text_left),
		cmocka_unit_test(
		    test_history_table_shows_sizes_floats_and_times_with_units),
		cmocka_unit_test(test_history_table_cuts_long_text_unless_wide),
		cmocka_unit_test(test_history_table_of_no_rows_is_its_header),
		cmocka_unit_test(test_history_bound_takes_a_window_number),
		cmocka_unit_test(
		    test_history_bound_takes_a_utc_time_to_its_precision),
		cmocka_unit_test(test_history_bound_refuses_what_is_neither),
		cmocka_unit_test(test_history_format_is_table_csv_or_json),
		cmocka_unit_test(
		    test_history_refuses_options_its_subcommand_does_not_take),
		cmocka_unit_test(
		    test_history_answers_and_names_missing_runs_and_layers),
		cmocka_unit_test(
		    test_history_prints_policy_metrics_and_collectives),
	};

	return cmocka_run_group_tests_name("history", tests, NULL, NULL);
}
