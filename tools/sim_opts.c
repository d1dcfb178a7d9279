/* sim_opts - the options of `bellows sim`, see sim_opts.h.
 *
 * Numbers go through args.h, so that a bad value reads as it does in
 * every other subcommand; lists of numbers (--comm-model, --act, --mem)
 * are parsed here, each refused with the form it must have.
 */
#include "sim_opts.h"

#include "common/args.h"
#include "client/client.h"
#include "common/clock.h"
#include "common/msg.h"

#include <bellows/error.h>

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

/* ---- options ----------------------------------------------------------- */

static int
sim_parse_kill(const char *cmd, const char *opt, const char *text, void *opts)
{
	sim_opts *o = opts;

	(void)cmd;
	(void)opt;
	const char *colon = strchr(text, ':');
	char rank[32];

	if (colon == NULL || (size_t)(colon - text) >= sizeof(rank)) {
		fprintf(stderr,
		    "bellows sim: --kill must be RANK:WINDOW, not '%s'\n",
		    text);
		return BELLOWS_EINVAL;
	}
	memcpy(rank, text, (size_t)(colon - text));
	rank[colon - text] = '\0';
	if (com_args_u32("sim", "the RANK of --kill", rank, 0,
		SIM_MAX_RANKS - 1, &o->kill_rank) != 0 ||
	    com_args_u32("sim", "the WINDOW of --kill", colon + 1, 1,
		UINT32_MAX, &o->kill_window) != 0)
		return BELLOWS_EINVAL;
	o->kill = true;
	return 0;
}

/* Parses "X,Y,..." into v: at least n_min and at most n_max finite
 * numbers, each >= 0 (the first n_pos > 0). */
static int
sim_parse_list(const char *opt, const char *text, const char *form,
    uint32_t n_min, uint32_t n_max, uint32_t n_pos, double *v, uint32_t *ret_n)
{
	const char *p = text;
	uint32_t n = 0;

	for (;;) {
		char *end;
		double x;

		errno = 0;
		x = strtod(p, &end);
		if (end == p || errno != 0 || !isfinite(x) || x < 0 ||
		    (n < n_pos && x <= 0) || n == n_max ||
		    (*end != ',' && *end != '\0'))
			goto bad;
		v[n++] = x;
		if (*end == '\0')
			break;
		p = end + 1;
	}
	if (n < n_min)
		goto bad;
	*ret_n = n;
	return 0;
bad:
	fprintf(stderr,
	    "bellows sim: %s must be %s (numbers >= 0, the first %u > 0), "
	    "not '%s'\n",
	    opt, form, n_pos, text);
	return BELLOWS_EINVAL;
}

static int
sim_parse_comm(const char *cmd, const char *opt, const char *text, void *opts)
{
	sim_opts *o = opts;

	(void)cmd;
	(void)opt;
	double v[5] = { 0 };
	uint32_t n;

	if (sim_parse_list("--comm-model", text, "A,G,R,C[,M]", 4, 5, 3, v,
		&n) != 0)
		return BELLOWS_EINVAL;
	if (v[2] < 1) {
		fprintf(stderr,
		    "bellows sim: the compression ratio R of --comm-model "
		    "must be at least 1, not %g\n",
		    v[2]);
		return BELLOWS_EINVAL;
	}
	o->comm_model = true;
	o->alpha_ms = v[0];
	o->gbps = v[1];
	o->ratio = v[2];
	o->codec_ms = v[3];
	o->codec_ms_per_mb = v[4];
	return 0;
}

static int
sim_parse_act(const char *cmd, const char *opt, const char *text, void *opts)
{
	sim_opts *o = opts;

	(void)cmd;
	(void)opt;
	double v[3];
	uint32_t n;

	if (sim_parse_list("--act", text, "LBAR,R,RATIO", 3, 3, 0, v, &n) != 0)
		return BELLOWS_EINVAL;
	if (v[1] > 1 || v[2] < 1) {
		fprintf(stderr,
		    "bellows sim: --act needs R in [0, 1] and RATIO >= 1, "
		    "not '%s'\n",
		    text);
		return BELLOWS_EINVAL;
	}
	o->act = true;
	o->act_lbar = v[0];
	o->act_nonzero = v[1];
	o->act_ratio = v[2];
	return 0;
}

