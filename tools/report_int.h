/* report_int - what the files of `bellows report` share, private to
 * tools/: a run in memory (rep_run) and its sums, the numbers formatted
 * for people, HTML escaping, the SVG plot and the emitter a report is
 * written through. report.c owns loading a run, the sections of the
 * report and its JSON; report_emit.c owns the two forms (text, HTML) the
 * sections are written in; report_html.c owns the SVG plot;
 * report_compare.c owns `bellows history compare`. Nothing here is
 * thread-safe or needs to be: each command runs on the main thread.
 */
#ifndef BELLOWS_TOOLS_REPORT_INT_H
#define BELLOWS_TOOLS_REPORT_INT_H

#include "client/historydb.h"
#include "client/historyrows.h"
#include "common/stat_table.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define REP_N_TABLES 8  /* tables a report reads, see rep_tables */
#define REP_LEGEND   12 /* series named in a plot's legend */

/* A row of decision_changes and its decision, to find a decision's
 * changes by binary search. */
typedef struct rep_chg {
	int64_t seq;  /* decisions.seq */
	uint64_t row; /* row of decision_changes */
} rep_chg;

/* The columns of the tables a report reads (tool_report_cols), read
 * by name once per table: a file older than a column reads it as NULL. */
enum {
	RC_APPLY_STEP,
	RC_CLOSED_WALL_MS,
	RC_COMPLETE,
	RC_CONFIG_HASH,
	RC_ENDED_WALL_MS,
	RC_EPOCH,
	RC_EVAL_ACCURACY,
	RC_EVAL_LOSS,
	RC_FIRST_STEP,
	RC_FLOATS_RAW,
	RC_FLOATS_SENT,
	RC_HASH,
	RC_IDX,
	RC_KNOB,
	RC_LAST_STEP,
	RC_LAYER,
	RC_LR,
	RC_NAME,
	RC_NEW,
	RC_NUMEL,
	RC_OLD,
	RC_PATH,
	RC_POLICY,
	RC_REASON,
	RC_SEQ,
	RC_SHAPE,
	RC_SOURCE,
	RC_STARTED_WALL_MS,
	RC_STEP_MS_MEDIAN,
	RC_TEXT,
	RC_VALUE,
	RC_WALL_MS,
	RC_WINDOW,
	RC_N,
};

typedef struct rep_run {
	const char *path;                /* the database file (borrowed) */
	tool_hdb_run run;                /* which run */
	tool_hdb_result t[REP_N_TABLES]; /* its tables, as rep_tables;
					  * windows stays empty: it is
					  * streamed into the arrays below */
	struct rep_chg *chg;             /* decision_changes' rows by seq */
	uint32_t n_layers;               /* rows of layers */
	uint64_t n_win;                  /* rows of window_info */
	int64_t *win;                    /* n_win window indices */
	double *steps;                   /* n_win steps per window */
	double *level;                   /* n_win x n_layers: the level
					  * applied, the decided one where the
					  * row has none; NAN: no row */
	double *decided;                 /* same, the level decided */
	uint64_t level_rows;             /* cells of level with a row */
	uint64_t applied_missing;        /* of those, rows without an applied
					  * level (a history or agents older
					  * than it): the decided one stands
					  * in */
	double *eb;                      /* same, error bound */
	double *norm;                    /* same, grad_norm_mean */
	double *act;                     /* n_win: activation bytes per step,
					  * summed over layers; NAN: none */
	double *act_raw;                 /* n_win: same, uncompressed */
} rep_run;

enum {
	R_RUNS,
	R_LAYERS,
	R_WINFO,
	R_WINDOWS,
	R_METRICS,
	R_DEC,
	R_CHG,
	R_FILES
};

