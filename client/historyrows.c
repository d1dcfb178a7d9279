/* historyrows - a history question's rows read by column name, see
 * historyrows.h.
 *
 * The collecting sink wraps tool_hdb_rows_sink: its `columns` call
 * first keeps the names as that sink does, then resolves the reader's
 * list against them, so that a query whose columns a reader cannot use
 * stops before its first row.
 */
#include "historyrows.h"

#include <bellows/error.h>

#include <assert.h>
#include <math.h>
#include <string.h>

void
tool_hdb_cols_init(tool_hdb_cols *cols, const char *const *want, uint32_t n,
    uint64_t need)
{
	assert(n <= TOOL_HDB_COLS_MAX);
	memset(cols, 0, sizeof(*cols));
	cols->want = want;
	cols->n = n;
	cols->need = need;
	for (uint32_t k = 0; k < TOOL_HDB_COLS_MAX; k++)
		cols->at[k] = -1;
}

int
tool_hdb_cols_resolve(tool_hdb_cols *cols, uint32_t n_cols,
    const char *const *names)
{
	int rc = 0;

	for (uint32_t k = 0; k < cols->n; k++) {
		cols->at[k] = -1;
		for (uint32_t c = 0; c < n_cols; c++) {
			if (strcmp(names[c], cols->want[k]) == 0) {
				cols->at[k] = (int32_t)c;
				break;
			}
		}
		if (cols->at[k] < 0 && (cols->need & TOOL_HDB_COL(k)) != 0)
			rc = BELLOWS_EINVAL;
	}
	return rc;
}

const tool_hdb_cell *
tool_hdb_cols_cell(const tool_hdb_cols *cols, const tool_hdb_cell *cells,
    uint32_t k)
{
	if (k >= cols->n || cols->at[k] < 0)
		return NULL;
	return &cells[cols->at[k]];
}

/* The sink's `columns`: keep the names, then resolve. */
static int
result_columns(void *arg, uint32_t n_cols, const char *const *names)
{
	tool_hdb_result *res = arg;
	tool_hdb_sink rows_sink;
	int rc;

	tool_hdb_rows_sink(&res->rows, &rows_sink);
	if ((rc = rows_sink.columns(rows_sink.arg, n_cols, names)) != 0)
		return rc;
	return tool_hdb_cols_resolve(&res->cols, n_cols, names);
}

static int
result_row(void *arg, const tool_hdb_cell *cells)
{
	tool_hdb_result *res = arg;
	tool_hdb_sink rows_sink;

	tool_hdb_rows_sink(&res->rows, &rows_sink);
	return rows_sink.row(rows_sink.arg, cells);
}

void
tool_hdb_result_sink(tool_hdb_result *res, const char *const *want, uint32_t n,
    uint64_t need, tool_hdb_sink *sink)
{
	memset(&res->rows, 0, sizeof(res->rows));
	tool_hdb_cols_init(&res->cols, want, n, need);
	sink->columns = result_columns;
	sink->row = result_row;
	sink->arg = res;
}

void
tool_hdb_result_fini(tool_hdb_result *res)
{
	if (res == NULL)
		return;
	tool_hdb_rows_fini(&res->rows);
	memset(res, 0, sizeof(*res));
}

const tool_hdb_cell *
tool_hdb_result_cell(const tool_hdb_result *res, uint64_t row, uint32_t k)
{
	if (row >= res->rows.n_rows || k >= res->cols.n ||
	    res->cols.at[k] < 0 ||
	    (uint32_t)res->cols.at[k] >= res->rows.n_cols)
		return NULL;
	return tool_hdb_rows_cell(&res->rows, row, (uint32_t)res->cols.at[k]);
}

int64_t
tool_hdb_cell_int(const tool_hdb_cell *c, int64_t dflt)
{
	if (c == NULL)
		return dflt;
	if (c->type == TOOL_HDB_INT)
		return c->i;
	if (c->type == TOOL_HDB_REAL && isfinite(c->d))
		return (int64_t)c->d;
	return dflt;
}

double
tool_hdb_cell_real(const tool_hdb_cell *c)
{
	if (c == NULL)
		return NAN;
	if (c->type == TOOL_HDB_INT)
		return (double)c->i;
	if (c->type == TOOL_HDB_REAL)
		return c->d;
	return NAN;
}

const char *
tool_hdb_cell_text(const tool_hdb_cell *c)
{
	return c != NULL && c->type == TOOL_HDB_TEXT ? c->s : "";
}

int64_t
tool_hdb_int(const tool_hdb_result *res, uint64_t row, uint32_t k, int64_t dflt)
{
	return tool_hdb_cell_int(tool_hdb_result_cell(res, row, k), dflt);
}

double
tool_hdb_real(const tool_hdb_result *res, uint64_t row, uint32_t k)
{
	return tool_hdb_cell_real(tool_hdb_result_cell(res, row, k));
}

const char *
tool_hdb_text(const tool_hdb_result *res, uint64_t row, uint32_t k)
{
	return tool_hdb_cell_text(tool_hdb_result_cell(res, row, k));
}
