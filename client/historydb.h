/* historydb - the history database bellowsd writes, opened read-only by
 * the `bellows` tools.
 *
 * The tools ask the history a fixed set of questions (the runs, a run's
 * layers, windows, decisions, events, timings, a table to export, the
 * windows to replay); each is one prepared statement of this module, with
 * every value the user typed bound as a parameter, and its rows go to a
 * sink as typed cells. The file is opened with SQLite's read-only URI
 * mode and a busy timeout: bellowsd keeps it in WAL mode, so reading
 * while it writes neither blocks the daemon nor sees half a transaction.
 * Schema versions up to TOOL_HDB_SCHEMA_MAX (docs/history.md) are read;
 * a newer file is refused with a message rather than misread. An older
 * file reads as if migrated: what it lacks (the columns and tables of
 * later versions) reads as "not measured" and as empty tables.
 *
 * This is the only module of the tools that includes <sqlite3.h>; the
 * daemon's writer is controller/store.c. A tool_hdb is used from one
 * thread.
 */
#ifndef TOOL_HISTORYDB_H
#define TOOL_HISTORYDB_H

#include "common/msg.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Policy views (policies/bellows/policy.h): named here only, so that
 * readers of the history need not see the policy ABI. */
struct bellows_window;
struct bellows_window_layer;
struct bellows_comm_sample;

#define TOOL_HDB_SCHEMA_MAX     9         /* newest PRAGMA user_version read */
#define TOOL_HDB_ERR_MAX        512       /* bytes of an error message */
#define TOOL_HDB_BUSY_MS        5000      /* wait this long on a locked file */
#define TOOL_HDB_NONE           INT64_MIN /* an unset run or bound */
#define TOOL_HDB_DECISIONS_LAST 64        /* rows of Q_DECISIONS_LAST */

/* The file the tools read without --db: bellowsd's --db default. */
#define TOOL_HDB_DEFAULT_PATH "bellows.db"

typedef struct tool_hdb tool_hdb;

typedef enum tool_hdb_type {
	TOOL_HDB_NULL = 0, /* SQL NULL: not available */
	TOOL_HDB_INT,      /* in i */
	TOOL_HDB_REAL,     /* in d */
	TOOL_HDB_TEXT,     /* in s, NUL-terminated */
	TOOL_HDB_BLOB,     /* in s, len bytes */
} tool_hdb_type;

/* One value of a row. */
typedef struct tool_hdb_cell {
	tool_hdb_type type; /* which member holds the value */
	int64_t i;          /* TOOL_HDB_INT */
	double d;           /* TOOL_HDB_REAL */
	const char *s;      /* TOOL_HDB_TEXT and TOOL_HDB_BLOB */
	size_t len;         /* bytes in s (TEXT: without the NUL) */
} tool_hdb_cell;

/* Where the rows of a question go. The cells passed to `row` are valid
 * for the call only. A callback that returns non-zero stops the query,
 * which returns that value. */
typedef struct tool_hdb_sink {
	int (*columns)(void *arg, uint32_t n_cols,
	    const char *const *names); /* once, before the rows */
	int (*row)(void *arg,
	    const tool_hdb_cell *cells); /* n_cols cells per row */
	void *arg;                       /* passed to both */
} tool_hdb_sink;

/* Rows kept in memory, for output that needs all of them (aligned
 * tables). Owns its names and the values of its cells. */
typedef struct tool_hdb_rows {
	uint32_t n_cols;      /* columns */
	char **names;         /* n_cols column names */
	uint64_t n_rows;      /* rows */
	tool_hdb_cell *cells; /* n_rows x n_cols, row after row */
	uint64_t cap_rows;    /* rows allocated in cells */
} tool_hdb_rows;

/* The questions `bellows history` asks; docs/history.md, "Reading the
 * history with bellows", lists their columns. */
