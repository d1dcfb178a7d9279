/* store_schema - the history's schema, its migrations, and opening a
 * connection to the file, see store.h and docs/history.md.
 *
 * Version 1 of the schema is never edited: every later version changes it
 * by a migration, so that an old file and a new one end up the same. The
 * writer thread opens (store_db_open: create with store.mode, WAL,
 * migrate, prepare the writer's statements) and reopens its connection
 * here after a failure; recovery and a resume read with the same
 * function on the loop's thread, before the writer starts or on a
 * connection of their own.
 */
#include "store_int.h"
#include "store_schema.h"

#include "policyhost/log.h"

#include <bellows/error.h>

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

/* ---- statements ------------------------------------------------------ */

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
	[ST_COMM] = "INSERT INTO comm_samples (run_id, window, rank, bytes, "
		    "ms, count, compressed) VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
		    "?7)",
	[ST_METRIC] = "INSERT INTO policy_metrics (run_id, window, policy, "
		      "name, layer, value) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
	/* ST_INFO, ST_STAT, ST_TIMING and the _N: store_sql_rows. */
	[ST_DECISION] = "INSERT OR REPLACE INTO decisions (run_id, seq, "
			"apply_step, window, wall_ms, source, policy, reason, "
			"n_layers, levels, error_bounds, batch_size, lr_scale, "
			"size_threshold, compression_off, codec_table, "
			"calibrate_steps, resid_group, resid_phi, resid_rows, "
			"resid_cols) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
			"?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, "
			"?20, ?21)",
	[ST_CHANGE] = "INSERT INTO decision_changes (run_id, seq, knob, "
		      "layer, old, new) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
	[ST_EVENT] = "INSERT INTO events (wall_ms, run_id, job, kind, text, "
		     "policy_hash) VALUES (?1, (SELECT max(id) FROM runs WHERE "
		     "job = ?2), ?2, ?3, ?4, ?5)",
	[ST_END] = "UPDATE runs SET ended_wall_ms = ?2 WHERE id = ?1",
	[ST_REOPEN] = "UPDATE runs SET ended_wall_ms = NULL WHERE id = ?1",
	[ST_RECOVERED] = "UPDATE runs SET recoveries = recoveries + 1 WHERE "
			 "id = ?1",
	[ST_CLOSED] = "UPDATE runs SET windows_closed = ?2 WHERE id = ?1",
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
	/* 5 -> 6 (0.5): the residual plan (ResiReduce) of a decision, per
	 * layer as little-endian doubles like `levels`: the group's leader,
	 * the group's phi, the kept row and column fractions. NULL: the
	 * default plan (every layer its own residual), as in rows written
	 * before. */
	"ALTER TABLE decisions ADD COLUMN resid_group BLOB;"
	"ALTER TABLE decisions ADD COLUMN resid_phi BLOB;"
	"ALTER TABLE decisions ADD COLUMN resid_rows BLOB;"
	"ALTER TABLE decisions ADD COLUMN resid_cols BLOB;"
	"ALTER TABLE superseded_decisions ADD COLUMN resid_group BLOB;"
	"ALTER TABLE superseded_decisions ADD COLUMN resid_phi BLOB;"
	"ALTER TABLE superseded_decisions ADD COLUMN resid_rows BLOB;"
	"ALTER TABLE superseded_decisions ADD COLUMN resid_cols BLOB;",
	/* 6 -> 7 (0.6): a window recorded late (1): bellowsd restarted
	 * before closing it and its ranks' reports, kept by the agents,
	 * came after the job had moved on; no decision answers it. 0 in
	 * rows written before. */
	"ALTER TABLE window_info ADD COLUMN late INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE superseded_window_info ADD COLUMN late INTEGER NOT NULL "
	"DEFAULT 0;",
	/* 7 -> 8 (0.7): names that say what they hold. saved_bytes held
	 * the activation bytes one step saved for backward (COMET's memory
	 * model), 0 in every gradient-compression run, while "saved"
	 * means gradient bytes everywhere else: it becomes act_saved_bytes,
	 * and the gradient bytes saved in the window, all ranks, (floats_raw
	 * - floats_sent) * 4, are a column of their own, computed from the
	 * row so that no writer can disagree with it. */
	"ALTER TABLE window_info RENAME COLUMN saved_bytes TO act_saved_bytes;"
	"ALTER TABLE superseded_window_info RENAME COLUMN saved_bytes TO "
	"act_saved_bytes;"
	"ALTER TABLE window_info ADD COLUMN grad_bytes_saved INTEGER "
	"GENERATED ALWAYS AS (4 * (floats_raw - floats_sent)) VIRTUAL;"
	"ALTER TABLE superseded_window_info ADD COLUMN grad_bytes_saved "
	"INTEGER;",
	/* 8 -> 9 (0.7): the lowest window whose reports the agents may
	 * still keep (windows_closed, as bellowsd last told them or lower):
	 * a restarted bellowsd takes the windows from there up that the
	 * run does not hold as late ones again. NULL in runs written
	 * before: nothing below the newest window recorded is taken. */
	"ALTER TABLE runs ADD COLUMN windows_closed INTEGER;",
};

