/* test_perfmodel - the perfmodel policy and the performance model under
 * it, against values computed by hand.
 *
 * The model's functions (perfmodel_fit.h) are checked on their own with
 * the arithmetic written out in the comments. The policy is driven through
 * the controller's policy host with YAML files from a temporary directory,
 * next to a `fixed` policy that sets the compression levels it gates, or
 * by calling its ops directly for reloads, metrics and wire-data corners.
 *
 * The job of most tests: four ranks, four layers of 4e6, 2e6, 1e3 and
 * 9.999e6 bytes (M = 16e6 bytes), buckets of 6e6 bytes (k = 3, b_last =
 * 16e6 - 2 * 6e6 = 4e6). Its collectives follow alpha = 0.5 ms and BW =
 * 1e6 bytes/ms = 8 Gbit/s: L = 2 * 0.5 * 3 = 3 ms, s = 2 * 3 / (4 * 1e6) =
 * 1.5e-6 ms/byte, so T_comm(1e6) = 4.5, T_comm(4e6) = 9, T_comm(6e6) = 12.
 * The decision that closes window w is in force during window w + 1.
 *
 * The fixture's compressed window is a synchronous step (rest + backward
 * + collectives + codec), so the tests written for it name
 * `compressed_overlap: false`; those of compressed buckets overlapped
 * with backward (the default) set their own profiles.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <bellows/error.h>

#include "policyhost/config.h"
#include "policies/perfmodel_fit.h"
#include "policies/policies.h"
#include "policyhost/policy_host.h"
#include "policies/registry.h"
#include "support.h"

#define N_LAYERS  4
#define WORLD     4
#define N_SIZES   3
#define N_SAMPLES (N_SIZES * WORLD)

static const com_layer_info layers[N_LAYERS] = {
	{ .name = "embed.weight",
	    .numel = 1000000,
	    .ndim = 2,
	    .shape = { 1000, 1000 } },
	{ .name = "fc1.weight",
	    .numel = 500000,
	    .ndim = 2,
	    .shape = { 500, 1000 } },
	{ .name = "fc1.bias", .numel = 250, .ndim = 1, .shape = { 250 } },
	{ .name = "fc2.weight",
	    .numel = 2499750,
	    .ndim = 2,
	    .shape = { 9999, 250 } },
};

/* What the simulated trainer reports in a window, by the gate in force. */
typedef struct profile {
	double step;          /* step_ms_median */
	double bwd;           /* backward_ms_median */
	double comm;          /* comm_ms_median */
	double codec;         /* codec_ms_median */
	uint64_t floats_sent; /* summed over ranks */
	uint64_t floats_raw;  /* summed over ranks */
} profile;

typedef struct fixture {
	sup_host h;                      /* files, host and direct driving */
	profile on;                      /* window with compression on */
	profile off;                     /* window with the gate off */
	uint32_t n_sizes;                /* collective sizes per rank */
	uint64_t bytes[8];               /* their bytes */
	double ms[8];                    /* their median times */
	uint32_t count;                  /* collectives of each size */
	uint64_t calibrate_until;        /* calibration in force */
	bellows_comm_sample comm[8 * 8]; /* the window's samples */
} fixture;

/* The fast network of the header comment. */
static void
fast_network(fixture *f)
{
	const uint64_t b[N_SIZES] = { 1000000, 4000000, 6000000 };
	const double t[N_SIZES] = { 4.5, 9, 12 };

	f->n_sizes = N_SIZES;
	memcpy(f->bytes, b, sizeof(b));
	memcpy(f->ms, t, sizeof(t));
	f->count = 3;
}

/* The same latency, a quarter of the bandwidth: BW = 2.5e5 bytes/ms
 * (2 Gbit/s), s = 2 * 3 / (4 * 2.5e5) = 6e-6 ms/byte: T_comm(1e6) = 9,
 * T_comm(4e6) = 27, T_comm(6e6) = 39. */
static void
slow_network(fixture *f)
{
	const double t[N_SIZES] = { 9, 27, 39 };

	memcpy(f->ms, t, sizeof(t));
}

static int
setup(void **state)
{
	fixture *f = sup_fixture_new(sizeof(*f), "perfmodel", layers, N_LAYERS);

	if (f == NULL)
		return -1;
	f->h.world = WORLD;
	fast_network(f);
	/* Compression on: CR = 16e6 / 1.6e6 = 10, codec 10 ms; the rest of
	 * the step is 65 - 40 - 5 - 10 = 10 ms. */
	f->on = (profile){ .step = 65,
		.bwd = 40,
		.comm = 5,
		.codec = 10,
		.floats_sent = 1600000,
		.floats_raw = 16000000 };
	/* Gate off: the collectives (30 ms in all) overlap backward, which
	 * they slow by gamma 1.2: the step is the rest 10 + max(1.2 * 40,
	 * 2 * 12) + T_comm(4e6) 9 = 67 ms. */
	f->off = (profile){ .step = 67,
		.bwd = 40,
		.comm = 30,
		.floats_sent = 16000000,
		.floats_raw = 16000000 };
	*state = f;
	return 0;
}

static void
start_ok(fixture *f, const char *text)
{
	sup_load_file(f->h.path, text, &f->h.cfg);
	assert_int_equal(sup_start(&f->h), 0);
}

/* The window `index` the trainer reports under the gate `off` and the
 * levels `level`, every rank's collectives alike. */
static bellows_window
window(fixture *f, uint64_t index, const double *level, bool off)
{
	const profile *pr = off ? &f->off : &f->on;
	bellows_window w = sup_window(&f->h, index);
	uint32_t n = 0;

	for (uint32_t l = 0; l < N_LAYERS; l++) {
		bellows_window_layer *wl = &f->h.wl[l];

		wl->selected = layers[l].ndim >= 2;
		wl->level = level[l];
		wl->comm_raw_ms = NAN;
		wl->comm_comp_ms = NAN;
		wl->codec_ms = NAN;
	}
	for (uint32_t r = 0; r < f->h.world; r++) {
		for (uint32_t i = 0; i < f->n_sizes; i++)
			f->comm[n++] = (bellows_comm_sample){ .rank = r,
				.bytes = f->bytes[i],
				.ms = f->ms[i],
				.count = f->count };
	}
	w.first_step = index * 100;
	w.last_step = index * 100 + 99;
	w.lr_scale = 1;
	w.step_ms_median = pr->step;
	w.compute_ms_median = pr->step - pr->comm;
	w.comm_ms_median = pr->comm;
	w.floats_sent = pr->floats_sent;
	w.floats_raw = pr->floats_raw;
	w.backward_ms_median = pr->bwd;
	w.codec_ms_median = pr->codec;
	w.compression_off = off;
	w.calibrate_until = f->calibrate_until;
	w.n_comm = n;
	w.comm = f->comm;
	return w;
}

/* Runs the host's set on window `index`; the reasons land in f->h.why. */
static void
run(fixture *f, uint64_t index)
{
	bellows_window w = window(f, index, f->h.state.level,
	    f->h.state.compression_off);

	sup_run(&f->h, &w);
}

/* The value of the host's metric `name` of the last run, NAN if none. */
static double
host_metric(fixture *f, const char *name)
{
	uint32_t n = 0;
	const com_metric *m = ctl_policy_set_metrics(f->h.set, &n);

	for (uint32_t i = 0; i < n; i++) {
		if (strcmp(m[i].name, name) == 0 &&
		    strcmp(m[i].policy, "perfmodel") == 0)
			return m[i].value;
	}
	return NAN;
}

static void
direct_start_ok(fixture *f, const char *text)
{
	sup_load_file(f->h.path, text, &f->h.cfg);
	assert_int_equal(sup_direct_start(&f->h, f->h.cfg), 0);
}

/* Runs the directly driven policy on window `index` under the gate it
 * last proposed, as the host would. */
static int
direct_run(fixture *f, uint64_t index)
{
	bellows_window w = window(f, index, f->h.level,
	    f->h.prop.compression_off);

	return sup_direct_run(&f->h, &w);
}

static void
direct_run_ok(fixture *f, uint64_t index)
{
	assert_int_equal(direct_run(f, index), 0);
}

/* The value of the direct proposal's metric `name`, NAN if none. */
static double
metric(const fixture *f, const char *name)
{
	const bellows_metric *m = sup_metric_find(&f->h.prop, name);

	if (m == NULL)
		return NAN;
	assert_int_equal(m->layer, -1);
	return m->value;
}

static void
levels(fixture *f, double a, double b, double c, double d)
{
	f->h.level[0] = a;
	f->h.level[1] = b;
	f->h.level[2] = c;
	f->h.level[3] = d;
}

static const char *const job_yaml = "jobs:\n"
				    "  - policies:\n"
				    "      - type: fixed\n"
				    "        params: {level: 4}\n"
				    "      - type: perfmodel\n"
				    "        params: {bucket_bytes: 6000000, "
				    "compressed_overlap: false}\n";

static const char
    *const direct_yaml = "jobs:\n"
			 "  - policies:\n"
			 "      - type: perfmodel\n"
			 "        params: {bucket_bytes: 6000000, "
			 "compressed_overlap: false}\n";

/* Starts job_yaml through the host with `extra` ("hold_windows: 1")
 * added to perfmodel's parameters. */
static void
start_gated(fixture *f, const char *extra)
{
	char yaml[512];

	snprintf(yaml, sizeof(yaml),
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: fixed\n"
	    "        params: {level: 4}\n"
	    "      - type: perfmodel\n"
	    "        params: {bucket_bytes: 6000000, compressed_overlap: "
	    "false, %s}\n",
	    extra);
	start_ok(f, yaml);
}

/* Starts direct_yaml directly with `extra` added to its parameters. */
static void
direct_start_with(fixture *f, const char *extra)
{
	char yaml[512];

	snprintf(yaml, sizeof(yaml),
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: perfmodel\n"
	    "        params: {bucket_bytes: 6000000, compressed_overlap: "
	    "false, %s}\n",
	    extra);
	direct_start_ok(f, yaml);
}

/* ---- registry ------------------------------------------------------ */

static void
test_registry_lists_perfmodel_owning_the_compression_gate(void **state)
{
	(void)state;
	sup_assert_registered("perfmodel", &pol_perfmodel_ops,
	    BELLOWS_KNOB_COMPRESSION);
}

/* ---- the model's formulas ------------------------------------------- */

/* The job of the header: L = 3, s = 1.5e-6, M = 16e6, k = 3, last = 4e6. */
static pol_perfmodel_model
header_model(void)
{
	return (pol_perfmodel_model){ .latency = 3,
		.slope = 1.5e-6,
		.t_comp = 40,
		.gamma = 1.07,
		.model = 16e6,
		.k = 3,
		.last = 4e6,
		.overlap = true,
		.codec_ms = 10,
		.cr = 10 };
}

