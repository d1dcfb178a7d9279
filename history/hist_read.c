/* hist_read - the one reader of recorded windows, see hist_read.h.
 *
 * Three statements walk the run in step: window_info (one row per
 * window, the driver), windows (its layers' rows, ordered the same way)
 * and comm_samples (its collectives, in the order they were recorded).
 * Each reads `SELECT *`, and the columns are found by name once, when
 * the cursor opens: -1 for a column the file lacks.
 */
#include "hist_read.h"

#include "hist_cols.h"

#include <bellows/error.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The columns of window_info read besides the statistics. */
enum {
	WI_WINDOW,
	WI_FIRST_STEP,
	WI_LAST_STEP,
	WI_EPOCH,
	WI_LR,
	WI_LR_NEXT,
	WI_BATCH_SIZE,
	WI_LR_SCALE,
	WI_WORLD,
	WI_RANKS_REPORTED,
	WI_STATE_BATCH_SIZE,
	WI_STATE_THRESHOLD,
	WI_STATE_OFF,
	WI_STATE_APPLY,
	WI_STATE_CALIBRATE,
	WI_N,
};
static const char *const hist_wi_names[WI_N] = { "window", "first_step",
	"last_step", "epoch", "lr", "lr_next", "batch_size", "lr_scale",
	"world", "ranks_reported", "state_batch_size", "state_size_threshold",
	"state_compression_off", "state_apply_step", "state_calibrate_steps" };

/* Of windows. */
enum {
	WL_WINDOW,
	WL_LAYER,
	WL_LEVEL,
	WL_ERROR_BOUND,
	WL_N
};
static const char *const hist_wl_names[WL_N] = { "window", "layer", "level",
	"error_bound" };

/* Of comm_samples. */
enum {
	WC_WINDOW,
	WC_RANK,
	WC_BYTES,
	WC_MS,
	WC_COUNT,
	WC_COMPRESSED,
	WC_N
};
static const char *const hist_wc_names[WC_N] = { "window", "rank", "bytes",
	"ms", "count", "compressed" };

/* The most statistic columns one table may have (hist_cols.h). */
#define HIST_MAX_STATS (2 * COM_N_LSTATS + COM_N_TSTATS)

struct hist_windows {
	sqlite3_stmt *wi;             /* window_info rows */
	sqlite3_stmt *wl;             /* windows rows */
	sqlite3_stmt *wc;             /* comm_samples rows, NULL: none */
	int wi_col[WI_N];             /* column of each, -1: none */
	int wl_col[WL_N];             /* same */
	int wc_col[WC_N];             /* same */
	int wi_stat[HIST_MAX_STATS];  /* window_info statistics */
	int wl_stat[HIST_MAX_STATS];  /* windows statistics */
	int wl_arr[COM_N_LARRAYS];    /* windows array statistics */
	uint64_t **arr;               /* n_layers * COM_N_LARRAYS values of
				       * the current window's arrays, each
				       * allocated at its first row */
	bool have_row;                /* wl is on a row */
	bool have_comm;               /* wc is on a row */
	const com_layer_info *info;   /* the layer table, borrowed */
	uint32_t n_layers;            /* its entries */
	bellows_window_layer *layers; /* n_layers, the current window's */
	bellows_comm_sample *comm;    /* the current window's */
	uint32_t n_comm;              /* used */
	uint32_t cap_comm;            /* allocated */
};

static uint64_t
hist_u64(sqlite3_stmt *st, int i)
{
	int64_t v = i < 0 ? 0 : sqlite3_column_int64(st, i);

	return v < 0 ? 0 : (uint64_t)v;
}

/* A size threshold: the store clamps a value past INT64_MAX to it
 * (store_bind_u64), and the one such value bellowsd decides is
 * UINT64_MAX, every tensor raw, which a replay must compare and hand to
 * policies as bellowsd had it. */
static uint64_t
hist_threshold(sqlite3_stmt *st, int i)
{
	uint64_t v = hist_u64(st, i);

	return v == INT64_MAX ? UINT64_MAX : v;
}

/* A REAL column: NaN for NULL (or a column the file lacks). */
static double
hist_real(sqlite3_stmt *st, int i)
{
	return i < 0 || sqlite3_column_type(st, i) == SQLITE_NULL
	    ? NAN
	    : sqlite3_column_double(st, i);
}

uint64_t
hist_calibrate_until(uint64_t apply_step, uint64_t calibrate_steps)
{
	if (calibrate_steps == 0)
		return 0;
	return calibrate_steps > UINT64_MAX - apply_step
	    ? UINT64_MAX
	    : apply_step + calibrate_steps;
}

