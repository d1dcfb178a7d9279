/* plugin - what the process boundary costs a plug-in policy per window.
 *
 * Loads the threshold example (examples/policies/threshold_example) as
 * bellowsd does, through a YAML configuration, and runs it on the same
 * windows twice: in this process (as `bellows replay` runs plug-ins) and
 * in its worker process (as bellowsd runs them: the window and proposal
 * framed over a socketpair, see policyhost/worker.h). A window is a job of
 * 8 ranks with L layers named like a transformer's ("blocks.N.attn.qkv.
 * weight", 2-D shapes), every statistic filled, one comm sample per rank;
 * the threshold policy reads each layer's norm and writes each level.
 *
 * Each configuration runs WARMUP windows, then ROUNDS timed windows, each
 * timed alone (ctl_policy_set_run, the call bellowsd makes). The numbers
 * are medians and 99th percentiles in microseconds; `boundary` is the
 * worker's median minus the in-process one.
 *
 * The last lines read
 *   plugin: layers=L in_process_us=A worker_us=B boundary_us=C
 */
#include "common/clock.h"
#include "policyhost/config.h"
#include "policyhost/log.h"
#include "policyhost/plugin.h"
#include "policyhost/policy_host.h"

#include <bellows/error.h>

#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WARMUP 200  /* windows before timing */
#define ROUNDS 2000 /* windows timed */
#define WORLD  8    /* ranks of the job */

static int
bench_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Builds a job of n layers: the table agents announce and the window the
 * policies see (statistics filled with deterministic noise). */
static int
bench_job(uint32_t n, com_layer_info *info, char (*names)[48],
    bellows_window_layer *wl, bellows_comm_sample *comm, bellows_window *w)
{
	for (uint32_t l = 0; l < n; l++) {
		com_layer_info *li = &info[l];
		double g = 0.5 + (double)((l * 2654435761u) % 1000) / 1000.0;

		snprintf(names[l], sizeof(names[l]),
		    "blocks.%u.attn.qkv.weight", l);
		li->name = names[l];
		li->ndim = 2;
		li->shape[0] = 768;
		li->shape[1] = 64 + l % 7;
		li->numel = (uint64_t)li->shape[0] * li->shape[1];
		wl[l] = (bellows_window_layer){
			.name = li->name,
			.numel = li->numel,
			.ndim = li->ndim,
			.shape = li->shape,
			.grad_norm = g,
			.grad_norm_rank0 = g,
			.grad_norm_mean = g,
			.sum_sq = g * g * WORLD,
			.abs_sum = g * 100,
			.max_abs = g / 10,
			.count = li->numel * WORLD,
			.nonzero = li->numel * WORLD,
			.momentum_abs_mean = g / 50,
			.level = 1,
			.comm_raw_ms = NAN,
			.comm_comp_ms = NAN,
			.codec_ms = NAN,
		};
	}
	for (uint32_t r = 0; r < WORLD; r++)
		comm[r] = (bellows_comm_sample){ .rank = r,
			.bytes = 1u << 20,
			.ms = 0.4,
			.count = 12 };
	*w = (bellows_window){
		.job = "bench",
		.world = WORLD,
		.ranks_reported = WORLD,
		.lr = 0.1,
		.lr_next = 0.1,
		.lr_scale = 1,
		.step_ms_median = 120,
		.compute_ms_median = 90,
		.comm_ms_median = 30,
		.n_layers = n,
		.layers = wl,
		.n_comm = WORLD,
		.comm = comm,
	};
	return 0;
}

