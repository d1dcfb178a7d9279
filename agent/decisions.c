/* decisions - the agent's table of received decisions, see decisions.h.
 *
 * Seqs below the one in force can never be in force again (the one in
 * force wins every later step too), so they count as known and are
 * dropped: the table only holds what may still apply. The windows waiting
 * for a decision are few (about apply_lag / window_steps + 1), so they live
 * in a small array scanned linearly.
 */
#include "decisions.h"

#include <stdlib.h>
#include <string.h>

#include <bellows/error.h>

int
agent_decisions_init(agent_decisions *t, const char *job, uint32_t n_layers)
{
	int rc;

	memset(t, 0, sizeof(*t));
	if ((rc = com_decision_init(&t->in_force, job, n_layers)) != 0)
		return rc;
	t->n_layers = n_layers;
	return 0;
}

void
agent_decisions_fini(agent_decisions *t)
{
	if (t->pending != NULL)
		for (uint32_t i = 0; i < t->n_pending; i++)
			com_decision_fini(&t->pending[i]);
	free(t->pending);
	free(t->due);
	com_decision_fini(&t->in_force);
	memset(t, 0, sizeof(*t));
}

/* Index of the first pending decision with seq >= `seq`. */
static uint32_t
decisions_lower_bound(const agent_decisions *t, uint64_t seq)
{
	uint32_t lo = 0;
	uint32_t hi = t->n_pending;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (t->pending[mid].seq < seq)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Moves `contiguous` up over every seq that is known or superseded. */
static void
decisions_settle(agent_decisions *t)
{
	if (t->contiguous < t->in_force.seq)
		t->contiguous = t->in_force.seq;
	for (uint32_t i = 0; i < t->n_pending; i++) {
		uint64_t seq = t->pending[i].seq;

		if (seq <= t->contiguous)
			continue;
		if (seq != t->contiguous + 1)
			break;
		t->contiguous = seq;
	}
}

/* Drops the windows that have their decision. */
static void
decisions_prune_due(agent_decisions *t)
{
	uint32_t kept = 0;

	for (uint32_t i = 0; i < t->n_due; i++)
		if (t->due[i].window >= t->answered)
			t->due[kept++] = t->due[i];
	t->n_due = kept;
}

static bool
decisions_valid(const agent_decisions *t, const com_decision *d)
{
	if (d->seq == 0 || d->n_layers != t->n_layers)
		return false;
	return d->n_layers == 0 || (d->level != NULL && d->error_bound != NULL);
}

int
agent_decisions_add(agent_decisions *t, com_decision *d)
{
	uint32_t pos;

	if (!decisions_valid(t, d))
		return BELLOWS_EPROTO;
	/* An old or repeated decision still proves the window answered. */
	if (d->window > t->answered)
		t->answered = d->window;
	if (d->seq <= t->in_force.seq)
		return 0;
	pos = decisions_lower_bound(t, d->seq);
	if (pos < t->n_pending && t->pending[pos].seq == d->seq)
		return 0;
	if (t->n_pending == AGENT_DECISIONS_MAX_PENDING)
		return BELLOWS_ELIMIT;
	if (t->n_pending == t->cap_pending) {
		uint32_t cap = t->cap_pending ? t->cap_pending * 2 : 8;
		com_decision *p;

		if (cap > AGENT_DECISIONS_MAX_PENDING)
			cap = AGENT_DECISIONS_MAX_PENDING;
		if ((p = realloc(t->pending, cap * sizeof(*p))) == NULL)
			return BELLOWS_ENOMEM;
		t->pending = p;
		t->cap_pending = cap;
	}
	memmove(&t->pending[pos + 1], &t->pending[pos],
	    (t->n_pending - pos) * sizeof(*t->pending));
	t->pending[pos] = *d;
	memset(d, 0, sizeof(*d));
	if (t->pending[pos].lr_scale == 0.0)
		t->pending[pos].lr_scale = 1.0;
	t->n_pending++;
	t->received++;
	if (t->pending[pos].seq > t->last_seq)
		t->last_seq = t->pending[pos].seq;
	decisions_settle(t);
	return 1;
}

uint32_t
agent_decisions_add_set(agent_decisions *t, com_decision *ds, uint32_t n)
{
	uint32_t added = 0;
	uint64_t top = 0;
	bool failed = false;

	for (uint32_t i = 0; i < n; i++) {
		uint64_t seq = ds[i].seq;
		int rc = agent_decisions_add(t, &ds[i]);

		if (rc == 1)
			added++;
		if (rc >= 0 && seq > top)
			top = seq;
		else if (rc == BELLOWS_ENOMEM || rc == BELLOWS_ELIMIT)
			failed = true;
	}
	/* The daemon listed everything that may still apply: older seqs it
	 * left out are superseded. A local failure leaves the gap open so
	 * that the next snapshot tries again. */
	if (!failed && top > t->contiguous)
		t->contiguous = top;
	if (top > t->last_seq)
		t->last_seq = top;
	decisions_settle(t);
	return added;
}

bool
agent_decisions_gap(const agent_decisions *t)
{
	return t->contiguous < t->last_seq;
}

int
agent_decisions_expect(agent_decisions *t, uint64_t window, uint64_t step)
{
	decisions_prune_due(t);
	if (window < t->answered)
		return 0;
	if (t->n_due == t->cap_due) {
		uint32_t cap = t->cap_due ? t->cap_due * 2 : 8;
		agent_due *p;

		if (cap < t->cap_due ||
		    (p = realloc(t->due, cap * sizeof(*p))) == NULL)
			return BELLOWS_ENOMEM;
		t->due = p;
		t->cap_due = cap;
	}
	t->due[t->n_due].window = window;
	t->due[t->n_due].step = step;
	t->n_due++;
	return 0;
}

bool
agent_decisions_waiting(const agent_decisions *t, uint64_t step)
{
	for (uint32_t i = 0; i < t->n_due; i++)
		if (t->due[i].window >= t->answered && t->due[i].step <= step)
			return true;
	return false;
}

uint32_t
agent_decisions_give_up(agent_decisions *t, uint64_t step)
{
	uint32_t kept = 0;
	uint32_t missed = 0;

	decisions_prune_due(t);
	for (uint32_t i = 0; i < t->n_due; i++) {
		if (t->due[i].step <= step)
			missed++;
		else
			t->due[kept++] = t->due[i];
	}
	t->n_due = kept;
	return missed;
}

uint32_t
agent_decisions_forget_due(agent_decisions *t)
{
	uint32_t n;

	decisions_prune_due(t);
	n = t->n_due;
	t->n_due = 0;
	return n;
}

bool
agent_decisions_advance(agent_decisions *t, uint64_t step)
{
	uint32_t i = t->n_pending;
	uint32_t chosen;

	decisions_prune_due(t);
	while (i > 0 && t->pending[i - 1].apply_step > step)
		i--;
	if (i == 0)
		return false;
	chosen = i - 1;
	com_decision_fini(&t->in_force);
	t->in_force = t->pending[chosen];
	for (uint32_t j = 0; j < chosen; j++)
		com_decision_fini(&t->pending[j]);
	t->n_pending -= chosen + 1;
	memmove(&t->pending[0], &t->pending[chosen + 1],
	    t->n_pending * sizeof(*t->pending));
	decisions_settle(t);
	return true;
}
