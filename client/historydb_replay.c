/* historydb_replay - a recorded run as replay input, see historydb.h.
 *
 * This file owns tool_hdb_replay: loading one run's layers, windows
 * (through the history reader, the checks bellowsd's recovery makes),
 * decided plans and codec-table hashes into per-window arrays, and
 * freeing them. The connection, the views it reads (hdb_decisions) and
 * the error buffer belong to historydb.c (historydb_int.h).
 */
#include "historydb.h"
#include "historydb_int.h"
#include "history/hist_cols.h"
#include "history/hist_read.h"

#include <bellows/error.h>
#include <bellows/policy.h>

#include <sqlite3.h>

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
	for (uint64_t i = 0; t->layer_stats != NULL && i < t->n_taken; i++) {
		uint32_t n_arr, len;
		const hist_array *ha = hist_arrays(&n_arr);

		for (uint32_t k = 0; k < n_arr; k++)
			free((void *)hist_array_get(&ha[k], &t->layer_stats[i],
			    &len));
	}
	free(t->layer_stats);
	free(t->comm);
	free(t->apply_step);
	free(t->calibrate_steps);
	free(t->size_threshold);
	free(t->compression_off);
	free(t->resid_plan);
	free(t->table_hash);
	free(t);
	*rp = NULL;
}

/* The run's layer table, through the history reader (the checks
 * bellowsd's recovery makes). */
static int
hdb_replay_layers(tool_hdb *db, int64_t run, tool_hdb_replay *rp)
{
	return hist_layers_read(db->db, run, &rp->layers, &rp->n_layers,
	    db->err, sizeof(db->err));
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
	HDB_GROW(table_hash, nc);
#undef HDB_GROW
	*cap = nc;
	return 0;
}

/* Takes the window the history reader read into slot n: what bellowsd
 * handed the policies (layers' names and shapes unset, as replay sets
 * its own) and the state in force; its collectives are appended to
 * rp->comm, and *comm_at[n] says where they start. */
static int
hdb_replay_take(tool_hdb_replay *rp, uint64_t n, const bellows_window *v,
    const hist_state *st, uint64_t *comm_at, uint64_t *cap_comm)
{
	uint32_t nl = rp->n_layers, n_arr;
	const hist_array *ha = hist_arrays(&n_arr);
	bool oom = false;

	rp->window[n] = v->window;
	rp->lr[n] = v->lr;
	rp->lr_next[n] = v->lr_next;
	rp->batch_size[n] = st->batch_size;
	rp->lr_scale[n] = v->lr_scale;
	rp->size_threshold[n] = st->size_threshold;
	rp->compression_off[n] = st->compression_off;
	rp->apply_step[n] = st->apply_step;
	rp->calibrate_steps[n] = st->calibrate_steps;
	rp->win[n] = *v;
	rp->win[n].layers = NULL;
	rp->win[n].comm = NULL;
	for (uint32_t l = 0; l < nl; l++) {
		size_t at = (size_t)n * nl + l;
		bellows_window_layer *x = &rp->layer_stats[at];

		*x = v->layers[l];
		x->name = NULL;
		x->numel = 0;
		x->ndim = 0;
		x->shape = NULL;
		/* The cursor's arrays are overwritten by the next window. */
		for (uint32_t k = 0; k < n_arr; k++) {
			uint32_t len;
			const uint64_t *a = hist_array_get(&ha[k], x, &len);
			uint64_t *copy = a != NULL
			    ? malloc(sizeof(uint64_t) * len)
			    : NULL;

			if (copy != NULL)
				memcpy(copy, a, sizeof(uint64_t) * len);
			hist_array_set(&ha[k], x, copy);
			if (a != NULL && copy == NULL)
				oom = true;
		}
		rp->n_taken = at + 1;
		if (oom)
			return BELLOWS_ENOMEM;
		rp->norm_rank0[at] = x->grad_norm_rank0;
		rp->norm_mean[at] = x->grad_norm_mean;
		rp->level[at] = x->level;
	}
	comm_at[n] = rp->n_comm;
	if (rp->n_comm + v->n_comm > *cap_comm) {
		uint64_t nc = *cap_comm ? 2 * *cap_comm : 256;
		bellows_comm_sample *g;

		while (nc < rp->n_comm + v->n_comm)
			nc *= 2;
		if (nc > SIZE_MAX / sizeof(*g) ||
		    (g = realloc(rp->comm, sizeof(*g) * nc)) == NULL)
			return BELLOWS_ENOMEM;
		rp->comm = g;
		*cap_comm = nc;
	}
	if (v->n_comm > 0)
		memcpy(rp->comm + rp->n_comm, v->comm,
		    sizeof(*v->comm) * v->n_comm);
	rp->n_comm += v->n_comm;
	return 0;
}

