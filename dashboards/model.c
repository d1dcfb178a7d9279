/* model - the dashboard's data and state, see model.h.
 */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL_PAGE       10   /* rows PgUp/PgDn move */
#define MODEL_SCROLL_MAX 4096 /* lines a detail view scrolls, at most */

void
dash_snapshot_fini(dash_snapshot *s)
{
	if (s == NULL)
		return;
	free(s->jobs);
	free(s->ranks);
	free(s->layers);
	free(s->decisions);
	free(s->events);
	memset(s, 0, sizeof(*s));
}

void
dash_model_init(dash_model *m, bool offline)
{
	memset(m, 0, sizeof(*m));
	m->offline = offline;
	m->view = DASH_VIEW_JOBS;
	m->back = DASH_VIEW_LAYERS;
	m->window = DASH_NONE;
	m->snap.acc_eta = NAN;
}

void
dash_model_fini(dash_model *m)
{
	if (m == NULL)
		return;
	dash_snapshot_fini(&m->snap);
}

void
dash_copy(char *dst, size_t len, const char *src)
{
	size_t i = 0;

	if (len == 0)
		return;
	if (src != NULL) {
		for (; src[i] != '\0' && i + 1 < len; i++) {
			unsigned char c = (unsigned char)src[i];

			dst[i] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
		}
	}
	dst[i] = '\0';
}

const char *
dash_view_name(dash_view v)
{
	static const char *const names[DASH_VIEW_N] = { "Jobs", "Ranks",
		"Layers", "Decisions", "Events", "Layer", "Decision" };

	return (unsigned)v < DASH_VIEW_N ? names[v] : "?";
}

const char *
dash_rank_sort_name(dash_rank_sort s)
{
	static const char *const names[DASH_RSORT_N] = { "rank", "slow",
		"behind", "silent" };

	return (unsigned)s < DASH_RSORT_N ? names[s] : "?";
}

const char *
dash_sort_name(dash_sort s)
{
	static const char *const names[DASH_SORT_N] = { "index", "name",
		"level", "size", "r" };

	return (unsigned)s < DASH_SORT_N ? names[s] : "?";
}

const char *
dash_model_job(const dash_model *m)
{
	if (m->job[0] != '\0')
		return m->job;
	if (m->snap.n_jobs > 0) {
		uint32_t i = m->sel[DASH_VIEW_JOBS];

		return m->snap.jobs[i < m->snap.n_jobs ? i : 0].name;
	}
	return "";
}

const char *
dash_rank_state(const dash_rank *k)
{
	if (k->alive)
		return "alive";
	switch (k->end) {
	case DASH_RANK_LEFT:
		return "left";
	case DASH_RANK_ENDED:
		return "ended";
	default:
		return "LOST";
	}
}

bool
dash_rank_lost(const dash_rank *k)
{
	return !k->alive && k->end == DASH_RANK_RUNNING;
}

bool
dash_layer_critical(const dash_layer *l)
{
	/* A layer never compressed (a bias left raw) has no regime. */
	if (isnan(l->level) || isnan(l->level_max) || l->level_max <= 0.0)
		return false;
	return l->level >= l->level_max;
}

double
dash_layer_r(const dash_layer *l)
{
	return l->r_window == DASH_NONE ? NAN : l->r;
}

bool
dash_layer_changed(const dash_layer *l)
{
	return !isnan(l->level) && !isnan(l->level_prev) &&
	    l->level != l->level_prev;
}

/* True when the comma- or space-separated list names policy `name`
 * (whole: "accordion" is not "accordion_batch"). */
static bool
model_names(const char *list, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = strstr(list, name); p != NULL;
	     p = strstr(p + 1, name)) {
		char after = p[n];

		if ((p == list || p[-1] == ',' || p[-1] == ' ') &&
		    (after == '\0' || after == ',' || after == ' '))
			return true;
	}
	return false;
}

