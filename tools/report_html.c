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

double
tool_report_tick_step(double lo, double hi)
{
	double raw, mag, norm;

	if (!isfinite(lo) || !isfinite(hi) || hi <= lo)
		return 1;
	raw = (hi - lo) / 4;
	mag = pow(10, floor(log10(raw)));
	norm = raw / mag;
	if (norm <= 1)
		return mag;
	if (norm <= 2)
		return 2 * mag;
	if (norm <= 5)
		return 5 * mag;
	return 10 * mag;
}

/* The plot's frame: where data coordinates land in the SVG. */
typedef struct plot_frame {
	double W, H, L, R, T, B; /* size and margins */
	double x0, x1, y0, y1;   /* data range shown */
} plot_frame;

static double
plot_px(const plot_frame *p, double x)
{
	return p->L + (p->W - p->R - p->L) * (x - p->x0) / (p->x1 - p->x0);
}

static double
plot_py(const plot_frame *p, double y)
{
	return p->H - p->B -
	    (p->H - p->B - p->T) * (y - p->y0) / (p->y1 - p->y0);
}

/* Point i of series k: its x and y. */
static void
plot_point(const rep_series *s, const double *x, uint64_t i, double *px,
    double *py)
{
	*px = s->x != NULL ? s->x[i] : x[i];
	*py = s->y[i * s->stride];
}

static uint64_t
plot_count(const rep_series *s, uint64_t n)
{
	return s->x != NULL ? s->n : n;
}

/* The data's range over every series; false when nothing is finite. */
static bool
plot_range(const double *x, uint64_t n, const rep_series *s, size_t ns,
    plot_frame *p)
{
	p->x0 = p->y0 = INFINITY;
	p->x1 = p->y1 = -INFINITY;
	for (size_t k = 0; k < ns; k++) {
		for (uint64_t i = 0; i < plot_count(&s[k], n); i++) {
			double xv, yv;

			plot_point(&s[k], x, i, &xv, &yv);
			if (!isfinite(xv) || !isfinite(yv))
				continue;
			p->x0 = fmin(p->x0, xv);
			p->x1 = fmax(p->x1, xv);
			p->y0 = fmin(p->y0, yv);
			p->y1 = fmax(p->y1, yv);
		}
	}
	return isfinite(p->x0) && isfinite(p->y0);
}

/* Widens the range to round ticks: y from zero for an amount, both
 * axes out to the nearest tick; x never before the first point's tick. */
static void
plot_round(const rep_axes *ax, plot_frame *p, double *xstep, double *ystep)
{
	if (ax->y_from_zero) {
		p->y0 = fmin(p->y0, 0);
		p->y1 = fmax(p->y1, 0);
	}
	if (p->y1 == p->y0) {
		p->y1 += fabs(p->y0) > 0 ? fabs(p->y0) * 0.1 : 1;
		p->y0 -= fabs(p->y0) > 0 ? fabs(p->y0) * 0.1 : 0;
	}
	if (p->x1 == p->x0)
		p->x1 = p->x0 + 1;
	*ystep = tool_report_tick_step(p->y0, p->y1);
	p->y0 = floor(p->y0 / *ystep + 1e-9) * *ystep;
	p->y1 = ceil(p->y1 / *ystep - 1e-9) * *ystep;
	*xstep = tool_report_tick_step(p->x0, p->x1);
	if (ax->xlabel == NULL && *xstep < 1)
		*xstep = 1; /* windows are whole */
	p->x0 = floor(p->x0 / *xstep + 1e-9) * *xstep;
	p->x1 = ceil(p->x1 / *xstep - 1e-9) * *xstep;
}

/* A tick label: ax->yfmt's, else the shortest %g that shows v. */
static void
plot_label(void (*fmt)(double, char *, size_t), double v, char *buf, size_t len)
{
	if (fabs(v) < 1e-12)
		v = 0;
	if (fmt != NULL)
		fmt(v, buf, len);
	else
		snprintf(buf, len, "%.6g", v);
}

static void
plot_axes(FILE *f, const rep_axes *ax, const plot_frame *p, double xstep,
    double ystep)
{
	char lab[48];

	fprintf(f,
	    "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" "
	    "stroke=\"#333\"/>\n<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" "
	    "y2=\"%.0f\" stroke=\"#333\"/>\n",
	    p->L, p->H - p->B, p->W - p->R, p->H - p->B, p->L, p->T, p->L,
	    p->H - p->B);
	for (double yv = p->y0; yv <= p->y1 + ystep * 1e-6; yv += ystep) {
		double py = plot_py(p, yv);

		plot_label(ax->yfmt, yv, lab, sizeof(lab));
		fprintf(f,
		    "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" "
		    "stroke=\"#e0e0e0\"/><text x=\"%.0f\" y=\"%.1f\" "
		    "font-size=\"11\" text-anchor=\"end\">",
		    p->L, py, p->W - p->R, py, p->L - 4, py + 4);
		tool_report_esc(f, lab);
		fputs("</text>\n", f);
	}
	for (double xv = p->x0; xv <= p->x1 + xstep * 1e-6; xv += xstep) {
		plot_label(NULL, xv, lab, sizeof(lab));
		fprintf(f,
		    "<text x=\"%.1f\" y=\"%.0f\" font-size=\"11\" "
		    "text-anchor=\"middle\">%s</text>\n",
		    plot_px(p, xv), p->H - p->B + 15, lab);
	}
	fprintf(f,
	    "<text x=\"%.0f\" y=\"%.0f\" font-size=\"12\" "
	    "text-anchor=\"middle\">",
	    p->L + (p->W - p->R - p->L) / 2, p->H - 5);
	tool_report_esc(f, ax->xlabel != NULL ? ax->xlabel : "window");
	fprintf(f,
	    "</text>\n<text x=\"14\" y=\"%.0f\" font-size=\"12\" "
	    "transform=\"rotate(-90 14 %.0f)\" text-anchor=\"middle\">",
	    p->T + (p->H - p->B - p->T) / 2, p->T + (p->H - p->B - p->T) / 2);
	tool_report_esc(f, ax->ylabel);
	fputs("</text>\n", f);
}

