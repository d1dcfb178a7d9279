/* store_recover - reading runs back from the history: the live runs
 * when bellowsd starts (ctl_store_recover, on the loop's thread before
 * the writer starts, on the writer's connection) and one run when a
 * launch resumes it from a checkpoint (ctl_store_load_run, on a
 * connection of its own while the writer runs, on the resume's own
 * thread). Both hand the run, its newest decisions and every recorded
 * window, as the policies saw it, to the job table's callbacks
 * (store.h).
 */
#include "store_int.h"

#include "history/hist_read.h"
#include "policyhost/log.h"

#include <bellows/error.h>

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- recovery ---------------------------------------------------------- */

static double
store_col_real(sqlite3_stmt *st, int i)
{
	return sqlite3_column_type(st, i) == SQLITE_NULL
	    ? NAN
	    : sqlite3_column_double(st, i);
}

static uint64_t
store_col_u64(sqlite3_stmt *st, int i)
{
	int64_t v = sqlite3_column_int64(st, i);

	return v < 0 ? 0 : (uint64_t)v;
}

/* Reads n little-endian doubles from a BLOB column; false if its size is
 * not n * 8. */
static bool
store_col_doubles(sqlite3_stmt *st, int i, double *out, uint32_t n)
{
	const uint8_t *p = sqlite3_column_blob(st, i);
	int len = sqlite3_column_bytes(st, i);

	if (len != (int)(n * 8) || (n > 0 && p == NULL))
		return false;
	for (uint32_t k = 0; k < n; k++) {
		uint64_t bits = 0;

		for (int b = 0; b < 8; b++)
			bits |= (uint64_t)p[k * 8 + b] << (8 * b);
		memcpy(&out[k], &bits, 8);
	}
	return true;
}

/* Reads a decision's residual plan from columns i .. i + 3 (group, phi,
 * rows, cols: n_layers doubles each) into d; NULL, or why it cannot. */
static const char *
store_col_resid_plan(sqlite3_stmt *st, int i, com_decision *d)
{
	double *group = malloc(
	    sizeof(double) * (d->n_layers ? d->n_layers : 1));
	const char *why = NULL;

	if (group == NULL || com_resid_plan_alloc(d) != 0)
		store_oom();
	if (!store_col_doubles(st, i, group, d->n_layers) ||
	    !store_col_doubles(st, i + 1, d->resid_phi, d->n_layers) ||
	    !store_col_doubles(st, i + 2, d->resid_rows, d->n_layers) ||
	    !store_col_doubles(st, i + 3, d->resid_cols, d->n_layers))
		why = "a decision's residual plan cannot be read";
	for (uint32_t l = 0; why == NULL && l < d->n_layers; l++) {
		if (!(group[l] >= 0 && group[l] < (double)d->n_layers))
			why = "a decision's residual plan names no layer";
		else
			d->resid_group[l] = (uint32_t)group[l];
	}
	if (why == NULL &&
	    !com_resid_plan_valid(d->n_layers, d->resid_group, d->resid_phi,
		d->resid_rows, d->resid_cols))
		why = "a decision's residual plan is not a valid one";
	free(group);
	return why;
}

static char *
store_col_strdup(sqlite3_stmt *st, int i)
{
	const char *t = (const char *)sqlite3_column_text(st, i);

	return store_strdup(t != NULL ? t : "");
}

typedef struct store_loaded {
	ctl_store_run run;       /* what the callback sees */
	int64_t below;           /* windows read: those below this */
	bool at_start;           /* read by a restarted daemon, whose
				  * agents may still keep reports */
	ctl_store_span *missing; /* owned, run.missing */
	com_layer_info *layers;  /* owned */
	com_decision *decisions; /* owned */
	char *run_key;           /* owned, runs.run_key */
	uint32_t n_decisions;    /* entries filled */
	bool *alive;             /* owned, world flags */
	char why[256];           /* why it cannot be read, "" = it can */
} store_loaded;

