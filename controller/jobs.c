/* jobs - the job table's state machine, see jobs.h.
 *
 * Hellos, Reports, Heartbeats, Byes and the clock's ticks drive it here:
 * ranks join, windows open and close, policies decide. The other files
 * of the table each own one part of it (jobs_int.h): the decision log
 * (jobs_log.c), what readers are told (jobs_status.c), recovery from the
 * store (jobs_recover.c), launches and resumes (jobs_run.c). The
 * invariants below hold across all of them.
 *
 * Invariants of a job:
 * - the decision log holds the last JOBS_LOG decisions in seq order; seqs
 *   are consecutive and apply_steps never decrease, so "the decision in
 *   force at step s" is the last entry with apply_step <= s;
 * - windows close in index order; next_window is the lowest index not yet
 *   closed, and reports for lower indices are stale;
 * - a window is durably closed once the decision answering it is
 *   published (which waits for the store's commit of the window and the
 *   decision), a late window (below) once the store has committed its
 *   rows: ctl_jobs_windows_closed() is the lowest window not durably
 *   closed, never above next_window, and what agents are told they may
 *   stop keeping reports below (without a store nothing waits for a
 *   commit; while it is degraded decisions do not, late windows do);
 * - a (rank, window) report is taken once: a repeat of one taken (in an
 *   open window, or among the rank's last JOBS_TAKEN windows once closed)
 *   is ignored and counted, as agents resend what was not acknowledged;
 *   a report of a closed window the rank had not reported is stale,
 *   unless the window is late;
 * - late windows (jobs_late.c) are the windows a restarted daemon had not
 *   closed: those from the run's recorded mark (runs.windows_closed) up
 *   to the window it recovered at that the store does not hold (a kill
 *   while windows were late, or while rows waited for their commit),
 *   then those below the window the first Hello moved the job to. They
 *   are ascending spans in [late_next, late_end), all below
 *   next_window; a window between two spans is recorded, and a report
 *   of it is ignored (counted as a duplicate). Their reports, which the
 *   agents kept and send again, are aggregated apart from the open
 *   windows and recorded late, in index order; no policy sees them and
 *   no decision answers them. ctl_jobs_windows_closed() stays at or
 *   below late_next while any is open, and at or below the lowest late
 *   window recorded whose batch the store has not acknowledged as
 *   committed (late_wait_*, kept after the late range is done), so
 *   agents keep their reports until they are on disk;
 * - the store's mark (runs.windows_closed, ctl_jobs_closed_record) is
 *   never above what ctl_jobs_windows_closed() told the agents: it is
 *   handed over with each window's rows, so a restarted daemon that
 *   takes the windows from it on that it lacks takes every one whose
 *   reports an agent may still keep;
 * - a rank is held by one routing id and one incarnation at a time, and,
 *   with security, by the authenticated client that opened its session:
 *   while it is alive no other client takes it, whatever incarnation it
 *   claims (a client not allowed for a job gets nothing of it: no job is
 *   created, no rank taken, no decision, no STATUS line);
 * - a job holds one run (one launch, run_key) at a time: a Hello of
 *   another launch is refused while a rank of the run is alive, and
 *   then replaces the run (a new one, or the recorded one resumed);
 * - a resume rewinds the job to the window it resumes at: the log is
 *   emptied and refilled with the decisions in force there, so apply
 *   steps again never decrease from there on;
 * - while a job's run is read back for a resume (off the loop,
 *   jobs_resume.c) the job is resuming: it is not touched (no rank is
 *   joined, no window opens), every Hello of it but the resuming
 *   launch's at its window is refused with BELLOWS_EBUSY, and the job
 *   read replaces it only when that launch's next Hello takes it;
 * - for every open window i, expected[i] is the number of ranks it waits
 *   for (alive, and first_window <= its index) and have[i] how many of
 *   those it holds a report of; the window is complete when they are
 *   equal. A report adds to have[i] only; anything that changes whether a
 *   rank is expected (join, rejoin, loss, leave, resume) takes the rank
 *   out of the counts before and puts it back after (job_count_rank), so
 *   a report costs O(1), not a walk over the job's ranks, and opening a
 *   window counts its ranks once. A report covering several ranks (their
 *   statistics reduced inside the job, com_report.ranks) holds a report
 *   of each of them and adds each expected one to have[i].
 */
#include "jobs_int.h"

#include "common/clock.h"
#include "common/wire.h"
#include "common/errbuf.h"
#include "policyhost/log.h"
#include "policyhost/policy_host.h"
#include "store.h"
#include "ctl_window.h"
#include "policyhost/worker.h"

#include <bellows/error.h>

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void job_count_window(job *j, uint32_t i);

const char *
ctl_jobs_run_id(const com_hello *h)
{
	return h->run_id != NULL ? h->run_id : "";
}

int
ctl_jobs_error_reply(com_msg *reply, int code, const char *text)
{
	com_msg_init(reply, COM_MSG_ERROR);
	reply->u.error.code = code;
	reply->u.error.message = com_strdup(text);
	return code;
}

/* ---- jobs table -------------------------------------------------------- */

void
ctl_jobs_job_destroy(job **jp)
{
	job *j = *jp;

	if (j == NULL)
		return;
	for (uint32_t i = 0; i < JOBS_OPEN; i++)
		ctl_window_destroy(&j->open[i]);
	ctl_jobs_late_free(j);
	for (uint32_t i = 0; i < j->log_n; i++)
		com_decision_fini(ctl_jobs_log_at(j, i));
	for (uint32_t l = 0; l < j->n_layers; l++)
		free(j->layers[l].name);
	ctl_policy_set_destroy(&j->policies);
	free(j->layers);
	free(j->grad_norm);
	free(j->level_applied);
	for (uint32_t r = 0; j->ranks != NULL && r < j->world; r++)
		free(j->ranks[r].client);
	free(j->ranks);
	free(j->name);
	free(j->run_key);
	free(j);
	*jp = NULL;
}

job *
ctl_jobs_find(ctl_jobs *jobs, const char *name)
{
	if (name == NULL)
		return NULL;
	if (jobs->last_hit != NULL && strcmp(jobs->last_hit->name, name) == 0)
		return jobs->last_hit;
	for (uint32_t i = 0; i < jobs->n_jobs; i++) {
		if (strcmp(jobs->jobs[i]->name, name) == 0)
			return jobs->last_hit = jobs->jobs[i];
	}
	return NULL;
}

void
ctl_jobs_remove(ctl_jobs *jobs, uint32_t i)
{
	if (jobs->last_hit == jobs->jobs[i])
		jobs->last_hit = NULL;
	jobs->bytes -= jobs->jobs[i]->bytes;
	ctl_jobs_job_destroy(&jobs->jobs[i]);
	jobs->jobs[i] = jobs->jobs[--jobs->n_jobs];
}

/* A plug-in worker failed or was started again during a call for job
 * `name`
 * (worker.c logged it): the event goes into the ring, and from there to
 * STATUS and the history. */
static void
jobs_on_plugin_fault(void *arg, const char *kind, const char *name,
    const char *text)
{
	ctl_jobs *jobs = arg;

	ctl_events_add(jobs->events, kind, name, "%s", text);
}

int
ctl_jobs_new(const ctl_config *cfg, uint64_t instance,
    ctl_jobs_publish_fn *publish, void *publish_arg, ctl_jobs **ret_jobs)
{
	ctl_jobs *jobs = calloc(1, sizeof(*jobs));

	if (jobs == NULL || ctl_events_new(&jobs->events) != 0) {
		free(jobs);
		return BELLOWS_ENOMEM;
	}
	jobs->cfg = cfg;
	jobs->instance = instance;
	jobs->publish = publish;
	jobs->publish_arg = publish_arg;
	ctl_worker_set_limits(cfg->plugin_timeout_ms, cfg->plugin_memory_mb);
	ctl_worker_set_fault_fn(jobs_on_plugin_fault, jobs);
	*ret_jobs = jobs;
	return 0;
}