static int
sim_parse_mem(const char *cmd, const char *opt, const char *text, void *opts)
{
	sim_opts *o = opts;

	(void)cmd;
	(void)opt;
	double v[2];
	uint32_t n;

	if (sim_parse_list("--mem", text, "TOTAL_MB,USED_MB", 2, 2, 1, v, &n) !=
	    0)
		return BELLOWS_EINVAL;
	if (v[0] > 1e9 || v[1] > v[0]) {
		fprintf(stderr,
		    "bellows sim: --mem needs USED_MB <= TOTAL_MB <= 1e9, "
		    "not '%s'\n",
		    text);
		return BELLOWS_EINVAL;
	}
	o->mem_total = (uint64_t)(v[0] * 1048576.0);
	o->mem_used = (uint64_t)(v[1] * 1048576.0);
	return 0;
}

static int
sim_parse_double(const char *opt, const char *text, double max, double *ret)
{
	double v;
	uint32_t n;

	if (sim_parse_list(opt, text, "a number", 1, 1, 0, &v, &n) != 0)
		return BELLOWS_EINVAL;
	if (v > max) {
		fprintf(stderr, "bellows sim: %s must be at most %g, not %g\n",
		    opt, max, v);
		return BELLOWS_EINVAL;
	}
	*ret = v;
	return 0;
}

static int
sim_parse_down(const char *cmd, const char *opt, const char *text, void *opts)
{
	sim_opts *o = opts;

	if (com_args_u32(cmd, opt, text, 0, 600000, &o->down_ms) != 0)
		return BELLOWS_EINVAL;
	o->down_given = true;
	return 0;
}

static int
sim_parse_noise(const char *cmd, const char *opt, const char *text, void *opts)
{
	(void)cmd;
	return sim_parse_double(opt, text, 0.5,
	    &((sim_opts *)opts)->comm_noise);
}

static int
sim_parse_backward(const char *cmd, const char *opt, const char *text,
    void *opts)
{
	(void)cmd;
	return sim_parse_double(opt, text, 600000,
	    &((sim_opts *)opts)->backward_ms);
}

static int
sim_parse_eval(const char *cmd, const char *opt, const char *text, void *opts)
{
	sim_opts *o = opts;

	(void)cmd;
	if (sim_parse_double(opt, text, 1, &o->eval_final) != 0)
		return BELLOWS_EINVAL;
	if (!(o->eval_final > 0)) {
		fprintf(stderr, "bellows sim: %s must be above 0, not %g\n",
		    opt, o->eval_final);
		return BELLOWS_EINVAL;
	}
	return 0;
}

static int
sim_parse_step_model(const char *cmd, const char *opt, const char *text,
    void *opts)
{
	static const char *const names[] = { "wall", "sync", "overlap" };
	sim_opts *o = opts;

	(void)cmd;
	for (uint32_t i = 0; i < 3; i++) {
		if (strcmp(text, names[i]) == 0) {
			o->step_model = i;
			return 0;
		}
	}
	fprintf(stderr,
	    "bellows sim: %s must be wall, sync or overlap, not '%s'\n", opt,
	    text);
	return BELLOWS_EINVAL;
}

static int
sim_parse_aggregate(const char *cmd, const char *opt, const char *text,
    void *opts)
{
	static const char *const names[] = { "rank", "node", "job" };
	sim_opts *o = opts;

	(void)cmd;
	for (uint32_t i = 0; i < 3; i++) {
		if (strcmp(text, names[i]) == 0) {
			o->aggregate = i;
			return 0;
		}
	}
	fprintf(stderr, "bellows sim: %s must be rank, node or job, not '%s'\n",
	    opt, text);
	return BELLOWS_EINVAL;
}

#define SIM_STR_(x) #x
#define SIM_STR(x)  SIM_STR_(x)

static const sim_opts sim_defaults = {
	.seed = 1,
	.decision_timeout_ms = 5000,
	.down_ms = 3000,
	.comm_noise = 0.02,
	.node_ranks = 2,
};

/* Each row as `bellows sim --help` lists it; the limits are those of
 * SIM_MAX_*. */
