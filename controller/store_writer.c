/* store_writer - the writer thread and the checkpointer thread, see
 * store.c for the protocol between them and the loop.
 *
 * The writer owns its connection (store_writer) and every batch the loop
 * hands it. It writes the firm rows of everything queued, with the
 * timings rows queued up to them, in one transaction and tells the loop
 * at once (DURABLE), then the other metric rows
 * a transaction of at most batch_rows rows at a time (ACK each), which
 * stops early, committing what it wrote, when a decision arrives; thins
 * and ages windows out by the retention settings; and on an error of the
 * environment rolls back, closes, says so (DEGRADED) and retries with
 * backoff, the batches kept in order. The checkpointer, poked by the
 * writer STORE_CHECKPOINT_DELAY ms after a decision's commit (or by its
 * WAL hook when the WAL is large), copies the WAL back into the file on
 * a short-lived connection of its own, out of the commit path of
 * decisions.
 */
#include "store_int.h"

#include "common/clock.h"
#include "policyhost/log.h"
#include "store_fault.h"

#include <bellows/error.h>

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

static atomic_int store_fault_code;
static atomic_uint store_fault_pass;  /* transactions let commit first */
static atomic_uint store_fault_times; /* then failed */

void
ctl_store_fault_arm_after(int code, uint32_t pass, uint32_t times)
{
	atomic_store(&store_fault_times, 0);
	atomic_store(&store_fault_code, code);
	atomic_store(&store_fault_pass, times > 0 ? pass : 0);
	atomic_store(&store_fault_times, times);
}

void
ctl_store_fault_arm(int code, uint32_t times)
{
	ctl_store_fault_arm_after(code, 0, times);
}

/* Whether the transaction about to commit must fail instead (armed by a
 * test); counts it. Only the writer thread calls it. */
static bool
store_fault_due(void)
{
	uint32_t pass, times = atomic_load(&store_fault_times);

	if (times == 0)
		return false;
	if ((pass = atomic_load(&store_fault_pass)) > 0) {
		atomic_store(&store_fault_pass, pass - 1);
		return false;
	}
	atomic_store(&store_fault_times, times - 1);
	return true;
}

static void
store_hex(uint64_t v, char out[17])
{
	snprintf(out, 17, "%016" PRIx64, v);
}

static const char *
store_source_name(uint32_t source)
{
	switch (source) {
	case CTL_STORE_INITIAL:
		return "initial";
	case CTL_STORE_REPAIR:
		return "repair";
	case CTL_STORE_ADOPTED:
		return "adopted";
	case CTL_STORE_RESUMED:
		return "resumed";
	default:
		return "window";
	}
}

static const char *
store_rank_kind_name(uint32_t kind)
{
	switch (kind) {
	case CTL_STORE_RANK_JOINED:
		return "joined";
	case CTL_STORE_RANK_REJOINED:
		return "rejoined";
	case CTL_STORE_RANK_LOST:
		return "lost";
	default:
		return "left";
	}
}

/* ---- the writer: rows -------------------------------------------------- */

static void store_writer_read(store_writer *w);

static void
store_bind_real(sqlite3_stmt *st, int i, double v)
{
	if (isnan(v))
		sqlite3_bind_null(st, i);
	else
		sqlite3_bind_double(st, i, v);
}

static void
store_bind_u64(sqlite3_stmt *st, int i, uint64_t v)
{
	/* Counters beyond 2^63 cannot happen honestly; clamp rather than
	 * wrap to a negative number. */
	sqlite3_bind_int64(st, i, v > INT64_MAX ? INT64_MAX : (int64_t)v);
}

void
store_bind_text(sqlite3_stmt *st, int i, const char *s)
{
	sqlite3_bind_text(st, i, s != NULL ? s : "", -1, SQLITE_STATIC);
}