void
ctl_jobs_set_store(ctl_jobs *jobs, ctl_store *store)
{
	jobs->store = store;
	if (store != NULL)
		ctl_store_set_durable_fn(store, ctl_jobs_on_durable, jobs);
}

void
ctl_jobs_destroy(ctl_jobs **jobs)
{
	if (jobs == NULL || *jobs == NULL)
		return;
	ctl_jobs_cancel_resumes(*jobs);
	for (uint32_t i = 0; i < (*jobs)->n_jobs; i++)
		ctl_jobs_job_destroy(&(*jobs)->jobs[i]);
	free((*jobs)->jobs);
	if (ctl_worker_fault_arg() == *jobs)
		ctl_worker_set_fault_fn(NULL, NULL);
	ctl_events_destroy(&(*jobs)->events);
	free(*jobs);
	*jobs = NULL;
}

/* Swaps in the prepared set `next` (NULL: the job now matches no entry)
 * for job j's policies. */
static void
job_commit_policies(ctl_jobs *jobs, job *j, ctl_policy_set *next)
{
	char note[BELLOWS_REASON_MAX];

	if (next == NULL) {
		if (j->policies != NULL)
			ctl_log(CTL_LOG_WARN, "jobs",
			    "no job entry matches '%s' any more: it runs "
			    "without policies",
			    j->name);
		ctl_policy_set_destroy(&j->policies);
	} else if (ctl_policy_set_commit(next, &j->policies, j->next_window,
		       j->alive, note, sizeof(note)) > 0) {
		ctl_log(CTL_LOG_WARN, "jobs", "job '%s': %s", j->name, note);
		ctl_events_add(jobs->events, CTL_EVENT_POLICY_RESTARTED,
		    j->name, "%s", note);
	}
	if (next != NULL)
		j->policies = next;
	ctl_policy_set_names(j->policies, j->policy_names,
	    sizeof(j->policy_names));
	ctl_log(CTL_LOG_INFO, "jobs", "job '%s' now runs policies '%s'",
	    j->name, j->policy_names);
}

int
ctl_jobs_reload(ctl_jobs *jobs, const ctl_config *cfg, char *errbuf,
    size_t errlen)
{
	char reason[BELLOWS_REASON_MAX];
	ctl_policy_set **next;
	com_decision *blank;
	uint32_t n = jobs->n_jobs, i;
	int r = BELLOWS_ENOMEM;

	/* A run being read back starts its policies with the configuration
	 * going away: it is read again under the new one. */
	ctl_jobs_cancel_resumes(jobs);
	/* Every job's new set is prepared before any is committed, so a
	 * policy that cannot start for one job leaves all of them as they
	 * were. Prepared sets borrow the state in force until the commit. */
	next = calloc(n ? n : 1, sizeof(*next));
	blank = calloc(n ? n : 1, sizeof(*blank));
	if (next == NULL || blank == NULL) {
		snprintf(errbuf, errlen, "out of memory");
		goto out;
	}
	for (i = 0; i < n; i++) {
		job *j = jobs->jobs[i];
		const ctl_job_conf *jc = ctl_config_match(cfg, j->name);
		const com_decision *state = ctl_jobs_log_last(j);

		if (jc == NULL)
			continue;
		/* Only an allocation failure leaves a job without a
		 * decision; its policies then start from a blank state. */
		if (state == NULL) {
			if (com_decision_init(&blank[i], j->name,
				j->n_layers) != 0) {
				snprintf(errbuf, errlen, "out of memory");
				r = BELLOWS_ENOMEM;
				goto fail;
			}
			state = &blank[i];
		}
		r = ctl_policy_set_prepare(j->policies, jc, j->name, j->world,
		    j->layers, j->n_layers, state, reason, sizeof(reason),
		    &next[i]);
		if (r != 0) {
			snprintf(errbuf, errlen, "job '%s': %s", j->name,
			    reason[0] != '\0' ? reason : bellows_strerror(r));
			goto fail;
		}
	}
	for (i = 0; i < n; i++)
		job_commit_policies(jobs, jobs->jobs[i], next[i]);
	jobs->cfg = cfg;
	ctl_worker_set_limits(cfg->plugin_timeout_ms, cfg->plugin_memory_mb);
	r = 0;
	goto out;
fail:
	for (i = 0; i < n; i++)
		ctl_policy_set_destroy(&next[i]);
out:
	for (i = 0; blank != NULL && i < n; i++)
		com_decision_fini(&blank[i]);
	free(blank);
	free(next);
	return r;
}

ctl_events *
ctl_jobs_events(ctl_jobs *jobs)
{
	return jobs->events;
}

void
ctl_jobs_set_sender(ctl_jobs *jobs, ctl_jobs_send_fn *send, void *arg)
{
	jobs->send = send;
	jobs->send_arg = arg;
}

size_t
ctl_jobs_job_bytes(const ctl_job_conf *jc, const char *name, uint32_t world,
    const com_layer_info *layers, uint32_t n_layers)
{
	uint64_t names = strlen(name) + 1, n;
	com_limits lim;

	com_limits_default(&lim);
	for (uint32_t l = 0; l < n_layers; l++)
		names += strlen(layers[l].name) + 1;
	n = sizeof(job) + names + (uint64_t)world * sizeof(job_rank) +
	    (uint64_t)n_layers * (sizeof(com_layer_info) + 2 * sizeof(double));
	n += JOBS_LOG *
	    ((uint64_t)n_layers * 2 * sizeof(double) + lim.max_codec_table +
		2 * (uint64_t)lim.max_text_len + strlen(name) + 1);
	n += JOBS_OPEN *
	    (uint64_t)ctl_window_bytes_max(world, n_layers, lim.max_comm);
	n += ctl_policy_set_bytes(jc, n_layers);
	return n > SIZE_MAX ? SIZE_MAX : (size_t)n;
}

int
ctl_jobs_admit(ctl_jobs *jobs, const char *name, size_t bytes, char *why,
    size_t why_len)
{
	const ctl_config *cfg = jobs->cfg;
	uint64_t mib = ((uint64_t)bytes + (1u << 20) - 1) >> 20;
	uint64_t total = (uint64_t)cfg->max_total_job_mb << 20;

	if (bytes > (uint64_t)cfg->max_job_mb << 20) {
		com_errf(why, why_len,
		    "job '%s' could hold up to %" PRIu64
		    " MiB, more than max_job_mb (%u)",
		    name, mib, cfg->max_job_mb);
		return BELLOWS_ELIMIT;
	}
	/* The held jobs may exceed a total lowered by a reload. */
	if (jobs->bytes > total || bytes > total - jobs->bytes) {
		com_errf(why, why_len,
		    "job '%s' could hold up to %" PRIu64
		    " MiB, and the %u jobs held may hold %zu MiB: more than "
		    "max_total_job_mb (%u)",
		    name, mib, jobs->n_jobs, jobs->bytes >> 20,
		    cfg->max_total_job_mb);
		return BELLOWS_ELIMIT;
	}
	return 0;
}

int
ctl_jobs_reserve(ctl_jobs *jobs)
{
	if (jobs->n_jobs == jobs->cap_jobs) {
		uint32_t cap = jobs->cap_jobs ? jobs->cap_jobs * 2 : 8;
		job **grown = realloc(jobs->jobs, cap * sizeof(*grown));

		if (grown == NULL)
			return BELLOWS_ENOMEM;
		jobs->jobs = grown;
		jobs->cap_jobs = cap;
	}
	return 0;
}

int
ctl_jobs_job_alloc(ctl_jobs *jobs, const char *name, uint32_t world,
    const com_layer_info *layers, uint32_t n_layers, job **ret)
{
	if (ctl_jobs_reserve(jobs) != 0)
		return BELLOWS_ENOMEM;
	return ctl_jobs_job_new(name, world, layers, n_layers, ret);
}

