/* test_plugin - out-of-tree policies: real shared objects loaded with
 * dlopen through the YAML configuration, as bellowsd loads them.
 *
 * The threshold example must load, be checked like a built-in and decide
 * through the policy host; each broken plug-in must be refused as a
 * configuration error at the position of its `plugin:` value, with a
 * message naming the file and what is wrong. Loaded plug-ins are
 * reference-counted: the shared object stays mapped while a configuration
 * holds it and is unmapped after the last one goes (checked with
 * RTLD_NOLOAD, which only finds objects already loaded).
 *
 * Plug-ins run in a worker process (bellows-plugin-worker, found through
 * BELLOWS_PLUGIN_WORKER): the threshold example decides there exactly as
 * it did in this process, and the plug-ins that segfault, abort or hang
 * on window 1 cost one window each: the call fails, the state in force
 * stays, the built-in policy beside them still decides, the fault is
 * reported, and the worker is started again (its instance from init). A
 * plug-in whose entry crashes is refused at load and this process lives.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <dlfcn.h>
#include <limits.h>
#include <math.h>
#include <poll.h>

#include "common/clock.h"

#include <bellows/error.h>

#include "policyhost/config.h"
#include "policyhost/plugin.h"
#include "plugin_paths.h"
#include "policyhost/plugin_wire.h"
#include "policyhost/policy_host.h"
#include "policyhost/worker.h"

#define N_LAYERS 3

/* How a worker's crash reads: the signal, except where a sanitizer
 * catches it and exits with its own status. */
#if defined(__SANITIZE_ADDRESS__)
#define CRASH_TEXT(text) "the worker"
#define PROBE_CRASH_TEXT "crashed while loading: the checking process"
#else
#define CRASH_TEXT(text) text
#define PROBE_CRASH_TEXT                                                       \
	"crashed while loading: the checking process was killed by signal 11"
#endif

/* Two matrices around a bias: the default selector (min_ndim 2) picks
 * layers 0 and 2. */
static const com_layer_info layers[N_LAYERS] = {
	{ .name = "conv.weight", .numel = 32, .ndim = 2, .shape = { 8, 4 } },
	{ .name = "conv.bias", .numel = 8, .ndim = 1, .shape = { 8 } },
	{ .name = "fc.weight", .numel = 32, .ndim = 2, .shape = { 4, 8 } },
};

typedef struct fixture {
	char dir[64];                 /* private temporary directory */
	char path[128];               /* dir/bellows.yaml */
	char other[128];              /* dir/printed.yaml, dir/not-a.so */
	char link[128];               /* dir/lib/libthreshold.so */
	char sub[128];                /* dir/lib */
	char threshold[PATH_MAX];     /* the example plug-in */
	char err[CTL_CONFIG_ERR_MAX]; /* last error text */
	ctl_config *cfg;              /* last configuration loaded */
	ctl_config *cfg2;             /* a second one */
	ctl_policy_set *set;          /* instances under test */
	com_decision state;           /* knob state in force */
} fixture;

static int
setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/bellows-plugin-XXXXXX");
	if (mkdtemp(f->dir) == NULL) {
		free(f);
		return -1;
	}
	snprintf(f->path, sizeof(f->path), "%s/bellows.yaml", f->dir);
	snprintf(f->other, sizeof(f->other), "%s/other", f->dir);
	snprintf(f->sub, sizeof(f->sub), "%s/lib", f->dir);
	snprintf(f->link, sizeof(f->link), "%s/lib/libthreshold.so", f->dir);
	plugin_path(f->threshold, sizeof(f->threshold), THRESHOLD_SO);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	fixture *f = *state;

	/* A failed test may have left these set (a callback on its stack). */
	ctl_worker_set_fault_fn(NULL, NULL);
	ctl_worker_set_limits(0, 0);
	ctl_plugin_set_in_process(false);
	ctl_policy_set_destroy(&f->set);
	com_decision_fini(&f->state);
	ctl_config_destroy(&f->cfg);
	ctl_config_destroy(&f->cfg2);
	unlink(f->path);
	unlink(f->other);
	unlink(f->link);
	rmdir(f->sub);
	rmdir(f->dir);
	free(f);
	return 0;
}

static void
write_file(const char *path, const char *text)
{
	FILE *fp = fopen(path, "w");

	assert_non_null(fp);
	assert_int_equal(fwrite(text, 1, strlen(text), fp), strlen(text));
	assert_int_equal(fclose(fp), 0);
}

/* Writes a configuration running the plug-in `so` as type `type` and
 * loads it into *cfg. The `plugin:` value is at line 5, column 17; the
 * `type:` value at line 4, column 15. */
