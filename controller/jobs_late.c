/* jobs_late - windows recorded late, after an outage of bellowsd, see
 * jobs_int.h.
 *
 * A daemon that restarts knows from the store the lowest window its run
 * has not closed; its ranks, which trained on while it was down, are
 * further on. When the first Hello moves the job to where they are
 * (jobs.c), the windows in between are late: the agents kept their
 * reports and send them again, oldest first, as soon as they are
 * welcomed. So are the windows below the one it recovers at that the
 * run lacks, from the mark the agents were last told on
 * (runs.windows_closed): a daemon killed while windows were late may
 * have recorded newer ones above them (jobs_recover.c). The late windows
 * are a few ascending spans; the windows between two are recorded. Those
 * reports are aggregated here, apart from the live windows, and each late
 * window is closed in index order and recorded in the history marked late, with
 * its ranks' timings; no policy is run on it and no decision answers it (the
 * ranks are past its apply step). A late window closes once every live rank has
 * reported it or a later window (an agent sends what it kept in window order,
 * so it has no more of it to send), or once every live rank has joined again
 * and no late report came for window_timeout_ms; a window no rank sent is
 * skipped.
 *
 * No decision answers a late window, so nothing published tells the
 * agents it is in: windows_closed (ctl_jobs_windows_closed) stays at the
 * lowest late window whose rows the store has not committed yet, as it
 * does for a window whose decision waits for its commit, and also while
 * the store is degraded (a decision is then published at once, as the
 * ranks wait for it; nobody waits for a late window). The batches
 * awaited are JOBS_LATE_WAITS at most; past that the newest entry takes
 * the later ticket, which only holds its windows a little longer.
 *
 * What a job may hold of late windows at once is bounded by
 * JOBS_LATE_BYTES: the slots cover the lowest late windows not closed,
 * and a report beyond them is refused (ESTATE, logged once per range).
 */
#include "jobs_int.h"

#include "common/clock.h"
#include "common/wire.h"
#include "common/errbuf.h"
#include "policyhost/log.h"
#include "store.h"

#include <bellows/error.h>

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

void
ctl_jobs_late_free(job *j)
{
	for (uint32_t i = 0; i < j->late_cap; i++)
		ctl_window_destroy(&j->late[i]);
	free(j->late);
	free(j->late_spans);
	j->late = NULL;
	j->late_spans = NULL;
	j->late_cap = j->late_n_spans = j->late_span_at = 0;
	j->late_next = j->late_end = 0;
}

/* Gives j at least `cap` slots, each window held moved to its slot of
 * the larger ring (they all lie within late_next + the old cap, so no
 * two meet). Returns 0 or BELLOWS_ENOMEM, j untouched. */
static int
late_slots(job *j, uint64_t cap)
{
	ctl_window **ring;

	if (cap <= j->late_cap)
		return 0;
	if ((ring = calloc((size_t)cap, sizeof(*ring))) == NULL)
		return BELLOWS_ENOMEM;
	for (uint32_t i = 0; i < j->late_cap; i++) {
		if (j->late[i] != NULL)
			ring[ctl_window_index(j->late[i]) % cap] = j->late[i];
	}
	free(j->late);
	j->late = ring;
	j->late_cap = (uint32_t)cap;
	return 0;
}

void
ctl_jobs_late_begin(ctl_jobs *jobs, job *j, uint64_t from, uint64_t to)
{
	bool first = j->late_n_spans == 0;
	uint64_t base = first ? from : j->late_next;
	ctl_store_span *spans;
	com_limits lim;
	size_t one;
	uint64_t cap;

	if (to <= from || (!first && from < j->late_end))
		return;
	com_limits_default(&lim);
	one = ctl_window_bytes_max(j->world, j->n_layers, lim.max_comm);
	cap = JOBS_LATE_BYTES / (one > 0 ? one : 1);
	if (cap < 1)
		cap = 1;
	if (cap > to - base)
		cap = to - base;
	spans = realloc(j->late_spans,
	    (j->late_n_spans + 1) * sizeof(*j->late_spans));
	if (spans != NULL)
		j->late_spans = spans;
	if (spans == NULL || late_slots(j, cap) != 0) {
		ctl_log(CTL_LOG_ERROR, "jobs",
		    "job '%s': no memory to record windows %" PRIu64
		    "..%" PRIu64 " late",
		    j->name, from, to - 1);
		return;
	}
	j->late_spans[j->late_n_spans++] = (ctl_store_span){ .from = from,
		.to = to };
	if (first) {
		j->late_next = from;
		j->late_span_at = 0;
		j->late_refused = false;
		j->late_heard_ms = jobs->now_ms;
	}
	j->late_end = to;
	ctl_log(CTL_LOG_INFO, "jobs",
	    "job '%s': windows %" PRIu64 "..%" PRIu64
	    " were not closed before the restart: recording them late, as "
	    "the ranks send their reports again",
	    j->name, from, to - 1);
	ctl_events_add(jobs->events, CTL_EVENT_JOB_RECOVERED, j->name,
	    "windows %" PRIu64 "..%" PRIu64 " to be recorded late", from,
	    to - 1);
}

