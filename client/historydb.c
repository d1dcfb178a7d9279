/* historydb - the history database, read-only, see historydb.h.
 *
 * Every statement is a constant of this file; what the user typed (a run
 * id, a job or layer name, a window or time bound) is bound to a named
 * parameter (:run, :job, :layer, :wlo, :whi, :tlo, :thi, :changed), and
 * an unset restriction binds the widest bound or NULL, so one statement
 * serves every combination of options. Times are formatted by
 * bellows_time(), a function this module registers on its connection,
 * so that every tool prints them alike (UTC, milliseconds).
 */
#include "historydb.h"
#include "metrics.h"

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

struct tool_hdb {
	sqlite3 *db;                /* read-only connection */
	int version;                /* PRAGMA user_version */
	char err[TOOL_HDB_ERR_MAX]; /* last failure */
};

/* ---- the questions ----------------------------------------------------- */

#define HDB_MAX_MS "9223372036854775807"

/* A macro's value as an SQL literal: LIMIT 64 for
 * HDB_STR(TOOL_HDB_DECISIONS_LAST). */
#define HDB_STR_(x) #x
#define HDB_STR(x)  HDB_STR_(x)

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

	/* `w` is read four times: SQLite materialises it once. */
	[TOOL_HDB_Q_LAYERS] =
	    "WITH w AS (SELECT layer, window, level FROM windows"
	    "  WHERE run_id = :run AND window BETWEEN :wlo AND :whi),"
	    " agg AS (SELECT layer, count(*) AS n, min(level) AS lmin,"
	    "  max(level) AS lmax, max(window) AS wmax FROM w GROUP BY layer),"
	    " last AS (SELECT w.layer, w.level FROM w JOIN agg"
	    "  ON agg.layer = w.layer AND agg.wmax = w.window),"
	    " per AS (SELECT layer, level, count(*) AS n FROM w"
	    "  GROUP BY layer, level ORDER BY layer, level),"
	    " hist AS (SELECT layer,"
	    "  group_concat(bellows_num(level) || ':' || n, ' ') AS at"
	    "  FROM per GROUP BY layer),"
	    " chg AS (SELECT c.layer, count(*) AS n FROM decision_changes c"
	    "  JOIN decisions d ON d.run_id = c.run_id AND d.seq = c.seq"
	    "  WHERE c.run_id = :run AND c.knob = 'level'"
	    "  AND c.old IS NOT NULL AND d.window BETWEEN :wlo AND :whi"
	    "  GROUP BY c.layer)"
	    " SELECT l.idx AS layer, l.name, l.shape, l.numel,"
	    " coalesce(agg.n, 0) AS windows, agg.lmin AS level_min,"
	    " agg.lmax AS level_max, last.level AS level_last,"
	    " hist.at AS windows_at_level,"
	    " coalesce(chg.n, 0) AS level_changes"
	    " FROM layers l"
	    " LEFT JOIN agg ON agg.layer = l.idx"
	    " LEFT JOIN last ON last.layer = l.idx"
	    " LEFT JOIN hist ON hist.layer = l.idx"
	    " LEFT JOIN chg ON chg.layer = l.idx"
	    " WHERE l.run_id = :run ORDER BY l.idx",

	[TOOL_HDB_Q_WINDOWS] =
	    "SELECT i.window, i.first_step, i.last_step, i.lr,"
	    " i.lr_next, i.ranks_reported AS reported,"
	    " i.ranks_expected AS expected, i.complete,"
	    " i.step_ms_median, i.floats_sent, i.floats_raw,"
	    " round(100.0 * i.floats_sent / nullif(i.floats_raw, 0), 1)"
	    "  AS sent_pct,"
	    " (i.floats_raw - i.floats_sent) * 4 AS bytes_saved,"
	    " bellows_time(i.closed_wall_ms) AS closed"
	    " FROM window_info i"
	    " WHERE i.run_id = :run AND i.window BETWEEN :wlo AND :whi"
	    " ORDER BY i.window",

	[TOOL_HDB_Q_LAYER_WINDOWS] =
	    "SELECT w.window, l.name AS layer,"
	    " w.grad_norm_rank0 AS norm_rank0, w.grad_norm_mean AS norm_mean,"
	    " w.level, w.error_bound, i.lr"
	    " FROM windows w"
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
	    "  || ' ' || coalesce(bellows_num(c.old) || ' ', '')"
	    "  || '-> ' || coalesce(bellows_num(c.new), '-') AS t"
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

	[TOOL_HDB_Q_LAYER_STATS] =
	    "SELECT w.window, l.name AS layer, w.level, w.error_bound,"
	    " CASE WHEN w.act_steps > 0 THEN w.act_steps END AS act_steps,"
	    " CASE WHEN w.act_steps > 0 THEN w.act_lbar END AS act_lbar,"
	    " CASE WHEN w.act_steps > 0 THEN w.act_nonzero END AS act_nonzero,"
	    " CASE WHEN w.act_steps > 0 THEN w.act_bytes END AS act_bytes,"
	    " CASE WHEN w.act_steps > 0 THEN w.act_raw_bytes END"
	    "  AS act_raw_bytes,"
	    " w.comm_raw_ms, w.comm_raw_n, w.comm_comp_ms, w.comm_comp_n,"
	    " w.codec_ms"
	    " FROM hdb_windows w"
	    " JOIN layers l ON l.run_id = w.run_id AND l.idx = w.layer"
	    " WHERE w.run_id = :run AND w.layer = :layer"
	    " AND w.window BETWEEN :wlo AND :whi"
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
	    "  grad_norm_mean, error_bound FROM windows"
	    "  WHERE run_id = :run AND window BETWEEN :wlo AND :whi)"
	    " SELECT w.layer, l.name, l.numel, w.window, w.level,"
	    " w.grad_norm_mean AS norm_mean, w.error_bound"
	    " FROM w JOIN layers l ON l.run_id = :run AND l.idx = w.layer"
	    " UNION ALL SELECT l.idx, l.name, l.numel, NULL, NULL, NULL, NULL"
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
	    " bellows_time(d.wall_ms) AS time, d.source, d.policy, d.reason"
	    " FROM decisions d"
	    " WHERE d.run_id = :run AND d.window BETWEEN :wlo AND :whi"
	    " ORDER BY d.seq DESC"
	    " LIMIT " HDB_STR(TOOL_HDB_DECISIONS_LAST) ") ORDER BY seq",
};

