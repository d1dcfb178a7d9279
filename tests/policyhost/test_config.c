/* test_config - bellowsd's YAML configuration, read from real files.
 *
 * Every file is written to a private temporary directory and loaded with
 * ctl_config_load, as the daemon does. Invalid files must fail with
 * BELLOWS_ECONFIG and a message that starts with the exact
 * "FILE:LINE:COLUMN: " of the offending node, so the positions below are
 * counted by hand from the texts.
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

#include <fnmatch.h>

#include <bellows/agent.h>
#include <bellows/error.h>

#include "policyhost/config.h"
#include "policies/registry.h"

typedef struct fixture {
	char dir[64];                 /* private temporary directory */
	char path[128];               /* dir/bellows.yaml */
	char out[128];                /* dir/printed.yaml */
	char err[CTL_CONFIG_ERR_MAX]; /* last error text */
	ctl_config *cfg;              /* last configuration loaded */
} fixture;

static int
setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/bellows-config-XXXXXX");
	if (mkdtemp(f->dir) == NULL) {
		free(f);
		return -1;
	}
	snprintf(f->path, sizeof(f->path), "%s/bellows.yaml", f->dir);
	snprintf(f->out, sizeof(f->out), "%s/printed.yaml", f->dir);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	fixture *f = *state;

	ctl_config_destroy(&f->cfg);
	unlink(f->path);
	unlink(f->out);
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

/* Writes `text` as the configuration file and loads it. */
static int
load(fixture *f, const char *text)
{
	ctl_config_destroy(&f->cfg);
	write_file(f->path, text);
	f->err[0] = '\0';
	return ctl_config_load(f->path, &f->cfg, f->err, sizeof(f->err));
}

/* Loads `text`, which must be refused at line:column with a message
 * containing `what`. */
static void
assert_refused_at(fixture *f, const char *text, int line, int column,
    const char *what)
{
	char prefix[256];

	assert_int_equal(load(f, text), BELLOWS_ECONFIG);
	assert_null(f->cfg);
	snprintf(prefix, sizeof(prefix), "%s:%d:%d: ", f->path, line, column);
	if (strncmp(f->err, prefix, strlen(prefix)) != 0)
		fail_msg("expected '%s...', got '%s'", prefix, f->err);
	if (strstr(f->err, what) == NULL)
		fail_msg("expected '%s' in '%s'", what, f->err);
}

static double
param_double(const ctl_policy_conf *pc, const char *name)
{
	for (const bellows_param *p = pc->ops->params; p->name != NULL; p++) {
		if (strcmp(p->name, name) == 0) {
			double v;

			memcpy(&v, (const char *)pc->config + p->offset,
			    sizeof(v));
			return v;
		}
	}
	fail_msg("no parameter '%s'", name);
	return 0;
}

static const bellows_steps *
param_steps(const ctl_policy_conf *pc, const char *name)
{
	for (const bellows_param *p = pc->ops->params; p->name != NULL; p++) {
		if (strcmp(p->name, name) == 0)
			return (
			    const bellows_steps *)((const char *)pc->config +
			    p->offset);
	}
	fail_msg("no parameter '%s'", name);
	return NULL;
}

static const char full_file[] = "# every section of a bellowsd configuration\n"
				"daemon:\n"
				"  control: ipc:///tmp/bellows-test/control\n"
				"  publish: \"tcp://127.0.0.1:7001\"\n"
				"  apply_lag: 3\n"
				"  window_timeout_ms: 2500\n"
				"  rank_timeout_ms: 4000\n"
				"  heartbeat_ms: 250\n"
				"  repair_margin: 5\n"
				"  max_jobs: 7\n"
				"  max_world: 64\n"
				"  max_layers: 1000\n"
				"  job_idle_ms: 60000\n"
				"  max_job_mb: 64\n"
				"  max_total_job_mb: 512\n"
				"  peer_queue_mb: 4\n"
				"jobs:\n"
				"  - match: \"resnet*\"\n"
				"    policies:\n"
				"      - type: schedule\n"
				"        name: warmup\n"
				"        layers:\n"
				"          match: \"^conv[0-9]+\\\\.weight$\"\n"
				"          min_numel: 1000\n"
				"          min_ndim: 3\n"
				"        params:\n"
				"          levels: {0: 4, 10: 2, 20: 1.5}\n"
				"  - policies:\n"
				"      - type: fixed\n"
				"        params:\n"
				"          level: 2\n"
				"    all_stats: true\n";

static void
test_config_loads_a_full_valid_file(void **state)
{
	fixture *f = *state;
	const ctl_job_conf *jc;
	const ctl_policy_conf *pc;
	const bellows_steps *st;

	assert_int_equal(load(f, full_file), 0);
	assert_non_null(f->cfg);
	assert_string_equal(f->cfg->path, f->path);
	assert_int_equal(f->cfg->text_len, strlen(full_file));
	assert_string_equal(f->cfg->text, full_file);
	assert_string_equal(f->cfg->control, "ipc:///tmp/bellows-test/control");
	assert_string_equal(f->cfg->publish, "tcp://127.0.0.1:7001");
	assert_int_equal(f->cfg->apply_lag, 3);
	assert_int_equal(f->cfg->window_timeout_ms, 2500);
	assert_int_equal(f->cfg->rank_timeout_ms, 4000);
	assert_int_equal(f->cfg->heartbeat_ms, 250);
	assert_int_equal(f->cfg->repair_margin, 5);
	assert_int_equal(f->cfg->max_jobs, 7);
	assert_int_equal(f->cfg->max_world, 64);
	assert_int_equal(f->cfg->max_layers, 1000);
	assert_int_equal(f->cfg->job_idle_ms, 60000);
	assert_int_equal(f->cfg->max_job_mb, 64);
	assert_int_equal(f->cfg->max_total_job_mb, 512);
	assert_int_equal(f->cfg->peer_queue_mb, 4);
	assert_int_equal(f->cfg->n_jobs, 2);

	jc = &f->cfg->jobs[0];
	assert_string_equal(jc->match, "resnet*");
	assert_false(jc->all_stats);
	assert_int_equal(jc->n_policies, 1);
	pc = &jc->policies[0];
	assert_string_equal(pc->name, "warmup");
	assert_ptr_equal(pc->ops, pol_registry_find("schedule"));
	assert_int_equal(pc->line, 20);
	assert_true(pc->selector.has_regex);
	assert_string_equal(pc->selector.regex_src, "^conv[0-9]+\\.weight$");
	assert_int_equal(pc->selector.min_numel, 1000);
	assert_int_equal(pc->selector.min_ndim, 3);
	st = param_steps(pc, "levels");
	assert_int_equal(st->n, 3);
	assert_int_equal(st->from[0], 0);
	assert_int_equal(st->from[1], 10);
	assert_int_equal(st->from[2], 20);
	assert_true(st->value[0] == 4.0);
	assert_true(st->value[1] == 2.0);
	assert_true(st->value[2] == 1.5);

	/* A job entry without match takes every job; a policy without a
	 * name is named after its type; selectors default to 2-D and up. */
	jc = &f->cfg->jobs[1];
	assert_string_equal(jc->match, "*");
	assert_true(jc->all_stats);
	assert_int_equal(jc->n_policies, 1);
	pc = &jc->policies[0];
	assert_string_equal(pc->name, "fixed");
	assert_ptr_equal(pc->ops, pol_registry_find("fixed"));
	assert_false(pc->selector.has_regex);
	assert_int_equal(pc->selector.min_numel, 0);
	assert_int_equal(pc->selector.min_ndim, 2);
	assert_true(param_double(pc, "level") == 2.0);
}

