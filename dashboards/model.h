/* model - what `bellows top` shows, without any terminal.
 *
 * A dash_snapshot is one reading of bellowsd and its history (jobs, the
 * ranks, layers, decisions and events of the job opened, the daemon's
 * health); the data sources (source.c) fill it in, live or from a file.
 * A dash_model holds the latest snapshot and the user's state over it:
 * the view, the selection in each view, the layer filter and sort, pause,
 * help and the offline window slider. Keys go in as dash_key codes and
 * come out as dash_action flags, so that the whole of the dashboard's
 * behaviour is testable without a terminal; layout.c draws a model on a
 * character grid that the curses screen and the --once text output both
 * print. Used from one thread.
 */
#ifndef DASH_MODEL_H
#define DASH_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DASH_NAME_MAX    64        /* bytes of a job, layer or policy name */
#define DASH_TEXT_MAX    256       /* bytes of an event text */
#define DASH_REASON_MAX  1024      /* bytes of a decision's reason */
#define DASH_SPARK_MAX   32        /* windows of norm history kept per layer */
#define DASH_FILTER_MAX  48        /* bytes of the layer filter */
#define DASH_NONE        INT64_MIN /* an unknown or unset number */
#define DASH_METRICS_MAX 256       /* policy metrics kept of one window */

/* bellowsd's own health, or what the offline file is. */
typedef struct dash_health {
	bool live;              /* from a running daemon, not a file */
	bool connected;         /* the last STATUS was answered */
	char where[128];        /* control endpoint or history file */
	char db[256];           /* live: the history file read, "" = none */
	char db_from[16];       /* how it was found: "--db", "bellowsd"
				 * (its STATUS) or "default" */
	char note[128];         /* why not connected, or what is shown */
	uint64_t uptime_ms;     /* daemon's uptime */
	double reports_per_s;   /* reports accepted per second; NAN = - */
	double decisions_per_s; /* decisions per second; NAN = - */
	double latency_ms;      /* decision latency, median; NAN = not known */
	double latency_p99_ms;  /* its 99th percentile; NAN = not known */
	uint64_t store_pending; /* rows queued for the history */
	bool store_degraded;    /* the history is not written */
	uint64_t dropped;       /* malformed messages dropped */
} dash_health;

/* One job (live) or one recorded run (offline). */
typedef struct dash_job {
	char name[DASH_NAME_MAX];   /* job name */
	int64_t run;                /* history run id, DASH_NONE = none */
	uint32_t alive;             /* ranks alive */
	uint32_t world;             /* ranks expected */
	uint64_t step;              /* highest step */
	int64_t window;             /* last closed window, DASH_NONE = - */
	double step_ms;             /* median step time; NAN = - */
	int64_t bytes_sent;         /* in the last window; DASH_NONE = - */
	int64_t bytes_raw;          /* uncompressed; DASH_NONE = - */
	char policy[DASH_NAME_MAX]; /* policies configured */
	char reloaded[16];          /* HH:MM:SS of the last (re)load */
	bool ended;                 /* offline: the run had ended by the
				     * window shown (none of its ranks is
				     * alive: they left or ended with it) */
} dash_job;

/* How a rank that is not alive stopped. */
typedef enum dash_rank_end {
	DASH_RANK_RUNNING = 0, /* alive or lost, as its `alive` says */
	DASH_RANK_LEFT,        /* said goodbye: a clean exit */
	DASH_RANK_ENDED,       /* its run ended with it still in */
} dash_rank_end;

typedef struct dash_rank {
	uint32_t rank;     /* rank number */
	bool alive;        /* alive, else lost (or `end` says) */
	dash_rank_end end; /* how it stopped, when not alive */
	int64_t window;    /* last window it reported, DASH_NONE = - */
	uint64_t step;     /* last step heard */
	double step_ms;    /* mean step time of its last window; NAN = - */
	int64_t seen_ms;   /* ms since heard; DASH_NONE = - */
	uint64_t drops;    /* reports its agent dropped */
} dash_rank;

