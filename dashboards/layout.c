/* layout - the dashboard's screen layout, see layout.h.
 */
#include "layout.h"

#include "common/units.h"

#include <bellows/error.h>

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LAYOUT_TOP                                                             \
	5               /* first table row: header, health, tabs, job, head;   \
			 * one more with a knob line, and per residual group line */
#define LAYOUT_GROUPS 4 /* most residual group lines (resireduce) */

int
dash_canvas_init(dash_canvas *c, int rows, int cols)
{
	memset(c, 0, sizeof(*c));
	if (rows < 1)
		rows = 1;
	if (cols < 1)
		cols = 1;
	c->text = malloc((size_t)rows * (size_t)cols);
	c->attr = malloc((size_t)rows * (size_t)cols);
	if (c->text == NULL || c->attr == NULL) {
		dash_canvas_fini(c);
		return BELLOWS_ENOMEM;
	}
	c->rows = rows;
	c->cols = cols;
	dash_canvas_clear(c);
	return 0;
}

void
dash_canvas_fini(dash_canvas *c)
{
	if (c == NULL)
		return;
	free(c->text);
	free(c->attr);
	memset(c, 0, sizeof(*c));
}

void
dash_canvas_clear(dash_canvas *c)
{
	memset(c->text, ' ', (size_t)c->rows * (size_t)c->cols);
	memset(c->attr, 0, (size_t)c->rows * (size_t)c->cols);
}

int
dash_canvas_put(dash_canvas *c, int row, int col, int width, int attr,
    const char *text)
{
	int n = 0;

	if (row < 0 || row >= c->rows || col < 0 || col >= c->cols)
		return 0;
	if (width < 0 || col + width > c->cols)
		width = c->cols - col;
	for (; text[n] != '\0' && n < width; n++) {
		unsigned char ch = (unsigned char)text[n];
		size_t at = (size_t)row * (size_t)c->cols + (size_t)(col + n);

		c->text[at] = (ch < 0x20 || ch >= 0x7f) ? ' ' : (char)ch;
		c->attr[at] = (uint8_t)attr;
	}
	return n;
}

void
dash_canvas_line(const dash_canvas *c, int row, char *buf)
{
	int n = c->cols;

	memcpy(buf, c->text + (size_t)row * (size_t)c->cols, (size_t)n);
	while (n > 0 && buf[n - 1] == ' ')
		n--;
	buf[n] = '\0';
}

/* Paints the attribute over a whole line (selection, bars). */
static void
layout_bar(dash_canvas *c, int row, int attr)
{
	if (row < 0 || row >= c->rows)
		return;
	memset(c->attr + (size_t)row * (size_t)c->cols, attr, (size_t)c->cols);
}

/* Writes one table cell: cut with '~' when longer than width, numbers
 * aligned right. Returns the next column. */
static int
layout_cell(dash_canvas *c, int row, int col, int width, int attr, bool right,
    const char *text)
{
	char buf[512];
	size_t n = strlen(text);

	if (width <= 0)
		return col;
	if ((int)n > width) {
		size_t keep = (size_t)width - 1;

		if (keep >= sizeof(buf))
			keep = sizeof(buf) - 2;
		memcpy(buf, text, keep);
		buf[keep] = '~';
		buf[keep + 1] = '\0';
	} else if (right) {
		snprintf(buf, sizeof(buf), "%*s", width, text);
	} else {
		snprintf(buf, sizeof(buf), "%s", text);
	}
	dash_canvas_put(c, row, col, width, attr, buf);
	return col + width + 1;
}

/* A byte count as "812B", "99kB", "1.2MB", "3.4GB" (common/units.h). */
static void
layout_bytes(int64_t v, char *buf, size_t len)
{
	if (v == DASH_NONE)
		snprintf(buf, len, "-");
	else
		com_fmt_bytes_short((double)v, buf, len);
}

/* v with prec decimals (prec < 0: %g) and a unit, "-" for NAN. */
static void
layout_real(double v, int prec, const char *unit, char *buf, size_t len)
{
	if (isnan(v))
		snprintf(buf, len, "-");
	else if (prec < 0)
		snprintf(buf, len, "%g%s", v, unit);
	else
		snprintf(buf, len, "%.*f%s", prec, v, unit);
}

static void
layout_duration(uint64_t ms, char *buf, size_t len)
{
	uint64_t s = ms / 1000;

	if (s >= 3600)
		snprintf(buf, len, "%" PRIu64 "h%02" PRIu64 "m", s / 3600,
		    s / 60 % 60);
	else if (s >= 60)
		snprintf(buf, len, "%" PRIu64 "m%02" PRIu64 "s", s / 60,
		    s % 60);
	else
		snprintf(buf, len, "%" PRIu64 "s", s);
}

static const dash_job *
layout_job(const dash_model *m)
{
	const char *name = dash_model_job(m);

	for (uint32_t i = 0; i < m->snap.n_jobs; i++) {
		if (strcmp(m->snap.jobs[i].name, name) == 0)
			return &m->snap.jobs[i];
	}
	return NULL;
}

static void
layout_header(const dash_model *m, dash_canvas *c)
{
	const dash_health *h = &m->snap.health;
	char buf[512], a[32], b[32], up[32];

	layout_bar(c, 0, DASH_ATTR_REVERSE);
	if (h->live) {
		layout_duration(h->uptime_ms, up, sizeof(up));
		snprintf(buf, sizeof(buf),
		    " bellows top  live %s  %s%s%s%s%s%s", h->where,
		    h->connected ? "up " : "NOT CONNECTED",
		    h->connected ? up : "",
		    h->db[0] != '\0' ? "  history " : "", h->db,
		    h->db_from[0] != '\0' ? " from " : "", h->db_from);
	} else if (m->snap.window_hi != DASH_NONE) {
		snprintf(buf, sizeof(buf),
		    " bellows top  offline %s  window %" PRId64 " of %" PRId64
		    "..%" PRId64,
		    h->where, m->snap.window_at, m->snap.window_lo,
		    m->snap.window_hi);
	} else {
		snprintf(buf, sizeof(buf), " bellows top  offline %s",
		    h->where);
	}
	dash_canvas_put(c, 0, 0, -1, DASH_ATTR_REVERSE, buf);
	if (m->paused && c->cols > 10)
		dash_canvas_put(c, 0, c->cols - 9, -1,
		    DASH_ATTR_REVERSE | DASH_ATTR_BOLD, " PAUSED ");
	if (h->live) {
		char lat[48] = "-";

		layout_real(h->reports_per_s, 1, "", a, sizeof(a));
		layout_real(h->decisions_per_s, 1, "", b, sizeof(b));
		if (!isnan(h->latency_ms) && !isnan(h->latency_p99_ms))
			snprintf(lat, sizeof(lat), "%.2f/%.2fms", h->latency_ms,
			    h->latency_p99_ms);
		snprintf(buf, sizeof(buf),
		    "reports/s %s  decisions/s %s  latency %s  store "
		    "lag %" PRIu64 " %s  dropped %" PRIu64,
		    a, b, lat, h->store_pending,
		    h->store_degraded ? "DEGRADED" : "ok", h->dropped);
		dash_canvas_put(c, 1, 1, -1,
		    (h->store_degraded || !h->connected) ? DASH_ATTR_ALERT : 0,
		    buf);
	} else {
		dash_canvas_put(c, 1, 1, -1, 0, h->note);
	}
}

