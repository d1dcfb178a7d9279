/* stat_doc - writes docs/statistics.md from the statistics table.
 *
 * usage: stat_doc            the Markdown on stdout
 *        stat_doc --check F  exit 0 if file F is exactly that Markdown,
 *                            else say it is stale and exit 1
 *
 * The page is made from stat_table.h alone (bellows/stats.h), so that the
 * statistics documented are the ones declared; the test suite runs the
 * --check form against the committed docs/statistics.md.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stat_table.h"

/* A growing string. */
typedef struct doc_buf {
	char *s;    /* text, NUL-terminated */
	size_t n;   /* bytes used */
	size_t cap; /* allocated */
} doc_buf;

/* Appends s; exits on out-of-memory (a build tool). */
static void
doc_put(doc_buf *b, const char *s)
{
	size_t len = strlen(s);

	if (b->n + len + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *g;

		while (cap < b->n + len + 1)
			cap *= 2;
		if ((g = realloc(b->s, cap)) == NULL) {
			fprintf(stderr, "stat_doc: out of memory\n");
			exit(1);
		}
		b->s = g;
		b->cap = cap;
	}
	memcpy(b->s + b->n, s, len + 1);
	b->n += len;
}

/* Appends s as the text of a table cell: a `|` escaped. */
static void
doc_cell(doc_buf *b, const char *s)
{
	char one[2] = { 0, 0 };

	for (; *s != '\0'; s++) {
		one[0] = *s;
		doc_put(b, *s == '|' ? "\\|" : one);
	}
}

/* Appends the concatenation of up to four strings (NULL ends early). */
static void
doc_cat(doc_buf *b, const char *a, const char *c, const char *d, const char *e)
{
	const char *p[] = { a, c, d, e };

	for (size_t i = 0; i < 4 && p[i] != NULL; i++)
		doc_put(b, p[i]);
}

static const char *
doc_ctype(bellows_stat_type t)
{
	switch (t) {
	case BELLOWS_STAT_TYPE_U32:
		return "uint32";
	case BELLOWS_STAT_TYPE_U64:
		return "uint64";
	case BELLOWS_STAT_TYPE_F64:
		return "double";
	default:
		return "";
	}
}

static const char *
doc_check(bellows_stat_check c)
{
	switch (c) {
	case BELLOWS_STAT_CHECK_MAG:
		return "finite, >= 0";
	case BELLOWS_STAT_CHECK_FRAC:
		return "finite, 0 to 1";
	default:
		return "any";
	}
}

/* The aggregation of s across ranks, in words. */
static void
doc_agg(doc_buf *b, const com_stat *table, const com_stat *s)
{
	const char *gate = s->gate >= 0 ? table[s->gate].name : "";

	switch (s->agg) {
	case BELLOWS_STAT_AGG_NONE:
		doc_put(b, "not aggregated");
		break;
	case BELLOWS_STAT_AGG_SUM:
		doc_put(b, "sum");
		break;
	case BELLOWS_STAT_AGG_SUM_SAT:
		doc_put(b, "sum, saturating");
		break;
	case BELLOWS_STAT_AGG_MAX:
		doc_put(b, "max");
		break;
	case BELLOWS_STAT_AGG_MIN_NZ:
		doc_put(b, "min over the ranks that gave it (> 0)");
		break;
	case BELLOWS_STAT_AGG_MEAN:
		doc_put(b, "mean over the ranks that reported the layer");
		break;
	case BELLOWS_STAT_AGG_GATED_MEAN:
		doc_cat(b, "mean over the ranks with `", gate, "` > 0; 0: none",
		    NULL);
		break;
	case BELLOWS_STAT_AGG_GATED_MEDIAN:
		doc_cat(b, "median over the ranks with `", gate,
		    "` > 0; NaN: none", NULL);
		break;
	case BELLOWS_STAT_AGG_GATED_MAX:
		doc_cat(b, "max over the ranks with `", gate,
		    "` > 0; NaN: none", NULL);
		break;
	case BELLOWS_STAT_AGG_NORM:
		doc_put(b,
		    "rank 0's and the mean over ranks (NaN: none); "
		    "the view's is rank 0's when it reported");
		break;
	case BELLOWS_STAT_AGG_STEP_MEDIAN:
		doc_put(b, "median over ranks of value / `steps`; NaN: none");
		break;
	case BELLOWS_STAT_AGG_STEP_MEDIAN_NZ:
		doc_put(b,
		    "median over the ranks with a value > 0 of value / "
		    "`steps`; 0: none");
		break;
	}
}