/* Steps an insert or update and resets it. */
static int
store_step(sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	sqlite3_reset(st);
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int
store_write_file(store_writer *w, const store_file_row *r)
{
	sqlite3_stmt *st = w->st[ST_FILE];

	store_bind_text(st, 1, r->hash);
	store_bind_text(st, 2, r->path);
	store_bind_text(st, 3, r->text);
	store_bind_u64(st, 4, r->wall_ms);
	return store_step(st);
}

static int
store_write_run(store_writer *w, const store_run_row *r)
{
	sqlite3_stmt *st = w->st[ST_RUN];
	char inst[17];

	store_hex(r->instance, inst);
	sqlite3_bind_int64(st, 1, r->id);
	store_bind_text(st, 2, r->job);
	sqlite3_bind_int64(st, 3, r->world);
	sqlite3_bind_int64(st, 4, r->n_layers);
	store_bind_u64(st, 5, r->wall_ms);
	store_bind_text(st, 6, inst);
	store_bind_text(st, 7, r->hash);
	store_bind_u64(st, 8, r->first_seq);
	store_bind_text(st, 9, r->run_key != NULL ? r->run_key : "");
	return store_step(st);
}

static int
store_write_layer(store_writer *w, const store_layer_row *r)
{
	sqlite3_stmt *st = w->st[ST_LAYER];
	char shape[COM_MAX_NDIM * 11 + 1] = "";
	size_t used = 0;

	for (uint32_t d = 0; d < r->ndim && d < COM_MAX_NDIM; d++)
		used += (size_t)snprintf(shape + used, sizeof(shape) - used,
		    "%s%u", d > 0 ? "x" : "", r->shape[d]);
	sqlite3_bind_int64(st, 1, r->run);
	sqlite3_bind_int64(st, 2, r->idx);
	store_bind_text(st, 3, r->name);
	store_bind_u64(st, 4, r->numel);
	sqlite3_bind_int64(st, 5, r->ndim);
	store_bind_text(st, 6, shape);
	return store_step(st);
}

static int
store_write_rank(store_writer *w, const store_rank_row *r)
{
	sqlite3_stmt *st = w->st[ST_RANK];
	char inc[17];

	sqlite3_bind_int64(st, 1, r->run);
	sqlite3_bind_int64(st, 2, r->rank);
	store_bind_u64(st, 3, r->wall_ms);
	store_bind_text(st, 4, store_rank_kind_name(r->kind));
	store_bind_u64(st, 5, r->step);
	if (r->incarnation != 0) {
		store_hex(r->incarnation, inc);
		store_bind_text(st, 6, inc);
	} else {
		sqlite3_bind_null(st, 6);
	}
	return store_step(st);
}

static void
store_note_window(store_writer *w, int64_t run, uint64_t window)
{
	for (uint32_t i = 0; i < w->thin.n; i++) {
		if (w->thin.v[i].run == run) {
			if (window > w->thin.v[i].max_window)
				w->thin.v[i].max_window = window;
			return;
		}
	}
	*STORE_PUSH(w->thin) = (store_thin){ run, window, 0 };
}

static int
store_write_info(store_writer *w, const store_info_row *r)
{
	sqlite3_stmt *st = w->st[ST_INFO];
	const bellows_window *v = &r->v;
	uint32_t n;
	const hist_col *hc = hist_cols(HIST_WINDOW_INFO, &n);

	sqlite3_bind_int64(st, 1, r->run);
	store_bind_u64(st, 2, v->window);
	store_bind_u64(st, 3, v->first_step);
	store_bind_u64(st, 4, v->last_step);
	store_bind_u64(st, 5, v->epoch);
	store_bind_real(st, 6, v->lr);
	store_bind_real(st, 7, v->lr_next);
	sqlite3_bind_int64(st, 8, v->batch_size);
	store_bind_real(st, 9, v->lr_scale);
	sqlite3_bind_int64(st, 10, v->world);
	sqlite3_bind_int64(st, 11, v->ranks_reported);
	sqlite3_bind_int64(st, 12, r->ranks_expected);
	sqlite3_bind_int(st, 13, r->complete);
	store_bind_u64(st, 14, r->wall_ms);
	sqlite3_bind_int64(st, 15, r->state_batch_size);
	store_bind_u64(st, 16, r->state_threshold);
	sqlite3_bind_int(st, 17, r->state_off);
	store_bind_u64(st, 18, r->state_apply);
	store_bind_u64(st, 19, r->state_calibrate);
	sqlite3_bind_int(st, 20, r->late);
	for (uint32_t c = 0; c < n; c++)
		hist_col_bind(st, STORE_INFO_FIXED + 1 + (int)c, &hc[c], v);
	return store_step(st);
}

static int
store_write_comm(store_writer *w, const store_comm_row *r)
{
	sqlite3_stmt *st = w->st[ST_COMM];

	sqlite3_bind_int64(st, 1, r->run);
	store_bind_u64(st, 2, r->window);
	sqlite3_bind_int64(st, 3, r->rank);
	store_bind_u64(st, 4, r->bytes);
	store_bind_real(st, 5, r->ms);
	sqlite3_bind_int64(st, 6, r->count);
	sqlite3_bind_int(st, 7, r->compressed);
	return store_step(st);
}

static int
store_write_metric(store_writer *w, const store_metric_row *r)
{
	sqlite3_stmt *st = w->st[ST_METRIC];

	sqlite3_bind_int64(st, 1, r->run);
	store_bind_u64(st, 2, r->window);
	store_bind_text(st, 3, r->policy);
	store_bind_text(st, 4, r->name);
	if (r->layer >= 0)
		sqlite3_bind_int64(st, 5, r->layer);
	else
		sqlite3_bind_null(st, 5);
	store_bind_real(st, 6, r->value);
	return store_step(st);
}

/* Binds a windows row at parameters base + 1 ..: its keys, the level
 * and bound in force, then the statistics by name. */
static void
store_bind_stat(sqlite3_stmt *st, int base, const store_stat_row *r)
{
	uint32_t n, n_arr;
	const hist_col *hc = hist_cols(HIST_WINDOWS, &n);
	const hist_array *hc_arr;

	sqlite3_bind_int64(st, base + 1, r->run);
	store_bind_u64(st, base + 2, r->window);
	sqlite3_bind_int64(st, base + 3, r->layer);
	store_bind_real(st, base + 4, r->v.level);
	store_bind_real(st, base + 5, r->v.error_bound);
	for (uint32_t c = 0; c < n; c++)
		hist_col_bind(st, base + STORE_STAT_FIXED + 1 + (int)c, &hc[c],
		    &r->v);
	hc_arr = hist_arrays(&n_arr);
	for (uint32_t c = 0; c < n_arr; c++)
		hist_array_bind(st, base + STORE_STAT_FIXED + 1 + (int)(n + c),
		    &hc_arr[c], &r->v);
}

/* Binds a timings row at parameters base + 1 ..: its keys, then the
 * rank's timings by name. */
static void
store_bind_timing(sqlite3_stmt *st, int base, const store_timing_row *r)
{
	uint32_t n;
	const hist_col *hc = hist_cols(HIST_TIMINGS, &n);

	sqlite3_bind_int64(st, base + 1, r->run);
	store_bind_u64(st, base + 2, r->window);
	sqlite3_bind_int64(st, base + 3, r->rank);
	for (uint32_t c = 0; c < n; c++)
		hist_col_bind(st, base + STORE_TIMING_FIXED + 1 + (int)c,
		    &hc[c], &r->t);
}

/* Writes a batch's windows rows, STORE_MULTI per statement, then the
 * remainder one by one. */
static int
store_write_stats(store_writer *w, const store_batch *b)
{
	uint32_t i = 0;
	int rc = SQLITE_OK;

	uint32_t n, n_arr;
	int cols = STORE_STAT_FIXED + (int)(hist_cols(HIST_WINDOWS, &n), n) +
	    (int)(hist_arrays(&n_arr), n_arr);

	for (; rc == SQLITE_OK && i + STORE_MULTI <= b->stats.n;
	     i += STORE_MULTI) {
		for (int k = 0; k < STORE_MULTI; k++)
			store_bind_stat(w->st[ST_STAT_N], k * cols,
			    &b->stats.v[i + k]);
		rc = store_step(w->st[ST_STAT_N]);
	}
	for (; rc == SQLITE_OK && i < b->stats.n; i++) {
		store_bind_stat(w->st[ST_STAT], 0, &b->stats.v[i]);
		rc = store_step(w->st[ST_STAT]);
	}
	return rc;
}

/* Whether the metric transaction under way should stop and commit what
 * it has: a batch with a decision arrived, and it would otherwise wait
 * for the rest of the transaction. Reads the socket. */
static bool
store_writer_give_way(store_writer *w)
{
	if (!w->decision_queued)
		store_writer_read(w);
	w->gave_way = w->decision_queued;
	return w->gave_way;
}

/* Same for timings, from where the batch's last transaction stopped;
 * in a transaction of metric rows (`yield`), gives way to a decision
 * between statements. */
static int
store_write_timings(store_writer *w, store_batch *b, bool yield)
{
	uint32_t i = b->rest_at[STORE_REST_TIMINGS];
	int rc = SQLITE_OK;

	uint32_t n;
	int cols = STORE_TIMING_FIXED + (int)(hist_cols(HIST_TIMINGS, &n), n);

	for (; rc == SQLITE_OK && i + STORE_MULTI <= b->timings.n &&
	     !(yield && store_writer_give_way(w));
	     i += STORE_MULTI) {
		for (int k = 0; k < STORE_MULTI; k++)
			store_bind_timing(w->st[ST_TIMING_N], k * cols,
			    &b->timings.v[i + k]);
		rc = store_step(w->st[ST_TIMING_N]);
	}
	for (; rc == SQLITE_OK && i < b->timings.n && !w->gave_way; i++) {
		store_bind_timing(w->st[ST_TIMING], 0, &b->timings.v[i]);
		rc = store_step(w->st[ST_TIMING]);
	}
	b->rest_try[STORE_REST_TIMINGS] = i;
	return rc;
}

/* n doubles as the little-endian BLOB docs/history.md describes. */
static int
store_bind_doubles(sqlite3_stmt *st, int i, const double *v, uint32_t n)
{
	uint8_t *buf = malloc(n ? (size_t)n * 8 : 1);

	if (buf == NULL)
		store_oom();
	for (uint32_t k = 0; k < n; k++) {
		uint64_t bits;

		memcpy(&bits, &v[k], 8);
		for (int b = 0; b < 8; b++)
			buf[k * 8 + b] = (uint8_t)(bits >> (8 * b));
	}
	return sqlite3_bind_blob(st, i, buf, (int)(n * 8), free);
}

static int
store_write_decision(store_writer *w, const store_decision_row *r)
{
	sqlite3_stmt *st = w->st[ST_DECISION];
	const com_decision *d = &r->d;

	sqlite3_bind_int64(st, 1, r->run);
	store_bind_u64(st, 2, d->seq);
	store_bind_u64(st, 3, d->apply_step);
	store_bind_u64(st, 4, d->window);
	store_bind_u64(st, 5, r->wall_ms);
	store_bind_text(st, 6, store_source_name(r->source));
	store_bind_text(st, 7, d->policy);
	store_bind_text(st, 8, d->reason);
	sqlite3_bind_int64(st, 9, d->n_layers);
	store_bind_doubles(st, 10, d->level, d->n_layers);
	store_bind_doubles(st, 11, d->error_bound, d->n_layers);
	sqlite3_bind_int64(st, 12, d->batch_size);
	store_bind_real(st, 13, d->lr_scale);
	store_bind_u64(st, 14, d->size_threshold);
	sqlite3_bind_int(st, 15, d->compression_off);
	if (d->codec_table != NULL)
		sqlite3_bind_blob(st, 16, d->codec_table,
		    (int)d->codec_table_len, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 16);
	store_bind_u64(st, 17, d->calibrate_steps);
	if (com_resid_plan_is_default(d)) {
		for (int i = 18; i <= 21; i++)
			sqlite3_bind_null(st, i);
	} else {
		double *group = malloc(
		    sizeof(double) * (d->n_layers ? d->n_layers : 1));

		if (group == NULL)
			store_oom();
		for (uint32_t l = 0; l < d->n_layers; l++)
			group[l] = (double)d->resid_group[l];
		store_bind_doubles(st, 18, group, d->n_layers);
		free(group);
		store_bind_doubles(st, 19, d->resid_phi, d->n_layers);
		store_bind_doubles(st, 20, d->resid_rows, d->n_layers);
		store_bind_doubles(st, 21, d->resid_cols, d->n_layers);
	}
	return store_step(st);
}

static int
store_write_change(store_writer *w, const store_change_row *r)
{
	sqlite3_stmt *st = w->st[ST_CHANGE];

	sqlite3_bind_int64(st, 1, r->run);
	store_bind_u64(st, 2, r->seq);
	store_bind_text(st, 3, r->knob);
	if (r->layer >= 0)
		sqlite3_bind_int64(st, 4, r->layer);
	else
		sqlite3_bind_null(st, 4);
	if (r->has_old)
		store_bind_real(st, 5, r->old);
	else
		sqlite3_bind_null(st, 5);
	store_bind_real(st, 6, r->now);
	return store_step(st);
}

static int
store_write_event(store_writer *w, const store_event_row *r)
{
	sqlite3_stmt *st = w->st[ST_EVENT];

	store_bind_u64(st, 1, r->wall_ms);
	if (r->job != NULL)
		store_bind_text(st, 2, r->job);
	else
		sqlite3_bind_null(st, 2);
	store_bind_text(st, 3, r->kind);
	store_bind_text(st, 4, r->text);
	if (r->hash != NULL)
		store_bind_text(st, 5, r->hash);
	else
		sqlite3_bind_null(st, 5);
	return store_step(st);
}

/* A run resumed at r->window: counts the resume, takes the new launch's
 * identity, and moves the rows of the windows it gives up (and of the
 * decisions answering them) to the superseded_* tables. Run inside the
 * batch's transaction; the loop hands this row over alone in its batch,
 * after everything recorded before it was committed (jobs.c), so no
 * row of the abandoned windows is still on its way. */
static int
store_write_resumed(store_writer *w, const store_update_row *r)
{
	/* Tables keyed by window; decisions by the window they answer
	 * (+1), their changes by seq. */
	static const char *const by_window[] = { "window_info", "windows",
		"timings", "comm_samples", "policy_metrics" };
	sqlite3_stmt *st;
	char sql[1024];
	int rc;

	st = store_select(w,
	    "UPDATE runs SET resumes = resumes + 1, run_key = ?3, "
	    "ended_wall_ms = NULL WHERE id = ?1",
	    r->run, 0);
	if (st == NULL)
		return sqlite3_errcode(w->db);
	store_bind_text(st, 3, r->run_key != NULL ? r->run_key : "");
	rc = store_step(st);
	sqlite3_finalize(st);
	for (size_t i = 0; rc == SQLITE_OK && i < 7; i++) {
		const char *t = i < 5 ? by_window[i]
		    : i == 5          ? "decision_changes"
				      : "decisions";
		char cond[256];

		/* Numbers only: nothing of the wire reaches this text. */
		if (i < 5)
			snprintf(cond, sizeof(cond),
			    "run_id = %" PRId64 " AND window >= %" PRIu64,
			    r->run, r->window);
		else if (i == 5)
			snprintf(cond, sizeof(cond),
			    "run_id = %" PRId64 " AND seq IN (SELECT seq FROM "
			    "decisions WHERE run_id = %" PRId64
			    " AND window > %" PRIu64 ")",
			    r->run, r->run, r->window);
		else
			snprintf(cond, sizeof(cond),
			    "run_id = %" PRId64 " AND window > %" PRIu64,
			    r->run, r->window);
		snprintf(sql, sizeof(sql),
		    "INSERT INTO superseded_%s SELECT (SELECT resumes FROM "
		    "runs WHERE id = %" PRId64 "), * FROM %s WHERE %s; "
		    "DELETE FROM %s WHERE %s;",
		    t, r->run, t, cond, t, cond);
		rc = sqlite3_exec(w->db, sql, NULL, NULL, NULL);
	}
	return rc;
}

static int
store_write_update(store_writer *w, const store_update_row *r)
{
	sqlite3_stmt *st;

	switch (r->kind) {
	case STORE_UPDATE_END:
		st = w->st[ST_END];
		sqlite3_bind_int64(st, 1, r->run);
		store_bind_u64(st, 2, r->wall_ms);
		break;
	case STORE_UPDATE_REOPEN:
		st = w->st[ST_REOPEN];
		sqlite3_bind_int64(st, 1, r->run);
		break;
	case STORE_UPDATE_RESUMED:
		return store_write_resumed(w, r);
	case STORE_UPDATE_CLOSED:
		st = w->st[ST_CLOSED];
		sqlite3_bind_int64(st, 1, r->run);
		store_bind_u64(st, 2, r->window);
		break;
	default:
		st = w->st[ST_RECOVERED];
		sqlite3_bind_int64(st, 1, r->run);
		break;
	}
	return store_step(st);
}

static bool
store_batch_firm(const store_batch *b)
{
	return !b->firm_done &&
	    (b->files.n | b->runs.n | b->layers.n | b->ranks.n | b->infos.n |
		b->stats.n | b->decisions.n | b->events.n | b->updates.n) != 0;
}

static bool
store_batch_rest(const store_batch *b)
{
	return b->timings.n > b->rest_at[STORE_REST_TIMINGS] ||
	    b->comms.n > b->rest_at[STORE_REST_COMMS] ||
	    b->metrics.n > b->rest_at[STORE_REST_METRICS] ||
	    b->changes.n > b->rest_at[STORE_REST_CHANGES];
}

#define STORE_WRITE_ALL(vec, fn)                                               \
	for (uint32_t i = 0; rc == SQLITE_OK && i < b->vec.n; i++)             \
		rc = fn(w, &b->vec.v[i]);

/* Writes b's firm rows inside the caller's transaction, and the timings
 * rows it holds not yet written: a window's timings are put with its
 * ranks' reports, in its batch or an earlier one, and commit with the
 * window (and so before the decision answering it is published), or a
 * kill between two commits would leave a window without a rank's
 * timings, which no agent sends again once the window is closed. */
static int
store_write_firm(store_writer *w, store_batch *b)
{
	int rc = SQLITE_OK;

	if (!b->firm_done) {
		STORE_WRITE_ALL(files, store_write_file)
		STORE_WRITE_ALL(runs, store_write_run)
		STORE_WRITE_ALL(layers, store_write_layer)
		STORE_WRITE_ALL(ranks, store_write_rank)
		STORE_WRITE_ALL(infos, store_write_info)
		if (rc == SQLITE_OK)
			rc = store_write_stats(w, b);
	}
	if (rc == SQLITE_OK)
		rc = store_write_timings(w, b, false);
	if (!b->firm_done) {
		STORE_WRITE_ALL(decisions, store_write_decision)
		STORE_WRITE_ALL(events, store_write_event)
		STORE_WRITE_ALL(updates, store_write_update)
	}
	return rc;
}

/* Rows [rest_at, n) of one part of the rest, a decision given way to
 * every STORE_MULTI rows. */
#define STORE_WRITE_REST(vec, fn, part)                                        \
	for (i = b->rest_at[part];                                             \
	     rc == SQLITE_OK && i < b->vec.n && !w->gave_way; i++) {           \
		if ((i - b->rest_at[part]) % STORE_MULTI == STORE_MULTI - 1 && \
		    store_writer_give_way(w))                                  \
			break;                                                 \
		rc = fn(w, &b->vec.v[i]);                                      \
	}                                                                      \
	b->rest_try[part] = i;

/* Writes b's metric rows (per rank and per policy) and decision changes
 * inside the caller's transaction, from where its last transaction
 * stopped; stops early (w->gave_way) when a decision arrives. */
static int
store_write_rest(store_writer *w, store_batch *b)
{
	int rc = store_write_timings(w, b, true);
	uint32_t i;

	STORE_WRITE_REST(comms, store_write_comm, STORE_REST_COMMS)
	STORE_WRITE_REST(metrics, store_write_metric, STORE_REST_METRICS)
	STORE_WRITE_REST(changes, store_write_change, STORE_REST_CHANGES)
	return rc;
}
#undef STORE_WRITE_REST
#undef STORE_WRITE_ALL

/* One transaction over n batches from `first`, writing one part of
 * each. */
static int
store_write_txn(store_writer *w, store_batch *first, uint32_t n,
    int (*part)(store_writer *, store_batch *))
{
	store_batch *b = first;
	int rc;

	w->gave_way = false;
	rc = store_step(w->st[ST_BEGIN]);
	if (rc != SQLITE_OK) {
		store_set_error(w, rc, "cannot begin a transaction");
		return rc;
	}
	for (uint32_t i = 0; i < n && rc == SQLITE_OK && !w->gave_way;
	     i++, b = b->next)
		rc = part(w, b);
	if (rc != SQLITE_OK) {
		store_set_error(w, rc, "cannot write");
	} else if (store_fault_due()) {
		rc = atomic_load(&store_fault_code);
		snprintf(w->error, sizeof(w->error), "'%s': %s (injected)",
		    w->path, sqlite3_errstr(rc));
	} else {
		rc = store_step(w->st[ST_COMMIT]);
		if (rc != SQLITE_OK)
			store_set_error(w, rc, "cannot commit");
	}
	if (rc != SQLITE_OK && !sqlite3_get_autocommit(w->db))
		store_step(w->st[ST_ROLLBACK]);
	return rc;
}

static void store_writer_send(store_writer *w, const store_msg *m);

/* Writes the firm rows of every queued batch up to the last one that has
 * any, in one transaction, and tells the loop their decisions are
 * durable. Returns 0 when there was nothing to write. */
static int
store_write_firm_all(store_writer *w)
{
	store_msg m = { .type = STORE_MSG_DURABLE };
	uint32_t n = 0, i = 0;
	bool decided = false;
	store_batch *b;
	int rc;

	for (b = w->head; b != NULL; b = b->next) {
		i++;
		if (store_batch_firm(b))
			n = i;
	}
	if (n == 0)
		return SQLITE_OK;
	if ((rc = store_write_txn(w, w->head, n, store_write_firm)) != 0)
		return rc;
	/* Every decision queued is in. */
	w->decision_queued = false;
	b = w->head;
	for (i = 0; i < n; i++, b = b->next) {
		if (!b->firm_done) {
			for (uint32_t k = 0; k < b->infos.n; k++)
				store_note_window(w, b->infos.v[k].run,
				    b->infos.v[k].v.window);
			w->age_due = w->age_due || b->infos.n > 0;
		}
		b->firm_done = true;
		b->rest_at[STORE_REST_TIMINGS] = b->timings.n;
		decided = decided || b->decisions.n > 0;
		m.ticket = b->ticket;
	}
	store_writer_send(w, &m);
	/* A checkpoint copies and syncs the WAL, and a commit or a publish
	 * that overlaps it takes milliseconds longer: start it when the next
	 * decision is furthest away, shortly after one (a job's decisions
	 * come once a window), once that one is on its way to the ranks. */
	if (decided && w->wal_frames >= STORE_CHECKPOINT_FRAMES)
		w->ckpt_due_ms = com_clock_ms() + STORE_CHECKPOINT_DELAY;
	return SQLITE_OK;
}

/* Writes the rest (metric rows, decision changes) of the first n batches,
 * whose firm rows are in, in one transaction; it stops early, committing
 * what it wrote, when a decision arrives (store_writer_give_way), so
 * that a decision waits for STORE_MULTI rows of statistics, not for a
 * transaction of batch_rows. *ret_done: the batches now wholly written,
 * from the head (all n unless it stopped early); untouched on failure,
 * which leaves every batch's rest where its last commit left it. */
static int
store_write_rest_n(store_writer *w, uint32_t n, uint32_t *ret_done)
{
	bool rest = false;
	store_batch *b = w->head;
	uint32_t done = 0;
	int rc;

	for (uint32_t i = 0; i < n; i++, b = b->next) {
		rest = rest || store_batch_rest(b);
		memcpy(b->rest_try, b->rest_at, sizeof(b->rest_at));
	}
	if (rest &&
	    (rc = store_write_txn(w, w->head, n, store_write_rest)) != 0)
		return rc;
	b = w->head;
	for (uint32_t i = 0; i < n; i++, b = b->next) {
		memcpy(b->rest_at, b->rest_try, sizeof(b->rest_at));
		if (done == i && !store_batch_rest(b))
			done++;
	}
	*ret_done = done;
	return SQLITE_OK;
}

/* ---- the writer: retention ------------------------------------------- */

static int
store_delete(store_writer *w, const char *sql, int64_t a, int64_t b, int64_t c,
    int64_t d)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(w->db, sql, -1, &st, NULL);

	if (rc == SQLITE_OK) {
		sqlite3_bind_int64(st, 1, a);
		sqlite3_bind_int64(st, 2, b);
		sqlite3_bind_int64(st, 3, c);
		sqlite3_bind_int64(st, 4, d);
		rc = store_step(st);
	}
	sqlite3_finalize(st);
	return rc;
}

