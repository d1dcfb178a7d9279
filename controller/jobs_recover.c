/* jobs_recover - jobs rebuilt from the runs the store holds, see jobs.h.
 *
 * At start (ctl_jobs_recover) every live run of the history becomes a
 * job again, its ranks that were there expected back, and its policies
 * are shown its recorded windows again; a resume reads one run back the
 * same way, up to the window it resumes at, on a thread of its own
 * (jobs_resume.c): the callbacks then touch nothing of the table.
 */
#include "jobs_int.h"

#include "common/clock.h"
#include "policyhost/log.h"
#include "store.h"

#include <bellows/error.h>

#include <inttypes.h>
#include <stdlib.h>

/* Builds a job from a run the store holds, outside the table: its
 * layer table, decision log, position and launch, the ranks that were
 * there expected back, and fresh policies (the caller replays the
 * windows into them). Returns 0 or BELLOWS_ENOMEM. */
static int
job_from_run(const ctl_config *cfg, const ctl_store_run *run, uint64_t now_ms,
    job **ret)
{
	const ctl_job_conf *jc = ctl_config_match(cfg, run->job);
	char reason[BELLOWS_REASON_MAX];
	com_decision blank = { 0 };
	job *j;
	int r;

	if (ctl_jobs_job_new(run->job, run->world, run->layers, run->n_layers,
		&j) != 0)
		return BELLOWS_ENOMEM;
	/* Every recorded decision was committed, so it may have been
	 * published: none is published again. */
	j->published_seq = run->decisions[run->n_decisions - 1].seq;
	for (uint32_t i = 0; i < run->n_decisions; i++) {
		com_decision d;

		if (com_decision_copy(&d, &run->decisions[i]) != 0)
			goto oom;
		ctl_jobs_log_push(NULL, j, &d, 0, 0);
	}
	free(j->run_key);
	if ((j->run_key = com_strdup(run->run_key)) == NULL)
		goto oom;
	/* Seqs go on after every decision the run had, also those not
	 * read (superseded by a resume, or older than the log). */
	if (run->last_seq > j->last_seq)
		j->last_seq = run->last_seq;
	j->next_window = run->next_window;
	j->max_step = run->max_step;
	j->run_id = run->id;
	j->recovering = true;
	for (uint32_t k = 0; k < run->world; k++) {
		if (!run->alive[k])
			continue;
		j->ranks[k].alive = true;
		j->ranks[k].last_seen_ms = now_ms;
		j->ranks[k].first_window = run->next_window;
		j->alive++;
	}
	if (j->alive == 0)
		j->idle_since_ms = now_ms;
	if (jc != NULL) {
		if (com_decision_init(&blank, j->name, j->n_layers) != 0)
			goto oom;
		r = ctl_policy_set_new(jc, j->name, j->world, j->layers,
		    j->n_layers, &blank, reason, sizeof(reason), &j->policies);
		com_decision_fini(&blank);
		if (r != 0)
			ctl_log(CTL_LOG_WARN, "jobs",
			    "job '%s' is read back without policies: %s",
			    j->name, reason);
	}
	ctl_policy_set_names(j->policies, j->policy_names,
	    sizeof(j->policy_names));
	*ret = j;
	return 0;
oom:
	ctl_jobs_job_destroy(&j);
	return BELLOWS_ENOMEM;
}

