/* test_timing - the agent's timed sends of a window, reduced to one time
 * per kind of send.
 *
 * Medians of odd and even counts, quantiles as order statistics, a
 * layer's sends reported as their lower quartile (which stays in the fast
 * mode of bimodal sends where the median flips), the bound on what a layer
 * keeps (a reservoir whose memory stays put from the first send on),
 * collectives keyed by (bytes, compressed), sorted in the report and dropped
 * beyond 256 keys, and a fresh start at every window.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <bellows/error.h>

#include "agent/timing.h"

#define N_LAYERS 3

static void
finish(agent_timing *t, com_layer_stats *s, com_comm_sample **comm,
    uint32_t *n_comm, uint64_t *dropped)
{
	memset(s, 0x5a, N_LAYERS * sizeof(*s)); /* every field is written */
	agent_timing_finish(t, s, comm, n_comm, dropped);
}

static void
test_median_is_the_middle_value_or_the_mean_of_the_two(void **state)
{
	double odd[5] = { 9.0, 1.0, 5.0, 3.0, 7.0 };
	double even[6] = { 4.0, 2.0, 10.0, 8.0, 6.0, 1e300 };
	double one = 42.0;
	double two[2] = { 1e308, 1.7e308 };

	(void)state;
	assert_true(agent_timing_median(odd, 5) == 5.0);
	assert_true(agent_timing_median(even, 6) == 7.0);
	assert_true(agent_timing_median(&one, 1) == 42.0);
	/* The two middle values of huge times do not overflow. */
	assert_true(isfinite(agent_timing_median(two, 2)));
	assert_true(fabs(agent_timing_median(two, 2) - 1.35e308) < 1e293);
}

static void
test_quantile_is_an_order_statistic_never_interpolated(void **state)
{
	double v[5] = { 9.0, 1.0, 5.0, 3.0, 7.0 };
	double ten[10] = { 10, 9, 8, 7, 6, 5, 4, 3, 2, 1 };
	double one = 42.0;

	(void)state;
	assert_true(agent_timing_quantile(v, 5, 0.0) == 1.0);
	assert_true(agent_timing_quantile(v, 5, 0.25) == 3.0);
	assert_true(agent_timing_quantile(v, 5, 0.5) == 5.0);
	assert_true(agent_timing_quantile(v, 5, 0.7) == 5.0); /* floor */
	assert_true(agent_timing_quantile(v, 5, 1.0) == 9.0);
	/* Out of range or NAN: the nearest end, the least for NAN. */
	assert_true(agent_timing_quantile(v, 5, -1.0) == 1.0);
	assert_true(agent_timing_quantile(v, 5, 2.0) == 9.0);
	assert_true(agent_timing_quantile(v, 5, NAN) == 1.0);
	assert_true(agent_timing_quantile(&one, 1, 0.25) == 42.0);
	/* Ten values: index floor(0.25 * 9) = 2, the third least. */
	assert_true(agent_timing_quantile(ten, 10, 0.25) == 3.0);
	assert_true(agent_timing_quantile(ten, 10, 0.10) == 1.0);
}

/* A window of 10 sends of which `slow` wait for a descheduled peer
 * (3-4 ms), the others run at once (0.2-0.3 ms), in a mixed order. */
static void
bimodal_window(agent_timing *t, uint32_t layer, int slow, int w)
{
	for (int i = 0; i < 10; i++) {
		int k = (i * 7 + w) % 10; /* which send is slow moves */
		double ms = k < slow ? 3.0 + 0.1 * k : 0.2 + 0.01 * (k + w % 3);

		assert_int_equal(agent_timing_send(t, layer, false, ms, 0.0),
		    0);
		assert_int_equal(agent_timing_send(t, layer, true, ms / 2,
				     k < slow ? 2.0 : 0.05),
		    0);
	}
}

static void
test_bimodal_sends_report_the_fast_mode_where_the_median_flips(void **state)
{
	/* The share of slow sends per window, as measured on two shared
	 * CPUs (bench/slimgc/sends.py): mostly a third, sometimes most. */
	static const int slow[12] = { 3, 2, 4, 6, 3, 7, 1, 5, 3, 0, 6, 4 };
	agent_timing t;
	com_layer_stats s[N_LAYERS];
	com_comm_sample *comm;
	uint32_t n_comm;
	uint64_t dropped;
	double lo = INFINITY, hi = 0, med_lo = INFINITY, med_hi = 0;

	(void)state;
	assert_int_equal(agent_timing_init(&t, N_LAYERS), 0);
	for (int w = 0; w < 12; w++) {
		double v[10];

		bimodal_window(&t, 0, slow[w], w);
		for (int i = 0; i < 10; i++)
			v[i] = t.layers[0].raw.ms[i];
		finish(&t, s, &comm, &n_comm, &dropped);
		assert_int_equal(s[0].comm_raw_n, 10);
		assert_int_equal(s[0].comm_comp_n, 10);
		/* Up to 7 slow sends of 10: still a fast one. */
		assert_true(s[0].comm_raw_ms < 0.5);
		assert_true(s[0].comm_comp_ms < 0.25);
		assert_true(s[0].codec_ms == 0.05);
		lo = fmin(lo, s[0].comm_raw_ms);
		hi = fmax(hi, s[0].comm_raw_ms);
		med_lo = fmin(med_lo, agent_timing_median(v, 10));
		med_hi = fmax(med_hi, agent_timing_median(v, 10));
	}
	/* Within 50 % over the windows, where the same windows' medians
	 * move more than tenfold. */
	print_message("lower quartile %.3f-%.3f ms, median %.3f-%.3f ms\n", lo,
	    hi, med_lo, med_hi);
	assert_true(hi < 1.5 * lo);
	assert_true(med_hi > 10 * med_lo);
	agent_timing_fini(&t);
}

