/* store_int - what the store's files share: the rows a batch carries,
 * the messages over the loop's PAIR socket, the statements, the writer's
 * state and the store itself, and the helpers more than one file calls.
 *
 * The store is four files, each one thread or one concern:
 * store.c the loop's side (batches, acknowledgements, the public
 * recording API), store_schema.c the schema, its migrations and opening a
 * connection, store_writer.c the writer and checkpointer threads (rows,
 * retention, checkpoints), store_recover.c reading runs back (recovery and
 * resume). Only these files include this header; everything else uses
 * store.h.
 */
#ifndef CTL_STORE_INT_H
#define CTL_STORE_INT_H

#include "store.h"

#include "history/hist_cols.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STORE_BUSY_MS           100    /* SQLite busy timeout */
#define STORE_ACK_TIMEOUT_MS    250    /* a decision waits this long at most */
#define STORE_RETRY_MIN_MS      100    /* first retry after a failure */
#define STORE_RETRY_MAX_MS      5000   /* backoff cap */
#define STORE_THIN_EVERY        8      /* windows kept under pressure */
#define STORE_CHECKPOINT_FRAMES 1000   /* WAL pages: one after a decision */
#define STORE_CHECKPOINT_ANY    4000   /* WAL pages: one at once */
#define STORE_CHECKPOINT_DELAY  3      /* ms after the decision */
#define STORE_WAL_MAX_FRAMES    16384  /* WAL pages: the writer checkpoints */
#define STORE_RESTART_WAIT_MS   5000   /* its wait for the checkpointer */
#define STORE_NOTE_MS           1000   /* one metrics_dropped event/second */
#define STORE_DROP_LOG_MS       60000  /* one drop log line a minute */
#define STORE_AGE_PASS_MS       600000 /* age retention pass period */
#define STORE_THIN_STEP         64     /* windows thinned at a time */
#define STORE_ERR_MAX           320    /* bytes of an error text */
#define STORE_MULTI                                                            \
	32 /* rows per multi-row insert: one                                   \
	    * statement step for many rows is what                             \
	    * makes bulk inserts fast */

/* ---- rows ------------------------------------------------------------ */

/* The parts of a batch's rest (its metric rows and decision changes), in
 * the order they are written. */
enum store_rest_part {
	STORE_REST_TIMINGS,
	STORE_REST_COMMS,
	STORE_REST_METRICS,
	STORE_REST_CHANGES,
	STORE_REST_PARTS
};

typedef struct store_run_row {
	int64_t id;                    /* runs.id */
	char *job;                     /* owned */
	char *run_key;                 /* owned, launch identity */
	uint32_t world;                /* ranks */
	uint32_t n_layers;             /* layers */
	uint64_t wall_ms;              /* started */
	uint64_t instance;             /* daemon */
	char hash[CTL_STORE_HASH_LEN]; /* configuration */
	uint64_t first_seq;            /* first decision */
} store_run_row;

typedef struct store_layer_row {
	int64_t run;                  /* runs.id */
	uint32_t idx;                 /* layer index */
	char *name;                   /* owned */
	uint64_t numel;               /* elements */
	uint32_t ndim;                /* dimensions */
	uint32_t shape[COM_MAX_NDIM]; /* sizes */
} store_layer_row;

typedef struct store_rank_row {
	int64_t run;          /* runs.id */
	uint32_t rank;        /* rank */
	uint64_t wall_ms;     /* when */
	uint32_t kind;        /* ctl_store_rank_kind */
	uint64_t step;        /* its step */
	uint64_t incarnation; /* agent process, 0 = none */
} store_rank_row;

/* A window_info row: the window as the policies saw it (its statistics
 * are written by name from the table, hist_cols.h) and the knob state in
 * force during it. */
typedef struct store_info_row {
	int64_t run;               /* runs.id */
	bellows_window v;          /* the window, job, layers and comm NULL */
	uint32_t ranks_expected;   /* live at close */
	bool complete;             /* every expected rank reported */
	bool late;                 /* recorded late (CTL_STORE_CLOSED_LATE) */
	uint64_t wall_ms;          /* closed */
	uint32_t state_batch_size; /* knob in force */
	uint64_t state_threshold;  /* knob in force */
	bool state_off;            /* gate in force */
	uint64_t state_apply;      /* apply step of the state in force */
	uint64_t state_calibrate;  /* its calibrate_steps */
} store_info_row;

