/* replay - `bellows replay`, see replay.h.
 *
 * The window handed to the policies is built here rather than through the
 * controller's window aggregate: a recorded window is not a set of rank
 * reports. A window of a metrics file lacks most fields, which read as
 * "not measured" (0), the same on every replay; a window of the history
 * is handed as recorded, with the replay's own knob state in it.
 */
#include "replay.h"

#include "common/args.h"
#include "common/msg.h"
#include "policyhost/plugin.h"
#include "policyhost/policy_host.h"

#include <bellows/error.h>
#include <bellows/policy.h>

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define REPLAY_DEFAULT_JOB "replay"

/* ---- the replay -------------------------------------------------------- */

void
tool_replay_destroy(tool_replay **rp)
{
	tool_replay *t;

	if (rp == NULL || *rp == NULL)
		return;
	t = *rp;
	free(t->level);
	free(t->batch_size);
	free(t->lr_scale);
	free(t->threshold);
	free(t->gate_off);
	free(t->table_hash);
	free(t->error_bound);
	free(t->resid_plan);
	free(t);
	*rp = NULL;
}

static tool_replay *
replay_alloc(const tool_replay_input *in)
{
	tool_replay *rp = calloc(1, sizeof(*rp));
	size_t nw = in->n_windows ? (size_t)in->n_windows : 1;
	size_t nl = in->n_layers ? in->n_layers : 1;

	if (rp == NULL)
		return NULL;
	rp->n_windows = in->n_windows;
	rp->n_layers = in->n_layers;
	if (nw > SIZE_MAX / sizeof(double) / 3 / nl)
		goto fail;
	rp->level = malloc(nw * nl * sizeof(double));
	rp->batch_size = malloc(nw * sizeof(uint32_t));
	rp->lr_scale = malloc(nw * sizeof(double));
	rp->threshold = malloc(nw * sizeof(uint64_t));
	rp->gate_off = malloc(nw * sizeof(bool));
	rp->table_hash = malloc(nw * sizeof(uint64_t));
	rp->error_bound = malloc(nw * nl * sizeof(double));
	rp->resid_plan = malloc(3 * nw * nl * sizeof(double));
	if (rp->level == NULL || rp->batch_size == NULL ||
	    rp->lr_scale == NULL || rp->threshold == NULL ||
	    rp->gate_off == NULL || rp->error_bound == NULL ||
	    rp->resid_plan == NULL || rp->table_hash == NULL)
		goto fail;
	return rp;
fail:
	tool_replay_destroy(&rp);
	return NULL;
}

/* The LR the window after window i starts with, as bellowsd heard it:
 * recorded, or else the next recorded window's, the window's own for the
 * last one and, as agents report it, when the next is 0. */
static double
replay_lr_next(const tool_replay_input *in, uint64_t i)
{
	if (in->lr_next != NULL)
		return in->lr_next[i];
	if (i + 1 < in->n_windows && in->lr[i + 1] > 0)
		return in->lr[i + 1];
	return in->lr[i];
}

/* Fills *w and wl with window i of a run of the history: as recorded,
 * under the replay's state in force. The batch size is what the trainer
 * reported, unless the replay's knob differs from the recorded one (the
 * trainer would then have run with the replay's). */
static void
replay_view_rec(const tool_replay_input *in, uint64_t i, const char *job,
    const com_decision *in_force, bellows_window_layer *wl, bellows_window *w)
{
	const tool_hdb_replay *rec = in->rec;
	const bellows_window *had = &rec->win[i];

	for (uint32_t l = 0; l < in->n_layers; l++) {
		const com_layer_info *li = &in->layers[l];

		wl[l] = had->layers[l];
		wl[l].name = li->name;
		wl[l].numel = li->numel;
		wl[l].ndim = li->ndim;
		wl[l].shape = li->shape;
		wl[l].level = in_force->level[l];
		wl[l].error_bound = in_force->error_bound[l];
	}
	*w = *had;
	w->job = job;
	w->layers = wl;
	w->n_layers = in->n_layers;
	w->lr_scale = in_force->lr_scale;
	if (in_force->batch_size != rec->batch_size[i] &&
	    in_force->batch_size != 0)
		w->batch_size = in_force->batch_size;
	w->compression_off = in_force->compression_off;
	w->size_threshold = in_force->size_threshold;
	w->calibrate_until = 0;
	if (in_force->calibrate_steps > 0)
		w->calibrate_until = in_force->calibrate_steps >
			UINT64_MAX - rec->apply_step[i]
		    ? UINT64_MAX
		    : rec->apply_step[i] + in_force->calibrate_steps;
}