typedef enum tool_hdb_question {
	TOOL_HDB_Q_RUNS,          /* runs (filter: run, job, time) */
	TOOL_HDB_Q_LAYERS,        /* a run's layers and their levels,
				   * applied and decided */
	TOOL_HDB_Q_WINDOWS,       /* a run's windows as a whole */
	TOOL_HDB_Q_LAYER_WINDOWS, /* one layer (filter.layer) per window */
	TOOL_HDB_Q_DECISIONS,     /* a run's decisions and their changes
				   * (window and time: wall_ms) */
	TOOL_HDB_Q_EVENTS,        /* events (filter: run, job, time) */
	TOOL_HDB_Q_TIMINGS,       /* per rank, slowest first */
	TOOL_HDB_Q_TIMINGS_ALL,   /* per rank per window */
	TOOL_HDB_Q_STATS,         /* schema 3 statistics per window:
				   * backward/codec times, memory, gate,
				   * threshold, calibration */
	TOOL_HDB_Q_LAYER_STATS,   /* one layer (filter.layer) per window:
				   * its level and error bound, then
				   * every statistic column the table
				   * gives `windows`, in its order */
	TOOL_HDB_Q_METRICS,       /* what policies computed, per window
				   * (filter.layer: that layer's only) */
	TOOL_HDB_Q_COMM,          /* collectives per window and rank */
	/* `bellows top`'s, which refreshes every second while a run grows:
	 * each reads only the windows it is given, never the whole run. */
	TOOL_HDB_Q_LAYERS_RECENT,   /* every layer once per window of the
				     * range (a layer without one: once,
				     * window NULL), by layer then window */
	TOOL_HDB_Q_LAYER_LEVELS,    /* highest level and window per layer
				     * within the range */
	TOOL_HDB_Q_DECISIONS_LAST,  /* the newest TOOL_HDB_DECISIONS_LAST
				     * decisions within the range, oldest
				     * first, with how many changes each
				     * made (n_changes), not which */
	TOOL_HDB_Q_RESIDUALS,       /* per window: residual floats kept
				     * under the residual plan against one
				     * per parameter, groups, reductions */
	TOOL_HDB_Q_LAYER_RESIDUALS, /* one layer's (filter.layer) residual
				     * statistics per window */
	TOOL_HDB_Q_DECISIONS_CHANGED_LAST, /* as DECISIONS_LAST, of the
					    * decisions that changed a knob
					    * only */
	TOOL_HDB_Q_RANK_STATES,            /* per rank of a run: the last window
					    * it reported within the window range
					    * and that window's last step, and its
					    * last join/loss/exit within the time
					    * range (kind, step) */
	TOOL_HDB_Q_APPLIED_MISSING,        /* windows rows of the range
					    * (filter.layer: its own) and how
					    * many lack an applied level (a
					    * history or an agent older than
					    * it): LAYERS, WINDOWS and
					    * LAYER_WINDOWS show the decided
					    * level there */
	TOOL_HDB_Q_N,
} tool_hdb_question;

/* What a question is restricted to. Fields a question does not use are
 * ignored; TOOL_HDB_NONE (or NULL) leaves a restriction out. */
typedef struct tool_hdb_filter {
	int64_t run;       /* runs.id */
	const char *job;   /* runs.job / events.job */
	int64_t layer;     /* layers.idx (LAYER_WINDOWS, DECISIONS) */
	int64_t window_lo; /* first window, inclusive */
	int64_t window_hi; /* last window, inclusive */
	int64_t time_lo;   /* first wall-clock ms, inclusive (RUNS,
			    * EVENTS, DECISIONS) */
	int64_t time_hi;   /* last wall-clock ms, inclusive */
	bool changed_only; /* DECISIONS: only those that changed a knob */
} tool_hdb_filter;

/* The tables `bellows export` writes, in the order it writes them. */
typedef enum tool_hdb_table {
	TOOL_HDB_T_RUNS,
	TOOL_HDB_T_LAYERS,
	TOOL_HDB_T_RANK_EVENTS,
	TOOL_HDB_T_WINDOW_INFO,
	TOOL_HDB_T_WINDOWS,
	TOOL_HDB_T_TIMINGS,
	TOOL_HDB_T_COMM_SAMPLES,
	TOOL_HDB_T_POLICY_METRICS,
	TOOL_HDB_T_DECISIONS,
	TOOL_HDB_T_DECISION_CHANGES,
	TOOL_HDB_T_EVENTS,
	TOOL_HDB_T_POLICY_FILES,
	TOOL_HDB_T_N,
} tool_hdb_table;