static void
test_config_fills_daemon_defaults(void **state)
{
	fixture *f = *state;

	assert_int_equal(load(f, "jobs:\n  - policies:\n      - type: fixed\n"),
	    0);
	assert_null(f->cfg->control);
	assert_null(f->cfg->publish);
	assert_int_equal(f->cfg->apply_lag, 1);
	assert_int_equal(f->cfg->window_timeout_ms, 3000);
	assert_int_equal(f->cfg->rank_timeout_ms, 10000);
	assert_int_equal(f->cfg->heartbeat_ms, 1000);
	assert_int_equal(f->cfg->repair_margin, 2);
	assert_int_equal(f->cfg->max_jobs, 256);
	assert_int_equal(f->cfg->max_world, 16384);
	assert_int_equal(f->cfg->max_layers, 65536);
	assert_int_equal(f->cfg->job_idle_ms, 600000);
	assert_int_equal(f->cfg->plugin_timeout_ms, 1000);
	assert_int_equal(f->cfg->plugin_memory_mb, 1024);
	assert_int_equal(f->cfg->max_job_mb, 1024);
	assert_int_equal(f->cfg->max_total_job_mb, 4096);
	assert_int_equal(f->cfg->peer_queue_mb, 16);
	assert_true(param_double(&f->cfg->jobs[0].policies[0], "level") == 0);
}

static void
test_config_reads_the_plugin_worker_settings(void **state)
{
	fixture *f = *state;

	assert_int_equal(load(f,
			     "daemon:\n"
			     "  plugin_timeout_ms: 250\n"
			     "  plugin_memory_mb: 512\n"
			     "jobs:\n"
			     "  - policies:\n"
			     "      - type: fixed\n"),
	    0);
	assert_int_equal(f->cfg->plugin_timeout_ms, 250);
	assert_int_equal(f->cfg->plugin_memory_mb, 512);
}

static void
test_config_refuses_an_unknown_top_level_key(void **state)
{
	assert_refused_at(*state,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: fixed\n"
	    "deamon:\n"
	    "  apply_lag: 1\n",
	    4, 1, "unknown top-level key 'deamon'");
}

static void
test_config_refuses_an_unknown_daemon_key(void **state)
{
	assert_refused_at(*state,
	    "daemon:\n"
	    "  apply_lag: 1\n"
	    "  window_timeout: 5\n"
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: fixed\n",
	    3, 3,
	    "unknown key 'window_timeout' in daemon (did you mean "
	    "'window_timeout_ms'?)");
}

static void
test_config_lists_the_daemon_keys_when_none_is_near(void **state)
{
	assert_refused_at(*state,
	    "daemon:\n"
	    "  colour: 5\n"
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: fixed\n",
	    2, 3, "unknown key 'colour' in daemon (expected control, publish,");
}

static void
test_config_accepts_every_daemon_key_it_lists(void **state)
{
	fixture *f = *state;

	/* Every key the refusal above lists, with a valid value; security
	 * needs key files and metrics (the section) names the address
	 * metrics_listen gives: their own tests below cover them. */
	if (load(f,
		"daemon:\n"
		"  control: tcp://127.0.0.1:5555\n"
		"  publish: tcp://127.0.0.1:5556\n"
		"  apply_lag: 1\n"
		"  window_timeout_ms: 1000\n"
		"  rank_timeout_ms: 1000\n"
		"  heartbeat_ms: 100\n"
		"  repair_margin: 1\n"
		"  max_jobs: 4\n"
		"  max_world: 8\n"
		"  max_layers: 100\n"
		"  job_idle_ms: 10000\n"
		"  reload_timeout_ms: 1000\n"
		"  plugin_timeout_ms: 100\n"
		"  plugin_memory_mb: 128\n"
		"  max_job_mb: 64\n"
		"  max_total_job_mb: 128\n"
		"  peer_queue_mb: 4\n"
		"  allow_insecure: true\n"
		"  metrics_listen: 127.0.0.1:9464\n"
		"jobs:\n"
		"  - policies:\n"
		"      - type: fixed\n") != 0)
		fail_msg("refused: %s", f->err);
}

static void
test_config_refuses_a_value_of_the_wrong_type(void **state)
{
	fixture *f = *state;

	assert_refused_at(f,
	    "daemon:\n"
	    "  apply_lag: [1, 2]\n"
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: fixed\n",
	    2, 14, "apply_lag must be an integer");
	assert_refused_at(f,
	    "daemon:\n"
	    "  max_jobs: many\n"
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: fixed\n",
	    2, 13, "max_jobs must be an integer, not 'many'");
	assert_refused_at(f, "jobs: {a: 1}\n", 1, 7,
	    "jobs must be a list, not a mapping");
	assert_refused_at(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: fixed\n"
	    "        params:\n"
	    "          level: high\n",
	    5, 18, "level must be a number, not 'high'");
}

static void
test_config_refuses_an_out_of_range_value(void **state)
{
	fixture *f = *state;

	assert_refused_at(f,
	    "daemon:\n"
	    "  heartbeat_ms: 5\n"
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: fixed\n",
	    2, 17, "heartbeat_ms must be in [10, 3600000], not 5");
	assert_refused_at(f,
	    "daemon:\n"
	    "  plugin_timeout_ms: 0\n"
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: fixed\n",
	    2, 22, "plugin_timeout_ms must be in [10, 600000], not 0");
	assert_refused_at(f,
	    "daemon:\n"
	    "  plugin_memory_mb: 16\n"
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: fixed\n",
	    2, 21, "plugin_memory_mb must be in [64, 1048576], not 16");
	assert_refused_at(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: fixed\n"
	    "        params: {level: -1}\n",
	    4, 25, "level must be in [0, 1e+09], not -1");
}

static void
test_config_refuses_an_unknown_policy_type(void **state)
{
	assert_refused_at(*state,
	    "jobs:\n"
	    "  - match: \"*\"\n"
	    "    policies:\n"
	    "      - type: accordionx\n",
	    4, 15,
	    "unknown policy type 'accordionx'; did you mean 'accordion'?");
}

static void
test_config_suggests_nothing_for_a_distant_policy_type(void **state)
{
	assert_refused_at(*state,
	    "jobs:\n"
	    "  - match: \"*\"\n"
	    "    policies:\n"
	    "      - type: frobnicator\n",
	    4, 15,
	    "unknown policy type 'frobnicator' (a plug-in's type needs "
	    "'plugin: FILE')");
}

static void
test_config_refuses_an_unknown_parameter(void **state)
{
	assert_refused_at(*state,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: fixed\n"
	    "        params:\n"
	    "          lvl: 2\n",
	    5, 11, "policy type 'fixed' has no parameter 'lvl'");
}

static void
test_config_refuses_a_missing_required_parameter(void **state)
{
	fixture *f = *state;

	/* At the params mapping when there is one... */
	assert_refused_at(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: schedule\n"
	    "        params: {}\n",
	    4, 17,
	    "policy 'schedule' (type 'schedule') needs parameter "
	    "'levels'");
	/* ...else at the policy itself. */
	assert_refused_at(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - name: late\n"
	    "        type: schedule\n",
	    3, 9, "policy 'late' (type 'schedule') needs parameter 'levels'");
}

static void
test_config_refuses_a_duplicate_key(void **state)
{
	fixture *f = *state;

	assert_refused_at(f,
	    "daemon:\n"
	    "  apply_lag: 1\n"
	    "  heartbeat_ms: 100\n"
	    "  apply_lag: 2\n"
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: fixed\n",
	    4, 3, "key 'apply_lag' appears twice");
	assert_refused_at(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: fixed\n"
	    "        type: schedule\n",
	    4, 9, "key 'type' appears twice");
}

static void
test_config_refuses_a_bad_regex(void **state)
{
	assert_refused_at(*state,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: fixed\n"
	    "        layers:\n"
	    "          match: \"conv([\"\n",
	    5, 18, "match is not a valid regular expression");
}