/* Fills *w and wl (in->n_layers entries) with recorded window i under the
 * state in force. */
static void
replay_view(const tool_replay_input *in, uint64_t i, const char *job,
    const com_decision *in_force, bellows_window_layer *wl, bellows_window *w)
{
	size_t at = (size_t)i * in->n_layers;
	const double *norm = in->grad_norm + at;
	const double *rank0 = (in->grad_norm_rank0 != NULL ? in->grad_norm_rank0
							   : in->grad_norm) +
	    at;
	const double *mean = (in->grad_norm_mean != NULL ? in->grad_norm_mean
							 : in->grad_norm) +
	    at;

	for (uint32_t l = 0; l < in->n_layers; l++) {
		const com_layer_info *li = &in->layers[l];

		wl[l] = (bellows_window_layer){
			.name = li->name,
			.numel = li->numel,
			.ndim = li->ndim,
			.shape = li->shape,
			.grad_norm = norm[l],
			.grad_norm_rank0 = rank0[l],
			.grad_norm_mean = mean[l],
			.level = in_force->level[l],
			.error_bound = in_force->error_bound[l],
			.comm_raw_ms = NAN, /* not timed */
			.comm_comp_ms = NAN,
			.codec_ms = NAN,
		};
	}
	*w = (bellows_window){
		.job = job,
		.window = in->window[i],
		.lr = in->lr[i],
		.lr_next = replay_lr_next(in, i),
		.batch_size = in_force->batch_size,
		.lr_scale = in_force->lr_scale,
		.world = 1,
		.ranks_reported = 1,
		.n_layers = in->n_layers,
		.layers = wl,
		.compression_off = in_force->compression_off,
		.size_threshold = in_force->size_threshold,
	};
}

/* The residual plan of `state` (decided at window i's close) into rp. */
static void
replay_take_plan(tool_replay *rp, uint64_t i, const com_decision *state)
{
	bool plan = !com_resid_plan_is_default(state);

	for (uint32_t l = 0; l < rp->n_layers; l++) {
		double
		    *at = &rp->resid_plan[3 * ((size_t)i * rp->n_layers + l)];

		at[0] = plan ? (double)state->resid_group[l] : (double)l;
		at[1] = plan ? state->resid_rows[l] : 1.0;
		at[2] = plan ? state->resid_cols[l] : 1.0;
	}
}

void
tool_replay_input_metrics(const tool_metrics *m, tool_replay_input *ret)
{
	*ret = (tool_replay_input){
		.n_layers = m->n_layers,
		.layers = m->layers,
		.n_windows = m->n_windows,
		.window = m->window,
		.lr = m->lr,
		.grad_norm = m->grad_norm,
	};
}