/* A windows row: one layer of a window, statistics by name from the
 * table (hist_cols.h), with the level and bound in force. */
typedef struct store_stat_row {
	int64_t run;            /* runs.id */
	uint64_t window;        /* index */
	uint32_t layer;         /* index */
	bellows_window_layer v; /* the layer, name and shape NULL; its
				 * array statistics point into arrays */
	uint64_t *arrays;       /* owned: copies of the layer's array
				 * statistics, NULL: none */
} store_stat_row;

typedef struct store_timing_row {
	int64_t run;     /* runs.id */
	uint64_t window; /* index */
	uint32_t rank;   /* rank */
	com_timings t;   /* as reported */
} store_timing_row;

typedef struct store_comm_row {
	int64_t run;     /* runs.id */
	uint64_t window; /* index */
	uint32_t rank;   /* reporting rank */
	uint64_t bytes;  /* per rank */
	double ms;       /* median */
	uint32_t count;  /* collectives */
	bool compressed; /* payload compressed */
} store_comm_row;

typedef struct store_metric_row {
	int64_t run;                        /* runs.id */
	uint64_t window;                    /* index */
	char *policy;                       /* owned: instance name */
	char name[BELLOWS_METRIC_NAME_MAX]; /* metric */
	int32_t layer;                      /* -1 = the job */
	double value;                       /* finite */
} store_metric_row;

typedef struct store_decision_row {
	int64_t run;      /* runs.id */
	com_decision d;   /* owned deep copy */
	uint32_t source;  /* ctl_store_source */
	uint64_t wall_ms; /* decided */
} store_decision_row;

typedef struct store_change_row {
	int64_t run;      /* runs.id */
	uint64_t seq;     /* decision */
	const char *knob; /* static name */
	int64_t layer;    /* -1 = not per layer */
	bool has_old;     /* old is valid */
	double old;       /* before */
	double now;       /* from this decision on */
} store_change_row;

typedef struct store_event_row {
	uint64_t wall_ms; /* when */
	char *job;        /* owned, NULL = daemon */
	char *kind;       /* owned */
	char *text;       /* owned */
	char *hash;       /* owned, NULL = none */
} store_event_row;

typedef struct store_file_row {
	char hash[CTL_STORE_HASH_LEN]; /* FNV-1a 64 */
	char *path;                    /* owned */
	char *text;                    /* owned */
	uint64_t wall_ms;              /* first seen */
} store_file_row;

enum store_update_kind {
	STORE_UPDATE_END = 1,       /* ended_wall_ms = wall_ms */
	STORE_UPDATE_REOPEN = 2,    /* ended_wall_ms = NULL */
	STORE_UPDATE_RECOVERED = 3, /* recoveries + 1 */
	STORE_UPDATE_RESUMED = 4,   /* resumed at `window` by `run_key`:
				     * later rows move to superseded_* */
	STORE_UPDATE_CLOSED = 5,    /* windows_closed = window */
};

typedef struct store_update_row {
	int64_t run;      /* runs.id */
	uint32_t kind;    /* store_update_kind */
	uint64_t wall_ms; /* for END */
	uint64_t window;  /* for RESUMED: first window superseded; for
			   * CLOSED: the agents' mark */
	char *run_key;    /* for RESUMED: owned, the launch resuming */
} store_update_row;

#define STORE_VEC(T)                                                           \
	struct {                                                               \
		T *v;         /* entries */                                    \
		uint32_t n;   /* used */                                       \
		uint32_t cap; /* allocated */                                  \
	}

/* What the loop hands over in one go. Its firm rows (everything but the
 * metric rows and decision_changes) are written in one transaction, and
 * then the rest in another, so that a decision's commit never waits for
 * the collectives and policy metrics of the window it answers. The
 * window as the policies saw it (window_info and its windows rows) is
 * firm: recovery replays it into the policies, so it is never dropped
 * and it commits no later than the decision answering it. Its ranks'
 * timings, put with their reports in its batch or an earlier one, are
 * written in the firm transaction too when not written before: a
 * window and its timings are durable together (no rank sends a closed
 * window's report again). Tables are written in the order of the
 * fields, so a run's row precedes its updates and a window precedes
 * its decision. */