static void
store_loaded_fini(store_loaded *ld)
{
	for (uint32_t l = 0; ld->layers != NULL && l < ld->run.n_layers; l++)
		free(ld->layers[l].name);
	for (uint32_t i = 0; i < ld->n_decisions; i++)
		com_decision_fini(&ld->decisions[i]);
	free(ld->layers);
	free(ld->decisions);
	free(ld->alive);
	free(ld->run_key);
	free(ld->missing);
}

/* Reads the run's layer table through the history reader (the checks
 * replay makes). Returns NULL, or why the run cannot be recovered
 * (ld->why holds the text). */
static const char *
store_load_layers(store_writer *w, store_loaded *ld)
{
	com_layer_info *layers = NULL;
	uint32_t n = 0;
	int r = hist_layers_read(w->db, ld->run.id, &layers, &n, ld->why,
	    sizeof(ld->why));

	if (r == BELLOWS_ENOMEM)
		store_oom();
	if (r != 0)
		return ld->why;
	if (n != ld->run.n_layers) {
		snprintf(ld->why, sizeof(ld->why),
		    "its layer table has %u layers, the run %u", n,
		    ld->run.n_layers);
		hist_layers_free(&layers, n);
		return ld->why;
	}
	ld->layers = layers;
	return NULL;
}

static const char *
store_load_decisions(store_writer *w, store_loaded *ld, uint32_t max)
{
	sqlite3_stmt *st = store_select(w,
	    "SELECT seq, apply_step, window, policy, reason, n_layers, levels, "
	    "error_bounds, batch_size, lr_scale, size_threshold, "
	    "compression_off, codec_table, calibrate_steps, resid_group, "
	    "resid_phi, resid_rows, resid_cols FROM decisions "
	    "WHERE run_id = ?1 AND window <= ?3 ORDER BY seq DESC LIMIT ?2",
	    ld->run.id, max);
	const char *why = NULL;
	uint32_t n = 0;

	if (st == NULL)
		return "cannot read its decisions";
	/* A decision's window is the one it answers + 1. */
	sqlite3_bind_int64(st, 3, ld->below);
	ld->decisions = calloc(max ? max : 1, sizeof(*ld->decisions));
	if (ld->decisions == NULL)
		store_oom();
	while (why == NULL && n < max && sqlite3_step(st) == SQLITE_ROW) {
		com_decision *d = &ld->decisions[n];
		const void *ct = sqlite3_column_blob(st, 12);
		int ct_len = sqlite3_column_bytes(st, 12);

		if (sqlite3_column_int64(st, 5) != ld->run.n_layers) {
			why = "a decision's layer count differs from the run's";
			break;
		}
		if (com_decision_init(d, ld->run.job, ld->run.n_layers) != 0)
			store_oom();
		ld->n_decisions = ++n;
		d->seq = store_col_u64(st, 0);
		d->apply_step = store_col_u64(st, 1);
		d->window = store_col_u64(st, 2);
		d->policy = store_col_strdup(st, 3);
		d->reason = store_col_strdup(st, 4);
		if (!store_col_doubles(st, 6, d->level, d->n_layers) ||
		    !store_col_doubles(st, 7, d->error_bound, d->n_layers)) {
			why = "a decision's levels cannot be read";
			break;
		}
		d->batch_size = (uint32_t)sqlite3_column_int64(st, 8);
		d->lr_scale = store_col_real(st, 9);
		d->size_threshold = store_col_u64(st, 10);
		d->compression_off = sqlite3_column_int(st, 11) != 0;
		d->calibrate_steps = store_col_u64(st, 13);
		if (ct != NULL && ct_len > 0) {
			d->codec_table = malloc((size_t)ct_len);
			if (d->codec_table == NULL)
				store_oom();
			memcpy(d->codec_table, ct, (size_t)ct_len);
			d->codec_table_len = (size_t)ct_len;
		}
		if (sqlite3_column_type(st, 14) != SQLITE_NULL &&
		    (why = store_col_resid_plan(st, 14, d)) != NULL)
			break;
	}
	sqlite3_finalize(st);
	if (why != NULL)
		return why;
	if (n == 0)
		return "it has no decision";
	/* Read newest first; the log wants ascending seqs. */
	for (uint32_t i = 0; i < n / 2; i++) {
		com_decision t = ld->decisions[i];

		ld->decisions[i] = ld->decisions[n - 1 - i];
		ld->decisions[n - 1 - i] = t;
	}
	return NULL;
}

