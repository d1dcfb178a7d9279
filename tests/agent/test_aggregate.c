/* test_aggregate - a window's statistics reduced inside the job reach the
 * policies as the same window.
 *
 * Each rank's report is packed, the buffers are reduced as a collective
 * would (agent_aggregate_fold), and the covering report is folded into
 * bellowsd's own window aggregation (controller/ctl_window.c). Its view
 * must equal the view of the same reports sent rank by rank, entry by
 * entry of the statistics table, but for the per-tensor medians, which
 * the reduction documents as means.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <bellows/agent.h>
#include <bellows/error.h>

#include "agent/aggregate.h"
#include "common/stat_table.h"
#include "controller/ctl_window.h"

#define WORLD    5
#define N_LAYERS 3

static const com_layer_info layers[N_LAYERS] = {
	{ .name = "a", .numel = 100, .ndim = 1, .shape = { 100 } },
	{ .name = "b", .numel = 10, .ndim = 1, .shape = { 10 } },
	{ .name = "c", .numel = 1000, .ndim = 1, .shape = { 1000 } },
};

static const bool arrays[N_LAYERS] = { false, false, true };

typedef struct rank_report {
	com_layer_stats st[N_LAYERS]; /* its layers */
	uint64_t hist[256];           /* layer 2's histogram */
	com_report r;                 /* the report */
} rank_report;

/* Rank `rank`'s report: values that differ per rank, activation and
 * residual statistics on some ranks only (the gates), timed sends on
 * others, different step counts. */
static void
make(rank_report *p, uint32_t rank)
{
	double k = rank + 1;

	for (uint32_t l = 0; l < N_LAYERS; l++) {
		p->st[l] = (com_layer_stats){
			.layer = l,
			.count = 100 * (l + 1),
			.nonzero = (uint64_t)(40 + 3 * rank),
			.nonfinite = rank % 2,
			.sum_sq = 0.1 * k * k + l,
			.abs_sum = 1.7 * k + l,
			.max_abs = 0.3 * ((rank * 7) % 5) + l,
			.acc_norm = 0.25 * k + 10 * l,
			.momentum_abs_mean = 0.01 * k,
			.observed_steps = 8,
			.act_steps = rank % 2 == 0 ? 8 : 0,
			.act_lbar = rank % 2 == 0 ? 0.5 * k : 0,
			.act_nonzero = rank % 2 == 0 ? 0.1 * k : 0,
			.act_bytes = rank % 2 == 0 ? 1000.0 * k : 0,
			.act_raw_bytes = rank % 2 == 0 ? 4000.0 * k : 0,
			.comm_comp_n = rank < 2 ? 3 : 0,
			.comm_comp_ms = rank < 2 ? 2.0 * k : 0,
			.codec_ms = rank < 2 ? 0.5 * k : 0,
			.resid_steps = rank == 3 ? 8 : 0,
			.resid_l1 = rank == 3 ? 9.0 : 0,
			.resid_l2 = rank == 3 ? 3.0 : 0,
			/* Rank 0's agent predates the applied level; nobody
			 * sends one for layer 1. */
			.level_applied_n = rank == 0 || l == 1 ? 0 : 1,
			.level_applied = rank == 0 ? 9 : (rank % 3) * 0.5,
		};
	}
	for (uint32_t j = 0; j < 256; j++)
		p->hist[j] = j * (rank + 1);
	p->st[2].exp_hist = p->hist;
	p->r = (com_report){
		.job = "job",
		.rank = rank,
		.window = 4,
		.first_step = 32,
		.last_step = 39,
		.n_layers = N_LAYERS,
		.layers = p->st,
		.timings = {
			.steps = 8,
			.step_ms = 8 * (10.0 + rank * rank),
			.compute_ms = 8 * (6.0 + rank),
			.comm_ms = 8 * (4.0 + (rank % 3)),
			.step_ms_max = 12.0 + rank,
			.bytes_sent = 1000,
			.floats_sent = 250 * k,
			.floats_raw = 1000,
			.backward_ms = rank == 4 ? 0 : 8 * (3.0 + rank),
			.mem_device_used = 1000 + rank,
			.mem_device_total = rank == 1 ? 0 : 8000 - rank,
			.mem_host_used = 500 * k,
			.saved_bytes = 77 * k,
		},
		.lr = rank == 0 ? 0.1 : 0.2, /* rank 0's is the window's */
		.batch_size = 32,
		.epoch = 2,
		.seq_in_force = 1,
	};
}

