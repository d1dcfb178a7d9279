/* test_metrics - the Prometheus text bellowsd serves: every family has
 * its HELP and TYPE, label values are escaped, the latency histogram is
 * cumulative up to +Inf, per-layer series stop at the cap and the rest
 * are counted, special values are spelled as Prometheus reads them, the
 * process_* families and bellows_build_info are served (bellows_up is
 * not) with what /proc says of this process; and
 * listen addresses are parsed or refused with a reason.
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

#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>

#include "controller/ctl_metrics.h"

static com_layer_info layers[3] = {
	{ .name = "fc1.weight", .numel = 10 },
	{ .name = "odd\"name\\x", .numel = 10 },
	{ .name = "fc2", .numel = 10 },
};
static double levels[3] = { 0, 2, 4 };
static double norms[3] = { 1.5, NAN, INFINITY };

/* A snapshot with one job of three layers whose name needs escaping. */
static ctl_metrics_snapshot
snapshot(ctl_jobs_job_view *job, uint32_t layer_series)
{
	ctl_metrics_snapshot s = { .layer_series = layer_series };

	*job = (ctl_jobs_job_view){
		.name = "a\"b\\c\nd",
		.world = 4,
		.alive = 3,
		.step = 120,
		.windows = 12,
		.floats_sent = 100,
		.floats_raw = 400,
		.n_layers = 3,
		.layers = layers,
		.level = levels,
		.grad_norm = norms,
	};
	s.uptime_ms = 2500;
	s.jobs.reports = 48;
	s.jobs.decisions = 13;
	s.jobs.ranks_joined = 4;
	s.jobs.ranks_lost = 1;
	s.latency.le[0] = 1; /* 0.5 ms */
	for (uint32_t i = 1; i < CTL_JOBS_LATENCY_BUCKETS; i++)
		s.latency.le[i] = 10;
	s.latency.count = 11;
	s.latency.sum_ms = 20000;
	s.dropped = 7;
	s.reloads = 2;
	s.store = true;
	s.store_pending = 5;
	s.n_jobs = 1;
	s.job = job;
	return s;
}

static char *
format(const ctl_metrics_snapshot *s)
{
	char *text = NULL;
	size_t len = 0;

	assert_int_equal(ctl_metrics_format(s, &text, &len), 0);
	assert_non_null(text);
	assert_int_equal(strlen(text), len);
	return text;
}