/* Which ranks were there when the run was last written: those whose
 * latest rank event is a join. */
static void
store_load_ranks(store_writer *w, store_loaded *ld)
{
	sqlite3_stmt *st = store_select(w,
	    "SELECT rank, kind FROM rank_events WHERE run_id = ?1 ORDER BY "
	    "rowid",
	    ld->run.id, 0);

	ld->alive = calloc(ld->run.world, sizeof(*ld->alive));
	if (ld->alive == NULL)
		store_oom();
	while (st != NULL && sqlite3_step(st) == SQLITE_ROW) {
		int64_t r = sqlite3_column_int64(st, 0);
		const char *kind = (const char *)sqlite3_column_text(st, 1);

		if (r >= 0 && r < (int64_t)ld->run.world && kind != NULL)
			ld->alive[r] = strcmp(kind, "joined") == 0 ||
			    strcmp(kind, "rejoined") == 0;
	}
	sqlite3_finalize(st);
}

/* next_window and max_step from the decisions and windows recorded. */
static void
store_load_position(store_writer *w, store_loaded *ld)
{
	sqlite3_stmt *st = store_select(w,
	    "SELECT (SELECT coalesce(max(window), 0) FROM decisions WHERE "
	    "run_id = ?1 AND window <= ?3), (SELECT coalesce(max(window) + 1, "
	    "0) FROM window_info WHERE run_id = ?1 AND window < ?3), (SELECT "
	    "coalesce(max(last_step), 0) FROM window_info WHERE run_id = ?1 "
	    "AND window < ?3), (SELECT coalesce(max(seq), 0) FROM decisions "
	    "WHERE run_id = ?1), (SELECT run_key FROM runs WHERE id = ?1)",
	    ld->run.id, 0);
	uint64_t a, b;

	if (st != NULL)
		sqlite3_bind_int64(st, 3, ld->below);
	if (st != NULL && sqlite3_step(st) == SQLITE_ROW) {
		a = store_col_u64(st, 0);
		b = store_col_u64(st, 1);
		ld->run.next_window = a > b ? a : b;
		ld->run.max_step = store_col_u64(st, 2);
		ld->run.last_seq = store_col_u64(st, 3);
		ld->run_key = store_col_strdup(st, 4);
	}
	sqlite3_finalize(st);
}

/* The windows from runs.windows_closed up to next_window the run does
 * not hold, as spans: a daemon killed while windows were late, or while
 * a window's rows waited for their commit, recorded newer windows than
 * those, and the agents keep their reports until windows_closed passes
 * them. A run written before the column (NULL) has none. */
static void
store_load_missing(store_writer *w, store_loaded *ld)
{
	sqlite3_stmt *st = store_select(w,
	    "SELECT windows_closed FROM runs WHERE id = ?1", ld->run.id, 0);
	uint64_t from = 0, to = ld->run.next_window;
	uint32_t cap = 0;
	bool known;

	known = st != NULL && sqlite3_step(st) == SQLITE_ROW &&
	    sqlite3_column_type(st, 0) != SQLITE_NULL;
	if (known)
		from = store_col_u64(st, 0);
	sqlite3_finalize(st);
	if (!known || from >= to)
		return;
	st = store_select(w,
	    "SELECT window FROM window_info WHERE run_id = ?1 AND window >= "
	    "?2 AND window < ?3 ORDER BY window",
	    ld->run.id, 0);
	if (st == NULL)
		return;
	sqlite3_bind_int64(st, 2, (int64_t)from);
	sqlite3_bind_int64(st, 3, (int64_t)to);
	while (from < to) {
		uint64_t held = to;

		if (sqlite3_step(st) == SQLITE_ROW)
			held = store_col_u64(st, 0);
		if (held > from) {
			if (ld->run.n_missing == cap) {
				cap = cap ? 2 * cap : 4;
				ld->missing = realloc(ld->missing,
				    cap * sizeof(*ld->missing));
				if (ld->missing == NULL)
					store_oom();
			}
			ld->missing[ld->run.n_missing++] = (ctl_store_span){
				.from = from,
				.to = held
			};
		}
		from = held + 1;
	}
	sqlite3_finalize(st);
	ld->run.missing = ld->missing;
}

