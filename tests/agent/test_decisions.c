/* test_decisions - the agent's decision table: which decision is in force
 * at a step, duplicates, the windows the trainer waits for, seq gaps and
 * pruning of superseded decisions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include <bellows/error.h>

#include "agent/decisions.h"

#define N_LAYERS 3

/* A decision for the test job whose every level is `level`. */
static com_decision
make(uint64_t seq, uint64_t apply_step, uint64_t window, double level)
{
	com_decision d;

	assert_int_equal(com_decision_init(&d, "job", N_LAYERS), 0);
	d.seq = seq;
	d.apply_step = apply_step;
	d.window = window;
	for (uint32_t i = 0; i < N_LAYERS; i++)
		d.level[i] = level;
	return d;
}

/* Adds a fresh decision and checks the table's verdict. */
static void
add(agent_decisions *t, uint64_t seq, uint64_t apply_step, uint64_t window,
    double level, int want)
{
	com_decision d = make(seq, apply_step, window, level);
	int rc = agent_decisions_add(t, &d);

	assert_int_equal(rc, want);
	if (rc == 1)
		assert_null(d.level);
	com_decision_fini(&d);
}

static int
setup(void **state)
{
	agent_decisions *t = malloc(sizeof(*t));

	if (t == NULL || agent_decisions_init(t, "job", N_LAYERS) != 0) {
		free(t);
		return -1;
	}
	*state = t;
	return 0;
}

static int
teardown(void **state)
{
	agent_decisions *t = *state;

	agent_decisions_fini(t);
	agent_decisions_fini(t);
	free(t);
	return 0;
}

static void
test_decisions_start_with_defaults_in_force(void **state)
{
	agent_decisions *t = *state;

	assert_int_equal(t->in_force.seq, 0);
	assert_int_equal(t->in_force.n_layers, N_LAYERS);
	assert_true(t->in_force.level[2] == 0.0);
	assert_true(t->in_force.error_bound[2] == 0.0);
	assert_true(t->in_force.lr_scale == 1.0);
	assert_string_equal(t->in_force.job, "job");
	assert_false(agent_decisions_advance(t, 1000));
	assert_false(agent_decisions_gap(t));
}

static void
test_decision_is_in_force_from_its_apply_step_exactly(void **state)
{
	agent_decisions *t = *state;

	add(t, 1, 10, 1, 0.5, 1);
	add(t, 2, 20, 2, 0.25, 1);
	assert_false(agent_decisions_advance(t, 9));
	assert_int_equal(t->in_force.seq, 0);
	assert_true(agent_decisions_advance(t, 10));
	assert_int_equal(t->in_force.seq, 1);
	assert_true(t->in_force.level[0] == 0.5);
	assert_false(agent_decisions_advance(t, 19));
	assert_int_equal(t->in_force.seq, 1);
	assert_true(agent_decisions_advance(t, 20));
	assert_int_equal(t->in_force.seq, 2);
	assert_true(t->in_force.level[1] == 0.25);
	assert_int_equal(t->n_pending, 0);
}

static void
test_highest_seq_wins_when_several_apply(void **state)
{
	agent_decisions *t = *state;

	/* Out-of-order arrival, and a later seq with an earlier step. */
	add(t, 3, 12, 3, 3.0, 1);
	add(t, 1, 10, 1, 1.0, 1);
	add(t, 2, 15, 2, 2.0, 1);
	assert_true(agent_decisions_advance(t, 16));
	assert_int_equal(t->in_force.seq, 3);
	assert_true(t->in_force.level[0] == 3.0);
	/* Everything below the seq in force is gone for good. */
	assert_int_equal(t->n_pending, 0);
	add(t, 2, 15, 2, 2.0, 0);
	add(t, 1, 10, 1, 1.0, 0);
}

static void
test_duplicates_are_ignored_and_counted_once(void **state)
{
	agent_decisions *t = *state;

	add(t, 1, 5, 1, 1.0, 1);
	add(t, 1, 5, 1, 9.0, 0);
	assert_int_equal(t->received, 1);
	assert_int_equal(t->n_pending, 1);
	assert_true(agent_decisions_advance(t, 5));
	assert_true(t->in_force.level[0] == 1.0);
	add(t, 1, 5, 1, 9.0, 0);
	assert_int_equal(t->received, 1);
}

