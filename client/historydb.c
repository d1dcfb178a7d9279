/* historydb - the history database, read-only, see historydb.h.
 *
 * Every statement is a constant of this file; what the user typed (a run
 * id, a job or layer name, a window or time bound) is bound to a named
 * parameter (:run, :job, :layer, :wlo, :whi, :tlo, :thi, :changed), and
 * an unset restriction binds the widest bound or NULL, so one statement
 * serves every combination of options. Times are formatted by
 * bellows_time(), a function this module registers on its connection,
 * so that every tool prints them alike (UTC, milliseconds).
 *
 * This file owns the connection, the views, the named questions, runs
 * and layers, and rows in memory; loading a run as replay input is
 * historydb_replay.c's, and what the two share is historydb_int.h.
 */
#include "historydb.h"
#include "historydb_int.h"
#include "history/hist_cols.h"
#include "history/hist_read.h"
#include "metrics.h"
#include "common/errbuf.h"
#include "common/suggest.h"

#include <bellows/error.h>
#include <bellows/policy.h>

#include <sqlite3.h>

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* ---- the questions ----------------------------------------------------- */

#define HDB_MAX_MS "9223372036854775807"

/* A macro's value as an SQL literal: LIMIT 64 for
 * HDB_STR(TOOL_HDB_DECISIONS_LAST). */
#define HDB_STR_(x) #x
#define HDB_STR(x)  HDB_STR_(x)

/* A decision change's values as text: a size threshold above every
 * tensor (2^64 - 1, or anything past 2^63) is "all raw". */
#define HDB_OLD_VALUE                                                          \
	"CASE WHEN c.knob = 'size_threshold' AND c.old >= 9.2e18"              \
	" THEN 'all raw' ELSE bellows_num(c.old) END"
#define HDB_NEW_VALUE                                                          \
	"CASE WHEN c.knob = 'size_threshold' AND c.new >= 9.2e18"              \
	" THEN 'all raw' ELSE bellows_num(c.new) END"

