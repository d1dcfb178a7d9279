/* test_top_data - what the dashboard says of the data behind it: how each
 * rank stopped (lost, left, ended with its run) with its last step and
 * window, an ended run not counted as ranks missing, the `c` key between
 * the decisions that changed something and all of them, and which history
 * file a live dashboard reads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "fixture.h"
#include "dashboards/layout.h"

typedef struct data_fx {
	dash_model m;  /* with the fixture snapshot */
	dash_canvas c; /* 24 x 100 */
} data_fx;

static int
data_setup(void **state)
{
	data_fx *fx = calloc(1, sizeof(*fx));

	if (fx == NULL || fixture_screen_open(&fx->m, &fx->c, 24, 100) != 0)
		return -1;
	*state = fx;
	return 0;
}

static int
data_teardown(void **state)
{
	data_fx *fx = *state;

	fixture_screen_close(&fx->m, &fx->c);
	free(fx);
	return 0;
}

static void
data_line(data_fx *fx, int row, char *buf)
{
	dash_layout_render(&fx->m, &fx->c);
	dash_canvas_line(&fx->c, row, buf);
}

static void
test_top_data_ranks_say_how_they_stopped_with_their_step_and_window(
    void **state)
{
	data_fx *fx = *state;
	dash_rank *k = fx->m.snap.ranks;
	char line[101];

	k[0].window = 11;
	k[1].alive = false;
	k[1].end = DASH_RANK_LEFT;
	k[1].window = 10;
	k[2].window = DASH_NONE;
	fx->m.view = DASH_VIEW_RANKS;
	data_line(fx, 4, line);
	assert_non_null(strstr(line, "STATE"));
	assert_non_null(strstr(line, "STEP"));
	assert_non_null(strstr(line, "WIN"));
	data_line(fx, 5, line);
	assert_non_null(strstr(line, "alive"));
	assert_non_null(strstr(line, " 120 "));
	assert_non_null(strstr(line, " 11 "));
	/* Left: a clean exit, not an alert. */
	data_line(fx, 6, line);
	assert_non_null(strstr(line, "left"));
	assert_null(strstr(line, "LOST"));
	assert_non_null(strstr(line, " 10 "));
	assert_false(fx->c.attr[6 * 100 + 3] & DASH_ATTR_ALERT);
	/* Lost: an alert, and no window known shows "-". */
	data_line(fx, 7, line);
	assert_non_null(strstr(line, "LOST"));
	assert_non_null(strstr(line, " 110 "));
	assert_true(fx->c.attr[7 * 100 + 3] & DASH_ATTR_ALERT);
	/* Ended with its run. */
	k[2].end = DASH_RANK_ENDED;
	data_line(fx, 7, line);
	assert_non_null(strstr(line, "ended"));
	assert_false(fx->c.attr[7 * 100 + 3] & DASH_ATTR_ALERT);
}

static void
test_top_data_an_ended_run_is_not_shown_alive_nor_missing_ranks(void **state)
{
	data_fx *fx = *state;
	dash_job *j = &fx->m.snap.jobs[0];
	char line[101];

	j->ended = true;
	j->alive = 0;
	fx->m.view = DASH_VIEW_JOBS;
	data_line(fx, 5, line);
	assert_non_null(strstr(line, "resnet"));
	assert_non_null(strstr(line, "ended"));
	assert_null(strstr(line, "alive"));
	assert_false(fx->c.attr[5 * 100 + 1] & DASH_ATTR_ALERT);
	/* The job line of its views. */
	fx->m.view = DASH_VIEW_RANKS;
	data_line(fx, 3, line);
	assert_non_null(strstr(line, "job resnet  ended, 3 ranks"));
	assert_false(fx->c.attr[3 * 100 + 1] & DASH_ATTR_ALERT);
}

static void
test_top_data_c_toggles_between_changed_decisions_and_all(void **state)
{
	data_fx *fx = *state;
	char line[101];

	fx->m.view = DASH_VIEW_DECISIONS;
	fx->m.sel[DASH_VIEW_DECISIONS] = 1;
	/* Changed only by default, said on the tab line. */
	assert_false(fx->m.all_decisions);
	data_line(fx, 2, line);
	assert_non_null(strstr(line, "changed only (c: all)"));
	/* c asks the source for all of them, from the newest. */
	assert_int_equal(dash_model_key(&fx->m, 'c'),
	    DASH_ACT_REDRAW | DASH_ACT_REFETCH);
	assert_true(fx->m.all_decisions);
	assert_int_equal(fx->m.sel[DASH_VIEW_DECISIONS], 0);
	data_line(fx, 2, line);
	assert_non_null(strstr(line, "all (c: changed only)"));
	assert_int_equal(dash_model_key(&fx->m, 'c'),
	    DASH_ACT_REDRAW | DASH_ACT_REFETCH);
	assert_false(fx->m.all_decisions);
	/* Nothing changed yet: said so, with the way to see the rest. */
	dash_snapshot_fini(&fx->m.snap);
	data_line(fx, 5, line);
	assert_non_null(strstr(line, "no decision changed anything yet"));
}

static void
test_top_data_the_header_names_the_history_file_and_where_it_came_from(
    void **state)
{
	data_fx *fx = *state;
	char line[101];

	dash_copy(fx->m.snap.health.db, sizeof(fx->m.snap.health.db),
	    "/srv/h.db");
	dash_copy(fx->m.snap.health.db_from, sizeof(fx->m.snap.health.db_from),
	    "bellowsd");
	data_line(fx, 0, line);
	assert_non_null(strstr(line, "live ipc://ctl"));
	assert_non_null(strstr(line, "history /srv/h.db from bellowsd"));
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, data_setup, data_teardown)
	const struct CMUnitTest tests[] = {
		T(test_top_data_ranks_say_how_they_stopped_with_their_step_and_window),
		T(test_top_data_an_ended_run_is_not_shown_alive_nor_missing_ranks),
		T(test_top_data_c_toggles_between_changed_decisions_and_all),
		T(test_top_data_the_header_names_the_history_file_and_where_it_came_from),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
