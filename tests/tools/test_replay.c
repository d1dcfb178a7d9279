/* test_replay - `bellows replay`'s core: recorded windows through the
 * configured policies, with the levels computed by hand.
 *
 * Configurations are parsed from text (ctl_config_parse) and metrics read
 * from temporary files, the way the subcommand loads both. The level
 * printed for window w is the state in force during w: the policies'
 * initial state for the first window, then what closing the previous
 * recorded window decided.
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

#include "config.h"
#include "metrics.h"
#include "replay.h"

typedef struct fixture {
	ctl_config *cfg; /* parsed configuration */
	tool_metrics *m; /* recorded windows */
	tool_replay *rp; /* the result */
	char err[1024];  /* last message */
} fixture;

static int
setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));

	*state = f;
	return f == NULL ? -1 : 0;
}

static int
teardown(void **state)
{
	fixture *f = *state;

	tool_replay_destroy(&f->rp);
	tool_metrics_destroy(&f->m);
	ctl_config_destroy(&f->cfg);
	free(f);
	return 0;
}

static void
load(fixture *f, const char *yaml, const char *csv)
{
	FILE *tmp = tmpfile();

	assert_int_equal(ctl_config_parse(yaml, strlen(yaml), "test.yaml",
			     &f->cfg, f->err, sizeof(f->err)),
	    0);
	assert_non_null(tmp);
	fputs(csv, tmp);
	rewind(tmp);
	assert_int_equal(tool_metrics_read(tmp, "m.csv", &f->m, f->err,
			     sizeof(f->err)),
	    0);
	fclose(tmp);
}

/* Loads, replays job `job` and returns the replay's code. */
static int
replay(fixture *f, const char *yaml, const char *csv, const char *job)
{
	const ctl_job_conf *jc;

	load(f, yaml, csv);
	jc = ctl_config_match(f->cfg, job);
	assert_non_null(jc);
	return tool_replay_run(jc, job, f->m, NULL, &f->rp, f->err,
	    sizeof(f->err));
}

static double
level_at(const fixture *f, uint64_t i, uint32_t l)
{
	return f->rp->level[i * f->rp->n_layers + l];
}

static char *
printed(const fixture *f)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	assert_non_null(out);
	assert_int_equal(tool_replay_print(f->rp, f->m, out), 0);
	fclose(out);
	return buf;
}

static const char accordion_yaml[] = "jobs:\n"
				     "  - match: \"*\"\n"
				     "    policies:\n"
				     "      - type: accordion\n"
				     "        params:\n"
				     "          interval: 1\n"
				     "          eta: 0.5\n"
				     "          critical_level: 2\n"
				     "          stable_level: 1\n";

static void
test_replay_of_accordion_follows_the_hand_computed_regimes(void **state)
{
	fixture *f = *state;
	char *out;

	/* Interval 1, eta 0.5. Closing window 0 is critical (the first
	 * check); window 1: |10 - 4| / 10 = 0.6, critical; window 2:
	 * 0.1 / 4 = 0.025, stable; window 3: 4.1 / 3.9 = 1.05, critical.
	 * The 1-D bias is not selected and stays raw. */
	assert_int_equal(replay(f, accordion_yaml,
			     "window,layer,grad_norm,lr,numel,shape\n"
			     "0,fc.weight,10,0.1,640,10x64\n"
			     "0,fc.bias,1,0.1,10,10\n"
			     "1,fc.weight,4,0.1,640,10x64\n"
			     "1,fc.bias,1,0.1,10,10\n"
			     "2,fc.weight,3.9,0.1,640,10x64\n"
			     "2,fc.bias,1,0.1,10,10\n"
			     "3,fc.weight,8,0.1,640,10x64\n"
			     "3,fc.bias,1,0.1,10,10\n"
			     "4,fc.weight,8,0.1,640,10x64\n"
			     "4,fc.bias,1,0.1,10,10\n",
			     "resnet"),
	    0);
	assert_false(f->rp->batch);
	assert_int_equal(f->rp->n_windows, 5);
	assert_int_equal(f->rp->failures, 0);
	assert_true(level_at(f, 0, 0) == 2); /* initial: critical */
	assert_true(level_at(f, 1, 0) == 2); /* window 0 checked: critical */
	assert_true(level_at(f, 2, 0) == 2); /* r = 0.6 */
	assert_true(level_at(f, 3, 0) == 1); /* r = 0.025 */
	assert_true(level_at(f, 4, 0) == 2); /* r = 1.05 */
	for (uint64_t i = 0; i < 5; i++)
		assert_true(level_at(f, i, 1) == 0);
	out = printed(f);
	assert_string_equal(out,
	    "window,layer,level\n"
	    "0,fc.weight,2\n"
	    "0,fc.bias,0\n"
	    "1,fc.weight,2\n"
	    "1,fc.bias,0\n"
	    "2,fc.weight,2\n"
	    "2,fc.bias,0\n"
	    "3,fc.weight,1\n"
	    "3,fc.bias,0\n"
	    "4,fc.weight,2\n"
	    "4,fc.bias,0\n");
	free(out);
}

