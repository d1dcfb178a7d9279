/* hdb_fixture - a small history database made by hand, for the tests of
 * the tools that read it.
 *
 * The schema is made by bellowsd's own schema code (store_schema.h),
 * version by version, so no DDL is copied here; the file is in WAL mode,
 * as bellowsd keeps it. The rows are chosen so that every answer can be
 * computed by hand:
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

#include "client/historydb.h"
#include "controller/store.h"
#include "controller/store_schema.h"

#include <sqlite3.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FIXTURE_START 1795305600000LL /* 2026-11-22T00:00:00.000Z */

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
 * (1 to CTL_STORE_SCHEMA_VERSION; a larger one sets that user_version
 * on the current schema), made by bellowsd's own schema code
 * (store_schema.h) step by step, with the rows above written at the
 * version they belong to when `rows`. Returns SQLITE_OK or the first
 * failure (SQLITE_ERROR for the schema's). */
static int
fixture_db_create(const char *path, int version, int rows)
{
	static const struct {
		int version;     /* the schema the rows need */
		const char *sql; /* the rows */
	} steps[] = {
		{ 2, fixture_rows },
		{ 3, fixture_rows_v3 },
		{ 4, fixture_rows_v4 },
		{ 5, fixture_rows_v5 },
	};
	int top = version < CTL_STORE_SCHEMA_VERSION ? version
						     : CTL_STORE_SCHEMA_VERSION;
	char sql[64], err[512];
	sqlite3 *db = NULL;
	int rc;

	fixture_db_remove(path);
	rc = sqlite3_open(path, &db);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, "PRAGMA journal_mode = WAL", NULL, NULL,
		    NULL);
	for (size_t i = 0; rc == SQLITE_OK && i < 4; i++) {
		int at = steps[i].version < top ? steps[i].version : top;

		if (i > 0 && steps[i].version > top)
			break;
		if (ctl_store_schema_make(db, at, err, sizeof(err)) != 0) {
			fprintf(stderr, "fixture: %s\n", err);
			rc = SQLITE_ERROR;
		}
		if (rc == SQLITE_OK && rows)
			rc = sqlite3_exec(db, steps[i].sql, NULL, NULL, NULL);
	}
	if (rc == SQLITE_OK &&
	    ctl_store_schema_make(db, top, err, sizeof(err)) != 0) {
		fprintf(stderr, "fixture: %s\n", err);
		rc = SQLITE_ERROR;
	}
	snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", version);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
	sqlite3_close(db);
	return rc;
}

/* A fixture database in a temporary directory of its own, opened
 * read-only through tool_hdb_open: what the history readers' tests
 * share. */
typedef struct hdb_tmp {
	char dir[64];               /* temporary directory */
	char path[128];             /* the database in it */
	char err[TOOL_HDB_ERR_MAX]; /* tool_hdb_open's message */
	tool_hdb *db;               /* the opened database, NULL before */
} hdb_tmp;

/* Makes t's directory, /tmp/bellows-TAG.XXXXXX, and names the database
 * in it; opens nothing. Returns 0, or -1 when mkdtemp fails. */
static inline int
hdb_tmp_make(hdb_tmp *t, const char *tag)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->dir, sizeof(t->dir), "/tmp/bellows-%s.XXXXXX", tag);
	if (mkdtemp(t->dir) == NULL)
		return -1;
	snprintf(t->path, sizeof(t->path), "%s/h.db", t->dir);
	return 0;
}

/* Creates the fixture's database at schema `version` (one set of rows)
 * and opens it into t->db. Returns 0, or -1 (t->err may say why). */
static inline int
hdb_tmp_open(hdb_tmp *t, int version)
{
	if (fixture_db_create(t->path, version, 1) != SQLITE_OK)
		return -1;
	return tool_hdb_open(t->path, &t->db, t->err, sizeof(t->err)) == 0 ? 0
									   : -1;
}

/* Closes t's database and removes it and its directory. */
static inline void
hdb_tmp_done(hdb_tmp *t)
{
	tool_hdb_close(&t->db);
	fixture_db_remove(t->path);
	rmdir(t->dir);
}

#endif /* HDB_FIXTURE_H */
