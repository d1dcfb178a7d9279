/* sim - `bellows sim`, see sim.h.
 *
 * Parent and ranks share one anonymous MAP_SHARED mapping:
 *
 *   sim_shared   header (stop flag, next window of --record-levels)
 *   sim_slot     one per rank, on its own cache line: step_done (last
 *                completed step + 1), alive, agent counters at exit
 *   seq          ranks x steps: the decision seq each rank applied at each
 *                step, SIM_NOT_RUN where it did not run the step
 *
 * The lockstep emulates a data-parallel all-reduce: before beginning step
 * s a rank waits until every alive rank has finished step s - 1. The
 * parent kills and re-forks ranks; a re-forked rank starts at a window
 * boundary ahead of the group, with its step_done already set there, so
 * the group waits for it exactly as for a rank of the original job.
 */
#include "sim.h"

#include "client/args.h"
#include "client/client.h"
#include "common/clock.h"
#include "client/metrics.h"
#include "common/msg.h"

#include <bellows/agent.h>
#include <bellows/error.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SIM_MAX_RANKS    256        /* each rank is a process */
#define SIM_MAX_LAYERS   4096       /* layers in the model */
#define SIM_MAX_RECORDS  (1u << 24) /* ranks x steps recorded */
#define SIM_NOT_RUN      UINT64_MAX /* record of a step a rank did not run */
#define SIM_SPIN_NS      30000      /* lockstep poll interval */
#define SIM_SUPERVISE_NS 1000000    /* parent's poll interval */
#define SIM_PING_MS      5000       /* wait for bellowsd before starting */
#define SIM_JOIN_MS      30000      /* wait for a rank's Welcome */
#define SIM_LEVELS_SHOWN 12         /* levels printed per decision line */
#define SIM_SUMMARY_ROWS 16         /* decisions listed at each end */
#define SIM_EXIT_STOPPED 3          /* a rank's exit code when told to stop */

typedef struct sim_opts {
	const char *control;          /* bellowsd ROUTER endpoint */
	const char *publish;          /* bellowsd PUB endpoint */
	const char *job;              /* job name */
	uint32_t ranks;               /* world size */
	uint32_t layers;              /* layers in the model */
	uint32_t windows;             /* windows to run */
	uint32_t steps;               /* steps per window */
	uint32_t step_ms;             /* extra time per step */
	uint64_t seed;                /* gradient noise seed */
	uint32_t decision_timeout_ms; /* agent's longest wait */
	bool kill;                    /* --kill given */
	uint32_t kill_rank;           /* rank to kill */
	uint32_t kill_window;         /* window at whose start it dies */
	uint32_t down_ms;             /* time before it comes back */
	bool down_given;              /* --down-ms given */
	bool quiet;                   /* rank 0 prints no decisions */
	const char *record_metrics;   /* rank 0 appends window norms here */
	const char *record_levels;    /* rank 0 appends decided levels here */
	/* The statistics of bellows 0.2 (SlimGC, performance model, COMET),
	 * modelled, not measured: see tool_sim_usage. */
	bool comm_model;        /* --comm-model given */
	double alpha_ms;        /* latency per ring step */
	double gbps;            /* link bandwidth, Gbit/s */
	double ratio;           /* bytes shrink this much when compressed */
	double codec_ms;        /* codec time of one compressed send */
	double codec_ms_per_mb; /* plus this per MiB of float32 tensor */
	double comm_noise;      /* relative noise of the modelled times */
	uint32_t buckets;       /* collectives per step (comm_bucket) */
	double backward_ms;     /* backward time per step, 0: not reported */
	bool act;               /* --act given */
	double act_lbar;        /* L-bar of every activation */
	double act_nonzero;     /* R of every activation */
	double act_ratio;       /* stored bytes shrink this much with a
				 * bound */
	uint64_t mem_total;     /* device bytes, 0: not reported */
	uint64_t mem_used;      /* device bytes in use besides activations */
	const char *run_id;     /* this launch's identity (--run-id, else
				 * drawn once for all ranks) */
	char run_id_buf[40];    /* the one drawn */
	uint32_t start_window;  /* the ranks start at this window */
	bool resume;            /* ... continuing the job's recorded run */
	const char *server_key; /* --server-key, NULL: not given */
	const char *client_key; /* --client-key, NULL: not given */
	tool_keys keys;         /* the CURVE keys found (options, else
				 * the environment) */
} sim_opts;

/* One rank's slot. The counters at the end are the agent's, summed over
 * the rank's processes that exited normally. */
typedef struct sim_slot {
	alignas(64) _Atomic uint64_t step_done; /* last finished step + 1 */
	_Atomic int alive;                /* 1 while the group waits for it */
	_Atomic int at_kill;              /* victim reached its kill point */
	_Atomic uint64_t decisions;       /* decisions received */
	_Atomic uint64_t misses;          /* apply steps passed without one */
	_Atomic uint64_t snapshots;       /* snapshot requests */
	_Atomic uint64_t reconnects;      /* welcomes after the first */
	_Atomic uint64_t reports_dropped; /* reports the queue dropped */
	_Atomic int finished;             /* its last process ran every step */
	_Atomic int welcomed_end;         /* its last process ended welcomed
					   * by bellowsd */
	_Atomic uint64_t lost;            /* decisions its last process was
					   * owed after losing bellowsd for
					   * good (see sim_rank_lost) */
	int last_error;                   /* the daemon's last refusal, 0 =
					   * none; written before the process
					   * exits, read after it is reaped */
	char last_error_text[256];        /* its message */
} sim_slot;

typedef struct sim_shared {
	_Atomic int stop;             /* parent tells every rank to give up */
	_Atomic uint64_t levels_next; /* first window --record-levels has not
				       * written, over rank 0's processes */
} sim_shared;

/* Everything a rank process needs, built by the parent before forking. */
typedef struct sim_ctx {
	const sim_opts *o;    /* options */
	uint64_t total_steps; /* windows x steps */
	bellows_layer *table; /* the model's layers */
	uint32_t *shapes;     /* two entries per layer */
	char (*names)[32];    /* layer names */
	uint64_t floats_raw;  /* sum of numel */
	void *map;            /* the shared mapping */
	size_t map_len;       /* its length */
	sim_shared *sh;       /* header in map */
	sim_slot *slots;      /* ranks entries in map */
	uint64_t *seq;        /* ranks x total_steps records in map */
} sim_ctx;

/* What one rank process works with. */
typedef struct sim_rank {
	const sim_ctx *cx;     /* shared context */
	uint32_t rank;         /* this rank */
	bellows_agent *agent;  /* its agent */
	float **pattern;       /* per layer: unit-norm direction */
	float *grad;           /* scratch gradient, largest layer */
	double *base;          /* per layer: norm scale */
	FILE *metrics_out;     /* rank 0: --record-metrics, else NULL */
	FILE *levels_out;      /* rank 0: --record-levels, else NULL */
	uint64_t start_window; /* first window this process runs */
	uint64_t applied;      /* distinct decisions it applied */
	uint64_t lag;          /* steps from a window's end to its decision,
				* least seen; UINT64_MAX: none seen yet */
} sim_rank;

void
tool_sim_usage(FILE *f)
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

/* Returns -1 to go on, else the exit code. */
static int
sim_parse(int argc, char **argv, sim_opts *o)
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
			tool_sim_usage(stdout);
			return 0;
		default:
			tool_sim_usage(stderr);
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
		tool_sim_usage(stderr);
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

/* ---- the synthetic model ----------------------------------------------- */

