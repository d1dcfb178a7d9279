/* hist_cols - the history's statistic columns, see hist_cols.h.
 *
 * Generated from bellows/stats.h by the preprocessor: nothing below names
 * a statistic. Each table entry gives two windows columns (wcol, wcol2),
 * one window_info column (wcol) and one timings column (rcol); those
 * the entry leaves NULL are dropped when the arrays are compacted, once,
 * at first use.
 */
#include "hist_cols.h"

#include "common/msg.h"

#include <bellows/policy.h>

#include <math.h>
#include <pthread.h>
#include <string.h>

/* A `_` token of the table stands for "none". */
#define HIST_OFF_NONE(strct, f) SIZE_MAX
#define HIST_OFF_U32(strct, f)  offsetof(strct, f)
#define HIST_OFF_U64(strct, f)  offsetof(strct, f)
#define HIST_OFF_F64(strct, f)  offsetof(strct, f)

/* The field wcol fills: for NORM, wfield##_rank0 (wcol2: wfield##_mean). */
#define HIST_F1_NONE(f)           f
#define HIST_F1_SUM(f)            f
#define HIST_F1_SUM_SAT(f)        f
#define HIST_F1_MAX(f)            f
#define HIST_F1_MIN_NZ(f)         f
#define HIST_F1_MEAN(f)           f
#define HIST_F1_GATED_MEAN(f)     f
#define HIST_F1_GATED_MEDIAN(f)   f
#define HIST_F1_GATED_MAX(f)      f
#define HIST_F1_NORM(f)           f##_rank0
#define HIST_F1_STEP_MEDIAN(f)    f
#define HIST_F1_STEP_MEDIAN_NZ(f) f
#define HIST_F2_NONE(f)           f
#define HIST_F2_SUM(f)            f
#define HIST_F2_SUM_SAT(f)        f
#define HIST_F2_MAX(f)            f
#define HIST_F2_MIN_NZ(f)         f
#define HIST_F2_MEAN(f)           f
#define HIST_F2_GATED_MEAN(f)     f
#define HIST_F2_GATED_MEDIAN(f)   f
#define HIST_F2_GATED_MAX(f)      f
#define HIST_F2_NORM(f)           f##_mean
#define HIST_F2_STEP_MEDIAN(f)    f
#define HIST_F2_STEP_MEDIAN_NZ(f) f