/* The value of a statistic no rank reported (see bellows_stat_agg):
 * NaN for the medians, the gated maximum and the norm, else 0. */
static void
hist_none(const hist_col *c, void *base)
{
	char *p = (char *)base + c->offset;
	double d = 0;
	uint64_t u64 = 0;
	uint32_t u32 = 0;

	switch (c->stat->agg) {
	case BELLOWS_STAT_AGG_GATED_MEDIAN:
	case BELLOWS_STAT_AGG_GATED_MAX:
	case BELLOWS_STAT_AGG_NORM:
	case BELLOWS_STAT_AGG_STEP_MEDIAN:
		d = NAN;
		break;
	default:
		break;
	}
	if (c->vtype == BELLOWS_STAT_TYPE_F64)
		memcpy(p, &d, sizeof(d));
	else if (c->vtype == BELLOWS_STAT_TYPE_U64)
		memcpy(p, &u64, sizeof(u64));
	else if (c->vtype == BELLOWS_STAT_TYPE_U32)
		memcpy(p, &u32, sizeof(u32));
}

static void
hist_find(sqlite3_stmt *st, const char *const *names, int n, int *out)
{
	for (int i = 0; i < n; i++)
		out[i] = hist_col_index(st, names[i]);
}

static void
hist_find_stats(sqlite3_stmt *st, hist_table t, int *out)
{
	uint32_t n;
	const hist_col *hc = hist_cols(t, &n);

	for (uint32_t i = 0; i < n; i++)
		out[i] = hist_col_index(st, hc[i].name);
}

/* Parses a layers.shape text ("64x32", "" for 0-D) into `li`. */
static bool
hist_shape(const char *s, com_layer_info *li)
{
	uint64_t product = 1;

	li->ndim = 0;
	if (s[0] == '\0')
		return true;
	for (;;) {
		char *end;
		unsigned long long v;

		if (li->ndim == COM_MAX_NDIM || s[0] < '0' || s[0] > '9')
			return false;
		errno = 0;
		v = strtoull(s, &end, 10);
		if (errno != 0 || v > UINT32_MAX ||
		    (*end != 'x' && *end != '\0') ||
		    (v > 0 && product > UINT64_MAX / v))
			return false;
		li->shape[li->ndim++] = (uint32_t)v;
		product *= v;
		if (*end == '\0')
			break;
		s = end + 1;
	}
	return true;
}

void
hist_layers_free(com_layer_info **layers, uint32_t n)
{
	if (layers == NULL || *layers == NULL)
		return;
	for (uint32_t l = 0; l < n; l++)
		free((*layers)[l].name);
	free(*layers);
	*layers = NULL;
}

int
hist_layers_read(sqlite3 *db, int64_t run, com_layer_info **ret,
    uint32_t *ret_n, char *errbuf, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	com_layer_info *layers = NULL;
	uint32_t n = 0, cap = 0;
	int col[5], r = 0, rc;
	static const char *const names[5] = { "idx", "name", "numel", "ndim",
		"shape" };

	rc = sqlite3_prepare_v2(db,
	    "SELECT * FROM layers WHERE run_id = ?1 ORDER BY idx", -1, &st,
	    NULL);
	if (rc != SQLITE_OK)
		goto sqlfail;
	sqlite3_bind_int64(st, 1, run);
	hist_find(st, names, 5, col);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *name = col[1] < 0
		    ? NULL
		    : (const char *)sqlite3_column_text(st, col[1]);
		const char *shape = col[4] < 0
		    ? NULL
		    : (const char *)sqlite3_column_text(st, col[4]);
		int64_t idx = col[0] < 0 ? -1
					 : sqlite3_column_int64(st, col[0]);
		int64_t ndim = col[3] < 0 ? -1
					  : sqlite3_column_int64(st, col[3]);
		com_layer_info *li;

		if (idx != n) {
			snprintf(errbuf, errlen,
			    "run %lld: layer indices are not 0, 1, ... (found "
			    "%lld at position %u)",
			    (long long)run, (long long)idx, n);
			r = BELLOWS_EINVAL;
			goto out;
		}
		if (n == cap) {
			uint32_t nc = cap ? 2 * cap : 64;
			com_layer_info *g = realloc(layers, sizeof(*g) * nc);

			if (g == NULL)
				goto oom;
			layers = g;
			cap = nc;
		}
		li = &layers[n];
		memset(li, 0, sizeof(*li));
		if (name == NULL || shape == NULL) {
			snprintf(errbuf, errlen,
			    "run %lld: layer %u has no name or shape",
			    (long long)run, n);
			r = BELLOWS_EINVAL;
			goto out;
		}
		if (!hist_shape(shape, li) || ndim != li->ndim) {
			snprintf(errbuf, errlen,
			    "run %lld: layer '%s' has shape '%s' and ndim "
			    "%lld, which do not agree",
			    (long long)run, name, shape, (long long)ndim);
			r = BELLOWS_EINVAL;
			goto out;
		}
		li->numel = hist_u64(st, col[2]);
		if ((li->name = strdup(name)) == NULL)
			goto oom;
		n++;
	}
	if (rc != SQLITE_DONE)
		goto sqlfail;
	if (n == 0) {
		snprintf(errbuf, errlen, "run %lld has no layers",
		    (long long)run);
		r = BELLOWS_EINVAL;
		goto out;
	}
	sqlite3_finalize(st);
	*ret = layers;
	*ret_n = n;
	return 0;
