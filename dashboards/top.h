/* top - `bellows top`: the terminal dashboard of bellowsd and its jobs.
 *
 * Glue between the data source (source.h), the model (model.h), the
 * layout and the curses screen (tui/screen.h) or the plain-text output
 * (dash_text.h, --once). docs/top.md describes what it shows.
 */
#ifndef DASH_TOP_H
#define DASH_TOP_H

#include "common/args.h"
#include "model.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* What the command line asks of `bellows top`. */
typedef struct dash_top_opts {
	const char *control;    /* NULL = offline */
	bool control_given;     /* --control given */
	const char *publish;    /* bellowsd's PUB */
	com_args_shared sh;     /* --db (NULL: not given), --run, --job
				 * (job to open, NULL = none) */
	int64_t run;            /* offline: run to open, DASH_NONE: none */
	bool offline;           /* --offline */
	bool once;              /* print one screen and leave */
	bool all_decisions;     /* also decisions that change nothing */
	dash_view view;         /* --once: view printed */
	uint32_t rows;          /* --once: screen size */
	uint32_t cols;          /* same */
	const char *server_key; /* --server-key, NULL: not given */
	const char *client_key; /* --client-key, NULL: not given */
	bool no_color;          /* --no-color */
} dash_top_opts;

/* Parses top's options (argv[0] is "top") from its rows of the option
 * table into *ret, first filled with the defaults ($BELLOWS_CONTROL,
 * $BELLOWS_PUBLISH, $BELLOWS_JOB), and settles live or offline:
 * control is NULL with --offline, or with --db or --run and no
 * --control. Returns -1 to go on, 0 after --help (the usage written to
 * stdout), 2 on a usage error (said on stderr as "bellows top: ...",
 * an unknown option with the nearest one). *ret borrows from argv and
 * the environment. */
int dash_top_parse(int argc, char **argv, dash_top_opts *ret);

/* Runs `bellows top` with argv from "top" on; returns the exit status
 * (0, 1 failed, 2 usage). */
int dash_top_main(int argc, char **argv);

/* Writes its usage text to f. */
void dash_top_usage(FILE *f);

#endif /* DASH_TOP_H */