/* One table of the page. */
static void
doc_table(doc_buf *b, const com_stat *t, size_t n, const char *view,
    const char *wtable, bool per_rank)
{
	doc_cat(b, "| name | tag | type | unit | check | across ranks | `",
	    view, "` field | `", wtable);
	doc_put(b,
	    per_rank ? "` column | `timings` column | NULL reads as | "
		       "meaning |\n"
		     : "` column | NULL reads as | meaning |\n");
	doc_put(b,
	    per_rank ? "|---|---|---|---|---|---|---|---|---|---|---|\n"
		     : "|---|---|---|---|---|---|---|---|---|---|\n");
	for (size_t i = 0; i < n; i++) {
		const com_stat *s = &t[i];
		char tag[16];

		snprintf(tag, sizeof(tag), "%u", s->tag);
		doc_cat(b, "| `", s->name, "` | ", tag);
		doc_cat(b, " | ", doc_ctype(s->type), " | ", s->unit);
		doc_cat(b, " | ", doc_check(s->check), " | ", NULL);
		doc_agg(b, t, s);
		doc_put(b, " | ");
		if (s->wfield != NULL)
			doc_cat(b, "`", s->wfield, "` (", doc_ctype(s->wtype));
		doc_put(b, s->wfield != NULL ? ") | " : "- | ");
		if (s->wcol != NULL)
			doc_cat(b, "`", s->wcol, "`", NULL);
		if (s->wcol2 != NULL)
			doc_cat(b, ", `", s->wcol2, "`", NULL);
		doc_put(b, s->wcol != NULL ? " | " : "- | ");
		if (per_rank)
			doc_cat(b, s->rcol != NULL ? "`" : "-",
			    s->rcol != NULL ? s->rcol : "",
			    s->rcol != NULL ? "` | " : " | ", NULL);
		if (s->wcol == NULL && s->rcol == NULL)
			doc_put(b, "-");
		else
			doc_put(b,
			    s->hist == BELLOWS_STAT_HIST_NULLABLE ? "NaN"
								  : "0");
		doc_put(b, " | ");
		doc_cell(b, s->doc);
		doc_put(b, " |\n");
	}
}

