/* jobs_resume - reading a run back for a resume, off the event loop.
 *
 * A resume reads the run back from the history and replays its windows
 * into fresh policies: seconds for a long run. That work runs on a
 * thread of its own, one per resume, on a job built outside the table
 * (jobs_recover.c's callbacks, with the configuration in force when it
 * started). Meanwhile the job is "resuming": the Hello that asked is
 * answered BELLOWS_EBUSY (the agent retries every second), so is every
 * other Hello of the job, and nothing of the table waits. When the
 * thread is done the read-back waits for the launch's next Hello, which
 * takes it (ctl_jobs_resume goes on exactly as it did with a read-back
 * made on the spot) and is welcomed; one nobody takes within
 * rank_timeout_ms is dropped.
 *
 * The thread runs at a nice value JOBS_RESUME_NICE above the daemon's:
 * on a loaded machine the loop gets the CPU first.
 *
 * A client (the authenticated name; without security every local client
 * is one) has at most JOBS_RESUMES_PER_CLIENT read-backs in flight or
 * waiting, the daemon at most JOBS_RESUMES_MAX; a job is resumed at most
 * once per rank_timeout_ms (jobs_run.c). A reload, and the end of the
 * table, stop every read-back (the thread checks between windows) and
 * drop it: the launch's next Hello starts it again.
 *
 * Policies in plug-in workers are called from the thread too, taking
 * turns with the loop per call (worker.h); their faults met there are
 * logged, not kept as events.
 *
 * Threading: everything here but resume_thread runs on the loop's
 * thread. The thread reads only its own record until it sets `done`;
 * after that only the loop touches the record.
 */
#include "jobs_int.h"

#include "common/clock.h"
#include "common/errbuf.h"
#include "policyhost/log.h"
#include "store.h"
#include "policyhost/worker.h"

#include <bellows/error.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define JOBS_RESUME_NICE                                                       \
	10 /* read-back threads' nice value, over the                          \
	    * daemon's */

struct job_resume {
	job_resume *next;    /* list of the table's read-backs */
	char *job;           /* job name */
	char *run_key;       /* the launch resuming it */
	char *client;        /* who asked, "" without security */
	int64_t run;         /* run read (0: the job's newest) */
	uint64_t below;      /* read up to this window */
	uint64_t started_ms; /* monotonic, when the Hello came */
	uint64_t done_ms;    /* monotonic, when the loop saw it done,
			      * 0 before */
	ctl_store *store;    /* read from (borrowed) */
	pthread_t thread;    /* reading it */
	atomic_bool cancel;  /* set by the loop: stop */
	atomic_bool done;    /* set by the thread as it ends */
	int rc;              /* ctl_store_load_run's result */
	jobs_recovery rec;   /* the callbacks' state: the job read */
};

/* Frees rs and what it holds (the thread ended and was joined). */
static void
resume_free(job_resume *rs)
{
	ctl_jobs_job_destroy(&rs->rec.loaded);
	free(rs->job);
	free(rs->run_key);
	free(rs->client);
	free(rs);
}

/* Stops rs's thread, waits for it and frees rs. */
static void
resume_stop(job_resume *rs)
{
	atomic_store(&rs->cancel, true);
	pthread_join(rs->thread, NULL);
	resume_free(rs);
}

/* Unlinks rs from the table's list. */
static void
resume_unlink(ctl_jobs *jobs, job_resume *rs)
{
	for (job_resume **p = &jobs->resumes; *p != NULL; p = &(*p)->next) {
		if (*p == rs) {
			*p = rs->next;
			jobs->n_resumes--;
			return;
		}
	}
}

/* Lowers the calling thread's scheduling priority by
 * JOBS_RESUME_NICE (Linux: a thread's nice value is its own), so that on
 * a loaded machine the loop, not the read-back, gets the CPU first. */