static const char *const hdb_questions[TOOL_HDB_Q_N] = {
	[TOOL_HDB_Q_RUNS] =
	    "SELECT r.id, r.job, r.world, r.n_layers AS layers,"
	    " bellows_time(r.started_wall_ms) AS started,"
	    " bellows_time(r.ended_wall_ms) AS ended,"
	    " CASE WHEN r.ended_wall_ms IS NULL THEN 'live' ELSE 'ended' END"
	    "  AS state,"
	    " r.run_key AS launch, r.resumes,"
	    " (SELECT count(*) FROM window_info i WHERE i.run_id = r.id)"
	    "  AS windows,"
	    " (SELECT count(*) FROM decisions d WHERE d.run_id = r.id)"
	    "  AS decisions,"
	    " (SELECT coalesce(sum(i.floats_raw - i.floats_sent), 0) * 4"
	    "  FROM window_info i WHERE i.run_id = r.id) AS bytes_saved"
	    " FROM hdb_runs r"
	    " WHERE (:run IS NULL OR r.id = :run)"
	    " AND (:job IS NULL OR r.job = :job)"
	    " AND r.started_wall_ms <= :thi"
	    " AND coalesce(r.ended_wall_ms, " HDB_MAX_MS ") >= :tlo"
	    " ORDER BY r.id",

	/* `w` is read four times: SQLite materialises it once. The
	 * applied level is the decided one in rows that lack it (written
	 * before it was recorded): TOOL_HDB_Q_APPLIED_MISSING counts
	 * them, for the tools to say so. */
	[TOOL_HDB_Q_LAYERS] =
	    "WITH w AS (SELECT layer, window, level,"
	    "  coalesce(level_applied, level) AS applied FROM hdb_windows"
	    "  WHERE run_id = :run AND window BETWEEN :wlo AND :whi),"
	    " agg AS (SELECT layer, count(*) AS n, min(applied) AS amin,"
	    "  max(applied) AS amax, max(level) AS dmax,"
	    "  max(window) AS wmax FROM w GROUP BY layer),"
	    " last AS (SELECT w.layer, w.applied, w.level FROM w JOIN agg"
	    "  ON agg.layer = w.layer AND agg.wmax = w.window),"
	    " per AS (SELECT layer, applied, count(*) AS n FROM w"
	    "  GROUP BY layer, applied ORDER BY layer, applied),"
	    " hist AS (SELECT layer,"
	    "  group_concat(bellows_num(applied) || ':' || n, ' ') AS at"
	    "  FROM per GROUP BY layer),"
	    " chg AS (SELECT c.layer, count(*) AS n FROM decision_changes c"
	    "  JOIN decisions d ON d.run_id = c.run_id AND d.seq = c.seq"
	    "  WHERE c.run_id = :run AND c.knob = 'level'"
	    "  AND c.old IS NOT NULL AND d.window BETWEEN :wlo AND :whi"
	    "  GROUP BY c.layer)"
	    " SELECT l.idx AS layer, l.name, l.shape, l.numel,"
	    " coalesce(agg.n, 0) AS windows, agg.amin AS applied_min,"
	    " agg.amax AS applied_max, last.applied AS applied_last,"
	    " hist.at AS windows_at_applied, agg.dmax AS decided_max,"
	    " last.level AS decided_last,"
	    " coalesce(chg.n, 0) AS decided_changes"
	    " FROM layers l"
	    " LEFT JOIN agg ON agg.layer = l.idx"
	    " LEFT JOIN last ON last.layer = l.idx"
	    " LEFT JOIN hist ON hist.layer = l.idx"
	    " LEFT JOIN chg ON chg.layer = l.idx"
	    " WHERE l.run_id = :run ORDER BY l.idx",

	/* The layers compressed, as applied (the decided level where a
	 * row lacks it) and as decided, counted per window in one pass
	 * over the range's rows rather than once per window. */
	[TOOL_HDB_Q_WINDOWS] =
	    "WITH c AS (SELECT window,"
	    "  sum(coalesce(level_applied, level) > 0) AS applied,"
	    "  sum(level > 0) AS decided FROM hdb_windows"
	    "  WHERE run_id = :run AND window BETWEEN :wlo AND :whi"
	    "  GROUP BY window)"
	    " SELECT i.window, i.first_step, i.last_step, i.lr,"
	    " i.lr_next, i.ranks_reported AS reported,"
	    " i.ranks_expected AS expected, i.complete, i.late,"
	    " i.step_ms_median, i.floats_sent, i.floats_raw,"
	    " round(100.0 * i.floats_sent / nullif(i.floats_raw, 0), 1)"
	    "  AS sent_pct,"
	    " (i.floats_raw - i.floats_sent) * 4 AS bytes_saved,"
	    " c.applied AS compressed_applied,"
	    " c.decided AS compressed_decided,"
	    " bellows_time(i.closed_wall_ms) AS closed"
	    " FROM hdb_window_info i"
	    " LEFT JOIN c ON c.window = i.window"
	    " WHERE i.run_id = :run AND i.window BETWEEN :wlo AND :whi"
	    " ORDER BY i.window",

	[TOOL_HDB_Q_LAYER_WINDOWS] =
	    "SELECT w.window, l.name AS layer,"
	    " w.grad_norm_rank0 AS norm_rank0, w.grad_norm_mean AS norm_mean,"
	    " coalesce(w.level_applied, w.level) AS level_applied,"
	    " w.level AS level_decided, w.error_bound, i.lr"
	    " FROM hdb_windows w"
	    " JOIN layers l ON l.run_id = w.run_id AND l.idx = w.layer"
	    " LEFT JOIN window_info i"
	    "  ON i.run_id = w.run_id AND i.window = w.window"
	    " WHERE w.run_id = :run AND w.layer = :layer"
	    " AND w.window BETWEEN :wlo AND :whi"
	    " ORDER BY w.window",

	/* The changes are grouped once per run, not looked up per
	 * decision: a long run has many decisions and many changes. */
	[TOOL_HDB_Q_DECISIONS] =
	    "WITH c AS (SELECT c.seq,"
	    "  CASE WHEN c.layer IS NULL THEN c.knob"
	    "  ELSE coalesce(l.name, '#' || c.layer) || ' ' || c.knob END"
	    "  || ' ' || coalesce(" HDB_OLD_VALUE " || ' ', '')"
	    "  || '-> ' || coalesce(" HDB_NEW_VALUE ", '-') AS t"
	    "  FROM decision_changes c LEFT JOIN layers l"
	    "  ON l.run_id = c.run_id AND l.idx = c.layer"
	    "  WHERE c.run_id = :run AND (:layer IS NULL OR c.layer = :layer)"
	    "  ORDER BY c.seq, c.rowid),"
	    " ch AS (SELECT seq, count(*) AS n, group_concat(t, '; ') AS t"
	    "  FROM c GROUP BY seq)"
	    " SELECT d.seq, d.window, d.apply_step,"
	    " bellows_time(d.wall_ms) AS time, d.source, d.policy, d.reason,"
	    " coalesce(ch.n, 0) AS n_changes, ch.t AS changes"
	    " FROM decisions d LEFT JOIN ch ON ch.seq = d.seq"
	    " WHERE d.run_id = :run AND d.window BETWEEN :wlo AND :whi"
	    " AND d.wall_ms BETWEEN :tlo AND :thi"
	    " AND ((:layer IS NULL AND NOT :changed) OR ch.seq IS NOT NULL)"
	    " ORDER BY d.seq",

	[TOOL_HDB_Q_EVENTS] =
	    "SELECT e.id, bellows_time(e.wall_ms) AS time, e.kind, e.job,"
	    " e.run_id AS run, e.text"
	    " FROM events e"
	    " WHERE e.wall_ms BETWEEN :tlo AND :thi"
	    " AND (:job IS NULL OR e.job = :job)"
	    " AND (:run IS NULL OR e.run_id = :run"
	    "  OR (e.run_id IS NULL AND e.job IS NULL"
	    "  AND e.wall_ms >= (SELECT started_wall_ms FROM runs"
	    "   WHERE id = :run)"
	    "  AND e.wall_ms <= coalesce((SELECT ended_wall_ms FROM runs"
	    "   WHERE id = :run), " HDB_MAX_MS ")))"
	    " ORDER BY e.id",

	/* The median of the ranks' mean step times, by window functions. */
	[TOOL_HDB_Q_TIMINGS] =
	    "WITH per AS (SELECT rank, count(*) AS windows,"
	    "  sum(steps) AS steps,"
	    "  sum(step_ms) / nullif(sum(steps), 0) AS step_ms_mean,"
	    "  max(step_ms_max) AS step_ms_max,"
	    "  sum(compute_ms) / nullif(sum(steps), 0) AS compute_ms_mean,"
	    "  sum(comm_ms) / nullif(sum(steps), 0) AS comm_ms_mean,"
	    "  sum(decision_misses) AS decision_misses,"
	    "  max(reports_dropped) AS reports_dropped"
	    "  FROM timings"
	    "  WHERE run_id = :run AND window BETWEEN :wlo AND :whi"
	    "  GROUP BY rank),"
	    " ord AS (SELECT step_ms_mean AS v,"
	    "  row_number() OVER (ORDER BY step_ms_mean) AS i,"
	    "  count(*) OVER () AS n FROM per WHERE step_ms_mean IS NOT NULL),"
	    " med AS (SELECT avg(v) AS m FROM ord"
	    "  WHERE i IN ((n + 1) / 2, (n + 2) / 2)),"
	    " closed AS (SELECT count(*) AS n FROM window_info"
	    "  WHERE run_id = :run AND window BETWEEN :wlo AND :whi)"
	    " SELECT per.rank, per.windows,"
	    " max(closed.n - per.windows, 0) AS windows_missed, per.steps,"
	    " per.step_ms_mean, per.step_ms_max,"
	    " round(per.step_ms_mean / nullif(med.m, 0), 3) AS vs_median,"
	    " per.compute_ms_mean, per.comm_ms_mean, per.decision_misses,"
	    " per.reports_dropped"
	    " FROM per, med, closed"
	    " ORDER BY per.step_ms_mean IS NULL, per.step_ms_mean DESC,"
	    " per.rank",

	[TOOL_HDB_Q_TIMINGS_ALL] =
	    "SELECT t.window, t.rank, t.steps,"
	    " t.step_ms / nullif(t.steps, 0) AS step_ms_mean, t.step_ms_max,"
	    " round(t.step_ms / nullif(t.steps, 0)"
	    "  / nullif(i.step_ms_median, 0), 3) AS vs_median,"
	    " t.compute_ms / nullif(t.steps, 0) AS compute_ms_mean,"
	    " t.comm_ms / nullif(t.steps, 0) AS comm_ms_mean,"
	    " t.bytes_sent, t.floats_sent, t.floats_raw, t.decision_misses,"
	    " t.reports_dropped,"
	    " t.backward_ms / nullif(t.steps, 0) AS backward_ms_mean,"
	    " t.codec_ms / nullif(t.steps, 0) AS codec_ms_mean,"
	    " t.mem_device_used AS mem_device, t.mem_device_total AS device,"
	    " t.mem_host_used AS mem_host"
	    " FROM hdb_timings t LEFT JOIN window_info i"
	    "  ON i.run_id = t.run_id AND i.window = t.window"
	    " WHERE t.run_id = :run AND t.window BETWEEN :wlo AND :whi"
	    " ORDER BY t.window, t.rank",

	[TOOL_HDB_Q_STATS] =
	    "SELECT i.window, i.backward_ms_median AS backward_ms,"
	    " i.codec_ms_median AS codec_ms, i.compute_ms_median AS compute_ms,"
	    " i.comm_ms_median AS comm_ms, i.mem_device_used AS mem_device,"
	    " i.mem_device_total AS device, i.mem_host_used AS mem_host,"
	    " i.state_size_threshold AS threshold,"
	    " i.state_compression_off AS compression_off,"
	    " CASE WHEN i.state_calibrate_steps > 0"
	    "  THEN i.state_apply_step + i.state_calibrate_steps END"
	    "  AS calibrate_until,"
	    " (SELECT count(*) FROM hdb_comm c WHERE c.run_id = i.run_id"
	    "  AND c.window = i.window) AS collectives"
	    " FROM hdb_window_info i"
	    " WHERE i.run_id = :run AND i.window BETWEEN :wlo AND :whi"
	    " ORDER BY i.window",

	/* TOOL_HDB_Q_LAYER_STATS is made from the statistics table:
	 * hdb_layer_stats_sql. */

	/* The residual plan's memory (ResiReduce) from the layers'
	 * statistics: the floats the ranks held (mean over their steps) and
	 * the elements of the layers that had error feedback. */
	[TOOL_HDB_Q_RESIDUALS] =
	    "SELECT w.window, count(*) AS layers,"
	    " round(sum(w.resid_floats)) AS resid_floats,"
	    " sum(l.numel) AS resid_full,"
	    " round(100.0 * (1 - sum(w.resid_floats)"
	    "  / nullif(sum(l.numel), 0)), 1) AS saved_pct,"
	    " sum(w.resid_floats = 0) AS sharing,"
	    " sum(w.resid_floats > 0 AND w.resid_floats < l.numel) AS reduced"
	    " FROM hdb_windows w"
	    " JOIN layers l ON l.run_id = w.run_id AND l.idx = w.layer"
	    " WHERE w.run_id = :run AND w.resid_steps > 0"
	    " AND w.window BETWEEN :wlo AND :whi"
	    " GROUP BY w.window ORDER BY w.window",

	[TOOL_HDB_Q_LAYER_RESIDUALS] =
	    "SELECT w.window, l.name AS layer, w.resid_steps,"
	    " w.resid_l1, w.resid_l2,"
	    " w.resid_l2 / sqrt(l.numel) AS resid_rms,"
	    " w.resid_q50, w.resid_q90, w.resid_q99, w.resid_floats"
	    " FROM hdb_windows w"
	    " JOIN layers l ON l.run_id = w.run_id AND l.idx = w.layer"
	    " WHERE w.run_id = :run AND w.layer = :layer"
	    " AND w.window BETWEEN :wlo AND :whi AND w.resid_steps > 0"
	    " ORDER BY w.window",

	[TOOL_HDB_Q_METRICS] =
	    "SELECT m.window, m.policy, m.name, l.name AS layer, m.value"
	    " FROM hdb_metrics m LEFT JOIN layers l"
	    "  ON l.run_id = m.run_id AND l.idx = m.layer"
	    " WHERE m.run_id = :run AND m.window BETWEEN :wlo AND :whi"
	    " AND (:layer IS NULL OR m.layer = :layer)"
	    " ORDER BY m.window, m.seq",

	[TOOL_HDB_Q_COMM] =
	    "SELECT c.window, c.rank, c.bytes, c.compressed, c.count, c.ms,"
	    " round(c.bytes / nullif(c.ms, 0) / 1e6, 3) AS gbps"
	    " FROM hdb_comm c"
	    " WHERE c.run_id = :run AND c.window BETWEEN :wlo AND :whi"
	    " ORDER BY c.window, c.seq",

	/* The range's rows drive the join (a layer found by its key per
	 * row), then the layers without one: a LEFT JOIN from the layers
	 * would scan the range once per layer. */
	[TOOL_HDB_Q_LAYERS_RECENT] =
	    "WITH w AS MATERIALIZED (SELECT layer, window, level,"
	    "  level_applied, grad_norm_mean, error_bound FROM hdb_windows"
	    "  WHERE run_id = :run AND window BETWEEN :wlo AND :whi)"
	    " SELECT w.layer, l.name, l.numel, w.window, w.level,"
	    " w.level_applied, w.grad_norm_mean AS norm_mean, w.error_bound"
	    " FROM w JOIN layers l ON l.run_id = :run AND l.idx = w.layer"
	    " UNION ALL SELECT l.idx, l.name, l.numel, NULL, NULL, NULL, NULL,"
	    " NULL"
	    " FROM layers l WHERE l.run_id = :run"
	    " AND l.idx NOT IN (SELECT layer FROM w)"
	    " ORDER BY 1, 4",

	[TOOL_HDB_Q_LAYER_LEVELS] =
	    "SELECT layer, max(level) AS level_max, max(window) AS window"
	    " FROM windows WHERE run_id = :run AND window BETWEEN :wlo AND :whi"
	    " GROUP BY layer ORDER BY layer",

	/* Walks the run's decisions backwards from the newest and stops
	 * after the limit: a long run costs no more than a short one. */
	[TOOL_HDB_Q_DECISIONS_LAST] =
	    "SELECT * FROM (SELECT d.seq, d.window, d.apply_step,"
	    " bellows_time(d.wall_ms) AS time, d.source, d.policy, d.reason,"
	    " (SELECT count(*) FROM decision_changes c"
	    "  WHERE c.run_id = d.run_id AND c.seq = d.seq) AS n_changes"
	    " FROM decisions d"
	    " WHERE d.run_id = :run AND d.window BETWEEN :wlo AND :whi"
	    " ORDER BY d.seq DESC"
	    " LIMIT " HDB_STR(TOOL_HDB_DECISIONS_LAST) ") ORDER BY seq",

	/* Driven by the changes (a run's decisions that change nothing may
	 * be many more): each changed seq is looked up by its key. */
	[TOOL_HDB_Q_DECISIONS_CHANGED_LAST] =
	    "SELECT * FROM (SELECT d.seq, d.window, d.apply_step,"
	    " bellows_time(d.wall_ms) AS time, d.source, d.policy, d.reason,"
	    " (SELECT count(*) FROM decision_changes c"
	    "  WHERE c.run_id = d.run_id AND c.seq = d.seq) AS n_changes"
	    " FROM decisions d"
	    " WHERE d.run_id = :run AND d.window BETWEEN :wlo AND :whi"
	    " AND d.seq IN (SELECT c.seq FROM decision_changes c"
	    "  WHERE c.run_id = :run)"
	    " ORDER BY d.seq DESC"
	    " LIMIT " HDB_STR(TOOL_HDB_DECISIONS_LAST) ") ORDER BY seq",

	/* Every rank that reported or joined: its newest timings row in
	 * the windows and its newest rank event in the time range. */
	[TOOL_HDB_Q_RANK_STATES] =
	    "WITH t AS (SELECT rank, max(window) AS window FROM timings"
	    "  WHERE run_id = :run AND window BETWEEN :wlo AND :whi"
	    "  GROUP BY rank),"
	    " e AS (SELECT rank, kind, step, wall_ms FROM (SELECT rank, kind,"
	    "  step, wall_ms, row_number() OVER (PARTITION BY rank"
	    "  ORDER BY wall_ms DESC, rowid DESC) AS k FROM rank_events"
	    "  WHERE run_id = :run AND wall_ms BETWEEN :tlo AND :thi)"
	    "  WHERE k = 1),"
	    " r AS (SELECT rank FROM t UNION SELECT rank FROM e)"
	    " SELECT r.rank, t.window AS last_window,"
	    " i.last_step AS window_step, e.kind AS last_event,"
	    " e.step AS event_step, bellows_time(e.wall_ms) AS event_time"
	    " FROM r LEFT JOIN t ON t.rank = r.rank"
	    " LEFT JOIN window_info i ON i.run_id = :run AND i.window = t.window"
	    " LEFT JOIN e ON e.rank = r.rank"
	    " ORDER BY r.rank",

	/* Rows of the range (of filter.layer only, when given) and those
	 * without an applied level, which the questions above show at
	 * the decided one. */
	[TOOL_HDB_Q_APPLIED_MISSING] =
	    "SELECT count(*) AS rows,"
	    " coalesce(sum(level_applied IS NULL), 0) AS missing"
	    " FROM hdb_windows"
	    " WHERE run_id = :run AND window BETWEEN :wlo AND :whi"
	    " AND (:layer IS NULL OR layer = :layer)",
};

