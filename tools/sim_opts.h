/* sim_opts - the options of `bellows sim`: parsed, checked, defaulted.
 *
 * Private to the sim modules (sim.c, sim_ctx.c, sim_model.c, sim_comm.c,
 * sim_rank.c, sim_record.c). Every limit a rank or the supervisor relies
 * on (ranks, layers, records) is checked here once, so the other modules
 * take a sim_opts as given: they never see a value out of range.
 */
#ifndef TOOL_SIM_OPTS_H
#define TOOL_SIM_OPTS_H

#include "common/args.h"
#include "client/client.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define SIM_MAX_RANKS   256        /* each rank is a process */
#define SIM_MAX_LAYERS  4096       /* layers in the model */
#define SIM_MAX_RECORDS (1u << 24) /* ranks x steps recorded */

typedef struct sim_opts {
	com_args_shared sh;           /* --job (the shared options) */
	const char *control;          /* bellowsd ROUTER endpoint */
	const char *publish;          /* bellowsd PUB endpoint */
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
	bool exp_hist;                /* 2-D layers report their exponent
				       * histograms (gcomp) */
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
	double eval_final;      /* --eval: the accuracy rank 0 reports after
				 * the last window, 0: no evaluations */
	uint32_t step_model;    /* sim_step_model: what a step's time is */
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
	uint32_t aggregate;     /* bellows_aggregate: --aggregate */
	uint32_t node_ranks;    /* ranks per node with --aggregate node */
} sim_opts;

/* What a rank reports as a step's time (--step-model). */
typedef enum sim_step_model {
	SIM_STEP_WALL = 0,    /* the wall clock, the agent's own timing */
	SIM_STEP_SYNC = 1,    /* the backward time, then every send and
			       * codec time one after the other */
	SIM_STEP_OVERLAP = 2, /* raw sends overlapped with the backward
			       * time (DDP's buckets), then the compressed
			       * sends and codec times after it */
} sim_step_model;

/* Parses the arguments of `bellows sim` (argv[0] is "sim") into *o,
 * which it fills with the defaults first, and checks them together
 * (--kill within the job, --buckets with --comm-model, ...); draws the
 * run identity when --run-id is not given and finds the CURVE keys.
 * Prints --help to stdout, errors and the usage to stderr. Returns -1
 * to go on, else the process exit code: 0 after --help, 2 on a usage
 * error. *o borrows strings from argv. */
int tool_sim_opts_parse(int argc, char **argv, sim_opts *o);

/* Writes the usage text of `bellows sim` to f. */
void tool_sim_opts_usage(FILE *f);

#endif /* TOOL_SIM_OPTS_H */
