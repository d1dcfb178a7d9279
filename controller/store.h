/* store - bellowsd's history: every run, window, decision and event in one
 * SQLite file, written by one thread.
 *
 * The event loop never waits for SQLite. What it records goes into a
 * batch in memory (the put functions below never block and never fail);
 * a batch is handed, by pointer, over an inproc PAIR socket to the
 * writer thread, which writes it in one transaction and acknowledges the
 * commit over the same socket. A decision is published only after the
 * batch holding it is acknowledged: the store calls the durable callback
 * with the batch's ticket, and the job table publishes what that covers.
 *
 * Metric rows (windows, window_info, timings, comm_samples,
 * policy_metrics) may be downsampled when the
 * writer falls behind; decisions, events, runs and their layer tables are
 * never dropped. When SQLite fails (disk full, locked, read-only,
 * corrupt) or stops committing for STORE_ACK_TIMEOUT_MS, the store is
 * degraded: the durable callback releases every decision at once, the
 * loop publishes without waiting, decisions and events queue in memory,
 * metric rows are dropped and counted, and the writer retries with
 * backoff until a commit succeeds. It never exits the daemon.
 *
 * The store (store*.c) is the only part of bellowsd that writes the
 * file; it reads its windows back through the history library
 * (history/hist_read.h), the reader `bellows replay --db` uses too. The
 * schema, its versions and the store's files are described in
 * docs/history.md.
 *
 * Threading: every function here is called from the event loop's thread
 * (ctl_store_recover before ctl_store_start). The writer and checkpoint
 * threads are internal.
 */
#ifndef CTL_STORE_H
#define CTL_STORE_H

#include "policyhost/config.h"
#include "events.h"
#include "loop.h"
#include "common/msg.h"

#include <bellows/policy.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CTL_STORE_SCHEMA_VERSION 9  /* PRAGMA user_version written */
#define CTL_STORE_HASH_LEN       17 /* hex FNV-1a 64 of a file, with NUL */

/* Event kinds recorded by the store and around it (see events.h). */
#define CTL_EVENT_STORE_DEGRADED  "store_degraded"
#define CTL_EVENT_STORE_RECOVERED "store_recovered"
#define CTL_EVENT_METRICS_DROPPED "metrics_dropped"
#define CTL_EVENT_EVENTS_LOST     "events_lost"
#define CTL_EVENT_JOB_RECOVERED   "job_recovered"
#define CTL_EVENT_DAEMON_STARTED  "daemon_started"
#define CTL_EVENT_RUN_STARTED     "run_started"
#define CTL_EVENT_RUN_RESUMING    "run_resuming"
#define CTL_EVENT_RUN_RESUMED     "run_resumed"
#define CTL_EVENT_RUN_REFUSED     "run_refused"

typedef struct ctl_store ctl_store;

/* Why a decision was made, recorded in decisions.source. */
typedef enum ctl_store_source {
	CTL_STORE_INITIAL = 0, /* the policies' state at job creation */
	CTL_STORE_WINDOW = 1,  /* closing a window */
	CTL_STORE_REPAIR = 2,  /* re-issued after a rank diverged */
	CTL_STORE_ADOPTED = 3, /* taken over from a rank's Hello */
	CTL_STORE_RESUMED = 4, /* re-issued for a resume from a checkpoint */
} ctl_store_source;

/* What happened to a rank, recorded in rank_events.kind. */
typedef enum ctl_store_rank_kind {
	CTL_STORE_RANK_JOINED = 0,   /* first Hello */
	CTL_STORE_RANK_REJOINED = 1, /* a later Hello */
	CTL_STORE_RANK_LOST = 2,     /* silent for rank_timeout_ms */
	CTL_STORE_RANK_LEFT = 3,     /* Bye */
} ctl_store_rank_kind;

/* Called on the loop's thread when every decision put with a ticket <=
 * `ticket` is committed, or with UINT64_MAX when the store degraded and
 * nothing should wait any more. */
typedef void ctl_store_durable_fn(void *arg, uint64_t ticket);

