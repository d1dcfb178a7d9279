/* test_source - `bellows top`'s offline data source over a real history
 * file (tests/tools/hdb_fixture.h): every view shows the run as it was at
 * the window the slider is on, the events and the ranks' steps and states
 * too; the decisions that change nothing only when asked for; Accordion's
 * r paired with the window that judged it, and levels that changed.
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

#include "tests/tools/hdb_fixture.h"
#include "dashboards/source.h"

typedef struct fixture {
	char dir[64];       /* temporary directory */
	char path[128];     /* the history in it */
	dash_source *src;   /* offline source on it */
	dash_snapshot snap; /* the last fetch */
} fixture;

static int
setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	dash_source_opts o = { NULL, NULL, NULL, NULL };
	char err[256];
	sqlite3 *db;

	if (f == NULL)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/bellows-src.XXXXXX");
	if (mkdtemp(f->dir) == NULL)
		return -1;
	snprintf(f->path, sizeof(f->path), "%s/h.db", f->dir);
	if (fixture_db_create(f->path, 3, 1) != SQLITE_OK)
		return -1;
	/* Run 1 (resnet) has windows 0..3, closed 1, 2, 3 and 4 s after it
	 * started, and events at 1.5 s (a reload) and 3.5 s (rank 1 lost);
	 * one more after its last window closed. Rank 2 said goodbye at
	 * step 19 after the last window closed; rank 0 was still in when
	 * the run ended (5 s). */
	if (sqlite3_open(f->path, &db) != SQLITE_OK ||
	    sqlite3_exec(db,
		"INSERT INTO events (id, wall_ms, run_id, job, kind, text)"
		" VALUES (9, 1795305604500, 1, 'resnet', 'rank_lost',"
		" 'rank 2 lost');"
		"INSERT INTO rank_events VALUES"
		" (1, 2, 1795305604600, 'left', 19, NULL)",
		NULL, NULL, NULL) != SQLITE_OK)
		return -1;
	sqlite3_close(db);
	o.db = f->path;
	if (dash_source_open(&o, &f->src, err, sizeof(err)) != 0)
		return -1;
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	fixture *f = *state;

	dash_snapshot_fini(&f->snap);
	dash_source_close(&f->src);
	fixture_db_remove(f->path);
	rmdir(f->dir);
	free(f);
	return 0;
}

static void
fetch(fixture *f, int64_t window)
{
	dash_snapshot_fini(&f->snap);
	assert_int_equal(dash_source_fetch(f->src, "resnet", window, &f->snap),
	    0);
	assert_string_equal(f->snap.job, "resnet");
	assert_int_equal(f->snap.window_at, window);
}

static void
test_source_pairs_accordion_r_with_the_window_that_judged_it(void **state)
{
	fixture *f = *state;
	sqlite3 *db;

	/* Checks at windows 1 (eta 0.3) and 2 (eta 0.5): conv.weight is
	 * judged at both, fc.bias only at 1. */
	assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db,
			     "INSERT INTO policy_metrics VALUES"
			     " (1, 1, 'acc', 'r', 0, 0.01),"
			     " (1, 1, 'acc', 'r', 1, 0.6),"
			     " (1, 1, 'acc', 'eta', NULL, 0.3),"
			     " (1, 2, 'acc', 'r', 0, 0.75),"
			     " (1, 2, 'acc', 'eta', NULL, 0.5)",
			     NULL, NULL, NULL),
	    SQLITE_OK);
	sqlite3_close(db);

	/* Up to the first check's window, no r decided a level: a check's
	 * decision is in force from the window after it. */
	fetch(f, 0);
	assert_true(isnan(f->snap.layers[0].r));
	assert_true(f->snap.layers[0].r_window == DASH_NONE);
	fetch(f, 1);
	assert_true(f->snap.layers[0].r_window == DASH_NONE);
	fetch(f, 2);
	assert_true(f->snap.layers[0].r == 0.01);
	assert_true(f->snap.layers[0].r_window == 1);
	assert_true(f->snap.layers[0].r_eta == 0.3);
	assert_true(f->snap.layers[1].r == 0.6);
	/* At window 3 the check of window 2 decided, with its own eta;
	 * fc.bias keeps the r of window 1, with window 1's. */
	fetch(f, 3);
	assert_true(f->snap.layers[0].r == 0.75);
	assert_true(f->snap.layers[0].r_window == 2);
	assert_true(f->snap.layers[0].r_eta == 0.5);
	assert_true(f->snap.layers[1].r == 0.6);
	assert_true(f->snap.layers[1].r_window == 1);
	assert_true(f->snap.layers[1].r_eta == 0.3);
	assert_true(dash_snapshot_regime(&f->snap));
}

static void
test_source_marks_a_level_changed_in_the_window_shown(void **state)
{
	fixture *f = *state;

	/* conv.weight: level 2 in windows 0..1, 1 from window 2. */
	fetch(f, 1);
	assert_false(dash_layer_changed(&f->snap.layers[0]));
	fetch(f, 2);
	assert_true(f->snap.layers[0].level_prev == 2);
	assert_true(dash_layer_changed(&f->snap.layers[0]));
	fetch(f, 3);
	assert_false(dash_layer_changed(&f->snap.layers[0]));
}

