/* test_observe - the agent's observe calls on the kernels.
 *
 * Through the public API, with no bellowsd (the agent trains on defaults
 * and its first step waits 1 ms for a Welcome that never comes): float16
 * and bfloat16 observations give exactly the window statistics of their
 * float32 widening; a window split over worker threads gives the
 * single-threaded one; device layers are refused with BELLOWS_ENOTSUP where
 * CUDA cannot run and otherwise give the host layer's statistics; and the
 * observe calls refuse mismatched memory, dtypes and lengths; and
 * stats_precision (or BELLOWS_STATS_PRECISION) picks the relaxed or the
 * exact sums, refusing other values.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bellows/agent.h>

#include "kernels/kernels.h"
#include "reference.h"

#define N 70001 /* elements per layer */

static char endpoint[2][128];

static void
config(bellows_agent_config *cfg, const bellows_layer *layers, uint32_t n)
{
	/* Nobody listens there: ZeroMQ keeps retrying in the background. */
	snprintf(endpoint[0], sizeof(endpoint[0]),
	    "ipc:///tmp/bellows-test-observe-%d-c", (int)getpid());
	snprintf(endpoint[1], sizeof(endpoint[1]),
	    "ipc:///tmp/bellows-test-observe-%d-p", (int)getpid());
	bellows_agent_config_init(cfg);
	cfg->control = endpoint[0];
	cfg->publish = endpoint[1];
	cfg->job = "observe";
	cfg->world = 1;
	cfg->layers = layers;
	cfg->n_layers = n;
	cfg->window_steps = 1;
	cfg->decision_timeout_ms = 1;
}

static void
layer_init(bellows_layer *l, const char *name, uint32_t flags)
{
	memset(l, 0, sizeof(*l));
	l->name = name;
	l->numel = N;
	l->flags = flags;
}

/* Observes layer 0 with `grad` (dtype) and layer 1 with its float32
 * widening over `steps` one-step windows; the last window's statistics of
 * both must be identical. */
static void
test_half_precision_observations_equal_their_float_widening(void **state)
{
	uint16_t *h = ref_alloc(N * sizeof(uint16_t));
	float *f = ref_alloc(N * sizeof(float));
	bellows_layer layers[2];
	bellows_agent_config cfg;

	(void)state;
	layer_init(&layers[0], "half", BELLOWS_LAYER_MOMENTUM);
	layer_init(&layers[1], "float", BELLOWS_LAYER_MOMENTUM);
	for (int dtype = BELLOWS_DTYPE_F16; dtype <= BELLOWS_DTYPE_BF16;
	     dtype++) {
		bellows_agent *a = NULL;
		bellows_layer_stats s[2];

		config(&cfg, layers, 2);
		assert_int_equal(bellows_agent_open(&cfg, &a), 0);
		for (int step = 0; step < 3; step++) {
			ref_fill(h, N, dtype, REF_SPECIALS, (uint64_t)step);
			for (uint64_t i = 0; i < N; i++)
				f[i] = ref_widen(h, i, dtype);
			assert_int_equal(bellows_agent_step_begin(a, NULL), 0);
			assert_int_equal(bellows_agent_observe_typed(a, 0, h, N,
					     dtype),
			    0);
			assert_int_equal(bellows_agent_observe(a, 1, f, N), 0);
			assert_int_equal(bellows_agent_step_end(a, NULL), 0);
		}
		assert_int_equal(bellows_agent_window_stats(a, 0, &s[0]), 0);
		assert_int_equal(bellows_agent_window_stats(a, 1, &s[1]), 0);
		assert_int_equal(s[0].count, N);
		assert_true(s[0].nonfinite > 0 && s[0].nonzero > 0);
		assert_true(s[0].window == s[1].window &&
		    s[0].count == s[1].count && s[0].nonzero == s[1].nonzero &&
		    s[0].nonfinite == s[1].nonfinite &&
		    s[0].sum_sq == s[1].sum_sq &&
		    s[0].abs_sum == s[1].abs_sum &&
		    s[0].max_abs == s[1].max_abs &&
		    s[0].acc_norm == s[1].acc_norm &&
		    s[0].momentum_abs_mean == s[1].momentum_abs_mean &&
		    s[0].observed_steps == s[1].observed_steps);
		bellows_agent_close(&a);
	}
	ref_free(f);
	ref_free(h);
}

