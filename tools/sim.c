/* sim - `bellows sim`, see sim.h.
 *
 * This file is the command and its supervisor: it parses the options
 * (sim_opts), builds the model (sim_model) and the shared mapping
 * (sim_ctx), makes sure bellowsd answers, forks one process per rank
 * (sim_rank), kills and re-forks the --kill victim, watches the group
 * for progress and, once every rank has exited, checks from the records
 * that all ranks applied the same decision at every step and had every
 * decision they were owed.
 */
#include "sim.h"
#include "sim_comm.h"
#include "sim_ctx.h"
#include "sim_model.h"
#include "sim_opts.h"
#include "sim_rank.h"
#include "sim_record.h"

#include "client/client.h"
#include "common/clock.h"
#include "common/msg.h"
#include "common/args.h"
#include "client/metrics.h"

#include <bellows/error.h>

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SIM_SUPERVISE_NS 1000000 /* parent's poll interval */
#define SIM_PING_MS      5000    /* wait for bellowsd before starting */
#define SIM_SUMMARY_ROWS 16      /* decisions listed at each end */

void
tool_sim_usage(FILE *f)
{
	tool_sim_opts_usage(f);
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
		rc = tool_sim_rank_main(cx, rank, start_step);

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

/* Counts the steps at which two ranks that ran it held different codec
 * tables or applied different decisions, and prints the first. */
static uint64_t
sim_disagreements(const sim_ctx *cx)
{
	const sim_opts *o = cx->o;
	uint64_t disagree = 0, n_steps = cx->total_steps;

	for (uint64_t s = 0; s < n_steps; s++) {
		uint64_t ref = SIM_NOT_RUN, tab = 0;
		uint32_t ref_rank = 0;

		/* The codec table in force, rank by rank, where they ran. */
		for (uint32_t r = 0; r < o->ranks; r++) {
			uint64_t v = cx->seq[(size_t)r * n_steps + s];
			uint64_t t = cx->tables[(size_t)r * n_steps + s];

			if (v == SIM_NOT_RUN)
				continue;
			if (ref == SIM_NOT_RUN) {
				ref = v;
				ref_rank = r;
				tab = t;
				continue;
			}
			if (t != tab) {
				if (disagree++ == 0)
					printf("sim: disagreement at step "
					       "%" PRIu64 ": ranks %u and %u "
					       "hold different codec "
					       "tables\n",
					    s, ref_rank, r);
				break;
			}
		}
		ref = SIM_NOT_RUN;
		ref_rank = 0;

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
	return disagree;
}

/* The distinct decisions (seq above 0) any rank applied, ascending, in a
 * new array *ret (the caller's to free) of *ret_n. Returns 0, or -1 out
 * of memory with *ret and *ret_n untouched. */
static int
sim_applied(const sim_ctx *cx, uint64_t **ret, uint64_t *ret_n)
{
	uint64_t n_steps = cx->total_steps, n = 0;
	uint64_t *seen = NULL;
	size_t n_seen = 0, cap = 0;

	/* Each rank applies a decision for a run of steps: collect one
	 * entry per run, then sort out the duplicates. */
	for (uint32_t r = 0; r < cx->o->ranks; r++) {
		uint64_t prev = SIM_NOT_RUN;

		for (uint64_t s = 0; s < n_steps; s++) {
			uint64_t v = cx->seq[(size_t)r * n_steps + s];

			if (v == prev || v == SIM_NOT_RUN || v == 0)
				continue;
			prev = v;
			if (n_seen == cap) {
				size_t nc = cap ? 2 * cap : 64;
				uint64_t *g = realloc(seen, nc * sizeof(*g));

				if (g == NULL) {
					free(seen);
					return -1;
				}
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
	*ret = seen;
	*ret_n = n;
	return 0;
}

/* The first and last step any rank applied each of the n decisions
 * seen[] (ascending), in a new array *ret (the caller's to free).
 * Returns 0, or -1 out of memory with *ret untouched. */
static int
sim_spans(const sim_ctx *cx, const uint64_t *seen, uint64_t n,
    sim_seq_span **ret)
{
	uint64_t n_steps = cx->total_steps;
	sim_seq_span *spans = calloc(n ? n : 1, sizeof(*spans));

	if (spans == NULL)
		return -1;
	for (uint64_t i = 0; i < n; i++)
		spans[i] = (sim_seq_span){ seen[i], UINT64_MAX, 0 };
	for (uint32_t r = 0; r < cx->o->ranks; r++) {
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
	*ret = spans;
	return 0;
}

/* Prints the n decisions applied with their steps and windows, the
 * middle elided past 2 x SIM_SUMMARY_ROWS. */
static void
sim_spans_print(const sim_opts *o, const sim_seq_span *spans, uint64_t n)
{
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
}

/* Checks that all ranks that ran a step applied the same decision at it,
 * and prints the decisions applied. Returns true when they agreed; the
 * number of distinct decisions goes to *ret_n. */
static bool
sim_verify(const sim_ctx *cx, uint64_t *ret_n)
{
	uint64_t disagree = sim_disagreements(cx), n = 0;
	sim_seq_span *spans = NULL;
	uint64_t *seen = NULL;

	if (sim_applied(cx, &seen, &n) != 0 ||
	    sim_spans(cx, seen, n, &spans) != 0) {
		printf("sim: out of memory while checking agreement\n");
		free(seen);
		*ret_n = 0;
		return false;
	}
	sim_spans_print(cx->o, spans, n);
	if (disagree > 0)
		printf("sim: ranks disagreed at %" PRIu64 " of %" PRIu64
		       " steps\n",
		    disagree, cx->total_steps);
	free(spans);
	free(seen);
	*ret_n = n;
	return disagree == 0;
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

	if ((rc = tool_sim_opts_parse(argc, argv, &o)) >= 0)
		return rc;
	cx.total_steps = (uint64_t)o.windows * o.steps;
	rc = 1;
	if (tool_sim_model_build(&cx) != 0) {
		fprintf(stderr, "bellows sim: out of memory\n");
		goto out;
	}
	if (tool_sim_record_create(o.record_metrics,
		"window,layer,grad_norm,lr,numel,shape\n") != 0 ||
	    tool_sim_record_create(o.record_levels, "window,layer,level\n") !=
		0)
		goto out;
	if (sim_ping(&o) != 0)
		goto out;
	if (tool_sim_ctx_map(&cx) != 0) {
		fprintf(stderr,
		    "bellows sim: cannot map %zu bytes of shared records\n",
		    cx.map_len);
		goto out;
	}
	printf("sim: job '%s': %u ranks, %u layers (%" PRIu64
	       " floats), %u windows of %u steps, bellowsd at %s\n",
	    o.sh.job, o.ranks, o.layers, cx.floats_raw, o.windows, o.steps,
	    o.control);
	if (o.comm_model) {
		uint64_t threshold;
		uint32_t rows;

		if (tool_sim_model_threshold(&cx, &threshold, &rows) != 0) {
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
	tool_sim_ctx_unmap(&cx);
	tool_sim_model_free(&cx);
	return rc;
}
