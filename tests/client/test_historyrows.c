/* test_historyrows - a history question's rows read by column name:
 * columns resolved once per query, a needed one missing failing the
 * query, and typed cells that read "not available" as one value per
 * type.
 *
 * The queries run on a real history file, made in a fresh temporary
 * directory by bellowsd's own schema code (tests/tools/hdb_fixture.h,
 * whose rows are computed by hand there): run 1 "resnet" (3 ranks,
 * ended), run 2 "bert" (live: ended_wall_ms NULL). The edge cases no
 * file holds (an infinite real) are read from cells made here.
 */
#include <math.h>
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

#include "tests/tools/hdb_fixture.h"
#include "client/historydb.h"
#include "client/historyrows.h"

typedef struct fixture {
	hdb_tmp t;           /* the database, its directory and handle */
	tool_hdb_result res; /* the last answer */
} fixture;

static int
setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));

	if (f == NULL || hdb_tmp_make(&f->t, "rows") != 0) {
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	fixture *f = *state;

	tool_hdb_result_fini(&f->res);
	hdb_tmp_done(&f->t);
	free(f);
	return 0;
}

/* Creates the fixture's database at schema `version` and opens it. */
static void
open_fixture(fixture *f, int version)
{
	assert_int_equal(hdb_tmp_open(&f->t, version), 0);
}

/* Exports table t of run `run` into f->res, read as want[0..n) with the
 * columns in `need` needed; returns what the export returned. */
static int export(fixture *f, tool_hdb_table t, int64_t run,
    const char *const *want, uint32_t n, uint64_t need)
{
	tool_hdb_sink sink;

	tool_hdb_result_fini(&f->res);
	tool_hdb_result_sink(&f->res, want, n, need, &sink);
	return tool_hdb_export(f->t.db, t, run, &sink);
}

/* The runs table as a reader of it names its columns. */
enum {
	R_ID,
	R_JOB,
	R_WORLD,
	R_ENDED,
	R_RUN_KEY,
	R_N
};
static const char *const runs_cols[R_N] = {
	[R_ID] = "id",
	[R_JOB] = "job",
	[R_WORLD] = "world",
	[R_ENDED] = "ended_wall_ms",
	[R_RUN_KEY] = "run_key",
};

/* ---- resolving --------------------------------------------------------- */

static void
test_historyrows_fails_a_query_lacking_a_needed_column_with_einval(void **state)
{
	static const char *const want[] = { "id", "no_such_column", "job" };
	fixture *f = *state;

	open_fixture(f, CTL_STORE_SCHEMA_VERSION);
	assert_int_equal(export(f, TOOL_HDB_T_RUNS, 1, want, 3,
			     TOOL_HDB_COL(0) | TOOL_HDB_COL(1)),
	    BELLOWS_EINVAL);
	/* Stopped before its first row; the columns it has still found. */
	assert_int_equal(f->res.rows.n_rows, 0);
	assert_int_equal(f->res.cols.at[1], -1);
	assert_true(f->res.cols.at[0] >= 0);
	assert_true(f->res.cols.at[2] >= 0);
	assert_null(tool_hdb_result_cell(&f->res, 0, 0));
}

static void
test_historyrows_reads_a_missing_column_it_does_not_need_as_empty(void **state)
{
	static const char *const want[] = { "id", "no_int", "no_real",
		"no_text" };
	fixture *f = *state;

	open_fixture(f, CTL_STORE_SCHEMA_VERSION);
	assert_int_equal(export(f, TOOL_HDB_T_RUNS, 1, want, 4,
			     TOOL_HDB_COL(0)),
	    0);
	assert_int_equal(f->res.rows.n_rows, 1);
	assert_int_equal(tool_hdb_int(&f->res, 0, 0, -1), 1);
	assert_null(tool_hdb_result_cell(&f->res, 0, 1));
	assert_int_equal(tool_hdb_int(&f->res, 0, 1, -7), -7);
	assert_true(isnan(tool_hdb_real(&f->res, 0, 2)));
	assert_string_equal(tool_hdb_text(&f->res, 0, 3), "");
}

static void
test_historyrows_reads_an_older_files_later_column_as_empty(void **state)
{
	fixture *f = *state;

	/* run_key came with schema version 5. */
	open_fixture(f, 4);
	assert_int_equal(export(f, TOOL_HDB_T_RUNS, 1, runs_cols, R_N,
			     TOOL_HDB_COL(R_ID) | TOOL_HDB_COL(R_JOB)),
	    0);
	assert_string_equal(tool_hdb_text(&f->res, 0, R_JOB), "resnet");
	assert_int_equal(f->res.cols.at[R_RUN_KEY], -1);
	assert_string_equal(tool_hdb_text(&f->res, 0, R_RUN_KEY), "");

	tool_hdb_close(&f->t.db);
	open_fixture(f, CTL_STORE_SCHEMA_VERSION);
	assert_int_equal(export(f, TOOL_HDB_T_RUNS, 1, runs_cols, R_N,
			     TOOL_HDB_COL(R_ID) | TOOL_HDB_COL(R_JOB)),
	    0);
	assert_string_equal(tool_hdb_text(&f->res, 0, R_RUN_KEY), "torchrun-7");
}

