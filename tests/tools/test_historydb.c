/* test_historydb - the tools' read-only view of the history database,
 * against a database made by hand from docs/history.md's schema
 * (hdb_fixture.h), with every expected answer computed by hand.
 *
 * Each test gets its own file in a fresh temporary directory. Questions
 * are asked through a sink that keeps the rows, as `bellows history`
 * asks them.
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
#include <bellows/policy.h>

#include "hdb_fixture.h"
#include "client/historydb.h"
#include "common/stat_table.h"

#include <math.h>

typedef struct fixture {
	hdb_tmp t;          /* the database, its directory and handle */
	tool_hdb_rows rows; /* the last answer */
} fixture;

static int
setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));

	if (f == NULL || hdb_tmp_make(&f->t, "hdb") != 0) {
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

	tool_hdb_rows_fini(&f->rows);
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

static tool_hdb_filter
no_filter(void)
{
	return (tool_hdb_filter){
		.run = TOOL_HDB_NONE,
		.layer = TOOL_HDB_NONE,
		.window_lo = TOOL_HDB_NONE,
		.window_hi = TOOL_HDB_NONE,
		.time_lo = TOOL_HDB_NONE,
		.time_hi = TOOL_HDB_NONE,
	};
}

static void
ask(fixture *f, tool_hdb_question q, const tool_hdb_filter *flt)
{
	tool_hdb_sink sink;

	tool_hdb_rows_fini(&f->rows);
	tool_hdb_rows_sink(&f->rows, &sink);
	assert_int_equal(tool_hdb_query(f->t.db, q, flt, &sink), 0);
}

static uint32_t
col(const fixture *f, const char *name)
{
	for (uint32_t c = 0; c < f->rows.n_cols; c++) {
		if (strcmp(f->rows.names[c], name) == 0)
			return c;
	}
	fail_msg("no column '%s'", name);
	return 0;
}

static const tool_hdb_cell *
cell(const fixture *f, uint64_t row, const char *name)
{
	assert_true(row < f->rows.n_rows);
	return tool_hdb_rows_cell(&f->rows, row, col(f, name));
}

static int64_t
int_at(const fixture *f, uint64_t row, const char *name)
{
	const tool_hdb_cell *c = cell(f, row, name);

	assert_int_equal(c->type, TOOL_HDB_INT);
	return c->i;
}

static double
real_at(const fixture *f, uint64_t row, const char *name)
{
	const tool_hdb_cell *c = cell(f, row, name);

	if (c->type == TOOL_HDB_INT)
		return (double)c->i;
	assert_int_equal(c->type, TOOL_HDB_REAL);
	return c->d;
}

static const char *
text_at(const fixture *f, uint64_t row, const char *name)
{
	const tool_hdb_cell *c = cell(f, row, name);

	assert_int_equal(c->type, TOOL_HDB_TEXT);
	return c->s;
}

/* ---- opening ----------------------------------------------------------- */

static void
test_historydb_refuses_a_missing_file(void **state)
{
	fixture *f = *state;

	assert_int_equal(tool_hdb_open(f->t.path, &f->t.db, f->t.err,
			     sizeof(f->t.err)),
	    BELLOWS_ENOTFOUND);
	assert_null(f->t.db);
	assert_non_null(strstr(f->t.err, "No such file"));
	/* Read-only: opening did not create it. */
	assert_int_not_equal(access(f->t.path, F_OK), 0);
}

static void
test_historydb_refuses_a_newer_schema_with_a_clear_message(void **state)
{
	fixture *f = *state;
	char want[300];

	assert_int_equal(fixture_db_create(f->t.path, TOOL_HDB_SCHEMA_MAX + 1,
			     1),
	    SQLITE_OK);
	assert_int_equal(tool_hdb_open(f->t.path, &f->t.db, f->t.err,
			     sizeof(f->t.err)),
	    BELLOWS_EVERSION);
	assert_null(f->t.db);
	snprintf(want, sizeof(want),
	    "%s has schema version %d; this bellows reads up to %d (use a "
	    "newer bellows)",
	    f->t.path, TOOL_HDB_SCHEMA_MAX + 1, TOOL_HDB_SCHEMA_MAX);
	assert_string_equal(f->t.err, want);
}

static void
test_historydb_refuses_a_database_that_is_no_history(void **state)
{
	fixture *f = *state;
	sqlite3 *db;
	FILE *fp;

	assert_int_equal(sqlite3_open(f->t.path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "CREATE TABLE t (x)", NULL, NULL,
			     NULL),
	    SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(tool_hdb_open(f->t.path, &f->t.db, f->t.err,
			     sizeof(f->t.err)),
	    BELLOWS_EVERSION);
	assert_non_null(strstr(f->t.err, "is not a bellows history database"));

	fp = fopen(f->t.path, "w");
	assert_non_null(fp);
	fputs("window,layer\n0,a\nthis is a CSV file, not SQLite\n", fp);
	fclose(fp);
	assert_int_equal(tool_hdb_open(f->t.path, &f->t.db, f->t.err,
			     sizeof(f->t.err)),
	    BELLOWS_EIO);
	assert_non_null(strstr(f->t.err, "not a readable SQLite database"));
}

static void
test_historydb_reads_a_version_1_schema(void **state)
{
	fixture *f = *state;
	tool_hdb_filter flt = no_filter();

	open_fixture(f, 1);
	assert_int_equal(tool_hdb_schema_version(f->t.db), 1);
	ask(f, TOOL_HDB_Q_RUNS, &flt);
	assert_int_equal(f->rows.n_rows, 2);
	for (tool_hdb_table t = 0; t < TOOL_HDB_T_N; t++) {
		tool_hdb_rows rows = { 0 };
		tool_hdb_sink sink;

		tool_hdb_rows_sink(&rows, &sink);
		assert_int_equal(tool_hdb_export(f->t.db, t, 1, &sink), 0);
		tool_hdb_rows_fini(&rows);
	}
}

static void
test_historydb_opens_a_name_with_uri_characters(void **state)
{
	fixture *f = *state;
	char odd[160];

	snprintf(odd, sizeof(odd), "%s/a?b#c%%20 d.db", f->t.dir);
	assert_int_equal(fixture_db_create(odd, 2, 1), SQLITE_OK);
	assert_int_equal(tool_hdb_open(odd, &f->t.db, f->t.err,
			     sizeof(f->t.err)),
	    0);
	tool_hdb_close(&f->t.db);
	remove(odd);
	snprintf(odd, sizeof(odd), "%s/a?b#c%%20 d.db-wal", f->t.dir);
	remove(odd);
	snprintf(odd, sizeof(odd), "%s/a?b#c%%20 d.db-shm", f->t.dir);
	remove(odd);
}

static void
test_historydb_reads_past_a_writers_open_transaction(void **state)
{
	fixture *f = *state;
	tool_hdb_run run = { 0 };
	sqlite3 *w;

	assert_int_equal(fixture_db_create(f->t.path, 2, 1), SQLITE_OK);
	/* bellowsd's place: a writer in WAL mode in the middle of a batch. */
	assert_int_equal(sqlite3_open(f->t.path, &w), SQLITE_OK);
	assert_int_equal(sqlite3_exec(w,
			     "BEGIN IMMEDIATE;"
			     "INSERT INTO runs (id, job, world, n_layers,"
			     " started_wall_ms, instance, config_hash,"
			     " first_seq) VALUES (3, 'gpt', 8, 1,"
			     " 1795305620000, 'x', 'a', 1);",
			     NULL, NULL, NULL),
	    SQLITE_OK);
	assert_int_equal(tool_hdb_open(f->t.path, &f->t.db, f->t.err,
			     sizeof(f->t.err)),
	    0);
	assert_int_equal(tool_hdb_begin(f->t.db), 0);
	assert_int_equal(tool_hdb_run_find(f->t.db, TOOL_HDB_NONE, NULL, &run),
	    0);
	assert_int_equal(run.id, 2); /* not the uncommitted run 3 */
	tool_hdb_run_fini(&run);
	/* The snapshot holds while the writer commits. */
	assert_int_equal(sqlite3_exec(w, "COMMIT", NULL, NULL, NULL),
	    SQLITE_OK);
	assert_int_equal(tool_hdb_run_find(f->t.db, TOOL_HDB_NONE, NULL, &run),
	    0);
	assert_int_equal(run.id, 2);
	tool_hdb_run_fini(&run);
	assert_int_equal(tool_hdb_end(f->t.db), 0);
	assert_int_equal(tool_hdb_run_find(f->t.db, TOOL_HDB_NONE, NULL, &run),
	    0);
	assert_int_equal(run.id, 3);
	assert_string_equal(run.job, "gpt");
	tool_hdb_run_fini(&run);
	sqlite3_close(w);
}

/* ---- runs and layers --------------------------------------------------- */

static void
test_historydb_finds_the_latest_run_of_a_job(void **state)
{
	fixture *f = *state;
	tool_hdb_run run = { 0 };

	open_fixture(f, 2);
	assert_int_equal(tool_hdb_run_find(f->t.db, TOOL_HDB_NONE, NULL, &run),
	    0);
	assert_int_equal(run.id, 2);
	assert_true(run.live);
	tool_hdb_run_fini(&run);
	assert_int_equal(tool_hdb_run_find(f->t.db, TOOL_HDB_NONE, "resnet",
			     &run),
	    0);
	assert_int_equal(run.id, 1);
	assert_string_equal(run.job, "resnet");
	assert_int_equal(run.world, 3);
	assert_int_equal(run.n_layers, 2);
	assert_int_equal(run.started_wall_ms, FIXTURE_START);
	assert_false(run.live);
	tool_hdb_run_fini(&run);
	assert_int_equal(tool_hdb_run_find(f->t.db, 9, NULL, &run),
	    BELLOWS_ENOTFOUND);
	assert_string_equal(tool_hdb_error(f->t.db), "there is no run 9");
	assert_int_equal(tool_hdb_run_find(f->t.db, 1, "bert", &run),
	    BELLOWS_ENOTFOUND);
	assert_int_equal(tool_hdb_run_find(f->t.db, TOOL_HDB_NONE,
			     "resnet' OR '1'='1", &run),
	    BELLOWS_ENOTFOUND);
	assert_string_equal(tool_hdb_error(f->t.db),
	    "job 'resnet' OR '1'='1' has no run");
	assert_null(run.job);
}

static void
test_historydb_binds_layer_names_rather_than_pasting_them(void **state)
{
	fixture *f = *state;
	int64_t idx = -5;

	open_fixture(f, 2);
	assert_int_equal(tool_hdb_layer_find(f->t.db, 1, "fc.bias", &idx), 0);
	assert_int_equal(idx, 1);
	idx = -5;
	assert_int_equal(tool_hdb_layer_find(f->t.db, 1, "x' OR name LIKE '%",
			     &idx),
	    BELLOWS_ENOTFOUND);
	assert_int_equal(idx, -5);
	assert_string_equal(tool_hdb_error(f->t.db),
	    "run 1 has no layer 'x' OR name LIKE '%'");
	assert_int_equal(tool_hdb_layer_find(f->t.db, 2, "fc.bias", &idx),
	    BELLOWS_ENOTFOUND);
}

static void
test_historydb_lists_runs_with_their_windows_and_savings(void **state)
{
	fixture *f = *state;
	tool_hdb_filter flt = no_filter();

	open_fixture(f, 2);
	ask(f, TOOL_HDB_Q_RUNS, &flt);
	assert_int_equal(f->rows.n_rows, 2);
	assert_int_equal(int_at(f, 0, "id"), 1);
	assert_string_equal(text_at(f, 0, "job"), "resnet");
	assert_string_equal(text_at(f, 0, "started"),
	    "2026-11-22T00:00:00.000Z");
	assert_string_equal(text_at(f, 0, "ended"), "2026-11-22T00:00:05.000Z");
	assert_string_equal(text_at(f, 0, "state"), "ended");
	assert_int_equal(int_at(f, 0, "windows"), 4);
	assert_int_equal(int_at(f, 0, "decisions"), 4);
	/* 4 windows x (1000 - 100) floats x 4 bytes */
	assert_int_equal(int_at(f, 0, "bytes_saved"), 14400);
	assert_int_equal(cell(f, 1, "ended")->type, TOOL_HDB_NULL);
	assert_string_equal(text_at(f, 1, "state"), "live");
	assert_int_equal(int_at(f, 1, "bytes_saved"), 0);
	/* Before version 5 no run has a launch identity or a resume. */
	assert_string_equal(text_at(f, 0, "launch"), "");
	assert_int_equal(int_at(f, 0, "resumes"), 0);

	/* Runs live at some time in the span: run 2 started at +10 s. */
	flt.time_lo = FIXTURE_START + 6000;
	ask(f, TOOL_HDB_Q_RUNS, &flt);
	assert_int_equal(f->rows.n_rows, 1);
	assert_int_equal(int_at(f, 0, "id"), 2);
	flt = no_filter();
	flt.job = "resnet";
	ask(f, TOOL_HDB_Q_RUNS, &flt);
	assert_int_equal(f->rows.n_rows, 1);
	assert_int_equal(int_at(f, 0, "id"), 1);
}

static void
test_historydb_lists_a_runs_launch_and_resumes(void **state)
{
	fixture *f = *state;
	tool_hdb_filter flt = no_filter();

	open_fixture(f, 5);
	ask(f, TOOL_HDB_Q_RUNS, &flt);
	assert_int_equal(f->rows.n_rows, 2);
	assert_string_equal(text_at(f, 0, "launch"), "torchrun-7");
	assert_int_equal(int_at(f, 0, "resumes"), 2);
	assert_string_equal(text_at(f, 1, "launch"), "");
	assert_int_equal(int_at(f, 1, "resumes"), 0);
}

static void
test_historydb_summarises_each_layers_levels(void **state)
{
	fixture *f = *state;
	tool_hdb_filter flt = no_filter();

	open_fixture(f, 2);
	flt.run = 1;
	ask(f, TOOL_HDB_Q_LAYERS, &flt);
	assert_int_equal(f->rows.n_rows, 2);
	assert_string_equal(text_at(f, 0, "name"), "conv.weight");
	assert_string_equal(text_at(f, 0, "shape"), "64x3x3x3");
	assert_int_equal(int_at(f, 0, "numel"), 1728);
	assert_int_equal(int_at(f, 0, "windows"), 4);
	/* A version 2 file has no applied level: the decided one. */
	assert_true(real_at(f, 0, "applied_min") == 1);
	assert_true(real_at(f, 0, "applied_max") == 2);
	assert_true(real_at(f, 0, "applied_last") == 1);
	assert_string_equal(text_at(f, 0, "windows_at_applied"), "1:2 2:2");
	assert_true(real_at(f, 0, "decided_max") == 2);
	assert_true(real_at(f, 0, "decided_last") == 1);
	assert_int_equal(int_at(f, 0, "decided_changes"), 1);
	assert_int_equal(int_at(f, 1, "windows"), 3); /* window 2 lacks it */
	assert_string_equal(text_at(f, 1, "windows_at_applied"), "0:3");
	assert_int_equal(int_at(f, 1, "decided_changes"), 0);
	ask(f, TOOL_HDB_Q_APPLIED_MISSING, &flt);
	assert_int_equal(int_at(f, 0, "rows"), 7);
	assert_int_equal(int_at(f, 0, "missing"), 7);

	/* Windows 0 and 1 only: level 2 throughout, no change. */
	flt.window_hi = 1;
	ask(f, TOOL_HDB_Q_LAYERS, &flt);
	assert_true(real_at(f, 0, "applied_min") == 2);
	assert_string_equal(text_at(f, 0, "windows_at_applied"), "2:2");
	assert_int_equal(int_at(f, 0, "decided_changes"), 0);
}

/* conv.weight was decided 2, 2, 1, 1 and sent at 2, 2, 1 and then raw
 * (level_applied 0, e.g. under a size threshold) in window 3; fc.bias
 * (decided 0) has no applied level in window 0: a row of an agent
 * older than it, shown at the decided level and counted. */
static void
test_historydb_shows_the_applied_level_beside_the_decided_one(void **state)
{
	fixture *f = *state;
	tool_hdb_filter flt = no_filter();
	sqlite3 *db = NULL;

	assert_int_equal(fixture_db_create(f->t.path, CTL_STORE_SCHEMA_VERSION,
			     1),
	    SQLITE_OK);
	assert_int_equal(sqlite3_open(f->t.path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db,
			     "UPDATE windows SET level_applied = level;"
			     "UPDATE windows SET level_applied = 0"
			     " WHERE window = 3 AND layer = 0;"
			     "UPDATE windows SET level_applied = NULL"
			     " WHERE window = 0 AND layer = 1;",
			     NULL, NULL, NULL),
	    SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(tool_hdb_open(f->t.path, &f->t.db, f->t.err,
			     sizeof(f->t.err)),
	    0);
	flt.run = 1;
	ask(f, TOOL_HDB_Q_LAYERS, &flt);
	assert_true(real_at(f, 0, "applied_min") == 0);
	assert_true(real_at(f, 0, "applied_max") == 2);
	assert_true(real_at(f, 0, "applied_last") == 0);
	assert_string_equal(text_at(f, 0, "windows_at_applied"), "0:1 1:1 2:2");
	assert_true(real_at(f, 0, "decided_max") == 2);
	assert_true(real_at(f, 0, "decided_last") == 1);
	assert_int_equal(int_at(f, 0, "decided_changes"), 1);
	assert_string_equal(text_at(f, 1, "windows_at_applied"), "0:3");

	/* Per window: layers compressed as applied and as decided. */
	ask(f, TOOL_HDB_Q_WINDOWS, &flt);
	assert_int_equal(f->rows.n_rows, 4);
	assert_int_equal(int_at(f, 0, "compressed_applied"), 1);
	assert_int_equal(int_at(f, 0, "compressed_decided"), 1);
	assert_int_equal(int_at(f, 3, "compressed_applied"), 0);
	assert_int_equal(int_at(f, 3, "compressed_decided"), 1);

	/* One layer per window. */
	flt.layer = 0;
	ask(f, TOOL_HDB_Q_LAYER_WINDOWS, &flt);
	assert_true(real_at(f, 2, "level_applied") == 1);
	assert_true(real_at(f, 3, "level_applied") == 0);
	assert_true(real_at(f, 3, "level_decided") == 1);

	/* The row without one, counted for the tools' note. */
	ask(f, TOOL_HDB_Q_APPLIED_MISSING, &flt);
	assert_int_equal(int_at(f, 0, "rows"), 4);
	assert_int_equal(int_at(f, 0, "missing"), 0);
	flt.layer = TOOL_HDB_NONE;
	ask(f, TOOL_HDB_Q_APPLIED_MISSING, &flt);
	assert_int_equal(int_at(f, 0, "rows"), 7);
	assert_int_equal(int_at(f, 0, "missing"), 1);
}

static void
test_historydb_answers_tops_questions_from_the_windows_asked_only(void **state)
{
	fixture *f = *state;
	tool_hdb_filter flt = no_filter();

	open_fixture(f, 2);
	/* Windows 2..3: conv.weight twice, bias once (it lacks window 2),
	 * by layer then window. */
	flt.run = 1;
	flt.window_lo = 2;
	flt.window_hi = 3;
	ask(f, TOOL_HDB_Q_LAYERS_RECENT, &flt);
	assert_int_equal(f->rows.n_rows, 3);
	assert_int_equal(int_at(f, 0, "layer"), 0);
	assert_string_equal(text_at(f, 0, "name"), "conv.weight");
	assert_int_equal(int_at(f, 0, "numel"), 1728);
	assert_int_equal(int_at(f, 0, "window"), 2);
	assert_true(real_at(f, 0, "norm_mean") == 3.5);
	assert_true(real_at(f, 0, "level") == 1);
	/* Not recorded in a version 2 file. */
	assert_int_equal(cell(f, 0, "level_applied")->type, TOOL_HDB_NULL);
	assert_int_equal(int_at(f, 1, "window"), 3);
	assert_int_equal(int_at(f, 2, "layer"), 1);
	assert_int_equal(int_at(f, 2, "window"), 3);

	/* Window 2 only: the bias is still listed, without a window. */
	flt.window_hi = 2;
	ask(f, TOOL_HDB_Q_LAYERS_RECENT, &flt);
	assert_int_equal(f->rows.n_rows, 2);
	assert_int_equal(int_at(f, 1, "layer"), 1);
	assert_int_equal(cell(f, 1, "window")->type, TOOL_HDB_NULL);
	assert_int_equal(cell(f, 1, "level")->type, TOOL_HDB_NULL);

	/* Highest levels: 2 in windows 0..1, 1 after. */
	flt.window_lo = 0;
	flt.window_hi = 1;
	ask(f, TOOL_HDB_Q_LAYER_LEVELS, &flt);
	assert_int_equal(f->rows.n_rows, 2);
	assert_true(real_at(f, 0, "level_max") == 2);
	assert_int_equal(int_at(f, 0, "window"), 1);
	flt.window_lo = 2;
	flt.window_hi = TOOL_HDB_NONE;
	ask(f, TOOL_HDB_Q_LAYER_LEVELS, &flt);
	assert_true(real_at(f, 0, "level_max") == 1);
	assert_int_equal(int_at(f, 0, "window"), 3);

	/* The newest decisions, oldest first. */
	flt = no_filter();
	flt.run = 1;
	ask(f, TOOL_HDB_Q_DECISIONS_LAST, &flt);
	assert_int_equal(f->rows.n_rows, 4);
	assert_int_equal(int_at(f, 0, "seq"), 1);
	assert_int_equal(int_at(f, 3, "seq"), 4);
	assert_string_equal(text_at(f, 2, "reason"),
	    "window 1: conv.weight stable, r=0.01");
	/* With how many knobs each changed. */
	assert_int_equal(int_at(f, 0, "n_changes"), 1);
	assert_int_equal(int_at(f, 1, "n_changes"), 0);
	assert_int_equal(int_at(f, 2, "n_changes"), 2);
	assert_int_equal(int_at(f, 3, "n_changes"), 0);

	/* Only those that changed something: seq 1 and 3. */
	ask(f, TOOL_HDB_Q_DECISIONS_CHANGED_LAST, &flt);
	assert_int_equal(f->rows.n_rows, 2);
	assert_int_equal(int_at(f, 0, "seq"), 1);
	assert_int_equal(int_at(f, 1, "seq"), 3);
	assert_int_equal(int_at(f, 1, "n_changes"), 2);
	flt.window_hi = 1;
	ask(f, TOOL_HDB_Q_DECISIONS_CHANGED_LAST, &flt);
	assert_int_equal(f->rows.n_rows, 1);
	flt.window_hi = TOOL_HDB_NONE;

	/* 70 more: only the newest TOOL_HDB_DECISIONS_LAST, in order. */
	{
		sqlite3 *w;

		assert_int_equal(sqlite3_open(f->t.path, &w), SQLITE_OK);
		assert_int_equal(sqlite3_exec(w,
				     "CREATE TEMP TABLE t AS SELECT * FROM"
				     " decisions WHERE seq = 4",
				     NULL, NULL, NULL),
		    SQLITE_OK);
		for (int i = 0; i < 70; i++)
			assert_int_equal(sqlite3_exec(w,
					     "UPDATE t SET seq = seq + 1;"
					     "INSERT INTO decisions"
					     " SELECT * FROM t",
					     NULL, NULL, NULL),
			    SQLITE_OK);
		sqlite3_close(w);
	}
	ask(f, TOOL_HDB_Q_DECISIONS_LAST, &flt);
	assert_int_equal(f->rows.n_rows, TOOL_HDB_DECISIONS_LAST);
	assert_int_equal(int_at(f, 0, "seq"), 74 - TOOL_HDB_DECISIONS_LAST + 1);
	assert_int_equal(int_at(f, TOOL_HDB_DECISIONS_LAST - 1, "seq"), 74);
	/* None of the 70 changed anything: the changed ones are still
	 * the two of the run. */
	ask(f, TOOL_HDB_Q_DECISIONS_CHANGED_LAST, &flt);
	assert_int_equal(f->rows.n_rows, 2);
	assert_int_equal(int_at(f, 1, "seq"), 3);

	/* The ranks: the last window each reported and its last step, and
	 * the last rank event (rank 1 lost at step 15 at 3.5 s). */
	ask(f, TOOL_HDB_Q_RANK_STATES, &flt);
	assert_int_equal(f->rows.n_rows, 3);
	assert_int_equal(int_at(f, 0, "last_window"), 3);
	assert_int_equal(int_at(f, 0, "window_step"), 19);
	assert_string_equal(text_at(f, 0, "last_event"), "joined");
	assert_int_equal(int_at(f, 1, "last_window"), 2);
	assert_int_equal(int_at(f, 1, "window_step"), 14);
	assert_string_equal(text_at(f, 1, "last_event"), "lost");
	assert_int_equal(int_at(f, 1, "event_step"), 15);
	/* As of window 1 and the time it closed (2 s): before the loss. */
	flt.window_hi = 1;
	flt.time_hi = FIXTURE_START + 2000;
	ask(f, TOOL_HDB_Q_RANK_STATES, &flt);
	assert_int_equal(int_at(f, 1, "last_window"), 1);
	assert_int_equal(int_at(f, 1, "window_step"), 9);
	assert_string_equal(text_at(f, 1, "last_event"), "joined");
}

/* ---- windows, decisions, events, timings ------------------------------- */

static void
test_historydb_lists_windows_in_the_range_asked(void **state)
{
	fixture *f = *state;
	tool_hdb_filter flt = no_filter();

	open_fixture(f, 2);
	flt.run = 1;
	flt.window_lo = 1;
	flt.window_hi = 2;
	ask(f, TOOL_HDB_Q_WINDOWS, &flt);
	assert_int_equal(f->rows.n_rows, 2);
	assert_int_equal(int_at(f, 0, "window"), 1);
	assert_int_equal(int_at(f, 1, "window"), 2);
	assert_true(real_at(f, 1, "lr_next") == 0.01);
	assert_int_equal(int_at(f, 1, "bytes_saved"), 3600);
	assert_true(real_at(f, 1, "sent_pct") == 10);
	assert_string_equal(text_at(f, 1, "closed"),
	    "2026-11-22T00:00:03.000Z");

	/* One layer: rank 0's norm is NULL in window 1. */
	flt = no_filter();
	flt.run = 1;
	flt.layer = 0;
	ask(f, TOOL_HDB_Q_LAYER_WINDOWS, &flt);
	assert_int_equal(f->rows.n_rows, 4);
	assert_string_equal(text_at(f, 0, "layer"), "conv.weight");
	assert_true(real_at(f, 0, "norm_rank0") == 10);
	assert_int_equal(cell(f, 1, "norm_rank0")->type, TOOL_HDB_NULL);
	assert_true(real_at(f, 1, "norm_mean") == 4);
	assert_true(real_at(f, 2, "level_applied") == 1);
	assert_true(real_at(f, 2, "level_decided") == 1);
}

/* The windows list says which windows were recorded late (schema 7,
 * window_info.late); a file older than the flag lists every window as
 * not late. */
static void
test_historydb_lists_which_windows_were_recorded_late(void **state)
{
	fixture *f = *state;
	tool_hdb_filter flt = no_filter();
	sqlite3 *db = NULL;

	assert_int_equal(fixture_db_create(f->t.path, CTL_STORE_SCHEMA_VERSION,
			     1),
	    SQLITE_OK);
	assert_int_equal(sqlite3_open(f->t.path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db,
			     "UPDATE window_info SET late = 1"
			     " WHERE run_id = 1 AND window IN (1, 2)",
			     NULL, NULL, NULL),
	    SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(tool_hdb_open(f->t.path, &f->t.db, f->t.err,
			     sizeof(f->t.err)),
	    0);
	flt.run = 1;
	ask(f, TOOL_HDB_Q_WINDOWS, &flt);
	assert_int_equal(f->rows.n_rows, 4);
	for (uint64_t r = 0; r < 4; r++)
		assert_int_equal(int_at(f, r, "late"), r == 1 || r == 2);
	tool_hdb_close(&f->t.db);

	open_fixture(f, 6);
	ask(f, TOOL_HDB_Q_WINDOWS, &flt);
	assert_int_equal(f->rows.n_rows, 4);
	for (uint64_t r = 0; r < 4; r++)
		assert_int_equal(int_at(f, r, "late"), 0);
}

static void
test_historydb_finds_windows_by_the_time_they_closed(void **state)
{
	fixture *f = *state;
	int64_t w = -5;

	open_fixture(f, 2);
	assert_int_equal(tool_hdb_window_at(f->t.db, 1, FIXTURE_START + 1500,
			     true, &w),
	    0);
	assert_int_equal(w, 1);
	assert_int_equal(tool_hdb_window_at(f->t.db, 1, FIXTURE_START + 1500,
			     false, &w),
	    0);
	assert_int_equal(w, 0);
	assert_int_equal(tool_hdb_window_at(f->t.db, 1, FIXTURE_START + 2000,
			     true, &w),
	    0);
	assert_int_equal(w, 1); /* inclusive */
	assert_int_equal(tool_hdb_window_at(f->t.db, 1, FIXTURE_START + 9000,
			     true, &w),
	    0);
	assert_int_equal(w, TOOL_HDB_NONE);

	/* And back: when a window closed. */
	assert_int_equal(tool_hdb_window_closed(f->t.db, 1, 1, &w), 0);
	assert_int_equal(w, FIXTURE_START + 2000);
	assert_int_equal(tool_hdb_window_closed(f->t.db, 1, 4, &w), 0);
	assert_int_equal(w, TOOL_HDB_NONE);
}

static void
test_historydb_lists_decisions_with_changes_by_layer_name(void **state)
{
	fixture *f = *state;
	tool_hdb_filter flt = no_filter();

	open_fixture(f, 2);
	flt.run = 1;
	ask(f, TOOL_HDB_Q_DECISIONS, &flt);
	assert_int_equal(f->rows.n_rows, 4);
	assert_int_equal(int_at(f, 0, "seq"), 1);
	assert_string_equal(text_at(f, 0, "changes"), "conv.weight level -> 2");
	assert_int_equal(int_at(f, 1, "n_changes"), 0);
	assert_int_equal(cell(f, 1, "changes")->type, TOOL_HDB_NULL);
	assert_string_equal(text_at(f, 2, "reason"),
	    "window 1: conv.weight stable, r=0.01");
	assert_int_equal(int_at(f, 2, "n_changes"), 2);
	assert_string_equal(text_at(f, 2, "changes"),
	    "conv.weight level 2 -> 1; codec_table 0 -> 2");
	assert_string_equal(text_at(f, 2, "time"), "2026-11-22T00:00:02.000Z");

	flt.changed_only = true;
	ask(f, TOOL_HDB_Q_DECISIONS, &flt);
	assert_int_equal(f->rows.n_rows, 2);
	assert_int_equal(int_at(f, 1, "seq"), 3);

	/* A layer: the decisions that changed it, and only its changes. */
	flt = no_filter();
	flt.run = 1;
	flt.layer = 0;
	flt.window_lo = 1;
	ask(f, TOOL_HDB_Q_DECISIONS, &flt);
	assert_int_equal(f->rows.n_rows, 1);
	assert_int_equal(int_at(f, 0, "seq"), 3);
	assert_string_equal(text_at(f, 0, "changes"),
	    "conv.weight level 2 -> 1");

	/* By the time decided. */
	flt = no_filter();
	flt.run = 1;
	flt.time_lo = FIXTURE_START + 1000;
	flt.time_hi = FIXTURE_START + 2000;
	ask(f, TOOL_HDB_Q_DECISIONS, &flt);
	assert_int_equal(f->rows.n_rows, 2);
	assert_int_equal(int_at(f, 0, "seq"), 2);
}

static void
test_historydb_lists_a_runs_events_and_the_daemons_then(void **state)
{
	fixture *f = *state;
	tool_hdb_filter flt = no_filter();

	open_fixture(f, 2);
	ask(f, TOOL_HDB_Q_EVENTS, &flt);
	assert_int_equal(f->rows.n_rows, 4);
	assert_string_equal(text_at(f, 3, "text"),
	    "rank 0 \"joined\",\nat step 0");

	/* Run 1: the reload while it ran, its rank loss; not the start
	 * before it nor run 2's event. */
	flt.run = 1;
	ask(f, TOOL_HDB_Q_EVENTS, &flt);
	assert_int_equal(f->rows.n_rows, 2);
	assert_string_equal(text_at(f, 0, "kind"), "reload_ok");
	assert_int_equal(cell(f, 0, "job")->type, TOOL_HDB_NULL);
	assert_string_equal(text_at(f, 1, "kind"), "rank_lost");

	flt = no_filter();
	flt.job = "bert";
	ask(f, TOOL_HDB_Q_EVENTS, &flt);
	assert_int_equal(f->rows.n_rows, 1);
	flt = no_filter();
	flt.time_hi = FIXTURE_START;
	ask(f, TOOL_HDB_Q_EVENTS, &flt);
	assert_int_equal(f->rows.n_rows, 1);
	assert_string_equal(text_at(f, 0, "kind"), "daemon_started");
}

static void
test_historydb_puts_slow_ranks_first_against_the_median(void **state)
{
	fixture *f = *state;
	tool_hdb_filter flt = no_filter();

	open_fixture(f, 2);
	flt.run = 1;
	ask(f, TOOL_HDB_Q_TIMINGS, &flt);
	assert_int_equal(f->rows.n_rows, 3);
	/* Means 30, 12, 10 ms; the median rank's is 12. */
	assert_int_equal(int_at(f, 0, "rank"), 2);
	assert_true(real_at(f, 0, "step_ms_mean") == 30);
	assert_true(real_at(f, 0, "step_ms_max") == 45);
	assert_true(real_at(f, 0, "vs_median") == 2.5);
	assert_int_equal(int_at(f, 0, "decision_misses"), 1);
	assert_int_equal(int_at(f, 0, "reports_dropped"), 3);
	assert_int_equal(int_at(f, 1, "rank"), 1);
	assert_true(real_at(f, 1, "vs_median") == 1);
	assert_int_equal(int_at(f, 1, "windows"), 3);
	assert_int_equal(int_at(f, 1, "windows_missed"), 1);
	assert_int_equal(int_at(f, 2, "rank"), 0);
	assert_true(real_at(f, 2, "vs_median") == 0.833);

	/* Per window: against the window's recorded median (12, then 20). */
	flt.window_lo = 3;
	ask(f, TOOL_HDB_Q_TIMINGS_ALL, &flt);
	assert_int_equal(f->rows.n_rows, 2);
	assert_int_equal(int_at(f, 1, "rank"), 2);
	assert_true(real_at(f, 1, "vs_median") == 1.5);
}

/* ---- export and replay ------------------------------------------------- */

static void
test_historydb_exports_a_runs_rows_with_blobs_as_they_are(void **state)
{
	fixture *f = *state;
	static const int64_t want[TOOL_HDB_T_N] = {
		[TOOL_HDB_T_RUNS] = 1,
		[TOOL_HDB_T_LAYERS] = 2,
		[TOOL_HDB_T_RANK_EVENTS] = 4,
		[TOOL_HDB_T_WINDOW_INFO] = 4,
		[TOOL_HDB_T_WINDOWS] = 7,
		[TOOL_HDB_T_TIMINGS] = 11,
		[TOOL_HDB_T_COMM_SAMPLES] = 3,
		[TOOL_HDB_T_POLICY_METRICS] = 3,
		[TOOL_HDB_T_DECISIONS] = 4,
		[TOOL_HDB_T_DECISION_CHANGES] = 3,
		[TOOL_HDB_T_EVENTS] = 2,
		[TOOL_HDB_T_POLICY_FILES] = 2,
	};
	tool_hdb_sink sink;

	open_fixture(f, 3);
	for (tool_hdb_table t = 0; t < TOOL_HDB_T_N; t++) {
		tool_hdb_rows_fini(&f->rows);
		tool_hdb_rows_sink(&f->rows, &sink);
		assert_int_equal(tool_hdb_export(f->t.db, t, 1, &sink), 0);
		assert_int_equal(f->rows.n_rows, want[t]);
	}
	/* policy_files: the run's configuration and the reload's. */
	assert_string_equal(text_at(f, 0, "hash"), "a");
	assert_string_equal(text_at(f, 1, "hash"), "b");

	tool_hdb_rows_fini(&f->rows);
	tool_hdb_rows_sink(&f->rows, &sink);
	assert_int_equal(tool_hdb_export(f->t.db, TOOL_HDB_T_DECISIONS, 1,
			     &sink),
	    0);
	assert_string_equal(tool_hdb_table_name(TOOL_HDB_T_DECISIONS),
	    "decisions");
	assert_int_equal(cell(f, 0, "levels")->type, TOOL_HDB_BLOB);
	assert_int_equal(cell(f, 0, "levels")->len, 16);
	assert_memory_equal(cell(f, 2, "codec_table")->s, "\x01\x02", 2);
	assert_int_equal(cell(f, 0, "codec_table")->type, TOOL_HDB_NULL);
	tool_hdb_rows_fini(&f->rows);
	tool_hdb_rows_sink(&f->rows, &sink);
	assert_int_equal(tool_hdb_export(f->t.db, TOOL_HDB_T_RUNS, 1, &sink),
	    0);
	assert_int_equal(int_at(f, 0, "recoveries"), 0);
}

static void
test_historydb_loads_a_replay_skipping_incomplete_windows(void **state)
{
	fixture *f = *state;
	tool_hdb_replay *rp = NULL;

	open_fixture(f, 2);
	assert_int_equal(tool_hdb_replay_load(f->t.db, 1, &rp), 0);
	assert_int_equal(rp->n_layers, 2);
	assert_string_equal(rp->layers[0].name, "conv.weight");
	assert_int_equal(rp->layers[0].ndim, 4);
	assert_int_equal(rp->layers[0].shape[1], 3);
	assert_int_equal(rp->layers[0].numel, 1728);
	assert_int_equal(rp->layers[1].ndim, 1);
	assert_int_equal(rp->n_windows, 3);
	assert_int_equal(rp->n_skipped, 1);
	assert_int_equal(rp->window[0], 0);
	assert_int_equal(rp->window[1], 1);
	assert_int_equal(rp->window[2], 3);
	assert_true(rp->lr[2] == 0.01);
	assert_true(rp->lr_next[2] == 0.01);
	assert_true(rp->norm_rank0[0] == 10);
	assert_true(rp->norm_mean[0] == 11);
	assert_true(isnan(rp->norm_rank0[2])); /* window 1, layer 0 */
	assert_true(rp->norm_mean[2] == 4);
	assert_true(rp->level[0] == 2);
	assert_true(rp->level[4] == 1); /* window 3, layer 0 */
	assert_int_equal(rp->batch_size[0], 0);
	assert_true(rp->lr_scale[0] == 1);
	tool_hdb_replay_destroy(&rp);
	assert_null(rp);

	/* A run whose layer table the tools cannot use. */
	tool_hdb_close(&f->t.db);
	{
		sqlite3 *db;

		assert_int_equal(sqlite3_open(f->t.path, &db), SQLITE_OK);
		assert_int_equal(sqlite3_exec(db,
				     "UPDATE layers SET shape = '2x' WHERE "
				     "run_id = 2",
				     NULL, NULL, NULL),
		    SQLITE_OK);
		sqlite3_close(db);
	}
	assert_int_equal(tool_hdb_open(f->t.path, &f->t.db, f->t.err,
			     sizeof(f->t.err)),
	    0);
	assert_int_equal(tool_hdb_replay_load(f->t.db, 2, &rp), BELLOWS_EINVAL);
	assert_null(rp);
	assert_string_equal(tool_hdb_error(f->t.db),
	    "run 2: layer 'emb' has shape '2x' and ndim 2, which do not "
	    "agree");
}

static void
test_historydb_loads_the_saved_bytes_of_a_version_4_replay(void **state)
{
	fixture *f = *state;
	tool_hdb_replay *rp = NULL;

	open_fixture(f, 4);
	assert_int_equal(tool_hdb_schema_version(f->t.db), 4);
	assert_int_equal(tool_hdb_replay_load(f->t.db, 1, &rp), 0);
	assert_int_equal(rp->n_windows, 3);
	assert_true(rp->win[0].saved_bytes == 0);
	assert_int_equal(rp->win[2].window, 3);
	assert_true(rp->win[2].saved_bytes == 7000);
	assert_true(rp->win[2].mem_host_used == 500);
	tool_hdb_replay_destroy(&rp);
}

static void
test_historydb_loads_a_version_3_replay_with_every_field(void **state)
{
	fixture *f = *state;
	tool_hdb_replay *rp = NULL;
	const bellows_window *w;

	open_fixture(f, 3);
	assert_int_equal(tool_hdb_schema_version(f->t.db), 3);
	assert_int_equal(tool_hdb_replay_load(f->t.db, 1, &rp), 0);
	assert_int_equal(rp->n_windows, 3);
	/* Window 1 (slot 1): conv.weight's activations. */
	w = &rp->win[1];
	assert_int_equal(w->window, 1);
	assert_int_equal(w->first_step, 5);
	assert_int_equal(w->last_step, 9);
	assert_int_equal(w->batch_size, 32);
	assert_int_equal(w->world, 3);
	assert_true(w->step_ms_median == 12 && w->compute_ms_median == 10);
	assert_int_equal(w->layers[0].act_steps, 5);
	assert_true(w->layers[0].act_lbar == 0.5);
	assert_true(w->layers[0].act_nonzero == 0.25);
	assert_true(w->layers[0].act_bytes == 100);
	assert_true(w->layers[0].act_raw_bytes == 400);
	/* rank 0's norm is NULL there: grad_norm is the mean. */
	assert_true(w->layers[0].grad_norm == 4);
	assert_true(isnan(w->layers[0].comm_raw_ms));
	assert_int_equal(w->n_comm, 0);
	assert_int_equal(w->calibrate_until, 0);
	/* Window 3 (slot 2): times, memory, calibration, collectives. */
	w = &rp->win[2];
	assert_int_equal(w->window, 3);
	assert_true(w->layers[0].comm_raw_ms == 2);
	assert_true(w->layers[0].comm_comp_ms == 1);
	assert_true(w->layers[0].codec_ms == 0.5);
	assert_int_equal(w->layers[0].comm_raw_n, 3);
	assert_int_equal(w->layers[0].comm_comp_n, 3);
	assert_true(w->layers[1].count == 30);
	assert_true(w->backward_ms_median == 8 && w->codec_ms_median == 1);
	assert_true(w->mem_device_used == 3000);
	assert_true(w->mem_device_total == 8000);
	assert_true(w->mem_host_used == 500);
	assert_true(w->saved_bytes == 0); /* version 3 has none */
	assert_int_equal(rp->apply_step[2], 15);
	assert_int_equal(rp->calibrate_steps[2], 4);
	assert_int_equal(w->calibrate_until, 19);
	assert_int_equal(w->n_comm, 2);
	assert_int_equal(w->comm[0].rank, 0);
	assert_int_equal(w->comm[0].bytes, 4096);
	assert_int_equal(w->comm[0].count, 10);
	assert_false(w->comm[0].compressed);
	assert_int_equal(w->comm[1].rank, 2);
	assert_true(w->comm[1].compressed && w->comm[1].ms == 0.25);
	/* Window 0 has its one collective. */
	assert_int_equal(rp->win[0].n_comm, 1);
	assert_true(rp->win[0].comm[0].ms == 0.75);
	assert_int_equal(rp->n_comm, 3);
	tool_hdb_replay_destroy(&rp);
}

static void
test_historydb_reads_a_version_2_file_as_not_measured(void **state)
{
	fixture *f = *state;
	tool_hdb_filter flt = no_filter();
	tool_hdb_replay *rp = NULL;

	open_fixture(f, 2);
	assert_int_equal(tool_hdb_replay_load(f->t.db, 1, &rp), 0);
	assert_int_equal(rp->n_windows, 3);
	assert_int_equal(rp->win[2].layers[0].act_steps, 0);
	assert_true(isnan(rp->win[2].layers[0].comm_raw_ms));
	assert_true(rp->win[2].backward_ms_median == 0);
	assert_int_equal(rp->win[2].n_comm, 0);
	assert_int_equal(rp->n_comm, 0);
	tool_hdb_replay_destroy(&rp);
	flt.run = 1;
	ask(f, TOOL_HDB_Q_METRICS, &flt);
	assert_int_equal(f->rows.n_rows, 0);
	assert_int_equal(f->rows.n_cols, 5);
	ask(f, TOOL_HDB_Q_COMM, &flt);
	assert_int_equal(f->rows.n_rows, 0);
	ask(f, TOOL_HDB_Q_STATS, &flt);
	assert_int_equal(f->rows.n_rows, 4);
	assert_int_equal(cell(f, 3, "calibrate_until")->type, TOOL_HDB_NULL);
	assert_true(real_at(f, 3, "backward_ms") == 0);
	assert_int_equal(int_at(f, 3, "collectives"), 0);
	flt.layer = 0;
	ask(f, TOOL_HDB_Q_LAYER_STATS, &flt);
	assert_int_equal(f->rows.n_rows, 4);
	assert_int_equal(cell(f, 1, "act_lbar")->type, TOOL_HDB_NULL);
	assert_int_equal(cell(f, 3, "comm_raw_ms")->type, TOOL_HDB_NULL);
}

static void
test_historydb_answers_metrics_collectives_and_new_columns(void **state)
{
	fixture *f = *state;
	tool_hdb_filter flt = no_filter();

	open_fixture(f, 3);
	flt.run = 1;
	ask(f, TOOL_HDB_Q_METRICS, &flt);
	assert_int_equal(f->rows.n_rows, 3);
	assert_int_equal(int_at(f, 0, "window"), 1);
	assert_string_equal(text_at(f, 0, "policy"), "slim");
	assert_string_equal(text_at(f, 0, "name"), "threshold_bytes");
	assert_int_equal(cell(f, 0, "layer")->type, TOOL_HDB_NULL);
	assert_true(real_at(f, 0, "value") == 2200000);
	assert_string_equal(text_at(f, 1, "layer"), "conv.weight");
	assert_string_equal(text_at(f, 2, "name"), "alpha_ms");
	/* One layer's only, and a window range. */
	flt.layer = 0;
	ask(f, TOOL_HDB_Q_METRICS, &flt);
	assert_int_equal(f->rows.n_rows, 1);
	assert_string_equal(text_at(f, 0, "name"), "ratio");
	flt.layer = TOOL_HDB_NONE;
	flt.window_lo = 2;
	ask(f, TOOL_HDB_Q_METRICS, &flt);
	assert_int_equal(f->rows.n_rows, 1);
	assert_int_equal(int_at(f, 0, "window"), 3);

	flt.window_lo = TOOL_HDB_NONE;
	ask(f, TOOL_HDB_Q_COMM, &flt);
	assert_int_equal(f->rows.n_rows, 3);
	assert_int_equal(int_at(f, 0, "window"), 0);
	assert_int_equal(int_at(f, 1, "rank"), 0);
	assert_int_equal(int_at(f, 2, "compressed"), 1);
	/* 4096 bytes in 0.5 ms: 0.008192 GB/s. */
	assert_true(real_at(f, 1, "gbps") == 0.008);

	ask(f, TOOL_HDB_Q_STATS, &flt);
	assert_true(real_at(f, 3, "backward_ms") == 8);
	assert_int_equal(int_at(f, 3, "mem_device"), 3000);
	assert_int_equal(int_at(f, 3, "device"), 8000);
	assert_int_equal(int_at(f, 3, "calibrate_until"), 19);
	assert_int_equal(int_at(f, 3, "collectives"), 2);
	assert_int_equal(int_at(f, 0, "collectives"), 1);
	flt.layer = 0;
	ask(f, TOOL_HDB_Q_LAYER_STATS, &flt);
	assert_true(real_at(f, 1, "act_lbar") == 0.5);
	assert_int_equal(cell(f, 0, "act_lbar")->type, TOOL_HDB_NULL);
	assert_true(real_at(f, 3, "comm_raw_ms") == 2);
	assert_int_equal(int_at(f, 3, "comm_comp_n"), 3);
	flt.layer = TOOL_HDB_NONE;
	ask(f, TOOL_HDB_Q_TIMINGS_ALL, &flt);
	/* Window 3, rank 0: 40 ms of backward over 5 steps. */
	assert_true(real_at(f, 9, "backward_ms_mean") == 8);
}

/* Every history column the statistics table gives the per-layer table
 * (an entry's wcol, then its wcol2), in the table's order, after the
 * window, the layer and the knobs in force, whatever the file's version:
 * `bellows history stats --layer` is the table, not a list of names. */
static void
assert_layer_stats_are_the_table(const fixture *f)
{
	uint32_t c = 4;

	assert_string_equal(f->rows.names[0], "window");
	assert_string_equal(f->rows.names[1], "layer");
	assert_string_equal(f->rows.names[2], "level");
	assert_string_equal(f->rows.names[3], "error_bound");
	for (uint32_t i = 0; i < COM_N_LSTATS; i++) {
		const com_stat *s = &com_layer_stat_table[i];

		if (s->wcol != NULL) {
			assert_true(c < f->rows.n_cols);
			assert_string_equal(f->rows.names[c++], s->wcol);
		}
		if (s->wcol2 != NULL) {
			assert_true(c < f->rows.n_cols);
			assert_string_equal(f->rows.names[c++], s->wcol2);
		}
	}
	assert_int_equal(f->rows.n_cols, c);
}

static void
test_historydb_shows_a_layers_every_statistic_the_table_keeps(void **state)
{
	fixture *f = *state;
	tool_hdb_filter flt = no_filter();

	/* A version 1 file lacks most of the columns: they read as not
	 * measured, NULL for a nullable one. */
	open_fixture(f, 1);
	flt.run = 1;
	flt.layer = 0;
	ask(f, TOOL_HDB_Q_LAYER_STATS, &flt);
	assert_layer_stats_are_the_table(f);
	assert_int_equal(f->rows.n_rows, 4);
	assert_true(real_at(f, 0, "grad_norm_rank0") == 10);
	assert_true(real_at(f, 0, "grad_norm_mean") == 11);
	assert_int_equal(cell(f, 0, "level_applied")->type, TOOL_HDB_NULL);
	assert_int_equal(int_at(f, 0, "resid_steps"), 0);
	assert_int_equal(cell(f, 0, "resid_l1")->type, TOOL_HDB_NULL);
	tool_hdb_close(&f->t.db);

	open_fixture(f, CTL_STORE_SCHEMA_VERSION);
	flt.window_lo = 2;
	ask(f, TOOL_HDB_Q_LAYER_STATS, &flt);
	assert_layer_stats_are_the_table(f);
	assert_int_equal(f->rows.n_rows, 2);
	assert_int_equal(int_at(f, 0, "window"), 2);
	assert_string_equal(text_at(f, 0, "layer"), "conv.weight");
	/* A gated statistic whose gate is 0 was not measured. */
	assert_int_equal(int_at(f, 0, "resid_steps"), 0);
	assert_int_equal(cell(f, 0, "resid_l1")->type, TOOL_HDB_NULL);
}

static int
stop_at_row(void *arg, const tool_hdb_cell *cells)
{
	(void)cells;
	return ++*(int *)arg == 2 ? BELLOWS_EIO : 0;
}

static int
any_columns(void *arg, uint32_t n, const char *const *names)
{
	(void)arg;
	(void)n;
	(void)names;
	return 0;
}

static void
test_historydb_stops_when_the_sink_fails(void **state)
{
	fixture *f = *state;
	tool_hdb_filter flt = no_filter();
	int rows = 0;
	tool_hdb_sink sink = { any_columns, stop_at_row, &rows };

	open_fixture(f, 2);
	flt.run = 1;
	assert_int_equal(tool_hdb_query(f->t.db, TOOL_HDB_Q_WINDOWS, &flt,
			     &sink),
	    BELLOWS_EIO);
	assert_int_equal(rows, 2);
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_historydb_refuses_a_missing_file),
		T(test_historydb_refuses_a_newer_schema_with_a_clear_message),
		T(test_historydb_refuses_a_database_that_is_no_history),
		T(test_historydb_reads_a_version_1_schema),
		T(test_historydb_opens_a_name_with_uri_characters),
		T(test_historydb_reads_past_a_writers_open_transaction),
		T(test_historydb_finds_the_latest_run_of_a_job),
		T(test_historydb_binds_layer_names_rather_than_pasting_them),
		T(test_historydb_lists_runs_with_their_windows_and_savings),
		T(test_historydb_lists_a_runs_launch_and_resumes),
		T(test_historydb_summarises_each_layers_levels),
		T(test_historydb_shows_the_applied_level_beside_the_decided_one),
		T(test_historydb_answers_tops_questions_from_the_windows_asked_only),
		T(test_historydb_lists_windows_in_the_range_asked),
		T(test_historydb_lists_which_windows_were_recorded_late),
		T(test_historydb_finds_windows_by_the_time_they_closed),
		T(test_historydb_lists_decisions_with_changes_by_layer_name),
		T(test_historydb_lists_a_runs_events_and_the_daemons_then),
		T(test_historydb_puts_slow_ranks_first_against_the_median),
		T(test_historydb_exports_a_runs_rows_with_blobs_as_they_are),
		T(test_historydb_loads_a_replay_skipping_incomplete_windows),
		T(test_historydb_loads_the_saved_bytes_of_a_version_4_replay),
		T(test_historydb_loads_a_version_3_replay_with_every_field),
		T(test_historydb_reads_a_version_2_file_as_not_measured),
		T(test_historydb_answers_metrics_collectives_and_new_columns),
		T(test_historydb_shows_a_layers_every_statistic_the_table_keeps),
		T(test_historydb_stops_when_the_sink_fails),
	};
#undef T

	return cmocka_run_group_tests_name("historydb", tests, NULL, NULL);
}
