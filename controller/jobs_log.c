/* jobs_log - each job's decision log, see jobs_int.h.
 *
 * A decision is logged when it is decided, recorded in the store, and
 * published (in seq order) only once the store has committed it; the
 * log also answers what a rank at a given step needs (Welcome,
 * Snapshot). The invariants it keeps are those of jobs.c: seqs are
 * consecutive, apply steps never decrease, and a decision never leaves
 * the log unpublished.
 */
#include "jobs_int.h"

#include "common/clock.h"
#include "store.h"

#include <bellows/error.h>

#include <stdlib.h>
#include <string.h>

com_decision *
ctl_jobs_log_at(job *j, uint32_t i)
{
	return &j->log[(j->log_head + i) % JOBS_LOG];
}

static uint64_t *
job_ticket_at(job *j, uint32_t i)
{
	return &j->ticket[(j->log_head + i) % JOBS_LOG];
}

const com_decision *
ctl_jobs_log_last(job *j)
{
	return j->log_n > 0 ? ctl_jobs_log_at(j, j->log_n - 1) : NULL;
}

uint64_t
ctl_jobs_windows_closed(job *j)
{
	uint64_t w = j->next_window;

	for (uint32_t i = 0; i < j->log_n; i++) {
		const com_decision *d = ctl_jobs_log_at(j, i);

		if (d->seq > j->published_seq && d->window > 0 &&
		    d->window - 1 < w)
			w = d->window - 1;
	}
	return ctl_jobs_late_closed(j, w);
}

void
ctl_jobs_closed_record(ctl_jobs *jobs, job *j)
{
	uint64_t w = ctl_jobs_windows_closed(j);

	if (j->closed_recorded == w + 1)
		return;
	ctl_store_run_closed(jobs->store, j->run_id, w);
	j->closed_recorded = w + 1;
}

/* Records the latency of a decision published now whose window closed at
 * `closed_ns` (0: not a window's decision, nothing to record). */
static void
jobs_latency_add(ctl_jobs *jobs, uint64_t closed_ns)
{
	uint64_t now = com_clock_ns();
	uint64_t ns = now > closed_ns ? now - closed_ns : 0;
	double ms = (double)ns / 1e6;
	uint32_t b = 0;

	if (closed_ns == 0)
		return;
	jobs->latency_ns[jobs->latency_n % JOBS_LATENCY_N] = ns;
	jobs->latency_n++;
	while (
	    b < CTL_JOBS_LATENCY_BUCKETS && ms > ctl_jobs_latency_bounds_ms[b])
		b++;
	jobs->latency_bucket[b]++;
	jobs->latency_sum_ms += ms;
}

static void jobs_publish_ready(ctl_jobs *jobs, job *j, uint64_t ticket);

void
ctl_jobs_log_push(ctl_jobs *jobs, job *j, com_decision *d, uint64_t ticket,
    uint64_t closed_ns)
{
	if (j->log_n == JOBS_LOG) {
		/* A decision never leaves the log unpublished. */
		if (ctl_jobs_log_at(j, 0)->seq > j->published_seq)
			jobs_publish_ready(jobs, j, *job_ticket_at(j, 0));
		com_decision_fini(ctl_jobs_log_at(j, 0));
		j->log_head = (j->log_head + 1) % JOBS_LOG;
		j->log_n--;
	}
	*ctl_jobs_log_at(j, j->log_n) = *d;
	*job_ticket_at(j, j->log_n) = ticket;
	j->closed_ns[(j->log_head + j->log_n) % JOBS_LOG] = closed_ns;
	j->log_n++;
	j->last_seq = d->seq;
	memset(d, 0, sizeof(*d));
}

int
ctl_jobs_log_in_force(job *j, uint64_t step)
{
	int found = -1;

	for (uint32_t i = 0; i < j->log_n; i++) {
		if (ctl_jobs_log_at(j, i)->apply_step <= step)
			found = (int)i;
	}
	return found;
}

int
ctl_jobs_log_tail(job *j, uint64_t step, com_decision **ret, uint32_t *ret_n)
{
	int from = ctl_jobs_log_in_force(j, step);
	uint32_t start, n;
	com_decision *out;

	start = from < 0 ? 0 : (uint32_t)from;
	n = j->log_n - start;
	if (n > JOBS_WELCOME_MAX) {
		start += n - JOBS_WELCOME_MAX;
		n = JOBS_WELCOME_MAX;
	}
	*ret = NULL;
	*ret_n = 0;
	if (n == 0)
		return 0;
	out = calloc(n, sizeof(*out));
	if (out == NULL)
		return BELLOWS_ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		if (com_decision_copy(&out[i], ctl_jobs_log_at(j, start + i)) !=
		    0) {
			for (uint32_t k = 0; k < i; k++)
				com_decision_fini(&out[k]);
			free(out);
			return BELLOWS_ENOMEM;
		}
	}
	*ret = out;
	*ret_n = n;
	return 0;
}