sqlfail:
	snprintf(errbuf, errlen, "reading layers: %s", sqlite3_errmsg(db));
	r = rc == SQLITE_NOMEM ? BELLOWS_ENOMEM : BELLOWS_EIO;
	goto out;
oom:
	snprintf(errbuf, errlen, "out of memory");
	r = BELLOWS_ENOMEM;
out:
	sqlite3_finalize(st);
	hist_layers_free(&layers, n);
	return r;
}

/* Prepares `sql` with the run as ?1 and `below` as ?2; *ret NULL and 0
 * when `table` is not in the file. */
static int
hist_prepare(sqlite3 *db, const char *table, const char *sql, int64_t run,
    uint64_t below, sqlite3_stmt **ret, char *errbuf, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(db,
	    "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
	    "name = ?1",
	    -1, &st, NULL);
	bool exists = false;

	if (rc == SQLITE_OK) {
		sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
		rc = sqlite3_step(st);
		exists = rc == SQLITE_ROW && sqlite3_column_int(st, 0) > 0;
		rc = rc == SQLITE_ROW ? SQLITE_OK : rc;
	}
	sqlite3_finalize(st);
	st = NULL;
	if (rc == SQLITE_OK && exists)
		rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK) {
		snprintf(errbuf, errlen, "reading %s: %s", table,
		    sqlite3_errmsg(db));
		return rc == SQLITE_NOMEM ? BELLOWS_ENOMEM : BELLOWS_EIO;
	}
	if (st != NULL) {
		sqlite3_bind_int64(st, 1, run);
		sqlite3_bind_int64(st, 2,
		    below > INT64_MAX ? INT64_MAX : (int64_t)below);
	}
	*ret = st;
	return 0;
}

int
hist_windows_open(sqlite3 *db, int64_t run, uint64_t below,
    const com_layer_info *layers, uint32_t n_layers, hist_windows **ret,
    char *errbuf, size_t errlen)
{
	hist_windows *c = calloc(1, sizeof(*c));
	int r;

	if (c == NULL ||
	    (c->layers = calloc(n_layers ? n_layers : 1, sizeof(*c->layers))) ==
		NULL ||
	    (c->arr = calloc((size_t)(n_layers ? n_layers : 1) * COM_N_LARRAYS,
		 sizeof(*c->arr))) == NULL) {
		r = BELLOWS_ENOMEM;
		snprintf(errbuf, errlen, "out of memory");
		goto fail;
	}
	c->info = layers;
	c->n_layers = n_layers;
	if ((r = hist_prepare(db, "window_info",
		 "SELECT * FROM window_info WHERE run_id = ?1 AND window < ?2"
		 " ORDER BY window",
		 run, below, &c->wi, errbuf, errlen)) != 0 ||
	    (r = hist_prepare(db, "windows",
		 "SELECT * FROM windows WHERE run_id = ?1 AND window < ?2"
		 " ORDER BY window, layer",
		 run, below, &c->wl, errbuf, errlen)) != 0 ||
	    (r = hist_prepare(db, "comm_samples",
		 "SELECT * FROM comm_samples WHERE run_id = ?1 AND window < ?2"
		 " ORDER BY window, rowid",
		 run, below, &c->wc, errbuf, errlen)) != 0)
		goto fail;
	if (c->wi == NULL || c->wl == NULL) {
		r = BELLOWS_EIO;
		snprintf(errbuf, errlen, "no window_info or windows table");
		goto fail;
	}
	hist_find(c->wi, hist_wi_names, WI_N, c->wi_col);
	hist_find(c->wl, hist_wl_names, WL_N, c->wl_col);
	hist_find_stats(c->wi, HIST_WINDOW_INFO, c->wi_stat);
	hist_find_stats(c->wl, HIST_WINDOWS, c->wl_stat);
	{
		uint32_t n_arr;
		const hist_array *ha = hist_arrays(&n_arr);

		for (uint32_t k = 0; k < n_arr; k++)
			c->wl_arr[k] = hist_col_index(c->wl, ha[k].name);
	}
	c->have_row = sqlite3_step(c->wl) == SQLITE_ROW;
	if (c->wc != NULL) {
		hist_find(c->wc, hist_wc_names, WC_N, c->wc_col);
		c->have_comm = sqlite3_step(c->wc) == SQLITE_ROW;
	}
	*ret = c;
	return 0;
fail:
	hist_windows_close(&c);
	return r;
}