/* Views the questions read instead of the tables that changed: the
 * tables as they are in a file of the current version, and as if
 * migrated in an older one (what it lacks is "not measured"), so that
 * one statement serves every version. Temporary: the file is never
 * written. HDB_VIEW(T, extra) is view hdb_T of table main.T: its
 * columns, then `extra` (", 0 AS c" for each column c a version lacks). */
#define HDB_VIEW(t, extra)                                                     \
	"CREATE TEMP VIEW hdb_" #t " AS SELECT *" extra " FROM main." #t ";"
#define HDB_VIEW_COMM                                                          \
	"CREATE TEMP VIEW hdb_comm AS SELECT rowid AS seq, run_id, window,"    \
	" rank, bytes, ms, count, compressed FROM main.comm_samples;"
#define HDB_VIEW_METRICS                                                       \
	"CREATE TEMP VIEW hdb_metrics AS SELECT rowid AS seq, run_id, window," \
	" policy, name, layer, value FROM main.policy_metrics;"
/* Before version 5 runs had no launch identity and no resumes. */
#define HDB_RUNS_V4 ", '' AS run_key, 0 AS resumes"
/* Versions 3 and later differ in window_info and runs only. */
#define HDB_VIEWS_V3(window_info_extra, runs_extra)                            \
	HDB_VIEW(runs, runs_extra)                                             \
	HDB_VIEW(windows, "")                                                  \
	HDB_VIEW(window_info, window_info_extra)                               \
	HDB_VIEW(timings, "")                                                  \
	HDB_VIEW(decisions, "")                                                \
	HDB_VIEW_COMM                                                          \
	HDB_VIEW_METRICS
