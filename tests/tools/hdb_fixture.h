/* hdb_fixture - a small history database made by hand, for the tests of
 * the tools that read it.
 *
 * The schema is docs/history.md's version 1 as DDL, migrated to version
 * 2 as bellowsd migrates it; the file is in WAL mode, as bellowsd keeps
 * it. The rows are chosen so that every answer can be computed by hand:
 *
 * run 1, job "resnet", 3 ranks, ended: layers 0 "conv.weight" (64x3x3x3)
 *   and 1 "fc.bias" (10); windows 0..3 close at START + 1 s .. + 4 s, each
 *   sending 100 of 1000 floats (3600 bytes saved); conv.weight is at level
 *   2, 2, 1, 1 (decision seq 3 changed it, window 2), rank 0's norm is
 *   NULL in window 1; window 2 lacks fc.bias's row; ranks' mean step
 *   times are 10, 12 and 30 ms (rank 1 missed window 3); a reload (policy
 *   file "b") happened while it ran.
 * run 2, job "bert", live, 1 layer, no windows yet.
 *
 * With version 3, the migration bellowsd runs comes after those rows,
 * and then the statistics only version 3 holds: conv.weight's activations
 * in window 1, its per-tensor times in window 3; window 3's timings,
 * memory and the calibration in force (apply step 15, 4 steps); three
 * collectives (two in window 3, one in window 0) and three policy
 * metrics (two in window 1, one in window 3).
 *
 * Header-only: each test executable includes it once.
 */
#ifndef HDB_FIXTURE_H
#define HDB_FIXTURE_H

#include <sqlite3.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define FIXTURE_START 1795305600000LL /* 2026-11-22T00:00:00.000Z */