/* Times ROUNDS windows of `set`; writes the median and p99 (us). */
static int
bench_run(ctl_policy_set *set, bellows_window *w, com_decision *state,
    double *ret_p50, double *ret_p99)
{
	double *us = malloc(sizeof(double) * ROUNDS);
	char policies[256], reason[BELLOWS_REASON_MAX * 2];
	uint32_t failed;

	if (us == NULL)
		return BELLOWS_ENOMEM;
	for (uint32_t i = 0; i < WARMUP + ROUNDS; i++) {
		uint64_t t0;

		w->window = i;
		t0 = com_clock_ns();
		if (ctl_policy_set_run(set, w, state, policies,
			sizeof(policies), reason, sizeof(reason),
			&failed) != 0 ||
		    failed != 0) {
			free(us);
			return BELLOWS_EIO;
		}
		if (i >= WARMUP)
			us[i - WARMUP] = (double)(com_clock_ns() - t0) / 1e3;
	}
	qsort(us, ROUNDS, sizeof(double), bench_cmp);
	*ret_p50 = us[ROUNDS / 2];
	*ret_p99 = us[ROUNDS * 99 / 100];
	free(us);
	return 0;
}

/* Runs the plug-in in this process and in its worker on n layers. */
static int
bench_layers(const ctl_config *cfg, uint32_t n)
{
	com_layer_info *info = calloc(n, sizeof(*info));
	char(*names)[48] = calloc(n, sizeof(*names));
	bellows_window_layer *wl = calloc(n, sizeof(*wl));
	bellows_comm_sample comm[WORLD];
	double p50[2], p99[2];
	bellows_window w;
	int r = BELLOWS_ENOMEM;

	if (info == NULL || names == NULL || wl == NULL)
		goto out;
	bench_job(n, info, names, wl, comm, &w);
	for (int mode = 0; mode < 2; mode++) {
		char reason[BELLOWS_REASON_MAX];
		ctl_policy_set *set = NULL;
		com_decision state;

		ctl_plugin_set_in_process(mode == 0);
		if ((r = com_decision_init(&state, "bench", n)) != 0)
			goto out;
		r = ctl_policy_set_new(&cfg->jobs[0], "bench", WORLD, info, n,
		    &state, reason, sizeof(reason), &set);
		if (r == 0)
			r = bench_run(set, &w, &state, &p50[mode], &p99[mode]);
		ctl_policy_set_destroy(&set);
		com_decision_fini(&state);
		if (r != 0)
			goto out;
	}
	printf("%6u layers  in-process p50 %8.1f us p99 %8.1f us   worker "
	       "p50 %8.1f us p99 %8.1f us   boundary %8.1f us\n",
	    n, p50[0], p99[0], p50[1], p99[1], p50[1] - p50[0]);
	printf("plugin: layers=%u in_process_us=%.1f worker_us=%.1f "
	       "boundary_us=%.1f\n",
	    n, p50[0], p50[1], p50[1] - p50[0]);
out:
	free(info);
	free(names);
	free(wl);
	return r;
}

int
main(int argc, char **argv)
{
	const char *so = argc > 1 ? argv[1] : NULL;
	char path[] = "/tmp/bellows-bench-plugin-XXXXXX.yaml";
	char err[CTL_CONFIG_ERR_MAX];
	ctl_config *cfg = NULL;
	FILE *f;
	int fd, r, rc = 1;

	if (so == NULL) {
		fprintf(stderr, "usage: plugin PATH/libthreshold.so\n");
		return 2;
	}
	ctl_log_set_level(CTL_LOG_WARN);
	fd = mkstemps(path, 5);
	if (fd < 0 || (f = fdopen(fd, "w")) == NULL) {
		perror("bench plugin");
		return 1;
	}
	fprintf(f,
	    "jobs:\n"
	    "  - policies:\n"
	    "      - type: threshold\n"
	    "        plugin: %s\n"
	    "        params: {threshold: 1.0, high: 4, low: 1}\n",
	    so);
	fclose(f);
	r = ctl_config_load(path, &cfg, err, sizeof(err));
	unlink(path);
	if (r != 0) {
		fprintf(stderr, "bench plugin: %s\n", err);
		return 1;
	}
	if (bench_layers(cfg, 100) != 0 || bench_layers(cfg, 2000) != 0) {
		fprintf(stderr, "bench plugin: a window failed\n");
		goto out;
	}
	rc = 0;
out:
	ctl_config_destroy(&cfg);
	return rc;
}
