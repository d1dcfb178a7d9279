/* replay - `bellows replay`, see replay.h.
 *
 * The window handed to the policies is built here rather than through the
 * controller's window aggregate: a recorded window is not a set of rank
 * reports, and the fields it lacks must read as "not measured" (0), the
 * same on every replay.
 */
#include "replay.h"

#include "msg.h"
#include "policy_host.h"

#include <bellows/error.h>
#include <bellows/policy.h>

#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define REPLAY_DEFAULT_JOB "replay"

void
tool_replay_usage(FILE *f)
{
	fprintf(f,
	    "usage: bellows replay --policy FILE --metrics FILE.csv "
	    "[--job NAME]\n"
	    "\n"
	    "  Runs the policies FILE configures for job NAME over recorded\n"
	    "  per-window gradient norms and LRs, as bellowsd would have run\n"
	    "  them, and prints the state in force during every window as\n"
	    "  CSV: window,layer,level (a row per window and layer), or\n"
	    "  window,batch_size,lr_scale when the policies set the batch\n"
	    "  size. See docs/replay.md.\n"
	    "\n"
	    "  --policy FILE     bellowsd's configuration (YAML)\n"
	    "  --metrics FILE    recorded metrics: CSV with columns window,\n"
	    "                    layer, grad_norm, lr [, numel, shape];\n"
	    "                    - reads standard input\n"
	    "  --job NAME        job name matched against the configuration\n"
	    "                    (default %s)\n"
	    "  --db FILE --run ID  replay a run of the history database\n"
	    "                    (not available yet)\n",
	    REPLAY_DEFAULT_JOB);
}

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
	free(t);
	*rp = NULL;
}

static tool_replay *
replay_alloc(const tool_metrics *m)
{
	tool_replay *rp = calloc(1, sizeof(*rp));
	size_t nw = m->n_windows ? (size_t)m->n_windows : 1;
	size_t nl = m->n_layers ? m->n_layers : 1;

	if (rp == NULL)
		return NULL;
	rp->n_windows = m->n_windows;
	rp->n_layers = m->n_layers;
	if (nw > SIZE_MAX / sizeof(double) / nl)
		goto fail;
	rp->level = malloc(nw * nl * sizeof(double));
	rp->batch_size = malloc(nw * sizeof(uint32_t));
	rp->lr_scale = malloc(nw * sizeof(double));
	if (rp->level == NULL || rp->batch_size == NULL || rp->lr_scale == NULL)
		goto fail;
	return rp;
fail:
	tool_replay_destroy(&rp);
	return NULL;
}

/* The LR the window after window i starts with, as bellowsd would have
 * heard it: the next recorded window's, the window's own for the last one
 * and, as agents report it, when the next is 0. */
static double
replay_lr_next(const tool_metrics *m, uint64_t i)
{
	if (i + 1 < m->n_windows && m->lr[i + 1] > 0)
		return m->lr[i + 1];
	return m->lr[i];
}

/* Fills *w and wl (m->n_layers entries) with recorded window i under the
 * state in force. */
static void
replay_view(const tool_metrics *m, uint64_t i, const char *job,
    const com_decision *in_force, bellows_window_layer *wl, bellows_window *w)
{
	const double *norm = m->grad_norm + (size_t)i * m->n_layers;

	for (uint32_t l = 0; l < m->n_layers; l++) {
		const com_layer_info *li = &m->layers[l];

		wl[l] = (bellows_window_layer){
			.name = li->name,
			.numel = li->numel,
			.ndim = li->ndim,
			.shape = li->shape,
			.grad_norm = norm[l],
			.grad_norm_rank0 = norm[l],
			.grad_norm_mean = norm[l],
			.level = in_force->level[l],
			.error_bound = in_force->error_bound[l],
		};
	}
	*w = (bellows_window){
		.job = job,
		.window = m->window[i],
		.lr = m->lr[i],
		.lr_next = replay_lr_next(m, i),
		.batch_size = in_force->batch_size,
		.lr_scale = in_force->lr_scale,
		.world = 1,
		.ranks_reported = 1,
		.n_layers = m->n_layers,
		.layers = wl,
	};
}