#define HIST_LAYER(name, type, tag, check, agg, gate, wtype, wfield, rcol,     \
    wcol, wcol2, hist, unit, doc)                                              \
	{ wcol, &com_layer_stat_table[COM_LSTAT_##name],                       \
		BELLOWS_STAT_TYPE_##wtype,                                     \
		HIST_OFF_##wtype(bellows_window_layer,                         \
		    HIST_F1_##agg(wfield)) },                                  \
	    { wcol2, &com_layer_stat_table[COM_LSTAT_##name],                  \
		    BELLOWS_STAT_TYPE_##wtype,                                 \
		    HIST_OFF_##wtype(bellows_window_layer,                     \
			HIST_F2_##agg(wfield)) },
#define HIST_INFO(name, type, tag, check, agg, gate, wtype, wfield, rcol,      \
    wcol, wcol2, hist, unit, doc)                                              \
	{ wcol, &com_timing_stat_table[COM_TSTAT_##name],                      \
		BELLOWS_STAT_TYPE_##wtype,                                     \
		HIST_OFF_##wtype(bellows_window, wfield) },
#define HIST_TIMING(name, type, tag, check, agg, gate, wtype, wfield, rcol,    \
    wcol, wcol2, hist, unit, doc)                                              \
	{ rcol, &com_timing_stat_table[COM_TSTAT_##name],                      \
		BELLOWS_STAT_TYPE_##type, offsetof(com_timings, name) },

/* As generated, with NULL names; compacted into hist_all at first use. */
static const hist_col hist_gen_windows[] = { BELLOWS_LAYER_STATS(HIST_LAYER) };
static const hist_col hist_gen_info[] = { BELLOWS_RANK_TIMINGS(HIST_INFO) };
static const hist_col hist_gen_timings[] = { BELLOWS_RANK_TIMINGS(
    HIST_TIMING) };

#define HIST_N(a) (sizeof(a) / sizeof((a)[0]))

static struct {
	hist_col cols[HIST_N(hist_gen_windows)]; /* the named ones */
	uint32_t n;                              /* entries used */
} hist_all[HIST_N_TABLES];

static pthread_once_t hist_once = PTHREAD_ONCE_INIT;

static void
hist_compact(void)
{
	static const struct {
		const hist_col *v; /* generated */
		size_t n;          /* entries */
	} gen[HIST_N_TABLES] = {
		[HIST_WINDOWS] = { hist_gen_windows, HIST_N(hist_gen_windows) },
		[HIST_WINDOW_INFO] = { hist_gen_info, HIST_N(hist_gen_info) },
		[HIST_TIMINGS] = { hist_gen_timings, HIST_N(hist_gen_timings) },
	};

	for (int t = 0; t < HIST_N_TABLES; t++)
		for (size_t i = 0; i < gen[t].n; i++)
			if (gen[t].v[i].name != NULL)
				hist_all[t].cols[hist_all[t].n++] = gen[t].v[i];
}

_Static_assert(HIST_N(hist_gen_info) <= HIST_N(hist_gen_windows) &&
	HIST_N(hist_gen_timings) <= HIST_N(hist_gen_windows),
    "hist_all's arrays hold every table's columns");

const hist_col *
hist_cols(hist_table t, uint32_t *ret_n)
{
	pthread_once(&hist_once, hist_compact);
	*ret_n = hist_all[t].n;
	return hist_all[t].cols;
}

const char *
hist_table_name(hist_table t)
{
	static const char *const names[HIST_N_TABLES] = {
		[HIST_WINDOWS] = "windows",
		[HIST_WINDOW_INFO] = "window_info",
		[HIST_TIMINGS] = "timings",
	};

	return names[t];
}

const char *
hist_col_decl(const hist_col *c)
{
	if (c->stat->type != BELLOWS_STAT_TYPE_F64)
		return "INTEGER NOT NULL DEFAULT 0";
	return c->stat->hist == BELLOWS_STAT_HIST_NULLABLE ? "REAL"
							   : "REAL DEFAULT 0";
}

int
hist_col_bind(sqlite3_stmt *st, int i, const hist_col *c, const void *base)
{
	const char *p = (const char *)base + c->offset;
	uint32_t u32;
	uint64_t u64;
	double d;

	switch (c->vtype) {
	case BELLOWS_STAT_TYPE_U32:
		memcpy(&u32, p, sizeof(u32));
		return sqlite3_bind_int64(st, i, u32);
	case BELLOWS_STAT_TYPE_U64:
		memcpy(&u64, p, sizeof(u64));
		return sqlite3_bind_int64(st, i,
		    u64 > INT64_MAX ? INT64_MAX : (int64_t)u64);
	case BELLOWS_STAT_TYPE_F64:
		memcpy(&d, p, sizeof(d));
		if (c->stat->type != BELLOWS_STAT_TYPE_F64) {
			/* A count the struct holds as a double. */
			if (!(d > 0))
				return sqlite3_bind_int64(st, i, 0);
			if (d >= 9223372036854775807.0)
				return sqlite3_bind_int64(st, i, INT64_MAX);
			return sqlite3_bind_int64(st, i, (int64_t)d);
		}
		if (isnan(d))
			return sqlite3_bind_null(st, i);
		return sqlite3_bind_double(st, i, d);
	default:
		return sqlite3_bind_null(st, i);
	}
}

void
hist_col_read(sqlite3_stmt *st, int i, const hist_col *c, void *base)
{
	char *p = (char *)base + c->offset;
	bool null = i < 0 || sqlite3_column_type(st, i) == SQLITE_NULL;
	int64_t v = null ? 0 : sqlite3_column_int64(st, i);
	uint64_t u64 = v < 0 ? 0 : (uint64_t)v;
	uint32_t u32 = (uint32_t)u64;
	double d;

	switch (c->vtype) {
	case BELLOWS_STAT_TYPE_U32:
		memcpy(p, &u32, sizeof(u32));
		break;
	case BELLOWS_STAT_TYPE_U64:
		memcpy(p, &u64, sizeof(u64));
		break;
	case BELLOWS_STAT_TYPE_F64:
		if (c->stat->type != BELLOWS_STAT_TYPE_F64)
			d = (double)u64;
		else if (null)
			d = c->stat->hist == BELLOWS_STAT_HIST_NULLABLE ? NAN
									: 0;
		else
			d = sqlite3_column_double(st, i);
		memcpy(p, &d, sizeof(d));
		break;
	default:
		break;
	}
}

#define HIST_ARRAY(name, len, tag, check, kind, wfield, wcol, unit, doc)       \
	{ wcol, &com_layer_array_table[COM_LARRAY_##name],                     \
		offsetof(bellows_window_layer, wfield),                        \
		offsetof(bellows_window_layer, wfield##_len) },
static const hist_array hist_gen_arrays[] = { BELLOWS_LAYER_ARRAYS(
    HIST_ARRAY) };

#define HIST_ARRAY_FITS(name, len, ...)                                        \
	_Static_assert((len) <= HIST_ARRAY_MAX, #name " fits HIST_ARRAY_MAX");
BELLOWS_LAYER_ARRAYS(HIST_ARRAY_FITS)

const hist_array *
hist_arrays(uint32_t *ret_n)
{
	*ret_n = (uint32_t)HIST_N(hist_gen_arrays);
	return hist_gen_arrays;
}

const uint64_t *
hist_array_get(const hist_array *a, const void *base, uint32_t *ret_len)
{
	const uint64_t *v;
	uint32_t n;

	memcpy(&v, (const char *)base + a->ptr_offset, sizeof(v));
	memcpy(&n, (const char *)base + a->len_offset, sizeof(n));
	*ret_len = v != NULL ? n : 0;
	return v != NULL && n > 0 ? v : NULL;
}

void
hist_array_set(const hist_array *a, void *base, const uint64_t *v)
{
	uint32_t n = v != NULL ? a->arr->len : 0;

	memcpy((char *)base + a->ptr_offset, &v, sizeof(v));
	memcpy((char *)base + a->len_offset, &n, sizeof(n));
}

int
hist_array_bind(sqlite3_stmt *st, int i, const hist_array *a, const void *base)
{
	uint8_t b[HIST_ARRAY_MAX * 8];
	uint32_t n;
	const uint64_t *v = hist_array_get(a, base, &n);

	if (v == NULL || n != a->arr->len)
		return sqlite3_bind_null(st, i);
	for (uint32_t k = 0; k < n; k++)
		for (int j = 0; j < 8; j++)
			b[8 * k + (uint32_t)j] = (uint8_t)(v[k] >> (8 * j));
	return sqlite3_bind_blob(st, i, b, (int)(8 * n), SQLITE_TRANSIENT);
}

bool
hist_array_read(sqlite3_stmt *st, int i, const hist_array *a, uint64_t *buf)
{
	const uint8_t *b;

	if (i < 0 || sqlite3_column_type(st, i) != SQLITE_BLOB)
		return false;
	b = sqlite3_column_blob(st, i);
	if (b == NULL || sqlite3_column_bytes(st, i) != (int)(8 * a->arr->len))
		return false;
	for (uint32_t k = 0; k < a->arr->len; k++) {
		uint64_t v = 0;

		for (int j = 7; j >= 0; j--)
			v = v << 8 | b[8 * k + (uint32_t)j];
		buf[k] = v;
	}
	return true;
}

int
hist_col_index(sqlite3_stmt *st, const char *name)
{
	/* Columns a migration renamed: a file older than it has the former
	 * name (schema 8: window_info.saved_bytes became act_saved_bytes). */
	static const struct {
		const char *name, *former;
	} renamed[] = { { "act_saved_bytes", "saved_bytes" } };
	int n = sqlite3_column_count(st);

	for (int i = 0; i < n; i++) {
		const char *c = sqlite3_column_name(st, i);

		if (c != NULL && strcmp(c, name) == 0)
			return i;
	}
	for (size_t k = 0; k < sizeof(renamed) / sizeof(renamed[0]); k++) {
		if (strcmp(name, renamed[k].name) == 0)
			return hist_col_index(st, renamed[k].former);
	}
	return -1;
}