static void
test_stats_threads_give_the_single_thread_window(void **state)
{
	const uint64_t big = 3u << 20; /* above the 1 Mi split threshold */
	float *g = ref_alloc(big * sizeof(float));
	bellows_layer layer;
	bellows_layer_stats s[2];
	bellows_agent_config cfg;

	(void)state;
	layer_init(&layer, "big", BELLOWS_LAYER_MOMENTUM);
	layer.numel = big;
	ref_fill(g, big, KERN_F32, REF_SPECIALS, 3);
	for (int k = 0; k < 2; k++) {
		bellows_agent *a = NULL;

		config(&cfg, &layer, 1);
		cfg.stats_threads = k == 0 ? 0 : 2;
		assert_int_equal(bellows_agent_open(&cfg, &a), 0);
		for (int step = 0; step < 2; step++) {
			assert_int_equal(bellows_agent_step_begin(a, NULL), 0);
			assert_int_equal(bellows_agent_observe(a, 0, g, big),
			    0);
			assert_int_equal(bellows_agent_observe(a, 0, g, big),
			    0);
			assert_int_equal(bellows_agent_step_end(a, NULL), 0);
		}
		assert_int_equal(bellows_agent_window_stats(a, 0, &s[k]), 0);
		bellows_agent_close(&a);
	}
	assert_int_equal(s[0].count, 2 * big);
	assert_int_equal(s[0].count, s[1].count);
	assert_int_equal(s[0].nonzero, s[1].nonzero);
	assert_int_equal(s[0].nonfinite, s[1].nonfinite);
	assert_true(s[0].max_abs == s[1].max_abs);
	/* Elementwise updates: the same bits, so the same reductions. */
	assert_true(s[0].acc_norm == s[1].acc_norm);
	assert_true(s[0].momentum_abs_mean == s[1].momentum_abs_mean);
	assert_true(fabs(s[0].sum_sq - s[1].sum_sq) <= 1e-13 * s[0].sum_sq);
	assert_true(fabs(s[0].abs_sum - s[1].abs_sum) <= 1e-13 * s[0].abs_sum);

	config(&cfg, &layer, 1);
	cfg.stats_threads = KERN_MAX_THREADS + 1;
	{
		bellows_agent *a = NULL;

		assert_int_equal(bellows_agent_open(&cfg, &a), BELLOWS_EINVAL);
		assert_null(a);
	}
	ref_free(g);
}

static void
test_observe_refuses_wrong_memory_dtype_and_length(void **state)
{
	float *g = ref_alloc(N * sizeof(float));
	bellows_layer layer;
	bellows_agent_config cfg;
	bellows_agent *a = NULL;

	(void)state;
	memset(g, 0, N * sizeof(float));
	layer_init(&layer, "host", 0);
	config(&cfg, &layer, 1);
	assert_int_equal(bellows_agent_open(&cfg, &a), 0);
	assert_int_equal(bellows_agent_observe_typed(a, 0, g, N,
			     BELLOWS_DTYPE_F32),
	    BELLOWS_ESTATE);
	assert_int_equal(bellows_agent_step_begin(a, NULL), 0);
	assert_int_equal(bellows_agent_observe_typed(a, 0, g, N, 3),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_observe_typed(a, 0, g, N, -1),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_observe_typed(a, 0, g, N - 1,
			     BELLOWS_DTYPE_F16),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_observe_typed(a, 1, g, N,
			     BELLOWS_DTYPE_F32),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_observe_typed(a, 0, NULL, N,
			     BELLOWS_DTYPE_F32),
	    BELLOWS_EINVAL);
	/* A host layer takes no device observations. */
	assert_int_equal(bellows_agent_observe_device(a, 0, g, N,
			     BELLOWS_DTYPE_F32, NULL),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_observe_typed(a, 0, g, N,
			     BELLOWS_DTYPE_BF16),
	    0);
	assert_int_equal(bellows_agent_observe_device(NULL, 0, g, N,
			     BELLOWS_DTYPE_F32, NULL),
	    BELLOWS_EINVAL);
	assert_int_equal(bellows_agent_step_end(a, NULL), 0);
	bellows_agent_close(&a);
	ref_free(g);
}

