/* jobs_int - what the files of the job table share, see jobs.h.
 *
 * The job table is one module in several files: jobs.c holds the state
 * machine that messages drive, with its invariants; each other jobs_*.c
 * owns one part of it, which its file header names. None of them touches
 * a socket, and everything here runs on the event loop's thread.
 */
#ifndef CTL_JOBS_INT_H
#define CTL_JOBS_INT_H

#include "jobs.h"
#include "policyhost/policy_host.h"
#include "controller/ctl_window.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JOBS_LOG                32   /* decisions kept per job */
#define JOBS_LATENCY_N          1024 /* decision latencies kept for STATUS */
#define JOBS_TELEMETRY_METRICS  4096 /* metrics one Telemetry carries */
#define JOBS_OPEN               8    /* windows aggregated at once per job */
#define JOBS_WELCOME_MAX        64 /* decisions sent in a welcome or snapshot */
#define JOBS_KEY_SHOWN          64 /* bytes of a launch identity in events */
#define JOBS_TAKEN              64 /* last windows a rank's reports are known */
#define JOBS_RESUMES_PER_CLIENT 1  /* read-backs one client may have at once */
#define JOBS_RESUMES_MAX        4  /* read-backs the daemon runs at once */
#define JOBS_LATE_WAITS         8  /* batches of late windows awaited */
#define JOBS_LATE_BYTES                                                        \
	(64u << 20) /* late windows a job holds at                             \
		     * once, at their largest */
#define JOBS_FRESH_MS                                                          \
	1000 /* a rank welcomed this recently also gets                        \
	      * decisions sent directly */

typedef struct job_rank {
	bool joined;                /* has said hello and not bye */
	bool alive;                 /* heard within rank_timeout_ms */
	uint8_t peer[CTL_PEER_MAX]; /* routing id holding the rank */
	uint8_t peer_len;           /* bytes in peer */
	uint64_t incarnation;       /* agent process holding it */
	uint64_t last_seen_ms;      /* monotonic */
	uint64_t step;              /* last step heard */
	uint64_t seq_in_force;      /* decision it applies */
	uint64_t reports;           /* reports accepted */
	uint32_t rejoins;           /* hellos after the first */
	uint64_t first_window;      /* first window it reports since joining:
				     * earlier ones close without it */
	bool left;                  /* said Bye and has not joined since */
	uint64_t welcomed_ms;       /* monotonic, when its hello was taken */
	bool resuming;              /* its hello carried a decision it
				     * applies: it ran before this hello
				     * (under another daemon instance) */
	uint64_t taken_top;         /* highest window whose report was
				     * taken from this incarnation, +1 */
	uint64_t taken_mask;        /* bit i: the report of window
				     * taken_top - 1 - i was taken */
	char *client;               /* authenticated client holding it, NULL
				     * without security */
} job_rank;