bool
dash_snapshot_regime(const dash_snapshot *s)
{
	if (s->acc_interval != 0)
		return true;
	for (uint32_t i = 0; i < s->n_layers; i++)
		if (s->layers[i].r_window != DASH_NONE)
			return true;
	for (uint32_t i = 0; i < s->n_jobs; i++)
		if (strcmp(s->jobs[i].name, s->job) == 0 &&
		    model_names(s->jobs[i].policy, "accordion"))
			return true;
	for (uint32_t i = 0; i < s->n_decisions; i++)
		if (model_names(s->decisions[i].policy, "accordion"))
			return true;
	return false;
}

bool
dash_decision_changed(const dash_decision *d)
{
	return d->n_changes > 0;
}

const dash_decision *
dash_model_decision_row(const dash_model *m, uint32_t row)
{
	if (row >= m->snap.n_decisions)
		return NULL;
	return &m->snap.decisions[m->snap.n_decisions - 1 - row];
}

double
dash_metric_of(const dash_snapshot *s, const char *layer, const char *name)
{
	for (uint32_t i = 0; i < s->knobs.n_metrics; i++) {
		const dash_metric *mt = &s->knobs.metrics[i];

		if (strcmp(mt->name, name) == 0 &&
		    strcmp(mt->layer, layer) == 0)
			return mt->value;
	}
	return NAN;
}

bool
dash_have_layer_metric(const dash_snapshot *s, const char *name)
{
	for (uint32_t i = 0; i < s->knobs.n_metrics; i++)
		if (s->knobs.metrics[i].layer[0] != '\0' &&
		    strcmp(s->knobs.metrics[i].name, name) == 0)
			return true;
	return false;
}

bool
dash_reason_accordion(const char *reason, uint32_t *ret_interval,
    double *ret_eta)
{
	const char *p;
	unsigned long a, b;
	double eta;
	int used = 0;

	if (reason == NULL)
		return false;
	for (p = strstr(reason, "window "); p != NULL;
	     p = strstr(p + 1, "window ")) {
		if (sscanf(p, "window %lu vs window %lu (eta %lf)%n", &a, &b,
			&eta, &used) == 3 &&
		    used > 0 && a > b && a - b <= UINT32_MAX && isfinite(eta)) {
			*ret_interval = (uint32_t)(a - b);
			*ret_eta = eta;
			return true;
		}
	}
	return false;
}

void
dash_sparkline(const double *v, uint32_t n, char *buf, size_t len)
{
	static const char ramp[] = " _.-=+*#";
	const int steps = (int)sizeof(ramp) - 2; /* last index of ramp */
	uint32_t first, k = 0;
	double lo = INFINITY, hi = -INFINITY;

	if (len == 0)
		return;
	first = n > len - 1 ? n - (uint32_t)(len - 1) : 0;
	for (uint32_t i = first; i < n; i++) {
		if (isnan(v[i]))
			continue;
		lo = fmin(lo, v[i]);
		hi = fmax(hi, v[i]);
	}
	for (uint32_t i = first; i < n; i++) {
		int idx;

		if (isnan(v[i])) {
			buf[k++] = ' ';
			continue;
		}
		/* A flat line sits in the middle, not on the floor. */
		if (hi - lo <= 0.0)
			idx = steps / 2 + 1;
		else
			idx = 1 +
			    (int)lround((v[i] - lo) / (hi - lo) * (steps - 1));
		buf[k++] = ramp[idx];
	}
	buf[k] = '\0';
}

/* Case-insensitive substring test for the filter. */
static bool
model_match(const char *name, const char *filter)
{
	size_t n = strlen(filter);

	if (n == 0)
		return true;
	for (const char *p = name; *p != '\0'; p++) {
		if (strncasecmp(p, filter, n) == 0)
			return true;
	}
	return false;
}

/* qsort has no context argument: the sort is passed through these. */
static const dash_model *model_sorting;

static int
model_cmp_double_desc(double a, double b)
{
	if (isnan(a) || isnan(b))
		return isnan(a) - isnan(b);
	return (a < b) - (a > b);
}