static void
layout_tabs(const dash_model *m, dash_canvas *c)
{
	int col = 0;
	dash_view cur = m->view >= DASH_VIEW_LAYER ? m->back : m->view;

	for (int v = 0; v < DASH_VIEW_LAYER; v++) {
		char buf[32];

		snprintf(buf, sizeof(buf), " %s ",
		    dash_view_name((dash_view)v));
		col += dash_canvas_put(c, 2, col, -1,
		    v == (int)cur ? DASH_ATTR_REVERSE | DASH_ATTR_BOLD : 0,
		    buf);
		col += dash_canvas_put(c, 2, col, -1, 0, "|");
	}
	if (m->view == DASH_VIEW_LAYERS || m->view == DASH_VIEW_LAYER) {
		char buf[96];

		snprintf(buf, sizeof(buf), " sort:%s%s%s",
		    dash_sort_name(m->sort), m->filter[0] != '\0' ? " /" : "",
		    m->filter);
		dash_canvas_put(c, 2, col, -1, 0, buf);
	}
	if (m->view == DASH_VIEW_RANKS) {
		char buf[32];

		snprintf(buf, sizeof(buf), " sort:%s",
		    dash_rank_sort_name(m->rank_sort));
		dash_canvas_put(c, 2, col, -1, 0, buf);
	}
	if (m->view == DASH_VIEW_DECISIONS)
		dash_canvas_put(c, 2, col, -1, 0,
		    m->all_decisions ? " all (c: changed only)"
				     : " changed only (c: all)");
}

static void
layout_job_line(const dash_model *m, dash_canvas *c)
{
	const dash_job *j = layout_job(m);
	char buf[512], st[32], sent[32], raw[32], win[32], alive[48];

	if (j == NULL) {
		dash_canvas_put(c, 3, 1, -1, 0,
		    m->snap.n_jobs == 0 ? "no jobs" : "");
		return;
	}
	layout_real(j->step_ms, 1, "ms", st, sizeof(st));
	layout_bytes(j->bytes_sent, sent, sizeof(sent));
	layout_bytes(j->bytes_raw, raw, sizeof(raw));
	if (j->window == DASH_NONE)
		snprintf(win, sizeof(win), "-");
	else
		snprintf(win, sizeof(win), "%" PRId64, j->window);
	if (j->ended)
		snprintf(alive, sizeof(alive), "ended, %u ranks", j->world);
	else
		snprintf(alive, sizeof(alive), "%u/%u alive", j->alive,
		    j->world);
	/* What matters most first: an 80-column screen cuts the end. */
	snprintf(buf, sizeof(buf),
	    "job %s  %s  step %" PRIu64
	    "  win %s  %s/step  policy %s (%s)  sent %s of %s last window",
	    j->name, alive, j->step, win, st,
	    j->policy[0] != '\0' ? j->policy : "-",
	    j->reloaded[0] != '\0' ? j->reloaded : "-", sent, raw);
	dash_canvas_put(c, 3, 1, -1,
	    DASH_ATTR_BOLD |
		(!j->ended && j->alive < j->world ? DASH_ATTR_ALERT : 0),
	    buf);
}

/* Whether the knob line shows metric `name` before the others. */
static bool
layout_metric_first(const char *name)
{
	static const char *const first[] = { "t_sync_ms", "t_comp_ms",
		"best_level", "t_pred_best_ms", "alpha_ms", "bw_gbps",
		"breakeven_gbps", "cr_needed", "window_steps" };

	for (size_t i = 0; i < sizeof(first) / sizeof(first[0]); i++)
		if (strcmp(name, first[i]) == 0)
			return true;
	return false;
}

/* The knob line: the threshold, gate and calibration in force and what
 * the policies computed for the whole job in the last window, e.g.
 * "threshold 12.0k  compression on  perfmodel: t_sync_ms 12.3 ...".
 * Returns false, writing nothing, when there is none of it (no such
 * policy): the screen then keeps its usual rows. */
static bool
layout_knobs_text(const dash_model *m, char *buf, size_t len)
{
	const dash_knobs *k = &m->snap.knobs;
	const char *policy = "";
	size_t used = 0;
	bool any = false;
	char th[32];
	int n;

#define KNOBS_ADD(...)                                                         \
	do {                                                                   \
		n = snprintf(buf + used, len - used, __VA_ARGS__);             \
		if (n < 0 || (size_t)n >= len - used)                          \
			return true;                                           \
		used += (size_t)n;                                             \
	} while (0)

	buf[0] = '\0';
	if (k->threshold > 0 || k->gate_off || k->calibrating) {
		any = true;
		if (k->threshold == INT64_MAX)
			snprintf(th, sizeof(th), "all raw");
		else
			layout_bytes(k->threshold, th, sizeof(th));
		KNOBS_ADD("threshold %s  compression %s%s",
		    k->threshold > 0 ? th : "-", k->gate_off ? "OFF" : "on",
		    k->calibrating ? "  CALIBRATING" : "");
	}
	/* The job's metrics, the predictions first (an 80-column screen
	 * cuts the end), then the rest in the history's order; the
	 * threshold is already said. */
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t i = 0; i < k->n_metrics; i++) {
			const dash_metric *mt = &k->metrics[i];
			bool first = layout_metric_first(mt->name);

			if (mt->layer[0] != '\0' || first != (pass == 0) ||
			    strcmp(mt->name, "threshold_bytes") == 0)
				continue;
			if (strcmp(mt->policy, policy) != 0) {
				policy = mt->policy;
				KNOBS_ADD("%s%s:", used > 0 ? "  " : "",
				    policy);
			}
			any = true;
			KNOBS_ADD(" %s %.4g", mt->name, mt->value);
		}
	}
#undef KNOBS_ADD
	return any;
}

/* The value of metric `name` of layer `layer` among the knobs' metrics,
 * NAN when there is none. */
static double
layout_metric_of(const dash_knobs *k, const char *name, const char *layer)
{
	for (uint32_t i = 0; i < k->n_metrics; i++)
		if (strcmp(k->metrics[i].name, name) == 0 &&
		    strcmp(k->metrics[i].layer, layer) == 0)
			return k->metrics[i].value;
	return NAN;
}

/* The text of residual group line `n` (resireduce's candidate groups, by
 * their leader's resid_group_size metric) into buf; false when there is
 * no such group or it would pass LAYOUT_GROUPS lines. */