/* Thins windows [from, to) of a run: only every keep_every-th keeps its
 * metric rows. */
static int
store_thin_range(store_writer *w, int64_t run, uint64_t from, uint64_t to)
{
	static const char *const sql[] = {
		"DELETE FROM windows WHERE run_id = ?1 AND window >= ?2 AND "
		"window < ?3 AND window % ?4 != 0",
		"DELETE FROM timings WHERE run_id = ?1 AND window >= ?2 AND "
		"window < ?3 AND window % ?4 != 0",
		"DELETE FROM comm_samples WHERE run_id = ?1 AND window >= ?2 "
		"AND window < ?3 AND window % ?4 != 0",
		"DELETE FROM policy_metrics WHERE run_id = ?1 AND window >= ?2 "
		"AND window < ?3 AND window % ?4 != 0",
		"DELETE FROM window_info WHERE run_id = ?1 AND window >= ?2 "
		"AND window < ?3 AND window % ?4 != 0",
	};
	int rc = store_step(w->st[ST_BEGIN]);

	for (size_t i = 0; rc == SQLITE_OK && i < sizeof(sql) / sizeof(sql[0]);
	     i++)
		rc = store_delete(w, sql[i], run, (int64_t)from, (int64_t)to,
		    w->conf.keep_every);
	if (rc == SQLITE_OK)
		rc = store_step(w->st[ST_COMMIT]);
	if (rc != SQLITE_OK && !sqlite3_get_autocommit(w->db))
		store_step(w->st[ST_ROLLBACK]);
	return rc;
}

