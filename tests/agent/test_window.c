/* test_window - the window statistics against a naive double reference.
 *
 * The reference recomputes every statistic from the whole history of
 * gradients kept by the test, element by element in double, the way the
 * protocol defines them; the window module must agree within float
 * rounding of its accumulator.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <bellows/agent.h>

#include "agent/agent_window.h"

/* A reproducible gradient: a mix of signs, magnitudes and exact zeros. */
static void
fill(float *g, uint64_t n, unsigned seed)
{
	uint32_t x = seed * 2654435761u + 12345u;

	for (uint64_t i = 0; i < n; i++) {
		x = x * 1664525u + 1013904223u;
		if ((x >> 28) == 0)
			g[i] = 0.0f;
		else
			g[i] = ((float)(x >> 8) / 16777216.0f - 0.5f) *
			    (float)(1 + (x >> 29));
	}
}

typedef struct reference {
	uint64_t count;
	uint64_t nonzero;
	uint64_t nonfinite;
	double sum_sq;
	double abs_sum;
	double max_abs;
	double *acc;
	double *m;
} reference;

static void
reference_add(reference *r, const float *g, uint64_t n, double beta)
{
	for (uint64_t i = 0; i < n; i++) {
		double v = g[i];

		r->count++;
		if (!isfinite(v)) {
			r->nonfinite++;
			continue;
		}
		r->nonzero += v != 0.0;
		r->sum_sq += v * v;
		r->abs_sum += fabs(v);
		if (fabs(v) > r->max_abs)
			r->max_abs = fabs(v);
		r->acc[i] += v;
		r->m[i] = beta * r->m[i] + (1.0 - beta) * v;
	}
}

static double
norm(const double *v, uint64_t n)
{
	double s = 0.0;

	for (uint64_t i = 0; i < n; i++)
		s += v[i] * v[i];
	return sqrt(s);
}

static double
abs_mean(const double *v, uint64_t n)
{
	double s = 0.0;

	for (uint64_t i = 0; i < n; i++)
		s += fabs(v[i]);
	return s / (double)n;
}

static void
assert_close(double got, double want, double rel)
{
	double tol = rel * (fabs(want) > 1.0 ? fabs(want) : 1.0);

	if (fabs(got - want) > tol)
		fail_msg("got %.17g, want %.17g (tolerance %.3g)", got, want,
		    tol);
}

/* Five steps of four layers at a kern_precision, the sums within rel. */
static void
check_window(int precision, double rel)
{
	const uint64_t sizes[] = { 1, 7, 1001, 4099 };
	bellows_layer layers[4];
	com_layer_stats stats[4];
	reference ref[4];
	agent_window w;
	float *g = malloc(4099 * sizeof(float));
	kern_config kcfg;

	assert_non_null(g);
	memset(layers, 0, sizeof(layers));
	for (int i = 0; i < 4; i++) {
		layers[i].name = "x";
		layers[i].numel = sizes[i];
		layers[i].flags = BELLOWS_LAYER_MOMENTUM;
		memset(&ref[i], 0, sizeof(ref[i]));
		ref[i].acc = calloc(sizes[i], sizeof(double));
		ref[i].m = calloc(sizes[i], sizeof(double));
		assert_non_null(ref[i].acc);
		assert_non_null(ref[i].m);
	}
	kern_config_init(&kcfg);
	kcfg.precision = precision;
	assert_int_equal(agent_window_init_with(&w, layers, 4, 0.9, &kcfg), 0);

	for (uint64_t step = 10; step < 15; step++) {
		for (int i = 0; i < 4; i++) {
			fill(g, sizes[i], (unsigned)(step * 4 + i));
			assert_int_equal(agent_window_observe(&w, (uint32_t)i,
					     g, sizes[i], step),
			    0);
			reference_add(&ref[i], g, sizes[i], 0.9);
		}
	}
	agent_window_finish(&w, stats);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(stats[i].layer, i);
		assert_int_equal(stats[i].count, ref[i].count);
		assert_int_equal(stats[i].nonzero, ref[i].nonzero);
		assert_int_equal(stats[i].nonfinite, 0);
		assert_int_equal(stats[i].observed_steps, 5);
		assert_close(stats[i].sum_sq, ref[i].sum_sq, rel);
		assert_close(stats[i].abs_sum, ref[i].abs_sum, rel);
		assert_close(stats[i].max_abs, ref[i].max_abs, 0.0);
		assert_close(stats[i].acc_norm, norm(ref[i].acc, sizes[i]),
		    1e-6);
		assert_close(stats[i].momentum_abs_mean,
		    abs_mean(ref[i].m, sizes[i]), 1e-6);
	}
	agent_window_fini(&w);
	for (int i = 0; i < 4; i++) {
		free(ref[i].acc);
		free(ref[i].m);
	}
	free(g);
}