static void
test_historyrows_resolves_columns_by_name_in_any_order(void **state)
{
	static const char *const names[] = { "c", "a", "b", "a" };
	static const char *const want[] = { "a", "b", "z" };
	const tool_hdb_cell cells[] = {
		{ .type = TOOL_HDB_INT, .i = 30 },
		{ .type = TOOL_HDB_INT, .i = 10 },
		{ .type = TOOL_HDB_INT, .i = 20 },
		{ .type = TOOL_HDB_INT, .i = 40 },
	};
	tool_hdb_cols cols;

	(void)state;
	tool_hdb_cols_init(&cols, want, 3, TOOL_HDB_COL(0));
	assert_int_equal(cols.at[0], -1);
	assert_int_equal(tool_hdb_cols_resolve(&cols, 4, names), 0);
	/* The first of two columns of one name. */
	assert_int_equal(cols.at[0], 1);
	assert_int_equal(cols.at[1], 2);
	assert_int_equal(cols.at[2], -1);
	assert_int_equal(tool_hdb_cols_cell(&cols, cells, 0)->i, 10);
	assert_int_equal(tool_hdb_cols_cell(&cols, cells, 1)->i, 20);
	assert_null(tool_hdb_cols_cell(&cols, cells, 2));
	assert_null(tool_hdb_cols_cell(&cols, cells, 3));

	/* Needing z: refused, every other column still resolved. */
	tool_hdb_cols_init(&cols, want, 3, TOOL_HDB_COL(2));
	assert_int_equal(tool_hdb_cols_resolve(&cols, 4, names),
	    BELLOWS_EINVAL);
	assert_int_equal(cols.at[0], 1);
	assert_int_equal(cols.at[1], 2);
	assert_int_equal(cols.at[2], -1);
}

/* ---- typed cells ------------------------------------------------------- */

static void
test_historyrows_reads_a_null_cell_as_not_available_in_every_type(void **state)
{
	fixture *f = *state;

	open_fixture(f, CTL_STORE_SCHEMA_VERSION);
	/* Run 2 is live: it has not ended. */
	assert_int_equal(export(f, TOOL_HDB_T_RUNS, 2, runs_cols, R_N,
			     TOOL_HDB_COL(R_ENDED)),
	    0);
	assert_int_equal(f->res.rows.n_rows, 1);
	assert_int_equal(tool_hdb_result_cell(&f->res, 0, R_ENDED)->type,
	    TOOL_HDB_NULL);
	assert_int_equal(tool_hdb_int(&f->res, 0, R_ENDED, -3), -3);
	assert_true(isnan(tool_hdb_real(&f->res, 0, R_ENDED)));
	assert_string_equal(tool_hdb_text(&f->res, 0, R_ENDED), "");
	assert_int_equal(tool_hdb_int(&f->res, 0, R_WORLD, -1), 1);
}

static void
test_historyrows_reads_a_cell_of_another_type_as_not_available(void **state)
{
	fixture *f = *state;

	open_fixture(f, CTL_STORE_SCHEMA_VERSION);
	assert_int_equal(export(f, TOOL_HDB_T_RUNS, 1, runs_cols, R_N,
			     TOOL_HDB_COL(R_ID)),
	    0);
	/* Text read as a number, a number read as text. */
	assert_int_equal(tool_hdb_int(&f->res, 0, R_JOB, -1), -1);
	assert_true(isnan(tool_hdb_real(&f->res, 0, R_JOB)));
	assert_string_equal(tool_hdb_text(&f->res, 0, R_WORLD), "");
	/* An integer is a real too. */
	assert_true(tool_hdb_real(&f->res, 0, R_ENDED) == 1795305605000.0);
	assert_int_equal(tool_hdb_int(&f->res, 0, R_ENDED, -1),
	    1795305605000LL);
}