typedef struct rep_sums {
	double floats_sent;        /* summed over windows and ranks */
	double floats_raw;         /* same, uncompressed */
	double step_med;           /* median over windows of step_ms_median */
	double step_raw_med;       /* the same over the windows sent raw
				    * (floats_sent >= floats_raw): the
				    * run's own raw step; NAN: none */
	double step_comp_med;      /* ... over the windows that compressed;
				    * NAN: none */
	double accuracy;           /* the last evaluation's (0..1); NAN:
				    * none */
	double eval_loss;          /* its loss; NAN: none */
	uint64_t raw_windows;      /* windows behind step_raw_med */
	uint64_t comp_windows;     /* windows behind step_comp_med */
	double step_min;           /* fastest window */
	double step_max;           /* slowest window */
	double wall_ms;            /* first window closed to last */
	double run_ms;             /* the run's start to its end, or to its
				    * last window closed while live */
	double act_med;            /* median activation bytes per step */
	double act_raw_med;        /* same, uncompressed */
	double peak[COM_N_TSTATS]; /* per-rank byte statistics the
				    * history keeps as their largest
				    * over ranks (rep_peak_stat):
				    * largest over windows */
	uint64_t decisions;        /* rows of decisions */
	uint64_t changed;          /* decisions with a change */
	uint64_t incomplete;       /* windows closed by timeout */
} rep_sums;

/* Per layer: the level applied weighted by steps, the last level
 * applied and decided, the windows with a row, the changes of the level
 * applied. */
typedef struct rep_layer_sum {
	double level_tw;     /* time-weighted level applied */
	double level_last;   /* level applied in its last window with a
			      * row */
	double decided_last; /* level decided in that window */
	double eb_tw;        /* time-weighted error bound */
	double norm_med;     /* median grad_norm_mean */
	uint64_t windows;    /* windows with a row */
	uint64_t changes;    /* times the level applied changed between
			      * windows */
} rep_layer_sum;

typedef struct rep_series {
	char name[128];  /* legend */
	const double *y; /* y[i * stride] */
	size_t stride;   /* step between points */
	bool dashed;     /* a reference line */
	bool steps;      /* a value held until the next point (a level in
			  * force), drawn as steps rather than slopes */
	const double *x; /* its own x[0..n), NULL: the plot's */
	uint64_t n;      /* its points when x is its own */
} rep_series;

/* What a plot says around its lines. */
typedef struct rep_axes {
	const char *title;  /* above the plot */
	const char *xlabel; /* NULL: "window" */
	const char *ylabel; /* the y unit or quantity */
	bool y_from_zero;   /* an amount (bytes, ms, a level): the y axis
			     * starts at 0 (or ends there), else it spans
			     * the data */
	void (*yfmt)(double v, char *buf, size_t len); /* tick labels;
							* NULL: %g */
} rep_axes;

/* Loads run `id` (TOOL_HDB_NONE: the latest, of `job` when not NULL)
 * of the database at `path` into *rr (the caller's), in one read
 * snapshot; with `say_latest`, tells stderr which run "the latest" was.
 * path is borrowed and must outlive rr. Failures are printed to stderr
 * as "bellows CMD: ...". Returns 0 (free with tool_report_run_fini), or
 * 1 after saying why, with nothing left to free. */
int tool_report_run_load(const char *cmd, const char *path, int64_t id,
    const char *job, bool say_latest, rep_run *rr);

/* Frees what tool_report_run_load put in rr (not rr itself). */
void tool_report_run_fini(rep_run *rr);

/* Every column of the exported tables a report reads, RC_* by name;
 * the tables are read through client/historyrows with these, none
 * needed (an older file's missing column reads as NULL). */
extern const char *const tool_report_cols[RC_N];

/* The trainer's evaluations (window_info.eval_accuracy, bellows_agent_eval)
 * of a run: how many windows carry one (accuracy > 0), the row of the
 * last and of the best; the rows are 0 when n is 0. */
typedef struct rep_evals {
	uint64_t n;    /* windows with an evaluation */
	uint64_t last; /* row of window_info of the last one */
	uint64_t best; /* row of the highest accuracy (the first of equals) */
} rep_evals;

/* True when row i of window_info `wi` carries an evaluation. */
bool tool_report_is_eval(const tool_hdb_result *wi, uint64_t i);

/* The evaluations of rr into *e (the caller's). */
void tool_report_evals(const rep_run *rr, rep_evals *e);

/* What the whole run adds up to, into *s (the caller's). */
void tool_report_sum(const rep_run *rr, rep_sums *s);

