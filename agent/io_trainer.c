/* io_trainer - the training thread's side of the hand-off, see io.h.
 *
 * The trainer never touches ZeroMQ: it queues encoded reports for the
 * I/O thread (the oldest dropped and counted when the queue is full),
 * waits on io->cond (monotonic clock) only at an apply step whose
 * decision has not arrived, asking the thread for a snapshot while it
 * waits, and wakes the thread through its eventfd.
 */
#include "io_int.h"

#include "common/clock.h"

#include <bellows/error.h>

#include <stdlib.h>
#include <string.h>
#include <time.h>

const com_decision *
agent_io_in_force(const agent_io *io)
{
	return &io->table.in_force;
}

static struct timespec
io_timespec(uint64_t ns)
{
	struct timespec ts;

	ts.tv_sec = (time_t)(ns / 1000000000ull);
	ts.tv_nsec = (long)(ns % 1000000000ull);
	return ts;
}

void
agent_io_step_begin(agent_io *io, uint64_t step, uint32_t timeout_ms,
    uint32_t *ret_misses)
{
	uint32_t missed = 0;

	agent_io_lock(io);
	if (!io->begun) {
		/* The first step waits for the Welcome like for any due
		 * decision, so that every rank starts on the job's initial
		 * decision rather than on defaults. */
		uint64_t deadline = com_clock_ns() + timeout_ms * NS_PER_MS;

		io->begun = true;
		while (!io->welcomed) {
			struct timespec until;

			if (com_clock_ns() >= deadline) {
				missed++;
				io->misses++;
				break;
			}
			until = io_timespec(deadline);
			pthread_cond_timedwait(&io->cond, &io->mu, &until);
		}
	}
	if (agent_decisions_waiting(&io->table, step)) {
		uint64_t start = com_clock_ns();
		uint64_t deadline = start + timeout_ms * NS_PER_MS;
		uint64_t ask = start + IO_SNAPSHOT_AFTER_MS * NS_PER_MS;

		while (agent_decisions_waiting(&io->table, step)) {
			uint64_t now = com_clock_ns();
			struct timespec until;

			if (now >= deadline) {
				missed += agent_decisions_give_up(&io->table,
				    step);
				io->misses += missed;
				break;
			}
			/* The decision may have been published before our
			 * SUB was connected, or lost: ask for it directly. */
			if (now >= ask) {
				io->snapshot_asked = true;
				agent_io_wake(io);
				ask = now + IO_SNAPSHOT_EVERY_MS * NS_PER_MS;
			}
			until = io_timespec(ask < deadline ? ask : deadline);
			pthread_cond_timedwait(&io->cond, &io->mu, &until);
		}
	}
	agent_decisions_advance(&io->table, step);
	io->step = step;
	io->next_step = step + 1;
	agent_io_unlock(io);
	*ret_misses = missed;
}

/* Makes the decision of report r's window due, called with the lock
 * held: only a daemon that hears of the window owes a decision for it.
 * Returns 0 or agent_decisions_expect's error, for io_trainer_expect_said
 * once the lock is released. */
static int
io_trainer_expect(agent_io *io, const com_report *r)
{
	if (!io->welcomed)
		return 0;
	return agent_decisions_expect(&io->table, r->window,
	    r->last_step + 1 + io->apply_lag);
}

/* Counts a window of this rank's own report that was decided before the
 * report (called with the lock held): bellowsd closed it without this
 * rank and drops the report as stale, so no decision answers it. True
 * for the first such window, which is said. */
static bool
io_trainer_undecided(agent_io *io, const com_report *r)
{
	if (!io->welcomed || r->window >= io->table.answered)
		return false;
	return io->undecided++ == 0;
}

/* Logs a failure of io_trainer_expect, outside the lock. */
static void
io_trainer_expect_said(agent_io *io, const com_report *r, int rc)
{
	if (rc != 0)
		agent_io_log(io, BELLOWS_LOG_WARN,
		    "will not wait for the decision of window %llu: %s",
		    (unsigned long long)r->window, bellows_strerror(rc));
}

void
agent_io_submit_report(agent_io *io, com_report *r)
{
	com_msg m;
	io_report q;
	uint8_t *buf = NULL;
	size_t len = 0;
	bool first;
	int rc;

	agent_io_lock(io);
	r->timings.reports_dropped = io->reports_dropped;
	agent_io_unlock(io);

	/* Borrowed: encoded, never finalised. */
	com_msg_init(&m, COM_MSG_REPORT);
	m.u.report = *r;
	rc = com_wire_encode(&m, &buf, &len);

	agent_io_lock(io);
	io->windows++;
	if (rc != 0) {
		io->reports_dropped++;
		agent_io_unlock(io);
		agent_io_log(io, BELLOWS_LOG_ERROR,
		    "dropped the report of window %llu: %s",
		    (unsigned long long)r->window, bellows_strerror(rc));
		return;
	}
	agent_io_hold(io, len);
	q.buf = buf;
	q.len = len;
	q.window = r->window;
	if (agent_io_ring_push(&io->queue, &q) != 0) {
		io->held_bytes -= len;
		io->reports_dropped++;
		free(buf);
	}
	first = io_trainer_undecided(io, r);
	rc = io_trainer_expect(io, r);
	agent_io_unlock(io);
	io_trainer_expect_said(io, r, rc);
	if (first)
		agent_io_log(io, BELLOWS_LOG_WARN,
		    "window %llu was decided before this rank reported it: "
		    "bellowsd will not take its report, and no decision "
		    "answers it (did this launch join an ended run? give "
		    "each launch its own run_id); counted as a window "
		    "without decision",
		    (unsigned long long)r->window);
	agent_io_wake(io);
}

void
agent_io_skip_report(agent_io *io, const com_report *r)
{
	int rc;

	agent_io_lock(io);
	io->windows++;
	rc = io_trainer_expect(io, r);
	agent_io_unlock(io);
	io_trainer_expect_said(io, r, rc);
}

uint64_t
agent_io_undecided(agent_io *io)
{
	uint64_t n;

	agent_io_lock(io);
	n = io->undecided + io->misses;
	agent_io_unlock(io);
	return n;
}

void
agent_io_stats(agent_io *io, bellows_agent_stats *ret)
{
	agent_io_lock(io);
	ret->connected = io->welcomed;
	ret->step = io->next_step;
	ret->window = io->windows;
	ret->reports_sent = io->reports_sent;
	ret->reports_dropped = io->reports_dropped;
	ret->decisions = io->table.received;
	ret->decision_misses = io->misses;
	ret->snapshots = io->snapshots;
	ret->reconnects = io->welcomes > 0 ? io->welcomes - 1 : 0;
	ret->seq_in_force = io->table.in_force.seq;
	ret->last_error = io->last_error;
	memcpy(ret->last_error_text, io->last_error_text,
	    sizeof(ret->last_error_text));
	agent_io_unlock(io);
}