static int
store_age_pass(store_writer *w, uint64_t now_wall)
{
	static const char *const sql[] = {
		"DELETE FROM windows WHERE (run_id, window) IN (SELECT "
		"run_id, window FROM window_info WHERE closed_wall_ms < ?1 "
		"AND window % ?2 != 0)",
		"DELETE FROM timings WHERE (run_id, window) IN (SELECT "
		"run_id, window FROM window_info WHERE closed_wall_ms < ?1 "
		"AND window % ?2 != 0)",
		"DELETE FROM comm_samples WHERE (run_id, window) IN (SELECT "
		"run_id, window FROM window_info WHERE closed_wall_ms < ?1 "
		"AND window % ?2 != 0)",
		"DELETE FROM policy_metrics WHERE (run_id, window) IN (SELECT "
		"run_id, window FROM window_info WHERE closed_wall_ms < ?1 "
		"AND window % ?2 != 0)",
		"DELETE FROM window_info WHERE closed_wall_ms < ?1 AND "
		"window % ?2 != 0",
	};
	int64_t cutoff = (int64_t)now_wall -
	    (int64_t)w->conf.max_age_days * 86400000;
	int rc = store_step(w->st[ST_BEGIN]);

	for (size_t i = 0; rc == SQLITE_OK && i < sizeof(sql) / sizeof(sql[0]);
	     i++)
		rc = store_delete(w, sql[i], cutoff, w->conf.keep_every, 0, 0);
	if (rc == SQLITE_OK)
		rc = store_step(w->st[ST_COMMIT]);
	if (rc != SQLITE_OK && !sqlite3_get_autocommit(w->db))
		store_step(w->st[ST_ROLLBACK]);
	return rc;
}