/* Streams the run's windows into ops->window, as the history reader
 * (hist_read.h) rebuilds them, with the state in force during each. */
static uint64_t
store_load_windows(store_writer *w, store_loaded *ld,
    const ctl_store_recover_ops *ops, void *arg, void *ctx)
{
	uint32_t n = ld->run.n_layers;
	hist_windows *c = NULL;
	com_decision in_force;
	char err[256];
	uint64_t count = 0;
	int r;

	if (com_decision_init(&in_force, ld->run.job, n) != 0)
		store_oom();
	r = hist_windows_open(w->db, ld->run.id, (uint64_t)ld->below,
	    ld->layers, n, &c, err, sizeof(err));
	if (r == BELLOWS_ENOMEM)
		store_oom();
	if (r != 0)
		ctl_log(CTL_LOG_WARN, "store", "'%s': %s", w->path, err);
	while (r == 0) {
		bellows_window v;
		hist_state st;
		uint32_t rows;

		r = hist_windows_next(c, &v, &st, &rows, err, sizeof(err));
		if (r == BELLOWS_ENOMEM)
			store_oom();
		if (r < 0)
			ctl_log(CTL_LOG_WARN, "store", "'%s': %s", w->path,
			    err);
		if (r != 1)
			break;
		r = 0;
		v.job = ld->run.job;
		in_force.apply_step = st.apply_step;
		in_force.calibrate_steps = st.calibrate_steps;
		in_force.batch_size = st.batch_size;
		in_force.lr_scale = v.lr_scale;
		in_force.size_threshold = st.size_threshold;
		in_force.compression_off = st.compression_off;
		for (uint32_t l = 0; l < n; l++) {
			in_force.level[l] = v.layers[l].level;
			in_force.error_bound[l] = v.layers[l].error_bound;
		}
		if (!ops->window(arg, ctx, &v, &in_force))
			break;
		count++;
	}
	hist_windows_close(&c);
	com_decision_fini(&in_force);
	return count;
}

/* Reads run ld->run.id (job, world and layer count filled in) from w,
 * its windows below ld->below, into the callbacks. Returns 1 when the
 * run was handed to ops->run, 0 when it could not be read (logged) or
 * ops->run refused it. */
static uint32_t
store_hand_run(store_writer *w, store_loaded *ld, uint32_t max_decisions,
    const ctl_store_recover_ops *ops, void *arg)
{
	const char *why;
	void *ctx = NULL;
	uint64_t n;

	why = ld->run.world == 0 || ld->run.n_layers == 0
	    ? "it has no ranks or no layers"
	    : store_load_layers(w, ld);
	if (why == NULL)
		why = store_load_decisions(w, ld,
		    max_decisions ? max_decisions : 1);
	if (why != NULL) {
		ctl_log(CTL_LOG_WARN, "store",
		    "'%s': run %" PRId64 " of job '%s' cannot be read: %s",
		    w->path, ld->run.id, ld->run.job, why);
		return 0;
	}
	store_load_position(w, ld);
	store_load_ranks(w, ld);
	if ((uint64_t)ld->below < ld->run.next_window)
		ld->run.next_window = (uint64_t)ld->below;
	if (ld->at_start)
		store_load_missing(w, ld);
	ld->run.alive = ld->alive;
	ld->run.layers = ld->layers;
	ld->run.decisions = ld->decisions;
	ld->run.n_decisions = ld->n_decisions;
	ld->run.run_key = ld->run_key != NULL ? ld->run_key : "";
	if (ops->run(arg, &ld->run, &ctx) != 0)
		return 0;
	n = store_load_windows(w, ld, ops, arg, ctx);
	ops->end(arg, ctx, n);
	return 1;
}

