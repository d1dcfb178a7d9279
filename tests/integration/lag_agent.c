/* lag_agent - one rank of a job with a real agent, paced, for the
 * integration tests: the rank the test stops (SIGSTOP) so that its
 * subscriber falls behind, and the rank that goes on meanwhile.
 *
 * Runs STEPS steps of STEP_MS each with windows of 2 steps over LAYERS
 * 1x1 layers, and writes the decision seq it applied at each step and
 * the number of layers with a window accumulator in that step to OUT
 * ("step seq accumulators" lines). At the end it prints
 *   lag_agent: rank R decisions D snapshots N misses M
 * (the agent's counters) and exits 0, or 1 on an error of the agent. The
 * agent's log, from info up, goes to stderr.
 *
 * usage: lag_agent CONTROL PUBLISH JOB RANK WORLD LAYERS STEPS STEP_MS OUT
 */
#include <bellows/agent.h>

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void
lag_log(void *arg, int level, const char *message)
{
	(void)arg;
	(void)level;
	fprintf(stderr, "lag_agent: agent: %s\n", message);
}

int
main(int argc, char **argv)
{
	static const uint32_t one_by_one[2] = { 1, 1 };
	bellows_agent_config cfg;
	bellows_agent_stats st;
	bellows_agent *agent = NULL;
	bellows_layer *layers;
	char(*names)[16];
	uint32_t n_layers;
	uint64_t steps;
	struct timespec pace;
	FILE *out;
	int r = 0;

	if (argc != 10) {
		fprintf(stderr,
		    "usage: lag_agent CONTROL PUBLISH JOB RANK "
		    "WORLD LAYERS STEPS STEP_MS OUT\n");
		return 2;
	}
	n_layers = (uint32_t)strtoul(argv[6], NULL, 10);
	steps = strtoull(argv[7], NULL, 10);
	pace.tv_sec = 0;
	pace.tv_nsec = (long)strtoul(argv[8], NULL, 10) * 1000000L;
	layers = calloc(n_layers, sizeof(*layers));
	names = calloc(n_layers, sizeof(*names));
	if (layers == NULL || names == NULL ||
	    (out = fopen(argv[9], "w")) == NULL)
		return 1;
	/* Line by line: the test follows the file while the rank runs. */
	setvbuf(out, NULL, _IOLBF, 0);
	for (uint32_t l = 0; l < n_layers; l++) {
		snprintf(names[l], sizeof(names[l]), "l%u", l);
		layers[l].name = names[l];
		layers[l].numel = 1;
		layers[l].ndim = 2; /* a 1x1 matrix: policies select it */
		layers[l].shape = one_by_one;
	}
	bellows_agent_config_init(&cfg);
	cfg.control = argv[1];
	cfg.publish = argv[2];
	cfg.job = argv[3];
	cfg.rank = (uint32_t)strtoul(argv[4], NULL, 10);
	cfg.world = (uint32_t)strtoul(argv[5], NULL, 10);
	cfg.layers = layers;
	cfg.n_layers = n_layers;
	cfg.window_steps = 2;
	cfg.decision_timeout_ms = 3000;
	cfg.log = lag_log;
	cfg.log_level = BELLOWS_LOG_INFO;
	if ((r = bellows_agent_open(&cfg, &agent)) != 0) {
		fprintf(stderr, "lag_agent: %s\n", bellows_strerror(r));
		return 1;
	}
	for (uint64_t s = 0; s < steps && r == 0; s++) {
		bellows_step_info info = { .lr = 0.1, .batch_size = 8 };
		bellows_decision d;
		float g = 1.0f / (float)(s + 1);

		if ((r = bellows_agent_step_begin(agent, NULL)) != 0 ||
		    (r = bellows_agent_decision(agent, &d)) != 0)
			break;
		fprintf(out, "%" PRIu64 " %" PRIu64 " %" PRIu32 "\n", s, d.seq,
		    bellows_agent_accumulators(agent));
		for (uint32_t l = 0; l < n_layers && r == 0; l++)
			r = bellows_agent_observe(agent, l, &g, 1);
		if (r == 0)
			r = bellows_agent_step_end(agent, &info);
		nanosleep(&pace, NULL);
	}
	if (r != 0)
		fprintf(stderr, "lag_agent: %s\n", bellows_strerror(r));
	if (bellows_agent_stats_get(agent, &st) == 0)
		printf("lag_agent: rank %u decisions %" PRIu64
		       " snapshots %" PRIu64 " misses %" PRIu64 "\n",
		    cfg.rank, st.decisions, st.snapshots, st.decision_misses);
	bellows_agent_close(&agent);
	fclose(out);
	free(layers);
	free(names);
	return r == 0 ? 0 : 1;
}