typedef struct store_batch {
	uint64_t ticket;                         /* numbered by the loop */
	uint32_t rows;                           /* all rows */
	uint32_t metric_rows;                    /* timings + comms +
						  * metrics */
	bool firm_done;                          /* firm rows committed */
	uint32_t rest_at[STORE_REST_PARTS];      /* rest rows committed so
						  * far, per part: a
						  * transaction that gave
						  * way to a decision */
	uint32_t rest_try[STORE_REST_PARTS];     /* the same inside the
						  * transaction under way */
	struct store_batch *next;                /* the writer's queue */
	STORE_VEC(store_file_row) files;         /* policy_files */
	STORE_VEC(store_run_row) runs;           /* runs */
	STORE_VEC(store_layer_row) layers;       /* layers */
	STORE_VEC(store_rank_row) ranks;         /* rank_events */
	STORE_VEC(store_info_row) infos;         /* window_info */
	STORE_VEC(store_stat_row) stats;         /* windows */
	STORE_VEC(store_timing_row) timings;     /* timings */
	STORE_VEC(store_comm_row) comms;         /* comm_samples */
	STORE_VEC(store_metric_row) metrics;     /* policy_metrics */
	STORE_VEC(store_decision_row) decisions; /* decisions */
	STORE_VEC(store_change_row) changes;     /* decision_changes */
	STORE_VEC(store_event_row) events;       /* events */
	STORE_VEC(store_update_row) updates;     /* runs updates */
} store_batch;

/* ---- messages over the PAIR ------------------------------------------ */

enum store_msg_type {
	STORE_MSG_BATCH = 1,     /* loop -> writer: batch (ownership moves) */
	STORE_MSG_CONF = 2,      /* loop -> writer: new settings */
	STORE_MSG_STOP = 3,      /* loop -> writer: drain and stop */
	STORE_MSG_ACK = 4,       /* writer -> loop: committed */
	STORE_MSG_DURABLE = 7,   /* writer -> loop: decisions committed */
	STORE_MSG_DEGRADED = 5,  /* writer -> loop: failing */
	STORE_MSG_RECOVERED = 6, /* writer -> loop: working again */
};

typedef struct store_msg {
	uint32_t type;            /* store_msg_type */
	store_batch *batch;       /* BATCH */
	ctl_store_conf conf;      /* CONF */
	uint64_t ms;              /* STOP: drain time; RECOVERED: time down */
	uint64_t ticket;          /* ACK: highest ticket done; DURABLE:
				   * highest whose decisions are */
	uint64_t rows;            /* ACK: rows done (written or dropped) */
	uint64_t metric_rows;     /* ACK: metric rows among them */
	char text[STORE_ERR_MAX]; /* DEGRADED: why; RECOVERED: what it was */
} store_msg;

/* ---- statements ------------------------------------------------------ */

enum store_stmt {
	ST_FILE,
	ST_RUN,
	ST_LAYER,
	ST_RANK,
	ST_INFO,
	ST_STAT,
	ST_TIMING,
	ST_COMM,
	ST_METRIC,
	ST_DECISION,
	ST_CHANGE,
	ST_EVENT,
	ST_END,
	ST_REOPEN,
	ST_RECOVERED,
	ST_CLOSED,
	ST_BEGIN,
	ST_COMMIT,
	ST_ROLLBACK,
	ST_STAT_N,   /* STORE_MULTI windows rows at once */
	ST_TIMING_N, /* STORE_MULTI timings rows at once */
	ST_MAX,
};

/* The columns of windows, window_info and timings that are not
 * statistics, bound first; the statistics follow, named by the table
 * (hist_cols.h). */