uint64_t
tool_table_hash(const uint8_t *t, size_t n)
{
	uint64_t h = 1469598103934665603ull;

	if (t == NULL || n == 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		h = (h ^ t[i]) * 1099511628211ull;
	return h != 0 ? h : 1;
}

/* The hash of the codec table of run `run`'s decision applied at
 * `apply_step` (the latest such), 0 when none or it has none. */
static uint64_t
hdb_table_at(sqlite3_stmt *st, int64_t run, uint64_t apply_step)
{
	uint64_t h = 0;

	if (st == NULL)
		return 0;
	sqlite3_reset(st);
	sqlite3_bind_int64(st, 1, run);
	sqlite3_bind_int64(st, 2,
	    apply_step > INT64_MAX ? INT64_MAX : (int64_t)apply_step);
	if (sqlite3_step(st) == SQLITE_ROW &&
	    sqlite3_column_type(st, 0) == SQLITE_BLOB)
		h = tool_table_hash(sqlite3_column_blob(st, 0),
		    (size_t)sqlite3_column_bytes(st, 0));
	return h;
}

/* The run's closed windows through the history reader (hist_read.h),
 * the same code bellowsd's recovery reads them with; a window lacking
 * the row of some layer is skipped and counted. */
static int
hdb_replay_windows(tool_hdb *db, int64_t run, tool_hdb_replay *rp)
{
	hist_windows *c = NULL;
	sqlite3_stmt *tables = NULL;
	uint64_t cap = 0, cap_comm = 0, n = 0, closed = 0;
	uint64_t *comm_at = NULL;
	char err[256];
	int r;

	r = hist_windows_open(db->db, run, UINT64_MAX, rp->layers, rp->n_layers,
	    &c, err, sizeof(err));
	if (r != 0)
		return tool_hdb_fail(db, r, "%s", err);
	/* Files of any version have decisions.codec_table; NULL if not. */
	if (sqlite3_prepare_v2(db->db,
		"SELECT codec_table FROM decisions WHERE run_id = ?1 AND "
		"apply_step = ?2 ORDER BY seq DESC LIMIT 1",
		-1, &tables, NULL) != SQLITE_OK)
		tables = NULL;
	for (;;) {
		bellows_window v;
		hist_state st;
		uint32_t rows;

		r = hist_windows_next(c, &v, &st, &rows, err, sizeof(err));
		if (r < 0) {
			r = tool_hdb_fail(db, r, "run %" PRId64 ": %s", run,
			    err);
			goto out;
		}
		if (r == 0)
			break;
		r = 0;
		closed++;
		if (rows < rp->n_layers)
			continue;
		if (n == cap) {
			uint64_t *g;

			if (hdb_replay_grow(rp, n, &cap) != 0 ||
			    (g = realloc(comm_at, sizeof(*g) * cap)) == NULL) {
				r = tool_hdb_fail(db, BELLOWS_ENOMEM,
				    "out of memory");
				goto out;
			}
			comm_at = g;
		}
		if (hdb_replay_take(rp, n, &v, &st, comm_at, &cap_comm) != 0) {
			r = tool_hdb_fail(db, BELLOWS_ENOMEM, "out of memory");
			goto out;
		}
		rp->table_hash[n] = hdb_table_at(tables, run, st.apply_step);
		n++;
	}
	rp->n_windows = n;
	rp->n_skipped = closed - n;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t end = i + 1 < n ? comm_at[i + 1] : rp->n_comm;

		rp->win[i].layers = rp->layer_stats + (size_t)i * rp->n_layers;
		rp->win[i].n_comm = (uint32_t)(end - comm_at[i]);
		rp->win[i].comm = end > comm_at[i] ? &rp->comm[comm_at[i]]
						   : NULL;
	}
out:
	sqlite3_finalize(tables);
	hist_windows_close(&c);
	free(comm_at);
	return r;
}

/* Column i of a decision row: n little-endian doubles into out, or, for a
 * NULL, `def` for each (def < 0: the layer's index). False for a BLOB of
 * another size. */