static bool
layout_group_text(const dash_model *m, uint32_t n, char *buf, size_t len)
{
	const dash_knobs *k = &m->snap.knobs;
	uint32_t seen = 0;

	if (n >= LAYOUT_GROUPS)
		return false;
	for (uint32_t i = 0; i < k->n_metrics; i++) {
		const dash_metric *mt = &k->metrics[i];
		double shared, d;

		if (strcmp(mt->name, "resid_group_size") != 0 ||
		    mt->layer[0] == '\0' || seen++ != n)
			continue;
		shared = layout_metric_of(k, "resid_shared", mt->layer);
		d = layout_metric_of(k, "resid_distance", mt->layer);
		if (isnan(d))
			snprintf(buf, len, "residual group %s x%.0f: %s",
			    mt->layer, mt->value,
			    shared > 0 ? "shared" : "own");
		else
			snprintf(buf, len,
			    "residual group %s x%.0f: %s, distance %.2f",
			    mt->layer, mt->value, shared > 0 ? "shared" : "own",
			    d);
		return true;
	}
	return false;
}

/* The first table row: one lower when there is a knob line, and one per
 * residual group line. */
static int
layout_top(const dash_model *m)
{
	char buf[8];
	int top = layout_knobs_text(m, buf, sizeof(buf)) ? LAYOUT_TOP + 1
							 : LAYOUT_TOP;

	for (uint32_t n = 0; layout_group_text(m, n, buf, sizeof(buf)); n++)
		top++;
	return top;
}

static void
layout_knob_line(const dash_model *m, dash_canvas *c)
{
	char buf[512];
	int row = 4;

	if (layout_knobs_text(m, buf, sizeof(buf)))
		dash_canvas_put(c, row++, 1, -1, 0, buf);
	for (uint32_t n = 0; layout_group_text(m, n, buf, sizeof(buf)); n++)
		dash_canvas_put(c, row++, 1, -1, 0, buf);
}

/* The first row shown so that the selection is visible. */
static uint32_t
layout_scroll(uint32_t sel, int visible)
{
	if (visible <= 0)
		return sel;
	return sel < (uint32_t)visible ? 0 : sel - (uint32_t)visible + 1;
}

static void
layout_jobs(const dash_model *m, dash_canvas *c, int first, int visible)
{
	uint32_t top = layout_scroll(m->sel[DASH_VIEW_JOBS], visible);
	int col = 1;

	col = layout_cell(c, first - 1, col, 16, DASH_ATTR_BOLD, false, "JOB");
	col = layout_cell(c, first - 1, col, 7, DASH_ATTR_BOLD, true, "ALIVE");
	col = layout_cell(c, first - 1, col, 7, DASH_ATTR_BOLD, true, "STEP");
	col = layout_cell(c, first - 1, col, 6, DASH_ATTR_BOLD, true, "WIN");
	col = layout_cell(c, first - 1, col, 7, DASH_ATTR_BOLD, true,
	    "STEP_MS");
	col = layout_cell(c, first - 1, col, 11, DASH_ATTR_BOLD, true,
	    "SENT/RAW");
	col = layout_cell(c, first - 1, col, 8, DASH_ATTR_BOLD, false,
	    "RELOADED");
	layout_cell(c, first - 1, col, c->cols - col, DASH_ATTR_BOLD, false,
	    "POLICY");
	for (int r = 0; r < visible && top + (uint32_t)r < m->snap.n_jobs;
	     r++) {
		const dash_job *j = &m->snap.jobs[top + (uint32_t)r];
		bool sel = top + (uint32_t)r == m->sel[DASH_VIEW_JOBS];
		int a = (sel ? DASH_ATTR_REVERSE : 0) |
		    (!j->ended && j->alive < j->world ? DASH_ATTR_ALERT : 0);
		char buf[64], x[32], y[32];
		int row = first + r;

		if (sel)
			layout_bar(c, row, a);
		col = layout_cell(c, row, 1, 16, a, false, j->name);
		if (j->ended)
			snprintf(buf, sizeof(buf), "ended");
		else
			snprintf(buf, sizeof(buf), "%u/%u", j->alive, j->world);
		col = layout_cell(c, row, col, 7, a, true, buf);
		snprintf(buf, sizeof(buf), "%" PRIu64, j->step);
		col = layout_cell(c, row, col, 7, a, true, buf);
		if (j->window == DASH_NONE)
			snprintf(buf, sizeof(buf), "-");
		else
			snprintf(buf, sizeof(buf), "%" PRId64, j->window);
		col = layout_cell(c, row, col, 6, a, true, buf);
		layout_real(j->step_ms, 2, "", buf, sizeof(buf));
		col = layout_cell(c, row, col, 7, a, true, buf);
		layout_bytes(j->bytes_sent, x, sizeof(x));
		layout_bytes(j->bytes_raw, y, sizeof(y));
		snprintf(buf, sizeof(buf), "%s/%s", x, y);
		col = layout_cell(c, row, col, 11, a, true, buf);
		col = layout_cell(c, row, col, 8, a, false,
		    j->reloaded[0] != '\0' ? j->reloaded : "-");
		layout_cell(c, row, col, c->cols - col, a, false,
		    j->policy[0] != '\0' ? j->policy : "-");
	}
}

static void
layout_ranks(const dash_model *m, dash_canvas *c, int first, int visible)
{
	uint32_t top = layout_scroll(m->sel[DASH_VIEW_RANKS], visible);
	uint32_t *rows = NULL, n = 0;
	int col = 1, h = first - 1;

	col = layout_cell(c, h, col, 5, DASH_ATTR_BOLD, true, "RANK");
	col = layout_cell(c, h, col, 6, DASH_ATTR_BOLD, false, "STATE");
	col = layout_cell(c, h, col, 9, DASH_ATTR_BOLD, true, "STEP");
	col = layout_cell(c, h, col, 6, DASH_ATTR_BOLD, true, "WIN");
	col = layout_cell(c, h, col, 8, DASH_ATTR_BOLD, true, "STEP_MS");
	col = layout_cell(c, h, col, 9, DASH_ATTR_BOLD, true, "SEEN_AGO");
	layout_cell(c, h, col, 7, DASH_ATTR_BOLD, true, "DROPS");
	if (m->snap.n_ranks > 0)
		rows = malloc(m->snap.n_ranks * sizeof(*rows));
	if (rows != NULL)
		n = dash_model_rank_rows(m, rows);
	for (int r = 0; r < visible && top + (uint32_t)r < n; r++) {
		const dash_rank *k = &m->snap.ranks[rows[top + (uint32_t)r]];
		bool sel = top + (uint32_t)r == m->sel[DASH_VIEW_RANKS];
		int a = (sel ? DASH_ATTR_REVERSE : 0) |
		    (dash_rank_lost(k) ? DASH_ATTR_ALERT : 0);
		char buf[64];
		int row = first + r;

		if (sel)
			layout_bar(c, row, a);
		snprintf(buf, sizeof(buf), "%u", k->rank);
		col = layout_cell(c, row, 1, 5, a, true, buf);
		col = layout_cell(c, row, col, 6, a, false, dash_rank_state(k));
		snprintf(buf, sizeof(buf), "%" PRIu64, k->step);
		col = layout_cell(c, row, col, 9, a, true, buf);
		if (k->window == DASH_NONE)
			snprintf(buf, sizeof(buf), "-");
		else
			snprintf(buf, sizeof(buf), "%" PRId64, k->window);
		col = layout_cell(c, row, col, 6, a, true, buf);
		layout_real(k->step_ms, 2, "", buf, sizeof(buf));
		col = layout_cell(c, row, col, 8, a, true, buf);
		if (k->seen_ms == DASH_NONE)
			snprintf(buf, sizeof(buf), "-");
		else
			snprintf(buf, sizeof(buf), "%.1fs",
			    (double)k->seen_ms / 1000.0);
		col = layout_cell(c, row, col, 9, a, true, buf);
		snprintf(buf, sizeof(buf), "%" PRIu64, k->drops);
		layout_cell(c, row, col, 7, a, true, buf);
	}
	free(rows);
}