static void
test_buckets_and_ring_allreduce_match_the_hand_computed_values(void **state)
{
	pol_perfmodel_model m = header_model();
	double k, last;

	(void)state;
	/* 16e6 / 6e6 = 2.67 -> k = 3, b_last = 16e6 - 2 * 6e6 = 4e6. */
	pol_perfmodel_buckets(16e6, 6e6, &k, &last);
	assert_true(k == 3 && last == 4e6);
	/* An exact multiple: 12e6 / 6e6 = 2, the last bucket is full. */
	pol_perfmodel_buckets(12e6, 6e6, &k, &last);
	assert_true(k == 2 && last == 6e6);
	/* Smaller than a bucket: one, of the whole model. */
	pol_perfmodel_buckets(1e6, 26214400, &k, &last);
	assert_true(k == 1 && last == 1e6);
	pol_perfmodel_buckets(0, 6e6, &k, &last);
	assert_true(k == 0 && last == 0);

	/* alpha = L / (2 (p - 1)) = 3 / 6 = 0.5 ms; BW = 2 (p - 1) / (p s)
	 * = 6 / (4 * 1.5e-6) = 1e6 bytes/ms = 8 Gbit/s. */
	sup_assert_near(pol_perfmodel_alpha(3, 4), 0.5, 1e-12);
	sup_assert_near(pol_perfmodel_bw(1.5e-6, 4), 1e6, 1e-12);
	sup_assert_near(pol_perfmodel_slope(1e6, 4), 1.5e-6, 1e-12);
	sup_assert_near(pol_perfmodel_bw(1.5e-6, 4) / POL_PERFMODEL_GBPS, 8,
	    1e-12);
	/* T_comm(6e6) = 3 + 1.5e-6 * 6e6 = 12; T_comm(4e6) = 9. */
	sup_assert_near(pol_perfmodel_comm(&m, 6e6), 12, 1e-12);
	sup_assert_near(pol_perfmodel_comm(&m, 4e6), 9, 1e-12);
}

static void
test_sync_prediction_takes_the_larger_of_compute_and_buckets(void **state)
{
	pol_perfmodel_model m = header_model();

	(void)state;
	/* Compute-bound: gamma T_comp = 1.07 * 40 = 42.8 > (k - 1)
	 * T_comm(b) = 2 * 12 = 24: T_obs = 42.8 + T_comm(4e6) = 42.8 + 9 =
	 * 51.8. */
	sup_assert_near(pol_perfmodel_sync(&m), 51.8, 1e-12);
	assert_false(pol_perfmodel_comm_bound(&m));
	/* Communication-bound: T_comp = 20, 1.07 * 20 = 21.4 < 24: T_obs =
	 * 24 + 9 = 33. */
	m.t_comp = 20;
	sup_assert_near(pol_perfmodel_sync(&m), 33, 1e-12);
	assert_true(pol_perfmodel_comm_bound(&m));
	/* Without overlap: T_comp + k L + M s = 20 + 9 + 24 = 53. */
	m.overlap = false;
	sup_assert_near(pol_perfmodel_sync(&m), 53, 1e-12);
	assert_false(pol_perfmodel_comm_bound(&m));
}

static void
test_compressed_prediction_adds_codec_and_the_smaller_collectives(void **state)
{
	pol_perfmodel_model m = header_model();

	(void)state;
	/* T_comp + T_ed + k L + (M / CR) s = 40 + 10 + 3 * 3 + 1.6e6 *
	 * 1.5e-6 = 40 + 10 + 9 + 2.4 = 61.4; not overlapped, so gamma and
	 * the overlap flag play no part. */
	sup_assert_near(pol_perfmodel_compressed(&m), 61.4, 1e-12);
	m.gamma = 1.2;
	m.overlap = false;
	sup_assert_near(pol_perfmodel_compressed(&m), 61.4, 1e-12);
}

/* Compressed buckets sent while backward runs, as raw DDP buckets are:
 * only the last compressed bucket and the codec follow the backward
 * pass. */
static void
test_compressed_prediction_with_overlap_hides_all_but_the_last_bucket(
    void **state)
{
	pol_perfmodel_model m = header_model();

	(void)state;
	m.comp_overlap = true;
	/* Overlapped: (k - 1) L + ((M - b_last) / CR) s = 6 + 1.2e6 *
	 * 1.5e-6 = 7.8 < gamma T_comp 42.8; the tail L + (b_last / CR) s +
	 * T_ed = 3 + 0.6 + 10 = 13.6: 42.8 + 13.6 = 56.4, against the
	 * serial 61.4. */
	sup_assert_near(pol_perfmodel_overlapped_compressed(&m), 7.8, 1e-12);
	sup_assert_near(pol_perfmodel_tail_compressed(&m), 13.6, 1e-12);
	sup_assert_near(pol_perfmodel_compressed(&m), 56.4, 1e-12);
	/* Bound by the collectives: s = 6e-6, CR 2, T_comp 20: 6 + 6e6 *
	 * 6e-6 = 42 > 1.07 * 20 = 21.4; tail 3 + 2e6 * 6e-6 + 10 = 25:
	 * 67, against the serial 20 + 10 + 9 + 8e6 * 6e-6 = 87. */
	m.slope = 6e-6;
	m.cr = 2;
	m.t_comp = 20;
	sup_assert_near(pol_perfmodel_compressed(&m), 67, 1e-12);
	/* Without overlap the flag changes nothing: 87. */
	m.overlap = false;
	sup_assert_near(pol_perfmodel_compressed(&m), 87, 1e-12);
	/* No gradient, no collective: T_comp + T_ed. */
	m.overlap = true;
	m.model = 0;
	m.k = 0;
	m.last = 0;
	sup_assert_near(pol_perfmodel_compressed(&m), 30, 1e-12);
}

static void
test_breakeven_bisects_to_the_hand_solved_bandwidth(void **state)
{
	pol_perfmodel_model m = {
		.latency = 1,
		.t_comp = 100,
		.gamma = 1.1,
		.model = 4e6,
		.k = 1,
		.last = 4e6,
		.overlap = true,
		.codec_ms = 30,
		.cr = 4,
	};
	double lo = 1e-4 * POL_PERFMODEL_GBPS, hi = 1e5 * POL_PERFMODEL_GBPS;
	double bw = 0;

	(void)state;
	/* One bucket, p = 2 (s = 1 / BW). Sync: 1.1 * 100 + 1 + 4e6 s =
	 * 111 + 4e6 s; compressed: 100 + 30 + 1 + 1e6 s = 131 + 1e6 s.
	 * Equal at 3e6 s = 20, s = 6.667e-6, BW = 1.5e5 bytes/ms = 1.2
	 * Gbit/s. */
	assert_int_equal(pol_perfmodel_breakeven(&m, 2, lo, hi, &bw), 0);
	sup_assert_near(bw, 1.5e5, 1e-9);
	sup_assert_near(bw / POL_PERFMODEL_GBPS, 1.2, 1e-9);

	/* The header's job (p = 4, s = 1.5 / BW): compressed 59 + 1.6e6 s;
	 * sync max(42.8, 6 + 12e6 s) + 3 + 4e6 s. Compute-bound for s <=
	 * 36.8 / 12e6 = 3.067e-6, where they would meet at 13.2 = 2.4e6 s,
	 * s = 5.5e-6: outside. Communication-bound: 59 + 1.6e6 s = 9 +
	 * 16e6 s, s = 50 / 14.4e6 = 3.4722e-6, BW = 1.5 / s = 432000
	 * bytes/ms = 3.456 Gbit/s. */
	m = header_model();
	assert_int_equal(pol_perfmodel_breakeven(&m, 4, lo, hi, &bw), 0);
	sup_assert_near(bw / POL_PERFMODEL_GBPS, 3.456, 1e-9);

	/* No codec, gamma 1: compressed T_comp + L + M s / 4 is below
	 * sync T_comp + L + M s at any bandwidth. */
	m = (pol_perfmodel_model){ .latency = 1,
		.t_comp = 100,
		.gamma = 1,
		.model = 4e6,
		.k = 1,
		.last = 4e6,
		.overlap = true,
		.cr = 4 };
	bw = -1;
	assert_int_equal(pol_perfmodel_breakeven(&m, 2, lo, hi, &bw), 1);
	assert_true(bw == -1);
	/* CR 1 and a codec cost: slower at any bandwidth. */
	m.cr = 1;
	m.codec_ms = 5;
	assert_int_equal(pol_perfmodel_breakeven(&m, 2, lo, hi, &bw), 2);
	assert_true(bw == -1);
}

/* With compressed buckets overlapped too, the gap is split at two
 * kinks, the raw and the compressed collectives each meeting gamma
 * T_comp; the crossing may lie in any of the three pieces. */
static void
test_breakeven_with_compressed_overlap_searches_between_both_kinks(void **state)
{
	pol_perfmodel_model m = header_model();
	double lo = 1e-4 * POL_PERFMODEL_GBPS, hi = 1e5 * POL_PERFMODEL_GBPS;
	double bw = 0;

	(void)state;
	m.comp_overlap = true;
	/* p = 4, s = 1.5 / BW. Raw kink: 6 + 12e6 s = 42.8 at s =
	 * 3.0667e-6; compressed kink: 6 + 1.2e6 s = 42.8 at s = 3.0667e-5.
	 * Above both (compute-bound): compressed 42.8 + 3 + 4e5 s + 10,
	 * sync 42.8 + 3 + 4e6 s: equal at 3.6e6 s = 10, s = 2.7778e-6, BW
	 * = 540000 bytes/ms = 4.32 Gbit/s. */
	assert_int_equal(pol_perfmodel_breakeven(&m, 4, lo, hi, &bw), 0);
	sup_assert_near(bw / POL_PERFMODEL_GBPS, 4.32, 1e-9);
	/* Codec 20: that piece has no crossing (20 - 3.6e6 s > 0 down to
	 * the raw kink); between the kinks compressed 42.8 + 3 + 4e5 s +
	 * 20, sync 9 + 16e6 s: equal at 15.6e6 s = 56.8, BW = 1.5 * 15.6e6
	 * / 56.8 = 411971.8 bytes/ms = 3.2958 Gbit/s. */
	m.codec_ms = 20;
	assert_int_equal(pol_perfmodel_breakeven(&m, 4, lo, hi, &bw), 0);
	sup_assert_near(bw, 1.5 * 15.6e6 / 56.8, 1e-6);
	/* One bucket (no kink), p = 2 (s = 1 / BW): compressed 110 + 1 +
	 * 1e6 s + 30, sync 110 + 1 + 4e6 s: equal at s = 1e-5, BW = 1e5
	 * bytes/ms = 0.8 Gbit/s (serially compressed: 1.2). */
	m = (pol_perfmodel_model){ .latency = 1,
		.t_comp = 100,
		.gamma = 1.1,
		.model = 4e6,
		.k = 1,
		.last = 4e6,
		.overlap = true,
		.comp_overlap = true,
		.codec_ms = 30,
		.cr = 4 };
	assert_int_equal(pol_perfmodel_breakeven(&m, 2, lo, hi, &bw), 0);
	sup_assert_near(bw / POL_PERFMODEL_GBPS, 0.8, 1e-9);
}