static const com_opt sim_opt_rows[] = {
	{ .name = "control",
	    .arg = "EP",
	    .help = "bellowsd's control endpoint",
	    .kind = COM_OPT_NAME,
	    .at = offsetof(sim_opts, control),
	    .min = 1,
	    .max = 1024 },
	{ .name = "publish",
	    .arg = "EP",
	    .help = "bellowsd's publish endpoint",
	    .kind = COM_OPT_NAME,
	    .at = offsetof(sim_opts, publish),
	    .min = 1,
	    .max = 1024 },
	{ .name = "ranks",
	    .arg = "N",
	    .help = "ranks, 1.." SIM_STR(SIM_MAX_RANKS),
	    .kind = COM_OPT_U32,
	    .at = offsetof(sim_opts, ranks),
	    .min = 1,
	    .max = SIM_MAX_RANKS },
	{ .name = "layers",
	    .arg = "L",
	    .help = "layers in the model, 1.." SIM_STR(SIM_MAX_LAYERS),
	    .kind = COM_OPT_U32,
	    .at = offsetof(sim_opts, layers),
	    .min = 1,
	    .max = SIM_MAX_LAYERS },
	{ .name = "windows",
	    .arg = "W",
	    .help = "windows to run",
	    .kind = COM_OPT_U32,
	    .at = offsetof(sim_opts, windows),
	    .min = 1,
	    .max = SIM_MAX_RECORDS },
	{ .name = "steps-per-window",
	    .arg = "S",
	    .help = "steps in a window",
	    .kind = COM_OPT_U32,
	    .at = offsetof(sim_opts, steps),
	    .min = 1,
	    .max = SIM_MAX_RECORDS },
	{ .name = "step-ms",
	    .arg = "MS",
	    .help = "extra time per step (default 0)",
	    .kind = COM_OPT_U32,
	    .at = offsetof(sim_opts, step_ms),
	    .max = 60000 },
	{ .name = "seed",
	    .arg = "X",
	    .help = "gradient noise seed (default 1)",
	    .kind = COM_OPT_U64,
	    .at = offsetof(sim_opts, seed),
	    .max = UINT64_MAX },
	{ .name = "decision-timeout-ms",
	    .arg = "T",
	    .help = "agents' longest wait for a decision (default 5000)",
	    .kind = COM_OPT_U32,
	    .at = offsetof(sim_opts, decision_timeout_ms),
	    .min = 1,
	    .max = 600000 },
	{ .name = "kill",
	    .arg = "RANK:WINDOW",
	    .help = "SIGKILL RANK at the start of WINDOW and start it again "
		    "as a new process",
	    .kind = COM_OPT_PARSE,
	    .parse = sim_parse_kill },
	{ .name = "down-ms",
	    .arg = "MS",
	    .help = "how long it stays down (default 3000)",
	    .kind = COM_OPT_PARSE,
	    .parse = sim_parse_down },
	{ .name = "quiet",
	    .help = "rank 0 does not print each decision",
	    .kind = COM_OPT_FLAG,
	    .at = offsetof(sim_opts, quiet) },
	{ .name = "exp-hist",
	    .help = "the 2-D layers report their gradients' exponent "
		    "histograms (BELLOWS_LAYER_EXP_HIST, what the gcomp "
		    "policy builds its tables from); every rank's codec table "
		    "is checked at every step like its decision",
	    .kind = COM_OPT_FLAG,
	    .at = offsetof(sim_opts, exp_hist) },
	{ .name = "record-metrics",
	    .arg = "FILE",
	    .help = "rank 0 writes each closed window's gradient norms and "
		    "LR, the input of bellows replay (window,layer,grad_norm,"
		    "lr,numel,shape)",
	    .kind = COM_OPT_NAME,
	    .at = offsetof(sim_opts, record_metrics),
	    .min = 1,
	    .max = 4096 },
	{ .name = "record-levels",
	    .arg = "FILE",
	    .help = "rank 0 writes the levels bellowsd decided for each "
		    "window whose decision it applied (window,layer,level)",
	    .kind = COM_OPT_NAME,
	    .at = offsetof(sim_opts, record_levels),
	    .min = 1,
	    .max = 4096 },
	{ .name = "run-id",
	    .arg = "ID",
	    .help = "this launch's identity, the same for every rank "
		    "(default: one drawn at random, so each sim is a new run)",
	    .kind = COM_OPT_NAME,
	    .at = offsetof(sim_opts, run_id),
	    .min = 1,
	    .max = 255 },
	{ .name = "start-window",
	    .arg = "N",
	    .help = "the ranks start at window N (step N x S) instead of 0, "
		    "as from a checkpoint",
	    .kind = COM_OPT_U32,
	    .at = offsetof(sim_opts, start_window),
	    .max = UINT32_MAX },
	{ .name = "resume",
	    .help = "with --start-window: continue the job's recorded run "
		    "there (its later windows are superseded) instead of a "
		    "new run",
	    .kind = COM_OPT_FLAG,
	    .at = offsetof(sim_opts, resume) },
	{ .name = "server-key",
	    .arg = "FILE",
	    .help = "bellowsd's public certificate (default "
		    "$BELLOWS_SERVER_KEY)",
	    .kind = COM_OPT_TEXT,
	    .at = offsetof(sim_opts, server_key) },
	{ .name = "client-key",
	    .arg = "FILE",
	    .help = "the ranks' secret certificate (default "
		    "$BELLOWS_CLIENT_KEY); with both, CURVE",
	    .kind = COM_OPT_TEXT,
	    .at = offsetof(sim_opts, client_key) },
	{ .name = "aggregate",
	    .arg = "rank|node|job",
	    .help = "where a window's statistics are reduced: each rank "
		    "reports its own (rank, the default), or the ranks of a "
		    "node (--node-ranks) or of the job reduce them through a "
		    "simulated all-reduce over shared memory and the lowest "
		    "rank reports for them",
	    .kind = COM_OPT_PARSE,
	    .parse = sim_parse_aggregate },
	{ .name = "node-ranks",
	    .arg = "N",
	    .help = "ranks per node with --aggregate node (default 2)",
	    .kind = COM_OPT_U32,
	    .at = offsetof(sim_opts, node_ranks),
	    .min = 1,
	    .max = SIM_MAX_RANKS },
	/* Modelled statistics: each rank reports them through its agent. */
	{ .name = "comm-model",
	    .arg = "A,G,R,C[,M]",
	    .help = "time every layer's gradient send as a ring all-reduce "
		    "of its bytes b (float32; b / R when the agent's send "
		    "mode says compressed): 2A(p-1) + 2b(p-1)/(p G), A ms "
		    "latency, G Gbit/s, p = ranks (at least 2); a compressed "
		    "send adds a codec time of C ms + M ms per MiB of b (M "
		    "default 0). Sends follow the decision's level, size "
		    "threshold, compression gate and calibration (even steps "
		    "compressed, odd raw). Prints the size threshold the "
		    "model implies (robust rule over the 2-D layers)",
	    .kind = COM_OPT_PARSE,
	    .parse = sim_parse_comm },
	{ .name = "comm-noise",
	    .arg = "F",
	    .help = "relative noise of modelled times, from the seed "
		    "(default 0.02)",
	    .kind = COM_OPT_PARSE,
	    .parse = sim_parse_noise },
	{ .name = "buckets",
	    .arg = "N",
	    .help = "also time N collectives per step over contiguous layer "
		    "groups (DDP buckets; comm_ms is then their sum); needs "
		    "--comm-model",
	    .kind = COM_OPT_U32,
	    .at = offsetof(sim_opts, buckets),
	    .min = 1,
	    .max = SIM_MAX_LAYERS },
	{ .name = "backward-ms",
	    .arg = "MS",
	    .help = "report this backward time per step",
	    .kind = COM_OPT_PARSE,
	    .parse = sim_parse_backward },
	{ .name = "eval",
	    .arg = "ACC",
	    .help = "rank 0 reports a synthetic test evaluation at every "
		    "window's end (bellows_agent_eval): an accuracy rising "
		    "to ACC (0 < ACC <= 1) at the last window, loss "
		    "-ln(accuracy)",
	    .kind = COM_OPT_PARSE,
	    .parse = sim_parse_eval },
	{ .name = "step-model",
	    .arg = "wall|sync|overlap",
	    .help = "the step time the ranks report: the wall clock (wall, "
		    "the default), or modelled from the backward time B "
		    "(--backward-ms, else 0) and the step's modelled sends: "
		    "B + every send + codec (sync, a synchronous hook), or "
		    "max(B, raw sends) + compressed sends + codec (overlap: "
		    "raw sends hide behind the backward pass as DDP's "
		    "buckets do, compressed ones follow it); needs "
		    "--comm-model",
	    .kind = COM_OPT_PARSE,
	    .parse = sim_parse_step_model },
	{ .name = "act",
	    .arg = "LBAR,R,RATIO",
	    .help = "report activation statistics of every 2-D layer: L-bar, "
		    "non-zero fraction R, stored = raw / RATIO while the "
		    "layer's error bound is set (raw bytes: numel x batch / "
		    "2), and keep the 2-D layers' momentum average (COMET's "
		    "M_avg)",
	    .kind = COM_OPT_PARSE,
	    .parse = sim_parse_act },
	{ .name = "mem",
	    .arg = "TOTAL_MB,USED_MB",
	    .help = "report device memory: TOTAL_MB, and USED_MB plus the "
		    "stored activations",
	    .kind = COM_OPT_PARSE,
	    .parse = sim_parse_mem },
};