static void
test_source_offline_shows_the_events_up_to_the_window_on_the_slider(
    void **state)
{
	fixture *f = *state;

	/* Window 0 closed at 1 s: nothing had happened yet. */
	fetch(f, 0);
	assert_int_equal(f->snap.n_events, 0);

	/* Windows 1 and 2 (2 s, 3 s): the reload, not yet the loss. */
	fetch(f, 1);
	assert_int_equal(f->snap.n_events, 1);
	assert_string_equal(f->snap.events[0].kind, "reload_ok");
	fetch(f, 2);
	assert_int_equal(f->snap.n_events, 1);

	/* The last window: everything the run recorded, also after it. */
	fetch(f, 3);
	assert_int_equal(f->snap.n_events, 3);
	assert_string_equal(f->snap.events[1].kind, "rank_lost");
	assert_string_equal(f->snap.events[1].text, "rank 1 lost");
	assert_string_equal(f->snap.events[2].text, "rank 2 lost");
	assert_string_equal(f->snap.events[2].time, "00:00:04");

	/* Back again: the slider moves both ways. */
	fetch(f, 0);
	assert_int_equal(f->snap.n_events, 0);
}

static void
test_source_offline_shows_the_layers_and_decisions_up_to_that_window(
    void **state)
{
	fixture *f = *state;

	/* conv.weight was at level 2 in windows 0..1, 1 from window 2. */
	fetch(f, 1);
	assert_int_equal(f->snap.n_layers, 2);
	assert_string_equal(f->snap.layers[0].name, "conv.weight");
	assert_true(f->snap.layers[0].level == 2);
	assert_true(f->snap.layers[0].level_max == 2);
	assert_int_equal(f->snap.layers[0].n_norms, 2);
	/* A version 3 file recorded no applied level. */
	assert_true(isnan(f->snap.layers[0].level_applied));
	/* Decisions in force up to window 2: seq 1 (window 0) to 3, of
	 * which seq 2 changed nothing: shown only when all are asked for. */
	assert_int_equal(f->snap.n_decisions, 2);
	assert_int_equal(f->snap.decisions[0].seq, 1);
	assert_int_equal(f->snap.decisions[0].n_changes, 1);
	assert_int_equal(f->snap.decisions[1].seq, 3);
	assert_int_equal(f->snap.decisions[1].n_changes, 2);
	dash_source_all_decisions(f->src, true);
	fetch(f, 1);
	assert_int_equal(f->snap.n_decisions, 3);
	assert_int_equal(f->snap.decisions[1].seq, 2);
	assert_int_equal(f->snap.decisions[1].n_changes, 0);
	assert_string_equal(f->snap.decisions[1].reason, "no change");
	assert_int_equal(f->snap.decisions[2].seq, 3);
	fetch(f, 3);
	assert_true(f->snap.layers[0].level == 1);
	assert_true(f->snap.layers[0].level_max == 2);
	assert_int_equal(f->snap.layers[0].n_norms, 4);
	/* fc.bias has no window 2: three norms, level 0 (raw). */
	assert_int_equal(f->snap.layers[1].n_norms, 3);
	assert_true(f->snap.layers[1].level_max == 0);
}

/* The job the fetch opened (the runs are listed newest first). */
static const dash_job *
job_of(const fixture *f)
{
	for (uint32_t i = 0; i < f->snap.n_jobs; i++) {
		if (strcmp(f->snap.jobs[i].name, f->snap.job) == 0)
			return &f->snap.jobs[i];
	}
	fail();
	return NULL;
}

static void
test_source_offline_ranks_show_their_last_step_window_and_how_they_ended(
    void **state)
{
	fixture *f = *state;
	const dash_rank *k;

	/* Window 1 (2 s): every rank alive at step 9 (windows of 5 steps),
	 * the run not ended yet. */
	fetch(f, 1);
	assert_int_equal(f->snap.n_ranks, 3);
	for (uint32_t i = 0; i < 3; i++) {
		k = &f->snap.ranks[i];
		assert_true(k->alive);
		assert_int_equal(k->step, 9);
		assert_int_equal(k->window, 1);
		assert_string_equal(dash_rank_state(k), "alive");
	}
	assert_false(job_of(f)->ended);
	assert_int_equal(job_of(f)->alive, 3);
	/* The policy its decisions name, not the run's state at its end. */
	assert_string_equal(job_of(f)->policy, "accordion");

	/* Window 2 closed at 3 s: rank 1 was lost only at 3.5 s. */
	fetch(f, 2);
	assert_true(f->snap.ranks[1].alive);
	assert_int_equal(f->snap.ranks[1].step, 14);

	/* The last window: the run ended. Rank 0 was still in (ended with
	 * it, step 19), rank 1 lost at step 15 after window 2, rank 2 left
	 * at step 19; none of them alive. */
	fetch(f, 3);
	k = &f->snap.ranks[0];
	assert_false(k->alive);
	assert_string_equal(dash_rank_state(k), "ended");
	assert_int_equal(k->step, 19);
	assert_int_equal(k->window, 3);
	k = &f->snap.ranks[1];
	assert_string_equal(dash_rank_state(k), "LOST");
	assert_true(dash_rank_lost(k));
	assert_int_equal(k->step, 15);
	assert_int_equal(k->window, 2);
	k = &f->snap.ranks[2];
	assert_string_equal(dash_rank_state(k), "left");
	assert_false(dash_rank_lost(k));
	assert_int_equal(k->step, 19);
	assert_true(job_of(f)->ended);
	assert_int_equal(job_of(f)->alive, 0);
	assert_int_equal(job_of(f)->step, 19);
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_source_pairs_accordion_r_with_the_window_that_judged_it),
		T(test_source_marks_a_level_changed_in_the_window_shown),
		T(test_source_offline_shows_the_events_up_to_the_window_on_the_slider),
		T(test_source_offline_shows_the_layers_and_decisions_up_to_that_window),
		T(test_source_offline_ranks_show_their_last_step_window_and_how_they_ended),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