/* One step of retention, when there is nothing else to do. Failures are
 * logged and left for the next pass: retention never degrades the
 * store. */
static void
store_retention(store_writer *w, uint64_t now)
{
	uint32_t keep = w->conf.max_windows_per_run;
	int rc;

	if (w->db == NULL || w->conf.keep_every < 2)
		return;
	for (uint32_t i = 0; keep > 0 && i < w->thin.n; i++) {
		store_thin *t = &w->thin.v[i];
		uint64_t to;

		if (t->max_window < (uint64_t)keep + STORE_THIN_STEP ||
		    t->max_window - keep < t->thinned_to + STORE_THIN_STEP)
			continue;
		to = t->max_window - keep;
		rc = store_thin_range(w, t->run, t->thinned_to, to);
		if (rc != SQLITE_OK) {
			ctl_log(CTL_LOG_WARN, "store",
			    "'%s': thinning run %" PRId64 ": %s", w->path,
			    t->run, sqlite3_errmsg(w->db));
			return;
		}
		t->thinned_to = to;
		return; /* one range per idle moment */
	}
	if (w->conf.max_age_days > 0 && w->age_due && now >= w->next_age_ms) {
		w->next_age_ms = now + STORE_AGE_PASS_MS;
		w->age_due = false;
		rc = store_age_pass(w, com_clock_wall_ms());
		if (rc != SQLITE_OK)
			ctl_log(CTL_LOG_WARN, "store",
			    "'%s': age retention: %s", w->path,
			    sqlite3_errmsg(w->db));
	}
}