typedef struct dash_layer {
	uint32_t idx;                 /* index in the layer table */
	char name[DASH_NAME_MAX];     /* layer name */
	uint64_t numel;               /* elements */
	double level;                 /* level in force (decided); NAN = - */
	double level_applied;         /* level it was sent at in the last
				       * window (applied: 0 below the size
				       * threshold, gate off, raw-only
				       * tensors); NAN = not recorded */
	double level_prev;            /* level in force the window before;
				       * NAN = - */
	double level_max;             /* highest level of the run; NAN */
	uint32_t n_norms;             /* entries used in norms */
	double norms[DASH_SPARK_MAX]; /* norm per window, oldest first */
	double error_bound;           /* activation error bound in force in
				       * the last window; NAN = -, 0 = none */
	double r;                     /* Accordion's r as judged at its last
				       * check (policy metric "r"); NAN = -
				       */
	int64_t r_window;             /* window r was judged at; DASH_NONE */
	double r_eta;                 /* eta r was compared with then; NAN */
} dash_layer;

/* A number a policy computed for a window (perfmodel's predicted times,
 * slimgc's threshold, comet's bounds...), as the history recorded it. */
typedef struct dash_metric {
	char policy[DASH_NAME_MAX]; /* policy instance */
	char name[32];              /* metric name */
	char layer[DASH_NAME_MAX];  /* layer name, "" = the whole job */
	double value;               /* in the unit its name says */
} dash_metric;

/* The job's other knobs in force in the last window shown, and what its
 * policies computed for that window. */
typedef struct dash_knobs {
	int64_t window;     /* the window, DASH_NONE = nothing known */
	int64_t threshold;  /* size threshold in bytes, 0 = none */
	bool gate_off;      /* compression turned off (perfmodel) */
	bool calibrating;   /* a calibration runs past the window */
	uint32_t n_metrics; /* entries used in metrics */
	dash_metric metrics[DASH_METRICS_MAX]; /* in the history's order */
} dash_knobs;

typedef struct dash_decision {
	uint64_t seq;                 /* decision seq */
	uint32_t n_changes;           /* knobs it changed, 0 = none */
	int64_t window;               /* window it is in force for */
	char time[16];                /* HH:MM:SS */
	char policy[DASH_NAME_MAX];   /* policies that gave a reason */
	char reason[DASH_REASON_MAX]; /* why, whole */
} dash_decision;

typedef struct dash_event {
	char time[16];            /* HH:MM:SS */
	char kind[32];            /* rank_lost, reload_ok, ... */
	char job[DASH_NAME_MAX];  /* job, "" for the daemon */
	char text[DASH_TEXT_MAX]; /* what happened */
} dash_event;

/* One reading. Owns its arrays (dash_snapshot_fini). */
typedef struct dash_snapshot {
	dash_health health;       /* header */
	uint32_t n_jobs;          /* entries in jobs */
	dash_job *jobs;           /* jobs or runs */
	char job[DASH_NAME_MAX];  /* job the rows below are of, "" none */
	uint32_t n_ranks;         /* entries in ranks */
	dash_rank *ranks;         /* by rank */
	uint32_t n_layers;        /* entries in layers */
	dash_layer *layers;       /* table order */
	uint32_t n_decisions;     /* entries in decisions */
	dash_decision *decisions; /* newest last */
	uint32_t n_events;        /* entries in events */
	dash_event *events;       /* newest last */
	dash_knobs knobs;         /* threshold, gate, policy metrics */
	uint32_t acc_interval;    /* accordion's interval; 0 = none */
	double acc_eta;           /* accordion's eta; NAN = none */
	int64_t window_lo;        /* offline: first window of the run */
	int64_t window_hi;        /* offline: last window of the run */
	int64_t window_at;        /* offline: window shown */
} dash_snapshot;