/* Reads the layer row at c->wl into layer l. Returns 0 or BELLOWS_ENOMEM
 * (an array's buffer). */
static int
hist_read_layer(hist_windows *c, uint32_t l, bellows_window_layer *x)
{
	uint32_t n, n_arr;
	const hist_col *hc = hist_cols(HIST_WINDOWS, &n);
	const hist_array *ha = hist_arrays(&n_arr);

	for (uint32_t i = 0; i < n; i++)
		hist_col_read(c->wl, c->wl_stat[i], &hc[i], x);
	for (uint32_t k = 0; k < n_arr; k++) {
		uint64_t **buf = &c->arr[(size_t)l * COM_N_LARRAYS + k];

		if (c->wl_arr[k] < 0 ||
		    sqlite3_column_type(c->wl, c->wl_arr[k]) != SQLITE_BLOB)
			continue;
		if (*buf == NULL &&
		    (*buf = malloc(sizeof(uint64_t) * ha[k].arr->len)) == NULL)
			return BELLOWS_ENOMEM;
		if (hist_array_read(c->wl, c->wl_arr[k], &ha[k], *buf))
			hist_array_set(&ha[k], x, *buf);
	}
	x->level = hist_real(c->wl, c->wl_col[WL_LEVEL]);
	x->error_bound = hist_real(c->wl, c->wl_col[WL_ERROR_BOUND]);
	/* As the daemon computes it (window.c): rank 0's, else the mean. */
	x->grad_norm = !isnan(x->grad_norm_rank0) ? x->grad_norm_rank0
						  : x->grad_norm_mean;
	return 0;
}

/* The window's layers: every one as no rank reported, then the rows;
 * *ret_rows gets how many had one. Returns 0 or BELLOWS_ENOMEM. */
static int
hist_read_layers(hist_windows *c, uint64_t win, uint32_t *ret_rows)
{
	uint32_t n, rows = 0;
	const hist_col *hc = hist_cols(HIST_WINDOWS, &n);

	for (uint32_t l = 0; l < c->n_layers; l++) {
		bellows_window_layer *x = &c->layers[l];

		*x = (bellows_window_layer){
			.name = c->info[l].name,
			.numel = c->info[l].numel,
			.ndim = c->info[l].ndim,
			.shape = c->info[l].shape,
		};
		for (uint32_t i = 0; i < n; i++)
			hist_none(&hc[i], x);
		x->grad_norm = NAN;
	}
	while (c->have_row && hist_u64(c->wl, c->wl_col[WL_WINDOW]) < win)
		c->have_row = sqlite3_step(c->wl) == SQLITE_ROW;
	while (c->have_row && hist_u64(c->wl, c->wl_col[WL_WINDOW]) == win) {
		int64_t l = c->wl_col[WL_LAYER] < 0
		    ? -1
		    : sqlite3_column_int64(c->wl, c->wl_col[WL_LAYER]);

		if (l >= 0 && l < (int64_t)c->n_layers) {
			if (hist_read_layer(c, (uint32_t)l, &c->layers[l]) != 0)
				return BELLOWS_ENOMEM;
			rows++;
		}
		c->have_row = sqlite3_step(c->wl) == SQLITE_ROW;
	}
	*ret_rows = rows;
	return 0;
}