/* ---- the writer thread ----------------------------------------------- */

static void
store_writer_send(store_writer *w, const store_msg *m)
{
	while (zmq_send(w->sock, m, sizeof(*m), 0) < 0 && errno == EINTR)
		;
}

static void
store_writer_fail(store_writer *w, int rc, uint64_t now)
{
	store_msg m = { .type = STORE_MSG_DEGRADED };

	(void)rc;
	store_db_close(w);
	if (!w->failing) {
		w->failing = true;
		w->fail_since_ms = now;
		w->backoff_ms = STORE_RETRY_MIN_MS;
	} else {
		w->backoff_ms = w->backoff_ms * 2 > STORE_RETRY_MAX_MS
		    ? STORE_RETRY_MAX_MS
		    : w->backoff_ms * 2;
	}
	w->retry_at_ms = now + w->backoff_ms;
	snprintf(m.text, sizeof(m.text), "%s", w->error);
	store_writer_send(w, &m);
}

static void
store_writer_recovered(store_writer *w, uint64_t now)
{
	store_msg m = { .type = STORE_MSG_RECOVERED };

	m.ms = now - w->fail_since_ms;
	snprintf(m.text, sizeof(m.text), "%s", w->error);
	w->failing = false;
	w->error[0] = '\0';
	store_writer_send(w, &m);
}