/* Device layers: BELLOWS_ENOTSUP where CUDA cannot run; otherwise a
 * device layer's window equals a host layer's on the same data. */
static void
test_device_layers_need_cuda_and_match_host_layers(void **state)
{
	float *g = ref_alloc(N * sizeof(float));
	bellows_layer layers[2];
	bellows_agent_config cfg;
	bellows_agent *a = NULL;
	bellows_layer_stats s[2];
	kern_backend cuda;
	void *dg = NULL;

	(void)state;
	layer_init(&layers[0], "device",
	    BELLOWS_LAYER_DEVICE | BELLOWS_LAYER_MOMENTUM);
	layer_init(&layers[1], "host", BELLOWS_LAYER_MOMENTUM);
	config(&cfg, layers, 2);
	cfg.stats_precision = "exact"; /* the CUDA sums are the exact ones */
	if (kern_backend_open(&cuda, KERN_CUDA, NULL) != 0) {
		assert_int_equal(bellows_agent_open(&cfg, &a), BELLOWS_ENOTSUP);
		assert_null(a);
		ref_free(g);
		print_message("no CUDA here: device layers are refused with "
			      "BELLOWS_ENOTSUP\n");
		return;
	}
	assert_int_equal(bellows_agent_open(&cfg, &a), 0);
	assert_int_equal(cuda.ops->mem_alloc(cuda.ctx, N * sizeof(float), &dg),
	    0);
	for (int step = 0; step < 3; step++) {
		ref_fill(g, N, KERN_F32, REF_SPECIALS, (uint64_t)step);
		assert_int_equal(cuda.ops->copy_in(cuda.ctx, dg, g,
				     N * sizeof(float), NULL),
		    0);
		assert_int_equal(bellows_agent_step_begin(a, NULL), 0);
		/* Device memory through the host call is refused. */
		assert_int_equal(bellows_agent_observe(a, 0, g, N),
		    BELLOWS_EINVAL);
		assert_int_equal(bellows_agent_observe_device(a, 0, dg, N,
				     BELLOWS_DTYPE_F32, NULL),
		    0);
		assert_int_equal(bellows_agent_observe(a, 1, g, N), 0);
		assert_int_equal(bellows_agent_step_end(a, NULL), 0);
	}
	assert_int_equal(bellows_agent_window_stats(a, 0, &s[0]), 0);
	assert_int_equal(bellows_agent_window_stats(a, 1, &s[1]), 0);
	assert_int_equal(s[0].count, s[1].count);
	assert_int_equal(s[0].nonzero, s[1].nonzero);
	assert_int_equal(s[0].nonfinite, s[1].nonfinite);
	assert_true(s[0].max_abs == s[1].max_abs);
	assert_true(fabs(s[0].sum_sq - s[1].sum_sq) <= 1e-12 * s[1].sum_sq);
	assert_true(
	    fabs(s[0].acc_norm - s[1].acc_norm) <= 1e-12 * s[1].acc_norm);
	assert_true(fabs(s[0].momentum_abs_mean - s[1].momentum_abs_mean) <=
	    1e-12 * s[1].momentum_abs_mean);
	bellows_agent_close(&a);
	cuda.ops->mem_free(cuda.ctx, dg);
	kern_backend_close(&cuda);
	ref_free(g);
}

/* The window of one layer of N REF_NARROW values observed twice, under
 * stats_precision `field` with BELLOWS_STATS_PRECISION `env` (NULL:
 * unset); returns bellows_agent_open's code. */