int
tool_replay_run_input(const ctl_job_conf *jc, const char *job,
    const tool_replay_input *in, FILE *warn, tool_replay **ret, char *errbuf,
    size_t errlen)
{
	char policies[256], reason[1024];
	bellows_window_layer *wl = NULL;
	ctl_policy_set *set = NULL;
	tool_replay *rp = NULL;
	com_decision state;
	int r;

	errbuf[0] = '\0';
	reason[0] = '\0';
	if ((r = com_decision_init(&state, job, in->n_layers)) != 0)
		goto fail;
	r = ctl_policy_set_new(jc, job, 1, in->layers, in->n_layers, &state,
	    reason, sizeof(reason), &set);
	if (r != 0) {
		snprintf(errbuf, errlen, "%s", reason);
		goto fail;
	}
	r = BELLOWS_ENOMEM;
	wl = calloc(in->n_layers ? in->n_layers : 1, sizeof(*wl));
	if (wl == NULL || (rp = replay_alloc(in)) == NULL)
		goto fail;
	for (uint32_t i = 0; i < jc->n_policies; i++) {
		if (jc->policies[i].ops->knobs & BELLOWS_KNOB_BATCH_SIZE)
			rp->batch = true;
	}
	for (uint64_t i = 0; i < in->n_windows; i++) {
		bellows_window w;
		uint32_t failed = 0;

		memcpy(rp->level + (size_t)i * in->n_layers, state.level,
		    sizeof(double) * in->n_layers);
		rp->batch_size[i] = state.batch_size;
		rp->lr_scale[i] = state.lr_scale;
		rp->threshold[i] = state.size_threshold;
		rp->gate_off[i] = state.compression_off;
		rp->table_hash[i] = tool_table_hash(state.codec_table,
		    state.codec_table_len);
		memcpy(rp->error_bound + (size_t)i * in->n_layers,
		    state.error_bound, sizeof(double) * in->n_layers);
		if (in->rec != NULL)
			replay_view_rec(in, i, job, &state, wl, &w);
		else
			replay_view(in, i, job, &state, wl, &w);
		r = ctl_policy_set_run(set, &w, &state, policies,
		    sizeof(policies), reason, sizeof(reason), &failed);
		if (r != 0)
			goto fail;
		replay_take_plan(rp, i, &state);
		rp->failures += failed;
		if (failed > 0 && warn != NULL)
			fprintf(warn,
			    "bellows replay: window %" PRIu64
			    ": %u policies failed; their knobs stay as they "
			    "were\n",
			    in->window[i], failed);
	}
	free(wl);
	ctl_policy_set_destroy(&set);
	com_decision_fini(&state);
	*ret = rp;
	return 0;
fail:
	if (errbuf[0] == '\0')
		snprintf(errbuf, errlen, "%s", bellows_strerror(r));
	tool_replay_destroy(&rp);
	free(wl);
	ctl_policy_set_destroy(&set);
	com_decision_fini(&state);
	return r;
}

int
tool_replay_run(const ctl_job_conf *jc, const char *job, const tool_metrics *m,
    FILE *warn, tool_replay **ret, char *errbuf, size_t errlen)
{
	tool_replay_input in;

	tool_replay_input_metrics(m, &in);
	return tool_replay_run_input(jc, job, &in, warn, ret, errbuf, errlen);
}

int
tool_replay_print(const tool_replay *rp, const tool_metrics *m, FILE *out)
{
	if (rp->batch) {
		fprintf(out, "window,batch_size,lr_scale\n");
		for (uint64_t i = 0; i < rp->n_windows; i++) {
			fprintf(out, "%" PRIu64 ",%" PRIu32 ",", m->window[i],
			    rp->batch_size[i]);
			tool_metrics_put_number(out, rp->lr_scale[i]);
			fputc('\n', out);
		}
		return ferror(out) ? BELLOWS_EIO : 0;
	}
	fprintf(out, "window,layer,level\n");
	for (uint64_t i = 0; i < rp->n_windows; i++) {
		const double *level = rp->level + (size_t)i * rp->n_layers;

		for (uint32_t l = 0; l < rp->n_layers; l++) {
			fprintf(out, "%" PRIu64 ",", m->window[i]);
			if (tool_metrics_put_field(out, m->layers[l].name) != 0)
				return BELLOWS_EIO;
			fputc(',', out);
			tool_metrics_put_number(out, level[l]);
			fputc('\n', out);
		}
	}
	return ferror(out) ? BELLOWS_EIO : 0;
}

static bool
replay_same(double a, double b)
{
	return a == b || (isnan(a) && isnan(b));
}

static int
replay_compare_batch(const tool_replay *rp, const tool_hdb_replay *rec,
    bool all, FILE *out, tool_replay_diff *d)
{
	fprintf(out,
	    "window,recorded_batch_size,replayed_batch_size,"
	    "recorded_lr_scale,replayed_lr_scale\n");
	for (uint64_t i = 0; i < rp->n_windows; i++) {
		bool differ = rec->batch_size[i] != rp->batch_size[i] ||
		    !replay_same(rec->lr_scale[i], rp->lr_scale[i]);

		d->rows++;
		d->differ += differ;
		if (i > 0) {
			d->changes_recorded += rec->batch_size[i] !=
				rec->batch_size[i - 1] ||
			    !replay_same(rec->lr_scale[i],
				rec->lr_scale[i - 1]);
			d->changes_replayed += rp->batch_size[i] !=
				rp->batch_size[i - 1] ||
			    !replay_same(rp->lr_scale[i], rp->lr_scale[i - 1]);
		}
		if (differ || all) {
			fprintf(out, "%" PRIu64 ",%" PRIu32 ",%" PRIu32 ",",
			    rec->window[i], rec->batch_size[i],
			    rp->batch_size[i]);
			tool_metrics_put_number(out, rec->lr_scale[i]);
			fputc(',', out);
			tool_metrics_put_number(out, rp->lr_scale[i]);
			fputc('\n', out);
		}
	}
	return ferror(out) ? BELLOWS_EIO : 0;
}