static void
test_config_refuses_non_increasing_schedule_windows(void **state)
{
	fixture *f = *state;

	assert_refused_at(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: schedule\n"
	    "        params:\n"
	    "          levels: {0: 2, 10: 1, 5: 3}\n",
	    5, 33, "levels: window 5 does not follow 10");
	assert_refused_at(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: schedule\n"
	    "        params:\n"
	    "          levels:\n"
	    "            0: 2\n"
	    "            0: 1\n",
	    7, 13, "levels: window 0 does not follow 0");
}

static void
test_config_refuses_two_policies_owning_one_knob(void **state)
{
	assert_refused_at(*state,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: fixed\n"
	    "      - type: schedule\n"
	    "        params:\n"
	    "          levels: {0: 1}\n",
	    4, 9,
	    "policy 'schedule' and policy 'fixed' both own the knob 'level'");
}

static void
test_config_refuses_empty_jobs(void **state)
{
	fixture *f = *state;

	assert_refused_at(f,
	    "daemon:\n"
	    "  apply_lag: 2\n"
	    "jobs: []\n",
	    3, 7, "jobs must not be empty");
	assert_refused_at(f,
	    "jobs:\n"
	    "  - match: x\n"
	    "    policies: []\n",
	    3, 15, "policies must not be empty");
	assert_refused_at(f, "daemon:\n  apply_lag: 2\n", 1, 1,
	    "the file needs a 'jobs' list");
}

static void
test_config_refuses_invalid_yaml_syntax(void **state)
{
	fixture *f = *state;

	/* A tab cannot start a token. */
	assert_refused_at(f,
	    "daemon:\n"
	    "\tapply_lag: 1\n",
	    2, 1, "found character that cannot start any token");
	assert_refused_at(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: fixed\n"
	    "    - oops\n",
	    4, 5, "did not find expected key");
}

static void
test_config_refuses_an_empty_file(void **state)
{
	fixture *f = *state;

	assert_refused_at(f, "", 1, 1, "the file is empty");
	assert_refused_at(f, "# nothing but a comment\n", 1, 1,
	    "the file is empty");
}

static void
test_config_reports_a_missing_file_as_io_error(void **state)
{
	fixture *f = *state;
	char path[192];

	snprintf(path, sizeof(path), "%s/absent.yaml", f->dir);
	assert_int_equal(ctl_config_load(path, &f->cfg, f->err, sizeof(f->err)),
	    BELLOWS_EIO);
	assert_null(f->cfg);
	assert_non_null(strstr(f->err, path));
}

static void
test_config_parses_text_from_memory_with_its_name(void **state)
{
	static const char text[] = "jobs:\n  - policies: 7\n";
	ctl_config *cfg = NULL;
	char err[CTL_CONFIG_ERR_MAX];

	(void)state;
	assert_int_equal(ctl_config_parse(text, strlen(text), "<string>", &cfg,
			     err, sizeof(err)),
	    BELLOWS_ECONFIG);
	assert_null(cfg);
	assert_string_equal(err,
	    "<string>:2:15: policies must be a list, not a scalar");
}

static void
test_config_match_takes_the_first_matching_glob(void **state)
{
	fixture *f = *state;

	assert_int_equal(
	    load(f,
		"jobs:\n"
		"  - match: \"resnet-*\"\n"
		"    policies: [{type: fixed, params: {level: 1}}]\n"
		"  - match: \"resnet*\"\n"
		"    policies: [{type: fixed, params: {level: 2}}]\n"
		"  - match: \"bert-[0-9]\"\n"
		"    policies: [{type: fixed, params: {level: 3}}]\n"),
	    0);
	assert_ptr_equal(ctl_config_match(f->cfg, "resnet-50"),
	    &f->cfg->jobs[0]);
	assert_ptr_equal(ctl_config_match(f->cfg, "resnet50"),
	    &f->cfg->jobs[1]);
	assert_ptr_equal(ctl_config_match(f->cfg, "bert-4"), &f->cfg->jobs[2]);
	assert_null(ctl_config_match(f->cfg, "bert-large"));
	assert_null(ctl_config_match(f->cfg, "vgg"));
}

static void
test_selector_matches_by_rank_size_and_name(void **state)
{
	fixture *f = *state;
	const ctl_selector *def, *big, *conv;

	assert_int_equal(
	    load(f,
		"jobs:\n"
		"  - match: a\n"
		"    policies: [{type: fixed}]\n"
		"  - match: b\n"
		"    policies:\n"
		"      - type: fixed\n"
		"        layers: {min_numel: 1000}\n"
		"  - match: c\n"
		"    policies:\n"
		"      - type: fixed\n"
		"        layers: {match: \"^conv\", min_ndim: 0}\n"),
	    0);
	def = &f->cfg->jobs[0].policies[0].selector;
	big = &f->cfg->jobs[1].policies[0].selector;
	conv = &f->cfg->jobs[2].policies[0].selector;

	/* By default, 1-D tensors (biases, norms) stay raw. */
	assert_false(ctl_selector_matches(def, "fc.bias", 10, 1));
	assert_true(ctl_selector_matches(def, "fc.weight", 100, 2));
	assert_true(ctl_selector_matches(def, "conv.weight", 1, 4));

	assert_false(ctl_selector_matches(big, "fc.weight", 999, 2));
	assert_true(ctl_selector_matches(big, "fc.weight", 1000, 2));
	assert_false(ctl_selector_matches(big, "fc.bias", 5000, 1));

	assert_true(ctl_selector_matches(conv, "conv1.weight", 10, 4));
	assert_true(ctl_selector_matches(conv, "conv1.bias", 10, 1));
	assert_false(ctl_selector_matches(conv, "fc.weight", 10, 2));
	assert_false(ctl_selector_matches(conv, "layer.conv1", 10, 2));
}

static void
assert_same_config(const ctl_config *a, const ctl_config *b)
{
	if (a->control == NULL)
		assert_null(b->control);
	else
		assert_string_equal(a->control, b->control);
	if (a->publish == NULL)
		assert_null(b->publish);
	else
		assert_string_equal(a->publish, b->publish);
	assert_int_equal(a->apply_lag, b->apply_lag);
	assert_int_equal(a->window_timeout_ms, b->window_timeout_ms);
	assert_int_equal(a->rank_timeout_ms, b->rank_timeout_ms);
	assert_int_equal(a->heartbeat_ms, b->heartbeat_ms);
	assert_int_equal(a->repair_margin, b->repair_margin);
	assert_int_equal(a->max_jobs, b->max_jobs);
	assert_int_equal(a->max_world, b->max_world);
	assert_int_equal(a->max_layers, b->max_layers);
	assert_int_equal(a->job_idle_ms, b->job_idle_ms);
	assert_int_equal(a->max_job_mb, b->max_job_mb);
	assert_int_equal(a->max_total_job_mb, b->max_total_job_mb);
	assert_int_equal(a->peer_queue_mb, b->peer_queue_mb);
	assert_int_equal(a->n_jobs, b->n_jobs);
	for (uint32_t i = 0; i < a->n_jobs; i++) {
		const ctl_job_conf *ja = &a->jobs[i], *jb = &b->jobs[i];

		assert_string_equal(ja->match, jb->match);
		assert_int_equal(ja->all_stats, jb->all_stats);
		assert_int_equal(ja->n_policies, jb->n_policies);
		for (uint32_t k = 0; k < ja->n_policies; k++) {
			const ctl_policy_conf *pa = &ja->policies[k];
			const ctl_policy_conf *pb = &jb->policies[k];

			assert_string_equal(pa->name, pb->name);
			assert_ptr_equal(pa->ops, pb->ops);
			assert_int_equal(pa->selector.has_regex,
			    pb->selector.has_regex);
			if (pa->selector.has_regex)
				assert_string_equal(pa->selector.regex_src,
				    pb->selector.regex_src);
			assert_int_equal(pa->selector.min_numel,
			    pb->selector.min_numel);
			assert_int_equal(pa->selector.min_ndim,
			    pb->selector.min_ndim);
			assert_memory_equal(pa->config, pb->config,
			    pa->ops->config_size);
		}
	}
}

