/* cellfmt - a cell of the history written as a CSV field or a JSON
 * value: the one writer of both forms that `bellows history`, `bellows
 * export` and `bellows report --json` use.
 *
 * Integers are written as they are, reals as the shortest text that
 * reads back exactly, text quoted as its form needs (RFC 4180 for CSV;
 * JSON escapes control characters and replaces bytes that are not
 * UTF-8, so any text gives valid JSON), BLOBs as lower-case hex and
 * NULL as an empty field or null. Stateless; any thread.
 */
#ifndef TOOL_CELLFMT_H
#define TOOL_CELLFMT_H

#include "client/historydb.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Writes s (len bytes) as a JSON string: quoted, with quotes,
 * backslashes and control characters escaped and bytes that are not
 * UTF-8 replaced by U+FFFD. Returns 0 or BELLOWS_EIO. */
int tool_cellfmt_json_string(FILE *f, const char *s, size_t len);

/* Writes one cell as a JSON value (`json`) or a CSV field: integers as
 * they are, reals as the shortest text that reads back exactly
 * (non-finite: null / empty), text quoted as needed, BLOBs as
 * lower-case hex, NULL as null / an empty field. Returns 0 or
 * BELLOWS_EIO. */
int tool_cellfmt_put(FILE *f, bool json, const tool_hdb_cell *c);

/* Writes a CSV header line of `n` column names. Returns 0 or
 * BELLOWS_EIO. */
int tool_cellfmt_header(FILE *f, uint32_t n, const char *const *names);

#endif /* TOOL_CELLFMT_H */