/* Version 2 lacks these columns, comm_samples and policy_metrics. */
#define HDB_VIEWS_V2                                                           \
	HDB_VIEW(runs, HDB_RUNS_V4)                                            \
	HDB_VIEW(windows,                                                      \
	    ", 0 AS act_steps, 0.0 AS act_lbar, 0.0 AS act_nonzero,"           \
	    " 0.0 AS act_bytes, 0.0 AS act_raw_bytes, NULL AS comm_raw_ms,"    \
	    " NULL AS comm_comp_ms, NULL AS codec_ms, 0 AS comm_raw_n,"        \
	    " 0 AS comm_comp_n")                                               \
	HDB_VIEW(window_info,                                                  \
	    ", 0.0 AS backward_ms_median, 0.0 AS codec_ms_median,"             \
	    " 0 AS mem_device_used, 0 AS mem_device_total,"                    \
	    " 0 AS mem_host_used, 0 AS state_apply_step,"                      \
	    " 0 AS state_calibrate_steps, 0 AS saved_bytes")                   \
	HDB_VIEW(timings,                                                      \
	    ", 0.0 AS backward_ms, 0.0 AS codec_ms, 0 AS mem_device_used,"     \
	    " 0 AS mem_device_total, 0 AS mem_host_used")                      \
	HDB_VIEW(decisions, ", 0 AS calibrate_steps")                          \
	"CREATE TEMP VIEW hdb_comm AS SELECT 0 AS seq, 0 AS run_id,"           \
	" 0 AS window, 0 AS rank, 0 AS bytes, NULL AS ms, 0 AS count,"         \
	" 0 AS compressed WHERE 0;"                                            \
	"CREATE TEMP VIEW hdb_metrics AS SELECT 0 AS seq, 0 AS run_id,"        \
	" 0 AS window, '' AS policy, '' AS name, NULL AS layer,"               \
	" NULL AS value WHERE 0;"

static const char hdb_views_current[] = HDB_VIEWS_V3("", "");
static const char hdb_views_v4[] = HDB_VIEWS_V3("", HDB_RUNS_V4);
static const char hdb_views_v3[] = HDB_VIEWS_V3(", 0 AS saved_bytes",
    HDB_RUNS_V4);
static const char hdb_views_v2[] = HDB_VIEWS_V2;

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

__attribute__((format(printf, 3, 4))) static int
hdb_fail(tool_hdb *db, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(db->err, sizeof(db->err), fmt, ap);
	va_end(ap);
	return code;
}