/* Layer l's sums into *ls (the caller's); l < rr->n_layers. */
void tool_report_layer(const rep_run *rr, uint32_t l, rep_layer_sum *ls);

/* Numbers for people, written into buf (len bytes, always terminated,
 * truncated if short): milliseconds as "2.13 ms"/"1.52 s"/"3 min 05 s",
 * any other number to 4 significant digits ("-" when not finite: not
 * measured). Bytes and counts: common/units.h. */
void tool_report_dur(double ms, char *buf, size_t len);
void tool_report_num(double v, char *buf, size_t len);

/* Writes s to f escaped for HTML text and attributes. */
void tool_report_esc(FILE *f, const char *s);

/* Writes one inline SVG figure to f: n points of each of the ns series
 * over x (or a series' own x and n), as ax says, with ticks at round
 * numbers (1, 2 or 5 times a power of ten) and a legend of at most
 * REP_LEGEND series; a series is joined across its NAN points, by steps
 * when it asks for them. Borrows everything; write errors show in
 * ferror(f). */
void tool_report_plot(FILE *f, const rep_axes *ax, const double *x, uint64_t n,
    const rep_series *s, size_t ns);

/* The tick step of an axis from lo to hi: 1, 2 or 5 times a power of
 * ten, giving 3 to 6 ticks; 1 when hi <= lo or either is not finite.
 * Pure. */
double tool_report_tick_step(double lo, double hi);

/* ---- the two forms of the report (report_emit.c) ---------------------- */

typedef struct rep_emit rep_emit;

/* How one form writes: a document around the sections (optional), a
 * section's heading, its text, and the plots between text blocks
 * (optional: a form without them draws none). Every operation writes
 * to e->f and never fails: write errors show in ferror(e->f). */
typedef struct rep_emit_ops {
	void (*open)(const rep_emit *e, const char *title,
	    const char *heading);                              /* (optional)
								* before all */
	void (*close)(const rep_emit *e);                      /* (optional)
								* after all */
	void (*section)(const rep_emit *e, const char *title); /* a new
								* section */
	void (*put)(const rep_emit *e, const char *s); /* a section's text,
							* as it is */
	void (*figures)(const rep_emit *e,
	    bool begin); /* (optional) around a group of plots */
	void (*plot)(const rep_emit *e, const rep_axes *ax, const double *x,
	    uint64_t n, const rep_series *s,
	    size_t ns); /* (optional) as tool_report_plot */
} rep_emit_ops;

/* A report being written: a form and where. Borrowed by every writer. */
struct rep_emit {
	const rep_emit_ops *ops; /* tool_report_text_ops or _html_ops */
	FILE *f;                 /* where */
};

/* Plain text; one self-contained HTML page (inline SVG plots). */
extern const rep_emit_ops tool_report_text_ops;
extern const rep_emit_ops tool_report_html_ops;

/* Starts the document: the page's title and its first heading (both
 * borrowed); nothing in text. */
void tool_report_open(const rep_emit *e, const char *title,
    const char *heading);

/* Ends the document (nothing in text). */
void tool_report_close(const rep_emit *e);

/* Starts a section under `title`. */
void tool_report_section(const rep_emit *e, const char *title);

/* printf into the current section's text, of any length (escaped in
 * HTML); a line that cannot be formatted (out of memory) is left out. */
__attribute__((format(printf, 2, 3))) void tool_report_printf(const rep_emit *e,
    const char *fmt, ...);

/* Begins (begin true) or ends a group of plots drawn between a
 * section's text blocks; nothing in text. */
void tool_report_figures(const rep_emit *e, bool begin);

/* Draws a plot as tool_report_plot does, inside a group of figures;
 * nothing in text. Borrows everything. */
void tool_report_draw(const rep_emit *e, const rep_axes *ax, const double *x,
    uint64_t n, const rep_series *s, size_t ns);

/* fmt formatted into a new string (the caller's, free()), NULL when
 * out of memory. */
__attribute__((format(printf, 1, 2))) char *tool_report_format(const char *fmt,
    ...);
char *tool_report_vformat(const char *fmt, va_list ap);

#endif