int
tool_replay_run(const ctl_job_conf *jc, const char *job, const tool_metrics *m,
    FILE *warn, tool_replay **ret, char *errbuf, size_t errlen)
{
	char policies[256], reason[1024];
	bellows_window_layer *wl = NULL;
	ctl_policy_set *set = NULL;
	tool_replay *rp = NULL;
	com_decision state;
	int r;

	errbuf[0] = '\0';
	reason[0] = '\0';
	if ((r = com_decision_init(&state, job, m->n_layers)) != 0)
		goto fail;
	r = ctl_policy_set_new(jc, job, 1, m->layers, m->n_layers, &state,
	    reason, sizeof(reason), &set);
	if (r != 0) {
		snprintf(errbuf, errlen, "%s", reason);
		goto fail;
	}
	r = BELLOWS_ENOMEM;
	wl = calloc(m->n_layers ? m->n_layers : 1, sizeof(*wl));
	if (wl == NULL || (rp = replay_alloc(m)) == NULL)
		goto fail;
	for (uint32_t i = 0; i < jc->n_policies; i++) {
		if (jc->policies[i].ops->knobs & BELLOWS_KNOB_BATCH_SIZE)
			rp->batch = true;
	}
	for (uint64_t i = 0; i < m->n_windows; i++) {
		bellows_window w;
		uint32_t failed = 0;

		memcpy(rp->level + (size_t)i * m->n_layers, state.level,
		    sizeof(double) * m->n_layers);
		rp->batch_size[i] = state.batch_size;
		rp->lr_scale[i] = state.lr_scale;
		replay_view(m, i, job, &state, wl, &w);
		r = ctl_policy_set_run(set, &w, &state, policies,
		    sizeof(policies), reason, sizeof(reason), &failed);
		if (r != 0)
			goto fail;
		rp->failures += failed;
		if (failed > 0 && warn != NULL)
			fprintf(warn,
			    "bellows replay: window %" PRIu64
			    ": %u policies failed; their knobs stay as they "
			    "were\n",
			    m->window[i], failed);
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
tool_replay_print(const tool_replay *rp, const tool_metrics *m, FILE *out)
{
	if (rp->batch) {
		fprintf(out, "window,batch_size,lr_scale\n");
		for (uint64_t i = 0; i < rp->n_windows; i++)
			fprintf(out, "%" PRIu64 ",%" PRIu32 ",%.17g\n",
			    m->window[i], rp->batch_size[i], rp->lr_scale[i]);
		return ferror(out) ? BELLOWS_EIO : 0;
	}
	fprintf(out, "window,layer,level\n");
	for (uint64_t i = 0; i < rp->n_windows; i++) {
		const double *level = rp->level + (size_t)i * rp->n_layers;

		for (uint32_t l = 0; l < rp->n_layers; l++) {
			fprintf(out, "%" PRIu64 ",", m->window[i]);
			if (tool_metrics_put_field(out, m->layers[l].name) != 0)
				return BELLOWS_EIO;
			fprintf(out, ",%.17g\n", level[l]);
		}
	}
	return ferror(out) ? BELLOWS_EIO : 0;
}

/* ---- the subcommand ---------------------------------------------------- */

typedef struct replay_opts {
	const char *policy;  /* --policy */
	const char *metrics; /* --metrics */
	const char *job;     /* --job */
	const char *db;      /* --db, refused for now */
	const char *run;     /* --run, refused for now */
} replay_opts;

/* Returns -1 to go on, else the exit code. */
static int
replay_parse(int argc, char **argv, replay_opts *o)
{
	enum {
		OPT_POLICY = 256,
		OPT_METRICS,
		OPT_JOB,
		OPT_DB,
		OPT_RUN,
		OPT_HELP,
	};
	static const struct option opts[] = {
		{ "policy", required_argument, NULL, OPT_POLICY },
		{ "metrics", required_argument, NULL, OPT_METRICS },
		{ "job", required_argument, NULL, OPT_JOB },
		{ "db", required_argument, NULL, OPT_DB },
		{ "run", required_argument, NULL, OPT_RUN },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	*o = (replay_opts){ .job = REPLAY_DEFAULT_JOB };
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case OPT_POLICY:
			o->policy = optarg;
			break;
		case OPT_METRICS:
			o->metrics = optarg;
			break;
		case OPT_JOB:
			o->job = optarg;
			break;
		case OPT_DB:
			o->db = optarg;
			break;
		case OPT_RUN:
			o->run = optarg;
			break;
		case 'h':
		case OPT_HELP:
			tool_replay_usage(stdout);
			return 0;
		default:
			tool_replay_usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "bellows replay: unexpected argument '%s'\n",
		    argv[optind]);
		return 2;
	}
	if (o->db != NULL || o->run != NULL) {
		fprintf(stderr,
		    "bellows replay: --db/--run (replaying a run of the "
		    "history database) is not available yet; record the run's "
		    "metrics as CSV and use --metrics\n");
		return 2;
	}
	if (o->policy == NULL || o->metrics == NULL) {
		fprintf(stderr, "bellows replay: %s is required\n",
		    o->policy == NULL ? "--policy" : "--metrics");
		tool_replay_usage(stderr);
		return 2;
	}
	if (o->job[0] == '\0') {
		fprintf(stderr, "bellows replay: --job must not be empty\n");
		return 2;
	}
	return -1;
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
	replay_opts o;
	int rc, r;

	if ((rc = replay_parse(argc, argv, &o)) >= 0)
		return rc;
	rc = 1;
	err[0] = '\0';
	if ((r = ctl_config_load(o.policy, &cfg, err, sizeof(err))) != 0) {
		fprintf(stderr, "%s\n",
		    err[0] != '\0' ? err : bellows_strerror(r));
		goto out;
	}
	if ((jc = ctl_config_match(cfg, o.job)) == NULL) {
		fprintf(stderr,
		    "bellows replay: no job entry of %s matches job '%s' "
		    "(see --job)\n",
		    o.policy, o.job);
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
	if (tool_replay_run(jc, o.job, m, stderr, &rp, err, sizeof(err)) != 0) {
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
