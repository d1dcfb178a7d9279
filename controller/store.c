/* store - the SQLite history and its writer thread, see store.h.
 *
 * Three threads touch the store. The event loop fills a batch (typed row
 * arrays, owned by the batch) and hands it to the writer by sending its
 * pointer over an inproc PAIR socket; from then on the writer owns it.
 * The writer appends batches to its queue and writes, first, the firm
 * rows (decisions, events, runs...) of everything queued in one
 * transaction, telling the loop at once that those decisions are durable
 * (DURABLE); then the metric rows, a transaction of at most batch_rows
 * rows at a time, acknowledging each (ACK: the highest ticket done and the
 * rows it covered, so the loop knows how much is in flight), and looking
 * for new decisions between them. A decision thus waits for one
 * transaction of statistics at most, never for a backlog of them. A
 * checkpointer thread, poked by the writer's WAL hook, copies the WAL
 * back into the database with its own short-lived connection: a
 * checkpoint syncs the disk, and doing it beside the writer keeps that
 * out of the commit path of decisions.
 *
 * Failure model: bellowsd may be killed at any moment (SIGKILL, a crash);
 * WAL with synchronous=NORMAL makes every committed transaction survive
 * that. A power loss may lose the last transactions committed before it
 * (they are in the WAL, not yet synced): the price of not syncing on each
 * decision, documented in docs/history.md.
 *
 * When a transaction fails with an error of the environment (disk full,
 * I/O error, busy beyond the busy timeout, read-only, corrupt, cannot
 * open), the writer rolls back, closes its connection, tells the loop
 * (DEGRADED) and retries with backoff, reopening the file each time, the
 * batches kept in order. Any other error is a bug: the batch at the head
 * is dropped and logged so that the rest are not held up.
 */
#include "store.h"

#include "common/clock.h"
#include "log.h"
#include "store_fault.h"
#include "ctl_window.h"

#include <bellows/error.h>

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#define STORE_BUSY_MS           100    /* SQLite busy timeout */
#define STORE_ACK_TIMEOUT_MS    250    /* a decision waits this long at most */
#define STORE_RETRY_MIN_MS      100    /* first retry after a failure */
#define STORE_RETRY_MAX_MS      5000   /* backoff cap */
#define STORE_THIN_EVERY        8      /* windows kept under pressure */
#define STORE_CHECKPOINT_FRAMES 1000   /* WAL pages before a checkpoint */
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

typedef struct store_info_row {
	int64_t run;               /* runs.id */
	uint64_t window;           /* index */
	uint64_t first_step;       /* min over ranks */
	uint64_t last_step;        /* max over ranks */
	uint64_t epoch;            /* rank 0's */
	double lr;                 /* rank 0's */
	double lr_next;            /* rank 0's */
	uint32_t batch_size;       /* reported */
	double lr_scale;           /* in force */
	uint32_t world;            /* ranks */
	uint32_t ranks_reported;   /* in the window */
	uint32_t ranks_expected;   /* live at close */
	bool complete;             /* every expected rank reported */
	double step_ms_median;     /* ms, NAN = none */
	double compute_ms_median;  /* ms */
	double comm_ms_median;     /* ms */
	uint64_t floats_sent;      /* summed */
	uint64_t floats_raw;       /* summed */
	uint64_t wall_ms;          /* closed */
	uint32_t state_batch_size; /* knob in force */
	uint64_t state_threshold;  /* knob in force */
	bool state_off;            /* gate in force */
	double backward_ms_median; /* ms, 0 = not measured */
	double codec_ms_median;    /* ms, 0 = not measured */
	double mem_device_used;    /* bytes, max over ranks */
	double mem_device_total;   /* bytes, min over ranks */
	double mem_host_used;      /* bytes, max over ranks */
	uint64_t state_apply;      /* apply step of the state in force */
	uint64_t state_calibrate;  /* its calibrate_steps */
	double saved_bytes;        /* bytes saved for backward, max */
} store_info_row;

typedef struct store_stat_row {
	int64_t run;              /* runs.id */
	uint64_t window;          /* index */
	uint32_t layer;           /* index */
	double norm_rank0;        /* NAN = none */
	double norm_mean;         /* NAN = none */
	double sum_sq;            /* summed */
	double abs_sum;           /* summed */
	double max_abs;           /* max */
	uint64_t count;           /* summed */
	uint64_t nonzero;         /* summed */
	uint64_t nonfinite;       /* summed */
	double momentum_abs_mean; /* mean */
	double level;             /* in force */
	double error_bound;       /* in force */
	uint64_t act_steps;       /* summed, 0 = not measured */
	double act_lbar;          /* mean over the ranks that measured */
	double act_nonzero;       /* same */
	double act_bytes;         /* same */
	double act_raw_bytes;     /* same */
	double comm_raw_ms;       /* median over ranks, NAN = none */
	double comm_comp_ms;      /* same */
	double codec_ms;          /* same */
	uint32_t comm_raw_n;      /* summed */
	uint32_t comm_comp_n;     /* summed */
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
};

typedef struct store_update_row {
	int64_t run;      /* runs.id */
	uint32_t kind;    /* store_update_kind */
	uint64_t wall_ms; /* for END */
	uint64_t window;  /* for RESUMED: first window superseded */
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
 * the per-rank statistics of the window it answers. The window as the
 * policies saw it (window_info and its windows rows) is firm: recovery
 * replays it into the policies, so it is never dropped and it commits
 * no later than the decision answering it. Tables are written in the
 * order of the fields, so a run's row precedes its updates and a
 * window precedes its decision. */
typedef struct store_batch {
	uint64_t ticket;                         /* numbered by the loop */
	uint32_t rows;                           /* all rows */
	uint32_t metric_rows;                    /* timings + comms +
						  * metrics */
	bool firm_done;                          /* firm rows committed */
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
	ST_BEGIN,
	ST_COMMIT,
	ST_ROLLBACK,
	ST_STAT_N,   /* STORE_MULTI windows rows at once */
	ST_TIMING_N, /* STORE_MULTI timings rows at once */
	ST_MAX,
};

/* Columns of the two tables written most, for their multi-row inserts. */
#define STORE_STAT_INSERT                                                      \
	"INSERT OR REPLACE INTO windows (run_id, window, layer, "              \
	"grad_norm_rank0, grad_norm_mean, sum_sq, abs_sum, max_abs, count, "   \
	"nonzero, nonfinite, momentum_abs_mean, level, error_bound, "          \
	"act_steps, act_lbar, act_nonzero, act_bytes, act_raw_bytes, "         \
	"comm_raw_ms, comm_comp_ms, codec_ms, comm_raw_n, comm_comp_n) VALUES "
#define STORE_STAT_COLS 24
#define STORE_TIMING_INSERT                                                     \
	"INSERT OR REPLACE INTO timings (run_id, window, rank, steps, "         \
	"step_ms, compute_ms, comm_ms, step_ms_max, bytes_sent, floats_sent, "  \
	"floats_raw, decision_misses, reports_dropped, backward_ms, codec_ms, " \
	"mem_device_used, mem_device_total, mem_host_used) VALUES "
#define STORE_TIMING_COLS 18

static const char *const store_sql[ST_MAX] = {
	[ST_FILE] = "INSERT OR IGNORE INTO policy_files (hash, path, text, "
		    "first_seen_wall_ms) VALUES (?1, ?2, ?3, ?4)",
	[ST_RUN] = "INSERT OR IGNORE INTO runs (id, job, world, n_layers, "
		   "started_wall_ms, ended_wall_ms, instance, config_hash, "
		   "first_seq, run_key) VALUES (?1, ?2, ?3, ?4, ?5, NULL, ?6, "
		   "?7, ?8, ?9)",
	[ST_LAYER] = "INSERT OR REPLACE INTO layers (run_id, idx, name, "
		     "numel, ndim, shape) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
	[ST_RANK] = "INSERT INTO rank_events (run_id, rank, wall_ms, kind, "
		    "step, incarnation) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
	[ST_INFO] = "INSERT OR REPLACE INTO window_info (run_id, window, "
		    "first_step, last_step, epoch, lr, lr_next, batch_size, "
		    "lr_scale, world, ranks_reported, ranks_expected, "
		    "complete, step_ms_median, compute_ms_median, "
		    "comm_ms_median, floats_sent, floats_raw, closed_wall_ms, "
		    "state_batch_size, state_size_threshold, "
		    "state_compression_off, backward_ms_median, "
		    "codec_ms_median, mem_device_used, mem_device_total, "
		    "mem_host_used, state_apply_step, state_calibrate_steps, "
		    "saved_bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
		    "?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, "
		    "?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30)",
	[ST_COMM] = "INSERT INTO comm_samples (run_id, window, rank, bytes, "
		    "ms, count, compressed) VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
		    "?7)",
	[ST_METRIC] = "INSERT INTO policy_metrics (run_id, window, policy, "
		      "name, layer, value) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
	/* ST_STAT, ST_TIMING and their _N: store_sql_rows. */
	[ST_DECISION] = "INSERT OR REPLACE INTO decisions (run_id, seq, "
			"apply_step, window, wall_ms, source, policy, reason, "
			"n_layers, levels, error_bounds, batch_size, lr_scale, "
			"size_threshold, compression_off, codec_table, "
			"calibrate_steps) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, "
			"?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
	[ST_CHANGE] = "INSERT INTO decision_changes (run_id, seq, knob, "
		      "layer, old, new) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
	[ST_EVENT] = "INSERT INTO events (wall_ms, run_id, job, kind, text, "
		     "policy_hash) VALUES (?1, (SELECT max(id) FROM runs WHERE "
		     "job = ?2), ?2, ?3, ?4, ?5)",
	[ST_END] = "UPDATE runs SET ended_wall_ms = ?2 WHERE id = ?1",
	[ST_REOPEN] = "UPDATE runs SET ended_wall_ms = NULL WHERE id = ?1",
	[ST_RECOVERED] = "UPDATE runs SET recoveries = recoveries + 1 WHERE "
			 "id = ?1",
	[ST_BEGIN] = "BEGIN IMMEDIATE",
	[ST_COMMIT] = "COMMIT",
	[ST_ROLLBACK] = "ROLLBACK",
};

/* ---- schema ---------------------------------------------------------- */

/* Version 1: the first schema. Never edited: version 2 and later change
 * it by migration, so that an old file and a new one end up the same. */
static const char store_schema_v1[] =
    "CREATE TABLE runs ("
    " id INTEGER PRIMARY KEY,"
    " job TEXT NOT NULL,"
    " world INTEGER NOT NULL,"
    " n_layers INTEGER NOT NULL,"
    " started_wall_ms INTEGER NOT NULL,"
    " ended_wall_ms INTEGER,"
    " instance TEXT NOT NULL,"
    " config_hash TEXT NOT NULL,"
    " first_seq INTEGER NOT NULL);"
    "CREATE INDEX runs_job ON runs (job, id);"
    "CREATE TABLE layers ("
    " run_id INTEGER NOT NULL,"
    " idx INTEGER NOT NULL,"
    " name TEXT NOT NULL,"
    " numel INTEGER NOT NULL,"
    " ndim INTEGER NOT NULL,"
    " shape TEXT NOT NULL,"
    " PRIMARY KEY (run_id, idx)) WITHOUT ROWID;"
    "CREATE TABLE rank_events ("
    " run_id INTEGER NOT NULL,"
    " rank INTEGER NOT NULL,"
    " wall_ms INTEGER NOT NULL,"
    " kind TEXT NOT NULL,"
    " step INTEGER NOT NULL,"
    " incarnation TEXT);"
    "CREATE INDEX rank_events_rank ON rank_events (run_id, rank, wall_ms);"
    "CREATE VIEW ranks AS SELECT run_id, rank,"
    " min(wall_ms) AS first_wall_ms, max(wall_ms) AS last_wall_ms,"
    " sum(kind IN ('joined', 'rejoined')) AS joins,"
    " sum(kind = 'lost') AS losses,"
    " (SELECT e.kind FROM rank_events e WHERE e.run_id = r.run_id"
    "  AND e.rank = r.rank ORDER BY e.wall_ms DESC, e.rowid DESC LIMIT 1)"
    " AS last_kind"
    " FROM rank_events r GROUP BY run_id, rank;"
    "CREATE TABLE window_info ("
    " run_id INTEGER NOT NULL,"
    " window INTEGER NOT NULL,"
    " first_step INTEGER NOT NULL,"
    " last_step INTEGER NOT NULL,"
    " epoch INTEGER NOT NULL,"
    " lr REAL,"
    " lr_next REAL,"
    " batch_size INTEGER NOT NULL,"
    " lr_scale REAL,"
    " world INTEGER NOT NULL,"
    " ranks_reported INTEGER NOT NULL,"
    " ranks_expected INTEGER NOT NULL,"
    " complete INTEGER NOT NULL,"
    " step_ms_median REAL,"
    " compute_ms_median REAL,"
    " comm_ms_median REAL,"
    " floats_sent INTEGER NOT NULL,"
    " floats_raw INTEGER NOT NULL,"
    " closed_wall_ms INTEGER NOT NULL,"
    " state_batch_size INTEGER NOT NULL,"
    " state_size_threshold INTEGER NOT NULL,"
    " state_compression_off INTEGER NOT NULL,"
    " PRIMARY KEY (run_id, window)) WITHOUT ROWID;"
    "CREATE TABLE windows ("
    " run_id INTEGER NOT NULL,"
    " window INTEGER NOT NULL,"
    " layer INTEGER NOT NULL,"
    " grad_norm_rank0 REAL,"
    " grad_norm_mean REAL,"
    " sum_sq REAL,"
    " abs_sum REAL,"
    " max_abs REAL,"
    " count INTEGER NOT NULL,"
    " nonzero INTEGER NOT NULL,"
    " nonfinite INTEGER NOT NULL,"
    " momentum_abs_mean REAL,"
    " level REAL,"
    " error_bound REAL,"
    " PRIMARY KEY (run_id, window, layer)) WITHOUT ROWID;"
    "CREATE TABLE timings ("
    " run_id INTEGER NOT NULL,"
    " window INTEGER NOT NULL,"
    " rank INTEGER NOT NULL,"
    " steps INTEGER NOT NULL,"
    " step_ms REAL,"
    " compute_ms REAL,"
    " comm_ms REAL,"
    " step_ms_max REAL,"
    " bytes_sent INTEGER NOT NULL,"
    " floats_sent INTEGER NOT NULL,"
    " floats_raw INTEGER NOT NULL,"
    " decision_misses INTEGER NOT NULL,"
    " reports_dropped INTEGER NOT NULL,"
    " PRIMARY KEY (run_id, window, rank)) WITHOUT ROWID;"
    "CREATE TABLE decisions ("
    " run_id INTEGER NOT NULL,"
    " seq INTEGER NOT NULL,"
    " apply_step INTEGER NOT NULL,"
    " window INTEGER NOT NULL,"
    " wall_ms INTEGER NOT NULL,"
    " source TEXT NOT NULL,"
    " policy TEXT NOT NULL,"
    " reason TEXT NOT NULL,"
    " n_layers INTEGER NOT NULL,"
    " levels BLOB NOT NULL,"
    " error_bounds BLOB NOT NULL,"
    " batch_size INTEGER NOT NULL,"
    " lr_scale REAL,"
    " size_threshold INTEGER NOT NULL,"
    " compression_off INTEGER NOT NULL,"
    " codec_table BLOB,"
    " PRIMARY KEY (run_id, seq));"
    "CREATE TABLE decision_changes ("
    " run_id INTEGER NOT NULL,"
    " seq INTEGER NOT NULL,"
    " knob TEXT NOT NULL,"
    " layer INTEGER,"
    " old REAL,"
    " new REAL);"
    "CREATE INDEX decision_changes_seq ON decision_changes (run_id, seq);"
    "CREATE INDEX decision_changes_layer ON decision_changes"
    " (run_id, layer, seq);"
    "CREATE TABLE events ("
    " id INTEGER PRIMARY KEY,"
    " wall_ms INTEGER NOT NULL,"
    " run_id INTEGER,"
    " job TEXT,"
    " kind TEXT NOT NULL,"
    " text TEXT NOT NULL,"
    " policy_hash TEXT);"
    "CREATE INDEX events_run ON events (run_id, id);"
    "CREATE INDEX events_kind ON events (kind, wall_ms);"
    "CREATE TABLE policy_files ("
    " hash TEXT PRIMARY KEY,"
    " path TEXT NOT NULL,"
    " text TEXT NOT NULL,"
    " first_seen_wall_ms INTEGER NOT NULL);";

/* The table superseded_T: T's columns after `resume`, no keys (a run
 * resumed twice at one window holds two copies of its rows). */
#define STORE_SUPERSEDED_TABLE(t)                                              \
	"CREATE TABLE superseded_" t " AS SELECT 0 AS resume, * FROM " t       \
	" WHERE 0;"                                                            \
	"CREATE INDEX superseded_" t "_run ON superseded_" t                   \
	" (run_id, resume);"

/* Migrations: store_migrations[v - 1] takes version v to v + 1. */
static const char *const store_migrations[] = {
	/* 1 -> 2: how often a run was recovered; the age retention pass
	 * finds old windows by the time they closed. */
	"ALTER TABLE runs ADD COLUMN recoveries INTEGER NOT NULL DEFAULT 0;"
	"CREATE INDEX window_info_closed ON window_info (closed_wall_ms);",
	/* 2 -> 3 (0.2): activation statistics and per-tensor timings per
	 * layer, backward/codec times and memory per rank and window, the
	 * calibration in force and asked for, every rank's collectives
	 * (comm_samples) and what policies computed (policy_metrics). Rows
	 * written before read as "not measured": 0, or NULL for a time. */
	"ALTER TABLE windows ADD COLUMN act_steps INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE windows ADD COLUMN act_lbar REAL DEFAULT 0;"
	"ALTER TABLE windows ADD COLUMN act_nonzero REAL DEFAULT 0;"
	"ALTER TABLE windows ADD COLUMN act_bytes REAL DEFAULT 0;"
	"ALTER TABLE windows ADD COLUMN act_raw_bytes REAL DEFAULT 0;"
	"ALTER TABLE windows ADD COLUMN comm_raw_ms REAL;"
	"ALTER TABLE windows ADD COLUMN comm_comp_ms REAL;"
	"ALTER TABLE windows ADD COLUMN codec_ms REAL;"
	"ALTER TABLE windows ADD COLUMN comm_raw_n INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE windows ADD COLUMN comm_comp_n INTEGER NOT NULL "
	"DEFAULT 0;"
	"ALTER TABLE window_info ADD COLUMN backward_ms_median REAL DEFAULT 0;"
	"ALTER TABLE window_info ADD COLUMN codec_ms_median REAL DEFAULT 0;"
	"ALTER TABLE window_info ADD COLUMN mem_device_used INTEGER NOT NULL "
	"DEFAULT 0;"
	"ALTER TABLE window_info ADD COLUMN mem_device_total INTEGER NOT NULL "
	"DEFAULT 0;"
	"ALTER TABLE window_info ADD COLUMN mem_host_used INTEGER NOT NULL "
	"DEFAULT 0;"
	"ALTER TABLE window_info ADD COLUMN state_apply_step INTEGER NOT NULL "
	"DEFAULT 0;"
	"ALTER TABLE window_info ADD COLUMN state_calibrate_steps INTEGER NOT "
	"NULL DEFAULT 0;"
	"ALTER TABLE timings ADD COLUMN backward_ms REAL DEFAULT 0;"
	"ALTER TABLE timings ADD COLUMN codec_ms REAL DEFAULT 0;"
	"ALTER TABLE timings ADD COLUMN mem_device_used INTEGER NOT NULL "
	"DEFAULT 0;"
	"ALTER TABLE timings ADD COLUMN mem_device_total INTEGER NOT NULL "
	"DEFAULT 0;"
	"ALTER TABLE timings ADD COLUMN mem_host_used INTEGER NOT NULL "
	"DEFAULT 0;"
	"ALTER TABLE decisions ADD COLUMN calibrate_steps INTEGER NOT NULL "
	"DEFAULT 0;"
	"CREATE TABLE comm_samples ("
	" run_id INTEGER NOT NULL,"
	" window INTEGER NOT NULL,"
	" rank INTEGER NOT NULL,"
	" bytes INTEGER NOT NULL,"
	" ms REAL,"
	" count INTEGER NOT NULL,"
	" compressed INTEGER NOT NULL);"
	"CREATE INDEX comm_samples_window ON comm_samples (run_id, window);"
	"CREATE TABLE policy_metrics ("
	" run_id INTEGER NOT NULL,"
	" window INTEGER NOT NULL,"
	" policy TEXT NOT NULL,"
	" name TEXT NOT NULL,"
	" layer INTEGER,"
	" value REAL);"
	"CREATE INDEX policy_metrics_window ON policy_metrics (run_id, window);"
	"CREATE INDEX policy_metrics_name ON policy_metrics (run_id, name, "
	"window);",
	/* 3 -> 4 (0.3): the bytes one step saved for backward (every
	 * activation), max over ranks; 0 in rows written before. */
	"ALTER TABLE window_info ADD COLUMN saved_bytes INTEGER NOT NULL "
	"DEFAULT 0;",
	/* 4 -> 5 (0.4): runs told apart. A run's launch identity and how
	 * often it was resumed from a checkpoint; a resume at window W
	 * moves the run's rows of windows >= W (decisions answering them,
	 * their changes) to the superseded_* tables, same columns after
	 * `resume` (the runs.resumes count that moved them), so that
	 * every reader of the run sees one line of windows. A later
	 * migration adding a column to a table adds it to its superseded_
	 * twin too. */
	"ALTER TABLE runs ADD COLUMN run_key TEXT NOT NULL DEFAULT '';"
	"ALTER TABLE runs ADD COLUMN resumes INTEGER NOT NULL DEFAULT 0;" STORE_SUPERSEDED_TABLE(
	    "window_info") STORE_SUPERSEDED_TABLE("windows")
	    STORE_SUPERSEDED_TABLE("timings") STORE_SUPERSEDED_TABLE(
		"comm_samples") STORE_SUPERSEDED_TABLE("policy_metrics")
		STORE_SUPERSEDED_TABLE("decisions")
		    STORE_SUPERSEDED_TABLE("decision_changes"),
};

_Static_assert(sizeof(store_migrations) / sizeof(store_migrations[0]) ==
	CTL_STORE_SCHEMA_VERSION - 1,
    "one migration per schema version after the first");

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
};