static const com_args_cmd sim_cmd = {
	.name = "sim",
	.shared = COM_ARGS_TAKES(COM_ARGS_JOB),
	.shared_at = offsetof(sim_opts, sh),
	.notes = { [COM_ARGS_JOB] = "the ranks join this job" },
	.opts = sim_opt_rows,
	.n_opts = sizeof(sim_opt_rows) / sizeof(sim_opt_rows[0]),
	.usage = tool_sim_opts_usage,
};

void
tool_sim_opts_usage(FILE *f)
{
	fputs(
	    "usage: bellows sim [--control EP] [--publish EP] --job NAME\n"
	    "                   --ranks N --layers L --windows W\n"
	    "                   --steps-per-window S [--step-ms MS]\n"
	    "                   [--seed X] [--decision-timeout-ms T]\n"
	    "                   [--kill RANK:WINDOW] [--down-ms MS] [--quiet]\n"
	    "                   [--exp-hist]\n"
	    "                   [--record-metrics FILE] [--record-levels FILE]\n"
	    "                   [--comm-model A,G,R,C[,M]] [--comm-noise F]\n"
	    "                   [--buckets N] [--backward-ms MS] [--eval ACC]\n"
	    "                   [--act LBAR,R,RATIO] [--mem TOTAL_MB,USED_MB]\n"
	    "                   [--run-id ID] [--start-window N [--resume]]\n"
	    "                   [--server-key FILE --client-key FILE]\n"
	    "                   [--aggregate rank|node|job [--node-ranks N]]\n"
	    "\n"
	    "  --control, --publish and --job default to $BELLOWS_CONTROL,\n"
	    "  $BELLOWS_PUBLISH and $BELLOWS_JOB when set; the endpoints\n"
	    "  then to " COM_DEFAULT_CONTROL " and " COM_DEFAULT_PUBLISH ",\n"
	    "  as bellowsd's.\n"
	    "\n"
	    "  Runs N ranks (processes with a real agent each) of a simulated\n"
	    "  data-parallel job for W windows of S steps against bellowsd,\n"
	    "  then checks that every rank applied the same decision at\n"
	    "  every step and had every decision it was owed. The last\n"
	    "  line reads\n"
	    "    sim: ranks=N windows=W decisions=D of E expected "
	    "agreed=yes|no\n"
	    "  (D applied, E owed: docs/sim.md). Exit status: 0 only with\n"
	    "  agreed=yes (same decision at every step, D = E); 1 with\n"
	    "  agreed=no (a line above says why: disagreement, a rank\n"
	    "  failed or never rejoined, missed decisions, bellowsd gone\n"
	    "  or refusing the job) or bellowsd unreachable at the start\n"
	    "  (no last line); 2 for bad arguments. --comm-model, --buckets,\n"
	    "  --backward-ms, --act and --mem model statistics each rank\n"
	    "  reports through its agent; --eval a trainer's evaluations.\n"
	    "\n",
	    f);
	com_args_help(f, &sim_cmd, &sim_defaults);
}