static void
test_cr_needed_hides_the_collectives_behind_backward(void **state)
{
	pol_perfmodel_model m = header_model();

	(void)state;
	/* Room gamma T_comp - k L = 42.8 - 9 = 33.8 ms for M s = 16e6 *
	 * 1.5e-6 = 24 ms of transfer: 24 / 33.8 < 1, no compression
	 * needed: 1. */
	sup_assert_near(pol_perfmodel_cr_needed(&m), 1, 1e-12);
	/* T_comp 20: room 21.4 - 9 = 12.4, CR = 24 / 12.4 = 1.9355. */
	m.t_comp = 20;
	sup_assert_near(pol_perfmodel_cr_needed(&m), 24 / 12.4, 1e-12);
	/* Slow network, s = 6e-6: M s = 96, CR = 96 / 12.4 = 7.742. */
	m.slope = 6e-6;
	sup_assert_near(pol_perfmodel_cr_needed(&m), 96 / 12.4, 1e-12);
	/* T_comp 8: 1.07 * 8 = 8.56 < k L = 9, the latencies alone do
	 * not fit: no ratio suffices. */
	m.t_comp = 8;
	assert_true(isinf(pol_perfmodel_cr_needed(&m)));
}

/* ---- the fit -------------------------------------------------------- */

/* Adds the n samples (bytes, ms, count) of xyw to *st. */
static void
add_samples(pol_perfmodel_stats *st, const double (*xyw)[3], size_t n)
{
	for (size_t i = 0; i < n; i++)
		pol_perfmodel_stats_add(st, xyw[i][0], xyw[i][1], xyw[i][2]);
}

/* add_samples with the samples listed: ADD_SAMPLES(&st, { 1, 5, 1 }). */
#define ADD_SAMPLES(st, ...)                                                   \
	add_samples((st), (const double[][3]){ __VA_ARGS__ },                  \
	    sizeof((const double[][3]){ __VA_ARGS__ }) / sizeof(double[3]))

static void
test_fit_is_weighted_by_count_as_computed_by_hand(void **state)
{
	pol_perfmodel_stats st = { 0 }, twice = { 0 };
	pol_perfmodel_line line;

	(void)state;
	/* (1, 5) w 1, (2, 6) w 1, (4, 9) w 2: W = 4, mean x = 11 / 4 =
	 * 2.75, mean y = 29 / 4 = 7.25; dx = -1.75, -0.75, 1.25; dy =
	 * -2.25, -1.25, 1.75. Cxx = 3.0625 + 0.5625 + 2 * 1.5625 = 6.75,
	 * Cxy = 3.9375 + 0.9375 + 2 * 2.1875 = 9.25, Cyy = 5.0625 + 1.5625
	 * + 2 * 3.0625 = 12.75. slope = 9.25 / 6.75 = 1.37037, intercept
	 * = 7.25 - 1.37037 * 2.75 = 3.481481, R2 = 9.25^2 / (6.75 * 12.75)
	 * = 0.994190. */
	ADD_SAMPLES(&st, { 1, 5, 1 }, { 2, 6, 1 }, { 4, 9, 2 });
	assert_int_equal(pol_perfmodel_fit(&st, &line), POL_PERFMODEL_FIT_OK);
	sup_assert_near(line.slope, 9.25 / 6.75, 1e-12);
	sup_assert_near(line.intercept, 7.25 - 9.25 / 6.75 * 2.75, 1e-12);
	sup_assert_near(line.r2, 9.25 * 9.25 / (6.75 * 12.75), 1e-12);
	assert_false(line.origin);

	/* A count of 2 is the same as the sample twice, merged from two
	 * sets. */
	ADD_SAMPLES(&twice, { 1, 5, 1 }, { 4, 9, 1 });
	{
		pol_perfmodel_stats other = { 0 };

		ADD_SAMPLES(&other, { 2, 6, 1 }, { 4, 9, 1 });
		pol_perfmodel_stats_merge(&twice, &other);
	}
	assert_int_equal(twice.n, 4);
	assert_int_equal(pol_perfmodel_fit(&twice, &line),
	    POL_PERFMODEL_FIT_OK);
	sup_assert_near(line.slope, 9.25 / 6.75, 1e-12);
	sup_assert_near(line.r2, 9.25 * 9.25 / (6.75 * 12.75), 1e-12);
}

static void
test_fit_refits_a_negative_intercept_through_the_origin(void **state)
{
	pol_perfmodel_stats st = { 0 };
	pol_perfmodel_line line;

	(void)state;
	/* (1, 1), (2, 3), (3, 5): y = 2x - 1. Through 0: s = Σxy / Σx² =
	 * 22 / 14 = 1.571429; residual Σy² - s Σxy = 35 - 22 * 22 / 14 =
	 * 0.428571; Cyy = 8; R2 = 1 - 0.428571 / 8 = 0.946429. */
	ADD_SAMPLES(&st, { 1, 1, 1 }, { 2, 3, 1 }, { 3, 5, 1 });
	assert_int_equal(pol_perfmodel_fit(&st, &line), POL_PERFMODEL_FIT_OK);
	assert_true(line.origin);
	sup_assert_near(line.raw_intercept, -1, 1e-12);
	assert_true(line.intercept == 0);
	sup_assert_near(line.slope, 22.0 / 14, 1e-12);
	sup_assert_near(line.r2, 1 - (35 - 22.0 * 22 / 14) / 8, 1e-12);
}

static void
test_fit_refuses_one_size_no_sample_and_a_falling_line(void **state)
{
	pol_perfmodel_stats st = { 0 };
	pol_perfmodel_line line = { .slope = 42 };

	(void)state;
	assert_int_equal(pol_perfmodel_fit(&st, &line),
	    POL_PERFMODEL_FIT_EMPTY);
	ADD_SAMPLES(&st, { 4e6, 9, 3 }, { 4e6, 10, 3 });
	assert_int_equal(pol_perfmodel_fit(&st, &line),
	    POL_PERFMODEL_FIT_ONE_SIZE);
	assert_true(line.slope == 42);
	/* (1e6, 9) and (4e6, 5): slope -4 / 3e6 ms/byte. */
	memset(&st, 0, sizeof(st));
	ADD_SAMPLES(&st, { 1e6, 9, 1 }, { 4e6, 5, 1 });
	assert_int_equal(pol_perfmodel_fit(&st, &line),
	    POL_PERFMODEL_FIT_SLOPE);
	sup_assert_near(line.slope, -4 / 3e6, 1e-12);
}

/* xorshift64*: the same noise on every run. */
static uint64_t
rng_next(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 2685821657736338717ull;
}

/* Uniform in [-1, 1). */
static double
rng_unit(uint64_t *s)
{
	return (double)(rng_next(s) >> 11) / 4503599627370496.0 - 1;
}

static void
test_fit_recovers_alpha_and_bw_from_noisy_timings(void **state)
{
	fixture *f = *state;
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	double worst_alpha = 0, worst_bw = 0;

	/* p = 4, alpha = 0.25 ms (L = 1.5 ms), BW = 10 Gbit/s = 1.25e6
	 * bytes/ms (s = 6 / (4 * 1.25e6) = 1.2e-6 ms/byte). Eight sizes
	 * from 64 KiB to 8 MiB per rank, each time off by up to ±5 %,
	 * medians of 1 to 4 collectives, four ranks, eight windows. */
	f->h.world = 4;
	f->n_sizes = 8;
	direct_start_ok(f, direct_yaml);
	levels(f, 0, 0, 0, 0);
	for (uint64_t w = 0; w < 8; w++) {
		bellows_window win = window(f, w, f->h.level, false);
		uint32_t n = 0;

		for (uint32_t r = 0; r < f->h.world; r++) {
			for (uint32_t i = 0; i < f->n_sizes; i++) {
				double b = 65536.0 * (double)(1u << i);
				double t = 1.5 + 1.2e-6 * b;

				f->comm[n++] = (bellows_comm_sample){ .rank = r,
					.bytes = (uint64_t)b,
					.ms = t * (1 + 0.05 * rng_unit(&seed)),
					.count = 1 +
					    (uint32_t)(rng_next(&seed) % 4) };
			}
		}
		win.n_comm = n;
		f->h.prop.reason[0] = '\0';
		assert_int_equal(f->h.ops->on_window(f->h.pstate, f->h.config,
				     &win, &f->h.prop),
		    0);
		/* From the third window on (>= 96 samples). */
		if (w >= 2) {
			sup_assert_near(metric(f, "alpha_ms"), 0.25, 0.05);
			sup_assert_near(metric(f, "bw_gbps"), 10, 0.05);
			worst_alpha = fmax(worst_alpha,
			    fabs(metric(f, "alpha_ms") / 0.25 - 1));
			worst_bw = fmax(worst_bw,
			    fabs(metric(f, "bw_gbps") / 10 - 1));
		}
	}
	assert_true(metric(f, "fit_r2") > 0.99);
	print_message("alpha within %.2f %%, BW within %.2f %%\n",
	    100 * worst_alpha, 100 * worst_bw);
	sup_assert_contains(f->h.prop.reason, "(8 windows, 256 samples)");
}

/* ---- the policy through the host ------------------------------------ */

static void
test_perfmodel_starts_with_compression_on_and_describes_the_job(void **state)
{
	fixture *f = *state;

	start_ok(f, job_yaml);
	assert_false(f->h.state.compression_off);
	sup_assert_contains(f->h.reason,
	    "compression on until it is measured and alpha/BW are fitted (M "
	    "15.26 MiB, 3 buckets of 5.72 MiB, last 3.81 MiB)");
}

static void
test_perfmodel_gates_off_after_two_windows_predicted_slower(void **state)
{
	fixture *f = *state;

	start_ok(f, job_yaml);
	/* Window 0, compression on, gamma the default 1.07: rest 10 ms.
	 * Sync 10 + max(42.8, 24) + 9 = 61.8; compressed 10 + 40 + 10 + 9
	 * + 2.4 = 71.4; (71.4 - 61.8) / 61.8 = +15.5 % > 10 %: 1 of 2. */
	run(f, 0);
	assert_false(f->h.state.compression_off);
	sup_assert_contains(f->h.why,
	    "compression stays on: compressed 71.4 ms vs sync 61.8 ms "
	    "(+15.5%, margin 10%, 1/2); alpha 0.5 ms, BW 8 Gbps, R2 1.000 "
	    "(1 window, 12 samples); gamma 1.07 (default); T_comp 40 ms, "
	    "rest 10 ms; codec 10 ms, CR 10 (window 0); break-even 3.456 "
	    "Gbps; CR needed 1");
	sup_assert_near(host_metric(f, "t_sync_ms"), 61.8, 1e-9);
	sup_assert_near(host_metric(f, "t_comp_ms"), 71.4, 1e-9);
	sup_assert_near(host_metric(f, "alpha_ms"), 0.5, 1e-9);
	sup_assert_near(host_metric(f, "bw_gbps"), 8, 1e-9);
	sup_assert_near(host_metric(f, "breakeven_gbps"), 3.456, 1e-9);
	sup_assert_near(host_metric(f, "cr_needed"), 1, 1e-12);
	sup_assert_near(host_metric(f, "gamma"), 1.07, 1e-12);
	sup_assert_near(host_metric(f, "fit_r2"), 1, 1e-9);

	run(f, 1);
	assert_true(f->h.state.compression_off);
	sup_assert_contains(f->h.why,
	    "compression off from window 2: compressed 71.4 ms vs sync 61.8 "
	    "ms (+15.5%, margin 10%, 2/2)");
	/* The level another policy chose stays; only the gate moves. */
	assert_true(f->h.state.level[0] == 4);

	/* Window 2 runs raw: the compressed windows gave the rest, 10 ms,
	 * so backward and collectives took 67 - 10 = 57 ms; the compute
	 * term 57 - T_comm(4e6) = 48 exceeds 1.05 x the overlapped 24:
	 * gamma = 48 / 40 = 1.2. Sync 10 + max(48, 24) + 9 = 67; compressed
	 * still 71.4: +6.6 %, inside the margin: the gate stays off. */
	run(f, 2);
	assert_true(f->h.state.compression_off);
	sup_assert_contains(f->h.why,
	    "compression stays off: compressed 71.4 ms vs sync 67 ms (+6.6%, "
	    "margin 10%, 0/2)");
	sup_assert_contains(f->h.why, "gamma 1.2 (measured 1.2, 1 window)");
	sup_assert_near(host_metric(f, "gamma"), 1.2, 1e-12);
}

