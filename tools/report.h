/* report - `bellows report` and `bellows history compare`: a run's story
 * and two runs side by side, read from bellowsd's history database.
 *
 * A run is read through historydb's export of its tables (runs, layers,
 * window_info, windows, policy_metrics, decisions, decision_changes,
 * policy_files), in one read snapshot, and summed up here: the
 * configuration, the decisions that changed a knob and why, the LR, the
 * gradient norms and what the policies computed, floats and bytes sent
 * against raw, step times and activation memory. The text report is for
 * a terminal; --html writes one self-contained page with inline SVG
 * plots (no script, no external resource). Sizes and durations are
 * human-readable here; exact numbers stay with `bellows history` and
 * `bellows export`. Used from one thread.
 */
#ifndef TOOL_REPORT_H
#define TOOL_REPORT_H

#include <stdio.h>

/* Runs `bellows report` with its arguments (argv[0] is "report").
 * Returns the process exit code: 0 when the report was written, 1 when
 * the database cannot be read, holds no such run (or the run is not of
 * --job) or the HTML file cannot be written, 2 on a usage error. */
int tool_report_main(int argc, char **argv);

/* Writes the usage text of `bellows report` to f. */
void tool_report_usage(FILE *f);

/* Runs `bellows history compare` (argv[0] is "compare"). Returns the
 * process exit code as tool_report_main; two runs that cannot be told
 * apart from the options (e.g. two --db and one --run) are a usage
 * error. */
int tool_report_compare_main(int argc, char **argv);

/* Writes the usage text of `bellows history compare` to f. */
void tool_report_compare_usage(FILE *f);

#endif /* TOOL_REPORT_H */
