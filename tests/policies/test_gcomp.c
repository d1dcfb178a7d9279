/* test_gcomp - the gcomp policy's exponent tables against tables and bit
 * counts worked out by hand.
 *
 * Windows of 10 steps carry exponent histograms of two or three
 * exponents, small enough that the Huffman code lengths, the bits per
 * exponent under a table and the entropy can be computed on paper:
 * A = {127: 3, 126: 1} codes 127 in 1 bit, 126 and the escape in 2
 * (1.250 bits/exponent, entropy 0.811); under A's table B = {127: 1,
 * 126: 3} costs 1.750, 0.939 above its entropy. The policy runs through
 * the controller's policy host with YAML files, as bellowsd runs it.
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

#include <cmocka.h>

#include <bellows/error.h>

#include "policyhost/config.h"
#include "common/huffman.h"
#include "policies/policies.h"
#include "policyhost/policy_host.h"
#include "policies/registry.h"
#include "support.h"

#define N_LAYERS SUP_CONV_LAYERS

/* The default selector (min_ndim 2) picks layers 0, 2 and 3. */
static const com_layer_info *const layers = sup_conv_layers;

typedef struct fixture {
	sup_host h;                   /* files, host, next window's layers */
	uint64_t hist[N_LAYERS][256]; /* the next window's histograms */
	uint8_t table[BELLOWS_CODEC_TABLE_MAX]; /* direct driving's buffer */
} fixture;

static int
setup(void **state)
{
	fixture *f = sup_fixture_new(sizeof(*f), "gcomp", layers, N_LAYERS);

	*state = f;
	return f != NULL ? 0 : -1;
}

/* Layer l's next histogram: counts of exponents 127, 126 and 130; a
 * layer without any carries none. */
static void
hist(fixture *f, uint32_t l, uint64_t e127, uint64_t e126, uint64_t e130)
{
	memset(f->hist[l], 0, sizeof(f->hist[l]));
	f->hist[l][127] = e127;
	f->hist[l][126] = e126;
	f->hist[l][130] = e130;
}

static void
run(fixture *f, uint64_t index)
{
	bellows_window w = sup_window(&f->h, index);

	for (uint32_t l = 0; l < N_LAYERS; l++) {
		bool any = false;

		for (int b = 0; b < 256; b++)
			any = any || f->hist[l][b] > 0;
		f->h.wl[l].exp_hist = any ? f->hist[l] : NULL;
		f->h.wl[l].exp_hist_len = any ? 256 : 0;
	}
	w.first_step = index * 10;
	w.last_step = index * 10 + 9;
	w.lr_scale = 1;
	sup_run(&f->h, &w);
}

/* The table in force, read back as every rank's codec reads it. */
static com_huff_table
in_force(fixture *f)
{
	com_huff_table t;
	char err[128];

	assert_int_equal(f->h.state.codec_table_len, COM_HUFF_TABLE_BYTES);
	assert_int_equal(com_huff_read(f->h.state.codec_table,
			     f->h.state.codec_table_len, &t, NULL, err,
			     sizeof(err)),
	    0);
	return t;
}

static void
start(fixture *f, const char *params)
{
	char yaml[512];

	snprintf(yaml, sizeof(yaml),
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: gcomp\n"
	    "        params: %s\n",
	    params);
	sup_load(&f->h, yaml);
	assert_int_equal(sup_start(&f->h), 0);
}

/* ---- tests ---------------------------------------------------------- */

static void
test_registry_lists_gcomp_owning_the_codec_table(void **state)
{
	(void)state;
	sup_assert_registered("gcomp", &pol_gcomp_ops,
	    BELLOWS_KNOB_CODEC_TABLE);
}

static void
test_gcomp_builds_version_1_from_the_first_histogram(void **state)
{
	fixture *f = *state;
	com_huff_table t;

	start(f, "{}");
	assert_int_equal(f->h.state.codec_table_len, 0);
	/* No histogram yet: no table, no reason. */
	run(f, 0);
	sup_assert_quiet(&f->h, 0);
	assert_int_equal(f->h.state.codec_table_len, 0);

	hist(f, 0, 3, 1, 0);
	run(f, 1);
	assert_string_equal(f->h.policies, "gcomp");
	assert_string_equal(f->h.why,
	    "exponent table v1 from the first histogram: 1.250 "
	    "bits/exponent, entropy 0.811; 2 exponents coded in at most 8 "
	    "bits, escape 2 + 8 bits; 4 values of 1 layer");
	t = in_force(f);
	assert_int_equal(t.version, 1);
	assert_int_equal(t.max_bits, 8);
	assert_int_equal(t.len[127], 1);
	assert_int_equal(t.len[126], 2);
	assert_int_equal(t.esc_len, 2);
	assert_int_equal(t.len[0], 0); /* unseen: escaped */
}