/* The fold column of BELLOWS_STEP_INFO, in words. */
#define DOC_FOLD_OWN         "the agent's own (see the meaning)"
#define DOC_FOLD_SUM         "summed into the window's `"
#define DOC_FOLD_MAX         "largest, into the window's `"
#define DOC_FOLD_LAST_NZ     "last non-zero, into the window's `"
#define DOC_FOLD_END_OWN     ""
#define DOC_FOLD_END_SUM     "`"
#define DOC_FOLD_END_MAX     "`"
#define DOC_FOLD_END_LAST_NZ "`"
#define DOC_STEP_ROW(name, type, fold, check, unit, doc)                       \
	doc_cat(b, "| `", #name, "` | ", doc_ctype(BELLOWS_STAT_TYPE_##type)); \
	doc_cat(b, " | ", unit, " | ", doc_check(BELLOWS_STAT_CHECK_##check)); \
	doc_cat(b, " | ", DOC_FOLD_##fold,                                     \
	    DOC_FOLD_END_##fold[0] != '\0' ? #name : "", DOC_FOLD_END_##fold); \
	doc_put(b, " | ");                                                     \
	doc_cell(b, doc);                                                      \
	doc_put(b, " |\n");

/* The per-step input table. */
static void
doc_step_table(doc_buf *b)
{
	doc_put(b,
	    "| name | type | unit | check | window | meaning |\n"
	    "|---|---|---|---|---|---|\n");
	BELLOWS_STEP_INFO(DOC_STEP_ROW)
}

/* The page's heading and introduction, up to the per-layer table. */
static void
doc_intro(doc_buf *b)
{
	doc_put(b,
	    "# Statistics\n"
	    "\n"
	    "<!-- Generated from common/bellows/stats.h by stat_doc "
	    "(common/stat_doc.c):\n"
	    "     meson compile -C build && build/common/stat_doc > "
	    "docs/statistics.md\n"
	    "     Do not edit by hand; the test suite fails when this file is "
	    "stale. -->\n"
	    "\n"
	    "Every statistic an agent reports is declared once, as an entry "
	    "of the\n"
	    "table in `common/bellows/stats.h`; the structs, the wire "
	    "mapping and its\n"
	    "checks, the aggregation across ranks, the history columns, the "
	    "Python\n"
	    "mirror and this page are made from it (see \"Adding a "
	    "statistic\" in\n"
	    "[architecture.md](architecture.md)).\n"
	    "\n"
	    "Columns: the protobuf field number (`tag`); the type one rank "
	    "reports;\n"
	    "the check a received value must pass (a report failing it is "
	    "refused\n"
	    "whole); how bellowsd makes one value of a window's ranks and "
	    "where\n"
	    "policies see it (`policies/bellows/policy.h`); the history "
	    "column that\n"
	    "keeps it ([history.md](history.md); `-`: not kept) and what a "
	    "NULL there\n"
	    "reads back as: a REAL column holds NULL for a NaN (a time "
	    "nobody\n"
	    "measured, rank 0's norm when rank 0 did not report), and rows "
	    "written\n"
	    "before a column existed read as 0 where the table says 0.\n"
	    "\n"
	    "## Per layer\n"
	    "\n"
	    "`BELLOWS_LAYER_STATS`: one per layer, rank and window; "
	    "`LayerStats` on the\n"
	    "wire, after the layer index (tag 1); `bellows_layer_stats` "
	    "(after the\n"
	    "window index) in `bellows/agent.h`; `bellows.LayerStats` in "
	    "Python.\n"
	    "\n");
}

/* Which layer statistics a decision lets the agents skip, and what that
 * costs the history. */
static void
doc_skipped(doc_buf *b)
{
	doc_put(b,
	    "\n"
	    "### Statistics no policy reads\n"
	    "\n"
	    "A policy declares the layer statistics it reads: `stats_read` "
	    "in its ops\n"
	    "(policy ABI 5), one bit per entry of the table above by its "
	    "order, which\n"
	    "never changes. For every decision bellowsd takes the "
	    "statistics that none\n"
	    "of the job's policies reads and sends them as the decision's "
	    "`stats_skip`\n"
	    "(protocol minor 5, [protocol.md](protocol.md#minor-5)). A "
	    "policy that\n"
	    "declares nothing (an ABI 4 plug-in, or `stats_read` 0) reads "
	    "them all,\n"
	    "and then nothing is skipped. An agent spares the work of the "
	    "bits it\n"
	    "knows:\n"
	    "\n"
	    "- `acc_norm`: the window accumulator, one float per gradient "
	    "element,\n"
	    "  added to at every observation and reduced at the window's "
	    "end (about\n"
	    "  half of the statistics pass of a float32 layer on the CPU). "
	    "At the\n"
	    "  first step of each window the agent looks at the decision "
	    "in force: when\n"
	    "  it skips `acc_norm` the layers' accumulators are freed and "
	    "the window\n"
	    "  reports `acc_norm` 0, as a layer flagged "
	    "`BELLOWS_LAYER_NO_ACCUMULATOR`\n"
	    "  does; otherwise they are allocated again, zeroed. Every "
	    "rank has the\n"
	    "  same decision in force at the same step and begins windows "
	    "at the same\n"
	    "  steps, so the accumulators go off and on at the same step "
	    "on every rank,\n"
	    "  and a window's `acc_norm` is of all its steps or 0.\n"
	    "  `bellows_agent_accumulators()` counts the layers that have "
	    "one.\n"
	    "\n"
	    "Every other statistic is computed as before. The history records\n"
	    "`acc_norm` 0 (`grad_norm_rank0`, `grad_norm_mean`) for the "
	    "windows it was\n"
	    "skipped in. To keep it for `bellows history`, `bellows top` "
	    "or a replay\n"
	    "against a policy that reads it, set `all_stats: true` in the "
	    "job's entry\n"
	    "([configuration.md](configuration.md)): its decisions then "
	    "skip nothing.\n"
	    "After a reload brings a policy that reads it (`fixed` to "
	    "`accordion`),\n"
	    "the new policies' first decision turns the accumulators on "
	    "from the first\n"
	    "window that begins at or after its apply step; the new "
	    "policy's first\n"
	    "window may still see 0. An agent computes everything until "
	    "its first\n"
	    "Welcome, and with a daemon older than minor 5.\n");
}

/* The per-layer arrays: what carries them, and their table. */
static void
doc_arrays(doc_buf *b)
{
	doc_put(b,
	    "\n"
	    "### Arrays per layer\n"
	    "\n"
	    "`BELLOWS_LAYER_ARRAYS`: fixed-size arrays of uint64, one per "
	    "layer, rank\n"
	    "and window, carried only by the layers a trainer asks for "
	    "(e.g. the flag\n"
	    "`BELLOWS_LAYER_EXP_HIST`); a packed `repeated uint64` of "
	    "`LayerStats` on\n"
	    "the wire, exactly `length` values or absent (else the report "
	    "is refused);\n"
	    "`bellows_agent_window_array()` (`Agent.window_array()` in "
	    "Python) reads\n"
	    "them back. bellowsd sums them value by value over the ranks "
	    "that sent\n"
	    "one (saturating); policies see a pointer and `_len` in "
	    "`bellows_window_layer`\n"
	    "(NULL and 0: nobody sent it); the history keeps the sum in a "
	    "BLOB column of\n"
	    "`windows`, `length` little-endian uint64 (NULL: nobody sent "
	    "it).\n"
	    "\n"
	    "| name | tag | length | unit | window | history | meaning |\n"
	    "|---|---|---|---|---|---|---|\n");
	for (size_t i = 0; i < COM_N_LARRAYS; i++) {
		const com_stat_array *a = &com_layer_array_table[i];
		char tag[16], len[16];

		snprintf(tag, sizeof(tag), "%u", a->tag);
		snprintf(len, sizeof(len), "%u", a->len);
		doc_cat(b, "| `", a->name, "` | ", tag);
		doc_cat(b, " | ", len, " | ", a->unit);
		doc_cat(b, " | sum per value, `", a->wfield, "` | `",
		    a->wcol != NULL ? a->wcol : "-");
		doc_put(b, "` | ");
		doc_cell(b, a->doc);
		doc_put(b, " |\n");
	}
}

/* The whole page docs/statistics.md, in order: the introduction, the
 * per-layer statistics and arrays, the per-rank timings and the per-step
 * input. */
static void
doc_page(doc_buf *b)
{
	doc_intro(b);
	doc_table(b, com_layer_stat_table, COM_N_LSTATS, "bellows_window_layer",
	    "windows", false);
	doc_skipped(b);
	doc_arrays(b);
	doc_put(b,
	    "\n"
	    "## Per rank\n"
	    "\n"
	    "`BELLOWS_RANK_TIMINGS`: one per rank and window; `Timings` on "
	    "the wire.\n"
	    "The history keeps each rank's value in `timings` and the "
	    "aggregate in\n"
	    "`window_info`.\n"
	    "\n");
	doc_table(b, com_timing_stat_table, COM_N_TSTATS, "bellows_window",
	    "window_info", true);
	doc_put(b,
	    "\n"
	    "## Per step\n"
	    "\n"
	    "`BELLOWS_STEP_INFO`: what a trainer hands to "
	    "`bellows_agent_step_end()`\n"
	    "each step (`bellows_step_info`; `bellows.StepInfo` in Python), "
	    "and how the\n"
	    "agent makes the window's timings above from its steps. 0 is "
	    "\"not\n"
	    "measured\"; a value failing its check makes step_end return "
	    "`BELLOWS_EINVAL`.\n"
	    "\n");
	doc_step_table(b);
}

/* Reads file `path` whole into *ret (NUL-terminated). Returns 0 or -1. */
static int
doc_read(const char *path, doc_buf *ret)
{
	FILE *f = fopen(path, "rb");
	char chunk[4096];
	size_t n;

	if (f == NULL)
		return -1;
	doc_put(ret, "");
	while ((n = fread(chunk, 1, sizeof(chunk) - 1, f)) > 0) {
		chunk[n] = '\0';
		if (strlen(chunk) != n) { /* a NUL byte: not our page */
			fclose(f);
			return -1;
		}
		doc_put(ret, chunk);
	}
	fclose(f);
	return 0;
}

int
main(int argc, char **argv)
{
	doc_buf page = { 0 }, file = { 0 };
	int rc = 0;

	doc_page(&page);
	if (argc == 1) {
		fputs(page.s, stdout);
	} else if (argc == 3 && strcmp(argv[1], "--check") == 0) {
		if (doc_read(argv[2], &file) != 0 ||
		    strcmp(file.s, page.s) != 0) {
			fprintf(stderr,
			    "stat_doc: %s is stale: regenerate it with "
			    "build/common/stat_doc > docs/statistics.md\n",
			    argv[2]);
			rc = 1;
		}
	} else {
		fprintf(stderr, "usage: stat_doc [--check FILE]\n");
		rc = 2;
	}
	free(page.s);
	free(file.s);
	return rc;
}
