/* test_layout - the dashboard's screen layout on a character grid: what
 * each view shows at 80x24, truncation of long names with the columns
 * after them kept under their headings (at 60, 80 and 120 columns), only
 * printable ASCII on screen, the disconnected footer, the help box, and
 * the plain-text output of --once; Accordion's r with the window that
 * judged it, the regime columns only for jobs with regimes, the cells'
 * meanings (critical, stable, changed...) and the legend, and the
 * detail views wrapping whole reasons to the width.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include <bellows/error.h>

#include "fixture.h"
#include "dashboards/layout.h"
#include "dashboards/dash_text.h"

typedef struct layout_fx {
	dash_model m;          /* with the fixture snapshot */
	dash_canvas c;         /* 24 x 80 */
	char all[24 * 81 + 1]; /* the screen as text, lines joined by \n */
} layout_fx;

static int
layout_setup(void **state)
{
	layout_fx *fx = calloc(1, sizeof(*fx));

	if (fx == NULL || fixture_screen_open(&fx->m, &fx->c, 24, 80) != 0)
		return -1;
	*state = fx;
	return 0;
}

static int
layout_teardown(void **state)
{
	layout_fx *fx = *state;

	fixture_screen_close(&fx->m, &fx->c);
	free(fx);
	return 0;
}

/* Renders and joins the lines into fx->all. */
static const char *
layout_render(layout_fx *fx)
{
	char line[81];
	size_t at = 0;

	dash_layout_render(&fx->m, &fx->c);
	for (int r = 0; r < fx->c.rows; r++) {
		dash_canvas_line(&fx->c, r, line);
		/* What reaches the terminal is printable ASCII: a name's
		 * control characters or UTF-8 bytes would move the cursor
		 * or take other widths than counted. */
		for (const char *p = line; *p != '\0'; p++)
			assert_true(*p >= 0x20 && *p < 0x7f);
		at += (size_t)snprintf(fx->all + at, sizeof(fx->all) - at,
		    "%s\n", line);
	}
	return fx->all;
}

static void
layout_line(layout_fx *fx, int row, char *buf)
{
	dash_canvas_line(&fx->c, row, buf);
}

static void
test_layout_jobs_view_shows_health_and_every_job(void **state)
{
	layout_fx *fx = *state;
	const char *s = layout_render(fx);
	char line[81];

	assert_non_null(strstr(s, "live ipc://ctl"));
	assert_non_null(strstr(s, "reports/s 12.5"));
	assert_non_null(strstr(s, "latency -"));
	assert_non_null(strstr(s, "store lag 0 ok"));
	layout_line(fx, 5, line);
	assert_non_null(strstr(line, "resnet"));
	assert_non_null(strstr(line, "2/3"));
	assert_non_null(strstr(line, "100kB/1.2MB"));
	assert_non_null(strstr(line, "03:00:34"));
	assert_non_null(strstr(line, "accordion"));
	/* The selection is drawn reversed across the row. */
	assert_true(fx->c.attr[5 * 80 + 79] & DASH_ATTR_REVERSE);
	layout_line(fx, 6, line);
	assert_non_null(strstr(line, "bert"));
	assert_non_null(strstr(line, "-/-"));
	layout_line(fx, 23, line);
	assert_non_null(strstr(line, "q quit"));
}

static void
test_layout_ranks_view_marks_the_lost_rank(void **state)
{
	layout_fx *fx = *state;
	char line[81];

	fx->m.view = DASH_VIEW_RANKS;
	layout_render(fx);
	layout_line(fx, 7, line);
	assert_non_null(strstr(line, "LOST"));
	assert_true(fx->c.attr[7 * 80 + 3] & DASH_ATTR_ALERT);
	layout_line(fx, 5, line);
	assert_non_null(strstr(line, "alive"));
}

static void
test_layout_layers_view_shows_level_regime_r_and_norms(void **state)
{
	layout_fx *fx = *state;
	char line[81];

	fx->m.view = DASH_VIEW_LAYERS;
	layout_render(fx);
	layout_line(fx, 4, line);
	assert_non_null(strstr(line, "LAYER"));
	assert_non_null(strstr(line, "REGIME"));
	layout_line(fx, 5, line);
	assert_non_null(strstr(line, "conv1.weight"));
	assert_non_null(strstr(line, "critical"));
	/* The r that decided the regime, with its check's window and eta,
	 * not the r of the newest norms (2/12). */
	assert_non_null(strstr(line, "0.400 @w10 >=0.3"));
	assert_null(strstr(line, "0.167"));
	assert_non_null(strstr(line, "_-=*#"));
	layout_line(fx, 6, line);
	assert_non_null(strstr(line, "fc.weight"));
	assert_non_null(strstr(line, "stable"));
	assert_non_null(strstr(line, "0.000 @w10 <0.3"));
	/* Critical although its r was below eta: an LR drop did it. */
	fx->m.snap.layers[2].r = 0.1;
	layout_render(fx);
	layout_line(fx, 7, line);
	assert_non_null(strstr(line, "conv2.weight"));
	assert_non_null(strstr(line, "crit(LR)"));
	assert_non_null(strstr(line, "0.100 @w10 <0.3"));
	fx->m.view = DASH_VIEW_LAYER;
	dash_copy(fx->m.layer, sizeof(fx->m.layer), "conv2.weight");
	assert_non_null(
	    strstr(layout_render(fx), "critical although r < eta: an LR drop"));
}