static const char fixture_schema_v1[] =
    "CREATE TABLE runs (id INTEGER PRIMARY KEY, job TEXT NOT NULL,"
    " world INTEGER NOT NULL, n_layers INTEGER NOT NULL,"
    " started_wall_ms INTEGER NOT NULL, ended_wall_ms INTEGER,"
    " instance TEXT NOT NULL, config_hash TEXT NOT NULL,"
    " first_seq INTEGER NOT NULL);"
    "CREATE INDEX runs_job ON runs (job, id);"
    "CREATE TABLE layers (run_id INTEGER NOT NULL, idx INTEGER NOT NULL,"
    " name TEXT NOT NULL, numel INTEGER NOT NULL, ndim INTEGER NOT NULL,"
    " shape TEXT NOT NULL, PRIMARY KEY (run_id, idx)) WITHOUT ROWID;"
    "CREATE TABLE rank_events (run_id INTEGER NOT NULL,"
    " rank INTEGER NOT NULL, wall_ms INTEGER NOT NULL, kind TEXT NOT NULL,"
    " step INTEGER NOT NULL, incarnation TEXT);"
    "CREATE INDEX rank_events_rank ON rank_events (run_id, rank, wall_ms);"
    "CREATE VIEW ranks AS SELECT run_id, rank,"
    " min(wall_ms) AS first_wall_ms, max(wall_ms) AS last_wall_ms,"
    " sum(kind IN ('joined', 'rejoined')) AS joins,"
    " sum(kind = 'lost') AS losses,"
    " (SELECT e.kind FROM rank_events e WHERE e.run_id = r.run_id"
    "  AND e.rank = r.rank ORDER BY e.wall_ms DESC, e.rowid DESC LIMIT 1)"
    " AS last_kind"
    " FROM rank_events r GROUP BY run_id, rank;"
    "CREATE TABLE window_info (run_id INTEGER NOT NULL,"
    " window INTEGER NOT NULL, first_step INTEGER NOT NULL,"
    " last_step INTEGER NOT NULL, epoch INTEGER NOT NULL, lr REAL,"
    " lr_next REAL, batch_size INTEGER NOT NULL, lr_scale REAL,"
    " world INTEGER NOT NULL, ranks_reported INTEGER NOT NULL,"
    " ranks_expected INTEGER NOT NULL, complete INTEGER NOT NULL,"
    " step_ms_median REAL, compute_ms_median REAL, comm_ms_median REAL,"
    " floats_sent INTEGER NOT NULL, floats_raw INTEGER NOT NULL,"
    " closed_wall_ms INTEGER NOT NULL, state_batch_size INTEGER NOT NULL,"
    " state_size_threshold INTEGER NOT NULL,"
    " state_compression_off INTEGER NOT NULL,"
    " PRIMARY KEY (run_id, window)) WITHOUT ROWID;"
    "CREATE TABLE windows (run_id INTEGER NOT NULL, window INTEGER NOT NULL,"
    " layer INTEGER NOT NULL, grad_norm_rank0 REAL, grad_norm_mean REAL,"
    " sum_sq REAL, abs_sum REAL, max_abs REAL, count INTEGER NOT NULL,"
    " nonzero INTEGER NOT NULL, nonfinite INTEGER NOT NULL,"
    " momentum_abs_mean REAL, level REAL, error_bound REAL,"
    " PRIMARY KEY (run_id, window, layer)) WITHOUT ROWID;"
    "CREATE TABLE timings (run_id INTEGER NOT NULL, window INTEGER NOT NULL,"
    " rank INTEGER NOT NULL, steps INTEGER NOT NULL, step_ms REAL,"
    " compute_ms REAL, comm_ms REAL, step_ms_max REAL,"
    " bytes_sent INTEGER NOT NULL, floats_sent INTEGER NOT NULL,"
    " floats_raw INTEGER NOT NULL, decision_misses INTEGER NOT NULL,"
    " reports_dropped INTEGER NOT NULL,"
    " PRIMARY KEY (run_id, window, rank)) WITHOUT ROWID;"
    "CREATE TABLE decisions (run_id INTEGER NOT NULL, seq INTEGER NOT NULL,"
    " apply_step INTEGER NOT NULL, window INTEGER NOT NULL,"
    " wall_ms INTEGER NOT NULL, source TEXT NOT NULL, policy TEXT NOT NULL,"
    " reason TEXT NOT NULL, n_layers INTEGER NOT NULL,"
    " levels BLOB NOT NULL, error_bounds BLOB NOT NULL,"
    " batch_size INTEGER NOT NULL, lr_scale REAL,"
    " size_threshold INTEGER NOT NULL, compression_off INTEGER NOT NULL,"
    " codec_table BLOB, PRIMARY KEY (run_id, seq));"
    "CREATE TABLE decision_changes (run_id INTEGER NOT NULL,"
    " seq INTEGER NOT NULL, knob TEXT NOT NULL, layer INTEGER, old REAL,"
    " new REAL);"
    "CREATE INDEX decision_changes_seq ON decision_changes (run_id, seq);"
    "CREATE INDEX decision_changes_layer ON decision_changes"
    " (run_id, layer, seq);"
    "CREATE TABLE events (id INTEGER PRIMARY KEY, wall_ms INTEGER NOT NULL,"
    " run_id INTEGER, job TEXT, kind TEXT NOT NULL, text TEXT NOT NULL,"
    " policy_hash TEXT);"
    "CREATE INDEX events_run ON events (run_id, id);"
    "CREATE INDEX events_kind ON events (kind, wall_ms);"
    "CREATE TABLE policy_files (hash TEXT PRIMARY KEY, path TEXT NOT NULL,"
    " text TEXT NOT NULL, first_seen_wall_ms INTEGER NOT NULL);";

static const char fixture_migration_v2[] =
    "ALTER TABLE runs ADD COLUMN recoveries INTEGER NOT NULL DEFAULT 0;"
    "CREATE INDEX window_info_closed ON window_info (closed_wall_ms);";

