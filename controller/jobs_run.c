/* jobs_run - which launch a Hello belongs to, see docs/protocol.md "Runs".
 *
 * A job holds one run (one launch) at a time. A Hello of another launch
 * is refused while a rank of the run is alive; once none is, it takes
 * the job over: the run ends and a new one starts, or, when the launch
 * resumes from a checkpoint, the recorded run is read back from the
 * history up to the window it resumes at (off the loop, jobs_resume.c)
 * and goes on from there.
 */
#include "jobs_int.h"

#include "common/clock.h"
#include "common/errbuf.h"
#include "policyhost/log.h"
#include "store.h"

#include <bellows/error.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Ranks alive that said Hello to this daemon (not merely expected back
 * after a restart). */
static uint32_t
job_joined_alive(const job *j)
{
	uint32_t n = 0;

	for (uint32_t r = 0; r < j->world; r++)
		n += j->ranks[r].alive && j->ranks[r].joined;
	return n;
}

job_launch
ctl_jobs_launch_of(const job *j, const com_hello *h)
{
	const char *id = ctl_jobs_run_id(h);
	/* A Hello of another launch may have another world. */
	const job_rank *rk = h->rank < j->world ? &j->ranks[h->rank] : NULL;

	bool named = id[0] != '\0' && j->run_key[0] != '\0';

	if (named && strcmp(id, j->run_key) != 0)
		return j->alive > 0 ? JOB_LAUNCH_BUSY : JOB_LAUNCH_NEW;
	/* The same launch after a clean end, or a rank of it the run has
	 * not seen yet: a straggler (ranks that never meet in a collective
	 * may finish apart), not a restart, which follows a failure of
	 * ranks that had joined. */
	if (named && !h->resume &&
	    (j->ended ||
		(rk != NULL && !rk->joined && !rk->left && rk->reports == 0)))
		return JOB_LAUNCH_SAME;
	if (h->in_force.seq == 0 && h->last_window < j->next_window &&
	    job_joined_alive(j) == 0)
		return JOB_LAUNCH_NEW;
	return JOB_LAUNCH_SAME;
}

int
ctl_jobs_refuse_launch(ctl_jobs *jobs, job *j, const com_hello *h,
    com_msg *reply, char *why, size_t why_len)
{
	com_errf(why, why_len,
	    "job '%s' is still running as launch '%s' (run %" PRId64
	    ", %u of %u ranks alive): launch '%s' is admitted once they have "
	    "left or been silent for rank_timeout_ms (%u ms)",
	    j->name, j->run_key, j->run_id, j->alive, j->world,
	    ctl_jobs_run_id(h), jobs->cfg->rank_timeout_ms);
	/* Its ranks retry every second: one line and event per launch. */
	if (strncmp(j->refused_key, ctl_jobs_run_id(h),
		sizeof(j->refused_key) - 1) != 0) {
		snprintf(j->refused_key, sizeof(j->refused_key), "%s",
		    ctl_jobs_run_id(h));
		ctl_log(CTL_LOG_WARN, "jobs", "%s", why);
		ctl_events_add(jobs->events, CTL_EVENT_RUN_REFUSED, j->name,
		    "launch '%s' refused: launch '%s' (run %" PRId64
		    ") still has %u of %u ranks alive",
		    ctl_jobs_run_id(h), j->run_key, j->run_id, j->alive,
		    j->world);
	}
	return ctl_jobs_error_reply(reply, BELLOWS_EBUSY, why);
}

/* Removes job j from the table and destroys it. */
static void
jobs_drop(ctl_jobs *jobs, job *j)
{
	for (uint32_t i = 0; i < jobs->n_jobs; i++) {
		if (jobs->jobs[i] == j) {
			ctl_jobs_remove(jobs, i);
			return;
		}
	}
}

int
ctl_jobs_take_over(ctl_jobs *jobs, job **jp, const com_hello *h,
    const char *client, uint64_t now_ms, char *why, size_t why_len)
{
	job *j = *jp;

	if (h->resume)
		return ctl_jobs_resume(jobs, jp, h, client, now_ms, why,
		    why_len);
	if (!j->ended)
		ctl_store_run_end(jobs->store, j->run_id, com_clock_wall_ms());
	ctl_log(CTL_LOG_INFO, "jobs",
	    "job '%s': run %" PRId64 " (launch '%s', window %" PRIu64
	    ") %s; launch '%s' starts a new run at step %" PRIu64,
	    j->name, j->run_id, j->run_key, j->next_window,
	    j->ended ? "ended" : "has no rank left", ctl_jobs_run_id(h),
	    h->step);
	jobs_drop(jobs, j);
	*jp = NULL;
	return 0;
}

/* Without a history to read back (no store, or it cannot be read):
 * forgets the decisions answering windows >= w, and restarts the
 * policies, whose state learned from those windows cannot be taken
 * back. */