static void
test_perfmodel_hold_needs_consecutive_windows_past_the_margin(void **state)
{
	fixture *f = *state;

	start_ok(f, job_yaml);
	/* Codec 5: compressed 66.4 vs 61.8, +7.4 %: inside the margin. */
	f->on.codec = 5;
	f->on.step = 60;
	run(f, 0);
	sup_assert_contains(f->h.why, "(+7.4%, margin 10%, 0/2)");
	f->on.codec = 10;
	f->on.step = 65;
	run(f, 1);
	sup_assert_contains(f->h.why, "(+15.5%, margin 10%, 1/2)");
	/* Back inside the margin: the count starts over. */
	f->on.codec = 5;
	f->on.step = 60;
	run(f, 2);
	sup_assert_contains(f->h.why, "(+7.4%, margin 10%, 0/2)");
	f->on.codec = 10;
	f->on.step = 65;
	run(f, 3);
	assert_false(f->h.state.compression_off);
	run(f, 4);
	assert_true(f->h.state.compression_off);
	sup_assert_contains(f->h.why, "compression off from window 5");
}

static void
test_perfmodel_gates_back_on_when_the_network_slows(void **state)
{
	fixture *f = *state;

	start_gated(f, "fit_windows: 1");
	run(f, 0);
	run(f, 1);
	assert_true(f->h.state.compression_off);
	/* A quarter of the bandwidth, gate off: the step is 10 + max(1.2 *
	 * 40, 6 + 72) + 27 = 115, bound by the collectives: 115 - 10 - 27
	 * = 78 <= 1.05 x 78 says nothing about gamma, which stays the
	 * default 1.07. Sync 10 + max(42.8, 78) + 27 = 115; compressed 10
	 * + 40 + 10 + 9 + 9.6 = 78.6: -31.7 %, past the margin twice. */
	slow_network(f);
	f->off.step = 115;
	run(f, 2);
	assert_true(f->h.state.compression_off);
	sup_assert_contains(f->h.why,
	    "compression stays off: compressed 78.6 ms vs sync 115 ms "
	    "(-31.7%, margin 10%, 1/2); alpha 0.5 ms, BW 2 Gbps");
	sup_assert_contains(f->h.why,
	    "gamma 1.07 (default); not identifiable here: compute term 78 ms "
	    "<= 1.05 x overlapped collectives 78 ms");
	sup_assert_near(host_metric(f, "gamma"), 1.07, 1e-12);
	sup_assert_near(host_metric(f, "comm_bound"), 1, 0);
	run(f, 3);
	assert_false(f->h.state.compression_off);
	sup_assert_contains(f->h.why, "compression on from window 4");
	/* Room 1.07 * 40 - 9 = 33.8 ms for M s = 16e6 * 6e-6 = 96 ms: CR
	 * 96 / 33.8 = 2.84. */
	sup_assert_near(host_metric(f, "cr_needed"), 96 / 33.8, 1e-9);
	sup_assert_contains(f->h.why, "CR needed 2.84");
}

static void
test_perfmodel_hysteresis_keeps_the_gate_between_the_margins(void **state)
{
	fixture *f = *state;

	start_gated(f, "hold_windows: 1");
	/* On: +15.5 % > 10 % moves it off at once with hold 1. */
	run(f, 0);
	assert_true(f->h.state.compression_off);
	/* Off, gamma clamped to 1.2: sync 67 vs compressed 71.4, +6.6 %:
	 * below +10 % but not below -10 %: stays off. */
	for (uint64_t w = 1; w <= 4; w++) {
		run(f, w);
		assert_true(f->h.state.compression_off);
	}
	/* Turning compression back on would need -10 %. */
	sup_assert_contains(f->h.why,
	    "compression stays off: compressed 71.4 ms vs sync 67 ms (+6.6%, "
	    "margin 10%, 0/1)");
}

static void
test_perfmodel_probes_one_window_every_probe_windows(void **state)
{
	fixture *f = *state;

	start_gated(f, "probe_windows: 3");
	run(f, 0);
	run(f, 1);
	assert_true(f->h.state.compression_off);
	/* Off since window 1: windows 2 and 3 run raw, window 4 asks for
	 * compression in window 5 only. */
	run(f, 2);
	run(f, 3);
	assert_true(f->h.state.compression_off);
	run(f, 4);
	assert_false(f->h.state.compression_off);
	sup_assert_contains(f->h.why,
	    "compression on for window 5 only, to re-measure it");
	/* Window 5 measures a faster codec (2 ms): compressed 10 + 40 + 2
	 * + 9 + 2.4 = 63.4 vs sync 67 (gamma 1.2 from the raw windows),
	 * -5.4 %: not enough, the gate goes back off. */
	f->on.codec = 2;
	f->on.step = 57;
	run(f, 5);
	assert_true(f->h.state.compression_off);
	sup_assert_contains(f->h.why, "codec 2 ms, CR 10 (window 5)");
	sup_assert_contains(f->h.why,
	    "compression stays off: compressed 63.4 ms");
	run(f, 6);
	assert_true(f->h.state.compression_off);
	/* Three windows after the probe. */
	run(f, 7);
	assert_false(f->h.state.compression_off);
}

static void
test_perfmodel_probes_once_when_the_levels_change_while_off(void **state)
{
	fixture *f = *state;

	direct_start_with(f, "probe_windows: 100");
	levels(f, 4, 4, 0, 4);
	direct_run_ok(f, 0);
	direct_run_ok(f, 1);
	assert_true(f->h.prop.compression_off);
	direct_run_ok(f, 2);
	assert_true(f->h.prop.compression_off);
	/* Another policy lowers the levels: the measurement is of other
	 * levels, so window 3 asks for one compressed window. */
	levels(f, 2, 2, 0, 2);
	direct_run_ok(f, 3);
	assert_false(f->h.prop.compression_off);
	sup_assert_contains(f->h.prop.reason,
	    "compression on for window 4 only, to re-measure it");
	sup_assert_contains(f->h.prop.reason, "(window 1, other levels)");
	/* Window 4 reports no codec time: nothing measured. Still, these
	 * levels were probed once: no probe again until probe_windows. */
	f->on.codec = 0;
	direct_run_ok(f, 4);
	assert_true(f->h.prop.compression_off);
	sup_assert_contains(f->h.prop.reason, "(window 1, other levels)");
	direct_run_ok(f, 5);
	assert_true(f->h.prop.compression_off);
}

static void
test_perfmodel_raw_windows_start_the_job_uncompressed(void **state)
{
	fixture *f = *state;

	direct_start_with(f, "raw_windows: 2");
	assert_true(f->h.prop.compression_off);
	sup_assert_contains(f->h.prop.reason,
	    "compression off for the first 2 windows, to fit alpha/BW to "
	    "every tensor sent raw");
	levels(f, 4, 4, 0, 4);
	direct_run_ok(f, 0);
	assert_true(f->h.prop.compression_off);
	sup_assert_contains(f->h.prop.reason,
	    "compression off until window 2 (raw_windows): sync 67 ms, no "
	    "compressed prediction");
	sup_assert_contains(f->h.prop.reason, "compression never measured");
	/* No compressed window has given the rest of the step yet: gamma
	 * stays the default, and the rest is what the model leaves of the
	 * raw step, 67 - 42.8 - 9 = 15.2, so sync is the step, 67. */
	sup_assert_contains(f->h.prop.reason,
	    "gamma 1.07 (default); not measured: no compressed window yet "
	    "gave the rest of the step");
	direct_run_ok(f, 1);
	assert_false(f->h.prop.compression_off);
	sup_assert_contains(f->h.prop.reason,
	    "compression on from window 2: raw_windows over");
	direct_run_ok(f, 2);
	sup_assert_near(metric(f, "codec_ms"), 10, 1e-12);
}

static void
test_perfmodel_never_gates_off_compression_it_never_measured(void **state)
{
	fixture *f = *state;

	start_ok(f, job_yaml);
	/* No codec time reported: compression is not measured. */
	f->on.codec = 0;
	f->on.step = 55;
	for (uint64_t w = 0; w < 5; w++) {
		run(f, w);
		assert_false(f->h.state.compression_off);
	}
	sup_assert_contains(f->h.why,
	    "compression stays on: sync 61.8 ms, no compressed prediction");
	sup_assert_contains(f->h.why, "compression never measured");
	sup_assert_lacks(f->h.why, "break-even");
	assert_true(isnan(host_metric(f, "t_comp_ms")));
	sup_assert_near(host_metric(f, "t_sync_ms"), 61.8, 1e-9);
}

/* While compressing, only the small tensors may go raw: a line through
 * those alone (here 0.1-0.5 MB, a quarter of the 6 MB the fit spans is
 * 1.5 MB) does not replace the fit of the large ones. */
static void
test_perfmodel_keeps_the_fit_of_the_large_tensors_when_only_small_go_raw(
    void **state)
{
	fixture *f = *state;

	start_gated(f, "fit_windows: 1");
	fast_network(f);
	run(f, 0);
	sup_assert_near(host_metric(f, "alpha_ms"), 0.5, 1e-9);
	sup_assert_near(host_metric(f, "bw_gbps"), 8, 1e-9);
	/* Small sizes on a much slower line: fitted alone, BW would drop. */
	f->n_sizes = 2;
	f->bytes[0] = 100000;
	f->ms[0] = 5;
	f->bytes[1] = 500000;
	f->ms[1] = 9;
	run(f, 1);
	sup_assert_contains(f->h.why,
	    "raw collectives only up to 500000 B (fit spans 6000000 B): fit "
	    "of window 0 kept");
	sup_assert_near(host_metric(f, "alpha_ms"), 0.5, 1e-9);
	sup_assert_near(host_metric(f, "bw_gbps"), 8, 1e-9);
	/* The large ones timed again: refitted on them. */
	fast_network(f);
	f->ms[0] = 5.5;
	run(f, 2);
	assert_null(strstr(f->h.why, "fit of window"));
}