static uint64_t
sim_mix(uint64_t x)
{
	/* splitmix64's finaliser: cheap, and good enough that neighbouring
	 * (seed, rank, step, layer) tuples look independent. */
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Uniform in [0, 1) from a hash. */
static double
sim_unit(uint64_t h)
{
	return (double)(h >> 11) * (1.0 / 9007199254740992.0);
}

static uint64_t
sim_hash(uint64_t seed, uint64_t a, uint64_t b, uint64_t c)
{
	return sim_mix(sim_mix(sim_mix(seed ^ 0x62656c6c6f7773ull) ^ a) ^
	    (b * 0x9e3779b97f4a7c15ull + c));
}

/* Learning-rate decays at 50 % and 75 % of the windows, as in the
 * step schedules of the papers' CIFAR runs. */
static void
sim_decay_windows(const sim_opts *o, uint32_t ret[2], int *ret_n)
{
	uint32_t d1 = o->windows / 2,
		 d2 = (uint32_t)((uint64_t)o->windows * 3 / 4);
	int n = 0;

	if (d1 > 0)
		ret[n++] = d1;
	if (d2 > 0 && d2 != d1)
		ret[n++] = d2;
	*ret_n = n;
}

static double
sim_lr(const sim_opts *o, uint64_t window)
{
	uint32_t d[2];
	double lr = 0.1;
	int n;

	sim_decay_windows(o, d, &n);
	for (int i = 0; i < n; i++) {
		if (window >= d[i])
			lr *= 0.1;
	}
	return lr;
}

/* Gradient norm relative to a layer's base: decays fast early (tau =
 * 15 % of the run), jumps about threefold right after each LR decay and
 * decays again. */
static double
sim_norm_course(const sim_ctx *cx, uint64_t step)
{
	const sim_opts *o = cx->o;
	double total = (double)cx->total_steps;
	double tau = fmax(1.0, 0.15 * total), tau_d = fmax(1.0, 0.05 * total);
	double s = 0.15 + exp(-(double)step / tau);
	uint32_t d[2];
	int n;

	sim_decay_windows(o, d, &n);
	for (int i = 0; i < n; i++) {
		uint64_t at = (uint64_t)d[i] * o->steps;

		if (step >= at)
			s *= 1.0 + 2.0 * exp(-(double)(step - at) / tau_d);
	}
	return s;
}

/* ---- the modelled communication (--comm-model) ------------------------- */

#define SIM_MIB 1048576.0

/* One ring all-reduce of `bytes` per rank: 2A(p-1) + 2b(p-1)/(p G). */
static double
sim_allreduce_ms(const sim_opts *o, double bytes)
{
	double p = o->ranks > 1 ? (double)o->ranks : 2.0;
	double per_ms = o->gbps * 1e9 / 8.0 / 1e3; /* bytes per ms */

	return 2.0 * o->alpha_ms * (p - 1) +
	    2.0 * bytes * (p - 1) / (p * per_ms);
}

static double
sim_codec_ms(const sim_opts *o, double bytes)
{
	return o->codec_ms + o->codec_ms_per_mb * bytes / SIM_MIB;
}

/* A tensor of `bytes` is faster compressed, codec included. */
static bool
sim_pays(const sim_opts *o, double bytes)
{
	return sim_allreduce_ms(o, bytes) >
	    sim_allreduce_ms(o, bytes / o->ratio) + sim_codec_ms(o, bytes);
}

static int
sim_cmp_size(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The size threshold a calibration finds without noise: the robust rule
 * (the smallest size from which every larger one pays) over the distinct
 * sizes of the 2-D layers, those a policy's default selector gives a
 * level. 0 when every size pays, UINT64_MAX when the largest does not.
 * Returns BELLOWS_ENOMEM or 0. */
static int
sim_model_threshold(const sim_ctx *cx, uint64_t *ret, uint32_t *ret_rows)
{
	uint64_t *size = malloc(cx->o->layers * sizeof(*size));
	uint32_t n = 0, rows = 0, i;

	if (size == NULL)
		return BELLOWS_ENOMEM;
	for (uint32_t l = 0; l < cx->o->layers; l++) {
		if (cx->table[l].ndim >= 2)
			size[n++] = cx->table[l].numel * 4;
	}
	qsort(size, n, sizeof(*size), sim_cmp_size);
	for (i = 0; i < n; i++) {
		if (i == 0 || size[i] != size[i - 1])
			size[rows++] = size[i];
	}
	for (i = rows; i > 0 && sim_pays(cx->o, (double)size[i - 1]); i--)
		;
	*ret = i == rows ? UINT64_MAX : i == 0 ? 0 : size[i];
	*ret_rows = rows;
	free(size);
	return 0;
}

/* 1 +- comm_noise, fixed by the seed, the rank, the step and `key`. */
static double
sim_noise(const sim_opts *o, uint32_t rank, uint64_t step, uint64_t key)
{
	uint64_t h = sim_hash(o->seed ^ 0x636f6d6dull, rank + 1, step, key);

	return 1.0 + o->comm_noise * (2.0 * sim_unit(h) - 1.0);
}

static int
sim_model_build(sim_ctx *cx)
{
	const sim_opts *o = cx->o;

	cx->table = calloc(o->layers, sizeof(*cx->table));
	cx->shapes = calloc((size_t)o->layers * 2, sizeof(*cx->shapes));
	cx->names = calloc(o->layers, sizeof(*cx->names));
	if (cx->table == NULL || cx->shapes == NULL || cx->names == NULL)
		return BELLOWS_ENOMEM;
	for (uint32_t l = 0; l < o->layers; l++) {
		bellows_layer *t = &cx->table[l];
		uint32_t *shape = &cx->shapes[2 * l];

		/* A bias every fourth layer, for realism: 1-D tensors are
		 * what selectors like min_ndim exist for. Widths cycle
		 * every 64 layers so that deep models stay cheap. */
		if (l % 4 == 3) {
			snprintf(cx->names[l], sizeof(cx->names[l]),
			    "layer%u.bias", l);
			shape[0] = 64;
			t->ndim = 1;
		} else {
			snprintf(cx->names[l], sizeof(cx->names[l]),
			    "layer%u.weight", l);
			shape[0] = 64;
			shape[1] = 32 + 8 * (l % 64);
			t->ndim = 2;
		}
		t->name = cx->names[l];
		t->shape = shape;
		t->numel = t->ndim == 1 ? shape[0]
					: (uint64_t)shape[0] * shape[1];
		/* With activation statistics (COMET), the weights' momentum
		 * average too: M_avg is the other half of the bound. */
		if (o->act && t->ndim >= 2)
			t->flags |= BELLOWS_LAYER_MOMENTUM;
		cx->floats_raw += t->numel;
	}
	return 0;
}

static void
sim_model_free(sim_ctx *cx)
{
	free(cx->table);
	free(cx->shapes);
	free(cx->names);
}

/* ---- a rank ------------------------------------------------------------ */

static void
sim_log(void *arg, int level, const char *message)
{
	const sim_rank *rk = arg;
	static const char *const names[] = { "error", "warn", "info", "debug" };

	fprintf(stderr, "rank %u: %s: %s\n", rk->rank,
	    level >= 0 && level <= 3 ? names[level] : "log", message);
}

static void
sim_rank_free(sim_rank *rk)
{
	if (rk->pattern != NULL) {
		for (uint32_t l = 0; l < rk->cx->o->layers; l++)
			free(rk->pattern[l]);
	}
	free(rk->pattern);
	free(rk->grad);
	free(rk->base);
	bellows_agent_close(&rk->agent);
	if (rk->metrics_out != NULL)
		fclose(rk->metrics_out);
	if (rk->levels_out != NULL)
		fclose(rk->levels_out);
}

/* Per layer a fixed random direction of unit norm; each step scales it
 * to the step's norm, so a gradient costs one multiply per element. The
 * direction depends on the seed only, like the gradients of ranks that
 * share a model. */
static int
sim_rank_patterns(sim_rank *rk)
{
	const sim_ctx *cx = rk->cx;
	uint64_t largest = 0;

	rk->pattern = calloc(cx->o->layers, sizeof(*rk->pattern));
	rk->base = calloc(cx->o->layers, sizeof(*rk->base));
	if (rk->pattern == NULL || rk->base == NULL)
		return BELLOWS_ENOMEM;
	for (uint32_t l = 0; l < cx->o->layers; l++) {
		uint64_t n = cx->table[l].numel;
		double sq = 0;
		float *p = malloc(n * sizeof(*p));

		if (p == NULL)
			return BELLOWS_ENOMEM;
		rk->pattern[l] = p;
		for (uint64_t i = 0; i < n; i++) {
			p[i] = (float)(2.0 *
				sim_unit(sim_hash(cx->o->seed, l, i, 0)) -
			    1.0);
			sq += (double)p[i] * p[i];
		}
		sq = sq > 0 ? 1.0 / sqrt(sq) : 0;
		for (uint64_t i = 0; i < n; i++)
			p[i] = (float)(p[i] * sq);
		/* Early layers have larger gradients, biases smaller. */
		rk->base[l] = (cx->table[l].ndim == 1 ? 0.2 : 1.0) *
		    (0.5 + 2.0 / (1.0 + l));
		if (n > largest)
			largest = n;
	}
	rk->grad = malloc(largest * sizeof(*rk->grad));
	return rk->grad == NULL ? BELLOWS_ENOMEM : 0;
}

/* Fills rk->grad with layer l's gradient at `step`. */
static void
sim_rank_gradient(sim_rank *rk, uint32_t l, uint64_t step, double course)
{
	const sim_ctx *cx = rk->cx;
	uint64_t n = cx->table[l].numel, h;
	const float *p = rk->pattern[l];
	float *g = rk->grad;
	double scale;
	float fs;

	/* ~5 % multiplicative noise: each rank sees another minibatch. */
	h = sim_hash(cx->o->seed, rk->rank + 1, step, l);
	scale = rk->base[l] * course *
	    (1.0 + 0.05 * sqrt(3.0) * (2.0 * sim_unit(h) - 1.0));
	fs = (float)scale;
	for (uint64_t i = 0; i < n; i++)
		g[i] = p[i] * fs;
	/* A few perturbed elements so that successive steps are not exactly
	 * collinear (the window sum's norm then differs from the sum of
	 * norms, as it does in training). */
	for (int k = 0; k < 4; k++) {
		h = sim_mix(h);
		g[h % n] += (float)(scale * 0.5 *
		    (2.0 * sim_unit(sim_mix(h)) - 1.0) / sqrt((double)n));
	}
}

/* Waits until every alive rank has finished step - 1. Returns 0, or
 * BELLOWS_ECLOSED when the parent asked everyone to stop. */
static int
sim_rank_lockstep(const sim_ctx *cx, uint64_t step)
{
	const struct timespec nap = { 0, SIM_SPIN_NS };

	for (;;) {
		bool ready = true;

		if (atomic_load(&cx->sh->stop))
			return BELLOWS_ECLOSED;
		for (uint32_t q = 0; q < cx->o->ranks && ready; q++) {
			if (atomic_load(&cx->slots[q].alive) &&
			    atomic_load(&cx->slots[q].step_done) < step)
				ready = false;
		}
		if (ready)
			return 0;
		nanosleep(&nap, NULL);
	}
}

/* Waits for the Welcome: a rank that began its first step on defaults
 * would apply another decision than the ranks already in the job. */
static int
sim_rank_join(sim_rank *rk)
{
	const struct timespec nap = { 0, 1000000 };
	uint64_t start = com_clock_ms(), deadline = start + SIM_JOIN_MS;
	bellows_agent_stats st = { 0 };
	bool refused = false;

	for (;;) {
		if (atomic_load(&rk->cx->sh->stop))
			return BELLOWS_ECLOSED;
		if (bellows_agent_stats_get(rk->agent, &st) == 0 &&
		    st.connected)
			return 0;
		/* A refusal may be lifted (the agent says Hello again), but
		 * not worth more than one decision's wait. */
		if (st.last_error != 0 && !refused) {
			uint64_t until = com_clock_ms() +
			    rk->cx->o->decision_timeout_ms;

			refused = true;
			if (until < deadline)
				deadline = until;
		}
		if (com_clock_ms() >= deadline)
			break;
		nanosleep(&nap, NULL);
	}
	fprintf(stderr,
	    "rank %u: not welcomed by bellowsd within %" PRIu64
	    " ms (%s); running on the decision it has\n",
	    rk->rank, com_clock_ms() - start,
	    st.last_error_text[0] != '\0' ? st.last_error_text : "no answer");
	return 0;
}

static void
sim_print_decision(uint64_t step, const bellows_decision *d)
{
	uint32_t shown = d->n_layers < SIM_LEVELS_SHOWN ? d->n_layers
							: SIM_LEVELS_SHOWN;

	printf("step %" PRIu64 ": decision #%" PRIu64 " (window %" PRIu64
	       ") levels [",
	    step, d->seq, d->window);
	for (uint32_t l = 0; l < shown; l++)
		printf("%s%g", l ? " " : "", d->level[l]);
	if (shown < d->n_layers)
		printf(" ... +%u", d->n_layers - shown);
	printf("]");
	if (d->size_threshold > 0)
		printf(" threshold=%" PRIu64, d->size_threshold);
	if (d->compression_off)
		printf(" compression=off");
	if (d->calibrate_steps > 0)
		printf(" calibrate=%" PRIu64, d->calibrate_steps);
	printf(" policy=%s reason=%s\n",
	    d->policy != NULL && d->policy[0] != '\0' ? d->policy : "-",
	    d->reason != NULL && d->reason[0] != '\0' ? d->reason : "-");
	fflush(stdout);
}

/* ---- records for bellows replay ---------------------------------------- */

static int
sim_record_failed(const sim_rank *rk, const char *path)
{
	fprintf(stderr, "rank %u: cannot write %s: %s\n", rk->rank, path,
	    strerror(errno));
	return BELLOWS_EIO;
}

/* Appends the levels of `d`, the state bellowsd decided for window
 * d->window, unless a process of rank 0 has written that window already
 * (a repair decision carries the window it repeats). */
static int
sim_record_levels(sim_rank *rk, const bellows_decision *d)
{
	const sim_ctx *cx = rk->cx;
	uint32_t n = d->n_layers < cx->o->layers ? d->n_layers : cx->o->layers;
	FILE *f = rk->levels_out;

	if (f == NULL || d->seq == 0 ||
	    d->window < atomic_load(&cx->sh->levels_next))
		return 0;
	for (uint32_t l = 0; l < n; l++) {
		fprintf(f, "%" PRIu64 ",", d->window);
		tool_metrics_put_field(f, cx->table[l].name);
		fputc(',', f);
		tool_metrics_put_number(f, d->level[l]);
		fputc('\n', f);
	}
	if (fflush(f) != 0 || ferror(f))
		return sim_record_failed(rk, cx->o->record_levels);
	atomic_store(&cx->sh->levels_next, d->window + 1);
	return 0;
}

/* Appends the statistics of `window`, which has just closed, as bellows
 * replay reads them: rank 0's norm, as bellowsd's rank-0 norm. */
static int
sim_record_metrics(sim_rank *rk, uint64_t window, double lr)
{
	const sim_ctx *cx = rk->cx;
	FILE *f = rk->metrics_out;

	if (f == NULL)
		return 0;
	for (uint32_t l = 0; l < cx->o->layers; l++) {
		const bellows_layer *t = &cx->table[l];
		bellows_layer_stats st;
		char shape[64];
		int r;

		r = bellows_agent_window_stats(rk->agent, l, &st);
		if (r == 0 && st.window != window)
			r = BELLOWS_ESTATE;
		if (r != 0) {
			fprintf(stderr,
			    "rank %u: statistics of window %" PRIu64
			    " layer %u: %s\n",
			    rk->rank, window, l, bellows_strerror(r));
			return r;
		}
		tool_metrics_shape_text(t->shape, t->ndim, shape,
		    sizeof(shape));
		fprintf(f, "%" PRIu64 ",", window);
		tool_metrics_put_field(f, t->name);
		fputc(',', f);
		tool_metrics_put_number(f, st.acc_norm);
		fputc(',', f);
		tool_metrics_put_number(f, lr);
		fprintf(f, ",%" PRIu64 ",%s\n", t->numel, shape);
	}
	if (fflush(f) != 0 || ferror(f))
		return sim_record_failed(rk, cx->o->record_metrics);
	return 0;
}

/* Creates `path` with its CSV header; rank 0 appends to it. */
static int
sim_record_create(const char *path, const char *header)
{
	FILE *f;

	if (path == NULL)
		return 0;
	if ((f = fopen(path, "w")) == NULL || fputs(header, f) < 0 ||
	    fclose(f) != 0) {
		fprintf(stderr, "bellows sim: cannot create %s: %s\n", path,
		    strerror(errno));
		return BELLOWS_EIO;
	}
	return 0;
}

/* Floats this rank sends for layer l under decision d in send mode
 * `mode` (the agent's: level, threshold, gate and calibration): PowerSGD
 * sends P and Q, level x (rows + cols), for a compressed matrix. */
static uint64_t
sim_floats_sent(const bellows_layer *t, const bellows_decision *d, uint32_t l,
    int mode)
{
	double level = l < d->n_layers ? d->level[l] : 0;
	uint64_t rows, cols, compressed;

	if (mode != BELLOWS_SEND_COMPRESSED || level <= 0 || t->ndim < 2)
		return t->numel;
	rows = t->shape[0];
	cols = t->numel / rows;
	compressed = (uint64_t)ceil(level * (double)(rows + cols));
	return compressed < t->numel ? compressed : t->numel;
}

/* What one step's modelled sends add up to. */
typedef struct sim_step_sums {
	double comm_ms;       /* layer sends, or buckets with --buckets */
	double codec_ms;      /* codec time of the compressed sends */
	uint64_t floats_sent; /* floats sent */
	uint64_t act_stored;  /* activation bytes kept for backward */
	double bucket_bytes;  /* bytes of the bucket being filled */
	bool bucket_comp;     /* every layer in it went compressed */
	uint32_t bucket;      /* its index */
} sim_step_sums;

/* Reports the collective of the bucket filled so far. */
static int
sim_rank_bucket(sim_rank *rk, uint64_t step, sim_step_sums *sum)
{
	const sim_opts *o = rk->cx->o;
	double ms = sim_allreduce_ms(o, sum->bucket_bytes) *
	    sim_noise(o, rk->rank, step, 0x100000u + sum->bucket);
	int r;

	r = bellows_agent_comm_bucket(rk->agent, (uint64_t)sum->bucket_bytes,
	    sum->bucket_comp, ms);
	if (r != 0)
		return r;
	sum->comm_ms += ms;
	sum->bucket_bytes = 0;
	sum->bucket_comp = true;
	sum->bucket++;
	return 0;
}

/* Sends layer l in `step` under d as the agent says, reporting the
 * modelled times, bucket and activation when asked for. */
static int
sim_rank_send(sim_rank *rk, uint32_t l, uint64_t step,
    const bellows_decision *d, sim_step_sums *sum)
{
	const sim_opts *o = rk->cx->o;
	const bellows_layer *t = &rk->cx->table[l];
	double bytes = (double)t->numel * 4, sent, ms, codec = 0;
	int mode = bellows_agent_send_mode(rk->agent, l), r;
	bool comp = mode == BELLOWS_SEND_COMPRESSED;

	if (mode < 0)
		return mode;
	sum->floats_sent += sim_floats_sent(t, d, l, mode);
	if (o->act && t->ndim >= 2) {
		uint32_t batch = d->batch_size > 0 ? d->batch_size : 128;
		double eb = l < d->n_layers && d->error_bound != NULL
		    ? d->error_bound[l]
		    : 0;
		bellows_act_stats a = {
			.lbar = o->act_lbar *
			    sim_noise(o, rk->rank, step, 0x200000u + l),
			.nonzero = fmin(1.0,
			    o->act_nonzero *
				sim_noise(o, rk->rank, step, 0x300000u + l)),
			.raw_bytes = t->numel * batch / 2,
		};

		a.stored_bytes = eb > 0
		    ? (uint64_t)((double)a.raw_bytes / o->act_ratio)
		    : a.raw_bytes;
		if ((r = bellows_agent_observe_activation(rk->agent, l, &a)) !=
		    0)
			return r;
		sum->act_stored += a.stored_bytes;
	}
	if (!o->comm_model)
		return 0;
	sent = comp ? bytes / o->ratio : bytes;
	ms = sim_allreduce_ms(o, sent) * sim_noise(o, rk->rank, step, l);
	if (comp)
		codec = sim_codec_ms(o, bytes) *
		    sim_noise(o, rk->rank, step, 0x400000u + l);
	if ((r = bellows_agent_comm_layer(rk->agent, l, comp, ms, codec)) != 0)
		return r;
	sum->codec_ms += codec;
	if (o->buckets == 0) {
		sum->comm_ms += ms;
		return 0;
	}
	sum->bucket_bytes += sent;
	sum->bucket_comp = sum->bucket_comp && comp;
	/* Layers split into contiguous buckets: l goes to l * N / L. */
	if (l + 1 == o->layers ||
	    (uint64_t)(l + 1) * o->buckets / o->layers != sum->bucket)
		return sim_rank_bucket(rk, step, sum);
	return 0;
}

static int
sim_rank_steps(sim_rank *rk, uint64_t start_step)
{
	const sim_ctx *cx = rk->cx;
	const sim_opts *o = cx->o;
	sim_slot *slot = &cx->slots[rk->rank];
	uint64_t *record = cx->seq + (size_t)rk->rank * cx->total_steps;
	uint64_t last_seq = 0;
	bool victim = o->kill && o->kill_rank == rk->rank &&
	    start_step == (uint64_t)o->start_window * o->steps;
	int r;

	for (uint64_t s = start_step; s < cx->total_steps; s++) {
		bellows_step_info info = { 0 };
		sim_step_sums sum = { .bucket_comp = true };
		bellows_decision d;
		uint64_t got = 0, t0;
		double course;

		if (victim && s == (uint64_t)o->kill_window * o->steps) {
			/* Die here, at the start of the window, as the parent
			 * is told to make it. */
			atomic_store(&slot->at_kill, 1);
			while (!atomic_load(&cx->sh->stop))
				nanosleep(&(struct timespec){ 0, 1000000 },
				    NULL);
			return BELLOWS_ECLOSED;
		}
		if ((r = sim_rank_lockstep(cx, s)) != 0)
			return r;
		if ((r = bellows_agent_step_begin(rk->agent, &got)) != 0 ||
		    got != s) {
			fprintf(stderr,
			    "rank %u: step_begin at step %" PRIu64
			    " returned %s (step %" PRIu64 ")\n",
			    rk->rank, s, bellows_strerror(r), got);
			return r != 0 ? r : BELLOWS_ESTATE;
		}
		if ((r = bellows_agent_decision(rk->agent, &d)) != 0) {
			fprintf(stderr, "rank %u: decision: %s\n", rk->rank,
			    bellows_strerror(r));
			return r;
		}
		record[s] = d.seq;
		if (d.window > 0 && d.apply_step >= d.window * o->steps &&
		    d.apply_step - d.window * o->steps < rk->lag)
			rk->lag = d.apply_step - d.window * o->steps;
		if ((r = sim_record_levels(rk, &d)) != 0)
			return r;
		if (d.seq != last_seq && d.seq != 0)
			rk->applied++;
		if (rk->rank == 0 && !o->quiet && d.seq != last_seq &&
		    d.seq != 0)
			sim_print_decision(s, &d);
		last_seq = d.seq;

		t0 = com_clock_ns();
		course = sim_norm_course(cx, s);
		for (uint32_t l = 0; l < o->layers; l++) {
			const bellows_layer *t = &cx->table[l];

			sim_rank_gradient(rk, l, s, course);
			r = bellows_agent_observe(rk->agent, l, rk->grad,
			    t->numel);
			if (r == 0)
				r = sim_rank_send(rk, l, s, &d, &sum);
			if (r != 0) {
				fprintf(stderr,
				    "rank %u: observe or send layer %u: %s\n",
				    rk->rank, l, bellows_strerror(r));
				return r;
			}
		}
		if (o->step_ms > 0) {
			struct timespec ts = { o->step_ms / 1000,
				(long)(o->step_ms % 1000) * 1000000 };

			while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
				;
		}
		info.floats_sent = sum.floats_sent;
		info.floats_raw = cx->floats_raw;
		info.bytes_sent = 4 * info.floats_sent;
		info.compute_ms = (double)(com_clock_ns() - t0) / 1e6;
		/* Without a model: a 10 Gbit/s link with 50 us of latency. */
		info.comm_ms = o->comm_model
		    ? sum.comm_ms
		    : 0.05 + (double)info.bytes_sent / 1.25e6;
		info.codec_ms = sum.codec_ms;
		if (o->backward_ms > 0)
			info.backward_ms = o->backward_ms *
			    sim_noise(o, rk->rank, s, 0x500000u);
		if (o->mem_total > 0) {
			info.mem_device_total = o->mem_total;
			info.mem_device_used = o->mem_used + sum.act_stored;
		}
		info.lr = sim_lr(o, s / o->steps);
		/* The LR decays at window boundaries: the last step of a
		 * window tells bellowsd the LR the next one starts with. */
		info.lr_next = s + 1 < cx->total_steps
		    ? sim_lr(o, (s + 1) / o->steps)
		    : info.lr;
		info.batch_size = d.batch_size > 0 ? d.batch_size : 128;
		info.epoch = s / o->steps;
		if ((r = bellows_agent_step_end(rk->agent, &info)) != 0) {
			fprintf(stderr,
			    "rank %u: step_end at step %" PRIu64 ": %s\n",
			    rk->rank, s, bellows_strerror(r));
			return r;
		}
		if ((s + 1) % o->steps == 0 &&
		    (r = sim_record_metrics(rk, s / o->steps, info.lr)) != 0)
			return r;
		atomic_store(&slot->step_done, s + 1);
	}
	return 0;
}

/* The decisions a process of a rank that lost bellowsd for good (it is
 * not welcomed at its end) was owed and did not apply: the one its first
 * step waits for, and one for each window it ran whose decision would
 * have taken effect within the run, at the lag between a window's end and
 * its decision that the decisions it applied showed (apply_lag 1,
 * bellowsd's default, when none came); less those it applied. The agent
 * stops waiting for decisions once it has lost the daemon, so most of
 * these are no misses of its own. */
static uint64_t
sim_rank_lost(const sim_rank *rk)
{
	const sim_ctx *cx = rk->cx;
	uint64_t lag = rk->lag != UINT64_MAX ? rk->lag : 1, owed = 1;

	for (uint64_t w = rk->start_window; w < cx->o->windows; w++) {
		if ((w + 1) * cx->o->steps + lag < cx->total_steps)
			owed++;
	}
	return owed > rk->applied ? owed - rk->applied : 0;
}

/* The body of a rank process. Returns its exit code. */
static int
sim_rank_main(const sim_ctx *cx, uint32_t rank, uint64_t start_step)
{
	const sim_opts *o = cx->o;
	sim_rank rk = {
		.cx = cx,
		.rank = rank,
		.lag = UINT64_MAX,
		.start_window = start_step / cx->o->steps,
	};
	sim_slot *slot = &cx->slots[rank];
	bellows_agent_config cfg;
	bellows_agent_stats st;
	int r;

	bellows_agent_config_init(&cfg);
	cfg.control = o->control;
	cfg.publish = o->publish;
	cfg.job = o->job;
	cfg.rank = rank;
	cfg.world = o->ranks;
	cfg.layers = cx->table;
	cfg.n_layers = o->layers;
	cfg.window_steps = o->steps;
	cfg.start_step = start_step;
	cfg.start_window = start_step / o->steps;
	cfg.run_id = o->run_id;
	cfg.server_key = o->keys.server_path;
	cfg.client_key = o->keys.client_path;
	/* A --kill victim coming back is a rank of this launch, not a
	 * resume. */
	cfg.resume = o->resume &&
	    start_step == (uint64_t)o->start_window * o->steps;
	cfg.decision_timeout_ms = o->decision_timeout_ms;
	cfg.log = sim_log;
	cfg.log_arg = &rk;
	cfg.log_level = BELLOWS_LOG_WARN;
	if ((r = sim_rank_patterns(&rk)) != 0) {
		fprintf(stderr, "rank %u: %s\n", rank, bellows_strerror(r));
		goto out;
	}
	if (rank == 0 && o->record_metrics != NULL &&
	    (rk.metrics_out = fopen(o->record_metrics, "a")) == NULL) {
		r = sim_record_failed(&rk, o->record_metrics);
		goto out;
	}
	if (rank == 0 && o->record_levels != NULL &&
	    (rk.levels_out = fopen(o->record_levels, "a")) == NULL) {
		r = sim_record_failed(&rk, o->record_levels);
		goto out;
	}
	if ((r = bellows_agent_open(&cfg, &rk.agent)) != 0) {
		fprintf(stderr, "rank %u: cannot open the agent: %s\n", rank,
		    bellows_strerror(r));
		goto out;
	}
	if ((r = sim_rank_join(&rk)) != 0 ||
	    (r = sim_rank_steps(&rk, start_step)) != 0)
		goto out;
	if (bellows_agent_stats_get(rk.agent, &st) == 0) {
		atomic_fetch_add(&slot->decisions, st.decisions);
		atomic_fetch_add(&slot->misses, st.decision_misses);
		atomic_fetch_add(&slot->snapshots, st.snapshots);
		atomic_fetch_add(&slot->reconnects, st.reconnects);
		atomic_fetch_add(&slot->reports_dropped, st.reports_dropped);
		atomic_store(&slot->finished, 1);
		atomic_store(&slot->welcomed_end, st.connected != 0);
		atomic_store(&slot->lost,
		    st.connected ? 0 : sim_rank_lost(&rk));
		slot->last_error = st.last_error;
		snprintf(slot->last_error_text, sizeof(slot->last_error_text),
		    "%s", st.last_error_text);
	}
out:
	sim_rank_free(&rk);
	fflush(stdout);
	if (r == BELLOWS_ECLOSED)
		return SIM_EXIT_STOPPED;
	return r == 0 ? 0 : 1;
}

/* ---- the parent -------------------------------------------------------- */

/* Asks bellowsd for its status, so that a daemon that is not there is
 * one clear error rather than a job that trains on defaults. The client's
 * ZeroMQ context is gone again before any rank is forked. */
static int
sim_ping(const sim_opts *o)
{
	tool_client *client = NULL;
	com_msg req, reply;
	int r;

	com_msg_init(&req, COM_MSG_STATUS_REQUEST);
	com_msg_init(&reply, COM_MSG_NONE);
	r = tool_client_open(o->control, &o->keys, &client);
	if (r == 0)
		r = tool_client_request(client, &req, SIM_PING_MS, &reply);
	if (r == BELLOWS_ECONFIG ||
	    (r == BELLOWS_ETIMEDOUT && tool_client_why(client)[0] != '\0'))
		fprintf(stderr, "bellows sim: %s (bellowsd at %s)\n",
		    tool_client_why(client), o->control);
	else if (r == BELLOWS_ETIMEDOUT)
		fprintf(stderr,
		    "bellows sim: bellowsd at %s did not answer within %d "
		    "ms\n",
		    o->control, SIM_PING_MS);
	else if (r != 0)
		fprintf(stderr,
		    "bellows sim: cannot reach bellowsd at %s: %s\n",
		    o->control, bellows_strerror(r));
	tool_client_close(&client);
	com_msg_fini(&req);
	com_msg_fini(&reply);
	return r;
}

static int
sim_map(sim_ctx *cx)
{
	const sim_opts *o = cx->o;
	size_t head = 64, slots = (size_t)o->ranks * sizeof(sim_slot);
	size_t records = (size_t)o->ranks * cx->total_steps * sizeof(uint64_t);
	void *map;

	cx->map_len = head + slots + records;
	map = mmap(NULL, cx->map_len, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED)
		return BELLOWS_ENOMEM;
	cx->map = map;
	cx->sh = map;
	cx->slots = (sim_slot *)((char *)map + head);
	cx->seq = (uint64_t *)((char *)map + head + slots);
	atomic_init(&cx->sh->stop, 0);
	atomic_init(&cx->sh->levels_next, 0);
	for (uint32_t r = 0; r < o->ranks; r++) {
		/* Ranks started at a later window have done the steps
		 * before it. */
		atomic_init(&cx->slots[r].step_done,
		    (uint64_t)o->start_window * o->steps);
		atomic_init(&cx->slots[r].alive, 1);
		atomic_init(&cx->slots[r].at_kill, 0);
		atomic_init(&cx->slots[r].welcomed_end, 0);
		atomic_init(&cx->slots[r].lost, 0);
	}
	memset(cx->seq, 0xff, records);
	return 0;
}

static pid_t
sim_fork(const sim_ctx *cx, uint32_t rank, uint64_t start_step)
{
	pid_t parent = getpid();
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid == 0) {
		int rc;

		/* A rank does not outlive the sim: killed with it (SIGTERM
		 * from a test's cleanup, say), not left training alone. */
		if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 ||
		    getppid() != parent)
			_exit(1);
		rc = sim_rank_main(cx, rank, start_step);

		/* exit, not _exit: the rank flushes its stdio and, under a
		 * sanitizer, checks itself for leaks. */
		exit(rc);
	}
	return pid;
}