/* "critical", "stable", "raw" (never compressed) or "-"; "crit(LR)" for
 * a layer critical although the r that decided was below eta: an LR
 * drop made every layer critical until the next check. */
static const char *
layout_regime(const dash_layer *l)
{
	double r = dash_layer_r(l);

	if (isnan(l->level) || isnan(l->level_max))
		return "-";
	if (l->level_max <= 0.0)
		return "raw";
	if (!dash_layer_critical(l))
		return "stable";
	return !isnan(r) && !isnan(l->r_eta) && r < l->r_eta ? "crit(LR)"
							     : "critical";
}

/* The attribute of a regime's text. */
static int
layout_regime_attr(const dash_layer *l)
{
	const char *g = layout_regime(l);

	if (strcmp(g, "critical") == 0 || strcmp(g, "crit(LR)") == 0)
		return DASH_ATTR_CRITICAL;
	if (strcmp(g, "stable") == 0)
		return DASH_ATTR_STABLE;
	return strcmp(g, "raw") == 0 ? DASH_ATTR_RAW : 0;
}

/* The attribute of a level in force: changed, compressed or raw. */
static int
layout_level_attr(const dash_layer *l)
{
	if (dash_layer_changed(l))
		return DASH_ATTR_CHANGED;
	if (isnan(l->level))
		return 0;
	return l->level > 0.0 ? DASH_ATTR_LEVEL : DASH_ATTR_RAW;
}

/* The level a layer was sent at, "1" or "0"; the decided level marked
 * "1*" when the history did not record it (older history or agents);
 * "-" when neither is known. */
static void
layout_applied(const dash_layer *l, char *buf, size_t len)
{
	if (!isnan(l->level_applied))
		snprintf(buf, len, "%g", l->level_applied);
	else if (!isnan(l->level))
		snprintf(buf, len, "%g*", l->level);
	else
		snprintf(buf, len, "-");
}

/* The attribute of an applied level: raw or compressed; none when not
 * recorded. */
static int
layout_applied_attr(const dash_layer *l)
{
	if (isnan(l->level_applied))
		return 0;
	return l->level_applied > 0.0 ? DASH_ATTR_LEVEL : DASH_ATTR_RAW;
}

/* The r that decided a layer's regime, with the window of the check
 * that judged it: "0.051 @w12", "-" when none was judged. */
static void
layout_judged(const dash_layer *l, char *buf, size_t len)
{
	double r = dash_layer_r(l);

	if (isnan(r))
		snprintf(buf, len, "-");
	else if (r < 10.0)
		snprintf(buf, len, "%.3f @w%" PRId64, r, l->r_window);
	else /* 12.5, inf (a norm that was 0) */
		snprintf(buf, len, "%.3g @w%" PRId64, r, l->r_window);
}

/* How the judged r compared with the eta of its check: "<0.5", ">=0.5"
 * or "-". */
static void
layout_vs_eta(const dash_layer *l, char *buf, size_t len)
{
	double r = dash_layer_r(l);

	if (isnan(r) || isnan(l->r_eta))
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%s%g", r < l->r_eta ? "<" : ">=", l->r_eta);
}

/* True when some layer has an activation error bound (COMET): the layers
 * view then shows it where Accordion's r and eta go. */
static bool
layout_have_bounds(const dash_model *m)
{
	for (uint32_t i = 0; i < m->snap.n_layers; i++)
		if (m->snap.layers[i].error_bound > 0.0)
			return true;
	return false;
}

/* The per-layer metric a job without regimes shows as its own knob
 * column (slimgc's "ratio", gcomp's "exp_bits"...): the first one the
 * policies computed for a layer that no other column shows; NULL when
 * there is none. */
static const char *
layout_knob_metric(const dash_model *m)
{
	const dash_knobs *k = &m->snap.knobs;

	for (uint32_t i = 0; i < k->n_metrics; i++) {
		const char *name = k->metrics[i].name;

		if (k->metrics[i].layer[0] != '\0' &&
		    strcmp(name, "bits_per_value") != 0 &&
		    strcmp(name, "r") != 0 && strcmp(name, "eb") != 0)
			return name;
	}
	return NULL;
}

/* The layers view's columns after LEVEL, decided once per screen. */
typedef struct layout_cols {
	bool applied;     /* APPLIED, unless the screen is too narrow */
	bool regime;      /* REGIME, and R and VS_ETA unless bounds */
	bool bits;        /* BITS/V (gcomp) */
	bool bounds;      /* ERROR_BOUND (comet) */
	const char *knob; /* a knob metric's column, NULL = none */
	int name_w;       /* LAYER */
	int spark_w;      /* NORM */
} layout_cols;

#define LAYOUT_R_W    11 /* "0.051 @w1234" */
#define LAYOUT_KNOB_W 9  /* a knob metric's column */

static void
layout_layer_cols(const dash_model *m, int cols, layout_cols *lc)
{
	/* The margin, the name's gap, then each column and its gap: SIZE,
	 * LEVEL. */
	int fixed = 2 + 7 + 6;

	memset(lc, 0, sizeof(*lc));
	lc->regime = dash_snapshot_regime(&m->snap);
	lc->bits = dash_have_layer_metric(&m->snap, "bits_per_value");
	lc->bounds = layout_have_bounds(m);
	if (!lc->regime && !lc->bounds)
		lc->knob = layout_knob_metric(m);
	fixed += lc->regime ? 9 : 0;
	fixed += lc->bits ? 7 : 0;
	if (lc->bounds)
		fixed += 14;
	else if (lc->regime)
		fixed += LAYOUT_R_W + 1 + 7;
	if (lc->knob != NULL)
		fixed += LAYOUT_KNOB_W + 1;
	/* APPLIED only where the name keeps 14 columns and the sparkline
	 * 4 beside it: on a narrow screen the name matters more. */
	lc->applied = cols - fixed - 8 - 4 >= 14;
	fixed += lc->applied ? 8 : 0;
	/* The name up to 40 and the sparkline at least 12; on a narrow
	 * screen the name keeps 14 before the sparkline shrinks to 4. */
	lc->name_w = cols - fixed - 12 > 40 ? 40 : cols - fixed - 12;
	if (lc->name_w < 14)
		lc->name_w = cols - fixed - 4 < 14 ? cols - fixed - 4 : 14;
	if (lc->name_w < 8)
		lc->name_w = 8;
	lc->spark_w = cols - fixed - lc->name_w;
}