typedef enum dash_view {
	DASH_VIEW_JOBS = 0,  /* every job */
	DASH_VIEW_RANKS,     /* the job's ranks */
	DASH_VIEW_LAYERS,    /* the job's layers */
	DASH_VIEW_DECISIONS, /* the job's last decisions */
	DASH_VIEW_EVENTS,    /* recent events */
	DASH_VIEW_LAYER,     /* one layer in detail */
	DASH_VIEW_DECISION,  /* one decision in detail */
	DASH_VIEW_N,
} dash_view;

typedef enum dash_sort {
	DASH_SORT_INDEX = 0, /* table order */
	DASH_SORT_NAME,      /* by name */
	DASH_SORT_LEVEL,     /* highest level first */
	DASH_SORT_SIZE,      /* largest first */
	DASH_SORT_R,         /* largest r first */
	DASH_SORT_N,
} dash_sort;

/* The order of the Ranks view: a straggler or a silent rank on top. */
typedef enum dash_rank_sort {
	DASH_RSORT_RANK = 0, /* by rank number */
	DASH_RSORT_SLOW,     /* slowest step time first */
	DASH_RSORT_BEHIND,   /* lowest step first */
	DASH_RSORT_SILENT,   /* heard from longest ago first */
	DASH_RSORT_N,
} dash_rank_sort;

/* Keys the model understands; printable characters are themselves. */
enum {
	DASH_KEY_UP = 0x100,
	DASH_KEY_DOWN,
	DASH_KEY_LEFT,
	DASH_KEY_RIGHT,
	DASH_KEY_PGUP,
	DASH_KEY_PGDN,
	DASH_KEY_HOME,
	DASH_KEY_END,
	DASH_KEY_TAB,
	DASH_KEY_BTAB,
	DASH_KEY_ENTER,
	DASH_KEY_ESC,
	DASH_KEY_BACKSPACE,
};

/* What a key asks of the caller, OR-ed. */
enum {
	DASH_ACT_NONE = 0,
	DASH_ACT_REDRAW = 1,  /* the screen changed */
	DASH_ACT_REFETCH = 2, /* the job or window asked for changed */
	DASH_ACT_QUIT = 4,    /* leave */
};

typedef struct dash_model {
	dash_snapshot snap;           /* latest reading, owned */
	bool offline;                 /* browsing a file */
	dash_view view;               /* shown */
	dash_view back;               /* view before LAYER or DECISION */
	uint32_t sel[DASH_VIEW_N];    /* selected row per view */
	char job[DASH_NAME_MAX];      /* job opened, "" = none yet */
	char layer[DASH_NAME_MAX];    /* layer opened in DASH_VIEW_LAYER */
	dash_decision decision;       /* copy of the decision opened in
				       * DASH_VIEW_DECISION */
	uint32_t scroll;              /* detail views: first line shown (the
				       * caller clamps it to the layout's
				       * dash_layout_scroll_max) */
	char filter[DASH_FILTER_MAX]; /* layer name filter, "" = all */
	bool filtering;               /* typing the filter */
	dash_sort sort;               /* layer order */
	dash_rank_sort rank_sort;     /* rank order */
	bool paused;                  /* keep the snapshot shown */
	bool help;                    /* the key help is shown */
	bool all_decisions;           /* also decisions that change
				       * nothing (`c`); else changed only */
	int64_t window;               /* offline: window asked; DASH_NONE =
				       * the latest */
} dash_model;

/* Prepares *m with an empty snapshot on the jobs view. */
void dash_model_init(dash_model *m, bool offline);

/* Frees the snapshot. Safe on an initialised or zeroed model. */
void dash_model_fini(dash_model *m);

/* Frees what *s owns and zeroes it. Safe on a zeroed snapshot. */
void dash_snapshot_fini(dash_snapshot *s);

/* Replaces the model's snapshot with *s, which the model then owns (*s is
 * zeroed). Selections are kept in range; a paused model frees *s instead.
 * Returns DASH_ACT_REDRAW or DASH_ACT_NONE. */