typedef enum sim_kill_state {
	SIM_KILL_NONE,    /* no --kill, or done with it */
	SIM_KILL_PENDING, /* waiting for the kill point */
	SIM_KILL_DOWN,    /* killed, waiting down_ms */
} sim_kill_state;

typedef struct sim_super {
	pid_t *pids;         /* per rank: running process, 0 = none */
	bool *done;          /* per rank: exited 0 after its last step */
	uint32_t running;    /* processes not reaped yet */
	bool failed;         /* a rank failed or the group stalled */
	sim_kill_state kill; /* --kill progress */
	pid_t killed_pid;    /* the victim's first process */
	bool killed_reaped;  /* ... and it was reaped */
	uint64_t killed_ms;  /* when it was killed */
} sim_super;

static void
sim_reap(sim_ctx *cx, sim_super *sv)
{
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		uint32_t r;

		sv->running--;
		if (sv->kill == SIM_KILL_DOWN && pid == sv->killed_pid) {
			sv->killed_reaped = true;
			continue;
		}
		for (r = 0; r < cx->o->ranks && sv->pids[r] != pid; r++)
			;
		if (r == cx->o->ranks)
			continue;
		sv->pids[r] = 0;
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
			sv->done[r] = true;
			continue;
		}
		if (WIFEXITED(status) &&
		    WEXITSTATUS(status) == SIM_EXIT_STOPPED &&
		    atomic_load(&cx->sh->stop))
			continue;
		if (WIFEXITED(status))
			printf("sim: rank %u failed (exit status %d)\n", r,
			    WEXITSTATUS(status));
		else
			printf("sim: rank %u died of signal %d\n", r,
			    WIFSIGNALED(status) ? WTERMSIG(status) : 0);
		fflush(stdout);
		sv->failed = true;
		/* The others would wait for it forever at the next step. */
		atomic_store(&cx->slots[r].alive, 0);
		atomic_store(&cx->sh->stop, 1);
	}
}

