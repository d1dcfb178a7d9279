/* test_window - aggregation of one window's reports across ranks.
 *
 * Reports are built by hand with round numbers so every sum, maximum,
 * mean and median below can be checked against a value computed by hand.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <bellows/error.h>

#include "common/stat_table.h"
#include "controller/ctl_window.h"

#define N_LAYERS 2

static const com_layer_info layers[N_LAYERS] = {
	{ .name = "fc1.weight", .numel = 100, .ndim = 2, .shape = { 10, 10 } },
	{ .name = "fc1.bias", .numel = 10, .ndim = 1, .shape = { 10 } },
};

typedef struct fixture {
	ctl_window *win;              /* under test */
	com_decision in_force;        /* state shown to policies */
	com_layer_stats st[N_LAYERS]; /* scratch for reports */
} fixture;

static int
setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	if (com_decision_init(&f->in_force, "job", N_LAYERS) != 0) {
		free(f);
		return -1;
	}
	f->in_force.level[0] = 2;
	f->in_force.level[1] = 0;
	f->in_force.error_bound[0] = 0.25;
	f->in_force.lr_scale = 0.5;
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	fixture *f = *state;

	ctl_window_destroy(&f->win);
	com_decision_fini(&f->in_force);
	free(f);
	return 0;
}

/* A report from `rank` for window 5 whose statistics are scaled by k:
 * layer 0 gets acc_norm k, sum_sq 10k, abs_sum 3k, max_abs k/2, counts
 * 100/50k/k; layer 1 the same plus 1000. Timings: `steps` steps of
 * step_ms_each ms, compute 3/4 of it, comm 1/4. */
static com_report
report(fixture *f, uint32_t rank, double k, uint32_t steps, double step_ms_each)
{
	for (uint32_t l = 0; l < N_LAYERS; l++) {
		double add = l * 1000.0;

		f->st[l] = (com_layer_stats){
			.layer = l,
			.count = 100,
			.nonzero = (uint64_t)(50 * k),
			.nonfinite = (uint64_t)k,
			.sum_sq = 10 * k + add,
			.abs_sum = 3 * k + add,
			.max_abs = k / 2 + add,
			.acc_norm = k + add,
			.momentum_abs_mean = k / 10,
			.observed_steps = steps,
		};
	}
	return (com_report){
		.job = "job",
		.rank = rank,
		.window = 5,
		.first_step = 50 + rank, /* ranks may disagree: min / max */
		.last_step = 59 + rank,
		.n_layers = N_LAYERS,
		.layers = f->st,
		.timings = {
			.steps = steps,
			.step_ms = steps * step_ms_each,
			.compute_ms = steps * step_ms_each * 0.75,
			.comm_ms = steps * step_ms_each * 0.25,
			.floats_sent = 1000 * (rank + 1),
			.floats_raw = 4000 * (rank + 1),
		},
		.lr = 0.01 * (rank + 1),
		.batch_size = 32 + rank,
		.epoch = 7 + rank,
		.seq_in_force = 3,
	};
}

static void
add(fixture *f, uint32_t rank, double k, uint32_t steps, double ms)
{
	com_report r = report(f, rank, k, steps, ms);

	assert_int_equal(ctl_window_add(f->win, &r), 0);
}

static void
test_window_starts_empty(void **state)
{
	fixture *f = *state;
	bellows_window v;

	assert_int_equal(ctl_window_new(5, 3, N_LAYERS, 1234, &f->win), 0);
	assert_int_equal(ctl_window_index(f->win), 5);
	assert_int_equal(ctl_window_opened_ms(f->win), 1234);
	assert_int_equal(ctl_window_reported(f->win), 0);
	assert_false(ctl_window_has(f->win, 0));
	assert_false(ctl_window_has(f->win, 3));
	ctl_window_view(f->win, "job", 3, layers, &f->in_force, &v);
	assert_int_equal(v.ranks_reported, 0);
	assert_true(isnan(v.step_ms_median));
	assert_true(isnan(v.layers[0].grad_norm));
	assert_true(isnan(v.layers[0].grad_norm_rank0));
}