static void
resume_lower_priority(void)
{
	id_t tid = (id_t)syscall(SYS_gettid);
	int now;

	errno = 0;
	now = getpriority(PRIO_PROCESS, tid);
	if (now == -1 && errno != 0)
		return;
	(void)setpriority(PRIO_PROCESS, tid,
	    now + JOBS_RESUME_NICE > 19 ? 19 : now + JOBS_RESUME_NICE);
}

static void *
resume_thread(void *arg)
{
	static const ctl_store_recover_ops ops = {
		.run = ctl_jobs_recover_run,
		.window = ctl_jobs_recover_window,
		.end = ctl_jobs_recover_end,
	};
	job_resume *rs = arg;

	/* The fault callback keeps events, which are the loop's. */
	ctl_worker_mute_faults(true);
	resume_lower_priority();
	rs->rc = ctl_store_load_run(rs->store, rs->run, rs->job, rs->below,
	    JOBS_LOG, &ops, &rs->rec);
	atomic_store(&rs->done, true);
	return NULL;
}

/* The read-back of job `name`, NULL when there is none. */
static job_resume *
resume_find(const ctl_jobs *jobs, const char *name)
{
	for (job_resume *rs = jobs->resumes; rs != NULL; rs = rs->next) {
		if (strcmp(rs->job, name) == 0)
			return rs;
	}
	return NULL;
}

/* True when Hello h is of the launch, and at the window, that rs reads
 * back for. */
static bool
resume_is_for(const job_resume *rs, const com_hello *h)
{
	return h->resume && h->last_window == rs->below &&
	    strcmp(ctl_jobs_run_id(h), rs->run_key) == 0;
}

static const char *
resume_client_shown(const char *client)
{
	return client[0] != '\0' ? client : "(local, no security)";
}

const char *
ctl_jobs_resuming(const ctl_jobs *jobs, const char *name)
{
	const job_resume *rs;

	if (jobs->resumes == NULL || name == NULL)
		return NULL;
	rs = resume_find(jobs, name);
	return rs != NULL ? rs->run_key : NULL;
}

int
ctl_jobs_resume_held(ctl_jobs *jobs, const com_hello *h, char *why,
    size_t why_len)
{
	job_resume *rs = resume_find(jobs, h->job);

	if (rs == NULL || resume_is_for(rs, h))
		return 0;
	com_errf(why, why_len,
	    "job '%s' is being resumed by launch '%s' at window %" PRIu64
	    " (its run is read back); retry once it has joined",
	    h->job, rs->run_key, rs->below);
	return BELLOWS_EBUSY;
}

/* Why client `client` may not start another read-back now: 0, or
 * BELLOWS_EBUSY with the reason in why. */
static int
resume_limits(ctl_jobs *jobs, const char *client, char *why, size_t why_len)
{
	const job_resume *same = NULL;
	uint32_t mine = 0;

	for (job_resume *rs = jobs->resumes; rs != NULL; rs = rs->next) {
		if (strcmp(rs->client, client) == 0) {
			mine++;
			same = rs;
		}
	}
	if (mine >= JOBS_RESUMES_PER_CLIENT) {
		com_errf(why, why_len,
		    "client %s already has %u resume(s) being read back "
		    "(job '%s'), the most one client may have; retry once "
		    "it has joined",
		    resume_client_shown(client), mine, same->job);
		return BELLOWS_EBUSY;
	}
	if (jobs->n_resumes >= JOBS_RESUMES_MAX) {
		com_errf(why, why_len,
		    "%u resumes are being read back, the most this daemon "
		    "runs at once; retry later",
		    jobs->n_resumes);
		return BELLOWS_EBUSY;
	}
	return 0;
}

