/* export_cli - `bellows export`: one run of the history database as a
 * directory of CSV files, one per table.
 *
 * Every table's rows of the run (runs, layers, rank_events, window_info,
 * windows, timings, decisions, decision_changes, events, policy_files)
 * are read from one snapshot and written as DIR/<table>.csv with the
 * schema's column names, so a spreadsheet or a script gets the whole run
 * without SQLite. A decision's `levels` and `error_bounds` BLOBs are
 * written as their doubles separated by spaces, other BLOBs as hex.
 * Existing files are not overwritten unless asked to.
 */
#ifndef TOOL_EXPORT_CLI_H
#define TOOL_EXPORT_CLI_H

#include "client/historydb.h"

#include <stdio.h>

/* Writes cell `c` of column `name` as a CSV field: as
 * tool_cellfmt_put does, except that a BLOB in a column named
 * `levels` or `error_bounds` is decoded as little-endian doubles
 * ("2 1 0"). Returns 0 or BELLOWS_EIO. */
int tool_export_put_cell(FILE *f, const char *name, const tool_hdb_cell *c);

/* Runs `bellows export` with its arguments (argv[0] is "export").
 * Returns the process exit code: 0 when every file was written, 1 when
 * the database cannot be read, the run does not exist or a file cannot
 * be written (or exists, without --force), 2 on a usage error. */
int tool_export_main(int argc, char **argv);

/* Writes the subcommand's usage text to f. */
void tool_export_usage(FILE *f);

#endif /* TOOL_EXPORT_CLI_H */
