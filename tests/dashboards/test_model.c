/* test_model - the dashboard model: keys, selection, opening a job or a
 * layer or a decision in detail (Enter and Esc, scrolling), the layer
 * filter and sorts, pause, the offline window slider, Accordion's regime
 * and the r that decided it, which jobs have a regime, and sparklines.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fixture.h"
#include "dashboards/model.h"

/* cmocka 1.1 has no assert_double_equal. */
#define assert_near(a, b, eps) assert_true(fabs((a) - (b)) <= (eps))

static dash_model *
model_with_fixture(void)
{
	dash_model *m = calloc(1, sizeof(*m));
	dash_snapshot s;

	assert_non_null(m);
	dash_model_init(m, false);
	fixture_snapshot(&s);
	assert_int_equal(dash_model_update(m, &s), DASH_ACT_REDRAW);
	assert_null(s.jobs);
	return m;
}

static void
model_free(dash_model *m)
{
	dash_model_fini(m);
	free(m);
}

static void
test_model_moves_within_the_rows_and_stops_at_the_ends(void **state)
{
	dash_model *m = model_with_fixture();

	(void)state;
	assert_int_equal(m->view, DASH_VIEW_JOBS);
	assert_int_equal(dash_model_key(m, DASH_KEY_UP), DASH_ACT_NONE);
	assert_int_equal(dash_model_key(m, 'j'), DASH_ACT_REDRAW);
	assert_int_equal(m->sel[DASH_VIEW_JOBS], 1);
	assert_int_equal(dash_model_key(m, DASH_KEY_DOWN), DASH_ACT_NONE);
	assert_string_equal(dash_model_job(m), "bert");
	assert_int_equal(dash_model_key(m, 'k'), DASH_ACT_REDRAW);
	assert_string_equal(dash_model_job(m), "resnet");
	model_free(m);
}

static void
test_model_enter_opens_the_job_and_asks_for_its_rows(void **state)
{
	dash_model *m = model_with_fixture();

	(void)state;
	assert_int_equal(dash_model_key(m, DASH_KEY_ENTER),
	    DASH_ACT_REDRAW | DASH_ACT_REFETCH);
	assert_int_equal(m->view, DASH_VIEW_RANKS);
	assert_string_equal(m->job, "resnet");
	assert_int_equal(dash_model_key(m, DASH_KEY_TAB), DASH_ACT_REDRAW);
	assert_int_equal(m->view, DASH_VIEW_LAYERS);
	assert_int_equal(dash_model_key(m, DASH_KEY_TAB), DASH_ACT_REDRAW);
	assert_int_equal(m->view, DASH_VIEW_DECISIONS);
	assert_int_equal(dash_model_key(m, DASH_KEY_TAB), DASH_ACT_REDRAW);
	assert_int_equal(m->view, DASH_VIEW_EVENTS);
	assert_int_equal(dash_model_key(m, DASH_KEY_TAB), DASH_ACT_REDRAW);
	assert_int_equal(m->view, DASH_VIEW_JOBS);
	assert_int_equal(dash_model_key(m, DASH_KEY_BTAB), DASH_ACT_REDRAW);
	assert_int_equal(m->view, DASH_VIEW_EVENTS);
	assert_int_equal(dash_model_key(m, DASH_KEY_ESC), DASH_ACT_REDRAW);
	assert_int_equal(m->view, DASH_VIEW_JOBS);
	model_free(m);
}

static void
test_model_enter_on_a_layer_opens_it_and_esc_goes_back(void **state)
{
	dash_model *m = model_with_fixture();

	(void)state;
	m->view = DASH_VIEW_LAYERS;
	dash_model_key(m, 'j');
	assert_int_equal(dash_model_key(m, DASH_KEY_ENTER), DASH_ACT_REDRAW);
	assert_int_equal(m->view, DASH_VIEW_LAYER);
	assert_string_equal(m->layer, "fc.weight");
	assert_int_equal(dash_model_key(m, DASH_KEY_ESC), DASH_ACT_REDRAW);
	assert_int_equal(m->view, DASH_VIEW_LAYERS);
	/* Enter closes it too. */
	dash_model_key(m, DASH_KEY_ENTER);
	assert_int_equal(m->view, DASH_VIEW_LAYER);
	assert_int_equal(dash_model_key(m, DASH_KEY_ENTER), DASH_ACT_REDRAW);
	assert_int_equal(m->view, DASH_VIEW_LAYERS);
	model_free(m);
}

