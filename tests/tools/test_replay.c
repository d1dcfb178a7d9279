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

#include "policyhost/config.h"
#include "hdb_fixture.h"
#include "client/metrics.h"
#include "tools/replay.h"

#include <bellows/policy.h>

#include <math.h>
#include <unistd.h>

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
test_replay_prints_an_lr_scale_in_its_shortest_exact_form(void **state)
{
	fixture *f = *state;
	char *out;

	/* 256 / 640 is the double nearest 0.4: printed as 0.4, not
	 * 0.40000000000000002. */
	assert_int_equal(replay(f,
			     "jobs:\n"
			     "  - match: \"*\"\n"
			     "    policies:\n"
			     "      - type: accordion_batch\n"
			     "        params:\n"
			     "          interval: 1\n"
			     "          batch_critical: 640\n"
			     "          batch_stable: 256\n",
			     "window,layer,grad_norm,lr,shape\n"
			     "0,w,10,0.1,8x8\n"
			     "1,w,9,0.1,8x8\n"
			     "2,w,9,0.1,8x8\n",
			     "job"),
	    0);
	out = printed(f);
	assert_string_equal(out,
	    "window,batch_size,lr_scale\n"
	    "0,640,1\n"
	    "1,640,1\n"
	    "2,256,0.4\n");
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

/* ---- replaying a recorded run (--db) ----------------------------------- */

/* Replays `in` under configuration `yaml` into f->rp. */
static int
replay_input(fixture *f, const char *yaml, const tool_replay_input *in)
{
	const ctl_job_conf *jc;

	ctl_config_destroy(&f->cfg);
	tool_replay_destroy(&f->rp);
	assert_int_equal(ctl_config_parse(yaml, strlen(yaml), "test.yaml",
			     &f->cfg, f->err, sizeof(f->err)),
	    0);
	jc = ctl_config_match(f->cfg, "job");
	assert_non_null(jc);
	return tool_replay_run_input(jc, "job", in, NULL, &f->rp, f->err,
	    sizeof(f->err));
}

static com_layer_info one_matrix[] = {
	{ .name = (char *)"w", .numel = 64, .ndim = 2, .shape = { 8, 8 } },
};

static void
test_replay_prefers_the_recorded_lr_next(void **state)
{
	fixture *f = *state;
	static const uint64_t window[] = { 0, 1, 2, 3, 4, 5 };
	static const double lr[] = { 0.1, 0.1, 0.1, 0.1, 0.01, 0.01 };
	static const double norm[] = { 5, 5, 5, 5, 5, 5 };
	/* The daemon heard of the drop only with window 4's own report. */
	static const double lr_next[] = { 0.1, 0.1, 0.1, 0.1, 0.01, 0.01 };
	static const char yaml[] = "jobs:\n"
				   "  - match: \"*\"\n"
				   "    policies:\n"
				   "      - type: accordion\n"
				   "        params: {interval: 2, eta: 0.5}\n";
	tool_replay_input in = {
		.n_layers = 1,
		.layers = one_matrix,
		.n_windows = 6,
		.window = window,
		.lr = lr,
		.grad_norm = norm,
	};

	/* Derived from the next window: window 3 closes as an LR drop
	 * (see test_replay_shows_an_lr_drop_from_the_next_windows_lr). */
	assert_int_equal(replay_input(f, yaml, &in), 0);
	assert_true(level_at(f, 4, 0) == 2);
	/* Recorded: no window closed with lr_next below its LR. */
	in.lr_next = lr_next;
	assert_int_equal(replay_input(f, yaml, &in), 0);
	assert_true(level_at(f, 3, 0) == 1);
	assert_true(level_at(f, 4, 0) == 1);
	assert_true(level_at(f, 5, 0) == 1);
}

static void
test_replay_hands_rank0_and_mean_norms_apart(void **state)
{
	fixture *f = *state;
	static const uint64_t window[] = { 0, 1, 2, 3 };
	static const double lr[] = { 0.1, 0.1, 0.1, 0.1 };
	static const double rank0[] = { 5, 5, 5, 5 };
	static const double mean[] = { 10, 4, 4, 4 };
	tool_replay_input in = {
		.n_layers = 1,
		.layers = one_matrix,
		.n_windows = 4,
		.window = window,
		.lr = lr,
		.grad_norm = rank0,
		.grad_norm_rank0 = rank0,
		.grad_norm_mean = mean,
	};

	/* Interval 1, eta 0.5. Rank 0's norm is flat: stable from window
	 * 2. The mean moves by 0.6 in window 1: critical for window 2. */
	assert_int_equal(replay_input(f,
			     "jobs:\n"
			     "  - match: \"*\"\n"
			     "    policies:\n"
			     "      - type: accordion\n"
			     "        params: {interval: 1, eta: 0.5}\n",
			     &in),
	    0);
	assert_true(level_at(f, 2, 0) == 1);
	assert_int_equal(replay_input(f,
			     "jobs:\n"
			     "  - match: \"*\"\n"
			     "    policies:\n"
			     "      - type: accordion\n"
			     "        params: {interval: 1, eta: 0.5,"
			     " norm_source: mean}\n",
			     &in),
	    0);
	assert_true(level_at(f, 2, 0) == 2);
	assert_true(level_at(f, 3, 0) == 1);
}

static char *
compared(const tool_replay *rp, const tool_hdb_replay *rec, bool all,
    tool_replay_diff *d)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	assert_non_null(out);
	assert_int_equal(tool_replay_compare(rp, rec, all, out, d), 0);
	fclose(out);
	return buf;
}