static int
load_with(fixture *f, const char *type, const char *so, ctl_config **cfg)
{
	char text[2 * PATH_MAX];

	snprintf(text, sizeof(text),
	    "jobs:\n"
	    "  - match: \"*\"\n"
	    "    policies:\n"
	    "      - type: %s\n"
	    "        plugin: %s\n"
	    "        params: {threshold: 1.5, high: 4, low: 1}\n",
	    type, so);
	write_file(f->path, text);
	f->err[0] = '\0';
	return ctl_config_load(f->path, cfg, f->err, sizeof(f->err));
}

/* The plug-in `rel` (under the build root) as type "broken" must be
 * refused at its `plugin:` value with `what` in the message. */
static void
assert_plugin_refused(fixture *f, const char *rel, const char *what)
{
	char so[PATH_MAX], prefix[512];

	plugin_path(so, sizeof(so), rel);
	assert_int_equal(load_with(f, "broken", so, &f->cfg), BELLOWS_ECONFIG);
	assert_null(f->cfg);
	snprintf(prefix, sizeof(prefix), "%s:5:17: ", f->path);
	if (strncmp(f->err, prefix, strlen(prefix)) != 0)
		fail_msg("expected '%s...', got '%s'", prefix, f->err);
	if (strstr(f->err, so) == NULL)
		fail_msg("the message does not name '%s': '%s'", so, f->err);
	if (strstr(f->err, what) == NULL)
		fail_msg("expected '%s' in '%s'", what, f->err);
}

/* True when the shared object at `path` is mapped in this process. */
static bool
is_loaded(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);

	if (h == NULL)
		return false;
	dlclose(h);
	return true;
}

/* Runs window `window` in which rank 0 saw gradient norms `norms` (NULL:
 * 0 for every layer); returns the count of failed policies. */
static uint32_t
run_norms(fixture *f, uint64_t window, const double *norms, char *policies,
    size_t policies_len, char *reason, size_t reason_len)
{
	bellows_window_layer wl[N_LAYERS];
	bellows_window w = { .job = "job",
		.window = window,
		.world = 1,
		.ranks_reported = 1,
		.n_layers = N_LAYERS,
		.layers = wl };
	uint32_t failed = 99;

	memset(wl, 0, sizeof(wl));
	for (uint32_t l = 0; l < N_LAYERS; l++) {
		wl[l].name = layers[l].name;
		wl[l].numel = layers[l].numel;
		wl[l].ndim = layers[l].ndim;
		wl[l].shape = layers[l].shape;
		wl[l].grad_norm = norms != NULL ? norms[l] : 0;
		wl[l].level = f->state.level[l];
	}
	assert_int_equal(ctl_policy_set_run(f->set, &w, &f->state, policies,
			     policies_len, reason, reason_len, &failed),
	    0);
	return failed;
}

/* Runs one window in which rank 0 saw gradient norms n0, n1, n2. */
static void
run_window(fixture *f, uint64_t window, double n0, double n1, double n2,
    char *reason, size_t reason_len)
{
	const double norms[N_LAYERS] = { n0, n1, n2 };
	char policies[128];

	assert_int_equal(run_norms(f, window, norms, policies, sizeof(policies),
			     reason, reason_len),
	    0);
	assert_string_equal(policies, "threshold");
}

/* Runs window `window`; returns the count of failed policies. */
static uint32_t
run_any(fixture *f, uint64_t window, char *reason, size_t reason_len)
{
	char policies[128];

	return run_norms(f, window, NULL, policies, sizeof(policies), reason,
	    reason_len);
}

static void
start_set(fixture *f)
{
	char reason[BELLOWS_REASON_MAX];

	assert_int_equal(com_decision_init(&f->state, "job", N_LAYERS), 0);
	assert_int_equal(ctl_policy_set_new(&f->cfg->jobs[0], "job", 1, layers,
			     N_LAYERS, &f->state, reason, sizeof(reason),
			     &f->set),
	    0);
	assert_string_equal(reason,
	    "threshold: level 1 until the first window");
}

/* ---- faults in the worker --------------------------------------------- */

/* What the fault callback was told. */
typedef struct faults {
	unsigned failed;    /* plugin_failed reports */
	unsigned restarted; /* plugin_restarted reports */
	char job[64];       /* the last report's job */
	char text[512];     /* the last plugin_failed text */
	char restart[512];  /* the last plugin_restarted text */
} faults;

static void
on_fault(void *arg, const char *kind, const char *job, const char *text)
{
	faults *fl = arg;

	if (strcmp(kind, CTL_WORKER_FAULT_FAILED) == 0) {
		fl->failed++;
		snprintf(fl->text, sizeof(fl->text), "%s", text);
	} else if (strcmp(kind, CTL_WORKER_FAULT_RESTARTED) == 0) {
		fl->restarted++;
		snprintf(fl->restart, sizeof(fl->restart), "%s", text);
	}
	snprintf(fl->job, sizeof(fl->job), "%s", job != NULL ? job : "");
}