/* The attribute of the first cell of `needle` on row `row`. */
static int
layout_attr_of(layout_fx *fx, int row, const char *needle)
{
	char line[81];
	const char *p;

	layout_line(fx, row, line);
	p = strstr(line, needle);
	assert_non_null(p);
	return fx->c.attr[row * 80 + (int)(p - line)];
}

static void
test_layout_colours_regimes_levels_changes_with_a_legend(void **state)
{
	layout_fx *fx = *state;
	char line[81];

	fx->m.view = DASH_VIEW_LAYERS;
	fx->m.sel[DASH_VIEW_LAYERS] = 2;
	layout_render(fx);
	/* conv1.weight's level changed: its name and level say so. */
	assert_true(layout_attr_of(fx, 5, "conv1") & DASH_ATTR_CHANGED);
	assert_true(layout_attr_of(fx, 5, "critical") & DASH_ATTR_CRITICAL);
	assert_true(layout_attr_of(fx, 5, ">=0.3") & DASH_ATTR_CRITICAL);
	assert_false(layout_attr_of(fx, 6, "fc.weight") & DASH_ATTR_CHANGED);
	assert_true(layout_attr_of(fx, 6, "stable") & DASH_ATTR_STABLE);
	assert_true(layout_attr_of(fx, 6, "<0.3") & DASH_ATTR_STABLE);
	assert_true(fx->c.attr[6 * 80 + 37] & DASH_ATTR_LEVEL);
	/* The selection stays reversed over the meanings. */
	assert_true(layout_attr_of(fx, 7, "critical") & DASH_ATTR_REVERSE);
	assert_true(layout_attr_of(fx, 7, "critical") & DASH_ATTR_CRITICAL);
	/* The legend: the words in their own attributes, what R and
	 * VS_ETA are, where to read more. */
	layout_line(fx, 22, line);
	assert_non_null(strstr(line, "critical stable raw changed error"));
	assert_non_null(strstr(line, "R: r of check @w"));
	assert_non_null(strstr(line, "VS_ETA: vs eta"));
	assert_non_null(strstr(line, "? more"));
	assert_int_equal(layout_attr_of(fx, 22, "critical"),
	    DASH_ATTR_CRITICAL);
	assert_int_equal(layout_attr_of(fx, 22, "stable"), DASH_ATTR_STABLE);
	assert_int_equal(layout_attr_of(fx, 22, "raw"), DASH_ATTR_RAW);
	assert_int_equal(layout_attr_of(fx, 22, "changed"), DASH_ATTR_CHANGED);
	assert_int_equal(layout_attr_of(fx, 22, "error"), DASH_ATTR_ALERT);
	/* Decisions: those that changed something stand out. */
	fx->m.view = DASH_VIEW_DECISIONS;
	layout_render(fx);
	assert_true(layout_attr_of(fx, 5, "window 10") & DASH_ATTR_CHANGED);
	assert_true(layout_attr_of(fx, 6, "no change") & DASH_ATTR_RAW);
	assert_false(layout_attr_of(fx, 6, "no change") & DASH_ATTR_CHANGED);
}

