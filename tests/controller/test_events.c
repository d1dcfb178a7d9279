/* test_events - the ring of recent events STATUS shows: oldest first,
 * bounded to the newest CTL_EVENTS_MAX, filtered by job, stamped with the
 * wall clock, long texts cut rather than refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <bellows/error.h>

#include "common/clock.h"
#include "controller/events.h"

typedef struct fixture {
	ctl_events *ev; /* under test */
	com_event *out; /* last copy */
	uint32_t n;     /* entries in out */
} fixture;

static void
copy_free(fixture *f)
{
	for (uint32_t i = 0; f->out != NULL && i < f->n; i++) {
		free(f->out[i].kind);
		free(f->out[i].job);
		free(f->out[i].text);
	}
	free(f->out);
	f->out = NULL;
	f->n = 0;
}

static void
copy(fixture *f, const char *job, uint32_t max)
{
	copy_free(f);
	assert_int_equal(ctl_events_copy(f->ev, job, max, &f->out, &f->n), 0);
}

static int
setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));

	if (f == NULL || ctl_events_new(&f->ev) != 0)
		return -1;
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	fixture *f = *state;

	copy_free(f);
	ctl_events_destroy(&f->ev);
	free(f);
	return 0;
}

static void
test_events_start_empty(void **state)
{
	fixture *f = *state;

	copy(f, NULL, CTL_EVENTS_MAX);
	assert_int_equal(f->n, 0);
	assert_int_equal(ctl_events_total(f->ev), 0);
}

static void
test_events_come_out_oldest_first_with_their_fields(void **state)
{
	fixture *f = *state;
	uint64_t before = com_clock_wall_ms();

	ctl_events_add(f->ev, CTL_EVENT_RANK_JOINED, "job-a", "rank %u", 0);
	ctl_events_add(f->ev, CTL_EVENT_RELOAD_OK, NULL, "reloaded");
	copy(f, NULL, CTL_EVENTS_MAX);
	assert_int_equal(f->n, 2);
	assert_string_equal(f->out[0].kind, "rank_joined");
	assert_string_equal(f->out[0].job, "job-a");
	assert_string_equal(f->out[0].text, "rank 0");
	assert_string_equal(f->out[1].kind, "reload_ok");
	assert_string_equal(f->out[1].job, "");
	assert_string_equal(f->out[1].text, "reloaded");
	assert_true(f->out[0].wall_ms >= before);
	assert_true(f->out[1].wall_ms >= f->out[0].wall_ms);
	assert_true(f->out[1].wall_ms <= com_clock_wall_ms());
}

static void
test_events_keep_only_the_newest(void **state)
{
	fixture *f = *state;

	for (uint32_t i = 0; i < CTL_EVENTS_MAX + 50; i++)
		ctl_events_add(f->ev, CTL_EVENT_RANK_LOST, "j", "%u", i);
	assert_int_equal(ctl_events_total(f->ev), CTL_EVENTS_MAX + 50);
	copy(f, NULL, 1000);
	assert_int_equal(f->n, CTL_EVENTS_MAX);
	assert_string_equal(f->out[0].text, "50");
	assert_string_equal(f->out[CTL_EVENTS_MAX - 1].text, "177");
	/* At most `max`: the newest ones. */
	copy(f, NULL, 3);
	assert_int_equal(f->n, 3);
	assert_string_equal(f->out[0].text, "175");
	assert_string_equal(f->out[2].text, "177");
}

static void
test_events_of_a_job_include_the_daemons_own(void **state)
{
	fixture *f = *state;

	ctl_events_add(f->ev, CTL_EVENT_RANK_LOST, "a", "1");
	ctl_events_add(f->ev, CTL_EVENT_RANK_LOST, "b", "2");
	ctl_events_add(f->ev, CTL_EVENT_RELOAD_REFUSED, NULL, "3");
	ctl_events_add(f->ev, CTL_EVENT_RANK_LOST, "a", "4");
	ctl_events_add(f->ev, CTL_EVENT_RANK_LOST, "b", "5");
	copy(f, "a", CTL_EVENTS_MAX);
	assert_int_equal(f->n, 3);
	assert_string_equal(f->out[0].text, "1");
	assert_string_equal(f->out[1].text, "3");
	assert_string_equal(f->out[2].text, "4");
	copy(f, "a", 2);
	assert_int_equal(f->n, 2);
	assert_string_equal(f->out[0].text, "3");
	copy(f, "", CTL_EVENTS_MAX);
	assert_int_equal(f->n, 5);
}

static void
test_events_cut_long_texts(void **state)
{
	fixture *f = *state;
	char big[2 * CTL_EVENT_TEXT_MAX];

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ctl_events_add(f->ev, CTL_EVENT_RELOAD_REFUSED, big, "%s", big);
	copy(f, NULL, 1);
	assert_int_equal(f->n, 1);
	assert_int_equal(strlen(f->out[0].text), CTL_EVENT_TEXT_MAX - 1);
	assert_int_equal(strlen(f->out[0].job), CTL_EVENT_JOB_MAX - 1);
}

static void
test_events_destroy_is_null_safe(void **state)
{
	ctl_events *ev = NULL;

	ctl_events_destroy(NULL);
	ctl_events_destroy(&ev);
	assert_null(ev);
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_events_start_empty),
		T(test_events_come_out_oldest_first_with_their_fields),
		T(test_events_keep_only_the_newest),
		T(test_events_of_a_job_include_the_daemons_own),
		T(test_events_cut_long_texts),
		T(test_events_destroy_is_null_safe),
	};
#undef T
	return cmocka_run_group_tests_name("events", tests, NULL, NULL);
}