static void
test_replay_shows_an_lr_drop_from_the_next_windows_lr(void **state)
{
	fixture *f = *state;

	/* Interval 2, constant norms: window 2's check is stable. Window 3
	 * is no check, but window 4's LR is lower: window 3 closes as an
	 * LR drop, critical for window 4. Window 4's check is stable again
	 * and its LR continues into window 5: no drop. */
	assert_int_equal(replay(f,
			     "jobs:\n"
			     "  - match: \"*\"\n"
			     "    policies:\n"
			     "      - type: accordion\n"
			     "        params: {interval: 2, eta: 0.5}\n",
			     "window,layer,grad_norm,lr,shape\n"
			     "0,w,5,0.1,8x8\n"
			     "1,w,5,0.1,8x8\n"
			     "2,w,5,0.1,8x8\n"
			     "3,w,5,0.1,8x8\n"
			     "4,w,5,0.01,8x8\n"
			     "5,w,5,0.01,8x8\n",
			     "job"),
	    0);
	assert_true(level_at(f, 0, 0) == 2);
	assert_true(level_at(f, 1, 0) == 2);
	assert_true(level_at(f, 2, 0) == 2);
	assert_true(level_at(f, 3, 0) == 1);
	assert_true(level_at(f, 4, 0) == 2);
	assert_true(level_at(f, 5, 0) == 1);
}

static void
test_replay_of_a_gap_runs_the_next_recorded_window(void **state)
{
	fixture *f = *state;

	/* Closing window w decides schedule(w + 1); with windows 2 to 4
	 * missing, window 5 runs on what closing window 1 decided. */
	assert_int_equal(replay(f,
			     "jobs:\n"
			     "  - match: \"*\"\n"
			     "    policies:\n"
			     "      - type: schedule\n"
			     "        params:\n"
			     "          levels: {0: 4, 2: 1, 6: 3}\n",
			     "window,layer,grad_norm,lr\n"
			     "0,a,1,0.1\n"
			     "1,a,1,0.1\n"
			     "5,a,1,0.1\n"
			     "6,a,1,0.1\n",
			     "job"),
	    0);
	assert_int_equal(f->m->n_unshaped, 1);
	assert_true(level_at(f, 0, 0) == 4);
	assert_true(level_at(f, 1, 0) == 4);
	assert_true(level_at(f, 2, 0) == 1);
	assert_true(level_at(f, 3, 0) == 3);
}

