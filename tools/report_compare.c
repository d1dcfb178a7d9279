/* report_compare - `bellows history compare`, see report.h.
 *
 * This file owns the command: its options (two databases or one, two
 * runs as ID or FILE:ID, a job) and the side-by-side table of what two
 * runs add up to, marking a line whose values differ by more than 1%.
 * Loading a run and summing it are report.c's (report_int.h).
 */
#include "report.h"
#include "report_int.h"

#include "client/args.h"
#include "client/historydb.h"
#include "common/units.h"
#include "history.h"

#include <bellows/error.h>

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct compare_opts {
	const char *db[2];  /* --db, in order */
	int n_db;           /* given */
	const char *run[2]; /* --run, as typed: ID or FILE:ID */
	int n_run;          /* given */
	const char *job;    /* --job */
} compare_opts;

static int
compare_opt_db(const char *cmd, const char *opt, const char *text, void *opts)
{
	compare_opts *o = opts;

	if (tool_args_text(cmd, opt, text, 1, 0, false) != 0)
		return BELLOWS_EINVAL;
	if (o->n_db == 2) {
		fprintf(stderr, "bellows %s: --db given more than twice\n",
		    cmd);
		return BELLOWS_EINVAL;
	}
	o->db[o->n_db++] = text;
	return 0;
}

static int
compare_opt_run(const char *cmd, const char *opt, const char *text, void *opts)
{
	compare_opts *o = opts;

	if (tool_args_text(cmd, opt, text, 1, 0, false) != 0)
		return BELLOWS_EINVAL;
	if (o->n_run == 2) {
		fprintf(stderr, "bellows %s: --run given more than twice\n",
		    cmd);
		return BELLOWS_EINVAL;
	}
	o->run[o->n_run++] = text;
	return 0;
}

static const tool_opt compare_opt_rows[] = {
	{ .name = "db",
	    .arg = "FILE",
	    .help = "a history database (default bellows.db); twice: the "
		    "first run from the first, the second from the second",
	    .kind = TOOL_OPT_PARSE,
	    .parse = compare_opt_db },
	{ .name = "run",
	    .arg = "[FILE:]ID",
	    .help = "a run, twice; FILE:ID names its database too (then "
		    "without --db)",
	    .kind = TOOL_OPT_PARSE,
	    .parse = compare_opt_run },
	{ .name = "job",
	    .arg = "NAME",
	    .help = "a run not named by --run is this job's latest",
	    .kind = TOOL_OPT_NAME,
	    .at = offsetof(compare_opts, job),
	    .min = 1,
	    .max = 255 },
};

static const tool_args_cmd compare_cmd = {
	.name = "history compare",
	.opts = compare_opt_rows,
	.n_opts = sizeof(compare_opt_rows) / sizeof(compare_opt_rows[0]),
	.operands = 0,
	.usage = tool_report_compare_usage,
};

void
tool_report_compare_usage(FILE *f)
{
	fputs("usage: bellows history compare --run A --run B [--db FILE]\n"
	      "       bellows history compare --db A.db --db B.db "
	      "[--run A --run B]\n"
	      "       bellows history compare --run A.db:ID --run B.db:ID\n"
	      "\n"
	      "  Two runs side by side, per layer and overall: levels\n"
	      "  applied (as sent) weighted by steps, floats and bytes sent,\n"
	      "  savings, step time, windows, decisions. Lines that differ\n"
	      "  are marked '*'.\n"
	      "  Without --run, each database's latest run (of --job).\n"
	      "\n",
	    f);
	tool_args_help(f, &compare_cmd, NULL);
}

/* Splits "FILE:ID" or "ID". Returns 0, or 2 after saying why. */
static int
compare_split(const char *text, const char **ret_file, char *fbuf, size_t flen,
    int64_t *ret_id)
{
	const char *colon = strrchr(text, ':'), *num = colon ? colon + 1 : text;
	uint64_t v;

	if (colon != NULL) {
		size_t n = (size_t)(colon - text);

		if (n == 0 || n >= flen) {
			fprintf(stderr,
			    "bellows history compare: --run '%s': the file "
			    "before ':' is empty or too long\n",
			    text);
			return 2;
		}
		memcpy(fbuf, text, n);
		fbuf[n] = '\0';
		*ret_file = fbuf;
	}
	if (tool_args_u64("history compare", "--run", num, 1, INT64_MAX, &v) !=
	    0)
		return 2;
	*ret_id = (int64_t)v;
	return 0;
}

/* Marks a line whose two values differ by more than 1%. */
static const char *
compare_mark(double a, double b)
{
	if (isnan(a) && isnan(b))
		return " ";
	if (isnan(a) || isnan(b))
		return "*";
	if (a == b)
		return " ";
	return fabs(a - b) > 0.01 * fmax(fabs(a), fabs(b)) ? "*" : " ";
}