/* Maps SQLite's result to ours, with its message. */
static int
hdb_sqlite_fail(tool_hdb *db, int rc)
{
	if (rc == SQLITE_NOMEM)
		return hdb_fail(db, BELLOWS_ENOMEM, "out of memory");
	if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED)
		return hdb_fail(db, BELLOWS_EBUSY,
		    "the database stayed locked for %d ms: %s",
		    TOOL_HDB_BUSY_MS, sqlite3_errmsg(db->db));
	return hdb_fail(db, BELLOWS_EIO, "%s", sqlite3_errmsg(db->db));
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
	return rc == SQLITE_OK ? 0 : hdb_sqlite_fail(db, rc);
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
		r = hdb_sqlite_fail(db, rc);
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
	rc = sqlite3_exec(db->db,
	    version >= 5       ? hdb_views_current
		: version == 4 ? hdb_views_v4
		: version == 3 ? hdb_views_v3
			       : hdb_views_v2,
	    NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		r = hdb_sqlite_fail(db, rc);
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

	return rc == SQLITE_OK ? 0 : hdb_sqlite_fail(db, rc);
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

	return rc == SQLITE_OK ? 0 : hdb_sqlite_fail(db, rc);
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
	return rc == SQLITE_OK ? 0 : hdb_sqlite_fail(db, rc);
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
		r = hdb_fail(db, BELLOWS_ENOMEM, "out of memory");
		goto out;
	}
	for (uint32_t i = 0; i < n; i++) {
		if ((names[i] = sqlite3_column_name(st, (int)i)) == NULL) {
			r = hdb_fail(db, BELLOWS_ENOMEM, "out of memory");
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
		r = hdb_sqlite_fail(db, rc);
out:
	free(names);
	free(cells);
	sqlite3_finalize(st);
	return r;
}

int
tool_hdb_query(tool_hdb *db, tool_hdb_question q, const tool_hdb_filter *f,
    const tool_hdb_sink *sink)
{
	sqlite3_stmt *st = NULL;
	int r;

	if ((unsigned)q >= TOOL_HDB_Q_N)
		return hdb_fail(db, BELLOWS_EINVAL, "no such question");
	if ((r = hdb_prepare(db, hdb_questions[q], &st)) != 0)
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
		return hdb_fail(db, BELLOWS_EINVAL, "no such table");
	if ((r = hdb_prepare(db, hdb_tables[t].sql, &st)) != 0)
		return r;
	if (hdb_bind_int(st, ":run", run) != SQLITE_OK) {
		r = hdb_sqlite_fail(db, sqlite3_errcode(db->db));
		sqlite3_finalize(st);
		return r;
	}
	return hdb_rows(db, st, sink);
}

/* ---- runs and layers --------------------------------------------------- */

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
			r = hdb_fail(db, BELLOWS_ENOTFOUND,
			    "there is no run %" PRId64 "%s%s%s", id,
			    job != NULL ? " of job '" : "",
			    job != NULL ? job : "", job != NULL ? "'" : "");
		else if (job != NULL)
			r = hdb_fail(db, BELLOWS_ENOTFOUND,
			    "job '%s' has no run", job);
		else
			r = hdb_fail(db, BELLOWS_ENOTFOUND,
			    "the database holds no run yet");
		goto out;
	}
	if (rc != SQLITE_ROW) {
		r = hdb_sqlite_fail(db, rc);
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
		r = hdb_fail(db, BELLOWS_ENOMEM, "out of memory");
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
	else if (rc == SQLITE_DONE)
		r = hdb_fail(db, BELLOWS_ENOTFOUND,
		    "run %" PRId64 " has no layer '%s'", run, name);
	else
		r = hdb_sqlite_fail(db, rc);
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
		r = hdb_sqlite_fail(db, rc);
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

/* ---- replay input ------------------------------------------------------ */

void
tool_hdb_replay_destroy(tool_hdb_replay **rp)
{
	tool_hdb_replay *t;

	if (rp == NULL || *rp == NULL)
		return;
	t = *rp;
	for (uint32_t l = 0; t->layers != NULL && l < t->n_layers; l++)
		free(t->layers[l].name);
	free(t->layers);
	free(t->window);
	free(t->lr);
	free(t->lr_next);
	free(t->norm_rank0);
	free(t->norm_mean);
	free(t->level);
	free(t->batch_size);
	free(t->lr_scale);
	free(t->win);
	free(t->layer_stats);
	free(t->comm);
	free(t->apply_step);
	free(t->calibrate_steps);
	free(t->size_threshold);
	free(t->compression_off);
	free(t);
	*rp = NULL;
}

/* Parses a layers.shape text ("64x32", "" for 0-D) into `li`. */
static bool
hdb_shape(const char *s, com_layer_info *li)
{
	uint64_t product = 1;

	li->ndim = 0;
	if (s[0] == '\0')
		return true;
	for (;;) {
		char *end;
		unsigned long long v;

		if (li->ndim == COM_MAX_NDIM || s[0] < '0' || s[0] > '9')
			return false;
		errno = 0;
		v = strtoull(s, &end, 10);
		if (errno != 0 || v == 0 || v > UINT32_MAX ||
		    (*end != 'x' && *end != '\0') || product > UINT64_MAX / v)
			return false;
		li->shape[li->ndim++] = (uint32_t)v;
		product *= v;
		if (*end == '\0')
			break;
		s = end + 1;
	}
	return true;
}

static double
hdb_real(sqlite3_stmt *st, int col)
{
	return sqlite3_column_type(st, col) == SQLITE_NULL
	    ? NAN
	    : sqlite3_column_double(st, col);
}

static int
hdb_replay_layers(tool_hdb *db, int64_t run, tool_hdb_replay *rp)
{
	static const char
	    sql[] = "SELECT idx, name, numel, ndim, shape FROM layers"
		    " WHERE run_id = :run ORDER BY idx";
	sqlite3_stmt *st = NULL;
	uint32_t cap = 0;
	int r, rc;

	if ((r = hdb_prepare(db, sql, &st)) != 0)
		return r;
	if ((rc = hdb_bind_int(st, ":run", run)) != SQLITE_OK) {
		r = hdb_sqlite_fail(db, rc);
		goto out;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 1);
		const char *shape = (const char *)sqlite3_column_text(st, 4);
		com_layer_info *li;

		if (sqlite3_column_int64(st, 0) != rp->n_layers) {
			r = hdb_fail(db, BELLOWS_EINVAL,
			    "run %" PRId64 ": layer indices are not 0, 1, ..."
			    " (found %lld at position %u)",
			    run, (long long)sqlite3_column_int64(st, 0),
			    rp->n_layers);
			goto out;
		}
		if (rp->n_layers == cap) {
			uint32_t nc = cap ? 2 * cap : 64;
			com_layer_info *g = realloc(rp->layers,
			    sizeof(*g) * nc);

			if (g == NULL) {
				r = hdb_fail(db, BELLOWS_ENOMEM,
				    "out of memory");
				goto out;
			}
			rp->layers = g;
			cap = nc;
		}
		li = &rp->layers[rp->n_layers];
		memset(li, 0, sizeof(*li));
		if (name == NULL || shape == NULL) {
			r = hdb_fail(db, BELLOWS_EINVAL,
			    "run %" PRId64 ": layer %u has no name or shape",
			    run, rp->n_layers);
			goto out;
		}
		if (!hdb_shape(shape, li) ||
		    sqlite3_column_int64(st, 3) != li->ndim) {
			r = hdb_fail(db, BELLOWS_EINVAL,
			    "run %" PRId64 ": layer '%s' has shape '%s' and "
			    "ndim %lld, which do not agree",
			    run, name, shape,
			    (long long)sqlite3_column_int64(st, 3));
			goto out;
		}
		li->numel = (uint64_t)sqlite3_column_int64(st, 2);
		if ((li->name = com_strdup(name)) == NULL) {
			r = hdb_fail(db, BELLOWS_ENOMEM, "out of memory");
			goto out;
		}
		rp->n_layers++;
	}
	if (rc != SQLITE_DONE)
		r = hdb_sqlite_fail(db, rc);
	else if (rp->n_layers == 0)
		r = hdb_fail(db, BELLOWS_EINVAL,
		    "run %" PRId64 " has no layers", run);
out:
	sqlite3_finalize(st);
	return r;
}