/* Opens (creating or migrating) the database at `path` on the caller's
 * thread, ready for ctl_store_recover and then ctl_store_start. SQLite
 * problems do not fail the call: the store then starts degraded (logged,
 * with the reason in ctl_store_status) and its writer retries. `conf` is
 * copied; `events` (borrowed, outlives the store) receives the store's
 * own events; `instance` is recorded with each run. Returns 0,
 * BELLOWS_ENOMEM, or BELLOWS_ESYS if the inproc sockets cannot be made. */
int ctl_store_open(const char *path, void *zctx, const ctl_store_conf *conf,
    uint64_t instance, ctl_events *events, ctl_store **ret_store);

/* Starts the writer thread. Returns 0 or BELLOWS_ESYS. */
int ctl_store_start(ctl_store *s);

/* Registers the store's end of its socket with the loop (acks and state
 * changes are read there). Returns ctl_loop_add_socket's result. */
int ctl_store_attach(ctl_store *s, ctl_loop *loop);

/* Hands the open batch to the writer, waits up to `drain_ms` for
 * everything queued to be written, stops the threads and frees the
 * store. Rows still unwritten then are lost (logged with their count).
 * NULL-safe; sets *s to NULL. */
void ctl_store_close(ctl_store **s, uint32_t drain_ms);

/* Sets the function told about commits (see ctl_store_durable_fn). */
void ctl_store_set_durable_fn(ctl_store *s, ctl_store_durable_fn *fn,
    void *arg);

/* Applies new settings (a reload): batching and queue limits at once,
 * retention from the writer's next pass. NULL-safe. */
void ctl_store_set_conf(ctl_store *s, const ctl_store_conf *conf);

/* True when decisions must wait for their commit before they are
 * published: the store is attached and not degraded. False for NULL. */
bool ctl_store_waits(const ctl_store *s);

/*
 * Recording. Each put copies what it needs and never fails (the daemon
 * aborts on out-of-memory); every one is a no-op on a NULL store. `run`
 * is an id from ctl_store_run_begin.
 */

/* Records a new run of `job`, launched as `run_key` (NULL or "":
 * unknown), with its layer table, under the
 * configuration `cfg` (its text goes into policy_files once). Returns the
 * run id (never 0; also without a working database, so that ids stay
 * unique when it comes back). 0 for a NULL store. */
int64_t ctl_store_run_begin(ctl_store *s, const char *job, const char *run_key,
    uint32_t world, const com_layer_info *layers, uint32_t n_layers,
    const ctl_config *cfg, uint64_t first_seq, uint64_t wall_ms);

/* Marks a run ended (ended_wall_ms), or live again (a finished job taken
 * up again by a new Hello) with wall_ms 0. */
void ctl_store_run_end(ctl_store *s, int64_t run, uint64_t wall_ms);

/* Records a rank joining, rejoining, being lost or leaving. */
void ctl_store_rank_event(ctl_store *s, int64_t run, uint32_t rank,
    ctl_store_rank_kind kind, uint64_t step, uint64_t incarnation,
    uint64_t wall_ms);

/* Records one rank's timings of `window` (a metric row: downsampled
 * under pressure; once kept, committed no later than the window's own
 * rows, ctl_store_window, so no later than the decision answering it). */
void ctl_store_timing(ctl_store *s, int64_t run, uint64_t window, uint32_t rank,
    const com_timings *t);

/* How a window closed (ctl_store_window's `closed`, or'ed). */
#define CTL_STORE_CLOSED_COMPLETE 1u /* every expected rank reported */
#define CTL_STORE_CLOSED_LATE                                                  \
	2u /* recorded late: not closed before a                               \
	    * restart of bellowsd, its reports                                 \
	    * sent again after; no decision                                    \
	    * answers it (window_info.late) */