static uint64_t
sim_group_step(const sim_ctx *cx, bool lowest)
{
	uint64_t v = lowest ? UINT64_MAX : 0;

	for (uint32_t r = 0; r < cx->o->ranks; r++) {
		uint64_t s = atomic_load(&cx->slots[r].step_done);

		if (!atomic_load(&cx->slots[r].alive))
			continue;
		if (lowest ? s < v : s > v)
			v = s;
	}
	return v == UINT64_MAX ? 0 : v;
}

static void
sim_kill_duties(sim_ctx *cx, sim_super *sv)
{
	const sim_opts *o = cx->o;
	uint32_t v = o->kill_rank;
	uint64_t now = com_clock_ms(), target;

	if (sv->kill == SIM_KILL_PENDING) {
		if (!atomic_load(&cx->slots[v].at_kill) ||
		    sim_group_step(cx, true) <
			(uint64_t)o->kill_window * o->steps)
			return;
		kill(sv->pids[v], SIGKILL);
		atomic_store(&cx->slots[v].alive, 0);
		sv->killed_pid = sv->pids[v];
		sv->pids[v] = 0;
		sv->killed_ms = now;
		sv->kill = SIM_KILL_DOWN;
		printf("sim: killed rank %u at step %" PRIu64
		       " (start of window %u)\n",
		    v, atomic_load(&cx->slots[v].step_done), o->kill_window);
		fflush(stdout);
		return;
	}
	/* Once every other rank finished there is nothing to rejoin: no
	 * need to wait out --down-ms. */
	if (sv->kill != SIM_KILL_DOWN || !sv->killed_reaped ||
	    (now - sv->killed_ms < o->down_ms && sv->running > 0))
		return;
	sv->kill = SIM_KILL_NONE;
	target = (sim_group_step(cx, false) / o->steps + 2) * o->steps;
	if (target >= cx->total_steps) {
		/* It never applied the decisions the others applied after
		 * it was killed: the run did not agree. */
		printf("sim: the group is past window %" PRIu64
		       "; rank %u does not rejoin and missed every decision "
		       "after step %" PRIu64 "\n",
		    target / o->steps - 1, v,
		    atomic_load(&cx->slots[v].step_done));
		sv->done[v] = true;
		sv->failed = true;
		fflush(stdout);
		return;
	}
	/* Ahead of the group, so nobody waits for it before `target`;
	 * step_done first, so that whoever sees it alive sees where it is. */
	atomic_store(&cx->slots[v].step_done, target);
	atomic_store(&cx->slots[v].alive, 1);
	printf("sim: rank %u rejoins as a new process at step %" PRIu64
	       " (window %" PRIu64 ")\n",
	    v, target, target / o->steps);
	sv->pids[v] = sim_fork(cx, v, target);
	if (sv->pids[v] < 0) {
		sv->pids[v] = 0;
		printf("sim: cannot fork rank %u: %s\n", v, strerror(errno));
		sv->failed = true;
		atomic_store(&cx->slots[v].alive, 0);
		atomic_store(&cx->sh->stop, 1);
	} else {
		sv->running++;
	}
	fflush(stdout);
}