/* Prints cfg to a file and loads that file back. */
static ctl_config *
print_and_reload(fixture *f, const ctl_config *cfg)
{
	ctl_config *again = NULL;
	FILE *fp = fopen(f->out, "w");

	assert_non_null(fp);
	assert_int_equal(ctl_config_print(cfg, fp), 0);
	assert_int_equal(fclose(fp), 0);
	if (ctl_config_load(f->out, &again, f->err, sizeof(f->err)) != 0)
		fail_msg("printed configuration does not load: %s", f->err);
	return again;
}

static void
test_config_print_round_trips_every_value(void **state)
{
	fixture *f = *state;
	ctl_config *again;

	assert_int_equal(load(f, full_file), 0);
	again = print_and_reload(f, f->cfg);
	assert_same_config(f->cfg, again);
	ctl_config_destroy(&again);
	assert_null(again);
}

static void
test_config_print_round_trips_defaults_and_awkward_strings(void **state)
{
	fixture *f = *state;
	ctl_config *again;

	/* Quotes, backslashes and YAML indicators in strings; no endpoint
	 * in the file (they come from the command line then). */
	assert_int_equal(load(f,
			     "jobs:\n"
			     "  - match: \"team \\\"a\\\": *\"\n"
			     "    policies:\n"
			     "      - type: schedule\n"
			     "        name: \"# not a comment\"\n"
			     "        layers:\n"
			     "          match: \"^a\\\\.\\\"b\\\"$\"\n"
			     "        params:\n"
			     "          levels: {0: 0.1, 7: 3}\n"),
	    0);
	assert_string_equal(f->cfg->jobs[0].match, "team \"a\": *");
	assert_string_equal(f->cfg->jobs[0].policies[0].name,
	    "# not a comment");
	assert_string_equal(f->cfg->jobs[0].policies[0].selector.regex_src,
	    "^a\\.\"b\"$");
	again = print_and_reload(f, f->cfg);
	assert_same_config(f->cfg, again);
	ctl_config_destroy(&again);
}

static void
test_config_warns_of_a_window_timeout_the_agents_do_not_wait_out(void **state)
{
	fixture *f = *state;
	bellows_agent_config agent;
	char why[CTL_CONFIG_ERR_MAX] = "untouched";
	char text[160];

	/* The rule is stated against the agent's real default. */
	bellows_agent_config_init(&agent);
	assert_int_equal(agent.decision_timeout_ms, CTL_CONFIG_AGENT_WAIT_MS);

	/* The default, and the largest value within the margin, are safe. */
	assert_int_equal(load(f, "jobs:\n  - policies:\n      - type: fixed\n"),
	    0);
	assert_true(f->cfg->window_timeout_ms + CTL_CONFIG_DECIDE_MARGIN_MS <=
	    agent.decision_timeout_ms);
	assert_false(ctl_config_timing_warning(f->cfg, why, sizeof(why)));
	assert_string_equal(why, "untouched");
	ctl_config_destroy(&f->cfg);
	snprintf(text, sizeof(text),
	    "daemon:\n  window_timeout_ms: %u\n"
	    "jobs:\n  - policies:\n      - type: fixed\n",
	    CTL_CONFIG_AGENT_WAIT_MS - CTL_CONFIG_DECIDE_MARGIN_MS);
	assert_int_equal(load(f, text), 0);
	assert_false(ctl_config_timing_warning(f->cfg, why, sizeof(why)));
	ctl_config_destroy(&f->cfg);

	/* One more millisecond, or the old default of 10 s, is not. */
	snprintf(text, sizeof(text),
	    "daemon:\n  window_timeout_ms: %u\n"
	    "jobs:\n  - policies:\n      - type: fixed\n",
	    CTL_CONFIG_AGENT_WAIT_MS - CTL_CONFIG_DECIDE_MARGIN_MS + 1);
	assert_int_equal(load(f, text), 0);
	assert_true(ctl_config_timing_warning(f->cfg, why, sizeof(why)));
	assert_non_null(strstr(why, "window_timeout_ms 4001 is above 4000"));
	assert_non_null(strstr(why, "decision_timeout_ms (5000)"));
	ctl_config_destroy(&f->cfg);
	assert_int_equal(load(f,
			     "daemon:\n  window_timeout_ms: 10000\n"
			     "jobs:\n  - policies:\n      - type: fixed\n"),
	    0);
	assert_true(ctl_config_timing_warning(f->cfg, why, sizeof(why)));
	assert_non_null(strstr(why, "window_timeout_ms 10000"));
}

static void
test_config_destroy_is_null_safe(void **state)
{
	ctl_config *cfg = NULL;

	(void)state;
	ctl_config_destroy(NULL);
	ctl_config_destroy(&cfg);
	assert_null(cfg);
}

static void
test_config_reports_every_error_with_its_position(void **state)
{
	fixture *f = *state;
	ctl_config_errors *errs = malloc(sizeof(*errs));
	char want[3][256];

	assert_non_null(errs);
	/* An unknown key, a value out of range and a knob conflict, in
	 * three different sections: each is found after the one before. */
	write_file(f->path,
	    "daemon:\n"
	    "  apply_lagg: 3\n"
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: accordion\n"
	    "        params: {eta: -1}\n"
	    "      - type: fixed\n"
	    "        params: {level: 2}\n");
	assert_int_equal(ctl_config_load_all(f->path, &f->cfg, errs),
	    BELLOWS_ECONFIG);
	assert_null(f->cfg);
	snprintf(want[0], sizeof(want[0]), "%s:2:3: unknown key 'apply_lagg'",
	    f->path);
	snprintf(want[1], sizeof(want[1]), "%s:6:23: eta must be in [",
	    f->path);
	snprintf(want[2], sizeof(want[2]),
	    "%s:7:9: policy 'fixed' and policy 'accordion' both own the "
	    "knob 'level'",
	    f->path);
	assert_int_equal(errs->n, 3);
	for (uint32_t i = 0; i < 3; i++) {
		if (strncmp(errs->msg[i], want[i], strlen(want[i])) != 0)
			fail_msg("error %u: expected '%s...', got '%s'", i,
			    want[i], errs->msg[i]);
	}

	/* ctl_config_load still reports the first. */
	assert_int_equal(ctl_config_load(f->path, &f->cfg, f->err,
			     sizeof(f->err)),
	    BELLOWS_ECONFIG);
	assert_string_equal(f->err, errs->msg[0]);

	/* A syntax error ends the reading: it is the only one. */
	write_file(f->path, "jobs: [\n");
	assert_int_equal(ctl_config_load_all(f->path, &f->cfg, errs),
	    BELLOWS_ECONFIG);
	assert_int_equal(errs->n, 1);
	assert_non_null(strstr(errs->msg[0], f->path));
	free(errs);
}