/* Version 2 -> 3 as controller/store.c migrates. */
static const char fixture_migration_v3[] =
    "ALTER TABLE windows ADD COLUMN act_steps INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE windows ADD COLUMN act_lbar REAL DEFAULT 0;"
    "ALTER TABLE windows ADD COLUMN act_nonzero REAL DEFAULT 0;"
    "ALTER TABLE windows ADD COLUMN act_bytes REAL DEFAULT 0;"
    "ALTER TABLE windows ADD COLUMN act_raw_bytes REAL DEFAULT 0;"
    "ALTER TABLE windows ADD COLUMN comm_raw_ms REAL;"
    "ALTER TABLE windows ADD COLUMN comm_comp_ms REAL;"
    "ALTER TABLE windows ADD COLUMN codec_ms REAL;"
    "ALTER TABLE windows ADD COLUMN comm_raw_n INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE windows ADD COLUMN comm_comp_n INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE window_info ADD COLUMN backward_ms_median REAL DEFAULT 0;"
    "ALTER TABLE window_info ADD COLUMN codec_ms_median REAL DEFAULT 0;"
    "ALTER TABLE window_info ADD COLUMN mem_device_used INTEGER NOT NULL"
    " DEFAULT 0;"
    "ALTER TABLE window_info ADD COLUMN mem_device_total INTEGER NOT NULL"
    " DEFAULT 0;"
    "ALTER TABLE window_info ADD COLUMN mem_host_used INTEGER NOT NULL"
    " DEFAULT 0;"
    "ALTER TABLE window_info ADD COLUMN state_apply_step INTEGER NOT NULL"
    " DEFAULT 0;"
    "ALTER TABLE window_info ADD COLUMN state_calibrate_steps INTEGER NOT"
    " NULL DEFAULT 0;"
    "ALTER TABLE timings ADD COLUMN backward_ms REAL DEFAULT 0;"
    "ALTER TABLE timings ADD COLUMN codec_ms REAL DEFAULT 0;"
    "ALTER TABLE timings ADD COLUMN mem_device_used INTEGER NOT NULL"
    " DEFAULT 0;"
    "ALTER TABLE timings ADD COLUMN mem_device_total INTEGER NOT NULL"
    " DEFAULT 0;"
    "ALTER TABLE timings ADD COLUMN mem_host_used INTEGER NOT NULL"
    " DEFAULT 0;"
    "ALTER TABLE decisions ADD COLUMN calibrate_steps INTEGER NOT NULL"
    " DEFAULT 0;"
    "CREATE TABLE comm_samples (run_id INTEGER NOT NULL,"
    " window INTEGER NOT NULL, rank INTEGER NOT NULL,"
    " bytes INTEGER NOT NULL, ms REAL, count INTEGER NOT NULL,"
    " compressed INTEGER NOT NULL);"
    "CREATE INDEX comm_samples_window ON comm_samples (run_id, window);"
    "CREATE TABLE policy_metrics (run_id INTEGER NOT NULL,"
    " window INTEGER NOT NULL, policy TEXT NOT NULL, name TEXT NOT NULL,"
    " layer INTEGER, value REAL);"
    "CREATE INDEX policy_metrics_window ON policy_metrics (run_id, window);"
    "CREATE INDEX policy_metrics_name ON policy_metrics (run_id, name,"
    " window);";

static const char fixture_migration_v4[] =
    "ALTER TABLE window_info ADD COLUMN saved_bytes INTEGER NOT NULL"
    " DEFAULT 0;";

static const char fixture_migration_v5[] =
    "ALTER TABLE runs ADD COLUMN run_key TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE runs ADD COLUMN resumes INTEGER NOT NULL DEFAULT 0;";

static const char fixture_rows_v5[] =
    "UPDATE runs SET run_key = 'torchrun-7', resumes = 2 WHERE id = 1;";

static const char fixture_rows_v4[] =
    "UPDATE window_info SET saved_bytes = 7000 WHERE run_id = 1"
    " AND window = 3;";

static const char fixture_rows_v3[] =
    "UPDATE windows SET act_steps = 5, act_lbar = 0.5, act_nonzero = 0.25,"
    " act_bytes = 100, act_raw_bytes = 400"
    " WHERE run_id = 1 AND window = 1 AND layer = 0;"
    "UPDATE windows SET comm_raw_ms = 2, comm_raw_n = 3, comm_comp_ms = 1,"
    " comm_comp_n = 3, codec_ms = 0.5"
    " WHERE run_id = 1 AND window = 3 AND layer = 0;"
    "UPDATE window_info SET backward_ms_median = 8, codec_ms_median = 1,"
    " mem_device_used = 3000, mem_device_total = 8000,"
    " mem_host_used = 500, state_apply_step = 15,"
    " state_calibrate_steps = 4 WHERE run_id = 1 AND window = 3;"
    "UPDATE timings SET backward_ms = 40, codec_ms = 5,"
    " mem_device_used = 3000 WHERE run_id = 1 AND window = 3 AND rank = 0;"
    "UPDATE decisions SET calibrate_steps = 4 WHERE run_id = 1 AND seq = 4;"
    "INSERT INTO comm_samples VALUES (1, 3, 0, 4096, 0.5, 10, 0),"
    " (1, 3, 2, 1024, 0.25, 2, 1), (1, 0, 1, 4096, 0.75, 10, 0);"
    "INSERT INTO policy_metrics VALUES"
    " (1, 1, 'slim', 'threshold_bytes', NULL, 2200000),"
    " (1, 1, 'slim', 'ratio', 0, 1.5), (1, 3, 'perf', 'alpha_ms', NULL,"
    " 0.25);";