int
ctl_jobs_resume_start(ctl_jobs *jobs, const job *old, const com_hello *h,
    const char *client, uint64_t now_ms, char *why, size_t why_len)
{
	job_resume *rs = resume_find(jobs, h->job);
	int r;

	if (rs != NULL) {
		com_errf(why, why_len,
		    "job '%s': run being read back for launch '%s' (%" PRIu64
		    " ms so far), off the loop; retry",
		    h->job, rs->run_key, now_ms - rs->started_ms);
		return BELLOWS_EBUSY;
	}
	if ((r = resume_limits(jobs, client != NULL ? client : "", why,
		 why_len)) != 0)
		return r;
	rs = calloc(1, sizeof(*rs));
	if (rs == NULL || (rs->job = com_strdup(h->job)) == NULL ||
	    (rs->run_key = com_strdup(ctl_jobs_run_id(h))) == NULL ||
	    (rs->client = com_strdup(client != NULL ? client : "")) == NULL)
		goto oom;
	rs->run = old != NULL ? old->run_id : 0;
	rs->below = h->last_window;
	rs->started_ms = now_ms;
	rs->store = jobs->store;
	rs->rec = (jobs_recovery){
		.cfg = jobs->cfg,
		.now_ms = now_ms,
		.resuming = true,
		.cancel = &rs->cancel,
	};
	atomic_init(&rs->cancel, false);
	atomic_init(&rs->done, false);
	if (pthread_create(&rs->thread, NULL, resume_thread, rs) != 0) {
		resume_free(rs);
		com_errf(why, why_len,
		    "job '%s': no thread to read its run back; retry", h->job);
		return BELLOWS_EBUSY;
	}
	rs->next = jobs->resumes;
	jobs->resumes = rs;
	jobs->n_resumes++;
	ctl_log(CTL_LOG_INFO, "jobs",
	    "job '%s': launch '%s' resumes at window %" PRIu64
	    "; its run is read back off the loop",
	    h->job, rs->run_key, rs->below);
	ctl_events_add(jobs->events, CTL_EVENT_RUN_RESUMING, h->job,
	    "launch '%s' resumes at window %" PRIu64 " (client %s): its run "
	    "is read back",
	    rs->run_key, rs->below, resume_client_shown(rs->client));
	com_errf(why, why_len,
	    "job '%s': its run is read back for the resume, off the loop; "
	    "retry",
	    h->job);
	return BELLOWS_EBUSY;
oom:
	if (rs != NULL)
		resume_free(rs);
	return BELLOWS_ENOMEM;
}

bool
ctl_jobs_resume_take(ctl_jobs *jobs, const com_hello *h, job **ret_loaded,
    uint64_t *ret_replayed)
{
	job_resume *rs = resume_find(jobs, h->job);

	if (rs == NULL || !resume_is_for(rs, h) || !atomic_load(&rs->done))
		return false;
	pthread_join(rs->thread, NULL);
	resume_unlink(jobs, rs);
	jobs->counters.policy_errors += rs->rec.policy_errors;
	*ret_loaded = rs->rc == 0 ? rs->rec.loaded : NULL;
	if (rs->rc == 0)
		rs->rec.loaded = NULL;
	*ret_replayed = rs->rec.replayed;
	resume_free(rs);
	return true;
}

void
ctl_jobs_resume_tick(ctl_jobs *jobs, uint64_t now_ms)
{
	job_resume *rs = jobs->resumes, *next;

	for (; rs != NULL; rs = next) {
		next = rs->next;
		if (!atomic_load(&rs->done))
			continue;
		if (rs->done_ms == 0)
			rs->done_ms = now_ms != 0 ? now_ms : 1;
		if (now_ms - rs->done_ms < jobs->cfg->rank_timeout_ms)
			continue;
		ctl_log(CTL_LOG_WARN, "jobs",
		    "job '%s': launch '%s' did not come back for its run read "
		    "back (window %" PRIu64 ") within rank_timeout_ms; "
		    "dropped",
		    rs->job, rs->run_key, rs->below);
		resume_unlink(jobs, rs);
		pthread_join(rs->thread, NULL);
		resume_free(rs);
	}
}

void
ctl_jobs_cancel_resumes(ctl_jobs *jobs)
{
	if (jobs == NULL)
		return;
	while (jobs->resumes != NULL) {
		job_resume *rs = jobs->resumes;

		resume_unlink(jobs, rs);
		resume_stop(rs);
	}
}