static void
layout_layer_cells(const dash_model *m, const layout_cols *lc,
    const dash_layer *l, dash_canvas *c, int row, int a)
{
	char buf[64], spark[DASH_SPARK_MAX + 1];
	int col, spark_w = lc->spark_w;

	col = layout_cell(c, row, 1, lc->name_w,
	    a | (dash_layer_changed(l) ? DASH_ATTR_CHANGED : 0), false,
	    l->name);
	com_fmt_count((double)l->numel, buf, sizeof(buf));
	col = layout_cell(c, row, col, 6, a, true, buf);
	layout_real(l->level, -1, "", buf, sizeof(buf));
	col = layout_cell(c, row, col, 5, a | layout_level_attr(l), true, buf);
	if (lc->applied) {
		layout_applied(l, buf, sizeof(buf));
		col = layout_cell(c, row, col, 7, a | layout_applied_attr(l),
		    true, buf);
	}
	if (lc->regime)
		col = layout_cell(c, row, col, 8, a | layout_regime_attr(l),
		    false, layout_regime(l));
	if (lc->bits) {
		/* gcomp: bits per value at level 0 under the table in force. */
		layout_real(dash_metric_of(&m->snap, l->name, "bits_per_value"),
		    2, "", buf, sizeof(buf));
		col = layout_cell(c, row, col, 6, a, true, buf);
	}
	if (lc->bounds) {
		if (isnan(l->error_bound) || l->error_bound <= 0.0)
			snprintf(buf, sizeof(buf), "-");
		else
			snprintf(buf, sizeof(buf), "%.3g", l->error_bound);
		col = layout_cell(c, row, col, 13, a, true, buf);
	} else if (lc->regime) {
		double r = dash_layer_r(l);

		layout_judged(l, buf, sizeof(buf));
		col = layout_cell(c, row, col, LAYOUT_R_W, a, true, buf);
		layout_vs_eta(l, buf, sizeof(buf));
		col = layout_cell(c, row, col, 6,
		    a |
			(isnan(r) || isnan(l->r_eta) ? 0
				: r < l->r_eta       ? DASH_ATTR_STABLE
						     : DASH_ATTR_CRITICAL),
		    false, buf);
	}
	if (lc->knob != NULL) {
		layout_real(dash_metric_of(&m->snap, l->name, lc->knob), -1, "",
		    buf, sizeof(buf));
		col = layout_cell(c, row, col, LAYOUT_KNOB_W, a, true, buf);
	}
	if (spark_w > DASH_SPARK_MAX)
		spark_w = DASH_SPARK_MAX;
	if (spark_w > 0) {
		dash_sparkline(l->norms, l->n_norms, spark,
		    (size_t)spark_w + 1);
		layout_cell(c, row, col, spark_w, a, false, spark);
	}
}

/* Writes `text` at (row, col) with attribute attr; returns the next
 * column. */
static int
layout_word(dash_canvas *c, int row, int col, int attr, const char *text)
{
	return col + dash_canvas_put(c, row, col, -1, attr, text);
}

/* The legend under the layers: what the colours and the columns mean
 * (the words in their own colours, or styles without colour). */
static void
layout_legend(const layout_cols *lc, dash_canvas *c, int row)
{
	int col = 1;

	if (lc->regime) {
		col = layout_word(c, row, col, DASH_ATTR_CRITICAL, "critical");
		col = layout_word(c, row, col, 0, " ");
		col = layout_word(c, row, col, DASH_ATTR_STABLE, "stable");
		col = layout_word(c, row, col, 0, " ");
		col = layout_word(c, row, col, DASH_ATTR_RAW, "raw");
	} else {
		col = layout_word(c, row, col, DASH_ATTR_LEVEL, "level");
		col = layout_word(c, row, col, 0, " ");
		col = layout_word(c, row, col, DASH_ATTR_RAW, "raw");
	}
	col = layout_word(c, row, col, 0, " ");
	col = layout_word(c, row, col, DASH_ATTR_CHANGED, "changed");
	col = layout_word(c, row, col, 0, " ");
	col = layout_word(c, row, col, DASH_ATTR_ALERT, "error");
	layout_word(c, row, col, 0,
	    lc->regime && !lc->bounds
		? "  R: r of check @w  VS_ETA: vs eta  ? more"
		: lc->applied ? "  LEVEL: decided  APPLIED: as sent  ? more"
			      : "  LEVEL: decided  ? more");
}

static void
layout_layers(const dash_model *m, dash_canvas *c, int first, int visible)
{
	uint32_t top;
	uint32_t *rows = NULL, n = 0;
	layout_cols lc;
	int col = 1, h = first - 1;

	layout_layer_cols(m, c->cols, &lc);
	/* The legend takes the last line when the table keeps a few. */
	if (visible > 4) {
		visible--;
		layout_legend(&lc, c, first + visible);
	}
	top = layout_scroll(m->sel[DASH_VIEW_LAYERS], visible);
	col = layout_cell(c, h, col, lc.name_w, DASH_ATTR_BOLD, false, "LAYER");
	col = layout_cell(c, h, col, 6, DASH_ATTR_BOLD, true, "SIZE");
	col = layout_cell(c, h, col, 5, DASH_ATTR_BOLD, true, "LEVEL");
	if (lc.applied)
		col = layout_cell(c, h, col, 7, DASH_ATTR_BOLD, true,
		    "APPLIED");
	if (lc.regime)
		col = layout_cell(c, h, col, 8, DASH_ATTR_BOLD, false,
		    "REGIME");
	if (lc.bits)
		col = layout_cell(c, h, col, 6, DASH_ATTR_BOLD, true, "BITS/V");
	if (lc.bounds) {
		col = layout_cell(c, h, col, 13, DASH_ATTR_BOLD, true,
		    "ERROR_BOUND");
	} else if (lc.regime) {
		col = layout_cell(c, h, col, LAYOUT_R_W, DASH_ATTR_BOLD, true,
		    "R");
		col = layout_cell(c, h, col, 6, DASH_ATTR_BOLD, false,
		    "VS_ETA");
	}
	if (lc.knob != NULL) {
		char up[32];
		size_t i;

		for (i = 0; lc.knob[i] != '\0' && i + 1 < sizeof(up); i++)
			up[i] = (char)toupper((unsigned char)lc.knob[i]);
		up[i] = '\0';
		col = layout_cell(c, h, col, LAYOUT_KNOB_W, DASH_ATTR_BOLD,
		    true, up);
	}
	layout_cell(c, h, col, lc.spark_w, DASH_ATTR_BOLD, false, "NORM");
	if (m->snap.n_layers > 0)
		rows = malloc(m->snap.n_layers * sizeof(*rows));
	if (rows != NULL)
		n = dash_model_layer_rows(m, rows);
	for (int r = 0; r < visible && top + (uint32_t)r < n; r++) {
		const dash_layer *l = &m->snap.layers[rows[top + (uint32_t)r]];
		bool sel = top + (uint32_t)r == m->sel[DASH_VIEW_LAYERS];
		int a = sel ? DASH_ATTR_REVERSE : 0;

		if (sel)
			layout_bar(c, first + r, a);
		layout_layer_cells(m, &lc, l, c, first + r, a);
	}
	if (n == 0)
		dash_canvas_put(c, first, 1, -1, 0,
		    m->snap.n_layers == 0
			? "no layer rows (history database not readable, or "
			  "no window closed yet)"
			: "no layer matches the filter");
	free(rows);
}