static int
model_cmp(const void *pa, const void *pb)
{
	const dash_model *m = model_sorting;
	const dash_layer *a = &m->snap.layers[*(const uint32_t *)pa];
	const dash_layer *b = &m->snap.layers[*(const uint32_t *)pb];
	int c = 0;

	switch (m->sort) {
	case DASH_SORT_NAME:
		c = strcmp(a->name, b->name);
		break;
	case DASH_SORT_LEVEL:
		c = model_cmp_double_desc(a->level, b->level);
		break;
	case DASH_SORT_SIZE:
		c = (a->numel < b->numel) - (a->numel > b->numel);
		break;
	case DASH_SORT_R:
		c = model_cmp_double_desc(dash_layer_r(a), dash_layer_r(b));
		break;
	default:
		break;
	}
	return c != 0 ? c : (a->idx > b->idx) - (a->idx < b->idx);
}

/* Ranks in m->rank_sort's order; ties (and unknown values, last) by rank
 * number. */
static int
model_rank_cmp(const void *pa, const void *pb)
{
	const dash_model *m = model_sorting;
	const dash_rank *a = &m->snap.ranks[*(const uint32_t *)pa];
	const dash_rank *b = &m->snap.ranks[*(const uint32_t *)pb];
	int c = 0;

	switch (m->rank_sort) {
	case DASH_RSORT_SLOW:
		c = model_cmp_double_desc(a->step_ms, b->step_ms);
		break;
	case DASH_RSORT_BEHIND:
		c = (a->step > b->step) - (a->step < b->step);
		break;
	case DASH_RSORT_SILENT:
		if (a->seen_ms == DASH_NONE || b->seen_ms == DASH_NONE)
			c = (a->seen_ms == DASH_NONE) -
			    (b->seen_ms == DASH_NONE);
		else
			c = (a->seen_ms < b->seen_ms) -
			    (a->seen_ms > b->seen_ms);
		break;
	default:
		break;
	}
	return c != 0 ? c : (a->rank > b->rank) - (a->rank < b->rank);
}

uint32_t
dash_model_rank_rows(const dash_model *m, uint32_t *out)
{
	for (uint32_t i = 0; i < m->snap.n_ranks; i++)
		out[i] = i;
	model_sorting = m;
	qsort(out, m->snap.n_ranks, sizeof(*out), model_rank_cmp);
	model_sorting = NULL;
	return m->snap.n_ranks;
}

uint32_t
dash_model_layer_rows(const dash_model *m, uint32_t *out)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < m->snap.n_layers; i++) {
		if (model_match(m->snap.layers[i].name, m->filter))
			out[n++] = i;
	}
	model_sorting = m;
	qsort(out, n, sizeof(*out), model_cmp);
	model_sorting = NULL;
	return n;
}

uint32_t
dash_model_rows(const dash_model *m, dash_view v)
{
	uint32_t n = 0;

	switch (v) {
	case DASH_VIEW_JOBS:
		return m->snap.n_jobs;
	case DASH_VIEW_RANKS:
		return m->snap.n_ranks;
	case DASH_VIEW_LAYERS:
		for (uint32_t i = 0; i < m->snap.n_layers; i++)
			n += model_match(m->snap.layers[i].name, m->filter);
		return n;
	case DASH_VIEW_DECISIONS:
		return m->snap.n_decisions;
	case DASH_VIEW_EVENTS:
		return m->snap.n_events;
	default:
		return 0;
	}
}

static void
model_clamp(dash_model *m)
{
	for (int v = 0; v < DASH_VIEW_N; v++) {
		uint32_t n = dash_model_rows(m, (dash_view)v);

		if (m->sel[v] >= n)
			m->sel[v] = n > 0 ? n - 1 : 0;
	}
}

int
dash_model_update(dash_model *m, dash_snapshot *s)
{
	if (m->paused) {
		dash_snapshot_fini(s);
		return DASH_ACT_NONE;
	}
	dash_snapshot_fini(&m->snap);
	m->snap = *s;
	memset(s, 0, sizeof(*s));
	/* Decisions and events are read newest last; the newest is what
	 * one wants selected until one moves. */
	model_clamp(m);
	return DASH_ACT_REDRAW;
}

/* A detail view scrolls its text instead of moving a selection; the
 * layout stops at the last line. */
static int
model_scroll(dash_model *m, int64_t delta)
{
	int64_t s = (int64_t)m->scroll + delta;

	if (s < 0)
		s = 0;
	if (s > MODEL_SCROLL_MAX)
		s = MODEL_SCROLL_MAX;
	if ((uint32_t)s == m->scroll)
		return DASH_ACT_NONE;
	m->scroll = (uint32_t)s;
	return DASH_ACT_REDRAW;
}