static void
test_replay_compare_prints_differing_rows_and_counts_changes(void **state)
{
	com_layer_info layers[] = {
		{ .name = (char *)"a" },
		{ .name = (char *)"b,c" },
	};
	uint64_t window[] = { 4, 5, 6 };
	double had[] = { 2, 0, 1, 0, 1, 0 };
	double got[] = { 2, 0, 2, 0, 1, 0 };
	tool_hdb_replay rec = {
		.n_layers = 2,
		.layers = layers,
		.n_windows = 3,
		.window = window,
		.level = had,
	};
	tool_replay rp = {
		.n_windows = 3,
		.n_layers = 2,
		.level = got,
	};
	tool_replay_diff d;
	char *out;

	(void)state;
	out = compared(&rp, &rec, false, &d);
	assert_string_equal(out, "window,layer,recorded,replayed\n5,a,1,2\n");
	free(out);
	assert_int_equal(d.windows, 3);
	assert_int_equal(d.rows, 6);
	assert_int_equal(d.differ, 1);
	assert_int_equal(d.changes_recorded, 1); /* a: 2 -> 1 at 5 */
	assert_int_equal(d.changes_replayed, 1); /* a: 2 -> 1 at 6 */
	out = compared(&rp, &rec, true, &d);
	assert_string_equal(out,
	    "window,layer,recorded,replayed\n"
	    "4,a,2,2\n4,\"b,c\",0,0\n"
	    "5,a,1,2\n5,\"b,c\",0,0\n"
	    "6,a,1,1\n6,\"b,c\",0,0\n");
	free(out);
}

static void
test_replay_compare_of_batch_policies_sees_batch_and_scale(void **state)
{
	uint64_t window[] = { 0, 1, 2 };
	uint32_t had_batch[] = { 64, 256, 256 }, got_batch[] = { 64, 64, 256 };
	double had_scale[] = { 1, 4, 4 }, got_scale[] = { 1, 1, 4 };
	double level[3] = { 0 };
	tool_hdb_replay rec = {
		.n_layers = 1,
		.layers = one_matrix,
		.n_windows = 3,
		.window = window,
		.level = level,
		.batch_size = had_batch,
		.lr_scale = had_scale,
	};
	tool_replay rp = {
		.batch = true,
		.n_windows = 3,
		.n_layers = 1,
		.level = level,
		.batch_size = got_batch,
		.lr_scale = got_scale,
	};
	tool_replay_diff d;
	char *out;

	(void)state;
	out = compared(&rp, &rec, false, &d);
	assert_string_equal(out,
	    "window,recorded_batch_size,replayed_batch_size,"
	    "recorded_lr_scale,replayed_lr_scale\n"
	    "1,256,64,4,1\n");
	free(out);
	assert_int_equal(d.rows, 3);
	assert_int_equal(d.differ, 1);
	assert_int_equal(d.changes_recorded, 1);
	assert_int_equal(d.changes_replayed, 1);
}

/* ---- a run of the history handed whole -------------------------------- */

/* What the "seer" policy below saw of each window it was handed. */
typedef struct seen_window {
	uint64_t window;         /* index */
	uint64_t act_steps;      /* layer 0's */
	double act_lbar;         /* layer 0's */
	double comm_raw_ms;      /* layer 0's */
	double codec_ms;         /* layer 0's */
	double level;            /* layer 0's, in force */
	double backward_ms;      /* window's median */
	double mem_device_total; /* window's */
	uint32_t batch_size;     /* reported */
	uint32_t world;          /* ranks */
	uint64_t threshold;      /* in force */
	uint64_t calibrate;      /* calibrate_until */
	uint32_t n_comm;         /* collectives */
	uint32_t comm1_rank;     /* the second's rank */
} seen_window;

static seen_window seen[8];
static uint32_t n_seen;

/* Sets a size threshold of 4096 at window 0 and asks for a 4-step
 * calibration at window 1, as the recorded run had in force during
 * window 3; records what it is handed. */