/* Series k's line and dots, in colour col. */
static void
plot_series(FILE *f, const plot_frame *p, const double *x, uint64_t n,
    const rep_series *s, const char *col)
{
	uint64_t m = plot_count(s, n), pts = 0;
	double held = NAN;

	for (uint64_t i = 0; i < m; i++) {
		double xv, yv;

		plot_point(s, x, i, &xv, &yv);
		pts += isfinite(xv) && isfinite(yv);
	}
	fprintf(f,
	    "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s "
	    "points=\"",
	    col, s->dashed ? " stroke-dasharray=\"6 4\"" : "");
	for (uint64_t i = 0; i < m; i++) {
		double xv, yv;

		plot_point(s, x, i, &xv, &yv);
		if (!isfinite(xv) || !isfinite(yv))
			continue;
		/* A level holds until the next point: across to it at the
		 * old value, then up or down. */
		if (s->steps && isfinite(held) && held != yv)
			fprintf(f, "%.1f,%.1f ", plot_px(p, xv),
			    plot_py(p, held));
		fprintf(f, "%.1f,%.1f ", plot_px(p, xv), plot_py(p, yv));
		held = yv;
	}
	fputs("\"/>\n", f);
	for (uint64_t i = 0; i < m && pts <= 200; i++) {
		double xv, yv;

		plot_point(s, x, i, &xv, &yv);
		if (isfinite(xv) && isfinite(yv))
			fprintf(f,
			    "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" "
			    "fill=\"%s\"/>\n",
			    plot_px(p, xv), plot_py(p, yv), col);
	}
}

static void
plot_legend(FILE *f, const plot_frame *p, size_t shown, const char *name,
    const char *col)
{
	double ly = p->T + 16.0 * (double)shown;

	if (shown < REP_LEGEND) {
		fprintf(f,
		    "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" "
		    "stroke=\"%s\" stroke-width=\"3\"/><text x=\"%.0f\" "
		    "y=\"%.0f\" font-size=\"11\">",
		    p->W - p->R + 10, ly, p->W - p->R + 30, ly, col,
		    p->W - p->R + 35, ly + 4);
		tool_report_esc(f, name);
		fputs("</text>\n", f);
	} else if (shown == REP_LEGEND) {
		fprintf(f,
		    "<text x=\"%.0f\" y=\"%.0f\" font-size=\"11\">and "
		    "more</text>\n",
		    p->W - p->R + 10, ly + 4);
	}
}

void
tool_report_plot(FILE *f, const rep_axes *ax, const double *x, uint64_t n,
    const rep_series *s, size_t ns)
{
	/* The title sits in a band of its own above the top tick. */
	plot_frame p = { .W = 900,
		.H = 320,
		.L = 80,
		.R = 190,
		.T = 48,
		.B = 40 };
	double xstep, ystep;
	size_t shown = 0;

	fprintf(f,
	    "<figure><svg width=\"%.0f\" height=\"%.0f\" role=\"img\">\n"
	    "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" "
	    "fill=\"#fafafa\" stroke=\"#ccc\"/>\n<text x=\"%.0f\" y=\"22\" "
	    "font-size=\"14\" font-weight=\"bold\">",
	    p.W, p.H, p.W, p.H, p.L);
	tool_report_esc(f, ax->title);
	fputs("</text>\n", f);
	if (!plot_range(x, n, s, ns, &p)) {
		fprintf(f,
		    "<text x=\"%.0f\" y=\"%.0f\" font-size=\"14\">not "
		    "recorded</text></svg></figure>\n",
		    p.L, p.H / 2);
		return;
	}
	plot_round(ax, &p, &xstep, &ystep);
	plot_axes(f, ax, &p, xstep, ystep);
	for (size_t k = 0; k < ns; k++) {
		uint64_t pts = 0;

		for (uint64_t i = 0; i < plot_count(&s[k], n); i++) {
			double xv, yv;

			plot_point(&s[k], x, i, &xv, &yv);
			pts += isfinite(xv) && isfinite(yv);
		}
		if (pts == 0)
			continue;
		plot_series(f, &p, x, n, &s[k], rep_colors[shown % 10]);
		plot_legend(f, &p, shown, s[k].name, rep_colors[shown % 10]);
		shown++;
	}
	fputs("</svg></figure>\n", f);
}
