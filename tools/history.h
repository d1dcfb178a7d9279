/* history - `bellows history`: the questions people ask of the history
 * database, answered as aligned tables, CSV or JSON.
 *
 * Each subcommand (runs, layers, windows, decisions, events, timings) is
 * one question of historydb; this module picks the run (the latest unless
 * --run names one), turns --since/--until into the question's bounds and
 * prints the rows: tables aligned, truncating long text (unless --wide),
 * CSV quoted as RFC 4180, JSON an array of objects with numbers as
 * numbers and NULL as null; a cell's CSV and JSON forms are
 * client/cellfmt.c's. `bellows history compare` is report_compare.c's,
 * which tools/bellows.c calls directly.
 */
#ifndef TOOL_HISTORY_H
#define TOOL_HISTORY_H

#include "client/historydb.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define TOOL_HISTORY_CELL_MAX                                                  \
	60 /* characters of a text cell in a table                             \
	    * without --wide */
#define TOOL_HISTORY_DEFAULT_DB TOOL_HDB_DEFAULT_PATH /* as bellowsd's --db */

typedef enum tool_history_format {
	TOOL_HISTORY_TABLE = 0, /* aligned columns for people */
	TOOL_HISTORY_CSV,       /* RFC 4180, a header line */
	TOOL_HISTORY_JSON,      /* an array of objects */
} tool_history_format;

/* A --since or --until value: a window number or a UTC time. */
typedef struct tool_history_bound {
	bool set;      /* given */
	bool is_time;  /* a time (ms), else a window */
	int64_t value; /* window index, or wall-clock ms: the first
			* millisecond the text names (--since) or its
			* last (--until: "10:05" covers 10:05:59.999) */
} tool_history_bound;

/* Parses `text`, the value of option `opt`, as a window number ("12")
 * or a UTC time "YYYY-MM-DD[THH:MM[:SS[.mmm]]][Z]" (a space may stand
 * for the T). `until` picks the last millisecond of what the text names
 * rather than the first. Returns 0, or BELLOWS_EINVAL after printing
 * "bellows CMD: OPT ..." to stderr (*ret untouched). */
int tool_history_parse_bound(const char *cmd, const char *opt, const char *text,
    bool until, tool_history_bound *ret);

/* Parses a --format value. Returns 0 or BELLOWS_EINVAL (printed to
 * stderr as for tool_history_parse_bound). */
int tool_history_parse_format(const char *cmd, const char *text,
    tool_history_format *ret);

/* Writes `rows` in format `fmt`. A table aligns its columns (numbers to
 * the right), shows NULL as "-", replaces control characters by spaces
 * and, unless `wide`, cuts text longer than TOOL_HISTORY_CELL_MAX
 * characters with "...". Returns 0, BELLOWS_ENOMEM or BELLOWS_EIO. */
int tool_history_print(FILE *f, const tool_hdb_rows *rows,
    tool_history_format fmt, bool wide);

/* Runs `bellows history` with its arguments (argv[0] is "history").
 * Returns the process exit code: 0 when the answer was printed, 1 when
 * the database cannot be read or holds no such run or layer, 2 on a
 * usage error. */
int tool_history_main(int argc, char **argv);

/* Writes the subcommand's usage text to f. */
void tool_history_usage(FILE *f);

#endif /* TOOL_HISTORY_H */