/* The span of j's late windows that holds `window`, NULL when none does
 * (spans are few: one per restart that found windows missing). */
static const ctl_store_span *
late_span_of(const job *j, uint64_t window)
{
	uint32_t lo = 0, hi = j->late_n_spans;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (window >= j->late_spans[mid].to)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < j->late_n_spans && window >= j->late_spans[lo].from
	    ? &j->late_spans[lo]
	    : NULL;
}

bool
ctl_jobs_late_has(const job *j, uint64_t window)
{
	return j->late_n_spans > 0 && window >= j->late_next &&
	    window < j->late_end && late_span_of(j, window) != NULL;
}

bool
ctl_jobs_late_recorded(const job *j, uint64_t window)
{
	return j->late_n_spans > 0 && window >= j->late_spans[0].from &&
	    window < j->late_end && late_span_of(j, window) == NULL;
}

uint64_t
ctl_jobs_late_closed(const job *j, uint64_t closed)
{
	if (j->late_cap > 0 && j->late_next < closed)
		closed = j->late_next;
	if (j->late_waits > 0 && j->late_wait_window[0] < closed)
		closed = j->late_wait_window[0];
	return closed;
}

/* Late window w's rows are in the store's batch `ticket`: w counts as
 * closed once that batch is committed. Windows are recorded in order
 * and tickets never decrease, so the entries stay sorted by both. */
static void
late_wait(job *j, uint64_t w, uint64_t ticket)
{
	uint32_t n = j->late_waits;

	if (n > 0 && j->late_wait_ticket[n - 1] >= ticket)
		return; /* the same batch as the window before */
	if (n == JOBS_LATE_WAITS) {
		j->late_wait_ticket[n - 1] = ticket;
		return;
	}
	j->late_wait_window[n] = w;
	j->late_wait_ticket[n] = ticket;
	j->late_waits++;
}

void
ctl_jobs_late_durable(job *j, uint64_t ticket)
{
	uint32_t done = 0;

	while (done < j->late_waits && j->late_wait_ticket[done] <= ticket)
		done++;
	if (done == 0)
		return;
	j->late_waits -= done;
	memmove(j->late_wait_window, j->late_wait_window + done,
	    j->late_waits * sizeof(j->late_wait_window[0]));
	memmove(j->late_wait_ticket, j->late_wait_ticket + done,
	    j->late_waits * sizeof(j->late_wait_ticket[0]));
}

int
ctl_jobs_late_add(job *j, const com_report *rep, uint64_t now_ms, char *why,
    size_t why_len)
{
	ctl_window **slot;
	int r;

	j->late_heard_ms = now_ms;
	if (rep->window - j->late_next >= j->late_cap) {
		if (!j->late_refused)
			ctl_log(CTL_LOG_WARN, "jobs",
			    "job '%s': late report of window %" PRIu64
			    " refused: %u late windows from %" PRIu64
			    " are held at most",
			    j->name, rep->window, j->late_cap, j->late_next);
		j->late_refused = true;
		com_errf(why, why_len,
		    "late report of window %" PRIu64
		    " is too far ahead of late window %" PRIu64,
		    rep->window, j->late_next);
		return BELLOWS_ESTATE;
	}
	slot = &j->late[rep->window % j->late_cap];
	if (*slot == NULL &&
	    ctl_window_new(rep->window, j->world, j->n_layers, now_ms, slot) !=
		0) {
		com_errf(why, why_len, "cannot open late window %" PRIu64,
		    rep->window);
		return BELLOWS_ENOMEM;
	}
	r = ctl_window_add(*slot, rep);
	if (r == BELLOWS_ENOMEM)
		com_errf(why, why_len,
		    "no memory for the late report of window %" PRIu64,
		    rep->window);
	return r;
}