_Static_assert(sizeof(store_migrations) / sizeof(store_migrations[0]) ==
	CTL_STORE_SCHEMA_VERSION - 1,
    "one migration per schema version after the first");

/* ---- SQLite: open, migrate, prepare ---------------------------------- */

/* True for errors of the environment, worth retrying; anything else is a
 * bug in what we asked SQLite to do. */
bool
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

void
store_set_error(store_writer *w, int rc, const char *what)
{
	const char *msg = w->db != NULL ? sqlite3_errmsg(w->db)
					: sqlite3_errstr(rc);

	snprintf(w->error, sizeof(w->error), "'%s': %s: %s (%s)", w->path, what,
	    msg, sqlite3_errstr(rc));
}

void
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

int
store_exec(store_writer *w, const char *sql, const char *what)
{
	int rc = sqlite3_exec(w->db, sql, NULL, NULL, NULL);

	if (rc != SQLITE_OK)
		store_set_error(w, rc, what);
	return rc;
}

/* Runs a one-value query into *ret. */
int
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

/* Whether `table` of the file has a column `col`: *ret 1 or 0. Both
 * names are the schema's constants, never input. Returns as
 * store_query_int. */
static int
store_has_column(store_writer *w, const char *table, const char *col,
    int64_t *ret)
{
	char sql[256];

	snprintf(sql, sizeof(sql),
	    "SELECT count(*) FROM pragma_table_info('%s') WHERE name = '%s'",
	    table, col);
	return store_query_int(w, sql, ret);
}

/* The generated migration, after the numbered ones: every statistic
 * column the statistics table names (hist_cols.h) that a table of the
 * file lacks, checked with PRAGMA table_info, is added to it and to its
 * superseded_ twin, in the table's order (a resume copies rows with
 * `SELECT *`: the twins keep the same columns in the same order), all in
 * one transaction. A statistic added to the table thus gets its column
 * in every file, old or new, without a numbered migration; rows written
 * before read as "not measured". Within a transaction of the caller's
 * (`in_txn`: a file being created, store_create) it adds the columns
 * quietly and leaves the transaction to the caller. */
static int
store_migrate_columns(store_writer *w, bool in_txn)
{
	static const char *const prefix[] = { "", "superseded_" };
	bool begun = false;
	int rc = 0;

	for (int t = 0; rc == 0 && t < HIST_N_TABLES; t++) {
		uint32_t n, n_arr = 0;
		const hist_col *hc = hist_cols((hist_table)t, &n);
		const hist_array *ha = NULL;

		/* The windows table's array columns come after its
		 * statistics: BLOBs, NULL for not measured. */
		if (t == HIST_WINDOWS)
			ha = hist_arrays(&n_arr);
		for (int p = 0; rc == 0 && p < 2; p++) {
			char table[64];

			snprintf(table, sizeof(table), "%s%s", prefix[p],
			    hist_table_name((hist_table)t));
			for (uint32_t c = 0; rc == 0 && c < n + n_arr; c++) {
				const char *name = c < n ? hc[c].name
							 : ha[c - n].name;
				const char *decl = c < n ? hist_col_decl(&hc[c])
							 : "BLOB";
				char sql[256];
				int64_t has = 0;

				if ((rc = store_has_column(w, table, name,
					 &has)) != 0 ||
				    has)
					continue;
				if (!begun && !in_txn &&
				    (rc = store_exec(w, "BEGIN IMMEDIATE",
					 "begin")) != 0)
					return rc;
				begun = !in_txn;
				snprintf(sql, sizeof(sql),
				    "ALTER TABLE %s ADD COLUMN %s %s", table,
				    name, decl);
				if ((rc = store_exec(w, sql,
					 "adding a column")) == 0 &&
				    !in_txn)
					ctl_log(CTL_LOG_INFO, "store",
					    "'%s': added column %s.%s", w->path,
					    table, name);
			}
		}
	}
	if (begun && rc == 0)
		rc = store_exec(w, "COMMIT", "commit");
	if (begun && rc != 0)
		sqlite3_exec(w->db, "ROLLBACK", NULL, NULL, NULL);
	return rc;
}

/* Creates the schema at version `target` in an empty file, in one
 * transaction: version 1, the numbered migrations up to `target` and, for
 * the current version, the statistic columns (store_migrate_columns), so
 * that a new file is exactly what an old one migrates to, with one log
 * line. Returns 0 or the SQLite error (nothing written). */