static void
test_config_stops_after_the_most_errors_it_reports(void **state)
{
	fixture *f = *state;
	ctl_config_errors *errs = malloc(sizeof(*errs));
	char text[8192] = "daemon:\n";
	size_t used = strlen(text);

	assert_non_null(errs);
	for (int i = 0; i < CTL_CONFIG_ERRORS_MAX + 10; i++)
		used += (size_t)snprintf(text + used, sizeof(text) - used,
		    "  bogus_%d: 1\n", i);
	snprintf(text + used, sizeof(text) - used, "jobs: []\n");
	write_file(f->path, text);
	assert_int_equal(ctl_config_load_all(f->path, &f->cfg, errs),
	    BELLOWS_ECONFIG);
	assert_int_equal(errs->n, CTL_CONFIG_ERRORS_MAX);
	assert_non_null(strstr(errs->msg[CTL_CONFIG_ERRORS_MAX - 1],
	    ":51:3: unknown key 'bogus_49'"));
	free(errs);
}

/* Writes a valid file of exactly `size` bytes: a short configuration
 * followed by comment lines of 100 bytes and one shorter last line. */
static void
write_file_of_size(const char *path, size_t size)
{
	static const char head[] = "jobs:\n  - policies: [{type: fixed}]\n";
	FILE *fp = fopen(path, "w");
	size_t left = size - strlen(head);
	char line[100];

	assert_non_null(fp);
	assert_true(size >= strlen(head) + 2);
	memset(line, 'x', sizeof(line));
	line[0] = '#';
	line[sizeof(line) - 1] = '\n';
	assert_int_equal(fwrite(head, 1, strlen(head), fp), strlen(head));
	while (left > 0) {
		size_t n = left >= sizeof(line) + 2 || left == sizeof(line)
		    ? sizeof(line)
		    : left;

		/* The last line: '#', some x, '\n'. */
		if (n < sizeof(line)) {
			char last[sizeof(line) + 2];

			memset(last, 'y', n);
			last[0] = '#';
			last[n - 1] = '\n';
			assert_int_equal(fwrite(last, 1, n, fp), n);
		} else {
			assert_int_equal(fwrite(line, 1, n, fp), n);
		}
		left -= n;
	}
	assert_int_equal(fclose(fp), 0);
}

static void
test_config_takes_exactly_16_mib_and_refuses_one_byte_more(void **state)
{
	fixture *f = *state;
	char want[256];

	write_file_of_size(f->path, CTL_CONFIG_FILE_MAX);
	assert_int_equal(ctl_config_load(f->path, &f->cfg, f->err,
			     sizeof(f->err)),
	    0);
	assert_int_equal(f->cfg->text_len, CTL_CONFIG_FILE_MAX);
	ctl_config_destroy(&f->cfg);

	/* One byte more: the byte past the limit is the last line's 81st
	 * (2 lines of head, 36 bytes, then 167771 lines of 100 bytes and the
	 * first 80 bytes of a last line of 101). */
	write_file_of_size(f->path, CTL_CONFIG_FILE_MAX + 1);
	assert_int_equal(ctl_config_load(f->path, &f->cfg, f->err,
			     sizeof(f->err)),
	    BELLOWS_ECONFIG);
	assert_null(f->cfg);
	snprintf(want, sizeof(want),
	    "%s:167774:81: the file is longer than 16 MiB (16777216 bytes)",
	    f->path);
	if (strncmp(f->err, want, strlen(want)) != 0)
		fail_msg("expected '%s...', got '%s'", want, f->err);

	/* Twice the limit, which the buffer used to admit: refused the
	 * same way, at the same byte. */
	write_file_of_size(f->path, 2 * (size_t)CTL_CONFIG_FILE_MAX);
	assert_int_equal(ctl_config_load(f->path, &f->cfg, f->err,
			     sizeof(f->err)),
	    BELLOWS_ECONFIG);
	if (strncmp(f->err, want, strlen(want)) != 0)
		fail_msg("expected '%s...', got '%s'", want, f->err);
}

/* "jobs: " and `depth` - 1 nested flow lists: `depth` levels in all. */
static char *
nested_text(size_t depth)
{
	size_t n = depth - 1;
	char *t = malloc(6 + 2 * n + 2);

	assert_non_null(t);
	memcpy(t, "jobs: ", 6);
	memset(t + 6, '[', n);
	memset(t + 6 + n, ']', n);
	memcpy(t + 6 + 2 * n, "\n", 2);
	return t;
}

static void
test_config_refuses_nesting_deeper_than_64_levels_where_it_goes_past(
    void **state)
{
	fixture *f = *state;
	char *ok = nested_text(CTL_CONFIG_DEPTH_MAX);
	char *deep = nested_text(CTL_CONFIG_DEPTH_MAX + 1);
	char *deepest = nested_text(65536);

	/* 64 levels pass the limit (and fail for what they hold). */
	assert_int_equal(load(f, ok), BELLOWS_ECONFIG);
	assert_null(strstr(f->err, "nested"));
	/* The 65th level opens at the 64th '[', column 6 + 64. */
	assert_refused_at(f, deep, 1, 70, "nested more than 64 levels deep");
	/* 64k levels: refused at the same place, without parsing the rest
	 * (libyaml would take seconds). */
	assert_refused_at(f, deepest, 1, 70, "nested more than 64 levels deep");
	free(ok);
	free(deep);
	free(deepest);
}

static void
test_config_refuses_more_than_a_million_nodes_where_it_goes_past(void **state)
{
	fixture *f = *state;
	size_t n = CTL_CONFIG_NODES_MAX; /* scalars in the list */
	char *t = malloc(8 + 2 * n + 4);
	size_t at = 0;

	assert_non_null(t);
	/* The top mapping, "jobs" and the list are 3 nodes: the list's
	 * scalar number n - 3 (from 0) is node 1000001, at column
	 * 8 + 2 * (n - 3). */
	at += (size_t)sprintf(t, "jobs: [");
	for (size_t i = 0; i < n; i++)
		at += (size_t)sprintf(t + at, i ? ",a" : "a");
	sprintf(t + at, "]\n");
	assert_refused_at(f, t, 1, (int)(8 + 2 * (n - 3)),
	    "more than 1000000 values, lists and mappings");
	free(t);
}

static void
test_config_refuses_too_many_jobs_or_policies(void **state)
{
	fixture *f = *state;
	size_t cap = 40 * (CTL_CONFIG_JOBS_MAX + 1) + 64, at = 0;
	char *t = malloc(cap);

	assert_non_null(t);
	at += (size_t)sprintf(t, "jobs:\n");
	for (int i = 0; i <= CTL_CONFIG_JOBS_MAX; i++)
		at += (size_t)sprintf(t + at,
		    "  - policies: [{type: fixed}]\n");
	assert_refused_at(f, t, 2, 3, "jobs may have at most 4096 entries");
	at = (size_t)sprintf(t, "jobs:\n  - policies: [");
	for (int i = 0; i <= CTL_CONFIG_POLICIES_MAX; i++)
		at += (size_t)sprintf(t + at, "%s{type: fixed, name: p%d}",
		    i ? ", " : "", i);
	sprintf(t + at, "]\n");
	assert_refused_at(f, t, 2, 15,
	    "a job entry may have at most 64 policies");
	free(t);
}

/* A job entry whose glob is `glob` (written in single quotes). */
static void
load_glob(fixture *f, const char *glob, char *text, size_t len)
{
	snprintf(text, len,
	    "jobs:\n"
	    "  - match: '%s'\n"
	    "    policies: [{type: fixed}]\n",
	    glob);
}

/* A policy whose layer regex is `re` (written in single quotes). */
static void
load_regex(fixture *f, const char *re, char *text, size_t len)
{
	(void)f;
	snprintf(text, len,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: fixed\n"
	    "        layers: {match: '%s'}\n",
	    re);
}