static atomic_int store_fault_code;
static atomic_uint store_fault_times;

void
ctl_store_fault_arm(int code, uint32_t times)
{
	atomic_store(&store_fault_code, code);
	atomic_store(&store_fault_times, times);
}

/* ---- helpers --------------------------------------------------------- */

static void
store_oom(void)
{
	ctl_log(CTL_LOG_ERROR, "store", "out of memory");
	abort();
}

static char *
store_strdup(const char *s)
{
	char *d;

	if (s == NULL)
		return NULL;
	if ((d = strdup(s)) == NULL)
		store_oom();
	return d;
}

static void
store_grow(void *pv, uint32_t *cap, size_t size)
{
	uint32_t nc = *cap ? *cap * 2 : 16;
	void *old, *v;

	memcpy(&old, pv, sizeof(old));
	v = realloc(old, (size_t)nc * size);
	if (v == NULL)
		store_oom();
	memcpy(pv, &v, sizeof(v));
	*cap = nc;
}

/* Appends an entry to a STORE_VEC and returns it (uninitialised). */
#define STORE_PUSH(vec)                                                        \
	(((vec).n == (vec).cap                                                 \
		 ? store_grow(&(vec).v, &(vec).cap, sizeof(*(vec).v))          \
		 : (void)0),                                                   \
	    &(vec).v[(vec).n++])

void
ctl_store_hash(const char *text, size_t len, char out[CTL_STORE_HASH_LEN])
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++) {
		h ^= (uint8_t)text[i];
		h *= 0x100000001b3ull;
	}
	snprintf(out, CTL_STORE_HASH_LEN, "%016" PRIx64, h);
}

static void
store_hex(uint64_t v, char out[17])
{
	snprintf(out, 17, "%016" PRIx64, v);
}

static const char *
store_source_name(uint32_t source)
{
	switch (source) {
	case CTL_STORE_INITIAL:
		return "initial";
	case CTL_STORE_REPAIR:
		return "repair";
	case CTL_STORE_ADOPTED:
		return "adopted";
	case CTL_STORE_RESUMED:
		return "resumed";
	default:
		return "window";
	}
}

static const char *
store_rank_kind_name(uint32_t kind)
{
	switch (kind) {
	case CTL_STORE_RANK_JOINED:
		return "joined";
	case CTL_STORE_RANK_REJOINED:
		return "rejoined";
	case CTL_STORE_RANK_LOST:
		return "lost";
	default:
		return "left";
	}
}

static void
store_batch_free(store_batch *b)
{
	if (b == NULL)
		return;
	for (uint32_t i = 0; i < b->files.n; i++) {
		free(b->files.v[i].path);
		free(b->files.v[i].text);
	}
	for (uint32_t i = 0; i < b->runs.n; i++) {
		free(b->runs.v[i].job);
		free(b->runs.v[i].run_key);
	}
	for (uint32_t i = 0; i < b->updates.n; i++)
		free(b->updates.v[i].run_key);
	for (uint32_t i = 0; i < b->layers.n; i++)
		free(b->layers.v[i].name);
	for (uint32_t i = 0; i < b->decisions.n; i++)
		com_decision_fini(&b->decisions.v[i].d);
	for (uint32_t i = 0; i < b->metrics.n; i++)
		free(b->metrics.v[i].policy);
	for (uint32_t i = 0; i < b->events.n; i++) {
		free(b->events.v[i].job);
		free(b->events.v[i].kind);
		free(b->events.v[i].text);
		free(b->events.v[i].hash);
	}
	free(b->files.v);
	free(b->runs.v);
	free(b->layers.v);
	free(b->ranks.v);
	free(b->infos.v);
	free(b->stats.v);
	free(b->timings.v);
	free(b->comms.v);
	free(b->metrics.v);
	free(b->decisions.v);
	free(b->changes.v);
	free(b->events.v);
	free(b->updates.v);
	free(b);
}

/* ---- SQLite: open, migrate, prepare ---------------------------------- */

/* True for errors of the environment, worth retrying; anything else is a
 * bug in what we asked SQLite to do. */
static bool
store_rc_transient(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_ERROR:
	case SQLITE_PERM:
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
	case SQLITE_NOMEM:
	case SQLITE_READONLY:
	case SQLITE_IOERR:
	case SQLITE_CORRUPT:
	case SQLITE_FULL:
	case SQLITE_CANTOPEN:
	case SQLITE_PROTOCOL:
	case SQLITE_SCHEMA:
	case SQLITE_NOLFS:
	case SQLITE_AUTH:
	case SQLITE_NOTADB:
		return true;
	default:
		return false;
	}
}

static void
store_set_error(store_writer *w, int rc, const char *what)
{
	const char *msg = w->db != NULL ? sqlite3_errmsg(w->db)
					: sqlite3_errstr(rc);

	snprintf(w->error, sizeof(w->error), "'%s': %s: %s (%s)", w->path, what,
	    msg, sqlite3_errstr(rc));
}

static void
store_db_close(store_writer *w)
{
	for (int i = 0; i < ST_MAX; i++) {
		sqlite3_finalize(w->st[i]);
		w->st[i] = NULL;
	}
	if (w->db != NULL)
		sqlite3_close_v2(w->db);
	w->db = NULL;
}

static int
store_exec(store_writer *w, const char *sql, const char *what)
{
	int rc = sqlite3_exec(w->db, sql, NULL, NULL, NULL);

	if (rc != SQLITE_OK)
		store_set_error(w, rc, what);
	return rc;
}

/* Runs a one-value query into *ret. */
static int
store_query_int(store_writer *w, const char *sql, int64_t *ret)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(w->db, sql, -1, &st, NULL);

	if (rc == SQLITE_OK) {
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW) {
			*ret = sqlite3_column_int64(st, 0);
			rc = SQLITE_OK;
		} else if (rc == SQLITE_DONE) {
			*ret = 0;
			rc = SQLITE_OK;
		}
	}
	if (rc != SQLITE_OK)
		store_set_error(w, rc, sql);
	sqlite3_finalize(st);
	return rc;
}

/* Brings the schema to CTL_STORE_SCHEMA_VERSION, one version per
 * transaction. */
static int
store_migrate(store_writer *w)
{
	int64_t version, tables;
	int rc;

	if ((rc = store_query_int(w, "PRAGMA user_version", &version)) != 0)
		return rc;
	if (version > CTL_STORE_SCHEMA_VERSION) {
		snprintf(w->error, sizeof(w->error),
		    "'%s' has schema version %" PRId64
		    "; this bellowsd understands up to %d: not writing to it "
		    "(use a newer bellowsd or another --db)",
		    w->path, version, CTL_STORE_SCHEMA_VERSION);
		return SQLITE_ERROR;
	}
	if (version == 0) {
		rc = store_query_int(w,
		    "SELECT count(*) FROM sqlite_master WHERE name NOT LIKE "
		    "'sqlite_%'",
		    &tables);
		if (rc != 0)
			return rc;
		if (tables > 0) {
			snprintf(w->error, sizeof(w->error),
			    "'%s' holds tables but no bellows schema version: "
			    "it is not a bellows history; not writing to it",
			    w->path);
			return SQLITE_ERROR;
		}
		if ((rc = store_exec(w, "BEGIN IMMEDIATE", "begin")) != 0)
			return rc;
		if ((rc = store_exec(w, store_schema_v1, "creating schema")) !=
			0 ||
		    (rc = store_exec(w, "PRAGMA user_version = 1",
			 "setting the version")) != 0 ||
		    (rc = store_exec(w, "COMMIT", "commit")) != 0) {
			sqlite3_exec(w->db, "ROLLBACK", NULL, NULL, NULL);
			return rc;
		}
		ctl_log(CTL_LOG_INFO, "store", "'%s': created schema version 1",
		    w->path);
		version = 1;
	}
	while (version < CTL_STORE_SCHEMA_VERSION) {
		char set[64];

		snprintf(set, sizeof(set), "PRAGMA user_version = %" PRId64,
		    version + 1);
		if ((rc = store_exec(w, "BEGIN IMMEDIATE", "begin")) != 0)
			return rc;
		if ((rc = store_exec(w, store_migrations[version - 1],
			 "migrating")) != 0 ||
		    (rc = store_exec(w, set, "setting the version")) != 0 ||
		    (rc = store_exec(w, "COMMIT", "commit")) != 0) {
			sqlite3_exec(w->db, "ROLLBACK", NULL, NULL, NULL);
			return rc;
		}
		ctl_log(CTL_LOG_INFO, "store",
		    "'%s': migrated schema version %" PRId64 " to %" PRId64,
		    w->path, version, version + 1);
		version++;
	}
	return 0;
}

/* sqlite3_wal_hook: replaces auto-checkpointing with a poke to the
 * checkpointer once the WAL has grown. */
static int
store_wal_hook(void *arg, sqlite3 *db, const char *name, int frames)
{
	store_writer *w = arg;

	(void)db;
	(void)name;
	if (frames >= STORE_CHECKPOINT_FRAMES && w->poke != NULL)
		zmq_send(w->poke, "c", 1, ZMQ_DONTWAIT);
	w->wal_full = frames >= STORE_WAL_MAX_FRAMES;
	return SQLITE_OK;
}

static pthread_once_t store_once = PTHREAD_ONCE_INIT;