/* Levels BLOBs: little-endian doubles {2, 0} and {1, 0}. */
#define FIXTURE_L20 "x'00000000000000400000000000000000'"
#define FIXTURE_L10 "x'000000000000F03F0000000000000000'"
#define FIXTURE_Z2  "x'00000000000000000000000000000000'"

static const char fixture_rows[] =
    "INSERT INTO runs (id, job, world, n_layers, started_wall_ms,"
    " ended_wall_ms, instance, config_hash, first_seq) VALUES"
    " (1, 'resnet', 3, 2, 1795305600000, 1795305605000,"
    "  '00000000000000aa', 'a', 1),"
    " (2, 'bert', 1, 1, 1795305610000, NULL, '00000000000000aa', 'a', 1);"
    "INSERT INTO layers VALUES (1, 0, 'conv.weight', 1728, 4, '64x3x3x3'),"
    " (1, 1, 'fc.bias', 10, 1, '10'), (2, 0, 'emb', 6, 2, '2x3');"
    "INSERT INTO rank_events VALUES"
    " (1, 0, 1795305600000, 'joined', 0, '0000000000000001'),"
    " (1, 1, 1795305600000, 'joined', 0, '0000000000000002'),"
    " (1, 2, 1795305600000, 'joined', 0, '0000000000000003'),"
    " (1, 1, 1795305603500, 'lost', 15, NULL);"
    /* window, steps, lr, lr_next, closed */
    "INSERT INTO window_info VALUES"
    " (1, 0, 0, 4, 0, 0.1, 0.1, 32, 1.0, 3, 3, 3, 1, 12, 10, 2, 100, 1000,"
    "  1795305601000, 0, 0, 0),"
    " (1, 1, 5, 9, 0, 0.1, 0.1, 32, 1.0, 3, 3, 3, 1, 12, 10, 2, 100, 1000,"
    "  1795305602000, 0, 0, 0),"
    " (1, 2, 10, 14, 0, 0.1, 0.01, 32, 1.0, 3, 3, 3, 1, 12, 10, 2, 100, 1000,"
    "  1795305603000, 0, 0, 0),"
    " (1, 3, 15, 19, 0, 0.01, 0.01, 32, 1.0, 3, 2, 3, 0, 20, 10, 2, 100,"
    "  1000, 1795305604000, 0, 0, 0);"
    "INSERT INTO windows VALUES"
    " (1, 0, 0, 10, 11, 1, 1, 1, 5184, 5184, 0, 0, 2, 0),"
    " (1, 0, 1, 1, 1, 1, 1, 1, 30, 30, 0, 0, 0, 0),"
    " (1, 1, 0, NULL, 4, 1, 1, 1, 5184, 5184, 0, 0, 2, 0),"
    " (1, 1, 1, 1, 1, 1, 1, 1, 30, 30, 0, 0, 0, 0),"
    " (1, 2, 0, 3, 3.5, 1, 1, 1, 5184, 5184, 0, 0, 1, 0),"
    " (1, 3, 0, 3, 3, 1, 1, 1, 5184, 5184, 0, 0, 1, 0),"
    " (1, 3, 1, 1, 1, 1, 1, 1, 30, 30, 0, 0, 0, 0);"
    /* 5 steps per window: rank 0 10 ms a step, rank 1 12, rank 2 30. */
    "INSERT INTO timings VALUES"
    " (1, 0, 0, 5, 50, 40, 10, 11, 400, 100, 1000, 0, 0),"
    " (1, 0, 1, 5, 60, 50, 10, 13, 400, 100, 1000, 0, 0),"
    " (1, 0, 2, 5, 150, 140, 10, 31, 400, 100, 1000, 1, 0),"
    " (1, 1, 0, 5, 50, 40, 10, 11, 400, 100, 1000, 0, 0),"
    " (1, 1, 1, 5, 60, 50, 10, 13, 400, 100, 1000, 0, 0),"
    " (1, 1, 2, 5, 150, 140, 10, 45, 400, 100, 1000, 0, 2),"
    " (1, 2, 0, 5, 50, 40, 10, 11, 400, 100, 1000, 0, 0),"
    " (1, 2, 1, 5, 60, 50, 10, 13, 400, 100, 1000, 0, 0),"
    " (1, 2, 2, 5, 150, 140, 10, 31, 400, 100, 1000, 0, 2),"
    " (1, 3, 0, 5, 50, 40, 10, 11, 400, 100, 1000, 0, 0),"
    " (1, 3, 2, 5, 150, 140, 10, 31, 400, 100, 1000, 0, 3);"
    "INSERT INTO decisions VALUES"
    " (1, 1, 0, 0, 1795305600000, 'initial', 'accordion',"
    "  'critical until the check', 2, " FIXTURE_L20 ", " FIXTURE_Z2
    ", 0, 1.0, 0, 0, NULL),"
    " (1, 2, 5, 1, 1795305601000, 'window', '', 'no change', 2, " FIXTURE_L20
    ", " FIXTURE_Z2 ", 0, 1.0, 0, 0, NULL),"
    " (1, 3, 10, 2, 1795305602000, 'window', 'accordion',"
    "  'window 1: conv.weight stable, r=0.01', 2, " FIXTURE_L10 ", " FIXTURE_Z2
    ", 0, 1.0, 0, 0, x'0102'),"
    " (1, 4, 15, 3, 1795305603000, 'window', '', 'no change', 2, " FIXTURE_L10
    ", " FIXTURE_Z2 ", 0, 1.0, 0, 0, NULL);"
    "INSERT INTO decision_changes VALUES"
    " (1, 1, 'level', 0, NULL, 2), (1, 3, 'level', 0, 2, 1),"
    " (1, 3, 'codec_table', NULL, 0, 2);"
    "INSERT INTO events (id, wall_ms, run_id, job, kind, text, policy_hash)"
    " VALUES"
    " (1, 1795305599000, NULL, NULL, 'daemon_started', 'started', 'a'),"
    " (2, 1795305601500, NULL, NULL, 'reload_ok', 'reloaded', 'b'),"
    " (3, 1795305603500, 1, 'resnet', 'rank_lost', 'rank 1 lost', NULL),"
    " (4, 1795305610000, 2, 'bert', 'rank_joined',"
    "  'rank 0 \"joined\",\nat step 0', NULL);"
    "INSERT INTO policy_files VALUES"
    " ('a', 'p.yaml', 'jobs: []', 1795305599000),"
    " ('b', 'p.yaml', 'jobs:\n  - match: \"*\"', 1795305601500),"
    " ('c', 'q.yaml', 'unrelated', 1795305000000);";

