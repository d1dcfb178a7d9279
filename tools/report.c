/* report - `bellows report` and `bellows history compare`, see report.h.
 *
 * A run is read into memory (rep_run) in one snapshot: the exported
 * tables it needs as rows whose columns client/historyrows resolved
 * once (tool_report_cols), except the windows table (a row per layer
 * per window), which streams into arrays of level, error bound,
 * norm and activation bytes indexed by window position. The level is
 * the one applied (what the agents sent at), the decided one in rows
 * that lack it, which the report counts and says. Levels are weighted
 * by the steps of each window ("time-weighted": a window of twice the
 * steps counts twice). The text report and the HTML page are
 * written by the same functions, one per section (rep_write_*), through
 * an emitter (report_emit.c) that escapes the text and draws the SVG
 * plots in HTML, so that the two never disagree. policy_metrics
 * is kept as rows: a run whose policies return many metrics per window
 * takes memory in proportion.
 *
 * This file owns the `bellows report` command, loading a run and what it
 * adds up to, and the text, HTML and JSON report; drawing an SVG plot is
 * report_html.c's, `bellows history compare` is report_compare.c's, and
 * what they share is report_int.h.
 */
#include "report.h"
#include "report_int.h"

#include "common/args.h"
#include "client/cellfmt.h"
#include "client/historydb.h"
#include "client/historyrows.h"
#include "common/units.h"
#include "client/metrics.h"
#include "common/stat_table.h"

#include <bellows/error.h>

#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REP_NAMES_MAX     6  /* layers named in one change line */
#define REP_DECISIONS_MAX 60 /* decisions listed in a report */
#define REP_WINDOWS_MAX   40 /* rows of the step time table */

/* ---- a run in memory ---------------------------------------------------- */

/* The tables a report reads, in the order it reads them. */
static const tool_hdb_table rep_tables[] = {
	TOOL_HDB_T_RUNS,
	TOOL_HDB_T_LAYERS,
	TOOL_HDB_T_WINDOW_INFO,
	TOOL_HDB_T_WINDOWS,
	TOOL_HDB_T_POLICY_METRICS,
	TOOL_HDB_T_DECISIONS,
	TOOL_HDB_T_DECISION_CHANGES,
	TOOL_HDB_T_POLICY_FILES,
};
_Static_assert(sizeof(rep_tables) / sizeof(rep_tables[0]) == REP_N_TABLES,
    "rep_tables and REP_N_TABLES disagree");

const char *const tool_report_cols[RC_N] = {
	[RC_APPLY_STEP] = "apply_step",
	[RC_CLOSED_WALL_MS] = "closed_wall_ms",
	[RC_COMPLETE] = "complete",
	[RC_CONFIG_HASH] = "config_hash",
	[RC_ENDED_WALL_MS] = "ended_wall_ms",
	[RC_EPOCH] = "epoch",
	[RC_EVAL_ACCURACY] = "eval_accuracy",
	[RC_EVAL_LOSS] = "eval_loss",
	[RC_FIRST_STEP] = "first_step",
	[RC_FLOATS_RAW] = "floats_raw",
	[RC_FLOATS_SENT] = "floats_sent",
	[RC_HASH] = "hash",
	[RC_IDX] = "idx",
	[RC_KNOB] = "knob",
	[RC_LAST_STEP] = "last_step",
	[RC_LAYER] = "layer",
	[RC_LR] = "lr",
	[RC_NAME] = "name",
	[RC_NEW] = "new",
	[RC_NUMEL] = "numel",
	[RC_OLD] = "old",
	[RC_PATH] = "path",
	[RC_POLICY] = "policy",
	[RC_REASON] = "reason",
	[RC_SEQ] = "seq",
	[RC_SHAPE] = "shape",
	[RC_SOURCE] = "source",
	[RC_STARTED_WALL_MS] = "started_wall_ms",
	[RC_STEP_MS_MEDIAN] = "step_ms_median",
	[RC_TEXT] = "text",
	[RC_VALUE] = "value",
	[RC_WALL_MS] = "wall_ms",
	[RC_WINDOW] = "window",
};

static const char *
rep_layer_name(const rep_run *rr, int64_t idx)
{
	const tool_hdb_result *l = &rr->t[R_LAYERS];

	/* Rows are in idx order: 0, 1, ... */
	if (idx >= 0 && (uint64_t)idx < l->rows.n_rows &&
	    tool_hdb_int(l, (uint64_t)idx, RC_IDX, -1) == idx)
		return tool_hdb_text(l, (uint64_t)idx, RC_NAME);
	for (uint64_t i = 0; i < l->rows.n_rows; i++) {
		if (tool_hdb_int(l, i, RC_IDX, -1) == idx)
			return tool_hdb_text(l, i, RC_NAME);
	}
	return "?";
}

/* Position of window w in rr->win, or -1. */
static int64_t
rep_win_pos(const rep_run *rr, int64_t w)
{
	uint64_t lo = 0, hi = rr->n_win;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (rr->win[mid] < w)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < rr->n_win && rr->win[lo] == w ? (int64_t)lo : -1;
}

