/* test_cellfmt - history cells written as JSON values and CSV fields:
 * JSON strings escaped so that any bytes give valid JSON (quotes,
 * backslashes, control characters; UTF-8 kept, other bytes replaced),
 * CSV fields quoted as RFC 4180 asks, numbers, NULLs and BLOBs in both,
 * and a failed write reported as BELLOWS_EIO.
 *
 * Every expected text is written out by hand.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <bellows/error.h>

#include "client/cellfmt.h"

/* s (len bytes) as tool_cellfmt_json_string writes it; the caller's. */
static char *
json_of(const char *s, size_t len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *out = open_memstream(&buf, &n);

	assert_non_null(out);
	assert_int_equal(tool_cellfmt_json_string(out, s, len), 0);
	fclose(out);
	return buf;
}

static void
assert_json(const char *s, size_t len, const char *want)
{
	char *got = json_of(s, len);

	assert_string_equal(got, want);
	free(got);
}

/* Cell c as tool_cellfmt_put writes it, JSON or CSV, checked. */
static void
assert_put(bool json, tool_hdb_cell c, const char *want)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *out = open_memstream(&buf, &n);

	assert_non_null(out);
	assert_int_equal(tool_cellfmt_put(out, json, &c), 0);
	fclose(out);
	assert_string_equal(buf, want);
	free(buf);
}

static tool_hdb_cell
text(const char *s)
{
	return (
	    tool_hdb_cell){ .type = TOOL_HDB_TEXT, .s = s, .len = strlen(s) };
}

/* ---- JSON strings ------------------------------------------------------ */

static void
test_cellfmt_json_escapes_quotes_and_backslashes(void **state)
{
	(void)state;
	assert_json("", 0, "\"\"");
	assert_json("plain", 5, "\"plain\"");
	assert_json("say \"hi\"", 8, "\"say \\\"hi\\\"\"");
	assert_json("C:\\dir\\", 7, "\"C:\\\\dir\\\\\"");
	/* A slash needs no escape. */
	assert_json("a/b", 3, "\"a/b\"");
}

static void
test_cellfmt_json_escapes_every_control_character(void **state)
{
	(void)state;
	assert_json("a\nb\rc\td", 7, "\"a\\nb\\rc\\td\"");
	assert_json("\x01\x1f\x7f", 3, "\"\\u0001\\u001f\\u007f\"");
	assert_json("\b\f", 2, "\"\\u0008\\u000c\"");
	/* The length, not a NUL, ends the string. */
	assert_json("a\0b", 3, "\"a\\u0000b\"");
}

static void
test_cellfmt_json_keeps_utf8_as_it_is(void **state)
{
	(void)state;
	/* 2, 3 and 4 bytes: é, €, U+1F600; the last code point. */
	assert_json("caf\xc3\xa9", 5, "\"caf\xc3\xa9\"");
	assert_json("\xe2\x82\xac 5", 5, "\"\xe2\x82\xac 5\"");
	assert_json("\xf0\x9f\x98\x80", 4, "\"\xf0\x9f\x98\x80\"");
	assert_json("\xf4\x8f\xbf\xbf", 4, "\"\xf4\x8f\xbf\xbf\"");
}

static void
test_cellfmt_json_replaces_each_byte_that_is_not_utf8(void **state)
{
	(void)state;
	/* A byte no sequence starts with, a continuation alone. */
	assert_json("a\xff"
		    "b",
	    3, "\"a\\ufffdb\"");
	assert_json("\x80", 1, "\"\\ufffd\"");
	/* A sequence cut by the end of the string. */
	assert_json("ab\xc3", 3, "\"ab\\ufffd\"");
	assert_json("\xe2\x82", 2, "\"\\ufffd\\ufffd\"");
	/* A lead byte followed by no continuation. */
	assert_json("\xc3(", 2, "\"\\ufffd(\"");
	/* Overlong, a surrogate, beyond U+10FFFF: every byte replaced. */
	assert_json("\xc0\xaf", 2, "\"\\ufffd\\ufffd\"");
	assert_json("\xed\xa0\x80", 3, "\"\\ufffd\\ufffd\\ufffd\"");
	assert_json("\xf4\x90\x80\x80", 4, "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");
}

/* ---- cells ------------------------------------------------------------- */

static void
test_cellfmt_csv_quotes_a_field_only_when_it_must(void **state)
{
	(void)state;
	assert_put(false, text("plain"), "plain");
	assert_put(false, text(""), "");
	assert_put(false, text("caf\xc3\xa9"), "caf\xc3\xa9");
	assert_put(false, text("a,b"), "\"a,b\"");
	assert_put(false, text("say \"hi\""), "\"say \"\"hi\"\"\"");
	assert_put(false, text("two\nlines"), "\"two\nlines\"");
	assert_put(false, text("cr\r"), "\"cr\r\"");
	/* Blanks at either end would be lost to a reader that trims. */
	assert_put(false, text(" lead"), "\" lead\"");
	assert_put(false, text("trail\t"), "\"trail\t\"");
	assert_put(false, text("in side"), "in side");
}

