/* test_timing - the agent's timed sends of a window, reduced to medians.
 *
 * Medians of odd and even counts, the bound on what a layer keeps (a
 * reservoir whose memory stays put from the first send on), collectives
 * keyed by (bytes, compressed), sorted in the report and dropped beyond
 * 256 keys, and a fresh start at every window.
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
test_layer_sends_report_medians_and_counts_per_kind(void **state)
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

	assert_true(s[0].comm_raw_ms == 2.0);
	assert_int_equal(s[0].comm_raw_n, 3);
	assert_true(s[0].comm_comp_ms == 0.0);
	assert_int_equal(s[0].comm_comp_n, 0);
	assert_true(s[0].codec_ms == 0.0); /* a raw send's codec is ignored */
	assert_int_equal(s[1].comm_raw_n, 0);
	assert_int_equal(s[1].comm_comp_n, 0);
	assert_true(s[1].comm_raw_ms == 0.0 && s[1].codec_ms == 0.0);
	assert_true(s[2].comm_comp_ms == 3.0);
	assert_int_equal(s[2].comm_comp_n, 4);
	assert_true(s[2].codec_ms == 0.75);
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
	 * sample of them has its median near the middle. */
	for (int w = 0; w < 3; w++) {
		for (int i = 0; i < 10000; i++)
			assert_int_equal(agent_timing_send(&t, 1, false,
					     (double)i, 0.0),
			    0);
		finish(&t, s, &comm, &n_comm, &dropped);
		assert_int_equal(s[1].comm_raw_n, 10000);
		print_message(
		    "median of a 32-send reservoir of 0..9999: %.0f\n",
		    s[1].comm_raw_ms);
		assert_true(
		    s[1].comm_raw_ms >= 2000 && s[1].comm_raw_ms <= 8000);
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
		    test_layer_sends_report_medians_and_counts_per_kind),
		cmocka_unit_test(
		    test_a_layer_keeps_a_bounded_reservoir_allocated_once),
		cmocka_unit_test(
		    test_collectives_are_keyed_by_bytes_and_kind_and_sorted),
		cmocka_unit_test(
		    test_collectives_beyond_256_keys_are_counted_as_dropped),
	};

	return cmocka_run_group_tests_name("timing", tests, NULL, NULL);
}