/* Views the questions read instead of the tables that changed: the
 * tables as they are in a file of the current version, and as if
 * migrated in an older one (what it lacks is "not measured"), so that
 * one statement serves every version. Temporary: the file is never
 * written. hdb_views makes them: view hdb_T of table main.T is its
 * columns, then ", D AS c" for each column c the file lacks, D its
 * "not measured"; the statistic columns come from the statistics table
 * (hist_cols.h), so that a file written before a statistic existed
 * reads with it. */
#define HDB_VIEW_COMM                                                          \
	"CREATE TEMP VIEW hdb_comm AS SELECT rowid AS seq, run_id, window,"    \
	" rank, bytes, ms, count, compressed FROM main.comm_samples;"
#define HDB_VIEW_METRICS                                                       \
	"CREATE TEMP VIEW hdb_metrics AS SELECT rowid AS seq, run_id, window," \
	" policy, name, layer, value FROM main.policy_metrics;"
/* Version 2 lacks comm_samples and policy_metrics. */
#define HDB_VIEWS_NONE_V2                                                      \
	"CREATE TEMP VIEW hdb_comm AS SELECT 0 AS seq, 0 AS run_id,"           \
	" 0 AS window, 0 AS rank, 0 AS bytes, NULL AS ms, 0 AS count,"         \
	" 0 AS compressed WHERE 0;"                                            \
	"CREATE TEMP VIEW hdb_metrics AS SELECT 0 AS seq, 0 AS run_id,"        \
	" 0 AS window, '' AS policy, '' AS name, NULL AS layer,"               \
	" NULL AS value WHERE 0;"