static void
layout_decisions(const dash_model *m, dash_canvas *c, int first, int visible)
{
	uint32_t n = m->snap.n_decisions;
	uint32_t top = layout_scroll(m->sel[DASH_VIEW_DECISIONS], visible);
	int col = 1, h = first - 1;

	col = layout_cell(c, h, col, 5, DASH_ATTR_BOLD, true, "SEQ");
	col = layout_cell(c, h, col, 6, DASH_ATTR_BOLD, true, "WIN");
	col = layout_cell(c, h, col, 8, DASH_ATTR_BOLD, false, "TIME");
	col = layout_cell(c, h, col, 10, DASH_ATTR_BOLD, false, "POLICY");
	layout_cell(c, h, col, c->cols - col, DASH_ATTR_BOLD, false, "REASON");
	/* Newest first; what changed something stands out, "no change"
	 * recedes. */
	for (int r = 0; r < visible; r++) {
		const dash_decision *d = dash_model_decision_row(m,
		    top + (uint32_t)r);
		bool sel = top + (uint32_t)r == m->sel[DASH_VIEW_DECISIONS];
		int a = (sel ? DASH_ATTR_REVERSE : 0) |
		    (d != NULL && dash_decision_changed(d) ? DASH_ATTR_CHANGED
							   : DASH_ATTR_RAW);
		char buf[32];
		int row = first + r;

		if (d == NULL)
			break;
		if (sel)
			layout_bar(c, row, a);
		snprintf(buf, sizeof(buf), "%" PRIu64, d->seq);
		col = layout_cell(c, row, 1, 5, a, true, buf);
		if (d->window == DASH_NONE)
			snprintf(buf, sizeof(buf), "-");
		else
			snprintf(buf, sizeof(buf), "%" PRId64, d->window);
		col = layout_cell(c, row, col, 6, a, true, buf);
		col = layout_cell(c, row, col, 8, a, false, d->time);
		col = layout_cell(c, row, col, 10, a, false,
		    d->policy[0] != '\0' ? d->policy : "-");
		layout_cell(c, row, col, c->cols - col, a, false, d->reason);
	}
	if (n == 0)
		dash_canvas_put(c, first, 1, -1, 0,
		    m->all_decisions
			? "no decisions recorded"
			: "no decision changed anything yet (c shows all)");
}

static void
layout_events(const dash_model *m, dash_canvas *c, int first, int visible)
{
	uint32_t n = m->snap.n_events;
	uint32_t top = layout_scroll(m->sel[DASH_VIEW_EVENTS], visible);
	int col = 1, h = first - 1;

	col = layout_cell(c, h, col, 8, DASH_ATTR_BOLD, false, "TIME");
	col = layout_cell(c, h, col, 16, DASH_ATTR_BOLD, false, "KIND");
	col = layout_cell(c, h, col, 10, DASH_ATTR_BOLD, false, "JOB");
	layout_cell(c, h, col, c->cols - col, DASH_ATTR_BOLD, false, "TEXT");
	for (int r = 0; r < visible && top + (uint32_t)r < n; r++) {
		const dash_event *e = &m->snap
					   .events[n - 1 - (top + (uint32_t)r)];
		bool sel = top + (uint32_t)r == m->sel[DASH_VIEW_EVENTS];
		bool bad = strstr(e->kind, "lost") != NULL ||
		    strstr(e->kind, "degraded") != NULL ||
		    strstr(e->kind, "refused") != NULL ||
		    strstr(e->kind, "fail") != NULL ||
		    strstr(e->kind, "error") != NULL;
		int a = (sel ? DASH_ATTR_REVERSE : 0) |
		    (bad ? DASH_ATTR_ALERT : 0);
		int row = first + r;

		if (sel)
			layout_bar(c, row, a);
		col = layout_cell(c, row, 1, 8, a, false, e->time);
		col = layout_cell(c, row, col, 16, a, false, e->kind);
		col = layout_cell(c, row, col, 10, a, false,
		    e->job[0] != '\0' ? e->job : "-");
		layout_cell(c, row, col, c->cols - col, a, false, e->text);
	}
	if (n == 0)
		dash_canvas_put(c, first, 1, -1, 0, "no events");
}

int
dash_layout_wrap(const char *text, int width,
    void (*line)(void *arg, int n, const char *text), void *arg)
{
	char buf[1024];
	const char *p = text;
	int n = 0;

	if (width < 8)
		width = 8;
	if (width > (int)sizeof(buf) - 1)
		width = (int)sizeof(buf) - 1;
	while (*p != '\0') {
		/* One clause: up to and with its ';'. */
		const char *semi = strstr(p, "; ");
		const char *end = semi != NULL ? semi + 1 : p + strlen(p);
		int indent = 0;

		for (const char *q = p; q < end; indent = 2) {
			size_t room = (size_t)(width - indent), take;

			while (q < end && *q == ' ')
				q++;
			if (q >= end)
				break;
			take = (size_t)(end - q);
			if (take > room) {
				/* Break at the last space that fits, else
				 * inside the word. */
				size_t k = room;

				while (k > 0 && q[k] != ' ')
					k--;
				take = k > 0 ? k : room;
			}
			memset(buf, ' ', (size_t)indent);
			memcpy(buf + indent, q, take);
			buf[(size_t)indent + take] = '\0';
			if (line != NULL)
				line(arg, n, buf);
			n++;
			q += take;
		}
		p = semi != NULL ? semi + 2 : end;
	}
	return n;
}

/* A detail view's text, drawn line by line from row `row` up to `end`
 * after skipping `skip` lines (the scroll); a dry pass only counts. */
typedef struct layout_pane {
	dash_canvas *c; /* drawn on */
	bool dry;       /* count only */
	int row;        /* next row */
	int end;        /* first row past the pane */
	uint32_t skip;  /* lines still to scroll past */
	int lines;      /* lines so far, scrolled or not */
	int col;        /* column of the wrapped text */
	int attr;       /* its attribute */
} layout_pane;

static void
layout_pane_line(layout_pane *p, int col, int attr, const char *text)
{
	p->lines++;
	if (p->skip > 0) {
		p->skip--;
		return;
	}
	if (!p->dry && p->row < p->end)
		dash_canvas_put(p->c, p->row, col, -1, attr, text);
	p->row++;
}

static void
layout_pane_wrapped(void *arg, int n, const char *text)
{
	layout_pane *p = arg;

	(void)n;
	layout_pane_line(p, p->col, p->attr, text);
}

/* Adds text wrapped to the screen's width from column col. */
static void
layout_pane_wrap(layout_pane *p, int col, int attr, const char *text)
{
	p->col = col;
	p->attr = attr;
	dash_layout_wrap(text, p->c->cols - col - 1, layout_pane_wrapped, p);
}