/* The covering report of ranks first .. first + n - 1, reduced as the
 * collective would. */
static void
cover(rank_report *p, uint32_t first, uint32_t n, agent_aggregate *lead,
    com_report *ret)
{
	assert_int_equal(agent_aggregate_init(lead, N_LAYERS, arrays, n, 0), 0);
	agent_aggregate_pack(lead, &p[first].r);
	for (uint32_t i = 1; i < n; i++) {
		agent_aggregate o;

		assert_int_equal(agent_aggregate_init(&o, N_LAYERS, arrays, n,
				     i),
		    0);
		agent_aggregate_pack(&o, &p[first + i].r);
		agent_aggregate_fold(lead, o.buf);
		agent_aggregate_fini(&o);
	}
	agent_aggregate_unpack(lead, &p[first].r, ret);
}

static double
read_as(const void *base, size_t off, bellows_stat_type t)
{
	const char *p = (const char *)base + off;
	uint64_t u64;
	uint32_t u32;
	double d;

	switch (t) {
	case BELLOWS_STAT_TYPE_U32:
		memcpy(&u32, p, sizeof(u32));
		return u32;
	case BELLOWS_STAT_TYPE_U64:
		memcpy(&u64, p, sizeof(u64));
		return (double)u64;
	default:
		memcpy(&d, p, sizeof(d));
		return d;
	}
}

static void
assert_close(double want, double got, const char *what)
{
	if (isnan(want) && isnan(got))
		return;
	if (!(fabs(want - got) <= 1e-12 * fabs(want)))
		fail_msg("%s: %.17g by rank, %.17g reduced", what, want, got);
}

/* Views a and b agree on every aggregated entry of both tables; the
 * GATED_MEDIAN ones too unless skip_medians, the GATED_MEAN ones unless
 * skip_gated, the per-step medians unless skip_step_medians. */
static void
assert_same_view(const bellows_window *a, const bellows_window *b,
    bool skip_medians, bool skip_gated, bool skip_step_medians)
{
	assert_int_equal(a->ranks_reported, b->ranks_reported);
	assert_int_equal(a->first_step, b->first_step);
	assert_int_equal(a->last_step, b->last_step);
	assert_true(a->lr == b->lr);
	assert_int_equal(a->epoch, b->epoch);
	for (uint32_t l = 0; l < N_LAYERS; l++) {
		for (uint32_t k = 0; k < COM_N_LSTATS; k++) {
			const com_stat *st = &com_layer_stat_table[k];

			if ((skip_medians &&
				st->agg == BELLOWS_STAT_AGG_GATED_MEDIAN) ||
			    (skip_gated &&
				st->agg == BELLOWS_STAT_AGG_GATED_MEAN))
				continue;
			for (int col = 0; col < 2; col++) {
				size_t off = ctl_window_layer_col(k, col);
				bellows_stat_type t = st->agg ==
					BELLOWS_STAT_AGG_NORM
				    ? BELLOWS_STAT_TYPE_F64
				    : st->wtype;

				if (off == SIZE_MAX)
					continue;
				assert_close(read_as(&a->layers[l], off, t),
				    read_as(&b->layers[l], off, t), st->name);
			}
		}
		assert_int_equal(a->layers[l].exp_hist_len,
		    b->layers[l].exp_hist_len);
		if (a->layers[l].exp_hist_len > 0)
			assert_memory_equal(a->layers[l].exp_hist,
			    b->layers[l].exp_hist, 256 * sizeof(uint64_t));
	}
	for (uint32_t k = 0; k < COM_N_TSTATS; k++) {
		const com_stat *st = &com_timing_stat_table[k];
		size_t off = ctl_window_timing_col(k);

		if (off == SIZE_MAX ||
		    (skip_step_medians &&
			(st->agg == BELLOWS_STAT_AGG_STEP_MEDIAN ||
			    st->agg == BELLOWS_STAT_AGG_STEP_MEDIAN_NZ)))
			continue;
		assert_close(read_as(a, off, st->wtype),
		    read_as(b, off, st->wtype), st->name);
	}
}