int
ctl_jobs_job_new(const char *name, uint32_t world, const com_layer_info *layers,
    uint32_t n_layers, job **ret)
{
	job *j;

	j = calloc(1, sizeof(*j));
	if (j == NULL)
		return BELLOWS_ENOMEM;
	j->name = com_strdup(name);
	j->run_key = com_strdup("");
	j->world = world;
	j->n_layers = n_layers;
	j->layers = calloc(n_layers ? n_layers : 1, sizeof(*j->layers));
	j->ranks = calloc(world ? world : 1, sizeof(*j->ranks));
	j->grad_norm = malloc((n_layers ? n_layers : 1) * sizeof(double));
	j->level_applied = malloc((n_layers ? n_layers : 1) * sizeof(double));
	if (j->name == NULL || j->run_key == NULL || j->layers == NULL ||
	    j->ranks == NULL || j->grad_norm == NULL ||
	    j->level_applied == NULL)
		goto fail;
	for (uint32_t l = 0; l < n_layers; l++) {
		j->grad_norm[l] = NAN;
		j->level_applied[l] = NAN;
	}
	for (uint32_t l = 0; l < n_layers; l++) {
		j->layers[l] = layers[l];
		j->layers[l].name = com_strdup(layers[l].name);
		if (j->layers[l].name == NULL)
			goto fail;
	}
	*ret = j;
	return 0;
fail:
	ctl_jobs_job_destroy(&j);
	return BELLOWS_ENOMEM;
}

/* Creates job `h->job` from its first hello: layer table, policies and,
 * unless the hello carries a state to adopt (a daemon restart), the
 * policies' initial decision. */
static int
jobs_create(ctl_jobs *jobs, const com_hello *h, job **ret, char *why,
    size_t why_len)
{
	const ctl_job_conf *jc = ctl_config_match(jobs->cfg, h->job);
	com_decision state = { 0 };
	char reason[BELLOWS_REASON_MAX];
	size_t bytes;
	bool adopt;
	job *j;
	int r = BELLOWS_ENOMEM;

	if (jobs->n_jobs >= jobs->cfg->max_jobs) {
		com_errf(why, why_len, "job table full (%u jobs)",
		    jobs->cfg->max_jobs);
		return BELLOWS_ELIMIT;
	}
	bytes = ctl_jobs_job_bytes(jc, h->job, h->world, h->layers,
	    h->n_layers);
	if ((r = ctl_jobs_admit(jobs, h->job, bytes, why, why_len)) != 0)
		return r;
	if ((r = ctl_jobs_job_alloc(jobs, h->job, h->world, h->layers,
		 h->n_layers, &j)) != 0)
		return r;
	j->bytes = bytes;
	r = BELLOWS_ENOMEM;
	free(j->run_key);
	if ((j->run_key = com_strdup(ctl_jobs_run_id(h))) == NULL)
		goto fail;
	j->next_window = h->last_window;
	if (com_decision_init(&state, h->job, h->n_layers) != 0)
		goto fail;
	if (jc != NULL) {
		r = ctl_policy_set_new(jc, h->job, h->world, j->layers,
		    j->n_layers, &state, reason, sizeof(reason), &j->policies);
		if (r != 0) {
			com_errf(why, why_len, "%s", reason);
			goto fail;
		}
		ctl_policy_set_names(j->policies, j->policy_names,
		    sizeof(j->policy_names));
	} else {
		ctl_log(CTL_LOG_WARN, "jobs",
		    "no job entry matches '%s': it runs without policies",
		    h->job);
		snprintf(reason, sizeof(reason), "no policy configured");
	}
	jobs->jobs[jobs->n_jobs++] = j;
	jobs->bytes += j->bytes;
	adopt = h->in_force.seq > 0 && h->in_force.n_layers == h->n_layers;
	j->run_id = ctl_store_run_begin(jobs->store, j->name, j->run_key,
	    j->world, j->layers, j->n_layers, jobs->cfg,
	    adopt ? h->in_force.seq : 1, com_clock_wall_ms());
	if (adopt) {
		/* A restarted daemon adopts what the ranks apply, so training
		 * goes on unchanged and the sequence continues. */
		uint64_t now = com_clock_ms();

		com_decision_fini(&state);
		ctl_jobs_adopt(jobs, j, &h->in_force);
		/* The other ranks are reconnecting too: expect every one of
		 * them (until rank_timeout_ms says otherwise), so that no
		 * window closes and no decision is published before all are
		 * back and waiting for it at its apply step. */
		for (uint32_t k = 0; k < j->world; k++) {
			j->ranks[k].alive = true;
			j->ranks[k].last_seen_ms = now;
			j->ranks[k].first_window = h->last_window;
		}
		j->alive = j->world;
		for (uint32_t i = 0; i < JOBS_OPEN; i++)
			job_count_window(j, i);
		ctl_log(CTL_LOG_INFO, "jobs",
		    "job '%s' resumed at decision %" PRIu64 " from rank %u",
		    h->job, h->in_force.seq, h->rank);
	} else {
		free(state.reason);
		free(state.policy);
		state.reason = com_strdup(reason);
		state.policy = com_strdup(j->policy_names);
		ctl_jobs_decide(jobs, j, &state, h->step, 0, CTL_STORE_INITIAL,
		    0);
		com_decision_fini(&state);
	}
	ctl_log(CTL_LOG_INFO, "jobs",
	    "job '%s' created: world %u, %u layers, policies '%s'", h->job,
	    h->world, h->n_layers, j->policy_names);
	*ret = j;
	return 0;
fail:
	com_decision_fini(&state);
	ctl_jobs_job_destroy(&j);
	return r;
}

bool
ctl_jobs_same_table(const job *j, const com_hello *h)
{
	if (j->n_layers != h->n_layers)
		return false;
	for (uint32_t l = 0; l < j->n_layers; l++) {
		const com_layer_info *a = &j->layers[l], *b = &h->layers[l];

		if (a->numel != b->numel || a->ndim != b->ndim ||
		    strcmp(a->name, b->name) != 0 ||
		    memcmp(a->shape, b->shape, sizeof(a->shape[0]) * a->ndim))
			return false;
	}
	return true;
}

static bool
rank_peer_is(const job_rank *rk, const uint8_t *peer, size_t len)
{
	return rk->peer_len == len && memcmp(rk->peer, peer, len) == 0;
}

/* Finds the rank a message claims and checks the sender holds it. */
/* True when the rank's session belongs to `client` (always without
 * security). */
static bool
rank_client_is(const ctl_jobs *jobs, const job_rank *rk, const char *client)
{
	if (!jobs->cfg->security.enabled)
		return true;
	return rk->client != NULL && client != NULL &&
	    strcmp(rk->client, client) == 0;
}

int
ctl_jobs_check_client(const ctl_jobs *jobs, const char *name,
    const char *client, char *why, size_t why_len)
{
	if (ctl_config_client_allowed(jobs->cfg, name, client))
		return 0;
	com_errf(why, why_len, "client '%s' is not allowed for job '%s'",
	    client != NULL ? client : "(unauthenticated)",
	    name != NULL ? name : "");
	return BELLOWS_EPERM;
}

