/* aggregate - what aggregation inside the job costs and saves.
 *
 * For jobs of R ranks and L layers, one window of statistics:
 *   - inside the job, per rank: packing its report into the three
 *     all-reduce vectors (agent_aggregate_pack), their length, and at the
 *     reporting rank making the covering report (agent_aggregate_unpack);
 *   - the simulated reduction: folding the R ranks' vectors in one
 *     process (agent_aggregate_fold), the arithmetic a collective spreads
 *     over the ranks, and a modelled tree all-reduce of those bytes;
 *   - at bellowsd: folding the window's reports into its aggregation and
 *     making the policies' view (ctl_window_add, ctl_window_view), with
 *     every rank reporting (R reports), one report per node of N ranks
 *     (R / N) and one for the job (1).
 * Times are medians over --reps runs, on one core.
 *
 * usage: aggregate [--ranks 2,1000,10000] [--layers 100] [--node-ranks 8]
 *                  [--reps 5] [--latency-us 10] [--gbps 100]
 */
#include "benchutil.h"

#include "agent/aggregate.h"
#include "common/stat_table.h"
#include "controller/ctl_window.h"

#include <bellows/agent.h>
#include <bellows/error.h>

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIZES 8
#define MAX_REPS  32

typedef struct opts {
	uint32_t ranks[MAX_SIZES]; /* job sizes */
	int n_ranks;               /* entries used */
	uint32_t layers;           /* layers per report */
	uint32_t node_ranks;       /* ranks per node */
	int reps;                  /* runs per measurement */
	double latency_us;         /* modelled latency per tree level */
	double gbps;               /* modelled link bandwidth */
} opts;

/* A reusable report whose values depend on the rank. */
typedef struct fake {
	com_layer_stats *st; /* layers */
	com_report r;        /* the report */
} fake;

static void
fake_fill(fake *f, uint32_t layers, uint32_t rank)
{
	double k = 1.0 + (rank % 97) * 0.01;

	for (uint32_t l = 0; l < layers; l++)
		f->st[l] = (com_layer_stats){
			.layer = l,
			.count = 1000,
			.nonzero = 990 + rank % 10,
			.sum_sq = 0.5 * k + l,
			.abs_sum = 20 * k,
			.max_abs = 0.1 * k,
			.acc_norm = k + l,
			.momentum_abs_mean = 0.01 * k,
			.observed_steps = 10,
		};
	f->r = (com_report){
		.job = "bench",
		.rank = rank,
		.window = 1,
		.first_step = 10,
		.last_step = 19,
		.n_layers = layers,
		.layers = f->st,
		.timings = { .steps = 10,
		    .step_ms = 10 * (100 + rank % 13),
		    .compute_ms = 10 * (70 + rank % 7),
		    .comm_ms = 10 * (30 + rank % 5),
		    .step_ms_max = 120,
		    .floats_sent = 1000000,
		    .floats_raw = 4000000 },
		.lr = 0.1,
		.batch_size = 32,
		.seq_in_force = 1,
	};
}

static int
parse(int argc, char **argv, opts *o)
{
	*o = (opts){ .layers = 100,
		.node_ranks = 8,
		.reps = 5,
		.latency_us = 10,
		.gbps = 100 };
	o->ranks[0] = 2;
	o->ranks[1] = 1000;
	o->ranks[2] = 10000;
	o->n_ranks = 3;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (v == NULL)
			return -1;
		if (strcmp(a, "--ranks") == 0) {
			char *end;

			o->n_ranks = 0;
			for (const char *p = v; *p && o->n_ranks < MAX_SIZES;) {
				unsigned long n = strtoul(p, &end, 10);

				if (end == p || n < 1 || n > 65536)
					return -1;
				o->ranks[o->n_ranks++] = (uint32_t)n;
				p = *end == ',' ? end + 1 : end;
				if (*end != ',' && *end != '\0')
					return -1;
			}
		} else if (strcmp(a, "--layers") == 0) {
			o->layers = (uint32_t)strtoul(v, NULL, 10);
		} else if (strcmp(a, "--node-ranks") == 0) {
			o->node_ranks = (uint32_t)strtoul(v, NULL, 10);
		} else if (strcmp(a, "--reps") == 0) {
			o->reps = atoi(v);
		} else if (strcmp(a, "--latency-us") == 0) {
			o->latency_us = strtod(v, NULL);
		} else if (strcmp(a, "--gbps") == 0) {
			o->gbps = strtod(v, NULL);
		} else {
			return -1;
		}
		i++;
	}
	if (o->layers < 1 || o->layers > 65536 || o->node_ranks < 1 ||
	    o->reps < 1 || o->reps > MAX_REPS)
		return -1;
	return 0;
}