/* Makes room for window slot `n` (0-based) in every per-window array. */
static int
hdb_replay_grow(tool_hdb_replay *rp, uint64_t n, uint64_t *cap)
{
	uint64_t nc;
	size_t nl = rp->n_layers;
	void *p;

	if (n < *cap)
		return 0;
	nc = *cap ? 2 * *cap : 64;
	if (nc > SIZE_MAX / sizeof(double) / nl)
		return BELLOWS_ENOMEM;
#define HDB_GROW(field, count)                                                 \
	do {                                                                   \
		p = realloc(rp->field, sizeof(*rp->field) * (count));          \
		if (p == NULL)                                                 \
			return BELLOWS_ENOMEM;                                 \
		rp->field = p;                                                 \
	} while (0)
	HDB_GROW(window, nc);
	HDB_GROW(lr, nc);
	HDB_GROW(lr_next, nc);
	HDB_GROW(batch_size, nc);
	HDB_GROW(lr_scale, nc);
	HDB_GROW(norm_rank0, nc * nl);
	HDB_GROW(norm_mean, nc * nl);
	HDB_GROW(level, nc * nl);
	HDB_GROW(win, nc);
	HDB_GROW(layer_stats, nc * nl);
	HDB_GROW(apply_step, nc);
	HDB_GROW(calibrate_steps, nc);
	HDB_GROW(size_threshold, nc);
	HDB_GROW(compression_off, nc);
#undef HDB_GROW
	*cap = nc;
	return 0;
}