static void
test_config_bounds_job_globs(void **state)
{
	fixture *f = *state;
	char glob[CTL_CONFIG_PATTERN_MAX + 2], text[1024];

	memset(glob, '*', CTL_CONFIG_PATTERN_MAX);
	glob[CTL_CONFIG_PATTERN_MAX] = '\0';
	load_glob(f, glob, text, sizeof(text));
	assert_int_equal(load(f, text), 0);
	strcat(glob, "*");
	load_glob(f, glob, text, sizeof(text));
	assert_refused_at(f, text, 2, 12,
	    "match is 257 bytes long; a pattern may have at most 256");
	load_glob(f, "bert-[0-9", text, sizeof(text));
	assert_refused_at(f, text, 2, 12,
	    "'[' opens a set that no ']' closes (byte 6 of the pattern)");
	load_glob(f, "bert-[[:digt:]]", text, sizeof(text));
	assert_refused_at(f, text, 2, 12, "unknown class in '[:...:]'");
	load_glob(f, "bert\\", text, sizeof(text));
	assert_refused_at(f, text, 2, 12, "match ends with a lone '\\'");
}

static void
test_config_bounds_layer_regexes(void **state)
{
	fixture *f = *state;
	char re[CTL_CONFIG_PATTERN_MAX + 8], text[1024];

	/* (a*)* 51 times: 255 bytes of nested repetition, accepted. */
	re[0] = '\0';
	for (int i = 0; i < 51; i++)
		strcat(re, "(a*)*");
	load_regex(f, re, text, sizeof(text));
	assert_int_equal(load(f, text), 0);
	strcat(re, "(a)");
	load_regex(f, re, text, sizeof(text));
	assert_refused_at(f, text, 4, 25,
	    "match is 258 bytes long; a pattern may have at most 256");
	load_regex(f, "(a*)*\\1", text, sizeof(text));
	assert_refused_at(f, text, 4, 25,
	    "match: back-references (\\1 to \\9) are not allowed");
	load_regex(f, "layer[0-9]{1,4}\\.(a{255}){255}", text, sizeof(text));
	assert_refused_at(f, text, 4, 25,
	    "match: the counts in {m,n} make it longer than 1024 positions "
	    "(byte 26 of the pattern)");
	/* glibc would need gigabytes to compile this one. */
	load_regex(f, "((((a{255}){255}){255}){255})", text, sizeof(text));
	assert_refused_at(f, text, 4, 25, "longer than 1024 positions");
	load_regex(f, "a{256}", text, sizeof(text));
	assert_refused_at(f, text, 4, 25, "a count in {m,n} is above 255");
	memset(re, 0, sizeof(re));
	memset(re, '(', 33);
	memset(re + 33, ')', 33);
	load_regex(f, re, text, sizeof(text));
	assert_refused_at(f, text, 4, 25,
	    "parentheses are nested more than 32 deep");
	/* What real selectors look like stays accepted. */
	load_regex(f,
	    "^(encoder|decoder)\\.layers\\.[0-9]{1,3}\\.(attn|mlp)\\."
	    "[a-z_]+\\.weight$",
	    text, sizeof(text));
	assert_int_equal(load(f, text), 0);
	assert_true(ctl_selector_matches(&f->cfg->jobs[0].policies[0].selector,
	    "encoder.layers.12.attn.q_proj.weight", 100, 2));
	assert_false(ctl_selector_matches(&f->cfg->jobs[0].policies[0].selector,
	    "encoder.layers.12.attn.q_proj.bias", 100, 2));
}

/* A small deterministic generator for the glob comparison. */
static uint32_t
next_rand(uint32_t *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 16;
}

static void
test_config_glob_matches_as_fnmatch_does(void **state)
{
	static const char *const atoms[] = { "a", "b", "*", "?", "[ab]", "[!a]",
		"[^b]", "[a-c]", "\\*", "[[:alpha:]]", "[]a]", "." };
	static const char *const fixed[][2] = { { "resnet-*", "resnet-50" },
		{ "bert-[0-9]", "bert-4" }, { "*.[ch]", "x.c" },
		{ "\\[x]", "[x]" }, { "a*b*c", "aXbYc" }, { "*", "" },
		{ "?", "" }, { "[!]]", "]" }, { "[!]]", "x" } };
	uint32_t seed = 12;
	char pat[64], name[16];

	(void)state;
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		assert_int_equal(ctl_config_glob_match(fixed[i][0],
				     fixed[i][1]),
		    fnmatch(fixed[i][0], fixed[i][1], 0) == 0);
	for (int i = 0; i < 200000; i++) {
		int np = (int)(next_rand(&seed) % 6), nn;

		pat[0] = '\0';
		for (int k = 0; k < np; k++)
			strcat(pat,
			    atoms[next_rand(&seed) %
				(sizeof(atoms) / sizeof(atoms[0]))]);
		nn = (int)(next_rand(&seed) % 7);
		for (int k = 0; k < nn; k++)
			name[k] = "ab*.]c"[next_rand(&seed) % 6];
		name[nn] = '\0';
		if (ctl_config_glob_match(pat, name) !=
		    (fnmatch(pat, name, 0) == 0))
			fail_msg("'%s' on '%s': %d, fnmatch %d", pat, name,
			    ctl_config_glob_match(pat, name),
			    fnmatch(pat, name, 0) == 0);
	}
}

static void
test_config_glob_takes_no_exponential_time(void **state)
{
	char pat[CTL_CONFIG_PATTERN_MAX + 1] = "", name[257];

	(void)state;
	/* "*a" 127 times then "b", on 256 a's: a backtracking matcher
	 * tries every way to place 127 stars. Finishing is the test. */
	for (int i = 0; i < 127; i++)
		strcat(pat, "*a");
	strcat(pat, "b");
	memset(name, 'a', 256);
	name[256] = '\0';
	for (int i = 0; i < 1000; i++)
		assert_false(ctl_config_glob_match(pat, name));
	name[255] = 'b';
	assert_true(ctl_config_glob_match(pat, name));
}

static void
test_config_reads_reload_timeout_ms_like_other_settings(void **state)
{
	fixture *f = *state;

	assert_int_equal(load(f, "jobs: [{policies: [{type: fixed}]}]\n"), 0);
	assert_int_equal(f->cfg->reload_timeout_ms, 10000);
	assert_int_equal(load(f,
			     "daemon: {reload_timeout_ms: 250}\n"
			     "jobs: [{policies: [{type: fixed}]}]\n"),
	    0);
	assert_int_equal(f->cfg->reload_timeout_ms, 250);
	assert_refused_at(f,
	    "daemon: {reload_timeout_ms: 99}\n"
	    "jobs: [{policies: [{type: fixed}]}]\n",
	    1, 29, "reload_timeout_ms must be in [100, 3600000], not 99");
}

static void
test_config_finds_a_duplicate_among_many_keys_quickly(void **state)
{
	fixture *f = *state;
	const int n = 200000;
	char *t = malloc((size_t)n * 16 + 64);
	size_t at = 0;

	assert_non_null(t);
	/* 200000 keys compared pairwise would be 2e10 comparisons. */
	at += (size_t)sprintf(t, "daemon:\n");
	for (int i = 0; i < n; i++)
		at += (size_t)sprintf(t + at, " k%d: 1\n", i);
	at += (size_t)sprintf(t + at, " k7: 1\n k3: 1\n");
	sprintf(t + at, "jobs: [{policies: [{type: fixed}]}]\n");
	assert_refused_at(f, t, n + 3, 2, "key 'k3' appears twice");
	free(t);
}

