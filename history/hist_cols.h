/* hist_cols - the history's statistic columns, made from the statistics
 * table (bellows/stats.h).
 *
 * Three tables of the history database hold statistics: `windows` (one
 * row per window and layer: the layer table's aggregated values, the
 * policy's bellows_window_layer), `window_info` (one row per window: the
 * timings' aggregated values, bellows_window) and `timings` (one row per
 * window and rank: com_timings as the rank reported it). Their statistic
 * columns are not written out anywhere: each is an entry of the table
 * (its wcol, wcol2 or rcol), paired here with the field of the struct it
 * is read into and written from, so that the store's inserts, the
 * migration that adds a new statistic's column, and every reader of the
 * history name columns, never positions. Columns that are not statistics
 * (keys, the knob state in force, LR...) stay with their readers.
 *
 * Everything here is constant: safe from any thread. Only history
 * modules and the store include this header (it includes <sqlite3.h>).
 */
#ifndef HIST_COLS_H
#define HIST_COLS_H

#include "common/stat_table.h"

#include <sqlite3.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The tables with statistic columns. */
typedef enum hist_table {
	HIST_WINDOWS = 0,     /* per window and layer: bellows_window_layer */
	HIST_WINDOW_INFO = 1, /* per window: bellows_window */
	HIST_TIMINGS = 2,     /* per window and rank: com_timings */
	HIST_N_TABLES = 3,
} hist_table;

/* One statistic column. */
typedef struct hist_col {
	const char *name;        /* the column */
	const com_stat *stat;    /* the table's entry it comes from */
	bellows_stat_type vtype; /* the struct field's type */
	size_t offset;           /* of the field in the table's struct */
} hist_col;

/* The statistic columns of `t` in the statistics table's order (an
 * entry's wcol before its wcol2); *ret_n gets their count. */
const hist_col *hist_cols(hist_table t, uint32_t *ret_n);

/* The SQL name of `t` ("windows", "window_info", "timings"). */
const char *hist_table_name(hist_table t);

/* The column's type and default as ALTER TABLE ADD COLUMN takes them,
 * from the entry's reported type and "not measured": "REAL" (NULL for
 * not measured), "REAL DEFAULT 0" or "INTEGER NOT NULL DEFAULT 0". */
const char *hist_col_decl(const hist_col *c);

/* Binds the field of `c` in the struct at `base` as parameter i of `st`:
 * a NaN as NULL, an integer clamped to INT64_MAX, a byte count the
 * struct holds as a double (its entry reported as an integer) as an
 * INTEGER, clamped to 0 .. INT64_MAX. Returns sqlite3_bind_*'s code. */
int hist_col_bind(sqlite3_stmt *st, int i, const hist_col *c, const void *base);

/* Reads column i of the row at `st` into the field of `c` in the struct
 * at `base`; i < 0 (a file without the column) reads as "not measured".
 * NULL reads as NaN for a NULLABLE entry's double, else as 0; a negative
 * integer as 0. */
void hist_col_read(sqlite3_stmt *st, int i, const hist_col *c, void *base);

/* One array statistic column (BELLOWS_LAYER_ARRAYS): table `windows`
 * only, a BLOB of the entry's len little-endian uint64 values, NULL when
 * no rank reported it. Its view field is a pointer and a count
 * (bellows_window_layer's wfield, wfield##_len). */
typedef struct hist_array {
	const char *name;          /* the column */
	const com_stat_array *arr; /* the table's entry */
	size_t ptr_offset;         /* of the const uint64_t * in
				    * bellows_window_layer */
	size_t len_offset;         /* of its uint32_t count */
} hist_array;

/* Most values of an array statistic (the largest len of the table). */
#define HIST_ARRAY_MAX 256

/* The array columns of table `windows`, in the table's order, after its
 * statistic columns; *ret_n gets their count. */
const hist_array *hist_arrays(uint32_t *ret_n);

/* The values of `a` in the bellows_window_layer at base, NULL when none;
 * *ret_len gets their count (0 for none). */
const uint64_t *hist_array_get(const hist_array *a, const void *base,
    uint32_t *ret_len);

/* Sets the pointer and count of `a` in the bellows_window_layer at base
 * (v NULL: none, the count 0). v is borrowed by the struct. */
void hist_array_set(const hist_array *a, void *base, const uint64_t *v);

/* Binds `a` of the bellows_window_layer at base as parameter i of `st`: a
 * BLOB of its values little-endian (copied), NULL when it has none or not
 * exactly the entry's len. Returns sqlite3_bind_*'s code. */
int hist_array_bind(sqlite3_stmt *st, int i, const hist_array *a,
    const void *base);

/* Reads column i of the row at `st` (i < 0: a file without the column)
 * into buf (the entry's len values). Returns true when the row holds
 * exactly len values, false for NULL or a BLOB of another size (buf then
 * untouched): "not measured". */
bool hist_array_read(sqlite3_stmt *st, int i, const hist_array *a,
    uint64_t *buf);

/* The index of the result column called `name` in `st`, -1 if none. */
int hist_col_index(sqlite3_stmt *st, const char *name);

#endif /* HIST_COLS_H */