static uint64_t
hdb_u64(sqlite3_stmt *st, int col)
{
	int64_t v = sqlite3_column_int64(st, col);

	return v < 0 ? 0 : (uint64_t)v;
}

/* hdb_real with 0 for NULL: a statistic nobody measured. */
static double
hdb_real0(sqlite3_stmt *st, int col)
{
	return sqlite3_column_type(st, col) == SQLITE_NULL
	    ? 0
	    : sqlite3_column_double(st, col);
}

/* The window-level columns of the row at `st` into slot n. */
static void
hdb_replay_window(sqlite3_stmt *st, tool_hdb_replay *rp, uint64_t n)
{
	rp->win[n] = (bellows_window){
		.window = hdb_u64(st, 0),
		.first_step = hdb_u64(st, 27),
		.last_step = hdb_u64(st, 28),
		.epoch = hdb_u64(st, 29),
		.lr = rp->lr[n],
		.lr_next = rp->lr_next[n],
		.batch_size = (uint32_t)hdb_u64(st, 30),
		.lr_scale = rp->lr_scale[n],
		.world = (uint32_t)hdb_u64(st, 31),
		.ranks_reported = (uint32_t)hdb_u64(st, 32),
		.step_ms_median = hdb_real(st, 33),
		.compute_ms_median = hdb_real(st, 34),
		.comm_ms_median = hdb_real(st, 35),
		.floats_sent = hdb_u64(st, 36),
		.floats_raw = hdb_u64(st, 37),
		.n_layers = rp->n_layers,
		.backward_ms_median = hdb_real0(st, 38),
		.codec_ms_median = hdb_real0(st, 39),
		.mem_device_used = (double)hdb_u64(st, 40),
		.mem_device_total = (double)hdb_u64(st, 41),
		.mem_host_used = (double)hdb_u64(st, 42),
		.size_threshold = hdb_u64(st, 43),
		.compression_off = sqlite3_column_int(st, 44) != 0,
		.saved_bytes = (double)hdb_u64(st, 47),
	};
	rp->size_threshold[n] = rp->win[n].size_threshold;
	rp->compression_off[n] = rp->win[n].compression_off;
	rp->apply_step[n] = hdb_u64(st, 45);
	rp->calibrate_steps[n] = hdb_u64(st, 46);
	rp->win[n].calibrate_until = rp->calibrate_steps[n] == 0 ? 0
	    : rp->calibrate_steps[n] > UINT64_MAX - rp->apply_step[n]
	    ? UINT64_MAX
	    : rp->apply_step[n] + rp->calibrate_steps[n];
}

/* The layer columns of the row at `st`, as bellowsd's window aggregate
 * handed them (grad_norm: rank 0's, else the mean). */
static void
hdb_replay_layer(sqlite3_stmt *st, bellows_window_layer *x)
{
	*x = (bellows_window_layer){
		.grad_norm_rank0 = hdb_real(st, 2),
		.grad_norm_mean = hdb_real(st, 3),
		.sum_sq = hdb_real(st, 9),
		.abs_sum = hdb_real(st, 10),
		.max_abs = hdb_real(st, 11),
		.count = hdb_u64(st, 12),
		.nonzero = hdb_u64(st, 13),
		.nonfinite = hdb_u64(st, 14),
		.momentum_abs_mean = hdb_real(st, 15),
		.level = hdb_real(st, 4),
		.error_bound = hdb_real(st, 16),
		.act_steps = hdb_u64(st, 17),
		.act_lbar = hdb_real0(st, 18),
		.act_nonzero = hdb_real0(st, 19),
		.act_bytes = hdb_real0(st, 20),
		.act_raw_bytes = hdb_real0(st, 21),
		.comm_raw_ms = hdb_real(st, 22),
		.comm_comp_ms = hdb_real(st, 23),
		.codec_ms = hdb_real(st, 24),
		.comm_raw_n = (uint32_t)hdb_u64(st, 25),
		.comm_comp_n = (uint32_t)hdb_u64(st, 26),
	};
	x->grad_norm = !isnan(x->grad_norm_rank0) ? x->grad_norm_rank0
						  : x->grad_norm_mean;
}