int
tool_replay_compare(const tool_replay *rp, const tool_hdb_replay *rec, bool all,
    FILE *out, tool_replay_diff *ret)
{
	tool_replay_diff d = { .windows = rp->n_windows };
	uint32_t nl = rp->n_layers;
	int r;

	assert(rp->n_windows == rec->n_windows && nl == rec->n_layers);
	for (uint64_t i = 0; rec->size_threshold != NULL && i < rp->n_windows;
	     i++)
		d.gate_differ += rp->threshold[i] != rec->size_threshold[i] ||
		    rp->gate_off[i] != rec->compression_off[i];
	for (uint64_t i = 0; rec->table_hash != NULL && i < rp->n_windows;
	     i++) {
		d.table_differ += rp->table_hash[i] != rec->table_hash[i];
		d.tables_any = d.tables_any || rp->table_hash[i] != 0 ||
		    rec->table_hash[i] != 0;
		if (i > 0) {
			d.tables_recorded += rec->table_hash[i] !=
			    rec->table_hash[i - 1];
			d.tables_replayed += rp->table_hash[i] !=
			    rp->table_hash[i - 1];
		}
	}
	for (uint64_t i = 0; rec->layer_stats != NULL && i < rp->n_windows; i++)
		for (uint32_t l = 0; l < nl; l++)
			d.bound_differ +=
			    !replay_same(rec->layer_stats[(size_t)i * nl + l]
					     .error_bound,
				rp->error_bound[(size_t)i * nl + l]);
	for (uint64_t i = 0; rec->resid_plan != NULL && i < rp->n_windows; i++)
		for (uint32_t l = 0; l < nl; l++) {
			size_t at = 3 * ((size_t)i * nl + l);
			const double *had = &rec->resid_plan[at];
			const double *got = &rp->resid_plan[at];

			if (isnan(had[0]))
				continue;
			d.plan_rows++;
			d.plan_differ += had[0] != got[0] ||
			    !replay_same(had[1], got[1]) ||
			    !replay_same(had[2], got[2]);
			d.plan_planned += had[0] != (double)l ||
			    got[0] != (double)l || had[1] != 1.0 ||
			    got[1] != 1.0 || had[2] != 1.0 || got[2] != 1.0;
		}
	if (rp->batch) {
		r = replay_compare_batch(rp, rec, all, out, &d);
		*ret = d;
		return r;
	}
	fprintf(out, "window,layer,recorded,replayed\n");
	for (uint64_t i = 0; i < rp->n_windows; i++) {
		const double *got = rp->level + (size_t)i * nl;
		const double *had = rec->level + (size_t)i * nl;
		const double *got0 = i > 0 ? got - nl : got;
		const double *had0 = i > 0 ? had - nl : had;

		for (uint32_t l = 0; l < nl; l++) {
			bool differ = !replay_same(had[l], got[l]);

			d.rows++;
			d.differ += differ;
			d.changes_recorded += !replay_same(had[l], had0[l]);
			d.changes_replayed += !replay_same(got[l], got0[l]);
			if (!differ && !all)
				continue;
			fprintf(out, "%" PRIu64 ",", rec->window[i]);
			if (tool_metrics_put_field(out, rec->layers[l].name) !=
			    0)
				return BELLOWS_EIO;
			fputc(',', out);
			tool_metrics_put_number(out, had[l]);
			fputc(',', out);
			tool_metrics_put_number(out, got[l]);
			fputc('\n', out);
		}
	}
	*ret = d;
	return ferror(out) ? BELLOWS_EIO : 0;
}

/* ---- the subcommand ---------------------------------------------------- */