typedef struct fixture {
	rank_report p[WORLD];    /* every rank's report */
	com_decision in_force;   /* shown to policies */
	ctl_window *by_rank;     /* fed rank by rank */
	ctl_window *reduced;     /* fed the covering reports */
	agent_aggregate lead[2]; /* leaders' reductions */
	bellows_window va, vb;   /* their views */
} fixture;

static int
setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));

	if (f == NULL || com_decision_init(&f->in_force, "job", N_LAYERS) != 0)
		return -1;
	for (uint32_t r = 0; r < WORLD; r++)
		make(&f->p[r], r);
	if (ctl_window_new(4, WORLD, N_LAYERS, 0, &f->by_rank) != 0 ||
	    ctl_window_new(4, WORLD, N_LAYERS, 0, &f->reduced) != 0)
		return -1;
	for (uint32_t r = WORLD; r-- > 0;)
		if (ctl_window_add(f->by_rank, &f->p[r].r) != 0)
			return -1;
	ctl_window_view(f->by_rank, "job", WORLD, layers, &f->in_force, &f->va);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	fixture *f = *state;

	ctl_window_destroy(&f->by_rank);
	ctl_window_destroy(&f->reduced);
	agent_aggregate_fini(&f->lead[0]);
	agent_aggregate_fini(&f->lead[1]);
	com_decision_fini(&f->in_force);
	free(f);
	return 0;
}

static void
test_aggregate_job_report_gives_the_policies_the_same_window(void **state)
{
	fixture *f = *state;
	com_report c;

	cover(f->p, 0, WORLD, &f->lead[0], &c);
	assert_int_equal(c.ranks, WORLD);
	assert_int_equal(c.rank, 0);
	/* The reporting rank's own norm, the group's mean beside it. */
	assert_true(c.layers[1].acc_norm == f->p[0].st[1].acc_norm);
	assert_close(10 + 0.25 * 3, c.layers[1].acc_norm_mean, "mean norm");
	assert_int_equal(ctl_window_add(f->reduced, &c), 0);
	assert_int_equal(ctl_window_reported(f->reduced), WORLD);
	for (uint32_t r = 0; r < WORLD; r++)
		assert_true(ctl_window_has(f->reduced, r));
	ctl_window_view(f->reduced, "job", WORLD, layers, &f->in_force, &f->vb);
	assert_same_view(&f->va, &f->vb, true, false, false);
	/* Per-tensor medians become the mean over the gated ranks: ranks 0
	 * and 1 timed compressed sends of 2 and 4 ms. */
	assert_close(3.0, f->vb.layers[0].comm_comp_ms, "comm_comp_ms");
	/* Per-step medians are exact: 10 + r^2 -> 10, 11, 14, 19, 26. */
	assert_true(f->vb.step_ms_median == 14);
	/* The spread of the per-step times is kept beside. */
	assert_true(f->lead[0].spread[COM_TSTAT_step_ms][0] == 10);
	assert_true(f->lead[0].spread[COM_TSTAT_step_ms][1] == 26);
	/* ... and the fastest and slowest rank travel in the report. */
	assert_true(c.timings.step_ms_rank_min == 10);
	assert_true(c.timings.step_ms_rank_max == 26);
}