/* Columns older versions lack that are not statistics. */
#define HDB_RUNS_V4        ", '' AS run_key, 0 AS resumes"
#define HDB_WINDOW_INFO_V2 ", 0 AS state_apply_step, 0 AS state_calibrate_steps"
#define HDB_WINDOW_INFO_V6 ", 0 AS late"
#define HDB_DECISIONS_V2   ", 0 AS calibrate_steps"
#define HDB_DECISIONS_V5                                                       \
	", NULL AS resid_group, NULL AS resid_phi, NULL AS resid_rows,"        \
	" NULL AS resid_cols"
#define HDB_VIEWS_MAX 8192 /* bytes of the views' SQL */

/* The daemon's own events while run :run was live (export and events). */
#define HDB_RUN_EVENTS                                                         \
	"(run_id = :run OR (run_id IS NULL AND job IS NULL"                    \
	" AND wall_ms >= (SELECT started_wall_ms FROM runs WHERE id = :run)"   \
	" AND wall_ms <= coalesce((SELECT ended_wall_ms FROM runs"             \
	" WHERE id = :run), " HDB_MAX_MS ")))"

static const struct {
	const char *name; /* the schema's */
	const char *sql;  /* its rows of run :run */
} hdb_tables[TOOL_HDB_T_N] = {
	[TOOL_HDB_T_RUNS] = { "runs", "SELECT * FROM runs WHERE id = :run" },
	[TOOL_HDB_T_LAYERS] = { "layers",
	    "SELECT * FROM layers WHERE run_id = :run ORDER BY idx" },
	[TOOL_HDB_T_RANK_EVENTS] = { "rank_events",
	    "SELECT * FROM rank_events WHERE run_id = :run ORDER BY rowid" },
	[TOOL_HDB_T_WINDOW_INFO] = { "window_info",
	    "SELECT * FROM window_info WHERE run_id = :run ORDER BY window" },
	[TOOL_HDB_T_WINDOWS] = { "windows",
	    "SELECT * FROM windows WHERE run_id = :run"
	    " ORDER BY window, layer" },
	[TOOL_HDB_T_TIMINGS] = { "timings",
	    "SELECT * FROM timings WHERE run_id = :run"
	    " ORDER BY window, rank" },
	[TOOL_HDB_T_COMM_SAMPLES] = { "comm_samples",
	    "SELECT run_id, window, rank, bytes, ms, count, compressed"
	    " FROM hdb_comm WHERE run_id = :run ORDER BY window, seq" },
	[TOOL_HDB_T_POLICY_METRICS] = { "policy_metrics",
	    "SELECT run_id, window, policy, name, layer, value"
	    " FROM hdb_metrics WHERE run_id = :run ORDER BY window, seq" },
	[TOOL_HDB_T_DECISIONS] = { "decisions",
	    "SELECT * FROM decisions WHERE run_id = :run ORDER BY seq" },
	[TOOL_HDB_T_DECISION_CHANGES] = { "decision_changes",
	    "SELECT * FROM decision_changes WHERE run_id = :run"
	    " ORDER BY seq, rowid" },
	[TOOL_HDB_T_EVENTS] = { "events",
	    "SELECT * FROM events WHERE " HDB_RUN_EVENTS " ORDER BY id" },
	[TOOL_HDB_T_POLICY_FILES] = { "policy_files",
	    "SELECT * FROM policy_files WHERE hash IN"
	    " (SELECT config_hash FROM runs WHERE id = :run"
	    " UNION SELECT policy_hash FROM events WHERE " HDB_RUN_EVENTS ")"
	    " ORDER BY first_seen_wall_ms, hash" },
};

/* ---- errors ------------------------------------------------------------ */

int
tool_hdb_fail(tool_hdb *db, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	com_verrf(db->err, sizeof(db->err), fmt, ap);
	va_end(ap);
	return code;
}

int
tool_hdb_sqlite_fail(tool_hdb *db, int rc)
{
	if (rc == SQLITE_NOMEM)
		return tool_hdb_fail(db, BELLOWS_ENOMEM, "out of memory");
	if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED)
		return tool_hdb_fail(db, BELLOWS_EBUSY,
		    "the database stayed locked for %d ms: %s",
		    TOOL_HDB_BUSY_MS, sqlite3_errmsg(db->db));
	return tool_hdb_fail(db, BELLOWS_EIO, "%s", sqlite3_errmsg(db->db));
}

const char *
tool_hdb_error(const tool_hdb *db)
{
	return db->err;
}

/* ---- numbers and times ------------------------------------------------- */

/* bellows_num(x): x as tool_metrics_number_text writes it; NULL stays
 * NULL. */
static void
hdb_sql_num(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	char buf[40];

	switch (sqlite3_value_type(argv[0])) {
	case SQLITE_NULL:
		sqlite3_result_null(ctx);
		return;
	case SQLITE_INTEGER:
		snprintf(buf, sizeof(buf), "%lld",
		    (long long)sqlite3_value_int64(argv[0]));
		break;
	default:
		tool_metrics_number_text(sqlite3_value_double(argv[0]), buf,
		    sizeof(buf));
		break;
	}
	sqlite3_result_text(ctx, buf, -1, SQLITE_TRANSIENT);
}

/* bellows_time(ms): wall-clock milliseconds as
 * "2026-11-22T10:00:03.123Z"; NULL stays NULL. */
static void
hdb_sql_time(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	char buf[64];
	int64_t ms, s;
	time_t t;
	struct tm tm;

	if (sqlite3_value_type(argv[0]) == SQLITE_NULL) {
		sqlite3_result_null(ctx);
		return;
	}
	ms = sqlite3_value_int64(argv[0]);
	s = ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000);
	t = (time_t)s;
	if (gmtime_r(&t, &tm) == NULL || tm.tm_year + 1900 > 9999 ||
	    tm.tm_year + 1900 < 0) {
		snprintf(buf, sizeof(buf), "%" PRId64, ms);
	} else {
		snprintf(buf, sizeof(buf),
		    "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
		    tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		    (int)(ms - s * 1000));
	}
	sqlite3_result_text(ctx, buf, -1, SQLITE_TRANSIENT);
}

/* ---- opening ----------------------------------------------------------- */