/* Loads a job running the built-in schedule (levels 2 from window 0, 3
 * from window 2) beside the broken plug-in `what` (LR scale), and starts
 * its set. */
static void
start_faulty(fixture *f, const char *what)
{
	char so[PATH_MAX], rel[128], text[2 * PATH_MAX], reason[1024];

	snprintf(rel, sizeof(rel), "tests/policyhost/libbroken_%s.so", what);
	plugin_path(so, sizeof(so), rel);
	snprintf(text, sizeof(text),
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: schedule\n"
	    "        params: {levels: {0: 2, 2: 3}}\n"
	    "      - type: broken\n"
	    "        plugin: %s\n",
	    so);
	write_file(f->path, text);
	assert_int_equal(ctl_config_load(f->path, &f->cfg, f->err,
			     sizeof(f->err)),
	    0);
	assert_int_equal(com_decision_init(&f->state, "job", N_LAYERS), 0);
	assert_int_equal(ctl_policy_set_new(&f->cfg->jobs[0], "job", 1, layers,
			     N_LAYERS, &f->state, reason, sizeof(reason),
			     &f->set),
	    0);
}

/* The misbehaving plug-in `what` decides window 0, fails window 1 with
 * `expect` in the report, and decides again once its worker is back. */
static void
assert_survived(fixture *f, const char *what, const char *expect)
{
	const ctl_worker *wk;
	ctl_worker_info info;
	faults fl = { 0 };
	char reason[1024];
	uint64_t window;

	ctl_worker_set_fault_fn(on_fault, &fl);
	start_faulty(f, what);
	wk = ctl_plugin_worker(f->cfg->jobs[0].policies[1].plugin);
	ctl_worker_get_info(wk, &info);
	assert_true(info.pid > 0 && info.pid != (int)getpid());
	assert_int_equal(info.generation, 1);

	assert_int_equal(run_any(f, 0, reason, sizeof(reason)), 0);
	assert_true(f->state.lr_scale == 0.5 && f->state.level[0] == 2);
	assert_non_null(strstr(reason, "broken: window 0"));

	/* Window 1 kills the worker: the plug-in's knob keeps its value,
	 * the built-in still decides (level 3 from window 2 on). */
	f->state.lr_scale = 0.75;
	assert_int_equal(run_any(f, 2 - 1, reason, sizeof(reason)), 1);
	assert_true(f->state.lr_scale == 0.75);
	assert_int_equal(fl.failed, 1);
	assert_string_equal(fl.job, "job");
	if (strstr(fl.text, expect) == NULL ||
	    strstr(fl.text, "policy 'broken' on_window") == NULL)
		fail_msg("expected '%s' in '%s'", expect, fl.text);
	ctl_worker_get_info(wk, &info);
	assert_int_equal(info.pid, 0);
	assert_int_equal(info.in_a_row, 1);

	/* Until the backoff has passed the instance is off; then the next
	 * even window starts the worker again and decides. */
	for (window = 2;; window += 2) {
		uint32_t failed = run_any(f, window, reason, sizeof(reason));

		assert_true(f->state.level[0] == 3);
		if (failed == 0)
			break;
		ctl_worker_get_info(wk, &info);
		assert_int_equal(info.pid, 0);
		if (window > 400)
			fail_msg("the worker did not come back");
		poll(NULL, 0, 20); /* let the backoff pass */
	}
	assert_true(f->state.lr_scale == 0.5);
	/* The worker's start, then the instance's, whose state is gone. */
	assert_int_equal(fl.restarted, 2);
	assert_non_null(strstr(fl.restart, "policy 'broken' (plug-in '"));
	assert_non_null(strstr(fl.restart, "its state was lost"));
	ctl_worker_get_info(wk, &info);
	assert_int_equal(info.generation, 2);
	assert_true(info.pid > 0);
	ctl_worker_set_fault_fn(NULL, NULL);
}

static void
test_plugin_that_segfaults_costs_one_window_and_its_worker_restarts(
    void **state)
{
	assert_survived(*state, "segv", CRASH_TEXT("was killed by signal 11"));
}

static void
test_plugin_that_aborts_costs_one_window_and_its_worker_restarts(void **state)
{
	assert_survived(*state, "abort", CRASH_TEXT("was killed by signal 6"));
}

static void
test_plugin_that_hangs_is_killed_at_its_deadline(void **state)
{
	uint64_t t0;

	/* The deadline is the configuration's; the bound here is only
	 * that the call came back at all, long before a hang would. */
	ctl_worker_set_limits(200, 0);
	t0 = com_clock_ms();
	assert_survived(*state, "hang", "did not answer within 200 ms");
	assert_true(com_clock_ms() - t0 < 10000);
	ctl_worker_set_limits(0, 0);
}