/* Draws a detail view with body(): a dry pass counts its lines, so that
 * the scroll stops where the last line is at the bottom; a last line
 * says how many more there are below. */
static void
layout_pane_draw(const dash_model *m, dash_canvas *c, int first, int visible,
    void (*body)(const dash_model *, layout_pane *))
{
	layout_pane p = { .c = c, .dry = true, .row = first, .end = first };
	uint32_t skip = m->scroll;
	int below;

	if (visible <= 0)
		return;
	body(m, &p);
	if (p.lines <= visible)
		skip = 0;
	else if (skip > (uint32_t)(p.lines - visible))
		skip = (uint32_t)(p.lines - visible);
	memset(&p, 0, sizeof(p));
	p.c = c;
	p.row = first;
	p.end = first + visible;
	p.skip = skip;
	body(m, &p);
	below = p.row - p.end;
	if (below > 0) {
		char buf[96];

		snprintf(buf, sizeof(buf), "-- %d more line%s: Down/PgDn --",
		    below + 1, below == 0 ? "" : "s");
		memset(c->text + (size_t)(p.end - 1) * (size_t)c->cols, ' ',
		    (size_t)c->cols);
		dash_canvas_put(c, p.end - 1, 1, -1, DASH_ATTR_BOLD, buf);
	}
}

static void
layout_layer_body(const dash_model *m, layout_pane *p)
{
	const dash_layer *l = NULL;
	char buf[512], spark[DASH_SPARK_MAX + 1], judged[48];
	double r;

	for (uint32_t i = 0; i < m->snap.n_layers; i++) {
		if (strcmp(m->snap.layers[i].name, m->layer) == 0)
			l = &m->snap.layers[i];
	}
	if (l == NULL) {
		snprintf(buf, sizeof(buf), "layer %s: not in this reading",
		    m->layer);
		layout_pane_line(p, 1, 0, buf);
		return;
	}
	r = dash_layer_r(l);
	snprintf(buf, sizeof(buf), "layer %s (#%u, %" PRIu64 " elements)",
	    l->name, l->idx, l->numel);
	layout_pane_line(p, 1, DASH_ATTR_BOLD, buf);
	if (dash_layer_changed(l))
		snprintf(judged, sizeof(judged), " (changed from %g)",
		    l->level_prev);
	else
		judged[0] = '\0';
	if (dash_snapshot_regime(&m->snap))
		snprintf(buf, sizeof(buf),
		    "level %g in force%s, highest in the run %g: %s", l->level,
		    judged, l->level_max, layout_regime(l));
	else
		snprintf(buf, sizeof(buf),
		    "level %g in force%s, highest in the run %g", l->level,
		    judged, l->level_max);
	layout_pane_line(p, 3,
	    layout_level_attr(l) |
		(dash_snapshot_regime(&m->snap) ? layout_regime_attr(l) : 0),
	    buf);
	if (!isnan(l->level_applied))
		snprintf(buf, sizeof(buf),
		    "applied: sent at level %g in the last window%s",
		    l->level_applied,
		    l->level_applied == 0.0 && l->level > 0.0
			? " (raw: below the size threshold, gate off or a "
			  "raw-only tensor)"
			: "");
	else
		snprintf(buf, sizeof(buf),
		    "applied: not recorded (a history or agents older than "
		    "it); APPLIED shows the level decided, marked *");
	layout_pane_line(p, 3, layout_applied_attr(l), buf);
	if (!dash_snapshot_regime(&m->snap)) {
		/* No regime: nothing about Accordion's r. */
	} else if (isnan(r)) {
		layout_pane_line(p, 3, 0,
		    "Accordion r: - (no check recorded for this layer yet)");
	} else {
		snprintf(buf, sizeof(buf),
		    "Accordion r = %.4g judged at window %" PRId64
		    " against eta %g: %s",
		    r, l->r_window, l->r_eta,
		    isnan(l->r_eta)    ? "eta not recorded"
			: r < l->r_eta ? "below eta (stable)"
				       : "at or above eta (critical)");
		layout_pane_wrap(p, 3, 0, buf);
		if (dash_layer_critical(l) && !isnan(l->r_eta) && r < l->r_eta)
			layout_pane_wrap(p, 3, 0,
			    "critical although r < eta: an LR drop makes "
			    "every layer critical until the next check");
	}
	if (!isnan(l->error_bound) && l->error_bound > 0.0) {
		snprintf(buf, sizeof(buf),
		    "activation error bound %.4g (absolute, in force)",
		    l->error_bound);
		layout_pane_line(p, 3, 0, buf);
	}
	for (uint32_t i = 0; i < m->snap.knobs.n_metrics; i++) {
		const dash_metric *mt = &m->snap.knobs.metrics[i];

		if (strcmp(mt->layer, l->name) != 0)
			continue;
		snprintf(buf, sizeof(buf), "%s %s %.6g (window %" PRId64 ")",
		    mt->policy, mt->name, mt->value, m->snap.knobs.window);
		layout_pane_line(p, 3, 0, buf);
	}
	dash_sparkline(l->norms, l->n_norms, spark, sizeof(spark));
	snprintf(buf, sizeof(buf), "norm, last %u windows: [%s]", l->n_norms,
	    spark);
	layout_pane_line(p, 3, 0, buf);
	if (l->n_norms > 0) {
		snprintf(buf, sizeof(buf), "latest norm %.6g",
		    l->norms[l->n_norms - 1]);
		layout_pane_line(p, 3, 0, buf);
	}
	layout_pane_line(p, 1, 0, "");
	layout_pane_line(p, 1, DASH_ATTR_BOLD, "decisions naming it:");
	for (uint32_t i = m->snap.n_decisions; i > 0; i--) {
		const dash_decision *d = &m->snap.decisions[i - 1];

		if (strstr(d->reason, l->name) == NULL)
			continue;
		snprintf(buf, sizeof(buf),
		    "seq %" PRIu64 " (window %" PRId64 "):", d->seq, d->window);
		layout_pane_line(p, 3, DASH_ATTR_CHANGED, buf);
		layout_pane_wrap(p, 5, 0, d->reason);
	}
}

static void
layout_decision_body(const dash_model *m, layout_pane *p)
{
	const dash_decision *d = &m->decision;
	char buf[256], win[32];

	if (d->window == DASH_NONE)
		snprintf(win, sizeof(win), "-");
	else
		snprintf(win, sizeof(win), "%" PRId64, d->window);
	snprintf(buf, sizeof(buf),
	    "decision seq %" PRIu64 ", in force from window %s, at %s", d->seq,
	    win, d->time[0] != '\0' ? d->time : "-");
	layout_pane_line(p, 1, DASH_ATTR_BOLD, buf);
	snprintf(buf, sizeof(buf), "policies: %s%s",
	    d->policy[0] != '\0' ? d->policy : "-",
	    dash_decision_changed(d) ? "" : " (changed nothing)");
	layout_pane_line(p, 3, dash_decision_changed(d) ? 0 : DASH_ATTR_RAW,
	    buf);
	layout_pane_line(p, 1, 0, "");
	layout_pane_line(p, 1, DASH_ATTR_BOLD, "reason:");
	layout_pane_wrap(p, 3, 0, d->reason);
}

