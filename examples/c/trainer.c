/* trainer - the smallest complete C trainer under bellows.
 *
 * Fits a linear model y = W x (a 32x16 weight matrix plus a bias) to
 * synthetic data with SGD and a step-decay learning rate, as one rank of a
 * job. It shows the whole agent API in the order a real trainer calls it:
 * open with the layer table, begin each step (which makes the decision for
 * that step current), read the levels, hand every gradient to the agent,
 * end the step with its timings, close. A real data-parallel trainer would
 * pass each layer's level to its gradient compressor where this one prints
 * it.
 *
 * usage: trainer CONTROL PUBLISH JOB RANK WORLD STEPS
 */
#include <bellows/agent.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IN  16
#define OUT 32

static void
trainer_log(void *arg, int level, const char *message)
{
	(void)arg;
	(void)level;
	fprintf(stderr, "trainer: agent: %s\n", message);
}

/* xorshift: deterministic data without the C library's global state. */
static float
trainer_uniform(unsigned *seed)
{
	*seed ^= *seed << 13;
	*seed ^= *seed >> 17;
	*seed ^= *seed << 5;
	return (float)(*seed % 100000u) / 100000.0f - 0.5f;
}

/* One SGD step on a batch drawn from the true model; fills the grads. */
static double
trainer_grad(const float *w, const float *b, float *gw, float *gb,
    unsigned *seed)
{
	float x[IN], y[OUT];
	double loss = 0;

	memset(gw, 0, sizeof(float) * IN * OUT);
	memset(gb, 0, sizeof(float) * OUT);
	for (int n = 0; n < 8; n++) {
		for (int i = 0; i < IN; i++)
			x[i] = trainer_uniform(seed);
		for (int o = 0; o < OUT; o++) {
			float target = 0.1f * (float)(o % 5), pred = b[o];

			for (int i = 0; i < IN; i++) {
				target += (float)((o + i) % 3 - 1) * x[i];
				pred += w[o * IN + i] * x[i];
			}
			y[o] = pred - target;
			loss += 0.5 * y[o] * y[o] / 8;
		}
		for (int o = 0; o < OUT; o++) {
			gb[o] += y[o] / 8;
			for (int i = 0; i < IN; i++)
				gw[o * IN + i] += y[o] * x[i] / 8;
		}
	}
	return loss;
}

int
main(int argc, char **argv)
{
	static float w[IN * OUT], b[OUT], gw[IN * OUT], gb[OUT];
	const uint32_t w_shape[2] = { OUT, IN };
	const bellows_layer layers[2] = {
		{ .name = "linear.weight",
		    .numel = IN * OUT,
		    .ndim = 2,
		    .shape = w_shape },
		{ .name = "linear.bias", .numel = OUT },
	};
	bellows_agent_config cfg;
	bellows_agent *agent;
	bellows_decision d;
	uint64_t seq = 0, steps;
	double level = 0;
	unsigned seed;
	int r;

	if (argc != 7) {
		fprintf(stderr,
		    "usage: trainer CONTROL PUBLISH JOB RANK WORLD STEPS\n");
		return 2;
	}
	bellows_agent_config_init(&cfg);
	cfg.control = argv[1];
	cfg.publish = argv[2];
	cfg.job = argv[3];
	cfg.rank = (uint32_t)strtoul(argv[4], NULL, 10);
	cfg.world = (uint32_t)strtoul(argv[5], NULL, 10);
	cfg.layers = layers;
	cfg.n_layers = 2;
	cfg.window_steps = 10;
	cfg.log = trainer_log;
	steps = strtoull(argv[6], NULL, 10);
	seed = 1234 + cfg.rank;
	if ((r = bellows_agent_open(&cfg, &agent)) != 0) {
		fprintf(stderr, "trainer: %s\n", bellows_strerror(r));
		return 1;
	}
	for (uint64_t s = 0; s < steps; s++) {
		/* Step decay: the LR drops tenfold at half and three quarters
		 * of the run; the last step before a drop announces it. */
		double lr = s < steps / 2 ? 1.0
		    : s < 3 * steps / 4   ? 0.1
					  : 0.01;
		double lr_next = s + 1 < steps / 2 ? 1.0
		    : s + 1 < 3 * steps / 4        ? 0.1
						   : 0.01;
		bellows_step_info info = { .lr = lr,
			.lr_next = lr_next,
			.batch_size = 8 };
		double loss;

		bellows_agent_step_begin(agent, NULL);
		bellows_agent_decision(agent, &d);
		/* Print a decision when it changes the weight's level. */
		if (d.seq != seq && (seq == 0 || d.level[0] != level)) {
			level = d.level[0];
			printf("step %llu: decision %llu: weight level %g, "
			       "bias level %g (%s)\n",
			    (unsigned long long)s, (unsigned long long)d.seq,
			    d.level[0], d.level[1], d.reason);
		}
		loss = trainer_grad(w, b, gw, gb, &seed);
		bellows_agent_observe(agent, 0, gw, IN * OUT);
		bellows_agent_observe(agent, 1, gb, OUT);
		/* Here a data-parallel trainer would all-reduce gw, compressed
		 * at d.level[0] (e.g. as a PowerSGD rank), and gb raw. */
		for (int k = 0; k < IN * OUT; k++)
			w[k] -= (float)(lr * d.lr_scale) * gw[k];
		for (int k = 0; k < OUT; k++)
			b[k] -= (float)(lr * d.lr_scale) * gb[k];
		info.floats_raw = IN * OUT + OUT;
		info.floats_sent = info.floats_raw;
		bellows_agent_step_end(agent, &info);
		seq = d.seq;
		if (s % 50 == 0 || s + 1 == steps)
			printf("step %llu: loss %.5f\n", (unsigned long long)s,
			    loss);
	}
	bellows_agent_close(&agent);
	return 0;
}