static void
test_window_sums_maxes_and_means_three_ranks(void **state)
{
	fixture *f = *state;
	bellows_window v;
	const bellows_window_layer *l0, *l1;

	assert_int_equal(ctl_window_new(5, 3, N_LAYERS, 0, &f->win), 0);
	/* Out of rank order on purpose. */
	add(f, 2, 3, 10, 30);
	add(f, 0, 1, 10, 10);
	add(f, 1, 2, 5, 20);
	assert_int_equal(ctl_window_reported(f->win), 3);
	assert_true(ctl_window_has(f->win, 0));
	assert_true(ctl_window_has(f->win, 2));

	ctl_window_view(f->win, "job", 3, layers, &f->in_force, &v);
	assert_string_equal(v.job, "job");
	assert_int_equal(v.window, 5);
	assert_int_equal(v.first_step, 50);
	assert_int_equal(v.last_step, 61);
	assert_int_equal(v.world, 3);
	assert_int_equal(v.ranks_reported, 3);
	/* epoch, LR and batch size are rank 0's. */
	assert_int_equal(v.epoch, 7);
	assert_true(v.lr == 0.01);
	assert_int_equal(v.batch_size, 32);
	assert_true(v.lr_scale == 0.5);
	assert_int_equal(v.floats_sent, 6000);
	assert_int_equal(v.floats_raw, 24000);
	/* Per-step means 30, 10, 20 ms: median 20. */
	assert_true(v.step_ms_median == 20);
	assert_true(v.compute_ms_median == 15);
	assert_true(v.comm_ms_median == 5);
	assert_int_equal(v.n_layers, N_LAYERS);

	l0 = &v.layers[0];
	l1 = &v.layers[1];
	assert_string_equal(l0->name, "fc1.weight");
	assert_int_equal(l0->numel, 100);
	assert_int_equal(l0->ndim, 2);
	assert_int_equal(l0->shape[1], 10);
	assert_true(l0->sum_sq == 60);
	assert_true(l0->abs_sum == 18);
	assert_true(l0->max_abs == 1.5);
	assert_int_equal(l0->count, 300);
	assert_int_equal(l0->nonzero, 300);
	assert_int_equal(l0->nonfinite, 6);
	assert_true(fabs(l0->momentum_abs_mean - 0.2) < 1e-12);
	/* The norm of the summed gradient is rank 0's by default. */
	assert_true(l0->grad_norm_rank0 == 1);
	assert_true(l0->grad_norm_mean == 2);
	assert_true(l0->grad_norm == 1);
	assert_true(l0->level == 2);
	assert_true(l0->error_bound == 0.25);

	assert_true(l1->sum_sq == 3060);
	assert_true(l1->max_abs == 1001.5);
	assert_true(l1->grad_norm_rank0 == 1001);
	assert_true(l1->grad_norm_mean == 1002);
	assert_true(l1->level == 0);
}

static void
test_window_uses_the_mean_norm_without_rank_zero(void **state)
{
	fixture *f = *state;
	bellows_window v;

	assert_int_equal(ctl_window_new(5, 4, N_LAYERS, 0, &f->win), 0);
	add(f, 3, 4, 10, 40);
	add(f, 1, 1, 10, 10);
	ctl_window_view(f->win, "job", 4, layers, &f->in_force, &v);
	assert_true(isnan(v.layers[0].grad_norm_rank0));
	assert_true(v.layers[0].grad_norm_mean == 2.5);
	assert_true(v.layers[0].grad_norm == 2.5);
	/* Even count: the mean of the two middle values, 10 and 40. */
	assert_true(v.step_ms_median == 25);
	assert_int_equal(v.first_step, 51);
	assert_int_equal(v.last_step, 62);
	/* Without rank 0, the first reporter's epoch. */
	assert_int_equal(v.epoch, 10);
}