static void
layout_layer(const dash_model *m, dash_canvas *c, int first, int visible)
{
	/* The detail starts on the table heading's row. */
	layout_pane_draw(m, c, first - 1, visible + 1, layout_layer_body);
}

static void
layout_decision(const dash_model *m, dash_canvas *c, int first, int visible)
{
	layout_pane_draw(m, c, first - 1, visible + 1, layout_decision_body);
}

uint32_t
dash_layout_scroll_max(const dash_model *m, int rows, int cols)
{
	/* The dry pass reads only the width: a canvas without cells. */
	dash_canvas c = { .rows = rows, .cols = cols };
	layout_pane p = { .c = &c, .dry = true };
	int visible = rows - 1 - layout_top(m) + 1;

	if (m->view == DASH_VIEW_LAYER)
		layout_layer_body(m, &p);
	else if (m->view == DASH_VIEW_DECISION)
		layout_decision_body(m, &p);
	else
		return 0;
	return visible > 0 && p.lines > visible ? (uint32_t)(p.lines - visible)
						: 0;
}

static const char *const layout_help[] = {
	"keys",
	"  Up/Down, j/k     move the selection (PgUp/PgDn, g/G)",
	"  Tab, Shift-Tab   next/previous view: Jobs Ranks Layers Decisions"
	" Events",
	"  Enter            open the selected job, layer or decision",
	"  Esc, Backspace   back; Esc or Enter closes a layer or decision",
	"  /                filter layers by name (Enter keeps, Esc drops)",
	"  s                sort layers (index name level size r), ranks"
	" (rank slow behind silent)",
	"  c                decisions: changed only (default) or all",
	"  p                pause/resume updates",
	"  Left/Right, [ ]  offline: previous/next window ({ } by 10)",
	"  ?, q             this help (any key closes it); quit",
	"legend (Layers view)",
	"  APPLIED level sent at (LEVEL: decided); 1*: not recorded, decided",
	"  REGIME  Accordion's: critical (r >= eta: light compression),",
	"          stable (r < eta: heavy compression), raw (never compressed)",
	"  R       r = |n[w-i] - n[w]| / n[w-i] of the gradient norms, as",
	"          judged at check window w (@w), which decided the regime",
	"  VS_ETA  that r against the eta of that check; crit(LR): critical",
	"          although r < eta, after an LR drop until the next check",
	"  colours critical stable raw changed level error",
};

/* The help line whose words are drawn in the colours they name. */
#define LAYOUT_HELP_COLOURS "  colours "

static void
layout_help_box(dash_canvas *c)
{
	int n = (int)(sizeof(layout_help) / sizeof(layout_help[0]));
	int top = c->rows > n + 4 ? (c->rows - n) / 2 - 1 : LAYOUT_TOP;
	int w = c->cols - 4;

	/* On a short screen the box covers the header rather than losing
	 * its last lines. */
	if (top + n >= c->rows - 1 && c->rows - 2 - n >= 1)
		top = c->rows - 2 - n;

	for (int i = -1; i <= n && top + i < c->rows - 1; i++) {
		if (top + i < 1)
			continue;
		layout_bar(c, top + i, DASH_ATTR_REVERSE);
		memset(c->text + (size_t)(top + i) * (size_t)c->cols, ' ',
		    (size_t)c->cols);
		if (i >= 0 && i < n)
			layout_cell(c, top + i, 2, w, DASH_ATTR_REVERSE, false,
			    layout_help[i]);
		if (i >= 0 && i < n &&
		    strncmp(layout_help[i], LAYOUT_HELP_COLOURS,
			strlen(LAYOUT_HELP_COLOURS)) == 0) {
			static const struct {
				const char *word;
				int attr;
			} words[] = { { "critical", DASH_ATTR_CRITICAL },
				{ "stable", DASH_ATTR_STABLE },
				{ "raw", DASH_ATTR_RAW },
				{ "changed", DASH_ATTR_CHANGED },
				{ "level", DASH_ATTR_LEVEL },
				{ "error", DASH_ATTR_ALERT } };
			int col = 2 + (int)strlen(LAYOUT_HELP_COLOURS);

			for (size_t k = 0; k < sizeof(words) / sizeof(words[0]);
			     k++) {
				col = layout_word(c, top + i, col,
				    DASH_ATTR_REVERSE | words[k].attr,
				    words[k].word);
				col = layout_word(c, top + i, col,
				    DASH_ATTR_REVERSE, " ");
			}
		}
	}
}

static void
layout_footer(const dash_model *m, dash_canvas *c)
{
	const dash_health *h = &m->snap.health;
	int row = c->rows - 1;
	char buf[512];

	if (row < LAYOUT_TOP)
		return;
	if (m->filtering) {
		snprintf(buf, sizeof(buf), "filter layers: %s_", m->filter);
		dash_canvas_put(c, row, 0, -1, DASH_ATTR_BOLD, buf);
	} else if (h->live && !h->connected) {
		snprintf(buf, sizeof(buf), "bellowsd not answering at %s: %s",
		    h->where, h->note[0] != '\0' ? h->note : "reconnecting");
		layout_bar(c, row, DASH_ATTR_ALERT | DASH_ATTR_REVERSE);
		dash_canvas_put(c, row, 0, -1,
		    DASH_ATTR_ALERT | DASH_ATTR_REVERSE, buf);
	} else if (m->view >= DASH_VIEW_LAYER) {
		dash_canvas_put(c, row, 0, -1, 0,
		    "Esc/Enter close  Up/Down scroll  ? help  q quit");
	} else {
		dash_canvas_put(c, row, 0, -1, 0,
		    m->offline
			? "q quit  ? help  Tab view  Enter open  / filter  s sort"
			  "  Left/Right window"
			: "q quit  ? help  Tab view  Enter open  Esc back  "
			  "/ filter  s sort  p pause");
	}
}

void
dash_layout_render(const dash_model *m, dash_canvas *c)
{
	int top = layout_top(m);
	int visible = c->rows - 1 - top;

	dash_canvas_clear(c);
	layout_header(m, c);
	layout_tabs(m, c);
	layout_job_line(m, c);
	layout_knob_line(m, c);
	switch (m->view) {
	case DASH_VIEW_JOBS:
		layout_jobs(m, c, top, visible);
		break;
	case DASH_VIEW_RANKS:
		layout_ranks(m, c, top, visible);
		break;
	case DASH_VIEW_LAYERS:
		layout_layers(m, c, top, visible);
		break;
	case DASH_VIEW_DECISIONS:
		layout_decisions(m, c, top, visible);
		break;
	case DASH_VIEW_EVENTS:
		layout_events(m, c, top, visible);
		break;
	case DASH_VIEW_DECISION:
		layout_decision(m, c, top, visible);
		break;
	default:
		layout_layer(m, c, top, visible);
		break;
	}
	layout_footer(m, c);
	if (m->help)
		layout_help_box(c);
}