static void
test_historyrows_reads_a_blob_as_neither_number_nor_text(void **state)
{
	static const char *const want[] = { "seq", "levels" };
	fixture *f = *state;

	open_fixture(f, CTL_STORE_SCHEMA_VERSION);
	assert_int_equal(export(f, TOOL_HDB_T_DECISIONS, 1, want, 2,
			     TOOL_HDB_COL(0) | TOOL_HDB_COL(1)),
	    0);
	assert_int_equal(f->res.rows.n_rows, 4);
	assert_int_equal(tool_hdb_result_cell(&f->res, 0, 1)->type,
	    TOOL_HDB_BLOB);
	assert_int_equal(tool_hdb_int(&f->res, 0, 1, -1), -1);
	assert_true(isnan(tool_hdb_real(&f->res, 0, 1)));
	assert_string_equal(tool_hdb_text(&f->res, 0, 1), "");
	assert_int_equal(tool_hdb_int(&f->res, 3, 0, -1), 4);
}

static void
test_historyrows_reads_a_row_or_column_out_of_range_as_not_available(
    void **state)
{
	fixture *f = *state;

	open_fixture(f, CTL_STORE_SCHEMA_VERSION);
	assert_int_equal(export(f, TOOL_HDB_T_RUNS, 1, runs_cols, R_N,
			     TOOL_HDB_COL(R_ID)),
	    0);
	assert_int_equal(f->res.rows.n_rows, 1);
	assert_null(tool_hdb_result_cell(&f->res, 1, R_ID));
	assert_null(tool_hdb_result_cell(&f->res, UINT64_MAX, R_ID));
	assert_null(tool_hdb_result_cell(&f->res, 0, R_N));
	assert_int_equal(tool_hdb_int(&f->res, 1, R_ID, -9), -9);
	assert_true(isnan(tool_hdb_real(&f->res, 1, R_WORLD)));
	assert_string_equal(tool_hdb_text(&f->res, 1, R_JOB), "");
	assert_string_equal(tool_hdb_text(&f->res, 0, R_N + 1), "");
}

static void
test_historyrows_truncates_a_finite_real_read_as_an_integer(void **state)
{
	const tool_hdb_cell real = { .type = TOOL_HDB_REAL, .d = -2.75 };
	const tool_hdb_cell inf = { .type = TOOL_HDB_REAL, .d = INFINITY };
	const tool_hdb_cell nan = { .type = TOOL_HDB_REAL, .d = NAN };
	const tool_hdb_cell text = { .type = TOOL_HDB_TEXT,
		.s = "12",
		.len = 2 };

	(void)state;
	assert_int_equal(tool_hdb_cell_int(&real, 0), -2);
	assert_int_equal(tool_hdb_cell_int(&inf, 5), 5);
	assert_int_equal(tool_hdb_cell_int(&nan, 5), 5);
	assert_true(isinf(tool_hdb_cell_real(&inf)));
	/* Text is never parsed as a number. */
	assert_int_equal(tool_hdb_cell_int(&text, 5), 5);
	assert_true(isnan(tool_hdb_cell_real(&text)));
	assert_string_equal(tool_hdb_cell_text(&text), "12");
	assert_int_equal(tool_hdb_cell_int(NULL, 6), 6);
	assert_true(isnan(tool_hdb_cell_real(NULL)));
	assert_string_equal(tool_hdb_cell_text(NULL), "");
}

static void
test_historyrows_result_fini_frees_zeroes_and_takes_null(void **state)
{
	fixture *f = *state;

	open_fixture(f, CTL_STORE_SCHEMA_VERSION);
	assert_int_equal(export(f, TOOL_HDB_T_RUNS, TOOL_HDB_NONE, runs_cols,
			     R_N, TOOL_HDB_COL(R_ID)),
	    0);
	tool_hdb_result_fini(&f->res);
	assert_int_equal(f->res.rows.n_rows, 0);
	assert_null(f->res.rows.cells);
	assert_int_equal(f->res.cols.n, 0);
	tool_hdb_result_fini(&f->res);
	tool_hdb_result_fini(NULL);
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_historyrows_fails_a_query_lacking_a_needed_column_with_einval),
		T(test_historyrows_reads_a_missing_column_it_does_not_need_as_empty),
		T(test_historyrows_reads_an_older_files_later_column_as_empty),
		T(test_historyrows_resolves_columns_by_name_in_any_order),
		T(test_historyrows_reads_a_null_cell_as_not_available_in_every_type),
		T(test_historyrows_reads_a_cell_of_another_type_as_not_available),
		T(test_historyrows_reads_a_blob_as_neither_number_nor_text),
		T(test_historyrows_reads_a_row_or_column_out_of_range_as_not_available),
		T(test_historyrows_truncates_a_finite_real_read_as_an_integer),
		T(test_historyrows_result_fini_frees_zeroes_and_takes_null),
	};
#undef T
	return cmocka_run_group_tests(tests, NULL, NULL);
}