#define STORE_STAT_KEYS  "run_id, window, layer, level, error_bound"
#define STORE_STAT_FIXED 5
#define STORE_INFO_KEYS                                                        \
	"run_id, window, first_step, last_step, epoch, lr, lr_next, "          \
	"batch_size, lr_scale, world, ranks_reported, ranks_expected, "        \
	"complete, closed_wall_ms, state_batch_size, state_size_threshold, "   \
	"state_compression_off, state_apply_step, state_calibrate_steps, "     \
	"late"
#define STORE_INFO_FIXED   20
#define STORE_TIMING_KEYS  "run_id, window, rank"
#define STORE_TIMING_FIXED 3

/* ---- the writer's state ---------------------------------------------- */

typedef struct store_thin {
	int64_t run;         /* runs.id */
	uint64_t max_window; /* highest window written */
	uint64_t thinned_to; /* windows below this are thinned */
} store_thin;

typedef struct store_writer {
	char *path;                 /* the file */
	sqlite3 *db;                /* NULL while closed */
	sqlite3_stmt *st[ST_MAX];   /* prepared with db */
	void *sock;                 /* writer's end of the loop's PAIR */
	void *poke;                 /* to the checkpointer */
	ctl_store_conf conf;        /* settings */
	bool mode_warned;           /* a file wider than store.mode was
				     * logged */
	store_batch *head;          /* queue, oldest first */
	store_batch *tail;          /* newest */
	bool failing;               /* the last attempt failed */
	char error[STORE_ERR_MAX];  /* why */
	uint64_t fail_since_ms;     /* first failure of this spell */
	uint64_t retry_at_ms;       /* next attempt */
	uint32_t backoff_ms;        /* current backoff */
	bool stopping;              /* STOP received */
	uint64_t stop_at_ms;        /* give up draining then */
	STORE_VEC(store_thin) thin; /* per run, for max_windows_per_run */
	uint64_t next_age_ms;       /* next age retention pass */
	bool age_due;               /* windows written since the last one */
	bool wal_full;              /* the WAL outgrew STORE_WAL_MAX_FRAMES */
	uint32_t wal_frames;        /* WAL pages after the last commit */
	uint64_t ckpt_due_ms;       /* poke the checkpointer then, 0: no */
	bool decision_queued;       /* a batch with a decision arrived since
				     * the firm rows were last written */
	bool gave_way;              /* the metric transaction under way
				     * stopped early for it */
} store_writer;

struct ctl_store {
	store_writer w;                /* the writer's; its thread's after
					* ctl_store_start */
	pthread_t writer;              /* writer thread */
	pthread_t checkpointer;        /* checkpoint thread */
	bool writer_started;           /* writer runs */
	bool checkpointer_started;     /* checkpointer runs */
	void *sock;                    /* loop's end of the PAIR */
	void *ckpt_sock;               /* checkpointer's end of the poke */
	ctl_store_conf conf;           /* settings (loop's copy) */
	uint64_t instance;             /* daemon run */
	ctl_events *events;            /* ring for the store's events */
	ctl_store_durable_fn *durable; /* decisions' commit callback */
	void *durable_arg;             /* its argument */
	store_batch *cur;              /* batch being filled, or NULL */
	uint64_t next_ticket;          /* ticket of the next batch */
	uint64_t sent_ticket;          /* last batch handed over */
	uint64_t acked_ticket;         /* last batch committed */
	uint64_t durable_ticket;       /* last batch whose decisions are */
	uint64_t rows_in_flight;       /* handed over, not acknowledged */
	uint64_t metric_in_flight;     /* metric rows among them */
	uint64_t dropped_total;        /* metric rows never written */
	uint64_t dropped_note;         /* not yet reported in an event */
	uint64_t last_note_ms;         /* last metrics_dropped event */
	uint64_t last_drop_log_ms;     /* last drop log line */
	bool failed;                   /* the writer reports failure */
	bool slow;                     /* no commit within the timeout */
	uint64_t slow_until;           /* ack of this ticket ends slow */
	uint64_t slow_since_ms;        /* when it became slow */
	char error[STORE_ERR_MAX];     /* last failure, "" = none */
	STORE_VEC(uint64_t) waits;     /* tickets of decisions sent */
	STORE_VEC(uint64_t) wait_ms;   /* when each was sent */
	uint32_t waits_head;           /* first entry still waiting */
	int64_t next_run;              /* next runs.id */
	char hash[CTL_STORE_HASH_LEN]; /* configuration in force */
	uint64_t events_seen;          /* ring events already copied */
	bool attached;                 /* registered with a loop */
	char *abs_path;                /* the file as an absolute path, for
					* STATUS; NULL = not known */
};