static int
jobs_rank_of(ctl_jobs *jobs, const char *name, uint32_t rank,
    const uint8_t *peer, size_t peer_len, const char *client, job **ret_job,
    job_rank **ret_rank, char *why, size_t why_len)
{
	job *j;
	job_rank *rk;
	int r;

	const char *resumer;

	if ((r = ctl_jobs_check_client(jobs, name, client, why, why_len)) != 0)
		return r;
	if ((resumer = ctl_jobs_resuming(jobs, name)) != NULL) {
		/* Nothing of a job being resumed moves: a rank of the old
		 * launch that was thought gone joins again, and is told to
		 * wait there. */
		com_errf(why, why_len,
		    "job '%s' is being resumed by launch '%s': rank %u is not "
		    "joined",
		    name, resumer, rank);
		return BELLOWS_ENOTJOINED;
	}
	j = ctl_jobs_find(jobs, name);
	if (j == NULL) {
		com_errf(why, why_len, "unknown job '%s'",
		    name != NULL ? name : "");
		return BELLOWS_ENOTJOINED;
	}
	if (rank >= j->world) {
		com_errf(why, why_len, "rank %u outside world %u of job '%s'",
		    rank, j->world, name);
		return BELLOWS_EPROTO;
	}
	rk = &j->ranks[rank];
	if (!rk->joined || !rank_peer_is(rk, peer, peer_len) ||
	    !rank_client_is(jobs, rk, client)) {
		com_errf(why, why_len,
		    "rank %u of job '%s' is not held by this peer", rank, name);
		return BELLOWS_ENOTJOINED;
	}
	*ret_job = j;
	*ret_rank = rk;
	return 0;
}

/* With security, refuses a report that covers a rank another client
 * holds (or one no client has held): a covering report completes the
 * ranks it covers, so it could silence ranks of another client. Every
 * covered rank must have been taken by a Hello of the reporter's own
 * client. */
static int
jobs_cover_allowed(const ctl_jobs *jobs, const job *j, const com_report *rep,
    const char *client, char *why, size_t why_len)
{
	for (uint32_t c = rep->rank + 1;
	     rep->ranks > 1 && c < rep->rank + rep->ranks; c++) {
		if (rank_client_is(jobs, &j->ranks[c], client))
			continue;
		com_errf(why, why_len,
		    "report of rank %u covers rank %u of job '%s', which "
		    "client '%s' does not hold",
		    rep->rank, c, j->name, client != NULL ? client : "");
		return BELLOWS_EPERM;
	}
	return 0;
}

/* Remembers that the rank's report of window w was taken. */
static void
rank_taken_mark(job_rank *rk, uint64_t w)
{
	if (w >= rk->taken_top) {
		uint64_t shift = w + 1 - rk->taken_top;

		rk->taken_mask = shift >= JOBS_TAKEN ? 0
						     : rk->taken_mask << shift;
		rk->taken_mask |= 1;
		rk->taken_top = w + 1;
	} else if (rk->taken_top - 1 - w < JOBS_TAKEN) {
		rk->taken_mask |= (uint64_t)1 << (rk->taken_top - 1 - w);
	}
}

/* True when the rank's report of window w was taken (as far as the last
 * JOBS_TAKEN windows tell). */
static bool
rank_taken(const job_rank *rk, uint64_t w)
{
	return w < rk->taken_top && rk->taken_top - 1 - w < JOBS_TAKEN &&
	    ((rk->taken_mask >> (rk->taken_top - 1 - w)) & 1) != 0;
}

/* True when window w of the job waits for this rank's report. */
static bool
rank_expected(const job_rank *rk, uint64_t w)
{
	return rk->alive && w >= rk->first_window;
}

/* Adds (dir = +1) or removes (dir = -1) rank r from the counts of every
 * open window that expects it; see the invariants. */
static void
job_count_rank(job *j, uint32_t r, int dir)
{
	const job_rank *rk = &j->ranks[r];

	for (uint32_t i = 0; i < JOBS_OPEN; i++) {
		if (j->open[i] == NULL ||
		    !rank_expected(rk, ctl_window_index(j->open[i])))
			continue;
		j->expected[i] += (uint32_t)dir;
		if (ctl_window_has(j->open[i], r))
			j->have[i] += (uint32_t)dir;
	}
}

/* Counts open window i's expected ranks and reports afresh: O(world), for
 * a window just opened and after every rank changed at once. */
static void
job_count_window(job *j, uint32_t i)
{
	j->expected[i] = j->have[i] = 0;
	if (j->open[i] == NULL)
		return;
	for (uint32_t r = 0; r < j->world; r++) {
		if (!rank_expected(&j->ranks[r], ctl_window_index(j->open[i])))
			continue;
		j->expected[i]++;
		if (ctl_window_has(j->open[i], r))
			j->have[i]++;
	}
}

/* Tells the job's policies that a rank was lost or joined. */
static void
job_tell_policies(ctl_jobs *jobs, job *j, bellows_event_type type,
    uint32_t rank)
{
	const bellows_event ev = {
		.type = type,
		.rank = rank,
		.window = j->next_window,
		.ranks_alive = j->alive,
	};
	uint32_t failed;

	if (j->policies == NULL)
		return;
	failed = ctl_policy_set_event(j->policies, &ev);
	if (failed > 0) {
		jobs->counters.policy_errors += failed;
		ctl_log(CTL_LOG_WARN, "jobs",
		    "job '%s': %u policies failed on a rank event", j->name,
		    failed);
	}
}

static void
rank_seen(ctl_jobs *jobs, job *j, job_rank *rk, uint64_t now_ms)
{
	rk->last_seen_ms = now_ms;
	if (now_ms > jobs->now_ms)
		jobs->now_ms = now_ms;
	if (!rk->alive) {
		rk->alive = true;
		j->alive++;
		job_count_rank(j, (uint32_t)(rk - j->ranks), +1);
	}
}

static void
rank_lost(ctl_jobs *jobs, job *j, uint32_t rank, uint64_t now_ms,
    const char *how, ctl_store_rank_kind kind)
{
	job_rank *rk = &j->ranks[rank];
	bool left = kind == CTL_STORE_RANK_LEFT;

	ctl_log(left ? CTL_LOG_INFO : CTL_LOG_WARN, "jobs",
	    "job '%s' rank %u %s at step %" PRIu64, j->name, rank, how,
	    rk->step);
	if (!rk->alive)
		return;
	ctl_store_rank_event(jobs->store, j->run_id, rank, kind, rk->step, 0,
	    com_clock_wall_ms());
	job_count_rank(j, rank, -1);
	rk->alive = false;
	j->alive--;
	if (j->alive == 0)
		j->idle_since_ms = now_ms;
	ctl_events_add(jobs->events,
	    left ? CTL_EVENT_RANK_LEFT : CTL_EVENT_RANK_LOST, j->name,
	    "rank %u %s at step %" PRIu64 " (%u/%u alive)", rank, how, rk->step,
	    j->alive, j->world);
	job_tell_policies(jobs, j, BELLOWS_EVENT_RANK_LOST, rank);
}

/* Checks what the table relies on in a Hello before it looks anything
 * up: a routing id it can keep, a rank inside the world, a world and
 * layer count within this daemon's limits, named layers of at most
 * COM_MAX_NDIM dimensions. Returns 0, or BELLOWS_EPROTO or BELLOWS_ELIMIT
 * with the reason in why (and, but for the routing id, an Error in
 * *reply); changes nothing. */
static int
hello_check(const ctl_jobs *jobs, size_t peer_len, const com_hello *h,
    com_msg *reply, char *why, size_t why_len)
{
	const ctl_config *cfg = jobs->cfg;

	if (peer_len == 0 || peer_len > CTL_PEER_MAX) {
		com_errf(why, why_len, "routing id of %zu bytes", peer_len);
		return BELLOWS_EPROTO;
	}
	/* The codec checks these too; the rank indexes j->ranks below, so
	 * the table does not rely on it. */
	if (h->job == NULL || h->job[0] == '\0' || h->rank >= h->world) {
		com_errf(why, why_len,
		    "hello for '%s' with rank %u of world %u",
		    h->job != NULL ? h->job : "", h->rank, h->world);
		return ctl_jobs_error_reply(reply, BELLOWS_EPROTO, why);
	}
	if (h->world > cfg->max_world || h->n_layers > cfg->max_layers ||
	    h->n_layers == 0) {
		com_errf(why, why_len,
		    "hello for '%s' with world %u and %u layers exceeds this "
		    "daemon's limits (world <= %u, 1..%u layers)",
		    h->job, h->world, h->n_layers, cfg->max_world,
		    cfg->max_layers);
		return ctl_jobs_error_reply(reply, BELLOWS_ELIMIT, why);
	}
	for (uint32_t l = 0; l < h->n_layers; l++) {
		if (h->layers[l].name == NULL ||
		    h->layers[l].ndim > COM_MAX_NDIM) {
			com_errf(why, why_len,
			    "hello for '%s' has a malformed layer %u", h->job,
			    l);
			return ctl_jobs_error_reply(reply, BELLOWS_EPROTO, why);
		}
	}
	return 0;
}