static void
test_model_filter_keeps_matching_layers_case_insensitively(void **state)
{
	dash_model *m = model_with_fixture();
	uint32_t rows[3];

	(void)state;
	assert_int_equal(dash_model_key(m, '/'), DASH_ACT_REDRAW);
	assert_true(m->filtering);
	assert_int_equal(m->view, DASH_VIEW_LAYERS);
	dash_model_key(m, 'C');
	dash_model_key(m, 'o');
	dash_model_key(m, 'x');
	assert_int_equal(dash_model_layer_rows(m, rows), 0);
	dash_model_key(m, DASH_KEY_BACKSPACE);
	assert_string_equal(m->filter, "Co");
	assert_int_equal(dash_model_layer_rows(m, rows), 2);
	assert_int_equal(rows[0], 0);
	assert_int_equal(rows[1], 2);
	/* While typing, q is text, not quit. */
	assert_int_equal(dash_model_key(m, 'q'), DASH_ACT_REDRAW);
	dash_model_key(m, DASH_KEY_BACKSPACE);
	assert_int_equal(dash_model_key(m, DASH_KEY_ENTER), DASH_ACT_REDRAW);
	assert_false(m->filtering);
	assert_int_equal(dash_model_rows(m, DASH_VIEW_LAYERS), 2);
	dash_model_key(m, '/');
	assert_int_equal(dash_model_key(m, DASH_KEY_ESC), DASH_ACT_REDRAW);
	assert_string_equal(m->filter, "");
	assert_int_equal(dash_model_layer_rows(m, rows), 3);
	model_free(m);
}

static void
test_model_sorts_ranks_so_a_straggler_is_on_top(void **state)
{
	dash_model *m = model_with_fixture();
	uint32_t rows[3];

	(void)state;
	/* Rank 1 steps slowest, rank 2 is 10 steps behind and silent. */
	m->snap.ranks[1].step_ms = 9.0;
	m->snap.ranks[2].seen_ms = 5000;
	m->view = DASH_VIEW_RANKS;
	dash_model_rank_rows(m, rows);
	assert_int_equal(rows[0], 0);
	dash_model_key(m, 's');
	assert_int_equal(m->rank_sort, DASH_RSORT_SLOW);
	assert_int_equal(m->sort, DASH_SORT_INDEX); /* the layers' untouched */
	dash_model_rank_rows(m, rows);
	assert_int_equal(rows[0], 1);
	assert_int_equal(rows[1], 0); /* ties by rank */
	dash_model_key(m, 's');
	dash_model_rank_rows(m, rows);
	assert_int_equal(rows[0], 2);
	dash_model_key(m, 's');
	assert_string_equal(dash_rank_sort_name(m->rank_sort), "silent");
	dash_model_rank_rows(m, rows);
	assert_int_equal(rows[0], 2);
	assert_int_equal(rows[1], 0);
	dash_model_key(m, 's');
	assert_int_equal(m->rank_sort, DASH_RSORT_RANK);
	model_free(m);
}

static void
test_model_sort_cycles_index_name_level_size_r(void **state)
{
	dash_model *m = model_with_fixture();
	uint32_t rows[3];

	(void)state;
	dash_model_layer_rows(m, rows);
	assert_int_equal(rows[0], 0);
	dash_model_key(m, 's');
	assert_int_equal(m->sort, DASH_SORT_NAME);
	dash_model_layer_rows(m, rows);
	assert_string_equal(m->snap.layers[rows[0]].name, "conv1.weight");
	assert_string_equal(m->snap.layers[rows[1]].name, "conv2.weight");
	assert_string_equal(m->snap.layers[rows[2]].name, "fc.weight");
	dash_model_key(m, 's');
	dash_model_layer_rows(m, rows);
	assert_int_equal(rows[0], 2); /* level 4 */
	assert_int_equal(rows[2], 1); /* level 1 */
	dash_model_key(m, 's');
	dash_model_layer_rows(m, rows);
	assert_int_equal(rows[0], 1); /* 8192 elements */
	dash_model_key(m, 's');
	assert_int_equal(m->sort, DASH_SORT_R);
	dash_model_layer_rows(m, rows);
	/* r: conv2 |24-28|... see test below; conv2 decreasing 24 -> 12:
	 * |16 - 12| / 16 = 0.25, conv1 2/12, fc 0. */
	assert_int_equal(rows[0], 2);
	assert_int_equal(rows[1], 0);
	assert_int_equal(rows[2], 1);
	dash_model_key(m, 's');
	assert_int_equal(m->sort, DASH_SORT_INDEX);
	model_free(m);
}