static void
test_layout_without_a_regime_shows_the_policys_own_knob(void **state)
{
	layout_fx *fx = *state;
	dash_snapshot *s = &fx->m.snap;
	const char *all;
	char line[81];

	/* A job of a schedule policy: no Accordion reason, r or name. */
	s->acc_interval = 0;
	s->acc_eta = NAN;
	for (uint32_t i = 0; i < s->n_layers; i++)
		s->layers[i].r_window = DASH_NONE;
	dash_copy(s->jobs[0].policy, DASH_NAME_MAX, "levels");
	dash_copy(s->decisions[1].policy, DASH_NAME_MAX, "levels");
	fx->m.view = DASH_VIEW_LAYERS;
	all = layout_render(fx);
	layout_line(fx, 4, line);
	assert_non_null(strstr(line, "LEVEL"));
	assert_null(strstr(line, "REGIME"));
	assert_null(strstr(line, " R "));
	assert_null(strstr(line, "VS_ETA"));
	assert_null(strstr(all, "critical"));
	assert_null(strstr(all, "stable"));
	layout_line(fx, 22, line);
	assert_non_null(strstr(line, "level raw changed error"));
	/* A policy's per-layer metric is its knob column. */
	s->knobs.window = 11;
	s->knobs.n_metrics = 1;
	dash_copy(s->knobs.metrics[0].policy, DASH_NAME_MAX, "slimgc");
	dash_copy(s->knobs.metrics[0].name, 32, "ratio");
	dash_copy(s->knobs.metrics[0].layer, DASH_NAME_MAX, "fc.weight");
	s->knobs.metrics[0].value = 3.25;
	layout_render(fx);
	layout_line(fx, 4, line);
	assert_non_null(strstr(line, "RATIO"));
	layout_line(fx, 6, line);
	assert_non_null(strstr(line, "fc.weight"));
	assert_non_null(strstr(line, " 3.25 "));
	/* The layer's detail says nothing of Accordion either. */
	fx->m.view = DASH_VIEW_LAYER;
	dash_copy(fx->m.layer, sizeof(fx->m.layer), "fc.weight");
	all = layout_render(fx);
	assert_null(strstr(all, "Accordion"));
	assert_non_null(
	    strstr(all, "level 1 in force, highest in the run 2\n"));
	assert_non_null(strstr(all, "slimgc ratio 3.25"));
}

static void
test_layout_decisions_view_shows_newest_reason_first(void **state)
{
	layout_fx *fx = *state;
	char line[81];

	fx->m.view = DASH_VIEW_DECISIONS;
	layout_render(fx);
	layout_line(fx, 5, line);
	assert_non_null(strstr(line, "12"));
	assert_non_null(strstr(line, "window 10 vs window 8"));
	/* 80 columns: the long reason is cut with '~'. */
	assert_int_equal(strlen(line), 80);
	assert_int_equal(line[79], '~');
	layout_line(fx, 6, line);
	assert_non_null(strstr(line, "no change"));
}

static void
test_layout_events_and_layer_detail(void **state)
{
	layout_fx *fx = *state;
	const char *s;

	fx->m.view = DASH_VIEW_EVENTS;
	s = layout_render(fx);
	assert_non_null(strstr(s, "rank_lost"));
	assert_non_null(strstr(s, "rank 2 lost at step 110"));
	fx->m.view = DASH_VIEW_LAYER;
	dash_copy(fx->m.layer, sizeof(fx->m.layer), "fc.weight");
	s = layout_render(fx);
	assert_non_null(strstr(s, "layer fc.weight (#1, 8192 elements)"));
	assert_non_null(strstr(s, "stable"));
	assert_non_null(strstr(s, "r = 0 judged at window 10 against eta 0.3"));
	assert_non_null(strstr(s, "seq 12 (window 11):"));
	assert_non_null(strstr(s, "window 10 vs window 8"));
	/* The reason whole, its clauses one a line. */
	assert_non_null(strstr(s, "\n     stable: fc.weight r=0\n"));
	assert_non_null(strstr(s, "Esc/Enter close"));
	/* A changed level says from what. */
	dash_copy(fx->m.layer, sizeof(fx->m.layer), "conv1.weight");
	s = layout_render(fx);
	assert_non_null(strstr(s, "level 2 in force (changed from 1)"));
}

static void layout_print(layout_fx *fx, dash_view v, int rows, int cols,
    char *buf, size_t len);

/* A reason as long as bellowsd writes: clauses of many layers each. */
static void
layout_long_reason(char *buf, size_t len)
{
	size_t at = (size_t)snprintf(buf, len,
	    "window 20 vs window 18 (eta 0.3): 12 critical (level 2), 12 "
	    "stable (level 1); critical: ");

	for (int i = 0; i < 24 && at + 40 < len; i++)
		at += (size_t)snprintf(buf + at, len - at,
		    "%sblock%02d.w r=0.%03d",
		    i == 0        ? ""
			: i == 12 ? "; stable: "
				  : ", ",
		    i, 7 * i + 1);
}

/* True when every space-separated word of text is on the screen. */
static bool
layout_has_words(const char *screen, const char *text)
{
	char word[128];
	int n = 0;

	for (const char *p = text; sscanf(p, "%127s%n", word, &n) == 1; p += n)
		if (strstr(screen, word) == NULL)
			return false;
	return true;
}