static void
test_aggregate_node_reports_give_the_same_sums_maxes_and_means(void **state)
{
	fixture *f = *state;
	com_report c0, c1;

	/* Nodes of 3 ranks: 0..2 and 3..4. */
	cover(f->p, 0, 3, &f->lead[0], &c0);
	cover(f->p, 3, 2, &f->lead[1], &c1);
	c1.rank = 3;
	assert_int_equal(ctl_window_add(f->reduced, &c1), 0);
	assert_int_equal(ctl_window_reported(f->reduced), 2);
	assert_int_equal(ctl_window_add(f->reduced, &c0), 0);
	assert_int_equal(ctl_window_reported(f->reduced), WORLD);
	ctl_window_view(f->reduced, "job", WORLD, layers, &f->in_force, &f->vb);
	/* Medians over nodes are medians of the nodes' medians, and a gated
	 * mean weighs each node by its ranks, not its ranks that measured:
	 * (2 * 3 + 5 * 2) / 5 for act_lbar's 0.5 * (1, 3 | 5). */
	assert_same_view(&f->va, &f->vb, true, true, true);
	assert_close(1.5, f->va.layers[0].act_lbar, "act_lbar by rank");
	assert_close(1.6, f->vb.layers[0].act_lbar, "act_lbar by node");
}

static void
test_aggregate_refuses_covers_beyond_world_and_over_reported_ranks(void **state)
{
	fixture *f = *state;
	com_report c;

	cover(f->p, 0, 3, &f->lead[0], &c);
	c.rank = 3; /* 3..5 of a 5-rank job */
	assert_int_equal(ctl_window_add(f->reduced, &c), BELLOWS_EINVAL);
	assert_int_equal(ctl_window_reported(f->reduced), 0);
	assert_int_equal(ctl_window_add(f->reduced, &f->p[1].r), 0);
	c.rank = 0; /* 0..2 overlaps rank 1 */
	assert_int_equal(ctl_window_add(f->reduced, &c), BELLOWS_EBUSY);
	assert_int_equal(ctl_window_reported(f->reduced), 1);
	assert_false(ctl_window_has(f->reduced, 0));
}

static int
cmp_double(const void *x, const void *y)
{
	double u = *(const double *)x, v = *(const double *)y;

	return (u > v) - (u < v);
}

static void
test_aggregate_step_medians_match_a_sort_for_odd_and_even_groups(void **state)
{
	static const uint32_t sizes[] = { 1, 2, 3, 4, 100, 101, 1000 };
	fixture *f = *state;
	double *per_step = malloc(1000 * sizeof(double));
	uint64_t x = 12345;

	assert_non_null(per_step);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint32_t n = sizes[i];
		agent_aggregate lead, o;
		com_report c;
		double want;

		assert_int_equal(agent_aggregate_init(&lead, N_LAYERS, arrays,
				     n, 0),
		    0);
		assert_int_equal(agent_aggregate_init(&o, N_LAYERS, arrays, n,
				     0),
		    0);
		for (uint32_t r = 0; r < n; r++) {
			/* Ties on purpose: values in 0..63 ms per step. */
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			per_step[r] = (double)(x >> 58);
			f->p[0].r.timings.step_ms = 8 * per_step[r];
			o.slot = r;
			agent_aggregate_pack(r == 0 ? &lead : &o, &f->p[0].r);
			if (r > 0)
				agent_aggregate_fold(&lead, o.buf);
		}
		f->p[0].r.timings.step_ms = 8 * per_step[0];
		agent_aggregate_unpack(&lead, &f->p[0].r, &c);
		qsort(per_step, n, sizeof(double), cmp_double);
		want = n % 2 ? per_step[n / 2]
			     : (per_step[n / 2 - 1] + per_step[n / 2]) / 2;
		if (c.timings.step_ms != 8 * want)
			fail_msg("group of %u: median %g, sorted %g", n,
			    c.timings.step_ms / 8, want);
		assert_true(lead.spread[COM_TSTAT_step_ms][0] == per_step[0]);
		assert_true(
		    lead.spread[COM_TSTAT_step_ms][1] == per_step[n - 1]);
		assert_true(c.timings.step_ms_rank_min == per_step[0]);
		assert_true(c.timings.step_ms_rank_max == per_step[n - 1]);
		agent_aggregate_fini(&o);
		agent_aggregate_fini(&lead);
	}
	free(per_step);
}