/* "file:PATH?mode=ro" with PATH percent-encoded, so that '?', '#' and
 * '%' in a file name stay part of it. */
static char *
hdb_uri(const char *path)
{
	static const char keep[] = "abcdefghijklmnopqrstuvwxyz"
				   "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
				   "0123456789/._-~";
	size_t n = strlen(path);
	char *uri = malloc(3 * n + 32), *p;

	if (uri == NULL)
		return NULL;
	/* An absolute path gets an empty authority: "file:///abs". */
	p = uri + sprintf(uri, "%s", path[0] == '/' ? "file://" : "file:");
	for (const char *s = path; *s != '\0'; s++) {
		if (strchr(keep, *s) != NULL)
			*p++ = *s;
		else
			p += sprintf(p, "%%%02X", (unsigned char)*s);
	}
	strcpy(p, "?mode=ro");
	return uri;
}

/* Reads an integer from a one-value statement. */
static int
hdb_scalar(tool_hdb *db, const char *sql, int64_t *ret)
{
	sqlite3_stmt *st = NULL;
	int rc;

	rc = sqlite3_prepare_v2(db->db, sql, -1, &st, NULL);
	if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		*ret = sqlite3_column_int64(st, 0);
		rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	return rc == SQLITE_OK ? 0 : tool_hdb_sqlite_fail(db, rc);
}

/* Appends to buf (`used` of HDB_VIEWS_MAX bytes) like snprintf; false
 * when it does not fit. */
static bool
hdb_cat(char *buf, size_t *used, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf + *used, HDB_VIEWS_MAX - *used, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= HDB_VIEWS_MAX - *used)
		return false;
	*used += (size_t)n;
	return true;
}

/* Creates the views for a file of schema `version`. Returns 0 or as
 * tool_hdb_sqlite_fail. */
static int
hdb_views(tool_hdb *db, int version)
{
	char *sql = malloc(HDB_VIEWS_MAX);
	sqlite3_stmt *has = NULL;
	size_t used = 0;
	bool ok;
	int rc;

	if (sql == NULL)
		return tool_hdb_fail(db, BELLOWS_ENOMEM, "out of memory");
	rc = sqlite3_prepare_v2(db->db,
	    "SELECT count(*) FROM pragma_table_info(?1) WHERE name = ?2", -1,
	    &has, NULL);
	if (rc != SQLITE_OK) {
		free(sql);
		return tool_hdb_sqlite_fail(db, rc);
	}
	ok = hdb_cat(sql, &used,
	    "CREATE TEMP VIEW hdb_runs AS SELECT *%s FROM main.runs;"
	    "CREATE TEMP VIEW hdb_decisions AS SELECT *%s FROM "
	    "main.decisions;%s",
	    version < 5 ? HDB_RUNS_V4 : "",
	    version < 3       ? HDB_DECISIONS_V2 HDB_DECISIONS_V5
		: version < 6 ? HDB_DECISIONS_V5
			      : "",
	    version < 3 ? HDB_VIEWS_NONE_V2 : HDB_VIEW_COMM HDB_VIEW_METRICS);
	for (int t = 0; ok && t < HIST_N_TABLES; t++) {
		const char *name = hist_table_name((hist_table)t);
		uint32_t n;
		const hist_col *hc = hist_cols((hist_table)t, &n);

		ok = hdb_cat(sql, &used,
		    "CREATE TEMP VIEW hdb_%s AS SELECT *%s%s", name,
		    t == HIST_WINDOW_INFO && version < 3 ? HDB_WINDOW_INFO_V2
							 : "",
		    t == HIST_WINDOW_INFO && version < 7 ? HDB_WINDOW_INFO_V6
							 : "");
		for (uint32_t c = 0; ok && c < n; c++) {
			bool nullable = hc[c].stat->hist ==
			    BELLOWS_STAT_HIST_NULLABLE;
			bool real = hc[c].stat->type == BELLOWS_STAT_TYPE_F64;

			sqlite3_reset(has);
			sqlite3_bind_text(has, 1, name, -1, SQLITE_STATIC);
			sqlite3_bind_text(has, 2, hc[c].name, -1,
			    SQLITE_STATIC);
			if ((rc = sqlite3_step(has)) != SQLITE_ROW)
				break;
			if (sqlite3_column_int(has, 0) == 0)
				ok = hdb_cat(sql, &used, ", %s AS %s",
				    nullable   ? "NULL"
					: real ? "0.0"
					       : "0",
				    hc[c].name);
		}
		if (rc != SQLITE_ROW && rc != SQLITE_OK) {
			sqlite3_finalize(has);
			free(sql);
			return tool_hdb_sqlite_fail(db, rc);
		}
		ok = ok && hdb_cat(sql, &used, " FROM main.%s;", name);
	}
	sqlite3_finalize(has);
	if (!ok) {
		free(sql);
		return tool_hdb_fail(db, BELLOWS_ENOMEM,
		    "the views do not fit");
	}
	rc = sqlite3_exec(db->db, sql, NULL, NULL, NULL);
	free(sql);
	return rc == SQLITE_OK ? 0 : tool_hdb_sqlite_fail(db, rc);
}

