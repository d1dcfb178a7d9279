/* cmdline - bellowsd's command line: what it is asked to serve, and how.
 *
 * bellowsd's options are rows of the option table (common/args.h), as
 * every subcommand of `bellows` has them: an unknown option is refused
 * with the nearest one's name, a value is checked before anything is
 * opened, and --help lists the rows. main.c reads the result and acts
 * on it; parsing opens nothing and exits nothing.
 */
#ifndef CTL_CMDLINE_H
#define CTL_CMDLINE_H

#include "policyhost/log.h"

#include <stdbool.h>
#include <stdio.h>

#define CTL_CMDLINE_DB "bellows.db" /* --db default, in the working dir */

/* What the command line asks of bellowsd. Strings are borrowed from
 * argv. */
typedef struct ctl_cmdline {
	const char *policy;  /* --policy, the configuration file */
	const char *control; /* --control; NULL: the file's, else the
			      * default */
	const char *publish; /* --publish; NULL: the same */
	const char *db;      /* the history file; NULL with --no-db */
	bool no_db;          /* --no-db: keep no history */
	const char *metrics; /* --metrics-listen; NULL: the file's */
	bool level_given;    /* --log-level was given */
	ctl_log_level level; /* its level */
	bool version;        /* --version */
} ctl_cmdline;

/* Parses bellowsd's argv into *ret, first filled with the defaults.
 * Returns -1 to go on; 0 after --help (the usage on stdout) or
 * --version (the version on stdout); 2 on a usage error, said on stderr
 * as "bellowsd: ..." (an unknown option with the nearest one's name and
 * the usage, a bad value by the option's name, a missing --policy).
 * --no-db wins over --db wherever it stands. */
int ctl_cmdline_parse(int argc, char **argv, ctl_cmdline *ret);

/* Writes bellowsd's usage text to f. */
void ctl_cmdline_usage(FILE *f);

#endif /* CTL_CMDLINE_H */
