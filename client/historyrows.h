/* historyrows - the rows of a history question read by column name:
 * the names a reader reads resolved to column indices once per query,
 * and typed cells.
 *
 * A reader lists the columns it reads (a static array of names, indexed
 * by an enum of its own) in a tool_hdb_cols; the columns of a query are
 * matched against that list when the statement is prepared (the sink's
 * `columns` call, before any row), so a reader asks for a cell by its
 * own index and never compares a name per cell. A needed column the
 * query lacks fails the query there with BELLOWS_EINVAL: the questions
 * of historydb read every file as if migrated, so a missing column is a
 * bug of the reader or the question, found on the first query. Readers
 * of exported tables (whose older files lack later columns) need none,
 * and a missing column reads as NULL.
 *
 * The cell readers turn a NULL, a missing column, a row out of range or
 * a cell of another type into one "not available" per type: a default
 * (integers), NAN (reals), "" (text). The dashboard, `bellows report`,
 * `bellows history compare` and `bellows history` read rows only through
 * this module. Nothing here is thread-safe; nothing needs to be.
 */
#ifndef TOOL_HISTORYROWS_H
#define TOOL_HISTORYROWS_H

#include "client/historydb.h"

#include <stdbool.h>
#include <stdint.h>

#define TOOL_HDB_COLS_MAX 64 /* columns one reader reads */

/* Bit k of a need mask: the reader's column k. */
#define TOOL_HDB_COL(k) (UINT64_C(1) << (k))

/* The columns a reader reads and where a query put them. */
typedef struct tool_hdb_cols {
	const char *const *want;       /* n column names, in the reader's
					* order (borrowed: a static table) */
	uint32_t n;                    /* names in want, at most
					* TOOL_HDB_COLS_MAX */
	uint64_t need;                 /* TOOL_HDB_COL(k): want[k] must be
					* a column of the query; one not
					* needed and missing reads as NULL */
	int32_t at[TOOL_HDB_COLS_MAX]; /* want[k] is the query's column
					* at[k]; -1: the query has none */
} tool_hdb_cols;

/* A query's rows, kept in memory, and the columns its reader reads. */
typedef struct tool_hdb_result {
	tool_hdb_rows rows; /* as tool_hdb_rows_sink collects them */
	tool_hdb_cols cols; /* resolved when the query prepares */
} tool_hdb_result;

/* Declares that a reader reads the n columns want[0..n) (borrowed,
 * n <= TOOL_HDB_COLS_MAX), of which it needs those in mask `need`; none
 * resolved yet. */
void tool_hdb_cols_init(tool_hdb_cols *cols, const char *const *want,
    uint32_t n, uint64_t need);

/* Resolves cols against a query's n_cols column names. Returns 0, or
 * BELLOWS_EINVAL when a needed column is missing (then every at[] is
 * still set, -1 for the missing ones). */
int tool_hdb_cols_resolve(tool_hdb_cols *cols, uint32_t n_cols,
    const char *const *names);

/* Column k of the reader's list in a row of cells as a query passes
 * them to a sink; NULL when the query has no such column. */
const tool_hdb_cell *tool_hdb_cols_cell(const tool_hdb_cols *cols,
    const tool_hdb_cell *cells, uint32_t k);

/* Prepares res (its old content forgotten, not freed) for a query
 * whose reader reads want[0..n) and needs `need` (as
 * tool_hdb_cols_init) and makes `sink` collect its rows into res,
 * resolving the columns when the statement is prepared: a needed
 * column missing ends the query with BELLOWS_EINVAL. res is the
 * caller's; free with tool_hdb_result_fini. */
void tool_hdb_result_sink(tool_hdb_result *res, const char *const *want,
    uint32_t n, uint64_t need, tool_hdb_sink *sink);

/* Frees the rows res holds and zeroes it. NULL-safe. */
void tool_hdb_result_fini(tool_hdb_result *res);

/* Column k (of the reader's list) of row `row`; NULL when the query had
 * no such column or there is no such row. */
const tool_hdb_cell *tool_hdb_result_cell(const tool_hdb_result *res,
    uint64_t row, uint32_t k);

/* A cell as an integer: an INT as it is, a finite REAL truncated,
 * anything else (NULL, text, a missing cell: c NULL) `dflt`. */
int64_t tool_hdb_cell_int(const tool_hdb_cell *c, int64_t dflt);

/* A cell as a double: an INT or a REAL; NAN for anything else (NULL,
 * text, a missing cell: c NULL). */
double tool_hdb_cell_real(const tool_hdb_cell *c);

/* A cell as text: a TEXT cell's string (borrowed from where the cell
 * lives), "" for anything else (NULL, a number, c NULL). */
const char *tool_hdb_cell_text(const tool_hdb_cell *c);

/* Column k of row `row` of res as tool_hdb_cell_int, _real and _text
 * read it (a missing column or row: dflt, NAN, ""). */
int64_t tool_hdb_int(const tool_hdb_result *res, uint64_t row, uint32_t k,
    int64_t dflt);
double tool_hdb_real(const tool_hdb_result *res, uint64_t row, uint32_t k);
const char *tool_hdb_text(const tool_hdb_result *res, uint64_t row, uint32_t k);

#endif /* TOOL_HISTORYROWS_H */
