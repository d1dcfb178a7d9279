/* stats_pass - one rank's statistics pass under a real bellowsd, for
 * instruction counts with and without the window accumulator.
 *
 * Opens a real agent (windows of 10 steps, as bench/hook's) for N
 * Linear(W, W) layers (a W x W weight and a W bias each, in one flat
 * float32 buffer as a DDP bucket holds them), joins the bellowsd at
 * CONTROL/PUBLISH as job JOB, and runs untimed steps until the decision
 * in force has reached a window start (at least 40 steps, and until the
 * accumulator count stops changing for 10). Then it runs MEASURED steps
 * (a multiple of 10 counts whole windows), each step_begin, one
 * bellows_agent_observe_many over the buffer (what bellows.torch calls
 * per bucket), step_end, with callgrind's collection on only from before
 * observe_many to after step_end (the window ends' reductions included,
 * step_begin's wait for decisions not). Run it under
 *
 *   valgrind --tool=callgrind --collect-atstart=no stats_pass ...
 *
 * and the "Collected" count is the statistics pass of MEASURED steps
 * (bench/stats_pass.sh runs the four cases). Which job name the daemon's
 * configuration matches decides whether a policy reads acc_norm
 * (accordion: accumulators on) or none does (fixed: off). Prints the
 * layers, the accumulators and the steps.
 *
 * usage: stats_pass CONTROL PUBLISH JOB LAYERS WIDTH MEASURED
 */
#include <bellows/agent.h>
#include <bellows/error.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <valgrind/callgrind.h>

/* One step; observe_many and step_end (which closes every other step's
 * window: the accumulator's reduction) between callgrind's toggles when
 * `counted`. */
static int
pass_step(bellows_agent *a, uint32_t n, const uint32_t *idx, const float *buf,
    const uint64_t *off, int counted)
{
	bellows_step_info info = { .lr = 0.1, .batch_size = 64 };
	int r;

	if ((r = bellows_agent_step_begin(a, NULL)) != 0)
		return r;
	if (counted)
		CALLGRIND_TOGGLE_COLLECT;
	r = bellows_agent_observe_many(a, n, idx, buf, off, BELLOWS_DTYPE_F32);
	if (r == 0)
		r = bellows_agent_step_end(a, &info);
	if (counted)
		CALLGRIND_TOGGLE_COLLECT;
	return r;
}

/* Untimed steps until the accumulator count has settled. */
static int
pass_settle(bellows_agent *a, uint32_t n, const uint32_t *idx, const float *buf,
    const uint64_t *off)
{
	const struct timespec pace = { 0, 20 * 1000000L };
	uint32_t last = bellows_agent_accumulators(a), same = 0;
	int r = 0;

	for (int s = 0; s < 400 && r == 0 && (s < 40 || same < 10); s++) {
		uint32_t now;

		r = pass_step(a, n, idx, buf, off, 0);
		now = bellows_agent_accumulators(a);
		same = now == last ? same + 1 : 0;
		last = now;
		nanosleep(&pace, NULL);
	}
	return r;
}

int
main(int argc, char **argv)
{
	bellows_agent_config cfg;
	bellows_agent *agent = NULL;
	bellows_layer *layers;
	uint32_t *idx, *shapes, n_layers, width;
	uint64_t *off, total, measured;
	float *buf;
	int r;

	if (argc != 7) {
		fprintf(stderr,
		    "usage: stats_pass CONTROL PUBLISH JOB LAYERS "
		    "WIDTH MEASURED\n");
		return 2;
	}
	n_layers = 2 * (uint32_t)strtoul(argv[4], NULL, 10);
	width = (uint32_t)strtoul(argv[5], NULL, 10);
	measured = strtoull(argv[6], NULL, 10);
	layers = calloc(n_layers, sizeof(*layers));
	idx = calloc(n_layers, sizeof(*idx));
	off = calloc(n_layers, sizeof(*off));
	shapes = calloc(2, sizeof(*shapes));
	if (n_layers == 0 || width == 0 || layers == NULL || idx == NULL ||
	    off == NULL || shapes == NULL)
		return 2;
	shapes[0] = shapes[1] = width;
	total = 0;
	for (uint32_t l = 0; l < n_layers; l++) {
		char name[32];

		snprintf(name, sizeof(name), "l%u.%s", l / 2,
		    l % 2 ? "bias" : "weight");
		layers[l].name = strdup(name);
		layers[l].numel = l % 2 ? width : (uint64_t)width * width;
		layers[l].ndim = l % 2 ? 1 : 2;
		layers[l].shape = shapes;
		idx[l] = l;
		off[l] = total;
		total += layers[l].numel;
	}
	if ((buf = malloc(total * sizeof(float))) == NULL)
		return 2;
	for (uint64_t i = 0; i < total; i++)
		buf[i] = (float)((int64_t)(i % 2001) - 1000) * 1e-4f;
	bellows_agent_config_init(&cfg);
	cfg.control = argv[1];
	cfg.publish = argv[2];
	cfg.job = argv[3];
	cfg.rank = 0;
	cfg.world = 1;
	cfg.layers = layers;
	cfg.n_layers = n_layers;
	cfg.window_steps = 10;
	if ((r = bellows_agent_open(&cfg, &agent)) != 0 ||
	    (r = pass_settle(agent, n_layers, idx, buf, off)) != 0) {
		fprintf(stderr, "stats_pass: %s\n", bellows_strerror(r));
		return 1;
	}
	for (uint64_t s = 0; s < measured && r == 0; s++)
		r = pass_step(agent, n_layers, idx, buf, off, 1);
	if (r != 0) {
		fprintf(stderr, "stats_pass: %s\n", bellows_strerror(r));
		return 1;
	}
	printf("stats_pass: job %s, %u layers (%" PRIu64
	       " floats), %u with an accumulator, %" PRIu64 " steps counted\n",
	    cfg.job, n_layers, total, bellows_agent_accumulators(agent),
	    measured);
	bellows_agent_close(&agent);
	for (uint32_t l = 0; l < n_layers; l++)
		free((char *)layers[l].name);
	free(layers);
	free(idx);
	free(off);
	free(shapes);
	free(buf);
	return 0;
}