static void
test_perfmodel_keeps_the_fit_when_one_size_is_timed(void **state)
{
	fixture *f = *state;

	start_gated(f, "fit_windows: 2");
	/* Only 4e6-byte collectives: no line, no prediction, no gate. */
	f->n_sizes = 1;
	f->bytes[0] = 4000000;
	f->ms[0] = 9;
	run(f, 0);
	sup_assert_contains(f->h.why,
	    "compression stays on: no prediction; one collective size "
	    "(4000000 bytes) in the last 2 windows: need 2 to fit");
	assert_true(isnan(host_metric(f, "alpha_ms")));
	assert_true(isnan(host_metric(f, "t_sync_ms")));
	/* Three sizes in window 1: fitted. */
	fast_network(f);
	run(f, 1);
	sup_assert_near(host_metric(f, "alpha_ms"), 0.5, 1e-9);
	/* One size again: window 1 is still within the last 2 windows. */
	f->n_sizes = 1;
	run(f, 2);
	sup_assert_near(host_metric(f, "alpha_ms"), 0.5, 1e-9);
	/* Windows 1 and 2 predicted +15.5 %: the gate is off. Window 3
	 * sees windows 2 and 3, one size: the fit of window 2 is kept and
	 * said to be, and predicts (gamma 1.2 measured in this raw window)
	 * 10 + 48 + 9 = 67. */
	assert_true(f->h.state.compression_off);
	run(f, 3);
	sup_assert_contains(f->h.why,
	    "one collective size (1000000 bytes) in the last 2 windows: need "
	    "2 to fit, fit of window 2 kept");
	sup_assert_near(host_metric(f, "alpha_ms"), 0.5, 1e-9);
	sup_assert_near(host_metric(f, "t_sync_ms"), 67, 1e-9);
}

static void
test_perfmodel_rejects_a_falling_line_with_its_slope(void **state)
{
	fixture *f = *state;

	start_ok(f, job_yaml);
	/* 9 ms for 1e6 bytes, 5 ms for 4e6 bytes: -4 / 3e6 ms/byte =
	 * -1.398 ms/MiB. */
	f->n_sizes = 2;
	f->bytes[0] = 1000000;
	f->ms[0] = 9;
	f->bytes[1] = 4000000;
	f->ms[1] = 5;
	run(f, 0);
	sup_assert_contains(f->h.why,
	    "fit rejected: slope -1.4 ms/MiB <= 0 (time does not grow with "
	    "size)");
	assert_true(isnan(host_metric(f, "bw_gbps")));
	assert_false(f->h.state.compression_off);
}

static void
test_perfmodel_runs_beside_accordion_on_other_knobs(void **state)
{
	fixture *f = *state;

	start_ok(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n"
	    "        params: {interval: 1}\n"
	    "      - type: perfmodel\n"
	    "        params: {bucket_bytes: 6000000, hold_windows: 1, "
	    "compressed_overlap: false}\n");
	/* Accordion's critical level 2 on the three 2-D layers. */
	assert_true(f->h.state.level[0] == 2 && f->h.state.level[2] == 0);
	run(f, 0);
	assert_true(f->h.state.compression_off);
	assert_true(f->h.state.level[0] == 2);
	assert_string_equal(f->h.policies, "accordion,perfmodel");
}

static void
test_perfmodel_world_one_predicts_without_collectives(void **state)
{
	fixture *f = *state;

	f->h.world = 1;
	f->n_sizes = 0;
	direct_start_ok(f, direct_yaml);
	levels(f, 4, 4, 0, 4);
	/* No collective: sync = gamma T_comp + rest = 1.07 * 40 + 10 =
	 * 52.8; compressed 40 + 10 + 10 = 60 (CR changes nothing). */
	direct_run_ok(f, 0);
	sup_assert_contains(f->h.prop.reason,
	    "compressed 60 ms vs sync 52.8 ms (+13.6%");
	sup_assert_contains(f->h.prop.reason, "world 1: no collective");
	assert_true(isnan(metric(f, "alpha_ms")));
	assert_true(isnan(metric(f, "breakeven_gbps")));
	direct_run_ok(f, 1);
	assert_true(f->h.prop.compression_off);
}

/* ---- compressed buckets overlapped with backward (the default) ------- */

/* Starts perfmodel through the host beside `fixed` (level 4), with the
 * default compressed_overlap and `extra` added to its parameters. */
static void
start_overlapped(fixture *f, const char *extra)
{
	char yaml[512];

	snprintf(yaml, sizeof(yaml),
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: fixed\n"
	    "        params: {level: 4}\n"
	    "      - type: perfmodel\n"
	    "        params: {bucket_bytes: 6000000, %s}\n",
	    extra);
	start_ok(f, yaml);
}

/* perfmodel alone, compressed_overlap as by default. */
static const char
    *const overlapped_yaml = "jobs:\n"
			     "  - policies:\n"
			     "      - type: perfmodel\n"
			     "        params: {bucket_bytes: 6000000}\n";

/* A job on the slow network (s = 6e-6) whose compressed buckets overlap
 * backward: T_comp 60 ms, gamma the default 1.07 (64.2 ms), the rest 10
 * ms, CR 2 (8e6 of 16e6 bytes sent), codec 5 ms. Raw: the overlapped
 * collectives 6 + 12e6 * 6e-6 = 78 ms exceed 64.2: the step is 10 + 78 +
 * T_comm(4e6) 27 = 115 ms, its collectives busy 9 + 96 = 105 ms.
 * Compressed: overlapped 6 + 6e6 * 6e-6 = 42 < 64.2, then the last
 * bucket 3 + 2e6 * 6e-6 = 15 and the codec 5: 10 + 64.2 + 20 = 94.2 ms,
 * its collectives busy 9 + 48 = 57 ms. Backward, codec and collectives
 * add up to 60 + 5 + 57 = 122 ms, more than the whole step. */
static void
overlapped_job(fixture *f)
{
	slow_network(f);
	f->on = (profile){ .step = 94.2,
		.bwd = 60,
		.comm = 57,
		.codec = 5,
		.floats_sent = 8000000,
		.floats_raw = 16000000 };
	f->off = (profile){ .step = 115,
		.bwd = 60,
		.comm = 105,
		.floats_sent = 16000000,
		.floats_raw = 16000000 };
}

static void
test_perfmodel_predicts_an_overlapped_compressed_step_and_keeps_it_on(
    void **state)
{
	fixture *f = *state;

	overlapped_job(f);
	start_overlapped(f, "margin: 0.1");
	/* The rest is what the model leaves of the compressed step, 94.2 -
	 * 64.2 - 20 = 10: compressed 94.2 (the step, not the serial 122)
	 * against sync 10 + 78 + 27 = 115, -18.1 %. */
	for (uint64_t w = 0; w < 4; w++) {
		run(f, w);
		assert_false(f->h.state.compression_off);
	}
	sup_assert_contains(f->h.why,
	    "compression stays on: compressed 94.2 ms vs sync 115 ms "
	    "(-18.1%, margin 10%, 0/2)");
	sup_assert_contains(f->h.why,
	    "T_comp 60 ms, rest 10 ms; codec 5 ms, CR 2");
	sup_assert_contains(f->h.why,
	    "; per level (ms): none 115, 4* 94.2: best 4");
	sup_assert_near(host_metric(f, "t_comp_ms"), 94.2, 1e-9);
	sup_assert_near(host_metric(f, "t_step_ms"), 94.2, 1e-9);
	sup_assert_near(host_metric(f, "t_sync_ms"), 115, 1e-9);
	sup_assert_near(host_metric(f, "t_other_ms"), 10, 1e-9);
}

/* The same windows read as synchronous compressed steps: the rest comes
 * out at 94.2 - 60 - 57 - 5 < 0, so 0; compressed 60 + 5 + 9 + 48 = 122
 * against sync 78 + 27 = 105, +16.2 %: compression goes off, though it
 * saves a sixth of the step. */
static void
test_perfmodel_without_compressed_overlap_turns_the_same_job_off(void **state)
{
	fixture *f = *state;

	overlapped_job(f);
	start_gated(f, "margin: 0.1");
	run(f, 0);
	run(f, 1);
	assert_true(f->h.state.compression_off);
	sup_assert_contains(f->h.why,
	    "compression off from window 2: compressed 122 ms vs sync 105 ms "
	    "(+16.2%, margin 10%, 2/2)");
}

/* A raw window predicts the compressed step from its own rest, 115 - 78
 * - 27 = 10: 10 + 64.2 + 20 = 94.2, what the compressed window measured
 * (the serial model: 10 + 122 = 132). */
static void
test_perfmodel_predicts_the_overlapped_compressed_step_in_raw_windows(
    void **state)
{
	fixture *f = *state;

	overlapped_job(f);
	direct_start_ok(f, overlapped_yaml);
	levels(f, 4, 4, 0, 4);
	direct_run_ok(f, 0);
	sup_assert_near(metric(f, "t_comp_ms"), 94.2, 1e-9);
	/* Directly driven, the gate stays on: the raw profile is f->on. */
	levels(f, 0, 0, 0, 0);
	f->on = f->off;
	direct_run_ok(f, 1);
	sup_assert_near(metric(f, "t_sync_ms"), 115, 1e-9);
	sup_assert_near(metric(f, "t_other_ms"), 10, 1e-9);
	sup_assert_near(metric(f, "t_comp_ms"), 94.2, 1e-9);
}

/* A calibration alternates raw and compressed steps: with compressed
 * buckets overlapped, it sets the rest of the step only while none is
 * known. */
static void
test_perfmodel_with_compressed_overlap_a_calibration_keeps_the_rest(
    void **state)
{
	fixture *f = *state;

	overlapped_job(f);
	direct_start_ok(f, overlapped_yaml);
	levels(f, 4, 4, 0, 4);
	f->calibrate_until = 1000;
	/* None known: 94.2 - 64.2 - 20 = 10. */
	direct_run_ok(f, 0);
	sup_assert_near(metric(f, "t_other_ms"), 10, 1e-9);
	f->on.step = 150;
	direct_run_ok(f, 1);
	sup_assert_near(metric(f, "t_other_ms"), 10, 1e-9);
	/* Past the calibration: 150 - 84.2 = 65.8. */
	f->calibrate_until = 0;
	direct_run_ok(f, 11);
	sup_assert_near(metric(f, "t_other_ms"), 65.8, 1e-9);
}

/* Overlap does not hide a slow codec: fast network, T_comp 40, CR 10,
 * codec 20 ms. Compressed: 10 + 42.8 + 3 + 4e5 * 1.5e-6 + 20 = 76.4 ms;
 * raw: 10 + 42.8 + 9 = 61.8 ms. */
static void
test_perfmodel_turns_overlapped_compression_off_when_its_codec_is_slow(
    void **state)
{
	fixture *f = *state;

	f->on = (profile){ .step = 76.4,
		.bwd = 40,
		.comm = 11.4,
		.codec = 20,
		.floats_sent = 1600000,
		.floats_raw = 16000000 };
	f->off.step = 61.8;
	start_overlapped(f, "margin: 0.1");
	/* Rest 76.4 - 42.8 - 3.6 - 20 = 10: compressed 76.4 vs sync 10 +
	 * 42.8 + 9 = 61.8, +23.6 %, twice. */
	run(f, 0);
	assert_false(f->h.state.compression_off);
	run(f, 1);
	assert_true(f->h.state.compression_off);
	sup_assert_contains(f->h.why,
	    "compression off from window 2: compressed 76.4 ms vs sync 61.8 "
	    "ms (+23.6%, margin 10%, 2/2)");
	/* Raw now: rest 61.8 - 51.8 = 10, the same predictions. */
	run(f, 2);
	assert_true(f->h.state.compression_off);
	sup_assert_contains(f->h.why,
	    "compression stays off: compressed 76.4 ms vs sync 61.8 ms "
	    "(+23.6%, margin 10%, 0/2)");
	sup_assert_near(host_metric(f, "t_sync_ms"), 61.8, 1e-9);
}