static void
test_plugin_worker_has_its_address_space_capped(void **state)
{
#if defined(__SANITIZE_ADDRESS__)
	(void)state;
	skip(); /* a sanitizer-built worker runs without the cap */
#else
	fixture *f = *state;
	char path[64], line[256];
	ctl_worker_info info;
	bool found = false;
	FILE *limits;

	ctl_worker_set_limits(0, 256);
	assert_int_equal(load_with(f, "threshold", f->threshold, &f->cfg), 0);
	start_set(f);
	ctl_worker_get_info(ctl_plugin_worker(
				f->cfg->jobs[0].policies[0].plugin),
	    &info);
	assert_true(info.pid > 0);
	snprintf(path, sizeof(path), "/proc/%d/limits", info.pid);
	limits = fopen(path, "r");
	assert_non_null(limits);
	while (fgets(line, sizeof(line), limits) != NULL) {
		if (strncmp(line, "Max address space", 17) == 0) {
			found = true;
			if (strstr(line, " 268435456 ") == NULL)
				fail_msg("not capped at 256 MiB: %s", line);
		}
	}
	fclose(limits);
	assert_true(found);
#endif
}

static void
test_plugin_decides_in_a_worker_as_it_does_in_process(void **state)
{
	fixture *f = *state;
	double worker_levels[2][N_LAYERS];
	char reasons[2][2][1024];

	/* Through the worker, then in this process: same decisions. */
	for (int in_process = 0; in_process < 2; in_process++) {
		ctl_plugin_set_in_process(in_process == 1);
		assert_int_equal(load_with(f, "threshold", f->threshold,
				     &f->cfg),
		    0);
		start_set(f);
		run_window(f, 0, 2.0, 9.0, 0.5, reasons[in_process][0],
		    sizeof(reasons[0][0]));
		memcpy(worker_levels[in_process], f->state.level,
		    sizeof(worker_levels[0]));
		run_window(f, 1, 1.5, 9.0, NAN, reasons[in_process][1],
		    sizeof(reasons[0][1]));
		if (in_process == 0) {
			ctl_worker_info info;

			ctl_worker_get_info(ctl_plugin_worker(f->cfg->jobs[0]
								  .policies[0]
								  .plugin),
			    &info);
			assert_true(info.pid > 0 && info.pid != (int)getpid());
		}
		ctl_policy_set_destroy(&f->set);
		com_decision_fini(&f->state);
		ctl_config_destroy(&f->cfg);
	}
	ctl_plugin_set_in_process(false);
	assert_memory_equal(worker_levels[0], worker_levels[1],
	    sizeof(worker_levels[0]));
	assert_string_equal(reasons[0][0], reasons[1][0]);
	assert_string_equal(reasons[0][1], reasons[1][1]);
}

static void
test_plugin_whose_init_crashes_leaves_the_job_to_its_built_ins(void **state)
{
	fixture *f = *state;
	faults fl = { 0 };
	char reason[1024];

	/* The job starts (its worker's failure is not the job's), the
	 * built-in decides, and the plug-in stays off while it crashes. */
	ctl_worker_set_fault_fn(on_fault, &fl);
	start_faulty(f, "init_crash");
	assert_int_equal(fl.failed, 1);
	assert_non_null(strstr(fl.text, "policy 'broken' init: the worker"));
	assert_non_null(
	    strstr(fl.text, CRASH_TEXT("the worker was killed by signal 11")));
	assert_true(f->state.level[0] == 2 && f->state.lr_scale == 1);
	assert_int_equal(run_any(f, 2, reason, sizeof(reason)), 1);
	assert_true(f->state.level[0] == 3 && f->state.lr_scale == 1);
	ctl_worker_set_fault_fn(NULL, NULL);
}

/* A worker's answer is read with bounds: a proposal for another layer
 * count, or one cut anywhere, is a malformed frame. */