static void
test_window_medians_odd_and_even_counts(void **state)
{
	fixture *f = *state;
	bellows_window v;

	assert_int_equal(ctl_window_new(5, 5, N_LAYERS, 0, &f->win), 0);
	add(f, 0, 1, 10, 50);
	ctl_window_view(f->win, "job", 5, layers, &f->in_force, &v);
	assert_true(v.step_ms_median == 50);
	add(f, 1, 1, 4, 10);
	ctl_window_view(f->win, "job", 5, layers, &f->in_force, &v);
	assert_true(v.step_ms_median == 30);
	add(f, 2, 1, 8, 90);
	ctl_window_view(f->win, "job", 5, layers, &f->in_force, &v);
	assert_true(v.step_ms_median == 50);
	add(f, 3, 1, 1, 20);
	ctl_window_view(f->win, "job", 5, layers, &f->in_force, &v);
	/* 10, 20, 50, 90 */
	assert_true(v.step_ms_median == 35);
	/* A report of zero steps counts as one: no division by zero. */
	add(f, 4, 1, 0, 0);
	ctl_window_view(f->win, "job", 5, layers, &f->in_force, &v);
	/* 0, 10, 20, 50, 90 */
	assert_true(v.step_ms_median == 20);
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median of n values by sorting a copy: the reference. */
static double
sorted_median(const double *v, uint32_t n)
{
	double *s = malloc(sizeof(double) * n), m;

	assert_non_null(s);
	memcpy(s, v, sizeof(double) * n);
	qsort(s, n, sizeof(double), cmp_double);
	m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
	free(s);
	return m;
}

/* Value i of n in one of the orders a window's medians must not care
 * about: random, all equal, few distinct, ascending, descending, organ
 * pipe, sawtooth. */
static double
pattern_value(int pattern, uint32_t i, uint32_t n, uint64_t *rng)
{
	*rng = *rng * 6364136223846793005u + 1442695040888963407u;
	switch (pattern) {
	case 0:
		return (double)(*rng >> 11) / 9007199254740992.0 * 1000.0;
	case 1:
		return 42.5;
	case 2:
		return (double)((*rng >> 33) % 3);
	case 3:
		return i * 0.5;
	case 4:
		return (n - i) * 0.25;
	case 5:
		return i < n / 2 ? i : n - i;
	default:
		return i % 7 + 0.125 * (i % 3);
	}
}

/* The per-step timings' medians and the per-tensor ones (GATED_MEDIAN)
 * are what a sort of the ranks' values gives, whatever their order and
 * count: small and large worlds, odd and even, ties. */
static void
test_window_medians_match_a_sort_over_many_ranks(void **state)
{
	static const uint32_t worlds[] = { 1, 2, 3, 4, 5, 7, 8, 31, 64, 1000,
		1001, 10000 };
	fixture *f = *state;
	uint64_t rng = 12345;

	for (size_t wi = 0; wi < sizeof(worlds) / sizeof(worlds[0]); wi++) {
		uint32_t n = worlds[wi];
		double *step = malloc(sizeof(double) * n);
		double *raw = malloc(sizeof(double) * n);

		assert_non_null(step);
		assert_non_null(raw);
		for (int p = 0; p < 7; p++) {
			bellows_window v;

			assert_int_equal(ctl_window_new(5, n, N_LAYERS, 0,
					     &f->win),
			    0);
			for (uint32_t r = 0; r < n; r++) {
				com_report rep;

				step[r] = pattern_value(p, r, n, &rng);
				raw[r] = pattern_value(p, n - 1 - r, n, &rng);
				rep = report(f, r, 1, 1, step[r]);
				f->st[1].comm_raw_n = 1;
				f->st[1].comm_raw_ms = raw[r];
				assert_int_equal(ctl_window_add(f->win, &rep),
				    0);
			}
			ctl_window_view(f->win, "job", n, layers, &f->in_force,
			    &v);
			assert_true(v.step_ms_median == sorted_median(step, n));
			assert_true(
			    v.layers[1].comm_raw_ms == sorted_median(raw, n));
			/* Taking them reorders the values kept: a second
			 * view reads the same. */
			ctl_window_view(f->win, "job", n, layers, &f->in_force,
			    &v);
			assert_true(
			    v.layers[1].comm_raw_ms == sorted_median(raw, n));
			ctl_window_destroy(&f->win);
		}
		free(step);
		free(raw);
	}
}

static void
test_window_refuses_a_duplicate_report(void **state)
{
	fixture *f = *state;
	com_report again;
	bellows_window v;

	assert_int_equal(ctl_window_new(5, 2, N_LAYERS, 0, &f->win), 0);
	add(f, 1, 2, 10, 20);
	again = report(f, 1, 100, 10, 1000);
	assert_int_equal(ctl_window_add(f->win, &again), BELLOWS_EBUSY);
	assert_int_equal(ctl_window_reported(f->win), 1);
	/* The duplicate changed nothing. */
	ctl_window_view(f->win, "job", 2, layers, &f->in_force, &v);
	assert_true(v.layers[0].sum_sq == 20);
	assert_true(v.step_ms_median == 20);
	assert_int_equal(v.floats_sent, 2000);
}

static void
test_window_counts_layers_missing_from_a_report(void **state)
{
	fixture *f = *state;
	com_report r;
	bellows_window v;

	assert_int_equal(ctl_window_new(5, 2, N_LAYERS, 0, &f->win), 0);
	add(f, 0, 2, 10, 20);
	r = report(f, 1, 4, 10, 20);
	r.n_layers = 1; /* rank 1 did not observe layer 1 */
	assert_int_equal(ctl_window_add(f->win, &r), 0);
	ctl_window_view(f->win, "job", 2, layers, &f->in_force, &v);
	assert_true(v.layers[0].grad_norm_mean == 3);
	assert_true(v.layers[1].grad_norm_mean == 1002);
	assert_true(v.layers[1].sum_sq == 1020);
}

/* Ranks 0..3 of a 5-rank job, each with different new statistics:
 * activations on layer 0 from ranks 0 and 2 only; per-tensor times on
 * layer 1 raw from ranks 0, 1, 3 and compressed from ranks 1, 3;
 * backward/codec times from ranks 0..2; memory from all; collectives
 * from ranks 1 and 3. Rank 4 never reports. */
static void
add_new_stats(fixture *f)
{
	static const com_comm_sample c1[2] = {
		{ .bytes = 4096, .ms = 0.5, .count = 10 },
		{ .bytes = 1024, .ms = 0.25, .count = 3, .compressed = true },
	};
	static const com_comm_sample c3[1] = {
		{ .bytes = 4096, .ms = 0.75, .count = 9 },
	};

	for (uint32_t rank = 0; rank < 4; rank++) {
		com_report r = report(f, rank, 1, 10, 20);
		com_layer_stats *a = &f->st[0], *b = &f->st[1];

		if (rank == 0 || rank == 2) {
			a->act_steps = 10;
			a->act_lbar = rank == 0 ? 1.0 : 3.0;
			a->act_nonzero = rank == 0 ? 0.25 : 0.75;
			a->act_bytes = rank == 0 ? 100 : 300;
			a->act_raw_bytes = 1000;
		}
		if (rank != 2) {
			b->comm_raw_n = 5;
			b->comm_raw_ms = 1.0 + rank; /* 1, 2, 4 */
		}
		if (rank == 1 || rank == 3) {
			b->comm_comp_n = 2;
			b->comm_comp_ms = rank == 1 ? 0.5 : 1.5;
			b->codec_ms = rank == 1 ? 0.125 : 0.375;
		}
		if (rank < 3) {
			/* per step: 4, 8, 6 and 1, 2, 3 */
			r.timings.backward_ms = 10.0 *
			    (rank == 0          ? 4
				    : rank == 1 ? 8
						: 6);
			r.timings.codec_ms = 10.0 * (rank + 1);
		}
		r.timings.mem_device_used = 1000 * (rank + 1);
		r.timings.mem_device_total = rank == 3 ? 0 : 8000 - rank;
		r.timings.mem_host_used = 500 - rank;
		r.timings.saved_bytes = rank == 2 ? 6000 : 100;
		if (rank == 1) {
			r.n_comm = 2;
			r.comm = (com_comm_sample *)c1;
		} else if (rank == 3) {
			r.n_comm = 1;
			r.comm = (com_comm_sample *)c3;
		}
		assert_int_equal(ctl_window_add(f->win, &r), 0);
	}
}

static void
test_window_means_activations_over_the_ranks_that_measured(void **state)
{
	fixture *f = *state;
	bellows_window v;

	assert_int_equal(ctl_window_new(5, 5, N_LAYERS, 0, &f->win), 0);
	add_new_stats(f);
	ctl_window_view(f->win, "job", 5, layers, &f->in_force, &v);
	assert_int_equal(v.layers[0].act_steps, 20);
	assert_true(v.layers[0].act_lbar == 2.0);
	assert_true(v.layers[0].act_nonzero == 0.5);
	assert_true(v.layers[0].act_bytes == 200);
	assert_true(v.layers[0].act_raw_bytes == 1000);
	/* Nobody measured layer 1's: all 0. */
	assert_int_equal(v.layers[1].act_steps, 0);
	assert_true(v.layers[1].act_lbar == 0 && v.layers[1].act_bytes == 0);
}

static void
test_window_medians_per_tensor_times_and_nan_when_unmeasured(void **state)
{
	fixture *f = *state;
	bellows_window v;

	assert_int_equal(ctl_window_new(5, 5, N_LAYERS, 0, &f->win), 0);
	add_new_stats(f);
	ctl_window_view(f->win, "job", 5, layers, &f->in_force, &v);
	/* Raw: ranks 0, 1, 3 gave 1, 2, 4: median 2 (odd count). */
	assert_true(v.layers[1].comm_raw_ms == 2.0);
	assert_int_equal(v.layers[1].comm_raw_n, 15);
	/* Compressed: 0.5 and 1.5: median 1 (even count); codec likewise. */
	assert_true(v.layers[1].comm_comp_ms == 1.0);
	assert_true(v.layers[1].codec_ms == 0.25);
	assert_int_equal(v.layers[1].comm_comp_n, 4);
	/* Layer 0 was never timed. */
	assert_true(isnan(v.layers[0].comm_raw_ms));
	assert_true(isnan(v.layers[0].comm_comp_ms));
	assert_true(isnan(v.layers[0].codec_ms));
	assert_int_equal(v.layers[0].comm_raw_n + v.layers[0].comm_comp_n, 0);
	/* A second view reads the same. */
	ctl_window_view(f->win, "job", 5, layers, &f->in_force, &v);
	assert_true(v.layers[1].comm_raw_ms == 2.0);
}

static void
test_window_medians_backward_and_codec_and_bounds_memory(void **state)
{
	fixture *f = *state;
	bellows_window v;

	assert_int_equal(ctl_window_new(5, 5, N_LAYERS, 0, &f->win), 0);
	add_new_stats(f);
	ctl_window_view(f->win, "job", 5, layers, &f->in_force, &v);
	/* Per-step means 4, 8, 6 (rank 3 did not measure): median 6. */
	assert_true(v.backward_ms_median == 6.0);
	/* 1, 2, 3: median 2. */
	assert_true(v.codec_ms_median == 2.0);
	assert_true(v.mem_device_used == 4000);
	/* The smallest device among the ranks that gave one. */
	assert_true(v.mem_device_total == 7998);
	assert_true(v.mem_host_used == 500);
	assert_true(v.saved_bytes == 6000); /* the largest rank */
}

/* Ranks 0 and 1 sent fc1.weight at levels 1 and 2 (0 and 0 for the
 * bias); rank 2's agent predates the statistic: its gate is 0 and its
 * value, whatever it says, counts for nothing. */
static void
test_window_takes_the_largest_applied_level_of_the_ranks_that_sent_one(
    void **state)
{
	fixture *f = *state;
	static const double sent[3][N_LAYERS] = { { 1, 0 }, { 2, 0 },
		{ 7, 7 } };
	bellows_window v;

	assert_int_equal(ctl_window_new(5, 3, N_LAYERS, 0, &f->win), 0);
	for (uint32_t r = 0; r < 3; r++) {
		com_report rep = report(f, r, 1, 10, 20);

		for (uint32_t l = 0; l < N_LAYERS; l++) {
			f->st[l].level_applied_n = r < 2 ? 1 : 0;
			f->st[l].level_applied = sent[r][l];
		}
		assert_int_equal(ctl_window_add(f->win, &rep), 0);
	}
	ctl_window_view(f->win, "job", 3, layers, &f->in_force, &v);
	assert_true(v.layers[0].level_applied == 2);
	/* 0 is a level: sent raw, not "not reported". */
	assert_true(v.layers[1].level_applied == 0);
	/* The decided level stays beside it. */
	assert_true(v.layers[0].level == 2 && v.layers[1].level == 0);
}

static void
test_window_reads_an_applied_level_no_rank_sent_as_nan(void **state)
{
	fixture *f = *state;
	bellows_window v;

	assert_int_equal(ctl_window_new(5, 2, N_LAYERS, 0, &f->win), 0);
	add(f, 0, 1, 10, 20);
	add(f, 1, 1, 10, 20);
	ctl_window_view(f->win, "job", 2, layers, &f->in_force, &v);
	assert_true(isnan(v.layers[0].level_applied));
	assert_true(isnan(v.layers[1].level_applied));
}

static void
test_window_keeps_every_ranks_collectives_with_its_rank(void **state)
{
	fixture *f = *state;
	bellows_window v;

	assert_int_equal(ctl_window_new(5, 5, N_LAYERS, 0, &f->win), 0);
	add_new_stats(f);
	ctl_window_view(f->win, "job", 5, layers, &f->in_force, &v);
	assert_int_equal(v.n_comm, 3);
	assert_int_equal(v.comm[0].rank, 1);
	assert_int_equal(v.comm[0].bytes, 4096);
	assert_int_equal(v.comm[0].count, 10);
	assert_false(v.comm[0].compressed);
	assert_int_equal(v.comm[1].rank, 1);
	assert_true(v.comm[1].compressed && v.comm[1].ms == 0.25);
	assert_int_equal(v.comm[2].rank, 3);
	assert_true(v.comm[2].ms == 0.75);
}

static void
test_window_reads_nothing_measured_as_zero(void **state)
{
	fixture *f = *state;
	bellows_window v;

	assert_int_equal(ctl_window_new(5, 2, N_LAYERS, 0, &f->win), 0);
	add(f, 0, 1, 10, 20);
	add(f, 1, 1, 10, 20);
	ctl_window_view(f->win, "job", 2, layers, &f->in_force, &v);
	assert_true(v.backward_ms_median == 0 && v.codec_ms_median == 0);
	assert_true(v.mem_device_used == 0 && v.mem_device_total == 0);
	assert_true(v.mem_host_used == 0);
	assert_int_equal(v.n_comm, 0);
	assert_int_equal(v.calibrate_until, 0);
	assert_false(v.compression_off);
	assert_int_equal(v.size_threshold, 0);
}

static void
test_window_shows_the_gate_threshold_and_calibration_in_force(void **state)
{
	fixture *f = *state;
	bellows_window v;

	assert_int_equal(ctl_window_new(5, 1, N_LAYERS, 0, &f->win), 0);
	add(f, 0, 1, 10, 20);
	f->in_force.compression_off = true;
	f->in_force.size_threshold = 2200000;
	f->in_force.apply_step = 61;
	f->in_force.calibrate_steps = 40;
	ctl_window_view(f->win, "job", 1, layers, &f->in_force, &v);
	assert_true(v.compression_off);
	assert_int_equal(v.size_threshold, 2200000);
	assert_int_equal(v.calibrate_until, 101);
	/* Saturated, never wrapped. */
	f->in_force.apply_step = UINT64_MAX - 5;
	assert_int_equal(ctl_window_calibrate_until(&f->in_force), UINT64_MAX);
	f->in_force.calibrate_steps = 0;
	assert_int_equal(ctl_window_calibrate_until(&f->in_force), 0);
}

/* The history's columns map to the view's fields the table names; a
 * column holds what the view shows for it. */
static void
test_window_maps_history_columns_to_view_fields(void **state)
{
	const com_stat *st;

	(void)state;
	for (uint32_t i = 0; i < COM_N_LSTATS; i++) {
		st = &com_layer_stat_table[i];
		assert_int_equal(ctl_window_layer_col(i, 0) == SIZE_MAX,
		    st->wcol == NULL);
		assert_int_equal(ctl_window_layer_col(i, 1) == SIZE_MAX,
		    st->wcol2 == NULL);
		assert_true(ctl_window_layer_col(i, 0) == SIZE_MAX ||
		    ctl_window_layer_col(i, 0) < sizeof(bellows_window_layer));
	}
	for (uint32_t i = 0; i < COM_N_TSTATS; i++) {
		st = &com_timing_stat_table[i];
		assert_int_equal(ctl_window_timing_col(i) == SIZE_MAX,
		    st->wcol == NULL);
	}
	assert_int_equal(ctl_window_layer_col(COM_LSTAT_acc_norm, 0),
	    offsetof(bellows_window_layer, grad_norm_rank0));
	assert_int_equal(ctl_window_layer_col(COM_LSTAT_acc_norm, 1),
	    offsetof(bellows_window_layer, grad_norm_mean));
	assert_int_equal(ctl_window_layer_col(COM_LSTAT_comm_comp_n, 0),
	    offsetof(bellows_window_layer, comm_comp_n));
	assert_int_equal(ctl_window_timing_col(COM_TSTAT_step_ms),
	    offsetof(bellows_window, step_ms_median));
	assert_int_equal(ctl_window_timing_col(COM_TSTAT_mem_device_total),
	    offsetof(bellows_window, mem_device_total));
	assert_int_equal(ctl_window_timing_col(COM_TSTAT_steps), SIZE_MAX);
	assert_int_equal(ctl_window_layer_col(COM_N_LSTATS, 0), SIZE_MAX);
	assert_int_equal(ctl_window_timing_col(COM_N_TSTATS), SIZE_MAX);
}

static void
test_window_destroy_is_null_safe(void **state)
{
	ctl_window *w = NULL;

	(void)state;
	ctl_window_destroy(NULL);
	ctl_window_destroy(&w);
	assert_null(w);
}

/* The exponent histograms of the ranks that measured it are summed bin
 * by bin, saturating; a layer nobody measured shows none (NULL, 0). */
static void
test_window_sums_array_statistics_per_bin_over_the_ranks_that_sent_one(
    void **state)
{
	fixture *f = *state;
	uint64_t h0[256], h1[256], h2[256];
	bellows_window v;
	com_report r;

	assert_int_equal(ctl_window_new(5, 3, N_LAYERS, 0, &f->win), 0);
	for (int b = 0; b < 256; b++) {
		h0[b] = (uint64_t)b;
		h1[b] = 1000;
		h2[b] = b == 7 ? UINT64_MAX : 1;
	}
	r = report(f, 0, 1, 10, 100);
	f->st[0].exp_hist = h0;
	assert_int_equal(ctl_window_add(f->win, &r), 0);
	r = report(f, 1, 1, 10, 100); /* measured nothing */
	assert_int_equal(ctl_window_add(f->win, &r), 0);
	r = report(f, 2, 1, 10, 100);
	f->st[0].exp_hist = h1;
	assert_int_equal(ctl_window_add(f->win, &r), 0);
	ctl_window_view(f->win, "job", 3, layers, &f->in_force, &v);
	assert_non_null(v.layers[0].exp_hist);
	assert_int_equal(v.layers[0].exp_hist_len, 256);
	for (int b = 0; b < 256; b++)
		assert_int_equal(v.layers[0].exp_hist[b], (uint64_t)b + 1000);
	assert_null(v.layers[1].exp_hist);
	assert_int_equal(v.layers[1].exp_hist_len, 0);
	assert_int_equal(ctl_window_arrays_dropped(f->win), 0);
	ctl_window_destroy(&f->win);

	/* Saturating: a hostile rank cannot wrap a bin. */
	assert_int_equal(ctl_window_new(6, 3, N_LAYERS, 0, &f->win), 0);
	r = report(f, 0, 1, 10, 100);
	f->st[1].exp_hist = h2;
	assert_int_equal(ctl_window_add(f->win, &r), 0);
	r = report(f, 1, 1, 10, 100);
	f->st[1].exp_hist = h2;
	assert_int_equal(ctl_window_add(f->win, &r), 0);
	ctl_window_view(f->win, "job", 3, layers, &f->in_force, &v);
	assert_int_equal(v.layers[1].exp_hist[7], UINT64_MAX);
	assert_int_equal(v.layers[1].exp_hist[8], 2);
	assert_null(v.layers[0].exp_hist);
}

/* At most 1,024 layers of a window hold array statistics: the rest are
 * left out and counted, so a job stays within its admitted memory. */
static void
test_window_keeps_arrays_of_at_most_1024_layers(void **state)
{
	enum {
		N = 1030
	};
	com_layer_info *info = calloc(N, sizeof(*info));
	com_layer_stats *st = calloc(N, sizeof(*st));
	uint64_t hist[256];
	com_decision in_force;
	ctl_window *w = NULL;
	bellows_window v;
	com_report r;

	(void)state;
	assert_non_null(info);
	assert_non_null(st);
	for (int b = 0; b < 256; b++)
		hist[b] = 1;
	for (uint32_t l = 0; l < N; l++) {
		info[l] = (com_layer_info){ .name = "l", .numel = 1 };
		st[l] = (com_layer_stats){ .layer = l,
			.count = 1,
			.exp_hist = hist };
	}
	assert_int_equal(com_decision_init(&in_force, "job", N), 0);
	r = (com_report){ .job = "job",
		.rank = 0,
		.n_layers = N,
		.layers = st };
	assert_int_equal(ctl_window_new(0, 2, N, 0, &w), 0);
	assert_int_equal(ctl_window_add(w, &r), 0);
	r.rank = 1;
	assert_int_equal(ctl_window_add(w, &r), 0);
	ctl_window_view(w, "job", 2, info, &in_force, &v);
	assert_int_equal(v.layers[1023].exp_hist_len, 256);
	assert_int_equal(v.layers[1023].exp_hist[5], 2);
	assert_null(v.layers[1024].exp_hist);
	assert_int_equal(v.layers[1029].exp_hist_len, 0);
	assert_int_equal(ctl_window_arrays_dropped(w), 2 * (N - 1024));
	ctl_window_destroy(&w);
	com_decision_fini(&in_force);
	free(info);
	free(st);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
		T(test_window_starts_empty),
		T(test_window_sums_maxes_and_means_three_ranks),
		T(test_window_uses_the_mean_norm_without_rank_zero),
		T(test_window_medians_odd_and_even_counts),
		T(test_window_medians_match_a_sort_over_many_ranks),
		T(test_window_refuses_a_duplicate_report),
		T(test_window_counts_layers_missing_from_a_report),
		T(test_window_means_activations_over_the_ranks_that_measured),
		T(test_window_medians_per_tensor_times_and_nan_when_unmeasured),
		T(test_window_medians_backward_and_codec_and_bounds_memory),
		T(test_window_takes_the_largest_applied_level_of_the_ranks_that_sent_one),
		T(test_window_reads_an_applied_level_no_rank_sent_as_nan),
		T(test_window_keeps_every_ranks_collectives_with_its_rank),
		T(test_window_reads_nothing_measured_as_zero),
		T(test_window_shows_the_gate_threshold_and_calibration_in_force),
		T(test_window_maps_history_columns_to_view_fields),
		T(test_window_destroy_is_null_safe),
		T(test_window_sums_array_statistics_per_bin_over_the_ranks_that_sent_one),
		T(test_window_keeps_arrays_of_at_most_1024_layers),
#undef T
	};

	return cmocka_run_group_tests_name("window", tests, NULL, NULL);
}