/* bellowsd's side: folds the window's reports, R / per of them each
 * covering `per` ranks (per 1: every rank), and makes the view. Returns
 * the seconds it took. */
static double
daemon_window(const opts *o, uint32_t world, uint32_t per,
    const com_layer_info *info, const com_decision *in_force, fake *f,
    agent_aggregate *lead)
{
	ctl_window *w;
	bellows_window view;
	uint64_t t0, ns = 0;

	if (ctl_window_new(1, world, o->layers, 0, &w) != 0) {
		fprintf(stderr, "aggregate: out of memory\n");
		exit(1);
	}
	for (uint32_t first = 0; first < world; first += per) {
		com_report c;
		uint32_t n = world - first < per ? world - first : per;

		fake_fill(f, o->layers, first);
		if (per > 1) {
			/* One covering report: the group's reduction is not
			 * bellowsd's work, it is made once outside the
			 * clock from the first rank's values. */
			agent_aggregate_pack(lead, &f->r);
			agent_aggregate_unpack(lead, &f->r, &c);
			c.ranks = n;
		} else {
			c = f->r;
		}
		t0 = bench_now_ns();
		if (ctl_window_add(w, &c) != 0) {
			fprintf(stderr, "aggregate: a report was refused\n");
			exit(1);
		}
		ns += bench_now_ns() - t0;
	}
	t0 = bench_now_ns();
	ctl_window_view(w, "bench", world, info, in_force, &view);
	ns += bench_now_ns() - t0;
	if (view.ranks_reported != world) {
		fprintf(stderr, "aggregate: %u of %u ranks in the view\n",
		    view.ranks_reported, world);
		exit(1);
	}
	ctl_window_destroy(&w);
	return (double)ns / 1e9;
}