int
tool_hdb_open(const char *path, tool_hdb **ret, char *errbuf, size_t errlen)
{
	int64_t version = 0, tables = 0;
	tool_hdb *db = NULL;
	char *uri = NULL;
	struct stat sb;
	int r, rc;

	errbuf[0] = '\0';
	if (stat(path, &sb) != 0) {
		snprintf(errbuf, errlen, "%s: %s", path, strerror(errno));
		return errno == ENOENT ? BELLOWS_ENOTFOUND : BELLOWS_EIO;
	}
	if ((db = calloc(1, sizeof(*db))) == NULL ||
	    (uri = hdb_uri(path)) == NULL) {
		r = BELLOWS_ENOMEM;
		snprintf(errbuf, errlen, "%s: %s", path, bellows_strerror(r));
		goto fail;
	}
	rc = sqlite3_open_v2(uri, &db->db,
	    SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		r = rc == SQLITE_NOMEM ? BELLOWS_ENOMEM : BELLOWS_EIO;
		snprintf(errbuf, errlen, "%s: cannot open: %s", path,
		    db->db != NULL ? sqlite3_errmsg(db->db)
				   : sqlite3_errstr(rc));
		goto fail;
	}
	sqlite3_busy_timeout(db->db, TOOL_HDB_BUSY_MS);
	rc = sqlite3_create_function(db->db, "bellows_time", 1,
	    SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, hdb_sql_time, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_create_function(db->db, "bellows_num", 1,
		    SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, hdb_sql_num, NULL,
		    NULL);
	if (rc != SQLITE_OK) {
		r = tool_hdb_sqlite_fail(db, rc);
		snprintf(errbuf, errlen, "%s: %s", path, db->err);
		goto fail;
	}
	if ((r = hdb_scalar(db, "PRAGMA user_version", &version)) != 0 ||
	    (r = hdb_scalar(db,
		 "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
		 " AND name = 'runs'",
		 &tables)) != 0) {
		snprintf(errbuf, errlen, "%s: %s", path, db->err);
		if (r == BELLOWS_EIO)
			snprintf(errbuf, errlen,
			    "%s: not a readable SQLite database: %s", path,
			    db->err);
		goto fail;
	}
	if (version > TOOL_HDB_SCHEMA_MAX) {
		r = BELLOWS_EVERSION;
		snprintf(errbuf, errlen,
		    "%s has schema version %" PRId64
		    "; this bellows reads up to %d (use a newer bellows)",
		    path, version, TOOL_HDB_SCHEMA_MAX);
		goto fail;
	}
	if (version < 1 || tables == 0) {
		r = BELLOWS_EVERSION;
		snprintf(errbuf, errlen,
		    "%s is not a bellows history database (schema version "
		    "%" PRId64 "%s)",
		    path, version, tables == 0 ? ", no runs table" : "");
		goto fail;
	}
	db->version = (int)version;
	if ((r = hdb_views(db, (int)version)) != 0) {
		snprintf(errbuf, errlen, "%s: %s", path, db->err);
		goto fail;
	}
	free(uri);
	*ret = db;
	return 0;
fail:
	free(uri);
	tool_hdb_close(&db);
	return r;
}

void
tool_hdb_close(tool_hdb **db)
{
	if (db == NULL || *db == NULL)
		return;
	sqlite3_close((*db)->db);
	free(*db);
	*db = NULL;
}

int
tool_hdb_schema_version(const tool_hdb *db)
{
	return db->version;
}

static int
hdb_exec(tool_hdb *db, const char *sql)
{
	int rc = sqlite3_exec(db->db, sql, NULL, NULL, NULL);

	return rc == SQLITE_OK ? 0 : tool_hdb_sqlite_fail(db, rc);
}

int
tool_hdb_begin(tool_hdb *db)
{
	int r;

	/* A deferred transaction takes its snapshot at the first read:
	 * read now, so that the snapshot is the one of this call. */
	if ((r = hdb_exec(db, "BEGIN")) != 0)
		return r;
	if ((r = hdb_exec(db, "SELECT count(*) FROM runs")) != 0)
		(void)hdb_exec(db, "ROLLBACK");
	return r;
}

int
tool_hdb_end(tool_hdb *db)
{
	return hdb_exec(db, "COMMIT");
}

/* ---- statements -------------------------------------------------------- */

static int
hdb_prepare(tool_hdb *db, const char *sql, sqlite3_stmt **ret)
{
	int rc = sqlite3_prepare_v2(db->db, sql, -1, ret, NULL);

	return rc == SQLITE_OK ? 0 : tool_hdb_sqlite_fail(db, rc);
}

/* Binds an integer, or NULL for TOOL_HDB_NONE, to parameter `name` if
 * the statement has it. */
static int
hdb_bind_int(sqlite3_stmt *st, const char *name, int64_t v)
{
	int i = sqlite3_bind_parameter_index(st, name);

	if (i == 0)
		return SQLITE_OK;
	if (v == TOOL_HDB_NONE)
		return sqlite3_bind_null(st, i);
	return sqlite3_bind_int64(st, i, v);
}

static int
hdb_bind_text(sqlite3_stmt *st, const char *name, const char *s)
{
	int i = sqlite3_bind_parameter_index(st, name);

	if (i == 0)
		return SQLITE_OK;
	if (s == NULL)
		return sqlite3_bind_null(st, i);
	return sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
}

/* Binds a bound: TOOL_HDB_NONE is the widest one (`lo` INT64_MIN, else
 * INT64_MAX), never NULL, so that BETWEEN keeps every row. */
static int
hdb_bind_bound(sqlite3_stmt *st, const char *name, int64_t v, bool lo)
{
	int i = sqlite3_bind_parameter_index(st, name);

	if (i == 0)
		return SQLITE_OK;
	if (v == TOOL_HDB_NONE)
		v = lo ? INT64_MIN : INT64_MAX;
	return sqlite3_bind_int64(st, i, v);
}

static int
hdb_bind_filter(tool_hdb *db, sqlite3_stmt *st, const tool_hdb_filter *f)
{
	int rc = SQLITE_OK;

	if (rc == SQLITE_OK)
		rc = hdb_bind_int(st, ":run", f->run);
	if (rc == SQLITE_OK)
		rc = hdb_bind_text(st, ":job", f->job);
	if (rc == SQLITE_OK)
		rc = hdb_bind_int(st, ":layer", f->layer);
	if (rc == SQLITE_OK)
		rc = hdb_bind_bound(st, ":wlo", f->window_lo, true);
	if (rc == SQLITE_OK)
		rc = hdb_bind_bound(st, ":whi", f->window_hi, false);
	if (rc == SQLITE_OK)
		rc = hdb_bind_bound(st, ":tlo", f->time_lo, true);
	if (rc == SQLITE_OK)
		rc = hdb_bind_bound(st, ":thi", f->time_hi, false);
	if (rc == SQLITE_OK)
		rc = hdb_bind_int(st, ":changed", f->changed_only);
	return rc == SQLITE_OK ? 0 : tool_hdb_sqlite_fail(db, rc);
}

static void
hdb_read_cell(sqlite3_stmt *st, int col, tool_hdb_cell *c)
{
	*c = (tool_hdb_cell){ .type = TOOL_HDB_NULL };
	switch (sqlite3_column_type(st, col)) {
	case SQLITE_INTEGER:
		c->type = TOOL_HDB_INT;
		c->i = sqlite3_column_int64(st, col);
		break;
	case SQLITE_FLOAT:
		c->type = TOOL_HDB_REAL;
		c->d = sqlite3_column_double(st, col);
		break;
	case SQLITE_TEXT:
		c->type = TOOL_HDB_TEXT;
		c->s = (const char *)sqlite3_column_text(st, col);
		c->len = (size_t)sqlite3_column_bytes(st, col);
		if (c->s == NULL) /* out of memory converting */
			*c = (tool_hdb_cell){ .type = TOOL_HDB_NULL };
		break;
	case SQLITE_BLOB:
		c->type = TOOL_HDB_BLOB;
		c->s = sqlite3_column_blob(st, col);
		c->len = (size_t)sqlite3_column_bytes(st, col);
		if (c->s == NULL) /* a zero-length blob */
			c->s = "";
		break;
	default:
		break;
	}
}

/* Runs a bound statement into `sink` and finalizes it. */
static int
hdb_rows(tool_hdb *db, sqlite3_stmt *st, const tool_hdb_sink *sink)
{
	uint32_t n = (uint32_t)sqlite3_column_count(st);
	const char **names = calloc(n ? n : 1, sizeof(*names));
	tool_hdb_cell *cells = calloc(n ? n : 1, sizeof(*cells));
	int r = 0, rc;

	if (names == NULL || cells == NULL) {
		r = tool_hdb_fail(db, BELLOWS_ENOMEM, "out of memory");
		goto out;
	}
	for (uint32_t i = 0; i < n; i++) {
		if ((names[i] = sqlite3_column_name(st, (int)i)) == NULL) {
			r = tool_hdb_fail(db, BELLOWS_ENOMEM, "out of memory");
			goto out;
		}
	}
	if ((r = sink->columns(sink->arg, n, names)) != 0)
		goto out;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		for (uint32_t i = 0; i < n; i++)
			hdb_read_cell(st, (int)i, &cells[i]);
		if ((r = sink->row(sink->arg, cells)) != 0)
			goto out;
	}
	if (rc != SQLITE_DONE)
		r = tool_hdb_sqlite_fail(db, rc);
out:
	free(names);
	free(cells);
	sqlite3_finalize(st);
	return r;
}

/* The head and tail of TOOL_HDB_Q_LAYER_STATS; the statistic columns go
 * between them. */
#define HDB_LAYER_STATS_HEAD                                                   \
	"SELECT w.window, l.name AS layer, w.level, w.error_bound"
