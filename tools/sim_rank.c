/* sim_rank - a rank process of `bellows sim`, see sim_rank.h.
 */
#include "sim_rank.h"

#include "common/clock.h"
#include "sim_comm.h"
#include "sim_model.h"
#include "sim_record.h"
#include "sim_reduce.h"

#include <bellows/agent.h>
#include <bellows/error.h>

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SIM_SPIN_NS      30000 /* lockstep poll interval */
#define SIM_LEVELS_SHOWN 12    /* levels printed per decision line */

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
				tool_sim_unit(
				    tool_sim_hash(cx->o->seed, l, i, 0)) -
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
	h = tool_sim_hash(cx->o->seed, rk->rank + 1, step, l);
	scale = rk->base[l] * course *
	    (1.0 + 0.05 * sqrt(3.0) * (2.0 * tool_sim_unit(h) - 1.0));
	fs = (float)scale;
	for (uint64_t i = 0; i < n; i++)
		g[i] = p[i] * fs;
	/* A few perturbed elements so that successive steps are not exactly
	 * collinear (the window sum's norm then differs from the sum of
	 * norms, as it does in training). */
	for (int k = 0; k < 4; k++) {
		h = tool_sim_mix(h);
		g[h % n] += (float)(scale * 0.5 *
		    (2.0 * tool_sim_unit(tool_sim_mix(h)) - 1.0) /
		    sqrt((double)n));
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

/* FNV-1a of a codec table, never 0 for one (0: none). */
static uint64_t
sim_table_hash(const uint8_t *t, size_t n)
{
	uint64_t h = 1469598103934665603ull;

	if (t == NULL || n == 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		h = (h ^ t[i]) * 1099511628211ull;
	return h != 0 ? h : 1;
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
	if (d->codec_table_len > 0)
		printf(" table=%zuB", d->codec_table_len);
	if (d->codec_table_len >= 12 && memcmp(d->codec_table, "BGHT", 4) == 0)
		printf(" table_version=%u",
		    (unsigned)d->codec_table[8] |
			(unsigned)d->codec_table[9] << 8 |
			(unsigned)d->codec_table[10] << 16 |
			(unsigned)d->codec_table[11] << 24);
	printf(" policy=%s reason=%s\n",
	    d->policy != NULL && d->policy[0] != '\0' ? d->policy : "-",
	    d->reason != NULL && d->reason[0] != '\0' ? d->reason : "-");
	fflush(stdout);
}

/* With --eval, rank 0 reports the window's evaluation before the step
 * that ends it, so that it lands in that window. */
static int
sim_rank_eval(sim_rank *rk, uint64_t s)
{
	const sim_opts *o = rk->cx->o;
	double acc, loss;
	int r;

	if (o->eval_final <= 0 || rk->rank != 0 || (s + 1) % o->steps != 0)
		return 0;
	tool_sim_eval(o, s / o->steps, &acc, &loss);
	if ((r = bellows_agent_eval(rk->agent, acc, loss)) != 0)
		fprintf(stderr, "rank %u: eval at step %" PRIu64 ": %s\n",
		    rk->rank, s, bellows_strerror(r));
	return r;
}

/* Begins step s and takes the decision in force into *d: records its seq
 * and codec table for the agreement check, the smallest lag seen between
 * a window's end and its decision's apply step, the levels, and counts
 * (and on rank 0 prints) a newly applied decision; *last_seq is the seq
 * of the step before, then this one's. Returns 0, or the agent's error
 * (BELLOWS_ESTATE when step_begin gave another step) said on stderr. */
static int
sim_rank_begin(sim_rank *rk, uint64_t s, uint64_t *last_seq,
    bellows_decision *d)
{
	const sim_ctx *cx = rk->cx;
	const sim_opts *o = cx->o;
	uint64_t got = 0;
	int r;

	if ((r = bellows_agent_step_begin(rk->agent, &got)) != 0 || got != s) {
		fprintf(stderr,
		    "rank %u: step_begin at step %" PRIu64
		    " returned %s (step %" PRIu64 ")\n",
		    rk->rank, s, bellows_strerror(r), got);
		return r != 0 ? r : BELLOWS_ESTATE;
	}
	if ((r = bellows_agent_decision(rk->agent, d)) != 0) {
		fprintf(stderr, "rank %u: decision: %s\n", rk->rank,
		    bellows_strerror(r));
		return r;
	}
	cx->seq[(size_t)rk->rank * cx->total_steps + s] = d->seq;
	cx->tables[(size_t)rk->rank * cx->total_steps +
	    s] = sim_table_hash(d->codec_table, d->codec_table_len);
	if (d->window > 0 && d->apply_step >= d->window * o->steps &&
	    d->apply_step - d->window * o->steps < rk->lag)
		rk->lag = d->apply_step - d->window * o->steps;
	if ((r = tool_sim_record_levels(rk, d)) != 0)
		return r;
	if (d->seq != *last_seq && d->seq != 0)
		rk->applied++;
	if (rk->rank == 0 && !o->quiet && d->seq != *last_seq && d->seq != 0)
		sim_print_decision(s, d);
	*last_seq = d->seq;
	return 0;
}

/* Observes every layer's gradient of step s and sends it as decision d
 * says, adding the sends' times and sizes to *sum. Returns 0, or the
 * first error, said on stderr. */
static int
sim_rank_layers(sim_rank *rk, uint64_t s, const bellows_decision *d,
    sim_step_sums *sum)
{
	const sim_ctx *cx = rk->cx;
	double course = tool_sim_norm_course(cx, s);
	int r;

	for (uint32_t l = 0; l < cx->o->layers; l++) {
		const bellows_layer *t = &cx->table[l];

		sim_rank_gradient(rk, l, s, course);
		r = bellows_agent_observe(rk->agent, l, rk->grad, t->numel);
		if (r == 0)
			r = tool_sim_comm_send(rk, l, s, d, sum);
		if (r != 0) {
			fprintf(stderr,
			    "rank %u: observe or send layer %u: %s\n", rk->rank,
			    l, bellows_strerror(r));
			return r;
		}
	}
	return 0;
}

/* What step s tells bellowsd in *info: the sends' sums, the compute time
 * since t0 (ns), the modelled or measured communication, codec, backward
 * and step times, memory, the LR schedule and the batch of decision d. */
static void
sim_rank_info(const sim_rank *rk, uint64_t s, const bellows_decision *d,
    const sim_step_sums *sum, uint64_t t0, bellows_step_info *info)
{
	const sim_ctx *cx = rk->cx;
	const sim_opts *o = cx->o;

	info->floats_sent = sum->floats_sent;
	info->floats_raw = cx->floats_raw;
	info->bytes_sent = 4 * info->floats_sent;
	info->compute_ms = (double)(com_clock_ns() - t0) / 1e6;
	/* Without a model: a 10 Gbit/s link with 50 us of latency. */
	info->comm_ms = o->comm_model
	    ? sum->comm_ms
	    : 0.05 + (double)info->bytes_sent / 1.25e6;
	info->codec_ms = sum->codec_ms;
	if (o->backward_ms > 0)
		info->backward_ms = o->backward_ms *
		    tool_sim_noise(o, rk->rank, s, 0x500000u);
	if (o->step_model != SIM_STEP_WALL)
		info->step_ms = tool_sim_step_ms(o, sum, info->backward_ms);
	if (o->mem_total > 0) {
		info->mem_device_total = o->mem_total;
		info->mem_device_used = o->mem_used + sum->act_stored;
	}
	info->lr = tool_sim_lr(o, s / o->steps);
	/* The LR decays at window boundaries: the last step of a window
	 * tells bellowsd the LR the next one starts with. */
	info->lr_next = s + 1 < cx->total_steps
	    ? tool_sim_lr(o, (s + 1) / o->steps)
	    : info->lr;
	info->batch_size = d->batch_size > 0 ? d->batch_size : 128;
	info->epoch = s / o->steps;
}

/* Runs rank rk's steps from start_step to the end, in lockstep with the
 * others; the --kill victim stops at the start of its kill window and
 * waits for the parent to end it. Returns 0, BELLOWS_ECLOSED for the
 * victim, or the first error. */
static int
sim_rank_steps(sim_rank *rk, uint64_t start_step)
{
	const sim_ctx *cx = rk->cx;
	const sim_opts *o = cx->o;
	sim_slot *slot = &cx->slots[rk->rank];
	uint64_t last_seq = 0;
	bool victim = o->kill && o->kill_rank == rk->rank &&
	    start_step == (uint64_t)o->start_window * o->steps;
	int r;

	for (uint64_t s = start_step; s < cx->total_steps; s++) {
		bellows_step_info info = { 0 };
		sim_step_sums sum = { .bucket_comp = true };
		bellows_decision d;
		uint64_t t0;

		if (victim && s == (uint64_t)o->kill_window * o->steps) {
			/* Die here, at the start of the window, as the parent
			 * is told to make it. */
			atomic_store(&slot->at_kill, 1);
			while (!atomic_load(&cx->sh->stop))
				nanosleep(&(struct timespec){ 0, 1000000 },
				    NULL);
			return BELLOWS_ECLOSED;
		}
		if ((r = sim_rank_lockstep(cx, s)) != 0 ||
		    (r = sim_rank_begin(rk, s, &last_seq, &d)) != 0)
			return r;
		t0 = com_clock_ns();
		if ((r = sim_rank_layers(rk, s, &d, &sum)) != 0)
			return r;
		if (o->step_ms > 0) {
			struct timespec ts = { o->step_ms / 1000,
				(long)(o->step_ms % 1000) * 1000000 };

			while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
				;
		}
		sim_rank_info(rk, s, &d, &sum, t0, &info);
		if ((r = sim_rank_eval(rk, s)) != 0)
			return r;
		if ((r = bellows_agent_step_end(rk->agent, &info)) != 0) {
			fprintf(stderr,
			    "rank %u: step_end at step %" PRIu64 ": %s\n",
			    rk->rank, s, bellows_strerror(r));
			return r;
		}
		if ((s + 1) % o->steps == 0 &&
		    (r = tool_sim_record_metrics(rk, s / o->steps, info.lr)) !=
			0)
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

int
tool_sim_rank_main(const sim_ctx *cx, uint32_t rank, uint64_t start_step)
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
	cfg.job = o->sh.job;
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
	cfg.aggregate = o->aggregate;
	cfg.aggregate_ranks = o->node_ranks < o->ranks ? o->node_ranks
						       : o->ranks;
	if (o->aggregate != BELLOWS_AGGREGATE_RANK) {
		cfg.allreduce = tool_sim_allreduce;
		cfg.allreduce_arg = &rk;
	}
	if ((r = sim_rank_patterns(&rk)) != 0) {
		fprintf(stderr, "rank %u: %s\n", rank, bellows_strerror(r));
		goto out;
	}
	if (rank == 0 && o->record_metrics != NULL &&
	    (rk.metrics_out = fopen(o->record_metrics, "a")) == NULL) {
		r = tool_sim_record_failed(&rk, o->record_metrics);
		goto out;
	}
	if (rank == 0 && o->record_levels != NULL &&
	    (rk.levels_out = fopen(o->record_levels, "a")) == NULL) {
		r = tool_sim_record_failed(&rk, o->record_levels);
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
