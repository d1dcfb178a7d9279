/* screen - the terminal under `bellows top`: the only curses user.
 *
 * Takes the terminal over (cbreak, no echo, keypad, hidden cursor), shows
 * rendered canvases through curses' own double buffer (only changed cells
 * go to the terminal, so there is no flicker), turns curses' keys into
 * dash_key codes and follows resizes. The terminal is given back on every
 * way out: dash_screen_close, exit() (atexit), SIGINT/SIGTERM/SIGHUP
 * (which only set a flag the main loop reads) and crashes (SIGSEGV,
 * SIGBUS, SIGFPE, SIGABRT restore it and die with the same signal).
 * Cells' meanings (layout.h) become colours: errors red, critical
 * magenta, stable green, changed yellow, levels cyan, raw dim; without
 * colours (a terminal that has none, or the caller's choice) errors are
 * bold and underlined, critical bold, changed underlined, raw dim.
 * One screen per process, used from the main thread.
 */
#ifndef DASH_SCREEN_H
#define DASH_SCREEN_H

#include "dashboards/layout.h"

#include <stdbool.h>

/* Starts curses on the terminal, in colour when `colour` is true and the
 * terminal has colours, else in monochrome. Returns 0, or BELLOWS_EINVAL
 * when standard input/output is not a terminal curses can drive. */
int dash_screen_open(bool colour);

/* Gives the terminal back. Safe to call more than once. */
void dash_screen_close(void);

/* Restores the terminal, prints "bellows top: <message>" to stderr and
 * exits with status 1. */
void dash_fatal(const char *fmt, ...)
    __attribute__((noreturn, format(printf, 1, 2)));

/* The screen's current size. */
void dash_screen_size(int *ret_rows, int *ret_cols);

/* Copies c (sized as dash_screen_size says) to the terminal. */
void dash_screen_draw(const dash_canvas *c);

/* The next key, or -1 when none is waiting; 0 after a resize (the
 * caller redraws at the new size). */
int dash_screen_key(void);

/* True once SIGINT, SIGTERM or SIGHUP arrived. */
bool dash_screen_stop_requested(void);

#endif /* DASH_SCREEN_H */
