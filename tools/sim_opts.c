/* sim_opts - the options of `bellows sim`, see sim_opts.h.
 *
 * Numbers go through args.h, so that a bad value reads as it does in
 * every other subcommand; lists of numbers (--comm-model, --act, --mem)
 * are parsed here, each refused with the form it must have.
 */
#include "sim_opts.h"

#include "args.h"
#include "clock.h"

#include <bellows/error.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

void
tool_sim_opts_usage(FILE *f)
{
	fprintf(f,
	    "usage: bellows sim --control EP --publish EP --job NAME\n"
	    "                   --ranks N --layers L --windows W\n"
	    "                   --steps-per-window S [--step-ms MS]\n"
	    "                   [--seed X] [--decision-timeout-ms T]\n"
	    "                   [--kill RANK:WINDOW] [--down-ms MS] [--quiet]\n"
	    "                   [--record-metrics FILE] [--record-levels FILE]\n"
	    "                   [--comm-model A,G,R,C[,M]] [--comm-noise F]\n"
	    "                   [--buckets N] [--backward-ms MS]\n"
	    "                   [--act LBAR,R,RATIO] [--mem TOTAL_MB,USED_MB]\n"
	    "                   [--run-id ID] [--start-window N [--resume]]\n"
	    "                   [--server-key FILE --client-key FILE]\n"
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
	    "  (no last line); 2 for bad arguments.\n"
	    "\n");
	fprintf(f,
	    "  --control EP           bellowsd's control endpoint\n"
	    "  --publish EP           bellowsd's publish endpoint\n"
	    "  --job NAME             job name\n"
	    "  --ranks N              ranks, 1..%d\n"
	    "  --layers L             layers in the model, 1..%d\n"
	    "  --windows W            windows to run\n"
	    "  --steps-per-window S   steps in a window\n"
	    "  --step-ms MS           extra time per step (default 0)\n"
	    "  --seed X               gradient noise seed (default 1)\n"
	    "  --decision-timeout-ms T  agents' longest wait for a decision\n"
	    "                         (default 5000)\n"
	    "  --kill RANK:WINDOW     SIGKILL RANK at the start of WINDOW and\n"
	    "                         start it again as a new process\n"
	    "  --down-ms MS           how long it stays down (default 3000)\n"
	    "  --quiet                rank 0 does not print each decision\n"
	    "  --record-metrics FILE  rank 0 writes each closed window's\n"
	    "                         gradient norms and LR, the input of\n"
	    "                         bellows replay (window,layer,grad_norm,\n"
	    "                         lr,numel,shape)\n"
	    "  --record-levels FILE   rank 0 writes the levels bellowsd\n"
	    "                         decided for each window whose decision\n"
	    "                         it applied (window,layer,level)\n"
	    "  --run-id ID            this launch's identity, the same for\n"
	    "                         every rank (default: one drawn at\n"
	    "                         random, so each sim is a new run)\n"
	    "  --start-window N       the ranks start at window N (step N x S)\n"
	    "                         instead of 0, as from a checkpoint\n"
	    "  --resume               with --start-window: continue the job's\n"
	    "                         recorded run there (its later windows are\n"
	    "                         superseded) instead of a new run\n"
	    "  --server-key FILE      bellowsd's public certificate (default\n"
	    "                         $BELLOWS_SERVER_KEY)\n"
	    "  --client-key FILE      the ranks' secret certificate (default\n"
	    "                         $BELLOWS_CLIENT_KEY); with both, CURVE\n",
	    SIM_MAX_RANKS, SIM_MAX_LAYERS);
	fputs(
	    "\n"
	    "  Modelled statistics (each rank reports them through the agent):\n"
	    "  --comm-model A,G,R,C[,M]\n"
	    "                         time every layer's gradient send as a\n"
	    "                         ring all-reduce of its bytes b (float32;\n"
	    "                         b / R when the agent's send mode says\n"
	    "                         compressed): 2A(p-1) + 2b(p-1)/(p G),\n"
	    "                         A ms latency, G Gbit/s, p = ranks (at\n"
	    "                         least 2); a compressed send adds a codec\n"
	    "                         time of C ms + M ms per MiB of b (M\n"
	    "                         default 0). Sends follow the decision's\n"
	    "                         level, size threshold, compression gate\n"
	    "                         and calibration (even steps compressed,\n"
	    "                         odd raw). Prints the size threshold the\n"
	    "                         model implies (robust rule over the\n"
	    "                         2-D layers)\n"
	    "  --comm-noise F         relative noise of modelled times, from\n"
	    "                         the seed (default 0.02)\n"
	    "  --buckets N            also time N collectives per step over\n"
	    "                         contiguous layer groups (DDP buckets;\n"
	    "                         comm_ms is then their sum); needs\n"
	    "                         --comm-model\n"
	    "  --backward-ms MS       report this backward time per step\n"
	    "  --act LBAR,R,RATIO     report activation statistics of every\n"
	    "                         2-D layer: L-bar, non-zero fraction R,\n"
	    "                         stored = raw / RATIO while the layer's\n"
	    "                         error bound is set (raw bytes: numel x\n"
	    "                         batch / 2), and keep the 2-D layers'\n"
	    "                         momentum average (COMET's M_avg)\n"
	    "  --mem TOTAL_MB,USED_MB report device memory: TOTAL_MB, and\n"
	    "                         USED_MB plus the stored activations\n",
	    f);
}