static void
test_gcomp_rebuilds_when_cross_entropy_exceeds_entropy_by_rebuild_bits(
    void **state)
{
	fixture *f = *state;
	com_huff_table t;

	start(f, "{every_steps: 1000000}");
	hist(f, 0, 3, 1, 0);
	run(f, 0);
	assert_int_equal(in_force(f).version, 1);
	/* 6 : 2 is A again: its own table codes it 1.250 - 0.811 = 0.439
	 * bits above the entropy, more than 0.1, but the rebuilt code is
	 * the one in force: nothing is sent. */
	hist(f, 0, 6, 2, 0);
	run(f, 1);
	sup_assert_quiet(&f->h, 1);
	/* B under A's table: (1 x 1 + 3 x 2) / 4 = 1.75 bits, 0.939 above
	 * its entropy 0.811 > 0.1. */
	hist(f, 0, 1, 3, 0);
	run(f, 2);
	assert_string_equal(f->h.why,
	    "exponent table v2: v1 codes 0.939 bits/exponent above "
	    "the entropy (rebuild_bits 0.1): 1.750 -> 1.250 bits/exponent, "
	    "entropy 0.811; 2 exponents coded in at most 8 bits, escape 2 + "
	    "8 bits; 4 values of 1 layer");
	t = in_force(f);
	assert_int_equal(t.version, 2);
	assert_int_equal(t.len[126], 1);
	assert_int_equal(t.len[127], 2);
}

/* Metrics, the ops driven directly: the table in force on each selected
 * layer's histogram and on their sum; level 0 adds 26 bits (level, sign,
 * mantissa) to each non-zero value, zeros cost their code only. */