/* Runs the ranks to the end. Returns false if the run failed. */
static bool
sim_supervise(sim_ctx *cx)
{
	const sim_opts *o = cx->o;
	const struct timespec nap = { 0, SIM_SUPERVISE_NS };
	uint64_t stall_ms = 2 * (uint64_t)o->decision_timeout_ms + SIM_JOIN_MS +
	    10000;
	uint64_t progress = 0, progress_ms = com_clock_ms();
	uint64_t stop_ms = 0;
	sim_super sv = { 0 };
	bool ok = false;

	sv.pids = calloc(o->ranks, sizeof(*sv.pids));
	sv.done = calloc(o->ranks, sizeof(*sv.done));
	if (sv.pids == NULL || sv.done == NULL) {
		fprintf(stderr, "bellows sim: out of memory\n");
		goto out;
	}
	sv.kill = o->kill ? SIM_KILL_PENDING : SIM_KILL_NONE;
	for (uint32_t r = 0; r < o->ranks; r++) {
		sv.pids[r] = sim_fork(cx, r,
		    (uint64_t)o->start_window * o->steps);
		if (sv.pids[r] < 0) {
			sv.pids[r] = 0;
			fprintf(stderr,
			    "bellows sim: cannot fork rank %u: %s\n", r,
			    strerror(errno));
			sv.failed = true;
			atomic_store(&cx->sh->stop, 1);
			break;
		}
		sv.running++;
	}
	while (sv.running > 0 || sv.kill == SIM_KILL_DOWN) {
		uint64_t now = com_clock_ms(), sum = 0;

		sim_reap(cx, &sv);
		if (!atomic_load(&cx->sh->stop))
			sim_kill_duties(cx, &sv);
		else if (sv.kill == SIM_KILL_DOWN && sv.killed_reaped)
			sv.kill = SIM_KILL_NONE;
		for (uint32_t r = 0; r < o->ranks; r++)
			sum += atomic_load(&cx->slots[r].step_done);
		if (sum != progress) {
			progress = sum;
			progress_ms = now;
		} else if (sv.running > 0 && !atomic_load(&cx->sh->stop) &&
		    now - progress_ms > stall_ms) {
			printf("sim: no rank finished a step for %" PRIu64
			       " ms (group at step %" PRIu64 "); stopping\n",
			    stall_ms, sim_group_step(cx, true));
			fflush(stdout);
			sv.failed = true;
			atomic_store(&cx->sh->stop, 1);
		}
		if (atomic_load(&cx->sh->stop)) {
			/* A rank stuck inside the agent does not see the
			 * flag; give it a few seconds, then kill it. */
			if (stop_ms == 0)
				stop_ms = now;
			if (now - stop_ms > 5000) {
				for (uint32_t r = 0; r < o->ranks; r++) {
					if (sv.pids[r] > 0)
						kill(sv.pids[r], SIGKILL);
				}
			}
		}
		nanosleep(&nap, NULL);
	}
	ok = !sv.failed;
	for (uint32_t r = 0; r < o->ranks && ok; r++) {
		if (!sv.done[r]) {
			printf("sim: rank %u did not finish\n", r);
			ok = false;
		}
	}
out:
	free(sv.pids);
	free(sv.done);
	return ok;
}