static void
test_layer_sends_report_lower_quartiles_and_counts_per_kind(void **state)
{
	agent_timing t;
	com_layer_stats s[N_LAYERS];
	com_comm_sample *comm = (com_comm_sample *)&t;
	uint32_t n_comm = 99;
	uint64_t dropped = 99;

	(void)state;
	assert_int_equal(agent_timing_init(&t, N_LAYERS), 0);
	/* Layer 0: three raw sends (odd), layer 2: four compressed (even). */
	assert_int_equal(agent_timing_send(&t, 0, false, 3.0, 0.0), 0);
	assert_int_equal(agent_timing_send(&t, 0, false, 1.0, 9.0), 0);
	assert_int_equal(agent_timing_send(&t, 0, false, 2.0, 0.0), 0);
	assert_int_equal(agent_timing_send(&t, 2, true, 4.0, 0.5), 0);
	assert_int_equal(agent_timing_send(&t, 2, true, 1.0, 0.25), 0);
	assert_int_equal(agent_timing_send(&t, 2, true, 2.0, 1.5), 0);
	assert_int_equal(agent_timing_send(&t, 2, true, 8.0, 1.0), 0);
	assert_int_equal(agent_timing_send(&t, 2, false, 6.0, 0.0), 0);
	finish(&t, s, &comm, &n_comm, &dropped);

	/* Index floor(0.25 * (n - 1)): the least of 3 and of 4 values. */
	assert_true(s[0].comm_raw_ms == 1.0);
	assert_int_equal(s[0].comm_raw_n, 3);
	assert_true(s[0].comm_comp_ms == 0.0);
	assert_int_equal(s[0].comm_comp_n, 0);
	assert_true(s[0].codec_ms == 0.0); /* a raw send's codec is ignored */
	assert_int_equal(s[1].comm_raw_n, 0);
	assert_int_equal(s[1].comm_comp_n, 0);
	assert_true(s[1].comm_raw_ms == 0.0 && s[1].codec_ms == 0.0);
	assert_true(s[2].comm_comp_ms == 1.0);
	assert_int_equal(s[2].comm_comp_n, 4);
	assert_true(s[2].codec_ms == 0.25);
	assert_true(s[2].comm_raw_ms == 6.0);
	assert_int_equal(s[2].comm_raw_n, 1);
	/* Only the comm fields are written. */
	assert_int_equal(s[0].count, 0x5a5a5a5a5a5a5a5aull);
	assert_null(comm);
	assert_int_equal(n_comm, 0);
	assert_int_equal(dropped, 0);

	/* The next window starts empty. */
	assert_int_equal(agent_timing_send(&t, 0, true, 5.0, 1.0), 0);
	finish(&t, s, &comm, &n_comm, &dropped);
	assert_int_equal(s[0].comm_raw_n, 0);
	assert_true(s[0].comm_raw_ms == 0.0);
	assert_int_equal(s[0].comm_comp_n, 1);
	assert_true(s[0].comm_comp_ms == 5.0 && s[0].codec_ms == 1.0);
	assert_int_equal(s[2].comm_comp_n, 0);
	agent_timing_fini(&t);
	agent_timing_fini(&t);
}

static void
test_a_layer_keeps_a_bounded_reservoir_allocated_once(void **state)
{
	agent_timing t;
	com_layer_stats s[N_LAYERS];
	com_comm_sample *comm;
	uint32_t n_comm;
	uint64_t dropped;
	double *mem;

	(void)state;
	assert_int_equal(agent_timing_init(&t, N_LAYERS), 0);
	assert_null(t.layers[1].raw.ms);
	assert_int_equal(agent_timing_send(&t, 1, false, 0.0, 0.0), 0);
	mem = t.layers[1].raw.ms;
	assert_non_null(mem);
	assert_null(t.layers[0].raw.ms); /* other layers stay unallocated */
	finish(&t, s, &comm, &n_comm, &dropped);
	assert_int_equal(s[1].comm_raw_n, 1);
	/* 10000 sends of 0..9999 ms: all counted, 32 kept, and a uniform
	 * sample of them has its lower quartile near 2500. */
	for (int w = 0; w < 3; w++) {
		for (int i = 0; i < 10000; i++)
			assert_int_equal(agent_timing_send(&t, 1, false,
					     (double)i, 0.0),
			    0);
		finish(&t, s, &comm, &n_comm, &dropped);
		assert_int_equal(s[1].comm_raw_n, 10000);
		print_message(
		    "lower quartile of a 32-send reservoir of 0..9999: "
		    "%.0f\n",
		    s[1].comm_raw_ms);
		assert_true(
		    s[1].comm_raw_ms >= 500 && s[1].comm_raw_ms <= 5000);
		assert_ptr_equal(t.layers[1].raw.ms, mem);
	}
	agent_timing_fini(&t);
}