/* Before SQLite initialises: no global memory statistics, whose mutex
 * every allocation would take (this process has no use for them). A
 * process that used SQLite before keeps its settings. */
static void
store_configure_sqlite(void)
{
	sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

/* The SQL of the inserts of one or STORE_MULTI rows of windows and
 * timings ("... VALUES (?,...), (?,...)"), allocated; NULL for the other
 * statements (in store_sql). */
static char *
store_sql_rows(int which)
{
	const char *head;
	uint32_t cols, rows;
	size_t len, used;
	char *sql;

	switch (which) {
	case ST_STAT:
	case ST_STAT_N:
		head = STORE_STAT_INSERT;
		cols = STORE_STAT_COLS;
		break;
	case ST_TIMING:
	case ST_TIMING_N:
		head = STORE_TIMING_INSERT;
		cols = STORE_TIMING_COLS;
		break;
	default:
		return NULL;
	}
	rows = which == ST_STAT_N || which == ST_TIMING_N ? STORE_MULTI : 1;
	len = strlen(head) + (size_t)rows * (cols * 2 + 3) + 1;
	if ((sql = malloc(len)) == NULL)
		store_oom();
	used = (size_t)snprintf(sql, len, "%s", head);
	for (uint32_t r = 0; r < rows; r++) {
		sql[used++] = r > 0 ? ',' : '(';
		if (r > 0)
			sql[used++] = '(';
		for (uint32_t c = 0; c < cols; c++) {
			sql[used++] = '?';
			sql[used++] = c + 1 < cols ? ',' : ')';
		}
	}
	sql[used] = '\0';
	return sql;
}

/* Creates the database file with store.mode before SQLite opens it, so
 * that it never exists with wider permissions, whatever the umask (the
 * mode is set with fchmod, which the umask does not touch). SQLite
 * gives its -wal and -shm files the database's permissions. An existing
 * file keeps its mode: a wider one is warned about, not changed. */
static void
store_db_create(store_writer *w)
{
	mode_t want = (mode_t)(w->conf.mode != 0 ? w->conf.mode : 0600);
	struct stat st;
	int fd;

	fd = open(w->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, want);
	if (fd >= 0) {
		if (fchmod(fd, want) != 0)
			ctl_log(CTL_LOG_WARN, "store",
			    "cannot set mode %04o on '%s': %s", (unsigned)want,
			    w->path, strerror(errno));
		close(fd);
		return;
	}
	if (errno == EEXIST && stat(w->path, &st) == 0 &&
	    (st.st_mode & 0777 & ~want) != 0 && !w->mode_warned) {
		w->mode_warned = true;
		ctl_log(CTL_LOG_WARN, "store",
		    "'%s' has mode %04o, wider than store.mode %04o: others "
		    "may read the history (chmod it)",
		    w->path, (unsigned)(st.st_mode & 0777), (unsigned)want);
	}
}

/* Opens the file, switches it to WAL, migrates it and prepares the
 * statements. On failure w->error says why and the connection is closed. */
static int
store_db_open(store_writer *w)
{
	const char *mode = NULL;
	sqlite3_stmt *st = NULL;
	int rc;

	assert(w->db == NULL);
	pthread_once(&store_once, store_configure_sqlite);
	store_db_create(w);
	rc = sqlite3_open_v2(w->path, &w->db,
	    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
	    NULL);
	if (rc != SQLITE_OK) {
		store_set_error(w, rc, "cannot open");
		goto fail;
	}
	sqlite3_extended_result_codes(w->db, 1);
	sqlite3_busy_timeout(w->db, STORE_BUSY_MS);
	rc = sqlite3_prepare_v2(w->db, "PRAGMA journal_mode = WAL", -1, &st,
	    NULL);
	if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		mode = (const char *)sqlite3_column_text(st, 0);
		rc = mode != NULL && strcmp(mode, "wal") == 0 ? SQLITE_OK
							      : SQLITE_CANTOPEN;
		if (rc != SQLITE_OK)
			snprintf(w->error, sizeof(w->error),
			    "'%s': cannot switch to WAL (journal mode '%s')",
			    w->path, mode != NULL ? mode : "?");
	} else {
		store_set_error(w, rc, "cannot read");
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_OK)
		goto fail;
	/* NORMAL: a commit is durable against the process dying (the
	 * failure model); only a power loss can take the last ones. A
	 * larger page cache keeps the b-trees' hot pages of a run in
	 * memory between transactions. */
	if ((rc = store_exec(w, "PRAGMA synchronous = NORMAL",
		 "setting synchronous")) != 0 ||
	    (rc = store_exec(w, "PRAGMA cache_size = -16384",
		 "setting the cache size")) != 0 ||
	    (rc = store_exec(w, "PRAGMA journal_size_limit = 67108864",
		 "setting the WAL size limit")) != 0 ||
	    (rc = store_migrate(w)) != 0)
		goto fail;
	for (int i = 0; i < ST_MAX; i++) {
		char *sql = store_sql_rows(i);

		rc = sqlite3_prepare_v3(w->db, sql != NULL ? sql : store_sql[i],
		    -1, SQLITE_PREPARE_PERSISTENT, &w->st[i], NULL);
		free(sql);
		if (rc != SQLITE_OK) {
			store_set_error(w, rc, "preparing statements");
			goto fail;
		}
	}
	sqlite3_wal_hook(w->db, store_wal_hook, w);
	return 0;
fail:
	store_db_close(w);
	return rc != SQLITE_OK ? rc : SQLITE_ERROR;
}

/* ---- the writer: rows -------------------------------------------------- */

static void
store_bind_real(sqlite3_stmt *st, int i, double v)
{
	if (isnan(v))
		sqlite3_bind_null(st, i);
	else
		sqlite3_bind_double(st, i, v);
}

static void
store_bind_u64(sqlite3_stmt *st, int i, uint64_t v)
{
	/* Counters beyond 2^63 cannot happen honestly; clamp rather than
	 * wrap to a negative number. */
	sqlite3_bind_int64(st, i, v > INT64_MAX ? INT64_MAX : (int64_t)v);
}

/* A byte count the policy view holds as a double, as an INTEGER. */
static void
store_bind_bytes(sqlite3_stmt *st, int i, double v)
{
	if (!(v > 0))
		sqlite3_bind_int64(st, i, 0);
	else if (v >= 9223372036854775807.0)
		sqlite3_bind_int64(st, i, INT64_MAX);
	else
		sqlite3_bind_int64(st, i, (int64_t)v);
}

static void
store_bind_text(sqlite3_stmt *st, int i, const char *s)
{
	sqlite3_bind_text(st, i, s != NULL ? s : "", -1, SQLITE_STATIC);
}