static int
sim_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

typedef struct sim_seq_span {
	uint64_t seq;   /* decision */
	uint64_t first; /* first step any rank applied it */
	uint64_t last;  /* last step any rank applied it */
} sim_seq_span;

/* Checks that all ranks that ran a step applied the same decision at it,
 * and prints the decisions applied. Returns true when they agreed; the
 * number of distinct decisions goes to *ret_n. */
static bool
sim_verify(const sim_ctx *cx, uint64_t *ret_n)
{
	const sim_opts *o = cx->o;
	uint64_t disagree = 0, n_steps = cx->total_steps, n = 0;
	sim_seq_span *spans = NULL;
	uint64_t *seen = NULL;
	size_t n_seen = 0, cap = 0;

	for (uint64_t s = 0; s < n_steps; s++) {
		uint64_t ref = SIM_NOT_RUN;
		uint32_t ref_rank = 0;

		for (uint32_t r = 0; r < o->ranks; r++) {
			uint64_t v = cx->seq[(size_t)r * n_steps + s];

			if (v == SIM_NOT_RUN || v == ref)
				continue;
			if (ref == SIM_NOT_RUN) {
				ref = v;
				ref_rank = r;
				continue;
			}
			if (disagree++ == 0)
				printf("sim: disagreement at step %" PRIu64
				       ": rank %u applied decision #%" PRIu64
				       ", rank %u #%" PRIu64 "\n",
				    s, ref_rank, ref, r, v);
			break;
		}
	}
	/* Each rank applies a decision for a run of steps: collect one
	 * entry per run, then sort out the duplicates. */
	for (uint32_t r = 0; r < o->ranks; r++) {
		uint64_t prev = SIM_NOT_RUN;

		for (uint64_t s = 0; s < n_steps; s++) {
			uint64_t v = cx->seq[(size_t)r * n_steps + s];

			if (v == prev || v == SIM_NOT_RUN || v == 0)
				continue;
			prev = v;
			if (n_seen == cap) {
				size_t nc = cap ? 2 * cap : 64;
				uint64_t *g = realloc(seen, nc * sizeof(*g));

				if (g == NULL)
					goto oom;
				seen = g;
				cap = nc;
			}
			seen[n_seen++] = v;
		}
	}
	if (n_seen > 0)
		qsort(seen, n_seen, sizeof(*seen), sim_cmp_u64);
	for (size_t i = 0; i < n_seen; i++) {
		if (i == 0 || seen[i] != seen[i - 1])
			seen[n++] = seen[i];
	}
	spans = calloc(n ? n : 1, sizeof(*spans));
	if (spans == NULL)
		goto oom;
	for (uint64_t i = 0; i < n; i++)
		spans[i] = (sim_seq_span){ seen[i], UINT64_MAX, 0 };
	for (uint32_t r = 0; r < o->ranks; r++) {
		for (uint64_t s = 0; s < n_steps; s++) {
			uint64_t v = cx->seq[(size_t)r * n_steps + s];
			size_t lo = 0, hi = n;

			if (v == SIM_NOT_RUN || v == 0)
				continue;
			while (lo < hi) {
				size_t mid = (lo + hi) / 2;

				if (spans[mid].seq < v)
					lo = mid + 1;
				else
					hi = mid;
			}
			if (lo < n && spans[lo].seq == v) {
				if (s < spans[lo].first)
					spans[lo].first = s;
				if (s > spans[lo].last)
					spans[lo].last = s;
			}
		}
	}
	printf("sim: %" PRIu64 " decisions applied:\n", n);
	for (uint64_t i = 0; i < n; i++) {
		if (n > 2 * SIM_SUMMARY_ROWS && i == SIM_SUMMARY_ROWS) {
			printf("  ... %" PRIu64 " more ...\n",
			    n - 2 * SIM_SUMMARY_ROWS);
			i = n - SIM_SUMMARY_ROWS - 1;
			continue;
		}
		printf("  #%" PRIu64 ": steps %" PRIu64 "..%" PRIu64
		       " (windows %" PRIu64 "..%" PRIu64 ")\n",
		    spans[i].seq, spans[i].first, spans[i].last,
		    spans[i].first / o->steps, spans[i].last / o->steps);
	}
	if (disagree > 0)
		printf("sim: ranks disagreed at %" PRIu64 " of %" PRIu64
		       " steps\n",
		    disagree, n_steps);
	free(spans);
	free(seen);
	*ret_n = n;
	return disagree == 0;
oom:
	printf("sim: out of memory while checking agreement\n");
	free(spans);
	free(seen);
	*ret_n = 0;
	return false;
}