/* Fills ld->run's id, job, world, layer count and configuration hash
 * from a row of "SELECT id, job, world, n_layers, config_hash". */
static void
store_loaded_row(store_loaded *ld, sqlite3_stmt *runs)
{
	const char *hash = (const char *)sqlite3_column_text(runs, 4);

	ld->run.id = sqlite3_column_int64(runs, 0);
	ld->run.job = store_col_strdup(runs, 1);
	ld->run.world = (uint32_t)sqlite3_column_int64(runs, 2);
	ld->run.n_layers = (uint32_t)sqlite3_column_int64(runs, 3);
	snprintf(ld->run.config_hash, sizeof(ld->run.config_hash), "%s",
	    hash != NULL ? hash : "");
}

uint32_t
ctl_store_recover(ctl_store *s, uint32_t max_decisions,
    const ctl_store_recover_ops *ops, void *arg)
{
	sqlite3_stmt *runs;
	uint32_t handed = 0;

	if (s == NULL || s->w.db == NULL)
		return 0;
	assert(!s->writer_started);
	runs = store_select(&s->w,
	    "SELECT id, job, world, n_layers, config_hash FROM runs WHERE "
	    "ended_wall_ms IS NULL ORDER BY id DESC",
	    0, 0);
	while (runs != NULL && sqlite3_step(runs) == SQLITE_ROW) {
		store_loaded ld = { .below = INT64_MAX, .at_start = true };

		store_loaded_row(&ld, runs);
		handed += store_hand_run(&s->w, &ld, max_decisions, ops, arg);
		free((char *)ld.run.job);
		store_loaded_fini(&ld);
	}
	sqlite3_finalize(runs);
	return handed;
}

int
ctl_store_load_run(ctl_store *s, int64_t run, const char *job, uint64_t below,
    uint32_t max_decisions, const ctl_store_recover_ops *ops, void *arg)
{
	store_writer rd = { 0 };
	sqlite3_stmt *st;
	int r = BELLOWS_ENOTFOUND;

	if (s == NULL || s->w.path == NULL)
		return BELLOWS_ENOTFOUND;
	/* A connection of the caller's own: the writer thread keeps its
	 * own, and WAL lets this one read what is committed meanwhile.
	 * Only this thread ever uses it, so without SQLite's per-call
	 * mutex, which cost a long read-back a fifth of its CPU (a lock
	 * and an unlock for each of a window's column reads). */
	rd.path = s->w.path;
	if (sqlite3_open_v2(s->w.path, &rd.db,
		SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX,
		NULL) != SQLITE_OK) {
		ctl_log(CTL_LOG_WARN, "store", "'%s': cannot read: %s",
		    s->w.path, rd.db != NULL ? sqlite3_errmsg(rd.db) : "");
		sqlite3_close(rd.db);
		return BELLOWS_EIO;
	}
	sqlite3_busy_timeout(rd.db, STORE_BUSY_MS);
	st = run != 0 ? store_select(&rd,
			    "SELECT id, job, world, n_layers, config_hash "
			    "FROM runs WHERE id = ?1",
			    run, 0)
		      : store_select(&rd,
			    "SELECT id, job, world, n_layers, config_hash "
			    "FROM runs WHERE job = ?3 ORDER BY id DESC LIMIT 1",
			    0, 0);
	if (st == NULL) {
		r = BELLOWS_EIO;
	} else {
		if (run == 0)
			store_bind_text(st, 3, job != NULL ? job : "");
		if (sqlite3_step(st) == SQLITE_ROW) {
			store_loaded ld = {
				.below = below > INT64_MAX ? INT64_MAX
							   : (int64_t)below,
			};

			store_loaded_row(&ld, st);
			r = store_hand_run(&rd, &ld, max_decisions, ops, arg)
			    ? 0
			    : BELLOWS_EIO;
			free((char *)ld.run.job);
			store_loaded_fini(&ld);
		}
	}
	sqlite3_finalize(st);
	sqlite3_close(rd.db);
	return r;
}