int
tool_sim_opts_parse(int argc, char **argv, sim_opts *o)
{
	const char *missing = NULL;
	int next, rc;

	*o = sim_defaults;
	o->control = tool_client_env("BELLOWS_CONTROL", COM_DEFAULT_CONTROL);
	o->publish = tool_client_env("BELLOWS_PUBLISH", COM_DEFAULT_PUBLISH);
	o->sh.job = tool_client_env("BELLOWS_JOB", NULL);
	if ((rc = com_args_parse(&sim_cmd, argc, argv, o, &next)) >= 0)
		return rc;
	if (o->sh.job == NULL)
		missing = "--job";
	else if (o->ranks == 0)
		missing = "--ranks";
	else if (o->layers == 0)
		missing = "--layers";
	else if (o->windows == 0)
		missing = "--windows";
	else if (o->steps == 0)
		missing = "--steps-per-window";
	if (missing != NULL) {
		fprintf(stderr,
		    "bellows sim: %s is required (bellows sim --help lists "
		    "every option)\n",
		    missing);
		return 2;
	}
	if ((uint64_t)o->ranks * o->windows * o->steps > SIM_MAX_RECORDS) {
		fprintf(stderr,
		    "bellows sim: --ranks x --windows x --steps-per-window "
		    "must be at most %u\n",
		    SIM_MAX_RECORDS);
		return 2;
	}
	if (o->kill && o->kill_rank >= o->ranks) {
		fprintf(stderr,
		    "bellows sim: --kill names rank %u of a %u-rank job\n",
		    o->kill_rank, o->ranks);
		return 2;
	}
	if (o->kill && o->kill_window >= o->windows) {
		fprintf(stderr,
		    "bellows sim: --kill names window %u, but the job runs "
		    "windows 0..%u\n",
		    o->kill_window, o->windows - 1);
		return 2;
	}
	if (o->kill && o->ranks < 2) {
		fprintf(stderr, "bellows sim: --kill needs at least 2 ranks\n");
		return 2;
	}
	if (o->start_window >= o->windows) {
		fprintf(stderr,
		    "bellows sim: --start-window %u, but the job runs windows "
		    "0..%u\n",
		    o->start_window, o->windows - 1);
		return 2;
	}
	if (o->resume && o->start_window == 0) {
		fprintf(stderr,
		    "bellows sim: --resume needs --start-window above 0\n");
		return 2;
	}
	if (o->kill && o->kill_window <= o->start_window) {
		fprintf(stderr,
		    "bellows sim: --kill names window %u, but the ranks start "
		    "at window %u\n",
		    o->kill_window, o->start_window);
		return 2;
	}
	if (o->run_id == NULL) {
		uint64_t v = 0;

		/* One identity for every rank of this launch, drawn before
		 * they fork; a later sim is another launch. */
		if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v))
			v = com_clock_ns() ^ ((uint64_t)getpid() << 32);
		snprintf(o->run_id_buf, sizeof(o->run_id_buf),
		    "sim-%016" PRIx64, v);
		o->run_id = o->run_id_buf;
	}
	if (o->down_given && !o->kill) {
		fprintf(stderr, "bellows sim: --down-ms needs --kill\n");
		return 2;
	}
	if (tool_client_keys("sim", o->server_key, o->client_key, &o->keys) !=
	    0)
		return 2;
	if (o->buckets > 0 && !o->comm_model) {
		fprintf(stderr, "bellows sim: --buckets needs --comm-model\n");
		return 2;
	}
	if (o->step_model != SIM_STEP_WALL && !o->comm_model) {
		fprintf(stderr,
		    "bellows sim: --step-model needs --comm-model\n");
		return 2;
	}
	if (o->aggregate != 0 && o->kill) {
		fprintf(stderr,
		    "bellows sim: --aggregate node or job does not "
		    "take --kill (the group's all-reduce would wait "
		    "for the killed rank)\n");
		return 2;
	}
	if (o->buckets > o->layers) {
		fprintf(stderr,
		    "bellows sim: --buckets %u exceeds the %u layers\n",
		    o->buckets, o->layers);
		return 2;
	}
	return -1;
}