/* Steps an insert or update and resets it. */
static int
store_step(sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	sqlite3_reset(st);
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int
store_write_file(store_writer *w, const store_file_row *r)
{
	sqlite3_stmt *st = w->st[ST_FILE];

	store_bind_text(st, 1, r->hash);
	store_bind_text(st, 2, r->path);
	store_bind_text(st, 3, r->text);
	store_bind_u64(st, 4, r->wall_ms);
	return store_step(st);
}

static int
store_write_run(store_writer *w, const store_run_row *r)
{
	sqlite3_stmt *st = w->st[ST_RUN];
	char inst[17];

	store_hex(r->instance, inst);
	sqlite3_bind_int64(st, 1, r->id);
	store_bind_text(st, 2, r->job);
	sqlite3_bind_int64(st, 3, r->world);
	sqlite3_bind_int64(st, 4, r->n_layers);
	store_bind_u64(st, 5, r->wall_ms);
	store_bind_text(st, 6, inst);
	store_bind_text(st, 7, r->hash);
	store_bind_u64(st, 8, r->first_seq);
	store_bind_text(st, 9, r->run_key != NULL ? r->run_key : "");
	return store_step(st);
}

static int
store_write_layer(store_writer *w, const store_layer_row *r)
{
	sqlite3_stmt *st = w->st[ST_LAYER];
	char shape[COM_MAX_NDIM * 11 + 1] = "";
	size_t used = 0;

	for (uint32_t d = 0; d < r->ndim && d < COM_MAX_NDIM; d++)
		used += (size_t)snprintf(shape + used, sizeof(shape) - used,
		    "%s%u", d > 0 ? "x" : "", r->shape[d]);
	sqlite3_bind_int64(st, 1, r->run);
	sqlite3_bind_int64(st, 2, r->idx);
	store_bind_text(st, 3, r->name);
	store_bind_u64(st, 4, r->numel);
	sqlite3_bind_int64(st, 5, r->ndim);
	store_bind_text(st, 6, shape);
	return store_step(st);
}

static int
store_write_rank(store_writer *w, const store_rank_row *r)
{
	sqlite3_stmt *st = w->st[ST_RANK];
	char inc[17];

	sqlite3_bind_int64(st, 1, r->run);
	sqlite3_bind_int64(st, 2, r->rank);
	store_bind_u64(st, 3, r->wall_ms);
	store_bind_text(st, 4, store_rank_kind_name(r->kind));
	store_bind_u64(st, 5, r->step);
	if (r->incarnation != 0) {
		store_hex(r->incarnation, inc);
		store_bind_text(st, 6, inc);
	} else {
		sqlite3_bind_null(st, 6);
	}
	return store_step(st);
}

static void
store_note_window(store_writer *w, int64_t run, uint64_t window)
{
	for (uint32_t i = 0; i < w->thin.n; i++) {
		if (w->thin.v[i].run == run) {
			if (window > w->thin.v[i].max_window)
				w->thin.v[i].max_window = window;
			return;
		}
	}
	*STORE_PUSH(w->thin) = (store_thin){ run, window, 0 };
}

static int
store_write_info(store_writer *w, const store_info_row *r)
{
	sqlite3_stmt *st = w->st[ST_INFO];

	sqlite3_bind_int64(st, 1, r->run);
	store_bind_u64(st, 2, r->window);
	store_bind_u64(st, 3, r->first_step);
	store_bind_u64(st, 4, r->last_step);
	store_bind_u64(st, 5, r->epoch);
	store_bind_real(st, 6, r->lr);
	store_bind_real(st, 7, r->lr_next);
	sqlite3_bind_int64(st, 8, r->batch_size);
	store_bind_real(st, 9, r->lr_scale);
	sqlite3_bind_int64(st, 10, r->world);
	sqlite3_bind_int64(st, 11, r->ranks_reported);
	sqlite3_bind_int64(st, 12, r->ranks_expected);
	sqlite3_bind_int(st, 13, r->complete);
	store_bind_real(st, 14, r->step_ms_median);
	store_bind_real(st, 15, r->compute_ms_median);
	store_bind_real(st, 16, r->comm_ms_median);
	store_bind_u64(st, 17, r->floats_sent);
	store_bind_u64(st, 18, r->floats_raw);
	store_bind_u64(st, 19, r->wall_ms);
	sqlite3_bind_int64(st, 20, r->state_batch_size);
	store_bind_u64(st, 21, r->state_threshold);
	sqlite3_bind_int(st, 22, r->state_off);
	store_bind_real(st, 23, r->backward_ms_median);
	store_bind_real(st, 24, r->codec_ms_median);
	store_bind_bytes(st, 25, r->mem_device_used);
	store_bind_bytes(st, 26, r->mem_device_total);
	store_bind_bytes(st, 27, r->mem_host_used);
	store_bind_u64(st, 28, r->state_apply);
	store_bind_u64(st, 29, r->state_calibrate);
	store_bind_bytes(st, 30, r->saved_bytes);
	return store_step(st);
}

static int
store_write_comm(store_writer *w, const store_comm_row *r)
{
	sqlite3_stmt *st = w->st[ST_COMM];

	sqlite3_bind_int64(st, 1, r->run);
	store_bind_u64(st, 2, r->window);
	sqlite3_bind_int64(st, 3, r->rank);
	store_bind_u64(st, 4, r->bytes);
	store_bind_real(st, 5, r->ms);
	sqlite3_bind_int64(st, 6, r->count);
	sqlite3_bind_int(st, 7, r->compressed);
	return store_step(st);
}

static int
store_write_metric(store_writer *w, const store_metric_row *r)
{
	sqlite3_stmt *st = w->st[ST_METRIC];

	sqlite3_bind_int64(st, 1, r->run);
	store_bind_u64(st, 2, r->window);
	store_bind_text(st, 3, r->policy);
	store_bind_text(st, 4, r->name);
	if (r->layer >= 0)
		sqlite3_bind_int64(st, 5, r->layer);
	else
		sqlite3_bind_null(st, 5);
	store_bind_real(st, 6, r->value);
	return store_step(st);
}

/* Binds a windows row at parameters base + 1 .. base + 24. */
static void
store_bind_stat(sqlite3_stmt *st, int base, const store_stat_row *r)
{
	sqlite3_bind_int64(st, base + 1, r->run);
	store_bind_u64(st, base + 2, r->window);
	sqlite3_bind_int64(st, base + 3, r->layer);
	store_bind_real(st, base + 4, r->norm_rank0);
	store_bind_real(st, base + 5, r->norm_mean);
	store_bind_real(st, base + 6, r->sum_sq);
	store_bind_real(st, base + 7, r->abs_sum);
	store_bind_real(st, base + 8, r->max_abs);
	store_bind_u64(st, base + 9, r->count);
	store_bind_u64(st, base + 10, r->nonzero);
	store_bind_u64(st, base + 11, r->nonfinite);
	store_bind_real(st, base + 12, r->momentum_abs_mean);
	store_bind_real(st, base + 13, r->level);
	store_bind_real(st, base + 14, r->error_bound);
	store_bind_u64(st, base + 15, r->act_steps);
	store_bind_real(st, base + 16, r->act_lbar);
	store_bind_real(st, base + 17, r->act_nonzero);
	store_bind_real(st, base + 18, r->act_bytes);
	store_bind_real(st, base + 19, r->act_raw_bytes);
	store_bind_real(st, base + 20, r->comm_raw_ms);
	store_bind_real(st, base + 21, r->comm_comp_ms);
	store_bind_real(st, base + 22, r->codec_ms);
	sqlite3_bind_int64(st, base + 23, r->comm_raw_n);
	sqlite3_bind_int64(st, base + 24, r->comm_comp_n);
}

/* Binds a timings row at parameters base + 1 .. base + 18. */
static void
store_bind_timing(sqlite3_stmt *st, int base, const store_timing_row *r)
{
	sqlite3_bind_int64(st, base + 1, r->run);
	store_bind_u64(st, base + 2, r->window);
	sqlite3_bind_int64(st, base + 3, r->rank);
	sqlite3_bind_int64(st, base + 4, r->t.steps);
	store_bind_real(st, base + 5, r->t.step_ms);
	store_bind_real(st, base + 6, r->t.compute_ms);
	store_bind_real(st, base + 7, r->t.comm_ms);
	store_bind_real(st, base + 8, r->t.step_ms_max);
	store_bind_u64(st, base + 9, r->t.bytes_sent);
	store_bind_u64(st, base + 10, r->t.floats_sent);
	store_bind_u64(st, base + 11, r->t.floats_raw);
	sqlite3_bind_int64(st, base + 12, r->t.decision_misses);
	store_bind_u64(st, base + 13, r->t.reports_dropped);
	store_bind_real(st, base + 14, r->t.backward_ms);
	store_bind_real(st, base + 15, r->t.codec_ms);
	store_bind_u64(st, base + 16, r->t.mem_device_used);
	store_bind_u64(st, base + 17, r->t.mem_device_total);
	store_bind_u64(st, base + 18, r->t.mem_host_used);
}

/* Writes a batch's windows rows, STORE_MULTI per statement, then the
 * remainder one by one. */
static int
store_write_stats(store_writer *w, const store_batch *b)
{
	uint32_t i = 0;
	int rc = SQLITE_OK;

	for (; rc == SQLITE_OK && i + STORE_MULTI <= b->stats.n;
	     i += STORE_MULTI) {
		for (int k = 0; k < STORE_MULTI; k++)
			store_bind_stat(w->st[ST_STAT_N], k * STORE_STAT_COLS,
			    &b->stats.v[i + k]);
		rc = store_step(w->st[ST_STAT_N]);
	}
	for (; rc == SQLITE_OK && i < b->stats.n; i++) {
		store_bind_stat(w->st[ST_STAT], 0, &b->stats.v[i]);
		rc = store_step(w->st[ST_STAT]);
	}
	return rc;
}

/* Same for timings. */
static int
store_write_timings(store_writer *w, const store_batch *b)
{
	uint32_t i = 0;
	int rc = SQLITE_OK;

	for (; rc == SQLITE_OK && i + STORE_MULTI <= b->timings.n;
	     i += STORE_MULTI) {
		for (int k = 0; k < STORE_MULTI; k++)
			store_bind_timing(w->st[ST_TIMING_N],
			    k * STORE_TIMING_COLS, &b->timings.v[i + k]);
		rc = store_step(w->st[ST_TIMING_N]);
	}
	for (; rc == SQLITE_OK && i < b->timings.n; i++) {
		store_bind_timing(w->st[ST_TIMING], 0, &b->timings.v[i]);
		rc = store_step(w->st[ST_TIMING]);
	}
	return rc;
}

/* n doubles as the little-endian BLOB docs/history.md describes. */
static int
store_bind_doubles(sqlite3_stmt *st, int i, const double *v, uint32_t n)
{
	uint8_t *buf = malloc(n ? (size_t)n * 8 : 1);

	if (buf == NULL)
		store_oom();
	for (uint32_t k = 0; k < n; k++) {
		uint64_t bits;

		memcpy(&bits, &v[k], 8);
		for (int b = 0; b < 8; b++)
			buf[k * 8 + b] = (uint8_t)(bits >> (8 * b));
	}
	return sqlite3_bind_blob(st, i, buf, (int)(n * 8), free);
}

static int
store_write_decision(store_writer *w, const store_decision_row *r)
{
	sqlite3_stmt *st = w->st[ST_DECISION];
	const com_decision *d = &r->d;

	sqlite3_bind_int64(st, 1, r->run);
	store_bind_u64(st, 2, d->seq);
	store_bind_u64(st, 3, d->apply_step);
	store_bind_u64(st, 4, d->window);
	store_bind_u64(st, 5, r->wall_ms);
	store_bind_text(st, 6, store_source_name(r->source));
	store_bind_text(st, 7, d->policy);
	store_bind_text(st, 8, d->reason);
	sqlite3_bind_int64(st, 9, d->n_layers);
	store_bind_doubles(st, 10, d->level, d->n_layers);
	store_bind_doubles(st, 11, d->error_bound, d->n_layers);
	sqlite3_bind_int64(st, 12, d->batch_size);
	store_bind_real(st, 13, d->lr_scale);
	store_bind_u64(st, 14, d->size_threshold);
	sqlite3_bind_int(st, 15, d->compression_off);
	if (d->codec_table != NULL)
		sqlite3_bind_blob(st, 16, d->codec_table,
		    (int)d->codec_table_len, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 16);
	store_bind_u64(st, 17, d->calibrate_steps);
	return store_step(st);
}

static int
store_write_change(store_writer *w, const store_change_row *r)
{
	sqlite3_stmt *st = w->st[ST_CHANGE];

	sqlite3_bind_int64(st, 1, r->run);
	store_bind_u64(st, 2, r->seq);
	store_bind_text(st, 3, r->knob);
	if (r->layer >= 0)
		sqlite3_bind_int64(st, 4, r->layer);
	else
		sqlite3_bind_null(st, 4);
	if (r->has_old)
		store_bind_real(st, 5, r->old);
	else
		sqlite3_bind_null(st, 5);
	store_bind_real(st, 6, r->now);
	return store_step(st);
}

static int
store_write_event(store_writer *w, const store_event_row *r)
{
	sqlite3_stmt *st = w->st[ST_EVENT];

	store_bind_u64(st, 1, r->wall_ms);
	if (r->job != NULL)
		store_bind_text(st, 2, r->job);
	else
		sqlite3_bind_null(st, 2);
	store_bind_text(st, 3, r->kind);
	store_bind_text(st, 4, r->text);
	if (r->hash != NULL)
		store_bind_text(st, 5, r->hash);
	else
		sqlite3_bind_null(st, 5);
	return store_step(st);
}

static sqlite3_stmt *store_select(store_writer *w, const char *sql, int64_t run,
    int64_t limit);

/* A run resumed at r->window: counts the resume, takes the new launch's
 * identity, and moves the rows of the windows it gives up (and of the
 * decisions answering them) to the superseded_* tables. Run inside the
 * batch's transaction; the loop hands this row over alone in its batch,
 * after everything recorded before it was committed (jobs.c), so no
 * row of the abandoned windows is still on its way. */
static int
store_write_resumed(store_writer *w, const store_update_row *r)
{
	/* Tables keyed by window; decisions by the window they answer
	 * (+1), their changes by seq. */
	static const char *const by_window[] = { "window_info", "windows",
		"timings", "comm_samples", "policy_metrics" };
	sqlite3_stmt *st;
	char sql[1024];
	int rc;

	st = store_select(w,
	    "UPDATE runs SET resumes = resumes + 1, run_key = ?3, "
	    "ended_wall_ms = NULL WHERE id = ?1",
	    r->run, 0);
	if (st == NULL)
		return sqlite3_errcode(w->db);
	store_bind_text(st, 3, r->run_key != NULL ? r->run_key : "");
	rc = store_step(st);
	sqlite3_finalize(st);
	for (size_t i = 0; rc == SQLITE_OK && i < 7; i++) {
		const char *t = i < 5 ? by_window[i]
		    : i == 5          ? "decision_changes"
				      : "decisions";
		char cond[256];

		/* Numbers only: nothing of the wire reaches this text. */
		if (i < 5)
			snprintf(cond, sizeof(cond),
			    "run_id = %" PRId64 " AND window >= %" PRIu64,
			    r->run, r->window);
		else if (i == 5)
			snprintf(cond, sizeof(cond),
			    "run_id = %" PRId64 " AND seq IN (SELECT seq FROM "
			    "decisions WHERE run_id = %" PRId64
			    " AND window > %" PRIu64 ")",
			    r->run, r->run, r->window);
		else
			snprintf(cond, sizeof(cond),
			    "run_id = %" PRId64 " AND window > %" PRIu64,
			    r->run, r->window);
		snprintf(sql, sizeof(sql),
		    "INSERT INTO superseded_%s SELECT (SELECT resumes FROM "
		    "runs WHERE id = %" PRId64 "), * FROM %s WHERE %s; "
		    "DELETE FROM %s WHERE %s;",
		    t, r->run, t, cond, t, cond);
		rc = sqlite3_exec(w->db, sql, NULL, NULL, NULL);
	}
	return rc;
}

static int
store_write_update(store_writer *w, const store_update_row *r)
{
	sqlite3_stmt *st;

	switch (r->kind) {
	case STORE_UPDATE_END:
		st = w->st[ST_END];
		sqlite3_bind_int64(st, 1, r->run);
		store_bind_u64(st, 2, r->wall_ms);
		break;
	case STORE_UPDATE_REOPEN:
		st = w->st[ST_REOPEN];
		sqlite3_bind_int64(st, 1, r->run);
		break;
	case STORE_UPDATE_RESUMED:
		return store_write_resumed(w, r);
	default:
		st = w->st[ST_RECOVERED];
		sqlite3_bind_int64(st, 1, r->run);
		break;
	}
	return store_step(st);
}

static bool
store_batch_firm(const store_batch *b)
{
	return !b->firm_done &&
	    (b->files.n | b->runs.n | b->layers.n | b->ranks.n | b->infos.n |
		b->stats.n | b->decisions.n | b->events.n | b->updates.n) != 0;
}

static bool
store_batch_rest(const store_batch *b)
{
	return (b->timings.n | b->comms.n | b->metrics.n | b->changes.n) != 0;
}

#define STORE_WRITE_ALL(vec, fn)                                               \
	for (uint32_t i = 0; rc == SQLITE_OK && i < b->vec.n; i++)             \
		rc = fn(w, &b->vec.v[i]);

/* Writes b's firm rows inside the caller's transaction. */
static int
store_write_firm(store_writer *w, const store_batch *b)
{
	int rc = SQLITE_OK;

	if (b->firm_done)
		return rc;
	STORE_WRITE_ALL(files, store_write_file)
	STORE_WRITE_ALL(runs, store_write_run)
	STORE_WRITE_ALL(layers, store_write_layer)
	STORE_WRITE_ALL(ranks, store_write_rank)
	STORE_WRITE_ALL(infos, store_write_info)
	if (rc == SQLITE_OK)
		rc = store_write_stats(w, b);
	STORE_WRITE_ALL(decisions, store_write_decision)
	STORE_WRITE_ALL(events, store_write_event)
	STORE_WRITE_ALL(updates, store_write_update)
	return rc;
}

/* Writes b's metric rows (per rank and per policy) and decision changes
 * inside the caller's transaction. */
static int
store_write_rest(store_writer *w, const store_batch *b)
{
	int rc = store_write_timings(w, b);

	STORE_WRITE_ALL(comms, store_write_comm)
	STORE_WRITE_ALL(metrics, store_write_metric)
	STORE_WRITE_ALL(changes, store_write_change)
	return rc;
}
#undef STORE_WRITE_ALL

/* One transaction over n batches from `first`, writing one part of
 * each. */
static int
store_write_txn(store_writer *w, const store_batch *first, uint32_t n,
    int (*part)(store_writer *, const store_batch *))
{
	const store_batch *b = first;
	uint32_t times;
	int rc;

	rc = store_step(w->st[ST_BEGIN]);
	if (rc != SQLITE_OK) {
		store_set_error(w, rc, "cannot begin a transaction");
		return rc;
	}
	for (uint32_t i = 0; i < n && rc == SQLITE_OK; i++, b = b->next)
		rc = part(w, b);
	if (rc != SQLITE_OK) {
		store_set_error(w, rc, "cannot write");
	} else if ((times = atomic_load(&store_fault_times)) > 0) {
		atomic_store(&store_fault_times, times - 1);
		rc = atomic_load(&store_fault_code);
		snprintf(w->error, sizeof(w->error), "'%s': %s (injected)",
		    w->path, sqlite3_errstr(rc));
	} else {
		rc = store_step(w->st[ST_COMMIT]);
		if (rc != SQLITE_OK)
			store_set_error(w, rc, "cannot commit");
	}
	if (rc != SQLITE_OK && !sqlite3_get_autocommit(w->db))
		store_step(w->st[ST_ROLLBACK]);
	return rc;
}

static void store_writer_send(store_writer *w, const store_msg *m);

/* Writes the firm rows of every queued batch up to the last one that has
 * any, in one transaction, and tells the loop their decisions are
 * durable. Returns 0 when there was nothing to write. */
static int
store_write_firm_all(store_writer *w)
{
	store_msg m = { .type = STORE_MSG_DURABLE };
	uint32_t n = 0, i = 0;
	store_batch *b;
	int rc;

	for (b = w->head; b != NULL; b = b->next) {
		i++;
		if (store_batch_firm(b))
			n = i;
	}
	if (n == 0)
		return SQLITE_OK;
	if ((rc = store_write_txn(w, w->head, n, store_write_firm)) != 0)
		return rc;
	b = w->head;
	for (i = 0; i < n; i++, b = b->next) {
		if (!b->firm_done) {
			for (uint32_t k = 0; k < b->infos.n; k++)
				store_note_window(w, b->infos.v[k].run,
				    b->infos.v[k].window);
			w->age_due = w->age_due || b->infos.n > 0;
		}
		b->firm_done = true;
		m.ticket = b->ticket;
	}
	store_writer_send(w, &m);
	return SQLITE_OK;
}

/* Writes the rest (metric rows, decision changes) of the first n batches,
 * whose firm rows are in, in one transaction. */
static int
store_write_rest_n(store_writer *w, uint32_t n)
{
	bool rest = false;
	store_batch *b = w->head;
	int rc;

	for (uint32_t i = 0; i < n; i++, b = b->next)
		rest = rest || store_batch_rest(b);
	if (rest &&
	    (rc = store_write_txn(w, w->head, n, store_write_rest)) != 0)
		return rc;
	return SQLITE_OK;
}

/* ---- the writer: retention ------------------------------------------- */

static int
store_delete(store_writer *w, const char *sql, int64_t a, int64_t b, int64_t c,
    int64_t d)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(w->db, sql, -1, &st, NULL);

	if (rc == SQLITE_OK) {
		sqlite3_bind_int64(st, 1, a);
		sqlite3_bind_int64(st, 2, b);
		sqlite3_bind_int64(st, 3, c);
		sqlite3_bind_int64(st, 4, d);
		rc = store_step(st);
	}
	sqlite3_finalize(st);
	return rc;
}

/* Thins windows [from, to) of a run: only every keep_every-th keeps its
 * metric rows. */
static int
store_thin_range(store_writer *w, int64_t run, uint64_t from, uint64_t to)
{
	static const char *const sql[] = {
		"DELETE FROM windows WHERE run_id = ?1 AND window >= ?2 AND "
		"window < ?3 AND window % ?4 != 0",
		"DELETE FROM timings WHERE run_id = ?1 AND window >= ?2 AND "
		"window < ?3 AND window % ?4 != 0",
		"DELETE FROM comm_samples WHERE run_id = ?1 AND window >= ?2 "
		"AND window < ?3 AND window % ?4 != 0",
		"DELETE FROM policy_metrics WHERE run_id = ?1 AND window >= ?2 "
		"AND window < ?3 AND window % ?4 != 0",
		"DELETE FROM window_info WHERE run_id = ?1 AND window >= ?2 "
		"AND window < ?3 AND window % ?4 != 0",
	};
	int rc = store_step(w->st[ST_BEGIN]);

	for (size_t i = 0; rc == SQLITE_OK && i < sizeof(sql) / sizeof(sql[0]);
	     i++)
		rc = store_delete(w, sql[i], run, (int64_t)from, (int64_t)to,
		    w->conf.keep_every);
	if (rc == SQLITE_OK)
		rc = store_step(w->st[ST_COMMIT]);
	if (rc != SQLITE_OK && !sqlite3_get_autocommit(w->db))
		store_step(w->st[ST_ROLLBACK]);
	return rc;
}

static int
store_age_pass(store_writer *w, uint64_t now_wall)
{
	static const char *const sql[] = {
		"DELETE FROM windows WHERE (run_id, window) IN (SELECT "
		"run_id, window FROM window_info WHERE closed_wall_ms < ?1 "
		"AND window % ?2 != 0)",
		"DELETE FROM timings WHERE (run_id, window) IN (SELECT "
		"run_id, window FROM window_info WHERE closed_wall_ms < ?1 "
		"AND window % ?2 != 0)",
		"DELETE FROM comm_samples WHERE (run_id, window) IN (SELECT "
		"run_id, window FROM window_info WHERE closed_wall_ms < ?1 "
		"AND window % ?2 != 0)",
		"DELETE FROM policy_metrics WHERE (run_id, window) IN (SELECT "
		"run_id, window FROM window_info WHERE closed_wall_ms < ?1 "
		"AND window % ?2 != 0)",
		"DELETE FROM window_info WHERE closed_wall_ms < ?1 AND "
		"window % ?2 != 0",
	};
	int64_t cutoff = (int64_t)now_wall -
	    (int64_t)w->conf.max_age_days * 86400000;
	int rc = store_step(w->st[ST_BEGIN]);

	for (size_t i = 0; rc == SQLITE_OK && i < sizeof(sql) / sizeof(sql[0]);
	     i++)
		rc = store_delete(w, sql[i], cutoff, w->conf.keep_every, 0, 0);
	if (rc == SQLITE_OK)
		rc = store_step(w->st[ST_COMMIT]);
	if (rc != SQLITE_OK && !sqlite3_get_autocommit(w->db))
		store_step(w->st[ST_ROLLBACK]);
	return rc;
}