static void
compare_line(const char *what, double a, double b, const char *ta,
    const char *tb)
{
	printf("%s %-26s %18s %18s", compare_mark(a, b), what, ta, tb);
	if (isfinite(a) && isfinite(b) && a != 0 && a != b)
		printf("  %+.1f%%", 100.0 * (b - a) / fabs(a));
	putchar('\n');
}

static void
compare_num(const char *what, double a, double b,
    void (*fmt)(double, char *, size_t))
{
	char ta[64], tb[64];

	fmt(a, ta, sizeof(ta));
	fmt(b, tb, sizeof(tb));
	compare_line(what, a, b, ta, tb);
}

static void
compare_print(const rep_run *r)
{
	rep_sums s[2];
	char ta[64], tb[64];

	tool_report_sum(&r[0], &s[0]);
	tool_report_sum(&r[1], &s[1]);
	printf("A: run %" PRId64 " of job '%s' in %s\n", r[0].run.id,
	    r[0].run.job, r[0].path);
	printf("B: run %" PRId64 " of job '%s' in %s\n", r[1].run.id,
	    r[1].run.job, r[1].path);
	printf("\n  %-26s %18s %18s  B vs A\n", "overall", "A", "B");
	compare_num("ranks", (double)r[0].run.world, (double)r[1].run.world,
	    tool_report_num);
	compare_num("layers", r[0].n_layers, r[1].n_layers, tool_report_num);
	compare_num("windows", (double)r[0].n_win, (double)r[1].n_win,
	    tool_report_num);
	compare_num("windows incomplete", (double)s[0].incomplete,
	    (double)s[1].incomplete, tool_report_num);
	compare_num("decisions", (double)s[0].decisions, (double)s[1].decisions,
	    tool_report_num);
	compare_num("decisions with a change", (double)s[0].changed,
	    (double)s[1].changed, tool_report_num);
	compare_num("floats sent", s[0].floats_sent, s[1].floats_sent,
	    com_fmt_count);
	compare_num("floats raw", s[0].floats_raw, s[1].floats_raw,
	    com_fmt_count);
	compare_num("bytes sent", s[0].floats_sent * 4, s[1].floats_sent * 4,
	    com_fmt_bytes);
	compare_num("bytes saved", (s[0].floats_raw - s[0].floats_sent) * 4,
	    (s[1].floats_raw - s[1].floats_sent) * 4, com_fmt_bytes);
	{
		double p[2];

		for (int i = 0; i < 2; i++)
			p[i] = s[i].floats_raw > 0
			    ? 100.0 * (s[i].floats_raw - s[i].floats_sent) /
				s[i].floats_raw
			    : 0;
		snprintf(ta, sizeof(ta), "%.1f%%", p[0]);
		snprintf(tb, sizeof(tb), "%.1f%%", p[1]);
		compare_line("saved of raw", p[0], p[1], ta, tb);
	}
	compare_num("step time, median", s[0].step_med, s[1].step_med,
	    tool_report_dur);
	compare_num("step time, slowest window", s[0].step_max, s[1].step_max,
	    tool_report_dur);
	compare_num("step, windows sent raw", s[0].step_raw_med,
	    s[1].step_raw_med, tool_report_dur);
	compare_num("step, windows compressing", s[0].step_comp_med,
	    s[1].step_comp_med, tool_report_dur);
	compare_num("activations held/step", s[0].act_med, s[1].act_med,
	    com_fmt_bytes);
	{
		double p[2] = { 100 * s[0].accuracy, 100 * s[1].accuracy };

		for (int i = 0; i < 2; i++)
			if (isfinite(p[i]))
				snprintf(i ? tb : ta, sizeof(ta), "%.2f%%",
				    p[i]);
			else
				snprintf(i ? tb : ta, sizeof(ta), "-");
		/* A difference of percentages is in points, not per cent. */
		printf("%s %-26s %18s %18s", compare_mark(p[0], p[1]),
		    "final test accuracy", ta, tb);
		if (isfinite(p[0]) && isfinite(p[1]) && p[0] != p[1])
			printf("  %+.2f pp", p[1] - p[0]);
		putchar('\n');
	}
	compare_num("final test loss", s[0].eval_loss, s[1].eval_loss,
	    tool_report_num);

	printf("\n  %-26s %9s %9s %7s %7s %9s %9s %9s %9s\n",
	    "layer (applied, weighted)", "applied A", "applied B", "last A",
	    "last B", "changes A", "changes B", "windows A", "windows B");
	for (int side = 0; side < 2; side++) {
		for (uint32_t l = 0; l < r[side].n_layers; l++) {
			const char *nm = tool_report_s(&r[side].t[R_LAYERS], l,
			    "name");
			rep_layer_sum ls[2];
			char la[32], lb[32], ca[32], cb[32], wa[32], wb[32];
			int64_t other = -1;
			bool diff;

			for (uint32_t k = 0; k < r[!side].n_layers; k++) {
				if (strcmp(nm,
					tool_report_s(&r[!side].t[R_LAYERS], k,
					    "name")) == 0)
					other = k;
			}
			/* Layers of both are listed from A's side. */
			if (side == 1 && other >= 0)
				continue;
			tool_report_layer(&r[side], l, &ls[side]);
			if (other >= 0) {
				tool_report_layer(&r[!side], (uint32_t)other,
				    &ls[!side]);
			} else {
				printf("* %-26s %s only\n", nm,
				    side == 0 ? "A" : "B");
				continue;
			}
			diff = compare_mark(ls[0].level_tw,
				   ls[1].level_tw)[0] == '*' ||
			    compare_mark(ls[0].level_last,
				ls[1].level_last)[0] == '*' ||
			    ls[0].changes != ls[1].changes;
			tool_report_num(ls[0].level_tw, ta, sizeof(ta));
			tool_report_num(ls[1].level_tw, tb, sizeof(tb));
			tool_report_num(ls[0].level_last, la, sizeof(la));
			tool_report_num(ls[1].level_last, lb, sizeof(lb));
			snprintf(ca, sizeof(ca), "%" PRIu64, ls[0].changes);
			snprintf(cb, sizeof(cb), "%" PRIu64, ls[1].changes);
			snprintf(wa, sizeof(wa), "%" PRIu64, ls[0].windows);
			snprintf(wb, sizeof(wb), "%" PRIu64, ls[1].windows);
			printf("%s %-26s %9s %9s %7s %7s %9s %9s %9s %9s\n",
			    diff ? "*" : " ", nm, ta, tb, la, lb, ca, cb, wa,
			    wb);
		}
	}
	for (int side = 0; side < 2; side++)
		if (r[side].applied_missing > 0)
			printf("note: %c: %" PRIu64 " of %" PRIu64
			       " layer windows recorded no applied level (a "
			       "history or agents older than it): the level "
			       "decided stands in for them\n",
			    side == 0 ? 'A' : 'B', r[side].applied_missing,
			    r[side].level_rows);
}