/* Says in the log and the events that launch j->run_key started run
 * j->run_id in place of run `previous` of launch previous_key. */
static void
hello_run_started(ctl_jobs *jobs, const job *j, const com_hello *h,
    const char *previous_key, int64_t previous)
{
	ctl_log(CTL_LOG_INFO, "jobs",
	    "job '%s': launch '%s' started run %" PRId64 " after run %" PRId64,
	    j->name, j->run_key, j->run_id, previous);
	ctl_events_add(jobs->events, CTL_EVENT_RUN_STARTED, j->name,
	    "launch '%s' started a new run at step %" PRIu64
	    " after launch '%s' (run %" PRId64 ")",
	    j->run_key, h->step, previous_key, previous);
}

/* The job a checked Hello joins: the table's, the run it replaces with
 * another launch's, the recorded run it resumes, or a new one. Keeps the
 * invariants on who may touch a job: a client not allowed for the job,
 * a resuming job (but for its resuming launch), a live rank held by
 * another client and a running launch refuse the Hello before anything
 * changes, so one run and one client hold the job at a time. Returns 0
 * with *ret_j set, or a negative BELLOWS_E* with an Error in *reply and
 * the reason in why; *ret_j is then untouched. */
static int
hello_job(ctl_jobs *jobs, const com_hello *h, const char *client,
    uint64_t now_ms, job **ret_j, com_msg *reply, char *why, size_t why_len)
{
	char previous_key[JOBS_KEY_SHOWN] = "";
	int64_t previous = 0;
	bool replaced = false;
	job *j;
	int r;

	/* Before anything is looked up: a client not allowed for the job
	 * creates nothing, takes nothing over, resumes nothing. */
	if ((r = ctl_jobs_check_client(jobs, h->job, client, why, why_len)) !=
		0 ||
	    (r = ctl_jobs_resume_held(jobs, h, why, why_len)) != 0)
		return ctl_jobs_error_reply(reply, r, why);
	j = ctl_jobs_find(jobs, h->job);
	if (j != NULL && jobs->cfg->security.enabled && h->rank < j->world) {
		const job_rank *held = &j->ranks[h->rank];

		/* A live rank's session stays with the client that opened
		 * it; the same incarnation claimed by another client is
		 * another process, not this one reconnecting. */
		if (held->joined && held->alive &&
		    !rank_client_is(jobs, held, client)) {
			com_errf(why, why_len,
			    "rank %u of job '%s' is held by another client",
			    h->rank, h->job);
			return ctl_jobs_error_reply(reply, BELLOWS_EBUSY, why);
		}
	}
	if (j != NULL) {
		switch (ctl_jobs_launch_of(j, h)) {
		case JOB_LAUNCH_BUSY:
			return ctl_jobs_refuse_launch(jobs, j, h, reply, why,
			    why_len);
		case JOB_LAUNCH_NEW:
			snprintf(previous_key, sizeof(previous_key), "%s",
			    j->run_key);
			previous = j->run_id;
			r = ctl_jobs_take_over(jobs, &j, h, client, now_ms, why,
			    why_len);
			if (r != 0)
				return ctl_jobs_error_reply(reply, r, why);
			replaced = j == NULL;
			break;
		case JOB_LAUNCH_SAME:
			break;
		}
	} else if (h->resume && h->last_window > 0) {
		/* A job this daemon forgot (or never ran): its recorded
		 * run, if the history has one, continues. */
		if ((r = ctl_jobs_resume(jobs, &j, h, client, now_ms, why,
			 why_len)) != 0)
			return ctl_jobs_error_reply(reply, r, why);
	}
	if (j == NULL) {
		r = jobs_create(jobs, h, &j, why, why_len);
		if (r != 0)
			return ctl_jobs_error_reply(reply, r, why);
		if (replaced)
			hello_run_started(jobs, j, h, previous_key, previous);
	} else if (j->world != h->world || !ctl_jobs_same_table(j, h)) {
		com_errf(why, why_len,
		    "hello for job '%s' rank %u does not match the job "
		    "(world %u, %u layers)",
		    h->job, h->rank, j->world, j->n_layers);
		return ctl_jobs_error_reply(reply, BELLOWS_EMISMATCH, why);
	}
	*ret_j = j;
	return 0;
}

/* Gives rank h->rank of j to the Hello's agent (peer, incarnation and,
 * with security, client). Keeps "a rank is held by one routing id and one
 * incarnation at a time": a live rank held by another agent process
 * refuses it (BELLOWS_EBUSY, Error in *reply). Keeps the expected/have
 * counts: the rank leaves them before its first window changes and comes
 * back after (job_count_rank). A rank whose reports start at the window
 * a job rebuilt from the store comes next (resume, set in *ret_resume)
 * is first expected there. Returns 0; BELLOWS_EBUSY with the rank
 * untouched; or BELLOWS_ENOMEM, the rank still held as before though its
 * rejoin count and, for a new incarnation, its taken set have moved. */
static int
hello_take_rank(ctl_jobs *jobs, job *j, const uint8_t *peer, size_t peer_len,
    const char *client, const com_hello *h, uint64_t now_ms, bool *ret_resume,
    com_msg *reply, char *why, size_t why_len)
{
	job_rank *rk = &j->ranks[h->rank];
	bool resume;

	if (rk->joined && rk->alive && rk->incarnation != h->incarnation &&
	    !rank_peer_is(rk, peer, peer_len)) {
		com_errf(why, why_len,
		    "rank %u of job '%s' is held by a live agent", h->rank,
		    h->job);
		return ctl_jobs_error_reply(reply, BELLOWS_EBUSY, why);
	}
	if (rk->joined || rk->reports > 0)
		rk->rejoins++;
	/* A job rebuilt from the store knows which window comes next: a
	 * rank whose queued reports start there resumes it (the daemon
	 * restarted under it), rather than moving the job ahead. */
	resume = j->recovering && h->last_window >= j->next_window &&
	    h->last_window - j->next_window < JOBS_OPEN;
	if (rk->incarnation != h->incarnation)
		rk->taken_top = rk->taken_mask = 0;
	if (jobs->cfg->security.enabled &&
	    (rk->client == NULL || strcmp(rk->client, client) != 0)) {
		char *copy = com_strdup(client);

		if (copy == NULL)
			return BELLOWS_ENOMEM;
		free(rk->client);
		rk->client = copy;
	}
	rk->joined = true;
	rk->left = false;
	memcpy(rk->peer, peer, peer_len);
	rk->peer_len = (uint8_t)peer_len;
	rk->incarnation = h->incarnation;
	rk->step = h->step;
	rk->seq_in_force = h->in_force.seq;
	rk->welcomed_ms = now_ms;
	rk->resuming = h->in_force.seq > 0;
	job_count_rank(j, h->rank, -1);
	rk->first_window = resume ? j->next_window : h->last_window;
	job_count_rank(j, h->rank, +1);
	*ret_resume = resume;
	return 0;
}