typedef struct job {
	char *name;                       /* job name */
	char *run_key;                    /* launch identity of its run, "" =
					   * unknown (an older agent) */
	char refused_key[JOBS_KEY_SHOWN]; /* the launch last refused while the
					   * run was alive: one event per
					   * launch, not per retried Hello */
	uint32_t world;                   /* ranks */
	uint32_t n_layers;                /* entries in layers */
	com_layer_info *layers;           /* the layer table */
	job_rank *ranks;                  /* world entries */
	uint32_t alive;                   /* ranks alive */
	uint64_t next_window;             /* lowest window not closed */
	ctl_window *open[JOBS_OPEN];      /* windows being aggregated */
	uint32_t expected[JOBS_OPEN];     /* ranks open[i] waits for: alive
					   * and joined by its index */
	uint32_t have[JOBS_OPEN];         /* of those, the ones open[i] has a
					   * report of: complete when equal */
	com_decision log[JOBS_LOG];       /* ring of recent decisions */
	uint64_t ticket[JOBS_LOG];        /* store ticket of each log entry */
	uint64_t closed_ns[JOBS_LOG];     /* when the window each entry answers
					   * closed (monotonic), 0: not a
					   * window's decision */
	uint32_t log_head;                /* index of the oldest entry */
	uint32_t log_n;                   /* entries used */
	uint64_t last_seq;                /* seq of the newest decision */
	uint64_t published_seq;           /* seq of the newest one published */
	int64_t run_id;                   /* its run in the store, 0 = none */
	bool ended;                       /* run ended: every rank said Bye */
	bool recovering;             /* rebuilt from the store and no window
				      * closed since: ranks resume the
				      * windows it expects */
	uint64_t max_step;           /* highest step heard from a rank */
	uint64_t idle_since_ms;      /* when the last rank went away */
	uint64_t resumed_ms;         /* when a launch last resumed it, 0 =
				      * never: reading a run back costs
				      * seconds of a thread, so resumes of a
				      * job are spaced */
	uint64_t windows_incomplete; /* closed with ranks missing */
	uint64_t reports;            /* reports accepted by this daemon */
	ctl_policy_set *policies;    /* instances deciding for the job */
	char policy_names[256];      /* their names, for STATUS */
	size_t bytes;                /* the most it may hold, counted when
				      * it was admitted (ctl_jobs_job_bytes) */
	double *grad_norm;           /* n_layers: each layer's gradient norm
				      * in the last window closed, NAN before */
	double *level_applied;       /* n_layers: the level each layer was
				      * sent at in the last window closed,
				      * NAN before or when its agents did not
				      * say */
	uint64_t windows;            /* windows closed by this daemon */
	uint64_t floats_sent;        /* summed over those windows */
	uint64_t floats_raw;         /* the same, uncompressed */
	ctl_window **late;           /* late windows being aggregated, slot
				      * window % late_cap; NULL: none */
	uint32_t late_cap;           /* slots in late, 0: no late range */
	ctl_store_span *late_spans;  /* the late windows not closed, in
				      * ascending spans: those a restarted
				      * daemon found missing below its next
				      * window, then those the ranks had
				      * moved past; windows between two
				      * spans are recorded already */
	uint32_t late_n_spans;       /* entries in late_spans */
	uint32_t late_span_at;       /* the span late_next lies in */
	uint64_t late_next;          /* lowest late window not closed */
	uint64_t late_end;           /* late windows are below this */
	bool late_refused;           /* a late report beyond the slots was
				      * refused (logged once) */
	uint64_t late_heard_ms;      /* when the last late report came (or
				      * the late range began) */
	uint64_t windows_late;       /* windows recorded late */
	uint64_t late_wait_window[JOBS_LATE_WAITS]; /* the lowest late window
						     * recorded in each batch
						     * not known committed,
						     * oldest first */
	uint64_t late_wait_ticket[JOBS_LATE_WAITS]; /* that batch's ticket
						     * (the last entry's: the
						     * newest merged in) */
	uint32_t late_waits;                        /* entries used; they
						     * outlive the late
						     * range */
	uint64_t closed_recorded; /* windows_closed + 1 last handed to the
				   * store (runs.windows_closed), 0: none */
} job;

struct ctl_jobs {
	const ctl_config *cfg;        /* settings in force (borrowed) */
	uint64_t instance;            /* this daemon run */
	ctl_jobs_publish_fn *publish; /* decision/telemetry sink */
	void *publish_arg;            /* its argument */
	ctl_jobs_send_fn *send;       /* to one peer, NULL = none */
	void *send_arg;               /* its argument */
	uint64_t now_ms;              /* the latest time a caller gave */
	job **jobs;                   /* table, n_jobs used */
	uint32_t n_jobs;              /* entries used */
	uint32_t cap_jobs;            /* entries allocated */
	job *last_hit;                /* lookup cache: reports come in runs */
	ctl_jobs_counters counters;   /* totals */
	ctl_events *events;           /* recent events, for STATUS */
	ctl_store *store;             /* history, NULL = none (borrowed) */
	uint64_t latency_ns[JOBS_LATENCY_N]; /* window close -> publish of
					      * the last decisions, a ring */
	uint64_t latency_n;                  /* decisions measured, ever */
	uint64_t latency_bucket[CTL_JOBS_LATENCY_BUCKETS +
	    1];                     /* of them,
				     * those in each bucket (not
				     * cumulative; the last: +Inf) */
	double latency_sum_ms;      /* their sum */
	size_t bytes;               /* sum of the jobs' bytes */
	struct job_resume *resumes; /* runs read back for resumes, off the
				     * loop (jobs_resume.c) */
	uint32_t n_resumes;         /* entries in that list */
};

/* ---- jobs.c: the table and the messages driving it ------------------ */

/* Makes *reply an Error of `code` with `text` (copied; out of memory
 * leaves the message out) and returns code. */
int ctl_jobs_error_reply(com_msg *reply, int code, const char *text);

/* The job named `name` in the table, NULL when there is none (or name is
 * NULL); the table owns it. */
job *ctl_jobs_find(ctl_jobs *jobs, const char *name);

/* Refuses a client the configuration does not allow for job `name`:
 * returns 0, or BELLOWS_EPERM with the reason in why. */
