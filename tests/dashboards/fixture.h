/* fixture - a hand-built snapshot for the dashboard tests: two jobs, the
 * first with three ranks (rank 2 lost), three layers and two decisions,
 * one of them Accordion's comparison of windows 10 and 8 (eta 0.3), with
 * each layer's r as judged at window 10; conv1.weight's level changed in
 * the last window; and a model showing it on a canvas of a given size.
 */
#ifndef TEST_DASH_FIXTURE_H
#define TEST_DASH_FIXTURE_H

#include "dashboards/layout.h"
#include "dashboards/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void
fixture_layer(dash_layer *l, uint32_t idx, const char *name, uint64_t numel,
    double level, double level_max, double n0, double step)
{
	l->idx = idx;
	dash_copy(l->name, sizeof(l->name), name);
	l->numel = numel;
	l->level = level;
	l->level_applied = level;
	l->level_prev = level;
	l->level_max = level_max;
	l->error_bound = NAN;
	l->r = NAN;
	l->r_window = DASH_NONE;
	l->r_eta = NAN;
	l->n_norms = 5;
	for (uint32_t i = 0; i < 5; i++)
		l->norms[i] = n0 + step * i;
}

/* Fills *s; free with dash_snapshot_fini. */
static void
fixture_snapshot(dash_snapshot *s)
{
	memset(s, 0, sizeof(*s));
	s->health.live = true;
	s->health.connected = true;
	dash_copy(s->health.where, sizeof(s->health.where), "ipc://ctl");
	s->health.reports_per_s = 12.5;
	s->health.decisions_per_s = 1;
	s->health.latency_ms = NAN;
	s->health.latency_p99_ms = NAN;
	s->n_jobs = 2;
	s->jobs = calloc(2, sizeof(*s->jobs));
	dash_copy(s->jobs[0].name, DASH_NAME_MAX, "resnet");
	s->jobs[0].alive = 2;
	s->jobs[0].world = 3;
	s->jobs[0].step = 120;
	s->jobs[0].window = 11;
	s->jobs[0].step_ms = 2.5;
	s->jobs[0].bytes_sent = 99800;
	s->jobs[0].bytes_raw = 1228800;
	dash_copy(s->jobs[0].policy, DASH_NAME_MAX, "accordion");
	dash_copy(s->jobs[0].reloaded, 16, "03:00:34");
	dash_copy(s->jobs[1].name, DASH_NAME_MAX, "bert");
	s->jobs[1].alive = 1;
	s->jobs[1].world = 1;
	s->jobs[1].window = DASH_NONE;
	s->jobs[1].step_ms = NAN;
	s->jobs[1].bytes_sent = DASH_NONE;
	s->jobs[1].bytes_raw = DASH_NONE;
	dash_copy(s->job, sizeof(s->job), "resnet");
	s->n_ranks = 3;
	s->ranks = calloc(3, sizeof(*s->ranks));
	for (uint32_t i = 0; i < 3; i++) {
		s->ranks[i].rank = i;
		s->ranks[i].alive = i != 2;
		s->ranks[i].step = 120 - 10 * (i == 2);
		s->ranks[i].step_ms = 2.5;
		s->ranks[i].seen_ms = 100;
	}
	s->n_layers = 3;
	s->layers = calloc(3, sizeof(*s->layers));
	/* norms 10, 11, 12, 13, 14: r over interval 2 = |12 - 14| / 12. */
	fixture_layer(&s->layers[0], 0, "conv1.weight", 2048, 2, 2, 10, 1);
	fixture_layer(&s->layers[1], 1, "fc.weight", 8192, 1, 2, 5, 0);
	fixture_layer(&s->layers[2], 2, "conv2.weight", 4096, 4, 4, 20, -2);
	/* The r that decided each regime, at the check of window 10 (the
	 * norms above are of later windows: r is not theirs). */
	s->layers[0].r = 0.4;
	s->layers[1].r = 0;
	s->layers[2].r = 0.5;
	for (uint32_t i = 0; i < 3; i++) {
		s->layers[i].r_window = 10;
		s->layers[i].r_eta = 0.3;
	}
	s->layers[0].level_prev = 1;
	s->n_decisions = 2;
	s->decisions = calloc(2, sizeof(*s->decisions));
	s->decisions[0].seq = 11;
	s->decisions[0].window = 10;
	dash_copy(s->decisions[0].reason, DASH_REASON_MAX, "no change");
	s->decisions[1].seq = 12;
	s->decisions[1].window = 11;
	s->decisions[1].n_changes = 3;
	dash_copy(s->decisions[1].policy, DASH_NAME_MAX, "accordion");
	dash_copy(s->decisions[1].reason, DASH_REASON_MAX,
	    "window 10 vs window 8 (eta 0.3): 2 critical (level 2), "
	    "1 stable (level 1); stable: fc.weight r=0");
	s->n_events = 1;
	s->events = calloc(1, sizeof(*s->events));
	dash_copy(s->events[0].kind, 32, "rank_lost");
	dash_copy(s->events[0].job, DASH_NAME_MAX, "resnet");
	dash_copy(s->events[0].text, DASH_TEXT_MAX,
	    "rank 2 lost at step 110 (2/3 alive)");
	s->acc_interval = 2;
	s->acc_eta = 0.3;
	s->window_lo = DASH_NONE;
	s->window_hi = DASH_NONE;
	s->window_at = DASH_NONE;
}

/* A model holding the fixture snapshot, and a rows x cols canvas: a
 * cmocka setup's work. Returns 0, or -1 when the canvas cannot be made. */
static inline int
fixture_screen_open(dash_model *m, dash_canvas *c, int rows, int cols)
{
	dash_snapshot s;

	dash_model_init(m, false);
	fixture_snapshot(&s);
	dash_model_update(m, &s);
	return dash_canvas_init(c, rows, cols) != 0 ? -1 : 0;
}

/* Frees what fixture_screen_open made. */
static inline void
fixture_screen_close(dash_model *m, dash_canvas *c)
{
	dash_canvas_fini(c);
	dash_model_fini(m);
}

#endif /* TEST_DASH_FIXTURE_H */