static void
test_gcomp_reports_bits_per_value_in_force_per_layer(void **state)
{
	fixture *f = *state;
	bellows_window w;

	sup_load(&f->h,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: gcomp\n");
	assert_int_equal(sup_direct_start(&f->h, f->h.cfg), 0);
	f->h.prop.codec_table = f->table;
	w = sup_window(&f->h, 0);
	for (uint32_t l = 0; l < N_LAYERS; l++)
		f->h.wl[l].selected = f->h.sel[l];
	hist(f, 0, 3, 1, 0);
	f->hist[0][0] = 4; /* four zeros */
	f->h.wl[0].exp_hist = f->hist[0];
	f->h.wl[0].exp_hist_len = 256;
	hist(f, 3, 1, 3, 0);
	f->h.wl[3].exp_hist = f->hist[3];
	f->h.wl[3].exp_hist_len = 256;
	w.last_step = 9;
	assert_int_equal(sup_direct_run(&f->h, &w), 0);
	assert_int_equal(f->h.prop.codec_table_len, COM_HUFF_TABLE_BYTES);
	/* The sum {0: 4, 126: 4, 127: 4} gets codes of 2 bits each
	 * (and a 2-bit escape): every layer costs 2 bits per exponent. */
	sup_assert_near(sup_metric(&f->h.prop, "exp_bits", 0), 2, 1e-12);
	sup_assert_near(sup_metric(&f->h.prop, "bits_per_value", 0),
	    2 + 26.0 * 4 / 8, 1e-12);
	sup_assert_near(sup_metric(&f->h.prop, "bits_per_value", 3), 2 + 26,
	    1e-12);
	sup_assert_near(sup_metric(&f->h.prop, "exp_bits", -1), 2, 1e-12);
	sup_assert_near(sup_metric(&f->h.prop, "entropy_bits", -1), log2(3),
	    1e-12);
	sup_assert_near(sup_metric(&f->h.prop, "table_version", -1), 1, 0);
	assert_null(sup_metric_find(&f->h.prop, "no_such"));
}

static void
test_gcomp_rebuilds_every_every_steps_and_sends_only_a_new_code(void **state)
{
	fixture *f = *state;

	/* rebuild_bits 64: only the cadence rebuilds. */
	start(f, "{every_steps: 30, rebuild_bits: 64}");
	hist(f, 0, 3, 1, 0);
	run(f, 0); /* v1, built from steps 0..9: counts from step 10 */
	hist(f, 0, 1, 3, 0);
	run(f, 1); /* 10 steps */
	sup_assert_quiet(&f->h, 1);
	run(f, 2); /* 20 steps */
	sup_assert_quiet(&f->h, 2);
	run(f, 3); /* 30 steps */
	assert_string_equal(f->h.why,
	    "exponent table v2: 30 steps since v1 (every_steps "
	    "30): 1.750 -> 1.250 bits/exponent, entropy 0.811; 2 exponents "
	    "coded in at most 8 bits, escape 2 + 8 bits; 4 values of 1 "
	    "layer");
	assert_int_equal(in_force(f).version, 2);
	/* Another 30 steps of the same histogram: the same code, nothing
	 * sent, v2 stays. */
	for (uint64_t w = 4; w <= 6; w++) {
		run(f, w);
		sup_assert_quiet(&f->h, w);
	}
	assert_int_equal(in_force(f).version, 2);
	/* The cadence restarted at window 6: a change at window 7 waits. */
	hist(f, 0, 3, 1, 0);
	run(f, 7);
	sup_assert_quiet(&f->h, 7);
	run(f, 8);
	sup_assert_quiet(&f->h, 8);
	run(f, 9);
	assert_int_equal(in_force(f).version, 3);
}

static void
test_gcomp_sums_the_selected_layers_only(void **state)
{
	fixture *f = *state;
	com_huff_table t;

	start(f, "{max_code_bits: 4}");
	/* conv1 (selected) and the bias (not): the bias's 130s count for
	 * nothing. conv2 and fc add up with conv1. */
	hist(f, 0, 2, 0, 0);
	hist(f, 1, 0, 0, 1000);
	hist(f, 2, 1, 1, 0);
	hist(f, 3, 0, 0, 0);
	run(f, 0);
	sup_assert_contains(f->h.why, "4 values of 2 layers");
	sup_assert_contains(f->h.why, "at most 4 bits");
	t = in_force(f);
	assert_int_equal(t.max_bits, 4);
	assert_int_equal(t.len[130], 0);
	assert_true(t.len[127] > 0 && t.len[126] > 0);
}

static void
test_gcomp_waits_for_min_values(void **state)
{
	fixture *f = *state;

	start(f, "{min_values: 100}");
	hist(f, 0, 30, 10, 0);
	run(f, 0);
	sup_assert_quiet(&f->h, 0);
	assert_int_equal(f->h.state.codec_table_len, 0);
	hist(f, 0, 75, 25, 0);
	run(f, 1);
	sup_assert_contains(f->h.why, "v1 from the first histogram");
}

static void
test_gcomp_refuses_bad_parameters(void **state)
{
	fixture *f = *state;
	static const char *const bad[][2] = {
		{ "{every_steps: 0}", "every_steps" },
		{ "{rebuild_bits: -0.5}", "rebuild_bits" },
		{ "{max_code_bits: 16}", "max_code_bits" },
		{ "{max_code_bits: 0}", "max_code_bits" },
		{ "{min_values: 0}", "min_values" },
		{ "{rebuild_bitz: 1}", "rebuild_bitz" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char yaml[256];

		snprintf(yaml, sizeof(yaml),
		    "jobs:\n"
		    "  - policies:\n"
		    "      - type: gcomp\n"
		    "        params: %s\n",
		    bad[i][0]);
		sup_load_refused(&f->h, yaml, bad[i][1]);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, sup_fixture_free)
		T(test_registry_lists_gcomp_owning_the_codec_table),
		T(test_gcomp_builds_version_1_from_the_first_histogram),
		T(test_gcomp_rebuilds_when_cross_entropy_exceeds_entropy_by_rebuild_bits),
		T(test_gcomp_rebuilds_every_every_steps_and_sends_only_a_new_code),
		T(test_gcomp_reports_bits_per_value_in_force_per_layer),
		T(test_gcomp_sums_the_selected_layers_only),
		T(test_gcomp_waits_for_min_values),
		T(test_gcomp_refuses_bad_parameters),
#undef T
	};

	return cmocka_run_group_tests_name("gcomp", tests, NULL, NULL);
}