int dash_model_update(dash_model *m, dash_snapshot *s);

/* Handles one key. Returns DASH_ACT_* flags. */
int dash_model_key(dash_model *m, int key);

/* The job the detail views are about: the opened one, else the selected
 * job, else "" (never NULL). */
const char *dash_model_job(const dash_model *m);

/* The layers shown, filtered and sorted, as indices into snap.layers
 * written to `out` (room for snap.n_layers). Returns how many. */
uint32_t dash_model_layer_rows(const dash_model *m, uint32_t *out);

/* The ranks shown, in m->rank_sort's order, as indices into snap.ranks
 * written to `out` (room for snap.n_ranks). Returns how many. */
uint32_t dash_model_rank_rows(const dash_model *m, uint32_t *out);

/* The rank sort's name ("rank", "slow", "behind", "silent"). */
const char *dash_rank_sort_name(dash_rank_sort s);

/* Rows in view v (for selection bounds). */
uint32_t dash_model_rows(const dash_model *m, dash_view v);

/* What a rank's STATE column says: "alive", "LOST", "left" or
 * "ended". */
const char *dash_rank_state(const dash_rank *k);

/* True for a rank lost (not alive, neither left nor ended). */
bool dash_rank_lost(const dash_rank *k);

/* True when the layer is critical: its level is the highest it had in
 * the run (Accordion's critical regime), else it is stable; a layer whose
 * highest level is 0 (never compressed) is not critical. */
bool dash_layer_critical(const dash_layer *l);

/* Accordion's r of the layer as the policy judged it at its last check
 * (|n[w-interval] - n[w]| / n[w-interval] at window l->r_window, the r
 * that decided the regime in force), NAN when none was recorded. */
double dash_layer_r(const dash_layer *l);

/* True when the layer's level in force differs from the window
 * before's. */
bool dash_layer_changed(const dash_layer *l);

/* True when the job shown has a policy with regimes (Accordion's
 * critical and stable): an r was judged, an Accordion reason was read,
 * or the job's policies are named accordion. Other jobs have no regime
 * to show. */
bool dash_snapshot_regime(const dash_snapshot *s);

/* True when the decision changed a knob (it has rows in the history's
 * decision_changes: n_changes > 0). */
bool dash_decision_changed(const dash_decision *d);

/* The decision on row `row` of the Decisions view (newest first), NULL
 * past the last. */
const dash_decision *dash_model_decision_row(const dash_model *m, uint32_t row);

/* The value of the policy metric `name` of layer `layer` (a layer name,
 * "" for the job) in the snapshot's window, e.g. gcomp's
 * "bits_per_value"; NAN when no policy computed it. */
double dash_metric_of(const dash_snapshot *s, const char *layer,
    const char *name);

/* True when some layer of the snapshot has the metric `name`. */
bool dash_have_layer_metric(const dash_snapshot *s, const char *name);

/* Reads accordion's interval and eta from a decision reason of the form
 * "window A vs window B (eta E): ...". Returns true and sets both, or
 * false with both untouched. */
bool dash_reason_accordion(const char *reason, uint32_t *ret_interval,
    double *ret_eta);

/* Writes a sparkline of the n values (oldest first) into buf: one
 * character of " _.-=+*#" per value, scaled from the smallest to the
 * largest, the last `len - 1` values when there are more. NAN values are
 * spaces. Always NUL-terminates (len > 0). */
void dash_sparkline(const double *v, uint32_t n, char *buf, size_t len);

/* Copies src into dst (len bytes), cutting and NUL-terminating, with
 * control characters as spaces. NULL src gives "". */
void dash_copy(char *dst, size_t len, const char *src);

/* The view's title ("Jobs", "Ranks", ...). */
const char *dash_view_name(dash_view v);

/* The sort's name ("index", "name", ...). */
const char *dash_sort_name(dash_sort s);

#endif /* DASH_MODEL_H */