/* The window's collectives, in the order they were recorded. */
static int
hist_read_comm(hist_windows *c, uint64_t win)
{
	const int *k = c->wc_col;

	c->n_comm = 0;
	while (c->have_comm && hist_u64(c->wc, k[WC_WINDOW]) < win)
		c->have_comm = sqlite3_step(c->wc) == SQLITE_ROW;
	while (c->have_comm && hist_u64(c->wc, k[WC_WINDOW]) == win) {
		if (c->n_comm == c->cap_comm) {
			uint32_t nc = c->cap_comm ? 2 * c->cap_comm : 64;
			bellows_comm_sample *g = realloc(c->comm,
			    sizeof(*g) * nc);

			if (g == NULL)
				return BELLOWS_ENOMEM;
			c->comm = g;
			c->cap_comm = nc;
		}
		c->comm[c->n_comm++] = (bellows_comm_sample){
			.rank = (uint32_t)hist_u64(c->wc, k[WC_RANK]),
			.bytes = hist_u64(c->wc, k[WC_BYTES]),
			.ms = hist_real(c->wc, k[WC_MS]),
			.count = (uint32_t)hist_u64(c->wc, k[WC_COUNT]),
			.compressed = hist_u64(c->wc, k[WC_COMPRESSED]) != 0,
		};
		c->have_comm = sqlite3_step(c->wc) == SQLITE_ROW;
	}
	return 0;
}

int
hist_windows_next(hist_windows *c, bellows_window *w, hist_state *st,
    uint32_t *ret_rows, char *errbuf, size_t errlen)
{
	sqlite3_stmt *wi = c->wi;
	const int *k = c->wi_col;
	uint32_t n, rows;
	const hist_col *hc = hist_cols(HIST_WINDOW_INFO, &n);
	bellows_window v;
	hist_state s;
	int rc = sqlite3_step(wi);

	if (rc == SQLITE_DONE)
		return 0;
	if (rc != SQLITE_ROW) {
		snprintf(errbuf, errlen, "reading window_info: %s",
		    sqlite3_errmsg(sqlite3_db_handle(wi)));
		return rc == SQLITE_NOMEM ? BELLOWS_ENOMEM : BELLOWS_EIO;
	}
	if (k[WI_WINDOW] >= 0 && sqlite3_column_int64(wi, k[WI_WINDOW]) < 0) {
		snprintf(errbuf, errlen, "negative window %lld",
		    (long long)sqlite3_column_int64(wi, k[WI_WINDOW]));
		return BELLOWS_EINVAL;
	}
	v = (bellows_window){
		.window = hist_u64(wi, k[WI_WINDOW]),
		.first_step = hist_u64(wi, k[WI_FIRST_STEP]),
		.last_step = hist_u64(wi, k[WI_LAST_STEP]),
		.epoch = hist_u64(wi, k[WI_EPOCH]),
		.lr = hist_real(wi, k[WI_LR]),
		.lr_next = hist_real(wi, k[WI_LR_NEXT]),
		.batch_size = (uint32_t)hist_u64(wi, k[WI_BATCH_SIZE]),
		.lr_scale = hist_real(wi, k[WI_LR_SCALE]),
		.world = (uint32_t)hist_u64(wi, k[WI_WORLD]),
		.ranks_reported = (uint32_t)hist_u64(wi, k[WI_RANKS_REPORTED]),
		.n_layers = c->n_layers,
		.layers = c->layers,
	};
	for (uint32_t i = 0; i < n; i++)
		hist_col_read(wi, c->wi_stat[i], &hc[i], &v);
	s = (hist_state){
		.batch_size = (uint32_t)hist_u64(wi, k[WI_STATE_BATCH_SIZE]),
		.size_threshold = hist_threshold(wi, k[WI_STATE_THRESHOLD]),
		.compression_off = hist_u64(wi, k[WI_STATE_OFF]) != 0,
		.apply_step = hist_u64(wi, k[WI_STATE_APPLY]),
		.calibrate_steps = hist_u64(wi, k[WI_STATE_CALIBRATE]),
	};
	v.compression_off = s.compression_off;
	v.size_threshold = s.size_threshold;
	v.calibrate_until = hist_calibrate_until(s.apply_step,
	    s.calibrate_steps);
	if (hist_read_layers(c, v.window, &rows) != 0 ||
	    hist_read_comm(c, v.window) != 0) {
		snprintf(errbuf, errlen, "out of memory");
		return BELLOWS_ENOMEM;
	}
	v.n_comm = c->n_comm;
	v.comm = c->n_comm > 0 ? c->comm : NULL;
	*w = v;
	*st = s;
	*ret_rows = rows;
	return 1;
}

void
hist_windows_close(hist_windows **cp)
{
	hist_windows *c;

	if (cp == NULL || *cp == NULL)
		return;
	c = *cp;
	sqlite3_finalize(c->wi);
	sqlite3_finalize(c->wl);
	sqlite3_finalize(c->wc);
	for (uint32_t i = 0; c->arr != NULL && i < c->n_layers * COM_N_LARRAYS;
	     i++)
		free(c->arr[i]);
	free(c->arr);
	free(c->layers);
	free(c->comm);
	free(c);
	*cp = NULL;
}