static int
rep_win_cmp(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static int
rep_chg_cmp(const void *a, const void *b)
{
	const rep_chg *x = a, *y = b;

	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	return x->row < y->row ? -1 : x->row > y->row;
}

/* The changes of decision `seq`: rr->chg[*ret_lo .. hi). Returns hi. */
static uint64_t
rep_chg_range(const rep_run *rr, int64_t seq, uint64_t *ret_lo)
{
	uint64_t lo = 0, hi = rr->t[R_CHG].rows.n_rows, end;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (rr->chg[mid].seq < seq)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (end = lo;
	     end < rr->t[R_CHG].rows.n_rows && rr->chg[end].seq == seq; end++)
		;
	*ret_lo = lo;
	return end;
}

void
tool_report_run_fini(rep_run *rr)
{
	tool_hdb_run_fini(&rr->run);
	for (size_t i = 0; i < REP_N_TABLES; i++)
		tool_hdb_result_fini(&rr->t[i]);
	free(rr->chg);
	free(rr->win);
	free(rr->steps);
	free(rr->level);
	free(rr->decided);
	free(rr->eb);
	free(rr->norm);
	free(rr->act);
	free(rr->act_raw);
	memset(rr, 0, sizeof(*rr));
}

/* Builds the per-window arrays from the tables. Returns 0 or
 * BELLOWS_ENOMEM. */
static int
rep_run_index(rep_run *rr)
{
	const tool_hdb_result *wi = &rr->t[R_WINFO];
	size_t cells;

	rr->n_layers = (uint32_t)rr->t[R_LAYERS].rows.n_rows;
	rr->n_win = wi->rows.n_rows;
	cells = (size_t)rr->n_win * (rr->n_layers > 0 ? rr->n_layers : 1) + 1;
	rr->win = calloc(rr->n_win + 1, sizeof(*rr->win));
	rr->steps = calloc(rr->n_win + 1, sizeof(*rr->steps));
	rr->act = calloc(rr->n_win + 1, sizeof(*rr->act));
	rr->act_raw = calloc(rr->n_win + 1, sizeof(*rr->act_raw));
	rr->level = calloc(cells, sizeof(*rr->level));
	rr->decided = calloc(cells, sizeof(*rr->decided));
	rr->eb = calloc(cells, sizeof(*rr->eb));
	rr->norm = calloc(cells, sizeof(*rr->norm));
	if (rr->win == NULL || rr->steps == NULL || rr->act == NULL ||
	    rr->act_raw == NULL || rr->level == NULL || rr->decided == NULL ||
	    rr->eb == NULL || rr->norm == NULL)
		return BELLOWS_ENOMEM;
	if ((rr->chg = calloc(rr->t[R_CHG].rows.n_rows + 1,
		 sizeof(*rr->chg))) == NULL)
		return BELLOWS_ENOMEM;
	for (uint64_t i = 0; i < rr->t[R_CHG].rows.n_rows; i++) {
		rr->chg[i].seq = tool_hdb_int(&rr->t[R_CHG], i, RC_SEQ, -1);
		rr->chg[i].row = i;
	}
	qsort(rr->chg, rr->t[R_CHG].rows.n_rows, sizeof(*rr->chg), rep_chg_cmp);
	for (uint64_t i = 0; i < rr->n_win; i++)
		rr->win[i] = tool_hdb_int(wi, i, RC_WINDOW, 0);
	qsort(rr->win, rr->n_win, sizeof(*rr->win), rep_win_cmp);
	for (uint64_t i = 0; i < rr->n_win; i++) {
		int64_t p = rep_win_pos(rr, tool_hdb_int(wi, i, RC_WINDOW, 0));
		double s = tool_hdb_real(wi, i, RC_LAST_STEP) -
		    tool_hdb_real(wi, i, RC_FIRST_STEP);

		rr->steps[p] = isfinite(s) && s >= 0 ? s + 1 : 1;
		rr->act[p] = NAN;
		rr->act_raw[p] = NAN;
	}
	for (size_t i = 0; i + 1 < cells; i++) {
		rr->level[i] = NAN;
		rr->decided[i] = NAN;
		rr->eb[i] = NAN;
		rr->norm[i] = NAN;
	}
	return 0;
}

/* The windows table streams into the per-window arrays: a run of many
 * windows and layers would not fit in memory as rows. */
#define REP_WCOLS 9 /* columns of windows a report reads */

typedef struct rep_wsink {
	rep_run *rr;        /* being filled */
	tool_hdb_cols cols; /* rep_wcols in the table's columns */
} rep_wsink;

/* level_applied is missing from a file older than it (and NULL in rows
 * of agents older than it). */
enum {
	W_WINDOW,
	W_LAYER,
	W_LEVEL,
	W_ERROR_BOUND,
	W_NORM,
	W_ACT_STEPS,
	W_ACT_BYTES,
	W_ACT_RAW_BYTES,
	W_LEVEL_APPLIED,
	W_N,
};

static const char *const rep_wcols[W_N] = {
	[W_WINDOW] = "window",
	[W_LAYER] = "layer",
	[W_LEVEL] = "level",
	[W_ERROR_BOUND] = "error_bound",
	[W_NORM] = "grad_norm_mean",
	[W_ACT_STEPS] = "act_steps",
	[W_ACT_BYTES] = "act_bytes",
	[W_ACT_RAW_BYTES] = "act_raw_bytes",
	[W_LEVEL_APPLIED] = "level_applied",
};

static int
rep_wsink_columns(void *arg, uint32_t n, const char *const *names)
{
	rep_wsink *ws = arg;

	return tool_hdb_cols_resolve(&ws->cols, n, names);
}

static double
rep_wcell(const rep_wsink *ws, const tool_hdb_cell *cells, uint32_t k)
{
	return tool_hdb_cell_real(tool_hdb_cols_cell(&ws->cols, cells, k));
}

static int
rep_wsink_row(void *arg, const tool_hdb_cell *cells)
{
	rep_wsink *ws = arg;
	rep_run *rr = ws->rr;
	double w = rep_wcell(ws, cells, W_WINDOW);
	double l = rep_wcell(ws, cells, W_LAYER);
	int64_t p;
	size_t at;

	if (!isfinite(w) || !isfinite(l) || l < 0 || l >= rr->n_layers)
		return 0;
	if ((p = rep_win_pos(rr, (int64_t)w)) < 0)
		return 0;
	at = (size_t)p * rr->n_layers + (size_t)l;
	rr->decided[at] = rep_wcell(ws, cells, W_LEVEL);
	rr->level[at] = rep_wcell(ws, cells, W_LEVEL_APPLIED);
	rr->level_rows++;
	if (!isfinite(rr->level[at])) {
		rr->level[at] = rr->decided[at];
		rr->applied_missing++;
	}
	rr->eb[at] = rep_wcell(ws, cells, W_ERROR_BOUND);
	rr->norm[at] = rep_wcell(ws, cells, W_NORM);
	if (rep_wcell(ws, cells, W_ACT_STEPS) > 0) {
		if (isnan(rr->act[p])) {
			rr->act[p] = 0;
			rr->act_raw[p] = 0;
		}
		rr->act[p] += rep_wcell(ws, cells, W_ACT_BYTES);
		rr->act_raw[p] += rep_wcell(ws, cells, W_ACT_RAW_BYTES);
	}
	return 0;
}

/* Loads run `id` (TOOL_HDB_NONE: the latest, of `job` when not NULL) of
 * the database at `path`. Returns 0, or 1 after saying why as "bellows
 * CMD: ...". */
int
tool_report_run_load(const char *cmd, const char *path, int64_t id,
    const char *job, bool say_latest, rep_run *rr)
{
	char err[TOOL_HDB_ERR_MAX];
	tool_hdb *db = NULL;
	int rc = 1, r;

	memset(rr, 0, sizeof(*rr));
	rr->path = path;
	if (tool_hdb_open(path, &db, err, sizeof(err)) != 0) {
		fprintf(stderr, "bellows %s: %s\n", cmd, err);
		return 1;
	}
	if (tool_hdb_begin(db) != 0) {
		fprintf(stderr, "bellows %s: %s: %s\n", cmd, path,
		    tool_hdb_error(db));
		goto out;
	}
	if ((r = tool_hdb_run_find(db, id, job, &rr->run)) != 0) {
		fprintf(stderr, "bellows %s: %s: %s\n", cmd, path,
		    r == BELLOWS_ENOMEM ? bellows_strerror(r)
					: tool_hdb_error(db));
		goto end;
	}
	if (id == TOOL_HDB_NONE && say_latest)
		fprintf(stderr,
		    "bellows %s: %s: run %" PRId64
		    " (job '%s', %s), the latest%s; --run picks another\n",
		    cmd, path, rr->run.id, rr->run.job,
		    rr->run.live ? "live" : "ended",
		    job != NULL ? " of the job" : "");
	for (size_t i = 0; i <= REP_N_TABLES; i++) {
		rep_wsink ws = { .rr = rr };
		tool_hdb_sink sink = {
			.columns = rep_wsink_columns,
			.row = rep_wsink_row,
			.arg = &ws,
		};
		tool_hdb_table t = i < REP_N_TABLES ? rep_tables[i]
						    : TOOL_HDB_T_WINDOWS;

		/* The windows table last, streamed into the arrays the
		 * others sized. */
		if (i == R_WINDOWS)
			continue;
		if (i == REP_N_TABLES && rep_run_index(rr) != 0) {
			fprintf(stderr, "bellows %s: %s\n", cmd,
			    bellows_strerror(BELLOWS_ENOMEM));
			goto end;
		}
		tool_hdb_cols_init(&ws.cols, rep_wcols, W_N, 0);
		if (i < REP_N_TABLES)
			tool_hdb_result_sink(&rr->t[i], tool_report_cols, RC_N,
			    0, &sink);
		if ((r = tool_hdb_export(db, t, rr->run.id, &sink)) != 0) {
			fprintf(stderr, "bellows %s: %s: %s\n", cmd, path,
			    r == BELLOWS_ENOMEM ? bellows_strerror(r)
						: tool_hdb_error(db));
			goto end;
		}
	}
	rc = 0;
end:
	(void)tool_hdb_end(db);
out:
	tool_hdb_close(&db);
	if (rc != 0)
		tool_report_run_fini(rr);
	return rc;
}

/* ---- numbers for people ---------------------------------------------- */

/* Milliseconds as "2.13 ms", "1.52 s", "3 min 05 s". */
void
tool_report_dur(double ms, char *buf, size_t len)
{
	if (!isfinite(ms))
		snprintf(buf, len, "-");
	else if (ms == 0)
		snprintf(buf, len, "0 ms");
	else if (ms < 1)
		snprintf(buf, len, "%.0f us", ms * 1000);
	else if (ms < 1000)
		snprintf(buf, len, "%.3g ms", ms);
	else if (ms < 60000)
		snprintf(buf, len, "%.3g s", ms / 1000);
	else if (ms < 3600000)
		snprintf(buf, len, "%d min %02d s", (int)(ms / 60000),
		    (int)fmod(ms / 1000, 60));
	else
		snprintf(buf, len, "%d h %02d min", (int)(ms / 3600000),
		    (int)fmod(ms / 60000, 60));
}

static void
rep_time(int64_t ms, char *buf, size_t len)
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;

	if (gmtime_r(&s, &tm) == NULL ||
	    strftime(buf, len, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0)
		snprintf(buf, len, "%" PRId64 " ms", ms);
}

void
tool_report_num(double v, char *buf, size_t len)
{
	if (!isfinite(v))
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.4g", v);
}

static int
rep_dcmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Median of the finite values of v[i * stride], i < n; NAN if none. */
static double
rep_median(const double *v, uint64_t n, size_t stride)
{
	double *t = malloc((n + 1) * sizeof(*t)), m;
	uint64_t k = 0;

	if (t == NULL)
		return NAN;
	for (uint64_t i = 0; i < n; i++) {
		if (isfinite(v[i * stride]))
			t[k++] = v[i * stride];
	}
	qsort(t, k, sizeof(*t), rep_dcmp);
	m = k == 0 ? NAN : k % 2 ? t[k / 2] : (t[k / 2 - 1] + t[k / 2]) / 2;
	free(t);
	return m;
}

/* ---- what a run adds up to ------------------------------------------- */

/* True for a per-rank statistic in bytes whose window value is the
 * largest over ranks (memory in use, bytes saved for backward): the
 * report gives the largest over the run for each, from the statistics
 * table, so a new one appears without an edit here. */
static bool
rep_peak_stat(const com_stat *st)
{
	return st->agg == BELLOWS_STAT_AGG_MAX && st->wcol != NULL &&
	    strcmp(st->unit, "bytes") == 0;
}

/* The largest over the windows of window_info `wi` of each statistic
 * rep_peak_stat picks, into s->peak; the columns resolved once. */
static void
rep_sum_peaks(const tool_hdb_result *wi, rep_sums *s)
{
	const char *want[COM_N_TSTATS];
	tool_hdb_cols cols;

	for (int k = 0; k < COM_N_TSTATS; k++)
		want[k] = rep_peak_stat(&com_timing_stat_table[k])
		    ? com_timing_stat_table[k].wcol
		    : "";
	tool_hdb_cols_init(&cols, want, COM_N_TSTATS, 0);
	(void)tool_hdb_cols_resolve(&cols, wi->rows.n_cols,
	    (const char *const *)wi->rows.names);
	for (uint64_t i = 0; i < wi->rows.n_rows; i++) {
		const tool_hdb_cell *row = tool_hdb_rows_cell(&wi->rows, i, 0);

		for (uint32_t k = 0; k < COM_N_TSTATS; k++) {
			const tool_hdb_cell *c = tool_hdb_cols_cell(&cols, row,
			    k);

			if (c != NULL && want[k][0] != '\0')
				s->peak[k] = fmax(s->peak[k],
				    (double)tool_hdb_cell_int(c, 0));
		}
	}
}

void
tool_report_sum(const rep_run *rr, rep_sums *s)
{
	const tool_hdb_result *wi = &rr->t[R_WINFO];
	double *st = calloc(3 * (rr->n_win + 1), sizeof(*st));
	double *raw = st != NULL ? st + rr->n_win + 1 : NULL;
	double *comp = raw != NULL ? raw + rr->n_win + 1 : NULL;
	double lo = INFINITY, hi = -INFINITY, t0 = INFINITY, t1 = -INFINITY;

	memset(s, 0, sizeof(*s));
	s->accuracy = s->eval_loss = NAN;
	for (uint64_t i = 0; i < wi->rows.n_rows; i++) {
		double v = tool_hdb_real(wi, i, RC_STEP_MS_MEDIAN);
		double acc = tool_hdb_real(wi, i, RC_EVAL_ACCURACY);

		if (isfinite(acc) && acc > 0) { /* the last evaluation */
			s->accuracy = acc;
			s->eval_loss = tool_hdb_real(wi, i, RC_EVAL_LOSS);
		}
		double t = tool_hdb_real(wi, i, RC_CLOSED_WALL_MS);
		double sent = tool_hdb_real(wi, i, RC_FLOATS_SENT);
		double full = tool_hdb_real(wi, i, RC_FLOATS_RAW);

		s->floats_sent += sent;
		s->floats_raw += full;
		if (st != NULL)
			st[i] = v;
		/* A window that sent fewer floats than raw compressed; the
		 * others (level 0, the threshold, the gate off, a trainer's
		 * raw baseline) are the run's own raw steps. */
		if (st != NULL && isfinite(v) && v > 0) {
			if (full > 0 && sent < full)
				comp[s->comp_windows++] = v;
			else
				raw[s->raw_windows++] = v;
		}
		if (isfinite(v)) {
			lo = fmin(lo, v);
			hi = fmax(hi, v);
		}
		if (isfinite(t)) {
			t0 = fmin(t0, t);
			t1 = fmax(t1, t);
		}
		if (tool_hdb_int(wi, i, RC_COMPLETE, 1) == 0)
			s->incomplete++;
	}
	rep_sum_peaks(wi, s);
	s->step_med = st != NULL ? rep_median(st, wi->rows.n_rows, 1) : NAN;
	s->step_raw_med = s->raw_windows > 0
	    ? rep_median(raw, s->raw_windows, 1)
	    : NAN;
	s->step_comp_med = s->comp_windows > 0
	    ? rep_median(comp, s->comp_windows, 1)
	    : NAN;
	s->step_min = isfinite(lo) ? lo : NAN;
	s->step_max = isfinite(hi) ? hi : NAN;
	s->wall_ms = isfinite(t0) ? t1 - t0 : NAN;
	{
		const tool_hdb_result *run = &rr->t[R_RUNS];
		int64_t start = tool_hdb_int(run, 0, RC_STARTED_WALL_MS, -1);
		int64_t end = tool_hdb_int(run, 0, RC_ENDED_WALL_MS, -1);

		if (end < 0 && isfinite(t1))
			end = (int64_t)t1;
		s->run_ms = start >= 0 && end >= start ? (double)(end - start)
						       : NAN;
	}
	s->act_med = rep_median(rr->act, rr->n_win, 1);
	s->act_raw_med = rep_median(rr->act_raw, rr->n_win, 1);
	s->decisions = rr->t[R_DEC].rows.n_rows;
	for (uint64_t d = 0; d < rr->t[R_DEC].rows.n_rows; d++) {
		uint64_t first;

		if (rep_chg_range(rr,
			tool_hdb_int(&rr->t[R_DEC], d, RC_SEQ, -1),
			&first) > first)
			s->changed++;
	}
	free(st);
}

void
tool_report_layer(const rep_run *rr, uint32_t l, rep_layer_sum *ls)
{
	double w = 0, lv = 0, eb = 0, prev = NAN;

	memset(ls, 0, sizeof(*ls));
	ls->level_last = NAN;
	ls->decided_last = NAN;
	for (uint64_t i = 0; i < rr->n_win; i++) {
		double v = rr->level[(size_t)i * rr->n_layers + l];
		double e = rr->eb[(size_t)i * rr->n_layers + l];

		if (!isfinite(v))
			continue;
		ls->windows++;
		w += rr->steps[i];
		lv += v * rr->steps[i];
		eb += (isfinite(e) ? e : 0) * rr->steps[i];
		if (isfinite(prev) && prev != v)
			ls->changes++;
		prev = v;
		ls->level_last = v;
		ls->decided_last = rr->decided[(size_t)i * rr->n_layers + l];
	}
	ls->level_tw = w > 0 ? lv / w : NAN;
	ls->eb_tw = w > 0 ? eb / w : NAN;
	ls->norm_med = rep_median(rr->norm + l, rr->n_win, rr->n_layers);
}

/* ---- text and HTML output ----------------------------------------------
 *
 * The report is written once, through an emitter (report_emit.c): as
 * text, or as an HTML page holding the same text sections (escaped)
 * between its plots. */

void
tool_report_esc(FILE *f, const char *s)
{
	for (; *s != '\0'; s++) {
		if (*s == '<')
			fputs("&lt;", f);
		else if (*s == '>')
			fputs("&gt;", f);
		else if (*s == '&')
			fputs("&amp;", f);
		else if (*s == '"')
			fputs("&quot;", f);
		else
			fputc(*s, f);
	}
}

/* ---- the report ------------------------------------------------------- */

/* The changes of decision `seq`, grouped by (knob, old, new), into o. */
/* A knob's value as people read it: the gate on/off, a size threshold
 * in bytes ("all raw" above every tensor), a codec table's length. */
static void
rep_knob(const char *knob, double v, char *buf, size_t len)
{
	if (!isfinite(v))
		tool_report_num(v, buf, len);
	else if (strcmp(knob, "compression") == 0)
		snprintf(buf, len, "%s", v != 0 ? "on" : "off");
	else if (strcmp(knob, "size_threshold") == 0 && v >= 0x1p63)
		snprintf(buf, len, "all raw");
	else if (strcmp(knob, "size_threshold") == 0 ||
	    strcmp(knob, "codec_table") == 0)
		com_fmt_bytes(v, buf, len);
	else
		tool_report_num(v, buf, len);
}

static void
rep_changes(const rep_emit *o, const rep_run *rr, int64_t seq)
{
	const tool_hdb_result *c = &rr->t[R_CHG];
	uint64_t lo, hi = rep_chg_range(rr, seq, &lo);
	bool *done = calloc(hi - lo + 1, sizeof(*done));

	if (done == NULL)
		return;
	for (uint64_t i = lo; i < hi; i++) {
		uint64_t ri = rr->chg[i].row;
		const char *knob = tool_hdb_text(c, ri, RC_KNOB);
		double old = tool_hdb_real(c, ri, RC_OLD),
		       now = tool_hdb_real(c, ri, RC_NEW);
		char a[32], b[32];
		unsigned named = 0, more = 0;

		if (done[i - lo])
			continue;
		rep_knob(knob, old, a, sizeof(a));
		rep_knob(knob, now, b, sizeof(b));
		if (isnan(old))
			tool_report_printf(o, "      %s -> %s", knob, b);
		else
			tool_report_printf(o, "      %s %s -> %s", knob, a, b);
		for (uint64_t j = i; j < hi; j++) {
			uint64_t rj = rr->chg[j].row;
			double o2 = tool_hdb_real(c, rj, RC_OLD),
			       n2 = tool_hdb_real(c, rj, RC_NEW);
			int64_t l = tool_hdb_int(c, rj, RC_LAYER, -1);

			if (done[j - lo] ||
			    strcmp(tool_hdb_text(c, rj, RC_KNOB), knob) != 0 ||
			    !((o2 == old) || (isnan(o2) && isnan(old))) ||
			    !((n2 == now) || (isnan(n2) && isnan(now))))
				continue;
			done[j - lo] = true;
			if (l < 0)
				continue;
			if (named < REP_NAMES_MAX)
				tool_report_printf(o, "%s%s",
				    named == 0 ? ": " : ", ",
				    rep_layer_name(rr, l));
			else
				more++;
			named++;
		}
		if (more > 0)
			tool_report_printf(o, " and %u more", more);
		tool_report_printf(o, "\n");
	}
	free(done);
}

static void
rep_plots_levels(const rep_emit *e, const rep_run *rr, const double *x)
{
	rep_series *s = calloc(rr->n_layers + 1, sizeof(*s));

	if (s == NULL)
		return;
	for (uint32_t l = 0; l < rr->n_layers; l++) {
		snprintf(s[l].name, sizeof(s[l].name), "%s",
		    rep_layer_name(rr, l));
		s[l].y = rr->level + l;
		s[l].stride = rr->n_layers;
		s[l].steps = true;
	}
	tool_report_draw(e,
	    &(rep_axes){ .title = rr->applied_missing > 0
		    ? "Compression level applied per layer (as sent; the "
		      "level decided where none was recorded)"
		    : "Compression level applied per layer (as sent)",
		.ylabel = "level applied",
		.y_from_zero = true },
	    x, rr->n_win, s, rr->n_layers);
	for (uint32_t l = 0; l < rr->n_layers; l++) {
		s[l].y = rr->norm + l;
		s[l].steps = false;
	}
	tool_report_draw(e,
	    &(rep_axes){ .title = "Gradient norm per layer (mean over ranks)",
		.ylabel = "norm" },
	    x, rr->n_win, s, rr->n_layers);
	free(s);
}

/* Metrics named `name` per layer (or of the job) as n_win x (n_layers+1)
 * arrays; the job's in column n_layers. Returns NULL if none. */
static double *
rep_metric_grid(const rep_run *rr, const char *name)
{
	const tool_hdb_result *m = &rr->t[R_METRICS];
	size_t cols = (size_t)rr->n_layers + 1;
	double *g = NULL;

	for (uint64_t i = 0; i < m->rows.n_rows; i++) {
		int64_t p, l;

		if (strcmp(tool_hdb_text(m, i, RC_NAME), name) != 0)
			continue;
		if ((p = rep_win_pos(rr, tool_hdb_int(m, i, RC_WINDOW, -1))) <
		    0)
			continue;
		l = tool_hdb_int(m, i, RC_LAYER, -1);
		if (l >= (int64_t)rr->n_layers)
			continue;
		if (g == NULL) {
			if ((g = malloc((rr->n_win + 1) * cols * sizeof(*g))) ==
			    NULL)
				return NULL;
			for (size_t k = 0; k < (rr->n_win + 1) * cols; k++)
				g[k] = NAN;
		}
		g[(size_t)p * cols +
		    (l < 0 ? rr->n_layers : (size_t)l)] = tool_hdb_real(m, i,
		    RC_VALUE);
	}
	return g;
}

/* The names of the metrics the run has, distinct, in first-seen order. */
static size_t
rep_metric_names(const rep_run *rr, const char **names, size_t max)
{
	const tool_hdb_result *m = &rr->t[R_METRICS];
	size_t n = 0;

	for (uint64_t i = 0; i < m->rows.n_rows; i++) {
		const char *nm = tool_hdb_text(m, i, RC_NAME);
		size_t k;

		for (k = 0; k < n && strcmp(names[k], nm) != 0; k++)
			;
		if (k == n && n < max)
			names[n++] = nm;
	}
	return n;
}

static void
rep_plot_metrics(const rep_emit *e, const rep_run *rr, const double *x)
{
	const char *names[16];
	size_t nn = rep_metric_names(rr, names, 16);
	double *r = rep_metric_grid(rr, "r"), *eta = rep_metric_grid(rr, "eta");
	size_t cols = (size_t)rr->n_layers + 1;
	rep_series *s = calloc(cols + 1, sizeof(*s));
	size_t ns = 0;

	if (s == NULL)
		goto out;
	if (r != NULL) {
		for (uint32_t l = 0; l <= rr->n_layers; l++) {
			snprintf(s[ns].name, sizeof(s[ns].name), "r %s",
			    l < rr->n_layers ? rep_layer_name(rr, l) : "job");
			s[ns].y = r + l;
			s[ns].stride = cols;
			ns++;
		}
		if (eta != NULL) {
			snprintf(s[ns].name, sizeof(s[ns].name), "eta");
			s[ns].y = eta + rr->n_layers;
			s[ns].stride = cols;
			s[ns].dashed = true;
			ns++;
		}
		tool_report_draw(e,
		    &(rep_axes){ .title = "Accordion: r against eta",
			.ylabel = "r",
			.y_from_zero = true },
		    x, rr->n_win, s, ns);
	}
	/* Every job-wide metric, one plot each (at most 8). */
	for (size_t k = 0, shown = 0; k < nn && shown < 8; k++) {
		double *g;
		char title[96];

		if (strcmp(names[k], "r") == 0 || strcmp(names[k], "eta") == 0)
			continue;
		if ((g = rep_metric_grid(rr, names[k])) == NULL)
			continue;
		memset(s, 0, sizeof(*s));
		snprintf(s[0].name, sizeof(s[0].name), "%s", names[k]);
		s[0].y = g + rr->n_layers;
		s[0].stride = cols;
		snprintf(title, sizeof(title), "Policy metric %s", names[k]);
		for (uint64_t i = 0; i < rr->n_win; i++) {
			if (isfinite(g[i * cols + rr->n_layers])) {
				tool_report_draw(e,
				    &(rep_axes){ .title = title,
					.ylabel = names[k] },
				    x, rr->n_win, s, 1);
				shown++;
				break;
			}
		}
		free(g);
	}
out:
	free(s);
	free(r);
	free(eta);
}

static void
rep_plot_traffic(const rep_emit *e, const rep_run *rr, const double *x)
{
	const tool_hdb_result *wi = &rr->t[R_WINFO];
	double *v = calloc(4 * (rr->n_win + 1), sizeof(*v));
	rep_series s[3] = { 0 };

	if (v == NULL)
		return;
	for (uint64_t i = 0; i < wi->rows.n_rows; i++) {
		int64_t p = rep_win_pos(rr, tool_hdb_int(wi, i, RC_WINDOW, -1));

		if (p < 0)
			continue;
		v[p * 4] = tool_hdb_real(wi, i, RC_FLOATS_SENT) * 4;
		v[p * 4 + 1] = tool_hdb_real(wi, i, RC_FLOATS_RAW) * 4;
		v[p * 4 + 2] = tool_hdb_real(wi, i, RC_STEP_MS_MEDIAN);
	}
	for (uint64_t i = 1; i < rr->n_win; i++) {
		v[i * 4] += v[(i - 1) * 4];
		v[i * 4 + 1] += v[(i - 1) * 4 + 1];
	}
	snprintf(s[0].name, sizeof(s[0].name), "sent");
	s[0].y = v;
	s[0].stride = 4;
	snprintf(s[1].name, sizeof(s[1].name), "raw (uncompressed)");
	s[1].y = v + 1;
	s[1].stride = 4;
	s[1].dashed = true;
	tool_report_draw(e,
	    &(rep_axes){ .title = "Gradient bytes sent vs raw, cumulative, "
				  "all ranks",
		.ylabel = "bytes",
		.y_from_zero = true,
		.yfmt = com_fmt_bytes },
	    x, rr->n_win, s, 2);
	snprintf(s[0].name, sizeof(s[0].name), "step time");
	s[0].y = v + 2;
	tool_report_draw(e,
	    &(rep_axes){ .title = "Step time (median over ranks)",
		.ylabel = "ms",
		.y_from_zero = true },
	    x, rr->n_win, s, 1);
	for (uint64_t i = 0; i < rr->n_win; i++) {
		v[i * 4] = rr->act[i];
		v[i * 4 + 1] = rr->act_raw[i];
	}
	snprintf(s[0].name, sizeof(s[0].name), "held (COMET)");
	s[0].y = v;
	snprintf(s[1].name, sizeof(s[1].name), "uncompressed");
	bool any = false;
	for (uint64_t i = 0; i < rr->n_win; i++)
		any = any || isfinite(rr->act[i]);
	if (any)
		tool_report_draw(e,
		    &(rep_axes){ .title = "Activation bytes held for "
					  "backward, per step",
			.ylabel = "bytes",
			.y_from_zero = true,
			.yfmt = com_fmt_bytes },
		    x, rr->n_win, s, 2);
	free(v);
}

/* Did training get faster: the median step of the windows that
 * compressed against that of this run's windows sent raw (same machine,
 * link and job), or that every window went raw. */
static void
rep_speed(const rep_emit *o, const rep_sums *s)
{
	char a[32], b[32];

	if (s->comp_windows > 0 && s->raw_windows > 0) {
		double r = s->step_raw_med / s->step_comp_med;

		tool_report_dur(s->step_comp_med, a, sizeof(a));
		tool_report_dur(s->step_raw_med, b, sizeof(b));
		tool_report_printf(o,
		    "  compressing %s (median of %" PRIu64 " window%s) against "
		    "raw %s (median of %" PRIu64 " window%s of this run sent "
		    "raw): %.2fx %s\n",
		    a, s->comp_windows, s->comp_windows == 1 ? "" : "s", b,
		    s->raw_windows, s->raw_windows == 1 ? "" : "s",
		    r >= 1 ? r : 1 / r, r >= 1 ? "faster" : "slower");
	} else if (s->raw_windows > 0 && s->floats_raw > 0) {
		tool_report_printf(o,
		    "  every window was sent raw: nothing compressed to "
		    "compare with\n");
	} else if (s->comp_windows > 0) {
		tool_report_printf(o,
		    "  no window of this run was sent raw to compare with "
		    "(bellows.torch's attach(raw_windows=1) measures "
		    "one)\n");
	}
}

bool
tool_report_is_eval(const tool_hdb_result *wi, uint64_t i)
{
	double acc = tool_hdb_real(wi, i, RC_EVAL_ACCURACY);

	return isfinite(acc) && acc > 0;
}

void
tool_report_evals(const rep_run *rr, rep_evals *e)
{
	const tool_hdb_result *wi = &rr->t[R_WINFO];

	*e = (rep_evals){ 0 };
	for (uint64_t i = 0; i < wi->rows.n_rows; i++) {
		if (!tool_report_is_eval(wi, i))
			continue;
		if (e->n == 0 ||
		    tool_hdb_real(wi, i, RC_EVAL_ACCURACY) >
			tool_hdb_real(wi, e->best, RC_EVAL_ACCURACY))
			e->best = i;
		e->last = i;
		e->n++;
	}
}

/* The accuracy and the loss the trainer reported against the window
 * they ended, as two HTML plots (evaluated windows only). */
static void
rep_plot_accuracy(const rep_emit *e, const rep_run *rr, uint64_t n)
{
	const tool_hdb_result *wi = &rr->t[R_WINFO];
	double *v = calloc(3 * n + 1, sizeof(*v));
	rep_series s = { .stride = 1 };
	uint64_t k = 0;

	if (v == NULL)
		return;
	for (uint64_t i = 0; i < wi->rows.n_rows && k < n; i++) {
		if (!tool_report_is_eval(wi, i))
			continue;
		v[k] = (double)tool_hdb_int(wi, i, RC_WINDOW, 0);
		v[n + k] = 100.0 * tool_hdb_real(wi, i, RC_EVAL_ACCURACY);
		v[2 * n + k] = tool_hdb_real(wi, i, RC_EVAL_LOSS);
		k++;
	}
	snprintf(s.name, sizeof(s.name), "accuracy");
	s.y = v + n;
	tool_report_draw(e,
	    &(rep_axes){ .title = "Test accuracy the trainer evaluated",
		.ylabel = "%" },
	    v, k, &s, 1);
	snprintf(s.name, sizeof(s.name), "loss");
	s.y = v + 2 * n;
	tool_report_draw(e,
	    &(rep_axes){ .title = "Test loss the trainer evaluated",
		.ylabel = "loss",
		.y_from_zero = true },
	    v, k, &s, 1);
	free(v);
}

/* The Accuracy section: the last and best evaluation and a table of them
 * (at most REP_WINDOWS_MAX rows, then every n-th and the last). */
static void
rep_write_accuracy(const rep_emit *o, const rep_run *rr)
{
	const tool_hdb_result *wi = &rr->t[R_WINFO];
	rep_evals e;
	uint64_t every, k = 0;
	char a[64];

	tool_report_section(o, "Accuracy (the trainer's evaluations)");
	tool_report_evals(rr, &e);
	if (e.n == 0) {
		tool_report_printf(o,
		    "  not recorded: the trainer reported no evaluation "
		    "(bellows_agent_eval,\n  Agent.evaluation in Python; "
		    "see docs/report.md)\n");
		return;
	}
	tool_report_num(tool_hdb_real(wi, e.last, RC_EVAL_LOSS), a, sizeof(a));
	tool_report_printf(o,
	    "  %" PRIu64 " evaluations; last %.2f%% (loss %s) after window "
	    "%" PRId64 " (epoch %" PRId64 ", step %" PRId64 ")\n",
	    e.n, 100.0 * tool_hdb_real(wi, e.last, RC_EVAL_ACCURACY), a,
	    tool_hdb_int(wi, e.last, RC_WINDOW, 0),
	    tool_hdb_int(wi, e.last, RC_EPOCH, 0),
	    tool_hdb_int(wi, e.last, RC_LAST_STEP, 0));
	tool_report_printf(o,
	    "  best %.2f%% after window %" PRId64 " (epoch %" PRId64 ")\n",
	    100.0 * tool_hdb_real(wi, e.best, RC_EVAL_ACCURACY),
	    tool_hdb_int(wi, e.best, RC_WINDOW, 0),
	    tool_hdb_int(wi, e.best, RC_EPOCH, 0));
	tool_report_printf(o, "  %8s %6s %10s %9s %10s\n", "window", "epoch",
	    "step", "accuracy", "loss");
	every = (e.n + REP_WINDOWS_MAX - 1) / REP_WINDOWS_MAX;
	for (uint64_t i = 0; i < wi->rows.n_rows; i++) {
		if (!tool_report_is_eval(wi, i))
			continue;
		k++;
		if (every > 1 && (k - 1) % every != 0 && i != e.last)
			continue;
		tool_report_num(tool_hdb_real(wi, i, RC_EVAL_LOSS), a,
		    sizeof(a));
		tool_report_printf(o,
		    "  %8" PRId64 " %6" PRId64 " %10" PRId64 " %8.2f%% %10s\n",
		    tool_hdb_int(wi, i, RC_WINDOW, 0),
		    tool_hdb_int(wi, i, RC_EPOCH, 0),
		    tool_hdb_int(wi, i, RC_LAST_STEP, 0),
		    100.0 * tool_hdb_real(wi, i, RC_EVAL_ACCURACY), a);
	}
	tool_report_figures(o, true);
	rep_plot_accuracy(o, rr, e.n);
	tool_report_figures(o, false);
}

/* The Configuration section, last: the policy file the run was decided
 * under, as the history holds it. */
static void
rep_write_config(const rep_emit *o, const rep_run *rr)
{
	const tool_hdb_result *pf = &rr->t[R_FILES];
	const char *hash = tool_hdb_text(&rr->t[R_RUNS], 0, RC_CONFIG_HASH);

	tool_report_section(o, "Configuration");
	for (uint64_t i = 0; i < pf->rows.n_rows; i++) {
		if (strcmp(tool_hdb_text(pf, i, RC_HASH), hash) != 0)
			continue;
		tool_report_printf(o, "policy file %s (hash %s):\n",
		    tool_hdb_text(pf, i, RC_PATH), hash);
		tool_report_printf(o, "%s", tool_hdb_text(pf, i, RC_TEXT));
		hash = NULL;
		break;
	}
	if (hash != NULL)
		tool_report_printf(o,
		    "policy file hash %s: its text is not in the history\n",
		    hash);
}

/* The Summary section, first: what the run bought, from the sections
 * below: the last evaluation, the time, the step against raw where this
 * run measured both, the bytes, the activation memory. */
static void
rep_write_summary(const rep_emit *o, const rep_sums *s)
{
	char a[64], b[64], c[64];

	tool_report_section(o, "Summary (what the run bought)");
	if (isfinite(s->accuracy)) {
		tool_report_num(s->eval_loss, a, sizeof(a));
		tool_report_printf(o,
		    "  final test accuracy %.2f%% (loss %s)\n",
		    100.0 * s->accuracy, a);
	} else {
		tool_report_printf(o,
		    "  final test accuracy: not reported by the trainer\n");
	}
	tool_report_dur(s->run_ms, a, sizeof(a));
	tool_report_printf(o, "  wall time %s (the run's start to its end)\n",
	    a);
	tool_report_dur(s->step_med, a, sizeof(a));
	tool_report_printf(o, "  step time %s (median over windows)\n", a);
	rep_speed(o, s);
	com_fmt_bytes(s->floats_sent * 4, a, sizeof(a));
	com_fmt_bytes(s->floats_raw * 4, b, sizeof(b));
	com_fmt_bytes((s->floats_raw - s->floats_sent) * 4, c, sizeof(c));
	if (s->floats_raw > 0 && s->floats_sent < s->floats_raw)
		tool_report_printf(o,
		    "  gradients: sent %s of %s raw (%.1fx less); %s "
		    "saved\n",
		    a, b, s->floats_raw / fmax(s->floats_sent, 1), c);
	else
		tool_report_printf(o,
		    "  gradients: sent %s, nothing compressed\n", a);
	if (isfinite(s->act_med)) {
		com_fmt_bytes(s->act_med, a, sizeof(a));
		com_fmt_bytes(s->act_raw_med, b, sizeof(b));
		tool_report_printf(o,
		    "  activations: held %s per step against %s "
		    "uncompressed\n",
		    a, b);
	}
}

/* The Layers section: per layer its shape, the levels applied (weighted
 * by steps, the last) and decided, error bound, norm and changes; in
 * HTML the level and norm plots. */
static void
rep_write_layers(const rep_emit *o, const rep_run *rr, const double *x)
{
	char a[64];

	tool_report_section(o,
	    "Layers (levels applied, as sent, weighted by the steps of each "
	    "window)");
	tool_report_printf(o, "%-24s %10s %10s %8s %8s %8s %12s %12s %8s\n",
	    "layer", "shape", "numel", "applied", "last", "decided",
	    "error_bound", "norm_median", "changes");
	for (uint32_t l = 0; l < rr->n_layers; l++) {
		rep_layer_sum ls;
		char e[32], n[32], lv[32], ll[32], dl[32];

		tool_report_layer(rr, l, &ls);
		tool_report_num(ls.eb_tw, e, sizeof(e));
		tool_report_num(ls.norm_med, n, sizeof(n));
		tool_report_num(ls.level_tw, lv, sizeof(lv));
		tool_report_num(ls.level_last, ll, sizeof(ll));
		tool_report_num(ls.decided_last, dl, sizeof(dl));
		com_fmt_count(tool_hdb_real(&rr->t[R_LAYERS], l, RC_NUMEL), a,
		    sizeof(a));
		tool_report_printf(o,
		    "%-24s %10s %10s %8s %8s %8s %12s %12s %8" PRIu64 "\n",
		    tool_hdb_text(&rr->t[R_LAYERS], l, RC_NAME),
		    tool_hdb_text(&rr->t[R_LAYERS], l, RC_SHAPE), a, lv, ll, dl,
		    e, n, ls.changes);
	}
	if (rr->applied_missing > 0)
		tool_report_printf(o,
		    "note: %" PRIu64 " of %" PRIu64 " layer windows recorded "
		    "no applied level (a history or agents older than it): "
		    "the level decided stands in for them\n",
		    rr->applied_missing, rr->level_rows);
	tool_report_figures(o, true);
	rep_plots_levels(o, rr, x);
	tool_report_figures(o, false);
}

/* The Decisions section: every decision that changed a knob (at most
 * REP_DECISIONS_MAX), its changes and why. */
static void
rep_write_decisions(const rep_emit *o, const rep_run *rr, const rep_sums *s)
{
	const tool_hdb_result *dec = &rr->t[R_DEC];
	int64_t t0 = tool_hdb_int(&rr->t[R_RUNS], 0, RC_STARTED_WALL_MS, 0);
	char a[64];

	tool_report_section(o, "Decisions that changed a knob (changes only)");
	tool_report_printf(o,
	    "%" PRIu64 " decisions, %" PRIu64 " changed a knob\n", s->decisions,
	    s->changed);
	for (uint64_t i = 0, listed = 0; i < dec->rows.n_rows; i++) {
		int64_t seq = tool_hdb_int(dec, i, RC_SEQ, -1);
		uint64_t lo;

		if (rep_chg_range(rr, seq, &lo) == lo)
			continue;
		if (listed++ == REP_DECISIONS_MAX) {
			tool_report_printf(o,
			    "  ... and %" PRIu64 " more (bellows history "
			    "decisions --changed --run %" PRId64 " lists "
			    "all)\n",
			    s->changed - REP_DECISIONS_MAX, rr->run.id);
			break;
		}
		tool_report_dur((double)(tool_hdb_int(dec, i, RC_WALL_MS, t0) -
				    t0),
		    a, sizeof(a));
		tool_report_printf(o,
		    "  decision %" PRId64 ", for window %" PRId64
		    " from step %" PRId64 " (+%s, %s):\n",
		    seq, tool_hdb_int(dec, i, RC_WINDOW, 0),
		    tool_hdb_int(dec, i, RC_APPLY_STEP, 0), a,
		    tool_hdb_text(dec, i, RC_SOURCE));
		rep_changes(o, rr, seq);
		tool_report_printf(o, "      why: %s%s%s\n",
		    tool_hdb_text(dec, i, RC_POLICY),
		    tool_hdb_text(dec, i, RC_POLICY)[0] != '\0' ? ": " : "",
		    tool_hdb_text(dec, i, RC_REASON));
	}
}

/* The Learning rate section: the windows the LR changed in. */
static void
rep_write_lr(const rep_emit *o, const rep_run *rr)
{
	const tool_hdb_result *wi = &rr->t[R_WINFO];
	double prev = NAN;
	char a[64];

	tool_report_section(o, "Learning rate (changes only)");
	for (uint64_t i = 0; i < wi->rows.n_rows; i++) {
		double lr = tool_hdb_real(wi, i, RC_LR);

		if (i > 0 && (lr == prev || (isnan(lr) && isnan(prev))))
			continue;
		tool_report_num(lr, a, sizeof(a));
		tool_report_printf(o, "  from window %" PRId64 ": lr %s\n",
		    tool_hdb_int(wi, i, RC_WINDOW, 0), a);
		prev = lr;
	}
	if (wi->rows.n_rows == 0)
		tool_report_printf(o, "  no window recorded\n");
}

/* The first lines: the page around the report, which run of which
 * job in which file, how big, when it started. Returns 0, or
 * BELLOWS_ENOMEM with nothing written. */
static int
rep_write_head(const rep_emit *o, const rep_run *rr, const rep_sums *s)
{
	int64_t t0 = tool_hdb_int(&rr->t[R_RUNS], 0, RC_STARTED_WALL_MS, 0);
	char *title, *heading, a[64], b[64];

	title = tool_report_format("bellows report: run %" PRId64 " of %s",
	    rr->run.id, rr->run.job);
	heading = tool_report_format("Run %" PRId64 " of job %s", rr->run.id,
	    rr->run.job);
	if (title == NULL || heading == NULL) {
		free(title);
		free(heading);
		return BELLOWS_ENOMEM;
	}
	tool_report_open(o, title, heading);
	free(title);
	free(heading);
	rep_time(t0, a, sizeof(a));
	tool_report_dur(s->wall_ms, b, sizeof(b));
	tool_report_printf(o,
	    "run %" PRId64 " of job '%s' in %s: %" PRId64 " ranks, %" PRIu32
	    " layers, %" PRIu64 " windows (%" PRIu64
	    " closed incomplete), %s\n",
	    rr->run.id, rr->run.job, rr->path, rr->run.world, rr->n_layers,
	    rr->n_win, s->incomplete, rr->run.live ? "live" : "ended");
	tool_report_printf(o, "started %s, windows closed over %s\n", a, b);
	return 0;
}

/* The Policy metrics section: per metric its count, range and last
 * value; in HTML Accordion's r against eta and the job-wide metrics. */
static void
rep_write_metrics(const rep_emit *o, const rep_run *rr, const double *x)
{
	char a[64], b[64], c[64];

	tool_report_section(o, "Policy metrics (what the policies computed)");
	const char *names[64];
	size_t nn = rep_metric_names(rr, names, 64);

	if (nn == 0)
		tool_report_printf(o,
		    "  none recorded (this run's policies "
		    "report no metrics)\n");
	for (size_t k = 0; k < nn; k++) {
		const tool_hdb_result *m = &rr->t[R_METRICS];
		double lo = INFINITY, hi = -INFINITY, last = NAN;
		uint64_t cnt = 0;

		for (uint64_t i = 0; i < m->rows.n_rows; i++) {
			double v = tool_hdb_real(m, i, RC_VALUE);

			if (strcmp(tool_hdb_text(m, i, RC_NAME), names[k]) != 0)
				continue;
			lo = fmin(lo, v);
			hi = fmax(hi, v);
			last = v;
			cnt++;
		}
		tool_report_num(lo, a, sizeof(a));
		tool_report_num(hi, b, sizeof(b));
		tool_report_num(last, c, sizeof(c));
		tool_report_printf(o,
		    "  %-20s %6" PRIu64 " values, min %s, max %s, "
		    "last %s\n",
		    names[k], cnt, a, b, c);
	}
	tool_report_figures(o, true);
	rep_plot_metrics(o, rr, x);
	tool_report_figures(o, false);
}

/* The Gradient traffic section: floats and bytes sent against raw. */
static void
rep_write_traffic(const rep_emit *o, const rep_sums *s)
{
	char a[64], b[64], c[64], d[64];

	tool_report_section(o, "Gradient traffic (all ranks, 4-byte floats)");
	com_fmt_count(s->floats_sent, a, sizeof(a));
	com_fmt_count(s->floats_raw, b, sizeof(b));
	com_fmt_bytes(s->floats_sent * 4, c, sizeof(c));
	com_fmt_bytes(s->floats_raw * 4, d, sizeof(d));
	tool_report_printf(o, "  sent %s floats (%s) vs raw %s floats (%s)\n",
	    a, c, b, d);
	com_fmt_bytes((s->floats_raw - s->floats_sent) * 4, a, sizeof(a));
	tool_report_printf(o, "  saved %s: %.1f%% of raw, %.2fx less sent\n", a,
	    s->floats_raw > 0
		? 100.0 * (s->floats_raw - s->floats_sent) / s->floats_raw
		: 0.0,
	    s->floats_sent > 0 ? s->floats_raw / s->floats_sent : 1.0);
}

/* The Step time section: the run's steps against its raw windows and a
 * table of windows (at most REP_WINDOWS_MAX rows, then every n-th and
 * the last); in HTML the traffic, step and activation plots. */
static void
rep_write_steps(const rep_emit *o, const rep_run *rr, const rep_sums *s,
    const double *x)
{
	const tool_hdb_result *wi = &rr->t[R_WINFO];
	uint64_t every;
	char a[64], b[64], c[64];

	tool_report_section(o, "Step time (median over ranks, per window)");
	tool_report_dur(s->step_med, a, sizeof(a));
	tool_report_dur(s->step_min, b, sizeof(b));
	tool_report_dur(s->step_max, c, sizeof(c));
	tool_report_printf(o,
	    "  median %s, fastest window %s, slowest window %s\n", a, b, c);
	rep_speed(o, s);
	tool_report_printf(o, "  %8s %10s %12s %12s %10s\n", "window", "step",
	    "sent", "raw", "lr");
	every = (wi->rows.n_rows + REP_WINDOWS_MAX - 1) / REP_WINDOWS_MAX;
	if (every > 1)
		tool_report_printf(o,
		    "  (every %" PRIu64 "th window and the last; bellows "
		    "history windows --run %" PRId64 " lists all)\n",
		    every, rr->run.id);
	for (uint64_t i = 0; i < wi->rows.n_rows; i++) {
		char e[32];

		if (every > 1 && i % every != 0 && i + 1 != wi->rows.n_rows)
			continue;

		tool_report_dur(tool_hdb_real(wi, i, RC_STEP_MS_MEDIAN), a,
		    sizeof(a));
		com_fmt_bytes(tool_hdb_real(wi, i, RC_FLOATS_SENT) * 4, b,
		    sizeof(b));
		com_fmt_bytes(tool_hdb_real(wi, i, RC_FLOATS_RAW) * 4, c,
		    sizeof(c));
		tool_report_num(tool_hdb_real(wi, i, RC_LR), e, sizeof(e));
		tool_report_printf(o, "  %8" PRId64 " %10s %12s %12s %10s\n",
		    tool_hdb_int(wi, i, RC_WINDOW, 0), a, b, c, e);
	}
	tool_report_figures(o, true);
	rep_plot_traffic(o, rr, x);
	tool_report_figures(o, false);
}

/* The Activation memory section: what COMET held against uncompressed,
 * and the largest per-rank byte statistics. */
static void
rep_write_activations(const rep_emit *o, const rep_sums *s)
{
	char a[64], b[64];

	tool_report_section(o, "Activation memory (COMET)");
	if (isfinite(s->act_med)) {
		com_fmt_bytes(s->act_med, a, sizeof(a));
		com_fmt_bytes(s->act_raw_med, b, sizeof(b));
		tool_report_printf(o,
		    "  activations held for backward: %s per step (median "
		    "over windows) vs %s uncompressed (%.2fx less)\n",
		    a, b, s->act_med > 0 ? s->act_raw_med / s->act_med : 1.0);
	} else {
		tool_report_printf(o,
		    "  not measured (no layer reported activation "
		    "statistics)\n");
	}
	for (int k = 0; k < COM_N_TSTATS; k++) {
		if (!rep_peak_stat(&com_timing_stat_table[k]) ||
		    s->peak[k] <= 0)
			continue;
		com_fmt_bytes(s->peak[k], a, sizeof(a));
		tool_report_printf(o, "  %s (%s), largest: %s\n",
		    com_timing_stat_table[k].doc, com_timing_stat_table[k].name,
		    a);
	}
}

/* The whole report, section by section, through o. */
static void
rep_write(const rep_emit *o, const rep_run *rr)
{
	double *x = calloc(rr->n_win + 1, sizeof(*x));
	rep_sums s;

	if (x == NULL)
		return;
	for (uint64_t i = 0; i < rr->n_win; i++)
		x[i] = (double)rr->win[i];
	tool_report_sum(rr, &s);
	if (rep_write_head(o, rr, &s) == 0) {
		rep_write_summary(o, &s);
		rep_write_accuracy(o, rr);
		rep_write_layers(o, rr, x);
		rep_write_decisions(o, rr, &s);
		rep_write_lr(o, rr);
		rep_write_metrics(o, rr, x);
		rep_write_traffic(o, &s);
		rep_write_steps(o, rr, &s, x);
		rep_write_activations(o, &s);
		rep_write_config(o, rr);
		tool_report_close(o);
	}
	free(x);
}

/* ---- JSON ------------------------------------------------------------- */

/* A number, exact, or null when not finite (not measured). */
static void
rep_jval(FILE *f, double v)
{
	if (isfinite(v))
		(void)tool_metrics_put_number(f, v);
	else
		fputs("null", f);
}

static void
rep_jnum(FILE *f, const char *name, double v, bool more)
{
	fprintf(f, "  \"%s\": ", name);
	rep_jval(f, v);
	fputs(more ? ",\n" : "\n", f);
}

static void
rep_jstr(FILE *f, const char *s)
{
	(void)tool_cellfmt_json_string(f, s, strlen(s));
}

/* The report's numbers, exact, as one JSON object. */
static void
rep_json(FILE *f, const rep_run *rr)
{
	const tool_hdb_result *run = &rr->t[R_RUNS], *pf = &rr->t[R_FILES];
	const tool_hdb_result *wi = &rr->t[R_WINFO];
	const char *hash = tool_hdb_text(run, 0, RC_CONFIG_HASH);
	rep_sums s;
	rep_evals ev;

	tool_report_sum(rr, &s);
	fputs("{\n  \"db\": ", f);
	rep_jstr(f, rr->path);
	fputs(",\n  \"job\": ", f);
	rep_jstr(f, rr->run.job);
	fprintf(f, ",\n  \"live\": %s,\n", rr->run.live ? "true" : "false");
	rep_jnum(f, "run", (double)rr->run.id, true);
	rep_jnum(f, "started_wall_ms", (double)rr->run.started_wall_ms, true);
	rep_jnum(f, "ranks", (double)rr->run.world, true);
	rep_jnum(f, "layers", rr->n_layers, true);
	rep_jnum(f, "windows", (double)rr->n_win, true);
	rep_jnum(f, "windows_incomplete", (double)s.incomplete, true);
	rep_jnum(f, "decisions", (double)s.decisions, true);
	rep_jnum(f, "decisions_changed", (double)s.changed, true);
	rep_jnum(f, "floats_sent", s.floats_sent, true);
	rep_jnum(f, "floats_raw", s.floats_raw, true);
	rep_jnum(f, "bytes_sent", s.floats_sent * 4, true);
	rep_jnum(f, "bytes_raw", s.floats_raw * 4, true);
	rep_jnum(f, "bytes_saved", (s.floats_raw - s.floats_sent) * 4, true);
	rep_jnum(f, "step_ms_median", s.step_med, true);
	rep_jnum(f, "step_ms_fastest_window", s.step_min, true);
	rep_jnum(f, "step_ms_raw_windows", s.step_raw_med, true);
	rep_jnum(f, "raw_windows", (double)s.raw_windows, true);
	rep_jnum(f, "step_ms_compressed_windows", s.step_comp_med, true);
	rep_jnum(f, "compressed_windows", (double)s.comp_windows, true);
	rep_jnum(f, "speedup_vs_raw",
	    s.step_comp_med > 0 ? s.step_raw_med / s.step_comp_med : NAN, true);
	rep_jnum(f, "step_ms_slowest_window", s.step_max, true);
	rep_jnum(f, "windows_wall_ms", s.wall_ms, true);
	rep_jnum(f, "act_bytes_median", s.act_med, true);
	rep_jnum(f, "act_raw_bytes_median", s.act_raw_med, true);
	tool_report_evals(rr, &ev);
	rep_jnum(f, "accuracy",
	    ev.n > 0 ? tool_hdb_real(wi, ev.last, RC_EVAL_ACCURACY) : NAN,
	    true);
	rep_jnum(f, "accuracy_best",
	    ev.n > 0 ? tool_hdb_real(wi, ev.best, RC_EVAL_ACCURACY) : NAN,
	    true);
	rep_jnum(f, "eval_loss",
	    ev.n > 0 ? tool_hdb_real(wi, ev.last, RC_EVAL_LOSS) : NAN, true);
	fputs("  \"evaluations\": [", f);
	for (uint64_t i = 0, k = 0; i < wi->rows.n_rows; i++) {
		if (!tool_report_is_eval(wi, i))
			continue;
		fprintf(f,
		    "%s\n    {\"window\": %" PRId64 ", \"epoch\": %" PRId64
		    ", \"last_step\": %" PRId64 ", \"accuracy\": ",
		    k++ > 0 ? "," : "", tool_hdb_int(wi, i, RC_WINDOW, 0),
		    tool_hdb_int(wi, i, RC_EPOCH, 0),
		    tool_hdb_int(wi, i, RC_LAST_STEP, 0));
		rep_jval(f, tool_hdb_real(wi, i, RC_EVAL_ACCURACY));
		fputs(", \"loss\": ", f);
		rep_jval(f, tool_hdb_real(wi, i, RC_EVAL_LOSS));
		fputs("}", f);
	}
	fputs(ev.n > 0 ? "\n  ],\n" : "],\n", f);
	fputs("  \"config\": ", f);
	for (uint64_t i = 0; i <= pf->rows.n_rows; i++) {
		if (i == pf->rows.n_rows) {
			fputs("null", f);
			break;
		}
		if (strcmp(tool_hdb_text(pf, i, RC_HASH), hash) != 0)
			continue;
		fputs("{\"hash\": ", f);
		rep_jstr(f, hash);
		fputs(", \"path\": ", f);
		rep_jstr(f, tool_hdb_text(pf, i, RC_PATH));
		fputs(", \"text\": ", f);
		rep_jstr(f, tool_hdb_text(pf, i, RC_TEXT));
		fputs("}", f);
		break;
	}
	fprintf(f, ",\n  \"applied_missing\": %" PRIu64, rr->applied_missing);
	fputs(",\n  \"layer_summary\": [", f);
	for (uint32_t l = 0; l < rr->n_layers; l++) {
		const tool_hdb_result *ly = &rr->t[R_LAYERS];
		rep_layer_sum ls;

		tool_report_layer(rr, l, &ls);
		fputs(l > 0 ? ",\n    {\"name\": " : "\n    {\"name\": ", f);
		rep_jstr(f, tool_hdb_text(ly, l, RC_NAME));
		fputs(", \"shape\": ", f);
		rep_jstr(f, tool_hdb_text(ly, l, RC_SHAPE));
		fprintf(f,
		    ", \"numel\": %" PRId64 ", \"windows\": %" PRIu64
		    ", \"applied_changes\": %" PRIu64,
		    tool_hdb_int(ly, l, RC_NUMEL, 0), ls.windows, ls.changes);
		fputs(", \"applied_weighted\": ", f);
		rep_jval(f, ls.level_tw);
		fputs(", \"applied_last\": ", f);
		rep_jval(f, ls.level_last);
		fputs(", \"decided_last\": ", f);
		rep_jval(f, ls.decided_last);
		fputs(", \"error_bound_weighted\": ", f);
		rep_jval(f, ls.eb_tw);
		fputs(", \"norm_median\": ", f);
		rep_jval(f, ls.norm_med);
		fputs("}", f);
	}
	fputs("\n  ]\n}\n", f);
}

/* ---- bellows report --------------------------------------------------- */

typedef struct report_opts {
	com_args_shared sh; /* --db, --run, --job */
	const char *html;   /* --html FILE */
	bool json;          /* --json */
} report_opts;

static const report_opts report_defaults = {
	.sh = { .db = TOOL_HDB_DEFAULT_PATH },
};

static const com_opt report_opt_rows[] = {
	{ .name = "html",
	    .arg = "FILE",
	    .help = "write the report as one self-contained HTML page "
		    "with plots (inline SVG, no script, no network)",
	    .kind = COM_OPT_TEXT,
	    .at = offsetof(report_opts, html),
	    .min = 1 },
	{ .name = "json",
	    .help = "print the report's numbers, exact, as one JSON object "
		    "instead of the text",
	    .kind = COM_OPT_FLAG,
	    .at = offsetof(report_opts, json) },
};

static const com_args_cmd report_cmd = {
	.name = "report",
	.shared = COM_ARGS_TAKES(COM_ARGS_DB) |
	    COM_ARGS_TAKES(COM_ARGS_RUN) | COM_ARGS_TAKES(COM_ARGS_JOB),
	.shared_at = offsetof(report_opts, sh),
	.notes = {
		[COM_ARGS_RUN] = "with --job, its latest; a run of another "
				  "job is refused",
		[COM_ARGS_JOB] = "the job whose run it is",
	},
	.opts = report_opt_rows,
	.n_opts = sizeof(report_opt_rows) / sizeof(report_opt_rows[0]),
	.usage = tool_report_usage,
};

void
tool_report_usage(FILE *f)
{
	fputs("usage: bellows report [--db FILE] [--run ID | --job NAME] "
	      "[--html FILE] [--json]\n"
	      "\n"
	      "  A run's story from bellowsd's history: its configuration,\n"
	      "  the decisions that changed a knob and why, the LR, what the\n"
	      "  policies computed, gradient bytes sent vs raw, step times,\n"
	      "  activation memory. Sizes and durations are rounded for\n"
	      "  people; `bellows history` and `bellows export` give exact\n"
	      "  numbers. See docs/report.md.\n"
	      "\n",
	    f);
	com_args_help(f, &report_cmd, &report_defaults);
}

int
tool_report_main(int argc, char **argv)
{
	report_opts o;
	rep_run rr;
	int next, rc;
	FILE *hf;

	o = report_defaults;
	if ((rc = com_args_parse(&report_cmd, argc, argv, &o, &next)) >= 0)
		return rc;
	if (tool_report_run_load("report", o.sh.db,
		o.sh.run != 0 ? o.sh.run : TOOL_HDB_NONE, o.sh.job, true,
		&rr) != 0)
		return 1;
	rc = 0;
	if (o.html != NULL) {
		/* The page only: a bad path fails before anything is
		 * written, and stdout stays empty. */
		if ((hf = fopen(o.html, "w")) == NULL) {
			fprintf(stderr, "bellows report: %s: %s\n", o.html,
			    strerror(errno));
			rc = 1;
		} else {
			rep_write(&(rep_emit){ .ops = &tool_report_html_ops,
				      .f = hf },
			    &rr);
			if (ferror(hf) | (fclose(hf) != 0)) {
				fprintf(stderr,
				    "bellows report: %s: write error\n",
				    o.html);
				rc = 1;
			}
		}
		tool_report_run_fini(&rr);
		return rc;
	}
	if (o.json)
		rep_json(stdout, &rr);
	else
		rep_write(&(rep_emit){ .ops = &tool_report_text_ops,
			      .f = stdout },
		    &rr);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "bellows report: cannot write the output\n");
		rc = 1;
	}
	tool_report_run_fini(&rr);
	return rc;
}