static void
test_decisions_with_bad_seq_or_layer_count_are_refused(void **state)
{
	agent_decisions *t = *state;
	com_decision d;

	add(t, 0, 5, 1, 1.0, BELLOWS_EPROTO);
	assert_int_equal(com_decision_init(&d, "job", N_LAYERS + 1), 0);
	d.seq = 1;
	assert_int_equal(agent_decisions_add(t, &d), BELLOWS_EPROTO);
	com_decision_fini(&d);
	assert_int_equal(t->received, 0);
	assert_int_equal(t->last_seq, 0);
}

static void
test_lr_scale_zero_is_read_as_one(void **state)
{
	agent_decisions *t = *state;
	com_decision d = make(1, 0, 0, 0.0);

	d.lr_scale = 0.0;
	assert_int_equal(agent_decisions_add(t, &d), 1);
	assert_true(agent_decisions_advance(t, 0));
	assert_true(t->in_force.lr_scale == 1.0);
}

static void
test_late_decision_applies_from_the_next_advance(void **state)
{
	agent_decisions *t = *state;

	assert_false(agent_decisions_advance(t, 30));
	add(t, 1, 25, 1, 1.0, 1);
	assert_int_equal(t->in_force.seq, 0);
	assert_true(agent_decisions_advance(t, 31));
	assert_int_equal(t->in_force.seq, 1);
}

static void
test_due_window_waits_until_answered(void **state)
{
	agent_decisions *t = *state;

	/* Window 0 ended at step 9; apply_lag 1: due at 11. */
	assert_int_equal(agent_decisions_expect(t, 0, 11), 0);
	assert_false(agent_decisions_waiting(t, 10));
	assert_true(agent_decisions_waiting(t, 11));
	assert_true(agent_decisions_waiting(t, 12));
	/* A decision answering an older window does not help. */
	add(t, 1, 5, 0, 1.0, 1);
	assert_true(agent_decisions_waiting(t, 11));
	/* window = w + 1 answers w. */
	add(t, 2, 11, 1, 2.0, 1);
	assert_false(agent_decisions_waiting(t, 11));
	assert_true(agent_decisions_advance(t, 11));
	assert_int_equal(t->n_due, 0);
}

static void
test_a_later_window_answers_every_earlier_one(void **state)
{
	agent_decisions *t = *state;

	assert_int_equal(agent_decisions_expect(t, 0, 3), 0);
	assert_int_equal(agent_decisions_expect(t, 1, 5), 0);
	assert_int_equal(agent_decisions_expect(t, 2, 7), 0);
	assert_true(agent_decisions_waiting(t, 3));
	add(t, 1, 7, 2, 1.0, 1);
	assert_false(agent_decisions_waiting(t, 6));
	assert_true(agent_decisions_waiting(t, 7));
	/* Expecting an already answered window adds nothing. */
	assert_int_equal(agent_decisions_expect(t, 1, 9), 0);
	assert_int_equal(t->n_due, 1);
	assert_int_equal(t->due[0].window, 2);
}

static void
test_giving_up_counts_each_missed_window_and_stops_waiting(void **state)
{
	agent_decisions *t = *state;

	assert_int_equal(agent_decisions_expect(t, 0, 3), 0);
	assert_int_equal(agent_decisions_expect(t, 1, 5), 0);
	assert_int_equal(agent_decisions_expect(t, 2, 7), 0);
	assert_int_equal(agent_decisions_give_up(t, 5), 2);
	assert_false(agent_decisions_waiting(t, 6));
	assert_true(agent_decisions_waiting(t, 7));
	assert_int_equal(agent_decisions_give_up(t, 6), 0);
	assert_int_equal(agent_decisions_forget_due(t), 1);
	assert_false(agent_decisions_waiting(t, 100));
}