static void
every_sample_has_its_help_and_type_first(void **state)
{
	ctl_jobs_job_view job;
	ctl_metrics_snapshot s = snapshot(&job, CTL_METRICS_LAYER_SERIES);
	char *text = format(&s), *save = NULL, *line;
	char typed[64][96];
	uint32_t n_typed = 0, samples = 0;

	(void)state;
	for (line = strtok_r(text, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		char name[96];
		bool found = false;

		if (strncmp(line, "# HELP ", 7) == 0)
			continue;
		if (strncmp(line, "# TYPE ", 7) == 0) {
			assert_true(n_typed < 64);
			sscanf(line + 7, "%95s", typed[n_typed++]);
			continue;
		}
		assert_true(line[0] != '#');
		sscanf(line, "%95[a-z_]", name);
		samples++;
		for (uint32_t i = 0; i < n_typed && !found; i++) {
			size_t tl = strlen(typed[i]);

			found = strncmp(name, typed[i], tl) == 0 &&
			    (name[tl] == '\0' ||
				strcmp(name + tl, "_bucket") == 0 ||
				strcmp(name + tl, "_sum") == 0 ||
				strcmp(name + tl, "_count") == 0);
		}
		if (!found)
			fail_msg("sample '%s' before its # TYPE", line);
	}
	assert_true(samples > 30);
	free(text);
}

static void
counters_and_store_lag_carry_the_snapshot_values(void **state)
{
	ctl_jobs_job_view job;
	ctl_metrics_snapshot s = snapshot(&job, CTL_METRICS_LAYER_SERIES);
	char *text = format(&s);

	(void)state;
	assert_non_null(strstr(text, "\nbellows_decisions_total 13\n"));
	assert_non_null(strstr(text, "\nbellows_reports_total 48\n"));
	assert_non_null(strstr(text, "\nbellows_dropped_messages_total 7\n"));
	assert_non_null(strstr(text, "\nbellows_reloads_total 2\n"));
	assert_non_null(strstr(text, "\nbellows_rank_joins_total 4\n"));
	assert_non_null(strstr(text, "\nbellows_rank_losses_total 1\n"));
	assert_non_null(strstr(text, "\nbellows_store_pending_rows 5\n"));
	assert_non_null(strstr(text, "\nbellows_uptime_seconds 2.5\n"));
	assert_non_null(
	    strstr(text, "# TYPE bellows_decisions_total counter\n"));
	free(text);
}

static void
label_values_escape_quote_backslash_and_line_feed(void **state)
{
	ctl_jobs_job_view job;
	ctl_metrics_snapshot s = snapshot(&job, CTL_METRICS_LAYER_SERIES);
	char *text = format(&s);

	(void)state;
	assert_non_null(strstr(text,
	    "bellows_job_bytes_saved_total{bellows_job=\"a\\\"b\\\\c\\nd\"} "
	    "1200\n"));
	assert_non_null(strstr(text,
	    "bellows_layer_level{bellows_job=\"a\\\"b\\\\c\\nd\","
	    "layer=\"odd\\\"name\\\\x\"} 2\n"));
	free(text);
}

/* A label is UTF-8 even when a name is not: a stray byte becomes U+FFFD,
 * a well-formed multi-byte character stays as it is. */
static void
label_values_replace_bytes_that_are_not_utf8(void **state)
{
	ctl_jobs_job_view job;
	ctl_metrics_snapshot s = snapshot(&job, CTL_METRICS_LAYER_SERIES);
	char *text;

	(void)state;
	job.name = "f\xd4zz-\xc3\xa9t\xe9";
	text = format(&s);
	assert_non_null(strstr(text,
	    "bellows_job_bytes_saved_total{bellows_job=\"f\xef\xbf\xbdzz-"
	    "\xc3\xa9t\xef\xbf\xbd\"} 1200\n"));
	free(text);
}

static void
latency_histogram_is_cumulative_up_to_inf(void **state)
{
	ctl_jobs_job_view job;
	ctl_metrics_snapshot s = snapshot(&job, CTL_METRICS_LAYER_SERIES);
	char *text = format(&s);

	(void)state;
	assert_non_null(strstr(text,
	    "# TYPE bellows_decision_latency_seconds histogram\n"));
	assert_non_null(strstr(text,
	    "bellows_decision_latency_seconds_bucket{le=\"0.0005\"} 1\n"));
	assert_non_null(strstr(text,
	    "bellows_decision_latency_seconds_bucket{le=\"10\"} 10\n"));
	assert_non_null(strstr(text,
	    "bellows_decision_latency_seconds_bucket{le=\"+Inf\"} 11\n"));
	assert_non_null(
	    strstr(text, "bellows_decision_latency_seconds_sum 20\n"));
	assert_non_null(
	    strstr(text, "bellows_decision_latency_seconds_count 11\n"));
	free(text);
}

static void
special_values_are_nan_and_plus_inf(void **state)
{
	ctl_jobs_job_view job;
	ctl_metrics_snapshot s = snapshot(&job, CTL_METRICS_LAYER_SERIES);
	char *text = format(&s);

	(void)state;
	assert_non_null(strstr(text, "layer=\"fc1.weight\"} 1.5\n"));
	assert_non_null(strstr(text, "layer=\"odd\\\"name\\\\x\"} NaN\n"));
	assert_non_null(strstr(text, "layer=\"fc2\"} +Inf\n"));
	free(text);
}

static void
layer_series_stop_at_the_cap_and_the_rest_are_counted(void **state)
{
	ctl_jobs_job_view job;
	ctl_metrics_snapshot s = snapshot(&job, 2);
	char *text = format(&s);

	(void)state;
	assert_non_null(strstr(text, "layer=\"odd\\\"name\\\\x\"} 2\n"));
	assert_null(strstr(text, "layer=\"fc2\""));
	assert_non_null(strstr(text, "\nbellows_metrics_layers_omitted 1\n"));
	free(text);
}

static void
a_job_without_a_decision_has_no_level_series(void **state)
{
	ctl_jobs_job_view job;
	ctl_metrics_snapshot s = snapshot(&job, CTL_METRICS_LAYER_SERIES);
	char *text;

	(void)state;
	job.level = NULL;
	text = format(&s);
	assert_null(strstr(text, "bellows_layer_level{"));
	assert_non_null(strstr(text, "bellows_layer_grad_norm{"));
	assert_non_null(strstr(text, "\nbellows_metrics_layers_omitted 0\n"));
	free(text);
}

/* fc1.weight decided 0 and sent raw; odd"name\x decided 2 and sent raw
 * (below the size threshold); fc2 not reported by its agents. */
static void
the_applied_level_is_a_gauge_of_its_own_beside_the_decided_one(void **state)
{
	static double applied[3] = { 0, 0, NAN };
	ctl_jobs_job_view job;
	ctl_metrics_snapshot s = snapshot(&job, CTL_METRICS_LAYER_SERIES);
	char *text;

	(void)state;
	job.level_applied = applied;
	text = format(&s);
	assert_non_null(strstr(text,
	    "# HELP bellows_layer_level Compression level decided"));
	assert_non_null(strstr(text,
	    "# HELP bellows_layer_level_applied Compression level the layer "
	    "was sent at in the last window closed, as applied"));
	assert_non_null(
	    strstr(text, "# TYPE bellows_layer_level_applied gauge\n"));
	assert_non_null(strstr(text,
	    "bellows_layer_level{bellows_job=\"a\\\"b\\\\c\\nd\","
	    "layer=\"odd\\\"name\\\\x\"} 2\n"));
	assert_non_null(strstr(text,
	    "bellows_layer_level_applied{bellows_job=\"a\\\"b\\\\c\\nd\","
	    "layer=\"odd\\\"name\\\\x\"} 0\n"));
	assert_non_null(strstr(text,
	    "bellows_layer_level_applied{bellows_job=\"a\\\"b\\\\c\\nd\","
	    "layer=\"fc2\"} NaN\n"));
	free(text);
}

static void
listen_addresses_parse_or_say_why(void **state)
{
	struct sockaddr_storage ss;
	socklen_t len = 0;
	char err[256];
	struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;

	(void)state;
	assert_int_equal(ctl_metrics_parse_listen("9464", &ss, &len, err,
			     sizeof(err)),
	    0);
	assert_int_equal(ss.ss_family, AF_INET);
	assert_int_equal(ntohs(a4->sin_port), 9464);
	assert_int_equal(ntohl(a4->sin_addr.s_addr), 0x7f000001);
	assert_int_equal(ctl_metrics_parse_listen(":80", &ss, &len, err,
			     sizeof(err)),
	    0);
	assert_int_equal(ntohl(a4->sin_addr.s_addr), 0x7f000001);
	assert_int_equal(ctl_metrics_parse_listen("0.0.0.0:9464", &ss, &len,
			     err, sizeof(err)),
	    0);
	assert_int_equal(ctl_metrics_parse_listen("[::1]:9464", &ss, &len, err,
			     sizeof(err)),
	    0);
	assert_int_equal(ss.ss_family, AF_INET6);
	assert_true(ctl_metrics_listen_local("localhost:9464"));
	assert_true(ctl_metrics_listen_local("[::1]:1"));
	assert_false(ctl_metrics_listen_local("0.0.0.0:9464"));
	assert_false(ctl_metrics_listen_local("10.1.2.3:9464"));

	const char *bad[] = { "", "host:80", "1.2.3.4:0", "1.2.3.4:65536",
		"1.2.3.4:", "::1:80", "[::1]80", "1.2.3.4:80x", "1.2.3.4:-1" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		len = 7;
		assert_int_equal(ctl_metrics_parse_listen(bad[i], &ss, &len,
				     err, sizeof(err)),
		    BELLOWS_EINVAL);
		assert_int_equal(len, 7); /* untouched */
		assert_non_null(strstr(err, "metrics listen address"));
	}
}

static void
process_families_and_build_info_are_served_and_bellows_up_is_not(void **state)
{
	ctl_jobs_job_view job;
	ctl_metrics_snapshot s = snapshot(&job, CTL_METRICS_LAYER_SERIES);
	char *text;

	(void)state;
	s.process = (ctl_metrics_process){
		.known = true,
		.cpu_seconds = 1.25,
		.rss_bytes = 9224192,
		.heap_bytes = 4194304,
		.vm_bytes = 189607936,
		.open_fds = 20,
		.max_fds = 1024,
		.start_seconds = 1796617266.5,
	};
	text = format(&s);
	assert_non_null(strstr(text, "\nbellows_build_info{version=\""));
	assert_non_null(strstr(text, "\"} 1\n"));
	assert_non_null(strstr(text, "\nprocess_cpu_seconds_total 1.25\n"));
	assert_non_null(
	    strstr(text, "# TYPE process_cpu_seconds_total counter\n"));
	assert_non_null(
	    strstr(text, "\nprocess_resident_memory_bytes 9224192\n"));
	assert_non_null(
	    strstr(text, "\nprocess_virtual_memory_bytes 189607936\n"));
	assert_non_null(
	    strstr(text, "\nbellows_heap_allocated_bytes 4194304\n"));
	assert_non_null(strstr(text, "\nprocess_open_fds 20\n"));
	assert_non_null(strstr(text, "\nprocess_max_fds 1024\n"));
	assert_non_null(
	    strstr(text, "\nprocess_start_time_seconds 1796617266.5\n"));
	assert_null(strstr(text, "bellows_up "));
	assert_null(strstr(text, "TYPE bellows_up gauge"));
	free(text);
	/* Figures not read: the process families are left out. */
	s.process.known = false;
	text = format(&s);
	assert_null(strstr(text, "process_"));
	assert_non_null(strstr(text, "bellows_build_info{"));
	free(text);
}

static void
the_process_figures_read_from_proc_are_this_processes(void **state)
{
	ctl_metrics_process p;
	FILE *f = tmpfile(); /* one descriptor more, counted */
	uint64_t fds;

	(void)state;
	assert_non_null(f);
	assert_int_equal(ctl_metrics_read_process(&p), 0);
	assert_true(p.known);
	assert_true(p.rss_bytes > 0);
	assert_true(p.vm_bytes >= p.rss_bytes);
	assert_true(p.open_fds >= 4); /* stdin, stdout, stderr, f */
	assert_true(p.max_fds >= p.open_fds);
	assert_true(p.cpu_seconds >= 0);
	assert_true(p.start_seconds > 1.6e9); /* after 2020 */
	fds = p.open_fds;
	fclose(f);
	assert_int_equal(ctl_metrics_read_process(&p), 0);
	assert_int_equal(p.open_fds, fds - 1);
}

/* The heap figure counts what is allocated, not what is resident: 8 MiB
 * more while a block is held, back down once it is freed. */
static void
the_heap_figure_rises_by_a_held_block_and_falls_when_it_is_freed(void **state)
{
	enum {
		BLOCK = 8 << 20
	};
	ctl_metrics_process before, held, after;
	char *volatile block;

	(void)state;
	assert_int_equal(ctl_metrics_read_process(&before), 0);
	if (before.heap_bytes == 0)
		skip(); /* an allocator that reports nothing (ASan's) */
	block = malloc(BLOCK);
	assert_non_null(block);
	memset(block, 1, BLOCK);
	assert_int_equal(ctl_metrics_read_process(&held), 0);
	free(block);
	assert_int_equal(ctl_metrics_read_process(&after), 0);
	assert_true(held.heap_bytes >= before.heap_bytes + BLOCK);
	assert_true(after.heap_bytes + BLOCK <= held.heap_bytes);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_sample_has_its_help_and_type_first),
		cmocka_unit_test(
		    the_heap_figure_rises_by_a_held_block_and_falls_when_it_is_freed),
		cmocka_unit_test(
		    counters_and_store_lag_carry_the_snapshot_values),
		cmocka_unit_test(
		    label_values_escape_quote_backslash_and_line_feed),
		cmocka_unit_test(label_values_replace_bytes_that_are_not_utf8),
		cmocka_unit_test(latency_histogram_is_cumulative_up_to_inf),
		cmocka_unit_test(special_values_are_nan_and_plus_inf),
		cmocka_unit_test(
		    layer_series_stop_at_the_cap_and_the_rest_are_counted),
		cmocka_unit_test(a_job_without_a_decision_has_no_level_series),
		cmocka_unit_test(
		    the_applied_level_is_a_gauge_of_its_own_beside_the_decided_one),
		cmocka_unit_test(listen_addresses_parse_or_say_why),
		cmocka_unit_test(
		    process_families_and_build_info_are_served_and_bellows_up_is_not),
		cmocka_unit_test(
		    the_process_figures_read_from_proc_are_this_processes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