/* Reads the run's collectives and points each replayed window at its
 * own (in the order they were recorded), then its layers at theirs. */
static int
hdb_replay_comm(tool_hdb *db, int64_t run, tool_hdb_replay *rp)
{
	static const char sql[] =
	    "SELECT window, rank, bytes, ms, count, compressed FROM hdb_comm"
	    " WHERE run_id = :run ORDER BY window, seq";
	sqlite3_stmt *st = NULL;
	uint64_t cap = 0, *win_of = NULL, j = 0;
	int r, rc;

	if ((r = hdb_prepare(db, sql, &st)) != 0)
		return r;
	if ((rc = hdb_bind_int(st, ":run", run)) != SQLITE_OK) {
		r = hdb_sqlite_fail(db, rc);
		goto out;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (rp->n_comm == cap) {
			uint64_t nc = cap ? 2 * cap : 256;
			bellows_comm_sample *g;
			uint64_t *gw;

			if (nc > SIZE_MAX / sizeof(*g) ||
			    (g = realloc(rp->comm, sizeof(*g) * nc)) == NULL) {
				r = hdb_fail(db, BELLOWS_ENOMEM,
				    "out of memory");
				goto out;
			}
			rp->comm = g;
			if ((gw = realloc(win_of, sizeof(*gw) * nc)) == NULL) {
				r = hdb_fail(db, BELLOWS_ENOMEM,
				    "out of memory");
				goto out;
			}
			win_of = gw;
			cap = nc;
		}
		win_of[rp->n_comm] = hdb_u64(st, 0);
		rp->comm[rp->n_comm++] = (bellows_comm_sample){
			.rank = (uint32_t)hdb_u64(st, 1),
			.bytes = hdb_u64(st, 2),
			.ms = hdb_real(st, 3),
			.count = (uint32_t)hdb_u64(st, 4),
			.compressed = sqlite3_column_int(st, 5) != 0,
		};
	}
	if (rc != SQLITE_DONE) {
		r = hdb_sqlite_fail(db, rc);
		goto out;
	}
	for (uint64_t i = 0; i < rp->n_windows; i++) {
		bellows_window *w = &rp->win[i];

		w->layers = rp->layer_stats + (size_t)i * rp->n_layers;
		w->comm = NULL;
		w->n_comm = 0;
		while (j < rp->n_comm && win_of[j] < w->window)
			j++;
		if (j < rp->n_comm && win_of[j] == w->window)
			w->comm = &rp->comm[j];
		while (j < rp->n_comm && win_of[j] == w->window) {
			w->n_comm++;
			j++;
		}
	}
out:
	free(win_of);
	sqlite3_finalize(st);
	return r;
}