int ctl_jobs_check_client(const ctl_jobs *jobs, const char *name,
    const char *client, char *why, size_t why_len);

/* Frees *jp and all it holds, and sets *jp to NULL; NULL-safe. The
 * table's entry and byte count are the caller's (see ctl_jobs_remove). */
void ctl_jobs_job_destroy(job **jp);

/* Makes room for one more job in the table and allocates a job with its
 * name, rank slots and a copy of the layer table; the caller fills the
 * rest and appends it. Returns 0 or BELLOWS_ENOMEM (nothing allocated). */
int ctl_jobs_job_alloc(ctl_jobs *jobs, const char *name, uint32_t world,
    const com_layer_info *layers, uint32_t n_layers, job **ret);

/* Makes room for one more job in the table. Returns 0 or
 * BELLOWS_ENOMEM. */
int ctl_jobs_reserve(ctl_jobs *jobs);

/* Allocates a job as ctl_jobs_job_alloc does without touching any table
 * (a resume builds one off the loop). Returns 0 or BELLOWS_ENOMEM. */
int ctl_jobs_job_new(const char *name, uint32_t world,
    const com_layer_info *layers, uint32_t n_layers, job **ret);

/* The most a job of `world` ranks and this layer table can come to hold
 * in the table, whatever its ranks send: the job and its names, its rank
 * slots, its decision log (every entry with the largest codec table and
 * texts the wire allows), every window it may aggregate at once at its
 * fullest (ctl_window_bytes_max) and its policies (ctl_policy_set_bytes).
 * Counted before anything is allocated, so that a Hello cannot make the
 * daemon hold more than max_job_mb for one job, or max_total_job_mb for
 * all of them. Saturates at SIZE_MAX. */
size_t ctl_jobs_job_bytes(const ctl_job_conf *jc, const char *name,
    uint32_t world, const com_layer_info *layers, uint32_t n_layers);

/* Refuses a job that would hold more than the configured budgets, with
 * the reason in why. Returns 0 or BELLOWS_ELIMIT. */
int ctl_jobs_admit(ctl_jobs *jobs, const char *name, size_t bytes, char *why,
    size_t why_len);

/* The Hello's launch identity, "" when it has none. */
const char *ctl_jobs_run_id(const com_hello *h);

/* Takes entry i out of the table (its bytes too) and destroys the job. */
void ctl_jobs_remove(ctl_jobs *jobs, uint32_t i);

/* True when Hello h's layer table is job j's, layer for layer (names,
 * sizes, shapes). */
bool ctl_jobs_same_table(const job *j, const com_hello *h);

/* ---- jobs_late.c: windows recorded late, after a restart ------------ */

/* Makes windows [from, to) of j late: their reports, sent again by the
 * agents, are aggregated apart and recorded late (in at most
 * JOBS_LATE_BYTES of slots). The span goes after those already late:
 * does nothing when it would be empty or begins below the last one's
 * end; out of memory, logs and adds none. */
void ctl_jobs_late_begin(ctl_jobs *jobs, job *j, uint64_t from, uint64_t to);

/* True when `window` is one of j's late windows not yet closed. */
bool ctl_jobs_late_has(const job *j, uint64_t window);

/* True when `window` lies between two late spans of j: the store held
 * it when the daemon restarted, so a report of it is ignored (the
 * window is closed, with or without that rank). */
bool ctl_jobs_late_recorded(const job *j, uint64_t window);

/* `closed` (the lowest window not durably closed among the live ones)
 * lowered to the lowest late window not closed, or recorded and not
 * known committed, if any. */
uint64_t ctl_jobs_late_closed(const job *j, uint64_t closed);

/* The store committed every batch up to `ticket`: the late windows
 * recorded in them are durably closed. Not called when the store
 * degrades (late windows wait for their commit even then). */
void ctl_jobs_late_durable(job *j, uint64_t ticket);

/* Folds a report of a late window (ctl_jobs_late_has) into it. Returns
 * 0, BELLOWS_EBUSY for a (rank, window) taken already, BELLOWS_ESTATE
 * (beyond the slots held) or BELLOWS_ENOMEM, with why filled. */
int ctl_jobs_late_add(job *j, const com_report *rep, uint64_t now_ms, char *why,
    size_t why_len);

/* Records, in window order, every late window that may close, skipping
 * those no rank will send; frees the late range when it is done. */
void ctl_jobs_late_close(ctl_jobs *jobs, job *j, uint64_t now_ms);

/* Frees j's late windows and ends its late range; the commits of those
 * recorded are still awaited. */
void ctl_jobs_late_free(job *j);

/* ---- jobs_log.c: each job's decision log ---------------------------- */