/* Moves job j to where the Hello's rank is, after the rank was taken. An
 * ended job is taken up again. Keeps "windows close in index order": if
 * the rank is past windows this daemon never saw close and the job has
 * no report yet (and is not resuming), the open windows below the rank's
 * are dropped and next_window moves up to it; a job rebuilt from the
 * store takes the windows it skips as late ones (a span after those it
 * found missing, all below next_window). Keeps the decision log's order: a
 * decision in force newer than the log's replaces it (ctl_jobs_adopt). */
static void
hello_move_job(ctl_jobs *jobs, job *j, const com_hello *h, bool resume)
{
	if (j->ended) {
		/* Taken up again after every rank had left. */
		j->ended = false;
		ctl_store_run_end(jobs->store, j->run_id, 0);
	}
	if (h->step > j->max_step)
		j->max_step = h->step;
	if (h->last_window > j->next_window && j->reports == 0 && !resume) {
		/* Ranks are past windows this daemon never saw close (it
		 * restarted): start aggregating from where they are. A rank
		 * that rejoins a running job does not move the job: it is
		 * simply not expected in the windows before its first. */
		for (uint32_t i = 0; i < JOBS_OPEN; i++) {
			if (j->open[i] != NULL &&
			    ctl_window_index(j->open[i]) < h->last_window)
				ctl_window_destroy(&j->open[i]);
		}
		/* Rebuilt from the store, the job knows which windows it
		 * had not closed: the reports the agents kept of those
		 * are still taken, and recorded late. */
		if (j->recovering)
			ctl_jobs_late_begin(jobs, j, j->next_window,
			    h->last_window);
		j->next_window = h->last_window;
	}
	if (h->in_force.seq > j->last_seq &&
	    h->in_force.n_layers == j->n_layers) {
		ctl_log(CTL_LOG_INFO, "jobs",
		    "job '%s' resumed at decision %" PRIu64
		    " from rank %u (the daemon knew up to %" PRIu64 ")",
		    j->name, h->in_force.seq, h->rank, j->last_seq);
		ctl_jobs_adopt(jobs, j, &h->in_force);
	}
}

/* Records and tells that rank h->rank of j joined (or rejoined): the
 * counter, the store's rank event, the log, the events and the job's
 * policies. */
static void
hello_announce(ctl_jobs *jobs, job *j, const com_hello *h)
{
	const job_rank *rk = &j->ranks[h->rank];
	const char *how = rk->rejoins > 0 ? "rejoined" : "joined";

	jobs->counters.ranks_joined++;
	ctl_store_rank_event(jobs->store, j->run_id, h->rank,
	    rk->rejoins > 0 ? CTL_STORE_RANK_REJOINED : CTL_STORE_RANK_JOINED,
	    h->step, h->incarnation, com_clock_wall_ms());
	ctl_log(CTL_LOG_INFO, "jobs",
	    "job '%s' rank %u %s at step %" PRIu64 " (%u/%u alive)", h->job,
	    h->rank, how, h->step, j->alive, j->world);
	ctl_events_add(jobs->events, CTL_EVENT_RANK_JOINED, j->name,
	    "rank %u %s at step %" PRIu64 " (%u/%u alive)", h->rank, how,
	    h->step, j->alive, j->world);
	job_tell_policies(jobs, j, BELLOWS_EVENT_RANK_JOINED, h->rank);
}

/* Fills *reply with the Welcome to rank h->rank of j: the daemon's
 * timing, windows_closed, and the decisions of the log in force from the
 * rank's step on. Returns 0, or BELLOWS_ENOMEM with *reply finalised. */
static int
hello_welcome(const ctl_jobs *jobs, job *j, const com_hello *h, com_msg *reply)
{
	com_msg_init(reply, COM_MSG_WELCOME);
	reply->u.welcome.job = com_strdup(h->job);
	reply->u.welcome.rank = h->rank;
	reply->u.welcome.apply_lag = jobs->cfg->apply_lag;
	reply->u.welcome.heartbeat_ms = jobs->cfg->heartbeat_ms;
	reply->u.welcome.instance = jobs->instance;
	reply->u.welcome.windows_closed = ctl_jobs_windows_closed(j);
	if (reply->u.welcome.job == NULL ||
	    ctl_jobs_log_tail(j, h->step, &reply->u.welcome.decisions,
		&reply->u.welcome.n_decisions) != 0) {
		com_msg_fini(reply);
		return BELLOWS_ENOMEM;
	}
	return 0;
}

int
ctl_jobs_hello(ctl_jobs *jobs, const uint8_t *peer, size_t peer_len,
    const char *client, const com_hello *h, uint64_t now_ms, com_msg *reply,
    char *why, size_t why_len)
{
	job *j = NULL;
	bool resume = false;
	int r;

	r = hello_check(jobs, peer_len, h, reply, why, why_len);
	if (r == 0)
		r = hello_job(jobs, h, client, now_ms, &j, reply, why, why_len);
	if (r == 0)
		r = hello_take_rank(jobs, j, peer, peer_len, client, h, now_ms,
		    &resume, reply, why, why_len);
	if (r != 0)
		return r;
	rank_seen(jobs, j, &j->ranks[h->rank], now_ms);
	hello_move_job(jobs, j, h, resume);
	hello_announce(jobs, j, h);
	return hello_welcome(jobs, j, h, reply);
}

/* Re-issues the job's current state under a new seq when a rank applies
 * something else than it should at `step`, unless a decision is already
 * pending (it will bring every rank to the same state). */
static void
job_check_divergence(ctl_jobs *jobs, job *j, uint32_t rank, uint64_t step,
    uint64_t seq_in_force)
{
	const ctl_config *cfg = jobs->cfg;
	const com_decision *last = ctl_jobs_log_last(j);
	int at = ctl_jobs_log_in_force(j, step);
	com_decision state;
	uint64_t expected;

	if (last == NULL || at < 0)
		return;
	expected = ctl_jobs_log_at(j, (uint32_t)at)->seq;
	/* seq 0: the rank has not begun a step yet; it is about to apply
	 * what its Welcome carried. */
	if (seq_in_force == 0 || seq_in_force == expected ||
	    last->apply_step > j->max_step)
		return;
	if (com_decision_copy(&state, last) != 0)
		return;
	free(state.reason);
	state.reason = NULL;
	{
		char text[160];

		snprintf(text, sizeof(text),
		    "repair: rank %u applied decision %" PRIu64
		    " at step %" PRIu64 ", expected %" PRIu64,
		    rank, seq_in_force, step, expected);
		state.reason = com_strdup(text);
		ctl_log(CTL_LOG_WARN, "jobs", "job '%s': %s", j->name, text);
	}
	jobs->counters.repairs++;
	ctl_jobs_decide(jobs, j, &state,
	    j->max_step + 1 + cfg->apply_lag + cfg->repair_margin, last->window,
	    CTL_STORE_REPAIR, 0);
	com_decision_fini(&state);
}

/* Publishes the window's summary with what the policies computed on it
 * (their metrics, borrowed from the policy set for the call). */
static void
jobs_publish_telemetry(ctl_jobs *jobs, job *j, const bellows_window *w)
{
	uint32_t n_metrics = 0;
	const com_metric *metrics = ctl_policy_set_metrics(j->policies,
	    &n_metrics);
	com_msg m;

	com_msg_init(&m, COM_MSG_TELEMETRY);
	/* The wire takes JOBS_TELEMETRY_METRICS (the codec's limit); a job
	 * of many policies sends the first ones, the history keeps all. */
	if (n_metrics > JOBS_TELEMETRY_METRICS)
		n_metrics = JOBS_TELEMETRY_METRICS;
	/* Borrowed for the call: the message is not finalised. */
	m.u.telemetry.n_metrics = n_metrics;
	m.u.telemetry.metrics = (com_metric *)metrics;
	m.u.telemetry.job = j->name; /* borrowed for the call */
	m.u.telemetry.window = w->window;
	m.u.telemetry.ranks_reported = w->ranks_reported;
	m.u.telemetry.ranks_expected = j->alive;
	m.u.telemetry.step_ms_median = isnan(w->step_ms_median)
	    ? 0
	    : w->step_ms_median;
	jobs->publish(jobs->publish_arg, &m);
}