static void
test_layout_decision_detail_wraps_the_whole_reason(void **state)
{
	layout_fx *fx = *state;
	char reason[DASH_REASON_MAX], buf[8192], end[8192];

	layout_long_reason(reason, sizeof(reason));
	assert_true(strlen(reason) > 3 * 80);
	fx->m.snap.decisions[1].seq = 99;
	dash_copy(fx->m.snap.decisions[1].reason, DASH_REASON_MAX, reason);
	fx->m.view = DASH_VIEW_DECISIONS;
	assert_int_equal(dash_model_key(&fx->m, DASH_KEY_ENTER),
	    DASH_ACT_REDRAW);
	/* 80 columns: the whole reason, no word cut, no '~'. */
	layout_print(fx, DASH_VIEW_DECISION, 24, 80, buf, sizeof(buf));
	assert_non_null(
	    strstr(buf, "decision seq 99, in force from window 11"));
	assert_true(layout_has_words(buf, reason));
	assert_null(strstr(buf, "~"));
	assert_non_null(strstr(buf, "\n   stable: block12.w r=0.085,"));
	/* 40 columns: longer than the screen; the last line says so, and
	 * scrolling down shows the rest. */
	layout_print(fx, DASH_VIEW_DECISION, 24, 40, buf, sizeof(buf));
	assert_non_null(strstr(buf, "more lines: Down/PgDn"));
	assert_null(strstr(buf, "block23.w"));
	/* The scroll that shows the last line at the bottom: one less
	 * still has lines below, one more shows the same. */
	assert_int_equal(dash_layout_scroll_max(&fx->m, 24, 80), 0);
	fx->m.scroll = dash_layout_scroll_max(&fx->m, 24, 40);
	assert_true(fx->m.scroll > 0);
	fx->m.scroll--;
	layout_print(fx, DASH_VIEW_DECISION, 24, 40, end, sizeof(end));
	assert_non_null(strstr(end, "-- 2 more lines"));
	fx->m.scroll = 1000;
	layout_print(fx, DASH_VIEW_DECISION, 24, 40, end, sizeof(end));
	assert_null(strstr(end, "more lines"));
	assert_null(strstr(end, "decision seq 99"));
	assert_non_null(strstr(end, "block23.w r=0.162"));
	strcat(buf, end);
	assert_true(layout_has_words(buf, reason));
	assert_null(strstr(buf, "~"));
}

/* Collects wrapped lines, joined by '|'. */
static void
layout_wrapped(void *arg, int n, const char *text)
{
	char *buf = arg;

	if (n > 0)
		strcat(buf, "|");
	strcat(buf, text);
}

static void
test_layout_wrap_breaks_at_words_and_clauses(void **state)
{
	char buf[512] = "";

	(void)state;
	assert_int_equal(dash_layout_wrap("one two three four five six", 10,
			     layout_wrapped, buf),
	    4);
	assert_string_equal(buf, "one two|  three|  four|  five six");
	buf[0] = '\0';
	assert_int_equal(dash_layout_wrap("a b; c d;e; f", 20, layout_wrapped,
			     buf),
	    3);
	assert_string_equal(buf, "a b;|c d;e;|f");
	buf[0] = '\0';
	assert_int_equal(dash_layout_wrap("abcdefghijklmnopqrstuvwxyz", 10,
			     layout_wrapped, buf),
	    3);
	assert_string_equal(buf, "abcdefghij|  klmnopqr|  stuvwxyz");
	assert_int_equal(dash_layout_wrap("", 10, layout_wrapped, buf), 0);
	assert_int_equal(dash_layout_wrap("   ", 10, NULL, NULL), 0);
}

static void
test_layout_header_shows_the_decision_latency(void **state)
{
	layout_fx *fx = *state;
	char line[81];

	fx->m.snap.health.latency_ms = 0.35;
	fx->m.snap.health.latency_p99_ms = 1.5;
	layout_render(fx);
	layout_line(fx, 1, line);
	assert_non_null(strstr(line, "latency 0.35/1.50ms  store lag 0 ok"));
}

/* COMET's bounds take the place of Accordion's r; the threshold, the gate
 * and perfmodel's predictions get a line of their own under the job's. */
