/* test_rate - the dashboard's rates over a sliding window: a steady rate
 * read once a second reads steady, a restart starts over, many readings
 * stay bounded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "dashboards/rate.h"

#include <math.h>

/* Decisions of a steady 2.5/s: one every 400 ms, in bursts of one. */
static uint64_t
steady_count(uint64_t t_ms)
{
	return t_ms / 400;
}

static void
test_rate_of_a_steady_rate_read_every_second_reads_steady(void **state)
{
	dash_rate r;
	uint64_t t = 0, prev_t = 0, prev_c = 0;
	double lo = INFINITY, hi = -INFINITY, lo1 = INFINITY, hi1 = -INFINITY;

	dash_rate_init(&r, DASH_RATE_SPAN_MS);
	assert_true(isnan(dash_rate_get(&r)));
	for (int i = 0; i < 120; i++) {
		/* About once a second, a little late now and then. */
		t += 1000 + (uint64_t)(i % 3) * 37;
		dash_rate_add(&r, t, steady_count(t));
		if (i >= 10) {
			double v = dash_rate_get(&r);
			double one = (double)(steady_count(t) - prev_c) *
			    1000.0 / (double)(t - prev_t);

			lo = fmin(lo, v);
			hi = fmax(hi, v);
			lo1 = fmin(lo1, one);
			hi1 = fmax(hi1, one);
		}
		prev_t = t;
		prev_c = steady_count(t);
	}
	/* Within one decision over the 10 s window. */
	assert_true(lo >= 2.4);
	assert_true(hi <= 2.6);
	/* Two readings one second apart jump by a whole burst. */
	assert_true(hi1 - lo1 >= 0.9);
}

static void
test_rate_needs_two_readings_and_starts_over_on_a_restart(void **state)
{
	dash_rate r;

	dash_rate_init(&r, 10000);
	dash_rate_add(&r, 1000, 100);
	assert_true(isnan(dash_rate_get(&r)));
	dash_rate_add(&r, 3000, 110);
	assert_true(fabs(dash_rate_get(&r) - 5.0) < 1e-9);
	/* A reading at the same time replaces the last one. */
	dash_rate_add(&r, 3000, 120);
	assert_true(fabs(dash_rate_get(&r) - 10.0) < 1e-9);
	/* A counter going down (a new daemon): only the new reading. */
	dash_rate_add(&r, 4000, 3);
	assert_true(isnan(dash_rate_get(&r)));
	dash_rate_add(&r, 5000, 5);
	assert_true(fabs(dash_rate_get(&r) - 2.0) < 1e-9);
	/* A clock going back: the same. */
	dash_rate_add(&r, 100, 7);
	assert_true(isnan(dash_rate_get(&r)));
}

static void
test_rate_keeps_the_last_span_only(void **state)
{
	dash_rate r;

	dash_rate_init(&r, 10000);
	/* 10/s for 60 s, then 20/s for 10 s: the window sees 20/s only. */
	for (uint64_t t = 0; t <= 60000; t += 100)
		dash_rate_add(&r, t, t / 100);
	assert_true(fabs(dash_rate_get(&r) - 10.0) < 1e-9);
	assert_true(r.n <= DASH_RATE_SAMPLES);
	for (uint64_t t = 60050; t <= 70000; t += 50)
		dash_rate_add(&r, t, 600 + (t - 60000) / 50);
	assert_true(r.n <= DASH_RATE_SAMPLES);
	assert_true(fabs(dash_rate_get(&r) - 20.0) < 0.5);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(
		    test_rate_of_a_steady_rate_read_every_second_reads_steady),
		cmocka_unit_test(
		    test_rate_needs_two_readings_and_starts_over_on_a_restart),
		cmocka_unit_test(test_rate_keeps_the_last_span_only),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