/* Closes window `slot` of job j: runs the policies and publishes the
 * decision that answers it. */
static void
job_close_window(ctl_jobs *jobs, job *j, uint32_t slot, bool complete)
{
	ctl_window *win = j->open[slot];
	const com_decision *last = ctl_jobs_log_last(j);
	char policies[256], reason[1024];
	const com_metric *metrics;
	uint64_t closing_ns = com_clock_ns();
	com_decision state;
	bellows_window view;
	uint32_t failed = 0, n_metrics = 0;
	uint64_t apply_step;

	if (last != NULL)
		ctl_window_view(win, j->name, j->world, j->layers, last, &view);
	if (last == NULL || com_decision_copy(&state, last) != 0) {
		/* Out of memory: the window is dropped without a decision;
		 * agents time out and keep their state. */
		ctl_log(CTL_LOG_ERROR, "jobs",
		    "job '%s' window %" PRIu64 " closed without a decision",
		    j->name, ctl_window_index(win));
		j->next_window = ctl_window_index(win) + 1;
		ctl_window_destroy(&j->open[slot]);
		return;
	}
	if (!complete) {
		char missing[256] = "";
		size_t used = 0;

		for (uint32_t r = 0; r < j->world && used < 200; r++) {
			if (rank_expected(&j->ranks[r],
				ctl_window_index(win)) &&
			    !ctl_window_has(win, r)) {
				int n = snprintf(missing + used,
				    sizeof(missing) - used, "%s%u",
				    used ? "," : "", r);
				if (n > 0)
					used += (size_t)n;
			}
		}
		j->windows_incomplete++;
		jobs->counters.incomplete++;
		ctl_log(CTL_LOG_WARN, "jobs",
		    "job '%s' window %" PRIu64
		    " closed by timeout with %u of %u ranks (missing: %s)",
		    j->name, view.window, view.ranks_reported, j->alive,
		    missing);
		ctl_events_add(jobs->events, CTL_EVENT_WINDOW_INCOMPLETE,
		    j->name,
		    "window %" PRIu64
		    " closed by timeout with %u of %u ranks (missing: %s)",
		    view.window, view.ranks_reported, j->alive, missing);
	}
	policies[0] = reason[0] = '\0';
	/* Each decision asks for its own calibration, or none. */
	state.calibrate_steps = 0;
	if (j->policies != NULL) {
		ctl_policy_set_run(j->policies, &view, &state, policies,
		    sizeof(policies), reason, sizeof(reason), &failed);
		if (failed > 0) {
			jobs->counters.policy_errors += failed;
			ctl_log(CTL_LOG_WARN, "jobs",
			    "job '%s' window %" PRIu64 ": %u policies failed",
			    j->name, view.window, failed);
		}
	}
	free(state.policy);
	free(state.reason);
	state.policy = com_strdup(policies);
	state.reason = com_strdup(reason[0] != '\0' ? reason : "no change");
	apply_step = view.last_step + 1 + jobs->cfg->apply_lag;
	if (j->max_step + 1 > apply_step)
		apply_step = j->max_step + 1;
	if (!complete) {
		/* Closed late: ranks that gave up waiting are already past
		 * the usual apply step, and heartbeats lag. Leave them the
		 * same margin a repair gets. */
		uint64_t late = j->max_step + 1 + jobs->cfg->apply_lag +
		    jobs->cfg->repair_margin;

		if (late > apply_step)
			apply_step = late;
	}
	jobs->counters.windows++;
	j->windows++;
	j->floats_sent += view.floats_sent;
	j->floats_raw += view.floats_raw;
	for (uint32_t l = 0; l < j->n_layers && l < view.n_layers; l++) {
		j->grad_norm[l] = view.layers[l].grad_norm;
		j->level_applied[l] = view.layers[l].level_applied;
	}
	jobs_publish_telemetry(jobs, j, &view);
	/* The window as the policies saw it, with `last`, the state in
	 * force during it: what a recovered job's policies are shown
	 * again. Recorded before the decision answering it, it is never
	 * dropped and commits no later than that decision. */
	ctl_jobs_closed_record(jobs, j);
	ctl_store_window(jobs->store, j->run_id, &view, j->alive,
	    complete ? CTL_STORE_CLOSED_COMPLETE : 0, last,
	    com_clock_wall_ms());
	metrics = ctl_policy_set_metrics(j->policies, &n_metrics);
	ctl_store_policy_metrics(jobs->store, j->run_id, view.window, metrics,
	    n_metrics);
	ctl_jobs_decide(jobs, j, &state, apply_step, view.window + 1,
	    CTL_STORE_WINDOW, closing_ns);
	com_decision_fini(&state);
	j->next_window = view.window + 1;
	j->recovering = false;
	ctl_window_destroy(&j->open[slot]);
}

/* Closes, in order, every window that is complete or timed out. */
static void
job_try_close(ctl_jobs *jobs, job *j, uint64_t now_ms)
{
	ctl_jobs_late_close(jobs, j, now_ms);
	for (;;) {
		int slot = -1;
		uint64_t lowest = UINT64_MAX;
		bool complete = true;

		for (uint32_t i = 0; i < JOBS_OPEN; i++) {
			if (j->open[i] != NULL &&
			    ctl_window_index(j->open[i]) < lowest) {
				lowest = ctl_window_index(j->open[i]);
				slot = (int)i;
			}
		}
		if (slot < 0)
			return;
		ctl_window *win = j->open[slot];
		complete = j->have[slot] == j->expected[slot];
		if (!complete &&
		    now_ms - ctl_window_opened_ms(win) <
			jobs->cfg->window_timeout_ms)
			return;
		if (lowest > j->next_window) {
			ctl_log(CTL_LOG_WARN, "jobs",
			    "job '%s': no report of windows %" PRIu64
			    "..%" PRIu64 " arrived; skipping them",
			    j->name, j->next_window, lowest - 1);
			j->next_window = lowest;
		}
		job_close_window(jobs, j, (uint32_t)slot, complete);
	}
}

/* Takes a report of a late window (jobs_late.c): folded in, its timings
 * recorded, the late windows that may close closed. */
static int
job_report_late(ctl_jobs *jobs, job *j, job_rank *rk, const com_report *rep,
    uint64_t now_ms, char *why, size_t why_len)
{
	int r = ctl_jobs_late_add(j, rep, now_ms, why, why_len);

	if (r == BELLOWS_EBUSY) {
		jobs->counters.duplicates++;
		return 0;
	}
	if (r != 0)
		return r;
	rank_taken_mark(rk, rep->window);
	rk->reports++;
	j->reports++;
	jobs->counters.reports++;
	jobs->counters.layer_stats += rep->n_layers;
	ctl_store_timing(jobs->store, j->run_id, rep->window, rep->rank,
	    &rep->timings);
	job_try_close(jobs, j, now_ms);
	return 0;
}