static void
job_rewind_in_memory(ctl_jobs *jobs, job *j, uint64_t w)
{
	const ctl_job_conf *jc = ctl_config_match(jobs->cfg, j->name);
	char reason[BELLOWS_REASON_MAX];
	ctl_policy_set *fresh = NULL;
	com_decision state;
	int r;

	while (j->log_n > 1 && ctl_jobs_log_at(j, j->log_n - 1)->window > w) {
		com_decision_fini(ctl_jobs_log_at(j, j->log_n - 1));
		j->log_n--;
	}
	if (jc == NULL || ctl_jobs_log_last(j) == NULL ||
	    com_decision_copy(&state, ctl_jobs_log_last(j)) != 0)
		return;
	/* What the fresh policies would start from is not issued: the
	 * decisions in force at the resume are. */
	r = ctl_policy_set_new(jc, j->name, j->world, j->layers, j->n_layers,
	    &state, reason, sizeof(reason), &fresh);
	com_decision_fini(&state);
	if (r != 0) {
		ctl_log(CTL_LOG_WARN, "jobs",
		    "job '%s': its policies cannot restart for the resume "
		    "(%s); the old ones go on",
		    j->name, reason);
		return;
	}
	ctl_policy_set_destroy(&j->policies);
	j->policies = fresh;
	ctl_log(CTL_LOG_WARN, "jobs",
	    "job '%s' resumes at window %" PRIu64
	    " without a history to read back: its policies start afresh",
	    j->name, w);
}

/* Job j continues at the Hello's window and step as launch h->run_id:
 * no rank is there yet, the windows from there on are superseded, and
 * the decisions in force there are issued again under new seqs (the
 * log restarts with them, so apply steps never go back). */
static void
job_resumed(ctl_jobs *jobs, job *j, const com_hello *h, uint64_t now_ms,
    uint64_t replayed)
{
	uint64_t w = h->last_window, from = j->next_window;
	com_decision *again = NULL;
	uint32_t n = 0, start;
	char *key = com_strdup(ctl_jobs_run_id(h));
	int at;

	for (uint32_t i = 0; i < JOBS_OPEN; i++)
		ctl_window_destroy(&j->open[i]);
	/* Late windows of the launch that ran are not taken any more. */
	ctl_jobs_late_free(j);
	for (uint32_t r = 0; r < j->world; r++)
		free(j->ranks[r].client);
	memset(j->ranks, 0, j->world * sizeof(*j->ranks));
	j->alive = 0;
	j->idle_since_ms = now_ms;
	j->resumed_ms = now_ms != 0 ? now_ms : 1;
	j->next_window = w;
	j->max_step = h->step;
	j->recovering = false;
	j->ended = false;
	j->refused_key[0] = '\0';
	if (key != NULL) {
		free(j->run_key);
		j->run_key = key;
	}
	ctl_store_run_resumed(jobs->store, j->run_id, w, j->run_key);
	/* The decisions from the one in force at the resume step on. */
	at = ctl_jobs_log_in_force(j, h->step);
	start = at < 0 ? 0 : (uint32_t)at;
	if (j->log_n > start &&
	    (again = calloc(j->log_n - start, sizeof(*again))) != NULL) {
		for (uint32_t i = start; i < j->log_n; i++) {
			if (com_decision_copy(&again[n],
				ctl_jobs_log_at(j, i)) == 0)
				n++;
		}
	}
	for (uint32_t i = 0; i < j->log_n; i++)
		com_decision_fini(ctl_jobs_log_at(j, i));
	j->log_n = 0;
	j->log_head = 0;
	if (n == 0 && (again = calloc(1, sizeof(*again))) != NULL &&
	    com_decision_init(&again[0], j->name, j->n_layers) == 0)
		n = 1;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t apply = again[i].apply_step > h->step
		    ? again[i].apply_step
		    : h->step;

		free(again[i].reason);
		again[i].reason = com_strdup("resumed from a checkpoint");
		ctl_jobs_decide(jobs, j, &again[i], apply, again[i].window,
		    CTL_STORE_RESUMED, 0);
		com_decision_fini(&again[i]);
	}
	free(again);
	ctl_log(CTL_LOG_INFO, "jobs",
	    "job '%s': launch '%s' resumes run %" PRId64 " at window %" PRIu64
	    ", step %" PRIu64 " (%" PRIu64 " windows replayed into policies "
	    "'%s'; windows %" PRIu64 " on superseded), decision %" PRIu64,
	    j->name, j->run_key, j->run_id, w, h->step, replayed,
	    j->policy_names, w, j->last_seq);
	ctl_events_add(jobs->events, CTL_EVENT_RUN_RESUMED, j->name,
	    "launch '%s' resumed run %" PRId64 " at window %" PRIu64
	    ", step %" PRIu64 " (it was at window %" PRIu64 ")",
	    j->run_key, j->run_id, w, h->step, from);
}