static void
test_window_statistics_match_reference_over_several_steps(void **state)
{
	(void)state;
	check_window(KERN_PRECISION_EXACT, 1e-12);
	check_window(KERN_PRECISION_RELAXED, KERN_RELAXED_BOUND);
}

static void
test_window_counts_nan_and_inf_and_leaves_them_out_of_sums(void **state)
{
	bellows_layer layer = { .name = "l",
		.numel = 6,
		.flags = BELLOWS_LAYER_MOMENTUM };
	float g[6] = { 1.0f, NAN, -2.0f, INFINITY, 0.0f, -INFINITY };
	com_layer_stats s;
	agent_window w;

	(void)state;
	assert_int_equal(agent_window_init(&w, &layer, 1, 0.5), 0);
	assert_int_equal(agent_window_observe(&w, 0, g, 6, 0), 0);
	assert_int_equal(agent_window_observe(&w, 0, g, 6, 1), 0);
	agent_window_finish(&w, &s);
	assert_int_equal(s.count, 12);
	assert_int_equal(s.nonfinite, 6);
	assert_int_equal(s.nonzero, 4);
	assert_true(s.sum_sq == 10.0);
	assert_true(s.abs_sum == 6.0);
	assert_true(s.max_abs == 2.0);
	/* acc = {2, 0, -4, 0, 0, 0} */
	assert_close(s.acc_norm, sqrt(20.0), 1e-12);
	/* m after two steps of beta 0.5: 0.75 g on finite entries. */
	assert_close(s.momentum_abs_mean, (0.75 + 1.5) / 6.0, 1e-7);
	agent_window_fini(&w);
}

static void
test_window_of_zeros_has_no_nonzero_and_zero_norms(void **state)
{
	bellows_layer layer = { .name = "z", .numel = 33 };
	float g[33];
	com_layer_stats s;
	agent_window w;

	(void)state;
	memset(g, 0, sizeof(g));
	assert_int_equal(agent_window_init(&w, &layer, 1, 0.9), 0);
	assert_int_equal(agent_window_observe(&w, 0, g, 33, 3), 0);
	agent_window_finish(&w, &s);
	assert_int_equal(s.count, 33);
	assert_int_equal(s.nonzero, 0);
	assert_true(s.sum_sq == 0.0 && s.abs_sum == 0.0 && s.max_abs == 0.0);
	assert_true(s.acc_norm == 0.0);
	assert_true(s.momentum_abs_mean == 0.0);
	agent_window_fini(&w);
}