static void
test_config_counts_an_alias_each_time_it_is_used(void **state)
{
	fixture *f = *state;
	size_t cap = 64 * 1100 + 256, at = 0;
	char *t = malloc(cap);

	assert_non_null(t);
	/* Four policies written once, used by 1025 job entries: 4100
	 * policies to validate, refused at the 4097th (the alias points
	 * at the policy it repeats, line 2, column 19). */
	at += (size_t)sprintf(t,
	    "jobs:\n"
	    "  - policies: &ps [{type: fixed}, {type: comet}, "
	    "{type: perfmodel}, {type: slimgc}]\n");
	for (int i = 1; i < 1025; i++)
		at += (size_t)sprintf(t + at,
		    "  - {match: \"j%d\", policies: *ps}\n", i);
	assert_refused_at(f, t, 2, 20, "more than 4096 policies in the file");
	/* One regex of 1024 positions, used 65 times: 66560 positions. */
	at = (size_t)sprintf(t,
	    "jobs:\n"
	    "  - policies: &ps [{type: fixed, layers: {match: "
	    "'(.{255}){4}'}}]\n");
	for (int i = 1; i < 65; i++)
		at += (size_t)sprintf(t + at,
		    "  - {match: \"j%d\", policies: *ps}\n", i);
	assert_refused_at(f, t, 2, 50,
	    "the layer regexes of the file hold more than 65536 positions");
	free(t);
}

static void
test_config_refuses_a_fifo_without_waiting_for_a_writer(void **state)
{
	fixture *f = *state;
	char want[256];

	assert_int_equal(mkfifo(f->path, 0600), 0);
	assert_int_equal(ctl_config_load(f->path, &f->cfg, f->err,
			     sizeof(f->err)),
	    BELLOWS_EIO);
	snprintf(want, sizeof(want), "%s: not a regular file", f->path);
	assert_string_equal(f->err, want);
}

static void
test_config_stops_reading_when_cancelled(void **state)
{
	fixture *f = *state;
	ctl_config_errors *errs = malloc(sizeof(*errs));
	atomic_bool cancel;
	char want[256];

	assert_non_null(errs);
	atomic_init(&cancel, true);
	write_file(f->path, "jobs: [{policies: [{type: fixed}]}]\n");
	assert_int_equal(ctl_config_load_cancellable(f->path, &cancel, &f->cfg,
			     errs),
	    BELLOWS_ETIMEDOUT);
	assert_null(f->cfg);
	assert_int_equal(errs->n, 1);
	snprintf(want, sizeof(want), "%s: reading was cancelled", f->path);
	assert_string_equal(errs->msg[0], want);
	atomic_store(&cancel, false);
	assert_int_equal(ctl_config_load_cancellable(f->path, &cancel, &f->cfg,
			     errs),
	    0);
	free(errs);
}

/* ---- security ---------------------------------------------------------- */

/* Writes a new keypair as DIR/NAME.key and DIR/NAME.pub into *ret. */
static void
keygen(const char *dir, const char *name, com_cert *ret)
{
	char err[256];

	mkdir(dir, 0700);
	assert_int_equal(com_cert_generate(ret), 0);
	assert_int_equal(com_cert_save(ret, dir, name, true, err, sizeof(err)),
	    0);
}

/* Removes what the security tests wrote under the fixture's dir. */
static void
remove_keys(const fixture *f)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s/keys' '%s/clients'", f->dir,
	    f->dir);
	assert_int_equal(system(cmd), 0);
}

static const char secure_file[] = "daemon:\n"
				  "  security:\n"
				  "    server_key: keys/server.key\n"
				  "    clients: clients\n"
				  "store:\n"
				  "  mode: \"0640\"\n"
				  "jobs:\n"
				  "  - match: \"train-*\"\n"
				  "    clients: [alice]\n"
				  "    policies:\n"
				  "      - type: fixed\n"
				  "  - match: \"*\"\n"
				  "    policies:\n"
				  "      - type: fixed\n";

static void
test_config_reads_the_server_key_and_the_clients_directory(void **state)
{
	fixture *f = *state;
	char keys[160], clients[160];
	com_cert server, alice, bob;

	snprintf(keys, sizeof(keys), "%s/keys", f->dir);
	snprintf(clients, sizeof(clients), "%s/clients", f->dir);
	keygen(keys, "server", &server);
	keygen(clients, "bob", &bob);
	keygen(clients, "alice", &alice);
	if (load(f, secure_file) != 0)
		fail_msg("%s", f->err);
	assert_true(f->cfg->security.enabled);
	assert_false(f->cfg->allow_insecure);
	assert_string_equal(f->cfg->security.server_cert.secret_key,
	    server.secret_key);
	/* Only the .pub files count, sorted by name. */
	assert_int_equal(f->cfg->security.n_clients, 2);
	assert_string_equal(f->cfg->security.keys[0].name, "alice");
	assert_string_equal(f->cfg->security.keys[1].name, "bob");
	assert_string_equal(ctl_config_client_by_key(f->cfg, bob.public_key),
	    "bob");
	assert_null(ctl_config_client_by_key(f->cfg, server.public_key));
	assert_true(ctl_config_client_allowed(f->cfg, "train-1", "alice"));
	assert_false(ctl_config_client_allowed(f->cfg, "train-1", "bob"));
	assert_false(ctl_config_client_allowed(f->cfg, "train-1", NULL));
	assert_true(ctl_config_client_allowed(f->cfg, "eval", "bob"));
	assert_false(ctl_config_client_allowed(f->cfg, "eval", NULL));
	assert_int_equal(f->cfg->store.mode, 0640);
	remove_keys(f);
}

/* daemon.metrics with a token for alice: the token read from its file
 * (white space around it left out), /metrics showing alice's jobs only,
 * none without the token, every job without security; the section
 * prints and loads back. */
static void
test_config_metrics_token_shows_its_clients_jobs(void **state)
{
	fixture *f = *state;
	char keys[160], clients[160], token[160], text[1024];
	com_cert server, alice;
	ctl_config *again;
	char *body;

	snprintf(keys, sizeof(keys), "%s/keys", f->dir);
	snprintf(clients, sizeof(clients), "%s/clients", f->dir);
	snprintf(token, sizeof(token), "%s/keys/metrics.token", f->dir);
	keygen(keys, "server", &server);
	keygen(clients, "alice", &alice);
	write_file(token, "  0123456789abcdef-token\n\n");
	body = strstr(secure_file, "store:");
	snprintf(text, sizeof(text),
	    "daemon:\n"
	    "  security:\n"
	    "    server_key: keys/server.key\n"
	    "    clients: clients\n"
	    "  metrics:\n"
	    "    listen: \"127.0.0.1:9464\"\n"
	    "    token_file: keys/metrics.token\n"
	    "    client: alice\n"
	    "%s",
	    body);
	if (load(f, text) != 0)
		fail_msg("%s", f->err);
	assert_string_equal(f->cfg->metrics_listen, "127.0.0.1:9464");
	assert_string_equal(f->cfg->metrics.token, "0123456789abcdef-token");
	assert_string_equal(f->cfg->metrics.token_file, token);
	assert_string_equal(f->cfg->metrics.client, "alice");
	assert_true(ctl_config_metrics_shows(f->cfg, "train-1"));
	assert_true(ctl_config_metrics_shows(f->cfg, "eval"));
	again = print_and_reload(f, f->cfg);
	assert_string_equal(again->metrics.token, "0123456789abcdef-token");
	assert_string_equal(again->metrics.client, "alice");
	assert_string_equal(again->metrics_listen, "127.0.0.1:9464");
	ctl_config_destroy(&again);
	/* Another client: train-* lists alice only. */
	free(f->cfg->metrics.client);
	f->cfg->metrics.client = strdup("bob");
	assert_false(ctl_config_metrics_shows(f->cfg, "train-1"));
	assert_true(ctl_config_metrics_shows(f->cfg, "eval"));
	/* Security without a token: no job. */
	if (load(f, secure_file) != 0)
		fail_msg("%s", f->err);
	assert_false(ctl_config_metrics_shows(f->cfg, "eval"));
	/* No security: every job, with the old key. */
	assert_int_equal(load(f,
			     "daemon:\n"
			     "  metrics_listen: \"9464\"\n"
			     "jobs:\n"
			     "  - clients: [alice]\n"
			     "    policies:\n"
			     "      - type: fixed\n"),
	    0);
	assert_string_equal(f->cfg->metrics_listen, "9464");
	assert_true(ctl_config_metrics_shows(f->cfg, "job"));
	unlink(token);
	remove_keys(f);
}

