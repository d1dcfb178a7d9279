/* layout - draws a dash_model on a grid of characters.
 *
 * The one place that decides what goes where on the screen: a header with
 * bellowsd's health, a tab bar, the job's summary line, the view's table
 * and a key line at the bottom. The grid (dash_canvas) holds printable
 * ASCII and one attribute per cell; the curses screen copies it to the
 * terminal, the --once output prints it as text, so both show the same.
 * Every width from 40 columns up is laid out; narrower columns are cut
 * ("~" marks cut text) rather than wrapped, except in the detail views,
 * which wrap reasons to the width. Cells carry what they mean (critical,
 * stable, changed...), not colours: the screen picks colours, or bold,
 * reverse and underline on a terminal without them. Pure: no I/O.
 */
#ifndef DASH_LAYOUT_H
#define DASH_LAYOUT_H

#include "model.h"

#include <stdint.h>

/* Cell attributes, OR-ed. */
enum {
	DASH_ATTR_NONE = 0,
	DASH_ATTR_BOLD = 1,     /* headings */
	DASH_ATTR_REVERSE = 2,  /* selection, current tab, header bar */
	DASH_ATTR_ALERT = 4,    /* lost ranks, degraded store, no daemon */
	DASH_ATTR_CRITICAL = 8, /* Accordion's critical regime */
	DASH_ATTR_STABLE = 16,  /* its stable regime */
	DASH_ATTR_RAW = 32,     /* never compressed, level 0 */
	DASH_ATTR_CHANGED = 64, /* changed in the last window or decision */
	DASH_ATTR_LEVEL = 128,  /* a compression level in force */
};

typedef struct dash_canvas {
	int rows;      /* lines */
	int cols;      /* columns */
	char *text;    /* rows x cols characters */
	uint8_t *attr; /* rows x cols DASH_ATTR_* */
} dash_canvas;

/* Allocates a blank rows x cols canvas (both at least 1). Returns 0 or
 * BELLOWS_ENOMEM (then *c is zeroed). */
int dash_canvas_init(dash_canvas *c, int rows, int cols);

/* Frees the canvas and zeroes it. Safe on a zeroed canvas. */
void dash_canvas_fini(dash_canvas *c);

/* Blanks every cell. */
void dash_canvas_clear(dash_canvas *c);

/* Writes text at (row, col) with attribute attr, cut at the right edge
 * and at `width` characters (width < 0: up to the edge); control
 * characters become spaces. Returns the columns written. */
int dash_canvas_put(dash_canvas *c, int row, int col, int width, int attr,
    const char *text);

/* Line `row` as text without trailing spaces into buf (cols + 1 bytes). */
void dash_canvas_line(const dash_canvas *c, int row, char *buf);

/* Draws the model on c (cleared first). */
void dash_layout_render(const dash_model *m, dash_canvas *c);

/* The highest useful scroll (dash_model.scroll) of the detail view shown
 * on a rows x cols screen: its lines past the screen, 0 when it fits or
 * the view is not a detail. */
uint32_t dash_layout_scroll_max(const dash_model *m, int rows, int cols);

/* Word-wraps text into lines of at most `width` (>= 8) characters: a new
 * line after every "; " (one clause a line), continuation lines indented
 * by two spaces, words longer than a line broken. Calls line(arg, n,
 * text) for each line n from 0 (text NUL-terminated, valid during the
 * call) and returns how many lines there are. */
int dash_layout_wrap(const char *text, int width,
    void (*line)(void *arg, int n, const char *text), void *arg);

#endif /* DASH_LAYOUT_H */