static void
test_plugin_wire_refuses_a_short_or_mismatched_proposal(void **state)
{
	double level[N_LAYERS] = { 1, 2, 3 }, bound[N_LAYERS] = { 0 };
	double level2[N_LAYERS], bound2[N_LAYERS];
	uint8_t table[BELLOWS_CODEC_TABLE_MAX];
	bellows_proposal in = { .n_layers = N_LAYERS,
		.level = level,
		.error_bound = bound,
		.lr_scale = 0.5,
		.n_metrics = 1,
		.codec_table = table,
		.codec_table_len = 3 };
	bellows_proposal *out = calloc(1, sizeof(*out));
	ctl_pwire_buf b = { 0 };
	ctl_pwire_reader r;
	size_t payload;

	(void)state;
	assert_non_null(out);
	snprintf(in.reason, sizeof(in.reason), "why");
	snprintf(in.metrics[0].name, sizeof(in.metrics[0].name), "m");
	memcpy(table, "abc", 3);
	ctl_pwire_begin(&b, CTL_PWIRE_REPLY, 0);
	ctl_pwire_put_proposal(&b, &in);
	assert_int_equal(ctl_pwire_end(&b), 0);
	payload = b.len - sizeof(ctl_pwire_header);
	*out = (bellows_proposal){ .n_layers = N_LAYERS,
		.level = level2,
		.error_bound = bound2,
		.codec_table = malloc(BELLOWS_CODEC_TABLE_MAX) };
	assert_non_null(out->codec_table);
	r = (ctl_pwire_reader){ .p = b.data + sizeof(ctl_pwire_header),
		.left = payload };
	assert_int_equal(ctl_pwire_get_proposal(&r, out), 0);
	assert_true(out->lr_scale == 0.5 && out->level[2] == 3);
	assert_string_equal(out->reason, "why");
	assert_int_equal(out->n_metrics, 1);
	assert_string_equal(out->metrics[0].name, "m");
	assert_int_equal(out->codec_table_len, 3);
	assert_memory_equal(out->codec_table, "abc", 3);
	for (size_t cut = 0; cut < payload; cut++) {
		r = (ctl_pwire_reader){ .p = b.data + sizeof(ctl_pwire_header),
			.left = cut };
		assert_int_equal(ctl_pwire_get_proposal(&r, out),
		    BELLOWS_EPROTO);
	}
	out->n_layers = N_LAYERS - 1;
	r = (ctl_pwire_reader){ .p = b.data + sizeof(ctl_pwire_header),
		.left = payload };
	assert_int_equal(ctl_pwire_get_proposal(&r, out), BELLOWS_EPROTO);
	free(out->codec_table);
	free(out);
	ctl_pwire_buf_fini(&b);
}

/* A plug-in sees the layers' array statistics (the exponent histogram)
 * as bellowsd does: copied after the names and shapes, NULL where a layer
 * has none; a count other than 0 and the table's length, or a cut in the
 * values, is a malformed frame. */
static void
test_plugin_wire_carries_the_layers_array_statistics(void **state)
{
	static const uint32_t shape[2] = { 4, 8 };
	uint64_t hist[256];
	bellows_window_layer in[2] = {
		{ .name = "w",
		    .numel = 32,
		    .ndim = 2,
		    .shape = shape,
		    .exp_hist = hist,
		    .exp_hist_len = 256 },
		{ .name = "b", .numel = 4, .ndim = 0 },
	};
	bellows_window_layer out[2];
	uint32_t *shapes = NULL;
	uint64_t *arrays = NULL;
	size_t shapes_cap = 0, arrays_cap = 0, payload;
	ctl_pwire_buf b = { 0 };
	ctl_pwire_reader r;
	uint32_t bad = 255;

	(void)state;
	for (int i = 0; i < 256; i++)
		hist[i] = (uint64_t)i << 40 | 7;
	ctl_pwire_begin(&b, CTL_PWIRE_REPLY, 0);
	ctl_pwire_put_layers(&b, in, 2);
	assert_int_equal(ctl_pwire_end(&b), 0);
	payload = b.len - sizeof(ctl_pwire_header);
	r = (ctl_pwire_reader){ .p = b.data + sizeof(ctl_pwire_header),
		.left = payload };
	assert_int_equal(ctl_pwire_get_layers(&r, out, 2, &shapes, &shapes_cap,
			     &arrays, &arrays_cap),
	    0);
	assert_string_equal(out[0].name, "w");
	assert_int_equal(out[0].shape[1], 8);
	assert_int_equal(out[0].exp_hist_len, 256);
	assert_memory_equal(out[0].exp_hist, hist, sizeof(hist));
	assert_ptr_not_equal(out[0].exp_hist, hist);
	assert_null(out[1].exp_hist);
	assert_int_equal(out[1].exp_hist_len, 0);
	/* Cut short in the values. */
	r = (ctl_pwire_reader){ .p = b.data + sizeof(ctl_pwire_header),
		.left = payload - 8 };
	assert_int_equal(ctl_pwire_get_layers(&r, out, 2, &shapes, &shapes_cap,
			     &arrays, &arrays_cap),
	    BELLOWS_EPROTO);
	/* A count of 255: refused. The counts follow the names and shapes
	 * ("w", 2 dims; "b"): their place is the values' start minus 8. */
	memcpy(b.data + b.len - sizeof(hist) - 2 * sizeof(uint32_t), &bad,
	    sizeof(bad));
	r = (ctl_pwire_reader){ .p = b.data + sizeof(ctl_pwire_header),
		.left = payload };
	assert_int_equal(ctl_pwire_get_layers(&r, out, 2, &shapes, &shapes_cap,
			     &arrays, &arrays_cap),
	    BELLOWS_EPROTO);
	free(shapes);
	free(arrays);
	ctl_pwire_buf_fini(&b);
}

