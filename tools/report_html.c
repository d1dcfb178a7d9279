/* report_html - the SVG plot of `bellows report --html`, see
 * report_int.h.
 *
 * This file owns drawing: axes, ticks, a line per series (dashed for a
 * reference), a legend, all as inline SVG with no script, so that the
 * page renders anywhere. Which series to plot and the page around the
 * plots are report.c's.
 */
#include "report_int.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const char *const rep_colors[] = { "#1f77b4", "#ff7f0e", "#2ca02c",
	"#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
	"#17becf" };

void
tool_report_plot(FILE *f, const char *title, const char *ylabel,
    const double *x, uint64_t n, const rep_series *s, size_t ns)
{
	const double W = 900, H = 300, L = 70, R = 190, T = 30, B = 40;
	double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;

	for (uint64_t i = 0; i < n; i++) {
		x0 = fmin(x0, x[i]);
		x1 = fmax(x1, x[i]);
		for (size_t k = 0; k < ns; k++) {
			double v = s[k].y[i * s[k].stride];

			if (isfinite(v)) {
				y0 = fmin(y0, v);
				y1 = fmax(y1, v);
			}
		}
	}
	fprintf(f,
	    "<figure><svg "
	    "width=\"%.0f\" height=\"%.0f\" role=\"img\">\n",
	    W, H);
	fprintf(f,
	    "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" "
	    "fill=\"#fafafa\" stroke=\"#ccc\"/>\n<text x=\"%.0f\" y=\"20\" "
	    "font-size=\"14\" font-weight=\"bold\">",
	    W, H, L);
	tool_report_esc(f, title);
	fputs("</text>\n", f);
	if (!isfinite(y0) || !isfinite(x0)) {
		fprintf(f,
		    "<text x=\"%.0f\" y=\"%.0f\" font-size=\"14\">not "
		    "recorded</text></svg></figure>\n",
		    L, H / 2);
		return;
	}
	if (y1 == y0) {
		y1 += fabs(y0) > 0 ? fabs(y0) * 0.1 : 1;
		y0 -= fabs(y0) > 0 ? fabs(y0) * 0.1 : 0;
	}
	if (x1 == x0)
		x1 = x0 + 1;
	/* axes, 5 ticks each */
	fprintf(f,
	    "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" "
	    "stroke=\"#333\"/>\n<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" "
	    "y2=\"%.0f\" stroke=\"#333\"/>\n",
	    L, H - B, W - R, H - B, L, T, L, H - B);
	for (int k = 0; k <= 4; k++) {
		double yv = y0 + (y1 - y0) * k / 4, xv = x0 + (x1 - x0) * k / 4;
		double py = H - B - (H - B - T) * k / 4;
		double px = L + (W - R - L) * k / 4;

		fprintf(f,
		    "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" "
		    "stroke=\"#e0e0e0\"/><text x=\"%.0f\" y=\"%.1f\" "
		    "font-size=\"11\" text-anchor=\"end\">%.4g</text>\n",
		    L, py, W - R, py, L - 4, py + 4, yv);
		fprintf(f,
		    "<text x=\"%.1f\" y=\"%.0f\" font-size=\"11\" "
		    "text-anchor=\"middle\">%.4g</text>\n",
		    px, H - B + 15, xv);
	}
	fprintf(f,
	    "<text x=\"%.0f\" y=\"%.0f\" font-size=\"12\" "
	    "text-anchor=\"middle\">window</text>\n",
	    L + (W - R - L) / 2, H - 5);
	fprintf(f,
	    "<text x=\"14\" y=\"%.0f\" font-size=\"12\" "
	    "transform=\"rotate(-90 14 %.0f)\" "
	    "text-anchor=\"middle\">",
	    T + (H - B - T) / 2, T + (H - B - T) / 2);
	tool_report_esc(f, ylabel);
	fputs("</text>\n", f);
	for (size_t k = 0, shown = 0; k < ns; k++) {
		const char *col = rep_colors[shown % 10];
		double held = NAN;
		uint64_t pts = 0;

		/* A series recorded only in some windows (a check every
		 * other window) is joined across the others; every point
		 * gets a dot. */
		for (uint64_t i = 0; i < n; i++)
			pts += isfinite(s[k].y[i * s[k].stride]);
		if (pts == 0)
			continue;
		fprintf(f,
		    "<polyline fill=\"none\" stroke=\"%s\" "
		    "stroke-width=\"2\"%s points=\"",
		    col, s[k].dashed ? " stroke-dasharray=\"6 4\"" : "");
		for (uint64_t i = 0; i < n; i++) {
			double v = s[k].y[i * s[k].stride];
			double px = L + (W - R - L) * (x[i] - x0) / (x1 - x0);

			if (!isfinite(v))
				continue;
			/* A level holds until the next point: across to
			 * it at the old value, then up or down. */
			if (s[k].steps && isfinite(held) && held != v)
				fprintf(f, "%.1f,%.1f ", px,
				    H - B -
					(H - B - T) * (held - y0) / (y1 - y0));
			fprintf(f, "%.1f,%.1f ", px,
			    H - B - (H - B - T) * (v - y0) / (y1 - y0));
			held = v;
		}
		fputs("\"/>\n", f);
		for (uint64_t i = 0; i < n && pts <= 200; i++) {
			double v = s[k].y[i * s[k].stride];

			if (isfinite(v))
				fprintf(f,
				    "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" "
				    "fill=\"%s\"/>\n",
				    L + (W - R - L) * (x[i] - x0) / (x1 - x0),
				    H - B - (H - B - T) * (v - y0) / (y1 - y0),
				    col);
		}
		if (shown < REP_LEGEND) {
			double ly = T + 16.0 * (double)shown;

			fprintf(f,
			    "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" "
			    "y2=\"%.0f\" stroke=\"%s\" stroke-width=\"3\"/>"
			    "<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\">",
			    W - R + 10, ly, W - R + 30, ly, col, W - R + 35,
			    ly + 4);
			tool_report_esc(f, s[k].name);
			fputs("</text>\n", f);
		} else if (shown == REP_LEGEND) {
			fprintf(f,
			    "<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\">"
			    "and more</text>\n",
			    W - R + 10, T + 16.0 * (double)shown + 4);
		}
		shown++;
	}
	fputs("</svg></figure>\n", f);
}