#define HDB_LAYER_STATS_TAIL                                                   \
	" FROM hdb_windows w"                                                  \
	" JOIN layers l ON l.run_id = w.run_id AND l.idx = w.layer"            \
	" WHERE w.run_id = :run AND w.layer = :layer"                          \
	" AND w.window BETWEEN :wlo AND :whi"                                  \
	" ORDER BY w.window"

/* The history column of the gate of `s`, a GATED_* entry of the layer
 * table, when `windows` keeps it (NULL otherwise): its value 0 says no
 * rank measured s. */
static const char *
hdb_gate_col(const com_stat *s)
{
	if (s->gate < 0 ||
	    (s->agg != BELLOWS_STAT_AGG_GATED_MEAN &&
		s->agg != BELLOWS_STAT_AGG_GATED_MEDIAN &&
		s->agg != BELLOWS_STAT_AGG_GATED_MAX))
		return NULL;
	return com_layer_stat_table[s->gate].wcol;
}

/* Makes the statement of TOOL_HDB_Q_LAYER_STATS into buf
 * (HDB_VIEWS_MAX bytes) from the statistics table, so that a statistic
 * added to the table is a column of `bellows history stats --layer`
 * without an edit here: one row per window of layer :layer, its level
 * and error bound in force, then every statistic column of `windows`
 * (hist_cols: an entry's wcol, then its wcol2) in the table's order,
 * named as the column. A gated entry whose gate is 0 (no rank measured
 * it) reads NULL. The columns come from the views (hdb_views), so a file
 * older than a statistic reads it as not measured. Returns false when
 * the statement does not fit. */
static bool
hdb_layer_stats_sql(char *buf)
{
	uint32_t n;
	const hist_col *hc = hist_cols(HIST_WINDOWS, &n);
	size_t used = 0;
	bool ok = hdb_cat(buf, &used, "%s", HDB_LAYER_STATS_HEAD);

	for (uint32_t c = 0; ok && c < n; c++) {
		const char *gate = hdb_gate_col(hc[c].stat);

		if (gate != NULL)
			ok = hdb_cat(buf, &used,
			    ", CASE WHEN w.%s > 0 THEN w.%s END AS %s", gate,
			    hc[c].name, hc[c].name);
		else
			ok = hdb_cat(buf, &used, ", w.%s", hc[c].name);
	}
	return ok && hdb_cat(buf, &used, "%s", HDB_LAYER_STATS_TAIL);
}

int
tool_hdb_query(tool_hdb *db, tool_hdb_question q, const tool_hdb_filter *f,
    const tool_hdb_sink *sink)
{
	sqlite3_stmt *st = NULL;
	char *sql = NULL;
	int r;

	if ((unsigned)q >= TOOL_HDB_Q_N)
		return tool_hdb_fail(db, BELLOWS_EINVAL, "no such question");
	if (q == TOOL_HDB_Q_LAYER_STATS) {
		if ((sql = malloc(HDB_VIEWS_MAX)) == NULL)
			return tool_hdb_fail(db, BELLOWS_ENOMEM,
			    "out of memory");
		if (!hdb_layer_stats_sql(sql)) {
			free(sql);
			return tool_hdb_fail(db, BELLOWS_ENOMEM,
			    "the layer statistics do not fit");
		}
	}
	r = hdb_prepare(db, sql != NULL ? sql : hdb_questions[q], &st);
	free(sql);
	if (r != 0)
		return r;
	if ((r = hdb_bind_filter(db, st, f)) != 0) {
		sqlite3_finalize(st);
		return r;
	}
	return hdb_rows(db, st, sink);
}

const char *
tool_hdb_table_name(tool_hdb_table t)
{
	return (unsigned)t < TOOL_HDB_T_N ? hdb_tables[t].name : "?";
}

int
tool_hdb_export(tool_hdb *db, tool_hdb_table t, int64_t run,
    const tool_hdb_sink *sink)
{
	sqlite3_stmt *st = NULL;
	int r;

	if ((unsigned)t >= TOOL_HDB_T_N)
		return tool_hdb_fail(db, BELLOWS_EINVAL, "no such table");
	if ((r = hdb_prepare(db, hdb_tables[t].sql, &st)) != 0)
		return r;
	if (hdb_bind_int(st, ":run", run) != SQLITE_OK) {
		r = tool_hdb_sqlite_fail(db, sqlite3_errcode(db->db));
		sqlite3_finalize(st);
		return r;
	}
	return hdb_rows(db, st, sink);
}

/* ---- runs and layers --------------------------------------------------- */

#define HDB_SUGGEST_NAMES 4096 /* names read for a "did you mean" */

/* Writes " (did you mean 'X'?)" to buf[size] when one of the names SQL
 * returns (its first column; :run bound to run when SQL has it) is close
 * to `given` by com_suggest's rule, else "". At most HDB_SUGGEST_NAMES
 * names are read; any failure only leaves the hint out. */
static void
hdb_did_you_mean(tool_hdb *db, const char *sql, int64_t run, const char *given,
    char *buf, size_t size)
{
	sqlite3_stmt *st = NULL;
	char **names = NULL;
	const char *near;
	size_t n = 0;

	buf[0] = '\0';
	if (sqlite3_prepare_v2(db->db, sql, -1, &st, NULL) != SQLITE_OK)
		goto out;
	if (sqlite3_bind_parameter_index(st, ":run") > 0 &&
	    hdb_bind_int(st, ":run", run) != SQLITE_OK)
		goto out;
	names = calloc(HDB_SUGGEST_NAMES, sizeof(*names));
	if (names == NULL)
		goto out;
	while (n < HDB_SUGGEST_NAMES && sqlite3_step(st) == SQLITE_ROW) {
		const char *t = (const char *)sqlite3_column_text(st, 0);

		if (t != NULL && (names[n] = com_strdup(t)) != NULL)
			n++;
	}
	near = com_suggest(given, (const char *const *)names, n);
	if (near != NULL)
		snprintf(buf, size, " (did you mean '%s'?)", near);
out:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	sqlite3_finalize(st);
}

void
tool_hdb_run_fini(tool_hdb_run *run)
{
	if (run == NULL)
		return;
	free(run->job);
	run->job = NULL;
}

int
tool_hdb_run_find(tool_hdb *db, int64_t id, const char *job, tool_hdb_run *ret)
{
	static const char
	    sql[] = "SELECT id, job, world, n_layers, started_wall_ms,"
		    " ended_wall_ms IS NULL FROM runs"
		    " WHERE (:run IS NULL OR id = :run)"
		    " AND (:job IS NULL OR job = :job)"
		    " ORDER BY id DESC LIMIT 1";
	sqlite3_stmt *st = NULL;
	tool_hdb_run run;
	int r, rc;

	if ((r = hdb_prepare(db, sql, &st)) != 0)
		return r;
	rc = hdb_bind_int(st, ":run", id);
	if (rc == SQLITE_OK)
		rc = hdb_bind_text(st, ":job", job);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_DONE) {
		if (id != TOOL_HDB_NONE)
			r = tool_hdb_fail(db, BELLOWS_ENOTFOUND,
			    "there is no run %" PRId64 "%s%s%s", id,
			    job != NULL ? " of job '" : "",
			    job != NULL ? job : "", job != NULL ? "'" : "");
		else if (job != NULL) {
			char hint[160];

			hdb_did_you_mean(db,
			    "SELECT DISTINCT job FROM runs ORDER BY job", 0,
			    job, hint, sizeof(hint));
			r = tool_hdb_fail(db, BELLOWS_ENOTFOUND,
			    "job '%s' has no run%s", job, hint);
		} else
			r = tool_hdb_fail(db, BELLOWS_ENOTFOUND,
			    "the database holds no run yet");
		goto out;
	}
	if (rc != SQLITE_ROW) {
		r = tool_hdb_sqlite_fail(db, rc);
		goto out;
	}
	run = (tool_hdb_run){
		.id = sqlite3_column_int64(st, 0),
		.world = sqlite3_column_int64(st, 2),
		.n_layers = sqlite3_column_int64(st, 3),
		.started_wall_ms = sqlite3_column_int64(st, 4),
		.live = sqlite3_column_int(st, 5) != 0,
	};
	run.job = com_strdup((const char *)sqlite3_column_text(st, 1) != NULL
		? (const char *)sqlite3_column_text(st, 1)
		: "");
	if (run.job == NULL) {
		r = tool_hdb_fail(db, BELLOWS_ENOMEM, "out of memory");
		goto out;
	}
	*ret = run;