/* Records a closed window as the policies saw it, with `in_force` the
 * knob state in force during it (its apply step and calibration too):
 * window_info and one windows row per layer, firm rows that recovery
 * replays into the policies (never dropped; committed no later than a
 * decision recorded after them), and one comm_samples row per collective
 * in w->comm (metric rows, downsampled under pressure). Returns the
 * ticket of the batch holding the firm rows: the durable callback
 * reports it (or a later one) once they are committed (0 for a NULL
 * store or run 0: nothing to wait for). */
uint64_t ctl_store_window(ctl_store *s, int64_t run, const bellows_window *w,
    uint32_t ranks_expected, uint32_t closed, const com_decision *in_force,
    uint64_t wall_ms);

/* Records what the policies computed on `window` (policy_metrics rows:
 * metric rows, downsampled under pressure like the window's). The
 * strings are copied. */
void ctl_store_policy_metrics(ctl_store *s, int64_t run, uint64_t window,
    const com_metric *metrics, uint32_t n);

/* Records decision `d` of a run, with what changed since `prev` (NULL:
 * the run's first decision), and hands the batch to the writer at once.
 * Returns the ticket the durable callback will report when it is
 * committed (0 for a NULL store). */
uint64_t ctl_store_decision(ctl_store *s, int64_t run, const com_decision *d,
    const com_decision *prev, ctl_store_source source, uint64_t wall_ms);

/* Records that a restarted daemon rebuilt `run` from the database. */
void ctl_store_run_recovered(ctl_store *s, int64_t run);

/* Records the lowest window whose reports the agents of `run` may still
 * keep (runs.windows_closed): a lower bound of the windows_closed they
 * were told, in the same transaction as the rows handed before it. A
 * restarted daemon takes every window from there on that the run does
 * not hold as a late one (ctl_store_run.missing). */
void ctl_store_run_closed(ctl_store *s, int64_t run, uint64_t windows_closed);

/* Records the configuration now in force (policy_files, once per text);
 * later events of kind reload_ok and daemon_started name its hash. */
void ctl_store_config(ctl_store *s, const ctl_config *cfg);

/* Copies the events recorded in `ev` since the last call into the
 * events table. */
void ctl_store_sync_events(ctl_store *s, const ctl_events *ev);

/* Hands the open batch to the writer if it holds anything. Called once
 * per loop turn; puts also flush when a batch reaches batch_rows.
 * Returns the ticket of the last batch handed over (0 for NULL). */
uint64_t ctl_store_flush(ctl_store *s);

/* Waits, on the caller's thread and outside any event loop (tests,
 * benchmarks), until the batch with `ticket` is committed, handling the
 * writer's messages as the loop would. Returns 0, BELLOWS_EIO when the
 * store is degraded, or BELLOWS_ETIMEDOUT after timeout_ms. */
int ctl_store_wait(ctl_store *s, uint64_t ticket, uint32_t timeout_ms);

/* Periodic duty: a decision that has waited STORE_ACK_TIMEOUT_MS for its
 * commit degrades the store (published without waiting). */
void ctl_store_tick(ctl_store *s, uint64_t now_ms);

/* Fills the store fields of a STATUS reply (store_degraded,
 * store_pending, store_dropped, store_error). Returns 0 or
 * BELLOWS_ENOMEM. A NULL store (no history, --no-db) is not degraded
 * and says so in store_error. */
int ctl_store_status(const ctl_store *s, com_status_reply *st);

/* The history file for STATUS's store_path: made absolute against
 * bellowsd's working directory when it was opened; "" for a NULL store
 * (--no-db) or when that directory could not be read. Valid until
 * ctl_store_close. Loop thread. */
const char *ctl_store_path(const ctl_store *s);

/*
 * Recovery: reading back the live runs, before ctl_store_start.
 */

/* A run as the database holds it (for recovery, a live one:
 * ended_wall_ms NULL); everything borrowed for the duration of the
 * callback. */
/* Windows [from, to). */
typedef struct ctl_store_span {
	uint64_t from; /* first window */
	uint64_t to;   /* after the last */
} ctl_store_span;