/* ---- the connection (store_schema.c) ------------------------------------
 *
 * On the thread that owns the store_writer: the writer's thread once
 * started, the loop's before (recovery). SQLite result codes, not
 * BELLOWS_E*: the writer tells transient failures from bugs by them. */

/* True for SQLite errors of the environment (disk full, I/O, busy,
 * read-only, corrupt, cannot open...), worth retrying; false for a bug in
 * what the store asked SQLite to do. */
bool store_rc_transient(int rc);

/* Writes "'path': what: message (code)" for result `rc` into w->error. */
void store_set_error(store_writer *w, int rc, const char *what);

/* Finalizes the prepared statements and closes w->db. NULL-safe (no
 * connection: nothing to do). */
void store_db_close(store_writer *w);

/* Runs `sql` on w->db. Returns SQLITE_OK, or the failing result code with
 * w->error set (naming `what`). */
int store_exec(store_writer *w, const char *sql, const char *what);

/* Runs a one-value query into *ret (0 when it returns no row). Returns
 * SQLITE_OK or the failing result code with w->error set; *ret is
 * untouched on failure. */
int store_query_int(store_writer *w, const char *sql, int64_t *ret);

/* Opens (creating with store.mode) the file at w->path, switches it to
 * WAL, migrates it to CTL_STORE_SCHEMA_VERSION and prepares the writer's
 * statements. Returns SQLITE_OK, or a result code with w->error saying
 * why and the connection closed. w->db must be NULL. */
int store_db_open(store_writer *w);

/* Prepares `sql` on w->db and binds the run id as ?1 (and `limit` as ?2
 * when positive). Returns the statement (the caller finalizes it), or
 * NULL, logged, when it cannot be prepared. */
sqlite3_stmt *store_select(store_writer *w, const char *sql, int64_t run,
    int64_t limit);

/* ---- the threads (store_writer.c) ----------------------------------- */

/* The writer thread's body; `arg` is the ctl_store's store_writer, which
 * the thread owns until it returns: it reads batches, settings and STOP
 * from w->sock and writes until STOP and the queue is drained (or the
 * drain time is up), then frees what is left and closes the
 * connection. Returns NULL. */
void *store_writer_main(void *arg);

/* The checkpointer thread's body; `arg` is the ctl_store. One PASSIVE
 * checkpoint per byte 'c' read from s->ckpt_sock, on a connection of its
 * own; returns NULL on 's' or when the socket closes. */
void *store_checkpointer_main(void *arg);

/* Binds `s` (NULL: "") as text parameter i, SQLITE_STATIC: `s` must
 * outlive the statement's next step. */
void store_bind_text(sqlite3_stmt *st, int i, const char *s);

/* ---- helpers (store.c) ------------------------------------------------ */

/* Logs and aborts: the daemon does not run on without memory. Any
 * thread. */
_Noreturn void store_oom(void);

/* strdup that aborts on out-of-memory; NULL for NULL. Any thread. */
char *store_strdup(const char *s);

/* Doubles the capacity of the STORE_VEC array at pv (16 when empty),
 * entries of `size` bytes; aborts on out-of-memory. Any thread. */
void store_grow(void *pv, uint32_t *cap, size_t size);

/* Appends an entry to a STORE_VEC and returns it (uninitialised). */
#define STORE_PUSH(vec)                                                        \
	(((vec).n == (vec).cap                                                 \
		 ? store_grow(&(vec).v, &(vec).cap, sizeof(*(vec).v))          \
		 : (void)0),                                                   \
	    &(vec).v[(vec).n++])

/* Frees a batch and every row it owns. NULL-safe. Any thread (the one
 * owning the batch). */
void store_batch_free(store_batch *b);

#endif /* CTL_STORE_INT_H */