/* Raw collectives far above the compute term give the rest apart from
 * gamma (slow network, T_comp 20: 78 > 1.05 x 2 x 20), and the
 * compressed steps, bound by compute, then give gamma: here 1.3, CR 10,
 * codec 5. Raw: 10 + 78 + 27 = 115; compressed: overlapped 6 + 1.2e6 *
 * 6e-6 = 13.2 < 26, tail 3 + 4e5 * 6e-6 + 5 = 10.4: 10 + 26 + 10.4 =
 * 46.4. */
static void
test_perfmodel_measures_gamma_from_overlapped_compressed_steps(void **state)
{
	fixture *f = *state;

	const profile comp = { .step = 46.4,
		.bwd = 20,
		.comm = 18.6,
		.codec = 5,
		.floats_sent = 1600000,
		.floats_raw = 16000000 };
	const profile raw = { .step = 115,
		.bwd = 20,
		.comm = 105,
		.floats_sent = 16000000,
		.floats_raw = 16000000 };

	slow_network(f);
	direct_start_ok(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: perfmodel\n"
	    "        params: {bucket_bytes: 6000000, margin: 10}\n");
	/* Compressed first: no rest apart from gamma yet. With the default
	 * 1.07 the rest is 46.4 - 21.4 - 10.4 = 14.6 and sync 14.6 + 105 =
	 * 119.6. */
	levels(f, 4, 4, 0, 4);
	f->on = comp;
	direct_run_ok(f, 0);
	sup_assert_contains(f->h.prop.reason,
	    "gamma 1.07 (default); not measured: no window yet gave the rest "
	    "of the step apart from gamma");
	sup_assert_near(metric(f, "t_sync_ms"), 119.6, 1e-9);
	/* Raw, bound by its collectives: the rest 115 - 78 - 27 = 10. */
	levels(f, 0, 0, 0, 0);
	f->on = raw;
	direct_run_ok(f, 1);
	sup_assert_near(metric(f, "t_other_ms"), 10, 1e-9);
	sup_assert_near(metric(f, "gamma"), 1.07, 1e-12);
	/* Compressed: (46.4 - 10 - 10.4) / 20 = 1.3 (26 > 1.05 x 13.2);
	 * the rest 46.4 - 26 - 10.4 = 10 and sync 10 + 105 = 115, the raw
	 * step. */
	levels(f, 4, 4, 0, 4);
	f->on = comp;
	direct_run_ok(f, 2);
	sup_assert_contains(f->h.prop.reason,
	    "gamma 1.3 (measured 1.3, 1 window)");
	sup_assert_near(metric(f, "gamma"), 1.3, 1e-12);
	sup_assert_near(metric(f, "t_sync_ms"), 115, 1e-9);
	sup_assert_near(metric(f, "t_comp_ms"), 46.4, 1e-9);
	/* Raw again: compressed predicted 10 + 26 + 10.4 = 46.4. */
	levels(f, 0, 0, 0, 0);
	f->on = raw;
	direct_run_ok(f, 3);
	sup_assert_near(metric(f, "t_comp_ms"), 46.4, 1e-9);
	sup_assert_near(metric(f, "gamma"), 1.3, 1e-12);
}

/* ---- direct driving: metrics, reloads, corners ------------------------ */

/* Raw overlapped windows measure gamma from their step, once a
 * compressed window (not overlapped) gave the rest of the step: T_obs =
 * step - rest = max(gamma T_comp, overlapped) + T_comm(b_last). */
static void
test_perfmodel_measures_gamma_from_compute_bound_raw_steps(void **state)
{
	fixture *f = *state;

	direct_start_with(f, "margin: 10");
	/* Raw before any compressed window: no rest, no gamma. */
	levels(f, 0, 0, 0, 0);
	f->on = f->off;
	direct_run_ok(f, 0);
	sup_assert_contains(f->h.prop.reason,
	    "gamma 1.07 (default); not measured: no compressed window yet "
	    "gave the rest of the step");
	/* Compressed: rest 65 - 40 - 5 - 10 = 10; gamma not measured. */
	levels(f, 4, 4, 0, 4);
	f->on = (profile){ .step = 65,
		.bwd = 40,
		.comm = 5,
		.codec = 10,
		.floats_sent = 1600000,
		.floats_raw = 16000000 };
	direct_run_ok(f, 1);
	sup_assert_contains(f->h.prop.reason, "gamma 1.07 (default); T_comp");
	/* Raw, step 63: (63 - 10 - 9) / 40 = 1.1 (44 > 1.05 x 24). */
	levels(f, 0, 0, 0, 0);
	f->on = f->off;
	f->on.step = 63;
	direct_run_ok(f, 2);
	sup_assert_contains(f->h.prop.reason,
	    "gamma 1.1 (measured 1.1, 1 window)");
	sup_assert_near(metric(f, "gamma"), 1.1, 1e-12);
	/* Step 75: 1.4; the median of 1.1 and 1.4 is 1.25. */
	f->on.step = 75;
	direct_run_ok(f, 3);
	sup_assert_contains(f->h.prop.reason,
	    "gamma 1.25 (measured 1.25, 2 windows)");
	/* Step 43: 43 - 19 = 24 <= 1.05 x 24, bound by the collectives:
	 * the median stays. */
	f->on.step = 43;
	direct_run_ok(f, 4);
	sup_assert_contains(f->h.prop.reason,
	    "gamma 1.25 (measured 1.25, 2 windows); not identifiable here: "
	    "compute term 24 ms <= 1.05 x overlapped collectives 24 ms");
	/* Steps 135 and 139: 2.9 and 3: median of 1.1, 1.4, 2.9, 3 is
	 * 2.15, clamped to 2. */
	f->on.step = 135;
	direct_run_ok(f, 5);
	f->on.step = 139;
	direct_run_ok(f, 6);
	sup_assert_contains(f->h.prop.reason,
	    "gamma 2 (measured 2.15, clamped, 4 windows)");
	sup_assert_near(metric(f, "gamma"), 2, 1e-12);
	/* A compressed window measures no gamma. */
	levels(f, 4, 4, 0, 4);
	f->on = (profile){ .step = 65,
		.bwd = 40,
		.comm = 5,
		.codec = 10,
		.floats_sent = 1600000,
		.floats_raw = 16000000 };
	direct_run_ok(f, 7);
	sup_assert_contains(f->h.prop.reason,
	    "gamma 2 (measured 2.15, clamped, 4 windows)");
}

/* Uniform in [-1, 1], from a fixed linear congruential sequence. */
static double
noise_unit(uint64_t *seed)
{
	*seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
	return (double)(*seed >> 11) / (double)(1ull << 53) * 2 - 1;
}

/* Windows generated from the model with gamma 1.3 and overlap, every
 * step, backward time and collective off by up to 3 %: the medians
 * recover gamma within 5 %. */
static void
test_perfmodel_recovers_gamma_from_noisy_overlapped_steps(void **state)
{
	fixture *f = *state;
	const double base[N_SIZES] = { 4.5, 9, 12 };
	uint64_t seed = 42;

	direct_start_with(f, "margin: 10, fit_windows: 4");
	for (uint64_t i = 0; i < 24; i++) {
		bool compressed = i % 3 == 0;
		double tc = 40 * (1 + 0.03 * noise_unit(&seed));
		double rest = 10;

		for (uint32_t j = 0; j < N_SIZES; j++)
			f->ms[j] = base[j] * (1 + 0.03 * noise_unit(&seed));
		if (compressed) {
			/* Not overlapped: rest + T_comp + codec + comm. */
			levels(f, 4, 4, 0, 4);
			f->on = (profile){ .bwd = tc,
				.comm = 5,
				.codec = 10,
				.floats_sent = 1600000,
				.floats_raw = 16000000 };
			f->on.step = (rest + tc + 10 + 5) *
			    (1 + 0.03 * noise_unit(&seed));
		} else {
			/* rest + max(1.3 T_comp, 24) + T_comm(4e6) 9. */
			levels(f, 0, 0, 0, 0);
			f->on = (profile){ .bwd = tc,
				.comm = 33,
				.floats_sent = 16000000,
				.floats_raw = 16000000 };
			f->on.step = (rest + fmax(1.3 * tc, 24) + 9) *
			    (1 + 0.03 * noise_unit(&seed));
		}
		direct_run_ok(f, i);
	}
	sup_assert_near(metric(f, "gamma"), 1.3, 1.3 * 0.05);
	sup_assert_contains(f->h.prop.reason, "16 windows)");
}

/* One compressed window at `level` on every weight, with its codec time
 * and floats sent, the rest of the step kept at 10 ms: step = 10 + 40 +
 * comm 5 + codec. */
static void
run_level(fixture *f, uint64_t index, double level, double codec, uint64_t sent)
{
	levels(f, level, level, 0, level);
	f->on.codec = codec;
	f->on.floats_sent = sent;
	f->on.step = 55 + codec;
	direct_run_ok(f, index);
}

/* Every set of levels seen in force keeps its codec time and ratio (the
 * medians over its windows) and gets its own prediction, as Accordion
 * moves between a critical and a stable level. */