typedef struct replay_opts {
	com_args_shared sh;  /* --db, --run, --job (NULL: the default) */
	const char *policy;  /* --policy */
	const char *metrics; /* --metrics */
	bool all;            /* --all */
} replay_opts;

static const replay_opts replay_defaults = { .sh = { .db = NULL } };

static const com_opt replay_opt_rows[] = {
	{ .name = "policy",
	    .arg = "FILE",
	    .help = "bellowsd's configuration (YAML)",
	    .kind = COM_OPT_TEXT,
	    .at = offsetof(replay_opts, policy),
	    .min = 1 },
	{ .name = "metrics",
	    .arg = "FILE",
	    .help = "recorded metrics: CSV with columns window, layer, "
		    "grad_norm, lr [, numel, shape]; - reads standard input",
	    .kind = COM_OPT_TEXT,
	    .at = offsetof(replay_opts, metrics),
	    .min = 1 },
	{ .name = "all",
	    .help = "with --db: every row, not only differences",
	    .kind = COM_OPT_FLAG,
	    .at = offsetof(replay_opts, all) },
};

static const com_args_cmd replay_cmd = {
	.name = "replay",
	.shared = COM_ARGS_TAKES(COM_ARGS_DB) |
	    COM_ARGS_TAKES(COM_ARGS_RUN) | COM_ARGS_TAKES(COM_ARGS_JOB),
	.shared_at = offsetof(replay_opts, sh),
	.notes = {
		[COM_ARGS_DB] = "the input instead of --metrics",
		[COM_ARGS_RUN] = "with --db only",
		[COM_ARGS_JOB] = "matched against the configuration (default: "
				  "the run's job with --db, else "
				  REPLAY_DEFAULT_JOB ")",
	},
	.opts = replay_opt_rows,
	.n_opts = sizeof(replay_opt_rows) / sizeof(replay_opt_rows[0]),
	.usage = tool_replay_usage,
};

void
tool_replay_usage(FILE *f)
{
	fputs(
	    "usage: bellows replay --policy FILE --metrics FILE.csv "
	    "[--job NAME]\n"
	    "       bellows replay --policy FILE --db FILE [--run ID] "
	    "[--job NAME] [--all]\n"
	    "\n"
	    "  Runs the policies FILE configures for job NAME over recorded\n"
	    "  per-window gradient norms and LRs, as bellowsd would have\n"
	    "  run them. With --metrics it prints the state in force during\n"
	    "  every window as CSV: window,layer,level (a row per window and\n"
	    "  layer), or window,batch_size,lr_scale when the policies set\n"
	    "  the batch size. With --db it replays a run of bellowsd's\n"
	    "  history, every window whole as bellowsd handed it to the\n"
	    "  policies, and prints where the replay differs from what the\n"
	    "  run had in force: window,layer,recorded,replayed, and a\n"
	    "  summary on standard error (also of the size threshold and\n"
	    "  compression gate). See docs/replay.md.\n"
	    "\n",
	    f);
	com_args_help(f, &replay_cmd, &replay_defaults);
}

/* Returns -1 to go on, else the exit code. */
static int
replay_parse(int argc, char **argv, replay_opts *o)
{
	int next, rc;

	*o = replay_defaults;
	if ((rc = com_args_parse(&replay_cmd, argc, argv, o, &next)) >= 0)
		return rc;
	if (o->sh.db != NULL && o->metrics != NULL) {
		fprintf(stderr,
		    "bellows replay: --metrics and --db are two inputs; give "
		    "one\n");
		return 2;
	}
	if (o->sh.db == NULL && (o->sh.run != 0 || o->all)) {
		fprintf(stderr, "bellows replay: %s needs --db\n",
		    o->sh.run != 0 ? "--run" : "--all");
		return 2;
	}
	if (o->policy == NULL || (o->metrics == NULL && o->sh.db == NULL)) {
		fprintf(stderr, "bellows replay: %s is required\n",
		    o->policy == NULL ? "--policy" : "--metrics or --db");
		tool_replay_usage(stderr);
		return 2;
	}
	return -1;
}

/* The replay input of a recorded run: the norm policies saw as grad_norm
 * is rank 0's, or the mean where rank 0 did not report, as in bellowsd's
 * window aggregate. Returns 0 or BELLOWS_ENOMEM; free *ret_norm. */