/* Entry i of j's log, 0 the oldest (i < j->log_n); the log owns it. */
com_decision *ctl_jobs_log_at(job *j, uint32_t i);

/* The newest decision of j's log (the log owns it), NULL while the log
 * is empty. */
const com_decision *ctl_jobs_log_last(job *j);

/* The lowest window of j whose close is not durable yet: next_window,
 * or lower while a decision answering a closed window, or the rows of a
 * late window, wait for their commit. A repair waiting for its commit names a
 * window already durable; it only makes the answer lower than it could be,
 * never wrong. */
uint64_t ctl_jobs_windows_closed(job *j);

/* Hands ctl_jobs_windows_closed(j) to the store (runs.windows_closed)
 * when it moved since it last did: called as a window's rows are
 * recorded, it rides in their transaction, and what the store holds is
 * never above what the agents were told. */
void ctl_jobs_closed_record(ctl_jobs *jobs, job *j);

/* Appends a decision, taking ownership of *d (zeroed on return); `ticket`
 * is the store's for it (0: nothing to wait for), `closed_ns` when the
 * window it answers closed (0: not a window's decision). `jobs` may be
 * NULL while the log has room and everything in it is published (a job
 * being read back from the store). */
void ctl_jobs_log_push(ctl_jobs *jobs, job *j, com_decision *d, uint64_t ticket,
    uint64_t closed_ns);

/* Index in the log of the decision in force at `step`, or -1 if that is
 * older than the log (or there are no decisions). */
int ctl_jobs_log_in_force(job *j, uint64_t step);

/* Copies the decisions an agent at `step` needs (the one in force and all
 * later ones, at most JOBS_WELCOME_MAX, the newest kept) into a fresh
 * array. Returns 0 or BELLOWS_ENOMEM. */
int ctl_jobs_log_tail(job *j, uint64_t step, com_decision **ret,
    uint32_t *ret_n);

/* ctl_store_durable_fn: decisions up to `ticket` are committed. */
void ctl_jobs_on_durable(void *arg, uint64_t ticket);

/* Decides `state` as decision seq last+1 applying at `apply_step`: it is
 * recorded, and published once the store has committed it (at once
 * without a store, or while it is degraded). `closed_ns`: when the window
 * it answers closed, for the decision latency (0: not a window's).
 * Consumes state. */
void ctl_jobs_decide(ctl_jobs *jobs, job *j, com_decision *state,
    uint64_t apply_step, uint64_t window, ctl_store_source source,
    uint64_t closed_ns);

/* Logs the state a rank says it applies as the job's newest decision, so
 * the sequence continues after it (a restarted daemon). The job name is
 * ours: the copy an agent sends may leave it empty, and every later
 * decision is derived from this one and published under its name. */
void ctl_jobs_adopt(ctl_jobs *jobs, job *j, const com_decision *in_force);

/* ---- jobs_recover.c: jobs rebuilt from the store ------------------- */

/* The state of one ctl_store_recover or ctl_store_load_run call: the
 * argument of the callbacks below. */
typedef struct jobs_recovery {
	ctl_jobs *jobs;            /* the table being rebuilt; NULL when
				    * resuming */
	const ctl_config *cfg;     /* what the policies start from */
	uint64_t now_ms;           /* monotonic time of the rebuild */
	uint32_t recovered;        /* jobs rebuilt */
	bool resuming;             /* one run read back for a resume, off
				    * the loop: it is left out of the
				    * table, in `loaded` */
	const atomic_bool *cancel; /* set: stop reading (NULL: never) */
	job *loaded;               /* that run's job, NULL until read */
	uint64_t replayed;         /* its windows replayed into the
				    * policies */
	uint64_t policy_errors;    /* policy calls that failed meanwhile */
} jobs_recovery;

/* ctl_store_recover_ops.run: a live run becomes a job with no rank
 * joined, its ranks that were there expected back. */
int ctl_jobs_recover_run(void *arg, const ctl_store_run *run, void **ret_ctx);

/* ctl_store_recover_ops.window: the policies see a recorded window again,
 * exactly as they saw it then; what they propose is dropped (the decision
 * answering it is in the log already). */
bool ctl_jobs_recover_window(void *arg, void *ctx, bellows_window *w,
    const com_decision *in_force);

/* ctl_store_recover_ops.end: a run is read back, its `n_windows` windows
 * replayed; at start it is logged as recovered. */
void ctl_jobs_recover_end(void *arg, void *ctx, uint64_t n_windows);

/* ---- jobs_run.c: launches and resumes ------------------------------ */