int
ctl_jobs_recover_run(void *arg, const ctl_store_run *run, void **ret_ctx)
{
	jobs_recovery *rec = arg;
	ctl_jobs *jobs = rec->jobs;
	const ctl_config *cfg = rec->cfg;
	const ctl_job_conf *jc;
	char why[256];
	size_t bytes;
	job *j;

	if (rec->resuming) {
		/* Off the loop (jobs_resume.c): the table is not touched;
		 * the job it continues may still be in it. */
		if (job_from_run(rec->cfg, run, rec->now_ms, &j) != 0)
			return BELLOWS_ENOMEM;
		rec->loaded = j;
		*ret_ctx = j;
		return 0;
	}
	jc = ctl_config_match(cfg, run->job);
	if (ctl_jobs_find(jobs, run->job) != NULL) {
		/* Runs come newest first: an older live run of the same job
		 * was left behind by a daemon that could not read the file. */
		ctl_log(CTL_LOG_WARN, "jobs",
		    "job '%s': run %" PRId64
		    " is older than the one recovered; it is ended",
		    run->job, run->id);
		ctl_store_run_end(jobs->store, run->id, com_clock_wall_ms());
		return BELLOWS_EBUSY;
	}
	if (jobs->n_jobs >= cfg->max_jobs || run->world > cfg->max_world ||
	    run->n_layers > cfg->max_layers) {
		ctl_log(CTL_LOG_WARN, "jobs",
		    "job '%s' (run %" PRId64
		    ") is not recovered: it exceeds this daemon's limits",
		    run->job, run->id);
		return BELLOWS_ELIMIT;
	}
	bytes = ctl_jobs_job_bytes(jc, run->job, run->world, run->layers,
	    run->n_layers);
	if (ctl_jobs_admit(jobs, run->job, bytes, why, sizeof(why)) != 0) {
		ctl_log(CTL_LOG_WARN, "jobs",
		    "run %" PRId64 " not recovered: %s", run->id, why);
		return BELLOWS_ELIMIT;
	}
	if (ctl_jobs_reserve(jobs) != 0 ||
	    job_from_run(cfg, run, rec->now_ms, &j) != 0)
		return BELLOWS_ENOMEM;
	j->bytes = bytes;
	jobs->jobs[jobs->n_jobs++] = j;
	jobs->bytes += j->bytes;
	/* Windows below the one it recovers at that the run lacks, from
	 * the mark the agents were told on: they may keep their reports. */
	for (uint32_t i = 0; i < run->n_missing; i++)
		ctl_jobs_late_begin(jobs, j, run->missing[i].from,
		    run->missing[i].to);
	*ret_ctx = j;
	return 0;
}

bool
ctl_jobs_recover_window(void *arg, void *ctx, bellows_window *w,
    const com_decision *in_force)
{
	jobs_recovery *rec = arg;
	job *j = ctx;
	char policies[256], reason[1024];
	com_decision state;
	uint32_t failed = 0;

	if (rec->cancel != NULL && atomic_load(rec->cancel))
		return false;
	if (j->policies == NULL || com_decision_copy(&state, in_force) != 0)
		return true;
	ctl_policy_set_run(j->policies, w, &state, policies, sizeof(policies),
	    reason, sizeof(reason), &failed);
	rec->policy_errors += failed;
	com_decision_fini(&state);
	return true;
}

void
ctl_jobs_recover_end(void *arg, void *ctx, uint64_t n_windows)
{
	jobs_recovery *rec = arg;
	job *j = ctx;

	rec->recovered++;
	if (rec->resuming) {
		rec->replayed = n_windows;
		return;
	}
	rec->jobs->counters.policy_errors += rec->policy_errors;
	rec->policy_errors = 0;
	ctl_store_run_recovered(rec->jobs->store, j->run_id);
	ctl_log(CTL_LOG_INFO, "jobs",
	    "job '%s' recovered from the database: run %" PRId64
	    ", decision %" PRIu64 ", next window %" PRIu64 ", %" PRIu64
	    " windows replayed into policies '%s', %u of %u ranks expected",
	    j->name, j->run_id, j->last_seq, j->next_window, n_windows,
	    j->policy_names, j->alive, j->world);
	ctl_events_add(rec->jobs->events, CTL_EVENT_JOB_RECOVERED, j->name,
	    "recovered from the database at decision %" PRIu64
	    ", next window %" PRIu64 " (%" PRIu64 " windows replayed)",
	    j->last_seq, j->next_window, n_windows);
}

uint32_t
ctl_jobs_recover(ctl_jobs *jobs, uint64_t now_ms)
{
	static const ctl_store_recover_ops ops = {
		.run = ctl_jobs_recover_run,
		.window = ctl_jobs_recover_window,
		.end = ctl_jobs_recover_end,
	};
	jobs_recovery rec = { .jobs = jobs,
		.cfg = jobs->cfg,
		.now_ms = now_ms };

	if (now_ms > jobs->now_ms)
		jobs->now_ms = now_ms;
	ctl_store_recover(jobs->store, JOBS_LOG, &ops, &rec);
	return rec.recovered;
}