static void
test_plugin_whose_entry_crashes_is_refused_without_crashing_the_loader(
    void **state)
{
	assert_plugin_refused(*state, BROKEN_SO("entry_crash"),
	    PROBE_CRASH_TEXT);
}

/* Loads the `checks` plug-in with x = `x`. */
static int
load_checks(fixture *f, const char *x)
{
	char so[PATH_MAX], text[2 * PATH_MAX];

	plugin_path(so, sizeof(so), BROKEN_SO("checks"));
	snprintf(text, sizeof(text),
	    "jobs:\n"
	    "  - match: \"*\"\n"
	    "    policies:\n"
	    "      - type: broken\n"
	    "        plugin: %s\n"
	    "        params: {x: %s}\n",
	    so, x);
	write_file(f->path, text);
	f->err[0] = '\0';
	return ctl_config_load(f->path, &f->cfg, f->err, sizeof(f->err));
}

static void
test_plugin_check_runs_in_a_child_and_its_crash_is_a_config_error(void **state)
{
	fixture *f = *state;
	char expected[512];

	assert_int_equal(load_checks(f, "0.25"), 0);
	ctl_config_destroy(&f->cfg);
	assert_int_equal(load_checks(f, "0.75"), BELLOWS_ECONFIG);
	snprintf(expected, sizeof(expected),
	    "%s:4:15: policy 'broken': x must be below 0.5, not 0.75", f->path);
	assert_string_equal(f->err, expected);
	/* The check crashes: in the child, so this process reports it. */
	assert_int_equal(load_checks(f, "1"), BELLOWS_ECONFIG);
	snprintf(expected, sizeof(expected),
	    "%s:4:15: policy 'broken': ", f->path);
	if (strncmp(f->err, expected, strlen(expected)) != 0 ||
	    strstr(f->err, "crashed checking the parameters") == NULL)
		fail_msg("unexpected '%s'", f->err);
}

/* ---- loading ----------------------------------------------------------- */

static void
test_plugin_threshold_example_loads_and_decides(void **state)
{
	fixture *f = *state;
	char reason[1024];

	assert_int_equal(load_with(f, "threshold", f->threshold, &f->cfg), 0);
	assert_non_null(f->cfg->jobs[0].policies[0].plugin);
	assert_string_equal(f->cfg->jobs[0].policies[0].ops->name, "threshold");
	start_set(f);
	/* Selected layers start at `low`; the bias is not selected. */
	assert_true(f->state.level[0] == 1 && f->state.level[1] == 0 &&
	    f->state.level[2] == 1);

	run_window(f, 0, 2.0, 9.0, 0.5, reason, sizeof(reason));
	assert_true(f->state.level[0] == 4 && f->state.level[1] == 0 &&
	    f->state.level[2] == 1);
	assert_string_equal(reason,
	    "threshold 1.5: 1 high, 1 low; seen 1 windows, 0 reloads, 0 ranks "
	    "joined, 0 lost");

	/* Equal to the threshold is not above it; NaN (no report) is not. */
	run_window(f, 1, 1.5, 9.0, NAN, reason, sizeof(reason));
	assert_true(f->state.level[0] == 1 && f->state.level[2] == 1);
	assert_non_null(strstr(reason, "0 high, 2 low; seen 2 windows"));
}

static void
test_plugin_relative_path_is_taken_from_the_yaml_directory(void **state)
{
	fixture *f = *state;
	char cwd[PATH_MAX];

	assert_int_equal(mkdir(f->sub, 0700), 0);
	assert_int_equal(symlink(f->threshold, f->link), 0);
	/* The working directory is elsewhere: only the YAML file's
	 * directory can make "lib/libthreshold.so" resolve. */
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_true(strncmp(cwd, f->dir, strlen(f->dir)) != 0);
	assert_int_equal(load_with(f, "threshold", "lib/libthreshold.so",
			     &f->cfg),
	    0);
	/* Identified by its canonical path: the link's target. */
	assert_string_equal(ctl_plugin_path(f->cfg->jobs[0].policies[0].plugin),
	    f->threshold);
}

static void
test_plugin_missing_file_is_a_config_error(void **state)
{
	fixture *f = *state;
	char prefix[512];

	assert_int_equal(load_with(f, "threshold", "nowhere/libx.so", &f->cfg),
	    BELLOWS_ECONFIG);
	assert_null(f->cfg);
	snprintf(prefix, sizeof(prefix),
	    "%s:5:17: plugin '%s/nowhere/libx.so': No such file", f->path,
	    f->dir);
	if (strncmp(f->err, prefix, strlen(prefix)) != 0)
		fail_msg("expected '%s...', got '%s'", prefix, f->err);
}