/* What a Hello is to the run its job holds. */
typedef enum job_launch {
	JOB_LAUNCH_SAME, /* a rank of the run: joins or rejoins it */
	JOB_LAUNCH_NEW,  /* another launch, and the run's ranks are gone:
			  * it takes the job over */
	JOB_LAUNCH_BUSY, /* another launch while ranks of the run live */
} job_launch;

/* Tells a Hello of job j apart (docs/protocol.md, "Runs"). Two launch
 * identities that differ are two launches; the new one waits until no
 * rank of the run is alive, those expected back after a restart of the
 * daemon included (rank_timeout_ms bounds the wait). The same identity
 * after the run ended cleanly, or from a rank the run has not seen, is
 * a rank of it joining late. Otherwise
 * (no two identities to compare, or a launcher that reuses one after a
 * failure), a process starting afresh (it applies no decision yet)
 * behind the job, when no rank of the run is there, is a new launch
 * too; with ranks there it is one of them joining late or restarted
 * alone. */
job_launch ctl_jobs_launch_of(const job *j, const com_hello *h);

/* Answers a Hello of another launch while ranks of job j's run are
 * alive: an Error BELLOWS_EBUSY in *reply (returned, the reason in why),
 * logged and kept as an event once per refused launch. */
int ctl_jobs_refuse_launch(ctl_jobs *jobs, job *j, const com_hello *h,
    com_msg *reply, char *why, size_t why_len);

/* A new launch takes job *jp over, its run's ranks gone: with resume
 * set it continues the recorded run (ctl_jobs_resume); otherwise the run
 * ends and *jp becomes NULL, for the caller to start the new run.
 * Returns 0 or the error to answer the Hello with (why filled). */
int ctl_jobs_take_over(ctl_jobs *jobs, job **jp, const com_hello *h,
    const char *client, uint64_t now_ms, char *why, size_t why_len);

/* A launch resumes job *jp (NULL: one not in the table) at window
 * h->last_window, step h->step: the run is read back from the history
 * up to there, the policies replaying its windows, off the loop
 * (jobs_resume.c): the first Hello starts that and is answered
 * BELLOWS_EBUSY, the launch's Hello after it is done takes the job read,
 * which replaces *jp in the table, and job_resumed sets it going.
 * Without a history the job rewinds in memory at once; with no job and
 * no recorded run *jp stays NULL and the caller starts a new run at
 * that window. Returns 0, BELLOWS_EMISMATCH when the run's layer table
 * differs from the Hello's, BELLOWS_EBUSY while the run is read back,
 * while the history still writes what the resume must read, or while
 * `client` (the authenticated one, NULL or "" without security) has as
 * many read-backs as it may (the rank retries), BELLOWS_ELIMIT when the
 * table is full. */
int ctl_jobs_resume(ctl_jobs *jobs, job **jp, const com_hello *h,
    const char *client, uint64_t now_ms, char *why, size_t why_len);

/* ---- jobs_resume.c: runs read back off the loop -------------------- */

typedef struct job_resume job_resume;

/* The launch resuming job `name` while its run is read back, NULL when
 * none is (or name is NULL); the table owns the text. */
const char *ctl_jobs_resuming(const ctl_jobs *jobs, const char *name);

/* Refuses a Hello of a job being resumed by another launch, or at
 * another window, than the Hello's: 0, or BELLOWS_EBUSY with why. */
int ctl_jobs_resume_held(ctl_jobs *jobs, const com_hello *h, char *why,
    size_t why_len);

/* Starts reading job h->job's run back (that of `old` when it is in the
 * table, else the job's newest) up to window h->last_window, on a thread
 * of its own, for `client`. Returns BELLOWS_EBUSY with why (the Hello is
 * refused while the run is read back; also when it already is, or when
 * the client or the daemon has as many read-backs as it may), or
 * BELLOWS_ENOMEM. */
int ctl_jobs_resume_start(ctl_jobs *jobs, const job *old, const com_hello *h,
    const char *client, uint64_t now_ms, char *why, size_t why_len);

/* Takes the finished read-back for Hello h's launch and window: true,
 * with the job read (outside the table, NULL when the run could not be
 * read) in *ret_loaded and the windows replayed in *ret_replayed; false
 * when there is none or it is not done. */
bool ctl_jobs_resume_take(ctl_jobs *jobs, const com_hello *h, job **ret_loaded,
    uint64_t *ret_replayed);

/* Drops read-backs done and not taken for rank_timeout_ms. */
void ctl_jobs_resume_tick(ctl_jobs *jobs, uint64_t now_ms);

#endif
