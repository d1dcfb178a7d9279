/* metrics - a recorded metrics file: per window and layer, the norm of the
 * layer's window-summed gradient and the learning rate of the window, as
 * CSV.
 *
 * `bellows sim --record-metrics` writes such files and `bellows replay`
 * reads them; a trainer can write them too. The header names the columns
 * in any order: window, layer, grad_norm and lr are required; numel and
 * shape ("64x32", empty = unknown) are optional and give the layer table
 * the policies' selectors see. Rows are grouped by window in increasing
 * order (windows may be skipped), every window lists the same layers and
 * the first window fixes the table and its order. A file is read and
 * checked completely before anything uses it; the first problem is
 * reported as "FILE:LINE: message". Fields may be quoted as in RFC 4180
 * ("a,b", with "" for a quote) but not span lines.
 */
#ifndef TOOL_METRICS_H
#define TOOL_METRICS_H

#include "common/msg.h"

#include <stdint.h>
#include <stdio.h>

#define TOOL_METRICS_ERR_MAX    512   /* bytes of an error message */
#define TOOL_METRICS_MAX_LAYERS 65536 /* layers in a table, as agents */
#define TOOL_METRICS_LINE_MAX   65536 /* bytes of one line, newline aside */
#define TOOL_METRICS_FILE_MAX                                                  \
	((uint64_t)1 << 30) /* bytes of a file: 1 GiB, some 25 million rows,   \
			     * whose table takes at most a third of that */

typedef struct tool_metrics {
	uint32_t n_layers;      /* entries in layers */
	com_layer_info *layers; /* the table, in the first window's order;
				 * a layer without a shape is 2-D with
				 * dimensions 0 (unknown), numel 0 if
				 * that is unknown too */
	uint32_t n_unshaped;    /* layers whose shape the file lacks */
	uint64_t n_windows;     /* windows in the file */
	uint64_t *window;       /* n_windows indices, increasing */
	double *lr;             /* n_windows LRs, >= 0 */
	double *grad_norm;      /* n_windows x n_layers norms, >= 0, finite,
				 * row w holds window[w] in table order */
} tool_metrics;

/* Reads a metrics file from `f` (read to its end, not closed); `name`
 * stands for the file in messages. On success *ret_m is the caller's (free
 * with tool_metrics_destroy). On failure returns BELLOWS_EINVAL (malformed:
 * errbuf holds "NAME:LINE: message"), BELLOWS_ELIMIT (more than
 * TOOL_METRICS_MAX_LAYERS layers, a line longer than
 * TOOL_METRICS_LINE_MAX bytes or a file larger than TOOL_METRICS_FILE_MAX,
 * same message form: it stops reading there), BELLOWS_EIO (a read error)
 * or BELLOWS_ENOMEM, and *ret_m is untouched. */
int tool_metrics_read(FILE *f, const char *name, tool_metrics **ret_m,
    char *errbuf, size_t errlen);

/* Same as tool_metrics_read with a file limit of max_bytes instead of
 * TOOL_METRICS_FILE_MAX. */
int tool_metrics_read_max(FILE *f, const char *name, uint64_t max_bytes,
    tool_metrics **ret_m, char *errbuf, size_t errlen);

/* Same for the file at `path` ("-" is standard input). Returns
 * BELLOWS_EIO with "PATH: reason" in errbuf when it cannot be opened. */
int tool_metrics_load(const char *path, tool_metrics **ret_m, char *errbuf,
    size_t errlen);

/* Frees a table read by tool_metrics_read. NULL-safe, sets *m to NULL. */
void tool_metrics_destroy(tool_metrics **m);

#define TOOL_NUMBER_TEXT_MAX 32 /* bytes of tool_metrics_number_text */

/* Writes v into buf (len bytes, at least TOOL_NUMBER_TEXT_MAX) in the
 * shortest of %.15g, %.16g and %.17g that reads back as exactly v with
 * strtod: 0.4 rather than 0.40000000000000002, yet every double exact. */
void tool_metrics_number_text(double v, char *buf, size_t len);

/* Writes v to f as tool_metrics_number_text spells it. Returns 0 or
 * BELLOWS_EIO. */
int tool_metrics_put_number(FILE *f, double v);

/* Writes `s` as one CSV field to f: as it is when it needs no quoting,
 * else in double quotes with quotes doubled. Returns 0 or BELLOWS_EIO. */
int tool_metrics_put_field(FILE *f, const char *s);

/* Writes `ndim` dimensions as a shape field ("64x32"; "" for ndim 0)
 * into buf (len bytes, truncated to fit). */
void tool_metrics_shape_text(const uint32_t *shape, uint32_t ndim, char *buf,
    size_t len);

#endif /* TOOL_METRICS_H */