/* A run as the tools name it. */
typedef struct tool_hdb_run {
	int64_t id;              /* runs.id */
	char *job;               /* runs.job, owned */
	int64_t world;           /* ranks */
	int64_t n_layers;        /* layers */
	int64_t started_wall_ms; /* creation time */
	bool live;               /* not ended yet */
} tool_hdb_run;

/* A recorded run as `bellows replay --db` replays it: per closed window
 * that has a row for every layer, what the policies were handed and the
 * state that was in force. Arrays are n_windows (x n_layers, window after
 * window, table order) long; NAN stands for a NULL. */
typedef struct tool_hdb_replay {
	uint32_t n_layers;          /* layers of the run */
	com_layer_info *layers;     /* its layer table, owned */
	uint64_t n_windows;         /* windows taken */
	uint64_t n_skipped;         /* windows lacking rows of some layers */
	uint64_t *window;           /* window indices, increasing */
	double *lr;                 /* LR of the window */
	double *lr_next;            /* LR the next window starts with */
	double *norm_rank0;         /* per layer: rank 0's norm */
	double *norm_mean;          /* per layer: the mean over ranks */
	double *level;              /* per layer: level in force */
	uint32_t *batch_size;       /* batch size knob in force (0 = own) */
	double *lr_scale;           /* LR scale in force */
	struct bellows_window *win; /* per window: everything bellowsd handed
				     * the policies (job NULL, layers' names
				     * and shapes unset): layers point into
				     * layer_stats, comm into comm */
	struct bellows_window_layer *layer_stats; /* n_windows x n_layers;
						   * their array statistics
						   * are owned copies */
	uint64_t n_taken;                         /* entries of layer_stats
						   * filled (whose arrays
						   * destroy frees) */
	struct bellows_comm_sample *comm;         /* the windows' collectives */
	uint64_t n_comm;                          /* entries in comm */
	uint64_t *apply_step;      /* per window: apply step of the
				    * decision in force */
	uint64_t *calibrate_steps; /* per window: its calibrate_steps */
	uint64_t *size_threshold;  /* per window: threshold in force */
	bool *compression_off;     /* per window: gate in force */
	double *resid_plan;        /* n_windows x n_layers x 3: the residual
				    * plan (group, rows, cols) the decision
				    * answering the window set; NAN where
				    * no decision answered it */
	uint64_t *table_hash;      /* per window: tool_table_hash of the
				    * codec table in force (the decision's
				    * with that apply step), 0: none */
} tool_hdb_replay;

/* FNV-1a of a codec table, never 0 for one: 0 when n is 0. */
uint64_t tool_table_hash(const uint8_t *t, size_t n);

/* Opens the database at `path` read-only and checks its schema version.
 * Returns 0 and *ret (the caller's, tool_hdb_close), or with errbuf saying
 * why: BELLOWS_ENOTFOUND (no such file), BELLOWS_EVERSION (a schema newer
 * than TOOL_HDB_SCHEMA_MAX, or not a bellows history), BELLOWS_EIO
 * (SQLite cannot read it), BELLOWS_ENOMEM. */
int tool_hdb_open(const char *path, tool_hdb **ret, char *errbuf,
    size_t errlen);

/* Closes the database. NULL-safe, sets *db to NULL. */
void tool_hdb_close(tool_hdb **db);

/* The file's PRAGMA user_version (1 .. TOOL_HDB_SCHEMA_MAX). */
int tool_hdb_schema_version(const tool_hdb *db);

/* The message of the last failure of a call on `db`. */
const char *tool_hdb_error(const tool_hdb *db);

/* Starts a read transaction: every query until tool_hdb_end sees the same
 * snapshot, however much bellowsd writes meanwhile. Returns 0, or
 * BELLOWS_EIO / BELLOWS_EBUSY (tool_hdb_error says why). */
