/* jobs_status - what the job table tells its readers, see jobs.h.
 *
 * STATUS replies, Snapshot replies, the decision latency and the
 * counters: each reads the table and changes nothing in it. With
 * security a client reads only the jobs the configuration allows it.
 */
#include "jobs_int.h"

#include "common/errbuf.h"

#include <bellows/error.h>

#include <stdlib.h>
#include <string.h>

void
ctl_jobs_get_counters(const ctl_jobs *jobs, ctl_jobs_counters *ret)
{
	*ret = jobs->counters;
}

static int
jobs_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a;
	uint64_t y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

void
ctl_jobs_latency(const ctl_jobs *jobs, ctl_jobs_latency_info *ret)
{
	uint64_t sorted[JOBS_LATENCY_N];
	uint32_t n = jobs->latency_n < JOBS_LATENCY_N
	    ? (uint32_t)jobs->latency_n
	    : JOBS_LATENCY_N;

	memset(ret, 0, sizeof(*ret));
	ret->samples = n;
	if (n == 0)
		return;
	memcpy(sorted, jobs->latency_ns, n * sizeof(sorted[0]));
	qsort(sorted, n, sizeof(sorted[0]), jobs_cmp_u64);
	/* Nearest rank: the smallest value with at least p % at or below. */
	ret->p50_ms = (double)sorted[(n * 50 + 99) / 100 - 1] / 1e6;
	ret->p99_ms = (double)sorted[(n * 99 + 99) / 100 - 1] / 1e6;
	ret->max_ms = (double)sorted[n - 1] / 1e6;
}

const double ctl_jobs_latency_bounds_ms[CTL_JOBS_LATENCY_BUCKETS] = {
	0.5,
	1,
	2.5,
	5,
	10,
	25,
	50,
	100,
	250,
	500,
	1000,
	2500,
	5000,
	10000,
};

void
ctl_jobs_latency_histogram(const ctl_jobs *jobs, ctl_jobs_latency_hist *ret)
{
	uint64_t sum = 0;

	for (uint32_t b = 0; b < CTL_JOBS_LATENCY_BUCKETS; b++) {
		sum += jobs->latency_bucket[b];
		ret->le[b] = sum;
	}
	ret->count = sum + jobs->latency_bucket[CTL_JOBS_LATENCY_BUCKETS];
	ret->sum_ms = jobs->latency_sum_ms;
}

uint32_t
ctl_jobs_views(ctl_jobs *jobs, ctl_jobs_job_view *ret, uint32_t max)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < jobs->n_jobs && n < max; i++) {
		job *j = jobs->jobs[i];
		const com_decision *in_force = NULL;

		/* The newest decision published is the one in force (or
		 * about to be) on every rank. */
		for (uint32_t k = j->log_n; k-- > 0;) {
			const com_decision *d = ctl_jobs_log_at(j, k);

			if (d->seq <= j->published_seq) {
				in_force = d;
				break;
			}
		}
		ret[n++] = (ctl_jobs_job_view){
			.name = j->name,
			.world = j->world,
			.alive = j->alive,
			.step = j->max_step,
			.windows = j->windows,
			.floats_sent = j->floats_sent,
			.floats_raw = j->floats_raw,
			.n_layers = j->n_layers,
			.layers = j->layers,
			.level = in_force != NULL &&
				in_force->n_layers == j->n_layers
			    ? in_force->level
			    : NULL,
			.level_applied = j->level_applied,
			.grad_norm = j->grad_norm,
		};
	}
	return n;
}