static void
test_plugin_that_is_not_a_shared_object_is_a_config_error(void **state)
{
	fixture *f = *state;
	char prefix[512];

	write_file(f->other, "jobs: []\n");
	assert_int_equal(load_with(f, "threshold", f->other, &f->cfg),
	    BELLOWS_ECONFIG);
	snprintf(prefix, sizeof(prefix),
	    "%s:5:17: plugin '%s' cannot be loaded: ", f->path, f->other);
	if (strncmp(f->err, prefix, strlen(prefix)) != 0)
		fail_msg("expected '%s...', got '%s'", prefix, f->err);
}

/* ---- refusing ---------------------------------------------------------- */

static void
test_plugin_of_another_abi_version_is_refused(void **state)
{
	char want[128];

	/* broken_plugin.c's abi build says BELLOWS_POLICY_ABI + 97. */
	snprintf(want, sizeof(want),
	    "refused: policy ABI version %d, this bellowsd speaks %d",
	    BELLOWS_POLICY_ABI + 97, BELLOWS_POLICY_ABI);
	assert_plugin_refused(*state, BROKEN_SO("abi"), want);
}

static void
test_plugin_built_for_abi_1_is_refused_and_told_to_rebuild(void **state)
{
	char want[160];

	snprintf(want, sizeof(want),
	    "refused: policy ABI version 1, this bellowsd speaks %d: rebuild "
	    "the policy against this bellows' <bellows/policy.h>",
	    BELLOWS_POLICY_ABI);
	assert_plugin_refused(*state, BROKEN_SO("abi1"), want);
}

static void
test_plugin_without_on_window_is_refused(void **state)
{
	assert_plugin_refused(*state, BROKEN_SO("no_on_window"),
	    "refused: policy 'broken' lacks init or on_window");
}

static void
test_plugin_without_the_entry_symbol_is_refused(void **state)
{
	assert_plugin_refused(*state, BROKEN_SO("no_entry"),
	    "does not export 'bellows_policy_entry'");
}

static void
test_plugin_whose_entry_returns_no_ops_is_refused(void **state)
{
	assert_plugin_refused(*state, BROKEN_SO("null_ops"),
	    "bellows_policy_entry() returned no policy");
}

static void
test_plugin_providing_another_type_than_the_yaml_is_refused(void **state)
{
	fixture *f = *state;
	char expected[2 * PATH_MAX];

	assert_int_equal(load_with(f, "thresh", f->threshold, &f->cfg),
	    BELLOWS_ECONFIG);
	snprintf(expected, sizeof(expected),
	    "%s:4:15: plugin '%s' provides policy type 'threshold', not "
	    "'thresh'",
	    f->path, f->threshold);
	assert_string_equal(f->err, expected);
}

static void
test_plugin_refused_is_closed_again(void **state)
{
	fixture *f = *state;
	char so[PATH_MAX];

	plugin_path(so, sizeof(so), BROKEN_SO("abi"));
	assert_false(is_loaded(so));
	assert_int_equal(load_with(f, "broken", so, &f->cfg), BELLOWS_ECONFIG);
	assert_false(is_loaded(so));
}

static void
test_plugin_open_leaves_the_output_untouched_on_failure(void **state)
{
	fixture *f = *state;
	ctl_plugin *p = (ctl_plugin *)f; /* any non-NULL marker */
	char so[PATH_MAX];

	plugin_path(so, sizeof(so), BROKEN_SO("no_on_window"));
	assert_int_equal(ctl_plugin_open(so, &p, f->err, sizeof(f->err)),
	    BELLOWS_EINVAL);
	assert_ptr_equal(p, f);
	assert_int_equal(ctl_plugin_open(f->dir, &p, f->err, sizeof(f->err)),
	    BELLOWS_EIO);
	assert_ptr_equal(p, f);
}

/* ---- references -------------------------------------------------------- */

static void
test_plugin_stays_loaded_while_any_configuration_holds_it(void **state)
{
	fixture *f = *state;

	assert_false(is_loaded(f->threshold));
	assert_int_equal(load_with(f, "threshold", f->threshold, &f->cfg), 0);
	assert_int_equal(load_with(f, "threshold", f->threshold, &f->cfg2), 0);
	assert_true(is_loaded(f->threshold));
	/* The ops of both come from the one mapped object. */
	assert_ptr_equal(f->cfg->jobs[0].policies[0].ops,
	    f->cfg2->jobs[0].policies[0].ops);
	assert_true(ctl_policy_conf_same_instance(&f->cfg->jobs[0].policies[0],
	    &f->cfg2->jobs[0].policies[0]));

	ctl_config_destroy(&f->cfg);
	assert_true(is_loaded(f->threshold));
	/* The survivor still runs. */
	f->cfg = f->cfg2;
	f->cfg2 = NULL;
	start_set(f);
	ctl_policy_set_destroy(&f->set);
	ctl_config_destroy(&f->cfg);
	assert_false(is_loaded(f->threshold));
}