out:
	sqlite3_finalize(st);
	return r;
}

int
tool_hdb_layer_find(tool_hdb *db, int64_t run, const char *name, int64_t *ret)
{
	static const char sql[] =
	    "SELECT idx FROM layers WHERE run_id = :run AND name = :name"
	    " ORDER BY idx LIMIT 1";
	sqlite3_stmt *st = NULL;
	int r, rc;

	if ((r = hdb_prepare(db, sql, &st)) != 0)
		return r;
	rc = hdb_bind_int(st, ":run", run);
	if (rc == SQLITE_OK)
		rc = hdb_bind_text(st, ":name", name);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*ret = sqlite3_column_int64(st, 0);
	else if (rc == SQLITE_DONE) {
		char hint[160];

		hdb_did_you_mean(db,
		    "SELECT name FROM layers WHERE run_id = :run ORDER BY idx",
		    run, name, hint, sizeof(hint));
		r = tool_hdb_fail(db, BELLOWS_ENOTFOUND,
		    "run %" PRId64 " has no layer '%s'%s", run, name, hint);
	} else
		r = tool_hdb_sqlite_fail(db, rc);
	sqlite3_finalize(st);
	return r;
}

/* Runs SQL with :run and one more integer parameter KEY bound, and reads
 * the first column of its row: TOOL_HDB_NONE for NULL or for no row. */
static int
hdb_run_int(tool_hdb *db, const char *sql, int64_t run, const char *key,
    int64_t value, int64_t *ret)
{
	sqlite3_stmt *st = NULL;
	int r, rc;

	if ((r = hdb_prepare(db, sql, &st)) != 0)
		return r;
	rc = hdb_bind_int(st, ":run", run);
	if (rc == SQLITE_OK)
		rc = hdb_bind_int(st, key, value);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*ret = sqlite3_column_type(st, 0) == SQLITE_NULL
		    ? TOOL_HDB_NONE
		    : sqlite3_column_int64(st, 0);
	else if (rc == SQLITE_DONE)
		*ret = TOOL_HDB_NONE;
	else
		r = tool_hdb_sqlite_fail(db, rc);
	sqlite3_finalize(st);
	return r;
}

int
tool_hdb_window_at(tool_hdb *db, int64_t run, int64_t ms, bool after,
    int64_t *ret)
{
	static const char
	    sql_after[] = "SELECT min(window) FROM window_info"
			  " WHERE run_id = :run AND closed_wall_ms >= :ms";
	static const char
	    sql_before[] = "SELECT max(window) FROM window_info"
			   " WHERE run_id = :run AND closed_wall_ms <= :ms";

	return hdb_run_int(db, after ? sql_after : sql_before, run, ":ms", ms,
	    ret);
}

int
tool_hdb_window_closed(tool_hdb *db, int64_t run, int64_t window, int64_t *ret)
{
	static const char sql[] = "SELECT closed_wall_ms FROM window_info"
				  " WHERE run_id = :run AND window = :window";

	return hdb_run_int(db, sql, run, ":window", window, ret);
}

/* ---- rows in memory ---------------------------------------------------- */

static int
hdb_rows_columns(void *arg, uint32_t n, const char *const *names)
{
	tool_hdb_rows *rows = arg;

	tool_hdb_rows_fini(rows);
	if ((rows->names = calloc(n ? n : 1, sizeof(*rows->names))) == NULL)
		return BELLOWS_ENOMEM;
	rows->n_cols = n;
	for (uint32_t i = 0; i < n; i++) {
		if ((rows->names[i] = com_strdup(names[i])) == NULL)
			return BELLOWS_ENOMEM;
	}
	return 0;
}

static int
hdb_rows_row(void *arg, const tool_hdb_cell *cells)
{
	tool_hdb_rows *rows = arg;
	size_t n = rows->n_cols;
	tool_hdb_cell *row;

	if (n == 0) {
		rows->n_rows++;
		return 0;
	}
	if (rows->n_rows == rows->cap_rows) {
		uint64_t nc = rows->cap_rows ? 2 * rows->cap_rows : 64;
		tool_hdb_cell *g;

		if (nc > SIZE_MAX / sizeof(*g) / n)
			return BELLOWS_ENOMEM;
		if ((g = realloc(rows->cells, sizeof(*g) * nc * n)) == NULL)
			return BELLOWS_ENOMEM;
		rows->cells = g;
		rows->cap_rows = nc;
	}
	row = rows->cells + (size_t)rows->n_rows * n;
	for (size_t i = 0; i < n; i++) {
		row[i] = cells[i];
		if (cells[i].type == TOOL_HDB_TEXT ||
		    cells[i].type == TOOL_HDB_BLOB) {
			char *s = malloc(cells[i].len + 1);

			if (s == NULL) {
				for (size_t j = i; j < n; j++)
					row[j].type = TOOL_HDB_NULL;
				rows->n_rows++; /* so that fini frees it */
				return BELLOWS_ENOMEM;
			}
			memcpy(s, cells[i].s, cells[i].len);
			s[cells[i].len] = '\0';
			row[i].s = s;
		}
	}
	rows->n_rows++;
	return 0;
}

void
tool_hdb_rows_sink(tool_hdb_rows *rows, tool_hdb_sink *sink)
{
	*sink = (tool_hdb_sink){
		.columns = hdb_rows_columns,
		.row = hdb_rows_row,
		.arg = rows,
	};
}

void
tool_hdb_rows_fini(tool_hdb_rows *rows)
{
	if (rows == NULL)
		return;
	for (uint32_t i = 0; rows->names != NULL && i < rows->n_cols; i++)
		free(rows->names[i]);
	free(rows->names);
	for (uint64_t r = 0; rows->n_cols > 0 && r < rows->n_rows; r++) {
		for (uint32_t c = 0; c < rows->n_cols; c++) {
			tool_hdb_cell
			    *cell = &rows->cells[(size_t)r * rows->n_cols + c];

			if (cell->type == TOOL_HDB_TEXT ||
			    cell->type == TOOL_HDB_BLOB)
				free((char *)cell->s);
		}
	}
	free(rows->cells);
	*rows = (tool_hdb_rows){ 0 };
}

const tool_hdb_cell *
tool_hdb_rows_cell(const tool_hdb_rows *rows, uint64_t row, uint32_t col)
{
	return &rows->cells[(size_t)row * rows->n_cols + col];
}