static void
test_layout_shows_bounds_threshold_and_policy_metrics(void **state)
{
	layout_fx *fx = *state;
	dash_knobs *k = &fx->m.snap.knobs;
	const char *s;
	char line[81];

	k->window = 11;
	k->threshold = 12288;
	k->calibrating = true;
	k->n_metrics = 3;
	dash_copy(k->metrics[0].policy, DASH_NAME_MAX, "perfmodel");
	dash_copy(k->metrics[0].name, 32, "t_sync_ms");
	k->metrics[0].value = 12.25;
	dash_copy(k->metrics[1].policy, DASH_NAME_MAX, "perfmodel");
	dash_copy(k->metrics[1].name, 32, "bw_gbps");
	k->metrics[1].value = 9.5;
	dash_copy(k->metrics[2].policy, DASH_NAME_MAX, "comet");
	dash_copy(k->metrics[2].name, 32, "eb");
	dash_copy(k->metrics[2].layer, DASH_NAME_MAX, "conv1.weight");
	k->metrics[2].value = 0.0039;
	fx->m.snap.layers[0].error_bound = 0.0039;
	fx->m.snap.layers[1].error_bound = 0;
	fx->m.snap.layers[2].error_bound = NAN;
	fx->m.view = DASH_VIEW_LAYERS;
	s = layout_render(fx);
	layout_line(fx, 4, line);
	/* At 80 columns the end is cut; the first metrics are there. */
	assert_non_null(strstr(line,
	    "threshold 12kB  compression on  CALIBRATING  perfmodel: "
	    "t_sync_ms 12.25"));
	/* A layer's own metrics are not on the job's line. */
	assert_null(strstr(line, "eb"));
	layout_line(fx, 5, line);
	assert_non_null(strstr(line, "ERROR_BOUND"));
	assert_null(strstr(line, "VS_ETA"));
	layout_line(fx, 6, line);
	assert_non_null(strstr(line, "conv1.weight"));
	assert_non_null(strstr(line, "0.0039"));
	layout_line(fx, 7, line);
	assert_non_null(strstr(line, "fc.weight"));
	assert_non_null(strstr(s, "fc.weight"));

	/* The gate off, no threshold: said so. */
	k->threshold = 0;
	k->calibrating = false;
	k->gate_off = true;
	layout_render(fx);
	layout_line(fx, 4, line);
	assert_non_null(
	    strstr(line, "threshold -  compression OFF  perfmodel:"));

	/* The layer's view lists its bound and its metrics. */
	dash_model_key(&fx->m, DASH_KEY_ENTER);
	assert_int_equal(fx->m.view, DASH_VIEW_LAYER);
	s = layout_render(fx);
	assert_non_null(strstr(s, "activation error bound 0.0039"));
	assert_non_null(strstr(s, "comet eb 0.0039 (window 11)"));

	/* Nothing of the kind: no knob line, the table where it was. */
	memset(k, 0, sizeof(*k));
	fx->m.view = DASH_VIEW_LAYERS;
	layout_render(fx);
	layout_line(fx, 4, line);
	assert_non_null(strstr(line, "LAYER"));
}

/* gcomp's bits per value in force: a column of the layers view when
 * some layer has one, "-" for the layers without. */
static void
test_layout_shows_the_bits_per_value_in_force_per_layer(void **state)
{
	layout_fx *fx = *state;
	dash_knobs *k = &fx->m.snap.knobs;
	char line[81];

	fx->m.view = DASH_VIEW_LAYERS;
	layout_render(fx);
	layout_line(fx, 4, line);
	assert_null(strstr(line, "BITS/V"));

	k->window = 3;
	k->n_metrics = 2;
	dash_copy(k->metrics[0].policy, DASH_NAME_MAX, "gcomp");
	dash_copy(k->metrics[0].name, 32, "bits_per_value");
	dash_copy(k->metrics[0].layer, DASH_NAME_MAX, "conv1.weight");
	k->metrics[0].value = 17.625;
	dash_copy(k->metrics[1].policy, DASH_NAME_MAX, "gcomp");
	dash_copy(k->metrics[1].name, 32, "table_version");
	k->metrics[1].value = 4;
	assert_true(dash_metric_of(&fx->m.snap, "conv1.weight",
			"bits_per_value") == 17.625);
	assert_true(
	    isnan(dash_metric_of(&fx->m.snap, "fc.weight", "bits_per_value")));
	assert_true(dash_metric_of(&fx->m.snap, "", "table_version") == 4);
	layout_render(fx);
	layout_line(fx, 5, line);
	assert_non_null(strstr(line, "BITS/V"));
	assert_non_null(strstr(line, "REGIME"));
	layout_line(fx, 6, line);
	assert_non_null(strstr(line, "conv1.weight"));
	assert_non_null(strstr(line, "17.62"));
	assert_non_null(strstr(line, "critical"));
	layout_line(fx, 7, line);
	assert_non_null(strstr(line, "fc.weight"));
	assert_non_null(strstr(line, " - "));
}

/* resireduce's candidate groups: a line each under the knob line (four
 * at most), the table below them. */