/* The decisions the ranks should have had and did not: for each rank,
 * those it waited for at their apply step in vain (the agent's misses,
 * the Welcome of its first step included) or, when it ended without
 * bellowsd, those owed in the run that it did not apply (sim_rank_lost),
 * if more; the largest over the ranks. Prints a line for each rank that
 * missed some. */
static uint64_t
sim_missed(const sim_ctx *cx)
{
	uint64_t most = 0;

	for (uint32_t r = 0; r < cx->o->ranks; r++) {
		const sim_slot *sl = &cx->slots[r];
		uint64_t miss = atomic_load(&sl->misses), lost = 0;

		if (atomic_load(&sl->finished) &&
		    !atomic_load(&sl->welcomed_end)) {
			lost = atomic_load(&sl->lost);
			if (atomic_load(&sl->decisions) == 0 &&
			    sl->last_error != 0)
				printf(
				    "sim: rank %u: bellowsd refused the job: "
				    "%s\n",
				    r, sl->last_error_text);
			else
				printf(
				    "sim: rank %u ended without bellowsd "
				    "(last refusal: %s): %" PRIu64
				    " decisions due in the run not applied\n",
				    r,
				    sl->last_error != 0 ? sl->last_error_text
							: "none",
				    lost);
		}
		if (miss > 0)
			printf("sim: rank %u waited for %" PRIu64
			       " decisions in vain (decision timeout)\n",
			    r, miss);
		if (miss > most)
			most = miss;
		if (lost > most)
			most = lost;
	}
	return most;
}