int
main(int argc, char **argv)
{
	opts o;
	com_layer_info *info;
	com_decision in_force;
	fake f;

	if (parse(argc, argv, &o) != 0) {
		fprintf(stderr,
		    "usage: aggregate [--ranks R1,R2,...] [--layers L] "
		    "[--node-ranks N] [--reps K] [--latency-us US] "
		    "[--gbps G]\n");
		return 2;
	}
	info = calloc(o.layers, sizeof(*info));
	f.st = calloc(o.layers, sizeof(*f.st));
	if (info == NULL || f.st == NULL ||
	    com_decision_init(&in_force, "bench", o.layers) != 0)
		return 1;
	for (uint32_t l = 0; l < o.layers; l++)
		info[l] = (com_layer_info){ .name = "layer",
			.numel = 1000,
			.ndim = 1,
			.shape = { 1000 } };

	printf("aggregation inside the job: %u layers, nodes of %u ranks, "
	       "median of %d runs\n",
	    o.layers, o.node_ranks, o.reps);
	printf("%7s | %9s %8s %8s | %9s %9s %9s | %10s %10s %10s | %7s\n",
	    "ranks", "doubles", "pack_us", "unpack_us", "fold_ms", "fold/rk_us",
	    "model_ms", "d_rank_ms", "d_node_ms", "d_job_ms", "reports");
	for (int s = 0; s < o.n_ranks; s++) {
		uint32_t world = o.ranks[s];
		double pack[MAX_REPS], unpack[MAX_REPS], fold[MAX_REPS];
		double dr[MAX_REPS], dn[MAX_REPS], dj[MAX_REPS];
		agent_aggregate lead, peer, node;
		size_t doubles;
		uint32_t per_node = o.node_ranks < world ? o.node_ranks : world;

		if (agent_aggregate_init(&lead, o.layers, NULL, world, 0) !=
			0 ||
		    agent_aggregate_init(&peer, o.layers, NULL, world,
			world - 1) != 0 ||
		    agent_aggregate_init(&node, o.layers, NULL, per_node, 0) !=
			0) {
			fprintf(stderr, "aggregate: out of memory\n");
			return 1;
		}
		doubles = lead.len[0] + lead.len[1] + lead.len[2];
		for (int rep = 0; rep < o.reps; rep++) {
			com_report c;
			uint64_t t0, fold_ns = 0;

			fake_fill(&f, o.layers, 0);
			t0 = bench_now_ns();
			agent_aggregate_pack(&lead, &f.r);
			pack[rep] = (double)(bench_now_ns() - t0) / 1e3;
			/* The simulated reduction: every other rank packs its
			 * report (not timed: each rank does that itself, in
			 * parallel) and its vectors are folded in. */
			for (uint32_t r = 1; r < world; r++) {
				fake_fill(&f, o.layers, r);
				peer.slot = r;
				agent_aggregate_pack(&peer, &f.r);
				t0 = bench_now_ns();
				agent_aggregate_fold(&lead, peer.buf);
				fold_ns += bench_now_ns() - t0;
			}
			fold[rep] = (double)fold_ns / 1e6;
			fake_fill(&f, o.layers, 0);
			t0 = bench_now_ns();
			agent_aggregate_unpack(&lead, &f.r, &c);
			unpack[rep] = (double)(bench_now_ns() - t0) / 1e3;
			if (c.ranks != world) {
				fprintf(stderr, "aggregate: cover of %u\n",
				    c.ranks);
				return 1;
			}
			dr[rep] = daemon_window(&o, world, 1, info, &in_force,
				      &f, &node) *
			    1e3;
			dn[rep] = daemon_window(&o, world, per_node, info,
				      &in_force, &f, &node) *
			    1e3;
			dj[rep] = daemon_window(&o, world, world, info,
				      &in_force, &f, &lead) *
			    1e3;
		}
		{
			/* A tree all-reduce: up and down log2(R) levels, the
			 * vectors' bytes twice over the link. */
			double levels = world > 1 ? ceil(log2(world)) : 0;
			double bytes = (double)doubles * sizeof(double);
			double model = 2 * levels * o.latency_us / 1e3 +
			    2 * bytes * 8 / (o.gbps * 1e9) * 1e3;
			double fm = bench_median(fold, o.reps);

			printf("%7u | %9zu %8.1f %8.1f | %9.3f %9.3f %9.3f | "
			       "%10.3f %10.3f %10.3f | %u/%u/1\n",
			    world, doubles, bench_median(pack, o.reps),
			    bench_median(unpack, o.reps), fm, fm * 1e3 / world,
			    model, bench_median(dr, o.reps),
			    bench_median(dn, o.reps), bench_median(dj, o.reps),
			    world, (world + per_node - 1) / per_node);
		}
		agent_aggregate_fini(&lead);
		agent_aggregate_fini(&peer);
		agent_aggregate_fini(&node);
	}
	printf("doubles: the three all-reduce vectors of one window; "
	       "pack/unpack: one rank's cost per window; fold: the whole "
	       "simulated reduction in one process (fold/rk: per rank); "
	       "model: a tree all-reduce of those bytes at %.0f us per level "
	       "and %.0f Gbit/s; d_*: bellowsd folding the window and making "
	       "the view with every rank, one per node, one for the job "
	       "reporting; reports: per window reaching bellowsd\n",
	    o.latency_us, o.gbps);
	com_decision_fini(&in_force);
	free(info);
	free(f.st);
	return 0;
}