static void
test_layout_shows_a_line_per_residual_group(void **state)
{
	layout_fx *fx = *state;
	dash_knobs *k = &fx->m.snap.knobs;
	static const struct {
		const char *name;  /* metric */
		const char *layer; /* "" = the job */
		double value;
	} mt[] = {
		{ "resid_floats_kept", "", 75488 },
		{ "resid_floats_full", "", 252816 },
		{ "resid_distance", "conv1.weight", 0.19 },
		{ "resid_group_size", "conv1.weight", 4 },
		{ "resid_shared", "conv1.weight", 1 },
		{ "resid_group_size", "fc.weight", 2 },
		{ "resid_shared", "fc.weight", 0 },
	};
	char line[81];

	k->window = 3;
	k->n_metrics = sizeof(mt) / sizeof(mt[0]);
	for (uint32_t i = 0; i < k->n_metrics; i++) {
		dash_copy(k->metrics[i].policy, DASH_NAME_MAX, "resireduce");
		dash_copy(k->metrics[i].name, 32, mt[i].name);
		dash_copy(k->metrics[i].layer, DASH_NAME_MAX, mt[i].layer);
		k->metrics[i].value = mt[i].value;
	}
	fx->m.view = DASH_VIEW_LAYERS;
	layout_render(fx);
	layout_line(fx, 4, line);
	assert_non_null(
	    strstr(line, "resireduce: resid_floats_kept 7.549e+04"));
	layout_line(fx, 5, line);
	assert_non_null(strstr(line,
	    "residual group conv1.weight x4: shared, distance 0.19"));
	layout_line(fx, 6, line);
	assert_non_null(strstr(line, "residual group fc.weight x2: own"));
	layout_line(fx, 7, line);
	assert_non_null(strstr(line, "LAYER"));
}

static void
test_layout_says_when_bellowsd_does_not_answer(void **state)
{
	layout_fx *fx = *state;
	char line[81];

	fx->m.snap.health.connected = false;
	dash_copy(fx->m.snap.health.note, sizeof(fx->m.snap.health.note),
	    "timed out; reconnecting");
	layout_render(fx);
	layout_line(fx, 0, line);
	assert_non_null(strstr(line, "NOT CONNECTED"));
	layout_line(fx, 23, line);
	assert_string_equal(line,
	    "bellowsd not answering at ipc://ctl: timed out; reconnecting");
}

static void
test_layout_help_box_lists_the_keys(void **state)
{
	layout_fx *fx = *state;
	const char *s;

	fx->m.help = true;
	s = layout_render(fx);
	assert_non_null(strstr(s, "filter layers by name"));
	assert_non_null(strstr(s, "pause/resume"));
	assert_non_null(strstr(s, "?, q             this help"));
	assert_non_null(strstr(s, "Esc or Enter closes a layer or decision"));
	/* The legend of the layers view. */
	assert_non_null(strstr(s, "REGIME  Accordion's: critical (r >= eta"));
	assert_non_null(strstr(s, "R       r = |n[w-i] - n[w]| / n[w-i]"));
	assert_non_null(strstr(s, "VS_ETA  that r against the eta"));
	assert_non_null(strstr(s, "crit(LR): critical"));
	assert_non_null(strstr(s, "colours critical stable raw changed level"));
	assert_non_null(strstr(s, "APPLIED level sent at (LEVEL: decided)"));
}

/* Where `needle` starts in `line`, -1 if absent. */
static int
layout_col(const char *line, const char *needle)
{
	const char *p = strstr(line, needle);

	return p != NULL ? (int)(p - line) : -1;
}

/* The --once output of view v on a rows x cols screen into buf; fails
 * the test if a line is wider than the screen or holds anything but
 * printable ASCII. */
static void
layout_print(layout_fx *fx, dash_view v, int rows, int cols, char *buf,
    size_t len)
{
	dash_canvas c;
	FILE *f = tmpfile();
	size_t n;
	int width = 0;

	assert_non_null(f);
	assert_int_equal(dash_canvas_init(&c, rows, cols), 0);
	fx->m.view = v;
	dash_layout_render(&fx->m, &c);
	assert_int_equal(dash_text_print(&c, f), 0);
	dash_canvas_fini(&c);
	rewind(f);
	n = fread(buf, 1, len - 1, f);
	buf[n] = '\0';
	fclose(f);
	for (size_t i = 0; i < n; i++) {
		if (buf[i] == '\n') {
			assert_true(width <= cols);
			width = 0;
		} else {
			assert_true(buf[i] >= 0x20 && buf[i] < 0x7f);
			width++;
		}
	}
}

/* fc.weight was decided level 1 but sent raw (under a size threshold);
 * conv2.weight's applied level was not recorded (an older history): the
 * decided one, marked. */