static void
test_seq_gap_is_detected_and_closed_by_the_missing_decision(void **state)
{
	agent_decisions *t = *state;

	add(t, 1, 1, 1, 1.0, 1);
	assert_false(agent_decisions_gap(t));
	add(t, 3, 3, 3, 3.0, 1);
	assert_true(agent_decisions_gap(t));
	add(t, 4, 4, 4, 4.0, 1);
	assert_true(agent_decisions_gap(t));
	add(t, 2, 2, 2, 2.0, 1);
	assert_false(agent_decisions_gap(t));
	assert_int_equal(t->contiguous, 4);
}

static void
test_snapshot_set_closes_a_gap_and_supersedes_older_seqs(void **state)
{
	agent_decisions *t = *state;
	com_decision set[2];

	/* First contact through PUB: seq 7, nothing known before. */
	add(t, 7, 70, 7, 7.0, 1);
	assert_true(agent_decisions_gap(t));
	set[0] = make(6, 60, 6, 6.0);
	set[1] = make(7, 70, 7, 7.0);
	assert_int_equal(agent_decisions_add_set(t, set, 2), 1);
	assert_null(set[0].level);
	assert_non_null(set[1].level);
	com_decision_fini(&set[0]);
	com_decision_fini(&set[1]);
	assert_false(agent_decisions_gap(t));
	assert_int_equal(t->received, 2);
	assert_true(agent_decisions_advance(t, 65));
	assert_int_equal(t->in_force.seq, 6);
	assert_true(agent_decisions_advance(t, 70));
	assert_int_equal(t->in_force.seq, 7);
}

static void
test_decision_in_force_closes_gaps_below_it(void **state)
{
	agent_decisions *t = *state;

	add(t, 5, 10, 5, 5.0, 1);
	assert_true(agent_decisions_gap(t));
	assert_true(agent_decisions_advance(t, 10));
	/* Seqs 1..4 can never be in force again: nothing is missing. */
	assert_false(agent_decisions_gap(t));
	add(t, 7, 20, 7, 7.0, 1);
	assert_true(agent_decisions_gap(t));
}

static void
test_advance_prunes_superseded_decisions_and_keeps_future_ones(void **state)
{
	agent_decisions *t = *state;

	for (uint64_t seq = 1; seq <= 10; seq++)
		add(t, seq, seq * 10, seq, (double)seq, 1);
	assert_int_equal(t->n_pending, 10);
	assert_true(agent_decisions_advance(t, 55));
	assert_int_equal(t->in_force.seq, 5);
	assert_int_equal(t->n_pending, 5);
	assert_int_equal(t->pending[0].seq, 6);
	assert_true(agent_decisions_advance(t, 1000));
	assert_int_equal(t->in_force.seq, 10);
	assert_int_equal(t->n_pending, 0);
	assert_int_equal(t->received, 10);
}

static void
test_too_many_pending_decisions_are_refused(void **state)
{
	agent_decisions *t = *state;

	for (uint64_t seq = 1; seq <= AGENT_DECISIONS_MAX_PENDING; seq++)
		add(t, seq, 1000000 + seq, seq, 1.0, 1);
	add(t, AGENT_DECISIONS_MAX_PENDING + 1, 2000000, 0, 1.0,
	    BELLOWS_ELIMIT);
	assert_true(agent_decisions_advance(t, 1000001));
	add(t, AGENT_DECISIONS_MAX_PENDING + 1, 2000000, 0, 1.0, 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
		    test_decisions_start_with_defaults_in_force, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(
		    test_decision_is_in_force_from_its_apply_step_exactly,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_highest_seq_wins_when_several_apply, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_duplicates_are_ignored_and_counted_once, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(
		    test_decisions_with_bad_seq_or_layer_count_are_refused,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_lr_scale_zero_is_read_as_one, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_late_decision_applies_from_the_next_advance, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(
		    test_due_window_waits_until_answered, setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_a_later_window_answers_every_earlier_one, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(
		    test_giving_up_counts_each_missed_window_and_stops_waiting,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_seq_gap_is_detected_and_closed_by_the_missing_decision,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_snapshot_set_closes_a_gap_and_supersedes_older_seqs,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_decision_in_force_closes_gaps_below_it, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(
		    test_advance_prunes_superseded_decisions_and_keeps_future_ones,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_too_many_pending_decisions_are_refused, setup,
		    teardown),
	};

	return cmocka_run_group_tests_name("agent decisions", tests, NULL,
	    NULL);
}