static void
test_perfmodel_predicts_every_level_measured_from_its_medians(void **state)
{
	fixture *f = *state;

	/* A margin the gate never passes: every window compresses. */
	direct_start_with(f, "fit_windows: 1, margin: 10");
	sup_load_file(f->h.path2,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: perfmodel\n"
	    "        params: {bucket_bytes: 6000000, fit_windows: 1, "
	    "compressed_overlap: false, "
	    "margin: 9}\n",
	    &f->h.cfg2);
	/* Level 4: codec 10, 12 and 20 ms, CR 16e6 / 1.6e6 = 10; level 1:
	 * codec 4 ms, CR 16e6 / 4e6 = 4. */
	run_level(f, 0, 4, 10, 1600000);
	run_level(f, 1, 1, 4, 4000000);
	run_level(f, 2, 4, 12, 1600000);
	run_level(f, 3, 4, 20, 1600000);
	/* Fast network, gamma 1.07: sync 10 + max(42.8, 24) + 9 = 61.8;
	 * level 4 (median codec 12): 10 + 40 + 12 + 3 * 3 + 1.6e6 * 1.5e-6
	 * = 73.4; level 1: 10 + 40 + 4 + 9 + 4e6 * 1.5e-6 = 69. Raw is
	 * fastest. The gate's own prediction keeps the last measurement
	 * (codec 20): 81.4. */
	sup_assert_near(metric(f, "t_pred_level_4_ms"), 73.4, 1e-9);
	sup_assert_near(metric(f, "t_pred_level_1_ms"), 69, 1e-9);
	sup_assert_near(metric(f, "t_comp_ms"), 81.4, 1e-9);
	sup_assert_near(metric(f, "t_pred_best_ms"), 61.8, 1e-9);
	sup_assert_near(metric(f, "best_level"), 0, 1e-12);
	sup_assert_contains(f->h.prop.reason,
	    "; per level (ms): none 61.8, 4* 73.4, 1 69: best none");
	/* A fractional level names its metric with "p": 0.25, codec 2 ms,
	 * CR 2: 10 + 40 + 2 + 9 + 8e6 * 1.5e-6 = 73. */
	run_level(f, 4, 0.25, 2, 8000000);
	sup_assert_near(metric(f, "t_pred_level_0p25_ms"), 73, 1e-9);
	sup_assert_contains(f->h.prop.reason,
	    "none 61.8, 4 73.4, 1 69, 0.25* 73: best none");

	/* The table survives a reload. The network slows (s = 6e-6): sync
	 * 10 + max(42.8, 6 + 12e6 * 6e-6) + 3 + 4e6 * 6e-6 = 10 + 78 + 27 =
	 * 115; level 4: 10 + 40 + 12 + 9 + 9.6 = 80.6; level 1: 10 + 40 + 4
	 * + 9 + 24 = 87; level 0.25: 10 + 40 + 2 + 9 + 48 = 109. Level 4
	 * wins. */
	assert_int_equal(sup_direct_reload(&f->h, 5), 0);
	slow_network(f);
	run_level(f, 5, 1, 4, 4000000);
	sup_assert_near(metric(f, "t_sync_ms"), 115, 1e-9);
	sup_assert_near(metric(f, "t_pred_level_4_ms"), 80.6, 1e-9);
	sup_assert_near(metric(f, "t_pred_level_1_ms"), 87, 1e-9);
	sup_assert_near(metric(f, "t_pred_level_0p25_ms"), 109, 1e-9);
	sup_assert_near(metric(f, "t_pred_best_ms"), 80.6, 1e-9);
	sup_assert_near(metric(f, "best_level"), 4, 1e-12);
	sup_assert_contains(f->h.prop.reason,
	    "; per level (ms): none 115, 4 80.6, 1* 87, 0.25 109: best 4");
}

/* Layers at different levels make a set of their own, named by its
 * slot; its metric is t_pred_mixed_<slot>_ms and it has no best_level. */
static void
test_perfmodel_names_a_mixed_set_of_levels_by_its_slot(void **state)
{
	fixture *f = *state;

	direct_start_ok(f, direct_yaml);
	levels(f, 2, 1, 0, 1);
	direct_run_ok(f, 0);
	/* Codec 10, CR 10 as level 4 above: 71.4 against sync 61.8. */
	sup_assert_near(metric(f, "t_pred_mixed_0_ms"), 71.4, 1e-9);
	sup_assert_contains(f->h.prop.reason, "none 61.8, mixed#0* 71.4");
	sup_assert_near(metric(f, "best_level"), 0, 1e-12);
}

static void
test_perfmodel_gamma_param_stands_in_until_measured(void **state)
{
	fixture *f = *state;

	direct_start_with(f, "gamma: 1.1");
	levels(f, 4, 4, 0, 4);
	/* Sync 10 + max(1.1 * 40, 24) + 9 = 63. */
	direct_run_ok(f, 0);
	sup_assert_contains(f->h.prop.reason, "gamma 1.1 (default)");
	sup_assert_near(metric(f, "t_sync_ms"), 63, 1e-9);
}

/* Without overlap, the communication a mode's steps take beyond what the
 * fitted collectives explain (hook work, ranks' skew) is measured in that
 * mode and carried into its predictions, also while the other mode runs. */
static void
test_perfmodel_carries_the_unmodelled_communication_of_each_mode(void **state)
{
	fixture *f = *state;

	direct_start_ok(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: perfmodel\n"
	    "        params: {bucket_bytes: 0, overlap: false, "
	    "raw_windows: 1}\n");
	levels(f, 4, 4, 0, 4);
	/* Raw: the line explains k L + M s = 4 * 3 + 24 = 36 ms of the 41
	 * measured: 5 unexplained. The rest is 91 - 40 - 41 = 10, so the
	 * prediction is 10 + 40 + 36 + 5 = 91, the step. */
	f->off.step = 91;
	f->off.comm = 41;
	assert_true(f->h.prop.compression_off);
	direct_run_ok(f, 0);
	sup_assert_near(metric(f, "t_unmodelled_ms"), 5, 1e-9);
	sup_assert_near(metric(f, "t_sync_ms"), 91, 1e-9);
	assert_true(isnan(metric(f, "t_unmodelled_comp_ms")));
	/* Compressed (rest 65 - 40 - 5 - 10 = 10): the line's 4 * 3 + 2.4
	 * = 14.4 ms exceed the 5 measured, nothing unexplained; the raw
	 * step is still predicted with its 5 ms: 10 + 40 + 36 + 5 = 91,
	 * the compressed one 10 + 40 + 10 + 14.4 = 74.4. */
	assert_false(f->h.prop.compression_off);
	direct_run_ok(f, 1);
	sup_assert_near(metric(f, "t_unmodelled_comp_ms"), 0, 1e-9);
	sup_assert_near(metric(f, "t_unmodelled_ms"), 5, 1e-9);
	sup_assert_near(metric(f, "t_sync_ms"), 91, 1e-9);
	sup_assert_near(metric(f, "t_comp_ms"), 74.4, 1e-9);
}

static void
test_perfmodel_overlap_false_predicts_the_serial_sum(void **state)
{
	fixture *f = *state;

	direct_start_ok(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: perfmodel\n"
	    "        params: {bucket_bytes: 0, overlap: false}\n");
	levels(f, 4, 4, 0, 4);
	/* One collective per layer, k = 4: sync 10 + 40 + 4 * 3 + 16e6 *
	 * 1.5e-6 = 10 + 40 + 12 + 24 = 86; compressed 10 + 40 + 10 + 12 +
	 * 2.4 = 74.4. */
	direct_run_ok(f, 0);
	sup_assert_near(metric(f, "t_sync_ms"), 86, 1e-9);
	sup_assert_near(metric(f, "t_comp_ms"), 74.4, 1e-9);
	sup_assert_contains(f->h.prop.reason, "; no overlap;");
	sup_assert_near(metric(f, "gamma"), 1.07, 1e-12);
}

static void
test_perfmodel_per_layer_collectives_leave_layer_0_last(void **state)
{
	fixture *f = *state;

	direct_start_ok(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: perfmodel\n"
	    "        params: {bucket_bytes: 0, compressed_overlap: false}\n");
	sup_assert_contains(f->h.prop.reason,
	    "(M 15.26 MiB, 4 per-layer collectives, last 3.81 MiB)");
	levels(f, 4, 4, 0, 4);
	/* k = 4, the last is layer 0 (4e6 bytes): overlapped 3 * 3 + 12e6
	 * * 1.5e-6 = 27 < 42.8; sync 10 + 42.8 + 3 + 6 = 61.8. */
	direct_run_ok(f, 0);
	sup_assert_near(metric(f, "t_sync_ms"), 61.8, 1e-9);
}

static void
test_perfmodel_reload_keeps_the_fit_measurement_and_gate(void **state)
{
	fixture *f = *state;
	bellows_event ev = { .type = BELLOWS_EVENT_RELOAD,
		.window = 2,
		.ranks_alive = 4 };

	direct_start_ok(f, direct_yaml);
	sup_load_file(f->h.path2,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: perfmodel\n"
	    "        params: {bucket_bytes: 6000000, margin: 0.5, "
	    "compressed_overlap: false}\n",
	    &f->h.cfg2);
	levels(f, 4, 4, 0, 4);
	direct_run_ok(f, 0);
	direct_run_ok(f, 1);
	assert_true(f->h.prop.compression_off);
	assert_int_equal(f->h.ops->on_event(f->h.pstate,
			     f->h.cfg2->jobs[0].policies[0].config, &ev),
	    0);
	f->h.config = f->h.cfg2->jobs[0].policies[0].config;
	/* No samples after the reload: the ring from before still fits. */
	f->n_sizes = 0;
	direct_run_ok(f, 2);
	assert_true(f->h.prop.compression_off);
	sup_assert_contains(f->h.prop.reason, "margin 50%");
	sup_assert_contains(f->h.prop.reason, "codec 10 ms, CR 10 (window 1)");
	sup_assert_contains(f->h.prop.reason, "(2 windows, 24 samples)");
	sup_assert_near(metric(f, "alpha_ms"), 0.5, 1e-9);
}

static void
test_perfmodel_reload_through_the_host_keeps_the_gate(void **state)
{
	fixture *f = *state;

	start_ok(f, job_yaml);
	sup_load_file(f->h.path2,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: fixed\n"
	    "        params: {level: 4}\n"
	    "      - type: perfmodel\n"
	    "        params: {bucket_bytes: 6000000, hold_windows: 3, "
	    "compressed_overlap: false}\n",
	    &f->h.cfg2);
	run(f, 0);
	run(f, 1);
	assert_true(f->h.state.compression_off);
	sup_reload(&f->h, 2);
	run(f, 2);
	assert_true(f->h.state.compression_off);
	sup_assert_contains(f->h.why, "(+6.6%, margin 10%, 0/3)");
}

static void
test_perfmodel_restarts_the_fit_when_the_world_changes(void **state)
{
	fixture *f = *state;

	direct_start_ok(f, direct_yaml);
	levels(f, 4, 4, 0, 4);
	direct_run_ok(f, 0);
	/* Two ranks now, one size: the old line is for p = 4. */
	f->h.world = 2;
	f->n_sizes = 1;
	direct_run_ok(f, 1);
	sup_assert_contains(f->h.prop.reason, "world 4 -> 2: fit restarted");
	assert_true(isnan(metric(f, "alpha_ms")));
	assert_true(isnan(metric(f, "t_sync_ms")));
}

static void
test_perfmodel_does_not_measure_during_a_calibration(void **state)
{
	fixture *f = *state;

	direct_start_ok(f, direct_yaml);
	levels(f, 4, 4, 0, 4);
	f->calibrate_until = 1000;
	direct_run_ok(f, 0);
	sup_assert_contains(f->h.prop.reason, "calibration: not measured");
	sup_assert_contains(f->h.prop.reason, "compression never measured");
	assert_true(isnan(metric(f, "codec_ms")));
	f->calibrate_until = 0;
	direct_run_ok(f, 11);
	sup_assert_near(metric(f, "codec_ms"), 10, 1e-12);
	sup_assert_near(metric(f, "cr"), 10, 1e-12);
}

static void
test_perfmodel_ignores_broken_wire_values(void **state)
{
	fixture *f = *state;
	bellows_window w;

	direct_start_ok(f, direct_yaml);
	levels(f, 4, 4, 0, 4);
	w = window(f, 0, f->h.level, false);
	/* A negative time, a NaN time and a zero count are skipped: the
	 * line is the fast network's. */
	f->comm[0].ms = -1;
	f->comm[1].ms = NAN;
	f->comm[2].count = 0;
	f->h.wl[0].comm_raw_ms = INFINITY;
	f->h.wl[0].comm_raw_n = 3;
	w.step_ms_median = NAN;
	w.backward_ms_median = -5;
	assert_int_equal(f->h.ops->on_window(f->h.pstate, f->h.config, &w,
			     &f->h.prop),
	    0);
	sup_assert_near(metric(f, "alpha_ms"), 0.5, 1e-9);
	sup_assert_contains(f->h.prop.reason, "no backward time yet");
	for (uint32_t i = 0; i < f->h.prop.n_metrics; i++)
		assert_true(isfinite(f->h.prop.metrics[i].value));
}