/* Takes every message waiting on the socket. */
static void
store_writer_read(store_writer *w)
{
	store_msg m;

	while (
	    zmq_recv(w->sock, &m, sizeof(m), ZMQ_DONTWAIT) == (int)sizeof(m)) {
		switch (m.type) {
		case STORE_MSG_BATCH:
			m.batch->next = NULL;
			if (m.batch->decisions.n > 0)
				w->decision_queued = true;
			if (w->tail != NULL)
				w->tail->next = m.batch;
			else
				w->head = m.batch;
			w->tail = m.batch;
			break;
		case STORE_MSG_CONF:
			w->conf = m.conf;
			break;
		case STORE_MSG_STOP:
			w->stopping = true;
			w->stop_at_ms = com_clock_ms() + m.ms;
			break;
		default:
			break;
		}
	}
}

/* Acknowledges and frees the first n batches of the queue. */
static void
store_writer_done(store_writer *w, uint32_t n)
{
	store_msg m = { .type = STORE_MSG_ACK };

	if (n == 0)
		return;
	for (uint32_t i = 0; i < n; i++) {
		store_batch *b = w->head;

		w->head = b->next;
		if (w->head == NULL)
			w->tail = NULL;
		m.ticket = b->ticket;
		m.rows += b->rows;
		m.metric_rows += b->metric_rows;
		store_batch_free(b);
	}
	store_writer_send(w, &m);
}