int
ctl_jobs_report(ctl_jobs *jobs, const uint8_t *peer, size_t peer_len,
    const char *client, const com_report *rep, uint64_t now_ms, com_msg *reply,
    char *why, size_t why_len)
{
	job *j;
	job_rank *rk;
	int slot = -1, r;

	r = jobs_rank_of(jobs, rep->job, rep->rank, peer, peer_len, client, &j,
	    &rk, why, why_len);
	if (r == BELLOWS_ENOTJOINED || r == BELLOWS_EPERM)
		return ctl_jobs_error_reply(reply, r, why);
	if (r != 0)
		return r;
	for (uint32_t i = 0; i < rep->n_layers; i++) {
		if (rep->layers[i].layer >= j->n_layers) {
			com_errf(why, why_len,
			    "report names layer %u of a %u-layer job",
			    rep->layers[i].layer, j->n_layers);
			return BELLOWS_EPROTO;
		}
	}
	if (rep->ranks > 1 && rep->ranks > j->world - rep->rank) {
		com_errf(why, why_len,
		    "report of rank %u covers %u ranks of a %u-rank job",
		    rep->rank, rep->ranks, j->world);
		return BELLOWS_EPROTO;
	}
	if ((r = jobs_cover_allowed(jobs, j, rep, client, why, why_len)) != 0)
		return ctl_jobs_error_reply(reply, r, why);
	rank_seen(jobs, j, rk, now_ms);
	if (rep->last_step < rep->first_step) {
		com_errf(why, why_len, "report steps %" PRIu64 "..%" PRIu64,
		    rep->first_step, rep->last_step);
		return BELLOWS_EPROTO;
	}
	if (rep->window < j->next_window && rank_taken(rk, rep->window)) {
		/* A resend racing the window's close: already counted in. */
		jobs->counters.duplicates++;
		return 0;
	}
	if (ctl_jobs_late_has(j, rep->window))
		return job_report_late(jobs, j, rk, rep, now_ms, why, why_len);
	if (ctl_jobs_late_recorded(j, rep->window)) {
		/* Recorded before the restart, between two late spans: the
		 * agent kept it as the mark was below it. It has sent all it
		 * will of the windows before (late_rank_past). */
		rank_taken_mark(rk, rep->window);
		jobs->counters.duplicates++;
		return 0;
	}
	if (rep->window < j->next_window) {
		com_errf(why, why_len,
		    "stale report of window %" PRIu64 " (next is %" PRIu64 ")",
		    rep->window, j->next_window);
		return BELLOWS_ESTATE;
	}
	if (rep->window >= j->next_window + JOBS_OPEN) {
		com_errf(why, why_len,
		    "report of window %" PRIu64 " is too far ahead of %" PRIu64,
		    rep->window, j->next_window);
		return BELLOWS_ESTATE;
	}
	for (uint32_t i = 0; i < JOBS_OPEN; i++) {
		if (j->open[i] != NULL &&
		    ctl_window_index(j->open[i]) == rep->window)
			slot = (int)i;
	}
	if (slot < 0) {
		for (uint32_t i = 0; i < JOBS_OPEN && slot < 0; i++) {
			if (j->open[i] == NULL)
				slot = (int)i;
		}
		if (slot < 0 ||
		    ctl_window_new(rep->window, j->world, j->n_layers, now_ms,
			&j->open[slot]) != 0) {
			com_errf(why, why_len, "cannot open window %" PRIu64,
			    rep->window);
			return BELLOWS_ENOMEM;
		}
		job_count_window(j, (uint32_t)slot);
	}
	if ((r = ctl_window_add(j->open[slot], rep)) != 0) {
		if (r == BELLOWS_ENOMEM) {
			com_errf(why, why_len,
			    "no memory for the report of window %" PRIu64,
			    rep->window);
			return r;
		}
		/* A resend (the agent rejoined before the window closed):
		 * the first copy stands, and this is no peer's fault. */
		jobs->counters.duplicates++;
		return 0;
	}
	/* A report covering several ranks (aggregated inside the job)
	 * completes each of them: O(ranks covered), once per report. */
	for (uint32_t c = rep->rank;
	     c < rep->rank + (rep->ranks > 1 ? rep->ranks : 1); c++)
		if (rank_expected(&j->ranks[c], rep->window))
			j->have[slot]++;
	rank_taken_mark(rk, rep->window);
	rk->reports++;
	j->reports++;
	if (rep->last_step > rk->step)
		rk->step = rep->last_step;
	if (rk->step > j->max_step)
		j->max_step = rk->step;
	rk->seq_in_force = rep->seq_in_force;
	jobs->counters.reports++;
	jobs->counters.layer_stats += rep->n_layers;
	ctl_store_timing(jobs->store, j->run_id, rep->window, rep->rank,
	    &rep->timings);
	job_check_divergence(jobs, j, rep->rank, rep->last_step,
	    rep->seq_in_force);
	job_try_close(jobs, j, now_ms);
	return 0;
}

int
ctl_jobs_heartbeat(ctl_jobs *jobs, const uint8_t *peer, size_t peer_len,
    const char *client, const com_heartbeat *hb, uint64_t now_ms,
    com_msg *reply, char *why, size_t why_len)
{
	job *j;
	job_rank *rk;
	int r;

	r = jobs_rank_of(jobs, hb->job, hb->rank, peer, peer_len, client, &j,
	    &rk, why, why_len);
	if (r == BELLOWS_ENOTJOINED || r == BELLOWS_EPERM)
		return ctl_jobs_error_reply(reply, r, why);
	if (r != 0)
		return r;
	rank_seen(jobs, j, rk, now_ms);
	rk->step = hb->step;
	rk->seq_in_force = hb->seq_in_force;
	if (hb->step > j->max_step)
		j->max_step = hb->step;
	job_check_divergence(jobs, j, hb->rank, hb->step, hb->seq_in_force);
	com_msg_init(reply, COM_MSG_HEARTBEAT_ACK);
	reply->u.heartbeat_ack.instance = jobs->instance;
	reply->u.heartbeat_ack.last_seq = j->last_seq;
	reply->u.heartbeat_ack.windows_closed = ctl_jobs_windows_closed(j);
	return 0;
}

int
ctl_jobs_bye(ctl_jobs *jobs, const uint8_t *peer, size_t peer_len,
    const char *client, const com_bye *bye, uint64_t now_ms, char *why,
    size_t why_len)
{
	job *j;
	job_rank *rk;
	int r;

	r = jobs_rank_of(jobs, bye->job, bye->rank, peer, peer_len, client, &j,
	    &rk, why, why_len);
	if (r != 0)
		return r;
	rank_lost(jobs, j, bye->rank, now_ms, "left", CTL_STORE_RANK_LEFT);
	rk->joined = false;
	rk->left = true;
	job_try_close(jobs, j, now_ms);
	if (!j->ended) {
		bool all_left = true;

		for (uint32_t i = 0; i < j->world && all_left; i++)
			all_left = j->ranks[i].left;
		if (all_left) {
			j->ended = true;
			ctl_store_run_end(jobs->store, j->run_id,
			    com_clock_wall_ms());
			ctl_log(CTL_LOG_INFO, "jobs",
			    "job '%s': every rank has left, its run ended",
			    j->name);
		}
	}
	return 0;
}

void
ctl_jobs_tick(ctl_jobs *jobs, uint64_t now_ms)
{
	const ctl_config *cfg = jobs->cfg;

	if (now_ms > jobs->now_ms)
		jobs->now_ms = now_ms;
	ctl_jobs_resume_tick(jobs, now_ms);
	for (uint32_t i = 0; i < jobs->n_jobs;) {
		job *j = jobs->jobs[i];

		for (uint32_t r = 0; r < j->world; r++) {
			job_rank *rk = &j->ranks[r];

			if (rk->alive &&
			    now_ms - rk->last_seen_ms >= cfg->rank_timeout_ms) {
				rank_lost(jobs, j, r, now_ms,
				    "lost (no message for rank_timeout_ms)",
				    CTL_STORE_RANK_LOST);
				jobs->counters.ranks_lost++;
			}
		}
		job_try_close(jobs, j, now_ms);
		if (j->alive == 0 &&
		    now_ms - j->idle_since_ms >= cfg->job_idle_ms) {
			ctl_log(CTL_LOG_INFO, "jobs",
			    "job '%s' forgotten after %u ms without ranks",
			    j->name, cfg->job_idle_ms);
			if (!j->ended)
				ctl_store_run_end(jobs->store, j->run_id,
				    com_clock_wall_ms());
			ctl_jobs_remove(jobs, i);
			continue;
		}
		i++;
	}
}