static void
test_model_pause_keeps_the_snapshot_shown(void **state)
{
	dash_model *m = model_with_fixture();
	dash_snapshot s;

	(void)state;
	assert_int_equal(dash_model_key(m, 'p'), DASH_ACT_REDRAW);
	assert_true(m->paused);
	fixture_snapshot(&s);
	s.jobs[0].step = 999;
	assert_int_equal(dash_model_update(m, &s), DASH_ACT_NONE);
	assert_null(s.jobs);
	assert_int_equal(m->snap.jobs[0].step, 120);
	assert_int_equal(dash_model_key(m, 'p'),
	    DASH_ACT_REDRAW | DASH_ACT_REFETCH);
	assert_false(m->paused);
	model_free(m);
}

static void
test_model_update_keeps_selections_in_range(void **state)
{
	dash_model *m = model_with_fixture();
	dash_snapshot s;

	(void)state;
	dash_model_key(m, 'j');
	m->sel[DASH_VIEW_RANKS] = 2;
	memset(&s, 0, sizeof(s));
	dash_model_update(m, &s);
	assert_int_equal(m->sel[DASH_VIEW_JOBS], 0);
	assert_int_equal(m->sel[DASH_VIEW_RANKS], 0);
	assert_string_equal(dash_model_job(m), "");
	assert_int_equal(dash_model_key(m, DASH_KEY_ENTER), DASH_ACT_NONE);
	model_free(m);
}

static void
test_model_help_and_quit(void **state)
{
	dash_model *m = model_with_fixture();

	(void)state;
	assert_int_equal(dash_model_key(m, '?'), DASH_ACT_REDRAW);
	assert_true(m->help);
	assert_int_equal(dash_model_key(m, 'x'), DASH_ACT_REDRAW);
	assert_false(m->help);
	assert_int_equal(dash_model_key(m, 'q'), DASH_ACT_QUIT);
	model_free(m);
}

static void
test_model_slider_moves_offline_within_the_run(void **state)
{
	dash_model *m = model_with_fixture();

	(void)state;
	/* Live: arrows left/right do nothing. */
	assert_int_equal(dash_model_key(m, DASH_KEY_LEFT), DASH_ACT_NONE);
	m->offline = true;
	m->snap.window_lo = 0;
	m->snap.window_hi = 11;
	m->snap.window_at = 11;
	assert_int_equal(dash_model_key(m, DASH_KEY_RIGHT), DASH_ACT_NONE);
	assert_int_equal(dash_model_key(m, DASH_KEY_LEFT),
	    DASH_ACT_REDRAW | DASH_ACT_REFETCH);
	assert_int_equal(m->window, 10);
	dash_model_key(m, '{');
	assert_int_equal(m->window, 0);
	dash_model_key(m, '}');
	assert_int_equal(m->window, 10);
	dash_model_key(m, ']');
	/* Back at the last window: "the latest" again. */
	assert_true(m->window == DASH_NONE);
	model_free(m);
}