static int
hdb_replay_windows(tool_hdb *db, int64_t run, tool_hdb_replay *rp)
{
	/* Every column of the policies' view: a policy decides in replay
	 * on what it was handed in bellowsd. */
	static const char sql[] =
	    "SELECT w.window, w.layer, w.grad_norm_rank0, w.grad_norm_mean,"
	    " w.level, i.lr, i.lr_next, i.state_batch_size, i.lr_scale,"
	    " w.sum_sq, w.abs_sum, w.max_abs, w.count, w.nonzero, w.nonfinite,"
	    " w.momentum_abs_mean, w.error_bound, w.act_steps, w.act_lbar,"
	    " w.act_nonzero, w.act_bytes, w.act_raw_bytes, w.comm_raw_ms,"
	    " w.comm_comp_ms, w.codec_ms, w.comm_raw_n, w.comm_comp_n,"
	    " i.first_step, i.last_step, i.epoch, i.batch_size, i.world,"
	    " i.ranks_reported, i.step_ms_median, i.compute_ms_median,"
	    " i.comm_ms_median, i.floats_sent, i.floats_raw,"
	    " i.backward_ms_median, i.codec_ms_median, i.mem_device_used,"
	    " i.mem_device_total, i.mem_host_used, i.state_size_threshold,"
	    " i.state_compression_off, i.state_apply_step,"
	    " i.state_calibrate_steps, i.saved_bytes"
	    " FROM hdb_windows w JOIN hdb_window_info i"
	    " ON i.run_id = w.run_id AND i.window = w.window"
	    " WHERE w.run_id = :run ORDER BY w.window, w.layer";
	sqlite3_stmt *st = NULL;
	uint8_t *seen = calloc(rp->n_layers, 1);
	uint64_t cap = 0, n = 0;
	int64_t cur = -1, closed = 0;
	uint32_t n_seen = 0;
	int r, rc;

	if (seen == NULL)
		return hdb_fail(db, BELLOWS_ENOMEM, "out of memory");
	if ((r = hdb_prepare(db, sql, &st)) != 0)
		goto out;
	if ((rc = hdb_bind_int(st, ":run", run)) != SQLITE_OK) {
		r = hdb_sqlite_fail(db, rc);
		goto out;
	}
	/* Slot n is the window being read; it counts once complete. */
	for (;;) {
		int64_t window, layer;
		size_t at;

		rc = sqlite3_step(st);
		if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
			r = hdb_sqlite_fail(db, rc);
			goto out;
		}
		window = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
		if (window != cur && cur >= 0 && n_seen == rp->n_layers)
			n++;
		if (rc == SQLITE_DONE)
			break;
		if (window != cur) {
			if (window < 0) {
				r = hdb_fail(db, BELLOWS_EINVAL,
				    "run %" PRId64 ": negative window %" PRId64,
				    run, window);
				goto out;
			}
			if (hdb_replay_grow(rp, n, &cap) != 0) {
				r = hdb_fail(db, BELLOWS_ENOMEM,
				    "out of memory");
				goto out;
			}
			cur = window;
			n_seen = 0;
			memset(seen, 0, rp->n_layers);
			rp->window[n] = (uint64_t)window;
			rp->lr[n] = hdb_real(st, 5);
			rp->lr_next[n] = hdb_real(st, 6);
			rp->batch_size[n] = (uint32_t)sqlite3_column_int64(st,
			    7);
			rp->lr_scale[n] = hdb_real(st, 8);
			hdb_replay_window(st, rp, n);
		}
		layer = sqlite3_column_int64(st, 1);
		if (layer < 0 || layer >= rp->n_layers || seen[layer])
			continue; /* not in the table: the window is unusable */
		seen[layer] = 1;
		n_seen++;
		at = (size_t)n * rp->n_layers + (size_t)layer;
		rp->norm_rank0[at] = hdb_real(st, 2);
		rp->norm_mean[at] = hdb_real(st, 3);
		rp->level[at] = hdb_real(st, 4);
		hdb_replay_layer(st, &rp->layer_stats[at]);
	}
	rp->n_windows = n;
	sqlite3_finalize(st);
	st = NULL;
	/* Windows closed without usable layer rows are skipped, counted. */
	if ((r = hdb_prepare(db,
		 "SELECT count(*) FROM window_info WHERE run_id = :run",
		 &st)) != 0)
		goto out;
	rc = hdb_bind_int(st, ":run", run);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		r = hdb_sqlite_fail(db, rc);
		goto out;
	}
	closed = sqlite3_column_int64(st, 0);
	if ((uint64_t)closed > n)
		rp->n_skipped = (uint64_t)closed - n;
out:
	sqlite3_finalize(st);
	free(seen);
	return r;
}

int
tool_hdb_replay_load(tool_hdb *db, int64_t run, tool_hdb_replay **ret)
{
	tool_hdb_replay *rp = calloc(1, sizeof(*rp));
	int r;

	if (rp == NULL)
		return hdb_fail(db, BELLOWS_ENOMEM, "out of memory");
	if ((r = hdb_replay_layers(db, run, rp)) != 0 ||
	    (r = hdb_replay_windows(db, run, rp)) != 0 ||
	    (r = hdb_replay_comm(db, run, rp)) != 0) {
		tool_hdb_replay_destroy(&rp);
		return r;
	}
	*ret = rp;
	return 0;
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
