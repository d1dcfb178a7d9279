/* report_emit - the two forms `bellows report` is written in, behind one
 * interface (rep_emit, see report_int.h): plain text, and one
 * self-contained HTML page.
 *
 * The report's sections write only through this interface, so that the
 * text and the page never disagree and no section asks which form it is
 * writing. The page holds the text of each section, escaped, in a <pre>
 * block under an <h2>, and the section's plots between the blocks; the
 * text form writes the same text and draws no plot (the section's plot
 * calls reach nothing). Write errors show in ferror(e->f), as they do
 * for every writer of the report.
 */
#include "report_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* The page's style: no URL, no script; an empty <pre> (between two
 * groups of plots) takes no room. */
static const char emit_html_style[] =
    "<style>body{font-family:sans-serif;margin:2em;"
    "max-width:1000px;color:#222;background:#fff}"
    "pre{background:#f4f4f4;padding:0.6em;white-space:pre-wrap}"
    "pre:empty{display:none}"
    "figure{margin:1em 0}h1{font-size:1.5em}"
    "h2{font-size:1.2em;border-bottom:1px solid #ccc}"
    "</style>";

static void
emit_text_section(const rep_emit *e, const char *title)
{
	fprintf(e->f, "\n%s\n", title);
}

static void
emit_text_put(const rep_emit *e, const char *s)
{
	fputs(s, e->f);
}

/* Text has no document around it, no figures and no plots. */
const rep_emit_ops tool_report_text_ops = {
	.section = emit_text_section,
	.put = emit_text_put,
};

static void
emit_html_open(const rep_emit *e, const char *title, const char *heading)
{
	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head>"
	      "<meta charset=\"utf-8\"><title>",
	    e->f);
	tool_report_esc(e->f, title);
	fprintf(e->f, "</title>%s</head><body>\n<h1>", emit_html_style);
	tool_report_esc(e->f, heading);
	fputs("</h1>\n<pre>", e->f);
}

static void
emit_html_close(const rep_emit *e)
{
	fputs("</pre>\n</body></html>\n", e->f);
}

static void
emit_html_section(const rep_emit *e, const char *title)
{
	fputs("</pre>\n<h2>", e->f);
	tool_report_esc(e->f, title);
	fputs("</h2>\n<pre>", e->f);
}

static void
emit_html_put(const rep_emit *e, const char *s)
{
	tool_report_esc(e->f, s);
}

/* Plots go between the text blocks, not inside one. */
static void
emit_html_figures(const rep_emit *e, bool begin)
{
	fputs(begin ? "</pre>\n" : "<pre>", e->f);
}

static void
emit_html_plot(const rep_emit *e, const rep_axes *ax, const double *x,
    uint64_t n, const rep_series *s, size_t ns)
{
	tool_report_plot(e->f, ax, x, n, s, ns);
}

const rep_emit_ops tool_report_html_ops = {
	.open = emit_html_open,
	.close = emit_html_close,
	.section = emit_html_section,
	.put = emit_html_put,
	.figures = emit_html_figures,
	.plot = emit_html_plot,
};

char *
tool_report_vformat(const char *fmt, va_list ap)
{
	va_list again;
	char *p;
	int n;

	va_copy(again, ap);
	n = vsnprintf(NULL, 0, fmt, ap);
	if (n < 0 || (p = malloc((size_t)n + 1)) == NULL) {
		va_end(again);
		return NULL;
	}
	vsnprintf(p, (size_t)n + 1, fmt, again);
	va_end(again);
	return p;
}

char *
tool_report_format(const char *fmt, ...)
{
	va_list ap;
	char *p;

	va_start(ap, fmt);
	p = tool_report_vformat(fmt, ap);
	va_end(ap);
	return p;
}

void
tool_report_open(const rep_emit *e, const char *title, const char *heading)
{
	if (e->ops->open != NULL)
		e->ops->open(e, title, heading);
}

void
tool_report_close(const rep_emit *e)
{
	if (e->ops->close != NULL)
		e->ops->close(e);
}

void
tool_report_section(const rep_emit *e, const char *title)
{
	e->ops->section(e, title);
}

void
tool_report_printf(const rep_emit *e, const char *fmt, ...)
{
	char buf[1024], *p = buf;
	va_list ap;
	int n;

	/* Most lines fit buf; a policy file or a reason may not. */
	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(buf)) {
		va_start(ap, fmt);
		p = tool_report_vformat(fmt, ap);
		va_end(ap);
		if (p == NULL)
			return;
	}
	e->ops->put(e, p);
	if (p != buf)
		free(p);
}

void
tool_report_figures(const rep_emit *e, bool begin)
{
	if (e->ops->figures != NULL)
		e->ops->figures(e, begin);
}

void
tool_report_draw(const rep_emit *e, const rep_axes *ax, const double *x,
    uint64_t n, const rep_series *s, size_t ns)
{
	if (e->ops->plot != NULL)
		e->ops->plot(e, ax, x, n, s, ns);
}