static bool
hdb_plan_col(sqlite3_stmt *st, int i, uint32_t n, double def, double *out)
{
	const uint8_t *p = sqlite3_column_blob(st, i);
	int len = sqlite3_column_bytes(st, i);

	if (sqlite3_column_type(st, i) == SQLITE_NULL) {
		for (uint32_t l = 0; l < n; l++)
			out[l] = def < 0 ? (double)l : def;
		return true;
	}
	if (len != (int)(n * 8) || p == NULL)
		return false;
	for (uint32_t l = 0; l < n; l++) {
		uint64_t bits = 0;

		for (int b = 0; b < 8; b++)
			bits |= (uint64_t)p[l * 8 + b] << (8 * b);
		memcpy(&out[l], &bits, 8);
	}
	return true;
}

/* The residual plan each replayed window's answering decision set
 * (rp->resid_plan), from the run's decisions. */
static int
hdb_replay_plans(tool_hdb *db, int64_t run, tool_hdb_replay *rp)
{
	size_t nl = rp->n_layers, nw = rp->n_windows ? rp->n_windows : 1;
	double *g = NULL, *rows = NULL, *cols = NULL;
	sqlite3_stmt *st = NULL;
	uint64_t k = 0;
	int rc, r = 0;

	if (nw > SIZE_MAX / sizeof(double) / 3 / (nl ? nl : 1))
		return tool_hdb_fail(db, BELLOWS_ENOMEM, "out of memory");
	rp->resid_plan = malloc(sizeof(double) * 3 * nw * (nl ? nl : 1));
	g = malloc(sizeof(double) * (nl ? nl : 1));
	rows = malloc(sizeof(double) * (nl ? nl : 1));
	cols = malloc(sizeof(double) * (nl ? nl : 1));
	if (rp->resid_plan == NULL || g == NULL || rows == NULL ||
	    cols == NULL) {
		r = tool_hdb_fail(db, BELLOWS_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < 3 * nw * nl; i++)
		rp->resid_plan[i] = NAN;
	rc = sqlite3_prepare_v2(db->db,
	    "SELECT window, n_layers, resid_group, resid_rows, resid_cols "
	    "FROM hdb_decisions WHERE run_id = ?1 AND window > 0 ORDER BY "
	    "window, seq",
	    -1, &st, NULL);
	if (rc != SQLITE_OK) {
		r = tool_hdb_sqlite_fail(db, rc);
		goto out;
	}
	sqlite3_bind_int64(st, 1, run);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		uint64_t w = (uint64_t)sqlite3_column_int64(st, 0) - 1;

		while (k < rp->n_windows && rp->window[k] < w)
			k++;
		if (k == rp->n_windows)
			break;
		if (rp->window[k] != w ||
		    sqlite3_column_int64(st, 1) != (int64_t)nl)
			continue;
		if (!hdb_plan_col(st, 2, (uint32_t)nl, -1, g) ||
		    !hdb_plan_col(st, 3, (uint32_t)nl, 1, rows) ||
		    !hdb_plan_col(st, 4, (uint32_t)nl, 1, cols)) {
			r = tool_hdb_fail(db, BELLOWS_EPROTO,
			    "run %" PRId64 ": window %" PRIu64
			    "'s decision has a residual plan of another size",
			    run, w);
			goto out;
		}
		for (size_t l = 0; l < nl; l++) {
			double *at = &rp->resid_plan[3 * (k * nl + l)];

			at[0] = g[l];
			at[1] = rows[l];
			at[2] = cols[l];
		}
	}
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		r = tool_hdb_sqlite_fail(db, rc);
out:
	sqlite3_finalize(st);
	free(g);
	free(rows);
	free(cols);
	return r;
}

int
tool_hdb_replay_load(tool_hdb *db, int64_t run, tool_hdb_replay **ret)
{
	tool_hdb_replay *rp = calloc(1, sizeof(*rp));
	int r;

	if (rp == NULL)
		return tool_hdb_fail(db, BELLOWS_ENOMEM, "out of memory");
	if ((r = hdb_replay_layers(db, run, rp)) != 0 ||
	    (r = hdb_replay_windows(db, run, rp)) != 0 ||
	    (r = hdb_replay_plans(db, run, rp)) != 0) {
		tool_hdb_replay_destroy(&rp);
		return r;
	}
	*ret = rp;
	return 0;
}