static void
test_layer_regime_and_r_follow_accordion(void **state)
{
	dash_model *m = model_with_fixture();
	dash_layer short_l = m->snap.layers[0];

	(void)state;
	assert_true(dash_layer_critical(&m->snap.layers[0]));
	assert_false(dash_layer_critical(&m->snap.layers[1]));
	assert_true(dash_layer_critical(&m->snap.layers[2]));
	/* The r judged at the check, not one of the newest norms. */
	assert_near(dash_layer_r(&m->snap.layers[0]), 0.4, 0);
	assert_near(dash_layer_r(&m->snap.layers[1]), 0.0, 0);
	assert_near(dash_layer_r(&m->snap.layers[2]), 0.5, 0);
	short_l.r_window = DASH_NONE;
	assert_true(isnan(dash_layer_r(&short_l)));
	short_l.level = 0;
	short_l.level_max = 0;
	assert_false(dash_layer_critical(&short_l));
	short_l.level = NAN;
	assert_false(dash_layer_critical(&short_l));
	/* Changed: the level differs from the window before's. */
	assert_true(dash_layer_changed(&m->snap.layers[0]));
	assert_false(dash_layer_changed(&m->snap.layers[1]));
	short_l = m->snap.layers[1];
	short_l.level_prev = NAN;
	assert_false(dash_layer_changed(&short_l));
	model_free(m);
}

static void
test_only_jobs_with_accordion_have_a_regime(void **state)
{
	dash_model *m = model_with_fixture();
	dash_snapshot *s = &m->snap;

	(void)state;
	assert_true(dash_snapshot_regime(s));
	/* Without Accordion's reason, r or name: no regime. */
	s->acc_interval = 0;
	for (uint32_t i = 0; i < s->n_layers; i++)
		s->layers[i].r_window = DASH_NONE;
	dash_copy(s->decisions[1].policy, DASH_NAME_MAX, "levels");
	dash_copy(s->jobs[0].policy, DASH_NAME_MAX, "levels");
	assert_false(dash_snapshot_regime(s));
	dash_copy(s->jobs[0].policy, DASH_NAME_MAX, "accordion_batch");
	assert_false(dash_snapshot_regime(s));
	/* Named among others, before a check was recorded. */
	dash_copy(s->jobs[0].policy, DASH_NAME_MAX, "slimgc,accordion");
	assert_true(dash_snapshot_regime(s));
	dash_copy(s->jobs[0].policy, DASH_NAME_MAX, "levels");
	dash_copy(s->decisions[1].policy, DASH_NAME_MAX, "accordion");
	assert_true(dash_snapshot_regime(s));
	dash_copy(s->decisions[1].policy, DASH_NAME_MAX, "levels");
	s->layers[2].r_window = 4;
	assert_true(dash_snapshot_regime(s));
	model_free(m);
}

static void
test_model_enter_on_a_decision_opens_it_and_enter_closes(void **state)
{
	dash_model *m = model_with_fixture();
	dash_snapshot s;

	(void)state;
	m->view = DASH_VIEW_DECISIONS;
	/* Row 0 is the newest (seq 12), row 1 seq 11. */
	assert_int_equal(dash_model_decision_row(m, 0)->seq, 12);
	assert_int_equal(dash_model_decision_row(m, 1)->seq, 11);
	assert_null(dash_model_decision_row(m, 2));
	assert_int_equal(dash_model_key(m, 'j'), DASH_ACT_REDRAW);
	assert_int_equal(dash_model_key(m, DASH_KEY_ENTER), DASH_ACT_REDRAW);
	assert_int_equal(m->view, DASH_VIEW_DECISION);
	assert_int_equal(m->decision.seq, 11);
	/* Up/Down scroll the text, from the top and not above it. */
	assert_int_equal(dash_model_key(m, DASH_KEY_UP), DASH_ACT_NONE);
	assert_int_equal(dash_model_key(m, DASH_KEY_DOWN), DASH_ACT_REDRAW);
	assert_int_equal(m->scroll, 1);
	assert_int_equal(m->sel[DASH_VIEW_DECISIONS], 1);
	/* A refresh without that decision keeps it open, as read. */
	fixture_snapshot(&s);
	s.n_decisions = 1;
	dash_model_update(m, &s);
	assert_int_equal(m->decision.seq, 11);
	assert_string_equal(m->decision.reason, "no change");
	/* Enter closes, as Esc does; Tab leaves for the next view. */
	assert_int_equal(dash_model_key(m, DASH_KEY_ENTER), DASH_ACT_REDRAW);
	assert_int_equal(m->view, DASH_VIEW_DECISIONS);
	assert_int_equal(dash_model_key(m, DASH_KEY_ENTER), DASH_ACT_REDRAW);
	assert_int_equal(m->view, DASH_VIEW_DECISION);
	/* The selection was kept in range: the one decision left. */
	assert_int_equal(m->decision.seq, 11);
	assert_int_equal(m->scroll, 0);
	assert_int_equal(dash_model_key(m, DASH_KEY_ESC), DASH_ACT_REDRAW);
	assert_int_equal(m->view, DASH_VIEW_DECISIONS);
	dash_model_key(m, DASH_KEY_ENTER);
	assert_int_equal(dash_model_key(m, DASH_KEY_TAB), DASH_ACT_REDRAW);
	assert_int_equal(m->view, DASH_VIEW_EVENTS);
	/* No decisions: nothing to open. */
	m->view = DASH_VIEW_DECISIONS;
	m->snap.n_decisions = 0;
	assert_int_equal(dash_model_key(m, DASH_KEY_ENTER), DASH_ACT_NONE);
	model_free(m);
}