/* Steps finished by the rank furthest ahead. */
static uint64_t
sim_last_step(const sim_ctx *cx)
{
	uint64_t v = 0;

	for (uint32_t r = 0; r < cx->o->ranks; r++) {
		uint64_t s = atomic_load(&cx->slots[r].step_done);

		if (s > v)
			v = s;
	}
	return v;
}

static void
sim_print_agents(const sim_ctx *cx)
{
	uint64_t dec = 0, miss = 0, snap = 0, recon = 0, drop = 0;

	for (uint32_t r = 0; r < cx->o->ranks; r++) {
		dec += atomic_load(&cx->slots[r].decisions);
		miss += atomic_load(&cx->slots[r].misses);
		snap += atomic_load(&cx->slots[r].snapshots);
		recon += atomic_load(&cx->slots[r].reconnects);
		drop += atomic_load(&cx->slots[r].reports_dropped);
	}
	printf("sim: agents received %" PRIu64 " decisions; %" PRIu64
	       " misses, %" PRIu64 " snapshots, %" PRIu64
	       " reconnects, %" PRIu64 " reports dropped\n",
	    dec, miss, snap, recon, drop);
}

int
tool_sim_main(int argc, char **argv)
{
	sim_opts o;
	sim_ctx cx = { .o = &o };
	uint64_t decisions = 0, missed, t0;
	bool ran, agreed;
	int rc;

	if ((rc = sim_parse(argc, argv, &o)) >= 0)
		return rc;
	cx.total_steps = (uint64_t)o.windows * o.steps;
	rc = 1;
	if (sim_model_build(&cx) != 0) {
		fprintf(stderr, "bellows sim: out of memory\n");
		goto out;
	}
	if (sim_record_create(o.record_metrics,
		"window,layer,grad_norm,lr,numel,shape\n") != 0 ||
	    sim_record_create(o.record_levels, "window,layer,level\n") != 0)
		goto out;
	if (sim_ping(&o) != 0)
		goto out;
	if (sim_map(&cx) != 0) {
		fprintf(stderr,
		    "bellows sim: cannot map %zu bytes of shared records\n",
		    cx.map_len);
		goto out;
	}
	printf("sim: job '%s': %u ranks, %u layers (%" PRIu64
	       " floats), %u windows of %u steps, bellowsd at %s\n",
	    o.job, o.ranks, o.layers, cx.floats_raw, o.windows, o.steps,
	    o.control);
	if (o.comm_model) {
		uint64_t threshold;
		uint32_t rows;

		if (sim_model_threshold(&cx, &threshold, &rows) != 0) {
			fprintf(stderr, "bellows sim: out of memory\n");
			goto out;
		}
		printf("sim: comm model: %g ms latency, %g Gbit/s, ratio %g, "
		       "codec %g ms + %g ms/MiB, noise %g\n",
		    o.alpha_ms, o.gbps, o.ratio, o.codec_ms, o.codec_ms_per_mb,
		    o.comm_noise);
		if (threshold == UINT64_MAX)
			printf("sim: comm model implies threshold=infinity "
			       "over %u sizes\n",
			    rows);
		else
			printf("sim: comm model implies threshold=%" PRIu64
			       " over %u sizes\n",
			    threshold, rows);
	}
	t0 = com_clock_ms();
	ran = sim_supervise(&cx);
	/* A run that failed (a rank died, stalled or never rejoined) did not
	 * have every rank apply every decision: it never reads agreed=yes. */
	agreed = sim_verify(&cx, &decisions) && ran;
	/* Ranks that agree on the decisions they applied still failed if
	 * decisions they were owed never came: bellowsd refused the job,
	 * went away for good or answered too late. */
	missed = sim_missed(&cx);
	agreed = agreed && missed == 0;
	sim_print_agents(&cx);
	printf("sim: reached step %" PRIu64 " of %" PRIu64 " in %.1f s\n",
	    sim_last_step(&cx), cx.total_steps,
	    (double)(com_clock_ms() - t0) / 1000.0);
	printf("sim: ranks=%u windows=%u decisions=%" PRIu64 " of %" PRIu64
	       " expected agreed=%s\n",
	    o.ranks, o.windows, decisions, decisions + missed,
	    agreed ? "yes" : "no");
	rc = agreed ? 0 : 1;
out:
	fflush(stdout);
	if (cx.map != NULL)
		munmap(cx.map, cx.map_len);
	sim_model_free(&cx);
	return rc;
}