static int
model_move(dash_model *m, int64_t delta)
{
	uint32_t n = dash_model_rows(m, m->view);
	int64_t s = (int64_t)m->sel[m->view] + delta;

	if (m->view == DASH_VIEW_LAYER || m->view == DASH_VIEW_DECISION)
		return model_scroll(m, delta);
	if (n == 0)
		return DASH_ACT_NONE;
	if (s < 0)
		s = 0;
	if (s >= (int64_t)n)
		s = (int64_t)n - 1;
	if ((uint32_t)s == m->sel[m->view])
		return DASH_ACT_NONE;
	m->sel[m->view] = (uint32_t)s;
	return DASH_ACT_REDRAW;
}

static int
model_enter(dash_model *m)
{
	const dash_decision *d;
	uint32_t *rows;
	uint32_t n;

	switch (m->view) {
	case DASH_VIEW_JOBS:
		if (m->snap.n_jobs == 0)
			return DASH_ACT_NONE;
		dash_copy(m->job, sizeof(m->job),
		    m->snap.jobs[m->sel[DASH_VIEW_JOBS]].name);
		m->view = DASH_VIEW_RANKS;
		return DASH_ACT_REDRAW | DASH_ACT_REFETCH;
	case DASH_VIEW_LAYERS:
		if (m->snap.n_layers == 0)
			return DASH_ACT_NONE;
		rows = malloc(m->snap.n_layers * sizeof(*rows));
		if (rows == NULL)
			return DASH_ACT_NONE;
		n = dash_model_layer_rows(m, rows);
		if (n > 0 && m->sel[DASH_VIEW_LAYERS] < n) {
			dash_copy(m->layer, sizeof(m->layer),
			    m->snap.layers[rows[m->sel[DASH_VIEW_LAYERS]]]
				.name);
			m->back = m->view;
			m->view = DASH_VIEW_LAYER;
			m->scroll = 0;
		}
		free(rows);
		return DASH_ACT_REDRAW;
	case DASH_VIEW_DECISIONS:
		d = dash_model_decision_row(m, m->sel[DASH_VIEW_DECISIONS]);
		if (d == NULL)
			return DASH_ACT_NONE;
		/* A copy: live, the decision leaves the newest read while
		 * it is open. */
		m->decision = *d;
		m->back = m->view;
		m->view = DASH_VIEW_DECISION;
		m->scroll = 0;
		return DASH_ACT_REDRAW;
	case DASH_VIEW_LAYER:
	case DASH_VIEW_DECISION:
		/* Enter closes a detail as Esc does. */
		m->view = m->back;
		return DASH_ACT_REDRAW;
	default:
		return DASH_ACT_NONE;
	}
}

static int
model_back(dash_model *m)
{
	if (m->view == DASH_VIEW_LAYER || m->view == DASH_VIEW_DECISION) {
		m->view = m->back;
		return DASH_ACT_REDRAW;
	}
	if (m->view != DASH_VIEW_JOBS) {
		m->view = DASH_VIEW_JOBS;
		return DASH_ACT_REDRAW;
	}
	return DASH_ACT_NONE;
}

/* Keys while the filter is typed: text, Backspace, Enter keeps it, Esc
 * drops it. */
static int
model_filter_key(dash_model *m, int key)
{
	size_t n = strlen(m->filter);

	if (key == DASH_KEY_ENTER) {
		m->filtering = false;
	} else if (key == DASH_KEY_ESC) {
		m->filtering = false;
		m->filter[0] = '\0';
	} else if (key == DASH_KEY_BACKSPACE || key == 0x7f || key == 8) {
		if (n > 0)
			m->filter[n - 1] = '\0';
	} else if (key >= 0x20 && key < 0x7f) {
		if (n + 1 < sizeof(m->filter)) {
			m->filter[n] = (char)key;
			m->filter[n + 1] = '\0';
		}
	} else {
		return DASH_ACT_NONE;
	}
	m->sel[DASH_VIEW_LAYERS] = 0;
	return DASH_ACT_REDRAW;
}