static void
test_window_accumulators_turn_off_and_on_at_window_starts(void **state)
{
	bellows_layer layers[2] = {
		{ .name = "a", .numel = 3, .flags = BELLOWS_LAYER_MOMENTUM },
		{ .name = "b",
		    .numel = 3,
		    .flags = BELLOWS_LAYER_NO_ACCUMULATOR },
	};
	float g[3] = { 1.0f, -1.0f, 2.0f };
	com_layer_stats s[2];
	agent_window w;

	(void)state;
	assert_int_equal(agent_window_init(&w, layers, 2, 0.5), 0);
	assert_int_equal(agent_window_accumulators(&w), 1);

	/* Off: no accumulator, acc_norm 0, the other statistics and the
	 * momentum as before. */
	assert_int_equal(agent_window_accumulate(&w, false), 0);
	assert_int_equal(agent_window_accumulators(&w), 0);
	assert_int_equal(agent_window_observe(&w, 0, g, 3, 0), 0);
	assert_int_equal(agent_window_observe(&w, 0, g, 3, 1), 0);
	agent_window_finish(&w, s);
	assert_int_equal(s[0].count, 6);
	assert_true(s[0].sum_sq == 12.0);
	assert_true(s[0].acc_norm == 0.0);
	assert_close(s[0].momentum_abs_mean, 0.75 * 4.0 / 3.0, 1e-7);

	/* On again (twice is once): a zeroed sum of this window's steps;
	 * a layer flagged NO_ACCUMULATOR stays without. */
	assert_int_equal(agent_window_accumulate(&w, true), 0);
	assert_int_equal(agent_window_accumulate(&w, true), 0);
	assert_int_equal(agent_window_accumulators(&w), 1);
	assert_int_equal(agent_window_observe(&w, 0, g, 3, 2), 0);
	assert_int_equal(agent_window_observe(&w, 1, g, 3, 2), 0);
	agent_window_finish(&w, s);
	assert_close(s[0].acc_norm, sqrt(6.0), 1e-12);
	assert_true(s[1].acc_norm == 0.0);
	assert_true(s[1].sum_sq == 6.0);
	agent_window_fini(&w);
}

static void
test_window_accumulator_resets_but_momentum_persists(void **state)
{
	bellows_layer layer = { .name = "a",
		.numel = 3,
		.flags = BELLOWS_LAYER_MOMENTUM };
	float g[3] = { 1.0f, -1.0f, 2.0f };
	com_layer_stats s;
	agent_window w;

	(void)state;
	assert_int_equal(agent_window_init(&w, &layer, 1, 0.5), 0);
	assert_int_equal(agent_window_observe(&w, 0, g, 3, 0), 0);
	assert_int_equal(agent_window_observe(&w, 0, g, 3, 1), 0);
	agent_window_finish(&w, &s);
	assert_close(s.acc_norm, 2.0 * sqrt(6.0), 1e-12);
	assert_close(s.momentum_abs_mean, 0.75 * 4.0 / 3.0, 1e-7);

	/* Nothing observed: sums restart, the momentum stays. */
	agent_window_finish(&w, &s);
	assert_int_equal(s.count, 0);
	assert_int_equal(s.observed_steps, 0);
	assert_true(s.acc_norm == 0.0);
	assert_close(s.momentum_abs_mean, 0.75 * 4.0 / 3.0, 1e-7);

	assert_int_equal(agent_window_observe(&w, 0, g, 3, 2), 0);
	agent_window_finish(&w, &s);
	assert_close(s.acc_norm, sqrt(6.0), 1e-12);
	assert_close(s.momentum_abs_mean, 0.875 * 4.0 / 3.0, 1e-7);
	agent_window_fini(&w);
}

static void
test_window_counts_a_step_once_when_a_layer_is_observed_twice(void **state)
{
	bellows_layer layer = { .name = "t", .numel = 2 };
	float g[2] = { 3.0f, 4.0f };
	com_layer_stats s;
	agent_window w;

	(void)state;
	assert_int_equal(agent_window_init(&w, &layer, 1, 0.9), 0);
	assert_int_equal(agent_window_observe(&w, 0, g, 2, 5), 0);
	assert_int_equal(agent_window_observe(&w, 0, g, 2, 5), 0);
	assert_int_equal(agent_window_observe(&w, 0, g, 2, 6), 0);
	agent_window_finish(&w, &s);
	assert_int_equal(s.observed_steps, 2);
	assert_int_equal(s.count, 6);
	assert_true(s.sum_sq == 75.0);
	assert_close(s.acc_norm, 15.0, 1e-12);
	agent_window_fini(&w);
}

static void
test_window_without_accumulator_reports_zero_norm(void **state)
{
	bellows_layer layer = { .name = "n",
		.numel = 2,
		.flags = BELLOWS_LAYER_NO_ACCUMULATOR };
	float g[2] = { 3.0f, 4.0f };
	com_layer_stats s;
	agent_window w;

	(void)state;
	assert_int_equal(agent_window_init(&w, &layer, 1, 0.9), 0);
	assert_null(w.layers[0].acc);
	assert_null(w.layers[0].momentum);
	assert_int_equal(agent_window_observe(&w, 0, g, 2, 0), 0);
	agent_window_finish(&w, &s);
	assert_true(s.sum_sq == 25.0);
	assert_true(s.acc_norm == 0.0);
	assert_true(s.momentum_abs_mean == 0.0);
	agent_window_fini(&w);
}