static void
test_config_allows_every_client_without_security(void **state)
{
	fixture *f = *state;

	assert_int_equal(load(f,
			     "daemon:\n"
			     "  allow_insecure: true\n"
			     "jobs:\n"
			     "  - clients: [alice]\n"
			     "    policies:\n"
			     "      - type: fixed\n"),
	    0);
	assert_false(f->cfg->security.enabled);
	assert_true(f->cfg->allow_insecure);
	assert_true(ctl_config_client_allowed(f->cfg, "job", NULL));
	assert_null(ctl_config_client_by_key(f->cfg, "x"));
	assert_int_equal(f->cfg->store.mode, 0600);
}

static void
test_config_refuses_broken_security_settings(void **state)
{
	fixture *f = *state;
	char keys[160], clients[160];
	com_cert server, alice;

	snprintf(keys, sizeof(keys), "%s/keys", f->dir);
	snprintf(clients, sizeof(clients), "%s/clients", f->dir);
	/* No key file yet: the error names it at its value. */
	mkdir(clients, 0700);
	assert_refused_at(f, secure_file, 3, 17, "server_key");
	keygen(keys, "server", &server);
	keygen(clients, "alice", &alice);
	/* A public certificate is not bellowsd's secret one. */
	assert_refused_at(f,
	    "daemon:\n"
	    "  security: {server_key: keys/server.pub, clients: clients}\n"
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: fixed\n",
	    2, 26, "is a public certificate");
	assert_refused_at(f,
	    "daemon:\n"
	    "  security: {server_key: keys/server.key, clients: nowhere}\n"
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: fixed\n",
	    2, 52, "clients directory");
	assert_refused_at(f,
	    "daemon:\n"
	    "  security: {server_key: keys/server.key}\n"
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: fixed\n",
	    2, 13, "needs both server_key and clients");
	assert_refused_at(f,
	    "daemon:\n"
	    "  security: {server_key: keys/server.key, clients: clients, "
	    "x: 1}\n"
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: fixed\n",
	    2, 61, "unknown key 'x' in daemon.security");
	assert_refused_at(f,
	    "daemon:\n"
	    "  allow_insecure: maybe\n"
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: fixed\n",
	    2, 19, "allow_insecure must be true or false");
	assert_refused_at(f,
	    "jobs:\n"
	    "  - clients: [alice, ../etc]\n"
	    "    policies:\n"
	    "      - type: fixed\n",
	    2, 22, "a client name is");
	assert_refused_at(f,
	    "store:\n"
	    "  mode: \"0200\"\n"
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: fixed\n",
	    2, 9, "must let the owner read and write");
	assert_refused_at(f,
	    "store:\n"
	    "  mode: rw\n"
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: fixed\n",
	    2, 9, "store.mode must be permission bits");
	remove_keys(f);
}

static void
test_config_skips_untrusted_pub_files_and_reads_the_rest(void **state)
{
	fixture *f = *state;
	char keys[160], clients[160], path[200], err[256];
	com_cert server, alice, bob;

	snprintf(keys, sizeof(keys), "%s/keys", f->dir);
	snprintf(clients, sizeof(clients), "%s/clients", f->dir);
	keygen(keys, "server", &server);
	keygen(clients, "alice", &alice);
	keygen(clients, "bob", &bob);
	/* A broken certificate, and bob's key under a second name. */
	snprintf(path, sizeof(path), "%s/mallory.pub", clients);
	write_file(path, "curve\n    public-key = \"tooshort\"\n");
	assert_int_equal(com_cert_save(&bob, clients, "twin", true, err,
			     sizeof(err)),
	    0);
	assert_int_equal(load(f, secure_file), 0);
	assert_int_equal(f->cfg->security.n_clients, 1);
	assert_string_equal(f->cfg->security.keys[0].name, "alice");
	assert_non_null(f->cfg->security.skipped);
	snprintf(path, sizeof(path), "%s/mallory.pub:", clients);
	assert_non_null(strstr(f->cfg->security.skipped, path));
	snprintf(path, sizeof(path), "%s/bob.pub: holds the same", clients);
	assert_non_null(strstr(f->cfg->security.skipped, path));
	snprintf(path, sizeof(path), "%s/twin.pub: holds the same", clients);
	assert_non_null(strstr(f->cfg->security.skipped, path));
	assert_true(ctl_config_client_allowed(f->cfg, "train-a", "alice"));
	remove_keys(f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
		T(test_config_loads_a_full_valid_file),
		T(test_config_fills_daemon_defaults),
		T(test_config_reads_the_plugin_worker_settings),
		T(test_config_refuses_an_unknown_top_level_key),
		T(test_config_refuses_an_unknown_daemon_key),
		T(test_config_lists_the_daemon_keys_when_none_is_near),
		T(test_config_accepts_every_daemon_key_it_lists),
		T(test_config_refuses_a_value_of_the_wrong_type),
		T(test_config_refuses_an_out_of_range_value),
		T(test_config_refuses_an_unknown_policy_type),
		T(test_config_suggests_nothing_for_a_distant_policy_type),
		T(test_config_refuses_an_unknown_parameter),
		T(test_config_refuses_a_missing_required_parameter),
		T(test_config_refuses_a_duplicate_key),
		T(test_config_refuses_a_bad_regex),
		T(test_config_refuses_non_increasing_schedule_windows),
		T(test_config_refuses_two_policies_owning_one_knob),
		T(test_config_refuses_empty_jobs),
		T(test_config_refuses_invalid_yaml_syntax),
		T(test_config_refuses_an_empty_file),
		T(test_config_reports_a_missing_file_as_io_error),
		T(test_config_parses_text_from_memory_with_its_name),
		T(test_config_match_takes_the_first_matching_glob),
		T(test_selector_matches_by_rank_size_and_name),
		T(test_config_print_round_trips_every_value),
		T(test_config_print_round_trips_defaults_and_awkward_strings),
		T(test_config_warns_of_a_window_timeout_the_agents_do_not_wait_out),
		T(test_config_destroy_is_null_safe),
		T(test_config_reports_every_error_with_its_position),
		T(test_config_stops_after_the_most_errors_it_reports),
		T(test_config_takes_exactly_16_mib_and_refuses_one_byte_more),
		T(test_config_refuses_nesting_deeper_than_64_levels_where_it_goes_past),
		T(test_config_refuses_more_than_a_million_nodes_where_it_goes_past),
		T(test_config_refuses_too_many_jobs_or_policies),
		T(test_config_bounds_job_globs),
		T(test_config_bounds_layer_regexes),
		T(test_config_glob_matches_as_fnmatch_does),
		T(test_config_glob_takes_no_exponential_time),
		T(test_config_reads_reload_timeout_ms_like_other_settings),
		T(test_config_finds_a_duplicate_among_many_keys_quickly),
		T(test_config_counts_an_alias_each_time_it_is_used),
		T(test_config_refuses_a_fifo_without_waiting_for_a_writer),
		T(test_config_stops_reading_when_cancelled),
		T(test_config_reads_the_server_key_and_the_clients_directory),
		T(test_config_allows_every_client_without_security),
		T(test_config_metrics_token_shows_its_clients_jobs),
		T(test_config_refuses_broken_security_settings),
		T(test_config_skips_untrusted_pub_files_and_reads_the_rest),
#undef T
	};

	return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