/* Sends the decisions a rank needs (as a Snapshot) to every rank of j
 * that resumed (its hello carried a decision) less than JOBS_FRESH_MS
 * ago: its SUB may not be connected yet (see ctl_jobs_set_sender), and
 * it trains on while it reconnects, so a decision due at once would pass
 * it by. A rank starting afresh waits for its first decisions, which the
 * Welcome carries; not sending to those keeps a job of many new ranks
 * from flooding the control socket. Out of memory: those ranks rely on
 * the PUB and their own snapshot requests, as without a sender. */
static void
jobs_send_fresh(ctl_jobs *jobs, job *j)
{
	uint64_t now = jobs->now_ms;

	if (jobs->send == NULL)
		return;
	for (uint32_t r = 0; r < j->world; r++) {
		const job_rank *rk = &j->ranks[r];
		com_msg m;

		if (!rk->joined || rk->left || !rk->alive || !rk->resuming ||
		    now - rk->welcomed_ms >= JOBS_FRESH_MS)
			continue;
		com_msg_init(&m, COM_MSG_SNAPSHOT);
		m.u.snapshot.job = com_strdup(j->name);
		if (m.u.snapshot.job != NULL &&
		    ctl_jobs_log_tail(j, rk->step, &m.u.snapshot.decisions,
			&m.u.snapshot.n_decisions) == 0)
			jobs->send(jobs->send_arg, rk->peer, rk->peer_len, &m);
		com_msg_fini(&m);
	}
}

/* Publishes, in seq order, the logged decisions not yet published whose
 * store ticket is <= `ticket` (committed), stopping at the first that is
 * not; ranks welcomed moments ago get them directly too. */
static void
jobs_publish_ready(ctl_jobs *jobs, job *j, uint64_t ticket)
{
	bool published = false;

	for (uint32_t i = 0; i < j->log_n; i++) {
		com_decision *d = ctl_jobs_log_at(j, i);
		com_msg m;

		if (d->seq <= j->published_seq)
			continue;
		if (*job_ticket_at(j, i) > ticket)
			return;
		com_msg_init(&m, COM_MSG_DECISION);
		/* Shallow view of the logged decision: the log keeps
		 * ownership. */
		m.u.decision = *d;
		jobs->counters.decisions++;
		j->published_seq = d->seq;
		jobs->publish(jobs->publish_arg, &m);
		jobs_latency_add(jobs,
		    j->closed_ns[(j->log_head + i) % JOBS_LOG]);
		published = true;
	}
	if (published)
		jobs_send_fresh(jobs, j);
}

void
ctl_jobs_on_durable(void *arg, uint64_t ticket)
{
	ctl_jobs *jobs = arg;

	for (uint32_t i = 0; i < jobs->n_jobs; i++) {
		jobs_publish_ready(jobs, jobs->jobs[i], ticket);
		/* UINT64_MAX: the store degraded and decisions stop
		 * waiting; late windows do not (jobs_late.c). */
		if (ticket != UINT64_MAX)
			ctl_jobs_late_durable(jobs->jobs[i], ticket);
	}
}

void
ctl_jobs_decide(ctl_jobs *jobs, job *j, com_decision *state,
    uint64_t apply_step, uint64_t window, ctl_store_source source,
    uint64_t closed_ns)
{
	const com_decision *prev = ctl_jobs_log_last(j);
	uint64_t ticket;

	if (prev != NULL && apply_step < prev->apply_step)
		apply_step = prev->apply_step;
	state->seq = j->last_seq + 1;
	state->apply_step = apply_step;
	state->window = window;
	/* What no policy reads is recomputed for every decision: a reload
	 * takes effect with the first decision of the new policies. */
	state->stats_skip = ctl_policy_set_stats_skip(j->policies);
	ticket = ctl_store_decision(jobs->store, j->run_id, state, prev, source,
	    com_clock_wall_ms());
	ctl_jobs_log_push(jobs, j, state, ticket, closed_ns);
	jobs_publish_ready(jobs, j,
	    ctl_store_waits(jobs->store) ? 0 : UINT64_MAX);
}

void
ctl_jobs_adopt(ctl_jobs *jobs, job *j, const com_decision *in_force)
{
	com_decision adopted;
	char *name = com_strdup(j->name);

	if (name == NULL || com_decision_copy(&adopted, in_force) != 0) {
		free(name);
		return;
	}
	free(adopted.job);
	adopted.job = name;
	ctl_store_decision(jobs->store, j->run_id, &adopted,
	    ctl_jobs_log_last(j), CTL_STORE_ADOPTED, com_clock_wall_ms());
	j->last_seq = adopted.seq - 1;
	/* The ranks have it already: there is nothing to publish. */
	j->published_seq = adopted.seq;
	ctl_jobs_log_push(jobs, j, &adopted, 0, 0);
}