static int
seer_init(void *st, const void *config, const bellows_job_info *job,
    bellows_proposal *initial)
{
	return 0;
}

static int
seer_on_window(void *st, const void *config, const bellows_window *w,
    bellows_proposal *out)
{
	const bellows_window_layer *l = &w->layers[0];

	if (n_seen < 8)
		seen[n_seen++] = (seen_window){
			.window = w->window,
			.act_steps = l->act_steps,
			.act_lbar = l->act_lbar,
			.comm_raw_ms = l->comm_raw_ms,
			.codec_ms = l->codec_ms,
			.level = l->level,
			.backward_ms = w->backward_ms_median,
			.mem_device_total = w->mem_device_total,
			.batch_size = w->batch_size,
			.world = w->world,
			.threshold = w->size_threshold,
			.calibrate = w->calibrate_until,
			.n_comm = w->n_comm,
			.comm1_rank = w->n_comm > 1 ? w->comm[1].rank : 99,
		};
	if (w->window == 0)
		out->size_threshold = 4096;
	if (w->window == 1)
		out->calibrate_steps = 4;
	return 0;
}

static const bellows_policy_ops seer_ops = {
	.abi_version = BELLOWS_POLICY_ABI,
	.name = "seer",
	.summary = "records what it is handed",
	.knobs = BELLOWS_KNOB_SIZE_THRESHOLD,
	.init = seer_init,
	.on_window = seer_on_window,
};

static void
test_replay_hands_a_recorded_window_whole_under_its_own_state(void **state)
{
	fixture *f = *state;
	char dir[] = "/tmp/bellows-replay.XXXXXX", path[64], err[512];
	int probe = 0;
	ctl_policy_conf pc = { .name = (char *)"seer",
		.ops = &seer_ops,
		.config = &probe };
	ctl_job_conf jc = { .match = (char *)"*",
		.n_policies = 1,
		.policies = &pc };
	tool_hdb_replay *rec = NULL;
	tool_hdb *db = NULL;
	tool_replay_input in;
	double norm[6];

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/h.db", dir);
	assert_int_equal(fixture_db_create(path, 3, 1), SQLITE_OK);
	assert_int_equal(tool_hdb_open(path, &db, err, sizeof(err)), 0);
	assert_int_equal(tool_hdb_replay_load(db, 1, &rec), 0);
	tool_hdb_close(&db);
	for (size_t i = 0; i < 6; i++)
		norm[i] = !isnan(rec->norm_rank0[i]) ? rec->norm_rank0[i]
						     : rec->norm_mean[i];
	in = (tool_replay_input){
		.n_layers = rec->n_layers,
		.layers = rec->layers,
		.n_windows = rec->n_windows,
		.window = rec->window,
		.lr = rec->lr,
		.lr_next = rec->lr_next,
		.grad_norm = norm,
		.grad_norm_rank0 = rec->norm_rank0,
		.grad_norm_mean = rec->norm_mean,
		.rec = rec,
	};
	n_seen = 0;
	assert_int_equal(tool_replay_run_input(&jc, "job", &in, NULL, &f->rp,
			     f->err, sizeof(f->err)),
	    0);
	assert_int_equal(n_seen, 3);
	/* Window 1: conv.weight's activations, as recorded. */
	assert_int_equal(seen[1].window, 1);
	assert_int_equal(seen[1].act_steps, 5);
	assert_true(seen[1].act_lbar == 0.5);
	assert_true(isnan(seen[1].comm_raw_ms));
	assert_int_equal(seen[1].batch_size, 32);
	assert_int_equal(seen[1].world, 3);
	/* The replay's threshold from window 1 on, not the recorded 0. */
	assert_int_equal(seen[0].threshold, 0);
	assert_int_equal(seen[1].threshold, 4096);
	assert_int_equal(seen[1].calibrate, 0);
	/* Window 3: the per-tensor times, timings, memory, collectives, and
	 * the replay's calibration from the recorded apply step 15. */
	assert_int_equal(seen[2].window, 3);
	assert_true(seen[2].comm_raw_ms == 2 && seen[2].codec_ms == 0.5);
	assert_true(seen[2].backward_ms == 8);
	assert_true(seen[2].mem_device_total == 8000);
	assert_int_equal(seen[2].calibrate, 19);
	assert_int_equal(seen[2].n_comm, 2);
	assert_int_equal(seen[2].comm1_rank, 2);
	/* Levels are the replay's state (no level owner: 0), not the
	 * recorded 1. */
	assert_true(seen[2].level == 0);
	/* The comparison counts the windows whose threshold differs: the
	 * run had 0 in force throughout, the replay 4096 from window 1. */
	assert_int_equal(f->rp->threshold[1], 4096);
	{
		tool_replay_diff d;
		FILE *out = fopen("/dev/null", "w");

		assert_non_null(out);
		assert_int_equal(tool_replay_compare(f->rp, rec, false, out,
				     &d),
		    0);
		assert_int_equal(d.gate_differ, 2);
		assert_int_equal(d.windows, 3);
		/* Bounds: none owned, none recorded; one replayed bound
		 * changed is one row that differs. */
		assert_int_equal(d.bound_differ, 0);
		f->rp->error_bound[1 * rec->n_layers + 1] = 0.25;
		assert_int_equal(tool_replay_compare(f->rp, rec, false, out,
				     &d),
		    0);
		assert_int_equal(d.bound_differ, 1);
		fclose(out);
	}
	tool_hdb_replay_destroy(&rec);
	fixture_db_remove(path);
	rmdir(dir);
}