int
ctl_jobs_snapshot(ctl_jobs *jobs, const char *client,
    const com_snapshot_request *req, com_msg *reply, char *why, size_t why_len)
{
	job *j;
	uint64_t step = 0;
	int r;

	if ((r = ctl_jobs_check_client(jobs, req->job, client, why, why_len)) !=
	    0)
		return ctl_jobs_error_reply(reply, r, why);
	j = ctl_jobs_find(jobs, req->job);
	if (j == NULL) {
		com_errf(why, why_len, "snapshot of unknown job '%s'",
		    req->job != NULL ? req->job : "");
		return ctl_jobs_error_reply(reply, BELLOWS_ENOTJOINED, why);
	}
	if (req->rank < j->world)
		step = j->ranks[req->rank].step;
	com_msg_init(reply, COM_MSG_SNAPSHOT);
	reply->u.snapshot.job = com_strdup(j->name);
	if (reply->u.snapshot.job == NULL ||
	    ctl_jobs_log_tail(j, step, &reply->u.snapshot.decisions,
		&reply->u.snapshot.n_decisions) != 0) {
		com_msg_fini(reply);
		return BELLOWS_ENOMEM;
	}
	return 0;
}

bool
ctl_jobs_client_may_read(const ctl_jobs *jobs, const char *name,
    const char *client)
{
	if (name == NULL)
		return ctl_config_client_allowed_all(jobs->cfg, client);
	return ctl_config_client_allowed(jobs->cfg, name, client);
}

/* Drops from a STATUS reply's events those of jobs `client` may not
 * read (the daemon's own, with no job, stay). */
static void
jobs_filter_events(const ctl_jobs *jobs, const char *client,
    com_status_reply *out)
{
	uint32_t kept = 0;

	for (uint32_t i = 0; i < out->n_events; i++) {
		com_event *e = &out->events[i];

		if (e->job == NULL || e->job[0] == '\0' ||
		    ctl_config_client_allowed(jobs->cfg, e->job, client)) {
			out->events[kept++] = *e;
			continue;
		}
		free(e->kind);
		free(e->job);
		free(e->text);
	}
	out->n_events = kept;
}

int
ctl_jobs_status(ctl_jobs *jobs, const char *client,
    const com_status_request *req, uint64_t now_ms, com_status_reply *out)
{
	bool all = req->job == NULL || req->job[0] == '\0';
	uint32_t n = 0;
	int rc;

	out->jobs = calloc(jobs->n_jobs ? jobs->n_jobs : 1, sizeof(*out->jobs));
	if (out->jobs == NULL)
		return BELLOWS_ENOMEM;
	for (uint32_t i = 0; i < jobs->n_jobs; i++) {
		job *j = jobs->jobs[i];
		com_job_status *js;

		if (!all && strcmp(j->name, req->job) != 0)
			continue;
		if (!ctl_config_client_allowed(jobs->cfg, j->name, client))
			continue;
		js = &out->jobs[n++];
		out->n_jobs = n;
		js->job = com_strdup(j->name);
		js->policy = com_strdup(j->policy_names);
		js->world = j->world;
		js->ranks_alive = j->alive;
		js->window = j->next_window;
		js->seq = j->last_seq;
		js->step = j->max_step;
		js->n_layers = j->n_layers;
		js->windows_incomplete = j->windows_incomplete;
		js->ranks = calloc(j->world, sizeof(*js->ranks));
		if (js->job == NULL || js->policy == NULL || js->ranks == NULL)
			return BELLOWS_ENOMEM;
		js->n_ranks = j->world;
		for (uint32_t r = 0; r < j->world; r++) {
			const job_rank *rk = &j->ranks[r];

			js->ranks[r] = (com_rank_status){
				.rank = r,
				.alive = rk->alive,
				.step = rk->step,
				.last_seen_ms = rk->last_seen_ms
				    ? now_ms - rk->last_seen_ms
				    : 0,
				.reports = rk->reports,
				.seq_in_force = rk->seq_in_force,
				.rejoins = rk->rejoins,
			};
		}
	}
	rc = ctl_events_copy(jobs->events, all ? NULL : req->job,
	    CTL_EVENTS_MAX, &out->events, &out->n_events);
	if (rc == 0 && jobs->cfg->security.enabled)
		jobs_filter_events(jobs, client, out);
	return rc;
}