/* Removes the database at `path` and its WAL and shared-memory files. */
static void
fixture_db_remove(const char *path)
{
	char p[4096];

	remove(path);
	snprintf(p, sizeof(p), "%s-wal", path);
	remove(p);
	snprintf(p, sizeof(p), "%s-shm", path);
	remove(p);
}

/* Creates the database at `path` (removed first) with schema `version`
 * (1 to 4; a larger one sets that user_version on the version 4
 * schema), and the rows above when `rows`. Returns SQLITE_OK or the
 * first failure. */
static int
fixture_db_create(const char *path, int version, int rows)
{
	char sql[64];
	sqlite3 *db = NULL;
	int rc;

	fixture_db_remove(path);
	rc = sqlite3_open(path, &db);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, "PRAGMA journal_mode = WAL", NULL, NULL,
		    NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, fixture_schema_v1, NULL, NULL, NULL);
	if (rc == SQLITE_OK && version >= 2)
		rc = sqlite3_exec(db, fixture_migration_v2, NULL, NULL, NULL);
	if (rc == SQLITE_OK && rows)
		rc = sqlite3_exec(db, fixture_rows, NULL, NULL, NULL);
	if (rc == SQLITE_OK && version >= 3)
		rc = sqlite3_exec(db, fixture_migration_v3, NULL, NULL, NULL);
	if (rc == SQLITE_OK && version >= 3 && rows)
		rc = sqlite3_exec(db, fixture_rows_v3, NULL, NULL, NULL);
	if (rc == SQLITE_OK && version >= 4)
		rc = sqlite3_exec(db, fixture_migration_v4, NULL, NULL, NULL);
	if (rc == SQLITE_OK && version >= 4 && rows)
		rc = sqlite3_exec(db, fixture_rows_v4, NULL, NULL, NULL);
	if (rc == SQLITE_OK && version >= 5)
		rc = sqlite3_exec(db, fixture_migration_v5, NULL, NULL, NULL);
	if (rc == SQLITE_OK && version >= 5 && rows)
		rc = sqlite3_exec(db, fixture_rows_v5, NULL, NULL, NULL);
	snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", version);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
	sqlite3_close(db);
	return rc;
}

#endif /* HDB_FIXTURE_H */