static void
test_window_rejects_bad_layer_null_grad_and_wrong_length(void **state)
{
	bellows_layer layer = { .name = "r", .numel = 4 };
	float g[4] = { 1.0f, 2.0f, 3.0f, 4.0f };
	com_layer_stats s;
	agent_window w;

	(void)state;
	assert_int_equal(agent_window_init(&w, &layer, 1, 0.9), 0);
	assert_int_equal(agent_window_observe(&w, 1, g, 4, 0), BELLOWS_EINVAL);
	assert_int_equal(agent_window_observe(&w, 0, NULL, 4, 0),
	    BELLOWS_EINVAL);
	assert_int_equal(agent_window_observe(&w, 0, g, 3, 0), BELLOWS_EINVAL);
	assert_int_equal(agent_window_observe(&w, 0, g, 5, 0), BELLOWS_EINVAL);
	agent_window_finish(&w, &s);
	assert_int_equal(s.count, 0);
	agent_window_fini(&w);
	agent_window_fini(&w);
}

static void
test_window_averages_activation_statistics_and_starts_afresh(void **state)
{
	bellows_layer layers[2] = { { .name = "conv", .numel = 4 },
		{ .name = "fc", .numel = 2 } };
	float g[4] = { 1.0f, 2.0f, 3.0f, 4.0f };
	com_layer_stats s[2];
	agent_window w;

	(void)state;
	assert_int_equal(agent_window_init(&w, layers, 2, 0.9), 0);
	assert_int_equal(agent_window_activation(&w, 0, 0.5, 0.25, 1000, 4000),
	    0);
	assert_int_equal(agent_window_activation(&w, 0, 1.5, 0.75, 3000, 4000),
	    0);
	assert_int_equal(agent_window_activation(&w, 0, 1.0, 1.0, 2000, 4000),
	    0);
	assert_int_equal(agent_window_activation(&w, 2, 1.0, 1.0, 1, 1),
	    BELLOWS_EINVAL);
	assert_int_equal(agent_window_observe(&w, 0, g, 4, 0), 0);
	assert_int_equal(agent_window_finish(&w, s), 0);
	assert_int_equal(s[0].act_steps, 3);
	assert_true(s[0].act_lbar == 1.0);
	assert_true(s[0].act_nonzero == 2.0 / 3.0);
	assert_true(s[0].act_bytes == 2000.0);
	assert_true(s[0].act_raw_bytes == 4000.0);
	assert_true(s[0].sum_sq == 30.0); /* the gradient's, as before */
	assert_int_equal(s[1].act_steps, 0);
	assert_true(s[1].act_lbar == 0.0 && s[1].act_nonzero == 0.0);
	assert_true(s[1].act_bytes == 0.0 && s[1].act_raw_bytes == 0.0);

	/* A window without activations reports none. */
	assert_int_equal(agent_window_finish(&w, s), 0);
	assert_int_equal(s[0].act_steps, 0);
	assert_true(s[0].act_lbar == 0.0 && s[0].act_bytes == 0.0);
	agent_window_fini(&w);
}

/* A layer flagged BELLOWS_LAYER_EXP_HIST reports the float32 biased
 * exponents of its window's gradients (float16 and bfloat16 in their
 * float32 bins); others, and a window it was not observed in, none. */