static void
test_reason_gives_accordion_interval_and_eta(void **state)
{
	uint32_t interval = 7;
	double eta = -1;

	(void)state;
	assert_true(dash_reason_accordion(
	    "levels: x; window 10 vs window 8 (eta 0.3): 0 critical", &interval,
	    &eta));
	assert_int_equal(interval, 2);
	assert_near(eta, 0.3, 1e-12);
	interval = 7;
	assert_false(dash_reason_accordion("window 0: 3 layers critical",
	    &interval, &eta));
	assert_false(dash_reason_accordion("window 8 vs window 10 (eta 1)",
	    &interval, &eta));
	assert_false(dash_reason_accordion(NULL, &interval, &eta));
	assert_int_equal(interval, 7);
}

static void
test_sparkline_scales_from_lowest_to_highest(void **state)
{
	double up[] = { 1, 2, 3, 4, 5, 6, 7 };
	double flat[] = { 3, 3, 3 };
	double gap[] = { 1, NAN, 2 };
	char buf[16];

	(void)state;
	dash_sparkline(up, 7, buf, sizeof(buf));
	assert_string_equal(buf, "_.-=+*#");
	dash_sparkline(flat, 3, buf, sizeof(buf));
	assert_string_equal(buf, "===");
	dash_sparkline(gap, 3, buf, sizeof(buf));
	assert_string_equal(buf, "_ #");
	/* Only the newest values fit. */
	dash_sparkline(up, 7, buf, 4);
	assert_string_equal(buf, "_=#");
	dash_sparkline(up, 0, buf, sizeof(buf));
	assert_string_equal(buf, "");
}

static void
test_copy_cuts_and_blanks_control_characters(void **state)
{
	char buf[6];

	(void)state;
	dash_copy(buf, sizeof(buf), "a\tb\x1b[2Jxyz");
	assert_string_equal(buf, "a b [");
	dash_copy(buf, sizeof(buf), NULL);
	assert_string_equal(buf, "");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_model_moves_within_the_rows_and_stops_at_the_ends),
		cmocka_unit_test(
		    test_model_enter_opens_the_job_and_asks_for_its_rows),
		cmocka_unit_test(
		    test_model_enter_on_a_layer_opens_it_and_esc_goes_back),
		cmocka_unit_test(
		    test_model_filter_keeps_matching_layers_case_insensitively),
		cmocka_unit_test(
		    test_model_sort_cycles_index_name_level_size_r),
		cmocka_unit_test(
		    test_model_sorts_ranks_so_a_straggler_is_on_top),
		cmocka_unit_test(test_model_pause_keeps_the_snapshot_shown),
		cmocka_unit_test(test_model_update_keeps_selections_in_range),
		cmocka_unit_test(test_model_help_and_quit),
		cmocka_unit_test(
		    test_model_slider_moves_offline_within_the_run),
		cmocka_unit_test(test_layer_regime_and_r_follow_accordion),
		cmocka_unit_test(test_only_jobs_with_accordion_have_a_regime),
		cmocka_unit_test(
		    test_model_enter_on_a_decision_opens_it_and_enter_closes),
		cmocka_unit_test(test_reason_gives_accordion_interval_and_eta),
		cmocka_unit_test(test_sparkline_scales_from_lowest_to_highest),
		cmocka_unit_test(test_copy_cuts_and_blanks_control_characters),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