/* Why a resume of run j with Hello h's table is refused. */
static void
jobs_resume_mismatch(const job *j, const com_hello *h, char *why,
    size_t why_len)
{
	com_errf(why, why_len,
	    "resume of job '%s' run %" PRId64
	    " with another world or layer table than the run's (world %u, "
	    "%u layers)",
	    h->job, j->run_id, j->world, j->n_layers);
}

/* Checks a resume of job `old` (NULL: not in the table) by Hello h may
 * go on: 0, or the error to answer with (why filled). */
static int
jobs_resume_check(ctl_jobs *jobs, const job *old, const com_hello *h,
    uint64_t now_ms, char *why, size_t why_len)
{
	if (old != NULL &&
	    (old->world != h->world || !ctl_jobs_same_table(old, h))) {
		jobs_resume_mismatch(old, h, why, why_len);
		return BELLOWS_EMISMATCH;
	}
	if (old != NULL && old->resumed_ms != 0 &&
	    now_ms - old->resumed_ms < jobs->cfg->rank_timeout_ms) {
		/* Reading a run back costs what recovering it does: one a
		 * job per rank_timeout_ms keeps Hellos from keeping a
		 * thread busy with it. */
		com_errf(why, why_len,
		    "job '%s' was resumed %" PRIu64
		    " ms ago; another resume is "
		    "taken %u ms after the last",
		    h->job, now_ms - old->resumed_ms,
		    jobs->cfg->rank_timeout_ms);
		return BELLOWS_EBUSY;
	}
	if (old == NULL && jobs->n_jobs >= jobs->cfg->max_jobs) {
		com_errf(why, why_len, "job table full (%u jobs)",
		    jobs->cfg->max_jobs);
		return BELLOWS_ELIMIT;
	}
	return 0;
}

/* The budget of the job a resume puts in the table: the run's table is
 * the Hello's (checked when it is read), so it is the one the Hello
 * implies; a job in the table holds it. Admits it when old is NULL:
 * returns 0 or BELLOWS_ELIMIT (why filled). */
static int
jobs_resume_bytes(ctl_jobs *jobs, const job *old, const com_hello *h,
    size_t *bytes, char *why, size_t why_len)
{
	*bytes = old != NULL
	    ? old->bytes
	    : ctl_jobs_job_bytes(ctl_config_match(jobs->cfg, h->job), h->job,
		  h->world, h->layers, h->n_layers);
	if (old == NULL)
		return ctl_jobs_admit(jobs, h->job, *bytes, why, why_len);
	return 0;
}

int
ctl_jobs_resume(ctl_jobs *jobs, job **jp, const com_hello *h,
    const char *client, uint64_t now_ms, char *why, size_t why_len)
{
	job *old = *jp, *j = NULL;
	uint64_t replayed = 0;
	size_t bytes;
	int r;

	if ((r = jobs_resume_check(jobs, old, h, now_ms, why, why_len)) != 0)
		return r;
	if (jobs->store != NULL &&
	    !ctl_jobs_resume_take(jobs, h, &j, &replayed)) {
		if (!ctl_store_settled(jobs->store)) {
			com_errf(why, why_len,
			    "job '%s': the history is still being written; "
			    "the resume is taken once it is",
			    h->job);
			return BELLOWS_EBUSY;
		}
		if ((r = jobs_resume_bytes(jobs, old, h, &bytes, why,
			 why_len)) != 0)
			return r;
		return ctl_jobs_resume_start(jobs, old, h, client, now_ms, why,
		    why_len);
	}
	if ((r = jobs_resume_bytes(jobs, old, h, &bytes, why, why_len)) != 0 ||
	    (r = ctl_jobs_reserve(jobs)) != 0) {
		ctl_jobs_job_destroy(&j);
		return r;
	}
	if (j == NULL) {
		/* Nothing read back (no history, no such run, or it cannot
		 * be read). */
		if (old == NULL)
			return 0;
		j = old;
		job_rewind_in_memory(jobs, j, h->last_window);
	} else if (j->world != h->world || !ctl_jobs_same_table(j, h)) {
		jobs_resume_mismatch(j, h, why, why_len);
		ctl_jobs_job_destroy(&j);
		return BELLOWS_EMISMATCH;
	} else {
		/* Seqs go on after every decision the run ever had. */
		if (old != NULL && old->last_seq > j->last_seq)
			j->last_seq = old->last_seq;
		if (old != NULL)
			jobs_drop(jobs, old);
		j->bytes = bytes;
		jobs->jobs[jobs->n_jobs++] = j;
		jobs->bytes += j->bytes;
	}
	job_resumed(jobs, j, h, now_ms, replayed);
	*jp = j;
	return 0;
}