static void
test_window_reports_the_exponent_histogram_of_flagged_layers_only(void **state)
{
	bellows_layer layers[2] = {
		{ .name = "w", .numel = 4, .flags = BELLOWS_LAYER_EXP_HIST },
		{ .name = "b", .numel = 4 },
	};
	/* 1.0 (127), 0.5 (126), 0 (bin 0), 3.0 (128) */
	float g[4] = { 1.0f, -0.5f, 0.0f, 3.0f };
	/* float16: 1.0 (127), 2^-14, its smallest normal (113), 2^-24, a
	 * subnormal widened to a normal float32 (103), 65504 (142) */
	uint16_t h[4] = { 0x3c00, 0x0400, 0x0001, 0x7bff };
	/* bfloat16: 1.0 (127), -2.0 (128), Inf (255), 0 (0) */
	uint16_t bf[4] = { 0x3f80, 0xc000, 0x7f80, 0x0000 };
	com_layer_stats s[2];
	agent_window w;

	(void)state;
	assert_int_equal(agent_window_init(&w, layers, 2, 0.9), 0);
	assert_int_equal(agent_window_observe(&w, 0, g, 4, 0), 0);
	assert_int_equal(agent_window_observe_as(&w, 0, h, 4, KERN_F16,
			     KERN_HOST, NULL, 1),
	    0);
	assert_int_equal(agent_window_observe(&w, 1, g, 4, 0), 0);
	assert_int_equal(agent_window_finish(&w, s), 0);
	assert_non_null(s[0].exp_hist);
	assert_null(s[1].exp_hist);
	assert_int_equal(s[0].exp_hist[127], 2);
	assert_int_equal(s[0].exp_hist[126], 1);
	assert_int_equal(s[0].exp_hist[0], 1);
	assert_int_equal(s[0].exp_hist[128], 1);
	assert_int_equal(s[0].exp_hist[113], 1);
	assert_int_equal(s[0].exp_hist[103], 1);
	assert_int_equal(s[0].exp_hist[142], 1);
	{
		uint64_t total = 0;

		for (int b = 0; b < 256; b++)
			total += s[0].exp_hist[b];
		assert_int_equal(total, s[0].count);
	}

	/* The next window starts afresh. */
	assert_int_equal(agent_window_observe_as(&w, 0, bf, 4, KERN_BF16,
			     KERN_HOST, NULL, 2),
	    0);
	assert_int_equal(agent_window_finish(&w, s), 0);
	assert_non_null(s[0].exp_hist);
	assert_int_equal(s[0].exp_hist[127], 1);
	assert_int_equal(s[0].exp_hist[128], 1);
	assert_int_equal(s[0].exp_hist[255], 1);
	assert_int_equal(s[0].exp_hist[0], 1);
	assert_int_equal(s[0].exp_hist[126], 0);

	/* Not observed: nothing measured, nothing reported. */
	assert_int_equal(agent_window_finish(&w, s), 0);
	assert_null(s[0].exp_hist);
	agent_window_fini(&w);
}

static void
test_window_init_rejects_empty_table_and_zero_numel(void **state)
{
	bellows_layer layer = { .name = "e", .numel = 0 };
	agent_window w;

	(void)state;
	assert_int_equal(agent_window_init(&w, &layer, 0, 0.9), BELLOWS_EINVAL);
	assert_int_equal(agent_window_init(&w, &layer, 1, 0.9), BELLOWS_EINVAL);
	agent_window_fini(&w);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_window_statistics_match_reference_over_several_steps),
		cmocka_unit_test(
		    test_window_counts_nan_and_inf_and_leaves_them_out_of_sums),
		cmocka_unit_test(
		    test_window_of_zeros_has_no_nonzero_and_zero_norms),
		cmocka_unit_test(
		    test_window_accumulator_resets_but_momentum_persists),
		cmocka_unit_test(
		    test_window_accumulators_turn_off_and_on_at_window_starts),
		cmocka_unit_test(
		    test_window_counts_a_step_once_when_a_layer_is_observed_twice),
		cmocka_unit_test(
		    test_window_without_accumulator_reports_zero_norm),
		cmocka_unit_test(
		    test_window_rejects_bad_layer_null_grad_and_wrong_length),
		cmocka_unit_test(
		    test_window_averages_activation_statistics_and_starts_afresh),
		cmocka_unit_test(
		    test_window_init_rejects_empty_table_and_zero_numel),
		cmocka_unit_test(
		    test_window_reports_the_exponent_histogram_of_flagged_layers_only),
	};

	return cmocka_run_group_tests_name("agent window", tests, NULL, NULL);
}