static void
test_aggregate_init_refuses_bad_groups_and_fini_is_idempotent(void **state)
{
	agent_aggregate a;

	(void)state;
	assert_int_equal(agent_aggregate_init(&a, N_LAYERS, NULL, 0, 0),
	    BELLOWS_EINVAL);
	assert_int_equal(agent_aggregate_init(&a, N_LAYERS, NULL, 2, 2),
	    BELLOWS_EINVAL);
	assert_int_equal(agent_aggregate_init(&a, 0, NULL, 2, 0),
	    BELLOWS_EINVAL);
	assert_int_equal(agent_aggregate_init(&a, N_LAYERS, NULL, 2, 1), 0);
	agent_aggregate_fini(&a);
	agent_aggregate_fini(&a);
}

static int
never_called(void *arg, double *values, size_t n, int op)
{
	(void)arg;
	(void)values;
	(void)n;
	(void)op;
	return -1;
}

/* Opens an agent of rank 1 of 4 with the given aggregation; no bellowsd
 * is needed to open one. */
static int
open_with(uint32_t aggregate, uint32_t ranks, bellows_allreduce_fn *fn)
{
	static const bellows_layer table[1] = { { .name = "w", .numel = 4 } };
	bellows_agent_config cfg;
	bellows_agent *a = NULL;
	int rc;

	bellows_agent_config_init(&cfg);
	cfg.control = "ipc:///nonexistent/bellows-test-control";
	cfg.publish = "ipc:///nonexistent/bellows-test-publish";
	cfg.job = "job";
	cfg.rank = 1;
	cfg.world = 4;
	cfg.layers = table;
	cfg.n_layers = 1;
	cfg.aggregate = aggregate;
	cfg.aggregate_ranks = ranks;
	cfg.allreduce = fn;
	rc = bellows_agent_open(&cfg, &a);
	bellows_agent_close(&a);
	return rc;
}

static void
test_aggregate_open_refuses_an_unknown_mode_or_a_missing_collective(
    void **state)
{
	(void)state;
	assert_int_equal(open_with(BELLOWS_AGGREGATE_RANK, 0, NULL), 0);
	assert_int_equal(open_with(BELLOWS_AGGREGATE_JOB, 0, never_called), 0);
	assert_int_equal(open_with(BELLOWS_AGGREGATE_NODE, 2, never_called), 0);
	assert_int_equal(open_with(3, 0, never_called), BELLOWS_EINVAL);
	assert_int_equal(open_with(BELLOWS_AGGREGATE_JOB, 0, NULL),
	    BELLOWS_EINVAL);
	assert_int_equal(open_with(BELLOWS_AGGREGATE_NODE, 0, never_called),
	    BELLOWS_EINVAL);
	assert_int_equal(open_with(BELLOWS_AGGREGATE_NODE, 5, never_called),
	    BELLOWS_EINVAL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
		T(test_aggregate_job_report_gives_the_policies_the_same_window),
		T(test_aggregate_node_reports_give_the_same_sums_maxes_and_means),
		T(test_aggregate_refuses_covers_beyond_world_and_over_reported_ranks),
		T(test_aggregate_step_medians_match_a_sort_for_odd_and_even_groups),
		T(test_aggregate_init_refuses_bad_groups_and_fini_is_idempotent),
		T(test_aggregate_open_refuses_an_unknown_mode_or_a_missing_collective),
#undef T
	};

	return cmocka_run_group_tests_name("aggregate", tests, NULL, NULL);
}