static void
test_replay_selects_unshaped_layers_as_matrices(void **state)
{
	fixture *f = *state;

	assert_int_equal(replay(f,
			     "jobs:\n"
			     "  - match: \"*\"\n"
			     "    policies:\n"
			     "      - type: fixed\n"
			     "        layers: {min_numel: 1000}\n"
			     "        params: {level: 3}\n",
			     "window,layer,grad_norm,lr,numel,shape\n"
			     "0,unknown,1,0.1,,\n"
			     "0,bias,1,0.1,,4096\n"
			     "0,small,1,0.1,10,\n"
			     "0,large,1,0.1,4096,\n",
			     "job"),
	    0);
	/* numel unknown (0) is below min_numel; the 1-D bias has too few
	 * dimensions; the unshaped large layer is a 2-D one. */
	assert_true(level_at(f, 0, 0) == 0);
	assert_true(level_at(f, 0, 1) == 0);
	assert_true(level_at(f, 0, 2) == 0);
	assert_true(level_at(f, 0, 3) == 3);
	tool_replay_destroy(&f->rp);
	tool_metrics_destroy(&f->m);
	ctl_config_destroy(&f->cfg);

	assert_int_equal(replay(f,
			     "jobs:\n"
			     "  - match: \"*\"\n"
			     "    policies:\n"
			     "      - type: fixed\n"
			     "        params: {level: 3}\n",
			     "window,layer,grad_norm,lr\n"
			     "0,a,1,0.1\n",
			     "job"),
	    0);
	assert_true(level_at(f, 0, 0) == 3);
}

static void
test_replay_of_accordion_batch_prints_batch_sizes_and_lr_scales(void **state)
{
	fixture *f = *state;
	char *out;

	/* Window 0 is critical (batch 64, scale 1); window 1 changed by
	 * 1/10 < 0.5: stable, batch 256 and scale 256/64 = 4 from window
	 * 2. */
	assert_int_equal(replay(f,
			     "jobs:\n"
			     "  - match: \"*\"\n"
			     "    policies:\n"
			     "      - type: accordion_batch\n"
			     "        params:\n"
			     "          interval: 1\n"
			     "          eta: 0.5\n"
			     "          batch_critical: 64\n"
			     "          batch_stable: 256\n",
			     "window,layer,grad_norm,lr,shape\n"
			     "0,w,10,0.1,8x8\n"
			     "1,w,9,0.1,8x8\n"
			     "2,w,9,0.1,8x8\n",
			     "job"),
	    0);
	assert_true(f->rp->batch);
	out = printed(f);
	assert_string_equal(out,
	    "window,batch_size,lr_scale\n"
	    "0,64,1\n"
	    "1,64,1\n"
	    "2,256,4\n");
	free(out);
}

static void
test_replay_names_a_policy_that_cannot_start(void **state)
{
	fixture *f = *state;
	char csv[400 * 24 + 64];
	size_t used;

	/* 100000 windows of 400 norms is more history than accordion
	 * keeps: its init refuses. */
	used = (size_t)snprintf(csv, sizeof(csv),
	    "window,layer,grad_norm,lr\n");
	for (int l = 0; l < 400; l++)
		used += (size_t)snprintf(csv + used, sizeof(csv) - used,
		    "0,l%d,1,1\n", l);
	assert_int_equal(replay(f,
			     "jobs:\n"
			     "  - match: \"*\"\n"
			     "    policies:\n"
			     "      - type: accordion\n"
			     "        params: {interval: 100000}\n",
			     csv, "job"),
	    BELLOWS_ELIMIT);
	assert_null(f->rp);
	assert_string_equal(f->err,
	    "policy 'accordion' failed to start: limit exceeded");
}

static void
test_replay_quotes_layer_names_in_its_output(void **state)
{
	fixture *f = *state;
	char *out;

	assert_int_equal(replay(f,
			     "jobs:\n"
			     "  - match: \"*\"\n"
			     "    policies:\n"
			     "      - type: fixed\n"
			     "        params: {level: 0.25}\n",
			     "window,layer,grad_norm,lr\n"
			     "7,\"a,b\",1,0.1\n",
			     "job"),
	    0);
	out = printed(f);
	assert_string_equal(out, "window,layer,level\n7,\"a,b\",0.25\n");
	free(out);
}

int
main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_replay_of_accordion_follows_the_hand_computed_regimes),
		T(test_replay_shows_an_lr_drop_from_the_next_windows_lr),
		T(test_replay_of_a_gap_runs_the_next_recorded_window),
		T(test_replay_selects_unshaped_layers_as_matrices),
		T(test_replay_of_accordion_batch_prints_batch_sizes_and_lr_scales),
		T(test_replay_names_a_policy_that_cannot_start),
		T(test_replay_quotes_layer_names_in_its_output),
	};
#undef T

	return cmocka_run_group_tests_name("replay", tests, NULL, NULL);
}