typedef struct ctl_store_run {
	int64_t id;                           /* runs.id */
	const char *job;                      /* job name */
	uint32_t world;                       /* ranks */
	uint32_t n_layers;                    /* entries in layers */
	const com_layer_info *layers;         /* the layer table */
	uint32_t n_decisions;                 /* entries in decisions */
	const com_decision *decisions;        /* the newest, ascending seq */
	uint64_t next_window;                 /* lowest window not closed */
	uint64_t max_step;                    /* highest step recorded */
	uint64_t last_seq;                    /* highest seq of the run, also
					       * of decisions not read */
	const char *run_key;                  /* launch identity, "" =
					       * unknown */
	const bool *alive;                    /* world flags: the rank's last
					       * recorded event was a join */
	const ctl_store_span *missing;        /* windows from runs.
					       * windows_closed up to
					       * next_window the run does not
					       * hold, ascending; at start
					       * only (NULL for a resume) */
	uint32_t n_missing;                   /* entries in missing */
	char config_hash[CTL_STORE_HASH_LEN]; /* configuration it started
					       * with */
} ctl_store_run;

typedef struct ctl_store_recover_ops {
	/* A live run: returns 0 and a context for its windows, or an error
	 * to skip the run. */
	int (*run)(void *arg, const ctl_store_run *run, void **ret_ctx);
	/* Each recorded window of the run, in window order, as the policies
	 * saw it (layers' `selected` unset), with the knob state in force
	 * during it. Returns false to stop reading (the run is then handed
	 * to `end` with the windows read so far). */
	bool (*window)(void *arg, void *ctx, bellows_window *w,
	    const com_decision *in_force);
	/* The run's windows are done: `n_windows` were replayed. */
	void (*end)(void *arg, void *ctx, uint64_t n_windows);
} ctl_store_recover_ops;

/* Reads every live run, newest first (at most max_decisions decisions of
 * each), and its windows into the callbacks. Must be called before
 * ctl_store_start.
 * Returns the number of runs handed to ops->run, or 0 when the database
 * could not be read (a degraded store: nothing to recover). */
uint32_t ctl_store_recover(ctl_store *s, uint32_t max_decisions,
    const ctl_store_recover_ops *ops, void *arg);

/*
 * Resuming: reading one run back while the daemon runs.
 */

/* Reads run `run` (0: the newest run of `job`, ended or not) as far as
 * window `below`: its decisions answering earlier windows (at most
 * max_decisions, the newest), its windows below `below` into the
 * callbacks as ctl_store_recover does, next_window at most `below`.
 * Reads on a connection of its own, on the caller's thread, what is
 * committed (see ctl_store_settled). Unlike the rest of this header it
 * may be called from any thread (bellowsd calls it from a resume's):
 * it uses nothing of `s` but its path, which stays valid until
 * ctl_store_close, and it must return before that. Returns 0 when the
 * run was handed to ops->run and accepted, BELLOWS_ENOTFOUND when there
 * is no such run (or no store), BELLOWS_EIO when the database cannot be
 * read or ops->run refused the run. */
int ctl_store_load_run(ctl_store *s, int64_t run, const char *job,
    uint64_t below, uint32_t max_decisions, const ctl_store_recover_ops *ops,
    void *arg);

/* Hands over what is recorded and says whether the writer has committed
 * all of it (or gave up: the store is failing), so that
 * ctl_store_load_run sees everything. True for a NULL store. */
bool ctl_store_settled(ctl_store *s);

/* Records that `run` resumes at `window` as launch `run_key`: its
 * resumes count goes up, it is live again under that identity, and its
 * rows of windows >= window (and the decisions answering them, with
 * their changes) move to the superseded_* tables. Everything recorded
 * before is written first, everything after later. */
void ctl_store_run_resumed(ctl_store *s, int64_t run, uint64_t window,
    const char *run_key);

/* Writes the FNV-1a 64 hash of `len` bytes of `text` as 16 lower-case hex
 * digits and a NUL into `out`. */
void ctl_store_hash(const char *text, size_t len, char out[CTL_STORE_HASH_LEN]);

#endif /* CTL_STORE_H */