static void
test_layout_shows_the_level_applied_beside_the_decided_one(void **state)
{
	layout_fx *fx = *state;
	dash_snapshot *s = &fx->m.snap;
	char head[81], line[81];
	const char *all;
	int at;

	s->layers[1].level_applied = 0;
	s->layers[2].level_applied = NAN;
	fx->m.view = DASH_VIEW_LAYERS;
	layout_render(fx);
	layout_line(fx, 4, head);
	at = layout_col(head, "APPLIED");
	assert_true(at > layout_col(head, "LEVEL"));
	for (int row = 5; row < 8; row++) {
		layout_line(fx, row, line);
		if (strstr(line, "conv1.weight") != NULL) {
			assert_int_equal(line[at + 6], '2');
		} else if (strstr(line, "fc.weight") != NULL) {
			assert_int_equal(line[at + 6], '0');
			assert_true(
			    fx->c.attr[row * 80 + at + 6] & DASH_ATTR_RAW);
		} else {
			assert_non_null(strstr(line, "conv2.weight"));
			assert_int_equal(line[at + 5], '4');
			assert_int_equal(line[at + 6], '*');
		}
	}
	fx->m.view = DASH_VIEW_LAYER;
	dash_copy(fx->m.layer, sizeof(fx->m.layer), "fc.weight");
	all = layout_render(fx);
	assert_non_null(strstr(all,
	    "applied: sent at level 0 in the last "
	    "window (raw: below the size threshold"));
	dash_copy(fx->m.layer, sizeof(fx->m.layer), "conv2.weight");
	all = layout_render(fx);
	assert_non_null(strstr(all, "applied: not recorded"));
}

/* Names as long as a snapshot holds, with a tab, a newline and UTF-8 in
 * them, at 80x24 (and 60, 120 columns): each is cut with '~' in its own
 * column, and the columns after it stay where their headings are. */