static void
test_collectives_are_keyed_by_bytes_and_kind_and_sorted(void **state)
{
	agent_timing t;
	com_layer_stats s[N_LAYERS];
	com_comm_sample *comm;
	uint32_t n_comm;
	uint64_t dropped;

	(void)state;
	assert_int_equal(agent_timing_init(&t, N_LAYERS), 0);
	assert_int_equal(agent_timing_collective(&t, 4096, true, 2.0), 0);
	assert_int_equal(agent_timing_collective(&t, 1 << 20, false, 9.0), 0);
	assert_int_equal(agent_timing_collective(&t, 4096, false, 3.0), 0);
	assert_int_equal(agent_timing_collective(&t, 1 << 20, false, 7.0), 0);
	assert_int_equal(agent_timing_collective(&t, 4096, true, 4.0), 0);
	assert_int_equal(agent_timing_collective(&t, 1 << 20, false, 8.0), 0);
	assert_int_equal(agent_timing_collective(&t, 0, false, 0.5), 0);
	finish(&t, s, &comm, &n_comm, &dropped);

	assert_int_equal(n_comm, 4);
	assert_non_null(comm);
	assert_int_equal(comm[0].bytes, 0);
	assert_int_equal(comm[0].count, 1);
	assert_int_equal(comm[1].bytes, 4096);
	assert_false(comm[1].compressed);
	assert_true(comm[1].ms == 3.0);
	assert_int_equal(comm[2].bytes, 4096);
	assert_true(comm[2].compressed);
	assert_true(comm[2].ms == 3.0); /* median of 2 and 4 */
	assert_int_equal(comm[2].count, 2);
	assert_int_equal(comm[3].bytes, 1 << 20);
	assert_true(comm[3].ms == 8.0);
	assert_int_equal(comm[3].count, 3);
	assert_int_equal(dropped, 0);
	assert_int_equal(s[0].comm_raw_n, 0);

	/* A new window forgets the keys. */
	assert_int_equal(agent_timing_collective(&t, 77, false, 1.0), 0);
	finish(&t, s, &comm, &n_comm, &dropped);
	assert_int_equal(n_comm, 1);
	assert_int_equal(comm[0].bytes, 77);
	finish(&t, s, &comm, &n_comm, &dropped);
	assert_int_equal(n_comm, 0);
	assert_null(comm);
	agent_timing_fini(&t);
}

static void
test_collectives_beyond_256_keys_are_counted_as_dropped(void **state)
{
	agent_timing t;
	com_layer_stats s[N_LAYERS];
	com_comm_sample *comm;
	uint32_t n_comm;
	uint64_t dropped;

	(void)state;
	assert_int_equal(agent_timing_init(&t, N_LAYERS), 0);
	for (uint64_t b = 300; b > 0; b--)
		assert_int_equal(agent_timing_collective(&t, b, false, 1.0), 0);
	/* A key already held still counts after the table is full. */
	assert_int_equal(agent_timing_collective(&t, 300, false, 3.0), 0);
	assert_int_equal(agent_timing_collective(&t, 1, false, 1.0), 0);
	finish(&t, s, &comm, &n_comm, &dropped);
	assert_int_equal(n_comm, AGENT_TIMING_MAX_BUCKETS);
	assert_int_equal(dropped, 300 - 256 + 1);
	/* The first 256 keys seen, 300 down to 45, sorted by bytes. */
	assert_int_equal(comm[0].bytes, 45);
	assert_int_equal(comm[255].bytes, 300);
	assert_int_equal(comm[255].count, 2);
	assert_true(comm[255].ms == 2.0);
	for (uint32_t i = 1; i < n_comm; i++)
		assert_true(comm[i - 1].bytes < comm[i].bytes);

	finish(&t, s, &comm, &n_comm, &dropped);
	assert_int_equal(dropped, 0);
	agent_timing_fini(&t);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_median_is_the_middle_value_or_the_mean_of_the_two),
		cmocka_unit_test(
		    test_quantile_is_an_order_statistic_never_interpolated),
		cmocka_unit_test(
		    test_bimodal_sends_report_the_fast_mode_where_the_median_flips),
		cmocka_unit_test(
		    test_layer_sends_report_lower_quartiles_and_counts_per_kind),
		cmocka_unit_test(
		    test_a_layer_keeps_a_bounded_reservoir_allocated_once),
		cmocka_unit_test(
		    test_collectives_are_keyed_by_bytes_and_kind_and_sorted),
		cmocka_unit_test(
		    test_collectives_beyond_256_keys_are_counted_as_dropped),
	};

	return cmocka_run_group_tests_name("timing", tests, NULL, NULL);
}