int tool_hdb_begin(tool_hdb *db);

/* Ends the read transaction. Returns 0 or BELLOWS_EIO. */
int tool_hdb_end(tool_hdb *db);

/* Finds run `id`, or when id is TOOL_HDB_NONE the latest run (of job
 * `job` when not NULL). Returns 0 and *ret (free its job with
 * tool_hdb_run_fini), BELLOWS_ENOTFOUND (no such run, message in
 * tool_hdb_error), BELLOWS_EIO, BELLOWS_EBUSY or BELLOWS_ENOMEM. */
int tool_hdb_run_find(tool_hdb *db, int64_t id, const char *job,
    tool_hdb_run *ret);

/* Frees what a tool_hdb_run owns. NULL-safe. */
void tool_hdb_run_fini(tool_hdb_run *run);

/* Index of layer `name` in run `run`'s table into *ret. Returns 0,
 * BELLOWS_ENOTFOUND, BELLOWS_EIO or BELLOWS_EBUSY. */
int tool_hdb_layer_find(tool_hdb *db, int64_t run, const char *name,
    int64_t *ret);

/* The first window of run `run` that closed at or after wall-clock
 * `ms` (`after` true), or the last one that closed at or before it
 * (`after` false), into *ret; TOOL_HDB_NONE when there is none. Returns
 * 0, BELLOWS_EIO or BELLOWS_EBUSY. */
int tool_hdb_window_at(tool_hdb *db, int64_t run, int64_t ms, bool after,
    int64_t *ret);

/* When window `window` of run `run` closed (wall-clock ms) into *ret;
 * TOOL_HDB_NONE when the run has no such window. Returns 0, BELLOWS_EIO
 * or BELLOWS_EBUSY. */
int tool_hdb_window_closed(tool_hdb *db, int64_t run, int64_t window,
    int64_t *ret);

/* Asks question `q` under filter `f`; its column names and then its rows
 * go to `sink`. Returns 0, what a sink callback returned, BELLOWS_EIO or
 * BELLOWS_EBUSY (tool_hdb_error says why). */
int tool_hdb_query(tool_hdb *db, tool_hdb_question q, const tool_hdb_filter *f,
    const tool_hdb_sink *sink);

/* The name of table `t`, as in the schema. */
const char *tool_hdb_table_name(tool_hdb_table t);

/* Every column of the rows of table `t` that belong to run `run`, in the
 * order they were written, to `sink`. The events are the run's and the
 * daemon's own while the run was live; the policy files are those the
 * run, its events and those daemon events name. BLOBs are passed as
 * they are. Returns as tool_hdb_query. */
int tool_hdb_export(tool_hdb *db, tool_hdb_table t, int64_t run,
    const tool_hdb_sink *sink);

/* Loads run `run` for replay into *ret (the caller's, free with
 * tool_hdb_replay_destroy). Returns 0, BELLOWS_EINVAL (a layer table or
 * row the tools cannot use: message in tool_hdb_error), BELLOWS_EIO,
 * BELLOWS_EBUSY or BELLOWS_ENOMEM. */
int tool_hdb_replay_load(tool_hdb *db, int64_t run, tool_hdb_replay **ret);

/* Frees a replay input. NULL-safe, sets *rp to NULL. */
void tool_hdb_replay_destroy(tool_hdb_replay **rp);

/* Makes `sink` collect rows into `rows`, which must be zeroed or fresh
 * from tool_hdb_rows_fini. */
void tool_hdb_rows_sink(tool_hdb_rows *rows, tool_hdb_sink *sink);

/* Frees what `rows` holds and zeroes it. NULL-safe. */
void tool_hdb_rows_fini(tool_hdb_rows *rows);

/* Cell `col` of row `row`. */
const tool_hdb_cell *tool_hdb_rows_cell(const tool_hdb_rows *rows, uint64_t row,
    uint32_t col);

#endif /* TOOL_HISTORYDB_H */