static int
model_slide(dash_model *m, int64_t delta)
{
	int64_t lo = m->snap.window_lo, hi = m->snap.window_hi, w;

	if (!m->offline || lo == DASH_NONE || hi == DASH_NONE)
		return DASH_ACT_NONE;
	w = m->window == DASH_NONE ? hi : m->window;
	w += delta;
	if (w < lo)
		w = lo;
	if (w > hi)
		w = hi;
	if (w == (m->window == DASH_NONE ? hi : m->window))
		return DASH_ACT_NONE;
	m->window = w == hi ? DASH_NONE : w;
	return DASH_ACT_REDRAW | DASH_ACT_REFETCH;
}

int
dash_model_key(dash_model *m, int key)
{
	if (m->filtering)
		return model_filter_key(m, key);
	if (m->help) {
		/* Any key closes the help; q still quits. */
		m->help = false;
		return key == 'q' ? DASH_ACT_QUIT : DASH_ACT_REDRAW;
	}
	switch (key) {
	case 'q':
	case 'Q':
		return DASH_ACT_QUIT;
	case '?':
	case 'h':
		m->help = true;
		return DASH_ACT_REDRAW;
	case DASH_KEY_UP:
	case 'k':
		return model_move(m, -1);
	case DASH_KEY_DOWN:
	case 'j':
		return model_move(m, 1);
	case DASH_KEY_PGUP:
		return model_move(m, -MODEL_PAGE);
	case DASH_KEY_PGDN:
		return model_move(m, MODEL_PAGE);
	case DASH_KEY_HOME:
	case 'g':
		return model_move(m, -(int64_t)UINT32_MAX);
	case DASH_KEY_END:
	case 'G':
		return model_move(m, UINT32_MAX);
	case DASH_KEY_LEFT:
	case '[':
		return model_slide(m, -1);
	case DASH_KEY_RIGHT:
	case ']':
		return model_slide(m, 1);
	case '{':
		return model_slide(m, -10);
	case '}':
		return model_slide(m, 10);
	case DASH_KEY_TAB:
	case DASH_KEY_BTAB: {
		int v = m->view >= DASH_VIEW_LAYER ? (int)m->back
						   : (int)m->view;
		int was_jobs = v == DASH_VIEW_JOBS;

		v = key == DASH_KEY_TAB
		    ? (v + 1) % DASH_VIEW_LAYER
		    : (v + DASH_VIEW_LAYER - 1) % DASH_VIEW_LAYER;
		m->view = (dash_view)v;
		/* Leaving the jobs list by Tab opens the selected job. */
		if (was_jobs && m->job[0] == '\0' && m->snap.n_jobs > 0) {
			dash_copy(m->job, sizeof(m->job),
			    m->snap.jobs[m->sel[DASH_VIEW_JOBS]].name);
			return DASH_ACT_REDRAW | DASH_ACT_REFETCH;
		}
		return DASH_ACT_REDRAW;
	}
	case DASH_KEY_ENTER:
		return model_enter(m);
	case DASH_KEY_ESC:
	case DASH_KEY_BACKSPACE:
		return model_back(m);
	case '/':
		m->filtering = true;
		if (m->view != DASH_VIEW_LAYERS && m->view != DASH_VIEW_LAYER)
			m->view = DASH_VIEW_LAYERS;
		return DASH_ACT_REDRAW;
	case 's':
		if (m->view == DASH_VIEW_RANKS)
			m->rank_sort = (dash_rank_sort)((m->rank_sort + 1) %
			    DASH_RSORT_N);
		else
			m->sort = (dash_sort)((m->sort + 1) % DASH_SORT_N);
		return DASH_ACT_REDRAW;
	case 'p':
		m->paused = !m->paused;
		return DASH_ACT_REDRAW | (m->paused ? 0 : DASH_ACT_REFETCH);
	case 'c':
		/* The source reads the decisions asked for: fetch again. */
		m->all_decisions = !m->all_decisions;
		m->sel[DASH_VIEW_DECISIONS] = 0;
		return DASH_ACT_REDRAW | DASH_ACT_REFETCH;
	default:
		return DASH_ACT_NONE;
	}
}