static void
test_layout_cuts_long_names_and_keeps_every_column(void **state)
{
	layout_fx *fx = *state;
	static const int widths[] = { 80, 60, 120 };
	char name[DASH_NAME_MAX], buf[8192];
	char head[256], row[256];

	memset(name, 'j', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	memcpy(name, "job\twith\nctl", 12);
	dash_copy(fx->m.snap.jobs[1].name, DASH_NAME_MAX, name);
	memset(name, 'p', sizeof(name) - 1);
	dash_copy(fx->m.snap.jobs[0].policy, DASH_NAME_MAX, name);
	memset(name, 'x', sizeof(name) - 1);
	memcpy(name, "encoder.layers.11.attention.\xc3\xa9", 30);
	dash_copy(fx->m.snap.layers[1].name, DASH_NAME_MAX, name);

	for (size_t w = 0; w < sizeof(widths) / sizeof(widths[0]); w++) {
		int cols = widths[w];

		/* Jobs: the long name cut; bert's row keeps ALIVE, STEP and
		 * SENT/RAW under their headings. */
		layout_print(fx, DASH_VIEW_JOBS, 24, cols, buf, sizeof(buf));
		assert_true(
		    sscanf(strstr(buf, " JOB"), "%255[^\n]", head) == 1);
		assert_non_null(strstr(buf, "job with ctl"));
		assert_non_null(strstr(buf, "jjj~"));
		{
			const char *r = strstr(buf, "job with ctl");
			int at;

			assert_true(sscanf(r - 1, "%255[^\n]", row) == 1);
			at = layout_col(head, "ALIVE") + (int)strlen("ALIVE");
			assert_int_equal(layout_col(row, "1/1") + 3, at);
			at = layout_col(head, "SENT/RAW") +
			    (int)strlen("SENT/RAW");
			assert_int_equal(layout_col(row, "-/-") + 3, at);
		}
		/* From 80 columns on, every column is there: the policy
		 * last, cut. */
		if (cols >= 80) {
			assert_true(layout_col(head, "RELOADED") > 0);
			assert_true(layout_col(head, "POLICY") > 0);
			assert_non_null(strstr(buf, "03:00:34 ppp"));
			if (cols == 80)
				assert_non_null(strstr(buf, "p~\n"));
		}

		/* Layers: the long name cut, its level, regime, r, eta and
		 * sparkline under their headings. */
		layout_print(fx, DASH_VIEW_LAYERS, 24, cols, buf, sizeof(buf));
		assert_true(
		    sscanf(strstr(buf, " LAYER"), "%255[^\n]", head) == 1);
		assert_non_null(strstr(buf, " encoder."));
		assert_true(
		    sscanf(strstr(buf, " encoder."), "%255[^\n]", row) == 1);
		assert_non_null(strstr(row, "~ "));
		assert_int_equal(row[layout_col(head, "LEVEL") + 4], '1');
		/* The level applied beside the level decided, but on a
		 * screen too narrow for both and the name. */
		if (cols >= 80)
			assert_int_equal(layout_col(row, " 1 stable") + 1,
			    layout_col(head, "APPLIED") + 6);
		else
			assert_int_equal(layout_col(head, "APPLIED"), -1);
		assert_int_equal(layout_col(row, "stable"),
		    layout_col(head, "REGIME"));
		assert_int_equal(layout_col(row, "0.000 @w10") + 10,
		    layout_col(head, " R VS_ETA") + 2);
		assert_int_equal(layout_col(row, "<0.3"),
		    layout_col(head, "VS_ETA"));
		assert_int_equal(layout_col(row, "===="),
		    layout_col(head, "NORM"));

		/* Every other view with these names: no line wider. */
		for (int v = 0; v < DASH_VIEW_N; v++)
			layout_print(fx, (dash_view)v, 24, cols, buf,
			    sizeof(buf));
	}
}

static void
test_layout_survives_tiny_screens(void **state)
{
	layout_fx *fx = *state;

	for (int v = 0; v < DASH_VIEW_N; v++) {
		dash_canvas c;

		fx->m.view = (dash_view)v;
		assert_int_equal(dash_canvas_init(&c, 3, 10), 0);
		dash_layout_render(&fx->m, &c);
		dash_canvas_fini(&c);
		assert_int_equal(dash_canvas_init(&c, 1, 1), 0);
		dash_layout_render(&fx->m, &c);
		dash_canvas_fini(&c);
	}
}

static void
test_text_prints_the_screen_without_the_key_line(void **state)
{
	layout_fx *fx = *state;
	FILE *f = tmpfile();
	char buf[4096];
	size_t n;

	assert_non_null(f);
	fx->m.view = DASH_VIEW_LAYERS;
	dash_layout_render(&fx->m, &fx->c);
	assert_int_equal(dash_text_print(&fx->c, f), 0);
	rewind(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	assert_non_null(strstr(buf, "conv2.weight"));
	assert_null(strstr(buf, "q quit"));
	assert_null(strstr(buf, " \n"));
	assert_int_equal(buf[n - 1], '\n');
	assert_non_null(strstr(buf, "fc.weight"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
		    test_layout_jobs_view_shows_health_and_every_job,
		    layout_setup, layout_teardown),
		cmocka_unit_test_setup_teardown(
		    test_layout_ranks_view_marks_the_lost_rank, layout_setup,
		    layout_teardown),
		cmocka_unit_test_setup_teardown(
		    test_layout_layers_view_shows_level_regime_r_and_norms,
		    layout_setup, layout_teardown),
		cmocka_unit_test_setup_teardown(
		    test_layout_shows_the_level_applied_beside_the_decided_one,
		    layout_setup, layout_teardown),
		cmocka_unit_test_setup_teardown(
		    test_layout_decisions_view_shows_newest_reason_first,
		    layout_setup, layout_teardown),
		cmocka_unit_test_setup_teardown(
		    test_layout_colours_regimes_levels_changes_with_a_legend,
		    layout_setup, layout_teardown),
		cmocka_unit_test_setup_teardown(
		    test_layout_without_a_regime_shows_the_policys_own_knob,
		    layout_setup, layout_teardown),
		cmocka_unit_test_setup_teardown(
		    test_layout_decision_detail_wraps_the_whole_reason,
		    layout_setup, layout_teardown),
		cmocka_unit_test(test_layout_wrap_breaks_at_words_and_clauses),
		cmocka_unit_test_setup_teardown(
		    test_layout_events_and_layer_detail, layout_setup,
		    layout_teardown),
		cmocka_unit_test_setup_teardown(
		    test_layout_header_shows_the_decision_latency, layout_setup,
		    layout_teardown),
		cmocka_unit_test_setup_teardown(
		    test_layout_shows_bounds_threshold_and_policy_metrics,
		    layout_setup, layout_teardown),
		cmocka_unit_test_setup_teardown(
		    test_layout_shows_the_bits_per_value_in_force_per_layer,
		    layout_setup, layout_teardown),
		cmocka_unit_test_setup_teardown(
		    test_layout_shows_a_line_per_residual_group, layout_setup,
		    layout_teardown),
		cmocka_unit_test_setup_teardown(
		    test_layout_says_when_bellowsd_does_not_answer,
		    layout_setup, layout_teardown),
		cmocka_unit_test_setup_teardown(
		    test_layout_help_box_lists_the_keys, layout_setup,
		    layout_teardown),
		cmocka_unit_test_setup_teardown(
		    test_layout_cuts_long_names_and_keeps_every_column,
		    layout_setup, layout_teardown),
		cmocka_unit_test_setup_teardown(
		    test_layout_survives_tiny_screens, layout_setup,
		    layout_teardown),
		cmocka_unit_test_setup_teardown(
		    test_text_prints_the_screen_without_the_key_line,
		    layout_setup, layout_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