static void
test_plugin_named_twice_in_a_file_is_loaded_once(void **state)
{
	fixture *f = *state;
	char text[2 * PATH_MAX + 512];
	ctl_plugin *p;

	snprintf(text, sizeof(text),
	    "jobs:\n"
	    "  - match: \"a*\"\n"
	    "    policies:\n"
	    "      - {type: threshold, plugin: %s, params: {threshold: 1}}\n"
	    "  - match: \"*\"\n"
	    "    policies:\n"
	    "      - {type: threshold, plugin: %s, params: {threshold: 2}}\n",
	    f->threshold, f->threshold);
	write_file(f->path, text);
	assert_int_equal(ctl_config_load(f->path, &f->cfg, f->err,
			     sizeof(f->err)),
	    0);
	p = f->cfg->jobs[0].policies[0].plugin;
	assert_non_null(p);
	assert_ptr_equal(p, f->cfg->jobs[1].policies[0].plugin);
	assert_true(is_loaded(f->threshold));
	ctl_config_destroy(&f->cfg);
	assert_false(is_loaded(f->threshold));
}

static void
test_plugin_is_printed_and_reads_back(void **state)
{
	fixture *f = *state;
	FILE *out;

	assert_int_equal(load_with(f, "threshold", f->threshold, &f->cfg), 0);
	out = fopen(f->other, "w");
	assert_non_null(out);
	assert_int_equal(ctl_config_print(f->cfg, out), 0);
	assert_int_equal(fclose(out), 0);
	assert_int_equal(ctl_config_load(f->other, &f->cfg2, f->err,
			     sizeof(f->err)),
	    0);
	assert_string_equal(ctl_plugin_path(
				f->cfg2->jobs[0].policies[0].plugin),
	    f->threshold);
	assert_true(ctl_policy_conf_same_instance(&f->cfg->jobs[0].policies[0],
	    &f->cfg2->jobs[0].policies[0]));
	assert_memory_equal(f->cfg->jobs[0].policies[0].config,
	    f->cfg2->jobs[0].policies[0].config,
	    f->cfg->jobs[0].policies[0].ops->config_size);
}

static void
test_plugin_close_is_null_safe(void **state)
{
	ctl_plugin *p = NULL;

	ctl_plugin_close(NULL);
	ctl_plugin_close(&p);
	assert_null(p);
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_plugin_threshold_example_loads_and_decides),
		T(test_plugin_relative_path_is_taken_from_the_yaml_directory),
		T(test_plugin_missing_file_is_a_config_error),
		T(test_plugin_that_is_not_a_shared_object_is_a_config_error),
		T(test_plugin_of_another_abi_version_is_refused),
		T(test_plugin_built_for_abi_1_is_refused_and_told_to_rebuild),
		T(test_plugin_without_on_window_is_refused),
		T(test_plugin_without_the_entry_symbol_is_refused),
		T(test_plugin_whose_entry_returns_no_ops_is_refused),
		T(test_plugin_providing_another_type_than_the_yaml_is_refused),
		T(test_plugin_refused_is_closed_again),
		T(test_plugin_open_leaves_the_output_untouched_on_failure),
		T(test_plugin_stays_loaded_while_any_configuration_holds_it),
		T(test_plugin_named_twice_in_a_file_is_loaded_once),
		T(test_plugin_is_printed_and_reads_back),
		T(test_plugin_close_is_null_safe),
		T(test_plugin_decides_in_a_worker_as_it_does_in_process),
		T(test_plugin_worker_has_its_address_space_capped),
		T(test_plugin_that_segfaults_costs_one_window_and_its_worker_restarts),
		T(test_plugin_that_aborts_costs_one_window_and_its_worker_restarts),
		T(test_plugin_that_hangs_is_killed_at_its_deadline),
		T(test_plugin_whose_init_crashes_leaves_the_job_to_its_built_ins),
		T(test_plugin_check_runs_in_a_child_and_its_crash_is_a_config_error),
		T(test_plugin_wire_refuses_a_short_or_mismatched_proposal),
		T(test_plugin_wire_carries_the_layers_array_statistics),
		T(test_plugin_whose_entry_crashes_is_refused_without_crashing_the_loader),
	};
#undef T
	return cmocka_run_group_tests_name("plugin", tests, NULL, NULL);
}