static int
store_create(store_writer *w, int64_t target)
{
	char set[64];
	int rc;

	if ((rc = store_exec(w, "BEGIN IMMEDIATE", "begin")) != 0)
		return rc;
	rc = store_exec(w, store_schema_v1, "creating schema");
	for (int64_t v = 1; rc == 0 && v < target; v++)
		rc = store_exec(w, store_migrations[v - 1], "creating schema");
	if (rc == 0 && target == CTL_STORE_SCHEMA_VERSION)
		rc = store_migrate_columns(w, true);
	snprintf(set, sizeof(set), "PRAGMA user_version = %" PRId64, target);
	if (rc != 0 || (rc = store_exec(w, set, "setting the version")) != 0 ||
	    (rc = store_exec(w, "COMMIT", "commit")) != 0) {
		sqlite3_exec(w->db, "ROLLBACK", NULL, NULL, NULL);
		return rc;
	}
	ctl_log(CTL_LOG_INFO, "store", "'%s': created schema version %" PRId64,
	    w->path, target);
	return 0;
}

/* Brings the schema to `target` (CTL_STORE_SCHEMA_VERSION but in the
 * tests' ctl_store_schema_make): an empty file is created at it in one
 * step (store_create); an older file is migrated one version per
 * transaction, then gets the statistic columns it lacks
 * (store_migrate_columns). */
static int
store_migrate_to(store_writer *w, int64_t target)
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
		return store_create(w, target);
	}
	while (version < target) {
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
	return target == CTL_STORE_SCHEMA_VERSION
	    ? store_migrate_columns(w, false)
	    : 0;
}

static int
store_migrate(store_writer *w)
{
	return store_migrate_to(w, CTL_STORE_SCHEMA_VERSION);
}

int
ctl_store_schema_make(sqlite3 *db, int version, char *err, size_t errlen)
{
	store_writer w = { .path = (char *)"(history)", .db = db };
	int rc;

	if (version < 1 || version > CTL_STORE_SCHEMA_VERSION) {
		snprintf(err, errlen, "no schema version %d", version);
		return BELLOWS_EINVAL;
	}
	w.error[0] = '\0';
	rc = store_migrate_to(&w, version);
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "%s", w.error);
		return BELLOWS_EIO;
	}
	return 0;
}

/* sqlite3_wal_hook: replaces auto-checkpointing with a poke to the
 * checkpointer once the WAL has grown by STORE_CHECKPOINT_ANY pages;
 * from STORE_CHECKPOINT_FRAMES, the writer pokes it right after a
 * decision's commit (store_write_firm_all). */
static int
store_wal_hook(void *arg, sqlite3 *db, const char *name, int frames)
{
	store_writer *w = arg;

	(void)db;
	(void)name;
	w->wal_frames = (uint32_t)frames;
	if (frames >= STORE_CHECKPOINT_ANY && w->poke != NULL)
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

/* The SQL of the inserts into the tables with statistic columns, by
 * name: "INSERT OR REPLACE INTO t (keys, statistics) VALUES (?,...)",
 * with STORE_MULTI rows for the _N statements, allocated; NULL for the
 * other statements (in store_sql). */
static char *
store_sql_rows(int which)
{
	const char *keys;
	const hist_col *hc;
	const hist_array *ha = NULL;
	hist_table t;
	uint32_t fixed, n_stat, n_arr = 0, cols, rows;
	size_t len, used;
	char *sql;

	switch (which) {
	case ST_STAT:
	case ST_STAT_N:
		t = HIST_WINDOWS;
		keys = STORE_STAT_KEYS;
		fixed = STORE_STAT_FIXED;
		break;
	case ST_INFO:
		t = HIST_WINDOW_INFO;
		keys = STORE_INFO_KEYS;
		fixed = STORE_INFO_FIXED;
		break;
	case ST_TIMING:
	case ST_TIMING_N:
		t = HIST_TIMINGS;
		keys = STORE_TIMING_KEYS;
		fixed = STORE_TIMING_FIXED;
		break;
	default:
		return NULL;
	}
	hc = hist_cols(t, &n_stat);
	if (t == HIST_WINDOWS)
		ha = hist_arrays(&n_arr);
	cols = fixed + n_stat + n_arr;
	rows = which == ST_STAT_N || which == ST_TIMING_N ? STORE_MULTI : 1;
	len = strlen(keys) + 64 + (size_t)rows * (cols * 2 + 3) + 1;
	for (uint32_t c = 0; c < n_stat; c++)
		len += strlen(hc[c].name) + 2;
	for (uint32_t c = 0; c < n_arr; c++)
		len += strlen(ha[c].name) + 2;
	if ((sql = malloc(len)) == NULL)
		store_oom();
	used = (size_t)snprintf(sql, len, "INSERT OR REPLACE INTO %s (%s",
	    hist_table_name(t), keys);
	for (uint32_t c = 0; c < n_stat; c++)
		used += (size_t)snprintf(sql + used, len - used, ", %s",
		    hc[c].name);
	for (uint32_t c = 0; c < n_arr; c++)
		used += (size_t)snprintf(sql + used, len - used, ", %s",
		    ha[c].name);
	used += (size_t)snprintf(sql + used, len - used, ") VALUES ");
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
int
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

/* Prepares sql, binds the run id as ?1 (and `limit` as ?2). */
sqlite3_stmt *
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