/* One step of retention, when there is nothing else to do. Failures are
 * logged and left for the next pass: retention never degrades the
 * store. */
static void
store_retention(store_writer *w, uint64_t now)
{
	uint32_t keep = w->conf.max_windows_per_run;
	int rc;

	if (w->db == NULL || w->conf.keep_every < 2)
		return;
	for (uint32_t i = 0; keep > 0 && i < w->thin.n; i++) {
		store_thin *t = &w->thin.v[i];
		uint64_t to;

		if (t->max_window < (uint64_t)keep + STORE_THIN_STEP ||
		    t->max_window - keep < t->thinned_to + STORE_THIN_STEP)
			continue;
		to = t->max_window - keep;
		rc = store_thin_range(w, t->run, t->thinned_to, to);
		if (rc != SQLITE_OK) {
			ctl_log(CTL_LOG_WARN, "store",
			    "'%s': thinning run %" PRId64 ": %s", w->path,
			    t->run, sqlite3_errmsg(w->db));
			return;
		}
		t->thinned_to = to;
		return; /* one range per idle moment */
	}
	if (w->conf.max_age_days > 0 && w->age_due && now >= w->next_age_ms) {
		w->next_age_ms = now + STORE_AGE_PASS_MS;
		w->age_due = false;
		rc = store_age_pass(w, com_clock_wall_ms());
		if (rc != SQLITE_OK)
			ctl_log(CTL_LOG_WARN, "store",
			    "'%s': age retention: %s", w->path,
			    sqlite3_errmsg(w->db));
	}
}

/* ---- the writer thread ----------------------------------------------- */

static void
store_writer_send(store_writer *w, const store_msg *m)
{
	while (zmq_send(w->sock, m, sizeof(*m), 0) < 0 && errno == EINTR)
		;
}

static void
store_writer_fail(store_writer *w, int rc, uint64_t now)
{
	store_msg m = { .type = STORE_MSG_DEGRADED };

	(void)rc;
	store_db_close(w);
	if (!w->failing) {
		w->failing = true;
		w->fail_since_ms = now;
		w->backoff_ms = STORE_RETRY_MIN_MS;
	} else {
		w->backoff_ms = w->backoff_ms * 2 > STORE_RETRY_MAX_MS
		    ? STORE_RETRY_MAX_MS
		    : w->backoff_ms * 2;
	}
	w->retry_at_ms = now + w->backoff_ms;
	snprintf(m.text, sizeof(m.text), "%s", w->error);
	store_writer_send(w, &m);
}

static void
store_writer_recovered(store_writer *w, uint64_t now)
{
	store_msg m = { .type = STORE_MSG_RECOVERED };

	m.ms = now - w->fail_since_ms;
	snprintf(m.text, sizeof(m.text), "%s", w->error);
	w->failing = false;
	w->error[0] = '\0';
	store_writer_send(w, &m);
}

/* Takes every message waiting on the socket. */
static void
store_writer_read(store_writer *w)
{
	store_msg m;

	while (
	    zmq_recv(w->sock, &m, sizeof(m), ZMQ_DONTWAIT) == (int)sizeof(m)) {
		switch (m.type) {
		case STORE_MSG_BATCH:
			m.batch->next = NULL;
			if (w->tail != NULL)
				w->tail->next = m.batch;
			else
				w->head = m.batch;
			w->tail = m.batch;
			break;
		case STORE_MSG_CONF:
			w->conf = m.conf;
			break;
		case STORE_MSG_STOP:
			w->stopping = true;
			w->stop_at_ms = com_clock_ms() + m.ms;
			break;
		default:
			break;
		}
	}
}

/* Acknowledges and frees the first n batches of the queue. */
static void
store_writer_done(store_writer *w, uint32_t n)
{
	store_msg m = { .type = STORE_MSG_ACK };

	for (uint32_t i = 0; i < n; i++) {
		store_batch *b = w->head;

		w->head = b->next;
		if (w->head == NULL)
			w->tail = NULL;
		m.ticket = b->ticket;
		m.rows += b->rows;
		m.metric_rows += b->metric_rows;
		store_batch_free(b);
	}
	store_writer_send(w, &m);
}

/* Writes what is queued, a group of batches per transaction. */
static void
store_writer_work(store_writer *w, uint64_t now)
{
	int rc;

	if (w->failing && now < w->retry_at_ms)
		return;
	if (w->db == NULL && (rc = store_db_open(w)) != 0) {
		store_writer_fail(w, rc, now);
		return;
	}
	/* Firm rows (decisions) of everything queued go first, then the
	 * rest a transaction of at most batch_rows rows at a time, looking
	 * for new decisions in between: a decision waits for at most one
	 * such transaction, never for a backlog of statistics. */
	for (;;) {
		uint32_t n = 0, rows = 0;
		store_batch *b;

		store_writer_read(w);
		if (w->head == NULL)
			break;
		rc = store_write_firm_all(w);
		if (rc == SQLITE_OK && w->wal_full) {
			/* The checkpointer cannot finish while commits keep
			 * coming without a pause, and then the WAL would
			 * never restart: copy it all back (waiting out the
			 * checkpointer) so that the next commit restarts
			 * it. Only when far behind, and right after the
			 * decisions queued were committed. */
			sqlite3_busy_timeout(w->db, STORE_RESTART_WAIT_MS);
			sqlite3_wal_checkpoint_v2(w->db, NULL,
			    SQLITE_CHECKPOINT_RESTART, NULL, NULL);
			sqlite3_busy_timeout(w->db, STORE_BUSY_MS);
			w->wal_full = false;
		}
		if (rc == SQLITE_OK) {
			for (b = w->head; b != NULL; b = b->next) {
				if (n > 0 &&
				    rows + b->rows > w->conf.batch_rows)
					break;
				rows += b->rows;
				n++;
			}
			rc = store_write_rest_n(w, n);
		}
		if (rc == SQLITE_OK) {
			store_writer_done(w, n);
			if (w->failing)
				store_writer_recovered(w, com_clock_ms());
			continue;
		}
		if (store_rc_transient(rc)) {
			store_writer_fail(w, rc, com_clock_ms());
			return;
		}
		/* A bug, not the environment: retrying cannot help, and the
		 * batch must not hold up the ones behind it. */
		ctl_log(CTL_LOG_ERROR, "store",
		    "%s: dropping a batch of %u rows (ticket %" PRIu64 ")",
		    w->error, w->head->rows, w->head->ticket);
		store_writer_done(w, 1);
	}
	if (w->failing)
		store_writer_recovered(w, com_clock_ms());
	else
		store_retention(w, now);
}

static int
store_writer_timeout(const store_writer *w, uint64_t now)
{
	int64_t t = -1;

	if (w->failing)
		t = w->retry_at_ms > now ? (int64_t)(w->retry_at_ms - now) : 0;
	else if (w->head != NULL)
		t = 0;
	else if (w->conf.max_age_days > 0 && w->age_due)
		t = w->next_age_ms > now ? (int64_t)(w->next_age_ms - now) : 0;
	if (w->stopping) {
		int64_t s = w->stop_at_ms > now ? (int64_t)(w->stop_at_ms - now)
						: 0;

		if (t < 0 || s < t)
			t = s;
	}
	return t > INT32_MAX ? INT32_MAX : (int)t;
}

static void *
store_writer_main(void *arg)
{
	store_writer *w = arg;
	uint64_t lost = 0;

	for (;;) {
		uint64_t now = com_clock_ms();
		zmq_pollitem_t item = { w->sock, 0, ZMQ_POLLIN, 0 };

		if (zmq_poll(&item, 1, store_writer_timeout(w, now)) < 0 &&
		    zmq_errno() != EINTR)
			break;
		store_writer_read(w);
		now = com_clock_ms();
		store_writer_work(w, now);
		if (w->stopping && (w->head == NULL || now >= w->stop_at_ms))
			break;
	}
	while (w->head != NULL) {
		store_batch *b = w->head;

		w->head = b->next;
		lost += b->rows;
		store_batch_free(b);
	}
	w->tail = NULL;
	if (lost > 0)
		ctl_log(CTL_LOG_ERROR, "store",
		    "'%s': %" PRIu64 " rows not written at exit: %s", w->path,
		    lost, w->error);
	store_db_close(w);
	return NULL;
}

/* The checkpointer: one PASSIVE checkpoint per poke, on its own
 * connection, so that syncing the disk never delays a commit. */
