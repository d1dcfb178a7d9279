/* text - a dashboard screen as plain text, for `bellows top --once`.
 *
 * Prints a rendered canvas (layout.h) line by line without trailing
 * spaces and without any terminal control, so a non-terminal (a pipe, a
 * log, the demo script) sees the same screen the curses view shows.
 */
#ifndef DASH_TEXT_H
#define DASH_TEXT_H

#include "layout.h"

#include <stdio.h>

/* Writes every line of c to f, dropping trailing blank lines. Returns 0
 * or BELLOWS_EIO when f reports a write error. */
int dash_text_print(const dash_canvas *c, FILE *f);

#endif /* DASH_TEXT_H */