/* True when rank r has sent all it will of window w: it has rejoined and
 * a report of a later window was taken from it (an agent sends what it
 * kept in window order, before anything new). */
static bool
late_rank_past(const job_rank *rk, uint64_t w)
{
	return rk->joined && rk->taken_top > w + 1;
}

/* True when late window w (win, NULL when no rank sent it) may close or
 * be skipped now: each live rank reported it (*complete) or is past it;
 * or every live rank has joined this daemon again and no late report came
 * for window_timeout_ms (a rank covered by another's report sends none of
 * its own, and what no rank kept never comes). */
static bool
late_closable(ctl_jobs *jobs, job *j, uint64_t w, ctl_window *win,
    uint64_t now_ms, bool *complete)
{
	bool all = true, past = true, joined = true;

	for (uint32_t r = 0; r < j->world; r++) {
		const job_rank *rk = &j->ranks[r];

		if (!rk->alive || (win != NULL && ctl_window_has(win, r)))
			continue;
		all = false;
		past = past && late_rank_past(rk, w);
		joined = joined && rk->joined;
	}
	*complete = all;
	if (past)
		return true;
	return joined &&
	    now_ms - j->late_heard_ms >= jobs->cfg->window_timeout_ms;
}

/* Records late window `win` in the history, marked late, with the
 * decision in force at its first step (the newest of the log when that
 * is older than the log). */
static void
late_record(ctl_jobs *jobs, job *j, ctl_window *win, bool complete)
{
	const com_decision *in_force = ctl_jobs_log_last(j);
	bellows_window view;
	uint32_t alive = 0;
	uint64_t ticket;
	int at;

	if (in_force == NULL)
		return;
	ctl_window_view(win, j->name, j->world, j->layers, in_force, &view);
	at = ctl_jobs_log_in_force(j, view.first_step);
	if (at >= 0) {
		in_force = ctl_jobs_log_at(j, (uint32_t)at);
		ctl_window_view(win, j->name, j->world, j->layers, in_force,
		    &view);
	}
	for (uint32_t r = 0; r < j->world; r++)
		alive += j->ranks[r].alive;
	ctl_jobs_closed_record(jobs, j);
	ticket = ctl_store_window(jobs->store, j->run_id, &view, alive,
	    (complete ? CTL_STORE_CLOSED_COMPLETE : 0) | CTL_STORE_CLOSED_LATE,
	    in_force, com_clock_wall_ms());
	/* The agents keep its reports until its rows are committed, also
	 * while the store is degraded: no decision answers a late window,
	 * so unlike a live one nobody waits on it, and the agents' copy is
	 * the only one outside this process until the store writes again
	 * (they hold it within keep_reports_mb). */
	if (ticket != 0)
		late_wait(j, view.window, ticket);
	j->windows_late++;
	jobs->counters.windows_late++;
	if (!complete)
		ctl_log(CTL_LOG_WARN, "jobs",
		    "job '%s' late window %" PRIu64
		    " recorded with %u of %u ranks",
		    j->name, view.window, view.ranks_reported, alive);
}

void
ctl_jobs_late_close(ctl_jobs *jobs, job *j, uint64_t now_ms)
{
	while (j->late_span_at < j->late_n_spans) {
		ctl_window **slot = &j->late[j->late_next % j->late_cap];
		bool complete;

		if (j->late_next >= j->late_spans[j->late_span_at].to) {
			/* The span is done; the windows up to the next one
			 * are recorded already. */
			if (++j->late_span_at < j->late_n_spans)
				j->late_next = j->late_spans[j->late_span_at]
						   .from;
			continue;
		}
		if (!late_closable(jobs, j, j->late_next, *slot, now_ms,
			&complete))
			return;
		if (*slot != NULL)
			late_record(jobs, j, *slot, complete);
		ctl_window_destroy(slot);
		j->late_next++;
	}
	if (j->late_cap > 0) {
		/* Every span is done. */
		ctl_log(CTL_LOG_INFO, "jobs",
		    "job '%s': late windows done, %" PRIu64
		    " recorded late in all",
		    j->name, j->windows_late);
		ctl_jobs_late_free(j);
	}
}
