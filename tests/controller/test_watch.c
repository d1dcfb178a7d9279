/* test_watch - the configuration file watch: real files in a temporary
 * directory, real inotify, the real event loop.
 *
 * Editors save in two ways, both must be seen: writing the file in place
 * (IN_CLOSE_WRITE) and writing a new file that is renamed over it
 * (IN_MOVED_TO). A burst of writes is one change; other files in the
 * directory are none. Every run is bounded by a guard timer.
 */
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

#include "controller/loop.h"
#include "controller/watch.h"

#define GUARD_MS  5000 /* nothing here should take this long */
#define SETTLE_MS 300  /* generous: writes below are 20 ms apart */

typedef struct fixture {
	char dir[64];     /* private temporary directory */
	char path[128];   /* dir/bellows.yaml, watched */
	char tmp[128];    /* dir/.bellows.yaml.new */
	char other[128];  /* dir/other.yaml */
	ctl_loop *loop;   /* the loop */
	ctl_watch *watch; /* under test */
	int changes;      /* callback calls */
	int writes_left;  /* writes the writer timer still does */
	int quiet_ticks;  /* stopper ticks since the last write */
	bool guard_hit;   /* the guard stopped the loop */
} fixture;

static void
write_file(const char *path, const char *text)
{
	FILE *fp = fopen(path, "w");

	assert_non_null(fp);
	assert_int_equal(fwrite(text, 1, strlen(text), fp), strlen(text));
	assert_int_equal(fclose(fp), 0);
}

static void
on_change(void *arg)
{
	fixture *f = arg;

	f->changes++;
}

static void
on_change_stop(void *arg)
{
	fixture *f = arg;

	f->changes++;
	ctl_loop_stop(f->loop);
}

static void
on_guard(ctl_loop *loop, uint64_t now_ms, void *arg)
{
	fixture *f = arg;

	f->guard_hit = true;
	ctl_loop_stop(loop);
}

static int
setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/bellows-watch-XXXXXX");
	if (mkdtemp(f->dir) == NULL || ctl_loop_new(&f->loop) != 0)
		return -1;
	snprintf(f->path, sizeof(f->path), "%s/bellows.yaml", f->dir);
	snprintf(f->tmp, sizeof(f->tmp), "%s/.bellows.yaml.new", f->dir);
	snprintf(f->other, sizeof(f->other), "%s/other.yaml", f->dir);
	write_file(f->path, "first\n");
	if (ctl_loop_add_timer(f->loop, GUARD_MS, on_guard, f) != 0)
		return -1;
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	fixture *f = *state;

	ctl_loop_destroy(&f->loop);
	ctl_watch_close(&f->watch);
	unlink(f->path);
	unlink(f->tmp);
	unlink(f->other);
	rmdir(f->dir);
	free(f);
	return 0;
}

static void
watch(fixture *f, ctl_watch_fn *cb)
{
	assert_int_equal(ctl_watch_open(f->path, SETTLE_MS, cb, f, &f->watch),
	    0);
	assert_int_equal(ctl_watch_attach(f->watch, f->loop), 0);
}

static void
run(fixture *f)
{
	assert_int_equal(ctl_loop_run(f->loop), 0);
	assert_false(f->guard_hit);
}

/* Writes the watched file in place every 20 ms while writes are left. */
static void
on_writer(ctl_loop *loop, uint64_t now_ms, void *arg)
{
	fixture *f = arg;

	if (f->writes_left == 0)
		return;
	f->writes_left--;
	write_file(f->path, f->writes_left % 2 ? "odd\n" : "even\n");
}

/* Stops the loop once the writes are done and twice the settle time has
 * passed without one. */
static void
on_stopper(ctl_loop *loop, uint64_t now_ms, void *arg)
{
	fixture *f = arg;

	if (f->writes_left > 0)
		return;
	if (++f->quiet_ticks * 100 >= 2 * SETTLE_MS)
		ctl_loop_stop(loop);
}

static void
test_watch_sees_the_file_rewritten_in_place(void **state)
{
	fixture *f = *state;

	watch(f, on_change_stop);
	write_file(f->path, "second\n");
	run(f);
	assert_int_equal(f->changes, 1);
	assert_int_equal(ctl_watch_changes(f->watch), 1);
}

static void
test_watch_sees_a_new_file_renamed_over_it(void **state)
{
	fixture *f = *state;

	watch(f, on_change_stop);
	write_file(f->tmp, "second\n");
	assert_int_equal(rename(f->tmp, f->path), 0);
	run(f);
	assert_int_equal(f->changes, 1);
}

static void
test_watch_sees_the_file_created_after_a_delete(void **state)
{
	fixture *f = *state;

	watch(f, on_change_stop);
	assert_int_equal(unlink(f->path), 0);
	write_file(f->path, "again\n");
	run(f);
	assert_int_equal(f->changes, 1);
}

static void
test_watch_reports_a_burst_of_writes_once(void **state)
{
	fixture *f = *state;

	watch(f, on_change);
	f->writes_left = 5;
	assert_int_equal(ctl_loop_add_timer(f->loop, 20, on_writer, f), 0);
	assert_int_equal(ctl_loop_add_timer(f->loop, 100, on_stopper, f), 0);
	run(f);
	assert_int_equal(f->writes_left, 0);
	assert_int_equal(f->changes, 1);
}

static void
test_watch_ignores_other_files_in_the_directory(void **state)
{
	fixture *f = *state;

	watch(f, on_change);
	write_file(f->other, "not watched\n");
	write_file(f->tmp, "not yet renamed\n");
	assert_int_equal(ctl_loop_add_timer(f->loop, 100, on_stopper, f), 0);
	run(f);
	assert_int_equal(f->changes, 0);
}

static void
test_watch_refuses_what_it_cannot_watch(void **state)
{
	fixture *f = *state;
	ctl_watch *w = NULL;

	assert_int_equal(ctl_watch_open("/nonexistent-bellows/x.yaml", 100,
			     on_change, f, &w),
	    BELLOWS_ESYS);
	assert_null(w);
	assert_int_equal(ctl_watch_open("/tmp/", 100, on_change, f, &w),
	    BELLOWS_EINVAL);
	assert_int_equal(ctl_watch_open(f->path, 100, NULL, f, &w),
	    BELLOWS_EINVAL);
	assert_null(w);
	ctl_watch_close(NULL);
	ctl_watch_close(&w);
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_watch_sees_the_file_rewritten_in_place),
		T(test_watch_sees_a_new_file_renamed_over_it),
		T(test_watch_sees_the_file_created_after_a_delete),
		T(test_watch_reports_a_burst_of_writes_once),
		T(test_watch_ignores_other_files_in_the_directory),
		T(test_watch_refuses_what_it_cannot_watch),
	};
#undef T
	return cmocka_run_group_tests_name("watch", tests, NULL, NULL);
}