static void
test_perfmodel_counts_per_layer_raw_timings_in_the_fit(void **state)
{
	fixture *f = *state;
	bellows_window w;

	direct_start_ok(f, direct_yaml);
	levels(f, 0, 0, 0, 0);
	f->n_sizes = 0;
	w = window(f, 0, f->h.level, false);
	/* Layers of 4e6 and 2e6 bytes: 9 and 6 ms (L 3, s 1.5e-6). */
	f->h.wl[0].comm_raw_ms = 9;
	f->h.wl[0].comm_raw_n = 8;
	f->h.wl[1].comm_raw_ms = 6;
	f->h.wl[1].comm_raw_n = 8;
	assert_int_equal(f->h.ops->on_window(f->h.pstate, f->h.config, &w,
			     &f->h.prop),
	    0);
	sup_assert_near(metric(f, "alpha_ms"), 0.5, 1e-9);
	sup_assert_near(metric(f, "bw_gbps"), 8, 1e-9);
}

static void
test_perfmodel_refuses_a_window_of_another_layer_table(void **state)
{
	fixture *f = *state;
	bellows_window w;

	direct_start_ok(f, direct_yaml);
	w = window(f, 0, f->h.level, false);
	w.n_layers = N_LAYERS - 1;
	assert_int_equal(f->h.ops->on_window(f->h.pstate, f->h.config, &w,
			     &f->h.prop),
	    BELLOWS_EMISMATCH);
}

static void
test_perfmodel_example_file_loads_and_its_torch_entry_runs(void **state)
{
	fixture *f = *state;
	const char *root = getenv("BELLOWS_SOURCE_ROOT");
	char path[512], err[CTL_CONFIG_ERR_MAX];

	assert_non_null(root);
	snprintf(path, sizeof(path), "%s/examples/policies/perfmodel.yaml",
	    root);
	if (ctl_config_load(path, &f->h.cfg, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_int_equal(f->h.cfg->n_jobs, 2);
	assert_string_equal(f->h.cfg->jobs[0].policies[0].name, "accordion");
	assert_string_equal(f->h.cfg->jobs[0].policies[1].name, "perfmodel");
	/* The second entry (bellows.torch): fixed rank 4, DDP's buckets
	 * overlapping backward, raw and compressed alike, three raw windows
	 * first. While raw the prediction is the measured step (80 ms);
	 * compressed, the measured 65 ms against a raw step the model puts
	 * at 76.6 ms. */
	assert_int_equal(com_decision_init(&f->h.state, "job", N_LAYERS), 0);
	assert_int_equal(ctl_policy_set_new(&f->h.cfg->jobs[1], "job",
			     f->h.world, layers, N_LAYERS, &f->h.state,
			     f->h.reason, sizeof(f->h.reason), &f->h.set),
	    0);
	assert_true(f->h.state.compression_off);
	f->off.step = 80; /* serial: 10 + 40 + 30 */
	run(f, 0);
	run(f, 1);
	assert_true(f->h.state.compression_off);
	sup_assert_contains(f->h.why,
	    "compression off until window 3 (raw_windows): sync 80 ms");
	run(f, 2);
	assert_false(f->h.state.compression_off);
	run(f, 3);
	assert_false(f->h.state.compression_off);
	assert_true(f->h.state.level[0] == 4);
	sup_assert_contains(f->h.why,
	    "compression stays on: compressed 65 ms vs sync 76.6 ms (-15.1%, "
	    "margin 10%, 0/2)");
}

static void
test_perfmodel_config_refuses_parameters_out_of_range(void **state)
{
	fixture *f = *state;

	sup_load_refused(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: perfmodel\n"
	    "        params: {margin: -0.1}\n",
	    "margin must be in [0, 10], not -0.1");
	sup_load_refused(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: perfmodel\n"
	    "        params: {gamma: 2.5}\n",
	    "gamma must be in [1, 2], not 2.5");
	sup_load_refused(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: perfmodel\n"
	    "        params: {fit_windows: 0}\n",
	    "fit_windows must be in [1, 256], not 0");
	sup_load_refused(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: perfmodel\n"
	    "        params: {hold_windows: 0}\n",
	    "hold_windows must be in [1, 100000], not 0");
	sup_load_refused(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: perfmodel\n"
	    "        params: {probe_windows: -1}\n",
	    "probe_windows must be in [0, 1000000], not -1");
	sup_load_refused(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: perfmodel\n"
	    "        params: {raw_windows: 1000001}\n",
	    "raw_windows must be in [0, 1000000], not 1000001");
	sup_load_refused(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: perfmodel\n"
	    "        params: {bucket_bytes: -1}\n",
	    "bucket_bytes must be in [0, 1099511627776], not -1");
	sup_load_refused(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: perfmodel\n"
	    "        params: {overlap: sometimes}\n",
	    "overlap must be true or false");
	sup_load_refused(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: perfmodel\n"
	    "        params: {alpha: 0.5}\n",
	    "policy type 'perfmodel' has no parameter 'alpha'");
	sup_load_refused(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: perfmodel\n"
	    "      - type: perfmodel\n"
	    "        name: again\n",
	    "policy 'again' and policy 'perfmodel' both own the knob "
	    "'compression'");
}

static void
test_perfmodel_config_refuses_a_compressed_overlap_not_true_or_false(
    void **state)
{
	fixture *f = *state;

	sup_load_refused(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: perfmodel\n"
	    "        params: {compressed_overlap: sometimes}\n",
	    "compressed_overlap must be true or false");
	sup_load_refused(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: perfmodel\n"
	    "        params: {compressed_overlap: 1}\n",
	    "compressed_overlap must be true or false");
}

static void
test_perfmodel_refuses_a_config_the_parser_did_not_check(void **state)
{
	fixture *f = *state;
	bellows_event ev = { .type = BELLOWS_EVENT_RELOAD, .window = 1 };

	direct_start_ok(f, direct_yaml);
	sup_load_file(f->h.path2, direct_yaml, &f->h.cfg2);
	sup_patch_double(&pol_perfmodel_ops,
	    f->h.cfg2->jobs[0].policies[0].config, "margin", NAN);
	assert_int_equal(f->h.ops->on_event(f->h.pstate,
			     f->h.cfg2->jobs[0].policies[0].config, &ev),
	    BELLOWS_EINVAL);
	f->h.config = f->h.cfg2->jobs[0].policies[0].config;
	assert_int_equal(direct_run(f, 0), BELLOWS_EINVAL);
	f->h.config = f->h.cfg->jobs[0].policies[0].config;
	assert_int_equal(direct_run(f, 0), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_registry_lists_perfmodel_owning_the_compression_gate),
		cmocka_unit_test(
		    test_buckets_and_ring_allreduce_match_the_hand_computed_values),
		cmocka_unit_test(
		    test_sync_prediction_takes_the_larger_of_compute_and_buckets),
		cmocka_unit_test(
		    test_compressed_prediction_adds_codec_and_the_smaller_collectives),
		cmocka_unit_test(
		    test_compressed_prediction_with_overlap_hides_all_but_the_last_bucket),
		cmocka_unit_test(
		    test_breakeven_bisects_to_the_hand_solved_bandwidth),
		cmocka_unit_test(
		    test_breakeven_with_compressed_overlap_searches_between_both_kinks),
		cmocka_unit_test(
		    test_cr_needed_hides_the_collectives_behind_backward),
		cmocka_unit_test(
		    test_fit_is_weighted_by_count_as_computed_by_hand),
		cmocka_unit_test(
		    test_fit_refits_a_negative_intercept_through_the_origin),
		cmocka_unit_test(
		    test_fit_refuses_one_size_no_sample_and_a_falling_line),
#define T(name) cmocka_unit_test_setup_teardown(name, setup, sup_fixture_free)
		T(test_fit_recovers_alpha_and_bw_from_noisy_timings),
		T(test_perfmodel_starts_with_compression_on_and_describes_the_job),
		T(test_perfmodel_gates_off_after_two_windows_predicted_slower),
		T(test_perfmodel_hold_needs_consecutive_windows_past_the_margin),
		T(test_perfmodel_gates_back_on_when_the_network_slows),
		T(test_perfmodel_hysteresis_keeps_the_gate_between_the_margins),
		T(test_perfmodel_probes_one_window_every_probe_windows),
		T(test_perfmodel_probes_once_when_the_levels_change_while_off),
		T(test_perfmodel_raw_windows_start_the_job_uncompressed),
		T(test_perfmodel_never_gates_off_compression_it_never_measured),
		T(test_perfmodel_keeps_the_fit_when_one_size_is_timed),
		T(test_perfmodel_keeps_the_fit_of_the_large_tensors_when_only_small_go_raw),
		T(test_perfmodel_rejects_a_falling_line_with_its_slope),
		T(test_perfmodel_runs_beside_accordion_on_other_knobs),
		T(test_perfmodel_world_one_predicts_without_collectives),
		T(test_perfmodel_predicts_an_overlapped_compressed_step_and_keeps_it_on),
		T(test_perfmodel_without_compressed_overlap_turns_the_same_job_off),
		T(test_perfmodel_predicts_the_overlapped_compressed_step_in_raw_windows),
		T(test_perfmodel_with_compressed_overlap_a_calibration_keeps_the_rest),
		T(test_perfmodel_turns_overlapped_compression_off_when_its_codec_is_slow),
		T(test_perfmodel_measures_gamma_from_overlapped_compressed_steps),
		T(test_perfmodel_measures_gamma_from_compute_bound_raw_steps),
		T(test_perfmodel_recovers_gamma_from_noisy_overlapped_steps),
		T(test_perfmodel_gamma_param_stands_in_until_measured),
		T(test_perfmodel_predicts_every_level_measured_from_its_medians),
		T(test_perfmodel_names_a_mixed_set_of_levels_by_its_slot),
		T(test_perfmodel_overlap_false_predicts_the_serial_sum),
		T(test_perfmodel_carries_the_unmodelled_communication_of_each_mode),
		T(test_perfmodel_per_layer_collectives_leave_layer_0_last),
		T(test_perfmodel_reload_keeps_the_fit_measurement_and_gate),
		T(test_perfmodel_reload_through_the_host_keeps_the_gate),
		T(test_perfmodel_restarts_the_fit_when_the_world_changes),
		T(test_perfmodel_does_not_measure_during_a_calibration),
		T(test_perfmodel_ignores_broken_wire_values),
		T(test_perfmodel_counts_per_layer_raw_timings_in_the_fit),
		T(test_perfmodel_refuses_a_window_of_another_layer_table),
		T(test_perfmodel_example_file_loads_and_its_torch_entry_runs),
		T(test_perfmodel_config_refuses_parameters_out_of_range),
		T(test_perfmodel_config_refuses_a_compressed_overlap_not_true_or_false),
		T(test_perfmodel_refuses_a_config_the_parser_did_not_check),
#undef T
	};

	return cmocka_run_group_tests_name("perfmodel", tests, NULL, NULL);
}