static int
precision_window(const char *field, const char *env, const float *g,
    bellows_layer_stats *ret)
{
	bellows_layer layer;
	bellows_agent_config cfg;
	bellows_agent *a = NULL;
	int rc;

	layer_init(&layer, "narrow", 0);
	config(&cfg, &layer, 1);
	cfg.stats_precision = field;
	if (env != NULL)
		setenv("BELLOWS_STATS_PRECISION", env, 1);
	else
		unsetenv("BELLOWS_STATS_PRECISION");
	rc = bellows_agent_open(&cfg, &a);
	unsetenv("BELLOWS_STATS_PRECISION");
	if (rc != 0) {
		assert_null(a);
		return rc;
	}
	assert_int_equal(bellows_agent_step_begin(a, NULL), 0);
	assert_int_equal(bellows_agent_observe(a, 0, g, N), 0);
	assert_int_equal(bellows_agent_observe(a, 0, g, N), 0);
	assert_int_equal(bellows_agent_step_end(a, NULL), 0);
	assert_int_equal(bellows_agent_window_stats(a, 0, ret), 0);
	bellows_agent_close(&a);
	return 0;
}

static void
test_stats_precision_picks_relaxed_or_exact_sums(void **state)
{
	float *g = ref_alloc(N * sizeof(float));
	bellows_layer_stats exact, relaxed, s;
	ref_stats ref;

	(void)state;
	ref_fill(g, N, KERN_F32, REF_NARROW, 5);
	memset(&ref, 0, sizeof(ref));
	ref_add(&ref, g, N, KERN_F32);
	ref_add(&ref, g, N, KERN_F32);

	assert_int_equal(precision_window("exact", NULL, g, &exact), 0);
	assert_int_equal(precision_window("relaxed", NULL, g, &relaxed), 0);
	print_message("sum_sq: exact off by %.3g, relaxed by %.3g\n",
	    ref_rel(exact.sum_sq, ref.sum_sq),
	    ref_rel(relaxed.sum_sq, ref.sum_sq));
	assert_true(ref_rel(exact.sum_sq, ref.sum_sq) <= 1e-12);
	assert_true(ref_rel(relaxed.sum_sq, ref.sum_sq) <= KERN_RELAXED_BOUND);
	assert_true(
	    ref_rel(relaxed.abs_sum, ref.abs_sum) <= KERN_RELAXED_BOUND);
	assert_true(relaxed.sum_sq != exact.sum_sq);
	assert_int_equal(relaxed.count, exact.count);
	assert_true(relaxed.max_abs == exact.max_abs);

	/* The default is relaxed; the environment chooses when the field
	 * does not, the field wins over it. */
	assert_int_equal(precision_window(NULL, NULL, g, &s), 0);
	assert_true(s.sum_sq == relaxed.sum_sq);
	assert_int_equal(precision_window(NULL, "", g, &s), 0);
	assert_true(s.sum_sq == relaxed.sum_sq);
	assert_int_equal(precision_window(NULL, "exact", g, &s), 0);
	assert_true(s.sum_sq == exact.sum_sq);
	assert_int_equal(precision_window("relaxed", "exact", g, &s), 0);
	assert_true(s.sum_sq == relaxed.sum_sq);

	assert_int_equal(precision_window("fast", NULL, g, &s), BELLOWS_EINVAL);
	assert_int_equal(precision_window(NULL, "Exact", g, &s),
	    BELLOWS_EINVAL);
	ref_free(g);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_half_precision_observations_equal_their_float_widening),
		cmocka_unit_test(
		    test_stats_threads_give_the_single_thread_window),
		cmocka_unit_test(
		    test_observe_refuses_wrong_memory_dtype_and_length),
		cmocka_unit_test(
		    test_device_layers_need_cuda_and_match_host_layers),
		cmocka_unit_test(
		    test_stats_precision_picks_relaxed_or_exact_sums),
	};

	return cmocka_run_group_tests_name("agent observe on the kernels",
	    tests, NULL, NULL);
}