static void
test_cellfmt_writes_numbers_as_numbers_in_both_forms(void **state)
{
	const tool_hdb_cell i = { .type = TOOL_HDB_INT, .i = INT64_MIN };
	const tool_hdb_cell d = { .type = TOOL_HDB_REAL, .d = 0.1 };
	const tool_hdb_cell big = { .type = TOOL_HDB_REAL, .d = 1e300 };

	(void)state;
	for (int json = 0; json < 2; json++) {
		assert_put(json, i, "-9223372036854775808");
		assert_put(json, d, "0.1");
		assert_put(json, big, "1e+300");
	}
}

static void
test_cellfmt_writes_null_and_non_finite_as_null_or_an_empty_field(void **state)
{
	const tool_hdb_cell null = { .type = TOOL_HDB_NULL };
	const tool_hdb_cell nan = { .type = TOOL_HDB_REAL, .d = NAN };
	const tool_hdb_cell inf = { .type = TOOL_HDB_REAL, .d = -INFINITY };

	(void)state;
	assert_put(true, null, "null");
	assert_put(false, null, "");
	assert_put(true, nan, "null");
	assert_put(false, nan, "");
	assert_put(true, inf, "null");
	assert_put(false, inf, "");
}

static void
test_cellfmt_writes_a_blob_as_lower_case_hex(void **state)
{
	const tool_hdb_cell blob = { .type = TOOL_HDB_BLOB,
		.s = "\x01\xab\x00\xff",
		.len = 4 };
	const tool_hdb_cell empty = { .type = TOOL_HDB_BLOB,
		.s = "",
		.len = 0 };

	(void)state;
	assert_put(false, blob, "01ab00ff");
	assert_put(true, blob, "\"01ab00ff\"");
	assert_put(false, empty, "");
	assert_put(true, empty, "\"\"");
}

static void
test_cellfmt_json_text_cell_is_escaped_as_a_string(void **state)
{
	(void)state;
	assert_put(true, text("a\"\\\n\xff"), "\"a\\\"\\\\\\n\\ufffd\"");
}

static void
test_cellfmt_header_quotes_names_and_ends_the_line(void **state)
{
	static const char *const names[] = { "run", "a,b", "q\"" };
	char *buf = NULL;
	size_t n = 0;
	FILE *out = open_memstream(&buf, &n);

	(void)state;
	assert_non_null(out);
	assert_int_equal(tool_cellfmt_header(out, 3, names), 0);
	assert_int_equal(tool_cellfmt_header(out, 0, names), 0);
	fclose(out);
	assert_string_equal(buf, "run,\"a,b\",\"q\"\"\"\n\n");
	free(buf);
}

static void
test_cellfmt_reports_a_failed_write_as_eio(void **state)
{
	static const char *const names[] = { "run" };
	const tool_hdb_cell i = { .type = TOOL_HDB_INT, .i = 1 };
	FILE *ro = fopen("/dev/null", "r");

	(void)state;
	assert_non_null(ro);
	assert_int_equal(tool_cellfmt_json_string(ro, "x", 1), BELLOWS_EIO);
	assert_int_equal(tool_cellfmt_put(ro, true, &i), BELLOWS_EIO);
	assert_int_equal(tool_cellfmt_header(ro, 1, names), BELLOWS_EIO);
	fclose(ro);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_cellfmt_json_escapes_quotes_and_backslashes),
		cmocka_unit_test(
		    test_cellfmt_json_escapes_every_control_character),
		cmocka_unit_test(test_cellfmt_json_keeps_utf8_as_it_is),
		cmocka_unit_test(
		    test_cellfmt_json_replaces_each_byte_that_is_not_utf8),
		cmocka_unit_test(
		    test_cellfmt_csv_quotes_a_field_only_when_it_must),
		cmocka_unit_test(
		    test_cellfmt_writes_numbers_as_numbers_in_both_forms),
		cmocka_unit_test(
		    test_cellfmt_writes_null_and_non_finite_as_null_or_an_empty_field),
		cmocka_unit_test(test_cellfmt_writes_a_blob_as_lower_case_hex),
		cmocka_unit_test(
		    test_cellfmt_json_text_cell_is_escaped_as_a_string),
		cmocka_unit_test(
		    test_cellfmt_header_quotes_names_and_ends_the_line),
		cmocka_unit_test(test_cellfmt_reports_a_failed_write_as_eio),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