static int
replay_input_hdb(const tool_hdb_replay *rec, tool_replay_input *in,
    double **ret_norm)
{
	size_t n = (size_t)rec->n_windows * rec->n_layers;
	double *norm = malloc((n ? n : 1) * sizeof(*norm));

	if (norm == NULL)
		return BELLOWS_ENOMEM;
	for (size_t i = 0; i < n; i++)
		norm[i] = !isnan(rec->norm_rank0[i]) ? rec->norm_rank0[i]
						     : rec->norm_mean[i];
	*in = (tool_replay_input){
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
	*ret_norm = norm;
	return 0;
}

/* Reads run o->sh.run (or the latest) of the history into *ret_rec and
 * names it in *ret_run (both the caller's). Returns 0, or 1 after saying
 * why. */
static int
replay_load_run(const replay_opts *o, tool_hdb_replay **ret_rec,
    tool_hdb_run *ret_run)
{
	char err[TOOL_HDB_ERR_MAX];
	tool_hdb_run run = { 0 };
	tool_hdb *db = NULL;
	int rc = 1;

	if (tool_hdb_open(o->sh.db, &db, err, sizeof(err)) != 0) {
		fprintf(stderr, "bellows replay: %s\n", err);
		return 1;
	}
	if (tool_hdb_begin(db) != 0 ||
	    tool_hdb_run_find(db, o->sh.run != 0 ? o->sh.run : TOOL_HDB_NONE,
		NULL, &run) != 0 ||
	    tool_hdb_replay_load(db, run.id, ret_rec) != 0) {
		fprintf(stderr, "bellows replay: %s: %s\n", o->sh.db,
		    tool_hdb_error(db));
		tool_hdb_run_fini(&run);
		goto out;
	}
	if (o->sh.run == 0)
		fprintf(stderr,
		    "bellows replay: run %" PRId64
		    " (job '%s', %s), the latest; --run picks another\n",
		    run.id, run.job, run.live ? "live" : "ended");
	*ret_run = run;
	rc = 0;
out:
	tool_hdb_close(&db); /* ends the read transaction */
	return rc;
}

/* `bellows replay --db`: replays a run of the history and compares. */
static int
replay_main_db(const replay_opts *o, const ctl_config *cfg)
{
	char err[CTL_CONFIG_ERR_MAX];
	tool_hdb_replay *rec = NULL;
	tool_hdb_run run = { 0 };
	const ctl_job_conf *jc;
	tool_replay *rp = NULL;
	tool_replay_input in;
	tool_replay_diff d;
	double *norm = NULL;
	const char *job;
	int rc = 1;

	if (replay_load_run(o, &rec, &run) != 0)
		return 1;
	job = o->sh.job != NULL ? o->sh.job : run.job;
	if ((jc = ctl_config_match(cfg, job)) == NULL) {
		fprintf(stderr,
		    "bellows replay: no job entry of %s matches job '%s' "
		    "(see --job)\n",
		    o->policy, job);
		goto out;
	}
	if (rec->n_windows == 0) {
		fprintf(stderr,
		    "bellows replay: run %" PRId64
		    " has no closed window with every layer's row%s\n",
		    run.id, rec->n_skipped > 0 ? "" : " (no window closed)");
		goto out;
	}
	if (replay_input_hdb(rec, &in, &norm) != 0) {
		fprintf(stderr, "bellows replay: %s\n",
		    bellows_strerror(BELLOWS_ENOMEM));
		goto out;
	}
	if (tool_replay_run_input(jc, job, &in, stderr, &rp, err,
		sizeof(err)) != 0) {
		fprintf(stderr, "bellows replay: %s\n", err);
		goto out;
	}
	if (tool_replay_compare(rp, rec, o->all, stdout, &d) != 0 ||
	    fflush(stdout) != 0) {
		fprintf(stderr, "bellows replay: cannot write the output\n");
		goto out;
	}
	fprintf(stderr,
	    "bellows replay: run %" PRId64 " (job '%s') against %s: %" PRIu64
	    " windows compared",
	    run.id, run.job, o->policy, d.windows);
	if (rec->n_skipped > 0)
		fprintf(stderr, " (%" PRIu64 " skipped: rows missing)",
		    rec->n_skipped);
	fprintf(stderr,
	    ", %" PRIu64 " of %" PRIu64 " %s differ; %s changes: recorded "
	    "%" PRIu64 ", replayed %" PRIu64 "\n",
	    d.differ, d.rows, rp->batch ? "windows" : "rows",
	    rp->batch ? "batch size" : "level", d.changes_recorded,
	    d.changes_replayed);
	fprintf(stderr,
	    "bellows replay: size threshold or compression gate: %" PRIu64
	    " of %" PRIu64 " windows differ\n",
	    d.gate_differ, d.windows);
	fprintf(stderr,
	    "bellows replay: activation error bounds: %" PRIu64 " of %" PRIu64
	    " rows differ\n",
	    d.bound_differ, d.windows * rp->n_layers);
	/* Only for runs that planned residuals: older outputs stay. */
	if (d.plan_planned > 0)
		fprintf(stderr,
		    "bellows replay: residual plans: %" PRIu64 " of %" PRIu64
		    " rows differ\n",
		    d.plan_differ, d.plan_rows);
	/* Only for a run or a replay with codec tables: the summary of
	 * others stays what it was. */
	if (d.tables_any)
		fprintf(stderr,
		    "bellows replay: codec tables: %" PRIu64 " of %" PRIu64
		    " windows differ; table changes: recorded %" PRIu64
		    ", replayed %" PRIu64 "\n",
		    d.table_differ, d.windows, d.tables_recorded,
		    d.tables_replayed);
	rc = 0;
out:
	free(norm);
	tool_replay_destroy(&rp);
	tool_hdb_replay_destroy(&rec);
	tool_hdb_run_fini(&run);
	return rc;
}

int
tool_replay_main(int argc, char **argv)
{
	char err[CTL_CONFIG_ERR_MAX > TOOL_METRICS_ERR_MAX
		? CTL_CONFIG_ERR_MAX
		: TOOL_METRICS_ERR_MAX];
	const ctl_job_conf *jc;
	ctl_config *cfg = NULL;
	tool_metrics *m = NULL;
	tool_replay *rp = NULL;
	const char *job;
	replay_opts o;
	int rc, r;

	if ((rc = replay_parse(argc, argv, &o)) >= 0)
		return rc;
	/* A command-line tool may die with a faulty plug-in: replay runs
	 * plug-ins here, as it runs the built-ins (docs/replay.md). */
	ctl_plugin_set_in_process(true);
	rc = 1;
	err[0] = '\0';
	if ((r = ctl_config_load(o.policy, &cfg, err, sizeof(err))) != 0) {
		fprintf(stderr, "%s\n",
		    err[0] != '\0' ? err : bellows_strerror(r));
		goto out;
	}
	if (o.sh.db != NULL) {
		rc = replay_main_db(&o, cfg);
		goto out;
	}
	job = o.sh.job != NULL ? o.sh.job : REPLAY_DEFAULT_JOB;
	if ((jc = ctl_config_match(cfg, job)) == NULL) {
		fprintf(stderr,
		    "bellows replay: no job entry of %s matches job '%s' "
		    "(see --job)\n",
		    o.policy, job);
		goto out;
	}
	if (tool_metrics_load(o.metrics, &m, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s\n", err);
		goto out;
	}
	if (m->n_unshaped > 0)
		fprintf(stderr,
		    "bellows replay: warning: %s gives no shape for %u of %u "
		    "layers; they are taken as 2-D matrices of unknown size\n",
		    strcmp(o.metrics, "-") == 0 ? "<stdin>" : o.metrics,
		    m->n_unshaped, m->n_layers);
	if (tool_replay_run(jc, job, m, stderr, &rp, err, sizeof(err)) != 0) {
		fprintf(stderr, "bellows replay: %s\n", err);
		goto out;
	}
	if (tool_replay_print(rp, m, stdout) != 0 || fflush(stdout) != 0) {
		fprintf(stderr, "bellows replay: cannot write the output\n");
		goto out;
	}
	rc = 0;
out:
	tool_replay_destroy(&rp);
	tool_metrics_destroy(&m);
	ctl_config_destroy(&cfg);
	return rc;
}