/* Writes what is queued, a group of batches per transaction. */
static void
store_writer_work(store_writer *w, uint64_t now)
{
	int rc;

	if (w->failing && now < w->retry_at_ms)
		return;
	if (w->db == NULL && (rc = store_db_open(w)) != 0) {
		store_writer_fail(w, rc, now);
		return;
	}
	/* Firm rows (decisions, windows and the timings queued up to
	 * them) of everything queued go first, then the rest a
	 * transaction of at most batch_rows rows at a time, looking for
	 * new decisions every STORE_MULTI rows and committing early when
	 * one came: a decision waits for STORE_MULTI rows of statistics at
	 * most besides its window's timings, never for a backlog of
	 * them. */
	for (;;) {
		uint32_t n = 0, rows = 0, done = 0;
		store_batch *b;

		store_writer_read(w);
		if (w->head == NULL)
			break;
		rc = store_write_firm_all(w);
		if (rc == SQLITE_OK && w->wal_full) {
			/* The checkpointer cannot finish while commits keep
			 * coming without a pause, and then the WAL would
			 * never restart: copy it all back (waiting out the
			 * checkpointer) so that the next commit restarts
			 * it. Only when far behind, and right after the
			 * decisions queued were committed. */
			sqlite3_busy_timeout(w->db, STORE_RESTART_WAIT_MS);
			sqlite3_wal_checkpoint_v2(w->db, NULL,
			    SQLITE_CHECKPOINT_RESTART, NULL, NULL);
			sqlite3_busy_timeout(w->db, STORE_BUSY_MS);
			w->wal_full = false;
		}
		if (rc == SQLITE_OK) {
			for (b = w->head; b != NULL; b = b->next) {
				if (n > 0 &&
				    rows + b->rows > w->conf.batch_rows)
					break;
				rows += b->rows;
				n++;
			}
			rc = store_write_rest_n(w, n, &done);
		}
		if (rc == SQLITE_OK) {
			store_writer_done(w, done);
			if (w->failing)
				store_writer_recovered(w, com_clock_ms());
			continue;
		}
		if (store_rc_transient(rc)) {
			store_writer_fail(w, rc, com_clock_ms());
			return;
		}
		/* A bug, not the environment: retrying cannot help, and the
		 * batch must not hold up the ones behind it. */
		ctl_log(CTL_LOG_ERROR, "store",
		    "%s: dropping a batch of %u rows (ticket %" PRIu64 ")",
		    w->error, w->head->rows, w->head->ticket);
		store_writer_done(w, 1);
	}
	if (w->failing)
		store_writer_recovered(w, com_clock_ms());
	else
		store_retention(w, now);
}

static int
store_writer_timeout(const store_writer *w, uint64_t now)
{
	int64_t t = -1;

	if (w->failing)
		t = w->retry_at_ms > now ? (int64_t)(w->retry_at_ms - now) : 0;
	else if (w->head != NULL)
		t = 0;
	else if (w->conf.max_age_days > 0 && w->age_due)
		t = w->next_age_ms > now ? (int64_t)(w->next_age_ms - now) : 0;
	if (w->ckpt_due_ms != 0) {
		int64_t c = w->ckpt_due_ms > now
		    ? (int64_t)(w->ckpt_due_ms - now)
		    : 0;

		if (t < 0 || c < t)
			t = c;
	}
	if (w->stopping) {
		int64_t s = w->stop_at_ms > now ? (int64_t)(w->stop_at_ms - now)
						: 0;

		if (t < 0 || s < t)
			t = s;
	}
	return t > INT32_MAX ? INT32_MAX : (int)t;
}

void *
store_writer_main(void *arg)
{
	store_writer *w = arg;
	uint64_t lost = 0;

	for (;;) {
		uint64_t now = com_clock_ms();
		zmq_pollitem_t item = { w->sock, 0, ZMQ_POLLIN, 0 };

		if (zmq_poll(&item, 1, store_writer_timeout(w, now)) < 0 &&
		    zmq_errno() != EINTR)
			break;
		store_writer_read(w);
		now = com_clock_ms();
		store_writer_work(w, now);
		if (w->ckpt_due_ms != 0 && now >= w->ckpt_due_ms) {
			if (w->poke != NULL)
				zmq_send(w->poke, "c", 1, ZMQ_DONTWAIT);
			w->ckpt_due_ms = 0;
		}
		if (w->stopping && (w->head == NULL || now >= w->stop_at_ms))
			break;
	}
	while (w->head != NULL) {
		store_batch *b = w->head;

		w->head = b->next;
		lost += b->rows;
		store_batch_free(b);
	}
	w->tail = NULL;
	if (lost > 0)
		ctl_log(CTL_LOG_ERROR, "store",
		    "'%s': %" PRIu64 " rows not written at exit: %s", w->path,
		    lost, w->error);
	store_db_close(w);
	return NULL;
}

/* The checkpointer: one PASSIVE checkpoint per poke, on its own
 * connection, so that syncing the disk never delays a commit. A new
 * connection learns that the file is in WAL mode only when it first
 * reads it; a checkpoint before that does nothing (and says so with -1
 * frames), and the WAL would then only ever be copied back by the
 * writer's RESTART at STORE_WAL_MAX_FRAMES, a stop of tens of
 * milliseconds in the commit path of decisions. Hence the read. */
void *
store_checkpointer_main(void *arg)
{
	ctl_store *s = arg;
	char c;

	for (;;) {
		sqlite3 *db = NULL;
		int n = zmq_recv(s->ckpt_sock, &c, 1, 0);

		if (n < 0 && zmq_errno() == EINTR)
			continue;
		if (n < 0 || c == 's')
			break;
		if (sqlite3_open_v2(s->w.path, &db,
			SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
			NULL) == SQLITE_OK) {
			sqlite3_busy_timeout(db, STORE_BUSY_MS);
			sqlite3_exec(db, "SELECT 1 FROM sqlite_master LIMIT 1",
			    NULL, NULL, NULL);
			sqlite3_wal_checkpoint_v2(db, NULL,
			    SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
		}
		sqlite3_close_v2(db);
	}
	return NULL;
}
