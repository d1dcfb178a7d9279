/* decisions - the agent's table of the decisions it has received.
 *
 * bellowsd publishes one decision per window, each naming the step from
 * which it is in force. The table keeps the decision in force and the ones
 * received but not in force yet, ordered by seq; it answers which decision
 * is in force at a step, which windows still wait for their decision (and
 * from which step that wait blocks the trainer), and whether a seq is
 * missing, which the agent repairs with a snapshot request.
 *
 * Not thread-safe: the I/O module guards it with its mutex. Only
 * agent_decisions_advance() changes the decision in force, so the training
 * thread that calls it can read `in_force` without the lock in between.
 */
#ifndef AGENT_DECISIONS_H
#define AGENT_DECISIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/msg.h"

/* Most decisions held that are not in force yet; more means a daemon that
 * runs far ahead of the trainer, and the excess is refused. */
#define AGENT_DECISIONS_MAX_PENDING 1024

/* A window reported to bellowsd whose decision the trainer waits for. */
typedef struct agent_due {
	uint64_t window; /* window index, from 0 */
	uint64_t step;   /* first step that must not begin without it */
} agent_due;

typedef struct agent_decisions {
	uint32_t n_layers;     /* entries every decision must have */
	com_decision in_force; /* in force at the current step; seq 0: none */
	com_decision *pending; /* received, not in force, ascending seq */
	uint32_t n_pending;    /* entries used in pending */
	uint32_t cap_pending;  /* entries allocated in pending */
	uint64_t last_seq;     /* highest seq received */
	uint64_t contiguous;   /* every seq up to this one is known */
	uint64_t answered;     /* highest decision window (+1) received */
	uint64_t received;     /* unique decisions received */
	agent_due *due;        /* windows waiting for a decision, by window */
	uint32_t n_due;        /* entries used in due */
	uint32_t cap_due;      /* entries allocated in due */
} agent_decisions;

/* Prepares *t for a job of `n_layers` layers with the default decision in
 * force (seq 0, levels and bounds 0, lr_scale 1, job copied). Returns 0 or
 * BELLOWS_ENOMEM (then *t needs no fini). */
int agent_decisions_init(agent_decisions *t, const char *job,
    uint32_t n_layers);

/* Frees everything *t owns. Safe on a zeroed or finalised table. */
void agent_decisions_fini(agent_decisions *t);

/* Offers a received decision. Returns 1 when it was added: *d has been
 * moved into the table and zeroed. Returns 0 when it was ignored because
 * its seq is known or older than the decision in force (its window still
 * counts as answered), BELLOWS_EPROTO when its seq is 0 or it does not
 * have n_layers layers, BELLOWS_ELIMIT when too many are pending,
 * BELLOWS_ENOMEM; in all these cases the caller still owns *d. An LR
 * scale of 0 is stored as 1, as the wire defines. */
int agent_decisions_add(agent_decisions *t, com_decision *d);

/* Offers the decisions of a Welcome or Snapshot (in force and pending, as
 * the daemon knows them), as agent_decisions_add() would one by one, and
 * then treats every seq up to the highest listed as known: older ones are
 * superseded. Entries added are zeroed in ds, the rest stay the caller's.
 * Returns the number added; invalid entries are skipped. */
uint32_t agent_decisions_add_set(agent_decisions *t, com_decision *ds,
    uint32_t n);

/* True while a seq between the known ones and the highest received is
 * missing, i.e. a snapshot is needed. */
bool agent_decisions_gap(const agent_decisions *t);

/* Records that window `window` was reported to the daemon and its decision
 * is due at `step` (last step of the window + 1 + apply_lag). Ignored if
 * the window is answered already. Returns 0 or BELLOWS_ENOMEM. */
int agent_decisions_expect(agent_decisions *t, uint64_t window, uint64_t step);

/* True when step `step` must wait: some window expected at or before it
 * has no decision yet. */
bool agent_decisions_waiting(const agent_decisions *t, uint64_t step);

/* Stops waiting for every unanswered window due at or before `step` and
 * returns how many there were: each is a missed decision. */
uint32_t agent_decisions_give_up(agent_decisions *t, uint64_t step);

/* Forgets every window still waiting (the daemon that was to answer them
 * is gone); returns how many. */
uint32_t agent_decisions_forget_due(agent_decisions *t);

/* Makes the decision in force at `step` current: the one with the highest
 * seq among those with apply_step <= step. Decisions it supersedes are
 * freed. Never allocates. Returns true when the decision in force changed;
 * the previous in_force contents are freed then. */
bool agent_decisions_advance(agent_decisions *t, uint64_t step);

#endif /* AGENT_DECISIONS_H */
