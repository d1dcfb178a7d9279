/* top - `bellows top`: the terminal dashboard of bellowsd and its jobs.
 *
 * Glue between the data source (source.h), the model (model.h), the
 * layout and the curses screen (tui/screen.h) or the plain-text output
 * (dash_text.h, --once). docs/top.md describes what it shows.
 */
#ifndef DASH_TOP_H
#define DASH_TOP_H

#include <stdio.h>

/* Runs `bellows top` with argv from "top" on; returns the exit status
 * (0, 1 failed, 2 usage). */
int dash_top_main(int argc, char **argv);

/* Writes its usage text to f. */
void dash_top_usage(FILE *f);

#endif /* DASH_TOP_H */