int
tool_report_compare_main(int argc, char **argv)
{
	compare_opts o = { 0 };
	const char *file[2];
	char fbuf[2][4096];
	int64_t id[2] = { TOOL_HDB_NONE, TOOL_HDB_NONE };
	bool named[2] = { false, false };
	rep_run r[2];
	int next, rc;

	if ((rc = tool_args_parse(&compare_cmd, argc, argv, &o, &next)) >= 0)
		return rc;
	for (int i = 0; i < o.n_run; i++) {
		file[i] = NULL;
		if (compare_split(o.run[i], &file[i], fbuf[i], sizeof(fbuf[i]),
			&id[i]) != 0)
			return 2;
		named[i] = file[i] != NULL;
	}
	if (named[0] || named[1]) {
		if (o.n_db > 0) {
			fprintf(stderr,
			    "bellows history compare: --run FILE:ID names the "
			    "database; give it without --db\n");
			return 2;
		}
		if (o.n_run != 2 || !named[0] || !named[1]) {
			fprintf(stderr,
			    "bellows history compare: give both runs as "
			    "FILE:ID, or both as IDs with --db\n");
			return 2;
		}
	} else if (o.n_db == 2) {
		if (o.n_run == 1) {
			fprintf(stderr,
			    "bellows history compare: two --db and one --run: "
			    "which database is run %s in? Give two --run (one "
			    "per --db, in order) or none (each one's "
			    "latest)\n",
			    o.run[0]);
			return 2;
		}
		file[0] = o.db[0];
		file[1] = o.db[1];
	} else {
		if (o.n_run != 2) {
			fprintf(stderr,
			    "bellows history compare: two runs needed: --run A "
			    "--run B (one --db or none), or --db A.db --db "
			    "B.db\n");
			tool_report_compare_usage(stderr);
			return 2;
		}
		file[0] = file[1] = o.n_db == 1 ? o.db[0]
						: TOOL_HISTORY_DEFAULT_DB;
	}
	if (tool_report_run_load("history compare", file[0], id[0], o.job, true,
		&r[0]) != 0)
		return 1;
	if (tool_report_run_load("history compare", file[1], id[1], o.job, true,
		&r[1]) != 0) {
		tool_report_run_fini(&r[0]);
		return 1;
	}
	if (r[0].run.id == r[1].run.id && strcmp(file[0], file[1]) == 0)
		fprintf(stderr,
		    "bellows history compare: A and B are the same run "
		    "(%s, run %" PRId64 ")\n",
		    file[0], r[0].run.id);
	compare_print(r);
	rc = fflush(stdout) != 0 || ferror(stdout) ? 1 : 0;
	if (rc != 0)
		fprintf(stderr,
		    "bellows history compare: cannot write the output\n");
	tool_report_run_fini(&r[0]);
	tool_report_run_fini(&r[1]);
	return rc;
}