static void *
store_checkpointer_main(void *arg)
{
	ctl_store *s = arg;
	char c;

	for (;;) {
		sqlite3 *db = NULL;
		int n = zmq_recv(s->ckpt_sock, &c, 1, 0);

		if (n < 0 && zmq_errno() == EINTR)
			continue;
		if (n < 0 || c == 's')
			break;
		if (sqlite3_open_v2(s->w.path, &db,
			SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
			NULL) == SQLITE_OK) {
			sqlite3_busy_timeout(db, STORE_BUSY_MS);
			sqlite3_wal_checkpoint_v2(db, NULL,
			    SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
		}
		sqlite3_close_v2(db);
	}
	return NULL;
}

/* ---- the loop's side --------------------------------------------------- */

static void store_add_event(ctl_store *s, const char *kind, const char *fmt,
    ...) __attribute__((format(printf, 3, 4)));

static void
store_add_event(ctl_store *s, const char *kind, const char *fmt, ...)
{
	char text[CTL_EVENT_TEXT_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (s->events != NULL)
		ctl_events_add(s->events, kind, NULL, "%s", text);
}

static atomic_uint store_serial; /* names the inproc endpoints */

static int
store_sockets(ctl_store *s, void *zctx)
{
	unsigned n = atomic_fetch_add(&store_serial, 1);
	char ep[64], ck[64];
	int zero = 0, one = 1;

	/* Not the address: a store opened after another was freed may get
	 * the same one while the old endpoint is still being unbound. */
	snprintf(ep, sizeof(ep), "inproc://bellows-store-%u", n);
	snprintf(ck, sizeof(ck), "inproc://bellows-checkpoint-%u", n);
	s->sock = zmq_socket(zctx, ZMQ_PAIR);
	s->w.sock = zmq_socket(zctx, ZMQ_PAIR);
	s->w.poke = zmq_socket(zctx, ZMQ_PAIR);
	s->ckpt_sock = zmq_socket(zctx, ZMQ_PAIR);
	if (s->sock == NULL || s->w.sock == NULL || s->w.poke == NULL ||
	    s->ckpt_sock == NULL)
		return BELLOWS_ESYS;
	/* Batches and acks are bounded by the store's own row accounting:
	 * the socket must never refuse one. Pokes coalesce. */
	zmq_setsockopt(s->sock, ZMQ_SNDHWM, &zero, sizeof(zero));
	zmq_setsockopt(s->sock, ZMQ_RCVHWM, &zero, sizeof(zero));
	zmq_setsockopt(s->w.sock, ZMQ_SNDHWM, &zero, sizeof(zero));
	zmq_setsockopt(s->w.sock, ZMQ_RCVHWM, &zero, sizeof(zero));
	zmq_setsockopt(s->w.poke, ZMQ_SNDHWM, &one, sizeof(one));
	zmq_setsockopt(s->ckpt_sock, ZMQ_RCVHWM, &one, sizeof(one));
	zmq_setsockopt(s->sock, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(s->w.sock, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(s->w.poke, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(s->ckpt_sock, ZMQ_LINGER, &zero, sizeof(zero));
	if (zmq_bind(s->sock, ep) != 0 || zmq_connect(s->w.sock, ep) != 0 ||
	    zmq_bind(s->ckpt_sock, ck) != 0 || zmq_connect(s->w.poke, ck) != 0)
		return BELLOWS_ESYS;
	return 0;
}

static void
store_close_sockets(ctl_store *s)
{
	void **socks[] = { &s->sock, &s->w.sock, &s->w.poke, &s->ckpt_sock };

	for (size_t i = 0; i < sizeof(socks) / sizeof(socks[0]); i++) {
		if (*socks[i] != NULL)
			zmq_close(*socks[i]);
		*socks[i] = NULL;
	}
}

int
ctl_store_open(const char *path, void *zctx, const ctl_store_conf *conf,
    uint64_t instance, ctl_events *events, ctl_store **ret_store)
{
	ctl_store *s = calloc(1, sizeof(*s));
	int64_t max_id = 0;
	int r;

	if (s == NULL)
		return BELLOWS_ENOMEM;
	s->conf = *conf;
	s->w.conf = *conf;
	s->instance = instance;
	s->events = events;
	s->next_ticket = 1;
	if ((s->w.path = strdup(path)) == NULL) {
		free(s);
		return BELLOWS_ENOMEM;
	}
	if ((r = store_sockets(s, zctx)) != 0) {
		store_close_sockets(s);
		free(s->w.path);
		free(s);
		return r;
	}
	if (store_db_open(&s->w) == 0 &&
	    store_query_int(&s->w, "SELECT coalesce(max(id), 0) FROM runs",
		&max_id) == 0) {
		s->next_run = max_id + 1;
		ctl_log(CTL_LOG_INFO, "store",
		    "history in '%s' (schema version %d)", path,
		    CTL_STORE_SCHEMA_VERSION);
	} else {
		/* Without the file's ids, wall-clock milliseconds stay above
		 * any id handed out before and are unique per daemon. */
		store_db_close(&s->w);
		s->next_run = (int64_t)com_clock_wall_ms();
		s->failed = true;
		s->w.failing = true;
		s->w.fail_since_ms = com_clock_ms();
		s->w.backoff_ms = STORE_RETRY_MIN_MS;
		s->w.retry_at_ms = s->w.fail_since_ms + STORE_RETRY_MIN_MS;
		snprintf(s->error, sizeof(s->error), "%s", s->w.error);
		ctl_log(CTL_LOG_ERROR, "store",
		    "%s; running without history until it can be written "
		    "(retrying)",
		    s->error);
		store_add_event(s, CTL_EVENT_STORE_DEGRADED, "%s", s->error);
	}
	*ret_store = s;
	return 0;
}

int
ctl_store_start(ctl_store *s)
{
	if (pthread_create(&s->checkpointer, NULL, store_checkpointer_main,
		s) != 0)
		return BELLOWS_ESYS;
	s->checkpointer_started = true;
	if (pthread_create(&s->writer, NULL, store_writer_main, &s->w) != 0)
		return BELLOWS_ESYS;
	s->writer_started = true;
	return 0;
}

static void store_on_socket(ctl_loop *loop, void *arg);

int
ctl_store_attach(ctl_store *s, ctl_loop *loop)
{
	int r = ctl_loop_add_socket(loop, s->sock, store_on_socket, s);

	if (r == 0)
		s->attached = true;
	return r;
}

void
ctl_store_set_durable_fn(ctl_store *s, ctl_store_durable_fn *fn, void *arg)
{
	s->durable = fn;
	s->durable_arg = arg;
}

bool
ctl_store_waits(const ctl_store *s)
{
	return s != NULL && s->writer_started && !s->failed && !s->slow;
}

static void
store_send(ctl_store *s, const store_msg *m)
{
	while (zmq_send(s->sock, m, sizeof(*m), 0) < 0) {
		if (zmq_errno() != EINTR) {
			ctl_log(CTL_LOG_ERROR, "store",
			    "cannot reach the writer: %s",
			    zmq_strerror(zmq_errno()));
			if (m->type == STORE_MSG_BATCH)
				store_batch_free(m->batch);
			return;
		}
	}
}

void
ctl_store_set_conf(ctl_store *s, const ctl_store_conf *conf)
{
	store_msg m = { .type = STORE_MSG_CONF };

	if (s == NULL)
		return;
	s->conf = *conf;
	m.conf = *conf;
	if (s->writer_started)
		store_send(s, &m);
	else
		s->w.conf = *conf;
}

/* Reports metric rows dropped since the last report, at most once a
 * second, as an event (and a log line a minute). */
static void
store_note_drops(ctl_store *s)
{
	uint64_t now = com_clock_ms();

	if (s->dropped_note == 0 || now - s->last_note_ms < STORE_NOTE_MS)
		return;
	store_add_event(s, CTL_EVENT_METRICS_DROPPED,
	    "%" PRIu64 " metric rows not written (%" PRIu64
	    " in all): the store is %s",
	    s->dropped_note, s->dropped_total,
	    s->failed || s->slow ? "degraded" : "behind");
	if (s->last_drop_log_ms == 0 ||
	    now - s->last_drop_log_ms >= STORE_DROP_LOG_MS) {
		ctl_log(CTL_LOG_WARN, "store",
		    "%" PRIu64 " metric rows not written so far (the store "
		    "is %s)",
		    s->dropped_total,
		    s->failed || s->slow ? "degraded" : "behind");
		s->last_drop_log_ms = now;
	}
	s->last_note_ms = now;
	s->dropped_note = 0;
}

uint64_t
ctl_store_flush(ctl_store *s)
{
	store_msg m = { .type = STORE_MSG_BATCH };
	store_batch *b;

	if (s == NULL)
		return 0;
	store_note_drops(s);
	b = s->cur;
	if (b == NULL || b->rows == 0)
		return s->sent_ticket;
	s->cur = NULL;
	s->next_ticket++;
	s->sent_ticket = b->ticket;
	s->rows_in_flight += b->rows;
	s->metric_in_flight += b->metric_rows;
	m.batch = b;
	store_send(s, &m);
	return s->sent_ticket;
}

static store_batch *
store_cur(ctl_store *s)
{
	if (s->cur == NULL) {
		s->cur = calloc(1, sizeof(*s->cur));
		if (s->cur == NULL)
			store_oom();
		s->cur->ticket = s->next_ticket;
	}
	return s->cur;
}

/* Counts rows added to the open batch and flushes it when full. */
static void
store_added(ctl_store *s, uint32_t rows, uint32_t metric_rows)
{
	s->cur->rows += rows;
	s->cur->metric_rows += metric_rows;
	if (s->cur->rows >= s->conf.batch_rows)
		ctl_store_flush(s);
}

/* Whether `rows` metric rows of `window` are written: all while the
 * writer keeps up, every STORE_THIN_EVERY-th window while it is up to
 * queue_rows behind, none beyond (counted). */
static bool
store_keep_metrics(ctl_store *s, uint64_t window, uint32_t rows)
{
	uint64_t in_flight = s->metric_in_flight +
	    (s->cur != NULL ? s->cur->metric_rows : 0) + rows;
	uint64_t q = s->conf.queue_rows;

	if (in_flight <= q ||
	    (in_flight <= 2 * q && window % STORE_THIN_EVERY == 0))
		return true;
	s->dropped_total += rows;
	s->dropped_note += rows;
	return false;
}

int64_t
ctl_store_run_begin(ctl_store *s, const char *job, const char *run_key,
    uint32_t world, const com_layer_info *layers, uint32_t n_layers,
    const ctl_config *cfg, uint64_t first_seq, uint64_t wall_ms)
{
	store_batch *b;
	int64_t id;

	if (s == NULL)
		return 0;
	ctl_store_config(s, cfg);
	b = store_cur(s);
	id = s->next_run++;
	*STORE_PUSH(b->runs) = (store_run_row){
		.id = id,
		.job = store_strdup(job),
		.run_key = store_strdup(run_key != NULL ? run_key : ""),
		.world = world,
		.n_layers = n_layers,
		.wall_ms = wall_ms,
		.instance = s->instance,
		.first_seq = first_seq,
	};
	memcpy(b->runs.v[b->runs.n - 1].hash, s->hash, sizeof(s->hash));
	for (uint32_t l = 0; l < n_layers; l++) {
		store_layer_row *r = STORE_PUSH(b->layers);

		*r = (store_layer_row){
			.run = id,
			.idx = l,
			.name = store_strdup(layers[l].name),
			.numel = layers[l].numel,
			.ndim = layers[l].ndim,
		};
		memcpy(r->shape, layers[l].shape, sizeof(r->shape));
	}
	/* A run and its layers are one unit: no flush in between. */
	b->rows += 1 + n_layers;
	return id;
}

void
ctl_store_run_end(ctl_store *s, int64_t run, uint64_t wall_ms)
{
	store_batch *b;

	if (s == NULL || run == 0)
		return;
	b = store_cur(s);
	*STORE_PUSH(b->updates) = (store_update_row){
		.run = run,
		.kind = wall_ms != 0 ? STORE_UPDATE_END : STORE_UPDATE_REOPEN,
		.wall_ms = wall_ms,
	};
	store_added(s, 1, 0);
}

void
ctl_store_run_recovered(ctl_store *s, int64_t run)
{
	store_batch *b;

	if (s == NULL || run == 0)
		return;
	b = store_cur(s);
	*STORE_PUSH(b->updates) = (store_update_row){
		.run = run,
		.kind = STORE_UPDATE_RECOVERED,
	};
	store_added(s, 1, 0);
}

void
ctl_store_rank_event(ctl_store *s, int64_t run, uint32_t rank,
    ctl_store_rank_kind kind, uint64_t step, uint64_t incarnation,
    uint64_t wall_ms)
{
	store_batch *b;

	if (s == NULL || run == 0)
		return;
	b = store_cur(s);
	*STORE_PUSH(b->ranks) = (store_rank_row){
		.run = run,
		.rank = rank,
		.wall_ms = wall_ms,
		.kind = kind,
		.step = step,
		.incarnation = incarnation,
	};
	store_added(s, 1, 0);
}

void
ctl_store_timing(ctl_store *s, int64_t run, uint64_t window, uint32_t rank,
    const com_timings *t)
{
	store_batch *b;

	if (s == NULL || run == 0 || !store_keep_metrics(s, window, 1))
		return;
	b = store_cur(s);
	*STORE_PUSH(b->timings) = (store_timing_row){
		.run = run,
		.window = window,
		.rank = rank,
		.t = *t,
	};
	store_added(s, 1, 1);
}

void
ctl_store_window(ctl_store *s, int64_t run, const bellows_window *w,
    uint32_t ranks_expected, bool complete, const com_decision *in_force,
    uint64_t wall_ms)
{
	store_batch *b;
	uint32_t n_comm;

	if (s == NULL || run == 0)
		return;
	/* window_info and the per-layer rows are what recovery replays into
	 * the policies: firm rows, never dropped, handed over ahead of the
	 * decision answering the window, so committed no later than it. The
	 * collectives are O(ranks), like timings: metric rows. */
	n_comm = w->n_comm > 0 && store_keep_metrics(s, w->window, w->n_comm)
	    ? w->n_comm
	    : 0;
	b = store_cur(s);
	*STORE_PUSH(b->infos) = (store_info_row){
		.run = run,
		.window = w->window,
		.first_step = w->first_step,
		.last_step = w->last_step,
		.epoch = w->epoch,
		.lr = w->lr,
		.lr_next = w->lr_next,
		.batch_size = w->batch_size,
		.lr_scale = w->lr_scale,
		.world = w->world,
		.ranks_reported = w->ranks_reported,
		.ranks_expected = ranks_expected,
		.complete = complete,
		.step_ms_median = w->step_ms_median,
		.compute_ms_median = w->compute_ms_median,
		.comm_ms_median = w->comm_ms_median,
		.floats_sent = w->floats_sent,
		.floats_raw = w->floats_raw,
		.wall_ms = wall_ms,
		.state_batch_size = in_force->batch_size,
		.state_threshold = in_force->size_threshold,
		.state_off = in_force->compression_off,
		.backward_ms_median = w->backward_ms_median,
		.codec_ms_median = w->codec_ms_median,
		.mem_device_used = w->mem_device_used,
		.mem_device_total = w->mem_device_total,
		.mem_host_used = w->mem_host_used,
		.state_apply = in_force->apply_step,
		.state_calibrate = in_force->calibrate_steps,
		.saved_bytes = w->saved_bytes,
	};
	for (uint32_t l = 0; l < w->n_layers; l++) {
		const bellows_window_layer *v = &w->layers[l];

		*STORE_PUSH(b->stats) = (store_stat_row){
			.run = run,
			.window = w->window,
			.layer = l,
			.norm_rank0 = v->grad_norm_rank0,
			.norm_mean = v->grad_norm_mean,
			.sum_sq = v->sum_sq,
			.abs_sum = v->abs_sum,
			.max_abs = v->max_abs,
			.count = v->count,
			.nonzero = v->nonzero,
			.nonfinite = v->nonfinite,
			.momentum_abs_mean = v->momentum_abs_mean,
			.level = v->level,
			.error_bound = v->error_bound,
			.act_steps = v->act_steps,
			.act_lbar = v->act_lbar,
			.act_nonzero = v->act_nonzero,
			.act_bytes = v->act_bytes,
			.act_raw_bytes = v->act_raw_bytes,
			.comm_raw_ms = v->comm_raw_ms,
			.comm_comp_ms = v->comm_comp_ms,
			.codec_ms = v->codec_ms,
			.comm_raw_n = v->comm_raw_n,
			.comm_comp_n = v->comm_comp_n,
		};
	}
	for (uint32_t i = 0; i < n_comm; i++) {
		const bellows_comm_sample *c = &w->comm[i];

		*STORE_PUSH(b->comms) = (store_comm_row){
			.run = run,
			.window = w->window,
			.rank = c->rank,
			.bytes = c->bytes,
			.ms = c->ms,
			.count = c->count,
			.compressed = c->compressed,
		};
	}
	/* The window's rows stay in one batch. */
	store_added(s, 1 + w->n_layers + n_comm, n_comm);
}

void
ctl_store_policy_metrics(ctl_store *s, int64_t run, uint64_t window,
    const com_metric *metrics, uint32_t n)
{
	store_batch *b;

	if (s == NULL || run == 0 || n == 0 ||
	    !store_keep_metrics(s, window, n))
		return;
	b = store_cur(s);
	for (uint32_t i = 0; i < n; i++) {
		store_metric_row *r = STORE_PUSH(b->metrics);

		*r = (store_metric_row){
			.run = run,
			.window = window,
			.policy = store_strdup(
			    metrics[i].policy != NULL ? metrics[i].policy : ""),
			.layer = metrics[i].layer,
			.value = metrics[i].value,
		};
		snprintf(r->name, sizeof(r->name), "%s",
		    metrics[i].name != NULL ? metrics[i].name : "");
	}
	store_added(s, n, n);
}

static bool
store_differs(double a, double b)
{
	return a != b && !(isnan(a) && isnan(b));
}

static void
store_change(store_batch *b, int64_t run, uint64_t seq, const char *knob,
    int64_t layer, bool has_old, double old, double now)
{
	*STORE_PUSH(b->changes) = (store_change_row){
		.run = run,
		.seq = seq,
		.knob = knob,
		.layer = layer,
		.has_old = has_old,
		.old = old,
		.now = now,
	};
	b->rows++;
}

/* Rows of decision_changes: d against prev, or against the blank state
 * (with no old value) for a run's first decision. */
static void
store_changes(store_batch *b, int64_t run, const com_decision *d,
    const com_decision *prev)
{
	bool has = prev != NULL;

	for (uint32_t l = 0; l < d->n_layers; l++) {
		bool in = has && l < prev->n_layers;
		double lv = in ? prev->level[l] : 0;
		double eb = in ? prev->error_bound[l] : 0;

		if (store_differs(d->level[l], lv))
			store_change(b, run, d->seq, "level", l, in, lv,
			    d->level[l]);
		if (store_differs(d->error_bound[l], eb))
			store_change(b, run, d->seq, "error_bound", l, in, eb,
			    d->error_bound[l]);
	}
	if (d->batch_size != (has ? prev->batch_size : 0))
		store_change(b, run, d->seq, "batch_size", -1, has,
		    has ? prev->batch_size : 0, d->batch_size);
	if (store_differs(d->lr_scale, has ? prev->lr_scale : 1))
		store_change(b, run, d->seq, "lr_scale", -1, has,
		    has ? prev->lr_scale : 1, d->lr_scale);
	if (d->size_threshold != (has ? prev->size_threshold : 0))
		store_change(b, run, d->seq, "size_threshold", -1, has,
		    has ? (double)prev->size_threshold : 0,
		    (double)d->size_threshold);
	if (d->compression_off != (has && prev->compression_off))
		store_change(b, run, d->seq, "compression", -1, has,
		    has && prev->compression_off ? 0 : 1,
		    d->compression_off ? 0 : 1);
	if (d->calibrate_steps != (has ? prev->calibrate_steps : 0))
		store_change(b, run, d->seq, "calibrate_steps", -1, has,
		    has ? (double)prev->calibrate_steps : 0,
		    (double)d->calibrate_steps);
	if (d->codec_table_len != (has ? prev->codec_table_len : 0) ||
	    (d->codec_table_len > 0 &&
		memcmp(d->codec_table, prev->codec_table, d->codec_table_len) !=
		    0))
		store_change(b, run, d->seq, "codec_table", -1, has,
		    has ? (double)prev->codec_table_len : 0,
		    (double)d->codec_table_len);
}

uint64_t
ctl_store_decision(ctl_store *s, int64_t run, const com_decision *d,
    const com_decision *prev, ctl_store_source source, uint64_t wall_ms)
{
	store_decision_row *r;
	store_batch *b;
	uint64_t ticket;

	if (s == NULL || run == 0)
		return 0;
	b = store_cur(s);
	r = STORE_PUSH(b->decisions);
	r->run = run;
	r->source = source;
	r->wall_ms = wall_ms;
	if (com_decision_copy(&r->d, d) != 0)
		store_oom();
	b->rows++;
	store_changes(b, run, d, prev);
	ticket = ctl_store_flush(s);
	*STORE_PUSH(s->waits) = ticket;
	*STORE_PUSH(s->wait_ms) = com_clock_ms();
	return ticket;
}

void
ctl_store_config(ctl_store *s, const ctl_config *cfg)
{
	char hash[CTL_STORE_HASH_LEN];
	store_batch *b;

	if (s == NULL || cfg == NULL)
		return;
	ctl_store_hash(cfg->text != NULL ? cfg->text : "", cfg->text_len, hash);
	if (strcmp(hash, s->hash) == 0)
		return;
	memcpy(s->hash, hash, sizeof(hash));
	b = store_cur(s);
	*STORE_PUSH(b->files) = (store_file_row){
		.path = store_strdup(cfg->path),
		.text = store_strdup(cfg->text != NULL ? cfg->text : ""),
		.wall_ms = com_clock_wall_ms(),
	};
	memcpy(b->files.v[b->files.n - 1].hash, hash, sizeof(hash));
	store_added(s, 1, 0);
}

static void
store_event_row_put(ctl_store *s, uint64_t wall_ms, const char *job,
    const char *kind, const char *text)
{
	store_batch *b = store_cur(s);
	bool named = strcmp(kind, CTL_EVENT_RELOAD_OK) == 0 ||
	    strcmp(kind, CTL_EVENT_DAEMON_STARTED) == 0;

	*STORE_PUSH(b->events) = (store_event_row){
		.wall_ms = wall_ms,
		.job = job != NULL && job[0] != '\0' ? store_strdup(job) : NULL,
		.kind = store_strdup(kind),
		.text = store_strdup(text),
		.hash = named && s->hash[0] != '\0' ? store_strdup(s->hash)
						    : NULL,
	};
	store_added(s, 1, 0);
}

void
ctl_store_sync_events(ctl_store *s, const ctl_events *ev)
{
	uint64_t total, n;
	com_event *copy = NULL;
	uint32_t got = 0;

	if (s == NULL || ev == NULL)
		return;
	total = ctl_events_total(ev);
	if (total <= s->events_seen)
		return;
	n = total - s->events_seen;
	if (n > CTL_EVENTS_MAX) {
		char text[96];

		snprintf(text, sizeof(text),
		    "%" PRIu64 " events happened faster than they could be "
		    "recorded",
		    n - CTL_EVENTS_MAX);
		store_event_row_put(s, com_clock_wall_ms(), NULL,
		    CTL_EVENT_EVENTS_LOST, text);
		n = CTL_EVENTS_MAX;
	}
	if (ctl_events_copy(ev, NULL, (uint32_t)n, &copy, &got) != 0)
		store_oom();
	for (uint32_t i = 0; i < got; i++) {
		store_event_row_put(s, copy[i].wall_ms, copy[i].job,
		    copy[i].kind, copy[i].text);
		free(copy[i].kind);
		free(copy[i].job);
		free(copy[i].text);
	}
	free(copy);
	s->events_seen = total;
}

/* The decisions of every batch up to `ticket` are committed: they stop
 * waiting, and a store that was slow is not any more once it has caught
 * up with what it was handed then. */
static void
store_decisions_durable(ctl_store *s, uint64_t ticket, uint64_t now)
{
	if (ticket > s->durable_ticket)
		s->durable_ticket = ticket;
	while (
	    s->waits_head < s->waits.n && s->waits.v[s->waits_head] <= ticket)
		s->waits_head++;
	if (s->waits_head == s->waits.n)
		s->waits.n = s->wait_ms.n = s->waits_head = 0;
	if (s->slow && ticket >= s->slow_until) {
		s->slow = false;
		if (!s->failed) {
			ctl_log(CTL_LOG_INFO, "store",
			    "commits caught up after %" PRIu64 " ms",
			    now - s->slow_since_ms);
			store_add_event(s, CTL_EVENT_STORE_RECOVERED,
			    "commits caught up after %" PRIu64 " ms",
			    now - s->slow_since_ms);
			s->error[0] = '\0';
		}
	}
	if (s->durable != NULL)
		s->durable(s->durable_arg, ticket);
}

/* Handles one message of the writer. */
static void
store_handle(ctl_store *s, const store_msg *m)
{
	uint64_t now = com_clock_ms();

	switch (m->type) {
	case STORE_MSG_DURABLE:
		store_decisions_durable(s, m->ticket, now);
		break;
	case STORE_MSG_ACK:
		s->acked_ticket = m->ticket;
		s->rows_in_flight -= m->rows < s->rows_in_flight
		    ? m->rows
		    : s->rows_in_flight;
		s->metric_in_flight -= m->metric_rows < s->metric_in_flight
		    ? m->metric_rows
		    : s->metric_in_flight;
		store_decisions_durable(s, m->ticket, now);
		break;
	case STORE_MSG_DEGRADED:
		snprintf(s->error, sizeof(s->error), "%s", m->text);
		if (!s->failed) {
			s->failed = true;
			ctl_log(CTL_LOG_ERROR, "store",
			    "%s; decisions are published without waiting "
			    "and kept for writing, retrying",
			    m->text);
			store_add_event(s, CTL_EVENT_STORE_DEGRADED, "%s",
			    m->text);
			if (s->durable != NULL)
				s->durable(s->durable_arg, UINT64_MAX);
		}
		break;
	case STORE_MSG_RECOVERED:
		if (s->failed) {
			s->failed = false;
			ctl_log(CTL_LOG_INFO, "store",
			    "writing again after %" PRIu64 " ms (was: %s)",
			    m->ms, m->text);
			store_add_event(s, CTL_EVENT_STORE_RECOVERED,
			    "writing again after %" PRIu64 " ms (was: %s)",
			    m->ms, m->text);
			if (!s->slow)
				s->error[0] = '\0';
		}
		break;
	default:
		break;
	}
}

/* Reads every message the writer sent. */
static void
store_drain(ctl_store *s)
{
	store_msg m;

	while (zmq_recv(s->sock, &m, sizeof(m), ZMQ_DONTWAIT) == (int)sizeof(m))
		store_handle(s, &m);
}

static void
store_on_socket(ctl_loop *loop, void *arg)
{
	(void)loop;
	store_drain(arg);
}

int
ctl_store_wait(ctl_store *s, uint64_t ticket, uint32_t timeout_ms)
{
	uint64_t deadline = com_clock_ms() + timeout_ms;

	for (;;) {
		uint64_t now;
		zmq_pollitem_t item = { s->sock, 0, ZMQ_POLLIN, 0 };

		store_drain(s);
		if (s->acked_ticket >= ticket)
			return 0;
		if (s->failed)
			return BELLOWS_EIO;
		now = com_clock_ms();
		if (now >= deadline)
			return BELLOWS_ETIMEDOUT;
		zmq_poll(&item, 1, (long)(deadline - now));
	}
}

void
ctl_store_tick(ctl_store *s, uint64_t now_ms)
{
	uint64_t since;

	if (s == NULL || s->failed || s->slow || s->waits_head >= s->waits.n)
		return;
	since = s->wait_ms.v[s->waits_head];
	if (now_ms < since || now_ms - since < STORE_ACK_TIMEOUT_MS)
		return;
	s->slow = true;
	s->slow_until = s->sent_ticket;
	s->slow_since_ms = since;
	snprintf(s->error, sizeof(s->error),
	    "'%s': no commit for %" PRIu64 " ms", s->w.path, now_ms - since);
	ctl_log(CTL_LOG_WARN, "store",
	    "%s; decisions are published without waiting until it catches "
	    "up",
	    s->error);
	store_add_event(s, CTL_EVENT_STORE_DEGRADED, "%s", s->error);
	if (s->durable != NULL)
		s->durable(s->durable_arg, UINT64_MAX);
}

int
ctl_store_status(const ctl_store *s, com_status_reply *st)
{
	if (s == NULL) {
		/* No history (--no-db): not degraded, but say so, so that a
		 * reader does not take silence for a healthy store. */
		free(st->store_error);
		st->store_error = strdup("no history database (--no-db)");
		return st->store_error != NULL ? 0 : BELLOWS_ENOMEM;
	}
	st->store_degraded = s->failed || s->slow;
	st->store_pending = s->rows_in_flight +
	    (s->cur != NULL ? s->cur->rows : 0);
	st->store_dropped = s->dropped_total;
	free(st->store_error);
	st->store_error = strdup(s->error);
	return st->store_error != NULL ? 0 : BELLOWS_ENOMEM;
}

void
ctl_store_close(ctl_store **sp, uint32_t drain_ms)
{
	ctl_store *s;
	store_msg m = { .type = STORE_MSG_STOP };

	if (sp == NULL || *sp == NULL)
		return;
	s = *sp;
	if (s->writer_started) {
		ctl_store_flush(s);
		m.ms = drain_ms;
		store_send(s, &m);
		pthread_join(s->writer, NULL);
	} else {
		store_batch_free(s->cur);
		store_db_close(&s->w);
	}
	if (s->checkpointer_started) {
		while (
		    zmq_send(s->w.poke, "s", 1, 0) < 0 && zmq_errno() == EINTR)
			;
		pthread_join(s->checkpointer, NULL);
	}
	store_close_sockets(s);
	free(s->waits.v);
	free(s->wait_ms.v);
	free(s->w.thin.v);
	free(s->w.path);
	free(s);
	*sp = NULL;
}

/* ---- recovery ---------------------------------------------------------- */

static double
store_col_real(sqlite3_stmt *st, int i)
{
	return sqlite3_column_type(st, i) == SQLITE_NULL
	    ? NAN
	    : sqlite3_column_double(st, i);
}

/* A REAL column where NULL means "not measured": 0. */
static double
store_col_real0(sqlite3_stmt *st, int i)
{
	return sqlite3_column_type(st, i) == SQLITE_NULL
	    ? 0
	    : sqlite3_column_double(st, i);
}

static uint64_t
store_col_u64(sqlite3_stmt *st, int i)
{
	int64_t v = sqlite3_column_int64(st, i);

	return v < 0 ? 0 : (uint64_t)v;
}

/* Reads n little-endian doubles from a BLOB column; false if its size is
 * not n * 8. */
static bool
store_col_doubles(sqlite3_stmt *st, int i, double *out, uint32_t n)
{
	const uint8_t *p = sqlite3_column_blob(st, i);
	int len = sqlite3_column_bytes(st, i);

	if (len != (int)(n * 8) || (n > 0 && p == NULL))
		return false;
	for (uint32_t k = 0; k < n; k++) {
		uint64_t bits = 0;

		for (int b = 0; b < 8; b++)
			bits |= (uint64_t)p[k * 8 + b] << (8 * b);
		memcpy(&out[k], &bits, 8);
	}
	return true;
}

static char *
store_col_strdup(sqlite3_stmt *st, int i)
{
	const char *t = (const char *)sqlite3_column_text(st, i);

	return store_strdup(t != NULL ? t : "");
}

typedef struct store_loaded {
	ctl_store_run run;       /* what the callback sees */
	int64_t below;           /* windows read: those below this */
	com_layer_info *layers;  /* owned */
	com_decision *decisions; /* owned */
	char *run_key;           /* owned, runs.run_key */
	uint32_t n_decisions;    /* entries filled */
	bool *alive;             /* owned, world flags */
} store_loaded;

static void
store_loaded_fini(store_loaded *ld)
{
	for (uint32_t l = 0; ld->layers != NULL && l < ld->run.n_layers; l++)
		free(ld->layers[l].name);
	for (uint32_t i = 0; i < ld->n_decisions; i++)
		com_decision_fini(&ld->decisions[i]);
	free(ld->layers);
	free(ld->decisions);
	free(ld->alive);
	free(ld->run_key);
}

static bool
store_parse_shape(const char *text, com_layer_info *l)
{
	const char *p = text;

	l->ndim = 0;
	while (*p != '\0') {
		char *end;
		unsigned long v = strtoul(p, &end, 10);

		if (end == p || l->ndim == COM_MAX_NDIM || v > UINT32_MAX)
			return false;
		l->shape[l->ndim++] = (uint32_t)v;
		p = end;
		if (*p == 'x')
			p++;
		else if (*p != '\0')
			return false;
	}
	return true;
}

/* Prepares sql, binds the run id as ?1 (and `limit` as ?2). */
static sqlite3_stmt *
store_select(store_writer *w, const char *sql, int64_t run, int64_t limit)
{
	sqlite3_stmt *st = NULL;

	if (sqlite3_prepare_v2(w->db, sql, -1, &st, NULL) != SQLITE_OK) {
		ctl_log(CTL_LOG_WARN, "store", "'%s': reading: %s", w->path,
		    sqlite3_errmsg(w->db));
		return NULL;
	}
	sqlite3_bind_int64(st, 1, run);
	if (limit > 0)
		sqlite3_bind_int64(st, 2, limit);
	return st;
}

static const char *
store_load_layers(store_writer *w, store_loaded *ld)
{
	sqlite3_stmt *st = store_select(w,
	    "SELECT idx, name, numel, ndim, shape FROM layers WHERE run_id = "
	    "?1 ORDER BY idx",
	    ld->run.id, 0);
	uint32_t n = 0;
	const char *why = NULL;

	if (st == NULL)
		return "cannot read its layers";
	ld->layers = calloc(ld->run.n_layers ? ld->run.n_layers : 1,
	    sizeof(*ld->layers));
	if (ld->layers == NULL)
		store_oom();
	while (why == NULL && sqlite3_step(st) == SQLITE_ROW) {
		com_layer_info *l = &ld->layers[n];
		const char *shape = (const char *)sqlite3_column_text(st, 4);

		if (n >= ld->run.n_layers || sqlite3_column_int64(st, 0) != n) {
			why = "its layer table has gaps or extra rows";
			break;
		}
		l->name = store_col_strdup(st, 1);
		l->numel = store_col_u64(st, 2);
		n++;
		if (!store_parse_shape(shape != NULL ? shape : "", l) ||
		    l->ndim != sqlite3_column_int64(st, 3))
			why = "a layer's shape cannot be read";
	}
	if (why == NULL && n != ld->run.n_layers)
		why = "its layer table is incomplete";
	sqlite3_finalize(st);
	return why;
}

static const char *
store_load_decisions(store_writer *w, store_loaded *ld, uint32_t max)
{
	sqlite3_stmt *st = store_select(w,
	    "SELECT seq, apply_step, window, policy, reason, n_layers, levels, "
	    "error_bounds, batch_size, lr_scale, size_threshold, "
	    "compression_off, codec_table, calibrate_steps FROM decisions "
	    "WHERE run_id = ?1 AND window <= ?3 ORDER BY seq DESC LIMIT ?2",
	    ld->run.id, max);
	const char *why = NULL;
	uint32_t n = 0;

	if (st == NULL)
		return "cannot read its decisions";
	/* A decision's window is the one it answers + 1. */
	sqlite3_bind_int64(st, 3, ld->below);
	ld->decisions = calloc(max ? max : 1, sizeof(*ld->decisions));
	if (ld->decisions == NULL)
		store_oom();
	while (why == NULL && n < max && sqlite3_step(st) == SQLITE_ROW) {
		com_decision *d = &ld->decisions[n];
		const void *ct = sqlite3_column_blob(st, 12);
		int ct_len = sqlite3_column_bytes(st, 12);

		if (sqlite3_column_int64(st, 5) != ld->run.n_layers) {
			why = "a decision's layer count differs from the run's";
			break;
		}
		if (com_decision_init(d, ld->run.job, ld->run.n_layers) != 0)
			store_oom();
		ld->n_decisions = ++n;
		d->seq = store_col_u64(st, 0);
		d->apply_step = store_col_u64(st, 1);
		d->window = store_col_u64(st, 2);
		d->policy = store_col_strdup(st, 3);
		d->reason = store_col_strdup(st, 4);
		if (!store_col_doubles(st, 6, d->level, d->n_layers) ||
		    !store_col_doubles(st, 7, d->error_bound, d->n_layers)) {
			why = "a decision's levels cannot be read";
			break;
		}
		d->batch_size = (uint32_t)sqlite3_column_int64(st, 8);
		d->lr_scale = store_col_real(st, 9);
		d->size_threshold = store_col_u64(st, 10);
		d->compression_off = sqlite3_column_int(st, 11) != 0;
		d->calibrate_steps = store_col_u64(st, 13);
		if (ct != NULL && ct_len > 0) {
			d->codec_table = malloc((size_t)ct_len);
			if (d->codec_table == NULL)
				store_oom();
			memcpy(d->codec_table, ct, (size_t)ct_len);
			d->codec_table_len = (size_t)ct_len;
		}
	}
	sqlite3_finalize(st);
	if (why != NULL)
		return why;
	if (n == 0)
		return "it has no decision";
	/* Read newest first; the log wants ascending seqs. */
	for (uint32_t i = 0; i < n / 2; i++) {
		com_decision t = ld->decisions[i];

		ld->decisions[i] = ld->decisions[n - 1 - i];
		ld->decisions[n - 1 - i] = t;
	}
	return NULL;
}

/* Which ranks were there when the run was last written: those whose
 * latest rank event is a join. */
static void
store_load_ranks(store_writer *w, store_loaded *ld)
{
	sqlite3_stmt *st = store_select(w,
	    "SELECT rank, kind FROM rank_events WHERE run_id = ?1 ORDER BY "
	    "rowid",
	    ld->run.id, 0);

	ld->alive = calloc(ld->run.world, sizeof(*ld->alive));
	if (ld->alive == NULL)
		store_oom();
	while (st != NULL && sqlite3_step(st) == SQLITE_ROW) {
		int64_t r = sqlite3_column_int64(st, 0);
		const char *kind = (const char *)sqlite3_column_text(st, 1);

		if (r >= 0 && r < (int64_t)ld->run.world && kind != NULL)
			ld->alive[r] = strcmp(kind, "joined") == 0 ||
			    strcmp(kind, "rejoined") == 0;
	}
	sqlite3_finalize(st);
}

/* next_window and max_step from the decisions and windows recorded. */
static void
store_load_position(store_writer *w, store_loaded *ld)
{
	sqlite3_stmt *st = store_select(w,
	    "SELECT (SELECT coalesce(max(window), 0) FROM decisions WHERE "
	    "run_id = ?1 AND window <= ?3), (SELECT coalesce(max(window) + 1, "
	    "0) FROM window_info WHERE run_id = ?1 AND window < ?3), (SELECT "
	    "coalesce(max(last_step), 0) FROM window_info WHERE run_id = ?1 "
	    "AND window < ?3), (SELECT coalesce(max(seq), 0) FROM decisions "
	    "WHERE run_id = ?1), (SELECT run_key FROM runs WHERE id = ?1)",
	    ld->run.id, 0);
	uint64_t a, b;

	if (st != NULL)
		sqlite3_bind_int64(st, 3, ld->below);
	if (st != NULL && sqlite3_step(st) == SQLITE_ROW) {
		a = store_col_u64(st, 0);
		b = store_col_u64(st, 1);
		ld->run.next_window = a > b ? a : b;
		ld->run.max_step = store_col_u64(st, 2);
		ld->run.last_seq = store_col_u64(st, 3);
		ld->run_key = store_col_strdup(st, 4);
	}
	sqlite3_finalize(st);
}

/* Streams the run's windows into ops->window: window_info rows in order,
 * each with its layers' rows from a second cursor in the same order. */
static uint64_t
store_load_windows(store_writer *w, store_loaded *ld,
    const ctl_store_recover_ops *ops, void *arg, void *ctx)
{
	sqlite3_stmt *wi = store_select(w,
	    "SELECT window, first_step, last_step, epoch, lr, lr_next, "
	    "batch_size, lr_scale, world, ranks_reported, step_ms_median, "
	    "compute_ms_median, comm_ms_median, floats_sent, floats_raw, "
	    "state_batch_size, state_size_threshold, state_compression_off, "
	    "backward_ms_median, codec_ms_median, mem_device_used, "
	    "mem_device_total, mem_host_used, state_apply_step, "
	    "state_calibrate_steps, saved_bytes FROM window_info WHERE run_id "
	    "= ?1 AND window < ?3 ORDER BY window",
	    ld->run.id, 0);
	sqlite3_stmt *wl = store_select(w,
	    "SELECT window, layer, grad_norm_rank0, grad_norm_mean, sum_sq, "
	    "abs_sum, max_abs, count, nonzero, nonfinite, momentum_abs_mean, "
	    "level, error_bound, act_steps, act_lbar, act_nonzero, act_bytes, "
	    "act_raw_bytes, comm_raw_ms, comm_comp_ms, codec_ms, comm_raw_n, "
	    "comm_comp_n FROM windows WHERE run_id = ?1 AND window < ?3 ORDER "
	    "BY window, layer",
	    ld->run.id, 0);
	sqlite3_stmt *wc = store_select(w,
	    "SELECT window, rank, bytes, ms, count, compressed FROM "
	    "comm_samples WHERE run_id = ?1 AND window < ?3 ORDER BY window, "
	    "rowid",
	    ld->run.id, 0);
	STORE_VEC(bellows_comm_sample) comm = { 0 };
	bool have_comm = false;
	uint32_t n = ld->run.n_layers;
	bellows_window_layer *layers = calloc(n ? n : 1, sizeof(*layers));
	com_decision in_force;
	bool have_row = false;
	uint64_t count = 0;

	if (layers == NULL || com_decision_init(&in_force, ld->run.job, n) != 0)
		store_oom();
	if (wi == NULL || wl == NULL || wc == NULL)
		goto out;
	sqlite3_bind_int64(wi, 3, ld->below);
	sqlite3_bind_int64(wl, 3, ld->below);
	sqlite3_bind_int64(wc, 3, ld->below);
	have_row = sqlite3_step(wl) == SQLITE_ROW;
	have_comm = sqlite3_step(wc) == SQLITE_ROW;
	while (sqlite3_step(wi) == SQLITE_ROW) {
		uint64_t win = store_col_u64(wi, 0);
		bellows_window v = {
			.job = ld->run.job,
			.window = win,
			.first_step = store_col_u64(wi, 1),
			.last_step = store_col_u64(wi, 2),
			.epoch = store_col_u64(wi, 3),
			.lr = store_col_real(wi, 4),
			.lr_next = store_col_real(wi, 5),
			.batch_size = (uint32_t)sqlite3_column_int64(wi, 6),
			.lr_scale = store_col_real(wi, 7),
			.world = (uint32_t)sqlite3_column_int64(wi, 8),
			.ranks_reported = (uint32_t)sqlite3_column_int64(wi, 9),
			.step_ms_median = store_col_real(wi, 10),
			.compute_ms_median = store_col_real(wi, 11),
			.comm_ms_median = store_col_real(wi, 12),
			.floats_sent = store_col_u64(wi, 13),
			.floats_raw = store_col_u64(wi, 14),
			.n_layers = n,
			.layers = layers,
			.backward_ms_median = store_col_real0(wi, 18),
			.codec_ms_median = store_col_real0(wi, 19),
			.mem_device_used = (double)store_col_u64(wi, 20),
			.mem_device_total = (double)store_col_u64(wi, 21),
			.mem_host_used = (double)store_col_u64(wi, 22),
			.saved_bytes = (double)store_col_u64(wi, 25),
		};

		in_force.apply_step = store_col_u64(wi, 23);
		in_force.calibrate_steps = store_col_u64(wi, 24);
		v.compression_off = sqlite3_column_int(wi, 17) != 0;
		v.size_threshold = store_col_u64(wi, 16);
		v.calibrate_until = ctl_window_calibrate_until(&in_force);
		in_force.batch_size = (uint32_t)sqlite3_column_int64(wi, 15);
		in_force.lr_scale = v.lr_scale;
		in_force.size_threshold = store_col_u64(wi, 16);
		in_force.compression_off = sqlite3_column_int(wi, 17) != 0;
		for (uint32_t l = 0; l < n; l++) {
			layers[l] = (bellows_window_layer){
				.name = ld->layers[l].name,
				.numel = ld->layers[l].numel,
				.ndim = ld->layers[l].ndim,
				.shape = ld->layers[l].shape,
				.grad_norm = NAN,
				.grad_norm_rank0 = NAN,
				.grad_norm_mean = NAN,
				.comm_raw_ms = NAN,
				.comm_comp_ms = NAN,
				.codec_ms = NAN,
			};
			in_force.level[l] = 0;
			in_force.error_bound[l] = 0;
		}
		while (have_row && store_col_u64(wl, 0) < win)
			have_row = sqlite3_step(wl) == SQLITE_ROW;
		while (have_row && store_col_u64(wl, 0) == win) {
			int64_t l = sqlite3_column_int64(wl, 1);

			if (l >= 0 && l < (int64_t)n) {
				bellows_window_layer *x = &layers[l];

				x->grad_norm_rank0 = store_col_real(wl, 2);
				x->grad_norm_mean = store_col_real(wl, 3);
				/* As the daemon computes it (window.c). */
				x->grad_norm = !isnan(x->grad_norm_rank0)
				    ? x->grad_norm_rank0
				    : x->grad_norm_mean;
				x->sum_sq = store_col_real(wl, 4);
				x->abs_sum = store_col_real(wl, 5);
				x->max_abs = store_col_real(wl, 6);
				x->count = store_col_u64(wl, 7);
				x->nonzero = store_col_u64(wl, 8);
				x->nonfinite = store_col_u64(wl, 9);
				x->momentum_abs_mean = store_col_real(wl, 10);
				x->level = store_col_real(wl, 11);
				x->error_bound = store_col_real(wl, 12);
				x->act_steps = store_col_u64(wl, 13);
				x->act_lbar = store_col_real0(wl, 14);
				x->act_nonzero = store_col_real0(wl, 15);
				x->act_bytes = store_col_real0(wl, 16);
				x->act_raw_bytes = store_col_real0(wl, 17);
				x->comm_raw_ms = store_col_real(wl, 18);
				x->comm_comp_ms = store_col_real(wl, 19);
				x->codec_ms = store_col_real(wl, 20);
				x->comm_raw_n = (uint32_t)store_col_u64(wl, 21);
				x->comm_comp_n = (uint32_t)store_col_u64(wl,
				    22);
				in_force.level[l] = x->level;
				in_force.error_bound[l] = x->error_bound;
			}
			have_row = sqlite3_step(wl) == SQLITE_ROW;
		}
		comm.n = 0;
		while (have_comm && store_col_u64(wc, 0) < win)
			have_comm = sqlite3_step(wc) == SQLITE_ROW;
		while (have_comm && store_col_u64(wc, 0) == win) {
			*STORE_PUSH(comm) = (bellows_comm_sample){
				.rank = (uint32_t)store_col_u64(wc, 1),
				.bytes = store_col_u64(wc, 2),
				.ms = store_col_real(wc, 3),
				.count = (uint32_t)store_col_u64(wc, 4),
				.compressed = sqlite3_column_int(wc, 5) != 0,
			};
			have_comm = sqlite3_step(wc) == SQLITE_ROW;
		}
		v.n_comm = comm.n;
		v.comm = comm.v;
		ops->window(arg, ctx, &v, &in_force);
		count++;
	}
out:
	sqlite3_finalize(wi);
	sqlite3_finalize(wl);
	sqlite3_finalize(wc);
	free(comm.v);
	com_decision_fini(&in_force);
	free(layers);
	return count;
}

/* Reads run ld->run.id (job, world and layer count filled in) from w,
 * its windows below ld->below, into the callbacks. Returns 1 when the
 * run was handed to ops->run, 0 when it could not be read (logged) or
 * ops->run refused it. */
static uint32_t
store_hand_run(store_writer *w, store_loaded *ld, uint32_t max_decisions,
    const ctl_store_recover_ops *ops, void *arg)
{
	const char *why;
	void *ctx = NULL;
	uint64_t n;

	why = ld->run.world == 0 || ld->run.n_layers == 0
	    ? "it has no ranks or no layers"
	    : store_load_layers(w, ld);
	if (why == NULL)
		why = store_load_decisions(w, ld,
		    max_decisions ? max_decisions : 1);
	if (why != NULL) {
		ctl_log(CTL_LOG_WARN, "store",
		    "'%s': run %" PRId64 " of job '%s' cannot be read: %s",
		    w->path, ld->run.id, ld->run.job, why);
		return 0;
	}
	store_load_position(w, ld);
	store_load_ranks(w, ld);
	if ((uint64_t)ld->below < ld->run.next_window)
		ld->run.next_window = (uint64_t)ld->below;
	ld->run.alive = ld->alive;
	ld->run.layers = ld->layers;
	ld->run.decisions = ld->decisions;
	ld->run.n_decisions = ld->n_decisions;
	ld->run.run_key = ld->run_key != NULL ? ld->run_key : "";
	if (ops->run(arg, &ld->run, &ctx) != 0)
		return 0;
	n = store_load_windows(w, ld, ops, arg, ctx);
	ops->end(arg, ctx, n);
	return 1;
}

/* Fills ld->run's id, job, world, layer count and configuration hash
 * from a row of "SELECT id, job, world, n_layers, config_hash". */
static void
store_loaded_row(store_loaded *ld, sqlite3_stmt *runs)
{
	const char *hash = (const char *)sqlite3_column_text(runs, 4);

	ld->run.id = sqlite3_column_int64(runs, 0);
	ld->run.job = store_col_strdup(runs, 1);
	ld->run.world = (uint32_t)sqlite3_column_int64(runs, 2);
	ld->run.n_layers = (uint32_t)sqlite3_column_int64(runs, 3);
	snprintf(ld->run.config_hash, sizeof(ld->run.config_hash), "%s",
	    hash != NULL ? hash : "");
}

uint32_t
ctl_store_recover(ctl_store *s, uint32_t max_decisions,
    const ctl_store_recover_ops *ops, void *arg)
{
	sqlite3_stmt *runs;
	uint32_t handed = 0;

	if (s == NULL || s->w.db == NULL)
		return 0;
	assert(!s->writer_started);
	runs = store_select(&s->w,
	    "SELECT id, job, world, n_layers, config_hash FROM runs WHERE "
	    "ended_wall_ms IS NULL ORDER BY id DESC",
	    0, 0);
	while (runs != NULL && sqlite3_step(runs) == SQLITE_ROW) {
		store_loaded ld = { .below = INT64_MAX };

		store_loaded_row(&ld, runs);
		handed += store_hand_run(&s->w, &ld, max_decisions, ops, arg);
		free((char *)ld.run.job);
		store_loaded_fini(&ld);
	}
	sqlite3_finalize(runs);
	return handed;
}

int
ctl_store_load_run(ctl_store *s, int64_t run, const char *job, uint64_t below,
    uint32_t max_decisions, const ctl_store_recover_ops *ops, void *arg)
{
	store_writer rd = { 0 };
	sqlite3_stmt *st;
	int r = BELLOWS_ENOTFOUND;

	if (s == NULL || s->w.path == NULL)
		return BELLOWS_ENOTFOUND;
	/* A connection of the loop's own: the writer thread keeps its
	 * own, and WAL lets this one read what is committed meanwhile. */
	rd.path = s->w.path;
	if (sqlite3_open_v2(s->w.path, &rd.db, SQLITE_OPEN_READONLY, NULL) !=
	    SQLITE_OK) {
		ctl_log(CTL_LOG_WARN, "store", "'%s': cannot read: %s",
		    s->w.path, rd.db != NULL ? sqlite3_errmsg(rd.db) : "");
		sqlite3_close(rd.db);
		return BELLOWS_EIO;
	}
	sqlite3_busy_timeout(rd.db, STORE_BUSY_MS);
	st = run != 0 ? store_select(&rd,
			    "SELECT id, job, world, n_layers, config_hash "
			    "FROM runs WHERE id = ?1",
			    run, 0)
		      : store_select(&rd,
			    "SELECT id, job, world, n_layers, config_hash "
			    "FROM runs WHERE job = ?3 ORDER BY id DESC LIMIT 1",
			    0, 0);
	if (st == NULL) {
		r = BELLOWS_EIO;
	} else {
		if (run == 0)
			store_bind_text(st, 3, job != NULL ? job : "");
		if (sqlite3_step(st) == SQLITE_ROW) {
			store_loaded ld = {
				.below = below > INT64_MAX ? INT64_MAX
							   : (int64_t)below,
			};

			store_loaded_row(&ld, st);
			r = store_hand_run(&rd, &ld, max_decisions, ops, arg)
			    ? 0
			    : BELLOWS_EIO;
			free((char *)ld.run.job);
			store_loaded_fini(&ld);
		}
	}
	sqlite3_finalize(st);
	sqlite3_close(rd.db);
	return r;
}

void
ctl_store_run_resumed(ctl_store *s, int64_t run, uint64_t window,
    const char *run_key)
{
	store_batch *b;

	if (s == NULL || run == 0)
		return;
	/* Alone in its batch: the rows of the abandoned windows recorded
	 * before are in earlier batches (written first), and the resumed
	 * run's rows go into later ones, which the move must not touch. */
	ctl_store_flush(s);
	b = store_cur(s);
	*STORE_PUSH(b->updates) = (store_update_row){
		.run = run,
		.kind = STORE_UPDATE_RESUMED,
		.window = window,
		.run_key = store_strdup(run_key != NULL ? run_key : ""),
	};
	store_added(s, 1, 0);
	ctl_store_flush(s);
}

bool
ctl_store_settled(ctl_store *s)
{
	if (s == NULL)
		return true;
	ctl_store_flush(s);
	return s->failed || s->acked_ticket >= s->sent_ticket;
}