static void
test_replay_reads_an_infinite_threshold_back_as_every_tensor_raw(void **state)
{
	char dir[] = "/tmp/bellows-replay.XXXXXX", path[64], err[512];
	tool_hdb_replay *rec = NULL;
	tool_hdb *db = NULL;
	sqlite3 *raw = NULL;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/h.db", dir);
	assert_int_equal(fixture_db_create(path, 3, 1), SQLITE_OK);
	/* What the store writes for UINT64_MAX (clamped to INT64_MAX). */
	assert_int_equal(sqlite3_open(path, &raw), SQLITE_OK);
	assert_int_equal(sqlite3_exec(raw,
			     "UPDATE window_info SET state_size_threshold = "
			     "9223372036854775807 WHERE run_id = 1 AND "
			     "window = 3",
			     NULL, NULL, NULL),
	    SQLITE_OK);
	sqlite3_close(raw);
	assert_int_equal(tool_hdb_open(path, &db, err, sizeof(err)), 0);
	assert_int_equal(tool_hdb_replay_load(db, 1, &rec), 0);
	tool_hdb_close(&db);
	assert_int_equal(rec->window[2], 3);
	assert_true(rec->size_threshold[2] == UINT64_MAX);
	assert_true(rec->win[2].size_threshold == UINT64_MAX);
	assert_int_equal(rec->size_threshold[1], 0);
	tool_hdb_replay_destroy(&rec);
	fixture_db_remove(path);
	rmdir(dir);
}

/* Runs `bellows replay ARGS...` and returns its exit code. */
static int
replay_cmd(const char *first, ...)
{
	char *argv[32];
	int argc = 0;
	va_list ap;

	argv[argc++] = (char *)"replay";
	va_start(ap, first);
	for (const char *a = first; a != NULL; a = va_arg(ap, const char *))
		argv[argc++] = (char *)a;
	va_end(ap);
	argv[argc] = NULL;
	return tool_replay_main(argc, argv);
}

static void
test_replay_refuses_mixed_or_incomplete_inputs(void **state)
{
	(void)state;
	assert_int_equal(replay_cmd("--policy", "p.yaml", NULL), 2);
	assert_int_equal(replay_cmd("--policy", "p.yaml", "--metrics", "m.csv",
			     "--db", "h.db", NULL),
	    2);
	assert_int_equal(replay_cmd("--policy", "p.yaml", "--metrics", "m.csv",
			     "--run", "1", NULL),
	    2);
	assert_int_equal(replay_cmd("--policy", "p.yaml", "--metrics", "m.csv",
			     "--all", NULL),
	    2);
	assert_int_equal(replay_cmd("--policy", "p.yaml", "--db", "h.db",
			     "--run", "-1", NULL),
	    2);
	assert_int_equal(replay_cmd("--policy", "p.yaml", "--db", "", NULL), 2);
	assert_int_equal(replay_cmd("--db", "h.db", NULL), 2);
	/* Well formed: it gets as far as the (missing) policy file. */
	assert_int_equal(replay_cmd("--policy", "/nonexistent/p.yaml", "--db",
			     "h.db", "--run", "3", "--all", NULL),
	    1);
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
		T(test_replay_prints_an_lr_scale_in_its_shortest_exact_form),
		T(test_replay_names_a_policy_that_cannot_start),
		T(test_replay_quotes_layer_names_in_its_output),
		T(test_replay_prefers_the_recorded_lr_next),
		T(test_replay_hands_rank0_and_mean_norms_apart),
		T(test_replay_compare_prints_differing_rows_and_counts_changes),
		T(test_replay_compare_of_batch_policies_sees_batch_and_scale),
		T(test_replay_hands_a_recorded_window_whole_under_its_own_state),
		T(test_replay_reads_an_infinite_threshold_back_as_every_tensor_raw),
		T(test_replay_refuses_mixed_or_incomplete_inputs),
	};
#undef T

	return cmocka_run_group_tests_name("replay", tests, NULL, NULL);
}