/* ---- options ----------------------------------------------------------- */

static int
sim_check_name(const char *opt, const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n == 0 || n > max) {
		fprintf(stderr, "bellows sim: %s must have 1..%zu bytes\n", opt,
		    max);
		return BELLOWS_EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) {
			fprintf(stderr,
			    "bellows sim: %s must not contain control "
			    "characters\n",
			    opt);
			return BELLOWS_EINVAL;
		}
	}
	return 0;
}

static int
sim_parse_kill(const char *text, sim_opts *o)
{
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
	if (tool_args_u32("sim", "the RANK of --kill", rank, 0,
		SIM_MAX_RANKS - 1, &o->kill_rank) != 0 ||
	    tool_args_u32("sim", "the WINDOW of --kill", colon + 1, 1,
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
sim_parse_comm(const char *text, sim_opts *o)
{
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
sim_parse_act(const char *text, sim_opts *o)
{
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
sim_parse_mem(const char *text, sim_opts *o)
{
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

int
tool_sim_opts_parse(int argc, char **argv, sim_opts *o)
{
	enum {
		OPT_CONTROL = 256,
		OPT_PUBLISH,
		OPT_JOB,
		OPT_RANKS,
		OPT_LAYERS,
		OPT_WINDOWS,
		OPT_STEPS,
		OPT_STEP_MS,
		OPT_SEED,
		OPT_TIMEOUT,
		OPT_KILL,
		OPT_DOWN,
		OPT_QUIET,
		OPT_RECORD_METRICS,
		OPT_RECORD_LEVELS,
		OPT_COMM_MODEL,
		OPT_COMM_NOISE,
		OPT_BUCKETS,
		OPT_BACKWARD_MS,
		OPT_ACT,
		OPT_MEM,
		OPT_RUN_ID,
		OPT_START_WINDOW,
		OPT_RESUME,
		OPT_SERVER_KEY,
		OPT_CLIENT_KEY,
		OPT_HELP,
	};
	static const struct option opts[] = {
		{ "control", required_argument, NULL, OPT_CONTROL },
		{ "publish", required_argument, NULL, OPT_PUBLISH },
		{ "job", required_argument, NULL, OPT_JOB },
		{ "ranks", required_argument, NULL, OPT_RANKS },
		{ "layers", required_argument, NULL, OPT_LAYERS },
		{ "windows", required_argument, NULL, OPT_WINDOWS },
		{ "steps-per-window", required_argument, NULL, OPT_STEPS },
		{ "step-ms", required_argument, NULL, OPT_STEP_MS },
		{ "seed", required_argument, NULL, OPT_SEED },
		{ "decision-timeout-ms", required_argument, NULL, OPT_TIMEOUT },
		{ "kill", required_argument, NULL, OPT_KILL },
		{ "down-ms", required_argument, NULL, OPT_DOWN },
		{ "quiet", no_argument, NULL, OPT_QUIET },
		{ "record-metrics", required_argument, NULL,
		    OPT_RECORD_METRICS },
		{ "record-levels", required_argument, NULL, OPT_RECORD_LEVELS },
		{ "comm-model", required_argument, NULL, OPT_COMM_MODEL },
		{ "comm-noise", required_argument, NULL, OPT_COMM_NOISE },
		{ "buckets", required_argument, NULL, OPT_BUCKETS },
		{ "backward-ms", required_argument, NULL, OPT_BACKWARD_MS },
		{ "act", required_argument, NULL, OPT_ACT },
		{ "mem", required_argument, NULL, OPT_MEM },
		{ "run-id", required_argument, NULL, OPT_RUN_ID },
		{ "start-window", required_argument, NULL, OPT_START_WINDOW },
		{ "resume", no_argument, NULL, OPT_RESUME },
		{ "server-key", required_argument, NULL, OPT_SERVER_KEY },
		{ "client-key", required_argument, NULL, OPT_CLIENT_KEY },
		{ "help", no_argument, NULL, OPT_HELP },
		{ NULL, 0, NULL, 0 },
	};
	const char *missing = NULL;
	int c, r = 0;

	*o = (sim_opts){ .seed = 1,
		.decision_timeout_ms = 5000,
		.down_ms = 3000,
		.comm_noise = 0.02 };
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1 && r == 0) {
		switch (c) {
		case OPT_CONTROL:
			o->control = optarg;
			r = sim_check_name("--control", optarg, 1024);
			break;
		case OPT_PUBLISH:
			o->publish = optarg;
			r = sim_check_name("--publish", optarg, 1024);
			break;
		case OPT_JOB:
			o->job = optarg;
			r = sim_check_name("--job", optarg, 255);
			break;
		case OPT_RANKS:
			r = tool_args_u32("sim", "--ranks", optarg, 1,
			    SIM_MAX_RANKS, &o->ranks);
			break;
		case OPT_LAYERS:
			r = tool_args_u32("sim", "--layers", optarg, 1,
			    SIM_MAX_LAYERS, &o->layers);
			break;
		case OPT_WINDOWS:
			r = tool_args_u32("sim", "--windows", optarg, 1,
			    SIM_MAX_RECORDS, &o->windows);
			break;
		case OPT_STEPS:
			r = tool_args_u32("sim", "--steps-per-window", optarg,
			    1, SIM_MAX_RECORDS, &o->steps);
			break;
		case OPT_STEP_MS:
			r = tool_args_u32("sim", "--step-ms", optarg, 0, 60000,
			    &o->step_ms);
			break;
		case OPT_SEED:
			r = tool_args_u64("sim", "--seed", optarg, 0,
			    UINT64_MAX, &o->seed);
			break;
		case OPT_TIMEOUT:
			r = tool_args_u32("sim", "--decision-timeout-ms",
			    optarg, 1, 600000, &o->decision_timeout_ms);
			break;
		case OPT_KILL:
			r = sim_parse_kill(optarg, o);
			break;
		case OPT_DOWN:
			r = tool_args_u32("sim", "--down-ms", optarg, 0, 600000,
			    &o->down_ms);
			o->down_given = true;
			break;
		case OPT_QUIET:
			o->quiet = true;
			break;
		case OPT_RECORD_METRICS:
			o->record_metrics = optarg;
			r = sim_check_name("--record-metrics", optarg, 4096);
			break;
		case OPT_RECORD_LEVELS:
			o->record_levels = optarg;
			r = sim_check_name("--record-levels", optarg, 4096);
			break;
		case OPT_COMM_MODEL:
			r = sim_parse_comm(optarg, o);
			break;
		case OPT_COMM_NOISE:
			r = sim_parse_double("--comm-noise", optarg, 0.5,
			    &o->comm_noise);
			break;
		case OPT_BUCKETS:
			r = tool_args_u32("sim", "--buckets", optarg, 1,
			    SIM_MAX_LAYERS, &o->buckets);
			break;
		case OPT_BACKWARD_MS:
			r = sim_parse_double("--backward-ms", optarg, 600000,
			    &o->backward_ms);
			break;
		case OPT_ACT:
			r = sim_parse_act(optarg, o);
			break;
		case OPT_MEM:
			r = sim_parse_mem(optarg, o);
			break;
		case OPT_RUN_ID:
			o->run_id = optarg;
			r = sim_check_name("--run-id", optarg, 255);
			break;
		case OPT_START_WINDOW:
			r = tool_args_u32("sim", "--start-window", optarg, 0,
			    UINT32_MAX, &o->start_window);
			break;
		case OPT_RESUME:
			o->resume = true;
			break;
		case OPT_SERVER_KEY:
			o->server_key = optarg;
			break;
		case OPT_CLIENT_KEY:
			o->client_key = optarg;
			break;
		case 'h':
		case OPT_HELP:
			tool_sim_opts_usage(stdout);
			return 0;
		default:
			tool_sim_opts_usage(stderr);
			return 2;
		}
	}
	if (r != 0)
		return 2;
	if (optind < argc) {
		fprintf(stderr, "bellows sim: unexpected argument '%s'\n",
		    argv[optind]);
		return 2;
	}
	if (o->control == NULL)
		missing = "--control";
	else if (o->publish == NULL)
		missing = "--publish";
	else if (o->job == NULL)
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
		fprintf(stderr, "bellows sim: %s is required\n", missing);
		tool_sim_opts_usage(stderr);
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
	if (o->buckets > o->layers) {
		fprintf(stderr,
		    "bellows sim: --buckets %u exceeds the %u layers\n",
		    o->buckets, o->layers);
		return 2;
	}
	return -1;
}
